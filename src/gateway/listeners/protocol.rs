//! Protocol kinds: the route kinds each listener protocol serves, of those a class
//! carries; whether a listener's protocol is accepted; and the kinds it admits.

use gateway_api::apis::standard::gateways::{GatewayListeners, GatewayListenersAllowedRoutesKinds};

use super::ClassKinds;
use crate::gateway::conditions::{Cond, reasons, types};
use crate::gateway::lookup::GATEWAY_API_GROUP;
use crate::gateway::route_kinds::{self, RouteGroupKind};

/// Route kinds we implement, in table order ([`route_kinds`]).
#[must_use]
pub fn supported_route_kinds() -> Vec<RouteGroupKind> {
    route_kinds::ROUTE_KINDS
        .iter()
        .map(route_kinds::RouteKind::group_kind)
        .collect()
}

/// The route kinds a listener protocol serves, of those in `class_kinds`; `None` when we
/// implement no kind for the protocol at all.
#[must_use]
pub fn protocol_kinds(
    protocol: &str,
    class_kinds: &[RouteGroupKind],
) -> Option<Vec<RouteGroupKind>> {
    let rows: Vec<&route_kinds::RouteKind> = route_kinds::ROUTE_KINDS
        .iter()
        .filter(|k| k.attaches_to(protocol))
        .collect();
    (!rows.is_empty()).then(|| {
        rows.into_iter()
            .map(route_kinds::RouteKind::group_kind)
            .filter(|gk| class_kinds.contains(gk))
            .collect()
    })
}

/// The protocols some route kind attaches to, in table order.
fn implemented_protocols() -> Vec<&'static str> {
    let mut seen = Vec::new();
    for p in route_kinds::ROUTE_KINDS
        .iter()
        .flat_map(|k| k.protocols.iter().copied())
    {
        if !seen.contains(&p) {
            seen.push(p);
        }
    }
    seen
}

/// A listener's `Accepted` as far as its protocol goes: not accepted
/// (`UnsupportedProtocol`) when we implement no route kind for the protocol
/// (`protocol_kinds` is `None`), or when the class carries none of those we implement for it.
pub(super) fn protocol_accepted(
    l: &GatewayListeners,
    protocol_kinds: Option<&[RouteGroupKind]>,
    class: &ClassKinds,
) -> Cond {
    match protocol_kinds {
        None => Cond::f(
            types::ACCEPTED,
            reasons::UNSUPPORTED_PROTOCOL,
            &format!(
                "protocol {:?} is not supported; use one of {}",
                l.protocol,
                implemented_protocols().join(", ")
            ),
        ),
        Some([]) => {
            let carried: Vec<&str> = class.kinds.iter().map(|k| k.kind.as_str()).collect();
            Cond::f(
                types::ACCEPTED,
                reasons::UNSUPPORTED_PROTOCOL,
                &format!(
                    "{} carries no route kind for protocol {:?} (it carries {}): its datapath cannot serve this listener",
                    if class.source.is_empty() {
                        "the GatewayClass"
                    } else {
                        class.source.as_str()
                    },
                    l.protocol,
                    if carried.is_empty() {
                        "none".to_owned()
                    } else {
                        carried.join(", ")
                    }
                ),
            )
        }
        Some(_) => Cond::t(
            types::ACCEPTED,
            reasons::ACCEPTED,
            "the listener is accepted",
        ),
    }
}

/// The kinds a listener admits; a message when some requested kinds are not supported.
pub(super) fn supported_kinds(
    requested: Option<&[GatewayListenersAllowedRoutesKinds]>,
    protocol: &[RouteGroupKind],
) -> (Vec<RouteGroupKind>, Option<String>) {
    match requested {
        None | Some([]) => (protocol.to_vec(), None),
        Some(kinds) => {
            let mut ok = Vec::new();
            let mut bad = Vec::new();
            for k in kinds {
                let gk = RouteGroupKind {
                    group: k
                        .group
                        .clone()
                        .unwrap_or_else(|| GATEWAY_API_GROUP.to_owned()),
                    kind: k.kind.clone(),
                };
                if protocol.contains(&gk) {
                    if !ok.contains(&gk) {
                        ok.push(gk);
                    }
                } else {
                    bad.push(format!("{}/{}", gk.group, gk.kind));
                }
            }
            let msg = (!bad.is_empty()).then(|| {
                format!(
                    "route kinds not supported on this listener: {}",
                    bad.join(", ")
                )
            });
            (ok, msg)
        }
    }
}
