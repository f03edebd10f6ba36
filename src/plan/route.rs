//! `plan_route`: the children of one route under one Gateway, and `route_status`: the
//! `status.parents` entries of ours for a route, across all our Gateways it names.

use std::sync::Arc;

use serde_json::Value;

use super::gateway::{GatewayPlan, uid_of};
use super::labels::{self, Owner};
use super::templates::{ChildState, DesiredChild, Held, SetInput, prune_list, render_set};
use crate::gateway::routes::ParentAttachment;
use crate::render::{RenderError, TemplateSet};
use crate::snapshot::{ObjectKey, RouteKey, Snapshot};

/// The children of one route under one Gateway.
#[derive(Debug, Default)]
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
    pub rollouts: Vec<super::RolloutState>,
    /// Notes that are not errors (`gatewright render` prints them as warnings).
    pub warnings: Vec<String>,
    /// Objects it renders that another parent already holds (see the errors).
    pub conflicts: Vec<ObjectKey>,
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
    let uid = uid_of(&entry.json, &route.0);
    let live: Vec<Arc<Value>> = snap
        .children_of(&uid)
        .filter(|c| labels::gateway_uid(c) == Some(gw.uid.as_str()))
        .cloned()
        .collect();
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
    let accepted = gw.context.routes.contains(route);
    let base = gw.context.base.clone();
    let route_value = entry.value.clone();
    let input = SetInput {
        prepared,
        set: TemplateSet::Route,
        namespace: &route.1,
        owner: Owner {
            parent: &entry.json,
            gateway: &gw.context.gateway,
            parent_uid: &uid,
            gateway_uid: &gw.uid,
        },
        live: &live,
        scopes: snap.scopes(),
        all_children: &|k| snap.holder(k).cloned(),
    };
    let result = if accepted {
        render_set(&input, &base, Some(&route_value))
    } else {
        super::templates::SetResult::default()
    };
    plan.prune = prune_list(Some(prepared), TemplateSet::Route, &live, &result);
    plan.children = result.children;
    plan.held = result.held;
    plan.errors = result.errors;
    plan.states = result.states;
    plan.rollouts = result.rollouts;
    plan.warnings = result.warnings;
    plan.conflicts = result.conflicts;
    plan
}

/// Our `status.parents` entries for `route`: one per parentRef that names a Gateway of
/// ours, from the attachments the Gateway plans decided, in parentRef order.
#[must_use]
pub fn route_status<'a>(
    route: &RouteKey,
    gateway_plans: impl IntoIterator<Item = &'a GatewayPlan>,
) -> Vec<ParentAttachment> {
    let mut out: Vec<ParentAttachment> = gateway_plans
        .into_iter()
        .flat_map(|g| {
            g.attachments
                .iter()
                .filter(|(k, _)| k == route)
                .flat_map(|(_, a)| a.iter().cloned())
        })
        .collect();
    out.sort_by_key(|a| a.parent_index);
    out.dedup_by_key(|a| a.parent_index);
    out
}

/// The route's `status.parents` after our write: other controllers' entries kept as they
/// are and in order, ours replaced by `ours` (one per parentRef, lastTransitionTime kept
/// where a condition did not change), stale entries of ours dropped.
#[must_use]
pub fn merge_route_parents(
    existing: Option<&Value>,
    ours: &[ParentAttachment],
    generation: Option<i64>,
    now: &k8s_openapi::apimachinery::pkg::apis::meta::v1::Time,
) -> Vec<Value> {
    use crate::gateway::CONTROLLER_NAME;
    use crate::gateway::conditions::merge_conditions;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
    let old: Vec<Value> = existing
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let mut out: Vec<Value> = old
        .iter()
        .filter(|p| p["controllerName"] != CONTROLLER_NAME)
        .cloned()
        .collect();
    for a in ours {
        let previous: Vec<Condition> = old
            .iter()
            .find(|p| {
                p["controllerName"] == CONTROLLER_NAME
                    && same_parent(&p["parentRef"], &a.status_ref)
            })
            .and_then(|p| serde_json::from_value(p["conditions"].clone()).ok())
            .unwrap_or_default();
        let conds = merge_conditions(
            &previous,
            &a.status_conds(),
            ParentAttachment::owned_types(),
            generation,
            now,
        );
        out.push(serde_json::json!({
            "parentRef": a.status_ref,
            "controllerName": CONTROLLER_NAME,
            "conditions": conds,
        }));
    }
    out
}

/// Parent references are equal when every field either sets is equal, with the API
/// defaults (an absent namespace equals an absent namespace: both are the route's).
#[must_use]
pub fn same_parent(a: &Value, b: &Value) -> bool {
    let norm =
        |v: &Value, f: &str, d: &str| v[f].as_str().map_or_else(|| d.to_owned(), str::to_owned);
    ["group", "kind", "namespace", "name", "sectionName"]
        .iter()
        .all(|f| {
            let d = match *f {
                "group" => crate::gateway::GATEWAY_API_GROUP,
                "kind" => "Gateway",
                _ => "",
            };
            norm(a, f, d) == norm(b, f, d)
        })
        && a["port"] == b["port"]
}

/// Marks, on the Gateway's route attachments, the routes whose own templates failed
/// (`gatewright.dev/Rendered=False/TemplateError` on their status entry), so the app team
/// reading the route sees it, not only the Gateway's owner.
pub fn mark_route_errors(gw: &mut GatewayPlan, routes: &[RoutePlan]) {
    use crate::gateway::conditions::{Cond, reasons, types};
    for (rkey, atts) in &mut gw.attachments {
        let errors: Vec<String> = routes
            .iter()
            .filter(|r| &r.route == rkey)
            .flat_map(|r| r.errors.iter().map(ToString::to_string))
            .collect();
        for a in atts.iter_mut() {
            a.render_error = errors.first().map(|first| {
                let more = if errors.len() > 1 {
                    format!(" (and {} more errors)", errors.len() - 1)
                } else {
                    String::new()
                };
                Cond::f(
                    types::RENDERED,
                    reasons::TEMPLATE_ERROR,
                    &format!("{first}{more}"),
                )
            });
        }
    }
}
