//! The Prometheus encoding: [`Metrics::render`] registers the families kept in [`Metrics`]
//! and a [`Collector`] that reads, at each scrape, the counters, the maps of errors and
//! requests and the controller's [`State`], encoded as constant metrics.

use std::collections::BTreeMap;
use std::sync::Weak;
use std::sync::atomic::Ordering;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::registry::Registry;

use super::{Metrics, State};

impl Metrics {
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
        self.encode_maps(&mut encoder)?;
        self.encode_writes(&mut encoder)?;
        self.encode_process(&mut encoder)?;
        self.encode_state(&mut encoder)?;
        encode_build_info(&mut encoder)
    }
}

/// The families, in the order a scrape encodes them.
impl Scrape {
    /// The families read from maps: errors by category, fleet members, start-up steps
    /// pending, API requests.
    fn encode_maps(&self, encoder: &mut DescriptorEncoder) -> Result<(), std::fmt::Error> {
        counter_family(
            encoder,
            "gatewright_reconcile_errors",
            "Reconciles that ended in an error, by kind and error category (Deleting: waiting for children to go)",
            ["kind", "category"],
            &self.reconcile_errors,
        )?;
        counter_family(
            encoder,
            "gatewright_api_request_errors",
            "Requests to the API server that failed, by HTTP method and status code (transport: no response)",
            ["verb", "code"],
            &self.api_errors,
        )?;
        counter_family(
            encoder,
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
            encoder,
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
        Ok(())
    }

    /// The controller's write and plan counters.
    fn encode_writes(&self, encoder: &mut DescriptorEncoder) -> Result<(), std::fmt::Error> {
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
            encoder,
            "gatewright_applies_skipped",
            "Applies not sent because the live child already held what the plan renders",
            skipped,
        )?;
        counter(
            encoder,
            "gatewright_rollouts_halted",
            "Blueprint rollouts halted (or rolled back) because a wave's gate did not hold: a revision that does not render, or a wave not Programmed within its progress deadline",
            halted,
        )?;
        counter(
            encoder,
            "gatewright_status_only_events",
            "Gateway and route watch events that were the echo of our own status write: stored, nothing planned",
            status_only,
        )?;
        Ok(())
    }

    /// The process's own gauges: the queue, caches synced, leadership.
    fn encode_process(&self, encoder: &mut DescriptorEncoder) -> Result<(), std::fmt::Error> {
        gauge(
            encoder,
            "gatewright_queue_depth",
            "Work items waiting in the queue",
            self.queue_depth,
        )?;
        gauge(
            encoder,
            "gatewright_caches_synced",
            "1 once every primary watch has listed its objects (/readyz also waits for every start-up step)",
            u64::from(self.ready),
        )?;
        gauge(
            encoder,
            "gatewright_leader",
            "1 while this process may write: it holds the leader lease, or runs without leader election",
            u64::from(self.leader),
        )?;
        Ok(())
    }

    /// The gauges of the controller's state (read from its [`super::StateSource`]).
    fn encode_state(&self, encoder: &mut DescriptorEncoder) -> Result<(), std::fmt::Error> {
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
            encoder,
            "gatewright_rollouts_in_progress",
            "Make-before-break replacements under way, stuck ones included",
            self.state.rollouts_in_progress,
        )?;
        gauge(
            encoder,
            "gatewright_rollouts_stuck",
            "Replacements past their timeout: the new version is not ready, or what reads it has not switched",
            self.state.rollouts_stuck,
        )?;
        gauge(
            encoder,
            "gatewright_deletions_stuck",
            "Children whose deletion hangs during a Gateway's teardown (longer than --deletion-stuck-seconds)",
            self.state.deletions_stuck,
        )?;
        gauge(
            encoder,
            "gatewright_watched_child_kinds",
            "Child kinds watched (or being looked up) now",
            self.state.watched_child_kinds,
        )?;
        Ok(())
    }
}

/// `gatewright_build_info`: always 1, labelled with the version.
fn encode_build_info(encoder: &mut DescriptorEncoder) -> Result<(), std::fmt::Error> {
    let g = ConstGauge::new(1i64);
    let m = encoder.encode_descriptor(
        "gatewright_build_info",
        "Always 1; the version of the running binary",
        None,
        g.metric_type(),
    )?;
    let mut m = m;
    g.encode(m.encode_family(&[("version", env!("CARGO_PKG_VERSION"))])?)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::sync::Arc;
    use std::sync::atomic::Ordering;
    use std::time::Duration;

    use crate::telemetry::{Metrics, State, StateSource};

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
}
