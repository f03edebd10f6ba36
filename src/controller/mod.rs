//! The cluster shell around the planner: watches feed one [`Snapshot`]; every change
//! enqueues exactly the parents it affects; a worker plans each parent and executes the
//! plan (server-side apply of what changed, prune after every apply succeeded, status
//! written only when it changed), emits Events on transitions, and counts what it did.
//!
//! Child kinds are watched as plans name them (a registrar, label-selected to our
//! children); a kind the API server does not serve is reported on the Gateway and looked
//! up again until it appears.

mod apply;
mod status;
mod watch;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use kube::Client;
use kube::runtime::events::{Recorder, Reporter};
use tokio::sync::mpsc;

use crate::snapshot::{Key, RouteKey, Snapshot};
use crate::telemetry::Metrics;

pub use apply::is_subset;

/// Field manager of every server-side apply.
pub const FIELD_MANAGER: &str = "gatewright";
pub use crate::plan::labels::GATEWAY_FINALIZER;

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
}

impl Default for Options {
    fn default() -> Self {
        Self {
            controller_namespace: "gatewright-system".into(),
            metrics_addr: None,
            resync: Duration::from_secs(3600),
            leader_election: None,
            deletion_stuck_after: Duration::from_secs(120),
        }
    }
}

/// What the last reconcile of a Gateway reported, to emit Events only on transitions.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Reported {
    programmed: String,
    errors: BTreeSet<String>,
    missing: BTreeSet<String>,
    /// Replacements in progress: `template=to` -> where it stands.
    rollouts: BTreeMap<String, status::Progress>,
    /// Children (object keys) whose deletion hangs during a teardown.
    stuck_deletions: BTreeSet<String>,
}

/// The running controller's shared state.
pub struct Controller {
    client: Client,
    opts: Options,
    snapshot: RwLock<Snapshot>,
    metrics: Arc<Metrics>,
    tx: mpsc::UnboundedSender<Work>,
    pending: Mutex<BTreeSet<Work>>,
    kinds: watch::Registrar,
    recorder: Recorder,
    reported: Mutex<HashMap<Key, Reported>>,
    failures: Mutex<HashMap<Work, u32>>,
    uid_to_gateway: RwLock<BTreeMap<String, Key>>,
    last_writes: Mutex<HashMap<Key, (u64, u64)>>,
    /// The status we last wrote per object (`Kind/namespace/name`), normalized: a watch
    /// event that brings exactly it (and no other change) is our own echo.
    own_status: Mutex<HashMap<String, serde_json::Value>>,
    /// Primary watches that have listed everything once.
    synced_watches: std::sync::atomic::AtomicUsize,
    /// True once every primary watch has listed: nothing is planned before, so a plan
    /// never sees a half-filled snapshot (no routes yet, say) and prunes or reports from it.
    caches_synced: tokio::sync::watch::Sender<bool>,
    /// Gateways whose plan found a child held by another parent, by that child: when the
    /// child goes (its holder torn down), they are planned again and may take it.
    child_waiters: Mutex<BTreeMap<crate::snapshot::ObjectKey, BTreeSet<Key>>>,
}

impl Controller {
    /// The child kinds watched (or being looked up) now, as `(apiVersion, kind)`.
    #[must_use]
    pub fn watched_kinds(&self) -> Vec<(String, String)> {
        self.kinds.watched()
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
        if let Ok(mut w) = self.own_status.lock() {
            w.insert(object, status::norm_status(status));
        }
    }

    /// Whether `status` on `object` is the one we last wrote.
    pub(crate) fn is_own_status(&self, object: &str, status: &serde_json::Value) -> bool {
        self.own_status
            .lock()
            .is_ok_and(|w| w.get(object) == Some(&status::norm_status(status)))
    }

    /// Forgets what we wrote on an object that is gone.
    pub(crate) fn forget_own_status(&self, object: &str) {
        if let Ok(mut w) = self.own_status.lock() {
            w.remove(object);
        }
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
        self.last_writes
            .lock()
            .ok()
            .and_then(|m| m.get(key).copied())
            .unwrap_or_default()
    }

    /// Enqueues work unless it is already waiting.
    pub fn enqueue(&self, w: Work) {
        let fresh = self.pending.lock().is_ok_and(|mut p| p.insert(w.clone()));
        if fresh {
            self.metrics
                .queue_depth
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let _ = self.tx.send(w);
        }
    }

    /// Enqueues work after `delay`.
    pub fn enqueue_after(self: &Arc<Self>, w: Work, delay: Duration) {
        let me = self.clone();
        tokio::spawn(async move {
            tokio::time::sleep(delay).await;
            me.enqueue(w);
        });
    }

    /// Enqueues every Gateway (and class) we know: a forced full resync.
    pub fn enqueue_all(&self) {
        let (gws, classes): (Vec<Key>, Vec<String>) = match self.snapshot.read() {
            Ok(s) => (
                s.gateways().map(|(k, _)| k.clone()).collect(),
                s.classes()
                    .filter_map(|c| c.metadata.name.clone())
                    .collect(),
            ),
            Err(_) => return,
        };
        for c in classes {
            self.enqueue(Work::Class(c));
        }
        for g in gws {
            self.enqueue(Work::Gateway(g));
        }
    }

    async fn work(self: &Arc<Self>, w: &Work) {
        let started = Instant::now();
        let kind = match w {
            Work::Gateway(_) => "Gateway",
            Work::Class(_) => "GatewayClass",
            Work::Route(_) => "HTTPRoute",
            Work::Blueprint(_) => "GatewayClassBlueprint",
        };
        let writes_before = self.metrics.writes();
        let result = match w {
            Work::Gateway(k) => {
                let r = self.reconcile_gateway(k).await;
                // One worker: every write in between belongs to this reconcile.
                let written = self.metrics.writes() - writes_before;
                if let Ok(mut m) = self.last_writes.lock() {
                    let e = m.entry(k.clone()).or_default();
                    e.0 += 1;
                    e.1 = written;
                }
                r
            }
            Work::Class(n) => self.reconcile_class(n).await,
            Work::Route(k) => self.reconcile_route(k).await,
            Work::Blueprint(n) => self.reconcile_blueprint(n).await,
        };
        match result {
            Ok(requeue) => {
                self.metrics.reconciled(kind, "Ok");
                if let Ok(mut f) = self.failures.lock() {
                    f.remove(w);
                }
                if let Some(d) = requeue {
                    self.enqueue_after(w.clone(), d);
                }
            }
            Err(e) => {
                self.metrics.reconciled(kind, e.category());
                let n = self.failures.lock().map(|mut f| {
                    let n = f.entry(w.clone()).or_default();
                    *n += 1;
                    *n
                });
                let n = n.unwrap_or(1);
                let delay = Duration::from_millis(500u64.saturating_mul(1 << n.min(9)))
                    .min(Duration::from_secs(60));
                if matches!(e, Error::Deleting(_)) {
                    tracing::debug!(?w, "{e}");
                } else {
                    tracing::warn!(?w, error = %e, retry_in = ?delay, "reconcile failed");
                }
                self.enqueue_after(w.clone(), delay);
            }
        }
        tracing::debug!(elapsed = ?started.elapsed(), "reconciled");
    }
}

/// Starts the controller: watches, the worker, the periodic resync and (when configured)
/// the metrics server. Returns the handle; the tasks run until the runtime stops.
///
/// # Errors
/// The metrics address cannot be bound.
pub async fn start(client: Client, opts: Options) -> Result<Arc<Controller>, std::io::Error> {
    let (tx, mut rx) = mpsc::unbounded_channel();
    let metrics = Arc::new(Metrics::default());
    let client = crate::telemetry::counting_client(client, metrics.clone());
    let reporter = Reporter {
        controller: "gatewright".into(),
        instance: std::env::var("POD_NAME").ok(),
    };
    let ctl = Arc::new(Controller {
        recorder: Recorder::new(client.clone(), reporter),
        client,
        snapshot: RwLock::new({
            let mut s = Snapshot::new(&opts.controller_namespace);
            s.track_services();
            s
        }),
        opts,
        metrics,
        tx,
        pending: Mutex::new(BTreeSet::new()),
        kinds: watch::Registrar::default(),
        reported: Mutex::new(HashMap::new()),
        own_status: Mutex::new(HashMap::new()),
        failures: Mutex::new(HashMap::new()),
        uid_to_gateway: RwLock::new(BTreeMap::new()),
        last_writes: Mutex::new(HashMap::new()),
        synced_watches: std::sync::atomic::AtomicUsize::new(0),
        caches_synced: tokio::sync::watch::Sender::new(false),
        child_waiters: Mutex::new(BTreeMap::new()),
    });
    if let Some(addr) = ctl.opts.metrics_addr.clone() {
        let listener_metrics = ctl.metrics.clone();
        let l = tokio::net::TcpListener::bind(&addr).await?;
        drop(l);
        tokio::spawn(async move {
            if let Err(e) = crate::telemetry::serve(&addr, listener_metrics).await {
                tracing::error!(error = %e, "metrics server stopped");
            }
        });
    }
    watch::start_primary_watches(&ctl);
    let mut leader = match &ctl.opts.leader_election {
        Some((ns, name)) => Some(elect(&ctl, ns, name).await?),
        None => None,
    };
    let worker = ctl.clone();
    tokio::spawn(async move {
        let mut synced = worker.caches_synced.subscribe();
        while !*synced.borrow_and_update() {
            if synced.changed().await.is_err() {
                return;
            }
        }
        while let Some(w) = rx.recv().await {
            // Only the lease holder writes: wait for the lease before working.
            if let Some(l) = &mut leader {
                while !*l.borrow_and_update() {
                    if l.changed().await.is_err() {
                        tracing::error!("leader election stopped; exiting");
                        std::process::exit(1);
                    }
                }
            }
            if let Ok(mut p) = worker.pending.lock() {
                p.remove(&w);
            }
            worker
                .metrics
                .queue_depth
                .fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
            worker.work(&w).await;
        }
    });
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

/// Joins leader election on Lease `ns/name`. Returns a channel that is true while this
/// process holds the lease. Gaining it re-plans everything; losing it, or the election task
/// ending, exits the process (a fresh start rebuilds the caches and rejoins).
async fn elect(
    ctl: &Arc<Controller>,
    ns: &str,
    name: &str,
) -> Result<tokio::sync::watch::Receiver<bool>, std::io::Error> {
    // Unique per start, as client-go does (host_uuid): a restarted replica with the same
    // Pod name must not take over a lease its previous self may still be writing under.
    let nonce = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let identity = format!(
        "{}_{nonce:x}",
        std::env::var("POD_NAME").unwrap_or_else(|_| format!("gatewright-{}", std::process::id()))
    );
    let manager = kube_lease_manager::LeaseManagerBuilder::new(ctl.client.clone(), name)
        .with_namespace(ns)
        .with_identity(identity.clone())
        .with_duration(15)
        .with_grace(5)
        .build()
        .await
        .map_err(|e| {
            std::io::Error::other(format!(
                "failed to set up leader election on Lease {ns}/{name}: {e}"
            ))
        })?;
    let (rx, task) = manager.watch().await;
    tokio::spawn(async move {
        let res = task.await;
        tracing::error!(?res, "leader election task ended; exiting");
        std::process::exit(1);
    });
    let mut follow = rx.clone();
    let me = ctl.clone();
    tokio::spawn(async move {
        let mut was = false;
        while follow.changed().await.is_ok() {
            let now = *follow.borrow_and_update();
            if now && !was {
                tracing::info!(%identity, "acquired the lease; writing from now on");
                me.enqueue_all();
            } else if was && !now {
                tracing::error!(%identity, "lost the lease; exiting");
                std::process::exit(1);
            }
            was = now;
        }
    });
    tracing::info!(lease = %format!("{ns}/{name}"), "waiting for the lease");
    Ok(rx)
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
        crate::plan::labels::MANAGED_BY,
        crate::plan::labels::MANAGED_BY_VALUE
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
                            .get(crate::plan::labels::GATEWAY_UID)
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
