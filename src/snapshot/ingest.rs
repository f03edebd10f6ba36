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
        (OURS, "GatewayClassConfig") => Kind::ClassConfig,
        (OURS, "GatewayConfig") => Kind::GatewayConfig,
        ("", "Namespace") => Kind::Namespace,
        ("", "Secret") => Kind::Secret,
        ("", "Service") => Kind::Service,
        ("apiextensions.k8s.io", "CustomResourceDefinition") => Kind::Crd,
        _ => return None,
    })
}

fn key_of(doc: &Value) -> Key {
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
    match kind {
        Kind::Child => {
            // A child Service or Secret exists as one, too (the controller's watches of
            // those kinds see every object of them).
            match (doc["apiVersion"].as_str(), doc["kind"].as_str()) {
                (Some("v1"), Some("Service")) => snap.put_service(key_of(&doc)),
                (Some("v1"), Some("Secret")) if doc.get("type").is_some() => {
                    snap.put_secret(&de(doc.clone())?);
                }
                _ => {}
            }
            snap.put_child(doc);
        }
        Kind::GatewayClass => snap.put_class(de(doc)?),
        Kind::Blueprint => snap.put_blueprint(de(doc)?),
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
    Ok(Some(kind))
}

/// Takes `doc` (as its last known state) out of `snap`.
pub fn remove(snap: &mut Snapshot, doc: &Value) {
    let key = key_of(doc);
    match kind_of(doc) {
        Some(Kind::Child) => snap.remove_child(&super::ObjectKey::of(doc)),
        Some(Kind::GatewayClass) => snap.remove_class(&key.name),
        Some(Kind::Blueprint) => snap.remove_blueprint(&key.name),
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
        Some(Kind::Crd) | None => {}
    }
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
