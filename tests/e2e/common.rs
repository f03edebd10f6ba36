//! Helpers of the cluster tests. They read `KUBECONFIG` and nothing else, so the tests run
//! against the local cluster of tests/cluster (scripts/test.sh) as well as kind or k3d.
//! Each test works in a namespace of its own ([`TestNamespace`]) and names anything
//! cluster-scoped uniquely ([`unique_name`]), so tests run in parallel and again on the same
//! cluster.

use std::future::Future;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, DeleteParams, PostParams};
use kube::{Client, Config};

/// The plain identity a controller runs as in the tests: authenticated, with no rights
/// but those a test grants it. The harness also issues it a token of its own.
pub const CONTROLLER_USER: &str = "controller";
/// Label on every namespace the tests create.
pub const TEST_NAMESPACE_LABEL: &str = "gatewright.dev/test";

/// The cluster's configuration, as `KUBECONFIG` (or in-cluster config) gives it.
/// The shipped fleet class (its GatewayClass and blueprint), with its name replaced by
/// `name`.
#[allow(
    dead_code,
    reason = "not every test binary that includes this module places"
)]
pub fn fleet_class_yaml(name: &str) -> String {
    ["gatewayclass.yaml", "blueprint.yaml"]
        .map(|f| {
            std::fs::read_to_string(format!(
                "{}/gatewayclasses/fleet-istio-certmanager-externaldns/{f}",
                env!("CARGO_MANIFEST_DIR")
            ))
            .unwrap()
        })
        .join("---\n")
        .replace("fleet-istio-certmanager-externaldns", name)
}

pub async fn config() -> Config {
    Config::infer()
        .await
        .expect("KUBECONFIG must point at a cluster (scripts/test.sh sets it)")
}

/// A client with the identity of `KUBECONFIG` (an admin of the cluster).
pub async fn admin() -> Client {
    Client::try_from(config().await).expect("client from KUBECONFIG")
}

/// A client acting as `user` in `groups` (plus `system:authenticated`), impersonated through
/// the `KUBECONFIG` identity: no credentials of the user are needed.
pub async fn impersonating(user: &str, groups: &[&str]) -> Client {
    let mut cfg = config().await;
    cfg.auth_info.impersonate = Some(user.to_owned());
    if !groups.is_empty() {
        cfg.auth_info.impersonate_groups = Some(groups.iter().map(|&g| g.to_owned()).collect());
    }
    Client::try_from(cfg).expect("impersonating client")
}

/// A client acting as `user` (impersonated by the `KUBECONFIG` identity).
pub async fn as_user(user: &str) -> Client {
    impersonating(user, &[]).await
}

/// A client acting as the plain [`CONTROLLER_USER`].
pub async fn as_controller() -> Client {
    as_user(CONTROLLER_USER).await
}

/// A name no other test of this run, nor of an earlier run, has: `<prefix>-<8 hex digits>`
/// (at most 63 characters when `prefix` has at most 54).
pub fn unique_name(prefix: &str) -> String {
    use std::hash::{BuildHasher, Hasher};
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u32(std::process::id());
    h.write_u32(COUNTER.fetch_add(1, Ordering::Relaxed));
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos(),
    );
    format!("{prefix}-{:08x}", h.finish() & 0xffff_ffff)
}

/// A namespace that lives for one test: created by [`TestNamespace::new`], deleted by
/// [`TestNamespace::delete`] or, failing that (a panicking test), when dropped.
pub struct TestNamespace {
    /// The namespace's name, `gwt-<prefix>-<8 hex digits>`.
    pub name: String,
    client: Client,
    deleted: bool,
}

impl TestNamespace {
    /// Creates `gwt-<prefix>-<random>`, labelled [`TEST_NAMESPACE_LABEL`].
    pub async fn new(client: &Client, prefix: &str) -> Self {
        let name = unique_name(&format!("gwt-{prefix}"));
        let ns: Namespace = serde_json::from_value(serde_json::json!({
            "metadata": { "name": name, "labels": { TEST_NAMESPACE_LABEL: "true" } }
        }))
        .expect("namespace");
        Api::<Namespace>::all(client.clone())
            .create(&PostParams::default(), &ns)
            .await
            .unwrap_or_else(|e| panic!("create namespace {name}: {e}"));
        Self {
            name,
            client: client.clone(),
            deleted: false,
        }
    }

    /// Deletes the namespace; the namespace controller then removes what is in it.
    pub async fn delete(mut self) {
        self.deleted = true;
        delete_namespace(self.client.clone(), &self.name).await;
    }
}

async fn delete_namespace(client: Client, name: &str) {
    match Api::<Namespace>::all(client)
        .delete(name, &DeleteParams::background())
        .await
    {
        Ok(_) => {}
        Err(kube::Error::Api(s)) if s.is_not_found() => {}
        Err(e) => eprintln!("warning: failed to delete namespace {name}: {e}"),
    }
}

impl Drop for TestNamespace {
    fn drop(&mut self) {
        if self.deleted {
            return;
        }
        // The test's runtime may be ending or unwinding from a panic, and cannot be blocked
        // on from here: delete on a thread and runtime of its own, with a client of its own.
        let name = std::mem::take(&mut self.name);
        let deleter = std::thread::spawn(move || {
            let Ok(rt) = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            else {
                return;
            };
            rt.block_on(async move {
                if let Ok(client) = Client::try_default().await {
                    delete_namespace(client, &name).await;
                }
            });
        });
        let _ = deleter.join();
    }
}

/// Polls `check` every 200 ms until it returns `Some`, or panics after `timeout` with `what`.
pub async fn wait_for<T, F, Fut>(what: &str, timeout: Duration, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if let Some(v) = check().await {
            return v;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out after {timeout:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The API status of a failed request (403, 404, 422, ...), or a panic for any other error.
pub fn api_status(err: kube::Error) -> kube::core::Status {
    match err {
        kube::Error::Api(status) => *status,
        other => panic!("expected an API error status, got {other}"),
    }
}

/// Applies every YAML document of `text` with server-side apply (field manager `e2e`).
/// The YAML of a shipped class (`gatewayclasses/<shipped>`: its GatewayClass and
/// blueprint) under the name `class`.
pub fn shipped_class_yaml(shipped: &str, class: &str) -> String {
    let dir = format!("{}/gatewayclasses/{shipped}", env!("CARGO_MANIFEST_DIR"));
    format!(
        "{}\n---\n{}",
        std::fs::read_to_string(format!("{dir}/gatewayclass.yaml")).unwrap(),
        std::fs::read_to_string(format!("{dir}/blueprint.yaml")).unwrap()
    )
    .replace(shipped, class)
}

pub async fn apply_yaml(client: &Client, text: &str) {
    use kube::api::{ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams};
    for doc in gatewright::render::output::parse_documents(text).expect("yaml") {
        let api_version = doc["apiVersion"].as_str().unwrap();
        let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
        let gvk = GroupVersionKind::gvk(group, version, doc["kind"].as_str().unwrap());
        let (ar, caps): (ApiResource, _) = kube::discovery::pinned_kind(client, &gvk)
            .await
            .expect("kind served");
        let name = doc["metadata"]["name"].as_str().unwrap().to_owned();
        let api: Api<DynamicObject> = match (caps.scope, doc["metadata"]["namespace"].as_str()) {
            (kube::discovery::Scope::Namespaced, Some(ns)) => {
                Api::namespaced_with(client.clone(), ns, &ar)
            }
            _ => Api::all_with(client.clone(), &ar),
        };
        api.patch(
            &name,
            &PatchParams::apply("e2e").force(),
            &Patch::Apply(&doc),
        )
        .await
        .unwrap_or_else(|e| panic!("apply {name}: {e}"));
    }
}

/// The user the in-process controller acts as.
pub const E2E_USER: &str = "gatewright-e2e";
/// The API group of the kind the missing-kind test installs late.
pub const WIDGET_GROUP: &str = "e2e.gatewright.dev";

const E2E_RBAC: &str = r#"
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: gatewright-e2e-widgets}
rules:
- apiGroups: [e2e.gatewright.dev]
  resources: [widgets]
  verbs: [get, list, watch, create, update, patch, delete]
# The test-only conformance class (tests/conformance/class.yaml) renders a ServiceAccount.
- apiGroups: [""]
  resources: [serviceaccounts]
  verbs: [get, list, watch, create, update, patch, delete]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: gatewright-e2e}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: gatewright}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: gatewright-e2e}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: gatewright-e2e-children}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: gatewright-children}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: gatewright-e2e}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: gatewright-e2e-widgets}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: gatewright-e2e-widgets}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: gatewright-e2e}]
"#;

const E2E_LEASE_RBAC: &str = r#"
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: gatewright-leader-election, namespace: gatewright-e2e-global}
rules:
- apiGroups: [coordination.k8s.io]
  resources: [leases]
  verbs: [get, list, watch, create, update, patch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: gatewright-e2e-leader-election, namespace: gatewright-e2e-global}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: gatewright-leader-election}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: gatewright-e2e}]
"#;

/// Waits until the aggregated ClusterRole `gatewright-children` holds the rules of the
/// ClusterRoles labelled into it (kube-controller-manager fills them in).
async fn wait_children_aggregated(admin: &Client) {
    let roles: Api<k8s_openapi::api::rbac::v1::ClusterRole> = Api::all(admin.clone());
    wait_for(
        "ClusterRole gatewright-children to aggregate its rules",
        Duration::from_secs(30),
        || {
            let roles = roles.clone();
            async move {
                let role = roles.get("gatewright-children").await.unwrap();
                role.rules.is_some_and(|r| !r.is_empty()).then_some(())
            }
        },
    )
    .await;
}

/// The one in-process controller of this test binary, started on first use on a runtime
/// of its own (each test has its own runtime, which ends with the test).
pub fn controller() -> std::sync::Arc<gatewright::controller::Runner> {
    static CTL: std::sync::OnceLock<std::sync::Arc<gatewright::controller::Runner>> =
        std::sync::OnceLock::new();
    CTL.get_or_init(|| {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            if std::env::var_os("GATEWRIGHT_TEST_LOG").is_some() {
                let _ = tracing_subscriber::fmt()
                    .with_env_filter("gatewright=debug")
                    .with_test_writer()
                    .try_init();
            }
            let rt = tokio::runtime::Runtime::new().expect("runtime");
            rt.block_on(async move {
                // Least privilege, proven: the controller runs as a user that holds only
                // config/rbac/ (plus the Widget kind of the missing-kind test).
                let admin = Client::try_default().await.expect("KUBECONFIG");
                let rbac = std::fs::read_to_string(concat!(
                    env!("CARGO_MANIFEST_DIR"),
                    "/config/rbac/clusterrole.yaml"
                ))
                .expect("config/rbac");
                apply_yaml(&admin, &rbac).await;
                apply_yaml(&admin, E2E_RBAC).await;
                // Leader election on: the controller writes nothing until it holds the Lease,
                // so every controller test also proves the election and its RBAC (the Lease
                // permission is a Role in the controller namespace, config/rbac/).
                apply_yaml(
                    &admin,
                    "apiVersion: v1\nkind: Namespace\nmetadata: {name: gatewright-e2e-global}\n",
                )
                .await;
                apply_yaml(&admin, E2E_LEASE_RBAC).await;
                wait_children_aggregated(&admin).await;
                let client = as_user(E2E_USER).await;
                let opts = gatewright::controller::Options {
                    controller_namespace: "gatewright-e2e-global".into(),
                    // A free port: tests/e2e/monitoring.rs scrapes it.
                    metrics_addr: Some("127.0.0.1:0".into()),
                    resync: Duration::from_secs(3600),
                    deletion_stuck_after: Duration::from_secs(5),
                    workers: gatewright::controller::default_workers(),
                    leader_election: Some((
                        "gatewright-e2e-global".into(),
                        "gatewright-e2e".into(),
                    )),
                    ..Default::default()
                };
                let ctl = gatewright::controller::start(client, opts)
                    .await
                    .expect("start");
                tx.send(ctl).expect("send");
                std::future::pending::<()>().await;
            });
        });
        rx.recv().expect("controller started")
    })
    .clone()
}

/// A finalizer standing for someone else's (a controller that has not let go yet).
pub const HOLD: &str = "e2e.gatewright.dev/hold";

/// Puts [`HOLD`] on `name` (its deletion then hangs), or with `held == false` clears its
/// finalizers (it goes). A finalizer clear of an object already gone is fine.
pub async fn hold<K>(api: &kube::Api<K>, name: &str, held: bool)
where
    K: Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let fins = if held {
        serde_json::json!([HOLD])
    } else {
        serde_json::Value::Null
    };
    let r = api
        .patch(
            name,
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(&serde_json::json!({"metadata": {"finalizers": fins}})),
        )
        .await;
    match r {
        Ok(_) => {}
        Err(kube::Error::Api(s)) if !held && s.code == 404 => {}
        Err(e) => panic!("finalizers of {name}: {e}"),
    }
}

/// Waits until GatewayClass `name` is gone.
pub async fn wait_class_gone(client: &Client, name: &str, timeout: Duration) {
    let classes: kube::Api<gateway_api::apis::standard::gatewayclasses::GatewayClass> =
        kube::Api::all(client.clone());
    wait_for(&format!("GatewayClass {name} to be gone"), timeout, || {
        let classes = classes.clone();
        async move { classes.get_opt(name).await.unwrap().is_none().then_some(()) }
    })
    .await;
}

/// Waits until `name` is being deleted (held by a finalizer).
pub async fn wait_deleting<K>(api: &kube::Api<K>, name: &str, timeout: Duration)
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    wait_for(&format!("{name} in deletion"), timeout, || async {
        api.get(name)
            .await
            .unwrap()
            .meta()
            .deletion_timestamp
            .as_ref()
            .map(|_| ())
    })
    .await;
}

/// `GET path` over HTTP/1.1 on `addr` (the controller's metrics address): (status code,
/// content type, body).
pub async fn http_get(addr: std::net::SocketAddr, path: &str) -> (u16, String, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    s.write_all(
        format!("GET {path} HTTP/1.1\r\nhost: {addr}\r\nconnection: close\r\n\r\n").as_bytes(),
    )
    .await
    .unwrap();
    let mut raw = String::new();
    s.read_to_string(&mut raw).await.unwrap();
    let (head, body) = raw.split_once("\r\n\r\n").unwrap();
    let code = head.split(' ').nth(1).unwrap().parse().unwrap();
    let content_type = head
        .lines()
        .find_map(|l| {
            l.to_ascii_lowercase()
                .strip_prefix("content-type:")
                .map(|v| v.trim().to_owned())
        })
        .unwrap_or_default();
    (code, content_type, body.to_owned())
}
