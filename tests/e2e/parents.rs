//! A route's entries of ours for a parent that is no longer ours: a ListenerSet deleted, a
//! ListenerSet the Gateway no longer allows, a Gateway moved to another controller's class,
//! a Gateway deleted. Each time, for an HTTPRoute and a GRPCRoute, our entry for that
//! parent is removed (gone, or not ours) or turns `Accepted=False` (a ListenerSet still
//! there but not allowed: `NotAllowedByListeners`), and another controller's entry stays.

use std::time::{Duration, Instant};

use kube::Client;
use kube::api::{Api, DeleteParams, DynamicObject, PostParams};
use serde_json::json;

use crate::common::{TestNamespace, admin, apply_yaml, controller, wait_for};
use crate::controller::{cond, configmap_class, dynamic};

const T: Duration = Duration::from_secs(60);
const OURS: &str = "gatewright.dev/gateway-controller";
const OTHER: &str = "example.com/other-controller";
const KINDS: [(&str, &str); 2] = [("HTTPRoute", "httproutes"), ("GRPCRoute", "grpcroutes")];

fn routes(client: &Client, ns: &str, kind: &str, plural: &str) -> Api<DynamicObject> {
    dynamic(client, ns, "gateway.networking.k8s.io", "v1", kind, plural)
}

/// Our entries of route `r`: (parent kind, parent name) -> (Accepted status, reason), at
/// the route's generation; `None` while an entry of ours lags behind it.
fn ours(r: &DynamicObject) -> Option<Vec<(String, String, String, String)>> {
    let generation = r.metadata.generation.unwrap_or(0);
    let mut out = Vec::new();
    for e in r.data["status"]["parents"].as_array().into_iter().flatten() {
        if e["controllerName"] != OURS {
            continue;
        }
        let a = cond(&e["conditions"], "Accepted")?;
        if a["observedGeneration"] != generation {
            return None;
        }
        out.push((
            e["parentRef"]["kind"]
                .as_str()
                .unwrap_or("Gateway")
                .to_owned(),
            e["parentRef"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
            a["status"].as_str().unwrap_or_default().to_owned(),
            a["reason"].as_str().unwrap_or_default().to_owned(),
        ));
    }
    out.sort();
    Some(out)
}

fn entry(kind: &str, name: &str, status: &str, reason: &str) -> (String, String, String, String) {
    (kind.into(), name.into(), status.into(), reason.into())
}

/// Waits until every route kind's route `r` holds exactly `want` of ours, and the other
/// controller's entry; returns how long that took.
async fn wait_ours(
    client: &Client,
    ns: &str,
    what: &str,
    want: &[(String, String, String, String)],
) -> Duration {
    let t = Instant::now();
    for (kind, plural) in KINDS {
        let api = routes(client, ns, kind, plural);
        wait_for(&format!("{kind} r: {what}"), T, || {
            let api = api.clone();
            async move {
                let r = api.get("r").await.ok()?;
                let foreign = r.data["status"]["parents"]
                    .as_array()?
                    .iter()
                    .any(|e| e["controllerName"] == OTHER);
                (foreign && ours(&r)? == want).then_some(())
            }
        })
        .await;
    }
    t.elapsed()
}

/// Adds another controller's entry to the status of every route kind's route `r`.
async fn add_foreign_entry(client: &Client, ns: &str) {
    for (kind, plural) in KINDS {
        let api = routes(client, ns, kind, plural);
        wait_for(&format!("{kind} r: another controller's entry"), T, || {
            let api = api.clone();
            async move {
                let mut r = api.get("r").await.ok()?;
                let mut parents = r.data["status"]["parents"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default();
                parents.push(json!({
                    "parentRef": {"name": "elsewhere"},
                    "controllerName": OTHER,
                    "conditions": [{
                        "type": "Accepted", "status": "True", "reason": "Accepted",
                        "message": "", "observedGeneration": r.metadata.generation,
                        "lastTransitionTime": "2026-01-01T00:00:00Z"
                    }]
                }));
                r.data["status"] = json!({ "parents": parents });
                r.metadata.managed_fields = None;
                api.replace_status("r", &PostParams::default(), &r)
                    .await
                    .ok()
                    .map(|_| ())
            }
        })
        .await;
    }
}

#[tokio::test]
async fn a_parent_that_is_no_longer_ours_leaves_no_accepted_entry() {
    let client = admin().await;
    let _ctl = controller();
    let ns = TestNamespace::new(&client, "parents").await;
    let n = &ns.name;
    let class = format!("parents-{n}");
    let foreign_class = format!("parents-other-{n}");
    apply_yaml(&client, &configmap_class(&class)).await;
    apply_yaml(
        &client,
        &format!(
            r#"apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {{name: {foreign_class}}}
spec: {{controllerName: {OTHER}}}
"#
        ),
    )
    .await;
    let gateway = |allowed: &str, class: &str| {
        format!(
            r#"apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {{name: gw, namespace: {n}}}
spec:
  gatewayClassName: {class}
  allowedListeners: {{namespaces: {{from: {allowed}}}}}
  listeners:
  - {{name: http, port: 80, protocol: HTTP}}
"#
        )
    };
    let set = format!(
        r#"apiVersion: gateway.networking.k8s.io/v1
kind: ListenerSet
metadata: {{name: team, namespace: {n}}}
spec:
  parentRef: {{name: gw}}
  listeners:
  - {{name: web, port: 8080, protocol: HTTP}}
"#
    );
    let parent_refs =
        "[{name: gw}, {group: gateway.networking.k8s.io, kind: ListenerSet, name: team}]";
    apply_yaml(
        &client,
        &format!(
            r#"{gw}---
{set}---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: r, namespace: {n}}}
spec:
  parentRefs: {parent_refs}
  rules: [{{backendRefs: [{{name: svc, port: 80}}]}}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: GRPCRoute
metadata: {{name: r, namespace: {n}}}
spec:
  parentRefs: {parent_refs}
  rules: [{{backendRefs: [{{name: svc, port: 80}}]}}]
"#,
            gw = gateway("Same", &class)
        ),
    )
    .await;
    let both = vec![
        entry("Gateway", "gw", "True", "Accepted"),
        entry("ListenerSet", "team", "True", "Accepted"),
    ];
    add_foreign_entry(&client, n).await;
    wait_ours(&client, n, "accepted by the Gateway and the set", &both).await;
    let mut took = Vec::new();

    // 1. The ListenerSet deleted: our entry for it goes.
    let sets = dynamic(
        &client,
        n,
        "gateway.networking.k8s.io",
        "v1",
        "ListenerSet",
        "listenersets",
    );
    sets.delete("team", &DeleteParams::default()).await.unwrap();
    let only_gw = vec![entry("Gateway", "gw", "True", "Accepted")];
    took.push((
        "ListenerSet deleted",
        wait_ours(&client, n, "the set's entry removed", &only_gw).await,
    ));

    // 2. The set back, then no longer allowed by its Gateway: Accepted=False.
    apply_yaml(&client, &set).await;
    wait_ours(&client, n, "the set's entry back", &both).await;
    apply_yaml(&client, &gateway("None", &class)).await;
    took.push((
        "ListenerSet no longer allowed",
        wait_ours(
            &client,
            n,
            "the set's entry not accepted",
            &[
                entry("Gateway", "gw", "True", "Accepted"),
                entry("ListenerSet", "team", "False", "NotAllowedByListeners"),
            ],
        )
        .await,
    ));

    // 3. The Gateway moved to another controller's class: every entry of ours goes.
    apply_yaml(&client, &gateway("Same", &class)).await;
    wait_ours(&client, n, "both entries accepted again", &both).await;
    apply_yaml(&client, &gateway("Same", &foreign_class)).await;
    took.push((
        "Gateway moved to another controller's class",
        wait_ours(&client, n, "no entry of ours", &[]).await,
    ));

    // 4. Back to ours, then the Gateway deleted: every entry of ours goes.
    apply_yaml(&client, &gateway("Same", &class)).await;
    wait_ours(&client, n, "both entries accepted again", &both).await;
    let gateways = dynamic(
        &client,
        n,
        "gateway.networking.k8s.io",
        "v1",
        "Gateway",
        "gateways",
    );
    gateways
        .delete("gw", &DeleteParams::default())
        .await
        .unwrap();
    took.push((
        "Gateway deleted",
        wait_ours(&client, n, "no entry of ours", &[]).await,
    ));

    for (what, t) in &took {
        println!("route status corrected after: {what}: {t:?} (both route kinds)");
    }
    // The test's own class goes; the other class was never ours.
    let classes =
        Api::<gateway_api::apis::standard::gatewayclasses::GatewayClass>::all(client.clone());
    for c in [&class, &foreign_class] {
        let _ = classes.delete(c, &DeleteParams::default()).await;
    }
    ns.delete().await;
}
