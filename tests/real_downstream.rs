//! The shipped class `istio-certmanager-externaldns` with the real cert-manager and the real
//! external-dns beside the test cluster (tests/cluster/downstream): cert-manager issues the
//! Certificate gatewright renders and reports it Ready itself; external-dns publishes the
//! DNSEndpoint's records to its in-memory zone, logs them and writes
//! `status.observedGeneration`. Only the Istio child Gateway's status is simulated (it needs
//! a data plane), and only on that one object.
//!
//! Both controllers act in one namespace only (`downstream.env` names it); the other
//! cluster tests simulate Certificate and DNSEndpoint status in namespaces of their own and
//! are left alone. A test binary of its own: its in-process controller is the only one
//! running while it runs (cargo runs test binaries one after the other).
//!
//! Needs the downstream controllers: on the harness's cluster (tests/cluster/up) the test
//! starts them with `tests/cluster/downstream up` when they are not running already
//! (scripts/test.sh starts them before the tests); on another cluster, point
//! `GATEWRIGHT_DOWNSTREAM_ENV` at a file of the same form as `downstream.env`.
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
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Secret;
use kube::Client;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams,
};
use serde_json::{Value, json};

use common::{admin, apply_yaml, unique_name, wait_for};

const T: Duration = Duration::from_secs(90);

/// The tests of this binary each run a controller of their own: one at a time.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// What `tests/cluster/downstream up` wrote: where the real controllers act and log.
struct Downstream {
    namespace: String,
    zone: String,
    /// The CA issuer's kind (`Issuer` in `namespace`, or `ClusterIssuer`) and name.
    ca_issuer: (String, String),
    external_dns_log: PathBuf,
}

/// Reads `downstream.env` (beside the kubeconfig of the harness's cluster, or
/// `GATEWRIGHT_DOWNSTREAM_ENV`), starting the downstream controllers first on the harness's
/// cluster (a no-op while they run).
fn downstream() -> Downstream {
    let env_file = if let Some(f) = std::env::var_os("GATEWRIGHT_DOWNSTREAM_ENV") {
        PathBuf::from(f)
    } else {
        let kubeconfig = PathBuf::from(
            std::env::var_os("KUBECONFIG").expect("KUBECONFIG (scripts/test.sh sets it)"),
        );
        let dir = kubeconfig.parent().unwrap().to_owned();
        assert!(
            dir.join(".gatewright-cluster").exists(),
            "KUBECONFIG is not a cluster of tests/cluster/up: run cert-manager and external-dns \
             as tests/cluster/downstream does and set GATEWRIGHT_DOWNSTREAM_ENV"
        );
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/cluster/downstream");
        let status = Command::new(script)
            .arg("up")
            .env("GATEWRIGHT_CLUSTER_DIR", &dir)
            .stdout(Stdio::null())
            .status()
            .expect("run tests/cluster/downstream");
        assert!(status.success(), "tests/cluster/downstream up failed");
        dir.join("downstream.env")
    };
    let text = std::fs::read_to_string(&env_file)
        .unwrap_or_else(|e| panic!("read {}: {e}", env_file.display()));
    let env: BTreeMap<&str, &str> = text.lines().filter_map(|l| l.split_once('=')).collect();
    Downstream {
        namespace: env["namespace"].to_owned(),
        zone: env["zones"].split_whitespace().next().unwrap().to_owned(),
        ca_issuer: (
            env["ca_issuer_kind"].to_owned(),
            env["ca_issuer"].to_owned(),
        ),
        external_dns_log: PathBuf::from(env["external_dns_log"]),
    }
}

fn resource(group: &str, version: &str, kind: &str) -> ApiResource {
    let kind_lower = kind.to_ascii_lowercase();
    let plural = if kind_lower.ends_with('s') {
        format!("{kind_lower}es")
    } else {
        format!("{kind_lower}s")
    };
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), &plural)
}

fn dynamic(
    client: &Client,
    ns: &str,
    group: &str,
    version: &str,
    kind: &str,
) -> Api<DynamicObject> {
    Api::namespaced_with(client.clone(), ns, &resource(group, version, kind))
}

fn cond<'a>(obj: &'a Value, t: &str) -> Option<&'a Value> {
    obj["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == t)
}

/// The children of kind `kind` of the Gateway with `uid`, as JSON (deleted ones left out).
async fn children(api: &Api<DynamicObject>, uid: &str) -> Vec<Value> {
    let selector = format!("{}={uid}", gatewright::render::labels::GATEWAY_UID);
    api.list(&ListParams::default().labels(&selector))
        .await
        .unwrap()
        .into_iter()
        .filter(|o| o.metadata.deletion_timestamp.is_none())
        .map(|o| serde_json::to_value(o).unwrap())
        .collect()
}

/// Plays Istio's part, and only Istio's: writes the status Istio would write on the child
/// Gateways of the Gateway with `uid` whose current generation it has not programmed yet.
/// The Certificate and the DNSEndpoint are left to cert-manager and external-dns.
async fn program_istio_gateways(client: &Client, ns: &str, uid: &str) {
    let api = dynamic(client, ns, "gateway.networking.k8s.io", "v1", "Gateway");
    for mut g in children(&api, uid).await {
        let generation = g["metadata"]["generation"].clone();
        if cond(&g, "Programmed").is_some_and(|c| c["observedGeneration"] == generation) {
            continue;
        }
        g["apiVersion"] = json!("gateway.networking.k8s.io/v1");
        g["kind"] = json!("Gateway");
        let status = gatewright::simulate::ready_status(&g).unwrap();
        let name = g["metadata"]["name"].as_str().unwrap();
        // The object may change under us (a new generation): the next round catches up.
        let _ = api
            .patch_status(
                name,
                &PatchParams::default(),
                &Patch::Merge(&json!({ "status": status })),
            )
            .await;
    }
}

/// Starts a controller in-process whose namespace is `ns`.
async fn start_controller(
    client: &Client,
    ns: &str,
) -> std::sync::Arc<gatewright::controller::Runner> {
    gatewright::controller::start(
        client.clone(),
        gatewright::controller::Options {
            controller_namespace: ns.to_owned(),
            resync: Duration::from_secs(3600),
            workers: gatewright::controller::default_workers(),
            ..Default::default()
        },
    )
    .await
    .unwrap()
}

/// Applies the shipped class `shipped` under the name `class`, its certificate issuer set
/// by a GatewayClassConfig (the platform team's way) to the CA issuer of
/// tests/cluster/downstream; returns the class's text as applied.
async fn install_shipped(client: &Client, d: &Downstream, shipped: &str, class: &str) -> String {
    let text = common::shipped_class_yaml(shipped, class);
    apply_yaml(client, &text).await;
    apply_yaml(
        client,
        &format!(
            "apiVersion: gatewright.dev/v1alpha1\nkind: GatewayClassConfig\nmetadata: {{name: {class}, namespace: {ns}}}\nspec:\n  targetRef: {{group: gateway.networking.k8s.io, kind: GatewayClass, name: {class}}}\n  default:\n    certificate:\n      issuerRef: {{group: cert-manager.io, kind: {kind}, name: {ca}}}\n",
            ns = d.namespace,
            kind = d.ca_issuer.0,
            ca = d.ca_issuer.1,
        ),
    )
    .await;
    text
}

/// Deletes the route `gw` and the class `class` (its GatewayClassConfig, GatewayClass and
/// blueprint), and waits until the class is gone (once the controller let go of it).
async fn remove_route_and_class(client: &Client, ns: &str, gw: &str, class: &str) {
    let routes = dynamic(client, ns, "gateway.networking.k8s.io", "v1", "HTTPRoute");
    let _ = routes.delete(gw, &DeleteParams::default()).await;
    let _ = dynamic(
        client,
        ns,
        "gatewright.dev",
        "v1alpha1",
        "GatewayClassConfig",
    )
    .delete(class, &DeleteParams::default())
    .await;
    for (group, version, kind) in [
        ("gateway.networking.k8s.io", "v1", "GatewayClass"),
        ("gatewright.dev", "v1alpha1", "GatewayClassBlueprint"),
    ] {
        let _ = Api::<DynamicObject>::all_with(client.clone(), &resource(group, version, kind))
            .delete(class, &DeleteParams::default())
            .await;
    }
    common::wait_class_gone(client, class, T).await;
}

/// A Gateway `gw` of `class` in `ns` with one HTTPS listener for `*.<zone>` whose
/// certificate the class generates.
fn https_gateway_yaml(ns: &str, gw: &str, class: &str, zone: &str) -> String {
    format!(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {{name: {gw}, namespace: {ns}}}\nspec:\n  gatewayClassName: {class}\n  listeners:\n  - name: https\n    port: 443\n    protocol: HTTPS\n    hostname: \"*.{zone}\"\n    tls:\n      mode: Terminate\n      options: {{gatewright.dev/certificate: generated}}\n"
    )
}

/// An HTTPRoute named as its Gateway `gw`, for `hosts`.
fn route_yaml(ns: &str, gw: &str, hosts: &[&str]) -> String {
    format!(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {{name: {gw}, namespace: {ns}}}\nspec:\n  parentRefs: [{{name: {gw}}}]\n  hostnames: {hosts:?}\n  rules: [{{backendRefs: [{{name: web, port: 80}}]}}]\n"
    )
}

/// The `spec.secretName` of a Certificate.
fn secret_name(cert: &Value) -> String {
    cert["spec"]["secretName"].as_str().unwrap().to_owned()
}

/// The Secrets the HTTPS listeners of the Istio child of Gateway `gw` name.
async fn listener_secrets(client: &Client, ns: &str, gw: &str) -> Vec<String> {
    let api = dynamic(client, ns, "gateway.networking.k8s.io", "v1", "Gateway");
    let child = serde_json::to_value(api.get(&format!("{gw}-istio")).await.unwrap()).unwrap();
    child["spec"]["listeners"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|l| l["tls"]["certificateRefs"].as_array().into_iter().flatten())
        .filter_map(|r| r["name"].as_str().map(str::to_owned))
        .collect()
}

/// The Gateway's `Programmed` status, if it has one.
async fn programmed(client: &Client, ns: &str, name: &str) -> Option<String> {
    let api = dynamic(client, ns, "gateway.networking.k8s.io", "v1", "Gateway");
    let g = serde_json::to_value(api.get(name).await.unwrap()).unwrap();
    cond(&g, "Programmed").map(|c| c["status"].as_str().unwrap_or_default().to_owned())
}

/// Runs openssl with `args`, `input` on stdin; its stdout, or a panic with its stderr.
fn openssl(args: &[&str], input: &[u8]) -> String {
    let mut child = Command::new("openssl")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("openssl");
    child.stdin.take().unwrap().write_all(input).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The subjectAltName entries of a PEM certificate, sorted (`DNS:name`, `IP Address:...`).
fn sans(pem: &[u8]) -> Vec<String> {
    let text = openssl(&["x509", "-noout", "-ext", "subjectAltName"], pem);
    // "X509v3 Subject Alternative Name: \n    DNS:a, DNS:b"
    let mut out: Vec<String> = text
        .lines()
        .skip(1)
        .flat_map(|l| l.split(','))
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
        .collect();
    out.sort();
    out
}

/// The issued Secret of `cert`: its `tls.crt` and `ca.crt`, once cert-manager wrote them.
async fn issued(client: &Client, ns: &str, cert: &Value) -> (Vec<u8>, Vec<u8>) {
    let secret_name = cert["spec"]["secretName"].as_str().unwrap();
    let s = Api::<Secret>::namespaced(client.clone(), ns)
        .get(secret_name)
        .await
        .unwrap_or_else(|e| panic!("Secret {secret_name}: {e}"));
    let data = s.data.unwrap_or_default();
    (
        data.get("tls.crt").expect("tls.crt").0.clone(),
        data.get("ca.crt").expect("ca.crt").0.clone(),
    )
}

/// Checks that `pem` names exactly `hosts` and chains to `ca`.
fn assert_certificate(pem: &[u8], ca: &[u8], hosts: &[&str]) {
    let mut want: Vec<String> = hosts.iter().map(|h| format!("DNS:{h}")).collect();
    want.sort();
    assert_eq!(sans(pem), want, "subjectAltName of the issued certificate");
    let issuer = openssl(&["x509", "-noout", "-issuer"], pem);
    assert!(issuer.contains("gatewright test CA"), "{issuer}");
    let dir = tempfile::tempdir().unwrap();
    let ca_file = dir.path().join("ca.crt");
    std::fs::write(&ca_file, ca).unwrap();
    let verified = openssl(&["verify", "-CAfile", ca_file.to_str().unwrap()], pem);
    assert!(verified.trim_end().ends_with("OK"), "{verified}");
}

/// The lines of external-dns's log recording `change` (`CREATE`, `DELETE`) of the A record
/// of `host`, such as `msg="CREATE: web.example.com 300 IN A  192.0.2.10 []"`.
fn record_lines(log: &Path, change: &str, host: &str) -> Vec<String> {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let needle = format!("{change}: {host} ");
    text.lines()
        .filter(|l| l.contains(&needle) && l.contains(" IN A "))
        .map(str::to_owned)
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn real_cert_manager_and_external_dns() {
    let _one = ONE_AT_A_TIME.lock().await;
    let began = Instant::now();
    let d = downstream();
    let ns = d.namespace.as_str();
    let client = admin().await;
    let ctl = start_controller(&client, ns).await;

    // The shipped class under a name of this run, its issuer set by a GatewayClassConfig
    // (the platform team's way) to the CA issuer of tests/cluster/downstream.
    let class = unique_name("real");
    let shipped = install_shipped(&client, &d, "istio-certmanager-externaldns", &class).await;
    // DNS drained before what it points at goes, as the class ships: the DNS template
    // empties its DNSEndpoint at teardown and waits for external-dns to have read that
    // version (its readyWhen on observedGeneration), then 5 s for the sync to reach the zone.
    assert!(
        shipped
            .contains("    drain:\n      patch: {spec: {endpoints: []}}\n      settleSeconds: 5\n"),
        "the shipped DNS template drains"
    );

    let gw = unique_name("gw");
    let zone = &d.zone;
    let web = format!("{}.{zone}", unique_name("web"));
    let api_host = format!("{}.{zone}", unique_name("api"));
    apply_yaml(&client, &https_gateway_yaml(ns, &gw, &class, zone)).await;
    let route = |hosts: &[&str]| route_yaml(ns, &gw, hosts);
    apply_yaml(&client, &route(&[web.as_str(), api_host.as_str()])).await;
    let gateways = dynamic(&client, ns, "gateway.networking.k8s.io", "v1", "Gateway");
    let uid = gateways.get(&gw).await.unwrap().metadata.uid.unwrap();
    let certs = dynamic(&client, ns, "cert-manager.io", "v1", "Certificate");
    let endpoints = dynamic(&client, ns, "externaldns.k8s.io", "v1alpha1", "DNSEndpoint");
    let setup = began.elapsed();

    // cert-manager issues the Certificate and says Ready itself (no simulator touches it).
    let t = Instant::now();
    let cert = wait_for(
        "cert-manager to report the Certificate Ready",
        T,
        || async {
            program_istio_gateways(&client, ns, &uid).await;
            let certs = children(&certs, &uid).await;
            let [cert] = certs.as_slice() else {
                return None;
            };
            (cond(cert, "Ready")?["status"] == "True").then(|| cert.clone())
        },
    )
    .await;
    let issued_after = t.elapsed();
    let ready = cond(&cert, "Ready").unwrap();
    assert_eq!(ready["reason"], "Ready", "{cert}");
    assert_eq!(
        ready["message"], "Certificate is up to date and has not expired",
        "cert-manager's own condition: {cert}"
    );
    assert_eq!(ready["observedGeneration"], cert["metadata"]["generation"]);
    let mut hosts = vec![web.as_str(), api_host.as_str()];
    hosts.sort_unstable();
    assert_eq!(cert["spec"]["dnsNames"], json!(hosts));
    let (pem, ca) = issued(&client, ns, &cert).await;
    assert_certificate(&pem, &ca, &hosts);

    // external-dns reads the DNSEndpoint (status.observedGeneration is its write) and puts
    // one A record per hostname in its zone, pointing at the Istio gateway's address.
    let t = Instant::now();
    let ep = wait_for("external-dns to observe the DNSEndpoint", T, || async {
        program_istio_gateways(&client, ns, &uid).await;
        let eps = children(&endpoints, &uid).await;
        let [ep] = eps.as_slice() else {
            return None;
        };
        (ep["status"]["observedGeneration"] == ep["metadata"]["generation"]).then(|| ep.clone())
    })
    .await;
    assert_eq!(ep["spec"]["endpoints"].as_array().unwrap().len(), 2, "{ep}");
    wait_for("external-dns to log the A records", T, || async {
        hosts
            .iter()
            .all(|h| !record_lines(&d.external_dns_log, "CREATE", h).is_empty())
            .then_some(())
    })
    .await;
    let published_after = t.elapsed();
    for h in &hosts {
        let lines = record_lines(&d.external_dns_log, "CREATE", h);
        assert_eq!(lines.len(), 1, "one A record for {h}: {lines:?}");
        assert!(
            lines[0].contains(gatewright::simulate::SIMULATED_IP),
            "{}",
            lines[0]
        );
    }

    wait_for("the Gateway Programmed", T, || async {
        program_istio_gateways(&client, ns, &uid).await;
        (programmed(&client, ns, &gw).await.as_deref() == Some("True")).then_some(())
    })
    .await;
    let programmed_after = began.elapsed();

    // A hostname added: make-before-break with real issuance. A new Certificate is made
    // beside the old one; the Istio child's listener keeps the old Secret until
    // cert-manager has issued the new one, switches once, and the old Certificate goes.
    let t = Instant::now();
    let old = cert.clone();
    let news = format!("{}.{zone}", unique_name("news"));
    apply_yaml(
        &client,
        &route(&[web.as_str(), api_host.as_str(), news.as_str()]),
    )
    .await;
    let seen_secrets = std::sync::Mutex::new(vec![secret_name(&old)]);
    let new_cert = wait_for(
        "the listener on the new Certificate's Secret, the old Certificate gone",
        T,
        || async {
            program_istio_gateways(&client, ns, &uid).await;
            let now = listener_secrets(&client, ns, &gw).await;
            let [secret] = now.as_slice() else {
                panic!("one Secret on the listener: {now:?}")
            };
            let switched = seen_secrets.lock().unwrap().last() != Some(secret);
            if switched {
                // The listener names a Secret only once cert-manager has issued it.
                let s = Api::<Secret>::namespaced(client.clone(), ns)
                    .get(secret)
                    .await
                    .unwrap_or_else(|e| panic!("the listener names {secret}, not there: {e}"));
                assert!(
                    s.data.unwrap_or_default().contains_key("tls.crt"),
                    "the listener names {secret} before it holds a certificate"
                );
                seen_secrets.lock().unwrap().push(secret.clone());
            }
            let certs = children(&certs, &uid).await;
            let [c] = certs.as_slice() else {
                return None;
            };
            (c["metadata"]["name"] != old["metadata"]["name"]
                && &secret_name(c) == secret
                && cond(c, "Ready")?["status"] == "True")
                .then(|| c.clone())
        },
    )
    .await;
    assert_eq!(
        seen_secrets.into_inner().unwrap(),
        [secret_name(&old), secret_name(&new_cert)],
        "the listener switched once, from the old Secret to the new"
    );
    let mut hosts3 = vec![web.as_str(), api_host.as_str(), news.as_str()];
    hosts3.sort_unstable();
    let (pem, ca) = issued(&client, ns, &new_cert).await;
    assert_certificate(&pem, &ca, &hosts3);
    let rotated_after = t.elapsed();

    // The CA issuer made to fail (its CA Certificate and Secret removed): a further name
    // makes a Certificate cert-manager cannot issue. The old one stays in use, the
    // Gateway says why in cert-manager's own words, and nothing is deleted. With the CA
    // back, the replacement completes.
    let t = Instant::now();
    let issuers = dynamic(&client, ns, "cert-manager.io", "v1", "Issuer");
    let ca_cert = certs.get(&d.ca_issuer.1).await.unwrap();
    let ca_secret = ca_cert.data["spec"]["secretName"]
        .as_str()
        .unwrap()
        .to_owned();
    certs
        .delete(&d.ca_issuer.1, &DeleteParams::default())
        .await
        .unwrap();
    let _ = Api::<Secret>::namespaced(client.clone(), ns)
        .delete(&ca_secret, &DeleteParams::default())
        .await;
    wait_for("the CA Issuer not Ready", T, || async {
        let i = serde_json::to_value(issuers.get(&d.ca_issuer.1).await.unwrap()).unwrap();
        (cond(&i, "Ready")?["status"] == "False").then_some(())
    })
    .await;
    let extra = format!("{}.{zone}", unique_name("extra"));
    let hosts4: Vec<&str> = vec![
        web.as_str(),
        api_host.as_str(),
        news.as_str(),
        extra.as_str(),
    ];
    apply_yaml(&client, &route(&hosts4)).await;
    let (pending, rollout) = wait_for(
        "the Gateway to say why the new Certificate is not ready",
        T,
        || async {
            program_istio_gateways(&client, ns, &uid).await;
            let certs = children(&certs, &uid).await;
            let pending = certs
                .iter()
                .find(|c| c["metadata"]["name"] != new_cert["metadata"]["name"])?
                .clone();
            let g = serde_json::to_value(gateways.get(&gw).await.unwrap()).unwrap();
            let rollout = cond(&g, "gatewright.dev/Rollout")?.clone();
            let message = rollout["message"].as_str()?;
            (message.contains(pending["metadata"]["name"].as_str()?)
                && message.contains("Issuing certificate as Secret does not exist"))
            .then_some((pending, rollout))
        },
    )
    .await;
    assert_eq!(rollout["status"], "False", "{rollout}");
    assert_eq!(rollout["reason"], "Progressing", "{rollout}");
    // cert-manager has tried: the CertificateRequest waits on the broken issuer.
    let requests = dynamic(&client, ns, "cert-manager.io", "v1", "CertificateRequest");
    let request_pending = wait_for(
        "cert-manager's CertificateRequest for the new Certificate",
        T,
        || async {
            let all = requests.list(&ListParams::default()).await.unwrap();
            all.items
                .into_iter()
                .map(|r| serde_json::to_value(r).unwrap())
                .find(|r| {
                    r["metadata"]["annotations"]["cert-manager.io/certificate-name"]
                        == pending["metadata"]["name"]
                })
                .and_then(|r| {
                    let c = cond(&r, "Ready")?;
                    (c["reason"] == "Pending").then(|| c["message"].clone())
                })
        },
    )
    .await;
    assert!(
        request_pending.to_string().contains("issuer"),
        "{request_pending}"
    );
    // The old certificate keeps serving: the listener keeps its Secret, and the Gateway is
    // Programmed (once external-dns has the new name's record) while the new one waits.
    wait_for(
        "the Gateway Programmed while the replacement waits on the issuer",
        T,
        || async {
            program_istio_gateways(&client, ns, &uid).await;
            assert_eq!(
                listener_secrets(&client, ns, &gw).await,
                [secret_name(&new_cert)],
                "the listener keeps the issued certificate"
            );
            (programmed(&client, ns, &gw).await.as_deref() == Some("True")).then_some(())
        },
    )
    .await;
    assert!(
        certs
            .get_opt(new_cert["metadata"]["name"].as_str().unwrap())
            .await
            .unwrap()
            .is_some_and(|c| c.metadata.deletion_timestamp.is_none()),
        "the serving Certificate is not deleted"
    );
    let (pem, _) = issued(&client, ns, &new_cert).await;
    assert_eq!(
        sans(&pem).len(),
        3,
        "its Secret still holds the issued certificate"
    );
    let events: Api<k8s_openapi::api::events::v1::Event> = Api::namespaced(client.clone(), ns);
    let started: Vec<String> = events
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| {
            e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(gw.as_str())
                && e.reason.as_deref() == Some("RolloutStarted")
        })
        .filter_map(|e| e.note)
        .collect();
    let pending_version = pending["metadata"]["labels"][gatewright::render::labels::VERSION]
        .as_str()
        .unwrap();
    assert!(
        started.iter().any(|n| n.contains(pending_version)),
        "an Event for the replacement that waits on the issuer ({pending_version}): {started:?}"
    );
    // The CA back (a new CA key: cert-manager issues it again): the replacement completes.
    let mut again = ca_cert.data.clone();
    again["apiVersion"] = json!("cert-manager.io/v1");
    again["kind"] = json!("Certificate");
    again["metadata"] = json!({"name": d.ca_issuer.1, "namespace": ns});
    again.as_object_mut().unwrap().remove("status");
    apply_yaml(&client, &serde_json::to_string(&again).unwrap()).await;
    wait_for("the CA Certificate issued again", T, || async {
        let c = serde_json::to_value(certs.get(&d.ca_issuer.1).await.unwrap()).unwrap();
        (cond(&c, "Ready")?["status"] == "True").then_some(())
    })
    .await;
    // cert-manager retries a failed Issuer with a growing back-off; a change to the Issuer
    // makes it look again now (a platform team mending an issuer changes it too).
    issuers
        .patch(
            &d.ca_issuer.1,
            &PatchParams::default(),
            &Patch::Merge(
                json!({"metadata": {"annotations": {"gatewright.dev/mended": unique_name("at")}}}),
            ),
        )
        .await
        .unwrap();
    let cert = wait_for(
        "the replacement issued once the CA is back, the old one gone",
        T,
        || async {
            program_istio_gateways(&client, ns, &uid).await;
            let certs = children(&certs, &uid).await;
            let [c] = certs.as_slice() else {
                return None;
            };
            (c["metadata"]["name"] == pending["metadata"]["name"]
                && cond(c, "Ready")?["status"] == "True"
                && listener_secrets(&client, ns, &gw).await == [secret_name(c)])
            .then(|| c.clone())
        },
    )
    .await;
    let mut sorted4 = hosts4.clone();
    sorted4.sort_unstable();
    let (pem, ca) = issued(&client, ns, &cert).await;
    assert_certificate(&pem, &ca, &sorted4);
    let broken_issuer_after = t.elapsed();

    // One hostname leaves the route: external-dns deletes its record (the DNSEndpoint is
    // narrowed first, alone) before the route's own child, the Istio copy of the route,
    // stops serving the name; and the Certificate is replaced make-before-break by one
    // that cert-manager issues for the other name.
    let t = Instant::now();
    let copies = dynamic(&client, ns, "gateway.networking.k8s.io", "v1", "HTTPRoute");
    let serves = |c: &Value, h: &str| {
        c["spec"]["hostnames"]
            .as_array()
            .is_some_and(|a| a.iter().any(|x| x == h))
    };
    assert!(
        children(&copies, &uid)
            .await
            .iter()
            .any(|c| serves(c, &api_host)),
        "the Istio copy of the route serves {api_host} before the change"
    );
    apply_yaml(&client, &route(&[web.as_str()])).await;
    let record_gone_first = wait_for(
        "the Istio copy of the route to stop serving the removed hostname",
        T,
        || async {
            program_istio_gateways(&client, ns, &uid).await;
            // Read the log first: a DELETE logged now was logged before what is read next.
            let logged = !record_lines(&d.external_dns_log, "DELETE", &api_host).is_empty();
            let copies = children(&copies, &uid).await;
            (!copies.is_empty() && !copies.iter().any(|c| serves(c, &api_host))).then_some(logged)
        },
    )
    .await;
    let deleted_after = t.elapsed();
    assert!(
        record_gone_first,
        "the Istio copy of the route stopped serving {api_host} before external-dns deleted its record"
    );
    assert!(record_lines(&d.external_dns_log, "DELETE", &web).is_empty());
    let cert = wait_for(
        "the replacement Certificate Ready, the old one gone",
        T,
        || async {
            program_istio_gateways(&client, ns, &uid).await;
            let certs = children(&certs, &uid).await;
            let [cert] = certs.as_slice() else {
                return None;
            };
            (cert["spec"]["dnsNames"] == json!([web]) && cond(cert, "Ready")?["status"] == "True")
                .then(|| cert.clone())
        },
    )
    .await;
    let (pem, ca) = issued(&client, ns, &cert).await;
    assert_certificate(&pem, &ca, &[&web]);
    wait_for("the Gateway Programmed again", T, || async {
        program_istio_gateways(&client, ns, &uid).await;
        (programmed(&client, ns, &gw).await.as_deref() == Some("True")).then_some(())
    })
    .await;
    let replaced_after = t.elapsed();

    // Deleting the Gateway tears its children down, DNS first: external-dns has deleted
    // the last record (by its own log) before the Istio child Gateway starts going.
    let t = Instant::now();
    let istio = dynamic(&client, ns, "gateway.networking.k8s.io", "v1", "Gateway");
    let istio_name = format!("{gw}-istio");
    assert!(
        istio.get_opt(&istio_name).await.unwrap().is_some(),
        "the Istio child exists"
    );
    gateways
        .delete(&gw, &DeleteParams::default())
        .await
        .unwrap();
    let record_gone_first = wait_for("the Istio child Gateway to start going", T, || async {
        // Read the log first: a DELETE logged now was logged before what is read next.
        let logged = !record_lines(&d.external_dns_log, "DELETE", &web).is_empty();
        let child = istio.get_opt(&istio_name).await.unwrap();
        let going = child.is_none_or(|c| c.metadata.deletion_timestamp.is_some());
        going.then_some(logged)
    })
    .await;
    assert!(
        record_gone_first,
        "the Istio child Gateway started going before external-dns deleted {web}'s record"
    );
    wait_for("the Gateway gone", T, || async {
        gateways.get_opt(&gw).await.unwrap().is_none().then_some(())
    })
    .await;
    let torn_down_after = t.elapsed();
    remove_route_and_class(&client, ns, &gw, &class).await;
    ctl.shutdown(Duration::from_secs(10)).await;
    eprintln!(
        "real downstream: set up {setup:.1?}; Certificate issued {issued_after:.1?}; records \
         published {published_after:.1?}; Gateway Programmed {programmed_after:.1?} from the \
         start; a hostname added: rotated with real issuance in {rotated_after:.1?}; the CA \
         broken and back: replaced in {broken_issuer_after:.1?}; record deleted \
         and then the route's copy changed {deleted_after:.1?}, Certificate replaced {replaced_after:.1?} after the route \
         changed; torn down {torn_down_after:.1?}; total {:.1?}",
        began.elapsed()
    );
}

/// Plays the Contour's part on the Ingresses of the Gateway with `uid`: their load balancer
/// address (the status Contour would write).
async fn program_ingresses(client: &Client, ns: &str, uid: &str) {
    let api = dynamic(client, ns, "networking.k8s.io", "v1", "Ingress");
    for mut i in children(&api, uid).await {
        if i["status"]["loadBalancer"]["ingress"].is_array() {
            continue;
        }
        i["apiVersion"] = json!("networking.k8s.io/v1");
        i["kind"] = json!("Ingress");
        let status = gatewright::simulate::ready_status(&i).unwrap();
        let name = i["metadata"]["name"].as_str().unwrap();
        let _ = api
            .patch_status(
                name,
                &PatchParams::default(),
                &Patch::Merge(&json!({ "status": status })),
            )
            .await;
    }
}

/// Waits until cert-manager has issued the one Certificate of the contour-istio Gateway
/// `gw` (uid `uid`) for exactly `hosts`, its Ingress serves that Secret for them, and the
/// Gateway is Programmed (playing Istio's and Contour's part); the Certificate.
async fn contour_issued(client: &Client, ns: &str, uid: &str, gw: &str, hosts: &[String]) -> Value {
    let certs = dynamic(client, ns, "cert-manager.io", "v1", "Certificate");
    let ingresses = dynamic(client, ns, "networking.k8s.io", "v1", "Ingress");
    let gateways = dynamic(client, ns, "gateway.networking.k8s.io", "v1", "Gateway");
    wait_for(
        "cert-manager to issue the Certificate the Ingress serves, the Gateway Programmed",
        T,
        || async {
            program_istio_gateways(client, ns, uid).await;
            program_ingresses(client, ns, uid).await;
            let cs = children(&certs, uid).await;
            let [c] = cs.as_slice() else { return None };
            let ready = cond(c, "Ready")?;
            (ready["status"] == "True"
                && ready["observedGeneration"] == c["metadata"]["generation"]
                && c["spec"]["dnsNames"] == json!(hosts))
            .then_some(())?;
            let is = children(&ingresses, uid).await;
            let [i] = is.as_slice() else { return None };
            (i["spec"]["tls"][0]["secretName"] == c["spec"]["secretName"]
                && i["spec"]["tls"][0]["hosts"] == json!(hosts))
            .then_some(())?;
            let g = serde_json::to_value(gateways.get(gw).await.unwrap()).unwrap();
            (cond(&g, "Programmed")?["status"] == "True").then(|| c.clone())
        },
    )
    .await
}

/// The shipped class `contour-istio` with the real cert-manager: its Certificate (in
/// place, not make-before-break) is issued by cert-manager for exactly the route's
/// hostnames, the Ingress in front serves its Secret, and the Gateway is Programmed; a
/// hostname added is issued into the same Secret.
#[tokio::test(flavor = "multi_thread")]
async fn contour_istio_with_real_cert_manager() {
    let _one = ONE_AT_A_TIME.lock().await;
    let d = downstream();
    let ns = d.namespace.as_str();
    let client = admin().await;
    let ctl = start_controller(&client, ns).await;
    let class = unique_name("contour");
    install_shipped(&client, &d, "contour-istio", &class).await;
    let gw = unique_name("cgw");
    let zone = &d.zone;
    apply_yaml(&client, &https_gateway_yaml(ns, &gw, &class, zone)).await;
    let shop = format!("{}.{zone}", unique_name("shop"));
    let blog = format!("{}.{zone}", unique_name("blog"));
    let route = |hosts: &[&str]| route_yaml(ns, &gw, hosts);
    apply_yaml(&client, &route(&[shop.as_str()])).await;
    let gateways = dynamic(&client, ns, "gateway.networking.k8s.io", "v1", "Gateway");
    let uid = gateways.get(&gw).await.unwrap().metadata.uid.unwrap();
    let cert = contour_issued(&client, ns, &uid, &gw, std::slice::from_ref(&shop)).await;
    let (pem, ca) = issued(&client, ns, &cert).await;
    assert_certificate(&pem, &ca, &[&shop]);
    // A hostname added: the same Certificate (in place), issued again for both names.
    apply_yaml(&client, &route(&[shop.as_str(), blog.as_str()])).await;
    let mut both = vec![shop.clone(), blog.clone()];
    both.sort();
    let again = contour_issued(&client, ns, &uid, &gw, &both).await;
    assert_eq!(
        again["metadata"]["name"], cert["metadata"]["name"],
        "updated in place"
    );
    let want: Vec<&str> = both.iter().map(String::as_str).collect();
    let pem = wait_for(
        "the Secret to hold the certificate for both names",
        T,
        || async {
            let (pem, _) = issued(&client, ns, &again).await;
            (sans(&pem).len() == 2).then_some(pem)
        },
    )
    .await;
    assert_certificate(&pem, &ca, &want);

    gateways
        .delete(&gw, &DeleteParams::default())
        .await
        .unwrap();
    wait_for("the Gateway gone", T, || async {
        gateways.get_opt(&gw).await.unwrap().is_none().then_some(())
    })
    .await;
    remove_route_and_class(&client, ns, &gw, &class).await;
    ctl.shutdown(Duration::from_secs(10)).await;
}

/// The state dir of the harness's cluster: the kubeconfig's, when it is a cluster of
/// tests/cluster/up.
fn harness_dir() -> Option<PathBuf> {
    let kubeconfig = PathBuf::from(std::env::var_os("KUBECONFIG")?);
    let dir = kubeconfig.parent()?.to_owned();
    dir.join(".gatewright-cluster").exists().then_some(dir)
}

/// Restarts one component of the harness's cluster (tests/cluster/restart).
fn restart(args: &[&str]) {
    let dir = harness_dir().expect("the harness's cluster");
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/cluster/restart");
    let out = Command::new(script)
        .args(args)
        .env("GATEWRIGHT_CLUSTER_DIR", &dir)
        .output()
        .expect("run tests/cluster/restart");
    assert!(
        out.status.success(),
        "restart {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The CertificateRequests cert-manager made for the Certificate `name` (its owner).
async fn requests_of(client: &Client, ns: &str, name: &str) -> usize {
    dynamic(client, ns, "cert-manager.io", "v1", "CertificateRequest")
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .iter()
        .filter(|r| {
            r.metadata
                .owner_references
                .iter()
                .flatten()
                .any(|o| o.kind == "Certificate" && o.name == name)
        })
        .count()
}

/// The API server killed right after a Gateway of the shipped class is created, then etcd
/// killed right after a hostname is added: gatewright, cert-manager and external-dns all
/// restart their watches, and the invariants of the fault tests hold with the real
/// controllers. Nothing is lost: the Certificate is issued for exactly the route's names and
/// every record is published. Nothing is duplicated: one Certificate per version, one
/// issuance each, one record per name. The listener only ever names an issued Secret.
#[tokio::test(flavor = "multi_thread")]
async fn real_controllers_through_api_server_and_etcd_restarts() {
    let _one = ONE_AT_A_TIME.lock().await;
    let began = Instant::now();
    let d = downstream();
    let ns = d.namespace.as_str();
    let client = admin().await;
    // Asked before anything is created: a cluster that cannot be restarted runs nothing.
    if harness_dir().is_none() {
        eprintln!("needs the local cluster harness (KUBECONFIG of tests/cluster/up): not run");
        return;
    }
    let ctl = start_controller(&client, ns).await;
    let class = unique_name("realf");
    install_shipped(&client, &d, "istio-certmanager-externaldns", &class).await;
    let gw = unique_name("gw");
    let zone = &d.zone;
    let web = format!("{}.{zone}", unique_name("web"));
    let api_host = format!("{}.{zone}", unique_name("api"));
    apply_yaml(&client, &https_gateway_yaml(ns, &gw, &class, zone)).await;
    let route = |hosts: &[&str]| route_yaml(ns, &gw, hosts);
    apply_yaml(&client, &route(&[web.as_str(), api_host.as_str()])).await;
    let gateways = dynamic(&client, ns, "gateway.networking.k8s.io", "v1", "Gateway");
    let uid = gateways.get(&gw).await.unwrap().metadata.uid.unwrap();
    let certs = dynamic(&client, ns, "cert-manager.io", "v1", "Certificate");

    // (a) kube-apiserver SIGKILLed in the cold convergence, down 2 s.
    let t = Instant::now();
    restart(&["--kill", "--down", "2", "kube-apiserver"]);
    let mut hosts = vec![web.as_str(), api_host.as_str()];
    hosts.sort_unstable();
    let cert = wait_for(
        "issued, published and Programmed after the API server restart",
        T,
        || async {
            program_istio_gateways(&client, ns, &uid).await;
            let certs = children(&certs, &uid).await;
            let [cert] = certs.as_slice() else {
                assert!(certs.len() < 2, "more than one Certificate: {certs:?}");
                return None;
            };
            (cond(cert, "Ready")?["status"] == "True"
                && hosts
                    .iter()
                    .all(|h| !record_lines(&d.external_dns_log, "CREATE", h).is_empty())
                && programmed(&client, ns, &gw).await.as_deref() == Some("True"))
            .then(|| cert.clone())
        },
    )
    .await;
    let cold = t.elapsed();
    assert_eq!(cert["spec"]["dnsNames"], json!(hosts));
    let (pem, ca) = issued(&client, ns, &cert).await;
    assert_certificate(&pem, &ca, &hosts);
    let name = cert["metadata"]["name"].as_str().unwrap().to_owned();
    assert_eq!(
        requests_of(&client, ns, &name).await,
        1,
        "issued once through the restart"
    );
    for h in &hosts {
        let lines = record_lines(&d.external_dns_log, "CREATE", h);
        assert_eq!(lines.len(), 1, "one A record for {h}: {lines:?}");
    }

    // (b) etcd SIGKILLed right after a hostname is added, down 2 s: the replacement is
    // issued once, the listener only ever names an issued Secret and switches to it, the
    // old Certificate goes.
    let t = Instant::now();
    let news = format!("{}.{zone}", unique_name("news"));
    apply_yaml(
        &client,
        &route(&[web.as_str(), api_host.as_str(), news.as_str()]),
    )
    .await;
    restart(&["--kill", "--down", "2", "etcd"]);
    let issued_secrets = std::sync::Mutex::new(vec![secret_name(&cert)]);
    let new_cert = wait_for("the replacement issued and switched to", T, || async {
        program_istio_gateways(&client, ns, &uid).await;
        let now = children(&certs, &uid).await;
        for c in &now {
            if cond(c, "Ready").is_some_and(|r| r["status"] == "True") {
                let s = secret_name(c);
                let mut seen = issued_secrets.lock().unwrap();
                if !seen.contains(&s) {
                    seen.push(s);
                }
            }
        }
        let listener = listener_secrets(&client, ns, &gw).await;
        let seen = issued_secrets.lock().unwrap().clone();
        assert!(
            listener.iter().all(|s| seen.contains(s)),
            "the listener names a Secret not issued yet: {listener:?} (issued: {seen:?})"
        );
        assert!(now.len() <= 2, "more than two Certificates: {now:?}");
        let [c] = now.as_slice() else { return None };
        (c["metadata"]["name"] != cert["metadata"]["name"]
            && cond(c, "Ready")?["status"] == "True"
            && listener == [secret_name(c)]
            && !record_lines(&d.external_dns_log, "CREATE", &news).is_empty())
        .then(|| c.clone())
    })
    .await;
    let rotated = t.elapsed();
    let mut hosts3 = vec![web.as_str(), api_host.as_str(), news.as_str()];
    hosts3.sort_unstable();
    let (pem, ca) = issued(&client, ns, &new_cert).await;
    assert_certificate(&pem, &ca, &hosts3);
    assert_eq!(
        requests_of(&client, ns, new_cert["metadata"]["name"].as_str().unwrap()).await,
        1,
        "the replacement issued once through the restart"
    );
    assert_eq!(
        record_lines(&d.external_dns_log, "CREATE", &news).len(),
        1,
        "one A record for {news}"
    );

    gateways
        .delete(&gw, &DeleteParams::default())
        .await
        .unwrap();
    wait_for("the Gateway gone", T, || async {
        gateways.get_opt(&gw).await.unwrap().is_none().then_some(())
    })
    .await;
    remove_route_and_class(&client, ns, &gw, &class).await;
    ctl.shutdown(Duration::from_secs(10)).await;
    eprintln!(
        "real downstream through restarts: converged {cold:.1?} after the API server's; \
         rotated {rotated:.1?} after etcd's; total {:.1?}",
        began.elapsed()
    );
}
