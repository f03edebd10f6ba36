//! Figures, not thresholds: `cargo bench` prints how fast the planner and `render` are.
//! Planner figures are CPU time of the benchmark thread per call (plans per second on
//! one core), so they hold while other work shares the machine.
//!
//! - `plan_gateway` of the istio-certmanager-externaldns class for a Gateway with 10
//!   HTTPS listeners (generated certificate, so the class renders its Certificate) and 50
//!   attached routes (`PLAN_BENCH_ROUTES` sets another number, for a shared Gateway) (plans per second on one core), before any child
//!   exists and once all are ready; `plan_route` per route; `plan` (the Gateway, its 50
//!   routes and every status); `plan_with` a memo of the route plans (see
//!   `gatewright::plan::memo`), converged, unchanged and after one route's weights changed;
//! - `gatewright render` of a folder with 1,000 Gateways.
//!
//! `cargo bench --bench plan -- FILTER` prints only the figures whose name (`plan_gateway_new`,
//! `plan_route`, `plan_gateway_converged`, `plan_memo_unchanged`, `plan_memo_changed`,
//! `plan_converged`, `render`) contains FILTER.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::cast_precision_loss,
    reason = "benchmark"
)]

use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use gatewright::snapshot::files;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

fn class_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("gatewayclasses/istio-certmanager-externaldns")
}

fn gateway(ns: &str, name: &str, listeners: usize) -> String {
    let mut s = format!(
        "---\napiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {{name: {name}, namespace: {ns}, uid: uid-{ns}-{name}, generation: 1}}\nspec:\n  gatewayClassName: istio-certmanager-externaldns\n  listeners:\n"
    );
    for i in 0..listeners {
        let _ = writeln!(
            s,
            "  - {{name: l{i}, port: {}, protocol: HTTPS, hostname: \"*.d{i}.example.com\", allowedRoutes: {{namespaces: {{from: All}}}}, tls: {{mode: Terminate, options: {{gatewright.dev/certificate: generated}}}}}}",
            8000 + i
        );
    }
    s
}

fn route(ns: &str, name: &str, gw_ns: &str, gw: &str, host: &str) -> String {
    format!(
        "---\napiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {{name: {name}, namespace: {ns}, uid: uid-r-{ns}-{name}, generation: 1}}\nspec:\n  parentRefs: [{{name: {gw}, namespace: {gw_ns}}}]\n  hostnames: [{host}]\n  rules:\n  - backendRefs: [{{name: {name}, port: 80, weight: 90}}, {{name: {name}-canary, port: 80, weight: 10}}]\n"
    )
}

/// CPU time of this thread (Linux: the first field of `/proc/thread-self/schedstat`, in
/// nanoseconds), so the figures hold on a busy machine; `None` elsewhere.
fn thread_cpu() -> Option<Duration> {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    Some(Duration::from_nanos(
        s.split_whitespace().next()?.parse().ok()?,
    ))
}

/// Runs `f` for about `secs` seconds after a warm-up; the CPU time per call (the wall
/// time where CPU time cannot be read).
fn per_call(secs: u64, mut f: impl FnMut()) -> Duration {
    for _ in 0..200 {
        f();
    }
    let start = Instant::now();
    let cpu = thread_cpu();
    let mut n = 0u32;
    while start.elapsed() < Duration::from_secs(secs) {
        f();
        n += 1;
    }
    match (cpu, thread_cpu()) {
        (Some(a), Some(b)) => (b - a) / n,
        _ => start.elapsed() / n,
    }
}

/// Whether the figure `name` was asked for: `cargo bench --bench plan -- <filter>` runs
/// the figures whose name contains the filter (all without one).
fn wanted(name: &str) -> bool {
    std::env::args()
        .skip(1)
        .find(|a| !a.starts_with("--"))
        .is_none_or(|f| name.contains(f.as_str()))
}

fn bench_plan() {
    let dir = tempfile::tempdir().unwrap();
    let n_routes: usize = std::env::var("PLAN_BENCH_ROUTES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(50);
    let mut input = gateway("infra", "big", 10);
    for r in 0..n_routes {
        input.push_str(&route(
            &format!("team{}", r % 5),
            &format!("r{r}"),
            "infra",
            "big",
            &format!("app{r}.d{}.example.com", r % 10),
        ));
    }
    std::fs::write(dir.path().join("in.yaml"), input).unwrap();
    let mut loaded =
        files::load(&[class_dir(), dir.path().to_owned()], "gatewright-system").unwrap();
    let key = gatewright::snapshot::Key::new("infra", "big");
    let plan = gatewright::plan::plan_gateway(&loaded.snapshot, &key).unwrap();
    assert_eq!(plan.context.routes.len(), n_routes);

    // A Gateway seen for the first time: no child exists yet.
    let snap = &loaded.snapshot;
    if wanted("plan_gateway_new") {
        let per = per_call(5, || {
            std::hint::black_box(gatewright::plan::plan_gateway(snap, &key).unwrap());
        });
        println!(
            "plan_gateway (istio-certmanager-externaldns, 10 listeners, {n_routes} routes, no child yet): {per:?} per plan, {:.0} plans/s on one core",
            1.0 / per.as_secs_f64()
        );
    }
    if wanted("plan_route") {
        let per_route = per_call(3, || {
            for rkey in &plan.context.routes {
                std::hint::black_box(gatewright::plan::plan_route(snap, &plan, rkey));
            }
        }) / u32::try_from(n_routes).unwrap();
        println!("plan_route (same Gateway, per route): {per_route:?}");
    }

    // Converged: every child exists and is ready, so every template renders and the
    // status template gives the address.
    for _ in 0..4 {
        let p = gatewright::plan::plan(&loaded.snapshot, &key).unwrap();
        for c in p.children() {
            let mut obj = serde_json::Value::clone(&c.object);
            // As the API server stores it.
            obj["metadata"]["generation"] = 1.into();
            if let Some(status) = gatewright::simulate::ready_status(&obj) {
                obj["status"] = status;
            }
            loaded.snapshot.put_child(obj);
        }
    }
    let full = gatewright::plan::plan(&loaded.snapshot, &key).unwrap();
    assert!(
        full.gateway.converged() && full.status.gateway.addresses.len() == 1,
        "the bench world converges: {:?}",
        full.status.gateway.conditions
    );
    let snap = &loaded.snapshot;
    if wanted("plan_gateway_converged") {
        let per = per_call(5, || {
            std::hint::black_box(gatewright::plan::plan_gateway(snap, &key).unwrap());
        });
        println!(
            "plan_gateway (same, converged: 3 children rendered and ready, address known): {per:?} per plan, {:.0} plans/s on one core",
            1.0 / per.as_secs_f64()
        );
    }
    if wanted("plan_memo_unchanged") || wanted("plan_memo_changed") {
        // The converged Gateway planned again with its remembered route plans: unchanged,
        // then after one route's weights changed (as Flagger does), alternating routes.
        let mut memo = gatewright::plan::PlanMemo::default();
        gatewright::plan::plan_with(&loaded.snapshot, &key, &mut memo).unwrap();
        if wanted("plan_memo_unchanged") {
            let per = per_call(5, || {
                std::hint::black_box(
                    gatewright::plan::plan_with(&loaded.snapshot, &key, &mut memo).unwrap(),
                );
            });
            println!(
                "plan with remembered route plans (same, converged, nothing changed): {per:?} per plan, {:.0} plans/s on one core ({} of {n_routes} route plans reused)",
                1.0 / per.as_secs_f64(),
                memo.last.reused
            );
        }
        let routes: Vec<_> = full.gateway.context.routes.clone();
        let changed_wanted = wanted("plan_memo_changed");
        let mut i = 0usize;
        let mut changed = Duration::ZERO;
        let mut n = 0u32;
        let start = Instant::now();
        while changed_wanted && start.elapsed() < Duration::from_secs(5) {
            let rkey = &routes[i % routes.len()];
            let mut r = loaded.snapshot.route(rkey).unwrap().json();
            let w = (i % 90) as i64;
            r["spec"]["rules"][0]["backendRefs"][0]["weight"] = (100 - w).into();
            r["spec"]["rules"][0]["backendRefs"][1]["weight"] = w.into();
            loaded.snapshot.put_route_json(r);
            i += 1;
            let cpu = thread_cpu();
            let t = Instant::now();
            let p = gatewright::plan::plan_with(&loaded.snapshot, &key, &mut memo).unwrap();
            changed += match (cpu, thread_cpu()) {
                (Some(a), Some(b)) => b - a,
                _ => t.elapsed(),
            };
            n += 1;
            std::hint::black_box(p);
        }
        if changed_wanted {
            println!(
                "plan with remembered route plans (same, converged, one route's weights changed): {:?} per plan ({} of {n_routes} route plans made)",
                changed / n,
                memo.last.planned
            );
        }
    }
    if wanted("plan_converged") {
        let snap = &loaded.snapshot;
        let per = per_call(5, || {
            std::hint::black_box(gatewright::plan::plan(snap, &key).unwrap());
        });
        println!(
            "plan (same, converged, with its {n_routes} route plans and every status): {per:?} per plan, {:.0} plans/s on one core",
            1.0 / per.as_secs_f64()
        );
    }
}

fn bench_render() {
    let dir = tempfile::tempdir().unwrap();
    for g in 0..1000 {
        let ns = format!("ns{}", g % 20);
        let mut s = gateway(&ns, &format!("gw{g}"), 2);
        s.push_str(&route(
            &ns,
            &format!("r{g}"),
            &ns,
            &format!("gw{g}"),
            &format!("app{g}.d0.example.com"),
        ));
        std::fs::write(dir.path().join(format!("gw{g:04}.yaml")), s).unwrap();
    }
    let now = Time("2026-01-01T00:00:00Z".parse().unwrap());
    let start = Instant::now();
    let out = gatewright::cli::render(
        &[class_dir(), dir.path().to_owned()],
        "gatewright-system",
        &now,
    );
    let took = start.elapsed();
    assert_eq!(out.code, 0, "{:?}", out.stderr.first());
    println!(
        "render of 1,000 Gateways (1,000 routes, load + plan + print): {took:?} ({:.0} Gateways/s), {} bytes of output",
        1000.0 / took.as_secs_f64(),
        out.stdout.len()
    );
}

/// The allocator the binary uses (src/main.rs), so the figures are the binary's.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    if std::env::args().any(|a| a == "--list") {
        println!("plan: benchmark\nrender: benchmark");
        return;
    }
    bench_plan();
    if wanted("render") {
        bench_render();
    }
}
