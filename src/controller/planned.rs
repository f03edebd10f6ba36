//! A Gateway read from the snapshot and planned, under the snapshot lock and with no I/O:
//! its plan and what the executor needs beside it (the live children the route plans
//! read, the child kinds it uses, the template of each child to prune), or, deleting
//! with our finalizer and no longer ours, what its teardown needs.

use std::collections::BTreeSet;

use gateway_api::apis::standard::gateways::Gateway;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;

use crate::plan::Plan;
use crate::plan::gateway::OutOfScope;
use crate::render::labels;
use crate::render::labels::GATEWAY_FINALIZER;
use crate::snapshot::{Key, Live, Snapshot};

use crate::kinds::KindKey;

/// What reading the snapshot gave for one Gateway.
pub(super) enum Read {
    /// Ours: planned.
    Planned(Box<Planned>),
    /// Deleting, holding our finalizer, its class gone or no longer ours: torn down all
    /// the same (without the blueprint's order), never left hanging.
    Orphaned(Box<Gateway>, BTreeSet<KindKey>),
    /// Not ours, or gone.
    Nothing,
}

/// A Gateway of ours, planned, with what the executor needs from the snapshot.
pub(crate) struct Planned {
    pub(crate) plan: Plan,
    pub(super) gateway: Gateway,
    /// The live object of each child of [`Plan::children`], in the same order: a route
    /// child's parsed only if this pass reads it.
    pub(crate) live: Vec<Option<Live>>,
    /// The child kinds the Gateway uses: what it renders, and what it still owns (to
    /// prune or tear down).
    pub(super) kinds: BTreeSet<KindKey>,
    /// The template of each child in the Gateway's prune list.
    pub(super) prune_templates: Vec<String>,
}

/// Reads what planning needs and plans, under the snapshot lock; no I/O.
pub(super) fn read_and_plan(snap: &Snapshot, key: &Key, memo: &mut crate::plan::PlanMemo) -> Read {
    match crate::plan::plan_with(snap, key, memo) {
        Ok(plan) => {
            let Some(gateway) = snap.gateway(key).map(|g| g.typed.clone()) else {
                return Read::Nothing;
            };
            // The live objects the plans read (a reused plan's are still current).
            let live: Vec<Option<Live>> = plan
                .gateway
                .live_children
                .iter()
                .map(|l| l.clone().map(Live::parsed))
                .chain(
                    plan.routes
                        .iter()
                        .flat_map(|r| r.live_children.iter().map(|l| l.clone().map(Live::text))),
                )
                .collect();
            let g = &plan.gateway;
            let mut kinds: BTreeSet<KindKey> = plan.child_kinds();
            if let Some(uid) = gateway.metadata.uid.as_deref() {
                kinds.extend(snap.child_kinds_by_gateway(uid));
            }
            // The prune list is dependents first; one template's children go at a time.
            let prune_templates = g
                .prune
                .iter()
                .map(|k| {
                    snap.child(k)
                        .and_then(|c| labels::template(&c).map(str::to_owned))
                        .unwrap_or_default()
                })
                .collect();
            Read::Planned(Box::new(Planned {
                plan,
                gateway,
                live,
                kinds,
                prune_templates,
            }))
        }
        Err(OutOfScope::NoGateway) => Read::Nothing,
        Err(OutOfScope::NoClass(_) | OutOfScope::NotOurs) => snap
            .gateway(key)
            .map(|g| &g.typed)
            .filter(|g| {
                g.metadata.deletion_timestamp.is_some()
                    && g.finalizers().iter().any(|f| f == GATEWAY_FINALIZER)
            })
            .map_or(Read::Nothing, |g| {
                let uid = g.metadata.uid.as_deref().unwrap_or_default();
                let kinds = snap.child_kinds_by_gateway(uid).collect();
                Read::Orphaned(Box::new(g.clone()), kinds)
            }),
    }
}

/// What narrowing and draining ask of plan `p`, against the live children of `snap`.
pub(super) fn narrowing_of(p: &Planned, snap: &Snapshot) -> crate::plan::narrowing::Narrowing {
    crate::plan::narrowing::narrowing(&p.plan, &p.live, &|k| snap.child(k), Timestamp::now())
}
