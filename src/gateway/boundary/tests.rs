use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::*;

/// What a test's parent accepted: `pairs` (listener, hostnames), of listeners `keys`
/// (admin.example.com and *.apps.example.com for `admin` and `apps`, port 8000). The
/// hostnames are leaked: a test's data lives as long as the test.
fn accepted(pairs: &[(&'static str, &[&str])], keys: &[&'static str]) -> RouteAccepted<'static> {
    RouteAccepted {
        listeners: pairs
            .iter()
            .map(|(k, h)| {
                let names: Vec<String> = h.iter().map(|s| (*s).to_owned()).collect();
                (*k, &*Vec::leak(names))
            })
            .collect(),
        parent_listeners: Vec::leak(
            keys.iter()
                .map(|k| {
                    let host = match *k {
                        "admin" => Some("admin.example.com".to_owned()),
                        "apps" => Some("*.apps.example.com".to_owned()),
                        _ => None,
                    };
                    ((*k).to_owned(), 8000, host)
                })
                .collect(),
        ),
    }
}

fn child() -> Value {
    json!({
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "Gateway",
        "metadata": {"name": "shared-traefik", "namespace": "infra"},
        "spec": {"listeners": [
            {"name": "admin", "port": 8000, "protocol": "HTTP", "hostname": "admin.example.com"},
            {"name": "apps", "port": 8000, "protocol": "HTTP", "hostname": "*.apps.example.com"},
        ]},
    })
}

fn single() -> Value {
    json!({
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "Gateway",
        "metadata": {"name": "shared-istio", "namespace": "infra"},
        "spec": {"listeners": [{"name": "http", "port": 80, "protocol": "HTTP"}]},
    })
}

fn copy(refs: Value, hostnames: Option<Value>) -> Value {
    let mut spec = json!({"parentRefs": refs, "rules": []});
    if let Some(h) = hostnames {
        spec["hostnames"] = h;
    }
    json!({
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "HTTPRoute",
        "metadata": {"name": "c", "namespace": "tenant"},
        "spec": spec,
    })
}

fn judge(copy: &Value, a: &RouteAccepted<'_>) -> Verdict {
    let (c, s) = (child(), single());
    check_route(copy, "tenant", a, &[&c, &s])
}

fn refused(v: &Verdict) -> bool {
    matches!(v, Verdict::Refused(_))
}

#[test]
fn the_tenant_route_of_the_issue_is_refused_unless_narrowed() {
    let a = accepted(&[("apps", &["foo.apps.example.com"])], &["admin", "apps"]);
    let to = |section: Option<&str>| {
        let mut r = json!({"name": "shared-traefik", "namespace": "infra"});
        if let Some(s) = section {
            r["sectionName"] = json!(s);
        }
        json!([r])
    };
    // The copy as the shipped classes rendered it before: the route's own hostnames, no
    // sectionName.
    let before = copy(
        to(None),
        Some(json!(["foo.apps.example.com", "admin.example.com"])),
    );
    let v = judge(&before, &a);
    assert!(refused(&v), "{v:?}");
    let Verdict::Refused(why) = v else {
        unreachable!()
    };
    assert!(why.contains("\"admin\""), "{why}");
    // Narrowed to the listener but keeping the other hostname: admin.example.com does not
    // intersect *.apps.example.com, so it is served nowhere: within.
    let narrowed = copy(
        to(Some("apps")),
        Some(json!(["foo.apps.example.com", "admin.example.com"])),
    );
    assert_eq!(judge(&narrowed, &a), Verdict::Within);
    let after = copy(to(Some("apps")), Some(json!(["foo.apps.example.com"])));
    assert_eq!(judge(&after, &a), Verdict::Within);
    // No hostname on a listener that accepted only one name: the whole wildcard is served.
    let wide = copy(to(Some("apps")), None);
    assert!(refused(&judge(&wide, &a)));
    // Attached to the listener that refused it.
    // Attached to the listener that refused it: refused, whatever hostnames it lists.
    let admin = copy(to(Some("admin")), Some(json!(["foo.apps.example.com"])));
    assert!(refused(&judge(&admin, &a)));
    let admin = copy(to(Some("admin")), None);
    assert!(refused(&judge(&admin, &a)));
}

#[test]
fn a_route_without_hostnames_keeps_the_listener_hostname() {
    // A route without hostnames accepted on `apps` only: the parent accepted the wildcard.
    let a = accepted(&[("apps", &["*.apps.example.com"])], &["admin", "apps"]);
    let refs = json!([{"name": "shared-traefik", "namespace": "infra", "sectionName": "apps"}]);
    assert_eq!(
        judge(&copy(refs.clone(), Some(json!(["*.apps.example.com"]))), &a),
        Verdict::Within
    );
    assert_eq!(judge(&copy(refs, Some(json!([]))), &a), Verdict::Within);
    let all = json!([{"name": "shared-traefik", "namespace": "infra"}]);
    let v = judge(&copy(all, Some(json!([]))), &a);
    assert!(refused(&v), "{v:?}");
}

#[test]
fn a_single_listener_child_stands_for_every_parent_listener() {
    let a = accepted(&[("apps", &["foo.apps.example.com"])], &["admin", "apps"]);
    let refs = json!([{"name": "shared-istio", "namespace": "infra"}]);
    assert_eq!(
        judge(
            &copy(refs.clone(), Some(json!(["foo.apps.example.com"]))),
            &a
        ),
        Verdict::Within
    );
    assert!(refused(&judge(
        &copy(
            refs.clone(),
            Some(json!(["foo.apps.example.com", "admin.example.com"]))
        ),
        &a
    )));
    assert!(refused(&judge(&copy(refs.clone(), None), &a)));
    // A catch-all acceptance (a listener without hostname, a route without): anything.
    let open = accepted(&[("http", &[])], &["http"]);
    assert_eq!(judge(&copy(refs, None), &open), Verdict::Within);
}

#[test]
fn parents_that_are_not_rendered_gateways() {
    let a = accepted(&[("apps", &["foo.apps.example.com"])], &["apps"]);
    let svc = json!([{"group": "", "kind": "Service", "name": "x"}]);
    assert!(refused(&judge(&copy(svc, None), &a)));
    let set = json!([{"kind": "ListenerSet", "name": "x"}]);
    assert!(refused(&judge(&copy(set, None), &a)));
    // A Gateway not rendered (yet): judged as if it had the parent's listeners.
    let a = accepted(&[("apps", &["foo.apps.example.com"])], &["admin", "apps"]);
    let other = |section: Option<&str>| {
        let mut r = json!({"name": "elsewhere", "namespace": "infra"});
        if let Some(s) = section {
            r["sectionName"] = json!(s);
        }
        json!([r])
    };
    assert!(refused(&judge(&copy(other(Some("admin")), None), &a)));
    assert!(
        refused(&judge(&copy(other(Some("apps")), None), &a)),
        "the whole wildcard"
    );
    assert_eq!(
        judge(
            &copy(other(Some("apps")), Some(json!(["foo.apps.example.com"]))),
            &a
        ),
        Verdict::Within
    );
    assert_eq!(
        judge(
            &copy(other(None), Some(json!(["foo.apps.example.com"]))),
            &a
        ),
        Verdict::Within
    );
    assert!(refused(&judge(
        &copy(other(None), Some(json!(["admin.example.com"]))),
        &a
    )));
    assert!(refused(&judge(&copy(other(None), None), &a)));
    // Accepted nowhere: nothing may be served, not even through a listener standing for all.
    let nowhere = accepted(&[], &["admin", "apps"]);
    let refs = json!([{"name": "shared-istio", "namespace": "infra"}]);
    assert!(refused(&judge(
        &copy(refs, Some(json!(["foo.apps.example.com"]))),
        &nowhere
    )));
    // Not a route: not judged.
    let svc = json!({"apiVersion": "v1", "kind": "Service", "spec": {"parentRefs": [{"kind": "Service"}]}});
    assert_eq!(judge(&svc, &a), Verdict::Within);
}

#[test]
fn a_port_selects_like_a_section() {
    let a = accepted(&[("apps", &["foo.apps.example.com"])], &["admin", "apps"]);
    let wrong_port = json!([{"name": "shared-traefik", "namespace": "infra", "port": 9999}]);
    assert_eq!(
        judge(&copy(wrong_port, None), &a),
        Verdict::Within,
        "attaches nowhere"
    );
    // Port 8000 is both listeners': `admin` refused the route.
    let port = json!([{"name": "shared-traefik", "namespace": "infra", "port": 8000}]);
    assert!(refused(&judge(
        &copy(port, Some(json!(["foo.apps.example.com"]))),
        &a
    )));
    let both = accepted(
        &[
            ("admin", &["admin.example.com"]),
            ("apps", &["foo.apps.example.com"]),
        ],
        &["admin", "apps"],
    );
    let port = json!([{"name": "shared-traefik", "namespace": "infra", "port": 8000}]);
    assert_eq!(
        judge(
            &copy(
                port.clone(),
                Some(json!(["foo.apps.example.com", "admin.example.com"]))
            ),
            &both
        ),
        Verdict::Within
    );
    assert!(
        refused(&judge(&copy(port, None), &both)),
        "the whole wildcard of apps"
    );
}

fn gateway_with(listeners: Value) -> Value {
    json!({
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "Gateway",
        "metadata": {"name": "shared-traefik", "namespace": "infra"},
        "spec": {"listeners": listeners},
    })
}

#[test]
fn child_listeners_admit_no_more_namespaces_than_the_parent() {
    let same = child_namespaces(Some(&json!({"from": "Same"})), "infra", "infra");
    let all = child_namespaces(Some(&json!({"from": "All"})), "infra", "infra");
    let set_same = child_namespaces(None, "team", "infra");
    assert_eq!(
        set_same,
        json!({"from": "Selector", "selector": {"matchLabels": {"kubernetes.io/metadata.name": "team"}}})
    );
    let sel = json!({"from": "Selector", "selector": {"matchLabels": {"tier": "gold"}}});
    let sel = child_namespaces(Some(&sel), "infra", "infra");
    let parents: BTreeMap<&str, &Value> = [
        ("admin", &same),
        ("apps", &all),
        ("set-a", &set_same),
        ("gold", &sel),
    ]
    .into_iter()
    .collect();
    let ok = gateway_with(json!([
        {"name": "admin", "allowedRoutes": {"namespaces": {"from": "Same"}}},
        {"name": "apps", "allowedRoutes": {"namespaces": {"from": "All"}}},
        {"name": "set-a", "allowedRoutes": {"namespaces": set_same.clone()}},
        {"name": "gold", "allowedRoutes": {"namespaces": sel.clone()}},
        {"name": "extra", "allowedRoutes": {"namespaces": {"from": "All"}}},
    ]));
    assert_eq!(check_child_gateway(&ok, "infra", &parents), Verdict::Within);
    // A default (no allowedRoutes) is Same.
    let default = gateway_with(json!([{"name": "admin"}]));
    assert_eq!(
        check_child_gateway(&default, "infra", &parents),
        Verdict::Within
    );
    // Same written as a selector on the namespace's name is the same.
    let spelled = gateway_with(
        json!([{"name": "admin", "allowedRoutes": {"namespaces": {"from": "Selector", "selector": {"matchLabels": {"kubernetes.io/metadata.name": "infra"}}}}}]),
    );
    assert_eq!(
        check_child_gateway(&spelled, "infra", &parents),
        Verdict::Within
    );
    for (name, wider) in [
        ("admin", json!({"from": "All"})),
        (
            "admin",
            json!({"from": "Selector", "selector": {"matchLabels": {"tier": "gold"}}}),
        ),
        ("set-a", json!({"from": "Same"})),
        ("set-a", json!({"from": "All"})),
        ("gold", json!({"from": "All"})),
        ("gold", json!({"from": "Selector", "selector": {}})),
    ] {
        let g = gateway_with(json!([{"name": name, "allowedRoutes": {"namespaces": wider}}]));
        let v = check_child_gateway(&g, "infra", &parents);
        assert!(refused(&v), "{name} {wider}: {v:?}");
    }
    let Verdict::Refused(why) = check_child_gateway(
        &gateway_with(json!([{"name": "admin", "allowedRoutes": {"namespaces": {"from": "All"}}}])),
        "infra",
        &parents,
    ) else {
        unreachable!()
    };
    assert!(
        why.contains("every namespace") && why.contains("its own namespace"),
        "{why}"
    );
}
