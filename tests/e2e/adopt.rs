//! A Gateway of aws-alb-crossplane moving from Crossplane's legacy cluster-scoped managed
//! resources (what the class made up to v0.1.0) to Crossplane v2's namespaced ones, on the
//! real provider-upjet-aws CRDs: nothing outside the cluster may be deleted or recreated.
//! Each legacy object is released (`managementPolicies: [Observe]`) before the object
//! adopting it is written, that object carries its external name, and the legacy object is
//! deleted only once its successor is ready. Crossplane's part (an external name and its
//! finalizer on each managed resource, the finalizer removed once a deleted one is
//! handled) is played here.

use std::collections::BTreeMap;
use std::time::Duration;

use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams};
use serde_json::json;

use crate::common::{TestNamespace, admin, apply_yaml, controller, wait_for};
use crate::controller::{
    cluster_dynamic, gateway_json, gateway_yaml, route_yaml, shipped, simulate,
};

const T: Duration = Duration::from_secs(120);
const FINALIZER: &str = "finalizer.managedresource.crossplane.io";

/// The kinds of the class: (group without `.aws.upbound.io` / `.aws.m.upbound.io`, kind,
/// plural).
const KINDS: &[(&str, &str, &str)] = &[
    ("ec2", "SecurityGroup", "securitygroups"),
    (
        "ec2",
        "SecurityGroupIngressRule",
        "securitygroupingressrules",
    ),
    ("elbv2", "LB", "lbs"),
    ("elbv2", "LBTargetGroup", "lbtargetgroups"),
    ("elbv2", "LBListener", "lblisteners"),
    ("acm", "Certificate", "certificates"),
    ("route53", "Record", "records"),
];

/// The class as v0.1.0 shipped it (the chart's copy of that release), named `name`.
fn previous_class(name: &str) -> String {
    let root = env!("CARGO_MANIFEST_DIR");
    let gc = std::fs::read_to_string(format!(
        "{root}/gatewayclasses/aws-alb-crossplane/gatewayclass.yaml"
    ))
    .unwrap();
    let bp = std::fs::read_to_string(format!(
        "{root}/charts/gatewright/files/previous-release/aws-alb-crossplane/blueprint.yaml"
    ))
    .unwrap();
    format!("{gc}\n---\n{bp}").replace("aws-alb-crossplane", name)
}

/// `Kind/name` -> object, for the Gateway's children of `group` (legacy or `.m.`).
async fn children(
    client: &kube::Client,
    uid: &str,
    legacy: bool,
) -> BTreeMap<String, DynamicObject> {
    let lp = ListParams::default().labels(&format!("gatewright.dev/gateway-uid={uid}"));
    let mut out = BTreeMap::new();
    for (g, kind, plural) in KINDS {
        let group = if legacy {
            format!("{g}.aws.upbound.io")
        } else {
            format!("{g}.aws.m.upbound.io")
        };
        let api = cluster_dynamic(client, &group, "v1beta1", kind, plural);
        for o in api.list(&lp).await.unwrap().items {
            out.insert(format!("{kind}/{}", o.metadata.name.clone().unwrap()), o);
        }
    }
    out
}

fn legacy_api(client: &kube::Client, kind: &str) -> Api<DynamicObject> {
    let (g, _, plural) = KINDS.iter().find(|(_, k, _)| *k == kind).unwrap();
    cluster_dynamic(
        client,
        &format!("{g}.aws.upbound.io"),
        "v1beta1",
        kind,
        plural,
    )
}

/// Whether a successor is ready as the class judges it: its template's `readyWhen` (the
/// load balancer's DNS name, the target group's and certificate's ARN), else the default
/// rules (a Ready condition, else it exists).
fn ready(kind: &str, o: &DynamicObject) -> bool {
    let at = &o.data["status"]["atProvider"];
    let has = |f: &str| at[f].as_str().is_some_and(|v| !v.is_empty());
    let value = serde_json::to_value(o).unwrap();
    match kind {
        "LB" => has("dnsName"),
        "LBTargetGroup" | "Certificate" => has("arn"),
        _ => gatewright::plan::readiness::default_rules(&value).is_ready(),
    }
}

#[tokio::test]
async fn legacy_managed_resources_are_released_adopted_and_deleted_once_replaced() {
    let client = admin().await;
    let _ctl = controller();
    let ns = TestNamespace::new(&client, "adopt").await;
    let class = format!("adopt-{}", ns.name);
    let zone = |t: String| t.replace("hostedZoneId: \"\"", "hostedZoneId: Z0TEST");
    apply_yaml(&client, &zone(previous_class(&class))).await;
    apply_yaml(&client, &gateway_yaml(&ns.name, &class)).await;
    apply_yaml(&client, &route_yaml(&ns.name, "shop", "shop.example.com")).await;
    let uid = gateway_json(&client, &ns.name).await["metadata"]["uid"]
        .as_str()
        .unwrap()
        .to_owned();

    // What v0.1.0 made of it on the real provider's CRDs: its security group and rules, its
    // load balancer and the ACM certificate. Its target group and validation records are
    // refused (the real CRDs require a name v0.1.0 never gave the target group, and a
    // Record has no region), so neither they nor the listeners reading the target group
    // exist.
    let legacy = wait_for("v0.1.0's managed resources", T, || async {
        simulate(&client, &ns.name, 1).await;
        let l = children(&client, &uid, true).await;
        let kinds: std::collections::BTreeSet<&str> =
            l.keys().map(|k| k.split('/').next().unwrap()).collect();
        (kinds.len() == 4).then_some(l)
    })
    .await;
    let kinds: Vec<&str> = legacy
        .keys()
        .map(|k| k.split('/').next().unwrap())
        .collect();
    for k in [
        "SecurityGroup",
        "SecurityGroupIngressRule",
        "LB",
        "Certificate",
    ] {
        assert!(kinds.contains(&k), "{k}: {kinds:?}");
    }
    // Said in the Gateway's status, naming the template and the field.
    let g = wait_for("the refusal in status", T, || async {
        let g = gateway_json(&client, &ns.name).await;
        let said = g["status"]["conditions"].to_string();
        (said.contains("the API server refused") && said.contains("template ")).then_some(said)
    })
    .await;
    assert!(
        g.contains("spec.forProvider.name is a required parameter") || g.contains("region"),
        "{g}"
    );
    // And in a Warning Event.
    let events: Api<k8s_openapi::api::events::v1::Event> =
        Api::namespaced(client.clone(), &ns.name);
    wait_for("a Warning Event naming the refusal", T, || async {
        events
            .list(&Default::default())
            .await
            .unwrap()
            .items
            .iter()
            .any(|e| {
                e.type_.as_deref() == Some("Warning")
                    && e.note
                        .as_deref()
                        .is_some_and(|n| n.contains("the API server refused"))
            })
            .then_some(())
    })
    .await;
    // Crossplane's part: each managed resource names its cloud resource, and holds its
    // finalizer until it has handled a deletion.
    for (k, o) in &legacy {
        let (kind, name) = k.split_once('/').unwrap();
        legacy_api(&client, kind)
            .patch(
                name,
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": {
                    "annotations": {"crossplane.io/external-name": format!("ext-{name}")},
                    "finalizers": [FINALIZER]}})),
            )
            .await
            .unwrap();
        assert_eq!(o.data["spec"]["managementPolicies"], json!(["*"]), "{k}");
    }

    // The current class.
    apply_yaml(&client, &zone(shipped("aws-alb-crossplane", &class))).await;
    let deleted = std::sync::Mutex::new(std::collections::BTreeSet::new());
    wait_for("every legacy object replaced and gone", T, || async {
        simulate(&client, &ns.name, 1).await;
        let new = children(&client, &uid, false).await;
        let old = children(&client, &uid, true).await;
        for (k, n) in &new {
            let (kind, name) = k.split_once('/').unwrap();
            // Read after its successor: released before the successor was written.
            let Some(o) = legacy_api(&client, kind).get_opt(name).await.unwrap() else {
                continue;
            };
            assert_eq!(
                o.data["spec"]["managementPolicies"],
                json!(["Observe"]),
                "{k}: a successor exists while the legacy object can still delete its cloud resource"
            );
            assert_eq!(
                n.metadata.annotations.as_ref().unwrap()["crossplane.io/external-name"],
                format!("ext-{name}"),
                "{k}: the successor names the same cloud resource"
            );
            assert_eq!(n.metadata.namespace.as_deref(), Some(ns.name.as_str()));
        }
        for (k, o) in &old {
            if o.metadata.deletion_timestamp.is_none() {
                continue;
            }
            // Deleted: released, and replaced by a successor that is ready.
            assert_eq!(o.data["spec"]["managementPolicies"], json!(["Observe"]), "{k}");
            let successor = new.get(k).unwrap_or_else(|| panic!("{k} deleted without a successor"));
            let (kind, name) = k.split_once('/').unwrap();
            assert!(ready(kind, successor), "{k} deleted before its successor was ready");
            deleted.lock().unwrap().insert(k.clone());
            // Crossplane, told to observe only, deletes nothing and lets it go.
            legacy_api(&client, kind)
                .patch(
                    name,
                    &PatchParams::default(),
                    &Patch::Merge(json!({"metadata": {"finalizers": null}})),
                )
                .await
                .unwrap();
        }
        let programmed = gateway_json(&client, &ns.name).await["status"]["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|c| c["type"] == "Programmed" && c["status"] == "True");
        (old.is_empty() && programmed).then_some(())
    })
    .await;
    assert_eq!(
        deleted.lock().unwrap().len(),
        legacy.len(),
        "every legacy object seen deleted"
    );
    // Every one of them has a successor carrying its external name; the Gateway owns them.
    let new = children(&client, &uid, false).await;
    for k in legacy.keys() {
        let n = new.get(k).unwrap_or_else(|| panic!("{k}: no successor"));
        let (_, name) = k.split_once('/').unwrap();
        assert_eq!(
            n.metadata.annotations.as_ref().unwrap()["crossplane.io/external-name"],
            format!("ext-{name}")
        );
        assert_eq!(
            n.metadata.owner_references.as_ref().unwrap()[0].kind,
            "Gateway"
        );
    }
    let _ =
        kube::Api::<gateway_api::apis::standard::gatewayclasses::GatewayClass>::all(client.clone())
            .delete(&class, &Default::default())
            .await;
    ns.delete().await;
}
