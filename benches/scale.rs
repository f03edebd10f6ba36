//! Figures on a real cluster (KUBECONFIG), printed, never asserted: 100 Gateways and 500
//! HTTPRoutes over 20 namespaces with the istio-certmanager-externaldns class.
//!
//!   eval "$(tests/cluster/up)"; cargo bench --features cluster-tests --bench scale; tests/cluster/down
//!
//! Prints: time from start to every Gateway Programmed (downstream readiness simulated
//! as it goes), p50/p99 from an HTTPRoute weight change to the shadow route carrying it,
//! write requests of a forced full re-plan, and the process's resident memory.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::cast_precision_loss,
    clippy::panic,
    reason = "benchmark"
)]

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use kube::Client;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, Patch, PatchParams,
};
use serde_json::json;

const NAMESPACES: usize = 20;
const GATEWAYS: usize = 100;
const ROUTES_PER_GATEWAY: usize = 5;

async fn apply(client: &Client, ar: &ApiResource, ns: Option<&str>, obj: serde_json::Value) {
    let api: Api<DynamicObject> = match ns {
        Some(ns) => Api::namespaced_with(client.clone(), ns, ar),
        None => Api::all_with(client.clone(), ar),
    };
    let name = obj["metadata"]["name"].as_str().unwrap().to_owned();
    api.patch(
        &name,
        &PatchParams::apply("scale").force(),
        &Patch::Apply(&obj),
    )
    .await
    .unwrap();
}

fn ar(group: &str, version: &str, kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural)
}

fn rss_mb() -> f64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    s.lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|k| k.parse::<f64>().ok())
        .unwrap_or(0.0)
        / 1024.0
}

fn pct(v: &mut [Duration], p: f64) -> Duration {
    v.sort();
    v[((v.len() as f64 - 1.0) * p).round() as usize]
}

/// The allocator the binary uses (src/main.rs), so the figures are the binary's.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() {
    if std::env::var_os("KUBECONFIG").is_none() {
        println!("scale: set KUBECONFIG (eval \"$(tests/cluster/up)\") to run this benchmark");
        return;
    }
    let client = Client::try_default().await.unwrap();
    let class = format!("scale-{}", std::process::id());
    let dir = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/gatewayclasses/istio-certmanager-externaldns"
    );
    let text = format!(
        "{}\n---\n{}",
        std::fs::read_to_string(format!("{dir}/gatewayclass.yaml")).unwrap(),
        std::fs::read_to_string(format!("{dir}/blueprint.yaml")).unwrap()
    )
    .replace("istio-certmanager-externaldns", &class);
    for doc in gatewright::render::output::parse_documents(&text).unwrap() {
        let (g, v) = doc["apiVersion"].as_str().unwrap().split_once('/').unwrap();
        let kind = doc["kind"].as_str().unwrap();
        let plural = if kind == "GatewayClass" {
            "gatewayclasses"
        } else {
            "gatewayclassblueprints"
        };
        apply(&client, &ar(g, v, kind, plural), None, doc.clone()).await;
    }
    let ns_ar = ar("", "v1", "Namespace", "namespaces");
    let gw_ar = ar("gateway.networking.k8s.io", "v1", "Gateway", "gateways");
    let rt_ar = ar("gateway.networking.k8s.io", "v1", "HTTPRoute", "httproutes");
    let nss: Vec<String> = (0..NAMESPACES).map(|i| format!("{class}-{i}")).collect();
    for ns in &nss {
        apply(
            &client,
            &ns_ar,
            None,
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}),
        )
        .await;
    }

    let started = Instant::now();
    let ctl = gatewright::controller::start(
        client.clone(),
        gatewright::controller::Options {
            controller_namespace: format!("{class}-global"),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    for g in 0..GATEWAYS {
        let ns = &nss[g % NAMESPACES];
        apply(&client, &gw_ar, Some(ns), json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway", "metadata": {"name": format!("gw{g}"), "namespace": ns},
            "spec": {"gatewayClassName": class, "listeners": [{"name": "http", "port": 80, "protocol": "HTTP", "hostname": format!("*.g{g}.example.com")}]}})).await;
        for r in 0..ROUTES_PER_GATEWAY {
            apply(&client, &rt_ar, Some(ns), json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute", "metadata": {"name": format!("gw{g}-r{r}"), "namespace": ns},
                "spec": {"parentRefs": [{"name": format!("gw{g}")}], "hostnames": [format!("app{r}.g{g}.example.com")],
                         "rules": [{"backendRefs": [{"name": "primary", "port": 80, "weight": 100}, {"name": "canary", "port": 80, "weight": 0}]}]}})).await;
        }
    }
    let gws: Api<DynamicObject> = Api::all_with(client.clone(), &gw_ar);
    loop {
        gatewright::controller::simulate_ready(&client)
            .await
            .unwrap();
        let list = gws.list(&Default::default()).await.unwrap();
        let done = list
            .items
            .iter()
            .filter(|g| g.data["spec"]["gatewayClassName"] == class.as_str())
            .filter(|g| {
                g.data["status"]["conditions"].as_array().is_some_and(|c| {
                    c.iter()
                        .any(|c| c["type"] == "Programmed" && c["status"] == "True")
                })
            })
            .count();
        if done == GATEWAYS {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(900),
            "not converged after 15 minutes ({done}/{GATEWAYS})"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let converge = started.elapsed();
    println!(
        "scale: {GATEWAYS} Gateways, {} HTTPRoutes, {NAMESPACES} namespaces",
        GATEWAYS * ROUTES_PER_GATEWAY
    );
    println!(
        "  start to all Gateways Programmed: {converge:.1?} (downstream readiness simulated every 0.5 s)"
    );

    // Route weight change -> shadow route carries it.
    let mut lat = Vec::new();
    for i in 0..40usize {
        let g = i % GATEWAYS;
        let ns = &nss[g % NAMESPACES];
        let routes: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &rt_ar);
        let w = 1 + (i % 50) as i64;
        let t = Instant::now();
        routes.patch(&format!("gw{g}-r0"), &PatchParams::default(), &Patch::Merge(&json!({"spec": {"rules": [{"backendRefs": [{"name": "primary", "port": 80, "weight": 100 - w}, {"name": "canary", "port": 80, "weight": w}]}]}}))).await.unwrap();
        loop {
            if let Some(s) = routes
                .get_opt(&format!("gw{g}-r0-gw{g}-istio"))
                .await
                .unwrap()
                && s.data["spec"]["rules"][0]["backendRefs"][1]["weight"] == w
            {
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        lat.push(t.elapsed());
    }
    println!(
        "  HTTPRoute weight change to shadow route updated: p50 {:.1?}, p99 {:.1?} ({} changes, polled every 5 ms)",
        pct(&mut lat, 0.5),
        pct(&mut lat, 0.99),
        lat.len()
    );

    // Forced full re-plan of a converged world.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let before = ctl.metrics().writes();
    ctl.enqueue_all();
    let t = Instant::now();
    tokio::time::sleep(Duration::from_millis(200)).await;
    while ctl.metrics().queue_depth.load(Ordering::Relaxed) > 0 {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    println!(
        "  forced re-plan of every Gateway: {} write requests, {:.1?}",
        ctl.metrics().writes() - before,
        t.elapsed()
    );
    println!(
        "  resident memory of the process (controller + benchmark client): {:.0} MB",
        rss_mb()
    );

    let nsapi: Api<DynamicObject> = Api::all_with(client.clone(), &ns_ar);
    for ns in &nss {
        let _ = nsapi.delete(ns, &DeleteParams::default()).await;
    }
    // The controller is still running: it tears the Gateways down and drops its finalizers.
    let t = Instant::now();
    while t.elapsed() < Duration::from_secs(180) {
        let left = gws
            .list(&Default::default())
            .await
            .unwrap()
            .items
            .iter()
            .filter(|g| g.data["spec"]["gatewayClassName"] == class.as_str())
            .count();
        if left == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    println!(
        "  teardown of every Gateway and its children: {:.1?}",
        t.elapsed()
    );
}
