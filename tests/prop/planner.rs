//! Properties of the planner over random worlds with the shipped blueprints: no panic;
//! the same input (in any document order) renders byte-identical output; re-planning with
//! the previous output as live children converges in a bounded number of rounds and then
//! plans no change; the status invariants of Gateways and routes hold.

use std::collections::{BTreeMap, BTreeSet};

use gatewright::cli;
use gatewright::gateway::CONTROLLER_NAME;
use gatewright::plan::{Plan, plan};
use gatewright::snapshot::{Key, ObjectKey, Snapshot, files};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde_json::Value;

use crate::world::{World, classes_dir, write_docs};

/// Rounds within which a world must converge: the longest dependency chain of a shipped
/// blueprint (4 templates) plus the three steps of a make-before-break replacement, with
/// room to spare.
pub const MAX_ROUNDS: usize = 12;

fn now() -> Time {
    Time("2026-01-01T00:00:00Z".parse().unwrap())
}

/// Writes `docs` into a fresh folder and loads it beside the shipped classes.
pub fn load(docs: &[Value]) -> (tempfile::TempDir, Snapshot) {
    let dir = tempfile::tempdir().unwrap();
    write_docs(dir.path(), "world.yaml", docs);
    let loaded = files::load(&[classes_dir(), dir.path().to_owned()], "gatewright-system")
        .unwrap_or_else(|e| panic!("the generated world does not load: {e}"));
    (dir, loaded.snapshot)
}

fn render(docs: &[Value]) -> cli::Output {
    let dir = tempfile::tempdir().unwrap();
    write_docs(dir.path(), "world.yaml", docs);
    cli::render(
        &[classes_dir(), dir.path().to_owned()],
        "gatewright-system",
        &now(),
    )
}

/// Every Gateway of ours, planned.
pub fn plan_all(snap: &Snapshot) -> Vec<Plan> {
    let keys: Vec<_> = snap.gateways().map(|(k, _)| k.clone()).collect();
    keys.iter().filter_map(|k| plan(snap, k).ok()).collect()
}

/// Adds `obj` to `desired`; an error when another parent wants the same object differently.
fn put(owner: &str, obj: &Value, desired: &mut BTreeMap<ObjectKey, Value>) -> Result<(), String> {
    let key = ObjectKey::of(obj);
    match desired.get(&key) {
        Some(other) if other != obj => Err(format!(
            "{key} is wanted by two parents ({owner} and another) with different content:\n{}\n{}",
            serde_json::to_string(other).unwrap(),
            serde_json::to_string(obj).unwrap()
        )),
        _ => {
            desired.insert(key, obj.clone());
            Ok(())
        }
    }
}

/// What the controller would apply and delete for every parent: desired children by key
/// (an error when two parents want one object differently) and the deletions.
pub fn desired_and_prune(
    snap: &Snapshot,
) -> Result<(BTreeMap<ObjectKey, Value>, BTreeSet<ObjectKey>), String> {
    let mut desired: BTreeMap<ObjectKey, Value> = BTreeMap::new();
    let mut prune = BTreeSet::new();
    for whole in plan_all(snap) {
        let p = &whole.gateway;
        for c in p.children.iter() {
            put(
                &format!("Gateway {}/{}", p.key.namespace, p.key.name),
                &c.object,
                &mut desired,
            )?;
        }
        prune.extend(p.prune.iter().cloned());
        prune.extend(p.orphaned_route_children.iter().cloned());
        for rp in &whole.routes {
            let rkey = &rp.route;
            for c in &rp.children {
                put(
                    &format!(
                        "{} {}/{} under Gateway {}/{}",
                        rkey.kind, rkey.namespace, rkey.name, p.key.namespace, p.key.name
                    ),
                    &c.object,
                    &mut desired,
                )?;
            }
            prune.extend(rp.prune.iter().cloned());
        }
    }
    if let Some(k) = prune.iter().find(|k| desired.contains_key(*k)) {
        return Err(format!("{k} is both wanted and pruned"));
    }
    Ok((desired, prune))
}

/// Applies plans to the snapshot as the controller and the simulated downstream
/// controllers would, round by round, until a round plans no change. Returns the rounds.
pub fn converge(snap: &mut Snapshot) -> Result<usize, String> {
    let mut previous: Option<BTreeMap<ObjectKey, Value>> = None;
    for round in 1..=MAX_ROUNDS {
        let (desired, prune) = desired_and_prune(snap)?;
        if prune.is_empty() && previous.as_ref() == Some(&desired) {
            return Ok(round);
        }
        for k in &prune {
            snap.remove_child(k);
        }
        for obj in desired.values() {
            let mut live = gatewright::simulate::as_ready(obj);
            live["metadata"]["creationTimestamp"] = Value::String("2026-01-01T00:00:00Z".into());
            snap.put_child(live);
        }
        previous = Some(desired);
    }
    Err(format!("no fixed point within {MAX_ROUNDS} rounds"))
}

/// `attachedRoutes` of every listener equals the number of distinct routes that an
/// accepted attachment puts on it; every parentRef of a route that names a Gateway of ours
/// has exactly one status entry of ours; no entry names a parent that is not ours.
fn check_status(snap: &Snapshot, plans: &[Plan]) -> Result<(), String> {
    for whole in plans {
        let p = &whole.gateway;
        let mut per_listener: BTreeMap<&str, BTreeSet<&gatewright::snapshot::RouteKey>> =
            BTreeMap::new();
        // The attachments the Gateway decided, as its routes' status entries carry them.
        for r in &whole.status.routes {
            let rkey = &r.route;
            for a in r.entries.iter().filter(|a| a.is_accepted()) {
                for l in &a.listeners {
                    per_listener
                        .entry(l.listener.as_str())
                        .or_default()
                        .insert(rkey);
                }
            }
        }
        for (l, _) in &whole.status.gateway.listeners {
            let want = per_listener.get(l.name.as_str()).map_or(0, BTreeSet::len);
            if usize::try_from(l.attached_routes).ok() != Some(want) {
                return Err(format!(
                    "Gateway {}/{} listener {}: attachedRoutes {} but {want} routes are accepted on it",
                    p.key.namespace, p.key.name, l.name, l.attached_routes
                ));
            }
        }
    }
    let ours: BTreeSet<Key> = plans.iter().map(|p| p.gateway.key.clone()).collect();
    for (rkey, route) in snap.routes() {
        let entries: Vec<&gatewright::gateway::ParentAttachment> = plans
            .iter()
            .flat_map(|p| p.status.routes.iter().filter(|r| &r.route == rkey))
            .flat_map(|r| r.entries.iter())
            .collect();
        for (i, pr) in route.view.parent_refs.iter().enumerate() {
            let names_ours = pr.group == gatewright::gateway::GATEWAY_API_GROUP
                && pr.kind == "Gateway"
                && ours.contains(&Key::new(pr.namespace.clone(), pr.name.clone()));
            let n = entries.iter().filter(|e| e.parent_index == i).count();
            if names_ours && n != 1 {
                return Err(format!(
                    "{rkey:?}: parentRef {i} names our Gateway but has {n} entries of ours"
                ));
            }
            if !names_ours && n != 0 {
                return Err(format!(
                    "{rkey:?}: parentRef {i} is not a Gateway of ours but has an entry of ours"
                ));
            }
        }
        if let Some(e) = entries
            .iter()
            .find(|e| e.parent_index >= route.view.parent_refs.len())
        {
            return Err(format!(
                "{rkey:?}: an entry for parentRef {} that does not exist",
                e.parent_index
            ));
        }
    }
    Ok(())
}

/// The same checks on what `gatewright render` prints: a route's status lists one entry
/// of ours per parentRef naming a Gateway of ours, each naming such a Gateway.
fn check_printed_status(
    docs: &[Value],
    world_docs: &[Value],
    ours: &BTreeSet<Key>,
) -> Result<(), String> {
    for route in world_docs.iter().filter(|d| d["kind"] == "HTTPRoute") {
        let ns = route["metadata"]["namespace"].as_str().unwrap_or_default();
        let name = route["metadata"]["name"].as_str().unwrap_or_default();
        let names_ours = |r: &Value| {
            let kind_ok = r["kind"].as_str().is_none_or(|k| k == "Gateway");
            let group_ok = r["group"]
                .as_str()
                .is_none_or(|g| g == "gateway.networking.k8s.io");
            let rns = r["namespace"].as_str().unwrap_or(ns);
            kind_ok
                && group_ok
                && ours.contains(&Key::new(
                    rns.to_owned(),
                    r["name"].as_str().unwrap_or_default().to_owned(),
                ))
        };
        let expected = route["spec"]["parentRefs"]
            .as_array()
            .map_or(0, |a| a.iter().filter(|r| names_ours(r)).count());
        let printed: Vec<&Value> = docs
            .iter()
            .filter(|d| {
                d["kind"] == "HTTPRoute"
                    && d["metadata"]["namespace"] == ns
                    && d["metadata"]["name"] == name
                    && d.get("status").is_some()
            })
            .collect();
        let entries: Vec<&Value> = printed
            .iter()
            .flat_map(|d| d["status"]["parents"].as_array().into_iter().flatten())
            .collect();
        if entries.len() != expected {
            return Err(format!(
                "HTTPRoute {ns}/{name}: {} status entries, {expected} parentRefs name Gateways of ours",
                entries.len()
            ));
        }
        for e in entries {
            if e["controllerName"] != CONTROLLER_NAME || !names_ours(&e["parentRef"]) {
                return Err(format!(
                    "HTTPRoute {ns}/{name}: entry {e} is not for a Gateway of ours"
                ));
            }
        }
    }
    Ok(())
}

/// The Gateways of ours in a world, as the planner sees them.
fn our_gateways(snap: &Snapshot) -> BTreeSet<Key> {
    plan_all(snap).into_iter().map(|p| p.gateway.key).collect()
}

/// What one world exercised.
#[derive(Clone, Copy, Debug, Default)]
pub struct Stats {
    /// Rounds to converge.
    pub rounds: usize,
    /// Gateways of ours planned.
    pub gateways: usize,
    /// Route attachments accepted.
    pub accepted: usize,
    /// Route attachments refused.
    pub refused: usize,
    /// Children at the fixed point.
    pub children: usize,
    /// Gateways Programmed at the fixed point.
    pub programmed: usize,
}

pub fn check_world(w: &World) -> Result<Stats, String> {
    let docs = w.documents();
    // Byte-identical output for the same input, whatever the order of its documents.
    let first = render(&docs);
    let again = render(&docs);
    let mut reversed = docs.clone();
    reversed.reverse();
    let shuffled = render(&reversed);
    for (what, other) in [
        ("a second render", &again),
        ("the documents in reverse order", &shuffled),
    ] {
        if first.stdout != other.stdout || first.stderr != other.stderr || first.code != other.code
        {
            return Err(format!(
                "{what} differs:\n--- first (exit {}) ---\n{}\n{}\n--- other (exit {}) ---\n{}\n{}",
                first.code,
                first.stderr.join("\n"),
                first.stdout,
                other.code,
                other.stderr.join("\n"),
                other.stdout
            ));
        }
    }
    if ![cli::EXIT_OK, cli::EXIT_TEMPLATE].contains(&first.code) {
        return Err(format!(
            "exit {} for a world that loads: {:?}",
            first.code, first.stderr
        ));
    }
    let printed = gatewright::render::output::parse_documents(&first.stdout)
        .map_err(|e| format!("render printed YAML that does not parse: {e}"))?;
    let (_dir, mut snap) = load(&docs);
    let plans = plan_all(&snap);
    check_status(&snap, &plans)?;
    check_printed_status(&printed, &docs, &our_gateways(&snap))?;
    let mut stats = Stats {
        gateways: plans.len(),
        ..Stats::default()
    };
    for a in plans
        .iter()
        .flat_map(|p| p.status.routes.iter().flat_map(|r| r.entries.iter()))
    {
        if a.is_accepted() {
            stats.accepted += 1;
        } else {
            stats.refused += 1;
        }
    }
    drop(plans);
    stats.rounds = converge(&mut snap)?;
    // Converged: the status invariants hold on the converged world too.
    let plans = plan_all(&snap);
    check_status(&snap, &plans)?;
    stats.children = snap.child_keys().count();
    stats.programmed = plans
        .iter()
        .filter(|p| {
            p.status
                .gateway
                .conditions
                .iter()
                .any(|c| c.type_ == "Programmed" && c.status.is_true())
        })
        .count();
    Ok(stats)
}

/// Found while writing the properties: the shipped blueprints named a route's child
/// `<route>-<gateway>-istio`, so a route attached to two Gateways of one name (in two
/// namespaces) had both Gateways apply one object, each with its own content. Every
/// shipped class now gives each Gateway its own child, and the world converges.
#[test]
fn a_route_attached_to_two_gateways_of_one_name_gets_a_child_for_each() {
    for class in crate::world::CLASSES {
        let gw = |ns: &str| {
            serde_json::json!({
                "apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
                "metadata": {"name": "public", "namespace": ns, "uid": format!("uid-{ns}"), "generation": 1},
                "spec": {"gatewayClassName": class, "listeners": [
                    {"name": "http", "port": 80, "protocol": "HTTP", "allowedRoutes": {"namespaces": {"from": "All"}}}]},
            })
        };
        let route = serde_json::json!({
            "apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
            "metadata": {"name": "shop", "namespace": "team-a", "uid": "uid-route", "generation": 1},
            "spec": {"parentRefs": [{"name": "public", "namespace": "infra"}, {"name": "public", "namespace": "team-b"}],
                     "rules": [{"backendRefs": [{"name": "svc", "port": 80}]}]},
        });
        let (_dir, mut snap) = load(&[gw("infra"), gw("team-b"), route]);
        let (desired, _) = desired_and_prune(&snap).unwrap_or_else(|e| panic!("{class}: {e}"));
        let route_children: Vec<&ObjectKey> = desired
            .keys()
            .filter(|k| k.kind == "HTTPRoute" && k.namespace == "team-a")
            .collect();
        assert_eq!(route_children.len(), 2, "{class}: {route_children:?}");
        converge(&mut snap).unwrap_or_else(|e| panic!("{class}: {e}"));
    }
}
