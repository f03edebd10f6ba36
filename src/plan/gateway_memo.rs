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

use gateway_api::apis::standard::gateways::{Gateway, GatewaySpec, GatewayStatusAddresses};
use serde_json::Value;

use super::context::Converted;
use super::set::{ChildState, DesiredChild, Held};
use crate::gateway::listeners::GatewayEval;
use crate::gateway::routes::{Parents, attach_route};
use crate::render::RenderError;
use crate::render::context::{HostnamesVar, ListenerVar};
use crate::render::prepared::Prepared;
use crate::snapshot::{GatewayEntry, Key, ObjectKey, RouteEntry, RouteKey, Snapshot};

/// What rendering a Gateway's own templates gave: the part of its plan that
/// this module can reuse while nothing the templates read changed.
#[derive(Clone, Debug, Default)]
pub(crate) struct Rendered {
    pub children: Arc<Vec<DesiredChild>>,
    pub held: Vec<Held>,
    pub errors: Vec<RenderError>,
    pub prune: Vec<ObjectKey>,
    pub states: Vec<ChildState>,
    pub rollouts: Vec<super::set::Replacement>,
    pub warnings: Vec<String>,
    pub conflicts: Vec<ObjectKey>,
    pub addresses: Vec<GatewayStatusAddresses>,
    pub address_wait: Option<String>,
    pub live_children: Vec<Option<Arc<Value>>>,
    pub refused_addresses: Vec<String>,
    pub releases: Vec<(ObjectKey, Value)>,
}

/// What a Gateway's own templates read of its plan, borrowed.
#[derive(Debug)]
pub(crate) struct ContextRef<'a> {
    pub uid: &'a str,
    pub gateway: &'a Arc<Value>,
    pub class: &'a Value,
    pub values: &'a Value,
    pub listeners: &'a Arc<Vec<ListenerVar>>,
    pub hostnames: &'a Arc<HostnamesVar>,
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
    /// else parsed from the snapshot (and kept there when `keep`: see
    /// [`super::gateway::GatewayPlan::keeps_parsed`]).
    pub(crate) fn read(snap: &Snapshot, uid: &str, keep: bool, before: Option<&Self>) -> Self {
        if let Some(b) = before
            && snap.children_stamp(uid) == b.stamp
        {
            return b.clone();
        }
        Self {
            stamp: snap.children_stamp(uid),
            objects: if keep {
                snap.children_of_kept(uid).collect()
            } else {
                snap.children_of(uid).collect()
            },
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
    /// Shared with the plan that made them (compared by address first).
    listeners: Arc<Vec<ListenerVar>>,
    hostnames: Arc<HostnamesVar>,
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
            && (Arc::ptr_eq(&self.listeners, ctx.listeners) || self.listeners == *ctx.listeners)
            && (Arc::ptr_eq(&self.hostnames, ctx.hostnames) || self.hostnames == *ctx.hostnames)
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
            listeners: Arc::clone(ctx.listeners),
            hostnames: Arc::clone(ctx.hostnames),
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
    /// The route attachments the last plan decided, and what it made of them.
    pub(crate) attach: Attachments,
    /// The orphaned route children the last plan found.
    pub(crate) orphans: Option<Orphans>,
}

/// The live children of routes a Gateway no longer accepts, as a plan found them, and
/// from what: the Gateway's children (by [`Snapshot::gateway_children_stamp`]: which
/// children carry its label and each one's parent), the accepted routes (each one's uid)
/// and the fleet (what is deletable).
#[derive(Debug)]
pub(crate) struct Orphans {
    children: u64,
    fleet: u64,
    /// In the order of the plan's accepted routes.
    accepted: Vec<Arc<RouteEntry>>,
    pub found: Vec<ObjectKey>,
}

impl Orphans {
    pub(crate) fn new(
        snap: &Snapshot,
        children: u64,
        accepted: &[Arc<RouteEntry>],
        found: Vec<ObjectKey>,
    ) -> Self {
        Self {
            children,
            fleet: snap.fleet_stamp(),
            accepted: accepted.to_vec(),
            found,
        }
    }

    /// Whether what was found holds for the Gateway's children of stamp `children` and
    /// these accepted routes: the same stamps, and the same uids (an entry that is the
    /// same has the same uid: compared by address first).
    pub(crate) fn holds(
        &self,
        snap: &Snapshot,
        children: u64,
        accepted: &[Arc<RouteEntry>],
    ) -> bool {
        self.children == children
            && self.fleet == snap.fleet_stamp()
            && self.accepted.len() == accepted.len()
            && self
                .accepted
                .iter()
                .zip(accepted)
                .all(|(a, b)| Arc::ptr_eq(a, b) || a.uid == b.uid)
    }
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

/// The route attachments of a Gateway's last plan, and the template variables made of
/// them: a route's attachment is kept while its entry in the snapshot is the same and
/// so is what attachment reads of the rest (the Gateway's evaluation, its spec, what the
/// snapshot answers as a `Lookup`: [`Snapshot::references_stamp`]); one attached again
/// (a Service came or went) that is equal to the last keeps its `Arc`, so what compares
/// attachments compares addresses. When every
/// attachment is what it was, so are the routes each listener counts and the listeners
/// and hostnames made of them. The Gateway parsed is kept while its entry is the same.
#[derive(Debug, Default)]
pub(crate) struct Attachments {
    basis: Option<AttachBasis>,
    /// In route key order.
    routes: Vec<(RouteKey, Arc<RouteEntry>, Parents)>,
    vars: Option<super::context::Vars>,
    /// The routes each listener had attached (`attached_routes`, in listener order), as
    /// counted from the attachments.
    counts: Option<Vec<i32>>,
    gateway: Option<(Arc<GatewayEntry>, Arc<Value>)>,
    /// The Gateway without its status, the same `Arc` while only the status changes
    /// (see [`super::context::GatewayContext::gateway_for_routes`]).
    without_status: Option<Arc<Value>>,
    /// `gateway` and `vars` as template values, when a plan converted them.
    gateway_value: Option<(usize, minijinja::Value)>,
    vars_values: Option<(minijinja::Value, minijinja::Value)>,
}

/// What the attachments were decided from, besides each route.
#[derive(Debug)]
struct AttachBasis {
    eval: GatewayEval,
    spec: GatewaySpec,
    references: u64,
}

/// The routes naming a Gateway, attached.
#[derive(Debug)]
pub(crate) struct Attached<'s> {
    /// The attachments of each route attached to some listener, in route key order.
    pub attachments: Vec<(RouteKey, Parents)>,
    /// The entry of each route of `attachments`.
    pub entries: Vec<&'s Arc<RouteEntry>>,
    /// The listeners and hostnames of the last plan, when every attachment is what it was
    /// then (and so are they).
    pub vars: Option<super::context::Vars>,
    /// The routes attached to each listener, counted by the last plan, when every
    /// attachment is what it was then.
    pub counts: Option<Vec<i32>>,
}

/// What identifies a `status_watch` (see [`Attachments::converted`]).
fn watch_address(w: Option<&std::sync::Arc<std::sync::atomic::AtomicBool>>) -> usize {
    w.map_or(0, |w| std::sync::Arc::as_ptr(w) as usize)
}

impl Attachments {
    /// The Gateway of `entry` as JSON: the last plan's when the entry is the same.
    pub(crate) fn gateway(&mut self, entry: &Arc<GatewayEntry>) -> Arc<Value> {
        match &self.gateway {
            Some((e, json)) if Arc::ptr_eq(e, entry) => Arc::clone(json),
            _ => {
                let json = Arc::new(entry.json());
                self.gateway = Some((Arc::clone(entry), Arc::clone(&json)));
                self.gateway_value = None;
                let without = super::context::without_status(&json);
                if self.without_status.as_deref() != Some(&without) {
                    self.without_status = Some(Arc::new(without));
                }
                json
            }
        }
    }

    /// The Gateway [`Attachments::gateway`] gave last, without its status.
    pub(crate) fn without_status(&self) -> Option<Arc<Value>> {
        self.without_status.clone()
    }

    /// Remembers the listeners and hostnames made of the attachments [`attach`] returned.
    pub(crate) fn remember_vars(
        &mut self,
        listeners: &Arc<Vec<ListenerVar>>,
        hostnames: &Arc<HostnamesVar>,
    ) {
        self.vars = Some((Arc::clone(listeners), Arc::clone(hostnames)));
        self.vars_values = None;
    }

    /// Remembers the routes attached to each listener of `eval`, as counted from the
    /// attachments [`attach`] returned.
    pub(crate) fn remember_counts(&mut self, eval: &GatewayEval) {
        self.counts = Some(eval.listeners.iter().map(|l| l.attached_routes).collect());
    }

    /// The parts of the template context this plan shares with the last one, converted
    /// then: the Gateway (when [`Attachments::gateway`] gave the same), the listeners
    /// and hostnames (when `vars_kept`: [`attach`] gave the last plan's).
    /// The Gateway's value is the last plan's only when it reports its `status` reads to
    /// the same `status_watch` (the same blueprint).
    pub(crate) fn converted(
        &self,
        vars_kept: bool,
        status_watch: Option<&std::sync::Arc<std::sync::atomic::AtomicBool>>,
    ) -> Converted {
        let c = Converted::default();
        if let Some((watch, v)) = &self.gateway_value
            && *watch == watch_address(status_watch)
        {
            let _ = c.gateway.set(v.clone());
        }
        if let Some(v) = self.vars_values.as_ref().filter(|_| vars_kept) {
            let _ = c.vars.set(v.clone());
        }
        c
    }

    /// Keeps what this plan converted of its template context (see
    /// [`Attachments::converted`]).
    pub(crate) fn keep_converted(
        &mut self,
        c: &Converted,
        status_watch: Option<&std::sync::Arc<std::sync::atomic::AtomicBool>>,
    ) {
        if let Some(v) = c.gateway.get() {
            self.gateway_value = Some((watch_address(status_watch), v.clone()));
        }
        if let Some(v) = c.vars.get() {
            self.vars_values = Some(v.clone());
        }
    }
}

/// Attaches every route naming the Gateway `key` (directly or through one of its
/// ListenerSets) to its listeners as `eval` judged them (before routes are counted),
/// reusing what `memo` kept of the last plan where nothing attachment reads changed.
pub(crate) fn attach<'s>(
    snap: &'s Snapshot,
    key: &Key,
    gw: &Gateway,
    eval: &GatewayEval,
    memo: Option<&mut Attachments>,
) -> Attached<'s> {
    let mut attachments = Vec::new();
    let mut entries = Vec::new();
    let Some(memo) = memo else {
        for (rkey, route) in snap.routes_referencing(key) {
            let a = attach_route(&route.view, gw, eval, snap);
            if !a.is_empty() {
                attachments.push((rkey.clone(), Arc::new(a)));
                entries.push(route);
            }
        }
        return Attached {
            attachments,
            entries,
            vars: None,
            counts: None,
        };
    };
    let references = snap.references_stamp();
    // The same Gateway evaluation and spec; and what the snapshot answers the same too.
    let (same_eval, same_basis) = memo.basis.as_ref().map_or((false, false), |b| {
        let same_eval = b.spec == gw.spec && b.eval == *eval;
        (same_eval, same_eval && b.references == references)
    });
    if !same_basis {
        memo.basis = Some(AttachBasis {
            eval: eval.clone(),
            spec: gw.spec.clone(),
            references,
        });
    }
    if !same_eval {
        memo.vars = None;
        memo.counts = None;
        memo.vars_values = None;
    }
    let before = std::mem::take(&mut memo.routes);
    memo.routes.reserve(before.len());
    let mut before = before.into_iter().peekable();
    // Whether every route's attachment is what it was, and no route came or went (then
    // the listeners and hostnames made of them are too, under the same evaluation).
    let mut same = same_eval;
    // Both in route key order: one walk.
    for (rkey, route) in snap.routes_referencing(key) {
        // The last plan's attachment of this very entry is the same route's: found
        // without comparing keys (the memo holds the entry, so no other has its address).
        let kept = match before.next_if(|(_, e, _)| Arc::ptr_eq(e, route)) {
            Some(kept) => Some(kept),
            None => loop {
                match before.peek().map(|(k, _, _)| k.cmp(rkey)) {
                    Some(std::cmp::Ordering::Less) => {
                        before.next();
                        same = false;
                    }
                    Some(std::cmp::Ordering::Equal) => break before.next(),
                    Some(std::cmp::Ordering::Greater) | None => break None,
                }
            },
        };
        // The key the memo keeps: the last plan's, when it had the route.
        // Attached again when its entry or the basis moved; an attachment equal to the last
        // keeps its `Arc` (what the route memo and the controller compare by address).
        let (kept_key, a) = match kept {
            Some((k, e, a)) if same_basis && Arc::ptr_eq(&e, route) => (k, a),
            kept => {
                let a = attach_route(&route.view, gw, eval, snap);
                match kept {
                    Some((k, _, old)) if *old == a => (k, old),
                    kept => {
                        same = false;
                        (
                            kept.map_or_else(|| rkey.clone(), |(k, _, _)| k),
                            Arc::new(a),
                        )
                    }
                }
            }
        };
        if !a.is_empty() {
            attachments.push((rkey.clone(), Arc::clone(&a)));
            entries.push(route);
        }
        memo.routes.push((kept_key, Arc::clone(route), a));
    }
    same = same && before.next().is_none();
    Attached {
        attachments,
        entries,
        vars: if same { memo.vars.clone() } else { None },
        counts: if same { memo.counts.clone() } else { None },
    }
}
