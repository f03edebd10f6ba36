//! Gateway API semantics, pure (GATEWAY-API.md sections 2-5): listener validity,
//! conflicts and supportedKinds; certificateRefs with ReferenceGrants and PEM checks;
//! route attachment by parentRef, allowedRoutes and hostname intersection; attachedRoutes;
//! the conditions and reasons of Gateways, listeners and route parents.
//!
//! In: typed Gateway API objects and a [`Lookup`] for what they reference. Out:
//! evaluations ([`GatewayEval`], [`ParentAttachment`]) the planner turns into status.
//! No client, no clock, no I/O.

pub mod boundary;
pub mod conditions;
pub mod hostnames;
pub mod listeners;
pub mod listenersets;
pub mod lookup;
pub mod refs;
pub mod route_kinds;
pub mod routes;

pub use conditions::{Cond, Status};
pub use listeners::{GatewayEval, ListenerEval, RouteGroupKind, evaluate_gateway};
pub use lookup::{
    CONTROLLER_NAME, GATEWAY_API_GROUP, LabelSelectorLike, Lookup, grant_allows, selector_matches,
};
pub use refs::SecretInfo;
pub use routes::{ParentAttachment, Parents, RouteView, attach_route, count_attached_routes};
