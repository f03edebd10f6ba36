//! A make-before-break rotation survives the controller being killed at each of its
//! steps: the rollout state lives on the cluster (version labels, `uses` annotations), so
//! each new controller resumes where the killed one stopped, with no duplicate and no
//! orphan. A test binary of its own, so that no other controller runs in the process.
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
#[path = "e2e/mbb.rs"]
mod mbb;

use std::time::Duration;

use gateway_api::apis::standard::gateways::Gateway;
use gatewright::controller::Options;
use kube::Client;
use kube::api::{Api, DeleteParams};
use serde_json::Value;

use common::{TestNamespace, admin, apply_yaml, wait_for};
use mbb::{cm_blueprint, cm_gateway, mark, our_cms, reader_points_at, wait_gateway_gone};

const T: Duration = Duration::from_secs(60);

/// A controller on a runtime of its own (no leader election: one runs at a time), killed
/// by shutting that runtime down without clean-up, as a crash would.
fn start() -> tokio::runtime::Runtime {
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let opts = Options {
            controller_namespace: "gatewright-rollout-restart".into(),
            ..Options::default()
        };
        gatewright::controller::start(admin().await, opts)
            .await
            .unwrap();
    });
    rt
}

async fn rollout(client: &Client, ns: &str) -> Option<(String, String)> {
    let g: Value = serde_json::to_value(
        Api::<Gateway>::namespaced(client.clone(), ns)
            .get("gw")
            .await
            .unwrap(),
    )
    .unwrap();
    let c = g["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == "gatewright.dev/Rollout")?
        .clone();
    Some((
        c["reason"].as_str()?.to_owned(),
        c["message"].as_str()?.to_owned(),
    ))
}

fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v
}

#[test]
fn a_rotation_resumes_after_a_restart_at_every_step() {
    let test_rt = tokio::runtime::Runtime::new().unwrap();
    let (client, ns, class) = test_rt.block_on(async {
        let client = admin().await;
        let ns = TestNamespace::new(&client, "mbb-restart").await;
        let class = format!("mbb-{}", ns.name);
        apply_yaml(&client, &cm_blueprint(&class, 600)).await;
        apply_yaml(&client, &cm_gateway(&ns.name, &class, 1)).await;
        (client, ns, class)
    });
    let n = ns.name.clone();
    let version = |exclude: Vec<String>| {
        let (client, n) = (client.clone(), n.clone());
        async move {
            our_cms(&client, &n)
                .await
                .into_iter()
                .find(|c| c.starts_with("gw-cert-") && !exclude.contains(c))
        }
    };

    // Version 1 serves.
    let a = start();
    let v1 = test_rt.block_on(async {
        let v1 = wait_for("version 1", T, || version(vec![])).await;
        mark(&client, &n, &v1, "ready", "yes").await;
        wait_for("the reader on version 1", T, || async {
            (reader_points_at(&client, &n).await? == v1).then_some(())
        })
        .await;
        mark(&client, &n, "gw-reader", "ack", &v1).await;
        wait_for("the rollout to be complete", T, || async {
            (rollout(&client, &n).await?.0 == "Complete").then_some(())
        })
        .await;
        v1
    });

    // Step 1: version 2 is created (not ready yet); A is killed.
    test_rt.block_on(apply_yaml(&client, &cm_gateway(&n, &class, 2)));
    let v2 = test_rt.block_on(wait_for("version 2", T, || version(vec![v1.clone()])));
    a.shutdown_background();
    println!(
        "step 1: killed A with {:?}",
        test_rt.block_on(our_cms(&client, &n))
    );

    // B resumes: version 1 keeps serving, the rollout is reported from the cluster alone.
    let b = start();
    test_rt.block_on(async {
        let (reason, msg) = wait_for("B to report the rollout", T, || async {
            rollout(&client, &n)
                .await
                .filter(|(r, m)| r == "Progressing" && m.contains(&v2))
        })
        .await;
        println!("step 1: B reports {reason}: {msg}");
        tokio::time::sleep(Duration::from_secs(2)).await;
        assert_eq!(reader_points_at(&client, &n).await.unwrap(), v1);
        assert_eq!(
            our_cms(&client, &n).await,
            sorted(vec![v1.clone(), v2.clone(), "gw-reader".into()])
        );
        // Step 2: version 2 is ready; the reader switches; B is killed before the ack.
        mark(&client, &n, &v2, "ready", "yes").await;
        wait_for("the reader on version 2", T, || async {
            (reader_points_at(&client, &n).await? == v2).then_some(())
        })
        .await;
    });
    b.shutdown_background();
    println!(
        "step 2: killed B with {:?}",
        test_rt.block_on(our_cms(&client, &n))
    );

    // C resumes: version 1 stays until the reader is ready on version 2, then goes.
    let c = start();
    test_rt.block_on(async {
        wait_for("C to report the switch", T, || async {
            rollout(&client, &n)
                .await
                .filter(|(r, m)| r == "Progressing" && m.contains("Switching"))
        })
        .await;
        assert!(our_cms(&client, &n).await.contains(&v1));
        mark(&client, &n, "gw-reader", "ack", &v2).await;
        wait_for("version 1 to go", T, || async {
            (our_cms(&client, &n).await == sorted(vec![v2.clone(), "gw-reader".into()])
                && rollout(&client, &n).await?.0 == "Complete")
                .then_some(())
        })
        .await;
    });

    // Step 3: a third version, killed right as the old one is let go.
    let v3 = test_rt.block_on(async {
        apply_yaml(&client, &cm_gateway(&n, &class, 3)).await;
        let v3 = wait_for("version 3", T, || version(vec![v2.clone()])).await;
        mark(&client, &n, &v3, "ready", "yes").await;
        wait_for("the reader on version 3", T, || async {
            (reader_points_at(&client, &n).await? == v3).then_some(())
        })
        .await;
        mark(&client, &n, "gw-reader", "ack", &v3).await;
        v3
    });
    c.shutdown_background();
    println!(
        "step 3: killed C with {:?}",
        test_rt.block_on(our_cms(&client, &n))
    );

    // D finishes: exactly the new version and the reader, nothing else.
    let d = start();
    test_rt.block_on(async {
        wait_for("D to finish the rotation", T, || async {
            (our_cms(&client, &n).await == sorted(vec![v3.clone(), "gw-reader".into()])
                && rollout(&client, &n).await?.0 == "Complete")
                .then_some(())
        })
        .await;
        tokio::time::sleep(Duration::from_secs(2)).await;
        assert_eq!(
            our_cms(&client, &n).await,
            sorted(vec![v3.clone(), "gw-reader".into()])
        );
        let _ = Api::<Gateway>::namespaced(client.clone(), &n)
            .delete("gw", &DeleteParams::default())
            .await;
        wait_gateway_gone(&client, &n, T).await;
        mbb::delete_class(&client, &class).await;
        ns.delete().await;
    });
    d.shutdown_background();
}
