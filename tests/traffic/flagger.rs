//! (h) A canary driven by the real Flagger (v1.36.1, provider `gatewayapi:v1`; started by
//! tests/cluster/downstream), with real traffic through the Traefik gateway gatewright made.
//!
//! The app is a Deployment of the conformance suite's echo image, whose Pods the kubelet
//! stand-in (tests/cluster/kubelet.py) runs as processes that answer with their Pod's name.
//! Flagger makes the primary Deployment, the Services and the HTTPRoute attached to the
//! parent Gateway; gatewright copies that route to the Traefik gateway; Traefik sends to the
//! Pods the cluster's EndpointSlice controller lists. A change of the Deployment's template
//! starts the canary: at each of Flagger's weights, once Traefik has taken it, the share of
//! [`REQUESTS`] requests the canary Pods answer must be within [`TOLERANCE`] points of the
//! weight; after the promotion every request is answered by the primary, which runs the new
//! template.

use super::{REQUESTS, T, TOLERANCE, apply_yaml, children, cond, dynamic, http, traefik_took};
use kube::Client;
use kube::api::{DeleteParams, Patch, PatchParams};
use serde_json::{Value, json};
use std::time::{Duration, Instant};

/// The image the kubelet stand-in runs (the conformance suite's echo backend).
const ECHO_IMAGE: &str = "registry.k8s.io/gateway-api/conformance/echo-basic:v0.1.0";
/// Flagger's step and top weight for the canary, and the time between steps: long enough
/// for Traefik to take a weight and for the requests of one step.
const STEP: u32 = 25;
const MAX: u32 = 50;
const INTERVAL: &str = "15s";
/// How long Flagger may take over a phase of several intervals.
const FLAGGER_T: Duration = Duration::from_secs(240);

fn app_yaml(ns: &str, app: &str, rev: u32) -> String {
    format!(
        r#"apiVersion: apps/v1
kind: Deployment
metadata: {{name: {app}, namespace: {ns}, labels: {{app: {app}}}}}
spec:
  replicas: 1
  selector: {{matchLabels: {{app: {app}}}}}
  template:
    metadata:
      labels: {{app: {app}}}
      annotations: {{gatewright.test/revision: "{rev}"}}
    spec:
      containers:
      - name: echo
        image: {ECHO_IMAGE}
        ports: [{{containerPort: 3000}}]
        env:
        - {{name: POD_NAME, valueFrom: {{fieldRef: {{fieldPath: metadata.name}}}}}}
        - {{name: NAMESPACE, valueFrom: {{fieldRef: {{fieldPath: metadata.namespace}}}}}}
"#
    )
}

fn canary_yaml(ns: &str, app: &str, gw: &str, host: &str) -> String {
    format!(
        r"apiVersion: flagger.app/v1beta1
kind: Canary
metadata: {{name: {app}, namespace: {ns}}}
spec:
  provider: gatewayapi:v1
  targetRef: {{apiVersion: apps/v1, kind: Deployment, name: {app}}}
  progressDeadlineSeconds: 120
  service:
    port: 8080
    targetPort: 3000
    hosts: [{host}]
    gatewayRefs: [{{name: {gw}, namespace: {ns}}}]
  analysis:
    interval: {INTERVAL}
    threshold: 2
    stepWeight: {STEP}
    maxWeight: {MAX}
    metrics: []
"
    )
}

/// The phase Flagger gives the canary.
async fn phase(canaries: &kube::Api<kube::api::DynamicObject>, app: &str) -> Option<String> {
    let c = serde_json::to_value(canaries.get(app).await.ok()?).ok()?;
    c["status"]["phase"].as_str().map(str::to_owned)
}

/// The weights (primary, canary) Flagger wrote on its HTTPRoute.
async fn route_weights(
    routes: &kube::Api<kube::api::DynamicObject>,
    app: &str,
) -> Option<(u32, u32)> {
    let r = serde_json::to_value(routes.get(app).await.ok()?).ok()?;
    let refs = r["spec"]["rules"].as_array()?.last()?["backendRefs"].clone();
    let w = |i: usize| {
        refs[i]["weight"]
            .as_u64()
            .and_then(|w| u32::try_from(w).ok())
    };
    Some((w(0)?, w(1)?))
}

/// `n` requests to `host`: how many the primary's Pods answered, the canary's, and failed.
async fn shares(port: u16, host: &str, app: &str, n: usize) -> (usize, usize, usize) {
    let primary = format!("{app}-primary-");
    let canary = format!("{app}-");
    let (mut p, mut c, mut failed) = (0, 0, 0);
    for _ in 0..n {
        match http(port, host, "/", &[]).await {
            Ok(a) if a.code == 200 => match a.body["pod"].as_str() {
                Some(pod) if pod.starts_with(&primary) => p += 1,
                Some(pod) if pod.starts_with(&canary) => c += 1,
                _ => failed += 1,
            },
            _ => failed += 1,
        }
    }
    (p, c, failed)
}

/// Runs the canary on the parent Gateway `gw` (its UID `uid`, an HTTP listener for
/// `*.<zone>` on Traefik's `web` entrypoint `port`); returns the figures it printed.
pub(super) async fn canary(
    client: &Client,
    ns: &str,
    gw: &str,
    uid: &str,
    zone: &str,
    port: u16,
) -> String {
    let began = Instant::now();
    let app = super::unique_name("podinfo");
    let host = format!("{app}.{zone}");
    let deployments = dynamic(client, ns, "apps", "v1", "Deployment");
    let canaries = dynamic(client, ns, "flagger.app", "v1beta1", "Canary");
    let routes = dynamic(client, ns, "gateway.networking.k8s.io", "v1", "HTTPRoute");
    apply_yaml(client, &app_yaml(ns, &app, 1)).await;
    apply_yaml(client, &canary_yaml(ns, &app, gw, &host)).await;

    // Flagger makes the primary (the kubelet stand-in runs its Pod), the Services and the
    // route at 100/0, then scales the target down: Initialized.
    // Flagger acts on a canary once per analysis interval: creating the primary, then the
    // Services and the route once the primary is ready, then scaling the target down.
    super::wait_for("Flagger to initialize the canary", FLAGGER_T, || async {
        (phase(&canaries, &app).await.as_deref() == Some("Initialized")).then_some(())
    })
    .await;
    let initialized = began.elapsed();
    traefik_took(client, ns, uid, &app, (100, 0)).await;
    let (p, c, failed) = shares(port, &host, &app, REQUESTS).await;
    assert_eq!(
        (p, c, failed),
        (REQUESTS, 0, 0),
        "before the canary, the primary answers every request"
    );

    // A new template: Flagger scales the canary up and moves the weight step by step.
    let t = Instant::now();
    deployments
        .patch(
            &app,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"template": {"metadata": {"annotations": {"gatewright.test/revision": "2"}}}}})),
        )
        .await
        .unwrap();
    let mut figures = Vec::new();
    let mut weight = STEP;
    while weight <= MAX {
        let want = (100 - weight, weight);
        super::wait_for(
            &format!("Flagger to set the weights {want:?}"),
            T,
            || async { (route_weights(&routes, &app).await == Some(want)).then_some(()) },
        )
        .await;
        traefik_took(client, ns, uid, &app, want).await;
        let (p, c, failed) = shares(port, &host, &app, REQUESTS).await;
        // The step must not have moved while it was measured.
        assert_eq!(
            route_weights(&routes, &app).await,
            Some(want),
            "Flagger moved on while the step at {weight} was measured: lengthen INTERVAL"
        );
        let share = 100.0 * c as f64 / (p + c).max(1) as f64;
        eprintln!(
            "traffic (h): Flagger weight {weight}: canary answered {c} of {} ({share:.1} %), \
             primary {p}, failed {failed}, {:.1?} after the change",
            p + c + failed,
            t.elapsed()
        );
        assert_eq!(failed, 0, "no request fails during the canary");
        assert!(
            (share - f64::from(weight)).abs() <= TOLERANCE,
            "canary share {share:.1} % at Flagger's weight {weight} (±{TOLERANCE})"
        );
        figures.push(format!("{weight}→{share:.1}%"));
        weight += STEP;
    }

    // Promotion: the primary takes the new template, the route goes back to 100/0, the
    // canary is scaled down: Succeeded.
    super::wait_for("Flagger to promote the canary", FLAGGER_T, || async {
        (phase(&canaries, &app).await.as_deref() == Some("Succeeded")).then_some(())
    })
    .await;
    let promoted = t.elapsed();
    traefik_took(client, ns, uid, &app, (100, 0)).await;
    let primary =
        serde_json::to_value(deployments.get(&format!("{app}-primary")).await.unwrap()).unwrap();
    assert_eq!(
        primary["spec"]["template"]["metadata"]["annotations"]["gatewright.test/revision"], "2",
        "the primary runs the promoted template"
    );
    let (p, c, failed) = shares(port, &host, &app, REQUESTS).await;
    assert_eq!(
        (p, c, failed),
        (REQUESTS, 0, 0),
        "after the promotion, the primary answers every request"
    );
    // The route gatewright copied is the one Flagger owns; gatewright accepted it.
    let route = serde_json::to_value(routes.get(&app).await.unwrap()).unwrap();
    let ours = route["status"]["parents"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["controllerName"] == "gatewright.dev/gateway-controller")
        .cloned()
        .unwrap_or(Value::Null);
    assert_eq!(
        cond(&json!({"status": ours}), "Accepted").map(|c| c["status"].clone()),
        Some(json!("True")),
        "gatewright's status on Flagger's route: {route}"
    );
    assert_eq!(
        children(&routes, uid)
            .await
            .iter()
            .filter(|r| r["metadata"]["name"]
                .as_str()
                .is_some_and(|n| n.starts_with(&format!("{app}-"))))
            .count(),
        1
    );

    // Flagger's objects go with the Canary (its owner references); the target too.
    canaries
        .delete(&app, &DeleteParams::default())
        .await
        .unwrap();
    deployments
        .delete(&app, &DeleteParams::default())
        .await
        .unwrap();
    super::wait_for("Flagger's route gone", T, || async {
        routes.get_opt(&app).await.unwrap().is_none().then_some(())
    })
    .await;
    format!(
        "Flagger canary: initialized {initialized:.1?}; shares {}; promoted {promoted:.1?} after \
         the change; 0 failed of {} requests",
        figures.join(", "),
        REQUESTS * (2 + figures.len())
    )
}
