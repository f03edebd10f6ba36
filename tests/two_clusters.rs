//! One controller process serving two clusters: the test cluster and a member cluster of
//! its own (a second control plane, started by `tests/cluster/up` in a temporary directory
//! and stopped at the end). The shell is a `Cluster` per API server and one `Runner`: each
//! cluster's Gateways converge with their children written in that cluster only, a
//! Gateway of the same name in both gets its own children in each, and a cluster no
//! longer served is written to no more. A test binary of its own, so that no other
//! controller runs on the test cluster meanwhile (cargo runs test binaries one after the
//! other).
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

use std::path::PathBuf;
use std::time::{Duration, Instant};

use gateway_api::apis::standard::gateways::Gateway;
use gatewright::controller::{ClusterId, Options};
use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, ListParams};

use common::{TestNamespace, admin, apply_yaml, shipped_class_yaml, unique_name, wait_for};

const T: Duration = Duration::from_secs(90);

/// A second control plane, brought up for this test and down when dropped.
struct Member {
    dir: PathBuf,
    kubeconfig: PathBuf,
}

impl Member {
    fn up() -> Self {
        let root = env!("CARGO_MANIFEST_DIR");
        let dir = std::env::temp_dir().join(unique_name("gatewright-member"));
        std::fs::create_dir_all(&dir).unwrap();
        let out = std::process::Command::new(format!("{root}/tests/cluster/up"))
            .env("GATEWRIGHT_CLUSTER_DIR", &dir)
            .stderr(std::process::Stdio::inherit())
            .output()
            .unwrap();
        let member = Self {
            kubeconfig: dir.join("admin.kubeconfig"),
            dir,
        };
        assert!(
            out.status.success(),
            "the member cluster did not come up: {}",
            String::from_utf8_lossy(&out.stdout)
        );
        member
    }

    async fn client(&self) -> Client {
        let kc = kube::config::Kubeconfig::read_from(&self.kubeconfig).unwrap();
        let config = kube::Config::from_custom_kubeconfig(kc, &Default::default())
            .await
            .unwrap();
        Client::try_from(config).unwrap()
    }
}

impl Drop for Member {
    fn drop(&mut self) {
        let root = env!("CARGO_MANIFEST_DIR");
        let _ = std::process::Command::new(format!("{root}/tests/cluster/down"))
            .env("GATEWRIGHT_CLUSTER_DIR", &self.dir)
            .status();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn certificates(client: &Client, ns: &str) -> Api<DynamicObject> {
    Api::namespaced_with(
        client.clone(),
        ns,
        &ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("cert-manager.io", "v1", "Certificate"),
            "certificates",
        ),
    )
}

/// The shipped istio-certmanager-externaldns class under the name `class`, a Gateway `gw`
/// of it in `ns` and one route per hostname.
async fn world(client: &Client, ns: &str, class: &str, hosts: &[&str]) {
    let text = shipped_class_yaml("istio-certmanager-externaldns", class);
    apply_yaml(client, &text).await;
    apply_yaml(
        client,
        &format!(
            "apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {{name: gw, namespace: {ns}}}\nspec:\n  gatewayClassName: {class}\n  listeners:\n  - {{name: http, port: 80, protocol: HTTP, hostname: \"*.example.com\"}}\n"
        ),
    )
    .await;
    for (i, host) in hosts.iter().enumerate() {
        apply_yaml(
            client,
            &format!(
                "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {{name: r{i}, namespace: {ns}}}\nspec:\n  parentRefs: [{{name: gw}}]\n  hostnames: [{host}]\n  rules: [{{backendRefs: [{{name: svc, port: 80}}]}}]\n"
            ),
        )
        .await;
    }
}

/// Waits until `gw` in `ns` is Programmed with `routes` attached and its one Certificate
/// names `hosts`, writing the simulated downstream status in that namespace.
async fn converged(client: &Client, ns: &str, routes: usize, hosts: &[&str]) {
    let gws: Api<Gateway> = Api::namespaced(client.clone(), ns);
    let certs = certificates(client, ns);
    wait_for(&format!("gw in {ns} to converge"), T, || async {
        gatewright::simulate::simulate_ready_where(
            client,
            Some(ns),
            gatewright::simulate::Play::All,
        )
        .await
        .unwrap();
        let g = serde_json::to_value(gws.get("gw").await.ok()?).unwrap();
        let programmed = g["status"]["conditions"]
            .as_array()?
            .iter()
            .any(|c| c["type"] == "Programmed" && c["status"] == "True");
        let listed = certs.list(&ListParams::default()).await.unwrap().items;
        let [cert] = listed.as_slice() else {
            return None;
        };
        (programmed
            && g["status"]["listeners"][0]["attachedRoutes"] == routes
            && cert.data["spec"]["dnsNames"] == serde_json::json!(hosts))
        .then_some(())
    })
    .await;
}

#[test]
fn one_process_serves_two_clusters_each_in_its_own_right() {
    if std::env::var_os("GATEWRIGHT_CLUSTER_DIR").is_none() {
        eprintln!(
            "needs the local cluster harness (GATEWRIGHT_CLUSTER_DIR, scripts/test.sh): not run"
        );
        return;
    }
    let began = Instant::now();
    let member = Member::up();
    println!(
        "member cluster up in {:.1} s",
        began.elapsed().as_secs_f64()
    );
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let main = admin().await;
        let other = member.client().await;
        let controller_ns = unique_name("two-ctl");
        let opts = Options {
            controller_namespace: controller_ns,
            ..Options::default()
        };
        let ctl = gatewright::controller::start(main.clone(), opts)
            .await
            .unwrap();
        let id = ClusterId::new("member");
        ctl.add_cluster(id.clone(), other.clone());
        assert_eq!(ctl.clusters().len(), 2);

        // The same namespace, class and Gateway names in both clusters, other hostnames.
        let ns = TestNamespace::new(&main, "two").await;
        apply_yaml(
            &other,
            &format!("apiVersion: v1\nkind: Namespace\nmetadata: {{name: {}}}\n", ns.name),
        )
        .await;
        let class = format!("two-{}", ns.name);
        world(&main, &ns.name, &class, &["a.example.com", "b.example.com"]).await;
        world(&other, &ns.name, &class, &["c.example.com"]).await;

        // Each Gateway converges from its own cluster's routes, its children written there.
        converged(&main, &ns.name, 2, &["a.example.com", "b.example.com"]).await;
        converged(&other, &ns.name, 1, &["c.example.com"]).await;
        // The child Gateway carries the UID of the Gateway of its own cluster.
        let uid = |c: &Client| {
            let c = c.clone();
            let ns = ns.name.clone();
            async move {
                let gws: Api<Gateway> = Api::namespaced(c, &ns);
                let gw = gws.get("gw").await.unwrap();
                let child = gws.get("gw-istio").await.unwrap();
                (
                    gw.metadata.uid.unwrap(),
                    child.metadata.labels.unwrap()["gatewright.dev/gateway-uid"].clone(),
                )
            }
        };
        let (gw_main, child_main) = uid(&main).await;
        let (gw_member, child_member) = uid(&other).await;
        assert_eq!(gw_main, child_main);
        assert_eq!(gw_member, child_member);
        assert_ne!(gw_main, gw_member);
        // Both clusters' watches have listed: no start-up step is left.
        assert!(
            ctl.metrics().startup.done(),
            "{}",
            ctl.metrics().startup.describe()
        );

        // A change in the member is planned there alone.
        apply_yaml(
            &other,
            &format!(
                "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {{name: r9, namespace: {}}}\nspec:\n  parentRefs: [{{name: gw}}]\n  hostnames: [d.example.com]\n  rules: [{{backendRefs: [{{name: svc, port: 80}}]}}]\n",
                ns.name
            ),
        )
        .await;
        converged(&other, &ns.name, 2, &["c.example.com", "d.example.com"]).await;
        converged(&main, &ns.name, 2, &["a.example.com", "b.example.com"]).await;

        // No longer served: a new Gateway in the member gets no status from us.
        assert!(ctl.remove_cluster(&id));
        assert!(ctl.cluster(&id).is_none());
        assert!(!ctl.remove_cluster(&ClusterId::local()), "the local cluster stays");
        apply_yaml(
            &other,
            &format!(
                "apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {{name: late, namespace: {}}}\nspec:\n  gatewayClassName: {class}\n  listeners:\n  - {{name: http, port: 80, protocol: HTTP}}\n",
                ns.name
            ),
        )
        .await;
        let gws: Api<Gateway> = Api::namespaced(other.clone(), &ns.name);
        // What the local cluster's Gateways take to get a status, with room to spare.
        tokio::time::sleep(gatewright::controller::NEW_GATEWAY_SETTLE + Duration::from_secs(5))
            .await;
        let late = serde_json::to_value(gws.get("late").await.unwrap()).unwrap();
        // The CRD's default status says Unknown ("Waiting for controller") until a
        // controller writes.
        let conditions = late["status"]["conditions"].as_array().cloned().unwrap_or_default();
        assert!(
            conditions.iter().all(|c| c["status"] == "Unknown"),
            "a cluster no longer served was written to: {conditions:?}"
        );
        assert!(ctl.shutdown(Duration::from_secs(10)).await);
    });
    drop(member);
}
