//! A deleted Gateway's teardown, decided (pure: times are arguments): which children go
//! next (dependents first: route children before the Gateway's, higher
//! `gatewright.dev/order` first, one template at a time), what is left in members that
//! are not served, which deletions hang, and the `gatewright.dev/Teardown` condition
//! that says so. `controller/teardown.rs` deletes, drains and writes what this decides.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use serde_json::Value;

use crate::gateway::conditions::{Cond, reasons, types};
use crate::render::TemplateSet;
use crate::render::labels;
use crate::snapshot::ObjectKey;
use crate::snapshot::fleet::FleetMember;

/// The children to delete next: route children first, then the Gateway's, each set in
/// reverse template order, one template's children at a time (the next only once they
/// are gone), so nothing is deleted while a child that reads it still exists. The
/// position each child was rendered at is its `gatewright.dev/order` annotation (the
/// order of what is live, there even when the blueprint is gone), else the blueprint's.
#[must_use]
pub fn next_group<'a, T: std::borrow::Borrow<Value>>(
    children: &'a [T],
    gateway_uid: &str,
    order: &(Vec<String>, Vec<String>),
) -> Vec<&'a T> {
    let rank = |c: &T| {
        let c: &Value = c.borrow();
        let t = labels::template(c).unwrap_or_default();
        let route_child = labels::parent_uid(c) != Some(gateway_uid);
        let set = if route_child { &order.1 } else { &order.0 };
        let pos = labels::order(c)
            .or_else(|| set.iter().position(|x| x == t))
            .unwrap_or(usize::MAX - 1);
        (!route_child, std::cmp::Reverse(pos))
    };
    let first = children.iter().map(rank).min();
    children.iter().filter(|c| Some(rank(c)) == first).collect()
}

/// What a teardown leaves in members that are not served, by member: the member and, in
/// words, what is left there and why (`fleet`: the members as the snapshot holds them).
#[must_use]
pub fn left_behind(
    children: &[ObjectKey],
    fleet: &BTreeMap<String, FleetMember>,
) -> Vec<(String, String)> {
    let mut by_member: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for k in children {
        by_member
            .entry(k.cluster.clone())
            .or_default()
            .push(format!("{} {}/{}", k.kind, k.namespace, k.name));
    }
    by_member
        .into_iter()
        .map(|(member, objects)| {
            let why = super::placement::served(&member, fleet)
                .err()
                .unwrap_or_default();
            let words = format!(
                "left in member {member}, which is not served ({why}): {}; delete them there once it is back",
                objects.join(", ")
            );
            (member, words)
        })
        .collect()
}

/// A child whose deletion hangs: its key and why, in words.
#[derive(Debug, PartialEq, Eq)]
pub struct StuckDeletion {
    /// The child's key ([`ObjectKey`]'s words).
    pub child: String,
    /// Since when it has been deleting, and the finalizers that hold it.
    pub why: String,
}

/// The deletions of `group` that have been pending longer than `limit` seconds at `now`,
/// and in how many seconds the next one would be (to look again then).
#[must_use]
pub fn stuck_deletions(
    group: &[&Value],
    limit: i64,
    now: Timestamp,
) -> (Vec<StuckDeletion>, Option<i64>) {
    let mut stuck = Vec::new();
    let mut next_check: Option<i64> = None;
    for c in group {
        let Some(since) = c["metadata"]["deletionTimestamp"]
            .as_str()
            .and_then(|t| super::replacement::seconds_since(t, now))
        else {
            continue;
        };
        if since > limit {
            let fins: Vec<&str> = c["metadata"]["finalizers"]
                .as_array()
                .map(|f| f.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            let child = ObjectKey::of(c).to_string();
            let why = format!(
                "{child} has been deleting for {since}s (finalizers: {})",
                fins.join(", ")
            );
            stuck.push(StuckDeletion { child, why });
        } else {
            let left = limit - since + 1;
            next_check = Some(next_check.map_or(left, |n| n.min(left)));
        }
    }
    (stuck, next_check)
}

/// The `gatewright.dev/Teardown` condition: deleting (naming what goes now, or, while
/// children of the group drain first, what each waits for: `draining`), or stuck (naming
/// each deletion that hangs).
#[must_use]
pub fn teardown_cond(
    left: usize,
    group: &[&Value],
    stuck: &[StuckDeletion],
    draining: &[String],
) -> Cond {
    if stuck.is_empty() && !draining.is_empty() {
        return Cond::f(
            types::TEARDOWN,
            reasons::DELETING,
            &format!(
                "draining before deleting, {left} children left: {}",
                draining.join("; ")
            ),
        );
    }
    if stuck.is_empty() {
        let now: Vec<String> = group.iter().map(|c| ObjectKey::of(c).to_string()).collect();
        return Cond::f(
            types::TEARDOWN,
            reasons::DELETING,
            &format!(
                "deleting children dependents first, {left} left; now: {}",
                now.join(", ")
            ),
        );
    }
    let whys: Vec<&str> = stuck.iter().map(|s| s.why.as_str()).collect();
    Cond::f(
        types::TEARDOWN,
        reasons::DELETION_STUCK,
        &format!("the teardown waits: {}", whys.join("; ")),
    )
}

/// The template set a child of the Gateway of `gateway_uid` was rendered from: the
/// Gateway's own when the Gateway is its parent, else a route's.
#[must_use]
pub fn template_set(child: &Value, gateway_uid: &str) -> TemplateSet {
    if labels::parent_uid(child) == Some(gateway_uid) {
        TemplateSet::Gateway
    } else {
        TemplateSet::Route
    }
}

/// When a teardown that is not done looks again: at the next deletion that would be stuck
/// (`next_check`, seconds), else in 30 s, and sooner when a drain asks (`drain_wake`).
/// Child deletions wake the Gateway before that through the child watches.
#[must_use]
pub fn look_again(next_check: Option<i64>, drain_wake: Option<u64>) -> Duration {
    let again = next_check.map_or(30, |n| u64::try_from(n).unwrap_or(1).max(1));
    Duration::from_secs(drain_wake.map_or(again, |w| w.min(again)))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn child(name: &str, parent: &str, template: &str, order: Option<usize>) -> Value {
        let mut c = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "ns",
            "labels": {labels::PARENT_UID: parent, labels::GATEWAY_UID: "gw", labels::TEMPLATE: template}}});
        if let Some(o) = order {
            c["metadata"]["annotations"] = json!({ labels::ORDER: o.to_string() });
        }
        c
    }

    fn names(g: &[&Value]) -> Vec<String> {
        g.iter()
            .map(|c| c["metadata"]["name"].as_str().unwrap().to_owned())
            .collect()
    }

    #[test]
    fn route_children_go_first_then_the_gateways_from_the_last_template() {
        let order = (
            vec!["cert".to_owned(), "gw".to_owned(), "dns".to_owned()],
            vec!["route".to_owned()],
        );
        let mut children = vec![
            child("cert", "gw", "cert", None),
            child("dns", "gw", "dns", None),
            child("gw", "gw", "gw", None),
            child("r1", "route-1", "route", None),
        ];
        assert_eq!(names(&next_group(&children, "gw", &order)), ["r1"]);
        children.pop();
        assert_eq!(names(&next_group(&children, "gw", &order)), ["dns"]);
        // The annotation wins over the blueprint's order (the blueprint may be gone).
        children[0] = child("cert", "gw", "cert", Some(7));
        assert_eq!(names(&next_group(&children, "gw", &order)), ["cert"]);
        // Without the blueprint, a child without the annotation goes first.
        assert_eq!(
            names(&next_group(&children, "gw", &(Vec::new(), Vec::new()))),
            ["dns", "gw"]
        );
    }

    #[test]
    fn a_deletion_is_stuck_past_the_limit_and_named_with_its_finalizers() {
        let now: Timestamp = "2026-01-01T00:10:00Z".parse().unwrap();
        let mut old = child("old", "gw", "t", None);
        old["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
        old["metadata"]["finalizers"] = json!(["example.com/hold"]);
        let mut young = child("young", "gw", "t", None);
        young["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:09:00Z");
        let fresh = child("fresh", "gw", "t", None);
        let group = vec![&old, &young, &fresh];
        let (stuck, next) = stuck_deletions(&group, 300, now);
        assert_eq!(stuck.len(), 1);
        assert_eq!(stuck[0].child, "ConfigMap ns/old");
        assert!(
            stuck[0].why.contains("600s") && stuck[0].why.contains("example.com/hold"),
            "{}",
            stuck[0].why
        );
        assert_eq!(next, Some(241), "the young one is stuck in 241 s");
        let c = teardown_cond(3, &group, &stuck, &[]);
        assert_eq!(c.reason, reasons::DELETION_STUCK);
        let c = teardown_cond(3, &group, &[], &[]);
        assert_eq!(c.reason, reasons::DELETING);
        assert!(c.message.contains("3 left"), "{}", c.message);
    }

    fn placed(name: &str, member: &str) -> Value {
        let mut c = child(name, "gw", "t", None);
        c["metadata"]["annotations"] = json!({ labels::CLUSTER: member });
        c
    }

    fn member(name: &str, unserved: Option<&str>) -> (String, FleetMember) {
        let m = FleetMember {
            name: name.to_owned(),
            display_name: name.to_owned(),
            labels: BTreeMap::new(),
            properties: BTreeMap::new(),
            addresses: None,
            unserved: unserved.map(str::to_owned),
        };
        (name.to_owned(), m)
    }

    #[test]
    fn what_is_left_is_said_once_per_member_with_why_it_is_not_served() {
        let fleet: BTreeMap<_, _> = [member("fleet/east", Some("unreachable"))].into();
        let left = left_behind(
            &[
                ObjectKey::of(&placed("a", "fleet/east")),
                ObjectKey::of(&placed("b", "fleet/gone")),
                ObjectKey::of(&placed("c", "fleet/east")),
            ],
            &fleet,
        );
        let members: Vec<&str> = left.iter().map(|(m, _)| m.as_str()).collect();
        assert_eq!(members, ["fleet/east", "fleet/gone"]);
        let (_, east) = &left[0];
        assert!(
            east.contains("(unreachable)")
                && east.contains("ConfigMap ns/a, ConfigMap ns/c")
                && !east.contains("ns/b"),
            "{east}"
        );
        // A member missing from the fleet is named as such, not as served.
        let (_, gone) = &left[1];
        assert!(
            gone.contains(super::super::placement::NOT_IN_FLEET) && gone.contains("ConfigMap ns/b"),
            "{gone}"
        );
        assert!(left_behind(&[], &fleet).is_empty());
    }

    #[test]
    fn route_children_of_several_routes_go_together_before_the_gateways() {
        let order = (vec!["gw".to_owned()], vec!["a".to_owned(), "b".to_owned()]);
        let children = vec![
            child("gw", "gw", "gw", None),
            child("r1-a", "route-1", "a", None),
            child("r2-b", "route-2", "b", None),
            child("r1-b", "route-1", "b", None),
        ];
        // The last route template first, whichever route rendered it.
        assert_eq!(
            names(&next_group(&children, "gw", &order)),
            ["r2-b", "r1-b"]
        );
        assert!(next_group::<Value>(&[], "gw", &order).is_empty());
    }

    #[test]
    fn a_group_not_yet_deleting_is_neither_stuck_nor_looked_at_again() {
        let now: Timestamp = "2026-01-01T00:10:00Z".parse().unwrap();
        let (a, b) = (child("a", "gw", "t", None), child("b", "gw", "t", None));
        let (stuck, next) = stuck_deletions(&[&a, &b], 300, now);
        assert!(stuck.is_empty());
        assert_eq!(next, None);
        // Deleting names what goes now.
        let c = teardown_cond(5, &[&a, &b], &stuck, &[]);
        assert_eq!(c.type_, types::TEARDOWN);
        assert!(
            c.message.contains("5 left") && c.message.contains("ConfigMap ns/a, ConfigMap ns/b"),
            "{}",
            c.message
        );
    }

    #[test]
    fn every_stuck_deletion_is_named_and_the_soonest_next_one_counts() {
        let now: Timestamp = "2026-01-01T00:10:00Z".parse().unwrap();
        let deleting = |name: &str, at: &str| {
            let mut c = child(name, "gw", "t", None);
            c["metadata"]["deletionTimestamp"] = json!(at);
            c
        };
        let one = deleting("one", "2026-01-01T00:00:00Z");
        let two = deleting("two", "2026-01-01T00:01:00Z");
        let later = deleting("later", "2026-01-01T00:08:00Z");
        let soon = deleting("soon", "2026-01-01T00:06:00Z");
        let (stuck, next) = stuck_deletions(&[&one, &two, &later, &soon], 300, now);
        let keys: Vec<&str> = stuck.iter().map(|s| s.child.as_str()).collect();
        assert_eq!(keys, ["ConfigMap ns/one", "ConfigMap ns/two"]);
        assert_eq!(next, Some(61), "soon is stuck in 61 s, before later");
        let c = teardown_cond(4, &[&one, &two], &stuck, &[]);
        assert!(
            c.message.contains("ns/one has been deleting for 600s")
                && c.message.contains("ns/two has been deleting for 540s"),
            "{}",
            c.message
        );
    }

    #[test]
    fn drains_are_named_while_nothing_is_stuck_and_a_stuck_deletion_wins() {
        let now: Timestamp = "2026-01-01T00:10:00Z".parse().unwrap();
        let a = child("a", "gw", "t", None);
        let draining = ["ConfigMap ns/a drained; waiting for it to be ready".to_owned()];
        let c = teardown_cond(2, &[&a], &[], &draining);
        assert_eq!(c.reason, reasons::DELETING);
        assert_eq!(
            c.message,
            "draining before deleting, 2 children left: ConfigMap ns/a drained; waiting for it to be ready"
        );
        let mut old = child("old", "gw", "t", None);
        old["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
        let (stuck, _) = stuck_deletions(&[&old], 300, now);
        let c = teardown_cond(2, &[&a, &old], &stuck, &draining);
        assert_eq!(c.reason, reasons::DELETION_STUCK);
        assert!(!c.message.contains("draining"), "{}", c.message);
    }

    #[test]
    fn a_child_is_of_the_gateways_templates_only_when_the_gateway_is_its_parent() {
        assert_eq!(
            template_set(&child("c", "gw", "t", None), "gw"),
            TemplateSet::Gateway
        );
        assert_eq!(
            template_set(&child("c", "route-1", "t", None), "gw"),
            TemplateSet::Route
        );
    }

    #[test]
    fn a_teardown_looks_again_at_the_next_deadline_or_the_drains_else_in_30_s() {
        let s = Duration::from_secs;
        assert_eq!(look_again(None, None), s(30));
        assert_eq!(look_again(Some(241), None), s(241));
        assert_eq!(look_again(Some(0), None), s(1), "never at once");
        assert_eq!(look_again(Some(241), Some(10)), s(10));
        assert_eq!(look_again(None, Some(45)), s(30));
    }
}
