//! The cluster shell around the planner, in two parts:
//!
//! - a [`Cluster`] per API server: its client stack, watches feeding one [`Snapshot`],
//!   the child-kind registrar, the echo memory and the writers. Every change enqueues
//!   exactly the parents it affects; a reconcile ([`Cluster::run`]) plans one parent and
//!   executes the plan (server-side apply of what changed, prune after every apply
//!   succeeded, status written only when it changed), emits Events on transitions
//!   against the observed status, and counts what it did;
//! - one [`Runner`] per process: the queue and the bounded pool of workers, backoff,
//!   resync, leader election and its fence, and the one shutdown path. Work items carry
//!   their cluster ([`Task`]).
//!
//! The work queue ([`queue`]) is keyed: an object waits at most once, is worked on by at
//! most one worker at a time, and one enqueued while it is being worked on runs again
//! afterwards; Gateways and the other kinds take turns. Nothing is worked on before every
//! primary watch has listed, and a Gateway is not planned before the watches of the child
//! kinds it uses have listed.
//!
//! Child kinds are watched as plans name them (a registrar, label-selected to our
//! children); a kind the API server does not serve is reported on the Gateway and looked
//! up again until it appears.

mod apply;
mod child_kinds;
mod class;
mod client;
mod cluster;
mod common;
mod echo;
mod election;
pub mod events;
pub mod fight;
mod fleet;
mod inventory;
mod left;
mod memory;
mod metrics;
mod narrow;
mod planned;
pub mod policy;
mod queue;
mod reconcile;
mod registrar;
mod revisions;
mod runner;
mod settle;
mod share;
pub mod startup;
mod status;
mod teardown;
mod watch;

pub use apply::is_subset;
pub use client::{
    Error as ClientError, FIELD_MANAGER, LeaseFence, Resilience, parse_retry_after, retry_delay,
    retryable_status,
};
pub use cluster::Cluster;
pub use common::Stop;
pub use common::{
    ClusterId, Error, FleetOptions, MEMO_MIN_ROUTES, NEW_GATEWAY_SETTLE, Options, Task, Work,
    default_workers,
};
pub use runner::{Runner, start};
pub use settle::PROGRESS_HOLD;

pub use crate::render::labels::GATEWAY_FINALIZER;
