//! The Gateway's status rules (a table), and a failing route template's report.

use super::*;

/// One row of the Gateway status table: a world, and the Programmed it must give.
struct Row {
    name: &'static str,
    setup: fn(&mut World) -> Key,
    status: &'static str,
    reason: &'static str,
    message_has: &'static str,
}

/// The Gateway status table.
fn rows() -> [Row; 8] {
    [
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
    ]
}

#[test]
fn gateway_status_rules() {
    for row in rows() {
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
