//! Start-up races on the real cluster, reproduced on purpose: the controller starts
//! before the API server lets it read its Lease, and before a Gateway API CRD is
//! installed. It must not give up: it stays not ready on `/readyz` (naming the step and
//! the failure), counts the failures in `gatewright_startup_errors_total`, retries with
//! backoff, and converges a Gateway once the permission or the CRD arrives, without a
//! restart. A test binary of its own: the CRD test removes a CRD cluster-wide for a
//! moment, and no other test may run beside it (cargo runs test binaries one at a time;
//! the two tests here take turns).
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

use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use gatewright::controller::{Options, Runner};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::api::{Api, DeleteParams, PostParams};

use common::{TestNamespace, admin, apply_yaml, impersonating, unique_name, wait_for};

/// Generous: a loaded 2-core machine, RBAC and CRD caches that lag.
const T: Duration = Duration::from_secs(90);

/// The tests take turns: each runs a controller of its own.
static TURN: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// `GET path` on the controller's metrics address: (status code, body).
async fn get(addr: std::net::SocketAddr, path: &str) -> (u16, String) {
    let (code, _, body) = common::http_get(addr, path).await;
    (code, body)
}

/// The test-only class whose children (ConfigMaps, a ServiceAccount) are ready once they
/// exist, so a Gateway becomes Programmed with no downstream controller.
fn class_yaml(name: &str) -> String {
    std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/conformance/class.yaml"
    ))
    .unwrap()
    .replace("gatewright-conformance", name)
}

fn gateway_yaml(ns: &str, class: &str) -> String {
    format!(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {{name: gw, namespace: {ns}}}\nspec:\n  gatewayClassName: {class}\n  listeners:\n  - {{name: http, port: 80, protocol: HTTP, hostname: \"*.example.com\"}}\n"
    )
}

/// A Gateway's `Programmed` condition as the API server defaults it (the Gateway API CRD
/// gives new Gateways `Unknown`/`Pending` conditions): no controller has written it.
const UNTOUCHED: Option<(String, String)> = Some((String::new(), String::new()));

/// The Gateway's condition `t`, as (status, reason); the API server's default
/// (`Unknown`/`Pending`) as two empty strings ([`UNTOUCHED`]).
async fn condition(client: &Client, ns: &str, t: &str) -> Option<(String, String)> {
    let gws: Api<gateway_api::apis::standard::gateways::Gateway> =
        Api::namespaced(client.clone(), ns);
    let g = serde_json::to_value(gws.get("gw").await.unwrap()).unwrap();
    g["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == t)
        .map(|c| {
            let (status, reason) = (
                c["status"].as_str().unwrap_or_default(),
                c["reason"].as_str().unwrap_or_default(),
            );
            if (status, reason) == ("Unknown", "Pending") {
                (String::new(), String::new())
            } else {
                (status.to_owned(), reason.to_owned())
            }
        })
}

async fn wait_programmed(client: &Client, ns: &str) {
    wait_for(&format!("Gateway {ns}/gw Programmed=True"), T, || async {
        (condition(client, ns, "Programmed").await?.0 == "True").then_some(())
    })
    .await;
}

/// Whether the controller has stopped (it must not, for any of these failures).
fn stopped(ctl: &Runner) -> bool {
    ctl.stopped().now_or_never().is_some()
}

/// Waits until `/readyz` answers 503 with a line that has every one of `parts`, and
/// returns the body.
async fn wait_not_ready_because(ctl: &Runner, parts: &[&str]) -> String {
    let addr = ctl.metrics().served_at().expect("metrics served");
    wait_for(&format!("/readyz to say {parts:?}"), T, || async {
        let (code, body) = get(addr, "/readyz").await;
        (code == 503 && body.lines().any(|l| parts.iter().all(|p| l.contains(p)))).then_some(body)
    })
    .await
}

async fn wait_ready(ctl: &Runner) {
    let addr = ctl.metrics().served_at().expect("metrics served");
    let last = std::sync::Mutex::new(String::new());
    let deadline = tokio::time::Instant::now() + T;
    loop {
        let (code, body) = get(addr, "/readyz").await;
        if code == 200 {
            return;
        }
        *last.lock().unwrap() = body;
        assert!(
            tokio::time::Instant::now() < deadline,
            "/readyz did not answer 200 within {T:?}; it said:\n{}",
            last.lock().unwrap()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The value of `gatewright_startup_errors_total{step, reason}`.
async fn startup_errors(ctl: &Runner, step: &str, reason: &str) -> u64 {
    let addr = ctl.metrics().served_at().expect("metrics served");
    let (_, body) = get(addr, "/metrics").await;
    let sample = format!("gatewright_startup_errors_total{{step=\"{step}\",reason=\"{reason}\"}} ");
    body.lines()
        .find_map(|l| l.strip_prefix(&sample))
        .map_or(0, |v| v.trim().parse().unwrap())
}

fn options(lease: Option<(&str, &str)>) -> Options {
    Options {
        controller_namespace: "gatewright-startup-global".into(),
        metrics_addr: Some("127.0.0.1:0".into()),
        resync: Duration::from_secs(3600),
        workers: gatewright::controller::default_workers(),
        leader_election: lease.map(|(ns, name)| (ns.to_owned(), name.to_owned())),
        ..Options::default()
    }
}

/// Starts a controller on the test's runtime (each test shuts its own down).
async fn start(client: Client, opts: Options) -> Arc<Runner> {
    gatewright::controller::start(client, opts)
        .await
        .expect("start never fails on the API server's account")
}

const USER: &str = "gatewright-startup";
const LEASE_NS: &str = "gatewright-startup-global";

/// Everything the controller needs but the Lease: config/rbac's ClusterRoles (applied
/// by the test) and the ServiceAccounts the test class renders, bound to [`USER`].
fn rbac_but_the_lease() -> String {
    format!(
        r"apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {{name: {USER}-serviceaccounts}}
rules:
- apiGroups: ['']
  resources: [serviceaccounts]
  verbs: [get, list, watch, create, update, patch, delete]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {{name: {USER}}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: gatewright}}
subjects: [{{apiGroup: rbac.authorization.k8s.io, kind: User, name: {USER}}}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {{name: {USER}-children}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: gatewright-children}}
subjects: [{{apiGroup: rbac.authorization.k8s.io, kind: User, name: {USER}}}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {{name: {USER}-serviceaccounts}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: {USER}-serviceaccounts}}
subjects: [{{apiGroup: rbac.authorization.k8s.io, kind: User, name: {USER}}}]
---
apiVersion: v1
kind: Namespace
metadata: {{name: {LEASE_NS}}}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {{name: gatewright-leader-election, namespace: {LEASE_NS}}}
rules:
- apiGroups: [coordination.k8s.io]
  resources: [leases]
  verbs: [get, list, watch, create, update, patch]
"
    )
}

fn lease_binding() -> String {
    format!(
        r"apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {{name: {USER}-leader-election, namespace: {LEASE_NS}}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: Role, name: gatewright-leader-election}}
subjects: [{{apiGroup: rbac.authorization.k8s.io, kind: User, name: {USER}}}]
"
    )
}

/// The controller starts as a user that may not read its Lease. It keeps running, says so
/// on `/readyz` and in the metric, writes nothing, and becomes leader and converges a
/// Gateway once the RoleBinding is created: no restart, no sleep in the test.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_lease_granted_after_start_is_waited_for() {
    let _turn = TURN.lock().await;
    let admin = admin().await;
    // A rerun on the same cluster starts without the grant again.
    let bindings: Api<k8s_openapi::api::rbac::v1::RoleBinding> =
        Api::namespaced(admin.clone(), LEASE_NS);
    let roles = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/config/rbac/clusterrole.yaml"
    ))
    .unwrap();
    apply_yaml(&admin, &roles).await;
    apply_yaml(&admin, &rbac_but_the_lease()).await;
    // The children's ClusterRole is filled in by the aggregation controller.
    let cluster_roles: Api<k8s_openapi::api::rbac::v1::ClusterRole> = Api::all(admin.clone());
    wait_for("gatewright-children to aggregate its rules", T, || async {
        let role = cluster_roles.get("gatewright-children").await.ok()?;
        role.rules.is_some_and(|r| !r.is_empty()).then_some(())
    })
    .await;
    match bindings
        .delete(&format!("{USER}-leader-election"), &DeleteParams::default())
        .await
    {
        Ok(_) | Err(kube::Error::Api(_)) => {}
        Err(e) => panic!("delete the lease binding: {e}"),
    }
    let ns = TestNamespace::new(&admin, "startup-lease").await;
    let class = unique_name("startup-lease");
    apply_yaml(&admin, &class_yaml(&class)).await;
    apply_yaml(&admin, &gateway_yaml(&ns.name, &class)).await;

    // A Lease name of our own each run: one left by an earlier run is not ours to wait for.
    let lease = unique_name("startup");
    let step = format!("leader election on Lease {LEASE_NS}/{lease}");
    let ctl = start(
        impersonating(USER, &[]).await,
        options(Some((LEASE_NS, &lease))),
    )
    .await;
    let body = wait_not_ready_because(&ctl, &[&step, "Forbidden", "retrying"]).await;
    assert!(body.contains("leases.coordination.k8s.io"), "{body}");
    assert!(startup_errors(&ctl, &step, "Forbidden").await >= 1);
    assert!(
        !stopped(&ctl),
        "a 403 at start must not stop the controller"
    );
    assert_eq!(
        condition(&admin, &ns.name, "Programmed").await,
        UNTOUCHED,
        "nothing is written before the lease is held"
    );

    apply_yaml(&admin, &lease_binding()).await;
    wait_ready(&ctl).await;
    wait_for("the lease", T, || async {
        ctl.metrics()
            .leader
            .load(std::sync::atomic::Ordering::Relaxed)
            .then_some(())
    })
    .await;
    wait_programmed(&admin, &ns.name).await;
    assert!(!stopped(&ctl));
    assert!(
        ctl.shutdown(Duration::from_secs(20)).await,
        "shut down in time"
    );
    ns.delete().await;
}

/// A CRD taken away for a moment; put back when the test ends, even by a panic.
struct CrdAway {
    crd: Option<CustomResourceDefinition>,
}

impl CrdAway {
    /// Deletes CRD `name` and waits until it is gone.
    async fn take(client: &Client, name: &str) -> Self {
        let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
        let mut crd = crds.get(name).await.unwrap();
        crd.metadata = kube::api::ObjectMeta {
            name: crd.metadata.name.take(),
            labels: crd.metadata.labels.take(),
            annotations: crd.metadata.annotations.take().map(|mut a| {
                a.remove("kubectl.kubernetes.io/last-applied-configuration");
                a
            }),
            ..Default::default()
        };
        crd.status = None;
        crds.delete(name, &DeleteParams::default()).await.unwrap();
        wait_for(&format!("CRD {name} to be gone"), T, || async {
            crds.get_opt(name).await.unwrap().is_none().then_some(())
        })
        .await;
        Self { crd: Some(crd) }
    }

    /// Creates the CRD again and waits until it is Established.
    async fn restore(mut self, client: &Client) {
        if let Some(crd) = self.crd.take() {
            restore_crd(client, crd).await;
        }
    }
}

async fn restore_crd(client: &Client, crd: CustomResourceDefinition) {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let name = crd.metadata.name.clone().unwrap();
    // A deletion may still be finishing (its instances being removed): retry the create.
    wait_for(&format!("CRD {name} to be created"), T, || async {
        match crds.create(&PostParams::default(), &crd).await {
            Ok(_) => Some(()),
            Err(kube::Error::Api(s)) if s.code == 409 => {
                let live = crds.get_opt(&name).await.unwrap()?;
                live.metadata.deletion_timestamp.is_none().then_some(())
            }
            Err(e) => panic!("create CRD {name}: {e}"),
        }
    })
    .await;
    wait_for(&format!("CRD {name} Established"), T, || async {
        let live = crds.get(&name).await.unwrap();
        live.status?
            .conditions?
            .iter()
            .any(|c| c.type_ == "Established" && c.status == "True")
            .then_some(())
    })
    .await;
}

impl Drop for CrdAway {
    fn drop(&mut self) {
        let Some(crd) = self.crd.take() else {
            return;
        };
        // The test's runtime is unwinding: restore on a thread and runtime of its own.
        let restorer = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move { restore_crd(&admin().await, crd).await });
        });
        let _ = restorer.join();
    }
}

/// A Gateway API CRD (ReferenceGrant's, a kind every controller of ours watches) is
/// installed after the controller started. The controller waits, not ready, naming the
/// watch and the 404; once the CRD is served it lists, becomes ready and converges the
/// Gateway that waited meanwhile, without a restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gateway_api_crd_installed_after_start_is_waited_for() {
    let _turn = TURN.lock().await;
    let admin = admin().await;
    let ns = TestNamespace::new(&admin, "startup-crd").await;
    let class = unique_name("startup-crd");
    apply_yaml(&admin, &class_yaml(&class)).await;
    let away = CrdAway::take(&admin, "referencegrants.gateway.networking.k8s.io").await;

    let ctl = start(admin.clone(), options(None)).await;
    let body = wait_not_ready_because(&ctl, &["watch ReferenceGrant", "NotFound"]).await;
    assert!(body.contains("caches not synced"), "{body}");
    assert!(startup_errors(&ctl, "watch ReferenceGrant", "NotFound").await >= 1);
    assert!(
        !stopped(&ctl),
        "a missing CRD at start must not stop the controller"
    );
    // Created while the caches cannot sync: planned only once they have.
    apply_yaml(&admin, &gateway_yaml(&ns.name, &class)).await;
    assert_eq!(
        condition(&admin, &ns.name, "Programmed").await,
        UNTOUCHED,
        "nothing is planned before every watch has listed"
    );

    away.restore(&admin).await;
    wait_ready(&ctl).await;
    wait_programmed(&admin, &ns.name).await;
    assert_eq!(
        condition(&admin, &ns.name, "Accepted").await,
        Some(("True".to_owned(), "Accepted".to_owned()))
    );
    assert!(!stopped(&ctl));
    assert!(
        ctl.shutdown(Duration::from_secs(20)).await,
        "shut down in time"
    );
    ns.delete().await;
}

/// An optional route kind (UDPRoute) whose CRD is missing at start never holds the
/// controller back: it becomes ready and programs Gateways; once the CRD is installed, the
/// kind is watched without a restart and its routes get their status.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_route_kind_not_installed_does_not_hold_start_up() {
    let _turn = TURN.lock().await;
    let admin = admin().await;
    let ns = TestNamespace::new(&admin, "startup-udp").await;
    let class = unique_name("startup-udp");
    apply_yaml(&admin, &class_yaml(&class)).await;
    let away = CrdAway::take(&admin, "udproutes.gateway.networking.k8s.io").await;
    apply_yaml(
        &admin,
        &format!(
            "apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {{name: gw, namespace: {}}}\nspec:\n  gatewayClassName: {class}\n  listeners:\n  - {{name: http, port: 80, protocol: HTTP, hostname: \"*.example.com\"}}\n  - {{name: dns, port: 53, protocol: UDP}}\n",
            ns.name
        ),
    )
    .await;

    let ctl = start(admin.clone(), options(None)).await;
    wait_ready(&ctl).await;
    wait_programmed(&admin, &ns.name).await;
    assert_eq!(
        startup_errors(&ctl, "watch UDPRoute", "NotFound").await,
        0,
        "a kind not installed is not a start-up error"
    );

    away.restore(&admin).await;
    apply_yaml(
        &admin,
        &format!(
            "apiVersion: gateway.networking.k8s.io/v1\nkind: UDPRoute\nmetadata: {{name: dns, namespace: {}}}\nspec:\n  parentRefs: [{{name: gw, sectionName: dns}}]\n  rules:\n  - backendRefs: [{{name: coredns, port: 53}}]\n",
            ns.name
        ),
    )
    .await;
    let udp: Api<kube::api::DynamicObject> = Api::namespaced_with(
        admin.clone(),
        &ns.name,
        &kube::api::ApiResource::from_gvk_with_plural(
            &kube::api::GroupVersionKind::gvk("gateway.networking.k8s.io", "v1", "UDPRoute"),
            "udproutes",
        ),
    );
    wait_for(
        "the UDPRoute accepted, once its kind is served",
        T,
        || async {
            let r = udp.get_opt("dns").await.ok()??;
            r.data["status"]["parents"]
                .as_array()?
                .iter()
                .any(|p| {
                    p["controllerName"] == "gatewright.dev/gateway-controller"
                        && p["conditions"].as_array().is_some_and(|c| {
                            c.iter()
                                .any(|c| c["type"] == "Accepted" && c["status"] == "True")
                        })
                })
                .then_some(())
        },
    )
    .await;
    assert!(!stopped(&ctl));
    assert!(
        ctl.shutdown(Duration::from_secs(20)).await,
        "shut down in time"
    );
    ns.delete().await;
}
