//! Fleet mode scaled out over replicas, on real API servers: a hub (the test cluster) and
//! two members of their own whose API servers record every write (`tests/cluster/up`
//! with `GATEWRIGHT_CLUSTER_AUDIT=1`). Replicas run in-process on runtimes of their own
//! (killed by dropping the runtime, as a crash would: nothing released), with leader
//! election on, so the members are shared through a Lease each in the hub:
//!
//! - a lone replica serves both members; a second one takes a share (one each);
//! - a replica killed: its member moves to the other, which serves it (a change there
//!   converges);
//! - a replica cut off from the hub (its hub connection runs through a proxy the test cuts:
//!   held connections dropped, new ones accepted and never answered) while its member keeps
//!   changing: the other replica takes the member over, and the member's audit log shows
//!   no write of the cut-off replica received after its Lease ran out;
//! - placement with the members shared: a hub Gateway whose class places a gateway and a
//!   route copy in both members gets them written in each member by the replica holding
//!   its Lease (the member's audit log names it, and never the other one), and the hub's
//!   record lists both members' addresses; the replica that does not lead killed, its
//!   member's placed children are kept (same UID) and converged by the other;
//! - a second placing Gateway deleted while the members are shared: what it placed in each
//!   member is deleted by the replica holding its Lease (the audit log names it), and the
//!   hub Gateway goes once nothing of it is left;
//! - what a teardown leaves in a member that is down, swept by the replica that does not
//!   lead: a third placing Gateway placed in both members, the API server of the member the
//!   replica that does not lead holds killed (`tests/cluster/restart`), the Gateway deleted
//!   once the leader counts that member unreachable: it goes while the member is down,
//!   what it placed there recorded in the hub (`gatewright-left-<uid>`); the member back,
//!   what was left there is deleted by the holder of its Lease, after the Gateway had gone
//!   (the member's audit log names it, never the leader), and then the record, by the
//!   leader (the hub's audit log, when it writes one);
//! - the partition test covers a placed write too: the route copy changed by hand in the
//!   cut-off replica's member once the other holds it is put back, and no write of the
//!   cut-off replica reaches the member after its Lease ran out;
//! - a graceful stop gives the member Leases back.
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

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use gateway_api::apis::standard::gateways::Gateway;
use gatewright::controller::{FleetOptions, Options, Runner};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::jiff::Timestamp;
use kube::Client;
use kube::api::{Api, ListParams};

use common::{TestNamespace, admin, apply_yaml, wait_for};
use fleet::{Member, T, converged, enrol, member_kubeconfig, world};

/// The leader-election Lease; member Leases are `<SHARE>-member-<ns>.<name>`.
const SHARE: &str = "gw-share";

/// A replica on a runtime of its own.
struct Replica {
    rt: tokio::runtime::Runtime,
    ctl: Arc<Runner>,
}

fn start_replica(hub: kube::Config, fleet_ns: &str) -> Replica {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let ctl = rt.block_on(async {
        let client = Client::try_from(hub).unwrap();
        let opts = Options {
            controller_namespace: fleet_ns.to_owned(),
            leader_election: Some((fleet_ns.to_owned(), SHARE.to_owned())),
            fleet: Some(FleetOptions {
                namespace: Some(fleet_ns.to_owned()),
                ..FleetOptions::default()
            }),
            ..Options::default()
        };
        gatewright::controller::start(client, opts).await.unwrap()
    });
    Replica { rt, ctl }
}

impl Replica {
    fn held(&self) -> BTreeSet<String> {
        self.ctl.members_held().unwrap()
    }
}

/// A TCP proxy to the hub's API server that can be cut: held connections dropped, new
/// ones accepted and never answered (a partition, not a refusal).
struct Proxy {
    addr: SocketAddr,
    cut: Arc<AtomicBool>,
    links: Arc<Mutex<Vec<tokio::task::JoinHandle<()>>>>,
}

impl Proxy {
    async fn start(target: SocketAddr) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let cut = Arc::new(AtomicBool::new(false));
        let links: Arc<Mutex<Vec<tokio::task::JoinHandle<()>>>> = Arc::default();
        let (c, l) = (cut.clone(), links.clone());
        tokio::spawn(async move {
            let mut black_hole = Vec::new();
            while let Ok((mut inbound, _)) = listener.accept().await {
                if c.load(Ordering::SeqCst) {
                    black_hole.push(inbound);
                    continue;
                }
                let link = tokio::spawn(async move {
                    if let Ok(mut out) = tokio::net::TcpStream::connect(target).await {
                        let _ = tokio::io::copy_bidirectional(&mut inbound, &mut out).await;
                    }
                });
                l.lock().unwrap().push(link);
            }
        });
        Self { addr, cut, links }
    }

    fn cut(&self) {
        self.cut.store(true, Ordering::SeqCst);
        for link in self.links.lock().unwrap().drain(..) {
            link.abort();
        }
    }
}

/// The member Leases in `ns`: member key -> (holder, renew time, transitions).
async fn member_leases(
    hub: &Client,
    ns: &str,
) -> std::collections::BTreeMap<String, (Option<String>, Option<Timestamp>, i32)> {
    let leases: Api<Lease> = Api::namespaced(hub.clone(), ns);
    let selector = format!("gatewright.dev/fleet-share={SHARE},gatewright.dev/fleet-lease=member");
    leases
        .list(&ListParams::default().labels(&selector))
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|l| {
            let member = l.metadata.annotations.unwrap()["gatewright.dev/member"].clone();
            let spec = l.spec.unwrap();
            (
                member,
                (
                    spec.holder_identity,
                    spec.renew_time.map(|t| t.0),
                    spec.lease_transitions.unwrap_or(0),
                ),
            )
        })
        .collect()
}

/// Placement: both profiles labelled public, the shipped fleet class as `placing`, and a
/// hub Gateway `pub` of it in `ns` with one route (`hosts`).
async fn place(hub: &Client, fleet_ns: &str, ns: &str, placing: &str, hosts: &str) {
    let profiles: kube::Api<kube::api::DynamicObject> = Api::namespaced_with(
        hub.clone(),
        fleet_ns,
        &gatewright::fleet::profile::api_resource(),
    );
    for m in ["east", "west"] {
        profiles
            .patch(
                m,
                &kube::api::PatchParams::default(),
                &kube::api::Patch::Merge(serde_json::json!({
                    "metadata": {"labels": {"gatewright.dev/serves": "public"}}
                })),
            )
            .await
            .unwrap();
    }
    apply_yaml(hub, &common::fleet_class_yaml(placing)).await;
    apply_yaml(
        hub,
        &format!(
            "apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {{name: pub, namespace: {ns}}}\nspec:\n  gatewayClassName: {placing}\n  listeners:\n  - {{name: http, port: 80, protocol: HTTP, hostname: \"*.example.com\"}}\n---\napiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {{name: shop, namespace: {ns}}}\nspec:\n  parentRefs: [{{name: pub}}]\n  hostnames: [{hosts}]\n  rules: [{{backendRefs: [{{name: svc, port: 80}}]}}]\n"
        ),
    )
    .await;
}

/// The route copy placed in a member: its hostnames, and the placed gateway's UID.
async fn placed_in(member: &Client, ns: &str) -> Option<(Vec<String>, String)> {
    let routes: Api<gateway_api::apis::standard::httproutes::HttpRoute> =
        Api::namespaced(member.clone(), ns);
    let gws: Api<gateway_api::apis::standard::gateways::Gateway> =
        Api::namespaced(member.clone(), ns);
    let copy = routes.get_opt("shop-pub-istio").await.ok()??;
    let gw = gws.get_opt("pub-istio").await.ok()??;
    Some((copy.spec.hostnames.unwrap_or_default(), gw.metadata.uid?))
}

/// Waits until every member holds the route copy with `hosts` and the hub's record lists
/// both members' addresses (the downstream status simulated, in the members and the hub),
/// the hub Gateway `Placed`.
/// Returns each member's placed gateway UID.
async fn placement_converged(
    hub: &Client,
    ns: &str,
    members: [&Member; 2],
    hosts: &[&str],
) -> Vec<String> {
    let dns: Api<kube::api::DynamicObject> = Api::namespaced_with(
        hub.clone(),
        ns,
        &kube::api::ApiResource::from_gvk_with_plural(
            &kube::api::GroupVersionKind::gvk("externaldns.k8s.io", "v1alpha1", "DNSEndpoint"),
            "dnsendpoints",
        ),
    );
    let gws: Api<gateway_api::apis::standard::gateways::Gateway> = Api::namespaced(hub.clone(), ns);
    let clients = [members[0].client().await, members[1].client().await];
    // What was seen last, said when it changes (what a time-out waited for).
    let said = Mutex::new(String::new());
    wait_for(
        "placement converged in both members and the hub",
        T,
        || async {
            let mut seen = Vec::new();
            let mut uids = Vec::new();
            // external-dns's part, in the hub: a change of the record holds the placed
            // objects until it is read.
            let _ = gatewright::simulate::simulate_ready_where(
                hub,
                Some(ns),
                gatewright::simulate::Play::All,
            )
            .await;
            for c in &clients {
                let _ = gatewright::simulate::simulate_ready_where(
                    c,
                    Some(ns),
                    gatewright::simulate::Play::All,
                )
                .await;
                let placed = placed_in(c, ns).await;
                seen.push(format!("{:?}", placed.as_ref().map(|p| &p.0)));
                if let Some((_, uid)) = placed.filter(|(h, _)| h == hosts) {
                    uids.push(uid);
                }
            }
            let targets = dns
                .get_opt("pub-dns")
                .await
                .ok()
                .flatten()
                .map(|d| d.data["spec"]["endpoints"][0]["targets"].clone());
            let g = gws
                .get("pub")
                .await
                .ok()
                .map(|g| serde_json::to_value(g).unwrap());
            let placed = g.as_ref().and_then(|g| {
                g["status"]["conditions"]
                    .as_array()?
                    .iter()
                    .find(|c| c["type"] == "gatewright.dev/Placed")
                    .cloned()
            });
            seen.push(format!("dns {targets:?}"));
            seen.push(format!("placed {placed:?}"));
            let now = seen.join("; ");
            if *said.lock().unwrap() != now {
                println!("placement: {now}");
                *said.lock().unwrap() = now;
            }
            (uids.len() == 2
                && targets
                    .as_ref()
                    .and_then(|t| t.as_array())
                    .is_some_and(|t| t.len() == 2)
                && placed?["status"] == "True")
                .then_some(uids)
        },
    )
    .await
}

/// The writers (user agents) of the placed gateway and route copy in a member.
fn placed_writers(member: &Member, ns: &str) -> BTreeSet<String> {
    member
        .audit_log()
        .iter()
        .filter(|e| {
            e["objectRef"]["namespace"] == ns
                && ["pub-istio", "shop-pub-istio"]
                    .iter()
                    .any(|n| e["objectRef"]["name"] == *n)
                && !e["objectRef"]["subresource"].is_string()
        })
        .filter_map(|e| e["userAgent"].as_str().map(str::to_owned))
        .collect()
}

/// How long the API server of the member killed under a teardown stays down (it serves
/// again a few seconds later: 28.4-30.1 s after the kill measured): longer than the leader
/// takes to count it unreachable and to tear the hub Gateway down without it (9.4-10.1 s
/// and 5.1-5.9 s measured), with about 12 s to spare. The Gateway must be gone before the
/// member is back, else the holder of the member's Lease would delete what is placed there
/// in the teardown, not in the sweep.
const MEMBER_DOWN_SECONDS: u32 = 25;

/// The `gatewright.dev/Placed` condition of the hub Gateway `name`: its status and message.
async fn placed_condition(gws: &Api<Gateway>, name: &str) -> Option<(String, String)> {
    let g = serde_json::to_value(gws.get(name).await.ok()?).ok()?;
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

/// The holder of the leader-election Lease (`SHARE`) in `ns`.
async fn leader(hub: &Client, ns: &str) -> Option<String> {
    let leases: Api<Lease> = Api::namespaced(hub.clone(), ns);
    leases.get(SHARE).await.ok()?.spec?.holder_identity
}

/// The hub's audit log (`$GATEWRIGHT_CLUSTER_DIR/audit.log`), when its API server writes
/// one (`GATEWRIGHT_CLUSTER_AUDIT=1`, as scripts/test.sh starts it).
fn hub_audit_log() -> Option<Vec<serde_json::Value>> {
    let dir = std::env::var("GATEWRIGHT_CLUSTER_DIR").ok()?;
    let text = std::fs::read_to_string(format!("{dir}/audit.log")).ok()?;
    Some(
        text.lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect(),
    )
}

/// Waits until `a` and `b` each serve one member, and every member is served.
async fn shared(a: &Replica, b: &Replica, members: &BTreeSet<String>) {
    wait_for("the members shared one each", T, || async {
        let (x, y) = (a.held(), b.held());
        (x.len() == 1 && y.len() == 1 && x.union(&y).cloned().collect::<BTreeSet<_>>() == *members)
            .then_some(())
    })
    .await;
}

#[test]
fn replicas_share_the_members_move_them_when_one_dies_and_never_write_twice() {
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
    let (east, west) = std::thread::scope(|s| {
        let e = s.spawn(Member::up_audited);
        let w = s.spawn(Member::up_audited);
        (e.join().unwrap(), w.join().unwrap())
    });
    println!("two members up in {:.1} s", began.elapsed().as_secs_f64());
    let test_rt = tokio::runtime::Runtime::new().unwrap();
    let (hub, fleet_ns, hub_config, proxy) = test_rt.block_on(async {
        let hub = admin().await;
        let fleet = TestNamespace::new(&hub, "share").await;
        enrol(
            &hub,
            &fleet.name,
            "east",
            &member_kubeconfig(&east, None),
            true,
        )
        .await;
        enrol(
            &hub,
            &fleet.name,
            "west",
            &member_kubeconfig(&west, None),
            true,
        )
        .await;
        for (m, host) in [(&east, "east.example.com"), (&west, "west.example.com")] {
            let c = m.client().await;
            apply_yaml(
                &c,
                "apiVersion: v1\nkind: Namespace\nmetadata: {name: apps}\n",
            )
            .await;
            world(&c, "apps", "shared", &[host]).await;
        }
        let config = common::config().await;
        let target: SocketAddr = config
            .cluster_url
            .authority()
            .unwrap()
            .as_str()
            .parse()
            .unwrap();
        let proxy = Proxy::start(target).await;
        (hub, fleet, config, proxy)
    });
    let members: BTreeSet<String> = ["east", "west"]
        .iter()
        .map(|m| format!("{}/{m}", fleet_ns.name))
        .collect();
    let cluster_of = |key: &str| if key.ends_with("/east") { &east } else { &west };

    // A lone replica, reaching the hub through the proxy, serves both members.
    let mut through_proxy = hub_config.clone();
    through_proxy.cluster_url = format!("https://{}", proxy.addr).parse().unwrap();
    let a = start_replica(through_proxy, &fleet_ns.name);
    test_rt.block_on(async {
        wait_for("replica a to serve both members", T, || async {
            (a.held() == members).then_some(())
        })
        .await;
        converged(&east.client().await, "apps", 1, &["east.example.com"]).await;
        converged(&west.client().await, "apps", 1, &["west.example.com"]).await;
    });

    // A second replica takes its share: one member each.
    let t = Instant::now();
    let b = start_replica(hub_config.clone(), &fleet_ns.name);
    test_rt.block_on(shared(&a, &b, &members));
    println!(
        "a new replica took its share {:.1} s after it started",
        t.elapsed().as_secs_f64()
    );
    let leases = test_rt.block_on(member_leases(&hub, &fleet_ns.name));
    for m in &members {
        let holder = leases[m].0.as_deref().unwrap();
        let by = if a.held().contains(m) { &a } else { &b };
        assert_eq!(
            holder,
            by.ctl.identity(),
            "the Lease of {m} names who serves it"
        );
    }

    // Placement with the members shared: each replica writes what the hub's Gateway
    // places in the member whose Lease it holds (b, which does not lead, included).
    let placing = format!("fleet-{}", fleet_ns.name);
    let placed_ns = test_rt.block_on(async {
        let ns = TestNamespace::new(&hub, "placed").await;
        for m in [&east, &west] {
            apply_yaml(
                &m.client().await,
                &format!(
                    "apiVersion: v1\nkind: Namespace\nmetadata: {{name: {}}}\n",
                    ns.name
                ),
            )
            .await;
        }
        place(&hub, &fleet_ns.name, &ns.name, &placing, "shop.example.com").await;
        ns
    });
    let t = Instant::now();
    let uids = test_rt.block_on(placement_converged(
        &hub,
        &placed_ns.name,
        [&east, &west],
        &["shop.example.com"],
    ));
    println!(
        "placement with the members shared converged {:.1} s after the Gateway was applied",
        t.elapsed().as_secs_f64()
    );
    for m in &members {
        let (holder, other) = if a.held().contains(m) {
            (&a, &b)
        } else {
            (&b, &a)
        };
        let writers = placed_writers(cluster_of(m), &placed_ns.name);
        assert!(
            writers.iter().any(|w| w.contains(holder.ctl.identity())),
            "the holder of {m}'s Lease wrote what is placed there: {writers:?}"
        );
        assert!(
            !writers.iter().any(|w| w.contains(other.ctl.identity())),
            "the other replica never wrote what is placed in {m}: {writers:?}"
        );
    }

    // b is killed: its member moves to a, which serves it.
    let moved = b.held().into_iter().next().unwrap();
    let t = Instant::now();
    b.rt.shutdown_background();
    test_rt.block_on(async {
        wait_for("a to take the killed replica's member", T, || async {
            (a.held() == members).then_some(())
        })
        .await;
        println!(
            "a killed replica's member moved {:.1} s after the kill",
            t.elapsed().as_secs_f64()
        );
        let c = cluster_of(&moved).client().await;
        let host = if moved.ends_with("/east") { "east" } else { "west" };
        apply_yaml(
            &c,
            "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {name: moved, namespace: apps}\nspec:\n  parentRefs: [{name: gw}]\n  hostnames: [moved.example.com]\n  rules: [{backendRefs: [{name: svc, port: 80}]}]\n",
        )
        .await;
        let first = format!("{host}.example.com");
        let mut hosts = [first.as_str(), "moved.example.com"];
        hosts.sort_unstable();
        converged(&c, "apps", 2, &hosts).await;
        // What b placed there is kept, and a converges it: the route's new hostname
        // reaches the copy in the moved member.
        apply_yaml(
            &hub,
            &format!("apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {{name: shop, namespace: {}}}\nspec:\n  parentRefs: [{{name: pub}}]\n  hostnames: [shop.example.com, cart.example.com]\n  rules: [{{backendRefs: [{{name: svc, port: 80}}]}}]\n", placed_ns.name),
        )
        .await;
        let now = placement_converged(
            &hub,
            &placed_ns.name,
            [&east, &west],
            // The copy lists the hostnames its route was accepted for, sorted.
            &["cart.example.com", "shop.example.com"],
        )
        .await;
        assert_eq!(now, uids, "the placed gateways were kept, not made again");
    });

    // A replica again: the share is one each once more.
    let b = start_replica(hub_config.clone(), &fleet_ns.name);
    test_rt.block_on(shared(&a, &b, &members));

    // A second placing Gateway, placed and then deleted while the members are shared: the
    // teardown is the leader's, and what is placed in each member is deleted by the
    // replica holding its Lease.
    test_rt.block_on(async {
        let gws: Api<gateway_api::apis::standard::gateways::Gateway> =
            Api::namespaced(hub.clone(), &placed_ns.name);
        apply_yaml(
            &hub,
            &format!(
                "apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {{name: second, namespace: {}}}\nspec:\n  gatewayClassName: {placing}\n  listeners:\n  - {{name: http, port: 80, protocol: HTTP, hostname: \"*.second.example.com\"}}\n",
                placed_ns.name
            ),
        )
        .await;
        let clients = [east.client().await, west.client().await];
        let second_in = |c: &Client| {
            Api::<gateway_api::apis::standard::gateways::Gateway>::namespaced(
                c.clone(),
                &placed_ns.name,
            )
        };
        wait_for("the second Gateway placed in both members", T, || async {
            for c in &clients {
                second_in(c).get_opt("second-istio").await.ok()??;
            }
            Some(())
        })
        .await;
        gws.delete("second", &kube::api::DeleteParams::default())
            .await
            .unwrap();
        wait_for("the second Gateway's teardown", T, || async {
            let _ = gatewright::simulate::simulate_ready_where(
                &hub,
                Some(&placed_ns.name),
                gatewright::simulate::Play::All,
            )
            .await;
            for c in &clients {
                if second_in(c).get_opt("second-istio").await.ok()?.is_some() {
                    return None;
                }
            }
            gws.get_opt("second").await.ok()?.is_none().then_some(())
        })
        .await;
    });
    for m in &members {
        let holder = if a.held().contains(m) { &a } else { &b };
        let deleters: BTreeSet<String> = cluster_of(m)
            .audit_log()
            .iter()
            .filter(|e| e["verb"] == "delete" && e["objectRef"]["name"] == "second-istio")
            .filter_map(|e| e["userAgent"].as_str().map(str::to_owned))
            .collect();
        assert!(
            !deleters.is_empty() && deleters.iter().all(|d| d.contains(holder.ctl.identity())),
            "what was placed in {m} was deleted by the holder of its Lease: {deleters:?}"
        );
    }

    // What a teardown leaves in a member that is down, swept by the replica that does not
    // lead: a third placing Gateway placed in both members; the API server of b's member
    // killed, and the Gateway deleted once the leader counts that member unreachable: the
    // leader's teardown leaves what is placed there, records it in the hub and lets the
    // Gateway go. Back, what was left there is deleted by b, which holds the member's Lease
    // (its audit log names b, never a), and then the record, by a.
    assert_eq!(
        test_rt.block_on(leader(&hub, &fleet_ns.name)).as_deref(),
        Some(a.ctl.identity()),
        "a leads"
    );
    let downed = b.held().into_iter().next().unwrap();
    let down_member = cluster_of(&downed);
    let kept_member = cluster_of(members.iter().find(|m| **m != downed).unwrap());
    let left_names = ["third-istio", "r3-third-istio"];
    let (gone_at, record) = test_rt.block_on(async {
        let ns = &placed_ns.name;
        let gws: Api<Gateway> = Api::namespaced(hub.clone(), ns);
        apply_yaml(
            &hub,
            &format!(
                "apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {{name: third, namespace: {ns}}}\nspec:\n  gatewayClassName: {placing}\n  listeners:\n  - {{name: http, port: 80, protocol: HTTP, hostname: \"*.third.example.com\"}}\n---\napiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {{name: r3, namespace: {ns}}}\nspec:\n  parentRefs: [{{name: third}}]\n  hostnames: [shop.third.example.com]\n  rules: [{{backendRefs: [{{name: svc, port: 80}}]}}]\n"
            ),
        )
        .await;
        let (down_c, kept_c) = (down_member.client().await, kept_member.client().await);
        // Whether each of `left_names` is in the member (None: it could not be read).
        let present = |c: &Client| {
            let c = c.clone();
            async move {
                let placed: Api<Gateway> = Api::namespaced(c.clone(), ns);
                let copies: Api<gateway_api::apis::standard::httproutes::HttpRoute> =
                    Api::namespaced(c, ns);
                Some([
                    placed.get_opt(left_names[0]).await.ok()?.is_some(),
                    copies.get_opt(left_names[1]).await.ok()?.is_some(),
                ])
            }
        };
        wait_for("the third Gateway placed in both members", T, || async {
            for c in [&hub, &down_c, &kept_c] {
                let _ = gatewright::simulate::simulate_ready_where(
                    c,
                    Some(ns),
                    gatewright::simulate::Play::All,
                )
                .await;
            }
            for c in [&down_c, &kept_c] {
                if present(c).await? != [true, true] {
                    return None;
                }
            }
            (placed_condition(&gws, "third").await?.0 == "True").then_some(())
        })
        .await;
        let uid = gws.get("third").await.unwrap().metadata.uid.unwrap();

        let killed = Instant::now();
        let mut restart = down_member.kill_api_server(MEMBER_DOWN_SECONDS);
        wait_for(
            "the leader to count b's member unreachable",
            T,
            || async {
                let (_, message) = placed_condition(&gws, "third").await?;
                message
                    .contains(&format!("{downed} (unreachable"))
                    .then_some(())
            },
        )
        .await;
        println!(
            "b's member's API server killed: the third Gateway's Placed named it unreachable {:.1} s later",
            killed.elapsed().as_secs_f64()
        );
        let t = Instant::now();
        gws.delete("third", &kube::api::DeleteParams::default())
            .await
            .unwrap();
        wait_for("the third Gateway's teardown", T, || async {
            // external-dns reads the drained record.
            let _ = gatewright::simulate::simulate_ready_where(
                &hub,
                Some(ns),
                gatewright::simulate::Play::All,
            )
            .await;
            gws.get_opt("third").await.ok()?.is_none().then_some(())
        })
        .await;
        let gone_at = Timestamp::now();
        println!(
            "the third Gateway deleted with b's member down: gone {:.1} s later",
            t.elapsed().as_secs_f64()
        );
        assert!(
            restart.try_wait().unwrap().is_none(),
            "the hub Gateway went while b's member was still down"
        );
        assert_eq!(
            present(&kept_c).await,
            Some([false, false]),
            "what was placed in a's member was deleted by the teardown"
        );
        // What is left in b's member is recorded in the hub, in the controller's namespace.
        let records: Api<ConfigMap> = Api::namespaced(hub.clone(), &fleet_ns.name);
        let record = format!("gatewright-left-{uid}");
        let cm = records.get(&record).await.unwrap();
        assert_eq!(
            cm.metadata.labels.as_ref().unwrap()["gatewright.dev/left-behind"],
            "true"
        );
        let objects: Vec<serde_json::Value> =
            serde_json::from_str(&cm.data.as_ref().unwrap()["objects"]).unwrap();
        let listed: BTreeSet<(String, String)> = objects
            .iter()
            .map(|o| {
                (
                    o["cluster"].as_str().unwrap().to_owned(),
                    o["name"].as_str().unwrap().to_owned(),
                )
            })
            .collect();
        assert_eq!(
            listed,
            left_names
                .iter()
                .map(|n| (downed.clone(), (*n).to_owned()))
                .collect(),
            "the record lists what is left in b's member"
        );

        let status = tokio::task::spawn_blocking(move || restart.wait())
            .await
            .unwrap()
            .unwrap();
        assert!(status.success(), "b's member's API server came back");
        let back = Instant::now();
        println!(
            "b's member's API server back {:.1} s after the kill",
            (back - killed).as_secs_f64()
        );
        wait_for(
            "what was left in b's member deleted once it is back",
            T,
            || async { (present(&down_c).await? == [false, false]).then_some(()) },
        )
        .await;
        println!(
            "what the teardown left in b's member: deleted {:.1} s after it was back",
            back.elapsed().as_secs_f64()
        );
        wait_for("the record deleted once all of it is gone", T, || async {
            records.get_opt(&record).await.ok()?.is_none().then_some(())
        })
        .await;
        println!(
            "the record of it in the hub: deleted {:.1} s after the member was back",
            back.elapsed().as_secs_f64()
        );
        (gone_at, record)
    });
    // The deletes in b's member: each object left there, by b alone, after the hub Gateway
    // had gone (the sweep of the record, not a teardown).
    let deletes: Vec<(String, String, Timestamp)> = down_member
        .audit_log()
        .iter()
        .filter(|e| {
            e["verb"] == "delete"
                && e["objectRef"]["namespace"] == placed_ns.name.as_str()
                && left_names.iter().any(|n| e["objectRef"]["name"] == *n)
        })
        .map(|e| {
            (
                e["objectRef"]["name"].as_str().unwrap().to_owned(),
                e["userAgent"].as_str().unwrap_or_default().to_owned(),
                e["requestReceivedTimestamp"]
                    .as_str()
                    .unwrap()
                    .parse()
                    .unwrap(),
            )
        })
        .collect();
    for name in left_names {
        assert!(
            deletes.iter().any(|(n, _, _)| n == name),
            "{name} was deleted in b's member: {deletes:?}"
        );
    }
    assert!(
        deletes
            .iter()
            .all(|(_, agent, at)| agent.contains(b.ctl.identity()) && *at >= gone_at),
        "what was left in b's member was deleted by b (never by a, {}), after the hub Gateway was gone: {deletes:?}",
        a.ctl.identity()
    );
    // The record's delete, in the hub's audit log when it writes one: by a, the leader.
    match hub_audit_log() {
        Some(events) => {
            let deleters: Vec<String> = events
                .iter()
                .filter(|e| {
                    e["verb"] == "delete"
                        && e["objectRef"]["resource"] == "configmaps"
                        && e["objectRef"]["namespace"] == fleet_ns.name.as_str()
                        && e["objectRef"]["name"] == record.as_str()
                })
                .filter_map(|e| e["userAgent"].as_str().map(str::to_owned))
                .collect();
            assert!(
                !deleters.is_empty() && deleters.iter().all(|d| d.contains(a.ctl.identity())),
                "the record was deleted by the leader: {deleters:?}"
            );
        }
        None => println!(
            "no audit log in the hub ($GATEWRIGHT_CLUSTER_DIR/audit.log): who deleted the record is not checked (scripts/test.sh writes one)"
        ),
    }

    // a is cut off from the hub while its member keeps changing: b takes the member over
    // once a's Lease ran out, and no write of a is received by the member after that.
    let cut_off = a.held().into_iter().next().unwrap();
    let member = cluster_of(&cut_off);
    let a_id = a.ctl.identity().to_owned();
    let b_id = b.ctl.identity().to_owned();
    let before_cut = member.writes_of(&a_id).len();
    assert!(before_cut > 0, "a wrote to {cut_off} while it served it");
    proxy.cut();
    let t = Instant::now();
    let (expiry, hosts) = test_rt.block_on(async {
        let leases = member_leases(&hub, &fleet_ns.name).await;
        let (holder, renewed, _) = leases[&cut_off].clone();
        assert_eq!(holder.as_deref(), Some(a_id.as_str()));
        let expiry = renewed
            .unwrap()
            .checked_add(Duration::from_secs(gatewright::fleet::share::LEASE_SECONDS))
            .unwrap();
        let c = member.client().await;
        let mut hosts: Vec<String> = Vec::new();
        let mut k = 0;
        let mut last_change: Option<Instant> = None;
        wait_for("b to take the cut-off replica's member", T, || {
            // A change every 2 s that a would act on, if it still wrote.
            let change = last_change.is_none_or(|t| t.elapsed() >= Duration::from_secs(2));
            if change {
                k += 1;
                last_change = Some(Instant::now());
                hosts.push(format!("cut{k}.example.com"));
            }
            let host = format!("cut{k}.example.com");
            let c = c.clone();
            let b = &b;
            let cut_off = cut_off.clone();
            async move {
                if change { apply_yaml(
                    &c,
                    &format!(
                        "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {{name: cut{k}, namespace: apps}}\nspec:\n  parentRefs: [{{name: gw}}]\n  hostnames: [{host}]\n  rules: [{{backendRefs: [{{name: svc, port: 80}}]}}]\n"
                    ),
                )
                .await; }
                b.held().contains(&cut_off).then_some(())
            }
        })
        .await;
        (expiry, hosts)
    });
    println!(
        "a replica cut off from the hub lost its member to the other {:.1} s after the cut",
        t.elapsed().as_secs_f64()
    );
    test_rt.block_on(async {
        let c = member.client().await;
        let base = if cut_off.ends_with("/east") {
            "east"
        } else {
            "west"
        };
        let mut all: Vec<String> = vec![format!("{base}.example.com")];
        if cut_off == moved {
            all.push("moved.example.com".into());
        }
        all.extend(hosts.iter().cloned());
        all.sort();
        let names: Vec<&str> = all.iter().map(String::as_str).collect();
        converged(&c, "apps", all.len(), &names).await;
        let leases = member_leases(&hub, &fleet_ns.name).await;
        assert_eq!(leases[&cut_off].0.as_deref(), Some(b_id.as_str()));
        // A placed object changed by hand in the member after a's Lease ran out: put
        // back, by b (a's writes after the expiry are looked for below).
        let copies: Api<gateway_api::apis::standard::httproutes::HttpRoute> =
            Api::namespaced(c.clone(), &placed_ns.name);
        // The patch's answer is the proof the drift was stored: b may put it back before
        // any later read could see it.
        let drifted = copies
            .patch(
                "shop-pub-istio",
                &kube::api::PatchParams::default(),
                &kube::api::Patch::Merge(
                    serde_json::json!({"spec": {"hostnames": ["drift.example.com"]}}),
                ),
            )
            .await
            .unwrap();
        assert_eq!(
            drifted.spec.hostnames.as_deref(),
            Some(&["drift.example.com".to_owned()][..])
        );
        placement_converged(
            &hub,
            &placed_ns.name,
            [&east, &west],
            // The copy lists the hostnames its route was accepted for, sorted.
            &["cart.example.com", "shop.example.com"],
        )
        .await;
    });
    let a_writes = member.writes_of(&a_id);
    let late: Vec<&Timestamp> = a_writes.iter().filter(|w| **w >= expiry).collect();
    assert!(
        late.is_empty(),
        "writes of the cut-off replica received after its Lease ran out at {expiry}: {late:?}"
    );
    let last = a_writes.iter().max().unwrap();
    println!(
        "the cut-off replica's last write reached the member {:.1} s before its Lease ran out",
        (expiry.as_millisecond() - last.as_millisecond()) as f64 / 1000.0
    );
    let b_writes = member.writes_of(&b_id);
    assert!(
        b_writes.iter().any(|w| *w >= expiry),
        "b wrote to the member it took over"
    );

    // The hub Gateway deleted: its teardown deletes what it placed in both members.
    test_rt.block_on(async {
        let gws: Api<gateway_api::apis::standard::gateways::Gateway> =
            Api::namespaced(hub.clone(), &placed_ns.name);
        gws.delete("pub", &kube::api::DeleteParams::default())
            .await
            .unwrap();
        let clients = [east.client().await, west.client().await];
        wait_for("the placed Gateway's teardown", T, || async {
            // external-dns reads the drained record.
            let _ = gatewright::simulate::simulate_ready_where(
                &hub,
                Some(&placed_ns.name),
                gatewright::simulate::Play::All,
            )
            .await;
            let hub_gone = gws.get_opt("pub").await.ok()?.is_none();
            let mut placed_gone = true;
            for c in &clients {
                let copies: Api<gateway_api::apis::standard::httproutes::HttpRoute> =
                    Api::namespaced(c.clone(), &placed_ns.name);
                let placed: Api<gateway_api::apis::standard::gateways::Gateway> =
                    Api::namespaced(c.clone(), &placed_ns.name);
                placed_gone &= copies.get_opt("shop-pub-istio").await.ok()?.is_none()
                    && placed.get_opt("pub-istio").await.ok()?.is_none();
            }
            (hub_gone && placed_gone).then_some(())
        })
        .await;
        placed_ns.delete().await;
    });

    // A graceful stop gives the Leases back.
    a.rt.shutdown_background();
    assert!(b.rt.block_on(b.ctl.shutdown(Duration::from_secs(30))));
    test_rt.block_on(async {
        let leases = member_leases(&hub, &fleet_ns.name).await;
        assert!(
            leases.values().all(|(holder, _, _)| holder.is_none()),
            "{leases:?}"
        );
        assert!(
            leases[&cut_off].2 >= 1,
            "the take-over counted as a transition"
        );
        fleet_ns.delete().await;
    });
    b.rt.shutdown_background();
}
