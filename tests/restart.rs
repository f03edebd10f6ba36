//! Restarting the controller mid-way, on the real cluster: controller A is killed (its
//! runtime dropped, as a crash would: no clean-up, its Lease left held) right after it has
//! created its first children; the world changes while nothing runs; controller B starts,
//! waits for A's Lease to expire, and converges with no duplicate and no orphaned child.
//! A test binary of its own, so that no other controller runs in the process (cargo runs
//! test binaries one after the other).
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

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use gateway_api::apis::standard::gateways::Gateway;
use gateway_api::apis::standard::httproutes::HttpRoute;
use gatewright::controller::{Options, Runner};
use kube::Client;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams,
};
use serde_json::{Value, json};

use common::{TestNamespace, admin, apply_yaml, shipped_class_yaml, wait_for};

const T: Duration = Duration::from_secs(90);
const ROUTES: usize = 8;
const LEASE_NS: &str = "gatewright-restart";

/// A controller on a runtime of its own, killed by dropping that runtime.
struct Running {
    rt: tokio::runtime::Runtime,
    ctl: Arc<Runner>,
}

fn start_controller() -> Running {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let ctl = rt.block_on(async {
        let client = admin().await;
        let opts = Options {
            controller_namespace: LEASE_NS.into(),
            metrics_addr: None,
            resync: Duration::from_secs(3600),
            deletion_stuck_after: Duration::from_secs(120),
            workers: gatewright::controller::default_workers(),
            leader_election: Some((LEASE_NS.into(), "gatewright-restart".into())),
            ..Options::default()
        };
        gatewright::controller::start(client, opts).await.unwrap()
    });
    Running { rt, ctl }
}

fn api(client: &Client, ns: &str, group: &str, kind: &str, plural: &str) -> Api<DynamicObject> {
    Api::namespaced_with(
        client.clone(),
        ns,
        &ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, "v1", kind), plural),
    )
}

/// Every object labelled as ours in `ns`, by kind and name, as `Kind/name`.
async fn our_children(client: &Client, ns: &str) -> Vec<String> {
    let selector = "app.kubernetes.io/managed-by=gatewright";
    let mut out = Vec::new();
    for (group, kind, plural) in [
        ("cert-manager.io", "Certificate", "certificates"),
        ("gateway.networking.k8s.io", "Gateway", "gateways"),
        ("gateway.networking.k8s.io", "HTTPRoute", "httproutes"),
        ("externaldns.k8s.io", "DNSEndpoint", "dnsendpoints"),
    ] {
        let alpha = kind == "DNSEndpoint";
        let a = if alpha {
            Api::namespaced_with(
                client.clone(),
                ns,
                &ApiResource::from_gvk_with_plural(
                    &GroupVersionKind::gvk(group, "v1alpha1", kind),
                    plural,
                ),
            )
        } else {
            api(client, ns, group, kind, plural)
        };
        for o in a
            .list(&ListParams::default().labels(selector))
            .await
            .unwrap()
        {
            if o.metadata.deletion_timestamp.is_none() {
                // Certificates are versioned (make-before-break): gw-tls-<hash of dnsNames>.
                let name = o.metadata.name.unwrap();
                let name = if kind == "Certificate" && name.starts_with("gw-tls-") {
                    "gw-tls-*".to_owned()
                } else {
                    name
                };
                out.push(format!("{kind}/{name}"));
            }
        }
    }
    out.sort();
    out
}

fn route_yaml(ns: &str, i: usize, host: &str) -> String {
    format!(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {{name: r{i}, namespace: {ns}}}\nspec:\n  parentRefs: [{{name: gw}}]\n  hostnames: [{host}]\n  rules: [{{backendRefs: [{{name: svc, port: 80}}]}}]\n"
    )
}

#[test]
fn restart_mid_way_converges_without_duplicates_or_orphans() {
    let test_rt = tokio::runtime::Runtime::new().unwrap();
    let (client, ns, class) = test_rt.block_on(async {
        let client = admin().await;
        apply_yaml(
            &client,
            &format!("apiVersion: v1\nkind: Namespace\nmetadata: {{name: {LEASE_NS}}}\n"),
        )
        .await;
        let ns = TestNamespace::new(&client, "restart").await;
        let class = format!("restart-{}", ns.name);
        let text = shipped_class_yaml("istio-certmanager-externaldns", &class);
        apply_yaml(&client, &text).await;
        apply_yaml(
            &client,
            &format!(
                "apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {{name: gw, namespace: {}}}\nspec:\n  gatewayClassName: {class}\n  listeners:\n  - {{name: http, port: 80, protocol: HTTP, hostname: \"*.example.com\"}}\n  - {{name: https, port: 443, protocol: HTTPS, hostname: \"*.example.com\", tls: {{options: {{gatewright.dev/certificate: generated}}}}}}\n",
                ns.name
            ),
        )
        .await;
        for i in 0..ROUTES {
            apply_yaml(&client, &route_yaml(&ns.name, i, &format!("r{i}.example.com"))).await;
        }
        (client, ns, class)
    });

    // A starts and is killed mid-way: right after it has sent the apply of its third shadow
    // route (PATCH; route status goes by PUT), counted at its client's HTTP layer, before
    // the remaining ones.
    let a = start_controller();
    let deadline = Instant::now() + T;
    while a.ctl.metrics().requests("PATCH", "httproutes") < 3 {
        assert!(Instant::now() < deadline, "A never wrote");
        std::thread::sleep(Duration::from_millis(1));
    }
    a.rt.shutdown_background();
    let at_kill = test_rt.block_on(our_children(&client, &ns.name));
    println!("killed A; {} children existed: {at_kill:?}", at_kill.len());
    assert!(
        at_kill.len() < ROUTES + 2,
        "A was to be killed before it applied everything: {at_kill:?}"
    );

    // While nothing runs: a route goes, a hostname changes, a template is removed.
    test_rt.block_on(async {
        let routes: Api<HttpRoute> = Api::namespaced(client.clone(), &ns.name);
        routes
            .delete(&format!("r{}", ROUTES - 1), &DeleteParams::default())
            .await
            .unwrap();
        apply_yaml(&client, &route_yaml(&ns.name, 0, "new0.example.com")).await;
        let bps: Api<DynamicObject> = Api::all_with(
            client.clone(),
            &ApiResource::from_gvk_with_plural(
                &GroupVersionKind::gvk("gatewright.dev", "v1alpha1", "GatewayClassBlueprint"),
                "gatewayclassblueprints",
            ),
        );
        let bp = bps.get(&class).await.unwrap();
        let templates: Vec<Value> = bp.data["spec"]["gatewayTemplates"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|t| t["name"] != "dns")
            .cloned()
            .collect();
        bps.patch(
            &class,
            &PatchParams::default(),
            &Patch::Merge(&json!({"spec": {"gatewayTemplates": templates}})),
        )
        .await
        .unwrap();
    });

    // B takes over once A's Lease has expired, and converges.
    let began = Instant::now();
    let b = start_controller();
    let mut want: BTreeSet<String> = ["Certificate/gw-tls-*", "Gateway/gw-istio"]
        .into_iter()
        .map(str::to_owned)
        .collect();
    want.extend((0..ROUTES - 1).map(|i| format!("HTTPRoute/r{i}-gw-istio")));
    let want: Vec<String> = want.into_iter().collect();
    let mut hosts: Vec<String> = (1..ROUTES - 1)
        .map(|i| format!("r{i}.example.com"))
        .collect();
    hosts.push("new0.example.com".into());
    hosts.sort();
    test_rt.block_on(async {
        let gws: Api<Gateway> = Api::namespaced(client.clone(), &ns.name);
        let certs = api(
            &client,
            &ns.name,
            "cert-manager.io",
            "Certificate",
            "certificates",
        );
        wait_for("B to converge", T, || async {
            gatewright::simulate::simulate_ready(&client, gatewright::simulate::Play::All)
                .await
                .unwrap();
            let g = serde_json::to_value(gws.get("gw").await.unwrap()).unwrap();
            let programmed = g["status"]["conditions"]
                .as_array()?
                .iter()
                .any(|c| c["type"] == "Programmed" && c["status"] == "True");
            let listed = certs.list(&ListParams::default()).await.unwrap().items;
            let [cert] = listed.as_slice() else {
                return None;
            };
            let names = cert.data["spec"]["dnsNames"].clone();
            let children = our_children(&client, &ns.name).await;
            (programmed
                && names == json!(hosts)
                && children == want
                && g["status"]["listeners"][0]["attachedRoutes"] == ROUTES - 1)
                .then_some(())
        })
        .await;
        println!(
            "B converged {:.1} s after its start (Lease expiry included)",
            began.elapsed().as_secs_f64()
        );
        // Stable: a second look a moment later finds the same children, none extra.
        tokio::time::sleep(Duration::from_secs(2)).await;
        assert_eq!(our_children(&client, &ns.name).await, want);
        // Every route's status entry of ours is there once, Accepted.
        let routes: Api<HttpRoute> = Api::namespaced(client.clone(), &ns.name);
        let apps = routes
            .list(&ListParams::default().labels("!app.kubernetes.io/managed-by"))
            .await
            .unwrap();
        assert_eq!(apps.items.len(), ROUTES - 1);
        for r in apps {
            let v = serde_json::to_value(&r).unwrap();
            let ours: Vec<&Value> = v["status"]["parents"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|p| p["controllerName"] == gatewright::gateway::CONTROLLER_NAME)
                .collect();
            assert_eq!(ours.len(), 1, "one status entry of ours on {v}");
        }
    });
    b.rt.shutdown_background();
    test_rt.block_on(async {
        let _ =
            Api::<gateway_api::apis::standard::gatewayclasses::GatewayClass>::all(client.clone())
                .delete(&class, &DeleteParams::default())
                .await;
        ns.delete().await;
    });
}
