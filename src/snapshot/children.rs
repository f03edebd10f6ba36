//! The live children that carry our labels (kept as text, indexed by parent and by
//! Gateway), what is known of their kinds (scopes, the names taken), and the objects
//! `render` found several parents rendering (claims).

use std::collections::BTreeSet;
use std::sync::Arc;

use serde_json::Value;

use super::entries::{ChildEntry, next_stamp};
use super::{Key, LiveText, ObjectKey, RouteKey, Snapshot, names};

impl Snapshot {
    /// Records a kind's scope (from discovery or a CRD); whether it changed what was known.
    pub fn learn_scope(
        &mut self,
        group: &str,
        kind: &str,
        scope: crate::render::scope::Scope,
    ) -> bool {
        let changed = self.scopes.learn(group, kind, scope);
        if changed {
            self.scopes_stamp = next_stamp();
        }
        changed
    }

    /// Forgets a kind's learned scope (its CRD went away).
    pub fn forget_scope(&mut self, group: &str, kind: &str) {
        self.scopes.forget(group, kind);
        self.scopes_stamp = next_stamp();
    }

    /// A number that changes whenever what is known of kinds' scopes does.
    #[must_use]
    pub fn scopes_stamp(&self) -> u64 {
        self.scopes_stamp
    }

    /// What is known of kinds' scopes.
    #[must_use]
    pub fn scopes(&self) -> &crate::render::scope::KindScopes {
        &self.scopes
    }
    /// Inserts or replaces a live child (an object carrying our parent-uid label).
    pub fn put_child(&mut self, obj: Value) {
        let key = ObjectKey::of(&obj);
        self.remove_child(&key);
        let entry = ChildEntry::new(&obj);
        if let Some(uid) = &entry.parent_uid {
            self.children_stamps.insert(uid.clone(), entry.stamp);
            self.children_by_parent
                .entry(uid.clone())
                .or_default()
                .insert(key.clone());
        }
        if let Some(uid) = &entry.gateway_uid {
            let by_gateway = self.children_by_gateway.entry(uid.clone()).or_default();
            by_gateway.stamp = entry.stamp;
            by_gateway
                .children
                .insert(key.clone(), entry.parent_uid.clone());
        }
        self.children.insert(key, entry);
    }
    /// Stores the answer to our own write of a child, unless the cache moved on since the
    /// version the write was based on (`based_on`: its resourceVersion, `None` when the
    /// cache held nothing). A watch event handled while the write was under way is newer
    /// than that write's answer, or as new: replacing it would turn the cache back (a
    /// child's fresh status lost, and with it the event that would have woken its parent).
    /// `quiet`: no plan reads this change back, so its watch echo need wake no one
    /// ([`Snapshot::is_quiet_echo`]).
    /// Returns whether it was stored.
    pub fn put_own_write(&mut self, obj: Value, based_on: Option<&str>, quiet: bool) -> bool {
        let key = ObjectKey::of(&obj);
        let now = self
            .children
            .get(&key)
            .map(|c| c.resource_version.as_deref().unwrap_or_default());
        if now != based_on {
            return false;
        }
        self.put_child(obj);
        if quiet && let Some(c) = self.children.get_mut(&key) {
            c.quiet = true;
        }
        true
    }

    /// Whether a watch event of `obj` is the echo of an own write stored `quiet`: the
    /// snapshot holds that very version (same resourceVersion) from the write's answer.
    #[must_use]
    pub fn is_quiet_echo(&self, obj: &Value) -> bool {
        let Some(rv) = obj["metadata"]["resourceVersion"].as_str() else {
            return false;
        };
        self.children
            .get(&ObjectKey::of(obj))
            .is_some_and(|c| c.quiet && c.resource_version.as_deref() == Some(rv))
    }

    /// Removes a live child.
    pub fn remove_child(&mut self, key: &ObjectKey) {
        if let Some(old) = self.children.remove(key) {
            if let Some(uid) = old.parent_uid.as_deref()
                && let Some(set) = self.children_by_parent.get_mut(uid)
            {
                set.remove(key);
                if set.is_empty() {
                    self.children_by_parent.remove(uid);
                    self.children_stamps.remove(uid);
                } else if let Some(stamp) = self.children_stamps.get_mut(uid) {
                    *stamp = next_stamp();
                }
            }
            if let Some(uid) = old.gateway_uid.as_deref()
                && let Some(set) = self.children_by_gateway.get_mut(uid)
            {
                set.children.remove(key);
                if set.children.is_empty() {
                    self.children_by_gateway.remove(uid);
                } else {
                    set.stamp = next_stamp();
                }
            }
        }
    }

    /// Drops the children of one kind (of one cluster, when given) whose namespace and
    /// name `seen` does not hold; returns how many.
    pub(super) fn retain_children(
        &mut self,
        kind: &str,
        api_version: &str,
        cluster: Option<&str>,
        seen: &BTreeSet<Key>,
    ) -> usize {
        let gone: Vec<ObjectKey> = self
            .children
            .keys()
            .filter(|k| {
                cluster.is_none_or(|c| k.cluster == c)
                    && k.kind == kind
                    && k.api_version == api_version
                    && !seen.contains(&Key::new(k.namespace.clone(), k.name.clone()))
            })
            .cloned()
            .collect();
        for k in &gone {
            self.remove_child(k);
        }
        gone.len()
    }
    /// Live children labelled with this parent uid, parsed.
    pub fn children_of<'a>(&'a self, parent_uid: &str) -> impl Iterator<Item = Arc<Value>> + 'a {
        self.entries_of(parent_uid).map(ChildEntry::object)
    }
    /// [`Snapshot::children_of`], each parsed once per version and kept (see
    /// `ChildEntry`): for a parent whose plans are remembered, which hold them parsed.
    pub fn children_of_kept<'a>(
        &'a self,
        parent_uid: &str,
    ) -> impl Iterator<Item = Arc<Value>> + 'a {
        self.entries_of(parent_uid).map(ChildEntry::object_kept)
    }
    /// The entries of the live children labelled with this parent uid.
    fn entries_of<'a>(&'a self, parent_uid: &str) -> impl Iterator<Item = &'a ChildEntry> + 'a {
        self.children_by_parent
            .get(parent_uid)
            .into_iter()
            .flatten()
            .filter_map(|k| self.children.get(k))
    }
    /// [`Snapshot::entries_of`], of those also labelled with this Gateway uid.
    fn entries_under<'a>(
        &'a self,
        parent_uid: &str,
        gateway_uid: &'a str,
    ) -> impl Iterator<Item = &'a ChildEntry> + 'a {
        self.entries_of(parent_uid)
            .filter(move |c| c.gateway_uid.as_deref() == Some(gateway_uid))
    }
    /// One stamp for every live child of `parent_uid` (0 for none): it changes whenever
    /// one of them is put (a new version) or removed, so equal stamps mean the same
    /// children, and a memo compares one number instead of looking each child up.
    #[must_use]
    pub fn children_stamp(&self, parent_uid: &str) -> u64 {
        self.children_stamps.get(parent_uid).copied().unwrap_or(0)
    }
    /// Live children labelled with this parent uid and this Gateway uid (a route's
    /// children under one of its Gateways), parsed.
    pub fn children_of_under<'a>(
        &'a self,
        parent_uid: &str,
        gateway_uid: &'a str,
    ) -> impl Iterator<Item = Arc<Value>> + 'a {
        self.entries_under(parent_uid, gateway_uid)
            .map(ChildEntry::object)
    }
    /// [`Snapshot::children_of_under`], each beside its text (what a remembered plan
    /// holds of it between passes), parsed once per version and kept when `keep` (see
    /// `ChildEntry`) until [`Snapshot::forget_parsed_under`].
    pub fn children_of_under_texts<'a>(
        &'a self,
        parent_uid: &str,
        gateway_uid: &'a str,
        keep: bool,
    ) -> impl Iterator<Item = (Arc<Value>, LiveText)> + 'a {
        self.entries_under(parent_uid, gateway_uid).map(move |c| {
            let object = if keep { c.object_kept() } else { c.object() };
            (object, c.live_text())
        })
    }
    /// How many of the children labelled with this parent uid and this Gateway uid hold a
    /// kept parse.
    #[cfg(test)]
    pub(crate) fn kept_parses_under(&self, parent_uid: &str, gateway_uid: &str) -> usize {
        self.entries_under(parent_uid, gateway_uid)
            .filter(|c| c.is_kept())
            .count()
    }
    /// Lets go of the kept parses of the children labelled with this parent uid and this
    /// Gateway uid: a remembered plan that holds them as text alone reads them no more.
    pub fn forget_parsed_under(&self, parent_uid: &str, gateway_uid: &str) {
        self.entries_under(parent_uid, gateway_uid)
            .for_each(ChildEntry::forget_parse);
    }
    /// Live children labelled with this Gateway uid (its own and its routes'), parsed.
    pub fn children_by_gateway<'a>(
        &'a self,
        gateway_uid: &str,
    ) -> impl Iterator<Item = Arc<Value>> + 'a {
        self.children_by_gateway
            .get(gateway_uid)
            .into_iter()
            .flat_map(|g| g.children.keys())
            .filter_map(|k| self.children.get(k).map(ChildEntry::object))
    }
    /// The parent uids of the live children labelled with this Gateway uid whose parent is
    /// not the Gateway itself (its routes' children), without parsing them.
    pub fn route_children_by_gateway<'a>(
        &'a self,
        gateway_uid: &'a str,
    ) -> impl Iterator<Item = (&'a ObjectKey, &'a str)> + 'a {
        self.children_by_gateway
            .get(gateway_uid)
            .into_iter()
            .flat_map(|g| &g.children)
            .filter_map(move |(k, p)| {
                let p = p.as_deref().unwrap_or_default();
                (p != gateway_uid).then_some((k, p))
            })
    }
    /// The (apiVersion, kind) of every live child labelled with this Gateway uid.
    pub fn child_kinds_by_gateway<'a>(
        &'a self,
        gateway_uid: &str,
    ) -> impl Iterator<Item = (String, String)> + 'a {
        self.children_by_gateway
            .get(gateway_uid)
            .into_iter()
            .flat_map(|g| g.children.keys())
            .map(|k| (k.api_version.clone(), k.kind.clone()))
    }
    /// One stamp for every live child labelled with this Gateway uid (0 for none), as
    /// [`Snapshot::children_stamp`] is for a parent's: equal stamps, the same children
    /// under the Gateway with the same parents.
    #[must_use]
    pub fn gateway_children_stamp(&self, gateway_uid: &str) -> u64 {
        self.children_by_gateway
            .get(gateway_uid)
            .map_or(0, |g| g.stamp)
    }
    /// A live child by key, parsed.
    #[must_use]
    pub fn child(&self, key: &ObjectKey) -> Option<Arc<Value>> {
        self.children.get(key).map(ChildEntry::object)
    }
    /// Whether a live child of that key exists.
    #[must_use]
    pub fn has_child(&self, key: &ObjectKey) -> bool {
        self.children.contains_key(key)
    }
    /// Whether an object of `key`'s name exists that the cache does not hold as a child
    /// of ours: the only kind of object a create would have to refuse to adopt. Known for
    /// the kinds the snapshot watches in full (Gateways and routes, every one in the
    /// cluster) and for the kinds whose names are listed ([`names::Names`]); `None`
    /// otherwise, which only a read of the API server can tell.
    #[must_use]
    pub fn foreign_object_exists(&self, key: &ObjectKey) -> Option<bool> {
        if crate::kinds::group_of(&key.api_version) != crate::gateway::GATEWAY_API_GROUP {
            return self.names_taken(key);
        }
        let nn = || Key::new(key.namespace.clone(), key.name.clone());
        match key.kind.as_str() {
            "Gateway" => Some(self.gateways.contains_key(&nn())),
            k if crate::gateway::route_kinds::by_kind(k).is_some() => {
                Some(self.routes.contains_key(&RouteKey::new(
                    key.kind.clone(),
                    key.namespace.clone(),
                    key.name.clone(),
                )))
            }
            _ => self.names_taken(key),
        }
    }

    /// Whether an object of `key`'s kind holds its name, from the names of the kind
    /// ([`names::Names`]); `None` while they are not listed.
    fn names_taken(&self, key: &ObjectKey) -> Option<bool> {
        let group = crate::kinds::group_of(&key.api_version);
        self.names.taken(
            group,
            &key.kind,
            &Key::new(key.namespace.clone(), key.name.clone()),
        )
    }

    /// The names of the child kinds, as their watches filled them.
    #[must_use]
    pub fn names(&self) -> &names::Names {
        &self.names
    }

    /// The names of the child kinds, for the watches that fill them.
    pub fn names_mut(&mut self) -> &mut names::Names {
        &mut self.names
    }
    /// The object that holds `key`: the live child, else the object a parent claimed
    /// (offline arbitration, see [`Snapshot::claim`]).
    #[must_use]
    pub fn holder(&self, key: &ObjectKey) -> Option<Arc<Value>> {
        self.child(key)
            .or_else(|| self.claimed.get(key).map(|(_, o)| Arc::clone(o)))
    }
    /// The stamp of what [`Snapshot::holder`] returns: equal stamps, the same holder.
    #[must_use]
    pub fn holder_stamp(&self, key: &ObjectKey) -> Option<u64> {
        self.children
            .get(key)
            .map(|c| c.stamp)
            .or_else(|| self.claimed.get(key).map(|(stamp, _)| *stamp))
    }
    /// Records that the parent of `object` (its labels say which) keeps `key` although it
    /// does not exist yet: `render` arbitrates between parents rendering the same object.
    pub fn claim(&mut self, key: ObjectKey, object: Value) {
        self.claimed.insert(key, (next_stamp(), Arc::new(object)));
    }
    /// The keys of every live child.
    pub fn child_keys(&self) -> impl Iterator<Item = &ObjectKey> {
        self.children.keys()
    }
}
