//! (i) Route changes under traffic, the public Gateway API benchmark's `routechange` scenario
//! (howardjohn/gateway-api-bench, tests/routechange): one HTTPRoute re-applied (server-side
//! apply, as a user or a GitOps tool does) every [`CADENCE`] for [`ROUNDS`] rounds while a
//! client sends requests back to back through Traefik; every answer must be a 200.
//!
//! One Gateway of the shipped Traefik class (an HTTP listener), in a namespace of the test's
//! own with its GatewayClassConfig; one route with a hostname, to a Service with two ports
//! (`http` 8080 and `http-alt` 8081) whose EndpointSlice names both on one address, where two
//! echo processes listen, one per port, each answering with its own name. Round `r` sends to
//! port 8081 with a ResponseHeaderModifier setting `x-round: <r>` when `r` is even, and to
//! port 8080 with no filter when it is odd (round 0 is the route before the changes): the
//! backend that answered and the header tell which round the dataplane was serving. The
//! client opens a connection per request and counts every answer and every error. After the
//! last round it keeps sending for [`AFTER`], and until it sees the last round's state
//! (port 8081, `x-round: <ROUNDS>`), within a bounded wait.
//!
//! Traefik takes a new configuration at most once per 2 s (its providers' throttle), so the
//! dataplane serves a few of the rounds, not each; gatewright's copy follows each one.
//!
//! Asserted: no answer other than 200, no request error, no answer in a state the route
//! never had (the header of one round with the other port's backend), the last round served.
//! Printed: requests, their rate, failures, the states seen in the dataplane, the versions
//! of gatewright's copy of the route a watch saw, and when the last round was served.
//! Run alone: `cargo test --features cluster-tests --test traffic routechange -- --nocapture`
//! (`scripts/bench-scale.sh routechange` on a cluster of its own, saving the figures).

use std::net::Ipv4Addr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt as _;
use kube::api::DeleteParams;
use kube::runtime::watcher;
use serde_json::Value;

use super::{
    Backends, SERIAL, T, admin, apply_yaml, common, cond, downstream, dynamic, http,
    remove_gateway_and_class, start_with_traefik_class, unique_name, wait_for,
};

/// Route changes after the initial route.
const ROUNDS: usize = 20;
/// The time between two changes (the benchmark's grace period).
const CADENCE: Duration = Duration::from_millis(200);
/// How long the client keeps sending after the last change, at least.
const AFTER: Duration = Duration::from_secs(2);
/// The Service's two ports (and the echo processes' ports): odd rounds, even rounds.
const PORTS: [u16; 2] = [8080, 8081];
/// The header the even rounds' ResponseHeaderModifier sets to the round's number.
const ROUND_HEADER: &str = "x-round";
/// The best published result of the scenario (gateway-api-bench's README-v2).
const PUBLISHED: &str = "Istio and agentgateway: 0 failed; Envoy Gateway, Cilium, NGINX: failures";

/// The port round `round` sends to.
fn port_of(round: usize) -> u16 {
    PORTS[usize::from(round.is_multiple_of(2))]
}

/// A Service with the two [`PORTS`] and no selector, and the EndpointSlice naming both on
/// `addr`.
fn backend_yaml(ns: &str, svc: &str, addr: Ipv4Addr) -> String {
    let [a, b] = PORTS;
    format!(
        "apiVersion: v1\nkind: Service\nmetadata: {{name: {svc}, namespace: {ns}}}\nspec:\n  ports:\n  - {{name: http, port: {a}, targetPort: {a}, protocol: TCP}}\n  - {{name: http-alt, port: {b}, targetPort: {b}, protocol: TCP}}\n---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata:\n  name: {svc}-1\n  namespace: {ns}\n  labels: {{kubernetes.io/service-name: {svc}}}\naddressType: IPv4\nports:\n- {{name: http, port: {a}, protocol: TCP}}\n- {{name: http-alt, port: {b}, protocol: TCP}}\nendpoints: [{{addresses: [\"{addr}\"], conditions: {{ready: true, serving: true, terminating: false}}}}]\n"
    )
}

/// The route as round `round` writes it: to [`port_of`]`(round)`, with the header filter on
/// even rounds.
fn route_yaml(ns: &str, name: &str, gw: &str, host: &str, svc: &str, round: usize) -> String {
    let filter = if round.is_multiple_of(2) {
        format!(
            "    filters:\n    - type: ResponseHeaderModifier\n      responseHeaderModifier:\n        set: [{{name: {ROUND_HEADER}, value: \"{round}\"}}]\n"
        )
    } else {
        String::new()
    };
    format!(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {{name: {name}, namespace: {ns}}}\nspec:\n  parentRefs: [{{name: {gw}}}]\n  hostnames: [{host}]\n  rules:\n  - backendRefs: [{{name: {svc}, port: {port}}}]\n{filter}",
        port = port_of(round),
    )
}

/// The HTTP-only parent Gateway of the class.
fn gateway_yaml(ns: &str, gw: &str, class: &str, zone: &str) -> String {
    format!(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {{name: {gw}, namespace: {ns}}}\nspec:\n  gatewayClassName: {class}\n  listeners:\n  - {{name: http, port: 80, protocol: HTTP, hostname: \"*.{zone}\"}}\n"
    )
}

/// What one answer showed of the dataplane's state: the backend that answered, and the
/// round header.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Seen {
    backend: String,
    round: Option<String>,
}

/// A request that was not answered 200: when (since the changes began), the round last
/// applied then, and what happened.
#[derive(Debug)]
struct Failure {
    at: Duration,
    round: usize,
    what: String,
}

/// What the client saw.
#[derive(Default)]
struct Load {
    ok: usize,
    non_200: Vec<Failure>,
    errors: Vec<Failure>,
    /// Answers in a state the route never had.
    mixed: Vec<(Duration, Seen)>,
    /// Each change of [`Seen`], when.
    changes: Vec<(Duration, Seen)>,
}

impl Load {
    fn sent(&self) -> usize {
        self.ok + self.non_200.len() + self.errors.len()
    }
}

/// One version of gatewright's copy of the route, as a watch saw it: when, its generation,
/// the port and round header it carries (or that it was deleted).
fn copy_summary(copy: &Value) -> String {
    let rule = &copy["spec"]["rules"][0];
    let header = rule["filters"][0]["responseHeaderModifier"]["set"][0]["value"]
        .as_str()
        .unwrap_or("-");
    format!(
        "generation {} port {} {ROUND_HEADER} {header} parents {} hostnames {}",
        copy["metadata"]["generation"],
        rule["backendRefs"][0]["port"],
        copy["spec"]["parentRefs"].as_array().map_or(0, Vec::len),
        copy["spec"]["hostnames"],
    )
}

#[tokio::test(flavor = "multi_thread")]
#[allow(clippy::too_many_lines, reason = "one scenario, read top to bottom")]
async fn route_changes_under_traffic() {
    let _serial = SERIAL.lock().await;
    let began = Instant::now();
    let d = downstream();
    let zone = d.zone.as_str();
    let client = admin().await;
    let namespace = common::TestNamespace::new(&client, "rc").await;
    let ns = namespace.name.as_str();
    let run = unique_name("rc");

    // One address, an echo process on each port, named after its port.
    let mut backends = Backends::create(&d.netns_dir);
    let addr = backends.address(0);
    let names = PORTS.map(|p| format!("{run}-{p}"));
    for (name, port) in names.iter().zip(PORTS) {
        backends.serve(name, addr, port);
    }
    let name_of = |round: usize| names[usize::from(round.is_multiple_of(2))].as_str();
    let svc = format!("{run}-backend");
    apply_yaml(&client, &backend_yaml(ns, &svc, addr)).await;

    // The class's config in the Gateway's namespace, targeting the class.
    let (ctl, class) =
        start_with_traefik_class(&client, &d, (&d.namespace, ns), "routechange").await;
    let gw = unique_name("gw");
    let route = "route";
    let host = format!("{run}.{zone}");
    apply_yaml(&client, &gateway_yaml(ns, &gw, &class, zone)).await;
    apply_yaml(&client, &route_yaml(ns, route, &gw, &host, &svc, 0)).await;
    let gateways = dynamic(&client, ns, "gateway.networking.k8s.io", "v1", "Gateway");
    wait_for("the Gateway Programmed", T, || async {
        let g = serde_json::to_value(gateways.get(&gw).await.unwrap()).unwrap();
        (cond(&g, "Programmed")?["status"] == "True").then_some(())
    })
    .await;
    let p = d.web_port;
    let initial = Seen {
        backend: name_of(0).to_owned(),
        round: Some("0".to_owned()),
    };
    wait_for("the route answered through Traefik", T, || async {
        let a = http(p, &host, "/", &[]).await.ok()?;
        let seen = Seen {
            backend: a.backend()?.to_owned(),
            round: a.headers.get(ROUND_HEADER).cloned(),
        };
        (seen == initial).then_some(())
    })
    .await;
    let ready_after = began.elapsed();

    // gatewright's copy on Traefik's gateway, each version a watch sees.
    let routes = dynamic(&client, ns, "gateway.networking.k8s.io", "v1", "HTTPRoute");
    let copy = format!("{route}-{gw}-traefik");
    assert!(
        routes.get_opt(&copy).await.unwrap().is_some(),
        "gatewright's copy {copy} of the route"
    );
    let t0 = Instant::now();
    let versions: Arc<Mutex<Vec<(Duration, String)>>> = Arc::default();
    let watch = {
        let versions = versions.clone();
        let cfg = watcher::Config::default().fields(&format!("metadata.name={copy}"));
        let mut events = watcher::watcher(routes.clone(), cfg).boxed();
        tokio::spawn(async move {
            while let Some(ev) = events.next().await {
                let summary = match ev {
                    Ok(watcher::Event::Apply(o) | watcher::Event::InitApply(o)) => {
                        copy_summary(&serde_json::to_value(o).unwrap())
                    }
                    Ok(watcher::Event::Delete(_)) => "deleted".to_owned(),
                    Ok(_) => continue,
                    Err(e) => format!("watch error: {e}"),
                };
                let mut v = versions.lock().unwrap();
                if v.last().is_none_or(|(_, last)| *last != summary) {
                    v.push((t0.elapsed(), summary));
                }
            }
        })
    };

    // The client: one request after the other, each on a connection of its own.
    let stop = Arc::new(AtomicBool::new(false));
    let applied = Arc::new(AtomicUsize::new(0));
    let last_seen: Arc<Mutex<Option<Seen>>> = Arc::default();
    let load = {
        let (stop, applied, last_seen, host) = (
            stop.clone(),
            applied.clone(),
            last_seen.clone(),
            host.clone(),
        );
        let names = names.clone();
        tokio::spawn(async move {
            let mut load = Load::default();
            while !stop.load(Ordering::Relaxed) {
                let round = applied.load(Ordering::Relaxed);
                let answer = http(p, &host, "/", &[]).await;
                let at = t0.elapsed();
                match answer {
                    Ok(a) if a.code == 200 => {
                        load.ok += 1;
                        let seen = Seen {
                            backend: a.backend().unwrap_or_default().to_owned(),
                            round: a.headers.get(ROUND_HEADER).cloned(),
                        };
                        // Even rounds: port 8081 and the header; odd ones: 8080, none.
                        let consistent = match &seen.round {
                            Some(r) => r
                                .parse::<usize>()
                                .is_ok_and(|r| r.is_multiple_of(2) && seen.backend == names[1]),
                            None => seen.backend == names[0],
                        };
                        if !consistent {
                            load.mixed.push((at, seen.clone()));
                        }
                        if load.changes.last().is_none_or(|(_, s)| *s != seen) {
                            load.changes.push((at, seen.clone()));
                        }
                        *last_seen.lock().unwrap() = Some(seen);
                    }
                    Ok(a) => load.non_200.push(Failure {
                        at,
                        round,
                        what: format!("status {} {:?}", a.code, a.headers),
                    }),
                    Err(e) => load.errors.push(Failure { at, round, what: e }),
                }
            }
            load
        })
    };

    // The changes: one every CADENCE, each a server-side apply of the whole route.
    let mut applied_at = vec![Duration::ZERO];
    let mut ticks = tokio::time::interval(CADENCE);
    for round in 1..=ROUNDS {
        ticks.tick().await;
        applied_at.push(t0.elapsed());
        apply_yaml(&client, &route_yaml(ns, route, &gw, &host, &svc, round)).await;
        applied.store(round, Ordering::Relaxed);
    }
    let changed_for = t0.elapsed();
    // The scenario's tail: the client keeps sending.
    tokio::time::sleep(AFTER).await;
    let last = Seen {
        backend: name_of(ROUNDS).to_owned(),
        round: ROUNDS.is_multiple_of(2).then(|| ROUNDS.to_string()),
    };
    wait_for("the last round served to the client", T, || async {
        (last_seen.lock().unwrap().as_ref() == Some(&last)).then_some(())
    })
    .await;
    stop.store(true, Ordering::Relaxed);
    let load = load.await.unwrap();
    let elapsed = t0.elapsed();
    watch.abort();
    let versions = std::mem::take(&mut *versions.lock().unwrap());

    // The copy carries the last round's rules (asserted after the teardown).
    let original = serde_json::to_value(routes.get(route).await.unwrap()).unwrap();
    let final_copy = serde_json::to_value(routes.get(&copy).await.unwrap()).unwrap();
    let copy_followed = final_copy["spec"]["rules"] == original["spec"]["rules"];

    // When the last round reached gatewright's copy, and the client.
    let copied_last = versions
        .iter()
        .find(|(_, v)| *v == copy_summary(&final_copy))
        .map(|(at, _)| at.saturating_sub(applied_at[ROUNDS]));
    let served_last = load
        .changes
        .iter()
        .find(|(_, s)| *s == last)
        .map(|(at, _)| at.saturating_sub(applied_at[ROUNDS]));
    let after = |d: Option<Duration>| d.map_or_else(|| "never".to_owned(), |d| format!("{d:.1?}"));
    // The states the client saw, in order: the round header, or `odd` (port 8080, none).
    let timeline: Vec<String> = load
        .changes
        .iter()
        .map(|(at, s)| {
            format!(
                "{}@{:.2}s",
                s.round.as_deref().unwrap_or("odd"),
                at.as_secs_f64()
            )
        })
        .collect();
    #[allow(clippy::cast_precision_loss, reason = "a few thousand requests")]
    let rate = load.sent() as f64 / elapsed.as_secs_f64();
    eprintln!(
        "routechange (i): {} requests back to back ({rate:.0}/s, {elapsed:.1?}) while the route \
         was re-applied {ROUNDS} times every {CADENCE:?} ({changed_for:.1?}) and {AFTER:?} \
         after: {} answered 200, {} non-200, {} errors, {} in a state the route never had",
        load.sent(),
        load.ok,
        load.non_200.len(),
        load.errors.len(),
        load.mixed.len(),
    );
    eprintln!(
        "routechange (i): gatewright's copy: {} versions seen by a watch, the last round's {} \
         after its apply; the dataplane: {} changes of state seen by the client for {ROUNDS} \
         rounds (odd rounds look alike; {ROUND_HEADER}@time since the changes began: {}), the \
         last round served {} after its apply; route ready {ready_after:.1?} after the start",
        versions.len(),
        after(copied_last),
        load.changes.len().saturating_sub(1),
        timeline.join(" "),
        after(served_last),
    );
    eprintln!("routechange (i): best published: {PUBLISHED}");
    let failed = !load.non_200.is_empty() || !load.errors.is_empty() || !load.mixed.is_empty();
    if failed {
        let times: Vec<String> = applied_at.iter().map(|t| format!("{t:.2?}")).collect();
        eprintln!("routechange (i): rounds applied at {times:?}");
        for (at, v) in &versions {
            eprintln!("routechange (i): copy at {at:.3?}: {v}");
        }
        for f in load.non_200.iter().chain(&load.errors).take(50) {
            eprintln!(
                "routechange (i): failed at {:.3?} (round {} applied): {}",
                f.at, f.round, f.what
            );
        }
    }

    // Teardown: the route, the Gateway (its children with it), the class, the namespace,
    // the backends.
    routes
        .delete(route, &DeleteParams::default())
        .await
        .unwrap();
    remove_gateway_and_class(&client, ns, &gw, &class).await;
    ctl.shutdown(Duration::from_secs(10)).await;
    namespace.delete().await;
    drop(backends);

    let first = |f: &[Failure]| format!("{:?}", &f[..f.len().min(20)]);
    assert!(
        load.non_200.is_empty(),
        "{} of {} requests answered other than 200 while the route changed; the first: {}",
        load.non_200.len(),
        load.sent(),
        first(&load.non_200)
    );
    assert!(
        load.errors.is_empty(),
        "{} of {} requests failed while the route changed; the first: {}",
        load.errors.len(),
        load.sent(),
        first(&load.errors)
    );
    assert!(
        load.mixed.is_empty(),
        "{} answers in a state the route never had; the first: {:?}",
        load.mixed.len(),
        &load.mixed[..load.mixed.len().min(20)]
    );
    assert!(load.ok > 0, "requests were answered");
    assert!(
        copy_followed,
        "the copy carries the last round's rules: {final_copy} for {original}"
    );
}
