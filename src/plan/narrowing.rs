//! Narrowing, decided (pure: the time is an argument): a drained child whose change
//! removes something it advertises (a hostname gone from a route: its DNS record) goes
//! first and alone; the Gateway's other children are neither changed nor deleted until
//! that version is ready and has settled ([`super::drain`] decides each child's step).
//! Other drained children whose change removes nothing they advertise go with it (a
//! template's records in groups: the group that takes over names another hands over, or
//! is emptied of, must not wait for that one's drain, or the names would have no record
//! meanwhile).
//! Children no longer rendered whose template drains are drained before they are pruned,
//! as at teardown. [`narrowing`] gathers one pass's steps; `controller/narrow.rs` records
//! and announces them, and drains or deletes.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::jiff::{SignedDuration, Timestamp};
use serde_json::Value;

use super::drain::{
    DrainStep, NarrowStep, drain_step, keep_narrowing, narrow_step, narrowing_words,
    start_narrowing,
};
use super::readiness::Readiness;
use super::status::Plan;
use crate::api::Drain;
use crate::render::TemplateSet;
use crate::render::labels;
use crate::render::prepared::Prepared;
use crate::snapshot::{Live, ObjectKey};

/// Seconds after which a Gateway whose child is draining is looked at again without news:
/// the child's own changes (the downstream controller's status) wake it sooner through
/// the child watches, so this only bounds a missed event, and a pass does not re-patch a
/// drain the snapshot has not caught up with every other second while the API server is
/// away.
pub const DRAIN_LOOK_AGAIN: u64 = 10;

/// What this pass does about the Gateway's narrowing children.
#[derive(Debug, Default)]
pub struct Narrowing {
    /// Objects applied instead of the rendered ones (the start of a narrowing recorded,
    /// or carried along).
    pub apply_instead: HashMap<ObjectKey, Value>,
    /// Children not changed in this pass (every live child but the narrowing ones and the
    /// drained ones whose change removes nothing they advertise, while one holds).
    pub hold: BTreeSet<ObjectKey>,
    /// Whether the others wait (no prune either, but of the children draining).
    pub holds: bool,
    /// Children no longer rendered that are draining before their delete: while any is,
    /// only they are pruned.
    pub draining_prunes: BTreeSet<ObjectKey>,
    /// Narrowed versions now ready: record when (key, live, time to record).
    pub marks: Vec<(ObjectKey, Arc<Value>, Timestamp)>,
    /// Narrowings started in this pass, and those that timed out: words for Events.
    pub started: Vec<String>,
    /// (Those that timed out.)
    pub timed_out: Vec<String>,
    /// What holds the others, in words.
    pub words: Vec<String>,
    /// When to look again.
    pub wake: Option<Duration>,
}

/// The drain of `template` (of `set`), with its readiness rule judged on `live` (a rule
/// that cannot be judged does not hold anything: ready).
#[must_use]
pub fn drain_of<'a>(
    prepared: &'a Prepared,
    set: TemplateSet,
    template: &str,
    live: &Arc<Value>,
) -> Option<(&'a Drain, Readiness)> {
    let entry = prepared.entry(set, template)?;
    let drain = entry.drain.as_ref()?;
    let ready =
        super::readiness::judge(&prepared.compiled, entry, Some(live)).unwrap_or(Readiness::Ready);
    Some((drain, ready))
}

/// [`drain_of`] the template that rendered `live` (its label).
#[must_use]
pub fn drain_of_live<'a>(
    prepared: &'a Prepared,
    set: TemplateSet,
    live: &Arc<Value>,
) -> Option<(&'a Drain, Readiness)> {
    drain_of(prepared, set, labels::template(live)?, live)
}

/// Decides this pass's narrowing steps from the plan and the live object of each of its
/// children, in order (`child` looks up one not in the plan: what is pruned); no I/O.
#[must_use]
pub fn narrowing(
    plan: &Plan,
    live: &[Option<Live>],
    child: &dyn Fn(&ObjectKey) -> Option<Arc<Value>>,
    now: Timestamp,
) -> Narrowing {
    let mut out = Narrowing::default();
    // Most blueprints drain nothing: nothing to look at per child.
    let Some(prepared) = plan.gateway.blueprint.as_deref().filter(|p| p.has_drains()) else {
        return out;
    };
    let gateway_children = plan.gateway.children.len();
    let mut narrowing_keys = BTreeSet::new();
    // Drained children whose change removes nothing they advertise: never held (another
    // group of the same records taking over the names one hands over, or a record added
    // while another leaves).
    let mut widening_keys = BTreeSet::new();
    // The route children come after the Gateway's: none to look at when no route
    // template drains (a shared Gateway has one per route).
    let children = if prepared.route_drains() {
        plan.children().count()
    } else {
        gateway_children
    };
    for (i, (c, live)) in plan.children().zip(live).enumerate().take(children) {
        let Some(live) = live.as_ref().map(Live::object) else {
            continue;
        };
        let set = if i < gateway_children {
            TemplateSet::Gateway
        } else {
            TemplateSet::Route
        };
        let Some((drain, ready)) = drain_of(prepared, set, &c.template, live) else {
            continue;
        };
        let step = narrow_step(drain, &c.object, live, &ready, now);
        let key = c.key.to_string();
        match &step {
            NarrowStep::Start => {
                out.apply_instead
                    .insert(c.key.clone(), start_narrowing(&c.object, now));
                out.started.push(key.clone());
                out.wake = min(out.wake, DRAIN_LOOK_AGAIN);
            }
            NarrowStep::Wait(_) => out.wake = min(out.wake, DRAIN_LOOK_AGAIN),
            NarrowStep::MarkDrained => {
                out.marks.push((c.key.clone(), live.clone(), now));
                out.wake = min(out.wake, drain.settle_seconds.unwrap_or(0).max(1));
            }
            NarrowStep::Settle(left) => out.wake = min(out.wake, (*left).max(1)),
            NarrowStep::TimedOut(why) => {
                out.timed_out.push(format!("{key}: {why}"));
                // Recorded as drained and settled now, so it is said once.
                let settle = i64::try_from(drain.settle_seconds.unwrap_or(0)).unwrap_or(0);
                let at = now
                    .checked_sub(SignedDuration::from_secs(settle))
                    .unwrap_or(now);
                out.marks.push((c.key.clone(), live.clone(), at));
            }
            NarrowStep::Idle => {
                widening_keys.insert(c.key.clone());
            }
        }
        if step.holds() {
            narrowing_keys.insert(c.key.clone());
            // A change that does not narrow again keeps the start on the object.
            if !matches!(step, NarrowStep::Start)
                && let Some(kept) = keep_narrowing(&c.object, live)
            {
                out.apply_instead.insert(c.key.clone(), kept);
            }
        }
        out.words.extend(narrowing_words(&key, &step, drain));
    }
    let g = &plan.gateway;
    let prunes = plan
        .routes
        .iter()
        .flat_map(|r| r.prune.iter())
        .chain(&g.orphaned_route_children)
        .map(|k| (k, TemplateSet::Route))
        .chain(g.prune.iter().map(|k| (k, TemplateSet::Gateway)));
    for (k, set) in prunes {
        let Some(live) = child(k) else { continue };
        if !live["metadata"]["deletionTimestamp"].is_null() {
            continue;
        }
        if let Some((drain, ready)) = drain_of_live(prepared, set, &live)
            && !matches!(
                drain_step(drain, &live, &ready, now),
                DrainStep::Delete | DrainStep::TimedOut(_)
            )
        {
            out.draining_prunes.insert(k.clone());
        }
    }
    out.holds = !narrowing_keys.is_empty() || !out.draining_prunes.is_empty();
    if out.holds {
        out.hold = plan
            .children()
            .zip(live)
            .filter(|(c, live)| {
                live.is_some()
                    && !narrowing_keys.contains(&c.key)
                    && !widening_keys.contains(&c.key)
            })
            .map(|(c, _)| c.key.clone())
            .collect();
    }
    out
}

fn min(wake: Option<Duration>, secs: u64) -> Option<Duration> {
    let d = Duration::from_secs(secs);
    Some(wake.map_or(d, |w| w.min(d)))
}
