//! What a teardown left in members that were not served (fleet mode's placement). The hub
//! remembers each object with the UID of the Gateway it was placed for, and deletes it
//! once its member is served again, if it still carries that UID: an object that another
//! Gateway has made since under the same name is never touched. Kept in memory only:
//! after a restart, the Warning Event `PlacedChildrenLeft` is the record.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use kube::api::{Api, DeleteParams, DynamicObject, Preconditions};
use kube::core::GroupVersionKind;
use kube::discovery::Scope;

use super::cluster::Cluster;
use crate::render::labels;
use crate::snapshot::ObjectKey;

/// The objects left in members, by member: each with the UID of its Gateway.
#[derive(Default)]
pub(super) struct Left {
    by_member: Mutex<BTreeMap<String, BTreeMap<ObjectKey, String>>>,
    sweeping: AtomicBool,
}

impl Left {
    /// Remembers `key`, placed for the Gateway of `gateway_uid`, as left in its member.
    pub(super) fn add(&self, key: ObjectKey, gateway_uid: &str) {
        if let Ok(mut m) = self.by_member.lock() {
            m.entry(key.cluster.clone())
                .or_default()
                .insert(key, gateway_uid.to_owned());
        }
    }

    /// Whether nothing is remembered.
    fn is_empty(&self) -> bool {
        self.by_member.lock().map_or(true, |m| m.is_empty())
    }

    fn pending(&self) -> BTreeMap<String, BTreeMap<ObjectKey, String>> {
        self.by_member.lock().map(|m| m.clone()).unwrap_or_default()
    }

    fn done(&self, key: &ObjectKey) {
        if let Ok(mut m) = self.by_member.lock()
            && let Some(objs) = m.get_mut(&key.cluster)
        {
            objs.remove(key);
            if objs.is_empty() {
                m.remove(&key.cluster);
            }
        }
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
        if self.left.is_empty() || self.left.sweeping.swap(true, Ordering::AcqRel) {
            return;
        }
        let hub = self.clone();
        tokio::spawn(async move {
            for (member, objs) in hub.left.pending() {
                let served = hub
                    .snapshot
                    .read()
                    .is_ok_and(|s| s.fleet().get(&member).is_some_and(|m| m.unserved.is_none()));
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
                            tracing::warn!(child = %key, error = %e, "could not delete what a teardown left in the member; trying again");
                        }
                    }
                }
            }
            hub.left.sweeping.store(false, Ordering::Release);
        });
    }

    /// A member: deletes `key` if it is still the object placed for the Gateway of
    /// `gateway_uid` (its label, and the UID it has now as a precondition).
    async fn delete_left(&self, key: &ObjectKey, gateway_uid: &str) -> Result<Swept, String> {
        let (group, version) = key
            .api_version
            .split_once('/')
            .unwrap_or(("", key.api_version.as_str()));
        let gvk = GroupVersionKind::gvk(group, version, &key.kind);
        let (resource, caps) = match kube::discovery::pinned_kind(&self.client, &gvk).await {
            Ok(r) => r,
            // The kind is gone from the member, and its objects with it.
            Err(kube::Error::Api(s)) if s.code == 404 => return Ok(Swept::Gone),
            Err(e) => return Err(format!("{} is not discovered: {e}", key.kind)),
        };
        let api: Api<DynamicObject> = match caps.scope {
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
