//! Fleet mode's scale-out, the shell of [`crate::fleet::share`]: this replica's Lease
//! renewed, the share's Leases listed, the member Leases it takes, renews and gives up
//! written (each a replace under the listed `resourceVersion`, so one Lease is never
//! taken twice), and each held member's write fence kept ([`LeaseFence::elsewhere`]: a
//! member's writes stop once its Lease, renewed in the hub, would run out). The inventory
//! serves a member only while this replica holds its Lease ([`Share::fence`]) and tells
//! the share which members it would serve ([`Share::want`]).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::Client;
use kube::api::{Api, DeleteParams, ListParams, PostParams, Preconditions};

use super::client::LeaseFence;
use crate::fleet::share::{self, Decision, LeaseView, Observed};

/// Subtracted from a member Lease's duration for its fence: the renewal's own latency and
/// clock rate drift.
const FENCE_MARGIN: Duration = Duration::from_secs(3);

/// A member Lease this replica holds.
struct Held {
    /// The Lease's name, and the Lease as our last write of it returned it.
    lease: String,
    last: Lease,
    fence: Arc<LeaseFence>,
}

#[derive(Default)]
struct State {
    /// The members the inventory would serve.
    wanted: BTreeSet<String>,
    held: BTreeMap<String, Held>,
    /// The last decision's figures, for the log when they change.
    said: (usize, usize, usize),
}

/// The members this replica serves of the fleet's share (see the module docs).
pub(super) struct Share {
    namespace: String,
    prefix: String,
    identity: String,
    state: Mutex<State>,
    /// Bumped whenever the members held change: the inventory looks again.
    changed: tokio::sync::watch::Sender<u64>,
    /// Woken when the inventory's wants change.
    wake: tokio::sync::Notify,
}

impl Share {
    /// The share of Leases `<prefix>-*` in `namespace`, for replica `identity`.
    pub(super) fn new(namespace: &str, prefix: &str, identity: &str) -> Self {
        Self {
            namespace: namespace.to_owned(),
            prefix: prefix.to_owned(),
            identity: identity.to_owned(),
            state: Mutex::new(State::default()),
            changed: tokio::sync::watch::Sender::new(0),
            wake: tokio::sync::Notify::new(),
        }
    }

    /// The inventory's members: those it would serve if it held their Leases.
    pub(super) fn want(&self, members: BTreeSet<String>) {
        let changed = self.state.lock().is_ok_and(|mut s| {
            let c = s.wanted != members;
            s.wanted = members;
            c
        });
        if changed {
            self.wake.notify_one();
        }
    }

    /// The write fence of a member whose Lease this replica holds (`None`: it does not;
    /// another replica serves the member, or nobody yet).
    pub(super) fn fence(&self, member: &str) -> Option<Arc<LeaseFence>> {
        let s = self.state.lock().ok()?;
        s.held.get(member).map(|h| h.fence.clone())
    }

    /// A receiver that sees a change whenever the members held do.
    pub(super) fn subscribe(&self) -> tokio::sync::watch::Receiver<u64> {
        self.changed.subscribe()
    }

    /// The members whose Leases this replica holds.
    pub(super) fn held(&self) -> BTreeSet<String> {
        self.state
            .lock()
            .map(|s| s.held.keys().cloned().collect())
            .unwrap_or_default()
    }

    fn bump(&self) {
        self.changed.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// Stops serving `members` (their fences close at once) and forgets their Leases.
    fn drop_members(&self, members: &[String], why: &str) {
        let mut dropped = false;
        if let Ok(mut s) = self.state.lock() {
            for m in members {
                if let Some(h) = s.held.remove(m) {
                    h.fence.close();
                    dropped = true;
                    tracing::info!(cluster = %m, lease = %h.lease, "{why}");
                }
            }
        }
        if dropped {
            self.bump();
        }
    }

    /// Members held whose fence closed (their renewals have not got through in time):
    /// they are no longer served.
    fn lapsed(&self, now: Instant) -> Vec<String> {
        self.state
            .lock()
            .map(|s| {
                s.held
                    .iter()
                    .filter(|(_, h)| !h.fence.open_at(now))
                    .map(|(m, _)| m.clone())
                    .collect()
            })
            .unwrap_or_default()
    }
}

/// Keeps this replica's share until `stop` is set: every [`share::TICK`], or sooner when
/// the inventory's members change.
pub(super) async fn run(
    share: Arc<Share>,
    hub: Client,
    mut stop: tokio::sync::watch::Receiver<Option<super::common::Stop>>,
) {
    let leases: Api<Lease> = Api::namespaced(hub, &share.namespace);
    let mut observed = Observed::default();
    let mut last_error: Option<String> = None;
    loop {
        if stop.borrow_and_update().is_some() {
            return;
        }
        // A look may not outlast two ticks (the hub out of reach: requests that hang), so
        // that members whose Lease lapses are let go soon after, not a request timeout later.
        let looked = tokio::time::timeout(2 * share::TICK, tick(&share, &leases, &mut observed))
            .await
            .map_err(|_| format!("the hub did not answer within {:?}", 2 * share::TICK))
            .and_then(|r| r.map_err(|e| e.to_string()));
        match looked {
            Ok(()) => last_error = None,
            Err(msg) => {
                if last_error.as_deref() != Some(msg.as_str()) {
                    tracing::warn!(error = %msg, namespace = %share.namespace, "cannot keep the fleet's member Leases in the hub; retrying (members whose Lease runs out meanwhile are no longer served)");
                    last_error = Some(msg);
                }
            }
        }
        // Whatever happened: a member whose Lease would have run out is served no more.
        let lapsed = share.lapsed(Instant::now());
        share.drop_members(
            &lapsed,
            "its Lease was not renewed in time: no longer serving the member cluster",
        );
        tokio::select! {
            biased;
            r = stop.changed() => if r.is_err() { return },
            () = share.wake.notified() => {}
            () = tokio::time::sleep(share::TICK) => {}
        }
    }
}

/// One look: list the share, renew this replica's Lease, decide, write.
async fn tick(share: &Share, leases: &Api<Lease>, observed: &mut Observed) -> kube::Result<()> {
    let selector = format!("{}={}", share::LABEL_SHARE, share.prefix);
    let listed = leases
        .list(&ListParams::default().labels(&selector))
        .await?;
    // This replica's own Lease is among those listed: renewed from there, no read of it.
    let own = share::replica_lease_name(&share.prefix, &share.identity);
    renew_replica(
        share,
        leases,
        listed
            .items
            .iter()
            .find(|l| l.metadata.name.as_deref() == Some(own.as_str())),
    )
    .await?;
    let now = Instant::now();
    let views: Vec<LeaseView> = listed
        .items
        .iter()
        .filter_map(|l| LeaseView::of(&serde_json::to_value(l).ok()?))
        .collect();
    observed.take(&views, now);
    let (wanted, held) = match share.state.lock() {
        Ok(s) => (s.wanted.clone(), s.held.keys().cloned().collect()),
        Err(_) => return Ok(()),
    };
    let d = share::decide(&share.identity, &wanted, &held, &views, observed, now);
    say(share, &d);
    share.drop_members(
        &d.give_up,
        "above this replica's share, or no longer in the inventory: no longer serving the member cluster; its Lease runs out for another replica",
    );
    // Renewals go out together: a replica may hold many members.
    let renewals = d.renew.iter().filter_map(|m| {
        let last = share
            .state
            .lock()
            .ok()
            .and_then(|s| s.held.get(m).map(|h| h.last.clone()))?;
        Some(async move {
            let sent = Instant::now();
            (
                m,
                sent,
                write_member(share, leases, m, Some(last), false).await,
            )
        })
    });
    let mut failed = None;
    for (m, sent, written) in futures::future::join_all(renewals).await {
        match written {
            Ok(l) => held_by_us(share, m, &l, sent, false),
            Err(e) if is_conflict(&e) => share.drop_members(
                std::slice::from_ref(m),
                "its Lease changed under us: no longer serving the member cluster",
            ),
            Err(e) => failed = Some(e),
        }
    }
    if let Some(e) = failed {
        return Err(e);
    }
    for (m, lease) in &d.take {
        let base = match lease {
            // Read it for its history; replaced under the version listed, which was
            // judged free: a change since then makes the replace fail.
            Some(l) => match leases.get_opt(&l.name).await? {
                Some(mut current) => {
                    current.metadata.resource_version = Some(l.resource_version.clone());
                    Some(current)
                }
                None => continue,
            },
            None => None,
        };
        let sent = Instant::now();
        match write_member(share, leases, m, base, true).await {
            Ok(l) => {
                held_by_us(share, m, &l, sent, true);
                tracing::info!(cluster = %m, identity = %share.identity, "took the member's Lease: serving the member cluster");
            }
            // Another replica was quicker: it is theirs.
            Err(e) if is_conflict(&e) => {}
            Err(e) => return Err(e),
        }
    }
    for dead in share::dead_replicas(&share.identity, &views, observed, now) {
        let dp = DeleteParams {
            preconditions: Some(Preconditions {
                resource_version: Some(dead.resource_version.clone()),
                uid: None,
            }),
            ..DeleteParams::default()
        };
        match leases.delete(&dead.name, &dp).await {
            Ok(_) => {
                tracing::info!(lease = %dead.name, "deleted the Lease of a replica gone for good");
            }
            Err(e) if is_conflict(&e) || is_not_found(&e) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Logs the share's figures when they change.
fn say(share: &Share, d: &Decision) {
    let Ok(mut s) = share.state.lock() else {
        return;
    };
    let now = (d.replicas, d.share, s.wanted.len());
    if s.said != now {
        tracing::info!(
            replicas = d.replicas,
            share = d.share,
            members = s.wanted.len(),
            "the fleet's members are shared among the replicas"
        );
        s.said = now;
    }
}

/// Notes a member Lease written with us as its holder: its fence opens until the Lease
/// would run out (less the margin), counted from when the write was sent.
fn held_by_us(share: &Share, member: &str, lease: &Lease, sent: Instant, taken: bool) {
    let Ok(json) = serde_json::to_value(lease) else {
        return;
    };
    let name = lease.metadata.name.clone().unwrap_or_default();
    let mut added = false;
    if let Ok(mut s) = share.state.lock() {
        let held = s.held.entry(member.to_owned()).or_insert_with(|| {
            added = true;
            Held {
                lease: name.clone(),
                last: lease.clone(),
                fence: Arc::new(LeaseFence::elsewhere(&name, &share.identity, FENCE_MARGIN)),
            }
        });
        held.last = lease.clone();
        held.fence.observe(sent, &json);
    }
    if added || taken {
        share.bump();
    }
}

/// Writes the Lease of `member` with this replica as its holder: replaces `base` (under
/// its `resourceVersion`), or creates it; `take`: a new holding (acquire time, one more
/// transition when someone held it before).
async fn write_member(
    share: &Share,
    leases: &Api<Lease>,
    member: &str,
    base: Option<Lease>,
    take: bool,
) -> kube::Result<Lease> {
    let name = share::member_lease_name(&share.prefix, member);
    let now = MicroTime(k8s_openapi::jiff::Timestamp::now());
    let exists = base.is_some();
    let mut lease = base.unwrap_or_default();
    lease.metadata.name = Some(name.clone());
    lease.metadata.namespace = Some(share.namespace.clone());
    lease.metadata.managed_fields = None;
    let labels = lease.metadata.labels.get_or_insert_with(BTreeMap::new);
    labels.insert(share::LABEL_SHARE.to_owned(), share.prefix.clone());
    labels.insert(share::LABEL_LEASE_KIND.to_owned(), "member".to_owned());
    lease
        .metadata
        .annotations
        .get_or_insert_with(BTreeMap::new)
        .insert(share::ANNOTATION_MEMBER.to_owned(), member.to_owned());
    let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
    if take {
        let before = spec.lease_transitions.unwrap_or(0);
        spec.lease_transitions = Some(before + i32::from(spec.holder_identity.is_some()));
        spec.acquire_time = Some(now.clone());
    }
    spec.holder_identity = Some(share.identity.clone());
    spec.lease_duration_seconds = Some(lease_seconds());
    spec.renew_time = Some(now);
    if exists {
        leases.replace(&name, &PostParams::default(), &lease).await
    } else {
        leases.create(&PostParams::default(), &lease).await
    }
}

/// Renews this replica's own Lease as `listed`, or creates it: the others count it as
/// alive.
async fn renew_replica(
    share: &Share,
    leases: &Api<Lease>,
    listed: Option<&Lease>,
) -> kube::Result<()> {
    let name = share::replica_lease_name(&share.prefix, &share.identity);
    let now = MicroTime(k8s_openapi::jiff::Timestamp::now());
    let current = match listed {
        Some(l) => l.clone(),
        None => {
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(name.clone()),
                    labels: Some(BTreeMap::from([
                        (share::LABEL_SHARE.to_owned(), share.prefix.clone()),
                        (share::LABEL_LEASE_KIND.to_owned(), "replica".to_owned()),
                    ])),
                    ..ObjectMeta::default()
                },
                spec: Some(LeaseSpec {
                    holder_identity: Some(share.identity.clone()),
                    lease_duration_seconds: Some(lease_seconds()),
                    acquire_time: Some(now.clone()),
                    renew_time: Some(now),
                    ..LeaseSpec::default()
                }),
            };
            return match leases.create(&PostParams::default(), &lease).await {
                Ok(_) => Ok(()),
                Err(e) if is_conflict(&e) => Ok(()),
                Err(e) => Err(e),
            };
        }
    };
    let mut lease = current;
    let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
    spec.holder_identity = Some(share.identity.clone());
    spec.renew_time = Some(now);
    match leases.replace(&name, &PostParams::default(), &lease).await {
        Ok(_) => Ok(()),
        Err(e) if is_conflict(&e) => Ok(()),
        Err(e) => Err(e),
    }
}

/// On a graceful stop, once no reconcile runs any more: gives every member Lease held
/// back (no holder: another replica takes it at its next look, without waiting for it to
/// run out) and deletes this replica's Lease.
pub(super) async fn release(share: &Share, hub: Client) {
    let leases: Api<Lease> = Api::namespaced(hub, &share.namespace);
    let held: Vec<(String, Held)> = share
        .state
        .lock()
        .map(|mut s| std::mem::take(&mut s.held).into_iter().collect())
        .unwrap_or_default();
    for (member, h) in held {
        h.fence.close();
        let Ok(mut lease) = leases.get(&h.lease).await else {
            continue;
        };
        let ours = lease
            .spec
            .as_ref()
            .and_then(|s| s.holder_identity.as_deref())
            == Some(share.identity.as_str());
        if !ours {
            continue;
        }
        if let Some(spec) = &mut lease.spec {
            spec.holder_identity = None;
        }
        match leases
            .replace(&h.lease, &PostParams::default(), &lease)
            .await
        {
            Ok(_) => tracing::info!(cluster = %member, "released the member's Lease"),
            Err(e) => {
                tracing::warn!(cluster = %member, error = %e, "could not release the member's Lease; it runs out by itself")
            }
        }
    }
    let name = share::replica_lease_name(&share.prefix, &share.identity);
    let _ = leases.delete(&name, &DeleteParams::default()).await;
    share.bump();
}

fn lease_seconds() -> i32 {
    i32::try_from(share::LEASE_SECONDS).unwrap_or(15)
}

fn is_conflict(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 409)
}

fn is_not_found(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 404)
}
