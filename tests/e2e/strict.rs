//! Every child of every shipped class, against the real CRDs of what it is written for
//! (Gateway API, Istio, cert-manager, external-dns, AWS Load Balancer Controller, and
//! Crossplane's provider-upjet-aws: `tests/cluster/crds.sh`): each class's example is
//! rendered until nothing changes, every child simulated ready between rounds (so that
//! what waits for a status is rendered too), and each child is applied as the controller
//! applies it (server-side apply, strict field validation), as a dry run. An unknown field,
//! a missing required one or a broken validation rule fails the test, naming the class,
//! the template and the field.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use gatewright::cli;
use gatewright::render::labels;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::core::GroupVersionKind;
use kube::discovery::Scope;
use serde_json::Value;

use crate::common::{TestNamespace, admin};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The example of `class` rendered round after round, its children simulated ready, until
/// the children stop changing: every child it ends up with.
fn converged_children(class: &str) -> Vec<Value> {
    let dir = tempfile::tempdir().unwrap();
    let live = dir.path().join("live.yaml");
    let now = Time("2026-01-01T00:00:00Z".parse().unwrap());
    let mut previous: Vec<Value> = Vec::new();
    for round in 1..=10 {
        let out = cli::render(
            &[root().join("examples").join(class), dir.path().to_owned()],
            "gatewright-system",
            &now,
        );
        assert_eq!(
            out.code,
            cli::EXIT_OK,
            "{class} round {round}: {:?}",
            out.stderr
        );
        let children: Vec<Value> = gatewright::render::output::parse_documents(&out.stdout)
            .unwrap()
            .iter()
            .filter(|d| d["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "gatewright")
            .map(gatewright::simulate::as_ready)
            .collect();
        if children == previous {
            return children;
        }
        let text: String = children
            .iter()
            .map(|c| format!("---\n{}", serde_saphyr::to_string(c).unwrap()))
            .collect();
        std::fs::write(&live, text).unwrap();
        previous = children;
    }
    panic!("{class} did not converge in 10 rounds");
}

/// Applies `obj` (a dry run, strict field validation, as the controller applies children)
/// in namespace `ns` when its kind is namespaced. `Err`: what the API server said.
async fn dry_apply(client: &kube::Client, obj: &Value, ns: &str) -> Result<(), String> {
    let (group, version) = match obj["apiVersion"].as_str().unwrap().split_once('/') {
        Some((g, v)) => (g, v),
        None => ("", obj["apiVersion"].as_str().unwrap()),
    };
    let gvk = GroupVersionKind::gvk(group, version, obj["kind"].as_str().unwrap());
    let (ar, caps) = kube::discovery::pinned_kind(client, &gvk)
        .await
        .map_err(|e| format!("kind not served: {e}"))?;
    let mut obj = obj.clone();
    obj.as_object_mut().unwrap().remove("status");
    let api: Api<DynamicObject> = if caps.scope == Scope::Namespaced {
        obj["metadata"]["namespace"] = Value::String(ns.to_owned());
        Api::namespaced_with(client.clone(), ns, &ar)
    } else {
        Api::all_with(client.clone(), &ar)
    };
    let mut pp = PatchParams::apply("gatewright").force().validation_strict();
    pp.dry_run = true;
    let name = obj["metadata"]["name"].as_str().unwrap().to_owned();
    api.patch(&name, &pp, &Patch::Apply(&obj))
        .await
        .map(|_| ())
        .map_err(|e| match e {
            kube::Error::Api(s) => s.message.clone(),
            e => e.to_string(),
        })
}

#[tokio::test]
async fn every_child_of_every_shipped_class_passes_strict_validation_on_real_crds() {
    let client = admin().await;
    let ns = TestNamespace::new(&client, "strict").await;
    let classes: BTreeSet<String> = std::fs::read_dir(root().join("gatewayclasses"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    let mut refused = Vec::new();
    // Kind (group) -> how many children of it were checked, over every class.
    let mut checked: BTreeMap<String, usize> = BTreeMap::new();
    for class in &classes {
        let children = converged_children(class);
        assert!(!children.is_empty(), "{class}: no child rendered");
        for c in &children {
            let kind = format!(
                "{} ({})",
                c["kind"].as_str().unwrap(),
                c["apiVersion"].as_str().unwrap()
            );
            *checked.entry(kind.clone()).or_default() += 1;
            if let Err(e) = dry_apply(&client, c, &ns.name).await {
                refused.push(format!(
                    "{class}: template {}: {kind} {}: {e}",
                    labels::template(c).unwrap_or("?"),
                    c["metadata"]["name"].as_str().unwrap_or_default()
                ));
            }
        }
    }
    println!("checked with strict validation, dry run:");
    for (kind, n) in &checked {
        println!("  {n:3} {kind}");
    }
    assert!(refused.is_empty(), "refused:\n{}", refused.join("\n"));
    // Every kind of the Crossplane class is among them, in Crossplane v2's namespaced
    // groups.
    for kind in [
        "LB (elbv2.aws.m.upbound.io/v1beta1)",
        "LBListener (elbv2.aws.m.upbound.io/v1beta1)",
        "LBTargetGroup (elbv2.aws.m.upbound.io/v1beta1)",
        "SecurityGroup (ec2.aws.m.upbound.io/v1beta1)",
        "SecurityGroupIngressRule (ec2.aws.m.upbound.io/v1beta1)",
        "Certificate (acm.aws.m.upbound.io/v1beta1)",
        "Record (route53.aws.m.upbound.io/v1beta1)",
        "TargetGroupBinding (elbv2.k8s.aws/v1beta1)",
    ] {
        assert!(
            checked.contains_key(kind),
            "{kind} not checked: {checked:?}"
        );
    }

    // The check can fail: what the class once rendered is refused, naming the field. A
    // Record with a region (a field Route53 records do not have) ...
    let aws = converged_children("aws-alb-crossplane");
    let mut record = aws.iter().find(|c| c["kind"] == "Record").unwrap().clone();
    record["spec"]["forProvider"]["region"] = Value::String("eu-west-1".into());
    let e = dry_apply(&client, &record, &ns.name).await.unwrap_err();
    assert!(e.contains("region"), "{e}");
    // ... and a target group without the name AWS requires (a CEL rule of the real CRD).
    let mut tg = aws
        .iter()
        .find(|c| c["kind"] == "LBTargetGroup")
        .unwrap()
        .clone();
    tg["spec"]["forProvider"]
        .as_object_mut()
        .unwrap()
        .remove("name");
    let e = dry_apply(&client, &tg, &ns.name).await.unwrap_err();
    assert!(
        e.contains("spec.forProvider.name is a required parameter"),
        "{e}"
    );
    ns.delete().await;
}
