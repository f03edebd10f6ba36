//! The operator's commands on the live cluster (`gatewright status`, `trace`, `diff`), run
//! as the binary against the test cluster the controller of this binary reconciles: what
//! they print is what the controller did, and `diff` of what was applied is empty.

use std::process::Command;
use std::time::Duration;

use serde_json::Value;

use crate::common::{TestNamespace, admin, apply_yaml, controller, wait_for};
use crate::controller::{cond, configmap_class, gateway_json};

const T: Duration = Duration::from_secs(60);

/// Runs `gatewright ARGS` with the test's kubeconfig: (exit code, stdout, stderr).
pub(crate) fn gatewright(args: &[&str]) -> (i32, String, String) {
    gatewright_in(".", args)
}

fn gateway(ns: &str, class: &str, host: &str) -> String {
    format!(
        r#"apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {{name: gw, namespace: {ns}}}
spec:
  gatewayClassName: {class}
  listeners:
  - {{name: http, port: 80, protocol: HTTP, hostname: "*.example.com"}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: web, namespace: {ns}}}
spec:
  parentRefs: [{{name: gw}}]
  hostnames: [{host}]
  rules:
  - backendRefs: [{{name: web, port: 80}}]
---
apiVersion: v1
kind: Service
metadata: {{name: web, namespace: {ns}}}
spec:
  ports: [{{port: 80}}]
"#
    )
}

#[tokio::test]
async fn status_trace_and_diff_read_what_the_controller_did() {
    let client = admin().await;
    let _ctl = controller();
    let ns = TestNamespace::new(&client, "live").await;
    let class = format!("live-{}", ns.name);
    let class_yaml = configmap_class(&class);
    apply_yaml(&client, &class_yaml).await;
    let applied = gateway(&ns.name, &class, "web.example.com");
    apply_yaml(&client, &applied).await;
    wait_for("Programmed=True", T, || async {
        let g = gateway_json(&client, &ns.name).await;
        (cond(&g["status"]["conditions"], "Programmed")?["status"] == "True").then_some(())
    })
    .await;
    let gw = format!("{}/gw", ns.name);

    // status: one line, Programmed, every child ready, the route accepted.
    let (code, out, err) = gatewright(&["status", "gateway", &gw]);
    assert_eq!(code, 0, "{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 2, "{out}");
    assert!(lines[0].starts_with("NAMESPACE"), "{out}");
    let cols: Vec<&str> = lines[1].split_whitespace().collect();
    assert_eq!(
        &cols[..6],
        [ns.name.as_str(), "gw", class.as_str(), "True", "3/3", "1/1"],
        "{out}"
    );
    // -n scopes to a namespace; every Gateway of it is listed.
    let (code, out, _) = gatewright(&["status", "-n", &ns.name, "-o", "json"]);
    assert_eq!(code, 0);
    let rows: Value = serde_json::from_str(&out).expect("JSON");
    assert_eq!(rows.as_array().map(Vec::len), Some(1), "{out}");
    assert_eq!(rows[0]["programmed"], "True");

    // trace: the tree in dependency order, and the same as JSON.
    let (code, out, err) = gatewright(&["trace", "gateway", &gw]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.starts_with(&format!("Gateway {gw} (class {class})\n")),
        "{out}"
    );
    assert!(out.contains("├─ Programmed=True Programmed"), "{out}");
    assert!(
        out.contains(&format!("ConfigMap {}/", ns.name)) && out.contains("[datapath] Ready"),
        "{out}"
    );
    assert!(
        out.contains(&format!("└─ HTTPRoute {}/web", ns.name)),
        "{out}"
    );
    assert!(out.contains("[route] Ready"), "{out}");
    let (code, out, _) = gatewright(&[
        "trace",
        "httproute",
        &format!("{}/web", ns.name),
        "-o",
        "json",
    ]);
    assert_eq!(code, 0);
    let t: Value = serde_json::from_str(&out).expect("JSON");
    assert_eq!(t["children"].as_array().map(Vec::len), Some(2), "{out}");
    assert_eq!(t["routes"][0]["name"], "web");
    assert_eq!(
        cond(&t["routes"][0]["conditions"], "Accepted").unwrap()["status"],
        "True"
    );
    assert_eq!(t["routes"][0]["children"][0]["state"], "Ready", "{out}");

    // diff: what was applied changes nothing once the controller has converged (its last
    // route status write may still be on its way: asked until it has landed).
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("gw.yaml");
    std::fs::write(&file, &applied).unwrap();
    let f = file.to_str().unwrap().to_owned();
    wait_for("diff of what was applied to exit 0", T, || {
        let f = f.clone();
        async move {
            let (code, out, err) = gatewright(&["diff", "-f", &f]);
            if code != 0 {
                eprintln!("diff exit {code}:\n{out}{err}");
            }
            (code == 0 && out.is_empty()).then_some(())
        }
    })
    .await;
    // A new hostname: the route's child changes, and its status would be written for the
    // new generation; nothing is written by diff.
    std::fs::write(&file, gateway(&ns.name, &class, "shop.example.com")).unwrap();
    let (code, out, err) = gatewright(&["diff", "-f", &f]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(out.contains(&format!("Gateway {gw}:")), "{out}");
    assert!(out.contains("  ~ change ConfigMap"), "{out}");
    assert!(
        out.contains("-  hostnames: web.example.com")
            && out.contains("+  hostnames: shop.example.com"),
        "{out}"
    );
    assert!(
        out.contains(&format!("  ~ status of HTTPRoute {}/web", ns.name)),
        "{out}"
    );
    // A blueprint change (a platform team's pull request) shows on every Gateway it makes.
    let changed = class_yaml.replace(
        "hostnames: {{ hostnames.intersection",
        "seen: {{ hostnames.intersection",
    );
    let bp_file = dir.path().join("class.yaml");
    std::fs::write(&bp_file, &changed).unwrap();
    std::fs::write(&file, &applied).unwrap();
    let (code, out, err) = gatewright(&["diff", "-f", &f, "-f", bp_file.to_str().unwrap()]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(
        out.contains("[datapath]") && out.contains("+  seen: "),
        "{out}"
    );
    // Nothing was written: the live route still has its hostname.
    let (code, out, _) = gatewright(&["diff", "-f", &f]);
    assert_eq!((code, out.as_str()), (0, ""));

    // Read access alone is enough: a user bound to gatewright-viewer (which leaves Secrets
    // out) sees the same line, told that Secrets were not read; a user without it is told
    // what it may not list and which role grants it (exit 2).
    let root = env!("CARGO_MANIFEST_DIR");
    apply_yaml(
        &client,
        &std::fs::read_to_string(format!("{root}/config/rbac/viewer.yaml")).unwrap(),
    )
    .await;
    let viewer = format!("viewer-{}", ns.name);
    apply_yaml(
        &client,
        &format!(
            "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata: {{name: {viewer}}}\nroleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: gatewright-viewer}}\nsubjects: [{{apiGroup: rbac.authorization.k8s.io, kind: User, name: {viewer}}}]\n"
        ),
    )
    .await;
    // The aggregated role's rules are filled in by kube-controller-manager.
    let (out, err) = wait_for("the viewer's status", T, || {
        let viewer = viewer.clone();
        let gw = gw.clone();
        async move {
            let (code, out, err) = gatewright(&["status", "gateway", &gw, "--as", &viewer]);
            (code == 0).then_some((out, err))
        }
    })
    .await;
    let cols: Vec<&str> = out
        .lines()
        .nth(1)
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    assert_eq!(
        &cols[..6],
        [ns.name.as_str(), "gw", class.as_str(), "True", "3/3", "1/1"],
        "{out}"
    );
    assert!(err.contains("Secrets are not readable"), "{err}");
    let (code, _, err) = gatewright(&["status", "-A", "--as", &format!("nobody-{}", ns.name)]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("may not list") && err.contains("gatewright-viewer"),
        "{err}"
    );
    let bindings: kube::Api<k8s_openapi::api::rbac::v1::ClusterRoleBinding> =
        kube::Api::all(client.clone());
    let _ = bindings.delete(&viewer, &Default::default()).await;

    // A template error: trace names the template, its line and the cause (exit 3), and so
    // does diff.
    let broken = class_yaml.replace(
        "hostnames: {{ hostnames.intersection | join(\",\") | tojson }}",
        "hostnames: {{ values.nope.deeper }}",
    );
    assert_ne!(broken, class_yaml);
    apply_yaml(&client, &broken).await;
    let out = wait_for("trace to show the template error", T, || async {
        let (code, out, _) = gatewright(&["trace", "gateway", &gw]);
        (code == 3).then_some(out)
    })
    .await;
    assert!(out.contains("template datapath line "), "{out}");
    assert!(out.contains("undefined"), "{out}");
    let (code, _, err) = gatewright(&["diff", "-f", &f]);
    assert_eq!(code, 3, "{err}");
    assert!(
        err.contains("template datapath: line ") && err.contains("undefined"),
        "{err}"
    );

    // Unknown objects are errors on stderr with exit 2, not panics.
    let (code, _, err) = gatewright(&["trace", "gateway", &format!("{}/nope", ns.name)]);
    assert_eq!(code, 2);
    assert!(err.contains("not found"), "{err}");
    let (code, _, err) = gatewright(&["status", "gateway", &format!("{}/nope", ns.name)]);
    assert_eq!(code, 2);
    assert!(err.contains("nope"), "{err}");

    apply_yaml(&client, &class_yaml).await;
    ns.delete().await;
}

/// The `console cluster` examples of docs/cli.md, run against the test cluster with
/// docs/examples/hello.yaml applied (in the namespace `shop`, as the docs say).
#[tokio::test]
async fn the_live_examples_of_the_docs_hold() {
    let client = admin().await;
    let _ctl = controller();
    let root = env!("CARGO_MANIFEST_DIR");
    let docs = std::fs::read_to_string(format!("{root}/docs/cli.md")).unwrap();
    let examples: Vec<_> = crate::examples::examples(&docs)
        .into_iter()
        .filter(|e| e.tag == "cluster")
        .collect();
    assert!(
        ["status", "trace", "diff"]
            .iter()
            .all(|c| examples
                .iter()
                .any(|e| e.args.first().map(String::as_str) == Some(c))),
        "docs/cli.md shows status, trace and diff"
    );
    apply_yaml(
        &client,
        "apiVersion: v1\nkind: Namespace\nmetadata: {name: shop}\n",
    )
    .await;
    let hello = std::fs::read_to_string(format!("{root}/docs/examples/hello.yaml")).unwrap();
    apply_yaml(&client, &hello).await;
    let gateways: kube::Api<gateway_api::apis::standard::gateways::Gateway> =
        kube::Api::namespaced(client.clone(), "shop");
    wait_for("shop/web accepted", T, || async {
        let g = serde_json::to_value(gateways.get("web").await.ok()?).ok()?;
        (cond(&g["status"]["conditions"], "Accepted")?["status"] == "True").then_some(())
    })
    .await;
    for ex in &examples {
        // The controller's last status write may still be on its way: asked until the
        // output holds, and the last difference shown.
        let args: Vec<&str> = ex.args.iter().map(String::as_str).collect();
        wait_for(
            &format!("docs/cli.md:{} `{}`", ex.line, ex.command()),
            T,
            || async {
                let (code, out, err) = gatewright_in(root, &args);
                let ok = code == ex.exit
                    && crate::examples::matches(&ex.stdout, &out).is_ok()
                    && crate::examples::matches(&ex.stderr_text(), &err).is_ok();
                if !ok {
                    eprintln!(
                        "docs/cli.md:{}: exit {code} (want {})\n{}\n{}",
                        ex.line,
                        ex.exit,
                        crate::examples::matches(&ex.stdout, &out)
                            .err()
                            .unwrap_or_default(),
                        crate::examples::matches(&ex.stderr_text(), &err)
                            .err()
                            .unwrap_or_default()
                    );
                }
                ok.then_some(())
            },
        )
        .await;
    }
    let ns: kube::Api<k8s_openapi::api::core::v1::Namespace> = kube::Api::all(client.clone());
    let _ = ns.delete("shop", &Default::default()).await;
    let gc: kube::Api<gateway_api::apis::standard::gatewayclasses::GatewayClass> =
        kube::Api::all(client.clone());
    let _ = gc.delete("hello", &Default::default()).await;
}

/// [`gatewright`] from the directory `dir` (the docs' examples name files from the root).
fn gatewright_in(dir: &str, args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_gatewright"))
        .args(args)
        .current_dir(dir)
        .env("NO_COLOR", "1")
        .output()
        .expect("the gatewright binary runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}
