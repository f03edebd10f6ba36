//! One API server's side of the controller: its client (the whole stack, built in one
//! place by [`client::stack`]), its snapshot and indexes, the child-kind registrar, the
//! echo memory of our own status writes, what each Gateway's reconciles keep between runs
//! ([`memory`](super::memory)), and the writers (apply, prune, status, Events), which are
//! the `impl Cluster` blocks of `reconcile.rs`, `apply.rs`, `status.rs`, `teardown.rs`,
//! `class.rs` and `policy.rs`. A reconcile is [`Cluster::run`]: a function of the cluster
//! and one work item. Two clusters in one process share the metrics registry and the
//! [`Runner`](super::runner::Runner)'s queue their work waits in, and reach each other
//! only through the runner's `Fleet` ([`Reach`]: the clusters served, what the hub knows
//! of the fleet); every child write asks [`Cluster::target`] whether this replica writes there
//! ([`crate::plan::placement::writes_here`]).
//!
//! Nothing of a cluster is worked on before every one of its primary watches has listed:
//! work taken from the queue before then is parked, and queued again (with every Gateway,
//! class and policy) once the caches are synced, so a plan never sees a half-filled
//! snapshot (no routes yet, say) and prunes or reports from it.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use kube::Client;

use super::child_kinds::ChildKinds;
use super::client::{self, LeaseFence};
use super::common::{
    ClusterId, Error, MEMO_MIN_ROUTES, NEW_GATEWAY_SETTLE, Options, Task, Work, policy_work,
};
use super::memory::RouteStatusSeen;
use super::{echo, events, fight, memory, queue};
use crate::snapshot::{Key, RouteKey, Snapshot};
use crate::telemetry::Metrics;

/// How a cluster reaches the others of its runner, and what the hub knows of the fleet:
/// what the runner's `Fleet` (`fleet.rs`) gives a cluster. A trait, so that a cluster
/// names no type above it.
pub(super) trait Reach: Send + Sync {
    /// A cluster served or observed, by id.
    fn get(&self, id: &ClusterId) -> Option<Arc<Cluster>>;
    /// Every member served or observed.
    fn members(&self) -> Vec<Arc<Cluster>>;
    /// While the inventory has not given the members yet: how much longer a Gateway that
    /// places templates waits for it.
    fn unknown_for(&self) -> Option<Duration>;
    /// What teardowns left in members not served ([`super::left`]).
    fn left(&self) -> &super::left::Left;
    /// What was placed for the Gateway of `uid` in members let go (no longer mirrored in
    /// the hub): a teardown leaves it there.
    fn placed_in_let_go(&self, uid: &str) -> Vec<crate::snapshot::ObjectKey>;
    /// The hub.
    fn hub(&self) -> Option<Arc<Cluster>> {
        self.get(&ClusterId::local())
    }
}

/// One API server's side of the controller (see the module docs).
pub struct Cluster {
    pub(super) id: ClusterId,
    pub(super) client: Client,
    pub(super) opts: Options,
    pub(super) snapshot: RwLock<Snapshot>,
    pub(super) metrics: Arc<Metrics>,
    /// The runner's queue, shared by every cluster.
    queue: Arc<queue::Queue>,
    pub(super) kinds: ChildKinds,
    pub(super) recorder: events::Events,
    /// What each Gateway's reconciles keep between runs.
    pub(super) memory: memory::Memory,
    /// The status we last wrote per object, to know its watch echo.
    pub(super) own_status: echo::OwnStatus,
    /// Primary watches that have not listed everything once yet.
    pub(super) unsynced_watches: AtomicUsize,
    /// Whether the rest of the primary watches of a fleet member were started, and how
    /// many of them have not listed yet.
    pub(super) rest_started: std::sync::atomic::AtomicBool,
    pub(super) unsynced_rest: AtomicUsize,
    /// The primary sources watched, by name.
    pub(super) primaries: Mutex<Vec<String>>,
    /// Work taken from the queue before the caches were synced, to run once they are;
    /// `None` from then on.
    parked: Mutex<Option<BTreeSet<Work>>>,
    /// Gateways whose plan found a child held by another parent, by that child: when the
    /// child goes (its holder torn down), they are planned again and may take it.
    child_waiters: Mutex<BTreeMap<crate::snapshot::ObjectKey, BTreeSet<Key>>>,
    /// Fights over fields of children with other field managers.
    pub(super) fights: fight::Fights,
    /// The primary watches' tasks, stopped when the cluster is no longer served.
    tasks: Mutex<Vec<tokio::task::AbortHandle>>,
    /// The clusters of the runner, this one among them (set once served): the only way
    /// to another cluster (fleet mode's placement).
    fleet: std::sync::OnceLock<std::sync::Weak<dyn Reach>>,
    /// Which of its watches fail, by kind of failure: a member's are logged once per
    /// kind of failure, not once per watch.
    pub(super) watch_failures: super::startup::FailureLog,
    /// Since when its watches find the API server unreachable, and the last error.
    unreachable_since: Mutex<Option<(std::time::Instant, String)>>,
    /// A member whose Lease another replica holds (fleet mode with leader election): only
    /// the kinds the hub places there are watched, mirrored to the hub so that every
    /// replica plans placement from the same view; nothing is written to it from here.
    pub(super) observer: bool,
}

/// How long a member's watches must find its API server unreachable before placement
/// counts it as not served (its addresses leave the DNS records that list them).
pub(super) const UNREACHABLE_AFTER: std::time::Duration = std::time::Duration::from_secs(5);

impl Cluster {
    /// A cluster reached through `client` (its stack is built here, with `fence` on
    /// writes), queueing its work in `queue`. Its watches are not started yet
    /// (`watch::start_primary_watches`).
    pub(super) fn new(
        id: ClusterId,
        client: Client,
        opts: Options,
        metrics: Arc<Metrics>,
        queue: Arc<queue::Queue>,
        fence: Option<Arc<LeaseFence>>,
        agent: &str,
    ) -> Self {
        let client = client::stack(client, &metrics, opts.api.clone(), fence, agent);
        Self {
            id,
            recorder: events::Events::new(
                client.clone(),
                "gatewright",
                std::env::var("POD_NAME").ok(),
            ),
            client,
            snapshot: RwLock::new({
                let mut s = Snapshot::new(&opts.controller_namespace);
                s.track_services();
                s
            }),
            fights: fight::Fights::new(opts.fights.clone()),
            opts,
            metrics,
            queue,
            kinds: ChildKinds::default(),
            own_status: echo::OwnStatus::default(),
            memory: memory::Memory::default(),
            unsynced_watches: AtomicUsize::new(usize::MAX),
            rest_started: std::sync::atomic::AtomicBool::new(false),
            unsynced_rest: AtomicUsize::new(usize::MAX),
            primaries: Mutex::new(Vec::new()),
            parked: Mutex::new(Some(BTreeSet::new())),
            child_waiters: Mutex::new(BTreeMap::new()),
            tasks: Mutex::new(Vec::new()),
            fleet: std::sync::OnceLock::new(),
            watch_failures: super::startup::FailureLog::default(),
            unreachable_since: Mutex::new(None),
            observer: false,
        }
    }

    /// A watch found the API server unreachable (`why`).
    pub(super) fn unreachable(&self, why: &str) {
        if let Ok(mut u) = self.unreachable_since.lock() {
            match &mut *u {
                Some((_, last)) => why.clone_into(last),
                None => *u = Some((std::time::Instant::now(), why.to_owned())),
            }
        }
    }

    /// A watch works again.
    pub(super) fn reachable(&self) {
        if let Ok(mut u) = self.unreachable_since.lock() {
            *u = None;
        }
    }

    /// Why the API server counts as unreachable: its watches have found it so for at
    /// least [`UNREACHABLE_AFTER`], none working again since.
    pub(super) fn unreachable_why(&self) -> Option<String> {
        let u = self.unreachable_since.lock().ok()?;
        let (since, why) = u.as_ref()?;
        let for_ = since.elapsed();
        (for_ >= UNREACHABLE_AFTER).then(|| format!("unreachable for {} s: {why}", for_.as_secs()))
    }

    /// Lets this cluster reach the others of its runner (`Fleet::insert`).
    pub(super) fn link(&self, fleet: std::sync::Weak<dyn Reach>) {
        let _ = self.fleet.set(fleet);
    }

    /// The runner's clusters, once this one is served.
    pub(super) fn fleet(&self) -> Option<Arc<dyn Reach>> {
        self.fleet.get()?.upgrade()
    }

    /// The cluster a child lives in, to write it: this one, or the member a placed child
    /// names ([`crate::snapshot::ObjectKey::cluster`]), as long as this replica writes
    /// there ([`crate::plan::placement::writes_here`]).
    ///
    /// # Errors
    /// Another replica writes there ([`Error::Elsewhere`]: the hub's own objects while
    /// this one does not lead, a member whose Lease another holds), or the member is not
    /// served by this process (not engaged: unhealthy, unreachable, its profile gone).
    pub(super) fn target(
        self: &Arc<Self>,
        key: &crate::snapshot::ObjectKey,
    ) -> Result<Arc<Cluster>, Error> {
        let at = if key.cluster.is_empty() || key.cluster == self.id.as_str() {
            self.clone()
        } else {
            self.sibling(&key.cluster).ok_or_else(|| {
                Error::Apply(format!(
                    "{key}: member cluster {} is not served by this process",
                    key.cluster
                ))
            })?
        };
        at.writes_here().map_err(Error::Elsewhere)?;
        Ok(at)
    }

    /// Another cluster of this process, by name: a member served or observed.
    pub(super) fn sibling(&self, cluster: &str) -> Option<Arc<Cluster>> {
        self.fleet()?.get(&ClusterId::new(cluster))
    }

    /// Whether this replica writes to this cluster now
    /// ([`crate::plan::placement::writes_here`]).
    ///
    /// # Errors
    /// Another replica does, with which.
    pub(super) fn writes_here(&self) -> Result<(), String> {
        crate::plan::placement::writes_here(
            self.is_member().then(|| self.id.as_str()),
            self.metrics
                .leader
                .load(std::sync::atomic::Ordering::Relaxed),
            !self.observer,
        )
    }

    /// The hub, for a member (what it sees of placed objects is mirrored there).
    pub(super) fn hub(&self) -> Option<Arc<Cluster>> {
        if !self.is_member() {
            return None;
        }
        self.fleet()?.hub()
    }

    /// Every member served, with its id.
    pub(super) fn members(&self) -> Vec<Arc<Cluster>> {
        self.fleet().map(|f| f.members()).unwrap_or_default()
    }

    /// The hub of a fleet whose inventory has not given the members yet: how long a
    /// Gateway that places templates is to wait before it is planned again (at most
    /// [`FLEET_FIRST_VIEW`](super::fleet::FLEET_FIRST_VIEW) from the start). `None`: not
    /// a fleet's hub, or known.
    pub(super) fn fleet_unknown(&self) -> Option<std::time::Duration> {
        if self.opts.fleet.is_none() || self.is_member() {
            return None;
        }
        self.fleet()?.unknown_for()
    }

    /// The hub: puts the fleet placement reads in the snapshot (`members`: served or why
    /// not); re-plans every Gateway when it changed.
    pub(super) fn put_fleet(&self, members: Vec<crate::snapshot::fleet::FleetMember>) {
        let changed = self.snapshot.write().is_ok_and(|mut s| {
            let was = s.places();
            s.allow_placement();
            let before: Vec<_> = s.fleet().values().cloned().collect();
            let changed = before != members || was != s.places();
            if changed {
                s.set_fleet(members);
            }
            changed
        });
        if changed {
            self.enqueue_all();
        }
    }

    /// Forgets what a member no longer served had mirrored here, and re-plans the
    /// Gateways that placed it (their placement now says the member is not served).
    /// Returns what was forgotten: each object with its Gateway's UID.
    pub(super) fn forget_member(
        &self,
        id: &ClusterId,
    ) -> Vec<(crate::snapshot::ObjectKey, String)> {
        let (placed, gateways) = self
            .snapshot
            .write()
            .map(|mut s| (s.placed_in(id.as_str()), s.forget_cluster(id.as_str())))
            .unwrap_or_default();
        for g in gateways {
            self.enqueue(Work::Gateway(g));
        }
        placed
    }

    /// The span this cluster's work and watches log in: none for the local cluster (its
    /// logs read as they always did), the cluster's name for the others.
    pub(super) fn span(&self) -> tracing::Span {
        if !self.is_member() {
            tracing::Span::none()
        } else {
            tracing::info_span!("cluster", name = %self.id)
        }
    }

    /// Keeps the handles of tasks to stop with the cluster.
    pub(super) fn keep_tasks(&self, tasks: Vec<tokio::task::AbortHandle>) {
        if let Ok(mut t) = self.tasks.lock() {
            t.extend(tasks);
        }
    }

    /// Stops every watch of this cluster (it is no longer served). Work of it still in
    /// the queue is dropped when a worker takes it.
    pub(super) fn stop(&self) {
        if let Ok(mut t) = self.tasks.lock() {
            for task in t.drain(..) {
                task.abort();
            }
        }
        self.kinds.stop_all();
    }

    /// Whether this is a fleet member, not the cluster `gatewright run` is pointed at: its
    /// watches hold no readiness, and only those that tell whether a GatewayClass or
    /// Gateway of ours is there run until one is (`watch::start_primary_watches`).
    #[must_use]
    pub fn is_member(&self) -> bool {
        self.id != ClusterId::local()
    }

    /// The primary sources this cluster watches, by name (a fleet member: only those a
    /// Gateway needs first, until a Gateway of ours appears there).
    #[must_use]
    pub fn primary_watches(&self) -> Vec<String> {
        self.primaries.lock().map(|p| p.clone()).unwrap_or_default()
    }

    /// Which cluster this is.
    #[must_use]
    pub fn id(&self) -> &ClusterId {
        &self.id
    }

    /// The client of this cluster (the whole stack).
    pub(super) fn client(&self) -> &Client {
        &self.client
    }

    /// How many work items wait in the queue (of every cluster).
    pub(super) fn queued(&self) -> u64 {
        self.queue.waiting()
    }

    /// Parks `w` if the caches are not synced yet (true), to be queued once they are.
    pub(super) fn park(&self, w: &Work) -> bool {
        let Ok(mut p) = self.parked.lock() else {
            return false;
        };
        match p.as_mut() {
            Some(parked) => {
                parked.insert(w.clone());
                true
            }
            None => false,
        }
    }

    /// Every primary watch has listed: what was parked is queued, with everything known.
    pub(super) fn caches_synced(&self) {
        let parked = self
            .parked
            .lock()
            .ok()
            .and_then(|mut p| p.take())
            .unwrap_or_default();
        tracing::info!(cluster = %self.id, parked = parked.len(), "caches synced");
        for w in parked {
            self.enqueue(w);
        }
        self.enqueue_all();
    }

    /// One reconcile: `w` planned and executed on this cluster. `Ok(Some(d))`: run it
    /// again after `d`.
    ///
    /// # Errors
    /// What failed; the runner retries with backoff.
    pub(super) async fn run(self: &Arc<Self>, w: &Work) -> Result<Option<Duration>, Error> {
        match w {
            Work::Gateway(k) => {
                // The writes this reconcile sends, counted by the client in its task.
                let (r, written) = client::count_writes(self.reconcile_gateway(k)).await;
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
        }
    }

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
    /// entry, as the plan read it, and our entries are those of the last write or check.
    /// Each comes with that entry, to record once the write went through. (A route changed
    /// since the plan is planned again: its new entry is not the one recorded.)
    pub(crate) fn route_status_to_write<'a>(
        &self,
        gateway: &Key,
        parents: &'a [crate::plan::RouteParents],
    ) -> Vec<(
        &'a crate::plan::RouteParents,
        Option<Arc<crate::snapshot::RouteEntry>>,
    )> {
        let pick = |seen: Option<&HashMap<RouteKey, RouteStatusSeen>>| {
            parents
                .iter()
                .filter(|p| {
                    let unchanged = match (&p.entry, seen.and_then(|s| s.get(&p.route))) {
                        (Some(e), Some(s)) => {
                            // `Arc`'s `==` compares addresses first (the entries are `Eq`).
                            std::ptr::eq(s.route.as_ptr(), Arc::as_ptr(e)) && s.entries == p.entries
                        }
                        _ => false,
                    };
                    !unchanged
                })
                .map(|p| (p, p.entry.clone()))
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

    /// For a Gateway: how many reconciles ran, and how many write requests (counted at the
    /// HTTP layer) the last one sent.
    #[must_use]
    pub fn last_writes(&self, key: &Key) -> (u64, u64) {
        self.memory
            .read(key, |m| m.runs_and_writes)
            .unwrap_or_default()
    }

    /// Enqueues work of this cluster unless it is already waiting (work enqueued while it
    /// runs runs once more afterwards).
    pub fn enqueue(&self, w: Work) {
        self.queue.push(Task {
            cluster: self.id.clone(),
            work: w,
        });
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

    /// Enqueues every Gateway, class and policy of this cluster: a forced full resync.
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
}
