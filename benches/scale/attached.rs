//! The attached-routes shape (`scripts/bench-scale.sh attached N`), the public Gateway API
//! benchmark's first scenario (gateway-api-bench, `tests/attachedroutes`): one Gateway of
//! the shipped Traefik class with one HTTP listener, N HTTPRoutes in another namespace, each
//! with its Service (no Pods), created by `SCALE_CONCURRENCY` clients (default 4) as fast as
//! they can; readiness simulated. Prints the time from the last create until
//! `status.listeners[0].attachedRoutes` = N (add-all), from the last delete until it is 0
//! (remove-all), the Gateway status writes of each phase, and, for reference, the time
//! until every route is Accepted; beside them the best figures the public benchmark
//! published. Figures only, never asserted.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use kube::Client;
use kube::api::DeleteParams;
use kube::runtime::watcher;
use serde_json::{Value, json};

use super::{
    Proc, STUCK, View, api, apiserver_counts, apply, ar, env_usize, gw_ar, par, print_reconciles,
    route_accepted, rt_ar, simulator, writes_between,
};

/// The Traefik class's name (`gatewayclasses/`).
pub(super) const TRAEFIK: &str = "traefik-certmanager-externaldns";
const GATEWAY_NS: &str = "bench-gateway";
const GATEWAY: &str = "bench";
const ROUTES_NS: &str = "mesh";

/// A Gateway `ns/name` of the Traefik class with one HTTP listener admitting routes
/// `from` (`All`, `Same`).
pub(super) fn traefik_gateway(ns: &str, name: &str, from: &str) -> Value {
    json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"gatewayClassName": TRAEFIK, "listeners": [
            {"name": "http", "port": 80, "protocol": "HTTP",
             "allowedRoutes": {"namespaces": {"from": from}}}]}})
}

/// Starts the readiness simulator and the controller, and once it is ready creates the
/// Traefik Gateway `ns/name` admitting routes `from`; the controller and the simulator's
/// pause switch.
pub(super) async fn start_with_gateway(
    client: &Client,
    bin: &str,
    port: u16,
    (ns, name, from): (&str, &str, &str),
) -> (Proc, Arc<AtomicBool>) {
    let paused = Arc::new(AtomicBool::new(false));
    simulator(client, paused.clone());
    let p = Proc::start(bin, port);
    p.wait_ready().await;
    apply(
        client,
        &gw_ar(),
        Some(ns),
        &traefik_gateway(ns, name, from),
        "scale",
    )
    .await;
    (p, paused)
}

/// A view of the objects gatewright made (its route copies, for the routes' resource).
pub(super) fn copies(client: &Client) -> View {
    View::follow(
        client,
        &rt_ar(),
        watcher::Config::default().labels(super::MANAGED),
        |_, _, _| {},
    )
}

pub(super) fn service(ns: &str, name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Service",
        "metadata": {"name": name, "namespace": ns, "labels": {"app": name}},
        "spec": {"clusterIP": "None", "selector": {"app": name}, "ports": [{"name": "http", "port": 80, "targetPort": 8080}]}})
}

pub(super) fn route(ns: &str, name: &str, host: &str, gw_ns: &str, gw: &str) -> Value {
    json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"parentRefs": [{"name": gw, "namespace": gw_ns}], "hostnames": [host],
                 "rules": [{"backendRefs": [{"name": name, "port": 80}]}]}})
}

pub(super) fn svc_ar() -> kube::api::ApiResource {
    ar("", "v1", "Service", "services")
}

/// `attachedRoutes` of the Gateway's first listener (`None`: no listener status yet).
fn attached(g: &Value) -> Option<i64> {
    g["status"]["listeners"][0]["attachedRoutes"].as_i64()
}

/// Waits until `done` holds of the watched Gateway; the time since `from`.
async fn until(
    gws: &View,
    key: &str,
    from: Instant,
    what: &str,
    done: impl Fn(&Value) -> bool,
) -> Duration {
    loop {
        if let Some((g, at)) = gws.get(key)
            && done(&g)
        {
            return at.saturating_duration_since(from);
        }
        assert!(from.elapsed() < STUCK, "{what}: not within {STUCK:?}");
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

pub(super) async fn namespace(client: &Client, name: &str) {
    apply(
        client,
        &ar("", "v1", "Namespace", "namespaces"),
        None,
        &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}),
        "scale",
    )
    .await;
}

/// Counts the writes of one object a watch sees (a new resourceVersion of an object it
/// had seen).
fn count_updates(client: &Client, ns: &str, name: &str) -> Arc<AtomicUsize> {
    let n = Arc::new(AtomicUsize::new(0));
    let seen = n.clone();
    let ns = ns.to_owned();
    // The watch runs for the whole benchmark (the process ends with it).
    let _ = View::follow(
        client,
        &gw_ar(),
        watcher::Config::default().fields(&format!("metadata.name={name}")),
        move |_, new, old| {
            if let Some(old) = old
                && old["metadata"]["resourceVersion"] != new["metadata"]["resourceVersion"]
                && new["metadata"]["namespace"] == ns.as_str()
            {
                seen.fetch_add(1, Ordering::Relaxed);
            }
        },
    );
    n
}

/// The Gateway status writes of a phase: the API server's count of `gateways/status`
/// writes less the simulator's (the child Gateway's downstream status).
pub(super) fn gateway_status_writes(
    w: &std::collections::BTreeMap<(String, String), u64>,
    sim: usize,
) -> u64 {
    w.iter()
        .filter(|((_, r), _)| r == "gateways/status")
        .map(|(_, n)| *n)
        .sum::<u64>()
        .saturating_sub(sim as u64)
}

pub(super) async fn run(client: &Client, bin: &str, port: u16) {
    let n = env_usize("SCALE_ROUTES", 1000);
    let conc = env_usize("SCALE_CONCURRENCY", 4);
    namespace(client, GATEWAY_NS).await;
    namespace(client, ROUTES_NS).await;
    println!(
        "attached: one Gateway (one HTTP listener, class {TRAEFIK}) x N = {n} HTTPRoutes in another namespace, each with its Service (no Pods), {conc} client threads"
    );
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!("  load average at start: {}", load.trim());
    let gws = View::follow(client, &gw_ar(), watcher::Config::default(), |_, _, _| {});
    let routes = View::follow(client, &rt_ar(), watcher::Config::default(), |_, _, _| {});
    let updates = count_updates(client, GATEWAY_NS, GATEWAY);
    let paused = Arc::new(AtomicBool::new(false));
    simulator(client, paused.clone());
    tokio::time::sleep(Duration::from_secs(1)).await;

    let p = Proc::start(bin, port);
    let ready = p.wait_ready().await;
    println!("  controller ready (caches listed) after {ready:.1?}");
    apply(
        client,
        &gw_ar(),
        Some(GATEWAY_NS),
        &traefik_gateway(GATEWAY_NS, GATEWAY, "All"),
        "scale",
    )
    .await;
    let key = format!("{GATEWAY_NS}/{GATEWAY}");
    let t = Instant::now();
    let d = until(&gws, &key, t, "the Gateway's listener status", |g| {
        attached(g) == Some(0)
    })
    .await;
    println!("  Gateway created; attachedRoutes = 0 written after {d:.1?}");
    tokio::time::sleep(Duration::from_secs(3)).await;

    // Add all.
    let before = apiserver_counts(client).await;
    let (updates0, sim0, cpu0) = (
        updates.load(Ordering::Relaxed),
        super::SIM_GATEWAY_STATUS_WRITES.load(Ordering::Relaxed),
        p.cpu(),
    );
    let t = Instant::now();
    {
        let client = client.clone();
        par(n, conc, move |r| {
            let client = client.clone();
            async move {
                let name = format!("app-{r}");
                apply(
                    &client,
                    &svc_ar(),
                    Some(ROUTES_NS),
                    &service(ROUTES_NS, &name),
                    "scale",
                )
                .await;
                let host = format!("app-{r}.example.com");
                apply(
                    &client,
                    &rt_ar(),
                    Some(ROUTES_NS),
                    &route(ROUTES_NS, &name, &host, GATEWAY_NS, GATEWAY),
                    "scale",
                )
                .await;
            }
        })
        .await;
    }
    let last = Instant::now();
    let created = t.elapsed();
    let want = i64::try_from(n).unwrap_or(i64::MAX);
    let add_all = until(&gws, &key, last, "attachedRoutes = N", |g| {
        attached(g) == Some(want)
    })
    .await;
    let updates_add = updates.load(Ordering::Relaxed) - updates0;
    let accepted = loop {
        let count = routes
            .values()
            .iter()
            .filter(|r| r["metadata"]["namespace"] == ROUTES_NS && route_accepted(r))
            .count();
        if count >= n {
            break last.elapsed();
        }
        assert!(
            last.elapsed() < STUCK,
            "not every route Accepted within {STUCK:?}"
        );
        // (Copying the routes out of the view costs: not too often, on 2 cores.)
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let cpu_add = p.cpu() - cpu0;
    let after = apiserver_counts(client).await;
    let sim_add = super::SIM_GATEWAY_STATUS_WRITES.load(Ordering::Relaxed) - sim0;
    let writes_add = gateway_status_writes(&writes_between(&before, &after), sim_add);
    let (rss, peak) = p.rss();
    println!("  {n} routes and Services created (by the client) in {created:.1?}");
    println!(
        "  add-all: attachedRoutes = {n} {:.2} s after the last create (best published: 1 s, Cilium and Kong); every route Accepted after {:.2} s",
        add_all.as_secs_f64(),
        accepted.as_secs_f64()
    );
    println!(
        "  Gateway status writes while the routes arrived: {writes_add} by the controller ({updates_add} writes of the Gateway seen by a watch until the count was reached); best published: 73 (Traefik, whose counts were wrong)"
    );
    println!("  controller CPU in that phase {cpu_add:.2} s; RSS {rss:.1} MiB (peak {peak:.1})");
    tokio::time::sleep(Duration::from_secs(5)).await;

    // Remove all.
    let before = apiserver_counts(client).await;
    let (updates0, sim0) = (
        updates.load(Ordering::Relaxed),
        super::SIM_GATEWAY_STATUS_WRITES.load(Ordering::Relaxed),
    );
    let t = Instant::now();
    {
        let client = client.clone();
        par(n, conc, move |r| {
            let client = client.clone();
            async move {
                let name = format!("app-{r}");
                let _ = api(&client, &rt_ar(), Some(ROUTES_NS))
                    .delete(&name, &DeleteParams::default())
                    .await;
            }
        })
        .await;
    }
    let last = Instant::now();
    let deleted = t.elapsed();
    let remove_all = until(&gws, &key, last, "attachedRoutes = 0", |g| {
        attached(g) == Some(0)
    })
    .await;
    let updates_remove = updates.load(Ordering::Relaxed) - updates0;
    let after = apiserver_counts(client).await;
    let sim_remove = super::SIM_GATEWAY_STATUS_WRITES.load(Ordering::Relaxed) - sim0;
    let writes_remove = gateway_status_writes(&writes_between(&before, &after), sim_remove);
    println!("  {n} routes deleted (by the client) in {deleted:.1?}");
    println!(
        "  remove-all: attachedRoutes = 0 {:.2} s after the last delete (best published: 15 s, NGINX); Gateway status writes: {writes_remove} ({updates_remove} seen)",
        remove_all.as_secs_f64()
    );
    print_reconciles(&p).await;
    p.stop();
    paused.store(true, Ordering::Relaxed);
    println!();
    println!(
        "  SUMMARY N={n} add_all={:.2}s remove_all={:.2}s accepted={:.2}s gateway_status_writes_add={writes_add} gateway_status_writes_remove={writes_remove} cpu_add={cpu_add:.2}s rss={rss:.1}MiB",
        add_all.as_secs_f64(),
        remove_all.as_secs_f64(),
        accepted.as_secs_f64()
    );
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!("  load average at end: {}", load.trim());
}
