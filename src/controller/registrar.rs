//! The child-kind registrar: a child kind's discovery and watch start the first time a
//! plan names it ([`Cluster::ensure_kind`]) and stop when no Gateway uses it any more
//! ([`Cluster::use_kinds`]); the Gateways that use a kind are planned again when it lists
//! or starts or stops being served ([`Cluster::enqueue_kind_users`]); a hub Gateway's
//! placed kinds are registered in the members it places them in
//! ([`Cluster::place_kinds`]). One watcher task per child kind, label-selected to our
//! children, plus the names every object of the kind takes; each runs on `watch.rs`'s
//! machinery. What is known of each kind is [`ChildKinds`](super::child_kinds::ChildKinds).

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use kube::api::ApiResource;
use kube::discovery::Scope;
use kube::runtime::watcher::Event;
use serde_json::Value;
use tracing::Instrument;

use super::child_kinds::{KindKey, KindState};
use super::cluster::Cluster;
use super::common::Work;
use super::watch::{
    ForgetFailures, Role, enqueue_affected, enqueue_gateways, full_events, key_of, listed_in_pages,
    metadata_events, run_watch, with_snapshot,
};
use crate::render::labels;
use crate::snapshot::{Key, ObjectKey, ingest};

impl Cluster {
    /// The state of a child kind, starting its discovery and watch the first time it is
    /// named ([`ChildKinds::ensure`](super::child_kinds::ChildKinds::ensure)).
    pub(super) fn ensure_kind(self: &Arc<Self>, api_version: &str, kind: &str) -> KindState {
        self.kinds.ensure(api_version, kind, |key| {
            let me = self.clone();
            let span = me.span();
            tokio::spawn(async move { discover_and_watch(me, key).await }.instrument(span))
                .abort_handle()
        })
    }

    /// Whether every kind of `kinds` is known: listed, or known not to be served. Starts
    /// the discovery of those never named before. A Gateway that finds one still pending
    /// is planned again when it lists ([`Cluster::enqueue_kind_users`]), so the caller
    /// returns without writing anything.
    pub(super) fn all_kinds_known(
        self: &Arc<Self>,
        kinds: &std::collections::BTreeSet<KindKey>,
    ) -> bool {
        kinds
            .iter()
            .all(|(v, k)| !matches!(self.ensure_kind(v, k), KindState::Pending))
    }

    /// How many child kinds have finished listing here, and in the members (summed): read
    /// before a plan reads the snapshot, compared after. A kind that lists meanwhile may
    /// have left the plan reading an empty cache (a member's: the hub's mirror of it).
    pub(super) fn kind_listings(&self) -> (u64, u64) {
        (
            self.kinds.listings(),
            self.members().iter().map(|m| m.kinds.listings()).sum(),
        )
    }

    /// Sets the kinds `gateway` uses ([`ChildKinds::use_kinds`](super::child_kinds::ChildKinds::use_kinds)); the objects of a kind no
    /// Gateway uses any more are dropped from the snapshot.
    pub(super) fn use_kinds(&self, gateway: &Key, kinds: std::collections::BTreeSet<KindKey>) {
        for (api_version, kind) in self.kinds.use_kinds(gateway, kinds) {
            let group = crate::kinds::group_of(&api_version);
            with_snapshot(self, |s| {
                s.retain_listed(&kind, &api_version, &std::collections::BTreeSet::new());
                s.names_mut().forget(group, &kind);
            });
            tracing::info!(%kind, %api_version, "no Gateway uses this child kind any more; stopped watching it");
        }
    }

    /// Re-plans the Gateways that use `kind` (it became served, or stopped being served,
    /// or listed).
    pub(super) fn enqueue_kind_users(&self, kind: &KindKey) {
        let (hub, own): (Vec<Key>, Vec<Key>) = self
            .kinds
            .users_of(kind)
            .into_iter()
            .partition(|u| super::fleet::hub_gateway(u).is_some());
        enqueue_gateways(self, own);
        if let Some(h) = self.hub() {
            enqueue_gateways(
                &h,
                hub.iter().filter_map(super::fleet::hub_gateway).collect(),
            );
        }
    }

    /// Registers the kinds a Gateway's plan uses ([`Cluster::use_kinds`]), here and in
    /// the members it places objects in ([`Cluster::place_kinds`]); whether every one of
    /// them is known there ([`Cluster::all_kinds_known`]). Before, the caller writes
    /// nothing: the Gateway is planned again when they have listed.
    pub(super) fn register_kinds(
        self: &Arc<Self>,
        gateway: &Key,
        kinds: &std::collections::BTreeSet<KindKey>,
        plan: &crate::plan::Plan,
    ) -> bool {
        self.use_kinds(gateway, kinds.clone());
        let placed_known = self.place_kinds(gateway, plan);
        self.all_kinds_known(kinds) && placed_known
    }

    /// Registers, in each member served, the kinds a hub Gateway places there (so their
    /// watches run there, and the Gateway is planned again when they list), and clears
    /// them where it places nothing any more. Returns whether each of those members has
    /// listed them: before, the hub's mirror of that member lacks them and the plan would
    /// see them missing, so the caller returns without writing anything.
    pub(super) fn place_kinds(&self, gateway: &Key, plan: &crate::plan::Plan) -> bool {
        if self.is_member() {
            return true;
        }
        let mut placed = placed_kinds(plan);
        let user = super::fleet::hub_user(gateway);
        let mut known = true;
        for m in self.members() {
            let kinds = placed.remove(m.id().as_str()).unwrap_or_default();
            // Registered first: a kind that lists at once then wakes this Gateway.
            m.use_kinds(&user, kinds.clone());
            known &= m.all_kinds_known(&kinds);
        }
        known
    }
}

/// The kinds a plan places in each member, by member.
fn placed_kinds(
    plan: &crate::plan::Plan,
) -> std::collections::BTreeMap<String, std::collections::BTreeSet<KindKey>> {
    let mut placed: std::collections::BTreeMap<String, std::collections::BTreeSet<KindKey>> =
        std::collections::BTreeMap::new();
    for c in plan.children() {
        if !c.key.cluster.is_empty() {
            placed
                .entry(c.key.cluster.clone())
                .or_default()
                .insert((c.key.api_version.clone(), c.key.kind.clone()));
        }
    }
    placed
}

/// Keeps the names every object of a child kind takes (ours or not) in the snapshot
/// ([`crate::snapshot::names`]), from a metadata-only watch without our label selector,
/// so that creating a child the cache does not hold needs no read first. A watch that
/// fails leaves the names unknown (each create then reads), and is retried with backoff.
async fn watch_names(ctl: Arc<Cluster>, resource: ApiResource) {
    let (group, kind) = (resource.group.clone(), resource.kind.clone());
    let mut stream = metadata_events(ctl.client.clone(), &resource, listed_in_pages());
    let mut listing: Option<std::collections::HashSet<Key>> = None;
    let mut failing = false;
    // A member's failures are said once for the member (see `FailureLog`).
    let step = format!("watch the names of child kind {kind} ({group})");
    let _forget = ForgetFailures(ctl.clone(), step.clone());
    while let Some(ev) = stream.next().await {
        let ev = match ev {
            Ok(ev) => ev,
            Err(e) => {
                let reason = super::startup::watch_failure_kind(&e);
                if !failing && !ctl.is_member() {
                    tracing::warn!(%kind, %group, error = %e, "failed to watch the names of a child kind; creates read first meanwhile");
                } else if !failing && ctl.watch_failures.failed(&step, reason) {
                    tracing::warn!(cluster = %ctl.id(), %reason, error = %e, first = %step, "the member cluster's watches fail; retrying with backoff until they work");
                }
                failing = true;
                continue;
            }
        };
        // `Init` only announces a list about to be requested: not a sign that it works.
        if failing && !matches!(ev, Event::Init) {
            if ctl.is_member() {
                for reason in ctl.watch_failures.works(&step) {
                    tracing::info!(cluster = %ctl.id(), %reason, "the member cluster's watches work again");
                }
            }
            failing = false;
        }
        match ev {
            Event::Init => listing = Some(std::collections::HashSet::new()),
            Event::InitApply(v) => {
                if let Some(l) = &mut listing {
                    l.insert(key_of(&v));
                }
            }
            Event::InitDone => {
                if let Some(l) = listing.take() {
                    with_snapshot(&ctl, |s| s.names_mut().listed(&group, &kind, l));
                }
            }
            // Every change of an object of the kind (a status update) comes as an event:
            // the write lock is taken only when the listed set of names changes.
            Event::Apply(v) => {
                let key = key_of(&v);
                if name_taken(&ctl, &group, &kind, &key) == Some(false) {
                    with_snapshot(&ctl, |s| s.names_mut().add(&group, &kind, key));
                }
            }
            Event::Delete(v) => {
                let key = key_of(&v);
                if name_taken(&ctl, &group, &kind, &key) == Some(true) {
                    with_snapshot(&ctl, |s| s.names_mut().remove(&group, &kind, &key));
                }
            }
        }
    }
}

/// Whether the names cache holds `key` for the kind, under the read lock.
fn name_taken(ctl: &Cluster, group: &str, kind: &str, key: &Key) -> Option<bool> {
    ctl.snapshot.read().ok()?.names().taken(group, kind, key)
}

/// Looks a child kind up; once served, watches it. While not served, looks again every
/// 10 seconds (the only polling we do: it waits for a CRD to be installed). A lookup that
/// fails for another reason (403, 5xx, no connection) is retried with backoff and leaves
/// the kind pending: it is not reported missing.
async fn discover_and_watch(ctl: Arc<Cluster>, key: (String, String)) {
    let gvk = crate::kinds::gvk(&key.0, &key.1);
    let mut retry = super::startup::LookupRetry::default();
    loop {
        match crate::discovery::lookup(&ctl.client, &gvk).await {
            Ok((resource, scope)) => {
                let namespaced = scope == Scope::Namespaced;
                learn_scope(&ctl, &resource.group, &resource.kind, namespaced);
                ctl.kinds.set(
                    &key,
                    KindState::Served {
                        resource: resource.clone(),
                        namespaced,
                    },
                );
                tracing::info!(kind = %key.1, api_version = %key.0, "watching child kind");
                let cfg = listed_in_pages().labels(&format!(
                    "{}={}",
                    labels::MANAGED_BY,
                    labels::MANAGED_BY_VALUE
                ));
                // Objects of a built-in kind come without apiVersion and kind in watch
                // lists; the snapshot keys children by them.
                let types = (
                    Value::String(resource.api_version.clone()),
                    Value::String(resource.kind.clone()),
                );
                let ours = run_watch(
                    ctl.clone(),
                    full_events(ctl.client.clone(), &resource, cfg),
                    Role::Child,
                    (key.0.clone(), key.1.clone()),
                    move |ctl, mut v, deleted| {
                        v["apiVersion"] = types.0.clone();
                        v["kind"] = types.1.clone();
                        super::fight::keep_what_fights_read(&mut v);
                        on_child(ctl, v, deleted);
                    },
                );
                // Gateway API kinds are watched in full already: their names are known.
                if resource.group == crate::gateway::GATEWAY_API_GROUP {
                    ours.await;
                } else {
                    futures::future::join(ours, watch_names(ctl.clone(), resource)).await;
                }
                return;
            }
            Err(e) => {
                // Only discovery's own answer that the kind is not there makes it missing;
                // any other failure (discovery refused, the API server restarting) says
                // nothing about the kind: it stays pending and is looked up again soon.
                let transient = retry
                    .wait_if_transient(&e, |reason, delay, new| {
                        if new {
                            tracing::warn!(kind = %key.1, api_version = %key.0, %reason, error = %e, retry_in = ?delay, "failed to look a child kind up; retrying");
                        }
                    })
                    .await;
                if transient {
                    continue;
                }
                let msg = format!(
                    "kind {} ({}) is not served by the API server: {e}",
                    key.1, key.0
                );
                let was_missing =
                    matches!(ctl.kinds.get(&key.0, &key.1), Some(KindState::Missing(_)));
                ctl.kinds.set(&key, KindState::Missing(msg));
                if !was_missing {
                    ctl.enqueue_kind_users(&key);
                }
                tokio::time::sleep(Duration::from_secs(10)).await;
            }
        }
    }
}

/// Records a child kind's scope as discovery found it. When that changes what was known,
/// the blueprints naming the kind and their classes are judged again: a cluster-scoped kind
/// a blueprint does not list makes the blueprint invalid and its classes not accepted.
fn learn_scope(ctl: &Cluster, group: &str, kind: &str, namespaced: bool) {
    let scope = if namespaced {
        crate::render::scope::Scope::Namespaced
    } else {
        crate::render::scope::Scope::Cluster
    };
    let affected = with_snapshot(ctl, |s| {
        if !s.learn_scope(group, kind, scope) {
            return Vec::new();
        }
        s.blueprints()
            .filter(|b| {
                crate::render::prepared::literal_kinds_of(&b.object.spec)
                    .iter()
                    .any(|(_, _, gk)| gk.group == group && gk.kind == kind)
            })
            .filter_map(|b| b.object.metadata.name.clone())
            .collect::<Vec<_>>()
    })
    .unwrap_or_default();
    for bp in affected {
        let classes = with_snapshot(ctl, |s| crate::plan::class::classes_using_blueprint(s, &bp))
            .unwrap_or_default();
        ctl.enqueue(Work::Blueprint(bp));
        for c in classes {
            ctl.enqueue(Work::Class(c));
        }
    }
}

fn on_child(ctl: &Arc<Cluster>, v: Value, deleted: bool) {
    let key = ObjectKey::of(&v);
    // A placed object a hub Gateway wrote here: the hub plans with it too.
    if !key.cluster.is_empty()
        && key.cluster == ctl.id().as_str()
        && let Some(hub) = ctl.hub()
    {
        on_child(&hub, v.clone(), deleted);
    }
    if deleted {
        ctl.fights
            .on_deleted(&key.to_string(), std::time::Instant::now());
    } else if ctl.snapshot.read().is_ok_and(|s| s.is_quiet_echo(&v)) {
        // The echo of our own write, stored from its answer already, that no plan reads.
        return;
    }
    let change = match with_snapshot(ctl, |s| ingest::apply(s, ingest::Kind::Child, v, deleted)) {
        Some(Ok(c)) => c,
        Some(Err(e)) => {
            tracing::warn!(object = %key, error = %e, "skipping a child that does not decode");
            return;
        }
        None => return,
    };
    // Gateways waiting for this object to go (another parent held it).
    if deleted {
        for gw in ctl.waiters_of(&key) {
            ctl.enqueue(Work::Gateway(gw));
        }
    }
    enqueue_affected(ctl, &change);
}
