//! A route attached to a Gateway: each parentRef naming it matched to listeners by
//! sectionName and port, then allowedRoutes (namespaces and kinds), then hostname
//! intersection; the `Accepted` and `WildcardOnly` conditions of each entry.

use std::collections::BTreeMap;

use gateway_api::apis::standard::gateways::{
    Gateway, GatewayListeners, GatewayListenersAllowedRoutesNamespacesFrom,
};

use super::backends::resolve_backends;
use super::{ListenerAttachment, ParentAttachment, ParentRef, RouteView};
use crate::gateway::conditions::{Cond, reasons, types};
use crate::gateway::hostnames;
use crate::gateway::listeners::GatewayEval;
use crate::gateway::lookup::Lookup;

/// Judges every parentRef of `route` that names `gw`: matching listeners by sectionName
/// and port (`NoMatchingParent`), then allowedRoutes namespaces and kinds
/// (`NotAllowedByListeners`), then hostnames (`NoMatchingListenerHostname`). Only listeners
/// whose own `Accepted` is True take routes; a listener with unresolved certificate refs
/// still does (GatewayWithAttachedRoutes). `ResolvedRefs` is computed in every case.
#[must_use]
pub fn attach_route(
    route: &RouteView,
    gw: &Gateway,
    eval: &GatewayEval,
    lookup: &dyn Lookup,
) -> Vec<ParentAttachment> {
    let gw_ns = gw.metadata.namespace.as_deref().unwrap_or_default();
    let gw_name = gw.metadata.name.as_deref().unwrap_or_default();
    let resolved_refs = resolve_backends(route, lookup);
    route
        .parent_refs
        .iter()
        .enumerate()
        .filter_map(|(i, p)| {
            // The Gateway's own listeners, or those of one of its ListenerSets.
            let target = if p.targets(gw_ns, gw_name) {
                None
            } else {
                let key = p.listener_set()?;
                Some(
                    eval.sets
                        .iter()
                        .find(|s| s.namespace == key.0 && s.name == key.1)?,
                )
            };
            let (accepted, listeners) = match target {
                Some(set) if !set.attached() => (
                    Cond::f(
                        types::ACCEPTED,
                        reasons::NOT_ALLOWED_BY_LISTENERS,
                        &format!(
                            "ListenerSet {}/{} is not attached to its Gateway: {}",
                            set.namespace, set.name, set.accepted.message
                        ),
                    ),
                    Vec::new(),
                ),
                _ => attach_one(
                    route,
                    p,
                    gw,
                    eval,
                    target
                        .map(|s| (s.namespace.clone(), s.name.clone()))
                        .as_ref(),
                    lookup,
                ),
            };
            let wildcard_only = wildcard_only(&listeners, eval);
            Some(ParentAttachment {
                parent_index: i,
                status_ref: p.status_ref.clone(),
                accepted,
                resolved_refs: resolved_refs.clone(),
                listeners,
                render_error: None,
                wildcard_only,
            })
        })
        .collect()
}

fn attach_one(
    route: &RouteView,
    p: &ParentRef,
    gw: &Gateway,
    eval: &GatewayEval,
    set: Option<&(String, String)>,
    lookup: &dyn Lookup,
) -> (Cond, Vec<ListenerAttachment>) {
    let a = types::ACCEPTED;
    // One pass over the listeners: those the parentRef selects (by sectionName and port),
    // of those the ones that allow the route, and of those the ones a hostname matches.
    // `route.hostnames` holds only hostnames the API would accept (a hostname it would
    // have rejected never reaches a child).
    let mut any_candidate = false;
    let mut any_kind = false;
    let mut any_allowed = false;
    let mut attached = Vec::new();
    for (i, (e, home)) in eval.listeners.iter().zip(&eval.homes).enumerate() {
        if e.set.as_ref() != set {
            continue;
        }
        let Some(l) = eval.spec(gw, i) else {
            continue;
        };
        if !(p.section_name.as_ref().is_none_or(|s| *s == l.name)
            && p.port.is_none_or(|port| port == l.port))
        {
            continue;
        }
        any_candidate = true;
        let takes_kind = e.accepted.status.is_true() && e.supported_kinds.contains(&route.kind);
        any_kind |= takes_kind;
        if !(takes_kind && namespace_allowed(l, &route.namespace, home, lookup)) {
            continue;
        }
        any_allowed = true;
        if !route.names_hostnames {
            attached.push(ListenerAttachment {
                listener: e.name.clone(),
                set: e.set.clone(),
                hostnames: e.hostname.clone().into_iter().collect(),
            });
            continue;
        }
        let mut names: Vec<&str> = route
            .hostnames
            .iter()
            .filter_map(|h| hostnames::intersect(e.hostname.as_deref(), h))
            .collect();
        names.sort_unstable();
        names.dedup();
        let names: Vec<String> = names.into_iter().map(str::to_owned).collect();
        if !names.is_empty() {
            attached.push(ListenerAttachment {
                listener: e.name.clone(),
                set: e.set.clone(),
                hostnames: names,
            });
        }
    }
    if !any_candidate {
        let what = match (&p.section_name, p.port) {
            (Some(s), Some(port)) => format!("no listener named {s:?} on port {port}"),
            (Some(s), None) => format!("no listener named {s:?}"),
            (None, Some(port)) => format!("no listener on port {port}"),
            (None, None) => "the Gateway has no listeners".into(),
        };
        return (Cond::f(a, reasons::NO_MATCHING_PARENT, &what), Vec::new());
    }
    if !any_allowed {
        let why = if any_kind {
            format!(
                "no listener allows {} from namespace {:?}",
                route.kind.kind, route.namespace
            )
        } else {
            format!(
                "no accepted listener {}takes {} routes",
                if p.section_name.is_some() || p.port.is_some() {
                    "the parentRef selects "
                } else {
                    "of the Gateway "
                },
                route.kind.kind
            )
        };
        return (
            Cond::f(a, reasons::NOT_ALLOWED_BY_LISTENERS, &why),
            Vec::new(),
        );
    }
    if attached.is_empty() {
        return (
            Cond::f(
                a,
                reasons::NO_MATCHING_LISTENER_HOSTNAME,
                "no hostname of the route matches a listener hostname",
            ),
            Vec::new(),
        );
    }
    (
        Cond::t(a, reasons::ACCEPTED, "the route is accepted"),
        attached,
    )
}

/// Whether a name is precise: no wildcard label. Only precise names may go into a generated
/// certificate (hostnames.md: integrations MUST NOT use the hostname field to generate
/// wildcard certificates).
#[must_use]
pub fn is_precise(hostname: &str) -> bool {
    !hostname.contains('*')
}

/// `gatewright.dev/WildcardOnly=True` naming the listeners served with a generated
/// certificate (HTTPS, TLS in `Terminate` mode, without certificateRefs of their own: what
/// `hostnames.tls` lists) on which the route was attached with no precise intersected
/// hostname (only wildcards, or none at all). A listener naming its own certificate is
/// served by it, whatever it names.
fn wildcard_only(attached: &[ListenerAttachment], eval: &GatewayEval) -> Option<Cond> {
    let bare: Vec<String> = attached
        .iter()
        .filter(|a| {
            eval.listeners.iter().any(|l| {
                l.name == a.listener
                    && l.set == a.set
                    && l.terminates_tls()
                    && l.certificate_refs.is_empty()
            }) && !a.hostnames.iter().any(|h| is_precise(h))
        })
        .map(|a| {
            if a.hostnames.is_empty() {
                format!("{:?} (no hostname)", a.listener)
            } else {
                format!("{:?} (only {})", a.listener, a.hostnames.join(", "))
            }
        })
        .collect();
    (!bare.is_empty()).then(|| {
        Cond::t(
            types::WILDCARD_ONLY,
            reasons::NO_PRECISE_HOSTNAME,
            &format!(
                "on HTTPS listener {} the route matches only through a wildcard: generated certificates list precise hostnames only, so none names this route; add a precise hostname to spec.hostnames",
                bare.join(", ")
            ),
        )
    })
}

fn namespace_allowed(
    l: &GatewayListeners,
    route_ns: &str,
    gw_ns: &str,
    lookup: &dyn Lookup,
) -> bool {
    let ns = l
        .allowed_routes
        .as_ref()
        .and_then(|a| a.namespaces.as_ref());
    match ns.and_then(|n| n.from.as_ref()) {
        None | Some(GatewayListenersAllowedRoutesNamespacesFrom::Same) => route_ns == gw_ns,
        Some(GatewayListenersAllowedRoutesNamespacesFrom::All) => true,
        Some(GatewayListenersAllowedRoutesNamespacesFrom::Selector) => {
            let Some(sel) = ns.and_then(|n| n.selector.as_ref()) else {
                return false;
            };
            use crate::gateway::LabelSelectorLike;
            sel.matches(
                lookup
                    .namespace_labels(route_ns)
                    .unwrap_or(&BTreeMap::new()),
            )
        }
    }
}
