//! How fleet mode reaches a member cluster: a kubeconfig built from its ClusterProfile.
//!
//! In: a [`ClusterProfile`], the operator's access-provider file ([`ProviderFile`], the
//! format of the Cluster Inventory API's access library and KEP-5339 "ClusterProfile
//! credentials plugins": `providers: [{name, execConfig: {apiVersion, command, args, env,
//! provideClusterInfo}, profileSourcedCLIArgsPolicy, profileSourcedEnvVarsPolicy}]`), and
//! for the fallback the hub's Secrets. Out: a [`kube::config::Kubeconfig`] with one
//! cluster, one user and one context, all named after the profile (`namespace/name`).
//!
//! **Access provider** ([`exec_kubeconfig`]): the first provider of the file, in the
//! file's order, that the profile offers in `status.accessProviders` (or in the deprecated
//! `status.credentialProviders`; `accessProviders` wins on a name in both) gives the exec
//! plugin; the profile's entry gives the cluster. What the profile may say is limited:
//! the command, its base arguments and environment come only from the operator's file,
//! never from the profile. The profile adds to them only through the two reserved
//! extensions, and only when the provider's policy lets it:
//! `clusterprofiles.multicluster.x-k8s.io/exec/additional-args` (a list of strings,
//! appended with `profileSourcedCLIArgsPolicy: Append`; note that the published CRD types
//! `extension` as an object, so the API server refuses a list there) and
//! `.../exec/additional-envs` (a string map; `AppendIfNotExists`: the file's value wins,
//! `Replace`: the profile's wins). The plugin always runs non-interactively.
//!
//! From the profile's cluster, the kubeconfig keeps `server`, `certificate-authority-data`,
//! `tls-server-name`, `insecure-skip-tls-verify`, `proxy-url`, `disable-compression` and
//! `extensions`. It drops `certificate-authority` (a file path on the cluster manager's
//! side, which the hub must not read). `server` must be an absolute http(s) URL and the CA
//! data base64 of PEM certificates, checked here so that a bad profile is named now, not at
//! its first request.
//!
//! What kube-rs does with the exec user (kube-client 4.2, `config::file_loader`,
//! `client::auth` and `client::builder`): the plugin runs when the `kube::Client` is built
//! (more than once: for the TLS identity, the auth layer and the client's expiry), not at
//! the first request, so a refusing plugin fails `Client::try_from`. It runs again only
//! when a token it returned with an `expirationTimestamp` expires; a token without one, or
//! a client certificate (`clientCertificateData`/`clientKeyData`, PEM), is kept for the
//! client's life (`Client::valid_until` says until when for a certificate): a rotated
//! credential needs a new client. The plugin gets the process's environment plus `env`
//! (the file's, then the profile's additional envs), and `KUBERNETES_EXEC_INFO` =
//! `{"apiVersion": <execConfig.apiVersion>, "kind": "ExecCredential", "spec":
//! {"interactive": false, "cluster": ...}}`. With `provideClusterInfo: true`,
//! `spec.cluster` carries `server`, `certificate-authority-data` (base64),
//! `insecure-skip-tls-verify`, `proxy-url`, `tls-server-name` and, as `config`, the
//! `extension` of the `client.authentication.k8s.io/exec` extension; with it false there
//! is no `spec.cluster`. Unlike client-go, kube-rs does not pass `disable-compression` in
//! `spec.cluster` and does not check the `apiVersion` of the plugin's answer. Its error
//! for a failed plugin quotes the command line with that environment and
//! `KUBERNETES_EXEC_INFO`: put no secret in `env` or in the additional envs (name a file
//! instead, as the test plugin does). A `proxy-url` needs kube's proxy features, which
//! gatewright does not enable: such a member's client fails to build.
//!
//! **Kubeconfig Secret** ([`secret_kubeconfig`]), when the file has no provider the profile
//! offers (or the profile offers none): multicluster-runtime's Secret strategy. The
//! Secret lives in the profile's namespace, carries the labels
//! `x-k8s.io/cluster-inventory-consumer: <consumer>` (the consumer's name, gatewright's
//! own by default) and `x-k8s.io/cluster-profile: <profile name>`, and holds the kubeconfig
//! under the key `Config`; exactly one Secret may match. The ClusterProfile itself carries
//! nothing for it. Unlike multicluster-runtime, a Secret's kubeconfig may not run a
//! program (`exec`, `auth-provider`) nor name files on the hub (`certificate-authority`,
//! `client-certificate`, `client-key`, `tokenFile`): whoever may write Secrets in that
//! namespace must not be able to make gatewright run a command or read its own files.

use std::collections::BTreeMap;

use base64::Engine;
use k8s_openapi::api::core::v1::Secret;
use kube::config::{
    AuthInfo, Cluster, Context, ExecConfig, ExecInteractiveMode, Kubeconfig, NamedAuthInfo,
    NamedCluster, NamedContext, NamedExtension,
};
use serde::{Deserialize, Deserializer};

use super::profile::{AccessProvider, ClusterProfile};

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

/// The operator's access-provider file: which exec plugin serves each provider name.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct ProviderFile {
    /// The providers, in the order they are preferred.
    #[serde(default, deserialize_with = "null_as_default")]
    pub providers: Vec<Provider>,
}

/// One provider of the file.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Provider {
    /// The name a ClusterProfile's `status.accessProviders[].name` is matched against.
    pub name: String,
    /// The exec plugin.
    pub exec_config: Option<ExecSpec>,
    /// Whether the profile's additional-args extension is appended to `args`.
    #[serde(default, rename = "profileSourcedCLIArgsPolicy")]
    pub profile_sourced_cli_args_policy: ArgsPolicy,
    /// Whether and how the profile's additional-envs extension reaches `env`.
    #[serde(default)]
    pub profile_sourced_env_vars_policy: EnvsPolicy,
}

/// `execConfig` of a provider: a client-go exec config as JSON.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExecSpec {
    /// The ExecCredential version the plugin speaks (one of [`EXEC_API_VERSIONS`]).
    #[serde(default)]
    pub api_version: Option<String>,
    /// The program.
    #[serde(default)]
    pub command: Option<String>,
    /// Its arguments.
    #[serde(default, deserialize_with = "null_as_default")]
    pub args: Vec<String>,
    /// Environment variables added to the process's.
    #[serde(default, deserialize_with = "null_as_default")]
    pub env: Vec<EnvVar>,
    /// Hand the plugin the member's cluster in `KUBERNETES_EXEC_INFO`.
    #[serde(default)]
    pub provide_cluster_info: bool,
    /// Shown when the command is missing.
    #[serde(default)]
    pub install_hint: Option<String>,
}

/// One environment variable of an exec config.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
pub struct EnvVar {
    /// Its name.
    pub name: String,
    /// Its value.
    pub value: String,
}

/// `profileSourcedCLIArgsPolicy`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
pub enum ArgsPolicy {
    /// The profile's additional-args extension is not read (also the empty string).
    #[default]
    #[serde(alias = "")]
    Ignore,
    /// Appended after the file's `args`.
    Append,
}

/// `profileSourcedEnvVarsPolicy`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
pub enum EnvsPolicy {
    /// The profile's additional-envs extension is not read (also the empty string).
    #[default]
    #[serde(alias = "")]
    Ignore,
    /// Added where the file's `env` has no variable of that name.
    AppendIfNotExists,
    /// Added, replacing the file's value of a variable of the same name.
    Replace,
}

fn null_as_default<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de> + Default,
{
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

impl ProviderFile {
    /// Parses the file (JSON, as upstream writes it, or YAML) and checks it: every
    /// provider has a unique name and an exec config with a command and a known
    /// `apiVersion`.
    ///
    /// # Errors
    /// [`AccessError::ProviderFile`], saying what is wrong.
    pub fn parse(text: &str) -> Result<Self, AccessError> {
        let file: Self =
            serde_saphyr::from_str(text).map_err(|e| AccessError::ProviderFile(e.to_string()))?;
        let mut seen = std::collections::BTreeSet::new();
        for p in &file.providers {
            let bad =
                |what: &str| AccessError::ProviderFile(format!("provider {:?}: {what}", p.name));
            if p.name.is_empty() {
                return Err(AccessError::ProviderFile("a provider has no name".into()));
            }
            if !seen.insert(p.name.as_str()) {
                return Err(bad("named twice"));
            }
            let exec = p.exec_config.as_ref().ok_or_else(|| bad("no execConfig"))?;
            if exec.command.as_deref().unwrap_or_default().is_empty() {
                return Err(bad("execConfig has no command"));
            }
            match exec.api_version.as_deref() {
                Some(v) if EXEC_API_VERSIONS.contains(&v) => {}
                other => {
                    return Err(bad(&format!(
                        "execConfig.apiVersion is {other:?}, not one of {EXEC_API_VERSIONS:?}"
                    )));
                }
            }
        }
        Ok(file)
    }
}

/// A member's kubeconfig through an access provider.
#[derive(Clone, Debug)]
pub struct MemberAccess {
    /// The access provider chosen.
    pub provider: String,
    /// One cluster, user and context, named after the profile; the user runs the plugin.
    pub kubeconfig: Kubeconfig,
}

/// Where the kubeconfig Secret of a member is looked up.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SecretLookup {
    /// The profile's namespace.
    pub namespace: String,
    /// The labels the Secret must carry.
    pub labels: BTreeMap<String, String>,
}

impl SecretLookup {
    /// The labels as a label selector (`k=v,k=v`), for a list call.
    #[must_use]
    pub fn selector(&self) -> String {
        self.labels
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(",")
    }

    fn matches(&self, s: &Secret) -> bool {
        s.metadata.namespace.as_deref() == Some(self.namespace.as_str())
            && self
                .labels
                .iter()
                .all(|(k, v)| s.metadata.labels.as_ref().and_then(|l| l.get(k)) == Some(v))
    }
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

/// The kubeconfig of a member through the first provider of `file` (in the file's order)
/// that the profile offers: the profile's cluster and a user that runs the provider's
/// exec plugin (see the module docs for what is kept, added and checked).
///
/// # Errors
/// The profile offers no provider, none the file has, or the matched provider's cluster
/// (server, CA data) or a reserved extension its policy reads is bad.
pub fn exec_kubeconfig(
    profile: &ClusterProfile,
    file: &ProviderFile,
) -> Result<MemberAccess, AccessError> {
    let key = profile.key();
    let offered = profile.access_providers();
    if offered.is_empty() {
        return Err(AccessError::NoAccessProviders { profile: key });
    }
    let Some((provider, exec, offer)) = file.providers.iter().find_map(|p| {
        let offer = offered.iter().find(|a| a.name == p.name)?;
        Some((p, p.exec_config.as_ref()?, *offer))
    }) else {
        return Err(AccessError::NoMatchingProvider {
            profile: key,
            offered: offered.iter().map(|a| a.name.clone()).collect(),
            configured: file.providers.iter().map(|p| p.name.clone()).collect(),
        });
    };
    let cluster = member_cluster(&key, offer)?;
    let extension = |name: &str| {
        offer
            .cluster
            .extensions
            .iter()
            .flatten()
            .find(|e| e.name == name)
            .map(|e| &e.extension)
    };
    let bad_extension = |extension: &str, reason: String| AccessError::BadExtension {
        profile: key.clone(),
        provider: provider.name.clone(),
        extension: extension.to_owned(),
        reason,
    };

    let mut args = exec.args.clone();
    if provider.profile_sourced_cli_args_policy == ArgsPolicy::Append
        && let Some(v) = extension(EXTENSION_ADDITIONAL_ARGS)
    {
        let more: Vec<String> = serde_json::from_value(v.clone()).map_err(|e| {
            bad_extension(
                EXTENSION_ADDITIONAL_ARGS,
                format!("not a list of strings: {e}"),
            )
        })?;
        args.extend(more);
    }

    let mut env: Vec<(String, String)> = exec
        .env
        .iter()
        .map(|e| (e.name.clone(), e.value.clone()))
        .collect();
    if provider.profile_sourced_env_vars_policy != EnvsPolicy::Ignore
        && let Some(v) = extension(EXTENSION_ADDITIONAL_ENVS)
    {
        let more: BTreeMap<String, String> = serde_json::from_value(v.clone()).map_err(|e| {
            bad_extension(
                EXTENSION_ADDITIONAL_ENVS,
                format!("not a map of strings: {e}"),
            )
        })?;
        let replace = provider.profile_sourced_env_vars_policy == EnvsPolicy::Replace;
        for (name, value) in more {
            match env.iter_mut().find(|(n, _)| *n == name) {
                Some(slot) if replace => slot.1 = value,
                Some(_) => {}
                None => env.push((name, value)),
            }
        }
    }

    let exec_config = ExecConfig {
        api_version: exec.api_version.clone(),
        command: exec.command.clone(),
        args: Some(args),
        env: Some(
            env.into_iter()
                .map(|(name, value)| {
                    [("name".to_owned(), name), ("value".to_owned(), value)]
                        .into_iter()
                        .collect()
                })
                .collect(),
        ),
        interactive_mode: Some(ExecInteractiveMode::Never),
        provide_cluster_info: exec.provide_cluster_info,
        install_hint: exec.install_hint.clone(),
        ..ExecConfig::default()
    };
    let user = AuthInfo {
        exec: Some(exec_config),
        ..AuthInfo::default()
    };
    Ok(MemberAccess {
        provider: provider.name.clone(),
        kubeconfig: single(&key, cluster, user),
    })
}

/// The cluster of a kubeconfig from a profile's access provider: the fields kept (module
/// docs), checked.
fn member_cluster(profile: &str, offer: &AccessProvider) -> Result<Cluster, AccessError> {
    let c = &offer.cluster;
    let provider = offer.name.clone();
    let server = match c.server.as_deref() {
        None | Some("") => {
            return Err(AccessError::MissingServer {
                profile: profile.to_owned(),
                provider,
            });
        }
        Some(s) => s,
    };
    let ok_url = server
        .parse::<http::Uri>()
        .ok()
        .is_some_and(|u| matches!(u.scheme_str(), Some("https" | "http")) && u.host().is_some());
    if !ok_url {
        return Err(AccessError::BadServer {
            profile: profile.to_owned(),
            provider,
            server: server.to_owned(),
        });
    }
    if let Some(data) = &c.certificate_authority_data {
        check_ca_data(data).map_err(|reason| AccessError::BadCaData {
            profile: profile.to_owned(),
            provider: provider.clone(),
            reason,
        })?;
    }
    Ok(Cluster {
        server: Some(server.to_owned()),
        insecure_skip_tls_verify: c.insecure_skip_tls_verify,
        certificate_authority: None,
        certificate_authority_data: c.certificate_authority_data.clone(),
        proxy_url: c.proxy_url.clone(),
        disable_compression: c.disable_compression,
        tls_server_name: c.tls_server_name.clone(),
        extensions: c.extensions.as_ref().map(|e| {
            e.iter()
                .map(|x| NamedExtension {
                    name: x.name.clone(),
                    extension: x.extension.clone(),
                })
                .collect()
        }),
        other: BTreeMap::new(),
    })
}

/// base64 (standard alphabet) of at least one PEM certificate.
fn check_ca_data(data: &str) -> Result<(), String> {
    let pem = base64::engine::general_purpose::STANDARD
        .decode(data.trim())
        .map_err(|e| format!("not base64: {e}"))?;
    let text = String::from_utf8_lossy(&pem);
    if text.contains("-----BEGIN CERTIFICATE-----") && text.contains("-----END CERTIFICATE-----") {
        Ok(())
    } else {
        Err("no PEM certificate in it".into())
    }
}

fn single(name: &str, cluster: Cluster, user: AuthInfo) -> Kubeconfig {
    Kubeconfig {
        api_version: Some("v1".into()),
        kind: Some("Config".into()),
        clusters: vec![NamedCluster {
            name: name.to_owned(),
            cluster: Some(cluster),
            other: BTreeMap::new(),
        }],
        auth_infos: vec![NamedAuthInfo {
            name: name.to_owned(),
            auth_info: Some(user),
            other: BTreeMap::new(),
        }],
        contexts: vec![NamedContext {
            name: name.to_owned(),
            context: Some(Context {
                cluster: name.to_owned(),
                user: Some(name.to_owned()),
                ..Context::default()
            }),
            other: BTreeMap::new(),
        }],
        current_context: Some(name.to_owned()),
        ..Kubeconfig::default()
    }
}

/// Where the member's kubeconfig Secret is for `consumer`: the profile's namespace, and
/// the labels [`LABEL_INVENTORY_CONSUMER`]` = consumer`, [`LABEL_CLUSTER_PROFILE`]` =
/// <profile name>`.
#[must_use]
pub fn secret_lookup(profile: &ClusterProfile, consumer: &str) -> SecretLookup {
    SecretLookup {
        namespace: profile.namespace.clone(),
        labels: [
            (LABEL_INVENTORY_CONSUMER.to_owned(), consumer.to_owned()),
            (LABEL_CLUSTER_PROFILE.to_owned(), profile.name.clone()),
        ]
        .into_iter()
        .collect(),
    }
}

/// The member's kubeconfig from its Secret: of `secrets` (a list of the hub's, any
/// namespace), the one [`secret_lookup`] matches, its `data.Config` parsed and checked
/// (module docs: no exec, auth-provider or file paths).
///
/// # Errors
/// No Secret or more than one matches, the key is missing, the kubeconfig does not parse
/// or uses a refused field.
pub fn secret_kubeconfig(
    profile: &ClusterProfile,
    consumer: &str,
    secrets: &[Secret],
) -> Result<Kubeconfig, AccessError> {
    let key = profile.key();
    let lookup = secret_lookup(profile, consumer);
    let found: Vec<&Secret> = secrets.iter().filter(|s| lookup.matches(s)).collect();
    let secret = match found.as_slice() {
        [] => {
            return Err(AccessError::NoSecret {
                profile: key,
                selector: lookup.selector(),
                namespace: lookup.namespace,
            });
        }
        [one] => *one,
        many => {
            let mut names: Vec<String> = many
                .iter()
                .map(|s| s.metadata.name.clone().unwrap_or_default())
                .collect();
            names.sort();
            return Err(AccessError::SecretAmbiguous {
                profile: key,
                selector: lookup.selector(),
                names,
            });
        }
    };
    let secret_name = format!(
        "{}/{}",
        lookup.namespace,
        secret.metadata.name.as_deref().unwrap_or_default()
    );
    let bad = |reason: String| AccessError::BadSecret {
        profile: key.clone(),
        secret: secret_name.clone(),
        reason,
    };
    let data = secret
        .data
        .as_ref()
        .and_then(|d| d.get(SECRET_KEY_KUBECONFIG))
        .map(|b| b.0.clone())
        .or_else(|| {
            secret
                .string_data
                .as_ref()
                .and_then(|d| d.get(SECRET_KEY_KUBECONFIG))
                .map(|s| s.clone().into_bytes())
        })
        .ok_or_else(|| bad(format!("no data.{SECRET_KEY_KUBECONFIG}")))?;
    let text = String::from_utf8(data)
        .map_err(|_| bad(format!("data.{SECRET_KEY_KUBECONFIG} is not UTF-8")))?;
    let kc = Kubeconfig::from_yaml(&text)
        .map_err(|e| bad(format!("data.{SECRET_KEY_KUBECONFIG}: {e}")))?;
    if let Some(what) = refused_field(&kc) {
        return Err(AccessError::UnsafeSecret {
            profile: key,
            secret: secret_name,
            what,
        });
    }
    Ok(kc)
}

/// The first field of `kc` a Secret's kubeconfig may not use.
fn refused_field(kc: &Kubeconfig) -> Option<String> {
    for c in &kc.clusters {
        if c.cluster
            .as_ref()
            .is_some_and(|c| c.certificate_authority.is_some())
        {
            return Some(format!(
                "clusters[{}].cluster.certificate-authority",
                c.name
            ));
        }
    }
    for u in &kc.auth_infos {
        let Some(a) = &u.auth_info else { continue };
        let fields = [
            ("exec", a.exec.is_some()),
            ("auth-provider", a.auth_provider.is_some()),
            ("tokenFile", a.token_file.is_some()),
            ("client-certificate", a.client_certificate.is_some()),
            ("client-key", a.client_key.is_some()),
        ];
        if let Some((f, _)) = fields.iter().find(|(_, set)| *set) {
            return Some(format!("users[{}].user.{f}", u.name));
        }
    }
    None
}

/// kube-rs's client configuration from a member's kubeconfig (its current context).
/// Reads no file for the kubeconfigs built here (they hold no paths); the exec plugin
/// runs when a `kube::Client` is built from the result.
///
/// # Errors
/// kube-rs refuses the kubeconfig (a context or cluster missing, a CA it cannot parse).
pub async fn client_config(
    profile: &ClusterProfile,
    kubeconfig: Kubeconfig,
) -> Result<kube::Config, AccessError> {
    kube::Config::from_custom_kubeconfig(kubeconfig, &kube::config::KubeConfigOptions::default())
        .await
        .map_err(|source| AccessError::Config {
            profile: profile.key(),
            source,
        })
}

/// A client for a member from its kubeconfig; with `who`, its requests name it in their
/// user agent (the CLI); without, the caller's client stack does (the controller's names
/// the replica: what the member's audit log records of each write). An exec plugin runs
/// while the client is built (synchronously, in kube), so that happens on a blocking
/// thread.
///
/// # Errors
/// The kubeconfig is refused, or the client cannot be built from it (said with the
/// profile named).
pub async fn member_client(
    p: &ClusterProfile,
    kubeconfig: Kubeconfig,
    who: Option<&str>,
) -> Result<kube::Client, String> {
    let mut config = client_config(p, kubeconfig)
        .await
        .map_err(|e| e.to_string())?;
    if let Some(who) = who {
        crate::identity::identify(&mut config, Some(who));
    }
    let key = p.key();
    tokio::task::spawn_blocking(move || kube::Client::try_from(config))
        .await
        .map_err(|e| format!("ClusterProfile {key}: building its client failed: {e}"))?
        .map_err(|e| format!("ClusterProfile {key}: its client cannot be built: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    const EXAMPLES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fleet/examples");

    fn example(file: &str) -> String {
        std::fs::read_to_string(format!("{EXAMPLES}/{file}")).unwrap()
    }

    fn profile(file: &str) -> ClusterProfile {
        let v: serde_json::Value = serde_saphyr::from_str(&example(file)).unwrap();
        ClusterProfile::from_value(&v).unwrap()
    }

    fn with_status(status: serde_json::Value) -> ClusterProfile {
        ClusterProfile::from_value(&serde_json::json!({
            "metadata": {"name": "m1", "namespace": "fleet"},
            "spec": {"clusterManager": {"name": "demo"}},
            "status": status,
        }))
        .unwrap()
    }

    fn exec_of(kc: &Kubeconfig) -> &ExecConfig {
        kc.auth_infos[0]
            .auth_info
            .as_ref()
            .unwrap()
            .exec
            .as_ref()
            .unwrap()
    }

    fn env_of(e: &ExecConfig) -> Vec<(String, String)> {
        e.env
            .iter()
            .flatten()
            .map(|m| (m["name"].clone(), m["value"].clone()))
            .collect()
    }

    #[test]
    fn upstream_provider_files_parse() {
        for f in [
            "provider-secretreader.json",
            "provider-kubeconfig-secretreader.json",
        ] {
            let file = ProviderFile::parse(&example(f)).unwrap();
            assert_eq!(file.providers.len(), 1, "{f}");
            let exec = file.providers[0].exec_config.as_ref().unwrap();
            assert!(exec.provide_cluster_info && exec.args.is_empty() && exec.env.is_empty());
            assert_eq!(exec.api_version.as_deref(), Some(EXEC_API_VERSIONS[0]));
        }
    }

    #[test]
    fn provider_matched_builds_an_exec_kubeconfig() {
        let p = profile("profile-secretreader.yaml");
        let file = ProviderFile::parse(&example("provider-secretreader.json")).unwrap();
        let access = exec_kubeconfig(&p, &file).unwrap();
        assert_eq!(access.provider, "secretreader");
        let kc = &access.kubeconfig;
        assert_eq!(kc.current_context.as_deref(), Some("fleet/spoke-1"));
        let c = kc.clusters[0].cluster.as_ref().unwrap();
        assert_eq!(c.server.as_deref(), Some("https://spoke-1.example:6443"));
        assert!(c.certificate_authority_data.is_some());
        let ext = c.extensions.as_ref().unwrap();
        assert_eq!(
            (ext[0].name.as_str(), &ext[0].extension["clusterName"]),
            (EXEC_EXTENSION, &serde_json::json!("spoke-1"))
        );
        let e = exec_of(kc);
        assert_eq!(e.command.as_deref(), Some("./bin/secretreader-plugin"));
        assert!(e.provide_cluster_info);
        assert_eq!(e.interactive_mode, Some(ExecInteractiveMode::Never));
        assert!(matches!(
            route(&p, &file, DEFAULT_CONSUMER).unwrap(),
            Route::Provider(_)
        ));
    }

    #[tokio::test]
    async fn kube_hands_the_plugin_the_cluster_when_asked() {
        let p = profile("profile-secretreader.yaml");
        let file = ProviderFile::parse(&example("provider-secretreader.json")).unwrap();
        let kc = exec_kubeconfig(&p, &file).unwrap().kubeconfig;
        let cfg = client_config(&p, kc.clone()).await.unwrap();
        assert_eq!(cfg.cluster_url.to_string(), "https://spoke-1.example:6443/");
        assert_eq!(cfg.root_cert.as_ref().map(Vec::len), Some(1));
        let cluster = cfg
            .auth_info
            .exec
            .as_ref()
            .unwrap()
            .cluster
            .as_ref()
            .unwrap();
        assert_eq!(
            cluster.server.as_deref(),
            Some("https://spoke-1.example:6443")
        );
        assert_eq!(cluster.config.as_ref().unwrap()["clusterName"], "spoke-1");

        // Without provideClusterInfo, kube-rs hands it nothing.
        let no_info = ProviderFile::parse(&example("provider-secretreader.json").replace(
            "\"provideClusterInfo\": true",
            "\"provideClusterInfo\": false",
        ))
        .unwrap();
        let kc = exec_kubeconfig(&p, &no_info).unwrap().kubeconfig;
        let cfg = client_config(&p, kc).await.unwrap();
        assert!(cfg.auth_info.exec.as_ref().unwrap().cluster.is_none());
    }

    #[test]
    fn first_provider_of_the_file_wins() {
        let p = with_status(serde_json::json!({"accessProviders": [
            {"name": "a", "cluster": {"server": "https://a.example"}},
            {"name": "b", "cluster": {"server": "https://b.example"}}
        ]}));
        let file = ProviderFile::parse(
            r#"{"providers": [
                {"name": "z", "execConfig": {"apiVersion": "client.authentication.k8s.io/v1", "command": "z"}},
                {"name": "b", "execConfig": {"apiVersion": "client.authentication.k8s.io/v1", "command": "b"}},
                {"name": "a", "execConfig": {"apiVersion": "client.authentication.k8s.io/v1", "command": "a"}}
            ]}"#,
        )
        .unwrap();
        let access = exec_kubeconfig(&p, &file).unwrap();
        assert_eq!(access.provider, "b");
        assert_eq!(
            access.kubeconfig.clusters[0]
                .cluster
                .as_ref()
                .unwrap()
                .server
                .as_deref(),
            Some("https://b.example")
        );
    }

    #[test]
    fn no_provider_matches_falls_back_to_the_secret() {
        let p = profile("profile-kubeconfig-secretreader.yaml");
        let file = ProviderFile::parse(&example("provider-secretreader.json")).unwrap();
        let e = exec_kubeconfig(&p, &file).unwrap_err();
        assert_eq!(
            e.to_string(),
            "ClusterProfile fleet/spoke-2 offers access providers [kubeconfig-secretreader], none of which the provider file configures ([secretreader])"
        );
        let Route::Secret(lookup) = route(&p, &file, DEFAULT_CONSUMER).unwrap() else {
            panic!("expected the Secret route");
        };
        assert_eq!(lookup.namespace, "fleet");
        assert_eq!(
            lookup.selector(),
            "x-k8s.io/cluster-inventory-consumer=gatewright,x-k8s.io/cluster-profile=spoke-2"
        );
    }

    #[test]
    fn no_access_providers_falls_back_to_the_secret() {
        let p = profile("profile-status.yaml");
        let file = ProviderFile::parse(&example("provider-secretreader.json")).unwrap();
        let e = exec_kubeconfig(&p, &file).unwrap_err();
        assert_eq!(
            e.to_string(),
            "ClusterProfile cluster-b lists no access providers in its status"
        );
        assert!(
            matches!(route(&p, &file, "other").unwrap(), Route::Secret(l) if l.labels[LABEL_INVENTORY_CONSUMER] == "other")
        );
    }

    #[test]
    fn bad_ca_data_is_named() {
        let file = ProviderFile::parse(&example("provider-secretreader.json")).unwrap();
        for (data, reason) in [
            ("not base64!", "not base64"),
            ("aGVsbG8gd29ybGQ=", "no PEM certificate in it"),
        ] {
            let p = with_status(serde_json::json!({"accessProviders": [
                {"name": "secretreader", "cluster": {"server": "https://m1.example", "certificate-authority-data": data}}
            ]}));
            let e = exec_kubeconfig(&p, &file).unwrap_err();
            assert!(matches!(e, AccessError::BadCaData { .. }), "{e}");
            let msg = e.to_string();
            assert!(msg.starts_with("ClusterProfile fleet/m1: access provider secretreader has bad cluster.certificate-authority-data: "), "{msg}");
            assert!(msg.contains(reason), "{msg}");
            // A bad provider's cluster is an error, not a reason to try the Secret.
            assert!(route(&p, &file, DEFAULT_CONSUMER).is_err());
        }
    }

    #[test]
    fn server_missing_or_not_a_url_is_named() {
        let file = ProviderFile::parse(&example("provider-secretreader.json")).unwrap();
        let p = with_status(serde_json::json!({"accessProviders": [{"name": "secretreader"}]}));
        assert_eq!(
            exec_kubeconfig(&p, &file).unwrap_err().to_string(),
            "ClusterProfile fleet/m1: access provider secretreader has no cluster.server"
        );
        for server in ["spoke:6443", "ftp://spoke", "https://"] {
            let p = with_status(
                serde_json::json!({"accessProviders": [{"name": "secretreader", "cluster": {"server": server}}]}),
            );
            assert!(
                matches!(
                    exec_kubeconfig(&p, &file).unwrap_err(),
                    AccessError::BadServer { .. }
                ),
                "{server}"
            );
        }
    }

    #[test]
    fn certificate_authority_path_is_dropped() {
        let file = ProviderFile::parse(&example("provider-secretreader.json")).unwrap();
        let p = with_status(
            serde_json::json!({"accessProviders": [{"name": "secretreader",
            "cluster": {"server": "https://m1.example", "certificate-authority": "/etc/shadow", "tls-server-name": "m1", "insecure-skip-tls-verify": false}}]}),
        );
        let kc = exec_kubeconfig(&p, &file).unwrap().kubeconfig;
        let c = kc.clusters[0].cluster.as_ref().unwrap();
        assert_eq!(c.certificate_authority, None);
        assert_eq!(c.tls_server_name.as_deref(), Some("m1"));
        assert_eq!(c.insecure_skip_tls_verify, Some(false));
    }

    fn extension_profile() -> ClusterProfile {
        with_status(
            serde_json::json!({"accessProviders": [{"name": "p", "cluster": {
            "server": "https://m1.example",
            "extensions": [
                {"name": EXTENSION_ADDITIONAL_ARGS, "extension": ["--audience", "member"]},
                {"name": EXTENSION_ADDITIONAL_ENVS, "extension": {"CLIENT_ID": "from-profile", "TENANT_ID": "t"}}
            ]}}]}),
        )
    }

    fn policy_file(args: &str, envs: &str) -> ProviderFile {
        ProviderFile::parse(&format!(
            r#"{{"providers": [{{"name": "p", "profileSourcedCLIArgsPolicy": "{args}", "profileSourcedEnvVarsPolicy": "{envs}",
                "execConfig": {{"apiVersion": "client.authentication.k8s.io/v1", "command": "plugin", "args": ["--base"],
                "env": [{{"name": "CLIENT_ID", "value": "from-file"}}]}}}}]}}"#
        ))
        .unwrap()
    }

    #[test]
    fn profile_sourced_args_and_envs_follow_the_policies() {
        let p = extension_profile();
        let own = |k: &str, v: &str| (k.to_owned(), v.to_owned());

        let kc = exec_kubeconfig(&p, &policy_file("", ""))
            .unwrap()
            .kubeconfig;
        let e = exec_of(&kc);
        assert_eq!(e.args.as_deref(), Some(&["--base".to_owned()][..]));
        assert_eq!(env_of(e), [own("CLIENT_ID", "from-file")]);

        let kc = exec_kubeconfig(&p, &policy_file("Append", "AppendIfNotExists"))
            .unwrap()
            .kubeconfig;
        let e = exec_of(&kc);
        assert_eq!(e.args.clone().unwrap(), ["--base", "--audience", "member"]);
        assert_eq!(
            env_of(e),
            [own("CLIENT_ID", "from-file"), own("TENANT_ID", "t")]
        );

        let kc = exec_kubeconfig(&p, &policy_file("Ignore", "Replace"))
            .unwrap()
            .kubeconfig;
        let e = exec_of(&kc);
        assert_eq!(e.args.clone().unwrap(), ["--base"]);
        assert_eq!(
            env_of(e),
            [own("CLIENT_ID", "from-profile"), own("TENANT_ID", "t")]
        );
    }

    #[test]
    fn malformed_extension_is_an_error_only_when_read() {
        let p = with_status(
            serde_json::json!({"accessProviders": [{"name": "p", "cluster": {
            "server": "https://m1.example",
            "extensions": [{"name": EXTENSION_ADDITIONAL_ENVS, "extension": {"N": 1}}]}}]}),
        );
        assert!(exec_kubeconfig(&p, &policy_file("", "Ignore")).is_ok());
        let e = exec_kubeconfig(&p, &policy_file("", "Replace")).unwrap_err();
        assert!(e.to_string().starts_with(&format!("ClusterProfile fleet/m1: access provider p has a bad extension {EXTENSION_ADDITIONAL_ENVS}: not a map of strings")), "{e}");
    }

    #[test]
    fn provider_file_refusals() {
        for (text, want) in [
            (
                r#"{"providers": [{"name": "a"}]}"#,
                "provider \"a\": no execConfig",
            ),
            (
                r#"{"providers": [{"name": "a", "execConfig": {"apiVersion": "client.authentication.k8s.io/v1"}}]}"#,
                "provider \"a\": execConfig has no command",
            ),
            (
                r#"{"providers": [{"name": "a", "execConfig": {"command": "x"}}]}"#,
                "execConfig.apiVersion is None",
            ),
            (
                r#"{"providers": [{"name": "a", "execConfig": {"apiVersion": "client.authentication.k8s.io/v1", "command": "x"}},
                              {"name": "a", "execConfig": {"apiVersion": "client.authentication.k8s.io/v1", "command": "y"}}]}"#,
                "provider \"a\": named twice",
            ),
            (
                r#"{"providers": [{"name": "a", "profileSourcedCLIArgsPolicy": "Prepend", "execConfig": {"apiVersion": "client.authentication.k8s.io/v1", "command": "x"}}]}"#,
                "Prepend",
            ),
        ] {
            let e = ProviderFile::parse(text).unwrap_err().to_string();
            assert!(
                e.starts_with("access provider file: ") && e.contains(want),
                "{e}"
            );
        }
        assert!(
            ProviderFile::parse("providers: null")
                .unwrap()
                .providers
                .is_empty()
        );
    }

    fn secret(name: &str, ns: &str, labels: &[(&str, &str)], kubeconfig: &str) -> Secret {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": name, "namespace": ns,
                "labels": labels.iter().map(|(k, v)| ((*k).to_owned(), serde_json::json!(v))).collect::<serde_json::Map<_, _>>()},
            "data": {SECRET_KEY_KUBECONFIG: base64::engine::general_purpose::STANDARD.encode(kubeconfig)},
        }))
        .unwrap()
    }

    fn example_secret() -> Secret {
        // The example as the API server returns it: stringData moved into data.
        let mut s: Secret = serde_saphyr::from_str(&example("secret-kubeconfig.yaml")).unwrap();
        let text = s
            .string_data
            .take()
            .unwrap()
            .remove(SECRET_KEY_KUBECONFIG)
            .unwrap();
        s.data = Some(
            [(
                SECRET_KEY_KUBECONFIG.to_owned(),
                k8s_openapi::ByteString(text.into_bytes()),
            )]
            .into(),
        );
        s
    }

    #[test]
    fn secret_fallback_reads_the_labelled_secret() {
        let p = profile("profile-secretreader.yaml");
        let labels = [
            (LABEL_INVENTORY_CONSUMER, "gatewright"),
            (LABEL_CLUSTER_PROFILE, "spoke-1"),
        ];
        let others = [
            secret(
                "other-consumer",
                "fleet",
                &[
                    (LABEL_INVENTORY_CONSUMER, "argo"),
                    (LABEL_CLUSTER_PROFILE, "spoke-1"),
                ],
                "x",
            ),
            secret("other-namespace", "elsewhere", &labels, "x"),
        ];
        let mut all = others.to_vec();
        all.push(example_secret());
        let kc = secret_kubeconfig(&p, DEFAULT_CONSUMER, &all).unwrap();
        assert_eq!(kc.current_context.as_deref(), Some("spoke-1"));
        assert_eq!(
            kc.clusters[0].cluster.as_ref().unwrap().server.as_deref(),
            Some("https://spoke-1.example:6443")
        );

        let e = secret_kubeconfig(&p, DEFAULT_CONSUMER, &others).unwrap_err();
        assert_eq!(
            e.to_string(),
            "ClusterProfile fleet/spoke-1: no Secret in namespace fleet has the labels x-k8s.io/cluster-inventory-consumer=gatewright,x-k8s.io/cluster-profile=spoke-1"
        );

        all.push(secret("second", "fleet", &labels, "x"));
        let e = secret_kubeconfig(&p, DEFAULT_CONSUMER, &all).unwrap_err();
        assert!(
            matches!(&e, AccessError::SecretAmbiguous { names, .. } if names == &["second", "spoke-1-kubeconfig"]),
            "{e}"
        );
    }

    #[test]
    fn secret_kubeconfig_may_not_run_or_read() {
        let p = profile("profile-secretreader.yaml");
        let labels = [
            (LABEL_INVENTORY_CONSUMER, "gatewright"),
            (LABEL_CLUSTER_PROFILE, "spoke-1"),
        ];
        let base = "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: https://m\n";
        for (user, what) in [
            (
                "    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      command: sh\n",
                "users[u].user.exec",
            ),
            (
                "    tokenFile: /var/run/secrets/kubernetes.io/serviceaccount/token\n",
                "users[u].user.tokenFile",
            ),
            ("    client-key: /etc/key.pem\n", "users[u].user.client-key"),
        ] {
            let text = format!("{base}users:\n- name: u\n  user:\n{user}");
            let e = secret_kubeconfig(
                &p,
                DEFAULT_CONSUMER,
                &[secret("s", "fleet", &labels, &text)],
            )
            .unwrap_err();
            assert!(
                matches!(&e, AccessError::UnsafeSecret { what: w, .. } if w == what),
                "{e}"
            );
        }
        let text = base.replace(
            "server: https://m",
            "server: https://m\n    certificate-authority: /etc/ca.pem",
        );
        let e = secret_kubeconfig(
            &p,
            DEFAULT_CONSUMER,
            &[secret("s", "fleet", &labels, &text)],
        )
        .unwrap_err();
        assert!(
            e.to_string()
                .contains("clusters[c].cluster.certificate-authority"),
            "{e}"
        );

        let e = secret_kubeconfig(
            &p,
            DEFAULT_CONSUMER,
            &[secret("s", "fleet", &labels, "clusters: 3")],
        )
        .unwrap_err();
        assert!(
            e.to_string()
                .starts_with("ClusterProfile fleet/spoke-1: Secret fleet/s: data.Config: "),
            "{e}"
        );
    }
}
