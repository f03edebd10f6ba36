//! Rendering one template set (a Gateway's or a route's) in dependency order against the
//! live children: what to apply, what is held back waiting for a dependency, what failed,
//! and how ready each child is.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use serde_json::Value;

use super::readiness::{self, Readiness};
use crate::render::context::{ResourceValues, with_resource_values};
use crate::render::labels::{self, Owner};
use crate::render::output::{Placement, check_scopes};
use crate::render::prepared::Prepared;
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
    /// Make-before-break template -> the live objects of its new version while that
    /// version is not ready yet (what `pending.<template>` shows; empty otherwise): what
    /// must exist for the new version to become ready (a certificate's validation
    /// records) reads it, as dependents read `resources`.
    pub pending: BTreeMap<String, Vec<Value>>,
    /// Templates whose output is unknown this pass (held or failed): keep their children.
    pub unsettled: BTreeSet<String>,
    /// Live children that must stay although not rendered: old versions of
    /// make-before-break children still serving or still pointed at.
    pub keep: BTreeSet<ObjectKey>,
    /// Make-before-break replacements in progress.
    pub rollouts: Vec<RolloutState>,
    /// Notes that are not errors: kinds of unknown scope (offline, no CRD given).
    pub warnings: Vec<String>,
    /// Objects this parent renders that another parent already holds (not applied).
    pub conflicts: Vec<ObjectKey>,
}

/// Where a make-before-break replacement stands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RolloutPhase {
    /// The new version is created (or being created) and is not ready yet; the old one
    /// serves and its dependents still read it.
    WaitingForNew,
    /// The new version is ready; the templates that read it are re-rendered against it and
    /// must use it and be ready before the old version goes.
    Switching,
    /// Everything uses the new version: the old one is deleted in this pass.
    Finishing,
}

/// A make-before-break replacement in progress, from the live objects alone (so it
/// survives a restart: versions are labels, who uses which version is an annotation).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RolloutState {
    /// The template.
    pub template: String,
    /// For a template versioned per object (`rollout.per: Object`): the object, by its
    /// name as rendered.
    pub object: Option<String>,
    /// The version serving now (the old one), if any.
    pub from: Option<String>,
    /// The version being rolled out.
    pub to: String,
    /// Where it stands.
    pub phase: RolloutPhase,
    /// What it waits for, in words.
    pub waiting_for: String,
    /// When the new version's first object was created (RFC 3339), once it exists.
    pub started: Option<String>,
    /// Seconds the whole replacement may take before it is reported stuck.
    pub timeout_seconds: u64,
}

impl RolloutState {
    /// The template, and the object for a template versioned per object: what the
    /// replacement is of, in words.
    #[must_use]
    pub fn label(&self) -> String {
        match &self.object {
            Some(o) => format!("{} (object {o})", self.template),
            None => self.template.clone(),
        }
    }
}

/// Text a make-before-break template sees as `version` while it renders; replaced by the
/// version (a content hash) afterwards. DNS-safe, so it may appear in names.
pub const VERSION_PLACEHOLDER: &str = "gwversionplaceholder";

/// The version of a make-before-break template's output: 8 hex digits of the SHA-256 of
/// the rendered objects, or of the named fields only.
fn version_of(objects: &[Value], fields: &[String]) -> String {
    use sha2::{Digest, Sha256};
    let basis: Value = if fields.is_empty() {
        Value::Array(objects.to_vec())
    } else {
        Value::Array(
            objects
                .iter()
                .map(|o| {
                    Value::Array(
                        fields
                            .iter()
                            .map(|f| {
                                f.split('.')
                                    .try_fold(o, |v, k| v.get(k))
                                    .cloned()
                                    .unwrap_or(Value::Null)
                            })
                            .collect(),
                    )
                })
                .collect(),
        )
    };
    let digest = Sha256::digest(basis.to_string().as_bytes());
    digest[..4].iter().map(|b| format!("{b:02x}")).collect()
}

/// Puts `version` into a rendered object: in place of the placeholder in every string,
/// as a name suffix (within 63 characters) and as the version label.
fn stamp_version(obj: &mut Value, version: &str) {
    fn replace(v: &mut Value, version: &str) {
        match v {
            Value::String(s) if s.contains(VERSION_PLACEHOLDER) => {
                *s = s.replace(VERSION_PLACEHOLDER, version);
            }
            Value::Array(a) => a.iter_mut().for_each(|x| replace(x, version)),
            Value::Object(m) => m.values_mut().for_each(|x| replace(x, version)),
            _ => {}
        }
    }
    replace(obj, version);
    let name = obj["metadata"]["name"].as_str().unwrap_or_default();
    if !name.ends_with(&format!("-{version}")) {
        let head: String = name.chars().take(63 - 9).collect();
        let head = head.trim_end_matches(['-', '.']);
        obj["metadata"]["name"] = Value::String(format!("{head}-{version}"));
    }
    if !obj["metadata"]["labels"].is_object() {
        obj["metadata"]["labels"] = serde_json::json!({});
    }
    obj["metadata"]["labels"][labels::VERSION] = Value::String(version.to_owned());
}

fn version_label(v: &Value) -> &str {
    v["metadata"]["labels"][labels::VERSION]
        .as_str()
        .unwrap_or_default()
}

fn created(v: &Value) -> &str {
    v["metadata"]["creationTimestamp"]
        .as_str()
        .unwrap_or_default()
}

/// Versions of `template` that live children say they were rendered from.
fn versions_in_use<'a>(live: &'a [Arc<Value>], template: &str) -> BTreeSet<&'a str> {
    live.iter()
        .filter_map(|c| c["metadata"]["annotations"][labels::USES].as_str())
        .flat_map(|u| u.split(','))
        .filter_map(|pair| pair.split_once('='))
        .filter(|(t, _)| *t == template)
        .map(|(_, v)| v)
        .collect()
}

pub(crate) struct SetInput<'a> {
    pub prepared: &'a Prepared,
    pub set: TemplateSet,
    pub namespace: &'a str,
    pub owner: Owner<'a>,
    pub live: &'a [Arc<Value>],
    /// What is known of kinds' scopes (cluster-scoped kinds need the blueprint's leave).
    pub scopes: &'a crate::render::scope::KindScopes,
    /// Every live child, of every parent: an object another parent already holds is
    /// never taken over.
    pub all_children: &'a dyn Fn(&ObjectKey) -> Option<Arc<Value>>,
    /// For route templates: the route's kind. A template whose `kinds` do not list it
    /// renders nothing (and what it rendered before is pruned).
    pub route_kind: Option<&'a str>,
}

/// Who holds `live` when it is not the parent `owner` describes: the parent's kind and
/// name (from the controller owner reference, else the Gateway name label), and for a
/// route's child the Gateway it serves.
#[must_use]
pub fn held_by_another(live: &Value, owner: &Owner<'_>) -> Option<String> {
    if labels::parent_uid(live) == Some(owner.parent_uid)
        && labels::gateway_uid(live) == Some(owner.gateway_uid)
    {
        return None;
    }
    Some(holder(live))
}

/// The parent a live child belongs to, in words: its kind and name (from the controller
/// owner reference, else the Gateway name label), and for a route's child the Gateway.
#[must_use]
pub fn holder(live: &Value) -> String {
    let meta = &live["metadata"];
    let gateway = meta["labels"][labels::GATEWAY_NAME].as_str().unwrap_or("?");
    let ns = meta["namespace"].as_str().unwrap_or_default();
    let controller = meta["ownerReferences"]
        .as_array()
        .and_then(|refs| refs.iter().find(|r| r["controller"] == true));
    let parent = match controller {
        Some(r) => format!(
            "{} {ns}/{}",
            r["kind"].as_str().unwrap_or("?"),
            r["name"].as_str().unwrap_or("?")
        ),
        None => format!("Gateway {gateway}"),
    };
    if labels::parent_uid(live) != labels::gateway_uid(live) && controller.is_some() {
        format!("{parent} (under Gateway {ns}/{gateway})")
    } else {
        parent
    }
}

/// The live object of each of `children`, in their order, from the parent's `live` ones.
pub(crate) fn live_of(children: &[DesiredChild], live: &[Arc<Value>]) -> Vec<Option<Arc<Value>>> {
    children
        .iter()
        .map(|c| live.iter().find(|l| ObjectKey::of(l) == c.key).cloned())
        .collect()
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
    let decoration = labels::Decoration::new(&input.owner);
    let mut resource_values = ResourceValues::default();
    for name in &prepared.graph(input.set).order {
        if prepared
            .entry(input.set, name)
            .and_then(|e| e.rollout.as_ref())
            .is_some_and(crate::api::Rollout::make_before_break)
        {
            out.pending.insert(name.clone(), Vec::new());
        }
    }
    // The versions of each make-before-break template that dependents read (one per
    // object for a template versioned per object).
    let mut active: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut finishing: Vec<(String, String, Vec<ObjectKey>)> = Vec::new();
    // Objects of per-object templates no longer rendered, kept while read.
    let mut vanished: Vec<Vanished> = Vec::new();
    for (position, name) in prepared.graph(input.set).order.iter().enumerate() {
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
        let Some(entry) = prepared.entry(input.set, name) else {
            continue;
        };
        let rollout = entry.rollout.as_ref().filter(|r| r.make_before_break());
        let ctx = with_resource_values(
            base,
            route,
            resource_values.value(&out.resources),
            &out.pending,
        );
        let ctx = minijinja::context! {
            version => if rollout.is_some() { VERSION_PLACEHOLDER } else { "" },
            ..ctx
        };
        let renders_kind = input
            .route_kind
            .is_none_or(|k| entry.route_kinds().any(|r| r == k));
        let rendered = if renders_kind {
            prepared.compiled.render(input.set, name, &ctx)
        } else {
            Ok(String::new())
        };
        let text = match rendered {
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
        let objects = match prepared
            .objects(&text, at)
            .and_then(|o| check_scopes(&o, at, input.scopes).map(|unknown| (o, unknown)))
        {
            Ok((o, unknown)) => {
                out.warnings.extend(unknown.iter().map(|gk| {
                    format!(
                        "blueprint {}: template {name}: the scope of kind {} ({}) is unknown (give its CustomResourceDefinition with -f); rendered as namespaced",
                        prepared.name,
                        gk.kind,
                        if gk.group.is_empty() { "core" } else { &gk.group }
                    )
                }));
                o
            }
            Err(e) => {
                out.errors.push(e);
                out.unsettled.insert(name.clone());
                continue;
            }
        };
        let mut objects = objects.as_ref().clone();
        let per_object = rollout.is_some_and(crate::api::Rollout::per_object);
        // Per object: each object's name as rendered names the versions of it.
        let slots: Vec<Option<String>> = objects
            .iter()
            .map(|o| {
                per_object.then(|| {
                    o["metadata"]["name"]
                        .as_str()
                        .unwrap_or_default()
                        .to_owned()
                })
            })
            .collect();
        // A template that renders nothing has no version (and nothing reads one). Per
        // object, each object has its own (its label), and the template's is empty.
        let version = rollout.filter(|_| !objects.is_empty()).map(|r| {
            if per_object {
                for o in &mut objects {
                    let v = version_of(std::slice::from_ref(o), &r.fields);
                    stamp_version(o, &v);
                }
                return String::new();
            }
            let v = version_of(&objects, &r.fields);
            for o in &mut objects {
                stamp_version(o, &v);
            }
            v
        });
        // Which version of each make-before-break template this one was rendered from.
        let uses: Vec<String> = deps
            .iter()
            .flat_map(|d| {
                active
                    .get(d)
                    .into_iter()
                    .flatten()
                    .map(move |v| format!("{d}={v}"))
            })
            .collect();
        let first_state = out.states.len();
        let mut seen = Vec::new();
        let mut complete = true;
        let mut held_elsewhere = false;
        for (mut obj, slot) in objects.into_iter().zip(slots) {
            decoration.apply(&mut obj, name);
            if !obj["metadata"]["annotations"].is_object() {
                obj["metadata"]["annotations"] = serde_json::json!({});
            }
            let ann = &mut obj["metadata"]["annotations"];
            ann[labels::ORDER] = Value::String(position.to_string());
            if let Some(slot) = slot {
                ann[labels::SLOT] = Value::String(slot);
            }
            if !uses.is_empty() {
                ann[labels::USES] = Value::String(uses.join(","));
            }
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
            if let Some(holder) =
                (input.all_children)(&key).and_then(|l| held_by_another(&l, &input.owner))
            {
                out.errors.push(
                    RenderError::new(
                        &prepared.name,
                        name,
                        None,
                        format!(
                            "{key} is already held by {holder}; this parent renders the same object, so nothing is written to it (name it after its parent, for example with lib.name)"
                        ),
                    )
                    .with_category("ChildConflict"),
                );
                out.conflicts.push(key);
                complete = false;
                held_elsewhere = true;
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
        if held_elsewhere {
            // What it rendered is not all ours to write: keep its live objects, and let
            // dependents wait.
            out.unsettled.insert(name.clone());
            out.states.truncate(first_state);
            out.children.retain(|c| &c.template != name);
            continue;
        }
        if let (Some(r), Some(v)) = (rollout, version) {
            let new_states = out.states.split_off(first_state);
            if per_object {
                let step = SlotsStep {
                    name,
                    entry,
                    timeout: r.timeout(),
                    new_states,
                };
                step.settle(
                    input,
                    &live,
                    &mut out,
                    &mut active,
                    &mut finishing,
                    &mut vanished,
                );
                continue;
            }
            let step = RolloutStep {
                name,
                entry,
                version: v,
                slot: None,
                timeout: r.timeout(),
                complete,
                seen,
                new_states,
            };
            let done = step.settle(input, &mut out, &mut finishing, None);
            if let Some(serving) = done.serving {
                out.resources.insert(name.clone(), serving);
            }
            if !done.pending.is_empty() {
                out.pending.insert(name.clone(), done.pending);
            }
            active.insert(name.clone(), done.active.into_iter().collect());
            continue;
        }
        // A dependent sees a template's objects once all of them exist.
        if complete {
            out.resources.insert(name.clone(), seen);
        }
    }
    finish_rollouts(prepared, input, &mut out, &finishing);
    keep_vanished(input, &mut out, &vanished);
    out
}

/// One make-before-break template's objects as rendered this pass (or, for a template
/// versioned per object, one of its objects).
struct RolloutStep<'a> {
    name: &'a String,
    entry: &'a crate::api::TemplateEntry,
    version: String,
    /// Per object: the object (its name as rendered); its versions are the old ones.
    slot: Option<&'a str>,
    timeout: u64,
    complete: bool,
    seen: Vec<Value>,
    new_states: Vec<ChildState>,
}

/// What [`RolloutStep::settle`] decided for dependents.
#[derive(Default)]
struct Settled {
    /// The objects dependents read, when known (every one of them exists).
    serving: Option<Vec<Value>>,
    /// The new version's objects while they are not ready (`pending.<template>`).
    pending: Vec<Value>,
    /// The version dependents are rendered from.
    active: Option<String>,
}

impl RolloutStep<'_> {
    /// Decides which version serves (and what dependents read), what old objects stay,
    /// and where the replacement stands. `hold`: why the new version may not take over
    /// yet although it is ready (per object: another object it may take names from is not
    /// ready yet).
    fn settle(
        self,
        input: &SetInput<'_>,
        out: &mut SetResult,
        finishing: &mut Vec<(String, String, Vec<ObjectKey>)>,
        hold: Option<&str>,
    ) -> Settled {
        let name = self.name;
        let v = self.version;
        let mut olds: BTreeMap<&str, Vec<&Arc<Value>>> = BTreeMap::new();
        for c in input.live.iter().filter(|c| {
            labels::template(c) == Some(name.as_str())
                && version_label(c) != v
                && self.slot.is_none_or(|s| labels::slot(c) == Some(s))
        }) {
            olds.entry(version_label(c)).or_default().push(c);
        }
        let ready_now = self.complete && self.new_states.iter().all(|s| s.readiness.is_ready());
        let new_ready = ready_now && hold.is_none();
        if olds.is_empty() {
            // First version, or nothing to replace: as an in-place template.
            out.states.extend(self.new_states);
            return Settled {
                serving: self.complete.then_some(self.seen),
                pending: Vec::new(),
                active: Some(v),
            };
        }
        let in_use = versions_in_use(input.live, name);
        let started = self
            .seen
            .iter()
            .map(|o| created(o).to_owned())
            .min()
            .filter(|t| !t.is_empty());
        let ready = |objs: &[&Arc<Value>]| {
            objs.iter().all(|o| {
                readiness::judge(&input.prepared.compiled, self.entry, Some(o))
                    .is_ok_and(|r| r.is_ready())
            })
        };
        let newest = |objs: &[&Arc<Value>]| -> String {
            objs.iter()
                .map(|o| created(o).to_owned())
                .max()
                .unwrap_or_default()
        };
        // The version serving while the new one is not ready: the one dependents point at,
        // else a ready one, else any; the newest of those.
        let pick = |pred: &dyn Fn(&str, &[&Arc<Value>]) -> bool| {
            olds.iter()
                .filter(|(ver, objs)| pred(ver, objs))
                .max_by_key(|(_, objs)| newest(objs))
                .map(|(ver, _)| (*ver).to_owned())
        };
        let serving = if new_ready {
            None
        } else {
            pick(&|ver, _| in_use.contains(ver))
                .or_else(|| pick(&|_, objs| ready(objs)))
                .or_else(|| pick(&|_, _| true))
        };
        let old_keys = |ver: &str| -> Vec<ObjectKey> {
            olds.get(ver)
                .map(|objs| objs.iter().map(|o| ObjectKey::of(o)).collect())
                .unwrap_or_default()
        };
        let object = self.slot.map(str::to_owned);
        if let Some(old) = serving {
            // The old version serves: dependents read it, status judges it; the new one is
            // applied beside it (and shown as pending). Versions neither serving nor
            // pointed at are superseded.
            let objs = olds.get(old.as_str()).cloned().unwrap_or_default();
            for o in &objs {
                let key = ObjectKey::of(o);
                if let Ok(r) = readiness::judge(&input.prepared.compiled, self.entry, Some(o)) {
                    out.states.push(ChildState {
                        template: name.clone(),
                        key: key.clone(),
                        readiness: r,
                    });
                }
            }
            for ver in olds
                .keys()
                .filter(|ver| **ver == old || in_use.contains(*ver))
            {
                out.keep.extend(old_keys(ver));
            }
            let waiting_for = match hold {
                Some(why) if ready_now => {
                    format!("{why}; version {old} keeps serving until then")
                }
                _ => {
                    let waiting: Vec<String> = self
                        .new_states
                        .iter()
                        .filter(|s| !s.readiness.is_ready())
                        .map(|s| match &s.readiness {
                            Readiness::NotReady(why) => format!("{} ({why})", s.key),
                            _ => format!("{} (not created yet)", s.key),
                        })
                        .collect();
                    format!(
                        "the new version to be ready: {}; version {old} keeps serving",
                        waiting.join("; ")
                    )
                }
            };
            out.rollouts.push(RolloutState {
                template: name.clone(),
                object,
                from: Some(old.clone()),
                to: v.clone(),
                phase: RolloutPhase::WaitingForNew,
                waiting_for,
                started,
                timeout_seconds: self.timeout,
            });
            Settled {
                serving: Some(objs.iter().map(|o| (***o).clone()).collect()),
                pending: self.seen,
                active: Some(old),
            }
        } else {
            // The new version is ready: dependents switch to it in this pass; the old ones
            // go once nothing points at them and the dependents are ready.
            out.states.extend(self.new_states);
            let old_versions: Vec<String> = olds.keys().map(|k| (*k).to_owned()).collect();
            let keys: Vec<ObjectKey> = olds.keys().flat_map(|ver| old_keys(ver)).collect();
            out.keep.extend(keys.iter().cloned());
            out.rollouts.push(RolloutState {
                template: name.clone(),
                object,
                from: old_versions.last().cloned(),
                to: v.clone(),
                phase: RolloutPhase::Switching,
                waiting_for: String::new(),
                started,
                timeout_seconds: self.timeout,
            });
            finishing.push((name.clone(), v.clone(), keys));
            Settled {
                serving: Some(self.seen),
                pending: Vec::new(),
                active: Some(v),
            }
        }
    }
}

/// The live objects of a per-object template that it no longer renders, and whether
/// dependents still read them.
struct Vanished {
    keys: Vec<(ObjectKey, String)>,
    /// Some object of the template is not serving its newest version yet: what vanished
    /// may have moved there, so dependents keep reading it.
    serving: bool,
}

/// A make-before-break template versioned per object (`rollout.per: Object`), as rendered
/// this pass: each object is replaced on its own ([`RolloutStep`] with its slot).
///
/// Names can move between its objects (a group of hostnames split in two, or two merged),
/// so: once dependents read the template, a new object is shown to them only once it is
/// ready, a changed object switches only once every new object is ready, and an object no
/// longer rendered keeps being read while anything of the template waits, and is kept
/// until no live dependent names it.
struct SlotsStep<'a> {
    name: &'a String,
    entry: &'a crate::api::TemplateEntry,
    timeout: u64,
    new_states: Vec<ChildState>,
}

impl SlotsStep<'_> {
    fn settle(
        self,
        input: &SetInput<'_>,
        live: &BTreeMap<ObjectKey, &Value>,
        out: &mut SetResult,
        active: &mut BTreeMap<String, Vec<String>>,
        finishing: &mut Vec<(String, String, Vec<ObjectKey>)>,
        vanished: &mut Vec<Vanished>,
    ) {
        let name = self.name;
        let children: Vec<DesiredChild> = out
            .children
            .iter()
            .filter(|c| &c.template == name)
            .cloned()
            .collect();
        let in_use = versions_in_use(input.live, name);
        // Dependents read this template already: its objects are replaced one by one.
        // Else (a new Gateway, or nothing read yet) every object is as a first version.
        let established = !in_use.is_empty();
        let slots: BTreeSet<&str> = children
            .iter()
            .filter_map(|c| labels::slot(&c.object))
            .collect();
        let state_of = |key: &ObjectKey| self.new_states.iter().find(|s| &s.key == key).cloned();
        let ready = |c: &DesiredChild| {
            live.contains_key(&c.key) && state_of(&c.key).is_some_and(|s| s.readiness.is_ready())
        };
        // New objects (no version of them live, or only this one) while dependents read
        // the template: shown once ready; until then, changed objects do not switch.
        let fresh: Vec<&DesiredChild> = children
            .iter()
            .filter(|c| {
                established
                    && !in_use.contains(version_label(&c.object))
                    && !input.live.iter().any(|l| {
                        labels::template(l) == Some(name.as_str())
                            && labels::slot(l) == labels::slot(&c.object)
                            && ObjectKey::of(l) != c.key
                    })
            })
            .collect();
        let fresh_waiting: Vec<String> = fresh
            .iter()
            .filter(|c| !ready(c))
            .map(|c| c.key.to_string())
            .collect();
        let hold = (!fresh_waiting.is_empty()).then(|| {
            format!(
                "waiting for the new {} to be ready first (what this one drops may move there)",
                fresh_waiting.join(", ")
            )
        });
        let mut serving: Vec<Value> = Vec::new();
        let mut pending: Vec<Value> = Vec::new();
        let mut versions: Vec<String> = Vec::new();
        let mut complete = true;
        let mut waiting = !fresh_waiting.is_empty();
        for c in &children {
            let slot = labels::slot(&c.object);
            let v = version_label(&c.object).to_owned();
            let state = state_of(&c.key);
            let live_obj = live.get(&c.key).map(|o| (*o).clone());
            if fresh.iter().any(|f| f.key == c.key) {
                out.states.extend(state.clone());
                if ready(c) {
                    serving.extend(live_obj);
                    versions.push(v);
                } else {
                    pending.extend(live_obj);
                    let why = match state.map(|s| s.readiness) {
                        Some(Readiness::NotReady(why)) => format!("{} ({why})", c.key),
                        _ => format!("{} (not created yet)", c.key),
                    };
                    out.rollouts.push(RolloutState {
                        template: name.clone(),
                        object: slot.map(str::to_owned),
                        from: None,
                        to: v,
                        phase: RolloutPhase::WaitingForNew,
                        waiting_for: format!("the new object to be ready: {why}"),
                        started: live.get(&c.key).map(|o| created(o).to_owned()),
                        timeout_seconds: self.timeout,
                    });
                }
                continue;
            }
            let step = RolloutStep {
                name,
                entry: self.entry,
                version: v,
                slot,
                timeout: self.timeout,
                complete: live_obj.is_some(),
                seen: live_obj.into_iter().collect(),
                new_states: state.into_iter().collect(),
            };
            let before = out.rollouts.len();
            let done = step.settle(input, out, finishing, hold.as_deref());
            waiting |= out.rollouts[before..]
                .iter()
                .any(|r| r.phase == RolloutPhase::WaitingForNew);
            match done.serving {
                Some(s) => serving.extend(s),
                None => complete = false,
            }
            pending.extend(done.pending);
            versions.extend(done.active);
        }
        // Objects no longer rendered (or rendered before the template was versioned per
        // object): read while anything of the template waits.
        let gone: Vec<&Arc<Value>> = input
            .live
            .iter()
            .filter(|l| {
                labels::template(l) == Some(name.as_str())
                    && labels::slot(l).is_none_or(|s| !slots.contains(s))
            })
            .collect();
        if waiting && established {
            for g in &gone {
                if let Ok(r) = readiness::judge(&input.prepared.compiled, self.entry, Some(g)) {
                    out.states.push(ChildState {
                        template: name.clone(),
                        key: ObjectKey::of(g),
                        readiness: r,
                    });
                }
                serving.push((***g).clone());
                versions.push(version_label(g).to_owned());
            }
        }
        vanished.push(Vanished {
            keys: gone
                .iter()
                .map(|g| (ObjectKey::of(g), version_label(g).to_owned()))
                .collect(),
            serving: waiting && established,
        });
        if established || complete {
            out.resources.insert(name.clone(), serving);
        }
        out.pending.insert(name.clone(), pending);
        active.insert(name.clone(), versions);
    }
}

/// The objects per-object templates no longer render stay while dependents read them or
/// a live dependent still names their version, and while some child of the set is not
/// ready; then they are pruned.
fn keep_vanished(input: &SetInput<'_>, out: &mut SetResult, vanished: &[Vanished]) {
    let all_ready = out.states.iter().all(|s| s.readiness.is_ready());
    for v in vanished {
        for (key, version) in &v.keys {
            let template = input
                .live
                .iter()
                .find(|l| &ObjectKey::of(l) == key)
                .and_then(|l| labels::template(l))
                .unwrap_or_default();
            if v.serving
                || !all_ready
                || versions_in_use(input.live, template).contains(version.as_str())
            {
                out.keep.insert(key.clone());
            }
        }
    }
}

/// For each replacement whose new version is ready: the old version is let go (pruned
/// in this pass) once every live child of a template that reads it says it uses the new
/// version, and every child of the set is ready (so the Gateway is still Programmed).
fn finish_rollouts(
    prepared: &Prepared,
    input: &SetInput<'_>,
    out: &mut SetResult,
    finishing: &[(String, String, Vec<ObjectKey>)],
) {
    let graph = prepared.graph(input.set);
    for (name, v, old_keys) in finishing {
        let dependents: BTreeSet<&String> = graph
            .deps
            .iter()
            .filter(|(_, deps)| deps.contains(name))
            .map(|(t, _)| t)
            .collect();
        let stale: Vec<String> = input
            .live
            .iter()
            .filter(|c| labels::template(c).is_some_and(|t| dependents.iter().any(|d| *d == t)))
            .filter(|c| {
                let uses = c["metadata"]["annotations"][labels::USES]
                    .as_str()
                    .unwrap_or_default();
                !uses.split(',').any(|p| p == format!("{name}={v}"))
            })
            .map(|c| ObjectKey::of(c).to_string())
            .collect();
        // Every child of the set ready (the Gateway still Programmed), those reading the
        // new version included.
        let not_ready: Vec<String> = out
            .states
            .iter()
            .filter(|s| !s.readiness.is_ready())
            .map(|s| s.key.to_string())
            .collect();
        let held: Vec<&String> = out
            .held
            .iter()
            .map(|h| &h.template)
            .filter(|t| dependents.contains(t))
            .collect();
        let Some(r) = out
            .rollouts
            .iter_mut()
            .find(|r| &r.template == name && &r.to == v)
        else {
            continue;
        };
        if stale.is_empty() && not_ready.is_empty() && held.is_empty() {
            out.keep.retain(|k| !old_keys.contains(k));
            r.phase = RolloutPhase::Finishing;
            r.waiting_for = format!(
                "deleting the old version: {}",
                old_keys
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        } else {
            let mut why = Vec::new();
            if !stale.is_empty() {
                why.push(format!("to point at version {v}: {}", stale.join(", ")));
            }
            if !not_ready.is_empty() {
                why.push(format!("to be ready: {}", not_ready.join(", ")));
            }
            if !held.is_empty() {
                why.push(format!(
                    "to render: {}",
                    held.iter()
                        .map(|t| t.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
            }
            r.waiting_for = format!(
                "the version {v} is ready; waiting for what reads it {}",
                why.join("; ")
            );
        }
    }
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
            if desired.contains(&key)
                || result.keep.contains(&key)
                || result.unsettled.contains(template)
            {
                return None;
            }
            Some((order.iter().position(|t| t == template), key))
        })
        .collect();
    prune_order(prune)
}

/// Sort children to delete so that each goes before what it depends on: templates
/// later in `order` first, templates no longer in the blueprint before everything.
fn prune_order(mut prune: Vec<(Option<usize>, ObjectKey)>) -> Vec<ObjectKey> {
    prune.sort_by(|a, b| {
        let ra = a.0.map_or(usize::MAX, |i| i + 1);
        let rb = b.0.map_or(usize::MAX, |i| i + 1);
        rb.cmp(&ra).then_with(|| a.1.cmp(&b.1))
    });
    prune.into_iter().map(|(_, k)| k).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_version_hashes_only_the_named_fields() {
        let a = json!({"spec": {"dnsNames": ["a.example.com"], "issuer": "x"}});
        let b = json!({"spec": {"dnsNames": ["a.example.com"], "issuer": "y"}});
        let c = json!({"spec": {"dnsNames": ["b.example.com"], "issuer": "x"}});
        let fields = vec!["spec.dnsNames".to_owned()];
        let v = version_of(std::slice::from_ref(&a), &fields);
        assert_eq!(v.len(), 8);
        assert!(v.chars().all(|ch| ch.is_ascii_hexdigit()));
        assert_eq!(v, version_of(std::slice::from_ref(&b), &fields));
        assert_ne!(v, version_of(std::slice::from_ref(&c), &fields));
        // Without fields, any change makes a new version.
        assert_ne!(
            version_of(std::slice::from_ref(&a), &[]),
            version_of(std::slice::from_ref(&b), &[])
        );
    }

    #[test]
    fn stamping_names_labels_and_replaces_the_placeholder_within_63_characters() {
        let long = "g".repeat(70);
        let mut o = json!({
            "metadata": {"name": long},
            "spec": {"secretName": format!("tls-{VERSION_PLACEHOLDER}"), "list": [VERSION_PLACEHOLDER]},
        });
        stamp_version(&mut o, "0123abcd");
        let name = o["metadata"]["name"].as_str().unwrap_or_default();
        assert!(name.len() <= 63 && name.ends_with("-0123abcd"), "{name}");
        assert_eq!(o["spec"]["secretName"], "tls-0123abcd");
        assert_eq!(o["spec"]["list"][0], "0123abcd");
        assert_eq!(o["metadata"]["labels"][labels::VERSION], "0123abcd");
        // A name that already carries the version is left alone.
        let mut p = json!({"metadata": {"name": "cert-0123abcd"}});
        stamp_version(&mut p, "0123abcd");
        assert_eq!(p["metadata"]["name"], "cert-0123abcd");
    }
}
