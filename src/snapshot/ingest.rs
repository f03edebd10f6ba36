//! Ingestion as data: which of the kinds the planner reads a document is, and the one
//! function that puts it into a [`Snapshot`] (or takes it out). The files of `gatewright
//! render` ([`super::files`]) and the one-shot live snapshot of the operator's commands
//! (`crate::live`) fill their snapshots through it, so what they plan on is read the same
//! way.

use std::collections::BTreeMap;

use serde::de::DeserializeOwned;
use serde_json::Value;

use super::{Key, RouteKey, Snapshot};
use crate::gateway::route_kinds::{self, RouteKind};
use crate::render::labels;
use crate::render::output::api_group;

const GATEWAY_API: &str = crate::gateway::GATEWAY_API_GROUP;
const OURS: &str = "gatewright.dev";

/// The kinds the planner reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A GatewayClass.
    GatewayClass,
    /// A GatewayClassBlueprint.
    Blueprint,
    /// A GatewayClassBlueprintRevision.
    Revision,
    /// A GatewayClassConfig.
    ClassConfig,
    /// A GatewayConfig.
    GatewayConfig,
    /// A Gateway (not one of our children).
    Gateway,
    /// A route of a kind of [`route_kinds::ROUTE_KINDS`] (not one of our children).
    Route(&'static RouteKind),
    /// A ListenerSet.
    ListenerSet,
    /// A Namespace (its labels).
    Namespace,
    /// A ReferenceGrant.
    ReferenceGrant,
    /// A Secret: in full when it carries `type`, else known by its metadata.
    Secret,
    /// A Service (its existence).
    Service,
    /// A CustomResourceDefinition (the scope of its kind).
    Crd,
    /// A ClusterProfile (SIG Multicluster): a member cluster placement may select.
    ClusterProfile,
    /// One of our children: carries our labels, whatever its kind.
    Child,
}

/// Whether `doc` is one of our children (our labels and a parent): it belongs to the
/// downstream implementation, even when it is a Gateway or a route.
#[must_use]
pub fn is_child(doc: &Value) -> bool {
    doc["metadata"]["labels"][labels::MANAGED_BY] == labels::MANAGED_BY_VALUE
        && labels::parent_uid(doc).is_some()
}

/// Which kind the planner reads `doc` is, by its labels, then its apiVersion and kind.
#[must_use]
pub fn kind_of(doc: &Value) -> Option<Kind> {
    if is_child(doc) {
        return Some(Kind::Child);
    }
    let api_version = doc["apiVersion"].as_str().unwrap_or_default();
    let kind = doc["kind"].as_str().unwrap_or_default();
    Some(match (api_group(api_version), kind) {
        (GATEWAY_API, "GatewayClass") => Kind::GatewayClass,
        (GATEWAY_API, "Gateway") => Kind::Gateway,
        (GATEWAY_API, "ReferenceGrant") => Kind::ReferenceGrant,
        (GATEWAY_API, crate::gateway::listenersets::KIND) => Kind::ListenerSet,
        (GATEWAY_API, k) => Kind::Route(route_kinds::by_kind(k)?),
        (OURS, "GatewayClassBlueprint") => Kind::Blueprint,
        (OURS, crate::api::REVISION_KIND) => Kind::Revision,
        (OURS, "GatewayClassConfig") => Kind::ClassConfig,
        (OURS, "GatewayConfig") => Kind::GatewayConfig,
        ("", "Namespace") => Kind::Namespace,
        ("", "Secret") => Kind::Secret,
        ("", "Service") => Kind::Service,
        ("apiextensions.k8s.io", "CustomResourceDefinition") => Kind::Crd,
        (crate::fleet::profile::GROUP, "ClusterProfile") => Kind::ClusterProfile,
        _ => return None,
    })
}

/// The `namespace/name` of an object as JSON (empty parts when absent).
#[must_use]
pub fn key_of(doc: &Value) -> Key {
    Key::new(
        doc["metadata"]["namespace"]
            .as_str()
            .unwrap_or_default()
            .to_owned(),
        doc["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_owned(),
    )
}

fn de<T: DeserializeOwned>(doc: Value) -> Result<T, String> {
    let kind = doc["kind"].as_str().unwrap_or_default().to_owned();
    let name = doc["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    serde_json::from_value(doc).map_err(|e| format!("{kind} {name:?}: {e}"))
}

/// Puts `doc` into `snap` as what [`kind_of`] says it is. `Ok(None)`: not a kind the
/// planner reads (left out).
///
/// # Errors
/// The document does not decode as its kind (the message names kind, name and cause).
pub fn put(snap: &mut Snapshot, doc: Value) -> Result<Option<Kind>, String> {
    let Some(kind) = kind_of(&doc) else {
        return Ok(None);
    };
    if kind == Kind::Child {
        // A child Service or Secret exists as one, too (the controller's watches of those
        // kinds see every object of them).
        match (doc["apiVersion"].as_str(), doc["kind"].as_str()) {
            (Some("v1"), Some("Service")) => put_as(snap, Kind::Service, doc.clone())?,
            (Some("v1"), Some("Secret")) if doc.get("type").is_some() => {
                put_as(snap, Kind::Secret, doc.clone())?;
            }
            _ => {}
        }
    }
    put_as(snap, kind, doc)?;
    Ok(Some(kind))
}

/// Puts `doc` into `snap` as a `kind` (a watch knows the kind of what it watches: a child
/// Service seen by the Service watch is a Service there).
///
/// # Errors
/// The document does not decode as its kind (the message names kind, name and cause).
pub fn put_as(snap: &mut Snapshot, kind: Kind, doc: Value) -> Result<(), String> {
    match kind {
        Kind::Child => snap.put_child(doc),
        Kind::GatewayClass => snap.put_class(de(doc)?),
        Kind::Blueprint => snap.put_blueprint(de(doc)?),
        Kind::Revision => snap.put_revision(de(doc)?),
        Kind::ClassConfig => snap.put_class_config(de(doc)?),
        Kind::GatewayConfig => snap.put_gateway_config(de(doc)?),
        Kind::Gateway => {
            snap.put_gateway(de(doc)?);
        }
        Kind::Route(row) => {
            let name = doc["metadata"]["name"].as_str().unwrap_or_default();
            row.check(&doc)
                .map_err(|m| format!("{} {name:?}: {m}", row.kind))?;
            snap.put_route_json(doc);
        }
        Kind::ListenerSet => snap.put_listener_set(doc),
        Kind::ReferenceGrant => snap.put_grant(de(doc)?),
        Kind::Namespace => {
            let name = doc["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            let mut l: BTreeMap<String, String> =
                serde_json::from_value(doc["metadata"]["labels"].clone()).unwrap_or_default();
            l.entry("kubernetes.io/metadata.name".into())
                .or_insert_with(|| name.clone());
            snap.put_namespace(&name, l);
        }
        Kind::Secret if doc.get("type").is_some() => snap.put_secret(&de(doc)?),
        Kind::Secret => snap.put_secret_metadata(key_of(&doc)),
        Kind::Service => snap.put_service(key_of(&doc)),
        Kind::ClusterProfile => {
            let p = crate::fleet::profile::ClusterProfile::from_value(&doc)
                .map_err(|e| e.to_string())?;
            snap.put_fleet_member(super::fleet::FleetMember::offline(&p));
        }
        Kind::Crd => {
            let name = doc["metadata"]["name"].as_str().unwrap_or_default();
            let spec = &doc["spec"];
            let scope = spec["scope"].as_str().unwrap_or_default();
            let Some(scope) = crate::render::scope::Scope::from_crd(scope) else {
                return Err(format!(
                    "CustomResourceDefinition {name:?}: spec.scope must be Namespaced or Cluster, not {scope:?}"
                ));
            };
            snap.learn_scope(
                spec["group"].as_str().unwrap_or_default(),
                spec["names"]["kind"].as_str().unwrap_or_default(),
                scope,
            );
        }
    }
    Ok(())
}

/// Takes `doc` (as its last known state) out of `snap`.
pub fn remove(snap: &mut Snapshot, doc: &Value) {
    if let Some(kind) = kind_of(doc) {
        remove_as(snap, kind, doc);
    }
}

/// Takes `doc`, a `kind`, out of `snap`.
pub fn remove_as(snap: &mut Snapshot, kind: Kind, doc: &Value) {
    let key = key_of(doc);
    match Some(kind) {
        Some(Kind::Child) => snap.remove_child(&super::ObjectKey::of(doc)),
        Some(Kind::GatewayClass) => snap.remove_class(&key.name),
        Some(Kind::Blueprint) => snap.remove_blueprint(&key.name),
        Some(Kind::Revision) => snap.remove_revision(&key.name),
        Some(Kind::ClassConfig) => snap.remove_class_config(&key),
        Some(Kind::GatewayConfig) => snap.remove_gateway_config(&key),
        Some(Kind::Gateway) => snap.remove_gateway(&key),
        Some(Kind::Route(row)) => {
            snap.remove_route(&RouteKey::new(row.kind, key.namespace, key.name))
        }
        Some(Kind::ListenerSet) => snap.remove_listener_set(&key),
        Some(Kind::ReferenceGrant) => snap.remove_grant(&key),
        Some(Kind::Namespace) => snap.remove_namespace(&key.name),
        Some(Kind::Secret) => snap.remove_secret(&key),
        Some(Kind::Service) => snap.remove_service(&key),
        Some(Kind::ClusterProfile) => {
            snap.remove_fleet_member(&format!("{}/{}", key.namespace, key.name))
        }
        Some(Kind::Crd) | None => {}
    }
}

/// Where and how the objects of one primary kind are read: the controller watches each
/// row of [`sources`], and the live commands list each once, with the same trimming.
#[derive(Clone, Debug)]
pub struct Source {
    /// What its objects are to the snapshot.
    pub kind: Kind,
    /// Where the API server serves it.
    pub resource: kube::core::ApiResource,
    /// Read by metadata only (only existence, or a name, matters).
    pub metadata_only: bool,
    /// A field selector.
    pub fields: Option<String>,
    /// Its CRD may be missing (looked up first; missing, nothing of it is read).
    pub optional: bool,
    /// Objects per page of a list.
    pub page_size: u32,
    /// What the source is called (start-up steps, relist clean-up): the kind, or
    /// [`super::SECRET_METADATA`].
    pub name: String,
}

/// Objects per page of a list: what a list holds at once until it is taken apart. kube's
/// default of 500 full objects (or the metadata of 500 large Secrets) left megabytes with
/// the allocator after the start; more, smaller pages cost a few requests.
pub const PAGE: u32 = 100;

impl Source {
    fn of<K: kube::Resource<DynamicType = ()>>(kind: Kind) -> Self {
        Self {
            kind,
            resource: kube::core::ApiResource::erase::<K>(&()),
            metadata_only: false,
            fields: None,
            optional: false,
            page_size: PAGE,
            name: K::kind(&()).into_owned(),
        }
    }

    fn gateway_api(kind: Kind, version: &str, name: &str, plural: &str, optional: bool) -> Self {
        Self {
            kind,
            resource: kube::core::ApiResource::from_gvk_with_plural(
                &kube::core::GroupVersionKind::gvk(GATEWAY_API, version, name),
                plural,
            ),
            metadata_only: false,
            fields: None,
            optional,
            page_size: PAGE,
            name: name.to_owned(),
        }
    }
}

/// The primary kinds, in the order they are read: classes and blueprints, policies,
/// Gateways, every route kind, ListenerSets, Namespaces, ReferenceGrants, TLS Secrets (in
/// full but small pages; the data is dropped on the way in), other Secrets and Services
/// by their metadata (which may be large and many).
#[must_use]
pub fn sources() -> Vec<Source> {
    use gateway_api::apis::standard::{
        gatewayclasses::GatewayClass, gateways::Gateway, referencegrants::ReferenceGrant,
    };
    use k8s_openapi::api::core::v1::{Namespace, Secret, Service};
    let tls = crate::gateway::refs::TLS_SECRET_TYPE;
    let mut out = vec![
        Source::of::<GatewayClass>(Kind::GatewayClass),
        Source::of::<crate::api::GatewayClassBlueprint>(Kind::Blueprint),
        Source {
            optional: true,
            ..Source::of::<crate::api::GatewayClassBlueprintRevision>(Kind::Revision)
        },
        Source::of::<crate::api::GatewayClassConfig>(Kind::ClassConfig),
        Source::of::<crate::api::GatewayConfig>(Kind::GatewayConfig),
        Source::of::<Gateway>(Kind::Gateway),
    ];
    for row in route_kinds::ROUTE_KINDS {
        out.push(Source::gateway_api(
            Kind::Route(row),
            row.version,
            row.kind,
            row.plural,
            row.optional,
        ));
    }
    out.push(Source::gateway_api(
        Kind::ListenerSet,
        "v1",
        crate::gateway::listenersets::KIND,
        "listenersets",
        true,
    ));
    out.extend([
        Source::of::<Namespace>(Kind::Namespace),
        Source::of::<ReferenceGrant>(Kind::ReferenceGrant),
        Source {
            fields: Some(format!("type={tls}")),
            page_size: 50,
            ..Source::of::<Secret>(Kind::Secret)
        },
        Source {
            fields: Some(format!("type!={tls}")),
            metadata_only: true,
            name: super::SECRET_METADATA.to_owned(),
            ..Source::of::<Secret>(Kind::Secret)
        },
        Source {
            metadata_only: true,
            ..Source::of::<Service>(Kind::Service)
        },
    ]);
    out
}

/// What changed in the snapshot, with what a fan-out needs of the state before it
/// (`crate::plan::affected` says which work it makes).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Change {
    /// A GatewayClass was put or removed.
    GatewayClass {
        /// Its name.
        name: String,
        /// Whether it named our controller before the change.
        was_ours: bool,
    },
    /// A blueprint.
    Blueprint {
        /// Its name.
        name: String,
        /// Removed.
        deleted: bool,
    },
    /// A blueprint revision.
    Revision {
        /// The blueprint it is a revision of.
        blueprint: String,
    },
    /// A GatewayClassConfig.
    ClassConfig {
        /// Namespace and name.
        key: Key,
    },
    /// A GatewayConfig.
    GatewayConfig {
        /// Namespace and name.
        key: Key,
    },
    /// A Gateway.
    Gateway {
        /// Namespace and name.
        key: Key,
        /// Its GatewayClass.
        class: String,
        /// Put, and the snapshot did not hold it.
        new: bool,
        /// Whether it was ours before the change (it existed and its class named our
        /// controller).
        was_ours: bool,
    },
    /// A route.
    Route {
        /// Kind, namespace and name.
        key: RouteKey,
        /// The Gateways its parentRefs named before the change.
        parents_before: Vec<Key>,
        /// Removed.
        deleted: bool,
    },
    /// A ListenerSet.
    ListenerSet {
        /// Namespace and name.
        key: Key,
        /// The Gateway it named before the change.
        parent_before: Option<Key>,
    },
    /// A Namespace.
    Namespace {
        /// Its name.
        name: String,
        /// Whether its labels changed (or it came or went).
        labels_changed: bool,
    },
    /// A ReferenceGrant.
    ReferenceGrant {
        /// Its namespace (the one it lets others refer into).
        namespace: String,
    },
    /// A Secret.
    Secret {
        /// Namespace and name.
        key: Key,
    },
    /// A Service.
    Service {
        /// Namespace and name.
        key: Key,
        /// Whether it came or went (only its existence matters).
        existence_changed: bool,
    },
    /// A CustomResourceDefinition.
    Crd,
    /// One of our children.
    Child {
        /// Its identity.
        key: super::ObjectKey,
        /// The UID of the Gateway it belongs to.
        gateway_uid: Option<String>,
        /// Removed.
        deleted: bool,
    },
}

/// The Gateways a route's parentRefs name in `snap` (directly or through a ListenerSet).
fn route_parents(snap: &Snapshot, key: &RouteKey) -> Vec<Key> {
    snap.route(key)
        .map(|r| {
            r.view
                .parent_refs
                .iter()
                .filter_map(|p| snap.gateway_of_parent(p))
                .collect()
        })
        .unwrap_or_default()
}

/// Applies one watch event to `snap`: `doc`, a `kind`, put (or removed when `deleted`, as
/// its last known state). Returns what changed.
///
/// # Errors
/// A put document that does not decode as its kind; the snapshot is left as it was.
pub fn apply(snap: &mut Snapshot, kind: Kind, doc: Value, deleted: bool) -> Result<Change, String> {
    use crate::gateway::Lookup as _;
    let key = key_of(&doc);
    let change = match kind {
        Kind::GatewayClass => Change::GatewayClass {
            was_ours: snap.class_is_ours(&key.name),
            name: key.name,
        },
        Kind::Blueprint => Change::Blueprint {
            name: key.name,
            deleted,
        },
        Kind::Revision => Change::Revision {
            blueprint: doc["spec"]["blueprint"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
        },
        Kind::ClassConfig => Change::ClassConfig { key },
        Kind::GatewayConfig => Change::GatewayConfig { key },
        Kind::Gateway => Change::Gateway {
            class: doc["spec"]["gatewayClassName"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
            new: !deleted && snap.gateway(&key).is_none(),
            was_ours: snap.gateway_is_ours(&key),
            key,
        },
        Kind::Route(row) => {
            let key = RouteKey::new(row.kind, key.namespace, key.name);
            Change::Route {
                parents_before: route_parents(snap, &key),
                key,
                deleted,
            }
        }
        Kind::ListenerSet => Change::ListenerSet {
            parent_before: snap.listener_set_parent(&key),
            key,
        },
        Kind::Namespace => {
            let before = snap.namespace_labels(&key.name).cloned();
            let mut after: BTreeMap<String, String> =
                serde_json::from_value(doc["metadata"]["labels"].clone()).unwrap_or_default();
            after
                .entry("kubernetes.io/metadata.name".into())
                .or_insert_with(|| key.name.clone());
            Change::Namespace {
                labels_changed: before != (!deleted).then_some(after),
                name: key.name,
            }
        }
        Kind::ReferenceGrant => Change::ReferenceGrant {
            namespace: key.namespace,
        },
        Kind::Secret => Change::Secret { key },
        Kind::Service => Change::Service {
            existence_changed: (snap.service_exists(&key.namespace, &key.name) == Some(true))
                == deleted,
            key,
        },
        Kind::Crd | Kind::ClusterProfile => Change::Crd,
        Kind::Child => Change::Child {
            key: super::ObjectKey::of(&doc),
            gateway_uid: labels::gateway_uid(&doc).map(str::to_owned),
            deleted,
        },
    };
    if deleted {
        remove_as(snap, kind, &doc);
    } else {
        put_as(snap, kind, doc)?;
    }
    Ok(change)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn gateway(name: &str) -> Value {
        json!({
            "apiVersion": "gateway.networking.k8s.io/v1",
            "kind": "Gateway",
            "metadata": {"namespace": "apps", "name": name, "uid": format!("uid-{name}")},
            "spec": {"gatewayClassName": "c", "listeners": [{"name": "http", "port": 80, "protocol": "HTTP"}]}
        })
    }

    #[test]
    fn a_gateway_goes_in_and_out() {
        let mut s = Snapshot::new("gatewright-system");
        assert_eq!(put(&mut s, gateway("a")), Ok(Some(Kind::Gateway)));
        assert!(s.gateway(&Key::new("apps", "a")).is_some());
        remove(&mut s, &gateway("a"));
        assert!(s.gateway(&Key::new("apps", "a")).is_none());
    }

    #[test]
    fn a_gateway_with_our_labels_is_a_child() {
        let mut g = gateway("child");
        g["metadata"]["labels"] = json!({
            labels::MANAGED_BY: labels::MANAGED_BY_VALUE,
            labels::PARENT_UID: "uid-parent",
        });
        let mut s = Snapshot::new("gatewright-system");
        assert_eq!(put(&mut s, g.clone()), Ok(Some(Kind::Child)));
        assert!(s.gateway(&Key::new("apps", "child")).is_none());
        assert_eq!(s.children_of("uid-parent").count(), 1);
        remove(&mut s, &g);
        assert_eq!(s.children_of("uid-parent").count(), 0);
    }

    #[test]
    fn a_route_of_every_kind_is_a_route_and_a_bad_one_says_why() {
        for row in route_kinds::ROUTE_KINDS {
            let r = json!({
                "apiVersion": row.api_version(),
                "kind": row.kind,
                "metadata": {"namespace": "apps", "name": "r"},
                "spec": {"parentRefs": [{"name": "a"}]}
            });
            let mut s = Snapshot::new("gatewright-system");
            assert_eq!(
                put(&mut s, r.clone()),
                Ok(Some(Kind::Route(row))),
                "{}",
                row.kind
            );
            assert!(s.route(&RouteKey::new(row.kind, "apps", "r")).is_some());
            remove(&mut s, &r);
            assert!(s.route(&RouteKey::new(row.kind, "apps", "r")).is_none());
        }
        let bad = json!({
            "apiVersion": "gateway.networking.k8s.io/v1",
            "kind": "HTTPRoute",
            "metadata": {"namespace": "apps", "name": "bad"},
            "spec": {"parentRefs": "not a list"}
        });
        let err = put(&mut Snapshot::new("x"), bad).expect_err("a list is required");
        assert!(err.starts_with("HTTPRoute \"bad\""), "{err}");
    }

    #[test]
    fn a_secret_without_type_is_known_by_its_metadata() {
        let mut s = Snapshot::new("x");
        let meta = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"namespace": "apps", "name": "s"}});
        assert_eq!(put(&mut s, meta), Ok(Some(Kind::Secret)));
        assert!(s.secret_type_unknown(&Key::new("apps", "s")));
        let full = json!({"apiVersion": "v1", "kind": "Secret", "type": "Opaque", "metadata": {"namespace": "apps", "name": "s"}});
        assert_eq!(put(&mut s, full), Ok(Some(Kind::Secret)));
        assert!(!s.secret_type_unknown(&Key::new("apps", "s")));
    }

    #[test]
    fn kinds_the_planner_does_not_read_are_left_out() {
        let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}});
        assert_eq!(put(&mut Snapshot::new("x"), cm), Ok(None));
        let other = json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "BackendTLSPolicy", "metadata": {"name": "p"}});
        assert_eq!(kind_of(&other), None);
    }
}
