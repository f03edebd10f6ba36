//! gatewright: a Gateway API controller-of-controllers.
//!
//! Data flow: [`snapshot`] (what the cluster or the YAML files hold) ->
//! [`plan`] (pure: children, prune list, readiness, status) -> the cluster executor
//! (`gatewright run`) or the printer (`gatewright render`). [`gateway`] holds the pure
//! Gateway API semantics and [`render`] the template engine.

pub mod api;
pub mod cli;
pub mod controller;
pub mod discovery;
pub mod fleet;
pub mod fleet_client;
pub mod gateway;
pub mod health;
pub mod identity;
pub mod kinds;
pub mod live;
pub mod plan;
pub mod probe;
pub mod render;
pub mod simulate;
pub mod snapshot;
pub mod telemetry;
