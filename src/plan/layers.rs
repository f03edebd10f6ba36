//! A Gateway's values, layered: its blueprint's defaults and overrides, then the
//! GatewayClassConfigs (cluster-wide, then its namespace's) and the GatewayConfigs (its
//! namespace's, then its own or the one its `infrastructure.parametersRef` names), merged
//! ([`crate::render::values::merge_layers`]).

use std::sync::Arc;

use serde_json::Value;

use crate::api::GATEWAY_CONFIG_KIND;
use crate::render::prepared::Prepared;
use crate::render::values::{Layer, merge_layers};
use crate::snapshot::{Key, Snapshot};

/// The values layers of a Gateway, merged; `Err` names a bad `infrastructure.parametersRef`.
pub(super) fn infrastructure_values(
    snap: &Snapshot,
    gw: &gateway_api::apis::standard::gateways::Gateway,
    prepared: Option<&Arc<Prepared>>,
) -> Result<Value, String> {
    let ns = gw.metadata.namespace.clone().unwrap_or_default();
    let name = gw.metadata.name.clone().unwrap_or_default();
    let class_name = &gw.spec.gateway_class_name;
    let mut layers = Vec::new();
    if let Some(prepared) = prepared {
        layers.push(Layer {
            source: format!("GatewayClassBlueprint {}", prepared.name),
            default: prepared.spec.values.default.clone(),
            override_: prepared.spec.values.override_.clone(),
        });
    }
    // A `LocalPolicyTargetReference` matches on group, kind and name: a policy naming
    // another group's `Gateway` applies to nothing. At each level one policy applies: the
    // oldest of those targeting the object ([`super::policy`]; the others are Conflicted).
    let global = snap.controller_namespace().to_owned();
    if let Some(c) = super::policy::class_config_for(snap, &global, "GatewayClass", class_name) {
        layers.push(layer(
            "GatewayClassConfig",
            &c.metadata,
            c.spec.default.clone(),
            c.spec.override_.clone(),
        ));
    }
    if ns != global {
        for (kind, target) in [
            ("Namespace", ns.as_str()),
            ("GatewayClass", class_name.as_str()),
        ] {
            if let Some(c) = super::policy::class_config_for(snap, &ns, kind, target) {
                layers.push(layer(
                    "GatewayClassConfig",
                    &c.metadata,
                    c.spec.default.clone(),
                    c.spec.override_.clone(),
                ));
            }
        }
    }
    let param_name = match gw
        .spec
        .infrastructure
        .as_ref()
        .and_then(|i| i.parameters_ref.as_ref())
    {
        Some(p) if p.group == crate::api::GROUP && p.kind == GATEWAY_CONFIG_KIND => {
            if snap
                .gateway_config(&Key::new(ns.clone(), p.name.clone()))
                .is_none()
            {
                return Err(format!(
                    "spec.infrastructure.parametersRef: GatewayConfig {ns}/{} not found",
                    p.name
                ));
            }
            Some(p.name.clone())
        }
        Some(p) => {
            return Err(format!(
                "spec.infrastructure.parametersRef must name a {}/{GATEWAY_CONFIG_KIND}, not {}/{}",
                crate::api::GROUP,
                p.group,
                p.kind
            ));
        }
        None => None,
    };
    for (kind, target) in [("Namespace", ns.as_str()), ("Gateway", name.as_str())] {
        if let Some(c) =
            super::policy::gateway_config_for(snap, &ns, kind, target, param_name.as_deref())
        {
            layers.push(layer(
                "GatewayConfig",
                &c.metadata,
                c.spec.default.clone(),
                c.spec.override_.clone(),
            ));
        }
    }
    Ok(merge_layers(&layers))
}

fn layer(
    kind: &str,
    meta: &kube::api::ObjectMeta,
    default: Option<Value>,
    override_: Option<Value>,
) -> Layer {
    Layer {
        source: format!(
            "{kind} {}/{}",
            meta.namespace.as_deref().unwrap_or_default(),
            meta.name.as_deref().unwrap_or_default()
        ),
        default,
        override_,
    }
}
