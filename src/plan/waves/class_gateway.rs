//! The Gateways of a class as a rollout sees them: each one's labels, pin, the revision
//! its status says it renders and its health there, and the Certificates its move is
//! counted as against the issuance budget.

use std::collections::BTreeMap;

use crate::gateway::conditions::types;

/// How a Gateway of the class stands, as its status says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Health {
    /// `Programmed` on the revision it records, with every replacement done.
    Ready,
    /// Not (yet): why.
    NotReady(String),
    /// The revision it records cannot be rendered for it (`Programmed=False/Invalid`).
    Failed(String),
}

/// How a Gateway stands on the revision its status names.
pub fn health(gw: &gateway_api::apis::standard::gateways::Gateway) -> Health {
    let generation = gw.metadata.generation;
    let conds = gw
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_deref())
        .unwrap_or_default();
    let find = |t: &str| {
        conds
            .iter()
            .find(|c| c.type_ == t && c.observed_generation == generation)
    };
    if let Some(a) = find(types::ACCEPTED).filter(|c| {
        c.status == "False" && c.reason == crate::gateway::conditions::reasons::REVISION_INVALID
    }) {
        return Health::Failed(a.message.clone());
    }
    match find(types::PROGRAMMED) {
        None => Health::NotReady("Programmed not reported yet".into()),
        Some(p) if p.status == "True" => match find(types::ROLLOUT) {
            Some(r) if r.status != "True" => Health::NotReady(r.message.clone()),
            _ => Health::Ready,
        },
        // What will not fix itself: a template error, a child another parent holds, a
        // kind not served.
        Some(p) if p.reason == "Invalid" => Health::Failed(p.message.clone()),
        Some(p) => Health::NotReady(format!("{}: {}", p.reason, p.message)),
    }
}

/// A Gateway of the class, as its rollout sees it (not a member cluster of a fleet: those
/// are [`crate::snapshot::fleet::FleetMember`]).
#[derive(Clone, Debug)]
pub struct ClassGateway {
    /// `namespace/name`.
    pub key: String,
    /// Its labels.
    pub labels: BTreeMap<String, String>,
    /// Its Namespace's labels.
    pub namespace_labels: BTreeMap<String, String>,
    /// The revision a GatewayConfig pins it to (no wave takes it).
    pub pinned_to: Option<String>,
    /// The revision its status says it renders (`None`: none yet, it takes the newest).
    pub revision: Option<String>,
    /// Its health on that revision.
    pub health: Health,
    /// The new Certificates its move to the newest revision is counted as ordering, against
    /// the issuance budget ([`move_cost`]).
    pub certificates: u32,
    /// The Gateway as the API returns it, for a wave's `gate` (read only when the policy
    /// has one).
    pub object: Option<std::sync::Arc<serde_json::Value>>,
}

/// The new Certificates a Gateway's move to a revision is counted as ordering: as many as
/// it has `live` cert-manager Certificates (each may be replaced), and at least 1 when the
/// revision `renders` them (a revision that adds one orders it). An upper bound: a
/// revision that leaves the Certificates as they are orders none, but only rendering
/// could tell, and a budget must not be spent past what it allows.
#[must_use]
pub fn move_cost(live: usize, renders: bool) -> u32 {
    let n = u32::try_from(live).unwrap_or(u32::MAX);
    if renders { n.max(1) } else { n }
}

/// Whether a blueprint spec renders cert-manager objects: a template of it names
/// `cert-manager.io`.
#[must_use]
pub fn renders_certificates(spec: &crate::api::GatewayClassBlueprintSpec) -> bool {
    spec.gateway_templates
        .iter()
        .chain(&spec.route_templates)
        .any(|t| t.template.contains("cert-manager.io"))
}

/// Whether a child key's `apiVersion` and kind are a cert-manager Certificate.
pub(super) fn is_certificate(api_version: &str, kind: &str) -> bool {
    kind == "Certificate" && api_version.split('/').next() == Some("cert-manager.io")
}

impl ClassGateway {
    pub(super) fn on(&self, revision: &str) -> bool {
        self.revision.as_deref().is_none_or(|r| r == revision)
    }
}

/// The Gateways (ours) of the classes naming blueprint `name`, in key order, as their
/// statuses say.
#[must_use]
pub fn members(s: &crate::snapshot::Snapshot, name: &str) -> Vec<ClassGateway> {
    let classes = crate::plan::class::classes_using_blueprint(s, name);
    let bp = s.blueprint(name);
    let renders = bp.is_some_and(|b| renders_certificates(&b.object.spec));
    let gated = bp
        .and_then(|b| b.object.spec.rollout_policy.as_ref())
        .is_some_and(|p| p.waves.iter().any(|w| w.gate.is_some()));
    let predecessor = bp.and_then(|b| crate::plan::revisions::predecessor(s, b));
    s.gateways()
        .filter(|(_, g)| classes.contains(&g.typed.spec.gateway_class_name))
        .filter(|(k, _)| crate::plan::gateway::in_scope(s, k).is_ok())
        .map(|(k, g)| {
            let gw = &g.typed;
            let pin = crate::plan::revisions::pin(s, gw).map(|p| p.1);
            let live = gw.metadata.uid.as_deref().map_or(0, |uid| {
                s.child_kinds_by_gateway(uid)
                    .filter(|(v, k)| is_certificate(v, k))
                    .count()
            });
            ClassGateway {
                key: k.to_string(),
                labels: gw.metadata.labels.clone().unwrap_or_default(),
                namespace_labels: crate::gateway::Lookup::namespace_labels(s, &k.namespace)
                    .cloned()
                    .unwrap_or_default(),
                pinned_to: pin,
                revision: match crate::plan::revisions::recorded(gw) {
                    Some(r) => Some(r.to_owned()),
                    None if crate::plan::revisions::predates(gw) => predecessor.clone(),
                    None => None,
                },
                health: health(gw),
                certificates: move_cost(live, renders),
                object: gated.then(|| std::sync::Arc::new(g.json())),
            }
        })
        .collect()
}
