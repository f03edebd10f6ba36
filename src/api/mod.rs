//! Our CRDs (`gatewright.dev/v1alpha1`): the `GatewayClassBlueprint` a GatewayClass
//! points at (values and templates), and the two policy kinds that feed values into
//! it: `GatewayClassConfig` (platform team) and `GatewayConfig` (app team).
//!
//! In: nothing. Out: Rust types, and [`crds`] for `gatewright crds` / `config/crd/`.

use std::collections::BTreeMap;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use kube::core::CustomResourceExt;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

mod revision;
pub use revision::*;

/// API group of our CRDs.
pub const GROUP: &str = "gatewright.dev";
/// API version of our CRDs.
pub const VERSION: &str = "v1alpha1";
/// `apiVersion` of our CRDs.
pub const API_VERSION: &str = "gatewright.dev/v1alpha1";
/// The kind of our blueprint in a GatewayClass `parametersRef`.
pub const BLUEPRINT_KIND: &str = "GatewayClassBlueprint";
/// The kind of our Gateway policy in `spec.infrastructure.parametersRef`.
pub const GATEWAY_CONFIG_KIND: &str = "GatewayConfig";

/// A free-form JSON value kept as the user wrote it.
fn free_form(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": true,
    })
}

fn free_form_opt(g: &mut schemars::SchemaGenerator) -> schemars::Schema {
    free_form(g)
}

/// Values a blueprint or policy contributes to the template variable `values`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct Values {
    /// Defaults: weakest first (blueprint), strongest last (Gateway policy).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "free_form_opt")]
    pub default: Option<serde_json::Value>,
    /// Overrides: the blueprint's override beats every policy.
    #[serde(default, skip_serializing_if = "Option::is_none", rename = "override")]
    #[schemars(schema_with = "free_form_opt")]
    pub override_: Option<serde_json::Value>,
}

/// One named template of a blueprint.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TemplateEntry {
    /// Name of the template; `resources.<name>` in other templates reads what it rendered.
    #[schemars(length(min = 1, max = 63))]
    pub name: String,
    /// minijinja source rendering zero or more YAML documents.
    pub template: String,
    /// Optional minijinja expression over `object` (the live child) that is true when the
    /// child is ready. Without it: a `Ready` condition decides, else `status.observedGeneration`
    /// caught up with `metadata.generation`, else the child is ready once it exists.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready_when: Option<String>,
    /// How a change to what this template renders reaches the cluster. Without it, the
    /// object is updated in place.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollout: Option<Rollout>,
    /// Before the teardown deletes this template's objects, drain them first: apply
    /// `drain.patch` to each, wait until its readiness (`readyWhen`, or the default rules)
    /// holds for that drained version, then `drain.settleSeconds`, and only then delete it
    /// and go on with the teardown. For what others route traffic by (a DNSEndpoint: empty
    /// its endpoints, so the records go before what they point at).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drain: Option<Drain>,
    /// Fleet mode: render this template (of a Gateway, or of each route) once per member
    /// cluster the selector picks (with the `cluster` variable set to that member), and put
    /// its objects in that member. Without it, the objects go to the Gateway's own cluster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placement: Option<TemplatePlacement>,
    /// Route templates only: the route kinds it renders for (`HTTPRoute`, `GRPCRoute`,
    /// `TLSRoute`, `TCPRoute`, `UDPRoute`). For a route of another kind it renders nothing.
    /// Default: `[HTTPRoute]`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(
        length(max = 8),
        inner(regex(pattern = r"^(HTTPRoute|GRPCRoute|TLSRoute|TCPRoute|UDPRoute)$"))
    )]
    pub kinds: Vec<String>,
    /// Gateway templates only: take over the objects an earlier form of this template made
    /// under another kind (a move to another API group or scope, such as Crossplane's
    /// cluster-scoped managed resources to its namespaced ones) without deleting what they
    /// stand for outside the cluster. See [`Adopt`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub adopt: Option<Adopt>,
}

/// How a template takes over the objects of an earlier kind ([`TemplateEntry::adopt`]).
///
/// An object of one of the `from` kinds that is a child of the same Gateway and has the
/// name of an object this template renders is that object's predecessor. Before the new
/// object is written, the predecessor gets `release` (a JSON merge patch: Crossplane's
/// `{spec: {managementPolicies: [Observe]}}`, so that deleting it later deletes nothing
/// outside the cluster), and the template waits until the predecessor shows it. The new
/// object then carries the predecessor's `annotations` (Crossplane's
/// `crossplane.io/external-name`: the same cloud resource), and the predecessor is deleted
/// once the new object is ready.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Adopt {
    /// The earlier kinds, each with the `apiVersion` it is read at.
    #[schemars(length(min = 1, max = 8))]
    pub from: Vec<AdoptedKind>,
    /// Annotations copied from the predecessor to the new object, unless the template sets
    /// them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 16), inner(length(min = 1, max = 253)))]
    pub annotations: Vec<String>,
    /// A JSON merge patch applied to the predecessor before the new object is written.
    #[schemars(schema_with = "free_form")]
    pub release: serde_json::Value,
}

/// A kind [`Adopt::from`] names.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AdoptedKind {
    /// `group/version` (`elbv2.aws.upbound.io/v1beta1`).
    #[schemars(
        length(min = 1, max = 317),
        regex(pattern = r"^[a-z0-9.-]+/[a-z0-9]+$")
    )]
    pub api_version: String,
    /// Kind.
    #[schemars(length(min = 1, max = 63), regex(pattern = r"^[A-Z][A-Za-z0-9]*$"))]
    pub kind: String,
}

/// Where a template's objects go in fleet mode.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct TemplatePlacement {
    /// The member clusters whose ClusterProfile labels match (`{}`: every member). The
    /// template renders once per selected member that is served (its control plane healthy
    /// and reachable), in the order of their names; a member selected but not served is
    /// named in the Gateway's `gatewright.dev/Placed` condition, and nothing is rendered
    /// for it (what reads `resources.<template>` no longer sees it: DNS drops it).
    pub clusters: k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector,
    /// What `resources.<template>` lists in this template's render for a member: `All`
    /// (the default) every object of the template read, placed in any member or in the
    /// parent's cluster; `Member` only those in the parent's cluster and in the member it
    /// renders for, so that an object placed in one member never reads another's.
    #[serde(default, skip_serializing_if = "ResourcesScope::is_all")]
    pub resources: ResourcesScope,
}

/// What a placed template's render reads of `resources.<template>`
/// ([`TemplatePlacement::resources`]).
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum ResourcesScope {
    /// Every object, wherever it is placed.
    #[default]
    All,
    /// Those in the parent's cluster and in the member the render is for.
    Member,
}

impl ResourcesScope {
    /// Whether it is the default, `All`.
    #[must_use]
    pub fn is_all(&self) -> bool {
        *self == Self::All
    }
}

/// How a template's objects are drained before the teardown deletes them.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Drain {
    /// A JSON merge patch that empties the object (such as `{spec: {endpoints: []}}` for a
    /// DNSEndpoint). An empty list in it also matches a field the server leaves out.
    #[schemars(schema_with = "free_form")]
    pub patch: serde_json::Value,
    /// Seconds to wait once the drained version is ready, before the delete: what the
    /// downstream controller needs after it reports the version (one sync of external-dns,
    /// say). Default 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 3600))]
    pub settle_seconds: Option<u64>,
    /// Seconds the drained version may take to be ready (the downstream controller is
    /// down, or not installed) before the teardown deletes the object anyway, with a
    /// Warning Event `DrainTimedOut`: a teardown is never held for good. Default 300.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 86400))]
    pub timeout_seconds: Option<u64>,
}

impl Drain {
    /// How long the drained version may take to be ready.
    #[must_use]
    pub fn timeout(&self) -> u64 {
        self.timeout_seconds.unwrap_or(300)
    }
}

/// The route kinds [`TemplateEntry::kinds`] and [`GatewayClassBlueprintSpec::route_kinds`]
/// accept, as their schema's pattern lists them.
pub const ROUTE_KIND_NAMES: &[&str] =
    &["HTTPRoute", "GRPCRoute", "TLSRoute", "TCPRoute", "UDPRoute"];

/// How a template's object is replaced when what it renders changes.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum RolloutStrategy {
    /// Update the object in place (server-side apply).
    #[default]
    InPlace,
    /// Create the new version beside the old one under a new name, wait until it is ready,
    /// re-render the templates that read it, wait until they are ready, then delete the old.
    MakeBeforeBreak,
}

/// A template's rollout policy.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [{
    "rule": "(has(self.strategy) && self.strategy == 'MakeBeforeBreak') || (!has(self.fields) && !has(self.timeoutSeconds) && !has(self.per))",
    "message": "rollout.fields, rollout.per and rollout.timeoutSeconds take effect only with strategy MakeBeforeBreak"
}]))]
pub struct Rollout {
    /// `InPlace` (the default) or `MakeBeforeBreak`.
    #[serde(default)]
    pub strategy: RolloutStrategy,
    /// With `MakeBeforeBreak`: dotted paths (such as `spec.dnsNames`) whose change makes a
    /// new version; a change elsewhere updates the current version in place. Empty: any
    /// change to what the template renders makes a new version.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(
        length(max = 32),
        inner(
            length(min = 1, max = 256),
            regex(pattern = r"^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$")
        )
    )]
    pub fields: Vec<String>,
    /// With `MakeBeforeBreak`: seconds the whole replacement may take (the new version
    /// ready, and what reads it switched and ready) before the Gateway reports the rollout
    /// as stuck; the old version is kept meanwhile. Default 600.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 86400))]
    pub timeout_seconds: Option<u64>,
    /// With `MakeBeforeBreak`: `Template` (the default): everything the template renders
    /// is one version, replaced together; `Object`: each object it renders (told apart by
    /// its name as rendered) has a version of its own and is replaced on its own, so a
    /// change to one certificate of a group does not re-issue the others.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub per: Option<RolloutUnit>,
}

/// What one version of a make-before-break template covers.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum RolloutUnit {
    /// Everything the template renders: one version, replaced together.
    #[default]
    Template,
    /// Each object it renders, by its name as rendered: replaced on its own.
    Object,
}

impl TemplateEntry {
    /// The route kinds a route template renders for.
    pub fn route_kinds(&self) -> impl Iterator<Item = &str> {
        let default: &[&str] = if self.kinds.is_empty() {
            &["HTTPRoute"]
        } else {
            &[]
        };
        default
            .iter()
            .copied()
            .chain(self.kinds.iter().map(String::as_str))
    }
}

impl GatewayClassBlueprintSpec {
    /// The route kinds Gateways of the class accept: `routeKinds`, else those its route
    /// templates render for, else HTTPRoute; in [`ROUTE_KIND_NAMES`] order.
    #[must_use]
    pub fn accepted_route_kinds(&self) -> Vec<&'static str> {
        let named = |k: &str| -> bool {
            if !self.route_kinds.is_empty() {
                self.route_kinds.iter().any(|r| r == k)
            } else if !self.route_templates.is_empty() {
                self.route_templates
                    .iter()
                    .any(|t| t.route_kinds().any(|r| r == k))
            } else {
                k == "HTTPRoute"
            }
        };
        ROUTE_KIND_NAMES
            .iter()
            .copied()
            .filter(|k| named(k))
            .collect()
    }
}

impl Rollout {
    /// Whether this is a make-before-break policy.
    #[must_use]
    pub fn make_before_break(&self) -> bool {
        self.strategy == RolloutStrategy::MakeBeforeBreak
    }

    /// The stuck timeout.
    #[must_use]
    pub fn timeout(&self) -> u64 {
        self.timeout_seconds.unwrap_or(600)
    }

    /// Whether each object the template renders is versioned and replaced on its own.
    #[must_use]
    pub fn per_object(&self) -> bool {
        self.make_before_break() && self.per == Some(RolloutUnit::Object)
    }
}

/// The optional status template: renders a YAML map with `addresses`
/// (a list of `{type, value}`) for the Gateway's `status.addresses`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct StatusTemplate {
    /// minijinja source rendering one YAML document.
    pub template: String,
}

/// A group and kind.
#[derive(
    Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, JsonSchema,
)]
pub struct GroupKind {
    /// API group, empty for the core group.
    #[serde(default)]
    #[schemars(
        length(max = 253),
        regex(pattern = r"^$|^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
    )]
    pub group: String,
    /// Kind: a CamelCase name such as `ClusterRole`.
    #[schemars(length(min = 1, max = 63), regex(pattern = r"^[A-Z][A-Za-z0-9]*$"))]
    pub kind: String,
}

/// A GatewayClass's datapath: values and the templates of the children of every
/// Gateway (and every route attached to one) of the class.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "gatewright.dev",
    version = "v1alpha1",
    kind = "GatewayClassBlueprint",
    plural = "gatewayclassblueprints",
    shortname = "gcbp",
    status = "BlueprintStatus",
    category = "gatewright"
)]
#[serde(rename_all = "camelCase")]
pub struct GatewayClassBlueprintSpec {
    /// Template values (defaults and overrides).
    #[serde(default)]
    pub values: Values,
    /// Templates rendered once per Gateway; names are unique.
    #[serde(default)]
    #[schemars(length(max = 64), extend("x-kubernetes-validations" = [{
        "rule": "self.all(t, self.exists_one(u, u.name == t.name))",
        "message": "gatewayTemplates: template names must be unique (resources.<name> reads a template by its name)"
    }]))]
    pub gateway_templates: Vec<TemplateEntry>,
    /// Templates rendered once per route attached to a Gateway (the `route` variable is
    /// set); names are unique.
    #[serde(default)]
    #[schemars(length(max = 64), extend("x-kubernetes-validations" = [{
        "rule": "self.all(t, self.exists_one(u, u.name == t.name))",
        "message": "routeTemplates: template names must be unique (resources.<name> reads a template by its name)"
    }]))]
    pub route_templates: Vec<TemplateEntry>,
    /// The route kinds Gateways of the class accept (`HTTPRoute`, `GRPCRoute`, `TLSRoute`,
    /// `TCPRoute`, `UDPRoute`): a listener whose protocol takes none of them is not
    /// accepted (`UnsupportedProtocol`), and a route of another kind is not accepted by
    /// any listener. Say here what the datapath the templates build can carry. Default:
    /// the kinds the route templates render for, or `[HTTPRoute]` without route templates.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(
        length(max = 8),
        inner(regex(pattern = r"^(HTTPRoute|GRPCRoute|TLSRoute|TCPRoute|UDPRoute)$"))
    )]
    pub route_kinds: Vec<String>,
    /// Gateway API conformance features the datapath the templates build supports (the
    /// child dataplane's, such as `HTTPRouteMethodMatching`): the class's
    /// `status.supportedFeatures` claims them beside those gatewright itself implements
    /// (the Gateway, ListenerSets, ReferenceGrants and the route kinds it carries). Claim
    /// only what a conformance run through the class passes (docs/conformance.md).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 64), inner(regex(pattern = r"^[A-Z][A-Za-z0-9]{0,63}$")))]
    pub supported_features: Vec<String>,
    /// Renders the Gateway's `status.addresses`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<StatusTemplate>,
    /// Cluster-scoped kinds the templates may create. Every other kind is namespaced and
    /// lands in the parent's namespace.
    #[serde(default)]
    #[schemars(length(max = 64))]
    pub cluster_scoped_kinds: Vec<GroupKind>,
    /// How a change of this spec reaches the Gateways of its classes: in waves gated on
    /// their health (see [`RolloutPolicy`]). Without it, every Gateway renders the newest
    /// revision at once. Not part of a revision: changing it changes no Gateway.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollout_policy: Option<RolloutPolicy>,
}

impl GatewayClassBlueprintSpec {
    /// The hash a revision of this spec holds (its `rolloutPolicy` aside): sha256 of its
    /// JSON (object keys sorted), 16 hex characters.
    #[must_use]
    pub fn revision_hash(&self) -> String {
        use sha2::Digest as _;
        let mut spec = self.clone();
        spec.rollout_policy = None;
        let bytes = serde_json::to_vec(&spec).unwrap_or_default();
        let digest = sha2::Sha256::digest(&bytes);
        digest.iter().take(8).map(|b| format!("{b:02x}")).collect()
    }
}

/// The kind of a blueprint revision.
pub const REVISION_KIND: &str = "GatewayClassBlueprintRevision";

/// One version of a blueprint's templates and values, as it was when it was made. The
/// controller makes one for every change of the blueprint's spec (its `rolloutPolicy`
/// aside) and never changes it; Gateways render from revisions.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "gatewright.dev",
    version = "v1alpha1",
    kind = "GatewayClassBlueprintRevision",
    plural = "gatewayclassblueprintrevisions",
    shortname = "gcbprev",
    category = "gatewright",
    printcolumn = r#"{"name":"Blueprint","type":"string","jsonPath":".spec.blueprint"}"#,
    printcolumn = r#"{"name":"Revision","type":"integer","jsonPath":".spec.revision"}"#,
    printcolumn = r#"{"name":"Hash","type":"string","jsonPath":".spec.hash"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [{
    "rule": "self.hash == oldSelf.hash && self.revision == oldSelf.revision && self.blueprint == oldSelf.blueprint",
    "message": "a revision is immutable: change the blueprint instead"
}]))]
pub struct GatewayClassBlueprintRevisionSpec {
    /// The blueprint this is a revision of.
    #[schemars(length(min = 1, max = 253))]
    pub blueprint: String,
    /// Its number: 1 for the first, one more for each change; 0 for what the previous
    /// release shipped, made on the upgrade from a release before revisions.
    #[schemars(range(min = 0))]
    pub revision: i64,
    /// The hash of `template` (sha256, hex, 16 characters): the same spec makes the same
    /// hash, so a blueprint changed back reuses its earlier revision.
    #[schemars(length(min = 1, max = 64))]
    pub hash: String,
    /// The blueprint's spec as it was, without its `rolloutPolicy`.
    pub template: GatewayClassBlueprintSpec,
}

/// Status of a blueprint: whether its templates compile, and which fail.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BlueprintStatus {
    /// `Accepted`: the templates parse, read only known variables, and have no cycle.
    #[serde(default)]
    pub conditions: Vec<Condition>,
    /// Generation of the blueprint the status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// The revision the spec is (the newest).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current_revision: Option<String>,
    /// Per revision some Gateway renders: how many do, and how many of those are ready.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub revisions: Vec<RevisionCount>,
    /// The rollout of the newest revision (with a `rolloutPolicy`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollout: Option<RolloutStatus>,
}

/// What a policy applies to.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct PolicyTargetRef {
    /// Group of the target: `gateway.networking.k8s.io` for GatewayClass and Gateway, empty
    /// for Namespace. A policy matches on group, kind and name: naming any other group, it
    /// applies to nothing.
    #[serde(default)]
    pub group: String,
    /// `GatewayClass`, `Gateway` or `Namespace`.
    #[schemars(length(min = 1, max = 63))]
    pub kind: String,
    /// Name of the target.
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
}

/// Values for the Gateways of a GatewayClass, or of a Namespace. In the controller
/// namespace it applies cluster-wide; elsewhere to Gateways of its own namespace.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "gatewright.dev",
    version = "v1alpha1",
    kind = "GatewayClassConfig",
    plural = "gatewayclassconfigs",
    namespaced,
    category = "gatewright",
    status = "PolicyStatus",
    printcolumn = r#"{"name":"Target","type":"string","jsonPath":".spec.targetRef.name"}"#,
    printcolumn = r#"{"name":"Accepted","type":"string","jsonPath":".status.ancestors[0].conditions[?(@.type==\"Accepted\")].reason"}"#
)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [{
    "rule": "(self.targetRef.kind == 'GatewayClass' && has(self.targetRef.group) && self.targetRef.group == 'gateway.networking.k8s.io') || (self.targetRef.kind == 'Namespace' && (!has(self.targetRef.group) || self.targetRef.group == ''))",
    "message": "targetRef must be a GatewayClass (group: gateway.networking.k8s.io) or a Namespace (group: \"\")",
    "fieldPath": ".targetRef"
}]))]
pub struct GatewayClassConfigSpec {
    /// The GatewayClass or Namespace this policy configures.
    pub target_ref: PolicyTargetRef,
    /// Default values.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "free_form_opt")]
    pub default: Option<serde_json::Value>,
    /// Override values.
    #[serde(default, skip_serializing_if = "Option::is_none", rename = "override")]
    #[schemars(schema_with = "free_form_opt")]
    pub override_: Option<serde_json::Value>,
}

/// Values for one Gateway, or every Gateway of a Namespace.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "gatewright.dev",
    version = "v1alpha1",
    kind = "GatewayConfig",
    plural = "gatewayconfigs",
    namespaced,
    category = "gatewright",
    status = "PolicyStatus",
    printcolumn = r#"{"name":"Target","type":"string","jsonPath":".spec.targetRef.name"}"#,
    printcolumn = r#"{"name":"Accepted","type":"string","jsonPath":".status.ancestors[0].conditions[?(@.type==\"Accepted\")].reason"}"#
)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [{
    "rule": "!has(self.targetRef) || (self.targetRef.kind == 'Gateway' && has(self.targetRef.group) && self.targetRef.group == 'gateway.networking.k8s.io') || (self.targetRef.kind == 'Namespace' && (!has(self.targetRef.group) || self.targetRef.group == ''))",
    "message": "targetRef must be a Gateway (group: gateway.networking.k8s.io) or a Namespace (group: \"\")",
    "fieldPath": ".targetRef"
}]))]
pub struct GatewayConfigSpec {
    /// The Gateway or Namespace this policy configures. Optional when the Gateway names
    /// this object in `spec.infrastructure.parametersRef`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_ref: Option<PolicyTargetRef>,
    /// Default values.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "free_form_opt")]
    pub default: Option<serde_json::Value>,
    /// Override values.
    #[serde(default, skip_serializing_if = "Option::is_none", rename = "override")]
    #[schemars(schema_with = "free_form_opt")]
    pub override_: Option<serde_json::Value>,
    /// Pins the Gateways this policy applies to on a revision of their class's blueprint
    /// (`<blueprint>-<n>`, a `GatewayClassBlueprintRevision`): they render it whatever a
    /// rollout does, until the pin is removed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253))]
    pub revision: Option<String>,
}

/// The status of a policy (GEP-713 `PolicyAncestorStatus`): one entry per object it
/// targets or affects, at most [`MAX_POLICY_ANCESTORS`]. The entries of other controllers
/// are kept as they are.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PolicyStatus {
    /// Per ancestor (the Gateways the policy affects, or the object it targets when it
    /// affects no Gateway), whether the policy is accepted there and why.
    #[serde(default)]
    #[schemars(length(max = 16))]
    pub ancestors: Vec<PolicyAncestorStatus>,
}

/// At most this many ancestors are listed (Gateway API's limit).
pub const MAX_POLICY_ANCESTORS: usize = 16;

/// A policy's status for one ancestor.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PolicyAncestorStatus {
    /// The ancestor: a Gateway, or the GatewayClass or Namespace targeted.
    pub ancestor_ref: AncestorRef,
    /// The controller that wrote this entry (`gatewright.dev/gateway-controller`).
    pub controller_name: String,
    /// `Accepted`: True (`Accepted`), or False with `TargetNotFound`, `Conflicted` or
    /// `Invalid`.
    #[serde(default)]
    pub conditions: Vec<Condition>,
}

/// A reference to an ancestor (Gateway API's `ParentReference` fields that apply).
#[derive(
    Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, JsonSchema,
)]
pub struct AncestorRef {
    /// API group (empty for a Namespace).
    #[serde(default)]
    pub group: String,
    /// `Gateway`, `GatewayClass` or `Namespace`.
    pub kind: String,
    /// Namespace of a namespaced ancestor.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Name.
    pub name: String,
}

/// Our CRDs, in a stable order.
#[must_use]
pub fn crds() -> Vec<CustomResourceDefinition> {
    let mut out = vec![
        GatewayClassBlueprint::crd(),
        GatewayClassBlueprintRevision::crd(),
        GatewayClassConfig::crd(),
        GatewayConfig::crd(),
    ];
    for crd in &mut out {
        let labels = crd.metadata.labels.get_or_insert_with(BTreeMap::new);
        labels.insert("app.kubernetes.io/part-of".into(), "gatewright".into());
        if !crd.spec.names.kind.starts_with("GatewayClassBlueprint") {
            // GEP-713 discovery convention for policy CRDs.
            labels.insert(
                "gateway.networking.k8s.io/policy".into(),
                "Inherited".into(),
            );
        }
    }
    out
}

/// Our CRDs as one YAML stream, as `gatewright crds` prints it and `config/crd/` holds it.
///
/// # Errors
/// A CRD failed to serialize.
pub fn crds_yaml() -> Result<String, serde_saphyr::ser::Error> {
    let mut out = String::new();
    for crd in crds() {
        out.push_str("---\n");
        out.push_str(serde_saphyr::to_string(&crd)?.trim_end());
        out.push('\n');
    }
    Ok(out)
}
