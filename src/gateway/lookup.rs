//! What the semantics read and share: our `controllerName` and the Gateway API group,
//! label selectors, the [`Lookup`] of what objects reference (implemented by the
//! planner's snapshot) and the ReferenceGrant rule over it.

use std::collections::BTreeMap;

use gateway_api::apis::standard::referencegrants::ReferenceGrant;

use super::refs::SecretInfo;

/// Our `controllerName`.
pub const CONTROLLER_NAME: &str = "gatewright.dev/gateway-controller";
/// The Gateway API group.
pub const GATEWAY_API_GROUP: &str = "gateway.networking.k8s.io";

/// Whether a Namespace's `labels` match a label selector: every `match_labels` entry, and
/// every expression as `(key, operator, values)`. An unknown operator matches nothing.
pub fn selector_matches<'a>(
    labels: &BTreeMap<String, String>,
    match_labels: Option<&BTreeMap<String, String>>,
    mut expressions: impl Iterator<Item = (&'a str, &'a str, &'a [String])>,
) -> bool {
    match_labels
        .into_iter()
        .flatten()
        .all(|(k, v)| labels.get(k) == Some(v))
        && expressions.all(|(key, operator, values)| {
            let has = labels.get(key);
            match operator {
                "In" => has.is_some_and(|v| values.contains(v)),
                "NotIn" => has.is_none_or(|v| !values.contains(v)),
                "Exists" => has.is_some(),
                "DoesNotExist" => has.is_none(),
                _ => false,
            }
        })
}

/// A label selector, of any of the generated types that spell one (Kubernetes' own, Gateway
/// API's for a listener's routes and for a Gateway's ListenerSets): the one adapter from
/// their fields to [`selector_matches`].
pub trait LabelSelectorLike {
    /// Whether `labels` match the selector.
    fn matches(&self, labels: &BTreeMap<String, String>) -> bool;
}

macro_rules! label_selector_like {
    ($($t:ty),* $(,)?) => {$(
        impl LabelSelectorLike for $t {
            fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
                selector_matches(
                    labels,
                    self.match_labels.as_ref(),
                    self.match_expressions.iter().flatten().map(|e| {
                        (
                            e.key.as_str(),
                            e.operator.as_str(),
                            e.values.as_deref().unwrap_or_default(),
                        )
                    }),
                )
            }
        }
    )*};
}

label_selector_like!(
    k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector,
    gateway_api::apis::standard::gateways::GatewayListenersAllowedRoutesNamespacesSelector,
    gateway_api::apis::standard::gateways::GatewayAllowedListenersNamespacesSelector,
);

/// What the semantics look up; implemented by the planner's snapshot.
pub trait Lookup {
    /// Labels of a Namespace; `None` when the namespace is unknown.
    fn namespace_labels(&self, namespace: &str) -> Option<&BTreeMap<String, String>>;
    /// What we know of a Secret.
    fn secret(&self, namespace: &str, name: &str) -> Option<&SecretInfo>;
    /// ReferenceGrants living in `namespace`.
    fn reference_grants(&self, namespace: &str) -> Vec<&ReferenceGrant>;
    /// Whether a Service exists; `None` when Services are not tracked (assume it does).
    fn service_exists(&self, namespace: &str, name: &str) -> Option<bool>;
}

/// A reference from an object of `from_group/from_kind` in `from_namespace` to an object
/// of `to_group/to_kind` named `to_name` in `to_namespace`: allowed within a namespace,
/// and across namespaces only by a ReferenceGrant in the target namespace.
#[must_use]
#[allow(clippy::too_many_arguments)]
pub fn grant_allows(
    lookup: &dyn Lookup,
    from_group: &str,
    from_kind: &str,
    from_namespace: &str,
    to_group: &str,
    to_kind: &str,
    to_namespace: &str,
    to_name: &str,
) -> bool {
    if from_namespace == to_namespace {
        return true;
    }
    lookup.reference_grants(to_namespace).iter().any(|g| {
        g.spec
            .from
            .iter()
            .any(|f| f.group == from_group && f.kind == from_kind && f.namespace == from_namespace)
            && g.spec.to.iter().any(|t| {
                t.group == to_group
                    && t.kind == to_kind
                    && t.name
                        .as_deref()
                        .is_none_or(|n| n.is_empty() || n == to_name)
            })
    })
}
