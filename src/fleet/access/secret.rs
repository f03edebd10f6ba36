//! A member's kubeconfig from a Secret of the hub's.
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

use k8s_openapi::api::core::v1::Secret;
use kube::config::Kubeconfig;

use super::{AccessError, LABEL_CLUSTER_PROFILE, LABEL_INVENTORY_CONSUMER, SECRET_KEY_KUBECONFIG};
use crate::fleet::profile::ClusterProfile;

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
