//! The ListenerSet merge: which ListenerSets naming a Gateway as parent it allows, their
//! listeners added after its own in precedence order, and each set's `Accepted` once the
//! Gateway's own is known.

use gateway_api::apis::standard::gateways::{Gateway, GatewayListeners};

use super::{ClassKinds, ListenerEval, ListenerSetEval, evaluate_listener};
use crate::gateway::conditions::{Cond, reasons, types};
use crate::gateway::listenersets::{self, ListenerSetView};
use crate::gateway::lookup::Lookup;

/// A Gateway's listeners and those of the ListenerSets it allows, in order, with where each
/// comes from.
#[derive(Default)]
pub(super) struct Merged {
    /// Every listener, judged on its own: the Gateway's, then each allowed set's.
    pub(super) listeners: Vec<ListenerEval>,
    /// The spec of each ListenerSet listener (those after the Gateway's own).
    pub(super) specs: Vec<GatewayListeners>,
    /// The namespace each listener belongs to.
    pub(super) homes: Vec<String>,
    /// Each listener's source in precedence order: 0 for the Gateway, `i + 1` for the
    /// `i`th ListenerSet.
    pub(super) ranks: Vec<usize>,
}

/// Judges the ListenerSets naming `gw` as parent, in precedence order, and adds the
/// listeners of those it allows to `merged`. Returns every set's verdict (an allowed set is
/// accepted for now: see [`judge`]) and the indexes of the allowed ones.
pub(super) fn merge(
    gw: &Gateway,
    sets: &[&ListenerSetView],
    lookup: &dyn Lookup,
    kinds: &ClassKinds,
    merged: &mut Merged,
) -> (Vec<ListenerSetEval>, Vec<usize>) {
    let mut ordered: Vec<&ListenerSetView> = sets.to_vec();
    listenersets::sort_by_precedence(&mut ordered);
    let mut set_evals = Vec::new();
    let mut allowed_sets = Vec::new();
    for (i, set) in ordered.iter().enumerate() {
        let verdict = listenersets::allowed(gw, &set.namespace, lookup)
            .and_then(|()| set.unreadable.clone().map_or(Ok(()), Err));
        if let Err(why) = &verdict {
            let reason = if set.unreadable.is_some() {
                reasons::INVALID
            } else {
                reasons::NOT_ALLOWED
            };
            set_evals.push(ListenerSetEval {
                namespace: set.namespace.clone(),
                name: set.name.clone(),
                generation: set.generation,
                accepted: Cond::f(types::ACCEPTED, reason, why),
            });
            continue;
        }
        allowed_sets.push(set_evals.len());
        set_evals.push(ListenerSetEval {
            namespace: set.namespace.clone(),
            name: set.name.clone(),
            generation: set.generation,
            accepted: Cond::t(
                types::ACCEPTED,
                reasons::ACCEPTED,
                "the ListenerSet is accepted",
            ),
        });
        for l in &set.listeners {
            let mut e = evaluate_listener(l, &set.namespace, lookup, kinds, listenersets::KIND);
            e.set = Some(set.key());
            merged.listeners.push(e);
            merged.specs.push(l.clone());
            merged.homes.push(set.namespace.clone());
            merged.ranks.push(i + 1);
        }
    }
    (set_evals, allowed_sets)
}

/// The `Accepted` of each allowed set (`allowed_sets`, indexes into `set_evals`), once the
/// Gateway's `accepted` is known; then the listeners of a set that is not attached take no
/// routes.
pub(super) fn judge(
    accepted: &Cond,
    set_evals: &mut [ListenerSetEval],
    allowed_sets: &[usize],
    listeners: &mut [ListenerEval],
) {
    // A set the Gateway allows: accepted when the Gateway is and one of its listeners is
    // valid.
    for &i in allowed_sets {
        let set = &mut set_evals[i];
        let key = (set.namespace.clone(), set.name.clone());
        let mine: Vec<&ListenerEval> = listeners
            .iter()
            .filter(|l| l.set.as_ref() == Some(&key))
            .collect();
        set.accepted = if !accepted.status.is_true() {
            Cond::f(
                types::ACCEPTED,
                reasons::PARENT_NOT_ACCEPTED,
                &format!("its parent Gateway is not accepted: {}", accepted.message),
            )
        } else if !mine.iter().any(|l| l.is_valid()) {
            Cond::f(
                types::ACCEPTED,
                reasons::LISTENERS_NOT_VALID,
                "no listener is valid",
            )
        } else if let Some(bad) = mine.iter().find(|l| !l.is_valid()) {
            let n = mine.iter().filter(|l| !l.is_valid()).count();
            Cond::t(
                types::ACCEPTED,
                reasons::LISTENERS_NOT_VALID,
                &format!("{n} listener(s) are not valid, among them {:?}", bad.name),
            )
        } else {
            set.accepted.clone()
        };
    }
    // Listeners of a set that is not attached take no routes.
    let detached: Vec<(String, String)> = set_evals
        .iter()
        .filter(|s| !s.attached())
        .map(|s| (s.namespace.clone(), s.name.clone()))
        .collect();
    for l in listeners.iter_mut() {
        if l.set.as_ref().is_some_and(|k| detached.contains(k)) && l.accepted.status.is_true() {
            l.accepted = Cond::f(
                types::ACCEPTED,
                reasons::PARENT_NOT_ACCEPTED,
                "its ListenerSet is not accepted",
            );
        }
    }
}
