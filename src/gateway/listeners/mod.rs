//! Listener validity, conflicts, supportedKinds and certificateRefs (GATEWAY-API.md 3),
//! and the Gateway's own `Accepted` condition.
//!
//! This file holds the public types and the `evaluate_gateway*` entry points, which judge
//! each listener and then run the steps: protocol kinds (`protocol.rs`), certificates and
//! TLS overlaps (`tls.rs`), port conflicts (`conflicts.rs`) and the ListenerSet merge
//! (`sets.rs`).

use gateway_api::apis::standard::gateways::{Gateway, GatewayListeners};

use super::conditions::{Cond, reasons, types};
use super::hostnames;
use super::lookup::Lookup;
pub use super::route_kinds::RouteGroupKind;

mod conflicts;
mod protocol;
mod sets;
#[cfg(test)]
pub(crate) mod tests;
mod tls;

pub use protocol::{protocol_kinds, supported_route_kinds};
pub use tls::{TLS_PASSTHROUGH, TLS_TERMINATE};

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
    let mut merged = sets::Merged::default();
    for l in &gw.spec.listeners {
        merged
            .listeners
            .push(evaluate_listener(l, &ns, lookup, kinds, "Gateway"));
        merged.homes.push(ns.clone());
        merged.ranks.push(0);
    }
    let (mut set_evals, allowed_sets) = sets::merge(gw, sets, lookup, kinds, &mut merged);
    let sets::Merged {
        mut listeners,
        specs,
        homes,
        ranks,
    } = merged;
    conflicts::mark_conflicts(&mut listeners, &ranks);
    tls::mark_overlapping_tls(&mut listeners);
    let accepted = gateway_accepted(gw, &listeners);
    sets::judge(&accepted, &mut set_evals, &allowed_sets, &mut listeners);
    GatewayEval {
        accepted,
        listeners,
        specs,
        homes,
        sets: set_evals,
    }
}

/// The Gateway's `Accepted`, from its addresses and its own listeners (judged, conflicts
/// marked).
fn gateway_accepted(gw: &Gateway, listeners: &[ListenerEval]) -> Cond {
    let own: Vec<&ListenerEval> = listeners.iter().filter(|l| l.set.is_none()).collect();
    let unsupported = gw
        .spec
        .addresses
        .iter()
        .flatten()
        .filter_map(|a| a.r#type.clone())
        .find(|t| !SUPPORTED_ADDRESS_TYPES.contains(&t.as_str()));
    if let Some(t) = unsupported {
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
    }
}

/// One listener of `ns` (the Gateway's namespace or its ListenerSet's), judged on its own:
/// protocol, TLS mode, hostname, port, route kinds and certificates. Conflicts with other
/// listeners come later (`conflicts.rs`).
fn evaluate_listener(
    l: &GatewayListeners,
    ns: &str,
    lookup: &dyn Lookup,
    class: &ClassKinds,
    from_kind: &str,
) -> ListenerEval {
    let protocol_kinds = protocol_kinds(&l.protocol, &class.kinds);
    let tls_mode = tls::tls_mode(l);
    let mut accepted = protocol::protocol_accepted(l, protocol_kinds.as_deref(), class);
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
    let (supported_kinds, kinds_problem) = protocol::supported_kinds(
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
        match tls::resolve_certificates(l, ns, lookup, from_kind) {
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
