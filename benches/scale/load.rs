//! The route-load shape (`scripts/bench-scale.sh load N`), the public Gateway API
//! benchmark's route scale scenario (gateway-api-bench, `tests/route-load.sh`): N
//! HTTPRoutes (default 5,000) over `SCALE_LOAD_NAMESPACES` namespaces (default 50), each
//! with its Service (no Pods), attached to one Gateway of the shipped Traefik class; once
//! every route is attached and the controller is quiet, a churn like the benchmark's for
//! `SCALE_LOAD_SECONDS` (default 120): a route changed about every second (its path match
//! alternates) and a backend about every 2 s (here a Service's annotation: there are no
//! Pods whose endpoints could move). Prints the controller's CPU over the churn (% of one
//! core) and its resident memory (mean and largest of samples each second), and how long
//! a churned route took to reach its copy. Figures only, never asserted.

use std::time::{Duration, Instant};

use kube::Client;
use kube::api::{Patch, PatchParams};
use kube::runtime::watcher;
use serde_json::json;

use super::attached::{TRAEFIK, copies, namespace, route, service, start_with_gateway, svc_ar};
use super::{STUCK, View, api, apply, env_usize, gw_ar, ms, par, pct, rt_ar};

const GATEWAY_NS: &str = "load-gateway";
const GATEWAY: &str = "load";

pub(super) async fn run(client: &Client, bin: &str, port: u16) {
    let n = env_usize("SCALE_ROUTES", 5000);
    let namespaces = env_usize("SCALE_LOAD_NAMESPACES", 50).max(1);
    let seconds = env_usize("SCALE_LOAD_SECONDS", 120) as u64;
    let conc = env_usize("SCALE_CONCURRENCY", 8);
    let per = n.div_ceil(namespaces);
    println!(
        "load: one Gateway (one HTTP listener, class {TRAEFIK}) x N = {n} HTTPRoutes over {namespaces} namespaces ({per} each), each with its Service; churn for {seconds} s: a route a second, a backend every 2 s"
    );
    namespace(client, GATEWAY_NS).await;
    for i in 0..namespaces {
        namespace(client, &format!("load-{i}")).await;
    }
    let gws = View::follow(client, &gw_ar(), watcher::Config::default(), |_, _, _| {});
    let routes = copies(client);
    let (p, paused) = start_with_gateway(client, bin, port, (GATEWAY_NS, GATEWAY, "All")).await;
    let name_of = move |r: usize| (format!("load-{}", r / per), format!("app-{r}"));
    let t = Instant::now();
    {
        let client = client.clone();
        par(n, conc, move |r| {
            let client = client.clone();
            let (ns, name) = name_of(r);
            async move {
                apply(&client, &svc_ar(), Some(&ns), &service(&ns, &name), "scale").await;
                let host = format!("{name}.{ns}.example.com");
                apply(
                    &client,
                    &rt_ar(),
                    Some(&ns),
                    &route(&ns, &name, &host, GATEWAY_NS, GATEWAY),
                    "scale",
                )
                .await;
            }
        })
        .await;
    }
    println!("  {n} routes and Services created in {:.1?}", t.elapsed());
    let key = format!("{GATEWAY_NS}/{GATEWAY}");
    let want = i64::try_from(n).unwrap_or(i64::MAX);
    while gws
        .get(&key)
        .is_none_or(|(g, _)| g["status"]["listeners"][0]["attachedRoutes"].as_i64() != Some(want))
    {
        assert!(t.elapsed() < STUCK, "attachedRoutes never reached {n}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    println!(
        "  attachedRoutes = {n} after {:.1?} from the first create",
        t.elapsed()
    );
    // Quiet: the controller's CPU still for 5 s (its route statuses and copies written).
    let quiet = Instant::now();
    loop {
        let c = p.cpu();
        tokio::time::sleep(Duration::from_secs(5)).await;
        if p.cpu() - c < 0.25 || quiet.elapsed() > STUCK {
            break;
        }
    }
    println!(
        "  controller quiet {:.1?} later; RSS {:.1} MiB",
        quiet.elapsed(),
        p.rss().0
    );

    // The churn.
    let cpu0 = p.cpu();
    let start = Instant::now();
    let mut rss = Vec::new();
    let mut lat = Vec::new();
    let mut tick = 0u64;
    while start.elapsed() < Duration::from_secs(seconds) {
        tick += 1;
        let next = start + Duration::from_secs(tick);
        // A route a second: its path match alternates; time until its copy carries it.
        let r = ((tick as usize) * 7919) % n;
        let (ns, name) = name_of(r);
        let path = format!("/v{tick}");
        let changed = Instant::now();
        api(client, &rt_ar(), Some(&ns))
            .patch(
                &name,
                &PatchParams::default(),
                &Patch::Merge(&json!({"spec": {"rules": [{"matches": [{"path": {"type": "PathPrefix", "value": path}}], "backendRefs": [{"name": name, "port": 80}]}]}})),
            )
            .await
            .unwrap();
        // A backend every 2 s.
        if tick.is_multiple_of(2) {
            let (sns, sname) = name_of((r + n / 2) % n);
            api(client, &svc_ar(), Some(&sns))
                .patch(
                    &sname,
                    &PatchParams::default(),
                    &Patch::Merge(
                        &json!({"metadata": {"annotations": {"bench/churn": tick.to_string()}}}),
                    ),
                )
                .await
                .unwrap();
        }
        let copy = format!("{ns}/{name}-{GATEWAY_NS}-{GATEWAY}-traefik");
        while Instant::now() < next {
            if let Some((c, at)) = routes.get(&copy)
                && c["spec"]["rules"][0]["matches"][0]["path"]["value"] == path.as_str()
            {
                lat.push(at.saturating_duration_since(changed));
                break;
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        rss.push(p.rss().0);
        tokio::time::sleep(next.saturating_duration_since(Instant::now())).await;
    }
    let cpu = p.cpu() - cpu0;
    let secs = start.elapsed().as_secs_f64();
    let mean = rss.iter().sum::<f64>() / rss.len().max(1) as f64;
    let max = rss.iter().copied().fold(0.0f64, f64::max);
    let missed = tick as usize - lat.len();
    let copy_lat = format!("{}/{}", ms(pct(&mut lat, 0.5)), ms(pct(&mut lat, 0.99)));
    println!(
        "  churn: controller CPU {:.2} % of a core over {secs:.0} s ({cpu:.2} s; goal 2 %); RSS mean {mean:.1} MiB, largest {max:.1} MiB (goal 150 MB)",
        cpu * 100.0 / secs
    );
    println!(
        "  a churned route reached its copy in p50/p99 {copy_lat} ({} changes, {missed} not within the second)",
        tick
    );
    super::print_reconciles(&p).await;
    p.stop();
    paused.store(true, std::sync::atomic::Ordering::Relaxed);
    println!();
    println!(
        "  SUMMARY N={n} namespaces={namespaces} cpu_pct={:.2} rss_mean={mean:.1}MiB rss_max={max:.1}MiB copy_p50_p99={copy_lat} missed={missed}",
        cpu * 100.0 / secs
    );
}
