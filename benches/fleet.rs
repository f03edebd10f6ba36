//! The fleet benchmark: what a member cluster costs the controller in fleet mode, printed,
//! never asserted. Run through `scripts/bench-fleet.sh`, which starts a hub and a member
//! cluster of its own, builds the release controller and saves the output under
//! `benches/results/`.
//!
//! Environment: `KUBECONFIG` (the hub), `FLEET_MEMBER_KUBECONFIG` (the member's admin
//! kubeconfig), `FLEET_CONTROLLER` (the release `gatewright` binary, run as a separate
//! process with `--fleet`), `FLEET_MEMBERS` (idle members, default 20), `FLEET_GATEWAYS`
//! (Gateways in one member, default 100).
//!
//! What it does, in order:
//! 1. starts the controller on the hub and reads its settled memory;
//! 2. enrols `FLEET_MEMBERS` ClusterProfiles (with kubeconfig Secrets), every one reaching
//!    the same member API server, which holds no Gateway of ours: each is a member of its
//!    own to the controller (its own client, caches and watches). Memory per idle member,
//!    and the watches each opens on the member's API server;
//! 3. lets them go, puts the shipped class and one Gateway with a route in the member, and
//!    enrols one profile reporting `ControlPlaneHealthy=False`, then `True`: the time
//!    from healthy to the member's first child, and to its Istio child Gateway;
//! 4. adds `FLEET_GATEWAYS` Gateways (one route each) in that member: memory per Gateway,
//!    once every one has its Istio child;
//! 5. with `FLEET_SCALE_KUBECONFIGS` (admin kubeconfigs of more members, `:`-separated):
//!    lets the others go, enrols those, and creates `FLEET_SCALE_GATEWAYS` Gateways (one
//!    route each, default 300) in each at once (`FLEET_CONCURRENCY` clients per member,
//!    default 8). Cold convergence: until every Gateway has its Istio child and every
//!    route is Accepted by us. The writes each member's API server received from the
//!    controller meanwhile (its `apiserver_request_total`, the benchmark's own creates
//!    and Leases left out) give the ceiling: as many server-side applies of ConfigMaps by
//!    a plain client at the same concurrency, every member at once; the slowest member's
//!    time is the ceiling. A second ceiling writes the same objects of the same kinds: for
//!    each Gateway, what the converged world of one holds (the Gateway and its route, a
//!    finalizer, a copy of each child, both statuses), in a namespace nothing of ours
//!    serves. Also the controller's CPU and the whole machine's while converging. Then the
//!    writes in 20 s of steady state, and in the 20 s after the controller is restarted
//!    and has engaged every member again. `FLEET_CONTROLLER_ARGS`: more flags for the
//!    controller, to compare settings.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::cast_precision_loss,
    clippy::panic,
    reason = "benchmark"
)]

use std::time::{Duration, Instant};

use base64::Engine as _;
use kube::Client;
use kube::api::{
    Api, ApiResource, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams,
};
use serde_json::{Value, json};

#[path = "scale/proc.rs"]
mod proc;
use proc::Proc;

#[path = "scale/conditions.rs"]
mod conditions;
#[path = "scale/counts.rs"]
mod counts;

const FLEET_NS: &str = "fleet";
const MEMBER_NS: &str = "apps";
const CLASS: &str = "istio-certmanager-externaldns";

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn ar(group: &str, version: &str, kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural)
}

async fn client_of(path: &str) -> Client {
    let kc = kube::config::Kubeconfig::read_from(path).unwrap();
    let config = kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .unwrap();
    Client::try_from(config).unwrap()
}

async fn apply(client: &Client, ar: &ApiResource, obj: &Value) {
    let name = obj["metadata"]["name"].as_str().unwrap();
    let api: Api<DynamicObject> = match obj["metadata"]["namespace"].as_str() {
        Some(ns) => Api::namespaced_with(client.clone(), ns, ar),
        None => Api::all_with(client.clone(), ar),
    };
    api.patch(
        name,
        &PatchParams::apply("gatewright-bench").force(),
        &Patch::Apply(obj),
    )
    .await
    .unwrap_or_else(|e| panic!("apply {name}: {e}"));
}

async fn apply_yaml(client: &Client, text: &str) {
    for doc in gatewright::render::output::parse_documents(text).expect("yaml") {
        let api_version = doc["apiVersion"].as_str().unwrap();
        let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
        let gvk = GroupVersionKind::gvk(group, version, doc["kind"].as_str().unwrap());
        let (ar, _) = kube::discovery::pinned_kind(client, &gvk)
            .await
            .expect("kind served");
        apply(client, &ar, &doc).await;
    }
}

/// The member's kubeconfig with its CA inline (a kubeconfig from a Secret names no file).
fn inline_kubeconfig(path: &str) -> String {
    let text = std::fs::read_to_string(path).unwrap();
    text.lines()
        .map(
            |line| match line.trim().strip_prefix("certificate-authority: ") {
                Some(ca) => format!(
                    "    certificate-authority-data: {}",
                    base64::engine::general_purpose::STANDARD.encode(std::fs::read(ca).unwrap())
                ),
                None => line.to_owned(),
            },
        )
        .collect::<Vec<_>>()
        .join("\n")
}

async fn enrol(hub: &Client, name: &str, kubeconfig: &str, healthy: bool) {
    let secret = json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": format!("{name}-kubeconfig"), "namespace": FLEET_NS,
            "labels": {"x-k8s.io/cluster-inventory-consumer": "gatewright", "x-k8s.io/cluster-profile": name}},
        "data": {"Config": base64::engine::general_purpose::STANDARD.encode(kubeconfig)}});
    apply(hub, &ar("", "v1", "Secret", "secrets"), &secret).await;
    let profile = json!({"apiVersion": "multicluster.x-k8s.io/v1alpha1", "kind": "ClusterProfile",
        "metadata": {"name": name, "namespace": FLEET_NS},
        "spec": {"displayName": name, "clusterManager": {"name": "bench"}}});
    apply(hub, &gatewright::fleet::profile::api_resource(), &profile).await;
    set_healthy(hub, name, healthy).await;
}

async fn set_healthy(hub: &Client, name: &str, healthy: bool) {
    let api: Api<DynamicObject> = Api::namespaced_with(
        hub.clone(),
        FLEET_NS,
        &gatewright::fleet::profile::api_resource(),
    );
    let status = if healthy { "True" } else { "False" };
    api.patch_status(
        name,
        &PatchParams::default(),
        &Patch::Merge(
            json!({"status": {"conditions": [{"type": "ControlPlaneHealthy",
            "status": status, "reason": "Bench", "message": "set by the benchmark",
            "lastTransitionTime": k8s_openapi::jiff::Timestamp::now().to_string()}]}}),
        ),
    )
    .await
    .unwrap();
}

/// Members the controller reports engaged (its /metrics).
async fn engaged(p: &Proc) -> usize {
    p.get("/metrics")
        .await
        .unwrap_or_default()
        .lines()
        .filter(|l| l.starts_with("gatewright_fleet_members{") && l.contains("state=\"engaged\""))
        .count()
}

/// The resident memory once it has not moved by more than 0.25 MiB for 3 s (at most 60 s).
async fn settled_rss(p: &Proc) -> f64 {
    let t = Instant::now();
    let mut last = p.rss().0;
    let mut still = Instant::now();
    loop {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let now = p.rss().0;
        if (now - last).abs() > 0.25 {
            still = Instant::now();
            last = now;
        }
        if still.elapsed() >= Duration::from_secs(3) || t.elapsed() > Duration::from_secs(60) {
            return now;
        }
    }
}

/// Watches open on an API server (its `apiserver_longrunning_requests` for WATCH).
async fn watches(client: &Client) -> f64 {
    let req = http::Request::get("/metrics").body(Vec::new()).unwrap();
    let text = client.request_text(req).await.unwrap_or_default();
    text.lines()
        .filter(|l| {
            l.starts_with("apiserver_longrunning_requests{") && l.contains("verb=\"WATCH\"")
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

async fn wait_until<F, Fut>(what: &str, limit: Duration, mut f: F) -> Duration
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let t = Instant::now();
    loop {
        if f().await {
            return t.elapsed();
        }
        assert!(t.elapsed() < limit, "{what}: not within {limit:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn gateway(i: usize) -> String {
    format!(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {{name: gw{i}, namespace: {MEMBER_NS}}}\nspec:\n  gatewayClassName: {CLASS}\n  listeners:\n  - {{name: http, port: 80, protocol: HTTP, hostname: \"*.example.com\"}}\n  - {{name: https, port: 443, protocol: HTTPS, hostname: \"*.example.com\", tls: {{options: {{gatewright.dev/certificate: generated}}}}}}\n---\napiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {{name: r{i}, namespace: {MEMBER_NS}}}\nspec:\n  parentRefs: [{{name: gw{i}}}]\n  hostnames: [h{i}.example.com]\n  rules: [{{backendRefs: [{{name: svc, port: 80}}]}}]\n"
    )
}

/// How many of the member's Gateways `gw<i>` have their Istio child.
async fn istio_children(member: &Client) -> usize {
    let api: Api<DynamicObject> = Api::namespaced_with(
        member.clone(),
        MEMBER_NS,
        &ar("gateway.networking.k8s.io", "v1", "Gateway", "gateways"),
    );
    api.list_metadata(&ListParams::default().labels("app.kubernetes.io/managed-by=gatewright"))
        .await
        .map(|l| l.items.len())
        .unwrap_or(0)
}

#[tokio::main]
async fn main() {
    let bin = std::env::var("FLEET_CONTROLLER").expect("FLEET_CONTROLLER (scripts/bench-fleet.sh)");
    let member_path = std::env::var("FLEET_MEMBER_KUBECONFIG")
        .expect("FLEET_MEMBER_KUBECONFIG (scripts/bench-fleet.sh)");
    let members = env_usize("FLEET_MEMBERS", 20);
    let gateways = env_usize("FLEET_GATEWAYS", 100);
    let hub = Client::try_default().await.unwrap();
    let member = client_of(&member_path).await;
    let kubeconfig = inline_kubeconfig(&member_path);
    apply_yaml(
        &hub,
        &format!("apiVersion: v1\nkind: Namespace\nmetadata: {{name: {FLEET_NS}}}\n"),
    )
    .await;
    apply_yaml(
        &hub,
        "apiVersion: v1\nkind: Namespace\nmetadata: {name: gatewright-system}\n",
    )
    .await;

    // 1. The controller alone.
    let args = controller_args();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let p = Proc::start_with(&bin, 18380, &args);
    p.wait_ready().await;
    let base = settled_rss(&p).await;
    println!("fleet benchmark: {members} idle members, then one member with {gateways} Gateways");
    println!("  controller alone on the hub: RSS {base:.1} MiB");

    // 2. Idle members.
    let watches_before = watches(&member).await;
    let t = Instant::now();
    for i in 0..members {
        enrol(&hub, &format!("idle{i}"), &kubeconfig, true).await;
    }
    let all = wait_until(
        "every idle member engaged",
        Duration::from_secs(120),
        || async { engaged(&p).await == members },
    )
    .await;
    let idle = settled_rss(&p).await;
    let watches_idle = watches(&member).await;
    println!(
        "  {members} idle members engaged in {:.2} s (from the first enrolment): RSS {idle:.1} MiB, {:.2} MiB per idle member; {:.1} watches each on the member's API server",
        all.max(t.elapsed()).as_secs_f64(),
        (idle - base) / members as f64,
        (watches_idle - watches_before) / members as f64,
    );
    let profiles: Api<DynamicObject> = Api::namespaced_with(
        hub.clone(),
        FLEET_NS,
        &gatewright::fleet::profile::api_resource(),
    );
    for i in 0..members {
        profiles
            .delete(&format!("idle{i}"), &Default::default())
            .await
            .unwrap();
    }
    wait_until(
        "the idle members let go",
        Duration::from_secs(60),
        || async { engaged(&p).await == 0 },
    )
    .await;
    let after = settled_rss(&p).await;
    println!("  once they are let go: RSS {after:.1} MiB");

    // 3. A member joining with a Gateway of ours.
    apply_yaml(
        &member,
        &format!("apiVersion: v1\nkind: Namespace\nmetadata: {{name: {MEMBER_NS}}}\n"),
    )
    .await;
    let dir: &str = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/gatewayclasses/istio-certmanager-externaldns"
    );
    for file in ["gatewayclass.yaml", "blueprint.yaml"] {
        apply_yaml(
            &member,
            &std::fs::read_to_string(format!("{dir}/{file}")).unwrap(),
        )
        .await;
    }
    apply_yaml(&member, &gateway(0)).await;
    enrol(&hub, "joiner", &kubeconfig, false).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let t = Instant::now();
    set_healthy(&hub, "joiner", true).await;
    let engaged_after = wait_until("the joiner engaged", Duration::from_secs(60), || async {
        engaged(&p).await == 1
    })
    .await;
    let first = wait_until("its first child", Duration::from_secs(120), || async {
        let certs: Api<DynamicObject> = Api::namespaced_with(
            member.clone(),
            MEMBER_NS,
            &ar("cert-manager.io", "v1", "Certificate", "certificates"),
        );
        let any_cert = certs
            .list_metadata(&ListParams::default())
            .await
            .is_ok_and(|l| !l.items.is_empty());
        any_cert || istio_children(&member).await > 0
    })
    .await;
    let istio = wait_until(
        "its Istio child Gateway",
        Duration::from_secs(120),
        || async { istio_children(&member).await > 0 },
    )
    .await;
    let (first, istio) = (engaged_after + first, engaged_after + first + istio);
    println!(
        "  a member joining (its class and Gateway there before): engaged {:.2} s after its profile turned healthy; its first child {:.2} s after, its Istio child Gateway {:.2} s after (the profile's status write included: {:.2} s)",
        engaged_after.as_secs_f64(),
        first.as_secs_f64(),
        istio.as_secs_f64(),
        t.elapsed().as_secs_f64(),
    );

    // 4. Gateways in a member.
    let before = settled_rss(&p).await;
    let t = Instant::now();
    for i in 1..=gateways {
        apply_yaml(&member, &gateway(i)).await;
    }
    wait_until(
        "every Gateway's Istio child",
        Duration::from_secs(600),
        || async { istio_children(&member).await > gateways },
    )
    .await;
    let converged = t.elapsed();
    let with = settled_rss(&p).await;
    println!(
        "  {gateways} more Gateways (one route each) in the member: every Istio child in {:.1} s; RSS {before:.1} -> {with:.1} MiB, {:.3} MiB per Gateway",
        converged.as_secs_f64(),
        (with - before) / gateways as f64
    );
    let (_, peak) = p.rss();
    println!("  peak RSS {peak:.1} MiB");

    // 5. Several members with many Gateways each.
    let paths: Vec<String> = std::env::var("FLEET_SCALE_KUBECONFIGS")
        .unwrap_or_default()
        .split(':')
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect();
    if paths.is_empty() {
        p.stop();
        return;
    }
    profiles
        .delete("joiner", &Default::default())
        .await
        .unwrap();
    wait_until("the joiner let go", Duration::from_secs(60), || async {
        engaged(&p).await == 0
    })
    .await;
    let p = scale(p, &bin, &hub, &paths, dir).await;
    p.stop();
}

/// Every route `r<i>` of the member Accepted by us.
async fn routes_accepted(member: &Client, n: usize) -> bool {
    let api: Api<DynamicObject> = Api::namespaced_with(
        member.clone(),
        MEMBER_NS,
        &ar("gateway.networking.k8s.io", "v1", "HTTPRoute", "httproutes"),
    );
    let Ok(list) = api.list(&ListParams::default()).await else {
        return false;
    };
    list.items
        .iter()
        .filter(|r| conditions::route_accepted(&r.data))
        .count()
        >= n
}

/// The writes a member's API server received between two readings (Leases left out).
fn writes(before: &counts::Counts, after: &counts::Counts) -> u64 {
    counts::writes_between(before, after).values().sum()
}

/// Step 5: `paths.len()` members with `FLEET_SCALE_GATEWAYS` Gateways each; returns the
/// controller (restarted once).
async fn scale(p: Proc, bin: &str, hub: &Client, paths: &[String], class_dir: &str) -> Proc {
    let per = env_usize("FLEET_SCALE_GATEWAYS", 300);
    let conc = env_usize("FLEET_CONCURRENCY", 8);
    let k = paths.len();
    let mut members = Vec::new();
    for (j, path) in paths.iter().enumerate() {
        let m = client_of(path).await;
        apply_yaml(
            &m,
            &format!("apiVersion: v1\nkind: Namespace\nmetadata: {{name: {MEMBER_NS}}}\n"),
        )
        .await;
        apply_yaml(
            &m,
            "apiVersion: v1\nkind: Namespace\nmetadata: {name: ceiling}\n",
        )
        .await;
        for file in ["gatewayclass.yaml", "blueprint.yaml"] {
            apply_yaml(
                &m,
                &std::fs::read_to_string(format!("{class_dir}/{file}")).unwrap(),
            )
            .await;
        }
        enrol(hub, &format!("scale{j}"), &inline_kubeconfig(path), true).await;
        members.push(m);
    }
    wait_until("the members engaged", Duration::from_secs(120), || async {
        engaged(&p).await == k
    })
    .await;
    let before = settled_rss(&p).await;
    println!(
        "  {k} members x {per} Gateways (one route each), {conc} clients per member creating them:"
    );
    let mut counts_before = Vec::new();
    for m in &members {
        counts_before.push(counts::apiserver_counts(m).await);
    }
    let (cpu_before, busy_before) = (p.cpu(), machine_busy());
    let t = Instant::now();
    futures::future::join_all(members.iter().map(|m| {
        in_parallel(per, conc, move |i| async move {
            apply_yaml(m, &gateway(1000 + i)).await;
        })
    }))
    .await;
    let created = t.elapsed();
    let mut done_at: Vec<Option<Duration>> = vec![None; k];
    while done_at.iter().any(Option::is_none) {
        assert!(
            t.elapsed() < Duration::from_secs(1200),
            "every member's Gateways converged: not within 1200 s"
        );
        for (j, m) in members.iter().enumerate() {
            if done_at[j].is_none()
                && istio_children(m).await >= per
                && routes_accepted(m, per).await
            {
                done_at[j] = Some(t.elapsed());
            }
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let converge = t.elapsed();
    let (cpu, busy) = (p.cpu() - cpu_before, machine_busy() - busy_before);
    let with = settled_rss(&p).await;
    let mut share = Vec::new();
    for (j, m) in members.iter().enumerate() {
        let after = counts::apiserver_counts(m).await;
        // The benchmark's own: a Gateway and a route per Gateway.
        let w = writes(&counts_before[j], &after).saturating_sub(2 * per as u64);
        share.push(w);
        println!(
            "    member scale{j}: converged {:.1} s after the first create; {w} writes of the controller there ({:.1} per Gateway)",
            done_at[j].unwrap_or_default().as_secs_f64(),
            w as f64 / per as f64
        );
    }
    // The ceiling: each member's share of writes from a plain client, all at once.
    let times =
        futures::future::join_all(members.iter().zip(&share).enumerate().map(|(j, (m, &w))| {
            let cm = ar("", "v1", "ConfigMap", "configmaps");
            in_parallel(usize::try_from(w).unwrap_or(usize::MAX), conc, move |i| {
                let cm = cm.clone();
                async move {
                    let obj = json!({"apiVersion": "v1", "kind": "ConfigMap",
                        "metadata": {"name": format!("c{j}-{i}"), "namespace": "ceiling",
                            "labels": {"app.kubernetes.io/managed-by": "ceiling"}},
                        "data": {"hostname": format!("h{i}.example.com"), "port": "80"}});
                    apply(m, &cm, &obj).await;
                }
            })
        }))
        .await;
    let ceiling = times.iter().max().copied().unwrap_or_default();
    println!(
        "    all created in {:.1} s; all converged in {:.1} s; ceiling (each member's share as plain applies, every member at once, slowest member): {:.1} s; ratio {:.2}",
        created.as_secs_f64(),
        converge.as_secs_f64(),
        ceiling.as_secs_f64(),
        converge.as_secs_f64() / ceiling.as_secs_f64().max(0.001)
    );
    // The same writes, of the same kinds: what the converged world of one Gateway holds,
    // written for `per` Gateways in each member by a plain client, every member at once.
    let mut world = None;
    for m in &members {
        world = Some(world_of(m, 1000).await);
    }
    let (gw_status, rt_status, children) = world.unwrap();
    let kinds: Vec<&str> = children
        .iter()
        .map(|(_, c)| c["kind"].as_str().unwrap_or_default())
        .collect();
    let times = futures::future::join_all(members.iter().map(|m| {
        let (gw_status, rt_status, children) = (&gw_status, &rt_status, &children);
        in_parallel(per, conc, move |i| {
            write_world(m, 1000 + i, gw_status, rt_status, children)
        })
    }))
    .await;
    let same = times.iter().max().copied().unwrap_or_default();
    println!(
        "    ceiling of the same writes (per Gateway: the Gateway and its route created, a finalizer, {} children copied ({}), both statuses; every member at once, slowest member): {:.1} s; ratio {:.2}",
        children.len(),
        kinds.join(", "),
        same.as_secs_f64(),
        converge.as_secs_f64() / same.as_secs_f64().max(0.001)
    );
    println!(
        "    RSS {before:.1} -> {with:.1} MiB, {:.3} MiB per Gateway",
        (with - before) / (k * per) as f64
    );
    let cores = std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get);
    println!(
        "    while converging: controller CPU {cpu:.1} s; the machine busy {busy:.1} s of {:.1} s ({cores} cores x {:.1} s: {:.0} %; API servers, etcds, the clients and the controller)",
        cores as f64 * converge.as_secs_f64(),
        converge.as_secs_f64(),
        100.0 * busy / (cores as f64 * converge.as_secs_f64()).max(0.001)
    );
    // Steady state: 20 s with nothing changing.
    let steady = |label: &'static str| {
        let members = &members;
        async move {
            let mut before = Vec::new();
            for m in members {
                before.push(counts::apiserver_counts(m).await);
            }
            let hub_before = counts::apiserver_counts(hub).await;
            tokio::time::sleep(Duration::from_secs(20)).await;
            let mut in_members = 0;
            for (j, m) in members.iter().enumerate() {
                in_members += writes(&before[j], &counts::apiserver_counts(m).await);
            }
            let in_hub = writes(&hub_before, &counts::apiserver_counts(hub).await);
            println!(
                "    {label}: {in_members} writes in the members, {in_hub} in the hub (20 s; Leases left out)"
            );
        }
    };
    // What the ceiling wrote is not the controller's: let it settle, then look.
    tokio::time::sleep(Duration::from_secs(5)).await;
    steady("steady state").await;
    p.stop();
    let args = controller_args();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let p = Proc::start_with(bin, 18380, &args);
    p.wait_ready().await;
    wait_until(
        "the members engaged again",
        Duration::from_secs(120),
        || async { engaged(&p).await == k },
    )
    .await;
    steady("after a restart (from every member engaged)").await;
    p
}

/// The controller's arguments: fleet mode on the benchmark's namespace, and
/// `FLEET_CONTROLLER_ARGS` (split on spaces) after them, to compare settings.
fn controller_args() -> Vec<String> {
    let mut args: Vec<String> = ["--fleet", "--fleet-namespace", FLEET_NS]
        .map(str::to_owned)
        .to_vec();
    if let Ok(extra) = std::env::var("FLEET_CONTROLLER_ARGS") {
        args.extend(extra.split_whitespace().map(str::to_owned));
    }
    args
}

/// CPU seconds the whole machine has spent busy (not idle, not waiting on I/O) since boot,
/// from `/proc/stat`.
fn machine_busy() -> f64 {
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let ticks: Vec<f64> = stat
        .lines()
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .skip(1)
        .filter_map(|v| v.parse().ok())
        .collect();
    // user nice system idle iowait irq softirq steal (guest time is counted in user).
    let busy: f64 = ticks
        .iter()
        .enumerate()
        .filter(|(i, _)| matches!(i, 0 | 1 | 2 | 5 | 6 | 7))
        .map(|(_, v)| v)
        .sum();
    busy / 100.0
}

/// The converged world of Gateway `gw<i>` in a member: its status, its route's, and each
/// child it has (the kinds the shipped class renders), as (resource, object).
async fn world_of(member: &Client, i: usize) -> (Value, Value, Vec<(ApiResource, Value)>) {
    let gw_ar = ar("gateway.networking.k8s.io", "v1", "Gateway", "gateways");
    let rt_ar = ar("gateway.networking.k8s.io", "v1", "HTTPRoute", "httproutes");
    let get = |r: &ApiResource, name: String| {
        let api: Api<DynamicObject> = Api::namespaced_with(member.clone(), MEMBER_NS, r);
        async move { serde_json::to_value(api.get(&name).await.unwrap()).unwrap() }
    };
    let gw = get(&gw_ar, format!("gw{i}")).await;
    let rt = get(&rt_ar, format!("r{i}")).await;
    let uid = gw["metadata"]["uid"].as_str().unwrap().to_owned();
    let mut children = Vec::new();
    for r in [
        ar("cert-manager.io", "v1", "Certificate", "certificates"),
        gw_ar.clone(),
        ar(
            "externaldns.k8s.io",
            "v1alpha1",
            "DNSEndpoint",
            "dnsendpoints",
        ),
        rt_ar.clone(),
    ] {
        let api: Api<DynamicObject> = Api::namespaced_with(member.clone(), MEMBER_NS, &r);
        let listed = api
            .list(&ListParams::default().labels(&format!("gatewright.dev/gateway-uid={uid}")))
            .await
            .unwrap();
        for o in listed.items {
            children.push((r.clone(), serde_json::to_value(o).unwrap()));
        }
    }
    (gw["status"].clone(), rt["status"].clone(), children)
}

/// Writes, with a plain client in namespace `ceiling`, what the controller wrote for
/// Gateway `gw<i>`: the Gateway and its route (of a class nobody serves), a finalizer, a
/// copy of each child (our labels and owner references dropped, so that nothing of ours
/// acts on them), and both statuses.
async fn write_world(
    m: &Client,
    i: usize,
    gw_status: &Value,
    rt_status: &Value,
    children: &[(ApiResource, Value)],
) {
    let text = gateway(i)
        .replace(MEMBER_NS, "ceiling")
        .replace(CLASS, "nobody");
    apply_yaml(m, &text).await;
    let gw_ar = ar("gateway.networking.k8s.io", "v1", "Gateway", "gateways");
    let rt_ar = ar("gateway.networking.k8s.io", "v1", "HTTPRoute", "httproutes");
    let gws: Api<DynamicObject> = Api::namespaced_with(m.clone(), "ceiling", &gw_ar);
    let name = format!("gw{i}");
    gws.patch(
        &name,
        &PatchParams::default(),
        &Patch::Merge(&json!({"metadata": {"finalizers": ["example.com/ceiling"]}})),
    )
    .await
    .unwrap();
    let rename = |s: &str| {
        s.replace("gw1000", &format!("gw{i}"))
            .replace("r1000", &format!("r{i}"))
            .replace("h1000.", &format!("h{i}."))
    };
    for (r, c) in children {
        let mut v: Value = serde_json::from_str(&rename(&c.to_string())).unwrap();
        let meta = v["metadata"].as_object_mut().unwrap();
        for f in [
            "uid",
            "resourceVersion",
            "managedFields",
            "creationTimestamp",
            "generation",
            "ownerReferences",
            "labels",
            "finalizers",
        ] {
            meta.remove(f);
        }
        meta.insert("namespace".into(), json!("ceiling"));
        v.as_object_mut().unwrap().remove("status");
        apply(m, r, &v).await;
    }
    gws.patch_status(
        &name,
        &PatchParams::default(),
        &Patch::Merge(&json!({ "status": gw_status })),
    )
    .await
    .unwrap();
    let rts: Api<DynamicObject> = Api::namespaced_with(m.clone(), "ceiling", &rt_ar);
    rts.patch_status(
        &format!("r{i}"),
        &PatchParams::default(),
        &Patch::Merge(&json!({ "status": rt_status })),
    )
    .await
    .unwrap();
}

/// Runs `f(i)` for every `i` in `0..n`, `conc` at a time; returns how long that took.
async fn in_parallel<F, Fut>(n: usize, conc: usize, f: F) -> Duration
where
    F: Fn(usize) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let t = Instant::now();
    let next = std::sync::atomic::AtomicUsize::new(0);
    futures::future::join_all((0..conc).map(|_| async {
        loop {
            let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            if i >= n {
                break;
            }
            f(i).await;
        }
    }))
    .await;
    t.elapsed()
}
