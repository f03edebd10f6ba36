//! The child kinds in use and their watches, as data: what is known of each kind
//! (discovery pending, served, missing), whether its watch has listed, which Gateways use
//! it. One per [`Cluster`](super::cluster::Cluster); the registrar (`registrar.rs`) starts
//! and stops the watches and re-plans the users this says to.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::Ordering;

use kube::api::ApiResource;

use crate::snapshot::Key;

/// What we know of a child kind.
#[derive(Clone, Debug)]
pub enum KindState {
    /// Discovery is running.
    Pending,
    /// Served; watched.
    Served {
        /// How to reach it.
        resource: ApiResource,
        /// Whether it is namespaced.
        namespaced: bool,
    },
    /// Not served; why.
    Missing(String),
}

pub use crate::kinds::KindKey;

struct Watched {
    state: KindState,
    /// Whether its watch has listed every object once (the snapshot holds them).
    listed: bool,
    /// Why its watch cannot list yet when that will not pass without a change elsewhere
    /// (RBAC: the kind is served, but we may not list it). Reported as missing meanwhile.
    blocked: Option<String>,
    /// Stops the kind's discovery and watch task.
    task: Option<tokio::task::AbortHandle>,
}

impl Watched {
    /// What users see: a served kind is pending until its watch has listed.
    fn visible(&self) -> KindState {
        match &self.state {
            KindState::Served { .. } if !self.listed => match &self.blocked {
                Some(why) => KindState::Missing(why.clone()),
                None => KindState::Pending,
            },
            s => s.clone(),
        }
    }
}

/// Child kinds in use and their watches: one watch per kind, shared by every Gateway
/// that renders or still owns children of it, and stopped when the last one lets go.
#[derive(Default)]
pub struct ChildKinds {
    kinds: Mutex<BTreeMap<KindKey, Watched>>,
    /// The kinds each Gateway uses: what its plan renders plus what it still owns.
    users: Mutex<BTreeMap<Key, std::collections::BTreeSet<KindKey>>>,
    /// How many times a kind's watch finished its first listing: a plan that read the
    /// snapshot while this changed may have seen a kind half-listed.
    listings: std::sync::atomic::AtomicU64,
}

impl ChildKinds {
    /// The state of a kind; the first time it is named, `start` starts its discovery and
    /// watch. A served kind is [`KindState::Pending`] until its watch has listed it: a plan
    /// made before would see none of its children and re-create or report them.
    pub fn ensure(
        &self,
        api_version: &str,
        kind: &str,
        start: impl FnOnce(KindKey) -> tokio::task::AbortHandle,
    ) -> KindState {
        if api_version.is_empty() || kind.is_empty() {
            return KindState::Missing(format!(
                "an object names apiVersion {api_version:?} and kind {kind:?}; both are required"
            ));
        }
        let key = (api_version.to_owned(), kind.to_owned());
        let Ok(mut kinds) = self.kinds.lock() else {
            return KindState::Pending;
        };
        if let Some(w) = kinds.get(&key) {
            return w.visible();
        }
        let task = start(key.clone());
        kinds.insert(
            key,
            Watched {
                state: KindState::Pending,
                listed: false,
                blocked: None,
                task: Some(task),
            },
        );
        KindState::Pending
    }

    /// Records what discovery found; a kind released meanwhile stays released.
    pub fn set(&self, key: &KindKey, state: KindState) {
        if let Ok(mut k) = self.kinds.lock()
            && let Some(w) = k.get_mut(key)
        {
            w.state = state;
        }
    }

    /// Records why the watch of a served kind cannot list it (403: our RBAC does not
    /// cover it). True the first time: its users are to be re-planned, so their status
    /// says so instead of waiting in silence. Cleared when the watch lists.
    pub fn set_blocked(&self, key: &KindKey, why: String) -> bool {
        self.kinds.lock().is_ok_and(|mut k| {
            k.get_mut(key)
                .is_some_and(|w| !w.listed && w.blocked.replace(why).is_none())
        })
    }

    /// Records that the watch of a kind has listed it once. True the first time: its
    /// users are to be re-planned.
    pub fn set_listed(&self, key: &KindKey) -> bool {
        let fresh = self.kinds.lock().is_ok_and(|mut k| {
            k.get_mut(key).is_some_and(|w| {
                w.blocked = None;
                !std::mem::replace(&mut w.listed, true)
            })
        });
        if fresh {
            self.listings.fetch_add(1, Ordering::SeqCst);
        }
        fresh
    }

    /// See the field: read before a plan reads the snapshot, compared after.
    pub fn listings(&self) -> u64 {
        self.listings.load(Ordering::SeqCst)
    }

    /// Forgets a kind the API server stopped serving (its CRD was deleted), so the next
    /// `ensure` discovers it again; its watch stops.
    pub fn forget(&self, api_version: &str, kind: &str) {
        if let Ok(mut k) = self.kinds.lock()
            && let Some(w) = k.remove(&(api_version.to_owned(), kind.to_owned()))
            && let Some(t) = w.task
        {
            t.abort();
        }
    }

    /// Stops every kind's discovery and watch (the cluster is no longer served).
    pub fn stop_all(&self) {
        if let Ok(mut k) = self.kinds.lock() {
            for (_, w) in std::mem::take(&mut *k) {
                if let Some(t) = w.task {
                    t.abort();
                }
            }
        }
    }

    /// The state of a kind without starting anything.
    pub fn get(&self, api_version: &str, kind: &str) -> Option<KindState> {
        self.kinds
            .lock()
            .ok()?
            .get(&(api_version.to_owned(), kind.to_owned()))
            .map(Watched::visible)
    }

    /// Every kind watched or being looked up.
    pub fn watched(&self) -> Vec<KindKey> {
        self.kinds
            .lock()
            .map(|k| k.keys().cloned().collect())
            .unwrap_or_default()
    }

    /// The Gateways that use `kind`.
    pub fn users_of(&self, kind: &KindKey) -> Vec<Key> {
        self.users
            .lock()
            .map(|u| {
                u.iter()
                    .filter(|(_, kinds)| kinds.contains(kind))
                    .map(|(k, _)| k.clone())
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The kinds `gateway` was last registered as using.
    pub fn kinds_of(&self, gateway: &Key) -> std::collections::BTreeSet<KindKey> {
        self.users
            .lock()
            .ok()
            .and_then(|u| u.get(gateway).cloned())
            .unwrap_or_default()
    }

    /// Sets the kinds `gateway` uses (empty: it is gone or no longer ours). A kind no
    /// Gateway uses any more has its watch stopped and is returned, for its objects to be
    /// dropped from the snapshot; naming it again later starts a fresh watch, which lists
    /// it anew.
    pub fn use_kinds(
        &self,
        gateway: &Key,
        kinds: std::collections::BTreeSet<KindKey>,
    ) -> Vec<KindKey> {
        let Ok(mut users) = self.users.lock() else {
            return Vec::new();
        };
        let before = if kinds.is_empty() {
            users.remove(gateway).unwrap_or_default()
        } else {
            users.insert(gateway.clone(), kinds).unwrap_or_default()
        };
        let unused: Vec<KindKey> = before
            .into_iter()
            .filter(|k| !users.values().any(|s| s.contains(k)))
            .collect();
        drop(users);
        let mut stopped = Vec::new();
        for key in unused {
            let removed = self.kinds.lock().ok().and_then(|mut m| m.remove(&key));
            if let Some(w) = removed {
                if let Some(t) = w.task {
                    t.abort();
                }
                stopped.push(key);
            }
        }
        stopped
    }
}
