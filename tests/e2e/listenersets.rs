//! ListenerSets against the real API server, with the shipped Istio-based class: listeners
//! a ListenerSet adds to a Gateway that allows them, a route attaching to the set, both
//! statuses, the certificate following the set's hostnames, a set from a namespace the
//! Gateway does not allow, and the set deleted.

use std::time::Duration;

use kube::Client;
use kube::api::{Api, DeleteParams, DynamicObject};
use serde_json::Value;

use crate::common::{TestNamespace, admin, apply_yaml, controller, wait_for};
use crate::controller::{cert_dns_names, cond, dynamic, gateway_json, shipped};

const T: Duration = Duration::from_secs(60);

fn sets(client: &Client, ns: &str) -> Api<DynamicObject> {
    dynamic(
        client,
        ns,
        "gateway.networking.k8s.io",
        "v1",
        "ListenerSet",
        "listenersets",
    )
}

/// The ListenerSet's `Accepted` (status, reason) at its generation, and its listeners.
async fn set_status(api: &Api<DynamicObject>, name: &str) -> Option<((String, String), Value)> {
    let s = api.get_opt(name).await.ok()??;
    let a = cond(&s.data["status"]["conditions"], "Accepted")?;
    (a["observedGeneration"] == s.metadata.generation.unwrap_or(0)).then(|| {
        (
            (
                a["status"].as_str().unwrap_or_default().to_owned(),
                a["reason"].as_str().unwrap_or_default().to_owned(),
            ),
            s.data["status"]["listeners"].clone(),
        )
    })
}

#[tokio::test]
async fn a_listener_set_adds_listeners_hostnames_and_routes() {
    let client = admin().await;
    let _ctl = controller();
    let ns = TestNamespace::new(&client, "lset").await;
    let other = TestNamespace::new(&client, "lset-other").await;
    let n = &ns.name;
    let class = format!("lset-{n}");
    apply_yaml(&client, &shipped("istio-certmanager-externaldns", &class)).await;
    apply_yaml(
        &client,
        &format!(
            r#"apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {{name: gw, namespace: {n}}}
spec:
  gatewayClassName: {class}
  allowedListeners: {{namespaces: {{from: Same}}}}
  listeners:
  - {{name: http, port: 80, protocol: HTTP, hostname: "*.example.com"}}
  - {{name: https, port: 443, protocol: HTTPS, hostname: "*.example.com", tls: {{options: {{gatewright.dev/certificate: generated}}}}}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: shop, namespace: {n}}}
spec:
  parentRefs: [{{name: gw}}]
  hostnames: [shop.example.com]
"#
        ),
    )
    .await;
    wait_for("the Certificate for shop", T, || async {
        (cert_dns_names(&client, n).await? == serde_json::json!(["shop.example.com"])).then_some(())
    })
    .await;

    // A team's ListenerSet adds a listener of its own hostname; a route attaches to it.
    apply_yaml(
        &client,
        &format!(
            r#"apiVersion: gateway.networking.k8s.io/v1
kind: ListenerSet
metadata: {{name: team, namespace: {n}}}
spec:
  parentRef: {{name: gw}}
  listeners:
  - {{name: web, port: 8443, protocol: HTTPS, hostname: team.example.org, tls: {{options: {{gatewright.dev/certificate: generated}}}}}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: team, namespace: {n}}}
spec:
  parentRefs: [{{group: gateway.networking.k8s.io, kind: ListenerSet, name: team, sectionName: web}}]
  hostnames: [team.example.org]
---
apiVersion: gateway.networking.k8s.io/v1
kind: ListenerSet
metadata: {{name: intruder, namespace: {o}}}
spec:
  parentRef: {{name: gw, namespace: {n}}}
  listeners:
  - {{name: web, port: 8081, protocol: HTTP, hostname: intruder.example.org}}
"#,
            o = other.name
        ),
    )
    .await;
    let team = sets(&client, n);
    let (accepted, listeners) = wait_for("the ListenerSet accepted, its route attached", T, || {
        let team = team.clone();
        async move {
            let (a, l) = set_status(&team, "team").await?;
            (l[0]["attachedRoutes"] == 1).then_some((a, l))
        }
    })
    .await;
    assert_eq!(accepted, ("True".to_owned(), "Accepted".to_owned()));
    assert_eq!(listeners[0]["name"], "web");
    assert_eq!(
        cond(&listeners[0]["conditions"], "Accepted").unwrap()["status"],
        "True"
    );
    // From a namespace the Gateway does not allow: refused, with the reason.
    let intruder = sets(&client, &other.name);
    let (refused, _) = wait_for("the other namespace's ListenerSet refused", T, || {
        let intruder = intruder.clone();
        async move { set_status(&intruder, "intruder").await }
    })
    .await;
    assert_eq!(refused, ("False".to_owned(), "NotAllowed".to_owned()));
    // The Gateway counts one set; its own listeners alone are in its status.
    let g = wait_for("attachedListenerSets 1", T, || async {
        let g = gateway_json(&client, n).await;
        (g["status"]["attachedListenerSets"] == 1).then_some(g)
    })
    .await;
    assert_eq!(g["status"]["listeners"].as_array().unwrap().len(), 2);
    // The route's entry names the ListenerSet as its parent.
    let routes = dynamic(
        &client,
        n,
        "gateway.networking.k8s.io",
        "v1",
        "HTTPRoute",
        "httproutes",
    );
    let r = routes.get("team").await.unwrap();
    let entry = &r.data["status"]["parents"][0];
    assert_eq!(entry["parentRef"]["kind"], "ListenerSet");
    assert_eq!(
        cond(&entry["conditions"], "Accepted").unwrap()["status"],
        "True"
    );
    // The certificate follows the set's hostnames (make-before-break), and the Istio
    // gateway carries the set's listener under its unique key.
    wait_for("the Certificate to gain team.example.org", T, || async {
        (cert_dns_names(&client, n).await?
            == serde_json::json!(["shop.example.com", "team.example.org"]))
        .then_some(())
    })
    .await;
    let istio = dynamic(
        &client,
        n,
        "gateway.networking.k8s.io",
        "v1",
        "Gateway",
        "gateways",
    );
    wait_for("the Istio gateway to carry the set's listener", T, || {
        let (istio, client) = (istio.clone(), client.clone());
        async move {
            gatewright::simulate::simulate_ready_where(
                &client,
                Some(n),
                gatewright::simulate::Play::All,
            )
            .await
            .ok()?;
            let g = istio.get_opt("gw-istio").await.ok()??;
            g.data["spec"]["listeners"]
                .as_array()?
                .iter()
                .any(|l| {
                    l["name"] == "team-web"
                        && l["hostname"] == "team.example.org"
                        && l["port"] == 8443
                })
                .then_some(())
        }
    })
    .await;

    // The set deleted: its hostname leaves the certificate, the Gateway counts none.
    team.delete("team", &DeleteParams::default()).await.unwrap();
    wait_for("the Certificate to lose team.example.org", T, || async {
        (cert_dns_names(&client, n).await? == serde_json::json!(["shop.example.com"])).then_some(())
    })
    .await;
    wait_for("attachedListenerSets 0", T, || async {
        (gateway_json(&client, n).await["status"]["attachedListenerSets"] == 0).then_some(())
    })
    .await;
    other.delete().await;
    ns.delete().await;
}
