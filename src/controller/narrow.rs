//! Narrowing and draining, executed: what [`crate::plan::narrowing`] decided for a pass
//! is recorded on the children and announced in Events, and a child is drained (the next
//! step [`crate::plan::drain`] names) or deleted.

use std::sync::Arc;

use gateway_api::apis::standard::gateways::Gateway;
use k8s_openapi::jiff::Timestamp;
use serde_json::{Value, json};

use super::cluster::Cluster;
use super::common::Error;
use crate::api::Drain;
use crate::plan::drain::{DrainStep, drain_patch, drain_step};
use crate::plan::narrowing::{DRAIN_LOOK_AGAIN, Narrowing, drain_of_live};
use crate::render::TemplateSet;
use crate::render::labels;
use crate::render::prepared::Prepared;
use crate::snapshot::ObjectKey;

impl Cluster {
    /// Records what this pass's narrowing steps found (when a narrowed version was first
    /// ready) and says what started or timed out, in Events.
    pub(crate) async fn record_narrowing(
        self: &Arc<Self>,
        gw: &Gateway,
        n: &Narrowing,
    ) -> Result<(), Error> {
        for (key, live, at) in &n.marks {
            let at = at.to_string();
            match self
                .patch_child(
                    key,
                    &json!({"metadata": {"annotations": {labels::DRAINED_AT: at}}}),
                    Some(live),
                )
                .await
            {
                // Another replica writes there, and marks it.
                Ok(()) | Err(Error::Elsewhere(_)) => {}
                Err(e) => return Err(e),
            }
        }
        for key in &n.started {
            self.event(
                gw,
                false,
                "Narrowing",
                "Apply",
                &format!("{key} no longer advertises something: the other children change once it is ready and has settled"),
            )
            .await;
        }
        for why in &n.timed_out {
            self.event(gw, true, "DrainTimedOut", "Apply", why).await;
        }
        Ok(())
    }

    /// Deletes `key` (`live`), or first takes the next step of its drain (`step` for
    /// `drain`). `Ok(None)`: deleted (or asked to be); else what it waits for, in words,
    /// and when to look again.
    pub(crate) async fn drain_or_delete(
        self: &Arc<Self>,
        gw: &Gateway,
        action: &str,
        key: &ObjectKey,
        live: &Value,
        drain: Option<(&Drain, DrainStep)>,
    ) -> Result<Option<(String, u64)>, Error> {
        if let Some(waiting) = self.deleted_elsewhere(key) {
            return Ok(Some(waiting));
        }
        let settling = |settle: u64| {
            // The same words through the settle: no status write per pass.
            format!("{key} drained and ready; deleted once it has been for {settle} s")
        };
        match drain {
            None | Some((_, DrainStep::Delete)) => {
                self.delete_child(key).await?;
                Ok(None)
            }
            Some((_, DrainStep::TimedOut(why))) => {
                self.event(gw, true, "DrainTimedOut", action, &format!("{key}: {why}"))
                    .await;
                self.delete_child(key).await?;
                Ok(None)
            }
            Some((d, DrainStep::Patch)) => {
                let patch = drain_patch(d, Timestamp::now());
                self.patch_child(key, &patch, Some(live)).await?;
                Ok(Some((
                    format!("{key} drained; waiting for it to be ready"),
                    DRAIN_LOOK_AGAIN,
                )))
            }
            Some((_, DrainStep::Wait(why))) => {
                Ok(Some((format!("{key}: {why}"), DRAIN_LOOK_AGAIN)))
            }
            Some((d, DrainStep::MarkDrained)) => {
                let at = Timestamp::now().to_string();
                self.patch_child(
                    key,
                    &json!({"metadata": {"annotations": {labels::DRAINED_AT: at}}}),
                    Some(live),
                )
                .await?;
                let settle = d.settle_seconds.unwrap_or(0).max(1);
                Ok(Some((settling(settle), settle)))
            }
            Some((d, DrainStep::Settle(left))) => Ok(Some((
                settling(d.settle_seconds.unwrap_or(0).max(1)),
                left.max(1),
            ))),
        }
    }

    /// Applies each release the plan asks for (`adopt.release` to the predecessor of an
    /// adopted object), with an Event naming it: what deleting it later leaves in place
    /// outside the cluster is decided here.
    pub(crate) async fn release_adopted(
        self: &Arc<Self>,
        gw: &Gateway,
        releases: &[(ObjectKey, Value)],
    ) -> Result<(), Error> {
        for (key, patch) in releases {
            let live = self.snapshot.read().ok().and_then(|s| s.child(key));
            let Some(live) = live else { continue };
            match self.patch_child(key, patch, Some(&live)).await {
                Ok(()) => {
                    self.event(
                        gw,
                        false,
                        "Released",
                        "Adopt",
                        &format!("{key} released ({patch}) before the object adopting it is written; deleted once that one is ready"),
                    )
                    .await;
                }
                Err(Error::Elsewhere(_)) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Another replica deletes `key` (and drains it first): what a prune or a teardown
    /// waits for, in words, and when to look again.
    pub(crate) fn deleted_elsewhere(self: &Arc<Self>, key: &ObjectKey) -> Option<(String, u64)> {
        match self.target(key) {
            Err(Error::Elsewhere(why)) => Some((format!("{key}: {why}"), DRAIN_LOOK_AGAIN)),
            _ => None,
        }
    }

    /// [`Self::drain_or_delete`] for a live child of a parent whose blueprint is
    /// `prepared` (`None`: deleted without a drain).
    pub(crate) async fn drain_or_delete_child(
        self: &Arc<Self>,
        gw: &Gateway,
        action: &str,
        prepared: Option<&Prepared>,
        set: TemplateSet,
        live: &Arc<Value>,
    ) -> Result<Option<(String, u64)>, Error> {
        let key = ObjectKey::of(live);
        let drain = prepared
            .and_then(|p| drain_of_live(p, set, live))
            .map(|(d, ready)| (d, drain_step(d, live, &ready, Timestamp::now())));
        self.drain_or_delete(gw, action, &key, live, drain).await
    }
}
