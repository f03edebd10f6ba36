//! Fleet mode's first block against the real API server: the ClusterProfile CRD
//! (`tests/cluster/crds/multicluster.x-k8s.io_clusterprofiles.yaml`) takes the upstream
//! examples (`tests/fleet/examples/`), their status goes through the status subresource and
//! reads back through `gatewright::fleet::profile`, the schema refuses what the published
//! types forbid, and a member client built by `gatewright::fleet::access` reaches the test
//! cluster, once through an exec plugin (`tests/fleet/exec-plugin`) and once through a
//! labelled kubeconfig Secret. The test cluster stands in for the member: the profile
//! points at the same API server the hub is.
#![cfg(feature = "cluster-tests")]
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code"
)]

#[allow(
    dead_code,
    reason = "shared with the e2e binary; not every helper is used here"
)]
#[path = "e2e/common.rs"]
mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use base64::Engine;
use k8s_openapi::api::core::v1::{Namespace, Secret};
use kube::Client;
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use common::{TestNamespace, admin, unique_name};
use gatewright::fleet::access::{self, ProviderFile};
use gatewright::fleet::profile::{self, ClusterProfile};
use gatewright::fleet_client;

const EXAMPLES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fleet/examples");
const PLUGIN: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fleet/exec-plugin");

fn example(file: &str) -> Value {
    let text = std::fs::read_to_string(format!("{EXAMPLES}/{file}")).unwrap();
    serde_saphyr::from_str(&text).unwrap()
}

fn profiles(client: &Client, ns: &str) -> Api<DynamicObject> {
    Api::namespaced_with(client.clone(), ns, &profile::api_resource())
}

/// Creates `object` (status included: the API server must drop it) in `ns`.
async fn create(api: &Api<DynamicObject>, ns: &str, mut object: Value) -> DynamicObject {
    object["metadata"]["namespace"] = json!(ns);
    let obj: DynamicObject = serde_json::from_value(object).unwrap();
    api.create(&PostParams::default(), &obj).await.unwrap()
}

async fn write_status(api: &Api<DynamicObject>, name: &str, status: &Value) -> DynamicObject {
    api.patch_status(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({ "status": status })),
    )
    .await
    .unwrap()
}

/// The message of an API server refusal.
fn refusal(e: kube::Error) -> String {
    match e {
        kube::Error::Api(s) => {
            assert_eq!(s.code, 422, "expected a validation refusal, got {s:?}");
            s.message
        }
        other => panic!("expected a refusal by the API server, got {other}"),
    }
}

#[tokio::test]
async fn upstream_examples_are_accepted_and_status_goes_through_the_subresource() {
    let client = admin().await;
    let ns = TestNamespace::new(&client, "fleet").await;
    let api = profiles(&client, &ns.name);
    for file in [
        "profile-minimal.yaml",
        "profile-status.yaml",
        "profile-secretreader.yaml",
        "profile-kubeconfig-secretreader.yaml",
    ] {
        let want = ClusterProfile::from_value(&example(file)).unwrap();
        let created = create(&api, &ns.name, example(file)).await;
        // The status subresource is on: a create keeps no status.
        assert!(
            created
                .data
                .get("status")
                .is_none_or(|s| s.as_object().is_none_or(|o| o.is_empty())),
            "{file}: status was kept on create: {:?}",
            created.data.get("status")
        );
        let generation = created.metadata.generation;
        let status = example(file).get("status").cloned().unwrap_or(json!({}));
        let written = write_status(&api, &want.name, &status).await;
        assert_eq!(
            written.metadata.generation, generation,
            "{file}: a status write moved the generation"
        );

        let got = ClusterProfile::from_dynamic(&api.get(&want.name).await.unwrap()).unwrap();
        assert_eq!(got.key(), format!("{}/{}", ns.name, want.name));
        assert_eq!(got.spec, want.spec, "{file}");
        assert_eq!(got.labels, want.labels, "{file}");
        assert_eq!(got.status.conditions, want.status.conditions, "{file}");
        assert_eq!(got.status.properties, want.status.properties, "{file}");
        assert_eq!(got.status.version, want.status.version, "{file}");
        assert_eq!(
            got.control_plane_healthy(),
            want.control_plane_healthy(),
            "{file}"
        );
        let providers =
            |p: &ClusterProfile| serde_json::to_value(&p.status.access_providers).unwrap();
        assert_eq!(providers(&got), providers(&want), "{file}");
    }
    // The examples with access providers really carry them.
    let got = ClusterProfile::from_dynamic(&api.get("spoke-2").await.unwrap()).unwrap();
    assert_eq!(got.control_plane_healthy(), Some(true));
    assert_eq!(
        got.access_provider("kubeconfig-secretreader")
            .unwrap()
            .cluster
            .server
            .as_deref(),
        Some("https://spoke-2.example:6443")
    );

    // Our printer columns, as `kubectl get` asks for them (a Table).
    let req = http::Request::get(format!(
        "/apis/{}/{}/namespaces/{}/{}",
        profile::GROUP,
        profile::VERSION,
        ns.name,
        profile::PLURAL
    ))
    .header(
        http::header::ACCEPT,
        "application/json;as=Table;v=v1;g=meta.k8s.io",
    )
    .body(Vec::new())
    .unwrap();
    let table: Value = client.request(req).await.unwrap();
    let columns: Vec<&str> = table["columnDefinitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        columns,
        [
            "Name",
            "Manager",
            "Healthy",
            "Version",
            "Display Name",
            "Age"
        ]
    );
    let row = table["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["cells"][0] == "cluster-b")
        .unwrap();
    assert_eq!(
        row["cells"].as_array().unwrap()[1..5],
        [
            json!("manager-b"),
            json!("True"),
            json!("1.29.0"),
            json!("cluster-b")
        ]
    );
    ns.delete().await;
}

#[tokio::test]
async fn the_api_server_enforces_the_published_schema() {
    let client = admin().await;
    let ns = TestNamespace::new(&client, "fleet").await;
    let api = profiles(&client, &ns.name);
    create(&api, &ns.name, example("profile-minimal.yaml")).await;

    // spec.clusterManager is immutable (the types' CEL rule).
    let e = api
        .patch(
            "cluster-a",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"clusterManager": {"name": "another"}}})),
        )
        .await
        .unwrap_err();
    assert!(refusal(e).contains("ClusterManager is immutable"));
    // Other spec fields are not.
    api.patch(
        "cluster-a",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"displayName": "renamed"}})),
    )
    .await
    .unwrap();

    // spec and spec.clusterManager are required.
    let mut no_spec = example("profile-minimal.yaml");
    no_spec["metadata"]["name"] = json!("no-spec");
    no_spec.as_object_mut().unwrap().remove("spec");
    let e = api
        .create(
            &PostParams::default(),
            &serde_json::from_value(with_ns(no_spec, &ns.name)).unwrap(),
        )
        .await
        .unwrap_err();
    assert!(refusal(e).contains("spec: Required value"));

    // Status refusals, each through the status subresource.
    let ok_provider = json!({"name": "p", "cluster": {"server": "https://m.example"}});
    for (status, expect) in [
        (
            json!({"properties": [{"name": "n1", "value": ""}]}),
            "status.properties[0].value",
        ),
        (
            json!({"conditions": [{"type": "ControlPlaneHealthy", "status": "Maybe", "reason": "R", "message": "", "lastTransitionTime": "2025-01-01T00:00:00Z"}]}),
            "Unsupported value: \"Maybe\"",
        ),
        (
            json!({"conditions": [{"type": "ControlPlaneHealthy", "status": "True"}]}),
            "status.conditions[0].reason: Required value",
        ),
        (
            json!({"accessProviders": [{"name": "p", "cluster": {}}]}),
            "status.accessProviders[0].cluster.server: Required value",
        ),
        (
            json!({"accessProviders": [ok_provider.clone(), ok_provider.clone()]}),
            "Duplicate value",
        ),
        (
            json!({"accessProviders": [{"name": "p", "cluster": {"server": "https://m.example", "certificate-authority-data": "not base64!"}}]}),
            "certificate-authority-data",
        ),
        // KEP-5339's additional-args extension is a list, but the published schema types
        // `extension` as an object: the API server refuses it (access.rs documents this).
        (
            json!({"accessProviders": [{"name": "p", "cluster": {"server": "https://m.example",
                "extensions": [{"name": access::EXTENSION_ADDITIONAL_ARGS, "extension": ["--a"]}]}}]}),
            "status.accessProviders[0].cluster.extensions[0].extension: Invalid value: \"array\"",
        ),
    ] {
        let e = api
            .patch_status(
                "cluster-a",
                &PatchParams::default(),
                &Patch::Merge(json!({ "status": status })),
            )
            .await
            .expect_err(&format!("accepted {status}"));
        let msg = refusal(e);
        assert!(msg.contains(expect), "{status}: {msg}");
    }
    ns.delete().await;
}

fn with_ns(mut v: Value, ns: &str) -> Value {
    v["metadata"]["namespace"] = json!(ns);
    v
}

/// What reaches the test cluster as `KUBECONFIG` does: server, CA (base64 PEM) and a
/// credential the exec plugin or a Secret's kubeconfig can hand on.
struct Target {
    server: String,
    ca_data: String,
    credential: Credential,
}

enum Credential {
    Token(String),
    /// PEM certificate and key.
    Cert(String, String),
}

fn target() -> Target {
    let kc = kube::config::Kubeconfig::read().unwrap();
    let ctx_name = kc.current_context.clone().unwrap();
    let ctx = kc
        .contexts
        .iter()
        .find(|c| c.name == ctx_name)
        .and_then(|c| c.context.clone())
        .unwrap();
    let cluster = kc
        .clusters
        .iter()
        .find(|c| c.name == ctx.cluster)
        .and_then(|c| c.cluster.clone())
        .unwrap();
    let user = kc
        .auth_infos
        .iter()
        .find(|u| Some(&u.name) == ctx.user.as_ref())
        .and_then(|u| u.auth_info.clone())
        .unwrap();
    let b64 = base64::engine::general_purpose::STANDARD;
    let ca_data = match (
        &cluster.certificate_authority_data,
        &cluster.certificate_authority,
    ) {
        (Some(d), _) => d.clone(),
        (None, Some(path)) => b64.encode(std::fs::read(path).unwrap()),
        (None, None) => panic!("the KUBECONFIG cluster has no CA"),
    };
    let file_or_data = |data: Option<String>, file: &Option<String>| match (data, file) {
        (Some(d), _) => Some(String::from_utf8(b64.decode(d).unwrap()).unwrap()),
        (None, Some(f)) => Some(std::fs::read_to_string(f).unwrap()),
        (None, None) => None,
    };
    // The secret fields read back through serde (kube-rs writes them out in full).
    let user_json = serde_json::to_value(&user).unwrap();
    let secret_field = |f: &str| user_json.get(f).and_then(Value::as_str).map(str::to_owned);
    let credential = if let Some(t) = secret_field("token") {
        Credential::Token(t)
    } else if let Some(f) = &user.token_file {
        Credential::Token(std::fs::read_to_string(f).unwrap().trim().to_owned())
    } else {
        let cert = file_or_data(
            user.client_certificate_data.clone(),
            &user.client_certificate,
        );
        let key = file_or_data(secret_field("client-key-data"), &user.client_key);
        match (cert, key) {
            (Some(c), Some(k)) => Credential::Cert(c, k),
            _ => panic!("the KUBECONFIG user has neither a token nor a client certificate"),
        }
    };
    Target {
        server: cluster.server.unwrap(),
        ca_data,
        credential,
    }
}

/// A scratch directory for one test's files, removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new() -> Self {
        let dir = std::env::temp_dir().join(unique_name("gatewright-fleet"));
        std::fs::create_dir_all(&dir).unwrap();
        Self(dir)
    }

    fn write(&self, name: &str, text: &str) -> PathBuf {
        use std::io::Write;
        use std::os::unix::fs::OpenOptionsExt;
        let path = self.0.join(name);
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .truncate(true)
            .write(true)
            .mode(0o600)
            .open(&path)
            .unwrap();
        f.write_all(text.as_bytes()).unwrap();
        path
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The plugin's environment for `target`'s credential, in the provider file's form.
fn credential_env(scratch: &Scratch, target: &Target) -> Vec<Value> {
    let path = |p: &Path| p.to_str().unwrap().to_owned();
    match &target.credential {
        Credential::Token(t) => vec![
            json!({"name": "GATEWRIGHT_PLUGIN_TOKEN_FILE", "value": path(&scratch.write("token", t))}),
        ],
        Credential::Cert(c, k) => vec![
            json!({"name": "GATEWRIGHT_PLUGIN_CERT_FILE", "value": path(&scratch.write("cert.pem", c))}),
            json!({"name": "GATEWRIGHT_PLUGIN_KEY_FILE", "value": path(&scratch.write("key.pem", k))}),
        ],
    }
}

/// A member client for the profile `name` in `ns`, as read back from the API server: the
/// provider chosen and the client, or kube-rs's refusal (it runs the exec plugin when the
/// client is built).
async fn member_client(
    api: &Api<DynamicObject>,
    name: &str,
    file: &ProviderFile,
) -> (String, Result<Client, kube::Error>) {
    let p = ClusterProfile::from_dynamic(&api.get(name).await.unwrap()).unwrap();
    let member = access::exec_kubeconfig(&p, file).unwrap();
    let config = fleet_client::client_config(&p, member.kubeconfig)
        .await
        .unwrap();
    (member.provider, Client::try_from(config))
}

async fn namespace_names(client: &Client) -> Result<Vec<String>, kube::Error> {
    Ok(Api::<Namespace>::all(client.clone())
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .filter_map(|n| n.metadata.name)
        .collect())
}

#[tokio::test]
async fn a_member_client_through_the_exec_plugin_lists_namespaces() {
    let client = admin().await;
    let ns = TestNamespace::new(&client, "fleet").await;
    let api = profiles(&client, &ns.name);
    let target = target();
    let scratch = Scratch::new();
    let log = scratch.0.join("exec-info.log");
    let mut env = credential_env(&scratch, &target);
    env.push(json!({"name": "GATEWRIGHT_PLUGIN_LOG", "value": log.to_str().unwrap()}));
    let provider_file = |provide_cluster_info: bool| {
        ProviderFile::parse(
            &json!({"providers": [
                {"name": "not-offered", "execConfig": {"apiVersion": "client.authentication.k8s.io/v1", "command": "/bin/false"}},
                {"name": "gatewright-test", "profileSourcedEnvVarsPolicy": "AppendIfNotExists",
                 "execConfig": {"apiVersion": "client.authentication.k8s.io/v1", "command": PLUGIN,
                                "env": env, "provideClusterInfo": provide_cluster_info}}
            ]})
            .to_string(),
        )
        .unwrap()
    };
    // The profile tells the plugin (through KEP-5339's additional-envs extension) which
    // server and which exec-extension config it must be handed.
    let profile_with = |name: &str, expect_server: &str| {
        json!({
            "apiVersion": "multicluster.x-k8s.io/v1alpha1", "kind": "ClusterProfile",
            "metadata": {"name": name, "labels": {profile::LABEL_CLUSTER_MANAGER: "gatewright-test"}},
            "spec": {"clusterManager": {"name": "gatewright-test"}},
            "status": {
                "accessProviders": [{"name": "gatewright-test", "cluster": {
                    "server": target.server, "certificate-authority-data": target.ca_data,
                    "extensions": [
                        {"name": access::EXEC_EXTENSION, "extension": {"clusterName": name}},
                        {"name": access::EXTENSION_ADDITIONAL_ENVS, "extension": {
                            "GATEWRIGHT_PLUGIN_EXPECT_SERVER": expect_server,
                            "GATEWRIGHT_PLUGIN_EXPECT_CLUSTER_NAME": name
                        }}
                    ]
                }}],
                "conditions": [{"type": "ControlPlaneHealthy", "status": "True", "reason": "Test",
                    "message": "the test cluster", "lastTransitionTime": "2025-01-01T00:00:00Z"}]
            }
        })
    };
    for (name, server) in [
        ("member", target.server.as_str()),
        ("wrong-server", "https://wrong.example:6443"),
    ] {
        let obj = profile_with(name, server);
        create(&api, &ns.name, obj.clone()).await;
        write_status(&api, name, &obj["status"]).await;
    }

    let (provider, member) = member_client(&api, "member", &provider_file(true)).await;
    assert_eq!(provider, "gatewright-test");
    let names = namespace_names(&member.unwrap()).await.unwrap();
    assert!(names.contains(&ns.name), "{names:?}");
    // The plugin ran, and was handed the cluster as kube-rs builds it.
    let first = std::fs::read_to_string(&log).unwrap();
    let info: Value = serde_json::from_str(first.lines().next().unwrap()).unwrap();
    assert_eq!(info["apiVersion"], "client.authentication.k8s.io/v1");
    assert_eq!(info["spec"]["interactive"], false);
    assert_eq!(info["spec"]["cluster"]["server"], target.server.as_str());
    assert_eq!(
        info["spec"]["cluster"]["config"],
        json!({"clusterName": "member"})
    );
    let ca = base64::engine::general_purpose::STANDARD
        .decode(
            info["spec"]["cluster"]["certificate-authority-data"]
                .as_str()
                .unwrap(),
        )
        .unwrap();
    assert!(String::from_utf8(ca).unwrap().contains("BEGIN CERTIFICATE"));

    // The plugin's checks do fail, and kube-rs reports the plugin's reason: the wrong
    // server ...
    let (_, wrong) = member_client(&api, "wrong-server", &provider_file(true)).await;
    let Err(e) = wrong else {
        panic!("the plugin accepted the wrong server")
    };
    let e = e.to_string();
    assert!(
        e.contains("spec.cluster.server is") && e.contains("https://wrong.example:6443"),
        "{e}"
    );
    // ... and no cluster at all without provideClusterInfo.
    let (_, blind) = member_client(&api, "member", &provider_file(false)).await;
    let Err(e) = blind else {
        panic!("the plugin ran without the cluster and did not refuse")
    };
    let e = e.to_string();
    assert!(
        e.contains("KUBERNETES_EXEC_INFO has no spec.cluster"),
        "{e}"
    );
    ns.delete().await;
}

#[tokio::test]
async fn a_member_client_through_the_kubeconfig_secret_lists_namespaces() {
    let client = admin().await;
    let ns = TestNamespace::new(&client, "fleet").await;
    let api = profiles(&client, &ns.name);
    let target = target();
    // A profile whose only provider the file does not configure: the Secret it is.
    let mut obj = example("profile-secretreader.yaml");
    obj["metadata"]["name"] = json!("member");
    create(&api, &ns.name, obj.clone()).await;
    write_status(&api, "member", &obj["status"]).await;
    let p = ClusterProfile::from_dynamic(&api.get("member").await.unwrap()).unwrap();
    let file = ProviderFile::parse(
        &std::fs::read_to_string(format!("{EXAMPLES}/provider-kubeconfig-secretreader.json"))
            .unwrap(),
    )
    .unwrap();
    let access::Route::Secret(lookup) = access::route(&p, &file, access::DEFAULT_CONSUMER).unwrap()
    else {
        panic!("expected the Secret route");
    };

    let b64 = base64::engine::general_purpose::STANDARD;
    let user = match &target.credential {
        Credential::Token(t) => json!({"token": t}),
        Credential::Cert(c, k) => {
            json!({"client-certificate-data": b64.encode(c), "client-key-data": b64.encode(k)})
        }
    };
    let kubeconfig = json!({
        "apiVersion": "v1", "kind": "Config",
        "clusters": [{"name": "member", "cluster": {"server": target.server, "certificate-authority-data": target.ca_data}}],
        "users": [{"name": "member", "user": user}],
        "contexts": [{"name": "member", "context": {"cluster": "member", "user": "member"}}],
        "current-context": "member"
    });
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns.name);
    let labels: BTreeMap<String, String> = lookup.labels.clone();
    let secret: Secret = serde_json::from_value(json!({
        "metadata": {"name": "member-kubeconfig", "labels": labels},
        "stringData": {access::SECRET_KEY_KUBECONFIG: kubeconfig.to_string()}
    }))
    .unwrap();
    secrets
        .create(&PostParams::default(), &secret)
        .await
        .unwrap();

    let listed = secrets
        .list(&ListParams::default().labels(&lookup.selector()))
        .await
        .unwrap()
        .items;
    assert_eq!(listed.len(), 1);
    let kc = access::secret_kubeconfig(&p, access::DEFAULT_CONSUMER, &listed).unwrap();
    let member = Client::try_from(fleet_client::client_config(&p, kc).await.unwrap()).unwrap();
    let names = namespace_names(&member).await.unwrap();
    assert!(names.contains(&ns.name), "{names:?}");

    // For another consumer, the Secret is not there.
    let e = access::secret_kubeconfig(&p, "someone-else", &listed).unwrap_err();
    assert!(matches!(e, access::AccessError::NoSecret { .. }), "{e}");
    ns.delete().await;
}
