//! The cluster shell around the planner: watches feed one [`Snapshot`]; every change
//! enqueues exactly the parents it affects; a bounded pool of workers plans each parent
//! and executes the plan (server-side apply of what changed, prune after every apply
//! succeeded, status written only when it changed), emits Events on transitions against
//! the observed status, and counts what it did.
//!
//! The work queue ([`queue`]) is keyed: an object waits at most once, is worked on by at
//! most one worker at a time, and one enqueued while it is being worked on runs again
//! afterwards; Gateways and the other kinds take turns. Nothing is worked on before every
//! primary watch has listed, and a Gateway is not planned before the watches of the child
//! kinds it uses have listed.
//!
//! Child kinds are watched as plans name them (a registrar, label-selected to our
//! children); a kind the API server does not serve is reported on the Gateway and looked
//! up again until it appears.

mod apply;
mod class;
mod client;
pub mod events;
pub mod fight;
mod memory;
mod metrics;
pub mod policy;
mod queue;
mod reconcile;
mod settle;
pub mod startup;
mod status;
mod teardown;
mod watch;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use kube::Client;

use crate::snapshot::{Key, RouteKey, Snapshot};
use crate::telemetry::Metrics;

pub use apply::is_subset;
pub use client::{
    Error as ClientError, LeaseFence, Resilience, parse_retry_after, retry_delay, retryable_status,
};
pub use settle::PROGRESS_HOLD;

/// Field manager of every server-side apply.
pub const FIELD_MANAGER: &str = "gatewright";

/// How long a Gateway created while the controller runs waits before it is first
/// planned. GitOps tools and `kubectl apply -f dir/` create a Gateway and its routes
/// within moments of each other; planned at once, the Gateway would render its
/// certificate for the first route or two, then replace it (make-before-break) as each
/// further route arrives: certificates ordered for nothing (ACME rate limits count them),
/// and several status writes and Events per Gateway. After this wait it is planned with
/// the routes created with it. Routes, and Gateways that exist when the controller starts,
/// never wait.
pub const NEW_GATEWAY_SETTLE: Duration = Duration::from_secs(1);

/// See [`memory::GatewayMemory::route_status_seen`].
#[derive(Debug)]
pub(crate) struct RouteStatusSeen {
    route: std::sync::Weak<crate::snapshot::RouteEntry>,
    entries: Vec<crate::gateway::ParentAttachment>,
}

/// The fewest routes a Gateway has for its route plans to be remembered between plans
/// (see [`crate::plan::memo`]): below, planning them again costs less than the memory
/// of keeping them for every Gateway of a fleet.
pub const MEMO_MIN_ROUTES: usize = 16;
pub use crate::render::labels::GATEWAY_FINALIZER;

/// Errors of one reconcile.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The API server refused or failed a request.
    #[error("failed to {action}: {source}")]
    Kube {
        /// What we tried.
        action: String,
        /// The cause.
        #[source]
        source: Box<kube::Error>,
    },
    /// A child kind is not served.
    #[error("kind {0} is not served by the API server (is its CRD installed?)")]
    KindNotServed(String),
    /// Some children could not be applied (the message of the first).
    #[error("{0}")]
    Apply(String),
    /// Deletion of children is still in progress.
    #[error("waiting for {0} children to be deleted")]
    Deleting(usize),
    /// A thread panicked while it held the snapshot lock: the cache cannot be trusted.
    #[error("failed to read the snapshot: a writer panicked while holding it")]
    SnapshotPoisoned,
    /// A write kept losing to concurrent writers (409 Conflict on every attempt).
    #[error("failed to {action}: the object kept changing ({attempts} conflicting writes)")]
    Conflict {
        /// What we tried.
        action: String,
        /// How many times.
        attempts: usize,
    },
    /// A child's planned placement disagrees with its kind's scope on the API server.
    #[error("{0}")]
    ScopeMismatch(String),
    /// A child is already held by another parent.
    #[error("{0}")]
    HeldByAnother(String),
}

impl Error {
    /// One PascalCase word for metrics and Events.
    #[must_use]
    pub fn category(&self) -> &'static str {
        match self {
            Self::Kube { .. } => "ApiError",
            Self::KindNotServed(_) => "KindNotServed",
            Self::Apply(_) => "ApplyFailed",
            Self::Deleting(_) => "Deleting",
            Self::SnapshotPoisoned => "SnapshotPoisoned",
            Self::Conflict { .. } => "Conflict",
            Self::ScopeMismatch(_) => "ClusterScopedKind",
            Self::HeldByAnother(_) => "ChildConflict",
        }
    }
    pub(crate) fn kube(action: impl Into<String>, source: kube::Error) -> Self {
        Self::Kube {
            action: action.into(),
            source: Box::new(source),
        }
    }
}

/// Work items.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Work {
    /// Plan and execute a Gateway (and its routes' children and status).
    Gateway(Key),
    /// Write a GatewayClass's status and finalizer.
    Class(String),
    /// Remove our stale `status.parents` entries of a route.
    Route(RouteKey),
    /// Write a blueprint's status (whether its templates compile).
    Blueprint(String),
    /// Write a policy's status (where it applies, and why not elsewhere).
    Policy(policy::PolicyKind, Key),
}

/// How `gatewright run` is configured.
#[derive(Clone, Debug)]
pub struct Options {
    /// Namespace whose GatewayClassConfigs apply cluster-wide.
    pub controller_namespace: String,
    /// Where to serve /metrics, /healthz, /readyz (none: not served).
    pub metrics_addr: Option<String>,
    /// How often every parent is re-planned to catch drift.
    pub resync: Duration,
    /// Leader election: `(namespace, lease name)` of the Lease only the holder writes under.
    /// Every replica watches and indexes; without it, this process always writes.
    pub leader_election: Option<(String, String)>,
    /// During a Gateway's teardown, how long a child may stay in deletion (held by
    /// someone else's finalizer, say) before the Gateway reports it as stuck.
    pub deletion_stuck_after: Duration,
    /// Deadlines and retries of every API request.
    pub api: Resilience,
    /// When a field reverted by someone else becomes a fight, and how we back off.
    pub fights: fight::Policy,
    /// How many objects are reconciled at the same time (at least 1).
    pub workers: usize,
}

/// The default of [`Options::workers`]: four per core (a reconcile mostly waits on the API
/// server), at least 4, at most 32.
#[must_use]
pub fn default_workers() -> usize {
    std::thread::available_parallelism()
        .map_or(4, std::num::NonZeroUsize::get)
        .saturating_mul(4)
        .clamp(4, 32)
}

impl Default for Options {
    fn default() -> Self {
        Self {
            controller_namespace: "gatewright-system".into(),
            metrics_addr: None,
            resync: Duration::from_secs(3600),
            leader_election: None,
            deletion_stuck_after: Duration::from_secs(120),
            api: Resilience::default(),
            fights: fight::Policy::default(),
            workers: default_workers(),
        }
    }
}

/// What the last reconcile of a Gateway reported, to emit Events only on transitions.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Reported {
    programmed: String,
    errors: BTreeSet<String>,
    missing: BTreeSet<String>,
    /// Replacements in progress: `template=to` -> where it stands.
    rollouts: BTreeMap<String, crate::plan::rollout::Progress>,
    /// Children (object keys) whose deletion hangs during a teardown.
    stuck_deletions: BTreeSet<String>,
}

/// What counts as already announced for a Gateway this process has not reconciled yet:
/// the status it carries. If its Programmed condition is the one planned now, whoever
/// wrote it announced it and what came with it (a restart announces nothing); otherwise
/// only that condition is known, and the rest is announced.
fn observed_reported(
    gw: &gateway_api::apis::standard::gateways::Gateway,
    now: &Reported,
) -> Reported {
    let observed = gw
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == "Programmed"))
        .map(|c| format!("{}/{}", c.status, c.reason));
    match observed {
        Some(p) if p == now.programmed => now.clone(),
        Some(p) => Reported {
            programmed: p,
            ..Reported::default()
        },
        None => Reported::default(),
    }
}

/// The running controller's shared state.
pub struct Controller {
    client: Client,
    opts: Options,
    snapshot: RwLock<Snapshot>,
    metrics: Arc<Metrics>,
    queue: queue::Queue,
    kinds: watch::Registrar,
    recorder: events::Events,
    failures: Mutex<HashMap<Work, u32>>,
    /// What each Gateway's reconciles keep between runs.
    memory: memory::Memory,
    /// The status we last wrote per object (`Kind/namespace/name`), as the digest of its
    /// normalized form (a fleet's statuses would otherwise be held twice): a watch event
    /// that brings exactly it (and no other change) is our own echo.
    own_status: Mutex<HashMap<String, status::StatusDigest>>,
    /// Primary watches that have not listed everything once yet.
    unsynced_watches: std::sync::atomic::AtomicUsize,
    /// True once every primary watch has listed: nothing is planned before, so a plan
    /// never sees a half-filled snapshot (no routes yet, say) and prunes or reports from it.
    caches_synced: tokio::sync::watch::Sender<bool>,
    /// Gateways whose plan found a child held by another parent, by that child: when the
    /// child goes (its holder torn down), they are planned again and may take it.
    child_waiters: Mutex<BTreeMap<crate::snapshot::ObjectKey, BTreeSet<Key>>>,
    /// Writes are sent only while our Lease is fresh (with leader election).
    fence: Option<Arc<LeaseFence>>,
    /// Set once the controller stops: asked to, or because it cannot go on.
    stop: tokio::sync::watch::Sender<Option<Stop>>,
    /// The tasks a shutdown waits for: the worker (its reconcile under way) and the
    /// election (releasing the Lease).
    drain: Mutex<Vec<tokio::task::JoinHandle<()>>>,
    /// Fights over fields of children with other field managers.
    fights: fight::Fights,
}

/// Why the controller stops.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Stop {
    /// [`Controller::shutdown`] was called (a signal, a test).
    Requested,
    /// It cannot go on: the Lease was lost or leader election ended.
    Failed(String),
}

impl Controller {
    /// The child kinds watched (or being looked up) now, as `(apiVersion, kind)`.
    #[must_use]
    pub fn watched_kinds(&self) -> Vec<(String, String)> {
        self.kinds.watched()
    }

    /// Records that a Gateway was created just now (seen by the watch after the caches
    /// listed, unknown to them before).
    pub(crate) fn gateway_created(&self, key: Key) {
        self.memory
            .with(&key, |m| m.created_at = Some(Instant::now()));
    }

    /// How long a Gateway created just now still waits before it is first planned;
    /// `None` once it may be planned (and from then on).
    pub(crate) fn new_gateway_wait(&self, key: &Key) -> Option<Duration> {
        self.memory
            .with(key, |m| {
                let wait = NEW_GATEWAY_SETTLE.checked_sub(m.created_at?.elapsed());
                if wait.is_none() {
                    m.created_at = None;
                }
                wait
            })
            .flatten()
    }

    /// The route plans remembered for `key` (empty when none are), taken out while the
    /// Gateway is planned; a Gateway is never planned twice at once.
    pub(crate) fn take_plan_memo(&self, key: &Key) -> crate::plan::PlanMemo {
        self.memory
            .with(key, |m| m.plan_memo.take())
            .flatten()
            .unwrap_or_default()
    }

    /// Keeps the route plans of `key` for its next plan, when it has enough routes for
    /// reusing them to matter; forgets them otherwise.
    pub(crate) fn keep_plan_memo(&self, key: &Key, memo: crate::plan::PlanMemo) {
        if memo.len() >= MEMO_MIN_ROUTES {
            self.memory.with(key, |m| m.plan_memo = Some(memo));
        }
    }

    /// The routes of `parents` whose status must be looked at: not those whose snapshot
    /// entry and our entries are those of the last write or check. Each comes with its
    /// entry, to record once the write went through (`None`: the route is gone).
    pub(crate) fn route_status_to_write<'a>(
        &self,
        gateway: &Key,
        parents: &'a [crate::plan::RouteParents],
    ) -> Vec<(
        &'a crate::plan::RouteParents,
        Option<Arc<crate::snapshot::RouteEntry>>,
    )> {
        let Ok(snap) = self.snapshot.read() else {
            return parents.iter().map(|p| (p, None)).collect();
        };
        let pick = |seen: Option<&HashMap<RouteKey, RouteStatusSeen>>| {
            parents
                .iter()
                .filter_map(|p| {
                    let entry = snap.route(&p.route).cloned();
                    let unchanged = match (&entry, seen.and_then(|s| s.get(&p.route))) {
                        (Some(e), Some(s)) => {
                            std::ptr::eq(s.route.as_ptr(), Arc::as_ptr(e)) && s.entries == p.entries
                        }
                        _ => false,
                    };
                    (!unchanged).then_some((p, entry))
                })
                .collect::<Vec<_>>()
        };
        match self
            .memory
            .read(gateway, |m| pick(Some(&m.route_status_seen)))
        {
            Some(todo) => todo,
            None => pick(None),
        }
    }

    /// Records that `parents` were written to (or found in) the route of `entry`.
    pub(crate) fn route_status_written(
        &self,
        gateway: &Key,
        parents: &crate::plan::RouteParents,
        entry: &Arc<crate::snapshot::RouteEntry>,
    ) {
        self.memory.with(gateway, |m| {
            m.route_status_seen.insert(
                parents.route.clone(),
                RouteStatusSeen {
                    route: Arc::downgrade(entry),
                    entries: parents.entries.clone(),
                },
            );
        });
    }

    /// Forgets everything kept for `gateway` between its reconciles (it is gone, or no
    /// longer ours).
    pub(crate) fn forget_gateway(&self, gateway: &Key) {
        self.memory.forget(gateway);
    }

    /// Records that `gateway` waits for `children`, held by other parents, to go.
    pub(crate) fn wait_for_children(
        &self,
        gateway: &Key,
        children: Vec<crate::snapshot::ObjectKey>,
    ) {
        if let Ok(mut w) = self.child_waiters.lock() {
            w.retain(|_, gws| {
                gws.remove(gateway);
                !gws.is_empty()
            });
            for c in children {
                w.entry(c).or_default().insert(gateway.clone());
            }
        }
    }

    /// The Gateways that waited for `child` to go (forgotten now).
    pub(crate) fn waiters_of(&self, child: &crate::snapshot::ObjectKey) -> BTreeSet<Key> {
        self.child_waiters
            .lock()
            .ok()
            .and_then(|mut w| w.remove(child))
            .unwrap_or_default()
    }

    /// Remembers the status we are about to write on `object` (`Kind/namespace/name`), so
    /// the watch event it causes is recognised as our own echo.
    pub(crate) fn expect_own_status(&self, object: String, status: &serde_json::Value) {
        let digest = status::status_digest(status);
        if let Ok(mut w) = self.own_status.lock() {
            w.insert(object, digest);
        }
    }

    /// Whether `status` on `object` is the one we last wrote.
    pub(crate) fn is_own_status(&self, object: &str, status: &serde_json::Value) -> bool {
        let digest = status::status_digest(status);
        self.own_status
            .lock()
            .is_ok_and(|w| w.get(object) == Some(&digest))
    }

    /// Whether the cached `status` of `object` is at least as new as our last write to
    /// it: we wrote nothing there yet, or it is what we last wrote. When it is not, the
    /// watch has not brought our last write back yet, and the cache must not decide that
    /// a write is unneeded (that write's echo plans nothing, so a change whose status
    /// equals what the stale cache shows would never be written).
    pub(crate) fn cache_has_own_status(&self, object: &str, status: &serde_json::Value) -> bool {
        let digest = status::status_digest(status);
        self.own_status
            .lock()
            .is_ok_and(|w| w.get(object).is_none_or(|own| *own == digest))
    }

    /// Forgets what we wrote on an object that is gone.
    pub(crate) fn forget_own_status(&self, object: &str) {
        if let Ok(mut w) = self.own_status.lock() {
            w.remove(object);
        }
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
    /// Lease (if held) is released. Waits at most `grace`; returns whether everything
    /// finished within it.
    pub async fn shutdown(&self, grace: Duration) -> bool {
        self.stop_with(Stop::Requested);
        let tasks = self
            .drain
            .lock()
            .map(|mut d| std::mem::take(&mut *d))
            .unwrap_or_default();
        tokio::time::timeout(grace, futures::future::join_all(tasks))
            .await
            .is_ok()
    }

    /// The metrics.
    #[must_use]
    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.metrics
    }

    /// For a Gateway: how many reconciles ran, and how many write requests (counted at the
    /// HTTP layer) the last one sent.
    #[must_use]
    pub fn last_writes(&self, key: &Key) -> (u64, u64) {
        self.memory
            .read(key, |m| m.runs_and_writes)
            .unwrap_or_default()
    }

    /// Enqueues work unless it is already waiting (work enqueued while it runs runs once
    /// more afterwards).
    pub fn enqueue(&self, w: Work) {
        self.queue.push(w);
        self.metrics
            .queue_depth
            .store(self.queue.waiting(), std::sync::atomic::Ordering::Relaxed);
    }

    /// Enqueues work after `delay`.
    pub fn enqueue_after(self: &Arc<Self>, w: Work, delay: Duration) {
        let me = self.clone();
        tokio::spawn(async move {
            tokio::time::sleep(delay).await;
            me.enqueue(w);
        });
    }

    /// Enqueues every Gateway, class and policy we know: a forced full resync.
    pub fn enqueue_all(&self) {
        let (gws, classes, policies): (Vec<Key>, Vec<String>, Vec<Work>) =
            match self.snapshot.read() {
                Ok(s) => (
                    s.gateways().map(|(k, _)| k.clone()).collect(),
                    s.classes()
                        .filter_map(|c| c.metadata.name.clone())
                        .collect(),
                    policy_work(&s, None),
                ),
                Err(_) => return,
            };
        for c in classes {
            self.enqueue(Work::Class(c));
        }
        for g in gws {
            self.enqueue(Work::Gateway(g));
        }
        for p in policies {
            self.enqueue(p);
        }
    }

    async fn work(self: &Arc<Self>, w: &Work) {
        let started = Instant::now();
        let kind = match w {
            Work::Gateway(_) => "Gateway",
            Work::Class(_) => "GatewayClass",
            Work::Route(r) => r.kind.as_str(),
            Work::Blueprint(_) => "GatewayClassBlueprint",
            Work::Policy(k, _) => k.kind(),
        };
        let result = match w {
            Work::Gateway(k) => {
                // The writes this reconcile sends, counted by the client in its task.
                let (r, written) = queue::count_writes(self.reconcile_gateway(k)).await;
                self.memory.with(k, |m| {
                    m.runs_and_writes.0 += 1;
                    m.runs_and_writes.1 = written;
                });
                r
            }
            Work::Class(n) => self.reconcile_class(n).await,
            Work::Route(k) => self.reconcile_route(k).await,
            Work::Blueprint(n) => self.reconcile_blueprint(n).await,
            Work::Policy(kind, k) => self.reconcile_policy(*kind, k).await,
        };
        match result {
            Ok(requeue) => {
                self.metrics.reconciled(kind, "Ok", started.elapsed());
                if let Ok(mut f) = self.failures.lock() {
                    f.remove(w);
                }
                if let Some(d) = requeue {
                    self.enqueue_after(w.clone(), d);
                }
            }
            Err(e) => {
                self.metrics
                    .reconciled(kind, e.category(), started.elapsed());
                let n = self.failures.lock().map(|mut f| {
                    let n = f.entry(w.clone()).or_default();
                    *n += 1;
                    *n
                });
                let n = n.unwrap_or(1);
                let delay = client::retry_delay(
                    n.saturating_sub(1),
                    Duration::from_secs(1),
                    Duration::from_secs(60),
                    None,
                    client::jitter(),
                );
                if matches!(e, Error::Deleting(_)) {
                    tracing::debug!(?w, "{e}");
                } else {
                    tracing::warn!(?w, error = %e, retry_in = ?delay, "reconcile failed");
                }
                self.enqueue_after(w.clone(), delay);
            }
        }
        tracing::debug!(?w, elapsed = ?started.elapsed(), "reconciled");
    }
}

/// Starts the controller: watches, the worker, the periodic resync and (when configured)
/// the metrics server. Returns the handle; the tasks run until the runtime stops.
///
/// # Errors
/// The metrics address cannot be bound.
pub async fn start(client: Client, opts: Options) -> Result<Arc<Controller>, std::io::Error> {
    let metrics = Arc::new(Metrics::default());
    // Each attempt is counted, in the reconcile's own task too (the retry layer sits
    // outside the counting ones).
    let client =
        queue::write_counting_client(crate::telemetry::counting_client(client, metrics.clone()));
    let identity = lease_identity();
    let fence = opts.leader_election.as_ref().map(|(ns, name)| {
        // The margin covers the renewal request's own latency and clock rate drift.
        Arc::new(LeaseFence::new(
            ns,
            name,
            &identity,
            Duration::from_secs(LEASE_FENCE_MARGIN_SECONDS),
        ))
    });
    let client = client::resilient_client(client, opts.api.clone(), fence.clone());
    let fights = fight::Fights::new(opts.fights.clone());
    let ctl = Arc::new(Controller {
        recorder: events::Events::new(client.clone(), "gatewright", std::env::var("POD_NAME").ok()),
        client,
        snapshot: RwLock::new({
            let mut s = Snapshot::new(&opts.controller_namespace);
            s.track_services();
            s
        }),
        opts,
        metrics,
        queue: queue::Queue::default(),
        kinds: watch::Registrar::default(),
        own_status: Mutex::new(HashMap::new()),
        failures: Mutex::new(HashMap::new()),
        memory: memory::Memory::default(),
        unsynced_watches: std::sync::atomic::AtomicUsize::new(usize::MAX),
        caches_synced: tokio::sync::watch::Sender::new(false),
        child_waiters: Mutex::new(BTreeMap::new()),
        fence,
        stop: tokio::sync::watch::Sender::new(None),
        drain: Mutex::new(Vec::new()),
        fights,
    });
    let source: std::sync::Weak<dyn crate::telemetry::StateSource> = Arc::downgrade(&ctl) as _;
    ctl.metrics.set_state_source(source);
    if let Some(addr) = &ctl.opts.metrics_addr {
        let listener = crate::telemetry::bind(addr)
            .await
            .map_err(std::io::Error::other)?;
        tokio::spawn(crate::telemetry::serve(listener, ctl.metrics.clone()));
    }
    ctl.metrics.leader.store(
        ctl.opts.leader_election.is_none(),
        std::sync::atomic::Ordering::Relaxed,
    );
    watch::start_primary_watches(&ctl);
    // Leader election is joined in the background: its set-up retries (RBAC not seen
    // yet, the API server restarting) without holding up the watches, and the workers
    // wait for the lease.
    let leader = ctl
        .opts
        .leader_election
        .clone()
        .map(|(ns, name)| elect(&ctl, ns, name, identity));
    for _ in 0..ctl.opts.workers.max(1) {
        let worker = ctl.clone();
        let mut leader = leader.clone();
        let mut stopping = ctl.stop.subscribe();
        let handle = tokio::spawn(async move {
            let mut synced = worker.caches_synced.subscribe();
            let stopping = &mut stopping;
            while !*synced.borrow_and_update() {
                tokio::select! {
                    biased;
                    () = stop_asked(stopping) => return,
                    r = synced.changed() => if r.is_err() { return },
                }
            }
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
                let w = tokio::select! {
                    biased;
                    () = stop_asked(stopping) => return,
                    w = worker.queue.pop() => w,
                };
                worker
                    .metrics
                    .queue_depth
                    .store(worker.queue.waiting(), std::sync::atomic::Ordering::Relaxed);
                worker.work(&w).await;
                worker.queue.done(&w);
            }
        });
        if let Ok(mut d) = ctl.drain.lock() {
            d.push(handle);
        }
    }
    let resync = ctl.clone();
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(resync.opts.resync);
        tick.tick().await;
        loop {
            tick.tick().await;
            resync.enqueue_all();
        }
    });
    Ok(ctl)
}

/// Status work of every policy, or of those in `namespace` and the cluster-wide ones (the
/// controller namespace's GatewayClassConfigs), which are all a change there can affect.
pub(crate) fn policy_work(s: &Snapshot, namespace: Option<&str>) -> Vec<Work> {
    let mut a = crate::plan::affected::Affected::default();
    a.policies(s, namespace);
    a.class_configs
        .into_iter()
        .map(|k| Work::Policy(policy::PolicyKind::ClassConfig, k))
        .chain(
            a.gateway_configs
                .into_iter()
                .map(|k| Work::Policy(policy::PolicyKind::GatewayConfig, k)),
        )
        .collect()
}

/// Resolves once a stop is asked for.
async fn stop_asked(rx: &mut tokio::sync::watch::Receiver<Option<Stop>>) {
    while rx.borrow_and_update().is_none() {
        if rx.changed().await.is_err() {
            return;
        }
    }
}

/// Seconds before the Lease's expiry at which this replica stops writing, counted from the
/// moment its last successful renewal was sent.
const LEASE_FENCE_MARGIN_SECONDS: u64 = 3;

/// Unique per start, as client-go does (host_uuid): a restarted replica with the same Pod
/// name must not take over a lease its previous self may still be writing under.
fn lease_identity() -> String {
    let nonce = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!(
        "{}_{nonce:x}",
        std::env::var("POD_NAME").unwrap_or_else(|_| format!("gatewright-{}", std::process::id()))
    )
}

/// Joins leader election on Lease `ns/name`. Returns a channel that is true while this
/// process holds the lease. Setting it up (reading or creating the Lease) is a start-up
/// step ([`startup`]): a transient failure (403 while RBAC propagates, the API server
/// restarting) is retried with backoff while `/readyz` says why; a failure that cannot
/// fix itself (an invalid Lease name) stops the controller. Gaining the lease re-plans
/// everything; losing it, or the election task ending, stops the controller
/// ([`Controller::stopped`]; a fresh start rebuilds the caches and rejoins). On shutdown
/// the Lease is released.
fn elect(
    ctl: &Arc<Controller>,
    ns: String,
    name: String,
    identity: String,
) -> tokio::sync::watch::Receiver<bool> {
    let (holder_tx, holder_rx) = tokio::sync::watch::channel(false);
    let step = format!("leader election on Lease {ns}/{name}");
    ctl.metrics.startup.begin(&step);
    let me = ctl.clone();
    let handle = tokio::spawn(async move {
        let mut stopping = me.stop.subscribe();
        let manager = tokio::select! {
            biased;
            () = stop_asked(&mut stopping) => None,
            m = lease_manager(&me, &step, &ns, &name, &identity) => m,
        };
        let Some(manager) = manager else {
            return;
        };
        tracing::info!(lease = %format!("{ns}/{name}"), "waiting for the lease");
        let (mut rx, task) = manager.watch().await;
        let mut task = std::pin::pin!(task);
        let mut was = false;
        loop {
            tokio::select! {
                biased;
                () = stop_asked(&mut stopping) => break,
                res = &mut task => {
                    if let Some(f) = &me.fence {
                        f.close();
                    }
                    tracing::error!(?res, "leader election task ended; stopping");
                    me.stop_with(Stop::Failed("leader election ended".into()));
                    return;
                }
                r = rx.changed() => if r.is_err() { break },
            }
            let now = *rx.borrow_and_update();
            me.metrics
                .leader
                .store(now, std::sync::atomic::Ordering::Relaxed);
            holder_tx.send_replace(now);
            if now && !was {
                tracing::info!(%identity, "acquired the lease; writing from now on");
                me.enqueue_all();
            } else if was && !now {
                tracing::error!(%identity, "lost the lease; stopping");
                if let Some(f) = &me.fence {
                    f.close();
                }
                me.stop_with(Stop::Failed("lost the Lease".into()));
                break;
            }
            was = now;
        }
        // Stopping: dropping the receiver makes the manager release the Lease and end.
        if let Some(f) = &me.fence {
            f.close();
        }
        drop(rx);
        let _ = task.await;
        tracing::info!("left leader election");
    });
    if let Ok(mut d) = ctl.drain.lock() {
        d.push(handle);
    }
    holder_rx
}

/// Builds the lease manager (it reads the Lease, or creates it), retrying transient
/// failures with capped, jittered backoff. `None`: a failure that cannot fix itself (the
/// controller is stopped with it).
async fn lease_manager(
    ctl: &Arc<Controller>,
    step: &str,
    ns: &str,
    name: &str,
    identity: &str,
) -> Option<kube_lease_manager::LeaseManager> {
    let mut attempt = 0u32;
    loop {
        let built = kube_lease_manager::LeaseManagerBuilder::new(ctl.client.clone(), name)
            .with_namespace(ns)
            .with_identity(identity)
            .with_duration(15)
            .with_grace(5)
            .build()
            .await;
        let err = match built {
            Ok(m) => {
                let failures = ctl.metrics.startup.succeeded(step);
                if failures > 0 {
                    tracing::info!(%step, failures, "set up after failing; joined leader election");
                }
                return Some(m);
            }
            Err(e) => e,
        };
        let (reason, transient) = match &err {
            kube_lease_manager::LeaseManagerError::KubeError(e) => {
                (startup::failure_kind(e), startup::is_transient(e))
            }
            // Another replica created the Lease between our read and our create.
            kube_lease_manager::LeaseManagerError::LeaseAlreadyExists(_) => ("Conflict", true),
            _ => ("Other", true),
        };
        let message = format!("failed to set up {step}: {err}");
        if !transient {
            tracing::error!(%step, %reason, "{message}; this will not fix itself, stopping");
            ctl.stop_with(Stop::Failed(message));
            return None;
        }
        attempt = attempt.saturating_add(1);
        let delay = startup::delay(attempt, client::jitter());
        if ctl.metrics.startup.failed(step, reason, &message) {
            tracing::warn!(%step, %reason, retry_in = ?delay, "{message}; retrying until it works");
        }
        tokio::time::sleep(delay).await;
    }
}

/// Local testing only: writes on every child we manage the status its downstream
/// controller would write ([`crate::simulate`]). Returns how many children it marked.
///
/// # Errors
/// Discovery or a status write failed.
pub async fn simulate_ready(client: &Client) -> Result<usize, Error> {
    simulate_ready_where(client, None).await
}

/// [`simulate_ready`] for the children of the Gateways in `namespace` only: the
/// namespaced children in it and the cluster-scoped children whose Gateway is in it (by
/// the Gateway UID label); `None`: everywhere.
///
/// # Errors
/// Discovery, listing the namespace's Gateways or a status write failed.
pub async fn simulate_ready_where(
    client: &Client,
    namespace: Option<&str>,
) -> Result<usize, Error> {
    use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams};
    let discovery = kube::discovery::Discovery::new(client.clone())
        .run()
        .await
        .map_err(|e| Error::kube("discover API resources", e))?;
    // The UIDs of the namespace's Gateways, to pick their cluster-scoped children.
    let gateway_uids: Option<std::collections::BTreeSet<String>> = match namespace {
        Some(ns) => Some(
            Api::<gateway_api::apis::standard::gateways::Gateway>::namespaced(client.clone(), ns)
                .list_metadata(&ListParams::default())
                .await
                .map_err(|e| Error::kube(format!("list the Gateways in {ns}"), e))?
                .items
                .into_iter()
                .filter_map(|g| g.metadata.uid)
                .collect(),
        ),
        None => None,
    };
    let selector = format!(
        "{}={}",
        crate::render::labels::MANAGED_BY,
        crate::render::labels::MANAGED_BY_VALUE
    );
    let mut n = 0;
    for group in discovery.groups() {
        for (ar, caps) in group.recommended_resources() {
            if !caps.supports_operation(kube::discovery::verbs::LIST)
                || caps.subresources.is_empty() && ar.kind != "Ingress"
            {
                continue;
            }
            let api: Api<DynamicObject> = match namespace {
                Some(ns) if caps.scope == kube::discovery::Scope::Namespaced => {
                    Api::namespaced_with(client.clone(), ns, &ar)
                }
                _ => Api::all_with(client.clone(), &ar),
            };
            let Ok(list) = api.list(&ListParams::default().labels(&selector)).await else {
                continue;
            };
            for obj in list {
                if caps.scope == kube::discovery::Scope::Cluster
                    && gateway_uids.as_ref().is_some_and(|uids| {
                        !kube::ResourceExt::labels(&obj)
                            .get(crate::render::labels::GATEWAY_UID)
                            .is_some_and(|u| uids.contains(u))
                    })
                {
                    continue;
                }
                let mut v = serde_json::to_value(&obj).unwrap_or(serde_json::Value::Null);
                // Items of a built-in kind's list come without apiVersion and kind.
                v["apiVersion"] = serde_json::Value::String(ar.api_version.clone());
                v["kind"] = serde_json::Value::String(ar.kind.clone());
                let Some(status) = crate::simulate::ready_status(&v) else {
                    continue;
                };
                let ns = obj.metadata.namespace.clone().unwrap_or_default();
                let api: Api<DynamicObject> = if ns.is_empty() {
                    Api::all_with(client.clone(), &ar)
                } else {
                    Api::namespaced_with(client.clone(), &ns, &ar)
                };
                let name = obj.metadata.name.clone().unwrap_or_default();
                match api
                    .patch_status(
                        &name,
                        &PatchParams::default(),
                        &Patch::Merge(&serde_json::json!({ "status": status })),
                    )
                    .await
                {
                    Ok(_) => n += 1,
                    // Deleted since it was listed: nothing to mark.
                    Err(kube::Error::Api(s)) if s.code == 404 => {}
                    Err(e) => {
                        return Err(Error::kube(
                            format!("write the status of {} {name}", ar.kind),
                            e,
                        ));
                    }
                }
            }
        }
    }
    Ok(n)
}
