//! The controller on the real cluster: it runs in-process (one per test binary), each
//! test in its own namespace with its own GatewayClass and blueprint names.

use std::time::Duration;

use gateway_api::apis::standard::gatewayclasses::GatewayClass;
use gateway_api::apis::standard::gateways::Gateway;
use gateway_api::apis::standard::httproutes::HttpRoute;
use kube::Client;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams,
};
use serde_json::{Value, json};

use crate::common::{TestNamespace, admin, apply_yaml, controller, shipped_class_yaml, wait_for};
use gatewright::snapshot::Key;

const T: Duration = Duration::from_secs(60);

pub(crate) fn dynamic(
    client: &Client,
    ns: &str,
    group: &str,
    version: &str,
    kind: &str,
    plural: &str,
) -> Api<DynamicObject> {
    Api::namespaced_with(
        client.clone(),
        ns,
        &ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural),
    )
}

/// The cluster-wide API of a kind (cluster-scoped children, or every namespace).
pub(crate) fn cluster_dynamic(
    client: &Client,
    group: &str,
    version: &str,
    kind: &str,
    plural: &str,
) -> Api<DynamicObject> {
    Api::all_with(
        client.clone(),
        &ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural),
    )
}

/// Every GatewayClassBlueprint.
pub(crate) fn blueprints(client: &Client) -> Api<DynamicObject> {
    cluster_dynamic(
        client,
        "gatewright.dev",
        "v1alpha1",
        "GatewayClassBlueprint",
        "gatewayclassblueprints",
    )
}

/// The Crossplane LBListeners of namespace `ns`.
pub(crate) fn lb_listeners(client: &Client, ns: &str) -> Api<DynamicObject> {
    dynamic(
        client,
        ns,
        "elbv2.aws.m.upbound.io",
        "v1beta1",
        "LBListener",
        "lblisteners",
    )
}

/// The istio-certmanager-externaldns class and blueprint under a name of this test.
fn shipped_class(name: &str) -> String {
    shipped("istio-certmanager-externaldns", name)
}

/// A shipped class and its blueprint, renamed `name`.
pub(crate) fn shipped(class: &str, name: &str) -> String {
    let dir = format!("{}/gatewayclasses/{class}", env!("CARGO_MANIFEST_DIR"));
    let gc = std::fs::read_to_string(format!("{dir}/gatewayclass.yaml")).unwrap();
    let bp = std::fs::read_to_string(format!("{dir}/blueprint.yaml")).unwrap();
    format!("{gc}\n---\n{bp}").replace(class, name)
}

pub(crate) fn gateway_yaml(ns: &str, class: &str) -> String {
    format!(
        r#"apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {{name: gw, namespace: {ns}}}
spec:
  gatewayClassName: {class}
  listeners:
  - {{name: http, port: 80, protocol: HTTP, hostname: "*.example.com"}}
  - {{name: https, port: 443, protocol: HTTPS, hostname: "*.example.com", tls: {{options: {{gatewright.dev/certificate: generated}}}}}}
"#
    )
}

pub(crate) fn route_yaml(ns: &str, name: &str, host: &str) -> String {
    format!(
        r#"apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: {name}, namespace: {ns}}}
spec:
  parentRefs: [{{name: gw}}]
  hostnames: [{host}]
  rules:
  - backendRefs:
    - {{name: primary, port: 80, weight: 100}}
    - {{name: canary, port: 80, weight: 0}}
"#
    )
}

pub(crate) fn cond<'a>(conds: &'a Value, t: &str) -> Option<&'a Value> {
    conds.as_array()?.iter().find(|c| c["type"] == t)
}

pub(crate) async fn gateway_json(client: &Client, ns: &str) -> Value {
    serde_json::to_value(
        Api::<Gateway>::namespaced(client.clone(), ns)
            .get("gw")
            .await
            .unwrap(),
    )
    .unwrap()
}

async fn wait_programmed(client: &Client, ns: &str, want: &str) -> Value {
    wait_for(
        &format!("Gateway {ns}/gw Programmed={want}"),
        T,
        || async move {
            let g = gateway_json(client, ns).await;
            (cond(&g["status"]["conditions"], "Programmed")?["status"] == want).then_some(g)
        },
    )
    .await
}

/// The Certificates in `ns`, oldest first (make-before-break keeps two during a rotation).
async fn certificates(client: &Client, ns: &str) -> Vec<Value> {
    let certs = dynamic(
        client,
        ns,
        "cert-manager.io",
        "v1",
        "Certificate",
        "certificates",
    );
    let mut all: Vec<Value> = certs
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|c| serde_json::to_value(c).unwrap())
        .collect();
    all.sort_by_key(|c| {
        (
            c["metadata"]["creationTimestamp"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
            c["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
        )
    });
    all
}

/// The dnsNames of the Certificate once it is the only one (no rotation under way); plays
/// cert-manager's and Istio's part so that a rotation can finish.
pub(crate) async fn cert_dns_names(client: &Client, ns: &str) -> Option<Value> {
    let certs = certificates(client, ns).await;
    if certs.len() > 1 {
        // As in `simulate`: a failed discovery is tried again on the next call.
        if let Err(e) = gatewright::simulate::simulate_ready_where(
            client,
            Some(ns),
            gatewright::simulate::Play::All,
        )
        .await
        {
            eprintln!("simulate: {e}; again in the next round");
        }
        return None;
    }
    certs.first().map(|c| c["spec"]["dnsNames"].clone())
}

/// Plays the downstream controllers' part for the Gateways in `ns` only: another test's
/// children (namespaced or cluster-scoped) keep the state that test is asserting.
pub(crate) async fn simulate(client: &Client, ns: &str, times: usize) {
    for _ in 0..times {
        // Discovery fails while another test adds or removes a CRD (a group version listed,
        // then gone): that round plays nothing, the next one does.
        if let Err(e) = gatewright::simulate::simulate_ready_where(
            client,
            Some(ns),
            gatewright::simulate::Play::All,
        )
        .await
        {
            eprintln!("simulate: {e}; again in the next round");
        }
        tokio::time::sleep(Duration::from_millis(700)).await;
    }
}

#[tokio::test]
async fn gateway_class_accepted_or_rejected() {
    let client = admin().await;
    let _ctl = controller();
    let ns = TestNamespace::new(&client, "class").await;
    let good = format!("class-ok-{}", ns.name);
    apply_yaml(&client, &shipped_class(&good)).await;
    let bad = format!("class-bad-{}", ns.name);
    apply_yaml(&client, &format!("apiVersion: gateway.networking.k8s.io/v1\nkind: GatewayClass\nmetadata: {{name: {bad}}}\nspec:\n  controllerName: gatewright.dev/gateway-controller\n  parametersRef: {{group: gatewright.dev, kind: GatewayClassBlueprint, name: does-not-exist}}\n")).await;
    let classes: Api<GatewayClass> = Api::all(client.clone());
    for (name, want, reason) in [
        (&good, "True", "Accepted"),
        (&bad, "False", "InvalidParameters"),
    ] {
        let c = wait_for(&format!("class {name} Accepted={want}"), T, || {
            let classes = classes.clone();
            async move {
                let c = serde_json::to_value(classes.get(name).await.unwrap()).unwrap();
                (cond(&c["status"]["conditions"], "Accepted")?["status"] == want).then_some(c)
            }
        })
        .await;
        assert_eq!(
            cond(&c["status"]["conditions"], "Accepted").unwrap()["reason"],
            reason
        );
        assert_eq!(
            cond(&c["status"]["conditions"], "Accepted").unwrap()["observedGeneration"],
            c["metadata"]["generation"]
        );
    }
    let c = serde_json::to_value(classes.get(&good).await.unwrap()).unwrap();
    assert_eq!(
        c["status"]["supportedFeatures"],
        json!(
            // The shipped Istio-based class carries HTTP, gRPC, TLS and TCP routes.
            gatewright::plan::class::supported_features([
                "HTTPRoute",
                "GRPCRoute",
                "TLSRoute",
                "TCPRoute"
            ])
            .iter()
            .map(|f| json!({ "name": f }))
            .collect::<Vec<_>>()
        )
    );
    // A blueprint whose template does not compile says so in its own status, with the line.
    let broken = format!("broken-{}", ns.name);
    apply_yaml(&client, &format!("apiVersion: gatewright.dev/v1alpha1\nkind: GatewayClassBlueprint\nmetadata: {{name: {broken}}}\nspec:\n  gatewayTemplates:\n  - name: cm\n    template: |\n      a: 1\n      b: {{{{ gateway.metadata.name \n")).await;
    let bps: Api<DynamicObject> = blueprints(&client);
    let b = wait_for("the broken blueprint's status", T, || {
        let bps = bps.clone();
        let broken = broken.clone();
        async move {
            let b = bps.get(&broken).await.unwrap();
            (cond(&b.data["status"]["conditions"], "Accepted")?["status"] == "False")
                .then(|| b.data.clone())
        }
    })
    .await;
    let msg = cond(&b["status"]["conditions"], "Accepted").unwrap()["message"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(msg.contains("template cm: line 2"), "{msg}");
    // kstatus and Flux read it too: not Ready, Stalled (it will not fix itself), at the
    // blueprint's generation.
    let conds = &b["status"]["conditions"];
    assert_eq!(cond(conds, "Ready").unwrap()["status"], "False", "{b}");
    assert_eq!(cond(conds, "Stalled").unwrap()["status"], "True", "{b}");
    // Created just now: generation 1.
    assert_eq!(b["status"]["observedGeneration"], 1, "{b}");
    assert_eq!(
        cond(conds, "Ready").unwrap()["observedGeneration"],
        1,
        "{b}"
    );
    // Mended: Ready, and Stalled gone.
    apply_yaml(&client, &format!("apiVersion: gatewright.dev/v1alpha1\nkind: GatewayClassBlueprint\nmetadata: {{name: {broken}}}\nspec:\n  gatewayTemplates:\n  - name: cm\n    template: |\n      a: 1\n")).await;
    wait_for("the mended blueprint Ready", T, || {
        let bps = bps.clone();
        let broken = broken.clone();
        async move {
            let b = bps.get(&broken).await.unwrap();
            let conds = &b.data["status"]["conditions"];
            (cond(conds, "Ready")?["status"] == "True" && cond(conds, "Stalled").is_none())
                .then_some(())
        }
    })
    .await;
    let _ = bps.delete(&broken, &DeleteParams::default()).await;
    let _ = classes.delete(&good, &DeleteParams::default()).await;
    let _ = classes.delete(&bad, &DeleteParams::default()).await;
    ns.delete().await;
}

/// The whole life of a Gateway of a shipped class: children, readiness, routes coming and
/// going, drift, a removed template, another controller's route status, Flagger-style
/// weight changes, nothing written once converged, and deletion.
#[tokio::test]
async fn a_shipped_class_end_to_end() {
    let client = admin().await;
    let ctl = controller();
    let ns = TestNamespace::new(&client, "e2e").await;
    let class = format!("istio-{}", ns.name);
    apply_yaml(&client, &shipped_class(&class)).await;
    apply_yaml(&client, &gateway_yaml(&ns.name, &class)).await;
    apply_yaml(&client, &route_yaml(&ns.name, "shop", "shop.example.com")).await;

    // Children appear; Programmed stays False until the downstream controllers are done.
    let names = wait_for("the Certificate", T, || cert_dns_names(&client, &ns.name)).await;
    assert_eq!(names, json!(["shop.example.com"]));
    let g = wait_programmed(&client, &ns.name, "False").await;
    assert!(g["status"].get("addresses").is_none_or(Value::is_null));
    simulate(&client, &ns.name, 4).await;
    let g = wait_programmed(&client, &ns.name, "True").await;
    assert_eq!(
        g["status"]["addresses"][0]["value"],
        gatewright::simulate::SIMULATED_IP
    );
    assert_eq!(g["status"]["listeners"][0]["attachedRoutes"], 1);

    // A second route adds its hostname to the certificate and to attachedRoutes.
    apply_yaml(&client, &route_yaml(&ns.name, "blog", "blog.example.com")).await;
    wait_for("the Certificate to gain blog.example.com", T, || async {
        (cert_dns_names(&client, &ns.name).await?
            == json!(["blog.example.com", "shop.example.com"]))
        .then_some(())
    })
    .await;
    wait_for("attachedRoutes 2", T, || async {
        (gateway_json(&client, &ns.name).await["status"]["listeners"][0]["attachedRoutes"] == 2)
            .then_some(())
    })
    .await;
    let routes: Api<HttpRoute> = Api::namespaced(client.clone(), &ns.name);
    routes
        .delete("blog", &DeleteParams::default())
        .await
        .unwrap();
    wait_for("the Certificate to lose blog.example.com", T, || async {
        (cert_dns_names(&client, &ns.name).await? == json!(["shop.example.com"])).then_some(())
    })
    .await;

    // Drift on a field we own is undone.
    let certs = dynamic(
        &client,
        &ns.name,
        "cert-manager.io",
        "v1",
        "Certificate",
        "certificates",
    );
    let cert_name = certificates(&client, &ns.name).await[0]["metadata"]["name"]
        .as_str()
        .unwrap()
        .to_owned();
    certs
        .patch(
            &cert_name,
            &PatchParams::default(),
            &Patch::Merge(&json!({"spec": {"dnsNames": ["evil.example.com"]}})),
        )
        .await
        .unwrap();
    wait_for("the drift to be undone", T, || async {
        (cert_dns_names(&client, &ns.name).await? == json!(["shop.example.com"])).then_some(())
    })
    .await;

    // Another controller's entry in the route's status survives our writes.
    let foreign = json!({"status": {"parents": [
        {"parentRef": {"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": "other"}, "controllerName": "example.com/other",
         "conditions": [{"type": "Accepted", "status": "True", "reason": "Accepted", "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z", "observedGeneration": 1}]}
    ]}});
    routes
        .patch_status("shop", &PatchParams::default(), &Patch::Merge(&foreign))
        .await
        .unwrap();
    wait_for("our entry back beside the foreign one", T, || {
        let routes = routes.clone();
        async move {
            let r = serde_json::to_value(routes.get("shop").await.unwrap()).unwrap();
            let parents = r["status"]["parents"].as_array()?.clone();
            (parents.len() == 2
                && parents
                    .iter()
                    .any(|p| p["controllerName"] == "example.com/other"))
            .then_some(())
        }
    })
    .await;

    // Flagger: full PUT of the spec, weights shifted step by step.
    let shadows = dynamic(
        &client,
        &ns.name,
        "gateway.networking.k8s.io",
        "v1",
        "HTTPRoute",
        "httproutes",
    );
    for canary in [10, 30, 50] {
        let mut r = routes.get("shop").await.unwrap();
        let backends = r.spec.rules.as_mut().unwrap()[0]
            .backend_refs
            .as_mut()
            .unwrap();
        backends[0].weight = Some(100 - canary);
        backends[1].weight = Some(canary);
        let r = routes
            .replace("shop", &PostParams::default(), &r)
            .await
            .unwrap();
        let generation = r.metadata.generation.unwrap();
        wait_for(
            &format!("shadow route weight {canary} and status at generation {generation}"),
            T,
            || {
                let (routes, shadows) = (routes.clone(), shadows.clone());
                async move {
                    let shadow = shadows.get_opt("shop-gw-istio").await.unwrap()?;
                    let w = shadow.data["spec"]["rules"][0]["backendRefs"][1]["weight"].as_i64()?;
                    let r = serde_json::to_value(routes.get("shop").await.unwrap()).unwrap();
                    let ours = r["status"]["parents"]
                        .as_array()?
                        .iter()
                        .find(|p| p["controllerName"] == "gatewright.dev/gateway-controller")?
                        .clone();
                    let acc = cond(&ours["conditions"], "Accepted")?;
                    (w == i64::from(canary)
                        && acc["status"] == "True"
                        && acc["observedGeneration"] == generation)
                        .then_some(())
                }
            },
        )
        .await;
    }

    // Converged: a forced re-plan writes nothing.
    simulate(&client, &ns.name, 2).await;
    wait_programmed(&client, &ns.name, "True").await;
    let key = gatewright::snapshot::Key::new(ns.name.clone(), "gw");
    // Settled: no reconcile of it for a while (the echo of our last writes, or a held
    // status write, may still wake one).
    let runs_before = settled_key(&ctl, &key).await;
    // Counted at the client's HTTP layer: every POST/PUT/PATCH/DELETE sent.
    let ns_writes_before = ctl.metrics().writes_in_namespace(&ns.name);
    ctl.local()
        .enqueue(gatewright::controller::Work::Gateway(key.clone()));
    let written = wait_for("a forced re-plan", T, || async {
        let (runs, w) = ctl.local().last_writes(&key);
        (runs > runs_before).then_some(w)
    })
    .await;
    assert_eq!(
        written, 0,
        "a re-plan of a converged Gateway must write nothing"
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        ctl.metrics().writes_in_namespace(&ns.name),
        ns_writes_before,
        "no write request may reach the API server for this namespace"
    );

    // Removing a template from the blueprint prunes its child.
    let bps: Api<DynamicObject> = blueprints(&client);
    let dns = dynamic(
        &client,
        &ns.name,
        "externaldns.k8s.io",
        "v1alpha1",
        "DNSEndpoint",
        "dnsendpoints",
    );
    assert!(dns.get_opt("gw-dns").await.unwrap().is_some());
    let mut bp = bps.get(&class).await.unwrap();
    let templates = bp.data["spec"]["gatewayTemplates"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["name"] != "dns")
        .cloned()
        .collect::<Vec<_>>();
    bp.data["spec"]["gatewayTemplates"] = Value::Array(templates);
    bp.metadata.managed_fields = None;
    bps.replace(&class, &PostParams::default(), &bp)
        .await
        .unwrap();
    wait_for("the DNSEndpoint to be pruned", T, || {
        let dns = dns.clone();
        async move { dns.get_opt("gw-dns").await.unwrap().is_none().then_some(()) }
    })
    .await;

    // Deleting the Gateway removes its children, the route's too.
    Api::<Gateway>::namespaced(client.clone(), &ns.name)
        .delete("gw", &DeleteParams::default())
        .await
        .unwrap();
    wait_for("the Gateway and its children to be gone", T, || async {
        let gone = Api::<Gateway>::namespaced(client.clone(), &ns.name)
            .get_opt("gw")
            .await
            .unwrap()
            .is_none()
            && cert_dns_names(&client, &ns.name).await.is_none()
            && shadows.get_opt("shop-gw-istio").await.unwrap().is_none()
            && shadows.get_opt("gw-istio").await.is_ok_and(|o| o.is_none());
        gone.then_some(())
    })
    .await;
    let _ = Api::<GatewayClass>::all(client.clone())
        .delete(&class, &DeleteParams::default())
        .await;
    let _ = bps.delete(&class, &DeleteParams::default()).await;
    ns.delete().await;
}

/// The contour-istio class: every child appears, Programmed stays False until the
/// Ingress has a load balancer address, then True with that address.
#[tokio::test]
async fn contour_istio_class_end_to_end() {
    let client = admin().await;
    let _ctl = controller();
    let ns = TestNamespace::new(&client, "contour").await;
    let class = format!("contour-{}", ns.name);
    apply_yaml(&client, &shipped("contour-istio", &class)).await;
    apply_yaml(&client, &gateway_yaml(&ns.name, &class)).await;
    apply_yaml(&client, &route_yaml(&ns.name, "shop", "shop.example.com")).await;

    let kinds = [
        (
            "cert-manager.io",
            "v1",
            "Certificate",
            "certificates",
            "gw-tls",
        ),
        (
            "gateway.networking.k8s.io",
            "v1",
            "Gateway",
            "gateways",
            "gw-istio",
        ),
        (
            "gateway.networking.k8s.io",
            "v1",
            "HTTPRoute",
            "httproutes",
            "shop-gw-istio",
        ),
        ("networking.k8s.io", "v1", "Ingress", "ingresses", "gw-lb"),
        (
            "autoscaling",
            "v2",
            "HorizontalPodAutoscaler",
            "horizontalpodautoscalers",
            "gw-istio",
        ),
        (
            "policy",
            "v1",
            "PodDisruptionBudget",
            "poddisruptionbudgets",
            "gw-istio",
        ),
    ];
    for (group, version, kind, plural, name) in kinds {
        let api = dynamic(&client, &ns.name, group, version, kind, plural);
        let obj = wait_for(&format!("{kind} {name}"), T, || {
            let api = api.clone();
            async move { api.get_opt(name).await.unwrap() }
        })
        .await;
        let owner = &obj.metadata.owner_references.as_ref().unwrap()[0];
        assert_eq!(
            owner.kind,
            if kind == "HTTPRoute" {
                "HTTPRoute"
            } else {
                "Gateway"
            },
            "{kind} {name} is owned by its parent"
        );
    }
    // What it waits for is progress, written at most once per few seconds
    // (`settle::PROGRESS_HOLD`): it names the Ingress once that text is written.
    let g = wait_for(
        "Programmed=False naming the Ingress it waits for",
        T,
        || async {
            let g = gateway_json(&client, &ns.name).await;
            let p = cond(&g["status"]["conditions"], "Programmed")?;
            (p["status"] == "False" && p["message"].as_str()?.contains("Ingress")).then_some(g)
        },
    )
    .await;
    assert!(g["status"].get("addresses").is_none_or(Value::is_null));

    simulate(&client, &ns.name, 4).await;
    let g = wait_programmed(&client, &ns.name, "True").await;
    assert_eq!(
        g["status"]["addresses"],
        json!([{"type": "IPAddress", "value": gatewright::simulate::SIMULATED_IP}])
    );
    // The Ingress terminates TLS with the Certificate's Secret, for the route's hostname.
    let ingress = dynamic(
        &client,
        &ns.name,
        "networking.k8s.io",
        "v1",
        "Ingress",
        "ingresses",
    )
    .get("gw-lb")
    .await
    .unwrap();
    assert_eq!(
        ingress.data["spec"]["tls"],
        json!([{"hosts": ["shop.example.com"], "secretName": "gw-tls"}])
    );

    Api::<Gateway>::namespaced(client.clone(), &ns.name)
        .delete("gw", &DeleteParams::default())
        .await
        .unwrap();
    let _ = Api::<GatewayClass>::all(client.clone())
        .delete(&class, &DeleteParams::default())
        .await;
    ns.delete().await;
}

/// A blueprint naming a kind the API server does not serve: reported, then picked up
/// once its CRD appears, without a restart. A broken template: the template and line in
/// status, and what ran before stays.
#[tokio::test]
async fn missing_kinds_and_broken_templates() {
    let client = admin().await;
    let ctl = controller();
    let ns = TestNamespace::new(&client, "kind").await;
    let class = format!("widgets-{}", ns.name);
    let group = crate::common::WIDGET_GROUP.to_owned();
    // The kind must be missing when the test starts, also on a reused cluster.
    let crds: Api<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition> = Api::all(client.clone());
    let crd_name = format!("widgets.{group}");
    let _ = crds.delete(&crd_name, &DeleteParams::default()).await;
    wait_for("the Widget CRD to be gone", T, || {
        let crds = crds.clone();
        let n = crd_name.clone();
        async move { crds.get_opt(&n).await.unwrap().is_none().then_some(()) }
    })
    .await;
    let bp = |extra: &str| {
        format!(
            r#"apiVersion: gatewright.dev/v1alpha1
kind: GatewayClassBlueprint
metadata: {{name: {class}}}
spec:
  gatewayTemplates:
  - name: cm
    template: |
      apiVersion: v1
      kind: ConfigMap
      metadata:
        name: {{{{ gateway.metadata.name ~ "-cm" }}}}
      data:
        listeners: {{{{ listeners | length | string }}}}
  - name: widget
    template: |
      apiVersion: {group}/v1
      kind: Widget
      metadata:
        name: {{{{ gateway.metadata.name ~ "-widget" }}}}
      spec: {{size: 1}}
{extra}  status:
    template: |
      addresses: [{{type: IPAddress, value: 192.0.2.20}}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {{name: {class}}}
spec:
  controllerName: gatewright.dev/gateway-controller
  parametersRef: {{group: gatewright.dev, kind: GatewayClassBlueprint, name: {class}}}
"#
        )
    };
    apply_yaml(&client, &bp("")).await;
    apply_yaml(&client, &gateway_yaml(&ns.name, &class)).await;
    let g = wait_for("Programmed=False naming the missing kind", T, || async {
        let g = gateway_json(&client, &ns.name).await;
        let p = cond(&g["status"]["conditions"], "Programmed")?;
        p["message"].as_str()?.contains("Widget").then(|| g.clone())
    })
    .await;
    assert_eq!(
        cond(&g["status"]["conditions"], "Programmed").unwrap()["status"],
        "False"
    );
    let crd = format!(
        r#"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {{name: widgets.{group}}}
spec:
  group: {group}
  names: {{kind: Widget, plural: widgets, singular: widget, listKind: WidgetList}}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema: {{type: object, x-kubernetes-preserve-unknown-fields: true}}
"#
    );
    apply_yaml(&client, &crd).await;
    let widgets = dynamic(&client, &ns.name, &group, "v1", "Widget", "widgets");
    let w = widgets.clone();
    wait_for(
        "the Widget once its CRD exists",
        Duration::from_secs(90),
        || {
            let w = w.clone();
            async move { w.get_opt("gw-widget").await.ok().flatten() }
        },
    )
    .await;
    wait_programmed(&client, &ns.name, "True").await;

    // Break a template: status names it and its line; the children from before stay.
    apply_yaml(
        &client,
        &bp("  - name: broken\n    template: |\n      a: 1\n      b: {{ values.nope.deeper }}\n"),
    )
    .await;
    let g = wait_for("Programmed=False naming the broken template", T, || async {
        let g = gateway_json(&client, &ns.name).await;
        let p = cond(&g["status"]["conditions"], "Programmed")?;
        p["message"]
            .as_str()?
            .contains("template broken: line 2")
            .then(|| g.clone())
    })
    .await;
    assert_eq!(
        cond(&g["status"]["conditions"], "Programmed").unwrap()["reason"],
        "Invalid"
    );
    assert!(
        widgets.get_opt("gw-widget").await.unwrap().is_some(),
        "what ran before is kept"
    );
    let cms: Api<k8s_openapi::api::core::v1::ConfigMap> = Api::namespaced(client.clone(), &ns.name);
    assert!(cms.get_opt("gw-cm").await.unwrap().is_some());

    Api::<Gateway>::namespaced(client.clone(), &ns.name)
        .delete("gw", &DeleteParams::default())
        .await
        .unwrap();
    wait_for("the Gateway to be gone", T, || async {
        Api::<Gateway>::namespaced(client.clone(), &ns.name)
            .get_opt("gw")
            .await
            .unwrap()
            .is_none()
            .then_some(())
    })
    .await;
    // No Gateway uses the Widget kind any more (no other test does): its watch stops.
    let widget = (format!("{group}/v1"), "Widget".to_owned());
    wait_for("the Widget watch to stop", T, || async {
        (!ctl.local().watched_kinds().contains(&widget)).then_some(())
    })
    .await;
    let _ = Api::<GatewayClass>::all(client.clone())
        .delete(&class, &DeleteParams::default())
        .await;
    ns.delete().await;
}

/// Editing a blueprint, a GatewayClassConfig or a GatewayConfig re-renders existing
/// Gateways, in the documented order of precedence.
#[tokio::test]
async fn policies_re_render_existing_gateways() {
    let client = admin().await;
    let _ctl = controller();
    let ns = TestNamespace::new(&client, "values").await;
    let class = format!("values-{}", ns.name);
    let blueprint = |over: &str| {
        format!(
            r#"apiVersion: gatewright.dev/v1alpha1
kind: GatewayClassBlueprint
metadata: {{name: {class}}}
spec:
  values:
    default: {{color: red, size: s}}
    override: {{{over}}}
  gatewayTemplates:
  - name: cm
    template: |
      apiVersion: v1
      kind: ConfigMap
      metadata:
        name: {{{{ gateway.metadata.name ~ "-values" }}}}
      data:
        color: {{{{ values.color }}}}
        size: {{{{ values.size }}}}
  status:
    template: |
      addresses: [{{type: IPAddress, value: 192.0.2.30}}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {{name: {class}}}
spec:
  controllerName: gatewright.dev/gateway-controller
  parametersRef: {{group: gatewright.dev, kind: GatewayClassBlueprint, name: {class}}}
"#
        )
    };
    apply_yaml(&client, &blueprint("")).await;
    apply_yaml(&client, &gateway_yaml(&ns.name, &class)).await;
    let cms: Api<k8s_openapi::api::core::v1::ConfigMap> = Api::namespaced(client.clone(), &ns.name);
    let data = |want: (&'static str, &'static str)| {
        let cms = cms.clone();
        async move {
            wait_for(
                &format!("ConfigMap color={} size={}", want.0, want.1),
                T,
                || {
                    let cms = cms.clone();
                    async move {
                        let d = cms.get_opt("gw-values").await.unwrap()?.data?;
                        (d.get("color").map(String::as_str) == Some(want.0)
                            && d.get("size").map(String::as_str) == Some(want.1))
                        .then_some(())
                    }
                },
            )
            .await;
        }
    };
    data(("red", "s")).await;
    apply_yaml(&client, &format!("apiVersion: gatewright.dev/v1alpha1\nkind: GatewayClassConfig\nmetadata: {{name: ns-wide, namespace: {ns}}}\nspec:\n  targetRef: {{group: \"\", kind: Namespace, name: {ns}}}\n  default: {{color: blue, size: m}}\n", ns = ns.name)).await;
    data(("blue", "m")).await;
    apply_yaml(&client, &format!("apiVersion: gatewright.dev/v1alpha1\nkind: GatewayConfig\nmetadata: {{name: mine, namespace: {ns}}}\nspec:\n  targetRef: {{group: gateway.networking.k8s.io, kind: Gateway, name: gw}}\n  default: {{color: green}}\n", ns = ns.name)).await;
    data(("green", "m")).await;
    apply_yaml(&client, &blueprint("color: black")).await;
    data(("black", "m")).await;
    Api::<Gateway>::namespaced(client.clone(), &ns.name)
        .delete("gw", &DeleteParams::default())
        .await
        .unwrap();
    wait_for("the Gateway to be gone", T, || async {
        Api::<Gateway>::namespaced(client.clone(), &ns.name)
            .get_opt("gw")
            .await
            .unwrap()
            .is_none()
            .then_some(())
    })
    .await;
    let _ = Api::<GatewayClass>::all(client.clone())
        .delete(&class, &DeleteParams::default())
        .await;
    ns.delete().await;
}

/// The aws-alb-crossplane class: Crossplane v2's namespaced managed resources, owned by
/// the Gateway, a dependent that reads another child's status (TargetGroupBinding <-
/// LBTargetGroup ARN), the address from the LB's status, Events on transitions, and the
/// finalizer deleting the children with the Gateway.
#[tokio::test]
async fn crossplane_children_and_status_dependencies() {
    let client = admin().await;
    let _ctl = controller();
    let ns = TestNamespace::new(&client, "alb").await;
    let class = format!("alb-{}", ns.name);
    let text = shipped_class_yaml("aws-alb-crossplane", &class)
        .replace("hostedZoneId: \"\"", "hostedZoneId: Z0TEST");
    apply_yaml(&client, &text).await;
    apply_yaml(&client, &gateway_yaml(&ns.name, &class)).await;
    let lbs: Api<DynamicObject> = dynamic(
        &client,
        &ns.name,
        "elbv2.aws.m.upbound.io",
        "v1beta1",
        "LB",
        "lbs",
    );
    let lb_name = gatewright::render::safe_name(&format!("{}-gw-alb", ns.name), 63);
    let lb = wait_for("the LB", T, || {
        let lbs = lbs.clone();
        let n = lb_name.clone();
        async move { lbs.get_opt(&n).await.unwrap() }
    })
    .await;
    assert_eq!(lb.metadata.namespace.as_deref(), Some(ns.name.as_str()));
    let owner = &lb.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.name.as_str()),
        ("Gateway", "gw")
    );
    assert_eq!(
        lb.data["spec"]["providerConfigRef"],
        json!({"kind": "ClusterProviderConfig", "name": "default"})
    );
    // The TargetGroupBinding waits for the target group's ARN.
    let tgbs = dynamic(
        &client,
        &ns.name,
        "elbv2.k8s.aws",
        "v1beta1",
        "TargetGroupBinding",
        "targetgroupbindings",
    );
    // Nobody has played the downstream controllers yet (tests simulate readiness for
    // their own Gateways only): the target group has no ARN, so no TargetGroupBinding.
    let tg_arn = dynamic(
        &client,
        &ns.name,
        "elbv2.aws.m.upbound.io",
        "v1beta1",
        "LBTargetGroup",
        "lbtargetgroups",
    )
    .get_opt(&gatewright::render::safe_name(
        &format!("{}-gw-tg", ns.name),
        63,
    ))
    .await
    .unwrap()
    .and_then(|t| {
        t.data["status"]["atProvider"]["arn"]
            .as_str()
            .map(str::to_owned)
    });
    assert_eq!(tg_arn, None, "nothing marked the target group ready");
    assert!(
        tgbs.get_opt("gw-tgb").await.unwrap().is_none(),
        "a TargetGroupBinding without the target group's ARN"
    );
    let g = wait_programmed(&client, &ns.name, "False").await;
    assert!(
        cond(&g["status"]["conditions"], "Programmed").unwrap()["message"]
            .as_str()
            .unwrap()
            .contains("waiting"),
        "{g}"
    );
    simulate(&client, &ns.name, 5).await;
    let tgb = wait_for("the TargetGroupBinding with the ARN", T, || {
        let t = tgbs.clone();
        async move { t.get_opt("gw-tgb").await.unwrap() }
    })
    .await;
    assert!(
        tgb.data["spec"]["targetGroupARN"]
            .as_str()
            .unwrap()
            .starts_with("arn:")
    );
    simulate(&client, &ns.name, 3).await;
    let g = wait_programmed(&client, &ns.name, "True").await;
    assert_eq!(g["status"]["addresses"][0]["type"], "Hostname");
    assert!(
        g["status"]["addresses"][0]["value"]
            .as_str()
            .unwrap()
            .ends_with(".elb.amazonaws.com")
    );
    // An Event marked the transition.
    let events: Api<k8s_openapi::api::events::v1::Event> =
        Api::namespaced(client.clone(), &ns.name);
    wait_for("a Programmed Event", T, || {
        let events = events.clone();
        async move {
            events
                .list(&Default::default())
                .await
                .unwrap()
                .items
                .iter()
                .any(|e| e.reason.as_deref() == Some("Programmed"))
                .then_some(())
        }
    })
    .await;
    // HTTPS with routes: an ACM certificate for the hostnames, whose ARN the HTTPS
    // listener reads; a new hostname replaces it make-before-break.
    apply_yaml(
        &client,
        &format!(
            "apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {{name: gw, namespace: {}}}\nspec:\n  gatewayClassName: {class}\n  listeners:\n  - {{name: http, port: 80, protocol: HTTP, hostname: \"*.example.com\"}}\n  - {{name: https, port: 443, protocol: HTTPS, hostname: \"*.example.com\", tls: {{mode: Terminate, options: {{gatewright.dev/certificate: generated}}}}}}\n",
            ns.name
        ),
    )
    .await;
    apply_yaml(&client, &route_yaml(&ns.name, "shop", "shop.example.com")).await;
    let uid = gateway_json(&client, &ns.name).await["metadata"]["uid"]
        .as_str()
        .unwrap()
        .to_owned();
    let selector = format!("gatewright.dev/gateway-uid={uid}");
    let acm: Api<DynamicObject> = dynamic(
        &client,
        &ns.name,
        "acm.aws.m.upbound.io",
        "v1beta1",
        "Certificate",
        "certificates",
    );
    let listeners: Api<DynamicObject> = lb_listeners(&client, &ns.name);
    // (the one ACM certificate's names, its ARN, the HTTPS listener's ARN), once settled.
    let settled = || async {
        // A failed discovery (another test's CRD coming or going) is tried again.
        gatewright::simulate::simulate_ready_where(
            &client,
            Some(&ns.name),
            gatewright::simulate::Play::All,
        )
        .await
        .ok()?;
        let lp = kube::api::ListParams::default().labels(&selector);
        let certs = acm.list(&lp).await.unwrap().items;
        let [cert] = certs.as_slice() else {
            return None;
        };
        let https = listeners
            .list(&lp)
            .await
            .unwrap()
            .items
            .into_iter()
            .find(|l| l.data["spec"]["forProvider"]["port"] == 443)?;
        Some((
            cert.data["spec"]["forProvider"]["subjectAlternativeNames"].clone(),
            cert.data["status"]["atProvider"]["arn"]
                .as_str()?
                .to_owned(),
            https.data["spec"]["forProvider"]["certificateArn"]
                .as_str()?
                .to_owned(),
        ))
    };
    let (names, arn, _) = wait_for("the ACM certificate and the HTTPS listener", T, || async {
        settled().await.filter(|(_, a, u)| a == u)
    })
    .await;
    assert_eq!(names, json!(["shop.example.com"]));
    apply_yaml(&client, &route_yaml(&ns.name, "blog", "blog.example.com")).await;
    let (_, arn2, _) = wait_for("the replaced ACM certificate in use", T, || async {
        settled()
            .await
            .filter(|(n, a, u)| *n == json!(["blog.example.com", "shop.example.com"]) && a == u)
    })
    .await;
    assert_ne!(arn, arn2, "a new certificate, not an edited one");
    // The certificate's DNS validation records (Route53 Records): the new certificate's,
    // for both names.
    let records = dynamic(
        &client,
        &ns.name,
        "route53.aws.m.upbound.io",
        "v1beta1",
        "Record",
        "records",
    );
    wait_for("the new certificate's validation records", T, || async {
        // Plays the downstream controllers, so that the old certificate's records go.
        settled().await;
        let lp = kube::api::ListParams::default().labels(&selector);
        let names: Vec<String> = records
            .list(&lp)
            .await
            .unwrap()
            .items
            .iter()
            .filter_map(|r| {
                r.data["spec"]["forProvider"]["name"]
                    .as_str()
                    .map(str::to_owned)
            })
            .collect();
        (names.len() == 2
            && names.iter().any(|n| n.ends_with(".blog.example.com."))
            && names.iter().any(|n| n.ends_with(".shop.example.com.")))
        .then_some(())
    })
    .await;
    wait_for("the rollout to complete", T, || async {
        let g = gateway_json(&client, &ns.name).await;
        (cond(&g["status"]["conditions"], "gatewright.dev/Rollout")?["reason"] == "Complete")
            .then_some(())
    })
    .await;

    // Deleting the Gateway deletes the children through the finalizer.
    Api::<Gateway>::namespaced(client.clone(), &ns.name)
        .delete("gw", &DeleteParams::default())
        .await
        .unwrap();
    wait_for("the LB and the Gateway to be gone", T, || {
        let (lbs, c, n, ns) = (
            lbs.clone(),
            client.clone(),
            lb_name.clone(),
            ns.name.clone(),
        );
        let (acm, selector, records) = (acm.clone(), selector.clone(), records.clone());
        async move {
            let lp = kube::api::ListParams::default().labels(&selector);
            let gone = lbs.get_opt(&n).await.unwrap().is_none()
                && records.list(&lp).await.unwrap().items.is_empty()
                && acm
                    .list(&kube::api::ListParams::default().labels(&selector))
                    .await
                    .unwrap()
                    .items
                    .is_empty()
                && Api::<Gateway>::namespaced(c, &ns)
                    .get_opt("gw")
                    .await
                    .unwrap()
                    .is_none();
            gone.then_some(())
        }
    })
    .await;
    let _ = Api::<GatewayClass>::all(client.clone())
        .delete(&class, &DeleteParams::default())
        .await;
    ns.delete().await;
}

/// The test-only conformance class (ConfigMap children, a fixed address), renamed `name`.
pub(crate) fn configmap_class(name: &str) -> String {
    std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/conformance/class.yaml"
    ))
    .unwrap()
    .replace("gatewright-conformance", name)
}

/// Reconciles of a Gateway so far.
fn runs(ctl: &gatewright::controller::Runner, ns: &str, name: &str) -> u64 {
    ctl.local()
        .last_writes(&Key::new(ns.to_owned(), name.to_owned()))
        .0
}

/// Reconciles of Gateway `key` once they have stopped changing for 2 s, at most [`T`].
/// Long enough without a reconcile to call a Gateway settled: longer than a status change
/// may be held back (`PROGRESS_HOLD`).
pub(crate) const QUIET: Duration =
    Duration::from_secs(gatewright::controller::PROGRESS_HOLD.as_secs() + 1);

pub(crate) async fn settled_key(ctl: &gatewright::controller::Runner, key: &Key) -> u64 {
    let deadline = tokio::time::Instant::now() + T;
    let mut last = ctl.local().last_writes(key).0;
    loop {
        tokio::time::sleep(QUIET).await;
        let now = ctl.local().last_writes(key).0;
        if now == last {
            return now;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{key} kept being reconciled for {T:?}"
        );
        last = now;
    }
}

/// Reconciles of the `tls` and `plain` Gateways once they have stopped changing for longer
/// than a status change may be held back (a requeue after applies, or for a held status
/// write, may still be due).
async fn settled(ctl: &gatewright::controller::Runner, ns: &str) -> (u64, u64) {
    let mut last = (runs(ctl, ns, "tls"), runs(ctl, ns, "plain"));
    loop {
        tokio::time::sleep(QUIET).await;
        let now = (runs(ctl, ns, "tls"), runs(ctl, ns, "plain"));
        if now == last {
            return now;
        }
        last = now;
    }
}

/// A change to a ReferenceGrant, a Service or a Namespace's labels re-plans exactly the
/// Gateways it concerns, counted by reconciles, not every Gateway.
#[tokio::test]
async fn references_re_plan_only_the_gateways_they_concern() {
    let client = admin().await;
    let ctl = controller();
    let apps = TestNamespace::new(&client, "idx").await;
    let certs = TestNamespace::new(&client, "idx-certs").await;
    let class = format!("idx-{}", apps.name);
    apply_yaml(&client, &configmap_class(&class)).await;
    let (a, c) = (&apps.name, &certs.name);
    // Not a real certificate: PEM whose body decodes to something DER-shaped is enough.
    let pem = |label: &str| {
        format!(
            "-----BEGIN {label}-----\nMBYAAAAAAAAAAAAAAAAAAAAAAAAAAAAA\n-----END {label}-----\n"
        )
    };
    apply_yaml(
        &client,
        &format!(
            "apiVersion: v1\nkind: Secret\nmetadata: {{name: cert, namespace: {c}}}\ntype: kubernetes.io/tls\nstringData:\n  tls.crt: {:?}\n  tls.key: {:?}\n",
            pem("CERTIFICATE"),
            pem("PRIVATE KEY")
        ),
    )
    .await;
    apply_yaml(
        &client,
        &format!(
            r#"apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {{name: tls, namespace: {a}}}
spec:
  gatewayClassName: {class}
  listeners:
  - name: https
    port: 443
    protocol: HTTPS
    tls: {{certificateRefs: [{{name: cert, namespace: {c}}}]}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {{name: plain, namespace: {a}}}
spec:
  gatewayClassName: {class}
  listeners:
  - {{name: http, port: 80, protocol: HTTP}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: r, namespace: {a}}}
spec:
  parentRefs: [{{name: plain}}]
  rules: [{{backendRefs: [{{name: svc, port: 80}}]}}]
"#
        ),
    )
    .await;
    let gws: Api<Gateway> = Api::namespaced(client.clone(), a);
    let listener_refs = |name: &'static str| {
        let gws = gws.clone();
        async move {
            let g = serde_json::to_value(gws.get(name).await.unwrap()).unwrap();
            cond(&g["status"]["listeners"][0]["conditions"], "ResolvedRefs")
                .map(|c| c["reason"].as_str().unwrap_or_default().to_owned())
        }
    };
    let route_refs = || async {
        let r = serde_json::to_value(
            Api::<HttpRoute>::namespaced(client.clone(), a)
                .get("r")
                .await
                .unwrap(),
        )
        .unwrap();
        let parents = r["status"]["parents"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        parents
            .first()
            .and_then(|p| cond(&p["conditions"], "ResolvedRefs"))
            .map(|c| c["reason"].as_str().unwrap_or_default().to_owned())
    };
    wait_for("RefNotPermitted on the tls Gateway", T, || async {
        (listener_refs("tls").await? == "RefNotPermitted").then_some(())
    })
    .await;
    wait_for("BackendNotFound on the route", T, || async {
        (route_refs().await? == "BackendNotFound").then_some(())
    })
    .await;
    // Settle: our own status writes wake one more reconcile each.
    tokio::time::sleep(Duration::from_secs(2)).await;

    // A ReferenceGrant in the certificates' namespace: the tls Gateway only.
    let (tls0, plain0) = settled(&ctl, a).await;
    apply_yaml(
        &client,
        &format!(
            "apiVersion: gateway.networking.k8s.io/v1beta1\nkind: ReferenceGrant\nmetadata: {{name: g, namespace: {c}}}\nspec:\n  from: [{{group: gateway.networking.k8s.io, kind: Gateway, namespace: {a}}}]\n  to: [{{group: \"\", kind: Secret}}]\n"
        ),
    )
    .await;
    wait_for("ResolvedRefs on the tls Gateway", T, || async {
        (listener_refs("tls").await? == "ResolvedRefs").then_some(())
    })
    .await;
    // Positive: waited for (a loaded machine may take a while to finish that reconcile).
    wait_for("the tls Gateway re-planned", T, || async {
        (runs(&ctl, a, "tls") > tls0).then_some(())
    })
    .await;
    assert_eq!(
        runs(&ctl, a, "plain"),
        plain0,
        "a grant for Secrets of another namespace does not concern the plain Gateway"
    );

    // The route's missing Service appears: the route and its Gateway only.
    let (tls1, plain1) = settled(&ctl, a).await;
    apply_yaml(
        &client,
        &format!("apiVersion: v1\nkind: Service\nmetadata: {{name: svc, namespace: {a}}}\nspec:\n  ports: [{{port: 80}}]\n"),
    )
    .await;
    wait_for("ResolvedRefs on the route", T, || async {
        (route_refs().await? == "ResolvedRefs").then_some(())
    })
    .await;
    wait_for("the plain Gateway re-planned", T, || async {
        (runs(&ctl, a, "plain") > plain1).then_some(())
    })
    .await;
    assert_eq!(
        runs(&ctl, a, "tls"),
        tls1,
        "the Service does not concern the tls Gateway"
    );

    // New labels on a namespace: no listener selects namespaces, so nothing re-plans.
    let (tls2, plain2) = settled(&ctl, a).await;
    Api::<k8s_openapi::api::core::v1::Namespace>::all(client.clone())
        .patch(
            c,
            &PatchParams::default(),
            &Patch::Merge(&json!({"metadata": {"labels": {"team": "x"}}})),
        )
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        (runs(&ctl, a, "tls"), runs(&ctl, a, "plain")),
        (tls2, plain2),
        "no Gateway selects namespaces by label"
    );

    let _ = Api::<GatewayClass>::all(client.clone())
        .delete(&class, &DeleteParams::default())
        .await;
    apps.delete().await;
    certs.delete().await;
}

/// The echo of our own status write plans nothing; a status edit by someone else is
/// planned and undone.
#[tokio::test]
async fn own_status_echoes_plan_nothing_and_foreign_edits_are_undone() {
    let client = admin().await;
    let ctl = controller();
    let ns = TestNamespace::new(&client, "echo").await;
    let class = format!("echo-{}", ns.name);
    apply_yaml(&client, &configmap_class(&class)).await;
    apply_yaml(&client, &gateway_yaml(&ns.name, &class)).await;
    wait_programmed(&client, &ns.name, "True").await;
    let key = Key::new(ns.name.clone(), "gw");
    let before = settled_key(&ctl, &key).await;
    let echoes = ctl
        .metrics()
        .status_only_events
        .load(std::sync::atomic::Ordering::Relaxed);

    // Someone rewrites our Programmed condition: one re-plan puts it back, and the echo
    // of that write plans nothing more.
    let mut g = gateway_json(&client, &ns.name).await;
    for c in g["status"]["conditions"].as_array_mut().unwrap() {
        if c["type"] == "Programmed" {
            c["message"] = json!("tampered");
        }
    }
    Api::<Gateway>::namespaced(client.clone(), &ns.name)
        .patch_status(
            "gw",
            &PatchParams::default(),
            &Patch::Merge(&json!({"status": {"conditions": g["status"]["conditions"]}})),
        )
        .await
        .unwrap();
    wait_for("the condition to be restored", T, || async {
        let g = gateway_json(&client, &ns.name).await;
        (cond(&g["status"]["conditions"], "Programmed")?["message"] != "tampered").then_some(())
    })
    .await;
    assert_eq!(
        settled_key(&ctl, &key).await - before,
        1,
        "one re-plan for the foreign edit, none for our own write's echo"
    );
    assert!(
        ctl.metrics()
            .status_only_events
            .load(std::sync::atomic::Ordering::Relaxed)
            > echoes
    );
    ns.delete().await;
}

/// An Event repeated with the same note is counted on the first one's series; one with
/// another note (a second replacement, another error) is an Event of its own, whatever
/// its reason.
#[tokio::test]
async fn events_with_another_note_are_not_folded_into_the_first() {
    let client = admin().await;
    let ns = TestNamespace::new(&client, "events").await;
    let cms: Api<k8s_openapi::api::core::v1::ConfigMap> = Api::namespaced(client.clone(), &ns.name);
    let cm = cms
        .create(
            &Default::default(),
            &serde_json::from_value(json!({"metadata": {"name": "about"}})).unwrap(),
        )
        .await
        .unwrap();
    let about = kube::Resource::object_ref(&cm, &());
    let events = gatewright::controller::events::Events::new(client.clone(), "gatewright", None);
    let a = "template certificate: creating version aaaa1111 beside the serving one";
    let b = "template certificate: creating version bbbb2222 beside the serving one";
    for note in [a, a, b] {
        events
            .publish(&about, false, "RolloutStarted", "Rollout", note)
            .await
            .unwrap();
    }
    let list: Api<k8s_openapi::api::events::v1::Event> = Api::namespaced(client.clone(), &ns.name);
    let mut got: Vec<(String, i32)> = list
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some("RolloutStarted"))
        .map(|e| (e.note.unwrap_or_default(), e.series.map_or(1, |s| s.count)))
        .collect();
    got.sort();
    assert_eq!(got, [(a.to_owned(), 2), (b.to_owned(), 1)]);
    ns.delete().await;
}

/// A blueprint that places templates in member clusters (fleet mode's placement) on a
/// controller not in fleet mode: the Gateway says so (`Placed` False,
/// `PlacementNotApplied`; `Programmed` False), and nothing of the placed template is
/// written in the Gateway's own cluster. (Placement in fleet mode: `tests/two_clusters.rs`.)
#[tokio::test]
async fn a_placed_template_is_reported_not_applied_and_nothing_is_written() {
    let client = admin().await;
    let _ctl = controller();
    let ns = TestNamespace::new(&client, "placed").await;
    let class = format!("placed-{}", ns.name);
    let text = crate::common::fleet_class_yaml(&class);
    apply_yaml(&client, &text).await;
    apply_yaml(&client, &gateway_yaml(&ns.name, &class)).await;
    let g = wait_for("the Gateway to report its placement", T, || async {
        let g = gateway_json(&client, &ns.name).await;
        (cond(&g["status"]["conditions"], "gatewright.dev/Placed")?["reason"]
            == "PlacementNotApplied")
            .then_some(g)
    })
    .await;
    let conds = &g["status"]["conditions"];
    assert_eq!(
        cond(conds, "gatewright.dev/Placed").unwrap()["status"],
        "False"
    );
    let programmed = cond(conds, "Programmed").unwrap();
    assert_eq!(programmed["status"], "False", "{programmed}");
    assert!(
        programmed["message"]
            .as_str()
            .unwrap()
            .contains("places templates in member clusters"),
        "{programmed}"
    );
    let gws: Api<Gateway> = Api::namespaced(client.clone(), &ns.name);
    let ours = gws
        .list(&kube::api::ListParams::default().labels("app.kubernetes.io/managed-by=gatewright"))
        .await
        .unwrap();
    assert!(ours.items.is_empty(), "a placed Gateway was written here");
}
