//! Status of our cluster-scoped objects: a GatewayClass (Accepted, supported features,
//! the gateway-exists finalizer while Gateways use it) and a blueprint (Accepted when
//! every template compiles).

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use gateway_api::apis::standard::gatewayclasses::{
    GatewayClass, GatewayClassStatus, GatewayClassStatusSupportedFeatures,
};
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams};
use serde_json::{Value, json};

use super::cluster::Cluster;
use super::common::Error;
use super::echo::{now, own_status_key, strip_times};
use crate::gateway::conditions::{Cond, merge_conditions, reasons, types};
use crate::plan::class::GATEWAY_EXISTS_FINALIZER;
use crate::plan::plan_class;

/// `Ready`: kstatus' and Flux's summary condition.
pub const READY: &str = "Ready";
/// `Stalled`: kstatus' condition for what will not progress without a change.
pub const STALLED: &str = "Stalled";

/// The status a blueprint's pass gives it: Accepted, Ready, Stalled and the rollout's
/// Progressing merged into what it holds, the current revision, the per-revision counts
/// and the rollout.
fn blueprint_status(
    existing: &crate::api::BlueprintStatus,
    accepted: &Cond,
    outcome: &super::revisions::Outcome,
    generation: Option<i64>,
) -> crate::api::BlueprintStatus {
    let mut conds = blueprint_conditions(accepted);
    if let Some(r) = &outcome.rollout {
        let p = super::revisions::progressing(r);
        if !p.status.is_true() {
            conds[1] = Cond::f(READY, &p.reason, &p.message);
            if conds.len() < 3 {
                conds.push(Cond::t(STALLED, &p.reason, &p.message));
            }
        }
        conds.push(p);
    }
    crate::api::BlueprintStatus {
        conditions: merge_conditions(
            &existing.conditions,
            &conds,
            &[types::ACCEPTED, READY, STALLED, "Progressing"],
            generation,
            &now(),
        ),
        observed_generation: generation,
        current_revision: Some(outcome.current.clone()),
        revisions: outcome.counts.clone(),
        rollout: outcome.rollout.clone(),
    }
}

/// A blueprint's conditions from its `Accepted`: `Ready` says the same (what kstatus and
/// Flux read), and an invalid blueprint is also `Stalled` (it will not fix itself; kstatus
/// reads it as Failed). `observedGeneration` at the top level and on each condition says
/// which generation they judge.
fn blueprint_conditions(accepted: &Cond) -> Vec<Cond> {
    let mut out = vec![accepted.clone(), accepted.retyped(READY)];
    if !accepted.status.is_true() {
        out.push(Cond::t(STALLED, &accepted.reason, &accepted.message));
    }
    out
}

impl Cluster {
    /// A blueprint's pass: its revisions and the rollout of the newest
    /// ([`super::revisions`]), then its status: `Accepted` (and `Ready`) True when every
    /// template compiles, reads only known variables and has no cycle, else False naming
    /// each template and line, with `Stalled` True; the newest revision, how many Gateways
    /// run each, and where the rollout stands (`Progressing`; a halted rollout is not
    /// `Ready` and is `Stalled`).
    pub(crate) async fn reconcile_blueprint(
        self: &Arc<Self>,
        name: &str,
    ) -> Result<Option<Duration>, Error> {
        // Judged once every watch of this cluster has listed: a rollout's waves are drawn
        // from the class's Gateways, all of them (a fleet member lists its blueprints and
        // Gateways only once a class of ours is there).
        if !self.rest_watches_listed() {
            return Ok(None);
        }
        super::revisions::counted(self, name);
        let Some((read, errors, previous)) = self.snapshot.read().ok().and_then(|s| {
            let (errors, previous) = s.blueprint(name).map(|b| {
                let errors = crate::plan::class::blueprint_errors(&s, b);
                (
                    (!errors.is_empty())
                        .then(|| errors.iter().map(ToString::to_string).collect::<Vec<_>>()),
                    crate::plan::revisions::previous_ignored(b),
                )
            })?;
            super::revisions::read(&s, name).map(|r| (r, errors, previous))
        }) else {
            return Ok(None);
        };
        let outcome = self.revisions_pass(&read).await?;
        let object = &read.object;
        let accepted = match &errors {
            None => Cond::t(
                types::ACCEPTED,
                reasons::ACCEPTED,
                &previous.map_or_else(
                    || "every template compiles".to_owned(),
                    |p| format!("every template compiles; {p}"),
                ),
            ),
            Some(errs) => Cond::f(types::ACCEPTED, "InvalidTemplate", &errs.join("; ")),
        };
        let existing = object.status.clone().unwrap_or_default();
        let status = blueprint_status(&existing, &accepted, &outcome, object.metadata.generation);
        let mut desired = serde_json::to_value(&status).unwrap_or(Value::Null);
        // A merge patch removes a field only when it names it.
        if let (Some(d), Ok(Value::Object(e))) =
            (desired.as_object_mut(), serde_json::to_value(&existing))
        {
            for k in e.keys() {
                d.entry(k.clone()).or_insert(Value::Null);
            }
        }
        let existing_json = serde_json::to_value(&existing).unwrap_or(Value::Null);
        let changed = strip_times(&status_view(&desired)) != strip_times(&existing_json);
        // A change of the per-revision counts alone (Gateways reporting during a rollout)
        // is written at most every PROGRESS_HOLD: a rollout of many Gateways would
        // otherwise write the blueprint's status twice per Gateway.
        let hold_key = super::revisions::count_key(name);
        if changed && counts_only(&desired, &existing_json) {
            let now = std::time::Instant::now();
            if let Some(wait) = self.progress_hold(&hold_key, now) {
                return Ok(Some(outcome.again.map_or(wait, |a| a.min(wait))));
            }
        }
        if changed {
            self.write_blueprint_status(name, object, &desired, &hold_key)
                .await?;
            if errors.is_some()
                && existing
                    .conditions
                    .iter()
                    .find(|c| c.type_ == types::ACCEPTED)
                    .is_none_or(|c| c.status != "False")
            {
                self.event(
                    object,
                    true,
                    "InvalidTemplate",
                    "Compile",
                    &accepted.message,
                )
                .await;
            }
        }
        self.announce_rollout(name, object, &outcome.notes).await;
        for k in &outcome.moved {
            self.enqueue(super::common::Work::Gateway(k.clone()));
        }
        Ok(outcome.again)
    }

    /// Writes a blueprint's status (a merge patch: `desired` names the fields it removes);
    /// the snapshot holds what was written at once, for the Gateways the rollout moved
    /// read it there (unless a watch event brought a newer version meanwhile).
    async fn write_blueprint_status(
        &self,
        name: &str,
        object: &crate::api::GatewayClassBlueprint,
        desired: &Value,
        hold_key: &crate::snapshot::Key,
    ) -> Result<(), Error> {
        let api: Api<crate::api::GatewayClassBlueprint> = Api::all(self.client.clone());
        self.metrics.status_writes.fetch_add(1, Ordering::Relaxed);
        self.own_status.expect(
            own_status_key("GatewayClassBlueprint", "", name),
            &status_view(desired),
        );
        let mut written = api
            .patch_status(
                name,
                &PatchParams::default(),
                &Patch::Merge(&json!({ "status": desired })),
            )
            .await
            .map_err(|e| Error::kube("write the blueprint status", e))?;
        self.status_written(hold_key, std::time::Instant::now());
        written.metadata.managed_fields = None;
        if let Ok(mut s) = self.snapshot.write()
            && s.blueprint(name).is_some_and(|b| {
                b.object.metadata.resource_version == object.metadata.resource_version
            })
        {
            s.put_blueprint(written);
        }
        Ok(())
    }

    /// Logs and announces what a rollout pass noted, and counts the rollouts it halted or
    /// rolled back.
    async fn announce_rollout(
        &self,
        name: &str,
        object: &crate::api::GatewayClassBlueprint,
        notes: &[crate::plan::waves::Note],
    ) {
        for n in notes {
            let (reason, message) = (n.reason, &n.message);
            if n.warning {
                tracing::warn!(blueprint = %name, %reason, %message, "rollout");
            } else {
                tracing::info!(blueprint = %name, %reason, %message, "rollout");
            }
            if reason == "RolloutHalted" || reason == "RolledBack" {
                self.metrics.rollouts_halted.fetch_add(1, Ordering::Relaxed);
            }
            self.event(object, n.warning, reason, "Rollout", message)
                .await;
        }
    }

    /// Writes a GatewayClass's status and gateway-exists finalizer.
    pub(crate) async fn reconcile_class(
        self: &Arc<Self>,
        name: &str,
    ) -> Result<Option<Duration>, Error> {
        let (plan, class) = {
            let snap = self.snapshot.read().map_err(|_| Error::SnapshotPoisoned)?;
            (
                plan_class(&snap, name),
                snap.class(name).map(|c| (**c).clone()),
            )
        };
        let (Some(plan), Some(class)) = (plan, class) else {
            return Ok(None);
        };
        // A fleet member watches its blueprints, configs and the rest only once a class
        // of ours is there: judged again once those have listed.
        if !self.rest_watches_listed() {
            return Ok(None);
        }
        let api: Api<GatewayClass> = Api::all(self.client.clone());
        let has_fin = class
            .finalizers()
            .iter()
            .any(|f| f == GATEWAY_EXISTS_FINALIZER);
        if plan.in_use != has_fin && class.metadata.deletion_timestamp.is_none()
            || (has_fin && !plan.in_use)
        {
            let mut fins: Vec<String> = class
                .finalizers()
                .iter()
                .filter(|f| *f != GATEWAY_EXISTS_FINALIZER)
                .cloned()
                .collect();
            if plan.in_use {
                fins.push(GATEWAY_EXISTS_FINALIZER.to_owned());
            }
            let patch = json!({ "metadata": { "finalizers": fins, "resourceVersion": class.resource_version() } });
            api.patch_metadata(name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .map_err(|e| Error::kube("update the GatewayClass finalizer", e))?;
            self.metrics.status_writes.fetch_add(1, Ordering::Relaxed);
        }
        let existing = class.status.clone().unwrap_or_default();
        let status = GatewayClassStatus {
            conditions: Some(merge_conditions(
                existing.conditions.as_deref().unwrap_or_default(),
                std::slice::from_ref(&plan.accepted),
                &[types::ACCEPTED],
                class.metadata.generation,
                &now(),
            )),
            supported_features: Some(
                plan.supported_features
                    .iter()
                    .map(|n| GatewayClassStatusSupportedFeatures { name: n.clone() })
                    .collect(),
            ),
        };
        let desired = serde_json::to_value(&status).unwrap_or(Value::Null);
        if strip_times(&desired)
            != strip_times(&serde_json::to_value(&existing).unwrap_or(Value::Null))
        {
            self.metrics.status_writes.fetch_add(1, Ordering::Relaxed);
            self.own_status
                .expect(own_status_key("GatewayClass", "", name), &desired);
            api.patch_status(
                name,
                &PatchParams::default(),
                &Patch::Merge(&json!({ "status": desired })),
            )
            .await
            .map_err(|e| Error::kube("write the GatewayClass status", e))?;
            let accepted = plan.accepted.status.is_true();
            let before = existing
                .conditions
                .iter()
                .flatten()
                .find(|c| c.type_ == types::ACCEPTED)
                .map(|c| c.status.clone());
            if before.as_deref() != Some(plan.accepted.status.as_str()) {
                self.event(
                    &class,
                    !accepted,
                    if accepted {
                        "Accepted"
                    } else {
                        "InvalidParameters"
                    },
                    "Reconcile",
                    &plan.accepted.message,
                )
                .await;
            }
        }
        Ok(None)
    }
}

/// A status as written, without the nulls that remove fields (what the server keeps).
fn status_view(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// Whether two blueprint statuses differ only in their per-revision counts.
fn counts_only(desired: &Value, existing: &Value) -> bool {
    let without = |v: &Value| {
        let mut v = strip_times(&status_view(v));
        if let Some(m) = v.as_object_mut() {
            m.remove("revisions");
        }
        v
    };
    without(desired) == without(existing)
}
