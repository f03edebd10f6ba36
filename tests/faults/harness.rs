//! The fault tests' world and its invariants: a class, Gateways and routes in a namespace;
//! a controller on a runtime of its own (through a fault proxy); the local cluster's
//! components restarted and etcd compacted; deletions recorded by a watch; the children
//! read back and compared with those of a healthy run.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt as _;
use gatewright::controller::{Options, Runner};
use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, ListParams};
use kube::runtime::WatchStreamExt as _;
use kube::runtime::watcher;
use serde_json::Value;

use crate::common::{apply_yaml, shipped_class_yaml};

/// The child kinds of the istio-certmanager-externaldns class: (group, version, kind, plural).
pub const CHILD_KINDS: &[(&str, &str, &str, &str)] = &[
    ("cert-manager.io", "v1", "Certificate", "certificates"),
    ("gateway.networking.k8s.io", "v1", "Gateway", "gateways"),
    ("gateway.networking.k8s.io", "v1", "HTTPRoute", "httproutes"),
    (
        "externaldns.k8s.io",
        "v1alpha1",
        "DNSEndpoint",
        "dnsendpoints",
    ),
];
const OURS: &str = "app.kubernetes.io/managed-by=gatewright";

/// The local cluster's state dir, when the tests run on the local harness (the restart
/// and partition tests need it: they stop and start its processes).
pub fn cluster_dir() -> Option<PathBuf> {
    std::env::var_os("GATEWRIGHT_CLUSTER_DIR")
        .map(PathBuf::from)
        .filter(|d| d.join(".gatewright-cluster").exists() && d.join("kube-apiserver.cmd").exists())
}

/// Runs `tests/cluster/restart` with `args`; panics when it fails.
pub fn restart(args: &[&str]) {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/cluster/restart");
    let out = std::process::Command::new(script)
        .args(args)
        .output()
        .expect("run tests/cluster/restart");
    assert!(
        out.status.success(),
        "restart {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// [`restart`] on a thread: returns when the component is stopped (or after `after`).
pub fn restart_in_background(args: Vec<String>) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let a: Vec<&str> = args.iter().map(String::as_str).collect();
        restart(&a);
    })
}

/// etcd's client URL, from the command line `up` recorded.
fn etcd_url(dir: &std::path::Path) -> String {
    let cmd = std::fs::read_to_string(dir.join("etcd.cmd")).unwrap();
    let mut lines = cmd.lines();
    while let Some(l) = lines.next() {
        if l == "--listen-client-urls" {
            return lines.next().unwrap().to_owned();
        }
    }
    panic!("no --listen-client-urls in etcd.cmd")
}

fn curl_json(url: &str, body: &str) -> Value {
    let out = std::process::Command::new("curl")
        .args(["-sf", "-X", "POST", "-d", body, url])
        .output()
        .expect("curl");
    assert!(out.status.success(), "POST {url} failed");
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Compacts etcd's history up to its current revision (through its JSON gateway): every
/// watch that resumes from an older resourceVersion gets 410 Gone. Returns the revision.
pub fn compact_etcd(dir: &std::path::Path) -> i64 {
    let url = etcd_url(dir);
    let r = curl_json(&format!("{url}/v3/kv/range"), r#"{"key":"AA=="}"#);
    let rev: i64 = r["header"]["revision"].as_str().unwrap().parse().unwrap();
    curl_json(
        &format!("{url}/v3/kv/compaction"),
        &format!(r#"{{"revision":"{rev}","physical":true}}"#),
    );
    rev
}

/// Write requests (any write verb) the API server counted (`apiserver_request_total`) on
/// the main resource of Certificates and DNSEndpoints: only the controller writes those
/// (the tests write Gateways and routes, and the children's status). Counters restart
/// with the API server.
pub async fn server_child_writes(client: &Client) -> u64 {
    let req = http::Request::get("/metrics").body(Vec::new()).unwrap();
    let text = client.request_text(req).await.unwrap();
    let mut n = 0u64;
    for line in text.lines() {
        let Some(rest) = line.strip_prefix("apiserver_request_total{") else {
            continue;
        };
        let Some((labels, count)) = rest.rsplit_once("} ") else {
            continue;
        };
        let label = |name: &str| {
            labels
                .split(',')
                .find_map(|l| l.strip_prefix(&format!("{name}=\"")))
                .map(|v| v.trim_end_matches('"').to_owned())
                .unwrap_or_default()
        };
        let write = matches!(
            label("verb").as_str(),
            "POST" | "PUT" | "PATCH" | "APPLY" | "DELETE"
        );
        if write
            && matches!(label("resource").as_str(), "certificates" | "dnsendpoints")
            && label("subresource").is_empty()
        {
            n += count.trim().parse::<f64>().unwrap_or(0.0) as u64;
        }
    }
    n
}

fn child_api(
    client: &Client,
    ns: &str,
    (g, v, k, p): (&str, &str, &str, &str),
) -> Api<DynamicObject> {
    Api::namespaced_with(
        client.clone(),
        ns,
        &ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(g, v, k), p),
    )
}

/// Our children in `ns` not being deleted, as sorted `Kind/name` (duplicates kept), and
/// the `Kind/name` of those whose Gateway UID label names no Gateway of `ns` (orphans).
pub async fn children(client: &Client, ns: &str) -> (Vec<String>, Vec<String>) {
    let gws: BTreeSet<String> = child_api(client, ns, CHILD_KINDS[1])
        .list(&ListParams::default())
        .await
        .unwrap()
        .into_iter()
        .filter_map(|g| g.metadata.uid)
        .collect();
    let (mut all, mut orphans) = (Vec::new(), Vec::new());
    for k in CHILD_KINDS {
        for o in child_api(client, ns, *k)
            .list(&ListParams::default().labels(OURS))
            .await
            .unwrap()
        {
            if o.metadata.deletion_timestamp.is_some() {
                continue;
            }
            let name = format!("{}/{}", k.2, o.metadata.name.clone().unwrap_or_default());
            let uid = o
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get("gatewright.dev/gateway-uid"))
                .cloned()
                .unwrap_or_default();
            if !gws.contains(&uid) {
                orphans.push(name.clone());
            }
            all.push(name);
        }
    }
    all.sort();
    (all, orphans)
}

/// Every deletion of one of our children in a namespace, seen by a watch (a deletion
/// missed while the watch was down shows as an object gone from the relist).
pub struct Deletions {
    seen: Arc<Mutex<Vec<(Instant, String)>>>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Deletions {
    /// Starts recording in `ns` (on the current runtime).
    pub fn record(client: &Client, ns: &str) -> Self {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let mut tasks = Vec::new();
        for k in CHILD_KINDS {
            let api = child_api(client, ns, *k);
            let seen = seen.clone();
            let kind = k.2;
            tasks.push(tokio::spawn(async move {
                let cfg = watcher::Config::default().labels(OURS);
                let mut known: BTreeSet<String> = BTreeSet::new();
                let mut relisted: BTreeSet<String> = BTreeSet::new();
                let mut s = watcher(api, cfg).default_backoff().boxed();
                let key = |o: &DynamicObject| {
                    format!("{kind}/{}", o.metadata.name.clone().unwrap_or_default())
                };
                while let Some(ev) = s.next().await {
                    let Ok(ev) = ev else { continue };
                    match ev {
                        watcher::Event::Apply(o) | watcher::Event::InitApply(o)
                            if o.metadata.deletion_timestamp.is_some() =>
                        {
                            seen.lock().unwrap().push((Instant::now(), key(&o)));
                            relisted.insert(key(&o));
                        }
                        watcher::Event::Apply(o) => {
                            known.insert(key(&o));
                        }
                        watcher::Event::Delete(o) => {
                            known.remove(&key(&o));
                            seen.lock().unwrap().push((Instant::now(), key(&o)));
                        }
                        watcher::Event::Init => relisted.clear(),
                        watcher::Event::InitApply(o) => {
                            relisted.insert(key(&o));
                        }
                        watcher::Event::InitDone => {
                            let mut s = seen.lock().unwrap();
                            for gone in known.difference(&relisted) {
                                s.push((Instant::now(), gone.clone()));
                            }
                            known = std::mem::take(&mut relisted);
                        }
                    }
                }
            }));
        }
        Self { seen, tasks }
    }

    /// The children deleted (or put in deletion) so far.
    pub fn seen(&self) -> BTreeSet<String> {
        self.seen
            .lock()
            .unwrap()
            .iter()
            .map(|(_, k)| k.clone())
            .collect()
    }

    /// The children deleted (or put in deletion) from `from` on, before `to`.
    pub fn between(&self, from: Instant, to: Option<Instant>) -> BTreeSet<String> {
        self.seen
            .lock()
            .unwrap()
            .iter()
            .filter(|(t, _)| *t >= from && to.is_none_or(|to| *t < to))
            .map(|(_, k)| k.clone())
            .collect()
    }
}

impl Drop for Deletions {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

/// A class of the istio-certmanager-externaldns blueprint named `class`.
pub async fn install_class(client: &Client, class: &str) {
    let text = shipped_class_yaml("istio-certmanager-externaldns", class);
    apply_yaml(client, &text).await;
}

/// Gateway `gw{i}` (an HTTPS listener on `*.g{i}.<domain>`, its certificate generated by
/// the class, so the child Gateway's listener names the Certificate's Secret) and its
/// routes `gw{i}-r{j}`.
pub fn world_yaml(ns: &str, class: &str, gateways: usize, routes: usize, domain: &str) -> String {
    let mut out = String::new();
    for i in 0..gateways {
        out.push_str(&format!(
            "apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {{name: gw{i}, namespace: {ns}}}\nspec:\n  gatewayClassName: {class}\n  listeners:\n  - {{name: https, port: 443, protocol: HTTPS, hostname: \"*.g{i}.{domain}\", tls: {{mode: Terminate, options: {{gatewright.dev/certificate: generated}}}}}}\n---\n"
        ));
        for j in 0..routes {
            out.push_str(&format!(
                "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {{name: gw{i}-r{j}, namespace: {ns}}}\nspec:\n  parentRefs: [{{name: gw{i}}}]\n  hostnames: [r{j}.g{i}.{domain}]\n  rules: [{{backendRefs: [{{name: svc, port: 80}}]}}]\n---\n"
            ));
        }
    }
    out
}

/// A controller on a runtime of its own; dropping it kills it (no clean-up), and
/// [`Running::stop`] shuts it down cleanly.
pub struct Running {
    pub rt: Option<tokio::runtime::Runtime>,
    pub ctl: Arc<Runner>,
}

impl Running {
    /// Starts a controller with `client` (built on the controller's runtime by `make`).
    pub fn start<F, Fut>(opts: Options, make: F) -> Self
    where
        F: FnOnce() -> Fut,
        Fut: std::future::Future<Output = Client>,
    {
        if let Ok(filter) = std::env::var("GATEWRIGHT_TEST_LOG") {
            // GATEWRIGHT_TEST_LOG=gatewright=debug: the controller's log on stderr.
            let _ = tracing_subscriber::fmt()
                .with_env_filter(filter)
                .with_writer(std::io::stderr)
                .try_init();
        }
        let rt = tokio::runtime::Runtime::new().unwrap();
        let ctl = rt.block_on(async {
            let client = make().await;
            gatewright::controller::start(client, opts).await.unwrap()
        });
        Self { rt: Some(rt), ctl }
    }

    /// The one shutdown path; returns whether it drained within `grace`.
    pub fn stop(mut self, grace: Duration) -> bool {
        let rt = self.rt.take().unwrap();
        let ok = rt.block_on(self.ctl.shutdown(grace));
        rt.shutdown_timeout(Duration::from_secs(2));
        ok
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(rt) = self.rt.take() {
            rt.shutdown_background();
        }
    }
}

/// Options for a test controller: short request deadline, no leader election.
pub fn options(controller_namespace: &str) -> Options {
    let mut o = Options {
        controller_namespace: controller_namespace.into(),
        ..Options::default()
    };
    o.api.request_timeout = Duration::from_secs(3);
    o
}

/// Waits until the children of `ns` are `expected` with no orphan, and every Gateway is
/// Programmed (after marking children ready as their controllers would). Returns the time
/// it took.
pub async fn converge(
    client: &Client,
    ns: &str,
    expected: &[String],
    timeout: Duration,
) -> Duration {
    let began = Instant::now();
    loop {
        let _ = gatewright::simulate::simulate_ready_where(
            client,
            Some(ns),
            gatewright::simulate::Play::All,
        )
        .await;
        let (now, orphans) = children(client, ns).await;
        if now == expected && orphans.is_empty() {
            return began.elapsed();
        }
        if began.elapsed() > timeout {
            let missing: Vec<&String> = expected.iter().filter(|e| !now.contains(e)).collect();
            let extra: Vec<&String> = now.iter().filter(|n| !expected.contains(n)).collect();
            panic!(
                "timed out after {timeout:?} waiting for the children of {ns} to converge: \
                 missing {missing:?}, extra {extra:?}, orphans {orphans:?} ({} now, {} expected)",
                now.len(),
                expected.len()
            );
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Whether every Gateway of `ns` that is not our child says `Programmed=True` for its
/// current generation.
pub async fn all_programmed(client: &Client, ns: &str) -> bool {
    let gws = child_api(client, ns, CHILD_KINDS[1])
        .list(&ListParams::default())
        .await;
    let Ok(gws) = gws else { return false };
    gws.into_iter()
        .filter(|g| {
            g.metadata
                .labels
                .as_ref()
                .is_none_or(|l| !l.contains_key("app.kubernetes.io/managed-by"))
        })
        .all(|g| {
            let generation = g.metadata.generation.unwrap_or_default();
            g.data["status"]["conditions"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|c| {
                    c["type"] == "Programmed"
                        && c["status"] == "True"
                        && c["observedGeneration"].as_i64() == Some(generation)
                })
        })
}

/// Waits until the world in `ns` has settled, marking children ready as their
/// controllers would: every Gateway Programmed and the children unchanged for 2 s (so a
/// make-before-break replacement has finished). Returns the children (as [`children`]).
pub async fn settle(client: &Client, ns: &str, timeout: Duration) -> Vec<String> {
    let began = Instant::now();
    let mut last: Option<(Vec<String>, Instant)> = None;
    loop {
        let _ = gatewright::simulate::simulate_ready_where(
            client,
            Some(ns),
            gatewright::simulate::Play::All,
        )
        .await;
        let (now, orphans) = children(client, ns).await;
        let programmed = all_programmed(client, ns).await;
        match &last {
            Some((prev, since)) if *prev == now => {
                if programmed && orphans.is_empty() && since.elapsed() >= Duration::from_secs(2) {
                    return now;
                }
            }
            _ => last = Some((now, Instant::now())),
        }
        assert!(
            began.elapsed() < timeout,
            "timed out after {timeout:?} waiting for {ns} to settle (children {:?}, all Programmed: {programmed}, orphans {orphans:?})",
            last.as_ref().map(|l| &l.0)
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
