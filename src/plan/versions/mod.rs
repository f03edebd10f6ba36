//! Make-before-break: the version of what a template renders (one per template, or one
//! per object with `rollout.per: Object`), and for each version which one serves, what
//! dependents read and what old objects stay, from the live objects alone (versions are
//! labels, who uses which is an annotation, so it survives a restart).

mod per_object;
mod stamp;
mod step;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use serde_json::Value;

use super::set::{ChildState, SetInput, SetResult};
use crate::render::labels;
use crate::render::prepared::Prepared;
use crate::snapshot::ObjectKey;
use per_object::{SlotsStep, Vanished, keep_vanished};
pub use stamp::VERSION_PLACEHOLDER;
use stamp::{stamp_version, version_label, version_of};
use step::{RolloutStep, finish_rollouts};

/// Stamps the objects a make-before-break template rendered with their version: one for
/// them all, or with `per: Object` one each (and each object's slot: its name as
/// rendered). Returns the template's version (`""` per object; `None` when it rendered
/// nothing, so has no version) and the slots. A template replaced in place is left alone.
pub(super) fn stamp_versions(
    objects: &mut [Value],
    rollout: &crate::api::Rollout,
) -> (Option<String>, Vec<Option<String>>) {
    if !rollout.make_before_break() || objects.is_empty() {
        return (None, vec![None; objects.len()]);
    }
    if rollout.per_object() {
        let slots = objects
            .iter_mut()
            .map(|o| {
                let slot = o["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned();
                let v = version_of(std::slice::from_ref(o), &rollout.fields);
                stamp_version(o, &v);
                Some(slot)
            })
            .collect();
        return (Some(String::new()), slots);
    }
    let v = version_of(objects, &rollout.fields);
    for o in objects.iter_mut() {
        stamp_version(o, &v);
    }
    (Some(v), vec![None; objects.len()])
}

/// A make-before-break template's objects as rendered this pass.
pub(super) struct Rendered<'a> {
    pub name: &'a String,
    pub entry: &'a crate::api::TemplateEntry,
    pub rollout: &'a crate::api::Rollout,
    /// The template's version (`""` per object).
    pub version: String,
    /// Whether every object exists.
    pub complete: bool,
    /// The live objects of what it rendered.
    pub seen: Vec<Arc<Value>>,
    /// Their readiness.
    pub new_states: Vec<ChildState>,
}

/// The replacements of one set's render, template by template in dependency order.
#[derive(Default)]
pub(super) struct Replacements {
    /// The versions of each make-before-break template that dependents read (one per
    /// object for a template versioned per object).
    active: BTreeMap<String, Vec<String>>,
    /// Replacements whose new version is ready: (template, version, old objects).
    finishing: Vec<step::Finishing>,
    /// Objects of per-object templates no longer rendered, kept while read.
    vanished: Vec<Vanished>,
}

impl Replacements {
    /// Which version of each make-before-break template in `deps` a dependent is rendered
    /// from: `template=version` pairs, as the `uses` annotation lists them.
    pub(super) fn uses(&self, deps: &BTreeSet<String>) -> Vec<String> {
        deps.iter()
            .flat_map(|d| {
                self.active
                    .get(d)
                    .into_iter()
                    .flatten()
                    .map(move |v| format!("{d}={v}"))
            })
            .collect()
    }

    /// Decides, for a template just rendered, which version serves: what dependents read
    /// (`resources`, `pending`), which old objects stay, where the replacement stands.
    pub(super) fn settle(
        &mut self,
        r: Rendered<'_>,
        input: &SetInput<'_>,
        live: &BTreeMap<ObjectKey, &Arc<Value>>,
        out: &mut SetResult,
    ) {
        let name = r.name;
        if r.rollout.per_object() {
            let step = SlotsStep {
                name,
                entry: r.entry,
                timeout: r.rollout.timeout(),
                new_states: r.new_states,
            };
            let (versions, vanished) = step.settle(input, live, out, &mut self.finishing);
            self.active.insert(name.clone(), versions);
            self.vanished.push(vanished);
            return;
        }
        let step = RolloutStep {
            name,
            entry: r.entry,
            version: r.version,
            slot: None,
            timeout: r.rollout.timeout(),
            complete: r.complete,
            seen: r.seen,
            new_states: r.new_states,
        };
        let done = step.settle(input, out, &mut self.finishing, None);
        if let Some(serving) = done.serving {
            out.resources.insert(name.clone(), serving);
        }
        if !done.pending.is_empty() {
            out.pending.insert(name.clone(), done.pending);
        }
        self.active
            .insert(name.clone(), done.active.into_iter().collect());
    }

    /// Once every template is rendered: which old versions go, and which objects no
    /// longer rendered stay.
    pub(super) fn finish(&self, prepared: &Prepared, input: &SetInput<'_>, out: &mut SetResult) {
        finish_rollouts(prepared, input, out, &self.finishing);
        keep_vanished(input, out, &self.vanished);
        keep_namesakes(prepared, input, out);
    }
}

/// A live object of a template versioned as a whole that the set no longer renders, but
/// whose version an object it renders carries too (the same content under another name,
/// as an earlier release of the blueprint named it), is not an old version: nothing
/// replaces it make-before-break. It stays while a live dependent may still read it
/// ([`per_object::still_named`]) or some child of the set is not ready, like an object a
/// per-object template no longer renders; then it is pruned.
fn keep_namesakes(prepared: &Prepared, input: &SetInput<'_>, out: &mut SetResult) {
    let all_ready = out.states.iter().all(|s| s.readiness.is_ready());
    let mut keep = Vec::new();
    for live in input.live.iter() {
        let Some(template) = labels::template(live) else {
            continue;
        };
        let whole = prepared
            .entry(input.set, template)
            .and_then(|e| e.rollout.as_ref())
            .is_some_and(|r| r.make_before_break() && !r.per_object());
        let key = ObjectKey::of(live);
        if !whole
            || out.unsettled.contains(template)
            || out.keep.contains(&key)
            || out.children.iter().any(|c| c.key == key)
        {
            continue;
        }
        let version = version_label(live);
        let namesake = out
            .children
            .iter()
            .any(|c| c.template == template && version_label(&c.object) == version);
        if namesake && (!all_ready || per_object::still_named(template, &key, version, input, out))
        {
            keep.push(key);
        }
    }
    out.keep.extend(keep);
}
