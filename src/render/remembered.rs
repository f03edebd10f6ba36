//! What route templates rendered, remembered by their inputs as the JSON of the objects
//! (see
//! [`Prepared::remembered_render`](super::prepared::Prepared::remembered_render)).
//!
//! A route template whose text depends only on the route and on the Gateway's part of
//! the context route templates read is rendered once per distinct value of those: every
//! shipped class's route copy. Which templates qualify is decided once per blueprint
//! version from what their text reads.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};

use crate::api::GatewayClassBlueprintSpec;
use crate::render::{Compiled, TemplateSet};

/// Renders remembered per blueprint; a route copy's objects are about half a kilobyte of
/// JSON.
const ENTRIES: usize = 4096;

/// Context variables (and the one function) whose value a route template's text may
/// depend on beyond the route and the Gateway's part of the context: a template reading
/// one is rendered every time.
const NOT_KEYED_READS: &[&str] = &["resources", "pending", "routes", "cluster", "debug"];

/// The route templates whose text is a function of the route and of the Gateway's part
/// of the context (`route_reads`): they read no `resources`, `pending`, `routes` or
/// `cluster` (nor `debug()`, which prints all of the context), are not placed and have
/// no `rollout`; none when what route templates read cannot be told (one includes
/// another template).
pub(super) fn keyed_route_templates(
    compiled: &Compiled,
    spec: &GatewayClassBlueprintSpec,
    route_reads: Option<&BTreeSet<String>>,
) -> BTreeSet<String> {
    if route_reads.is_none() {
        return BTreeSet::new();
    }
    spec.route_templates
        .iter()
        .filter(|t| t.placement.is_none() && t.rollout.is_none())
        .filter(|t| {
            compiled
                .reads(TemplateSet::Route, &t.name, &t.template)
                .iter()
                .all(|p| !NOT_KEYED_READS.contains(&p.split('.').next().unwrap_or_default()))
        })
        .map(|t| t.name.clone())
        .collect()
}

/// The objects' JSON, by the hash of their inputs, and the hasher of those hashes (random per
/// blueprint version, so that no route can be written to collide with another's key).
#[derive(Debug, Default)]
pub(super) struct Renders {
    texts: Mutex<HashMap<u64, Arc<str>>>,
    hasher: std::hash::RandomState,
}

impl Renders {
    /// A hash of `parts`.
    pub(super) fn key(&self, parts: impl std::hash::Hash) -> u64 {
        use std::hash::BuildHasher;
        self.hasher.hash_one(parts)
    }

    /// A hasher of the same kind, to hash values part by part.
    pub(super) fn hasher(&self) -> std::hash::DefaultHasher {
        use std::hash::BuildHasher;
        self.hasher.build_hasher()
    }

    /// The text remembered for `key`.
    pub(super) fn get(&self, key: u64) -> Option<Arc<str>> {
        self.texts.lock().ok()?.get(&key).cloned()
    }

    /// Remembers `text` for `key` (forgetting all when full).
    pub(super) fn put(&self, key: u64, text: Arc<str>) {
        if let Ok(mut t) = self.texts.lock() {
            if t.len() >= ENTRIES {
                t.clear();
            }
            t.insert(key, text);
        }
    }
}
