//! Status of our policies (`GatewayClassConfig`, `GatewayConfig`): per ancestor, whether
//! the policy applies there ([`crate::plan::policy`] decides). Our entries are replaced,
//! other controllers' entries kept; written only when it changed (times aside), with the
//! resourceVersion read, so a concurrent writer makes us read again.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use kube::api::{Api, Patch, PatchParams};
use serde_json::{Value, json};

use super::status::{now, strip_times};
use super::watch::own_status_key;
use super::{Controller, Error};
use crate::api::{PolicyAncestorStatus, PolicyStatus};
use crate::gateway::CONTROLLER_NAME;
use crate::gateway::conditions::{merge_conditions, types};
use crate::plan::policy::Ancestor;
use crate::snapshot::Key;

/// Our two policy kinds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum PolicyKind {
    /// `GatewayClassConfig`.
    ClassConfig,
    /// `GatewayConfig`.
    GatewayConfig,
}

impl PolicyKind {
    /// The kind's name.
    #[must_use]
    pub fn kind(self) -> &'static str {
        match self {
            Self::ClassConfig => "GatewayClassConfig",
            Self::GatewayConfig => "GatewayConfig",
        }
    }
}

/// The status to write: `existing` with our entries replaced by `ours` (conditions merged,
/// so an unchanged condition keeps its lastTransitionTime), other controllers' entries first
/// and kept, at most [`crate::api::MAX_POLICY_ANCESTORS`] in all.
#[must_use]
pub fn next_policy_status(
    existing: &PolicyStatus,
    ours: &[Ancestor],
    generation: Option<i64>,
    now: &k8s_openapi::apimachinery::pkg::apis::meta::v1::Time,
) -> PolicyStatus {
    let mut ancestors: Vec<PolicyAncestorStatus> = existing
        .ancestors
        .iter()
        .filter(|a| a.controller_name != CONTROLLER_NAME)
        .cloned()
        .collect();
    for a in ours {
        if ancestors.len() >= crate::api::MAX_POLICY_ANCESTORS {
            break;
        }
        let before = existing
            .ancestors
            .iter()
            .find(|e| e.controller_name == CONTROLLER_NAME && e.ancestor_ref == a.ancestor)
            .map(|e| e.conditions.as_slice())
            .unwrap_or_default();
        ancestors.push(PolicyAncestorStatus {
            ancestor_ref: a.ancestor.clone(),
            controller_name: CONTROLLER_NAME.to_owned(),
            conditions: merge_conditions(
                before,
                std::slice::from_ref(&a.accepted),
                &[types::ACCEPTED],
                generation,
                now,
            ),
        });
    }
    PolicyStatus { ancestors }
}

impl Controller {
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
                        snap.class_configs_in(&key.namespace)
                            .find(|c| c.metadata.name.as_deref() == Some(key.name.as_str()))
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
            && self.cache_has_own_status(&own, &current)
        {
            return Ok(None);
        }
        let patch = json!({
            "metadata": { "resourceVersion": meta.resource_version },
            "status": desired,
        });
        self.metrics.status_writes.fetch_add(1, Ordering::Relaxed);
        self.expect_own_status(own, &desired);
        let params = PatchParams::default();
        let result = match kind {
            PolicyKind::ClassConfig => Api::<crate::api::GatewayClassConfig>::namespaced(
                self.client.clone(),
                &key.namespace,
            )
            .patch_status(&key.name, &params, &Patch::Merge(&patch))
            .await
            .map(|_| ()),
            PolicyKind::GatewayConfig => {
                Api::<crate::api::GatewayConfig>::namespaced(self.client.clone(), &key.namespace)
                    .patch_status(&key.name, &params, &Patch::Merge(&patch))
                    .await
                    .map(|_| ())
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "test code")]
    use super::*;
    use crate::api::AncestorRef;
    use crate::gateway::conditions::Cond;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    fn gw(name: &str) -> AncestorRef {
        AncestorRef {
            group: "gateway.networking.k8s.io".into(),
            kind: "Gateway".into(),
            namespace: Some("app".into()),
            name: name.into(),
        }
    }

    #[test]
    fn ours_are_replaced_theirs_kept_and_times_kept_when_unchanged() {
        let t0 = Time("2026-01-01T00:00:00Z".parse().unwrap());
        let t1 = Time("2026-01-02T00:00:00Z".parse().unwrap());
        let accepted = Cond::t("Accepted", "Accepted", "applies");
        let first = next_policy_status(
            &PolicyStatus {
                ancestors: vec![PolicyAncestorStatus {
                    ancestor_ref: gw("x"),
                    controller_name: "example.com/other".into(),
                    conditions: vec![],
                }],
            },
            &[Ancestor {
                ancestor: gw("a"),
                accepted: accepted.clone(),
            }],
            Some(3),
            &t0,
        );
        assert_eq!(first.ancestors.len(), 2);
        assert_eq!(first.ancestors[0].controller_name, "example.com/other");
        let ours = &first.ancestors[1];
        assert_eq!(ours.conditions[0].observed_generation, Some(3));
        // The same again later: nothing changes, not even the time.
        let again = next_policy_status(
            &first,
            &[Ancestor {
                ancestor: gw("a"),
                accepted,
            }],
            Some(3),
            &t1,
        );
        assert_eq!(again, first);
        // Gateway a no longer affected, b is: a's entry goes.
        let moved = next_policy_status(
            &first,
            &[Ancestor {
                ancestor: gw("b"),
                accepted: Cond::f("Accepted", "Conflicted", "another applies"),
            }],
            Some(4),
            &t1,
        );
        assert_eq!(moved.ancestors.len(), 2);
        assert_eq!(moved.ancestors[1].ancestor_ref, gw("b"));
        assert_eq!(moved.ancestors[1].conditions[0].status, "False");
        assert_eq!(moved.ancestors[1].conditions[0].last_transition_time, t1);
    }
}
