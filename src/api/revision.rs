//! How a change of a blueprint reaches its Gateways: the blueprint's `rolloutPolicy`
//! (waves gated on health) and the status that says where a rollout stands. (The
//! `GatewayClassBlueprintRevision` kind is in the parent module, beside the spec it holds.)

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, Time};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// How a change of a blueprint reaches the Gateways of its classes. Without a policy every
/// Gateway renders the newest revision at once.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RolloutPolicy {
    /// The waves, in order. Each takes Gateways that do not run the new revision yet;
    /// once every Gateway of a wave is `Programmed` on the new revision for its
    /// `bakeSeconds`, the next wave starts. The Gateways no wave takes form a last wave.
    #[serde(default)]
    #[schemars(length(max = 32))]
    pub waves: Vec<Wave>,
    /// What a wave whose gate does not hold does: `Halt` (the default: stop, the wave's
    /// Gateways stay on the new revision, the others on theirs) or `Rollback` (the wave's
    /// Gateways go back to the revision the rollout started from).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_failure: Option<OnFailure>,
    /// Pauses the rollout: no further Gateway is moved, and no deadline runs, until it is
    /// false again.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub paused: bool,
    /// How many revisions to keep (besides those a Gateway runs or is pinned to).
    /// Default 10.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 100))]
    pub history_limit: Option<u32>,
    /// At most this many new Certificates ordered by the rollouts of this blueprint in any
    /// window of time, across every Gateway and wave (so a rollout stays within what an
    /// ACME account allows). A Gateway the current wave would move waits while its move
    /// does not fit. Without it, no budget: waves alone pace the rollout.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub issuance_budget: Option<IssuanceBudget>,
}

/// A cap on the new Certificates the rollouts of a blueprint order per window of time.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct IssuanceBudget {
    /// How many new Certificates the rollout may order within any `windowSeconds`. Moving
    /// a Gateway counts as ordering as many as it has live cert-manager `Certificate`
    /// children (its own and its routes'), at least 1 when the new revision's templates
    /// name `cert-manager.io`.
    #[schemars(range(min = 1))]
    pub certificates: u32,
    /// The window, in seconds; it slides (the moves of the last `windowSeconds` count).
    /// Default 10800 (3 hours, the window of Let's Encrypt's new orders per account).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 2_592_000))]
    pub window_seconds: Option<u64>,
}

impl IssuanceBudget {
    /// The window, in seconds.
    #[must_use]
    pub fn window(&self) -> u64 {
        self.window_seconds.unwrap_or(10_800)
    }
}

/// One wave of a rollout.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [{
    "rule": "!(has(self.count) && has(self.percent))",
    "message": "a wave takes a count or a percent, not both"
}]))]
pub struct Wave {
    /// A name for status and Events. Default `wave-<n>` (from 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 63))]
    pub name: Option<String>,
    /// How many Gateways the wave takes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub count: Option<u32>,
    /// The share of the class's Gateways the wave takes (rounded up).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 100))]
    pub percent: Option<u32>,
    /// Only Gateways with these labels. With neither count nor percent: every one of them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<LabelSelector>,
    /// Only Gateways in Namespaces with these labels.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace_selector: Option<LabelSelector>,
    /// Fleet mode: only Gateways of member clusters whose ClusterProfile has these labels
    /// (a canary cluster first). Such a wave takes no Gateway of a cluster it does not
    /// select (the hub, a cluster run without `--fleet`), and no later wave starts, in any
    /// member rolling out the same revision, until every member it selects has passed it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_selector: Option<LabelSelector>,
    /// At most this many Gateways of the wave moved and not yet `Programmed` at a time.
    /// Default: the whole wave at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub max_unavailable: Option<u32>,
    /// Seconds every Gateway of the wave must stay `Programmed` on the new revision before
    /// the next wave starts. Default 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 86400))]
    pub bake_seconds: Option<u64>,
    /// An expression that must be true too for the wave to pass, checked once every
    /// Gateway of it is `Programmed` on the new revision and through its bake time (false
    /// at any step starts the bake again). The language of templates' `readyWhen` (with
    /// `dig`), over `gateways` (the wave's Gateways it waits for, each as the API returns
    /// it: `metadata`, `spec`, `status`), `wave` (`name`, `size`) and `revision` (the
    /// revision rolled out). A field that is not there yet makes it false. A gate that does
    /// not compile holds the rollout (nothing is moved) until it is mended; one that fails
    /// when evaluated halts it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 4096))]
    pub gate: Option<String>,
    /// Seconds the wave may take to pass its gate before the rollout halts. Default 600.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 86400))]
    pub progress_deadline_seconds: Option<u64>,
}

impl Wave {
    /// The bake time.
    #[must_use]
    pub fn bake(&self) -> u64 {
        self.bake_seconds.unwrap_or(0)
    }

    /// The progress deadline.
    #[must_use]
    pub fn deadline(&self) -> u64 {
        self.progress_deadline_seconds.unwrap_or(600)
    }
}

/// What a failed wave does.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum OnFailure {
    /// Stop where it is.
    #[default]
    Halt,
    /// Return the moved Gateways to the revision the rollout started from.
    Rollback,
}

/// Where a rollout stands.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum RolloutPhase {
    /// Waves are being released.
    #[default]
    Progressing,
    /// `rolloutPolicy.paused`.
    Paused,
    /// A wave failed (a Gateway the revision cannot render, its deadline passed, its gate
    /// cannot be evaluated, or the same wave halted in another member of the fleet);
    /// nothing more is moved.
    Halted,
    /// A wave failed as for `Halted`, and its Gateways went back to the previous revision
    /// (`onFailure: Rollback`).
    RolledBack,
    /// Every Gateway runs the new revision.
    Complete,
}

/// Where a wave stands (its `state`), named: what [`WaveStatus`]'s other fields imply.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum WaveState {
    /// Some of its Gateways are still to be moved (at most `maxUnavailable` not ready at a
    /// time).
    Releasing,
    /// The issuance budget holds some of its Gateways back (`budgetWait`).
    BudgetHeld,
    /// Every Gateway is moved; it waits for them to be Programmed on the revision (and for
    /// its gate).
    Waiting,
    /// Every Gateway is Programmed: it bakes (`healthySince` + `bakeSeconds`).
    Baking,
    /// It passed (`passedAt`).
    Passed,
    /// It halted the rollout.
    Failed,
}

/// What holds a rollout that is not `Complete`, `Halted` or `RolledBack`, named.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum HoldReason {
    /// `rolloutPolicy.paused`.
    Paused,
    /// A wave's gate does not compile: nothing is moved until it is mended.
    GateInvalid,
    /// The issuance budget holds Gateways of the current wave back.
    IssuanceBudget,
    /// The next wave waits for a wave before it to pass in other members of the fleet.
    Fleet,
}

/// How many Gateways run a revision.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RevisionCount {
    /// The revision's name.
    pub name: String,
    /// Gateways rendering it.
    pub gateways: u32,
    /// Of those, how many are `Programmed`.
    pub ready: u32,
}

/// One wave of a rollout, as released.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WaveStatus {
    /// Its name.
    pub name: String,
    /// Its Gateways (`namespace/name`), in the order they are moved.
    #[serde(default)]
    pub gateways: Vec<String>,
    /// How many of them have been moved (the first ones).
    #[serde(default)]
    pub released: u32,
    /// Those that were not `Programmed` when the wave started: the gate does not wait for
    /// them (a Gateway broken before the change does not hold the rollout).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub exempt: Vec<String>,
    /// When it started, or last started again (after a pause, or once the issuance
    /// budget let Gateways of it go that it had held back): its deadline counts from here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<Time>,
    /// Since when every Gateway of the wave is `Programmed` on the new revision.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub healthy_since: Option<Time>,
    /// When it passed: a passed wave is not judged again, and the other members of a
    /// fleet read here that it passed in this one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub passed_at: Option<Time>,
    /// Where it stands, named.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<WaveState>,
}

/// A rollout of one revision to the Gateways of a blueprint's classes.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RolloutStatus {
    /// The revision rolled out.
    pub revision: String,
    /// The revision it started from (what a rollback returns to).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
    /// Where it stands.
    pub phase: RolloutPhase,
    /// The waves released so far (the last one is the current one).
    #[serde(default)]
    pub waves: Vec<WaveStatus>,
    /// Why it halted, or what it waits for.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    /// What holds it, named (absent: nothing but its current wave).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hold: Option<HoldReason>,
    /// With an issuance budget: the Certificates the rollouts of this blueprint ordered
    /// lately, oldest first (kept across rollouts and restarts; what is older than the
    /// budget's window no longer counts and is dropped at the next move).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub issued: Vec<Issued>,
    /// The Gateways the current wave would move now but the issuance budget holds back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget_wait: Option<BudgetWait>,
}

/// Certificates ordered by moves of Gateways, as counted against the issuance budget.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Issued {
    /// When: the end of the slot (a 32nd of the window) the moves fell in, never earlier
    /// than they were.
    pub at: Time,
    /// How many.
    pub certificates: u32,
}

/// What waits on the issuance budget.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BudgetWait {
    /// How many Gateways the current wave would move now but the budget holds back.
    pub gateways: u32,
    /// The Certificates their moves are counted as.
    pub certificates: u32,
    /// When the budget lets the first of them go (absent: never, its move alone is
    /// counted as more than the budget allows in a window).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until: Option<Time>,
}

/// The annotation on a blueprint that says what the previous release of gatewright shipped
/// in its place: JSON `{"release": "0.1.0", "spec": {...}}` (the chart sets it on the
/// classes it ships). A release before revisions left Gateways rendered from that spec
/// with no revision recorded; the controller records it as revision 0 of the blueprint, so
/// the release's own spec reaches those Gateways through the `rolloutPolicy`, not all at
/// once ([`crate::plan::revisions`]).
pub const PREVIOUS_RELEASE_ANNOTATION: &str = "gatewright.dev/previous-release";

/// What [`PREVIOUS_RELEASE_ANNOTATION`] holds.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct PreviousRelease {
    /// The release (`0.1.0`), for people and logs.
    pub release: String,
    /// The blueprint spec that release shipped.
    pub spec: super::GatewayClassBlueprintSpec,
}

impl PreviousRelease {
    /// The annotation of `meta`, parsed: `None` without it, an error saying why when it is
    /// not what it must be.
    pub fn of(
        meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    ) -> Option<Result<Self, String>> {
        let text = meta
            .annotations
            .as_ref()?
            .get(PREVIOUS_RELEASE_ANNOTATION)?;
        Some(serde_json::from_str(text).map_err(|e| {
            format!(
                "annotation {PREVIOUS_RELEASE_ANNOTATION} is not {{\"release\": ..., \"spec\": <a blueprint spec>}}: {e}"
            )
        }))
    }
}
