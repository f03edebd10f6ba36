//! The controller's state as the metrics' gauges show it, summed over its clusters and
//! read at scrape time: what the last reconcile of each Gateway still in the snapshot reported (its `Programmed`
//! condition, replacements under way and stuck, children whose deletion hangs), and the
//! child kinds watched.

use crate::telemetry::{State, StateSource};

use super::cluster::Cluster;
use super::runner::Runner;

impl StateSource for Runner {
    fn state(&self) -> State {
        let mut state = State::default();
        for cluster in self.clusters() {
            cluster.add_state(&mut state);
        }
        state
    }
}

impl Cluster {
    /// Adds this cluster's share to `state`.
    fn add_state(&self, state: &mut State) {
        // (key, programmed, rollouts, stuck rollouts, stuck deletions) per Gateway, read
        // under one lock at a time.
        let reported: Vec<_> = self.memory.collect(|k, m| {
            let rep = m.reported.as_ref()?;
            let (status, reason) = rep
                .programmed
                .split_once('/')
                .unwrap_or(("Unknown", "Unknown"));
            Some((
                k.clone(),
                (status.to_owned(), reason.to_owned()),
                rep.rollouts.len(),
                rep.rollouts.values().filter(|p| p.stuck()).count(),
                rep.stuck_deletions.len(),
            ))
        });
        if let Ok(snap) = self.snapshot.read() {
            // A Gateway that is gone keeps its last report; it counts no more.
            for (key, programmed, rollouts, stuck, deletions) in reported {
                if snap.gateway(&key).is_none() {
                    continue;
                }
                *state.gateways.entry(programmed).or_default() += 1;
                state.rollouts_in_progress += rollouts as u64;
                state.rollouts_stuck += stuck as u64;
                state.deletions_stuck += deletions as u64;
            }
        }
        state.watched_child_kinds += self.kinds.watched().len() as u64;
    }
}
