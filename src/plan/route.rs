//! `plan_route`: the children of one route under one Gateway.

use std::sync::Arc;

use serde_json::Value;

use super::gateway::GatewayPlan;
use super::set::{ChildState, DesiredChild, Held, SetInput};
use super::templates::{prune_list, render_set};
use crate::render::context::{AttachmentVar, RouteVars};
use crate::render::labels::Owner;
use crate::render::{RenderError, TemplateSet};
use crate::snapshot::{LiveText, ObjectKey, RouteKey, Snapshot};

/// The children of one route under one Gateway.
#[derive(Debug, Default, PartialEq)]
pub struct RoutePlan {
    /// The route.
    pub route: RouteKey,
    /// UID of the route (or a stand-in offline).
    pub uid: String,
    /// Children to apply, in dependency order.
    pub children: Vec<DesiredChild>,
    /// Templates held back.
    pub held: Vec<Held>,
    /// Template errors.
    pub errors: Vec<RenderError>,
    /// Live children to delete, dependents first.
    pub prune: Vec<ObjectKey>,
    /// Readiness of each desired child.
    pub states: Vec<ChildState>,
    /// Make-before-break replacements in progress.
    pub rollouts: Vec<super::set::Replacement>,
    /// Notes that are not errors (`gatewright render` prints them as warnings).
    pub warnings: Vec<String>,
    /// Objects it renders that another parent already holds (see the errors).
    pub conflicts: Vec<ObjectKey>,
    /// The live object of each child, in `children` order, as the plan read it: its text
    /// (shared with the snapshot), for a remembered plan holds it between passes, and most
    /// are never read again (see [`AppliedMark`]).
    pub live_children: Vec<Option<LiveText>>,
    /// Set by whoever applies the plan once every child was found to hold what it
    /// renders: while the plan is reused (the same objects and the same live objects),
    /// nothing needs to be applied (see [`super::memo`]).
    pub applied: AppliedMark,
}

/// See [`RoutePlan::applied`]. Never part of a plan's equality.
#[derive(Debug, Default)]
pub struct AppliedMark(std::sync::atomic::AtomicBool);

impl AppliedMark {
    /// Whether it was set.
    #[must_use]
    pub fn get(&self) -> bool {
        self.0.load(std::sync::atomic::Ordering::Relaxed)
    }
    /// Sets it.
    pub fn set(&self) {
        self.0.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

impl PartialEq for AppliedMark {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

/// Plans the children of `route` under the Gateway of `gw`. A route the Gateway does not
/// accept gets no children (and its live ones are pruned).
#[must_use]
pub fn plan_route(snap: &Snapshot, gw: &GatewayPlan, route: &RouteKey) -> RoutePlan {
    let Some(entry) = snap.route(route) else {
        return RoutePlan {
            route: route.clone(),
            ..RoutePlan::default()
        };
    };
    let uid = entry.uid.clone();
    let (live, texts): (Vec<Arc<Value>>, Vec<LiveText>) = snap
        .children_of_under_texts(&uid, &gw.uid, gw.keeps_parsed())
        .unzip();
    let mut plan = RoutePlan {
        route: route.clone(),
        uid: uid.clone(),
        ..RoutePlan::default()
    };
    let Some(prepared) = gw.blueprint.as_deref() else {
        return plan;
    };
    if !gw.accepted {
        return plan;
    }
    let accepted = gw.context.accepts(route);
    let base = gw.context.base().clone();
    // The template value is parsed only if a template renders (not when every text is
    // remembered); the owner reference needs three fields of the route.
    let route_json = owner_head(entry);
    let parents = gw.context.parents_of(route);
    let attachment = Arc::new(
        gw.context
            .attachment(parents.map_or(&[][..], |p| p.as_slice())),
    );
    let boundary = gw.context.boundary(&attachment);
    let key = render_key(gw, prepared, entry, &attachment);
    let route_vars = RouteVars {
        route: entry.lazy_value(),
        attachment: crate::render::lazy::LazySerialized::value(Arc::clone(&attachment)),
    };
    let lenient = super::set::lenience(gw.revision.as_ref());
    let live_gateways = held_child_gateways(snap, gw);
    let gateways = child_gateways(gw, &live_gateways);
    let input = SetInput {
        prepared,
        set: TemplateSet::Route,
        namespace: &route.namespace,
        owner: Owner {
            parent: &route_json,
            gateway: &gw.context.gateway,
            parent_uid: &uid,
            gateway_uid: &gw.uid,
            decoration: &gw.context.decoration,
        },
        live: &live,
        scopes: snap.scopes(),
        all_children: &|k| snap.holder(k),
        fleet: snap.fleet(),
        places: snap.places(),
        route_kind: Some(&route.kind),
        render_key: key,
        boundary: super::set::Boundary::Route {
            accepted: &boundary,
            gateways: &gateways,
        },
        lenient: lenient.as_deref(),
    };
    let result = if accepted {
        render_set(&input, &base, Some(&route_vars))
    } else {
        super::set::SetResult::default()
    };
    plan.prune = prune_list(Some(prepared), TemplateSet::Route, &live, &result);
    plan.prune
        .retain(|k| super::placement::deletable(k, snap.fleet()));
    plan.children = result.children;
    plan.held = result.held;
    plan.errors = result.errors;
    plan.states = result.states;
    plan.rollouts = result.rollouts;
    plan.warnings = result.warnings;
    plan.conflicts = result.conflicts;
    plan.live_children = plan
        .children
        .iter()
        .map(|c| {
            live.iter()
                .zip(&texts)
                .find(|(l, _)| ObjectKey::of(l) == c.key)
                .map(|(_, text)| text.clone())
        })
        .collect();
    plan
}

/// The hash of what a keyed route template's text depends on (see
/// [`crate::render::prepared::Prepared::keys_route_render`]): the Gateway's part of the
/// context and the route as the API returned it (the parsed output is checked anew).
fn render_key(
    gw: &GatewayPlan,
    prepared: &crate::render::prepared::Prepared,
    entry: &crate::snapshot::RouteEntry,
    attachment: &AttachmentVar,
) -> Option<u64> {
    if !prepared.keys_route_renders() {
        return None;
    }
    let context = gw.context.route_render_key(prepared)?;
    Some(prepared.render_key((context, entry.text(), attachment)))
}

/// The fields of a route its children's owner reference names (`apiVersion`, `kind`,
/// `metadata.name`), from what the snapshot read of it once, without its text.
fn owner_head(entry: &crate::snapshot::RouteEntry) -> Value {
    serde_json::json!({
        "apiVersion": entry.api_version.as_deref(),
        "kind": entry.view.kind.kind,
        "metadata": {"name": entry.view.name},
    })
}

/// While a Gateway template of `gw` is held or failed, the live Gateways it rendered before
/// (what a route copy still attaches to); else none.
fn held_child_gateways(snap: &Snapshot, gw: &GatewayPlan) -> Vec<Arc<Value>> {
    if gw.held.is_empty() && gw.errors.is_empty() {
        return Vec::new();
    }
    snap.children_of(&gw.uid)
        .filter(|o| crate::gateway::boundary::is_gateway(o))
        .collect()
}

/// The Gateways the blueprint renders for `gw`, what a route copy may attach to: those its
/// plan renders, then those of `live` (see [`held_child_gateways`]) it does not.
fn child_gateways<'a>(gw: &'a GatewayPlan, live: &'a [Arc<Value>]) -> Vec<&'a Value> {
    let mut gateways: Vec<&Value> = gw
        .children
        .iter()
        .filter(|c| c.key.kind == "Gateway" && crate::gateway::boundary::is_gateway(&c.object))
        .map(|c| &*c.object)
        .collect();
    for l in live {
        let same = |g: &&Value| {
            g["metadata"]["name"] == l["metadata"]["name"]
                && g["metadata"]["namespace"] == l["metadata"]["namespace"]
        };
        if !gateways.iter().any(same) {
            gateways.push(l);
        }
    }
    gateways
}

/// A hash of the Gateways route copies of `gw` may attach to (their names, and the name,
/// port and hostname of each listener): what the boundary checks of its route plans read
/// beside the route's own attachment (see [`super::memo`]).
pub(super) fn child_gateways_stamp(snap: &Snapshot, gw: &GatewayPlan) -> u64 {
    use std::hash::{Hash as _, Hasher as _};
    let live = held_child_gateways(snap, gw);
    let mut h = std::collections::hash_map::DefaultHasher::new();
    for g in child_gateways(gw, &live) {
        g["metadata"]["namespace"].as_str().hash(&mut h);
        g["metadata"]["name"].as_str().hash(&mut h);
        // What the checks read of each listener.
        for l in g["spec"]["listeners"].as_array().into_iter().flatten() {
            l["name"].as_str().hash(&mut h);
            l["port"].as_i64().hash(&mut h);
            l["hostname"].as_str().hash(&mut h);
        }
    }
    h.finish()
}
