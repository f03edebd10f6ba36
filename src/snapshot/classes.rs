//! GatewayClasses, blueprints (compiled once per change), their revisions, and the
//! policies (GatewayClassConfigs, GatewayConfigs): put, removed and read.

use std::sync::Arc;

use gateway_api::apis::standard::gatewayclasses::GatewayClass;

use super::{BlueprintEntry, Key, PreviousEntry, RevisionEntry, Snapshot, key_of};
use crate::api::{GatewayClassBlueprint, GatewayClassConfig, GatewayConfig};
use crate::render::prepared::Prepared;

impl Snapshot {
    /// Inserts or replaces a GatewayClass.
    pub fn put_class(&mut self, c: GatewayClass) {
        self.classes
            .insert(c.metadata.name.clone().unwrap_or_default(), Arc::new(c));
    }
    /// Removes a GatewayClass.
    pub fn remove_class(&mut self, name: &str) {
        self.classes.remove(name);
    }
    /// Inserts or replaces a blueprint, compiling it.
    pub fn put_blueprint(&mut self, b: GatewayClassBlueprint) {
        let name = b.metadata.name.clone().unwrap_or_default();
        // A status write changes no template: what compiled is kept (and the memos that
        // know it by identity stay good).
        let held = self.blueprints.get(&name);
        let (prepared, hash) = match held {
            Some(held) if held.object.spec == b.spec => (held.prepared.clone(), held.hash.clone()),
            _ => (
                Prepared::new(&name, &b.spec).map(Arc::new),
                b.spec.revision_hash(),
            ),
        };
        let previous = crate::api::PreviousRelease::of(&b.metadata).map(|read| {
            let p = read?;
            if let Some(Some(Ok(same))) = held.map(|h| &h.previous)
                && same.release == p.release
                && same.spec == p.spec
            {
                return Ok(same.clone());
            }
            let mut spec = p.spec;
            spec.rollout_policy = None;
            Ok(Arc::new(PreviousEntry {
                release: p.release,
                hash: spec.revision_hash(),
                prepared: Prepared::new(&name, &spec).map(Arc::new),
                spec,
            }))
        });
        self.blueprints.insert(
            name,
            Arc::new(BlueprintEntry {
                object: b,
                prepared,
                hash,
                previous,
            }),
        );
    }
    /// Removes a blueprint.
    pub fn remove_blueprint(&mut self, name: &str) {
        self.blueprints.remove(name);
    }
    /// Inserts or replaces a blueprint revision, compiling its template (unless the same
    /// revision, unchanged, is held: a revision never changes).
    pub fn put_revision(&mut self, r: crate::api::GatewayClassBlueprintRevision) {
        let name = r.metadata.name.clone().unwrap_or_default();
        if let Some(held) = self.revisions.get(&name)
            && held.object.spec.hash == r.spec.hash
            && held.object.metadata.uid == r.metadata.uid
        {
            return;
        }
        let prepared = Prepared::new(&r.spec.blueprint, &r.spec.template).map(Arc::new);
        self.revisions.insert(
            name,
            Arc::new(RevisionEntry {
                object: r,
                prepared,
            }),
        );
    }
    /// Removes a blueprint revision.
    pub fn remove_revision(&mut self, name: &str) {
        self.revisions.remove(name);
    }
    /// Inserts or replaces a GatewayClassConfig.
    pub fn put_class_config(&mut self, c: GatewayClassConfig) {
        self.class_configs.insert(key_of(&c.metadata), Arc::new(c));
    }
    /// Removes a GatewayClassConfig.
    pub fn remove_class_config(&mut self, key: &Key) {
        self.class_configs.remove(key);
    }
    /// Inserts or replaces a GatewayConfig.
    pub fn put_gateway_config(&mut self, c: GatewayConfig) {
        self.gateway_configs
            .insert(key_of(&c.metadata), Arc::new(c));
    }
    /// Removes a GatewayConfig.
    pub fn remove_gateway_config(&mut self, key: &Key) {
        self.gateway_configs.remove(key);
    }
    // ---- readers -------------------------------------------------------------

    /// A GatewayClass by name.
    #[must_use]
    pub fn class(&self, name: &str) -> Option<&Arc<GatewayClass>> {
        self.classes.get(name)
    }
    /// Whether GatewayClass `name` exists and names our controller.
    #[must_use]
    pub fn class_is_ours(&self, name: &str) -> bool {
        self.class(name)
            .is_some_and(|c| c.spec.controller_name == crate::gateway::CONTROLLER_NAME)
    }
    /// Whether Gateway `key` exists and its class names our controller.
    #[must_use]
    pub fn gateway_is_ours(&self, key: &Key) -> bool {
        self.gateway(key)
            .is_some_and(|g| self.class_is_ours(&g.typed.spec.gateway_class_name))
    }
    /// Every GatewayClass.
    pub fn classes(&self) -> impl Iterator<Item = &Arc<GatewayClass>> {
        self.classes.values()
    }
    /// A blueprint by name.
    #[must_use]
    pub fn blueprint(&self, name: &str) -> Option<&Arc<BlueprintEntry>> {
        self.blueprints.get(name)
    }
    /// Every blueprint.
    pub fn blueprints(&self) -> impl Iterator<Item = &Arc<BlueprintEntry>> {
        self.blueprints.values()
    }
    /// A blueprint revision by name.
    #[must_use]
    pub fn revision(&self, name: &str) -> Option<&Arc<RevisionEntry>> {
        self.revisions.get(name)
    }
    /// The revisions of blueprint `blueprint`, oldest first.
    #[must_use]
    pub fn revisions_of(&self, blueprint: &str) -> Vec<&Arc<RevisionEntry>> {
        let mut out: Vec<&Arc<RevisionEntry>> = self
            .revisions
            .values()
            .filter(|r| r.object.spec.blueprint == blueprint)
            .collect();
        out.sort_by_key(|r| r.object.spec.revision);
        out
    }
    /// Every GatewayClassConfig, by key.
    pub fn all_class_configs(&self) -> impl Iterator<Item = (&Key, &Arc<GatewayClassConfig>)> {
        self.class_configs.iter()
    }
    /// Every GatewayConfig, by key.
    pub fn all_gateway_configs(&self) -> impl Iterator<Item = (&Key, &Arc<GatewayConfig>)> {
        self.gateway_configs.iter()
    }
    /// GatewayClassConfigs of a namespace.
    pub fn class_configs_in<'a>(
        &'a self,
        ns: &'a str,
    ) -> impl Iterator<Item = &'a Arc<GatewayClassConfig>> + 'a {
        self.class_configs
            .range(Key::new(ns, String::new())..)
            .take_while(move |(k, _)| k.namespace == ns)
            .map(|(_, v)| v)
    }
    /// GatewayConfigs of a namespace.
    pub fn gateway_configs_in<'a>(
        &'a self,
        ns: &'a str,
    ) -> impl Iterator<Item = &'a Arc<GatewayConfig>> + 'a {
        self.gateway_configs
            .range(Key::new(ns, String::new())..)
            .take_while(move |(k, _)| k.namespace == ns)
            .map(|(_, v)| v)
    }
    /// A GatewayClassConfig by key.
    #[must_use]
    pub fn class_config(&self, key: &Key) -> Option<&Arc<GatewayClassConfig>> {
        self.class_configs.get(key)
    }
    /// A GatewayConfig by key.
    #[must_use]
    pub fn gateway_config(&self, key: &Key) -> Option<&Arc<GatewayConfig>> {
        self.gateway_configs.get(key)
    }
}
