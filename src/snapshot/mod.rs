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

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use gateway_api::apis::standard::gatewayclasses::GatewayClass;
use gateway_api::apis::standard::gateways::Gateway;
use gateway_api::apis::standard::referencegrants::ReferenceGrant;
use k8s_openapi::api::core::v1::Secret;
use serde_json::Value;

use crate::api::{GatewayClassBlueprint, GatewayClassConfig, GatewayConfig};
use crate::gateway::{Lookup, SecretInfo, routes::RouteView};
use crate::render::RenderError;
use crate::render::labels;
use crate::render::prepared::Prepared;

pub mod keys;
pub mod names;
pub use keys::{Key, RouteKey};

/// The kind name [`Snapshot::retain_listed`] knows the metadata-only Secrets by.
pub const SECRET_METADATA: &str = "Secret (metadata)";

/// The type of a Secret known by its metadata alone, until it is fetched.
const UNKNOWN_SECRET_TYPE: &str = "not kubernetes.io/tls (not fetched yet)";

/// Identity of any object: apiVersion, kind, namespace ("" when cluster-scoped), name.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ObjectKey {
    /// `apiVersion`.
    pub api_version: String,
    /// Kind.
    pub kind: String,
    /// Namespace, empty for cluster-scoped objects.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// The member cluster it lives in, for an object a placed template rendered (its
    /// `gatewright.dev/cluster` annotation); empty: the parent's own cluster.
    pub cluster: String,
}

impl ObjectKey {
    /// The key of a JSON object.
    #[must_use]
    pub fn of(obj: &Value) -> Self {
        let s = |v: &Value| v.as_str().unwrap_or_default().to_owned();
        Self {
            api_version: s(&obj["apiVersion"]),
            kind: s(&obj["kind"]),
            namespace: s(&obj["metadata"]["namespace"]),
            name: s(&obj["metadata"]["name"]),
            cluster: s(&obj["metadata"]["annotations"][crate::render::labels::CLUSTER]),
        }
    }
}

impl std::fmt::Display for ObjectKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.namespace.is_empty() {
            write!(f, "{} {}", self.kind, self.name)?;
        } else {
            write!(f, "{} {}/{}", self.kind, self.namespace, self.name)?;
        }
        if !self.cluster.is_empty() {
            write!(f, " in cluster {}", self.cluster)?;
        }
        Ok(())
    }
}

/// A blueprint and what compiling it gave.
#[derive(Debug)]
pub struct BlueprintEntry {
    /// The object.
    pub object: GatewayClassBlueprint,
    /// Compiled templates and graphs, or every error found.
    pub prepared: Result<Arc<Prepared>, Vec<RenderError>>,
    /// The hash of its spec as a revision holds it
    /// ([`crate::api::GatewayClassBlueprintSpec::revision_hash`]).
    pub hash: String,
}

/// A blueprint revision and what compiling its template gave (under its blueprint's name,
/// so what it renders reads the same as what the blueprint renders).
#[derive(Debug)]
pub struct RevisionEntry {
    /// The object.
    pub object: crate::api::GatewayClassBlueprintRevision,
    /// Compiled templates and graphs, or every error found.
    pub prepared: Result<Arc<Prepared>, Vec<RenderError>>,
}

impl RevisionEntry {
    /// Its name.
    #[must_use]
    pub fn name(&self) -> &str {
        self.object.metadata.name.as_deref().unwrap_or_default()
    }
}

/// A Gateway, typed and as JSON text (templates read the JSON; a plan parses it once:
/// see [`ChildEntry`] for why text).
#[derive(Debug)]
pub struct GatewayEntry {
    /// Typed.
    pub typed: Gateway,
    /// As the API returns it, minified.
    text: Box<str>,
    /// `metadata.uid`, or a stable stand-in offline (see
    /// [`offline_uid`]), read once.
    pub uid: String,
}

impl GatewayEntry {
    /// The Gateway as the API returns it.
    #[must_use]
    pub fn json(&self) -> Value {
        parse(&self.text)
    }
}

/// A route of any supported kind, as the semantics see it and as JSON text (parsed when a
/// plan reads it: see [`ChildEntry`] for why text).
#[derive(Debug)]
pub struct RouteEntry {
    /// Route-kind independent view.
    pub view: RouteView,
    /// As the API returns it, minified.
    text: Arc<str>,
    /// `metadata.uid`, or a stable stand-in offline, read once.
    pub uid: String,
    /// Whether the text holds the route's `status` exactly as the API server sent it (the
    /// typed model dropped no field of it), so a status write may start from it.
    pub status_exact: bool,
}

impl RouteEntry {
    /// The route as the API returns it.
    #[must_use]
    pub fn json(&self) -> Value {
        parse(&self.text)
    }
    /// The route as a template value that is parsed only if a template reads it.
    #[must_use]
    pub fn lazy_value(&self) -> minijinja::Value {
        crate::render::lazy::LazyJson::value(Arc::clone(&self.text))
    }
}

/// A ListenerSet, as the semantics see it and as the API returned it.
#[derive(Debug)]
pub struct ListenerSetEntry {
    /// The view the evaluation reads.
    pub view: crate::gateway::listenersets::ListenerSetView,
    /// As the API returns it.
    pub json: Value,
}

/// Removes `item` from the set at `key` of a reverse index, and the set once empty.
fn remove_from<K: Ord, T: Ord>(index: &mut BTreeMap<K, BTreeSet<T>>, key: &K, item: &T) {
    if let Some(set) = index.get_mut(key) {
        set.remove(item);
        if set.is_empty() {
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

/// An object the snapshot keeps as text, parsed. It was serialized from a `Value`, so it
/// parses; `Null` stands for the impossible.
fn parse(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or(Value::Null)
}

/// A live child as the snapshot keeps it: its minified JSON text, and what the indexes
/// and the write path read without parsing it. A parsed `serde_json::Value` of a
/// Kubernetes object takes 8 to 20 times its text (every map is a B-tree node of 11
/// slots), and a fleet's children are most of what the controller holds; a plan parses
/// the few it reads (see "Memory" in docs/architecture.md).
#[derive(Debug)]
struct ChildEntry {
    text: Box<str>,
    parent_uid: Option<String>,
    gateway_uid: Option<String>,
    resource_version: Option<String>,
    /// Unique to this version of the object in this process (see [`next_stamp`]).
    stamp: u64,
}

/// A number no object version held by any snapshot of this process had before: what a
/// memo of a plan records to know, without comparing objects, that what it read is
/// still what the snapshot holds (offline objects have no resourceVersion).
fn next_stamp() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

impl ChildEntry {
    fn new(obj: &Value) -> Self {
        let s = |v: Option<&str>| v.map(str::to_owned);
        Self {
            text: serde_json::to_string(obj)
                .unwrap_or_default()
                .into_boxed_str(),
            parent_uid: s(labels::parent_uid(obj)),
            gateway_uid: s(labels::gateway_uid(obj)),
            resource_version: s(obj["metadata"]["resourceVersion"].as_str()),
            stamp: next_stamp(),
        }
    }

    /// The object, parsed (it was serialized from a `Value`, so it parses).
    fn object(&self) -> Arc<Value> {
        Arc::new(parse(&self.text))
    }
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
    routes_by_gateway: BTreeMap<Key, BTreeSet<RouteKey>>,
    /// Reverse index: the routes with a parentRef naming a ListenerSet.
    routes_by_listener_set: BTreeMap<Key, BTreeSet<RouteKey>>,
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
    children_by_gateway: BTreeMap<String, BTreeSet<ObjectKey>>,
    scopes: crate::render::scope::KindScopes,
    /// Changes whenever `scopes` does (see [`next_stamp`]).
    scopes_stamp: u64,
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
    /// Changes whenever the fleet or `places` does (see [`next_stamp`]).
    fleet_stamp: u64,
    /// Why they do not, when there is more to say than "not in fleet mode".
    placement_off: Option<String>,
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

    // ---- writers -------------------------------------------------------------

    /// Records a kind's scope (from discovery or a CRD); whether it changed what was known.
    pub fn learn_scope(
        &mut self,
        group: &str,
        kind: &str,
        scope: crate::render::scope::Scope,
    ) -> bool {
        let changed = self.scopes.learn(group, kind, scope);
        if changed {
            self.scopes_stamp = next_stamp();
        }
        changed
    }

    /// Forgets a kind's learned scope (its CRD went away).
    pub fn forget_scope(&mut self, group: &str, kind: &str) {
        self.scopes.forget(group, kind);
        self.scopes_stamp = next_stamp();
    }

    /// A number that changes whenever what is known of kinds' scopes does.
    #[must_use]
    pub fn scopes_stamp(&self) -> u64 {
        self.scopes_stamp
    }

    /// What is known of kinds' scopes.
    #[must_use]
    pub fn scopes(&self) -> &crate::render::scope::KindScopes {
        &self.scopes
    }

    /// Inserts or replaces a GatewayClass.
    pub fn put_class(&mut self, c: GatewayClass) {
        self.classes
            .insert(c.metadata.name.clone().unwrap_or_default(), Arc::new(c));
    }
    /// Removes a GatewayClass.
    pub fn remove_class(&mut self, name: &str) {
        self.classes.remove(name);
    }
    /// Inserts or replaces a blueprint, compiling it.
    pub fn put_blueprint(&mut self, b: GatewayClassBlueprint) {
        let name = b.metadata.name.clone().unwrap_or_default();
        // A status write changes no template: what compiled is kept (and the memos that
        // know it by identity stay good).
        let (prepared, hash) = match self.blueprints.get(&name) {
            Some(held) if held.object.spec == b.spec => (held.prepared.clone(), held.hash.clone()),
            _ => (
                Prepared::new(&name, &b.spec).map(Arc::new),
                b.spec.revision_hash(),
            ),
        };
        self.blueprints.insert(
            name,
            Arc::new(BlueprintEntry {
                object: b,
                prepared,
                hash,
            }),
        );
    }
    /// Removes a blueprint.
    pub fn remove_blueprint(&mut self, name: &str) {
        self.blueprints.remove(name);
    }
    /// Inserts or replaces a blueprint revision, compiling its template (unless the same
    /// revision, unchanged, is held: a revision never changes).
    pub fn put_revision(&mut self, r: crate::api::GatewayClassBlueprintRevision) {
        let name = r.metadata.name.clone().unwrap_or_default();
        if let Some(held) = self.revisions.get(&name)
            && held.object.spec.hash == r.spec.hash
            && held.object.metadata.uid == r.metadata.uid
        {
            return;
        }
        let prepared = Prepared::new(&r.spec.blueprint, &r.spec.template).map(Arc::new);
        self.revisions.insert(
            name,
            Arc::new(RevisionEntry {
                object: r,
                prepared,
            }),
        );
    }
    /// Removes a blueprint revision.
    pub fn remove_revision(&mut self, name: &str) {
        self.revisions.remove(name);
    }
    /// Inserts or replaces a GatewayClassConfig.
    pub fn put_class_config(&mut self, c: GatewayClassConfig) {
        self.class_configs.insert(key_of(&c.metadata), Arc::new(c));
    }
    /// Removes a GatewayClassConfig.
    pub fn remove_class_config(&mut self, key: &Key) {
        self.class_configs.remove(key);
    }
    /// Inserts or replaces a GatewayConfig.
    pub fn put_gateway_config(&mut self, c: GatewayConfig) {
        self.gateway_configs
            .insert(key_of(&c.metadata), Arc::new(c));
    }
    /// Removes a GatewayConfig.
    pub fn remove_gateway_config(&mut self, key: &Key) {
        self.gateway_configs.remove(key);
    }
    /// Inserts or replaces a Gateway; `true` when the snapshot did not hold it.
    pub fn put_gateway(&mut self, g: Gateway) -> bool {
        let json = serde_json::to_value(&g).unwrap_or(Value::Null);
        let uid = uid_of(&json, "Gateway");
        let text = serde_json::to_string(&json)
            .unwrap_or_default()
            .into_boxed_str();
        let key = key_of(&g.metadata);
        self.unindex_gateway(&key);
        self.gateways_by_uid.insert(uid.clone(), key.clone());
        for secret in secrets_named_by(&g) {
            self.gateways_by_secret
                .entry(secret)
                .or_default()
                .insert(key.clone());
        }
        self.gateways
            .insert(
                key,
                Arc::new(GatewayEntry {
                    typed: g,
                    text,
                    uid,
                }),
            )
            .is_none()
    }
    /// The Gateway whose UID is `uid`.
    #[must_use]
    pub fn gateway_by_uid(&self, uid: &str) -> Option<&Key> {
        self.gateways_by_uid.get(uid)
    }
    /// Removes a Gateway.
    pub fn remove_gateway(&mut self, key: &Key) {
        self.unindex_gateway(key);
        self.gateways.remove(key);
    }
    fn unindex_gateway(&mut self, key: &Key) {
        if let Some(old) = self.gateways.get(key) {
            self.gateways_by_uid.remove(&old.uid);
            for secret in secrets_named_by(&old.typed) {
                remove_from(&mut self.gateways_by_secret, &secret, key);
            }
        }
    }
    /// Inserts or replaces a route of a kind we implement, as the API server sent it (its
    /// `kind` says which, [`crate::gateway::route_kinds`]). Returns `false`, storing
    /// nothing, for any other kind.
    pub fn put_route_json(&mut self, json: Value) -> bool {
        let Some(row) = json["kind"]
            .as_str()
            .and_then(crate::gateway::route_kinds::by_kind)
        else {
            return false;
        };
        let view = row.view(&json);
        self.put_route(view, json, true);
        true
    }
    fn put_route(&mut self, view: RouteView, json: Value, status_exact: bool) {
        let key: RouteKey = RouteKey::new(
            view.kind.kind.clone(),
            view.namespace.clone(),
            view.name.clone(),
        );
        self.remove_route(&key);
        for p in &view.parent_refs {
            if p.group == crate::gateway::GATEWAY_API_GROUP && p.kind == "Gateway" {
                self.routes_by_gateway
                    .entry(Key::new(p.namespace.clone(), p.name.clone()))
                    .or_default()
                    .insert(key.clone());
            } else if p.listener_set().is_some() {
                self.routes_by_listener_set
                    .entry(Key::new(p.namespace.clone(), p.name.clone()))
                    .or_default()
                    .insert(key.clone());
            }
        }
        for service in services_of(&view) {
            self.routes_by_service
                .entry(service)
                .or_default()
                .insert(key.clone());
        }
        let uid = uid_of(&json, &key.kind);
        let text = serde_json::to_string(&json).unwrap_or_default().into();
        self.routes.insert(
            key,
            Arc::new(RouteEntry {
                view,
                text,
                uid,
                status_exact,
            }),
        );
    }
    /// Inserts or replaces a ListenerSet.
    pub fn put_listener_set(&mut self, json: Value) {
        let view = crate::gateway::listenersets::ListenerSetView::from_json(&json);
        let key = Key::new(view.namespace.clone(), view.name.clone());
        self.remove_listener_set(&key);
        if let Some((ns, name)) = &view.parent {
            self.listener_sets_by_gateway
                .entry(Key::new(ns.clone(), name.clone()))
                .or_default()
                .insert(key.clone());
        }
        self.listener_sets
            .insert(key, Arc::new(ListenerSetEntry { view, json }));
    }
    /// Removes a ListenerSet.
    pub fn remove_listener_set(&mut self, key: &Key) {
        if let Some(old) = self.listener_sets.remove(key)
            && let Some((ns, name)) = &old.view.parent
        {
            remove_from(
                &mut self.listener_sets_by_gateway,
                &Key::new(ns.clone(), name.clone()),
                key,
            );
        }
    }
    /// A ListenerSet by key.
    #[must_use]
    pub fn listener_set(&self, key: &Key) -> Option<&Arc<ListenerSetEntry>> {
        self.listener_sets.get(key)
    }
    /// The ListenerSets naming Gateway `gw` as parent, in key order.
    pub fn listener_sets_of<'a>(
        &'a self,
        gw: &Key,
    ) -> impl Iterator<Item = &'a Arc<ListenerSetEntry>> + 'a {
        self.listener_sets_by_gateway
            .get(gw)
            .into_iter()
            .flatten()
            .filter_map(|k| self.listener_sets.get(k))
    }
    /// The parent Gateway of the ListenerSet `key`, when the set is known and names one.
    #[must_use]
    pub fn listener_set_parent(&self, key: &Key) -> Option<Key> {
        self.listener_sets
            .get(key)
            .and_then(|s| s.view.parent.clone())
            .map(|(ns, name)| Key::new(ns, name))
    }
    /// The Gateway a route's parentRef leads to: the Gateway it names, or the parent of the
    /// ListenerSet it names (when that set is known).
    #[must_use]
    pub fn gateway_of_parent(&self, p: &crate::gateway::routes::ParentRef) -> Option<Key> {
        if p.group != crate::gateway::GATEWAY_API_GROUP {
            return None;
        }
        match p.kind.as_str() {
            "Gateway" => Some(Key::new(p.namespace.clone(), p.name.clone())),
            crate::gateway::listenersets::KIND => self
                .listener_sets
                .get(&Key::new(p.namespace.clone(), p.name.clone()))
                .and_then(|s| s.view.parent.clone())
                .map(|(ns, name)| Key::new(ns, name)),
            _ => None,
        }
    }
    /// Removes a route.
    pub fn remove_route(&mut self, key: &RouteKey) {
        if let Some(old) = self.routes.remove(key) {
            for p in &old.view.parent_refs {
                let k = Key::new(p.namespace.clone(), p.name.clone());
                if p.listener_set().is_some() {
                    remove_from(&mut self.routes_by_listener_set, &k, key);
                } else {
                    remove_from(&mut self.routes_by_gateway, &k, key);
                }
            }
            for service in services_of(&old.view) {
                remove_from(&mut self.routes_by_service, &service, key);
            }
        }
    }
    /// Inserts or replaces a Namespace's labels.
    pub fn put_namespace(&mut self, name: &str, labels: BTreeMap<String, String>) {
        self.namespaces.insert(name.to_owned(), labels);
    }
    /// Removes a Namespace.
    pub fn remove_namespace(&mut self, name: &str) {
        self.namespaces.remove(name);
    }
    /// Inserts or replaces a ReferenceGrant.
    pub fn put_grant(&mut self, g: ReferenceGrant) {
        let Key { namespace, name } = key_of(&g.metadata);
        self.grants.entry(namespace).or_default().insert(name, g);
    }
    /// Removes a ReferenceGrant.
    pub fn remove_grant(&mut self, key: &Key) {
        if let Some(m) = self.grants.get_mut(&key.namespace) {
            m.remove(&key.name);
        }
    }
    /// Inserts or replaces a Secret (only its type and TLS validity are kept).
    pub fn put_secret(&mut self, s: &Secret) {
        let key = key_of(&s.metadata);
        let info = SecretInfo::from_secret(s);
        // Kept where the watch that lists its type keeps it (see the fields).
        if info.type_ == crate::gateway::refs::TLS_SECRET_TYPE {
            self.other_secrets.remove(&key);
            self.secrets.insert(key, info);
        } else {
            self.secrets.remove(&key);
            self.other_secrets.insert(key, info);
        }
    }
    /// Records a Secret known by its metadata alone (its type is not
    /// `kubernetes.io/tls`; which one it is stays unknown until [`Snapshot::put_secret`]).
    pub fn put_secret_metadata(&mut self, key: Key) {
        if !self.secrets.contains_key(&key) {
            self.other_secrets.entry(key).or_insert_with(|| SecretInfo {
                type_: UNKNOWN_SECRET_TYPE.into(),
                tls_valid: false,
            });
        }
    }
    /// Whether a Secret is known by its metadata alone (its type not fetched yet).
    #[must_use]
    pub fn secret_type_unknown(&self, key: &Key) -> bool {
        self.other_secrets
            .get(key)
            .is_some_and(|s| s.type_ == UNKNOWN_SECRET_TYPE)
    }
    /// Removes a Secret.
    pub fn remove_secret(&mut self, key: &Key) {
        self.secrets.remove(key);
        self.other_secrets.remove(key);
    }
    /// Records that a Service exists (turns Service tracking on).
    pub fn put_service(&mut self, key: Key) {
        self.services.get_or_insert_with(BTreeSet::new).insert(key);
    }
    /// Records that a Service is gone.
    pub fn remove_service(&mut self, key: &Key) {
        if let Some(s) = &mut self.services {
            s.remove(key);
        }
    }
    /// Inserts or replaces a live child (an object carrying our parent-uid label).
    pub fn put_child(&mut self, obj: Value) {
        let key = ObjectKey::of(&obj);
        self.remove_child(&key);
        let entry = ChildEntry::new(&obj);
        if let Some(uid) = &entry.parent_uid {
            self.children_stamps.insert(uid.clone(), entry.stamp);
            self.children_by_parent
                .entry(uid.clone())
                .or_default()
                .insert(key.clone());
        }
        if let Some(uid) = &entry.gateway_uid {
            self.children_by_gateway
                .entry(uid.clone())
                .or_default()
                .insert(key.clone());
        }
        self.children.insert(key, entry);
    }
    /// Stores the answer to our own write of a child, unless the cache moved on since the
    /// version the write was based on (`based_on`: its resourceVersion, `None` when the
    /// cache held nothing). A watch event handled while the write was under way is newer
    /// than that write's answer, or as new: replacing it would turn the cache back (a
    /// child's fresh status lost, and with it the event that would have woken its parent).
    /// Returns whether it was stored.
    pub fn put_own_write(&mut self, obj: Value, based_on: Option<&str>) -> bool {
        let key = ObjectKey::of(&obj);
        let now = self
            .children
            .get(&key)
            .map(|c| c.resource_version.as_deref().unwrap_or_default());
        if now != based_on {
            return false;
        }
        self.put_child(obj);
        true
    }

    /// Removes a live child.
    pub fn remove_child(&mut self, key: &ObjectKey) {
        if let Some(old) = self.children.remove(key) {
            if let Some(uid) = old.parent_uid.as_deref()
                && let Some(set) = self.children_by_parent.get_mut(uid)
            {
                set.remove(key);
                if set.is_empty() {
                    self.children_by_parent.remove(uid);
                    self.children_stamps.remove(uid);
                } else if let Some(stamp) = self.children_stamps.get_mut(uid) {
                    *stamp = next_stamp();
                }
            }
            if let Some(uid) = old.gateway_uid.as_deref()
                && let Some(set) = self.children_by_gateway.get_mut(uid)
            {
                set.remove(key);
                if set.is_empty() {
                    self.children_by_gateway.remove(uid);
                }
            }
        }
    }

    /// After a watch relisted every object of `kind`, drops what the list no longer had
    /// (objects deleted while the watch was down). `seen` holds (namespace, name) pairs.
    /// Returns how many entries were dropped.
    pub fn retain_listed(&mut self, kind: &str, api_version: &str, seen: &BTreeSet<Key>) -> usize {
        let keep = |k: &Key| seen.contains(k);
        let before = self.len_of(kind, api_version);
        match kind {
            "GatewayClass" => self
                .classes
                .retain(|n, _| keep(&Key::new(String::new(), n.clone()))),
            "GatewayClassBlueprint" => self
                .blueprints
                .retain(|n, _| keep(&Key::new(String::new(), n.clone()))),
            crate::api::REVISION_KIND => self
                .revisions
                .retain(|n, _| keep(&Key::new(String::new(), n.clone()))),
            "GatewayClassConfig" => self.class_configs.retain(|k, _| keep(k)),
            "GatewayConfig" => self.gateway_configs.retain(|k, _| keep(k)),
            "Gateway" if api_version.is_empty() => self.gateways.retain(|k, _| keep(k)),
            k if api_version.is_empty() && crate::gateway::route_kinds::by_kind(k).is_some() => {
                let gone: Vec<RouteKey> = self
                    .routes
                    .keys()
                    .filter(|k| k.kind == kind && !keep(&k.key()))
                    .cloned()
                    .collect();
                for k in &gone {
                    self.remove_route(k);
                }
            }
            crate::gateway::listenersets::KIND if api_version.is_empty() => {
                let gone: Vec<Key> = self
                    .listener_sets
                    .keys()
                    .filter(|k| !keep(k))
                    .cloned()
                    .collect();
                for k in &gone {
                    self.remove_listener_set(k);
                }
            }
            "Namespace" => self
                .namespaces
                .retain(|n, _| keep(&Key::new(String::new(), n.clone()))),
            "ReferenceGrant" => {
                for (ns, m) in &mut self.grants {
                    m.retain(|n, _| seen.contains(&Key::new(ns.clone(), n.clone())));
                }
            }
            "Secret" => self.secrets.retain(|k, _| keep(k)),
            SECRET_METADATA => self.other_secrets.retain(|k, _| keep(k)),
            "Service" => {
                if let Some(s) = &mut self.services {
                    s.retain(|k| keep(k));
                }
            }
            _ => {
                self.retain_children(kind, api_version, None, seen);
            }
        }
        before.saturating_sub(self.len_of(kind, api_version))
    }

    /// Drops the children of one kind (of one cluster, when given) whose namespace and
    /// name `seen` does not hold; returns how many.
    fn retain_children(
        &mut self,
        kind: &str,
        api_version: &str,
        cluster: Option<&str>,
        seen: &BTreeSet<Key>,
    ) -> usize {
        let gone: Vec<ObjectKey> = self
            .children
            .keys()
            .filter(|k| {
                cluster.is_none_or(|c| k.cluster == c)
                    && k.kind == kind
                    && k.api_version == api_version
                    && !seen.contains(&Key::new(k.namespace.clone(), k.name.clone()))
            })
            .cloned()
            .collect();
        for k in &gone {
            self.remove_child(k);
        }
        gone.len()
    }

    fn len_of(&self, kind: &str, api_version: &str) -> usize {
        match kind {
            "GatewayClass" => self.classes.len(),
            "GatewayClassBlueprint" => self.blueprints.len(),
            crate::api::REVISION_KIND => self.revisions.len(),
            "GatewayClassConfig" => self.class_configs.len(),
            "GatewayConfig" => self.gateway_configs.len(),
            "Gateway" if api_version.is_empty() => self.gateways.len(),
            k if api_version.is_empty() && crate::gateway::route_kinds::by_kind(k).is_some() => {
                self.routes.keys().filter(|r| r.kind == k).count()
            }
            crate::gateway::listenersets::KIND if api_version.is_empty() => {
                self.listener_sets.len()
            }
            "Namespace" => self.namespaces.len(),
            "ReferenceGrant" => self.grants.values().map(BTreeMap::len).sum(),
            "Secret" => self.secrets.len(),
            SECRET_METADATA => self.other_secrets.len(),
            "Service" => self.services.as_ref().map_or(0, BTreeSet::len),
            _ => self
                .children
                .keys()
                .filter(|k| k.kind == kind && k.api_version == api_version)
                .count(),
        }
    }

    // ---- readers -------------------------------------------------------------

    /// A GatewayClass by name.
    #[must_use]
    pub fn class(&self, name: &str) -> Option<&Arc<GatewayClass>> {
        self.classes.get(name)
    }
    /// Whether GatewayClass `name` exists and names our controller.
    #[must_use]
    pub fn class_is_ours(&self, name: &str) -> bool {
        self.class(name)
            .is_some_and(|c| c.spec.controller_name == crate::gateway::CONTROLLER_NAME)
    }
    /// Whether Gateway `key` exists and its class names our controller.
    #[must_use]
    pub fn gateway_is_ours(&self, key: &Key) -> bool {
        self.gateway(key)
            .is_some_and(|g| self.class_is_ours(&g.typed.spec.gateway_class_name))
    }
    /// Every GatewayClass.
    pub fn classes(&self) -> impl Iterator<Item = &Arc<GatewayClass>> {
        self.classes.values()
    }
    /// A blueprint by name.
    #[must_use]
    pub fn blueprint(&self, name: &str) -> Option<&Arc<BlueprintEntry>> {
        self.blueprints.get(name)
    }
    /// Every blueprint.
    pub fn blueprints(&self) -> impl Iterator<Item = &Arc<BlueprintEntry>> {
        self.blueprints.values()
    }
    /// A blueprint revision by name.
    #[must_use]
    pub fn revision(&self, name: &str) -> Option<&Arc<RevisionEntry>> {
        self.revisions.get(name)
    }
    /// The revisions of blueprint `blueprint`, oldest first.
    #[must_use]
    pub fn revisions_of(&self, blueprint: &str) -> Vec<&Arc<RevisionEntry>> {
        let mut out: Vec<&Arc<RevisionEntry>> = self
            .revisions
            .values()
            .filter(|r| r.object.spec.blueprint == blueprint)
            .collect();
        out.sort_by_key(|r| r.object.spec.revision);
        out
    }
    /// Every GatewayClassConfig, by key.
    pub fn all_class_configs(&self) -> impl Iterator<Item = (&Key, &Arc<GatewayClassConfig>)> {
        self.class_configs.iter()
    }
    /// Every GatewayConfig, by key.
    pub fn all_gateway_configs(&self) -> impl Iterator<Item = (&Key, &Arc<GatewayConfig>)> {
        self.gateway_configs.iter()
    }
    /// GatewayClassConfigs of a namespace.
    pub fn class_configs_in<'a>(
        &'a self,
        ns: &'a str,
    ) -> impl Iterator<Item = &'a Arc<GatewayClassConfig>> + 'a {
        self.class_configs
            .range(Key::new(ns, String::new())..)
            .take_while(move |(k, _)| k.namespace == ns)
            .map(|(_, v)| v)
    }
    /// GatewayConfigs of a namespace.
    pub fn gateway_configs_in<'a>(
        &'a self,
        ns: &'a str,
    ) -> impl Iterator<Item = &'a Arc<GatewayConfig>> + 'a {
        self.gateway_configs
            .range(Key::new(ns, String::new())..)
            .take_while(move |(k, _)| k.namespace == ns)
            .map(|(_, v)| v)
    }
    /// A GatewayClassConfig by key.
    #[must_use]
    pub fn class_config(&self, key: &Key) -> Option<&Arc<GatewayClassConfig>> {
        self.class_configs.get(key)
    }
    /// A GatewayConfig by key.
    #[must_use]
    pub fn gateway_config(&self, key: &Key) -> Option<&Arc<GatewayConfig>> {
        self.gateway_configs.get(key)
    }
    /// A Gateway by key.
    #[must_use]
    pub fn gateway(&self, key: &Key) -> Option<&Arc<GatewayEntry>> {
        self.gateways.get(key)
    }
    /// Every Gateway in (namespace, name) order.
    pub fn gateways(&self) -> impl Iterator<Item = (&Key, &Arc<GatewayEntry>)> {
        self.gateways.iter()
    }
    /// A route by key.
    #[must_use]
    pub fn route(&self, key: &RouteKey) -> Option<&Arc<RouteEntry>> {
        self.routes.get(key)
    }
    /// Every route.
    pub fn routes(&self) -> impl Iterator<Item = (&RouteKey, &Arc<RouteEntry>)> {
        self.routes.iter()
    }
    /// The Gateways whose listeners name the Secret `key` (a reverse index, not a scan).
    #[must_use]
    pub fn gateways_naming_secret(&self, key: &Key) -> Vec<Key> {
        self.gateways_by_secret
            .get(key)
            .map(|s| s.iter().cloned().collect())
            .unwrap_or_default()
    }
    /// The routes whose backendRefs name the Service `key` (a reverse index, not a scan).
    #[must_use]
    pub fn routes_naming_service(&self, key: &Key) -> Vec<RouteKey> {
        self.routes_by_service
            .get(key)
            .map(|s| s.iter().cloned().collect())
            .unwrap_or_default()
    }
    /// Routes with a parentRef naming the ListenerSet `key`.
    #[must_use]
    pub fn routes_naming_listener_set(&self, key: &Key) -> Vec<RouteKey> {
        self.routes_by_listener_set
            .get(key)
            .map(|s| s.iter().cloned().collect())
            .unwrap_or_default()
    }
    /// Routes with a parentRef naming this Gateway or one of the ListenerSets naming it as
    /// parent, in (kind, namespace, name) order, each once.
    pub fn routes_referencing<'a>(
        &'a self,
        gw: &Key,
    ) -> Box<dyn Iterator<Item = (&'a RouteKey, &'a Arc<RouteEntry>)> + 'a> {
        let direct = self.routes_by_gateway.get(gw).into_iter().flatten();
        let Some(sets) = self.listener_sets_by_gateway.get(gw) else {
            // No ListenerSet names the Gateway: its own index, already in order.
            return Box::new(direct.filter_map(|k| self.routes.get_key_value(k)));
        };
        let mut keys: BTreeSet<&'a RouteKey> = direct.collect();
        for set in sets {
            keys.extend(self.routes_by_listener_set.get(set).into_iter().flatten());
        }
        Box::new(
            keys.into_iter()
                .filter_map(|k| self.routes.get_key_value(k)),
        )
    }
    /// Live children labelled with this parent uid, parsed.
    pub fn children_of<'a>(&'a self, parent_uid: &str) -> impl Iterator<Item = Arc<Value>> + 'a {
        self.entries_of(parent_uid).map(ChildEntry::object)
    }
    /// The entries of the live children labelled with this parent uid.
    fn entries_of<'a>(&'a self, parent_uid: &str) -> impl Iterator<Item = &'a ChildEntry> + 'a {
        self.children_by_parent
            .get(parent_uid)
            .into_iter()
            .flatten()
            .filter_map(|k| self.children.get(k))
    }
    /// [`Snapshot::entries_of`], of those also labelled with this Gateway uid.
    fn entries_under<'a>(
        &'a self,
        parent_uid: &str,
        gateway_uid: &'a str,
    ) -> impl Iterator<Item = &'a ChildEntry> + 'a {
        self.entries_of(parent_uid)
            .filter(move |c| c.gateway_uid.as_deref() == Some(gateway_uid))
    }
    /// One stamp for every live child of `parent_uid` (0 for none): it changes whenever
    /// one of them is put (a new version) or removed, so equal stamps mean the same
    /// children, and a memo compares one number instead of looking each child up.
    #[must_use]
    pub fn children_stamp(&self, parent_uid: &str) -> u64 {
        self.children_stamps.get(parent_uid).copied().unwrap_or(0)
    }
    /// Live children labelled with this parent uid and this Gateway uid (a route's
    /// children under one of its Gateways), parsed.
    pub fn children_of_under<'a>(
        &'a self,
        parent_uid: &str,
        gateway_uid: &'a str,
    ) -> impl Iterator<Item = Arc<Value>> + 'a {
        self.entries_under(parent_uid, gateway_uid)
            .map(ChildEntry::object)
    }
    /// Live children labelled with this Gateway uid (its own and its routes'), parsed.
    pub fn children_by_gateway<'a>(
        &'a self,
        gateway_uid: &str,
    ) -> impl Iterator<Item = Arc<Value>> + 'a {
        self.children_by_gateway
            .get(gateway_uid)
            .into_iter()
            .flatten()
            .filter_map(|k| self.children.get(k).map(ChildEntry::object))
    }
    /// The parent uids of the live children labelled with this Gateway uid whose parent is
    /// not the Gateway itself (its routes' children), without parsing them.
    pub fn route_children_by_gateway<'a>(
        &'a self,
        gateway_uid: &'a str,
    ) -> impl Iterator<Item = (&'a ObjectKey, &'a str)> + 'a {
        self.children_by_gateway
            .get(gateway_uid)
            .into_iter()
            .flatten()
            .filter_map(move |k| {
                let p = self
                    .children
                    .get(k)?
                    .parent_uid
                    .as_deref()
                    .unwrap_or_default();
                (p != gateway_uid).then_some((k, p))
            })
    }
    /// The (apiVersion, kind) of every live child labelled with this Gateway uid.
    pub fn child_kinds_by_gateway<'a>(
        &'a self,
        gateway_uid: &str,
    ) -> impl Iterator<Item = (String, String)> + 'a {
        self.children_by_gateway
            .get(gateway_uid)
            .into_iter()
            .flatten()
            .map(|k| (k.api_version.clone(), k.kind.clone()))
    }
    /// A live child by key, parsed.
    #[must_use]
    pub fn child(&self, key: &ObjectKey) -> Option<Arc<Value>> {
        self.children.get(key).map(ChildEntry::object)
    }
    /// Whether a live child of that key exists.
    #[must_use]
    pub fn has_child(&self, key: &ObjectKey) -> bool {
        self.children.contains_key(key)
    }
    /// Whether an object of `key`'s name exists that the cache does not hold as a child
    /// of ours: the only kind of object a create would have to refuse to adopt. Known for
    /// the kinds the snapshot watches in full (Gateways and routes, every one in the
    /// cluster) and for the kinds whose names are listed ([`names::Names`]); `None`
    /// otherwise, which only a read of the API server can tell.
    #[must_use]
    pub fn foreign_object_exists(&self, key: &ObjectKey) -> Option<bool> {
        if key.api_version.split('/').next() != Some(crate::gateway::GATEWAY_API_GROUP) {
            return self.names_taken(key);
        }
        let nn = || Key::new(key.namespace.clone(), key.name.clone());
        match key.kind.as_str() {
            "Gateway" => Some(self.gateways.contains_key(&nn())),
            k if crate::gateway::route_kinds::by_kind(k).is_some() => {
                Some(self.routes.contains_key(&RouteKey::new(
                    key.kind.clone(),
                    key.namespace.clone(),
                    key.name.clone(),
                )))
            }
            _ => self.names_taken(key),
        }
    }

    /// Whether an object of `key`'s kind holds its name, from the names of the kind
    /// ([`names::Names`]); `None` while they are not listed.
    fn names_taken(&self, key: &ObjectKey) -> Option<bool> {
        let group = crate::kinds::group_of(&key.api_version);
        self.names.taken(
            group,
            &key.kind,
            &Key::new(key.namespace.clone(), key.name.clone()),
        )
    }

    /// The names of the child kinds, as their watches filled them.
    #[must_use]
    pub fn names(&self) -> &names::Names {
        &self.names
    }

    /// The names of the child kinds, for the watches that fill them.
    pub fn names_mut(&mut self) -> &mut names::Names {
        &mut self.names
    }
    /// The object that holds `key`: the live child, else the object a parent claimed
    /// (offline arbitration, see [`Snapshot::claim`]).
    #[must_use]
    pub fn holder(&self, key: &ObjectKey) -> Option<Arc<Value>> {
        self.child(key)
            .or_else(|| self.claimed.get(key).map(|(_, o)| Arc::clone(o)))
    }
    /// The stamp of what [`Snapshot::holder`] returns: equal stamps, the same holder.
    #[must_use]
    pub fn holder_stamp(&self, key: &ObjectKey) -> Option<u64> {
        self.children
            .get(key)
            .map(|c| c.stamp)
            .or_else(|| self.claimed.get(key).map(|(stamp, _)| *stamp))
    }
    /// Records that the parent of `object` (its labels say which) keeps `key` although it
    /// does not exist yet: `render` arbitrates between parents rendering the same object.
    pub fn claim(&mut self, key: ObjectKey, object: Value) {
        self.claimed.insert(key, (next_stamp(), Arc::new(object)));
    }
    /// The keys of every live child.
    pub fn child_keys(&self) -> impl Iterator<Item = &ObjectKey> {
        self.children.keys()
    }
}

impl Lookup for Snapshot {
    fn namespace_labels(&self, namespace: &str) -> Option<&BTreeMap<String, String>> {
        self.namespaces.get(namespace)
    }
    fn secret(&self, namespace: &str, name: &str) -> Option<&SecretInfo> {
        let key = Key::new(namespace, name);
        self.secrets
            .get(&key)
            .or_else(|| self.other_secrets.get(&key))
    }
    fn reference_grants(&self, namespace: &str) -> Vec<&ReferenceGrant> {
        self.grants
            .get(namespace)
            .map(|m| m.values().collect())
            .unwrap_or_default()
    }
    fn service_exists(&self, namespace: &str, name: &str) -> Option<bool> {
        self.services
            .as_ref()
            .map(|s| s.contains(&Key::new(namespace.to_owned(), name.to_owned())))
    }
}

/// The fleet placement reads (see [`fleet`]).
impl Snapshot {
    /// Sets the whole fleet (the controller's inventory after each change).
    pub fn set_fleet(&mut self, members: Vec<fleet::FleetMember>) {
        let fleet: BTreeMap<String, fleet::FleetMember> =
            members.into_iter().map(|m| (m.name.clone(), m)).collect();
        if fleet != self.fleet {
            self.fleet = fleet;
            self.fleet_stamp = next_stamp();
        }
    }

    /// Adds or replaces one member.
    pub fn put_fleet_member(&mut self, m: fleet::FleetMember) {
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
    pub fn fleet(&self) -> &BTreeMap<String, fleet::FleetMember> {
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
        self.places = true;
        self.fleet_stamp = next_stamp();
        self.placement_off = None;
    }

    /// Keeps placed templates from rendering, saying why.
    pub fn refuse_placement(&mut self, why: &str) {
        self.places = false;
        self.fleet_stamp = next_stamp();
        self.placement_off = Some(why.to_owned());
    }

    /// Why placed templates do not render, when set by [`Snapshot::refuse_placement`].
    #[must_use]
    pub fn placement_off(&self) -> Option<&str> {
        self.placement_off.as_deref()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn our_own_write_never_turns_the_cache_back() {
        let cm = |rv: &str, ready: bool| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "a", "resourceVersion": rv, "labels": {"gatewright.dev/parent-uid": "u", "gatewright.dev/gateway-uid": "u"}}, "status": {"ready": ready}});
        let key = ObjectKey::of(&cm("1", false));
        let mut s = Snapshot::default();
        // A create answered while nothing came by watch: stored.
        assert!(s.put_own_write(cm("1", false), None));
        // The watch brings a newer version (someone set its status) while our next write,
        // based on version 1, is under way: its answer does not replace the newer one.
        s.put_child(cm("3", true));
        assert!(!s.put_own_write(cm("2", false), Some("1")));
        assert_eq!(s.child(&key).unwrap()["status"]["ready"], true);
        // Based on what the cache holds: stored.
        assert!(s.put_own_write(cm("4", true), Some("3")));
        assert_eq!(s.child(&key).unwrap()["metadata"]["resourceVersion"], "4");
        // A create's answer after the watch already brought the object: not stored.
        s.remove_child(&key);
        s.put_child(cm("6", true));
        assert!(!s.put_own_write(cm("5", false), None));
        assert_eq!(s.child(&key).unwrap()["metadata"]["resourceVersion"], "6");
    }

    #[test]
    fn reverse_indexes_follow_every_change() {
        let gw = |secret: &str| -> Gateway {
            serde_json::from_value(json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
                "metadata": {"name": "g", "namespace": "a"},
                "spec": {"gatewayClassName": "c", "listeners": [{"name": "https", "port": 443, "protocol": "HTTPS",
                    "tls": {"certificateRefs": [{"name": secret}, {"name": "x", "namespace": "other"}, {"name": "y", "kind": "ConfigMap"}]}}]}}))
            .unwrap()
        };
        let route = |service: &str| -> Value {
            json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
                "metadata": {"name": "r", "namespace": "a"},
                "spec": {"parentRefs": [{"name": "g"}], "rules": [{"backendRefs": [{"name": service, "port": 80}, {"name": "s3", "kind": "Bucket", "group": "example.com"}]}]}})
        };
        let k = Key::new;
        let g = k("a", "g");
        let rk = RouteKey::new("HTTPRoute", "a", "r");
        let mut s = Snapshot::new("sys");
        assert!(s.put_gateway(gw("cert1")), "new");
        assert_eq!(
            s.gateways_naming_secret(&k("a", "cert1")),
            std::slice::from_ref(&g)
        );
        assert_eq!(
            s.gateways_naming_secret(&k("other", "x")),
            std::slice::from_ref(&g),
            "another namespace"
        );
        assert!(
            s.gateways_naming_secret(&k("a", "y")).is_empty(),
            "not a Secret"
        );
        assert!(!s.put_gateway(gw("cert2")), "replaced, not new");
        assert!(
            s.gateways_naming_secret(&k("a", "cert1")).is_empty(),
            "replaced"
        );
        assert_eq!(
            s.gateways_naming_secret(&k("a", "cert2")),
            std::slice::from_ref(&g)
        );
        s.remove_gateway(&g);
        assert!(
            s.gateways_naming_secret(&k("a", "cert2")).is_empty(),
            "removed"
        );
        assert!(s.gateways_by_secret.is_empty(), "no empty sets left");

        s.put_route_json(route("svc1"));
        assert_eq!(
            s.routes_naming_service(&k("a", "svc1")),
            std::slice::from_ref(&rk)
        );
        assert!(
            s.routes_naming_service(&k("a", "s3")).is_empty(),
            "not a Service"
        );
        s.put_route_json(route("svc2"));
        assert!(
            s.routes_naming_service(&k("a", "svc1")).is_empty(),
            "replaced"
        );
        s.remove_route(&rk);
        assert!(s.routes_by_service.is_empty(), "removed");
    }

    #[test]
    fn relists_drop_what_is_gone() {
        let mut s = Snapshot::new("sys");
        s.put_namespace("a", BTreeMap::new());
        s.put_namespace("b", BTreeMap::new());
        let child = |name: &str| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "a", "labels": {"gatewright.dev/parent-uid": "u", "gatewright.dev/gateway-uid": "u"}}});
        s.put_child(child("x"));
        s.put_child(child("y"));
        let seen = BTreeSet::from([Key::new("", "a")]);
        assert_eq!(s.retain_listed("Namespace", "", &seen), 1);
        assert!(crate::gateway::Lookup::namespace_labels(&s, "b").is_none());
        let seen = BTreeSet::from([Key::new("a", "x")]);
        assert_eq!(s.retain_listed("ConfigMap", "v1", &seen), 1);
        assert_eq!(s.children_of("u").count(), 1);
        assert_eq!(s.children_by_gateway("u").count(), 1);
    }

    #[test]
    fn the_fleet_stamp_moves_with_the_fleet_and_only_with_it() {
        let member = |name: &str, unserved: Option<&str>| fleet::FleetMember {
            name: name.to_owned(),
            display_name: name.to_owned(),
            labels: BTreeMap::new(),
            properties: BTreeMap::new(),
            unserved: unserved.map(str::to_owned),
        };
        let mut s = Snapshot::new("sys");
        s.set_fleet(vec![member("fleet/a", None)]);
        let first = s.fleet_stamp();
        s.set_fleet(vec![member("fleet/a", None)]);
        s.put_fleet_member(member("fleet/a", None));
        s.remove_fleet_member("fleet/none");
        assert_eq!(s.fleet_stamp(), first, "the same fleet");
        s.put_fleet_member(member("fleet/a", Some("unreachable")));
        let second = s.fleet_stamp();
        assert_ne!(second, first, "a member no longer served");
        s.remove_fleet_member("fleet/a");
        assert_ne!(s.fleet_stamp(), second, "a member gone");
        let third = s.fleet_stamp();
        s.allow_placement();
        assert_ne!(s.fleet_stamp(), third, "placement turned on");
    }

    #[test]
    fn a_members_relist_drops_only_its_own_placed_objects_from_the_mirror() {
        let mut s = Snapshot::new("sys");
        let placed = |name: &str, cluster: &str| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "a", "annotations": {"gatewright.dev/cluster": cluster}, "labels": {"gatewright.dev/parent-uid": "u", "gatewright.dev/gateway-uid": "u"}}});
        s.put_child(placed("x", "fleet/eu"));
        s.put_child(placed("y", "fleet/eu"));
        s.put_child(placed("y", "fleet/us"));
        s.put_child(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "y", "namespace": "a", "labels": {"gatewright.dev/parent-uid": "u", "gatewright.dev/gateway-uid": "u"}}}));
        // eu relisted ConfigMaps and saw x alone: its y goes; us's y and the hub's own stay.
        let seen = BTreeSet::from([Key::new("a", "x")]);
        assert_eq!(
            s.retain_listed_placed("fleet/eu", "ConfigMap", "v1", &seen),
            1
        );
        let mut left: Vec<(String, String)> = s
            .children_by_gateway("u")
            .map(|o| {
                let k = ObjectKey::of(&o);
                (k.cluster, k.name)
            })
            .collect();
        left.sort();
        assert_eq!(
            left,
            [
                (String::new(), "y".to_owned()),
                ("fleet/eu".to_owned(), "x".to_owned()),
                ("fleet/us".to_owned(), "y".to_owned())
            ]
        );
        // Another kind is not touched.
        assert_eq!(
            s.retain_listed_placed("fleet/eu", "Secret", "v1", &BTreeSet::new()),
            0
        );
    }
}
