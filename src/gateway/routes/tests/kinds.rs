//! Every route kind: which listeners each attaches to by protocol, kinds sharing a
//! listener, and a cross-namespace backend's grant naming the route's kind.

use super::*;

/// A route of `kind` in namespace `ns` with one parentRef to infra/gw (`extra` merged
/// into it) and one backend.
fn kind_route(
    kind: &str,
    ns: &str,
    hostnames: &[&str],
    extra: serde_json::Value,
    backend: serde_json::Value,
) -> RouteView {
    let mut parent = serde_json::json!({"name": "gw", "namespace": "infra"});
    if let (Some(p), Some(e)) = (parent.as_object_mut(), extra.as_object()) {
        p.extend(e.clone());
    }
    let mut spec =
        serde_json::json!({"parentRefs": [parent], "rules": [{"backendRefs": [backend]}]});
    if !hostnames.is_empty() {
        spec["hostnames"] = serde_json::json!(hostnames);
    }
    crate::gateway::route_kinds::by_kind(kind)
        .unwrap()
        .view(&serde_json::json!({"kind": kind, "metadata": {"name": "r", "namespace": ns}, "spec": spec}))
}

fn every_protocol() -> Gateway {
    use crate::gateway::listeners::TLS_PASSTHROUGH;
    use crate::gateway::listeners::tests::tls;
    gw(vec![
        all_ns(listener("http", 80, "HTTP", None)),
        all_ns(https("https", None, None, "cert")),
        all_ns(tls(
            "pass",
            8443,
            Some("*.example.com"),
            TLS_PASSTHROUGH,
            None,
        )),
        all_ns(listener("tcp", 5432, "TCP", None)),
        all_ns(listener("udp", 53, "UDP", None)),
    ])
}

#[test]
fn each_kind_attaches_to_the_listeners_of_its_protocols() {
    let w = World::default().with_tls_secret("infra", "cert");
    let g = every_protocol();
    let eval = evaluate_gateway(&g, &w);
    assert_eq!(
        eval.accepted.reason,
        reasons::ACCEPTED,
        "{:?}",
        eval.listeners
    );
    let svc = serde_json::json!({"name": "svc", "port": 80});
    for (kind, hostnames, want) in [
        ("HTTPRoute", &["a.example.com"][..], &["http", "https"][..]),
        ("GRPCRoute", &["a.example.com"], &["http", "https"]),
        ("TLSRoute", &["a.example.com"], &["pass"]),
        ("TCPRoute", &[], &["tcp"]),
        ("UDPRoute", &[], &["udp"]),
    ] {
        let r = kind_route(kind, "app", hostnames, serde_json::json!({}), svc.clone());
        let a = attach_route(&r, &g, &eval, &w);
        assert_eq!(a.len(), 1);
        assert!(a[0].is_accepted(), "{kind}: {:?}", a[0].accepted);
        let got: Vec<&str> = a[0].listeners.iter().map(|l| l.listener.as_str()).collect();
        assert_eq!(got, want, "{kind}");
    }
    // The wrong protocol (by sectionName or port), no such listener, no matching SNI.
    for (kind, hostnames, extra, reason) in [
        (
            "TLSRoute",
            &["a.example.com"][..],
            serde_json::json!({"sectionName": "https"}),
            reasons::NOT_ALLOWED_BY_LISTENERS,
        ),
        (
            "TLSRoute",
            &["a.example.com"],
            serde_json::json!({"sectionName": "http"}),
            reasons::NOT_ALLOWED_BY_LISTENERS,
        ),
        (
            "TCPRoute",
            &[],
            serde_json::json!({"port": 53}),
            reasons::NOT_ALLOWED_BY_LISTENERS,
        ),
        (
            "UDPRoute",
            &[],
            serde_json::json!({"sectionName": "tcp"}),
            reasons::NOT_ALLOWED_BY_LISTENERS,
        ),
        (
            "GRPCRoute",
            &[],
            serde_json::json!({"sectionName": "pass"}),
            reasons::NOT_ALLOWED_BY_LISTENERS,
        ),
        (
            "TCPRoute",
            &[],
            serde_json::json!({"sectionName": "nope"}),
            reasons::NO_MATCHING_PARENT,
        ),
        (
            "TLSRoute",
            &["db.other.org"],
            serde_json::json!({}),
            reasons::NO_MATCHING_LISTENER_HOSTNAME,
        ),
    ] {
        let r = kind_route(kind, "app", hostnames, extra.clone(), svc.clone());
        let a = attach_route(&r, &g, &eval, &w);
        assert_eq!(
            (a[0].accepted.status, a[0].accepted.reason.as_str()),
            (Status::False, reason),
            "{kind} {extra}"
        );
        assert!(a[0].listeners.is_empty());
    }
    // The TLSRoute's SNI names intersect the listener's wildcard.
    let r = kind_route(
        "TLSRoute",
        "app",
        &["db.example.com", "x.other.org"],
        serde_json::json!({}),
        svc,
    );
    let a = attach_route(&r, &g, &eval, &w);
    assert_eq!(a[0].listeners[0].hostnames, ["db.example.com"]);
}

#[test]
fn routes_of_several_kinds_share_a_listener_and_count_once_each() {
    let w = World::default();
    let g = gw(vec![
        all_ns(listener("http", 80, "HTTP", None)),
        all_ns(listener("tcp", 5432, "TCP", None)),
    ]);
    let mut eval = evaluate_gateway(&g, &w);
    let svc = serde_json::json!({"name": "svc", "port": 80});
    // An HTTPRoute and a GRPCRoute of one hostname are both accepted (the spec lets
    // them share it); two TCPRoutes on one TCP listener are both accepted too.
    let routes = [
        kind_route(
            "HTTPRoute",
            "app",
            &["a.example.com"],
            serde_json::json!({}),
            svc.clone(),
        ),
        kind_route(
            "GRPCRoute",
            "app",
            &["a.example.com"],
            serde_json::json!({}),
            svc.clone(),
        ),
        kind_route("TCPRoute", "app", &[], serde_json::json!({}), svc.clone()),
        kind_route(
            "TCPRoute",
            "other",
            &[],
            serde_json::json!({"sectionName": "tcp"}),
            svc,
        ),
    ];
    let attached: Vec<Vec<ParentAttachment>> = routes
        .iter()
        .map(|r| attach_route(r, &g, &eval, &w))
        .collect();
    for (r, a) in routes.iter().zip(&attached) {
        assert!(a[0].is_accepted(), "{}: {:?}", r.kind.kind, a[0].accepted);
    }
    count_attached_routes(&mut eval, attached.iter());
    assert_eq!(eval.listeners[0].attached_routes, 2);
    assert_eq!(eval.listeners[1].attached_routes, 2);
}

#[test]
fn a_cross_namespace_backend_needs_a_grant_from_the_route_kind() {
    let far = serde_json::json!({"name": "db", "namespace": "data", "port": 5432});
    let g = gw(vec![all_ns(listener("tcp", 5432, "TCP", None))]);
    let r = kind_route("TCPRoute", "app", &[], serde_json::json!({}), far);
    let resolved = |w: &World| {
        attach_route(&r, &g, &evaluate_gateway(&g, w), w)[0]
            .resolved_refs
            .clone()
    };
    assert_eq!(
        resolved(&World::default()).reason,
        reasons::REF_NOT_PERMITTED
    );
    // A grant from HTTPRoutes says nothing of TCPRoutes.
    let http_grant = World::default().with_grant(
        "data",
        (GATEWAY_API_GROUP, "HTTPRoute", "app"),
        ("", "Service", None),
    );
    assert_eq!(resolved(&http_grant).reason, reasons::REF_NOT_PERMITTED);
    let tcp_grant = World::default().with_grant(
        "data",
        (GATEWAY_API_GROUP, "TCPRoute", "app"),
        ("", "Service", None),
    );
    assert!(
        resolved(&tcp_grant).status.is_true(),
        "{:?}",
        resolved(&tcp_grant)
    );
}
