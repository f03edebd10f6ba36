//! `gatewright render` and `gatewright check` end to end, without a cluster: golden output
//! of every shipped GatewayClass, convergence with simulated downstream controllers, the
//! CRD drift check, and every kind of bad input.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code"
)]

use std::path::{Path, PathBuf};
use std::process::Command;

use gatewright::cli::{self, EXIT_INPUT, EXIT_OK, EXIT_TEMPLATE};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde_json::Value;

#[path = "render/groups.rs"]
mod groups;
#[path = "render/tenancy.rs"]
mod tenancy;
#[path = "render/upgrade.rs"]
mod upgrade;

const CLASSES: &[&str] = &[
    "istio-certmanager-externaldns",
    "traefik-certmanager-externaldns",
    "contour-istio",
    "aws-alb-crossplane",
];

/// The shipped class that places templates in member clusters (fleet mode): its example
/// needs ClusterProfiles, so the single-cluster tests over [`CLASSES`] leave it out;
/// `placement_renders_once_per_served_member_and_the_hub_record_lists_them_all` covers it.
const FLEET_CLASS: &str = "fleet-istio-certmanager-externaldns";

/// Every shipped class, single-cluster and fleet.
fn every_class() -> impl Iterator<Item = &'static str> {
    CLASSES.iter().copied().chain([FLEET_CLASS])
}

fn now() -> Time {
    Time("2026-01-01T00:00:00Z".parse().unwrap())
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Compares with a golden file; `UPDATE_GOLDEN=1` rewrites it.
fn golden(name: &str, actual: &str) {
    let path = root().join("tests/golden").join(name);
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(&path, actual).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(&path)
        .unwrap_or_else(|_| panic!("missing {}; run with UPDATE_GOLDEN=1", path.display()));
    assert!(
        expected == actual,
        "{} differs from the render; run with UPDATE_GOLDEN=1 and review the diff\n--- actual ---\n{actual}",
        path.display()
    );
}

fn docs(stdout: &str) -> Vec<Value> {
    gatewright::render::output::parse_documents(stdout).unwrap()
}

fn gateway_status(out: &[Value]) -> &Value {
    out.iter()
        .find(|d| {
            d["kind"] == "Gateway"
                && d.get("status").is_some()
                && d.get("spec").is_none()
                && d["metadata"]["name"] == "public"
        })
        .unwrap()
}

fn condition<'a>(status: &'a Value, type_: &str) -> &'a Value {
    status["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == type_)
        .unwrap()
}

#[test]
fn golden_render_of_every_shipped_class() {
    for class in CLASSES {
        let out = cli::render(
            &[root().join("examples").join(class)],
            "gatewright-system",
            &now(),
        );
        assert_eq!(out.code, EXIT_OK, "{class}: {:?}", out.stderr);
        golden(&format!("{class}.yaml"), &out.stdout);
        golden(&format!("{class}.stderr"), &(out.stderr.join("\n") + "\n"));
    }
}

/// Renders, lets the simulated controllers make every child ready, and renders again,
/// until nothing changes: the way the controller converges, event by event.
/// `render` of the class's example with `live` as the cluster's children: (documents out,
/// stderr).
fn render_with_live(class: &str, dir: &Path, live: &[Value]) -> (Vec<Value>, String) {
    let text: String = live
        .iter()
        .map(|c| format!("---\n{}", serde_saphyr::to_string(c).unwrap()))
        .collect();
    std::fs::write(dir.join("live.yaml"), text).unwrap();
    let out = cli::render(
        &[root().join("examples").join(class), dir.to_owned()],
        "gatewright-system",
        &now(),
    );
    assert_eq!(out.code, EXIT_OK, "{:?}", out.stderr);
    (docs(&out.stdout), out.stderr.join("\n"))
}

fn converge(class: &str, dir: &Path) -> (Vec<Value>, usize) {
    let live = dir.join("live.yaml");
    let mut previous = String::new();
    for round in 1..=10 {
        let out = cli::render(
            &[root().join("examples").join(class), dir.to_owned()],
            "gatewright-system",
            &now(),
        );
        assert_eq!(out.code, EXIT_OK, "{class} round {round}: {:?}", out.stderr);
        let all = docs(&out.stdout);
        let children: Vec<Value> = all
            .iter()
            .filter(|d| d["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "gatewright")
            .map(gatewright::simulate::as_ready)
            .collect();
        let text: String = children
            .iter()
            .map(|c| format!("---\n{}", serde_saphyr::to_string(c).unwrap()))
            .collect();
        if text == previous {
            return (all, round);
        }
        std::fs::write(&live, &text).unwrap();
        previous = text;
    }
    panic!("{class} did not converge in 10 rounds");
}

#[test]
fn every_shipped_class_converges_to_programmed_with_addresses() {
    for class in CLASSES {
        let dir = tempfile::tempdir().unwrap();
        let (out, rounds) = converge(class, dir.path());
        let status = &gateway_status(&out)["status"];
        let programmed = condition(status, "Programmed");
        assert_eq!(programmed["status"], "True", "{class}: {programmed}");
        assert!(
            !status["addresses"].as_array().unwrap().is_empty(),
            "{class}: no address"
        );
        assert!(
            rounds >= 2,
            "{class}: dependencies should take more than one round"
        );
        let stable: String = out
            .iter()
            .map(|d| format!("---\n{}", serde_saphyr::to_string(d).unwrap()))
            .collect();
        golden(&format!("{class}.converged.yaml"), &stable);
    }
}

#[test]
fn the_certificate_follows_the_routes() {
    let class = "istio-certmanager-externaldns";
    let dir = tempfile::tempdir().unwrap();
    let out = cli::render(
        &[root().join("examples").join(class)],
        "gatewright-system",
        &now(),
    );
    let cert = docs(&out.stdout)
        .into_iter()
        .find(|d| d["kind"] == "Certificate")
        .unwrap();
    // blog.example.org does not intersect *.example.com: never in the certificate.
    assert_eq!(
        cert["spec"]["dnsNames"],
        serde_json::json!(["blog.example.com", "shop.example.com"])
    );
    // Without the routes there is no hostname, so no certificate.
    std::fs::create_dir_all(dir.path().join("class")).unwrap();
    let out = cli::render(
        &[
            root().join("gatewayclasses").join(class),
            root().join("examples").join(class).join("gateway.yaml"),
        ],
        "gatewright-system",
        &now(),
    );
    assert_eq!(out.code, EXIT_OK, "{:?}", out.stderr);
    assert!(!docs(&out.stdout).iter().any(|d| d["kind"] == "Certificate"));
    let out = docs(&out.stdout);
    let status = &gateway_status(&out)["status"];
    assert!(
        status["listeners"]
            .as_array()
            .unwrap()
            .iter()
            .all(|l| l["attachedRoutes"] == 0)
    );
}

/// Before a route brings a precise hostname there is no certificate: the Istio classes'
/// child Gateway leaves out the HTTPS listener that would serve it (a terminating
/// listener without a certificate cannot serve) instead of rendering invalid YAML.
#[test]
fn without_a_certificate_the_child_gateway_leaves_out_the_listener_it_would_serve() {
    for class in ["istio-certmanager-externaldns", FLEET_CLASS] {
        let example = root().join("examples").join(class);
        // The example's Gateway (and namespace), without its routes.
        let dir = tempfile::tempdir().unwrap();
        let text = std::fs::read_to_string(example.join("gateway.yaml")).unwrap();
        let gateway: String = text
            .split("\n---")
            .filter(|d| !d.contains("kind: HTTPRoute"))
            .map(|d| format!("{d}\n---"))
            .collect();
        std::fs::write(dir.path().join("gateway.yaml"), gateway).unwrap();
        let mut paths = vec![example.join("class"), dir.path().to_owned()];
        if example.join("clusters.yaml").exists() {
            paths.push(example.join("clusters.yaml"));
        }
        let out = cli::render(&paths, "gatewright-system", &now());
        assert_eq!(out.code, EXIT_OK, "{class}: {:?}", out.stderr);
        let all = docs(&out.stdout);
        assert!(!all.iter().any(|d| d["kind"] == "Certificate"), "{class}");
        let children: Vec<&Value> = all
            .iter()
            .filter(|d| d["kind"] == "Gateway" && d["metadata"]["name"] == "public-istio")
            .collect();
        assert!(!children.is_empty(), "{class}: no child Gateway");
        for g in children {
            let listeners: Vec<&str> = g["spec"]["listeners"]
                .as_array()
                .unwrap()
                .iter()
                .map(|l| l["name"].as_str().unwrap())
                .collect();
            assert_eq!(listeners, ["http"], "{class}");
        }
    }
}

#[test]
fn crds_in_config_match_the_code() {
    let expected = gatewright::api::crds_yaml().unwrap();
    let path = root().join("config/crd/gatewright.dev.yaml");
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(&path, &expected).unwrap();
    }
    let actual = std::fs::read_to_string(&path).unwrap();
    assert!(
        actual == expected,
        "config/crd/gatewright.dev.yaml drifted from the code: run `gatewright crds > config/crd/gatewright.dev.yaml`"
    );
}

// ---- bad input -------------------------------------------------------------------

const CLASS: &str = r#"
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: test}
spec:
  controllerName: gatewright.dev/gateway-controller
  parametersRef: {group: gatewright.dev, kind: GatewayClassBlueprint, name: test}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: gw, namespace: team, uid: u-1, generation: 2}
spec:
  gatewayClassName: test
  listeners:
  - {name: http, port: 80, protocol: HTTP, hostname: "*.example.com"}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: r, namespace: team, uid: u-2, generation: 1}
spec:
  parentRefs: [{name: gw}]
  hostnames: [a.example.com]
"#;

fn blueprint(templates: &str) -> String {
    format!(
        "---\napiVersion: gatewright.dev/v1alpha1\nkind: GatewayClassBlueprint\nmetadata: {{name: test}}\nspec:\n  gatewayTemplates:\n{templates}"
    )
}

fn template(name: &str, body: &str) -> String {
    let indented: String = body.lines().map(|l| format!("      {l}\n")).collect();
    format!("  - name: {name}\n    template: |\n{indented}")
}

/// Runs the real binary over one file of `input`; returns (code, stdout, stderr).
fn run(cmd: &str, input: &str) -> (i32, String, String) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("in.yaml");
    std::fs::write(&file, input).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_gatewright"))
        .args([cmd, "-f"])
        .arg(&file)
        .args(if cmd == "render" {
            &["--now", "2026-01-01T00:00:00Z"][..]
        } else {
            &[][..]
        })
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

const CM: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ gateway.metadata.name ~ \"-cm\" }}\ndata:\n  hosts: {{ hostnames.union | join(\",\") }}\n";

#[test]
fn a_good_blueprint_renders_and_checks() {
    let input = format!("{CLASS}{}", blueprint(&template("cm", CM)));
    let (code, stdout, stderr) = run("render", &input);
    assert_eq!(code, EXIT_OK, "{stderr}");
    assert!(stdout.contains("hosts: a.example.com"), "{stdout}");
    let (code, stdout, _) = run("check", &input);
    assert_eq!(code, EXIT_OK);
    assert!(stdout.contains("ok: GatewayClassBlueprint test"));
}

#[test]
fn a_broken_template_names_template_and_line() {
    let input = format!(
        "{CLASS}{}{}",
        blueprint(&template("cm", CM)),
        &template("broken", "a: 1\nb: {{ gateway.metadata.name \n")[..]
    );
    for cmd in ["render", "check"] {
        let (code, _, stderr) = run(cmd, &input);
        assert_eq!(code, EXIT_TEMPLATE, "{cmd}: {stderr}");
        assert!(
            stderr.contains("template broken: line 2"),
            "{cmd}: {stderr}"
        );
        assert!(stderr.contains("syntax error"), "{cmd}: {stderr}");
    }
    // The Gateway's status says so too.
    let (_, stdout, _) = run("render", &input);
    let out = docs(&stdout);
    let status = &gateway_status_named(&out, "gw")["status"];
    assert_eq!(condition(status, "Accepted")["status"], "False");
    assert!(
        condition(status, "Accepted")["message"]
            .as_str()
            .unwrap()
            .contains("template broken: line 2")
    );
}

fn gateway_status_named<'a>(out: &'a [Value], name: &str) -> &'a Value {
    out.iter()
        .find(|d| {
            d["kind"] == "Gateway" && d.get("spec").is_none() && d["metadata"]["name"] == name
        })
        .unwrap()
}

#[test]
fn unknown_variables_and_cycles_are_reported() {
    let unknown = format!(
        "{CLASS}{}",
        blueprint(&template(
            "cm",
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: {{ gatway.metadata.name }}}\n"
        ))
    );
    let (code, _, stderr) = run("check", &unknown);
    assert_eq!(code, EXIT_TEMPLATE);
    assert!(
        stderr.contains("template cm") && stderr.contains("unknown variable \"gatway\""),
        "{stderr}"
    );
    let cycle = format!(
        "{CLASS}{}{}",
        blueprint(&template("a", "x: {{ resources.b }}")),
        template("b", "x: {{ resources.a }}")
    );
    let (code, _, stderr) = run("check", &cycle);
    assert_eq!(code, EXIT_TEMPLATE);
    assert!(
        stderr.contains("dependency cycle") && stderr.contains("a -> b -> a"),
        "{stderr}"
    );
}

#[test]
fn runtime_errors_keep_what_rendered() {
    let input = format!(
        "{CLASS}{}{}",
        blueprint(&template("cm", CM)),
        template("bad", "x: {{ values.missing.deep }}")
    );
    let (code, stdout, stderr) = run("render", &input);
    assert_eq!(code, EXIT_TEMPLATE, "{stderr}");
    assert!(
        stdout.contains("name: gw-cm"),
        "what could be rendered is printed"
    );
    assert!(
        stderr.contains("template bad: line 1") && stderr.contains("undefined"),
        "{stderr}"
    );
    let out = docs(&stdout);
    let status = &gateway_status_named(&out, "gw")["status"];
    assert_eq!(condition(status, "Programmed")["reason"], "Invalid");
}

#[test]
fn a_template_that_never_ends_runs_out_of_fuel() {
    let body =
        "{% for a in range(100000) %}{% for b in range(100000) %}{% endfor %}{% endfor %}x: 1";
    let input = format!("{CLASS}{}", blueprint(&template("spin", body)));
    let started = std::time::Instant::now();
    let (code, _, stderr) = run("render", &input);
    assert_eq!(code, EXIT_TEMPLATE);
    assert!(stderr.contains("fuel"), "{stderr}");
    // Not a timing assertion on speed: only that it stopped instead of spinning for hours.
    assert!(started.elapsed() < std::time::Duration::from_secs(120));
    let recursion = "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}";
    let (code, _, stderr) = run(
        "render",
        &format!("{CLASS}{}", blueprint(&template("deep", recursion))),
    );
    assert_eq!(code, EXIT_TEMPLATE, "{stderr}");
}

#[test]
fn children_cannot_leave_the_namespace_or_be_cluster_scoped_unless_listed() {
    let other_ns =
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n  namespace: kube-system\n";
    let (code, _, stderr) = run(
        "render",
        &format!("{CLASS}{}", blueprint(&template("escape", other_ns))),
    );
    assert_eq!(code, EXIT_TEMPLATE);
    assert!(
        stderr.contains("parent's namespace \"team\", not \"kube-system\""),
        "{stderr}"
    );
    let cluster = "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: x\n  namespace: team\n";
    let listed = format!(
        "{CLASS}{}  clusterScopedKinds: [{{group: rbac.authorization.k8s.io, kind: ClusterRole}}]\n",
        blueprint(&template("cr", cluster))
    );
    let (code, _, stderr) = run("render", &listed);
    assert_eq!(code, EXIT_TEMPLATE);
    assert!(
        stderr.contains("lists ClusterRole as cluster-scoped"),
        "{stderr}"
    );
}

#[test]
fn user_values_cannot_inject_yaml() {
    let evil = "x\"\n---\napiVersion: v1\nkind: Secret\nmetadata: {name: stolen}\n";
    let input = format!(
        "{CLASS}{}---\napiVersion: gatewright.dev/v1alpha1\nkind: GatewayConfig\nmetadata: {{name: p, namespace: team}}\nspec:\n  targetRef: {{group: gateway.networking.k8s.io, kind: Gateway, name: gw}}\n  default: {{note: {}}}\n",
        blueprint(&template(
            "cm",
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\n  labels: {{ {\"app\": gateway.metadata.name} }}\ndata:\n  note: {{ values.note }}\n"
        )),
        serde_json::to_string(evil).unwrap()
    );
    let (code, stdout, stderr) = run("render", &input);
    assert_eq!(code, EXIT_OK, "{stderr}");
    let out = docs(&stdout);
    assert!(
        !out.iter().any(|d| d["kind"] == "Secret"),
        "an injected document appeared"
    );
    let cm = out.iter().find(|d| d["kind"] == "ConfigMap").unwrap();
    assert_eq!(cm["data"]["note"], evil);
    // A route hostname the API would refuse never reaches a child.
    let route = CLASS.replace(
        "hostnames: [a.example.com]",
        "hostnames: [\"a.example.com\\nkind: Secret\"]",
    );
    let (_, stdout, _) = run(
        "render",
        &format!("{route}{}", blueprint(&template("cm", CM))),
    );
    assert!(!stdout.contains("kind: Secret"));
}

#[test]
fn unreadable_input_exits_2() {
    let (code, _, stderr) = run("render", "apiVersion: v1\nkind: [unclosed\n");
    assert_eq!(code, EXIT_INPUT);
    assert!(stderr.contains("failed to parse"), "{stderr}");
    let (code, _, stderr) = run(
        "render",
        "apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {name: g}\nspec: {listeners: 3}\n",
    );
    assert_eq!(code, EXIT_INPUT);
    assert!(stderr.contains("Gateway \"g\""), "{stderr}");
    let out = Command::new(env!("CARGO_BIN_EXE_gatewright"))
        .args(["render", "-f", "/nonexistent/path"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(EXIT_INPUT));
}

#[test]
fn missing_class_or_blueprint() {
    let no_class = CLASS.replace("gatewayClassName: test", "gatewayClassName: nope");
    let (code, _, stderr) = run(
        "render",
        &format!("{no_class}{}", blueprint(&template("cm", CM))),
    );
    assert_eq!(code, EXIT_OK);
    assert!(stderr.contains("GatewayClass nope not found"), "{stderr}");
    let (code, stdout, stderr) = run("render", CLASS);
    assert_eq!(code, EXIT_TEMPLATE);
    assert!(
        stderr.contains("GatewayClassBlueprint test not found"),
        "{stderr}"
    );
    let out = docs(&stdout);
    let class = out.iter().find(|d| d["kind"] == "GatewayClass").unwrap();
    assert_eq!(
        condition(&class["status"], "Accepted")["reason"],
        "InvalidParameters"
    );
    let gw = &gateway_status_named(&out, "gw")["status"];
    assert_eq!(condition(gw, "Accepted")["status"], "False");
    assert_eq!(condition(gw, "Programmed")["status"], "False");
}

/// Make-before-break, as the planner sees it step by step: a new hostname makes a new
/// Certificate beside the old one; the child Gateway keeps the old Secret until the new
/// Certificate is Ready; the old Certificate is let go only once the child Gateway uses
/// the new one and is ready again.
#[test]
fn a_new_hostname_rotates_the_certificate_make_before_break() {
    let class = "istio-certmanager-externaldns";
    let dir = tempfile::tempdir().unwrap();
    let (converged, _) = converge(class, dir.path());
    let ours = |d: &Value| d["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "gatewright";
    let mut live: Vec<Value> = converged
        .iter()
        .filter(|d| ours(d))
        .map(gatewright::simulate::as_ready)
        .collect();
    let cert_of = |docs: &[Value]| -> Vec<Value> {
        docs.iter()
            .filter(|d| d["kind"] == "Certificate")
            .cloned()
            .collect()
    };
    let old = cert_of(&live).pop().unwrap();
    let old_name = old["metadata"]["name"].as_str().unwrap().to_owned();
    assert!(old_name.starts_with("public-tls-"), "{old_name}");
    assert_eq!(old["spec"]["secretName"], old_name.as_str());

    let extra = "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {name: news, namespace: shop, uid: 2f6b1d8e-0000-4000-8000-000000000009, generation: 1}\nspec:\n  parentRefs: [{name: public, namespace: infra}]\n  hostnames: [news.example.com]\n  rules: [{backendRefs: [{name: news, port: 80}]}]\n";
    std::fs::write(dir.path().join("extra.yaml"), extra).unwrap();
    let step = |live: &[Value]| render_with_live(class, dir.path(), live);
    let listener_secret = |docs: &[Value]| -> String {
        let gw = docs
            .iter()
            .find(|d| d["kind"] == "Gateway" && d["metadata"]["name"] == "public-istio")
            .unwrap();
        gw["spec"]["listeners"]
            .as_array()
            .unwrap()
            .iter()
            .find(|l| l["protocol"] == "HTTPS")
            .unwrap()["tls"]["certificateRefs"][0]["name"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    let rollout_reason = |docs: &[Value]| -> String {
        condition(
            &gateway_status_named(docs, "public")["status"],
            "gatewright.dev/Rollout",
        )["reason"]
            .as_str()
            .unwrap()
            .to_owned()
    };

    // 1. The route arrives: a new version is rendered beside the old, nothing switches.
    let (out, stderr) = step(&live);
    let new = cert_of(&out).pop().unwrap();
    let new_name = new["metadata"]["name"].as_str().unwrap().to_owned();
    assert_ne!(new_name, old_name);
    assert!(
        new["spec"]["dnsNames"]
            .to_string()
            .contains("news.example.com")
    );
    assert_eq!(listener_secret(&out), old_name);
    assert!(stderr.contains("(WaitingForNew)"), "{stderr}");
    assert!(!stderr.contains("would delete"), "{stderr}");
    assert_eq!(rollout_reason(&out), "Progressing");
    let programmed = condition(
        &gateway_status_named(&out, "public")["status"],
        "Programmed",
    );
    assert_eq!(
        programmed["status"], "True",
        "the old version keeps serving"
    );

    // 2. The new Certificate exists but is not issued yet: still the old Secret.
    let mut pending = new.clone();
    pending["metadata"]["generation"] = 1.into();
    pending["status"] = serde_json::json!({"conditions": [{"type": "Ready", "status": "False", "reason": "Issuing", "message": "issuing"}]});
    live.push(pending);
    let (out, stderr) = step(&live);
    assert_eq!(listener_secret(&out), old_name);
    assert!(
        stderr.contains(&format!("{new_name} (readyWhen")) && stderr.contains("keeps serving"),
        "{stderr}"
    );
    assert!(!stderr.contains("would delete"), "{stderr}");

    // 3. Issued: the child Gateway switches to the new Secret; the old stays for now.
    live.pop();
    live.push(gatewright::simulate::as_ready(&new));
    let (out, stderr) = step(&live);
    assert_eq!(listener_secret(&out), new_name);
    assert!(stderr.contains("(Switching)"), "{stderr}");
    assert!(!stderr.contains("would delete"), "{stderr}");

    // 4. Istio has not programmed the switched listener yet: the old one stays.
    let switched = out
        .iter()
        .find(|d| d["kind"] == "Gateway" && d["metadata"]["name"] == "public-istio")
        .unwrap()
        .clone();
    let i = live
        .iter()
        .position(|d| d["kind"] == "Gateway" && d["metadata"]["name"] == "public-istio")
        .unwrap();
    let mut taking = gatewright::simulate::as_ready(&switched);
    taking["metadata"]["generation"] = 2.into();
    live[i] = taking.clone();
    let (_, stderr) = step(&live);
    assert!(stderr.contains("(Switching)"), "{stderr}");
    assert!(!stderr.contains("would delete"), "{stderr}");

    // 5. Programmed for its current generation: now, and only now, the old one goes.
    for c in taking["status"]["conditions"].as_array_mut().unwrap() {
        c["observedGeneration"] = 2.into();
    }
    live[i] = taking;
    let (_, stderr) = step(&live);
    assert!(stderr.contains("(Finishing)"), "{stderr}");
    assert!(
        stderr.contains(&format!("would delete Certificate infra/{old_name}"))
            || stderr.contains(&format!(
                "would delete cert-manager.io/v1/Certificate infra/{old_name}"
            )),
        "{stderr}"
    );

    // 6. The old one is gone: complete.
    live.retain(|d| d["metadata"]["name"] != old_name.as_str());
    let (out, stderr) = step(&live);
    assert!(!stderr.contains("rollout:"), "{stderr}");
    assert_eq!(rollout_reason(&out), "Complete");
    assert_eq!(listener_secret(&out), new_name);
}

#[test]
fn a_rollout_policy_that_would_be_ignored_is_an_error() {
    let with = |rollout: &str| {
        let t = template("cm", CM).replacen(
            "    template: |",
            &format!("    rollout: {rollout}\n    template: |"),
            1,
        );
        format!("{CLASS}{}", blueprint(&t))
    };
    let (code, stdout, stderr) = run(
        "check",
        &with("{strategy: MakeBeforeBreak, fields: [data.hosts]}"),
    );
    assert_eq!(code, EXIT_OK, "{stdout}{stderr}");
    for (bad, says) in [
        (
            "{fields: [data.hosts]}",
            "only with strategy MakeBeforeBreak",
        ),
        (
            "{strategy: MakeBeforeBreak, fields: [data..hosts]}",
            "not a dotted path",
        ),
    ] {
        let (code, _, stderr) = run("check", &with(bad));
        assert_eq!(code, EXIT_TEMPLATE, "{bad}: {stderr}");
        assert!(
            stderr.contains("template cm") && stderr.contains(says),
            "{bad}: {stderr}"
        );
    }
}

/// A route's own template failing is said on the route's status entry, where the app
/// team looks, and goes away once fixed.
#[test]
fn a_failing_route_template_shows_on_the_route_status() {
    let route_tpl = |body: &str| {
        format!(
            "  routeTemplates:\n  - name: copy\n    template: |\n      apiVersion: v1\n      kind: ConfigMap\n      metadata:\n        name: {{{{ route.metadata.name ~ \"-copy\" }}}}\n      data:\n        x: {body}\n"
        )
    };
    let entry = |input: &str| -> Value {
        let (_, stdout, _) = run("render", input);
        let out = docs(&stdout);
        out.iter()
            .find(|d| d["kind"] == "HTTPRoute" && d.get("spec").is_none())
            .unwrap()["status"]["parents"][0]
            .clone()
    };
    let bad = format!(
        "{CLASS}{}{}",
        blueprint(&template("cm", CM)),
        route_tpl("{{ route.spec.missing.deep }}")
    );
    let (code, _, stderr) = run("render", &bad);
    assert_eq!(code, EXIT_TEMPLATE, "{stderr}");
    let e = entry(&bad);
    let rendered = condition(&e, "gatewright.dev/Rendered");
    assert_eq!(rendered["status"], "False", "{e}");
    assert_eq!(rendered["reason"], "TemplateError");
    assert!(
        rendered["message"]
            .as_str()
            .unwrap()
            .contains("template copy"),
        "{e}"
    );
    assert_eq!(
        condition(&e, "Accepted")["status"],
        "True",
        "the route is still accepted"
    );

    let good = format!(
        "{CLASS}{}{}",
        blueprint(&template("cm", CM)),
        route_tpl("\"ok\"")
    );
    let e = entry(&good);
    assert!(
        e["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .all(|c| c["type"] != "gatewright.dev/Rendered"),
        "{e}"
    );
}

/// A replacement that needs a sibling to become ready (ACM validates a certificate only
/// once its DNS records exist) sees it through `pending`: the aws class renders the new
/// certificate's validation records while the HTTPS listener still uses the old ARN.
#[test]
fn a_pending_replacement_gets_its_validation_records_before_the_switch() {
    let class = "aws-alb-crossplane";
    let dir = tempfile::tempdir().unwrap();
    let (converged, _) = converge(class, dir.path());
    let mut live: Vec<Value> = converged
        .iter()
        .filter(|d| d["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "gatewright")
        .map(gatewright::simulate::as_ready)
        .collect();
    let of_kind = |docs: &[Value], kind: &str| -> Vec<Value> {
        docs.iter().filter(|d| d["kind"] == kind).cloned().collect()
    };
    let record_names = |docs: &[Value]| -> Vec<String> {
        let mut v: Vec<String> = of_kind(docs, "Record")
            .iter()
            .map(|r| {
                r["spec"]["forProvider"]["name"]
                    .as_str()
                    .unwrap()
                    .to_owned()
            })
            .collect();
        v.sort();
        v
    };
    let https_arn = |docs: &[Value]| -> String {
        of_kind(docs, "LBListener")
            .iter()
            .find(|l| l["spec"]["forProvider"]["port"] == 443)
            .unwrap()["spec"]["forProvider"]["certificateArn"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    let old = of_kind(&live, "Certificate").pop().unwrap();
    let old_arn = old["status"]["atProvider"]["arn"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(
        record_names(&live),
        [
            "_951623a26f8b3388.shop.example.com.",
            "_bd0054cb250b2bb6.blog.example.com."
        ],
        "one validation record per name of the serving certificate"
    );

    let extra = "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {name: news, namespace: shop, uid: 2f6b1d8e-0000-4000-8000-000000000009, generation: 1}\nspec:\n  parentRefs: [{name: public, namespace: infra}]\n  hostnames: [news.example.com]\n  rules: [{backendRefs: [{name: news, port: 80}]}]\n";
    std::fs::write(dir.path().join("extra.yaml"), extra).unwrap();
    let step = |live: &[Value]| render_with_live(class, dir.path(), live);

    // The new certificate is requested; ACM has not said what to validate yet.
    let (out, _) = step(&live);
    let new = of_kind(&out, "Certificate")
        .into_iter()
        .find(|c| c["metadata"]["name"] != old["metadata"]["name"])
        .unwrap();
    assert_eq!(https_arn(&out), old_arn);
    assert_eq!(record_names(&out).len(), 2);

    // ACM asks for the new names' records; the certificate is not issued without them.
    let mut waiting = gatewright::simulate::as_ready(&new);
    waiting["status"]["conditions"] = serde_json::json!([{"type": "Ready", "status": "False", "reason": "PendingValidation", "lastTransitionTime": "2026-01-01T00:00:00Z"}]);
    live.push(waiting);
    let (out, stderr) = step(&live);
    assert!(stderr.contains("(WaitingForNew)"), "{stderr}");
    assert_eq!(
        https_arn(&out),
        old_arn,
        "the listener keeps the old certificate"
    );
    let names = record_names(&out);
    assert!(
        names.iter().any(|n| n.ends_with(".news.example.com.")),
        "the pending certificate's validation record is rendered: {names:?}"
    );
    assert!(
        names.iter().any(|n| n.ends_with(".shop.example.com.")),
        "{names:?}"
    );

    // Issued: the listener switches to the new ARN.
    live.pop();
    live.push(gatewright::simulate::as_ready(&new));
    let (out, stderr) = step(&live);
    assert!(stderr.contains("(Switching)"), "{stderr}");
    assert_ne!(https_arn(&out), old_arn);
}

#[test]
fn pending_of_a_template_replaced_in_place_is_an_error() {
    let bp = blueprint(&format!(
        "{}{}",
        template(
            "cert",
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n"
        ),
        template(
            "reader",
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: r}\ndata: {n: \"{{ pending.cert | length }}\"}\n"
        )
    ));
    let (code, _, stderr) = run("check", &bp);
    assert_eq!(code, EXIT_TEMPLATE, "{stderr}");
    assert!(
        stderr.contains("reads pending.cert") && stderr.contains("MakeBeforeBreak"),
        "{stderr}"
    );
}

// ---- the five rules (safety first) ------------------------------------------------------

fn class_status<'a>(out: &'a [Value], name: &str) -> &'a Value {
    out.iter()
        .find(|d| d["kind"] == "GatewayClass" && d["metadata"]["name"] == name)
        .unwrap()
}

#[test]
fn a_cluster_scoped_kind_the_blueprint_does_not_list_is_refused() {
    let crb = "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata:\n  name: {{ gateway.metadata.name ~ \"-admin\" }}\nroleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: cluster-admin}\nsubjects: [{kind: ServiceAccount, name: default, namespace: team}]\n";
    let ns = "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {{ gateway.metadata.name ~ \"-ns\" }}\n";
    for (template_name, body, kind) in [("crb", crb, "ClusterRoleBinding"), ("ns", ns, "Namespace")]
    {
        let input = format!(
            "{CLASS}{}{}",
            blueprint(&template("cm", CM)),
            template(template_name, body)
        );
        for cmd in ["check", "render"] {
            let (code, stdout, stderr) = run(cmd, &input);
            assert_eq!(code, EXIT_TEMPLATE, "{cmd}: {stderr}");
            assert!(
                stderr.contains(&format!("template {template_name}: line 2"))
                    && stderr.contains(kind)
                    && stderr.contains("clusterScopedKinds"),
                "{cmd}: {stderr}"
            );
            assert!(
                !stdout.contains(&format!("kind: {kind}")),
                "{cmd}: {stdout}"
            );
        }
        // The class is not accepted, so no Gateway of it gets anything.
        let (_, stdout, _) = run("render", &input);
        let out = docs(&stdout);
        let class = &class_status(&out, "test")["status"];
        assert_eq!(condition(class, "Accepted")["status"], "False");
        assert_eq!(condition(class, "Accepted")["reason"], "InvalidParameters");
        assert!(!out.iter().any(|d| d["kind"] == "ConfigMap"));
    }
    // A kind the source does not name literally is judged when it renders: only that
    // template fails, the others still render.
    let dynamic = "apiVersion: {{ \"rbac.authorization.k8s.io/v1\" }}\nkind: {{ \"ClusterRoleBinding\" }}\nmetadata: {name: x}\nroleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: cluster-admin}\n";
    let input = format!(
        "{CLASS}{}{}",
        blueprint(&template("cm", CM)),
        template("sneaky", dynamic)
    );
    let (code, stdout, stderr) = run("render", &input);
    assert_eq!(code, EXIT_TEMPLATE, "{stderr}");
    assert!(
        stderr.contains("template sneaky") && stderr.contains("ClusterRoleBinding"),
        "{stderr}"
    );
    assert!(!stdout.contains("kind: ClusterRoleBinding"), "{stdout}");
    assert!(stdout.contains("name: gw-cm"), "{stdout}");
    // A custom kind is judged by its CRD when one is given; unknown, it is a warning.
    let widget = "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w}\n";
    let crd = |scope: &str| {
        format!(
            "---\napiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {{name: widgets.example.com}}\nspec:\n  group: example.com\n  names: {{kind: Widget, plural: widgets}}\n  scope: {scope}\n  versions: []\n"
        )
    };
    let base = format!("{CLASS}{}", blueprint(&template("w", widget)));
    let (code, _, stderr) = run("check", &format!("{base}{}", crd("Cluster")));
    assert_eq!(code, EXIT_TEMPLATE, "{stderr}");
    assert!(
        stderr.contains("Widget (example.com) is cluster-scoped"),
        "{stderr}"
    );
    let (code, stdout, stderr) = run("render", &format!("{base}{}", crd("Namespaced")));
    assert_eq!(code, EXIT_OK, "{stderr}");
    assert!(stdout.contains("kind: Widget"));
    for cmd in ["check", "render"] {
        let (code, _, stderr) = run(cmd, &base);
        assert_eq!(code, EXIT_OK, "{cmd}: {stderr}");
        assert!(
            stderr.contains("warning:")
                && stderr.contains("scope of kind Widget (example.com) is unknown"),
            "{cmd}: {stderr}"
        );
    }
}

const TWO_GATEWAYS: &str = r#"
---
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: test}
spec:
  controllerName: gatewright.dev/gateway-controller
  parametersRef: {group: gatewright.dev, kind: GatewayClassBlueprint, name: test}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: gw-b, namespace: team, uid: u-b, generation: 1, creationTimestamp: "2026-01-01T00:00:00Z"}
spec:
  gatewayClassName: test
  listeners:
  - {name: http, port: 80, protocol: HTTP}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: gw-a, namespace: team, uid: u-a, generation: 1, creationTimestamp: "2026-01-02T00:00:00Z"}
spec:
  gatewayClassName: test
  listeners:
  - {name: http, port: 80, protocol: HTTP}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: r, namespace: team, uid: u-r, generation: 1}
spec:
  parentRefs: [{name: gw-a}, {name: gw-b}]
"#;

#[test]
fn two_parents_never_share_a_child() {
    let fixed = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: shared}\ndata: {gw: {{ gateway.metadata.name }}}\n";
    let input = format!("{TWO_GATEWAYS}{}", blueprint(&template("fixed", fixed)));
    let (code, stdout, stderr) = run("render", &input);
    assert_eq!(code, EXIT_TEMPLATE, "{stderr}");
    let out = docs(&stdout);
    let shared: Vec<&Value> = out
        .iter()
        .filter(|d| d["kind"] == "ConfigMap" && d["metadata"]["name"] == "shared")
        .collect();
    // One object, kept by the older Gateway (gw-b, created first), not by name order.
    assert_eq!(shared.len(), 1, "{stdout}");
    assert_eq!(shared[0]["data"]["gw"], "gw-b");
    assert!(
        stderr.contains("Gateway team/gw-a")
            && stderr.contains("template fixed")
            && stderr.contains("ConfigMap team/shared is already held by Gateway team/gw-b"),
        "{stderr}"
    );
    let status = &gateway_status_named(&out, "gw-a")["status"];
    assert!(
        condition(status, "Programmed")["message"]
            .as_str()
            .unwrap()
            .contains("already held by Gateway team/gw-b")
    );
    // A live object decides: gw-a already holds it (it is the older claim no more).
    let live = "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: shared\n  namespace: team\n  labels: {app.kubernetes.io/managed-by: gatewright, gatewright.dev/parent-uid: u-a, gatewright.dev/gateway-uid: u-a, gateway.networking.k8s.io/gateway-name: gw-a}\n  ownerReferences: [{apiVersion: gateway.networking.k8s.io/v1, kind: Gateway, name: gw-a, uid: u-a, controller: true}]\ndata: {gw: gw-a}\n";
    let (code, stdout, stderr) = run("render", &format!("{input}{live}"));
    assert_eq!(code, EXIT_TEMPLATE, "{stderr}");
    assert!(
        stderr.contains("Gateway team/gw-b")
            && stderr.contains("already held by Gateway team/gw-a"),
        "{stderr}"
    );
    let shared = docs(&stdout)
        .into_iter()
        .filter(|d| d["kind"] == "ConfigMap" && d["metadata"]["name"] == "shared")
        .count();
    assert_eq!(shared, 1);
    // A route attached to two Gateways whose template does not name the Gateway.
    let route_tpl = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ route.metadata.name ~ \"-copy\" }}\n";
    let input = format!(
        "{TWO_GATEWAYS}{}  routeTemplates:\n{}",
        blueprint(&template("cm", CM.replace("-cm", "-own").as_str())),
        template("copy", route_tpl)
    );
    let (code, stdout, stderr) = run("render", &input);
    assert_eq!(code, EXIT_TEMPLATE, "{stderr}");
    let copies = docs(&stdout)
        .into_iter()
        .filter(|d| d["metadata"]["name"] == "r-copy")
        .count();
    assert_eq!(copies, 1, "{stdout}");
    assert!(
        stderr.contains("template copy")
            && stderr.contains("already held by HTTPRoute team/r (under Gateway team/gw-b)"),
        "{stderr}"
    );
    // Names unique to their parent: no conflict at all.
    let input = format!("{TWO_GATEWAYS}{}", blueprint(&template("cm", CM)));
    let (code, _, stderr) = run("render", &input);
    assert_eq!(code, EXIT_OK, "{stderr}");
}

#[test]
fn an_unsupported_protocol_takes_only_its_listener_down() {
    let input = format!(
        "{}{}",
        CLASS.replace(
            "  - {name: http, port: 80, protocol: HTTP, hostname: \"*.example.com\"}",
            "  - {name: web, port: 80, protocol: HTTP}\n  - {name: raw, port: 80, protocol: TCP}\n  - {name: web2, port: 81, protocol: HTTP}\n  - {name: dns, port: 81, protocol: UDP}"
        ),
        blueprint(&template("cm", CM))
    );
    let (code, stdout, stderr) = run("render", &input);
    assert_eq!(code, EXIT_OK, "{stderr}");
    let out = docs(&stdout);
    let status = &gateway_status_named(&out, "gw")["status"];
    assert_eq!(condition(status, "Accepted")["status"], "True");
    assert_eq!(condition(status, "Accepted")["reason"], "ListenersNotValid");
    for l in status["listeners"].as_array().unwrap() {
        let accepted = condition(l, "Accepted");
        let conflicted = l["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["type"] == "Conflicted");
        assert!(conflicted.is_none(), "{l}");
        match l["name"].as_str().unwrap() {
            "raw" | "dns" => {
                assert_eq!(accepted["reason"], "UnsupportedProtocol", "{l}");
                assert_eq!(accepted["status"], "False");
            }
            _ => {
                assert_eq!(accepted["status"], "True", "{l}");
                assert_eq!(l["attachedRoutes"], 1, "{l}");
            }
        }
    }
    let route = out
        .iter()
        .find(|d| d["kind"] == "HTTPRoute" && d["metadata"]["name"] == "r")
        .unwrap();
    assert_eq!(
        condition(&route["status"]["parents"][0], "Accepted")["status"],
        "True"
    );
}

#[test]
fn a_policy_applies_only_to_the_group_kind_and_name_it_targets() {
    let tpl = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\ndata:\n  note: {{ values.note | default(\"none\") }}\n";
    let policy = |group: &str| {
        format!(
            "---\napiVersion: gatewright.dev/v1alpha1\nkind: GatewayConfig\nmetadata: {{name: p, namespace: team}}\nspec:\n  targetRef: {{group: {group}, kind: Gateway, name: gw}}\n  default: {{note: applied}}\n"
        )
    };
    let note = |group: &str| {
        let input = format!(
            "{CLASS}{}{}",
            blueprint(&template("cm", tpl)),
            policy(group)
        );
        let (code, stdout, stderr) = run("render", &input);
        assert_eq!(code, EXIT_OK, "{stderr}");
        docs(&stdout)
            .into_iter()
            .find(|d| d["kind"] == "ConfigMap")
            .unwrap()["data"]["note"]
            .clone()
    };
    assert_eq!(note("gateway.networking.k8s.io"), "applied");
    assert_eq!(note("example.com"), "none");
    assert_eq!(note("\"\""), "none");
}

#[test]
fn certificates_list_precise_hostnames_only() {
    let class = "istio-certmanager-externaldns";
    let dir = tempfile::tempdir().unwrap();
    // A route without hostnames on the HTTPS listener *.example.com, beside
    // shop.example.com: the certificate must not become *.example.com.
    std::fs::write(
        dir.path().join("catch-all.yaml"),
        "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {name: catch-all, namespace: shop, uid: u-catch, generation: 1}\nspec:\n  parentRefs: [{name: public, namespace: infra, sectionName: https}]\n  rules: [{backendRefs: [{name: storefront-primary, port: 8080}]}]\n",
    )
    .unwrap();
    let out = cli::render(
        &[root().join("examples").join(class), dir.path().to_owned()],
        "gatewright-system",
        &now(),
    );
    assert_eq!(out.code, EXIT_OK, "{:?}", out.stderr);
    let out = docs(&out.stdout);
    let cert = out.iter().find(|d| d["kind"] == "Certificate").unwrap();
    assert_eq!(
        cert["spec"]["dnsNames"],
        serde_json::json!(["blog.example.com", "shop.example.com"])
    );
    // The route that has only the wildcard is told so where its team looks.
    let route = out
        .iter()
        .find(|d| {
            d["kind"] == "HTTPRoute"
                && d["metadata"]["name"] == "catch-all"
                && d.get("spec").is_none()
        })
        .unwrap();
    let entry = &route["status"]["parents"][0];
    assert_eq!(condition(entry, "Accepted")["status"], "True");
    let w = condition(entry, "gatewright.dev/WildcardOnly");
    assert_eq!(
        (w["status"].as_str(), w["reason"].as_str()),
        (Some("True"), Some("NoPreciseHostname"))
    );
    assert!(
        w["message"].as_str().unwrap().contains("*.example.com"),
        "{w}"
    );
    // A route with a precise name has no such condition.
    let shop = out
        .iter()
        .find(|d| {
            d["kind"] == "HTTPRoute"
                && d["metadata"]["name"] == "storefront"
                && d.get("spec").is_none()
        })
        .unwrap();
    assert!(
        !shop["status"]["parents"][0]["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["type"] == "gatewright.dev/WildcardOnly")
    );
}

/// Gateway API v1.6 conformance `GatewayInvalidParametersRef`: a Gateway whose
/// `spec.infrastructure.parametersRef` names a kind we do not support, or a GatewayConfig
/// that does not exist, is `Accepted=False/InvalidParameters` (and not Programmed), with a
/// message naming the reference, and nothing of it is rendered.
/// A self-signed certificate and its key (those of the unit tests), base64 as a Secret holds them.
const TLS_CRT: &str = "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSUJoRENDQVNtZ0F3SUJBZ0lVUThtdFMrSjJEd2dXNmFzVnZCQkFqcm5qQTNVd0NnWUlLb1pJemowRUF3SXcKRmpFVU1CSUdBMVVFQXd3TFpYaGhiWEJzWlM1amIyMHdJQmNOTWpZeE1USXlNVFV4TmpJMFdoZ1BNakV5TmpFdwpNamt4TlRFMk1qUmFNQll4RkRBU0JnTlZCQU1NQzJWNFlXMXdiR1V1WTI5dE1Ga3dFd1lIS29aSXpqMENBUVlJCktvWkl6ajBEQVFjRFFnQUU0MmJXRDl6b2lqem1xVUlHSmo0YTh1Q1UxaXZOZ085TFlZdEpUMTNLWW1VVU5OVW0KTWh5TWFtNVVPVTVkQWs2TmhoL2orY0h0RDU5MitmS3J1UE0rT0tOVE1GRXdIUVlEVlIwT0JCWUVGTEhuVDVxMgoyZW13ODkzbG94dksyT2VyaWc1bE1COEdBMVVkSXdRWU1CYUFGTEhuVDVxMjJlbXc4OTNsb3h2SzJPZXJpZzVsCk1BOEdBMVVkRXdFQi93UUZNQU1CQWY4d0NnWUlLb1pJemowRUF3SURTUUF3UmdJaEFKK0xDUk5sMjcySXFNMkQKeFpuUzdWNlRxV3k2MXhOSVA1SmU5cWRYTEcvcEFpRUE3U1NpblZrRi9QdHVYWHFRY1VZZS9tYkNTN0tzb3ZhNwpUQUlyemlXQnB5TT0KLS0tLS1FTkQgQ0VSVElGSUNBVEUtLS0tLQo=";
const TLS_KEY: &str = "LS0tLS1CRUdJTiBQUklWQVRFIEtFWS0tLS0tCk1JR0hBZ0VBTUJNR0J5cUdTTTQ5QWdFR0NDcUdTTTQ5QXdFSEJHMHdhd0lCQVFRZ3k1VzlhekVJOWE5R0ZkSGoKbk9KNk53Q0Zvcjl6cEJUU05Ua2g3L3hYanIyaFJBTkNBQVRqWnRZUDNPaUtQT2FwUWdZbVBocnk0SlRXSzgyQQo3MHRoaTBsUFhjcGlaUlEwMVNZeUhJeHFibFE1VGwwQ1RvMkdIK1A1d2UwUG4zYjU4cXU0OHo0NAotLS0tLUVORCBQUklWQVRFIEtFWS0tLS0tCg==";

/// Certificates are ordered only for the names a listener serves with a generated
/// certificate (`hostnames.tls`): an HTTP-only Gateway orders none, whatever its routes;
/// an HTTPS listener without certificateRefs of its own brings one, for exactly the
/// route's names; one naming its own Secret brings none.
#[test]
fn a_certificate_only_for_names_served_over_tls_with_a_generated_certificate() {
    let route = "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {name: shop, namespace: infra, uid: u-shop, generation: 1}\nspec:\n  parentRefs: [{name: public}]\n  hostnames: [shop.example.com]\n  rules: [{backendRefs: [{name: shop, port: 8080}]}]\n";
    let gateway = |class: &str, https: &str| {
        format!(
            "apiVersion: v1\nkind: Namespace\nmetadata: {{name: infra}}\n---\napiVersion: v1\nkind: Secret\nmetadata: {{name: own, namespace: infra}}\ntype: kubernetes.io/tls\ndata: {{tls.crt: {TLS_CRT}, tls.key: {TLS_KEY}}}\n---\napiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {{name: public, namespace: infra, uid: u-public, generation: 1}}\nspec:\n  gatewayClassName: {class}\n  listeners:\n  - {{name: http, port: 80, protocol: HTTP, hostname: \"*.example.com\"}}\n{https}"
        )
    };
    let generated = "  - {name: https, port: 443, protocol: HTTPS, hostname: \"*.example.com\", tls: {options: {gatewright.dev/certificate: generated}}}\n";
    let own = "  - {name: https, port: 443, protocol: HTTPS, hostname: \"*.example.com\", tls: {certificateRefs: [{name: own}]}}\n";
    let certificates = |class: &str, https: &str| -> Vec<Value> {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("gateway.yaml"), gateway(class, https)).unwrap();
        std::fs::write(dir.path().join("route.yaml"), route).unwrap();
        let out = cli::render(
            &[
                root().join("gatewayclasses").join(class),
                dir.path().to_owned(),
            ],
            "gatewright-system",
            &now(),
        );
        assert_eq!(out.code, EXIT_OK, "{class}: {:?}", out.stderr);
        let out = docs(&out.stdout);
        let entry = &route_status(&out, "HTTPRoute", "shop")["status"]["parents"][0];
        assert_eq!(condition(entry, "Accepted")["status"], "True", "{class}");
        // Every listener valid (the one naming its own Secret too).
        for l in gateway_status(&out)["status"]["listeners"]
            .as_array()
            .unwrap()
        {
            assert_eq!(
                condition(l, "ResolvedRefs")["status"],
                "True",
                "{class}: {l}"
            );
        }
        out.into_iter()
            .filter(|d| d["kind"] == "Certificate")
            .map(|c| {
                // cert-manager's dnsNames, ACM's subject alternative names.
                let s = &c["spec"];
                s.get("dnsNames")
                    .unwrap_or(&s["forProvider"]["subjectAlternativeNames"])
                    .clone()
            })
            .collect()
    };
    for class in CLASSES {
        // HTTP only: the route's name is served, but over no TLS listener.
        assert_eq!(certificates(class, ""), Vec::<Value>::new(), "{class}");
        // An HTTPS listener with a generated certificate: exactly the route's names.
        assert_eq!(
            certificates(class, generated),
            [serde_json::json!(["shop.example.com"])],
            "{class}"
        );
    }
    // Its own Secret (an HTTPS listener that names one): nothing ordered.
    assert_eq!(
        certificates("istio-certmanager-externaldns", own),
        Vec::<Value>::new()
    );
    // Nor is a route matching it only through its wildcard told that no certificate names
    // it: its own certificate serves it.
    let dir = tempfile::tempdir().unwrap();
    let class = "istio-certmanager-externaldns";
    std::fs::write(dir.path().join("gateway.yaml"), gateway(class, own)).unwrap();
    std::fs::write(
        dir.path().join("route.yaml"),
        route.replace("  hostnames: [shop.example.com]\n", ""),
    )
    .unwrap();
    let out = cli::render(
        &[
            root().join("gatewayclasses").join(class),
            dir.path().to_owned(),
        ],
        "gatewright-system",
        &now(),
    );
    assert_eq!(out.code, EXIT_OK, "{:?}", out.stderr);
    let out = docs(&out.stdout);
    let entry = &route_status(&out, "HTTPRoute", "shop")["status"]["parents"][0];
    assert_eq!(condition(entry, "Accepted")["status"], "True");
    assert!(
        !entry["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["type"] == "gatewright.dev/WildcardOnly"),
        "{entry}"
    );
}

#[test]
fn a_bad_infrastructure_parameters_ref_is_invalid_parameters() {
    let with_ref = |group: &str, kind: &str, name: &str| {
        CLASS.replace(
            "  gatewayClassName: test\n",
            &format!(
                "  gatewayClassName: test\n  infrastructure:\n    parametersRef: {{group: {group}, kind: {kind}, name: {name}}}\n"
            ),
        )
    };
    for (gateway, says) in [
        (
            with_ref("invalid.io", "InvalidParameters", "invalid"),
            "not invalid.io/InvalidParameters",
        ),
        (
            with_ref("gatewright.dev", "GatewayConfig", "absent"),
            "GatewayConfig team/absent not found",
        ),
    ] {
        let (code, stdout, stderr) = run(
            "render",
            &format!("{gateway}{}", blueprint(&template("cm", CM))),
        );
        assert_eq!(code, EXIT_OK, "{stderr}");
        let out = docs(&stdout);
        let gw = &gateway_status_named(&out, "gw")["status"];
        let accepted = condition(gw, "Accepted");
        assert_eq!(accepted["status"], "False", "{accepted}");
        assert_eq!(accepted["reason"], "InvalidParameters", "{accepted}");
        assert!(
            accepted["message"]
                .as_str()
                .is_some_and(|m| m.contains(says)),
            "{accepted}"
        );
        assert_eq!(accepted["observedGeneration"], 2, "{accepted}");
        assert_eq!(condition(gw, "Programmed")["status"], "False");
        assert!(
            !out.iter().any(|d| d["kind"] == "ConfigMap"),
            "a Gateway that is not accepted renders nothing"
        );
    }
}

/// The Mermaid blocks that README files and the pages of `docs/` say `gatewright graph`
/// drew: (file, the class folder named in the marker, the block's text).
fn graph_blocks() -> Vec<(PathBuf, String, String)> {
    const MARKER: &str = "<!-- gatewright graph -f gatewayclasses/";
    let mut files = vec![root().join("README.md")];
    let mut pages: Vec<PathBuf> = std::fs::read_dir(root().join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    pages.sort();
    files.extend(pages);
    files.extend(every_class().map(|c| root().join("gatewayclasses").join(c).join("README.md")));
    let mut out = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        let mut rest = text.as_str();
        while let Some(i) = rest.find(MARKER) {
            rest = &rest[i + MARKER.len()..];
            let class = rest.split([' ', '\n']).next().unwrap().to_owned();
            let block = rest
                .split_once("```mermaid\n")
                .and_then(|(_, b)| b.split_once("```"))
                .map(|(b, _)| b.to_owned())
                .unwrap_or_else(|| panic!("{}: no mermaid block after the marker", file.display()));
            out.push((file.clone(), class, block));
        }
    }
    out
}

/// Each shipped class's README shows the rollout policy its blueprint ships with, as the
/// blueprint holds it.
#[test]
fn readmes_say_the_rollout_policy_their_blueprint_ships_with() {
    for class in every_class() {
        let dir = root().join("gatewayclasses").join(class);
        let blueprint = std::fs::read_to_string(dir.join("blueprint.yaml")).unwrap();
        let lines: Vec<&str> = blueprint
            .lines()
            .skip_while(|l| *l != "  rolloutPolicy:")
            .enumerate()
            .take_while(|(i, l)| *i == 0 || l.starts_with("    "))
            .map(|(_, l)| l)
            .collect();
        assert!(
            !lines.is_empty(),
            "{class}: the blueprint ships no rolloutPolicy"
        );
        let block = format!("```yaml\n{}\n```", lines.join("\n"));
        let readme = std::fs::read_to_string(dir.join("README.md")).unwrap();
        assert!(
            readme.contains(&block),
            "gatewayclasses/{class}/README.md does not show the blueprint's rollout policy:\n{block}"
        );
    }
}

#[test]
fn readme_graphs_match_their_blueprints() {
    let blocks = graph_blocks();
    assert!(
        blocks.iter().any(|(f, _, _)| f.ends_with("docs/cli.md")),
        "docs/cli.md shows no graph"
    );
    for class in every_class() {
        assert!(
            blocks
                .iter()
                .any(|(f, c, _)| c == class && f.ends_with(format!("{class}/README.md"))),
            "gatewayclasses/{class}/README.md shows no graph"
        );
    }
    for (file, class, block) in blocks {
        let out = cli::graph(
            &[root().join("gatewayclasses").join(&class)],
            cli::GraphFormat::Mermaid,
        );
        assert_eq!(out.code, EXIT_OK, "{:?}", out.stderr);
        assert!(
            block == out.stdout,
            "{}: the graph of {class} no longer matches its blueprint; it is now:\n{}",
            file.display(),
            out.stdout
        );
    }
}

#[test]
fn graph_draws_every_blueprint_and_reports_broken_ones() {
    let dot = cli::graph(&[root().join("gatewayclasses")], cli::GraphFormat::Dot);
    assert_eq!(dot.code, EXIT_OK, "{:?}", dot.stderr);
    assert_eq!(
        dot.stdout.matches("digraph \"blueprint ").count(),
        every_class().count()
    );
    let mermaid = cli::graph(&[root().join("gatewayclasses")], cli::GraphFormat::Mermaid);
    for class in every_class() {
        assert!(
            mermaid
                .stdout
                .contains(&format!("%% blueprint {class}\nflowchart LR\n")),
            "{}",
            mermaid.stdout
        );
    }
    // A cycle: exit 3, the blueprint and the cycle on stderr, nothing drawn for it.
    let (code, stdout, stderr) = run(
        "graph",
        &blueprint(&format!(
            "{}{}",
            template("a", "x: {{ resources.b | length }}"),
            template("b", "x: {{ resources.a | length }}")
        )),
    );
    assert_eq!(code, EXIT_TEMPLATE, "{stderr}");
    assert!(stdout.is_empty(), "{stdout}");
    assert!(stderr.contains("dependency cycle"), "{stderr}");
    let (code, _, stderr) = run("graph", "kind: [unclosed\n");
    assert_eq!(code, EXIT_INPUT, "{stderr}");
}

/// The status document `render` prints for the route `kind` `name` (no spec).
fn route_status<'a>(out: &'a [Value], kind: &str, name: &str) -> &'a Value {
    out.iter()
        .find(|d| d["kind"] == kind && d.get("spec").is_none() && d["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no status of {kind} {name}"))
}

/// Whether the route `kind` `name` is accepted by its Gateway (its one parent entry).
fn route_accepted(out: &[Value], kind: &str, name: &str) -> (String, String) {
    let parents = &route_status(out, kind, name)["status"]["parents"];
    let c = condition(&parents[0], "Accepted");
    (
        c["status"].as_str().unwrap().to_owned(),
        c["reason"].as_str().unwrap().to_owned(),
    )
}

#[test]
fn every_route_kind_with_every_shipped_class() {
    let input =
        std::fs::read_to_string(root().join("tests/kinds/gateway-and-routes.yaml")).unwrap();
    let accepted = || ("True".to_owned(), "Accepted".to_owned());
    let not_allowed = || ("False".to_owned(), "NotAllowedByListeners".to_owned());
    for class in CLASSES {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("input.yaml"), input.replace("CLASS", class)).unwrap();
        let out = cli::render(
            &[
                root().join("gatewayclasses").join(class),
                dir.path().to_owned(),
            ],
            "gatewright-system",
            &now(),
        );
        assert_eq!(out.code, EXIT_OK, "{class}: {:?}", out.stderr);
        golden(&format!("kinds-{class}.yaml"), &out.stdout);
        let all = docs(&out.stdout);
        let listeners = &gateway_status_named(&all, "public")["status"]["listeners"];
        let listener = |name: &str| -> &Value {
            listeners
                .as_array()
                .unwrap()
                .iter()
                .find(|l| l["name"] == name)
                .unwrap()
        };
        let children = |kind: &str| -> Vec<&Value> {
            all.iter()
                .filter(|d| {
                    d["kind"] == kind
                        && d["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "gatewright"
                })
                .collect()
        };
        // No shipped class carries UDP: the listener says so, naming the class.
        let udp = condition(listener("dns"), "Accepted");
        assert_eq!(
            (udp["status"].as_str(), udp["reason"].as_str()),
            (Some("False"), Some("UnsupportedProtocol")),
            "{class}"
        );
        assert!(
            udp["message"].as_str().unwrap().contains(&format!(
                "GatewayClass {class} carries no route kind for protocol \"UDP\""
            )),
            "{udp}"
        );
        assert_eq!(
            route_accepted(&all, "UDPRoute", "dns"),
            not_allowed(),
            "{class}"
        );
        assert_eq!(
            route_accepted(&all, "HTTPRoute", "shop"),
            accepted(),
            "{class}"
        );
        // The ListenerSet's listener and the route attached to it, with every class.
        assert_eq!(
            route_accepted(&all, "HTTPRoute", "team"),
            accepted(),
            "{class}"
        );
        let set = &route_status(&all, "ListenerSet", "team")["status"];
        assert_eq!(
            condition(set, "Accepted")["status"],
            "True",
            "{class}: {set}"
        );
        assert_eq!(set["listeners"][0]["name"], "web");
        assert_eq!(set["listeners"][0]["attachedRoutes"], 1);
        assert_eq!(
            gateway_status_named(&all, "public")["status"]["attachedListenerSets"],
            1
        );
        assert_eq!(children("HTTPRoute").len(), 2, "{class}");
        match *class {
            "istio-certmanager-externaldns" => {
                for (kind, name) in [
                    ("GRPCRoute", "orders"),
                    ("TLSRoute", "db-passthrough"),
                    ("TLSRoute", "api-terminate"),
                    ("TCPRoute", "postgres"),
                ] {
                    assert_eq!(
                        route_accepted(&all, kind, name),
                        accepted(),
                        "{kind} {name}"
                    );
                }
                // A shadow route of each kind, attached to the Istio gateway, keeping rules.
                let grpc = children("GRPCRoute");
                assert_eq!(grpc.len(), 1);
                assert_eq!(grpc[0]["spec"]["rules"][0]["backendRefs"][1]["weight"], 10);
                assert_eq!(
                    grpc[0]["spec"]["hostnames"],
                    serde_json::json!(["grpc.example.com"])
                );
                assert_eq!(children("TLSRoute").len(), 2);
                let tcp = children("TCPRoute");
                assert_eq!(tcp.len(), 1);
                assert!(tcp[0]["spec"].get("hostnames").is_none(), "{}", tcp[0]);
                assert_eq!(children("UDPRoute").len(), 0);
                // The certificate names what the Gateway terminates with it, not the
                // passthrough backend's name nor the ListenerSet's HTTP-only one; DNS
                // publishes every name.
                let cert = children("Certificate");
                assert_eq!(
                    cert[0]["spec"]["dnsNames"],
                    serde_json::json!(["api.example.com", "grpc.example.com", "shop.example.com"])
                );
                // Once the certificate is ready, the Istio gateway: each TLS listener in its mode.
                let mut live = Vec::new();
                let mut rounds = 0;
                let istio = loop {
                    rounds += 1;
                    assert!(rounds < 8, "the Istio gateway never rendered");
                    let text: String = live
                        .iter()
                        .map(|c| format!("---\n{}", serde_saphyr::to_string(c).unwrap()))
                        .collect();
                    std::fs::write(dir.path().join("live.yaml"), text).unwrap();
                    let out = cli::render(
                        &[
                            root().join("gatewayclasses").join(class),
                            dir.path().to_owned(),
                        ],
                        "gatewright-system",
                        &now(),
                    );
                    let docs = docs(&out.stdout);
                    if let Some(g) = docs.iter().find(|d| {
                        d["kind"] == "Gateway"
                            && d["metadata"]["labels"]["app.kubernetes.io/managed-by"]
                                == "gatewright"
                    }) {
                        break g.clone();
                    }
                    live = docs
                        .iter()
                        .filter(|d| {
                            d["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "gatewright"
                        })
                        .map(gatewright::simulate::as_ready)
                        .collect();
                };
                let modes: Vec<(&str, &str)> = istio["spec"]["listeners"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .filter(|l| l["protocol"] == "TLS")
                    .map(|l| {
                        (
                            l["name"].as_str().unwrap(),
                            l["tls"]["mode"].as_str().unwrap(),
                        )
                    })
                    .collect();
                assert_eq!(
                    modes,
                    [
                        ("tls-passthrough", "Passthrough"),
                        ("tls-terminate", "Terminate")
                    ]
                );
                // The set's listener, under its unique key.
                assert!(
                    istio["spec"]["listeners"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .any(|l| l["name"] == "team-web" && l["hostname"] == "team.example.org"),
                    "{}",
                    istio["spec"]["listeners"]
                );
            }
            "traefik-certmanager-externaldns" => {
                // HTTP and gRPC: Traefik reads TLS and TCP routes only on its experimental
                // channel, so those listeners are refused, naming the class.
                assert_eq!(route_accepted(&all, "GRPCRoute", "orders"), accepted());
                let grpc = children("GRPCRoute");
                assert_eq!(grpc.len(), 1);
                assert_eq!(grpc[0]["spec"]["rules"][0]["backendRefs"][1]["weight"], 10);
                for (kind, name) in [
                    ("TLSRoute", "db-passthrough"),
                    ("TLSRoute", "api-terminate"),
                    ("TCPRoute", "postgres"),
                ] {
                    assert_eq!(
                        route_accepted(&all, kind, name),
                        not_allowed(),
                        "{kind} {name}"
                    );
                }
                for l in ["tls-passthrough", "tls-terminate", "postgres"] {
                    assert_eq!(
                        condition(listener(l), "Accepted")["reason"],
                        "UnsupportedProtocol",
                        "{l}"
                    );
                }
                assert_eq!(children("TLSRoute").len() + children("TCPRoute").len(), 0);
            }
            "contour-istio" => {
                assert_eq!(route_accepted(&all, "GRPCRoute", "orders"), accepted());
                assert_eq!(children("GRPCRoute").len(), 1);
                for (kind, name) in [("TLSRoute", "db-passthrough"), ("TCPRoute", "postgres")] {
                    assert_eq!(
                        route_accepted(&all, kind, name),
                        not_allowed(),
                        "{kind} {name}"
                    );
                }
                assert_eq!(
                    condition(listener("postgres"), "Accepted")["reason"],
                    "UnsupportedProtocol"
                );
            }
            _ => {
                // The ALB class takes HTTPRoutes only; its HTTP listeners do not list GRPCRoute.
                assert_eq!(route_accepted(&all, "GRPCRoute", "orders"), not_allowed());
                assert_eq!(
                    listener("http")["supportedKinds"],
                    serde_json::json!([{"group": "gateway.networking.k8s.io", "kind": "HTTPRoute"}])
                );
                assert_eq!(children("GRPCRoute").len() + children("TCPRoute").len(), 0);
            }
        }
    }
}

/// A placed Istio gateway of the fleet class's example as its member would report it:
/// ready, with `address`.
fn placed_gateway_ready(rendered: &Value, address: &str) -> Value {
    let mut g = gatewright::simulate::as_ready(rendered);
    g["status"]["addresses"] = serde_json::json!([{"type": "IPAddress", "value": address}]);
    g
}

#[test]
fn placement_renders_once_per_served_member_and_the_hub_record_lists_them_all() {
    let example = root().join("examples").join(FLEET_CLASS);
    let out = cli::render(std::slice::from_ref(&example), "gatewright-system", &now());
    assert_eq!(out.code, EXIT_OK, "{:?}", out.stderr);
    golden(&format!("{FLEET_CLASS}.yaml"), &out.stdout);
    let all = docs(&out.stdout);
    let placed: Vec<&Value> = all
        .iter()
        .filter(|d| d["metadata"]["labels"]["gatewright.dev/template"] == "gateway")
        .collect();
    // Once per selected member that is served, in name order; never the unselected one,
    // never the unhealthy one; no owner reference (it lives in another cluster).
    let clusters: Vec<&str> = placed
        .iter()
        .map(|d| {
            d["metadata"]["annotations"]["gatewright.dev/cluster"]
                .as_str()
                .unwrap()
        })
        .collect();
    assert_eq!(clusters, ["fleet/eu-1", "fleet/us-1"]);
    assert!(
        placed
            .iter()
            .all(|d| d["metadata"]["ownerReferences"].is_null())
    );
    // The `cluster` variable: each member's own properties.
    assert_eq!(
        placed[0]["metadata"]["annotations"]["topology.istio.io/network"],
        "eu-west-1"
    );
    // A certificate per placed member too, for the precise hostnames; each member's
    // gateway serves it on its HTTPS listener.
    let certs: Vec<(&str, &Value)> = all
        .iter()
        .filter(|d| d["kind"] == "Certificate")
        .map(|d| {
            (
                d["metadata"]["annotations"]["gatewright.dev/cluster"]
                    .as_str()
                    .unwrap(),
                &d["spec"]["dnsNames"],
            )
        })
        .collect();
    let shop = serde_json::json!(["shop.example.com"]);
    assert_eq!(certs, [("fleet/eu-1", &shop), ("fleet/us-1", &shop)]);
    let https = placed[0]["spec"]["listeners"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["name"] == "https")
        .unwrap();
    assert_eq!(https["tls"]["certificateRefs"][0]["name"], "public-tls");
    // A copy of the route per placed member (a placed route template), in the route's
    // namespace there, attached to that member's gateway.
    let copies: Vec<(&str, &Value, &Value)> = all
        .iter()
        .filter(|d| d["kind"] == "HTTPRoute" && d["metadata"]["name"] == "shop-public-istio")
        .map(|d| {
            (
                d["metadata"]["annotations"]["gatewright.dev/cluster"]
                    .as_str()
                    .unwrap(),
                &d["metadata"]["namespace"],
                &d["spec"]["parentRefs"][0]["name"],
            )
        })
        .collect();
    let (web, public_istio) = (serde_json::json!("web"), serde_json::json!("public-istio"));
    assert_eq!(
        copies,
        [
            ("fleet/eu-1", &web, &public_istio),
            ("fleet/us-1", &web, &public_istio)
        ]
    );
    let status = &gateway_status(&all)["status"];
    let placed_cond = condition(status, "gatewright.dev/Placed");
    assert_eq!(placed_cond["status"], "False");
    assert_eq!(placed_cond["reason"], "MembersUnavailable");
    let message = placed_cond["message"].as_str().unwrap();
    assert!(
        message.contains("fleet/ap-1 (ControlPlaneHealthy is False)"),
        "{message}"
    );
    assert!(!message.contains("internal"), "{message}");

    // Both members report their gateway ready: the hub's record lists both addresses, and
    // so does the Gateway.
    let dir = tempfile::tempdir().unwrap();
    let live = vec![
        placed_gateway_ready(placed[0], "198.51.100.1"),
        placed_gateway_ready(placed[1], "198.51.100.2"),
    ];
    let write_live = |objs: &[Value]| {
        let text: String = objs
            .iter()
            .map(|c| format!("---\n{}", serde_saphyr::to_string(c).unwrap()))
            .collect();
        std::fs::write(dir.path().join("live.yaml"), text).unwrap();
    };
    write_live(&live);
    let render = || {
        let out = cli::render(
            &[example.clone(), dir.path().to_owned()],
            "gatewright-system",
            &now(),
        );
        assert_eq!(out.code, EXIT_OK, "{:?}", out.stderr);
        (docs(&out.stdout), out.stderr.join("\n"))
    };
    let (all, _) = render();
    let dns = all
        .iter()
        .find(|d| d["kind"] == "DNSEndpoint")
        .expect("the hub's record renders once every placed gateway exists");
    assert!(dns["metadata"]["annotations"]["gatewright.dev/cluster"].is_null());
    assert_eq!(
        dns["spec"]["endpoints"][0]["targets"],
        serde_json::json!(["198.51.100.1", "198.51.100.2"])
    );
    let addresses = &gateway_status(&all)["status"]["addresses"];
    assert_eq!(addresses.as_array().unwrap().len(), 2, "{addresses}");

    // eu-1 reports one more address, outside what its ClusterProfile allows: the record
    // and the Gateway's addresses leave it out, and the Placed condition names it.
    let mut rogue = live[0].clone();
    rogue["status"]["addresses"]
        .as_array_mut()
        .unwrap()
        .push(serde_json::json!({"type": "IPAddress", "value": "203.0.113.66"}));
    write_live(&[rogue, live[1].clone()]);
    let (all, _) = render();
    let dns = all.iter().find(|d| d["kind"] == "DNSEndpoint").unwrap();
    assert_eq!(
        dns["spec"]["endpoints"][0]["targets"],
        serde_json::json!(["198.51.100.1", "198.51.100.2"])
    );
    let status = &gateway_status(&all)["status"];
    assert!(
        !status["addresses"].to_string().contains("203.0.113.66"),
        "{status}"
    );
    let placed_cond = condition(status, "gatewright.dev/Placed");
    assert_eq!(placed_cond["reason"], "AddressesRefused", "{placed_cond}");
    assert!(
        placed_cond["message"]
            .as_str()
            .unwrap()
            .contains("fleet/eu-1: 203.0.113.66"),
        "{placed_cond}"
    );
    write_live(&live);

    // us-1's control plane turns unhealthy: nothing is rendered for it any more, the record
    // lists eu-1 alone, and its gateway there is kept (it cannot be reached; found again
    // when it is back).
    std::fs::write(
        dir.path().join("us-1-down.yaml"),
        "apiVersion: multicluster.x-k8s.io/v1alpha1\nkind: ClusterProfile\nmetadata: {name: us-1, namespace: fleet, labels: {gatewright.dev/serves: public}}\nspec: {displayName: us-1, clusterManager: {name: fleet-manager}}\nstatus:\n  conditions:\n  - {type: ControlPlaneHealthy, status: \"False\", reason: Unreachable, message: down, lastTransitionTime: \"2026-01-01T00:00:00Z\"}\n",
    )
    .unwrap();
    let (all, stderr) = render();
    let dns = all.iter().find(|d| d["kind"] == "DNSEndpoint").unwrap();
    assert_eq!(
        dns["spec"]["endpoints"][0]["targets"],
        serde_json::json!(["198.51.100.1"])
    );
    assert!(!stderr.contains("would delete"), "{stderr}");
    let message = condition(&gateway_status(&all)["status"], "gatewright.dev/Placed")["message"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        message.contains("fleet/us-1 (ControlPlaneHealthy is False)"),
        "{message}"
    );

    // us-1 healthy, but no longer selected: its gateway there is to be deleted.
    std::fs::write(
        dir.path().join("us-1-down.yaml"),
        "apiVersion: multicluster.x-k8s.io/v1alpha1\nkind: ClusterProfile\nmetadata: {name: us-1, namespace: fleet}\nspec: {displayName: us-1, clusterManager: {name: fleet-manager}}\nstatus:\n  conditions:\n  - {type: ControlPlaneHealthy, status: \"True\", reason: Probed, message: up, lastTransitionTime: \"2026-01-01T00:00:00Z\"}\n",
    )
    .unwrap();
    let (_, stderr) = render();
    assert!(
        stderr.contains("would delete Gateway web/public-istio in cluster fleet/us-1"),
        "{stderr}"
    );
}

/// `placement.resources: Member`: a placed template's render reads, of
/// `resources.<template>`, only the objects in its own member (and in the parent's
/// cluster); without it, every member's.
#[test]
fn a_placed_template_scoped_to_its_member_reads_only_its_members_objects() {
    let example = root().join("examples").join(FLEET_CLASS);
    let class = root().join("gatewayclasses").join(FLEET_CLASS);
    let peers = |scope: &str| {
        r#"  - name: peers
    placement:
      clusters:
        matchLabels:
          gatewright.dev/serves: public
SCOPE    template: |
      {% set found = namespace(a=[]) %}
      {% for gw in resources.gateway %}{% for a in dig(gw, "status.addresses", []) %}{% set found.a = found.a + [a.value] %}{% endfor %}{% endfor %}
      apiVersion: v1
      kind: ConfigMap
      metadata:
        name: {{ gateway.metadata.name ~ "-peers" }}
      data:
        addresses: {{ found.a | join(";") }}
"#
        .replace("SCOPE", scope)
    };
    let addresses = |scope: &str| -> Vec<(String, String)> {
        let dir = tempfile::tempdir().unwrap();
        for f in ["clusters.yaml", "gateway.yaml"] {
            std::fs::copy(example.join(f), dir.path().join(f)).unwrap();
        }
        std::fs::copy(
            class.join("gatewayclass.yaml"),
            dir.path().join("gatewayclass.yaml"),
        )
        .unwrap();
        let blueprint = std::fs::read_to_string(class.join("blueprint.yaml"))
            .unwrap()
            .replacen(
                "  routeTemplates:\n",
                &format!("{}  routeTemplates:\n", peers(scope)),
                1,
            );
        std::fs::write(dir.path().join("blueprint.yaml"), blueprint).unwrap();
        let render = || {
            let out = cli::render(&[dir.path().to_owned()], "gatewright-system", &now());
            assert_eq!(out.code, EXIT_OK, "{:?}", out.stderr);
            docs(&out.stdout)
        };
        // Each member's gateway ready, with an address of its own.
        let live: String = render()
            .iter()
            .filter(|d| d["metadata"]["labels"]["gatewright.dev/template"] == "gateway")
            .map(|g| {
                let member = g["metadata"]["annotations"]["gatewright.dev/cluster"]
                    .as_str()
                    .unwrap();
                let address = if member == "fleet/eu-1" {
                    "198.51.100.1"
                } else {
                    "198.51.100.2"
                };
                format!(
                    "---\n{}",
                    serde_saphyr::to_string(&placed_gateway_ready(g, address)).unwrap()
                )
            })
            .collect();
        std::fs::write(dir.path().join("live.yaml"), live).unwrap();
        render()
            .iter()
            .filter(|d| d["kind"] == "ConfigMap" && d["metadata"]["name"] == "public-peers")
            .map(|d| {
                (
                    d["metadata"]["annotations"]["gatewright.dev/cluster"]
                        .as_str()
                        .unwrap()
                        .to_owned(),
                    d["data"]["addresses"].as_str().unwrap().to_owned(),
                )
            })
            .collect()
    };
    let own = |m: &str, a: &str| (m.to_owned(), a.to_owned());
    assert_eq!(
        addresses("      resources: Member\n"),
        [
            own("fleet/eu-1", "198.51.100.1"),
            own("fleet/us-1", "198.51.100.2")
        ],
        "scoped: each member reads its own gateway only"
    );
    assert_eq!(
        addresses(""),
        [
            own("fleet/eu-1", "198.51.100.1;198.51.100.2"),
            own("fleet/us-1", "198.51.100.1;198.51.100.2")
        ],
        "unscoped: every member's"
    );
}

#[test]
fn placement_is_refused_where_it_cannot_apply() {
    let text = blueprint(
        "  - name: gw\n    placement: {clusters: {matchExpressions: [{key: region, operator: Near, values: [eu]}]}}\n    template: \"\"\n  routeTemplates:\n  - name: copy\n    placement: {clusters: {matchExpressions: [{key: region, operator: Exists, values: [eu]}]}}\n    template: \"\"\n",
    );
    let (code, stdout, stderr) = run("check", &text);
    assert_ne!(code, 0, "{stdout}");
    assert!(stderr.contains("operator \"Near\""), "{stderr}");
    // Route templates are placed too, and their selectors checked the same way.
    assert!(
        stderr.contains("template copy") && stderr.contains("operator Exists takes no values"),
        "{stderr}"
    );
}

/// Renders the Traefik class's example with `extra` (YAML documents) beside it, the
/// children made ready between rounds, until `done` finds what it looks for in our
/// children of a round.
fn traefik_rounds<T>(extra: &str, done: impl Fn(&[Value]) -> Option<T>) -> T {
    let class = "traefik-certmanager-externaldns";
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("extra.yaml"), extra).unwrap();
    let mut live: Vec<Value> = Vec::new();
    for _ in 0..10 {
        let (out, _) = render_with_live(class, dir.path(), &live);
        let ours: Vec<Value> = out
            .iter()
            .filter(|d| d["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "gatewright")
            .cloned()
            .collect();
        if let Some(found) = done(&ours) {
            return found;
        }
        live = ours.iter().map(gatewright::simulate::as_ready).collect();
    }
    panic!("{class}: what the test waits for never rendered");
}

/// The Traefik gateway's listeners as the class renders them for its example, once the
/// certificate is issued, with `extra` (YAML documents) beside the example: (name, port).
fn traefik_listeners(extra: &str) -> Vec<(String, u64)> {
    traefik_rounds(extra, |ours| {
        let g = ours.iter().find(|d| d["kind"] == "Gateway")?;
        assert_eq!(g["metadata"]["name"], "public-traefik");
        assert_eq!(g["spec"]["gatewayClassName"], "traefik");
        Some(
            g["spec"]["listeners"]
                .as_array()
                .unwrap()
                .iter()
                .map(|l| {
                    (
                        l["name"].as_str().unwrap().to_owned(),
                        l["port"].as_u64().unwrap(),
                    )
                })
                .collect(),
        )
    })
}

#[test]
fn the_traefik_gateway_listens_on_the_entrypoints_ports() {
    // The defaults: Traefik's Helm chart entrypoints, web on 8000 and websecure on 8443.
    assert_eq!(
        traefik_listeners(""),
        [("http".to_owned(), 8000), ("https".to_owned(), 8443)]
    );
    // A GatewayClassConfig mapping 80 elsewhere keeps the default for 443 (maps merge key
    // by key), and a port the map does not name is kept as it is.
    let config = "apiVersion: gatewright.dev/v1alpha1\nkind: GatewayClassConfig\nmetadata: {name: ports, namespace: gatewright-system}\nspec:\n  targetRef: {group: gateway.networking.k8s.io, kind: GatewayClass, name: traefik-certmanager-externaldns}\n  default:\n    traefik:\n      gatewayClassName: traefik\n      ports: {\"80\": 18080, \"8443\": 1}\n";
    assert_eq!(
        traefik_listeners(config),
        [("http".to_owned(), 18080), ("https".to_owned(), 8443)]
    );
    let unmapped = config.replace(
        "{\"80\": 18080, \"8443\": 1}",
        "{\"80\": null, \"443\": null}",
    );
    assert_eq!(
        traefik_listeners(&unmapped),
        [("http".to_owned(), 80), ("https".to_owned(), 443)]
    );
}

/// The Traefik class's DNSEndpoints once its example converged, with `extra` (YAML
/// documents) beside the example: name -> the dnsNames it lists.
fn traefik_dns(extra: &str) -> std::collections::BTreeMap<String, Vec<String>> {
    let previous = std::cell::RefCell::new(None);
    traefik_rounds(extra, |ours| {
        let dns: std::collections::BTreeMap<String, Vec<String>> = ours
            .iter()
            .filter(|d| d["kind"] == "DNSEndpoint")
            .map(|d| {
                let names = d["spec"]["endpoints"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|e| e["dnsName"].as_str().unwrap().to_owned())
                    .collect();
                (d["metadata"]["name"].as_str().unwrap().to_owned(), names)
            })
            .collect();
        let settled = !dns.is_empty() && previous.borrow().as_ref() == Some(&dns);
        previous.replace(Some(dns.clone()));
        settled.then_some(dns)
    })
}

/// `n` routes of 16 hostnames each (the most a route holds) on the example's Gateway,
/// `first` the index of the first hostname.
fn many_hostnames(routes: usize, first: usize) -> String {
    (0..routes)
        .map(|r| {
            let hosts: Vec<String> = (0..16)
                .map(|h| format!("h{}.example.com", first + r * 16 + h))
                .collect();
            format!(
                "---\napiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {{name: many-{r}, namespace: shop}}\nspec:\n  parentRefs: [{{name: public, namespace: infra}}]\n  hostnames: {hosts:?}\n  rules: [{{backendRefs: [{{name: many, port: 80}}]}}]\n"
            )
        })
        .collect()
}

#[test]
fn the_traefik_class_lists_dns_names_in_groups_of_at_most_100() {
    // The example alone: one DNSEndpoint, under the name it always had.
    let small = traefik_dns("");
    assert_eq!(small.keys().collect::<Vec<_>>(), ["public-dns"]);
    // 16 routes of 16 names beside the example's: more than 256 names, in 4 groups (the
    // fewest, a power of two, with at most 100 names each), every name in exactly one.
    let big = traefik_dns(&many_hostnames(16, 0));
    assert_eq!(big.len(), 4, "{:?}", big.keys().collect::<Vec<_>>());
    assert!(
        big.contains_key("public-dns"),
        "the first group keeps the name"
    );
    assert!(big.values().all(|names| names.len() <= 100));
    let mut all: Vec<&String> = big.values().flatten().collect();
    let n = all.len();
    all.sort();
    all.dedup();
    assert_eq!(all.len(), n, "a name in two groups");
    assert!(small["public-dns"].iter().all(|h| all.contains(&h)));
    assert_eq!(n, small["public-dns"].len() + 256);
    // One more route with one name: one group changes, by that name alone; the others
    // are the same objects, names and all.
    let one = "---\napiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {name: one-more, namespace: shop}\nspec:\n  parentRefs: [{name: public, namespace: infra}]\n  hostnames: [one-more.example.com]\n  rules: [{backendRefs: [{name: many, port: 80}]}]\n";
    let more = traefik_dns(&(many_hostnames(16, 0) + one));
    let changed: Vec<&String> = big.keys().filter(|k| more[*k] != big[*k]).collect();
    assert_eq!(changed.len(), 1, "{changed:?}");
    let mut grown = more[changed[0]].clone();
    grown.retain(|h| h != "one-more.example.com");
    assert_eq!(&grown, &big[changed[0]]);
    assert_eq!(more.len(), 4);
}
