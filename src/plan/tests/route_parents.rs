//! Our entries in a route's `status.parents`, beside other controllers'.

use super::*;

fn entry_for(w: &World, gw: &Key, route: &RouteKey) -> Vec<ParentAttachment> {
    let p = plan(&w.snap, gw).unwrap();
    p.status
        .routes
        .into_iter()
        .find(|r| &r.route == route)
        .map(|r| std::sync::Arc::unwrap_or_clone(r.entries))
        .unwrap_or_default()
}

#[test]
fn route_parents_keep_other_controllers_and_drop_stale_entries_of_ours() {
    let mut w = World::new();
    let one = w.gateway("one", "c", &[("http", None)]);
    let two = w.gateway("two", "c", &[("http", None)]);
    let a = w.route("a", &["a.example.com"], &["one", "two"]);
    let now = Time("2026-01-01T00:00:00Z".parse().unwrap());
    let foreign = json!({"parentRef": {"name": "x", "namespace": "infra"}, "controllerName": "example.com/other", "conditions": []});
    let stale = json!({"parentRef": {"name": "gone", "namespace": "infra"}, "controllerName": CONTROLLER_NAME, "conditions": []});
    let old_two = json!({"parentRef": {"name": "two", "namespace": "infra"}, "controllerName": CONTROLLER_NAME,
        "conditions": [{"type": "Accepted", "status": "True", "reason": "Accepted", "message": "kept", "lastTransitionTime": "2025-01-01T00:00:00Z"}]});
    let mut route = w.snap.route(&a).unwrap().json();
    route["status"]["parents"] = json!([foreign, stale, old_two]);
    let ones = entry_for(&w, &one, &a);
    let next = next_route_parents(
        &route,
        &[(&one, &ones)],
        |k| in_scope(&w.snap, k).is_ok(),
        |k| w.snap.listener_set_parent(k),
        &now,
    );
    let names: Vec<(&str, &str)> = next
        .iter()
        .map(|e| {
            (
                e["parentRef"]["name"].as_str().unwrap(),
                e["controllerName"].as_str().unwrap(),
            )
        })
        .collect();
    // Other controllers' first; ours sorted; the entry naming a Gateway not in the spec
    // is gone; the other Gateway's entry of ours is kept as it was.
    assert_eq!(
        names,
        [
            ("x", "example.com/other"),
            ("one", CONTROLLER_NAME),
            ("two", CONTROLLER_NAME)
        ]
    );
    assert_eq!(next[2]["conditions"][0]["message"], "kept");
    let accepted = &next[1]["conditions"][0];
    assert_eq!(accepted["type"], "Accepted");
    assert_eq!(accepted["observedGeneration"], 1);
    // Writing Gateway two's entries replaces the old one; the time stays when the
    // condition did not change.
    let twos = entry_for(&w, &two, &a);
    let again = next_route_parents(
        &route,
        &[(&two, &twos)],
        |k| in_scope(&w.snap, k).is_ok(),
        |k| w.snap.listener_set_parent(k),
        &now,
    );
    assert_eq!(again.len(), 2, "{again:?}");
    assert_eq!(again[1]["parentRef"]["name"], "two");
    assert_ne!(again[1]["conditions"][0]["message"], "kept");
    // A Gateway that is no longer ours loses its entry at the next write.
    w.gateway("two", "theirs", &[("http", None)]);
    let after = next_route_parents(
        &route,
        &[],
        |k| in_scope(&w.snap, k).is_ok(),
        |k| w.snap.listener_set_parent(k),
        &now,
    );
    assert_eq!(after.len(), 1, "{after:?}");
}

#[test]
fn parent_refs_compare_with_their_defaults() {
    let short = json!({"name": "gw"});
    let long = json!({"name": "gw", "group": "gateway.networking.k8s.io", "kind": "Gateway"});
    assert!(same_parent(&short, &long));
    assert!(!same_parent(
        &short,
        &json!({"name": "gw", "sectionName": "http"})
    ));
    assert!(!same_parent(&short, &json!({"name": "gw", "port": 80})));
    assert!(!same_parent(
        &short,
        &json!({"name": "gw", "namespace": "infra"})
    ));
}
