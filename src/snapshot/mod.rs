//! The read-only world the planner sees: GatewayClasses, blueprints (compiled once per
//! change), policies, Gateways, routes, Namespaces (labels), ReferenceGrants, Secrets
//! (only what TLS validation needs), Services (existence) and the live children that
//! carry our labels, with the indexes the planner and the controller need.
//!
//! One type fed by two sources: `gatewright render` inserts the objects of YAML files
//! ([`files`]); the controller inserts and removes what its watches report. Both plan
//! through the same [`Snapshot`], so the offline render cannot drift from the controller.

pub mod files;
pub mod fleet;
pub mod ingest;
pub mod keys;
pub mod names;

mod children;
mod classes;
mod entries;
mod gateways;
mod references;
mod relist;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use gateway_api::apis::standard::gatewayclasses::GatewayClass;
use gateway_api::apis::standard::gateways::Gateway;
use gateway_api::apis::standard::referencegrants::ReferenceGrant;
use serde_json::Value;

use crate::api::{GatewayClassConfig, GatewayConfig};
use crate::gateway::{SecretInfo, routes::RouteView};

use entries::ChildEntry;
pub use entries::{
    BlueprintEntry, GatewayEntry, ListenerSetEntry, Live, LiveText, ObjectKey, PreviousEntry,
    RevisionEntry, RouteEntry,
};
pub use keys::{Key, RouteKey, RouteKeyParts};

/// The kind name [`Snapshot::retain_listed`] knows the metadata-only Secrets by.
pub const SECRET_METADATA: &str = "Secret (metadata)";

/// The type of a Secret known by its metadata alone, until it is fetched.
const UNKNOWN_SECRET_TYPE: &str = "not kubernetes.io/tls (not fetched yet)";

/// Removes `item` from the set at `key` of a reverse index, and the set once empty.
fn remove_from<K: Ord, T: Ord>(index: &mut BTreeMap<K, BTreeSet<T>>, key: &K, item: &T) {
    if let Some(set) = index.get_mut(key) {
        set.remove(item);
        if set.is_empty() {
            index.remove(key);
        }
    }
}

/// A reverse index of routes by the Gateway or ListenerSet a parentRef names, holding each
/// route's entry as the snapshot does: a plan walks a Gateway's routes without looking
/// each up again (the same entry replaces both whenever the route changes).
type RouteIndex = BTreeMap<Key, BTreeMap<RouteKey, Arc<RouteEntry>>>;

/// Removes the route `item` from the routes at `key` of a [`RouteIndex`], and those once
/// empty.
fn remove_route_from(index: &mut RouteIndex, key: &Key, item: &RouteKey) {
    if let Some(routes) = index.get_mut(key) {
        routes.remove(item);
        if routes.is_empty() {
            index.remove(key);
        }
    }
}

/// The Services a route's backendRefs name.
fn services_of(view: &RouteView) -> impl Iterator<Item = Key> + '_ {
    view.backend_refs
        .iter()
        .filter(|b| b.group.is_empty() && b.kind == "Service")
        .map(|b| Key::new(b.namespace.clone(), b.name.clone()))
}

/// The Secrets a Gateway's listeners name ([`crate::gateway::refs::secret_refs`]).
pub fn secrets_named_by(g: &Gateway) -> impl Iterator<Item = Key> + '_ {
    crate::gateway::refs::secret_refs(g).map(|(ns, name)| Key::new(ns, name))
}

/// The live children labelled with one Gateway uid, and each one's parent uid.
#[derive(Debug, Default)]
struct GatewayChildren {
    /// Renewed whenever one of them is put or removed
    /// ([`Snapshot::gateway_children_stamp`]).
    stamp: u64,
    children: BTreeMap<ObjectKey, Option<String>>,
}

/// See the module docs.
#[derive(Debug, Default)]
pub struct Snapshot {
    controller_namespace: String,
    classes: BTreeMap<String, Arc<GatewayClass>>,
    blueprints: BTreeMap<String, Arc<BlueprintEntry>>,
    /// Blueprint revisions, by name.
    revisions: BTreeMap<String, Arc<RevisionEntry>>,
    class_configs: BTreeMap<Key, Arc<GatewayClassConfig>>,
    gateway_configs: BTreeMap<Key, Arc<GatewayConfig>>,
    gateways: BTreeMap<Key, Arc<GatewayEntry>>,
    routes: BTreeMap<RouteKey, Arc<RouteEntry>>,
    routes_by_gateway: RouteIndex,
    /// Reverse index: the routes with a parentRef naming a ListenerSet.
    routes_by_listener_set: RouteIndex,
    listener_sets: BTreeMap<Key, Arc<ListenerSetEntry>>,
    /// Reverse index: the ListenerSets naming a Gateway as parent.
    listener_sets_by_gateway: BTreeMap<Key, BTreeSet<Key>>,
    /// Reverse index: the Gateway of a UID (what a child's label names).
    gateways_by_uid: BTreeMap<String, Key>,
    /// Reverse index: the Gateways whose listeners name a Secret.
    gateways_by_secret: BTreeMap<Key, BTreeSet<Key>>,
    /// Reverse index: the routes whose backendRefs name a Service.
    routes_by_service: BTreeMap<Key, BTreeSet<RouteKey>>,
    namespaces: BTreeMap<String, BTreeMap<String, String>>,
    grants: BTreeMap<String, BTreeMap<String, ReferenceGrant>>,
    /// Secrets of type `kubernetes.io/tls`: what TLS validation needs, never the data.
    secrets: BTreeMap<Key, SecretInfo>,
    /// Secrets of any other type, known by their metadata alone, with a placeholder type
    /// until a Gateway names one and its type is fetched.
    other_secrets: BTreeMap<Key, SecretInfo>,
    services: Option<BTreeSet<Key>>,
    children: BTreeMap<ObjectKey, ChildEntry>,
    children_by_parent: BTreeMap<String, BTreeSet<ObjectKey>>,
    /// Per parent uid, a stamp renewed whenever one of its children is put or removed
    /// ([`Snapshot::children_stamp`]).
    children_stamps: std::collections::HashMap<String, u64>,
    /// Reverse index: per Gateway uid (the label), its children and each one's parent uid.
    children_by_gateway: BTreeMap<String, GatewayChildren>,
    scopes: crate::render::scope::KindScopes,
    /// Changes whenever `scopes` does (see [`next_stamp`](entries::next_stamp)).
    scopes_stamp: u64,
    /// Changes whenever what the snapshot answers as a `Lookup` does
    /// ([`Snapshot::references_stamp`]).
    references_stamp: u64,
    /// Objects no live child holds yet but that `render` found several parents rendering:
    /// the parent that keeps each (the oldest), as the object it renders. Never set by the
    /// controller, where the live object decides.
    claimed: BTreeMap<ObjectKey, (u64, Arc<Value>)>,
    /// The names every object of a child kind takes, ours or not (the controller fills
    /// it from metadata-only watches of the kinds it creates children of).
    names: names::Names,
    /// The fleet's member clusters, by name (see [`fleet`]).
    fleet: BTreeMap<String, fleet::FleetMember>,
    /// Whether placed templates render (see [`Snapshot::places`]).
    places: bool,
    /// Changes whenever the fleet or `places` does (see [`next_stamp`](entries::next_stamp)).
    fleet_stamp: u64,
}

/// A stand-in UID for objects read from files, stable across runs.
#[must_use]
pub fn offline_uid(kind: &str, ns: &str, name: &str) -> String {
    let h = crate::render::safe_name(&format!("{kind}/{ns}/{name}"), 253);
    let digest = &h[h.len().saturating_sub(8)..];
    format!("offline-{}", digest)
}

/// UID of an object, or a stable stand-in ([`offline_uid`]).
#[must_use]
pub fn uid_of(json: &Value, kind: &str) -> String {
    json["metadata"]["uid"].as_str().map_or_else(
        || {
            offline_uid(
                kind,
                json["metadata"]["namespace"].as_str().unwrap_or_default(),
                json["metadata"]["name"].as_str().unwrap_or_default(),
            )
        },
        str::to_owned,
    )
}

fn key_of(meta: &kube::api::ObjectMeta) -> Key {
    Key::new(
        meta.namespace.clone().unwrap_or_default(),
        meta.name.clone().unwrap_or_default(),
    )
}

impl Snapshot {
    /// An empty snapshot; `controller_namespace` holds the cluster-wide GatewayClassConfigs.
    #[must_use]
    pub fn new(controller_namespace: &str) -> Self {
        Self {
            controller_namespace: controller_namespace.to_owned(),
            ..Self::default()
        }
    }

    /// The controller namespace.
    #[must_use]
    pub fn controller_namespace(&self) -> &str {
        &self.controller_namespace
    }

    /// Starts tracking Services, so backend refs to missing Services are reported.
    /// Without it, backends are assumed to exist (offline render of routes alone).
    pub fn track_services(&mut self) {
        self.services.get_or_insert_with(BTreeSet::new);
    }
}
