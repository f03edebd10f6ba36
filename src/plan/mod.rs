//! The planner: pure functions from a [`Snapshot`](crate::snapshot::Snapshot) and one
//! parent to what must be true in the cluster. [`plan`] for a Gateway and the routes it
//! accepted: their children and every status (the Gateway's, its listeners', and our
//! entries in each route's `status.parents`), built from [`plan_gateway`] (the Gateway's
//! children and the route attachments it decides) and [`plan_route`] (one route's
//! children under that Gateway). [`plan_class`] for a GatewayClass, [`rollout`] for how
//! long replacements have taken. [`plan_with`] is [`plan`] with a [`PlanMemo`] of what the
//! Gateway's earlier plan rendered ([`memo`]); the result is the same. No client, no clock
//! (times are arguments), no I/O.

mod addresses;
mod adopt;
pub mod affected;
pub mod claims;
pub mod class;
mod context;
pub mod drain;
pub mod gateway;
mod gateway_memo;
mod layers;
pub mod memo;
pub mod narrowing;
pub mod placement;
pub mod policy;
pub mod progress;
pub mod readiness;
pub mod replacement;
pub mod revisions;
pub mod route;
mod route_parents;
mod set;
pub mod status;
pub mod teardown;
mod templates;
mod versions;
pub mod waves;

pub use class::{ClassPlan, plan_class};
pub use gateway::{GatewayPlan, plan_gateway};
pub use memo::PlanMemo;
pub use route::{RoutePlan, plan_route};
pub use set::{
    ChildState, DesiredChild, Held, Replacement, ReplacementPhase, is_subset, unheld_path,
};
pub use status::{GatewayStatusPlan, Plan, PlanStatus, RouteParents, plan, plan_with};
pub use templates::{held_by_another, holder};
pub use versions::VERSION_PLACEHOLDER;

#[cfg(test)]
mod tests;
