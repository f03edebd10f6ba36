//! Fights over fields: another actor (a GitOps tool, a person, a second controller) keeps
//! changing a field of a child that we own. Restoring it at once, forever, makes two
//! controllers hot-loop; instead, like a circuit breaker:
//!
//! - A **revert** is a drift, seen when we are about to apply a child, on a field that
//!   another field manager now owns (read from the live object's `managedFields`). A drift
//!   on a field still owned by us (our own template changed, a stale cache) is not one.
//!   Re-creating a child that another actor deleted (a deletion the watch saw that we did
//!   not send) is a revert of the whole object, by "another actor" (a deletion names no
//!   field manager).
//! - [`Policy::threshold`] reverts of one child within [`Policy::window`] start a **fight**:
//!   the child is held (not applied) for [`Policy::base`], then applied once (a probe); a
//!   revert of the probe within the window holds it twice as long, up to [`Policy::cap`].
//! - The fight **ends** when no revert was seen for a window: the entry is dropped and the
//!   child is applied normally again.
//!
//! While a child is in a fight, its Gateway carries condition
//! [`CONDITION`] (True, reason [`REASON`]) naming the child, the field and the other
//! manager, and one Warning Event marks the start. Writes to a fought child are therefore
//! at most `threshold` plus one probe per hold: `threshold + log2(T / base) + 1` over a
//! fight of `T` while holds still double, then one per `cap`.
//!
//! Input: the rendered object, the live object and the clock (passed in: the logic here
//! is pure and unit-tested); output: apply now or hold until when, and what to report.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::gateway::conditions::Cond;

/// Type of the Gateway condition reporting a fight.
pub const CONDITION: &str = crate::gateway::conditions::types::FIELD_CONFLICT;
/// Its reason, and the Event's.
pub const REASON: &str = "FieldFight";

/// When a fight starts and how it backs off.
#[derive(Clone, Debug)]
pub struct Policy {
    /// Reverts of one child within [`Policy::window`] that start a fight.
    pub threshold: usize,
    /// The window reverts are counted in; a fight ends after one without a revert.
    pub window: Duration,
    /// First hold.
    pub base: Duration,
    /// Longest hold.
    pub cap: Duration,
}

impl Default for Policy {
    fn default() -> Self {
        Self {
            threshold: 3,
            window: Duration::from_secs(60),
            base: Duration::from_secs(2),
            cap: Duration::from_secs(300),
        }
    }
}

/// One fight, as reported.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fight {
    /// The child, `Kind namespace/name`.
    pub child: String,
    /// The field, dotted (`spec.hostnames[0]`); empty when the child keeps being deleted.
    pub field: String,
    /// The other field manager (`unknown` when `managedFields` does not say).
    pub manager: String,
}

impl std::fmt::Display for Fight {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.field.is_empty() {
            write!(f, "{} keeps being deleted by {}", self.child, self.manager)
        } else {
            write!(
                f,
                "{} field {} is being reverted by field manager {:?}",
                self.child, self.field, self.manager
            )
        }
    }
}

/// What to do with a drifted child.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Apply it.
    Apply,
    /// Do not apply before the instant.
    Hold(Instant),
}

#[derive(Debug)]
struct Entry {
    reverts: VecDeque<Instant>,
    /// Holds so far in this fight (0: no fight yet).
    strikes: u32,
    hold_until: Option<Instant>,
    /// Applied once after a hold: a revert now means the other side is still at it.
    probing: bool,
    fight: Fight,
    announced: bool,
}

/// Deletions of children seen by the watch: the ones we sent, and recent ones of others.
#[derive(Debug, Default)]
struct Deletions {
    ours: BTreeMap<String, Instant>,
    foreign: BTreeMap<String, Instant>,
}

/// How long a deletion we sent counts as on its way ([`Fights::delete_pending`]): its
/// watch event comes within milliseconds; after this, the deletion is sent again.
pub const DELETE_PENDING: Duration = Duration::from_secs(5);

/// Who deleted a child, as far as anyone can tell: a deletion names no field manager.
pub const DELETER: &str = "another actor";

/// The fight state of every child with recent reverts.
#[derive(Debug, Default)]
pub struct Fights {
    policy: Policy,
    entries: Mutex<BTreeMap<String, Entry>>,
    deletions: Mutex<Deletions>,
}

impl Fights {
    /// Fights under `policy`.
    #[must_use]
    pub fn new(policy: Policy) -> Self {
        Self {
            policy,
            entries: Mutex::new(BTreeMap::new()),
            deletions: Mutex::new(Deletions::default()),
        }
    }

    /// A drift of `child` (named `Kind namespace/name`) between `desired` and `live`, seen
    /// at `now` by field manager `ours`: apply or hold.
    pub fn on_drift(
        &self,
        child: &str,
        desired: &Value,
        live: &Value,
        ours: &str,
        now: Instant,
    ) -> Verdict {
        let Some(path) = drift_path(desired, live) else {
            return Verdict::Apply;
        };
        let managers = managers_of(live, &path);
        let Some(other) = managers.iter().find(|m| m.as_str() != ours) else {
            // Our own field, an older value of it: not a revert.
            return self.held(child, now);
        };
        self.on_revert(child, &dotted(&path), other, now)
    }

    /// We are about to send a deletion of `child`: its deletion event is ours.
    pub fn expect_delete(&self, child: &str) {
        if let Ok(mut d) = self.deletions.lock() {
            d.ours.insert(child.to_owned(), Instant::now());
        }
    }

    /// Whether we sent a deletion of `child` less than [`DELETE_PENDING`] before `now` and
    /// its watch event has not come yet (later, a deletion is sent again: a missed event
    /// must not keep a child from ever being deleted).
    pub fn delete_pending(&self, child: &str, now: Instant) -> bool {
        self.deletions.lock().is_ok_and(|d| {
            d.ours
                .get(child)
                .is_some_and(|sent| now.saturating_duration_since(*sent) < DELETE_PENDING)
        })
    }

    /// A deletion we expected did not happen (the request failed): forget it.
    pub fn forget_delete(&self, child: &str) {
        if let Ok(mut d) = self.deletions.lock() {
            d.ours.remove(child);
        }
    }

    /// The watch saw `child` deleted at `now`. Unless we sent that deletion, it was
    /// another actor's: re-creating the child will count as a revert.
    pub fn on_deleted(&self, child: &str, now: Instant) {
        let Ok(mut d) = self.deletions.lock() else {
            return;
        };
        if d.ours.remove(child).is_some() {
            return;
        }
        // Children that are never re-created (a deleted route's, collected by the garbage
        // collector) are forgotten after a window.
        let window = self.policy.window;
        d.foreign
            .retain(|_, t| now.saturating_duration_since(*t) <= window);
        d.foreign.insert(child.to_owned(), now);
    }

    /// We are about to create `child`, which does not exist: apply or hold. Re-creating
    /// a child another actor deleted is a revert of the whole object.
    pub fn on_create(&self, child: &str, now: Instant) -> Verdict {
        let deleted = self
            .deletions
            .lock()
            .is_ok_and(|d| d.foreign.contains_key(child));
        if deleted {
            self.on_revert(child, "", DELETER, now)
        } else {
            self.held(child, now)
        }
    }

    /// `child` was created: a deletion before it is settled.
    pub fn created(&self, child: &str) {
        if let Ok(mut d) = self.deletions.lock() {
            d.foreign.remove(child);
        }
    }

    /// One revert of `child` (`field` changed by `manager`, or the object deleted when
    /// `field` is empty) at `now`: apply or hold.
    fn on_revert(&self, child: &str, field: &str, manager: &str, now: Instant) -> Verdict {
        let Ok(mut entries) = self.entries.lock() else {
            return Verdict::Apply;
        };
        let p = &self.policy;
        let e = entries.entry(child.to_owned()).or_insert_with(|| Entry {
            reverts: VecDeque::new(),
            strikes: 0,
            hold_until: None,
            probing: false,
            fight: Fight {
                child: child.to_owned(),
                field: String::new(),
                manager: String::new(),
            },
            announced: false,
        });
        field.clone_into(&mut e.fight.field);
        manager.clone_into(&mut e.fight.manager);
        match e.hold_until {
            Some(until) if now < until => return Verdict::Hold(until),
            Some(_) => {
                // The hold is over: apply once and see whether it is reverted again.
                e.hold_until = None;
                e.probing = true;
                return Verdict::Apply;
            }
            None => {}
        }
        while e
            .reverts
            .front()
            .is_some_and(|t| now.saturating_duration_since(*t) > p.window)
        {
            e.reverts.pop_front();
        }
        e.reverts.push_back(now);
        if std::mem::take(&mut e.probing) || e.reverts.len() >= p.threshold {
            e.strikes += 1;
            let hold = p
                .base
                .checked_mul(1u32.checked_shl(e.strikes - 1).unwrap_or(u32::MAX))
                .unwrap_or(p.cap)
                .min(p.cap);
            let until = now + hold;
            e.hold_until = Some(until);
            return Verdict::Hold(until);
        }
        Verdict::Apply
    }

    fn held(&self, child: &str, now: Instant) -> Verdict {
        self.entries
            .lock()
            .ok()
            .and_then(|m| m.get(child).and_then(|e| e.hold_until))
            .filter(|u| now < *u)
            .map_or(Verdict::Apply, Verdict::Hold)
    }

    /// Whether no child is fought over or watched for fights now (then
    /// [`Self::active`] has nothing to say of any).
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.entries.lock().is_ok_and(|e| e.is_empty())
    }

    /// The fights going on among `children` at `now` (ending those that are over), and
    /// the ones not announced before (marked announced now).
    pub fn active<'a>(
        &self,
        children: impl IntoIterator<Item = &'a str>,
        now: Instant,
    ) -> (Vec<Fight>, Vec<Fight>) {
        let Ok(mut entries) = self.entries.lock() else {
            return (Vec::new(), Vec::new());
        };
        let (mut all, mut new) = (Vec::new(), Vec::new());
        for c in children {
            let over = entries.get(c).is_some_and(|e| {
                e.hold_until.is_none_or(|u| now >= u)
                    && e.reverts
                        .back()
                        .is_none_or(|t| now.saturating_duration_since(*t) > self.policy.window)
            });
            if over {
                entries.remove(c);
                continue;
            }
            if let Some(e) = entries.get_mut(c)
                && e.strikes > 0
            {
                all.push(e.fight.clone());
                if !e.announced {
                    e.announced = true;
                    new.push(e.fight.clone());
                }
            }
        }
        (all, new)
    }

    /// When to look at `children` again: the end of a hold, or of a window without a
    /// revert (when a fight may be over).
    pub fn wake_in<'a>(
        &self,
        children: impl IntoIterator<Item = &'a str>,
        now: Instant,
    ) -> Option<Duration> {
        let entries = self.entries.lock().ok()?;
        children
            .into_iter()
            .filter_map(|c| entries.get(c))
            .filter_map(|e| {
                let calm = e.reverts.back().map(|t| *t + self.policy.window);
                match (e.hold_until.filter(|u| *u > now), calm) {
                    (Some(u), _) => Some(u),
                    (None, Some(c)) => Some(c),
                    (None, None) => None,
                }
            })
            .min()
            .map(|t| t.saturating_duration_since(now) + Duration::from_millis(50))
    }
}

pub use crate::identity::keep_what_fights_read;

/// The Gateway condition for `fights` (none when there is none).
#[must_use]
pub fn condition(fights: &[Fight]) -> Option<Cond> {
    let first = fights.first()?;
    let mut msg = format!("backing off from a fight over fields: {first}");
    if fights.len() > 1 {
        use std::fmt::Write as _;
        let _ = write!(msg, " (and {} more children)", fights.len() - 1);
    }
    Some(Cond::t(CONDITION, REASON, &msg))
}

/// The path of the first field of `desired` whose value `live` does not hold (map keys,
/// and list indexes as numbers), or `None` when `live` holds all of `desired`.
#[must_use]
pub fn drift_path(desired: &Value, live: &Value) -> Option<Vec<String>> {
    match (desired, live) {
        (Value::Object(d), Value::Object(l)) => d.iter().find_map(|(k, v)| match l.get(k) {
            None => Some(vec![k.clone()]),
            Some(lv) => drift_path(v, lv).map(|mut p| {
                p.insert(0, k.clone());
                p
            }),
        }),
        (Value::Array(d), Value::Array(l)) => {
            if d.len() != l.len() {
                return Some(Vec::new());
            }
            d.iter().zip(l).enumerate().find_map(|(i, (a, b))| {
                drift_path(a, b).map(|mut p| {
                    p.insert(0, i.to_string());
                    p
                })
            })
        }
        (Value::Number(a), Value::Number(b)) if a.as_f64() == b.as_f64() => None,
        (a, b) if a == b => None,
        _ => Some(Vec::new()),
    }
}

/// `spec.rules[0].host`.
fn dotted(path: &[String]) -> String {
    let mut out = String::new();
    for p in path {
        if p.parse::<usize>().is_ok() {
            out.push('[');
            out.push_str(p);
            out.push(']');
        } else {
            if !out.is_empty() {
                out.push('.');
            }
            out.push_str(p);
        }
    }
    out
}

/// The field managers of `live` that own `path`, newest first. A list index stops the
/// walk: the manager owning the list (an atomic list) or any item of it counts.
#[must_use]
pub fn managers_of(live: &Value, path: &[String]) -> Vec<String> {
    let Some(entries) = live["metadata"]["managedFields"].as_array() else {
        return Vec::new();
    };
    let mut found: Vec<(&str, &str)> = entries
        .iter()
        .filter(|e| {
            let mut node = &e["fieldsV1"];
            for seg in path {
                if seg.parse::<usize>().is_ok() {
                    break;
                }
                node = &node[format!("f:{seg}")];
                if node.is_null() {
                    return false;
                }
            }
            true
        })
        .filter_map(|e| {
            Some((
                e["manager"].as_str()?,
                e["time"].as_str().unwrap_or_default(),
            ))
        })
        .collect();
    found.sort_by(|a, b| b.1.cmp(a.1));
    found.into_iter().map(|(m, _)| m.to_owned()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn live(value: &str, manager: &str) -> Value {
        json!({
            "metadata": {"managedFields": [
                {"manager": "gatewright", "operation": "Apply", "time": "2026-01-01T00:00:00Z",
                 "fieldsV1": {"f:metadata": {"f:labels": {"f:a": {}}}, "f:spec": {"f:other": {}}}},
                {"manager": manager, "operation": "Update", "time": "2026-01-01T00:00:05Z",
                 "fieldsV1": {"f:spec": {"f:host": {}}}},
            ]},
            "spec": {"host": value, "other": 1}
        })
    }

    fn desired() -> Value {
        json!({"spec": {"host": "a.example.com", "other": 1}})
    }

    const MS: Duration = Duration::from_millis(1);

    /// 3 reverts within 10 s start a fight; holds of 1 s doubling up to 4 s.
    fn quick() -> Policy {
        Policy {
            threshold: 3,
            window: Duration::from_secs(10),
            base: Duration::from_secs(1),
            cap: Duration::from_secs(4),
        }
    }

    #[test]
    fn drift_path_names_the_first_differing_field() {
        assert_eq!(drift_path(&desired(), &live("a.example.com", "x")), None);
        assert_eq!(
            drift_path(&desired(), &live("b", "x")),
            Some(vec!["spec".into(), "host".into()])
        );
        let p = drift_path(
            &json!({"spec": {"l": [{"x": 1}, {"x": 2}]}}),
            &json!({"spec": {"l": [{"x": 1}, {"x": 3, "y": 0}]}}),
        )
        .unwrap();
        assert_eq!(dotted(&p), "spec.l[1].x");
        assert_eq!(drift_path(&json!({"a": 1}), &json!({"a": 1.0})), None);
    }

    #[test]
    fn managers_of_reads_managed_fields_newest_first() {
        let path = vec!["spec".to_owned(), "host".to_owned()];
        assert_eq!(
            managers_of(&live("b", "kubectl-edit"), &path),
            ["kubectl-edit"]
        );
        let other = vec!["spec".to_owned(), "other".to_owned()];
        assert_eq!(managers_of(&live("b", "k"), &other), ["gatewright"]);
        assert!(managers_of(&json!({}), &path).is_empty());
    }

    #[test]
    fn a_deletion_we_sent_is_pending_until_its_event_or_for_a_while() {
        let f = Fights::default();
        let t = Instant::now();
        assert!(!f.delete_pending("c", t), "nothing sent");
        f.expect_delete("c");
        assert!(
            f.delete_pending("c", Instant::now()),
            "sent, its event on its way"
        );
        assert!(
            !f.delete_pending("c", Instant::now() + DELETE_PENDING),
            "an event that never came does not keep the child forever"
        );
        f.on_deleted("c", Instant::now());
        assert!(!f.delete_pending("c", Instant::now()), "its event came");
        f.expect_delete("c");
        f.forget_delete("c");
        assert!(!f.delete_pending("c", Instant::now()), "the request failed");
    }

    #[test]
    fn a_drift_on_our_own_field_is_not_a_revert() {
        let f = Fights::default();
        let t = Instant::now();
        let stale = json!({"metadata": {"managedFields": [{"manager": "gatewright", "fieldsV1": {"f:spec": {"f:host": {}}}}]}, "spec": {"host": "old"}});
        for i in 0..10 {
            assert_eq!(
                f.on_drift("c", &desired(), &stale, "gatewright", t + i * MS),
                Verdict::Apply
            );
        }
        assert!(f.active(["c"], t).0.is_empty());
    }

    #[test]
    fn repeated_reverts_start_a_fight_that_backs_off_and_ends() {
        let f = Fights::new(quick());
        let l = live("b", "argocd");
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        // Two reverts: still applied.
        assert_eq!(
            f.on_drift("c", &desired(), &l, "gatewright", at(0)),
            Verdict::Apply
        );
        assert_eq!(
            f.on_drift("c", &desired(), &l, "gatewright", at(100)),
            Verdict::Apply
        );
        assert!(f.active(["c"], at(150)).0.is_empty(), "no fight yet");
        // The third: held for base.
        assert_eq!(
            f.on_drift("c", &desired(), &l, "gatewright", at(200)),
            Verdict::Hold(at(1200))
        );
        // Within the hold: still held, no new strike.
        assert_eq!(
            f.on_drift("c", &desired(), &l, "gatewright", at(700)),
            Verdict::Hold(at(1200))
        );
        let (all, new) = f.active(["c", "other"], at(800));
        assert_eq!(all.len(), 1);
        assert_eq!(new, all);
        assert_eq!(all[0].field, "spec.host");
        assert_eq!(all[0].manager, "argocd");
        assert!(f.active(["c"], at(900)).1.is_empty(), "announced once");
        let c = condition(&all).unwrap();
        assert_eq!(c.type_, CONDITION);
        assert!(c.message.contains("argocd") && c.message.contains("spec.host"));
        assert_eq!(f.wake_in(["c"], at(800)), Some(Duration::from_millis(450)));
        // After the hold: one probe; reverted at once, held twice as long, then capped.
        let mut t = 1300;
        for hold in [2000, 4000, 4000] {
            assert_eq!(
                f.on_drift("c", &desired(), &l, "gatewright", at(t)),
                Verdict::Apply,
                "probe at {t}"
            );
            assert_eq!(
                f.on_drift("c", &desired(), &l, "gatewright", at(t + 100)),
                Verdict::Hold(at(t + 100 + hold))
            );
            t += 100 + hold + 100;
        }
        // The other side stops: the probe stays; no revert for a window: over.
        assert_eq!(
            f.on_drift("c", &desired(), &l, "gatewright", at(t)),
            Verdict::Apply
        );
        let last_revert = t - 100 - 4000;
        assert_eq!(f.active(["c"], at(t + 100)).0.len(), 1, "window not over");
        assert!(f.active(["c"], at(last_revert + 10_001)).0.is_empty());
        assert!(
            f.wake_in(["c"], at(last_revert + 10_001)).is_none(),
            "forgotten"
        );
    }

    #[test]
    fn a_child_deleted_again_and_again_is_a_fight_and_our_own_deletions_are_not() {
        let f = Fights::new(quick());
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        // First creation, and re-creations after our own deletions: never a revert.
        for i in 0..5 {
            assert_eq!(f.on_create("c", at(i * 10)), Verdict::Apply);
            f.created("c");
            f.expect_delete("c");
            f.on_deleted("c", at(i * 10 + 5));
        }
        assert!(f.active(["c"], at(100)).0.is_empty());
        // Another actor deletes it three times: the third re-creation is held.
        for (i, t) in [200u64, 300].into_iter().enumerate() {
            f.on_deleted("c", at(t));
            assert_eq!(
                f.on_create("c", at(t + 10)),
                Verdict::Apply,
                "re-creation {i}"
            );
            f.created("c");
        }
        f.on_deleted("c", at(400));
        assert_eq!(f.on_create("c", at(410)), Verdict::Hold(at(1410)));
        assert_eq!(
            f.on_create("c", at(900)),
            Verdict::Hold(at(1410)),
            "still held"
        );
        let (all, _) = f.active(["c"], at(900));
        assert_eq!(all[0].field, "");
        assert_eq!(all[0].manager, DELETER);
        assert!(
            condition(&all)
                .unwrap()
                .message
                .contains("c keeps being deleted by another actor"),
            "{:?}",
            condition(&all)
        );
        // The hold ends: one probe, deleted again: held twice as long.
        assert_eq!(f.on_create("c", at(1500)), Verdict::Apply);
        f.created("c");
        f.on_deleted("c", at(1600));
        assert_eq!(f.on_create("c", at(1610)), Verdict::Hold(at(3610)));
        // A deletion of a child never re-created is forgotten after a window.
        f.on_deleted("gone", at(2000));
        f.on_deleted("other", at(13_000));
        assert_eq!(f.on_create("gone", at(13_010)), Verdict::Apply);
        assert!(f.active(["gone"], at(13_010)).0.is_empty());
    }

    #[test]
    fn only_other_managers_of_the_object_itself_are_kept() {
        let mut child = json!({"metadata": {"name": "c", "managedFields": [
            {"manager": "gatewright", "operation": "Apply", "time": "t1", "fieldsV1": {"f:spec": {}}},
            {"manager": "simulator", "operation": "Update", "subresource": "status", "fieldsV1": {"f:status": {}}},
            {"manager": "kubectl-edit", "operation": "Update", "apiVersion": "v1", "time": "t2", "fieldsV1": {"f:spec": {"f:x": {}}}},
        ]}});
        keep_what_fights_read(&mut child);
        assert_eq!(
            child["metadata"]["managedFields"],
            json!([{"manager": "kubectl-edit", "time": "t2", "fieldsV1": {"f:spec": {"f:x": {}}}}])
        );
        let mut ours =
            json!({"metadata": {"managedFields": [{"manager": "gatewright", "fieldsV1": {}}]}});
        keep_what_fights_read(&mut ours);
        assert_eq!(ours, json!({"metadata": {}}));
    }

    #[test]
    fn a_slow_actor_is_not_a_fight() {
        let f = Fights::new(quick());
        let l = live("b", "someone");
        let t0 = Instant::now();
        for i in 0..5u64 {
            assert_eq!(
                f.on_drift(
                    "c",
                    &desired(),
                    &l,
                    "gatewright",
                    t0 + Duration::from_secs(11 * i)
                ),
                Verdict::Apply
            );
        }
    }
}
