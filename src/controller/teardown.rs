//! The teardown of a deleted Gateway: its children are deleted one template at a time,
//! dependents first (route children before the Gateway's, higher `gatewright.dev/order`
//! first), a deletion that hangs is reported on the Gateway and in an Event, and our
//! finalizer goes only once the API server holds no child of any kind the Gateway used.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use gateway_api::apis::standard::gatewayclasses::GatewayClass;
use gateway_api::apis::standard::gateways::Gateway;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, Preconditions};
use kube::discovery::Scope;
use serde_json::{Value, json};

use super::child_kinds::KindState;
use super::cluster::Cluster;
use super::common::Error;
use super::echo::{now, strip_times};
use crate::gateway::conditions::{Cond, merge_conditions, reasons, types};
use crate::plan::rollout::seconds_since;
use crate::render::labels;
use crate::render::labels::GATEWAY_FINALIZER;
use crate::snapshot::{Key, ObjectKey};

/// The children to delete next: route children first, then the Gateway's, each set in
/// reverse template order, one template's children at a time (the next only once they
/// are gone), so nothing is deleted while a child that reads it still exists. The
/// position each child was rendered at is its `gatewright.dev/order` annotation (the
/// order of what is live, there even when the blueprint is gone), else the blueprint's.
fn next_group<'a>(
    children: &'a [Value],
    gateway_uid: &str,
    order: &(Vec<String>, Vec<String>),
) -> Vec<&'a Value> {
    let rank = |c: &Value| {
        let t = labels::template(c).unwrap_or_default();
        let route_child = labels::parent_uid(c) != Some(gateway_uid);
        let set = if route_child { &order.1 } else { &order.0 };
        let pos = labels::order(c)
            .or_else(|| set.iter().position(|x| x == t))
            .unwrap_or(usize::MAX - 1);
        (!route_child, std::cmp::Reverse(pos))
    };
    let first = children.iter().map(rank).min();
    children.iter().filter(|c| Some(rank(c)) == first).collect()
}

/// What a teardown leaves in members that are not served, by member: the member and, in
/// words, what is left there and why.
fn left_behind(children: &[Value], snap: &crate::snapshot::Snapshot) -> Vec<(String, String)> {
    let mut by_member: std::collections::BTreeMap<String, Vec<String>> =
        std::collections::BTreeMap::new();
    for c in children {
        let k = ObjectKey::of(c);
        by_member
            .entry(k.cluster.clone())
            .or_default()
            .push(format!("{} {}/{}", k.kind, k.namespace, k.name));
    }
    by_member
        .into_iter()
        .map(|(member, objects)| {
            let why = crate::plan::placement::served(&member, snap.fleet())
                .err()
                .unwrap_or_default();
            let words = format!(
                "left in member {member}, which is not served ({why}): {}; delete them there once it is back",
                objects.join(", ")
            );
            (member, words)
        })
        .collect()
}

/// A child whose deletion hangs: its key and why, in words.
struct StuckDeletion {
    child: String,
    why: String,
}

/// The deletions of `group` that have been pending longer than `limit` seconds at `now`,
/// and in how many seconds the next one would be (to look again then).
fn stuck_deletions(
    group: &[&Value],
    limit: i64,
    now: Timestamp,
) -> (Vec<StuckDeletion>, Option<i64>) {
    let mut stuck = Vec::new();
    let mut next_check: Option<i64> = None;
    for c in group {
        let Some(since) = c["metadata"]["deletionTimestamp"]
            .as_str()
            .and_then(|t| seconds_since(t, now))
        else {
            continue;
        };
        if since > limit {
            let fins: Vec<&str> = c["metadata"]["finalizers"]
                .as_array()
                .map(|f| f.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            let child = ObjectKey::of(c).to_string();
            let why = format!(
                "{child} has been deleting for {since}s (finalizers: {})",
                fins.join(", ")
            );
            stuck.push(StuckDeletion { child, why });
        } else {
            let left = limit - since + 1;
            next_check = Some(next_check.map_or(left, |n| n.min(left)));
        }
    }
    (stuck, next_check)
}

/// The `gatewright.dev/Teardown` condition: deleting (naming what goes now), or stuck
/// (naming each deletion that hangs).
fn teardown_cond(left: usize, group: &[&Value], stuck: &[StuckDeletion]) -> Cond {
    if stuck.is_empty() {
        let now: Vec<String> = group.iter().map(|c| ObjectKey::of(c).to_string()).collect();
        return Cond::f(
            types::TEARDOWN,
            reasons::DELETING,
            &format!(
                "deleting children dependents first, {left} left; now: {}",
                now.join(", ")
            ),
        );
    }
    let whys: Vec<&str> = stuck.iter().map(|s| s.why.as_str()).collect();
    Cond::f(
        types::TEARDOWN,
        reasons::DELETION_STUCK,
        &format!("the teardown waits: {}", whys.join("; ")),
    )
}

impl Cluster {
    /// Deletes every child of a deleted Gateway, dependents first, then lets it go.
    pub(super) async fn teardown(
        self: &Arc<Self>,
        key: &Key,
        gw: &Gateway,
        kinds: &BTreeSet<(String, String)>,
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
            let (children, left): (Vec<Value>, Vec<Value>) = snap
                .children_by_gateway(&uid)
                .map(Arc::unwrap_or_clone)
                .partition(|c| crate::plan::placement::deletable(&ObjectKey::of(c), snap.fleet()));
            for c in &left {
                self.left.add(ObjectKey::of(c), &uid);
            }
            let left = left_behind(&left, &snap);
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
        self.announce_left(key, gw, &left).await;
        if children.is_empty() {
            return self.release(key, gw, &uid, kinds).await;
        }
        let group = next_group(&children, &uid, &order);
        // Each child of the group is deleted, or first drained (its template's `drain`).
        let mut draining: Vec<String> = Vec::new();
        let mut wake: Option<u64> = None;
        for c in group
            .iter()
            .filter(|c| c["metadata"]["deletionTimestamp"].is_null())
        {
            let set = if labels::parent_uid(c) == Some(uid.as_str()) {
                crate::render::TemplateSet::Gateway
            } else {
                crate::render::TemplateSet::Route
            };
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
        let (stuck, next_check) = stuck_deletions(&group, limit, Timestamp::now());
        let mut cond = teardown_cond(children.len(), &group, &stuck);
        if !draining.is_empty() && stuck.is_empty() {
            cond.message = format!(
                "draining before deleting, {} children left: {}",
                children.len(),
                draining.join("; ")
            );
        }
        self.write_teardown_condition(key, gw, &cond).await?;
        self.announce_stuck(key, gw, &stuck).await;
        // Child deletions wake this Gateway through the child watches; look again at the
        // next deadline, or every 30 s while stuck.
        let again = next_check.map_or(30, |n| u64::try_from(n).unwrap_or(1).max(1));
        Ok(Some(Duration::from_secs(
            wake.map_or(again, |w| w.min(again)),
        )))
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

#[cfg(test)]
mod tests {
    use super::*;

    fn child(name: &str, parent: &str, template: &str, order: Option<usize>) -> Value {
        let mut c = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "ns",
            "labels": {labels::PARENT_UID: parent, labels::GATEWAY_UID: "gw", labels::TEMPLATE: template}}});
        if let Some(o) = order {
            c["metadata"]["annotations"] = json!({ labels::ORDER: o.to_string() });
        }
        c
    }

    fn names(g: &[&Value]) -> Vec<String> {
        g.iter()
            .map(|c| c["metadata"]["name"].as_str().unwrap().to_owned())
            .collect()
    }

    #[test]
    fn route_children_go_first_then_the_gateways_from_the_last_template() {
        let order = (
            vec!["cert".to_owned(), "gw".to_owned(), "dns".to_owned()],
            vec!["route".to_owned()],
        );
        let mut children = vec![
            child("cert", "gw", "cert", None),
            child("dns", "gw", "dns", None),
            child("gw", "gw", "gw", None),
            child("r1", "route-1", "route", None),
        ];
        assert_eq!(names(&next_group(&children, "gw", &order)), ["r1"]);
        children.pop();
        assert_eq!(names(&next_group(&children, "gw", &order)), ["dns"]);
        // The annotation wins over the blueprint's order (the blueprint may be gone).
        children[0] = child("cert", "gw", "cert", Some(7));
        assert_eq!(names(&next_group(&children, "gw", &order)), ["cert"]);
        // Without the blueprint, a child without the annotation goes first.
        assert_eq!(
            names(&next_group(&children, "gw", &(Vec::new(), Vec::new()))),
            ["dns", "gw"]
        );
    }

    #[test]
    fn a_deletion_is_stuck_past_the_limit_and_named_with_its_finalizers() {
        let now: Timestamp = "2026-01-01T00:10:00Z".parse().unwrap();
        let mut old = child("old", "gw", "t", None);
        old["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
        old["metadata"]["finalizers"] = json!(["example.com/hold"]);
        let mut young = child("young", "gw", "t", None);
        young["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:09:00Z");
        let fresh = child("fresh", "gw", "t", None);
        let group = vec![&old, &young, &fresh];
        let (stuck, next) = stuck_deletions(&group, 300, now);
        assert_eq!(stuck.len(), 1);
        assert_eq!(stuck[0].child, "ConfigMap ns/old");
        assert!(
            stuck[0].why.contains("600s") && stuck[0].why.contains("example.com/hold"),
            "{}",
            stuck[0].why
        );
        assert_eq!(next, Some(241), "the young one is stuck in 241 s");
        let c = teardown_cond(3, &group, &stuck);
        assert_eq!(c.reason, reasons::DELETION_STUCK);
        let c = teardown_cond(3, &group, &[]);
        assert_eq!(c.reason, reasons::DELETING);
        assert!(c.message.contains("3 left"), "{}", c.message);
    }
}

/// What became of one object left in a member.
#[derive(Debug, PartialEq, Eq)]
enum Swept {
    /// Deleted now.
    Deleted,
    /// Gone already, or no longer the object placed for that Gateway: nothing to do.
    Gone,
}

impl Cluster {
    /// The hub: starts deleting what teardowns left in members that are served again,
    /// unless a sweep is under way. Returns at once.
    pub(super) fn sweep_left(self: &Arc<Self>) {
        let Some(pending) = self.left.to_sweep(std::time::Instant::now()) else {
            return;
        };
        let hub = self.clone();
        tokio::spawn(async move {
            for (member, objs) in pending {
                let served = hub
                    .snapshot
                    .read()
                    .is_ok_and(|s| crate::plan::placement::served(&member, s.fleet()).is_ok());
                if !served {
                    continue;
                }
                for (key, uid) in objs {
                    let Ok(at) = hub.target(&key) else { continue };
                    match at.delete_left(&key, &uid).await {
                        Ok(Swept::Deleted) => {
                            tracing::info!(child = %key, gateway_uid = %uid, "deleted what a teardown left in the member while it was not served");
                            hub.left.done(&key);
                        }
                        Ok(Swept::Gone) => hub.left.done(&key),
                        Err(e) => {
                            if hub.left.failed(&key, std::time::Instant::now()) {
                                tracing::warn!(child = %key, error = %e, "could not delete what a teardown left in the member; trying again, less and less often");
                            } else {
                                tracing::debug!(child = %key, error = %e, "could not delete what a teardown left in the member");
                            }
                        }
                    }
                }
            }
            hub.left.swept();
        });
    }

    /// A member: deletes `key` if it is still the object placed for the Gateway of
    /// `gateway_uid` (its label, and the UID it has now as a precondition).
    async fn delete_left(&self, key: &ObjectKey, gateway_uid: &str) -> Result<Swept, String> {
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
