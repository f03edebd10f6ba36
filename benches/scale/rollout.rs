//! The rollout shape (`scripts/bench-scale.sh rollout N`): N Gateways of the shipped class
//! (HTTPS with a generated certificate, one HTTPRoute each, readiness simulated) converged,
//! then a blueprint change that replaces every Gateway's certificate (a new make-before-
//! break version: `rollout.fields` of the certificate template gains `spec.issuerRef`)
//! rolled out with waves of 1 %, 10 %, 50 % and 100 % of the class in turn (each wave that
//! share, up to the policy's 32 waves, then the rest; no bake), changed back and forth.
//! Per policy: the time from the change to the rollout complete with every Gateway
//! Programmed on the new revision; the largest number of Gateways not Programmed at one
//! time; Certificates ordered per minute (overall, and the busiest minute); write requests
//! per Gateway rolled. Then a revision that does not render, with waves of 1 % and
//! `onFailure: Rollback`: how many Gateways were ever not Programmed, and the time to the
//! rollback. Between them, every Gateway at once under an issuance budget (250 new
//! Certificates per 60 s, `SCALE_ROLLOUT_BUDGET`): the time to complete and the most
//! Certificates seen in any window. `SCALE_ROLLOUT_RUNS` picks the runs (for example
//! `budget,broken`). Figures only, never asserted.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kube::Client;
use kube::runtime::watcher;
use serde_json::{Value, json};

use super::{
    CLASS, Proc, STUCK, View, apiserver_counts, apply, ar, cond, gw_ar, par, programmed,
    route_accepted, rt_ar, simulator, writes_between,
};

const NAMESPACES: usize = 20;

fn gateway(ns: &str, g: usize) -> Value {
    json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
        "metadata": {"name": format!("gw{g}"), "namespace": ns},
        "spec": {"gatewayClassName": CLASS, "listeners": [
            {"name": "https", "port": 443, "protocol": "HTTPS", "hostname": format!("*.g{g}.example.com"),
             "tls": {"options": {"gatewright.dev/certificate": "generated"}}}]}})
}

fn route(ns: &str, g: usize) -> Value {
    json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
        "metadata": {"name": format!("gw{g}-r0"), "namespace": ns},
        "spec": {"parentRefs": [{"name": format!("gw{g}")}], "hostnames": [format!("app.g{g}.example.com")],
                 "rules": [{"backendRefs": [{"name": "primary", "port": 80}]}]}})
}

fn bp_ar() -> kube::api::ApiResource {
    ar(
        "gatewright.dev",
        "v1alpha1",
        "GatewayClassBlueprint",
        "gatewayclassblueprints",
    )
}

/// The shipped blueprint, with `policy` as its rolloutPolicy, and its certificate
/// template's `rollout.fields` widened when `variant` (a new certificate version for
/// every Gateway), or its gateway template broken when `broken`.
fn blueprint(policy: &Value, variant: bool, broken: bool) -> Value {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/gatewayclasses/istio-certmanager-externaldns/blueprint.yaml"
    );
    let text = std::fs::read_to_string(path).unwrap();
    let mut bp = gatewright::render::output::parse_documents(&text)
        .unwrap()
        .remove(0);
    // Left out (not null): the field manager that set it drops it.
    if policy.is_null() {
        bp["spec"].as_object_mut().unwrap().remove("rolloutPolicy");
    } else {
        bp["spec"]["rolloutPolicy"] = policy.clone();
    }
    for t in bp["spec"]["gatewayTemplates"].as_array_mut().unwrap() {
        if t["name"] == "certificate" && variant {
            t["rollout"]["fields"] = json!(["spec.dnsNames", "spec.issuerRef"]);
        }
        if t["name"] == "gateway" && broken {
            let src = t["template"].as_str().unwrap().to_owned();
            t["template"] = json!(format!("{src}\n  broken: [\n"));
        }
    }
    bp
}

/// Waves of `pct` % each, as many as the policy holds (32), the rest after them.
fn waves(pct: u32, rollback: bool) -> Value {
    let n = (100 / pct).clamp(1, 32);
    let waves: Vec<Value> = (0..n).map(|_| json!({"percent": pct})).collect();
    let mut p = json!({"waves": waves});
    if rollback {
        p["onFailure"] = json!("Rollback");
    }
    p
}

/// The revision a Gateway's status says it renders, when it is Programmed on it.
fn programmed_on(g: &Value) -> Option<String> {
    if programmed(g) != Some("True") {
        return None;
    }
    cond(&g["status"]["conditions"], "gatewright.dev/Revision")
        .and_then(|c| c["message"].as_str())
        .and_then(|m| m.split(':').next())
        .map(str::to_owned)
}

fn is_parent(g: &Value) -> bool {
    g["spec"]["gatewayClassName"] == CLASS
}

/// What one rollout measured.
struct Measured {
    done: Option<Duration>,
    max_not_programmed: usize,
    ever_not_programmed: usize,
    certificates: usize,
    busiest_minute: usize,
    /// When each new Certificate was seen, from the change.
    ordered_at: Vec<Duration>,
    writes: u64,
    phase: String,
}

impl Measured {
    /// The most new Certificates seen within any `window` (sliding).
    fn busiest_window(&self, window: Duration) -> usize {
        let mut most = 0;
        let mut first = 0;
        for (last, at) in self.ordered_at.iter().enumerate() {
            while *at - self.ordered_at[first] >= window {
                first += 1;
            }
            most = most.max(last + 1 - first);
        }
        most
    }
}

/// Which runs of the rollout shape to make (`SCALE_ROLLOUT_RUNS`, a comma list of wave
/// percentages, `budget` and `broken`; default every one).
fn runs() -> Vec<String> {
    std::env::var("SCALE_ROLLOUT_RUNS")
        .unwrap_or_else(|_| "1,10,50,100,budget,broken".to_owned())
        .split(',')
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
        .collect()
}

/// The issuance budget of the `budget` run (`SCALE_ROLLOUT_BUDGET`, `<certificates>/<window
/// seconds>`; default 250 per 60 s, so 1,000 Certificates take four windows).
fn budget() -> (u64, u64) {
    std::env::var("SCALE_ROLLOUT_BUDGET")
        .ok()
        .and_then(|v| {
            let (c, w) = v.split_once('/')?;
            Some((c.parse().ok()?, w.parse().ok()?))
        })
        .unwrap_or((250, 60))
}

/// Applies `bp` and follows the rollout of revision `target` until `finished` holds
/// (or `limit` passes), sampling the parent Gateways every 20 ms.
#[allow(clippy::too_many_arguments, reason = "benchmark")]
async fn follow(
    client: &Client,
    gws: &View,
    ordered: &Arc<Mutex<Vec<(String, Instant)>>>,
    bp: &Value,
    n: usize,
    target_on: &dyn Fn(&str) -> bool,
    limit: Duration,
    finished: &dyn Fn(&Value, usize) -> bool,
) -> Measured {
    let before = apiserver_counts(client).await;
    let certs0 = ordered.lock().unwrap().len();
    let mut ever: BTreeSet<String> = BTreeSet::new();
    let mut max_not = 0;
    let t = Instant::now();
    apply(client, &bp_ar(), None, bp, "scale").await;
    let bps = kube::api::Api::<kube::api::DynamicObject>::all_with(client.clone(), &bp_ar());
    let mut done = None;
    let mut phase = String::new();
    while t.elapsed() < limit {
        let all = gws.values();
        let parents: Vec<&Value> = all.iter().filter(|g| is_parent(g)).collect();
        let not: Vec<String> = parents
            .iter()
            .filter(|g| programmed(g) != Some("True"))
            .map(|g| {
                format!(
                    "{}/{}",
                    g["metadata"]["namespace"].as_str().unwrap_or_default(),
                    g["metadata"]["name"].as_str().unwrap_or_default()
                )
            })
            .collect();
        max_not = max_not.max(not.len());
        ever.extend(not);
        let on = parents
            .iter()
            .filter(|g| programmed_on(g).is_some_and(|r| target_on(&r)))
            .count();
        if let Ok(b) = bps.get(CLASS).await {
            let v = serde_json::to_value(&b).unwrap();
            phase = v["status"]["rollout"]["phase"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            if finished(&v, on) && parents.len() == n {
                done = Some(t.elapsed());
                break;
            }
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let after = apiserver_counts(client).await;
    let new: Vec<Instant> = ordered.lock().unwrap()[certs0..]
        .iter()
        .map(|(_, at)| *at)
        .collect();
    let mut per_minute: BTreeMap<u64, usize> = BTreeMap::new();
    for at in &new {
        *per_minute
            .entry(at.saturating_duration_since(t).as_secs() / 60)
            .or_default() += 1;
    }
    Measured {
        done,
        max_not_programmed: max_not,
        ever_not_programmed: ever.len(),
        certificates: new.len(),
        busiest_minute: per_minute.values().copied().max().unwrap_or(0),
        ordered_at: new
            .iter()
            .map(|at| at.saturating_duration_since(t))
            .collect(),
        writes: writes_between(&before, &after).values().sum(),
        phase,
    }
}

pub(super) async fn run(client: &Client, bin: &str, n: usize, conc: usize, port: u16) {
    let ns_ar = ar("", "v1", "Namespace", "namespaces");
    for i in 0..NAMESPACES {
        apply(
            client,
            &ns_ar,
            None,
            &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": format!("roll-{i}")}}),
            "scale",
        )
        .await;
    }
    println!(
        "rollout: N = {n} Gateways (HTTPS, generated certificate, one HTTPRoute each) over {NAMESPACES} namespaces, class {CLASS}"
    );
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!("  load average at start: {}", load.trim());
    // Every Certificate ever seen, in the order they came.
    let ordered: Arc<Mutex<Vec<(String, Instant)>>> = Arc::default();
    let _certs = {
        let ordered = ordered.clone();
        View::follow(
            client,
            &ar("cert-manager.io", "v1", "Certificate", "certificates"),
            watcher::Config::default(),
            move |key, _, old| {
                if old.is_none() {
                    ordered
                        .lock()
                        .unwrap()
                        .push((key.to_owned(), Instant::now()));
                }
            },
        )
    };
    let gws = View::follow(client, &gw_ar(), watcher::Config::default(), |_, _, _| {});
    let routes = View::follow(client, &rt_ar(), watcher::Config::default(), |_, _, _| {});
    simulator(client, Arc::new(AtomicBool::new(false)));
    // The blueprint starts without a policy (the converge is not what is measured).
    apply(
        client,
        &bp_ar(),
        None,
        &blueprint(&json!(null), false, false),
        "scale",
    )
    .await;
    let p = Proc::start(bin, port);
    p.wait_ready().await;
    let t = Instant::now();
    {
        let client = client.clone();
        par(n, conc, move |g| {
            let client = client.clone();
            let ns = format!("roll-{}", g % NAMESPACES);
            async move {
                apply(&client, &gw_ar(), Some(&ns), &gateway(&ns, g), "scale").await;
                apply(&client, &rt_ar(), Some(&ns), &route(&ns, g), "scale").await;
            }
        })
        .await;
    }
    loop {
        let all = gws.values();
        let done = all
            .iter()
            .filter(|g| is_parent(g) && programmed(g) == Some("True"))
            .count();
        let accepted = routes
            .values()
            .iter()
            .filter(|r| {
                r["metadata"]["name"]
                    .as_str()
                    .is_some_and(|n| !n.ends_with("-istio"))
                    && route_accepted(r)
            })
            .count();
        if done == n && accepted == n {
            break;
        }
        assert!(
            t.elapsed() < STUCK,
            "no convergence: {done}/{n} Programmed, {accepted} Accepted"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    println!("  converged in {:.1} s", t.elapsed().as_secs_f64());
    tokio::time::sleep(Duration::from_secs(3)).await;

    println!(
        "  {:<10} {:>12} {:>18} {:>14} {:>16} {:>18}",
        "waves of",
        "complete",
        "max not Programmed",
        "Certificates",
        "busiest minute",
        "writes per Gateway"
    );
    let mut variant = false;
    let limit = Duration::from_secs(env_secs("SCALE_ROLLOUT_LIMIT", 1200));
    let runs = runs();
    for pct in [1, 10, 50, 100] {
        if !runs.contains(&pct.to_string()) {
            continue;
        }
        variant = !variant;
        let bp = blueprint(&waves(pct, false), variant, false);
        let m = follow_newest(client, &gws, &ordered, &bp, n, limit).await;
        println!(
            "  {:<10} {:>12} {:>18} {:>14} {:>16} {:>18.1}",
            format!("{pct} %"),
            m.done.map_or_else(
                || format!("not in {limit:?} ({})", m.phase),
                |d| format!("{:.1} s", d.as_secs_f64())
            ),
            m.max_not_programmed,
            format!(
                "{} ({:.0}/min)",
                m.certificates,
                m.done
                    .map_or(0.0, |d| m.certificates as f64 / d.as_secs_f64().max(1.0)
                        * 60.0)
            ),
            m.busiest_minute,
            m.writes as f64 / n as f64
        );
        tokio::time::sleep(Duration::from_secs(3)).await;
    }
    if runs.iter().any(|r| r == "budget") {
        variant = !variant;
        budgeted(client, &gws, &ordered, n, variant, limit).await;
    }
    if runs.iter().any(|r| r == "broken") {
        broken(client, &gws, &ordered, n, variant, limit).await;
    }
    let (rss, peak) = p.rss();
    println!(
        "  controller RSS {rss:.1} MiB (peak {peak:.1} MiB), CPU {:.1} s",
        p.cpu()
    );
    p.stop();
}

/// Applies `bp` and follows the rollout of its newest revision (whatever the class's
/// status names once applied) until it is complete with every Gateway Programmed on it.
async fn follow_newest(
    client: &Client,
    gws: &View,
    ordered: &Arc<Mutex<Vec<(String, Instant)>>>,
    bp: &Value,
    n: usize,
    limit: Duration,
) -> Measured {
    let want: Arc<Mutex<Option<String>>> = Arc::default();
    let want_get = want.clone();
    follow(
        client,
        gws,
        ordered,
        bp,
        n,
        &move |r| want_get.lock().unwrap().as_deref() == Some(r),
        limit,
        &move |v, on| {
            let r = v["status"]["rollout"]["revision"]
                .as_str()
                .map(str::to_owned);
            let current = v["status"]["currentRevision"].as_str().map(str::to_owned);
            if r.is_some() && r == current {
                want.lock().unwrap().clone_from(&r);
            }
            v["status"]["rollout"]["phase"] == "Complete" && r.is_some() && r == current && on == n
        },
    )
    .await
}

/// Every Gateway at once under an issuance budget: the Certificates seen per window.
async fn budgeted(
    client: &Client,
    gws: &View,
    ordered: &Arc<Mutex<Vec<(String, Instant)>>>,
    n: usize,
    variant: bool,
    limit: Duration,
) {
    let (certificates, window) = budget();
    let mut policy = waves(100, false);
    policy["issuanceBudget"] = json!({"certificates": certificates, "windowSeconds": window});
    let bp = blueprint(&policy, variant, false);
    let m = follow_newest(client, gws, ordered, &bp, n, limit).await;
    let w = Duration::from_secs(window);
    // When they were created: per 10 s from the change.
    let mut per_10s: BTreeMap<u64, usize> = BTreeMap::new();
    for at in &m.ordered_at {
        *per_10s.entry(at.as_secs() / 10 * 10).or_default() += 1;
    }
    let timeline: Vec<String> = per_10s.iter().map(|(s, c)| format!("{s}s:{c}")).collect();
    println!(
        "  budget {certificates} Certificates per {window} s, every Gateway at once: complete after {}; {} Certificates ({:.0}/min); most seen in any {window} s: {}; most not Programmed at once: {}; {:.1} writes per Gateway",
        m.done.map_or_else(
            || format!("not in {limit:?} ({})", m.phase),
            |d| format!("{:.1} s", d.as_secs_f64())
        ),
        m.certificates,
        m.done
            .map_or(0.0, |d| m.certificates as f64 / d.as_secs_f64().max(1.0)
                * 60.0),
        m.busiest_window(w),
        m.max_not_programmed,
        m.writes as f64 / n as f64
    );
    println!(
        "    Certificates created per 10 s from the change: {}",
        timeline.join(" ")
    );
    tokio::time::sleep(Duration::from_secs(3)).await;
}

/// A revision that does not render, waves of 1 %, rolled back.
async fn broken(
    client: &Client,
    gws: &View,
    ordered: &Arc<Mutex<Vec<(String, Instant)>>>,
    n: usize,
    variant: bool,
    limit: Duration,
) {
    let bp = blueprint(&waves(1, true), variant, true);
    let m = follow(client, gws, ordered, &bp, n, &|_| true, limit, &|v, _| {
        v["status"]["rollout"]["phase"] == "RolledBack"
    })
    .await;
    // Until every Gateway of the first wave is back and Programmed.
    let t = Instant::now();
    while gws
        .values()
        .iter()
        .any(|g| is_parent(g) && programmed(g) != Some("True"))
        && t.elapsed() < STUCK
    {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    println!(
        "  broken revision, waves of 1 % (first wave {}), onFailure Rollback: rolled back after {}; Gateways ever not Programmed: {} (at most {} at once); all Programmed again {:.1} s later",
        n.div_ceil(100),
        m.done.map_or_else(
            || format!("not in {limit:?} ({})", m.phase),
            |d| format!("{:.1} s", d.as_secs_f64())
        ),
        m.ever_not_programmed,
        m.max_not_programmed,
        t.elapsed().as_secs_f64()
    );
}

fn env_secs(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}
