//! Unit tests of `plan_gateway`, `plan_route` and `plan` on small worlds built in code:
//! what is rendered, for which parent, and every status rule (table tests).

use gateway_api::apis::standard::gatewayclasses::GatewayClass;
use gateway_api::apis::standard::gateways::Gateway;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde_json::{Value, json};

use super::gateway::{OutOfScope, in_scope};
use super::status::{next_route_parents, same_parent};
use super::{plan, plan_gateway, plan_route};
use crate::api::GatewayClassBlueprint;
use crate::gateway::conditions::{Cond, reasons, types};
use crate::gateway::{CONTROLLER_NAME, ParentAttachment};
use crate::render::labels;
use crate::snapshot::{Key, RouteKey, Snapshot};

const GW_TEMPLATE: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ gateway.metadata.name ~ \"-cm\" }}\ndata:\n  hosts: {{ hostnames.union | join(\",\") }}\n";
const READER: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ gateway.metadata.name ~ \"-reader\" }}\ndata:\n  from: {{ (resources.cm | first).metadata.name }}\n";
const ROUTE_TEMPLATE: &str =
    "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ route.metadata.name ~ \"-copy\" }}\n";

/// A world with class `c` (ours) using blueprint `bp`.
struct World {
    snap: Snapshot,
}

impl World {
    fn new() -> Self {
        let mut snap = Snapshot::new("sys");
        snap.put_class(class("c", CONTROLLER_NAME, "bp"));
        snap.put_class(class("theirs", "example.com/other", "bp"));
        snap.put_namespace("infra", Default::default());
        snap.put_namespace("app", Default::default());
        let mut w = Self { snap };
        w.blueprint(&[("cm", GW_TEMPLATE)], &[("copy", ROUTE_TEMPLATE)], None);
        w
    }

    fn blueprint(
        &mut self,
        gateway: &[(&str, &str)],
        route: &[(&str, &str)],
        status: Option<&str>,
    ) -> &mut Self {
        let entries = |t: &[(&str, &str)]| -> Vec<Value> {
            t.iter()
                .map(|(n, s)| json!({"name": n, "template": s}))
                .collect()
        };
        let mut spec =
            json!({"gatewayTemplates": entries(gateway), "routeTemplates": entries(route)});
        if let Some(s) = status {
            spec["status"] = json!({ "template": s });
        }
        let bp: GatewayClassBlueprint = serde_json::from_value(json!({
            "apiVersion": "gatewright.dev/v1alpha1", "kind": "GatewayClassBlueprint",
            "metadata": {"name": "bp"}, "spec": spec,
        }))
        .unwrap();
        self.snap.put_blueprint(bp);
        self
    }

    /// Gateway `infra/<name>` of class `class` with HTTP listeners `(name, hostname)` on
    /// port 80 (allowing routes from all namespaces) and a spec address.
    fn gateway(&mut self, name: &str, class: &str, listeners: &[(&str, Option<&str>)]) -> Key {
        let ls: Vec<Value> = listeners
            .iter()
            .map(|(n, h)| {
                let mut l = json!({"name": n, "port": 80, "protocol": "HTTP",
                    "allowedRoutes": {"namespaces": {"from": "All"}}});
                if let Some(h) = h {
                    l["hostname"] = json!(h);
                }
                l
            })
            .collect();
        let gw: Gateway = serde_json::from_value(json!({
            "apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
            "metadata": {"name": name, "namespace": "infra", "uid": format!("uid-{name}"), "generation": 2},
            "spec": {"gatewayClassName": class, "listeners": ls,
                "addresses": [{"type": "IPAddress", "value": "10.0.0.1"}]},
        }))
        .unwrap();
        self.snap.put_gateway(gw);
        Key::new("infra", name)
    }

    /// HTTPRoute `app/<name>` for `hostnames`, a child of each Gateway in `parents`.
    fn route(&mut self, name: &str, hostnames: &[&str], parents: &[&str]) -> RouteKey {
        let refs: Vec<Value> = parents
            .iter()
            .map(|p| json!({"name": p, "namespace": "infra"}))
            .collect();
        self.snap.put_route_json(json!({
            "apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
            "metadata": {"name": name, "namespace": "app", "uid": format!("uid-{name}"), "generation": 1},
            "spec": {"parentRefs": refs, "hostnames": hostnames},
        }));
        RouteKey::new("HTTPRoute", "app", name)
    }

    /// Makes every child `key`'s plan renders live, as applied (ready: no status rules).
    fn make_live(&mut self, key: &Key) {
        let p = plan(&self.snap, key).unwrap();
        for c in p.children() {
            self.snap.put_child(c.object.clone());
        }
    }
}

fn class(name: &str, controller: &str, blueprint: &str) -> GatewayClass {
    serde_json::from_value(json!({
        "apiVersion": "gateway.networking.k8s.io/v1", "kind": "GatewayClass",
        "metadata": {"name": name},
        "spec": {"controllerName": controller, "parametersRef":
            {"group": "gatewright.dev", "kind": "GatewayClassBlueprint", "name": blueprint}},
    }))
    .unwrap()
}

fn cond<'a>(conds: &'a [Cond], type_: &str) -> &'a Cond {
    conds
        .iter()
        .find(|c| c.type_ == type_)
        .unwrap_or_else(|| panic!("no {type_} in {conds:?}"))
}

#[test]
fn a_gateway_not_ours_is_not_planned() {
    let mut w = World::new();
    let theirs = w.gateway("theirs", "theirs", &[("http", None)]);
    let lost = w.gateway("lost", "missing", &[("http", None)]);
    let none = Key::new("infra", "none");
    assert_eq!(
        plan_gateway(&w.snap, &theirs).err(),
        Some(OutOfScope::NotOurs)
    );
    assert_eq!(
        plan_gateway(&w.snap, &lost).err(),
        Some(OutOfScope::NoClass("missing".into()))
    );
    assert_eq!(
        plan_gateway(&w.snap, &none).err(),
        Some(OutOfScope::NoGateway)
    );
    assert_eq!(in_scope(&w.snap, &theirs), Err(OutOfScope::NotOurs));
}

#[test]
fn plan_gateway_renders_decorated_children_from_the_accepted_routes() {
    let mut w = World::new();
    let key = w.gateway("gw", "c", &[("http", Some("*.example.com"))]);
    w.route("a", &["a.example.com"], &["gw"]);
    w.route("b", &["b.other.org"], &["gw"]);
    let p = plan_gateway(&w.snap, &key).unwrap();
    assert!(p.accepted);
    assert_eq!(p.uid, "uid-gw");
    assert_eq!(p.children.len(), 1);
    let cm = &p.children[0].object;
    assert_eq!(cm["metadata"]["name"], "gw-cm");
    assert_eq!(cm["metadata"]["namespace"], "infra");
    // Only the route whose hostname intersects the listener's is accepted.
    assert_eq!(cm["data"]["hosts"], "a.example.com");
    assert_eq!(p.context.routes.len(), 1);
    assert_eq!(p.context.routes[0].name, "a");
    let l = &cm["metadata"]["labels"];
    assert_eq!(l[labels::PARENT_UID], "uid-gw");
    assert_eq!(l[labels::GATEWAY_UID], "uid-gw");
    assert_eq!(l[labels::TEMPLATE], "cm");
    assert_eq!(cm["metadata"]["ownerReferences"][0]["kind"], "Gateway");
    // Both routes get an entry: one accepted, one not.
    let accepted: Vec<(String, bool)> = p
        .attachments
        .iter()
        .map(|(k, a)| (k.name.clone(), a[0].is_accepted()))
        .collect();
    assert_eq!(accepted, [("a".into(), true), ("b".into(), false)]);
    assert_eq!(p.listeners[0].attached_routes, 1);
    assert!(p.prune.is_empty());
}

#[test]
fn plan_route_renders_for_an_accepted_route_and_prunes_for_one_no_longer_accepted() {
    let mut w = World::new();
    let key = w.gateway("gw", "c", &[("http", Some("*.example.com"))]);
    let a = w.route("a", &["a.example.com"], &["gw"]);
    let gp = plan_gateway(&w.snap, &key).unwrap();
    let rp = plan_route(&w.snap, &gp, &a);
    assert_eq!(rp.uid, "uid-a");
    assert_eq!(rp.children.len(), 1);
    let copy = &rp.children[0].object;
    assert_eq!(copy["metadata"]["name"], "a-copy");
    assert_eq!(copy["metadata"]["namespace"], "app");
    assert_eq!(copy["metadata"]["labels"][labels::PARENT_UID], "uid-a");
    assert_eq!(copy["metadata"]["labels"][labels::GATEWAY_UID], "uid-gw");
    assert_eq!(copy["metadata"]["ownerReferences"][0]["kind"], "HTTPRoute");
    w.snap.put_child(copy.clone());
    // The route moves to a hostname the listener does not take: its child goes.
    let a = w.route("a", &["a.other.org"], &["gw"]);
    let gp = plan_gateway(&w.snap, &key).unwrap();
    let rp = plan_route(&w.snap, &gp, &a);
    assert!(rp.children.is_empty());
    assert_eq!(rp.prune.len(), 1);
    assert_eq!(rp.prune[0].name, "a-copy");
}

#[test]
fn accepted_routes_are_sorted_and_children_of_dropped_routes_are_orphans() {
    let mut w = World::new();
    let key = w.gateway("gw", "c", &[("http", Some("*.example.com"))]);
    // Inserted out of order; one never accepted.
    let c = w.route("c", &["c.example.com"], &["gw"]);
    let a = w.route("a", &["a.example.com"], &["gw"]);
    let b = w.route("b", &["b.other.org"], &["gw"]);
    let gp = plan_gateway(&w.snap, &key).unwrap();
    assert_eq!(gp.context.routes, [a.clone(), c.clone()]);
    assert!(gp.context.accepts(&a) && gp.context.accepts(&c) && !gp.context.accepts(&b));
    assert!(gp.orphaned_route_children.is_empty());
    // Every child live: none is an orphan while its route is accepted.
    w.make_live(&key);
    let gp = plan_gateway(&w.snap, &key).unwrap();
    assert!(gp.orphaned_route_children.is_empty());
    // Route c moves away: its child is an orphan of the Gateway (its own plan is not
    // made any more), a's is not.
    w.route("c", &["c.other.org"], &["gw"]);
    let gp = plan_gateway(&w.snap, &key).unwrap();
    assert_eq!(gp.context.routes, [a]);
    let orphans: Vec<&str> = gp
        .orphaned_route_children
        .iter()
        .map(|k| k.name.as_str())
        .collect();
    assert_eq!(orphans, ["c-copy"]);
}

/// One row of the Gateway status table: a world, and the Programmed it must give.
struct Row {
    name: &'static str,
    setup: fn(&mut World) -> Key,
    status: &'static str,
    reason: &'static str,
    message_has: &'static str,
}

#[test]
fn gateway_status_rules() {
    let rows = [
        Row {
            name: "children not created yet",
            setup: |w| w.gateway("gw", "c", &[("http", None)]),
            status: "False",
            reason: reasons::PENDING,
            message_has: "ConfigMap infra/gw-cm (not created yet)",
        },
        Row {
            name: "children ready and an address",
            setup: |w| {
                let k = w.gateway("gw", "c", &[("http", None)]);
                w.make_live(&k);
                k
            },
            status: "True",
            reason: reasons::PROGRAMMED,
            message_has: "all children are ready",
        },
        Row {
            name: "the status template waits for a child",
            setup: |w| {
                w.blueprint(
                    &[("cm", GW_TEMPLATE)],
                    &[],
                    Some("addresses: {{ dig(resources.cm | first, \"status.addresses\", []) }}"),
                );
                let k = w.gateway("gw", "c", &[("http", None)]);
                w.make_live(&k);
                k
            },
            status: "False",
            reason: reasons::ADDRESS_NOT_ASSIGNED,
            message_has: "no address is known yet",
        },
        Row {
            name: "a template fails",
            setup: |w| {
                w.blueprint(&[("cm", "{{ fail(\"no way\") }}")], &[], None);
                w.gateway("gw", "c", &[("http", None)])
            },
            status: "False",
            reason: reasons::INVALID,
            message_has: "no way",
        },
        Row {
            name: "a template waits for another",
            setup: |w| {
                w.blueprint(&[("cm", GW_TEMPLATE), ("reader", READER)], &[], None);
                w.gateway("gw", "c", &[("http", None)])
            },
            status: "False",
            reason: reasons::PENDING,
            message_has: "template reader is waiting for template cm",
        },
        Row {
            name: "a route's template fails",
            setup: |w| {
                w.blueprint(
                    &[("cm", GW_TEMPLATE)],
                    &[("copy", "{{ fail(\"bad route\") }}")],
                    None,
                );
                let k = w.gateway("gw", "c", &[("http", None)]);
                w.route("a", &["a.example.com"], &["gw"]);
                w.make_live(&k);
                k
            },
            status: "False",
            reason: reasons::INVALID,
            message_has: "bad route",
        },
        Row {
            name: "the blueprint is missing",
            setup: |w| {
                w.snap.put_class(class("c", CONTROLLER_NAME, "nothing"));
                w.gateway("gw", "c", &[("http", None)])
            },
            status: "False",
            reason: reasons::INVALID,
            message_has: "the Gateway is not accepted",
        },
        Row {
            name: "no listener is valid, so the Gateway is not accepted",
            setup: |w| w.gateway("gw", "c", &[("bad", Some("*.*.example.com"))]),
            status: "False",
            reason: reasons::INVALID,
            message_has: "the Gateway is not accepted",
        },
    ];
    for row in rows {
        let mut w = World::new();
        let key = (row.setup)(&mut w);
        let p = plan(&w.snap, &key).unwrap();
        let programmed = cond(&p.status.gateway.conditions, types::PROGRAMMED);
        assert_eq!(
            (programmed.status.as_str(), programmed.reason.as_str()),
            (row.status, row.reason),
            "{}: {programmed:?}",
            row.name
        );
        assert!(
            programmed.message.contains(row.message_has),
            "{}: {}",
            row.name,
            programmed.message
        );
        // Valid listeners say what the Gateway says.
        for (l, conds) in &p.status.gateway.listeners {
            if l.is_valid() {
                assert_eq!(
                    cond(conds, types::PROGRAMMED).reason,
                    row.reason,
                    "{}",
                    row.name
                );
            }
        }
    }
}

#[test]
fn a_failing_route_template_is_on_the_routes_entry_and_the_gateway() {
    let mut w = World::new();
    w.blueprint(
        &[("cm", GW_TEMPLATE)],
        &[("copy", "{{ fail(\"bad route\") }}")],
        None,
    );
    let key = w.gateway("gw", "c", &[("http", None)]);
    let a = w.route("a", &["a.example.com"], &["gw"]);
    let p = plan(&w.snap, &key).unwrap();
    assert_eq!(p.routes.len(), 1);
    assert_eq!(p.errors().count(), 1);
    let entries = &p.status.routes[0];
    assert_eq!(entries.route, a);
    let rendered = entries.entries[0].render_error.as_ref().unwrap();
    assert_eq!(rendered.type_, types::RENDERED);
    assert!(
        rendered.message.contains("bad route"),
        "{}",
        rendered.message
    );
    // The route itself is still accepted: its template is the blueprint's fault.
    assert!(entries.entries[0].is_accepted());
}

#[test]
fn the_plan_orders_gateway_children_before_route_children() {
    let mut w = World::new();
    let key = w.gateway("gw", "c", &[("http", None)]);
    w.route("a", &["a.example.com"], &["gw"]);
    w.route("b", &["b.example.com"], &["gw"]);
    let p = plan(&w.snap, &key).unwrap();
    let names: Vec<&str> = p.children().map(|c| c.key.name.as_str()).collect();
    assert_eq!(names, ["gw-cm", "a-copy", "b-copy"]);
    assert_eq!(
        p.gateway.children[0].object["data"]["hosts"],
        "a.example.com,b.example.com"
    );
}

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

/// `hostnames.tls`: the precise names of the listeners served with a generated certificate
/// (HTTPS, or TLS `Terminate`, without certificateRefs of their own), beside `precise`.
#[test]
fn hostnames_tls_lists_only_names_served_with_a_generated_certificate() {
    use crate::gateway::refs::tests::{CERT, KEY, secret};
    let http = |name: &str, host: Option<&str>| {
        let mut l = json!({"name": name, "port": 80, "protocol": "HTTP",
            "allowedRoutes": {"namespaces": {"from": "All"}}});
        if let Some(h) = host {
            l["hostname"] = json!(h);
        }
        l
    };
    let generated = |name: &str, protocol: &str, host: &str| {
        json!({"name": name, "port": 443, "protocol": protocol, "hostname": host,
            "allowedRoutes": {"namespaces": {"from": "All"}},
            "tls": {"options": {"gatewright.dev/certificate": "generated"}}})
    };
    let with_refs = |name: &str, host: &str| {
        json!({"name": name, "port": 443, "protocol": "HTTPS", "hostname": host,
            "allowedRoutes": {"namespaces": {"from": "All"}},
            "tls": {"certificateRefs": [{"name": "cert"}]}})
    };
    let passthrough = |name: &str, host: &str| {
        json!({"name": name, "port": 443, "protocol": "TLS", "hostname": host,
            "allowedRoutes": {"namespaces": {"from": "All"}}, "tls": {"mode": "Passthrough"}})
    };
    // Each case: what, listeners, routes as (kind, name, hostnames, sectionName), and the
    // expected `precise` and `tls`.
    type Route<'a> = (&'a str, &'a str, &'a [&'a str], Option<&'a str>);
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
        for (kind, name, hostnames, section) in routes {
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

/// A make-before-break "certificate" as an earlier release of a class rendered it (one
/// object, versioned as a whole, named `<gateway>-tls`) and as the next one does (per
/// object, named `<gateway>-tls-0`): the same names give the same version, under another
/// name. A reader names the certificate's Secret.
const CERT_BEFORE: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ gateway.metadata.name ~ \"-tls\" }}\ndata:\n  names: {{ hostnames.union | join(\",\") }}\n  secret: {{ gateway.metadata.name ~ \"-tls-\" ~ version }}\n";
const CERT_AFTER: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ gateway.metadata.name ~ \"-tls-0\" }}\ndata:\n  names: {{ hostnames.union | join(\",\") }}\n  secret: {{ gateway.metadata.name ~ \"-tls-0-\" ~ version }}\n";
const SECRET_READER: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ gateway.metadata.name ~ \"-reader\" }}\ndata:\n  secrets: {{ resources.cert | map(attribute=\"data\") | map(attribute=\"secret\") | join(\",\") }}\n";

fn versioned_blueprint(w: &mut World, cert: &str, per_object: bool) {
    let mut rollout = json!({"strategy": "MakeBeforeBreak", "fields": ["data.names"]});
    if per_object {
        rollout["per"] = json!("Object");
    }
    let bp: GatewayClassBlueprint = serde_json::from_value(json!({
        "apiVersion": "gatewright.dev/v1alpha1", "kind": "GatewayClassBlueprint",
        "metadata": {"name": "bp"},
        "spec": {"gatewayTemplates": [
            {"name": "cert", "template": cert, "rollout": rollout,
             "readyWhen": "dig(object, \"data.ready\", \"\") == \"yes\""},
            {"name": "reader", "template": SECRET_READER},
        ]},
    }))
    .unwrap();
    w.snap.put_blueprint(bp);
}

/// `obj` as it is once applied: a "certificate" ready (issued) or not.
fn applied(obj: &Value, issued: bool) -> Value {
    let mut o = obj.clone();
    if issued && labels::template(&o) == Some("cert") {
        o["data"]["ready"] = json!("yes");
    }
    o
}

/// Issue 42: the old certificate of a class's earlier release, which the new release names
/// otherwise (and versions per object) with the same version, is neither a version the new
/// one replaces nor pruned as "still named" for good: it serves until the new one is ready
/// and the reader has switched, then it goes.
#[test]
fn a_child_an_earlier_release_named_otherwise_serves_until_replaced_then_is_pruned() {
    let mut w = World::new();
    versioned_blueprint(&mut w, CERT_BEFORE, false);
    let gw = w.gateway("gw", "c", &[("http", Some("*.example.com"))]);
    w.route("r", &["a.example.com"], &["gw"]);
    // Converged with the earlier release.
    for _ in 0..3 {
        let p = plan(&w.snap, &gw).unwrap();
        assert!(p.gateway.errors.is_empty(), "{:?}", p.gateway.errors);
        for c in p.children() {
            w.snap.put_child(applied(&c.object, true));
        }
    }
    let p = plan(&w.snap, &gw).unwrap();
    assert!(p.gateway.converged() && p.gateway.prune.is_empty());
    let old = p.children().find(|c| c.template == "cert").unwrap().clone();
    let old_secret = old.object["data"]["secret"].as_str().unwrap().to_owned();
    let version = old.object["metadata"]["labels"][labels::VERSION]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(old.key.name, format!("gw-tls-{version}"));

    // The next release: named per group, versioned per object; same names, same version.
    versioned_blueprint(&mut w, CERT_AFTER, true);
    let reader_of = |p: &super::Plan| -> (Value, String) {
        let r = p.children().find(|c| c.template == "reader").unwrap();
        let s = r.object["data"]["secrets"].as_str().unwrap().to_owned();
        (r.object.clone(), s)
    };
    let new_name = format!("gw-tls-0-{version}");
    let new_secret = format!("gw-tls-0-{version}");
    let check_kept = |p: &super::Plan, step: &str| {
        assert!(
            p.gateway.errors.is_empty(),
            "{step}: {:?}",
            p.gateway.errors
        );
        // The old one serves meanwhile: the Gateway stays Programmed.
        let programmed = cond(&p.status.gateway.conditions, types::PROGRAMMED);
        assert!(programmed.status.is_true(), "{step}: {programmed:?}");
        assert!(
            !p.gateway.prune.contains(&old.key),
            "{step}: the old certificate is pruned while the live reader names its Secret"
        );
    };
    // 1. The new certificate is to be created: the reader keeps reading the old one.
    let p = plan(&w.snap, &gw).unwrap();
    check_kept(&p, "new not created");
    let new = p.children().find(|c| c.template == "cert").unwrap().clone();
    assert_eq!(new.key.name, new_name);
    assert_eq!(
        reader_of(&p).1,
        old_secret,
        "the reader keeps the old Secret"
    );
    assert!(
        p.gateway
            .rollouts
            .iter()
            .any(|r| r.phase == super::RolloutPhase::WaitingForNew),
        "{:?}",
        p.gateway.rollouts
    );
    // 2. Created, not issued yet: still the old one.
    w.snap.put_child(applied(&new.object, false));
    let p = plan(&w.snap, &gw).unwrap();
    check_kept(&p, "new not ready");
    assert_eq!(reader_of(&p).1, old_secret);
    // 3. Issued: the reader switches; the live reader still names the old Secret.
    w.snap.put_child(applied(&new.object, true));
    let p = plan(&w.snap, &gw).unwrap();
    check_kept(&p, "new ready, reader not switched");
    let (reader, secrets) = reader_of(&p);
    assert_eq!(secrets, new_secret, "the reader switches to the new Secret");
    // 4. The reader applied as rendered: nothing reads the old certificate; it goes.
    w.snap.put_child(reader);
    let p = plan(&w.snap, &gw).unwrap();
    assert!(p.gateway.errors.is_empty(), "{:?}", p.gateway.errors);
    assert_eq!(p.gateway.prune, std::slice::from_ref(&old.key));
    assert_eq!(reader_of(&p).1, new_secret);
    // 5. Once it is gone: converged, nothing more to prune, no replacement under way.
    w.snap.remove_child(&old.key);
    let p = plan(&w.snap, &gw).unwrap();
    assert!(p.gateway.converged(), "{:?}", p.gateway.states);
    assert!(p.gateway.prune.is_empty() && p.gateway.rollouts.is_empty());
}

/// The same for a template versioned as a whole whose object an earlier release named
/// otherwise: the old object is kept while the live reader may read it or something is
/// not ready, then pruned.
#[test]
fn a_renamed_child_of_a_template_versioned_as_a_whole_is_pruned_once_not_read() {
    let mut w = World::new();
    versioned_blueprint(&mut w, CERT_BEFORE, false);
    let gw = w.gateway("gw", "c", &[("http", Some("*.example.com"))]);
    w.route("r", &["a.example.com"], &["gw"]);
    for _ in 0..3 {
        let p = plan(&w.snap, &gw).unwrap();
        for c in p.children() {
            w.snap.put_child(applied(&c.object, true));
        }
    }
    let p = plan(&w.snap, &gw).unwrap();
    let old = p
        .children()
        .find(|c| c.template == "cert")
        .unwrap()
        .key
        .clone();
    versioned_blueprint(&mut w, &CERT_BEFORE.replace("-tls", "-cert"), false);
    let mut reader = None;
    for issued in [false, true] {
        let p = plan(&w.snap, &gw).unwrap();
        assert!(!p.gateway.prune.contains(&old), "issued {issued}");
        let new = p.children().find(|c| c.template == "cert").unwrap();
        assert_ne!(new.key, old);
        w.snap.put_child(applied(&new.object, issued));
        reader = p.children().find(|c| c.template == "reader").cloned();
    }
    // The reader, rendered from the issued certificate, not applied yet: kept.
    let p = plan(&w.snap, &gw).unwrap();
    assert!(!p.gateway.prune.contains(&old));
    let reader = p
        .children()
        .find(|c| c.template == "reader")
        .or(reader.as_ref())
        .unwrap()
        .clone();
    w.snap.put_child(reader.object);
    let p = plan(&w.snap, &gw).unwrap();
    assert_eq!(p.gateway.prune, [old]);
}
