//! Watches: the primary kinds (GatewayClass, our CRDs, Gateway, HTTPRoute, Namespace,
//! ReferenceGrant, Secret, Service) and the machinery every watch runs on, the child
//! kinds' too (the registrar, `registrar.rs`, starts those as plans name them,
//! label-selected to our children). Each event updates the snapshot and enqueues the
//! parents it affects. Objects are decoded one by one, so one object that
//! does not parse is logged and skipped instead of stalling its watch.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use futures::StreamExt;
use tracing::Instrument;

use k8s_openapi::api::core::v1::Secret;
use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, PartialObjectMeta};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use serde_json::Value;

use super::cluster::Cluster;
use super::common::Work;
use super::echo::{echo_view, held_view, own_status_of, same_but_status};
use crate::plan::affected::affected;
use crate::render::labels;
use crate::snapshot::{Key, Snapshot, ingest};

/// A watch configuration listing in pages of [`ingest::PAGE`].
pub(super) fn listed_in_pages() -> watcher::Config {
    watcher::Config::default().page_size(ingest::PAGE)
}

/// A watch's events, each object converted to JSON once.
pub(super) type JsonEvents =
    futures::stream::BoxStream<'static, Result<Event<Value>, watcher::Error>>;

fn json_event<K: serde::Serialize>(e: Event<K>) -> Event<Value> {
    let j = |o: &K| serde_json::to_value(o).unwrap_or(Value::Null);
    match e {
        Event::Apply(o) => Event::Apply(j(&o)),
        Event::Delete(o) => Event::Delete(j(&o)),
        Event::InitApply(o) => Event::InitApply(j(&o)),
        Event::Init => Event::Init,
        Event::InitDone => Event::InitDone,
    }
}

/// Whole objects.
pub(super) fn full_events(
    client: Client,
    resource: &ApiResource,
    cfg: watcher::Config,
) -> JsonEvents {
    let api: Api<DynamicObject> = Api::all_with(client, resource);
    watcher::watcher(api, cfg)
        .backoff(super::startup::WatchBackoff::new())
        .map(|r| r.map(json_event))
        .boxed()
}

/// Metadata only (`PartialObjectMetadata`): for kinds of which only existence matters.
pub(super) fn metadata_events(
    client: Client,
    resource: &ApiResource,
    cfg: watcher::Config,
) -> JsonEvents {
    let api: Api<PartialObjectMeta<DynamicObject>> = Api::all_with(client, resource);
    watcher::watcher(api, cfg)
        .backoff(super::startup::WatchBackoff::new())
        .map(|r| r.map(json_event))
        .boxed()
}

/// What a watch is to start-up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Role {
    /// A primary kind: its first list is a start-up step the caches wait for.
    Primary,
    /// A primary kind whose CRD was installed after start-up: it starts empty, so
    /// nothing waited for it.
    LatePrimary,
    /// A primary kind of a fleet member started once a Gateway of ours appeared there:
    /// that Gateway waits for it (`Cluster::rest_watches_listed`).
    RestPrimary,
    /// A child kind ([`ChildKinds`](super::child_kinds::ChildKinds)).
    Child,
}

pub(super) async fn run_watch<F>(
    ctl: Arc<Cluster>,
    mut stream: JsonEvents,
    role: Role,
    what: (String, String),
    handle: F,
) where
    F: Fn(&Arc<Cluster>, Value, bool),
{
    let primary = role != Role::Child;
    let mut synced = false;
    let mut listed_once = false;
    let mut listing: Option<std::collections::BTreeSet<Key>> = None;
    // The first list of a primary watch is a start-up step (`/readyz` waits for it and
    // names its failures); every watch logs a failure once per kind of failure.
    let step = if primary {
        primary_step(&ctl, &what.1)
    } else {
        format!("watch child kind {} ({})", what.1, what.0)
    };
    let mut failing: Option<&'static str> = None;
    // A watch stopped while failing (its kind forgotten) is failing no more.
    let _forget = ForgetFailures(ctl.clone(), step.clone());
    // Who wrote which field of a primary object: nothing plans from it (fight detection
    // reads it on children only), and it is often the largest part of a Gateway or route.
    let handle = |ctl: &Arc<Cluster>, mut v: Value, deleted: bool| {
        if primary && let Some(m) = v["metadata"].as_object_mut() {
            m.remove("managedFields");
        }
        handle(ctl, v, deleted);
    };
    while let Some(ev) = stream.next().await {
        let ev = match ev {
            Ok(ev) => ev,
            Err(e) => {
                let failed = Failed {
                    role,
                    synced,
                    step: &step,
                    what: &what,
                };
                failing = Some(watch_failed(&ctl, &failed, &e, failing));
                continue;
            }
        };
        // `Init` only announces a list about to be requested: not a sign that it works.
        if !matches!(ev, Event::Init) && failing.take().is_some() {
            if ctl.is_member() {
                for reason in ctl.watch_failures.works(&step) {
                    tracing::info!(cluster = %ctl.id(), %reason, "the member cluster's watches work again");
                }
                tracing::debug!(%step, "watch works again");
            } else {
                tracing::info!(%step, "watch works again");
            }
            ctl.reachable();
        }
        match ev {
            Event::Apply(v) => handle(&ctl, v, false),
            Event::InitApply(v) => {
                if let Some(seen) = &mut listing {
                    seen.insert(key_of(&v));
                }
                handle(&ctl, v, false);
            }
            Event::Delete(v) => handle(&ctl, v, true),
            Event::Init => listing = Some(std::collections::BTreeSet::new()),
            Event::InitDone => {
                if let Some(seen) = listing.take() {
                    // A relist (after a 410 Gone, or a watch that could not resume) drops
                    // what was deleted while the watch was down: a child the cache still
                    // held would never be re-created, and a teardown would wait for its
                    // deletion forever. One watch per kind: a kind whose CRD went away has
                    // its watch stopped before a new one starts (`ChildKinds::forget`).
                    if listed_once {
                        drop_what_went(&ctl, role, &what, &seen);
                    }
                    listed_once = true;
                }
                if !synced {
                    synced = true;
                    match role {
                        Role::Child => {
                            if ctl.kinds.set_listed(&what) {
                                ctl.enqueue_kind_users(&what);
                            }
                        }
                        Role::Primary => primary_listed(&ctl, &step),
                        Role::LatePrimary => tracing::info!(%step, "listed"),
                        Role::RestPrimary => rest_listed(&ctl),
                    }
                }
            }
        }
    }
}

/// A watch that failed, as [`watch_failed`] reports it.
struct Failed<'a> {
    role: Role,
    /// Whether the watch has listed once.
    synced: bool,
    /// Its start-up step.
    step: &'a str,
    /// Its kind: `(apiVersion, kind)`.
    what: &'a (String, String),
}

/// Reports a watch's failure (the start-up step, a child kind we may not list, the log
/// once per kind of failure, an unreachable API server); returns the kind of failure.
fn watch_failed(
    ctl: &Arc<Cluster>,
    w: &Failed<'_>,
    e: &watcher::Error,
    failing: Option<&'static str>,
) -> &'static str {
    let Failed {
        role,
        synced,
        step,
        what,
    } = *w;
    let primary = role != Role::Child;
    let reason = super::startup::watch_failure_kind(e);
    let message = e.to_string();
    if role == Role::Primary && !synced {
        ctl.metrics.startup.failed(step, reason, &message);
    }
    if !primary && !synced && matches!(reason, "Forbidden" | "Unauthorized") {
        let (api_version, kind) = what;
        let why = format!(
            "kind {kind} ({api_version}) is served, but gatewright may not list it ({reason}): grant it with a ClusterRole labelled {}: \"true\" (docs/install.md: RBAC, and a new child kind); retrying",
            labels::AGGREGATE_TO_CHILDREN
        );
        if ctl.kinds.set_blocked(what, why) {
            ctl.enqueue_kind_users(what);
        }
    }
    if failing == Some(reason) {
        tracing::debug!(%step, %reason, error = %message, "watch failed again; retrying");
    } else if !ctl.is_member() {
        tracing::warn!(%step, %reason, error = %message, "watch failed; retrying with backoff until it works");
    } else if ctl.watch_failures.failed(step, reason) {
        // A member whose API server is down fails every watch at once: said once per kind
        // of failure, for the member.
        tracing::warn!(cluster = %ctl.id(), %reason, error = %message, first = %step, "the member cluster's watches fail; retrying with backoff until they work");
    } else {
        tracing::debug!(%step, %reason, error = %message, "watch failed; retrying with backoff until it works");
    }
    if reason == "Unreachable" {
        ctl.unreachable(&message);
    }
    reason
}

/// After a relist of `what` (the objects `seen`), drops what the snapshot still held of
/// the kind and the list no longer had; in a member, the hub's mirror of its placed
/// objects of the kind too (the hub's Gateways would wait on them).
fn drop_what_went(ctl: &Cluster, role: Role, what: &(String, String), seen: &BTreeSet<Key>) {
    let (api_version, kind) = what;
    let dropped = with_snapshot(ctl, |s| s.retain_listed(kind, api_version, seen)).unwrap_or(0);
    if dropped > 0 {
        tracing::info!(%kind, dropped, "dropped objects deleted while the watch was down");
        ctl.enqueue_all();
    }
    if role == Role::Child
        && let Some(hub) = ctl.hub()
    {
        let cluster = ctl.id().as_str().to_owned();
        let dropped = with_snapshot(&hub, |s| {
            s.retain_listed_placed(&cluster, kind, api_version, seen)
        })
        .unwrap_or(0);
        if dropped > 0 {
            tracing::info!(%kind, dropped, %cluster, "dropped placed objects deleted in the member while its watch was down");
            hub.enqueue_all();
        }
    }
}

/// Forgets a watch's failures when it stops.
pub(super) struct ForgetFailures(pub(super) Arc<Cluster>, pub(super) String);

impl Drop for ForgetFailures {
    fn drop(&mut self) {
        self.0.watch_failures.works(&self.1);
    }
}

/// A primary watch's start-up step is done; the last one marks the caches synced.
fn primary_listed(ctl: &Arc<Cluster>, step: &str) {
    let failures = ctl.metrics.startup.succeeded(step);
    if failures > 0 {
        tracing::info!(%step, failures, "listed after failing");
    }
    if ctl.unsynced_watches.fetch_sub(1, Ordering::SeqCst) == 1 {
        ctl.metrics.ready.store(true, Ordering::Relaxed);
        ctl.caches_synced();
    }
}

/// A fleet member's watch started for its first Gateway of ours has listed; once the
/// last has, the cluster's parents are planned again, with everything known.
fn rest_listed(ctl: &Arc<Cluster>) {
    if ctl.unsynced_rest.fetch_sub(1, Ordering::SeqCst) == 1 {
        tracing::info!("the watches a Gateway of ours needs have listed");
        ctl.enqueue_all();
    }
}

/// Whether `new` is the watch echo of our own status write on `object`: it brings exactly
/// the status we last wrote, and `same(snapshot)` says nothing else changed since the
/// stored version.
fn is_own_echo(
    ctl: &Cluster,
    object: &str,
    new: &Value,
    same: impl FnOnce(&crate::snapshot::Snapshot) -> bool,
) -> bool {
    let echo = ctl.own_status.is_own(object, &new["status"])
        && ctl.snapshot.read().ok().is_some_and(|s| same(&s));
    if echo {
        ctl.metrics
            .status_only_events
            .fetch_add(1, Ordering::Relaxed);
    }
    echo
}

pub(super) use crate::snapshot::ingest::key_of;

pub(super) fn with_snapshot<T>(ctl: &Cluster, f: impl FnOnce(&mut Snapshot) -> T) -> Option<T> {
    ctl.snapshot.write().ok().map(|mut s| f(&mut s))
}

pub(super) fn enqueue_gateways(ctl: &Cluster, keys: Vec<Key>) {
    for k in keys {
        ctl.enqueue(Work::Gateway(k));
    }
}

/// The start-up step of a primary watch's first list, as `/readyz` names it (with the
/// cluster's name, for a cluster other than the local one).
fn primary_step(ctl: &Cluster, name: &str) -> String {
    if !ctl.is_member() {
        format!("watch {name}")
    } else {
        format!("cluster {}: watch {name}", ctl.id())
    }
}

/// A primary watch, not started yet.
type PrimaryWatch = std::pin::Pin<Box<dyn Future<Output = ()> + Send>>;

/// Whether a fleet member watches `kind` before any GatewayClass or Gateway of ours is
/// there: what tells whether one is (GatewayClasses, Gateways, ListenerSets). Our CRDs,
/// routes, Namespaces, ReferenceGrants, Secrets, Services and the rest follow once one is.
fn watched_first(kind: &ingest::Kind) -> bool {
    use ingest::Kind as K;
    matches!(kind, K::GatewayClass | K::Gateway | K::ListenerSet)
}

/// Starts the watches of the primary kinds: one per row of [`ingest::sources`], every
/// event through [`on_primary`]. The caches count as synced once every watch has listed.
/// A fleet member (`Cluster::is_member`) starts only those [`watched_first`] says; the rest
/// start with [`start_rest_watches`].
pub fn start_primary_watches(ctl: &Arc<Cluster>) {
    let mut table: Vec<PrimaryWatch> = Vec::new();
    for source in ingest::sources() {
        if ctl.is_member() && !watched_first(&source.kind) {
            continue;
        }
        if let Ok(mut p) = ctl.primaries.lock() {
            p.push(source.name.clone());
        }
        // Only the local cluster's watches hold readiness: a member that cannot be
        // reached is reported (its failures counted) and holds nothing else.
        if !ctl.is_member() {
            ctl.metrics.startup.begin(&primary_step(ctl, &source.name));
        }
        table.push(Box::pin(watch_primary(ctl.clone(), source, Role::Primary)));
    }
    ctl.unsynced_watches.store(table.len(), Ordering::SeqCst);
    let tasks: Vec<_> = table
        .into_iter()
        .map(|w| tokio::spawn(w.instrument(ctl.span())).abort_handle())
        .collect();
    ctl.keep_tasks(tasks);
}

impl Cluster {
    /// Whether every primary watch a GatewayClass or Gateway of ours reads has listed. On
    /// a fleet member the first of ours to ask starts those not started yet (false until
    /// they have listed; the cluster's parents are planned again then).
    pub(super) fn rest_watches_listed(self: &Arc<Self>) -> bool {
        if !self.is_member() {
            return true;
        }
        if !self
            .rest_started
            .swap(true, std::sync::atomic::Ordering::SeqCst)
        {
            start_rest_watches(self);
            return false;
        }
        self.unsynced_rest.load(std::sync::atomic::Ordering::SeqCst) == 0
    }

    /// Whether this cluster's primary watch of `key`'s kind has listed, so that its cache
    /// knows every object of the kind by name. Always on the local cluster (nothing is
    /// planned before its caches are synced); on a fleet member, the watches
    /// [`watched_first`] names once they have listed, and the rest (routes) only once a
    /// GatewayClass or Gateway of ours there started them and they have listed: a hub
    /// Gateway places objects in a member that watches no route. A kind no primary watch
    /// reads: false.
    pub(super) fn primary_kind_listed(&self, key: &crate::snapshot::ObjectKey) -> bool {
        if !self.is_member() {
            return true;
        }
        let doc = serde_json::json!({"apiVersion": key.api_version, "kind": key.kind});
        match ingest::kind_of(&doc) {
            Some(kind) if watched_first(&kind) => self.unsynced_watches.load(Ordering::SeqCst) == 0,
            Some(_) => {
                self.rest_started.load(Ordering::SeqCst)
                    && self.unsynced_rest.load(Ordering::SeqCst) == 0
            }
            None => false,
        }
    }
}

/// Starts the primary watches a fleet member left for later (see
/// [`start_primary_watches`]); once they have all listed, every parent of the cluster is
/// planned again.
pub(super) fn start_rest_watches(ctl: &Arc<Cluster>) {
    let rest: Vec<ingest::Source> = ingest::sources()
        .into_iter()
        .filter(|s| !watched_first(&s.kind))
        .collect();
    ctl.unsynced_rest.store(rest.len(), Ordering::SeqCst);
    tracing::info!(
        watches = rest.len(),
        "a GatewayClass or Gateway of ours is here: watching what it reads"
    );
    let tasks: Vec<_> = rest
        .into_iter()
        .map(|source| {
            if let Ok(mut p) = ctl.primaries.lock() {
                p.push(source.name.clone());
            }
            tokio::spawn(
                watch_primary(ctl.clone(), source, Role::RestPrimary).instrument(ctl.span()),
            )
            .abort_handle()
        })
        .collect();
    ctl.keep_tasks(tasks);
}

/// The events of one primary source, as it says to read them.
fn primary_events(ctl: &Cluster, source: &ingest::Source) -> JsonEvents {
    let mut cfg = watcher::Config::default().page_size(source.page_size);
    if let Some(f) = &source.fields {
        cfg = cfg.fields(f);
    }
    if source.metadata_only {
        metadata_events(ctl.client.clone(), &source.resource, cfg)
    } else {
        full_events(ctl.client.clone(), &source.resource, cfg)
    }
}

/// Watches one primary source. A kind whose CRD may be missing (`optional`) is looked up
/// first: not served, it is reported, ignored (its start-up step is done: nothing can be
/// attached through a kind the API server does not serve) and looked up again every 10
/// seconds; once served, its watch starts then, with nothing to wait for.
async fn watch_primary(ctl: Arc<Cluster>, source: ingest::Source, first: Role) {
    let step = primary_step(&ctl, &source.name);
    let what = (String::new(), source.name.clone());
    let source = Arc::new(source);
    let handler = {
        let source = source.clone();
        move |ctl: &Arc<Cluster>, v: Value, deleted: bool| on_primary(ctl, &source, v, deleted)
    };
    if !source.optional {
        let events = primary_events(&ctl, &source);
        run_watch(ctl, events, first, what, handler).await;
        return;
    }
    let r = &source.resource;
    let gvk = GroupVersionKind::gvk(&r.group, &r.version, &r.kind);
    let kind = r.kind.clone();
    let mut retry = super::startup::LookupRetry::default();
    let mut missing = false;
    loop {
        match crate::discovery::lookup(&ctl.client, &gvk).await {
            Ok(_) => {
                let role = if missing {
                    tracing::info!(%kind, "kind is served now; watching it");
                    Role::LatePrimary
                } else {
                    first
                };
                let events = primary_events(&ctl, &source);
                run_watch(ctl, events, role, what, handler).await;
                return;
            }
            Err(e) => {
                let transient = retry
                    .wait_if_transient(&e, |reason, delay, new| {
                        if !missing {
                            ctl.metrics.startup.failed(&step, reason, &e.to_string());
                        }
                        if new {
                            tracing::warn!(%kind, %reason, error = %e, retry_in = ?delay, "failed to look a kind up; retrying");
                        }
                    })
                    .await;
                if transient {
                    continue;
                }
                if !missing {
                    missing = true;
                    tracing::info!(%kind, api_version = %r.api_version, "kind not served (its CRD is not installed): objects of this kind are ignored; looking it up again every 10 s");
                    if first == Role::RestPrimary {
                        rest_listed(&ctl);
                    } else {
                        primary_listed(&ctl, &step);
                    }
                }
                tokio::time::sleep(Duration::from_secs(10)).await;
            }
        }
    }
}

/// One event of a primary watch: our own status echo detected, the object applied to the
/// snapshot ([`ingest::apply`]), and the work it makes ([`affected`]) enqueued.
fn on_primary(ctl: &Arc<Cluster>, source: &ingest::Source, mut v: Value, deleted: bool) {
    let kind = source.kind;
    // List items and metadata events come without (or with another) apiVersion and kind.
    v["apiVersion"] = Value::String(source.resource.api_version.clone());
    v["kind"] = Value::String(source.resource.kind.clone());
    // A child Gateway or route belongs to the downstream implementation: the child watch.
    if matches!(kind, ingest::Kind::Gateway | ingest::Kind::Route(_)) && ingest::is_child(&v) {
        return;
    }
    let own = own_status_of(kind, &v);
    // The echo of our own status write changes nothing we plan from: keep the fresh
    // object, plan nothing. Anyone else's status change is planned (ours is restored).
    let echo = match &own {
        Some(o) if !deleted => {
            let key = key_of(&v);
            let typed = echo_view(kind, &v);
            let new = typed.as_ref().unwrap_or(&v);
            is_own_echo(ctl, o, new, |s| {
                held_view(s, kind, &key).is_some_and(|old| same_but_status(&old, new))
            })
        }
        Some(o) => {
            ctl.own_status.forget(o);
            false
        }
        None => false,
    };
    let what = format!(
        "{} {}/{}",
        source.resource.kind,
        v["metadata"]["namespace"].as_str().unwrap_or_default(),
        v["metadata"]["name"].as_str().unwrap_or_default()
    );
    let change = match with_snapshot(ctl, |s| ingest::apply(s, kind, v, deleted)) {
        Some(Ok(c)) => c,
        Some(Err(e)) => {
            tracing::warn!(object = %what, error = %e, "skipping an object that does not decode");
            return;
        }
        None => return,
    };
    let ready = ctl.metrics.ready.load(Ordering::Relaxed);
    match &change {
        ingest::Change::Gateway { key, new, .. } if !deleted => {
            // New to the caches once they have listed: created just now.
            if *new && ready {
                ctl.gateway_created(key.clone());
            }
            let unknown: Vec<Key> = ctl
                .snapshot
                .read()
                .ok()
                .and_then(|s| {
                    s.gateway(key).map(|g| {
                        crate::snapshot::secrets_named_by(&g.typed)
                            .filter(|k| s.secret_type_unknown(k))
                            .collect()
                    })
                })
                .unwrap_or_default();
            for k in unknown {
                fetch_secret_type(ctl, k);
            }
        }
        // Before the caches have listed, every Gateway is planned once they have.
        ingest::Change::Namespace { .. } | ingest::Change::Service { .. } if !ready => return,
        // A Secret of another type a Gateway names: its type is read first (then the
        // Gateways are planned).
        ingest::Change::Secret { key }
            if source.metadata_only && !deleted && !gateways_naming_secret(ctl, key).is_empty() =>
        {
            fetch_secret_type(ctl, key.clone());
            return;
        }
        _ => {}
    }
    if echo {
        return;
    }
    enqueue_affected(ctl, &change);
}

/// Enqueues the work `change` makes ([`affected`]).
pub(super) fn enqueue_affected(ctl: &Cluster, change: &ingest::Change) {
    let Ok(a) = ctl.snapshot.read().map(|s| affected(&s, change)) else {
        return;
    };
    for c in a.classes {
        ctl.enqueue(Work::Class(c));
    }
    for b in a.blueprints {
        ctl.enqueue(Work::Blueprint(b));
    }
    for k in a.class_configs {
        ctl.enqueue(Work::Policy(super::common::PolicyKind::ClassConfig, k));
    }
    for k in a.gateway_configs {
        ctl.enqueue(Work::Policy(super::common::PolicyKind::GatewayConfig, k));
    }
    for r in a.routes {
        ctl.enqueue(Work::Route(r));
    }
    enqueue_gateways(ctl, a.gateways.into_iter().collect());
}

/// The Gateways whose listeners name the Secret `key`.
fn gateways_naming_secret(ctl: &Cluster, key: &Key) -> Vec<Key> {
    ctl.snapshot
        .read()
        .map(|s| s.gateways_naming_secret(key))
        .unwrap_or_default()
}

/// Reads a Secret that is not of type `kubernetes.io/tls` but that a Gateway names, once
/// (a Secret's type cannot change), to report its type; its data is dropped at once.
/// Then re-plans the Gateways naming it.
fn fetch_secret_type(ctl: &Arc<Cluster>, key: Key) {
    let ctl = ctl.clone();
    tokio::spawn(async move {
        let api: Api<Secret> = Api::namespaced(ctl.client.clone(), &key.namespace);
        match api.get_opt(&key.name).await {
            Ok(Some(sec)) => {
                with_snapshot(&ctl, |s| {
                    // Unless it went meanwhile (the watch removed it).
                    if s.secret_type_unknown(&key) {
                        s.put_secret(&sec);
                    }
                });
            }
            Ok(None) => {}
            Err(e) => {
                tracing::warn!(secret = %key, error = %e, "failed to read the type of a Secret a Gateway names");
            }
        }
        enqueue_gateways(&ctl, gateways_naming_secret(&ctl, &key));
    });
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::Namespace;

    use super::*;

    #[test]
    fn a_member_watches_first_only_what_tells_whether_one_of_ours_is_there() {
        let first: Vec<ingest::Kind> = ingest::sources()
            .into_iter()
            .map(|s| s.kind)
            .filter(watched_first)
            .collect();
        assert_eq!(
            first,
            [
                ingest::Kind::GatewayClass,
                ingest::Kind::Gateway,
                ingest::Kind::ListenerSet
            ]
        );
        // The rest is left for later, not dropped.
        assert!(ingest::sources().len() > first.len());
    }

    #[test]
    fn an_event_keeps_its_kind_and_its_object_as_json() {
        let mut ns = Namespace::default();
        ns.metadata.name = Some("app".into());
        let Event::Apply(v) = json_event(Event::Apply(ns.clone())) else {
            panic!("not an apply");
        };
        assert_eq!(v["metadata"]["name"], "app");
        assert!(
            matches!(json_event(Event::Delete(ns)), Event::Delete(d) if d["metadata"]["name"] == "app")
        );
        assert!(matches!(
            json_event::<Namespace>(Event::InitDone),
            Event::InitDone
        ));
    }
}
