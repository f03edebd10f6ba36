//! Route templates and the route kinds they render for.

use super::*;

/// A blueprint whose route templates render for some kinds: a route of another kind the
/// class carries gets nothing from them (and loses what it had), a kind the class does
/// not carry is not accepted at all.
#[test]
fn route_templates_render_for_their_kinds_and_the_class_for_its_route_kinds() {
    let mut w = World::new();
    let bp: GatewayClassBlueprint = serde_json::from_value(json!({
        "apiVersion": "gatewright.dev/v1alpha1", "kind": "GatewayClassBlueprint",
        "metadata": {"name": "bp"},
        "spec": {
            "routeKinds": ["HTTPRoute", "GRPCRoute", "TCPRoute"],
            "routeTemplates": [
                {"name": "copy", "template": ROUTE_TEMPLATE, "kinds": ["HTTPRoute", "TCPRoute"]},
                {"name": "grpc", "kinds": ["GRPCRoute"], "template":
                    "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ route.metadata.name ~ \"-\" ~ (route.kind | lower) }}\n"},
            ],
        },
    }))
    .unwrap();
    w.snap.put_blueprint(bp);
    let key = w.gateway("gw", "c", &[("http", Some("*.example.com"))]);
    let route = |w: &mut World, kind: &str, name: &str| -> RouteKey {
        w.snap.put_route_json(json!({
            "apiVersion": "gateway.networking.k8s.io/v1", "kind": kind,
            "metadata": {"name": name, "namespace": "app", "uid": format!("uid-{kind}-{name}"), "generation": 1},
            "spec": {"parentRefs": [{"name": "gw", "namespace": "infra"}], "hostnames": ["a.example.com"]},
        }));
        RouteKey::new(kind, "app", name)
    };
    let http = route(&mut w, "HTTPRoute", "r");
    let grpc = route(&mut w, "GRPCRoute", "r");
    let tls = route(&mut w, "TLSRoute", "r");
    let gp = plan_gateway(&w.snap, &key).unwrap();
    let names = |rk: &RouteKey| -> Vec<String> {
        plan_route(&w.snap, &gp, rk)
            .children
            .iter()
            .map(|c| c.object["metadata"]["name"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(names(&http), ["r-copy"]);
    assert_eq!(names(&grpc), ["r-grpcroute"]);
    // The class does not carry TLSRoute (and an HTTP listener would not take it anyway).
    assert!(names(&tls).is_empty());
    let accepted = |rk: &RouteKey| {
        gp.attachments
            .iter()
            .any(|(k, a)| k == rk && a[0].is_accepted())
    };
    assert!(accepted(&http) && accepted(&grpc) && !accepted(&tls));
    assert_eq!(
        gp.listeners[0]
            .supported_kinds
            .iter()
            .map(|k| k.kind.as_str())
            .collect::<Vec<_>>(),
        ["HTTPRoute", "GRPCRoute"]
    );
    let class = crate::plan::class::plan_class(&w.snap, "c").unwrap();
    assert!(class.supported_features.contains(&"TCPRoute".to_owned()));
    assert!(class.supported_features.contains(&"GRPCRoute".to_owned()));
    assert!(!class.supported_features.contains(&"TLSRoute".to_owned()));
}

#[test]
fn route_kinds_where_they_cannot_apply_are_blueprint_errors() {
    for (spec, want) in [
        (
            json!({"gatewayTemplates": [{"name": "g", "template": "", "kinds": ["HTTPRoute"]}]}),
            "kinds applies to route templates only",
        ),
        (
            json!({"routeKinds": ["HTTPRoute"], "routeTemplates": [{"name": "r", "template": "", "kinds": ["TCPRoute"]}]}),
            "kinds: TCPRoute is not in spec.routeKinds",
        ),
        (
            json!({"routeKinds": ["Ingress"]}),
            "routeKinds: \"Ingress\" is not a route kind",
        ),
    ] {
        let spec: crate::api::GatewayClassBlueprintSpec = serde_json::from_value(spec).unwrap();
        let errors = crate::render::prepared::Prepared::new("bp", &spec).unwrap_err();
        assert!(
            errors
                .iter()
                .any(|e| e.message.contains(want) && e.category == "InvalidRouteKinds"),
            "{want}: {errors:?}"
        );
    }
    // Route templates without kinds: the class carries HTTPRoute, as before kinds existed.
    let spec: crate::api::GatewayClassBlueprintSpec =
        serde_json::from_value(json!({"routeTemplates": [{"name": "r", "template": ""}]})).unwrap();
    assert_eq!(spec.accepted_route_kinds(), ["HTTPRoute"]);
    let spec: crate::api::GatewayClassBlueprintSpec = serde_json::from_value(json!({})).unwrap();
    assert_eq!(spec.accepted_route_kinds(), ["HTTPRoute"]);
}

/// "Which blueprint a class names" is one rule everywhere: a class whose parametersRef names
/// a `GatewayClassBlueprint` of another group, or one with a namespace, does not use ours of
/// that name (before, `classes_using_blueprint` checked the kind only, so such a class's
/// Gateways were counted among a rollout's members).
#[test]
fn a_class_naming_a_blueprint_of_another_group_does_not_use_ours() {
    let mut w = World::new();
    let other = |name: &str, group: &str, ns: Option<&str>| -> GatewayClass {
        let mut r = json!({"group": group, "kind": "GatewayClassBlueprint", "name": "bp"});
        if let Some(ns) = ns {
            r["namespace"] = json!(ns);
        }
        serde_json::from_value(json!({
            "apiVersion": "gateway.networking.k8s.io/v1", "kind": "GatewayClass",
            "metadata": {"name": name},
            "spec": {"controllerName": CONTROLLER_NAME, "parametersRef": r},
        }))
        .unwrap()
    };
    w.snap.put_class(other("foreign", "example.com", None));
    w.snap
        .put_class(other("namespaced", "gatewright.dev", Some("x")));
    let using = crate::plan::class::classes_using_blueprint(&w.snap, "bp");
    assert!(using.contains(&"c".to_owned()), "{using:?}");
    assert!(!using.contains(&"foreign".to_owned()), "{using:?}");
    assert!(!using.contains(&"namespaced".to_owned()), "{using:?}");
    let foreign = crate::plan::class::plan_class(&w.snap, "foreign").unwrap();
    assert!(!foreign.accepted.status.is_true());
    assert_eq!(foreign.blueprint, None);
}
