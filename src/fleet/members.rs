//! Which members the fleet serves: from the hub's ClusterProfiles (and the kubeconfig
//! Secrets of those reached without an access provider), each member's verdict. The shell
//! (`controller::inventory`) engages a member (a `Cluster` in the `Runner`) while its
//! verdict is [`Verdict::Engage`], replaces it when its kubeconfig changes, and lets it go
//! otherwise. Pure.
//!
//! A member is engaged only while its profile says `ControlPlaneHealthy=True` (as
//! multicluster-runtime's cluster-inventory provider does): a control plane its manager
//! reports unhealthy, or has not judged yet, is not watched or written to. A member whose
//! credentials cannot be built is reported with why, and the others go on.

use k8s_openapi::api::core::v1::Secret;
use kube::config::Kubeconfig;

use super::access::{self, ProviderFile, Route};
use super::profile::{CONDITION_CONTROL_PLANE_HEALTHY, ClusterProfile};

/// What the fleet does with one member.
#[derive(Clone, Debug)]
pub enum Verdict {
    /// Serve it, reached through this kubeconfig (one context, its current one).
    Engage(Box<Kubeconfig>),
    /// Not now: why, in words (the manager has not reported its control plane healthy).
    Wait(String),
    /// Its credentials cannot be built: why.
    Failed(String),
}

impl Verdict {
    /// A short word for the state, for metrics: `engaged`, `waiting`, `failed`.
    #[must_use]
    pub fn state(&self) -> &'static str {
        match self {
            Self::Engage(_) => "engaged",
            Self::Wait(_) => "waiting",
            Self::Failed(_) => "failed",
        }
    }
}

/// The verdict for `profile`: its health first, then how it is reached (the first access
/// provider of `file` it offers, else its kubeconfig Secret for `consumer` among
/// `secrets`).
#[must_use]
pub fn verdict(
    profile: &ClusterProfile,
    file: &ProviderFile,
    consumer: &str,
    secrets: &[Secret],
) -> Verdict {
    if let Err(why) = health(profile) {
        let key = profile.key();
        return Verdict::Wait(match profile.condition(CONDITION_CONTROL_PLANE_HEALTHY) {
            Some(_) => format!("member {key}: {why}"),
            None => format!(
                "member {key} has {why}: its cluster manager writes it in the ClusterProfile's status (kubectl apply drops a status); without one, set it by hand: kubectl patch clusterprofile {} -n {} --subresource=status (docs/fleet.md)",
                profile.name, profile.namespace
            ),
        });
    }
    let kubeconfig = match access::route(profile, file, consumer) {
        Ok(Route::Provider(a)) => Ok(a.kubeconfig),
        Ok(Route::Secret(_)) => access::secret_kubeconfig(profile, consumer, secrets),
        Err(e) => Err(e),
    };
    match kubeconfig {
        Ok(k) => Verdict::Engage(Box::new(k)),
        Err(e) => Verdict::Failed(e.to_string()),
    }
}

/// Whether `profile`'s control plane counts as healthy, and if not why, in words:
/// `ControlPlaneHealthy is False: <reason>: <message>`, or `no ControlPlaneHealthy
/// condition yet` (its status has none: no cluster manager has written it).
///
/// # Errors
/// Not healthy: why.
pub fn health(profile: &ClusterProfile) -> Result<(), String> {
    if profile.control_plane_healthy() == Some(true) {
        return Ok(());
    }
    Err(match profile.condition(CONDITION_CONTROL_PLANE_HEALTHY) {
        Some(c) => format!(
            "{CONDITION_CONTROL_PLANE_HEALTHY} is {}{}",
            c.status,
            [c.reason.as_str(), c.message.as_str()]
                .iter()
                .filter(|s| !s.is_empty())
                .fold(String::new(), |acc, s| acc + ": " + s)
        ),
        None => format!("no {CONDITION_CONTROL_PLANE_HEALTHY} condition yet"),
    })
}

/// A stable fingerprint of a kubeconfig: an engaged member is replaced only when it
/// changes (a new server, CA, or credentials).
#[must_use]
pub fn fingerprint(k: &Kubeconfig) -> String {
    use sha2::{Digest, Sha256};
    let text = serde_json::to_string(k).unwrap_or_default();
    Sha256::digest(text.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn profile(status: serde_json::Value) -> ClusterProfile {
        ClusterProfile::from_value(&json!({
            "metadata": {"name": "m1", "namespace": "fleet"},
            "spec": {"clusterManager": {"name": "test"}},
            "status": status,
        }))
        .unwrap()
    }

    fn healthy(status: &str) -> serde_json::Value {
        json!({"conditions": [{"type": "ControlPlaneHealthy", "status": status, "reason": "Probe",
            "message": "readyz answered", "lastTransitionTime": "2026-01-01T00:00:00Z"}]})
    }

    fn secret(kubeconfig: &str) -> Secret {
        use k8s_openapi::ByteString;
        Secret {
            metadata: kube::api::ObjectMeta {
                name: Some("m1-kubeconfig".into()),
                namespace: Some("fleet".into()),
                labels: Some(
                    [
                        (
                            access::LABEL_INVENTORY_CONSUMER.to_owned(),
                            "gatewright".to_owned(),
                        ),
                        (access::LABEL_CLUSTER_PROFILE.to_owned(), "m1".to_owned()),
                    ]
                    .into_iter()
                    .collect(),
                ),
                ..Default::default()
            },
            data: Some(
                [(
                    access::SECRET_KEY_KUBECONFIG.to_owned(),
                    ByteString(kubeconfig.as_bytes().to_vec()),
                )]
                .into_iter()
                .collect(),
            ),
            ..Default::default()
        }
    }

    const KUBECONFIG: &str = "apiVersion: v1\nkind: Config\nclusters:\n- name: m1\n  cluster: {server: 'https://127.0.0.1:6443', insecure-skip-tls-verify: true}\nusers:\n- name: m1\n  user: {token: t0k3n}\ncontexts:\n- name: m1\n  context: {cluster: m1, user: m1}\ncurrent-context: m1\n";

    #[test]
    fn a_member_is_engaged_only_while_its_control_plane_is_healthy() {
        let file = ProviderFile::default();
        let secrets = [secret(KUBECONFIG)];
        let v = verdict(&profile(healthy("True")), &file, "gatewright", &secrets);
        let Verdict::Engage(k) = &v else {
            panic!("{v:?}")
        };
        assert_eq!(k.clusters[0].name, "m1");
        assert_eq!(health(&profile(healthy("True"))), Ok(()));
        // No condition: the member is named, with how the condition gets there.
        let v = verdict(&profile(json!({})), &file, "gatewright", &secrets);
        assert!(
            matches!(&v, Verdict::Wait(why) if why.contains("kubectl patch clusterprofile m1 -n fleet --subresource=status")),
            "{v:?}"
        );
        for (status, says) in [
            (
                healthy("False"),
                "ControlPlaneHealthy is False: Probe: readyz answered",
            ),
            (healthy("Unknown"), "ControlPlaneHealthy is Unknown"),
            (
                json!({}),
                "member fleet/m1 has no ControlPlaneHealthy condition yet",
            ),
        ] {
            let v = verdict(&profile(status.clone()), &file, "gatewright", &secrets);
            assert!(
                matches!(&v, Verdict::Wait(why) if why.contains(says) && why.contains("fleet/m1")),
                "{v:?}"
            );
            assert!(health(&profile(status.clone())).is_err());
            assert_eq!(v.state(), "waiting");
        }
    }

    #[test]
    fn a_member_without_credentials_is_reported_with_why() {
        let file = ProviderFile::default();
        let v = verdict(&profile(healthy("True")), &file, "gatewright", &[]);
        assert!(
            matches!(&v, Verdict::Failed(why) if why.contains("fleet/m1")),
            "{v:?}"
        );
        assert_eq!(v.state(), "failed");
    }

    #[test]
    fn the_fingerprint_follows_the_credentials() {
        let file = ProviderFile::default();
        let p = profile(healthy("True"));
        let of = |text: &str| {
            let Verdict::Engage(k) = verdict(&p, &file, "gatewright", &[secret(text)]) else {
                panic!()
            };
            fingerprint(&k)
        };
        assert_eq!(of(KUBECONFIG), of(KUBECONFIG));
        assert_ne!(of(KUBECONFIG), of(&KUBECONFIG.replace("t0k3n", "other")));
    }
}
