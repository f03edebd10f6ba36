//! Gateways, routes and ListenerSets, with the reverse indexes that find a Gateway's
//! routes, the Gateway of a UID, the Gateways naming a Secret and the routes naming a
//! Service or a ListenerSet.

use std::collections::BTreeMap;
use std::sync::Arc;

use gateway_api::apis::standard::gateways::Gateway;
use serde_json::Value;

use super::{
    GatewayEntry, Key, ListenerSetEntry, RouteEntry, RouteKey, Snapshot, key_of, remove_from,
    remove_route_from, secrets_named_by, services_of, uid_of,
};
use crate::gateway::routes::RouteView;

impl Snapshot {
    /// Inserts or replaces a Gateway; `true` when the snapshot did not hold it.
    pub fn put_gateway(&mut self, g: Gateway) -> bool {
        let json = serde_json::to_value(&g).unwrap_or(Value::Null);
        let uid = uid_of(&json, "Gateway");
        let text = serde_json::to_string(&json)
            .unwrap_or_default()
            .into_boxed_str();
        let key = key_of(&g.metadata);
        self.unindex_gateway(&key);
        self.gateways_by_uid.insert(uid.clone(), key.clone());
        for secret in secrets_named_by(&g) {
            self.gateways_by_secret
                .entry(secret)
                .or_default()
                .insert(key.clone());
        }
        self.gateways
            .insert(
                key,
                Arc::new(GatewayEntry {
                    typed: g,
                    text,
                    uid,
                }),
            )
            .is_none()
    }
    /// The Gateway whose UID is `uid`.
    #[must_use]
    pub fn gateway_by_uid(&self, uid: &str) -> Option<&Key> {
        self.gateways_by_uid.get(uid)
    }
    /// Removes a Gateway.
    pub fn remove_gateway(&mut self, key: &Key) {
        self.unindex_gateway(key);
        self.gateways.remove(key);
    }
    fn unindex_gateway(&mut self, key: &Key) {
        if let Some(old) = self.gateways.get(key) {
            self.gateways_by_uid.remove(&old.uid);
            for secret in secrets_named_by(&old.typed) {
                remove_from(&mut self.gateways_by_secret, &secret, key);
            }
        }
    }
    /// Inserts or replaces a route of a kind we implement, as the API server sent it (its
    /// `kind` says which, [`crate::gateway::route_kinds`]). Returns `false`, storing
    /// nothing, for any other kind.
    pub fn put_route_json(&mut self, json: Value) -> bool {
        let Some(row) = json["kind"]
            .as_str()
            .and_then(crate::gateway::route_kinds::by_kind)
        else {
            return false;
        };
        let view = row.view(&json);
        self.put_route(view, json, true);
        true
    }
    fn put_route(&mut self, view: RouteView, json: Value, status_exact: bool) {
        let key: RouteKey = RouteKey::new(
            view.kind.kind.clone(),
            view.namespace.clone(),
            view.name.clone(),
        );
        self.remove_route(&key);
        let uid = uid_of(&json, &key.kind);
        let text = serde_json::to_string(&json).unwrap_or_default().into();
        let entry = Arc::new(RouteEntry {
            api_version: json["apiVersion"].as_str().map(Box::from),
            view,
            text,
            uid,
            status_exact,
        });
        for p in &entry.view.parent_refs {
            let index = if p.group == crate::gateway::GATEWAY_API_GROUP && p.kind == "Gateway" {
                &mut self.routes_by_gateway
            } else if p.listener_set().is_some() {
                &mut self.routes_by_listener_set
            } else {
                continue;
            };
            index
                .entry(Key::new(p.namespace.clone(), p.name.clone()))
                .or_default()
                .insert(key.clone(), Arc::clone(&entry));
        }
        for service in services_of(&entry.view) {
            self.routes_by_service
                .entry(service)
                .or_default()
                .insert(key.clone());
        }
        self.routes.insert(key, entry);
    }
    /// Inserts or replaces a ListenerSet.
    pub fn put_listener_set(&mut self, json: Value) {
        let view = crate::gateway::listenersets::ListenerSetView::from_json(&json);
        let key = Key::new(view.namespace.clone(), view.name.clone());
        self.remove_listener_set(&key);
        if let Some((ns, name)) = &view.parent {
            self.listener_sets_by_gateway
                .entry(Key::new(ns.clone(), name.clone()))
                .or_default()
                .insert(key.clone());
        }
        self.listener_sets
            .insert(key, Arc::new(ListenerSetEntry { view, json }));
    }
    /// Removes a ListenerSet.
    pub fn remove_listener_set(&mut self, key: &Key) {
        if let Some(old) = self.listener_sets.remove(key)
            && let Some((ns, name)) = &old.view.parent
        {
            remove_from(
                &mut self.listener_sets_by_gateway,
                &Key::new(ns.clone(), name.clone()),
                key,
            );
        }
    }
    /// A ListenerSet by key.
    #[must_use]
    pub fn listener_set(&self, key: &Key) -> Option<&Arc<ListenerSetEntry>> {
        self.listener_sets.get(key)
    }
    /// The ListenerSets naming Gateway `gw` as parent, in key order.
    pub fn listener_sets_of<'a>(
        &'a self,
        gw: &Key,
    ) -> impl Iterator<Item = &'a Arc<ListenerSetEntry>> + 'a {
        self.listener_sets_by_gateway
            .get(gw)
            .into_iter()
            .flatten()
            .filter_map(|k| self.listener_sets.get(k))
    }
    /// The parent Gateway of the ListenerSet `key`, when the set is known and names one.
    #[must_use]
    pub fn listener_set_parent(&self, key: &Key) -> Option<Key> {
        self.listener_sets
            .get(key)
            .and_then(|s| s.view.parent.clone())
            .map(|(ns, name)| Key::new(ns, name))
    }
    /// The Gateway a route's parentRef leads to: the Gateway it names, or the parent of the
    /// ListenerSet it names (when that set is known).
    #[must_use]
    pub fn gateway_of_parent(&self, p: &crate::gateway::routes::ParentRef) -> Option<Key> {
        if p.group != crate::gateway::GATEWAY_API_GROUP {
            return None;
        }
        match p.kind.as_str() {
            "Gateway" => Some(Key::new(p.namespace.clone(), p.name.clone())),
            crate::gateway::listenersets::KIND => self
                .listener_sets
                .get(&Key::new(p.namespace.clone(), p.name.clone()))
                .and_then(|s| s.view.parent.clone())
                .map(|(ns, name)| Key::new(ns, name)),
            _ => None,
        }
    }
    /// Removes a route.
    pub fn remove_route(&mut self, key: &RouteKey) {
        if let Some(old) = self.routes.remove(key) {
            for p in &old.view.parent_refs {
                let k = Key::new(p.namespace.clone(), p.name.clone());
                if p.listener_set().is_some() {
                    remove_route_from(&mut self.routes_by_listener_set, &k, key);
                } else {
                    remove_route_from(&mut self.routes_by_gateway, &k, key);
                }
            }
            for service in services_of(&old.view) {
                remove_from(&mut self.routes_by_service, &service, key);
            }
        }
    }
    /// A Gateway by key.
    #[must_use]
    pub fn gateway(&self, key: &Key) -> Option<&Arc<GatewayEntry>> {
        self.gateways.get(key)
    }
    /// Every Gateway in (namespace, name) order.
    pub fn gateways(&self) -> impl Iterator<Item = (&Key, &Arc<GatewayEntry>)> {
        self.gateways.iter()
    }
    /// A route by key.
    #[must_use]
    pub fn route(&self, key: &RouteKey) -> Option<&Arc<RouteEntry>> {
        self.routes.get(key)
    }
    /// Every route.
    pub fn routes(&self) -> impl Iterator<Item = (&RouteKey, &Arc<RouteEntry>)> {
        self.routes.iter()
    }
    /// The Gateways whose listeners name the Secret `key` (a reverse index, not a scan).
    #[must_use]
    pub fn gateways_naming_secret(&self, key: &Key) -> Vec<Key> {
        self.gateways_by_secret
            .get(key)
            .map(|s| s.iter().cloned().collect())
            .unwrap_or_default()
    }
    /// The routes whose backendRefs name the Service `key` (a reverse index, not a scan).
    #[must_use]
    pub fn routes_naming_service(&self, key: &Key) -> Vec<RouteKey> {
        self.routes_by_service
            .get(key)
            .map(|s| s.iter().cloned().collect())
            .unwrap_or_default()
    }
    /// Routes with a parentRef naming the ListenerSet `key`.
    #[must_use]
    pub fn routes_naming_listener_set(&self, key: &Key) -> Vec<RouteKey> {
        self.routes_by_listener_set
            .get(key)
            .map(|s| s.keys().cloned().collect())
            .unwrap_or_default()
    }
    /// Routes with a parentRef naming this Gateway or one of the ListenerSets naming it as
    /// parent, in (kind, namespace, name) order, each once.
    pub fn routes_referencing<'a>(
        &'a self,
        gw: &Key,
    ) -> Box<dyn Iterator<Item = (&'a RouteKey, &'a Arc<RouteEntry>)> + 'a> {
        let direct = self.routes_by_gateway.get(gw).into_iter().flatten();
        let Some(sets) = self.listener_sets_by_gateway.get(gw) else {
            // No ListenerSet names the Gateway: its own index, already in order.
            return Box::new(direct);
        };
        let mut routes: BTreeMap<&'a RouteKey, &'a Arc<RouteEntry>> = direct.collect();
        for set in sets {
            routes.extend(self.routes_by_listener_set.get(set).into_iter().flatten());
        }
        Box::new(routes.into_iter())
    }
}
