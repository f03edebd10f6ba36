//! Names of the objects the snapshot holds: [`Key`] for a namespaced object (a Gateway,
//! a Secret, a Service, ...), [`RouteKey`] for a route of any kind.

use std::fmt;

/// A namespaced object's namespace and name. Ordered by namespace, then name.
#[derive(Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Key {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
}

impl Key {
    /// The key of `namespace`/`name`.
    pub fn new(namespace: impl Into<String>, name: impl Into<String>) -> Self {
        Self {
            namespace: namespace.into(),
            name: name.into(),
        }
    }
}

/// `namespace/name`.
impl fmt::Display for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// As [`fmt::Display`]: logs name work as `Gateway(ns/name)`.
impl fmt::Debug for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// A route: its kind (`HTTPRoute`, ...), namespace and name. Ordered by kind, namespace,
/// then name.
///
/// Shared: a clone is a reference count, not three strings (a plan of a Gateway with many
/// routes clones every route's key into its attachments, its route plans and their
/// statuses), and two clones of one key compare equal by address first. The parts are
/// read as fields ([`RouteKeyParts`], through `Deref`).
#[derive(Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RouteKey(std::sync::Arc<RouteKeyParts>);

/// The parts of a [`RouteKey`]. Field order is the key's order.
#[derive(Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RouteKeyParts {
    /// Kind.
    pub kind: String,
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
}

impl std::ops::Deref for RouteKey {
    type Target = RouteKeyParts;
    fn deref(&self) -> &RouteKeyParts {
        &self.0
    }
}

impl RouteKey {
    /// The key of the route `kind` `namespace`/`name`.
    pub fn new(
        kind: impl Into<String>,
        namespace: impl Into<String>,
        name: impl Into<String>,
    ) -> Self {
        Self(std::sync::Arc::new(RouteKeyParts {
            kind: kind.into(),
            namespace: namespace.into(),
            name: name.into(),
        }))
    }

    /// The namespace and name.
    #[must_use]
    pub fn key(&self) -> Key {
        Key::new(self.namespace.clone(), self.name.clone())
    }
}

/// `Kind namespace/name`.
impl fmt::Display for RouteKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}/{}", self.kind, self.namespace, self.name)
    }
}

/// As [`fmt::Display`].
impl fmt::Debug for RouteKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_order_and_print_by_their_parts() {
        let mut keys = [Key::new("b", "a"), Key::new("a", "z"), Key::new("a", "b")];
        keys.sort();
        assert_eq!(
            keys.iter().map(ToString::to_string).collect::<Vec<_>>(),
            ["a/b", "a/z", "b/a"]
        );
        assert_eq!(format!("{:?}", Key::new("ns", "gw")), "ns/gw");
        let r = RouteKey::new("HTTPRoute", "ns", "r");
        assert_eq!(r.to_string(), "HTTPRoute ns/r");
        assert_eq!(r.key(), Key::new("ns", "r"));
        assert!(RouteKey::new("GRPCRoute", "z", "z") < r, "kind first");
        assert!(
            RouteKey::new("HTTPRoute", "ns", "q") < r,
            "then namespace, then name"
        );
        let shared = r.clone();
        assert!(std::ptr::eq(&*shared, &*r), "a clone shares the parts");
        assert_eq!(
            shared,
            RouteKey::new("HTTPRoute", "ns", "r"),
            "equal by value too"
        );
    }
}
