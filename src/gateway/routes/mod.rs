//! Routes, kind-independent (their view is [`super::route_kinds::RouteView`]): parentRef matching, allowedRoutes, hostname intersection
//! (GATEWAY-API.md 4.1-4.4), backend reference resolution, attachedRoutes counting.
//!
//! This file holds the public types and the attachedRoutes count; a route's attachment to
//! a Gateway's listeners (parentRefs, allowedRoutes, hostnames) is `attach.rs`, its
//! backendRefs resolved (`ResolvedRefs`) `backends.rs`.

use std::collections::BTreeMap;

use serde_json::Value;

use super::conditions::{Cond, types};
use super::listeners::GatewayEval;
pub use super::route_kinds::{BackendRef, ParentRef, RouteView};

mod attach;
mod backends;
#[cfg(test)]
mod tests;

pub use attach::{attach_route, is_precise};

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
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParentAttachment {
    /// Index of the parentRef in the route's spec.
    pub parent_index: usize,
    /// The parentRef to echo in status.
    pub status_ref: std::sync::Arc<Value>,
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
/// the planner's memo and what the controller remembers having written (entries being
/// `Eq`, two of the same `Arc` compare equal without reading them).
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
    // The listeners of one route (a few: a list searched, reused from route to route).
    let mut seen: Vec<ListenerId<'a>> = Vec::new();
    for route in routes {
        seen.clear();
        for a in route.into_iter().filter(|a| a.is_accepted()) {
            for l in &a.listeners {
                let id = (l.set.as_ref(), l.listener.as_str());
                if !seen.contains(&id) {
                    seen.push(id);
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
