//! A blueprint rollout across the members of a fleet, on real API servers: a hub (the test
//! cluster) and two members of their own, one labelled `stage: canary` in its
//! ClusterProfile. Each member has the same blueprint, whose policy's first wave selects
//! the canary cluster (`clusterSelector`), and two Gateways of its class.
//!
//! - The blueprint changed in the other member first: none of its Gateways moves; its
//!   rollout says it waits for the canary wave in the canary member. Changed there too:
//!   the canary member's Gateways move, and only once its wave has passed do the other
//!   member's move (checked at every poll of the children: no child of the other member
//!   holds the new value before the canary member's status says its wave passed).
//! - A revision that does not render, in both members: it halts in the canary member, and
//!   the other member halts too (its rollout names the canary member), its Gateways still
//!   `Programmed` on the revision they ran, their children unchanged.
//!
//! A test binary of its own, so that no other controller runs on the hub meanwhile.
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

#[allow(
    dead_code,
    reason = "shared with two_clusters; not every helper is used here"
)]
#[path = "fleet/common.rs"]
mod fleet;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use gateway_api::apis::standard::gateways::Gateway;
use gatewright::api::{GatewayClassBlueprint, RolloutPhase, RolloutStatus};
use gatewright::controller::{ClusterId, FleetOptions, Options};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ListParams, Patch, PatchParams};
use kube::{Client, ResourceExt};

use common::{TestNamespace, admin, apply_yaml, unique_name, wait_for};
use fleet::{Member, T, enrol, member_kubeconfig, served};

const NS: &str = "apps";
const GATEWAYS: [&str; 2] = ["g0", "g1"];

/// A class whose blueprint renders a ConfigMap per Gateway holding `value`, rolled out
/// with a canary wave of the members labelled `stage: canary`, then the rest.
fn class_yaml(name: &str, value: &str) -> String {
    format!(
        r#"apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {{name: {name}}}
spec:
  controllerName: gatewright.dev/gateway-controller
  parametersRef: {{group: gatewright.dev, kind: GatewayClassBlueprint, name: {name}}}
---
apiVersion: gatewright.dev/v1alpha1
kind: GatewayClassBlueprint
metadata: {{name: {name}}}
spec:
  rolloutPolicy:
    waves:
    - name: canary
      clusterSelector: {{matchLabels: {{stage: canary}}}}
      bakeSeconds: 2
      progressDeadlineSeconds: 60
  gatewayTemplates:
  - name: cm
    template: |
{template}
  status:
    template: |
      addresses: [{{type: IPAddress, value: 192.0.2.10}}]
"#,
        template = template(value)
    )
}

fn template(value: &str) -> String {
    format!(
        "      apiVersion: v1\n      kind: ConfigMap\n      metadata:\n        name: {{{{ gateway.metadata.name ~ \"-cm\" }}}}\n      data:\n        value: \"{value}\"\n"
    )
}

/// Renders YAML that does not parse: a template error only a render finds.
fn broken() -> String {
    "      apiVersion: v1\n      kind: ConfigMap\n      metadata: {name: {{ gateway.metadata.name ~ \"-cm\" }}\n      data: [\n".to_owned()
}

async fn set_template(client: &Client, name: &str, template: &str) {
    let text: String = template
        .lines()
        .map(|l| l.strip_prefix("      ").unwrap_or(l))
        .collect::<Vec<_>>()
        .join("\n")
        + "\n";
    let patch =
        serde_json::json!({"spec": {"gatewayTemplates": [{"name": "cm", "template": text}]}});
    Api::<GatewayClassBlueprint>::all(client.clone())
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
}

async fn rollout(client: &Client, name: &str) -> Option<RolloutStatus> {
    Api::<GatewayClassBlueprint>::all(client.clone())
        .get(name)
        .await
        .ok()?
        .status?
        .rollout
}

/// The value each Gateway's ConfigMap holds.
async fn values(client: &Client) -> BTreeMap<String, String> {
    Api::<ConfigMap>::namespaced(client.clone(), NS)
        .list(&ListParams::default().labels("app.kubernetes.io/managed-by=gatewright"))
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|c| {
            let v = c.data.as_ref()?.get("value")?.clone();
            Some((c.name_any().trim_end_matches("-cm").to_owned(), v))
        })
        .collect()
}

/// The revision a Gateway's status names, when it is `Programmed` on it.
fn programmed_on(gw: &Gateway) -> Option<String> {
    let conds = gw.status.as_ref()?.conditions.as_ref()?;
    let find = |t: &str| {
        conds
            .iter()
            .find(|c| c.type_ == t && c.observed_generation == gw.metadata.generation)
    };
    let r = find("gatewright.dev/Revision")?;
    (find("Programmed")?.status == "True")
        .then(|| r.message.split(':').next().unwrap_or_default().to_owned())
}

/// The revision each Gateway of the member is `Programmed` on (`None`: not Programmed).
async fn programmed(client: &Client) -> BTreeMap<String, Option<String>> {
    Api::<Gateway>::namespaced(client.clone(), NS)
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .iter()
        .map(|g| (g.name_any(), programmed_on(g)))
        .collect()
}

async fn all_programmed_on(client: &Client, revision: &str, what: &str) {
    wait_for(what, T, || async {
        let p = programmed(client).await;
        (p.len() == GATEWAYS.len() && p.values().all(|r| r.as_deref() == Some(revision)))
            .then_some(())
    })
    .await;
}

/// Whether the canary wave has passed in a member whose rollout is `r` (of `revision`).
fn canary_passed(r: Option<&RolloutStatus>, revision: &str) -> bool {
    r.is_some_and(|r| {
        r.revision == revision
            && (r.phase == RolloutPhase::Complete
                || r.waves
                    .iter()
                    .any(|w| w.name != "canary" || w.passed_at.is_some()))
    })
}

#[test]
fn a_canary_member_goes_first_and_a_halt_there_halts_the_fleet() {
    if std::env::var_os("GATEWRIGHT_CLUSTER_DIR").is_none() {
        eprintln!(
            "needs the local cluster harness (GATEWRIGHT_CLUSTER_DIR, scripts/test.sh): not run"
        );
        return;
    }
    if std::env::var_os("GATEWRIGHT_TEST_LOG").is_some() {
        let _ = tracing_subscriber::fmt()
            .with_env_filter("gatewright=info")
            .with_test_writer()
            .try_init();
    }
    let began = Instant::now();
    let (canary, main) = std::thread::scope(|s| {
        let c = s.spawn(Member::up);
        let m = s.spawn(Member::up);
        (c.join().unwrap(), m.join().unwrap())
    });
    println!("two members up in {:.1} s", began.elapsed().as_secs_f64());
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let hub = admin().await;
        let fleet_ns = TestNamespace::new(&hub, "fwaves").await;
        let ctl_ns = TestNamespace::new(&hub, "fwaves-ctl").await;
        for (name, m, stage) in [("canary", &canary, "canary"), ("main", &main, "main")] {
            enrol(&hub, &fleet_ns.name, name, &member_kubeconfig(m, None), true).await;
            apply_yaml(
                &hub,
                &format!(
                    "apiVersion: multicluster.x-k8s.io/v1alpha1\nkind: ClusterProfile\nmetadata: {{name: {name}, namespace: {}, labels: {{stage: {stage}}}, annotations: {{gatewright.dev/addresses: \"{}\"}}}}\nspec:\n  displayName: {name}\n  clusterManager: {{name: gatewright-tests}}\n",
                    fleet_ns.name,
                    fleet::MEMBER_ADDRESSES
                ),
            )
            .await;
        }
        let opts = Options {
            controller_namespace: ctl_ns.name.clone(),
            fleet: Some(FleetOptions {
                namespace: Some(fleet_ns.name.clone()),
                ..FleetOptions::default()
            }),
            ..Options::default()
        };
        let ctl = gatewright::controller::start(hub.clone(), opts)
            .await
            .unwrap();
        for name in ["canary", "main"] {
            served(&ctl, &ClusterId::new(&format!("{}/{name}", fleet_ns.name)), true).await;
        }
        let (c, m) = (canary.client().await, main.client().await);
        let class = unique_name("fwaves");
        let first = format!("{class}-1");
        let second = format!("{class}-2");
        let third = format!("{class}-3");
        for client in [&c, &m] {
            apply_yaml(client, "apiVersion: v1\nkind: Namespace\nmetadata: {name: apps}\n").await;
            apply_yaml(client, &class_yaml(&class, "1")).await;
            for g in GATEWAYS {
                apply_yaml(
                    client,
                    &format!(
                        "apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {{name: {g}, namespace: {NS}}}\nspec:\n  gatewayClassName: {class}\n  listeners: [{{name: http, port: 80, protocol: HTTP}}]\n"
                    ),
                )
                .await;
            }
        }
        all_programmed_on(&c, &first, "the canary member's Gateways on the first revision").await;
        all_programmed_on(&m, &first, "the other member's Gateways on the first revision").await;

        // Changed in the other member first: nothing moves there, it waits for the canary.
        set_template(&m, &class, &template("2")).await;
        let waiting = wait_for("the other member waiting for the canary", T, || async {
            rollout(&m, &class).await.filter(|r| {
                r.revision == second && r.message.contains("waits for wave canary")
            })
        })
        .await;
        assert!(
            waiting
                .message
                .ends_with(&format!("{}/canary (another revision there)", fleet_ns.name)),
            "{}",
            waiting.message
        );
        assert!(waiting.waves.is_empty(), "{waiting:?}");
        assert!(values(&m).await.values().all(|v| v == "1"));

        // Changed in the canary member: its Gateways move first; the other member's only
        // once the canary wave has passed there.
        let changed = Instant::now();
        set_template(&c, &class, &template("2")).await;
        let mut canary_done = None;
        let mut main_first = None;
        loop {
            // The canary's status first: a pass seen after a move would be no proof.
            let passed = canary_passed(rollout(&c, &class).await.as_ref(), &second);
            let moved = values(&m).await.values().any(|v| v == "2");
            if passed && canary_done.is_none() {
                canary_done = Some(changed.elapsed());
            }
            if moved {
                assert!(
                    passed,
                    "a Gateway of the other member moved before the canary wave passed"
                );
                main_first.get_or_insert(changed.elapsed());
            }
            let done = rollout(&m, &class)
                .await
                .is_some_and(|r| r.revision == second && r.phase == RolloutPhase::Complete);
            if done && values(&m).await.values().all(|v| v == "2") {
                break;
            }
            assert!(changed.elapsed() < T, "the rollout did not complete in the other member");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        all_programmed_on(&m, &second, "the other member's Gateways on the second revision").await;
        all_programmed_on(&c, &second, "the canary member's Gateways on the second revision").await;
        println!(
            "canary wave passed {:.1} s after the change, the other member's first Gateway moved at {:.1} s, its rollout complete at {:.1} s",
            canary_done.unwrap().as_secs_f64(),
            main_first.unwrap().as_secs_f64(),
            changed.elapsed().as_secs_f64()
        );

        // A revision that does not render, in both members: it halts in the canary, and
        // the other member halts too, its Gateways untouched on the revision they run.
        set_template(&m, &class, &broken()).await;
        set_template(&c, &class, &broken()).await;
        let t = Instant::now();
        let halted = wait_for("the other member halted", T, || async {
            rollout(&m, &class)
                .await
                .filter(|r| r.revision == third && r.phase == RolloutPhase::Halted)
        })
        .await;
        assert!(
            halted
                .message
                .starts_with(&format!("wave canary halted in member {}/canary", fleet_ns.name)),
            "{}",
            halted.message
        );
        let there = rollout(&c, &class).await.unwrap();
        assert_eq!(there.phase, RolloutPhase::Halted, "{there:?}");
        assert!(halted.waves.is_empty(), "{halted:?}");
        assert_eq!(
            programmed(&m).await.into_values().collect::<Vec<_>>(),
            vec![Some(second.clone()); 2]
        );
        assert!(values(&m).await.values().all(|v| v == "2"));
        println!(
            "the other member halted {:.1} s after the broken revision",
            t.elapsed().as_secs_f64()
        );
        assert!(ctl.shutdown(Duration::from_secs(10)).await);
    });
}
