//! The teardown of a deleted Gateway: its children are deleted one template at a time,
//! dependents first (route children before the Gateway's, higher `gatewright.dev/order`
//! first), a deletion that hangs is reported on the Gateway and in an Event, and our
//! finalizer goes only once the API server holds no child of any kind the Gateway used.
//! What goes next, what is stuck and the condition are decided in [`crate::plan::teardown`].

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use gateway_api::apis::standard::gatewayclasses::GatewayClass;
use gateway_api::apis::standard::gateways::Gateway;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, Preconditions};
use kube::discovery::Scope;
use serde_json::{Value, json};

use super::child_kinds::KindState;
use super::cluster::Cluster;
use super::common::Error;
use super::echo::{now, strip_times};
use super::reconcile::Part;
use crate::gateway::conditions::{Cond, merge_conditions};
use crate::plan::teardown::{
    StuckDeletion, left_behind, look_again, next_group, stuck_deletions, teardown_cond,
    template_set,
};
use crate::render::labels;
use crate::render::labels::GATEWAY_FINALIZER;
use crate::snapshot::{Key, ObjectKey};

impl Cluster {
    /// Deletes every child of a deleted Gateway, dependents first, then lets it go. With
    /// [`Part::Placed`] (another replica leads), only the children of each group that are
    /// placed in a member whose Lease this replica holds: the leader deletes the rest,
    /// waits for these, reports, and lets the Gateway go.
    pub(super) async fn teardown(
        self: &Arc<Self>,
        key: &Key,
        gw: &Gateway,
        kinds: &BTreeSet<(String, String)>,
        part: Part,
    ) -> Result<Option<Duration>, Error> {
        if !gw.finalizers().iter().any(|f| f == GATEWAY_FINALIZER) {
            return Ok(None);
        }
        let uid = gw.metadata.uid.clone().unwrap_or_default();
        let (children, left, order, prepared) = {
            let snap = self.snapshot.read().map_err(|_| Error::SnapshotPoisoned)?;
            // Children placed in a member that is not served (unreachable, unhealthy,
            // gone) cannot be deleted from here: they are left there, and said so,
            // rather than holding the teardown until the member is back.
            let (children, left): (Vec<Arc<Value>>, Vec<Arc<Value>>) = snap
                .children_by_gateway(&uid)
                .partition(|c| crate::plan::placement::deletable(&ObjectKey::of(c), snap.fleet()));
            let mut left: Vec<ObjectKey> = left.iter().map(|c| ObjectKey::of(c)).collect();
            if let Some(fleet) = self.fleet() {
                // And what was placed in members let go (no longer mirrored here).
                left.extend(fleet.placed_in_let_go(&uid));
                left.sort();
                left.dedup();
                if part == Part::All {
                    for k in &left {
                        fleet.left().add(k.clone(), &uid);
                    }
                }
            }
            let left = left_behind(&left, snap.fleet());
            // The revision the Gateway renders: its drains and order.
            let prepared = crate::plan::revisions::resolve(
                &snap,
                snap.class(&gw.spec.gateway_class_name)
                    .map_or(&GatewayClass::default(), |c| c.as_ref()),
                gw,
                key,
            )
            .0
            .ok();
            let order = prepared
                .as_ref()
                .map(|p| (p.gateway_graph.order.clone(), p.route_graph.order.clone()))
                .unwrap_or_default();
            (children, left, order, prepared)
        };
        if part == Part::Placed {
            if children.is_empty() {
                return Ok(None);
            }
        } else {
            // Durable before the Gateway goes: a restart, or another replica, finds it.
            self.record_left(key, &uid).await?;
            self.announce_left(key, gw, &left).await;
            if children.is_empty() {
                return self.release(key, gw, &uid, kinds).await;
            }
        }
        let group = next_group(&children, &uid, &order);
        // Each child of the group is deleted, or first drained (its template's `drain`).
        let mut draining: Vec<String> = Vec::new();
        let mut wake: Option<u64> = None;
        for &c in group
            .iter()
            .filter(|c| c["metadata"]["deletionTimestamp"].is_null())
        {
            let set = template_set(c, &uid);
            if let Some((words, again)) = self
                .drain_or_delete_child(gw, "Teardown", prepared.as_deref(), set, c)
                .await?
            {
                draining.push(words);
                wake = Some(wake.map_or(again, |w| w.min(again)));
            }
        }
        // A child whose deletion hangs (someone else's finalizer, a stuck controller)
        // holds the teardown: say so on the Gateway and in an Event, once.
        let limit = i64::try_from(self.opts.deletion_stuck_after.as_secs()).unwrap_or(i64::MAX);
        let group: Vec<&Value> = group.into_iter().map(|c| &**c).collect();
        let (stuck, next_check) = stuck_deletions(&group, limit, Timestamp::now());
        if part == Part::Placed {
            // What the teardown waits for is the leader's to report.
            return Ok(Some(look_again(next_check, wake)));
        }
        let cond = teardown_cond(children.len(), &group, &stuck, &draining);
        self.write_teardown_condition(key, gw, &cond).await?;
        self.announce_stuck(key, gw, &stuck).await;
        Ok(Some(look_again(next_check, wake)))
    }

    /// One Warning per member whose placed children a teardown newly leaves there.
    async fn announce_left(&self, key: &Key, gw: &Gateway, left: &[(String, String)]) {
        let now_left: BTreeSet<String> = left.iter().map(|(m, _)| m.clone()).collect();
        let before = self
            .memory
            .with(key, |m| {
                let e = m.reported.get_or_insert_default();
                let before = e.left_in.clone();
                e.left_in.extend(now_left.iter().cloned());
                before
            })
            .unwrap_or_default();
        for (member, words) in left.iter().filter(|(m, _)| !before.contains(m)) {
            tracing::warn!(cluster = %member, gateway = %key, "{words}");
            self.event(gw, true, "PlacedChildrenLeft", "Teardown", words)
                .await;
        }
    }

    /// One Warning per deletion that newly hangs.
    async fn announce_stuck(&self, key: &Key, gw: &Gateway, stuck: &[StuckDeletion]) {
        let now_stuck: BTreeSet<String> = stuck.iter().map(|s| s.child.clone()).collect();
        let before = self
            .memory
            .with(key, |m| {
                let e = m.reported.get_or_insert_default();
                std::mem::replace(&mut e.stuck_deletions, now_stuck)
            })
            .unwrap_or_default();
        for s in stuck.iter().filter(|s| !before.contains(&s.child)) {
            self.event(gw, true, "DeletionStuck", "Teardown", &s.why)
                .await;
        }
    }

    /// The snapshot holds no child: asks the API server before letting the Gateway go,
    /// for every kind it renders or owned (a watch being restarted has an empty cache),
    /// then removes our finalizer.
    async fn release(
        self: &Arc<Self>,
        key: &Key,
        gw: &Gateway,
        uid: &str,
        kinds: &BTreeSet<(String, String)>,
    ) -> Result<Option<Duration>, Error> {
        for (api_version, kind) in kinds {
            match self.ensure_kind(api_version, kind) {
                KindState::Served { resource, .. } => {
                    let api: Api<DynamicObject> = Api::all_with(self.client.clone(), &resource);
                    let lp = kube::api::ListParams::default()
                        .labels(&format!("{}={uid}", labels::GATEWAY_UID))
                        .limit(1);
                    let left = api
                        .list_metadata(&lp)
                        .await
                        .map_err(|e| Error::kube(format!("list {kind} children"), e))?;
                    if !left.items.is_empty() {
                        tracing::info!(%kind, "children still exist though the cache has none; waiting for the watch");
                        return Ok(Some(Duration::from_secs(1)));
                    }
                }
                KindState::Pending => return Ok(Some(Duration::from_millis(500))),
                KindState::Missing(_) => {}
            }
        }
        let fins: Vec<String> = gw
            .finalizers()
            .iter()
            .filter(|f| *f != GATEWAY_FINALIZER)
            .cloned()
            .collect();
        let api: Api<Gateway> = Api::namespaced(self.client.clone(), &key.namespace);
        let patch =
            json!({ "metadata": { "finalizers": fins, "resourceVersion": gw.resource_version() } });
        match api
            .patch_metadata(&key.name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(e) => return Err(Error::kube("remove the Gateway finalizer", e)),
        }
        self.metrics.status_writes.fetch_add(1, Ordering::Relaxed);
        Ok(None)
    }

    /// Sets one condition of a Gateway being deleted, when it changed.
    async fn write_teardown_condition(
        &self,
        key: &Key,
        gw: &Gateway,
        cond: &Cond,
    ) -> Result<(), Error> {
        let existing: Vec<_> = gw
            .status
            .as_ref()
            .and_then(|s| s.conditions.clone())
            .unwrap_or_default();
        let merged = merge_conditions(
            &existing,
            std::slice::from_ref(cond),
            &[],
            gw.metadata.generation,
            &now(),
        );
        let strip = |c: &[k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition]| {
            strip_times(&serde_json::to_value(c).unwrap_or(Value::Null))
        };
        if strip(&merged) == strip(&existing) {
            return Ok(());
        }
        let api: Api<Gateway> = Api::namespaced(self.client.clone(), &key.namespace);
        self.metrics.status_writes.fetch_add(1, Ordering::Relaxed);
        match api
            .patch_status(
                &key.name,
                &PatchParams::default(),
                &Patch::Merge(&json!({ "status": { "conditions": merged } })),
            )
            .await
        {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
            Err(e) => Err(Error::kube("write the Gateway teardown status", e)),
        }
    }
}

/// What became of one object left in a member.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Swept {
    /// Deleted now.
    Deleted,
    /// Gone already, or no longer the object placed for that Gateway: nothing to do.
    Gone,
    /// Still there, in a member another replica writes to: that one deletes it.
    Elsewhere,
}

impl Cluster {
    /// Writes the record of what the teardown of `key` (UID `uid`) left in members, when
    /// it does not list all of it yet ([`super::left::record_object`]).
    async fn record_left(&self, key: &Key, uid: &str) -> Result<(), Error> {
        let Some(fleet) = self.fleet() else {
            return Ok(());
        };
        let Some(objects) = fleet.left().to_record(uid) else {
            return Ok(());
        };
        let ns = &self.opts.controller_namespace;
        let record = super::left::record_object(ns, uid, &key.to_string(), &objects);
        let api: Api<ConfigMap> = Api::namespaced(self.client.clone(), ns);
        let pp = PatchParams::apply(crate::identity::FIELD_MANAGER).force();
        match api
            .patch(&super::left::record_name(uid), &pp, &Patch::Apply(&record))
            .await
        {
            Ok(_) => {}
            // No such namespace (a controller run by hand with a namespace of its own
            // name): the teardown is not held for it; what is left is remembered in
            // memory, and said in the Event.
            Err(kube::Error::Api(s)) if s.code == 404 => {
                if fleet.left().unrecorded() {
                    tracing::warn!(namespace = %ns, "the controller's namespace does not exist: what teardowns leave in members is remembered in memory only (and said in an Event), not across a restart");
                }
            }
            Err(e) => return Err(Error::kube("record what the teardown left in members", e)),
        }
        fleet.left().recorded(uid, objects);
        Ok(())
    }

    /// A member: deletes `key` if it is still the object placed for the Gateway of
    /// `gateway_uid` (its label, and the UID it has now as a precondition) and
    /// `may_delete` (this replica writes here); else only says whether it is gone.
    pub(super) async fn delete_left(
        &self,
        key: &ObjectKey,
        gateway_uid: &str,
        may_delete: bool,
    ) -> Result<Swept, String> {
        let (resource, scope) =
            match crate::discovery::lookup_kind(&self.client, &key.api_version, &key.kind).await {
                Ok(r) => r,
                // The kind is gone from the member, and its objects with it.
                Err(kube::Error::Api(s)) if s.code == 404 => return Ok(Swept::Gone),
                Err(e) => return Err(format!("{} is not discovered: {e}", key.kind)),
            };
        let api: Api<DynamicObject> = match scope {
            Scope::Namespaced => {
                Api::namespaced_with(self.client.clone(), &key.namespace, &resource)
            }
            Scope::Cluster => Api::all_with(self.client.clone(), &resource),
        };
        let Some(obj) = api.get_opt(&key.name).await.map_err(|e| e.to_string())? else {
            return Ok(Swept::Gone);
        };
        let ours = obj
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(labels::GATEWAY_UID))
            == Some(&gateway_uid.to_owned());
        if !ours {
            return Ok(Swept::Gone);
        }
        if !may_delete {
            return Ok(Swept::Elsewhere);
        }
        let dp = DeleteParams {
            preconditions: Some(Preconditions {
                uid: obj.metadata.uid.clone(),
                resource_version: None,
            }),
            ..DeleteParams::background()
        };
        match api.delete(&key.name, &dp).await {
            Ok(_) => Ok(Swept::Deleted),
            Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => Ok(Swept::Gone),
            Err(e) => Err(e.to_string()),
        }
    }
}
