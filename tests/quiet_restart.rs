//! A restart of a converged world, on the real cluster: controller A converges a Gateway
//! with routes (downstream readiness simulated), and two Gateways of a class whose
//! blueprint rollout it leaves halfway (the first wave moved and baking), is killed; controller B starts on the
//! same world and must write nothing (no child re-applied, no status rewritten, so no
//! condition flips), announce nothing (no Event) and, asked to re-plan everything, still
//! write nothing. A test binary of its own, so that no other controller runs in the
//! process and the process's write count is B's alone.
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

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use gatewright::controller::{Options, Runner, Work};
use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, ListParams};

use common::{TestNamespace, admin, apply_yaml, shipped_class_yaml, wait_for};

const T: Duration = Duration::from_secs(90);
const ROUTES: usize = 4;

struct Running {
    rt: tokio::runtime::Runtime,
    ctl: Arc<Runner>,
}

fn start_controller(global: &str) -> Running {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let ctl = rt.block_on(async {
        let opts = Options {
            controller_namespace: global.into(),
            ..Options::default()
        };
        gatewright::controller::start(admin().await, opts)
            .await
            .unwrap()
    });
    Running { rt, ctl }
}

fn ar(group: &str, version: &str, kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural)
}

/// `Kind/name` -> resourceVersion of the Gateway, its routes, every child in `ns`, and the
/// class: any write to one of them changes it.
async fn versions(client: &Client, ns: &str, class: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for ar in [
        ar("gateway.networking.k8s.io", "v1", "Gateway", "gateways"),
        ar("gateway.networking.k8s.io", "v1", "HTTPRoute", "httproutes"),
        ar("cert-manager.io", "v1", "Certificate", "certificates"),
        ar(
            "externaldns.k8s.io",
            "v1alpha1",
            "DNSEndpoint",
            "dnsendpoints",
        ),
        // The children of the class caught mid-rollout.
        ar("", "v1", "ConfigMap", "configmaps"),
        // Policies: their status (where they apply) is ours to write too.
        ar(
            "gatewright.dev",
            "v1alpha1",
            "GatewayConfig",
            "gatewayconfigs",
        ),
    ] {
        let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &ar);
        for o in api.list_metadata(&ListParams::default()).await.unwrap() {
            out.insert(
                format!("{}/{}", ar.kind, o.metadata.name.unwrap_or_default()),
                o.metadata.resource_version.unwrap_or_default(),
            );
        }
    }
    let classes: Api<DynamicObject> = Api::all_with(
        client.clone(),
        &ar(
            "gateway.networking.k8s.io",
            "v1",
            "GatewayClass",
            "gatewayclasses",
        ),
    );
    // The blueprint caught mid-rollout (its status holds the rollout) and its revisions.
    let rolling = rolling_class(ns);
    let bps: Api<DynamicObject> = Api::all_with(
        client.clone(),
        &ar(
            "gatewright.dev",
            "v1alpha1",
            "GatewayClassBlueprint",
            "gatewayclassblueprints",
        ),
    );
    // Both blueprints: the one caught mid-rollout, and the shipped class's, whose
    // rollout is complete and whose per-revision counts A keeps as its Gateway reports.
    for bp in [rolling.as_str(), class] {
        out.insert(
            format!("GatewayClassBlueprint/{bp}"),
            bps.get_metadata(bp)
                .await
                .unwrap()
                .metadata
                .resource_version
                .unwrap_or_default(),
        );
    }
    let revs: Api<DynamicObject> = Api::all_with(
        client.clone(),
        &ar(
            "gatewright.dev",
            "v1alpha1",
            "GatewayClassBlueprintRevision",
            "gatewayclassblueprintrevisions",
        ),
    );
    for r in revs.list_metadata(&ListParams::default()).await.unwrap() {
        let name = r.metadata.name.unwrap_or_default();
        if name.starts_with(&rolling) {
            out.insert(
                format!("GatewayClassBlueprintRevision/{name}"),
                r.metadata.resource_version.unwrap_or_default(),
            );
        }
    }
    out.insert(
        format!("GatewayClass/{class}"),
        classes
            .get_metadata(class)
            .await
            .unwrap()
            .metadata
            .resource_version
            .unwrap_or_default(),
    );
    out
}

/// The class of the test namespace `ns` whose blueprint is caught mid-rollout.
fn rolling_class(ns: &str) -> String {
    format!("rolling-{ns}")
}

/// A class rendering one ConfigMap per Gateway holding `value`, whose rollout moves one
/// Gateway and then bakes for an hour: a restart finds it halfway.
fn rolling_yaml(class: &str, value: &str) -> String {
    format!(
        r#"apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {{name: {class}}}
spec:
  controllerName: gatewright.dev/gateway-controller
  parametersRef: {{group: gatewright.dev, kind: GatewayClassBlueprint, name: {class}}}
---
apiVersion: gatewright.dev/v1alpha1
kind: GatewayClassBlueprint
metadata: {{name: {class}}}
spec:
  rolloutPolicy: {{waves: [{{count: 1, bakeSeconds: 3600}}]}}
  gatewayTemplates:
  - name: cm
    template: |
      apiVersion: v1
      kind: ConfigMap
      metadata:
        name: {{{{ gateway.metadata.name ~ "-cm" }}}}
      data:
        value: "{value}"
  status:
    template: |
      addresses: [{{type: IPAddress, value: 192.0.2.10}}]
"#
    )
}

/// How many Events exist in `ns`.
async fn events(client: &Client, ns: &str) -> usize {
    let api: Api<k8s_openapi::api::events::v1::Event> = Api::namespaced(client.clone(), ns);
    api.list_metadata(&ListParams::default())
        .await
        .unwrap()
        .items
        .len()
}

/// The status of the test's two blueprints, by name (what a failure shows changed).
async fn blueprint_statuses(
    client: &Client,
    ns: &str,
    class: &str,
) -> BTreeMap<String, serde_json::Value> {
    let bps: Api<gatewright::api::GatewayClassBlueprint> = Api::all(client.clone());
    let mut out = BTreeMap::new();
    for name in [class.to_owned(), rolling_class(ns)] {
        if let Ok(b) = bps.get(&name).await {
            out.insert(name, serde_json::to_value(&b.status).unwrap_or_default());
        }
    }
    out
}

fn programmed(g: &DynamicObject) -> bool {
    g.data["status"]["conditions"].as_array().is_some_and(|c| {
        c.iter()
            .any(|c| c["type"] == "Programmed" && c["status"] == "True")
    })
}

#[test]
fn restart_of_a_converged_world_writes_and_announces_nothing() {
    let test_rt = tokio::runtime::Runtime::new().unwrap();
    let (client, ns, class) = test_rt.block_on(async {
        let client = admin().await;
        let ns = TestNamespace::new(&client, "quiet").await;
        let class = format!("quiet-{}", ns.name);
        let text = shipped_class_yaml("istio-certmanager-externaldns", &class);
        apply_yaml(&client, &text).await;
        apply_yaml(
            &client,
            &format!(
                "apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {{name: gw, namespace: {}}}\nspec:\n  gatewayClassName: {class}\n  listeners:\n  - {{name: http, port: 80, protocol: HTTP, hostname: \"*.example.com\"}}\n  - {{name: https, port: 443, protocol: HTTPS, hostname: \"*.example.com\", tls: {{options: {{gatewright.dev/certificate: generated}}}}}}\n",
                ns.name
            ),
        )
        .await;
        // Two policies on the Gateway: one applies, the other is Conflicted.
        for p in ["values", "values-too"] {
            apply_yaml(
                &client,
                &format!(
                    "apiVersion: gatewright.dev/v1alpha1\nkind: GatewayConfig\nmetadata: {{name: {p}, namespace: {}}}\nspec:\n  targetRef: {{group: gateway.networking.k8s.io, kind: Gateway, name: gw}}\n  default: {{dns: {{ttl: 120}}}}\n",
                    ns.name
                ),
            )
            .await;
        }
        let rolling = rolling_class(&ns.name);
        apply_yaml(&client, &rolling_yaml(&rolling, "1")).await;
        for g in ["roll-a", "roll-b"] {
            apply_yaml(
                &client,
                &format!(
                    "apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {{name: {g}, namespace: {}}}\nspec:\n  gatewayClassName: {rolling}\n  listeners: [{{name: http, port: 80, protocol: HTTP}}]\n",
                    ns.name
                ),
            )
            .await;
        }
        for i in 0..ROUTES {
            apply_yaml(
                &client,
                &format!(
                    "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {{name: r{i}, namespace: {}}}\nspec:\n  parentRefs: [{{name: gw}}]\n  hostnames: [r{i}.example.com]\n  rules: [{{backendRefs: [{{name: svc, port: 80}}]}}]\n",
                    ns.name
                ),
            )
            .await;
        }
        (client, ns, class)
    });
    let global = format!("{}-global", ns.name);

    // A converges the world, with downstream readiness simulated, until it is quiet.
    let a = start_controller(&global);
    test_rt.block_on(async {
        let gws: Api<DynamicObject> = Api::namespaced_with(
            client.clone(),
            &ns.name,
            &ar("gateway.networking.k8s.io", "v1", "Gateway", "gateways"),
        );
        wait_for("the Gateway to be Programmed", T, || async {
            gatewright::simulate::simulate_ready_where(
                &client,
                Some(&ns.name),
                gatewright::simulate::Play::All,
            )
            .await
            .unwrap();
            gws.get("gw").await.ok().filter(programmed).map(|_| ())
        })
        .await;
        // The rolling class: both Gateways on its first revision, then a change whose
        // rollout moves roll-a and bakes (for an hour).
        let rolling = rolling_class(&ns.name);
        let revision_of = |g: &DynamicObject| {
            g.data["status"]["conditions"]
                .as_array()
                .and_then(|c| c.iter().find(|c| c["type"] == "gatewright.dev/Revision"))
                .and_then(|c| c["message"].as_str())
                .and_then(|m| m.split(':').next())
                .map(str::to_owned)
        };
        for (value, revision) in [("1", 1), ("2", 2)] {
            if value == "2" {
                apply_yaml(&client, &rolling_yaml(&rolling, "2")).await;
            }
            let want = format!("{rolling}-{revision}");
            wait_for(&format!("roll-a Programmed on {want}"), T, || async {
                gws.get("roll-a")
                    .await
                    .ok()
                    .filter(|g| programmed(g) && revision_of(g).as_deref() == Some(want.as_str()))
                    .map(|_| ())
            })
            .await;
        }
        let bps: Api<gatewright::api::GatewayClassBlueprint> = Api::all(client.clone());
        wait_for("the rollout baking its first wave", T, || async {
            bps.get(&rolling)
                .await
                .ok()
                .and_then(|b| b.status?.rollout)
                .filter(|r| r.message.contains("baking"))
                .map(|_| ())
        })
        .await;
        let b = gws.get("roll-b").await.unwrap();
        assert_eq!(
            revision_of(&b),
            Some(format!("{rolling}-1")),
            "roll-b moved before its wave"
        );
        // The shipped class's blueprint counts its Gateway, Programmed, on the revision it
        // renders: its rollout is complete, and the Gateway's reports still recount.
        let counted = |b: &gatewright::api::GatewayClassBlueprint| {
            b.status.as_ref().is_some_and(|s| {
                s.revisions.len() == 1 && s.revisions[0].gateways == 1 && s.revisions[0].ready == 1
            })
        };
        wait_for(
            "the shipped class's blueprint to count its Gateway ready",
            T,
            || async { bps.get(&class).await.ok().filter(counted).map(|_| ()) },
        )
        .await;
        // Quiet: A wrote nothing for a second longer than a count pass after a Gateway's
        // report waits, plus the hold of a write that only reports progress (the
        // blueprint's per-revision counts: a held write that came after a shorter quiet
        // once changed the blueprint between the two reads).
        let mut last = (a.ctl.metrics().writes(), 0);
        let polls =
            (2 * gatewright::controller::PROGRESS_HOLD + Duration::from_secs(1)).as_millis() / 200;
        wait_for("controller A to be quiet", T, || {
            let now = a.ctl.metrics().writes();
            let quiet = if now == last.0 {
                last.1 += 1;
                last.1 >= polls
            } else {
                last = (now, 0);
                false
            };
            async move { quiet.then_some(()) }
        })
        .await;
    });
    // A wrote the policies' status: the younger one is Conflicted.
    test_rt.block_on(async {
        let policies: Api<DynamicObject> = Api::namespaced_with(
            client.clone(),
            &ns.name,
            &ar(
                "gatewright.dev",
                "v1alpha1",
                "GatewayConfig",
                "gatewayconfigs",
            ),
        );
        let p = policies.get("values-too").await.unwrap();
        assert_eq!(
            p.data["status"]["ancestors"][0]["conditions"][0]["reason"], "Conflicted",
            "{:?}",
            p.data["status"]
        );
    });
    let before = test_rt.block_on(versions(&client, &ns.name, &class));
    let blueprints_before = test_rt.block_on(blueprint_statuses(&client, &ns.name, &class));
    let events_before = test_rt.block_on(events(&client, &ns.name));
    assert!(
        before
            .keys()
            .filter(|k| k.starts_with("HTTPRoute/"))
            .count()
            > ROUTES,
        "A rendered no shadow routes: {before:?}"
    );
    a.rt.shutdown_background();

    // B starts on the converged world.
    let b = start_controller(&global);
    test_rt.block_on(async {
        wait_for("controller B to list its caches", T, || async {
            b.ctl.metrics().ready.load(Ordering::Relaxed).then_some(())
        })
        .await;
        let key = gatewright::snapshot::Key::new(ns.name.clone(), "gw");
        // It has planned the Gateway (after its child kinds listed) ...
        wait_for("controller B to plan the Gateway", T, || async {
            (b.ctl.local().last_writes(&key).0 > 0).then_some(())
        })
        .await;
        // ... and the Gateways of the class caught mid-rollout ...
        for g in ["roll-a", "roll-b"] {
            let key = gatewright::snapshot::Key::new(ns.name.clone(), g);
            wait_for(&format!("controller B to plan {g}"), T, || async {
                (b.ctl.local().last_writes(&key).0 > 0).then_some(())
            })
            .await;
        }
        // ... and anything it would do follows within seconds.
        tokio::time::sleep(Duration::from_secs(5)).await;
    });
    let after = test_rt.block_on(versions(&client, &ns.name, &class));
    let events_after = test_rt.block_on(events(&client, &ns.name));
    for l in b.ctl.metrics().render().lines() {
        if l.starts_with("gatewright_api_requests") {
            println!("B: {l}");
        }
    }
    let blueprints_after = test_rt.block_on(blueprint_statuses(&client, &ns.name, &class));
    for (name, st) in &blueprints_after {
        if blueprints_before.get(name) != Some(st) {
            println!(
                "blueprint {name} status before: {}\nafter: {st}",
                blueprints_before
                    .get(name)
                    .map(ToString::to_string)
                    .unwrap_or_default()
            );
        }
    }
    println!(
        "changed: {:?}",
        after
            .iter()
            .filter(|(k, v)| before.get(*k) != Some(v))
            .collect::<Vec<_>>()
    );
    assert_eq!(
        b.ctl.metrics().writes_in_namespace(&ns.name),
        0,
        "a restart of a converged world must write nothing"
    );
    assert_eq!(
        after, before,
        "no object may change on a restart (a child re-applied, a status rewritten)"
    );
    assert_eq!(
        events_after, events_before,
        "a restart must announce nothing"
    );

    // A full resync of the converged world writes nothing either.
    test_rt.block_on(async {
        let key = gatewright::snapshot::Key::new(ns.name.clone(), "gw");
        let runs = b.ctl.local().last_writes(&key).0;
        b.ctl.enqueue_all();
        b.ctl.local().enqueue(Work::Gateway(key.clone()));
        let written = wait_for("the resync to re-plan the Gateway", T, || async {
            let (n, w) = b.ctl.local().last_writes(&key);
            (n > runs).then_some(w)
        })
        .await;
        assert_eq!(written, 0, "a re-plan of a converged Gateway wrote");
        tokio::time::sleep(Duration::from_secs(2)).await;
    });
    assert_eq!(b.ctl.metrics().writes_in_namespace(&ns.name), 0);
    assert_eq!(
        test_rt.block_on(versions(&client, &ns.name, &class)),
        before
    );
    b.rt.shutdown_background();
    test_rt.block_on(async {
        // Let the Gateway go without a controller: drop our finalizer, then the namespace.
        let gws: Api<DynamicObject> = Api::namespaced_with(
            client.clone(),
            &ns.name,
            &ar("gateway.networking.k8s.io", "v1", "Gateway", "gateways"),
        );
        for g in ["gw", "roll-a", "roll-b"] {
            let _ = gws
                .patch_metadata(
                    g,
                    &kube::api::PatchParams::default(),
                    &kube::api::Patch::Merge(serde_json::json!({"metadata": {"finalizers": null}})),
                )
                .await;
        }
        let rolling = rolling_class(&ns.name);
        let classes: Api<DynamicObject> = Api::all_with(
            client.clone(),
            &ar(
                "gateway.networking.k8s.io",
                "v1",
                "GatewayClass",
                "gatewayclasses",
            ),
        );
        let _ = classes
            .patch_metadata(
                &rolling,
                &kube::api::PatchParams::default(),
                &kube::api::Patch::Merge(serde_json::json!({"metadata": {"finalizers": null}})),
            )
            .await;
        let _ = classes.delete(&rolling, &Default::default()).await;
        let bps: Api<gatewright::api::GatewayClassBlueprint> = Api::all(client.clone());
        let _ = bps.delete(&rolling, &Default::default()).await;
        ns.delete().await;
    });
}
