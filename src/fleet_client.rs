//! A fleet member's client: kube-rs's configuration from the kubeconfig that
//! [`crate::fleet::access`] builds for it, and the `kube::Client` built from that, which is
//! where an access provider's exec plugin runs. `fleet/` decides how a member is reached;
//! this is the shells' side (the controller's inventory, the live commands' `--fleet`).
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

use kube::config::Kubeconfig;

use crate::fleet::access::AccessError;
use crate::fleet::profile::ClusterProfile;

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
    use crate::fleet::access::tests::{example, profile};
    use crate::fleet::access::{ProviderFile, exec_kubeconfig};

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
}
