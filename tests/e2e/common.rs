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
