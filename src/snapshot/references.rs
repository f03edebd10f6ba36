//! What listeners and routes refer to: Namespaces (their labels), ReferenceGrants,
//! Secrets (what TLS validation needs, never the data) and Services (their existence);
//! the snapshot as the semantics' [`Lookup`].

use std::collections::{BTreeMap, BTreeSet};

use gateway_api::apis::standard::referencegrants::ReferenceGrant;
use k8s_openapi::api::core::v1::Secret;

use super::entries::next_stamp;
use super::{Key, Snapshot, UNKNOWN_SECRET_TYPE, key_of};
use crate::gateway::{Lookup, SecretInfo};

impl Snapshot {
    /// Inserts or replaces a Namespace's labels.
    pub fn put_namespace(&mut self, name: &str, labels: BTreeMap<String, String>) {
        if self.namespaces.get(name) != Some(&labels) {
            self.namespaces.insert(name.to_owned(), labels);
            self.references_moved();
        }
    }
    /// Removes a Namespace.
    pub fn remove_namespace(&mut self, name: &str) {
        if self.namespaces.remove(name).is_some() {
            self.references_moved();
        }
    }
    /// Inserts or replaces a ReferenceGrant.
    pub fn put_grant(&mut self, g: ReferenceGrant) {
        let Key { namespace, name } = key_of(&g.metadata);
        let grants = self.grants.entry(namespace).or_default();
        if grants.get(&name).is_none_or(|old| old.spec != g.spec) {
            grants.insert(name, g);
            self.references_moved();
        }
    }
    /// Removes a ReferenceGrant.
    pub fn remove_grant(&mut self, key: &Key) {
        if let Some(m) = self.grants.get_mut(&key.namespace)
            && m.remove(&key.name).is_some()
        {
            self.references_moved();
        }
    }
    /// A number that changes whenever what the snapshot answers as a [`Lookup`] may have
    /// (a Namespace's labels, a ReferenceGrant, a Secret, whether a Service exists): equal
    /// stamps, the same answers. What a plan decides from them alone (route attachment)
    /// may be kept while it holds.
    #[must_use]
    pub fn references_stamp(&self) -> u64 {
        self.references_stamp
    }
    fn references_moved(&mut self) {
        self.references_stamp = next_stamp();
    }
    /// Inserts or replaces a Secret (only its type and TLS validity are kept).
    pub fn put_secret(&mut self, s: &Secret) {
        let key = key_of(&s.metadata);
        let info = SecretInfo::from_secret(s);
        // Kept where the watch that lists its type keeps it (see the fields).
        let (here, there) = if info.type_ == crate::gateway::refs::TLS_SECRET_TYPE {
            (&mut self.secrets, &mut self.other_secrets)
        } else {
            (&mut self.other_secrets, &mut self.secrets)
        };
        let moved = there.remove(&key).is_some() | (here.get(&key) != Some(&info));
        here.insert(key, info);
        if moved {
            self.references_moved();
        }
    }
    /// Records a Secret known by its metadata alone (its type is not
    /// `kubernetes.io/tls`; which one it is stays unknown until [`Snapshot::put_secret`]).
    pub fn put_secret_metadata(&mut self, key: Key) {
        if !self.secrets.contains_key(&key) && !self.other_secrets.contains_key(&key) {
            self.other_secrets.insert(
                key,
                SecretInfo {
                    type_: UNKNOWN_SECRET_TYPE.into(),
                    tls_valid: false,
                },
            );
            self.references_moved();
        }
    }
    /// Whether a Secret is known by its metadata alone (its type not fetched yet).
    #[must_use]
    pub fn secret_type_unknown(&self, key: &Key) -> bool {
        self.other_secrets
            .get(key)
            .is_some_and(|s| s.type_ == UNKNOWN_SECRET_TYPE)
    }
    /// Removes a Secret.
    pub fn remove_secret(&mut self, key: &Key) {
        if self.secrets.remove(key).is_some() | self.other_secrets.remove(key).is_some() {
            self.references_moved();
        }
    }
    /// Records that a Service exists (turns Service tracking on).
    pub fn put_service(&mut self, key: Key) {
        let tracked = self.services.is_some();
        if self.services.get_or_insert_with(BTreeSet::new).insert(key) || !tracked {
            self.references_moved();
        }
    }
    /// Records that a Service is gone.
    pub fn remove_service(&mut self, key: &Key) {
        if let Some(s) = &mut self.services
            && s.remove(key)
        {
            self.references_moved();
        }
    }
}

impl Lookup for Snapshot {
    fn namespace_labels(&self, namespace: &str) -> Option<&BTreeMap<String, String>> {
        self.namespaces.get(namespace)
    }
    fn secret(&self, namespace: &str, name: &str) -> Option<&SecretInfo> {
        let key = Key::new(namespace, name);
        self.secrets
            .get(&key)
            .or_else(|| self.other_secrets.get(&key))
    }
    fn reference_grants(&self, namespace: &str) -> Vec<&ReferenceGrant> {
        self.grants
            .get(namespace)
            .map(|m| m.values().collect())
            .unwrap_or_default()
    }
    fn service_exists(&self, namespace: &str, name: &str) -> Option<bool> {
        self.services
            .as_ref()
            .map(|s| s.contains(&Key::new(namespace.to_owned(), name.to_owned())))
    }
}
