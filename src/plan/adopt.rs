//! Adoption: a Gateway template that takes over the objects an earlier form of it made
//! under another kind ([`crate::api::Adopt`]). Pure: which live child is the predecessor
//! of which rendered object, whether the template waits for predecessors to be released,
//! and which predecessors must stay until their successors are ready.

use std::sync::Arc;

use serde_json::Value;

use super::drain::drained;
use super::set::{Held, SetResult};
use crate::api::Adopt;
use crate::kinds::group_of;
use crate::render::labels;
use crate::snapshot::ObjectKey;

/// A rendered object and the live child it takes over.
pub(super) struct Adoption {
    /// The index of the rendered object among the template's objects.
    pub object: usize,
    /// The predecessor (the first found).
    pub old: Arc<Value>,
    /// Every live copy of it: one per version its kind is watched at (two revisions of a
    /// class may read it at two versions while a rollout runs).
    pub copies: Vec<ObjectKey>,
}

/// The predecessors of `objects` among the parent's live children `live`: an object of a
/// kind `adopt.from` names (by group and kind, at any version), in the same cluster, with
/// the name of a rendered object. Each rendered object has at most one, possibly seen at
/// several versions.
pub(super) fn predecessors(adopt: &Adopt, objects: &[Value], live: &[Arc<Value>]) -> Vec<Adoption> {
    let adopted = |l: &Value| {
        let group = group_of(l["apiVersion"].as_str().unwrap_or_default());
        let kind = l["kind"].as_str().unwrap_or_default();
        adopt
            .from
            .iter()
            .any(|k| group_of(&k.api_version) == group && k.kind == kind)
    };
    let candidates: Vec<&Arc<Value>> = live.iter().filter(|l| adopted(l)).collect();
    if candidates.is_empty() {
        return Vec::new();
    }
    let cluster = |o: &Value| {
        o["metadata"]["annotations"][labels::CLUSTER]
            .as_str()
            .map(str::to_owned)
    };
    objects
        .iter()
        .enumerate()
        .filter_map(|(i, o)| {
            let name = o["metadata"]["name"].as_str()?;
            let same: Vec<&&Arc<Value>> = candidates
                .iter()
                .filter(|l| {
                    l["metadata"]["name"].as_str() == Some(name) && cluster(l) == cluster(o)
                })
                .collect();
            let first = same.first()?;
            let kind = first["kind"].as_str();
            Some(Adoption {
                object: i,
                old: Arc::clone(first),
                copies: same
                    .iter()
                    .filter(|l| l["kind"].as_str() == kind)
                    .map(|l| ObjectKey::of(l))
                    .collect(),
            })
        })
        .collect()
}

/// Whether template `name` may write its objects this pass: every predecessor shows
/// `adopt.release`. Otherwise the release of each that does not is planned
/// (`out.releases`), the template is held (its live objects, predecessors included, are
/// kept; its dependents wait), and `false`.
pub(super) fn released(
    adopt: &Adopt,
    name: &str,
    adoptions: &[Adoption],
    out: &mut SetResult,
) -> bool {
    let pending: Vec<&Arc<Value>> = adoptions
        .iter()
        .map(|a| &a.old)
        .filter(|old| !drained(&adopt.release, old))
        .collect();
    if pending.is_empty() {
        return true;
    }
    let keys: Vec<String> = pending
        .iter()
        .map(|o| ObjectKey::of(o).to_string())
        .collect();
    for old in pending {
        out.releases
            .push((ObjectKey::of(old), adopt.release.clone()));
    }
    out.held.push(Held {
        template: name.to_owned(),
        reason: format!(
            "releasing {} (adopt.release) before the objects that take them over are written",
            keys.join(", ")
        ),
    });
    out.unsettled.insert(name.to_owned());
    false
}

/// Copies `adopt.annotations` from each predecessor to the object taking it over, where
/// the template did not set them.
pub(super) fn copy_annotations(adopt: &Adopt, objects: &mut [Value], adoptions: &[Adoption]) {
    for a in adoptions {
        let Some(obj) = objects.get_mut(a.object) else {
            continue;
        };
        for key in &adopt.annotations {
            let Some(v) = a.old["metadata"]["annotations"][key.as_str()].as_str() else {
                continue;
            };
            if !obj["metadata"]["annotations"].is_object() {
                obj["metadata"]["annotations"] = Value::Object(serde_json::Map::new());
            }
            let ann = &mut obj["metadata"]["annotations"][key.as_str()];
            if ann.is_null() {
                *ann = Value::String(v.to_owned());
            }
        }
    }
}

/// Keeps each predecessor whose successor (`successor(index)`: its key) is not ready yet;
/// the others are pruned with the rest of what the plan no longer renders.
pub(super) fn keep_until_ready(
    name: &str,
    adoptions: &[Adoption],
    successor: impl Fn(usize) -> Option<ObjectKey>,
    out: &mut SetResult,
) {
    for a in adoptions {
        let ready = successor(a.object).is_some_and(|key| {
            out.states
                .iter()
                .any(|s| s.template == name && s.key == key && s.readiness.is_ready())
        });
        if !ready {
            out.keep.extend(a.copies.iter().cloned());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::AdoptedKind;
    use crate::plan::readiness::Readiness;
    use crate::plan::set::ChildState;
    use serde_json::json;

    fn adopt() -> Adopt {
        Adopt {
            from: vec![AdoptedKind {
                api_version: "elbv2.aws.upbound.io/v1beta1".into(),
                kind: "LB".into(),
            }],
            annotations: vec!["crossplane.io/external-name".into()],
            release: json!({"spec": {"managementPolicies": ["Observe"]}}),
        }
    }

    fn old(name: &str, policies: &[&str]) -> Arc<Value> {
        Arc::new(json!({
            "apiVersion": "elbv2.aws.upbound.io/v1beta2", "kind": "LB",
            "metadata": {"name": name, "labels": {labels::TEMPLATE: "LB"},
                "annotations": {"crossplane.io/external-name": format!("arn:{name}")}},
            "spec": {"managementPolicies": policies},
        }))
    }

    fn new(name: &str) -> Value {
        json!({"apiVersion": "elbv2.aws.m.upbound.io/v1beta1", "kind": "LB",
            "metadata": {"name": name, "namespace": "infra"}})
    }

    #[test]
    fn the_predecessor_has_an_adopted_kind_at_any_version_and_the_same_name() {
        let other_kind = Arc::new(
            json!({"apiVersion": "ec2.aws.upbound.io/v1beta1", "kind": "LB",
            "metadata": {"name": "a"}}),
        );
        let live = vec![other_kind, old("b", &["*"]), old("a", &["*"])];
        let found = predecessors(&adopt(), &[new("a"), new("c")], &live);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].object, 0);
        assert_eq!(found[0].old["metadata"]["name"], "a");
        // Nothing of an adopted kind: nothing to do.
        assert!(predecessors(&adopt(), &[new("a")], &[]).is_empty());
    }

    #[test]
    fn the_template_waits_until_every_predecessor_is_released() {
        let live = vec![old("a", &["*"]), old("b", &["Observe"])];
        let found = predecessors(&adopt(), &[new("a"), new("b")], &live);
        let mut out = SetResult::default();
        assert!(!released(&adopt(), "LB", &found, &mut out));
        // Only the one not released yet gets the patch.
        assert_eq!(out.releases.len(), 1);
        assert_eq!(out.releases[0].0.name, "a");
        assert!(out.unsettled.contains("LB"));
        assert!(out.held[0].reason.contains("releasing"), "{:?}", out.held);
        let live = vec![old("a", &["Observe"]), old("b", &["Observe"])];
        let found = predecessors(&adopt(), &[new("a"), new("b")], &live);
        let mut out = SetResult::default();
        assert!(released(&adopt(), "LB", &found, &mut out));
        assert!(out.releases.is_empty() && out.held.is_empty());
    }

    #[test]
    fn the_successor_carries_the_external_name_unless_the_template_set_one() {
        let live = vec![old("a", &["Observe"]), old("b", &["Observe"])];
        let mut objects = vec![new("a"), new("b")];
        objects[1]["metadata"]["annotations"] = json!({"crossplane.io/external-name": "mine"});
        let found = predecessors(&adopt(), &objects, &live);
        copy_annotations(&adopt(), &mut objects, &found);
        assert_eq!(
            objects[0]["metadata"]["annotations"]["crossplane.io/external-name"],
            "arn:a"
        );
        assert_eq!(
            objects[1]["metadata"]["annotations"]["crossplane.io/external-name"],
            "mine"
        );
    }

    #[test]
    fn a_predecessor_stays_until_its_successor_is_ready() {
        let live = vec![old("a", &["Observe"]), old("b", &["Observe"])];
        let objects = vec![new("a"), new("b")];
        let found = predecessors(&adopt(), &objects, &live);
        let key = |i: usize| Some(ObjectKey::of(&objects[i]));
        let mut out = SetResult::default();
        out.states.push(ChildState {
            template: "LB".into(),
            key: ObjectKey::of(&objects[0]),
            readiness: Readiness::Ready,
        });
        out.states.push(ChildState {
            template: "LB".into(),
            key: ObjectKey::of(&objects[1]),
            readiness: Readiness::NotReady("no dnsName".into()),
        });
        keep_until_ready("LB", &found, key, &mut out);
        let kept: Vec<&str> = out.keep.iter().map(|k| k.name.as_str()).collect();
        assert_eq!(kept, ["b"]);
    }
}
