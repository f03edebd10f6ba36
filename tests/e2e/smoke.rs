//! The cluster is real: CRD validation, status subresources of real third-party CRDs,
//! garbage collection, namespace deletion, RBAC.

use std::time::Duration;

use gateway_api::apis::standard::gateways::Gateway;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, Patch,
    PatchParams, PostParams,
};
use serde_json::json;

use crate::common::{TestNamespace, admin, as_user, wait_for};

#[tokio::test]
async fn invalid_gateway_is_rejected_by_crd_validation() {
    let client = admin().await;
    let ns = TestNamespace::new(&client, "cel").await;
    let gws: Api<Gateway> = Api::namespaced(client.clone(), &ns.name);
    let dup: Gateway = serde_json::from_value(json!({
        "metadata": { "name": "dup" },
        "spec": { "gatewayClassName": "x", "listeners": [
            { "name": "a", "port": 80, "protocol": "HTTP" },
            { "name": "a", "port": 81, "protocol": "HTTP" },
        ] }
    }))
    .unwrap();
    let err = gws.create(&PostParams::default(), &dup).await.unwrap_err();
    assert!(
        err.to_string().contains("Duplicate value") || err.to_string().contains("unique"),
        "{err}"
    );
    let bad_tls: Gateway = serde_json::from_value(json!({
        "metadata": { "name": "tls-on-http" },
        "spec": { "gatewayClassName": "x", "listeners": [
            { "name": "a", "port": 80, "protocol": "HTTP", "tls": { "mode": "Terminate", "certificateRefs": [{ "name": "s" }] } },
        ] }
    }))
    .unwrap();
    let err = gws
        .create(&PostParams::default(), &bad_tls)
        .await
        .unwrap_err();
    assert!(err.to_string().to_lowercase().contains("tls"), "{err}");
    ns.delete().await;
}

fn api(
    client: &kube::Client,
    ns: &str,
    group: &str,
    version: &str,
    kind: &str,
    plural: &str,
) -> Api<DynamicObject> {
    let ar =
        ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural);
    Api::namespaced_with(client.clone(), ns, &ar)
}

#[tokio::test]
async fn third_party_children_take_status_writes() {
    let client = admin().await;
    let ns = TestNamespace::new(&client, "status").await;
    let certs = api(
        &client,
        &ns.name,
        "cert-manager.io",
        "v1",
        "Certificate",
        "certificates",
    );
    let cert: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "cert-manager.io/v1", "kind": "Certificate", "metadata": { "name": "c" },
        "spec": { "secretName": "c", "dnsNames": ["a.example.com"], "issuerRef": { "name": "le", "kind": "ClusterIssuer" } }
    }))
    .unwrap();
    certs.create(&PostParams::default(), &cert).await.unwrap();
    let status = json!({ "status": { "conditions": [{ "type": "Ready", "status": "True", "reason": "Issued", "message": "ok", "lastTransitionTime": "2026-01-01T00:00:00Z" }] } });
    certs
        .patch_status("c", &PatchParams::default(), &Patch::Merge(&status))
        .await
        .unwrap();
    let got = certs.get("c").await.unwrap();
    assert_eq!(got.data["status"]["conditions"][0]["status"], "True");

    let dns = api(
        &client,
        &ns.name,
        "externaldns.k8s.io",
        "v1alpha1",
        "DNSEndpoint",
        "dnsendpoints",
    );
    let ep: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "externaldns.k8s.io/v1alpha1", "kind": "DNSEndpoint", "metadata": { "name": "d" },
        "spec": { "endpoints": [{ "dnsName": "a.example.com", "recordType": "A", "targets": ["192.0.2.1"] }] }
    }))
    .unwrap();
    dns.create(&PostParams::default(), &ep).await.unwrap();
    dns.patch_status(
        "d",
        &PatchParams::default(),
        &Patch::Merge(&json!({ "status": { "observedGeneration": 1 } })),
    )
    .await
    .unwrap();
    assert_eq!(
        dns.get("d").await.unwrap().data["status"]["observedGeneration"],
        1
    );
    ns.delete().await;
}

#[tokio::test]
async fn owned_objects_are_garbage_collected() {
    let client = admin().await;
    let ns = TestNamespace::new(&client, "gc").await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &ns.name);
    let owner = cms
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({ "metadata": { "name": "owner" } })).unwrap(),
        )
        .await
        .unwrap();
    let uid = owner.metadata.uid.clone().unwrap();
    let owned: ConfigMap =
        serde_json::from_value(json!({ "metadata": { "name": "owned", "ownerReferences": [
        { "apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": uid }
    ] } }))
        .unwrap();
    cms.create(&PostParams::default(), &owned).await.unwrap();
    cms.delete("owner", &DeleteParams::default()).await.unwrap();
    wait_for(
        "the owned ConfigMap to be collected",
        Duration::from_secs(60),
        || {
            let cms = cms.clone();
            async move { cms.get_opt("owned").await.unwrap().is_none().then_some(()) }
        },
    )
    .await;
    ns.delete().await;
}

#[tokio::test]
async fn deleted_namespaces_go_away() {
    let client = admin().await;
    let ns = TestNamespace::new(&client, "nsdel").await;
    let name = ns.name.clone();
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &name);
    cms.create(
        &PostParams::default(),
        &serde_json::from_value(json!({ "metadata": { "name": "x" } })).unwrap(),
    )
    .await
    .unwrap();
    ns.delete().await;
    let nss: Api<Namespace> = Api::all(client.clone());
    wait_for(
        "the namespace to be removed",
        Duration::from_secs(90),
        || {
            let nss = nss.clone();
            let name = name.clone();
            async move { nss.get_opt(&name).await.unwrap().is_none().then_some(()) }
        },
    )
    .await;
}

#[tokio::test]
async fn the_controller_identity_needs_rbac() {
    let client = admin().await;
    let user = format!("smoke-{}", std::process::id());
    let as_controller = as_user(&user).await;
    let gws: Api<Gateway> = Api::all(as_controller);
    let err = gws.list(&ListParams::default()).await.unwrap_err();
    assert!(err.to_string().contains("forbidden"), "{err}");
    let role: ClusterRole = serde_json::from_value(json!({
        "metadata": { "name": user },
        "rules": [{ "apiGroups": ["gateway.networking.k8s.io"], "resources": ["gateways"], "verbs": ["list"] }]
    }))
    .unwrap();
    let binding: ClusterRoleBinding = serde_json::from_value(json!({
        "metadata": { "name": user },
        "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": user },
        "subjects": [{ "apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user }]
    }))
    .unwrap();
    Api::<ClusterRole>::all(client.clone())
        .create(&PostParams::default(), &role)
        .await
        .unwrap();
    Api::<ClusterRoleBinding>::all(client.clone())
        .create(&PostParams::default(), &binding)
        .await
        .unwrap();
    wait_for(
        "RBAC to allow listing Gateways",
        Duration::from_secs(30),
        || {
            let gws = gws.clone();
            async move { gws.list(&ListParams::default()).await.ok() }
        },
    )
    .await;
    let _ = Api::<ClusterRoleBinding>::all(client.clone())
        .delete(&user, &DeleteParams::default())
        .await;
    let _ = Api::<ClusterRole>::all(client)
        .delete(&user, &DeleteParams::default())
        .await;
}
