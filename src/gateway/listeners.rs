//! Listener validity, conflicts, supportedKinds and certificateRefs (GATEWAY-API.md 3),
//! and the Gateway's own `Accepted` condition.

use std::collections::BTreeMap;

use gateway_api::apis::standard::gateways::{
    Gateway, GatewayListeners, GatewayListenersAllowedRoutesKinds,
};

use super::conditions::{Cond, reasons, types};
use super::refs::{TLS_SECRET_TYPE, grant_allows};
pub use super::route_kinds::RouteGroupKind;
use super::{GATEWAY_API_GROUP, Lookup, hostnames};

/// Route kinds we implement, in table order ([`super::route_kinds`]).
#[must_use]
pub fn supported_route_kinds() -> Vec<RouteGroupKind> {
    super::route_kinds::ROUTE_KINDS
        .iter()
        .map(super::route_kinds::RouteKind::group_kind)
        .collect()
}

/// The route kinds a listener protocol serves, of those in `class_kinds`; `None` when we
/// implement no kind for the protocol at all.
#[must_use]
pub fn protocol_kinds(
    protocol: &str,
    class_kinds: &[RouteGroupKind],
) -> Option<Vec<RouteGroupKind>> {
    let rows: Vec<&super::route_kinds::RouteKind> = super::route_kinds::ROUTE_KINDS
        .iter()
        .filter(|k| k.attaches_to(protocol))
        .collect();
    (!rows.is_empty()).then(|| {
        rows.into_iter()
            .map(super::route_kinds::RouteKind::group_kind)
            .filter(|gk| class_kinds.contains(gk))
            .collect()
    })
}

/// The protocols some route kind attaches to, in table order.
fn implemented_protocols() -> Vec<&'static str> {
    let mut seen = Vec::new();
    for p in super::route_kinds::ROUTE_KINDS
        .iter()
        .flat_map(|k| k.protocols.iter().copied())
    {
        if !seen.contains(&p) {
            seen.push(p);
        }
    }
    seen
}

/// TLS mode `Terminate`.
pub const TLS_TERMINATE: &str = "Terminate";
/// TLS mode `Passthrough`.
pub const TLS_PASSTHROUGH: &str = "Passthrough";

/// Address types we accept in `spec.addresses`.
pub const SUPPORTED_ADDRESS_TYPES: &[&str] = &["IPAddress", "Hostname"];

/// One listener, judged.
#[derive(Clone, Debug, PartialEq)]
pub struct ListenerEval {
    /// Name.
    pub name: String,
    /// Port.
    pub port: i32,
    /// Protocol.
    pub protocol: String,
    /// `tls.mode` (defaulted to `Terminate`) for HTTPS and TLS listeners; `None` otherwise.
    pub tls_mode: Option<String>,
    /// Hostname.
    pub hostname: Option<String>,
    /// Kinds of routes it admits.
    pub supported_kinds: Vec<RouteGroupKind>,
    /// `Accepted`.
    pub accepted: Cond,
    /// `ResolvedRefs`.
    pub resolved_refs: Cond,
    /// `Conflicted`, only when True.
    pub conflicted: Option<Cond>,
    /// `OverlappingTLSConfig`, only when True.
    pub overlapping_tls: Option<Cond>,
    /// Resolved, permitted, valid TLS Secrets as (namespace, name).
    pub certificate_refs: Vec<(String, String)>,
    /// Routes attached (filled by `count_attached_routes`).
    pub attached_routes: i32,
    /// The ListenerSet `(namespace, name)` it comes from; `None` for the Gateway's own.
    pub set: Option<(String, String)>,
}

const LISTENER_OWNED: &[&str] = &[
    types::ACCEPTED,
    types::PROGRAMMED,
    types::RESOLVED_REFS,
    types::CONFLICTED,
    types::OVERLAPPING_TLS_CONFIG,
];

impl ListenerEval {
    /// Whether the Gateway terminates TLS on this listener (HTTPS, or TLS in `Terminate`
    /// mode): its hostnames belong in the Gateway's certificates. A TLS listener in
    /// `Passthrough` mode hands the TLS stream to the backend, which holds the certificate.
    #[must_use]
    pub fn terminates_tls(&self) -> bool {
        self.tls_mode.as_deref() == Some(TLS_TERMINATE)
    }

    /// Accepted, refs resolved, no conflict.
    #[must_use]
    pub fn is_valid(&self) -> bool {
        self.accepted.status.is_true()
            && self.resolved_refs.status.is_true()
            && self.conflicted.is_none()
    }

    /// The conditions to write; `Programmed` follows the Gateway's unless the listener is invalid.
    #[must_use]
    pub fn status_conds(&self, gateway_programmed: &Cond) -> Vec<Cond> {
        let programmed = if self.is_valid() {
            gateway_programmed.retyped(types::PROGRAMMED)
        } else {
            let why = [&self.accepted, &self.resolved_refs]
                .into_iter()
                .chain(self.conflicted.as_ref())
                .find(|c| !c.status.is_true() || c.type_ == types::CONFLICTED);
            // A conflicted listener says which conflict on Programmed too.
            let reason = self
                .conflicted
                .as_ref()
                .map_or(reasons::INVALID, |c| c.reason.as_str());
            Cond::f(
                types::PROGRAMMED,
                reason,
                why.map_or("listener is invalid", |c| c.message.as_str()),
            )
        };
        let mut out = vec![
            self.accepted.clone(),
            self.resolved_refs.clone(),
            programmed,
        ];
        out.extend(self.conflicted.clone());
        out.extend(self.overlapping_tls.clone());
        out
    }

    /// The condition types a listener's status is made of.
    #[must_use]
    pub fn owned_types() -> &'static [&'static str] {
        LISTENER_OWNED
    }
}

/// A Gateway, judged.
#[derive(Clone, Debug, PartialEq)]
pub struct GatewayEval {
    /// The Gateway's `Accepted`.
    pub accepted: Cond,
    /// One per spec listener, in spec order, then those of each attached ListenerSet in
    /// precedence order (each with [`ListenerEval::set`]).
    pub listeners: Vec<ListenerEval>,
    /// The spec of each ListenerSet listener (those after the Gateway's own in
    /// `listeners`), in the shape of a Gateway's: see [`GatewayEval::spec`].
    pub specs: Vec<GatewayListeners>,
    /// The namespace each of `listeners` belongs to (the Gateway's, or its ListenerSet's):
    /// `allowedRoutes` `Same` and certificateRefs are relative to it.
    pub homes: Vec<String>,
    /// The ListenerSets naming the Gateway as parent, in precedence order.
    pub sets: Vec<ListenerSetEval>,
}

/// A ListenerSet naming a Gateway as its parent, judged.
#[derive(Clone, Debug, PartialEq)]
pub struct ListenerSetEval {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// `metadata.generation`.
    pub generation: i64,
    /// `Accepted`: the Gateway allows it and it has a valid listener.
    pub accepted: Cond,
}

impl ListenerSetEval {
    /// Whether it is attached: its listeners are the Gateway's.
    #[must_use]
    pub fn attached(&self) -> bool {
        self.accepted.status.is_true()
    }
}

impl GatewayEval {
    /// The spec of listener `i` of `listeners`: the Gateway's own from `gw` (not copied),
    /// a ListenerSet's from [`GatewayEval::specs`].
    #[must_use]
    pub fn spec<'a>(&'a self, gw: &'a Gateway, i: usize) -> Option<&'a GatewayListeners> {
        let own = gw.spec.listeners.len();
        if i < own {
            gw.spec.listeners.get(i)
        } else {
            self.specs.get(i - own)
        }
    }

    /// The spec of listener `i` of `listeners` when it is a ListenerSet's.
    #[must_use]
    pub fn set_spec(&self, i: usize) -> Option<&GatewayListeners> {
        let own = self.listeners.iter().filter(|l| l.set.is_none()).count();
        i.checked_sub(own).and_then(|j| self.specs.get(j))
    }

    /// The Gateway's own listeners (not those of its ListenerSets).
    pub fn own_listeners(&self) -> impl Iterator<Item = &ListenerEval> {
        self.listeners.iter().filter(|l| l.set.is_none())
    }
    /// How many ListenerSets are attached (`status.attachedListenerSets`).
    #[must_use]
    pub fn attached_listener_sets(&self) -> usize {
        self.sets.iter().filter(|s| s.attached()).count()
    }
}

const GATEWAY_OWNED: &[&str] = &[
    types::ACCEPTED,
    types::PROGRAMMED,
    types::ROLLOUT,
    types::REVISION,
    types::TEARDOWN,
    types::FIELD_CONFLICT,
];

/// The condition types of a Gateway's status we own.
#[must_use]
pub fn gateway_owned_types() -> &'static [&'static str] {
    GATEWAY_OWNED
}

/// Judges a Gateway's addresses and listeners, for a class that carries every route kind
/// we implement.
#[must_use]
pub fn evaluate_gateway(gw: &Gateway, lookup: &dyn Lookup) -> GatewayEval {
    evaluate_gateway_for(gw, lookup, &ClassKinds::all())
}

/// The route kinds a GatewayClass carries (its blueprint's `routeKinds`), and its name for
/// messages.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClassKinds {
    /// The kinds.
    pub kinds: Vec<RouteGroupKind>,
    /// Where they come from, for messages (`GatewayClass x`); empty: every kind.
    pub source: String,
}

impl ClassKinds {
    /// Every kind we implement.
    #[must_use]
    pub fn all() -> Self {
        Self {
            kinds: supported_route_kinds(),
            source: String::new(),
        }
    }
}

/// Judges a Gateway's addresses and listeners for a class that carries `kinds`: a listener
/// whose protocol takes none of them is not accepted (`UnsupportedProtocol`), and
/// `allowedRoutes.kinds` naming another kind is `InvalidRouteKinds`.
#[must_use]
pub fn evaluate_gateway_for(gw: &Gateway, lookup: &dyn Lookup, kinds: &ClassKinds) -> GatewayEval {
    evaluate_gateway_with(gw, &[], lookup, kinds)
}

/// As [`evaluate_gateway_for`], with the ListenerSets that name the Gateway as parent: the
/// ones it allows add their listeners after its own, in precedence order (oldest first,
/// then by `namespace/name`). A listener that conflicts with one of an earlier source
/// (the Gateway, then older sets) is the one conflicted; within one source, both are.
#[must_use]
pub fn evaluate_gateway_with(
    gw: &Gateway,
    sets: &[&super::listenersets::ListenerSetView],
    lookup: &dyn Lookup,
    kinds: &ClassKinds,
) -> GatewayEval {
    let ns = gw.metadata.namespace.clone().unwrap_or_default();
    let mut listeners: Vec<ListenerEval> = Vec::new();
    let mut specs: Vec<GatewayListeners> = Vec::new();
    let mut homes: Vec<String> = Vec::new();
    let mut ranks: Vec<usize> = Vec::new();
    for l in &gw.spec.listeners {
        listeners.push(evaluate_listener(l, &ns, lookup, kinds, "Gateway"));
        homes.push(ns.clone());
        ranks.push(0);
    }
    let mut ordered: Vec<&super::listenersets::ListenerSetView> = sets.to_vec();
    super::listenersets::sort_by_precedence(&mut ordered);
    let mut set_evals = Vec::new();
    let mut allowed_sets = Vec::new();
    for (i, set) in ordered.iter().enumerate() {
        let verdict = super::listenersets::allowed(gw, &set.namespace, lookup)
            .and_then(|()| set.unreadable.clone().map_or(Ok(()), Err));
        if let Err(why) = &verdict {
            let reason = if set.unreadable.is_some() {
                reasons::INVALID
            } else {
                reasons::NOT_ALLOWED
            };
            set_evals.push(ListenerSetEval {
                namespace: set.namespace.clone(),
                name: set.name.clone(),
                generation: set.generation,
                accepted: Cond::f(types::ACCEPTED, reason, why),
            });
            continue;
        }
        allowed_sets.push(set_evals.len());
        set_evals.push(ListenerSetEval {
            namespace: set.namespace.clone(),
            name: set.name.clone(),
            generation: set.generation,
            accepted: Cond::t(
                types::ACCEPTED,
                reasons::ACCEPTED,
                "the ListenerSet is accepted",
            ),
        });
        for l in &set.listeners {
            let mut e =
                evaluate_listener(l, &set.namespace, lookup, kinds, super::listenersets::KIND);
            e.set = Some(set.key());
            listeners.push(e);
            specs.push(l.clone());
            homes.push(set.namespace.clone());
            ranks.push(i + 1);
        }
    }
    mark_conflicts(&mut listeners, &ranks);
    mark_overlapping_tls(&mut listeners);

    let own: Vec<&ListenerEval> = listeners.iter().filter(|l| l.set.is_none()).collect();
    let unsupported = gw
        .spec
        .addresses
        .iter()
        .flatten()
        .filter_map(|a| a.r#type.clone())
        .find(|t| !SUPPORTED_ADDRESS_TYPES.contains(&t.as_str()));
    let accepted = if let Some(t) = unsupported {
        Cond::f(
            types::ACCEPTED,
            reasons::UNSUPPORTED_ADDRESS,
            &format!("address type {t:?} is not supported; use IPAddress or Hostname"),
        )
    } else if !own.iter().any(|l| l.accepted.status.is_true()) {
        Cond::f(
            types::ACCEPTED,
            reasons::LISTENERS_NOT_VALID,
            "no listener is valid",
        )
    } else if let Some(bad) = own.iter().find(|l| !l.is_valid()) {
        let n = own.iter().filter(|l| !l.is_valid()).count();
        Cond::t(
            types::ACCEPTED,
            reasons::LISTENERS_NOT_VALID,
            &format!("{n} listener(s) are not valid, among them {:?}", bad.name),
        )
    } else {
        Cond::t(
            types::ACCEPTED,
            reasons::ACCEPTED,
            "the Gateway is accepted",
        )
    };
    // A set the Gateway allows: accepted when the Gateway is and one of its listeners is
    // valid.
    for i in allowed_sets {
        let set = &mut set_evals[i];
        let key = (set.namespace.clone(), set.name.clone());
        let mine: Vec<&ListenerEval> = listeners
            .iter()
            .filter(|l| l.set.as_ref() == Some(&key))
            .collect();
        set.accepted = if !accepted.status.is_true() {
            Cond::f(
                types::ACCEPTED,
                reasons::PARENT_NOT_ACCEPTED,
                &format!("its parent Gateway is not accepted: {}", accepted.message),
            )
        } else if !mine.iter().any(|l| l.is_valid()) {
            Cond::f(
                types::ACCEPTED,
                reasons::LISTENERS_NOT_VALID,
                "no listener is valid",
            )
        } else if let Some(bad) = mine.iter().find(|l| !l.is_valid()) {
            let n = mine.iter().filter(|l| !l.is_valid()).count();
            Cond::t(
                types::ACCEPTED,
                reasons::LISTENERS_NOT_VALID,
                &format!("{n} listener(s) are not valid, among them {:?}", bad.name),
            )
        } else {
            set.accepted.clone()
        };
    }
    // Listeners of a set that is not attached take no routes.
    let detached: Vec<(String, String)> = set_evals
        .iter()
        .filter(|s| !s.attached())
        .map(|s| (s.namespace.clone(), s.name.clone()))
        .collect();
    for l in listeners.iter_mut() {
        if l.set.as_ref().is_some_and(|k| detached.contains(k)) && l.accepted.status.is_true() {
            l.accepted = Cond::f(
                types::ACCEPTED,
                reasons::PARENT_NOT_ACCEPTED,
                "its ListenerSet is not accepted",
            );
        }
    }
    GatewayEval {
        accepted,
        listeners,
        specs,
        homes,
        sets: set_evals,
    }
}

fn evaluate_listener(
    l: &GatewayListeners,
    ns: &str,
    lookup: &dyn Lookup,
    class: &ClassKinds,
    from_kind: &str,
) -> ListenerEval {
    let protocol_kinds = protocol_kinds(&l.protocol, &class.kinds);
    let tls_mode = matches!(l.protocol.as_str(), "HTTPS" | "TLS").then(|| {
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
    });
    let mut accepted = Cond::t(
        types::ACCEPTED,
        reasons::ACCEPTED,
        "the listener is accepted",
    );
    match &protocol_kinds {
        None => {
            accepted = Cond::f(
                types::ACCEPTED,
                reasons::UNSUPPORTED_PROTOCOL,
                &format!(
                    "protocol {:?} is not supported; use one of {}",
                    l.protocol,
                    implemented_protocols().join(", ")
                ),
            );
        }
        Some(k) if k.is_empty() => {
            let carried: Vec<&str> = class.kinds.iter().map(|k| k.kind.as_str()).collect();
            accepted = Cond::f(
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
            );
        }
        Some(_) => {}
    }
    if !accepted.status.is_true() {
        // Keeps the protocol's reason.
    } else if l.protocol == "HTTPS" && tls_mode.as_deref() == Some(TLS_PASSTHROUGH) {
        accepted = Cond::f(
            types::ACCEPTED,
            reasons::UNSUPPORTED_VALUE,
            "an HTTPS listener terminates TLS: tls.mode Passthrough needs protocol TLS",
        );
    } else if let Some(Err(e)) = l.hostname.as_deref().map(hostnames::validate_hostname) {
        accepted = Cond::f(types::ACCEPTED, reasons::UNSUPPORTED_VALUE, &e);
    } else if !(1..=65535).contains(&l.port) {
        accepted = Cond::f(
            types::ACCEPTED,
            reasons::PORT_UNAVAILABLE,
            &format!("port {} is out of range", l.port),
        );
    }
    let (supported_kinds, kinds_problem) = supported_kinds(
        l.allowed_routes.as_ref().and_then(|a| a.kinds.as_deref()),
        protocol_kinds.as_deref().unwrap_or_default(),
    );
    let mut resolved_refs = Cond::t(
        types::RESOLVED_REFS,
        reasons::RESOLVED_REFS,
        "all references are resolved",
    );
    if let Some(msg) = kinds_problem {
        resolved_refs = Cond::f(types::RESOLVED_REFS, reasons::INVALID_ROUTE_KINDS, &msg);
    }
    let mut certificate_refs = Vec::new();
    if tls_mode.as_deref() == Some(TLS_TERMINATE) {
        match resolve_certificates(l, ns, lookup, from_kind) {
            Ok(refs) => certificate_refs = refs,
            Err((reason, msg)) => {
                if resolved_refs.status.is_true() {
                    resolved_refs = Cond::f(types::RESOLVED_REFS, reason, &msg);
                }
            }
        }
    }
    ListenerEval {
        name: l.name.clone(),
        port: l.port,
        protocol: l.protocol.clone(),
        tls_mode,
        hostname: l.hostname.clone().filter(|h| !h.is_empty()),
        supported_kinds,
        accepted,
        resolved_refs,
        conflicted: None,
        overlapping_tls: None,
        certificate_refs,
        attached_routes: 0,
        set: None,
    }
}

/// The kinds a listener admits; a message when some requested kinds are not supported.
fn supported_kinds(
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

type RefError = (&'static str, String);

/// The listener's certificate Secrets; a Secret in another namespace needs a ReferenceGrant
/// from `from_kind` (`Gateway`, or `ListenerSet` for a set's listener: a grant to the
/// Gateway is not inherited by its ListenerSets).
fn resolve_certificates(
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

fn family(protocol: &str) -> &str {
    match protocol {
        "HTTPS" | "TLS" => "tls",
        other => other,
    }
}

/// Why two listeners of one port are not distinct (GatewaySpec.Listeners godoc), if they
/// are not. UDP runs beside every TCP-based protocol on a port and conflicts only with
/// UDP; TCP takes the whole port, so every other TCP-based listener on it conflicts; HTTP,
/// HTTPS and TLS need one family (HTTPS and TLS are one: SNI tells them apart, and a TLS
/// listener in `Terminate` mode beside one in `Passthrough` is mixed mode, which we
/// support) and distinct hostnames.
fn conflict_between(a: &ListenerEval, b: &ListenerEval) -> Option<(&'static str, String)> {
    let udp = (a.protocol == "UDP", b.protocol == "UDP");
    if udp.0 != udp.1 {
        return None;
    }
    if udp.0 || a.protocol == "TCP" || b.protocol == "TCP" {
        return Some((
            reasons::PROTOCOL_CONFLICT,
            format!(
                "port {} is also used by listener {:?} with protocol {}{}",
                a.port,
                b.name,
                b.protocol,
                if a.protocol == b.protocol {
                    format!(": {} listeners are told apart by port alone", a.protocol)
                } else {
                    String::new()
                }
            ),
        ));
    }
    if family(&a.protocol) != family(&b.protocol) {
        return Some((
            reasons::PROTOCOL_CONFLICT,
            format!(
                "port {} is also used by listener {:?} with protocol {}",
                a.port, b.name, b.protocol
            ),
        ));
    }
    (a.hostname == b.hostname).then(|| {
        (
            reasons::HOSTNAME_CONFLICT,
            format!("listener {:?} uses the same port and hostname", b.name),
        )
    })
}

/// Listeners sharing a port must be distinct ([`conflict_between`]); every listener of an
/// indistinct pair is conflicted and not accepted, a protocol conflict naming itself before
/// a hostname conflict.
///
/// Only listeners accepted on their own take part (`GatewaySpec.Listeners` godoc): a
/// listener whose protocol we do not support (`UnsupportedProtocol`), or whose hostname or
/// port is invalid, produces no configuration, so it cannot conflict with another listener
/// and keeps its own reason.
fn mark_conflicts(listeners: &mut [ListenerEval], ranks: &[usize]) {
    let rank = |i: usize| ranks.get(i).copied().unwrap_or(0);
    let mut by_port: BTreeMap<i32, Vec<usize>> = BTreeMap::new();
    for (i, l) in listeners.iter().enumerate() {
        if l.accepted.status.is_true() {
            by_port.entry(l.port).or_default().push(i);
        }
    }
    let mut all_ranks: Vec<usize> = ranks.to_vec();
    all_ranks.push(0);
    all_ranks.sort_unstable();
    all_ranks.dedup();
    for idx in by_port.values() {
        // Source by source, in precedence order (the Gateway, then ListenerSets): a
        // listener that conflicts with a listener of an earlier source that stands is the
        // one conflicted; then, among the rest of one source, every indistinct one is.
        for &r in &all_ranks {
            let mine: Vec<usize> = idx.iter().copied().filter(|&i| rank(i) == r).collect();
            // Against the listeners of earlier sources that stand, then among the rest.
            let earlier: Vec<usize> = idx
                .iter()
                .copied()
                .filter(|&j| rank(j) < r && listeners[j].conflicted.is_none())
                .collect();
            let lost = first_conflicts(listeners, &mine, &earlier);
            let rest: Vec<usize> = mine
                .iter()
                .copied()
                .filter(|i| !lost.iter().any(|(l, ..)| l == i))
                .collect();
            let among = first_conflicts(listeners, &rest, &rest);
            for (i, reason, msg) in lost.into_iter().chain(among) {
                let l = &mut listeners[i];
                l.conflicted = Some(Cond::t(types::CONFLICTED, reason, &msg));
                l.accepted = Cond::f(types::ACCEPTED, reason, &msg);
            }
        }
    }
}

/// For each of `which`, its conflict with one of `others` (itself aside), a protocol
/// conflict before a hostname one.
fn first_conflicts(
    listeners: &[ListenerEval],
    which: &[usize],
    others: &[usize],
) -> Vec<(usize, &'static str, String)> {
    let mut out = Vec::new();
    for &i in which {
        let mut conflict: Option<(&'static str, String)> = None;
        for &j in others.iter().filter(|&&j| j != i) {
            match conflict_between(&listeners[i], &listeners[j]) {
                Some(c) if c.0 == reasons::PROTOCOL_CONFLICT => {
                    conflict = Some(c);
                    break;
                }
                Some(c) => {
                    conflict.get_or_insert(c);
                }
                None => {}
            }
        }
        if let Some((reason, msg)) = conflict {
            out.push((i, reason, msg));
        }
    }
    out
}

/// Listeners of one port that terminate TLS (HTTPS, TLS in `Terminate` mode) whose
/// hostnames overlap all get OverlappingTLSConfig.
fn mark_overlapping_tls(listeners: &mut [ListenerEval]) {
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

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::gateway::refs::tests::{CERT, KEY, secret};
    use crate::gateway::{SecretInfo, Status};
    use gateway_api::apis::standard::gateways::{
        GatewayAddresses, GatewayListenersAllowedRoutes, GatewayListenersTls,
        GatewayListenersTlsCertificateRefs,
    };
    use gateway_api::apis::standard::referencegrants::{
        ReferenceGrant, ReferenceGrantFrom, ReferenceGrantSpec, ReferenceGrantTo,
    };

    #[derive(Default)]
    pub struct World {
        pub namespaces: BTreeMap<String, BTreeMap<String, String>>,
        pub secrets: BTreeMap<(String, String), SecretInfo>,
        pub grants: BTreeMap<String, Vec<ReferenceGrant>>,
        pub services: Option<Vec<(String, String)>>,
    }

    impl Lookup for World {
        fn namespace_labels(&self, namespace: &str) -> Option<&BTreeMap<String, String>> {
            self.namespaces.get(namespace)
        }
        fn secret(&self, namespace: &str, name: &str) -> Option<&SecretInfo> {
            self.secrets.get(&(namespace.to_owned(), name.to_owned()))
        }
        fn reference_grants(&self, namespace: &str) -> Vec<&ReferenceGrant> {
            self.grants
                .get(namespace)
                .map(|v| v.iter().collect())
                .unwrap_or_default()
        }
        fn service_exists(&self, namespace: &str, name: &str) -> Option<bool> {
            self.services
                .as_ref()
                .map(|s| s.iter().any(|(n, m)| n == namespace && m == name))
        }
    }

    impl World {
        pub fn with_namespace(mut self, name: &str, labels: &[(&str, &str)]) -> Self {
            self.namespaces.insert(
                name.into(),
                labels
                    .iter()
                    .map(|(k, v)| ((*k).into(), (*v).into()))
                    .collect(),
            );
            self
        }
        pub fn with_tls_secret(mut self, ns: &str, name: &str) -> Self {
            self.secrets.insert(
                (ns.into(), name.into()),
                SecretInfo::from_secret(&secret(TLS_SECRET_TYPE, CERT.as_bytes(), KEY.as_bytes())),
            );
            self
        }
        pub fn with_grant(
            mut self,
            ns: &str,
            from: (&str, &str, &str),
            to: (&str, &str, Option<&str>),
        ) -> Self {
            let g = ReferenceGrant {
                metadata: Default::default(),
                spec: ReferenceGrantSpec {
                    from: vec![ReferenceGrantFrom {
                        group: from.0.into(),
                        kind: from.1.into(),
                        namespace: from.2.into(),
                    }],
                    to: vec![ReferenceGrantTo {
                        group: to.0.into(),
                        kind: to.1.into(),
                        name: to.2.map(Into::into),
                    }],
                },
            };
            self.grants.entry(ns.into()).or_default().push(g);
            self
        }
    }

    pub fn listener(
        name: &str,
        port: i32,
        protocol: &str,
        hostname: Option<&str>,
    ) -> GatewayListeners {
        GatewayListeners {
            name: name.into(),
            port,
            protocol: protocol.into(),
            hostname: hostname.map(Into::into),
            ..Default::default()
        }
    }

    pub fn https(
        name: &str,
        hostname: Option<&str>,
        secret_ns: Option<&str>,
        secret: &str,
    ) -> GatewayListeners {
        let mut l = listener(name, 443, "HTTPS", hostname);
        l.tls = Some(GatewayListenersTls {
            certificate_refs: Some(vec![GatewayListenersTlsCertificateRefs {
                name: secret.into(),
                namespace: secret_ns.map(Into::into),
                ..Default::default()
            }]),
            ..Default::default()
        });
        l
    }

    pub fn gw(listeners: Vec<GatewayListeners>) -> Gateway {
        let mut g = Gateway::default();
        g.metadata.name = Some("gw".into());
        g.metadata.namespace = Some("infra".into());
        g.metadata.generation = Some(1);
        g.spec.gateway_class_name = "ours".into();
        g.spec.listeners = listeners;
        g
    }

    fn http_only() -> ClassKinds {
        ClassKinds {
            kinds: vec![RouteGroupKind::gw("HTTPRoute")],
            source: "GatewayClass alb".into(),
        }
    }

    pub fn tls(
        name: &str,
        port: i32,
        hostname: Option<&str>,
        mode: &str,
        secret: Option<&str>,
    ) -> GatewayListeners {
        use gateway_api::apis::standard::gateways::GatewayListenersTlsMode;
        let mut l = listener(name, port, "TLS", hostname);
        l.tls = Some(GatewayListenersTls {
            mode: Some(if mode == TLS_PASSTHROUGH {
                GatewayListenersTlsMode::Passthrough
            } else {
                GatewayListenersTlsMode::Terminate
            }),
            certificate_refs: secret.map(|s| {
                vec![GatewayListenersTlsCertificateRefs {
                    name: s.into(),
                    ..Default::default()
                }]
            }),
            ..Default::default()
        });
        l
    }

    #[test]
    fn unsupported_protocol_one_or_two_listeners() {
        let w = World::default();
        let e = evaluate_gateway(&gw(vec![listener("sctp", 53, "SCTP", None)]), &w);
        assert_eq!(
            (e.accepted.status, e.accepted.reason.as_str()),
            (Status::False, reasons::LISTENERS_NOT_VALID)
        );
        assert_eq!(
            e.listeners[0].accepted.reason,
            reasons::UNSUPPORTED_PROTOCOL
        );
        assert!(
            e.listeners[0]
                .accepted
                .message
                .contains("HTTP, HTTPS, TLS, TCP, UDP"),
            "{}",
            e.listeners[0].accepted.message
        );
        assert!(e.listeners[0].supported_kinds.is_empty());
        // UDP on a class whose datapath carries HTTP only: the class's own words.
        let e = evaluate_gateway_for(
            &gw(vec![
                listener("http", 80, "HTTP", None),
                listener("udp", 53, "UDP", None),
            ]),
            &w,
            &http_only(),
        );
        assert_eq!(
            (e.accepted.status, e.accepted.reason.as_str()),
            (Status::True, reasons::LISTENERS_NOT_VALID)
        );
        assert_eq!(
            e.listeners[1].accepted.reason,
            reasons::UNSUPPORTED_PROTOCOL
        );
        assert_eq!(
            e.listeners[1].accepted.message,
            "GatewayClass alb carries no route kind for protocol \"UDP\" (it carries HTTPRoute): its datapath cannot serve this listener"
        );
        assert_eq!(
            e.listeners[0].supported_kinds,
            vec![RouteGroupKind::gw("HTTPRoute")]
        );
        // Every kind: HTTP listeners take HTTPRoute and GRPCRoute, each other protocol its own.
        let e = evaluate_gateway(
            &gw(vec![
                listener("http", 80, "HTTP", None),
                listener("tcp", 5432, "TCP", None),
                listener("udp", 53, "UDP", None),
                tls("tls", 443, Some("db.example.com"), TLS_PASSTHROUGH, None),
            ]),
            &w,
        );
        assert_eq!(e.accepted.reason, reasons::ACCEPTED, "{:?}", e.listeners);
        let kinds: Vec<Vec<&str>> = e
            .listeners
            .iter()
            .map(|l| l.supported_kinds.iter().map(|k| k.kind.as_str()).collect())
            .collect();
        assert_eq!(
            kinds,
            [
                vec!["HTTPRoute", "GRPCRoute"],
                vec!["TCPRoute"],
                vec!["UDPRoute"],
                vec!["TLSRoute"]
            ]
        );
    }

    #[test]
    fn tls_listeners_by_mode() {
        let w = World::default().with_tls_secret("infra", "cert");
        let e = evaluate_gateway(
            &gw(vec![
                // Mixed mode: Terminate and Passthrough on one port, told apart by SNI.
                tls(
                    "term",
                    8443,
                    Some("a.example.com"),
                    TLS_TERMINATE,
                    Some("cert"),
                ),
                tls("pass", 8443, Some("b.example.com"), TLS_PASSTHROUGH, None),
                // Terminate without a certificate: refs unresolved.
                tls("nocert", 9443, Some("c.example.com"), TLS_TERMINATE, None),
            ]),
            &w,
        );
        let [term, pass, nocert] = &e.listeners[..] else {
            panic!("three listeners")
        };
        assert!(term.is_valid() && term.terminates_tls(), "{term:?}");
        assert_eq!(
            term.certificate_refs,
            [("infra".to_owned(), "cert".to_owned())]
        );
        assert!(pass.is_valid() && !pass.terminates_tls(), "{pass:?}");
        assert!(pass.certificate_refs.is_empty());
        assert!(nocert.accepted.status.is_true());
        assert_eq!(
            nocert.resolved_refs.reason,
            reasons::INVALID_CERTIFICATE_REF
        );
        assert_eq!(
            nocert.resolved_refs.message,
            "a TLS listener terminating TLS needs tls.certificateRefs"
        );
        // HTTPS cannot pass TLS through.
        let mut h = https("h", None, None, "cert");
        if let Some(t) = &mut h.tls {
            t.mode =
                Some(gateway_api::apis::standard::gateways::GatewayListenersTlsMode::Passthrough);
        }
        let e = evaluate_gateway(&gw(vec![h]), &w);
        assert_eq!(e.listeners[0].accepted.reason, reasons::UNSUPPORTED_VALUE);
        // Overlapping hostnames: only listeners that terminate TLS share a certificate.
        let e = evaluate_gateway(
            &gw(vec![
                tls(
                    "t1",
                    8443,
                    Some("*.example.com"),
                    TLS_TERMINATE,
                    Some("cert"),
                ),
                tls(
                    "t2",
                    8443,
                    Some("a.example.com"),
                    TLS_TERMINATE,
                    Some("cert"),
                ),
                tls("p", 8443, Some("b.example.com"), TLS_PASSTHROUGH, None),
            ]),
            &w,
        );
        assert!(e.listeners[0].overlapping_tls.is_some());
        assert!(e.listeners[1].overlapping_tls.is_some());
        assert!(e.listeners[2].overlapping_tls.is_none());
    }

    #[test]
    fn listeners_sharing_a_port_by_protocol() {
        let w = World::default();
        // (listeners, which of them are conflicted and with which reason)
        let cases: Vec<(Vec<GatewayListeners>, Vec<Option<&str>>)> = vec![
            // TCP takes the whole port: HTTP beside it is not distinct.
            (
                vec![
                    listener("web", 80, "HTTP", None),
                    listener("raw", 80, "TCP", None),
                ],
                vec![
                    Some(reasons::PROTOCOL_CONFLICT),
                    Some(reasons::PROTOCOL_CONFLICT),
                ],
            ),
            // Two TCP listeners: told apart by port alone.
            (
                vec![
                    listener("a", 5432, "TCP", None),
                    listener("b", 5432, "TCP", None),
                ],
                vec![
                    Some(reasons::PROTOCOL_CONFLICT),
                    Some(reasons::PROTOCOL_CONFLICT),
                ],
            ),
            // UDP runs beside TCP and HTTP on one port number.
            (
                vec![
                    listener("dns", 53, "UDP", None),
                    listener("dnstcp", 53, "TCP", None),
                    listener("web", 81, "HTTP", None),
                    listener("quic", 81, "UDP", None),
                ],
                vec![None, None, None, None],
            ),
            // Two UDP listeners on one port.
            (
                vec![
                    listener("a", 53, "UDP", None),
                    listener("b", 53, "UDP", None),
                ],
                vec![
                    Some(reasons::PROTOCOL_CONFLICT),
                    Some(reasons::PROTOCOL_CONFLICT),
                ],
            ),
            // HTTPS and TLS: one family, distinct by hostname; same hostname conflicts.
            (
                vec![
                    https("h", Some("a.example.com"), None, "cert"),
                    tls("t", 443, Some("b.example.com"), TLS_PASSTHROUGH, None),
                    tls("u", 443, Some("b.example.com"), TLS_PASSTHROUGH, None),
                ],
                vec![
                    None,
                    Some(reasons::HOSTNAME_CONFLICT),
                    Some(reasons::HOSTNAME_CONFLICT),
                ],
            ),
            // An unsupported protocol conflicts with nothing: it produces no configuration.
            (
                vec![
                    listener("web", 80, "HTTP", None),
                    listener("s", 80, "SCTP", None),
                ],
                vec![None, None],
            ),
        ];
        for (listeners, want) in cases {
            let names: Vec<String> = listeners.iter().map(|l| l.name.clone()).collect();
            let e = evaluate_gateway(&gw(listeners), &w);
            let got: Vec<Option<&str>> = e
                .listeners
                .iter()
                .map(|l| l.conflicted.as_ref().map(|c| c.reason.as_str()))
                .collect();
            assert_eq!(got, want, "{names:?}");
            for l in e.listeners.iter().filter(|l| l.conflicted.is_some()) {
                assert!(!l.accepted.status.is_true(), "{}", l.name);
            }
        }
    }

    #[test]
    fn an_invalid_listener_conflicts_with_nothing() {
        let w = World::default();
        // A listener invalid for its port or hostname does not conflict.
        let e = evaluate_gateway(
            &gw(vec![
                listener("a", 80, "HTTP", Some("x.io")),
                listener("b", 80, "HTTP", Some("-bad-.x.io")),
            ]),
            &w,
        );
        assert!(e.listeners[0].is_valid(), "{:?}", e.listeners[0]);
        assert_eq!(e.listeners[1].accepted.reason, reasons::UNSUPPORTED_VALUE);
        assert!(e.listeners[1].conflicted.is_none());
    }

    #[test]
    fn invalid_route_kinds() {
        let w = World::default();
        let kinds = |ks: &[&str]| {
            let mut l = listener("http", 80, "HTTP", None);
            l.allowed_routes = Some(GatewayListenersAllowedRoutes {
                kinds: Some(
                    ks.iter()
                        .map(|k| GatewayListenersAllowedRoutesKinds {
                            group: None,
                            kind: (*k).into(),
                        })
                        .collect(),
                ),
                namespaces: None,
            });
            evaluate_gateway(&gw(vec![l]), &w).listeners.remove(0)
        };
        let only_bad = kinds(&["InvalidRoute"]);
        assert!(only_bad.supported_kinds.is_empty());
        assert_eq!(only_bad.resolved_refs.reason, reasons::INVALID_ROUTE_KINDS);
        let mixed = kinds(&["InvalidRoute", "HTTPRoute"]);
        assert_eq!(mixed.supported_kinds, vec![RouteGroupKind::gw("HTTPRoute")]);
        assert_eq!(mixed.resolved_refs.reason, reasons::INVALID_ROUTE_KINDS);
        assert!(kinds(&["HTTPRoute"]).resolved_refs.status.is_true());
    }

    #[test]
    fn certificate_refs() {
        let mut w = World::default()
            .with_tls_secret("infra", "good")
            .with_tls_secret("certs", "other");
        w.secrets.insert(
            ("infra".into(), "malformed".into()),
            SecretInfo::from_secret(&secret(TLS_SECRET_TYPE, b"Hello world\n", KEY.as_bytes())),
        );
        w.secrets.insert(
            ("infra".into(), "opaque".into()),
            SecretInfo {
                type_: "Opaque".into(),
                tls_valid: true,
            },
        );
        let reason = |w: &World, l: GatewayListeners| {
            evaluate_gateway(&gw(vec![l]), w).listeners[0]
                .resolved_refs
                .reason
                .clone()
        };
        assert_eq!(
            reason(&w, https("a", None, None, "good")),
            reasons::RESOLVED_REFS
        );
        assert_eq!(
            reason(&w, https("a", None, None, "missing")),
            reasons::INVALID_CERTIFICATE_REF
        );
        assert_eq!(
            reason(&w, https("a", None, None, "malformed")),
            reasons::INVALID_CERTIFICATE_REF
        );
        assert_eq!(
            reason(&w, https("a", None, None, "opaque")),
            reasons::INVALID_CERTIFICATE_REF
        );
        let mut wrong_kind = https("a", None, None, "good");
        wrong_kind
            .tls
            .as_mut()
            .unwrap()
            .certificate_refs
            .as_mut()
            .unwrap()[0]
            .kind = Some("ConfigMap".into());
        assert_eq!(reason(&w, wrong_kind), reasons::INVALID_CERTIFICATE_REF);
        let mut wrong_group = https("a", None, None, "good");
        wrong_group
            .tls
            .as_mut()
            .unwrap()
            .certificate_refs
            .as_mut()
            .unwrap()[0]
            .group = Some("wrong.io".into());
        assert_eq!(reason(&w, wrong_group), reasons::INVALID_CERTIFICATE_REF);
        // Cross-namespace: refused until a matching grant exists; wrong grants are ignored.
        assert_eq!(
            reason(&w, https("a", None, Some("certs"), "other")),
            reasons::REF_NOT_PERMITTED
        );
        for bad in [
            World::default().with_grant(
                "infra",
                ("gateway.networking.k8s.io", "Gateway", "infra"),
                ("", "Secret", None),
            ),
            World::default().with_grant(
                "certs",
                ("wrong.io", "Gateway", "infra"),
                ("", "Secret", None),
            ),
            World::default().with_grant(
                "certs",
                ("gateway.networking.k8s.io", "HTTPRoute", "infra"),
                ("", "Secret", None),
            ),
            World::default().with_grant(
                "certs",
                ("gateway.networking.k8s.io", "Gateway", "elsewhere"),
                ("", "Secret", None),
            ),
            World::default().with_grant(
                "certs",
                ("gateway.networking.k8s.io", "Gateway", "infra"),
                ("", "Secret", Some("not-this-one")),
            ),
        ] {
            let mut bad = bad;
            bad.secrets = w.secrets.clone();
            assert_eq!(
                reason(&bad, https("a", None, Some("certs"), "other")),
                reasons::REF_NOT_PERMITTED
            );
        }
        for good in [Some("other"), None, Some("")] {
            w.grants.clear();
            let w2 = std::mem::take(&mut w).with_grant(
                "certs",
                ("gateway.networking.k8s.io", "Gateway", "infra"),
                ("", "Secret", good),
            );
            assert_eq!(
                reason(&w2, https("a", None, Some("certs"), "other")),
                reasons::RESOLVED_REFS
            );
            w = w2;
        }
    }

    #[test]
    fn conflicts_never_pick_a_winner() {
        let w = World::default().with_tls_secret("infra", "good");
        let mut tls = https("tls", Some("a.example.com"), None, "good");
        tls.port = 80;
        let e = evaluate_gateway(
            &gw(vec![
                listener("http", 80, "HTTP", Some("a.example.com")),
                tls,
                listener("other", 8080, "HTTP", None),
            ]),
            &w,
        );
        assert_eq!(
            e.listeners[0].conflicted.as_ref().unwrap().reason,
            reasons::PROTOCOL_CONFLICT
        );
        assert_eq!(
            e.listeners[1].conflicted.as_ref().unwrap().reason,
            reasons::PROTOCOL_CONFLICT
        );
        assert!(e.listeners[2].conflicted.is_none());
        assert_eq!(e.accepted.reason, reasons::LISTENERS_NOT_VALID);
        assert!(e.accepted.status.is_true());
        let e = evaluate_gateway(
            &gw(vec![
                listener("a", 80, "HTTP", Some("x.io")),
                listener("b", 80, "HTTP", Some("x.io")),
            ]),
            &w,
        );
        assert!(e.listeners.iter().all(|l| {
            l.conflicted
                .as_ref()
                .is_some_and(|c| c.reason == reasons::HOSTNAME_CONFLICT)
        }));
        assert!(!e.accepted.status.is_true());
    }

    #[test]
    fn overlapping_tls_on_all_overlapping_listeners() {
        let w = World::default().with_tls_secret("infra", "good");
        let e = evaluate_gateway(
            &gw(vec![
                https("wild", Some("*.example.com"), None, "good"),
                https("foo", Some("foo.example.com"), None, "good"),
                https("other", Some("other.io"), None, "good"),
            ]),
            &w,
        );
        assert!(e.listeners[0].overlapping_tls.is_some());
        assert!(e.listeners[1].overlapping_tls.is_some());
        assert!(e.listeners[2].overlapping_tls.is_none());
        assert!(e.listeners[0].is_valid(), "overlap does not invalidate");
    }

    #[test]
    fn unsupported_address_type() {
        let mut g = gw(vec![listener("http", 80, "HTTP", None)]);
        g.spec.addresses = Some(vec![GatewayAddresses {
            r#type: Some("example.com/Custom".into()),
            value: Some("x".into()),
        }]);
        assert_eq!(
            evaluate_gateway(&g, &World::default()).accepted.reason,
            reasons::UNSUPPORTED_ADDRESS
        );
    }

    #[test]
    fn status_conds_programmed_follows_validity() {
        let w = World::default();
        let e = evaluate_gateway(
            &gw(vec![
                https("a", None, None, "missing"),
                listener("b", 80, "HTTP", None),
            ]),
            &w,
        );
        let gp = Cond::t(types::PROGRAMMED, reasons::PROGRAMMED, "ok");
        let a = e.listeners[0].status_conds(&gp);
        assert_eq!(a[2].status, Status::False);
        assert_eq!(a[2].reason, reasons::INVALID);
        let b = e.listeners[1].status_conds(&gp);
        assert_eq!(b[2], gp);
        assert_eq!(b.len(), 3, "no Conflicted when not conflicted");
    }
}
