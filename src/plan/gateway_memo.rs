//! What a Gateway's own templates rendered, remembered between its plans (the route
//! plans' memo is [`super::memo`]).
//!
//! What they rendered (children, readiness, prune list, replacements, addresses) is reused
//! when the blueprint, the Gateway, `class`, `values`, `listeners` (with the routes
//! attached to each), `hostnames`, the Gateway's live children, the holders of what it
//! renders and what is known of kinds' scopes are the same; not when a Gateway template
//! or the status template reads `routes` (every route's object) or what cannot be told
//! from their text ([`Prepared::gateway_reads`]). The live children, parsed, are reused
//! when their stamps are the same. The property tests check that a plan made with the
//! memo equals one made without it.

use std::sync::Arc;

use gateway_api::apis::standard::gateways::GatewayStatusAddresses;
use serde_json::Value;

use super::set::{ChildState, DesiredChild, Held};
use crate::render::RenderError;
use crate::render::context::{HostnamesVar, ListenerVar};
use crate::render::prepared::Prepared;
use crate::snapshot::{ObjectKey, Snapshot};

/// What rendering a Gateway's own templates gave: the part of its plan that
/// this module can reuse while nothing the templates read changed.
#[derive(Clone, Debug, Default)]
pub(crate) struct Rendered {
    pub children: Arc<Vec<DesiredChild>>,
    pub held: Vec<Held>,
    pub errors: Vec<RenderError>,
    pub prune: Vec<ObjectKey>,
    pub states: Vec<ChildState>,
    pub rollouts: Vec<super::RolloutState>,
    pub warnings: Vec<String>,
    pub conflicts: Vec<ObjectKey>,
    pub addresses: Vec<GatewayStatusAddresses>,
    pub address_wait: Option<String>,
    pub live_children: Vec<Option<Arc<Value>>>,
}

/// What a Gateway's own templates read of its plan, borrowed.
#[derive(Debug)]
pub(crate) struct ContextRef<'a> {
    pub uid: &'a str,
    pub gateway: &'a Arc<Value>,
    pub class: &'a Value,
    pub values: &'a Value,
    pub listeners: &'a [ListenerVar],
    pub hostnames: &'a HostnamesVar,
}

/// The live children of a Gateway as a plan read them, with their stamps.
#[derive(Clone, Debug, Default)]
pub(crate) struct LiveChildren {
    /// [`Snapshot::children_stamp`] when they were read.
    stamp: u64,
    /// Parsed.
    pub objects: Vec<Arc<Value>>,
}

impl LiveChildren {
    /// The live children of `uid`: those `before` holds when their stamps are the same,
    /// else parsed from the snapshot.
    pub(crate) fn read(snap: &Snapshot, uid: &str, before: Option<&Self>) -> Self {
        if let Some(b) = before
            && snap.children_stamp(uid) == b.stamp
        {
            return b.clone();
        }
        Self {
            stamp: snap.children_stamp(uid),
            objects: snap.children_of(uid).collect(),
        }
    }
}

/// What a Gateway's own templates (and its status template) read: its plan's context,
/// its live children, the blueprint and kinds' scopes. `None` when they read `routes`
/// (every route's object) or what cannot be told from their text.
#[derive(Debug, PartialEq)]
pub(crate) struct GatewayInputs {
    /// The blueprint's address ([`GatewayMemo`] keeps it, so it is not reused).
    blueprint: usize,
    uid: String,
    gateway: Arc<Value>,
    class: Value,
    values: Value,
    listeners: Vec<ListenerVar>,
    hostnames: HostnamesVar,
    live: u64,
    scopes: u64,
}

impl GatewayInputs {
    /// Whether a plan of `ctx` has the same inputs (compared in place, nothing copied).
    fn matches(
        &self,
        ctx: &ContextRef<'_>,
        prepared: &Arc<Prepared>,
        live: &LiveChildren,
        snap: &Snapshot,
    ) -> bool {
        self.blueprint == Arc::as_ptr(prepared) as usize
            && self.scopes == snap.scopes_stamp()
            && self.live == live.stamp
            && self.uid == ctx.uid
            && (Arc::ptr_eq(&self.gateway, ctx.gateway) || *self.gateway == **ctx.gateway)
            && self.class == *ctx.class
            && self.values == *ctx.values
            && self.listeners == ctx.listeners
            && self.hostnames == *ctx.hostnames
    }

    /// The inputs of a plan of `ctx`, or `None` when its templates read what they do not
    /// hold.
    pub(crate) fn of(
        ctx: &ContextRef<'_>,
        prepared: &Arc<Prepared>,
        live: &LiveChildren,
        snap: &Snapshot,
    ) -> Option<Self> {
        let reads = prepared.gateway_reads.as_ref()?;
        if reads.contains("routes") {
            return None;
        }
        Some(Self {
            blueprint: Arc::as_ptr(prepared) as usize,
            uid: ctx.uid.to_owned(),
            gateway: Arc::clone(ctx.gateway),
            class: ctx.class.clone(),
            values: ctx.values.clone(),
            listeners: ctx.listeners.to_vec(),
            hostnames: ctx.hostnames.clone(),
            live: live.stamp,
            scopes: snap.scopes_stamp(),
        })
    }
}

/// What the last plan of a Gateway rendered of its own templates, and from what.
#[derive(Debug, Default)]
pub struct GatewayMemo {
    /// The blueprint the inputs name by address (kept, so the address is not reused).
    blueprint: Option<Arc<Prepared>>,
    inputs: Option<GatewayInputs>,
    holders: Vec<Option<u64>>,
    rendered: Option<Rendered>,
    /// The live children the last plan read.
    pub(crate) live: LiveChildren,
}

impl GatewayMemo {
    /// What the last plan rendered, when `gw`'s plan has the same inputs and every object
    /// it rendered has the same holder.
    pub(crate) fn rendered_for(
        &self,
        ctx: &ContextRef<'_>,
        prepared: &Arc<Prepared>,
        live: &LiveChildren,
        snap: &Snapshot,
    ) -> Option<&Rendered> {
        let (Some(then), Some(r)) = (&self.inputs, &self.rendered) else {
            return None;
        };
        (then.matches(ctx, prepared, live, snap)
            && r.children
                .iter()
                .map(|c| snap.holder_stamp(&c.key))
                .eq(self.holders.iter().copied()))
        .then_some(r)
    }

    /// Remembers what was rendered from `inputs` (not when another parent holds an
    /// object it renders: see [`super::memo::PlanMemo::route_plans`]).
    pub(crate) fn remember(
        &mut self,
        inputs: Option<GatewayInputs>,
        rendered: &Rendered,
        snap: &Snapshot,
        prepared: &Arc<Prepared>,
    ) {
        if inputs.is_none() || !rendered.conflicts.is_empty() {
            self.inputs = None;
            self.rendered = None;
            return;
        }
        self.blueprint = Some(Arc::clone(prepared));
        self.holders = rendered
            .children
            .iter()
            .map(|c| snap.holder_stamp(&c.key))
            .collect();
        self.inputs = inputs;
        self.rendered = Some(rendered.clone());
    }
}
