//! The names taken in the cluster, per child kind, by every object of it (ours or not),
//! from a metadata-only watch of the kind without our label selector. Before creating a
//! child the cache does not hold, the controller must know that no object of that name
//! exists that is not ours (it never adopts one); with the kind's names listed it knows
//! without a read of the API server. Until they are listed, or for a kind whose names are
//! not watched, it does not know ([`Names::taken`] is `None`) and reads.

use std::collections::{HashMap, HashSet};

use super::keys::Key;

/// See the module docs. Kinds by `(group, kind)`: a name is taken for every version.
#[derive(Debug, Default)]
pub struct Names(HashMap<(String, String), HashSet<Key>>);

impl Names {
    /// The kind's names as a (re)list found them.
    pub fn listed(&mut self, group: &str, kind: &str, names: HashSet<Key>) {
        self.0.insert((group.to_owned(), kind.to_owned()), names);
    }

    /// A name taken (an object added or changed), once the kind is listed.
    pub fn add(&mut self, group: &str, kind: &str, key: Key) {
        if let Some(n) = self.0.get_mut(&(group.to_owned(), kind.to_owned())) {
            n.insert(key);
        }
    }

    /// A name freed (its object deleted).
    pub fn remove(&mut self, group: &str, kind: &str, key: &Key) {
        if let Some(n) = self.0.get_mut(&(group.to_owned(), kind.to_owned())) {
            n.remove(key);
        }
    }

    /// Forgets a kind (its watch stopped): nothing is known of it any more.
    pub fn forget(&mut self, group: &str, kind: &str) {
        self.0.remove(&(group.to_owned(), kind.to_owned()));
    }

    /// Whether an object of the kind holds `key`'s name; `None` while its names are not
    /// listed.
    #[must_use]
    pub fn taken(&self, group: &str, kind: &str, key: &Key) -> Option<bool> {
        self.0
            .get(&(group.to_owned(), kind.to_owned()))
            .map(|n| n.contains(key))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_is_known_only_once_the_kind_is_listed() {
        let mut n = Names::default();
        let k = Key::new("ns", "gw-tls");
        n.add("cert-manager.io", "Certificate", k.clone());
        assert_eq!(n.taken("cert-manager.io", "Certificate", &k), None);
        n.listed("cert-manager.io", "Certificate", HashSet::new());
        assert_eq!(n.taken("cert-manager.io", "Certificate", &k), Some(false));
        n.add("cert-manager.io", "Certificate", k.clone());
        assert_eq!(n.taken("cert-manager.io", "Certificate", &k), Some(true));
        assert_eq!(
            n.taken(
                "cert-manager.io",
                "Certificate",
                &Key::new("other", "gw-tls")
            ),
            Some(false),
            "names are per namespace"
        );
        n.remove("cert-manager.io", "Certificate", &k);
        assert_eq!(n.taken("cert-manager.io", "Certificate", &k), Some(false));
        n.forget("cert-manager.io", "Certificate");
        assert_eq!(n.taken("cert-manager.io", "Certificate", &k), None);
    }
}
