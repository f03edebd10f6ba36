//! What a teardown left in members that were not served (fleet mode's placement). The hub
//! remembers each object with the UID of the Gateway it was placed for, and deletes it
//! once its member is served again, if it still carries that UID: an object that another
//! Gateway has made since under the same name is never touched. Kept in memory only:
//! after a restart, the Warning Event `PlacedChildrenLeft` is the record. The teardown
//! fills it and sweeps it (`Cluster::sweep_left` in `teardown.rs`). An object whose delete
//! fails (the member refuses it: RBAC, a webhook) is tried again after a delay that
//! doubles from 1 s to 1 min, and its failure is said once, not on every try.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::snapshot::ObjectKey;

/// The first delay after a failed delete; it doubles up to [`RETRY_CAP`].
const RETRY_BASE: Duration = Duration::from_secs(1);
/// The longest delay between two tries of a delete.
const RETRY_CAP: Duration = Duration::from_secs(60);

/// One object left in a member.
#[derive(Clone, Debug)]
struct Pending {
    /// The UID of the Gateway it was placed for.
    gateway_uid: String,
    /// Failed deletes so far.
    failures: u32,
    /// Not tried again before then.
    next_try: Option<Instant>,
}

/// The objects left in members, by member: each with the UID of its Gateway.
#[derive(Default)]
pub(super) struct Left {
    by_member: Mutex<BTreeMap<String, BTreeMap<ObjectKey, Pending>>>,
    sweeping: AtomicBool,
}

impl Left {
    /// Remembers `key`, placed for the Gateway of `gateway_uid`, as left in its member.
    pub(super) fn add(&self, key: ObjectKey, gateway_uid: &str) {
        if let Ok(mut m) = self.by_member.lock() {
            m.entry(key.cluster.clone()).or_default().insert(
                key,
                Pending {
                    gateway_uid: gateway_uid.to_owned(),
                    failures: 0,
                    next_try: None,
                },
            );
        }
    }

    /// What is due at `now` (never tried, or its delay is over), by member, each with its
    /// Gateway's UID, when there is something and no sweep is under way (the caller then
    /// sweeps, and calls [`Left::swept`] when it is through).
    pub(super) fn to_sweep(
        &self,
        now: Instant,
    ) -> Option<BTreeMap<String, BTreeMap<ObjectKey, String>>> {
        let due: BTreeMap<String, BTreeMap<ObjectKey, String>> = self
            .by_member
            .lock()
            .ok()?
            .iter()
            .map(|(member, objs)| {
                let objs: BTreeMap<ObjectKey, String> = objs
                    .iter()
                    .filter(|(_, p)| p.next_try.is_none_or(|t| t <= now))
                    .map(|(k, p)| (k.clone(), p.gateway_uid.clone()))
                    .collect();
                (member.clone(), objs)
            })
            .filter(|(_, objs)| !objs.is_empty())
            .collect();
        if due.is_empty() || self.sweeping.swap(true, Ordering::AcqRel) {
            return None;
        }
        Some(due)
    }

    /// The delete of `key` failed at `now`: it is tried again after a delay that doubles.
    /// Returns whether this is its first failure (said as a warning; later ones are not).
    pub(super) fn failed(&self, key: &ObjectKey, now: Instant) -> bool {
        let Ok(mut m) = self.by_member.lock() else {
            return false;
        };
        let Some(p) = m.get_mut(&key.cluster).and_then(|o| o.get_mut(key)) else {
            return false;
        };
        let delay = RETRY_BASE
            .checked_mul(1u32.checked_shl(p.failures.min(31)).unwrap_or(u32::MAX))
            .unwrap_or(RETRY_CAP)
            .min(RETRY_CAP);
        p.failures += 1;
        p.next_try = Some(now + delay);
        p.failures == 1
    }

    /// The sweep is through.
    pub(super) fn swept(&self) {
        self.sweeping.store(false, Ordering::Release);
    }

    /// `key` is gone from its member: forgets it.
    pub(super) fn done(&self, key: &ObjectKey) {
        if let Ok(mut m) = self.by_member.lock()
            && let Some(objs) = m.get_mut(&key.cluster)
        {
            objs.remove(key);
            if objs.is_empty() {
                m.remove(&key.cluster);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(cluster: &str, name: &str) -> ObjectKey {
        ObjectKey {
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
            namespace: "web".into(),
            name: name.into(),
            cluster: cluster.into(),
        }
    }

    #[test]
    fn remembers_by_member_and_sweeps_one_at_a_time() {
        let left = Left::default();
        assert!(left.to_sweep(Instant::now()).is_none(), "nothing to sweep");
        left.add(key("fleet/eu-1", "a"), "uid-1");
        left.add(key("fleet/eu-1", "b"), "uid-1");
        left.add(key("fleet/us-1", "a"), "uid-2");
        let now = Instant::now();
        let pending = left.to_sweep(now).unwrap();
        assert_eq!(pending.len(), 2);
        assert_eq!(pending["fleet/eu-1"].len(), 2);
        assert!(left.to_sweep(now).is_none(), "one sweep at a time");
        left.done(&key("fleet/eu-1", "a"));
        left.done(&key("fleet/eu-1", "b"));
        left.swept();
        let pending = left.to_sweep(now).unwrap();
        assert_eq!(pending.keys().collect::<Vec<_>>(), ["fleet/us-1"]);
        assert_eq!(pending["fleet/us-1"][&key("fleet/us-1", "a")], "uid-2");
    }

    #[test]
    fn a_refused_delete_backs_off_and_is_said_once() {
        let left = Left::default();
        let t0 = Instant::now();
        let k = key("fleet/eu-1", "a");
        left.add(k.clone(), "uid-1");
        left.add(key("fleet/eu-1", "b"), "uid-1");
        let s = |ms: u64| t0 + Duration::from_millis(ms);
        assert!(left.to_sweep(t0).is_some());
        assert!(left.failed(&k, t0), "the first failure is said");
        left.swept();
        // Not tried again before its delay; the other object still is.
        let due = left.to_sweep(s(500)).unwrap();
        assert!(!due["fleet/eu-1"].contains_key(&k));
        left.done(&key("fleet/eu-1", "b"));
        left.swept();
        assert!(left.to_sweep(s(999)).is_none(), "nothing else is due");
        assert!(left.to_sweep(s(1000)).is_some(), "due after 1 s");
        assert!(
            !left.failed(&k, s(1000)),
            "later failures are not said again"
        );
        left.swept();
        assert!(left.to_sweep(s(2999)).is_none(), "then after 2 s more");
        assert!(left.to_sweep(s(3000)).is_some());
        left.swept();
        // The delay stops growing at its cap.
        for _ in 0..20 {
            left.failed(&k, t0);
        }
        assert!(
            left.to_sweep(t0 + RETRY_CAP - Duration::from_millis(1))
                .is_none()
        );
        assert!(left.to_sweep(t0 + RETRY_CAP).is_some());
    }
}
