//! Every status of a Gateway and its routes, computed in one place.
//!
//! In: a [`Snapshot`] and a Gateway key. Out: a [`Plan`]: the Gateway's children and its
//! routes' children (from [`plan_gateway`] and [`plan_route`]), the Gateway's status
//! (conditions, listeners, addresses) and, for each route naming the Gateway, our
//! `status.parents` entries. The controller and `gatewright render` both write what this
//! returns; the controller only adds what executing the plan found out (a kind not
//! served, an apply that failed: [`GatewayStatusPlan::after_apply`]) and, with its clock,
//! which replacements are stuck.

use gateway_api::apis::standard::gateways::{
    GatewayStatus, GatewayStatusAddresses, GatewayStatusListeners,
    GatewayStatusListenersSupportedKinds,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use serde_json::Value;

use super::gateway::{GatewayPlan, OutOfScope};
use super::memo::PlanMemo;
use super::readiness::Readiness;
use super::route::RoutePlan;
use super::set::{DesiredChild, Replacement};
use crate::gateway::conditions::{Cond, merge_conditions, reasons, types};
use crate::gateway::listeners::gateway_owned_types;
use crate::gateway::{ListenerEval, Parents};
use crate::render::RenderError;
use crate::snapshot::{Key, ObjectKey, RouteKey, Snapshot};

pub use super::route_parents::{merged_route_parents, next_route_parents, same_parent};

/// Everything that must be true for one Gateway and the routes it accepted.
#[derive(Debug)]
pub struct Plan {
    /// The Gateway's own children, prune list, readiness and rollouts.
    pub gateway: GatewayPlan,
    /// One plan per route the Gateway accepted, in route order (shared with the
    /// [`PlanMemo`] that may reuse it).
    pub routes: Vec<std::sync::Arc<RoutePlan>>,
    /// Every status to write.
    pub status: PlanStatus,
}

/// The statuses of a [`Plan`], without timestamps.
#[derive(Clone, Debug, PartialEq)]
pub struct PlanStatus {
    /// The Gateway's.
    pub gateway: GatewayStatusPlan,
    /// Our `status.parents` entries for each route naming the Gateway, in route order.
    pub routes: Vec<RouteParents>,
}

/// Our `status.parents` entries of one route for one Gateway (one per parentRef naming it).
#[derive(Clone, Debug)]
pub struct RouteParents {
    /// The route.
    pub route: RouteKey,
    /// In parentRef order.
    pub entries: Parents,
    /// The route's snapshot entry they were decided on (`None` outside a plan).
    pub entry: Option<std::sync::Arc<crate::snapshot::RouteEntry>>,
}

impl PartialEq for RouteParents {
    fn eq(&self, other: &Self) -> bool {
        let same_entry = match (&self.entry, &other.entry) {
            (Some(a), Some(b)) => std::sync::Arc::ptr_eq(a, b),
            (None, None) => true,
            _ => false,
        };
        self.route == other.route && self.entries == other.entries && same_entry
    }
}

/// The status of a Gateway, without timestamps.
#[derive(Clone, Debug, PartialEq)]
pub struct GatewayStatusPlan {
    /// Gateway conditions (Accepted, Programmed, and Rollout where the blueprint has
    /// make-before-break templates).
    pub conditions: Vec<Cond>,
    /// One entry per spec listener.
    pub listeners: Vec<(ListenerEval, Vec<Cond>)>,
    /// `status.addresses`.
    pub addresses: Vec<GatewayStatusAddresses>,
    /// `status.attachedListenerSets`: how many ListenerSets are attached; `None` when no
    /// ListenerSet names the Gateway (the field stays unset).
    pub attached_listener_sets: Option<i32>,
    /// The status of each ListenerSet naming the Gateway as parent.
    pub listener_sets: Vec<ListenerSetStatusPlan>,
}

/// The status of a ListenerSet, without timestamps.
#[derive(Clone, Debug, PartialEq)]
pub struct ListenerSetStatusPlan {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// `metadata.generation`.
    pub generation: i64,
    /// `Accepted` and `Programmed`.
    pub conditions: Vec<Cond>,
    /// One entry per listener of the set (none when the set is not allowed).
    pub listeners: Vec<(ListenerEval, Vec<Cond>)>,
}

impl ListenerSetStatusPlan {
    fn new(
        set: &crate::gateway::listeners::ListenerSetEval,
        all: &[ListenerEval],
        gateway_programmed: &Cond,
    ) -> Self {
        let key = (set.namespace.clone(), set.name.clone());
        let programmed = if set.attached() {
            gateway_programmed.clone()
        } else {
            Cond::f(
                types::PROGRAMMED,
                &set.accepted.reason,
                &set.accepted.message,
            )
        };
        Self {
            namespace: set.namespace.clone(),
            name: set.name.clone(),
            generation: set.generation,
            listeners: all
                .iter()
                .filter(|l| l.set.as_ref() == Some(&key))
                .map(|l| (l.clone(), l.status_conds(&programmed)))
                .collect(),
            conditions: vec![set.accepted.clone(), programmed],
        }
    }

    /// `status` to write, merged with the set's `existing` status (JSON): lastTransitionTime
    /// kept where a condition did not change, conditions of other owners kept.
    #[must_use]
    pub fn to_status(&self, existing: &Value, now: &Time) -> Value {
        let old_conds: Vec<Condition> =
            serde_json::from_value(existing["conditions"].clone()).unwrap_or_default();
        let generation = Some(self.generation);
        let listeners: Vec<Value> = self
            .listeners
            .iter()
            .map(|(l, conds)| {
                let old: Vec<Condition> = existing["listeners"]
                    .as_array()
                    .and_then(|ls| ls.iter().find(|o| o["name"] == l.name.as_str()))
                    .and_then(|o| serde_json::from_value(o["conditions"].clone()).ok())
                    .unwrap_or_default();
                serde_json::json!({
                    "name": l.name,
                    "attachedRoutes": l.attached_routes,
                    "supportedKinds": l.supported_kinds.iter().map(|k| serde_json::json!({"group": k.group, "kind": k.kind})).collect::<Vec<_>>(),
                    "conditions": merge_conditions(&old, conds, ListenerEval::owned_types(), generation, now),
                })
            })
            .collect();
        serde_json::json!({
            "conditions": merge_conditions(&old_conds, &self.conditions, &[types::ACCEPTED, types::PROGRAMMED], generation, now),
            "listeners": listeners,
        })
    }
}

/// Plans a Gateway and every route it accepted, and computes every status.
///
/// # Errors
/// See [`OutOfScope`]: the Gateway is not ours to touch.
pub fn plan(snap: &Snapshot, key: &Key) -> Result<Plan, OutOfScope> {
    plan_inner(snap, key, None)
}

/// [`plan`], reusing the route plans `memo` remembers from earlier plans of the same
/// Gateway whose inputs did not change (see [`super::memo`]); the result is the same.
///
/// # Errors
/// See [`OutOfScope`]: the Gateway is not ours to touch.
pub fn plan_with(snap: &Snapshot, key: &Key, memo: &mut PlanMemo) -> Result<Plan, OutOfScope> {
    plan_inner(snap, key, Some(memo))
}

fn plan_inner(
    snap: &Snapshot,
    key: &Key,
    mut memo: Option<&mut PlanMemo>,
) -> Result<Plan, OutOfScope> {
    let mut gateway =
        super::gateway::plan_gateway_with(snap, key, memo.as_deref_mut().map(|m| &mut m.gateway))?;
    let routes = match memo {
        Some(m) => {
            let routes = m.route_plans(snap, &gateway);
            m.gateway.attach.keep_converted(
                &gateway.context.converted,
                gateway.context.status_watch.as_ref(),
            );
            routes
        }
        None => gateway
            .context
            .routes
            .iter()
            .map(|r| std::sync::Arc::new(super::route::plan_route(snap, &gateway, r)))
            .collect(),
    };
    let attachments = std::mem::take(&mut gateway.attachments);
    let entries = std::mem::take(&mut gateway.attached_entries);
    let status = PlanStatus {
        gateway: gateway_status(&gateway, &routes),
        routes: route_parents(attachments, entries, &routes),
    };
    Ok(Plan {
        gateway,
        routes,
        status,
    })
}

impl Plan {
    /// The child kinds, as `(apiVersion, kind)`, the plan uses: what it renders, prunes
    /// and takes from routes it no longer accepts (the live children's own kinds are the
    /// snapshot's to add).
    #[must_use]
    pub fn child_kinds(&self) -> std::collections::BTreeSet<(String, String)> {
        let g = &self.gateway;
        // Borrowed while collected: most children of a shared Gateway are of one kind.
        let kinds: std::collections::BTreeSet<(&str, &str)> = self
            .children()
            .map(|c| &c.key)
            .chain(&g.prune)
            .chain(self.routes.iter().flat_map(|r| r.prune.iter()))
            .chain(&g.orphaned_route_children)
            .chain(g.releases.iter().map(|(k, _)| k))
            .map(|k| (k.api_version.as_str(), k.kind.as_str()))
            .chain(g.blueprint.iter().flat_map(|b| b.adopted_kinds()))
            .collect();
        kinds
            .into_iter()
            .map(|(v, k)| (v.to_owned(), k.to_owned()))
            .collect()
    }

    /// Every child to apply in dependency order: the Gateway's, then each route's.
    pub fn children(&self) -> impl Iterator<Item = &DesiredChild> {
        self.gateway
            .children
            .iter()
            .chain(self.routes.iter().flat_map(|r| r.children.iter()))
    }

    /// Every template error: the Gateway's, then each route's.
    pub fn errors(&self) -> impl Iterator<Item = &RenderError> {
        self.gateway
            .errors
            .iter()
            .chain(self.routes.iter().flat_map(|r| r.errors.iter()))
    }

    /// Every object the Gateway or a route would render that another parent holds.
    pub fn conflicts(&self) -> impl Iterator<Item = &ObjectKey> {
        self.gateway
            .conflicts
            .iter()
            .chain(self.routes.iter().flat_map(|r| r.conflicts.iter()))
    }

    /// Every make-before-break replacement under way: the Gateway's, then each route's.
    pub fn rollouts(&self) -> impl Iterator<Item = &Replacement> {
        self.gateway
            .rollouts
            .iter()
            .chain(self.routes.iter().flat_map(|r| r.rollouts.iter()))
    }
}

/// The Gateway's status: `Accepted`, `Programmed` (every child ready, every template of
/// the Gateway and its routes rendered, an address known), the Rollout condition, and
/// each listener's conditions.
fn gateway_status(gw: &GatewayPlan, routes: &[std::sync::Arc<RoutePlan>]) -> GatewayStatusPlan {
    let programmed = programmed_cond(gw, routes);
    let mut conditions = vec![gw.accepted_condition.clone(), programmed.clone()];
    if let Some(chosen) = &gw.revision {
        conditions.push(chosen.condition());
    }
    if gw.accepted
        && let Some(prepared) = gw.blueprint.as_deref()
        && prepared.has_make_before_break()
    {
        let rollouts = gw
            .rollouts
            .iter()
            .chain(routes.iter().flat_map(|r| r.rollouts.iter()));
        conditions.push(rollout_cond(rollouts));
    }
    if let Some(report) = &gw.placement {
        let (ok, reason, message) = report.condition();
        let placed = super::placement::CONDITION_PLACED;
        conditions.push(if ok {
            Cond::t(placed, reason, &message)
        } else {
            Cond::f(placed, reason, &message)
        });
    }
    GatewayStatusPlan {
        conditions,
        listeners: gw
            .listeners
            .iter()
            .filter(|l| l.set.is_none())
            .map(|l| (l.clone(), l.status_conds(&programmed)))
            .collect(),
        addresses: gw.addresses.clone(),
        attached_listener_sets: (!gw.listener_sets.is_empty()).then(|| {
            i32::try_from(gw.listener_sets.iter().filter(|s| s.attached()).count())
                .unwrap_or(i32::MAX)
        }),
        listener_sets: gw
            .listener_sets
            .iter()
            .map(|s| ListenerSetStatusPlan::new(s, &gw.listeners, &programmed))
            .collect(),
    }
}

fn programmed_cond(gw: &GatewayPlan, routes: &[std::sync::Arc<RoutePlan>]) -> Cond {
    let p = types::PROGRAMMED;
    if !gw.accepted {
        return Cond::f(p, reasons::INVALID, "the Gateway is not accepted");
    }
    if !gw.listeners.iter().any(|l| l.set.is_none() && l.is_valid()) {
        return Cond::f(p, reasons::INVALID, "no listener is valid");
    }
    let errors: Vec<&RenderError> = gw
        .errors
        .iter()
        .chain(routes.iter().flat_map(|r| r.errors.iter()))
        .collect();
    if let Some(e) = errors.first() {
        return Cond::f(p, reasons::INVALID, &with_more(e, errors.len()));
    }
    if gw.placement.as_ref().is_some_and(|r| r.not_applied) {
        return Cond::f(
            p,
            reasons::PENDING,
            "the blueprint places templates in member clusters, which takes fleet mode (see the gatewright.dev/Placed condition)",
        );
    }
    if let Some(h) = gw.held.first() {
        return Cond::f(
            p,
            reasons::PENDING,
            &format!("template {} is {}", h.template, h.reason),
        );
    }
    let not_ready: Vec<String> = gw
        .states
        .iter()
        .filter_map(|s| match &s.readiness {
            Readiness::Ready => None,
            Readiness::NotReady(why) => Some(format!("{} ({why})", s.key)),
            Readiness::Missing => Some(format!("{} (not created yet)", s.key)),
        })
        .collect();
    if !not_ready.is_empty() {
        return Cond::f(
            p,
            reasons::PENDING,
            &format!("waiting for children to be ready: {}", not_ready.join("; ")),
        );
    }
    if gw.addresses.is_empty() {
        let why = gw
            .address_wait
            .as_deref()
            .unwrap_or("no address is known yet");
        return Cond::f(p, reasons::ADDRESS_NOT_ASSIGNED, why);
    }
    Cond::t(
        p,
        reasons::PROGRAMMED,
        "all children are ready and the Gateway has an address",
    )
}

/// The first error's message, and how many more there are.
fn with_more(first: &impl std::fmt::Display, count: usize) -> String {
    if count > 1 {
        format!("{first} (and {} more errors)", count - 1)
    } else {
        first.to_string()
    }
}

/// The `gatewright.dev/Rollout` condition for the replacements in progress:
/// True/Complete when none is, else False/Progressing naming what each waits for. The
/// controller turns it to `Stuck` once a replacement has taken longer than its timeout
/// (the planner has no clock).
#[must_use]
pub fn rollout_cond<'a>(rollouts: impl IntoIterator<Item = &'a Replacement>) -> Cond {
    let parts: Vec<String> = rollouts
        .into_iter()
        .map(|r| {
            format!(
                "template {}: {} -> {} ({:?}): {}",
                r.label(),
                r.from.as_deref().unwrap_or("-"),
                r.to,
                r.phase,
                r.waiting_for
            )
        })
        .collect();
    if parts.is_empty() {
        return Cond::t(
            types::ROLLOUT,
            reasons::COMPLETE,
            "every make-before-break child serves its latest version",
        );
    }
    Cond::f(types::ROLLOUT, reasons::PROGRESSING, &parts.join("; "))
}

/// Each route's entries of ours, with `gatewright.dev/Rendered=False/TemplateError` on
/// the routes whose own templates failed, so the app team reading the route sees it, not
/// only the Gateway's owner.
fn route_parents(
    attachments: Vec<(RouteKey, Parents)>,
    attached: Vec<std::sync::Arc<crate::snapshot::RouteEntry>>,
    routes: &[std::sync::Arc<RoutePlan>],
) -> Vec<RouteParents> {
    // Both are in route key order (a route plan for each accepted route): one walk.
    let mut plans = routes.iter().peekable();
    let mut attached = attached.into_iter();
    attachments
        .into_iter()
        .map(|(route, mut entries)| {
            let plan = loop {
                match plans.peek().map(|r| r.route.cmp(&route)) {
                    Some(std::cmp::Ordering::Less) => {
                        plans.next();
                    }
                    Some(std::cmp::Ordering::Equal) => break plans.next(),
                    Some(std::cmp::Ordering::Greater) | None => break None,
                }
            };
            let errors: Vec<&RenderError> = plan
                .map_or(&[][..], |r| r.errors.as_slice())
                .iter()
                .collect();
            let render_error = errors.first().map(|first| {
                Cond::f(
                    types::RENDERED,
                    reasons::TEMPLATE_ERROR,
                    &with_more(first, errors.len()),
                )
            });
            // Attachment never sets it: only an error needs the entries copied.
            if render_error.is_some() {
                for e in std::sync::Arc::make_mut(&mut entries) {
                    e.render_error.clone_from(&render_error);
                }
            }
            RouteParents {
                route,
                entries,
                entry: attached.next(),
            }
        })
        .collect()
}

impl GatewayStatusPlan {
    /// The status once the plan was executed: what will not fix itself (a child kind the
    /// API server does not serve, a child another parent or object holds:
    /// `Programmed=False/Invalid`), else a child that could not be applied yet
    /// (`Programmed=False/Pending`), replaces the planned `Programmed` on the Gateway
    /// and its valid listeners.
    #[must_use]
    pub fn after_apply(mut self, lasting: Option<&str>, apply_error: Option<&str>) -> Self {
        let programmed = match (lasting, apply_error) {
            (Some(m), _) => Cond::f(types::PROGRAMMED, reasons::INVALID, m),
            (None, Some(e)) => Cond::f(types::PROGRAMMED, reasons::PENDING, e),
            (None, None) => return self,
        };
        for (l, conds) in &mut self.listeners {
            *conds = l.status_conds(&programmed);
        }
        for set in &mut self.listener_sets {
            if set.conditions.first().is_some_and(|a| a.status.is_true()) {
                for (l, conds) in &mut set.listeners {
                    *conds = l.status_conds(&programmed);
                }
                if let Some(p) = set.conditions.get_mut(1) {
                    *p = programmed.clone();
                }
            }
        }
        self.set(programmed);
        self
    }

    /// Replaces the condition of the same type, if the plan has one.
    pub fn set(&mut self, cond: Cond) {
        if let Some(c) = self.conditions.iter_mut().find(|c| c.type_ == cond.type_) {
            *c = cond;
        }
    }

    /// A condition by type.
    #[must_use]
    pub fn condition(&self, type_: &str) -> Option<&Cond> {
        self.conditions.iter().find(|c| c.type_ == type_)
    }

    /// The status to write: conditions merged with `existing` (keeping lastTransitionTime
    /// where nothing changed and conditions of other owners), `observedGeneration` set.
    #[must_use]
    pub fn to_status(
        &self,
        existing: Option<&GatewayStatus>,
        generation: Option<i64>,
        now: &Time,
    ) -> GatewayStatus {
        let old_conds = existing
            .and_then(|s| s.conditions.as_deref())
            .unwrap_or_default();
        let old_listeners = existing.and_then(|s| s.listeners.as_ref());
        let listeners = self
            .listeners
            .iter()
            .map(|(l, conds)| {
                let old = old_listeners
                    .and_then(|ls| ls.iter().find(|o| o.name == l.name))
                    .map(|o| o.conditions.as_slice())
                    .unwrap_or_default();
                GatewayStatusListeners {
                    name: l.name.clone(),
                    attached_routes: l.attached_routes,
                    supported_kinds: Some(
                        l.supported_kinds
                            .iter()
                            .map(|k| GatewayStatusListenersSupportedKinds {
                                group: Some(k.group.clone()),
                                kind: k.kind.clone(),
                            })
                            .collect(),
                    ),
                    conditions: merge_conditions(
                        old,
                        conds,
                        ListenerEval::owned_types(),
                        generation,
                        now,
                    ),
                }
            })
            .collect();
        GatewayStatus {
            addresses: if self.addresses.is_empty() {
                None
            } else {
                Some(self.addresses.clone())
            },
            conditions: Some(merge_conditions(
                old_conds,
                &self.conditions,
                gateway_owned_types(),
                generation,
                now,
            )),
            listeners: Some(listeners),
            attached_listener_sets: self.attached_listener_sets,
        }
    }
}
