//! The rollout of a blueprint's newest revision in waves gated on health: one pure step
//! from the blueprint's rollout status, its policy, the class's Gateways as their statuses
//! say, and the time, to the next rollout status. The controller runs it whenever a
//! Gateway of the class reports, and when a bake time or a deadline runs out.
//!
//! A rollout starts when the newest revision is not the one the status rolls out. Each
//! wave takes, in key order, Gateways that neither run the newest nor are pinned and that
//! its selectors match: `count` of them, or `percent` of the class (rounded up), or every
//! match; the Gateways no listed wave takes form a last wave, `rest`. A wave moves its
//! Gateways at most `maxUnavailable` not yet `Programmed` at a time; it passes once every
//! one of them is `Programmed` on the new revision (with its make-before-break children
//! served) for `bakeSeconds` (a Gateway that was not `Programmed` when its wave started is
//! moved but not waited for). A Gateway the new revision cannot render
//! (`Programmed=False/Invalid` on it) halts the rollout at once; a wave that does not
//! pass within `progressDeadlineSeconds` halts it then. Halted with `onFailure:
//! Rollback`, the moved Gateways go back to the revision the rollout started from.
//!
//! With an `issuanceBudget`, each move spends the Certificates the Gateway's move is
//! counted as ([`ClassGateway::certificates`]); the moves of the last `windowSeconds` (recorded
//! in the rollout status, so a restart forgets nothing) never spend more than the budget.
//! What the wave would move but the budget holds back waits (said in the status and its
//! message, with when the budget lets it go); while it does, the wave's deadline does not
//! run, and it starts again once the budget lets Gateways of the wave go.
//!
//! The step's parts: `member.rs` reads the Gateways of the class ([`members`]),
//! `select.rs` says which of them each wave takes, `budget.rs` releases the current wave's
//! under `maxUnavailable` and the budget, `judge.rs` judges it (its gate included), and
//! `halt.rs` pauses, holds or halts the rollout, `fleet.rs` says whether a wave with a
//! `clusterSelector` has passed in the other members of a fleet; `outcome.rs` holds what
//! a step sees and what it decides.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;

use crate::api::{HoldReason, RolloutPhase, RolloutPolicy, RolloutStatus, WaveState, WaveStatus};

mod budget;
mod class_gateway;
mod fleet;
mod halt;
mod judge;
mod outcome;
mod select;

use budget::release;
pub use class_gateway::{ClassGateway, Health, health, members, move_cost, renders_certificates};
pub use fleet::stands;
use halt::{broken_gate, halt, paused};
use judge::{WaveVerdict, judge_wave};
use outcome::Seen;
pub use outcome::{Elsewhere, FleetView, Note, Stands, Step};
pub use select::preview;
use select::{members_of, wave_name, wave_spec};

/// How often a rollout waiting for a wave in other members of the fleet looks again.
pub const FLEET_POLL: std::time::Duration = std::time::Duration::from_secs(5);

/// One step of the rollout of `target` (the newest revision) over `members` (in key
/// order). `old`: the blueprint's rollout status; `current`: the revision its status named
/// newest before (where a new rollout starts from); `fleet`: where this cluster stands in
/// the fleet, and how the same rollout stands in the other members.
#[must_use]
pub fn step(
    policy: &RolloutPolicy,
    target: &str,
    current: Option<&str>,
    old: Option<&RolloutStatus>,
    members: &[ClassGateway],
    fleet: &FleetView,
    now: Timestamp,
) -> Step {
    let mut out = Step::default();
    let mut r = rollout_toward(target, current, old);
    if matches!(
        r.phase,
        RolloutPhase::Complete | RolloutPhase::Halted | RolloutPhase::RolledBack
    ) {
        out.status = Some(r);
        return out;
    }
    if paused(policy, &mut r, target, now, &mut out) || broken_gate(policy, &mut r, now, &mut out) {
        out.status = Some(r);
        return out;
    }
    let seen = Seen {
        target,
        by_key: members.iter().map(|m| (m.key.as_str(), m)).collect(),
        now,
    };
    loop {
        let i = r.waves.len().saturating_sub(1);
        // Whether the budget held Gateways of the current wave back at the last step.
        let was_held = r.budget_wait.take().is_some();
        // What held it at the last step is judged again (a pause or a broken gate returned
        // above).
        r.hold = None;
        let passed = match r.waves.last_mut() {
            None => true,
            // Passed, the next wave waiting for the fleet.
            Some(w) if w.passed_at.is_some() => true,
            Some(w) => {
                let spec = wave_spec(policy, i);
                let held = release(
                    &spec,
                    w,
                    &seen,
                    policy.issuance_budget.as_ref(),
                    &mut r.issued,
                    was_held,
                    &mut out,
                );
                let verdict = judge_wave(&spec, w, &seen, held.as_ref(), &mut r.message, &mut out);
                w.state = Some(wave_state(&verdict, w, held.is_some()));
                if matches!(verdict, WaveVerdict::Passed) {
                    w.passed_at.get_or_insert(Time(now));
                }
                if held.is_some() {
                    r.hold = Some(HoldReason::IssuanceBudget);
                }
                r.budget_wait = held.map(|h| h.wait);
                match verdict {
                    WaveVerdict::Passed => true,
                    WaveVerdict::Waits => false,
                    WaveVerdict::Halts(why) => {
                        halt(policy, &mut r, &why, members, &mut out);
                        out.status = Some(r);
                        return out;
                    }
                }
            }
        };
        if !passed {
            break;
        }
        match next_wave(policy, &mut r, &seen, members, fleet, &mut out) {
            Next::Started => {}
            Next::Stops => break,
            Next::Halted => {
                out.status = Some(r);
                return out;
            }
        }
    }
    out.status = Some(r);
    out
}

/// What [`next_wave`] came to.
enum Next {
    /// A wave started: judge it at once.
    Started,
    /// The rollout completed, or the next wave waits for the fleet.
    Stops,
    /// A wave of the fleet halted in another member: so did this rollout.
    Halted,
}

/// Once the current wave passed: starts the next wave that takes a Gateway, when every
/// wave of the fleet (a `clusterSelector`) before it has passed in the members it selects;
/// completes the rollout when no Gateway is left to move.
fn next_wave(
    policy: &RolloutPolicy,
    r: &mut RolloutStatus,
    seen: &Seen,
    members: &[ClassGateway],
    fleet: &FleetView,
    out: &mut Step,
) -> Next {
    let (target, now) = (seen.target, seen.now);
    let taken = |k: &str| r.waves.iter().any(|w| w.gateways.iter().any(|g| g == k));
    let mut n = r.waves.len();
    let gateways = loop {
        let g = members_of(policy, n, target, members, fleet, &taken);
        if !g.is_empty() || n >= policy.waves.len() {
            break g;
        }
        // A listed wave that takes nobody is skipped.
        n += 1;
    };
    if gateways.is_empty() {
        r.phase = RolloutPhase::Complete;
        r.message = format!("every Gateway renders {target}");
        out.notes.push(Note::normal(
            "RolloutComplete",
            format!("every Gateway renders {target}"),
        ));
        out.again = None;
        return Next::Stops;
    }
    match fleet::before(policy, n, fleet) {
        fleet::Across::Passed => {}
        fleet::Across::Waits(why) => {
            // The other members read here that this one passed it (`passedAt`, set on
            // every pass).
            r.hold = Some(HoldReason::Fleet);
            r.message = why;
            out.again = Some(FLEET_POLL);
            return Next::Stops;
        }
        fleet::Across::Halted(why) => {
            halt(policy, r, &why, members, out);
            return Next::Halted;
        }
        fleet::Across::Unread => {
            out.needs_fleet = true;
            return Next::Stops;
        }
    }
    let name = wave_name(policy, n);
    out.notes.push(Note::normal(
        "WaveStarted",
        format!(
            "rollout of {target}: wave {name} moves {} Gateway(s)",
            gateways.len()
        ),
    ));
    let exempt = gateways
        .iter()
        .filter(|k| {
            seen.by_key
                .get(k.as_str())
                .is_some_and(|m| m.health != Health::Ready)
        })
        .cloned()
        .collect();
    r.waves.push(WaveStatus {
        name,
        gateways,
        exempt,
        released: 0,
        started_at: Some(Time(now)),
        healthy_since: None,
        passed_at: None,
        state: Some(WaveState::Releasing),
    });
    Next::Started
}

/// The named state of the current wave `w` after it was judged (`held`: the issuance
/// budget holds some of it back).
fn wave_state(verdict: &WaveVerdict, w: &WaveStatus, held: bool) -> WaveState {
    match verdict {
        WaveVerdict::Passed => WaveState::Passed,
        WaveVerdict::Halts(_) => WaveState::Failed,
        WaveVerdict::Waits if held => WaveState::BudgetHeld,
        WaveVerdict::Waits if (w.released as usize) < w.gateways.len() => WaveState::Releasing,
        WaveVerdict::Waits if w.healthy_since.is_some() => WaveState::Baking,
        WaveVerdict::Waits => WaveState::Waiting,
    }
}

/// The rollout toward `target`: the one under way (`old`, when it goes there), else a new
/// one, whose way back is where a rollout that did not complete started from, else the
/// `current` revision.
fn rollout_toward(
    target: &str,
    current: Option<&str>,
    old: Option<&RolloutStatus>,
) -> RolloutStatus {
    match old.filter(|o| o.revision == target) {
        Some(o) => o.clone(),
        None => {
            // Where a rollout that did not complete started from stays the way back.
            let from = match old {
                Some(o) if o.phase != RolloutPhase::Complete => o.from.clone(),
                _ => current.map(str::to_owned),
            };
            RolloutStatus {
                revision: target.to_owned(),
                from: from.filter(|f| f != target),
                phase: RolloutPhase::Progressing,
                waves: Vec::new(),
                message: String::new(),
                hold: None,
                // The budget is the class's: what earlier rollouts ordered still counts.
                issued: old.map(|o| o.issued.clone()).unwrap_or_default(),
                budget_wait: None,
            }
        }
    }
}

#[cfg(test)]
mod tests;
