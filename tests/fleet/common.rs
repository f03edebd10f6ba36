//! What the fleet tests share: member control planes of their own (`tests/cluster/up` in
//! a temporary directory), their enrolment in the hub's inventory, and the shipped class's
//! world in a cluster, converged with the simulated downstream status.

use std::path::PathBuf;
use std::time::Duration;

use gateway_api::apis::standard::gateways::Gateway;
use gatewright::controller::ClusterId;
use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, ListParams};

use crate::common::{apply_yaml, shipped_class_yaml, unique_name, wait_for};

pub const T: Duration = Duration::from_secs(90);

/// A second control plane, brought up for this test and down when dropped.
pub struct Member {
    pub dir: PathBuf,
    pub kubeconfig: PathBuf,
}

impl Member {
    pub fn up() -> Self {
        Self::start(false)
    }

    /// A member whose API server records every write (who, user agent, when) in
    /// [`Member::audit_log`].
    pub fn up_audited() -> Self {
        Self::start(true)
    }

    fn start(audit: bool) -> Self {
        let root = env!("CARGO_MANIFEST_DIR");
        let dir = std::env::temp_dir().join(unique_name("gatewright-member"));
        std::fs::create_dir_all(&dir).unwrap();
        let out = std::process::Command::new(format!("{root}/tests/cluster/up"))
            .env("GATEWRIGHT_CLUSTER_DIR", &dir)
            .env("GATEWRIGHT_CLUSTER_AUDIT", if audit { "1" } else { "0" })
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

    /// The write requests the member's API server has recorded (with
    /// [`Member::up_audited`]), one JSON object each.
    pub fn audit_log(&self) -> Vec<serde_json::Value> {
        std::fs::read_to_string(self.dir.join("audit.log"))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    /// The writes made in the member by requests whose user agent contains `agent`, by the
    /// time its API server received each ([`Member::audit_log`]).
    pub fn writes_of(&self, agent: &str) -> Vec<k8s_openapi::jiff::Timestamp> {
        self.audit_log()
            .iter()
            .filter(|e| e["userAgent"].as_str().is_some_and(|a| a.contains(agent)))
            .filter_map(|e| e["requestReceivedTimestamp"].as_str()?.parse().ok())
            .collect()
    }

    /// Kills the member's API server (SIGKILL) and starts it again `down` seconds later
    /// (`tests/cluster/restart`); the process ends once it serves again.
    pub fn kill_api_server(&self, down: u32) -> std::process::Child {
        std::process::Command::new(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/cluster/restart"
        ))
        .args(["--kill", "--down", &down.to_string(), "kube-apiserver"])
        .env("GATEWRIGHT_CLUSTER_DIR", &self.dir)
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap()
    }

    pub async fn client(&self) -> Client {
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

pub fn certificates(client: &Client, ns: &str) -> Api<DynamicObject> {
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
pub async fn world(client: &Client, ns: &str, class: &str, hosts: &[&str]) {
    let text = shipped_class_yaml("istio-certmanager-externaldns", class);
    apply_yaml(client, &text).await;
    apply_yaml(
        client,
        &format!(
            "apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {{name: gw, namespace: {ns}}}\nspec:\n  gatewayClassName: {class}\n  listeners:\n  - {{name: http, port: 80, protocol: HTTP, hostname: \"*.example.com\"}}\n  - {{name: https, port: 443, protocol: HTTPS, hostname: \"*.example.com\", tls: {{options: {{gatewright.dev/certificate: generated}}}}}}\n"
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
pub async fn converged(client: &Client, ns: &str, routes: usize, hosts: &[&str]) {
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

/// The member's kubeconfig as a hub Secret holds it: the CA inline (a kubeconfig from a
/// Secret may name no file), the server `server` (the member's own when `None`).
pub fn member_kubeconfig(member: &Member, server: Option<&str>) -> String {
    use base64::Engine as _;
    let text = std::fs::read_to_string(&member.kubeconfig).unwrap();
    let mut out = String::new();
    for line in text.lines() {
        if let Some(path) = line.trim().strip_prefix("certificate-authority: ") {
            let ca = std::fs::read(path).unwrap();
            out.push_str(&format!(
                "    certificate-authority-data: {}\n",
                base64::engine::general_purpose::STANDARD.encode(ca)
            ));
        } else if let (Some(s), Some(_)) = (server, line.trim().strip_prefix("server: ")) {
            out.push_str(&format!("    server: {s}\n"));
        } else {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

/// The addresses a member's gateways may bring into the hub's records, as its ClusterProfile
/// says (`gatewright.dev/addresses`): the range the simulated downstream gives them
/// ([`gatewright::simulate::simulated_ip`]).
pub const MEMBER_ADDRESSES: &str = "198.51.100.0/24";

/// A member in the hub's inventory: its kubeconfig Secret (labelled for gatewright) and
/// its ClusterProfile, with `ControlPlaneHealthy` as `healthy` says.
pub async fn enrol(hub: &Client, ns: &str, name: &str, kubeconfig: &str, healthy: bool) {
    use base64::Engine as _;
    apply_yaml(
        hub,
        &format!(
            "apiVersion: v1\nkind: Secret\nmetadata:\n  name: {name}-kubeconfig\n  namespace: {ns}\n  labels: {{x-k8s.io/cluster-inventory-consumer: gatewright, x-k8s.io/cluster-profile: {name}}}\ndata:\n  Config: {}\n",
            base64::engine::general_purpose::STANDARD.encode(kubeconfig)
        ),
    )
    .await;
    apply_yaml(
        hub,
        &format!(
            "apiVersion: multicluster.x-k8s.io/v1alpha1\nkind: ClusterProfile\nmetadata: {{name: {name}, namespace: {ns}, annotations: {{gatewright.dev/addresses: \"{MEMBER_ADDRESSES}\"}}}}\nspec:\n  displayName: {name}\n  clusterManager: {{name: gatewright-tests}}\n"
        ),
    )
    .await;
    set_healthy(hub, ns, name, healthy).await;
}

/// Writes the member's `ControlPlaneHealthy` condition, as its cluster manager would.
pub async fn set_healthy(hub: &Client, ns: &str, name: &str, healthy: bool) {
    let profiles: Api<DynamicObject> =
        Api::namespaced_with(hub.clone(), ns, &gatewright::fleet::profile::api_resource());
    let status = if healthy { "True" } else { "False" };
    profiles
        .patch_status(
            name,
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(serde_json::json!({"status": {"conditions": [{
                "type": "ControlPlaneHealthy", "status": status, "reason": "Probed",
                "message": "set by the test", "lastTransitionTime": k8s_openapi::jiff::Timestamp::now().to_string(),
            }]}})),
        )
        .await
        .unwrap();
}

/// Waits until the runner serves `id` (or, `false`, no longer does).
pub async fn served(ctl: &gatewright::controller::Runner, id: &ClusterId, yes: bool) {
    wait_for(&format!("{id} served: {yes}"), T, || async {
        (ctl.cluster(id).is_some() == yes).then_some(())
    })
    .await;
}
