//! The planner: pure functions from a [`Snapshot`] and one parent to what must be true
//! in the cluster. [`plan_class`] for a GatewayClass, [`plan_gateway`] for a Gateway (its
//! children, prune list, readiness, status, and the route attachments it decides),
//! [`plan_route`] for one route under one Gateway, and [`route_status`] for a route's
//! `status.parents` entries of ours. No client, no clock, no I/O.

pub mod claims;
pub mod class;
pub mod gateway;
pub mod labels;
pub mod prepared;
pub mod readiness;
pub mod route;
mod templates;

pub use class::{ClassPlan, plan_class};
pub use gateway::{GatewayPlan, plan_gateway};
pub use route::{RoutePlan, mark_route_errors, plan_route, route_status};
pub use templates::{
    ChildState, DesiredChild, Held, RolloutPhase, RolloutState, VERSION_PLACEHOLDER,
    held_by_another, holder,
};

use crate::snapshot::ObjectKey;

/// Sort children to delete so that each goes before what it depends on: templates
/// later in `order` first, templates no longer in the blueprint before everything.
pub(crate) fn prune_order(mut prune: Vec<(Option<usize>, ObjectKey)>) -> Vec<ObjectKey> {
    prune.sort_by(|a, b| {
        let ra = a.0.map_or(usize::MAX, |i| i + 1);
        let rb = b.0.map_or(usize::MAX, |i| i + 1);
        rb.cmp(&ra).then_with(|| a.1.cmp(&b.1))
    });
    prune.into_iter().map(|(_, k)| k).collect()
}
