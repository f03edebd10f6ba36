//! What listeners and routes refer to: Namespaces (their labels), ReferenceGrants,
//! Secrets (what TLS validation needs, never the data) and Services (their existence);
//! the snapshot as the semantics' [`Lookup`].

use std::collections::{BTreeMap, BTreeSet};

use gateway_api::apis::standard::referencegrants::ReferenceGrant;
use k8s_openapi::api::core::v1::Secret;

use super::{Key, Snapshot, UNKNOWN_SECRET_TYPE, key_of};
use crate::gateway::{Lookup, SecretInfo};

impl Snapshot {
    /// Inserts or replaces a Namespace's labels.
    pub fn put_namespace(&mut self, name: &str, labels: BTreeMap<String, String>) {
        self.namespaces.insert(name.to_owned(), labels);
    }
    /// Removes a Namespace.
    pub fn remove_namespace(&mut self, name: &str) {
        self.namespaces.remove(name);
    }
    /// Inserts or replaces a ReferenceGrant.
    pub fn put_grant(&mut self, g: ReferenceGrant) {
        let Key { namespace, name } = key_of(&g.metadata);
        self.grants.entry(namespace).or_default().insert(name, g);
    }
    /// Removes a ReferenceGrant.
    pub fn remove_grant(&mut self, key: &Key) {
        if let Some(m) = self.grants.get_mut(&key.namespace) {
            m.remove(&key.name);
        }
    }
    /// Inserts or replaces a Secret (only its type and TLS validity are kept).
    pub fn put_secret(&mut self, s: &Secret) {
        let key = key_of(&s.metadata);
        let info = SecretInfo::from_secret(s);
        // Kept where the watch that lists its type keeps it (see the fields).
        if info.type_ == crate::gateway::refs::TLS_SECRET_TYPE {
            self.other_secrets.remove(&key);
            self.secrets.insert(key, info);
        } else {
            self.secrets.remove(&key);
            self.other_secrets.insert(key, info);
        }
    }
    /// Records a Secret known by its metadata alone (its type is not
    /// `kubernetes.io/tls`; which one it is stays unknown until [`Snapshot::put_secret`]).
    pub fn put_secret_metadata(&mut self, key: Key) {
        if !self.secrets.contains_key(&key) {
            self.other_secrets.entry(key).or_insert_with(|| SecretInfo {
                type_: UNKNOWN_SECRET_TYPE.into(),
                tls_valid: false,
            });
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
        self.secrets.remove(key);
        self.other_secrets.remove(key);
    }
    /// Records that a Service exists (turns Service tracking on).
    pub fn put_service(&mut self, key: Key) {
        self.services.get_or_insert_with(BTreeSet::new).insert(key);
    }
    /// Records that a Service is gone.
    pub fn remove_service(&mut self, key: &Key) {
        if let Some(s) = &mut self.services {
            s.remove(key);
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
