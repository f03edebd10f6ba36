//! A make-before-break blueprint whose readiness the tests control: its `cert` ConfigMap
//! is replaced when the Gateway's `rev` annotation changes and is ready once its `ready`
//! key says `yes`; its `reader` ConfigMap names the cert it reads and is ready once its
//! `ack` key repeats that name. Shared by the e2e and the restart test binaries.

use kube::Client;
use kube::api::{Api, ListParams, Patch, PatchParams};
use serde_json::json;

/// A blueprint whose `cert` ConfigMap is replaced make-before-break when the Gateway's
/// `rev` annotation changes, ready when its `ready` key says so (the test plays its
/// controller), and a `reader` ConfigMap that names it, ready once it acknowledged it.
pub fn cm_blueprint(name: &str, timeout: u64) -> String {
    format!(
        r#"apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {{name: {name}}}
spec:
  controllerName: gatewright.dev/gateway-controller
  parametersRef: {{group: gatewright.dev, kind: GatewayClassBlueprint, name: {name}}}
---
apiVersion: gatewright.dev/v1alpha1
kind: GatewayClassBlueprint
metadata: {{name: {name}}}
spec:
  gatewayTemplates:
  - name: cert
    rollout: {{strategy: MakeBeforeBreak, timeoutSeconds: {timeout}}}
    readyWhen: dig(object, "data.ready", "") == "yes"
    template: |
      apiVersion: v1
      kind: ConfigMap
      metadata:
        name: {{{{ gateway.metadata.name ~ "-cert" }}}}
      data:
        rev: {{{{ dig(gateway, "metadata.annotations.rev", "1") }}}}
  - name: reader
    readyWhen: dig(object, "data.ack", "") == object.data.cert
    template: |
      apiVersion: v1
      kind: ConfigMap
      metadata:
        name: {{{{ gateway.metadata.name ~ "-reader" }}}}
      data:
        cert: {{{{ (resources.cert | first).metadata.name }}}}
  status:
    template: |
      addresses: [{{type: IPAddress, value: 192.0.2.10}}]
"#
    )
}

fn cms(client: &Client, ns: &str) -> Api<k8s_openapi::api::core::v1::ConfigMap> {
    Api::namespaced(client.clone(), ns)
}

/// The names of our ConfigMaps in `ns` (not being deleted), sorted.
pub async fn our_cms(client: &Client, ns: &str) -> Vec<String> {
    let mut v: Vec<String> = cms(client, ns)
        .list(&ListParams::default().labels("app.kubernetes.io/managed-by=gatewright"))
        .await
        .unwrap()
        .into_iter()
        .filter(|c| c.metadata.deletion_timestamp.is_none())
        .map(|c| c.metadata.name.unwrap())
        .collect();
    v.sort();
    v
}

pub async fn mark(client: &Client, ns: &str, name: &str, key: &str, value: &str) {
    cms(client, ns)
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(&json!({"data": {key: value}})),
        )
        .await
        .unwrap();
}

pub async fn reader_points_at(client: &Client, ns: &str) -> Option<String> {
    cms(client, ns)
        .get_opt("gw-reader")
        .await
        .unwrap()?
        .data?
        .get("cert")
        .cloned()
}

pub fn cm_gateway(ns: &str, class: &str, rev: u32) -> String {
    format!(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {{name: gw, namespace: {ns}, annotations: {{rev: \"{rev}\"}}}}\nspec:\n  gatewayClassName: {class}\n  listeners: [{{name: http, port: 80, protocol: HTTP}}]\n"
    )
}

/// Waits until Gateway `ns/gw` is gone (its finalizer released).
pub async fn wait_gateway_gone(client: &Client, ns: &str, timeout: std::time::Duration) {
    let gws: Api<gateway_api::apis::standard::gateways::Gateway> =
        Api::namespaced(client.clone(), ns);
    let deadline = tokio::time::Instant::now() + timeout;
    while gws.get_opt("gw").await.unwrap().is_some() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the Gateway {ns}/gw is still there after {timeout:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
}

/// Deletes a test's GatewayClass and GatewayClassBlueprint named `name` (cluster-scoped,
/// so they outlive the test's namespace otherwise).
pub async fn delete_class(client: &Client, name: &str) {
    use kube::api::{ApiResource, DeleteParams, DynamicObject, GroupVersionKind};
    let _ = Api::<gateway_api::apis::standard::gatewayclasses::GatewayClass>::all(client.clone())
        .delete(name, &DeleteParams::default())
        .await;
    let bps: Api<DynamicObject> = Api::all_with(
        client.clone(),
        &ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("gatewright.dev", "v1alpha1", "GatewayClassBlueprint"),
            "gatewayclassblueprints",
        ),
    );
    let _ = bps.delete(name, &DeleteParams::default()).await;
}
