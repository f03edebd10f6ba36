//! Rendering one template set (a Gateway's or a route's) in dependency order against the
//! live children: what to apply, what is held back waiting for a dependency, what failed,
//! and how ready each child is.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use serde_json::Value;

use super::labels::{self, Owner};
use super::prepared::Prepared;
use super::readiness::{self, Readiness};
use crate::render::context::with_resources;
use crate::render::output::Placement;
use crate::render::{RenderError, TemplateSet};
use crate::snapshot::ObjectKey;

/// A child the plan wants to exist, exactly as it will be applied.
#[derive(Clone, Debug, PartialEq)]
pub struct DesiredChild {
    /// The template that rendered it.
    pub template: String,
    /// Its identity.
    pub key: ObjectKey,
    /// The object, with our labels and owner reference.
    pub object: Value,
}

/// A template that was not rendered in this pass, and why (not an error).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Held {
    /// Template name.
    pub template: String,
    /// What it waits for.
    pub reason: String,
}

/// The readiness of one desired child.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChildState {
    /// The template that rendered it.
    pub template: String,
    /// Its identity.
    pub key: ObjectKey,
    /// Judgement.
    pub readiness: Readiness,
}

/// What rendering a set gave.
#[derive(Debug, Default)]
pub(crate) struct SetResult {
    pub children: Vec<DesiredChild>,
    pub held: Vec<Held>,
    pub errors: Vec<RenderError>,
    pub states: Vec<ChildState>,
    /// Template -> live objects it rendered (what `resources.<template>` showed).
    pub resources: BTreeMap<String, Vec<Value>>,
    /// Templates whose output is unknown this pass (held or failed): keep their children.
    pub unsettled: BTreeSet<String>,
}

pub(crate) struct SetInput<'a> {
    pub prepared: &'a Prepared,
    pub set: TemplateSet,
    pub namespace: &'a str,
    pub owner: Owner<'a>,
    pub live: &'a [Arc<Value>],
}

/// Renders every template of `input.set` in order. `base` is the context without
/// `resources`, which this function fills template by template.
pub(crate) fn render_set(
    input: &SetInput<'_>,
    base: &minijinja::Value,
    route: Option<&minijinja::Value>,
) -> SetResult {
    let prepared = input.prepared;
    let live: BTreeMap<ObjectKey, &Value> = input
        .live
        .iter()
        .map(|v| (ObjectKey::of(v), v.as_ref()))
        .collect();
    let mut out = SetResult::default();
    for name in &prepared.graph(input.set).order {
        let deps = prepared
            .graph(input.set)
            .deps
            .get(name)
            .cloned()
            .unwrap_or_default();
        if let Some(blocker) = deps
            .iter()
            .find(|d| out.unsettled.contains(*d) || !out.resources.contains_key(*d))
        {
            out.held.push(Held {
                template: name.clone(),
                reason: format!("waiting for template {blocker}"),
            });
            out.unsettled.insert(name.clone());
            continue;
        }
        let ctx = with_resources(base, route, &out.resources);
        let text = match prepared.compiled.render(input.set, name, &ctx) {
            Ok(t) => t,
            Err(e) if !deps.is_empty() && e.category == "UndefinedVariable" => {
                out.held.push(Held {
                    template: name.clone(),
                    reason: format!(
                        "waiting for what it reads from {}: {}",
                        join(&deps),
                        e.message
                    ),
                });
                out.unsettled.insert(name.clone());
                continue;
            }
            Err(e) => {
                out.errors.push(e);
                out.unsettled.insert(name.clone());
                continue;
            }
        };
        let at = Placement {
            blueprint: &prepared.name,
            template: name,
            namespace: input.namespace,
            cluster_scoped: &prepared.spec.cluster_scoped_kinds,
        };
        let objects = match prepared.objects(&text, at) {
            Ok(o) => o,
            Err(e) => {
                out.errors.push(e);
                out.unsettled.insert(name.clone());
                continue;
            }
        };
        let Some(entry) = prepared.entry(input.set, name) else {
            continue;
        };
        let mut seen = Vec::new();
        let mut complete = true;
        for obj in objects.iter() {
            let mut obj = obj.clone();
            labels::decorate(&mut obj, &input.owner, name);
            let key = ObjectKey::of(&obj);
            if out.children.iter().any(|c| c.key == key) {
                out.errors.push(
                    RenderError::new(
                        &prepared.name,
                        name,
                        None,
                        format!("{key} is rendered twice"),
                    )
                    .with_category("InvalidOutput"),
                );
                continue;
            }
            let live_obj = live.get(&key).copied();
            match readiness::judge(&prepared.compiled, entry, live_obj) {
                Ok(r) => out.states.push(ChildState {
                    template: name.clone(),
                    key: key.clone(),
                    readiness: r,
                }),
                Err(e) => out.errors.push(e),
            }
            match live_obj {
                Some(l) => seen.push(l.clone()),
                None => complete = false,
            }
            out.children.push(DesiredChild {
                template: name.clone(),
                key,
                object: obj,
            });
        }
        // A dependent sees a template's objects once all of them exist.
        if complete {
            out.resources.insert(name.clone(), seen);
        }
    }
    out
}

fn join(s: &BTreeSet<String>) -> String {
    s.iter().cloned().collect::<Vec<_>>().join(", ")
}

/// Live children of the parent that the plan no longer renders, in deletion order.
pub(crate) fn prune_list(
    prepared: Option<&Prepared>,
    set: TemplateSet,
    live: &[Arc<Value>],
    result: &SetResult,
) -> Vec<ObjectKey> {
    let desired: BTreeSet<&ObjectKey> = result.children.iter().map(|c| &c.key).collect();
    let order = prepared
        .map(|p| p.graph(set).order.clone())
        .unwrap_or_default();
    let prune = live
        .iter()
        .filter_map(|obj| {
            let key = ObjectKey::of(obj);
            let template = labels::template(obj).unwrap_or_default();
            if desired.contains(&key) || result.unsettled.contains(template) {
                return None;
            }
            Some((order.iter().position(|t| t == template), key))
        })
        .collect();
    super::prune_order(prune)
}
