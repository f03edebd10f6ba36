//! Helpers of the cluster tests: clients, a namespace per test, waiting.

use std::future::Future;
use std::time::Duration;

use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, DeleteParams, PostParams};
use kube::{Client, Config};

/// A client with the identity of `KUBECONFIG`.
pub async fn admin() -> Client {
    Client::try_default()
        .await
        .expect("KUBECONFIG must point at a cluster (scripts/test.sh sets it)")
}

/// A client acting as the plain `controller` user (impersonated by the admin identity,
/// so nothing but `KUBECONFIG` is needed).
pub async fn as_user(user: &str) -> Client {
    let mut cfg = Config::infer().await.expect("KUBECONFIG");
    cfg.auth_info.impersonate = Some(user.to_owned());
    Client::try_from(cfg).expect("client")
}

/// A namespace that lives for one test.
pub struct TestNamespace {
    pub name: String,
    client: Client,
}

impl TestNamespace {
    /// Creates `gw-test-<prefix>-<random>`.
    pub async fn new(client: &Client, prefix: &str) -> Self {
        let name = format!("gwt-{prefix}-{:08x}", rand_u32());
        let ns: Namespace = serde_json::from_value(serde_json::json!({ "metadata": { "name": name, "labels": { "gatewright.dev/test": "true" } } })).unwrap();
        Api::<Namespace>::all(client.clone())
            .create(&PostParams::default(), &ns)
            .await
            .expect("create namespace");
        Self {
            name,
            client: client.clone(),
        }
    }

    /// Deletes the namespace (the namespace controller removes what is in it).
    pub async fn delete(self) {
        let _ = Api::<Namespace>::all(self.client.clone())
            .delete(&self.name, &DeleteParams::default())
            .await;
    }
}

fn rand_u32() -> u32 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos(),
    );
    #[allow(clippy::cast_possible_truncation, reason = "any 32 bits will do")]
    let v = h.finish() as u32;
    v
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

/// Applies every YAML document of `text` with server-side apply (field manager `e2e`).
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

/// The one in-process controller of this test binary, started on first use on a runtime
/// of its own (each test has its own runtime, which ends with the test).
pub fn controller() -> std::sync::Arc<gatewright::controller::Controller> {
    static CTL: std::sync::OnceLock<std::sync::Arc<gatewright::controller::Controller>> =
        std::sync::OnceLock::new();
    CTL.get_or_init(|| {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
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
                let client = as_user(E2E_USER).await;
                let opts = gatewright::controller::Options {
                    controller_namespace: "gatewright-e2e-global".into(),
                    metrics_addr: None,
                    resync: Duration::from_secs(3600),
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
