//! Our policies on the real cluster: their status says where they apply and why not
//! elsewhere (GEP-713 ancestors), follows the Gateways, and is written only when it
//! changes; and the API server refuses, at admission, what our CRDs' validation rules can
//! tell without the cluster.

use std::time::Duration;

use kube::Client;
use kube::api::{Api, DynamicObject, PostParams};
use serde_json::{Value, json};

use crate::common::{TestNamespace, admin, api_status, apply_yaml, controller, wait_for};
use crate::controller::{blueprints, configmap_class, dynamic, gateway_yaml};
use gatewright::controller::Work;
use gatewright::controller::policy::PolicyKind;
use gatewright::snapshot::Key;

const T: Duration = Duration::from_secs(60);

fn gateway_configs(client: &Client, ns: &str) -> Api<DynamicObject> {
    dynamic(
        client,
        ns,
        "gatewright.dev",
        "v1alpha1",
        "GatewayConfig",
        "gatewayconfigs",
    )
}

fn gateway_config(ns: &str, name: &str, target: &str) -> String {
    format!(
        "apiVersion: gatewright.dev/v1alpha1\nkind: GatewayConfig\nmetadata: {{name: {name}, namespace: {ns}}}\nspec:\n  targetRef: {{group: gateway.networking.k8s.io, kind: Gateway, name: {target}}}\n  default: {{from: {name}}}\n"
    )
}

/// Our entries of a policy's status: (ancestor name, status, reason, message,
/// observedGeneration == the policy's generation).
async fn ancestors(
    client: &Client,
    ns: &str,
    name: &str,
) -> Vec<(String, String, String, String, bool)> {
    let p = serde_json::to_value(gateway_configs(client, ns).get(name).await.unwrap()).unwrap();
    let generation = p["metadata"]["generation"].clone();
    p["status"]["ancestors"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|a| a["controllerName"] == "gatewright.dev/gateway-controller")
        .map(|a| {
            let c = a["conditions"]
                .as_array()
                .and_then(|c| c.iter().find(|c| c["type"] == "Accepted"))
                .cloned()
                .unwrap_or(Value::Null);
            (
                a["ancestorRef"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
                c["status"].as_str().unwrap_or_default().to_owned(),
                c["reason"].as_str().unwrap_or_default().to_owned(),
                c["message"].as_str().unwrap_or_default().to_owned(),
                c["observedGeneration"] == generation,
            )
        })
        .collect()
}

async fn wait_reason(
    client: &Client,
    ns: &str,
    name: &str,
    ancestor: &str,
    reason: &str,
) -> String {
    wait_for(
        &format!("GatewayConfig {ns}/{name}: {reason} for {ancestor}"),
        T,
        || async {
            ancestors(client, ns, name)
                .await
                .into_iter()
                .find(|a| a.0 == ancestor && a.2 == reason && a.4)
                .map(|a| a.3)
        },
    )
    .await
}

#[tokio::test]
async fn policy_status_says_where_each_applies_and_stays_quiet() {
    let client = admin().await;
    let ctl = controller();
    let ns = TestNamespace::new(&client, "policy").await;
    let n = &ns.name;
    let class = format!("policy-{n}");
    apply_yaml(&client, &configmap_class(&class)).await;
    apply_yaml(&client, &gateway_yaml(n, &class)).await;

    // The first targeting a Gateway applies; a younger one targeting it too is Conflicted
    // and names the one that applies; one naming a Gateway that does not exist says so.
    apply_yaml(&client, &gateway_config(n, "first", "gw")).await;
    wait_reason(&client, n, "first", "gw", "Accepted").await;
    apply_yaml(&client, &gateway_config(n, "second", "gw")).await;
    let why = wait_reason(&client, n, "second", "gw", "Conflicted").await;
    assert!(why.contains(&format!("GatewayConfig {n}/first")), "{why}");
    apply_yaml(&client, &gateway_config(n, "later", "gw2")).await;
    let why = wait_reason(&client, n, "later", "gw2", "TargetNotFound").await;
    assert!(why.contains("not found"), "{why}");

    // The status follows the Gateways: gw2 appears, the policy is accepted there.
    apply_yaml(
        &client,
        &gateway_yaml(n, &class).replace("name: gw,", "name: gw2,"),
    )
    .await;
    wait_reason(&client, n, "later", "gw2", "Accepted").await;
    // Steady: a forced re-plan of every policy writes nothing.
    let settle = || async {
        let mut last = ctl.metrics().writes_in_namespace(n);
        loop {
            tokio::time::sleep(crate::controller::QUIET).await;
            let now = ctl.metrics().writes_in_namespace(n);
            if now == last {
                return now;
            }
            last = now;
        }
    };
    let before = tokio::time::timeout(T, settle())
        .await
        .expect("writes settle");
    for name in ["first", "second", "later"] {
        ctl.local().enqueue(Work::Policy(
            PolicyKind::GatewayConfig,
            Key::new(n.clone(), name),
        ));
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        ctl.metrics().writes_in_namespace(n),
        before,
        "a policy status that did not change is not written again"
    );

    // The first goes: the second applies now.
    gateway_configs(&client, n)
        .delete("first", &Default::default())
        .await
        .unwrap();
    wait_reason(&client, n, "second", "gw", "Accepted").await;
    ns.delete().await;
}

/// What the CRDs' rules refuse, each with a message naming the field and the rule.
#[tokio::test]
async fn invalid_policies_and_blueprints_are_refused_at_admission() {
    let client = admin().await;
    let ns = TestNamespace::new(&client, "admission").await;
    let n = &ns.name;
    let refused = |api: Api<DynamicObject>, obj: Value, expected: &'static str| async move {
        let o: DynamicObject = serde_json::from_value(obj).unwrap();
        let err = api
            .create(&PostParams::default(), &o)
            .await
            .expect_err(&format!("{expected}: must be refused"));
        let status = api_status(err);
        assert!(status.is_invalid(), "expected 422 Invalid, got {status:?}");
        assert!(
            status.message.contains(expected),
            "expected {expected:?} in: {}",
            status.message
        );
    };
    let policy = |kind: &str, target: Value| {
        json!({
            "apiVersion": "gatewright.dev/v1alpha1", "kind": kind,
            "metadata": {"generateName": "p-", "namespace": n},
            "spec": {"targetRef": target},
        })
    };
    let gcs = gateway_configs(&client, n);
    let gccs = dynamic(
        &client,
        n,
        "gatewright.dev",
        "v1alpha1",
        "GatewayClassConfig",
        "gatewayclassconfigs",
    );
    // The controls: valid objects are taken.
    for (api, kind, target) in [
        (
            &gcs,
            "GatewayConfig",
            json!({"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": "gw"}),
        ),
        (
            &gcs,
            "GatewayConfig",
            json!({"kind": "Namespace", "name": n}),
        ),
        (
            &gccs,
            "GatewayClassConfig",
            json!({"group": "gateway.networking.k8s.io", "kind": "GatewayClass", "name": "c"}),
        ),
    ] {
        let o: DynamicObject = serde_json::from_value(policy(kind, target)).unwrap();
        api.create(&PostParams::default(), &o).await.unwrap();
    }
    refused(
        gcs.clone(),
        policy(
            "GatewayConfig",
            json!({"group": "", "kind": "Service", "name": "svc"}),
        ),
        "targetRef must be a Gateway (group: gateway.networking.k8s.io) or a Namespace",
    )
    .await;
    refused(
        gcs.clone(),
        policy(
            "GatewayConfig",
            json!({"group": "example.com", "kind": "Gateway", "name": "gw"}),
        ),
        "targetRef must be a Gateway",
    )
    .await;
    refused(
        gccs.clone(),
        policy(
            "GatewayClassConfig",
            json!({"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": "gw"}),
        ),
        "targetRef must be a GatewayClass (group: gateway.networking.k8s.io) or a Namespace",
    )
    .await;

    let bps = blueprints(&client);
    let blueprint = |spec: Value| {
        json!({
            "apiVersion": "gatewright.dev/v1alpha1", "kind": "GatewayClassBlueprint",
            "metadata": {"generateName": "admission-"}, "spec": spec,
        })
    };
    let t = |name: &str| json!({"name": name, "template": "x: 1"});
    refused(
        bps.clone(),
        blueprint(json!({"gatewayTemplates": [t("a"), t("b"), t("a")]})),
        "gatewayTemplates: template names must be unique",
    )
    .await;
    refused(
        bps.clone(),
        blueprint(json!({"routeTemplates": [t("r"), t("r")]})),
        "routeTemplates: template names must be unique",
    )
    .await;
    let with_rollout = |rollout: Value| {
        let mut e = t("cert");
        e["rollout"] = rollout;
        blueprint(json!({"gatewayTemplates": [e]}))
    };
    refused(
        bps.clone(),
        with_rollout(json!({"fields": ["spec.dnsNames"]})),
        "take effect only with strategy MakeBeforeBreak",
    )
    .await;
    refused(
        bps.clone(),
        with_rollout(json!({"strategy": "InPlace", "timeoutSeconds": 60})),
        "take effect only with strategy MakeBeforeBreak",
    )
    .await;
    refused(
        bps.clone(),
        with_rollout(json!({"strategy": "MakeBeforeBreak", "timeoutSeconds": 0})),
        "timeoutSeconds",
    )
    .await;
    refused(
        bps.clone(),
        with_rollout(json!({"strategy": "MakeBeforeBreak", "fields": ["spec..dnsNames"]})),
        "rollout.fields",
    )
    .await;
    refused(
        bps.clone(),
        blueprint(json!({"clusterScopedKinds": [{"group": "rbac.authorization.k8s.io", "kind": "clusterrole"}]})),
        "clusterScopedKinds[0].kind",
    )
    .await;
    refused(
        bps.clone(),
        blueprint(json!({"clusterScopedKinds": [{"group": "Not A Group", "kind": "Thing"}]})),
        "clusterScopedKinds[0].group",
    )
    .await;
    // And a valid blueprint with all of them is taken.
    let mut ok = t("cert");
    ok["rollout"] =
        json!({"strategy": "MakeBeforeBreak", "fields": ["spec.dnsNames"], "timeoutSeconds": 600});
    let o: DynamicObject = serde_json::from_value(blueprint(json!({
        "gatewayTemplates": [ok, t("gateway")],
        "routeTemplates": [t("route")],
        "clusterScopedKinds": [{"group": "rbac.authorization.k8s.io", "kind": "ClusterRole"}],
    })))
    .unwrap();
    let created = bps.create(&PostParams::default(), &o).await.unwrap();
    bps.delete(&created.metadata.name.unwrap(), &Default::default())
        .await
        .unwrap();
    ns.delete().await;
}
