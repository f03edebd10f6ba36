//! One object, one parent. Two parents may render an object with the same group, kind,
//! namespace and name (a template with a fixed name, a route attached to two Gateways
//! whose template does not name the Gateway). The parent that already holds the live
//! object keeps it (the planner checks every live child, see
//! [`super::templates::held_by_another`]); when none exists yet, the oldest parent by
//! `creationTimestamp`, then by namespace and name, keeps it, and the others get a
//! template error and write nothing for it.
//!
//! In: every parent's desired children. Out: for each contested object, the claim that
//! keeps it.

use std::collections::BTreeMap;

use serde_json::Value;

use super::labels;
use crate::snapshot::ObjectKey;

/// One parent's wish for one object.
#[derive(Clone, Debug)]
pub struct Claim {
    /// The object's identity.
    pub key: ObjectKey,
    /// The object as the parent renders it (labels and owner reference included).
    pub object: Value,
    /// Orders claimants: older first (see [`rank`]).
    pub rank: Rank,
}

/// `(parent creationTimestamp, parent namespace/name, Gateway creationTimestamp, Gateway
/// namespace/name)`; a missing timestamp (an object not created yet) sorts last.
pub type Rank = (String, String, String, String);

fn created_and_name(obj: &Value) -> (String, String) {
    let m = &obj["metadata"];
    (
        m["creationTimestamp"]
            .as_str()
            .map_or_else(|| "~".to_owned(), str::to_owned),
        format!(
            "{}/{}",
            m["namespace"].as_str().unwrap_or_default(),
            m["name"].as_str().unwrap_or_default()
        ),
    )
}

/// The rank of a parent (a Gateway, or a route under a Gateway).
#[must_use]
pub fn rank(parent: &Value, gateway: &Value) -> Rank {
    let (pc, pn) = created_and_name(parent);
    let (gc, gn) = created_and_name(gateway);
    (pc, pn, gc, gn)
}

/// For every object claimed by more than one parent (told apart by the parent and
/// Gateway UID labels the planner put on it), the claim that keeps it.
#[must_use]
pub fn winners(claims: Vec<Claim>) -> Vec<Claim> {
    let mut by_key: BTreeMap<ObjectKey, Vec<Claim>> = BTreeMap::new();
    for c in claims {
        by_key.entry(c.key.clone()).or_default().push(c);
    }
    by_key
        .into_values()
        .filter_map(|mut cs| {
            let parent = |c: &Claim| {
                (
                    labels::parent_uid(&c.object).map(str::to_owned),
                    labels::gateway_uid(&c.object).map(str::to_owned),
                )
            };
            let first = parent(&cs[0]);
            if cs.iter().all(|c| parent(c) == first) {
                return None;
            }
            cs.sort_by(|a, b| a.rank.cmp(&b.rank));
            cs.into_iter().next()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn claim(parent: &str, created: Option<&str>, name: &str) -> Claim {
        let object = json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "shared", "namespace": "team",
                "labels": {labels::PARENT_UID: parent, labels::GATEWAY_UID: parent}}
        });
        let mut gw = json!({"metadata": {"name": name, "namespace": "team"}});
        if let Some(c) = created {
            gw["metadata"]["creationTimestamp"] = json!(c);
        }
        Claim {
            key: ObjectKey::of(&object),
            object,
            rank: rank(&gw, &gw),
        }
    }

    #[test]
    fn the_oldest_parent_then_the_first_name_keeps_an_object() {
        let w = winners(vec![
            claim("b", Some("2026-01-02T00:00:00Z"), "b"),
            claim("a", Some("2026-01-03T00:00:00Z"), "a"),
        ]);
        assert_eq!(w.len(), 1);
        assert_eq!(labels::parent_uid(&w[0].object), Some("b"));
        let w = winners(vec![claim("z", None, "z"), claim("y", None, "y")]);
        assert_eq!(labels::parent_uid(&w[0].object), Some("y"));
        // Created beats not created yet.
        let w = winners(vec![
            claim("n", None, "a"),
            claim("o", Some("2026-01-01T00:00:00Z"), "z"),
        ]);
        assert_eq!(labels::parent_uid(&w[0].object), Some("o"));
        // One parent only: nothing to arbitrate.
        assert!(winners(vec![claim("a", None, "a"), claim("a", None, "a")]).is_empty());
    }
}
