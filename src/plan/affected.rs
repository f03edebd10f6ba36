//! Which work a change to the snapshot makes, pure: a watch event is applied to the
//! snapshot ([`crate::snapshot::ingest::apply`], which says what changed), then
//! [`affected`] reads the snapshot after it and says which Gateways, classes, blueprints,
//! routes and policies must be looked at again. The controller enqueues exactly that; the
//! tests below pin it per kind of change.

use std::collections::BTreeSet;

use gateway_api::apis::standard::gateways::{
    Gateway, GatewayListenersAllowedRoutesNamespacesFrom as From,
};

use crate::snapshot::ingest::Change;
use crate::snapshot::{Key, RouteKey, Snapshot};

/// The work a change makes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Affected {
    /// Gateways to plan again.
    pub gateways: BTreeSet<Key>,
    /// GatewayClasses whose status to write again.
    pub classes: BTreeSet<String>,
    /// Blueprints whose status to write again.
    pub blueprints: BTreeSet<String>,
    /// Routes whose stale entries of ours to look at again.
    pub routes: BTreeSet<RouteKey>,
    /// GatewayClassConfigs whose status to write again.
    pub class_configs: BTreeSet<Key>,
    /// GatewayConfigs whose status to write again.
    pub gateway_configs: BTreeSet<Key>,
}

impl Affected {
    /// Whether the change makes no work.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }

    fn gateways_where(&mut self, snap: &Snapshot, pred: impl Fn(&Gateway) -> bool) {
        self.gateways.extend(
            snap.gateways()
                .filter(|(_, g)| pred(&g.typed))
                .map(|(k, _)| k.clone()),
        );
    }

    /// The policies whose status a change in `namespace` (every namespace: `None`) can
    /// change: those of the namespace and the cluster-wide GatewayClassConfigs.
    pub fn policies(&mut self, snap: &Snapshot, namespace: Option<&str>) {
        let global = snap.controller_namespace();
        let wanted = |ns: &str| namespace.is_none_or(|n| n == ns);
        self.class_configs.extend(
            snap.all_class_configs()
                .filter(|(k, _)| wanted(&k.namespace) || k.namespace == global)
                .map(|(k, _)| k.clone()),
        );
        self.gateway_configs.extend(
            snap.all_gateway_configs()
                .filter(|(k, _)| wanted(&k.namespace))
                .map(|(k, _)| k.clone()),
        );
    }

    /// The routes naming Gateway `gw` (directly or through one of its ListenerSets), when
    /// it stopped being ours (deleted, moved to another controller's class): each loses
    /// its entries of ours for it (see [`crate::plan::status::next_route_parents`]).
    fn routes_of_parent_gone(&mut self, snap: &Snapshot, gw: &Key) {
        self.routes
            .extend(snap.routes_referencing(gw).map(|(k, _)| k.clone()));
    }

    /// `routes`, and the Gateways their parentRefs lead to.
    fn routes_and_parents(&mut self, snap: &Snapshot, routes: impl IntoIterator<Item = RouteKey>) {
        for k in routes {
            if let Some(r) = snap.route(&k) {
                self.gateways.extend(
                    r.view
                        .parent_refs
                        .iter()
                        .filter_map(|p| snap.gateway_of_parent(p)),
                );
                self.routes.insert(k);
            }
        }
    }
}

/// Whether a listener of `g` admits routes by namespace labels.
fn selects_namespaces(g: &Gateway) -> bool {
    g.spec.listeners.iter().any(|l| {
        l.allowed_routes
            .as_ref()
            .and_then(|a| a.namespaces.as_ref())
            .and_then(|n| n.from.as_ref())
            == Some(&From::Selector)
    })
}

/// The namespaces a Gateway's certificateRefs name explicitly.
fn certificate_namespaces(g: &Gateway) -> impl Iterator<Item = &str> {
    g.spec
        .listeners
        .iter()
        .filter_map(|l| l.tls.as_ref())
        .flat_map(|t| t.certificate_refs.iter().flatten())
        .filter_map(|r| r.namespace.as_deref())
}

/// The work `change` makes, read from the snapshot after it.
///
/// - a GatewayClass: its status, every policy (whether a class is ours decides which
///   Gateways they affect), and its Gateways; when it stopped being ours, the routes
///   naming them;
/// - a blueprint: its status (unless it went), the classes naming it and their Gateways;
/// - a policy: the policies and Gateways of its namespace (a GatewayClassConfig of the
///   controller namespace: of every namespace);
/// - a Gateway: itself, its class and the policies of its namespace; when it stopped
///   being ours (deleted, moved to another controller's class), the routes naming it;
/// - a route: itself (unless it went) and the Gateways it named before and names now;
/// - a ListenerSet: the Gateways it named before and names now; when it went or names
///   another Gateway, the routes naming it;
/// - a Namespace whose labels changed: the Gateways admitting routes by label;
/// - a ReferenceGrant in N: the Gateways with certificateRefs into N from elsewhere, the
///   routes with backendRefs into N from elsewhere, and their Gateways;
/// - a Secret: the Gateways naming it;
/// - a Service that came or went: the routes naming it and their Gateways;
/// - a child: its Gateway.
#[must_use]
pub fn affected(snap: &Snapshot, change: &Change) -> Affected {
    let mut a = Affected::default();
    match change {
        Change::GatewayClass { name, was_ours } => {
            a.classes.insert(name.clone());
            a.policies(snap, None);
            let of_class: Vec<Key> = snap
                .gateways()
                .filter(|(_, g)| g.typed.spec.gateway_class_name == *name)
                .map(|(k, _)| k.clone())
                .collect();
            if *was_ours && !snap.class_is_ours(name) {
                for k in &of_class {
                    a.routes_of_parent_gone(snap, k);
                }
            }
            a.gateways.extend(of_class);
        }
        Change::Blueprint { name, deleted } => {
            if !deleted {
                a.blueprints.insert(name.clone());
            }
            let classes = crate::plan::class::classes_using_blueprint(snap, name);
            a.gateways_where(snap, |g| classes.contains(&g.spec.gateway_class_name));
            a.classes.extend(classes);
        }
        Change::Revision { blueprint } => {
            // The Gateways rendering it (or waiting for it) and the blueprint's status.
            a.blueprints.insert(blueprint.clone());
            let classes = crate::plan::class::classes_using_blueprint(snap, blueprint);
            a.gateways_where(snap, |g| classes.contains(&g.spec.gateway_class_name));
        }
        Change::ClassConfig { key } => {
            let global = key.namespace == snap.controller_namespace();
            a.policies(snap, (!global).then_some(key.namespace.as_str()));
            a.gateways_where(snap, |g| {
                global || g.metadata.namespace.as_deref() == Some(key.namespace.as_str())
            });
        }
        Change::GatewayConfig { key } => {
            a.policies(snap, Some(&key.namespace));
            a.gateways_where(snap, |g| {
                g.metadata.namespace.as_deref() == Some(key.namespace.as_str())
            });
        }
        Change::Gateway {
            key,
            class,
            was_ours,
            ..
        } => {
            a.policies(snap, Some(&key.namespace));
            a.gateways.insert(key.clone());
            a.classes.insert(class.clone());
            if *was_ours && !snap.gateway_is_ours(key) {
                a.routes_of_parent_gone(snap, key);
            }
            // Gone: its blueprint's per-revision counts drop it (they are recounted only
            // when a Gateway reports, and this one no longer will).
            if *was_ours && snap.gateway(key).is_none() {
                let blueprint = snap
                    .class(class)
                    .and_then(|c| super::class::named_blueprint(c).ok());
                if let Some(name) = blueprint {
                    a.blueprints.insert(name.to_owned());
                }
            }
        }
        Change::Route {
            key,
            parents_before,
            deleted,
        } => {
            a.gateways.extend(parents_before.iter().cloned());
            if !deleted {
                a.routes_and_parents(snap, [key.clone()]);
            }
        }
        Change::ListenerSet { key, parent_before } => {
            let parent = snap.listener_set_parent(key);
            if *parent_before != parent {
                // Gone or moved: its routes' entries of ours for it are no longer true.
                a.routes.extend(snap.routes_naming_listener_set(key));
            }
            a.gateways.extend(parent_before.iter().cloned());
            a.gateways.extend(parent);
        }
        Change::Namespace { labels_changed, .. } => {
            if *labels_changed {
                a.gateways_where(snap, selects_namespaces);
            }
        }
        Change::ReferenceGrant { namespace } => {
            let ns = namespace.as_str();
            a.gateways_where(snap, |g| {
                certificate_namespaces(g).any(|n| n == ns)
                    && g.metadata.namespace.as_deref() != Some(ns)
            });
            let routes: Vec<RouteKey> = snap
                .routes()
                .filter(|(_, r)| {
                    r.view.namespace != ns && r.view.backend_refs.iter().any(|b| b.namespace == ns)
                })
                .map(|(k, _)| k.clone())
                .collect();
            a.routes_and_parents(snap, routes);
        }
        Change::Secret { key } => a.gateways.extend(snap.gateways_naming_secret(key)),
        Change::Service {
            key,
            existence_changed,
        } => {
            if *existence_changed {
                a.routes_and_parents(snap, snap.routes_naming_service(key));
            }
        }
        Change::Crd => {}
        Change::Child { gateway_uid, .. } => {
            a.gateways.extend(
                gateway_uid
                    .as_deref()
                    .and_then(|u| snap.gateway_by_uid(u))
                    .cloned(),
            );
        }
    }
    a
}

#[cfg(test)]
mod tests {
    //! Each kind of change, applied to a small world through the same ingestion as the
    //! controller's watches, and the work it makes.
    use super::*;
    use crate::snapshot::ingest::{Kind, apply};
    use serde_json::{Value, json};

    const GW: &str = "gateway.networking.k8s.io/v1";

    fn gateway(ns: &str, name: &str, class: &str, extra: Value) -> Value {
        let mut listener = json!({"name": "http", "port": 80, "protocol": "HTTP"});
        if let (Some(l), Some(e)) = (listener.as_object_mut(), extra.as_object()) {
            l.extend(e.clone());
        }
        json!({
            "apiVersion": GW, "kind": "Gateway",
            "metadata": {"namespace": ns, "name": name, "uid": format!("uid-{ns}-{name}")},
            "spec": {"gatewayClassName": class, "listeners": [listener]}
        })
    }

    fn route(ns: &str, name: &str, parent: Value, backend: Value) -> Value {
        json!({
            "apiVersion": GW, "kind": "HTTPRoute",
            "metadata": {"namespace": ns, "name": name},
            "spec": {"parentRefs": [parent], "rules": [{"backendRefs": [backend]}]}
        })
    }

    fn put(s: &mut Snapshot, kind: Kind, doc: Value) -> Change {
        apply(s, kind, doc, false).expect("decodes")
    }

    /// Applies one watch event and says what it affects.
    fn event(s: &mut Snapshot, kind: Kind, doc: Value, deleted: bool) -> Affected {
        let c = apply(s, kind, doc, deleted).expect("decodes");
        affected(s, &c)
    }

    fn keys(list: &[(&str, &str)]) -> BTreeSet<Key> {
        list.iter().map(|(n, m)| Key::new(*n, *m)).collect()
    }

    fn http(kind: &'static str) -> Kind {
        Kind::Route(crate::gateway::route_kinds::by_kind(kind).expect("a route kind"))
    }

    /// Class `c` (blueprint `bp`), class `other`; Gateways apps/a (c, admits routes by
    /// namespace label), apps/b (other), edge/x (c, a certificate in `certs`); routes
    /// apps/r1 -> a (Service apps/svc), apps/r2 -> a (Service `backends`/svc), apps/r3 ->
    /// ListenerSet apps/ls -> a; policies in apps and in the controller namespace.
    fn world() -> Snapshot {
        let mut s = Snapshot::new("gatewright-system");
        s.track_services();
        for (name, bp) in [("c", "bp"), ("other", "bp2")] {
            put(
                &mut s,
                Kind::GatewayClass,
                json!({
                    "apiVersion": GW, "kind": "GatewayClass", "metadata": {"name": name},
                    "spec": {"controllerName": crate::gateway::CONTROLLER_NAME,
                             "parametersRef": {"group": "gatewright.dev", "kind": "GatewayClassBlueprint", "name": bp}}
                }),
            );
        }
        put(
            &mut s,
            Kind::Gateway,
            gateway(
                "apps",
                "a",
                "c",
                json!({
                    "allowedRoutes": {"namespaces": {"from": "Selector", "selector": {"matchLabels": {"team": "x"}}}}
                }),
            ),
        );
        put(
            &mut s,
            Kind::Gateway,
            gateway("apps", "b", "other", json!({})),
        );
        put(
            &mut s,
            Kind::Gateway,
            gateway(
                "edge",
                "x",
                "c",
                json!({
                    "protocol": "HTTPS", "port": 443,
                    "tls": {"certificateRefs": [{"name": "cert", "namespace": "certs"}]}
                }),
            ),
        );
        put(
            &mut s,
            Kind::ListenerSet,
            json!({
                "apiVersion": GW, "kind": "ListenerSet",
                "metadata": {"namespace": "apps", "name": "ls"},
                "spec": {"parentRef": {"name": "a"}, "listeners": [{"name": "l", "port": 8080, "protocol": "HTTP"}]}
            }),
        );
        put(
            &mut s,
            http("HTTPRoute"),
            route(
                "apps",
                "r1",
                json!({"name": "a"}),
                json!({"name": "svc", "port": 80}),
            ),
        );
        put(
            &mut s,
            http("HTTPRoute"),
            route(
                "apps",
                "r2",
                json!({"name": "a"}),
                json!({"name": "svc", "namespace": "backends", "port": 80}),
            ),
        );
        put(
            &mut s,
            http("HTTPRoute"),
            route(
                "apps",
                "r3",
                json!({"name": "ls", "kind": "ListenerSet"}),
                json!({"name": "svc", "port": 80}),
            ),
        );
        put(
            &mut s,
            Kind::Service,
            json!({"apiVersion": "v1", "kind": "Service", "metadata": {"namespace": "apps", "name": "svc"}}),
        );
        put(
            &mut s,
            Kind::Namespace,
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "apps", "labels": {"team": "x"}}}),
        );
        for (kind, ns) in [
            ("GatewayClassConfig", "apps"),
            ("GatewayClassConfig", "gatewright-system"),
            ("GatewayConfig", "apps"),
            ("GatewayConfig", "edge"),
        ] {
            let k = if kind == "GatewayConfig" {
                Kind::GatewayConfig
            } else {
                Kind::ClassConfig
            };
            put(
                &mut s,
                k,
                json!({
                    "apiVersion": "gatewright.dev/v1alpha1", "kind": kind,
                    "metadata": {"namespace": ns, "name": "p"},
                    "spec": {"targetRef": {"group": "gateway.networking.k8s.io", "kind": "GatewayClass", "name": "c"}}
                }),
            );
        }
        s
    }

    fn routes(list: &[&str]) -> BTreeSet<RouteKey> {
        list.iter()
            .map(|n| RouteKey::new("HTTPRoute", "apps", *n))
            .collect()
    }

    #[test]
    fn a_class_re_plans_its_gateways_and_every_policy() {
        let mut s = world();
        let c = apply(
            &mut s,
            Kind::GatewayClass,
            json!({
                "apiVersion": GW, "kind": "GatewayClass", "metadata": {"name": "c"},
                "spec": {"controllerName": "someone.else/controller"}
            }),
            false,
        )
        .unwrap();
        let a = affected(&s, &c);
        assert_eq!(a.gateways, keys(&[("apps", "a"), ("edge", "x")]));
        assert_eq!(a.classes, BTreeSet::from(["c".to_owned()]));
        assert_eq!(a.class_configs.len(), 2);
        assert_eq!(a.gateway_configs.len(), 2);
    }

    #[test]
    fn a_blueprint_re_plans_the_classes_naming_it_and_their_gateways() {
        let mut s = world();
        let bp = json!({
            "apiVersion": "gatewright.dev/v1alpha1", "kind": "GatewayClassBlueprint",
            "metadata": {"name": "bp"}, "spec": {"gatewayTemplates": []}
        });
        let a = event(&mut s, Kind::Blueprint, bp.clone(), false);
        assert_eq!(a.blueprints, BTreeSet::from(["bp".to_owned()]));
        assert_eq!(a.classes, BTreeSet::from(["c".to_owned()]));
        assert_eq!(a.gateways, keys(&[("apps", "a"), ("edge", "x")]));
        // Gone: no status to write, its classes and Gateways all the same.
        let a = event(&mut s, Kind::Blueprint, bp, true);
        assert!(a.blueprints.is_empty());
        assert_eq!(a.gateways, keys(&[("apps", "a"), ("edge", "x")]));
    }

    #[test]
    fn a_policy_re_plans_its_namespace_and_a_global_one_every_namespace() {
        let mut s = world();
        let doc = |ns: &str| {
            json!({
                "apiVersion": "gatewright.dev/v1alpha1", "kind": "GatewayClassConfig",
                "metadata": {"namespace": ns, "name": "q"}, "spec": {"targetRef": {"group": "gateway.networking.k8s.io", "kind": "GatewayClass", "name": "c"}}
            })
        };
        let a = event(&mut s, Kind::ClassConfig, doc("apps"), false);
        assert_eq!(a.gateways, keys(&[("apps", "a"), ("apps", "b")]));
        assert_eq!(a.gateway_configs, keys(&[("apps", "p")]));
        // The controller namespace's own and the new one, apps' own.
        assert_eq!(
            a.class_configs,
            keys(&[("apps", "p"), ("apps", "q"), ("gatewright-system", "p")])
        );
        let a = event(&mut s, Kind::ClassConfig, doc("gatewright-system"), false);
        assert_eq!(
            a.gateways,
            keys(&[("apps", "a"), ("apps", "b"), ("edge", "x")])
        );
        assert_eq!(a.gateway_configs, keys(&[("apps", "p"), ("edge", "p")]));
    }

    #[test]
    fn a_gateway_re_plans_itself_its_class_and_its_namespace_policies() {
        let mut s = world();
        let c = apply(
            &mut s,
            Kind::Gateway,
            gateway("edge", "y", "c", json!({})),
            false,
        )
        .unwrap();
        assert!(matches!(&c, Change::Gateway { new: true, .. }));
        let a = affected(&s, &c);
        assert_eq!(a.gateways, keys(&[("edge", "y")]));
        assert_eq!(a.classes, BTreeSet::from(["c".to_owned()]));
        assert_eq!(a.gateway_configs, keys(&[("edge", "p")]));
        assert_eq!(a.class_configs, keys(&[("gatewright-system", "p")]));
        let c = apply(
            &mut s,
            Kind::Gateway,
            gateway("edge", "y", "c", json!({})),
            false,
        )
        .unwrap();
        assert!(
            matches!(c, Change::Gateway { new: false, .. }),
            "known already"
        );
    }

    #[test]
    fn a_route_moving_re_plans_the_gateways_before_and_after() {
        let mut s = world();
        let moved = route(
            "apps",
            "r1",
            json!({"name": "b"}),
            json!({"name": "svc", "port": 80}),
        );
        let a = event(&mut s, http("HTTPRoute"), moved.clone(), false);
        assert_eq!(a.gateways, keys(&[("apps", "a"), ("apps", "b")]));
        assert_eq!(a.routes, routes(&["r1"]));
        // Deleted: its Gateway, and no route work.
        let a = event(&mut s, http("HTTPRoute"), moved, true);
        assert_eq!(a.gateways, keys(&[("apps", "b")]));
        assert!(a.routes.is_empty());
        assert!(s.route(&RouteKey::new("HTTPRoute", "apps", "r1")).is_none());
    }

    #[test]
    fn a_route_through_a_listener_set_reaches_the_set_s_gateway() {
        let mut s = world();
        let r3 = route(
            "apps",
            "r3",
            json!({"name": "ls", "kind": "ListenerSet"}),
            json!({"name": "svc", "port": 80}),
        );
        let a = event(&mut s, http("HTTPRoute"), r3, false);
        assert_eq!(a.gateways, keys(&[("apps", "a")]));
    }

    #[test]
    fn a_listener_set_re_parented_re_plans_both_gateways() {
        let mut s = world();
        let ls = json!({
            "apiVersion": GW, "kind": "ListenerSet", "metadata": {"namespace": "apps", "name": "ls"},
            "spec": {"parentRef": {"name": "b"}, "listeners": [{"name": "l", "port": 8080, "protocol": "HTTP"}]}
        });
        let a = event(&mut s, Kind::ListenerSet, ls, false);
        assert_eq!(a.gateways, keys(&[("apps", "a"), ("apps", "b")]));
        assert_eq!(a.routes, routes(&["r3"]), "its route's entry for a goes");
    }

    #[test]
    fn a_parent_that_stops_being_ours_sends_the_routes_naming_it_to_lose_our_entries() {
        let foreign = json!({
            "apiVersion": GW, "kind": "GatewayClass", "metadata": {"name": "istio"},
            "spec": {"controllerName": "istio.io/gateway-controller"}
        });
        let ls = json!({
            "apiVersion": GW, "kind": "ListenerSet", "metadata": {"namespace": "apps", "name": "ls"},
            "spec": {"parentRef": {"name": "a"}, "listeners": [{"name": "l", "port": 8080, "protocol": "HTTP"}]}
        });
        // A ListenerSet deleted: the routes naming it.
        let mut s = world();
        let a = event(&mut s, Kind::ListenerSet, ls.clone(), false);
        assert!(
            a.routes.is_empty(),
            "a spec change: the Gateway writes them"
        );
        let a = event(&mut s, Kind::ListenerSet, ls, true);
        assert_eq!(a.routes, routes(&["r3"]));
        // A Gateway moved to another controller's class: the routes naming it, directly or
        // through its ListenerSet.
        let mut s = world();
        put(&mut s, Kind::GatewayClass, foreign.clone());
        let a = event(
            &mut s,
            Kind::Gateway,
            gateway("apps", "a", "istio", json!({})),
            false,
        );
        assert_eq!(a.routes, routes(&["r1", "r2", "r3"]));
        // Anything of a Gateway that is not ours, then or now, makes no route work.
        let a = event(
            &mut s,
            Kind::Gateway,
            gateway("apps", "a", "istio", json!({})),
            false,
        );
        assert!(a.routes.is_empty(), "{a:?}");
        // A Gateway deleted; changed before, its blueprint had nothing to recount.
        let mut s = world();
        let a = event(
            &mut s,
            Kind::Gateway,
            gateway("apps", "a", "c", json!({})),
            false,
        );
        assert!(a.blueprints.is_empty(), "{a:?}");
        let a = event(
            &mut s,
            Kind::Gateway,
            gateway("apps", "a", "c", json!({})),
            true,
        );
        assert_eq!(a.routes, routes(&["r1", "r2", "r3"]));
        assert_eq!(
            a.blueprints,
            BTreeSet::from(["bp".to_owned()]),
            "its blueprint recounts its Gateways"
        );
        // A class that no longer names us.
        let mut s = world();
        let mut c = foreign;
        c["metadata"]["name"] = json!("c");
        let a = event(&mut s, Kind::GatewayClass, c.clone(), false);
        assert_eq!(a.routes, routes(&["r1", "r2", "r3"]));
        let a = event(&mut s, Kind::GatewayClass, c, false);
        assert!(a.routes.is_empty(), "not ours before either");
    }

    #[test]
    fn namespace_labels_re_plan_only_gateways_selecting_by_label_and_only_when_changed() {
        let mut s = world();
        let ns = |labels: Value| json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "apps", "labels": labels}});
        let a = event(&mut s, Kind::Namespace, ns(json!({"team": "x"})), false);
        assert!(a.is_empty(), "the same labels: {a:?}");
        let a = event(&mut s, Kind::Namespace, ns(json!({"team": "y"})), false);
        assert_eq!(a.gateways, keys(&[("apps", "a")]));
    }

    #[test]
    fn a_reference_grant_re_plans_what_refers_into_its_namespace_from_elsewhere() {
        let grant = |ns: &str| {
            json!({
                "apiVersion": "gateway.networking.k8s.io/v1beta1", "kind": "ReferenceGrant",
                "metadata": {"namespace": ns, "name": "g"},
                "spec": {"from": [{"group": "gateway.networking.k8s.io", "kind": "HTTPRoute", "namespace": "apps"}],
                         "to": [{"group": "", "kind": "Service"}]}
            })
        };
        let mut s = world();
        let a = event(&mut s, Kind::ReferenceGrant, grant("certs"), false);
        assert_eq!(a.gateways, keys(&[("edge", "x")]));
        assert!(a.routes.is_empty());
        let a = event(&mut s, Kind::ReferenceGrant, grant("backends"), false);
        assert_eq!(a.routes, routes(&["r2"]));
        assert_eq!(a.gateways, keys(&[("apps", "a")]));
        let a = event(&mut s, Kind::ReferenceGrant, grant("elsewhere"), true);
        assert!(a.is_empty(), "{a:?}");
    }

    #[test]
    fn a_secret_re_plans_the_gateways_naming_it() {
        let mut s = world();
        let sec = json!({"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
                         "metadata": {"namespace": "certs", "name": "cert"}});
        let a = event(&mut s, Kind::Secret, sec, false);
        assert_eq!(a.gateways, keys(&[("edge", "x")]));
        let other = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"namespace": "certs", "name": "unnamed"}});
        assert!(event(&mut s, Kind::Secret, other, false).is_empty());
    }

    #[test]
    fn a_service_matters_only_when_it_comes_or_goes() {
        let mut s = world();
        let svc = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"namespace": "apps", "name": "svc"}});
        let a = event(&mut s, Kind::Service, svc.clone(), false);
        assert!(a.is_empty(), "it existed already: {a:?}");
        let a = event(&mut s, Kind::Service, svc, true);
        assert_eq!(a.routes, routes(&["r1", "r3"]));
        assert_eq!(a.gateways, keys(&[("apps", "a")]));
    }

    #[test]
    fn a_child_re_plans_its_gateway() {
        let mut s = world();
        let child = |uid: &str| {
            json!({
                "apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"namespace": "edge", "name": "x-cm", "labels": {
                    crate::render::labels::MANAGED_BY: crate::render::labels::MANAGED_BY_VALUE,
                    crate::render::labels::PARENT_UID: uid,
                    crate::render::labels::GATEWAY_UID: uid,
                }}
            })
        };
        let a = event(&mut s, Kind::Child, child("uid-edge-x"), false);
        assert_eq!(a.gateways, keys(&[("edge", "x")]));
        let a = event(&mut s, Kind::Child, child("uid-unknown"), true);
        assert!(a.is_empty());
        // A Gateway gone: its UID leads nowhere.
        apply(
            &mut s,
            Kind::Gateway,
            gateway("edge", "x", "c", json!({})),
            true,
        )
        .unwrap();
        assert!(event(&mut s, Kind::Child, child("uid-edge-x"), false).is_empty());
    }

    #[test]
    fn a_document_that_does_not_decode_leaves_the_snapshot_as_it_was() {
        let mut s = world();
        let bad = json!({"apiVersion": GW, "kind": "Gateway", "metadata": {"namespace": "apps", "name": "a"}, "spec": "nope"});
        assert!(apply(&mut s, Kind::Gateway, bad, false).is_err());
        assert!(s.gateway(&Key::new("apps", "a")).is_some());
    }
}
