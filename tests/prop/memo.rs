//! The planner's memo (`gatewright::plan::memo`): a plan made with what it remembers (the
//! route plans, and what the Gateway's own templates rendered) equals the plan made afresh, over random worlds and random sequences of
//! changes: a route's weights or hostnames, a route gone, a Gateway's labels or listener
//! hostname, a live child no longer ready or gone, a Namespace's labels, a Service, a
//! ReferenceGrant or a Secret that comes or goes, a round of the controller applying
//! what was planned (children created, then ready).

use std::collections::BTreeMap;

use gatewright::plan::{PlanMemo, plan, plan_with};
use gatewright::snapshot::{Key, Snapshot};
use proptest::prelude::*;
use serde_json::{Value, json};

use crate::world::{NAMESPACES, World};

/// One change to the world between two plans; indexes pick among what exists.
#[derive(Clone, Debug)]
pub enum Edit {
    /// A route's backend weights.
    Weight(usize, u8),
    /// A route's first hostname dropped.
    DropHostname(usize),
    /// A hostname added to a route.
    AddHostname(usize),
    /// A route deleted.
    RemoveRoute(usize),
    /// A label set on a Gateway.
    GatewayLabel(usize, u8),
    /// A label set in a Gateway's `spec.infrastructure` (every child carries it).
    InfrastructureLabel(usize, u8),
    /// A Gateway's first listener hostname changed.
    ListenerHostname(usize),
    /// A live child's status gone (not ready).
    ChildNotReady(usize),
    /// A live child deleted.
    ChildGone(usize),
    /// A Namespace's labels replaced (what `allowedRoutes` selectors read).
    NamespaceLabels(usize, u8),
    /// A Service exists (Services become tracked: the others are then missing).
    ServiceAdded(usize, bool),
    /// A ReferenceGrant deleted.
    GrantGone(usize),
    /// A Secret deleted.
    SecretGone(usize, usize),
    /// The controller applies what was planned, as ready.
    Round,
}

pub fn edits() -> impl Strategy<Value = Vec<Edit>> {
    let i = 0usize..8;
    let edit = prop_oneof![
        2 => (i.clone(), 0u8..100).prop_map(|(i, w)| Edit::Weight(i, w)),
        1 => i.clone().prop_map(Edit::DropHostname),
        1 => i.clone().prop_map(Edit::AddHostname),
        1 => i.clone().prop_map(Edit::RemoveRoute),
        1 => (i.clone(), 0u8..3).prop_map(|(i, v)| Edit::GatewayLabel(i, v)),
        1 => (i.clone(), 0u8..3).prop_map(|(i, v)| Edit::InfrastructureLabel(i, v)),
        1 => i.clone().prop_map(Edit::ListenerHostname),
        1 => i.clone().prop_map(Edit::ChildNotReady),
        1 => i.clone().prop_map(Edit::ChildGone),
        1 => (i.clone(), 0u8..9).prop_map(|(i, v)| Edit::NamespaceLabels(i, v)),
        1 => (i.clone(), any::<bool>()).prop_map(|(i, svc)| Edit::ServiceAdded(i, svc)),
        1 => i.clone().prop_map(Edit::GrantGone),
        1 => (i.clone(), 0usize..2).prop_map(|(i, j)| Edit::SecretGone(i, j)),
        3 => Just(Edit::Round),
    ];
    prop::collection::vec(edit, 1..12)
}

fn nth<T: Clone>(items: Vec<T>, i: usize) -> Option<T> {
    (!items.is_empty()).then(|| items[i % items.len()].clone())
}

fn apply(snap: &mut Snapshot, edit: &Edit) -> Result<(), String> {
    let route = |snap: &Snapshot, i: usize| {
        nth(
            snap.routes().map(|(_, r)| r.json()).collect::<Vec<Value>>(),
            i,
        )
    };
    match edit {
        Edit::Weight(i, w) => {
            if let Some(mut r) = route(snap, *i) {
                if let Some(rules) = r["spec"]["rules"].as_array_mut() {
                    for rule in rules {
                        rule["backendRefs"] = json!([{"name": "primary", "port": 80, "weight": w}, {"name": "canary", "port": 80, "weight": 100 - w}]);
                    }
                }
                snap.put_route_json(r);
            }
        }
        Edit::DropHostname(i) => {
            if let Some(mut r) = route(snap, *i) {
                if let Some(h) = r["spec"]["hostnames"].as_array_mut()
                    && !h.is_empty()
                {
                    h.remove(0);
                }
                snap.put_route_json(r);
            }
        }
        Edit::AddHostname(i) => {
            if let Some(mut r) = route(snap, *i) {
                let name = format!("added{i}.example.com");
                match r["spec"]["hostnames"].as_array_mut() {
                    Some(h) => h.push(Value::String(name)),
                    None => r["spec"]["hostnames"] = json!([name]),
                }
                snap.put_route_json(r);
            }
        }
        Edit::RemoveRoute(i) => {
            if let Some(k) = nth(snap.routes().map(|(k, _)| k.clone()).collect(), *i) {
                snap.remove_route(&k);
            }
        }
        Edit::GatewayLabel(i, v) => {
            if let Some(mut g) = nth(snap.gateways().map(|(_, g)| g.typed.clone()).collect(), *i) {
                g.metadata
                    .labels
                    .get_or_insert_with(BTreeMap::new)
                    .insert("memo-test".into(), v.to_string());
                snap.put_gateway(g);
            }
        }
        Edit::InfrastructureLabel(i, v) => {
            if let Some(mut g) = nth(snap.gateways().map(|(_, g)| g.typed.clone()).collect(), *i) {
                g.spec
                    .infrastructure
                    .get_or_insert_with(Default::default)
                    .labels
                    .get_or_insert_with(BTreeMap::new)
                    .insert("memo-test".into(), v.to_string());
                snap.put_gateway(g);
            }
        }
        Edit::ListenerHostname(i) => {
            if let Some(mut g) = nth(snap.gateways().map(|(_, g)| g.typed.clone()).collect(), *i) {
                if let Some(l) = g.spec.listeners.first_mut() {
                    l.hostname = Some(format!("*.changed{i}.example.com"));
                }
                snap.put_gateway(g);
            }
        }
        Edit::ChildNotReady(i) => {
            if let Some(k) = nth(snap.child_keys().cloned().collect(), *i)
                && let Some(c) = snap.child(&k)
            {
                let mut c = (*c).clone();
                if let Some(o) = c.as_object_mut() {
                    o.remove("status");
                }
                snap.put_child(c);
            }
        }
        Edit::ChildGone(i) => {
            if let Some(k) = nth(snap.child_keys().cloned().collect(), *i) {
                snap.remove_child(&k);
            }
        }
        Edit::NamespaceLabels(i, v) => {
            let ns = NAMESPACES[i % NAMESPACES.len()];
            let keys = ["env", "team", "shared"];
            let values = ["prod", "dev", "a"];
            let mut labels = BTreeMap::new();
            labels.insert(
                keys[usize::from(*v) % 3].to_owned(),
                values[usize::from(*v) / 3].to_owned(),
            );
            labels.insert("kubernetes.io/metadata.name".to_owned(), ns.to_owned());
            snap.put_namespace(ns, labels);
        }
        Edit::ServiceAdded(i, svc) => {
            let name = if *svc { "svc" } else { "other" };
            snap.put_service(Key::new(NAMESPACES[i % NAMESPACES.len()], name));
        }
        Edit::GrantGone(i) => {
            for ns in NAMESPACES {
                snap.remove_grant(&Key::new(*ns, format!("grant{i}")));
            }
        }
        Edit::SecretGone(i, j) => {
            let name = ["cert", "other"][j % 2];
            snap.remove_secret(&Key::new(NAMESPACES[i % NAMESPACES.len()], name));
        }
        Edit::Round => {
            let (desired, prune) = crate::planner::desired_and_prune(snap)?;
            for k in &prune {
                snap.remove_child(k);
            }
            for obj in desired.values() {
                let mut live = gatewright::simulate::as_ready(obj);
                live["metadata"]["creationTimestamp"] =
                    Value::String("2026-01-01T00:00:00Z".into());
                snap.put_child(live);
            }
        }
    }
    Ok(())
}

/// Plans every Gateway with its memo and afresh; an error naming the first difference.
/// Returns how many route plans the memos reused.
fn compare(snap: &Snapshot, memos: &mut BTreeMap<Key, PlanMemo>) -> Result<usize, String> {
    let keys: Vec<Key> = snap.gateways().map(|(k, _)| k.clone()).collect();
    let mut reused = 0;
    for key in keys {
        let memo = memos.entry(key.clone()).or_default();
        match (plan(snap, &key), plan_with(snap, &key, memo)) {
            (Ok(fresh), Ok(with)) => {
                reused += memo.last.reused;
                if fresh.routes.len() != with.routes.len() {
                    return Err(format!("Gateway {key}: route plans differ in number"));
                }
                // It forgets the routes the Gateway no longer has.
                if memo.len() > with.routes.len() {
                    return Err(format!(
                        "Gateway {key}: the memo remembers {} route plans for {} routes",
                        memo.len(),
                        with.routes.len()
                    ));
                }
                for (a, b) in fresh.routes.iter().zip(&with.routes) {
                    if **a != **b {
                        return Err(format!(
                            "Gateway {key}: the remembered plan of {} {}/{} differs from the fresh one:\nfresh: {a:#?}\nremembered: {b:#?}",
                            a.route.kind, a.route.namespace, a.route.name
                        ));
                    }
                }
                let (a, b) = (&fresh.gateway, &with.gateway);
                let same = a.children == b.children
                    && a.held == b.held
                    && a.errors == b.errors
                    && a.prune == b.prune
                    && a.states == b.states
                    && a.rollouts == b.rollouts
                    && a.warnings == b.warnings
                    && a.conflicts == b.conflicts
                    && a.addresses == b.addresses
                    && a.address_wait == b.address_wait
                    && a.orphaned_route_children == b.orphaned_route_children;
                if !same {
                    return Err(format!(
                        "Gateway {key}: its own plan differs:\nfresh: children {:#?} held {:?} errors {:?} prune {:?} states {:?} rollouts {:?} addresses {:?}\nwith memo: children {:#?} held {:?} errors {:?} prune {:?} states {:?} rollouts {:?} addresses {:?}",
                        a.children,
                        a.held,
                        a.errors,
                        a.prune,
                        a.states,
                        a.rollouts,
                        a.addresses,
                        b.children,
                        b.held,
                        b.errors,
                        b.prune,
                        b.states,
                        b.rollouts,
                        b.addresses
                    ));
                }
                if fresh.status != with.status {
                    return Err(format!(
                        "Gateway {key}: status differs:\nfresh: {:#?}\nwith memo: {:#?}",
                        fresh.status, with.status
                    ));
                }
                // As the controller does once it found a plan's children holding what it
                // renders: the memo keeps a reused one's objects as text from then on,
                // which the next comparison reads back.
                for r in &with.routes {
                    r.applied.set();
                }
            }
            (Err(a), Err(b)) if a == b => {}
            (a, b) => {
                return Err(format!(
                    "Gateway {key}: planned {:?} afresh, {:?} with the memo",
                    a.map(|_| ()),
                    b.map(|_| ())
                ));
            }
        }
    }
    Ok(reused)
}

/// Checks one world and sequence of edits; returns how many route plans were reused.
pub fn check(w: &World, edits: &[Edit]) -> Result<usize, String> {
    let (_dir, mut snap) = crate::planner::load(&w.documents());
    let mut memos = BTreeMap::new();
    let mut reused = compare(&snap, &mut memos)?;
    for e in edits {
        apply(&mut snap, e)?;
        reused +=
            compare(&snap, &mut memos).map_err(|m| format!("after {e:?} (of {edits:?}): {m}"))?;
    }
    Ok(reused)
}
