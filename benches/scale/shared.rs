//! The shared-Gateway shape (`scripts/bench-scale.sh shared R`): one Gateway of the shipped
//! class, R HTTPRoutes created by `SCALE_CONCURRENCY` clients (default 4), readiness
//! simulated. Prints the time from the last create until `attachedRoutes` = R, until every
//! route is Accepted and until the Gateway is Programmed with every route's hostname in
//! the certificates its Istio child serves; the Gateway and route status writes and the
//! Certificates ordered in that phase; then a route weight change -> shadow route
//! (p50/p99 over `SCALE_CHANGES`), controller CPU and RSS; last the ceiling: the
//! controller's writes of the attach phase sent by a plain client, to show what the API
//! server allows. Figures only, never asserted.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kube::Client;
use kube::runtime::watcher;
use serde_json::{Value, json};

use super::{
    Proc, STUCK, View, apiserver_counts, apply, ar, cond, env_usize, gw_ar, ms, par, pct,
    print_reconciles, print_writes, programmed, route_accepted, rt_ar, simulator, writes_between,
};

const NS: &str = "shared";
const GATEWAY: &str = "shared";

fn gateway() -> Value {
    json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
        "metadata": {"name": GATEWAY, "namespace": NS},
        "spec": {"gatewayClassName": super::CLASS, "listeners": [
            {"name": "http", "port": 80, "protocol": "HTTP", "hostname": "*.shared.example.com",
             "allowedRoutes": {"namespaces": {"from": "All"}}},
            {"name": "https", "port": 443, "protocol": "HTTPS", "hostname": "*.shared.example.com",
             "allowedRoutes": {"namespaces": {"from": "All"}},
             "tls": {"mode": "Terminate", "options": {"gatewright.dev/certificate": "generated"}}}]}})
}

fn host(r: usize) -> String {
    format!("app{r}.shared.example.com")
}

fn route(r: usize, canary: i64) -> Value {
    json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
        "metadata": {"name": format!("r{r}"), "namespace": NS},
        "spec": {"parentRefs": [{"name": GATEWAY}], "hostnames": [host(r)],
                 "rules": [{"backendRefs": [{"name": "primary", "port": 80, "weight": 100 - canary}, {"name": "canary", "port": 80, "weight": canary}]}]}})
}

/// The smallest `attachedRoutes` over the Gateway's listeners.
fn attached(g: &Value) -> i64 {
    g["status"]["listeners"]
        .as_array()
        .filter(|ls| !ls.is_empty())
        .map_or(0, |ls| {
            ls.iter()
                .map(|l| l["attachedRoutes"].as_i64().unwrap_or(0))
                .min()
                .unwrap_or(0)
        })
}

/// Whether the parent is Programmed and the Secrets its Istio child serves come from
/// Certificates that name every one of `want`.
fn programmed_with_names(
    parent: &Value,
    child: Option<&Value>,
    certs: &View,
    want: &BTreeSet<String>,
) -> bool {
    if programmed(parent) != Some("True") {
        return false;
    }
    let Some(child) = child else { return false };
    let secrets: BTreeSet<&str> = child["spec"]["listeners"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|l| l["tls"]["certificateRefs"].as_array().into_iter().flatten())
        .filter_map(|c| c["name"].as_str())
        .collect();
    let mut names = BTreeSet::new();
    for c in certs.values() {
        if c["metadata"]["namespace"] == NS
            && c["spec"]["secretName"]
                .as_str()
                .is_some_and(|s| secrets.contains(s))
        {
            names.extend(
                c["spec"]["dnsNames"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|n| n.as_str().map(str::to_owned)),
            );
        }
    }
    want.is_subset(&names)
}

pub(super) async fn run(client: &Client, bin: &str, _conc: usize, changes: usize, port: u16) {
    let r_total = env_usize("SCALE_ROUTES", 1000);
    let conc = env_usize("SCALE_CONCURRENCY", 4);
    namespace(client, NS).await;
    println!(
        "shared: one Gateway (listeners http and https) x R = {r_total} HTTPRoutes, class {}, {conc} client threads",
        super::CLASS
    );
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!("  load average at start: {}", load.trim());

    let gws = View::follow(client, &gw_ar(), watcher::Config::default(), |_, _, _| {});
    let routes = View::follow(client, &rt_ar(), watcher::Config::default(), |_, _, _| {});
    // Certificates by name, and every name ever seen (the orders placed).
    let ordered: Arc<Mutex<BTreeSet<String>>> = Arc::default();
    let certs = {
        let ordered = ordered.clone();
        View::follow(
            client,
            &ar("cert-manager.io", "v1", "Certificate", "certificates"),
            watcher::Config::default(),
            move |key, _, old| {
                if old.is_none() {
                    ordered.lock().unwrap().insert(key.to_owned());
                }
            },
        )
    };
    // Every write of the parent Gateway seen by a watch (its status writes, once created).
    let parent_updates = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let _parent_watch = {
        let n = parent_updates.clone();
        View::follow(
            client,
            &gw_ar(),
            watcher::Config::default().fields(&format!("metadata.name={GATEWAY}")),
            move |_, new, old| {
                if let Some(old) = old
                    && old["metadata"]["resourceVersion"] != new["metadata"]["resourceVersion"]
                    && new["metadata"]["namespace"] == NS
                {
                    n.fetch_add(1, Ordering::Relaxed);
                }
            },
        )
    };
    let paused = Arc::new(AtomicBool::new(false));
    simulator(client, paused.clone());
    tokio::time::sleep(Duration::from_secs(1)).await;

    let p = Proc::start(bin, port);
    let ready = p.wait_ready().await;
    let (idle, _) = p.rss();
    println!("  controller ready (caches listed) after {ready:.1?}; idle RSS {idle:.1} MiB");
    apply(client, &gw_ar(), Some(NS), &gateway(), "scale").await;
    let key = format!("{NS}/{GATEWAY}");
    let t = Instant::now();
    while gws.get(&key).is_none_or(|(g, _)| {
        g["status"]["listeners"]
            .as_array()
            .is_none_or(Vec::is_empty)
    }) {
        assert!(t.elapsed() < STUCK, "the Gateway never got listener status");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    println!(
        "  Gateway created; its listener status written after {:.1?}",
        t.elapsed()
    );
    tokio::time::sleep(Duration::from_secs(3)).await;

    // The routes arrive.
    let before = apiserver_counts(client).await;
    let updates0 = parent_updates.load(Ordering::Relaxed);
    let sim0 = super::SIM_GATEWAY_STATUS_WRITES.load(Ordering::Relaxed);
    let ordered0 = ordered.lock().unwrap().clone();
    let cpu0 = p.cpu();
    let t = Instant::now();
    {
        let client = client.clone();
        par(r_total, conc, move |r| {
            let client = client.clone();
            async move { apply(&client, &rt_ar(), Some(NS), &route(r, 0), "scale").await }
        })
        .await;
    }
    let last = Instant::now();
    let created = t.elapsed();
    let want: BTreeSet<String> = (0..r_total).map(host).collect();
    let child_key = format!("{NS}/{GATEWAY}-istio");
    let (mut at_attached, mut at_accepted, mut at_certs) = (None, None, None);
    let mut peak_rss = 0.0f64;
    let mut said = Instant::now();
    loop {
        let parent = gws.get(&key).map(|(g, _)| g).unwrap_or_default();
        if at_attached.is_none() && attached(&parent) >= r_total as i64 {
            at_attached = Some(last.elapsed());
        }
        if at_accepted.is_none() {
            let accepted = routes
                .values()
                .iter()
                .filter(|r| r["metadata"]["namespace"] == NS && route_accepted(r))
                .count();
            if accepted >= r_total {
                at_accepted = Some(last.elapsed());
            }
        }
        if at_certs.is_none()
            && programmed_with_names(
                &parent,
                gws.get(&child_key).map(|(c, _)| c).as_ref(),
                &certs,
                &want,
            )
        {
            at_certs = Some(last.elapsed());
        }
        peak_rss = peak_rss.max(p.rss().0);
        if at_attached.is_some() && at_accepted.is_some() && at_certs.is_some() {
            break;
        }
        if said.elapsed() > Duration::from_secs(30) {
            said = Instant::now();
            println!(
                "  ... {:.0} s after the last create: attachedRoutes {}, Programmed {:?}: {}",
                last.elapsed().as_secs_f64(),
                attached(&parent),
                programmed(&parent),
                cond(&parent["status"]["conditions"], "Programmed")
                    .and_then(|c| c["message"].as_str())
                    .unwrap_or_default()
            );
        }
        assert!(
            last.elapsed() < STUCK,
            "not converged {STUCK:?} after the last create"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let cpu_phase = p.cpu() - cpu0;
    let after = apiserver_counts(client).await;
    let writes = writes_between(&before, &after);
    let sim_gateway = super::SIM_GATEWAY_STATUS_WRITES.load(Ordering::Relaxed) - sim0;
    let gateway_status_writes = super::attached::gateway_status_writes(&writes, sim_gateway);
    let route_status_writes: u64 = writes
        .iter()
        .filter(|((_, r), _)| r == "httproutes/status")
        .map(|(_, n)| *n)
        .sum();
    let certificates: Vec<String> = ordered
        .lock()
        .unwrap()
        .difference(&ordered0)
        .cloned()
        .collect();
    let orders = certificates.len();
    let secs = |d: Option<Duration>| d.map_or(f64::NAN, |d| d.as_secs_f64());
    println!("  {r_total} routes created (by the client) in {created:.1?}");
    println!(
        "  after the last create: attachedRoutes = {r_total} in {:.2} s; every route Accepted in {:.2} s; Programmed with every hostname in its certificates in {:.2} s",
        secs(at_attached),
        secs(at_accepted),
        secs(at_certs)
    );
    println!(
        "  in that phase: {gateway_status_writes} Gateway status writes by the controller ({} writes of the Gateway seen), {route_status_writes} route status writes, {orders} Certificates ordered",
        parent_updates.load(Ordering::Relaxed) - updates0
    );
    println!("      Certificates: {}", certificates.join(", "));
    print_writes("phase (creates + simulator + controller)", &writes);
    print_reconciles(&p).await;
    println!("  controller CPU seconds in that phase: {cpu_phase:.2}");
    tokio::time::sleep(Duration::from_secs(5)).await;
    let (steady, peak) = p.rss();
    println!(
        "  controller RSS: steady {steady:.1} MiB, peak {:.1} MiB",
        peak.max(peak_rss)
    );

    // Weight change -> shadow route, at R routes.
    let cpu1 = p.cpu();
    let mut lat = super::weight_latencies(client, &routes, changes, |i| {
        let r = (i * 7919) % r_total;
        (
            NS.to_owned(),
            format!("r{r}"),
            format!("{NS}/r{r}-{GATEWAY}-istio"),
        )
    })
    .await;
    let cpu_changes = p.cpu() - cpu1;
    let weight = format!("{}/{}", ms(pct(&mut lat, 0.5)), ms(pct(&mut lat, 0.99)));
    println!(
        "  route weight change -> shadow route seen by watch at R = {r_total}: p50/p99 {weight} ({} changes, controller CPU {cpu_changes:.2} s, {:.1} ms per change)",
        lat.len(),
        cpu_changes * 1000.0 / lat.len().max(1) as f64
    );
    print_reconciles(&p).await;
    let (rss, peak) = p.rss();
    p.stop();
    paused.store(true, Ordering::Relaxed);
    let ceiling = ceiling(client, &routes, r_total).await;
    println!(
        "  CEILING (the controller's writes of that phase, {r_total} shadow-route applies and {r_total} route status writes, from a plain client {IN_FLIGHT} at a time, no planning): {:.2} s; the controller's from the first create to every route Accepted: {:.2} s",
        ceiling.as_secs_f64(),
        (created + at_accepted.unwrap_or_default()).as_secs_f64()
    );
    println!();
    println!(
        "  SUMMARY R={r_total} attached={:.2}s accepted={:.2}s programmed_with_names={:.2}s ceiling={:.2}s gateway_status_writes={gateway_status_writes} route_status_writes={route_status_writes} certificates_ordered={orders} weight_p50_p99={weight} cpu_phase={cpu_phase:.2}s cpu_per_change={:.1}ms rss={rss:.1}MiB rss_peak={:.1}MiB",
        secs(at_attached),
        secs(at_accepted),
        secs(at_certs),
        ceiling.as_secs_f64(),
        cpu_changes * 1000.0 / lat.len().max(1) as f64,
        peak.max(peak_rss)
    );
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!("  load average at end: {}", load.trim());
}

/// Requests the controller sends at once within a reconcile (`REQUESTS_IN_FLIGHT` in
/// `src/controller/reconcile.rs`).
const IN_FLIGHT: usize = 8;

/// What the API server allows here for the controller's part of the attach phase: per
/// route, its shadow route applied (the converged one's copy, renamed) and its status
/// written (route r0's), from a plain client `IN_FLIGHT` at a time, into a namespace of its
/// own whose routes are created first, untimed. The controller is stopped and the
/// simulator paused.
async fn ceiling(client: &Client, routes: &View, r_total: usize) -> Duration {
    const CEILING_NS: &str = "shared-ceiling";
    namespace(client, CEILING_NS).await;
    let shadow = routes
        .get(&format!("{NS}/r0-{GATEWAY}-istio"))
        .expect("route r0's shadow route")
        .0;
    let shadow: Value = serde_json::from_str(&super::child_template(&shadow)).unwrap();
    let status = routes.get(&format!("{NS}/r0")).expect("route r0").0["status"].clone();
    {
        let client = client.clone();
        par(r_total, IN_FLIGHT, move |r| {
            let client = client.clone();
            let mut v = route(r, 0);
            v["metadata"]["namespace"] = json!(CEILING_NS);
            async move { apply(&client, &rt_ar(), Some(CEILING_NS), &v, "scale").await }
        })
        .await;
    }
    let t = Instant::now();
    {
        let client = client.clone();
        let (shadow, status) = (Arc::new(shadow), Arc::new(status));
        par(r_total, IN_FLIGHT, move |r| {
            let client = client.clone();
            let mut v = (*shadow).clone();
            v["metadata"]["name"] = json!(format!("r{r}-{GATEWAY}-istio"));
            v["metadata"]["namespace"] = json!(CEILING_NS);
            v["spec"]["hostnames"] = json!([host(r)]);
            let status = status.clone();
            async move {
                apply(&client, &rt_ar(), Some(CEILING_NS), &v, "ceiling").await;
                kube::Api::<kube::api::DynamicObject>::namespaced_with(
                    client,
                    CEILING_NS,
                    &rt_ar(),
                )
                .patch_status(
                    &format!("r{r}"),
                    &kube::api::PatchParams::default(),
                    &kube::api::Patch::Merge(&json!({ "status": *status })),
                )
                .await
                .unwrap();
            }
        })
        .await;
    }
    t.elapsed()
}

/// Creates namespace `name` (a no-op when it exists).
async fn namespace(client: &Client, name: &str) {
    apply(
        client,
        &ar("", "v1", "Namespace", "namespaces"),
        None,
        &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}),
        "scale",
    )
    .await;
}
