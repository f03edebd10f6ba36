//! The tenancy probe of `gatewright check` (docs/security.md): `check` has no world of the
//! user's to plan, so it plans each blueprint against a small one of its own, the shape the
//! tenancy boundary is about, with the downstream controllers simulated until nothing
//! changes: a Gateway whose listener `admin` admits routes of its own namespace only and
//! whose listener `apps` admits every namespace's, the platform's route on `admin`, and a
//! tenant's routes (one listing `admin`'s hostname beside one of `apps`, one with no
//! hostname). Whatever the blueprint would render there that the planner refuses for
//! crossing the boundary is the probe's finding.
//!
//! In: the snapshot of `check`'s files (the blueprint among them). Out: the boundary
//! errors, in words. Pure: no client, no clock.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::json;

use crate::snapshot::{Key, Snapshot, ingest};

/// Rounds of planning and simulated readiness before the probe stops looking.
const ROUNDS: usize = 8;

/// The boundary errors of blueprint `blueprint` in the probe world, added to `snap`; `None`
/// when the world cannot be set up in it (a name the input already uses).
#[must_use]
pub fn tenancy(mut snap: Snapshot, blueprint: &str) -> Option<Vec<String>> {
    let class = "gatewright-tenancy-probe";
    let (infra, tenant) = ("gatewright-probe-infra", "gatewright-probe-tenant");
    for (ns, labels) in [(infra, [("tier", "platform")]), (tenant, [("tier", "app")])] {
        let mut l: BTreeMap<String, String> = labels
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        l.insert("kubernetes.io/metadata.name".into(), ns.to_owned());
        snap.put_namespace(ns, l);
    }
    let route = |ns: &str, name: &str, parent: serde_json::Value, hostnames: &[&str], uid: u8| {
        json!({
            "apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
            "metadata": {"name": name, "namespace": ns, "generation": 1,
                "uid": format!("00000000-0000-4000-8000-0000000000{uid:02x}")},
            "spec": {
                "parentRefs": [parent],
                "hostnames": hostnames,
                "rules": [{"backendRefs": [{"name": "app", "port": 80}]}],
            },
        })
    };
    let docs = [
        json!({
            "apiVersion": "gateway.networking.k8s.io/v1", "kind": "GatewayClass",
            "metadata": {"name": class},
            "spec": {
                "controllerName": crate::gateway::CONTROLLER_NAME,
                "parametersRef": {"group": "gatewright.dev", "kind": "GatewayClassBlueprint", "name": blueprint},
            },
        }),
        json!({
            "apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
            "metadata": {"name": "shared", "namespace": infra, "generation": 1,
                "uid": "00000000-0000-4000-8000-000000000001"},
            "spec": {
                "gatewayClassName": class,
                "listeners": [
                    {"name": "admin", "port": 80, "protocol": "HTTP", "hostname": "admin.probe.example",
                        "allowedRoutes": {"namespaces": {"from": "Same"}}},
                    {"name": "apps", "port": 80, "protocol": "HTTP", "hostname": "*.apps.probe.example",
                        "allowedRoutes": {"namespaces": {"from": "All"}}},
                ],
            },
        }),
        json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "app", "namespace": infra}, "spec": {"ports": [{"port": 80}]}}),
        json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "app", "namespace": tenant}, "spec": {"ports": [{"port": 80}]}}),
        route(
            infra,
            "admin",
            json!({"name": "shared", "sectionName": "admin"}),
            &[],
            2,
        ),
        route(
            tenant,
            "listed",
            json!({"name": "shared", "namespace": infra}),
            &["foo.apps.probe.example", "admin.probe.example"],
            3,
        ),
        route(
            tenant,
            "open",
            json!({"name": "shared", "namespace": infra}),
            &[],
            4,
        ),
    ];
    if snap.class(class).is_some() {
        return None;
    }
    for doc in docs {
        ingest::put(&mut snap, doc).ok()?;
    }
    let key = Key::new(infra.to_owned(), "shared");
    let mut found = BTreeSet::new();
    let mut previous = None;
    for _ in 0..ROUNDS {
        let Ok(plan) = crate::plan::plan(&snap, &key) else {
            break;
        };
        found.extend(
            plan.gateway
                .errors
                .iter()
                .chain(plan.routes.iter().flat_map(|r| r.errors.iter()))
                .filter(|e| e.category == crate::render::BOUNDARY_CATEGORY)
                .map(ToString::to_string),
        );
        let children: Vec<serde_json::Value> = plan
            .gateway
            .children
            .iter()
            .chain(plan.routes.iter().flat_map(|r| r.children.iter()))
            .map(|c| serde_json::Value::clone(&c.object))
            .collect();
        if previous.as_ref() == Some(&children) {
            break;
        }
        for c in &children {
            let mut live = crate::simulate::as_ready(c);
            live["metadata"]["creationTimestamp"] = json!("2026-01-01T00:00:00Z");
            snap.put_child(live);
        }
        previous = Some(children);
    }
    Some(found.into_iter().collect())
}
