//! A member's kubeconfig through an access provider.
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

use std::collections::BTreeMap;

use base64::Engine;
use kube::config::{
    AuthInfo, Cluster, Context, ExecConfig, ExecInteractiveMode, Kubeconfig, NamedAuthInfo,
    NamedCluster, NamedContext, NamedExtension,
};
use serde::{Deserialize, Deserializer};

use super::{AccessError, EXEC_API_VERSIONS, EXTENSION_ADDITIONAL_ARGS, EXTENSION_ADDITIONAL_ENVS};
use crate::fleet::profile::{AccessProvider, ClusterProfile};

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
