//! The parts of a ClusterProfile (`multicluster.x-k8s.io/v1alpha1`, SIG Multicluster's
//! Cluster Inventory API) that fleet mode reads: its labels, `spec.clusterManager` and
//! `spec.displayName`, and the status a cluster manager reports (`conditions`,
//! `version`, `properties`, `accessProviders`). Parsed from a `DynamicObject` or JSON;
//! fields gatewright does not read are ignored, so a newer ClusterProfile still parses.
//!
//! Each access provider's `cluster` is a kubeconfig (v1) Cluster: [`kube::config::Cluster`]
//! reads it as it is (`server`, `certificate-authority-data`, `insecure-skip-tls-verify`,
//! `proxy-url`, `tls-server-name`, `extensions`, ...); [`super::access`] decides what of
//! it reaches a client.

use std::collections::BTreeMap;

use kube::api::{ApiResource, DynamicObject, GroupVersionKind};
use serde::{Deserialize, Deserializer, Serialize};

/// The ClusterProfile API group.
pub const GROUP: &str = "multicluster.x-k8s.io";
/// The only version the Cluster Inventory API publishes.
pub const VERSION: &str = "v1alpha1";
/// The kind.
pub const KIND: &str = "ClusterProfile";
/// The resource (plural) name.
pub const PLURAL: &str = "clusterprofiles";
/// Label a cluster manager puts on its ClusterProfiles; its value is the manager's name.
pub const LABEL_CLUSTER_MANAGER: &str = "x-k8s.io/cluster-manager";
/// Label on a namespace whose ClusterProfiles form one ClusterSet; its value is the set's
/// name.
pub const LABEL_CLUSTER_SET: &str = "multicluster.x-k8s.io/clusterset";
/// The condition a cluster manager sets when the member's control plane is healthy.
pub const CONDITION_CONTROL_PLANE_HEALTHY: &str = "ControlPlaneHealthy";

/// The ClusterProfile kind as the dynamic API reads it.
#[must_use]
pub fn api_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(GROUP, VERSION, KIND), PLURAL)
}

/// Why an object is not a ClusterProfile gatewright can read.
#[derive(Debug, thiserror::Error)]
pub enum ProfileError {
    /// The object is of another kind.
    #[error("object {name} is a {found}, not a {GROUP}/{VERSION} {KIND}")]
    WrongKind {
        /// `namespace/name` of the object.
        name: String,
        /// Its `apiVersion` and `kind`.
        found: String,
    },
    /// The object has no `metadata.name`.
    #[error("ClusterProfile has no metadata.name")]
    NoName,
    /// The object has no `spec` (the API requires one).
    #[error("ClusterProfile {profile} has no spec")]
    NoSpec {
        /// `namespace/name`.
        profile: String,
    },
    /// A field is not of the type the API declares.
    #[error("ClusterProfile {profile}: {source}")]
    Invalid {
        /// `namespace/name`.
        profile: String,
        /// What serde found.
        #[source]
        source: serde_json::Error,
    },
}

/// A ClusterProfile: metadata gatewright needs, spec and status.
#[derive(Clone, Debug)]
pub struct ClusterProfile {
    /// The namespace (a ClusterProfile is namespaced; empty only in hand-made values).
    pub namespace: String,
    /// The name.
    pub name: String,
    /// `metadata.labels`.
    pub labels: BTreeMap<String, String>,
    /// `metadata.generation`, to compare with a condition's `observedGeneration`.
    pub generation: Option<i64>,
    /// The entries of its [`ANNOTATION_ADDRESSES`] annotation; `None` without it.
    pub addresses: Option<Vec<String>>,
    /// `spec`.
    pub spec: ClusterProfileSpec,
    /// `status` (empty until the cluster manager writes one).
    pub status: ClusterProfileStatus,
}

/// The annotation of a ClusterProfile that says which addresses the member's gateways may
/// bring into the hub's objects (its DNS records): comma-separated IP addresses, CIDR
/// ranges, hostnames and `*.`-wildcard hostnames. Set by whoever runs the hub, not by the
/// member. Without it, none (docs/security.md).
pub const ANNOTATION_ADDRESSES: &str = "gatewright.dev/addresses";

/// The entries of an [`ANNOTATION_ADDRESSES`] value.
fn address_entries(value: &str) -> Vec<String> {
    value
        .split(',')
        .map(str::trim)
        .filter(|e| !e.is_empty())
        .map(str::to_owned)
        .collect()
}

/// `spec` of a ClusterProfile.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterProfileSpec {
    /// A human-readable name of the member cluster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub display_name: Option<String>,
    /// The cluster manager that owns this profile (immutable).
    pub cluster_manager: ClusterManager,
}

/// `spec.clusterManager`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterManager {
    /// The cluster manager's name.
    pub name: String,
}

/// `status` of a ClusterProfile.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterProfileStatus {
    /// The member's conditions (upstream writes `null` for none).
    #[serde(default, deserialize_with = "null_as_default")]
    pub conditions: Vec<Condition>,
    /// The member's version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<ClusterVersion>,
    /// Name/value properties of the member.
    #[serde(default, deserialize_with = "null_as_default")]
    pub properties: Vec<Property>,
    /// How the member can be reached, one entry per access provider.
    #[serde(default, deserialize_with = "null_as_default")]
    pub access_providers: Vec<AccessProvider>,
    /// The deprecated name of `accessProviders`, still read: an entry of the same name in
    /// `accessProviders` wins ([`ClusterProfile::access_providers`]).
    #[serde(default, deserialize_with = "null_as_default")]
    pub credential_providers: Vec<AccessProvider>,
}

/// One condition (`metav1.Condition`); only `type` and `status` are needed to read it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    /// The condition's type, e.g. [`CONDITION_CONTROL_PLANE_HEALTHY`].
    #[serde(rename = "type")]
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    pub status: String,
    /// A CamelCase reason.
    #[serde(default)]
    pub reason: String,
    /// A human-readable message.
    #[serde(default)]
    pub message: String,
    /// The generation the condition was set for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// RFC 3339 time of the last change of `status`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<String>,
}

/// `status.version`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterVersion {
    /// The member's Kubernetes version (`1.29.0`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubernetes: Option<String>,
}

/// One of `status.properties`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Property {
    /// A well-known (KEP-2149 ClusterProperty) or manager-defined name.
    pub name: String,
    /// The value.
    pub value: String,
    /// RFC 3339 time the property was last observed on the member.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_observed_time: Option<String>,
}

/// One of `status.accessProviders`: a provider name and the member's connection details.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct AccessProvider {
    /// The provider's name, which a consumer's provider file maps to an exec plugin.
    pub name: String,
    /// The member's API server as a kubeconfig Cluster.
    #[serde(default)]
    pub cluster: kube::config::Cluster,
}

fn null_as_default<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de> + Default,
{
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

impl ClusterProfile {
    /// Reads a ClusterProfile from the dynamic API's object.
    ///
    /// # Errors
    /// The object is of another kind, has no name or spec, or a field has the wrong type.
    pub fn from_dynamic(obj: &DynamicObject) -> Result<Self, ProfileError> {
        let name = obj.metadata.name.clone().ok_or(ProfileError::NoName)?;
        let namespace = obj.metadata.namespace.clone().unwrap_or_default();
        if let Some(t) = &obj.types {
            check_kind(&namespace, &name, &t.api_version, &t.kind)?;
        }
        let mut profile = Self::from_parts(
            namespace,
            name,
            obj.metadata.labels.clone().unwrap_or_default(),
            obj.metadata.generation,
            obj.data.get("spec"),
            obj.data.get("status"),
        )?;
        profile.addresses = obj
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(ANNOTATION_ADDRESSES))
            .map(|v| address_entries(v));
        Ok(profile)
    }

    /// Reads a ClusterProfile from its JSON (as the API server returns it, or parsed from
    /// YAML).
    ///
    /// # Errors
    /// As [`ClusterProfile::from_dynamic`].
    pub fn from_value(value: &serde_json::Value) -> Result<Self, ProfileError> {
        let meta = value.get("metadata");
        let text = |key: &str| {
            meta.and_then(|m| m.get(key))
                .and_then(serde_json::Value::as_str)
                .map(str::to_owned)
        };
        let name = text("name").ok_or(ProfileError::NoName)?;
        let namespace = text("namespace").unwrap_or_default();
        let api_version = value.get("apiVersion").and_then(serde_json::Value::as_str);
        let kind = value.get("kind").and_then(serde_json::Value::as_str);
        if api_version.is_some() || kind.is_some() {
            check_kind(
                &namespace,
                &name,
                api_version.unwrap_or_default(),
                kind.unwrap_or_default(),
            )?;
        }
        let key = join(&namespace, &name);
        let labels = match meta.and_then(|m| m.get("labels")) {
            None | Some(serde_json::Value::Null) => BTreeMap::new(),
            Some(l) => {
                serde_json::from_value(l.clone()).map_err(|source| ProfileError::Invalid {
                    profile: key.clone(),
                    source,
                })?
            }
        };
        let generation = meta
            .and_then(|m| m.get("generation"))
            .and_then(serde_json::Value::as_i64);
        let mut profile = Self::from_parts(
            namespace,
            name,
            labels,
            generation,
            value.get("spec"),
            value.get("status"),
        )?;
        profile.addresses = meta
            .and_then(|m| m.get("annotations"))
            .and_then(|a| a.get(ANNOTATION_ADDRESSES))
            .and_then(serde_json::Value::as_str)
            .map(address_entries);
        Ok(profile)
    }

    fn from_parts(
        namespace: String,
        name: String,
        labels: BTreeMap<String, String>,
        generation: Option<i64>,
        spec: Option<&serde_json::Value>,
        status: Option<&serde_json::Value>,
    ) -> Result<Self, ProfileError> {
        let profile = join(&namespace, &name);
        let spec = match spec {
            None | Some(serde_json::Value::Null) => return Err(ProfileError::NoSpec { profile }),
            Some(s) => {
                serde_json::from_value(s.clone()).map_err(|source| ProfileError::Invalid {
                    profile: profile.clone(),
                    source,
                })?
            }
        };
        let status = match status {
            None | Some(serde_json::Value::Null) => ClusterProfileStatus::default(),
            Some(s) => serde_json::from_value(s.clone())
                .map_err(|source| ProfileError::Invalid { profile, source })?,
        };
        Ok(Self {
            namespace,
            name,
            labels,
            generation,
            addresses: None,
            spec,
            status,
        })
    }

    /// `namespace/name`: how errors and logs name the profile, and the member cluster's
    /// name in fleet mode (two namespaces may hold profiles of the same name).
    #[must_use]
    pub fn key(&self) -> String {
        join(&self.namespace, &self.name)
    }

    /// The condition of type `type_`, if the manager set it.
    #[must_use]
    pub fn condition(&self, type_: &str) -> Option<&Condition> {
        self.status.conditions.iter().find(|c| c.type_ == type_)
    }

    /// Whether the manager reports the member's control plane healthy:
    /// `Some(true)` for `ControlPlaneHealthy=True`, `Some(false)` for `False`, `None` when
    /// the condition is missing or `Unknown`.
    #[must_use]
    pub fn control_plane_healthy(&self) -> Option<bool> {
        match self
            .condition(CONDITION_CONTROL_PLANE_HEALTHY)?
            .status
            .as_str()
        {
            "True" => Some(true),
            "False" => Some(false),
            _ => None,
        }
    }

    /// The value of property `name`.
    #[must_use]
    pub fn property(&self, name: &str) -> Option<&str> {
        self.status
            .properties
            .iter()
            .find(|p| p.name == name)
            .map(|p| p.value.as_str())
    }

    /// The member's Kubernetes version, if reported.
    #[must_use]
    pub fn kubernetes_version(&self) -> Option<&str> {
        self.status.version.as_ref()?.kubernetes.as_deref()
    }

    /// The access providers the profile offers: `accessProviders` in order, then the
    /// deprecated `credentialProviders` whose names `accessProviders` does not have.
    #[must_use]
    pub fn access_providers(&self) -> Vec<&AccessProvider> {
        let mut out: Vec<&AccessProvider> = self.status.access_providers.iter().collect();
        for p in &self.status.credential_providers {
            if !out.iter().any(|q| q.name == p.name) {
                out.push(p);
            }
        }
        out
    }

    /// The access provider named `name`, as [`ClusterProfile::access_providers`] has it.
    #[must_use]
    pub fn access_provider(&self, name: &str) -> Option<&AccessProvider> {
        self.access_providers().into_iter().find(|p| p.name == name)
    }
}

fn check_kind(
    namespace: &str,
    name: &str,
    api_version: &str,
    kind: &str,
) -> Result<(), ProfileError> {
    if api_version == format!("{GROUP}/{VERSION}") && kind == KIND {
        Ok(())
    } else {
        Err(ProfileError::WrongKind {
            name: join(namespace, name),
            found: format!("{api_version} {kind}"),
        })
    }
}

fn join(namespace: &str, name: &str) -> String {
    if namespace.is_empty() {
        name.to_owned()
    } else {
        format!("{namespace}/{name}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn example(file: &str) -> serde_json::Value {
        let text = match file {
            "profile-minimal.yaml" => {
                include_str!("../../tests/fleet/examples/profile-minimal.yaml")
            }
            "profile-status.yaml" => include_str!("../../tests/fleet/examples/profile-status.yaml"),
            "profile-secretreader.yaml" => {
                include_str!("../../tests/fleet/examples/profile-secretreader.yaml")
            }
            "profile-kubeconfig-secretreader.yaml" => {
                include_str!("../../tests/fleet/examples/profile-kubeconfig-secretreader.yaml")
            }
            other => panic!("no example {other}"),
        };
        serde_saphyr::from_str(text).unwrap()
    }

    #[test]
    fn minimal_example() {
        let p = ClusterProfile::from_value(&example("profile-minimal.yaml")).unwrap();
        assert_eq!(p.key(), "cluster-a");
        assert_eq!(p.spec.cluster_manager.name, "manager-a");
        assert_eq!(p.spec.display_name.as_deref(), Some("cluster-a"));
        assert_eq!(
            p.labels.get(LABEL_CLUSTER_MANAGER).map(String::as_str),
            Some("manager-a")
        );
        assert!(p.status.conditions.is_empty());
        assert_eq!(p.control_plane_healthy(), None);
        assert!(p.access_providers().is_empty());
    }

    #[test]
    fn status_example() {
        let p = ClusterProfile::from_value(&example("profile-status.yaml")).unwrap();
        assert_eq!(p.kubernetes_version(), Some("1.29.0"));
        assert_eq!(p.property("n1"), Some("v1"));
        assert_eq!(p.property("location"), Some("eu-west-1"));
        assert_eq!(p.property("missing"), None);
        assert_eq!(p.control_plane_healthy(), Some(true));
        let c = p.condition(CONDITION_CONTROL_PLANE_HEALTHY).unwrap();
        assert_eq!(
            (c.reason.as_str(), c.message.as_str()),
            ("Reason", "Message")
        );
    }

    #[test]
    fn access_provider_examples() {
        let p = ClusterProfile::from_value(&example("profile-secretreader.yaml")).unwrap();
        assert_eq!(p.key(), "fleet/spoke-1");
        let a = p.access_provider("secretreader").unwrap();
        assert_eq!(
            a.cluster.server.as_deref(),
            Some("https://spoke-1.example:6443")
        );
        assert!(a.cluster.certificate_authority_data.is_some());
        let ext = a.cluster.extensions.as_ref().unwrap();
        assert_eq!(ext[0].name, "client.authentication.k8s.io/exec");
        assert_eq!(ext[0].extension["clusterName"], "spoke-1");

        let p =
            ClusterProfile::from_value(&example("profile-kubeconfig-secretreader.yaml")).unwrap();
        assert_eq!(p.control_plane_healthy(), Some(true));
        let a = p.access_provider("kubeconfig-secretreader").unwrap();
        let ext = a.cluster.extensions.as_ref().unwrap();
        assert_eq!(ext[0].extension["key"], "Config");
    }

    #[test]
    fn from_dynamic_matches_from_value() {
        let v = example("profile-kubeconfig-secretreader.yaml");
        let obj: DynamicObject = serde_json::from_value(v).unwrap();
        let p = ClusterProfile::from_dynamic(&obj).unwrap();
        assert_eq!(p.key(), "fleet/spoke-2");
        assert_eq!(
            p.labels.get(LABEL_CLUSTER_MANAGER).map(String::as_str),
            Some("demo")
        );
        assert_eq!(p.access_providers().len(), 1);
    }

    #[test]
    fn null_lists_and_missing_status_read_as_empty() {
        // Upstream's Go types write `conditions: null` (no omitempty).
        let v = serde_json::json!({
            "apiVersion": "multicluster.x-k8s.io/v1alpha1", "kind": "ClusterProfile",
            "metadata": {"name": "a", "namespace": "ns", "generation": 3},
            "spec": {"clusterManager": {"name": "m"}},
            "status": {"conditions": null, "accessProviders": null}
        });
        let p = ClusterProfile::from_value(&v).unwrap();
        assert!(p.status.conditions.is_empty() && p.status.access_providers.is_empty());
        assert_eq!(p.generation, Some(3));
    }

    #[test]
    fn access_providers_win_over_credential_providers() {
        let v = serde_json::json!({
            "metadata": {"name": "a", "namespace": "ns"},
            "spec": {"clusterManager": {"name": "m"}},
            "status": {
                "credentialProviders": [
                    {"name": "x", "cluster": {"server": "https://old"}},
                    {"name": "y", "cluster": {"server": "https://y"}}
                ],
                "accessProviders": [{"name": "x", "cluster": {"server": "https://new"}}]
            }
        });
        let p = ClusterProfile::from_value(&v).unwrap();
        let names: Vec<_> = p
            .access_providers()
            .iter()
            .map(|a| a.name.as_str())
            .collect();
        assert_eq!(names, ["x", "y"]);
        assert_eq!(
            p.access_provider("x").unwrap().cluster.server.as_deref(),
            Some("https://new")
        );
    }

    #[test]
    fn refusals_name_the_profile() {
        let wrong = serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "namespace": "ns"}});
        let e = ClusterProfile::from_value(&wrong).unwrap_err();
        assert!(matches!(e, ProfileError::WrongKind { .. }), "{e}");
        assert_eq!(
            e.to_string(),
            "object ns/a is a v1 ConfigMap, not a multicluster.x-k8s.io/v1alpha1 ClusterProfile"
        );

        let no_spec = serde_json::json!({"metadata": {"name": "a", "namespace": "ns"}});
        let e = ClusterProfile::from_value(&no_spec).unwrap_err();
        assert_eq!(e.to_string(), "ClusterProfile ns/a has no spec");

        let bad = serde_json::json!({"metadata": {"name": "a", "namespace": "ns"},
            "spec": {"clusterManager": {"name": "m"}}, "status": {"conditions": "yes"}});
        let e = ClusterProfile::from_value(&bad).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("ClusterProfile ns/a: invalid type"),
            "{e}"
        );

        let e = ClusterProfile::from_value(&serde_json::json!({"spec": {}})).unwrap_err();
        assert!(matches!(e, ProfileError::NoName));
    }

    #[test]
    fn healthy_follows_the_condition_status() {
        for (status, want) in [
            ("True", Some(true)),
            ("False", Some(false)),
            ("Unknown", None),
        ] {
            let v = serde_json::json!({"metadata": {"name": "a"},
                "spec": {"clusterManager": {"name": "m"}},
                "status": {"conditions": [{"type": "ControlPlaneHealthy", "status": status}]}});
            let p = ClusterProfile::from_value(&v).unwrap();
            assert_eq!(p.control_plane_healthy(), want, "{status}");
        }
    }
}
