//! Narrowing and draining decided for one pass ([`crate::plan::narrowing`]): which child
//! goes first and alone, what the others wait for, which prunes drain first.

use k8s_openapi::jiff::Timestamp;

use super::*;
use crate::plan::narrowing::{DRAIN_LOOK_AGAIN, Narrowing, narrowing};
use crate::snapshot::{Live, ObjectKey};

const OTHER: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ gateway.metadata.name ~ \"-other\" }}\n";

/// Blueprint `bp` whose `cm` (the hostnames) drains its `data.hosts`, beside `other`,
/// which does not; route children (`copy`) drain when `route_drains`.
fn drained_blueprint(w: &mut World, route_drains: bool) {
    let drain = json!({"patch": {"data": {"hosts": ""}}, "settleSeconds": 30});
    let mut copy = json!({"name": "copy", "template": ROUTE_TEMPLATE});
    if route_drains {
        copy["drain"] = json!({"patch": {"data": null}});
    }
    let bp: GatewayClassBlueprint = serde_json::from_value(json!({
        "apiVersion": "gatewright.dev/v1alpha1", "kind": "GatewayClassBlueprint",
        "metadata": {"name": "bp"},
        "spec": {
            "gatewayTemplates": [
                {"name": "cm", "template": GW_TEMPLATE, "drain": drain},
                {"name": "other", "template": OTHER},
            ],
            "routeTemplates": [copy],
        },
    }))
    .unwrap();
    w.snap.put_blueprint(bp);
}

/// A Gateway serving routes `a` and `b`, all of its children live; then `b` is gone.
fn b_removed(route_drains: bool) -> (World, Key) {
    let mut w = World::new();
    drained_blueprint(&mut w, route_drains);
    let key = w.gateway("gw", "c", &[("http", Some("*.example.com"))]);
    w.route("a", &["a.example.com"], &["gw"]);
    w.route("b", &["b.example.com"], &["gw"]);
    w.make_live(&key);
    w.snap.remove_route(&RouteKey::new("HTTPRoute", "app", "b"));
    (w, key)
}

/// This pass's narrowing of `key`'s plan against the snapshot's live children.
fn pass(w: &World, key: &Key, now: Timestamp) -> Narrowing {
    let p = plan(&w.snap, key).unwrap();
    let live: Vec<Option<Live>> = p
        .children()
        .map(|c| w.snap.child(&c.key).map(Live::parsed))
        .collect();
    narrowing(&p, &live, &|k| w.snap.child(k), now)
}

/// The ConfigMap `namespace/name`.
fn cm(namespace: &str, name: &str) -> ObjectKey {
    ObjectKey {
        api_version: "v1".into(),
        kind: "ConfigMap".into(),
        namespace: namespace.into(),
        name: name.into(),
        cluster: String::new(),
    }
}

#[test]
fn a_change_that_removes_a_hostname_goes_first_and_holds_the_others() {
    let (w, key) = b_removed(false);
    let now: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
    let n = pass(&w, &key, now);
    let gw_cm = cm("infra", "gw-cm");
    // The narrowed version is applied with its start recorded.
    let instead = &n.apply_instead[&gw_cm];
    assert_eq!(instead["data"]["hosts"], "a.example.com");
    assert_eq!(
        instead["metadata"]["annotations"][labels::DRAIN_STARTED_AT],
        now.to_string()
    );
    assert_eq!(n.started, [gw_cm.to_string()]);
    assert!(n.holds);
    // Every other live child waits; the narrowing one does not.
    assert!(!n.hold.contains(&gw_cm), "{:?}", n.hold);
    assert!(n.hold.contains(&cm("infra", "gw-other")), "{:?}", n.hold);
    assert!(n.hold.contains(&cm("app", "a-copy")), "{:?}", n.hold);
    assert!(
        n.words.iter().any(|w| w.contains("narrowed")),
        "{:?}",
        n.words
    );
    assert_eq!(
        n.wake,
        Some(std::time::Duration::from_secs(DRAIN_LOOK_AGAIN))
    );
    // The route's child is no longer rendered, and its template does not drain.
    assert!(n.draining_prunes.is_empty(), "{:?}", n.draining_prunes);
}

#[test]
fn a_blueprint_that_drains_nothing_holds_nothing() {
    let mut w = World::new();
    let key = w.gateway("gw", "c", &[("http", Some("*.example.com"))]);
    w.route("a", &["a.example.com"], &["gw"]);
    w.route("b", &["b.example.com"], &["gw"]);
    w.make_live(&key);
    w.snap.remove_route(&RouteKey::new("HTTPRoute", "app", "b"));
    let n = pass(&w, &key, "2026-01-01T00:00:00Z".parse().unwrap());
    assert!(!n.holds);
    assert!(n.apply_instead.is_empty() && n.hold.is_empty() && n.started.is_empty());
    assert_eq!(n.wake, None);
}

#[test]
fn a_prune_whose_template_drains_is_drained_first_and_holds_the_others() {
    let (w, key) = b_removed(true);
    let n = pass(&w, &key, "2026-01-01T00:00:00Z".parse().unwrap());
    let pruned = cm("app", "b-copy");
    assert!(
        n.draining_prunes.contains(&pruned),
        "{:?}",
        n.draining_prunes
    );
    assert!(n.holds);
    // A prune being deleted already is not drained.
    let mut w = w;
    let mut gone = (*w.snap.child(&pruned).unwrap()).clone();
    gone["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
    w.snap.put_child(gone);
    let n = pass(&w, &key, "2026-01-01T00:00:01Z".parse().unwrap());
    assert!(
        !n.draining_prunes.contains(&pruned),
        "{:?}",
        n.draining_prunes
    );
}

#[test]
fn a_narrowed_version_once_ready_is_marked_and_the_others_wait_for_the_settle() {
    let (mut w, key) = b_removed(false);
    let gw_cm = cm("infra", "gw-cm");
    let start: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
    let n = pass(&w, &key, start);
    w.snap.put_child(n.apply_instead[&gw_cm].clone());
    // Applied and ready (a ConfigMap has no readiness rule): record when.
    let now: Timestamp = "2026-01-01T00:00:05Z".parse().unwrap();
    let n = pass(&w, &key, now);
    assert!(n.started.is_empty(), "started once: {:?}", n.started);
    let marked: Vec<(&ObjectKey, Timestamp)> = n.marks.iter().map(|(k, _, at)| (k, *at)).collect();
    assert_eq!(marked, [(&gw_cm, now)]);
    assert_eq!(
        n.wake,
        Some(std::time::Duration::from_secs(30)),
        "the settle"
    );
    assert!(n.holds && !n.hold.contains(&gw_cm));
    // The start stays on the object while it holds.
    assert_eq!(
        n.apply_instead[&gw_cm]["metadata"]["annotations"][labels::DRAIN_STARTED_AT],
        start.to_string()
    );
}

#[test]
fn a_group_taking_over_the_names_another_narrows_away_is_not_held() {
    // One drained template, its hostnames in two groups (lists, as a DNSEndpoint's
    // endpoints): `b...` names in `-cm`, the others in `-cm2`.
    const GROUPS: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ gateway.metadata.name ~ \"-cm\" }}\ndata:\n  hosts: {{ hostnames.union | select(\"startingwith\", \"b\") | list }}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ gateway.metadata.name ~ \"-cm2\" }}\ndata:\n  hosts: {{ hostnames.union | reject(\"startingwith\", \"b\") | list }}\n";
    let mut w = World::new();
    let bp: GatewayClassBlueprint = serde_json::from_value(json!({
        "apiVersion": "gatewright.dev/v1alpha1", "kind": "GatewayClassBlueprint",
        "metadata": {"name": "bp"},
        "spec": {
            "gatewayTemplates": [
                {"name": "cm", "template": GROUPS,
                 "drain": {"patch": {"data": {"hosts": []}}, "settleSeconds": 30}},
                {"name": "other", "template": OTHER},
            ],
            "routeTemplates": [{"name": "copy", "template": ROUTE_TEMPLATE}],
        },
    }))
    .unwrap();
    w.snap.put_blueprint(bp);
    let key = w.gateway("gw", "c", &[("http", Some("*.example.com"))]);
    w.route("a", &["a.example.com"], &["gw"]);
    w.route("b", &["b.example.com"], &["gw"]);
    w.make_live(&key);
    assert_eq!(
        w.snap.child(&cm("infra", "gw-cm")).unwrap()["data"]["hosts"],
        json!(["b.example.com"])
    );
    // Route b's name moves from the first group to the second.
    w.route("b", &["c.example.com"], &["gw"]);
    let n = pass(&w, &key, "2026-01-01T00:00:00Z".parse().unwrap());
    let (first, second) = (cm("infra", "gw-cm"), cm("infra", "gw-cm2"));
    assert_eq!(n.started, [first.to_string()]);
    assert!(n.holds);
    assert!(
        !n.hold.contains(&first) && !n.hold.contains(&second),
        "{:?}",
        n.hold
    );
    // Everything else waits as before.
    assert!(n.hold.contains(&cm("infra", "gw-other")), "{:?}", n.hold);
    assert!(n.hold.contains(&cm("app", "a-copy")), "{:?}", n.hold);
    assert!(n.hold.contains(&cm("app", "b-copy")), "{:?}", n.hold);
}
