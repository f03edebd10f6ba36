//! The template variables (ARCHITECTURE.md, "The template contract"): `gateway`, `route`,
//! `class`, `values`, `listeners`, `routes`, `hostnames.union`/`intersection`/`precise`/`tls`
//! and `resources.<template>`. `hostnames.tls` is what a generated certificate should list:
//! the precise names of the listeners that terminate TLS and name no certificate of their
//! own, so that an HTTP-only Gateway orders none (no ACME order quota spent, no
//! `Programmed` waiting on an issuance nothing serves).
//!
//! In: what the planner computed. Out: one minijinja value per render.

use std::collections::BTreeMap;
use std::sync::Arc;

use minijinja::Value;
use serde::Serialize;

/// A listener as templates see it.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct ListenerVar {
    /// Listener name (unique within its Gateway or ListenerSet, not across them).
    pub name: String,
    /// A name unique among the merged listeners, valid as a listener name: `name` for
    /// the Gateway's own, `<ListenerSet name>-<name>` for a ListenerSet's (what a child
    /// Gateway carrying every listener names them by).
    pub key: String,
    /// The ListenerSet it comes from (`{namespace, name}`); none for the Gateway's own.
    #[serde(rename = "listenerSet")]
    pub listener_set: Option<NamespacedName>,
    /// Port.
    pub port: i32,
    /// Protocol (`HTTP`, `HTTPS`, ...).
    pub protocol: String,
    /// Hostname, or none for a catch-all listener.
    pub hostname: Option<String>,
    /// The listener's `tls` as written, or none.
    pub tls: Option<serde_json::Value>,
    /// `Terminate` or `Passthrough` (the `tls.mode` default filled in) for HTTPS and TLS
    /// listeners; none for the others.
    #[serde(rename = "tlsMode")]
    pub tls_mode: Option<String>,
    /// `{namespaces}`: the namespaces the listener admits routes from, as a child Gateway
    /// in the Gateway's namespace must say it to admit the same ones (a ListenerSet's
    /// `Same` becomes a selector on its namespace's name; see
    /// [`crate::gateway::boundary::child_namespaces`]).
    #[serde(rename = "allowedRoutes")]
    pub allowed_routes: serde_json::Value,
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
#[derive(Clone, Debug, Serialize, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct NamespacedName {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
}

/// What the Gateway accepted the rendered route for (`attachment`, route templates only):
/// what a copy of the route must keep to serve no more than the parent allowed it
/// (docs/security.md). Templates see `{listeners, hostnames}`: `listeners` one map per
/// listener that accepted the route (`key`, `name`, `listenerSet`, `port`, `protocol`,
/// `hostname` as in `listeners`, and `hostnames`: the route's hostnames intersected with
/// the listener's, its own when the route names none, empty when neither names one), and
/// `hostnames` what a copy lists. It borrows the Gateway's listeners rather than copying
/// them (one is made for every route plan).
#[derive(Clone, Debug, Default)]
pub struct AttachmentVar {
    /// The Gateway's listeners (`listeners`, shared).
    of: Arc<Vec<ListenerVar>>,
    /// The valid listeners that accepted the route (by index in `of`, in listener order,
    /// each once) and the hostnames accepted there (sorted, unique; empty: every hostname).
    accepted: Vec<(usize, Vec<String>)>,
    /// What a copy lists: every accepted listener's hostnames, sorted, without duplicates;
    /// empty when one of them accepts every hostname.
    hostnames: Vec<String>,
}

impl AttachmentVar {
    /// Made of the Gateway's listeners `of` and the accepted `(index, hostnames)` pairs (in
    /// listener order, each listener once).
    #[must_use]
    pub fn new(of: Arc<Vec<ListenerVar>>, accepted: Vec<(usize, Vec<String>)>) -> Self {
        let hostnames = if accepted.iter().any(|(_, h)| h.is_empty()) {
            Vec::new()
        } else if let [(_, only)] = accepted.as_slice() {
            only.clone()
        } else {
            let mut all: Vec<String> = accepted
                .iter()
                .flat_map(|(_, h)| h.iter().cloned())
                .collect();
            all.sort();
            all.dedup();
            all
        };
        Self {
            of,
            accepted,
            hostnames,
        }
    }

    /// Each accepted listener's key and hostnames.
    pub fn keys_and_hostnames(&self) -> impl Iterator<Item = (&str, &[String])> {
        self.accepted
            .iter()
            .filter_map(|(i, h)| Some((self.of.get(*i)?.key.as_str(), h.as_slice())))
    }

    /// What a copy lists (see the type's docs).
    #[must_use]
    pub fn hostnames(&self) -> &[String] {
        &self.hostnames
    }
}

impl std::hash::Hash for AttachmentVar {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        for (key, hostnames) in self.keys_and_hostnames() {
            key.hash(state);
            hostnames.hash(state);
        }
        // What else a template reads of each listener comes from the Gateway's listeners,
        // which the same key names within one Gateway context.
        for (i, _) in &self.accepted {
            if let Some(l) = self.of.get(*i) {
                (l.port, &l.protocol, &l.hostname, &l.listener_set).hash(state);
            }
        }
    }
}

impl Serialize for AttachmentVar {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap as _;
        #[derive(Serialize)]
        struct Listener<'a> {
            key: &'a str,
            name: &'a str,
            #[serde(rename = "listenerSet")]
            listener_set: Option<&'a NamespacedName>,
            port: i32,
            protocol: &'a str,
            hostname: Option<&'a str>,
            hostnames: &'a [String],
        }
        let listeners: Vec<Listener<'_>> = self
            .accepted
            .iter()
            .filter_map(|(i, hostnames)| {
                let l = self.of.get(*i)?;
                Some(Listener {
                    key: &l.key,
                    name: &l.name,
                    listener_set: l.listener_set.as_ref(),
                    port: l.port,
                    protocol: &l.protocol,
                    hostname: l.hostname.as_deref(),
                    hostnames,
                })
            })
            .collect();
        let mut map = serializer.serialize_map(Some(2))?;
        map.serialize_entry("listeners", &listeners)?;
        map.serialize_entry("hostnames", &self.hostnames)?;
        map.end()
    }
}

/// A route attached to a listener.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct AttachedRouteVar {
    /// Kind (`HTTPRoute`, `GRPCRoute`, `TLSRoute`, `TCPRoute`, `UDPRoute`).
    pub kind: String,
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// Hostnames after intersection with the listener; empty for a catch-all.
    pub hostnames: Vec<String>,
}

/// `hostnames.union`, `hostnames.intersection`, `hostnames.precise` and `hostnames.tls`.
#[derive(Clone, Debug, Default, Serialize, PartialEq, Eq)]
pub struct HostnamesVar {
    /// Every accepted, intersected hostname, sorted, without duplicates.
    pub union: Vec<String>,
    /// The union without the names a wildcard of the union already covers (DNS: a
    /// wildcard record answers for the names it covers).
    pub intersection: Vec<String>,
    /// The union without any wildcard name, and without the names only TLS `Passthrough`
    /// listeners carry (their backends hold the certificate): what a generated certificate
    /// may list (hostnames.md: no wildcard certificate from a hostname field). Every other
    /// precise intersected hostname of an accepted route is here, even one a wildcard covers.
    pub precise: Vec<String>,
    /// The names of `precise` that attach through a listener served with a generated
    /// certificate: HTTPS, or TLS in `Terminate` mode, valid, and naming no
    /// `tls.certificateRefs` of its own. What a generated certificate should list: empty
    /// for a Gateway with no such listener (an HTTP-only Gateway orders no certificate).
    /// Same order and dedup as `precise`.
    pub tls: Vec<String>,
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
    /// The cluster templates that are not placed render for: the Gateway's own (its
    /// fields empty). A placed template's render sees its member instead.
    pub cluster: &'a serde_json::Value,
}

impl TemplateContext<'_> {
    /// As a minijinja value, without `resources`. Built once per plan: converting the
    /// Gateway and its routes is the expensive part of a render.
    #[must_use]
    pub fn to_value(&self) -> Value {
        Value::from(minijinja::value::Serde(self))
    }
}

/// The objects of each template, as template values (views of the objects, see
/// [`super::view`]), made once per template and pass rather than once per template that
/// reads them ([`ResourceValues::value`]).
#[derive(Debug, Default)]
pub struct ResourceValues {
    converted: BTreeMap<String, Value>,
}

impl ResourceValues {
    /// `resources` as a template value. The objects of a template are converted the first
    /// time it is seen; a template's objects must not change once given (a template set
    /// is rendered in order, each template's objects set once).
    pub fn value(&mut self, resources: &BTreeMap<String, Vec<Arc<serde_json::Value>>>) -> Value {
        for (name, objects) in resources {
            if !self.converted.contains_key(name) {
                self.converted
                    .insert(name.clone(), super::view::list(objects));
            }
        }
        resources
            .keys()
            .filter_map(|k| self.converted.get(k).map(|v| (k.clone(), v.clone())))
            .collect::<BTreeMap<String, Value>>()
            .into()
    }
}

/// What a route template sees beside the Gateway's context: `route` and `attachment`.
#[derive(Clone, Debug)]
pub struct RouteVars {
    /// `route`, as the API returns it.
    pub route: Value,
    /// `attachment` ([`AttachmentVar`]).
    pub attachment: Value,
}

/// `base` with `resources` (given as a template value, see [`ResourceValues`]), `pending`
/// (and, for route templates, `route` and `attachment`) added.
#[must_use]
pub fn with_resource_values(
    base: &Value,
    route: Option<&RouteVars>,
    resources: Value,
    pending: &BTreeMap<String, Vec<Arc<serde_json::Value>>>,
) -> Value {
    let pending = super::view::lists(pending);
    match route {
        Some(r) => minijinja::context! {
            route => r.route.clone(), attachment => r.attachment.clone(),
            resources => resources, pending => pending, ..base.clone()
        },
        None => minijinja::context! { resources => resources, pending => pending, ..base.clone() },
    }
}

/// `base` with `resources` (and, for route templates, `route` and `attachment`) added.
#[must_use]
pub fn with_resources(
    base: &Value,
    route: Option<&RouteVars>,
    resources: &BTreeMap<String, Vec<Arc<serde_json::Value>>>,
    pending: &BTreeMap<String, Vec<Arc<serde_json::Value>>>,
) -> Value {
    with_resource_values(base, route, super::view::lists(resources), pending)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn resources_converted_once_read_as_converted_each_time() {
        type Shared = BTreeMap<String, Vec<Arc<serde_json::Value>>>;
        type Plain = BTreeMap<String, Vec<serde_json::Value>>;
        fn put(
            (resources, plain): &mut (Shared, Plain),
            name: &str,
            objects: Vec<serde_json::Value>,
        ) {
            plain.insert(name.to_owned(), objects.clone());
            resources.insert(name.to_owned(), objects.into_iter().map(Arc::new).collect());
        }
        let mut both = (BTreeMap::new(), BTreeMap::new());
        put(&mut both, "a", vec![json!({"metadata": {"name": "x"}})]);
        let mut values = ResourceValues::default();
        let direct = Value::from(minijinja::value::Serde(&both.1));
        assert_eq!(values.value(&both.0), direct);
        put(&mut both, "b", vec![json!({"n": 1}), json!({"n": 2.5})]);
        let (resources, plain) = &both;
        let direct = Value::from(minijinja::value::Serde(plain));
        let once = values.value(resources);
        assert_eq!(once, direct);
        assert_eq!(once.to_string(), direct.to_string());
        let env = minijinja::Environment::new();
        let t = "{{ resources.a[0].metadata.name }} {{ resources['b'] | map(attribute='n') | list }} {{ resources | length }} {% for k, v in resources | items %}{{ k }}{% endfor %}";
        assert_eq!(
            env.render_str(t, minijinja::context! { resources => once })
                .unwrap(),
            env.render_str(t, minijinja::context! { resources => direct })
                .unwrap()
        );
    }
}
