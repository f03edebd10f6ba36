//! What a Gateway's templates see (the template contract's variables, ARCHITECTURE.md):
//! made from the Gateway's evaluation and the routes attached to it, and turned into a
//! template value once per plan, part by part (see [`GatewayContext::base`]).

use std::sync::Arc;

use serde_json::Value;

use crate::gateway::hostnames;
use crate::gateway::listeners::GatewayEval;
use crate::gateway::routes::{ParentAttachment, Parents};
use crate::render::context::{
    AttachedRouteVar, AttachmentVar, HostnamesVar, ListenerVar, NamespacedName,
};
use crate::render::labels::GatewayDecoration;
use crate::snapshot::{RouteEntry, RouteKey};

/// What the Gateway templates saw; route templates of the same Gateway see the same.
#[derive(Debug, Default)]
pub struct GatewayContext {
    /// The Gateway as JSON (the snapshot's, shared).
    pub gateway: Arc<Value>,
    /// The GatewayClass as JSON.
    pub class: Value,
    /// Merged values.
    pub values: Value,
    /// Normalized listeners (shared with the memo: a plan over the same attachments keeps
    /// them).
    pub listeners: Arc<Vec<ListenerVar>>,
    /// Routes accepted by the Gateway, sorted (so [`GatewayContext::accepts`] can search).
    pub routes: Vec<RouteKey>,
    /// Accepted hostnames (shared with the memo, as the listeners).
    pub hostnames: Arc<HostnamesVar>,
    /// The snapshot's entries of the accepted routes, in the order of `routes` (the route
    /// memo reads them without looking each route up again).
    pub(crate) route_entries: Vec<Arc<RouteEntry>>,
    /// The attachments of the accepted routes, in the order of `routes` (what
    /// `attachment` is made of, see [`GatewayContext::attachment`]).
    pub(crate) route_parents: Vec<Parents>,
    /// Whether templates see the accepted routes in `routes` (as template values, each
    /// parsed only if a template reads it, made when [`GatewayContext::base`] is built):
    /// when the Gateway is accepted and has a blueprint.
    pub(crate) routes_shown: bool,
    /// All of the above as the template context (without `resources`), built on first
    /// use ([`GatewayContext::base`]): a plan whose renders all come from its memo never
    /// builds it.
    base: std::sync::OnceLock<minijinja::Value>,
    /// Parts of `base` as template values: given by the memo when they are what an
    /// earlier plan converted, else converted with `base` (and then kept by the memo).
    pub(crate) converted: Converted,
    /// The labels and annotations every child of the Gateway carries, built once.
    pub decoration: GatewayDecoration,
    /// A hash of what route templates read of it, made once ([`GatewayContext::route_render_key`]).
    route_render_key: std::sync::OnceLock<Option<u64>>,
    /// Every listener's key, port and hostname, as the tenancy boundary checks read them,
    /// made once ([`GatewayContext::boundary`]).
    parent_listeners: std::sync::OnceLock<crate::gateway::boundary::ParentListeners>,
    /// Where the `gateway` template value reports a read of its `status` (the
    /// blueprint's, [`crate::render::prepared::Prepared::reads_gateway_status`]).
    pub(crate) status_watch: Option<Arc<std::sync::atomic::AtomicBool>>,
    /// The Gateway without what a status write changes, made once
    /// ([`GatewayContext::gateway_for_routes`]).
    without_status: std::sync::OnceLock<Arc<Value>>,
}

/// The costly parts of a Gateway's template context as template values (see
/// [`GatewayContext::base`]).
#[derive(Debug, Default, Clone)]
pub(crate) struct Converted {
    /// `gateway`.
    pub gateway: std::sync::OnceLock<minijinja::Value>,
    /// `listeners` and `hostnames`.
    pub vars: std::sync::OnceLock<(minijinja::Value, minijinja::Value)>,
}

/// `gateway` as no write of its status changes it: without its `status` and its
/// metadata's [`STATUS_WRITE_METADATA`](crate::render::view::STATUS_WRITE_METADATA).
pub(crate) fn without_status(gateway: &Value) -> Value {
    let mut g = gateway.clone();
    if let Some(m) = g.as_object_mut() {
        m.remove("status");
        if let Some(meta) = m.get_mut("metadata").and_then(Value::as_object_mut) {
            for k in crate::render::view::STATUS_WRITE_METADATA {
                meta.remove(k);
            }
        }
    }
    g
}

impl GatewayContext {
    /// The template context every template of the Gateway sees (without `resources`),
    /// built once, when a template first renders.
    pub fn base(&self) -> &minijinja::Value {
        use minijinja::value::{Serde, Value as V};
        // What `TemplateContext::to_value` makes, part by part, so that the parts an
        // earlier plan converted are reused.
        self.base.get_or_init(|| {
            let gateway = self.converted.gateway.get_or_init(|| {
                crate::render::view::JsonView::watched(
                    Arc::clone(&self.gateway),
                    self.status_watch.clone(),
                )
            });
            let (listeners, hostnames) = self.converted.vars.get_or_init(|| {
                (
                    V::from(Serde(&*self.listeners)),
                    V::from(Serde(&*self.hostnames)),
                )
            });
            minijinja::context! {
                gateway => gateway.clone(),
                class => V::from(Serde(&self.class)),
                values => V::from(Serde(&self.values)),
                listeners => listeners.clone(),
                routes => V::from(self.route_values()),
                hostnames => hostnames.clone(),
                cluster => V::from(Serde(super::placement::own_cluster())),
            }
        })
    }

    fn new(
        gateway: Arc<Value>,
        class: Value,
        values: Value,
        listeners: Arc<Vec<ListenerVar>>,
        routes: Vec<RouteKey>,
        hostnames: Arc<HostnamesVar>,
    ) -> Self {
        Self {
            gateway,
            class,
            values,
            listeners,
            routes,
            hostnames,
            route_entries: Vec::new(),
            route_parents: Vec::new(),
            routes_shown: false,
            base: std::sync::OnceLock::new(),
            converted: Converted::default(),
            decoration: GatewayDecoration::default(),
            route_render_key: std::sync::OnceLock::new(),
            parent_listeners: std::sync::OnceLock::new(),
            status_watch: None,
            without_status: std::sync::OnceLock::new(),
        }
    }

    /// The Gateway as far as route plans depend on it: without its status and the
    /// metadata a status write changes (all of which change with every route that
    /// attaches: its count is written) until a template of `prepared` reads them.
    pub(crate) fn gateway_for_routes(
        &self,
        prepared: &crate::render::prepared::Prepared,
    ) -> Arc<Value> {
        if prepared.reads_gateway_status() {
            return Arc::clone(&self.gateway);
        }
        Arc::clone(
            self.without_status
                .get_or_init(|| Arc::new(without_status(&self.gateway))),
        )
    }

    /// Gives [`Self::gateway_for_routes`] the memo's Gateway without its status (the same
    /// `Arc` as the last plan's while only the status changed: route contexts compare by
    /// address).
    pub(crate) fn seed_without_status(&self, gateway: Arc<Value>) {
        let _ = self.without_status.set(gateway);
    }

    /// Sets [`Self::route_render_key`] to `key`, made by an earlier plan of an equal
    /// context for the same blueprint (see [`super::memo`]); kept if already made.
    pub(crate) fn seed_route_render_key(&self, key: Option<u64>) {
        let _ = self.route_render_key.set(key);
    }

    /// A hash, in `prepared`'s keyed hasher, of what `prepared`'s route templates read of
    /// this context: the Gateway, and `class`, `values`, `listeners` and `hostnames` when
    /// a route template names them (see [`Prepared::keys_route_render`]); `None` when
    /// that cannot be told or a value does not serialize. Made once per plan.
    pub(crate) fn route_render_key(
        &self,
        prepared: &crate::render::prepared::Prepared,
    ) -> Option<u64> {
        *self.route_render_key.get_or_init(|| {
            let reads = prepared.route_reads.as_ref()?;
            let mut h = prepared.render_hasher();
            hash_json(&mut h, 0, &*self.gateway_for_routes(prepared))?;
            if reads.contains("class") {
                hash_json(&mut h, 1, &self.class)?;
            }
            if reads.contains("values") {
                hash_json(&mut h, 2, &self.values)?;
            }
            if reads.contains("listeners") {
                hash_json(&mut h, 3, &*self.listeners)?;
            }
            if reads.contains("hostnames") {
                hash_json(&mut h, 4, &*self.hostnames)?;
            }
            Some(std::hash::Hasher::finish(&h))
        })
    }

    /// `routes` as templates see it.
    fn route_values(&self) -> Vec<minijinja::Value> {
        if !self.routes_shown {
            return Vec::new();
        }
        self.route_entries.iter().map(|r| r.lazy_value()).collect()
    }

    /// What the Gateway accepted a route for, from its attachments (`parents`): the
    /// `attachment` its route templates see (see [`Self::boundary`] for the boundary
    /// checks' view of it). Only valid listeners count: a child Gateway serves no other.
    pub(crate) fn attachment(&self, parents: &[ParentAttachment]) -> AttachmentVar {
        let mut accepted: Vec<(usize, Vec<String>)> = Vec::new();
        for la in parents
            .iter()
            .filter(|p| p.is_accepted())
            .flat_map(|p| &p.listeners)
        {
            let Some(i) = self.listeners.iter().position(|l| {
                l.name == la.listener
                    && l.listener_set.as_ref().map(|s| (&s.namespace, &s.name))
                        == la.set.as_ref().map(|(ns, n)| (ns, n))
            }) else {
                continue;
            };
            if !self.listeners[i].valid {
                continue;
            }
            match accepted.iter_mut().find(|(j, _)| *j == i) {
                // Two parentRefs reaching one listener: the names of both.
                Some((_, seen)) => {
                    if !seen.is_empty() {
                        if la.hostnames.is_empty() {
                            seen.clear();
                        } else {
                            seen.extend(la.hostnames.iter().cloned());
                            *seen = hostnames::dedupe_sorted(std::mem::take(seen));
                        }
                    }
                }
                None => accepted.push((i, la.hostnames.clone())),
            }
        }
        accepted.sort_by_key(|(i, _)| *i);
        AttachmentVar::new(Arc::clone(&self.listeners), accepted)
    }

    /// `attachment` as the tenancy boundary checks read it, beside every listener of the
    /// Gateway (borrowed; the latter made once per plan).
    pub(crate) fn boundary<'a>(
        &'a self,
        attachment: &'a AttachmentVar,
    ) -> crate::gateway::boundary::RouteAccepted<'a> {
        let parent = self.parent_listeners.get_or_init(|| {
            self.listeners
                .iter()
                .map(|l| (l.key.clone(), l.port, l.hostname.clone()))
                .collect()
        });
        crate::gateway::boundary::RouteAccepted {
            listeners: attachment.keys_and_hostnames().collect(),
            parent_listeners: parent,
        }
    }

    /// Whether the Gateway accepted `route`.
    #[must_use]
    pub fn accepts(&self, route: &RouteKey) -> bool {
        self.routes.binary_search(route).is_ok()
    }

    /// The attachments of `route`, when the Gateway accepted it.
    pub(crate) fn parents_of(&self, route: &RouteKey) -> Option<&Parents> {
        self.route_parents
            .get(self.routes.binary_search(route).ok()?)
    }
}

/// Writes what it is given into a hasher.
struct HashWrite<'a, H: std::hash::Hasher>(&'a mut H);

impl<H: std::hash::Hasher> std::io::Write for HashWrite<'_, H> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.write(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Hashes `tag`, then `value` as JSON (written straight into the hasher).
fn hash_json(h: &mut impl std::hash::Hasher, tag: u8, value: &impl serde::Serialize) -> Option<()> {
    h.write_u8(tag);
    serde_json::to_writer(HashWrite(h), value).ok()
}

/// `hostnames` of the names the accepted routes attach with (`names`), those a
/// certificate may list (`certificate_names`: not through a passthrough listener), those
/// through a listener served with a generated certificate (`generated_names`), and
/// whether some certificate name comes through no such listener (`tls_differs`).
fn hostnames_var(
    names: Vec<String>,
    certificate_names: Vec<String>,
    generated_names: &[&String],
    tls_differs: bool,
) -> HostnamesVar {
    let names_len = names.len();
    let union = hostnames::dedupe_sorted(names);
    let intersection = hostnames::drop_covered(&union);
    // Without a passthrough listener every name may go in a certificate: no second sort.
    let precise = if certificate_names.len() == names_len {
        union
            .iter()
            .filter(|h| crate::gateway::routes::is_precise(h))
            .cloned()
            .collect()
    } else {
        hostnames::dedupe_sorted(
            certificate_names
                .into_iter()
                .filter(|h| crate::gateway::routes::is_precise(h)),
        )
    };
    // No generated-certificate listener (an HTTP-only Gateway): no name. Every certificate
    // name also through one (the common HTTP + HTTPS Gateway): `precise`, no second sort.
    let tls = if generated_names.is_empty() {
        Vec::new()
    } else if !tls_differs {
        precise.clone()
    } else {
        hostnames::dedupe_sorted(
            generated_names
                .iter()
                .filter(|h| crate::gateway::routes::is_precise(h))
                .map(|h| (*h).clone()),
        )
    };
    HostnamesVar {
        union,
        intersection,
        precise,
        tls,
    }
}

/// The listeners as templates see them, without their routes.
fn listener_vars(gateway: &Value, eval: &GatewayEval) -> Vec<ListenerVar> {
    let spec_listeners: &[Value] = gateway["spec"]["listeners"]
        .as_array()
        .map_or(&[], Vec::as_slice);
    let gateway_ns = gateway["metadata"]["namespace"]
        .as_str()
        .unwrap_or_default();
    eval.listeners
        .iter()
        .enumerate()
        .map(|(i, l)| ListenerVar {
            name: l.name.clone(),
            key: match &l.set {
                None => l.name.clone(),
                Some((_, set)) => crate::render::safe_name(&format!("{set}-{}", l.name), 253),
            },
            listener_set: l.set.as_ref().map(|(namespace, name)| NamespacedName {
                namespace: namespace.clone(),
                name: name.clone(),
            }),
            port: l.port,
            protocol: l.protocol.clone(),
            hostname: l.hostname.clone(),
            tls: match &l.set {
                None => spec_listeners
                    .iter()
                    .find(|s| s["name"] == l.name.as_str())
                    .and_then(|s| s.get("tls").cloned()),
                Some(_) => eval
                    .set_spec(i)
                    .and_then(|s| s.tls.as_ref())
                    .and_then(|t| serde_json::to_value(t).ok()),
            },
            tls_mode: l.tls_mode.clone(),
            allowed_routes: serde_json::json!({"namespaces": crate::gateway::boundary::child_namespaces(
                match &l.set {
                    None => spec_listeners
                        .iter()
                        .find(|s| s["name"] == l.name.as_str())
                        .and_then(|s| s.pointer("/allowedRoutes/namespaces").cloned()),
                    Some(_) => eval
                        .set_spec(i)
                        .and_then(|s| s.allowed_routes.as_ref())
                        .and_then(|a| a.namespaces.as_ref())
                        .and_then(|n| serde_json::to_value(n).ok()),
                }
                .as_ref(),
                eval.homes.get(i).map_or(gateway_ns, String::as_str),
                gateway_ns,
            )}),
            certificate_refs: l
                .certificate_refs
                .iter()
                .map(|(namespace, name)| NamespacedName {
                    namespace: namespace.clone(),
                    name: name.clone(),
                })
                .collect(),
            valid: l.is_valid(),
            routes: Vec::new(),
            attached_routes: l.attached_routes,
        })
        .collect()
}

/// Each route's attachments to a Gateway's listeners, in route key order.
pub(super) type RouteAttachments = [(RouteKey, Parents)];

/// The listeners and hostnames made of a Gateway's attachments, shared between a plan and
/// the memo.
pub(super) type Vars = (Arc<Vec<ListenerVar>>, Arc<HostnamesVar>);

/// The template variables of a Gateway, and the entries of the routes it accepted (in
/// `attachments` order). `attached` holds the entry of each route of `attachments`.
/// `vars`: the listeners and hostnames an earlier plan made of the same attachments.
pub(super) fn build_context<'a>(
    gateway: Arc<Value>,
    class: Value,
    eval: &GatewayEval,
    (attachments, attached): (&RouteAttachments, &[&'a Arc<RouteEntry>]),
    vars: Option<Vars>,
    values: Option<Value>,
) -> (GatewayContext, Vec<&'a Arc<RouteEntry>>) {
    let values = values.unwrap_or_else(|| Value::Object(serde_json::Map::new()));
    if let Some((listeners, hostnames)) = vars {
        let mut routes = Vec::new();
        let mut entries = Vec::new();
        let mut route_parents = Vec::new();
        for ((rkey, parents), entry) in attachments.iter().zip(attached) {
            if parents.iter().any(ParentAttachment::is_accepted) {
                routes.push(rkey.clone());
                entries.push(*entry);
                route_parents.push(Arc::clone(parents));
            }
        }
        let mut context = GatewayContext::new(gateway, class, values, listeners, routes, hostnames);
        context.route_parents = route_parents;
        return (context, entries);
    }
    let mut listeners = listener_vars(&gateway, eval);
    let mut routes = Vec::new();
    let mut entries = Vec::new();
    let mut route_parents = Vec::new();
    let mut names = Vec::new();
    // Names a certificate of the Gateway's may list: not those of passthrough listeners.
    let mut certificate_names = Vec::new();
    // Of those, the names of listeners served with a generated certificate (terminating
    // TLS, no certificateRefs of their own): what `hostnames.tls` lists. Borrowed: cloned
    // only when they differ from `precise` (below).
    let mut generated_names: Vec<&String> = Vec::new();
    // Whether some certificate name may come from no generated-certificate listener. Not
    // while each other listener of a route's attachment carries the very names a
    // generated one does (HTTP and HTTPS on one hostname): then `tls` is `precise`.
    let mut tls_differs = false;
    // Per attachment: the names of its generated-certificate listeners, and of the others.
    let mut generated_here: Vec<&[String]> = Vec::new();
    let mut others_here: Vec<&[String]> = Vec::new();
    for ((rkey, parents), entry) in attachments.iter().zip(attached) {
        let mut any = false;
        for p in parents.iter().filter(|p| p.is_accepted()) {
            any = true;
            generated_here.clear();
            others_here.clear();
            for la in &p.listeners {
                if let Some(l) = listeners.iter_mut().find(|l| {
                    l.name == la.listener
                        && l.listener_set.as_ref().map(|s| (&s.namespace, &s.name))
                            == la.set.as_ref().map(|(ns, n)| (ns, n))
                }) {
                    if l.valid {
                        names.extend(la.hostnames.iter().cloned());
                        match l.tls_mode.as_deref() {
                            Some(crate::gateway::listeners::TLS_PASSTHROUGH) => {}
                            Some(crate::gateway::listeners::TLS_TERMINATE)
                                if l.certificate_refs.is_empty() =>
                            {
                                certificate_names.extend(la.hostnames.iter().cloned());
                                generated_names.extend(&la.hostnames);
                                generated_here.push(&la.hostnames);
                            }
                            _ => {
                                certificate_names.extend(la.hostnames.iter().cloned());
                                if !la.hostnames.is_empty() {
                                    others_here.push(&la.hostnames);
                                }
                            }
                        }
                    }
                    // Routes are visited one after the other: this route can only be
                    // the listener's last one.
                    if !l.routes.last().is_some_and(|r| {
                        r.kind == rkey.kind && r.namespace == rkey.namespace && r.name == rkey.name
                    }) {
                        l.routes.push(AttachedRouteVar {
                            kind: rkey.kind.clone(),
                            namespace: rkey.namespace.clone(),
                            name: rkey.name.clone(),
                            hostnames: la.hostnames.clone(),
                        });
                    }
                }
            }
            tls_differs = tls_differs || others_here.iter().any(|o| !generated_here.contains(o));
        }
        if any {
            routes.push(rkey.clone());
            entries.push(*entry);
            route_parents.push(Arc::clone(parents));
        }
    }
    let hostnames = hostnames_var(names, certificate_names, &generated_names, tls_differs);
    let mut context = GatewayContext::new(
        gateway,
        class,
        values,
        Arc::new(listeners),
        routes,
        Arc::new(hostnames),
    );
    context.route_parents = route_parents;
    (context, entries)
}
