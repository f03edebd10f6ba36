//! Day-2 operations on the real cluster: make-before-break replacement (recorded by a
//! watcher and replayed), a replacement that never becomes ready, and ordered teardown
//! with a child whose deletion hangs.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use gateway_api::apis::standard::gateways::Gateway;
use kube::Client;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams};
use kube::runtime::watcher;
use serde_json::{Value, json};

use crate::common::{TestNamespace, admin, apply_yaml, controller, hold, wait_for};
use crate::controller::{dynamic, gateway_json, route_yaml, shipped};
use crate::mbb::{
    cm_blueprint, cm_gateway, delete_class, mark, our_cms, reader_points_at, wait_gateway_gone,
};

const T: Duration = Duration::from_secs(90);

fn api(client: &Client, ns: &str, group: &str, version: &str, kind: &str) -> Api<DynamicObject> {
    let plural = format!("{}s", kind.to_lowercase());
    dynamic(client, ns, group, version, kind, &plural)
}

fn certs(client: &Client, ns: &str) -> Api<DynamicObject> {
    api(client, ns, "cert-manager.io", "v1", "Certificate")
}

fn child_gateways(client: &Client, ns: &str) -> Api<DynamicObject> {
    api(client, ns, "gateway.networking.k8s.io", "v1", "Gateway")
}

/// One observed state of an object: the cluster's revision, what happened, the object.
#[derive(Clone, Debug)]
struct Seen {
    rv: u64,
    deleted: bool,
    kind: String,
    name: String,
    object: Value,
}

/// Records every state of the objects `apis` list, from now on, until dropped.
struct Recorder {
    seen: Arc<Mutex<Vec<Seen>>>,
    /// How many of the watches have listed (their events from then on are transitions).
    listed: Arc<std::sync::atomic::AtomicUsize>,
    watches: usize,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Recorder {
    /// Starts the watches and waits until every one has listed, so that no transition
    /// after this returns is missed, however loaded the machine.
    async fn start(apis: Vec<(String, Api<DynamicObject>)>) -> Self {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let listed = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let watches = apis.len();
        let tasks = apis
            .into_iter()
            .map(|(kind, api)| {
                let seen = seen.clone();
                let listed = listed.clone();
                tokio::spawn(async move {
                    let mut stream = watcher(api, watcher::Config::default()).boxed();
                    let mut first = true;
                    while let Some(ev) = stream.next().await {
                        if matches!(ev, Ok(watcher::Event::InitDone)) && first {
                            first = false;
                            listed.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                            continue;
                        }
                        let (obj, deleted) = match ev {
                            Ok(watcher::Event::Apply(o) | watcher::Event::InitApply(o)) => {
                                (o, false)
                            }
                            Ok(watcher::Event::Delete(o)) => (o, true),
                            _ => continue,
                        };
                        let object = serde_json::to_value(&obj).unwrap();
                        let rv = obj
                            .metadata
                            .resource_version
                            .as_deref()
                            .and_then(|r| r.parse().ok())
                            .unwrap_or(0);
                        seen.lock().unwrap().push(Seen {
                            rv,
                            deleted,
                            kind: kind.clone(),
                            name: obj.metadata.name.clone().unwrap_or_default(),
                            object,
                        });
                    }
                })
            })
            .collect();
        let rec = Self {
            seen,
            listed,
            watches,
            tasks,
        };
        wait_for("the recorder's watches to list", T, || async {
            (rec.listed.load(std::sync::atomic::Ordering::SeqCst) == rec.watches).then_some(())
        })
        .await;
        rec
    }

    /// Waits until what was seen satisfies `done` (the watch events of the writes a test
    /// has already observed by reading may still be on their way).
    async fn wait_seen(&self, what: &str, done: impl Fn(&[Seen]) -> bool) {
        wait_for(what, T, || async { done(&self.sequence()).then_some(()) }).await;
    }

    /// Everything seen, in the cluster's order (one etcd: revisions are totally ordered).
    fn sequence(&self) -> Vec<Seen> {
        let mut all = self.seen.lock().unwrap().clone();
        all.sort_by_key(|s| (s.rv, s.deleted));
        all.dedup_by_key(|s| (s.rv, s.deleted, s.name.clone()));
        all
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

/// A condition of `obj`'s status by type.
fn cond<'a>(obj: &'a Value, type_: &str) -> Option<&'a Value> {
    crate::controller::cond(&obj["status"]["conditions"], type_)
}

fn ready_condition(obj: &Value, type_: &str) -> bool {
    cond(obj, type_).is_some_and(|c| c["status"] == "True")
}

/// What cert-manager would do: a Certificate is issued `delay` after it is first seen.
/// What Istio would do: the child Gateway is programmed for its current generation.
type FirstSeen = Arc<Mutex<Vec<(String, tokio::time::Instant)>>>;

async fn play_downstream(client: &Client, ns: &str, first_seen: &FirstSeen, delay: Duration) {
    let now = tokio::time::Instant::now();
    for c in certs(client, ns)
        .list(&ListParams::default())
        .await
        .unwrap()
    {
        let name = c.metadata.name.clone().unwrap();
        let v = serde_json::to_value(&c).unwrap();
        if ready_condition(&v, "Ready") || c.metadata.deletion_timestamp.is_some() {
            continue;
        }
        let since = {
            let mut fs = first_seen.lock().unwrap();
            match fs.iter().find(|(n, _)| *n == name) {
                Some((_, t)) => *t,
                None => {
                    fs.push((name.clone(), now));
                    now
                }
            }
        };
        let status = if now - since >= delay {
            json!({"conditions": [{"type": "Ready", "status": "True", "reason": "Ready", "message": "issued", "lastTransitionTime": "2026-01-01T00:00:00Z"}]})
        } else {
            json!({"conditions": [{"type": "Ready", "status": "False", "reason": "Issuing", "message": "issuing", "lastTransitionTime": "2026-01-01T00:00:00Z"}]})
        };
        let _ = certs(client, ns)
            .patch_status(
                &name,
                &PatchParams::default(),
                &Patch::Merge(&json!({"status": status})),
            )
            .await;
    }
    // What external-dns would do: take every generation of the DNS records.
    let dns = api(client, ns, "externaldns.k8s.io", "v1alpha1", "DNSEndpoint");
    for d in dns.list(&ListParams::default()).await.unwrap() {
        let generation = d.metadata.generation.unwrap_or(1);
        if d.data["status"]["observedGeneration"] != generation {
            let _ = dns
                .patch_status(
                    d.metadata.name.as_deref().unwrap(),
                    &PatchParams::default(),
                    &Patch::Merge(&json!({"status": {"observedGeneration": generation}})),
                )
                .await;
        }
    }
    for g in child_gateways(client, ns)
        .list(&ListParams::default())
        .await
        .unwrap()
    {
        let v = serde_json::to_value(&g).unwrap();
        if v["metadata"]["labels"]["app.kubernetes.io/managed-by"] != "gatewright" {
            continue;
        }
        let generation = v["metadata"]["generation"].as_i64().unwrap_or(1);
        let current = cond(&v, "Programmed")
            .is_some_and(|c| c["observedGeneration"] == generation && c["status"] == "True");
        if !current {
            let mut status = gatewright::simulate::ready_status(&v).unwrap();
            for c in status["conditions"].as_array_mut().unwrap() {
                c["observedGeneration"] = generation.into();
            }
            let _ = child_gateways(client, ns)
                .patch_status(
                    g.metadata.name.as_deref().unwrap(),
                    &PatchParams::default(),
                    &Patch::Merge(&json!({"status": status})),
                )
                .await;
        }
    }
}

fn https_gateway(ns: &str, class: &str) -> String {
    format!(
        r#"apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {{name: gw, namespace: {ns}}}
spec:
  gatewayClassName: {class}
  listeners:
  - name: https
    port: 443
    protocol: HTTPS
    hostname: "*.example.com"
    tls:
      mode: Terminate
      options: {{gatewright.dev/certificate: generated}}
"#
    )
}

async fn event_reasons(client: &Client, ns: &str) -> Vec<String> {
    let events: Api<k8s_openapi::api::events::v1::Event> = Api::namespaced(client.clone(), ns);
    let mut list = events.list(&Default::default()).await.unwrap().items;
    list.sort_by_key(|e| e.metadata.creation_timestamp.clone().map(|t| t.0));
    list.into_iter().filter_map(|e| e.reason).collect()
}

/// The shipped istio-certmanager-externaldns class as `class`, an HTTPS Gateway of it in
/// `ns` and a route for `shop.example.com`, the downstream played until the Gateway is
/// Programmed; what the downstream player has seen.
async fn shop_gateway_programmed(client: &Client, ns: &str, class: &str) -> FirstSeen {
    apply_yaml(client, &shipped("istio-certmanager-externaldns", class)).await;
    apply_yaml(client, &https_gateway(ns, class)).await;
    apply_yaml(client, &route_yaml(ns, "shop", "shop.example.com")).await;
    let first_seen: FirstSeen = Arc::default();
    wait_for("the Gateway to be Programmed", T, || {
        let (client, ns) = (client.clone(), ns.to_owned());
        let fs = first_seen.clone();
        async move {
            play_downstream(&client, &ns, &fs, Duration::ZERO).await;
            let g = gateway_json(&client, &ns).await;
            (cond(&g, "Programmed")?["status"] == "True").then_some(())
        }
    })
    .await;
    first_seen
}

/// Adding an HTTPRoute with a new hostname rotates the certificate make-before-break: at
/// no observed moment does the listener point at a Certificate that is missing or not
/// ready, and the old Certificate is deleted only after the switch.
#[tokio::test]
async fn a_new_hostname_rotates_the_certificate_without_a_gap() {
    let client = admin().await;
    let _ctl = controller();
    let ns = TestNamespace::new(&client, "rotate").await;
    let class = format!("rot-{}", ns.name);
    let first_seen = shop_gateway_programmed(&client, &ns.name, &class).await;
    let before: Vec<String> = certs(&client, &ns.name)
        .list(&ListParams::default())
        .await
        .unwrap()
        .iter()
        .map(|c| c.metadata.name.clone().unwrap())
        .collect();
    assert_eq!(before.len(), 1, "{before:?}");

    let rec = Recorder::start(vec![
        ("Certificate".into(), certs(&client, &ns.name)),
        ("Gateway".into(), child_gateways(&client, &ns.name)),
    ])
    .await;
    apply_yaml(&client, &route_yaml(&ns.name, "blog", "blog.example.com")).await;
    // cert-manager takes 3 s to issue the new Certificate.
    wait_for("the rotation to complete", T, || {
        let (client, ns) = (client.clone(), ns.name.clone());
        let fs = first_seen.clone();
        async move {
            play_downstream(&client, &ns, &fs, Duration::from_secs(3)).await;
            let list = certs(&client, &ns)
                .list(&ListParams::default())
                .await
                .unwrap();
            let g = gateway_json(&client, &ns).await;
            (list.items.len() == 1
                && list.items[0].data["spec"]["dnsNames"]
                    == json!(["blog.example.com", "shop.example.com"])
                && cond(&g, "gatewright.dev/Rollout")?["reason"] == "Complete"
                && cond(&g, "Programmed")?["status"] == "True")
                .then_some(())
        }
    })
    .await;
    rec.wait_seen("the old Certificate's deletion", |seq| {
        seq.iter()
            .any(|s| s.kind == "Certificate" && s.deleted && s.name == before[0])
    })
    .await;
    let seq = rec.sequence();
    drop(rec);

    // Replay: the certificates' states and the listener's Secret, in the cluster's order.
    let mut certs_now: std::collections::BTreeMap<String, bool> = Default::default();
    let mut listener: Option<String> = None;
    let mut switched_at: Option<u64> = None;
    let mut old_deleted_at: Option<u64> = None;
    let mut lines = Vec::new();
    for s in &seq {
        match (s.kind.as_str(), s.deleted) {
            ("Certificate", false) => {
                certs_now.insert(s.name.clone(), ready_condition(&s.object, "Ready"));
            }
            ("Certificate", true) => {
                certs_now.remove(&s.name);
                if s.name == before[0] {
                    old_deleted_at = Some(s.rv);
                }
            }
            ("Gateway", false) if s.name == "gw-istio" => {
                let secret = s.object["spec"]["listeners"][0]["tls"]["certificateRefs"][0]["name"]
                    .as_str()
                    .map(str::to_owned);
                if secret.as_deref() != Some(before[0].as_str()) && switched_at.is_none() {
                    switched_at = Some(s.rv);
                }
                listener = secret;
            }
            _ => continue,
        }
        let line = format!(
            "rv {:>6} {:<7} {:<11} {:<24} | listener -> {} | certificates {:?}",
            s.rv,
            if s.deleted { "DELETED" } else { "seen" },
            s.kind,
            s.name,
            listener.as_deref().unwrap_or("-"),
            certs_now
        );
        lines.push(line);
        if let Some(l) = &listener {
            // The Secret is named like its Certificate.
            assert_eq!(
                certs_now.get(l),
                Some(&true),
                "the listener points at {l}, which is missing or not ready:\n{}",
                lines.join("\n")
            );
        }
    }
    println!("recorded rotation:\n{}", lines.join("\n"));
    let (switched, deleted) = (switched_at.unwrap(), old_deleted_at.unwrap());
    assert!(
        switched < deleted,
        "the old Certificate went before the switch:\n{}",
        lines.join("\n")
    );
    // Both existed at once during the switch.
    assert!(
        lines
            .iter()
            .any(|l| l.contains(&before[0]) && l.matches("true").count() >= 2),
        "{}",
        lines.join("\n")
    );
    let reasons = event_reasons(&client, &ns.name).await;
    for r in ["RolloutStarted", "RolloutSwitched", "RolloutFinished"] {
        assert!(reasons.iter().any(|x| x == r), "no {r} Event: {reasons:?}");
    }
    delete_class(&client, &class).await;
    ns.delete().await;
}

/// Routes created together (a GitOps sync, a team's batch) change the certificate's
/// hostnames once per route; the replacement starts only once they have settled
/// (`controller::settle`), so the issuer sees one new order, not one per route.
#[tokio::test]
async fn hostnames_added_together_order_one_new_certificate() {
    let client = admin().await;
    let _ctl = controller();
    let ns = TestNamespace::new(&client, "batch").await;
    let class = format!("batch-{}", ns.name);
    let first_seen = shop_gateway_programmed(&client, &ns.name, &class).await;
    let rec = Recorder::start(vec![("Certificate".into(), certs(&client, &ns.name))]).await;
    // Eight routes, one after the other as a sync applies them.
    let mut want = vec!["shop.example.com".to_owned()];
    for i in 0..8 {
        let host = format!("team{i}.example.com");
        apply_yaml(&client, &route_yaml(&ns.name, &format!("team{i}"), &host)).await;
        want.push(host);
    }
    want.sort();
    let last: String = wait_for("the rotation to every hostname to complete", T, || {
        let (client, ns) = (client.clone(), ns.name.clone());
        let fs = first_seen.clone();
        let want = json!(want);
        async move {
            play_downstream(&client, &ns, &fs, Duration::ZERO).await;
            let list = certs(&client, &ns)
                .list(&ListParams::default())
                .await
                .unwrap();
            let g = gateway_json(&client, &ns).await;
            (list.items.len() == 1
                && list.items[0].data["spec"]["dnsNames"] == want
                && cond(&g, "gatewright.dev/Rollout")?["reason"] == "Complete"
                && cond(&g, "Programmed")?["status"] == "True")
                .then(|| list.items[0].metadata.name.clone().unwrap_or_default())
        }
    })
    .await;
    // The watch delivers in the cluster's order: once it showed the last Certificate, it
    // showed every one created before it.
    rec.wait_seen("the last Certificate", |seq| {
        seq.iter()
            .any(|s| s.kind == "Certificate" && s.name == last)
    })
    .await;
    let created: std::collections::BTreeSet<String> = rec
        .sequence()
        .iter()
        .filter(|s| s.kind == "Certificate" && !s.deleted)
        .map(|s| s.name.clone())
        .collect();
    drop(rec);
    // The first Certificate, and one new one for all eight routes.
    assert_eq!(
        created.len(),
        2,
        "Certificates seen while eight routes arrived: {created:?}"
    );
    delete_class(&client, &class).await;
    ns.delete().await;
}

/// A replacement that never becomes ready keeps the old version serving and, past the
/// blueprint's timeout, is reported stuck; a further change supersedes it cleanly.
#[tokio::test]
async fn a_replacement_that_never_becomes_ready_is_reported_and_superseded() {
    let client = admin().await;
    let ctl = controller();
    let ns = TestNamespace::new(&client, "stuck").await;
    let class = format!("stuck-{}", ns.name);
    apply_yaml(&client, &cm_blueprint(&class, 3)).await;
    apply_yaml(&client, &cm_gateway(&ns.name, &class, 1)).await;
    // Version 1 comes up.
    let v1 = wait_for("the first version", T, || async {
        our_cms(&client, &ns.name)
            .await
            .into_iter()
            .find(|n| n.starts_with("gw-cert-"))
    })
    .await;
    mark(&client, &ns.name, &v1, "ready", "yes").await;
    wait_for("the reader to name version 1", T, || async {
        (reader_points_at(&client, &ns.name).await? == v1).then_some(())
    })
    .await;
    mark(&client, &ns.name, "gw-reader", "ack", &v1).await;
    wait_for("Programmed", T, || async {
        let g = gateway_json(&client, &ns.name).await;
        (cond(&g, "Programmed")?["status"] == "True"
            && cond(&g, "gatewright.dev/Rollout")?["reason"] == "Complete")
            .then_some(())
    })
    .await;

    // Version 2 never becomes ready: stuck after 3 s, version 1 still serving.
    apply_yaml(&client, &cm_gateway(&ns.name, &class, 2)).await;
    let v2 = wait_for("the second version", T, || async {
        our_cms(&client, &ns.name)
            .await
            .into_iter()
            .find(|n| n.starts_with("gw-cert-") && *n != v1)
    })
    .await;
    let g = wait_for("the rollout to be reported stuck", T, || async {
        let g = gateway_json(&client, &ns.name).await;
        (cond(&g, "gatewright.dev/Rollout")?["reason"] == "Stuck").then_some(g)
    })
    .await;
    let msg = cond(&g, "gatewright.dev/Rollout").unwrap()["message"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(msg.contains(&v2) && msg.contains("timeout 3s"), "{msg}");
    assert_eq!(cond(&g, "Programmed").unwrap()["status"], "True", "{g}");
    assert_eq!(reader_points_at(&client, &ns.name).await.unwrap(), v1);
    let mut want = vec!["gw-reader".to_owned(), v1.clone(), v2.clone()];
    want.sort();
    assert_eq!(our_cms(&client, &ns.name).await, want);
    wait_for("a RolloutStuck Event", T, || async {
        event_reasons(&client, &ns.name)
            .await
            .iter()
            .any(|r| r == "RolloutStuck")
            .then_some(())
    })
    .await;
    // The metrics count it (tests running alongside may add theirs).
    wait_for("gatewright_rollouts_stuck to count it", T, || async {
        let gauge = |name| crate::monitoring::gauge(&ctl, name);
        (gauge("gatewright_rollouts_stuck") >= 1.0
            && gauge("gatewright_rollouts_in_progress") >= 1.0)
            .then_some(())
    })
    .await;

    // Version 3 supersedes version 2 (deleted: nothing ever read it); once ready, the
    // reader switches, acknowledges, and version 1 goes.
    apply_yaml(&client, &cm_gateway(&ns.name, &class, 3)).await;
    let v3 = wait_for("the third version, the second gone", T, || async {
        let now = our_cms(&client, &ns.name).await;
        let v3 = now
            .iter()
            .find(|n| n.starts_with("gw-cert-") && **n != v1 && **n != v2)?
            .clone();
        (!now.contains(&v2)).then_some(v3)
    })
    .await;
    assert_eq!(reader_points_at(&client, &ns.name).await.unwrap(), v1);
    assert!(our_cms(&client, &ns.name).await.contains(&v1));
    mark(&client, &ns.name, &v3, "ready", "yes").await;
    wait_for("the reader to switch to version 3", T, || async {
        (reader_points_at(&client, &ns.name).await? == v3).then_some(())
    })
    .await;
    // Not acknowledged: version 1 stays, and past the timeout the rollout is stuck on
    // the reader, though version 3 is ready.
    let g = wait_for(
        "the switch to be reported stuck on the reader",
        T,
        || async {
            let g = gateway_json(&client, &ns.name).await;
            let c = cond(&g, "gatewright.dev/Rollout")?;
            (c["reason"] == "Stuck" && c["message"].as_str()?.contains("not done after"))
                .then_some(g)
        },
    )
    .await;
    let msg = cond(&g, "gatewright.dev/Rollout").unwrap()["message"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        msg.contains("gw-reader")
            && msg.contains(&format!(
                "version {} is kept",
                v1.trim_start_matches("gw-cert-")
            )),
        "{msg}"
    );
    assert!(our_cms(&client, &ns.name).await.contains(&v1));
    mark(&client, &ns.name, "gw-reader", "ack", &v3).await;
    wait_for("version 1 to go and the rollout to complete", T, || async {
        let g = gateway_json(&client, &ns.name).await;
        let mut want = vec!["gw-reader".to_owned(), v3.clone()];
        want.sort();
        (our_cms(&client, &ns.name).await == want
            && cond(&g, "gatewright.dev/Rollout")?["reason"] == "Complete")
            .then_some(())
    })
    .await;
    let reasons = event_reasons(&client, &ns.name).await;
    for r in [
        "RolloutStarted",
        "RolloutStuck",
        "RolloutSuperseded",
        "RolloutSwitched",
        "RolloutFinished",
    ] {
        assert!(reasons.iter().any(|x| x == r), "no {r} Event: {reasons:?}");
    }
    let _ = Api::<Gateway>::namespaced(client.clone(), &ns.name)
        .delete("gw", &DeleteParams::default())
        .await;
    delete_class(&client, &class).await;
    ns.delete().await;
}

/// Deleting a Gateway deletes its children in reverse dependency order (route copies,
/// DNS records, the in-cluster gateway, then the certificate), each once the ones that
/// read it are gone; a child whose deletion hangs is reported, and the teardown goes on
/// once it is released.
#[tokio::test]
async fn teardown_follows_reverse_dependency_order_and_reports_a_hung_child() {
    let client = admin().await;
    let ctl = controller();
    let ns = TestNamespace::new(&client, "teardown").await;
    let class = format!("td-{}", ns.name);
    apply_yaml(&client, &shipped("istio-certmanager-externaldns", &class)).await;
    apply_yaml(&client, &https_gateway(&ns.name, &class)).await;
    apply_yaml(&client, &route_yaml(&ns.name, "shop", "shop.example.com")).await;
    let dns = api(
        &client,
        &ns.name,
        "externaldns.k8s.io",
        "v1alpha1",
        "DNSEndpoint",
    );
    let routes = api(
        &client,
        &ns.name,
        "gateway.networking.k8s.io",
        "v1",
        "HTTPRoute",
    );
    wait_for("every child, Programmed", T, || {
        let (client, ns) = (client.clone(), ns.name.clone());
        let dns = dns.clone();
        async move {
            let _ = gatewright::simulate::simulate_ready_where(
                &client,
                Some(&ns),
                gatewright::simulate::Play::All,
            )
            .await;
            let g = gateway_json(&client, &ns).await;
            let has_dns = !dns
                .list(&ListParams::default())
                .await
                .unwrap()
                .items
                .is_empty();
            (has_dns && cond(&g, "Programmed")?["status"] == "True").then_some(())
        }
    })
    .await;
    // Someone else's finalizer holds the DNS record.
    hold(&dns, "gw-dns", true).await;

    let rec = Recorder::start(vec![
        ("Certificate".into(), certs(&client, &ns.name)),
        ("Gateway".into(), child_gateways(&client, &ns.name)),
        ("DNSEndpoint".into(), dns.clone()),
        ("HTTPRoute".into(), routes.clone()),
    ])
    .await;
    Api::<Gateway>::namespaced(client.clone(), &ns.name)
        .delete("gw", &DeleteParams::default())
        .await
        .unwrap();
    // The hang is reported (after the controller's 5 s), and nothing behind it is deleted.
    let g = wait_for("the hung deletion to be reported", T, || async {
        let Some(g) = Api::<Gateway>::namespaced(client.clone(), &ns.name)
            .get_opt("gw")
            .await
            .unwrap()
        else {
            let seen: Vec<String> = rec
                .sequence()
                .iter()
                .map(|s| {
                    format!(
                        "{} {}/{} deleted={} {}",
                        s.rv, s.kind, s.name, s.deleted, s.object["metadata"]["finalizers"]
                    )
                })
                .collect();
            panic!(
                "the Gateway went although a child is held:\n{}",
                seen.join("\n")
            );
        };
        let g = serde_json::to_value(g).unwrap();
        (cond(&g, "gatewright.dev/Teardown")?["reason"] == "DeletionStuck").then_some(g)
    })
    .await;
    let msg = cond(&g, "gatewright.dev/Teardown").unwrap()["message"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        msg.contains("gw-dns") && msg.contains(crate::common::HOLD),
        "{msg}"
    );
    assert!(
        child_gateways(&client, &ns.name)
            .get_opt("gw-istio")
            .await
            .unwrap()
            .is_some()
    );
    assert_eq!(
        certs(&client, &ns.name)
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .len(),
        1
    );
    wait_for("a DeletionStuck Event", T, || async {
        event_reasons(&client, &ns.name)
            .await
            .iter()
            .any(|r| r == "DeletionStuck")
            .then_some(())
    })
    .await;
    wait_for("gatewright_deletions_stuck to count it", T, || async {
        (crate::monitoring::gauge(&ctl, "gatewright_deletions_stuck") >= 1.0).then_some(())
    })
    .await;

    // Released: the teardown goes on and the Gateway goes.
    hold(&dns, "gw-dns", false).await;
    wait_gateway_gone(&client, &ns.name, T).await;
    rec.wait_seen("the deletions of every child", |seq| {
        [
            "HTTPRoute/shop-gw-istio",
            "DNSEndpoint/gw-dns",
            "Gateway/gw-istio",
            "Certificate/gw-tls-",
        ]
        .iter()
        .all(|p| {
            seq.iter()
                .any(|s| s.deleted && format!("{}/{}", s.kind, s.name).starts_with(p))
        })
    })
    .await;
    let deletions: Vec<String> = rec
        .sequence()
        .into_iter()
        .filter(|s| s.deleted)
        .map(|s| format!("{}/{}", s.kind, s.name))
        .collect();
    drop(rec);
    println!("recorded deletions: {deletions:?}");
    let at = |prefix: &str| {
        deletions
            .iter()
            .position(|d| d.starts_with(prefix))
            .unwrap_or_else(|| panic!("{prefix} never deleted: {deletions:?}"))
    };
    let (route_copy, record, istio, cert) = (
        at("HTTPRoute/shop-gw-istio"),
        at("DNSEndpoint/gw-dns"),
        at("Gateway/gw-istio"),
        at("Certificate/gw-tls-"),
    );
    assert!(
        route_copy < record && record < istio && istio < cert,
        "{deletions:?}"
    );
    delete_class(&client, &class).await;
    ns.delete().await;
}
