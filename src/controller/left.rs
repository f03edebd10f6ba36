//! What a teardown left in members that were not served (fleet mode's placement). The hub
//! remembers each object with the UID of the Gateway it was placed for, and deletes it
//! once its member is served again, if it still carries that UID: an object that another
//! Gateway has made since under the same name is never touched. Kept in memory only:
//! after a restart, the Warning Event `PlacedChildrenLeft` is the record. The teardown
//! fills it and sweeps it (`Cluster::sweep_left` in `teardown.rs`).

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::snapshot::ObjectKey;

/// The objects left in members, by member: each with the UID of its Gateway.
#[derive(Default)]
pub(super) struct Left {
    by_member: Mutex<BTreeMap<String, BTreeMap<ObjectKey, String>>>,
    sweeping: AtomicBool,
}

impl Left {
    /// Remembers `key`, placed for the Gateway of `gateway_uid`, as left in its member.
    pub(super) fn add(&self, key: ObjectKey, gateway_uid: &str) {
        if let Ok(mut m) = self.by_member.lock() {
            m.entry(key.cluster.clone())
                .or_default()
                .insert(key, gateway_uid.to_owned());
        }
    }

    /// What is remembered, by member, when there is something and no sweep is under way
    /// (the caller then sweeps, and calls [`Left::swept`] when it is through).
    pub(super) fn to_sweep(&self) -> Option<BTreeMap<String, BTreeMap<ObjectKey, String>>> {
        let pending = self.by_member.lock().ok()?.clone();
        if pending.is_empty() || self.sweeping.swap(true, Ordering::AcqRel) {
            return None;
        }
        Some(pending)
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
        assert!(left.to_sweep().is_none(), "nothing to sweep");
        left.add(key("fleet/eu-1", "a"), "uid-1");
        left.add(key("fleet/eu-1", "b"), "uid-1");
        left.add(key("fleet/us-1", "a"), "uid-2");
        let pending = left.to_sweep().unwrap();
        assert_eq!(pending.len(), 2);
        assert_eq!(pending["fleet/eu-1"].len(), 2);
        assert!(left.to_sweep().is_none(), "one sweep at a time");
        left.done(&key("fleet/eu-1", "a"));
        left.done(&key("fleet/eu-1", "b"));
        left.swept();
        let pending = left.to_sweep().unwrap();
        assert_eq!(pending.keys().collect::<Vec<_>>(), ["fleet/us-1"]);
        assert_eq!(pending["fleet/us-1"][&key("fleet/us-1", "a")], "uid-2");
    }
}
