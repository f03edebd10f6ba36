//! The process's side of the controller: the keyed queue every cluster's work waits in
//! ([`queue`](super::queue)) and the workers that take it, per-item backoff, the periodic
//! resync, leader election's start (the election itself: [`super::election`]) and its
//! write fence, signals' one shutdown path, and the
//! metrics registry the clusters share. A worker takes a [`Task`] (a work item and the
//! cluster it belongs to) and runs it with [`Cluster::run`]; the runner holds no cluster
//! state of its own.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kube::Client;
use tracing::Instrument;

use super::client::{self, LeaseFence};
use super::cluster::Cluster;
use super::cluster::Reach as _;
use super::common::{ClusterId, Error, Options, Stop, Task, Work};
use super::election::stop_asked;
use super::fleet::Fleet;
use super::{queue, watch};
use crate::telemetry::Metrics;

/// The running controller: the process's side (see the module docs) and the clusters it
/// serves.
pub struct Runner {
    opts: Options,
    metrics: Arc<Metrics>,
    queue: Arc<queue::Queue>,
    /// The cluster `gatewright run` is pointed at; in [`Runner::clusters`] too.
    local: Arc<Cluster>,
    /// Every cluster served (the local one and, in fleet mode, the members), and what the
    /// hub knows of the fleet.
    fleet: Arc<Fleet>,
    /// Failures in a row per task, for its backoff.
    failures: Mutex<HashMap<Task, u32>>,
    /// Writes are sent only while our Lease is fresh (with leader election).
    fence: Option<Arc<LeaseFence>>,
    /// This start's identity in Leases (and members' audit logs: their clients' user agent).
    identity: String,
    /// Fleet mode with leader election: the members shared among the replicas by Leases,
    /// and the hub client their Leases are written with (not fenced by the leader's Lease:
    /// every replica keeps its share, leader or not).
    share: Option<(Arc<super::share::Share>, Client)>,
    /// Set once the controller stops: asked to, or because it cannot go on.
    stop: tokio::sync::watch::Sender<Option<Stop>>,
    /// The tasks a shutdown waits for: the workers (their reconciles under way) and the
    /// election (releasing the Lease).
    drain: Mutex<Vec<tokio::task::JoinHandle<()>>>,
}

impl Runner {
    /// The cluster `gatewright run` is pointed at (its kubeconfig, or the one it runs in).
    #[must_use]
    pub fn local(&self) -> &Arc<Cluster> {
        &self.local
    }

    /// A cluster this runner serves.
    #[must_use]
    pub fn cluster(&self, id: &ClusterId) -> Option<Arc<Cluster>> {
        self.fleet.get(id)
    }

    /// Every cluster this runner serves.
    #[must_use]
    pub fn clusters(&self) -> Vec<Arc<Cluster>> {
        self.fleet.all()
    }

    /// Serves one more cluster, reached through `client` (its own credentials: what they
    /// grant is all gatewright may do there): its watches start now, and its work runs
    /// once they have listed. A cluster already served under `id` is replaced.
    pub fn add_cluster(&self, id: ClusterId, client: Client) -> Arc<Cluster> {
        self.add_fenced(id, client, self.fence.clone(), false)
    }

    /// [`Runner::add_cluster`] with writes fenced by `fence`; an `observer` (a member
    /// another replica serves) watches only what the hub places there and is never
    /// written to.
    fn add_fenced(
        &self,
        id: ClusterId,
        client: Client,
        fence: Option<Arc<LeaseFence>>,
        observer: bool,
    ) -> Arc<Cluster> {
        self.remove_cluster(&id);
        let mut cluster = Cluster::new(
            id.clone(),
            client,
            self.opts.clone(),
            self.metrics.clone(),
            self.queue.clone(),
            fence,
            &crate::identity::agent_of(&self.identity),
        );
        cluster.observer = observer;
        let cluster = Arc::new(cluster);
        self.fleet.insert(cluster.clone());
        if !observer {
            watch::start_primary_watches(&cluster);
        }
        cluster
    }

    /// Stops serving a cluster (not the local one): its watches stop and its work still
    /// queued is dropped. Nothing is written to it or deleted from it. Returns whether it
    /// was served.
    pub fn remove_cluster(&self, id: &ClusterId) -> bool {
        if *id == ClusterId::local() {
            return false;
        }
        let removed = self.fleet.remove(id);
        if let Some(c) = &removed {
            c.stop();
            // What it mirrored of placed objects to the hub is no longer watched: the
            // fleet keeps what was placed there, for a teardown to record.
            self.fleet.let_go(id);
            if let Ok(mut f) = self.failures.lock() {
                f.retain(|t, _| t.cluster != *id);
            }
            tracing::info!(cluster = %id, "no longer serving the cluster");
        }
        removed.is_some()
    }

    /// Enqueues every Gateway, class and policy of every cluster: a forced full resync.
    pub fn enqueue_all(&self) {
        for c in self.clusters() {
            c.enqueue_all();
        }
    }

    /// This start's identity: the holder it writes in Leases, and (in fleet mode) the user
    /// agent of its requests to members, as their audit logs record it.
    #[must_use]
    pub fn identity(&self) -> &str {
        &self.identity
    }

    /// Fleet mode with leader election: the members whose Leases this replica holds.
    #[must_use]
    pub fn members_held(&self) -> Option<std::collections::BTreeSet<String>> {
        self.share.as_ref().map(|(s, _)| s.held())
    }

    /// Marks the controller as stopping (the first reason wins).
    fn stop_with(&self, why: Stop) {
        self.stop.send_if_modified(|s| {
            if s.is_none() {
                *s = Some(why);
                true
            } else {
                false
            }
        });
    }

    /// Resolves when the controller stops, with the reason.
    pub async fn stopped(&self) -> Stop {
        let mut rx = self.stop.subscribe();
        loop {
            if let Some(why) = rx.borrow_and_update().clone() {
                return why;
            }
            if rx.changed().await.is_err() {
                return Stop::Failed("the controller is gone".into());
            }
        }
    }

    /// The one shutdown path: no new work is taken, the reconcile under way finishes, the
    /// Lease (if held) is released, and then (fleet mode with leader election) the member
    /// Leases held are given back. Waits at most `grace`; returns whether everything
    /// finished within it.
    pub async fn shutdown(&self, grace: Duration) -> bool {
        self.stop_with(Stop::Requested);
        let tasks = self
            .drain
            .lock()
            .map(|mut d| std::mem::take(&mut *d))
            .unwrap_or_default();
        tokio::time::timeout(grace, async {
            futures::future::join_all(tasks).await;
            // No reconcile runs any more: no write of ours can land after the release.
            if let Some((share, hub)) = &self.share {
                super::share::release(share, hub.clone()).await;
            }
        })
        .await
        .is_ok()
    }

    /// The metrics.
    #[must_use]
    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.metrics
    }

    /// Runs one task: looks its cluster up, parks it while that cluster's caches are not
    /// synced, runs it, counts it, and queues it again after a backoff when it failed.
    async fn work(&self, task: &Task) {
        let Some(cluster) = self.cluster(&task.cluster) else {
            tracing::debug!(?task, "the cluster is no longer served; dropped");
            return;
        };
        let w = &task.work;
        // Fleet mode with leader election: the hub's own work is the leader's (it is all
        // queued again when this replica becomes the leader), but every replica plans the
        // hub's Gateways to write what they place in the members whose Lease it holds;
        // members' own work is that of the replica holding their Lease.
        let placing_only = self.share.is_some()
            && cluster.id() == &ClusterId::local()
            && !self
                .metrics
                .leader
                .load(std::sync::atomic::Ordering::Relaxed);
        if (placing_only && !matches!(w, Work::Gateway(_))) || cluster.observer {
            return;
        }
        if cluster.park(w) {
            return;
        }
        let started = Instant::now();
        let kind = work_kind(w);
        let run = async {
            match w {
                Work::Gateway(k) if placing_only => cluster.place_gateway(k).await,
                _ => cluster.run(w).await,
            }
        };
        match run.instrument(cluster.span()).await {
            Ok(requeue) => {
                self.metrics.reconciled(kind, "Ok", started.elapsed());
                if let Ok(mut f) = self.failures.lock() {
                    f.remove(task);
                }
                if let Some(d) = requeue {
                    cluster.enqueue_after(w.clone(), d);
                }
            }
            Err(e) => {
                self.metrics
                    .reconciled(kind, e.category(), started.elapsed());
                let n = self.failures.lock().map(|mut f| {
                    let n = f.entry(task.clone()).or_default();
                    *n += 1;
                    *n
                });
                let delay = failure_backoff(n.unwrap_or(1), client::jitter());
                if matches!(e, Error::Deleting(_)) {
                    tracing::debug!(?task, "{e}");
                } else {
                    tracing::warn!(?task, error = %e, retry_in = ?delay, "reconcile failed");
                }
                cluster.enqueue_after(w.clone(), delay);
            }
        }
        tracing::debug!(?task, elapsed = ?started.elapsed(), "reconciled");
    }
}

/// The kind of object a work item reconciles, as the reconcile metrics label it.
fn work_kind(w: &Work) -> &str {
    match w {
        Work::Gateway(_) => "Gateway",
        Work::Class(_) => "GatewayClass",
        Work::Route(r) => r.kind.as_str(),
        Work::Blueprint(_) => "GatewayClassBlueprint",
        Work::Policy(k, _) => k.kind(),
    }
}

/// How long a task that failed `failures` times in a row waits before it runs again:
/// doubling per failure from 0.5-1 s up to 30-60 s, `jitter` (0 to 1) placing it within.
fn failure_backoff(failures: u32, jitter: f64) -> Duration {
    client::retry_delay(
        failures.saturating_sub(1),
        Duration::from_secs(1),
        Duration::from_secs(60),
        None,
        jitter,
    )
}

impl super::election::Elects for Runner {
    fn metrics(&self) -> &Arc<Metrics> {
        &self.metrics
    }
    fn stop_signal(&self) -> &tokio::sync::watch::Sender<Option<Stop>> {
        &self.stop
    }
    fn fence(&self) -> Option<&Arc<LeaseFence>> {
        self.fence.as_ref()
    }
    fn stop_with(&self, why: Stop) {
        Runner::stop_with(self, why);
    }
    fn enqueue_all(&self) {
        Runner::enqueue_all(self);
    }
    fn keep_task(&self, task: tokio::task::JoinHandle<()>) {
        if let Ok(mut d) = self.drain.lock() {
            d.push(task);
        }
    }
}

impl super::inventory::Members for Runner {
    fn engage(&self, id: ClusterId, client: Client, fence: Option<Arc<LeaseFence>>) {
        match fence {
            Some(f) => self.add_fenced(id, client, Some(f), false),
            None => self.add_cluster(id, client),
        };
    }
    fn observe(&self, id: ClusterId, client: Client) {
        // Its fence is never opened: nothing is written there from here.
        let closed = Arc::new(LeaseFence::elsewhere(
            id.as_str(),
            &self.identity,
            Duration::ZERO,
        ));
        self.add_fenced(id, client, Some(closed), true);
    }
    fn let_go(&self, id: &ClusterId) {
        self.remove_cluster(id);
    }
    fn report(&self, states: BTreeMap<String, &'static str>) {
        self.metrics.set_fleet_members(states);
    }
    fn fleet(&self, members: Vec<crate::snapshot::fleet::FleetMember>) {
        self.fleet.set_members(members);
    }
    fn has_stopped(&self) -> bool {
        self.stop.borrow().is_some()
    }
}

/// Starts the controller on one cluster (`client`'s): its watches, the workers, the
/// periodic resync, leader election (when configured) and the metrics server (when
/// configured). Returns the handle; the tasks run until the runtime stops or
/// [`Runner::shutdown`].
///
/// # Errors
/// The metrics address cannot be bound.
pub async fn start(client: Client, opts: Options) -> Result<Arc<Runner>, std::io::Error> {
    let metrics = Arc::new(Metrics::default());
    let identity = super::election::lease_identity();
    let fence = opts.leader_election.as_ref().map(|(ns, name)| {
        // The margin covers the renewal request's own latency and clock rate drift.
        Arc::new(LeaseFence::new(
            ns,
            name,
            &identity,
            Duration::from_secs(super::election::LEASE_FENCE_MARGIN_SECONDS),
        ))
    });
    let queue = Arc::new(queue::Queue::default());
    // Fleet mode with leader election: the members are shared among the replicas through
    // a Lease each, beside the leader's Lease (which keeps the hub's own work).
    let share = match (&opts.fleet, &opts.leader_election) {
        (Some(_), Some((ns, name))) => Some((
            Arc::new(super::share::Share::new(ns, name, &identity)),
            client::stack(
                client.clone(),
                &metrics,
                opts.api.clone(),
                None,
                &crate::identity::agent_of(&identity),
            ),
        )),
        _ => None,
    };
    let local = Arc::new(Cluster::new(
        ClusterId::local(),
        client,
        opts.clone(),
        metrics.clone(),
        queue.clone(),
        fence.clone(),
        &crate::identity::agent_of(&identity),
    ));
    let runner = Arc::new(Runner {
        opts,
        metrics,
        queue,
        fleet: Fleet::new(local.clone()),
        local: local.clone(),
        failures: Mutex::new(HashMap::new()),
        fence,
        identity: identity.clone(),
        share: share.clone(),
        stop: tokio::sync::watch::Sender::new(None),
        drain: Mutex::new(Vec::new()),
    });
    let source: std::sync::Weak<dyn crate::telemetry::StateSource> = Arc::downgrade(&runner) as _;
    runner.metrics.set_state_source(source);
    if let Some(addr) = &runner.opts.metrics_addr {
        let listener = crate::telemetry::bind(addr)
            .await
            .map_err(std::io::Error::other)?;
        tokio::spawn(crate::telemetry::serve(listener, runner.metrics.clone()));
    }
    runner.metrics.leader.store(
        runner.opts.leader_election.is_none(),
        std::sync::atomic::Ordering::Relaxed,
    );
    watch::start_primary_watches(&local);
    start_fleet(&runner, share);
    // Leader election is joined in the background, on the local cluster (the Lease and
    // the fence are its client's): its set-up retries (RBAC not seen yet, the API server
    // restarting) without holding up the watches, and the workers wait for the lease.
    let leader = runner.opts.leader_election.clone().map(|(ns, name)| {
        super::election::elect(&runner, local.client().clone(), ns, name, identity)
    });
    // In fleet mode with leader election, workers take every cluster's work; the hub's is
    // dropped while this replica is not the leader (see `Runner::work`).
    let wait_for_leader = leader.clone().filter(|_| runner.share.is_none());
    for _ in 0..runner.opts.workers.max(1) {
        let handle = tokio::spawn(run_worker(
            runner.clone(),
            wait_for_leader.clone(),
            runner.stop.subscribe(),
        ));
        if let Ok(mut d) = runner.drain.lock() {
            d.push(handle);
        }
    }
    let resync = runner.clone();
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(resync.opts.resync);
        tick.tick().await;
        loop {
            tick.tick().await;
            resync.enqueue_all();
        }
    });
    Ok(runner)
}

/// Fleet mode: the members the hub's inventory lists, engaged as they come and go, their
/// share among the replicas, and the sweep of members that stay unreachable.
fn start_fleet(runner: &Arc<Runner>, share: Option<(Arc<super::share::Share>, Client)>) {
    let Some(fleet) = runner.opts.fleet.clone() else {
        return;
    };
    tokio::spawn(super::inventory::run(
        Arc::downgrade(runner),
        runner.local.client().clone(),
        fleet,
        share.as_ref().map(|(s, _)| s.clone()),
    ));
    if let Some((share, hub)) = share {
        tokio::spawn(super::share::run(share, hub, runner.stop.subscribe()));
    }
    // Members whose API server stays unreachable stop being served for placement
    // (DNS records stop listing them) until a watch works again.
    let weak = Arc::downgrade(runner);
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        loop {
            tick.tick().await;
            let Some(r) = weak.upgrade() else {
                return;
            };
            // Stopped: nothing more is swept (a stopped runner something still holds).
            if r.stop.borrow().is_some() {
                return;
            }
            r.fleet.tick();
        }
    });
}

/// A worker: takes tasks from the queue and works them until the runner stops; with
/// `leader`, only while this replica holds the lease (only the lease holder writes).
async fn run_worker(
    worker: Arc<Runner>,
    mut leader: Option<tokio::sync::watch::Receiver<bool>>,
    mut stopping: tokio::sync::watch::Receiver<Option<Stop>>,
) {
    let stopping = &mut stopping;
    loop {
        // Only the lease holder writes: wait for the lease before taking work.
        if let Some(l) = &mut leader {
            while !*l.borrow_and_update() {
                tokio::select! {
                    biased;
                    () = stop_asked(stopping) => return,
                    r = l.changed() => if r.is_err() {
                        worker.stop_with(Stop::Failed("leader election stopped".into()));
                        return;
                    },
                }
            }
        }
        let task = tokio::select! {
            biased;
            () = stop_asked(stopping) => return,
            t = worker.queue.pop() => t,
        };
        worker
            .metrics
            .queue_depth
            .store(worker.queue.waiting(), std::sync::atomic::Ordering::Relaxed);
        worker.work(&task).await;
        worker.queue.done(&task);
    }
}

#[cfg(test)]
mod tests {
    use super::super::common::PolicyKind;
    use super::*;
    use crate::snapshot::{Key, RouteKey};

    #[test]
    fn each_work_item_is_labelled_by_the_kind_it_reconciles() {
        let k = || Key::new("ns", "n");
        let items = [
            Work::Gateway(k()),
            Work::Class("c".into()),
            Work::Route(RouteKey::new("GRPCRoute", "ns", "r")),
            Work::Blueprint("bp".into()),
            Work::Policy(PolicyKind::ClassConfig, k()),
            Work::Policy(PolicyKind::GatewayConfig, k()),
        ];
        let labels: Vec<&str> = items.iter().map(work_kind).collect();
        assert_eq!(
            labels,
            [
                "Gateway",
                "GatewayClass",
                "GRPCRoute",
                "GatewayClassBlueprint",
                "GatewayClassConfig",
                "GatewayConfig"
            ]
        );
    }

    #[test]
    fn a_failing_task_waits_twice_as_long_per_failure_from_half_a_second_to_a_minute() {
        let secs = |n, j| failure_backoff(n, j).as_secs_f64();
        // The first failure: 0.5 to 1 s.
        assert!((secs(1, 0.0) - 0.5).abs() < 1e-9);
        assert!((secs(1, 1.0) - 1.0).abs() < 1e-9);
        // Doubling per failure.
        assert!((secs(2, 0.0) - 1.0).abs() < 1e-9);
        assert!((secs(4, 0.0) - 4.0).abs() < 1e-9);
        // Up to a minute, however many failures.
        assert!((secs(7, 1.0) - 60.0).abs() < 1e-9);
        assert!((secs(u32::MAX, 1.0) - 60.0).abs() < 1e-9);
        assert!((secs(u32::MAX, 0.0) - 30.0).abs() < 1e-9);
        // No failure counted yet is as the first.
        assert_eq!(failure_backoff(0, 0.5), failure_backoff(1, 0.5));
    }
}
