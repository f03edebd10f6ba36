//! ListenerSets (Gateway API v1.7.0, GEP-1713): listeners another object adds to a parent
//! Gateway that allows them (`spec.allowedListeners`, default none). Which sets a Gateway
//! admits, in the spec's precedence order, and the view of a set the evaluation reads.
//! The merge itself (conflicts decided by precedence, one evaluation of every listener)
//! is [`super::listeners::evaluate_gateway_with`].

use std::collections::BTreeMap;

use gateway_api::apis::standard::gateways::{
    Gateway, GatewayAllowedListenersNamespacesFrom, GatewayListeners,
};
use serde_json::Value;

use super::lookup::{GATEWAY_API_GROUP, Lookup};

/// The kind.
pub const KIND: &str = "ListenerSet";

/// What the semantics need of a ListenerSet.
#[derive(Clone, Debug, PartialEq)]
pub struct ListenerSetView {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// `metadata.generation`.
    pub generation: i64,
    /// `metadata.creationTimestamp` (RFC 3339 sorts as text).
    pub created: String,
    /// The Gateway `spec.parentRef` names (namespace defaulted to the set's), if it names
    /// a Gateway.
    pub parent: Option<(String, String)>,
    /// Its listeners, in the shape of a Gateway's.
    pub listeners: Vec<GatewayListeners>,
    /// Why a listener entry could not be read, if one could not.
    pub unreadable: Option<String>,
}

impl ListenerSetView {
    /// From a ListenerSet's JSON.
    #[must_use]
    pub fn from_json(v: &Value) -> Self {
        let namespace = v["metadata"]["namespace"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let p = &v["spec"]["parentRef"];
        let parent = (p["group"].as_str().unwrap_or(GATEWAY_API_GROUP) == GATEWAY_API_GROUP
            && p["kind"].as_str().unwrap_or("Gateway") == "Gateway"
            && p["name"].as_str().is_some_and(|n| !n.is_empty()))
        .then(|| {
            (
                p["namespace"]
                    .as_str()
                    .filter(|n| !n.is_empty())
                    .unwrap_or(&namespace)
                    .to_owned(),
                p["name"].as_str().unwrap_or_default().to_owned(),
            )
        });
        let mut unreadable = None;
        let listeners = v["spec"]["listeners"]
            .as_array()
            .map_or(&[][..], Vec::as_slice)
            .iter()
            .filter_map(
                |l| match serde_json::from_value::<GatewayListeners>(l.clone()) {
                    Ok(l) => Some(l),
                    Err(e) => {
                        unreadable.get_or_insert_with(|| {
                            format!("listener {}: {e}", l["name"].as_str().unwrap_or("?"))
                        });
                        None
                    }
                },
            )
            .collect();
        Self {
            name: v["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
            generation: v["metadata"]["generation"].as_i64().unwrap_or(0),
            created: v["metadata"]["creationTimestamp"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
            namespace,
            parent,
            listeners,
            unreadable,
        }
    }

    /// `(namespace, name)`.
    #[must_use]
    pub fn key(&self) -> (String, String) {
        (self.namespace.clone(), self.name.clone())
    }
}

/// Whether `gw` admits ListenerSets from `namespace` (`spec.allowedListeners.namespaces`;
/// without it, none). `Err` says why not, for the set's `Accepted=False/NotAllowed`.
///
/// # Errors
/// The reason, in words.
pub fn allowed(gw: &Gateway, namespace: &str, lookup: &dyn Lookup) -> Result<(), String> {
    let gw_ns = gw.metadata.namespace.as_deref().unwrap_or_default();
    let what = || {
        format!(
            "Gateway {gw_ns}/{} does not allow ListenerSets from namespace {namespace:?}",
            gw.metadata.name.as_deref().unwrap_or_default()
        )
    };
    let ns = gw
        .spec
        .allowed_listeners
        .as_ref()
        .and_then(|a| a.namespaces.as_ref());
    let ok = match ns.and_then(|n| n.from.as_ref()) {
        None | Some(GatewayAllowedListenersNamespacesFrom::None) => {
            return Err(format!(
                "{} (its spec.allowedListeners allows none)",
                what()
            ));
        }
        Some(GatewayAllowedListenersNamespacesFrom::Same) => namespace == gw_ns,
        Some(GatewayAllowedListenersNamespacesFrom::All) => true,
        Some(GatewayAllowedListenersNamespacesFrom::Selector) => {
            ns.and_then(|n| n.selector.as_ref()).is_some_and(|sel| {
                use super::LabelSelectorLike;
                sel.matches(
                    lookup
                        .namespace_labels(namespace)
                        .unwrap_or(&BTreeMap::new()),
                )
            })
        }
    };
    if ok { Ok(()) } else { Err(what()) }
}

/// The spec's precedence among ListenerSets of one Gateway: oldest first, then by
/// `namespace/name`.
pub fn sort_by_precedence(sets: &mut [&ListenerSetView]) {
    sets.sort_by(|a, b| {
        (a.created.as_str(), a.namespace.as_str(), a.name.as_str()).cmp(&(
            b.created.as_str(),
            b.namespace.as_str(),
            b.name.as_str(),
        ))
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gateway::listeners::tests::{World, gw, listener};
    use serde_json::json;

    fn set(ns: &str, name: &str, created: &str, parent: Value) -> ListenerSetView {
        ListenerSetView::from_json(&json!({
            "metadata": {"namespace": ns, "name": name, "generation": 2, "creationTimestamp": created},
            "spec": {"parentRef": parent, "listeners": [
                {"name": "a", "port": 8080, "protocol": "HTTP", "hostname": "a.example.com"}]}
        }))
    }

    #[test]
    fn a_set_reads_its_parent_and_listeners() {
        let s = set(
            "team",
            "s",
            "2026-01-01T00:00:00Z",
            json!({"name": "gw", "namespace": "infra"}),
        );
        assert_eq!(s.parent, Some(("infra".into(), "gw".into())));
        assert_eq!(s.listeners[0].port, 8080);
        assert_eq!(s.listeners[0].hostname.as_deref(), Some("a.example.com"));
        let s = set("team", "s", "", json!({"name": "gw"}));
        assert_eq!(
            s.parent,
            Some(("team".into(), "gw".into())),
            "defaults to its namespace"
        );
        let s = set("team", "s", "", json!({"name": "gw", "kind": "Other"}));
        assert_eq!(s.parent, None);
    }

    #[test]
    fn a_gateway_allows_sets_by_namespace() {
        use gateway_api::apis::standard::gateways::{
            GatewayAllowedListeners, GatewayAllowedListenersNamespaces,
            GatewayAllowedListenersNamespacesSelector,
        };
        let w = World::default().with_namespace("team", &[("shared", "yes")]);
        let with = |from: Option<GatewayAllowedListenersNamespacesFrom>| {
            let mut g = gw(vec![listener("http", 80, "HTTP", None)]);
            g.spec.allowed_listeners = from.map(|f| GatewayAllowedListeners {
                namespaces: Some(GatewayAllowedListenersNamespaces {
                    from: Some(f),
                    selector: Some(GatewayAllowedListenersNamespacesSelector {
                        match_labels: Some(BTreeMap::from([("shared".into(), "yes".into())])),
                        match_expressions: None,
                    }),
                }),
            });
            g
        };
        use GatewayAllowedListenersNamespacesFrom as F;
        let e = allowed(&with(None), "infra", &w).unwrap_err();
        assert!(e.contains("allows none"), "{e}");
        assert!(allowed(&with(Some(F::None)), "infra", &w).is_err());
        assert!(allowed(&with(Some(F::Same)), "infra", &w).is_ok());
        assert!(allowed(&with(Some(F::Same)), "team", &w).is_err());
        assert!(allowed(&with(Some(F::All)), "team", &w).is_ok());
        assert!(allowed(&with(Some(F::Selector)), "team", &w).is_ok());
        assert!(allowed(&with(Some(F::Selector)), "other", &w).is_err());
    }

    #[test]
    fn precedence_is_age_then_name() {
        let a = set("b", "x", "2026-01-02T00:00:00Z", json!({"name": "gw"}));
        let b = set("a", "y", "2026-01-02T00:00:00Z", json!({"name": "gw"}));
        let c = set("z", "z", "2026-01-01T00:00:00Z", json!({"name": "gw"}));
        let mut v = vec![&a, &b, &c];
        sort_by_precedence(&mut v);
        let names: Vec<&str> = v.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["z", "y", "x"]);
    }

    fn allowing_all(listeners: Vec<GatewayListeners>) -> Gateway {
        use gateway_api::apis::standard::gateways::{
            GatewayAllowedListeners, GatewayAllowedListenersNamespaces,
        };
        let mut g = gw(listeners);
        g.spec.allowed_listeners = Some(GatewayAllowedListeners {
            namespaces: Some(GatewayAllowedListenersNamespaces {
                from: Some(GatewayAllowedListenersNamespacesFrom::All),
                selector: None,
            }),
        });
        g
    }

    fn set_with(ns: &str, name: &str, created: &str, listeners: Value) -> ListenerSetView {
        ListenerSetView::from_json(&json!({
            "metadata": {"namespace": ns, "name": name, "generation": 1, "creationTimestamp": created},
            "spec": {"parentRef": {"name": "gw", "namespace": "infra"}, "listeners": listeners}
        }))
    }

    fn http(name: &str, host: &str) -> Value {
        json!({"name": name, "port": 80, "protocol": "HTTP", "hostname": host,
               "allowedRoutes": {"namespaces": {"from": "All"}}})
    }

    #[test]
    fn sets_merge_after_the_gateway_and_lose_conflicts_by_precedence() {
        use crate::gateway::conditions::reasons;
        use crate::gateway::listeners::{ClassKinds, evaluate_gateway_with};
        let w = World::default();
        let g = allowing_all(vec![listener("web", 80, "HTTP", Some("a.example.com"))]);
        let older = set_with(
            "team",
            "older",
            "2026-01-01T00:00:00Z",
            json!([
            http("dup", "a.example.com"), http("b", "b.example.com"),
            {"name": "raw", "port": 80, "protocol": "TCP"}]),
        );
        let newer = set_with(
            "team",
            "newer",
            "2026-01-02T00:00:00Z",
            json!([http("b", "b.example.com"), http("c", "c.example.com")]),
        );
        let denied = set_with(
            "team",
            "denied",
            "2026-01-01T00:00:00Z",
            json!([http("d", "d.example.com")]),
        );
        let mut g2 = g.clone();
        g2.spec.allowed_listeners = None;
        // Given newest first: precedence is by age, not by the order given.
        let e = evaluate_gateway_with(&g, &[&newer, &older], &w, &ClassKinds::all());
        let state: Vec<(Option<&str>, &str, Option<&str>)> = e
            .listeners
            .iter()
            .map(|l| {
                (
                    l.set.as_ref().map(|s| s.1.as_str()),
                    l.name.as_str(),
                    l.conflicted.as_ref().map(|c| c.reason.as_str()),
                )
            })
            .collect();
        assert_eq!(
            state,
            [
                (None, "web", None),
                (Some("older"), "dup", Some(reasons::HOSTNAME_CONFLICT)),
                (Some("older"), "b", None),
                (Some("older"), "raw", Some(reasons::PROTOCOL_CONFLICT)),
                (Some("newer"), "b", Some(reasons::HOSTNAME_CONFLICT)),
                (Some("newer"), "c", None),
            ]
        );
        assert!(
            e.accepted.status.is_true() && e.accepted.reason == reasons::ACCEPTED,
            "{:?}",
            e.accepted
        );
        assert_eq!(e.own_listeners().count(), 1);
        assert_eq!(e.attached_listener_sets(), 2);
        let older_eval = e.sets.iter().find(|s| s.name == "older").unwrap();
        assert_eq!(
            (
                older_eval.accepted.status.is_true(),
                older_eval.accepted.reason.as_str()
            ),
            (true, reasons::LISTENERS_NOT_VALID)
        );
        // A Gateway that allows none: the set is not attached and adds nothing.
        let e = evaluate_gateway_with(&g2, &[&denied], &w, &ClassKinds::all());
        assert_eq!(e.listeners.len(), 1);
        assert_eq!(e.sets[0].accepted.reason, reasons::NOT_ALLOWED);
        assert_eq!(e.attached_listener_sets(), 0);
    }

    #[test]
    fn routes_attach_to_the_listeners_of_the_parent_they_name() {
        use crate::gateway::conditions::reasons;
        use crate::gateway::listeners::{ClassKinds, evaluate_gateway_with};
        use crate::gateway::routes::{attach_route, count_attached_routes};
        let w = World::default();
        let web: GatewayListeners = serde_json::from_value(http("web", "a.example.com")).unwrap();
        let g = allowing_all(vec![web]);
        let team = set_with(
            "team",
            "team",
            "2026-01-01T00:00:00Z",
            json!([http("b", "b.example.com")]),
        );
        let mut g2 = g.clone();
        g2.spec.allowed_listeners = None;
        let route = |parent: Value, host: &str| {
            crate::gateway::route_kinds::ROUTE_KINDS[0].view(&json!({"kind": "HTTPRoute",
                "metadata": {"namespace": "app", "name": "r"},
                "spec": {"parentRefs": [parent], "hostnames": [host]}}))
        };
        let to_set = json!({"kind": "ListenerSet", "name": "team", "namespace": "team"});
        let to_gw = json!({"name": "gw", "namespace": "infra"});
        let mut e = evaluate_gateway_with(&g, &[&team], &w, &ClassKinds::all());
        // Through the set: its listener only.
        let a = attach_route(&route(to_set.clone(), "b.example.com"), &g, &e, &w);
        assert!(a[0].is_accepted(), "{:?}", a[0].accepted);
        assert_eq!(a[0].listeners[0].set, Some(("team".into(), "team".into())));
        assert_eq!(a[0].status_ref["kind"], "ListenerSet");
        // Through the Gateway: the set's hostname is not among the Gateway's own listeners.
        let b = attach_route(&route(to_gw, "b.example.com"), &g, &e, &w);
        assert_eq!(b[0].accepted.reason, reasons::NO_MATCHING_LISTENER_HOSTNAME);
        count_attached_routes(&mut e, [&a, &b]);
        let counts: Vec<i32> = e.listeners.iter().map(|l| l.attached_routes).collect();
        assert_eq!(counts, [0, 1]);
        // A set the Gateway does not allow takes no route, and says why.
        let e = evaluate_gateway_with(&g2, &[&team], &w, &ClassKinds::all());
        let c = attach_route(&route(to_set, "b.example.com"), &g2, &e, &w);
        assert_eq!(c[0].accepted.reason, reasons::NOT_ALLOWED_BY_LISTENERS);
        assert!(
            c[0].accepted.message.contains("not attached"),
            "{}",
            c[0].accepted.message
        );
    }
}
