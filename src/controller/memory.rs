//! What a Gateway's reconciles keep between runs, as one owned type: what the last one
//! reported (Events only on transitions), when the Gateway was first seen (the new-Gateway
//! settle), when its status was last written (progress gathered), its remembered route
//! plans and route statuses, the versions its make-before-break templates asked for, and
//! its runs and writes (for tests). One lock for all of it; a Gateway that is gone or no
//! longer ours is forgotten at once.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Instant;

use super::{Reported, RouteStatusSeen};
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
    /// When the watch first saw it, created while we watched (see `NEW_GATEWAY_SETTLE`);
    /// cleared once it may be planned.
    pub(crate) created_at: Option<Instant>,
    /// Its route plans, for a Gateway with many routes (see [`crate::plan::memo`]).
    pub(crate) plan_memo: Option<crate::plan::PlanMemo>,
    /// Per route: the route's snapshot entry and our entries when a status write found
    /// nothing to change or wrote them.
    pub(crate) route_status_seen: HashMap<RouteKey, RouteStatusSeen>,
    /// The version each make-before-break template (and slot) asked for.
    pub(crate) versions_asked: super::settle::AskedVersions,
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
