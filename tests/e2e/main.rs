//! Tests against a real Kubernetes API server, read from `KUBECONFIG` (scripts/test.sh
//! brings up the local one; kind or k3d work too). Each test uses its own namespace.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code"
)]

mod adopt;
mod common;
mod controller;
#[path = "../docs/examples.rs"]
mod examples;
mod kinds;
mod listenersets;
mod live;
mod mbb;
mod monitoring;
mod parents;
mod policy;
mod rollout;
mod rules;
mod smoke;
mod strict;
mod teardown;
mod waves;
mod writes;
