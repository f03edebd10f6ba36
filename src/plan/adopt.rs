//! Adoption: a Gateway template that takes over the objects an earlier form of it made
//! under another kind ([`crate::api::Adopt`]). Pure: which live child is the predecessor
//! of which rendered object, whether the template waits for predecessors to be released,
//! and which predecessors must stay until their successors are ready.

use std::sync::Arc;

use serde_json::Value;

use super::set::{Held, SetResult, drained};
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
/// (`out.releases`) and `false`: see [`serve_with_predecessors`] for the rest of the pass.
pub(super) fn released(adopt: &Adopt, adoptions: &[Adoption], out: &mut SetResult) -> bool {
    let pending: Vec<&Arc<Value>> = adoptions
        .iter()
        .map(|a| &a.old)
        .filter(|old| !drained(&adopt.release, old))
        .collect();
    for old in &pending {
        out.releases
            .push((ObjectKey::of(old), adopt.release.clone()));
    }
    pending.is_empty()
}

/// Template `name`, whose predecessors are being released, writes nothing this pass; its
/// live objects and the predecessors stay. When every object it rendered (`rendered` of
/// them) has a predecessor, those serve meanwhile, as the old version of a
/// make-before-break template does: they are what its dependents and the status read
/// (`resources.<name>`), their readiness is the template's, and the wait is a note, not a
/// hold (the Gateway stays Programmed while nothing outside the cluster changes). Otherwise
/// the template is held and its dependents wait.
pub(super) fn serve_with_predecessors(
    compiled: &crate::render::engine::Compiled,
    entry: &crate::api::TemplateEntry,
    live: &[Arc<Value>],
    rendered: usize,
    adoptions: &[Adoption],
    out: &mut SetResult,
) {
    let name = entry.name.as_str();
    let releasing: Vec<String> = adoptions
        .iter()
        .map(|a| ObjectKey::of(&a.old).to_string())
        .collect();
    let why = format!(
        "template {name}: releasing {} (adopt.release) before the objects that take them over are written",
        releasing.join(", ")
    );
    out.keep.extend(
        live.iter()
            .filter(|l| labels::template(l) == Some(name))
            .map(|l| ObjectKey::of(l)),
    );
    out.keep
        .extend(adoptions.iter().flat_map(|a| a.copies.iter().cloned()));
    if rendered > 0 && adoptions.len() == rendered {
        for a in adoptions {
            if let Ok(r) = super::readiness::judge(compiled, entry, Some(&a.old)) {
                out.states.push(super::set::ChildState {
                    template: name.to_owned(),
                    key: ObjectKey::of(&a.old),
                    readiness: r,
                });
            }
        }
        out.resources.insert(
            name.to_owned(),
            adoptions.iter().map(|a| Arc::clone(&a.old)).collect(),
        );
        out.warnings.push(why);
    } else {
        out.held.push(Held {
            template: name.to_owned(),
            reason: why,
        });
        out.unsettled.insert(name.to_owned());
    }
}

/// Copies `adopt.annotations` from each predecessor to the object taking it over, where
/// the template did not set them.
pub(super) fn copy_annotations(adopt: &Adopt, objects: &mut [Value], adoptions: &[Adoption]) {
    for a in adoptions {
        if let Some(obj) = objects.get_mut(a.object) {
            copy_from(adopt, obj, &a.old);
        }
    }
}

/// Keeps `adopt.annotations` the object carries live (`live`, once its predecessor is
/// gone), where the template does not set them: applying the object without them would
/// remove them, and a Crossplane managed resource without its external name is a new
/// cloud resource.
pub(super) fn keep_annotations(adopt: &Adopt, obj: &mut Value, live: Option<&Arc<Value>>) {
    if let Some(l) = live {
        copy_from(adopt, obj, l);
    }
}

fn copy_from(adopt: &Adopt, obj: &mut Value, from: &Value) {
    for key in &adopt.annotations {
        let Some(v) = from["metadata"]["annotations"][key.as_str()].as_str() else {
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

/// The predecessor of the object at `index`, and its readiness, while it serves in the
/// object's place: the object (its readiness `ready`) is not ready yet. It is kept
/// meanwhile (every live copy); once the object is ready it is pruned with the rest of
/// what the plan no longer renders.
pub(super) fn serving<'l>(
    compiled: &crate::render::engine::Compiled,
    entry: &crate::api::TemplateEntry,
    adoptions: &'l [Adoption],
    index: usize,
    ready: &super::readiness::Readiness,
    out: &mut SetResult,
) -> Option<(&'l Arc<Value>, super::readiness::Readiness)> {
    if ready.is_ready() {
        return None;
    }
    let a = adoptions.iter().find(|a| a.object == index)?;
    out.keep.extend(a.copies.iter().cloned());
    let r = super::readiness::judge(compiled, entry, Some(&a.old)).ok()?;
    Some((&a.old, r))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::AdoptedKind;
    use crate::plan::readiness::Readiness;
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
        assert!(!released(&adopt(), &found, &mut out));
        // Only the one not released yet gets the patch.
        assert_eq!(out.releases.len(), 1);
        assert_eq!(out.releases[0].0.name, "a");
        let live = vec![old("a", &["Observe"]), old("b", &["Observe"])];
        let found = predecessors(&adopt(), &[new("a"), new("b")], &live);
        let mut out = SetResult::default();
        assert!(released(&adopt(), &found, &mut out));
        assert!(out.releases.is_empty());
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
    fn a_predecessor_serves_and_stays_until_its_successor_is_ready() {
        let entry = crate::api::TemplateEntry {
            name: "LB".into(),
            template: "x: 1".into(),
            ..Default::default()
        };
        let spec = crate::api::GatewayClassBlueprintSpec {
            gateway_templates: vec![entry.clone()],
            ..Default::default()
        };
        let c = crate::render::engine::Compiled::compile("bp", &spec).unwrap();
        let live = vec![old("a", &["Observe"]), old("b", &["Observe"])];
        let found = predecessors(&adopt(), &[new("a"), new("b")], &live);
        let mut out = SetResult::default();
        // "a" is ready: its predecessor goes.
        assert!(serving(&c, &entry, &found, 0, &Readiness::Ready, &mut out).is_none());
        // "b" is not: its predecessor serves (exists: ready by the default rules), and stays.
        let (o, r) = serving(&c, &entry, &found, 1, &Readiness::Missing, &mut out).unwrap();
        assert_eq!(o["metadata"]["name"], "b");
        assert!(r.is_ready());
        let kept: Vec<&str> = out.keep.iter().map(|k| k.name.as_str()).collect();
        assert_eq!(kept, ["b"]);
    }

    #[test]
    fn while_released_the_predecessors_serve_when_each_object_has_one() {
        let entry = crate::api::TemplateEntry {
            name: "LB".into(),
            template: "x: 1".into(),
            ready_when: Some("object.spec.managementPolicies | length > 0".into()),
            ..Default::default()
        };
        let spec = crate::api::GatewayClassBlueprintSpec {
            gateway_templates: vec![entry.clone()],
            ..Default::default()
        };
        let c = crate::render::engine::Compiled::compile("bp", &spec).unwrap();
        let live = vec![old("a", &["*"]), old("b", &["*"])];
        // Every object has a predecessor: they serve; a note, no hold.
        let found = predecessors(&adopt(), &[new("a"), new("b")], &live);
        let mut out = SetResult::default();
        serve_with_predecessors(&c, &entry, &live, 2, &found, &mut out);
        assert!(out.held.is_empty() && out.unsettled.is_empty());
        assert_eq!(out.resources["LB"].len(), 2);
        assert_eq!(out.states.len(), 2);
        assert!(out.states.iter().all(|s| s.readiness.is_ready()));
        assert!(out.warnings[0].contains("releasing"), "{:?}", out.warnings);
        assert_eq!(out.keep.len(), 2);
        // One object is new: nothing serves it, the template is held.
        let found = predecessors(&adopt(), &[new("a"), new("c")], &live);
        let mut out = SetResult::default();
        serve_with_predecessors(&c, &entry, &live, 2, &found, &mut out);
        assert!(out.unsettled.contains("LB"));
        assert!(out.held[0].reason.contains("releasing"), "{:?}", out.held);
        assert!(out.resources.is_empty() && out.states.is_empty());
        // Its live objects stay meanwhile, both predecessors included.
        assert_eq!(out.keep.len(), 2);
    }
}
