//! The member clusters of a fleet, as placement reads them: each one's name (its
//! ClusterProfile's `namespace/name`), labels, properties, and whether it is served. The
//! controller fills it from its inventory; `gatewright render` from the ClusterProfiles
//! among its files.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use super::entries::next_stamp;
use super::{Key, ObjectKey, Snapshot};
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
    /// The addresses its gateways may bring into the hub's objects (its ClusterProfile's
    /// `gatewright.dev/addresses` annotation); `None`: not declared, so none
    /// ([`crate::plan::placement::address_allowed`]).
    #[serde(skip)]
    pub addresses: Option<Vec<String>>,
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
            addresses: p.addresses.clone(),
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

/// The fleet placement reads.
impl Snapshot {
    /// Sets the whole fleet (the controller's inventory after each change).
    pub fn set_fleet(&mut self, members: Vec<FleetMember>) {
        let fleet: BTreeMap<String, FleetMember> =
            members.into_iter().map(|m| (m.name.clone(), m)).collect();
        if fleet != self.fleet {
            self.fleet = fleet;
            self.fleet_stamp = next_stamp();
        }
    }

    /// Adds or replaces one member.
    pub fn put_fleet_member(&mut self, m: FleetMember) {
        if self.fleet.get(&m.name) != Some(&m) {
            self.fleet.insert(m.name.clone(), m);
            self.fleet_stamp = next_stamp();
        }
    }

    /// Removes one member.
    pub fn remove_fleet_member(&mut self, name: &str) {
        if self.fleet.remove(name).is_some() {
            self.fleet_stamp = next_stamp();
        }
    }

    /// A number that changes whenever the fleet's members (or whether placed templates
    /// render here) change: equal stamps, the same fleet, without comparing it.
    #[must_use]
    pub fn fleet_stamp(&self) -> u64 {
        self.fleet_stamp
    }

    /// The members, by name.
    #[must_use]
    pub fn fleet(&self) -> &BTreeMap<String, FleetMember> {
        &self.fleet
    }

    /// Whether placed templates render here (`gatewright render`, a preview; a controller
    /// in fleet mode), or only report that placement takes fleet mode.
    #[must_use]
    pub fn places(&self) -> bool {
        self.places
    }

    /// Drops the children of one kind mirrored from member `cluster` that its relist did
    /// not see (`seen`: their namespaces and names); returns how many.
    pub fn retain_listed_placed(
        &mut self,
        cluster: &str,
        kind: &str,
        api_version: &str,
        seen: &BTreeSet<Key>,
    ) -> usize {
        self.retain_children(kind, api_version, Some(cluster), seen)
    }

    /// The children mirrored from member `cluster`, each with the UID of the Gateway it
    /// was placed for.
    #[must_use]
    pub fn placed_in(&self, cluster: &str) -> Vec<(ObjectKey, String)> {
        self.children
            .iter()
            .filter(|(k, _)| k.cluster == cluster)
            .filter_map(|(k, c)| Some((k.clone(), c.gateway_uid.clone()?)))
            .collect()
    }

    /// Drops every child mirrored from member `cluster` (no longer served); returns the
    /// Gateways they belonged to.
    pub fn forget_cluster(&mut self, cluster: &str) -> Vec<Key> {
        let keys: Vec<ObjectKey> = self
            .children
            .keys()
            .filter(|k| k.cluster == cluster)
            .cloned()
            .collect();
        let mut gateways = std::collections::BTreeSet::new();
        for k in keys {
            if let Some(g) = self
                .children
                .get(&k)
                .and_then(|c| c.gateway_uid.as_deref())
                .and_then(|u| self.gateway_by_uid(u))
            {
                gateways.insert(g.clone());
            }
            self.remove_child(&k);
        }
        gateways.into_iter().collect()
    }

    /// Lets placed templates render (see [`Snapshot::places`]).
    pub fn allow_placement(&mut self) {
        if !self.places {
            self.places = true;
            self.fleet_stamp = next_stamp();
        }
    }
}
