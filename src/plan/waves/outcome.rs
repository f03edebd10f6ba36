//! What a rollout step sees (the revision rolled out, the Gateways by key, the time, the
//! fleet) and what it decides (the new status, Events, the Gateways it moved, when to step
//! again): the types every part of the step shares.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;

use super::class_gateway::ClassGateway;
use crate::api::{RolloutPhase, RolloutStatus};

/// An Event the step asks for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Note {
    /// A Warning Event (else Normal).
    pub warning: bool,
    /// Its reason (`RolloutHalted`, `RolloutComplete`, ...).
    pub reason: &'static str,
    /// Its message.
    pub message: String,
}

impl Note {
    /// A Normal Event.
    pub(super) fn normal(reason: &'static str, message: String) -> Self {
        Self {
            warning: false,
            reason,
            message,
        }
    }

    /// A Warning Event.
    pub(super) fn warning(reason: &'static str, message: String) -> Self {
        Self {
            warning: true,
            reason,
            message,
        }
    }
}

/// What one step decided.
#[derive(Clone, Debug, Default)]
pub struct Step {
    /// The new rollout status.
    pub status: Option<RolloutStatus>,
    /// Events to send.
    pub notes: Vec<Note>,
    /// Gateways whose revision the step changed (to plan again).
    pub moved: Vec<String>,
    /// When to step again (a bake time or a deadline).
    pub again: Option<Duration>,
    /// The step needs to know how the rollout stands in the other members of the fleet
    /// ([`FleetView::others`] was not read): read them and step again, this step's
    /// decisions aside.
    pub needs_fleet: bool,
}

pub(super) fn seconds_since(t: Option<&Time>, now: Timestamp) -> u64 {
    t.map_or(0, |t| {
        u64::try_from(now.duration_since(t.0).as_secs()).unwrap_or(0)
    })
}

/// What the step sees: the revision rolled out, the Gateways by key, the time.
pub(super) struct Seen<'a> {
    pub(super) target: &'a str,
    pub(super) by_key: BTreeMap<&'a str, &'a ClassGateway>,
    pub(super) now: Timestamp,
}

/// What a rollout step knows of the fleet. The default: a cluster alone (no fleet, no
/// other member).
#[derive(Clone, Debug)]
pub struct FleetView {
    /// The ClusterProfile labels of the member cluster the rollout runs in (`None`: not a
    /// member, such as the hub or a cluster run without `--fleet`: a wave with a
    /// `clusterSelector` takes none of its Gateways).
    pub labels: Option<BTreeMap<String, String>>,
    /// The other members of the fleet, each with how its rollout of the same blueprint
    /// stands; `None`: not read yet (reading costs a request per member, so the shell
    /// reads them only when a step asks, [`Step::needs_fleet`]).
    pub others: Option<Vec<Elsewhere>>,
}

impl Default for FleetView {
    fn default() -> Self {
        Self {
            labels: None,
            others: Some(Vec::new()),
        }
    }
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
