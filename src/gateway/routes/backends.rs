//! A route's backendRefs resolved: the kind (Services only), the ReferenceGrant a
//! cross-namespace reference needs, and the Service's existence (`ResolvedRefs`).

use super::RouteView;
use crate::gateway::conditions::{Cond, reasons, types};
use crate::gateway::lookup::Lookup;
use crate::gateway::lookup::grant_allows;

pub(super) fn resolve_backends(route: &RouteView, lookup: &dyn Lookup) -> Cond {
    let r = types::RESOLVED_REFS;
    for b in &route.backend_refs {
        let what = || format!("backendRef {}/{}", b.namespace, b.name);
        if !(b.group.is_empty() && b.kind == "Service") {
            return Cond::f(
                r,
                reasons::INVALID_KIND,
                &format!(
                    "{}: kind {}/{} is not supported; use a Service",
                    what(),
                    b.group,
                    b.kind
                ),
            );
        }
        if !grant_allows(
            lookup,
            &route.kind.group,
            &route.kind.kind,
            &route.namespace,
            "",
            "Service",
            &b.namespace,
            &b.name,
        ) {
            return Cond::f(
                r,
                reasons::REF_NOT_PERMITTED,
                &format!("{}: no ReferenceGrant in {} allows it", what(), b.namespace),
            );
        }
        if lookup.service_exists(&b.namespace, &b.name) == Some(false) {
            return Cond::f(
                r,
                reasons::BACKEND_NOT_FOUND,
                &format!("{}: Service not found", what()),
            );
        }
    }
    Cond::t(r, reasons::RESOLVED_REFS, "all references are resolved")
}
