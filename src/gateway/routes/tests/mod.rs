//! Attachment (parentRefs, allowedRoutes, hostnames), backendRefs and the attachedRoutes
//! count, on HTTPRoutes; `kinds.rs` the other route kinds.

mod kinds;

use super::*;
use crate::gateway::Status;
use crate::gateway::conditions::reasons;
use crate::gateway::listeners::evaluate_gateway;
use crate::gateway::listeners::tests::{World, gw, https, listener};
use crate::gateway::lookup::GATEWAY_API_GROUP;
use gateway_api::apis::standard::gateways::{
    Gateway, GatewayListeners, GatewayListenersAllowedRoutes, GatewayListenersAllowedRoutesKinds,
    GatewayListenersAllowedRoutesNamespaces, GatewayListenersAllowedRoutesNamespacesFrom,
    GatewayListenersAllowedRoutesNamespacesSelector,
    GatewayListenersAllowedRoutesNamespacesSelectorMatchExpressions,
};
use gateway_api::apis::standard::httproutes::{
    HttpRoute, HttpRouteParentRefs, HttpRouteRules, HttpRouteRulesBackendRefs,
};

fn view(r: &HttpRoute) -> RouteView {
    super::super::route_kinds::ROUTE_KINDS[0].view(&serde_json::to_value(r).unwrap_or_default())
}

fn route(ns: &str, hostnames: &[&str], parents: Vec<HttpRouteParentRefs>) -> HttpRoute {
    let mut r = HttpRoute::default();
    r.metadata.name = Some("r".into());
    r.metadata.namespace = Some(ns.into());
    r.metadata.generation = Some(3);
    r.spec.hostnames =
        (!hostnames.is_empty()).then(|| hostnames.iter().map(|h| (*h).into()).collect());
    r.spec.parent_refs = Some(parents);
    r.spec.rules = Some(vec![HttpRouteRules {
        backend_refs: Some(vec![HttpRouteRulesBackendRefs {
            name: "svc".into(),
            port: Some(80),
            ..Default::default()
        }]),
        ..Default::default()
    }]);
    r
}

fn parent(section: Option<&str>, port: Option<i32>) -> HttpRouteParentRefs {
    HttpRouteParentRefs {
        name: "gw".into(),
        namespace: Some("infra".into()),
        section_name: section.map(Into::into),
        port,
        ..Default::default()
    }
}

fn all_ns(mut l: GatewayListeners) -> GatewayListeners {
    l.allowed_routes = Some(GatewayListenersAllowedRoutes {
        kinds: None,
        namespaces: Some(GatewayListenersAllowedRoutesNamespaces {
            from: Some(GatewayListenersAllowedRoutesNamespacesFrom::All),
            selector: None,
        }),
    });
    l
}

fn attach(g: &Gateway, r: &HttpRoute, w: &World) -> Vec<ParentAttachment> {
    attach_route(&view(r), g, &evaluate_gateway(g, w), w)
}

#[test]
fn hostname_intersection_counts() {
    let w = World::default();
    let g = gw(vec![
        listener("listener-1", 80, "HTTP", Some("very.specific.com")),
        listener("listener-2", 80, "HTTP", Some("*.wildcard.io")),
        listener("listener-3", 80, "HTTP", Some("*.anotherwildcard.io")),
    ]);
    let routes = [
        route(
            "infra",
            &[
                "non.matching.com",
                "*.nonmatchingwildcard.io",
                "very.specific.com",
            ],
            vec![parent(None, None)],
        ),
        route("infra", &["*.specific.com"], vec![parent(None, None)]),
        route(
            "infra",
            &["foo.wildcard.io", "bar.wildcard.io"],
            vec![parent(None, None)],
        ),
        route("infra", &["*.anotherwildcard.io"], vec![parent(None, None)]),
        route(
            "infra",
            &["specific.but.wrong.com", "wildcard.io"],
            vec![parent(None, None)],
        ),
    ];
    let mut eval = evaluate_gateway(&g, &w);
    let all: Vec<Vec<ParentAttachment>> = routes
        .iter()
        .map(|r| attach_route(&view(r), &g, &eval, &w))
        .collect();
    count_attached_routes(&mut eval, &all);
    let counts: Vec<i32> = eval.listeners.iter().map(|l| l.attached_routes).collect();
    assert_eq!(counts, [2, 1, 1]);
    assert_eq!(
        all[4][0].accepted.reason,
        reasons::NO_MATCHING_LISTENER_HOSTNAME
    );
    assert_eq!(
        all[2][0].listeners[0].hostnames,
        ["bar.wildcard.io", "foo.wildcard.io"]
    );
    assert_eq!(all[1][0].listeners[0].hostnames, ["very.specific.com"]);
}

#[test]
fn section_name_and_port() {
    let w = World::default();
    let g = gw(vec![
        listener("http", 80, "HTTP", None),
        listener("alt", 8080, "HTTP", None),
    ]);
    let reason = |p| {
        attach(&g, &route("infra", &[], vec![p]), &w)[0]
            .accepted
            .reason
            .clone()
    };
    assert_eq!(
        reason(parent(Some("http1"), None)),
        reasons::NO_MATCHING_PARENT
    );
    assert_eq!(reason(parent(None, Some(81))), reasons::NO_MATCHING_PARENT);
    assert_eq!(
        reason(parent(Some("http"), Some(8080))),
        reasons::NO_MATCHING_PARENT
    );
    let a = attach(
        &g,
        &route("infra", &[], vec![parent(Some("alt"), None)]),
        &w,
    );
    assert!(a[0].is_accepted());
    assert_eq!(a[0].listeners.len(), 1);
    assert_eq!(a[0].listeners[0].listener, "alt");
    let a = attach(&g, &route("infra", &[], vec![parent(None, Some(80))]), &w);
    assert_eq!(a[0].listeners[0].listener, "http");
}

#[test]
fn allowed_namespaces_and_kinds() {
    let mut w = World::default();
    w.namespaces.insert(
        "web".into(),
        BTreeMap::from([
            ("kubernetes.io/metadata.name".into(), "web".into()),
            ("team".into(), "a".into()),
        ]),
    );
    let same = gw(vec![listener("http", 80, "HTTP", None)]);
    let a = attach(&same, &route("web", &[], vec![parent(None, None)]), &w);
    assert_eq!(a[0].accepted.reason, reasons::NOT_ALLOWED_BY_LISTENERS);
    assert_eq!(
        a[0].resolved_refs.status,
        Status::True,
        "ResolvedRefs computed even when not accepted"
    );
    assert!(
        attach(
            &gw(vec![all_ns(listener("http", 80, "HTTP", None))]),
            &route("web", &[], vec![parent(None, None)]),
            &w
        )[0]
        .is_accepted()
    );
    let selector = |labels: Option<BTreeMap<String, String>>,
                    exprs: Option<
        Vec<GatewayListenersAllowedRoutesNamespacesSelectorMatchExpressions>,
    >| {
        let mut l = listener("http", 80, "HTTP", None);
        l.allowed_routes = Some(GatewayListenersAllowedRoutes {
            kinds: None,
            namespaces: Some(GatewayListenersAllowedRoutesNamespaces {
                from: Some(GatewayListenersAllowedRoutesNamespacesFrom::Selector),
                selector: Some(GatewayListenersAllowedRoutesNamespacesSelector {
                    match_labels: labels,
                    match_expressions: exprs,
                }),
            }),
        });
        gw(vec![l])
    };
    let expr =
        |op: &str, vals: &[&str]| GatewayListenersAllowedRoutesNamespacesSelectorMatchExpressions {
            key: "team".into(),
            operator: op.into(),
            values: Some(vals.iter().map(|v| (*v).into()).collect()),
        };
    let ok =
        |g: &Gateway| attach(g, &route("web", &[], vec![parent(None, None)]), &w)[0].is_accepted();
    assert!(ok(&selector(
        Some(BTreeMap::from([("team".into(), "a".into())])),
        None
    )));
    assert!(!ok(&selector(
        Some(BTreeMap::from([("team".into(), "b".into())])),
        None
    )));
    assert!(ok(&selector(None, Some(vec![expr("In", &["a", "c"])]))));
    assert!(!ok(&selector(None, Some(vec![expr("NotIn", &["a"])]))));
    assert!(ok(&selector(None, Some(vec![expr("Exists", &[])]))));
    assert!(!ok(&selector(None, Some(vec![expr("DoesNotExist", &[])]))));
    let mut tls_only = listener("tls", 80, "HTTP", None);
    tls_only.allowed_routes = Some(GatewayListenersAllowedRoutes {
        kinds: Some(vec![GatewayListenersAllowedRoutesKinds {
            group: None,
            kind: "TLSRoute".into(),
        }]),
        namespaces: None,
    });
    let a = attach(
        &gw(vec![tls_only]),
        &route("infra", &[], vec![parent(None, None)]),
        &w,
    );
    assert_eq!(a[0].accepted.reason, reasons::NOT_ALLOWED_BY_LISTENERS);
}

#[test]
fn a_route_naming_a_gateway_twice_counts_once_per_listener() {
    // The API takes these as two parents (one names the namespace, one does not), but
    // both are the route's own namespace: one Gateway, one attached route.
    let w = World::default();
    let g = gw(vec![listener("http", 80, "HTTP", None)]);
    let mut eval = evaluate_gateway(&g, &w);
    let mut implicit = parent(None, None);
    implicit.namespace = None;
    let r = route("infra", &[], vec![parent(None, None), implicit]);
    let a = attach_route(&view(&r), &g, &eval, &w);
    assert_eq!(a.len(), 2);
    assert!(a.iter().all(ParentAttachment::is_accepted));
    count_attached_routes(&mut eval, [&a]);
    assert_eq!(eval.listeners[0].attached_routes, 1);
}

#[test]
fn missing_certificate_still_attaches() {
    let w = World::default();
    let g = gw(vec![https("https", None, None, "missing")]);
    let mut eval = evaluate_gateway(&g, &w);
    let a = attach_route(
        &view(&route("infra", &[], vec![parent(None, None)])),
        &g,
        &eval,
        &w,
    );
    count_attached_routes(&mut eval, [&a]);
    assert_eq!(eval.listeners[0].attached_routes, 1);
}

#[test]
fn backends() {
    let g = gw(vec![listener("http", 80, "HTTP", None)]);
    let mut w = World {
        services: Some(vec![]),
        ..World::default()
    };
    let rr = |w: &World, r: &HttpRoute| attach(&g, r, w)[0].resolved_refs.reason.clone();
    let r = route("infra", &[], vec![parent(None, None)]);
    assert_eq!(rr(&w, &r), reasons::BACKEND_NOT_FOUND);
    w.services = Some(vec![("infra".into(), "svc".into())]);
    assert_eq!(rr(&w, &r), reasons::RESOLVED_REFS);
    let mut cross = r.clone();
    cross.spec.rules.as_mut().unwrap()[0]
        .backend_refs
        .as_mut()
        .unwrap()[0]
        .namespace = Some("other".into());
    assert_eq!(rr(&w, &cross), reasons::REF_NOT_PERMITTED);
    let mut kind = r.clone();
    kind.spec.rules.as_mut().unwrap()[0]
        .backend_refs
        .as_mut()
        .unwrap()[0]
        .kind = Some("Bucket".into());
    assert_eq!(rr(&w, &kind), reasons::INVALID_KIND);
    let a = attach(&g, &kind, &w);
    assert!(
        a[0].is_accepted(),
        "an invalid backend keeps the route accepted"
    );
}

#[test]
fn status_ref_is_echoed_with_defaults() {
    let r = route("infra", &[], vec![parent(Some("http"), None)]);
    let v = view(&r);
    assert_eq!(v.parent_refs[0].status_ref["group"], GATEWAY_API_GROUP);
    assert_eq!(v.parent_refs[0].status_ref["kind"], "Gateway");
    assert_eq!(v.parent_refs[0].status_ref["sectionName"], "http");
    assert_eq!(v.parent_refs[0].status_ref["namespace"], "infra");
}
