//! Every route kind against the real API server, with the shipped Istio-based class: each
//! kind's status written to its own resource, a shadow route of the route's own kind, a
//! kind the class cannot carry refused with a reason, and Flagger driving a GRPCRoute.

use std::time::Duration;

use kube::Client;
use kube::api::{Api, DeleteParams, DynamicObject, PostParams};
use serde_json::{Value, json};

use crate::common::{TestNamespace, admin, apply_yaml, controller, wait_for};
use crate::controller::{cond, dynamic, gateway_json, shipped};

const T: Duration = Duration::from_secs(60);
const OURS: &str = "gatewright.dev/gateway-controller";

fn routes(client: &Client, ns: &str, kind: &str) -> Api<DynamicObject> {
    dynamic(
        client,
        ns,
        "gateway.networking.k8s.io",
        "v1",
        kind,
        &(kind.to_lowercase() + "s"),
    )
}

/// Our entry in the route's `status.parents`, once there.
async fn our_parent(api: &Api<DynamicObject>, name: &str) -> Option<(Value, i64)> {
    let r = api.get_opt(name).await.ok()??;
    let entry = r.data["status"]["parents"]
        .as_array()?
        .iter()
        .find(|p| p["controllerName"] == OURS)?
        .clone();
    Some((entry, r.metadata.generation.unwrap_or(0)))
}

/// Waits until our entry of `kind` `name` says Accepted=`status`/`reason` at the route's
/// current generation.
async fn wait_accepted(
    client: &Client,
    ns: &str,
    kind: &str,
    name: &str,
    status: &str,
    reason: &str,
) {
    let api = routes(client, ns, kind);
    wait_for(
        &format!("{kind} {name} Accepted={status}/{reason}"),
        T,
        || {
            let api = api.clone();
            async move {
                let (entry, generation) = our_parent(&api, name).await?;
                let c = cond(&entry["conditions"], "Accepted")?;
                (c["status"] == status
                    && c["reason"] == reason
                    && c["observedGeneration"] == generation)
                    .then_some(())
            }
        },
    )
    .await;
}

#[tokio::test]
async fn every_route_kind_with_a_shipped_class() {
    let client = admin().await;
    let _ctl = controller();
    let ns = TestNamespace::new(&client, "kinds").await;
    let n = &ns.name;
    let class = format!("kinds-{n}");
    apply_yaml(&client, &shipped("istio-certmanager-externaldns", &class)).await;
    apply_yaml(
        &client,
        &format!(
            r#"apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {{name: gw, namespace: {n}}}
spec:
  gatewayClassName: {class}
  listeners:
  - {{name: http, port: 80, protocol: HTTP, hostname: "*.example.com"}}
  - {{name: db, port: 8443, protocol: TLS, hostname: db.example.com, tls: {{mode: Passthrough}}}}
  - {{name: pg, port: 5432, protocol: TCP}}
  - {{name: dns, port: 53, protocol: UDP}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: GRPCRoute
metadata: {{name: orders, namespace: {n}}}
spec:
  parentRefs: [{{name: gw, sectionName: http}}]
  hostnames: [grpc.example.com]
  rules:
  - backendRefs:
    - {{name: primary, port: 9000, weight: 100}}
    - {{name: canary, port: 9000, weight: 0}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: TLSRoute
metadata: {{name: db, namespace: {n}}}
spec:
  parentRefs: [{{name: gw}}]
  hostnames: [db.example.com]
  rules:
  - backendRefs: [{{name: db, port: 5432}}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: TCPRoute
metadata: {{name: pg, namespace: {n}}}
spec:
  parentRefs: [{{name: gw, sectionName: pg}}]
  rules:
  - backendRefs: [{{name: pg, port: 5432}}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: UDPRoute
metadata: {{name: dns, namespace: {n}}}
spec:
  parentRefs: [{{name: gw, sectionName: dns}}]
  rules:
  - backendRefs: [{{name: coredns, port: 53}}]
"#
        ),
    )
    .await;

    // Each kind's status, on its own resource.
    for (kind, name) in [
        ("GRPCRoute", "orders"),
        ("TLSRoute", "db"),
        ("TCPRoute", "pg"),
    ] {
        wait_accepted(&client, n, kind, name, "True", "Accepted").await;
    }
    // Istio carries no UDP: the listener says why, the route is refused.
    wait_accepted(
        &client,
        n,
        "UDPRoute",
        "dns",
        "False",
        "NotAllowedByListeners",
    )
    .await;
    let g = wait_for("listener status of every protocol", T, || async {
        let g = gateway_json(&client, n).await;
        (g["status"]["listeners"].as_array()?.len() == 4).then_some(g)
    })
    .await;
    let listener = |name: &str| -> Value {
        g["status"]["listeners"]
            .as_array()
            .unwrap()
            .iter()
            .find(|l| l["name"] == name)
            .unwrap()
            .clone()
    };
    let udp = cond(&listener("dns")["conditions"], "Accepted")
        .unwrap()
        .clone();
    assert_eq!(
        (udp["status"].as_str(), udp["reason"].as_str()),
        (Some("False"), Some("UnsupportedProtocol"))
    );
    assert!(
        udp["message"]
            .as_str()
            .unwrap()
            .contains(&format!("GatewayClass {class}")),
        "{udp}"
    );
    assert_eq!(
        listener("pg")["supportedKinds"],
        json!([{"group": "gateway.networking.k8s.io", "kind": "TCPRoute"}])
    );
    assert_eq!(listener("db")["supportedKinds"][0]["kind"], "TLSRoute");

    // A shadow route of each carried kind, of the route's own kind.
    for (kind, shadow) in [
        ("GRPCRoute", "orders-gw-istio"),
        ("TLSRoute", "db-gw-istio"),
        ("TCPRoute", "pg-gw-istio"),
    ] {
        let api = routes(&client, n, kind);
        let s = wait_for(&format!("shadow {kind} {shadow}"), T, || {
            let api = api.clone();
            async move { api.get_opt(shadow).await.ok()? }
        })
        .await;
        assert_eq!(
            s.data["spec"]["parentRefs"][0]["name"], "gw-istio",
            "{kind}"
        );
    }
    assert!(
        routes(&client, n, "UDPRoute")
            .get_opt("dns-gw-istio")
            .await
            .unwrap()
            .is_none()
    );

    // Flagger on the GRPCRoute: full PUTs shifting the weights step by step; after each,
    // the shadow carries them and our entry is Accepted at the route's generation.
    let grpc = routes(&client, n, "GRPCRoute");
    for canary in [10, 30, 50] {
        let mut r = grpc.get("orders").await.unwrap();
        r.data["spec"]["rules"][0]["backendRefs"][0]["weight"] = json!(100 - canary);
        r.data["spec"]["rules"][0]["backendRefs"][1]["weight"] = json!(canary);
        let r = grpc
            .replace("orders", &PostParams::default(), &r)
            .await
            .unwrap();
        let generation = r.metadata.generation.unwrap();
        wait_for(
            &format!("shadow GRPCRoute weight {canary} and status at generation {generation}"),
            T,
            || {
                let grpc = grpc.clone();
                async move {
                    let shadow = grpc.get_opt("orders-gw-istio").await.ok()??;
                    let w = shadow.data["spec"]["rules"][0]["backendRefs"][1]["weight"].as_i64()?;
                    let (entry, g) = our_parent(&grpc, "orders").await?;
                    let acc = cond(&entry["conditions"], "Accepted")?;
                    (w == canary
                        && g == generation
                        && acc["status"] == "True"
                        && acc["observedGeneration"] == generation)
                        .then_some(())
                }
            },
        )
        .await;
    }

    // A TCPRoute deleted: its shadow goes, the listener counts no route.
    let tcp = routes(&client, n, "TCPRoute");
    assert_eq!(listener("pg")["attachedRoutes"], 1);
    tcp.delete("pg", &DeleteParams::default()).await.unwrap();
    wait_for("the shadow TCPRoute gone and attachedRoutes 0", T, || {
        let tcp = tcp.clone();
        let client = client.clone();
        async move {
            let gone = tcp.get_opt("pg-gw-istio").await.ok()?.is_none();
            let g = gateway_json(&client, n).await;
            let pg = g["status"]["listeners"]
                .as_array()?
                .iter()
                .find(|l| l["name"] == "pg")?
                .clone();
            (gone && pg["attachedRoutes"] == 0).then_some(())
        }
    })
    .await;
    ns.delete().await;
}
