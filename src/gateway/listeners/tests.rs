//! Tests of listener evaluation: the [`World`] lookup and the listener builders (the route
//! and ListenerSet tests use them too), then tables of Gateways with the conditions their
//! listeners get.

use std::collections::BTreeMap;

use gateway_api::apis::standard::gateways::{
    Gateway, GatewayAddresses, GatewayListeners, GatewayListenersAllowedRoutes,
    GatewayListenersAllowedRoutesKinds, GatewayListenersTls, GatewayListenersTlsCertificateRefs,
};
use gateway_api::apis::standard::referencegrants::{
    ReferenceGrant, ReferenceGrantFrom, ReferenceGrantSpec, ReferenceGrantTo,
};

use super::{
    ClassKinds, ListenerEval, RouteGroupKind, TLS_PASSTHROUGH, TLS_TERMINATE, evaluate_gateway,
    evaluate_gateway_for,
};
use crate::gateway::Status;
use crate::gateway::conditions::{Cond, reasons, types};
use crate::gateway::lookup::Lookup;
use crate::gateway::refs::SecretInfo;
use crate::gateway::refs::TLS_SECRET_TYPE;
use crate::gateway::refs::tests::{CERT, KEY, secret};
#[derive(Default)]
pub struct World {
    pub namespaces: BTreeMap<String, BTreeMap<String, String>>,
    pub secrets: BTreeMap<(String, String), SecretInfo>,
    pub grants: BTreeMap<String, Vec<ReferenceGrant>>,
    pub services: Option<Vec<(String, String)>>,
}

impl Lookup for World {
    fn namespace_labels(&self, namespace: &str) -> Option<&BTreeMap<String, String>> {
        self.namespaces.get(namespace)
    }
    fn secret(&self, namespace: &str, name: &str) -> Option<&SecretInfo> {
        self.secrets.get(&(namespace.to_owned(), name.to_owned()))
    }
    fn reference_grants(&self, namespace: &str) -> Vec<&ReferenceGrant> {
        self.grants
            .get(namespace)
            .map(|v| v.iter().collect())
            .unwrap_or_default()
    }
    fn service_exists(&self, namespace: &str, name: &str) -> Option<bool> {
        self.services
            .as_ref()
            .map(|s| s.iter().any(|(n, m)| n == namespace && m == name))
    }
}

impl World {
    pub fn with_namespace(mut self, name: &str, labels: &[(&str, &str)]) -> Self {
        self.namespaces.insert(
            name.into(),
            labels
                .iter()
                .map(|(k, v)| ((*k).into(), (*v).into()))
                .collect(),
        );
        self
    }
    pub fn with_tls_secret(mut self, ns: &str, name: &str) -> Self {
        self.secrets.insert(
            (ns.into(), name.into()),
            SecretInfo::from_secret(&secret(TLS_SECRET_TYPE, CERT.as_bytes(), KEY.as_bytes())),
        );
        self
    }
    pub fn with_grant(
        mut self,
        ns: &str,
        from: (&str, &str, &str),
        to: (&str, &str, Option<&str>),
    ) -> Self {
        let g = ReferenceGrant {
            metadata: Default::default(),
            spec: ReferenceGrantSpec {
                from: vec![ReferenceGrantFrom {
                    group: from.0.into(),
                    kind: from.1.into(),
                    namespace: from.2.into(),
                }],
                to: vec![ReferenceGrantTo {
                    group: to.0.into(),
                    kind: to.1.into(),
                    name: to.2.map(Into::into),
                }],
            },
        };
        self.grants.entry(ns.into()).or_default().push(g);
        self
    }
}

pub fn listener(name: &str, port: i32, protocol: &str, hostname: Option<&str>) -> GatewayListeners {
    GatewayListeners {
        name: name.into(),
        port,
        protocol: protocol.into(),
        hostname: hostname.map(Into::into),
        ..Default::default()
    }
}

pub fn https(
    name: &str,
    hostname: Option<&str>,
    secret_ns: Option<&str>,
    secret: &str,
) -> GatewayListeners {
    let mut l = listener(name, 443, "HTTPS", hostname);
    l.tls = Some(GatewayListenersTls {
        certificate_refs: Some(vec![GatewayListenersTlsCertificateRefs {
            name: secret.into(),
            namespace: secret_ns.map(Into::into),
            ..Default::default()
        }]),
        ..Default::default()
    });
    l
}

pub fn gw(listeners: Vec<GatewayListeners>) -> Gateway {
    let mut g = Gateway::default();
    g.metadata.name = Some("gw".into());
    g.metadata.namespace = Some("infra".into());
    g.metadata.generation = Some(1);
    g.spec.gateway_class_name = "ours".into();
    g.spec.listeners = listeners;
    g
}

fn http_only() -> ClassKinds {
    ClassKinds {
        kinds: vec![RouteGroupKind::gw("HTTPRoute")],
        source: "GatewayClass alb".into(),
    }
}

pub fn tls(
    name: &str,
    port: i32,
    hostname: Option<&str>,
    mode: &str,
    secret: Option<&str>,
) -> GatewayListeners {
    use gateway_api::apis::standard::gateways::GatewayListenersTlsMode;
    let mut l = listener(name, port, "TLS", hostname);
    l.tls = Some(GatewayListenersTls {
        mode: Some(if mode == TLS_PASSTHROUGH {
            GatewayListenersTlsMode::Passthrough
        } else {
            GatewayListenersTlsMode::Terminate
        }),
        certificate_refs: secret.map(|s| {
            vec![GatewayListenersTlsCertificateRefs {
                name: s.into(),
                ..Default::default()
            }]
        }),
        ..Default::default()
    });
    l
}

/// A message, whole or a part of it.
enum Text {
    Is(&'static str),
    Has(&'static str),
}

/// What one listener is expected to come out as; what is `None` is not checked.
#[derive(Default)]
struct Want {
    /// Whether `Accepted` is True.
    accepted: Option<bool>,
    /// `Accepted`'s reason.
    accepted_reason: Option<&'static str>,
    /// `Accepted`'s message.
    accepted_message: Option<Text>,
    /// Whether `ResolvedRefs` is True.
    refs: Option<bool>,
    /// `ResolvedRefs`' reason.
    refs_reason: Option<&'static str>,
    /// `ResolvedRefs`' message.
    refs_message: Option<&'static str>,
    /// `Conflicted`'s reason, `None` for not conflicted.
    conflicted: Option<Option<&'static str>>,
    /// Whether it has `OverlappingTLSConfig`.
    overlapping_tls: Option<bool>,
    /// [`ListenerEval::is_valid`].
    valid: Option<bool>,
    /// [`ListenerEval::terminates_tls`].
    terminates_tls: Option<bool>,
    /// The supported kinds, by name (all of the Gateway API group).
    kinds: Option<Vec<&'static str>>,
    /// The certificate Secrets, `(namespace, name)`.
    certificate_refs: Option<Vec<(&'static str, &'static str)>>,
}

/// A listener of which nothing is checked (but that it is there); the methods add checks.
fn any() -> Want {
    Want::default()
}

/// `fn $name(self, v: $t) -> Self`: the check of `$field` set to `v`.
macro_rules! setters {
    ($($name:ident: $field:ident = $t:ty;)*) => {
        $(fn $name(mut self, v: $t) -> Self {
            self.$field = Some(v.into());
            self
        })*
    };
}

impl Want {
    setters! {
        accepted: accepted = bool;
        reason: accepted_reason = &'static str;
        message: accepted_message = Text;
        refs: refs = bool;
        refs_reason: refs_reason = &'static str;
        refs_message: refs_message = &'static str;
        conflicted: conflicted = Option<&'static str>;
        overlapping: overlapping_tls = bool;
        valid: valid = bool;
        terminates_tls: terminates_tls = bool;
        kinds: kinds = &[&'static str];
        certs: certificate_refs = &[(&'static str, &'static str)];
    }

    fn check(&self, case: &str, l: &ListenerEval) {
        let at = format!("{case}: listener {:?}", l.name);
        if let Some(v) = self.accepted {
            assert_eq!(l.accepted.status.is_true(), v, "{at}: {:?}", l.accepted);
        }
        if let Some(r) = self.accepted_reason {
            assert_eq!(l.accepted.reason, r, "{at}: {:?}", l.accepted);
        }
        match self.accepted_message {
            Some(Text::Is(m)) => assert_eq!(l.accepted.message, m, "{at}"),
            Some(Text::Has(m)) => {
                assert!(
                    l.accepted.message.contains(m),
                    "{at}: {}",
                    l.accepted.message
                );
            }
            None => {}
        }
        if let Some(v) = self.refs {
            assert_eq!(
                l.resolved_refs.status.is_true(),
                v,
                "{at}: {:?}",
                l.resolved_refs
            );
        }
        if let Some(r) = self.refs_reason {
            assert_eq!(l.resolved_refs.reason, r, "{at}: {:?}", l.resolved_refs);
        }
        if let Some(m) = self.refs_message {
            assert_eq!(l.resolved_refs.message, m, "{at}");
        }
        if let Some(want) = self.conflicted {
            let got = l.conflicted.as_ref().map(|c| c.reason.as_str());
            assert_eq!(got, want, "{at}");
        }
        if let Some(v) = self.overlapping_tls {
            assert_eq!(
                l.overlapping_tls.is_some(),
                v,
                "{at}: {:?}",
                l.overlapping_tls
            );
        }
        if let Some(v) = self.valid {
            assert_eq!(l.is_valid(), v, "{at}: {l:?}");
        }
        if let Some(v) = self.terminates_tls {
            assert_eq!(l.terminates_tls(), v, "{at}: {l:?}");
        }
        if let Some(k) = &self.kinds {
            let want: Vec<RouteGroupKind> = k.iter().map(|k| RouteGroupKind::gw(k)).collect();
            assert_eq!(l.supported_kinds, want, "{at}");
        }
        if let Some(c) = &self.certificate_refs {
            let want: Vec<(String, String)> = c
                .iter()
                .map(|(ns, n)| ((*ns).to_owned(), (*n).to_owned()))
                .collect();
            assert_eq!(l.certificate_refs, want, "{at}");
        }
        // Always: a conflicted listener is not accepted.
        if l.conflicted.is_some() {
            assert!(
                !l.accepted.status.is_true(),
                "{at}: conflicted yet accepted"
            );
        }
    }
}

/// One Gateway judged in a world, for a class, and what it and each of its listeners (in
/// order, all of them) are expected to come out as.
struct Case {
    name: &'static str,
    world: World,
    class: ClassKinds,
    gateway: Gateway,
    /// The Gateway's `Accepted` status.
    status: Option<Status>,
    /// The Gateway's `Accepted` reason.
    reason: Option<&'static str>,
    listeners: Vec<Want>,
}

/// A case of `gw(listeners)` in an empty world, for a class that carries every kind.
fn case(name: &'static str, listeners: Vec<GatewayListeners>) -> Case {
    Case {
        name,
        world: World::default(),
        class: ClassKinds::all(),
        gateway: gw(listeners),
        status: None,
        reason: None,
        listeners: Vec::new(),
    }
}

impl Case {
    fn world(self, world: World) -> Self {
        Self { world, ..self }
    }
    fn class(self, class: ClassKinds) -> Self {
        Self { class, ..self }
    }
    fn gateway(self, status: Option<Status>, reason: Option<&'static str>) -> Self {
        Self {
            status,
            reason,
            ..self
        }
    }
    fn want(self, listeners: Vec<Want>) -> Self {
        Self { listeners, ..self }
    }
}

/// Judges each case's Gateway and checks it and every listener.
fn check(cases: Vec<Case>) {
    for c in cases {
        let e = evaluate_gateway_for(&c.gateway, &c.world, &c.class);
        if let Some(s) = c.status {
            assert_eq!(e.accepted.status, s, "{}: {:?}", c.name, e.accepted);
        }
        if let Some(r) = c.reason {
            assert_eq!(e.accepted.reason, r, "{}: {:?}", c.name, e.listeners);
        }
        assert_eq!(e.listeners.len(), c.listeners.len(), "{}", c.name);
        for (l, want) in e.listeners.iter().zip(&c.listeners) {
            want.check(c.name, l);
        }
    }
}

#[test]
fn unsupported_protocol_one_or_two_listeners() {
    check(vec![
        case("SCTP alone", vec![listener("sctp", 53, "SCTP", None)])
            .gateway(Some(Status::False), Some(reasons::LISTENERS_NOT_VALID))
            .want(vec![
                any()
                    .reason(reasons::UNSUPPORTED_PROTOCOL)
                    .message(Text::Has("HTTP, HTTPS, TLS, TCP, UDP"))
                    .kinds(&[]),
            ]),
        // UDP on a class whose datapath carries HTTP only: the class's own words.
        case(
            "UDP on a class that carries HTTP only",
            vec![
                listener("http", 80, "HTTP", None),
                listener("udp", 53, "UDP", None),
            ],
        )
        .class(http_only())
        .gateway(Some(Status::True), Some(reasons::LISTENERS_NOT_VALID))
        .want(vec![
            any().kinds(&["HTTPRoute"]),
            any()
                .reason(reasons::UNSUPPORTED_PROTOCOL)
                .message(Text::Is(
                    "GatewayClass alb carries no route kind for protocol \"UDP\" (it carries HTTPRoute): its datapath cannot serve this listener",
                )),
        ]),
        // Every kind: HTTP listeners take HTTPRoute and GRPCRoute, each other protocol its own.
        case(
            "every protocol, every kind",
            vec![
                listener("http", 80, "HTTP", None),
                listener("tcp", 5432, "TCP", None),
                listener("udp", 53, "UDP", None),
                tls("tls", 443, Some("db.example.com"), TLS_PASSTHROUGH, None),
            ],
        )
        .gateway(None, Some(reasons::ACCEPTED))
        .want(vec![
            any().kinds(&["HTTPRoute", "GRPCRoute"]),
            any().kinds(&["TCPRoute"]),
            any().kinds(&["UDPRoute"]),
            any().kinds(&["TLSRoute"]),
        ]),
    ]);
}

#[test]
fn tls_listeners_by_mode() {
    let w = || World::default().with_tls_secret("infra", "cert");
    // HTTPS cannot pass TLS through.
    let mut h = https("h", None, None, "cert");
    if let Some(t) = &mut h.tls {
        t.mode = Some(gateway_api::apis::standard::gateways::GatewayListenersTlsMode::Passthrough);
    }
    check(vec![
        case(
            "mixed mode, and Terminate without a certificate",
            vec![
                // Mixed mode: Terminate and Passthrough on one port, told apart by SNI.
                tls(
                    "term",
                    8443,
                    Some("a.example.com"),
                    TLS_TERMINATE,
                    Some("cert"),
                ),
                tls("pass", 8443, Some("b.example.com"), TLS_PASSTHROUGH, None),
                // Terminate without a certificate: refs unresolved.
                tls("nocert", 9443, Some("c.example.com"), TLS_TERMINATE, None),
            ],
        )
        .world(w())
        .want(vec![
            any()
                .valid(true)
                .terminates_tls(true)
                .certs(&[("infra", "cert")]),
            any().valid(true).terminates_tls(false).certs(&[]),
            any()
                .accepted(true)
                .refs_reason(reasons::INVALID_CERTIFICATE_REF)
                .refs_message("a TLS listener terminating TLS needs tls.certificateRefs"),
        ]),
        case("HTTPS in Passthrough mode", vec![h])
            .world(w())
            .want(vec![any().reason(reasons::UNSUPPORTED_VALUE)]),
        // Overlapping hostnames: only listeners that terminate TLS share a certificate.
        case(
            "overlapping hostnames, one passed through",
            vec![
                tls(
                    "t1",
                    8443,
                    Some("*.example.com"),
                    TLS_TERMINATE,
                    Some("cert"),
                ),
                tls(
                    "t2",
                    8443,
                    Some("a.example.com"),
                    TLS_TERMINATE,
                    Some("cert"),
                ),
                tls("p", 8443, Some("b.example.com"), TLS_PASSTHROUGH, None),
            ],
        )
        .world(w())
        .want(vec![
            any().overlapping(true),
            any().overlapping(true),
            any().overlapping(false),
        ]),
    ]);
}

#[test]
fn listeners_sharing_a_port_by_protocol() {
    // Which listeners are conflicted and with which reason (and, as in every case, a
    // conflicted listener is not accepted).
    let conflicted = |r: Option<&'static str>| any().conflicted(r);
    let protocol = || conflicted(Some(reasons::PROTOCOL_CONFLICT));
    let hostname = || conflicted(Some(reasons::HOSTNAME_CONFLICT));
    let none = || conflicted(None);
    check(vec![
        // TCP takes the whole port: HTTP beside it is not distinct.
        case(
            "HTTP beside TCP",
            vec![
                listener("web", 80, "HTTP", None),
                listener("raw", 80, "TCP", None),
            ],
        )
        .want(vec![protocol(), protocol()]),
        // Two TCP listeners: told apart by port alone.
        case(
            "two TCP",
            vec![
                listener("a", 5432, "TCP", None),
                listener("b", 5432, "TCP", None),
            ],
        )
        .want(vec![protocol(), protocol()]),
        // UDP runs beside TCP and HTTP on one port number.
        case(
            "UDP beside TCP and HTTP",
            vec![
                listener("dns", 53, "UDP", None),
                listener("dnstcp", 53, "TCP", None),
                listener("web", 81, "HTTP", None),
                listener("quic", 81, "UDP", None),
            ],
        )
        .want(vec![none(), none(), none(), none()]),
        // Two UDP listeners on one port.
        case(
            "two UDP",
            vec![
                listener("a", 53, "UDP", None),
                listener("b", 53, "UDP", None),
            ],
        )
        .want(vec![protocol(), protocol()]),
        // HTTPS and TLS: one family, distinct by hostname; same hostname conflicts.
        case(
            "HTTPS and TLS",
            vec![
                https("h", Some("a.example.com"), None, "cert"),
                tls("t", 443, Some("b.example.com"), TLS_PASSTHROUGH, None),
                tls("u", 443, Some("b.example.com"), TLS_PASSTHROUGH, None),
            ],
        )
        .want(vec![none(), hostname(), hostname()]),
        // An unsupported protocol conflicts with nothing: it produces no configuration.
        case(
            "an unsupported protocol",
            vec![
                listener("web", 80, "HTTP", None),
                listener("s", 80, "SCTP", None),
            ],
        )
        .want(vec![none(), none()]),
    ]);
}

#[test]
fn an_invalid_listener_conflicts_with_nothing() {
    // A listener invalid for its port or hostname does not conflict.
    check(vec![
        case(
            "an invalid hostname",
            vec![
                listener("a", 80, "HTTP", Some("x.io")),
                listener("b", 80, "HTTP", Some("-bad-.x.io")),
            ],
        )
        .want(vec![
            any().valid(true),
            any().reason(reasons::UNSUPPORTED_VALUE).conflicted(None),
        ]),
    ]);
}

#[test]
fn invalid_route_kinds() {
    let kinds = |ks: &[&str]| {
        let mut l = listener("http", 80, "HTTP", None);
        l.allowed_routes = Some(GatewayListenersAllowedRoutes {
            kinds: Some(
                ks.iter()
                    .map(|k| GatewayListenersAllowedRoutesKinds {
                        group: None,
                        kind: (*k).into(),
                    })
                    .collect(),
            ),
            namespaces: None,
        });
        vec![l]
    };
    check(vec![
        case("only an unknown kind", kinds(&["InvalidRoute"])).want(vec![
            any().kinds(&[]).refs_reason(reasons::INVALID_ROUTE_KINDS),
        ]),
        case(
            "an unknown kind and HTTPRoute",
            kinds(&["InvalidRoute", "HTTPRoute"]),
        )
        .want(vec![
            any()
                .kinds(&["HTTPRoute"])
                .refs_reason(reasons::INVALID_ROUTE_KINDS),
        ]),
        case("HTTPRoute", kinds(&["HTTPRoute"])).want(vec![any().refs(true)]),
    ]);
}

/// Secrets `infra/good`, `certs/other`, `infra/malformed` (not PEM) and `infra/opaque`.
fn certificate_world() -> World {
    let mut w = World::default()
        .with_tls_secret("infra", "good")
        .with_tls_secret("certs", "other");
    w.secrets.insert(
        ("infra".into(), "malformed".into()),
        SecretInfo::from_secret(&secret(TLS_SECRET_TYPE, b"Hello world\n", KEY.as_bytes())),
    );
    w.secrets.insert(
        ("infra".into(), "opaque".into()),
        SecretInfo {
            type_: "Opaque".into(),
            tls_valid: true,
        },
    );
    w
}

#[test]
fn certificate_refs() {
    let refs = |name: &'static str, world: World, l: GatewayListeners, reason: &'static str| {
        case(name, vec![l])
            .world(world)
            .want(vec![any().refs_reason(reason)])
    };
    // The listener's one certificateRef, changed by `f`.
    let with_ref = |f: fn(&mut GatewayListenersTlsCertificateRefs)| {
        let mut l = https("a", None, None, "good");
        f(&mut l.tls.as_mut().unwrap().certificate_refs.as_mut().unwrap()[0]);
        l
    };
    let other = || https("a", None, Some("certs"), "other");
    let invalid = reasons::INVALID_CERTIFICATE_REF;
    // (case, the listener, its ResolvedRefs reason)
    #[rustfmt::skip]
    let mut cases: Vec<Case> = [
        ("a valid Secret", https("a", None, None, "good"), reasons::RESOLVED_REFS),
        ("a missing Secret", https("a", None, None, "missing"), invalid),
        ("a Secret not PEM", https("a", None, None, "malformed"), invalid),
        ("an Opaque Secret", https("a", None, None, "opaque"), invalid),
        ("a ConfigMap", with_ref(|r| r.kind = Some("ConfigMap".into())), invalid),
        ("another group", with_ref(|r| r.group = Some("wrong.io".into())), invalid),
        // Cross-namespace: refused until a matching grant exists; wrong grants are ignored.
        ("another namespace, no grant", other(), reasons::REF_NOT_PERMITTED),
    ]
    .into_iter()
    .map(|(name, l, reason)| refs(name, certificate_world(), l, reason))
    .collect();
    // (case, the grant's namespace, its from (group, kind, namespace), its Secret's name,
    // the listener's ResolvedRefs reason)
    let gateways = ("gateway.networking.k8s.io", "Gateway", "infra");
    let (refused, resolved) = (reasons::REF_NOT_PERMITTED, reasons::RESOLVED_REFS);
    #[rustfmt::skip]
    let grants = [
        ("a grant in the Gateway's namespace", "infra", gateways, None, refused),
        ("a grant from another group", "certs", ("wrong.io", "Gateway", "infra"), None, refused),
        ("a grant from HTTPRoutes", "certs", (gateways.0, "HTTPRoute", "infra"), None, refused),
        ("a grant from another namespace", "certs", (gateways.0, "Gateway", "elsewhere"), None, refused),
        ("a grant to another Secret", "certs", gateways, Some("not-this-one"), refused),
        ("a grant to the Secret", "certs", gateways, Some("other"), resolved),
        ("a grant to every Secret", "certs", gateways, None, resolved),
        ("a grant to an empty name", "certs", gateways, Some(""), resolved),
    ];
    for (name, ns, from, to, reason) in grants {
        // The Secrets of `certificate_world`, with this one ReferenceGrant.
        let mut w = World::default().with_grant(ns, from, ("", "Secret", to));
        w.secrets = certificate_world().secrets;
        cases.push(refs(name, w, other(), reason));
    }
    check(cases);
}

#[test]
fn conflicts_never_pick_a_winner() {
    let w = || World::default().with_tls_secret("infra", "good");
    let mut tls = https("tls", Some("a.example.com"), None, "good");
    tls.port = 80;
    let protocol = || any().conflicted(Some(reasons::PROTOCOL_CONFLICT));
    let hostname = || any().conflicted(Some(reasons::HOSTNAME_CONFLICT));
    check(vec![
        case(
            "HTTP and HTTPS on one port",
            vec![
                listener("http", 80, "HTTP", Some("a.example.com")),
                tls,
                listener("other", 8080, "HTTP", None),
            ],
        )
        .world(w())
        .gateway(Some(Status::True), Some(reasons::LISTENERS_NOT_VALID))
        .want(vec![protocol(), protocol(), any().conflicted(None)]),
        case(
            "one port and hostname",
            vec![
                listener("a", 80, "HTTP", Some("x.io")),
                listener("b", 80, "HTTP", Some("x.io")),
            ],
        )
        .world(w())
        .gateway(Some(Status::False), None)
        .want(vec![hostname(), hostname()]),
    ]);
}

#[test]
fn overlapping_tls_on_all_overlapping_listeners() {
    check(vec![
        case(
            "a wildcard and a name under it",
            vec![
                https("wild", Some("*.example.com"), None, "good"),
                https("foo", Some("foo.example.com"), None, "good"),
                https("other", Some("other.io"), None, "good"),
            ],
        )
        .world(World::default().with_tls_secret("infra", "good"))
        .want(vec![
            // Overlap does not invalidate.
            any().overlapping(true).valid(true),
            any().overlapping(true),
            any().overlapping(false),
        ]),
    ]);
}

#[test]
fn unsupported_address_type() {
    let mut c = case(
        "a custom address type",
        vec![listener("http", 80, "HTTP", None)],
    )
    .gateway(None, Some(reasons::UNSUPPORTED_ADDRESS))
    .want(vec![any()]);
    c.gateway.spec.addresses = Some(vec![GatewayAddresses {
        r#type: Some("example.com/Custom".into()),
        value: Some("x".into()),
    }]);
    check(vec![c]);
}

#[test]
fn status_conds_programmed_follows_validity() {
    let w = World::default();
    let e = evaluate_gateway(
        &gw(vec![
            https("a", None, None, "missing"),
            listener("b", 80, "HTTP", None),
        ]),
        &w,
    );
    let gp = Cond::t(types::PROGRAMMED, reasons::PROGRAMMED, "ok");
    let a = e.listeners[0].status_conds(&gp);
    assert_eq!(a[2].status, Status::False);
    assert_eq!(a[2].reason, reasons::INVALID);
    let b = e.listeners[1].status_conds(&gp);
    assert_eq!(b[2], gp);
    assert_eq!(b.len(), 3, "no Conflicted when not conflicted");
}
