//! `plan_gateway`: everything that must be true for one Gateway of our classes.

use std::sync::Arc;

use gateway_api::apis::standard::gatewayclasses::GatewayClass;
use gateway_api::apis::standard::gateways::{Gateway, GatewayStatusAddresses};
use serde_json::Value;

pub use super::context::GatewayContext;
use super::context::build_context;
use super::gateway_memo::Rendered;
use super::set::{ChildState, DesiredChild, Held, SetInput};
use super::templates::{prune_list, render_set};
use crate::gateway::conditions::{Cond, reasons, types};
use crate::gateway::listeners::{ClassKinds, GatewayEval, evaluate_gateway_with};
use crate::gateway::routes::{Parents, count_attached_routes};
use crate::gateway::{CONTROLLER_NAME, ListenerEval};
use crate::render::context::with_resources;
use crate::render::labels::{GatewayDecoration, Owner};
use crate::render::prepared::Prepared;
use crate::render::{RenderError, TemplateSet};
use crate::snapshot::{GatewayEntry, Key, ObjectKey, RouteEntry, RouteKey, Snapshot};

/// Everything the controller must make true for one Gateway.
#[derive(Debug)]
pub struct GatewayPlan {
    /// Namespace and name.
    pub key: Key,
    /// UID (or a stable stand-in offline).
    pub uid: String,
    /// `metadata.generation`.
    pub generation: Option<i64>,
    /// The blueprint used, when the class resolved to one.
    pub blueprint: Option<Arc<Prepared>>,
    /// The revision of the blueprint it renders, and why that one.
    pub revision: Option<super::revisions::Chosen>,
    /// Children to apply, in dependency order (shared with the memo that may reuse them).
    pub children: Arc<Vec<DesiredChild>>,
    /// Templates held back waiting for a dependency.
    pub held: Vec<Held>,
    /// Template errors.
    pub errors: Vec<RenderError>,
    /// Live children to delete, in deletion order (dependents first).
    pub prune: Vec<ObjectKey>,
    /// Readiness of each desired child.
    pub states: Vec<ChildState>,
    /// `Accepted`, as the Gateway's spec, class and parameters decide it.
    pub accepted_condition: Cond,
    /// Each spec listener as evaluated (validity, conditions, attached routes).
    pub listeners: Vec<ListenerEval>,
    /// `status.addresses` (from the status template, else the spec).
    pub addresses: Vec<GatewayStatusAddresses>,
    /// Why no address is known yet, when the status template waits.
    pub address_wait: Option<String>,
    /// The ListenerSets naming the Gateway as parent, judged, in precedence order.
    pub listener_sets: Vec<crate::gateway::listeners::ListenerSetEval>,
    /// Route attachments this Gateway decided, per route (its routes' `status.parents`
    /// entries of ours, before their own templates are rendered).
    pub attachments: Vec<(RouteKey, Parents)>,
    /// The snapshot entry of each route of `attachments`, the one they were decided on.
    pub attached_entries: Vec<Arc<RouteEntry>>,
    /// Live children of routes this Gateway no longer accepts: delete them.
    pub orphaned_route_children: Vec<ObjectKey>,
    /// What the templates saw (route templates use it too).
    pub context: GatewayContext,
    /// Whether the Gateway is accepted (only then are children applied or pruned).
    pub accepted: bool,
    /// Make-before-break replacements of the Gateway's children in progress.
    pub rollouts: Vec<super::set::Replacement>,
    /// Notes that are not errors (`gatewright render` prints them as warnings).
    pub warnings: Vec<String>,
    /// Objects it renders that another parent already holds (see the errors).
    pub conflicts: Vec<ObjectKey>,
    /// The live object of each child, in `children` order, as the plan read it.
    pub live_children: Vec<Option<Arc<Value>>>,
    /// Where placed templates went (fleet mode); `None` when the blueprint places nothing.
    pub placement: Option<super::placement::PlacementReport>,
    /// Live children to release before what adopts them is written: each with the JSON
    /// merge patch to apply (`adopt.release`).
    pub releases: Vec<(ObjectKey, Value)>,
}

impl GatewayPlan {
    /// Whether every desired child is ready and nothing is held or failed.
    #[must_use]
    pub fn converged(&self) -> bool {
        self.errors.is_empty()
            && self.held.is_empty()
            && self.states.iter().all(|s| s.readiness.is_ready())
    }
}

impl GatewayPlan {
    /// Whether its plans read live children parsed once and kept in the snapshot
    /// ([`Snapshot::children_of_kept`]): a Gateway with as many accepted routes as
    /// [`KEEP_PARSED_MIN_ROUTES`], whose plans the controller remembers. Below, a plan
    /// parses them anew, and nothing is kept.
    #[must_use]
    pub fn keeps_parsed(&self) -> bool {
        keeps_parsed(self.context.route_entries.len())
    }
}

/// The fewest accepted routes a Gateway has for its live children to be kept parsed in
/// the snapshot: the same as the controller's fewest for remembering its plans
/// (`controller::MEMO_MIN_ROUTES`). Its own children stay kept (its remembered plan holds
/// them parsed anyway); a route's, until the route's remembered plan is found applied
/// (see [`super::memo`]).
pub const KEEP_PARSED_MIN_ROUTES: usize = 16;

/// See [`GatewayPlan::keeps_parsed`].
fn keeps_parsed(accepted_routes: usize) -> bool {
    accepted_routes >= KEEP_PARSED_MIN_ROUTES
}

pub use crate::snapshot::offline_uid;

/// Why a Gateway is out of our hands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OutOfScope {
    /// No such Gateway in the snapshot.
    NoGateway,
    /// Its class does not exist.
    NoClass(String),
    /// Its class belongs to another controller.
    NotOurs,
}

/// Whether a Gateway is ours to plan: it exists and its class names our controller.
///
/// # Errors
/// See [`OutOfScope`].
pub fn in_scope(snap: &Snapshot, key: &Key) -> Result<(), OutOfScope> {
    ours(snap, key).map(|_| ())
}

fn ours<'a>(
    snap: &'a Snapshot,
    key: &Key,
) -> Result<(&'a Arc<GatewayEntry>, &'a Arc<GatewayClass>), OutOfScope> {
    let entry = snap.gateway(key).ok_or(OutOfScope::NoGateway)?;
    let class_name = &entry.typed.spec.gateway_class_name;
    let class = snap
        .class(class_name)
        .ok_or_else(|| OutOfScope::NoClass(class_name.clone()))?;
    if class.spec.controller_name != CONTROLLER_NAME {
        return Err(OutOfScope::NotOurs);
    }
    Ok((entry, class))
}

/// Plans one Gateway. Returns `Err` when the Gateway is not ours to touch.
///
/// # Errors
/// See [`OutOfScope`].
pub fn plan_gateway(snap: &Snapshot, key: &Key) -> Result<GatewayPlan, OutOfScope> {
    plan_gateway_with(snap, key, None)
}

/// [`plan_gateway`], reusing what `memo` remembers of the Gateway's earlier plan when
/// nothing its templates read changed (see [`super::memo`]); the result is the same.
pub(crate) fn plan_gateway_with(
    snap: &Snapshot,
    key: &Key,
    mut memo: Option<&mut super::gateway_memo::GatewayMemo>,
) -> Result<GatewayPlan, OutOfScope> {
    let (entry, class) = ours(snap, key)?;
    let gw = &entry.typed;
    let class_name = &gw.spec.gateway_class_name;
    let generation = gw.metadata.generation;
    let uid = entry.uid.clone();

    let class_json = serde_json::to_value(class.as_ref()).unwrap_or(Value::Null);
    let (blueprint, revision) = super::revisions::resolve(snap, class, gw, key);
    let kinds = blueprint.as_ref().map_or_else(
        |_| ClassKinds::all(),
        |p| super::class::class_kinds(class_name, p),
    );
    let sets: Vec<&crate::gateway::listenersets::ListenerSetView> =
        snap.listener_sets_of(key).map(|s| &s.view).collect();
    let mut eval = evaluate_gateway_with(gw, &sets, snap, &kinds);

    // Route attachment (independent of the blueprint), in route key order.
    let super::gateway_memo::Attached {
        attachments,
        entries: attached,
        vars,
        ..
    } = attach_routes(snap, key, gw, &mut eval, memo.as_deref_mut());

    let params = super::layers::infrastructure_values(snap, gw, blueprint.as_ref().ok());
    let (accepted_cond, blueprint) =
        accepted_condition(&eval, &params, blueprint, revision.is_some(), class_name);
    let accepted = accepted_cond.status.is_true();

    let gateway_json = memo
        .as_deref_mut()
        .map_or_else(|| Arc::new(entry.json()), |m| m.attach.gateway(entry));
    let vars_kept = vars.is_some();
    let (mut context, accepted_routes) = build_context(
        Arc::clone(&gateway_json),
        class_json,
        &eval,
        (&attachments, &attached),
        vars,
        params.ok(),
    );
    context.status_watch = blueprint.as_ref().map(|p| p.gateway_status_watch());
    if let Some(m) = memo.as_deref_mut() {
        if !vars_kept {
            m.attach
                .remember_vars(&context.listeners, &context.hostnames);
        }
        context.converted = m.attach.converted(vars_kept, context.status_watch.as_ref());
        if let Some(g) = m.attach.without_status() {
            context.seed_without_status(g);
        }
    }
    context.decoration = GatewayDecoration::new(&gateway_json, &uid);
    context.route_entries = accepted_routes.into_iter().cloned().collect();
    let attached_entries = attached.into_iter().cloned().collect();
    // The live children, parsed (or as the memo parsed them, when they are the same).
    let live = super::gateway_memo::LiveChildren::read(
        snap,
        &uid,
        keeps_parsed(context.route_entries.len()),
        memo.as_deref().map(|m| &m.live),
    );

    let mut plan = GatewayPlan {
        key: key.clone(),
        uid: uid.clone(),
        generation,
        blueprint: blueprint.clone(),
        revision,
        children: Arc::default(),
        held: Vec::new(),
        errors: Vec::new(),
        prune: Vec::new(),
        releases: Vec::new(),
        states: Vec::new(),
        accepted_condition: accepted_cond,
        listeners: Vec::new(),
        addresses: Vec::new(),
        address_wait: None,
        attachments,
        attached_entries,
        listener_sets: std::mem::take(&mut eval.sets),
        orphaned_route_children: Vec::new(),
        context,
        accepted,
        rollouts: Vec::new(),
        warnings: Vec::new(),
        conflicts: Vec::new(),
        live_children: Vec::new(),
        placement: blueprint.as_ref().filter(|_| accepted).and_then(|p| {
            super::placement::PlacementReport::of(&p.spec, snap.fleet(), snap.places())
        }),
    };

    if let (true, Some(prepared)) = (accepted, blueprint.as_ref()) {
        plan.context.routes_shown = true;
        let rendered = render_own(&plan, gw, prepared, snap, &live, memo.as_deref_mut());
        take_rendered(&mut plan, rendered);
        plan.orphaned_route_children = orphaned_route_children(
            snap,
            &uid,
            &plan.context.route_entries,
            memo.as_deref_mut().map(|m| &mut m.orphans),
        );
    }
    if let Some(memo) = memo {
        memo.live = live;
    }

    plan.listeners = eval.listeners;
    Ok(plan)
}

/// The routes attached to the Gateway's listeners, in route key order, with the routes
/// each listener counts set in `eval` (the last plan's counts when every attachment is
/// what it was then).
fn attach_routes<'s>(
    snap: &'s Snapshot,
    key: &Key,
    gw: &gateway_api::apis::standard::gateways::Gateway,
    eval: &mut GatewayEval,
    mut memo: Option<&mut super::gateway_memo::GatewayMemo>,
) -> super::gateway_memo::Attached<'s> {
    let mut attached = super::gateway_memo::attach(
        snap,
        key,
        gw,
        eval,
        memo.as_deref_mut().map(|m| &mut m.attach),
    );
    match attached.counts.take() {
        // Every attachment is the last plan's: so is what each listener counts.
        Some(counts) => {
            for (l, n) in eval.listeners.iter_mut().zip(counts) {
                l.attached_routes = n;
            }
        }
        None => {
            count_attached_routes(eval, attached.attachments.iter().map(|(_, a)| &**a));
            if let Some(m) = memo {
                m.attach.remember_counts(eval);
            }
        }
    }
    attached
}

/// The Gateway's `Accepted`, as its evaluation, its parameters and its class's blueprint
/// decide it; and the blueprint, when the class resolved to one. `chosen`: a revision of
/// the blueprint was chosen, so a `blueprint` error is that revision's
/// (`RevisionInvalid`, what halts a rollout), not the class's (`Invalid`).
fn accepted_condition(
    eval: &GatewayEval,
    params: &Result<Value, String>,
    blueprint: Result<Arc<Prepared>, String>,
    chosen: bool,
    class_name: &str,
) -> (Cond, Option<Arc<Prepared>>) {
    let mut accepted_cond = eval.accepted.clone();
    if let Err(msg) = params {
        accepted_cond = Cond::f(types::ACCEPTED, reasons::INVALID_PARAMETERS, msg);
    }
    let blueprint = match blueprint {
        Ok(b) => Some(b),
        Err(msg) => {
            if accepted_cond.status.is_true() {
                accepted_cond = Cond::f(
                    types::ACCEPTED,
                    if chosen {
                        reasons::REVISION_INVALID
                    } else {
                        reasons::INVALID
                    },
                    &format!("GatewayClass {class_name} is not accepted: {msg}"),
                );
            }
            None
        }
    };
    (accepted_cond, blueprint)
}

/// What the Gateway's own templates render for `plan`: what `memo` kept when nothing they
/// read changed, else rendered (and kept).
fn render_own(
    plan: &GatewayPlan,
    gw: &Gateway,
    prepared: &Arc<Prepared>,
    snap: &Snapshot,
    live: &super::gateway_memo::LiveChildren,
    memo: Option<&mut super::gateway_memo::GatewayMemo>,
) -> Rendered {
    // A placed template's render also depends on the fleet, which the memo does not
    // key on: such blueprints are rendered afresh.
    // Nor is a Gateway whose boundary refusals are only warnings (see `set::lenience`):
    // what the memo kept may have been judged strictly.
    let reuse = !prepared.places() && super::set::lenience(plan.revision.as_ref()).is_none();
    match memo
        .as_ref()
        .filter(|_| reuse)
        .and_then(|m| m.rendered_for(&context_ref(plan), prepared, live, snap))
    {
        Some(r) => r.clone(),
        None => {
            let lenient = super::set::lenience(plan.revision.as_ref());
            let parents = plan
                .context
                .listeners
                .iter()
                .map(|l| (l.key.as_str(), &l.allowed_routes["namespaces"]))
                .collect();
            let input = SetInput {
                prepared,
                set: TemplateSet::Gateway,
                namespace: &plan.key.namespace,
                owner: Owner {
                    parent: &plan.context.gateway,
                    gateway: &plan.context.gateway,
                    parent_uid: &plan.uid,
                    gateway_uid: &plan.uid,
                    decoration: &plan.context.decoration,
                },
                live: &live.objects,
                scopes: snap.scopes(),
                all_children: &|k| snap.holder(k),
                fleet: snap.fleet(),
                places: snap.places(),
                route_kind: None,
                render_key: None,
                boundary: super::set::Boundary::Gateway(parents),
                lenient: lenient.as_deref(),
            };
            let r = render_gateway(&input, plan.context.base(), gw);
            if let Some(memo) = memo.filter(|_| reuse) {
                let inputs = super::gateway_memo::GatewayInputs::of(
                    &context_ref(plan),
                    prepared,
                    live,
                    snap,
                );
                memo.remember(inputs, &r, snap, prepared);
            }
            r
        }
    }
}

/// The live children of routes the Gateway `uid` no longer accepts (to delete): what
/// `memo` found last time when the Gateway's children, the accepted routes and the fleet
/// are the same, else found (and kept).
fn orphaned_route_children(
    snap: &Snapshot,
    uid: &str,
    accepted_routes: &[Arc<RouteEntry>],
    memo: Option<&mut Option<super::gateway_memo::Orphans>>,
) -> Vec<ObjectKey> {
    let stamp = snap.gateway_children_stamp(uid);
    if stamp == 0 {
        // No live child carries the Gateway's label.
        return Vec::new();
    }
    let Some(memo) = memo else {
        return find_orphaned_route_children(snap, uid, accepted_routes);
    };
    if let Some(o) = memo
        .as_ref()
        .filter(|o| o.holds(snap, stamp, accepted_routes))
    {
        return o.found.clone();
    }
    let found = find_orphaned_route_children(snap, uid, accepted_routes);
    *memo = Some(super::gateway_memo::Orphans::new(
        snap,
        stamp,
        accepted_routes,
        found.clone(),
    ));
    found
}

fn find_orphaned_route_children(
    snap: &Snapshot,
    uid: &str,
    accepted_routes: &[Arc<RouteEntry>],
) -> Vec<ObjectKey> {
    let mut route_children = snap.route_children_by_gateway(uid).peekable();
    if route_children.peek().is_none() {
        return Vec::new();
    }
    let accepted: std::collections::BTreeSet<&str> =
        accepted_routes.iter().map(|r| r.uid.as_str()).collect();
    route_children
        .filter(|(k, parent)| {
            !accepted.contains(parent) && super::placement::deletable(k, snap.fleet())
        })
        .map(|(k, _)| k.clone())
        .collect()
}

/// What the Gateway's own templates read of its plan, for [`super::gateway_memo`].
fn context_ref(plan: &GatewayPlan) -> super::gateway_memo::ContextRef<'_> {
    let ctx = &plan.context;
    super::gateway_memo::ContextRef {
        uid: &plan.uid,
        gateway: &ctx.gateway,
        class: &ctx.class,
        values: &ctx.values,
        listeners: &ctx.listeners,
        hostnames: &ctx.hostnames,
    }
}

/// Puts what rendering the Gateway's own templates gave into its plan.
fn take_rendered(plan: &mut GatewayPlan, r: Rendered) {
    plan.children = r.children;
    plan.held = r.held;
    plan.errors = r.errors;
    plan.prune = r.prune;
    plan.states = r.states;
    plan.rollouts = r.rollouts;
    plan.warnings = r.warnings;
    plan.conflicts = r.conflicts;
    plan.addresses = r.addresses;
    plan.address_wait = r.address_wait;
    plan.live_children = r.live_children;
    plan.releases = r.releases;
    if let Some(p) = plan.placement.as_mut() {
        p.refused_addresses = r.refused_addresses;
    }
}

/// Renders the Gateway templates of `input`, and the status template from what they gave.
fn render_gateway(
    input: &SetInput<'_>,
    base: &minijinja::Value,
    gw: &gateway_api::apis::standard::gateways::Gateway,
) -> Rendered {
    let prepared = input.prepared;
    let result = render_set(input, base, None);
    let mut prune = prune_list(Some(prepared), TemplateSet::Gateway, input.live, &result);
    prune.retain(|k| super::placement::deletable(k, input.fleet));
    let mut out = Rendered {
        prune,
        ..Rendered::default()
    };
    let mut errors = Vec::new();
    match &prepared.spec.status {
        Some(_) => match prepared
            .status_deps
            .iter()
            .find(|d| !result.resources.contains_key(*d))
        {
            Some(missing) => {
                out.address_wait =
                    Some(format!("the status template waits for template {missing}"));
            }
            None => {
                let ctx = with_resources(base, None, &result.resources, &result.pending);
                match super::addresses::render_addresses(prepared, &ctx) {
                    Ok(a) => out.addresses = a,
                    Err(e) if e.category == "UndefinedVariable" => {
                        out.address_wait =
                            Some(format!("the status template waits: {}", e.message));
                    }
                    Err(e) => errors.push(e),
                }
            }
        },
        None => out.addresses = super::addresses::spec_addresses(gw),
    }
    out.live_children = super::set::live_of(&result.children, input.live);
    out.children = Arc::new(result.children);
    out.held = result.held;
    out.errors = errors;
    out.errors.extend(result.errors);
    out.states = result.states;
    out.rollouts = result.rollouts;
    out.warnings = result.warnings;
    out.conflicts = result.conflicts;
    out.refused_addresses = result.refused_addresses;
    out.releases = result.releases;
    out.refused_addresses.sort();
    out.refused_addresses.dedup();
    out
}
