//! Rendering one template set (a Gateway's or a route's) in dependency order against the
//! live children: what to apply, what is held back waiting for a dependency, what failed,
//! and how ready each child is. Make-before-break templates are versioned and settled by
//! [`super::versions`]; what a render gives is [`super::set`].

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use serde_json::Value;

use super::readiness;
use super::set::{ChildState, DesiredChild, Held, SetInput, SetResult};
use super::versions::{Rendered, Replacements, VERSION_PLACEHOLDER, stamp_versions};
use crate::render::context::{ResourceValues, RouteVars, with_resource_values};
use crate::render::labels::{self, Owner};
use crate::render::output::{Placement, check_scopes};
use crate::render::prepared::Prepared;
use crate::render::{RenderError, TemplateSet};
use crate::snapshot::ObjectKey;

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

/// Renders every template of `input.set` in order. `base` is the context without
/// `resources`, which this function fills template by template.
pub(crate) fn render_set(
    input: &SetInput<'_>,
    base: &minijinja::Value,
    route: Option<&RouteVars>,
) -> SetResult {
    let prepared = input.prepared;
    let live: BTreeMap<ObjectKey, &Arc<Value>> =
        input.live.iter().map(|v| (ObjectKey::of(v), v)).collect();
    let mut out = SetResult::default();
    let decoration = labels::Decoration::new(&input.owner);
    let mut resource_values = ResourceValues::default();
    nothing_pending(input, &mut out);
    let mut replacements = Replacements::default();
    for (position, name) in prepared.graph(input.set).order.iter().enumerate() {
        let deps = prepared
            .graph(input.set)
            .deps
            .get(name)
            .cloned()
            .unwrap_or_default();
        if waits_for_a_template(name, &deps, &mut out) {
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
        let Some(mut objects) = render_objects(input, entry, name, &deps, &ctx, &mut out) else {
            continue;
        };
        if !within_boundary(input, name, &objects, &mut out) {
            continue;
        }
        let (version, slots) = match rollout {
            Some(r) => stamp_versions(&mut objects, r),
            None => (None, vec![None; objects.len()]),
        };
        let adoptions = match &entry.adopt {
            Some(a) => {
                let found = super::adopt::predecessors(a, &objects, input.live);
                if !super::adopt::released(a, &found, &mut out) {
                    super::adopt::serve_with_predecessors(
                        &prepared.compiled,
                        entry,
                        input.live,
                        objects.len(),
                        &found,
                        &mut out,
                    );
                    continue;
                }
                super::adopt::copy_annotations(a, &mut objects, &found);
                found
            }
            None => Vec::new(),
        };
        let uses = replacements.uses(&deps);
        let first_state = out.states.len();
        let taking = Taking {
            input,
            entry,
            name,
            position,
            uses: &uses,
            decoration: &decoration,
            live: &live,
            adoptions: &adoptions,
        };
        let Taken {
            seen,
            complete,
            held_elsewhere,
        } = take_objects(&taking, objects, slots, &mut out);
        if held_elsewhere {
            // What it rendered is not all ours to write: keep its live objects, and let
            // dependents wait.
            out.unsettled.insert(name.clone());
            out.states.truncate(first_state);
            out.children.retain(|c| &c.template != name);
            continue;
        }
        if let (Some(r), Some(version)) = (rollout, version) {
            let new_states = out.states.split_off(first_state);
            replacements.settle(
                Rendered {
                    name,
                    entry,
                    rollout: r,
                    version,
                    complete,
                    seen,
                    new_states,
                },
                input,
                &live,
                &mut out,
            );
            continue;
        }
        // A dependent sees a template's objects once all of them exist.
        if complete {
            out.resources.insert(name.clone(), seen);
        }
    }
    replacements.finish(prepared, input, &mut out);
    out
}

/// One template's rendered objects, as [`take_objects`] takes them into the set.
struct Taking<'t, 'i> {
    input: &'t SetInput<'i>,
    entry: &'t crate::api::TemplateEntry,
    name: &'t String,
    /// The template's place in the order.
    position: usize,
    /// The versions of the templates it reads.
    uses: &'t [String],
    decoration: &'t labels::Decoration<'t>,
    /// The parent's live children by key.
    live: &'t BTreeMap<ObjectKey, &'i Arc<Value>>,
    /// The predecessors of its objects ([`super::adopt`]).
    adoptions: &'t [super::adopt::Adoption],
}

/// What taking a template's objects gave.
struct Taken {
    /// The live objects of what it rendered (a predecessor's where it serves).
    seen: Vec<Arc<Value>>,
    /// Whether every object exists.
    complete: bool,
    /// Whether another parent holds one of them.
    held_elsewhere: bool,
}

/// Takes each object a template rendered into the set: decorated as a child of the parent,
/// refused when rendered twice or held by another parent, judged against its live object
/// (or the predecessor serving in its place), and added to the children.
fn take_objects(
    t: &Taking<'_, '_>,
    objects: Vec<Value>,
    slots: Vec<Option<String>>,
    out: &mut SetResult,
) -> Taken {
    let (prepared, entry, name) = (t.input.prepared, t.entry, t.name);
    let mut taken = Taken {
        seen: Vec::new(),
        complete: true,
        held_elsewhere: false,
    };
    for (i, (mut obj, slot)) in objects.into_iter().zip(slots).enumerate() {
        decorate(&mut obj, t.decoration, name, t.position, slot, t.uses);
        let key = ObjectKey::of(&obj);
        match refused(t.input, name, &key, out) {
            Some(Refused::Twice) => continue,
            Some(Refused::HeldElsewhere) => {
                taken.complete = false;
                taken.held_elsewhere = true;
                continue;
            }
            None => {}
        }
        let mut live_obj = t.live.get(&key).copied();
        if let Some(a) = &entry.adopt {
            super::adopt::keep_annotations(a, &mut obj, live_obj);
        }
        match readiness::judge(&prepared.compiled, entry, live_obj) {
            Ok(mut r) => {
                // An adopted object's predecessor serves until it is ready.
                if let Some((old, r_old)) =
                    super::adopt::serving(&prepared.compiled, entry, t.adoptions, i, &r, out)
                {
                    live_obj = Some(old);
                    r = r_old;
                }
                out.states.push(ChildState {
                    template: name.clone(),
                    key: key.clone(),
                    readiness: r,
                });
            }
            Err(e) => out.errors.push(e),
        }
        match live_obj {
            // What a member cluster's object reports reaches templates only within
            // what its ClusterProfile allows.
            Some(l) => taken.seen.push(super::placement::within_member_addresses(
                l,
                t.input.fleet,
                &mut out.refused_addresses,
            )),
            None => taken.complete = false,
        }
        out.children.push(DesiredChild {
            template: name.clone(),
            key,
            object: obj.into(),
        });
    }
    taken
}

/// Whether every object template `name` rendered keeps the tenancy boundary (see
/// [`crate::gateway::boundary`]). When one does not, none of the template's objects is
/// applied: an error names the blueprint, the template, the object and the rule; a route
/// copy's live objects are then pruned (the route stops being served rather than served
/// where the parent refused it), a child Gateway's kept (a whole dataplane is not taken
/// down for it).
fn within_boundary(
    input: &SetInput<'_>,
    name: &str,
    objects: &[Value],
    out: &mut SetResult,
) -> bool {
    use super::set::Boundary;
    use crate::gateway::boundary::{Verdict, check_child_gateway, check_route};
    for obj in objects {
        let verdict = match &input.boundary {
            Boundary::Gateway(parents) => check_child_gateway(obj, input.namespace, parents),
            Boundary::Route { accepted, gateways } => {
                check_route(obj, input.namespace, accepted, gateways)
            }
        };
        let what = || {
            format!(
                "{} {}",
                obj["kind"].as_str().unwrap_or("object"),
                obj["metadata"]["name"].as_str().unwrap_or_default()
            )
        };
        match verdict {
            Verdict::Within => {}
            Verdict::Refused(why) if input.lenient.is_some() => {
                out.warnings.push(format!(
                    "blueprint {}: template {name}: {} crosses the tenancy boundary, kept as it was rendered before: {why} ({}; the newest revision is judged strictly)",
                    input.prepared.name,
                    what(),
                    input.lenient.unwrap_or_default()
                ));
            }
            Verdict::Refused(why) => {
                out.errors.push(
                    RenderError::new(
                        &input.prepared.name,
                        name,
                        None,
                        format!("{} crosses the tenancy boundary: {why}", what()),
                    )
                    .with_category(crate::render::BOUNDARY_CATEGORY),
                );
                if matches!(input.boundary, Boundary::Gateway(_)) {
                    out.unsettled.insert(name.to_owned());
                }
                return false;
            }
        }
    }
    true
}

/// Every make-before-break template of the set has nothing pending yet (what
/// `pending.<template>` reads until a replacement renders).
fn nothing_pending(input: &SetInput<'_>, out: &mut SetResult) {
    let prepared = input.prepared;
    for name in &prepared.graph(input.set).order {
        if prepared
            .entry(input.set, name)
            .and_then(|e| e.rollout.as_ref())
            .is_some_and(crate::api::Rollout::make_before_break)
        {
            out.pending.insert(name.clone(), Vec::new());
        }
    }
}

/// Whether template `name` waits for one of the templates it reads (`deps`), unsettled
/// or without its objects yet: held, said in `out`.
fn waits_for_a_template(name: &str, deps: &BTreeSet<String>, out: &mut SetResult) -> bool {
    let Some(blocker) = deps
        .iter()
        .find(|d| out.unsettled.contains(*d) || !out.resources.contains_key(*d))
    else {
        return false;
    };
    out.held.push(Held {
        template: name.to_owned(),
        reason: format!("waiting for template {blocker}"),
    });
    out.unsettled.insert(name.to_owned());
    true
}

/// The objects template `name` renders: once per member it places in (a placed
/// template), else once, each parsed and its kind's scope checked. `None`: it failed, or
/// waits for what it reads from `deps` (said in `out`).
fn render_objects(
    input: &SetInput<'_>,
    entry: &crate::api::TemplateEntry,
    name: &str,
    deps: &BTreeSet<String>,
    ctx: &minijinja::Value,
    out: &mut SetResult,
) -> Option<Vec<Value>> {
    // A placed template renders once per member it places in; any other once, for
    // the parent's own cluster.
    let targets = match &entry.placement {
        None => vec![None],
        Some(p) => super::placement::targets(p, input.fleet, input.places)
            .into_iter()
            .map(Some)
            .collect(),
    };
    let mut objects: Vec<Value> = Vec::new();
    for target in targets {
        let placed_ctx = target.map(|m| placed_context(entry, m, ctx, out));
        let ctx = placed_ctx.as_ref().unwrap_or(ctx);
        let rendered = render_once(input, entry, name, deps, target.is_none(), ctx, out)?;
        let start = objects.len();
        objects.extend(rendered);
        if let Some(member) = target {
            for obj in &mut objects[start..] {
                super::placement::place(obj, member);
            }
        }
    }
    Some(objects)
}

/// The context of a placed template's render for member `m`: `cluster` is that member
/// (empty in the base context), and with `resources: Member` the template reads only its
/// objects and the parent cluster's in `resources`.
fn placed_context(
    entry: &crate::api::TemplateEntry,
    m: &crate::snapshot::fleet::FleetMember,
    ctx: &minijinja::Value,
    out: &SetResult,
) -> minijinja::Value {
    let placed = minijinja::context! {
        cluster => super::placement::cluster_value(m),
        ..ctx.clone()
    };
    let member_scoped = entry
        .placement
        .as_ref()
        .is_some_and(|p| p.resources == crate::api::ResourcesScope::Member);
    if member_scoped {
        minijinja::context! {
            resources => super::placement::resources_of(&out.resources, &m.name),
            ..placed
        }
    } else {
        placed
    }
}

/// One render of template `name` with `ctx` (for the parent's own cluster: `own`), its
/// objects parsed, or remembered (a keyed route template's, by the hash of its inputs);
/// then their kinds' scopes checked. `None`: it failed, or waits for what it reads from
/// `deps` (said in `out`).
fn render_once(
    input: &SetInput<'_>,
    entry: &crate::api::TemplateEntry,
    name: &str,
    deps: &BTreeSet<String>,
    own: bool,
    ctx: &minijinja::Value,
    out: &mut SetResult,
) -> Option<Vec<Value>> {
    let prepared = input.prepared;
    let renders_kind = input
        .route_kind
        .is_none_or(|k| entry.route_kinds().any(|r| r == k));
    let at = Placement {
        blueprint: &prepared.name,
        template: name,
        namespace: input.namespace,
        cluster_scoped: &prepared.spec.cluster_scoped_kinds,
    };
    // A keyed route template's objects (never a placed one's): remembered as their JSON,
    // neither rendered nor read from YAML again.
    let key = input
        .render_key
        .filter(|_| own && renders_kind && prepared.keys_route_render(name))
        .map(|k| prepared.render_key((k, name)));
    let parsed = match key.and_then(|k| prepared.remembered_render(k)) {
        Some(objects) => Ok(objects),
        None => {
            let rendered = if renders_kind {
                prepared.compiled.render(input.set, name, ctx)
            } else {
                Ok(String::new())
            };
            let text = match rendered {
                Ok(t) => t,
                Err(e) if !deps.is_empty() && e.category == "UndefinedVariable" => {
                    out.held.push(Held {
                        template: name.to_owned(),
                        reason: format!(
                            "waiting for what it reads from {}: {}",
                            join(deps),
                            e.message
                        ),
                    });
                    out.unsettled.insert(name.to_owned());
                    return None;
                }
                Err(e) => {
                    out.errors.push(e);
                    out.unsettled.insert(name.to_owned());
                    return None;
                }
            };
            match key {
                // Its own key: the text is not hashed again to find its objects.
                Some(k) => crate::render::output::objects_from_render(&text, at)
                    .inspect(|o| prepared.remember_render(k, o)),
                None => prepared.objects(&text, at),
            }
        }
    };
    match parsed.and_then(|o| check_scopes(&o, at, input.scopes).map(|unknown| (o, unknown))) {
        Ok((o, unknown)) => {
            out.warnings.extend(unknown.iter().map(|gk| {
                format!(
                    "blueprint {}: template {name}: the scope of kind {} ({}) is unknown (give its CustomResourceDefinition with -f); rendered as namespaced",
                    prepared.name,
                    gk.kind,
                    if gk.group.is_empty() { "core" } else { &gk.group }
                )
            }));
            Some(o)
        }
        Err(e) => {
            out.errors.push(e);
            out.unsettled.insert(name.to_owned());
            None
        }
    }
}

/// Decorates a rendered object as a child of this parent: the labels and owner reference
/// every child carries (no owner reference in another cluster than its parent's), its
/// template's place in the order, its version slot, and the versions of the templates it
/// reads.
fn decorate(
    obj: &mut Value,
    decoration: &labels::Decoration<'_>,
    name: &str,
    position: usize,
    slot: Option<String>,
    uses: &[String],
) {
    decoration.apply(obj, name);
    if obj["metadata"]["annotations"][labels::CLUSTER].is_string() {
        // In another cluster than its parent: an owner reference there would name
        // an object that does not exist, and that cluster's garbage collector
        // would delete it.
        if let Some(m) = obj["metadata"].as_object_mut() {
            m.remove("ownerReferences");
        }
    }
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
}

/// Why an object this set renders cannot be its child.
enum Refused {
    /// The set renders it twice.
    Twice,
    /// Another parent holds it.
    HeldElsewhere,
}

/// Whether the object `key` template `name` rendered is refused (said in `out`): rendered
/// twice, or held by another parent.
fn refused(
    input: &SetInput<'_>,
    name: &str,
    key: &ObjectKey,
    out: &mut SetResult,
) -> Option<Refused> {
    let prepared = input.prepared;
    if out.children.iter().any(|c| &c.key == key) {
        out.errors.push(
            RenderError::new(
                &prepared.name,
                name,
                None,
                format!("{key} is rendered twice"),
            )
            .with_category("InvalidOutput"),
        );
        return Some(Refused::Twice);
    }
    if let Some(holder) = (input.all_children)(key).and_then(|l| held_by_another(&l, &input.owner))
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
        out.conflicts.push(key.clone());
        return Some(Refused::HeldElsewhere);
    }
    None
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
