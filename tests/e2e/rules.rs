//! The safety rules on the real API server: a blueprint naming a cluster-scoped kind it
//! does not list gets nothing applied, and two Gateways rendering one object never fight
//! over it. Also: the planner's built-in table of kinds' scopes agrees with discovery.

use std::time::Duration;

use gateway_api::apis::standard::gatewayclasses::GatewayClass;
use gateway_api::apis::standard::gateways::Gateway;
use gateway_api::apis::standard::httproutes::HttpRoute;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::api::rbac::v1::ClusterRoleBinding;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, ListParams};
use serde_json::Value;

use crate::common::{TestNamespace, admin, apply_yaml, controller, unique_name, wait_for};
use crate::controller::{blueprints, cond};
use crate::mbb::delete_class;

const T: Duration = Duration::from_secs(90);

fn class_yaml(name: &str, templates: &str) -> String {
    format!(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: GatewayClass\nmetadata: {{name: {name}}}\nspec:\n  controllerName: gatewright.dev/gateway-controller\n  parametersRef: {{group: gatewright.dev, kind: GatewayClassBlueprint, name: {name}}}\n---\napiVersion: gatewright.dev/v1alpha1\nkind: GatewayClassBlueprint\nmetadata: {{name: {name}}}\nspec:\n  gatewayTemplates:\n{templates}"
    )
}

fn gateway(ns: &str, name: &str, class: &str) -> String {
    format!(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {{name: {name}, namespace: {ns}}}\nspec:\n  gatewayClassName: {class}\n  listeners: [{{name: http, port: 80, protocol: HTTP}}]\n"
    )
}

fn conditions(obj: &Value, t: &str) -> Option<Value> {
    cond(&obj["status"]["conditions"], t).cloned()
}

#[tokio::test]
async fn a_blueprint_cannot_create_a_cluster_scoped_kind_it_does_not_list() {
    let client = admin().await;
    let _ctl = controller();
    let ns = TestNamespace::new(&client, "escape").await;
    let class = unique_name("escape");
    let binding = format!("{}-admin", ns.name);
    let templates = format!(
        "  - name: cm\n    template: |\n      apiVersion: v1\n      kind: ConfigMap\n      metadata: {{name: {{{{ gateway.metadata.name ~ \"-cm\" }}}}}}\n  - name: admin\n    template: |\n      apiVersion: rbac.authorization.k8s.io/v1\n      kind: ClusterRoleBinding\n      metadata: {{name: {binding}}}\n      roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: cluster-admin}}\n      subjects: [{{kind: ServiceAccount, name: default, namespace: {ns}}}]\n",
        ns = ns.name
    );
    apply_yaml(&client, &class_yaml(&class, &templates)).await;
    apply_yaml(&client, &gateway(&ns.name, "gw", &class)).await;

    let bp = wait_for("the blueprint rejected", T, || async {
        let b = serde_json::to_value(blueprints(&client).get(&class).await.ok()?).ok()?;
        let c = conditions(&b, "Accepted")?;
        (c["status"] == "False").then_some(c)
    })
    .await;
    let msg = bp["message"].as_str().unwrap();
    assert!(
        msg.contains("template admin") && msg.contains("ClusterRoleBinding"),
        "{msg}"
    );
    let classes: Api<GatewayClass> = Api::all(client.clone());
    let accepted = wait_for("the class rejected", T, || async {
        let c = serde_json::to_value(classes.get(&class).await.ok()?).ok()?;
        let a = conditions(&c, "Accepted")?;
        (a["status"] == "False").then_some(a)
    })
    .await;
    assert_eq!(accepted["reason"], "InvalidParameters");
    let gws: Api<Gateway> = Api::namespaced(client.clone(), &ns.name);
    wait_for("the Gateway not accepted", T, || async {
        let g = serde_json::to_value(gws.get("gw").await.ok()?).ok()?;
        let a = conditions(&g, "Accepted")?;
        (a["status"] == "False").then_some(())
    })
    .await;
    // Nothing of the class was applied: no binding, and not even the harmless ConfigMap.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let bindings: Api<ClusterRoleBinding> = Api::all(client.clone());
    assert!(bindings.get_opt(&binding).await.unwrap().is_none());
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &ns.name);
    assert!(cms.get_opt("gw-cm").await.unwrap().is_none());
    delete_class(&client, &class).await;
    ns.delete().await;
}

/// Two Gateways of one namespace, one template with a fixed object name: one owner, the
/// other Gateway's error, and no write request at all once settled.
#[tokio::test]
async fn two_gateways_rendering_one_object_do_not_fight() {
    let client = admin().await;
    let ctl = controller();
    let ns = TestNamespace::new(&client, "fight").await;
    let class = unique_name("fixed");
    let templates = "  - name: fixed\n    template: |\n      apiVersion: v1\n      kind: ConfigMap\n      metadata: {name: shared}\n      data: {gw: {{ gateway.metadata.name }}}\n  - name: own\n    template: |\n      apiVersion: v1\n      kind: ConfigMap\n      metadata: {name: {{ gateway.metadata.name ~ \"-own\" }}}\n";
    apply_yaml(&client, &class_yaml(&class, templates)).await;
    apply_yaml(&client, &gateway(&ns.name, "first", &class)).await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &ns.name);
    wait_for("the first Gateway's shared ConfigMap", T, || async {
        cms.get_opt("shared").await.unwrap()
    })
    .await;
    apply_yaml(&client, &gateway(&ns.name, "second", &class)).await;
    let gws: Api<Gateway> = Api::namespaced(client.clone(), &ns.name);
    let programmed = wait_for("the second Gateway's conflict in its status", T, || async {
        let g = serde_json::to_value(gws.get("second").await.ok()?).ok()?;
        let p = conditions(&g, "Programmed")?;
        p["message"]
            .as_str()?
            .contains("already held by")
            .then_some(p)
    })
    .await;
    let msg = programmed["message"].as_str().unwrap();
    assert!(
        msg.contains("template fixed")
            && msg.contains(&format!("ConfigMap {}/shared", ns.name))
            && msg.contains(&format!("Gateway {}/first", ns.name)),
        "{msg}"
    );
    assert_eq!(programmed["status"], "False");
    // The second Gateway's own objects are there; the shared one is the first's.
    wait_for("the second Gateway's own ConfigMap", T, || async {
        cms.get_opt("second-own").await.unwrap()
    })
    .await;
    let shared = cms.get("shared").await.unwrap();
    assert_eq!(shared.data.unwrap()["gw"], "first");
    let owners = shared.metadata.owner_references.unwrap();
    assert_eq!(owners.len(), 1);
    assert_eq!(owners[0].name, "first");
    // An Event tells the second Gateway's owner.
    let events: Api<k8s_openapi::api::events::v1::Event> =
        Api::namespaced(client.clone(), &ns.name);
    wait_for("a Warning Event on the second Gateway", T, || async {
        events
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .into_iter()
            .find(|e| {
                e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("second")
                    && e.type_.as_deref() == Some("Warning")
                    && e.note
                        .as_deref()
                        .is_some_and(|n| n.contains("already held by"))
            })
    })
    .await;

    // Converged (no write for longer than a status change may be held back, however long
    // a loaded machine takes to get there): then not one write request for this namespace
    // over 30 s.
    let deadline = tokio::time::Instant::now() + T;
    let mut before = ctl.metrics().writes_in_namespace(&ns.name);
    loop {
        tokio::time::sleep(gatewright::controller::PROGRESS_HOLD + Duration::from_secs(1)).await;
        let now = ctl.metrics().writes_in_namespace(&ns.name);
        if now == before {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the namespace's writes did not settle within {T:?}"
        );
        before = now;
    }
    tokio::time::sleep(Duration::from_secs(30)).await;
    let after = ctl.metrics().writes_in_namespace(&ns.name);
    assert_eq!(
        after, before,
        "the two Gateways must not write over each other"
    );
    let again = cms.get("shared").await.unwrap();
    assert_eq!(
        again.metadata.resource_version, shared.metadata.resource_version,
        "the shared object did not change hands"
    );

    // Once the first Gateway goes (and its objects with it), the second takes the object.
    gws.delete("first", &Default::default()).await.unwrap();
    wait_for(
        "the shared ConfigMap held by the second Gateway",
        T,
        || async {
            let s = cms.get_opt("shared").await.unwrap()?;
            (s.data?.get("gw")? == "second").then_some(())
        },
    )
    .await;
    delete_class(&client, &class).await;
    ns.delete().await;
}

/// Applies `existing` (an object gatewright does not manage) and a Gateway `gw` of
/// `class`, whose `templates` render an object of the same name, then waits until the
/// Gateway reports that it will not adopt it: `Programmed=False`.
async fn gateway_refuses_to_adopt(
    client: &kube::Client,
    ns: &str,
    class: &str,
    existing: &str,
    templates: &str,
) {
    apply_yaml(client, existing).await;
    apply_yaml(client, &class_yaml(class, templates)).await;
    apply_yaml(client, &gateway(ns, "gw", class)).await;
    let gws: Api<Gateway> = Api::namespaced(client.clone(), ns);
    let p = wait_for(
        "the Gateway reporting the object it will not adopt",
        T,
        || async {
            let g = serde_json::to_value(gws.get("gw").await.ok()?).ok()?;
            let p = conditions(&g, "Programmed")?;
            p["message"]
                .as_str()?
                .contains("not managed by gatewright")
                .then_some(p)
        },
    )
    .await;
    assert_eq!(p["status"], "False");
    // It will not fix itself: Invalid, which GitOps health checks read as Degraded
    // (Pending would read as progressing forever).
    assert_eq!(p["reason"], "Invalid", "{p}");
}

/// An object of the same name that gatewright does not manage is never adopted.
#[tokio::test]
async fn an_object_we_do_not_manage_is_not_adopted() {
    let client = admin().await;
    let _ctl = controller();
    let ns = TestNamespace::new(&client, "adopt").await;
    let class = unique_name("adopt");
    let existing = format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: gw-settings, namespace: {}}}\ndata: {{owner: the-team}}\n",
        ns.name
    );
    let templates = "  - name: settings\n    template: |\n      apiVersion: v1\n      kind: ConfigMap\n      metadata: {name: {{ gateway.metadata.name ~ \"-settings\" }}}\n      data: {owner: gatewright}\n";
    gateway_refuses_to_adopt(&client, &ns.name, &class, &existing, templates).await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &ns.name);
    let cm = cms.get("gw-settings").await.unwrap();
    assert_eq!(cm.data.unwrap()["owner"], "the-team");
    assert!(cm.metadata.owner_references.is_none());
    delete_class(&client, &class).await;
    ns.delete().await;
}

/// The same for a custom kind (cert-manager's Certificate): there the names of every
/// object of the kind, watched by metadata (`snapshot::names`), tell that the name is
/// taken, and the user's Certificate is left alone.
#[tokio::test]
async fn a_certificate_we_do_not_manage_is_not_adopted() {
    let client = admin().await;
    let _ctl = controller();
    let ns = TestNamespace::new(&client, "adopt-cert").await;
    let class = unique_name("adopt-cert");
    let existing = format!(
        "apiVersion: cert-manager.io/v1\nkind: Certificate\nmetadata: {{name: gw-tls, namespace: {}}}\nspec: {{secretName: theirs, dnsNames: [theirs.example.com], issuerRef: {{name: theirs}}}}\n",
        ns.name
    );
    let templates = "  - name: tls\n    template: |\n      apiVersion: cert-manager.io/v1\n      kind: Certificate\n      metadata: {name: {{ gateway.metadata.name ~ \"-tls\" }}}\n      spec: {secretName: ours, dnsNames: [ours.example.com], issuerRef: {name: ours}}\n";
    gateway_refuses_to_adopt(&client, &ns.name, &class, &existing, templates).await;
    let certs: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        &ns.name,
        &ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("cert-manager.io", "v1", "Certificate"),
            "certificates",
        ),
    );
    let c = serde_json::to_value(certs.get("gw-tls").await.unwrap()).unwrap();
    assert_eq!(c["spec"]["secretName"], "theirs", "{c}");
    assert!(
        c["metadata"]["labels"]["app.kubernetes.io/managed-by"].is_null(),
        "{c}"
    );
    delete_class(&client, &class).await;
    ns.delete().await;
}

/// The same for a kind the controller watches in full (HTTPRoute): there its caches,
/// not a read, tell that the name is taken, and the user's route is left alone.
#[tokio::test]
async fn a_route_we_do_not_manage_is_not_adopted() {
    let client = admin().await;
    let _ctl = controller();
    let ns = TestNamespace::new(&client, "adopt-route").await;
    let class = unique_name("adopt-route");
    let existing = format!(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {{name: gw-shadow, namespace: {}}}\nspec: {{parentRefs: [{{name: mine}}], hostnames: [mine.example.com]}}\n",
        ns.name
    );
    let templates = "  - name: shadow\n    template: |\n      apiVersion: gateway.networking.k8s.io/v1\n      kind: HTTPRoute\n      metadata: {name: {{ gateway.metadata.name ~ \"-shadow\" }}}\n      spec: {parentRefs: [{name: elsewhere}]}\n";
    gateway_refuses_to_adopt(&client, &ns.name, &class, &existing, templates).await;
    let routes: Api<HttpRoute> = Api::namespaced(client.clone(), &ns.name);
    let r = serde_json::to_value(routes.get("gw-shadow").await.unwrap()).unwrap();
    assert_eq!(r["spec"]["parentRefs"][0]["name"], "mine", "{r}");
    assert!(
        r["metadata"]["labels"]["app.kubernetes.io/managed-by"].is_null(),
        "{r}"
    );
    delete_class(&client, &class).await;
    ns.delete().await;
}

/// The built-in table of kinds' scopes (used offline) says what the API server says, for
/// every kind of it this cluster serves.
#[tokio::test]
async fn the_builtin_scope_table_agrees_with_discovery() {
    use gatewright::render::scope::{Scope, builtin_table};
    let client = admin().await;
    let discovery = kube::Discovery::new(client).run().await.unwrap();
    let mut checked = 0;
    for (group, kind, scope) in builtin_table() {
        let Some(g) = discovery.groups().find(|g| g.name() == group) else {
            continue;
        };
        let Some((_, caps)) = g
            .resources_by_stability()
            .into_iter()
            .find(|(r, _)| r.kind == kind)
        else {
            continue;
        };
        let served = if caps.scope == kube::discovery::Scope::Cluster {
            Scope::Cluster
        } else {
            Scope::Namespaced
        };
        assert_eq!(served, scope, "{kind} ({group})");
        checked += 1;
    }
    assert!(
        checked > 40,
        "only {checked} kinds of the table are served here"
    );
}

/// A child kind the controller may not list (its RBAC not granted yet) is reported on the
/// Gateway, not waited for in silence; once a ClusterRole labelled to aggregate into
/// `gatewright-children` grants it, the controller lists it and programs the Gateway, with
/// no restart.
#[tokio::test]
async fn a_child_kind_without_rbac_is_reported_until_granted() {
    use k8s_openapi::api::rbac::v1::ClusterRole;
    let client = admin().await;
    let _ctl = controller();
    let ns = TestNamespace::new(&client, "norbac").await;
    let class = unique_name("norbac");
    let grant = "gatewright-e2e-issuers";
    let roles: Api<ClusterRole> = Api::all(client.clone());
    // Not granted (an earlier run's grant is taken back, and aggregated away).
    let _ = roles.delete(grant, &Default::default()).await;
    wait_for(
        "the issuers grant to be gone from gatewright-children",
        T,
        || async {
            let r = roles.get("gatewright-children").await.ok()?;
            (!r.rules
                .unwrap_or_default()
                .iter()
                .any(|r| r.resources.iter().flatten().any(|x| x == "issuers")))
            .then_some(())
        },
    )
    .await;
    let templates = "  - name: issuer\n    template: |\n      apiVersion: cert-manager.io/v1\n      kind: Issuer\n      metadata: {name: {{ gateway.metadata.name ~ \"-issuer\" }}}\n      spec: {selfSigned: {}}\n  status:\n    template: |\n      addresses: [{type: IPAddress, value: 192.0.2.1}]\n";
    apply_yaml(&client, &class_yaml(&class, templates)).await;
    apply_yaml(&client, &gateway(&ns.name, "gw", &class)).await;
    let gws: Api<Gateway> = Api::namespaced(client.clone(), &ns.name);
    let p = wait_for("the Gateway to say it may not list Issuers", T, || async {
        let g = serde_json::to_value(gws.get("gw").await.ok()?).ok()?;
        let p = conditions(&g, "Programmed")?;
        p["message"]
            .as_str()?
            .contains("may not list it")
            .then_some(p)
    })
    .await;
    assert_eq!(p["status"], "False", "{p}");
    assert_eq!(p["reason"], "Invalid", "{p}");
    let msg = p["message"].as_str().unwrap();
    assert!(
        msg.contains("Issuer") && msg.contains("gatewright.dev/aggregate-to-children"),
        "{msg}"
    );

    apply_yaml(
        &client,
        &format!("apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: {grant}\n  labels: {{gatewright.dev/aggregate-to-children: \"true\"}}\nrules:\n- apiGroups: [cert-manager.io]\n  resources: [issuers]\n  verbs: [get, list, watch, create, update, patch, delete]\n"),
    )
    .await;
    wait_for(
        "the Gateway Programmed once Issuers are granted",
        T,
        || async {
            let g = serde_json::to_value(gws.get("gw").await.ok()?).ok()?;
            (conditions(&g, "Programmed")?["status"] == "True").then_some(())
        },
    )
    .await;
    let issuers = crate::controller::dynamic(
        &client,
        &ns.name,
        "cert-manager.io",
        "v1",
        "Issuer",
        "issuers",
    );
    assert!(issuers.get_opt("gw-issuer").await.unwrap().is_some());
    delete_class(&client, &class).await;
    ns.delete().await;
    let _ = roles.delete(grant, &Default::default()).await;
}

/// A blueprint of one's own whose route copy keeps the route's own hostnames and attaches
/// to the whole child Gateway: the copy of a tenant's route that one listener refused is
/// not applied, and the route's status entry, the Gateway's status and a Warning Event
/// name the blueprint, the template and the rule (docs/security.md).
#[tokio::test]
async fn a_route_copy_crossing_the_tenancy_boundary_is_refused() {
    let client = admin().await;
    let _ctl = controller();
    let infra = TestNamespace::new(&client, "bound").await;
    let tenant = TestNamespace::new(&client, "tenant").await;
    let class = unique_name("wide");
    let text = format!(
        r#"apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {{name: {class}}}
spec:
  controllerName: gatewright.dev/gateway-controller
  parametersRef: {{group: gatewright.dev, kind: GatewayClassBlueprint, name: {class}}}
---
apiVersion: gatewright.dev/v1alpha1
kind: GatewayClassBlueprint
metadata: {{name: {class}}}
spec:
  gatewayTemplates:
  - name: child
    template: |
      apiVersion: gateway.networking.k8s.io/v1
      kind: Gateway
      metadata: {{name: {{{{ gateway.metadata.name ~ "-child" }}}} }}
      spec:
        gatewayClassName: nobody
        listeners:
        {{% for l in listeners %}}
        - {{name: {{{{ l.key }}}}, port: {{{{ l.port }}}}, protocol: {{{{ l.protocol }}}}, hostname: {{{{ l.hostname }}}}, allowedRoutes: {{{{ l.allowedRoutes }}}} }}
        {{% endfor %}}
  routeTemplates:
  - name: copy
    template: |
      apiVersion: gateway.networking.k8s.io/v1
      kind: HTTPRoute
      metadata: {{name: {{{{ route.metadata.name ~ "-copy" }}}} }}
      spec:
        parentRefs: [{{name: {{{{ gateway.metadata.name ~ "-child" }}}}, namespace: {{{{ gateway.metadata.namespace }}}} }}]
        hostnames: {{{{ route.spec.hostnames }}}}
        rules: {{{{ route.spec.rules }}}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {{name: shared, namespace: {infra}}}
spec:
  gatewayClassName: {class}
  listeners:
  - {{name: admin, port: 80, protocol: HTTP, hostname: admin.example.com, allowedRoutes: {{namespaces: {{from: Same}}}}}}
  - {{name: apps, port: 80, protocol: HTTP, hostname: "*.apps.example.com", allowedRoutes: {{namespaces: {{from: All}}}}}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: hijack, namespace: {tenant}}}
spec:
  parentRefs: [{{name: shared, namespace: {infra}}}]
  hostnames: [foo.apps.example.com, admin.example.com]
  rules: [{{backendRefs: [{{name: app, port: 80}}]}}]
"#,
        infra = infra.name,
        tenant = tenant.name,
    );
    apply_yaml(&client, &text).await;

    let routes: Api<HttpRoute> = Api::namespaced(client.clone(), &tenant.name);
    let entry = wait_for(
        "the route's entry saying its copy was refused",
        T,
        || async {
            let r = serde_json::to_value(routes.get("hijack").await.ok()?).ok()?;
            let parents = r["status"]["parents"].as_array()?.clone();
            let ours = parents
                .into_iter()
                .find(|p| p["controllerName"] == gatewright::gateway::CONTROLLER_NAME)?;
            let rendered = cond(&ours["conditions"], "gatewright.dev/Rendered")?.clone();
            (rendered["status"] == "False").then_some(ours)
        },
    )
    .await;
    let rendered = cond(&entry["conditions"], "gatewright.dev/Rendered").unwrap();
    let msg = rendered["message"].as_str().unwrap();
    assert!(
        msg.contains(&format!("blueprint {class}"))
            && msg.contains("template copy")
            && msg.contains("crosses the tenancy boundary")
            && msg.contains(r#"attaches to listener "admin""#),
        "{msg}"
    );
    assert_eq!(
        cond(&entry["conditions"], "Accepted").unwrap()["status"],
        "True",
        "the parent accepted the route on `apps`: {entry}"
    );
    // The Gateway says so too, and an Event marks it.
    let gws: Api<Gateway> = Api::namespaced(client.clone(), &infra.name);
    wait_for("the Gateway naming the refused copy", T, || async {
        let g = serde_json::to_value(gws.get("shared").await.ok()?).ok()?;
        let p = conditions(&g, "Programmed")?;
        (p["status"] == "False"
            && p["message"]
                .as_str()?
                .contains("crosses the tenancy boundary"))
        .then_some(())
    })
    .await;
    let events: Api<k8s_openapi::api::events::v1::Event> =
        Api::namespaced(client.clone(), &infra.name);
    wait_for(
        "a Warning Event on the Gateway naming the rule",
        T,
        || async {
            events
                .list(&ListParams::default())
                .await
                .unwrap()
                .items
                .into_iter()
                .find(|e| {
                    e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("shared")
                        && e.type_.as_deref() == Some("Warning")
                        && e.reason.as_deref() == Some("TemplateFailed")
                        && e.note
                            .as_deref()
                            .is_some_and(|n| n.contains("crosses the tenancy boundary"))
                })
        },
    )
    .await;
    // Nothing of the copy was applied; the child Gateway (within the boundary) was.
    let copies: Api<HttpRoute> = Api::namespaced(client.clone(), &tenant.name);
    assert!(copies.get_opt("hijack-copy").await.unwrap().is_none());
    assert!(gws.get_opt("shared-child").await.unwrap().is_some());
    delete_class(&client, &class).await;
    tenant.delete().await;
    infra.delete().await;
}
