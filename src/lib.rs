//! gatewright: a Gateway API controller-of-controllers.
//!
//! Data flow: [`snapshot`] (what the cluster or the YAML files hold) -> [`plan`] (pure:
//! children, prune list, readiness, status, rollouts) -> the cluster executor
//! ([`controller`], `gatewright run`) or the printer ([`cli`], `gatewright render` and
//! `check`). The modules below are listed in that order, each after what it builds on:
//!
//! - the vocabulary: [`api`] (our CRDs), [`kinds`] (an `apiVersion` and kind parsed),
//!   [`identity`] (who we say we are on the wire);
//! - the pure core: [`gateway`] (Gateway API semantics), [`render`] (the template engine),
//!   [`fleet`] (fleet mode's pure rules), [`snapshot`] (the world the planner reads),
//!   [`plan`] (the planner), [`simulate`] (the status downstream controllers would write);
//! - the shells: [`cli`] and [`probe`] (the planner over YAML files), [`discovery`] (where
//!   an API server serves a kind), [`fleet_client`] (a member's client), [`controller`]
//!   (the planner against a cluster), [`live`] (the operator's commands on a live cluster:
//!   status, trace, diff, rollout), [`health`] and [`telemetry`] (readiness, metrics).

pub mod api;
pub mod identity;
pub mod kinds;

pub mod fleet;
pub mod gateway;
pub mod plan;
pub mod render;
pub mod simulate;
pub mod snapshot;

pub mod cli;
pub mod controller;
pub mod discovery;
pub mod fleet_client;
pub mod health;
pub mod live;
pub mod probe;
pub mod telemetry;
