//! Fleet mode's shell: the hub's ClusterProfiles, and the kubeconfig Secrets of the
//! members reached without an access provider, watched; each member engaged (a
//! [`Cluster`](super::cluster::Cluster) in the `Runner`, through [`Members`]) while
//! [`crate::fleet::members::verdict`] says so, replaced when its credentials change,
//! and let go when its profile goes or its control plane is no longer reported healthy;
//! with the members shared among replicas ([`super::share`]), served only while this
//! replica holds the member's Lease.
//! Added, changed and removed profiles are picked up as they come, without a restart. A
//! member that cannot be reached is reported (its watches' failures, the fleet metric)
//! and never holds the others, nor the controller's readiness.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Weak};

use futures::StreamExt;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, DynamicObject};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use kube::{Client, ResourceExt};

use super::client::LeaseFence;
use super::common::{ClusterId, FleetOptions};
use super::share::Share;
use crate::fleet::access::{self, ProviderFile};
use crate::fleet::members::{Verdict, fingerprint, verdict};
use crate::fleet::profile::{self, ClusterProfile};
use crate::fleet_client;

/// One change seen on the hub, or in the members this replica holds the Leases of.
enum Change {
    Profile(Event<DynamicObject>),
    Secret(Event<Secret>),
    Share,
}

/// What the inventory does with the members: the runner serves them.
pub(super) trait Members: Send + Sync {
    /// Serves a member through `client` (replacing one served under `id`), its writes
    /// fenced by `fence` when given (its Lease, when the members are shared).
    fn engage(&self, id: ClusterId, client: Client, fence: Option<Arc<LeaseFence>>);
    /// Watches a member whose Lease another replica holds, without serving it: only the
    /// kinds the hub places there, mirrored to the hub, so that this replica plans
    /// placement from the whole fleet; nothing is written to it from here.
    fn observe(&self, id: ClusterId, client: Client);
    /// Stops serving (or watching) a member.
    fn let_go(&self, id: &ClusterId);
    /// Each member and its state, for the metrics.
    fn report(&self, states: BTreeMap<String, &'static str>);
    /// The fleet as placement sees it: every member, served (here or by another replica)
    /// or why not.
    fn fleet(&self, members: Vec<crate::snapshot::fleet::FleetMember>);
    /// Whether the controller has stopped: the inventory ends then (a stopped runner that
    /// something still holds engages no member).
    fn has_stopped(&self) -> bool {
        false
    }
}

/// What the inventory knows and has done.
#[derive(Default)]
struct Inventory {
    profiles: BTreeMap<String, ClusterProfile>,
    secrets: BTreeMap<String, Secret>,
    /// Engaged members: profile key -> the fingerprint of the kubeconfig in use (and of
    /// the fence: a Lease taken again is a new one; or `observed`: another replica holds
    /// the Lease, and this one only watches what the hub places there).
    engaged: BTreeMap<String, String>,
    /// A (re)list of the profiles or the Secrets is under way: what is known is partial.
    listing: [bool; 2],
    /// The last verdict's words per member not engaged (logged when they change).
    said: BTreeMap<String, String>,
}

/// Watches the hub's inventory through `hub` and engages members in `runner` until the
/// runner is dropped; with `share`, only the members whose Leases this replica holds.
/// Members' clients are built without a user agent: the runner's client stack names the
/// replica on each of their requests.
pub(super) async fn run<R: Members + 'static>(
    runner: Weak<R>,
    hub: Client,
    fleet: FleetOptions,
    share: Option<Arc<Share>>,
) {
    let file = fleet.providers.clone().unwrap_or_default();
    let profiles: Api<DynamicObject> = match &fleet.namespace {
        Some(ns) => Api::namespaced_with(hub.clone(), ns, &profile::api_resource()),
        None => Api::all_with(hub.clone(), &profile::api_resource()),
    };
    let secrets: Api<Secret> = match &fleet.namespace {
        Some(ns) => Api::namespaced(hub.clone(), ns),
        None => Api::all(hub.clone()),
    };
    let selector = format!("{}={}", access::LABEL_INVENTORY_CONSUMER, fleet.consumer);
    let profile_events = watcher::watcher(profiles, watcher::Config::default())
        .default_backoff()
        .map(|e| e.map(Change::Profile))
        .boxed();
    let secret_events = watcher::watcher(secrets, watcher::Config::default().labels(&selector))
        .default_backoff()
        .map(|e| e.map(Change::Secret))
        .boxed();
    let share_events = match &share {
        Some(s) => futures::stream::unfold(s.subscribe(), |mut rx| async move {
            rx.changed().await.ok()?;
            Some((Ok(Change::Share), rx))
        })
        .boxed(),
        None => futures::stream::pending().boxed(),
    };
    let mut changes = futures::stream::select(
        futures::stream::select(profile_events, secret_events),
        share_events,
    );
    let mut inv = Inventory {
        listing: [true, true],
        ..Inventory::default()
    };
    let ctx = Context {
        file: &file,
        consumer: &fleet.consumer,
        share: share.as_deref(),
    };
    let mut last_error: Option<String> = None;
    while let Some(change) = changes.next().await {
        let Some(runner) = runner.upgrade() else {
            return;
        };
        if runner.has_stopped() {
            return;
        }
        match change {
            Ok(c) => {
                last_error = None;
                if inv.take(c) {
                    if inv.listing == [false, false] {
                        inv.sync(&runner, &ctx).await;
                    } else if let Some(share) = ctx.share {
                        // What the hub lists is partial (a relist, the hub out of reach):
                        // only the members whose Lease is no longer held are let go.
                        inv.drop_unheld(runner.as_ref(), share);
                    }
                }
            }
            Err(e) => {
                // Retried with backoff; said once per kind of failure.
                let msg = e.to_string();
                if last_error.as_deref() != Some(msg.as_str()) {
                    tracing::warn!(error = %msg, "cannot watch the fleet's ClusterProfiles or kubeconfig Secrets on the hub; retrying");
                    last_error = Some(msg);
                }
            }
        }
    }
}

impl Inventory {
    /// Takes one change in; returns whether the members should be looked at again (not
    /// in the middle of a (re)list: once it is done).
    fn take(&mut self, c: Change) -> bool {
        match c {
            Change::Profile(Event::Apply(o)) => self.put_profile(&o),
            Change::Profile(Event::InitApply(o)) => {
                self.put_profile(&o);
                false
            }
            Change::Profile(Event::Delete(o)) => self.profiles.remove(&key_of(&o)).is_some(),
            Change::Profile(Event::Init) => {
                self.profiles.clear();
                self.listing[0] = true;
                false
            }
            Change::Secret(Event::Apply(s)) => {
                self.secrets.insert(key_of(&s), s);
                true
            }
            Change::Secret(Event::InitApply(s)) => {
                self.secrets.insert(key_of(&s), s);
                false
            }
            Change::Secret(Event::Delete(s)) => self.secrets.remove(&key_of(&s)).is_some(),
            Change::Secret(Event::Init) => {
                self.secrets.clear();
                self.listing[1] = true;
                false
            }
            Change::Profile(Event::InitDone) => {
                self.listing[0] = false;
                true
            }
            Change::Secret(Event::InitDone) => {
                self.listing[1] = false;
                true
            }
            Change::Share => true,
        }
    }

    /// Keeps a profile as read (one that cannot be read is dropped, and said so). Returns
    /// true: the members are looked at again.
    fn put_profile(&mut self, o: &DynamicObject) -> bool {
        match ClusterProfile::from_dynamic(o) {
            Ok(p) => {
                self.profiles.insert(p.key(), p);
            }
            Err(err) => {
                tracing::warn!(error = %err, "a ClusterProfile cannot be read; its member is not served");
                self.profiles.remove(&key_of(o));
            }
        }
        true
    }

    /// Engages, replaces and lets go of members as the verdicts (and the share) say.
    async fn sync<R: Members>(&mut self, runner: &Arc<R>, ctx: &Context<'_>) {
        let secrets: Vec<Secret> = self.secrets.values().cloned().collect();
        let mut states: BTreeMap<String, &'static str> = BTreeMap::new();
        let profiles: Vec<(String, ClusterProfile)> = self
            .profiles
            .iter()
            .map(|(k, p)| (k.clone(), p.clone()))
            .collect();
        let mut wanted = BTreeSet::new();
        let mut fleet = Vec::new();
        for (key, p) in &profiles {
            let v = verdict(p, ctx.file, ctx.consumer, &secrets);
            let why = match &v {
                Verdict::Wait(why) | Verdict::Failed(why) => Some(why.clone()),
                Verdict::Engage(_) => None,
            };
            let state = match v {
                Verdict::Engage(kubeconfig) => {
                    wanted.insert(key.clone());
                    let fence = ctx.share.map(|s| s.fence(key));
                    // Another replica serves it (or nobody yet): only observed here.
                    let observed = matches!(fence, Some(None));
                    let fp = match &fence {
                        Some(None) => format!("{}/{OBSERVED}", fingerprint(&kubeconfig)),
                        Some(Some(f)) => {
                            format!("{}/{:p}", fingerprint(&kubeconfig), Arc::as_ptr(f))
                        }
                        None => fingerprint(&kubeconfig),
                    };
                    let state = if observed { "elsewhere" } else { "engaged" };
                    if self.engaged.get(key) == Some(&fp) {
                        state
                    } else {
                        match fleet_client::member_client(p, *kubeconfig, None).await {
                            Ok(client) => {
                                let id = ClusterId::new(key);
                                if observed {
                                    runner.observe(id, client);
                                    tracing::info!(cluster = %key, "another replica serves the member cluster; watching what the hub places there");
                                } else {
                                    runner.engage(id, client, fence.flatten());
                                    tracing::info!(cluster = %key, "serving the member cluster");
                                }
                                self.engaged.insert(key.clone(), fp);
                                self.said.remove(key);
                                state
                            }
                            Err(why) => {
                                self.let_go(runner.as_ref(), key);
                                self.say(key, &why, true);
                                "failed"
                            }
                        }
                    }
                }
                Verdict::Wait(why) => {
                    self.let_go(runner.as_ref(), key);
                    self.say(key, &why, false);
                    "waiting"
                }
                Verdict::Failed(why) => {
                    self.let_go(runner.as_ref(), key);
                    self.say(key, &why, true);
                    "failed"
                }
            };
            states.insert(key.clone(), state);
            let unserved = match state {
                "engaged" | "elsewhere" => None,
                // Its health in a few words (the log has the rest).
                "waiting" => crate::fleet::members::health(p).err().or(why),
                _ => Some(why.unwrap_or_else(|| "its client cannot be built".to_owned())),
            };
            fleet.push(crate::snapshot::fleet::FleetMember::of(p, unserved));
        }
        let gone: Vec<String> = self
            .engaged
            .keys()
            .filter(|k| !self.profiles.contains_key(*k))
            .cloned()
            .collect();
        for key in gone {
            self.let_go(runner.as_ref(), &key);
            tracing::info!(cluster = %key, "its ClusterProfile is gone: no longer serving the member cluster");
        }
        self.said.retain(|k, _| self.profiles.contains_key(k));
        if let Some(share) = ctx.share {
            share.want(wanted);
        }
        runner.report(states);
        runner.fleet(fleet);
    }

    /// Lets go of the members served whose Lease this replica no longer holds (observed
    /// from then on, once the hub lists the members again).
    fn drop_unheld<R: Members + ?Sized>(&mut self, runner: &R, share: &Share) {
        let lost: Vec<String> = self
            .engaged
            .iter()
            .filter(|(k, fp)| !fp.ends_with(OBSERVED) && share.fence(k).is_none())
            .map(|(k, _)| k.clone())
            .collect();
        for key in lost {
            self.let_go(runner, &key);
        }
    }

    fn let_go<R: Members + ?Sized>(&mut self, runner: &R, key: &str) {
        if self.engaged.remove(key).is_some() {
            runner.let_go(&ClusterId::new(key));
        }
    }

    /// Logs why a member is not served, once per change of words.
    fn say(&mut self, key: &str, why: &str, warn: bool) {
        if self.said.get(key).map(String::as_str) == Some(why) {
            return;
        }
        if warn {
            tracing::warn!(cluster = %key, reason = %why, "the member cluster is not served");
        } else {
            tracing::info!(cluster = %key, reason = %why, "the member cluster is not served yet");
        }
        self.said.insert(key.to_owned(), why.to_owned());
    }
}

/// `namespace/name` of a hub object.
fn key_of<K: ResourceExt>(o: &K) -> String {
    format!("{}/{}", o.namespace().unwrap_or_default(), o.name_any())
}

/// The end of the fingerprint of a member observed, not served ([`Inventory::engaged`]).
const OBSERVED: &str = "observed";

/// What every sync reads.
struct Context<'a> {
    file: &'a ProviderFile,
    consumer: &'a str,
    share: Option<&'a Share>,
}
