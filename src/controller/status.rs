//! Reconcile functions: a Gateway (apply, prune, status, route status, Events, teardown),
//! a GatewayClass (status, finalizer) and a route (stale entries of ours).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use gateway_api::apis::standard::gatewayclasses::{
    GatewayClass, GatewayClassStatus, GatewayClassStatusSupportedFeatures,
};
use gateway_api::apis::standard::gateways::Gateway;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use kube::runtime::events::{Event, EventType};
use kube::{Resource, ResourceExt};
use serde_json::{Value, json};

use super::watch::{KindState, own_status_key};
use super::{Controller, Error, GATEWAY_FINALIZER, Reported};
use crate::gateway::conditions::{Cond, merge_conditions, reasons, types};
use crate::gateway::{CONTROLLER_NAME, ParentAttachment};
use crate::plan::class::GATEWAY_EXISTS_FINALIZER;
use crate::plan::gateway::OutOfScope;
use crate::plan::route::merge_route_parents;
use crate::plan::{RolloutPhase, RolloutState, plan_class, plan_gateway, plan_route};
use crate::snapshot::{Key, ObjectKey, RouteKey};

fn now() -> Time {
    Time(k8s_openapi::jiff::Timestamp::now())
}

/// A copy of `v` without `lastTransitionTime` anywhere, for comparing statuses.
fn strip_times(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(k, _)| k.as_str() != "lastTransitionTime")
                .map(|(k, v)| (k.clone(), strip_times(v)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(strip_times).collect()),
        other => other.clone(),
    }
}

/// A status as compared for echoes: without `lastTransitionTime`, without null fields.
pub(crate) fn norm_status(v: &Value) -> Value {
    let mut v = strip_times(v);
    if let Some(o) = v.as_object_mut() {
        o.retain(|_, x| !x.is_null());
    }
    v
}

fn note(s: &str) -> String {
    if s.len() <= 1024 {
        s.to_owned()
    } else {
        format!("{}...", &s[..s.floor_char_boundary(1020)])
    }
}

/// Seconds since an RFC 3339 time, if it parses.
fn seconds_since(t: &str) -> Option<i64> {
    let then: k8s_openapi::jiff::Timestamp = t.parse().ok()?;
    Some(k8s_openapi::jiff::Timestamp::now().as_second() - then.as_second())
}

/// Where a replacement stands as reported: the planner's phase, with the stuck ones
/// decided (that needs a clock). `timeoutSeconds` bounds the whole replacement, from the
/// new version's creation until the old one can go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Progress {
    Waiting,
    /// The new version is not ready in time.
    Stuck,
    Switching,
    /// The new version is ready, but what reads it is not done in time.
    SwitchStuck,
    Finishing,
}

impl Progress {
    fn stuck(self) -> bool {
        matches!(self, Self::Stuck | Self::SwitchStuck)
    }

    fn switched(self) -> bool {
        matches!(self, Self::Switching | Self::SwitchStuck | Self::Finishing)
    }
}

/// The key of a replacement: `template=to`.
fn rollout_key(r: &RolloutState) -> String {
    format!("{}={}", r.template, r.to)
}

/// Each replacement's progress by key, and when the controller must look again to catch
/// a deadline.
fn rollout_progress(rollouts: &[&RolloutState]) -> (BTreeMap<String, Progress>, Option<Duration>) {
    let mut progress = BTreeMap::new();
    let mut requeue: Option<Duration> = None;
    for r in rollouts {
        let (on_time, late) = match r.phase {
            RolloutPhase::WaitingForNew => (Progress::Waiting, Progress::Stuck),
            RolloutPhase::Switching => (Progress::Switching, Progress::SwitchStuck),
            RolloutPhase::Finishing => {
                progress.insert(rollout_key(r), Progress::Finishing);
                continue;
            }
        };
        let waited = r.started.as_deref().and_then(seconds_since).unwrap_or(0);
        let left = i64::try_from(r.timeout_seconds).unwrap_or(i64::MAX) - waited;
        let p = if left < 0 {
            late
        } else {
            let d = Duration::from_secs(u64::try_from(left).unwrap_or(0) + 1);
            requeue = Some(requeue.map_or(d, |q| q.min(d)));
            on_time
        };
        progress.insert(rollout_key(r), p);
    }
    (progress, requeue)
}

/// The `gatewright.dev/Rollout` condition, with the stuck ones decided.
fn rollout_condition(rollouts: &[&RolloutState], progress: &BTreeMap<String, Progress>) -> Cond {
    let stuck: Vec<String> = rollouts
        .iter()
        .filter_map(|r| {
            let p = *progress.get(&rollout_key(r))?;
            let waited = r.started.as_deref().and_then(seconds_since).unwrap_or(0);
            let old = r.from.as_deref().unwrap_or("-");
            match p {
                Progress::Stuck => Some(format!(
                    "template {}: version {} is not ready after {waited}s (timeout {}s): {}; a further change supersedes it",
                    r.template, r.to, r.timeout_seconds, r.waiting_for
                )),
                Progress::SwitchStuck => Some(format!(
                    "template {}: not done after {waited}s (timeout {}s): {}; version {old} is kept until then",
                    r.template, r.timeout_seconds, r.waiting_for
                )),
                _ => None,
            }
        })
        .collect();
    if stuck.is_empty() {
        crate::plan::gateway::rollout_cond(rollouts.iter().copied())
    } else {
        Cond::f(types::ROLLOUT, reasons::STUCK, &stuck.join("; "))
    }
}

/// Events for the replacements that started, switched, got stuck, finished or were
/// superseded since the last reconcile: `(reason, warning, message)`.
fn rollout_events(
    before: &BTreeMap<String, Progress>,
    now: &BTreeMap<String, Progress>,
) -> Vec<(&'static str, bool, String)> {
    let split = |k: &str| {
        k.split_once('=')
            .map(|(t, v)| (t.to_owned(), v.to_owned()))
            .unwrap_or_default()
    };
    let switched = |p: Option<&Progress>| p.is_some_and(|p| p.switched());
    let mut out = Vec::new();
    for (k, p) in now {
        let (t, v) = split(k);
        let old = before.get(k);
        if old.is_none() {
            out.push((
                "RolloutStarted",
                false,
                format!("template {t}: creating version {v} beside the serving one"),
            ));
        }
        if switched(Some(p)) && !switched(old) {
            out.push((
                "RolloutSwitched",
                false,
                format!("template {t}: version {v} is ready; what reads it now uses it"),
            ));
        }
        if p.stuck() && !old.is_some_and(|o| o.stuck()) {
            let message = if *p == Progress::Stuck {
                format!(
                    "template {t}: version {v} is not ready in time; the old version keeps serving"
                )
            } else {
                format!(
                    "template {t}: version {v} is ready, but what reads it is not done in time; the old version is kept"
                )
            };
            out.push(("RolloutStuck", true, message));
        }
    }
    for k in before.keys().filter(|k| !now.contains_key(*k)) {
        let (t, v) = split(k);
        if now.keys().any(|n| split(n).0 == t) {
            out.push((
                "RolloutSuperseded",
                false,
                format!("template {t}: version {v} is superseded by a newer change"),
            ));
        } else {
            out.push((
                "RolloutFinished",
                false,
                format!("template {t}: version {v} serves; the old version is deleted"),
            ));
        }
    }
    out
}

impl Controller {
    async fn event<K: Resource<DynamicType = ()>>(
        &self,
        obj: &K,
        warning: bool,
        reason: &str,
        action: &str,
        message: &str,
    ) {
        let ev = Event {
            type_: if warning {
                EventType::Warning
            } else {
                EventType::Normal
            },
            reason: reason.into(),
            note: Some(note(message)),
            action: action.into(),
            secondary: None,
        };
        if let Err(e) = self.recorder.publish(&ev, &obj.object_ref(&())).await {
            tracing::debug!(error = %e, "failed to publish an event");
        }
    }

    /// Plans and executes one Gateway.
    pub(crate) async fn reconcile_gateway(
        self: &Arc<Self>,
        key: &Key,
    ) -> Result<Option<Duration>, Error> {
        let started = Instant::now();
        // A deleting Gateway holding our finalizer whose class is gone or no longer ours:
        // torn down all the same (without the blueprint's order), never left hanging.
        let mut orphaned: Option<(Gateway, BTreeSet<(String, String)>)> = None;
        let planned = {
            let snap = self.snapshot.read().map_err(|_| Error::Deleting(0))?;
            match plan_gateway(&snap, key) {
                Ok(mut plan) => {
                    let routes: Vec<_> = plan
                        .context
                        .routes
                        .iter()
                        .map(|r| plan_route(&snap, &plan, r))
                        .collect();
                    crate::plan::mark_route_errors(&mut plan, &routes);
                    self.wait_for_children(
                        key,
                        plan.conflicts
                            .iter()
                            .chain(routes.iter().flat_map(|r| r.conflicts.iter()))
                            .cloned()
                            .collect(),
                    );
                    let gw = snap.gateway(key).map(|g| g.typed.clone());
                    let live: Vec<(ObjectKey, Option<Value>)> = plan
                        .children
                        .iter()
                        .chain(routes.iter().flat_map(|r| r.children.iter()))
                        .map(|c| (c.key.clone(), snap.child(&c.key).map(|v| (**v).clone())))
                        .collect();
                    // The child kinds this Gateway uses: what it renders, and what it
                    // still owns (to prune or tear down).
                    let mut kinds: BTreeSet<(String, String)> = live
                        .iter()
                        .map(|(k, _)| k)
                        .chain(plan.prune.iter())
                        .chain(routes.iter().flat_map(|r| r.prune.iter()))
                        .chain(&plan.orphaned_route_children)
                        .map(|k| (k.api_version.clone(), k.kind.clone()))
                        .collect();
                    if let Some(uid) = gw.as_ref().and_then(|g| g.metadata.uid.as_deref()) {
                        kinds.extend(snap.child_kinds_by_gateway(uid));
                    }
                    // The template of each child to prune (the prune list is dependents
                    // first; one template's children go at a time).
                    let prune_templates: Vec<String> = plan
                        .prune
                        .iter()
                        .map(|k| {
                            snap.child(k)
                                .and_then(|c| crate::plan::labels::template(c).map(str::to_owned))
                                .unwrap_or_default()
                        })
                        .collect();
                    Some((plan, routes, gw, live, kinds, prune_templates))
                }
                Err(OutOfScope::NoGateway) => None,
                Err(OutOfScope::NoClass(_) | OutOfScope::NotOurs) => {
                    orphaned = snap
                        .gateway(key)
                        .map(|g| g.typed.clone())
                        .filter(|g| {
                            g.metadata.deletion_timestamp.is_some()
                                && g.finalizers().iter().any(|f| f == GATEWAY_FINALIZER)
                        })
                        .map(|g| {
                            let uid = g.metadata.uid.as_deref().unwrap_or_default();
                            let kinds = snap.child_kinds_by_gateway(uid).collect();
                            (g, kinds)
                        });
                    None
                }
            }
        };
        self.metrics.plans.fetch_add(1, Ordering::Relaxed);
        self.metrics.plan_micros.fetch_add(
            u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX),
            Ordering::Relaxed,
        );
        if let Some((gw, mut kinds)) = orphaned {
            // And what it used while its class was there (a kind whose cache is empty now
            // is still asked before the finalizer goes).
            kinds.extend(self.kinds.kinds_of(key));
            self.kinds.use_kinds(self, key, kinds.clone());
            return self.teardown(key, &gw, &kinds).await;
        }
        let Some((plan, routes, Some(gw), live, kinds, prune_templates)) = planned else {
            self.kinds.use_kinds(self, key, BTreeSet::new());
            return Ok(None);
        };
        self.kinds.use_kinds(self, key, kinds.clone());
        if let Some(uid) = gw.metadata.uid.clone()
            && let Ok(mut m) = self.uid_to_gateway.write()
        {
            m.insert(uid, key.clone());
        }
        if gw.metadata.deletion_timestamp.is_some() {
            return self.teardown(key, &gw, &kinds).await;
        }
        let gw_api: Api<Gateway> = Api::namespaced(self.client.clone(), &key.0);
        if plan.accepted && !gw.finalizers().iter().any(|f| f == GATEWAY_FINALIZER) {
            let mut fins = gw.finalizers().to_vec();
            fins.push(GATEWAY_FINALIZER.to_owned());
            let patch = json!({ "metadata": { "finalizers": fins, "resourceVersion": gw.resource_version() } });
            gw_api
                .patch_metadata(&key.1, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .map_err(|e| Error::kube("add the Gateway finalizer", e))?;
            self.metrics.status_writes.fetch_add(1, Ordering::Relaxed);
        }

        // Apply in dependency order: the Gateway's children, then each route's.
        let mut missing = BTreeSet::new();
        let mut apply_errors = Vec::new();
        let mut pending_kinds = false;
        let mut applied_any = false;
        for (c, (_, live)) in plan
            .children
            .iter()
            .chain(routes.iter().flat_map(|r| r.children.iter()))
            .zip(&live)
        {
            match self.kinds.ensure(self, &c.key.api_version, &c.key.kind) {
                KindState::Missing(msg) => {
                    missing.insert(msg);
                    continue;
                }
                KindState::Pending => {
                    pending_kinds = true;
                    continue;
                }
                KindState::Served { .. } => {}
            }
            match self.apply_child(&c.key, &c.object, live.as_ref()).await {
                Ok(sent) => applied_any |= sent,
                Err(e) => apply_errors.push(e.to_string()),
            }
        }
        let settled = apply_errors.is_empty() && missing.is_empty() && !pending_kinds;
        let mut prune_left = false;
        if settled {
            // Route children first (they depend on the Gateway's), then the Gateway's
            // children of one template; the next template's once those are gone.
            for k in routes
                .iter()
                .flat_map(|r| r.prune.iter())
                .chain(&plan.orphaned_route_children)
            {
                self.delete_child(k).await?;
            }
            let first = prune_templates.first();
            for (k, t) in plan.prune.iter().zip(&prune_templates) {
                if Some(t) == first {
                    self.delete_child(k).await?;
                } else {
                    prune_left = true;
                }
            }
        }

        // Status.
        let mut status = plan.status.clone();
        let override_programmed = if let Some(m) = missing.iter().next() {
            Some(Cond::f(types::PROGRAMMED, reasons::INVALID, m))
        } else if let Some(e) = apply_errors.first() {
            Some(Cond::f(types::PROGRAMMED, reasons::PENDING, e))
        } else {
            routes
                .iter()
                .flat_map(|r| r.errors.iter())
                .next()
                .map(|e| Cond::f(types::PROGRAMMED, reasons::INVALID, &e.to_string()))
        };
        if let Some(p) = &override_programmed {
            if let Some(c) = status
                .conditions
                .iter_mut()
                .find(|c| c.type_ == types::PROGRAMMED)
            {
                *c = p.clone();
            }
            for (l, conds) in &mut status.listeners {
                *conds = l.status_conds(p);
            }
        }
        // Make-before-break replacements: the planner says where each stands; past its
        // timeout (which needs a clock) a waiting one is stuck.
        let rollouts: Vec<&RolloutState> = plan
            .rollouts
            .iter()
            .chain(routes.iter().flat_map(|r| r.rollouts.iter()))
            .collect();
        let (rollout_phases, rollout_requeue) = rollout_progress(&rollouts);
        if let Some(c) = status
            .conditions
            .iter_mut()
            .find(|c| c.type_ == types::ROLLOUT)
        {
            *c = rollout_condition(&rollouts, &rollout_phases);
        }
        let desired = status.to_status(gw.status.as_ref(), gw.metadata.generation, &now());
        let mut desired_json = serde_json::to_value(&desired).unwrap_or(Value::Null);
        if desired.addresses.is_none() {
            desired_json["addresses"] = Value::Null;
        }
        let current_json =
            serde_json::to_value(gw.status.clone().unwrap_or_default()).unwrap_or(Value::Null);
        let mut cmp_desired = strip_times(&desired_json);
        if let Some(o) = cmp_desired.as_object_mut() {
            o.retain(|_, v| !v.is_null());
        }
        if cmp_desired != strip_times(&current_json) {
            self.metrics.status_writes.fetch_add(1, Ordering::Relaxed);
            self.expect_own_status(own_status_key("Gateway", &key.0, &key.1), &cmp_desired);
            gw_api
                .patch_status(
                    &key.1,
                    &PatchParams::default(),
                    &Patch::Merge(&json!({ "status": desired_json })),
                )
                .await
                .map_err(|e| Error::kube("write the Gateway status", e))?;
        }

        // Route status, after the route's children were applied (Flagger waits on it).
        for (rkey, atts) in &plan.attachments {
            self.write_route_status(rkey, Some((key, atts.as_slice())))
                .await?;
        }

        // Events on transitions only.
        let programmed = status
            .conditions
            .iter()
            .find(|c| c.type_ == types::PROGRAMMED)
            .cloned();
        let now_reported = Reported {
            programmed: programmed
                .as_ref()
                .map(|c| format!("{}/{}", c.status, c.reason))
                .unwrap_or_default(),
            errors: plan
                .errors
                .iter()
                .chain(routes.iter().flat_map(|r| r.errors.iter()))
                .map(ToString::to_string)
                .collect(),
            missing: missing.clone(),
            rollouts: rollout_phases.clone(),
            stuck_deletions: BTreeSet::new(),
        };
        let before = self
            .reported
            .lock()
            .ok()
            .and_then(|mut r| r.insert(key.clone(), now_reported.clone()))
            .unwrap_or_default();
        for e in now_reported.errors.difference(&before.errors) {
            self.event(&gw, true, "TemplateFailed", "Render", e).await;
        }
        for m in now_reported.missing.difference(&before.missing) {
            self.event(&gw, true, "KindNotServed", "Apply", m).await;
        }
        if before.programmed != now_reported.programmed
            && let Some(p) = &programmed
        {
            self.event(
                &gw,
                !p.status.is_true(),
                if p.status.is_true() {
                    "Programmed"
                } else {
                    "NotProgrammed"
                },
                "Reconcile",
                &p.message,
            )
            .await;
        }
        for (reason, warning, message) in rollout_events(&before.rollouts, &now_reported.rollouts) {
            self.event(&gw, warning, reason, "Rollout", &message).await;
        }
        if let Some(e) = apply_errors.first() {
            // Retried with the per-object backoff until the applies go through.
            return Err(Error::Apply(e.clone()));
        }
        if pending_kinds {
            return Ok(Some(Duration::from_millis(500)));
        }
        if prune_left {
            // The deletions wake this Gateway through the child watch; this is a backstop.
            return Ok(Some(Duration::from_secs(2)));
        }
        if let Some(d) = rollout_requeue {
            // Wake at the earliest deadline of a replacement under way to report it stuck.
            return Ok(Some(if applied_any {
                d.min(Duration::from_secs(1))
            } else {
                d
            }));
        }
        if applied_any {
            // The status above was planned before these applies: plan once more shortly,
            // from what the applies returned, instead of relying on the child's watch event
            // alone (a converged re-plan writes nothing).
            return Ok(Some(Duration::from_secs(1)));
        }
        Ok(None)
    }

    /// Deletes every child of a deleted Gateway, dependents first, then lets it go.
    async fn teardown(
        self: &Arc<Self>,
        key: &Key,
        gw: &Gateway,
        kinds: &BTreeSet<(String, String)>,
    ) -> Result<Option<Duration>, Error> {
        if !gw.finalizers().iter().any(|f| f == GATEWAY_FINALIZER) {
            return Ok(None);
        }
        let uid = gw.metadata.uid.clone().unwrap_or_default();
        let (children, order) = {
            let snap = self.snapshot.read().map_err(|_| Error::Deleting(0))?;
            let children: Vec<Value> = snap
                .children_by_gateway(&uid)
                .map(|c| (**c).clone())
                .collect();
            let order = crate::plan::class::resolve_blueprint(
                &snap,
                snap.class(&gw.spec.gateway_class_name)
                    .map_or(&GatewayClass::default(), |c| c.as_ref()),
            )
            .map(|p| (p.gateway_graph.order.clone(), p.route_graph.order.clone()))
            .unwrap_or_default();
            (children, order)
        };
        if !children.is_empty() {
            // Route children first, then the Gateway's, each set in reverse template order:
            // one template's children at a time, the next only once they are gone, so
            // nothing is deleted while a child that reads it still exists.
            // The position each child was rendered at (its annotation: the order of what
            // is live, and there even when the blueprint is gone), else the blueprint's.
            let rank = |c: &Value| {
                let t = crate::plan::labels::template(c).unwrap_or_default();
                let route_child = crate::plan::labels::parent_uid(c) != Some(uid.as_str());
                let set = if route_child { &order.1 } else { &order.0 };
                let pos = crate::plan::labels::order(c)
                    .or_else(|| set.iter().position(|x| x == t))
                    .unwrap_or(usize::MAX - 1);
                (!route_child, std::cmp::Reverse(pos))
            };
            let first = children.iter().map(rank).min();
            let group: Vec<&Value> = children.iter().filter(|c| Some(rank(c)) == first).collect();
            for c in group
                .iter()
                .filter(|c| c["metadata"]["deletionTimestamp"].is_null())
            {
                self.delete_child(&ObjectKey::of(c)).await?;
            }
            // A child whose deletion hangs (someone else's finalizer, a stuck controller)
            // holds the teardown: say so on the Gateway and in an Event, once.
            let limit = i64::try_from(self.opts.deletion_stuck_after.as_secs()).unwrap_or(i64::MAX);
            // (child, why) of each child whose deletion hangs.
            let mut stuck: Vec<(String, String)> = Vec::new();
            let mut next_check: Option<i64> = None;
            for c in &group {
                let Some(since) = c["metadata"]["deletionTimestamp"]
                    .as_str()
                    .and_then(seconds_since)
                else {
                    continue;
                };
                if since > limit {
                    let fins = c["metadata"]["finalizers"]
                        .as_array()
                        .map(|f| {
                            f.iter()
                                .filter_map(Value::as_str)
                                .collect::<Vec<_>>()
                                .join(", ")
                        })
                        .unwrap_or_default();
                    let child = ObjectKey::of(c).to_string();
                    let why =
                        format!("{child} has been deleting for {since}s (finalizers: {fins})");
                    stuck.push((child, why));
                } else {
                    let left = limit - since + 1;
                    next_check = Some(next_check.map_or(left, |n| n.min(left)));
                }
            }
            let waiting: Vec<String> = group.iter().map(|c| ObjectKey::of(c).to_string()).collect();
            let cond = if stuck.is_empty() {
                Cond::f(
                    types::TEARDOWN,
                    reasons::DELETING,
                    &format!(
                        "deleting children dependents first, {} left; now: {}",
                        children.len(),
                        waiting.join(", ")
                    ),
                )
            } else {
                let whys: Vec<&str> = stuck.iter().map(|(_, w)| w.as_str()).collect();
                Cond::f(
                    types::TEARDOWN,
                    reasons::DELETION_STUCK,
                    &format!("the teardown waits: {}", whys.join("; ")),
                )
            };
            self.write_teardown_condition(key, gw, &cond).await?;
            let now_stuck: BTreeSet<String> = stuck.iter().map(|(c, _)| c.clone()).collect();
            let before = self
                .reported
                .lock()
                .ok()
                .map(|mut r| {
                    let e = r.entry(key.clone()).or_default();
                    std::mem::replace(&mut e.stuck_deletions, now_stuck)
                })
                .unwrap_or_default();
            for (child, why) in &stuck {
                if !before.contains(child) {
                    self.event(gw, true, "DeletionStuck", "Teardown", why).await;
                }
            }
            // Child deletions wake this Gateway through the child watches; look again at
            // the next deadline, or every 30 s while stuck.
            let again = next_check.map_or(30, |n| u64::try_from(n).unwrap_or(1).max(1));
            return Ok(Some(Duration::from_secs(again)));
        }
        // The snapshot holds none: ask the API server before letting the Gateway go, for
        // every kind it renders or owned (a watch being restarted has an empty cache).
        for (api_version, kind) in kinds {
            match self.kinds.ensure(self, api_version, kind) {
                KindState::Served { resource, .. } => {
                    let api: Api<DynamicObject> = Api::all_with(self.client.clone(), &resource);
                    let lp = kube::api::ListParams::default()
                        .labels(&format!("{}={uid}", crate::plan::labels::GATEWAY_UID))
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
        let api: Api<Gateway> = Api::namespaced(self.client.clone(), &key.0);
        let patch =
            json!({ "metadata": { "finalizers": fins, "resourceVersion": gw.resource_version() } });
        match api
            .patch_metadata(&key.1, &PatchParams::default(), &Patch::Merge(&patch))
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
        let api: Api<Gateway> = Api::namespaced(self.client.clone(), &key.0);
        self.metrics.status_writes.fetch_add(1, Ordering::Relaxed);
        match api
            .patch_status(
                &key.1,
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

    /// Writes our `status.parents` entries of a route: with `Some((gateway, entries))`,
    /// the entries for that Gateway are replaced; ours for other Gateways still in the
    /// spec are kept; entries of other controllers are never touched. Read-modify-write
    /// with the resourceVersion, retried on conflict.
    pub(crate) async fn write_route_status(
        self: &Arc<Self>,
        rkey: &RouteKey,
        update: Option<(&Key, &[ParentAttachment])>,
    ) -> Result<(), Error> {
        let ar = ApiResource::erase::<gateway_api::apis::standard::httproutes::HttpRoute>(&());
        let api: Api<DynamicObject> = Api::namespaced_with(self.client.clone(), &rkey.1, &ar);
        // Our entries for `obj` after this write, and what it holds now.
        let compute = |obj: &Value| -> (Vec<Value>, Vec<Value>) {
            let generation = obj["metadata"]["generation"].as_i64();
            let existing = obj["status"]["parents"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            let spec_refs: Vec<Value> = obj["spec"]["parentRefs"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            let targets = |p: &Value, gw: &Key| {
                p["name"].as_str() == Some(gw.1.as_str())
                    && p["namespace"].as_str().unwrap_or(rkey.1.as_str()) == gw.0
                    && p["kind"].as_str().unwrap_or("Gateway") == "Gateway"
            };
            let in_spec = |p: &Value| {
                spec_refs
                    .iter()
                    .any(|s| crate::plan::route::same_parent(s, p))
            };
            let still_ours = |p: &Value| {
                let gw: Key = (
                    p["namespace"]
                        .as_str()
                        .unwrap_or(rkey.1.as_str())
                        .to_owned(),
                    p["name"].as_str().unwrap_or_default().to_owned(),
                );
                self.snapshot
                    .read()
                    .ok()
                    .is_some_and(|s| plan_gateway(&s, &gw).is_ok())
            };
            let mut next: Vec<Value> = Vec::new();
            for e in &existing {
                let ours = e["controllerName"] == CONTROLLER_NAME;
                let keep = !ours
                    || (in_spec(&e["parentRef"])
                        && update.is_none_or(|(gw, _)| !targets(&e["parentRef"], gw))
                        && still_ours(&e["parentRef"]));
                if keep {
                    next.push(e.clone());
                }
            }
            if let Some((_, atts)) = update {
                let fresh = merge_route_parents(
                    Some(&Value::Array(existing.clone())),
                    atts,
                    generation,
                    &now(),
                );
                next.extend(
                    fresh
                        .into_iter()
                        .filter(|e| e["controllerName"] == CONTROLLER_NAME),
                );
            }
            let (mut foreign, mut ours): (Vec<Value>, Vec<Value>) = next
                .into_iter()
                .partition(|e| e["controllerName"] != CONTROLLER_NAME);
            ours.sort_by_key(|e| e["parentRef"].to_string());
            foreign.extend(ours);
            (existing, foreign)
        };
        // The watched copy first: when it already holds what we would write, nothing to do.
        let cached = self
            .snapshot
            .read()
            .ok()
            .and_then(|s| s.route(rkey).map(|r| r.json.clone()));
        if let Some(obj) = cached {
            let (existing, next) = compute(&obj);
            if strip_times(&Value::Array(next)) == strip_times(&Value::Array(existing)) {
                return Ok(());
            }
        }
        for _ in 0..5 {
            let Some(route) = api
                .get_opt(&rkey.2)
                .await
                .map_err(|e| Error::kube(format!("read {} {}/{}", rkey.0, rkey.1, rkey.2), e))?
            else {
                return Ok(());
            };
            let mut obj = serde_json::to_value(&route).unwrap_or(Value::Null);
            let (existing, foreign) = compute(&obj);
            if strip_times(&Value::Array(foreign.clone())) == strip_times(&Value::Array(existing)) {
                return Ok(());
            }
            obj["status"]["parents"] = Value::Array(foreign);
            let Ok(body) = serde_json::from_value::<DynamicObject>(obj) else {
                return Ok(());
            };
            self.metrics.status_writes.fetch_add(1, Ordering::Relaxed);
            self.expect_own_status(
                own_status_key(&rkey.0, &rkey.1, &rkey.2),
                &body.data["status"],
            );
            match api
                .replace_status(&rkey.2, &PostParams::default(), &body)
                .await
            {
                Ok(_) => return Ok(()),
                Err(kube::Error::Api(s)) if s.code == 409 => {}
                Err(e) => {
                    return Err(Error::kube(
                        format!("write the status of {} {}/{}", rkey.0, rkey.1, rkey.2),
                        e,
                    ));
                }
            }
        }
        Err(Error::kube(
            format!("write the status of {} {}/{}", rkey.0, rkey.1, rkey.2),
            kube::Error::LinesCodecMaxLineLengthExceeded,
        ))
    }

    /// Removes our stale entries from a route (parentRef gone, Gateway no longer ours).
    pub(crate) async fn reconcile_route(
        self: &Arc<Self>,
        rkey: &RouteKey,
    ) -> Result<Option<Duration>, Error> {
        self.write_route_status(rkey, None).await?;
        Ok(None)
    }

    /// Writes a blueprint's status: `Accepted` True when every template compiles, reads
    /// only known variables and has no cycle; else False naming each template and line.
    pub(crate) async fn reconcile_blueprint(
        self: &Arc<Self>,
        name: &str,
    ) -> Result<Option<Duration>, Error> {
        let Some((object, errors)) = self.snapshot.read().ok().and_then(|s| {
            s.blueprint(name).map(|b| {
                let errors = crate::plan::class::blueprint_errors(&s, b);
                (
                    b.object.clone(),
                    (!errors.is_empty())
                        .then(|| errors.iter().map(ToString::to_string).collect::<Vec<_>>()),
                )
            })
        }) else {
            return Ok(None);
        };
        let accepted = match &errors {
            None => Cond::t(
                types::ACCEPTED,
                reasons::ACCEPTED,
                "every template compiles",
            ),
            Some(errs) => Cond::f(types::ACCEPTED, "InvalidTemplate", &errs.join("; ")),
        };
        let existing = object.status.clone().unwrap_or_default();
        let status = crate::api::BlueprintStatus {
            conditions: merge_conditions(
                &existing.conditions,
                std::slice::from_ref(&accepted),
                &[types::ACCEPTED],
                object.metadata.generation,
                &now(),
            ),
            observed_generation: object.metadata.generation,
        };
        let desired = serde_json::to_value(&status).unwrap_or(Value::Null);
        if strip_times(&desired)
            == strip_times(&serde_json::to_value(&existing).unwrap_or(Value::Null))
        {
            return Ok(None);
        }
        let api: Api<crate::api::GatewayClassBlueprint> = Api::all(self.client.clone());
        self.metrics.status_writes.fetch_add(1, Ordering::Relaxed);
        self.expect_own_status(own_status_key("GatewayClassBlueprint", "", name), &desired);
        api.patch_status(
            name,
            &PatchParams::default(),
            &Patch::Merge(&json!({ "status": desired })),
        )
        .await
        .map_err(|e| Error::kube("write the blueprint status", e))?;
        if errors.is_some()
            && existing
                .conditions
                .iter()
                .find(|c| c.type_ == types::ACCEPTED)
                .is_none_or(|c| c.status != "False")
        {
            self.event(
                &object,
                true,
                "InvalidTemplate",
                "Compile",
                &accepted.message,
            )
            .await;
        }
        Ok(None)
    }

    /// Writes a GatewayClass's status and gateway-exists finalizer.
    pub(crate) async fn reconcile_class(
        self: &Arc<Self>,
        name: &str,
    ) -> Result<Option<Duration>, Error> {
        let (plan, class) = {
            let snap = self.snapshot.read().map_err(|_| Error::Deleting(0))?;
            (
                plan_class(&snap, name),
                snap.class(name).map(|c| (**c).clone()),
            )
        };
        let (Some(plan), Some(class)) = (plan, class) else {
            return Ok(None);
        };
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
            self.expect_own_status(own_status_key("GatewayClass", "", name), &desired);
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

#[cfg(test)]
mod tests {
    use super::*;

    fn replacement(phase: RolloutPhase, age_seconds: i64, timeout_seconds: u64) -> RolloutState {
        let started = k8s_openapi::jiff::Timestamp::now()
            .checked_sub(k8s_openapi::jiff::SignedDuration::from_secs(age_seconds))
            .unwrap_or_default();
        RolloutState {
            template: "cert".into(),
            from: Some("aaaa0000".into()),
            to: "bbbb1111".into(),
            phase,
            waiting_for: "what it waits for".into(),
            started: Some(started.to_string()),
            timeout_seconds,
        }
    }

    #[test]
    fn a_replacement_is_stuck_past_its_timeout_before_or_after_the_switch() {
        for (phase, on_time, late) in [
            (
                RolloutPhase::WaitingForNew,
                Progress::Waiting,
                Progress::Stuck,
            ),
            (
                RolloutPhase::Switching,
                Progress::Switching,
                Progress::SwitchStuck,
            ),
        ] {
            let young = replacement(phase.clone(), 10, 60);
            let (p, requeue) = rollout_progress(&[&young]);
            assert_eq!(p["cert=bbbb1111"], on_time);
            let requeue = requeue.unwrap();
            assert!(
                (Duration::from_secs(49)..=Duration::from_secs(52)).contains(&requeue),
                "wakes at the deadline: {requeue:?}"
            );
            assert_eq!(
                rollout_condition(&[&young], &p).reason,
                reasons::PROGRESSING
            );

            let old = replacement(phase, 61, 60);
            let (p2, requeue) = rollout_progress(&[&old]);
            assert_eq!(p2["cert=bbbb1111"], late);
            assert_eq!(requeue, None, "nothing left to wait for");
            let c = rollout_condition(&[&old], &p2);
            assert_eq!(c.reason, reasons::STUCK);
            assert!(c.message.contains("what it waits for"), "{}", c.message);
            // Entering the stuck state is an Event, once.
            let events = rollout_events(&p, &p2);
            assert_eq!(events.len(), 1, "{events:?}");
            assert_eq!(events[0].0, "RolloutStuck");
            assert!(events[0].1, "a warning");
            assert!(rollout_events(&p2, &p2).is_empty());
        }
        // A finishing replacement is never stuck.
        let done = replacement(RolloutPhase::Finishing, 600, 60);
        let (p, requeue) = rollout_progress(&[&done]);
        assert_eq!(p["cert=bbbb1111"], Progress::Finishing);
        assert_eq!(requeue, None);
    }

    #[test]
    fn a_stuck_switch_that_completes_is_switched_once_and_finished() {
        let key = "cert=bbbb1111".to_owned();
        let at = |p: Progress| BTreeMap::from([(key.clone(), p)]);
        let reasons_of = |b: &BTreeMap<String, Progress>, n: &BTreeMap<String, Progress>| {
            rollout_events(b, n)
                .into_iter()
                .map(|e| e.0)
                .collect::<Vec<_>>()
        };
        assert_eq!(
            reasons_of(&at(Progress::Waiting), &at(Progress::Switching)),
            ["RolloutSwitched"]
        );
        assert_eq!(
            reasons_of(&at(Progress::Switching), &at(Progress::SwitchStuck)),
            ["RolloutStuck"]
        );
        assert!(reasons_of(&at(Progress::SwitchStuck), &at(Progress::Finishing)).is_empty());
        assert_eq!(
            reasons_of(&at(Progress::Finishing), &BTreeMap::new()),
            ["RolloutFinished"]
        );
    }
}
