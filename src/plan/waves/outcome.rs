//! What a rollout step sees (the revision rolled out, the Gateways by key, the time) and
//! what it decides (the new status, Events, the Gateways it moved, when to step again):
//! the types every part of the step shares.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;

use super::member::Member;
use crate::api::RolloutStatus;

/// An Event the step asks for: warning or not, reason, message.
pub type Note = (bool, &'static str, String);

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
}

pub(super) fn seconds_since(t: Option<&Time>, now: Timestamp) -> u64 {
    t.map_or(0, |t| {
        u64::try_from(now.duration_since(t.0).as_secs()).unwrap_or(0)
    })
}

/// What the step sees: the revision rolled out, the Gateways by key, the time.
pub(super) struct Seen<'a> {
    pub(super) target: &'a str,
    pub(super) by_key: BTreeMap<&'a str, &'a Member>,
    pub(super) now: Timestamp,
}
