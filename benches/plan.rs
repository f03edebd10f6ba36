//! Figures, not thresholds: `cargo bench` prints how fast the planner and `render` are.
//!
//! - `plan_gateway` of the istio-certmanager-externaldns class for a Gateway with 10
//!   listeners and 50 attached routes (plans per second on one core);
//! - `gatewright render` of a folder with 1,000 Gateways.
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
            "  - {{name: l{i}, port: {}, protocol: HTTP, hostname: \"*.d{i}.example.com\", allowedRoutes: {{namespaces: {{from: All}}}}}}",
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

fn bench_plan() {
    let dir = tempfile::tempdir().unwrap();
    let mut input = gateway("infra", "big", 10);
    for r in 0..50 {
        input.push_str(&route(
            &format!("team{}", r % 5),
            &format!("r{r}"),
            "infra",
            "big",
            &format!("app{r}.d{}.example.com", r % 10),
        ));
    }
    std::fs::write(dir.path().join("in.yaml"), input).unwrap();
    let loaded = files::load(&[class_dir(), dir.path().to_owned()], "gatewright-system").unwrap();
    let key = ("infra".to_owned(), "big".to_owned());
    let plan = gatewright::plan::plan_gateway(&loaded.snapshot, &key).unwrap();
    assert_eq!(plan.context.routes.len(), 50);
    // Warm up, then run for a fixed time.
    for _ in 0..200 {
        std::hint::black_box(gatewright::plan::plan_gateway(&loaded.snapshot, &key).unwrap());
    }
    let start = Instant::now();
    let mut n = 0u32;
    while start.elapsed() < Duration::from_secs(5) {
        std::hint::black_box(gatewright::plan::plan_gateway(&loaded.snapshot, &key).unwrap());
        n += 1;
    }
    let per = start.elapsed() / n;
    println!(
        "plan_gateway (istio-certmanager-externaldns, 10 listeners, 50 routes): {per:?} per plan, {:.0} plans/s on one core",
        1.0 / per.as_secs_f64()
    );

    let start = Instant::now();
    let mut m = 0u32;
    while start.elapsed() < Duration::from_secs(3) {
        for rkey in &plan.context.routes {
            std::hint::black_box(gatewright::plan::plan_route(&loaded.snapshot, &plan, rkey));
        }
        m += 1;
    }
    let per_route = start.elapsed() / (m * 50);
    println!("plan_route (same Gateway, per route): {per_route:?}");
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
    bench_render();
}
