//! How fleet mode reaches a member cluster: a kubeconfig built from its ClusterProfile.
//!
//! In: a [`ClusterProfile`], the operator's access-provider file ([`ProviderFile`], the
//! format of the Cluster Inventory API's access library and KEP-5339 "ClusterProfile
//! credentials plugins": `providers: [{name, execConfig: {apiVersion, command, args, env,
//! provideClusterInfo}, profileSourcedCLIArgsPolicy, profileSourcedEnvVarsPolicy}]`), and
//! for the fallback the hub's Secrets. Out: a [`kube::config::Kubeconfig`] with one
//! cluster, one user and one context, all named after the profile (`namespace/name`).
//!
//! Two ways, tried in this order: an **access provider** ([`exec_kubeconfig`], in
//! `provider.rs`), and the **kubeconfig Secret** ([`secret_kubeconfig`], in `secret.rs`).
//! [`route`] says which one serves a member. What kube-rs does with the exec user, where
//! the plugin runs, is the shell's side (`src/fleet_client.rs`).

mod provider;
mod secret;
#[cfg(test)]
pub(crate) mod tests;

pub use provider::{
    ArgsPolicy, EnvVar, EnvsPolicy, ExecSpec, MemberAccess, Provider, ProviderFile, exec_kubeconfig,
};
pub use secret::{SecretLookup, secret_kubeconfig, secret_lookup};

use super::profile::ClusterProfile;

/// The extension whose `extension` kube-rs hands the exec plugin as
/// `spec.cluster.config` (reserved by the client authentication API).
pub const EXEC_EXTENSION: &str = "client.authentication.k8s.io/exec";
/// KEP-5339's extension with arguments to append to the plugin's (a list of strings).
pub const EXTENSION_ADDITIONAL_ARGS: &str =
    "clusterprofiles.multicluster.x-k8s.io/exec/additional-args";
/// KEP-5339's extension with environment variables for the plugin (a string map).
pub const EXTENSION_ADDITIONAL_ENVS: &str =
    "clusterprofiles.multicluster.x-k8s.io/exec/additional-envs";
/// The ExecCredential versions an exec plugin may speak.
pub const EXEC_API_VERSIONS: [&str; 2] = [
    "client.authentication.k8s.io/v1",
    "client.authentication.k8s.io/v1beta1",
];
/// Label naming the consumer a kubeconfig Secret is for.
pub const LABEL_INVENTORY_CONSUMER: &str = "x-k8s.io/cluster-inventory-consumer";
/// Label naming the ClusterProfile a kubeconfig Secret is for.
pub const LABEL_CLUSTER_PROFILE: &str = "x-k8s.io/cluster-profile";
/// The key of a kubeconfig Secret's data that holds the kubeconfig.
pub const SECRET_KEY_KUBECONFIG: &str = "Config";
/// The consumer name gatewright looks kubeconfig Secrets up by, unless told another.
pub const DEFAULT_CONSUMER: &str = "gatewright";

/// Why a member's kubeconfig cannot be built.
#[derive(Debug, thiserror::Error)]
pub enum AccessError {
    /// The provider file does not parse or breaks a rule.
    #[error("access provider file: {0}")]
    ProviderFile(String),
    /// The profile offers no access provider at all.
    #[error("ClusterProfile {profile} lists no access providers in its status")]
    NoAccessProviders {
        /// `namespace/name`.
        profile: String,
    },
    /// None of the providers the profile offers is in the provider file.
    #[error(
        "ClusterProfile {profile} offers access providers [{}], none of which the provider file configures ([{}])",
        offered.join(", "), configured.join(", ")
    )]
    NoMatchingProvider {
        /// `namespace/name`.
        profile: String,
        /// The provider names the profile offers.
        offered: Vec<String>,
        /// The provider names the file configures.
        configured: Vec<String>,
    },
    /// The provider's cluster has no `server`.
    #[error("ClusterProfile {profile}: access provider {provider} has no cluster.server")]
    MissingServer {
        /// `namespace/name`.
        profile: String,
        /// The access provider.
        provider: String,
    },
    /// The provider's `server` is not an absolute http(s) URL.
    #[error(
        "ClusterProfile {profile}: access provider {provider} has cluster.server {server:?}, not an https:// or http:// URL"
    )]
    BadServer {
        /// `namespace/name`.
        profile: String,
        /// The access provider.
        provider: String,
        /// The value.
        server: String,
    },
    /// `certificate-authority-data` is not base64 of PEM certificates.
    #[error(
        "ClusterProfile {profile}: access provider {provider} has bad cluster.certificate-authority-data: {reason}"
    )]
    BadCaData {
        /// `namespace/name`.
        profile: String,
        /// The access provider.
        provider: String,
        /// What is wrong.
        reason: String,
    },
    /// A reserved extension the provider's policy reads is malformed.
    #[error(
        "ClusterProfile {profile}: access provider {provider} has a bad extension {extension}: {reason}"
    )]
    BadExtension {
        /// `namespace/name`.
        profile: String,
        /// The access provider.
        provider: String,
        /// The extension's name.
        extension: String,
        /// What is wrong.
        reason: String,
    },
    /// No kubeconfig Secret is labelled for the profile.
    #[error(
        "ClusterProfile {profile}: no Secret in namespace {namespace} has the labels {selector}"
    )]
    NoSecret {
        /// `namespace/name`.
        profile: String,
        /// Where we looked.
        namespace: String,
        /// The label selector.
        selector: String,
    },
    /// More than one kubeconfig Secret is labelled for the profile.
    #[error("ClusterProfile {profile}: {} Secrets have the labels {selector} ({}), expected one", names.len(), names.join(", "))]
    SecretAmbiguous {
        /// `namespace/name`.
        profile: String,
        /// The label selector.
        selector: String,
        /// The Secrets' names.
        names: Vec<String>,
    },
    /// The kubeconfig Secret has no kubeconfig, or one that does not parse.
    #[error("ClusterProfile {profile}: Secret {secret}: {reason}")]
    BadSecret {
        /// `namespace/name`.
        profile: String,
        /// `namespace/name` of the Secret.
        secret: String,
        /// What is wrong.
        reason: String,
    },
    /// The kubeconfig Secret would make gatewright run a program or read a local file.
    #[error(
        "ClusterProfile {profile}: Secret {secret}: its kubeconfig uses {what}, which gatewright refuses in a Secret (it would run a program or read a file of the hub's)"
    )]
    UnsafeSecret {
        /// `namespace/name`.
        profile: String,
        /// `namespace/name` of the Secret.
        secret: String,
        /// The refused field.
        what: String,
    },
    /// kube-rs refused the kubeconfig.
    #[error("ClusterProfile {profile}: {source}")]
    Config {
        /// `namespace/name`.
        profile: String,
        /// kube-rs's reason.
        #[source]
        source: kube::config::KubeconfigError,
    },
}

/// How a member is reached.
#[derive(Clone, Debug)]
pub enum Route {
    /// Through an access provider's exec plugin.
    Provider(Box<MemberAccess>),
    /// No provider of the file is offered: the labelled kubeconfig Secret
    /// ([`secret_kubeconfig`] reads it once the shell has listed it).
    Secret(SecretLookup),
}

/// Decides how a member is reached: through the first provider of `file` the profile
/// offers, else through its kubeconfig Secret for `consumer`.
///
/// # Errors
/// The matched provider's cluster or extensions are bad ([`exec_kubeconfig`]).
pub fn route(
    profile: &ClusterProfile,
    file: &ProviderFile,
    consumer: &str,
) -> Result<Route, AccessError> {
    match exec_kubeconfig(profile, file) {
        Ok(access) => Ok(Route::Provider(Box::new(access))),
        Err(AccessError::NoAccessProviders { .. } | AccessError::NoMatchingProvider { .. }) => {
            Ok(Route::Secret(secret_lookup(profile, consumer)))
        }
        Err(e) => Err(e),
    }
}
