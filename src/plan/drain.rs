//! Draining: what a template's `drain` asks before what its objects advertise goes away.
//!
//! A child others route traffic by (a DNSEndpoint: clients are sent to the addresses it
//! lists) must stop advertising something before that something goes, and "stopped"
//! means the downstream controller has taken the change, not that we wrote it. The
//! template's `drain` names what its objects advertise (the fields its `patch` empties)
//! and how long the downstream needs once it reports a version (`settleSeconds`). Three
//! cases use it, with the same steps (the change, then its readiness at that version,
//! then the settle, bounded by `timeoutSeconds`):
//!
//! - **teardown** of the Gateway, and **prune** of an object no longer rendered: the
//!   object is patched empty first, and deleted only once that version is ready and has
//!   settled ([`drain_step`]);
//! - **narrowing**: a change that removes something from those fields (a hostname gone
//!   from a route) is applied first, and the Gateway's other children are neither changed
//!   nor deleted until that version is ready and has settled ([`narrow_step`]), so the
//!   record goes before the route's own children stop serving the name. New children are
//!   still created. A change that only adds is not held.
//!
//! The state lives on the object (annotations [`labels::DRAIN_STARTED_AT`] and
//! [`labels::DRAINED_AT`]), so it survives a restart. Pure: times are arguments.

use k8s_openapi::jiff::Timestamp;
use serde_json::Value;

use super::readiness::Readiness;
use super::replacement::seconds_since;
use super::set::is_subset;
use crate::api::Drain;
use crate::render::labels;

/// An annotation of `live` read as a time.
fn annotation_time(live: &Value, name: &str) -> Option<Timestamp> {
    live["metadata"]["annotations"][name].as_str()?.parse().ok()
}

/// When the drained version of `live` was first ready, if that was recorded for the
/// current drain (a record older than the drain's start is an earlier drain's).
fn drained_at(live: &Value) -> Option<Timestamp> {
    let at = annotation_time(live, labels::DRAINED_AT)?;
    match annotation_time(live, labels::DRAIN_STARTED_AT) {
        Some(started) if at < started => None,
        _ => Some(at),
    }
}

/// What comes next for a child that is deleted after a drain (teardown, prune).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DrainStep {
    /// Apply the drain patch.
    Patch,
    /// The drained version is not ready yet: why.
    Wait(String),
    /// The drained version is ready: record when (the settle time counts from then).
    MarkDrained,
    /// Settling: this many seconds left.
    Settle(u64),
    /// The drained version was not ready within the drain's timeout: delete it anyway,
    /// and say why.
    TimedOut(String),
    /// Drained and settled: delete it.
    Delete,
}

pub use super::set::drained;

/// The next step for `live`, to be deleted after its drain (its readiness judged on the
/// live, drained, version).
#[must_use]
pub fn drain_step(drain: &Drain, live: &Value, ready: &Readiness, now: Timestamp) -> DrainStep {
    if !drained(&drain.patch, live) {
        return DrainStep::Patch;
    }
    if let Some(at) = drained_at(live) {
        return settle(drain, at, now).map_or(DrainStep::Delete, DrainStep::Settle);
    }
    if let Readiness::NotReady(why) = ready {
        let Some(waited) = live["metadata"]["annotations"][labels::DRAIN_STARTED_AT]
            .as_str()
            .and_then(|t| seconds_since(t, now))
        else {
            // Drained without our patch (it was empty already): patch it anyway, which
            // records when the drain began.
            return DrainStep::Patch;
        };
        if u64::try_from(waited).unwrap_or(0) > drain.timeout() {
            return DrainStep::TimedOut(format!(
                "drained, but not ready after {}s (drain.timeoutSeconds): {why}; deleted anyway",
                drain.timeout()
            ));
        }
        return DrainStep::Wait(why.clone());
    }
    DrainStep::MarkDrained
}

/// Seconds of the settle left after `at` (`None`: settled).
fn settle(drain: &Drain, at: Timestamp, now: Timestamp) -> Option<u64> {
    let total = drain.settle_seconds.unwrap_or(0);
    let since = u64::try_from(now.as_second() - at.as_second()).unwrap_or(0);
    (since < total).then(|| total - since)
}

/// The patch [`DrainStep::Patch`] sends: the drain's `patch`, with the drain's start at
/// `now` recorded on the object (what [`drain_step`] reads back).
#[must_use]
pub fn drain_patch(drain: &Drain, now: Timestamp) -> Value {
    let mut patch = drain.patch.clone();
    if let Value::Object(p) = &mut patch {
        let meta = p
            .entry("metadata")
            .or_insert_with(|| Value::Object(serde_json::Map::new()));
        if !meta["annotations"].is_object() {
            meta["annotations"] = Value::Object(serde_json::Map::new());
        }
        meta["annotations"][labels::DRAIN_STARTED_AT] = Value::String(now.to_string());
    }
    patch
}

/// Where a drained child that is kept, but changed, stands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NarrowStep {
    /// Nothing of its own holds the others (no narrowing, or one that has settled).
    Idle,
    /// Its change removes something it advertises: apply it now, alone, recording the
    /// start ([`start_narrowing`]).
    Start,
    /// Narrowed; that version is not ready yet: why.
    Wait(String),
    /// The narrowed version is ready: record when.
    MarkDrained,
    /// Settling: this many seconds left.
    Settle(u64),
    /// The narrowed version was not ready within the drain's timeout: the others go on,
    /// and why is said once (then recorded as drained).
    TimedOut(String),
}

impl NarrowStep {
    /// Whether the Gateway's other children wait.
    #[must_use]
    pub fn holds(&self) -> bool {
        !matches!(self, Self::Idle | Self::TimedOut(_))
    }
}

/// Whether changing `live` into `desired` removes something from the fields the drain
/// `patch` empties: an item of a list there that no item of the new list matches (the
/// new item's fields all the same in the old one, as applies compare), or a value there
/// changed.
#[must_use]
pub fn narrows(patch: &Value, desired: &Value, live: &Value) -> bool {
    match patch {
        Value::Object(p) => p
            .iter()
            .any(|(k, sub)| narrows(sub, &desired[k.as_str()], &live[k.as_str()])),
        _ => removes(live, desired),
    }
}

/// Whether `new` lacks something `old` has (fields only `old` has in a map are the
/// server's defaults, not ours: ignored).
fn removes(old: &Value, new: &Value) -> bool {
    match (old, new) {
        (Value::Null, _) => false,
        (Value::Array(o), Value::Array(n)) => {
            // Both lists mostly keep their order (a DNSEndpoint's endpoints, a gateway's
            // hosts: thousands on a shared Gateway): each old item is looked for from
            // where the one before it was found, then round from the start. The same
            // answer as looking through all of `n` for each, in one pass when the lists
            // agree.
            let mut from = 0;
            o.iter().any(|item| {
                let at = (from..n.len())
                    .chain(0..from.min(n.len()))
                    .find(|&i| is_subset(&n[i], item));
                at.map(|i| from = i + 1).is_none()
            })
        }
        (Value::Array(o), Value::Null) => !o.is_empty(),
        (Value::Object(o), Value::Object(n)) => n
            .iter()
            .any(|(k, v)| o.get(k).is_some_and(|ov| removes(ov, v))),
        (Value::Object(o), Value::Null) => !o.is_empty(),
        (a, b) => !is_subset(b, a),
    }
}

/// The step of a drained child the plan keeps: `desired` as rendered, `live` as it is,
/// `ready` judged on `live`.
#[must_use]
pub fn narrow_step(
    drain: &Drain,
    desired: &Value,
    live: &Value,
    ready: &Readiness,
    now: Timestamp,
) -> NarrowStep {
    if narrows(&drain.patch, desired, live) {
        return NarrowStep::Start;
    }
    let Some(started) = annotation_time(live, labels::DRAIN_STARTED_AT) else {
        return NarrowStep::Idle;
    };
    if let Some(at) = drained_at(live) {
        return settle(drain, at, now).map_or(NarrowStep::Idle, NarrowStep::Settle);
    }
    match ready {
        Readiness::Ready => NarrowStep::MarkDrained,
        Readiness::NotReady(why) => {
            let waited = u64::try_from(now.as_second() - started.as_second()).unwrap_or(0);
            if waited > drain.timeout() {
                NarrowStep::TimedOut(format!(
                    "narrowed, but not ready after {}s (drain.timeoutSeconds): {why}; the other children are changed anyway",
                    drain.timeout()
                ))
            } else {
                NarrowStep::Wait(why.clone())
            }
        }
        Readiness::Missing => NarrowStep::Wait("not found".into()),
    }
}

/// `desired` with the narrowing's start recorded (what [`NarrowStep::Start`] applies).
#[must_use]
pub fn start_narrowing(desired: &Value, now: Timestamp) -> Value {
    let mut out = desired.clone();
    let meta = &mut out["metadata"];
    if !meta["annotations"].is_object() {
        meta["annotations"] = Value::Object(serde_json::Map::new());
    }
    meta["annotations"][labels::DRAIN_STARTED_AT] = Value::String(now.to_string());
    out
}

/// `desired` carrying the start of a narrowing still under way on `live`: a later change
/// of the object (that does not narrow it again) must not drop the record while the
/// narrowing holds the others.
#[must_use]
pub fn keep_narrowing(desired: &Value, live: &Value) -> Option<Value> {
    let started = live["metadata"]["annotations"][labels::DRAIN_STARTED_AT].as_str()?;
    let mut out = desired.clone();
    let meta = &mut out["metadata"];
    if !meta["annotations"].is_object() {
        meta["annotations"] = Value::Object(serde_json::Map::new());
    }
    meta["annotations"][labels::DRAIN_STARTED_AT] = Value::String(started.to_owned());
    Some(out)
}

/// In words, what a narrowing step holds the others for.
#[must_use]
pub fn narrowing_words(key: &str, step: &NarrowStep, drain: &Drain) -> Option<String> {
    let settle = drain.settle_seconds.unwrap_or(0);
    match step {
        NarrowStep::Idle | NarrowStep::TimedOut(_) => None,
        NarrowStep::Start => Some(format!("{key} narrowed; waiting for it to be ready")),
        NarrowStep::Wait(why) => Some(format!("{key} narrowed; waiting for it to be ready: {why}")),
        // The same words through the settle: no status write per pass.
        NarrowStep::MarkDrained | NarrowStep::Settle(_) => Some(format!(
            "{key} narrowed and ready; the others change once it has been for {settle} s"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn drain() -> Drain {
        Drain {
            patch: json!({"spec": {"endpoints": []}}),
            settle_seconds: Some(5),
            timeout_seconds: None,
        }
    }

    fn dns(hosts: &[&str]) -> Value {
        let endpoints: Vec<Value> = hosts
            .iter()
            .map(|h| json!({"dnsName": h, "recordType": "A", "targets": ["192.0.2.10"]}))
            .collect();
        json!({"apiVersion": "externaldns.k8s.io/v1alpha1", "kind": "DNSEndpoint",
            "metadata": {"name": "d", "namespace": "ns", "generation": 3},
            "spec": {"endpoints": endpoints}})
    }

    #[test]
    fn a_drained_child_is_deleted_only_once_ready_and_settled() {
        let drain = drain();
        let now: Timestamp = "2026-01-01T00:00:10Z".parse().unwrap();
        let mut dns = dns(&["a.example.com"]);
        // Records still there: empty them first, whatever the readiness says.
        assert_eq!(
            drain_step(&drain, &dns, &Readiness::Ready, now),
            DrainStep::Patch
        );
        // Emptied (the server may leave an empty list out): wait for the downstream.
        dns["spec"] = json!({});
        let waiting = Readiness::NotReady("observedGeneration 3 < generation 4".into());
        assert_eq!(
            drain_step(&drain, &dns, &waiting, now),
            DrainStep::Patch,
            "drained without our patch: patched, so that the drain's start is recorded"
        );
        dns["metadata"]["annotations"] =
            json!({ labels::DRAIN_STARTED_AT: "2026-01-01T00:00:09Z" });
        assert_eq!(
            drain_step(&drain, &dns, &waiting, now),
            DrainStep::Wait("observedGeneration 3 < generation 4".into())
        );
        dns["spec"]["endpoints"] = json!([]);
        assert_eq!(
            drain_step(&drain, &dns, &Readiness::Ready, now),
            DrainStep::MarkDrained
        );
        dns["metadata"]["annotations"] = json!({ labels::DRAINED_AT: "2026-01-01T00:00:08Z" });
        assert_eq!(
            drain_step(&drain, &dns, &Readiness::Ready, now),
            DrainStep::Settle(3)
        );
        dns["metadata"]["annotations"] = json!({ labels::DRAINED_AT: "2026-01-01T00:00:05Z" });
        assert_eq!(
            drain_step(&drain, &dns, &Readiness::Ready, now),
            DrainStep::Delete
        );
        // A record of an earlier drain (a narrowing before the teardown) does not count.
        dns["metadata"]["annotations"] = json!({
            labels::DRAINED_AT: "2026-01-01T00:00:01Z",
            labels::DRAIN_STARTED_AT: "2026-01-01T00:00:09Z",
        });
        assert_eq!(
            drain_step(&drain, &dns, &waiting, now),
            DrainStep::Wait("observedGeneration 3 < generation 4".into())
        );
        // Not ready within the drain's timeout (counted from the drain patch): deleted
        // anyway, saying why.
        dns["metadata"]["annotations"] =
            json!({ labels::DRAIN_STARTED_AT: "2026-01-01T00:00:00Z" });
        let short = Drain {
            timeout_seconds: Some(9),
            ..drain.clone()
        };
        assert!(matches!(
            drain_step(&short, &dns, &waiting, now),
            DrainStep::TimedOut(why) if why.contains("not ready after 9s") && why.contains("observedGeneration 3 < generation 4")
        ));
        assert_eq!(
            drain_step(&drain, &dns, &waiting, now),
            DrainStep::Wait("observedGeneration 3 < generation 4".into()),
            "within the default timeout"
        );
        // A drain of a scalar field compares it as is.
        let scale = Drain {
            patch: json!({"spec": {"replicas": 0}}),
            settle_seconds: None,
            timeout_seconds: None,
        };
        let live = json!({"metadata": {"annotations": { labels::DRAINED_AT: "2026-01-01T00:00:10Z" }}, "spec": {"replicas": 0}});
        assert_eq!(
            drain_step(&scale, &live, &Readiness::Ready, now),
            DrainStep::Delete
        );
        assert!(!drained(&scale.patch, &json!({"spec": {}})));
    }

    #[test]
    fn only_a_change_that_removes_what_is_advertised_narrows() {
        let p = drain().patch;
        let two = dns(&["a.example.com", "b.example.com"]);
        let one = dns(&["a.example.com"]);
        assert!(narrows(&p, &one, &two), "a hostname removed");
        assert!(!narrows(&p, &two, &one), "a hostname added");
        assert!(!narrows(&p, &two, &two), "the same");
        // The server's defaults on the live items are not ours.
        let mut defaulted = two.clone();
        defaulted["spec"]["endpoints"][0]["labels"] = json!({});
        assert!(!narrows(&p, &two, &defaulted));
        // Another address: the old one is no longer advertised.
        let mut moved = two.clone();
        moved["spec"]["endpoints"][1]["targets"] = json!(["192.0.2.11"]);
        assert!(narrows(&p, &moved, &two));
        // Rendered with no endpoints at all.
        let mut none = two.clone();
        none["spec"] = json!({});
        assert!(narrows(&p, &none, &two));
        // Fields outside the drain's are not looked at.
        let mut other = two.clone();
        other["metadata"]["labels"] = json!({"x": "y"});
        assert!(!narrows(&p, &two, &other));
    }

    #[test]
    fn a_long_list_narrows_only_when_an_item_is_gone_whatever_its_order() {
        let p = drain().patch;
        let names: Vec<String> = (0..300).map(|i| format!("h{i:03}.example.com")).collect();
        fn refs(v: &[String]) -> Vec<&str> {
            v.iter().map(String::as_str).collect()
        }
        let all = dns(&refs(&names));
        assert!(!narrows(&p, &all, &all), "the same");
        let mut reversed = names.clone();
        reversed.reverse();
        assert!(!narrows(&p, &dns(&refs(&reversed)), &all), "reordered");
        let mut rotated = names.clone();
        rotated.rotate_left(17);
        assert!(!narrows(&p, &dns(&refs(&rotated)), &all), "rotated");
        let mut added = names.clone();
        added.insert(150, "new.example.com".into());
        assert!(
            !narrows(&p, &dns(&refs(&added)), &all),
            "one added in the middle"
        );
        for gone in [0, 150, 299] {
            let mut fewer = names.clone();
            fewer.remove(gone);
            assert!(
                narrows(&p, &dns(&refs(&fewer)), &all),
                "item {gone} removed"
            );
            let mut swapped = rotated.clone();
            swapped.retain(|h| *h != names[gone]);
            assert!(
                narrows(&p, &dns(&refs(&swapped)), &all),
                "item {gone} removed, rotated"
            );
        }
    }

    #[test]
    fn a_narrowing_holds_the_others_until_its_version_is_ready_and_settled() {
        let drain = drain();
        let now: Timestamp = "2026-01-01T00:00:10Z".parse().unwrap();
        let one = dns(&["a.example.com"]);
        let two = dns(&["a.example.com", "b.example.com"]);
        let waiting = Readiness::NotReady("observedGeneration 3 < generation 4".into());
        assert_eq!(
            narrow_step(&drain, &one, &two, &Readiness::Ready, now),
            NarrowStep::Start
        );
        // Nothing narrowed ever: nothing holds.
        assert_eq!(
            narrow_step(&drain, &two, &two, &waiting, now),
            NarrowStep::Idle
        );
        // Applied with its start recorded.
        let started = start_narrowing(&one, "2026-01-01T00:00:08Z".parse().unwrap());
        assert_eq!(
            narrow_step(&drain, &one, &started, &waiting, now),
            NarrowStep::Wait("observedGeneration 3 < generation 4".into())
        );
        assert!(narrow_step(&drain, &one, &started, &waiting, now).holds());
        assert_eq!(
            narrow_step(&drain, &one, &started, &Readiness::Ready, now),
            NarrowStep::MarkDrained
        );
        let mut marked = started.clone();
        marked["metadata"]["annotations"][labels::DRAINED_AT] = json!("2026-01-01T00:00:09Z");
        assert_eq!(
            narrow_step(&drain, &one, &marked, &Readiness::Ready, now),
            NarrowStep::Settle(4)
        );
        let done = narrow_step(
            &drain,
            &one,
            &marked,
            &waiting,
            "2026-01-01T00:00:14Z".parse().unwrap(),
        );
        assert_eq!(done, NarrowStep::Idle, "settled: the others go on");
        assert!(!done.holds());
        // A downstream that never answers does not hold the others for good.
        let later: Timestamp = "2026-01-01T00:05:09Z".parse().unwrap();
        let step = narrow_step(&drain, &one, &started, &waiting, later);
        assert!(
            matches!(&step, NarrowStep::TimedOut(why) if why.contains("300s")),
            "{step:?}"
        );
        assert!(!step.holds());
        // A later change that does not narrow carries the start along.
        let kept = keep_narrowing(&two, &started).unwrap();
        assert_eq!(
            kept["metadata"]["annotations"][labels::DRAIN_STARTED_AT],
            json!("2026-01-01T00:00:08Z")
        );
        assert!(keep_narrowing(&two, &two).is_none());
    }

    #[test]
    fn the_drain_patch_records_its_start_beside_what_it_empties() {
        let now: Timestamp = "2026-01-01T00:00:10Z".parse().unwrap();
        let p = drain_patch(&drain(), now);
        assert_eq!(p["spec"], json!({"endpoints": []}));
        assert_eq!(
            p["metadata"]["annotations"][labels::DRAIN_STARTED_AT],
            "2026-01-01T00:00:10Z"
        );
        // Annotations the patch sets itself are kept.
        let mut d = drain();
        d.patch["metadata"] = json!({"annotations": {"example.com/a": "b"}});
        let p = drain_patch(&d, now);
        assert_eq!(p["metadata"]["annotations"]["example.com/a"], "b");
        let started = p["metadata"]["annotations"][labels::DRAIN_STARTED_AT].as_str();
        assert_eq!(started, Some("2026-01-01T00:00:10Z"));
        // What drain_step reads back: patched, so no longer Patch.
        let mut dns = dns(&[]);
        dns["spec"] = json!({});
        dns["metadata"]["annotations"] = p["metadata"]["annotations"].clone();
        assert_ne!(
            drain_step(&d, &dns, &Readiness::Ready, now),
            DrainStep::Patch
        );
    }
}
