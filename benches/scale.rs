//! The scale benchmark: figures on a real cluster, printed, never asserted. Run through
//! `scripts/bench-scale.sh N`, which starts a test cluster of its own, builds the release
//! controller and saves the output under `benches/results/`.
//!
//! Environment: `KUBECONFIG` (the cluster), `SCALE_GATEWAYS` (N), `SCALE_CONTROLLER` (the
//! release `gatewright` binary, run as a separate process), `SCALE_CHANGES` (latency
//! samples, default 200), `SCALE_RESTART_SECONDS` (default 120), `SCALE_CONCURRENCY`
//! (client concurrency of both the workload and the ceiling, default 8),
//! `SCALE_IDLE_OBJECTS` (unrelated 100 KiB Secrets and Services created before the start;
//! default 0).
//!
//! What it does, in order:
//! 1. installs the istio-certmanager-externaldns class and 20 namespaces; optionally the
//!    unrelated Secrets and Services, then the controller's idle memory;
//! 2. starts the controller and, once it is ready, creates N Gateways x 5 HTTPRoutes with
//!    `SCALE_CONCURRENCY` clients while a simulator writes the children's downstream status
//!    (Istio, cert-manager, external-dns) as soon as they appear; cold convergence is the
//!    time until every Gateway is Programmed and every route Accepted;
//! 3. route weight change -> shadow route seen by a watch (p50/p99), child status -> Gateway
//!    status seen by a watch (p50/p99), alternating so each sample is a real change;
//! 4. restarts the controller on the converged world and counts the API server's write
//!    requests in the following `SCALE_RESTART_SECONDS`, the Events and condition flips;
//! 5. stops the controller and measures the ceiling: the same 23 writes per Gateway with
//!    the same concurrency, from a plain client, no planning and no watches.
//!
//! Write requests come from the API server's `apiserver_request_total` (diff around each
//! phase); during the cold phase they include the workload's creates and the simulator's
//! status writes, as the table says.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::cast_precision_loss,
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss,
    clippy::panic,
    reason = "benchmark"
)]

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use kube::Client;
use kube::api::{
    Api, ApiResource, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams,
};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use serde_json::{Value, json};
use tokio::sync::Semaphore;

#[path = "scale/shared.rs"]
mod shared;

#[path = "scale/rollout.rs"]
mod rollout;

#[path = "scale/attached.rs"]
mod attached;

#[path = "scale/load.rs"]
mod load;

#[path = "scale/probe.rs"]
mod probe;

#[path = "scale/proc.rs"]
mod proc;
use proc::Proc;

/// Status writes of the simulator to Gateways (Istio's, for the child Gateways).
static SIM_GATEWAY_STATUS_WRITES: std::sync::atomic::AtomicUsize =
    std::sync::atomic::AtomicUsize::new(0);

const NAMESPACES: usize = 20;
const ROUTES_PER_GATEWAY: usize = 5;
const CLASS: &str = "istio-certmanager-externaldns";
const MANAGED: &str = "app.kubernetes.io/managed-by=gatewright";

/// How long cold convergence may make no progress before the benchmark gives up.
const STUCK: Duration = Duration::from_secs(300);

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn ar(group: &str, version: &str, kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural)
}

fn gw_ar() -> ApiResource {
    ar("gateway.networking.k8s.io", "v1", "Gateway", "gateways")
}
fn rt_ar() -> ApiResource {
    ar("gateway.networking.k8s.io", "v1", "HTTPRoute", "httproutes")
}
/// The child kinds whose status a downstream controller writes.
fn child_ars() -> Vec<ApiResource> {
    vec![
        ar("cert-manager.io", "v1", "Certificate", "certificates"),
        gw_ar(),
        ar(
            "externaldns.k8s.io",
            "v1alpha1",
            "DNSEndpoint",
            "dnsendpoints",
        ),
    ]
}

fn api(client: &Client, ar: &ApiResource, ns: Option<&str>) -> Api<DynamicObject> {
    match ns {
        Some(ns) => Api::namespaced_with(client.clone(), ns, ar),
        None => Api::all_with(client.clone(), ar),
    }
}

async fn apply(client: &Client, ar: &ApiResource, ns: Option<&str>, obj: &Value, manager: &str) {
    let name = obj["metadata"]["name"].as_str().unwrap().to_owned();
    let mut tries = 0;
    loop {
        match api(client, ar, ns)
            .patch(
                &name,
                &PatchParams::apply(manager).force(),
                &Patch::Apply(obj),
            )
            .await
        {
            Ok(_) => return,
            Err(e) if tries < 5 => {
                tries += 1;
                eprintln!("scale: apply {name} failed ({e}); retrying");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(e) => panic!("apply {name}: {e}"),
        }
    }
}

fn gateway(ns: &str, g: usize) -> Value {
    json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
        "metadata": {"name": format!("gw{g}"), "namespace": ns},
        "spec": {"gatewayClassName": CLASS, "listeners": [
            {"name": "http", "port": 80, "protocol": "HTTP", "hostname": format!("*.g{g}.example.com")},
            {"name": "https", "port": 443, "protocol": "HTTPS", "hostname": format!("*.g{g}.example.com"),
             "tls": {"options": {"gatewright.dev/certificate": "generated"}}}]}})
}

fn route(ns: &str, g: usize, r: usize, canary: i64) -> Value {
    json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
        "metadata": {"name": format!("gw{g}-r{r}"), "namespace": ns},
        "spec": {"parentRefs": [{"name": format!("gw{g}")}], "hostnames": [format!("app{r}.g{g}.example.com")],
                 "rules": [{"backendRefs": [{"name": "primary", "port": 80, "weight": 100 - canary}, {"name": "canary", "port": 80, "weight": canary}]}]}})
}

fn ns_of(prefix: &str, g: usize) -> String {
    format!("{prefix}{}", g % NAMESPACES)
}

// ---- the API server's request counters -------------------------------------------------

#[path = "scale/conditions.rs"]
mod conditions;
#[path = "scale/counts.rs"]
mod counts;
use conditions::{cond, route_accepted};
use counts::{Counts, apiserver_counts, writes_between};

/// Single-object reads (GET, not LIST or WATCH) between two readings, by resource.
fn gets_between(before: &Counts, after: &Counts) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    for ((verb, resource), v) in after {
        if verb == "GET" && !resource.starts_with("leases") {
            let d = (v - before
                .get(&(verb.clone(), resource.clone()))
                .copied()
                .unwrap_or(0.0))
            .round() as u64;
            if d > 0 {
                *out.entry(resource.clone()).or_default() += d;
            }
        }
    }
    out
}

/// The controller's reconciles so far, by kind: how many, and their mean duration (from
/// its own `/metrics`): where a cold start's time went.
async fn print_reconciles(p: &Proc) {
    let Some(text) = p.get("/metrics").await else {
        return;
    };
    // kind -> (count, seconds)
    let mut by: BTreeMap<String, (f64, f64)> = BTreeMap::new();
    let (mut plans, mut plan_secs) = (0.0f64, 0.0f64);
    for line in text.lines() {
        if let Some(v) = line.strip_prefix("gatewright_plan_duration_seconds_sum ") {
            plan_secs = v.trim().parse().unwrap_or(0.0);
        }
        if let Some(v) = line.strip_prefix("gatewright_plan_duration_seconds_count ") {
            plans = v.trim().parse().unwrap_or(0.0);
        }
        let (sum, rest) = if let Some(r) =
            line.strip_prefix("gatewright_reconcile_duration_seconds_sum{")
        {
            (true, r)
        } else if let Some(r) = line.strip_prefix("gatewright_reconcile_duration_seconds_count{") {
            (false, r)
        } else {
            continue;
        };
        let Some((labels, value)) = rest.split_once("} ") else {
            continue;
        };
        let kind = labels
            .split(',')
            .find_map(|l| l.strip_prefix("kind=\""))
            .map(|k| k.trim_end_matches('"').to_owned())
            .unwrap_or_default();
        let v: f64 = value.trim().parse().unwrap_or(0.0);
        let e = by.entry(kind).or_default();
        if sum {
            e.1 += v;
        } else {
            e.0 += v;
        }
    }
    let line: Vec<String> = by
        .iter()
        .map(|(k, (n, secs))| {
            format!(
                "{k} {n:.0} (mean {:.1} ms)",
                if *n > 0.0 { secs / n * 1000.0 } else { 0.0 }
            )
        })
        .collect();
    println!(
        "  controller reconciles to converge: {}; of which planning (under the snapshot lock): {plans:.0} plans, mean {:.1} ms",
        line.join(", "),
        if plans > 0.0 {
            plan_secs / plans * 1000.0
        } else {
            0.0
        }
    );
}

fn print_writes(title: &str, w: &BTreeMap<(String, String), u64>) {
    let total: u64 = w.values().sum();
    println!("  {title}: {total} write requests (leases left out)");
    for ((verb, resource), n) in w {
        println!("      {verb:<8} {resource:<36} {n:>7}");
    }
}

// ---- watch-fed views of the world --------------------------------------------------------

/// The latest version of every object of a watch, by `namespace/name`, and when it came.
#[derive(Clone, Default)]
struct View(Arc<Mutex<HashMap<String, (Value, Instant)>>>);

impl View {
    fn follow(
        client: &Client,
        ar: &ApiResource,
        cfg: watcher::Config,
        on: impl Fn(&str, &Value, Option<&Value>) + Send + 'static,
    ) -> Self {
        let view = Self::default();
        let v = view.clone();
        let api: Api<DynamicObject> = Api::all_with(client.clone(), ar);
        tokio::spawn(async move {
            let mut s = watcher::watcher(api, cfg).default_backoff().boxed();
            while let Some(ev) = s.next().await {
                let (o, deleted) = match ev {
                    Ok(Event::Apply(o) | Event::InitApply(o)) => (o, false),
                    Ok(Event::Delete(o)) => (o, true),
                    _ => continue,
                };
                let val = serde_json::to_value(&o).unwrap();
                let key = format!(
                    "{}/{}",
                    o.metadata.namespace.clone().unwrap_or_default(),
                    o.metadata.name.clone().unwrap_or_default()
                );
                let mut m = v.0.lock().unwrap();
                if deleted {
                    m.remove(&key);
                } else {
                    let old = m.get(&key).map(|(o, _)| o.clone());
                    on(&key, &val, old.as_ref());
                    m.insert(key, (val, Instant::now()));
                }
            }
        });
        view
    }
    fn get(&self, key: &str) -> Option<(Value, Instant)> {
        self.0.lock().unwrap().get(key).cloned()
    }
    fn values(&self) -> Vec<Value> {
        self.0
            .lock()
            .unwrap()
            .values()
            .map(|(v, _)| v.clone())
            .collect()
    }
}

fn programmed(g: &Value) -> Option<&str> {
    cond(&g["status"]["conditions"], "Programmed").and_then(|c| c["status"].as_str())
}

fn is_parent(g: &Value) -> bool {
    g["spec"]["gatewayClassName"] == CLASS
}

/// Writes the downstream status of every child as it appears (once per change that
/// needs it), as Istio, cert-manager and external-dns would.
fn simulator(client: &Client, paused: Arc<AtomicBool>) {
    for ar in child_ars() {
        let client = client.clone();
        let paused = paused.clone();
        tokio::spawn(async move {
            let api: Api<DynamicObject> = Api::all_with(client.clone(), &ar);
            let mut s = watcher::watcher(api, watcher::Config::default().labels(MANAGED))
                .default_backoff()
                .boxed();
            let sem = Arc::new(Semaphore::new(4));
            while let Some(ev) = s.next().await {
                let o = match ev {
                    Ok(Event::Apply(o) | Event::InitApply(o)) => o,
                    _ => continue,
                };
                if paused.load(Ordering::Relaxed) {
                    continue;
                }
                let mut v = serde_json::to_value(&o).unwrap();
                v["apiVersion"] = json!(ar.api_version);
                v["kind"] = json!(ar.kind);
                let Some(status) = gatewright::simulate::ready_status(&v) else {
                    continue;
                };
                if gatewright::controller::is_subset(&status, &v["status"]) {
                    continue;
                }
                let api: Api<DynamicObject> = api_ns(&client, &ar, &o);
                let name = o.metadata.name.clone().unwrap_or_default();
                let permit = sem.clone().acquire_owned().await.unwrap();
                if ar.kind == "Gateway" {
                    SIM_GATEWAY_STATUS_WRITES.fetch_add(1, Ordering::Relaxed);
                }
                tokio::spawn(async move {
                    let _ = api
                        .patch_status(
                            &name,
                            &PatchParams::default(),
                            &Patch::Merge(&json!({ "status": status })),
                        )
                        .await;
                    drop(permit);
                });
            }
        });
    }
}

fn api_ns(client: &Client, ar: &ApiResource, o: &DynamicObject) -> Api<DynamicObject> {
    match &o.metadata.namespace {
        Some(ns) => Api::namespaced_with(client.clone(), ns, ar),
        None => Api::all_with(client.clone(), ar),
    }
}

fn pct(v: &mut [Duration], p: f64) -> Duration {
    v.sort();
    if v.is_empty() {
        return Duration::ZERO;
    }
    v[((v.len() as f64 - 1.0) * p).round() as usize]
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}

/// Runs `f(i)` for i in 0..n with `concurrency` tasks.
async fn par<F, Fut>(n: usize, concurrency: usize, f: F)
where
    F: Fn(usize) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let next = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let f = Arc::new(f);
    let mut tasks = Vec::new();
    for _ in 0..concurrency {
        let next = next.clone();
        let f = f.clone();
        tasks.push(tokio::spawn(async move {
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= n {
                    break;
                }
                f(i).await;
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
}

async fn create_world(client: &Client, prefix: &str, n: usize, concurrency: usize) {
    let client = client.clone();
    let prefix = prefix.to_owned();
    par(n, concurrency, move |g| {
        let client = client.clone();
        let ns = ns_of(&prefix, g);
        async move {
            apply(&client, &gw_ar(), Some(&ns), &gateway(&ns, g), "scale").await;
            for r in 0..ROUTES_PER_GATEWAY {
                apply(&client, &rt_ar(), Some(&ns), &route(&ns, g, r, 0), "scale").await;
            }
        }
    })
    .await;
}

/// What a child looks like to the ceiling: its identity and spec, with our labels,
/// owner references and server fields dropped, as text in which `gw0` is replaced.
fn child_template(v: &Value) -> String {
    let mut t = json!({
        "apiVersion": v["apiVersion"], "kind": v["kind"],
        "metadata": {"name": v["metadata"]["name"], "namespace": v["metadata"]["namespace"]},
        "spec": v["spec"],
    });
    if t["metadata"]["namespace"].is_null() {
        t["metadata"].as_object_mut().unwrap().remove("namespace");
    }
    serde_json::to_string(&t).unwrap()
}

/// Route weight changes, one after the other: change `i` patches the route `pick(i)`
/// names (namespace, route, `namespace/name` of its shadow route) to canary weight
/// 1..=50 and takes the time until `routes` (a watch) shows the shadow route carrying it.
async fn weight_latencies(
    client: &Client,
    routes: &View,
    changes: usize,
    pick: impl Fn(usize) -> (String, String, String),
) -> Vec<Duration> {
    let mut lat = Vec::new();
    for i in 0..changes {
        let (ns, name, shadow) = pick(i);
        let w = 1 + (i % 50) as i64;
        let t = Instant::now();
        api(client, &rt_ar(), Some(&ns))
            .patch(&name, &PatchParams::default(), &Patch::Merge(&json!({"spec": {"rules": [{"backendRefs": [{"name": "primary", "port": 80, "weight": 100 - w}, {"name": "canary", "port": 80, "weight": w}]}]}})))
            .await
            .unwrap();
        loop {
            if let Some((s, at)) = routes.get(&shadow)
                && s["spec"]["rules"][0]["backendRefs"][1]["weight"] == w
            {
                lat.push(at.saturating_duration_since(t));
                break;
            }
            assert!(
                t.elapsed() < Duration::from_secs(60),
                "shadow route {shadow} never carried weight {w}"
            );
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }
    lat
}

/// Waits (up to 60 s) until the shipped blueprint's status counts `n` Gateways, all of
/// them ready; says after how long, or that it did not.
async fn blueprint_settled(client: &Client, n: usize) -> String {
    let bp = ar(
        "gatewright.dev",
        "v1alpha1",
        "GatewayClassBlueprint",
        "gatewayclassblueprints",
    );
    let t = Instant::now();
    loop {
        let counted = api(client, &bp, None)
            .get(CLASS)
            .await
            .ok()
            .and_then(|o| serde_json::to_value(&o).ok())
            .and_then(|v| {
                v["status"]["revisions"].as_array().map(|rs| {
                    rs.iter().fold((0, 0), |(g, r), c| {
                        (
                            g + c["gateways"].as_u64().unwrap_or(0),
                            r + c["ready"].as_u64().unwrap_or(0),
                        )
                    })
                })
            });
        if counted == Some((n as u64, n as u64)) {
            return format!("after {:.1?}", t.elapsed());
        }
        if t.elapsed() > Duration::from_secs(60) {
            return format!("not in 60 s (gateways, ready = {counted:?})");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Installs a shipped class (`gatewayclasses/<class>`).
async fn install_class(client: &Client, class: &str) {
    let dir = format!("{}/gatewayclasses/{class}", env!("CARGO_MANIFEST_DIR"));
    let text = format!(
        "{}\n---\n{}",
        std::fs::read_to_string(format!("{dir}/gatewayclass.yaml")).unwrap(),
        std::fs::read_to_string(format!("{dir}/blueprint.yaml")).unwrap()
    );
    for doc in gatewright::render::output::parse_documents(&text).unwrap() {
        let (g, v) = doc["apiVersion"].as_str().unwrap().split_once('/').unwrap();
        let kind = doc["kind"].as_str().unwrap();
        let plural = if kind == "GatewayClass" {
            "gatewayclasses"
        } else {
            "gatewayclassblueprints"
        };
        apply(client, &ar(g, v, kind, plural), None, &doc, "scale").await;
    }
}

#[tokio::main]
async fn main() {
    if std::env::var_os("KUBECONFIG").is_none() {
        println!("scale: run through scripts/bench-scale.sh N (it starts a test cluster)");
        return;
    }
    let n = env_usize("SCALE_GATEWAYS", 100);
    let changes = env_usize("SCALE_CHANGES", 200);
    let restart_secs = env_usize("SCALE_RESTART_SECONDS", 120) as u64;
    let conc = env_usize("SCALE_CONCURRENCY", 8);
    let idle_objects = env_usize("SCALE_IDLE_OBJECTS", 0);
    let Ok(bin) = std::env::var("SCALE_CONTROLLER") else {
        println!("scale: set SCALE_CONTROLLER to the release gatewright binary");
        return;
    };
    let client = Client::try_default().await.unwrap();
    // Below Linux's ephemeral range (32768-60999): a client connection's local port is
    // never one of these (a collision left the controller unable to listen, the bench
    // waiting for it).
    let base_port = 12000 + (std::process::id() % 20000) as u16;

    // 1. Class, namespaces.
    let shape = std::env::var("SCALE_SHAPE").unwrap_or_default();
    if matches!(shape.as_str(), "attached" | "load" | "probe") {
        install_class(&client, attached::TRAEFIK).await;
        match shape.as_str() {
            "attached" => attached::run(&client, &bin, base_port).await,
            "load" => load::run(&client, &bin, base_port).await,
            _ => probe::run(&client, &bin, base_port).await,
        }
        return;
    }
    install_class(&client, CLASS).await;
    if std::env::var("SCALE_SHAPE").as_deref() == Ok("shared") {
        shared::run(&client, &bin, conc, changes, base_port).await;
        return;
    }
    if std::env::var("SCALE_SHAPE").as_deref() == Ok("rollout") {
        rollout::run(&client, &bin, n, conc, base_port).await;
        return;
    }
    let ns_ar = ar("", "v1", "Namespace", "namespaces");
    for prefix in ["scale-", "ceiling-"] {
        for i in 0..NAMESPACES {
            let ns = format!("{prefix}{i}");
            apply(
                &client,
                &ns_ar,
                None,
                &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}),
                "scale",
            )
            .await;
        }
    }
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!(
        "scale: N = {n} Gateways x {ROUTES_PER_GATEWAY} HTTPRoutes over {NAMESPACES} namespaces, class {CLASS}, client concurrency {conc}"
    );
    println!("  load average at start: {}", load.trim());

    let mut idle_rss = None;
    if idle_objects > 0 {
        let data = "x".repeat(100 * 1024);
        let encoded =
            base64::Engine::encode(&base64::engine::general_purpose::STANDARD, data.as_bytes());
        let secret_ar = ar("", "v1", "Secret", "secrets");
        let svc_ar = ar("", "v1", "Service", "services");
        let c = client.clone();
        par(idle_objects, conc, move |i| {
            let c = c.clone();
            let ns = format!("ceiling-{}", i % NAMESPACES);
            let encoded = encoded.clone();
            let secret_ar = secret_ar.clone();
            let svc_ar = svc_ar.clone();
            async move {
                apply(&c, &secret_ar, Some(&ns), &json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": format!("unrelated-{i}"), "namespace": ns}, "data": {"blob": encoded}}), "scale").await;
                apply(&c, &svc_ar, Some(&ns), &json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": format!("unrelated-{i}"), "namespace": ns}, "spec": {"clusterIP": "None", "ports": [{"port": 80}]}}), "scale").await;
            }
        })
        .await;
        let p = Proc::start(&bin, base_port + 9);
        let ready = p.wait_ready().await;
        tokio::time::sleep(Duration::from_secs(5)).await;
        let (rss, peak) = p.rss();
        println!(
            "  idle controller with {idle_objects} unrelated 100 KiB Secrets and {idle_objects} Services: RSS {rss:.1} MiB (peak {peak:.1} MiB), ready after {ready:.1?}"
        );
        idle_rss = Some(rss);
        p.stop();
    }

    // 2. Cold convergence.
    let gws = View::follow(&client, &gw_ar(), watcher::Config::default(), |_, _, _| {});
    let flips = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counting = Arc::new(AtomicBool::new(false));
    let routes = { View::follow(&client, &rt_ar(), watcher::Config::default(), |_, _, _| {}) };
    let gw_flips = {
        let flips = flips.clone();
        let counting = counting.clone();
        View::follow(
            &client,
            &gw_ar(),
            watcher::Config::default(),
            move |_, new, old| {
                if counting.load(Ordering::Relaxed)
                    && let Some(old) = old
                    && is_parent(new)
                    && programmed(old) != programmed(new)
                {
                    flips.fetch_add(1, Ordering::Relaxed);
                }
            },
        )
    };
    let paused = Arc::new(AtomicBool::new(false));
    simulator(&client, paused.clone());
    tokio::time::sleep(Duration::from_secs(1)).await;

    let p = Proc::start(&bin, base_port);
    let ready = p.wait_ready().await;
    let (idle, _) = p.rss();
    println!("  controller ready (caches listed) after {ready:.1?}; idle RSS {idle:.1} MiB");
    let before = apiserver_counts(&client).await;
    let cpu0 = p.cpu();
    let t = Instant::now();
    create_world(&client, "scale-", n, conc).await;
    let created = t.elapsed();
    let mut peak_rss = 0.0f64;
    let mut progress = (0usize, 0usize, Instant::now());
    let mut said = Instant::now();
    loop {
        let all = gws.values();
        let done = all
            .iter()
            .filter(|g| is_parent(g) && programmed(g) == Some("True"))
            .count();
        let rts = routes.values();
        let accepted = rts
            .iter()
            .filter(|r| {
                r["metadata"]["name"]
                    .as_str()
                    .is_some_and(|n| !n.ends_with("-istio"))
                    && route_accepted(r)
            })
            .count();
        peak_rss = peak_rss.max(p.rss().0);
        if done == n && accepted == n * ROUTES_PER_GATEWAY {
            break;
        }
        if (done, accepted) != (progress.0, progress.1) {
            progress = (done, accepted, Instant::now());
        }
        if said.elapsed() > Duration::from_secs(30) {
            said = Instant::now();
            println!(
                "  ... {:.0} s: {done}/{n} Gateways Programmed, {accepted}/{} routes Accepted",
                t.elapsed().as_secs_f64(),
                n * ROUTES_PER_GATEWAY
            );
        }
        if progress.2.elapsed() > STUCK {
            let stuck: Vec<String> = all
                .iter()
                .filter(|g| is_parent(g) && programmed(g) != Some("True"))
                .take(5)
                .map(|g| {
                    format!(
                        "{}/{}: {}",
                        g["metadata"]["namespace"].as_str().unwrap_or_default(),
                        g["metadata"]["name"].as_str().unwrap_or_default(),
                        cond(&g["status"]["conditions"], "Programmed")
                            .and_then(|c| c["message"].as_str())
                            .unwrap_or("no Programmed condition")
                    )
                })
                .collect();
            panic!(
                "no progress for {STUCK:?}: {done}/{n} Gateways Programmed, {accepted} routes Accepted; not Programmed: {stuck:#?}"
            );
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let converge = t.elapsed();
    let cpu_converge = p.cpu() - cpu0;
    let after = apiserver_counts(&client).await;
    println!("  workload created (by the client) in {created:.1?}");
    println!(
        "  COLD CONVERGENCE (all Gateways Programmed, every route Accepted): {:.2} s",
        converge.as_secs_f64()
    );
    println!("  controller CPU seconds to converge: {cpu_converge:.2}");
    let cold_writes = writes_between(&before, &after);
    print_writes(
        "cold phase (workload creates + simulator status writes + controller)",
        &cold_writes,
    );
    // Of the Gateway status writes, the simulator's (to the child Gateways, as Istio would)
    // and the controller's (to the Gateways of the workload).
    let gw_status = cold_writes
        .iter()
        .filter(|((_, r), _)| r == "gateways/status")
        .map(|(_, n)| *n)
        .sum::<u64>();
    let sim = SIM_GATEWAY_STATUS_WRITES.load(Ordering::Relaxed) as u64;
    println!(
        "  Gateway status writes in the cold phase: {gw_status} = simulator {sim} (child Gateways) + controller {} ({:.2} per Gateway)",
        gw_status.saturating_sub(sim),
        gw_status.saturating_sub(sim) as f64 / n as f64
    );
    print_reconciles(&p).await;
    let gets = gets_between(&before, &after);
    println!(
        "  cold phase: {} single-object reads (GET): {}",
        gets.values().sum::<u64>(),
        gets.iter()
            .map(|(r, n)| format!("{r} {n}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    tokio::time::sleep(Duration::from_secs(5)).await;
    let (steady, peak) = p.rss();
    println!(
        "  controller RSS: steady {steady:.1} MiB (5 s after convergence), peak {:.1} MiB",
        peak.max(peak_rss)
    );

    // 3a. Route weight change -> shadow route seen by a watch.
    paused.store(false, Ordering::Relaxed);
    let mut lat = weight_latencies(&client, &routes, changes, |i| {
        let g = (i * 7919) % n;
        let ns = ns_of("scale-", g);
        let shadow = format!("{ns}/gw{g}-r0-gw{g}-istio");
        (ns, format!("gw{g}-r0"), shadow)
    })
    .await;
    // Back to weight 0 everywhere we touched is not needed: the world stays converged.
    let weight_lat = format!("{}/{}", ms(pct(&mut lat, 0.5)), ms(pct(&mut lat, 0.99)));
    println!(
        "  route weight change -> shadow route seen by watch: p50/p99 {weight_lat} ({} changes)",
        lat.len()
    );

    // 3b. Child status -> Gateway status seen by a watch.
    paused.store(true, Ordering::Relaxed);
    let istio = gw_ar();
    let mut lat = Vec::new();
    for i in 0..changes {
        let g = (i / 2 * 7919) % n;
        let ns = ns_of("scale-", g);
        let key = format!("{ns}/gw{g}");
        let child = format!("gw{g}-istio");
        let want = if i % 2 == 0 { "False" } else { "True" };
        let obj = api(&client, &istio, Some(&ns)).get(&child).await.unwrap();
        let generation = obj.metadata.generation.unwrap_or(1);
        let t = Instant::now();
        api(&client, &istio, Some(&ns))
            .patch_status(&child, &PatchParams::default(), &Patch::Merge(&json!({"status": {"conditions": [
                { "type": "Accepted", "status": "True", "reason": "Accepted", "message": "simulated", "observedGeneration": generation, "lastTransitionTime": "2026-01-01T00:00:00Z" },
                { "type": "Programmed", "status": want, "reason": if want == "True" { "Programmed" } else { "Invalid" }, "message": "simulated", "observedGeneration": generation, "lastTransitionTime": "2026-01-01T00:00:00Z" }]}})))
            .await
            .unwrap();
        let sent = Instant::now();
        loop {
            if let Some((s, at)) = gws.get(&key)
                && programmed(&s) == Some(want)
            {
                lat.push(at.saturating_duration_since(t));
                break;
            }
            assert!(
                sent.elapsed() < Duration::from_secs(60),
                "Gateway {key} never became Programmed={want}"
            );
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }
    paused.store(false, Ordering::Relaxed);
    let child_lat = format!("{}/{}", ms(pct(&mut lat, 0.5)), ms(pct(&mut lat, 0.99)));
    println!(
        "  child status -> Gateway status seen by watch: p50/p99 {child_lat} ({} changes)",
        lat.len()
    );
    let cpu_total = p.cpu();

    // 4. Restart of the converged world. Converged includes the blueprint's status: its
    // per-revision counts follow the Gateways' Programmed flips of 3b at most every
    // PROGRESS_HOLD (or PROGRESS_HOLD_BUSY), and a count still held when the controller
    // stops is written by the next one, a write of the flips, not of the restart.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let settled = blueprint_settled(&client, n).await;
    println!("  blueprint status counting every Gateway ready: {settled}");
    paused.store(true, Ordering::Relaxed);
    p.stop();
    let before = apiserver_counts(&client).await;
    flips.store(0, Ordering::Relaxed);
    counting.store(true, Ordering::Relaxed);
    let p = Proc::start(&bin, base_port + 1);
    let ready = p.wait_ready().await;
    tokio::time::sleep(Duration::from_secs(restart_secs).saturating_sub(ready)).await;
    counting.store(false, Ordering::Relaxed);
    let after = apiserver_counts(&client).await;
    let restart = writes_between(&before, &after);
    let events: u64 = restart
        .iter()
        .filter(|((_, r), _)| r == "events")
        .map(|(_, n)| n)
        .sum();
    println!(
        "  restart of the converged world: ready after {ready:.1?}; {} Programmed flips on Gateways in {restart_secs} s",
        flips.load(Ordering::Relaxed)
    );
    print_writes(
        &format!(
            "writes in the first {restart_secs} s after the restart ({events} of them Events)"
        ),
        &restart,
    );
    let (rss_restart, _) = p.rss();
    println!("  RSS after the restart: {rss_restart:.1} MiB");
    p.stop();
    drop(gw_flips);

    // 5. The ceiling: the same writes from a plain client.
    let templates: Vec<(ApiResource, String)> = {
        let mut out = Vec::new();
        for ar in child_ars().into_iter().chain([rt_ar()]) {
            let list = api(&client, &ar, Some("scale-0"))
                .list(&ListParams::default().labels(MANAGED))
                .await
                .unwrap();
            for o in list {
                let mut v = serde_json::to_value(&o).unwrap();
                v["apiVersion"] = json!(ar.api_version);
                v["kind"] = json!(ar.kind);
                let name = o.metadata.name.clone().unwrap_or_default();
                if name.starts_with("gw0-") {
                    out.push((ar.clone(), child_template(&v)));
                }
            }
        }
        out
    };
    let gw0 = gws.get("scale-0/gw0").unwrap().0;
    let r0 = routes.get("scale-0/gw0-r0").unwrap().0;
    let gw_status = serde_json::to_string(&gw0["status"]).unwrap();
    let rt_status = serde_json::to_string(&r0["status"]).unwrap();
    let per_gateway = 1 + ROUTES_PER_GATEWAY + templates.len() + 3 + 1 + ROUTES_PER_GATEWAY;
    println!(
        "  ceiling: {per_gateway} writes per Gateway ({} children applied from the converged world's templates)",
        templates.len()
    );
    let before = apiserver_counts(&client).await;
    let t = Instant::now();
    {
        let client = client.clone();
        let templates = Arc::new(templates);
        par(n, conc, move |g| {
            let client = client.clone();
            let templates = templates.clone();
            let gw_status = gw_status.clone();
            let rt_status = rt_status.clone();
            async move {
                let ns = ns_of("ceiling-", g);
                let sub = |s: &str| {
                    s.replace("scale-0", &ns)
                        .replace("gw0", &format!("gw{g}"))
                        .replace(".g0.", &format!(".g{g}."))
                };
                apply(&client, &gw_ar(), Some(&ns), &gateway(&ns, g), "ceiling").await;
                for r in 0..ROUTES_PER_GATEWAY {
                    apply(
                        &client,
                        &rt_ar(),
                        Some(&ns),
                        &route(&ns, g, r, 0),
                        "ceiling",
                    )
                    .await;
                }
                for (ar, t) in templates.iter() {
                    let v: Value = serde_json::from_str(&sub(t)).unwrap();
                    let cns = v["metadata"]["namespace"].as_str().map(str::to_owned);
                    apply(&client, ar, cns.as_deref(), &v, "ceiling").await;
                    if let Some(status) = gatewright::simulate::ready_status(&v) {
                        let name = v["metadata"]["name"].as_str().unwrap().to_owned();
                        api(&client, ar, cns.as_deref())
                            .patch_status(
                                &name,
                                &PatchParams::default(),
                                &Patch::Merge(&json!({ "status": status })),
                            )
                            .await
                            .unwrap();
                    }
                }
                let status: Value = serde_json::from_str(&sub(&gw_status)).unwrap();
                api(&client, &gw_ar(), Some(&ns))
                    .patch_status(
                        &format!("gw{g}"),
                        &PatchParams::default(),
                        &Patch::Merge(&json!({ "status": status })),
                    )
                    .await
                    .unwrap();
                for r in 0..ROUTES_PER_GATEWAY {
                    let status: Value = serde_json::from_str(&sub(&rt_status)).unwrap();
                    api(&client, &rt_ar(), Some(&ns))
                        .patch_status(
                            &format!("gw{g}-r{r}"),
                            &PatchParams::default(),
                            &Patch::Merge(&json!({ "status": status })),
                        )
                        .await
                        .unwrap();
                }
            }
        })
        .await;
    }
    let ceiling = t.elapsed();
    let after = apiserver_counts(&client).await;
    println!(
        "  CEILING (same writes, plain client, concurrency {conc}, no planning): {:.2} s",
        ceiling.as_secs_f64()
    );
    print_writes("ceiling", &writes_between(&before, &after));
    println!();
    println!(
        "  SUMMARY N={n} ceiling={:.2}s converge={:.2}s ratio={:.2} cpu={cpu_converge:.2}s(total {cpu_total:.2}s) rss_steady={steady:.1}MiB rss_peak={:.1}MiB weight_p50_p99={weight_lat} child_p50_p99={child_lat} restart_writes={} restart_events={events} flips={}{}",
        ceiling.as_secs_f64(),
        converge.as_secs_f64(),
        converge.as_secs_f64() / ceiling.as_secs_f64(),
        peak.max(peak_rss),
        restart.values().sum::<u64>(),
        flips.load(Ordering::Relaxed),
        idle_rss
            .map(|r| format!(" idle_rss_with_objects={r:.1}MiB"))
            .unwrap_or_default(),
    );
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!("  load average at end: {}", load.trim());
}
