//! The tenancy boundary over random worlds (docs/security.md): listeners with every kind
//! of `allowedRoutes` and hostname, routes with and without hostnames and sectionNames,
//! the shipped classes. At the fixed point, every (listener, hostname) pair a route copy
//! serves on the child Gateway it attaches to is one the parent accepted the route for,
//! and every child listener named after a parent listener admits no namespace that
//! listener does not. The served pairs are worked out here from the rendered objects alone
//! (the child's listeners, the copy's parentRefs and hostnames), not by the planner's
//! own check.

use std::collections::BTreeMap;

use gatewright::plan::Plan;
use serde_json::Value;

use crate::planner::{converge, load, plan_all};
use crate::world::World;

/// Whether the wildcard `w` (`*.example.com`) covers `name` (a deeper name or wildcard).
fn under(name: &str, w: &str) -> bool {
    w.strip_prefix('*')
        .is_some_and(|suffix| name.len() > suffix.len() && name.ends_with(suffix) && name != w)
}

/// What a listener of hostname `l` serves of a route hostname `h`.
fn meet(l: Option<&str>, h: &str) -> Option<String> {
    match l {
        None => Some(h.to_owned()),
        Some(l) if l == h || under(h, l) => Some(h.to_owned()),
        Some(l) if under(l, h) => Some(l.to_owned()),
        Some(_) => None,
    }
}

/// Whether `accepted` (hostnames; `None` in it: every hostname) covers `served` (`None`:
/// every hostname).
fn covered(accepted: &[Option<String>], served: Option<&str>) -> bool {
    accepted.iter().any(|a| match (a, served) {
        (None, _) => true,
        (Some(_), None) => false,
        (Some(a), Some(s)) => a == s || under(s, a),
    })
}

fn str_of<'a>(v: &'a Value, path: &[&str]) -> Option<&'a str> {
    path.iter().try_fold(v, |v, k| v.get(k))?.as_str()
}

/// Checks one Gateway's plan; returns the number of served pairs checked.
fn check_plan(whole: &Plan) -> Result<usize, String> {
    let p = &whole.gateway;
    let gateways: Vec<&Value> = p
        .children
        .iter()
        .filter(|c| c.key.kind == "Gateway")
        .map(|c| &*c.object)
        .collect();
    let spec: &Value = &p.context.gateway;
    let parent_listeners: BTreeMap<&str, &Value> = spec["spec"]["listeners"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|l| Some((l["name"].as_str()?, l)))
        .collect();
    // Child listeners named after a parent listener: no wider namespaces.
    for g in &gateways {
        for l in g["spec"]["listeners"].as_array().into_iter().flatten() {
            let Some(parent) = l["name"].as_str().and_then(|n| parent_listeners.get(n)) else {
                continue;
            };
            let from = |v: &Value| {
                v["allowedRoutes"]["namespaces"]["from"]
                    .as_str()
                    .unwrap_or("Same")
                    .to_owned()
            };
            let (pf, cf) = (from(parent), from(l));
            let ok = pf == "All"
                || (pf == cf
                    && (pf != "Selector"
                        || parent["allowedRoutes"]["namespaces"]["selector"]
                            == l["allowedRoutes"]["namespaces"]["selector"]));
            if !ok {
                return Err(format!(
                    "Gateway {}/{}: child listener {} admits {cf}, the parent's {pf}: {l}",
                    p.key.namespace, p.key.name, l["name"]
                ));
            }
        }
    }
    let mut checked = 0;
    for rp in &whole.routes {
        // What the parent accepted the route for, by listener (no ListenerSets here: the
        // key is the name).
        let mut accepted: BTreeMap<&str, Vec<Option<String>>> = BTreeMap::new();
        if let Some(r) = whole.status.routes.iter().find(|r| r.route == rp.route) {
            for a in r.entries.iter().filter(|a| a.is_accepted()) {
                for l in a.listeners.iter().filter(|l| l.set.is_none()) {
                    let names = accepted.entry(l.listener.as_str()).or_default();
                    if l.hostnames.is_empty() {
                        names.push(None);
                    }
                    names.extend(l.hostnames.iter().cloned().map(Some));
                }
            }
        }
        let every: Vec<Option<String>> = accepted.values().flatten().cloned().collect();
        for c in rp.children.iter().filter(|c| c.key.kind.ends_with("Route")) {
            let copy = &c.object;
            let hosts: Vec<&str> = copy["spec"]["hostnames"]
                .as_array()
                .map(|a| a.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            let ns = str_of(copy, &["metadata", "namespace"]).unwrap_or_default();
            for r in copy["spec"]["parentRefs"].as_array().into_iter().flatten() {
                let name = r["name"].as_str().unwrap_or_default();
                let rns = r["namespace"].as_str().unwrap_or(ns);
                // A Gateway the plan did not render (its template failed, or waits) is
                // judged as the planner's boundary judges it: as if it had the parent's
                // listeners (the copy's sectionName names a parent listener).
                let child = gateways
                    .iter()
                    .copied()
                    .find(|g| {
                        str_of(g, &["metadata", "name"]) == Some(name)
                            && str_of(g, &["metadata", "namespace"]) == Some(rns)
                    })
                    .unwrap_or(spec);
                for l in child["spec"]["listeners"].as_array().into_iter().flatten() {
                    let lname = l["name"].as_str().unwrap_or_default();
                    if r["sectionName"].as_str().is_some_and(|s| s != lname)
                        || r["port"]
                            .as_i64()
                            .is_some_and(|port| Some(port) != l["port"].as_i64())
                    {
                        continue;
                    }
                    let lhost = l["hostname"].as_str();
                    let served: Vec<Option<String>> = if hosts.is_empty() {
                        vec![lhost.map(str::to_owned)]
                    } else {
                        hosts
                            .iter()
                            .filter_map(|h| meet(lhost, h))
                            .map(Some)
                            .collect()
                    };
                    let allowed: &[Option<String>] = if parent_listeners.contains_key(lname) {
                        accepted.get(lname).map_or(&[], Vec::as_slice)
                    } else {
                        &every
                    };
                    for s in &served {
                        checked += 1;
                        if !covered(allowed, s.as_deref()) {
                            return Err(format!(
                                "{} {}/{}: its copy serves {s:?} on listener {lname} of {rns}/{name}; accepted there: {allowed:?}\n{copy}",
                                rp.route.kind, rp.route.namespace, rp.route.name
                            ));
                        }
                    }
                }
            }
        }
    }
    Ok(checked)
}

/// The property on one world; the number of served pairs checked.
pub fn check(w: &World) -> Result<usize, String> {
    let (_dir, mut snap) = load(&w.documents());
    converge(&mut snap)?;
    plan_all(&snap).iter().map(check_plan).sum()
}
