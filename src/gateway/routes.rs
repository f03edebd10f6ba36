//! Routes, kind-independent (their view is [`super::route_kinds::RouteView`]): parentRef matching, allowedRoutes, hostname intersection
//! (GATEWAY-API.md 4.1-4.4), backend reference resolution, attachedRoutes counting.

use std::collections::BTreeMap;

use gateway_api::apis::standard::gateways::{
    Gateway, GatewayListeners, GatewayListenersAllowedRoutesNamespacesFrom,
};
use serde_json::Value;

use super::conditions::{Cond, reasons, types};
use super::listeners::GatewayEval;
use super::refs::grant_allows;
pub use super::route_kinds::{BackendRef, ParentRef, RouteView};
use super::{Lookup, hostnames};

/// A listener a route attached to, with the hostnames traffic is accepted for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ListenerAttachment {
    /// Listener name.
    pub listener: String,
    /// The ListenerSet the listener belongs to; `None` for the Gateway's own.
    pub set: Option<(String, String)>,
    /// Intersected hostnames; empty when neither side names one (catch-all).
    pub hostnames: Vec<String>,
}

/// The outcome of one parentRef naming one Gateway.
#[derive(Clone, Debug, PartialEq)]
pub struct ParentAttachment {
    /// Index of the parentRef in the route's spec.
    pub parent_index: usize,
    /// The parentRef to echo in status.
    pub status_ref: Value,
    /// `Accepted`.
    pub accepted: Cond,
    /// `ResolvedRefs`.
    pub resolved_refs: Cond,
    /// Listeners attached to (empty unless accepted).
    pub listeners: Vec<ListenerAttachment>,
    /// `gatewright.dev/Rendered=False` when the route's own templates failed; absent
    /// otherwise.
    pub render_error: Option<Cond>,
    /// `gatewright.dev/WildcardOnly=True` when on some HTTPS listener the route has no
    /// precise intersected hostname (so no generated certificate names it); absent otherwise.
    pub wildcard_only: Option<Cond>,
}

/// A route's entries for one Gateway (one per parentRef naming it), shared between a plan,
/// the planner's memo and what the controller remembers having written.
pub type Parents = std::sync::Arc<Vec<ParentAttachment>>;

const PARENT_OWNED: &[&str] = &[
    types::ACCEPTED,
    types::RESOLVED_REFS,
    types::PARTIALLY_INVALID,
    types::RENDERED,
    types::WILDCARD_ONLY,
];

impl ParentAttachment {
    /// Whether accepted.
    #[must_use]
    pub fn is_accepted(&self) -> bool {
        self.accepted.status.is_true()
    }
    /// The conditions of the status entry.
    #[must_use]
    pub fn status_conds(&self) -> Vec<Cond> {
        let mut v = vec![self.accepted.clone(), self.resolved_refs.clone()];
        v.extend(self.render_error.clone());
        v.extend(self.wildcard_only.clone());
        v
    }
    /// Condition types of a route parent entry we own.
    #[must_use]
    pub fn owned_types() -> &'static [&'static str] {
        PARENT_OWNED
    }
}

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
        let names = hostnames::dedupe_sorted(
            route
                .hostnames
                .iter()
                .filter_map(|h| hostnames::intersect(e.hostname.as_deref(), h)),
        );
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
            let empty = BTreeMap::new();
            super::selector_matches(
                lookup.namespace_labels(route_ns).unwrap_or(&empty),
                sel.match_labels.as_ref(),
                sel.match_expressions.iter().flatten().map(|e| {
                    (
                        e.key.as_str(),
                        e.operator.as_str(),
                        e.values.as_deref().unwrap_or_default(),
                    )
                }),
            )
        }
    }
}

fn resolve_backends(route: &RouteView, lookup: &dyn Lookup) -> Cond {
    let r = types::RESOLVED_REFS;
    for b in &route.backend_refs {
        let what = || format!("backendRef {}/{}", b.namespace, b.name);
        if !(b.group.is_empty() && b.kind == "Service") {
            return Cond::f(
                r,
                reasons::INVALID_KIND,
                &format!(
                    "{}: kind {}/{} is not supported; use a Service",
                    what(),
                    b.group,
                    b.kind
                ),
            );
        }
        if !grant_allows(
            lookup,
            &route.kind.group,
            &route.kind.kind,
            &route.namespace,
            "",
            "Service",
            &b.namespace,
            &b.name,
        ) {
            return Cond::f(
                r,
                reasons::REF_NOT_PERMITTED,
                &format!("{}: no ReferenceGrant in {} allows it", what(), b.namespace),
            );
        }
        if lookup.service_exists(&b.namespace, &b.name) == Some(false) {
            return Cond::f(
                r,
                reasons::BACKEND_NOT_FOUND,
                &format!("{}: Service not found", what()),
            );
        }
    }
    Cond::t(r, reasons::RESOLVED_REFS, "all references are resolved")
}

/// Adds each route to the `attached_routes` of the listeners its accepted attachments put
/// it on, once per route and listener: a route whose several parentRefs name the same
/// Gateway (one with its namespace written out, one without) counts once. `routes` gives
/// each route's attachments.
pub fn count_attached_routes<'a, R>(eval: &mut GatewayEval, routes: impl IntoIterator<Item = R>)
where
    R: IntoIterator<Item = &'a ParentAttachment>,
{
    type ListenerId<'b> = (Option<&'b (String, String)>, &'b str);
    let mut per_listener: BTreeMap<ListenerId<'a>, i32> = BTreeMap::new();
    for route in routes {
        let mut seen = std::collections::BTreeSet::new();
        for a in route.into_iter().filter(|a| a.is_accepted()) {
            for l in &a.listeners {
                let id = (l.set.as_ref(), l.listener.as_str());
                if seen.insert(id) {
                    *per_listener.entry(id).or_default() += 1;
                }
            }
        }
    }
    for l in &mut eval.listeners {
        l.attached_routes = per_listener
            .get(&(l.set.as_ref(), l.name.as_str()))
            .copied()
            .unwrap_or(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gateway::GATEWAY_API_GROUP;
    use crate::gateway::Status;
    use crate::gateway::listeners::evaluate_gateway;
    use crate::gateway::listeners::tests::{World, gw, https, listener};
    use gateway_api::apis::standard::gateways::{
        GatewayListenersAllowedRoutes, GatewayListenersAllowedRoutesKinds,
        GatewayListenersAllowedRoutesNamespaces, GatewayListenersAllowedRoutesNamespacesSelector,
        GatewayListenersAllowedRoutesNamespacesSelectorMatchExpressions,
    };
    use gateway_api::apis::standard::httproutes::{
        HttpRoute, HttpRouteParentRefs, HttpRouteRules, HttpRouteRulesBackendRefs,
    };

    fn view(r: &HttpRoute) -> RouteView {
        super::super::route_kinds::ROUTE_KINDS[0].view(&serde_json::to_value(r).unwrap_or_default())
    }

    fn route(ns: &str, hostnames: &[&str], parents: Vec<HttpRouteParentRefs>) -> HttpRoute {
        let mut r = HttpRoute::default();
        r.metadata.name = Some("r".into());
        r.metadata.namespace = Some(ns.into());
        r.metadata.generation = Some(3);
        r.spec.hostnames =
            (!hostnames.is_empty()).then(|| hostnames.iter().map(|h| (*h).into()).collect());
        r.spec.parent_refs = Some(parents);
        r.spec.rules = Some(vec![HttpRouteRules {
            backend_refs: Some(vec![HttpRouteRulesBackendRefs {
                name: "svc".into(),
                port: Some(80),
                ..Default::default()
            }]),
            ..Default::default()
        }]);
        r
    }

    fn parent(section: Option<&str>, port: Option<i32>) -> HttpRouteParentRefs {
        HttpRouteParentRefs {
            name: "gw".into(),
            namespace: Some("infra".into()),
            section_name: section.map(Into::into),
            port,
            ..Default::default()
        }
    }

    fn all_ns(mut l: GatewayListeners) -> GatewayListeners {
        l.allowed_routes = Some(GatewayListenersAllowedRoutes {
            kinds: None,
            namespaces: Some(GatewayListenersAllowedRoutesNamespaces {
                from: Some(GatewayListenersAllowedRoutesNamespacesFrom::All),
                selector: None,
            }),
        });
        l
    }

    fn attach(g: &Gateway, r: &HttpRoute, w: &World) -> Vec<ParentAttachment> {
        attach_route(&view(r), g, &evaluate_gateway(g, w), w)
    }

    #[test]
    fn hostname_intersection_counts() {
        let w = World::default();
        let g = gw(vec![
            listener("listener-1", 80, "HTTP", Some("very.specific.com")),
            listener("listener-2", 80, "HTTP", Some("*.wildcard.io")),
            listener("listener-3", 80, "HTTP", Some("*.anotherwildcard.io")),
        ]);
        let routes = [
            route(
                "infra",
                &[
                    "non.matching.com",
                    "*.nonmatchingwildcard.io",
                    "very.specific.com",
                ],
                vec![parent(None, None)],
            ),
            route("infra", &["*.specific.com"], vec![parent(None, None)]),
            route(
                "infra",
                &["foo.wildcard.io", "bar.wildcard.io"],
                vec![parent(None, None)],
            ),
            route("infra", &["*.anotherwildcard.io"], vec![parent(None, None)]),
            route(
                "infra",
                &["specific.but.wrong.com", "wildcard.io"],
                vec![parent(None, None)],
            ),
        ];
        let mut eval = evaluate_gateway(&g, &w);
        let all: Vec<Vec<ParentAttachment>> = routes
            .iter()
            .map(|r| attach_route(&view(r), &g, &eval, &w))
            .collect();
        count_attached_routes(&mut eval, &all);
        let counts: Vec<i32> = eval.listeners.iter().map(|l| l.attached_routes).collect();
        assert_eq!(counts, [2, 1, 1]);
        assert_eq!(
            all[4][0].accepted.reason,
            reasons::NO_MATCHING_LISTENER_HOSTNAME
        );
        assert_eq!(
            all[2][0].listeners[0].hostnames,
            ["bar.wildcard.io", "foo.wildcard.io"]
        );
        assert_eq!(all[1][0].listeners[0].hostnames, ["very.specific.com"]);
    }

    #[test]
    fn section_name_and_port() {
        let w = World::default();
        let g = gw(vec![
            listener("http", 80, "HTTP", None),
            listener("alt", 8080, "HTTP", None),
        ]);
        let reason = |p| {
            attach(&g, &route("infra", &[], vec![p]), &w)[0]
                .accepted
                .reason
                .clone()
        };
        assert_eq!(
            reason(parent(Some("http1"), None)),
            reasons::NO_MATCHING_PARENT
        );
        assert_eq!(reason(parent(None, Some(81))), reasons::NO_MATCHING_PARENT);
        assert_eq!(
            reason(parent(Some("http"), Some(8080))),
            reasons::NO_MATCHING_PARENT
        );
        let a = attach(
            &g,
            &route("infra", &[], vec![parent(Some("alt"), None)]),
            &w,
        );
        assert!(a[0].is_accepted());
        assert_eq!(a[0].listeners.len(), 1);
        assert_eq!(a[0].listeners[0].listener, "alt");
        let a = attach(&g, &route("infra", &[], vec![parent(None, Some(80))]), &w);
        assert_eq!(a[0].listeners[0].listener, "http");
    }

    #[test]
    fn allowed_namespaces_and_kinds() {
        let mut w = World::default();
        w.namespaces.insert(
            "web".into(),
            BTreeMap::from([
                ("kubernetes.io/metadata.name".into(), "web".into()),
                ("team".into(), "a".into()),
            ]),
        );
        let same = gw(vec![listener("http", 80, "HTTP", None)]);
        let a = attach(&same, &route("web", &[], vec![parent(None, None)]), &w);
        assert_eq!(a[0].accepted.reason, reasons::NOT_ALLOWED_BY_LISTENERS);
        assert_eq!(
            a[0].resolved_refs.status,
            Status::True,
            "ResolvedRefs computed even when not accepted"
        );
        assert!(
            attach(
                &gw(vec![all_ns(listener("http", 80, "HTTP", None))]),
                &route("web", &[], vec![parent(None, None)]),
                &w
            )[0]
            .is_accepted()
        );
        let selector = |labels: Option<BTreeMap<String, String>>,
                        exprs: Option<
            Vec<GatewayListenersAllowedRoutesNamespacesSelectorMatchExpressions>,
        >| {
            let mut l = listener("http", 80, "HTTP", None);
            l.allowed_routes = Some(GatewayListenersAllowedRoutes {
                kinds: None,
                namespaces: Some(GatewayListenersAllowedRoutesNamespaces {
                    from: Some(GatewayListenersAllowedRoutesNamespacesFrom::Selector),
                    selector: Some(GatewayListenersAllowedRoutesNamespacesSelector {
                        match_labels: labels,
                        match_expressions: exprs,
                    }),
                }),
            });
            gw(vec![l])
        };
        let expr = |op: &str, vals: &[&str]| {
            GatewayListenersAllowedRoutesNamespacesSelectorMatchExpressions {
                key: "team".into(),
                operator: op.into(),
                values: Some(vals.iter().map(|v| (*v).into()).collect()),
            }
        };
        let ok = |g: &Gateway| {
            attach(g, &route("web", &[], vec![parent(None, None)]), &w)[0].is_accepted()
        };
        assert!(ok(&selector(
            Some(BTreeMap::from([("team".into(), "a".into())])),
            None
        )));
        assert!(!ok(&selector(
            Some(BTreeMap::from([("team".into(), "b".into())])),
            None
        )));
        assert!(ok(&selector(None, Some(vec![expr("In", &["a", "c"])]))));
        assert!(!ok(&selector(None, Some(vec![expr("NotIn", &["a"])]))));
        assert!(ok(&selector(None, Some(vec![expr("Exists", &[])]))));
        assert!(!ok(&selector(None, Some(vec![expr("DoesNotExist", &[])]))));
        let mut tls_only = listener("tls", 80, "HTTP", None);
        tls_only.allowed_routes = Some(GatewayListenersAllowedRoutes {
            kinds: Some(vec![GatewayListenersAllowedRoutesKinds {
                group: None,
                kind: "TLSRoute".into(),
            }]),
            namespaces: None,
        });
        let a = attach(
            &gw(vec![tls_only]),
            &route("infra", &[], vec![parent(None, None)]),
            &w,
        );
        assert_eq!(a[0].accepted.reason, reasons::NOT_ALLOWED_BY_LISTENERS);
    }

    #[test]
    fn a_route_naming_a_gateway_twice_counts_once_per_listener() {
        // The API takes these as two parents (one names the namespace, one does not), but
        // both are the route's own namespace: one Gateway, one attached route.
        let w = World::default();
        let g = gw(vec![listener("http", 80, "HTTP", None)]);
        let mut eval = evaluate_gateway(&g, &w);
        let mut implicit = parent(None, None);
        implicit.namespace = None;
        let r = route("infra", &[], vec![parent(None, None), implicit]);
        let a = attach_route(&view(&r), &g, &eval, &w);
        assert_eq!(a.len(), 2);
        assert!(a.iter().all(ParentAttachment::is_accepted));
        count_attached_routes(&mut eval, [&a]);
        assert_eq!(eval.listeners[0].attached_routes, 1);
    }

    #[test]
    fn missing_certificate_still_attaches() {
        let w = World::default();
        let g = gw(vec![https("https", None, None, "missing")]);
        let mut eval = evaluate_gateway(&g, &w);
        let a = attach_route(
            &view(&route("infra", &[], vec![parent(None, None)])),
            &g,
            &eval,
            &w,
        );
        count_attached_routes(&mut eval, [&a]);
        assert_eq!(eval.listeners[0].attached_routes, 1);
    }

    #[test]
    fn backends() {
        let g = gw(vec![listener("http", 80, "HTTP", None)]);
        let mut w = World {
            services: Some(vec![]),
            ..World::default()
        };
        let rr = |w: &World, r: &HttpRoute| attach(&g, r, w)[0].resolved_refs.reason.clone();
        let r = route("infra", &[], vec![parent(None, None)]);
        assert_eq!(rr(&w, &r), reasons::BACKEND_NOT_FOUND);
        w.services = Some(vec![("infra".into(), "svc".into())]);
        assert_eq!(rr(&w, &r), reasons::RESOLVED_REFS);
        let mut cross = r.clone();
        cross.spec.rules.as_mut().unwrap()[0]
            .backend_refs
            .as_mut()
            .unwrap()[0]
            .namespace = Some("other".into());
        assert_eq!(rr(&w, &cross), reasons::REF_NOT_PERMITTED);
        let mut kind = r.clone();
        kind.spec.rules.as_mut().unwrap()[0]
            .backend_refs
            .as_mut()
            .unwrap()[0]
            .kind = Some("Bucket".into());
        assert_eq!(rr(&w, &kind), reasons::INVALID_KIND);
        let a = attach(&g, &kind, &w);
        assert!(
            a[0].is_accepted(),
            "an invalid backend keeps the route accepted"
        );
    }

    #[test]
    fn status_ref_is_echoed_with_defaults() {
        let r = route("infra", &[], vec![parent(Some("http"), None)]);
        let v = view(&r);
        assert_eq!(v.parent_refs[0].status_ref["group"], GATEWAY_API_GROUP);
        assert_eq!(v.parent_refs[0].status_ref["kind"], "Gateway");
        assert_eq!(v.parent_refs[0].status_ref["sectionName"], "http");
        assert_eq!(v.parent_refs[0].status_ref["namespace"], "infra");
    }

    /// A route of `kind` in namespace `ns` with one parentRef to infra/gw (`extra` merged
    /// into it) and one backend.
    fn kind_route(
        kind: &str,
        ns: &str,
        hostnames: &[&str],
        extra: serde_json::Value,
        backend: serde_json::Value,
    ) -> RouteView {
        let mut parent = serde_json::json!({"name": "gw", "namespace": "infra"});
        if let (Some(p), Some(e)) = (parent.as_object_mut(), extra.as_object()) {
            p.extend(e.clone());
        }
        let mut spec =
            serde_json::json!({"parentRefs": [parent], "rules": [{"backendRefs": [backend]}]});
        if !hostnames.is_empty() {
            spec["hostnames"] = serde_json::json!(hostnames);
        }
        super::super::route_kinds::by_kind(kind)
            .unwrap()
            .view(&serde_json::json!({"kind": kind, "metadata": {"name": "r", "namespace": ns}, "spec": spec}))
    }

    fn every_protocol() -> Gateway {
        use crate::gateway::listeners::TLS_PASSTHROUGH;
        use crate::gateway::listeners::tests::tls;
        gw(vec![
            all_ns(listener("http", 80, "HTTP", None)),
            all_ns(https("https", None, None, "cert")),
            all_ns(tls(
                "pass",
                8443,
                Some("*.example.com"),
                TLS_PASSTHROUGH,
                None,
            )),
            all_ns(listener("tcp", 5432, "TCP", None)),
            all_ns(listener("udp", 53, "UDP", None)),
        ])
    }

    #[test]
    fn each_kind_attaches_to_the_listeners_of_its_protocols() {
        let w = World::default().with_tls_secret("infra", "cert");
        let g = every_protocol();
        let eval = evaluate_gateway(&g, &w);
        assert_eq!(
            eval.accepted.reason,
            reasons::ACCEPTED,
            "{:?}",
            eval.listeners
        );
        let svc = serde_json::json!({"name": "svc", "port": 80});
        for (kind, hostnames, want) in [
            ("HTTPRoute", &["a.example.com"][..], &["http", "https"][..]),
            ("GRPCRoute", &["a.example.com"], &["http", "https"]),
            ("TLSRoute", &["a.example.com"], &["pass"]),
            ("TCPRoute", &[], &["tcp"]),
            ("UDPRoute", &[], &["udp"]),
        ] {
            let r = kind_route(kind, "app", hostnames, serde_json::json!({}), svc.clone());
            let a = attach_route(&r, &g, &eval, &w);
            assert_eq!(a.len(), 1);
            assert!(a[0].is_accepted(), "{kind}: {:?}", a[0].accepted);
            let got: Vec<&str> = a[0].listeners.iter().map(|l| l.listener.as_str()).collect();
            assert_eq!(got, want, "{kind}");
        }
        // The wrong protocol (by sectionName or port), no such listener, no matching SNI.
        for (kind, hostnames, extra, reason) in [
            (
                "TLSRoute",
                &["a.example.com"][..],
                serde_json::json!({"sectionName": "https"}),
                reasons::NOT_ALLOWED_BY_LISTENERS,
            ),
            (
                "TLSRoute",
                &["a.example.com"],
                serde_json::json!({"sectionName": "http"}),
                reasons::NOT_ALLOWED_BY_LISTENERS,
            ),
            (
                "TCPRoute",
                &[],
                serde_json::json!({"port": 53}),
                reasons::NOT_ALLOWED_BY_LISTENERS,
            ),
            (
                "UDPRoute",
                &[],
                serde_json::json!({"sectionName": "tcp"}),
                reasons::NOT_ALLOWED_BY_LISTENERS,
            ),
            (
                "GRPCRoute",
                &[],
                serde_json::json!({"sectionName": "pass"}),
                reasons::NOT_ALLOWED_BY_LISTENERS,
            ),
            (
                "TCPRoute",
                &[],
                serde_json::json!({"sectionName": "nope"}),
                reasons::NO_MATCHING_PARENT,
            ),
            (
                "TLSRoute",
                &["db.other.org"],
                serde_json::json!({}),
                reasons::NO_MATCHING_LISTENER_HOSTNAME,
            ),
        ] {
            let r = kind_route(kind, "app", hostnames, extra.clone(), svc.clone());
            let a = attach_route(&r, &g, &eval, &w);
            assert_eq!(
                (a[0].accepted.status, a[0].accepted.reason.as_str()),
                (Status::False, reason),
                "{kind} {extra}"
            );
            assert!(a[0].listeners.is_empty());
        }
        // The TLSRoute's SNI names intersect the listener's wildcard.
        let r = kind_route(
            "TLSRoute",
            "app",
            &["db.example.com", "x.other.org"],
            serde_json::json!({}),
            svc,
        );
        let a = attach_route(&r, &g, &eval, &w);
        assert_eq!(a[0].listeners[0].hostnames, ["db.example.com"]);
    }

    #[test]
    fn routes_of_several_kinds_share_a_listener_and_count_once_each() {
        let w = World::default();
        let g = gw(vec![
            all_ns(listener("http", 80, "HTTP", None)),
            all_ns(listener("tcp", 5432, "TCP", None)),
        ]);
        let mut eval = evaluate_gateway(&g, &w);
        let svc = serde_json::json!({"name": "svc", "port": 80});
        // An HTTPRoute and a GRPCRoute of one hostname are both accepted (the spec lets
        // them share it); two TCPRoutes on one TCP listener are both accepted too.
        let routes = [
            kind_route(
                "HTTPRoute",
                "app",
                &["a.example.com"],
                serde_json::json!({}),
                svc.clone(),
            ),
            kind_route(
                "GRPCRoute",
                "app",
                &["a.example.com"],
                serde_json::json!({}),
                svc.clone(),
            ),
            kind_route("TCPRoute", "app", &[], serde_json::json!({}), svc.clone()),
            kind_route(
                "TCPRoute",
                "other",
                &[],
                serde_json::json!({"sectionName": "tcp"}),
                svc,
            ),
        ];
        let attached: Vec<Vec<ParentAttachment>> = routes
            .iter()
            .map(|r| attach_route(r, &g, &eval, &w))
            .collect();
        for (r, a) in routes.iter().zip(&attached) {
            assert!(a[0].is_accepted(), "{}: {:?}", r.kind.kind, a[0].accepted);
        }
        count_attached_routes(&mut eval, attached.iter());
        assert_eq!(eval.listeners[0].attached_routes, 2);
        assert_eq!(eval.listeners[1].attached_routes, 2);
    }

    #[test]
    fn a_cross_namespace_backend_needs_a_grant_from_the_route_kind() {
        let far = serde_json::json!({"name": "db", "namespace": "data", "port": 5432});
        let g = gw(vec![all_ns(listener("tcp", 5432, "TCP", None))]);
        let r = kind_route("TCPRoute", "app", &[], serde_json::json!({}), far);
        let resolved = |w: &World| {
            attach_route(&r, &g, &evaluate_gateway(&g, w), w)[0]
                .resolved_refs
                .clone()
        };
        assert_eq!(
            resolved(&World::default()).reason,
            reasons::REF_NOT_PERMITTED
        );
        // A grant from HTTPRoutes says nothing of TCPRoutes.
        let http_grant = World::default().with_grant(
            "data",
            (GATEWAY_API_GROUP, "HTTPRoute", "app"),
            ("", "Service", None),
        );
        assert_eq!(resolved(&http_grant).reason, reasons::REF_NOT_PERMITTED);
        let tcp_grant = World::default().with_grant(
            "data",
            (GATEWAY_API_GROUP, "TCPRoute", "app"),
            ("", "Service", None),
        );
        assert!(
            resolved(&tcp_grant).status.is_true(),
            "{:?}",
            resolved(&tcp_grant)
        );
    }
}
