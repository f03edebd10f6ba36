//! What a teardown left in members that were not served (fleet mode's placement). The hub
//! remembers each object with the UID of the Gateway it was placed for, and deletes it
//! once its member is served again, if it still carries that UID: an object that another
//! Gateway has made since under the same name is never touched. The teardown fills it and
//! sweeps it (`Fleet::sweep_left` in `fleet.rs`). An object whose delete fails (the
//! member refuses it: RBAC, a webhook) is tried again after a delay that doubles from 1 s
//! to 1 min, and its failure is said once, not on every try.
//!
//! It is durable: before the Gateway's finalizer goes, what is left is written in the hub,
//! one ConfigMap per Gateway in the controller's namespace ([`record_object`]), so that a
//! restart, or another replica, finds it ([`read_record`]). Every replica reads the records
//! (at start and every [`LIST_EVERY`]) and deletes what is left in the members whose Lease
//! it holds; the leader deletes a record once each of its objects is gone (it reads the
//! members it does not serve to know).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::snapshot::ObjectKey;

/// The first delay after a failed delete; it doubles up to [`RETRY_CAP`].
const RETRY_BASE: Duration = Duration::from_secs(1);
/// The longest delay between two tries of a delete.
const RETRY_CAP: Duration = Duration::from_secs(60);

/// How often the records in the hub are read again (another replica's, or a restart's).
pub(super) const LIST_EVERY: Duration = Duration::from_secs(30);

/// The label of the records (value `"true"`).
pub(super) const RECORD_LABEL: &str = "gatewright.dev/left-behind";

/// The name of the record of what the teardown of the Gateway of `uid` left in members.
#[must_use]
pub(super) fn record_name(uid: &str) -> String {
    format!("gatewright-left-{uid}")
}

/// The record of what the teardown of `gateway` (`namespace/name`, UID `uid`) left in
/// members: a ConfigMap in `namespace` (the controller's), its objects as JSON.
#[must_use]
pub(super) fn record_object(
    namespace: &str,
    uid: &str,
    gateway: &str,
    objects: &BTreeSet<ObjectKey>,
) -> serde_json::Value {
    let objects: Vec<serde_json::Value> = objects
        .iter()
        .map(|k| {
            serde_json::json!({
                "cluster": k.cluster, "apiVersion": k.api_version, "kind": k.kind,
                "namespace": k.namespace, "name": k.name,
            })
        })
        .collect();
    serde_json::json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": record_name(uid),
            "namespace": namespace,
            "labels": {RECORD_LABEL: "true", "app.kubernetes.io/managed-by": "gatewright"},
            "annotations": {"gatewright.dev/gateway": gateway},
        },
        "data": {
            "gatewayUID": uid,
            "objects": serde_json::to_string(&objects).unwrap_or_default(),
        },
    })
}

/// A record read back ([`record_object`]): the Gateway's UID, `namespace/name`, and the
/// objects left. `None`: not a record (its data cannot be read).
#[must_use]
pub(super) fn read_record(cm: &serde_json::Value) -> Option<(String, String, BTreeSet<ObjectKey>)> {
    let uid = cm["data"]["gatewayUID"].as_str()?.to_owned();
    let gateway = cm["metadata"]["annotations"]["gatewright.dev/gateway"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let objects: Vec<serde_json::Value> =
        serde_json::from_str(cm["data"]["objects"].as_str()?).ok()?;
    let field = |o: &serde_json::Value, f: &str| o[f].as_str().map(str::to_owned);
    let keys = objects
        .iter()
        .map(|o| {
            Some(ObjectKey {
                api_version: field(o, "apiVersion")?,
                kind: field(o, "kind")?,
                namespace: field(o, "namespace")?,
                name: field(o, "name")?,
                cluster: field(o, "cluster").filter(|c| !c.is_empty())?,
            })
        })
        .collect::<Option<BTreeSet<ObjectKey>>>()?;
    Some((uid, gateway, keys))
}

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

impl Pending {
    /// Not tried yet.
    fn new(gateway_uid: &str) -> Self {
        Self {
            gateway_uid: gateway_uid.to_owned(),
            failures: 0,
            next_try: None,
        }
    }
}

/// The objects left in members, by member: each with the UID of its Gateway; and the
/// durable records, by Gateway UID, with the objects each lists.
#[derive(Default)]
pub(super) struct Left {
    by_member: Mutex<BTreeMap<String, BTreeMap<ObjectKey, Pending>>>,
    sweeping: AtomicBool,
    records: Mutex<BTreeMap<String, BTreeSet<ObjectKey>>>,
    /// When the records were last read from the hub.
    listed_at: Mutex<Option<Instant>>,
    /// A record could not be written (no controller namespace), said once.
    unrecorded: AtomicBool,
}

impl Left {
    /// What is left for the Gateway of `uid`, when the durable record does not list all of
    /// it yet (to write before the Gateway goes).
    pub(super) fn to_record(&self, uid: &str) -> Option<BTreeSet<ObjectKey>> {
        let pending: BTreeSet<ObjectKey> = self
            .by_member
            .lock()
            .ok()?
            .values()
            .flat_map(|objs| objs.iter())
            .filter(|(_, p)| p.gateway_uid == uid)
            .map(|(k, _)| k.clone())
            .collect();
        let records = self.records.lock().ok()?;
        let written = records.get(uid);
        (!pending.is_empty() && written.is_none_or(|w| !pending.is_subset(w))).then(|| {
            // What the record listed stays listed until it is gone.
            pending
                .into_iter()
                .chain(written.into_iter().flatten().cloned())
                .collect()
        })
    }

    /// A record could not be written: returns whether this is the first time.
    pub(super) fn unrecorded(&self) -> bool {
        !self.unrecorded.swap(true, Ordering::AcqRel)
    }

    /// The record of the Gateway of `uid` lists `objects` (written, or read back).
    pub(super) fn recorded(&self, uid: &str, objects: BTreeSet<ObjectKey>) {
        if let Ok(mut r) = self.records.lock() {
            r.insert(uid.to_owned(), objects);
        }
    }

    /// Whether the records are to be read from the hub at `now` (never yet, or
    /// [`LIST_EVERY`] since [`Left::listing`]).
    pub(super) fn list_due(&self, now: Instant) -> bool {
        self.listed_at
            .lock()
            .is_ok_and(|at| at.is_none_or(|t| now.saturating_duration_since(t) >= LIST_EVERY))
    }

    /// The records are read at `now`.
    pub(super) fn listing(&self, now: Instant) {
        if let Ok(mut at) = self.listed_at.lock() {
            *at = Some(now);
        }
    }

    /// Takes in the records read from the hub: their objects not known yet are left
    /// (to delete, or to see gone).
    pub(super) fn listed(&self, records: Vec<(String, BTreeSet<ObjectKey>)>) {
        for (uid, objects) in records {
            if let Ok(mut m) = self.by_member.lock() {
                for k in &objects {
                    m.entry(k.cluster.clone())
                        .or_default()
                        .entry(k.clone())
                        .or_insert_with(|| Pending::new(&uid));
                }
            }
            self.recorded(&uid, objects);
        }
    }

    /// The records whose objects are all gone: to delete.
    pub(super) fn finished(&self) -> Vec<String> {
        let pending: BTreeSet<String> = self
            .by_member
            .lock()
            .map(|m| {
                m.values()
                    .flat_map(|o| o.values().map(|p| p.gateway_uid.clone()))
                    .collect()
            })
            .unwrap_or_default();
        self.records
            .lock()
            .map(|r| {
                r.keys()
                    .filter(|uid| !pending.contains(*uid))
                    .cloned()
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The record of `uid` is deleted (or another replica's to delete): forgotten.
    pub(super) fn forget_record(&self, uid: &str) {
        if let Ok(mut r) = self.records.lock() {
            r.remove(uid);
        }
    }

    /// Remembers `key`, placed for the Gateway of `gateway_uid`, as left in its member.
    pub(super) fn add(&self, key: ObjectKey, gateway_uid: &str) {
        if let Ok(mut m) = self.by_member.lock() {
            m.entry(key.cluster.clone())
                .or_default()
                .insert(key, Pending::new(gateway_uid));
        }
    }

    /// Starts a sweep unless one is under way (the caller then sweeps, and calls
    /// [`Left::swept`] when it is through). Returns whether it started.
    pub(super) fn begin(&self) -> bool {
        !self.sweeping.swap(true, Ordering::AcqRel)
    }

    /// What is due at `now` (never tried, or its delay is over), by member, each with its
    /// Gateway's UID; `None`: nothing.
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
        (!due.is_empty()).then_some(due)
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
    fn a_record_reads_back_what_it_lists() {
        let objects: BTreeSet<ObjectKey> = [key("fleet/eu-1", "a"), key("fleet/us-1", "b")].into();
        let cm = record_object("gatewright-system", "uid-1", "web/public", &objects);
        assert_eq!(cm["metadata"]["name"], "gatewright-left-uid-1");
        assert_eq!(cm["metadata"]["labels"][RECORD_LABEL], "true");
        let (uid, gateway, back) = read_record(&cm).unwrap();
        assert_eq!((uid.as_str(), gateway.as_str()), ("uid-1", "web/public"));
        assert_eq!(back, objects);
        // Not a record: no UID, unreadable objects, an object of no member.
        assert!(read_record(&serde_json::json!({"data": {}})).is_none());
        let mut bad = cm.clone();
        bad["data"]["objects"] = "[{".into();
        assert!(read_record(&bad).is_none());
        let local = record_object("ns", "uid-2", "web/x", &[key("", "a")].into());
        assert!(read_record(&local).is_none());
    }

    #[test]
    fn a_record_is_written_when_it_lacks_something_and_deleted_once_all_is_gone() {
        let left = Left::default();
        assert!(left.to_record("uid-1").is_none(), "nothing left");
        left.add(key("fleet/eu-1", "a"), "uid-1");
        left.add(key("fleet/us-1", "b"), "uid-2");
        let first = left.to_record("uid-1").unwrap();
        assert_eq!(first, [key("fleet/eu-1", "a")].into());
        left.recorded("uid-1", first.clone());
        assert!(left.to_record("uid-1").is_none(), "written already");
        left.add(key("fleet/eu-1", "c"), "uid-1");
        assert_eq!(left.to_record("uid-1").unwrap().len(), 2, "one more");
        left.recorded("uid-1", left.to_record("uid-1").unwrap());
        assert!(
            left.finished().is_empty(),
            "objects of uid-1 are still there"
        );
        left.done(&key("fleet/eu-1", "a"));
        left.done(&key("fleet/eu-1", "c"));
        assert_eq!(left.finished(), ["uid-1"]);
        left.forget_record("uid-1");
        assert!(left.finished().is_empty());
    }

    #[test]
    fn records_read_back_add_what_is_not_known_and_are_read_every_so_often() {
        let left = Left::default();
        let t0 = Instant::now();
        assert!(left.list_due(t0), "read at start");
        left.listing(t0);
        assert!(!left.list_due(t0 + Duration::from_secs(29)));
        assert!(left.list_due(t0 + LIST_EVERY));
        left.add(key("fleet/eu-1", "a"), "uid-1");
        assert!(left.failed(&key("fleet/eu-1", "a"), t0));
        left.listed(vec![(
            "uid-1".into(),
            [key("fleet/eu-1", "a"), key("fleet/eu-1", "b")].into(),
        )]);
        // The one known keeps its delay; the other is due at once.
        let due = left.to_sweep(t0).unwrap();
        assert_eq!(
            due["fleet/eu-1"].keys().collect::<Vec<_>>(),
            [&key("fleet/eu-1", "b")]
        );
        assert!(left.to_record("uid-1").is_none(), "the record lists both");
    }

    #[test]
    fn remembers_by_member_and_sweeps_one_at_a_time() {
        let left = Left::default();
        assert!(left.to_sweep(Instant::now()).is_none(), "nothing to sweep");
        left.add(key("fleet/eu-1", "a"), "uid-1");
        left.add(key("fleet/eu-1", "b"), "uid-1");
        left.add(key("fleet/us-1", "a"), "uid-2");
        let now = Instant::now();
        assert!(left.begin());
        let pending = left.to_sweep(now).unwrap();
        assert_eq!(pending.len(), 2);
        assert_eq!(pending["fleet/eu-1"].len(), 2);
        assert!(!left.begin(), "one sweep at a time");
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
