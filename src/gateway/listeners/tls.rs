//! TLS: a listener's `tls.mode`, its certificateRefs (kind, ReferenceGrant, Secret type
//! and PEM checks) and `OverlappingTLSConfig` between listeners that terminate TLS.

use gateway_api::apis::standard::gateways::GatewayListeners;

use super::ListenerEval;
use crate::gateway::conditions::{Cond, reasons, types};
use crate::gateway::hostnames;
use crate::gateway::lookup::{GATEWAY_API_GROUP, Lookup, grant_allows};
use crate::gateway::refs::TLS_SECRET_TYPE;

/// TLS mode `Terminate`.
pub const TLS_TERMINATE: &str = "Terminate";
/// TLS mode `Passthrough`.
pub const TLS_PASSTHROUGH: &str = "Passthrough";

/// The `tls.mode` of an HTTPS or TLS listener, defaulted to `Terminate`; `None` for other
/// protocols.
pub(super) fn tls_mode(l: &GatewayListeners) -> Option<String> {
    matches!(l.protocol.as_str(), "HTTPS" | "TLS").then(|| {
        l.tls
            .as_ref()
            .and_then(|t| t.mode.as_ref())
            .map_or(TLS_TERMINATE, |m| match m {
                gateway_api::apis::standard::gateways::GatewayListenersTlsMode::Passthrough => {
                    TLS_PASSTHROUGH
                }
                gateway_api::apis::standard::gateways::GatewayListenersTlsMode::Terminate => {
                    TLS_TERMINATE
                }
            })
            .to_owned()
    })
}

type RefError = (&'static str, String);

/// The listener's certificate Secrets; a Secret in another namespace needs a ReferenceGrant
/// from `from_kind` (`Gateway`, or `ListenerSet` for a set's listener: a grant to the
/// Gateway is not inherited by its ListenerSets).
pub(super) fn resolve_certificates(
    l: &GatewayListeners,
    ns: &str,
    lookup: &dyn Lookup,
    from_kind: &str,
) -> Result<Vec<(String, String)>, RefError> {
    let needs = || {
        format!(
            "{} listener terminating TLS needs tls.certificateRefs",
            if l.protocol == "HTTPS" {
                "an HTTPS"
            } else {
                "a TLS"
            }
        )
    };
    let Some(tls) = &l.tls else {
        return Err((reasons::INVALID_CERTIFICATE_REF, needs()));
    };
    let refs = tls.certificate_refs.as_deref().unwrap_or_default();
    if refs.is_empty() {
        return if tls.options.as_ref().is_some_and(|o| !o.is_empty()) {
            Ok(Vec::new())
        } else {
            Err((reasons::INVALID_CERTIFICATE_REF, needs()))
        };
    }
    let mut out = Vec::new();
    for r in refs {
        let group = r.group.clone().unwrap_or_default();
        let kind = r.kind.clone().unwrap_or_else(|| "Secret".into());
        let rns = r
            .namespace
            .clone()
            .filter(|n| !n.is_empty())
            .unwrap_or_else(|| ns.to_owned());
        let what = format!("certificateRef {rns}/{}", r.name);
        if !group.is_empty() || kind != "Secret" {
            return Err((
                reasons::INVALID_CERTIFICATE_REF,
                format!("{what}: only core Secrets are supported, not {group}/{kind}"),
            ));
        }
        if !grant_allows(
            lookup,
            GATEWAY_API_GROUP,
            from_kind,
            ns,
            "",
            "Secret",
            &rns,
            &r.name,
        ) {
            return Err((
                reasons::REF_NOT_PERMITTED,
                format!("{what}: no ReferenceGrant in {rns} allows {from_kind}s of {ns} to use it"),
            ));
        }
        let Some(info) = lookup.secret(&rns, &r.name) else {
            return Err((
                reasons::INVALID_CERTIFICATE_REF,
                format!("{what}: Secret not found"),
            ));
        };
        if info.type_ != TLS_SECRET_TYPE {
            return Err((
                reasons::INVALID_CERTIFICATE_REF,
                format!(
                    "{what}: Secret type is {:?}, not {TLS_SECRET_TYPE:?}",
                    info.type_
                ),
            ));
        }
        if !info.tls_valid {
            return Err((
                reasons::INVALID_CERTIFICATE_REF,
                format!("{what}: tls.crt or tls.key is not valid PEM"),
            ));
        }
        out.push((rns, r.name.clone()));
    }
    Ok(out)
}

/// Listeners of one port that terminate TLS (HTTPS, TLS in `Terminate` mode) whose
/// hostnames overlap all get OverlappingTLSConfig.
pub(super) fn mark_overlapping_tls(listeners: &mut [ListenerEval]) {
    let n = listeners.len();
    for i in 0..n {
        for j in 0..n {
            if i == j
                || !listeners[i].accepted.status.is_true()
                || !listeners[j].accepted.status.is_true()
                || listeners[i].port != listeners[j].port
                || !listeners[i].terminates_tls()
                || !listeners[j].terminates_tls()
            {
                continue;
            }
            let overlap = match (
                listeners[i].hostname.as_deref(),
                listeners[j].hostname.as_deref(),
            ) {
                (None, _) | (_, None) => true,
                (Some(a), Some(b)) => {
                    a == b
                        || hostnames::covered_by_wildcard(a, b)
                        || hostnames::covered_by_wildcard(b, a)
                }
            };
            if overlap {
                let other = listeners[j].name.clone();
                listeners[i].overlapping_tls = Some(Cond::t(
                    types::OVERLAPPING_TLS_CONFIG,
                    reasons::OVERLAPPING_HOSTNAMES,
                    &format!("hostname overlaps with listener {other:?} on the same port"),
                ));
            }
        }
    }
}
