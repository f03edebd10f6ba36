//! Who wrote what: every write of the controller names the field manager `gatewright` (in
//! `managedFields`, and as the `fieldManager` of its requests) and sends `User-Agent:
//! gatewright/<version>`; and a route's status is written once per generation while a
//! Flagger-like client steps its weights (no second write of what was just written, no 409).
//!
//! The requests are read from the API server's audit log, which the test command's
//! cluster writes (`GATEWRIGHT_CLUSTER_AUDIT=1` in scripts/test.sh, at
//! `$GATEWRIGHT_CLUSTER_DIR/audit.log`); against a cluster without it, only what
//! `managedFields` show is checked, and the test says so.

use std::time::Duration;

use kube::api::{DynamicObject, Patch, PatchParams};
use serde_json::{Value, json};

use crate::common::{E2E_USER, TestNamespace, admin, apply_yaml, controller, wait_for};
use crate::controller::{cond, dynamic, route_yaml, settled_key, shipped};
use gatewright::snapshot::Key;

const T: Duration = Duration::from_secs(60);
const STEPS: i64 = 8;

/// The audit log's events, when the cluster writes one.
fn audit_log() -> Option<Vec<Value>> {
    let dir = std::env::var("GATEWRIGHT_CLUSTER_DIR").ok()?;
    let text = std::fs::read_to_string(format!("{dir}/audit.log")).ok()?;
    Some(
        text.lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect(),
    )
}

/// Whether an audit event is a request of the in-process controller (the e2e controller's
/// user, impersonated by the test's admin identity).
fn by_controller(e: &Value) -> bool {
    e["impersonatedUser"]["username"] == E2E_USER || e["user"]["username"] == E2E_USER
}

/// The managers of `obj`'s managedFields entries, with their subresource.
fn managers(obj: &DynamicObject) -> Vec<(String, String)> {
    obj.metadata
        .managed_fields
        .iter()
        .flatten()
        .map(|m| {
            (
                m.manager.clone().unwrap_or_default(),
                m.subresource.clone().unwrap_or_default(),
            )
        })
        .collect()
}

#[tokio::test]
async fn every_write_names_gatewright_and_a_route_status_is_written_once_per_generation() {
    let client = admin().await;
    let ctl = controller();
    let started = k8s_openapi::jiff::Timestamp::now();
    let ns = TestNamespace::new(&client, "writes").await;
    let n = &ns.name;
    let class = format!("writes-{n}");
    // The shipped class a Flagger canary runs on: each weight step changes the route's
    // shadow copy, whose watch event wakes the Gateway again right behind the pass that
    // wrote the route's status.
    apply_yaml(&client, &shipped("istio-certmanager-externaldns", &class)).await;
    apply_yaml(
        &client,
        &format!(
            r#"apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {{name: gw, namespace: {n}}}
spec:
  gatewayClassName: {class}
  listeners:
  - {{name: http, port: 80, protocol: HTTP, hostname: "*.example.com"}}
"#
        ),
    )
    .await;
    apply_yaml(&client, &route_yaml(n, "shop", "shop.example.com")).await;
    let routes = dynamic(
        &client,
        n,
        "gateway.networking.k8s.io",
        "v1",
        "HTTPRoute",
        "httproutes",
    );
    // Our entry at the route's generation `g`.
    let at = |g: i64| {
        let routes = routes.clone();
        async move {
            let r = routes.get("shop").await.ok()?;
            let e = r.data["status"]["parents"].as_array()?.first()?.clone();
            (r.metadata.generation == Some(g)
                && cond(&e["conditions"], "Accepted")?["observedGeneration"] == g)
                .then_some(())
        }
    };
    wait_for("the route accepted", T, || at(1)).await;
    // Flagger's steps: a weight change, then wait for the status to show it was taken.
    for step in 1..=STEPS {
        let canary = step * 10;
        let patch = json!({
            "apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
            "spec": {"rules": [{"backendRefs": [
                {"name": "primary", "port": 80, "weight": 100 - canary},
                {"name": "canary", "port": 80, "weight": canary}
            ]}]}
        });
        routes
            .patch(
                "shop",
                &PatchParams::apply("flagger-e2e").force(),
                &Patch::Apply(&patch),
            )
            .await
            .unwrap();
        wait_for(&format!("weight step {step} taken"), T, || at(step + 1)).await;
    }
    // Whatever a pass right behind the last one would write has been written.
    settled_key(&ctl, &Key::new(n.clone(), "gw")).await;

    // managedFields: our status writes and finalizer are ours by name.
    let route = routes.get("shop").await.unwrap();
    let m = managers(&route);
    assert!(
        m.contains(&("gatewright".into(), "status".into())),
        "route status written by gatewright: {m:?}"
    );
    assert!(
        m.iter()
            .all(|(who, sub)| sub != "status" || who == "gatewright"),
        "every status manager of the route is gatewright: {m:?}"
    );
    let gateways = dynamic(
        &client,
        n,
        "gateway.networking.k8s.io",
        "v1",
        "Gateway",
        "gateways",
    );
    let gw = gateways.get("gw").await.unwrap();
    let fields = gw.metadata.managed_fields.clone().unwrap_or_default();
    let owner_of = |sub: &str, field: &str| {
        fields
            .iter()
            .filter(|f| f.subresource.as_deref().unwrap_or_default() == sub)
            .filter(|f| {
                f.fields_v1
                    .as_ref()
                    .is_some_and(|v| v.0.to_string().contains(field))
            })
            .map(|f| f.manager.clone().unwrap_or_default())
            .collect::<Vec<_>>()
    };
    assert_eq!(owner_of("status", "f:conditions"), ["gatewright"]);
    assert_eq!(owner_of("", "f:finalizers"), ["gatewright"]);
    for (who, _) in managers(&route).iter().chain(&managers(&gw)) {
        assert_ne!(who, "unknown", "a write that did not say who made it");
    }

    let Some(events) = audit_log() else {
        println!(
            "no audit log in $GATEWRIGHT_CLUSTER_DIR: request checks not made (scripts/test.sh writes one)"
        );
        return;
    };
    // Every request the controller sent while this test ran (its and the other tests'
    // of this binary, which share the controller): user agent, and the field manager on
    // every create, update and patch.
    let since = |e: &Value| {
        e["requestReceivedTimestamp"]
            .as_str()
            .and_then(|t| t.parse::<k8s_openapi::jiff::Timestamp>().ok())
            .is_some_and(|t| t >= started)
    };
    let mine: Vec<&Value> = events
        .iter()
        .filter(|e| by_controller(e) && since(e))
        .collect();
    assert!(
        !mine.is_empty(),
        "the controller's writes are in the audit log"
    );
    let agent = format!("gatewright/{}", env!("CARGO_PKG_VERSION"));
    for e in &mine {
        let uri = e["requestURI"].as_str().unwrap_or_default();
        assert!(
            e["userAgent"]
                .as_str()
                .is_some_and(|a| a.starts_with(&agent)),
            "a request without our user agent: {} {uri} ({})",
            e["verb"],
            e["userAgent"]
        );
        if matches!(e["verb"].as_str(), Some("create" | "update" | "patch")) {
            assert!(
                uri.contains("fieldManager=gatewright"),
                "a write without our field manager: {} {uri}",
                e["verb"]
            );
        }
    }
    // The route's status: one write per generation, none refused.
    let status_writes: Vec<&&Value> = mine
        .iter()
        .filter(|e| {
            let o = &e["objectRef"];
            o["resource"] == "httproutes"
                && o["namespace"] == n.as_str()
                && o["name"] == "shop"
                && o["subresource"] == "status"
        })
        .collect();
    let conflicts = status_writes
        .iter()
        .filter(|e| e["responseStatus"]["code"] == 409)
        .count();
    println!(
        "route status requests: {} for {} generations, {conflicts} answered 409",
        status_writes.len(),
        STEPS + 1
    );
    assert_eq!(
        conflicts, 0,
        "a status write bound to fail on an older copy"
    );
    assert_eq!(
        i64::try_from(status_writes.len()).unwrap(),
        STEPS + 1,
        "exactly one status write per route generation"
    );
    ns.delete().await;
}
