//! Kinds named by `apiVersion` and `kind`: the one parse of an `apiVersion` into its group
//! and version, and the [`GroupVersionKind`] of an object's kind (pure: no client; the
//! lookup of a kind on an API server is [`crate::discovery`]).
//!
//! In: an `apiVersion` (`v1`, `apps/v1`, `cert-manager.io/v1`) and a kind. Out: the group
//! (`""` for the core group), the version, a [`GroupVersionKind`].
//!
//! An `apiVersion` is `VERSION` (the core group) or `GROUP/VERSION`: at most one `/`, and
//! the group is a DNS subdomain (dots, never a `/`). A malformed value is split at its
//! last `/`: the version is always one path segment and whatever else there is stays in
//! the group, where it can match no group an API server serves (`a/b/c` is group `a/b`,
//! version `c`; a value that would begin with a known group, `gateway.networking.k8s.io/v1/x`,
//! is not taken for that group). `""` is the core group with an empty version, which no
//! API server serves.

use kube::core::GroupVersionKind;

/// A child kind as the controller watches it: `(apiVersion, kind)`.
pub type KindKey = (String, String);

/// The group and version of an `apiVersion`, borrowed from it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GroupVersion<'a> {
    /// `""` for the core group (`apiVersion: v1`).
    pub group: &'a str,
    /// `v1`, `v1beta1`, ...
    pub version: &'a str,
}

impl<'a> GroupVersion<'a> {
    /// Splits `api_version` into group and version (a malformed value: see the module
    /// docs). Never fails.
    #[must_use]
    pub fn parse(api_version: &'a str) -> Self {
        let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
        Self { group, version }
    }

    /// The kind `kind` of this group and version.
    #[must_use]
    pub fn with_kind(self, kind: &str) -> GroupVersionKind {
        GroupVersionKind::gvk(self.group, self.version, kind)
    }
}

/// The group of an `apiVersion` (`""` for `v1`).
#[must_use]
pub fn group_of(api_version: &str) -> &str {
    GroupVersion::parse(api_version).group
}

/// The [`GroupVersionKind`] of objects with this `apiVersion` and `kind`.
#[must_use]
pub fn gvk(api_version: &str, kind: &str) -> GroupVersionKind {
    GroupVersion::parse(api_version).with_kind(kind)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn api_versions_parse_to_group_and_version() {
        // (apiVersion, group, version)
        let cases = [
            ("v1", "", "v1"),
            ("apps/v1", "apps", "v1"),
            ("cert-manager.io/v1", "cert-manager.io", "v1"),
            (
                "gateway.networking.k8s.io/v1beta1",
                "gateway.networking.k8s.io",
                "v1beta1",
            ),
            (
                "externaldns.k8s.io/v1alpha1",
                "externaldns.k8s.io",
                "v1alpha1",
            ),
            // Malformed: split at the last '/'.
            ("a/b/c", "a/b", "c"),
            (
                "gateway.networking.k8s.io/v1/x",
                "gateway.networking.k8s.io/v1",
                "x",
            ),
            ("", "", ""),
            ("/v1", "", "v1"),
            ("apps/", "apps", ""),
            ("/", "", ""),
        ];
        for (api_version, group, version) in cases {
            assert_eq!(
                GroupVersion::parse(api_version),
                GroupVersion { group, version },
                "{api_version:?}"
            );
            assert_eq!(group_of(api_version), group, "{api_version:?}");
        }
    }

    #[test]
    fn gvk_of_core_and_named_groups() {
        assert_eq!(
            gvk("v1", "Secret"),
            GroupVersionKind::gvk("", "v1", "Secret")
        );
        assert_eq!(
            gvk("cert-manager.io/v1", "Certificate"),
            GroupVersionKind::gvk("cert-manager.io", "v1", "Certificate")
        );
        assert_eq!(gvk("a/b/c", "K"), GroupVersionKind::gvk("a/b", "c", "K"));
    }
}
