//! The template variables (ARCHITECTURE.md, "The template contract"): `gateway`, `route`,
//! `class`, `values`, `listeners`, `routes`, `hostnames.union`/`intersection`/`precise`
//! and `resources.<template>`.
//!
//! In: what the planner computed. Out: one minijinja value per render.

use std::collections::BTreeMap;

use minijinja::Value;
use serde::Serialize;

/// A listener as templates see it.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct ListenerVar {
    /// Listener name.
    pub name: String,
    /// Port.
    pub port: i32,
    /// Protocol (`HTTP`, `HTTPS`, ...).
    pub protocol: String,
    /// Hostname, or none for a catch-all listener.
    pub hostname: Option<String>,
    /// The listener's `tls` as written, or none.
    pub tls: Option<serde_json::Value>,
    /// Resolved certificate Secrets as `{namespace, name}`.
    #[serde(rename = "certificateRefs")]
    pub certificate_refs: Vec<NamespacedName>,
    /// Whether the listener is valid (accepted, refs resolved, no conflict).
    pub valid: bool,
    /// Routes attached to this listener.
    pub routes: Vec<AttachedRouteVar>,
    /// How many routes are attached.
    #[serde(rename = "attachedRoutes")]
    pub attached_routes: i32,
}

/// A namespace and name.
#[derive(Clone, Debug, Serialize, PartialEq, Eq, PartialOrd, Ord)]
pub struct NamespacedName {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
}

/// A route attached to a listener.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct AttachedRouteVar {
    /// Kind (`HTTPRoute`).
    pub kind: String,
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// Hostnames after intersection with the listener; empty for a catch-all.
    pub hostnames: Vec<String>,
}

/// `hostnames.union`, `hostnames.intersection` and `hostnames.precise`.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct HostnamesVar {
    /// Every accepted, intersected hostname, sorted, without duplicates.
    pub union: Vec<String>,
    /// The union without the names a wildcard of the union already covers (DNS: a
    /// wildcard record answers for the names it covers).
    pub intersection: Vec<String>,
    /// The union without any wildcard name: what a generated certificate may list
    /// (hostnames.md: no wildcard certificate from a hostname field). Every precise
    /// intersected hostname of an accepted route is here, even one a wildcard covers.
    pub precise: Vec<String>,
}

/// Everything a render sees, borrowed from the planner.
#[derive(Serialize)]
pub struct TemplateContext<'a> {
    /// The parent Gateway as the API returns it.
    pub gateway: &'a Value,
    /// The GatewayClass.
    pub class: &'a serde_json::Value,
    /// Merged values.
    pub values: &'a serde_json::Value,
    /// Normalized listeners.
    pub listeners: &'a [ListenerVar],
    /// Routes accepted by the Gateway, as the API returns them.
    pub routes: &'a [Value],
    /// Accepted hostnames.
    pub hostnames: &'a HostnamesVar,
}

impl TemplateContext<'_> {
    /// As a minijinja value, without `resources`. Built once per plan: converting the
    /// Gateway and its routes is the expensive part of a render.
    #[must_use]
    pub fn to_value(&self) -> Value {
        Value::from(minijinja::value::Serde(self))
    }
}

/// `base` with `resources` (and, for route templates, `route`) added.
#[must_use]
pub fn with_resources(
    base: &Value,
    route: Option<&Value>,
    resources: &BTreeMap<String, Vec<serde_json::Value>>,
    pending: &BTreeMap<String, Vec<serde_json::Value>>,
) -> Value {
    let resources = Value::from(minijinja::value::Serde(resources));
    let pending = Value::from(minijinja::value::Serde(pending));
    match route {
        Some(r) => minijinja::context! {
            route => r.clone(), resources => resources, pending => pending, ..base.clone()
        },
        None => minijinja::context! { resources => resources, pending => pending, ..base.clone() },
    }
}
