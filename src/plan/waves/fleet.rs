//! Waves across the members of a fleet: a wave with a `clusterSelector` takes Gateways only
//! in the member clusters whose ClusterProfile labels it selects, and no later wave starts,
//! in any member rolling out the same revision, until every member it selects has passed
//! it. Each member keeps its own blueprint and rollout (its status, its revisions); this
//! part judges, from how the rollout of the same blueprint stands in the other members
//! (read by the shell), whether a wave has passed across the fleet.

use std::collections::BTreeMap;

use super::select::{selects, wave_name};
use crate::api::{RolloutPhase, RolloutPolicy};

/// What a rollout step knows of the fleet.
#[derive(Clone, Debug, Default)]
pub struct FleetView {
    /// The ClusterProfile labels of the member cluster the rollout runs in (`None`: not a
    /// member, such as the hub or a cluster run without `--fleet`: a wave with a
    /// `clusterSelector` takes none of its Gateways).
    pub labels: Option<BTreeMap<String, String>>,
    /// The other members of the fleet, each with how its rollout of the same blueprint
    /// stands (read only when the policy has a wave with a `clusterSelector`).
    pub others: Vec<Elsewhere>,
}

/// Another member, as a rollout step sees it.
#[derive(Clone, Debug)]
pub struct Elsewhere {
    /// The member (`namespace/name` of its ClusterProfile).
    pub member: String,
    /// Its ClusterProfile labels.
    pub labels: BTreeMap<String, String>,
    /// How the same blueprint's rollout stands there.
    pub stands: Stands,
}

/// How a blueprint's rollout stands in another member.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Stands {
    /// The member has no such blueprint: it takes no part in the rollout.
    Absent,
    /// It could not be read (the member not served, unreachable, ...): why.
    Unread(String),
    /// Its blueprint's spec is another revision than the one rolled out here (the change
    /// has not reached it yet, or it is ahead), or its status does not say yet.
    Elsewhere,
    /// It has the same revision, without a rollout policy: every Gateway took it at once.
    AllAtOnce,
    /// It rolls out the same revision.
    Rolling {
        /// Where its rollout stands.
        phase: RolloutPhase,
        /// The waves it released, in order (the last one is the current): each one's name
        /// and whether it is marked passed (`passedAt`).
        waves: Vec<(String, bool)>,
        /// Its rollout's message.
        message: String,
    },
}

/// Whether wave `i` of `policy` has passed across the fleet, as `view` says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Across {
    /// Passed everywhere it selects (or it selects no cluster).
    Passed,
    /// Not yet: what it waits for.
    Waits(String),
    /// It halted in a member: why.
    Halted(String),
}

/// Whether this cluster's Gateways can be taken by wave `i` (its `clusterSelector`, if
/// any, selects this member).
pub(super) fn takes_here(policy: &RolloutPolicy, i: usize, view: &FleetView) -> bool {
    policy
        .waves
        .get(i)
        .and_then(|w| w.cluster_selector.as_ref())
        .is_none_or(|s| view.labels.as_ref().is_some_and(|l| selects(Some(s), l)))
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
    let name = wave_name(policy, i);
    let mut waiting = Vec::new();
    for o in view.others.iter().filter(|o| selects(Some(sel), &o.labels)) {
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
