//! The route-propagation shape (`scripts/bench-scale.sh probe N`), gatewright's share of
//! the public Gateway API benchmark's probe scenario (gateway-api-bench, `tests/probe`):
//! N HTTPRoutes (default 3,000) applied one at a time to one Gateway of the shipped
//! Traefik class, each with its own hostname, a rule to its Service and `/` to a Service
//! that does not exist; for each, the time from the apply until a watch sees gatewright's
//! copy of it (what Traefik then serves). The dataplane's share (Traefik reading the copy
//! and answering 200) is not measured here. Figures only, never asserted.

use std::time::{Duration, Instant};

use kube::Client;
use serde_json::{Value, json};

use super::attached::{TRAEFIK, copies, namespace, service, start_with_gateway, svc_ar};
use super::counts::{apiserver_counts, apiserver_seconds, is_write};
use super::{apply, env_usize, ms, pct, rt_ar};

const NS: &str = "probe";
const GATEWAY: &str = "probe";

fn route(r: usize) -> Value {
    json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
        "metadata": {"name": format!("probe-{r}"), "namespace": NS},
        "spec": {"parentRefs": [{"name": GATEWAY}], "hostnames": [format!("probe-{r}.example.com")],
                 "rules": [
                    {"matches": [{"path": {"type": "PathPrefix", "value": "/ready"}}],
                     "backendRefs": [{"name": "backend", "port": 80}]},
                    {"matches": [{"path": {"type": "PathPrefix", "value": "/"}}],
                     "backendRefs": [{"name": "missing", "port": 80}]}]}})
}

pub(super) async fn run(client: &Client, bin: &str, port: u16) {
    let n = env_usize("SCALE_ROUTES", 3000);
    println!(
        "probe: one Gateway (one HTTP listener, class {TRAEFIK}), N = {n} HTTPRoutes applied one at a time, each with its own hostname; apply -> gatewright's copy seen by a watch"
    );
    namespace(client, NS).await;
    apply(
        client,
        &svc_ar(),
        Some(NS),
        &service(NS, "backend"),
        "scale",
    )
    .await;
    let copies = copies(client);
    let (p, paused) = start_with_gateway(client, bin, port, (NS, GATEWAY, "Same")).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let cpu0 = p.cpu();
    let (count0, secs0) = (
        apiserver_counts(client).await,
        apiserver_seconds(client).await,
    );
    let start = Instant::now();
    let mut lat = Vec::with_capacity(n);
    let mut by_thousand = Vec::new();
    for r in 0..n {
        let t = Instant::now();
        apply(client, &rt_ar(), Some(NS), &route(r), "scale").await;
        let copy = format!("{NS}/probe-{r}-{GATEWAY}-traefik");
        loop {
            if let Some((_, at)) = copies.get(&copy) {
                lat.push(at.saturating_duration_since(t));
                break;
            }
            assert!(
                t.elapsed() < Duration::from_secs(60),
                "route probe-{r}: no copy within 60 s"
            );
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        if (r + 1) % 1000 == 0 {
            let mut last: Vec<Duration> = lat[r + 1 - 1000..].to_vec();
            by_thousand.push(format!(
                "{}-{}: p50/p99 {}/{}",
                r + 1 - 1000,
                r + 1,
                ms(pct(&mut last, 0.5)),
                ms(pct(&mut last, 0.99))
            ));
        }
    }
    let cpu = p.cpu() - cpu0;
    let secs = start.elapsed().as_secs_f64();
    let (count1, secs1) = (
        apiserver_counts(client).await,
        apiserver_seconds(client).await,
    );
    let (rss, _) = p.rss();
    let all = format!("{}/{}", ms(pct(&mut lat, 0.5)), ms(pct(&mut lat, 0.99)));
    println!(
        "  apply -> copy, every route: p50/p99 {all}; max {}",
        ms(pct(&mut lat, 1.0))
    );
    println!("  by thousand: {}", by_thousand.join("; "));
    println!(
        "  {n} routes in {secs:.0} s; controller CPU {cpu:.2} s ({:.1} ms per route); RSS {rss:.1} MiB",
        cpu * 1000.0 / n.max(1) as f64
    );
    println!(
        "  best published (apply -> first 200 through the dataplane, both shares): agentgateway 10-30 ms, Istio 120-300 ms"
    );
    println!(
        "  the API server's own time for the writes of the phase (the bench's HTTPRoute applies included), per route and per request:"
    );
    let routes = lat.len().max(1) as f64;
    for (k, n) in &count1 {
        let n = n - count0.get(k).copied().unwrap_or(0.0);
        if !is_write(&k.0) || k.1.starts_with("leases") || n < 1.0 {
            continue;
        }
        let t = secs1.get(k).copied().unwrap_or(0.0) - secs0.get(k).copied().unwrap_or(0.0);
        println!(
            "    {} {}: {n:.0} requests, {:.1} ms per route, mean {:.1} ms",
            k.0,
            k.1,
            t * 1000.0 / routes,
            t * 1000.0 / n
        );
    }
    super::print_reconciles(&p).await;
    p.stop();
    paused.store(true, std::sync::atomic::Ordering::Relaxed);
    println!();
    println!(
        "  SUMMARY N={n} copy_p50_p99={all} cpu_per_route={:.1}ms rss={rss:.1}MiB",
        cpu * 1000.0 / n.max(1) as f64
    );
}
