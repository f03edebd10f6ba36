//! `plan_class`: the status of a GatewayClass with our controllerName, and the blueprint
//! it resolves to.

use std::sync::Arc;

use gateway_api::apis::standard::gatewayclasses::GatewayClass;

use crate::api::BLUEPRINT_KIND;
use crate::gateway::CONTROLLER_NAME;
use crate::gateway::conditions::{Cond, reasons, types};
use crate::render::prepared::Prepared;
use crate::snapshot::Snapshot;

/// The finalizer a GatewayClass carries while Gateways use it.
pub const GATEWAY_EXISTS_FINALIZER: &str = "gateway-exists-finalizer.gateway.networking.k8s.io";

/// Core and extended features every class of ours has, by their Gateway API v1.7.0
/// names; each route kind a class accepts adds its own ([`crate::gateway::route_kinds`]).
/// Each one's status-only conformance tests pass (tests/conformance/run); the traffic
/// tests belong to the data plane the children configure, which this controller does not
/// run. `GatewayInfrastructure`: `spec.infrastructure` labels and annotations on every
/// child, and a bad `parametersRef` is `Accepted=False/InvalidParameters`.
pub const BASE_FEATURES: &[&str] = &[
    "Gateway",
    "GatewayInfrastructure",
    "GatewayPort8080",
    "ListenerSet",
    "ReferenceGrant",
];

/// The features of a class accepting `kinds`, sorted.
#[must_use]
pub fn supported_features<'a>(kinds: impl IntoIterator<Item = &'a str>) -> Vec<String> {
    let mut v: Vec<String> = BASE_FEATURES
        .iter()
        .copied()
        .chain(
            kinds
                .into_iter()
                .filter_map(crate::gateway::route_kinds::by_kind)
                .flat_map(|k| k.features.iter().copied()),
        )
        .map(str::to_owned)
        .collect();
    v.sort();
    v.dedup();
    v
}

/// The route kinds Gateways of class `class_name` accept, from its blueprint.
#[must_use]
pub fn class_kinds(class_name: &str, prepared: &Prepared) -> crate::gateway::listeners::ClassKinds {
    crate::gateway::listeners::ClassKinds {
        kinds: prepared
            .spec
            .accepted_route_kinds()
            .into_iter()
            .filter_map(crate::gateway::route_kinds::by_kind)
            .map(crate::gateway::route_kinds::RouteKind::group_kind)
            .collect(),
        source: format!("GatewayClass {class_name}"),
    }
}

/// What a GatewayClass of ours should look like.
#[derive(Clone, Debug, PartialEq)]
pub struct ClassPlan {
    /// Class name.
    pub name: String,
    /// `Accepted` condition.
    pub accepted: Cond,
    /// `status.supportedFeatures`, sorted.
    pub supported_features: Vec<String>,
    /// Whether Gateways use the class (so it carries the gateway-exists finalizer).
    pub in_use: bool,
    /// The blueprint it names, when it resolved.
    pub blueprint: Option<String>,
}

/// Plans a GatewayClass; `None` when it is not ours (never touch it then).
#[must_use]
pub fn plan_class(snap: &Snapshot, name: &str) -> Option<ClassPlan> {
    let class = snap.class(name)?;
    if class.spec.controller_name != CONTROLLER_NAME {
        return None;
    }
    let resolved = resolve_blueprint(snap, class);
    // Without a valid blueprint the class accepts nothing; it still claims HTTPRoute, the
    // kind every class of ours takes by default.
    let mut supported_features = supported_features(match &resolved {
        Ok(p) => p.spec.accepted_route_kinds(),
        Err(_) => vec![crate::gateway::route_kinds::DEFAULT_KIND],
    });
    // And what the blueprint says its datapath supports.
    if let Ok(p) = &resolved {
        supported_features.extend(p.spec.supported_features.iter().cloned());
        supported_features.sort();
        supported_features.dedup();
    }
    let accepted = match resolved {
        Ok(p) => Cond::t(
            types::ACCEPTED,
            reasons::ACCEPTED,
            &format!("GatewayClassBlueprint {} is valid", p.name),
        ),
        Err(msg) => Cond::f(types::ACCEPTED, reasons::INVALID_PARAMETERS, &msg),
    };
    // A deleting Gateway uses its class until its teardown is done (our finalizer gone):
    // deleting both at once must not leave the Gateway without the class it tears down by.
    let in_use = snap.gateways().any(|(_, g)| {
        let m = &g.typed.metadata;
        g.typed.spec.gateway_class_name == name
            && (m.deletion_timestamp.is_none()
                || m.finalizers
                    .iter()
                    .flatten()
                    .any(|f| f == crate::render::labels::GATEWAY_FINALIZER))
    });
    Some(ClassPlan {
        name: name.to_owned(),
        accepted,
        supported_features,
        in_use,
        blueprint: named_blueprint(class).ok().map(str::to_owned),
    })
}

/// The names of the GatewayClasses whose parametersRef names blueprint `name`.
#[must_use]
pub fn classes_using_blueprint(snap: &Snapshot, name: &str) -> Vec<String> {
    snap.classes()
        .filter(|c| named_blueprint(c).is_ok_and(|b| b == name))
        .filter_map(|c| c.metadata.name.clone())
        .collect()
}

/// Everything wrong with a blueprint: what compiling it found, and the kinds its templates
/// name that it may not create (a cluster-scoped kind it does not list in
/// `clusterScopedKinds`, judged with what `snap` knows of kinds' scopes). Empty when it is
/// valid. `check`, the blueprint's status and its classes' `Accepted` all come from here.
#[must_use]
pub fn blueprint_errors(
    snap: &Snapshot,
    entry: &crate::snapshot::BlueprintEntry,
) -> Vec<crate::render::RenderError> {
    match &entry.prepared {
        Ok(p) => p.scope_errors(snap.scopes()),
        Err(errors) => {
            let spec = &entry.object.spec;
            let literal = crate::render::prepared::literal_kinds_of(spec);
            let name = entry.object.metadata.name.clone().unwrap_or_default();
            let mut all = errors.clone();
            all.extend(crate::render::prepared::scope_errors(
                &name,
                spec,
                &literal,
                snap.scopes(),
            ));
            all
        }
    }
}

/// The name of the blueprint a class names: its `parametersRef` names a
/// `gatewright.dev/GatewayClassBlueprint` (cluster-scoped: no namespace). The one rule every
/// lookup of "the blueprint of a class" uses.
///
/// # Errors
/// A message for `Accepted=False/InvalidParameters`.
pub fn named_blueprint(class: &GatewayClass) -> Result<&str, String> {
    let Some(p) = &class.spec.parameters_ref else {
        return Err(format!(
            "spec.parametersRef must name a {}/{BLUEPRINT_KIND}",
            crate::api::GROUP
        ));
    };
    if p.group != crate::api::GROUP || p.kind != BLUEPRINT_KIND {
        return Err(format!(
            "spec.parametersRef must name a {}/{BLUEPRINT_KIND}, not {}/{}",
            crate::api::GROUP,
            p.group,
            p.kind
        ));
    }
    if p.namespace.as_deref().is_some_and(|n| !n.is_empty()) {
        return Err(format!(
            "spec.parametersRef: {BLUEPRINT_KIND} is cluster-scoped; remove the namespace"
        ));
    }
    Ok(&p.name)
}

/// The blueprint a class names, or why there is none.
///
/// # Errors
/// A message for `Accepted=False/InvalidParameters`.
pub fn blueprint_of<'a>(
    snap: &'a Snapshot,
    class: &GatewayClass,
) -> Result<&'a Arc<crate::snapshot::BlueprintEntry>, String> {
    let name = named_blueprint(class)?;
    snap.blueprint(name)
        .ok_or_else(|| format!("{BLUEPRINT_KIND} {name} not found"))
}

/// The prepared blueprint of a class (its newest spec), or why there is none.
///
/// # Errors
/// A message for `Accepted=False/InvalidParameters`.
pub fn resolve_blueprint(snap: &Snapshot, class: &GatewayClass) -> Result<Arc<Prepared>, String> {
    let entry = blueprint_of(snap, class)?;
    let name = entry.object.metadata.name.as_deref().unwrap_or_default();
    let errors = blueprint_errors(snap, entry);
    match &entry.prepared {
        Ok(prep) if errors.is_empty() => Ok(prep.clone()),
        _ => Err(format!(
            "{BLUEPRINT_KIND} {name} is invalid: {}",
            first_errors(&errors)
        )),
    }
}

/// The first three of `errors`, and how many more there are, for a message.
#[must_use]
pub fn first_errors(errors: &[crate::render::RenderError]) -> String {
    let shown: Vec<String> = errors.iter().take(3).map(ToString::to_string).collect();
    let more = if errors.len() > 3 {
        format!(" (and {} more)", errors.len() - 3)
    } else {
        String::new()
    };
    format!("{}{more}", shown.join("; "))
}
