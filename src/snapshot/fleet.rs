//! The member clusters of a fleet, as placement reads them: each one's name (its
//! ClusterProfile's `namespace/name`), labels, properties, and whether it is served. The
//! controller fills it from its inventory; `gatewright render` from the ClusterProfiles
//! among its files.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::fleet::profile::ClusterProfile;

/// A member cluster as a placed template sees it (the `cluster` variable).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct FleetMember {
    /// The ClusterProfile's `namespace/name`: what placed objects name their cluster by.
    pub name: String,
    /// `spec.displayName`, else the profile's name.
    #[serde(rename = "displayName")]
    pub display_name: String,
    /// The ClusterProfile's labels: what placements select on.
    pub labels: BTreeMap<String, String>,
    /// `status.properties` by name (region, zone, ...).
    pub properties: BTreeMap<String, String>,
    /// Why it is not served (unhealthy, unreachable, not engaged); `None`: served.
    #[serde(skip)]
    pub unserved: Option<String>,
}

impl FleetMember {
    /// A member from its profile, served or not as `unserved` says.
    #[must_use]
    pub fn of(p: &ClusterProfile, unserved: Option<String>) -> Self {
        Self {
            name: p.key(),
            display_name: p
                .spec
                .display_name
                .clone()
                .unwrap_or_else(|| p.name.clone()),
            labels: p.labels.clone(),
            properties: p
                .status
                .properties
                .iter()
                .map(|q| (q.name.clone(), q.value.clone()))
                .collect(),
            unserved,
        }
    }

    /// A member read offline: served when its profile reports its control plane healthy
    /// (nothing else can be known without reaching it).
    #[must_use]
    pub fn offline(p: &ClusterProfile) -> Self {
        let unserved = match p.control_plane_healthy() {
            Some(true) => None,
            Some(false) => Some("ControlPlaneHealthy is False".to_owned()),
            None => Some("ControlPlaneHealthy is not reported yet".to_owned()),
        };
        Self::of(p, unserved)
    }
}
