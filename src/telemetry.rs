//! Metrics, `/healthz` and `/readyz`, served on one address.
//!
//! In: the controller counts what it does ([`Metrics`]: reconciles with their duration,
//! plans, applies, prunes, status writes, the work queue) and the counting client
//! ([`counting_client`]) counts and times every request sent to the API server. Gauges
//! of the controller's state (Gateways by `Programmed`, replacements in progress and
//! stuck, hung deletions, watched child kinds) are read at scrape time from a
//! [`StateSource`]. Out: the Prometheus text format (0.0.4, with `HELP` and `TYPE`),
//! encoded by `prometheus-client` and served over HTTP/1.1 by hyper ([`serve`]).
//!
//! Every metric is named `gatewright_*`; durations are histograms in seconds
//! (`*_seconds`), counters end in `_total`. The list is in docs/metrics.md.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::{Duration, Instant};

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::counter::{ConstCounter, Counter};
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// The `Content-Type` of `/metrics`.
pub const CONTENT_TYPE: &str = prometheus_client::encoding::prometheus_text::CONTENT_TYPE;

/// Errors of the metrics server.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The listen address cannot be bound.
    #[error("failed to listen on {addr} for metrics and health: {source}")]
    Bind {
        /// The address asked for.
        addr: String,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
}

/// Labels of a reconcile: the kind of the work item and how it ended (`Ok` or an error
/// category).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReconcileLabels {
    kind: String,
    result: String,
}

/// Labels of a reconcile counter (kept as `category` for compatibility).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CategoryLabels {
    kind: String,
    category: String,
}

/// Labels of an API request latency: the HTTP method.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct VerbLabels {
    verb: String,
}

fn reconcile_histogram() -> Histogram {
    // 5 ms .. ~82 s.
    Histogram::new(exponential_buckets(0.005, 2.0, 15))
}

fn api_histogram() -> Histogram {
    // 2 ms .. ~16 s.
    Histogram::new(exponential_buckets(0.002, 2.0, 14))
}

/// The controller's state as the gauges show it, read at scrape time.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct State {
    /// Gateways handled by this process, by their `Programmed` condition: `(status,
    /// reason)` -> count (`("Unknown", "Pending")` for one not reported yet).
    pub gateways: BTreeMap<(String, String), u64>,
    /// Make-before-break replacements under way (including the stuck ones).
    pub rollouts_in_progress: u64,
    /// Replacements past their timeout (the new version not ready, or the switch not done).
    pub rollouts_stuck: u64,
    /// Children whose deletion hangs during a Gateway's teardown (past the stuck limit).
    pub deletions_stuck: u64,
    /// Child kinds watched (or being looked up) now.
    pub watched_child_kinds: u64,
}

/// Where the state gauges come from (the controller).
pub trait StateSource: Send + Sync {
    /// The state now.
    fn state(&self) -> State;
}

/// The controller's counters, histograms and gauges.
#[derive(Debug)]
pub struct Metrics {
    /// Reconciles by kind and outcome category.
    reconciles: Family<CategoryLabels, Counter>,
    /// Reconciles that ended in an error, by (kind, category); exported with its HELP
    /// and TYPE even before the first error, so that queries always find the family.
    reconcile_errors: Mutex<BTreeMap<(String, String), u64>>,
    /// Reconcile duration by kind and result.
    reconcile_duration: Family<ReconcileLabels, Histogram, fn() -> Histogram>,
    /// Plan (render) duration.
    plan_duration: Histogram,
    /// API request latency (to the response's headers) by verb; watches left out.
    api_duration: Family<VerbLabels, Histogram, fn() -> Histogram>,
    /// API requests that failed, by (verb, code); exported like `reconcile_errors`.
    api_errors: Mutex<BTreeMap<(String, String), u64>>,
    /// Server-side applies sent.
    pub applies: AtomicU64,
    /// Applies skipped because the live object already held what we render.
    pub applies_skipped: AtomicU64,
    /// Children deleted.
    pub prunes: AtomicU64,
    /// Status writes sent.
    pub status_writes: AtomicU64,
    /// Blueprint rollouts that halted (or rolled back) because a wave's gate did not hold.
    pub rollouts_halted: AtomicU64,
    /// Route plans a Gateway's plan reused from its memo (see [`crate::plan::memo`]).
    pub route_plans_reused: AtomicU64,
    /// Route plans made (rendered).
    pub route_plans_made: AtomicU64,
    /// Keys waiting in the work queue.
    pub queue_depth: AtomicU64,
    /// Gateway and route watch events that changed only status: stored, nothing planned.
    pub status_only_events: AtomicU64,
    /// Set once every watch has listed its objects.
    pub ready: AtomicBool,
    /// Start-up steps: `/readyz` is 200 only once every one has succeeded (and `ready`).
    pub startup: crate::health::Steps,
    /// Set while this process may write: it holds the lease, or runs without leader
    /// election.
    pub leader: AtomicBool,
    /// Requests sent to the API server, counted at the HTTP layer: by (verb, resource).
    api_requests: Mutex<BTreeMap<(String, String), u64>>,
    /// Write requests (POST, PUT, PATCH, DELETE) by namespace ("" for cluster-scoped).
    api_writes_by_namespace: Mutex<BTreeMap<String, u64>>,
    /// Fleet mode: each member cluster (its ClusterProfile, `namespace/name`) and its state
    /// (`engaged`, `waiting`, `failed`).
    fleet_members: Mutex<BTreeMap<String, &'static str>>,
    /// The controller, for the state gauges.
    source: OnceLock<Weak<dyn StateSource>>,
    /// Where [`serve`] listens.
    served_at: OnceLock<std::net::SocketAddr>,
}

impl std::fmt::Debug for dyn StateSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("StateSource")
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self {
            reconciles: Family::default(),
            reconcile_errors: Mutex::new(BTreeMap::new()),
            reconcile_duration: Family::new_with_constructor(reconcile_histogram),
            // 0.5 ms .. ~8 s.
            plan_duration: Histogram::new(exponential_buckets(0.0005, 2.0, 15)),
            api_duration: Family::new_with_constructor(api_histogram),
            api_errors: Mutex::new(BTreeMap::new()),
            applies: AtomicU64::new(0),
            applies_skipped: AtomicU64::new(0),
            prunes: AtomicU64::new(0),
            status_writes: AtomicU64::new(0),
            rollouts_halted: AtomicU64::new(0),
            route_plans_reused: AtomicU64::new(0),
            route_plans_made: AtomicU64::new(0),
            queue_depth: AtomicU64::new(0),
            status_only_events: AtomicU64::new(0),
            ready: AtomicBool::new(false),
            startup: crate::health::Steps::default(),
            leader: AtomicBool::new(false),
            api_requests: Mutex::new(BTreeMap::new()),
            api_writes_by_namespace: Mutex::new(BTreeMap::new()),
            fleet_members: Mutex::new(BTreeMap::new()),
            source: OnceLock::new(),
            served_at: OnceLock::new(),
        }
    }
}

fn is_write(method: &str) -> bool {
    matches!(method, "POST" | "PUT" | "PATCH" | "DELETE")
}

impl Metrics {
    /// Fleet mode: the members and their states, as the inventory last judged them.
    pub fn set_fleet_members(&self, members: BTreeMap<String, &'static str>) {
        if let Ok(mut m) = self.fleet_members.lock() {
            *m = members;
        }
    }

    /// Fleet mode: each member (`namespace/name` of its ClusterProfile) and its state.
    #[must_use]
    pub fn fleet_members(&self) -> BTreeMap<String, &'static str> {
        self.fleet_members
            .lock()
            .map(|m| m.clone())
            .unwrap_or_default()
    }

    /// Reads the state gauges from `source` at each scrape (the first one set stays).
    pub fn set_state_source(&self, source: Weak<dyn StateSource>) {
        let _ = self.source.set(source);
    }

    /// The address `/metrics` is served on, once [`serve`] has started.
    #[must_use]
    pub fn served_at(&self) -> Option<std::net::SocketAddr> {
        self.served_at.get().copied()
    }

    /// Records a reconcile of `kind` that ended in `category` (`Ok` or an error category)
    /// after `elapsed`.
    pub fn reconciled(&self, kind: &str, category: &str, elapsed: Duration) {
        let labels = CategoryLabels {
            kind: kind.to_owned(),
            category: category.to_owned(),
        };
        self.reconciles.get_or_create(&labels).inc();
        if category != "Ok"
            && let Ok(mut m) = self.reconcile_errors.lock()
        {
            *m.entry((kind.to_owned(), category.to_owned())).or_default() += 1;
        }
        self.reconcile_duration
            .get_or_create(&ReconcileLabels {
                kind: kind.to_owned(),
                result: category.to_owned(),
            })
            .observe(elapsed.as_secs_f64());
    }

    /// Counts the route plans one Gateway's plan reused and made.
    pub fn route_plans(&self, counts: crate::plan::memo::MemoCounts) {
        self.route_plans_reused
            .fetch_add(counts.reused as u64, Ordering::Relaxed);
        self.route_plans_made
            .fetch_add(counts.planned as u64, Ordering::Relaxed);
    }

    /// Records one plan that took `elapsed`.
    pub fn planned(&self, elapsed: Duration) {
        self.plan_duration.observe(elapsed.as_secs_f64());
    }

    /// Counts one request as it leaves for the API server.
    pub fn api_request(&self, method: &str, path: &str) {
        let (namespace, resource) = split_api_path(path);
        if let Ok(mut m) = self.api_requests.lock() {
            *m.entry((method.to_owned(), resource.to_owned()))
                .or_default() += 1;
        }
        if is_write(method)
            && let Ok(mut m) = self.api_writes_by_namespace.lock()
        {
            *m.entry(namespace.to_owned()).or_default() += 1;
        }
    }

    /// Records how a request ended: its latency up to the response's headers (unless it
    /// is a watch, whose response streams for minutes), and an error when the response is
    /// one (`code` 400 and up) or never came (`None`).
    pub fn api_response(&self, method: &str, watch: bool, code: Option<u16>, elapsed: Duration) {
        if !watch {
            self.api_duration
                .get_or_create(&VerbLabels {
                    verb: method.to_owned(),
                })
                .observe(elapsed.as_secs_f64());
        }
        let code = match code {
            Some(c) if c < 400 => return,
            Some(c) => c.to_string(),
            None => "transport".to_owned(),
        };
        if let Ok(mut m) = self.api_errors.lock() {
            *m.entry((method.to_owned(), code)).or_default() += 1;
        }
    }

    /// Write requests sent so far, counted at the HTTP layer, except Lease renewals (leader
    /// election writes on its own schedule, not because of a reconcile).
    #[must_use]
    pub fn writes(&self) -> u64 {
        self.api_requests.lock().map_or(0, |m| {
            m.iter()
                .filter(|((verb, resource), _)| is_write(verb) && resource != "leases")
                .map(|(_, n)| n)
                .sum()
        })
    }

    /// Requests sent so far with HTTP method `verb` to `resource` (a plural, such as
    /// `certificates`; a subresource counts as its resource), counted at the HTTP layer.
    #[must_use]
    pub fn requests(&self, verb: &str, resource: &str) -> u64 {
        self.api_requests.lock().map_or(0, |m| {
            m.get(&(verb.to_owned(), resource.to_owned()))
                .copied()
                .unwrap_or_default()
        })
    }

    /// Write requests sent so far to objects in `namespace` ("" for cluster-scoped ones),
    /// counted at the HTTP layer.
    #[must_use]
    pub fn writes_in_namespace(&self, namespace: &str) -> u64 {
        self.api_writes_by_namespace
            .lock()
            .map_or(0, |m| m.get(namespace).copied().unwrap_or_default())
    }

    /// The Prometheus text exposition (format 0.0.4).
    #[must_use]
    pub fn render(&self) -> String {
        let mut registry = Registry::default();
        registry.register(
            "gatewright_reconciles",
            "Reconciles by kind (Gateway, GatewayClass, HTTPRoute, GatewayClassBlueprint) and category (Ok or the error category)",
            self.reconciles.clone(),
        );
        registry.register(
            "gatewright_reconcile_duration_seconds",
            "Time one reconcile took, by kind and result",
            self.reconcile_duration.clone(),
        );
        registry.register(
            "gatewright_plan_duration_seconds",
            "Time one plan (render of a Gateway and its routes) took",
            self.plan_duration.clone(),
        );
        registry.register(
            "gatewright_api_request_duration_seconds",
            "Latency of requests to the API server up to the response headers, by HTTP method (watches left out)",
            self.api_duration.clone(),
        );
        let state = self
            .source
            .get()
            .and_then(Weak::upgrade)
            .map(|s| s.state())
            .unwrap_or_default();
        registry.register_collector(Box::new(Scrape {
            api_requests: self
                .api_requests
                .lock()
                .map(|m| m.clone())
                .unwrap_or_default(),
            reconcile_errors: self
                .reconcile_errors
                .lock()
                .map(|m| m.clone())
                .unwrap_or_default(),
            api_errors: self
                .api_errors
                .lock()
                .map(|m| m.clone())
                .unwrap_or_default(),
            startup_errors: self.startup.errors(),
            fleet_members: self.fleet_members(),
            startup_waiting: u64::try_from(self.startup.waiting()).unwrap_or(u64::MAX),
            counters: [
                self.applies.load(Ordering::Relaxed),
                self.prunes.load(Ordering::Relaxed),
                self.status_writes.load(Ordering::Relaxed),
                self.applies_skipped.load(Ordering::Relaxed),
                self.status_only_events.load(Ordering::Relaxed),
                self.route_plans_reused.load(Ordering::Relaxed),
                self.route_plans_made.load(Ordering::Relaxed),
                self.rollouts_halted.load(Ordering::Relaxed),
            ],
            queue_depth: self.queue_depth.load(Ordering::Relaxed),
            ready: self.ready.load(Ordering::Relaxed),
            leader: self.leader.load(Ordering::Relaxed),
            state,
        }));
        let mut out = String::new();
        // Writing to a String cannot fail; a collector of ours never returns an error.
        if let Err(e) = prometheus_client::encoding::prometheus_text::encode(&mut out, &registry) {
            tracing::error!(error = %e, "failed to encode the metrics");
        }
        out
    }
}

/// What one scrape reads from atomics and the controller's state, encoded as constant
/// metrics.
#[derive(Debug)]
struct Scrape {
    api_requests: BTreeMap<(String, String), u64>,
    reconcile_errors: BTreeMap<(String, String), u64>,
    api_errors: BTreeMap<(String, String), u64>,
    startup_errors: BTreeMap<(String, String), u64>,
    fleet_members: BTreeMap<String, &'static str>,
    startup_waiting: u64,
    /// applies, prunes, status writes, applies skipped, status-only events.
    counters: [u64; 8],
    queue_depth: u64,
    ready: bool,
    leader: bool,
    state: State,
}

fn gauge(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    value: u64,
) -> Result<(), std::fmt::Error> {
    let g = ConstGauge::new(i64::try_from(value).unwrap_or(i64::MAX));
    let m = encoder.encode_descriptor(name, help, None, g.metric_type())?;
    g.encode(m)
}

fn counter(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    value: u64,
) -> Result<(), std::fmt::Error> {
    let c = ConstCounter::new(value);
    let m = encoder.encode_descriptor(name, help, None, c.metric_type())?;
    c.encode(m)
}

/// A labelled counter family from a map: its HELP and TYPE even while it has no series.
fn counter_family(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    keys: [&str; 2],
    values: &BTreeMap<(String, String), u64>,
) -> Result<(), std::fmt::Error> {
    let c = ConstCounter::new(0u64);
    let mut m = encoder.encode_descriptor(name, help, None, c.metric_type())?;
    for ((a, b), n) in values {
        let labels = [(keys[0], a.as_str()), (keys[1], b.as_str())];
        ConstCounter::new(*n).encode(m.encode_family(&labels)?)?;
    }
    Ok(())
}

impl Collector for Scrape {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let [
            applies,
            prunes,
            status_writes,
            skipped,
            status_only,
            plans_reused,
            plans_made,
            halted,
        ] = self.counters;
        counter_family(
            &mut encoder,
            "gatewright_reconcile_errors",
            "Reconciles that ended in an error, by kind and error category (Deleting: waiting for children to go)",
            ["kind", "category"],
            &self.reconcile_errors,
        )?;
        counter_family(
            &mut encoder,
            "gatewright_api_request_errors",
            "Requests to the API server that failed, by HTTP method and status code (transport: no response)",
            ["verb", "code"],
            &self.api_errors,
        )?;
        counter_family(
            &mut encoder,
            "gatewright_startup_errors",
            "Failures of start-up steps (leader election set-up, the first list of a watch), by step and reason (Forbidden, NotFound, Unreachable, ...); each is retried",
            ["step", "reason"],
            &self.startup_errors,
        )?;
        {
            let g = ConstGauge::new(0i64);
            let mut m = encoder.encode_descriptor(
                "gatewright_fleet_members",
                "Fleet mode: the member clusters the hub's ClusterProfiles list, by cluster (namespace/name of its ClusterProfile) and state (engaged: served; waiting: its control plane not reported healthy; failed: its credentials cannot be built); 1 per member",
                None,
                g.metric_type(),
            )?;
            for (cluster, state) in &self.fleet_members {
                let labels = [("cluster", cluster.as_str()), ("state", *state)];
                ConstGauge::new(1i64).encode(m.encode_family(&labels)?)?;
            }
        }
        gauge(
            &mut encoder,
            "gatewright_startup_steps_pending",
            "Start-up steps that have not succeeded yet (what /readyz waits for, with the caches)",
            self.startup_waiting,
        )?;
        {
            let c = ConstCounter::new(0u64);
            let mut m = encoder.encode_descriptor(
                "gatewright_api_requests",
                "Requests sent to the API server, counted as they leave, by HTTP method and resource",
                None,
                c.metric_type(),
            )?;
            for ((verb, resource), n) in &self.api_requests {
                let labels = [("verb", verb.as_str()), ("resource", resource.as_str())];
                ConstCounter::new(*n).encode(m.encode_family(&labels)?)?;
            }
        }
        {
            let c = ConstCounter::new(0u64);
            let mut m = encoder.encode_descriptor(
                "gatewright_writes",
                "Writes the controller sent, by category: apply (server-side apply of a child), prune (delete of a child), status (status write)",
                None,
                c.metric_type(),
            )?;
            for (category, n) in [
                ("apply", applies),
                ("prune", prunes),
                ("status", status_writes),
            ] {
                ConstCounter::new(n).encode(m.encode_family(&[("category", category)])?)?;
            }
        }
        {
            let c = ConstCounter::new(0u64);
            let mut m = encoder.encode_descriptor(
                "gatewright_route_plans",
                "Route plans by result: reused (a plan of its Gateway found its inputs unchanged) or planned (rendered)",
                None,
                c.metric_type(),
            )?;
            for (result, n) in [("reused", plans_reused), ("planned", plans_made)] {
                ConstCounter::new(n).encode(m.encode_family(&[("result", result)])?)?;
            }
        }
        counter(
            &mut encoder,
            "gatewright_applies_skipped",
            "Applies not sent because the live child already held what the plan renders",
            skipped,
        )?;
        counter(
            &mut encoder,
            "gatewright_rollouts_halted",
            "Blueprint rollouts halted (or rolled back) because a wave's gate did not hold: a revision that does not render, or a wave not Programmed within its progress deadline",
            halted,
        )?;
        counter(
            &mut encoder,
            "gatewright_status_only_events",
            "Gateway and route watch events that were the echo of our own status write: stored, nothing planned",
            status_only,
        )?;
        gauge(
            &mut encoder,
            "gatewright_queue_depth",
            "Work items waiting in the queue",
            self.queue_depth,
        )?;
        gauge(
            &mut encoder,
            "gatewright_caches_synced",
            "1 once every primary watch has listed its objects (/readyz also waits for every start-up step)",
            u64::from(self.ready),
        )?;
        gauge(
            &mut encoder,
            "gatewright_leader",
            "1 while this process may write: it holds the leader lease, or runs without leader election",
            u64::from(self.leader),
        )?;
        {
            let g = ConstGauge::new(0i64);
            let mut m = encoder.encode_descriptor(
                "gatewright_gateways",
                "Gateways this process reconciles, by the status and reason of their Programmed condition",
                None,
                g.metric_type(),
            )?;
            for ((status, reason), n) in &self.state.gateways {
                let labels = [("programmed", status.as_str()), ("reason", reason.as_str())];
                ConstGauge::new(i64::try_from(*n).unwrap_or(i64::MAX))
                    .encode(m.encode_family(&labels)?)?;
            }
        }
        gauge(
            &mut encoder,
            "gatewright_rollouts_in_progress",
            "Make-before-break replacements under way, stuck ones included",
            self.state.rollouts_in_progress,
        )?;
        gauge(
            &mut encoder,
            "gatewright_rollouts_stuck",
            "Replacements past their timeout: the new version is not ready, or what reads it has not switched",
            self.state.rollouts_stuck,
        )?;
        gauge(
            &mut encoder,
            "gatewright_deletions_stuck",
            "Children whose deletion hangs during a Gateway's teardown (longer than --deletion-stuck-seconds)",
            self.state.deletions_stuck,
        )?;
        gauge(
            &mut encoder,
            "gatewright_watched_child_kinds",
            "Child kinds watched (or being looked up) now",
            self.state.watched_child_kinds,
        )?;
        {
            let g = ConstGauge::new(1i64);
            let m = encoder.encode_descriptor(
                "gatewright_build_info",
                "Always 1; the version of the running binary",
                None,
                g.metric_type(),
            )?;
            let mut m = m;
            g.encode(m.encode_family(&[("version", env!("CARGO_PKG_VERSION"))])?)?;
        }
        Ok(())
    }
}

/// The namespace and the resource of an API path (`/api/v1/namespaces/ns/pods/x`,
/// `/apis/group/v1/widgets`); empty strings where the path has none.
#[must_use]
pub fn split_api_path(path: &str) -> (&str, &str) {
    let path = path.split('?').next().unwrap_or_default();
    let mut parts = path.trim_start_matches('/').split('/');
    // Skip "api/v1" or "apis/group/version".
    match parts.next() {
        Some("api") => {
            parts.next();
        }
        Some("apis") => {
            parts.next();
            parts.next();
        }
        _ => return ("", ""),
    }
    match (parts.next(), parts.next(), parts.next()) {
        (Some("namespaces"), Some(ns), Some(resource)) => (ns, resource),
        (Some("namespaces"), Some(ns), None) => (ns, "namespaces"),
        (Some(resource), _, _) => ("", resource),
        (None, _, _) => ("", ""),
    }
}

/// Whether a request's query asks for a watch.
fn is_watch(query: Option<&str>) -> bool {
    query.is_some_and(|q| q.split('&').any(|p| p == "watch=true" || p == "watch=1"))
}

/// Wraps `client` so that every request it sends is counted in `metrics` before it leaves,
/// and timed until its response (or its failure) comes back: the figures are real
/// requests, not what the controller meant to send.
#[must_use]
pub fn counting_client(client: kube::Client, metrics: Arc<Metrics>) -> kube::Client {
    let ns = client.default_namespace().to_owned();
    let svc = tower::service_fn(move |req: http::Request<kube::client::Body>| {
        let method = req.method().as_str().to_owned();
        let watch = is_watch(req.uri().query());
        metrics.api_request(&method, req.uri().path());
        let client = client.clone();
        let metrics = metrics.clone();
        async move {
            let started = Instant::now();
            let res = client.send(req).await;
            let code = res.as_ref().ok().map(|r| r.status().as_u16());
            metrics.api_response(&method, watch, code, started.elapsed());
            res
        }
    });
    kube::Client::new(svc, ns)
}

/// The answer to one request on the metrics address.
fn respond(metrics: &Metrics, method: &http::Method, path: &str) -> http::Response<String> {
    let (status, content_type, body) =
        if method != http::Method::GET && method != http::Method::HEAD {
            (
                http::StatusCode::METHOD_NOT_ALLOWED,
                "text/plain",
                "method not allowed\n".to_owned(),
            )
        } else {
            match path {
                "/metrics" => (http::StatusCode::OK, CONTENT_TYPE, metrics.render()),
                "/healthz" => (http::StatusCode::OK, "text/plain", "ok\n".to_owned()),
                "/readyz" => readiness(metrics),
                _ => (
                    http::StatusCode::NOT_FOUND,
                    "text/plain",
                    "not found\n".to_owned(),
                ),
            }
        };
    let mut resp = http::Response::new(body);
    *resp.status_mut() = status;
    resp.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static(content_type),
    );
    resp
}

/// `/readyz`: 200 once every start-up step succeeded and every primary watch has listed;
/// otherwise 503 with one line per step still waiting (and its last failure).
fn readiness(metrics: &Metrics) -> (http::StatusCode, &'static str, String) {
    let synced = metrics.ready.load(Ordering::Relaxed);
    if synced && metrics.startup.done() {
        return (http::StatusCode::OK, "text/plain", "ok\n".to_owned());
    }
    let mut body = String::from("not ready:\n");
    body.push_str(&metrics.startup.describe());
    if !synced {
        body.push_str("caches not synced\n");
    }
    (http::StatusCode::SERVICE_UNAVAILABLE, "text/plain", body)
}

/// Binds the metrics and health address (`host:port`; port 0 picks a free one).
///
/// # Errors
/// The address cannot be bound.
pub async fn bind(addr: &str) -> Result<tokio::net::TcpListener, Error> {
    tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|source| Error::Bind {
            addr: addr.to_owned(),
            source,
        })
}

/// Serves `/metrics`, `/healthz` and `/readyz` on `listener` (HTTP/1.1) until the process
/// ends. A connection that does not send its request headers within 10 s is closed. The
/// address is known ([`Metrics::served_at`]) as soon as this is called, before the
/// returned future first runs.
pub fn serve(
    listener: tokio::net::TcpListener,
    metrics: Arc<Metrics>,
) -> impl Future<Output = ()> + Send + 'static {
    if let Ok(addr) = listener.local_addr() {
        tracing::info!(%addr, "serving metrics and health");
        let _ = metrics.served_at.set(addr);
    }
    accept_loop(listener, metrics)
}

async fn accept_loop(listener: tokio::net::TcpListener, metrics: Arc<Metrics>) {
    loop {
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(e) => {
                // Out of file descriptors, say: wait instead of spinning.
                tracing::warn!(error = %e, "failed to accept a metrics connection");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let metrics = metrics.clone();
        tokio::spawn(async move {
            let svc =
                hyper::service::service_fn(move |req: http::Request<hyper::body::Incoming>| {
                    let resp = respond(&metrics, req.method(), req.uri().path());
                    async move { Ok::<_, std::convert::Infallible>(resp) }
                });
            let conn = hyper::server::conn::http1::Builder::new()
                .timer(hyper_util::rt::TokioTimer::new())
                .header_read_timeout(Duration::from_secs(10))
                .serve_connection(hyper_util::rt::TokioIo::new(stream), svc);
            if let Err(e) = conn.await {
                tracing::debug!(error = %e, "metrics connection ended with an error");
            }
        });
    }
}

/// The log filter when `RUST_LOG` is unset: our own lines at `info`, kube's warnings.
pub const DEFAULT_LOG_FILTER: &str =
    "info,kube=warn,kube_client=warn,kube_client::client::builder=off";

/// The log filter of `gatewright`, from `RUST_LOG` (`env`). kube's client logs an `ERROR`
/// for every request that fails (`failed with error client error (Connect)`: dozens a
/// minute while a member's API server is down, each watch retrying), beside the warning
/// gatewright says once per kind of failure; that line stays off unless `RUST_LOG` names
/// its target (`kube_client::client::builder`) itself.
#[must_use]
pub fn log_filter(env: Option<&str>) -> String {
    const NOISY: &str = "kube_client::client::builder";
    match env.map(str::trim) {
        None | Some("") => DEFAULT_LOG_FILTER.to_owned(),
        Some(f) if f.contains(NOISY) => f.to_owned(),
        Some(f) => format!("{f},{NOISY}=off"),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_client_error_per_request_stays_off_unless_asked_for() {
        use super::log_filter;
        assert_eq!(log_filter(None), super::DEFAULT_LOG_FILTER);
        assert_eq!(
            log_filter(Some("info,kube=warn")),
            "info,kube=warn,kube_client::client::builder=off"
        );
        assert_eq!(
            log_filter(Some("debug,kube_client::client::builder=debug")),
            "debug,kube_client::client::builder=debug"
        );
        for f in [log_filter(None), log_filter(Some("gatewright=debug"))] {
            assert!(tracing_subscriber::EnvFilter::try_new(&f).is_ok(), "{f}");
        }
    }

    use super::*;

    #[test]
    fn api_paths_split_into_namespace_and_resource() {
        assert_eq!(split_api_path("/api/v1/namespaces/a/pods/x"), ("a", "pods"));
        assert_eq!(
            split_api_path("/apis/gateway.networking.k8s.io/v1/namespaces/b/gateways/g/status"),
            ("b", "gateways")
        );
        assert_eq!(
            split_api_path("/apis/ec2.aws.upbound.io/v1beta1/securitygroups?fieldManager=x"),
            ("", "securitygroups")
        );
        assert_eq!(split_api_path("/api/v1/namespaces/c"), ("c", "namespaces"));
        assert_eq!(split_api_path("/version"), ("", ""));
    }

    #[test]
    fn writes_are_counted_by_verb_and_leases_left_out() {
        let m = Metrics::default();
        m.api_request("GET", "/api/v1/namespaces/a/pods");
        m.api_request("PATCH", "/api/v1/namespaces/a/configmaps/x");
        m.api_request("PUT", "/apis/coordination.k8s.io/v1/namespaces/a/leases/l");
        m.api_request("DELETE", "/apis/ec2.aws.upbound.io/v1beta1/vpcs/v");
        assert_eq!(m.writes(), 2);
        assert_eq!(m.writes_in_namespace("a"), 2);
        assert_eq!(m.writes_in_namespace(""), 1);
        assert!(
            m.render().contains(
                "gatewright_api_requests_total{verb=\"PATCH\",resource=\"configmaps\"} 1\n"
            )
        );
    }

    #[test]
    fn watches_are_told_from_lists() {
        assert!(is_watch(Some(
            "labelSelector=a&watch=true&timeoutSeconds=290"
        )));
        assert!(is_watch(Some("watch=1")));
        assert!(!is_watch(Some("labelSelector=watch%3Dtrue")));
        assert!(!is_watch(None));
    }

    struct Fixed(State);
    impl StateSource for Fixed {
        fn state(&self) -> State {
            self.0.clone()
        }
    }

    #[test]
    fn every_metric_has_help_and_type_and_the_samples_it_records() {
        let m = Metrics::default();
        // Before any error, the error families are described (queries find them).
        let fresh = m.render();
        for family in [
            "gatewright_reconcile_errors_total",
            "gatewright_api_request_errors_total",
        ] {
            assert!(
                fresh.contains(&format!("# TYPE {family} counter\n")),
                "{fresh}"
            );
        }
        m.reconciled("Gateway", "Ok", Duration::from_millis(30));
        m.reconciled("Gateway", "ApplyFailed", Duration::from_millis(70));
        m.planned(Duration::from_millis(2));
        m.api_response("GET", false, Some(200), Duration::from_millis(3));
        m.api_response("PATCH", false, Some(409), Duration::from_millis(3));
        m.api_response("GET", true, None, Duration::from_secs(1));
        m.applies.fetch_add(3, Ordering::Relaxed);
        m.queue_depth.fetch_add(2, Ordering::Relaxed);
        m.leader.store(true, Ordering::Relaxed);
        let source: Arc<dyn StateSource> = Arc::new(Fixed(State {
            gateways: BTreeMap::from([
                (("True".into(), "Programmed".into()), 4),
                (("False".into(), "Pending".into()), 1),
            ]),
            rollouts_in_progress: 2,
            rollouts_stuck: 1,
            deletions_stuck: 5,
            watched_child_kinds: 3,
        }));
        m.set_state_source(Arc::downgrade(&source));
        let text = m.render();
        for line in [
            "gatewright_reconciles_total{kind=\"Gateway\",category=\"Ok\"} 1",
            "gatewright_reconcile_errors_total{kind=\"Gateway\",category=\"ApplyFailed\"} 1",
            "gatewright_reconcile_duration_seconds_count{kind=\"Gateway\",result=\"ApplyFailed\"} 1",
            "gatewright_reconcile_duration_seconds_bucket{kind=\"Gateway\",result=\"Ok\",le=\"0.04\"} 1",
            "gatewright_plan_duration_seconds_count 1",
            // The watch is not timed; its failure counts.
            "gatewright_api_request_duration_seconds_count{verb=\"GET\"} 1",
            "gatewright_api_request_errors_total{verb=\"PATCH\",code=\"409\"} 1",
            "gatewright_api_request_errors_total{verb=\"GET\",code=\"transport\"} 1",
            "gatewright_writes_total{category=\"apply\"} 3",
            "gatewright_writes_total{category=\"prune\"} 0",
            "gatewright_queue_depth 2",
            "gatewright_leader 1",
            "gatewright_caches_synced 0",
            "gatewright_gateways{programmed=\"True\",reason=\"Programmed\"} 4",
            "gatewright_rollouts_in_progress 2",
            "gatewright_rollouts_stuck 1",
            "gatewright_deletions_stuck 5",
            "gatewright_watched_child_kinds 3",
        ] {
            assert!(
                text.lines().any(|l| l == line),
                "missing {line:?} in:\n{text}"
            );
        }
        // Every family has HELP and TYPE before its samples.
        let mut described = std::collections::BTreeSet::new();
        for line in text.lines() {
            if let Some(rest) = line.strip_prefix("# TYPE ") {
                described.insert(rest.split(' ').next().unwrap_or_default().to_owned());
                continue;
            }
            if line.starts_with('#') || line.is_empty() {
                continue;
            }
            let name = line.split(['{', ' ']).next().unwrap_or_default();
            let family = ["_bucket", "_sum", "_count"]
                .iter()
                .find_map(|s| name.strip_suffix(s))
                .filter(|f| described.contains(*f))
                .unwrap_or(name);
            assert!(described.contains(family), "{name} has no TYPE");
            assert!(
                text.contains(&format!("# HELP {family} ")),
                "{family} has no HELP"
            );
        }
        // Without the source (the controller gone), the gauges read zero.
        drop(source);
        assert!(
            m.render()
                .lines()
                .any(|l| l == "gatewright_rollouts_stuck 0")
        );
    }

    #[tokio::test]
    async fn serves_metrics_health_and_readiness_over_http() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let m = Arc::new(Metrics::default());
        let listener = bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        tokio::spawn(serve(listener, m.clone()));
        let get = |path: &'static str| async move {
            let mut s = tokio::net::TcpStream::connect(addr).await.expect("connect");
            s.write_all(
                format!("GET {path} HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n").as_bytes(),
            )
            .await
            .expect("write");
            let mut out = String::new();
            s.read_to_string(&mut out).await.expect("read");
            out
        };
        assert!(get("/healthz").await.starts_with("HTTP/1.1 200"));
        assert!(get("/readyz").await.starts_with("HTTP/1.1 503"));
        // A start-up step failing keeps it not ready, and says why.
        m.startup.begin("leader election on Lease ns/l");
        m.startup.failed(
            "leader election on Lease ns/l",
            "Forbidden",
            "leases is forbidden",
        );
        m.ready.store(true, Ordering::Relaxed);
        let r = get("/readyz").await;
        assert!(r.starts_with("HTTP/1.1 503"), "{r}");
        assert!(
            r.contains("leader election on Lease ns/l: Forbidden (1 failures, retrying): leases is forbidden"),
            "{r}"
        );
        let metrics = get("/metrics").await;
        assert!(
            metrics.contains("gatewright_startup_errors_total{step=\"leader election on Lease ns/l\",reason=\"Forbidden\"} 1"),
            "{metrics}"
        );
        assert!(
            metrics.contains("\ngatewright_startup_steps_pending 1\n"),
            "{metrics}"
        );
        m.startup.succeeded("leader election on Lease ns/l");
        assert!(get("/readyz").await.starts_with("HTTP/1.1 200"));
        assert!(get("/nope").await.starts_with("HTTP/1.1 404"));
        let metrics = get("/metrics").await;
        assert!(metrics.starts_with("HTTP/1.1 200"), "{metrics}");
        assert!(metrics.contains("content-type: text/plain; version=0.0.4"));
        assert!(metrics.contains("\ngatewright_caches_synced 1\n"));
        // A second bind of the same address is a clear error.
        let err = bind(&addr.to_string()).await.expect_err("in use");
        assert!(err.to_string().contains(&addr.to_string()), "{err}");
    }
}
