//! The tenancy boundary offline (docs/security.md): the world of tests/tenancy/world.yaml
//! (a Gateway shared by a platform team and app teams) rendered by every shipped class, and
//! a blueprint of one's own that would serve a route where the parent refused it, refused
//! by the planner with exit code 3.

use serde_json::Value;

use super::{CLASSES, EXIT_OK, EXIT_TEMPLATE, cli, docs, golden, now, root, run};

fn ours(d: &Value) -> bool {
    d["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "gatewright"
        && d.get("spec").is_some()
}

/// The copies of the route `namespace/name` (by their owner reference).
fn copies<'a>(all: &'a [Value], namespace: &str, name: &str) -> Vec<&'a Value> {
    all.iter()
        .filter(|d| {
            ours(d)
                && d["kind"] == "HTTPRoute"
                && d["metadata"]["namespace"] == namespace
                && d["metadata"]["ownerReferences"][0]["name"] == name
                && d["metadata"]["ownerReferences"][0]["kind"] == "HTTPRoute"
        })
        .collect()
}

fn strings(v: &Value) -> Vec<&str> {
    v.as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

fn sections(copy: &Value) -> Vec<&str> {
    copy["spec"]["parentRefs"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| p["sectionName"].as_str())
        .collect()
}

#[test]
fn the_tenancy_world_with_every_shipped_class() {
    let input = std::fs::read_to_string(root().join("tests/tenancy/world.yaml")).unwrap();
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
        golden(&format!("tenancy-{class}.yaml"), &out.stdout);
        let all = docs(&out.stdout);
        // A child Gateway with a listener per parent listener names them by key.
        let per_listener = all.iter().any(|d| {
            ours(d)
                && d["kind"] == "Gateway"
                && d["spec"]["listeners"]
                    .as_array()
                    .is_some_and(|l| l.len() > 1)
        });

        let hijack = copies(&all, "tenant", "hijack");
        assert_eq!(hijack.len(), 1, "{class}");
        assert_eq!(
            strings(&hijack[0]["spec"]["hostnames"]),
            ["foo.apps.example.com"],
            "{class}"
        );
        let steal = copies(&all, "tenant", "steal");
        assert_eq!(
            strings(&steal[0]["spec"]["hostnames"]),
            ["*.apps.example.com"],
            "{class}"
        );
        let admin = copies(&all, "infra", "admin");
        assert_eq!(
            strings(&admin[0]["spec"]["hostnames"]),
            ["admin.example.com"],
            "{class}"
        );
        if per_listener {
            assert_eq!(sections(hijack[0]), ["apps"], "{class}");
            assert_eq!(sections(steal[0]), ["apps"], "{class}");
            assert_eq!(sections(admin[0]), ["admin"], "{class}");
            assert_eq!(
                sections(copies(&all, "team", "team")[0]),
                ["set-web"],
                "{class}"
            );
            assert_eq!(
                sections(copies(&all, "gold", "gold")[0]),
                ["gold"],
                "{class}"
            );
        }
        // Refused by the parent: no copy.
        assert!(copies(&all, "tenant", "gold").is_empty(), "{class}");
        assert!(copies(&all, "tenant", "team").is_empty(), "{class}");
        assert!(copies(&all, "tenant", "direct").is_empty(), "{class}");
        // No copy of a tenant's route names a hostname of a listener that refused it.
        for copy in all
            .iter()
            .filter(|d| ours(d) && d["metadata"]["namespace"] == "tenant")
        {
            for h in strings(&copy["spec"]["hostnames"]) {
                assert!(h.ends_with("apps.example.com"), "{class}: {copy}");
            }
        }
        // The child listeners admit what the parent's do, no more.
        if per_listener {
            let child = all
                .iter()
                .find(|d| ours(d) && d["kind"] == "Gateway")
                .unwrap();
            let from = |name: &str| -> &Value {
                &child["spec"]["listeners"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .find(|l| l["name"] == name)
                    .unwrap_or_else(|| panic!("{class}: no child listener {name}: {child}"))["allowedRoutes"]
                    ["namespaces"]
            };
            assert_eq!(from("admin")["from"], "Same", "{class}");
            assert_eq!(from("apps")["from"], "All", "{class}");
            assert_eq!(
                from("gold")["selector"]["matchLabels"]["tier"],
                "gold",
                "{class}"
            );
            assert_eq!(
                from("set-web")["selector"]["matchLabels"]["kubernetes.io/metadata.name"],
                "team",
                "{class}"
            );
        }
    }
}

/// A blueprint of one's own, as the shipped classes were written before the boundary: a
/// child Gateway whose listeners take routes from every namespace, and route copies with
/// the route's own hostnames and no sectionName.
const WIDE: &str = r#"---
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: wide}
spec:
  controllerName: gatewright.dev/gateway-controller
  parametersRef: {group: gatewright.dev, kind: GatewayClassBlueprint, name: wide}
---
apiVersion: gatewright.dev/v1alpha1
kind: GatewayClassBlueprint
metadata: {name: wide}
spec:
  gatewayTemplates:
  - name: gateway
    template: |
      apiVersion: gateway.networking.k8s.io/v1
      kind: Gateway
      metadata: {name: {{ gateway.metadata.name ~ "-child" }} }
      spec:
        gatewayClassName: dataplane
        listeners:
        {% for l in listeners %}
        - name: {{ l.key }}
          port: {{ l.port }}
          protocol: {{ l.protocol }}
          hostname: {{ l.hostname }}
          allowedRoutes: WIDTH
        {% endfor %}
  routeTemplates:
  - name: route
    template: |
      apiVersion: gateway.networking.k8s.io/v1
      kind: HTTPRoute
      metadata: {name: {{ route.metadata.name ~ "-copy" }} }
      spec:
        parentRefs: [{name: {{ gateway.metadata.name ~ "-child" }}, namespace: {{ gateway.metadata.namespace }} }]
        hostnames: HOSTNAMES
        rules: {{ route.spec.rules }}
"#;

#[test]
fn a_blueprint_widening_a_route_is_refused() {
    let world = std::fs::read_to_string(root().join("tests/tenancy/world.yaml"))
        .unwrap()
        .replace("CLASS", "wide");
    let same_as_parent = "{{ l.allowedRoutes }}";
    let every_namespace = "{namespaces: {from: All}}";
    let own = r#"{{ dig(route, "spec.hostnames", []) }}"#;
    let accepted = "{{ attachment.hostnames }}";

    // The route's own hostnames on every listener: the copies refused, the child kept.
    let input = WIDE
        .replace("WIDTH", same_as_parent)
        .replace("HOSTNAMES", own)
        + "---\n"
        + &world;
    // `check` finds it without a world of the user's: its tenancy probe.
    let (code, _, stderr) = run(
        "check",
        &WIDE
            .replace("WIDTH", same_as_parent)
            .replace("HOSTNAMES", own),
    );
    assert_eq!(code, EXIT_TEMPLATE, "{stderr}");
    assert!(
        stderr.contains("blueprint wide")
            && stderr.contains("crosses the tenancy boundary")
            && stderr.contains("tenancy probe"),
        "{stderr}"
    );
    let (code, stdout, stderr) = run("render", &input);
    assert_eq!(code, EXIT_TEMPLATE, "{stderr}");
    assert!(
        stderr.contains("blueprint wide")
            && stderr.contains("template route")
            && stderr.contains("crosses the tenancy boundary")
            && stderr.contains(r#"attaches to listener "admin" of Gateway infra/shared-child, which stands for the parent's listener "admin": that listener did not accept the route"#),
        "{stderr}"
    );
    let out = docs(&stdout);
    assert!(
        !out.iter()
            .any(|d| d["kind"] == "HTTPRoute" && d["metadata"]["name"] == "hijack-copy"),
        "the refused copy is not rendered"
    );
    assert!(
        out.iter()
            .any(|d| d["kind"] == "Gateway" && d["metadata"]["name"] == "shared-child")
    );

    // The same blueprint attaching by `attachment`: within the boundary.
    let input = WIDE
        .replace("WIDTH", same_as_parent)
        .replace("HOSTNAMES", accepted)
        .replace(
            r#"parentRefs: [{name: {{ gateway.metadata.name ~ "-child" }}, namespace: {{ gateway.metadata.namespace }} }]"#,
            r#"parentRefs: [{% for l in attachment.listeners %}{name: {{ gateway.metadata.name ~ "-child" }}, namespace: {{ gateway.metadata.namespace }}, sectionName: {{ l.key }} }{% if not loop.last %}, {% endif %}{% endfor %}]"#,
        )
        + "---\n"
        + &world;
    let (code, stdout, stderr) = run("render", &input);
    assert_eq!(code, EXIT_OK, "{stderr}");
    assert!(
        docs(&stdout)
            .iter()
            .any(|d| d["kind"] == "HTTPRoute" && d["metadata"]["name"] == "hijack-copy")
    );

    // A child listener wider than its parent's: the child Gateway refused (and the copies
    // wait for it).
    let input = WIDE
        .replace("WIDTH", every_namespace)
        .replace("HOSTNAMES", accepted)
        + "---\n"
        + &world;
    let (code, stdout, stderr) = run("render", &input);
    assert_eq!(code, EXIT_TEMPLATE, "{stderr}");
    assert!(
        stderr.contains("template gateway")
            && stderr.contains(r#"listener "admin" of Gateway infra/shared-child admits routes from every namespace"#),
        "{stderr}"
    );
    assert!(
        !docs(&stdout)
            .iter()
            .any(|d| d["kind"] == "Gateway" && d["metadata"]["name"] == "shared-child")
    );
}
