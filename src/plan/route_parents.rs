//! The `status.parents` of a route that several Gateways' plans write: each Gateway's
//! entries merged with the route's live ones (another controller's kept, a Gateway no
//! longer ours let go), as the controller writes them and `gatewright render` and `diff`
//! show them.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use serde_json::Value;

use crate::gateway::conditions::merge_conditions;
use crate::gateway::{CONTROLLER_NAME, GATEWAY_API_GROUP, ParentAttachment, Parents};
use crate::snapshot::{Key, RouteKey, Snapshot};

/// The `status.parents` that the plans of several Gateways write on each route, merged
/// as the controller merges them ([`next_route_parents`], over the route in `snap`):
/// `written` holds, per route, each Gateway's entries, in the order the Gateways were
/// planned. Returns per route still in `snap`: its key, the first Gateway that wrote to
/// it, the route as `snap` holds it, and its next parents. `gatewright render` prints
/// these and `gatewright diff` compares them with the live routes.
#[must_use]
pub fn merged_route_parents(
    snap: &Snapshot,
    written: BTreeMap<RouteKey, Vec<(&Key, Parents)>>,
    now: &Time,
) -> Vec<(RouteKey, Key, Value, Vec<Value>)> {
    let mut out = Vec::new();
    for (rkey, entries) in written {
        let (Some(route), Some((first, _))) = (snap.route(&rkey), entries.first()) else {
            continue;
        };
        let first = (*first).clone();
        let json = route.json();
        let entries: Vec<(&Key, &[ParentAttachment])> =
            entries.iter().map(|(k, e)| (*k, e.as_slice())).collect();
        let parents = next_route_parents(
            &json,
            &entries,
            |k| super::gateway::in_scope(snap, k).is_ok(),
            |k| snap.listener_set_parent(k),
            now,
        );
        out.push((rkey, first, json, parents));
    }
    out
}

/// A route's `status.parents` once our entries for some Gateways are written.
///
/// `route` is the route as JSON (its spec and current status). `written` holds, per
/// Gateway, our entries for it: they replace every entry of ours naming that Gateway
/// (lastTransitionTime kept where a condition did not change). Our other entries stay
/// while their parentRef is still in the spec and `ours` says its Gateway is still one
/// of ours; entries of other controllers are kept as they are, in order, before ours.
/// Ours are sorted by parentRef, so the result does not depend on which Gateway wrote
/// first.
#[must_use]
pub fn next_route_parents(
    route: &Value,
    written: &[(&Key, &[ParentAttachment])],
    ours: impl Fn(&Key) -> bool,
    set_parent: impl Fn(&Key) -> Option<Key>,
    now: &Time,
) -> Vec<Value> {
    let route_ns = route["metadata"]["namespace"].as_str().unwrap_or_default();
    let generation = route["metadata"]["generation"].as_i64();
    let existing: &[Value] = route["status"]["parents"]
        .as_array()
        .map_or(&[], Vec::as_slice);
    let spec_refs: &[Value] = route["spec"]["parentRefs"]
        .as_array()
        .map_or(&[], Vec::as_slice);
    let is_ours = |e: &Value| e["controllerName"] == CONTROLLER_NAME;
    let mut foreign: Vec<Value> = Vec::new();
    let mut mine: Vec<Value> = Vec::new();
    for e in existing {
        if !is_ours(e) {
            foreign.push(e.clone());
            continue;
        }
        let parent = &e["parentRef"];
        let gw = gateway_of(parent, route_ns, &set_parent);
        let rewritten = gw
            .as_ref()
            .is_some_and(|g| written.iter().any(|(k, _)| *k == g));
        let in_spec = spec_refs.iter().any(|s| same_parent(s, parent));
        if !rewritten && in_spec && gw.as_ref().is_some_and(&ours) {
            mine.push(e.clone());
        }
    }
    for (_, entries) in written {
        for a in *entries {
            let previous: Vec<Condition> = existing
                .iter()
                .find(|p| is_ours(p) && same_parent(&p["parentRef"], &a.status_ref))
                .and_then(|p| serde_json::from_value(p["conditions"].clone()).ok())
                .unwrap_or_default();
            let conds = merge_conditions(
                &previous,
                &a.status_conds(),
                ParentAttachment::owned_types(),
                generation,
                now,
            );
            mine.push(serde_json::json!({
                "parentRef": *a.status_ref,
                "controllerName": CONTROLLER_NAME,
                "conditions": conds,
            }));
        }
    }
    mine.sort_by_cached_key(|e| e["parentRef"].to_string());
    foreign.extend(mine);
    foreign
}

/// The Gateway a parentRef names (the route's namespace when it names none), the parent
/// of the ListenerSet it names (`set_parent`), or `None` when it names another kind.
fn gateway_of(
    parent: &Value,
    route_ns: &str,
    set_parent: &dyn Fn(&Key) -> Option<Key>,
) -> Option<Key> {
    let group = parent["group"].as_str().unwrap_or(GATEWAY_API_GROUP);
    let kind = parent["kind"].as_str().unwrap_or("Gateway");
    let key = || {
        Key::new(
            parent["namespace"].as_str().unwrap_or(route_ns).to_owned(),
            parent["name"].as_str().unwrap_or_default().to_owned(),
        )
    };
    match (group == GATEWAY_API_GROUP, kind) {
        (true, "Gateway") => Some(key()),
        (true, crate::gateway::listenersets::KIND) => set_parent(&key()),
        _ => None,
    }
}

/// Parent references are equal when every field either sets is equal, with the API
/// defaults (an absent namespace equals an absent namespace: both are the route's).
#[must_use]
pub fn same_parent(a: &Value, b: &Value) -> bool {
    let field = |v: &Value, f: &str, default: &'static str| -> String {
        v[f].as_str().unwrap_or(default).to_owned()
    };
    [
        ("group", GATEWAY_API_GROUP),
        ("kind", "Gateway"),
        ("namespace", ""),
        ("name", ""),
        ("sectionName", ""),
    ]
    .iter()
    .all(|(f, d)| field(a, f, d) == field(b, f, d))
        && a["port"] == b["port"]
}
