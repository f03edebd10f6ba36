//! Random worlds for the planner: namespaces with labels, Gateways of the shipped classes
//! (and of a foreign and a missing class) with random listeners, TLS and infrastructure,
//! HTTPRoutes naming them in every way a parentRef can, ReferenceGrants, Secrets, and
//! value policies. A world is written as YAML documents and loaded the way
//! `gatewright render` loads files, beside the shipped `gatewayclasses/`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use base64::Engine as _;
use proptest::prelude::*;
use serde_json::{Value, json};

use crate::strings::{user_string, user_value};

/// The shipped classes.
pub const CLASSES: &[&str] = &[
    "istio-certmanager-externaldns",
    "traefik-certmanager-externaldns",
    "contour-istio",
    "aws-alb-crossplane",
];
/// A class of another controller, and one that does not exist.
pub const FOREIGN_CLASS: &str = "someone-else";
pub const MISSING_CLASS: &str = "missing";

pub const NAMESPACES: &[&str] = &["infra", "team-a", "team-b", "gatewright-system"];
const GATEWAY_NAMES: &[&str] = &[
    "public",
    "internal",
    "edge",
    "a.b",
    "gateway-with-a-name-that-is-longer-than-the-sixty-three-characters-of-a-label",
];
const LISTENER_NAMES: &[&str] = &["http", "https", "l1", "l2"];
const PORTS: &[i32] = &[80, 443, 8080, 8443];
const PROTOCOLS: &[&str] = &["HTTP", "HTTPS", "TLS", "TCP", "UDP", "example.com/QUIC"];
pub const HOSTNAMES: &[&str] = &[
    "*.example.com",
    "shop.example.com",
    "blog.example.com",
    "example.com",
    "a.b.example.com",
    "*.b.example.com",
    "*.org",
    "blog.example.org",
    "*",
    "Bad_Host.example.com",
    "1.2.3.4",
    "-bad.example.com",
    "bücher.example",
    "xn--bcher-kva.example",
    "",
];
const ROUTE_NAMES: &[&str] = &["storefront", "blog", "api", "r"];
const SECRET_NAMES: &[&str] = &["cert", "other"];
const LABEL_KEYS: &[&str] = &["env", "team", "shared"];
const LABEL_VALUES: &[&str] = &["prod", "dev", "a"];

#[derive(Clone, Debug)]
pub struct Ns {
    pub name: &'static str,
    pub labels: BTreeMap<&'static str, &'static str>,
}

#[derive(Clone, Debug)]
pub enum AllowedFrom {
    Unset,
    Same,
    All,
    Selector(
        BTreeMap<&'static str, &'static str>,
        Option<(&'static str, &'static str)>,
    ),
}

/// A listener's `tls`: mode, certificateRefs (namespace, name), and whether it asks for
/// a generated certificate.
pub type Tls = (
    &'static str,
    Vec<(Option<&'static str>, &'static str)>,
    bool,
);

#[derive(Clone, Debug)]
pub struct Listener {
    pub name: &'static str,
    pub port: i32,
    pub protocol: &'static str,
    pub hostname: Option<&'static str>,
    pub from: AllowedFrom,
    pub kinds: Option<&'static str>,
    /// `None`: no tls; else mode and certificateRefs (namespace, name).
    pub tls: Option<Tls>,
}

#[derive(Clone, Debug)]
pub struct Gw {
    pub ns: &'static str,
    pub name: &'static str,
    pub class: &'static str,
    pub listeners: Vec<Listener>,
    pub labels: BTreeMap<String, String>,
    pub annotations: BTreeMap<String, String>,
    /// `None`, a GatewayConfig name, or a ref of the wrong kind.
    pub params: Option<(&'static str, &'static str)>,
    pub address: Option<&'static str>,
}

#[derive(Clone, Debug)]
pub struct ParentRef {
    /// Names the Gateway of this index in the world (modulo their number), else `name`.
    pub target: Option<usize>,
    pub name: &'static str,
    pub namespace: Option<&'static str>,
    pub section: Option<&'static str>,
    pub port: Option<i32>,
    pub kind: Option<&'static str>,
}

#[derive(Clone, Debug)]
pub struct Route {
    pub ns: &'static str,
    pub name: &'static str,
    pub parents: Vec<ParentRef>,
    pub hostnames: Vec<&'static str>,
    pub path: String,
    pub header: (String, String),
    pub backends: Vec<(&'static str, Option<&'static str>)>,
}

#[derive(Clone, Debug)]
pub struct Grant {
    pub ns: &'static str,
    pub from_kind: &'static str,
    pub from_ns: &'static str,
    pub to_kind: &'static str,
    pub to_name: Option<&'static str>,
}

#[derive(Clone, Debug)]
pub struct Secret {
    pub ns: &'static str,
    pub name: &'static str,
    /// 0 valid TLS, 1 Opaque, 2 TLS with bad PEM.
    pub quality: u8,
}

#[derive(Clone, Debug)]
pub struct Policy {
    /// GatewayConfig (true) or GatewayClassConfig.
    pub gateway_config: bool,
    pub ns: &'static str,
    pub name: &'static str,
    pub target: Option<(&'static str, &'static str)>,
    pub default: Option<Value>,
    pub override_: Option<Value>,
}

#[derive(Clone, Debug)]
pub struct World {
    pub namespaces: Vec<Ns>,
    pub gateways: Vec<Gw>,
    pub routes: Vec<Route>,
    pub grants: Vec<Grant>,
    pub secrets: Vec<Secret>,
    pub policies: Vec<Policy>,
}

fn pick<T: Clone + std::fmt::Debug + 'static>(xs: &'static [T]) -> impl Strategy<Value = T> {
    prop::sample::select(xs)
}

fn labels() -> impl Strategy<Value = BTreeMap<&'static str, &'static str>> {
    prop::collection::btree_map(pick(LABEL_KEYS), pick(LABEL_VALUES), 0..3)
}

fn listener() -> impl Strategy<Value = Listener> {
    let from = prop_oneof![
        1 => Just(AllowedFrom::Unset),
        1 => Just(AllowedFrom::Same),
        6 => Just(AllowedFrom::All),
        1 => (labels(), prop::option::of((pick(LABEL_KEYS), prop::sample::select(vec!["In", "NotIn", "Exists", "DoesNotExist", "Bogus"]))))
            .prop_map(|(l, e)| AllowedFrom::Selector(l, e)),
    ];
    let tls = prop::option::of((
        prop::sample::select(vec!["Terminate", "Passthrough"]),
        prop::collection::vec(
            (prop::option::of(pick(NAMESPACES)), pick(SECRET_NAMES)),
            0..3,
        ),
        any::<bool>(),
    ));
    (
        pick(LISTENER_NAMES),
        pick(PORTS),
        prop_oneof![6 => Just("HTTP"), 3 => Just("HTTPS"), 2 => pick(PROTOCOLS)],
        prop::option::of(pick(HOSTNAMES)),
        from,
        prop::option::weighted(
            0.2,
            prop::sample::select(vec!["HTTPRoute", "GRPCRoute", "Bogus"]),
        ),
        tls,
    )
        .prop_map(
            |(name, port, protocol, hostname, from, kinds, tls)| Listener {
                name,
                port,
                protocol,
                hostname: hostname.filter(|h| !h.is_empty()),
                from,
                kinds,
                tls,
            },
        )
}

fn gateway() -> impl Strategy<Value = Gw> {
    let class = prop_oneof![
        6 => pick(CLASSES),
        1 => Just(FOREIGN_CLASS),
        1 => Just(MISSING_CLASS),
    ];
    (
        pick(NAMESPACES),
        prop_oneof![2 => Just(GATEWAY_NAMES[0]), 3 => pick(GATEWAY_NAMES)],
        class,
        prop::collection::vec(listener(), 0..5),
        prop::collection::btree_map("[a-z]{1,5}(/[a-z]{1,5})?", user_string(), 0..3),
        prop::collection::btree_map("[a-z]{1,5}", user_string(), 0..3),
        prop::option::weighted(
            0.2,
            prop_oneof![
                Just(("gatewright.dev", "gw-config")),
                Just(("gatewright.dev", "absent")),
                Just(("example.com", "gw-config")),
            ],
        ),
        prop::option::weighted(0.2, prop::sample::select(vec!["192.0.2.1", "not-an-ip"])),
    )
        .prop_map(
            |(ns, name, class, listeners, labels, annotations, params, address)| Gw {
                ns,
                name,
                class,
                listeners,
                labels,
                annotations,
                params,
                address,
            },
        )
}

fn parent_ref() -> impl Strategy<Value = ParentRef> {
    (
        prop::option::weighted(0.8, 0usize..8),
        pick(GATEWAY_NAMES),
        prop::option::of(pick(NAMESPACES)),
        prop::option::weighted(0.3, pick(LISTENER_NAMES)),
        prop::option::weighted(0.15, prop::sample::select(vec![80, 443, 8080, 9999])),
        prop::option::weighted(0.1, prop::sample::select(vec!["Gateway", "Service"])),
    )
        .prop_map(|(target, name, namespace, section, port, kind)| ParentRef {
            target,
            name,
            namespace,
            section,
            port,
            kind,
        })
}

fn route() -> impl Strategy<Value = Route> {
    (
        pick(NAMESPACES),
        pick(ROUTE_NAMES),
        prop::collection::vec(parent_ref(), 0..4),
        prop_oneof![
            1 => Just(Vec::new()),
            1 => prop::collection::vec(pick(HOSTNAMES), 1..3),
            1 => prop::collection::vec(pick(&HOSTNAMES[..6]), 1..3),
        ],
        user_string(),
        (user_string(), user_string()),
        prop::collection::vec(
            (
                prop::sample::select(vec!["svc", "other"]),
                prop::option::weighted(0.2, pick(NAMESPACES)),
            ),
            0..3,
        ),
    )
        .prop_map(
            |(ns, name, parents, hostnames, path, header, backends)| Route {
                ns,
                name,
                parents,
                hostnames,
                path,
                header,
                backends,
            },
        )
}

fn grant() -> impl Strategy<Value = Grant> {
    (
        pick(NAMESPACES),
        prop::sample::select(vec!["Gateway", "HTTPRoute"]),
        pick(NAMESPACES),
        prop::sample::select(vec!["Secret", "Service"]),
        prop::option::of(pick(SECRET_NAMES)),
    )
        .prop_map(|(ns, from_kind, from_ns, to_kind, to_name)| Grant {
            ns,
            from_kind,
            from_ns,
            to_kind,
            to_name,
        })
}

/// Values that overlap the keys the shipped blueprints read, with user data in them.
fn values() -> impl Strategy<Value = Value> {
    let key = prop::sample::select(vec![
        "istio",
        "traefik",
        "certificate",
        "dns",
        "aws",
        "crossplane",
        "ingress",
        "autoscaling",
        "disruption",
    ]);
    let inner = prop_oneof![
        3 => prop::collection::btree_map(
            prop::sample::select(vec!["gatewayClassName", "ports", "ttl", "issuerRef", "region", "tags", "providerConfig", "className", "minReplicas", "maxReplicas", "minAvailable", "hostedZoneId", "certificateArn", "subnets"]),
            user_value(),
            0..3,
        ).prop_map(|m| json!(m)),
        1 => user_value(),
    ];
    prop::collection::btree_map(key, inner, 0..3).prop_map(|m| json!(m))
}

fn policy() -> impl Strategy<Value = Policy> {
    (
        any::<bool>(),
        pick(NAMESPACES),
        prop::sample::select(vec!["gw-config", "p2"]),
        prop::option::weighted(
            0.8,
            prop_oneof![
                (Just("Gateway"), pick(GATEWAY_NAMES)),
                (Just("GatewayClass"), pick(CLASSES)),
                (Just("Namespace"), pick(NAMESPACES)),
            ],
        ),
        prop::option::of(values()),
        prop::option::weighted(0.3, values()),
    )
        .prop_map(
            |(gateway_config, ns, name, target, default, override_)| Policy {
                gateway_config,
                ns,
                name,
                target,
                default,
                override_,
            },
        )
}

pub fn world() -> impl Strategy<Value = World> {
    (
        prop::collection::vec((pick(NAMESPACES), labels()), 0..4),
        prop::collection::vec(gateway(), 1..4),
        prop::collection::vec(route(), 0..6),
        prop::collection::vec(grant(), 0..3),
        prop::collection::vec(
            (pick(NAMESPACES), pick(SECRET_NAMES), 0u8..3).prop_map(|(ns, name, quality)| Secret {
                ns,
                name,
                quality,
            }),
            0..4,
        ),
        prop::collection::vec(policy(), 0..3),
    )
        .prop_map(
            |(namespaces, gateways, routes, grants, secrets, policies)| World {
                namespaces: namespaces
                    .into_iter()
                    .map(|(name, labels)| Ns { name, labels })
                    .collect(),
                gateways,
                routes,
                grants,
                secrets,
                policies,
            },
        )
}

fn uid(kind: &str, ns: &str, name: &str) -> String {
    use sha2::{Digest, Sha256};
    let h = Sha256::digest(format!("{kind}/{ns}/{name}").as_bytes());
    let hex: String = h[..8].iter().map(|b| format!("{b:02x}")).collect();
    format!("{}-0000-4000-8000-{}", &hex[..8], &hex[8..16])
}

/// A PEM block whose body decodes to DER-looking bytes (a SEQUENCE): enough for the
/// Secret check, which does not parse certificates.
fn pem(label: &str) -> String {
    let mut der = vec![0x30u8, 0x82, 0x01, 0x0a];
    der.extend(std::iter::repeat_n(0x42u8, 40));
    let b64 = base64::engine::general_purpose::STANDARD.encode(der);
    format!("-----BEGIN {label}-----\n{b64}\n-----END {label}-----\n")
}

impl World {
    /// The world as documents (the objects a user would `kubectl apply`), without
    /// duplicates the API server would refuse (same name; identical parentRefs).
    pub fn documents(&self) -> Vec<Value> {
        let mut docs = Vec::new();
        let mut seen: BTreeSet<(String, String, String)> = BTreeSet::new();
        let mut fresh = |kind: &str, ns: &str, name: &str| {
            seen.insert((kind.to_owned(), ns.to_owned(), name.to_owned()))
        };
        docs.push(json!({
            "apiVersion": "gateway.networking.k8s.io/v1", "kind": "GatewayClass",
            "metadata": {"name": FOREIGN_CLASS},
            "spec": {"controllerName": "example.com/other"},
        }));
        for n in &self.namespaces {
            if fresh("Namespace", "", n.name) {
                docs.push(json!({"apiVersion": "v1", "kind": "Namespace",
                    "metadata": {"name": n.name, "labels": n.labels}}));
            }
        }
        for g in &self.gateways {
            if !fresh("Gateway", g.ns, g.name) {
                continue;
            }
            let mut names = BTreeSet::new();
            let listeners: Vec<Value> = g
                .listeners
                .iter()
                // Listener names are unique in a Gateway (the API refuses otherwise).
                .filter(|l| names.insert(l.name))
                .map(listener_json)
                .collect();
            let mut spec = json!({"gatewayClassName": g.class, "listeners": listeners});
            let mut infra = serde_json::Map::new();
            if !g.labels.is_empty() {
                infra.insert("labels".into(), json!(g.labels));
            }
            if !g.annotations.is_empty() {
                infra.insert("annotations".into(), json!(g.annotations));
            }
            if let Some((group, name)) = g.params {
                infra.insert(
                    "parametersRef".into(),
                    json!({"group": group, "kind": "GatewayConfig", "name": name}),
                );
            }
            if !infra.is_empty() {
                spec["infrastructure"] = Value::Object(infra);
            }
            if let Some(a) = g.address {
                spec["addresses"] = json!([{"type": "IPAddress", "value": a}]);
            }
            docs.push(json!({
                "apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
                "metadata": {"name": g.name, "namespace": g.ns, "uid": uid("Gateway", g.ns, g.name), "generation": 1},
                "spec": spec,
            }));
        }
        for r in &self.routes {
            if !fresh("HTTPRoute", r.ns, r.name) {
                continue;
            }
            let mut refs: Vec<Value> = Vec::new();
            for p in &r.parents {
                let target = p
                    .target
                    .and_then(|i| self.gateways.get(i % self.gateways.len().max(1)));
                let mut v = json!({"name": target.map_or(p.name, |g| g.name)});
                match (target, p.namespace) {
                    // The route's own namespace is the default.
                    (Some(g), _) if g.ns == r.ns && p.namespace.is_none() => {}
                    (Some(g), _) => v["namespace"] = json!(g.ns),
                    (None, Some(ns)) => v["namespace"] = json!(ns),
                    (None, None) => {}
                }
                if let Some(s) = p.section {
                    v["sectionName"] = json!(s);
                }
                if let Some(port) = p.port {
                    v["port"] = json!(port);
                }
                if let Some(k) = p.kind {
                    v["kind"] = json!(k);
                }
                if parent_ref_allowed(&refs, &v) {
                    refs.push(v);
                }
            }
            let backends: Vec<Value> = r
                .backends
                .iter()
                .map(|(name, ns)| {
                    let mut b = json!({"name": name, "port": 8080});
                    if let Some(ns) = ns {
                        b["namespace"] = json!(ns);
                    }
                    b
                })
                .collect();
            docs.push(json!({
                "apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
                "metadata": {"name": r.name, "namespace": r.ns, "uid": uid("HTTPRoute", r.ns, r.name), "generation": 2},
                "spec": {
                    "parentRefs": refs,
                    "hostnames": r.hostnames,
                    "rules": [{
                        "matches": [{
                            "path": {"type": "PathPrefix", "value": r.path},
                            "headers": [{"name": r.header.0, "value": r.header.1}],
                        }],
                        "backendRefs": backends,
                    }],
                },
            }));
        }
        for (i, g) in self.grants.iter().enumerate() {
            let mut to = json!({"group": "", "kind": g.to_kind});
            if let Some(n) = g.to_name {
                to["name"] = json!(n);
            }
            docs.push(json!({
                "apiVersion": "gateway.networking.k8s.io/v1beta1", "kind": "ReferenceGrant",
                "metadata": {"name": format!("grant{i}"), "namespace": g.ns},
                "spec": {
                    "from": [{"group": "gateway.networking.k8s.io", "kind": g.from_kind, "namespace": g.from_ns}],
                    "to": [to],
                },
            }));
        }
        for s in &self.secrets {
            if !fresh("Secret", s.ns, s.name) {
                continue;
            }
            let (type_, key) = match s.quality {
                0 => ("kubernetes.io/tls", pem("PRIVATE KEY")),
                1 => ("Opaque", pem("PRIVATE KEY")),
                _ => ("kubernetes.io/tls", "not a key".to_owned()),
            };
            docs.push(json!({
                "apiVersion": "v1", "kind": "Secret", "type": type_,
                "metadata": {"name": s.name, "namespace": s.ns},
                "stringData": {"tls.crt": pem("CERTIFICATE"), "tls.key": key},
            }));
        }
        for p in &self.policies {
            let kind = if p.gateway_config {
                "GatewayConfig"
            } else {
                "GatewayClassConfig"
            };
            if !fresh(kind, p.ns, p.name) {
                continue;
            }
            let mut spec = serde_json::Map::new();
            match p.target {
                Some((k, n)) => {
                    let group = if k == "Namespace" {
                        ""
                    } else {
                        "gateway.networking.k8s.io"
                    };
                    spec.insert(
                        "targetRef".into(),
                        json!({"group": group, "kind": k, "name": n}),
                    );
                }
                // A GatewayClassConfig needs a target.
                None if !p.gateway_config => {
                    spec.insert(
                        "targetRef".into(),
                        json!({"group": "", "kind": "Namespace", "name": p.ns}),
                    );
                }
                None => {}
            }
            if let Some(d) = &p.default {
                spec.insert("default".into(), d.clone());
            }
            if let Some(o) = &p.override_ {
                spec.insert("override".into(), o.clone());
            }
            docs.push(json!({
                "apiVersion": "gatewright.dev/v1alpha1", "kind": kind,
                "metadata": {"name": p.name, "namespace": p.ns},
                "spec": spec,
            }));
        }
        docs
    }
}

/// Whether the API server would take `new` beside `refs` (the CEL rules of
/// `spec.parentRefs`): references to the same parent (group, kind, name and namespace as
/// written) must all set sectionName or none, all set port or none, and differ in them.
fn parent_ref_allowed(refs: &[Value], new: &Value) -> bool {
    let parent = |v: &Value| {
        (
            v["group"]
                .as_str()
                .unwrap_or("gateway.networking.k8s.io")
                .to_owned(),
            v["kind"].as_str().unwrap_or("Gateway").to_owned(),
            v["name"].as_str().unwrap_or_default().to_owned(),
            v["namespace"].as_str().unwrap_or_default().to_owned(),
        )
    };
    refs.iter().filter(|r| parent(r) == parent(new)).all(|r| {
        r.get("sectionName").is_some() == new.get("sectionName").is_some()
            && r.get("port").is_some() == new.get("port").is_some()
            && (r["sectionName"] != new["sectionName"] || r["port"] != new["port"])
    })
}

fn listener_json(l: &Listener) -> Value {
    let mut v = json!({"name": l.name, "port": l.port, "protocol": l.protocol});
    if let Some(h) = l.hostname {
        v["hostname"] = json!(h);
    }
    let mut allowed = serde_json::Map::new();
    match &l.from {
        AllowedFrom::Unset => {}
        AllowedFrom::Same => {
            allowed.insert("namespaces".into(), json!({"from": "Same"}));
        }
        AllowedFrom::All => {
            allowed.insert("namespaces".into(), json!({"from": "All"}));
        }
        AllowedFrom::Selector(labels, expr) => {
            let mut sel = json!({"matchLabels": labels});
            if let Some((key, op)) = expr {
                let values = if matches!(*op, "In" | "NotIn") {
                    json!(["prod"])
                } else {
                    json!(null)
                };
                let mut e = json!({"key": key, "operator": op});
                if !values.is_null() {
                    e["values"] = values;
                }
                sel["matchExpressions"] = json!([e]);
            }
            allowed.insert(
                "namespaces".into(),
                json!({"from": "Selector", "selector": sel}),
            );
        }
    }
    if let Some(k) = l.kinds {
        allowed.insert("kinds".into(), json!([{"kind": k}]));
    }
    if !allowed.is_empty() {
        v["allowedRoutes"] = Value::Object(allowed);
    }
    if let Some((mode, refs, generated)) = &l.tls {
        let refs: Vec<Value> = refs
            .iter()
            .map(|(ns, name)| {
                let mut r = json!({"kind": "Secret", "name": name});
                if let Some(ns) = ns {
                    r["namespace"] = json!(ns);
                }
                r
            })
            .collect();
        let mut tls = json!({"mode": mode, "certificateRefs": refs});
        if *generated {
            tls["options"] = json!({"gatewright.dev/certificate": "generated"});
        }
        v["tls"] = tls;
    }
    v
}

/// The shipped GatewayClasses and blueprints.
pub fn classes_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("gatewayclasses")
}

/// Writes documents to `dir/name` as a YAML stream.
pub fn write_docs(dir: &Path, name: &str, docs: &[Value]) {
    let text: String = docs
        .iter()
        .map(|d| format!("---\n{}", serde_saphyr::to_string(d).unwrap()))
        .collect();
    std::fs::write(dir.join(name), text).unwrap();
}
