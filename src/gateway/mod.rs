//! Gateway API semantics, pure (GATEWAY-API.md sections 2-5): listener validity,
//! conflicts and supportedKinds; certificateRefs with ReferenceGrants and PEM checks;
//! route attachment by parentRef, allowedRoutes and hostname intersection; attachedRoutes;
//! the conditions and reasons of Gateways, listeners and route parents.
//!
//! In: typed Gateway API objects and a [`Lookup`] for what they reference. Out:
//! evaluations ([`GatewayEval`], [`ParentAttachment`]) the planner turns into status.
//! No client, no clock, no I/O.

use std::collections::BTreeMap;

use gateway_api::apis::standard::referencegrants::ReferenceGrant;

pub mod conditions;
pub mod hostnames;
pub mod listeners;
pub mod listenersets;
pub mod refs;
pub mod route_kinds;
pub mod routes;

pub use conditions::{Cond, Status};
pub use listeners::{GatewayEval, ListenerEval, RouteGroupKind, evaluate_gateway};
pub use refs::SecretInfo;
pub use routes::{ParentAttachment, Parents, RouteView, attach_route, count_attached_routes};

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
