//! The clusters one process serves, as one object its [`Runner`](super::runner::Runner)
//! owns: the hub (the cluster `gatewright run` is pointed at) and, in fleet mode, the
//! members it serves or observes; what the hub knows of the fleet (the inventory's members,
//! and those whose API server its watches find unreachable); and what teardowns left in
//! members that were not served ([`super::left`]), swept every second.
//!
//! A cluster reaches another only through it ([`Cluster::fleet`], a weak reference: the
//! fleet owns the clusters): a placed object is written through its member's own
//! `Cluster` (its client, fence and watches), and what a member sees of placed objects is
//! mirrored to the hub's snapshot. Whether a member is served and whether this replica
//! writes there are the pure rules of [`crate::plan::placement`] (`served`,
//! `writes_here`), asked by [`Cluster::target`].

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams};

use super::cluster::{Cluster, Reach};
use super::common::ClusterId;
use crate::snapshot::fleet::FleetMember;
use crate::snapshot::{Key, ObjectKey};

/// How long, at most, the hub of a fleet keeps Gateways that place templates waiting for
/// its inventory's first view of the members (one that never comes, ClusterProfiles not
/// served in the hub, must not keep them unreported).
pub(super) const FLEET_FIRST_VIEW: Duration = Duration::from_secs(30);

/// The clusters of one process and what the hub knows of the fleet (see the module docs).
pub(crate) struct Fleet {
    /// Every cluster served or observed, by id: the hub, and the members.
    clusters: RwLock<BTreeMap<ClusterId, Arc<Cluster>>>,
    /// What the inventory says of the members, and which are found unreachable.
    view: Mutex<View>,
    /// What teardowns left in members that were not served, to delete once they are.
    pub(super) left: super::left::Left,
    /// What was placed in members let go (by member: each object and its Gateway's UID),
    /// as the hub last mirrored it; dropped when the member is served again (its watches
    /// mirror it afresh). In memory only.
    let_go: Mutex<BTreeMap<String, Vec<(ObjectKey, String)>>>,
    /// When the fleet was set up (the hub's first view is awaited from then).
    created: Instant,
}

impl Reach for Fleet {
    fn get(&self, id: &ClusterId) -> Option<Arc<Cluster>> {
        self.clusters.read().ok()?.get(id).cloned()
    }
    fn members(&self) -> Vec<Arc<Cluster>> {
        self.clusters
            .read()
            .map(|c| c.values().filter(|c| c.is_member()).cloned().collect())
            .unwrap_or_default()
    }
    fn unknown_for(&self) -> Option<Duration> {
        if self.view.lock().is_ok_and(|v| v.known) {
            return None;
        }
        FLEET_FIRST_VIEW.checked_sub(self.created.elapsed())
    }
    fn left(&self) -> &super::left::Left {
        &self.left
    }
    fn placed_in_let_go(&self, uid: &str) -> Vec<ObjectKey> {
        self.let_go
            .lock()
            .map(|l| {
                l.values()
                    .flatten()
                    .filter(|(_, u)| u == uid)
                    .map(|(k, _)| k.clone())
                    .collect()
            })
            .unwrap_or_default()
    }
}

/// What the hub knows of the fleet.
#[derive(Default)]
struct View {
    /// The inventory's members, served or why not.
    members: Vec<FleetMember>,
    /// The members whose API server the watches find unreachable, with why.
    unreachable: BTreeMap<String, String>,
    /// The inventory has given the members once.
    known: bool,
}

impl Fleet {
    /// The fleet of `hub` alone (members are inserted as the inventory engages them).
    pub(super) fn new(hub: Arc<Cluster>) -> Arc<Self> {
        let fleet = Arc::new(Self {
            clusters: RwLock::new(BTreeMap::new()),
            view: Mutex::new(View::default()),
            left: super::left::Left::default(),
            let_go: Mutex::default(),
            created: Instant::now(),
        });
        fleet.insert(hub);
        fleet
    }

    /// Serves (or observes) one more cluster; one of the same id is replaced (and
    /// returned, to stop).
    pub(super) fn insert(self: &Arc<Self>, cluster: Arc<Cluster>) -> Option<Arc<Cluster>> {
        let reach: Arc<dyn Reach> = self.clone();
        cluster.link(Arc::downgrade(&reach));
        if let Ok(mut l) = self.let_go.lock() {
            l.remove(cluster.id().as_str());
        }
        self.clusters
            .write()
            .ok()?
            .insert(cluster.id().clone(), cluster)
    }

    /// Stops serving a cluster: returns it, if it was served.
    pub(super) fn remove(&self, id: &ClusterId) -> Option<Arc<Cluster>> {
        self.clusters.write().ok()?.remove(id)
    }

    /// A member is let go (removed, its watches stopped): the hub forgets what it mirrored
    /// of it, and the fleet keeps what was placed there.
    pub(super) fn let_go(&self, id: &ClusterId) {
        let Some(hub) = self.hub() else {
            return;
        };
        let placed = hub.forget_member(id);
        if let Ok(mut l) = self.let_go.lock() {
            if placed.is_empty() {
                l.remove(id.as_str());
            } else {
                l.insert(id.as_str().to_owned(), placed);
            }
        }
    }

    /// Every cluster served or observed.
    pub(super) fn all(&self) -> Vec<Arc<Cluster>> {
        self.clusters
            .read()
            .map(|c| c.values().cloned().collect())
            .unwrap_or_default()
    }

    /// Sets the members the inventory gives (served or why not), and re-plans every
    /// Gateway of the hub when placement reads them differently: a placed template renders
    /// for the members served (by this replica or, with the members shared, another).
    pub(super) fn set_members(&self, members: Vec<FleetMember>) {
        let first = self.view.lock().is_ok_and(|mut v| {
            v.members = members;
            !std::mem::replace(&mut v.known, true)
        });
        self.refresh();
        if first && let Some(hub) = self.hub() {
            // Gateways that place templates waited for this (`Cluster::fleet_unknown`).
            hub.enqueue_all();
        }
    }

    /// Sets the members found unreachable now (member id -> why); re-plans every Gateway
    /// of the hub when the set changed.
    pub(super) fn set_unreachable(&self, members: BTreeMap<String, String>) {
        let changed = self.view.lock().is_ok_and(|mut v| {
            let same = v.unreachable.keys().eq(members.keys());
            v.unreachable = members;
            !same
        });
        if changed {
            self.refresh();
        }
    }

    /// Every second in fleet mode: the members whose watches find their API server
    /// unreachable stop being served for placement (DNS records stop listing them) until
    /// a watch works again; what teardowns left in members not served then is deleted
    /// once they are.
    pub(super) fn tick(self: &Arc<Self>) {
        let found: BTreeMap<String, String> = self
            .members()
            .iter()
            .filter_map(|c| Some((c.id().as_str().to_owned(), c.unreachable_why()?)))
            .collect();
        self.set_unreachable(found);
        self.sweep_left();
    }

    /// Puts the fleet in the hub's snapshot: the inventory's, with the members found
    /// unreachable not served.
    fn refresh(&self) {
        let Ok(members) = self
            .view
            .lock()
            .map(|v| with_unreachable(&v.members, &v.unreachable))
        else {
            return;
        };
        if let Some(hub) = self.hub() {
            hub.put_fleet(members);
        }
    }

    /// The hub, every second: reads the records of what teardowns left in members (at
    /// start, then every [`super::left::LIST_EVERY`]), deletes what is left in the members
    /// this replica writes to, sees what another replica deleted, and then (the leader)
    /// deletes the records whose objects are all gone; one sweep at a time. Returns at
    /// once.
    pub(super) fn sweep_left(self: &Arc<Self>) {
        let now = std::time::Instant::now();
        let list = self.left.list_due(now);
        let due = self.left.to_sweep(now);
        // The records all of whose objects are gone are deleted after a sweep or a read:
        // one that cannot be deleted is tried again at the next read, not every second.
        if !list && due.is_none() {
            return;
        }
        if !self.left.begin() {
            return;
        }
        let fleet = self.clone();
        tokio::spawn(async move {
            if let Some(hub) = fleet.hub() {
                if list {
                    fleet.left.listing(now);
                    fleet.read_left_records(&hub).await;
                }
                let due = if list { fleet.left.to_sweep(now) } else { due };
                for (member, objs) in due.unwrap_or_default() {
                    fleet.sweep_member(&hub, &member, objs).await;
                }
                fleet.drop_finished_records(&hub).await;
            }
            fleet.left.swept();
        });
    }

    /// Reads the records in the hub ([`super::left::read_record`]).
    async fn read_left_records(&self, hub: &Cluster) {
        let api: Api<ConfigMap> =
            Api::namespaced(hub.client().clone(), &hub.opts.controller_namespace);
        let lp =
            kube::api::ListParams::default().labels(&format!("{}=true", super::left::RECORD_LABEL));
        match api.list(&lp).await {
            Ok(list) => {
                let records = list
                    .items
                    .iter()
                    .filter_map(|cm| super::left::read_record(&serde_json::to_value(cm).ok()?))
                    .map(|(uid, _, objects)| (uid, objects))
                    .collect();
                self.left.listed(records);
            }
            Err(e) => {
                tracing::debug!(error = %e, "could not read the records of what teardowns left in members; trying again later");
            }
        }
    }

    /// Deletes what is left in `member` (`objs`: key -> its Gateway's UID) if this replica
    /// writes there; else looks whether it is gone (another replica deleted it).
    async fn sweep_member(&self, hub: &Cluster, member: &str, objs: BTreeMap<ObjectKey, String>) {
        let served = hub
            .snapshot
            .read()
            .is_ok_and(|s| crate::plan::placement::served(member, s.fleet()).is_ok());
        let Some(at) = self.get(&ClusterId::new(member)).filter(|_| served) else {
            return;
        };
        let may_delete = at.writes_here().is_ok();
        for (key, uid) in objs {
            let now = std::time::Instant::now();
            match at.delete_left(&key, &uid, may_delete).await {
                Ok(super::teardown::Swept::Deleted) => {
                    tracing::info!(child = %key, gateway_uid = %uid, "deleted what a teardown left in the member while it was not served");
                    self.left.done(&key);
                }
                Ok(super::teardown::Swept::Gone) => self.left.done(&key),
                // Another replica deletes it: looked at again, less and less often.
                Ok(super::teardown::Swept::Elsewhere) => {
                    self.left.failed(&key, now);
                }
                Err(e) => {
                    if self.left.failed(&key, now) {
                        tracing::warn!(child = %key, error = %e, "could not delete what a teardown left in the member; trying again, less and less often");
                    } else {
                        tracing::debug!(child = %key, error = %e, "could not delete what a teardown left in the member");
                    }
                }
            }
        }
    }

    /// Deletes the records whose objects are all gone (the leader; another replica only
    /// forgets them).
    async fn drop_finished_records(&self, hub: &Cluster) {
        let api: Api<ConfigMap> =
            Api::namespaced(hub.client().clone(), &hub.opts.controller_namespace);
        for uid in self.left.finished() {
            if hub.writes_here().is_err() {
                self.left.forget_record(&uid);
                continue;
            }
            match api
                .delete(&super::left::record_name(&uid), &DeleteParams::default())
                .await
            {
                Ok(_) => self.left.forget_record(&uid),
                Err(kube::Error::Api(s)) if s.code == 404 => self.left.forget_record(&uid),
                Err(e) => {
                    tracing::debug!(gateway_uid = %uid, error = %e, "could not delete the record of what a teardown left; trying again");
                }
            }
        }
    }
}

/// The user a hub Gateway is known by in a member's child-kind registry (no namespace of
/// a member can hold a `:`): the member re-plans it on the hub when a kind it places
/// there lists.
pub(super) fn hub_user(key: &Key) -> Key {
    Key::new(format!("hub:{}", key.namespace), key.name.clone())
}

/// The hub Gateway a member's registry user names, if it is one ([`hub_user`]).
pub(super) fn hub_gateway(user: &Key) -> Option<Key> {
    user.namespace
        .strip_prefix("hub:")
        .map(|ns| Key::new(ns.to_owned(), user.name.clone()))
}

/// The inventory's `members` as placement reads them: a member the hub's view says is
/// served, but whose watches find its API server `unreachable` (by name: why), is not.
fn with_unreachable(
    members: &[crate::snapshot::fleet::FleetMember],
    unreachable: &BTreeMap<String, String>,
) -> Vec<crate::snapshot::fleet::FleetMember> {
    members
        .iter()
        .cloned()
        .map(|mut m| {
            if m.unserved.is_none()
                && let Some(why) = unreachable.get(&m.name)
            {
                m.unserved = Some(why.clone());
            }
            m
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A cluster whose client is never used (nothing listens there).
    fn cluster(id: &str, queue: &Arc<super::super::queue::Queue>) -> Arc<Cluster> {
        let client = kube::Client::try_from(kube::Config::new(
            "https://127.0.0.1:9".parse().expect("url"),
        ))
        .expect("client");
        let id = if id.is_empty() {
            ClusterId::local()
        } else {
            ClusterId::new(id)
        };
        Arc::new(Cluster::new(
            id,
            client,
            super::super::common::Options::default(),
            Arc::default(),
            queue.clone(),
            None,
            "test",
        ))
    }

    /// A child placed in `member` for the Gateway of `uid`, as the hub mirrors it.
    fn placed(name: &str, member: &str, uid: &str) -> serde_json::Value {
        serde_json::json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {
                "name": name, "namespace": "ns",
                "labels": {crate::render::labels::GATEWAY_UID: uid},
                "annotations": {crate::render::labels::CLUSTER: member},
            },
        })
    }

    #[tokio::test]
    async fn a_member_let_go_leaves_what_was_placed_there_known_until_it_is_served_again() {
        let queue = Arc::new(super::super::queue::Queue::default());
        let hub = cluster("", &queue);
        let fleet = Fleet::new(hub.clone());
        let east = cluster("fleet/east", &queue);
        fleet.insert(east.clone());
        assert!(Arc::ptr_eq(&east.hub().unwrap(), &hub));
        assert_eq!(
            hub.sibling("fleet/east").map(|c| c.id().clone()),
            Some(east.id().clone())
        );
        assert_eq!(fleet.members().len(), 1);
        if let Ok(mut s) = hub.snapshot.write() {
            s.put_child(placed("a", "fleet/east", "uid-1"));
            s.put_child(placed("b", "fleet/east", "uid-2"));
            s.put_child(placed("c", "fleet/west", "uid-1"));
        }
        // Let go: the hub no longer mirrors it, the fleet keeps what was placed there.
        fleet.remove(east.id());
        fleet.let_go(east.id());
        let kept = fleet.placed_in_let_go("uid-1");
        assert_eq!(
            kept.iter()
                .map(|k| (k.name.as_str(), k.cluster.as_str()))
                .collect::<Vec<_>>(),
            [("a", "fleet/east")]
        );
        let reach: Arc<dyn Reach> = fleet.clone();
        assert_eq!(reach.placed_in_let_go("uid-2").len(), 1);
        assert!(
            hub.snapshot
                .read()
                .unwrap()
                .placed_in("fleet/east")
                .is_empty()
        );
        assert_eq!(
            hub.snapshot.read().unwrap().placed_in("fleet/west").len(),
            1
        );
        assert!(hub.sibling("fleet/east").is_none());
        // Served again: its watches mirror it afresh; nothing is kept.
        fleet.insert(cluster("fleet/east", &queue));
        assert!(fleet.placed_in_let_go("uid-1").is_empty());
    }

    fn member(name: &str, unserved: Option<&str>) -> FleetMember {
        FleetMember {
            name: name.to_owned(),
            display_name: name.to_owned(),
            labels: BTreeMap::new(),
            properties: BTreeMap::new(),
            addresses: None,
            unserved: unserved.map(str::to_owned),
        }
    }

    #[test]
    fn a_hub_gateway_is_known_in_a_member_by_a_name_no_namespace_can_hold() {
        let gw = Key::new("infra", "gw");
        let user = hub_user(&gw);
        assert_eq!(user.namespace, "hub:infra");
        assert_eq!(user.name, "gw");
        assert_eq!(hub_gateway(&user), Some(gw));
        // A member's own Gateway is no hub Gateway.
        assert_eq!(hub_gateway(&Key::new("infra", "gw")), None);
    }

    #[test]
    fn a_member_found_unreachable_is_not_served_and_keeps_an_earlier_reason() {
        let members = [
            member("fleet/east", None),
            member("fleet/west", Some("unhealthy")),
            member("fleet/north", None),
        ];
        let unreachable: BTreeMap<String, String> = [
            ("fleet/east".to_owned(), "connection refused".to_owned()),
            ("fleet/west".to_owned(), "timed out".to_owned()),
            ("fleet/gone".to_owned(), "timed out".to_owned()),
        ]
        .into();
        let seen = with_unreachable(&members, &unreachable);
        let unserved: Vec<(&str, Option<&str>)> = seen
            .iter()
            .map(|m| (m.name.as_str(), m.unserved.as_deref()))
            .collect();
        assert_eq!(
            unserved,
            [
                ("fleet/east", Some("connection refused")),
                ("fleet/west", Some("unhealthy")),
                ("fleet/north", None),
            ]
        );
        assert_eq!(with_unreachable(&members, &BTreeMap::new()), members);
    }
}
