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
//!
//! This file holds [`Metrics`] and its counters; the Prometheus encoding is in `scrape.rs`,
//! the counting client in `client.rs`, the HTTP server in `serve.rs` and the log filter in
//! `logging.rs`.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock, Weak};
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};

mod client;
mod logging;
mod scrape;
mod serve;

pub use client::{counting_client, split_api_path};
pub use logging::{DEFAULT_LOG_FILTER, log_filter};
pub use serve::{bind, serve};

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
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
