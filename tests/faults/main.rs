//! Nothing lost under faults, on the real cluster: a fault proxy between the controller and
//! the API server (latency, resets, stalls, cut watches, 429 and 5xx answers), restarts of
//! kube-apiserver and etcd mid-way through cold convergence, a certificate rotation and a
//! teardown, watch expiry (410 Gone) after etcd compaction, a partitioned leader, and a
//! fight over a field. After each: the same children as a healthy run, no wanted child
//! deleted, no duplicate or orphan, no listener pointing at a missing certificate, foreign
//! status kept, writes bounded, convergence within a bound. Each prints a `FAULTS |` line
//! (README.md, "Faults").
//!
//! A test binary of its own, run after the others (cargo runs test binaries one by one),
//! with its tests one at a time: they stop and start the API server and etcd of the local
//! cluster (`tests/cluster`, found through `GATEWRIGHT_CLUSTER_DIR`). Without that
//! harness, only the fight test runs (on `KUBECONFIG`'s cluster); the others say so.
#![cfg(feature = "cluster-tests")]
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::too_many_lines,
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss,
    reason = "test code"
)]

#[allow(dead_code, reason = "shared with the e2e binary")]
#[path = "../e2e/common.rs"]
mod common;
mod harness;
mod proxy;

use std::collections::BTreeSet;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use gateway_api::apis::standard::gateways::Gateway;
use gateway_api::apis::standard::httproutes::HttpRoute;
use kube::Client;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use serde_json::json;

use common::{TestNamespace, admin, apply_yaml, unique_name, wait_for};
use harness::{
    Deletions, Running, children, cluster_dir, converge, install_class, options, settle, world_yaml,
};
use proxy::{HttpFaults, Mode, Proxy, client_via};

/// One fault test at a time: they share (and restart) one cluster.
fn serial() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Convergence bound after a fault ends (the controller's request deadline is 3 s, its
/// per-object backoff is capped at 60 s but a watch event wakes it at once).
const CONVERGE: Duration = Duration::from_secs(60);

/// Writes allowed for a change under faults: this many times those of the healthy run
/// of the same change, plus [`WRITE_SLACK`] (retries of failed attempts are counted).
const WRITE_FACTOR: u64 = 3;
const WRITE_SLACK: u64 = 40;

/// Prints a figure line and appends it to `target/tmp/faults-report.txt` (scripts/test.sh
/// shows that file after the tests: a passing test's output is not shown).
fn figure(line: &str) {
    use std::io::Write as _;
    println!("{line}");
    let path = concat!(env!("CARGO_TARGET_TMPDIR"), "/faults-report.txt");
    if let Ok(mut f) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
    {
        let _ = writeln!(f, "{line}");
    }
}

/// `reference`: the writes the ceiling is computed from, in words (a healthy run's count,
/// or a count derived from the change).
fn report(scenario: &str, injected: &str, converged: Duration, writes: u64, reference: &str) {
    figure(&format!(
        "FAULTS | {scenario} | {injected} | converged {:.1}s after the fault | {writes} write requests sent ({reference}) | ok",
        converged.as_secs_f64()
    ));
}

fn assert_writes_bounded(what: &str, writes: u64, healthy: u64) {
    let ceiling = WRITE_FACTOR * healthy + WRITE_SLACK;
    assert!(
        writes <= ceiling,
        "{what}: {writes} writes, over the ceiling {ceiling} ({WRITE_FACTOR} x {healthy} + {WRITE_SLACK})"
    );
}

/// No child in `wanted` was deleted.
fn assert_no_wanted_deleted(what: &str, deletions: &BTreeSet<String>, wanted: &[String]) {
    let bad: Vec<&String> = wanted.iter().filter(|w| deletions.contains(*w)).collect();
    assert!(
        bad.is_empty(),
        "{what}: wanted children were deleted: {bad:?}"
    );
}

/// A change made to the faulty world: when it began, and the children the healthy
/// world settled on after the same change.
struct Phase {
    began: Instant,
    expected: Vec<String>,
}

/// No child was deleted while wanted: a deletion seen during a phase is of a child the
/// healthy world let go in that change (it held it before and not after), or of one it
/// never settled on (a passing version, as while routes were still arriving). A child
/// wanted both before and after the change must never be deleted, even if recreated.
fn assert_nothing_wanted_deleted(what: &str, dels: &Deletions, phases: &[Phase]) {
    let mut bad = Vec::new();
    let mut before: Vec<String> = Vec::new();
    for (k, p) in phases.iter().enumerate() {
        let to = phases.get(k + 1).map(|n| n.began);
        for d in dels.between(p.began, to) {
            if p.expected.contains(&d) && (k == 0 || before.contains(&d)) {
                bad.push(format!("{d} (change {k})"));
            }
        }
        before.clone_from(&p.expected);
    }
    assert!(
        bad.is_empty(),
        "{what}: children deleted while wanted: {bad:?} (all deletions: {:?})",
        dels.seen()
    );
}

/// Puts a parent entry of another controller on `route`'s status.
async fn foreign_entry(client: &Client, ns: &str, route: &str) {
    let api: Api<HttpRoute> = Api::namespaced(client.clone(), ns);
    api.patch_status(
        route,
        &PatchParams::default(),
        &Patch::Merge(&json!({"status": {"parents": [{
            "parentRef": {"name": "elsewhere"},
            "controllerName": "example.com/other",
            "conditions": [{"type": "Accepted", "status": "True", "reason": "Accepted",
                "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}]
        }]}})),
    )
    .await
    .unwrap();
}

async fn has_foreign_entry(client: &Client, ns: &str, route: &str) -> bool {
    let api: Api<HttpRoute> = Api::namespaced(client.clone(), ns);
    api.get(route).await.unwrap().status.is_some_and(|s| {
        s.parents
            .iter()
            .any(|p| p.controller_name == "example.com/other")
    })
}

/// Applies the same change to the healthy and then to the faulty namespace.
struct Worlds {
    healthy: TestNamespace,
    faulty: TestNamespace,
    class: String,
}

impl Worlds {
    async fn new(client: &Client, prefix: &str) -> Self {
        let class = unique_name(prefix);
        install_class(client, &class).await;
        Self {
            healthy: TestNamespace::new(client, &format!("{prefix}-ok")).await,
            faulty: TestNamespace::new(client, &format!("{prefix}-f")).await,
            class,
        }
    }
}

#[test]
fn connection_and_http_faults_lose_nothing() {
    let _serial = serial();
    if cluster_dir().is_none() {
        eprintln!(
            "needs the local cluster harness (GATEWRIGHT_CLUSTER_DIR, scripts/test.sh): not run"
        );
        return;
    }
    let trt = tokio::runtime::Runtime::new().unwrap();
    let client = trt.block_on(admin());
    let w = trt.block_on(Worlds::new(&client, "fproxy"));
    let (h, f) = (w.healthy.name.clone(), w.faulty.name.clone());
    let proxy = trt.block_on(async { Proxy::start(proxy::api_server_addr().await).await });
    let http = Arc::new(HttpFaults::default());
    let cns = unique_name("fproxy-ctl");
    let run = {
        let (p, hf) = (&proxy, http.clone());
        Running::start(options(&cns), || client_via(p, hf))
    };
    let m = run.ctl.metrics().clone();
    // Writes of this controller to the two worlds only (another test's leftovers, torn
    // down meanwhile, are not this scenario's).
    let ours = || m.writes_in_namespace(&h) + m.writes_in_namespace(&f);
    let dels = trt.block_on(async { Deletions::record(&client, &f) });
    let (gws, routes) = (6, 2);

    // Cold convergence: healthy, then under latency and a share of 429 and 503 answers.
    let before = ours();
    trt.block_on(apply_yaml(
        &client,
        &world_yaml(&h, &w.class, gws, routes, "example.com"),
    ));
    let expected = trt.block_on(settle(&client, &h, CONVERGE));
    assert_eq!(expected.len(), gws * (3 + routes), "{expected:?}");
    let mut phases = vec![Phase {
        began: Instant::now(),
        expected: expected.clone(),
    }];
    let healthy_writes = ours() - before;
    let server_before = trt.block_on(harness::server_child_writes(&client));
    proxy.set(Mode::Latency(Duration::from_millis(30)));
    http.set(429, 4, 1);
    let before = ours();
    trt.block_on(apply_yaml(
        &client,
        &world_yaml(&f, &w.class, gws, routes, "example.com"),
    ));
    trt.block_on(foreign_entry(&client, &f, "gw0-r0"));
    std::thread::sleep(Duration::from_secs(3));
    http.set(503, 5, 0);
    std::thread::sleep(Duration::from_secs(3));
    http.off();
    proxy.set(Mode::Pass);
    let t = trt.block_on(converge(&client, &f, &expected, CONVERGE));
    let writes = ours() - before;
    assert_writes_bounded(
        "cold convergence under 429/503 and latency",
        writes,
        healthy_writes,
    );
    report(
        "cold convergence, 6 Gateways x 2 routes",
        &format!(
            "30 ms latency per chunk; every 4th request 429 (Retry-After 1), then every 5th 503, for 6 s ({} answered by the fault layer)",
            http.injected.load(Ordering::Relaxed)
        ),
        t,
        writes,
        &format!("healthy run: {healthy_writes}"),
    );

    // An update through resets and cut watch streams.
    let change = |ns: &str| {
        format!(
            "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {{name: gw1-r0, namespace: {ns}}}\nspec:\n  parentRefs: [{{name: gw1}}]\n  hostnames: [changed.g1.example.com]\n  rules: [{{backendRefs: [{{name: svc, port: 80}}]}}]\n"
        )
    };
    let before = ours();
    trt.block_on(apply_yaml(&client, &change(&h)));
    let route_child = "HTTPRoute/gw1-r0-gw1-istio";
    let hroutes: Api<kube::api::DynamicObject> = Api::namespaced_with(
        client.clone(),
        &h,
        &kube::api::ApiResource::from_gvk_with_plural(
            &kube::api::GroupVersionKind::gvk("gateway.networking.k8s.io", "v1", "HTTPRoute"),
            "httproutes",
        ),
    );
    trt.block_on(wait_for("healthy update", CONVERGE, || async {
        let r = hroutes.get_opt("gw1-r0-gw1-istio").await.unwrap()?;
        (r.data["spec"]["hostnames"][0] == "changed.g1.example.com").then_some(())
    }));
    let expected = trt.block_on(settle(&client, &h, CONVERGE));
    let healthy_update = ours() - before;
    phases.push(Phase {
        began: Instant::now(),
        expected: expected.clone(),
    });
    assert!(expected.iter().any(|c| c == route_child), "{expected:?}");
    let before = ours();
    proxy.set(Mode::Reset);
    trt.block_on(apply_yaml(&client, &change(&f)));
    std::thread::sleep(Duration::from_secs(3));
    proxy.set(Mode::Pass);
    let fault_end = Instant::now();
    let froutes: Api<kube::api::DynamicObject> = Api::namespaced_with(
        client.clone(),
        &f,
        &kube::api::ApiResource::from_gvk_with_plural(
            &kube::api::GroupVersionKind::gvk("gateway.networking.k8s.io", "v1", "HTTPRoute"),
            "httproutes",
        ),
    );
    trt.block_on(wait_for("update after resets", CONVERGE, || async {
        let r = froutes.get_opt("gw1-r0-gw1-istio").await.unwrap()?;
        (r.data["spec"]["hostnames"][0] == "changed.g1.example.com").then_some(())
    }));
    trt.block_on(converge(&client, &f, &expected, CONVERGE));
    let writes = ours() - before;
    assert_writes_bounded("update through resets", writes, healthy_update);
    report(
        "route update",
        &format!(
            "every connection reset (open ones and new ones, watch streams cut) for 3 s ({} cut)",
            proxy.stats.cut.load(Ordering::Relaxed)
        ),
        fault_end.elapsed(),
        writes,
        &format!("healthy run: {healthy_update}"),
    );

    // A route deleted while the API server is unreachable (stalls: no answer at all).
    let before = ours();
    let routes_h: Api<HttpRoute> = Api::namespaced(client.clone(), &h);
    trt.block_on(routes_h.delete("gw2-r1", &DeleteParams::default()))
        .unwrap();
    trt.block_on(wait_for("healthy prune", CONVERGE, || async {
        let (c, _) = children(&client, &h).await;
        (!c.iter().any(|c| c == "HTTPRoute/gw2-r1-gw2-istio")).then_some(())
    }));
    let expected = trt.block_on(settle(&client, &h, CONVERGE));
    let healthy_delete = ours() - before;
    phases.push(Phase {
        began: Instant::now(),
        expected: expected.clone(),
    });
    let before = ours();
    proxy.set(Mode::Stall);
    let routes_f: Api<HttpRoute> = Api::namespaced(client.clone(), &f);
    trt.block_on(routes_f.delete("gw2-r1", &DeleteParams::default()))
        .unwrap();
    std::thread::sleep(Duration::from_secs(8));
    proxy.set(Mode::Pass);
    let fault_end = Instant::now();
    trt.block_on(converge(&client, &f, &expected, CONVERGE));
    let writes = ours() - before;
    assert_writes_bounded("deletion through a stall", writes, healthy_delete);
    report(
        "route deletion (prune)",
        &format!(
            "the API server unreachable for 8 s: connections accepted, never answered ({} bytes discarded), request deadline 3 s",
            proxy.stats.discarded.load(Ordering::Relaxed)
        ),
        fault_end.elapsed(),
        writes,
        &format!("healthy run: {healthy_delete}"),
    );

    // The API server's own count of the controller's child writes in the faulty phases:
    // no more than the controller says it sent (some attempts never arrived).
    let server_writes = trt.block_on(harness::server_child_writes(&client)) - server_before;
    figure(&format!(
        "FAULTS | proxy scenarios | server-side count (apiserver_request_total) of writes to Certificates and DNSEndpoints during the faulty phases: {server_writes}"
    ));

    // Invariants over the whole run.
    let deleted = dels.seen();
    assert!(
        deleted.contains("HTTPRoute/gw2-r1-gw2-istio"),
        "the deleted route's child was not pruned: {deleted:?}"
    );
    assert_nothing_wanted_deleted("proxy faults", &dels, &phases);
    assert_no_wanted_deleted("proxy faults", &deleted, &expected);
    assert!(
        trt.block_on(has_foreign_entry(&client, &f, "gw0-r0")),
        "foreign status entry lost"
    );
    assert!(run.stop(Duration::from_secs(10)), "shutdown did not drain");
    drop(dels);
    trt.block_on(async {
        w.healthy.delete().await;
        w.faulty.delete().await;
    });
}

/// Listeners of our Istio Gateways in `ns` naming a Secret no Certificate there issues.
async fn listeners_without_certificate(client: &Client, ns: &str) -> Vec<String> {
    use kube::api::{ApiResource, DynamicObject, GroupVersionKind};
    let certs: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        ns,
        &ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("cert-manager.io", "v1", "Certificate"),
            "certificates",
        ),
    );
    let secrets: BTreeSet<String> = certs
        .list(&ListParams::default())
        .await
        .unwrap()
        .into_iter()
        .filter(|c| c.metadata.deletion_timestamp.is_none())
        .filter_map(|c| c.data["spec"]["secretName"].as_str().map(str::to_owned))
        .collect();
    let gws: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        ns,
        &ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("gateway.networking.k8s.io", "v1", "Gateway"),
            "gateways",
        ),
    );
    let mut bad = Vec::new();
    for g in gws
        .list(&ListParams::default().labels("app.kubernetes.io/managed-by=gatewright"))
        .await
        .unwrap()
    {
        for l in g.data["spec"]["listeners"].as_array().into_iter().flatten() {
            for r in l["tls"]["certificateRefs"].as_array().into_iter().flatten() {
                let name = r["name"].as_str().unwrap_or_default();
                if !secrets.contains(name) {
                    bad.push(format!(
                        "{}: {name}",
                        g.metadata.name.clone().unwrap_or_default()
                    ));
                }
            }
        }
    }
    bad
}

#[test]
fn api_server_and_etcd_restarts_lose_nothing() {
    let _serial = serial();
    let Some(dir) = cluster_dir() else {
        eprintln!(
            "needs the local cluster harness (GATEWRIGHT_CLUSTER_DIR, scripts/test.sh): not run"
        );
        return;
    };
    let trt = tokio::runtime::Runtime::new().unwrap();
    let client = trt.block_on(admin());
    let w = trt.block_on(Worlds::new(&client, "frestart"));
    let (h, f) = (w.healthy.name.clone(), w.faulty.name.clone());
    let cns = unique_name("frestart-ctl");
    let run = Running::start(options(&cns), admin);
    let m = run.ctl.metrics().clone();
    // Writes of this controller to the two worlds only (another test's leftovers, torn
    // down meanwhile, are not this scenario's).
    let ours = || m.writes_in_namespace(&h) + m.writes_in_namespace(&f);
    let dels = trt.block_on(async { Deletions::record(&client, &f) });
    let (gws, routes) = (6, 2);

    // (a) kube-apiserver killed during cold convergence (etcd kept).
    let before = ours();
    trt.block_on(apply_yaml(
        &client,
        &world_yaml(&h, &w.class, gws, routes, "example.com"),
    ));
    let expected = trt.block_on(settle(&client, &h, CONVERGE));
    assert_eq!(expected.len(), gws * (3 + routes), "{expected:?}");
    let healthy_writes = ours() - before;
    let mut phases = vec![Phase {
        began: Instant::now(),
        expected: expected.clone(),
    }];
    let before = ours();
    trt.block_on(apply_yaml(
        &client,
        &world_yaml(&f, &w.class, gws, routes, "example.com"),
    ));
    trt.block_on(foreign_entry(&client, &f, "gw0-r0"));
    harness::restart(&["--kill", "--down", "2", "kube-apiserver"]);
    let t = trt.block_on(converge(&client, &f, &expected, CONVERGE));
    let writes = ours() - before;
    assert_writes_bounded(
        "apiserver restart in cold convergence",
        writes,
        healthy_writes,
    );
    report(
        "cold convergence, 6 Gateways x 2 routes (restart)",
        "kube-apiserver SIGKILLed right after the Gateways were created, down 2 s, restarted (etcd kept)",
        t,
        writes,
        &format!("healthy run: {healthy_writes}"),
    );

    // (b) etcd restarted during a make-before-break certificate rotation: a route's new
    // hostname changes the certificate's dnsNames.
    let rotate = |ns: &str| {
        format!(
            "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {{name: gw0-r0, namespace: {ns}}}\nspec:\n  parentRefs: [{{name: gw0}}]\n  hostnames: [rotated.g0.example.com]\n  rules: [{{backendRefs: [{{name: svc, port: 80}}]}}]\n"
        )
    };
    let before = ours();
    trt.block_on(apply_yaml(&client, &rotate(&h)));
    let expected_a = expected.clone();
    // The new Certificate first: a settle alone could take the old, still stable set
    // for the answer while the route's change is on its way to the controller.
    trt.block_on(wait_for("healthy rotation", CONVERGE, || async {
        let (c, _) = children(&client, &h).await;
        c.iter()
            .any(|c| c.starts_with("Certificate/") && !expected_a.contains(c))
            .then_some(())
    }));
    let expected = trt.block_on(settle(&client, &h, CONVERGE));
    assert_ne!(expected, expected_a, "the rotation replaced no certificate");
    let healthy_rotation = ours() - before;
    phases.push(Phase {
        began: Instant::now(),
        expected: expected.clone(),
    });
    let before = ours();
    trt.block_on(apply_yaml(&client, &rotate(&f)));
    let bg = harness::restart_in_background(
        ["--kill", "--down", "2", "etcd"]
            .map(str::to_owned)
            .to_vec(),
    );
    // Sample the listeners' certificates throughout, the outage included.
    let mut violations = Vec::new();
    let rot_began = Instant::now();
    loop {
        let sample = trt.block_on(async {
            tokio::time::timeout(
                Duration::from_secs(2),
                listeners_without_certificate(&client, &f),
            )
            .await
        });
        if let Ok(bad) = sample
            && !bad.is_empty()
        {
            violations.extend(bad);
        }
        if bg.is_finished() {
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
        assert!(
            rot_began.elapsed() < Duration::from_secs(120),
            "etcd restart hangs"
        );
    }
    bg.join().unwrap();
    let t = trt.block_on(async {
        let began = Instant::now();
        wait_for("rotation after the etcd restart", CONVERGE, || async {
            let _ = gatewright::simulate::simulate_ready_where(
                &client,
                Some(&f),
                gatewright::simulate::Play::All,
            )
            .await;
            let bad = listeners_without_certificate(&client, &f).await;
            assert!(
                bad.is_empty(),
                "a listener points at a missing certificate: {bad:?}"
            );
            let (c, o) = children(&client, &f).await;
            (c == expected && o.is_empty()).then_some(())
        })
        .await;
        began.elapsed()
    });
    assert!(
        violations.is_empty(),
        "listeners without a certificate: {violations:?}"
    );
    let writes = ours() - before;
    assert_writes_bounded("etcd restart in a rotation", writes, healthy_rotation);
    report(
        "make-before-break certificate rotation",
        "etcd SIGKILLed right after the hostname change, down 2 s, restarted; listeners sampled every 200 ms",
        t,
        writes,
        &format!("healthy run: {healthy_rotation}"),
    );

    // (c) Watch expiry: etcd compacted and kube-apiserver restarted, so every watch resumes
    // from a resourceVersion that is gone (410 Gone) and lists again; a change made right
    // after must still be seen.
    let rev = harness::compact_etcd(&dir);
    let gets_before = m.requests("GET", "httproutes");
    harness::restart(&["kube-apiserver"]);
    let add = |ns: &str| {
        format!(
            "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {{name: gw3-r9, namespace: {ns}}}\nspec:\n  parentRefs: [{{name: gw3}}]\n  hostnames: [r9.g3.example.com]\n  rules: [{{backendRefs: [{{name: svc, port: 80}}]}}]\n"
        )
    };
    trt.block_on(apply_yaml(&client, &add(&h)));
    let before = ours();
    let began = Instant::now();
    trt.block_on(apply_yaml(&client, &add(&f)));
    trt.block_on(wait_for("healthy route added", CONVERGE, || async {
        let (c, _) = children(&client, &h).await;
        c.iter()
            .any(|c| c == "HTTPRoute/gw3-r9-gw3-istio")
            .then_some(())
    }));
    let expected = trt.block_on(settle(&client, &h, CONVERGE));
    phases.push(Phase {
        began,
        expected: expected.clone(),
    });
    let t = trt.block_on(converge(&client, &f, &expected, CONVERGE));
    let writes = ours() - before;
    let relists = m.requests("GET", "httproutes") - gets_before;
    assert!(relists >= 1, "no list or watch of routes after the restart");
    assert_writes_bounded("410 relist", writes, 2 * healthy_rotation.max(4));
    report(
        "watch expiry (410 Gone) and relist",
        &format!(
            "etcd compacted at revision {rev}, kube-apiserver restarted; a route added right after"
        ),
        t,
        writes,
        &format!(
            "both worlds changed at once; ceiling from twice the healthy rotation's {healthy_rotation}"
        ),
    );

    // Before the teardown, only what a change replaced may have been deleted.
    assert_nothing_wanted_deleted("restarts", &dels, &phases);
    assert_no_wanted_deleted("restarts", &dels.seen(), &expected);

    // (d) kube-apiserver killed during a teardown.
    let gw_f: Api<Gateway> = Api::namespaced(client.clone(), &f);
    let before = ours();
    trt.block_on(async {
        for i in 0..gws {
            gw_f.delete(&format!("gw{i}"), &DeleteParams::default())
                .await
                .unwrap();
        }
    });
    harness::restart(&["--kill", "--down", "2", "kube-apiserver"]);
    let fault_end = Instant::now();
    let t = trt.block_on(async {
        wait_for("teardown after the restart", CONVERGE, || async {
            let (c, _) = children(&client, &f).await;
            let left = gw_f.list(&ListParams::default()).await.ok()?.items.len();
            (c.is_empty() && left == 0).then_some(())
        })
        .await;
        fault_end.elapsed()
    });
    let writes = ours() - before;
    // Per Gateway: a delete per child, the finalizer off, a status write or two, Events,
    // and the DNS drain (the drain patch, its drained-at mark, two Teardown conditions).
    let per_gateway = 3 + routes + 4 + 4;
    assert_writes_bounded("teardown", writes, (gws * per_gateway) as u64);
    report(
        "teardown of 6 Gateways",
        "kube-apiserver SIGKILLed right after the Gateways were deleted, down 2 s, restarted",
        t,
        writes,
        &format!(
            "reference {}: per Gateway a delete per child, the finalizer, status, Events, the DNS drain",
            gws * per_gateway
        ),
    );

    assert!(
        trt.block_on(has_foreign_entry(&client, &f, "gw0-r0")),
        "foreign status entry lost"
    );
    assert!(run.stop(Duration::from_secs(10)), "shutdown did not drain");
    drop(dels);
    trt.block_on(async {
        w.healthy.delete().await;
        w.faulty.delete().await;
    });
}

/// One Gateway with one route, its controller under a fast fight policy (3 reverts in
/// 4 s, holds of 1 s doubling to 4 s), and the route's child (an HTTPRoute) applied.
struct FightWorld {
    trt: tokio::runtime::Runtime,
    client: Client,
    ns: TestNamespace,
    run: Running,
    routes: Api<kube::api::DynamicObject>,
    gws: Api<Gateway>,
}

/// The route child another actor fights over.
const FOUGHT: &str = "gw0-r0-gw0-istio";

impl FightWorld {
    fn start(prefix: &str) -> Self {
        let trt = tokio::runtime::Runtime::new().unwrap();
        let client = trt.block_on(admin());
        let class = unique_name(prefix);
        trt.block_on(install_class(&client, &class));
        let ns = trt.block_on(TestNamespace::new(&client, prefix));
        let mut opts = options(&unique_name(&format!("{prefix}-ctl")));
        opts.fights = gatewright::controller::fight::Policy {
            threshold: 3,
            window: Duration::from_secs(4),
            base: Duration::from_secs(1),
            cap: Duration::from_secs(4),
        };
        let run = Running::start(opts, admin);
        trt.block_on(apply_yaml(
            &client,
            &world_yaml(&ns.name, &class, 1, 1, "example.com"),
        ));
        let routes: Api<kube::api::DynamicObject> = Api::namespaced_with(
            client.clone(),
            &ns.name,
            &kube::api::ApiResource::from_gvk_with_plural(
                &kube::api::GroupVersionKind::gvk("gateway.networking.k8s.io", "v1", "HTTPRoute"),
                "httproutes",
            ),
        );
        trt.block_on(wait_for("the route child", CONVERGE, || async {
            routes.get_opt(FOUGHT).await.unwrap().map(|_| ())
        }));
        std::thread::sleep(Duration::from_secs(1));
        let gws = Api::namespaced(client.clone(), &ns.name);
        Self {
            trt,
            client,
            ns,
            run,
            routes,
            gws,
        }
    }

    /// The Gateway's fight condition, if it has one.
    fn condition(&self) -> Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition> {
        let g = self.trt.block_on(self.gws.get("gw0")).unwrap();
        g.status.and_then(|s| s.conditions).and_then(|cs| {
            cs.into_iter()
                .find(|c| c.type_ == "gatewright.dev/FieldConflict")
        })
    }

    /// Runs `revert` every 100 ms for `fighting`; returns how many took effect, the
    /// controller's writes in the namespace meanwhile, and the fight condition with when
    /// it first appeared.
    fn fight(
        &self,
        fighting: Duration,
        revert: impl Fn() -> bool,
    ) -> (
        u32,
        u64,
        Option<(
            k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition,
            Duration,
        )>,
    ) {
        let m = self.run.ctl.metrics().clone();
        let before = m.writes_in_namespace(&self.ns.name);
        let began = Instant::now();
        let mut reverts = 0u32;
        let mut seen = None;
        while began.elapsed() < fighting {
            if revert() {
                reverts += 1;
            }
            if seen.is_none()
                && let Some(c) = self.condition()
            {
                seen = Some((c, began.elapsed()));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        (reverts, m.writes_in_namespace(&self.ns.name) - before, seen)
    }

    /// Asserts one Event with the fight's reason in the namespace.
    fn assert_event(&self) {
        let events: Api<k8s_openapi::api::core::v1::Event> =
            Api::namespaced(self.client.clone(), &self.ns.name);
        let evs = self
            .trt
            .block_on(events.list(&ListParams::default()))
            .unwrap();
        assert!(
            evs.items
                .iter()
                .any(|e| e.reason.as_deref() == Some("FieldFight")),
            "no FieldFight Event"
        );
    }

    /// Waits until the child holds our value again and the condition is gone; how long.
    fn wait_for_peace(&self) -> Duration {
        let stopped = Instant::now();
        self.trt.block_on(wait_for(
            "the fight to end",
            Duration::from_secs(30),
            || async {
                let ours = self
                    .routes
                    .get_opt(FOUGHT)
                    .await
                    .unwrap()
                    .is_some_and(|r| r.data["spec"]["hostnames"][0] == "r0.g0.example.com");
                let g = self.gws.get("gw0").await.unwrap();
                let calm = g
                    .status
                    .and_then(|s| s.conditions)
                    .is_none_or(|cs| !cs.iter().any(|c| c.type_ == "gatewright.dev/FieldConflict"));
                (ours && calm).then_some(())
            },
        ));
        stopped.elapsed()
    }

    fn stop(self) {
        assert!(
            self.run.stop(Duration::from_secs(10)),
            "shutdown did not drain"
        );
        self.trt.block_on(self.ns.delete());
    }
}

/// Writes allowed during `fighting` with backoff: 3 reverts, then one probe per hold (1, 2,
/// 4, 4, ... s), plus status writes and the Event. Without backoff: one per revert (~120).
fn fight_ceiling(fighting: Duration) -> u64 {
    3 + 2 * (fighting.as_secs() + 1) + 6
}

#[test]
fn a_fight_over_a_field_backs_off_and_is_reported() {
    let _serial = serial();
    let w = FightWorld::start("ffight");
    // Another actor reverts spec.hostnames every 100 ms for 12 s.
    let fighting = Duration::from_secs(12);
    let (reverts, writes, seen) = w.fight(fighting, || {
        w.trt
            .block_on(w.routes.patch(
                FOUGHT,
                &PatchParams {
                    field_manager: Some("fighter".into()),
                    ..PatchParams::default()
                },
                &Patch::Merge(&json!({"spec": {"hostnames": ["theirs.example.com"]}})),
            ))
            .is_ok()
    });
    let (cond, after) = seen.expect("the fight condition appeared on the Gateway");
    assert_eq!(cond.status, "True");
    assert_eq!(cond.reason, "FieldFight");
    assert!(
        cond.message.contains(FOUGHT)
            && cond.message.contains("spec.hostnames")
            && cond.message.contains("fighter"),
        "{}",
        cond.message
    );
    let ceiling = fight_ceiling(fighting);
    assert!(
        writes <= ceiling,
        "{writes} writes in {fighting:?} of fighting ({reverts} reverts); ceiling {ceiling}"
    );
    w.assert_event();
    // The other side stops: our value comes back and the condition clears.
    let cleared = w.wait_for_peace();
    figure(&format!(
        "FAULTS | fight over a field | spec.hostnames of a child reverted every 100 ms for {}s ({reverts} reverts) | condition after {:.1}s, cleared {:.1}s after the reverts stopped | {writes} writes during the fight (ceiling {ceiling}) | ok",
        fighting.as_secs(),
        after.as_secs_f64(),
        cleared.as_secs_f64()
    ));
    w.stop();
}

#[test]
fn a_child_deleted_again_and_again_is_a_fight_too() {
    let _serial = serial();
    let w = FightWorld::start("dfight");
    // Another actor deletes the child whenever it exists, every 100 ms for 12 s.
    let fighting = Duration::from_secs(12);
    let (deletions, writes, seen) = w.fight(fighting, || {
        w.trt
            .block_on(w.routes.delete(FOUGHT, &DeleteParams::default()))
            .is_ok()
    });
    let (cond, after) = seen.expect("the fight condition appeared on the Gateway");
    assert_eq!(cond.status, "True");
    assert_eq!(cond.reason, "FieldFight");
    assert!(
        cond.message.contains(FOUGHT) && cond.message.contains("keeps being deleted"),
        "{}",
        cond.message
    );
    let ceiling = fight_ceiling(fighting);
    assert!(
        writes <= ceiling,
        "{writes} writes in {fighting:?} of deleting ({deletions} deletions); ceiling {ceiling}"
    );
    w.assert_event();
    // The other side stops: the child is created again and the condition clears.
    let cleared = w.wait_for_peace();
    figure(&format!(
        "FAULTS | fight over a child's existence | a child deleted every 100 ms (whenever it existed) for {}s ({deletions} deletions) | condition after {:.1}s, cleared {:.1}s after the deletions stopped | {writes} writes during the fight (ceiling {ceiling}) | ok",
        fighting.as_secs(),
        after.as_secs_f64(),
        cleared.as_secs_f64()
    ));
    w.stop();
}

/// What a replica's writes (not to a Lease) did, as seen on the wire below its write
/// fence: when each left (whether or not it ever arrived), and when each got a success
/// answer.
#[derive(Default)]
struct WriteLog {
    sent: Vec<(Instant, String)>,
    acknowledged: Vec<(Instant, String)>,
}

/// `client`, logging its writes into `log`.
fn recording(client: Client, log: Arc<Mutex<WriteLog>>) -> Client {
    let ns = client.default_namespace().to_owned();
    let svc = tower::service_fn(move |req: http::Request<kube::client::Body>| {
        let client = client.clone();
        let log = log.clone();
        async move {
            let write = matches!(req.method().as_str(), "POST" | "PUT" | "PATCH" | "DELETE");
            let what = format!("{} {}", req.method(), req.uri().path());
            let logged = write && !what.contains("/leases/");
            if logged {
                log.lock()
                    .unwrap()
                    .sent
                    .push((Instant::now(), what.clone()));
            }
            let resp = client.send(req).await?;
            if logged && resp.status().is_success() {
                log.lock()
                    .unwrap()
                    .acknowledged
                    .push((Instant::now(), what));
            }
            Ok::<_, kube::Error>(resp)
        }
    });
    Client::new(svc, ns)
}

#[test]
fn a_partitioned_leader_stops_writing_before_it_can_be_replaced() {
    let _serial = serial();
    if cluster_dir().is_none() {
        eprintln!(
            "needs the local cluster harness (GATEWRIGHT_CLUSTER_DIR, scripts/test.sh): not run"
        );
        return;
    }
    let trt = tokio::runtime::Runtime::new().unwrap();
    let client = trt.block_on(admin());
    let class = unique_name("fpart");
    trt.block_on(install_class(&client, &class));
    let ns = trt.block_on(TestNamespace::new(&client, "fpart"));
    let n = ns.name.clone();
    let lease_ns = unique_name("fpart-ctl");
    trt.block_on(apply_yaml(
        &client,
        &format!("apiVersion: v1\nkind: Namespace\nmetadata: {{name: {lease_ns}}}\n"),
    ));
    let mut opts = options(&lease_ns);
    opts.leader_election = Some((lease_ns.clone(), "fpart".into()));
    let proxy = trt.block_on(async { Proxy::start(proxy::api_server_addr().await).await });
    let (log_a, log_b) = (
        Arc::new(Mutex::new(WriteLog::default())),
        Arc::new(Mutex::new(WriteLog::default())),
    );
    let a = {
        let (p, l) = (&proxy, log_a.clone());
        Running::start(opts.clone(), || async move {
            recording(client_via(p, Arc::new(HttpFaults::default())).await, l)
        })
    };
    // A leads and converges a world.
    trt.block_on(apply_yaml(
        &client,
        &world_yaml(&n, &class, 2, 1, "example.com"),
    ));
    trt.block_on(wait_for("A to write", CONVERGE, || async {
        let (c, _) = children(&client, &n).await;
        (c.len() >= 2 * 3).then_some(())
    }));
    let b = {
        let l = log_b.clone();
        Running::start(opts, || async move { recording(admin().await, l) })
    };
    // Cut A off, then give both something to write.
    proxy.set(Mode::Stall);
    let cut = Instant::now();
    trt.block_on(apply_yaml(
        &client,
        &format!(
            "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {{name: gw1-r1, namespace: {n}}}\nspec:\n  parentRefs: [{{name: gw1}}]\n  hostnames: [r1.g1.example.com]\n  rules: [{{backendRefs: [{{name: svc, port: 80}}]}}]\n"
        ),
    ));
    // B takes over once A's Lease expires (15 s) and writes the new route's child.
    trt.block_on(wait_for(
        "B to take over and write",
        Duration::from_secs(60),
        || async {
            let (c, _) = children(&client, &n).await;
            c.iter()
                .any(|c| c == "HTTPRoute/gw1-r1-gw1-istio")
                .then_some(())
        },
    ));
    let b_first = log_b
        .lock()
        .unwrap()
        .acknowledged
        .first()
        .map(|(t, _)| *t)
        .expect("B wrote");
    // Heal: A learns it lost the Lease and stops; it sends nothing meanwhile.
    proxy.set(Mode::Pass);
    let why =
        a.rt.as_ref().unwrap().block_on(async {
            tokio::time::timeout(Duration::from_secs(60), a.ctl.stopped()).await
        });
    assert!(
        matches!(why, Ok(gatewright::controller::Stop::Failed(_))),
        "A did not stop after losing the Lease: {why:?}"
    );
    // Not one write of A left it after B's first write: none can land late (a write A
    // sent before and that a partition held back is what the fence's margin is for).
    let late: Vec<(Duration, String)> = log_a
        .lock()
        .unwrap()
        .sent
        .iter()
        .filter(|(t, _)| *t >= b_first)
        .map(|(t, w)| (*t - b_first, w.clone()))
        .collect();
    assert!(
        late.is_empty(),
        "the old leader sent writes after the new leader's first: {late:?}"
    );
    let a_last_sent = log_a.lock().unwrap().sent.last().map(|(t, _)| *t);
    let a_last = log_a.lock().unwrap().acknowledged.last().map(|(t, _)| *t);
    figure(&format!(
        "FAULTS | leader partition | the lease holder's API traffic black-holed; a second replica waiting | B's first write {:.1}s after the cut; A's last acknowledged write {} | A's last write sent {} | A stopped (lost the Lease), 0 writes of A sent after B's first | ok",
        (b_first - cut).as_secs_f64(),
        a_last.map_or("none".to_owned(), |t| if t < cut {
            format!("{:.1}s before the cut", (cut - t).as_secs_f64())
        } else {
            format!("{:.1}s after the cut", (t - cut).as_secs_f64())
        }),
        a_last_sent.map_or("none".to_owned(), |t| if t < cut {
            format!("{:.1}s before the cut", (cut - t).as_secs_f64())
        } else {
            format!("{:.1}s after the cut", (t - cut).as_secs_f64())
        }),
    ));
    // A already stopped itself; this only joins its tasks.
    let _ = a.stop(Duration::from_secs(5));
    assert!(
        b.stop(Duration::from_secs(10)),
        "B's shutdown did not drain"
    );
    trt.block_on(async {
        ns.delete().await;
        let _ = Api::<k8s_openapi::api::core::v1::Namespace>::all(client.clone())
            .delete(&lease_ns, &DeleteParams::default())
            .await;
    });
}
