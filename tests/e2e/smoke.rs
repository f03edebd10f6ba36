//! The cluster is real: the Gateway API CRDs validate, third-party CRDs serve a real status
//! subresource, the garbage collector and the namespace controller run, and RBAC is on.

use std::time::Duration;

use gateway_api::apis::standard::gateways::Gateway;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, Patch,
    PatchParams, PostParams,
};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};

use crate::common::{
    CONTROLLER_USER, TestNamespace, admin, api_status, as_controller, impersonating, unique_name,
    wait_for,
};

const T: Duration = Duration::from_secs(60);

fn gateway(name: &str, listeners: &Value) -> Gateway {
    serde_json::from_value(json!({
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "Gateway",
        "metadata": { "name": name },
        "spec": { "gatewayClassName": "smoke", "listeners": listeners },
    }))
    .expect("gateway")
}

/// Creating `gw` fails with 422 Invalid, and the message has one of `expected`.
async fn assert_rejected(gws: &Api<Gateway>, gw: &Gateway, expected: &[&str]) {
    let err = gws
        .create(&PostParams::default(), gw)
        .await
        .expect_err("an invalid Gateway must be rejected");
    let status = api_status(err);
    assert!(status.is_invalid(), "expected 422 Invalid, got {status:?}");
    assert!(
        expected.iter().any(|e| status.message.contains(e)),
        "expected one of {expected:?} in: {}",
        status.message
    );
}

#[tokio::test]
async fn invalid_gateways_are_rejected_by_the_crd_validation() {
    let client = admin().await;
    let ns = TestNamespace::new(&client, "gwvalid").await;
    let gws: Api<Gateway> = Api::namespaced(client.clone(), &ns.name);

    // The control: a valid Gateway is accepted.
    let ok = gateway(
        "ok",
        &json!([{ "name": "http", "port": 80, "protocol": "HTTP", "hostname": "a.example.com" }]),
    );
    gws.create(&PostParams::default(), &ok)
        .await
        .expect("valid Gateway");

    // The OpenAPI schema: a hostname must match the DNS pattern.
    let bad_host = gateway(
        "bad-host",
        &json!([{ "name": "http", "port": 80, "protocol": "HTTP", "hostname": "Not_A_Host" }]),
    );
    assert_rejected(&gws, &bad_host, &["spec.listeners[0].hostname"]).await;

    // The list-map key and its CEL rule: listener names are unique.
    let dup = gateway(
        "dup",
        &json!([
            { "name": "a", "port": 80, "protocol": "HTTP" },
            { "name": "a", "port": 81, "protocol": "HTTP" },
        ]),
    );
    assert_rejected(
        &gws,
        &dup,
        &["Listener name must be unique", "Duplicate value"],
    )
    .await;

    // A CEL rule across fields: no TLS block on an HTTP listener.
    let tls_on_http = gateway(
        "tls-on-http",
        &json!([{ "name": "a", "port": 80, "protocol": "HTTP",
            "tls": { "mode": "Terminate", "certificateRefs": [{ "name": "s" }] } }]),
    );
    assert_rejected(&gws, &tls_on_http, &["tls must not be specified"]).await;

    assert_eq!(
        gws.list(&ListParams::default())
            .await
            .expect("list")
            .items
            .len(),
        1,
        "only the valid Gateway exists"
    );
    ns.delete().await;
}

fn dynamic_api(
    client: &Client,
    ns: &str,
    gvk: (&str, &str, &str),
    plural: &str,
) -> Api<DynamicObject> {
    let (group, version, kind) = gvk;
    let ar =
        ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural);
    Api::namespaced_with(client.clone(), ns, &ar)
}

/// Creates `obj`, writes `status` through the status subresource the way its controller
/// would, and checks the real subresource semantics: the status sticks, `spec_change` sent
/// along with it is ignored, the generation does not move, and `status_change` sent to the
/// main resource is ignored. Both changes use fields the schema has (nothing is pruned).
async fn status_round_trip(
    api: &Api<DynamicObject>,
    obj: Value,
    spec_change: Value,
    status: Value,
    status_change: Value,
) {
    let name = obj["metadata"]["name"].as_str().expect("name").to_owned();
    let obj: DynamicObject = serde_json::from_value(obj).expect("object");
    let created = api
        .create(&PostParams::default(), &obj)
        .await
        .expect("create");
    assert!(
        created
            .data
            .get("status")
            .is_none_or(|s| s.get("conditions").is_none())
    );
    let spec = created.data["spec"].clone();

    let patch = json!({ "spec": spec_change, "status": status });
    let written = api
        .patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("status write");
    assert_eq!(written.data["status"], status, "the status as written");
    assert_eq!(
        written.data["spec"], spec,
        "the spec is not written through /status"
    );
    assert_eq!(written.metadata.generation, created.metadata.generation);

    let main = json!({ "metadata": { "labels": { "touched": "yes" } }, "status": status_change });
    let touched = api
        .patch(&name, &PatchParams::default(), &Patch::Merge(&main))
        .await
        .expect("main resource write");
    assert_eq!(
        touched.labels().get("touched").map(String::as_str),
        Some("yes")
    );
    assert_eq!(
        touched.data["status"], status,
        "status is not written through the main resource"
    );
}

#[tokio::test]
async fn certificates_and_dns_endpoints_take_status_writes() {
    let client = admin().await;
    let ns = TestNamespace::new(&client, "status").await;

    let certs = dynamic_api(
        &client,
        &ns.name,
        ("cert-manager.io", "v1", "Certificate"),
        "certificates",
    );
    status_round_trip(
        &certs,
        json!({
            "apiVersion": "cert-manager.io/v1", "kind": "Certificate", "metadata": { "name": "c" },
            "spec": { "secretName": "c-tls", "dnsNames": ["a.example.com"],
                      "issuerRef": { "name": "letsencrypt", "kind": "ClusterIssuer", "group": "cert-manager.io" } }
        }),
        json!({ "secretName": "changed" }),
        json!({
            "conditions": [{ "type": "Ready", "status": "True", "reason": "Ready",
                             "message": "Certificate is up to date and has not expired",
                             "lastTransitionTime": "2026-01-01T00:00:00Z", "observedGeneration": 1 }],
            "notAfter": "2026-04-01T00:00:00Z", "revision": 1,
        }),
        json!({ "revision": 7 }),
    )
    .await;

    let endpoints = dynamic_api(
        &client,
        &ns.name,
        ("externaldns.k8s.io", "v1alpha1", "DNSEndpoint"),
        "dnsendpoints",
    );
    status_round_trip(
        &endpoints,
        json!({
            "apiVersion": "externaldns.k8s.io/v1alpha1", "kind": "DNSEndpoint", "metadata": { "name": "d" },
            "spec": { "endpoints": [{ "dnsName": "a.example.com", "recordType": "A", "targets": ["192.0.2.1"] }] }
        }),
        json!({ "endpoints": [] }),
        json!({ "observedGeneration": 1 }),
        json!({ "observedGeneration": 7 }),
    )
    .await;
    ns.delete().await;
}

#[tokio::test]
async fn owned_objects_are_garbage_collected() {
    let client = admin().await;
    let ns = TestNamespace::new(&client, "gc").await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &ns.name);
    let owner: ConfigMap =
        serde_json::from_value(json!({ "metadata": { "name": "owner" } })).expect("owner");
    let owner = cms
        .create(&PostParams::default(), &owner)
        .await
        .expect("owner");
    let owned: ConfigMap = serde_json::from_value(json!({ "metadata": {
        "name": "owned",
        "ownerReferences": [{ "apiVersion": "v1", "kind": "ConfigMap", "name": "owner",
                              "uid": owner.uid().expect("uid") }]
    } }))
    .expect("owned");
    cms.create(&PostParams::default(), &owned)
        .await
        .expect("owned");
    let bystander: ConfigMap =
        serde_json::from_value(json!({ "metadata": { "name": "bystander" } })).expect("bystander");
    cms.create(&PostParams::default(), &bystander)
        .await
        .expect("bystander");

    // Background propagation: the API server deletes the owner at once and the garbage
    // collector, and only it, deletes what the owner owned.
    cms.delete("owner", &DeleteParams::background())
        .await
        .expect("delete owner");
    wait_for(
        "the garbage collector to delete the owned ConfigMap",
        T,
        || {
            let cms = cms.clone();
            async move {
                cms.get_opt("owned")
                    .await
                    .expect("get")
                    .is_none()
                    .then_some(())
            }
        },
    )
    .await;
    assert!(cms.get_opt("bystander").await.expect("get").is_some());
    ns.delete().await;
}

#[tokio::test]
async fn deleted_namespaces_go_away() {
    let client = admin().await;
    let ns = TestNamespace::new(&client, "nsdel").await;
    let name = ns.name.clone();
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &name);
    let cm: ConfigMap = serde_json::from_value(json!({ "metadata": { "name": "x" } })).expect("cm");
    cms.create(&PostParams::default(), &cm).await.expect("cm");
    let certs = dynamic_api(
        &client,
        &name,
        ("cert-manager.io", "v1", "Certificate"),
        "certificates",
    );
    let cert: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "cert-manager.io/v1", "kind": "Certificate", "metadata": { "name": "c" },
        "spec": { "secretName": "c", "issuerRef": { "name": "i" }, "dnsNames": ["a.example.com"] }
    }))
    .expect("cert");
    certs
        .create(&PostParams::default(), &cert)
        .await
        .expect("cert");

    ns.delete().await;
    // The namespace controller empties it (custom resources included) and removes it.
    let nss: Api<Namespace> = Api::all(client.clone());
    wait_for(
        "the namespace controller to remove the namespace",
        Duration::from_secs(90),
        || {
            let nss = nss.clone();
            let name = name.clone();
            async move {
                nss.get_opt(&name)
                    .await
                    .expect("get")
                    .is_none()
                    .then_some(())
            }
        },
    )
    .await;
}

#[tokio::test]
async fn the_controller_identity_needs_rbac_to_list_gateways() {
    let client = admin().await;
    // The `controller` user in a group of this test's own: the grant below reaches no other
    // test, and a failed run leaves nothing that changes the next one.
    let name = unique_name("gwt-smoke-rbac");
    let gws: Api<Gateway> = Api::all(impersonating(CONTROLLER_USER, &[&name]).await);
    let plain: Api<Gateway> = Api::all(as_controller().await);

    let status = api_status(
        gws.list(&ListParams::default())
            .await
            .expect_err("forbidden"),
    );
    assert!(status.is_forbidden(), "expected 403, got {status:?}");
    assert!(
        status.message.contains(CONTROLLER_USER),
        "{}",
        status.message
    );

    let roles: Api<ClusterRole> = Api::all(client.clone());
    let bindings: Api<ClusterRoleBinding> = Api::all(client.clone());
    let role: ClusterRole = serde_json::from_value(json!({
        "metadata": { "name": name },
        "rules": [{ "apiGroups": ["gateway.networking.k8s.io"], "resources": ["gateways"],
                    "verbs": ["get", "list", "watch"] }]
    }))
    .expect("role");
    let binding: ClusterRoleBinding = serde_json::from_value(json!({
        "metadata": { "name": name },
        "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name },
        "subjects": [{ "apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": name }]
    }))
    .expect("binding");
    roles
        .create(&PostParams::default(), &role)
        .await
        .expect("role");
    bindings
        .create(&PostParams::default(), &binding)
        .await
        .expect("binding");

    wait_for("RBAC to allow listing Gateways", T, || {
        let gws = gws.clone();
        async move { gws.list(&ListParams::default()).await.ok() }
    })
    .await;
    // Still only what was granted, and only to whom.
    let status = api_status(
        plain
            .list(&ListParams::default())
            .await
            .expect_err("forbidden"),
    );
    assert!(
        status.is_forbidden(),
        "the grant reached beyond its group: {status:?}"
    );
    let cms: Api<ConfigMap> = Api::all(impersonating(CONTROLLER_USER, &[&name]).await);
    let status = api_status(
        cms.list(&ListParams::default())
            .await
            .expect_err("forbidden"),
    );
    assert!(
        status.is_forbidden(),
        "the grant reached beyond Gateways: {status:?}"
    );

    bindings
        .delete(&name, &DeleteParams::default())
        .await
        .expect("delete binding");
    roles
        .delete(&name, &DeleteParams::default())
        .await
        .expect("delete role");
}
