//! Waves across the members of a fleet: a wave with a `clusterSelector` takes Gateways only
//! in the member clusters whose ClusterProfile labels it selects, and no later wave starts,
//! in any member rolling out the same revision, until every member it selects has passed
//! it. Each member keeps its own blueprint and rollout (its status, its revisions); this
//! part judges, from how the rollout of the same blueprint stands in the other members
//! (read by the shell), whether a wave has passed across the fleet.

use super::outcome::{FleetView, Stands};
use super::select::{selects, wave_name};
use crate::api::{RolloutPhase, RolloutPolicy};

/// Whether wave `i` of `policy` has passed across the fleet, as `view` says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Across {
    /// Passed everywhere it selects (or it selects no cluster).
    Passed,
    /// Not yet: what it waits for.
    Waits(String),
    /// It halted in a member: why.
    Halted(String),
    /// The other members were not read: read them and step again.
    Unread,
}

/// Whether every wave before `next` that has a `clusterSelector` has passed in the other
/// members it selects. The first that has not decides.
pub(super) fn before(policy: &RolloutPolicy, next: usize, view: &FleetView) -> Across {
    for i in 0..next.min(policy.waves.len()) {
        let verdict = wave(policy, i, view);
        if verdict != Across::Passed {
            return verdict;
        }
    }
    Across::Passed
}

/// Whether wave `i` has passed in the other members it selects.
fn wave(policy: &RolloutPolicy, i: usize, view: &FleetView) -> Across {
    let Some(sel) = policy
        .waves
        .get(i)
        .and_then(|w| w.cluster_selector.as_ref())
    else {
        return Across::Passed;
    };
    let Some(others) = &view.others else {
        return Across::Unread;
    };
    let name = wave_name(policy, i);
    let mut waiting = Vec::new();
    for o in others.iter().filter(|o| selects(Some(sel), &o.labels)) {
        match &o.stands {
            Stands::Absent | Stands::AllAtOnce => {}
            Stands::Unread(why) => waiting.push(format!("{} ({why})", o.member)),
            Stands::Elsewhere => {
                waiting.push(format!("{} (another revision there)", o.member));
            }
            Stands::Rolling {
                phase,
                waves,
                message,
            } => {
                if *phase == RolloutPhase::Complete || passed_there(policy, i, waves) {
                    continue;
                }
                if matches!(phase, RolloutPhase::Halted | RolloutPhase::RolledBack) {
                    return Across::Halted(format!(
                        "wave {name} halted in member {}: {message}",
                        o.member
                    ));
                }
                waiting.push(o.member.clone());
            }
        }
    }
    if waiting.is_empty() {
        Across::Passed
    } else {
        Across::Waits(format!(
            "waits for wave {name} to pass in member(s) {}",
            waiting.join(", ")
        ))
    }
}

/// Whether a member that released `waves` has passed wave `i`: it marked it passed, or
/// released a later wave (by this policy's names; a wave that took none of its Gateways is
/// skipped there).
fn passed_there(policy: &RolloutPolicy, i: usize, waves: &[(String, bool)]) -> bool {
    let name = wave_name(policy, i);
    waves.iter().any(|(w, passed)| {
        (*passed && *w == name)
            || (i + 1..=policy.waves.len()).any(|later| wave_name(policy, later) == *w)
    })
}

/// How the rollout of a blueprint stands in another member, from its object there
/// (`object`), for the revision of spec hash `hash` rolled out here.
#[must_use]
pub fn stands(object: &crate::api::GatewayClassBlueprint, hash: &str) -> Stands {
    if object.spec.revision_hash() != hash {
        return Stands::Elsewhere;
    }
    let Some(status) = object
        .status
        .as_ref()
        .filter(|s| s.observed_generation == object.metadata.generation)
    else {
        return Stands::Elsewhere;
    };
    if object.spec.rollout_policy.is_none() {
        return Stands::AllAtOnce;
    }
    match &status.rollout {
        Some(r) if status.current_revision.as_deref() == Some(r.revision.as_str()) => {
            Stands::Rolling {
                phase: r.phase,
                waves: r
                    .waves
                    .iter()
                    .map(|w| (w.name.clone(), w.passed_at.is_some()))
                    .collect(),
                message: r.message.clone(),
            }
        }
        _ => Stands::Elsewhere,
    }
}
