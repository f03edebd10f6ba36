//! Status of our policies (`GatewayClassConfig`, `GatewayConfig`): per ancestor, whether
//! the policy applies there ([`crate::plan::policy`] decides). Our entries are replaced,
//! other controllers' entries kept; written only when it changed (times aside), with the
//! resourceVersion read, so a concurrent writer makes us read again.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use kube::api::{Api, Patch, PatchParams};
use serde_json::{Value, json};

use super::cluster::Cluster;
use super::common::Error;
use super::echo::{now, own_status_key, strip_times};
use crate::plan::policy::next_policy_status;
use crate::snapshot::Key;

pub use super::common::PolicyKind;

impl Cluster {
    /// Writes a policy's status when it changed.
    pub(crate) async fn reconcile_policy(
        self: &Arc<Self>,
        kind: PolicyKind,
        key: &Key,
    ) -> Result<Option<Duration>, Error> {
        let found = {
            let snap = self.snapshot.read().map_err(|_| Error::SnapshotPoisoned)?;
            match kind {
                PolicyKind::ClassConfig => crate::plan::policy::class_config_status(&snap, key)
                    .and_then(|ours| {
                        snap.class_config(key)
                            .map(|c| (ours, c.metadata.clone(), c.status.clone()))
                    }),
                PolicyKind::GatewayConfig => crate::plan::policy::gateway_config_status(&snap, key)
                    .and_then(|ours| {
                        snap.gateway_config(key)
                            .map(|c| (ours, c.metadata.clone(), c.status.clone()))
                    }),
            }
        };
        let Some((ours, meta, status)) = found else {
            return Ok(None);
        };
        let existing = status.unwrap_or_default();
        let next = next_policy_status(&existing, &ours, meta.generation, &now());
        let desired = serde_json::to_value(&next).unwrap_or(Value::Null);
        let own = own_status_key(kind.kind(), &key.namespace, &key.name);
        let current = serde_json::to_value(&existing).unwrap_or(Value::Null);
        if strip_times(&desired) == strip_times(&current)
            && self.own_status.cache_has_own(&own, &current)
        {
            return Ok(None);
        }
        let patch = json!({
            "metadata": { "resourceVersion": meta.resource_version },
            "status": desired,
        });
        self.metrics.status_writes.fetch_add(1, Ordering::Relaxed);
        self.own_status.expect(own, &desired);
        let params = PatchParams::default();
        // The snapshot holds what we wrote at once (unless a watch event brought a newer
        // version meanwhile): a pass right behind this one compares with it, not with the
        // version before our write, and neither writes the same again nor sends a write
        // bound to fail on that older resourceVersion (a 409 with nobody else writing).
        let based_on = meta.resource_version.clone();
        let unchanged_since =
            |m: Option<&kube::api::ObjectMeta>| m.is_some_and(|m| m.resource_version == based_on);
        let result = match kind {
            PolicyKind::ClassConfig => Api::<crate::api::GatewayClassConfig>::namespaced(
                self.client.clone(),
                &key.namespace,
            )
            .patch_status(&key.name, &params, &Patch::Merge(&patch))
            .await
            .map(|mut written| {
                written.metadata.managed_fields = None;
                if let Ok(mut s) = self.snapshot.write()
                    && unchanged_since(s.class_config(key).map(|c| &c.metadata))
                {
                    s.put_class_config(written);
                }
            }),
            PolicyKind::GatewayConfig => {
                Api::<crate::api::GatewayConfig>::namespaced(self.client.clone(), &key.namespace)
                    .patch_status(&key.name, &params, &Patch::Merge(&patch))
                    .await
                    .map(|mut written| {
                        written.metadata.managed_fields = None;
                        if let Ok(mut s) = self.snapshot.write()
                            && unchanged_since(s.gateway_config(key).map(|c| &c.metadata))
                        {
                            s.put_gateway_config(written);
                        }
                    })
            }
        };
        match result {
            Ok(()) => Ok(None),
            // Gone meanwhile: nothing to report on.
            Err(kube::Error::Api(s)) if s.code == 404 => Ok(None),
            Err(e) => Err(Error::kube(
                format!("write the status of {} {key}", kind.kind()),
                e,
            )),
        }
    }
}
