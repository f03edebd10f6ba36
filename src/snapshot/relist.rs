//! After a watch relisted every object of a kind: what the list no longer had (objects
//! deleted while the watch was down) is dropped.

use std::collections::{BTreeMap, BTreeSet};

use super::{Key, RouteKey, SECRET_METADATA, Snapshot};

impl Snapshot {
    /// After a watch relisted every object of `kind`, drops what the list no longer had
    /// (objects deleted while the watch was down). `seen` holds (namespace, name) pairs.
    /// Returns how many entries were dropped.
    pub fn retain_listed(&mut self, kind: &str, api_version: &str, seen: &BTreeSet<Key>) -> usize {
        let keep = |k: &Key| seen.contains(k);
        let before = self.len_of(kind, api_version);
        match kind {
            "GatewayClass" => self
                .classes
                .retain(|n, _| keep(&Key::new(String::new(), n.clone()))),
            "GatewayClassBlueprint" => self
                .blueprints
                .retain(|n, _| keep(&Key::new(String::new(), n.clone()))),
            crate::api::REVISION_KIND => self
                .revisions
                .retain(|n, _| keep(&Key::new(String::new(), n.clone()))),
            "GatewayClassConfig" => self.class_configs.retain(|k, _| keep(k)),
            "GatewayConfig" => self.gateway_configs.retain(|k, _| keep(k)),
            "Gateway" if api_version.is_empty() => self.gateways.retain(|k, _| keep(k)),
            k if api_version.is_empty() && crate::gateway::route_kinds::by_kind(k).is_some() => {
                let gone: Vec<RouteKey> = self
                    .routes
                    .keys()
                    .filter(|k| k.kind == kind && !keep(&k.key()))
                    .cloned()
                    .collect();
                for k in &gone {
                    self.remove_route(k);
                }
            }
            crate::gateway::listenersets::KIND if api_version.is_empty() => {
                let gone: Vec<Key> = self
                    .listener_sets
                    .keys()
                    .filter(|k| !keep(k))
                    .cloned()
                    .collect();
                for k in &gone {
                    self.remove_listener_set(k);
                }
            }
            "Namespace" => self
                .namespaces
                .retain(|n, _| keep(&Key::new(String::new(), n.clone()))),
            "ReferenceGrant" => {
                for (ns, m) in &mut self.grants {
                    m.retain(|n, _| seen.contains(&Key::new(ns.clone(), n.clone())));
                }
            }
            "Secret" => self.secrets.retain(|k, _| keep(k)),
            SECRET_METADATA => self.other_secrets.retain(|k, _| keep(k)),
            "Service" => {
                if let Some(s) = &mut self.services {
                    s.retain(|k| keep(k));
                }
            }
            _ => {
                self.retain_children(kind, api_version, None, seen);
            }
        }
        before.saturating_sub(self.len_of(kind, api_version))
    }

    fn len_of(&self, kind: &str, api_version: &str) -> usize {
        match kind {
            "GatewayClass" => self.classes.len(),
            "GatewayClassBlueprint" => self.blueprints.len(),
            crate::api::REVISION_KIND => self.revisions.len(),
            "GatewayClassConfig" => self.class_configs.len(),
            "GatewayConfig" => self.gateway_configs.len(),
            "Gateway" if api_version.is_empty() => self.gateways.len(),
            k if api_version.is_empty() && crate::gateway::route_kinds::by_kind(k).is_some() => {
                self.routes.keys().filter(|r| r.kind == k).count()
            }
            crate::gateway::listenersets::KIND if api_version.is_empty() => {
                self.listener_sets.len()
            }
            "Namespace" => self.namespaces.len(),
            "ReferenceGrant" => self.grants.values().map(BTreeMap::len).sum(),
            "Secret" => self.secrets.len(),
            SECRET_METADATA => self.other_secrets.len(),
            "Service" => self.services.as_ref().map_or(0, BTreeSet::len),
            _ => self
                .children
                .keys()
                .filter(|k| k.kind == kind && k.api_version == api_version)
                .count(),
        }
    }
}
