//! What stops a rollout or holds it: `rolloutPolicy.paused`, a wave's gate that does not
//! compile (both hold it until they no longer say so), and a halt, which rolls the moved
//! Gateways back with `onFailure: Rollback`.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;

use super::class_gateway::ClassGateway;
use super::outcome::{Note, Step};
use crate::api::{HoldReason, OnFailure, RolloutPhase, RolloutPolicy, RolloutStatus};

/// Pauses the rollout while `rolloutPolicy.paused` says so (`true`: paused, nothing more
/// to step), and resumes a paused one once it does not (the current wave's deadline
/// starts again).
pub(super) fn paused(
    policy: &RolloutPolicy,
    r: &mut RolloutStatus,
    target: &str,
    now: Timestamp,
    out: &mut Step,
) -> bool {
    if policy.paused {
        // Nothing is moved while paused: nothing waits on the budget.
        r.budget_wait = None;
        r.hold = Some(HoldReason::Paused);
        if r.phase != RolloutPhase::Paused {
            r.phase = RolloutPhase::Paused;
            r.message = "paused (rolloutPolicy.paused)".into();
            out.notes.push(Note::normal(
                "RolloutPaused",
                format!("rollout of {target} paused"),
            ));
        }
        return true;
    }
    if r.phase == RolloutPhase::Paused {
        // Resumed: the current wave's deadline starts again.
        r.phase = RolloutPhase::Progressing;
        r.hold = None;
        if let Some(w) = r.waves.last_mut() {
            w.started_at = Some(Time(now));
        }
        out.notes.push(Note::normal(
            "RolloutResumed",
            format!("rollout of {target} resumed"),
        ));
    }
    false
}

/// Holds the rollout while a wave's gate does not compile (`true`: nothing to step):
/// nothing is moved and no deadline runs until the policy is mended, which steps it again.
pub(super) fn broken_gate(
    policy: &RolloutPolicy,
    r: &mut RolloutStatus,
    now: Timestamp,
    out: &mut Step,
) -> bool {
    const HELD: &str = "; nothing is moved until it is mended";
    let Some(why) = policy.waves.iter().enumerate().find_map(|(i, w)| {
        let expr = w.gate.as_deref()?;
        crate::render::engine::check_gate(expr)
            .err()
            .map(|e| format!("rolloutPolicy.waves[{i}].gate does not compile: {e}{HELD}"))
    }) else {
        if r.hold == Some(HoldReason::GateInvalid) {
            r.hold = None;
            if let Some(w) = r.waves.last_mut() {
                // Mended: the current wave's deadline starts again.
                w.started_at = Some(Time(now));
            }
        }
        return false;
    };
    r.budget_wait = None;
    r.hold = Some(HoldReason::GateInvalid);
    if r.message != why {
        out.notes
            .push(Note::warning("RolloutGateInvalid", why.clone()));
        r.message = why;
    }
    out.again = None;
    true
}

pub(super) fn halt(
    policy: &RolloutPolicy,
    r: &mut RolloutStatus,
    why: &str,
    members: &[ClassGateway],
    out: &mut Step,
) {
    let rollback = policy.on_failure == Some(OnFailure::Rollback) && r.from.is_some();
    r.message = why.to_owned();
    r.hold = None;
    // Nothing more is moved. (A rollback is not held by the budget: going back to what
    // worked comes first.)
    r.budget_wait = None;
    if rollback {
        r.phase = RolloutPhase::RolledBack;
        out.moved.extend(
            r.waves
                .iter()
                .flat_map(|w| {
                    w.gateways
                        .iter()
                        .take(usize::try_from(w.released).unwrap_or(usize::MAX))
                })
                .cloned(),
        );
        // New Gateways took the newest too: they go back as well.
        out.moved.extend(
            members
                .iter()
                .filter(|m| m.revision.as_deref() == Some(r.revision.as_str()))
                .map(|m| m.key.clone()),
        );
        out.notes.push(Note::warning(
            "RolledBack",
            format!(
                "rollout of {} rolled back to {}: {why}",
                r.revision,
                r.from.as_deref().unwrap_or_default()
            ),
        ));
    } else {
        r.phase = RolloutPhase::Halted;
        out.notes.push(Note::warning(
            "RolloutHalted",
            format!("rollout of {} halted: {why}", r.revision),
        ));
    }
    out.again = None;
}
