use super::*;
use serde_json::json;

#[test]
fn our_own_write_never_turns_the_cache_back() {
    let cm = |rv: &str, ready: bool| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "a", "resourceVersion": rv, "labels": {"gatewright.dev/parent-uid": "u", "gatewright.dev/gateway-uid": "u"}}, "status": {"ready": ready}});
    let key = ObjectKey::of(&cm("1", false));
    let mut s = Snapshot::default();
    // A create answered while nothing came by watch: stored.
    assert!(s.put_own_write(cm("1", false), None, false));
    // The watch brings a newer version (someone set its status) while our next write,
    // based on version 1, is under way: its answer does not replace the newer one.
    s.put_child(cm("3", true));
    assert!(!s.put_own_write(cm("2", false), Some("1"), false));
    assert_eq!(s.child(&key).unwrap()["status"]["ready"], true);
    // Based on what the cache holds: stored.
    assert!(s.put_own_write(cm("4", true), Some("3"), false));
    assert_eq!(s.child(&key).unwrap()["metadata"]["resourceVersion"], "4");
    // A create's answer after the watch already brought the object: not stored.
    s.remove_child(&key);
    s.put_child(cm("6", true));
    assert!(!s.put_own_write(cm("5", false), None, false));
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
fn the_gateway_children_stamp_moves_with_the_children_under_the_gateway() {
    let mut s = Snapshot::new("sys");
    assert_eq!(s.gateway_children_stamp("g"), 0, "no child");
    let child = |name: &str, parent: &str| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "a", "labels": {"gatewright.dev/parent-uid": parent, "gatewright.dev/gateway-uid": "g"}}});
    s.put_child(child("x", "r1"));
    let first = s.gateway_children_stamp("g");
    assert_ne!(first, 0);
    s.put_child(child("y", "r2"));
    let second = s.gateway_children_stamp("g");
    assert_ne!(second, first, "a child added");
    s.put_child(child("y", "r3"));
    let third = s.gateway_children_stamp("g");
    assert_ne!(third, second, "a child of another parent now");
    s.put_child(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "z", "namespace": "a", "labels": {"gatewright.dev/parent-uid": "r1", "gatewright.dev/gateway-uid": "h"}}}));
    assert_eq!(
        s.gateway_children_stamp("g"),
        third,
        "another Gateway's child"
    );
    s.remove_child(&ObjectKey::of(&child("x", "r1")));
    assert_ne!(s.gateway_children_stamp("g"), third, "a child removed");
    s.remove_child(&ObjectKey::of(&child("y", "r3")));
    assert_eq!(s.gateway_children_stamp("g"), 0, "none left");
}

#[test]
fn the_fleet_stamp_moves_with_the_fleet_and_only_with_it() {
    let member = |name: &str, unserved: Option<&str>| fleet::FleetMember {
        name: name.to_owned(),
        display_name: name.to_owned(),
        labels: BTreeMap::new(),
        properties: BTreeMap::new(),
        addresses: None,
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

/// The children of Gateway uid `u` in `s`, as sorted (cluster, name) pairs.
fn children_of_u(s: &Snapshot) -> Vec<(String, String)> {
    let mut n: Vec<(String, String)> = s
        .children_by_gateway("u")
        .map(|o| {
            let k = ObjectKey::of(&o);
            (k.cluster, k.name)
        })
        .collect();
    n.sort();
    n
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
    assert_eq!(
        children_of_u(&s),
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

#[test]
fn only_gateway_api_objects_are_known_foreign_from_the_cache_by_their_group() {
    let key = |api: &str, kind: &str| ObjectKey {
        api_version: api.into(),
        kind: kind.into(),
        namespace: "a".into(),
        name: "g".into(),
        cluster: String::new(),
    };
    let mut s = Snapshot::default();
    let gateway = key("gateway.networking.k8s.io/v1", "Gateway");
    assert_eq!(s.foreign_object_exists(&gateway), Some(false));
    let gw: Gateway = serde_json::from_value(
        json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
        "metadata": {"name": "g", "namespace": "a"},
        "spec": {"gatewayClassName": "c", "listeners": []}}),
    )
    .unwrap();
    s.put_gateway(gw);
    assert_eq!(s.foreign_object_exists(&gateway), Some(true));
    // Other groups, the core group included, are known by the names listed: none here.
    assert_eq!(s.foreign_object_exists(&key("v1", "ConfigMap")), None);
    // A malformed apiVersion names no group served, not the Gateway API's.
    assert_eq!(
        s.foreign_object_exists(&key("gateway.networking.k8s.io/v1/x", "Gateway")),
        None
    );
}

#[test]
fn only_the_echo_of_a_quiet_own_write_is_quiet() {
    let cm = |rv: &str| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "a", "resourceVersion": rv, "labels": {"gatewright.dev/parent-uid": "u", "gatewright.dev/gateway-uid": "u"}}});
    let mut s = Snapshot::default();
    // Stored from a write that a plan reads back: its echo is news.
    assert!(s.put_own_write(cm("1"), None, false));
    assert!(!s.is_quiet_echo(&cm("1")));
    // From a quiet write: its echo (same version) is not; a later version is.
    assert!(s.put_own_write(cm("2"), Some("1"), true));
    assert!(s.is_quiet_echo(&cm("2")));
    assert!(!s.is_quiet_echo(&cm("3")));
    // The watch stored a version itself: no echo of ours.
    s.put_child(cm("3"));
    assert!(!s.is_quiet_echo(&cm("3")));
    // No resourceVersion (an offline object): never an echo.
    assert!(!s.is_quiet_echo(&json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "a"}})));
}

#[test]
fn a_kept_parse_is_shared_until_the_child_changes() {
    let mut s = Snapshot::default();
    let child = |v: &str| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x", "namespace": "a", "resourceVersion": v, "labels": {"gatewright.dev/parent-uid": "p", "gatewright.dev/gateway-uid": "g"}}});
    s.put_child(child("1"));
    // Read without keeping: parsed anew each time.
    let a = s.children_of("p").next().unwrap();
    assert!(!Arc::ptr_eq(&a, &s.children_of("p").next().unwrap()));
    // Kept: every later read of this version shares it.
    let kept = s.children_of_kept("p").next().unwrap();
    assert_eq!(kept, a);
    assert!(Arc::ptr_eq(&kept, &s.children_of_kept("p").next().unwrap()));
    assert!(Arc::ptr_eq(&kept, &s.children_of("p").next().unwrap()));
    assert!(Arc::ptr_eq(&kept, &s.child(&ObjectKey::of(&a)).unwrap()));
    // A new version is parsed again.
    s.put_child(child("2"));
    let now = s.children_of_kept("p").next().unwrap();
    assert_eq!(now["metadata"]["resourceVersion"], "2");
    assert!(!Arc::ptr_eq(&kept, &now));
}

#[test]
fn a_route_childs_text_is_shared_and_its_kept_parse_let_go() {
    let mut s = Snapshot::default();
    let child = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x", "namespace": "a", "resourceVersion": "1", "labels": {"gatewright.dev/parent-uid": "p", "gatewright.dev/gateway-uid": "g"}}});
    s.put_child(child.clone());
    let entry = |s: &Snapshot| s.kept_parses_under("p", "g") == 1;
    // Not kept: parsed anew.
    let (parsed, text) = s.children_of_under_texts("p", "g", false).next().unwrap();
    assert_eq!(*parsed, child);
    assert!(!entry(&s));
    assert_eq!(*text.parse(), child);
    assert!(!Arc::ptr_eq(&text.parse(), &text.parse()));
    // Kept: shared by every later read, until let go.
    let (kept, _) = s.children_of_under_texts("p", "g", true).next().unwrap();
    assert!(entry(&s));
    assert!(Arc::ptr_eq(&kept, &s.children_of("p").next().unwrap()));
    s.forget_parsed_under("p", "h");
    assert!(entry(&s), "another Gateway's: kept");
    s.forget_parsed_under("p", "g");
    assert!(!entry(&s));
    assert!(!Arc::ptr_eq(&kept, &s.children_of("p").next().unwrap()));
    // One pass's read parses once.
    let live = crate::snapshot::Live::text(text);
    assert!(Arc::ptr_eq(live.object(), live.object()));
    assert_eq!(**live.object(), child);
    // Under another Gateway: none.
    assert!(s.children_of_under_texts("p", "h", true).next().is_none());
}
