//! What a Gateway's reconciles keep between runs, as one owned type: what the last one
//! reported (Events only on transitions), when the Gateway was first seen (the new-Gateway
//! settle), when its status was last written (progress gathered), its remembered route
//! plans and route statuses, the versions its make-before-break templates asked for, and
//! its runs and writes (for tests). One lock for all of it; a Gateway that is gone or no
//! longer ours is forgotten at once.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Instant;

use std::collections::{BTreeMap, BTreeSet};

use crate::snapshot::{Key, RouteKey};

/// See the module docs.
#[derive(Debug, Default)]
pub(crate) struct GatewayMemory {
    /// What the last reconcile reported.
    pub(crate) reported: Option<Reported>,
    /// Reconciles run, and write requests the last one sent.
    pub(crate) runs_and_writes: (u64, u64),
    /// When its status was last written (see `settle::PROGRESS_HOLD`).
    pub(crate) status_written_at: Option<Instant>,
    /// The route counts its plans asked for last (see `settle::counts_wait`).
    pub(crate) counts_seen: Option<CountsSeen>,
    /// A blueprint's: a pass to count its Gateways is queued (see
    /// `revisions::on_gateway_reported`).
    pub(crate) count_pass_due: bool,
    /// When the watch first saw it, created while we watched (see `NEW_GATEWAY_SETTLE`);
    /// cleared once it may be planned.
    pub(crate) created_at: Option<Instant>,
    /// Its route plans, for a Gateway with many routes (see [`crate::plan::memo`]).
    pub(crate) plan_memo: Option<crate::plan::PlanMemo>,
    /// Per route: the route's snapshot entry and our entries when a status write found
    /// nothing to change or wrote them.
    pub(crate) route_status_seen: HashMap<RouteKey, RouteStatusSeen>,
    /// The version each make-before-break template (and slot) asked for.
    pub(crate) versions_asked: AskedVersions,
    /// What the last narrowing said the other children wait for (logged once per change,
    /// not on every pass of a drain).
    pub(crate) narrowing_said: String,
}

/// The route counts a Gateway's plans asked for last, and since when (see
/// `settle::counts_wait`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CountsSeen {
    /// `attachedRoutes` per listener, in listener order.
    pub counts: Vec<i32>,
    /// When the plans first asked for these.
    pub since: Instant,
}

/// Every Gateway's [`GatewayMemory`].
#[derive(Debug, Default)]
pub(crate) struct Memory(Mutex<HashMap<Key, GatewayMemory>>);

impl Memory {
    /// Runs `f` on `key`'s memory (made empty when there is none).
    pub(crate) fn with<T>(&self, key: &Key, f: impl FnOnce(&mut GatewayMemory) -> T) -> Option<T> {
        self.0
            .lock()
            .ok()
            .map(|mut m| f(m.entry(key.clone()).or_default()))
    }

    /// Reads `key`'s memory, when there is one.
    pub(crate) fn read<T>(&self, key: &Key, f: impl FnOnce(&GatewayMemory) -> T) -> Option<T> {
        self.0.lock().ok().and_then(|m| m.get(key).map(f))
    }

    /// Forgets `key` (gone, or no longer ours).
    pub(crate) fn forget(&self, key: &Key) {
        if let Ok(mut m) = self.0.lock() {
            m.remove(key);
        }
    }

    /// `f` of every Gateway's memory that gives something.
    pub(crate) fn collect<T>(
        &self,
        mut f: impl FnMut(&Key, &GatewayMemory) -> Option<T>,
    ) -> Vec<T> {
        self.0
            .lock()
            .map(|m| m.iter().filter_map(|(k, g)| f(k, g)).collect())
            .unwrap_or_default()
    }
}

/// See [`memory::GatewayMemory::route_status_seen`].
#[derive(Debug)]
pub(crate) struct RouteStatusSeen {
    pub(crate) route: std::sync::Weak<crate::snapshot::RouteEntry>,
    pub(crate) entries: crate::gateway::Parents,
}

/// What the last reconcile of a Gateway reported, to emit Events only on transitions.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Reported {
    pub(crate) programmed: String,
    pub(crate) errors: BTreeSet<String>,
    pub(crate) missing: BTreeSet<String>,
    /// Replacements in progress: `template=to` -> where it stands.
    pub(crate) rollouts: BTreeMap<String, crate::plan::replacement::Progress>,
    /// Children (object keys) whose deletion hangs during a teardown.
    pub(crate) stuck_deletions: BTreeSet<String>,
    /// Members whose placed children a teardown left there (not served).
    pub(crate) left_in: BTreeSet<String>,
    /// Addresses of member clusters left out of what the hub renders (`<member>: <address>`).
    pub(crate) refused_addresses: BTreeSet<String>,
}

/// What counts as already announced for a Gateway this process has not reconciled yet:
/// the status it carries. If its Programmed condition is the one planned now, whoever
/// wrote it announced it and what came with it (a restart announces nothing); otherwise
/// only that condition is known, and the rest is announced.
pub(crate) fn observed_reported(
    gw: &gateway_api::apis::standard::gateways::Gateway,
    now: &Reported,
) -> Reported {
    let observed = gw
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == "Programmed"))
        .map(|c| format!("{}/{}", c.status, c.reason));
    match observed {
        Some(p) if p == now.programmed => now.clone(),
        Some(p) => Reported {
            programmed: p,
            ..Reported::default()
        },
        None => Reported::default(),
    }
}

/// The version a template asked for, since when, and whether it replaced another.
#[derive(Debug)]
pub(crate) struct Asked {
    pub(crate) version: String,
    pub(crate) since: Instant,
    pub(crate) changed: bool,
}

/// The versions a Gateway's make-before-break objects asked for, by (template, slot).
pub(crate) type AskedVersions = HashMap<(String, String), Asked>;
