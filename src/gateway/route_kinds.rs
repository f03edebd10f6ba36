//! The route kinds we implement, as one table: a row per kind says where the kind is
//! served, which listener protocols it attaches to, whether its CRD may be missing, the
//! conformance features it brings, and how its JSON becomes the kind-neutral
//! [`RouteView`] the semantics and the planner read. Everything that is per kind (the
//! watches, the snapshot's route store and relist cleanup, the file loader, the status
//! writer, `supportedKinds`, `InvalidRouteKinds`, metrics labels and the claimed features)
//! reads this table: adding a kind is adding a row.
//!
//! The rows read routes as JSON, not through the `gateway-api` crate's types: that crate
//! models Gateway API v1.5.1 (no `v1` TCPRoute or UDPRoute) and drops fields it does not
//! know (HTTPRoute retries, Standard in v1.7.0), which a route template copying
//! `spec.rules` to a child must keep.

use serde_json::Value;

use super::hostnames;
use super::lookup::GATEWAY_API_GROUP;

/// A route group and kind.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RouteGroupKind {
    /// Group.
    pub group: String,
    /// Kind.
    pub kind: String,
}

impl RouteGroupKind {
    #[cfg(test)]
    pub(crate) fn gw(kind: &str) -> Self {
        Self {
            group: GATEWAY_API_GROUP.to_owned(),
            kind: kind.to_owned(),
        }
    }
}

/// A parentRef with the API defaults filled in.
#[derive(Clone, Debug, PartialEq)]
pub struct ParentRef {
    /// Group (default `gateway.networking.k8s.io`).
    pub group: String,
    /// Kind (default `Gateway`).
    pub kind: String,
    /// Namespace (default: the route's).
    pub namespace: String,
    /// Name.
    pub name: String,
    /// Listener name.
    pub section_name: Option<String>,
    /// Listener port.
    pub port: Option<i32>,
    /// The spec parentRef as written, with group and kind defaulted, for `status.parents`
    /// (shared: each plan's attachment of the route copies it).
    pub status_ref: std::sync::Arc<Value>,
}

impl ParentRef {
    /// The ListenerSet `(namespace, name)` it names, if it names one.
    #[must_use]
    pub fn listener_set(&self) -> Option<(String, String)> {
        (self.group == GATEWAY_API_GROUP && self.kind == super::listenersets::KIND)
            .then(|| (self.namespace.clone(), self.name.clone()))
    }

    /// Whether it names the Gateway `gw_namespace/gw_name`.
    #[must_use]
    pub fn targets(&self, gw_namespace: &str, gw_name: &str) -> bool {
        self.group == GATEWAY_API_GROUP
            && self.kind == "Gateway"
            && self.namespace == gw_namespace
            && self.name == gw_name
    }
}

/// A backendRef with defaults filled in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BackendRef {
    /// Group (default core).
    pub group: String,
    /// Kind (default `Service`).
    pub kind: String,
    /// Namespace (default: the route's).
    pub namespace: String,
    /// Name.
    pub name: String,
    /// Port.
    pub port: Option<i32>,
}

/// What the semantics need of a route of any kind.
#[derive(Clone, Debug, PartialEq)]
pub struct RouteView {
    /// Group and kind.
    pub kind: RouteGroupKind,
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// `metadata.generation`.
    pub generation: i64,
    /// Parent references.
    pub parent_refs: Vec<ParentRef>,
    /// `spec.hostnames` the API would accept (others never reach a child).
    pub hostnames: Vec<String>,
    /// Whether the spec named any hostname at all (valid or not): a route whose every
    /// hostname is invalid matches nothing, it is not a catch-all.
    pub names_hostnames: bool,
    /// Backends of every rule.
    pub backend_refs: Vec<BackendRef>,
}

/// One route kind.
#[derive(Debug, PartialEq, Eq)]
pub struct RouteKind {
    /// Kind, such as `GRPCRoute`.
    pub kind: &'static str,
    /// Resource (plural) name, such as `grpcroutes`.
    pub plural: &'static str,
    /// API version served (group `gateway.networking.k8s.io`).
    pub version: &'static str,
    /// Listener protocols it attaches to.
    pub protocols: &'static [&'static str],
    /// Whether its CRD may be missing: the controller then ignores the kind (and looks it
    /// up again now and then) instead of waiting for a watch that never lists.
    pub optional: bool,
    /// Whether the kind has `spec.hostnames`.
    pub hostnames: bool,
    /// Conformance features (Gateway API v1.7.0 names) a class carrying the kind claims.
    pub features: &'static [&'static str],
}

/// Every route kind we implement, in the order `supportedKinds` lists them.
pub const ROUTE_KINDS: &[RouteKind] = &[
    RouteKind {
        kind: "HTTPRoute",
        plural: "httproutes",
        version: "v1",
        protocols: &["HTTP", "HTTPS"],
        optional: false,
        hostnames: true,
        features: &[
            "HTTPRoute",
            "HTTPRouteDestinationPortMatching",
            "HTTPRouteParentRefPort",
        ],
    },
    RouteKind {
        kind: "GRPCRoute",
        plural: "grpcroutes",
        version: "v1",
        protocols: &["HTTP", "HTTPS"],
        optional: true,
        hostnames: true,
        features: &["GRPCRoute"],
    },
    RouteKind {
        kind: "TLSRoute",
        plural: "tlsroutes",
        version: "v1",
        protocols: &["TLS"],
        optional: true,
        hostnames: true,
        features: &["TLSRoute", "TLSRouteModeMixed", "TLSRouteModeTerminate"],
    },
    RouteKind {
        kind: "TCPRoute",
        plural: "tcproutes",
        version: "v1",
        protocols: &["TCP"],
        optional: true,
        hostnames: false,
        features: &["TCPRoute"],
    },
    RouteKind {
        kind: "UDPRoute",
        plural: "udproutes",
        version: "v1",
        protocols: &["UDP"],
        optional: true,
        hostnames: false,
        features: &["UDPRoute"],
    },
];

/// The kind that a blueprint carries when it says nothing: HTTPRoute.
pub const DEFAULT_KIND: &str = "HTTPRoute";

/// The row of `kind`, if we implement it.
#[must_use]
pub fn by_kind(kind: &str) -> Option<&'static RouteKind> {
    ROUTE_KINDS.iter().find(|k| k.kind == kind)
}

/// The row of a `(group, kind)`, if we implement it.
#[must_use]
pub fn by_group_kind(group: &str, kind: &str) -> Option<&'static RouteKind> {
    (group == GATEWAY_API_GROUP)
        .then(|| by_kind(kind))
        .flatten()
}

/// Every kind name, in table order.
pub fn kind_names() -> impl Iterator<Item = &'static str> {
    ROUTE_KINDS.iter().map(|k| k.kind)
}

impl RouteKind {
    /// Group and kind.
    #[must_use]
    pub fn group_kind(&self) -> RouteGroupKind {
        RouteGroupKind {
            group: GATEWAY_API_GROUP.to_owned(),
            kind: self.kind.to_owned(),
        }
    }

    /// `apiVersion`.
    #[must_use]
    pub fn api_version(&self) -> String {
        format!("{GATEWAY_API_GROUP}/{}", self.version)
    }

    /// Whether a listener of `protocol` takes routes of this kind.
    #[must_use]
    pub fn attaches_to(&self, protocol: &str) -> bool {
        self.protocols.contains(&protocol)
    }

    /// What makes a route of this kind unreadable: the fields the view reads must have the
    /// shape the CRD gives them (the API server enforces it; files given to `render` may
    /// not). `Err` says which field is wrong.
    ///
    /// # Errors
    /// A message naming the field.
    pub fn check(&self, r: &Value) -> Result<(), String> {
        let spec = &r["spec"];
        if !spec.is_object() {
            return Err("spec must be a map".to_owned());
        }
        let list = |v: &Value, what: &str| -> Result<(), String> {
            if v.is_null() || v.is_array() {
                Ok(())
            } else {
                Err(format!("{what} must be a list"))
            }
        };
        list(&spec["parentRefs"], "spec.parentRefs")?;
        list(&spec["rules"], "spec.rules")?;
        if self.hostnames {
            list(&spec["hostnames"], "spec.hostnames")?;
        } else if !spec["hostnames"].is_null() {
            return Err(format!("spec.hostnames is not a field of {}", self.kind));
        }
        for (i, p) in spec["parentRefs"]
            .as_array()
            .into_iter()
            .flatten()
            .enumerate()
        {
            if p["name"].as_str().is_none_or(str::is_empty) {
                return Err(format!("spec.parentRefs[{i}].name is required"));
            }
        }
        for (i, rule) in spec["rules"].as_array().into_iter().flatten().enumerate() {
            list(
                &rule["backendRefs"],
                &format!("spec.rules[{i}].backendRefs"),
            )?;
            for (j, b) in rule["backendRefs"]
                .as_array()
                .into_iter()
                .flatten()
                .enumerate()
            {
                if b["name"].as_str().is_none_or(str::is_empty) {
                    return Err(format!("spec.rules[{i}].backendRefs[{j}].name is required"));
                }
            }
        }
        Ok(())
    }

    /// The kind-neutral view of a route of this kind, from its JSON. Every kind shares
    /// `spec.parentRefs` and `spec.rules[].backendRefs`; only some have `spec.hostnames`.
    #[must_use]
    pub fn view(&self, r: &Value) -> RouteView {
        let namespace = str_at(&r["metadata"]["namespace"]).to_owned();
        let parent_refs = r["spec"]["parentRefs"]
            .as_array()
            .map_or(&[][..], Vec::as_slice)
            .iter()
            .map(|p| parent_ref(p, &namespace))
            .collect();
        let backend_refs = r["spec"]["rules"]
            .as_array()
            .map_or(&[][..], Vec::as_slice)
            .iter()
            .flat_map(|rule| {
                rule["backendRefs"]
                    .as_array()
                    .map_or(&[][..], Vec::as_slice)
            })
            .map(|b| BackendRef {
                group: str_at(&b["group"]).to_owned(),
                kind: non_empty(&b["kind"]).unwrap_or("Service").to_owned(),
                namespace: non_empty(&b["namespace"]).unwrap_or(&namespace).to_owned(),
                name: str_at(&b["name"]).to_owned(),
                port: b["port"].as_i64().and_then(|p| i32::try_from(p).ok()),
            })
            .collect();
        let spec_hostnames: Vec<&str> = if self.hostnames {
            r["spec"]["hostnames"]
                .as_array()
                .map_or(&[][..], Vec::as_slice)
                .iter()
                .filter_map(Value::as_str)
                .collect()
        } else {
            Vec::new()
        };
        RouteView {
            kind: self.group_kind(),
            namespace,
            name: str_at(&r["metadata"]["name"]).to_owned(),
            generation: r["metadata"]["generation"].as_i64().unwrap_or(0),
            parent_refs,
            hostnames: spec_hostnames
                .iter()
                .filter(|h| hostnames::validate_hostname(h).is_ok())
                .map(|h| (*h).to_owned())
                .collect(),
            names_hostnames: !spec_hostnames.is_empty(),
            backend_refs,
        }
    }
}

fn str_at(v: &Value) -> &str {
    v.as_str().unwrap_or_default()
}

fn non_empty(v: &Value) -> Option<&str> {
    v.as_str().filter(|s| !s.is_empty())
}

fn parent_ref(p: &Value, route_namespace: &str) -> ParentRef {
    let mut status_ref = p.clone();
    if let Some(o) = status_ref.as_object_mut() {
        o.entry("group").or_insert_with(|| GATEWAY_API_GROUP.into());
        o.entry("kind").or_insert_with(|| "Gateway".into());
    }
    ParentRef {
        group: p["group"].as_str().unwrap_or(GATEWAY_API_GROUP).to_owned(),
        kind: p["kind"].as_str().unwrap_or("Gateway").to_owned(),
        namespace: non_empty(&p["namespace"])
            .unwrap_or(route_namespace)
            .to_owned(),
        name: str_at(&p["name"]).to_owned(),
        section_name: non_empty(&p["sectionName"]).map(str::to_owned),
        port: p["port"].as_i64().and_then(|p| i32::try_from(p).ok()),
        status_ref: std::sync::Arc::new(status_ref),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn route(kind: &str, spec: Value) -> Value {
        json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": kind,
               "metadata": {"namespace": "app", "name": "r", "generation": 3}, "spec": spec})
    }

    #[test]
    fn every_row_is_distinct_and_served_at_v1() {
        for (i, a) in ROUTE_KINDS.iter().enumerate() {
            assert_eq!(a.version, "v1", "{}", a.kind);
            assert_eq!(a.plural, a.kind.to_lowercase() + "s");
            assert!(!a.protocols.is_empty(), "{}", a.kind);
            for b in &ROUTE_KINDS[i + 1..] {
                assert_ne!(a.kind, b.kind);
            }
        }
        assert!(!by_kind(DEFAULT_KIND).is_some_and(|k| k.optional));
        assert!(by_group_kind("example.com", "HTTPRoute").is_none());
        assert!(by_kind("Ingress").is_none());
    }

    #[test]
    fn each_kind_reads_parents_backends_and_hostnames() {
        let spec = json!({
            "parentRefs": [{"name": "gw", "sectionName": "l", "port": 443},
                           {"name": "other", "namespace": "infra", "kind": "ListenerSet"}],
            "hostnames": ["a.example.com", "bad_host", "*.example.com"],
            "rules": [{"backendRefs": [{"name": "svc", "port": 80},
                                       {"name": "far", "namespace": "b", "kind": "Service", "group": ""}]},
                      {"backendRefs": [{"name": "two", "port": 81}]}]
        });
        for k in ROUTE_KINDS {
            let v = k.view(&route(k.kind, spec.clone()));
            assert_eq!(v.kind.kind, k.kind);
            assert_eq!(
                (v.namespace.as_str(), v.name.as_str(), v.generation),
                ("app", "r", 3)
            );
            assert_eq!(v.parent_refs.len(), 2);
            assert_eq!(v.parent_refs[0].namespace, "app");
            assert_eq!(v.parent_refs[0].section_name.as_deref(), Some("l"));
            assert_eq!(v.parent_refs[0].port, Some(443));
            assert_eq!(v.parent_refs[0].status_ref["kind"], "Gateway");
            assert_eq!(v.parent_refs[1].kind, "ListenerSet");
            assert_eq!(v.parent_refs[1].namespace, "infra");
            let backends: Vec<_> = v
                .backend_refs
                .iter()
                .map(|b| (b.namespace.as_str(), b.name.as_str(), b.kind.as_str()))
                .collect();
            assert_eq!(
                backends,
                [
                    ("app", "svc", "Service"),
                    ("b", "far", "Service"),
                    ("app", "two", "Service")
                ]
            );
            if k.hostnames {
                assert_eq!(
                    v.hostnames,
                    ["a.example.com", "*.example.com"],
                    "{}",
                    k.kind
                );
                assert!(v.names_hostnames);
            } else {
                // TCPRoute and UDPRoute have no hostnames: a field the API would drop is
                // never read.
                assert!(v.hostnames.is_empty() && !v.names_hostnames, "{}", k.kind);
            }
        }
    }

    #[test]
    fn check_names_the_field_a_view_cannot_read() {
        let tcp = by_kind("TCPRoute").unwrap();
        let http = by_kind("HTTPRoute").unwrap();
        let ok = json!({"parentRefs": [{"name": "gw"}], "rules": [{"backendRefs": [{"name": "db", "port": 5432}]}]});
        assert_eq!(tcp.check(&route("TCPRoute", ok.clone())), Ok(()));
        assert_eq!(http.check(&route("HTTPRoute", ok)), Ok(()));
        for (spec, msg) in [
            (json!("x"), "spec must be a map"),
            (
                json!({"parentRefs": {"name": "gw"}}),
                "spec.parentRefs must be a list",
            ),
            (
                json!({"parentRefs": [{}]}),
                "spec.parentRefs[0].name is required",
            ),
            (
                json!({"rules": [{"backendRefs": [{"port": 1}]}]}),
                "spec.rules[0].backendRefs[0].name is required",
            ),
            (
                json!({"hostnames": ["a.example.com"]}),
                "spec.hostnames is not a field of TCPRoute",
            ),
        ] {
            assert_eq!(tcp.check(&route("TCPRoute", spec)), Err(msg.to_owned()));
        }
    }

    #[test]
    fn a_route_without_spec_is_an_empty_view() {
        for k in ROUTE_KINDS {
            let v = k.view(&json!({"metadata": {"name": "x"}}));
            assert!(v.parent_refs.is_empty() && v.backend_refs.is_empty());
            assert_eq!(v.name, "x");
        }
    }
}
