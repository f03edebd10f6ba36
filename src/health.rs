//! Readiness: the start-up steps that must succeed before the controller is ready
//! (leader election set up, the first list of each primary watch), which of them fail now
//! and why, and failures counted per step and kind. `/readyz` and the metrics read it;
//! the controller writes it (`controller::startup` says what is retried and how).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;

/// A start-up step that has not succeeded yet, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pending {
    /// The last failure's kind (`controller::startup::failure_kind`).
    pub reason: String,
    /// The last failure's message.
    pub message: String,
    /// Failures so far.
    pub failures: u64,
}

/// Start-up steps: those still failing (what `/readyz` reports), and failures counted by
/// (step, reason) for the metric. Steps are named as the user reads them: `leader
/// election on Lease ns/name`, `watch Gateway`.
#[derive(Debug, Default)]
pub struct Steps {
    pending: Mutex<BTreeMap<String, Pending>>,
    /// Steps that were registered and have not succeeded yet (failed or not).
    waiting: Mutex<BTreeSet<String>>,
    errors: Mutex<BTreeMap<(String, String), u64>>,
}

impl Steps {
    /// Registers a step that must succeed before the controller is ready.
    pub fn begin(&self, step: &str) {
        if let Ok(mut w) = self.waiting.lock() {
            w.insert(step.to_owned());
        }
    }

    /// Records a failure of `step`. Returns true when it should be logged: the step's
    /// first failure, or a failure of another kind than the last one.
    pub fn failed(&self, step: &str, reason: &str, message: &str) -> bool {
        if let Ok(mut e) = self.errors.lock() {
            *e.entry((step.to_owned(), reason.to_owned())).or_default() += 1;
        }
        let Ok(mut p) = self.pending.lock() else {
            return true;
        };
        let entry = p.entry(step.to_owned()).or_insert_with(|| Pending {
            reason: String::new(),
            message: String::new(),
            failures: 0,
        });
        let log = entry.reason != reason;
        entry.reason = reason.to_owned();
        entry.message = message[..message.floor_char_boundary(512)].to_owned();
        entry.failures += 1;
        log
    }

    /// Records that `step` succeeded. Returns how many failures it had before (0: none,
    /// or it had succeeded already).
    pub fn succeeded(&self, step: &str) -> u64 {
        if let Ok(mut w) = self.waiting.lock() {
            w.remove(step);
        }
        self.pending
            .lock()
            .ok()
            .and_then(|mut p| p.remove(step))
            .map_or(0, |p| p.failures)
    }

    /// The steps failing now, with their last failure.
    #[must_use]
    pub fn pending(&self) -> BTreeMap<String, Pending> {
        self.pending.lock().map(|p| p.clone()).unwrap_or_default()
    }

    /// How many registered steps have not succeeded yet.
    #[must_use]
    pub fn waiting(&self) -> usize {
        self.waiting.lock().map_or(0, |w| w.len())
    }

    /// Failures by (step, reason), for `gatewright_startup_errors`.
    #[must_use]
    pub fn errors(&self) -> BTreeMap<(String, String), u64> {
        self.errors.lock().map(|e| e.clone()).unwrap_or_default()
    }

    /// What `/readyz` says while not ready: one line per step not done yet, with its last
    /// failure if it failed.
    #[must_use]
    pub fn describe(&self) -> String {
        let pending = self.pending();
        let waiting = self.waiting.lock().map(|w| w.clone()).unwrap_or_default();
        waiting
            .iter()
            .map(|step| match pending.get(step) {
                Some(p) => format!(
                    "{step}: {} ({} failures, retrying): {}\n",
                    p.reason, p.failures, p.message
                ),
                None => format!("{step}: in progress\n"),
            })
            .collect()
    }

    /// Whether every registered step has succeeded.
    #[must_use]
    pub fn done(&self) -> bool {
        self.waiting() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_log_once_per_kind_and_clear_on_success() {
        let s = Steps::default();
        s.begin("watch Gateway");
        s.begin("leader election on Lease ns/l");
        assert_eq!(s.waiting(), 2);
        assert!(s.failed("leader election on Lease ns/l", "Forbidden", "no"));
        assert!(
            !s.failed("leader election on Lease ns/l", "Forbidden", "no"),
            "the same kind again is not logged"
        );
        assert!(
            s.failed("leader election on Lease ns/l", "Unreachable", "gone"),
            "another kind is"
        );
        assert!(
            s.describe().contains(
                "leader election on Lease ns/l: Unreachable (3 failures, retrying): gone\n"
            )
        );
        assert!(s.describe().contains("watch Gateway: in progress\n"));
        assert_eq!(
            s.errors()
                .get(&(
                    "leader election on Lease ns/l".to_owned(),
                    "Forbidden".to_owned()
                ))
                .copied(),
            Some(2)
        );
        assert_eq!(s.succeeded("leader election on Lease ns/l"), 3);
        assert!(s.pending().is_empty());
        assert_eq!(s.waiting(), 1, "the watch has not listed yet");
        assert_eq!(s.succeeded("watch Gateway"), 0);
        assert_eq!(s.waiting(), 0);
        assert!(s.done());
        assert_eq!(s.describe(), "");
        assert!(
            s.failed("leader election on Lease ns/l", "Forbidden", "again"),
            "a new outage is logged again"
        );
    }
}
