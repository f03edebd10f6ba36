//! Fleet mode's pure core: one gatewright on a hub cluster serving the member clusters
//! that SIG Multicluster's ClusterProfile API (`multicluster.x-k8s.io/v1alpha1`) lists.
//!
//! In: ClusterProfile objects as the hub's API server returns them (a
//! [`kube::api::DynamicObject`] or JSON), the access-provider file the operator gives
//! gatewright, and, for members reached without a provider, the hub's kubeconfig Secrets.
//! Out: a [`profile::ClusterProfile`] with the parts gatewright reads, and a
//! [`kube::config::Kubeconfig`] per member ([`access`]), which the shell turns into a
//! `kube::Client` for `Runner::add_cluster` (`src/fleet_client.rs`, where an exec plugin
//! runs). Nothing here does I/O: the shell lists and watches, this module decides.

pub mod access;
pub mod members;
pub mod profile;
pub mod share;
