//! Fleet mode's shell: the hub's ClusterProfiles, and the kubeconfig Secrets of the
//! members reached without an access provider, watched; each member engaged (a
//! [`Cluster`](super::cluster::Cluster) in the `Runner`, through [`Members`]) while
//! [`crate::fleet::members::verdict`] says so, replaced when its credentials change,
//! and let go when its profile goes or its control plane is no longer reported healthy.
//! Added, changed and removed profiles are picked up as they come, without a restart. A
//! member that cannot be reached is reported (its watches' failures, the fleet metric)
//! and never holds the others, nor the controller's readiness.

use std::collections::BTreeMap;
use std::sync::{Arc, Weak};

use futures::StreamExt;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, DynamicObject};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use kube::{Client, ResourceExt};

use super::common::{ClusterId, FleetOptions};
use crate::fleet::access::{self, ProviderFile};
use crate::fleet::members::{Verdict, fingerprint, verdict};
use crate::fleet::profile::{self, ClusterProfile};

/// One change seen on the hub.
enum Change {
    Profile(Event<DynamicObject>),
    Secret(Event<Secret>),
}

/// What the inventory does with the members: the runner serves them.
pub(super) trait Members: Send + Sync {
    /// Serves a member through `client` (replacing one served under `id`).
    fn engage(&self, id: ClusterId, client: Client);
    /// Stops serving a member.
    fn let_go(&self, id: &ClusterId);
    /// Each member and its state, for the metrics.
    fn report(&self, states: BTreeMap<String, &'static str>);
}

/// What the inventory knows and has done.
#[derive(Default)]
struct Inventory {
    profiles: BTreeMap<String, ClusterProfile>,
    secrets: BTreeMap<String, Secret>,
    /// Engaged members: profile key -> the fingerprint of the kubeconfig in use.
    engaged: BTreeMap<String, String>,
    /// The last verdict's words per member not engaged (logged when they change).
    said: BTreeMap<String, String>,
}

/// Watches the hub's inventory through `hub` and engages members in `runner` until the
/// runner is dropped.
pub(super) async fn run<R: Members + 'static>(runner: Weak<R>, hub: Client, fleet: FleetOptions) {
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
    let mut changes = futures::stream::select(profile_events, secret_events);
    let mut inv = Inventory::default();
    let mut last_error: Option<String> = None;
    while let Some(change) = changes.next().await {
        let Some(runner) = runner.upgrade() else {
            return;
        };
        match change {
            Ok(c) => {
                last_error = None;
                if inv.take(c) {
                    inv.sync(&runner, &file, &fleet.consumer).await;
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
                false
            }
            Change::Profile(Event::InitDone) | Change::Secret(Event::InitDone) => true,
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

    /// Engages, replaces and lets go of members as the verdicts say.
    async fn sync<R: Members>(&mut self, runner: &Arc<R>, file: &ProviderFile, consumer: &str) {
        let secrets: Vec<Secret> = self.secrets.values().cloned().collect();
        let mut states: BTreeMap<String, &'static str> = BTreeMap::new();
        let profiles: Vec<(String, ClusterProfile)> = self
            .profiles
            .iter()
            .map(|(k, p)| (k.clone(), p.clone()))
            .collect();
        for (key, p) in &profiles {
            let v = verdict(p, file, consumer, &secrets);
            let state = match v {
                Verdict::Engage(kubeconfig) => {
                    let fp = fingerprint(&kubeconfig);
                    if self.engaged.get(key) == Some(&fp) {
                        "engaged"
                    } else {
                        match member_client(p, *kubeconfig).await {
                            Ok(client) => {
                                runner.engage(ClusterId::new(key), client);
                                tracing::info!(cluster = %key, "serving the member cluster");
                                self.engaged.insert(key.clone(), fp);
                                self.said.remove(key);
                                "engaged"
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
        runner.report(states);
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

/// A client for a member from its kubeconfig. An exec plugin runs while the client is
/// built (synchronously, in kube), so that happens on a blocking thread.
async fn member_client(
    p: &ClusterProfile,
    kubeconfig: kube::config::Kubeconfig,
) -> Result<Client, String> {
    let config = access::client_config(p, kubeconfig)
        .await
        .map_err(|e| e.to_string())?;
    let key = p.key();
    tokio::task::spawn_blocking(move || Client::try_from(config))
        .await
        .map_err(|e| format!("ClusterProfile {key}: building its client failed: {e}"))?
        .map_err(|e| format!("ClusterProfile {key}: its client cannot be built: {e}"))
}
