//! The memory of our own status writes, to know their watch echoes: the status we last
//! wrote per object, kept as the digest of its normalized form (a fleet's statuses would
//! otherwise be held twice), and how statuses are compared (without times and nulls);
//! and, pure, what a watch event is compared with to tell it is that echo: the key our
//! write on its kind is remembered by ([`own_status_of`]), the event and the snapshot's
//! version as they compare ([`echo_view`], [`held_view`]), and whether they differ only in
//! status ([`same_but_status`]).

use std::collections::HashMap;
use std::sync::Mutex;

use gateway_api::apis::standard::gatewayclasses::GatewayClass;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::api::{GatewayClassBlueprint, GatewayClassConfig, GatewayConfig};
use crate::snapshot::ingest::{self, key_of};
use crate::snapshot::{Key, RouteKey, Snapshot};

/// The time conditions that change get as `lastTransitionTime`.
pub(crate) fn now() -> Time {
    Time(k8s_openapi::jiff::Timestamp::now())
}

/// A copy of `v` without `lastTransitionTime` anywhere, for comparing statuses.
pub(crate) fn strip_times(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(k, _)| k.as_str() != "lastTransitionTime")
                .map(|(k, v)| (k.clone(), strip_times(v)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(strip_times).collect()),
        other => other.clone(),
    }
}

/// A status as compared for echoes: without `lastTransitionTime`, without null fields.
pub(crate) fn norm_status(v: &Value) -> Value {
    let mut v = strip_times(v);
    if let Some(o) = v.as_object_mut() {
        o.retain(|_, x| !x.is_null());
    }
    v
}

/// The SHA-256 of a status in its normalized form ([`norm_status`], serialized with sorted
/// keys): what [`OwnStatus`] remembers of the statuses it wrote.
pub(crate) type StatusDigest = [u8; 32];

/// See [`StatusDigest`].
pub(crate) fn status_digest(v: &Value) -> StatusDigest {
    use sha2::Digest as _;
    let text = serde_json::to_string(&norm_status(v)).unwrap_or_default();
    sha2::Sha256::digest(text.as_bytes()).into()
}

/// The key under which the status we last wrote on an object is remembered.
pub(crate) fn own_status_key(kind: &str, namespace: &str, name: &str) -> String {
    format!("{kind}/{namespace}/{name}")
}

/// The status we last wrote per object (`Kind/namespace/name`, [`own_status_key`]): a
/// watch event that brings exactly it (and no other change) is our own echo.
#[derive(Debug, Default)]
pub(crate) struct OwnStatus(Mutex<HashMap<String, StatusDigest>>);

impl OwnStatus {
    /// Remembers the status we are about to write on `object` (`Kind/namespace/name`), so
    /// the watch event it causes is recognised as our own echo.
    pub(crate) fn expect(&self, object: String, status: &serde_json::Value) {
        let digest = status_digest(status);
        if let Ok(mut w) = self.0.lock() {
            w.insert(object, digest);
        }
    }

    /// Whether `status` on `object` is the one we last wrote.
    pub(crate) fn is_own(&self, object: &str, status: &serde_json::Value) -> bool {
        let digest = status_digest(status);
        self.0.lock().is_ok_and(|w| w.get(object) == Some(&digest))
    }

    /// Whether the cached `status` of `object` is at least as new as our last write to
    /// it: we wrote nothing there yet, or it is what we last wrote. When it is not, the
    /// watch has not brought our last write back yet, and the cache must not decide that
    /// a write is unneeded (that write's echo plans nothing, so a change whose status
    /// equals what the stale cache shows would never be written).
    pub(crate) fn cache_has_own(&self, object: &str, status: &serde_json::Value) -> bool {
        let digest = status_digest(status);
        self.0
            .lock()
            .is_ok_and(|w| w.get(object).is_none_or(|own| *own == digest))
    }

    /// Forgets what we wrote on an object that is gone.
    pub(crate) fn forget(&self, object: &str) {
        if let Ok(mut w) = self.0.lock() {
            w.remove(object);
        }
    }
}

/// The key under which our status write on an object of `kind` is remembered (none: we
/// write no status on that kind).
pub(super) fn own_status_of(kind: ingest::Kind, v: &Value) -> Option<String> {
    use ingest::Kind as K;
    let name = match kind {
        K::GatewayClass => "GatewayClass",
        K::Blueprint => "GatewayClassBlueprint",
        K::ClassConfig => "GatewayClassConfig",
        K::GatewayConfig => "GatewayConfig",
        K::Gateway => "Gateway",
        K::Route(row) => row.kind,
        K::ListenerSet => crate::gateway::listenersets::KIND,
        _ => return None,
    };
    let key = key_of(v);
    Some(own_status_key(name, &key.namespace, &key.name))
}

/// `v` as it compares with the snapshot's version: the kinds the snapshot keeps typed are
/// compared as the typed object serializes (on both sides), the others as sent.
pub(super) fn echo_view(kind: ingest::Kind, v: &Value) -> Option<Value> {
    use ingest::Kind as K;
    fn typed<T: DeserializeOwned + serde::Serialize>(v: &Value) -> Option<Value> {
        serde_json::from_value::<T>(v.clone())
            .ok()
            .and_then(|t| serde_json::to_value(t).ok())
    }
    match kind {
        K::GatewayClass => typed::<GatewayClass>(v),
        K::Blueprint => typed::<GatewayClassBlueprint>(v),
        K::ClassConfig => typed::<GatewayClassConfig>(v),
        K::GatewayConfig => typed::<GatewayConfig>(v),
        _ => None,
    }
}

/// The snapshot's version of the object `key`, a `kind`, as [`echo_view`] compares it.
pub(super) fn held_view(s: &Snapshot, kind: ingest::Kind, key: &Key) -> Option<Value> {
    use ingest::Kind as K;
    match kind {
        K::GatewayClass => s
            .class(&key.name)
            .and_then(|c| serde_json::to_value(c.as_ref()).ok()),
        K::Blueprint => s
            .blueprint(&key.name)
            .and_then(|b| serde_json::to_value(&b.object).ok()),
        K::ClassConfig => s
            .class_config(key)
            .and_then(|c| serde_json::to_value(c.as_ref()).ok()),
        K::GatewayConfig => s
            .gateway_config(key)
            .and_then(|c| serde_json::to_value(c.as_ref()).ok()),
        K::Gateway => s.gateway(key).map(|g| g.json()),
        K::Route(row) => s
            .route(&RouteKey::new(
                row.kind,
                key.namespace.clone(),
                key.name.clone(),
            ))
            .map(|r| r.json()),
        K::ListenerSet => s.listener_set(key).map(|l| l.json.clone()),
        _ => None,
    }
}

/// Whether two versions of an object differ only in `status` (and the bookkeeping that
/// comes with any write: resourceVersion, managedFields).
pub(super) fn same_but_status(old: &Value, new: &Value) -> bool {
    let strip = |v: &Value| {
        let mut v = v.clone();
        if let Some(o) = v.as_object_mut() {
            o.remove("status");
        }
        if let Some(m) = v["metadata"].as_object_mut() {
            for k in crate::render::view::STATUS_WRITE_METADATA {
                m.remove(k);
            }
        }
        v
    };
    strip(old) == strip(new)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::gateway::route_kinds::by_kind;

    fn class() -> Value {
        json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "GatewayClass",
            "metadata": {"name": "c", "resourceVersion": "1"},
            "spec": {"controllerName": crate::gateway::CONTROLLER_NAME}})
    }

    fn blueprint() -> Value {
        json!({"apiVersion": "gatewright.dev/v1alpha1", "kind": "GatewayClassBlueprint",
            "metadata": {"name": "bp", "resourceVersion": "1"},
            "spec": {"gatewayTemplates": [{"name": "cm", "template": "kind: ConfigMap\n"}]}})
    }

    fn gateway() -> Value {
        json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
            "metadata": {"name": "gw", "namespace": "infra", "uid": "u1", "resourceVersion": "1"},
            "spec": {"gatewayClassName": "c",
                "listeners": [{"name": "http", "port": 80, "protocol": "HTTP"}]}})
    }

    fn route() -> Value {
        json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
            "metadata": {"name": "r", "namespace": "app", "uid": "u2", "resourceVersion": "1"},
            "spec": {"parentRefs": [{"name": "gw", "namespace": "infra"}],
                "hostnames": ["a.example.com"]}})
    }

    fn http_route() -> ingest::Kind {
        ingest::Kind::Route(by_kind("HTTPRoute").unwrap())
    }

    /// `v` as the watch brings it after a write of `status` (a new resourceVersion, and
    /// the writer's managedFields entry).
    fn written(v: &Value, status: Value) -> Value {
        let mut v = v.clone();
        v["status"] = status;
        v["metadata"]["resourceVersion"] = json!("2");
        v["metadata"]["managedFields"] =
            json!([{"manager": "gatewright", "subresource": "status"}]);
        v
    }

    #[test]
    fn only_status_and_the_bookkeeping_of_a_write_may_differ() {
        let gw = gateway();
        let conds = json!({"conditions": [{"type": "Accepted", "status": "True"}]});
        assert!(same_but_status(&gw, &written(&gw, conds.clone())));
        let mut labelled = written(&gw, conds.clone());
        labelled["metadata"]["labels"] = json!({"team": "a"});
        assert!(!same_but_status(&gw, &labelled));
        let mut respec = written(&gw, conds);
        respec["spec"]["listeners"][0]["port"] = json!(8080);
        assert!(!same_but_status(&gw, &respec));
        let mut generation = gw.clone();
        generation["metadata"]["generation"] = json!(2);
        assert!(!same_but_status(&gw, &generation));
    }

    #[test]
    fn our_status_writes_are_keyed_per_kind_and_other_kinds_have_none() {
        use ingest::Kind as K;
        assert_eq!(
            own_status_of(K::Gateway, &gateway()).as_deref(),
            Some("Gateway/infra/gw")
        );
        assert_eq!(
            own_status_of(http_route(), &route()).as_deref(),
            Some("HTTPRoute/app/r")
        );
        assert_eq!(
            own_status_of(K::GatewayClass, &class()).as_deref(),
            Some("GatewayClass//c")
        );
        assert_eq!(
            own_status_of(K::Blueprint, &blueprint()).as_deref(),
            Some("GatewayClassBlueprint//bp")
        );
        for kind in [
            K::Namespace,
            K::Secret,
            K::Service,
            K::ReferenceGrant,
            K::Child,
        ] {
            assert_eq!(own_status_of(kind, &gateway()), None, "{kind:?}");
        }
    }

    #[test]
    fn a_status_write_echo_compares_equal_to_the_held_version_and_a_spec_change_does_not() {
        use ingest::Kind as K;
        for (kind, v) in [
            (K::GatewayClass, class()),
            (K::Blueprint, blueprint()),
            (K::Gateway, gateway()),
            (http_route(), route()),
        ] {
            let mut s = Snapshot::new("sys");
            ingest::apply(&mut s, kind, v.clone(), false).unwrap();
            let key = key_of(&v);
            let held = held_view(&s, kind, &key).unwrap_or_else(|| panic!("{kind:?} held"));
            let accepted = json!({"type": "Accepted", "status": "True", "reason": "Accepted",
                "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"});
            let echo = written(&v, json!({"conditions": [accepted]}));
            let typed = echo_view(kind, &echo);
            let new = typed.as_ref().unwrap_or(&echo);
            assert!(same_but_status(&held, new), "{kind:?}: {held} vs {new}");
            let mut edited = echo.clone();
            edited["metadata"]["annotations"] = json!({"edited": "yes"});
            let typed = echo_view(kind, &edited);
            let new = typed.as_ref().unwrap_or(&edited);
            assert!(!same_but_status(&held, new), "{kind:?}");
        }
        // Nothing is held of an object the snapshot has not seen.
        let s = Snapshot::new("sys");
        assert_eq!(held_view(&s, K::Gateway, &key_of(&gateway())), None);
    }

    #[test]
    fn the_kinds_kept_typed_compare_as_they_serialize_the_others_as_sent() {
        use ingest::Kind as K;
        assert_eq!(echo_view(K::Gateway, &gateway()), None);
        assert_eq!(echo_view(http_route(), &route()), None);
        let typed = echo_view(K::GatewayClass, &class()).unwrap();
        assert_eq!(
            typed["spec"]["controllerName"],
            crate::gateway::CONTROLLER_NAME
        );
        // What does not decode as the kind has no typed view.
        assert_eq!(echo_view(K::GatewayClass, &json!({"spec": 1})), None);
    }

    #[test]
    fn our_own_status_is_known_without_its_times_and_nulls() {
        let own = OwnStatus::default();
        let wrote = json!({"conditions": [{"type": "Accepted", "status": "True",
            "lastTransitionTime": "2026-01-01T00:00:00Z"}], "addresses": null});
        assert!(
            own.cache_has_own("Gateway/infra/gw", &json!({})),
            "nothing written yet"
        );
        own.expect("Gateway/infra/gw".into(), &wrote);
        let echoed = json!({"conditions": [{"type": "Accepted", "status": "True",
            "lastTransitionTime": "2026-01-01T00:05:00Z"}]});
        assert!(own.is_own("Gateway/infra/gw", &echoed));
        assert!(own.cache_has_own("Gateway/infra/gw", &echoed));
        let theirs = json!({"conditions": [{"type": "Accepted", "status": "False"}]});
        assert!(!own.is_own("Gateway/infra/gw", &theirs));
        assert!(
            !own.cache_has_own("Gateway/infra/gw", &theirs),
            "the write is not back yet"
        );
        assert!(!own.is_own("Gateway/infra/other", &echoed));
        own.forget("Gateway/infra/gw");
        assert!(!own.is_own("Gateway/infra/gw", &echoed));
        assert!(own.cache_has_own("Gateway/infra/gw", &theirs));
    }
}
