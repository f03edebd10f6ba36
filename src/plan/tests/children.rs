//! What is planned and rendered, for which parent, in which order.

use super::*;

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
    w.snap.put_child(Value::clone(copy));
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

#[test]
fn children_are_kept_parsed_where_the_controller_remembers_route_plans() {
    assert_eq!(
        super::super::gateway::KEEP_PARSED_MIN_ROUTES,
        crate::controller::MEMO_MIN_ROUTES
    );
}

#[test]
fn a_remembered_plan_found_applied_keeps_its_objects_as_text() {
    let mut w = World::new();
    w.blueprint(&[("cm", GW_TEMPLATE)], &[("copy", ROUTE_TEMPLATE)], None);
    let gw = w.gateway("g", "c", &[("http", None)]);
    // As many routes as keep their children's parses in the snapshot.
    let n = super::super::gateway::KEEP_PARSED_MIN_ROUTES;
    let mut routes: Vec<String> = (1..=n).map(|i| format!("r{i}")).collect();
    // In the order of the plan's routes.
    routes.sort();
    for r in &routes {
        w.route(r, &[&format!("{r}.example.com")], &["g"]);
    }
    w.make_live(&gw);
    // Of each route plan, whether its object is held parsed; of each route, how many of
    // its live children's parses the snapshot keeps.
    let parsed = |p: &crate::plan::Plan| -> Vec<bool> {
        p.routes
            .iter()
            .map(|r| r.children[0].object.is_parsed())
            .collect()
    };
    let kept = |w: &World| -> Vec<usize> {
        routes
            .iter()
            .map(|r| w.snap.kept_parses_under(&format!("uid-{r}"), "uid-g"))
            .collect()
    };
    // All but the last route's plan found applied.
    fn but_last<T: Clone>(n: usize, yes: T, no: T) -> Vec<T> {
        (1..=n)
            .map(|i| if i < n { yes.clone() } else { no.clone() })
            .collect()
    }
    let mut memo = crate::plan::PlanMemo::default();
    let first = crate::plan::plan_with(&w.snap, &gw, &mut memo).unwrap();
    assert_eq!(kept(&w), vec![1; n]);
    for r in &first.routes[..n - 1] {
        r.applied.set();
    }
    // While the pass that applied them holds the plans, nothing is let go.
    let held = crate::plan::plan_with(&w.snap, &gw, &mut memo).unwrap();
    assert_eq!(memo.last.reused, n);
    assert_eq!(parsed(&held), vec![true; n]);
    drop((first, held));
    let second = crate::plan::plan_with(&w.snap, &gw, &mut memo).unwrap();
    assert_eq!(memo.last.reused, n);
    assert_eq!(parsed(&second), but_last(n, false, true));
    assert_eq!(kept(&w), but_last(n, 0, 1));
    // Read all the same, they are what a plan without the memo renders.
    let fresh = crate::plan::plan(&w.snap, &gw).unwrap();
    for (r, f) in second.routes.iter().zip(&fresh.routes) {
        assert_eq!(r.children, f.children);
        assert_eq!(r.live_children, f.live_children);
        assert!(r.live_children.iter().all(Option::is_some));
    }
    assert_eq!(parsed(&second), vec![true; n], "read: parsed again");
    // A plan made again (its route changed) holds its objects parsed until it is found
    // applied again.
    drop((second, fresh));
    w.route("r1", &["r1.example.org"], &["g"]);
    let third = crate::plan::plan_with(&w.snap, &gw, &mut memo).unwrap();
    assert_eq!(memo.last.reused, n - 1);
    assert!(third.routes[0].children[0].object.is_parsed());
    third.routes[0].applied.set();
    drop(third);
    let fourth = crate::plan::plan_with(&w.snap, &gw, &mut memo).unwrap();
    assert!(!fourth.routes[0].children[0].object.is_parsed());
    assert_eq!(
        fourth.routes[0].children[0].object["metadata"]["name"],
        "r1-copy"
    );
}
