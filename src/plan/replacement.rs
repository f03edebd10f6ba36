//! How long make-before-break replacements have taken: which are stuck past their
//! timeout, the `gatewright.dev/Rollout` condition that says so, and the Events that mark
//! each step. The planner says where each replacement stands ([`Replacement`]); these
//! functions add the time, given as an argument (the caller's clock), so they stay pure.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;

use super::set::{Replacement, ReplacementPhase};
use super::status::rollout_cond;
use crate::gateway::conditions::{Cond, reasons, types};

/// Where a replacement stands as reported: the planner's phase, with the stuck ones
/// decided. `timeoutSeconds` bounds the whole replacement, from the new version's
/// creation until the old one can go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Progress {
    /// The new version is not ready yet, within its time.
    Waiting,
    /// The new version is not ready in time.
    Stuck,
    /// The new version is ready; what reads it is switching, within its time.
    Switching,
    /// The new version is ready, but what reads it is not done in time.
    SwitchStuck,
    /// Everything uses the new version; the old one goes.
    Finishing,
}

impl Progress {
    /// Whether the replacement has taken longer than its timeout.
    #[must_use]
    pub fn stuck(self) -> bool {
        matches!(self, Self::Stuck | Self::SwitchStuck)
    }

    fn switched(self) -> bool {
        matches!(self, Self::Switching | Self::SwitchStuck | Self::Finishing)
    }
}

/// A step of a replacement worth an Event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RolloutEvent {
    /// The Event reason (`RolloutStarted`, ...).
    pub reason: &'static str,
    /// Whether it is a Warning.
    pub warning: bool,
    /// The note.
    pub message: String,
}

/// The key of a replacement: `template=to` (`template (object name)=to` per object).
fn rollout_key(r: &Replacement) -> String {
    format!("{}={}", r.label(), r.to)
}

/// Seconds from an RFC 3339 time to `now`, if it parses.
#[must_use]
pub fn seconds_since(t: &str, now: Timestamp) -> Option<i64> {
    let then: Timestamp = t.parse().ok()?;
    Some(now.as_second() - then.as_second())
}

/// Each replacement's progress by key at `now`, and when to look again to catch the
/// earliest deadline.
#[must_use]
pub fn progress(
    rollouts: &[&Replacement],
    now: Timestamp,
) -> (BTreeMap<String, Progress>, Option<Duration>) {
    let mut out = BTreeMap::new();
    let mut requeue: Option<Duration> = None;
    for r in rollouts {
        let (on_time, late) = match r.phase {
            ReplacementPhase::WaitingForNew => (Progress::Waiting, Progress::Stuck),
            ReplacementPhase::Switching => (Progress::Switching, Progress::SwitchStuck),
            ReplacementPhase::Finishing => {
                out.insert(rollout_key(r), Progress::Finishing);
                continue;
            }
        };
        let waited = waited(r, now);
        let left = i64::try_from(r.timeout_seconds).unwrap_or(i64::MAX) - waited;
        let p = if left < 0 {
            late
        } else {
            let d = Duration::from_secs(u64::try_from(left).unwrap_or(0) + 1);
            requeue = Some(requeue.map_or(d, |q| q.min(d)));
            on_time
        };
        out.insert(rollout_key(r), p);
    }
    (out, requeue)
}

fn waited(r: &Replacement, now: Timestamp) -> i64 {
    r.started
        .as_deref()
        .and_then(|t| seconds_since(t, now))
        .unwrap_or(0)
}

/// The `gatewright.dev/Rollout` condition, with the stuck ones (by `progress`) named.
#[must_use]
pub fn condition(
    rollouts: &[&Replacement],
    progress: &BTreeMap<String, Progress>,
    now: Timestamp,
) -> Cond {
    let stuck: Vec<String> = rollouts
        .iter()
        .filter_map(|r| {
            let p = *progress.get(&rollout_key(r))?;
            let waited = waited(r, now);
            let old = r.from.as_deref().unwrap_or("-");
            match p {
                Progress::Stuck => Some(format!(
                    "template {}: version {} is not ready after {waited}s (timeout {}s): {}; a further change supersedes it",
                    r.label(), r.to, r.timeout_seconds, r.waiting_for
                )),
                Progress::SwitchStuck => Some(format!(
                    "template {}: not done after {waited}s (timeout {}s): {}; version {old} is kept until then",
                    r.label(), r.timeout_seconds, r.waiting_for
                )),
                _ => None,
            }
        })
        .collect();
    if stuck.is_empty() {
        rollout_cond(rollouts.iter().copied())
    } else {
        Cond::f(types::ROLLOUT, reasons::STUCK, &stuck.join("; "))
    }
}

/// Events for the replacements that started, switched, got stuck, finished or were
/// superseded between two reports.
#[must_use]
pub fn events(
    before: &BTreeMap<String, Progress>,
    now: &BTreeMap<String, Progress>,
) -> Vec<RolloutEvent> {
    let split = |k: &str| {
        k.rsplit_once('=')
            .map(|(t, v)| (t.to_owned(), v.to_owned()))
            .unwrap_or_default()
    };
    let event = |reason, warning, message| RolloutEvent {
        reason,
        warning,
        message,
    };
    let switched = |p: Option<&Progress>| p.is_some_and(|p| p.switched());
    let mut out = Vec::new();
    for (k, p) in now {
        let (t, v) = split(k);
        let old = before.get(k);
        if old.is_none() {
            out.push(event(
                "RolloutStarted",
                false,
                format!("template {t}: creating version {v} beside the serving one"),
            ));
        }
        if switched(Some(p)) && !switched(old) {
            out.push(event(
                "RolloutSwitched",
                false,
                format!("template {t}: version {v} is ready; what reads it now uses it"),
            ));
        }
        if p.stuck() && !old.is_some_and(|o| o.stuck()) {
            let message = if *p == Progress::Stuck {
                format!(
                    "template {t}: version {v} is not ready in time; the old version keeps serving"
                )
            } else {
                format!(
                    "template {t}: version {v} is ready, but what reads it is not done in time; the old version is kept"
                )
            };
            out.push(event("RolloutStuck", true, message));
        }
    }
    for k in before.keys().filter(|k| !now.contains_key(*k)) {
        let (t, v) = split(k);
        if now.keys().any(|n| split(n).0 == t) {
            out.push(event(
                "RolloutSuperseded",
                false,
                format!("template {t}: version {v} is superseded by a newer change"),
            ));
        } else {
            out.push(event(
                "RolloutFinished",
                false,
                format!("template {t}: version {v} serves; the old version is deleted"),
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    const NOW: &str = "2026-01-01T00:10:00Z";

    fn replacement(phase: ReplacementPhase, age_seconds: i64, timeout_seconds: u64) -> Replacement {
        let started = at(NOW)
            .checked_sub(k8s_openapi::jiff::SignedDuration::from_secs(age_seconds))
            .unwrap();
        Replacement {
            template: "cert".into(),
            object: None,
            from: Some("aaaa0000".into()),
            to: "bbbb1111".into(),
            phase,
            waiting_for: "what it waits for".into(),
            started: Some(started.to_string()),
            timeout_seconds,
        }
    }

    #[test]
    fn a_replacement_is_stuck_past_its_timeout_before_or_after_the_switch() {
        let now = at(NOW);
        for (phase, on_time, late) in [
            (
                ReplacementPhase::WaitingForNew,
                Progress::Waiting,
                Progress::Stuck,
            ),
            (
                ReplacementPhase::Switching,
                Progress::Switching,
                Progress::SwitchStuck,
            ),
        ] {
            let young = replacement(phase.clone(), 10, 60);
            let (p, requeue) = progress(&[&young], now);
            assert_eq!(p["cert=bbbb1111"], on_time);
            assert_eq!(
                requeue,
                Some(Duration::from_secs(51)),
                "wakes at the deadline"
            );
            assert_eq!(condition(&[&young], &p, now).reason, reasons::PROGRESSING);

            let old = replacement(phase, 61, 60);
            let (p2, requeue) = progress(&[&old], now);
            assert_eq!(p2["cert=bbbb1111"], late);
            assert_eq!(requeue, None, "nothing left to wait for");
            let c = condition(&[&old], &p2, now);
            assert_eq!(c.reason, reasons::STUCK);
            assert!(c.message.contains("what it waits for"), "{}", c.message);
            assert!(c.message.contains("after 61s"), "{}", c.message);
            // Entering the stuck state is an Event, once.
            let e = events(&p, &p2);
            assert_eq!(e.len(), 1, "{e:?}");
            assert_eq!(e[0].reason, "RolloutStuck");
            assert!(e[0].warning);
            assert!(events(&p2, &p2).is_empty());
        }
        // A finishing replacement is never stuck.
        let done = replacement(ReplacementPhase::Finishing, 600, 60);
        let (p, requeue) = progress(&[&done], now);
        assert_eq!(p["cert=bbbb1111"], Progress::Finishing);
        assert_eq!(requeue, None);
    }

    #[test]
    fn a_replacement_without_a_start_time_counts_from_now() {
        let mut r = replacement(ReplacementPhase::WaitingForNew, 0, 60);
        r.started = None;
        let (p, requeue) = progress(&[&r], at(NOW));
        assert_eq!(p["cert=bbbb1111"], Progress::Waiting);
        assert_eq!(requeue, Some(Duration::from_secs(61)));
    }

    #[test]
    fn a_stuck_switch_that_completes_is_switched_once_and_finished() {
        let key = "cert=bbbb1111".to_owned();
        let at = |p: Progress| BTreeMap::from([(key.clone(), p)]);
        let reasons_of = |b: &BTreeMap<String, Progress>, n: &BTreeMap<String, Progress>| {
            events(b, n)
                .into_iter()
                .map(|e| e.reason)
                .collect::<Vec<_>>()
        };
        assert_eq!(
            reasons_of(&BTreeMap::new(), &at(Progress::Waiting)),
            ["RolloutStarted"]
        );
        assert_eq!(
            reasons_of(&at(Progress::Waiting), &at(Progress::Switching)),
            ["RolloutSwitched"]
        );
        assert_eq!(
            reasons_of(&at(Progress::Switching), &at(Progress::SwitchStuck)),
            ["RolloutStuck"]
        );
        assert!(reasons_of(&at(Progress::SwitchStuck), &at(Progress::Finishing)).is_empty());
        assert_eq!(
            reasons_of(&at(Progress::Finishing), &BTreeMap::new()),
            ["RolloutFinished"]
        );
        let newer = BTreeMap::from([("cert=cccc2222".to_owned(), Progress::Waiting)]);
        assert_eq!(
            reasons_of(&at(Progress::Stuck), &newer),
            ["RolloutStarted", "RolloutSuperseded"]
        );
    }
}
