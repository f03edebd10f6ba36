//! What a Gateway's last plan rendered, remembered so that re-planning after one route
//! changed renders that route alone.
//!
//! **Route plans.** A [`RoutePlan`] is a function of what its templates can read and of
//! the live objects it judges. A remembered plan is reused when all of these are the same
//! as when it was made:
//! - the route (the snapshot's entry, by identity: the snapshot replaces an entry when the
//!   route changes);
//! - the blueprint (its prepared form, by identity) and whether the Gateway is accepted
//!   and accepts the route;
//! - the Gateway's part of the template context that route templates read
//!   ([`RouteContext`]): always the Gateway itself (names, labels and the decoration of
//!   every child come from it), and `class`, `values`, `listeners`, `hostnames` only when a
//!   route template names them ([`Prepared::route_reads`], from the templates' own
//!   undeclared variables). When that cannot be told (a route template includes another
//!   template, or reads `routes`, every route's object), nothing is remembered;
//! - the route's live children under the Gateway, and whatever holds each object the
//!   plan renders (by the snapshot's stamps: each version of an object has its own; while
//!   the stamp of every child under the Gateway is the same, no route's is looked up);
//! - what the Gateway accepted the route for (its attachments: the `attachment` its
//!   templates see and the tenancy boundary judges its copies by), and the names and
//!   listeners of the Gateways its copies may attach to;
//! - what is known of kinds' scopes (the snapshot's scopes stamp);
//! - with a placed route template, the fleet's members and whether placement renders.
//!
//! **The Gateway's own templates**: see [`super::gateway_memo`].
//!
//! Nothing else reaches the templates or the readiness rules; the property tests check,
//! over random sequences of changes, that a plan made with the memo equals one made
//! without it.
//!
//! **What a remembered plan holds.** A route plan whose children were all found to hold
//! what it renders (its [`RoutePlan::applied`] mark, set by the controller) is reused
//! without being applied, so nothing reads its objects: the memo keeps them as their JSON
//! text ([`super::set::ChildObject::compact`]), and its live objects are held as the
//! snapshot's text anyway ([`crate::snapshot::LiveText`]). At 5,000 routes on one Gateway
//! both sides parsed were about 94 MB (see "Memory" in docs/architecture.md).

use std::cmp::Ordering;
use std::sync::{Arc, Weak};

use serde_json::Value;

use super::gateway::GatewayPlan;
use super::route::RoutePlan;
use crate::render::context::{HostnamesVar, ListenerVar};
use crate::render::prepared::Prepared;
use crate::snapshot::{RouteEntry, RouteKey, Snapshot};

/// What route templates read of a Gateway's plan (see the module docs). Its shared parts
/// compare by address first (`Arc` of an `Eq` type): a plan over the same attachments
/// holds the memo's own listeners and hostnames.
#[derive(Debug, PartialEq)]
pub(crate) struct RouteContext {
    gateway_uid: String,
    gateway: Arc<Value>,
    class: Option<Value>,
    values: Option<Value>,
    listeners: Option<Arc<Vec<ListenerVar>>>,
    hostnames: Option<Arc<HostnamesVar>>,
    scopes: u64,
    /// The Gateways route copies may attach to ([`super::route::child_gateways_stamp`]):
    /// the tenancy boundary judges each copy against their listeners.
    child_gateways: u64,
    /// Whether the boundary only warns (`super::set::lenience`).
    lenient: bool,
    /// The fleet's stamp ([`Snapshot::fleet_stamp`]: its members, served or not, and
    /// whether placement renders here) when a route template is placed: where its objects
    /// go and what they read of `cluster` change with them.
    fleet: Option<u64>,
    /// The hash of the parts above that keyed route templates read
    /// ([`super::context::GatewayContext::route_render_key`]), made once per distinct
    /// context and blueprint: a plan over an equal context (the memo keeps its `Arc`)
    /// does not hash the listeners and hostnames again.
    render_key: RenderKeyCell,
}

/// See [`RouteContext::render_key`]: the blueprint's address and the key. Never part of
/// a context's equality.
#[derive(Debug, Default)]
struct RenderKeyCell(std::sync::OnceLock<(usize, Option<u64>)>);

impl PartialEq for RenderKeyCell {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl RouteContext {
    /// The context of `gw`'s route templates, or `None` when they read what it does not
    /// hold.
    fn of(gw: &GatewayPlan, prepared: &Prepared, snap: &Snapshot) -> Option<Self> {
        let reads = prepared.route_reads.as_ref()?;
        if reads.contains("routes") {
            return None;
        }
        let ctx = &gw.context;
        Some(Self {
            gateway_uid: gw.uid.clone(),
            gateway: ctx.gateway_for_routes(prepared),
            class: reads.contains("class").then(|| ctx.class.clone()),
            values: reads.contains("values").then(|| ctx.values.clone()),
            listeners: reads
                .contains("listeners")
                .then(|| Arc::clone(&ctx.listeners)),
            hostnames: reads
                .contains("hostnames")
                .then(|| Arc::clone(&ctx.hostnames)),
            scopes: snap.scopes_stamp(),
            child_gateways: super::route::child_gateways_stamp(snap, gw),
            lenient: super::set::lenience(gw.revision.as_ref()).is_some(),
            fleet: prepared
                .spec
                .route_templates
                .iter()
                .any(|t| t.placement.is_some())
                .then(|| snap.fleet_stamp()),
            render_key: RenderKeyCell::default(),
        })
    }

    /// Gives `gw`'s plan the route render key of this context, made once (for
    /// `prepared`: a context kept across a blueprint change makes it again).
    fn seed_render_key(&self, gw: &GatewayPlan, prepared: &Prepared) {
        let at = std::ptr::from_ref(prepared) as usize;
        let (for_blueprint, key) = *self
            .render_key
            .0
            .get_or_init(|| (at, gw.context.route_render_key(prepared)));
        if for_blueprint == at {
            gw.context.seed_route_render_key(key);
        }
    }
}

/// One remembered route plan and what it was made from.
#[derive(Debug)]
struct Entry {
    route: Weak<RouteEntry>,
    blueprint: Weak<Prepared>,
    context: Arc<RouteContext>,
    accepted: bool,
    /// What the Gateway accepted the route for (its `attachment`).
    parents: Option<crate::gateway::Parents>,
    live: u64,
    holders: Vec<Option<u64>>,
    plan: Arc<RoutePlan>,
    /// Whether [`Entry::compact`] was done.
    compacted: bool,
}

/// The remembered route plans of one Gateway. Keep one per Gateway and pass it to
/// [`super::status::plan_with`]; a fresh one (or none) plans everything.
#[derive(Debug, Default)]
pub struct PlanMemo {
    /// The Gateway's own part.
    pub(crate) gateway: super::gateway_memo::GatewayMemo,
    context: Option<Arc<RouteContext>>,
    /// In route key order (the order of the Gateway's accepted routes).
    routes: Vec<(RouteKey, Entry)>,
    /// [`Snapshot::gateway_children_stamp`] of the Gateway when the last plan checked or
    /// made the remembered plans: while it is the same, no route's live children under
    /// the Gateway changed, and no route's stamp need be looked up.
    gateway_children: u64,
    /// Route plans reused and made by the last plan.
    pub last: MemoCounts,
}

/// How many route plans a plan reused and how many it made.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MemoCounts {
    /// Reused.
    pub reused: usize,
    /// Made.
    pub planned: usize,
}

impl PlanMemo {
    /// How many route plans it remembers.
    #[must_use]
    pub fn len(&self) -> usize {
        self.routes.len()
    }

    /// Whether it remembers none.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.routes.is_empty()
    }

    /// The route plans of `gw`, reusing the remembered ones whose inputs did not change;
    /// remembers the new ones and forgets the routes the Gateway no longer has.
    pub(crate) fn route_plans(&mut self, snap: &Snapshot, gw: &GatewayPlan) -> Vec<Arc<RoutePlan>> {
        let context = gw
            .blueprint
            .as_deref()
            .and_then(|p| RouteContext::of(gw, p, snap))
            .map(|c| match &self.context {
                // The same context as last time: keep its Arc, so entries compare by address.
                Some(old) if **old == c => Arc::clone(old),
                _ => Arc::new(c),
            });
        self.last = MemoCounts::default();
        let Some(context) = context else {
            self.context = None;
            self.routes.clear();
            self.last.planned = gw.context.routes.len();
            return gw
                .context
                .routes
                .iter()
                .map(|r| Arc::new(super::route::plan_route(snap, gw, r)))
                .collect();
        };
        self.context = Some(Arc::clone(&context));
        if let Some(prepared) = gw.blueprint.as_deref() {
            context.seed_render_key(gw, prepared);
        }
        // Every route iterated here is one the Gateway's context holds, so it accepts it.
        let accepted = gw.accepted;
        let n = gw.context.routes.len();
        let mut out = Vec::with_capacity(n);
        // The remembered plans and the Gateway's accepted routes are both in route key
        // order: one walk, no lookup by key. The routes the Gateway no longer has, and the
        // plans not remembered this time (a conflict, a route gone from the snapshot), are
        // left behind; the kept ones move into the new list with their keys.
        let before = std::mem::replace(&mut self.routes, Vec::with_capacity(n));
        let children = snap.gateway_children_stamp(&gw.uid);
        let children_same = std::mem::replace(&mut self.gateway_children, children) == children;
        let mut before = before.into_iter().peekable();
        // Whether a reused plan found applied may keep its objects as text: not while a
        // route template drains (each pass's narrowing reads every route child).
        let compacts = gw.blueprint.as_deref().is_some_and(|b| !b.route_drains());
        for (i, rkey) in gw.context.routes.iter().enumerate() {
            // The Gateway's plan holds the accepted routes' entries beside their keys.
            let entry = gw.context.route_entries.get(i);
            let old = remembered(&mut before, rkey, entry);
            let key = match old {
                Some((key, old)) => {
                    if let Some(entry) = entry
                        && old.parents.as_ref() == gw.context.route_parents.get(i)
                        && old.still_holds(snap, gw, entry, &context, accepted, children_same)
                    {
                        self.last.reused += 1;
                        let mut old = old;
                        if compacts {
                            old.compact(snap, &gw.uid);
                        }
                        out.push(Arc::clone(&old.plan));
                        self.routes.push((key, old));
                        continue;
                    }
                    Some(key)
                }
                None => None,
            };
            self.last.planned += 1;
            let plan = Arc::new(super::route::plan_route(snap, gw, rkey));
            // A plan with a conflict is made again each time: which of its template's
            // objects another parent holds is not all in it.
            if let (Some(entry), Some(prepared), true) =
                (entry, &gw.blueprint, plan.conflicts.is_empty())
            {
                let made = Entry {
                    route: Arc::downgrade(entry),
                    blueprint: Arc::downgrade(prepared),
                    context: Arc::clone(&context),
                    accepted,
                    parents: gw.context.route_parents.get(i).cloned(),
                    live: snap.children_stamp(&entry.uid),
                    holders: held_keys(&plan).map(|k| snap.holder_stamp(k)).collect(),
                    plan: Arc::clone(&plan),
                    compacted: false,
                };
                self.routes
                    .push((key.unwrap_or_else(|| rkey.clone()), made));
            }
            out.push(plan);
        }
        out
    }
}

/// The remembered plan of the route `rkey` (of snapshot entry `entry`), taken from
/// `before` (in route key order) after those of routes before it. The plan made from the
/// very entry is the same route's: found without comparing keys (its `Weak` keeps the
/// entry's allocation, so no other entry has its address).
fn remembered(
    before: &mut std::iter::Peekable<std::vec::IntoIter<(RouteKey, Entry)>>,
    rkey: &RouteKey,
    entry: Option<&Arc<RouteEntry>>,
) -> Option<(RouteKey, Entry)> {
    if let Some(entry) = entry
        && let Some(old) =
            before.next_if(|(_, e)| std::ptr::eq(e.route.as_ptr(), Arc::as_ptr(entry)))
    {
        return Some(old);
    }
    loop {
        match before.peek().map(|(k, _)| k.cmp(rkey)) {
            Some(Ordering::Less) => {
                before.next();
            }
            Some(Ordering::Equal) => return before.next(),
            Some(Ordering::Greater) | None => return None,
        }
    }
}

/// The objects a route plan (without conflicts) rendered that did not exist when it was
/// made: whoever creates one decides whether the plan may write it. (One that existed was
/// the route's own live child, whose stamp the memo compares anyway.)
fn held_keys(plan: &RoutePlan) -> impl Iterator<Item = &crate::snapshot::ObjectKey> {
    plan.children
        .iter()
        .zip(&plan.live_children)
        .filter(|(_, live)| live.is_none())
        .map(|(c, _)| &c.key)
}

impl Entry {
    /// Keeps the objects of a plan found applied as their text ([`ChildObject`]), and lets
    /// the snapshot's kept parses of its live children go (it holds their text): while it
    /// is reused, no pass reads them (its applies are skipped). Only once the memo alone
    /// holds the plan: the pass that applied it is over.
    ///
    /// [`ChildObject`]: super::set::ChildObject
    fn compact(&mut self, snap: &Snapshot, gateway_uid: &str) {
        // Once per plan: every pass reuses thousands of them.
        if self.compacted || !self.plan.applied.get() {
            return;
        }
        let Some(plan) = Arc::get_mut(&mut self.plan) else {
            return;
        };
        for c in &mut plan.children {
            c.object.compact();
        }
        snap.forget_parsed_under(&plan.uid, gateway_uid);
        self.compacted = true;
    }

    fn still_holds(
        &self,
        snap: &Snapshot,
        gw: &GatewayPlan,
        route: &Arc<RouteEntry>,
        context: &Arc<RouteContext>,
        accepted: bool,
        children_same: bool,
    ) -> bool {
        std::ptr::eq(self.route.as_ptr(), Arc::as_ptr(route))
            && gw
                .blueprint
                .as_ref()
                .is_some_and(|b| std::ptr::eq(self.blueprint.as_ptr(), Arc::as_ptr(b)))
            && Arc::ptr_eq(&self.context, context)
            && self.accepted == accepted
            // The route's stamp covers its children under every Gateway: one that moved
            // while the Gateway's did not only makes the plan again, later.
            && (children_same || snap.children_stamp(&route.uid) == self.live)
            && held_keys(&self.plan)
                .map(|k| snap.holder_stamp(k))
                .eq(self.holders.iter().copied())
    }
}
