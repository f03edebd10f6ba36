//! Reconciling one Gateway, step by step: read and plan (under the snapshot lock, pure),
//! add our finalizer, apply the children (several at once), prune what is no longer
//! rendered, write the planned status (with what applying found out) and the routes'
//! entries of ours, announce transitions as Events, and say when to look again.
//! A deleting Gateway goes to the teardown instead.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use futures::StreamExt;
use gateway_api::apis::standard::gateways::Gateway;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams};
use serde_json::{Value, json};

use super::child_kinds::KindState;
use super::cluster::Cluster;
use super::common::{Error, MEMO_MIN_ROUTES, Work};
use super::memory::{Reported, observed_reported};
use super::planned::{Planned, Read, narrowing_of, read_and_plan};
use crate::gateway::conditions::{reasons, types};
use crate::plan::replacement::{self, Progress};
use crate::plan::{GatewayStatusPlan, Plan, Replacement, is_subset};
use crate::render::TemplateSet;
use crate::render::labels::GATEWAY_FINALIZER;
use crate::snapshot::{Key, Live, ObjectKey};

/// Requests one reconcile sends at the same time (child applies, then route status
/// writes): a Gateway with many routes is not one request after the other.
const REQUESTS_IN_FLIGHT: usize = 8;

/// Route children one pass writes at most (with their routes' statuses): when a thousand
/// routes arrive together, the rest waits for the next pass, planned at once, so that a
/// pass stays short and what starts every pass (the Gateway's route counts, a change to
/// the Gateway's own children) is not behind all of them. The Gateway's own children are
/// never held back.
const ROUTE_WRITES_PER_PASS: usize = 128;

/// What applying the children found.
#[derive(Default)]
struct Applied {
    /// Kinds the API server does not serve (messages).
    missing: BTreeSet<String>,
    /// Applies that failed (messages).
    errors: Vec<String>,
    /// Of those, the ones that will not go through without a change elsewhere: a child
    /// held by another parent or object, a kind whose scope contradicts the blueprint.
    lasting: Vec<String>,
    /// A kind whose discovery is still under way.
    pending_kinds: bool,
    /// Whether an apply sent a change that a plan reads back (see [`replans`]).
    changed: bool,
    /// Routes with a change to their children held back (a narrowing goes first, or the
    /// pass wrote [`ROUTE_WRITES_PER_PASS`] already): their status is not written yet, so
    /// no one reads the change as taken.
    routes_waiting: BTreeSet<crate::snapshot::RouteKey>,
    /// Route children left for the next pass ([`ROUTE_WRITES_PER_PASS`]).
    deferred: bool,
}

impl Applied {
    /// Whether every child went through, so pruning is safe (a route child left for the
    /// next pass may replace one that pruning would delete).
    fn settled(&self) -> bool {
        self.errors.is_empty() && self.missing.is_empty() && !self.pending_kinds && !self.deferred
    }
}

/// What a reconcile of a Gateway writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Part {
    /// Everything: children, prune, finalizer, status, Events (the leader, or the one
    /// replica).
    All,
    /// Only what it places in the members whose Lease this replica holds, their prune
    /// and teardown included: another replica leads and writes the rest
    /// ([`crate::plan::placement::writes_here`]).
    Placed,
}

/// The status to write, and the replacements' progress behind its Rollout condition.
struct StatusOutcome {
    status: GatewayStatusPlan,
    rollouts: BTreeMap<String, Progress>,
    rollout_requeue: Option<Duration>,
}

impl Cluster {
    /// Plans and executes one Gateway.
    pub(crate) async fn reconcile_gateway(
        self: &Arc<Self>,
        key: &Key,
    ) -> Result<Option<Duration>, Error> {
        self.reconcile_gateway_part(key, Part::All).await
    }

    /// Plans one hub Gateway and writes only what it places in the members whose Lease
    /// this replica holds ([`Part::Placed`]): fleet mode with leader election, on a
    /// replica that does not lead.
    pub(crate) async fn place_gateway(
        self: &Arc<Self>,
        key: &Key,
    ) -> Result<Option<Duration>, Error> {
        self.reconcile_gateway_part(key, Part::Placed).await
    }

    /// Plans and executes `part` of one Gateway.
    async fn reconcile_gateway_part(
        self: &Arc<Self>,
        key: &Key,
        part: Part,
    ) -> Result<Option<Duration>, Error> {
        // Created just now: its routes are likely on their way (see NEW_GATEWAY_SETTLE).
        if let Some(wait) = self.new_gateway_wait(key) {
            return Ok(Some(wait));
        }
        let started = Instant::now();
        let listings = self.kind_listings();
        let mut memo = self.take_plan_memo(key);
        // The snapshot is read once for the plan and what narrowing asks of it (the live
        // children, before any write of this pass).
        let (read, narrowing) = {
            let snap = self.snapshot.read().map_err(|_| Error::SnapshotPoisoned)?;
            let read = read_and_plan(&snap, key, &mut memo);
            let narrowing = match &read {
                Read::Planned(p) => narrowing_of(p, &snap),
                _ => crate::plan::narrowing::Narrowing::default(),
            };
            (read, narrowing)
        };
        if matches!(read, Read::Planned(_)) {
            self.metrics.route_plans(memo.last);
            self.keep_plan_memo(key, memo);
        }
        self.metrics.planned(started.elapsed());
        let p = match read {
            Read::Planned(p) => {
                // Objects another parent holds: this Gateway is woken when they go.
                let held: Vec<ObjectKey> = p.plan.conflicts().cloned().collect();
                self.wait_for_children(key, held);
                p
            }
            Read::Orphaned(gw, mut kinds) => {
                // And what it used while its class was there (a kind whose cache is empty
                // now is still asked before the finalizer goes).
                kinds.extend(self.kinds.kinds_of(key));
                self.use_kinds(key, kinds.clone());
                return self.teardown(key, &gw, &kinds, part).await;
            }
            Read::Nothing => {
                // Gone or not ours: forget what was kept for it.
                self.forget_gateway(key);
                self.use_kinds(key, BTreeSet::new());
                return Ok(None);
            }
        };
        if let Some(not_yet) = self.not_yet(key, &p, part, listings) {
            return Ok(not_yet);
        }
        if p.gateway.metadata.deletion_timestamp.is_some() {
            return self.teardown(key, &p.gateway, &p.kinds, part).await;
        }
        if p.plan.gateway.accepted && part == Part::All {
            self.ensure_finalizer(key, &p.gateway).await?;
        }
        // The route counts first: one write, not behind the routes' copies and statuses.
        let (counted, counts_wait) = if part == Part::All {
            self.write_route_counts(key, &p.gateway, &p.plan.status.gateway)
                .await?
        } else {
            (None, None)
        };
        // New versions of make-before-break children wait until what they render settles.
        let unsettled = self.unsettled(key, &p);
        // A change that removes what a drained child advertises goes first and alone
        // (`narrowing`, decided with the plan).
        let mut hold = unsettled.keys.clone();
        hold.extend(narrowing.hold.iter().cloned());
        // Predecessors of adopted objects are released before what takes them over is
        // written (the template waits for that in the plan).
        self.release_adopted(&p.gateway, &p.plan.gateway.releases)
            .await?;
        let applied = self
            .apply_children(&p, &hold, &narrowing.apply_instead)
            .await;
        self.record_narrowing(&p.gateway, &narrowing).await?;
        // Fights over fields of these children with other field managers.
        // Named only when some child is fought over (a shared Gateway has many; no other
        // Gateway's pass adds a fight over one of these).
        let child_names: Vec<String> = if self.fights.is_empty() {
            Vec::new()
        } else {
            p.plan.children().map(|c| c.key.to_string()).collect()
        };
        let (fights, new_fights) = self
            .fights
            .active(child_names.iter().map(String::as_str), Instant::now());
        // While a narrowing or a drain holds the others, only what drains is pruned.
        let (prune_left, draining) = if !applied.settled() {
            (narrowing.holds, None)
        } else if narrowing.holds {
            let (_, wake) = self.prune(&p, Some(&narrowing.draining_prunes)).await?;
            (true, wake)
        } else {
            self.prune(&p, None).await?
        };
        if part == Part::Placed {
            // The status, the routes' and the Events are the leader's.
            let next = requeue_after(&applied, prune_left, None)?;
            return Ok([next, unsettled.wake, narrowing.wake, draining]
                .into_iter()
                .flatten()
                .min());
        }
        let mut outcome = status_after(&p.plan, &applied, Timestamp::now());
        if let Some(c) = super::fight::condition(&fights) {
            outcome.status.conditions.push(c);
        }
        // A change that only reports progress may wait (see `settle::PROGRESS_HOLD`).
        let status_wait = self
            .write_gateway_status(key, counted.as_ref().unwrap_or(&p.gateway), &outcome.status)
            .await?;
        // A rollout of its blueprint under way reads how the Gateway stands.
        super::revisions::on_gateway_reported(self, key);
        for set in &outcome.status.listener_sets {
            self.write_listener_set_status(set).await?;
        }
        self.write_route_statuses(key, &p, &applied).await?;
        self.announce(key, &p, &outcome, &applied).await;
        self.announce_fights(key, &p.gateway, &new_fights, &child_names)
            .await;
        let next = requeue_after(&applied, prune_left, outcome.rollout_requeue)?;
        self.say_narrowing(key, &narrowing.words);
        Ok([
            next,
            unsettled.wake,
            status_wait,
            counts_wait,
            narrowing.wake,
            draining,
        ]
        .into_iter()
        .flatten()
        .min())
    }

    /// Whether a planned Gateway is to wait before anything is written (`Some`: when to
    /// plan it again; `None` in it: when a watch says so): its kinds not listed yet, the
    /// fleet not known yet, or nothing of it for this replica to write.
    fn not_yet(
        self: &Arc<Self>,
        key: &Key,
        p: &Planned,
        part: Part,
        listings: (u64, u64),
    ) -> Option<Option<Duration>> {
        // Another replica leads: nothing to do here for a Gateway that places nothing
        // (and no kind of its to watch).
        if part == Part::Placed && p.plan.gateway.placement.is_none() {
            self.use_kinds(key, BTreeSet::new());
            self.place_kinds(key, &p.plan);
            return Some(None);
        }
        // A fleet member watches routes and what they read only once a Gateway of ours
        // is there: planned again once those have listed.
        if !self.rest_watches_listed() {
            return Some(None);
        }
        // The hub of a fleet places nothing before its inventory has given the members
        // once (a start would plan placement over no members): planned again then.
        if p.plan.gateway.placement.is_some()
            && let Some(wait) = self.fleet_unknown()
        {
            return Some(Some(wait));
        }
        // Not before the watches of its child kinds have listed, here and in the members
        // it places objects in: planned again then.
        if !self.register_kinds(key, &p.kinds, &p.plan) {
            return Some(None);
        }
        let now = self.kind_listings();
        if now.0 != listings.0 || (p.plan.gateway.placement.is_some() && now.1 != listings.1) {
            // A kind finished listing while we planned (here, or in a member it places
            // in, whose objects then reached the hub's mirror after the plan read it):
            // plan again from the full cache.
            return Some(Some(Duration::from_millis(50)));
        }
        None
    }

    /// Route status, after the route's children were applied (Flagger waits on it); not
    /// for routes whose object and entries are those found written last time. (Recorded
    /// only for Gateways with many routes: for a few, looking costs less than the memory
    /// of remembering.)
    async fn write_route_statuses(
        self: &Arc<Self>,
        key: &Key,
        p: &Planned,
        applied: &Applied,
    ) -> Result<(), Error> {
        let remember = p.plan.status.routes.len() >= MEMO_MIN_ROUTES;
        let routes = &p.plan.status.routes;
        let mut todo: Vec<_> = if remember {
            self.route_status_to_write(key, routes)
        } else {
            routes.iter().map(|r| (r, None)).collect()
        };
        todo.retain(|(r, _)| !applied.routes_waiting.contains(&r.route));
        let writes: Vec<_> = todo
            .iter()
            .map(|(r, entry)| async move {
                self.write_route_status(&r.route, Some((key, r.entries.as_slice())))
                    .await?;
                if let Some(entry) = entry {
                    self.route_status_written(key, r, entry);
                }
                Ok::<(), Error>(())
            })
            .collect();
        let written: Vec<Result<(), Error>> = futures::stream::iter(writes)
            .buffered(REQUESTS_IN_FLIGHT)
            .collect()
            .await;
        written.into_iter().collect::<Result<(), Error>>()
    }

    /// An Event for each new fight over fields of the Gateway's children, and a wake-up
    /// when the next one may be over.
    async fn announce_fights(
        self: &Arc<Self>,
        key: &Key,
        gateway: &Gateway,
        new_fights: &[super::fight::Fight],
        child_names: &[String],
    ) {
        for f in new_fights {
            self.event(gateway, true, super::fight::REASON, "Apply", &f.to_string())
                .await;
        }
        if let Some(d) = self
            .fights
            .wake_in(child_names.iter().map(String::as_str), Instant::now())
        {
            self.enqueue_after(Work::Gateway(key.clone()), d);
        }
    }

    /// Logs what a narrowing makes the other children wait for, once per change of it.
    fn say_narrowing(&self, key: &Key, words: &[String]) {
        let said = words.join("; ");
        let new_words = self
            .memory
            .with(key, |m| {
                (m.narrowing_said != said)
                    .then(|| std::mem::replace(&mut m.narrowing_said, said.clone()))
            })
            .flatten()
            .is_some();
        if new_words && !said.is_empty() {
            tracing::info!(gateway = %key, waiting = %said, "narrowing: the other children wait");
        }
    }

    /// Adds our finalizer, so the children are torn down before the Gateway goes.
    async fn ensure_finalizer(&self, key: &Key, gw: &Gateway) -> Result<(), Error> {
        if gw.finalizers().iter().any(|f| f == GATEWAY_FINALIZER) {
            return Ok(());
        }
        let mut fins = gw.finalizers().to_vec();
        fins.push(GATEWAY_FINALIZER.to_owned());
        let patch =
            json!({ "metadata": { "finalizers": fins, "resourceVersion": gw.resource_version() } });
        let api: Api<Gateway> = Api::namespaced(self.client.clone(), &key.namespace);
        api.patch_metadata(&key.name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map_err(|e| Error::kube("add the Gateway finalizer", e))?;
        self.metrics.status_writes.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// Applies every child, [`REQUESTS_IN_FLIGHT`] at a time; failures are reported in
    /// dependency order (the Gateway's children, then each route's) and do not stop the
    /// others. Order among the applies themselves does not matter: a dependent is only
    /// rendered once what it reads exists, and it was rendered from the snapshot before
    /// any of these writes.
    async fn apply_children(
        self: &Arc<Self>,
        p: &Planned,
        hold: &BTreeSet<ObjectKey>,
        instead: &std::collections::HashMap<ObjectKey, Value>,
    ) -> Applied {
        let mut out = Applied::default();
        let mut todo = Vec::new();
        // Which route plan each child belongs to (`None`: the Gateway's own).
        let owners = std::iter::repeat_n(None, p.plan.gateway.children.len()).chain(
            p.plan
                .routes
                .iter()
                .enumerate()
                .flat_map(|(i, r)| std::iter::repeat_n(Some(i), r.children.len())),
        );
        // Route plans with a child held back: not all their children were looked at.
        let mut held_routes = BTreeSet::new();
        for ((c, live), owner) in p.plan.children().zip(&p.live).zip(owners) {
            // A route plan reused from the memo whose children were all found to hold
            // what it renders: same objects, same live objects, same verdict (its live
            // objects are not parsed again).
            let applied = owner.is_some_and(|i| p.plan.routes[i].applied.get());
            if hold.contains(&c.key) {
                if let Some(i) = owner {
                    held_routes.insert(i);
                    let holds = applied
                        || live
                            .as_ref()
                            .is_some_and(|l| is_subset(&c.object, l.value()));
                    if !holds {
                        out.routes_waiting.insert(p.plan.routes[i].route.clone());
                    }
                }
                continue;
            }
            if applied {
                continue;
            }
            let at = match self.target(&c.key) {
                Ok(at) => at,
                // Another replica writes there.
                Err(Error::Elsewhere(_)) => continue,
                Err(e) => {
                    out.missing.insert(e.to_string());
                    continue;
                }
            };
            match at.ensure_kind(&c.key.api_version, &c.key.kind) {
                KindState::Missing(msg) => {
                    out.missing.insert(msg);
                }
                KindState::Pending => out.pending_kinds = true,
                KindState::Served { .. } => todo.push((c, live, owner)),
            }
        }
        let deferred_routes = super::apply::beyond_budget(
            todo.iter().map(|(c, live, owner)| {
                (
                    instead.get(&c.key).unwrap_or(&c.object),
                    live.as_ref().map(Live::value),
                    *owner,
                )
            }),
            ROUTE_WRITES_PER_PASS,
        );
        if !deferred_routes.is_empty() {
            todo.retain(|(_, _, owner)| owner.is_none_or(|i| !deferred_routes.contains(&i)));
            for &i in &deferred_routes {
                out.routes_waiting.insert(p.plan.routes[i].route.clone());
            }
            held_routes.extend(deferred_routes);
            out.deferred = true;
        }
        // Route templates another route template reads (`resources.<name>`).
        let read: BTreeSet<&str> = p
            .plan
            .gateway
            .blueprint
            .as_deref()
            .map(|b| {
                b.route_graph
                    .deps
                    .values()
                    .flatten()
                    .map(String::as_str)
                    .collect()
            })
            .unwrap_or_default();
        let applies: Vec<_> = todo
            .iter()
            .map(|(c, live, owner)| {
                let obj = instead.get(&c.key).unwrap_or(&c.object);
                let quiet = !replans(*owner, &c.template, &read);
                self.apply_child(&c.key, obj, live.as_ref().map(Live::value), quiet)
            })
            .collect();
        let results: Vec<_> = futures::stream::iter(applies)
            .buffered(REQUESTS_IN_FLIGHT)
            .collect()
            .await;
        // Route plans none of whose children needed a write.
        let mut quiet: Vec<bool> = p
            .plan
            .routes
            .iter()
            .enumerate()
            .map(|(i, r)| !r.children.is_empty() && !held_routes.contains(&i))
            .collect();
        for ((_, _, owner), r) in todo.iter().zip(&results) {
            if let Some(i) = owner
                && !matches!(r, Ok(false))
            {
                quiet[*i] = false;
            }
        }
        for (r, q) in p.plan.routes.iter().zip(quiet) {
            if q && out.missing.is_empty() && !out.pending_kinds {
                r.applied.set();
            }
        }
        for ((c, _, owner), r) in todo.iter().zip(results) {
            match r {
                Ok(sent) => out.changed |= sent && replans(*owner, &c.template, &read),
                Err(e) => {
                    let said = match &e {
                        Error::Refused(_) => format!("template {}: {e}", c.template),
                        _ => e.to_string(),
                    };
                    if matches!(
                        e,
                        Error::HeldByAnother(_) | Error::ScopeMismatch(_) | Error::Refused(_)
                    ) {
                        out.lasting.push(said.clone());
                    }
                    out.errors.push(said);
                }
            }
        }
        out
    }

    /// Deletes what is no longer rendered: route children first (they depend on the
    /// Gateway's), then the Gateway's children of one template; the next template's once
    /// those are gone. A child whose template drains is drained first, as at teardown.
    /// Returns whether some are left for a later pass, and when to look again at a drain.
    async fn prune(
        self: &Arc<Self>,
        p: &Planned,
        only: Option<&BTreeSet<ObjectKey>>,
    ) -> Result<(bool, Option<Duration>), Error> {
        let plan = &p.plan;
        let prepared = plan.gateway.blueprint.as_deref();
        let mut left = false;
        let mut wake: Option<u64> = None;
        let drain_or_delete = async |k: &ObjectKey, set: TemplateSet| {
            let live = self.snapshot.read().ok().and_then(|s| s.child(k));
            let Some(live) = live else {
                if let Some(waiting) = self.deleted_elsewhere(k) {
                    return Ok(Some(waiting));
                }
                return self.delete_child(k).await.map(|()| None);
            };
            self.drain_or_delete_child(&p.gateway, "Prune", prepared, set, &live)
                .await
        };
        // While a narrowing or a drain holds the others, only what drains is looked at.
        let wanted = |k: &ObjectKey| only.is_none_or(|o| o.contains(k));
        for k in plan
            .routes
            .iter()
            .flat_map(|r| r.prune.iter())
            .chain(&plan.gateway.orphaned_route_children)
            .filter(|k| wanted(k))
        {
            if let Some((_, again)) = drain_or_delete(k, TemplateSet::Route).await? {
                left = true;
                wake = Some(wake.map_or(again, |w| w.min(again)));
            }
        }
        let first = p.prune_templates.first();
        for (k, t) in plan.gateway.prune.iter().zip(&p.prune_templates) {
            if !wanted(k) {
                continue;
            }
            if Some(t) != first && only.is_none() {
                left = true;
            } else if let Some((_, again)) = drain_or_delete(k, TemplateSet::Gateway).await? {
                left = true;
                wake = Some(wake.map_or(again, |w| w.min(again)));
            }
        }
        Ok((left, wake.map(Duration::from_secs)))
    }

    /// Events on transitions only: a new template error, a kind no longer served, a
    /// change of `Programmed`, a step of a replacement.
    async fn announce(&self, key: &Key, p: &Planned, outcome: &StatusOutcome, applied: &Applied) {
        let gw = &p.gateway;
        let programmed = outcome.status.condition(types::PROGRAMMED).cloned();
        let now_reported = Reported {
            programmed: programmed
                .as_ref()
                .map(|c| format!("{}/{}", c.status, c.reason))
                .unwrap_or_default(),
            errors: p.plan.errors().map(ToString::to_string).collect(),
            missing: applied.missing.clone(),
            rollouts: outcome.rollouts.clone(),
            stuck_deletions: BTreeSet::new(),
            left_in: BTreeSet::new(),
            refused_addresses: p
                .plan
                .gateway
                .placement
                .iter()
                .flat_map(|p| p.refused_addresses.iter().cloned())
                .collect(),
        };
        let before = self
            .memory
            .with(key, |m| m.reported.replace(now_reported.clone()))
            .flatten()
            .unwrap_or_else(|| observed_reported(gw, &now_reported));
        for e in now_reported.errors.difference(&before.errors) {
            self.event(gw, true, "TemplateFailed", "Render", e).await;
        }
        for m in now_reported.missing.difference(&before.missing) {
            self.event(gw, true, "KindNotServed", "Apply", m).await;
        }
        for a in now_reported
            .refused_addresses
            .difference(&before.refused_addresses)
        {
            let note = format!(
                "an address outside what the member's ClusterProfile allows (annotation {}) was left out of what the hub renders: {a}",
                crate::fleet::profile::ANNOTATION_ADDRESSES
            );
            self.event(gw, true, "AddressRefused", "Render", &note)
                .await;
        }
        // A Gateway that was not Programmed and is (still) waiting for its children is
        // not news: every new Gateway starts so, and a fleet's cold start would announce a
        // warning for each. Leaving `Programmed=True`, reaching it, and failing are.
        let still_waiting = programmed
            .as_ref()
            .is_some_and(|c| !c.status.is_true() && c.reason == reasons::PENDING)
            && !before.programmed.starts_with("True/");
        if before.programmed != now_reported.programmed
            && !still_waiting
            && let Some(c) = &programmed
        {
            let ok = c.status.is_true();
            let reason = if ok { "Programmed" } else { "NotProgrammed" };
            self.event(gw, !ok, reason, "Reconcile", &c.message).await;
        }
        for e in replacement::events(&before.rollouts, &now_reported.rollouts) {
            self.event(gw, e.warning, e.reason, "Rollout", &e.message)
                .await;
        }
    }
}

/// The planned status with what applying found out, and the replacements judged against
/// the clock (`now`): past its timeout, a replacement is stuck.
fn status_after(plan: &Plan, applied: &Applied, now: Timestamp) -> StatusOutcome {
    let mut status = plan.status.gateway.clone().after_apply(
        applied
            .missing
            .iter()
            .next()
            .or(applied.lasting.first())
            .map(String::as_str),
        applied.errors.first().map(String::as_str),
    );
    let rollouts: Vec<&Replacement> = plan.rollouts().collect();
    let (progress, rollout_requeue) = replacement::progress(&rollouts, now);
    if status.condition(types::ROLLOUT).is_some() {
        status.set(replacement::condition(&rollouts, &progress, now));
    }
    StatusOutcome {
        status,
        rollouts: progress,
        rollout_requeue,
    }
}

/// Whether a change sent to a child is read back by a plan, so the Gateway is planned
/// again after it (`requeue_after`). The Gateway's children are: its status was planned
/// from them as they were before (readiness, addresses), and its templates read each
/// other's. A route template's child is read only by the route templates that read it
/// (templates read `resources` of their own set); the Gateway's status and the routes'
/// come from the route plans and what the applies returned, and a change that the
/// child's owner later makes to its status arrives by the child's watch. So a change to
/// a route's child no other route template reads (a shadow route, when the weights
/// change) needs no second plan: the snapshot already holds what the apply returned.
fn replans(owner: Option<usize>, template: &str, read_by_route_templates: &BTreeSet<&str>) -> bool {
    owner.is_none() || read_by_route_templates.contains(template)
}

/// When to look at the Gateway again.
///
/// # Errors
/// The first failed apply: retried with the per-object backoff until it goes through.
fn requeue_after(
    applied: &Applied,
    prune_left: bool,
    rollout_requeue: Option<Duration>,
) -> Result<Option<Duration>, Error> {
    if let Some(e) = applied.errors.first() {
        return Err(Error::Apply(e.clone()));
    }
    if applied.pending_kinds {
        return Ok(Some(Duration::from_millis(500)));
    }
    if applied.deferred {
        // Route children left for the next pass: at once.
        return Ok(Some(Duration::from_millis(1)));
    }
    if prune_left {
        // The deletions wake this Gateway through the child watch; this is a backstop.
        return Ok(Some(Duration::from_secs(2)));
    }
    if let Some(d) = rollout_requeue {
        // Wake at the earliest deadline of a replacement under way to report it stuck.
        return Ok(Some(if applied.changed {
            d.min(Duration::from_secs(1))
        } else {
            d
        }));
    }
    if applied.changed {
        // The status was planned before these applies: plan once more shortly, from what
        // the applies returned, instead of relying on the child's watch event alone (a
        // converged re-plan writes nothing).
        return Ok(Some(Duration::from_secs(1)));
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gateway::conditions::Cond;

    #[test]
    fn only_a_change_a_plan_reads_back_plans_again() {
        let read = BTreeSet::from(["address"]);
        // The Gateway's own children: always.
        assert!(replans(None, "gateway", &read));
        assert!(replans(None, "address", &BTreeSet::new()));
        // A route's child another route template reads.
        assert!(replans(Some(3), "address", &read));
        // A route's child nothing reads (the shadow route).
        assert!(!replans(Some(0), "shadow", &read));
        assert!(!replans(Some(0), "shadow", &BTreeSet::new()));
    }

    #[test]
    fn requeue_follows_what_is_left_to_do() {
        let mut a = Applied::default();
        assert_eq!(requeue_after(&a, false, None).ok(), Some(None));
        a.changed = true;
        assert_eq!(
            requeue_after(&a, false, None).ok(),
            Some(Some(Duration::from_secs(1)))
        );
        assert_eq!(
            requeue_after(&a, false, Some(Duration::from_secs(30))).ok(),
            Some(Some(Duration::from_secs(1)))
        );
        a.changed = false;
        assert_eq!(
            requeue_after(&a, false, Some(Duration::from_secs(30))).ok(),
            Some(Some(Duration::from_secs(30)))
        );
        assert_eq!(
            requeue_after(&a, true, None).ok(),
            Some(Some(Duration::from_secs(2)))
        );
        a.pending_kinds = true;
        assert_eq!(
            requeue_after(&a, true, None).ok(),
            Some(Some(Duration::from_millis(500)))
        );
        a.errors.push("boom".into());
        assert!(matches!(requeue_after(&a, false, None), Err(Error::Apply(m)) if m == "boom"));
    }

    #[test]
    fn applying_decides_programmed_before_the_plan() {
        let planned = GatewayStatusPlan {
            conditions: vec![
                Cond::t(types::ACCEPTED, "Accepted", "ok"),
                Cond::t(types::PROGRAMMED, "Programmed", "ok"),
            ],
            listeners: Vec::new(),
            addresses: Vec::new(),
            attached_listener_sets: None,
            listener_sets: Vec::new(),
        };
        let s = planned
            .clone()
            .after_apply(Some("kind X is not served"), Some("apply failed"));
        let p = s.condition(types::PROGRAMMED).unwrap();
        assert_eq!(
            (p.reason.as_str(), p.message.as_str()),
            ("Invalid", "kind X is not served")
        );
        let s = planned.clone().after_apply(None, Some("apply failed"));
        assert_eq!(s.condition(types::PROGRAMMED).unwrap().reason, "Pending");
        assert_eq!(planned.clone().after_apply(None, None), planned);
    }
}
