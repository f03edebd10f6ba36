//! Fleet mode: one controller process serving the test cluster (the hub) and the member
//! clusters its ClusterProfiles list: two members of its own (control planes started by
//! `tests/cluster/up` in temporary directories, their writes audited, stopped at the end)
//! and one that cannot be reached. The shell is a `Cluster` per API server and one
//! `Runner`: each cluster's Gateways converge with their children written in that cluster
//! only, a Gateway of the same name in both gets its own children in each; a member is
//! served while its profile says its control plane is healthy, picked up again without a
//! duplicate, and written to no more once its profile is gone; an unreachable member is
//! reported and holds neither the hub's readiness nor the other member; a member with
//! nothing of ours is watched only as far as it takes to tell; a restart on the converged
//! fleet writes nothing. Placement: a hub Gateway whose class places an Istio gateway in
//! every member labelled for it gets one written in each member (not in the hub), also
//! across a restart of the controller mid-placement (the same placed gateway kept), and
//! its hub DNS record lists both members' addresses; a restart then writes nothing; a
//! member reported unhealthy is dropped from the record (drained first) while the Gateway
//! names it; healthy again, the same placed gateway is kept; its API server killed, the
//! record drops it with nothing written in the other member meanwhile; the hub Gateway
//! deleted while that member is down leaves its objects there, recorded in the hub, and a
//! controller restarted meanwhile deletes them once it is back. A test binary of
//! its own, so that no other controller runs on the test cluster meanwhile (cargo runs
//! test binaries one after the other).
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

use std::time::{Duration, Instant};

use gateway_api::apis::standard::gateways::Gateway;
use gatewright::controller::{ClusterId, FleetOptions, Options};
use kube::Client;
use kube::api::{Api, DynamicObject, ListParams};

#[allow(
    dead_code,
    reason = "shared with the replicas binary; not every helper is used here"
)]
#[path = "fleet/common.rs"]
mod fleet;

use common::{TestNamespace, admin, apply_yaml, wait_for};
use fleet::{Member, T, converged, enrol, member_kubeconfig, served, set_healthy, world};

/// Waits, playing the downstream controllers in the hub, until the hub's record `pub-dns`
/// lists `count` members' addresses (0: emptied or gone).
async fn record_lists(hub: &Client, ns: &str, dns: &Api<DynamicObject>, count: usize, what: &str) {
    wait_for(what, T, || async {
        gatewright::simulate::simulate_ready_where(hub, Some(ns), gatewright::simulate::Play::All)
            .await
            .unwrap();
        let targets = dns
            .get_opt("pub-dns")
            .await
            .unwrap()
            .and_then(|d| {
                d.data["spec"]["endpoints"][0]["targets"]
                    .as_array()
                    .map(Vec::len)
            })
            .unwrap_or(0);
        (targets == count).then_some(())
    })
    .await;
}

/// Waits until the metrics report `id` in `state` (`engaged`, `waiting`, ...).
async fn member_state(ctl: &gatewright::controller::Runner, id: &ClusterId, state: &str) {
    wait_for(&format!("{id} reported {state}"), T, || async {
        (ctl.metrics().fleet_members().get(id.as_str()).copied() == Some(state)).then_some(())
    })
    .await;
}

/// The hub Gateway `pub`'s `gatewright.dev/Placed` condition: its status and message.
async fn placed_condition(gws: &Api<Gateway>) -> Option<(String, String)> {
    let g = serde_json::to_value(gws.get("pub").await.ok()?).ok()?;
    let placed = g["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == "gatewright.dev/Placed")?
        .clone();
    Some((
        placed["status"].as_str()?.to_owned(),
        placed["message"].as_str()?.to_owned(),
    ))
}

/// Waits until what `pub` placed in a member (its gateway and route copy) is gone there.
async fn placed_gone(what: &str, client: &Client, ns: &str) {
    let gws: Api<Gateway> = Api::namespaced(client.clone(), ns);
    let routes: Api<gateway_api::apis::standard::httproutes::HttpRoute> =
        Api::namespaced(client.clone(), ns);
    wait_for(what, T, || async {
        (gws.get_opt("pub-istio").await.ok()?.is_none()
            && routes.get_opt("shop-pub-istio").await.ok()?.is_none())
        .then_some(())
    })
    .await;
}

/// Waits until `ctl` has written nothing in `key`'s namespace (in the hub or a member) or
/// the fleet's (`fleet_ns`) for 6 s (longer than a status change that only reports
/// progress may wait, `PROGRESS_HOLD`), stops it and starts another with `opts`, which
/// must write nothing there once it serves `members` and has planned `key` in the hub (and
/// in each member too, `in_members`): what it would do follows within seconds. (Other
/// namespaces are left out: the hub is the shared test cluster, where what earlier test
/// binaries left behind may still be torn down.)
async fn restart_quiet(
    ctl: std::sync::Arc<gatewright::controller::Runner>,
    hub: &Client,
    opts: &Options,
    members: &[&ClusterId],
    key: &gatewright::snapshot::Key,
    in_members: bool,
    fleet_ns: &str,
) -> std::sync::Arc<gatewright::controller::Runner> {
    let ours = |ctl: &gatewright::controller::Runner| {
        ctl.metrics().writes_in_namespace(&key.namespace)
            + ctl.metrics().writes_in_namespace(fleet_ns)
    };
    let mut last = (ours(&ctl), 0);
    wait_for("the controller quiet", T, || {
        let now = ours(&ctl);
        let quiet = if now == last.0 {
            last.1 += 1;
            last.1 >= 30
        } else {
            last = (now, 0);
            false
        };
        async move {
            tokio::time::sleep(Duration::from_millis(200)).await;
            quiet.then_some(())
        }
    })
    .await;
    assert!(ctl.shutdown(Duration::from_secs(10)).await);
    let ctl = gatewright::controller::start(hub.clone(), opts.clone())
        .await
        .unwrap();
    for id in members {
        served(&ctl, id, true).await;
    }
    wait_for(
        "the restarted controller to plan the Gateway",
        T,
        || async {
            let members_planned = !in_members
                || members
                    .iter()
                    .all(|id| ctl.cluster(id).is_some_and(|c| c.last_writes(key).0 > 0));
            (members_planned && ctl.local().last_writes(key).0 > 0).then_some(())
        },
    )
    .await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    let requests: Vec<String> = ctl
        .metrics()
        .render()
        .lines()
        .filter(|l| l.starts_with("gatewright_api_requests"))
        .map(str::to_owned)
        .collect();
    assert_eq!(
        ours(&ctl),
        0,
        "a restart on a converged fleet must write nothing; its requests: {requests:#?}"
    );
    ctl
}

#[test]
fn fleet_mode_serves_the_members_its_cluster_profiles_list() {
    if std::env::var_os("GATEWRIGHT_CLUSTER_DIR").is_none() {
        eprintln!(
            "needs the local cluster harness (GATEWRIGHT_CLUSTER_DIR, scripts/test.sh): not run"
        );
        return;
    }
    if std::env::var_os("GATEWRIGHT_TEST_LOG").is_some() {
        let _ = tracing_subscriber::fmt()
            .with_env_filter("gatewright=debug")
            .with_test_writer()
            .try_init();
    }
    let began = Instant::now();
    // Two members, their writes audited (the second one joins for placement), brought up
    // side by side.
    let second = std::thread::spawn(Member::up_audited);
    let member = Member::up_audited();
    let member2 = second.join().unwrap();
    println!(
        "member clusters up in {:.1} s",
        began.elapsed().as_secs_f64()
    );
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let main = admin().await;
        let other = member.client().await;
        // The hub's inventory: ClusterProfiles and kubeconfig Secrets in one namespace.
        let fleet = TestNamespace::new(&main, "fleet").await;
        // The controller's namespace: where what teardowns leave in members is recorded.
        let ctl_ns = TestNamespace::new(&main, "two-ctl").await;
        let opts = Options {
            controller_namespace: ctl_ns.name.clone(),
            fleet: Some(FleetOptions {
                namespace: Some(fleet.name.clone()),
                ..FleetOptions::default()
            }),
            ..Options::default()
        };
        let ctl = gatewright::controller::start(main.clone(), opts.clone())
            .await
            .unwrap();
        let t = Instant::now();
        enrol(&main, &fleet.name, "member", &member_kubeconfig(&member, None), true).await;
        let id = ClusterId::new(&format!("{}/member", fleet.name));
        served(&ctl, &id, true).await;
        println!("member engaged {:.1} s after its ClusterProfile", t.elapsed().as_secs_f64());
        assert_eq!(ctl.clusters().len(), 2);
        // The inventory reports the states once its pass is over (after the engagement).
        member_state(&ctl, &id, "engaged").await;

        // A member with no class or Gateway of ours watches only what tells whether one
        // is there.
        let mut watched = ctl.cluster(&id).unwrap().primary_watches();
        watched.sort();
        assert_eq!(watched, ["Gateway", "GatewayClass", "ListenerSet"]);

        // The same namespace, class and Gateway names in both clusters, other hostnames.
        let ns = TestNamespace::new(&main, "two").await;
        apply_yaml(
            &other,
            &format!("apiVersion: v1\nkind: Namespace\nmetadata: {{name: {}}}\n", ns.name),
        )
        .await;
        let class = format!("two-{}", ns.name);
        world(&main, &ns.name, &class, &["a.example.com", "b.example.com"]).await;
        world(&other, &ns.name, &class, &["c.example.com"]).await;

        // Each Gateway converges from its own cluster's routes, its children written there.
        converged(&main, &ns.name, 2, &["a.example.com", "b.example.com"]).await;
        converged(&other, &ns.name, 1, &["c.example.com"]).await;
        // Its first class of ours started the rest: routes are watched now.
        let watched = ctl.cluster(&id).unwrap().primary_watches();
        assert!(watched.iter().any(|w| w == "HTTPRoute"), "{watched:?}");
        // The child Gateway carries the UID of the Gateway of its own cluster.
        let uid = |c: &Client| {
            let c = c.clone();
            let ns = ns.name.clone();
            async move {
                let gws: Api<Gateway> = Api::namespaced(c, &ns);
                let gw = gws.get("gw").await.unwrap();
                let child = gws.get("gw-istio").await.unwrap();
                (
                    gw.metadata.uid.unwrap(),
                    child.metadata.labels.unwrap()["gatewright.dev/gateway-uid"].clone(),
                )
            }
        };
        let (gw_main, child_main) = uid(&main).await;
        let (gw_member, child_member) = uid(&other).await;
        assert_eq!(gw_main, child_main);
        assert_eq!(gw_member, child_member);
        assert_ne!(gw_main, gw_member);

        // A member that cannot be reached: engaged, its watches' failures reported, and
        // neither the hub's readiness nor the other member held.
        let dead = ClusterId::new(&format!("{}/dead", fleet.name));
        enrol(
            &main,
            &fleet.name,
            "dead",
            &member_kubeconfig(&member, Some("https://127.0.0.1:1")),
            true,
        )
        .await;
        served(&ctl, &dead, true).await;
        let prefix = format!("cluster {dead}: watch ");
        wait_for("the dead member's watches reported failing", T, || async {
            ctl.metrics()
                .startup
                .errors()
                .keys()
                .any(|(step, _)| step.starts_with(&prefix))
                .then_some(())
        })
        .await;
        assert!(
            ctl.metrics().startup.done(),
            "the hub's readiness waits on a member: {}",
            ctl.metrics().startup.describe()
        );
        // A change in the live member is planned there alone, the dead one beside it.
        apply_yaml(
            &other,
            &format!(
                "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {{name: r9, namespace: {}}}\nspec:\n  parentRefs: [{{name: gw}}]\n  hostnames: [d.example.com]\n  rules: [{{backendRefs: [{{name: svc, port: 80}}]}}]\n",
                ns.name
            ),
        )
        .await;
        converged(&other, &ns.name, 2, &["c.example.com", "d.example.com"]).await;
        converged(&main, &ns.name, 2, &["a.example.com", "b.example.com"]).await;
        // Its profile deleted: let go.
        let profiles: Api<DynamicObject> = Api::namespaced_with(
            main.clone(),
            &fleet.name,
            &gatewright::fleet::profile::api_resource(),
        );
        profiles
            .delete("dead", &kube::api::DeleteParams::default())
            .await
            .unwrap();
        served(&ctl, &dead, false).await;

        // Its control plane reported unhealthy: the member is let go, and picked up again
        // once healthy; what was created meanwhile converges, nothing is duplicated.
        set_healthy(&main, &fleet.name, "member", false).await;
        served(&ctl, &id, false).await;
        // The inventory reports the states once its pass is over (after the engagement).
        member_state(&ctl, &id, "waiting").await;
        let late_route = format!(
            "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {{name: r10, namespace: {}}}\nspec:\n  parentRefs: [{{name: gw}}]\n  hostnames: [e.example.com]\n  rules: [{{backendRefs: [{{name: svc, port: 80}}]}}]\n",
            ns.name
        );
        apply_yaml(&other, &late_route).await;
        let t = Instant::now();
        set_healthy(&main, &fleet.name, "member", true).await;
        served(&ctl, &id, true).await;
        converged(
            &other,
            &ns.name,
            3,
            &["c.example.com", "d.example.com", "e.example.com"],
        )
        .await;
        println!(
            "member healthy again: converged {:.1} s later",
            t.elapsed().as_secs_f64()
        );
        let children: Api<Gateway> = Api::namespaced(other.clone(), &ns.name);
        let names: Vec<String> = children
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .into_iter()
            .filter_map(|g| g.metadata.name)
            .collect();
        assert_eq!(names, ["gw", "gw-istio"], "no duplicate child Gateway");

        // The controller restarted on the converged fleet writes nothing, in the hub or
        // the member.
        let key = gatewright::snapshot::Key::new(ns.name.clone(), "gw");
        let ctl = restart_quiet(ctl, &main, &opts, &[&id], &key, true, &fleet.name).await;

        // Placement: a hub Gateway whose class puts an Istio gateway in every member
        // labelled gatewright.dev/serves=public, and in the hub a DNS record listing all
        // their addresses. Both members are labelled; the second one joins now.
        let public = |name: &str| {
            let profiles = profiles.clone();
            let name = name.to_owned();
            async move {
                profiles
                    .patch(
                        &name,
                        &kube::api::PatchParams::default(),
                        &kube::api::Patch::Merge(serde_json::json!({
                            "metadata": {"labels": {"gatewright.dev/serves": "public"}}
                        })),
                    )
                    .await
                    .unwrap();
            }
        };
        public("member").await;
        let third = member2.client().await;
        apply_yaml(
            &third,
            &format!("apiVersion: v1\nkind: Namespace\nmetadata: {{name: {}}}\n", ns.name),
        )
        .await;
        enrol(&main, &fleet.name, "member2", &member_kubeconfig(&member2, None), true).await;
        public("member2").await;
        let id2 = ClusterId::new(&format!("{}/member2", fleet.name));
        served(&ctl, &id2, true).await;
        let placing = format!("fleet-{}", ns.name);
        let text = common::fleet_class_yaml(&placing);
        apply_yaml(&main, &text).await;
        let pub_yaml = format!(
            "apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {{name: pub, namespace: {ns}}}\nspec:\n  gatewayClassName: {placing}\n  listeners:\n  - {{name: http, port: 80, protocol: HTTP, hostname: \"*.example.com\"}}\n  - {{name: https, port: 443, protocol: HTTPS, hostname: \"*.example.com\", tls: {{options: {{gatewright.dev/certificate: generated}}}}}}\n---\napiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {{name: shop, namespace: {ns}}}\nspec:\n  parentRefs: [{{name: pub}}]\n  hostnames: [shop.example.com]\n  rules: [{{backendRefs: [{{name: svc, port: 80}}]}}]\n",
            ns = ns.name
        );
        apply_yaml(&main, &pub_yaml).await;
        let member_gws: Api<Gateway> = Api::namespaced(other.clone(), &ns.name);
        let member2_gws: Api<Gateway> = Api::namespaced(third.clone(), &ns.name);
        let placed = wait_for("the placed Istio gateway in the member", T, || async {
            member_gws.get_opt("pub-istio").await.unwrap()
        })
        .await;
        assert_eq!(
            placed.metadata.annotations.as_ref().unwrap()["gatewright.dev/cluster"],
            id.as_str()
        );
        assert!(placed.metadata.owner_references.is_none(), "no owner reference across clusters");
        let hub_gws: Api<Gateway> = Api::namespaced(main.clone(), &ns.name);
        assert!(hub_gws.get_opt("pub-istio").await.unwrap().is_none(), "not placed in the hub");

        // The controller restarted mid-placement (a placed gateway written, none ready, no
        // record yet): the new one takes up where it was, with the same placed gateway.
        assert!(ctl.shutdown(Duration::from_secs(10)).await);
        let ctl = gatewright::controller::start(main.clone(), opts.clone())
            .await
            .unwrap();
        served(&ctl, &id, true).await;
        served(&ctl, &id2, true).await;

        let dns: Api<DynamicObject> = Api::namespaced_with(
            main.clone(),
            &ns.name,
            &kube::api::ApiResource::from_gvk_with_plural(
                &kube::api::GroupVersionKind::gvk("externaldns.k8s.io", "v1alpha1", "DNSEndpoint"),
                "dnsendpoints",
            ),
        );
        // Each member's Istio reports an address: the hub's record lists both, and the hub
        // Gateway is Programmed with them, placed in both members.
        let targets = |d: &DynamicObject| d.data["spec"]["endpoints"][0]["targets"].clone();
        wait_for("the hub's record to list both members' addresses", T, || async {
            for c in [&other, &third, &main] {
                gatewright::simulate::simulate_ready_where(c, Some(&ns.name), gatewright::simulate::Play::All)
                    .await
                    .unwrap();
            }
            let d = dns.get_opt("pub-dns").await.unwrap()?;
            let g = serde_json::to_value(hub_gws.get("pub").await.ok()?).unwrap();
            let cond = |t: &str| {
                g["status"]["conditions"]
                    .as_array()
                    .and_then(|cs| cs.iter().find(|c| c["type"] == t).cloned())
            };
            (targets(&d).as_array().is_some_and(|t| t.len() == 2)
                && cond("Programmed")?["status"] == "True"
                && cond("gatewright.dev/Placed")?["status"] == "True")
                .then_some(())
        })
        .await;
        assert_eq!(
            member_gws.get("pub-istio").await.unwrap().metadata.uid,
            placed.metadata.uid,
            "the placed gateway written before the restart was kept, not made again"
        );
        let placed2 = member2_gws.get("pub-istio").await.unwrap();
        assert_eq!(
            placed2.metadata.annotations.as_ref().unwrap()["gatewright.dev/cluster"],
            id2.as_str()
        );
        // The route is copied into each member (a placed route template), attached to that
        // member's gateway, and accepted by the hub Gateway where it lives.
        for (c, member) in [(&other, &id), (&third, &id2)] {
            let routes: Api<gateway_api::apis::standard::httproutes::HttpRoute> =
                Api::namespaced(c.clone(), &ns.name);
            let copy = routes.get("shop-pub-istio").await.unwrap();
            assert_eq!(
                copy.metadata.annotations.as_ref().unwrap()["gatewright.dev/cluster"],
                member.as_str()
            );
            assert_eq!(copy.spec.parent_refs.as_ref().unwrap()[0].name, "pub-istio");
            assert_eq!(copy.spec.hostnames, Some(vec!["shop.example.com".to_owned()]));
        }
        let hub_routes: Api<gateway_api::apis::standard::httproutes::HttpRoute> =
            Api::namespaced(main.clone(), &ns.name);
        assert!(
            hub_routes.get_opt("shop-pub-istio").await.unwrap().is_none(),
            "the route copy is not written in the hub"
        );

        // The trust boundary: member2 now reports an address outside what its ClusterProfile
        // allows (the hub's admin narrowed it): the hub's record leaves it out, the Gateway
        // names the member and the address, and an Event says so; allowed again, it is back.
        let profiles: Api<DynamicObject> = Api::namespaced_with(
            main.clone(),
            &fleet.name,
            &gatewright::fleet::profile::api_resource(),
        );
        let annotate = |addresses: &'static str| {
            let profiles = profiles.clone();
            async move {
                profiles
                    .patch(
                        "member2",
                        &kube::api::PatchParams::default(),
                        &kube::api::Patch::Merge(serde_json::json!({"metadata": {"annotations": {"gatewright.dev/addresses": addresses}}})),
                    )
                    .await
                    .unwrap();
            }
        };
        annotate("192.0.2.0/24").await;
        record_lists(&main, &ns.name, &dns, 1, "the hub's record without member2's address").await;
        let member2_ip = gatewright::simulate::simulated_ip(id2.as_str());
        let (status, message) = wait_for("the hub Gateway naming the refused address", T, || async {
            placed_condition(&hub_gws).await.filter(|(s, _)| s == "False")
        })
        .await;
        assert_eq!(status, "False");
        assert!(message.contains(&format!("{id2}: {member2_ip}")), "{message}");
        let events: Api<k8s_openapi::api::events::v1::Event> =
            Api::namespaced(main.clone(), &ns.name);
        wait_for("an AddressRefused Event on the hub Gateway", T, || async {
            events
                .list(&Default::default())
                .await
                .unwrap()
                .items
                .into_iter()
                .find(|e| {
                    e.reason.as_deref() == Some("AddressRefused")
                        && e.note.as_deref().is_some_and(|n| n.contains(&member2_ip))
                })
        })
        .await;
        annotate(fleet::MEMBER_ADDRESSES).await;
        record_lists(&main, &ns.name, &dns, 2, "the hub's record with member2's address again").await;
        wait_for("the hub Gateway placed again", T, || async {
            placed_condition(&hub_gws).await.filter(|(s, _)| s == "True")
        })
        .await;

        // Restarted on the converged placement: nothing written, in the hub or a member.
        let key = gatewright::snapshot::Key::new(ns.name.clone(), "pub");
        let ctl = restart_quiet(ctl, &main, &opts, &[&id, &id2], &key, false, &fleet.name).await;

        // `gatewright trace --fleet` shows each placed gateway in its member, read there.
        let read = gatewright::live::fleet::FleetRead {
            namespace: Some(fleet.name.clone()),
            consumer: "gatewright".to_owned(),
            ..Default::default()
        };

        // `gatewright diff --fleet`: the files as applied change nothing, placed children
        // compared with what their members hold; a new hostname on the route changes the
        // route copy and the certificate in each member, dry-run there.
        let files = tempfile::tempdir().unwrap();
        let file = files.path().join("pub.yaml");
        std::fs::write(&file, &pub_yaml).unwrap();
        let diff = |read: gatewright::live::fleet::FleetRead| {
            let (main, ctl_ns, file) = (main.clone(), opts.controller_namespace.clone(), file.clone());
            async move {
                gatewright::live::commands::diff(&main, &ctl_ns, Some(&read), &[file]).await
            }
        };
        let out = diff(read.clone()).await;
        assert_eq!(
            (out.code, out.stdout.as_str()),
            (0, ""),
            "diff --fleet of the files as applied: {:?}",
            out.stderr
        );
        std::fs::write(
            &file,
            pub_yaml.replace("hostnames: [shop.example.com]", "hostnames: [shop.example.com, cart.example.com]"),
        )
        .unwrap();
        let out = diff(read.clone()).await;
        assert_eq!(out.code, 1, "diff --fleet with a new hostname: {:?}\n{}", out.stderr, out.stdout);
        for member in [&id, &id2] {
            for child in [
                format!("~ change HTTPRoute {}/shop-pub-istio in cluster {member} [route]", ns.name),
                format!("~ change Certificate {}/pub-tls in cluster {member} [certificate]", ns.name),
            ] {
                assert!(out.stdout.contains(&child), "{child} missing from:\n{}", out.stdout);
            }
        }
        assert!(out.stdout.contains("cart.example.com"), "{}", out.stdout);
        let placed_in = |read: gatewright::live::fleet::FleetRead| {
            let main = main.clone();
            let ctl_ns = opts.controller_namespace.clone();
            let key = key.clone();
            async move {
                let out = gatewright::live::commands::trace(
                    &main,
                    &ctl_ns,
                    Some(&read),
                    &gatewright::live::commands::Traced::Gateway(key),
                    gatewright::live::commands::Format::Json,
                )
                .await;
                assert_eq!(out.code, 0, "trace --fleet failed: {:?}", out.stderr);
                let report: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
                let mut placed: Vec<(String, String)> = report["children"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .filter(|c| c["name"] == "pub-istio")
                    .map(|c| {
                        (
                            c["cluster"].as_str().unwrap_or_default().to_owned(),
                            c["state"].as_str().unwrap().to_owned(),
                        )
                    })
                    .collect();
                placed.sort();
                (placed, out.stderr)
            }
        };
        let (placed_now, _) = placed_in(read.clone()).await;
        assert_eq!(
            placed_now,
            [
                (id.to_string(), "Ready".to_owned()),
                (id2.to_string(), "Ready".to_owned())
            ],
            "trace --fleet shows each placed gateway in its member"
        );

        // The member's control plane reported unhealthy: the record stops listing it (its
        // endpoints emptied, then the second member's alone), and the Gateway names the
        // member.
        let t = Instant::now();
        set_healthy(&main, &fleet.name, "member", false).await;
        record_lists(&main, &ns.name, &dns, 1, "the hub's record to stop listing the member").await;
        println!(
            "member reported unhealthy: the hub's record stopped listing it {:.1} s later",
            t.elapsed().as_secs_f64()
        );
        wait_for("the hub Gateway to name the member not served", T, || async {
            let (status, message) = placed_condition(&hub_gws).await?;
            // Each member not served is named with why: `<member> (<why>)`.
            (status == "False"
                && message.contains(&format!("{id} ("))
                && !message.contains(&format!("{id2} (")))
            .then_some(())
        })
        .await;
        // Healthy again: the record lists it again, with the same placed gateway.
        set_healthy(&main, &fleet.name, "member", true).await;
        record_lists(&main, &ns.name, &dns, 2, "the hub's record to list the member again").await;
        assert_eq!(
            member_gws.get("pub-istio").await.unwrap().metadata.uid,
            placed.metadata.uid,
            "the member's placed gateway was kept, not made again"
        );

        // The member's API server killed (nobody reports it unhealthy): once its watches
        // have found it unreachable for a while, the record stops listing it, and nothing
        // is written in the other member meanwhile (its audit log); back, it is listed
        // again, with the same placed gateway.
        let killed_at = k8s_openapi::jiff::Timestamp::now();
        let t = Instant::now();
        let restart = member.kill_api_server(30);
        record_lists(&main, &ns.name, &dns, 1, "the hub's record to stop listing the dead member").await;
        let dropped = t.elapsed();
        println!(
            "member's API server killed: the hub's record stopped listing it {:.1} s later",
            dropped.as_secs_f64()
        );
        // trace --fleet finds it unreachable too, and shows what the other member holds.
        let (placed_now, notes) = placed_in(read.clone()).await;
        assert_eq!(placed_now, [(id2.to_string(), "Ready".to_owned())]);
        assert!(
            notes
                .iter()
                .any(|n| n.contains(id.as_str()) && n.contains("unreachable")),
            "trace --fleet names the unreachable member: {notes:?}"
        );
        let status = tokio::task::spawn_blocking(move || {
            let mut restart = restart;
            restart.wait()
        })
        .await
        .unwrap()
        .unwrap();
        assert!(status.success(), "the member's API server came back");
        record_lists(&main, &ns.name, &dns, 2, "the hub's record to list the member once it is back").await;
        let back_at = k8s_openapi::jiff::Timestamp::now();
        assert_eq!(
            member_gws.get("pub-istio").await.unwrap().metadata.uid,
            placed.metadata.uid,
            "the member's placed gateway was kept while it was unreachable"
        );
        // The controller's requests: user agent `gatewright/<version> (<identity>)`.
        let ours = member2.writes_of("gatewright/");
        assert!(
            ours.iter().any(|w| *w < killed_at),
            "the controller wrote in the second member before (its audit log records it)"
        );
        let during: Vec<_> = ours
            .iter()
            .filter(|w| **w >= killed_at && **w <= back_at)
            .collect();
        assert!(
            during.is_empty(),
            "the other member was written while the member was dead: {during:?}"
        );

        // Its ClusterProfile deleted: no longer served, and a new Gateway in the member
        // gets no status from us.
        profiles
            .delete("member", &kube::api::DeleteParams::default())
            .await
            .unwrap();
        served(&ctl, &id, false).await;
        wait_for("the member no longer reported", T, || async {
            (!ctl.metrics().fleet_members().contains_key(id.as_str())).then_some(())
        })
        .await;
        assert!(!ctl.remove_cluster(&ClusterId::local()), "the local cluster stays");
        apply_yaml(
            &other,
            &format!(
                "apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {{name: late, namespace: {}}}\nspec:\n  gatewayClassName: {class}\n  listeners:\n  - {{name: http, port: 80, protocol: HTTP}}\n",
                ns.name
            ),
        )
        .await;
        let gws: Api<Gateway> = Api::namespaced(other.clone(), &ns.name);
        // What the local cluster's Gateways take to get a status, with room to spare.
        tokio::time::sleep(gatewright::controller::NEW_GATEWAY_SETTLE + Duration::from_secs(5))
            .await;
        let late = serde_json::to_value(gws.get("late").await.unwrap()).unwrap();
        // The CRD's default status says Unknown ("Waiting for controller") until a
        // controller writes.
        let conditions = late["status"]["conditions"].as_array().cloned().unwrap_or_default();
        assert!(
            conditions.iter().all(|c| c["status"] == "Unknown"),
            "a cluster no longer served was written to: {conditions:?}"
        );

        // The hub Gateway deleted while the member it still places in is unreachable: the
        // teardown does not wait for the member; what is placed there is left there, said
        // in an Event.
        let restart = member2.kill_api_server(45);
        record_lists(&main, &ns.name, &dns, 0, "the hub's record to stop listing the second member").await;
        // The record may stop listing it before the controller counts it unreachable (its
        // placed gateway narrowed, say): deleted while it is counted so.
        wait_for("the hub Gateway to name the second member unreachable", T, || async {
            let (_, message) = placed_condition(&hub_gws).await?;
            message
                .contains(&format!("{id2} (unreachable"))
                .then_some(())
        })
        .await;
        let t = Instant::now();
        hub_gws
            .delete("pub", &kube::api::DeleteParams::default())
            .await
            .unwrap();
        wait_for("the hub Gateway gone", T, || async {
            hub_gws.get_opt("pub").await.unwrap().is_none().then_some(())
        })
        .await;
        println!(
            "hub Gateway deleted with its member unreachable: gone {:.1} s later",
            t.elapsed().as_secs_f64()
        );
        let mut restart = restart;
        assert!(
            restart.try_wait().unwrap().is_none(),
            "the teardown ended only once the member was back"
        );
        let events: Api<k8s_openapi::api::core::v1::Event> =
            Api::namespaced(main.clone(), &ns.name);
        let said = events
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .into_iter()
            .filter(|e| e.reason.as_deref() == Some("PlacedChildrenLeft"))
            .filter_map(|e| e.message)
            .collect::<Vec<_>>();
        assert!(
            said.iter()
                .any(|m| m.contains(id2.as_str()) && m.contains("pub-istio")),
            "an Event names what was left in the member: {said:?}"
        );
        // And what was placed in the first member, let go when its profile was deleted
        // (no longer mirrored in the hub, but known).
        assert!(
            said.iter().any(|m| m.contains(&format!("left in member {id},")) && m.contains("pub-istio")),
            "an Event names what was left in the member let go: {said:?}"
        );
        // It is recorded in the hub, and a restart while the member is still down finds
        // it there.
        let records: Api<k8s_openapi::api::core::v1::ConfigMap> =
            Api::namespaced(main.clone(), &ctl_ns.name);
        let listed = || async {
            records
                .list(&ListParams::default().labels("gatewright.dev/left-behind=true"))
                .await
                .unwrap()
                .items
        };
        let recorded = listed().await;
        assert_eq!(recorded.len(), 1, "one record for the deleted Gateway");
        let objects = recorded[0].data.as_ref().unwrap()["objects"].clone();
        assert!(
            objects.contains("pub-istio") && objects.contains(id2.as_str()),
            "the record lists what was left in the member: {objects}"
        );
        assert!(
            objects.contains(&format!("\"cluster\":\"{id}\"")),
            "the record lists what was left in the member let go: {objects}"
        );
        let stopped = ctl;
        assert!(stopped.shutdown(Duration::from_secs(10)).await);
        let ctl = gatewright::controller::start(main.clone(), opts.clone())
            .await
            .unwrap();
        assert!(
            restart.try_wait().unwrap().is_none(),
            "restarted before the member was back"
        );
        let status = tokio::task::spawn_blocking(move || restart.wait())
            .await
            .unwrap()
            .unwrap();
        assert!(status.success(), "the second member's API server came back");
        // Served again: what the teardown left there is deleted (it still carries the
        // deleted Gateway's UID), the route copy too.
        let t = Instant::now();
        placed_gone("what was left in the member deleted once it is back", &third, &ns.name).await;
        println!(
            "what was left in the member while it was down: deleted {:.1} s after it was back (the controller restarted meanwhile)",
            t.elapsed().as_secs_f64()
        );
        // What was left in the first member (let go) keeps the record: it is still there.
        assert!(member_gws.get_opt("pub-istio").await.unwrap().is_some());
        assert_eq!(listed().await.len(), 1, "the record stays while the member let go holds some of it");
        // Its profile made again: served, and what the teardown left there deleted.
        let t = Instant::now();
        enrol(&main, &fleet.name, "member", &member_kubeconfig(&member, None), true).await;
        // The stopped controller, still held here, engaged nothing meanwhile.
        served(&ctl, &id, true).await;
        assert!(
            stopped.cluster(&id).is_none(),
            "a stopped controller engaged a member"
        );
        placed_gone("what was left in the member let go deleted once it is served again", &other, &ns.name).await;
        println!(
            "what was left in the member let go (its profile deleted): deleted {:.1} s after its profile was made again",
            t.elapsed().as_secs_f64()
        );
        wait_for("the record deleted once all of it is gone", T, || async {
            listed().await.is_empty().then_some(())
        })
        .await;

        // A member with no class of ours watches no route: a route there that is not ours,
        // under the name a placed route copy takes, is not overwritten (its empty route
        // cache says nothing of which names are taken, so the controller reads first). The
        // second member alone is placed in now (the first one's profile, made again, has
        // no label).
        let route_ar = kube::api::ApiResource::from_gvk_with_plural(
            &kube::api::GroupVersionKind::gvk("gateway.networking.k8s.io", "v1", "HTTPRoute"),
            "httproutes",
        );
        let member2_routes: Api<DynamicObject> =
            Api::namespaced_with(third.clone(), &ns.name, &route_ar);
        assert!(
            !ctl.cluster(&id2).unwrap().primary_watches().iter().any(|w| w == "HTTPRoute"),
            "the second member watches no route"
        );
        apply_yaml(
            &third,
            &format!(
                "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {{name: cart-pub2-istio, namespace: {}}}\nspec:\n  parentRefs: [{{name: theirs}}]\n  hostnames: [theirs.example.org]\n",
                ns.name
            ),
        )
        .await;
        let theirs = member2_routes.get("cart-pub2-istio").await.unwrap();
        apply_yaml(
            &main,
            &format!(
                "apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {{name: pub2, namespace: {ns}}}\nspec:\n  gatewayClassName: {placing}\n  listeners:\n  - {{name: http, port: 80, protocol: HTTP, hostname: \"*.example.com\"}}\n---\napiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {{name: cart, namespace: {ns}}}\nspec:\n  parentRefs: [{{name: pub2}}]\n  hostnames: [cart.example.com]\n  rules: [{{backendRefs: [{{name: svc, port: 80}}]}}]\n",
                ns = ns.name
            ),
        )
        .await;
        let hub_statuses = || async {
            let g = serde_json::to_value(hub_gws.get("pub2").await.ok()?).ok()?;
            let r = serde_json::to_value(
                Api::<gateway_api::apis::standard::httproutes::HttpRoute>::namespaced(
                    main.clone(),
                    &ns.name,
                )
                .get("cart")
                .await
                .ok()?,
            )
            .ok()?;
            Some(format!("{} {}", g["status"], r["status"]))
        };
        let said = wait_for("the hub naming the route it will not overwrite", T, || async {
            hub_statuses()
                .await
                .filter(|s| s.contains("not managed by gatewright"))
        })
        .await;
        assert!(said.contains("cart-pub2-istio"), "{said}");
        let after = member2_routes.get("cart-pub2-istio").await.unwrap();
        assert_eq!(
            after.metadata.resource_version, theirs.metadata.resource_version,
            "the route that is not ours was written to: {:?}",
            after.data
        );
        assert!(ctl.shutdown(Duration::from_secs(10)).await);
    });
    drop(member);
    drop(member2);
}
