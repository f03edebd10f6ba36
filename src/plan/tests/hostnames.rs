//! `hostnames.tls` and `precise`: which names certificates are generated for.

use super::*;

/// An HTTP listener on port 80.
fn http(name: &str, host: Option<&str>) -> Value {
    let mut l = json!({"name": name, "port": 80, "protocol": "HTTP",
        "allowedRoutes": {"namespaces": {"from": "All"}}});
    if let Some(h) = host {
        l["hostname"] = json!(h);
    }
    l
}

/// A listener on port 443 served with a generated certificate.
fn generated(name: &str, protocol: &str, host: &str) -> Value {
    json!({"name": name, "port": 443, "protocol": protocol, "hostname": host,
        "allowedRoutes": {"namespaces": {"from": "All"}},
        "tls": {"options": {"gatewright.dev/certificate": "generated"}}})
}

/// An HTTPS listener with a certificateRef of its own.
fn with_refs(name: &str, host: &str) -> Value {
    json!({"name": name, "port": 443, "protocol": "HTTPS", "hostname": host,
        "allowedRoutes": {"namespaces": {"from": "All"}},
        "tls": {"certificateRefs": [{"name": "cert"}]}})
}

/// A TLS Passthrough listener.
fn passthrough(name: &str, host: &str) -> Value {
    json!({"name": name, "port": 443, "protocol": "TLS", "hostname": host,
        "allowedRoutes": {"namespaces": {"from": "All"}}, "tls": {"mode": "Passthrough"}})
}

/// `hostnames.tls`: the precise names of the listeners served with a generated certificate
/// (HTTPS, or TLS `Terminate`, without certificateRefs of their own), beside `precise`.
#[test]
fn hostnames_tls_lists_only_names_served_with_a_generated_certificate() {
    // Each case: what, listeners, routes as (kind, name, hostnames, sectionName), and the
    // expected `precise` and `tls`.
    type Case<'a> = (
        &'a str,
        Vec<Value>,
        Vec<Route<'a>>,
        &'a [&'a str],
        &'a [&'a str],
    );
    let cases: [Case; 7] = [
        (
            "HTTP only: no certificate",
            vec![http("http", Some("*.example.com"))],
            vec![("HTTPRoute", "shop", &["shop.example.com"], None)],
            &["shop.example.com"],
            &[],
        ),
        (
            "HTTPS with certificateRefs of its own",
            vec![with_refs("https", "*.example.com")],
            vec![("HTTPRoute", "shop", &["shop.example.com"], None)],
            &["shop.example.com"],
            &[],
        ),
        (
            "HTTPS generated",
            vec![generated("https", "HTTPS", "*.example.com")],
            vec![("HTTPRoute", "shop", &["shop.example.com"], None)],
            &["shop.example.com"],
            &["shop.example.com"],
        ),
        (
            "HTTP and HTTPS generated on one hostname: tls is precise",
            vec![
                http("http", Some("*.example.com")),
                generated("https", "HTTPS", "*.example.com"),
            ],
            vec![
                ("HTTPRoute", "b", &["b.example.com", "a.example.com"], None),
                ("HTTPRoute", "a", &["a.example.com", "*.example.com"], None),
            ],
            &["a.example.com", "b.example.com"],
            &["a.example.com", "b.example.com"],
        ),
        (
            "Passthrough: in neither; TLS Terminate generated: in both",
            vec![
                passthrough("pass", "db.example.com"),
                generated("term", "TLS", "mq.example.com"),
            ],
            vec![
                ("TLSRoute", "db", &["db.example.com"], None),
                ("TLSRoute", "mq", &["mq.example.com"], None),
            ],
            &["mq.example.com"],
            &["mq.example.com"],
        ),
        (
            "mixed: a route on HTTP and HTTPS generated brings the names HTTPS intersects",
            vec![
                http("http", None),
                generated("https", "HTTPS", "*.example.com"),
                with_refs("own", "*.shop.org"),
            ],
            vec![
                ("HTTPRoute", "r1", &["b.other.org", "a.example.com"], None),
                ("HTTPRoute", "r2", &["x.shop.org"], None),
                ("HTTPRoute", "r3", &["c.example.com"], Some("http")),
                ("HTTPRoute", "r4", &["a.example.com"], Some("http")),
            ],
            &[
                "a.example.com",
                "b.other.org",
                "c.example.com",
                "x.shop.org",
            ],
            &["a.example.com"],
        ),
        (
            "no route: nothing",
            vec![generated("https", "HTTPS", "*.example.com")],
            vec![],
            &[],
            &[],
        ),
    ];
    for (what, listeners, routes, precise, tls) in cases {
        let w = tls_world(listeners, &routes);
        let p = plan_gateway(&w.snap, &Key::new("infra", "gw")).unwrap();
        assert!(
            p.listeners.iter().all(|l| l.is_valid()),
            "{what}: {:?}",
            p.listeners
        );
        assert!(
            p.attachments.iter().all(|(_, a)| a[0].is_accepted()),
            "{what}: {:?}",
            p.attachments
        );
        assert_eq!(p.context.hostnames.precise, precise, "{what}: precise");
        assert_eq!(p.context.hostnames.tls, tls, "{what}: tls");
    }
}

/// A route of a case: kind, name, hostnames, sectionName.
type Route<'a> = (&'a str, &'a str, &'a [&'a str], Option<&'a str>);

/// A world with Gateway `infra/gw` of class `c` with `listeners` (its certificateRefs
/// name a valid Secret `infra/cert`), its blueprint rendering one Gateway template, and
/// `routes` under it.
fn tls_world(listeners: Vec<Value>, routes: &[Route<'_>]) -> World {
    use crate::gateway::refs::tests::{CERT, KEY, secret};
    let mut w = World::new();
    let bp: GatewayClassBlueprint = serde_json::from_value(json!({
        "apiVersion": "gatewright.dev/v1alpha1", "kind": "GatewayClassBlueprint",
        "metadata": {"name": "bp"},
        "spec": {"routeKinds": ["HTTPRoute", "TLSRoute"],
            "gatewayTemplates": [{"name": "cm", "template": GW_TEMPLATE}]},
    }))
    .unwrap();
    w.snap.put_blueprint(bp);
    let mut s = secret(
        crate::gateway::refs::TLS_SECRET_TYPE,
        CERT.as_bytes(),
        KEY.as_bytes(),
    );
    s.metadata.name = Some("cert".into());
    s.metadata.namespace = Some("infra".into());
    w.snap.put_secret(&s);
    let gw: Gateway = serde_json::from_value(json!({
        "apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
        "metadata": {"name": "gw", "namespace": "infra", "uid": "uid-gw", "generation": 1},
        "spec": {"gatewayClassName": "c", "listeners": listeners},
    }))
    .unwrap();
    w.snap.put_gateway(gw);
    for &(kind, name, hostnames, section) in routes {
        let mut parent = json!({"name": "gw", "namespace": "infra"});
        if let Some(s) = section {
            parent["sectionName"] = json!(s);
        }
        w.snap.put_route_json(json!({
            "apiVersion": "gateway.networking.k8s.io/v1", "kind": kind,
            "metadata": {"name": name, "namespace": "app", "uid": format!("uid-{name}"), "generation": 1},
            "spec": {"parentRefs": [parent], "hostnames": hostnames},
        }));
    }
    w
}
