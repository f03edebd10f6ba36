//! Which Gateways each wave takes: in key order, those that neither run the newest
//! revision nor are pinned and that its selectors match, as many as its `count` or
//! `percent` allows; the last wave, `rest`, takes what no listed wave took.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

use super::class_gateway::ClassGateway;
use super::outcome::FleetView;
use crate::api::{RolloutPolicy, Wave};

/// The waves a rollout of `target` would make of `members` (of a cluster `view` places in
/// the fleet) if every gate passed: each wave's name and Gateways (what `gatewright diff`
/// shows of a blueprint change).
#[must_use]
pub fn preview(
    policy: &RolloutPolicy,
    target: &str,
    members: &[ClassGateway],
    view: &FleetView,
) -> Vec<(String, Vec<String>)> {
    let mut taken: std::collections::BTreeSet<String> = std::collections::BTreeSet::new();
    let mut out = Vec::new();
    for n in 0..=policy.waves.len() {
        let g = members_of(policy, n, target, members, view, &|k| taken.contains(k));
        if g.is_empty() {
            continue;
        }
        taken.extend(g.iter().cloned());
        out.push((wave_name(policy, n), g));
    }
    out
}

pub(super) fn selects(s: Option<&LabelSelector>, labels: &BTreeMap<String, String>) -> bool {
    use crate::gateway::LabelSelectorLike;
    s.is_none_or(|s| s.matches(labels))
}

/// The name of wave `i` (from 0) of `policy` (`rest` past its waves).
pub(super) fn wave_name(policy: &RolloutPolicy, i: usize) -> String {
    policy.waves.get(i).map_or_else(
        || "rest".to_owned(),
        |w| w.name.clone().unwrap_or_else(|| format!("wave-{}", i + 1)),
    )
}

/// The Gateways wave `i` takes among `members` (of the cluster `view` places in the fleet)
/// not taken by an earlier wave.
pub(super) fn members_of(
    policy: &RolloutPolicy,
    i: usize,
    target: &str,
    members: &[ClassGateway],
    view: &FleetView,
    taken: &dyn Fn(&str) -> bool,
) -> Vec<String> {
    if !takes_here(policy, i, view) {
        return Vec::new();
    }
    let candidates = members
        .iter()
        .filter(|m| m.pinned_to.is_none() && !m.on(target) && !taken(&m.key));
    let Some(w) = policy.waves.get(i) else {
        return candidates.map(|m| m.key.clone()).collect();
    };
    let matching = candidates.filter(|m| {
        selects(w.selector.as_ref(), &m.labels)
            && selects(w.namespace_selector.as_ref(), &m.namespace_labels)
    });
    let size = match (w.count, w.percent) {
        (Some(n), _) => usize::try_from(n).unwrap_or(usize::MAX),
        (None, Some(p)) => (members.len() * usize::try_from(p).unwrap_or(100)).div_ceil(100),
        (None, None) => usize::MAX,
    };
    matching.take(size).map(|m| m.key.clone()).collect()
}

pub(super) fn wave_spec(policy: &RolloutPolicy, i: usize) -> Wave {
    policy.waves.get(i).cloned().unwrap_or_default()
}

/// Whether this cluster's Gateways can be taken by wave `i` (its `clusterSelector`, if
/// any, selects this member).
fn takes_here(policy: &RolloutPolicy, i: usize, view: &FleetView) -> bool {
    policy
        .waves
        .get(i)
        .and_then(|w| w.cluster_selector.as_ref())
        .is_none_or(|s| view.labels.as_ref().is_some_and(|l| selects(Some(s), l)))
}
