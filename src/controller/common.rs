//! The words every part of the shell uses: work items and the cluster they belong to,
//! the options of `gatewright run`, the errors of a reconcile, and the constants a
//! reconcile keeps to. Nothing here refers to a [`Cluster`](super::cluster::Cluster) or the
//! [`Runner`](super::runner::Runner): both use it.

use std::sync::Arc;
use std::time::Duration;

use super::client::Resilience;
use super::fight;
use crate::snapshot::{Key, RouteKey, Snapshot};

/// How long a Gateway created while the controller runs waits before it is first
/// planned. GitOps tools and `kubectl apply -f dir/` create a Gateway and its routes
/// within moments of each other; planned at once, the Gateway would render its
/// certificate for the first route or two, then replace it (make-before-break) as each
/// further route arrives: certificates ordered for nothing (ACME rate limits count them),
/// and several status writes and Events per Gateway. After this wait it is planned with
/// the routes created with it. Routes, and Gateways that exist when the controller starts,
/// never wait.
pub const NEW_GATEWAY_SETTLE: Duration = Duration::from_secs(1);

/// The fewest routes a Gateway has for its route plans to be remembered between plans
/// (see [`crate::plan::memo`]): below, planning them again costs less than the memory
/// of keeping them for every Gateway of a fleet. The planner keeps such a Gateway's live
/// children parsed from the same number on, since these plans hold them parsed anyway.
pub const MEMO_MIN_ROUTES: usize = crate::plan::gateway::KEEP_PARSED_MIN_ROUTES;

/// Errors of one reconcile.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The API server refused or failed a request.
    #[error("failed to {action}: {source}")]
    Kube {
        /// What we tried.
        action: String,
        /// The cause.
        #[source]
        source: Box<kube::Error>,
    },
    /// A child kind is not served.
    #[error("kind {0} is not served by the API server (is its CRD installed?)")]
    KindNotServed(String),
    /// The API server refused a child as rendered (a field its schema does not declare, a
    /// required one missing, a validation rule): the blueprint must change.
    #[error("{0}")]
    Refused(String),
    /// Some children could not be applied (the message of the first).
    #[error("{0}")]
    Apply(String),
    /// Deletion of children is still in progress.
    #[error("waiting for {0} children to be deleted")]
    Deleting(usize),
    /// A thread panicked while it held the snapshot lock: the cache cannot be trusted.
    #[error("failed to read the snapshot: a writer panicked while holding it")]
    SnapshotPoisoned,
    /// A write kept losing to concurrent writers (409 Conflict on every attempt).
    #[error("failed to {action}: the object kept changing ({attempts} conflicting writes)")]
    Conflict {
        /// What we tried.
        action: String,
        /// How many times.
        attempts: usize,
    },
    /// A child's planned placement disagrees with its kind's scope on the API server.
    #[error("{0}")]
    ScopeMismatch(String),
    /// A child is already held by another parent.
    #[error("{0}")]
    HeldByAnother(String),
    /// The object's cluster is written by another replica (fleet mode with leader
    /// election: the hub's own objects by the leader, a member's by the holder of its
    /// Lease); not a failure: this replica leaves it to that one.
    #[error("{0}")]
    Elsewhere(String),
}

impl Error {
    /// One PascalCase word for metrics and Events.
    #[must_use]
    pub fn category(&self) -> &'static str {
        match self {
            Self::Kube { .. } => "ApiError",
            Self::KindNotServed(_) => "KindNotServed",
            Self::Apply(_) => "ApplyFailed",
            Self::Refused(_) => "ChildRefused",
            Self::Deleting(_) => "Deleting",
            Self::SnapshotPoisoned => "SnapshotPoisoned",
            Self::Conflict { .. } => "Conflict",
            Self::ScopeMismatch(_) => "ClusterScopedKind",
            Self::HeldByAnother(_) => "ChildConflict",
            Self::Elsewhere(_) => "WrittenElsewhere",
        }
    }
    pub(crate) fn kube(action: impl Into<String>, source: kube::Error) -> Self {
        Self::Kube {
            action: action.into(),
            source: Box::new(source),
        }
    }
}

/// Work items.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Work {
    /// Plan and execute a Gateway (and its routes' children and status).
    Gateway(Key),
    /// Write a GatewayClass's status and finalizer.
    Class(String),
    /// Remove our stale `status.parents` entries of a route.
    Route(RouteKey),
    /// Write a blueprint's status (whether its templates compile).
    Blueprint(String),
    /// Write a policy's status (where it applies, and why not elsewhere).
    Policy(PolicyKind, Key),
}

/// Our two policy kinds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum PolicyKind {
    /// `GatewayClassConfig`.
    ClassConfig,
    /// `GatewayConfig`.
    GatewayConfig,
}

impl PolicyKind {
    /// The kind's name.
    #[must_use]
    pub fn kind(self) -> &'static str {
        match self {
            Self::ClassConfig => "GatewayClassConfig",
            Self::GatewayConfig => "GatewayConfig",
        }
    }
}

/// The name of a cluster the controller serves; work items carry it.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ClusterId(Arc<str>);

impl ClusterId {
    /// The cluster `gatewright run` is pointed at (its kubeconfig, or the one it runs in).
    #[must_use]
    pub fn local() -> Self {
        Self("local".into())
    }

    /// A cluster by name.
    #[must_use]
    pub fn new(name: &str) -> Self {
        Self(name.into())
    }

    /// The name.
    #[must_use]
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for ClusterId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// A work item with the cluster it belongs to, as the queue holds it.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Task {
    /// Whose work it is.
    pub cluster: ClusterId,
    /// What to do there.
    pub work: Work,
}

impl Task {
    /// `work` of the local cluster.
    #[must_use]
    pub fn local(work: Work) -> Self {
        Self {
            cluster: ClusterId::local(),
            work,
        }
    }
}

/// How `gatewright run` is configured.
#[derive(Clone, Debug)]
pub struct Options {
    /// Namespace whose GatewayClassConfigs apply cluster-wide.
    pub controller_namespace: String,
    /// Where to serve /metrics, /healthz, /readyz (none: not served).
    pub metrics_addr: Option<String>,
    /// How often every parent is re-planned to catch drift.
    pub resync: Duration,
    /// Leader election: `(namespace, lease name)` of the Lease only the holder writes under.
    /// Every replica watches and indexes; without it, this process always writes.
    pub leader_election: Option<(String, String)>,
    /// During a Gateway's teardown, how long a child may stay in deletion (held by
    /// someone else's finalizer, say) before the Gateway reports it as stuck.
    pub deletion_stuck_after: Duration,
    /// Deadlines and retries of every API request.
    pub api: Resilience,
    /// When a field reverted by someone else becomes a fight, and how we back off.
    pub fights: fight::Policy,
    /// How many objects are reconciled at the same time (at least 1).
    pub workers: usize,
    /// Fleet mode: serve the member clusters the hub's ClusterProfiles list (none: only the
    /// cluster `gatewright run` is pointed at).
    pub fleet: Option<FleetOptions>,
}

/// Why the controller stops.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Stop {
    /// `Runner::shutdown` was called (a signal, a test).
    Requested,
    /// It cannot go on: the Lease was lost or leader election ended.
    Failed(String),
}

/// Fleet mode's settings (see `controller::inventory`).
#[derive(Clone, Debug)]
pub struct FleetOptions {
    /// Only the ClusterProfiles (and kubeconfig Secrets) of this namespace (none: every
    /// namespace).
    pub namespace: Option<String>,
    /// The access-provider file: which exec plugin reaches members for each provider name
    /// (none: members are reached through their kubeconfig Secrets only).
    pub providers: Option<crate::fleet::access::ProviderFile>,
    /// The consumer name the kubeconfig Secrets are labelled for
    /// (`x-k8s.io/cluster-inventory-consumer`).
    pub consumer: String,
}

impl Default for FleetOptions {
    fn default() -> Self {
        Self {
            namespace: None,
            providers: None,
            consumer: crate::fleet::access::DEFAULT_CONSUMER.to_owned(),
        }
    }
}

/// The default of [`Options::workers`]: four per core (a reconcile mostly waits on the API
/// server), at least 4, at most 32.
#[must_use]
pub fn default_workers() -> usize {
    std::thread::available_parallelism()
        .map_or(4, std::num::NonZeroUsize::get)
        .saturating_mul(4)
        .clamp(4, 32)
}

impl Default for Options {
    fn default() -> Self {
        Self {
            controller_namespace: "gatewright-system".into(),
            metrics_addr: None,
            resync: Duration::from_secs(3600),
            leader_election: None,
            deletion_stuck_after: Duration::from_secs(120),
            api: Resilience::default(),
            fights: fight::Policy::default(),
            workers: default_workers(),
            fleet: None,
        }
    }
}

/// Status work of every policy, or of those in `namespace` and the cluster-wide ones (the
/// controller namespace's GatewayClassConfigs), which are all a change there can affect.
pub(crate) fn policy_work(s: &Snapshot, namespace: Option<&str>) -> Vec<Work> {
    let mut a = crate::plan::affected::Affected::default();
    a.policies(s, namespace);
    a.class_configs
        .into_iter()
        .map(|k| Work::Policy(PolicyKind::ClassConfig, k))
        .chain(
            a.gateway_configs
                .into_iter()
                .map(|k| Work::Policy(PolicyKind::GatewayConfig, k)),
        )
        .collect()
}
