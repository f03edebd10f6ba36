//! A new version of a shipped class renders against what the previous one made (issue
//! 42): for every shipped class, the children its previous release (`08c7914`) converged
//! to on the class's example, and for istio-certmanager-externaldns also those of
//! `52fd840` (the reported case: its Certificate was named and versioned otherwise), are
//! fixtures in `tests/render/upgrade/`. The current class is rendered against them pass
//! by pass, as the controller would (a new Certificate issued one pass after it is
//! created, every other child ready once applied, what the plan deletes gone), and must:
//! render every pass (exit 0) with the Gateway `Programmed`, never delete a Certificate whose Secret or ARN a live child
//! still names, never drop a listener of a child Gateway, and settle on exactly the
//! children it makes of a fresh start: nothing of the previous release left behind. What
//! a template adopts (aws-alb-crossplane's legacy cluster-scoped managed resources, each
//! given an external name here) is released before it is deleted, and its successor
//! carries its external name. A
//! class with no previous release (`NEW`) has nothing to upgrade from.
//!
//! The fixtures are made from the git history, once: `UPDATE_UPGRADE_FIXTURES=1 cargo test
//! --test render upgrade` (the test itself never reads the history).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use gatewright::cli::{self, EXIT_OK};
use serde_json::{Value, json};

use super::{condition, docs, gateway_status, now, root};

/// Shipped classes with no previous release to upgrade from (class, why): nothing was
/// made by an older version of them.
const NEW: &[(&str, &str)] = &[(
    "traefik-certmanager-externaldns",
    "first shipped after 08c7914; it gets a fixture at its first release",
)];

/// (class, the release its fixture was made with).
const UPGRADES: &[(&str, &str)] = &[
    ("istio-certmanager-externaldns", "08c7914"),
    ("contour-istio", "08c7914"),
    ("aws-alb-crossplane", "08c7914"),
    ("fleet-istio-certmanager-externaldns", "08c7914"),
    ("istio-certmanager-externaldns", "52fd840"),
];

fn ours(d: &Value) -> bool {
    d["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "gatewright"
}

/// `Kind namespace/name`, as `render` names an object it would delete.
fn id(d: &Value) -> String {
    let m = &d["metadata"];
    match m["namespace"].as_str() {
        Some(ns) => format!(
            "{} {ns}/{}",
            d["kind"].as_str().unwrap_or_default(),
            m["name"].as_str().unwrap_or_default()
        ),
        None => format!(
            "{} {}",
            d["kind"].as_str().unwrap_or_default(),
            m["name"].as_str().unwrap_or_default()
        ),
    }
}

fn fixture(class: &str, rev: &str) -> PathBuf {
    root()
        .join("tests/render/upgrade")
        .join(format!("{class}@{rev}.yaml"))
}

/// The class's example without the class itself: the Gateway, its routes (and for the
/// fleet class its ClusterProfiles).
fn example_inputs(class: &str) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(root().join("examples").join(class))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.file_name().is_some_and(|n| n != "class"))
        .collect();
    out.sort();
    out
}

fn write_live(dir: &Path, live: &[Value]) {
    let text: String = live
        .iter()
        .map(|c| format!("---\n{}", serde_saphyr::to_string(c).unwrap()))
        .collect();
    std::fs::write(dir.join("live.yaml"), text).unwrap();
}

/// Renders `inputs` with `live` as the cluster's children: (documents, stderr).
fn render(inputs: &[PathBuf], dir: &Path, live: &[Value], what: &str) -> (Vec<Value>, String) {
    write_live(dir, live);
    let mut paths = inputs.to_vec();
    paths.push(dir.to_owned());
    let out = cli::render(&paths, "gatewright-system", &now());
    let stderr = out.stderr.join("\n");
    assert_eq!(out.code, EXIT_OK, "{what}: {stderr}");
    (docs(&out.stdout), stderr)
}

/// Renders until nothing changes, every child ready once applied: the children.
fn converge(inputs: &[PathBuf], dir: &Path, what: &str) -> Vec<Value> {
    let mut live: Vec<Value> = Vec::new();
    for _ in 0..10 {
        let (out, _) = render(inputs, dir, &live, what);
        let next: Vec<Value> = out
            .iter()
            .filter(|d| ours(d))
            .map(gatewright::simulate::as_ready)
            .collect();
        if next == live {
            return live;
        }
        live = next;
    }
    panic!("{what} did not converge in 10 rounds");
}

/// Writes the fixture of `class` at `rev` from the git history.
fn make_fixture(class: &str, rev: &str) {
    let tmp = tempfile::tempdir().unwrap();
    let class_dir = tmp.path().join("class");
    std::fs::create_dir_all(&class_dir).unwrap();
    for f in ["gatewayclass.yaml", "blueprint.yaml"] {
        let out = Command::new("git")
            .args(["show", &format!("{rev}:gatewayclasses/{class}/{f}")])
            .current_dir(root())
            .output()
            .unwrap();
        assert!(out.status.success(), "git show {rev}: {out:?}");
        std::fs::write(class_dir.join(f), out.stdout).unwrap();
    }
    let live_dir = tmp.path().join("live");
    std::fs::create_dir_all(&live_dir).unwrap();
    let mut inputs = example_inputs(class);
    inputs.push(class_dir);
    let children = converge(&inputs, &live_dir, &format!("{class}@{rev}"));
    let mut text = format!(
        "# The children of the example of {class} as the class at {rev} made them, converged\n# (every child ready). Made by `UPDATE_UPGRADE_FIXTURES=1 cargo test --test render upgrade`.\n"
    );
    for c in &children {
        text.push_str(&format!("---\n{}", serde_saphyr::to_string(c).unwrap()));
    }
    std::fs::write(fixture(class, rev), text).unwrap();
}

/// Whether `name` is a string anywhere in `v`.
fn names(v: &Value, name: &str) -> bool {
    match v {
        Value::String(s) => s == name,
        Value::Array(a) => a.iter().any(|x| names(x, name)),
        Value::Object(m) => m.values().any(|x| names(x, name)),
        _ => false,
    }
}

/// What a child Gateway or Ingress reads of a Certificate: its Secret, or its ARN.
fn served_by(cert: &Value) -> Vec<&str> {
    [
        &cert["spec"]["secretName"],
        &cert["status"]["atProvider"]["arn"],
    ]
    .into_iter()
    .filter_map(Value::as_str)
    .collect()
}

fn listeners(live: &[Value]) -> Vec<(String, usize)> {
    live.iter()
        .filter(|d| d["kind"] == "Gateway" && d["spec"]["listeners"].is_array())
        .map(|d| (id(d), d["spec"]["listeners"].as_array().unwrap().len()))
        .collect()
}

/// One pass of the current class over `live`: the next live set and the plan's stderr.
/// A Certificate the pass creates is not issued yet (issued on the next pass); every
/// other child is ready once applied; what the plan deletes goes, what it neither
/// renders nor deletes stays as it is. The Gateway must be Programmed at every pass.
fn step(inputs: &[PathBuf], dir: &Path, live: &[Value], what: &str) -> (Vec<Value>, String) {
    let (out, stderr) = render(inputs, dir, live, what);
    // The old children serve while the new ones are made: the Gateway stays Programmed.
    let programmed = condition(&gateway_status(&out)["status"], "Programmed");
    assert_eq!(programmed["status"], "True", "{what}: {programmed}");
    let mut next: Vec<Value> = Vec::new();
    for d in out.iter().filter(|d| ours(d)) {
        let created = !live.iter().any(|l| id(l) == id(d));
        let mut c = gatewright::simulate::as_ready(d);
        if created && d["kind"] == "Certificate" {
            c["status"] = json!({"conditions": [{"type": "Ready", "status": "False", "reason": "Issuing", "message": "issuing"}]});
        }
        next.push(c);
    }
    // What the plan releases (`adopt.release`) gets its merge patch.
    for line in stderr.lines() {
        let Some((_, rest)) = line.split_once(": would release ") else {
            continue;
        };
        let (k, patch) = rest.split_once(" with ").unwrap();
        let patch: Value = serde_json::from_str(patch).unwrap();
        let d = live.iter().find(|l| id(l) == k).unwrap();
        let mut released = d.clone();
        merge(&mut released, &patch);
        next.push(released);
    }
    let deleted: BTreeSet<&str> = stderr
        .lines()
        .filter_map(|l| l.split_once(": would delete ").map(|(_, k)| k))
        .collect();
    for d in live {
        let i = id(d);
        if deleted.contains(i.as_str()) {
            // Crossplane's legacy managed resources go only once released: deleting one
            // with `Delete` among its policies would delete the cloud resource.
            if legacy_managed(d) {
                assert_eq!(
                    d["spec"]["managementPolicies"],
                    json!(["Observe"]),
                    "{what}: {i} deleted before it was released"
                );
            }
            // Make-before-break: nothing live still reads what goes, unless an object that
            // stays serves it too (the one that adopted it: the same resource outside the
            // cluster, the same ARN).
            let successor = |o: &Value| {
                o["kind"] == d["kind"]
                    && o["metadata"]["name"] == d["metadata"]["name"]
                    && !deleted.contains(id(o).as_str())
            };
            for s in served_by(d) {
                if live
                    .iter()
                    .chain(&next)
                    .any(|o| successor(o) && served_by(o).contains(&s))
                {
                    continue;
                }
                let reader = live.iter().find(|o| id(o) != i && names(o, s));
                assert!(
                    reader.is_none(),
                    "{what}: {i} is deleted while {} still names {s}",
                    reader.map(id).unwrap_or_default()
                );
            }
        } else if !next.iter().any(|n| id(n) == i) {
            next.push(d.clone());
        }
    }
    (next, stderr)
}

/// A Crossplane managed resource of the legacy cluster-scoped AWS groups.
fn legacy_managed(d: &Value) -> bool {
    d["apiVersion"]
        .as_str()
        .is_some_and(|v| v.contains(".aws.upbound.io/"))
}

/// A JSON merge patch (RFC 7386) applied to `target`.
fn merge(target: &mut Value, patch: &Value) {
    match patch {
        Value::Object(p) => {
            if !target.is_object() {
                *target = json!({});
            }
            for (k, v) in p {
                if v.is_null() {
                    target.as_object_mut().unwrap().remove(k);
                } else {
                    merge(&mut target[k.as_str()], v);
                }
            }
        }
        other => *target = other.clone(),
    }
}

fn read_fixture(class: &str, rev: &str) -> Vec<Value> {
    let path = fixture(class, rev);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|_| {
        panic!(
            "missing {}; run with UPDATE_UPGRADE_FIXTURES=1",
            path.display()
        )
    });
    docs(&text)
}

#[test]
fn every_shipped_class_upgrades_from_its_previous_release_and_leaves_nothing_behind() {
    if std::env::var_os("UPDATE_UPGRADE_FIXTURES").is_some() {
        for (class, rev) in UPGRADES {
            make_fixture(class, rev);
        }
    }
    let shipped: BTreeSet<String> = std::fs::read_dir(root().join("gatewayclasses"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    let covered: BTreeSet<String> = UPGRADES
        .iter()
        .chain(NEW)
        .map(|(c, _)| (*c).to_owned())
        .collect();
    assert_eq!(
        covered, shipped,
        "every shipped class has an upgrade fixture, or is new (NEW says why)"
    );

    for (class, rev) in UPGRADES {
        let what = format!("{class} from {rev}");
        let old = read_fixture(class, rev);
        assert!(!old.is_empty(), "{what}: empty fixture");
        let dir = tempfile::tempdir().unwrap();
        let current = vec![root().join("examples").join(class)];
        // What the current class makes of a fresh start.
        let fresh = converge(&current, dir.path(), &format!("{class} fresh"));
        let fresh_ids: BTreeSet<String> = fresh.iter().map(id).collect();

        let before = listeners(&old);
        let mut live = old.clone();
        // What Crossplane records of each legacy managed resource: the external name the
        // adopting object must carry.
        for d in live.iter_mut().filter(|d| legacy_managed(d)) {
            let name = d["metadata"]["name"].as_str().unwrap().to_owned();
            d["metadata"]["annotations"]["crossplane.io/external-name"] =
                json!(format!("ext-{name}"));
        }
        let legacy: Vec<(String, String)> = live
            .iter()
            .filter(|d| legacy_managed(d))
            .map(|d| {
                (
                    d["kind"].as_str().unwrap().to_owned(),
                    d["metadata"]["name"].as_str().unwrap().to_owned(),
                )
            })
            .collect();
        let mut settled = false;
        for pass in 0..30 {
            let (next, _) = step(&current, dir.path(), &live, &format!("{what}, pass {pass}"));
            assert_eq!(
                listeners(&next),
                before,
                "{what}, pass {pass}: a child Gateway lost a listener"
            );
            if next == live {
                settled = true;
                break;
            }
            live = next;
        }
        assert!(settled, "{what}: did not settle in 30 passes");
        // Each took over the same cloud resource.
        for (kind, name) in &legacy {
            let successor = live
                .iter()
                .find(|d| d["kind"] == kind.as_str() && d["metadata"]["name"] == name.as_str())
                .unwrap_or_else(|| panic!("{what}: {kind} {name} has no successor"));
            assert_eq!(
                successor["metadata"]["annotations"]["crossplane.io/external-name"],
                json!(format!("ext-{name}")),
                "{what}: {kind} {name}"
            );
        }
        let ids: BTreeSet<String> = live.iter().map(id).collect();
        let left: Vec<&String> = ids.difference(&fresh_ids).collect();
        assert!(left.is_empty(), "{what}: left behind: {left:?}");
        let missing: Vec<&String> = fresh_ids.difference(&ids).collect();
        assert!(missing.is_empty(), "{what}: missing: {missing:?}");
        // Settled: nothing under way, nothing to delete, the Gateway Programmed.
        let (out, stderr) = render(&current, dir.path(), &live, &what);
        assert!(
            !stderr.contains("rollout:") && !stderr.contains("would delete"),
            "{what}: {stderr}"
        );
        let programmed = condition(&gateway_status(&out)["status"], "Programmed");
        assert_eq!(programmed["status"], "True", "{what}: {programmed}");
    }

    // The reported case: the Certificate the class at 52fd840 made (versioned as a whole,
    // `public-tls-<v>`) and the current one (per group, `public-tls-0-<v>`) share their
    // version; the old one went (checked above) and never while it was read (in `step`).
    let old = read_fixture("istio-certmanager-externaldns", "52fd840");
    let cert = old.iter().find(|d| d["kind"] == "Certificate").unwrap();
    let v = cert["metadata"]["labels"]["gatewright.dev/version"]
        .as_str()
        .unwrap();
    assert_eq!(cert["metadata"]["name"], format!("public-tls-{v}"));
}

/// The chart tells the controller what the previous release shipped for each class
/// (`files/previous-release/<class>/blueprint.yaml`, set as the blueprint's
/// `gatewright.dev/previous-release` annotation): each must be a class the chart still
/// ships, differ from its blueprint now (an unchanged class needs no revision 0), and
/// compile with this release (else the controller ignores it and says so).
#[test]
fn the_chart_says_what_the_previous_release_shipped_and_this_release_compiles_it() {
    let dir = root().join("charts/gatewright/files/previous-release");
    let release = std::fs::read_to_string(dir.join("VERSION")).unwrap();
    let release = release.trim();
    assert!(
        release.split('.').count() == 3 && release.split('.').all(|n| n.parse::<u32>().is_ok()),
        "files/previous-release/VERSION {release:?} is not a release"
    );
    let read = |p: &Path| -> gatewright::api::GatewayClassBlueprint {
        serde_saphyr::from_str(&std::fs::read_to_string(p).unwrap())
            .unwrap_or_else(|e| panic!("{}: {e}", p.display()))
    };
    let mut seen = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let entry = entry.unwrap();
        if !entry.file_type().unwrap().is_dir() {
            continue;
        }
        let class = entry.file_name().to_string_lossy().into_owned();
        let previous = read(&entry.path().join("blueprint.yaml"));
        let now = read(
            &root()
                .join("charts/gatewright/files/gatewayclasses")
                .join(&class)
                .join("blueprint.yaml"),
        );
        assert_eq!(previous.metadata.name.as_deref(), Some(class.as_str()));
        assert_ne!(
            previous.spec.revision_hash(),
            now.spec.revision_hash(),
            "{class}: unchanged since {release}: drop its files/previous-release copy"
        );
        // What the controller reads from the annotation the chart makes of it.
        let annotation = json!({"release": release, "spec": previous.spec}).to_string();
        let mut meta = now.metadata.clone();
        meta.annotations = Some(std::collections::BTreeMap::from([(
            gatewright::api::PREVIOUS_RELEASE_ANNOTATION.to_owned(),
            annotation,
        )]));
        let read_back = gatewright::api::PreviousRelease::of(&meta)
            .unwrap()
            .unwrap_or_else(|e| panic!("{class}: {e}"));
        assert_eq!(read_back.spec, previous.spec);
        if let Err(errors) = gatewright::render::prepared::Prepared::new(&class, &read_back.spec) {
            panic!("{class}: the spec of {release} does not compile with this release: {errors:?}");
        }
        seen += 1;
    }
    assert!(seen > 0, "no class in {}", dir.display());
}
