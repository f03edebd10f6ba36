//! Route templates whose text is remembered by its inputs
//! (`Prepared::keys_route_render`): a remembered text is used only while everything the
//! template reads is the same.

use super::*;

const READS_ALL_IT_MAY: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ route.metadata.name ~ \"-copy\" }}\ndata:\n  gateway: {{ gateway.metadata.name }}\n  listeners: {{ listeners | map(attribute=\"hostname\") | join(\",\") }}\n  hosts: {{ hostnames.union | join(\",\") }}\n  first: {{ route.spec.hostnames | first }}\n";

fn data(world: &World, gw: &Key, route: &RouteKey) -> Value {
    let p = plan_gateway(&world.snap, gw).unwrap();
    let r = plan_route(&world.snap, &p, route);
    assert_eq!(r.children.len(), 1, "{:?}", r.errors);
    r.children[0].object["data"].clone()
}

#[test]
fn a_remembered_route_render_follows_what_the_template_reads() {
    let mut w = World::new();
    w.blueprint(&[("cm", GW_TEMPLATE)], &[("copy", READS_ALL_IT_MAY)], None);
    let gw = w.gateway("g", "c", &[("http", Some("*.example.com"))]);
    let r1 = w.route("r1", &["a.example.com"], &["g"]);
    let prepared = plan_gateway(&w.snap, &gw).unwrap().blueprint.unwrap();
    assert!(prepared.keys_route_render("copy"));
    let want = |hosts: &str, first: &str, listeners: &str| json!({"gateway": "g", "listeners": listeners, "hosts": hosts, "first": first});
    assert_eq!(
        data(&w, &gw, &r1),
        want("a.example.com", "a.example.com", "*.example.com")
    );
    // The same inputs: the remembered text, the same plan.
    assert_eq!(
        data(&w, &gw, &r1),
        want("a.example.com", "a.example.com", "*.example.com")
    );
    // Another route changes `hostnames`.
    w.route("r2", &["b.example.com"], &["g"]);
    assert_eq!(
        data(&w, &gw, &r1),
        want(
            "a.example.com,b.example.com",
            "a.example.com",
            "*.example.com"
        )
    );
    // The route itself changes.
    w.route("r1", &["c.example.com"], &["g"]);
    assert_eq!(
        data(&w, &gw, &r1),
        want(
            "b.example.com,c.example.com",
            "c.example.com",
            "*.example.com"
        )
    );
    // The Gateway's listeners change.
    w.gateway(
        "g",
        "c",
        &[
            ("http", Some("*.example.com")),
            ("more", Some("*.example.org")),
        ],
    );
    assert_eq!(
        data(&w, &gw, &r1),
        want(
            "b.example.com,c.example.com",
            "c.example.com",
            "*.example.com,*.example.org"
        )
    );
    // The blueprint is the same one all along: every plan used one remembered-render cache.
    let again = plan_gateway(&w.snap, &gw).unwrap().blueprint.unwrap();
    assert!(std::sync::Arc::ptr_eq(&prepared, &again));
}

#[test]
fn templates_whose_text_depends_on_more_are_rendered_every_time() {
    let mut w = World::new();
    let reads_resources = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ route.metadata.name ~ \"-b\" }}\ndata:\n  a: {{ resources.a | length }}\n";
    let debugs = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ route.metadata.name ~ \"-c\" }}\ndata:\n  d: {{ debug() | length }}\n";
    let routes = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ route.metadata.name ~ \"-d\" }}\ndata:\n  n: {{ routes | length }}\n";
    w.blueprint(
        &[("cm", GW_TEMPLATE)],
        &[
            ("a", ROUTE_TEMPLATE),
            ("b", reads_resources),
            ("c", debugs),
            ("d", routes),
        ],
        None,
    );
    let gw = w.gateway("g", "c", &[("http", None)]);
    w.route("r1", &["a.example.com"], &["g"]);
    let prepared = plan_gateway(&w.snap, &gw).unwrap().blueprint.unwrap();
    assert!(prepared.keys_route_render("a"));
    for name in ["b", "c", "d"] {
        assert!(!prepared.keys_route_render(name), "{name}");
    }
}

#[test]
fn what_a_macro_of_the_template_reads_counts() {
    let mut w = World::new();
    let in_macro = "{% macro m() %}{{ resources.a | length }}{% endmacro %}apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ route.metadata.name ~ \"-m\" }}\ndata:\n  a: {{ m() }}\n";
    w.blueprint(
        &[("cm", GW_TEMPLATE)],
        &[("a", ROUTE_TEMPLATE), ("m", in_macro)],
        None,
    );
    let gw = w.gateway("g", "c", &[("http", None)]);
    w.route("r1", &["a.example.com"], &["g"]);
    let prepared = plan_gateway(&w.snap, &gw).unwrap().blueprint.unwrap();
    assert!(!prepared.keys_route_render("m"));
}

/// Gives Gateway `infra/<name>` a status whose listener `http` counts `n` routes.
fn with_count(world: &mut World, name: &str, n: i64) {
    let mut gw = world
        .snap
        .gateway(&Key::new("infra", name))
        .unwrap()
        .typed
        .clone();
    gw.status = serde_json::from_value(json!({"listeners": [
        {"name": "http", "attachedRoutes": n, "supportedKinds": [], "conditions": []}]}))
    .unwrap();
    // What the API server changes with the status write.
    gw.metadata.resource_version = Some(format!("{}", 100 + n));
    gw.metadata.managed_fields = Some(
        serde_json::from_value(json!([{"manager": "gatewright", "operation": "Apply",
            "subresource": "status", "time": format!("2026-12-07T10:00:{n:02}Z"),
            "fieldsType": "FieldsV1", "fieldsV1": {"f:status": {}}}]))
        .unwrap(),
    );
    world.snap.put_gateway(gw);
}

#[test]
fn route_plans_depend_on_the_gateways_status_only_once_a_template_reads_it() {
    const COPY: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ route.metadata.name ~ \"-copy\" }}\ndata:\n  gateway: {{ gateway.metadata.name }}\n  namespace: {{ gateway.metadata.namespace }}\n";
    const COUNTS: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ route.metadata.name ~ \"-copy\" }}\ndata:\n  counted: \"{{ gateway.status.listeners[0].attachedRoutes if gateway.status else 0 }}\"\n";
    // The version a status write gives the Gateway: read, so the plans are made again.
    const VERSION: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ route.metadata.name ~ \"-copy\" }}\ndata:\n  counted: \"{{ gateway.metadata.resourceVersion | int - 100 if gateway.metadata.resourceVersion else 0 }}\"\n";
    for (template, reads) in [(COPY, false), (COUNTS, true), (VERSION, true)] {
        let mut w = World::new();
        w.blueprint(&[("cm", GW_TEMPLATE)], &[("copy", template)], None);
        let gw = w.gateway("g", "c", &[("http", None)]);
        for r in ["r1", "r2", "r3"] {
            w.route(r, &[&format!("{r}.example.com")], &["g"]);
        }
        let mut memo = crate::plan::PlanMemo::default();
        let first = crate::plan::plan_with(&w.snap, &gw, &mut memo).unwrap();
        assert_eq!(memo.last.reused, 0);
        let count_of = |p: &crate::plan::Plan| -> Vec<Value> {
            p.routes
                .iter()
                .map(|r| r.children[0].object["data"]["counted"].clone())
                .collect()
        };
        // Only the Gateway's status changes (its route counts written), and with it its
        // resourceVersion and managedFields.
        for n in 1..=3 {
            with_count(&mut w, "g", n);
            let p = crate::plan::plan_with(&w.snap, &gw, &mut memo).unwrap();
            let fresh = crate::plan::plan(&w.snap, &gw).unwrap();
            assert_eq!(
                count_of(&p),
                count_of(&fresh),
                "the memo's plan is a fresh one"
            );
            if reads {
                assert_eq!(
                    memo.last.reused, 0,
                    "a template reads the status: made again"
                );
                assert_eq!(count_of(&p)[0], json!(n.to_string()));
            } else {
                assert_eq!(memo.last.reused, 3, "no template reads the status: reused");
            }
        }
        drop(first);
    }
}
