//! `plan_route`: the children of one route under one Gateway, and `route_status`: the
//! `status.parents` entries of ours for a route, across all our Gateways it names.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::Value;

use super::gateway::{GatewayPlan, uid_of};
use super::labels::{self, Owner};
use super::templates::{ChildState, DesiredChild, Held, SetInput, prune_list, render_set};
use crate::gateway::routes::ParentAttachment;
use crate::render::context::TemplateContext;
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
}

/// Plans the children of `route` under the Gateway of `gw`. A route the Gateway does not
/// accept gets no children (and its live ones are pruned).
#[must_use]
pub fn plan_route(snap: &Snapshot, gw: &GatewayPlan, route: &RouteKey) -> RoutePlan {
    let Some(entry) = snap.route(route) else {
        return RoutePlan { route: route.clone(), ..RoutePlan::default() };
    };
    let uid = uid_of(&entry.json, &route.0);
    let live: Vec<Arc<Value>> = snap.children_of(&uid).filter(|c| labels::gateway_uid(c) == Some(gw.uid.as_str())).cloned().collect();
    let mut plan = RoutePlan { route: route.clone(), uid: uid.clone(), ..RoutePlan::default() };
    let Some(prepared) = gw.blueprint.as_deref() else { return plan };
    if !gw.accepted {
        return plan;
    }
    let accepted = gw.context.routes.contains(route);
    let route_values: Vec<&Value> = gw.context.routes.iter().filter_map(|k| snap.route(k)).map(|r| &r.json).collect();
    let empty = BTreeMap::new();
    let base = TemplateContext {
        gateway: &gw.context.gateway,
        route: Some(&entry.json),
        class: &gw.context.class,
        values: &gw.context.values,
        listeners: &gw.context.listeners,
        routes: &route_values,
        hostnames: &gw.context.hostnames,
        resources: &empty,
    };
    let input = SetInput {
        prepared,
        set: TemplateSet::Route,
        namespace: &route.1,
        owner: Owner { parent: &entry.json, gateway: &gw.context.gateway, parent_uid: &uid, gateway_uid: &gw.uid },
        live: &live,
    };
    let result = if accepted { render_set(&input, &base) } else { super::templates::SetResult::default() };
    plan.prune = prune_list(Some(prepared), TemplateSet::Route, &live, &result);
    plan.children = result.children;
    plan.held = result.held;
    plan.errors = result.errors;
    plan.states = result.states;
    plan
}

/// Our `status.parents` entries for `route`: one per parentRef that names a Gateway of
/// ours, from the attachments the Gateway plans decided, in parentRef order.
#[must_use]
pub fn route_status<'a>(route: &RouteKey, gateway_plans: impl IntoIterator<Item = &'a GatewayPlan>) -> Vec<ParentAttachment> {
    let mut out: Vec<ParentAttachment> = gateway_plans
        .into_iter()
        .flat_map(|g| g.attachments.iter().filter(|(k, _)| k == route).flat_map(|(_, a)| a.iter().cloned()))
        .collect();
    out.sort_by_key(|a| a.parent_index);
    out.dedup_by_key(|a| a.parent_index);
    out
}
