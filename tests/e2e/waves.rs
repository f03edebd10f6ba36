//! A blueprint change reaching its Gateways in waves gated on health, on the real cluster:
//! revisions made and named on each Gateway, a good revision rolled out wave by wave (no
//! Gateway changed before its wave was released), a revision that does not render stopped
//! in the first wave and rolled back while the rest of the class stayed `Programmed`
//! throughout, and a Gateway pinned to a revision.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use gateway_api::apis::standard::gateways::Gateway;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ListParams, Patch, PatchParams};
use kube::runtime::watcher;
use kube::{Client, ResourceExt};
use serde_json::json;

use crate::common::{TestNamespace, admin, apply_yaml, controller, unique_name, wait_for};
use crate::live::gatewright;
use crate::mbb::delete_class;

const T: Duration = Duration::from_secs(90);

/// A class whose blueprint renders one ConfigMap per Gateway holding `value`, moved in
/// waves by `policy` (YAML flow map).
fn class_yaml(name: &str, template: &str, policy: &str) -> String {
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
  rolloutPolicy: {policy}
  gatewayTemplates:
  - name: cm
    template: |
{template}
  status:
    template: |
      addresses: [{{type: IPAddress, value: 192.0.2.10}}]
"#
    )
}

fn good(value: &str) -> String {
    format!(
        "      apiVersion: v1\n      kind: ConfigMap\n      metadata:\n        name: {{{{ gateway.metadata.name ~ \"-cm\" }}}}\n      data:\n        value: \"{value}\"\n"
    )
}

/// Renders YAML that does not parse: a template error only a render finds.
fn broken() -> String {
    "      apiVersion: v1\n      kind: ConfigMap\n      metadata: {name: {{ gateway.metadata.name ~ \"-cm\" }}\n      data: [\n".to_owned()
}

fn gateway_yaml(ns: &str, name: &str, class: &str) -> String {
    format!(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {{name: {name}, namespace: {ns}}}\nspec:\n  gatewayClassName: {class}\n  listeners: [{{name: http, port: 80, protocol: HTTP}}]\n"
    )
}

fn blueprints(client: &Client) -> Api<gatewright::api::GatewayClassBlueprint> {
    Api::all(client.clone())
}

fn cond<'a>(
    gw: &'a Gateway,
    t: &str,
) -> Option<&'a k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition> {
    gw.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == t && c.observed_generation == gw.metadata.generation)
}

/// The revision a Gateway's status names, when it is `Programmed` on it.
fn programmed_on(gw: &Gateway) -> Option<String> {
    let p = cond(gw, "Programmed")?;
    let r = cond(gw, "gatewright.dev/Revision")?;
    (p.status == "True").then(|| r.message.split(':').next().unwrap_or_default().to_owned())
}

/// Waits until every Gateway of `ns` named in `names` is `Programmed` on `revision`.
async fn all_programmed_on(client: &Client, ns: &str, names: &[&str], revision: &str) {
    let gws: Api<Gateway> = Api::namespaced(client.clone(), ns);
    wait_for(
        &format!("{names:?} Programmed on {revision}"),
        T,
        || async {
            let list = gws.list(&ListParams::default()).await.ok()?;
            let on: Vec<String> = list
                .items
                .iter()
                .filter(|g| names.contains(&g.name_any().as_str()))
                .filter(|g| programmed_on(g).as_deref() == Some(revision))
                .map(ResourceExt::name_any)
                .collect();
            (on.len() == names.len()).then_some(())
        },
    )
    .await;
}

async fn values(client: &Client, ns: &str) -> BTreeMap<String, String> {
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
    cms.list(&ListParams::default().labels("app.kubernetes.io/managed-by=gatewright"))
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

/// Waits until blueprint `class` counts `n` Gateways, all ready, on `revision` alone.
async fn counted(
    client: &Client,
    class: &str,
    revision: &str,
    n: u32,
    what: &str,
) -> gatewright::api::BlueprintStatus {
    let want = vec![gatewright::api::RevisionCount {
        name: revision.to_owned(),
        gateways: n,
        ready: n,
    }];
    wait_for(&format!("{what} counted"), T, || async {
        blueprints(client)
            .get(class)
            .await
            .ok()?
            .status
            .filter(|s| s.revisions == want)
    })
    .await
}

async fn rollout(client: &Client, name: &str) -> Option<gatewright::api::RolloutStatus> {
    blueprints(client).get(name).await.ok()?.status?.rollout
}

async fn set_template(client: &Client, name: &str, template: &str) {
    let patch = json!({"spec": {"gatewayTemplates": [{"name": "cm", "template": template.lines().map(|l| l.strip_prefix("      ").unwrap_or(l)).collect::<Vec<_>>().join("\n") + "\n"}]}});
    blueprints(client)
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
}

/// Every event of the Gateways of `ns`, from now on (listed first).
struct Watch {
    seen: Arc<Mutex<Vec<Gateway>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Watch {
    async fn start(client: &Client, ns: &str) -> Self {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let (tx, rx) = tokio::sync::oneshot::channel();
        let api: Api<Gateway> = Api::namespaced(client.clone(), ns);
        let task = {
            let seen = seen.clone();
            tokio::spawn(async move {
                let mut tx = Some(tx);
                let mut stream = watcher(api, watcher::Config::default()).boxed();
                while let Some(ev) = stream.next().await {
                    match ev {
                        Ok(watcher::Event::InitDone) => {
                            if let Some(tx) = tx.take() {
                                let _ = tx.send(());
                            }
                        }
                        Ok(watcher::Event::Apply(g) | watcher::Event::InitApply(g)) => {
                            seen.lock().unwrap().push(g);
                        }
                        _ => {}
                    }
                }
            })
        };
        let _ = rx.await;
        Self { seen, task }
    }

    fn events(&self) -> Vec<Gateway> {
        self.seen.lock().unwrap().clone()
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        self.task.abort();
    }
}

#[tokio::test]
async fn a_good_revision_rolls_out_wave_by_wave_and_no_gateway_moves_before_its_wave() {
    let _ = controller();
    let client = admin().await;
    let ns = TestNamespace::new(&client, "waves").await;
    let class = unique_name("waves");
    let policy = "{waves: [{count: 1, bakeSeconds: 2}, {count: 2}]}";
    apply_yaml(&client, &class_yaml(&class, &good("1"), policy)).await;
    let names = ["g0", "g1", "g2", "g3"];
    for n in names {
        apply_yaml(&client, &gateway_yaml(&ns.name, n, &class)).await;
    }
    let first = format!("{class}-1");
    let second = format!("{class}-2");
    all_programmed_on(&client, &ns.name, &names, &first).await;
    // The revision object was made, and names the blueprint.
    let revs: Api<gatewright::api::GatewayClassBlueprintRevision> = Api::all(client.clone());
    let r1 = revs.get(&first).await.unwrap();
    assert_eq!(r1.spec.blueprint, class);
    assert_eq!(r1.spec.revision, 1);

    set_template(&client, &class, &good("2")).await;
    // A Gateway created once the first wave is out takes the newest revision at once.
    wait_for("the first wave released", T, || async {
        rollout(&client, &class)
            .await
            .filter(|r| r.revision == second && r.waves.first().is_some_and(|w| w.released == 1))
    })
    .await;
    apply_yaml(&client, &gateway_yaml(&ns.name, "g9", &class)).await;
    // Until the rollout is complete: a ConfigMap holds "2" only for a Gateway its wave
    // released (read the ConfigMaps first: a release is written before the change).
    let started = std::time::Instant::now();
    let mut order: Vec<String> = Vec::new();
    loop {
        let vals = values(&client, &ns.name).await;
        let r = rollout(&client, &class).await;
        let done = r.as_ref().is_some_and(|r| {
            r.revision == second && r.phase == gatewright::api::RolloutPhase::Complete
        });
        for (gw, v) in &vals {
            if v == "2" && gw != "g9" {
                let released = r.as_ref().is_some_and(|r| {
                    r.revision == second
                        && gatewright::plan::revisions::released(r, &format!("{}/{gw}", ns.name))
                });
                assert!(
                    released || done,
                    "{gw} changed before its wave was released: {r:?}"
                );
                if !order.contains(gw) {
                    order.push(gw.clone());
                }
            }
        }
        if done && vals.values().all(|v| v == "2") {
            break;
        }
        assert!(
            started.elapsed() < T,
            "rollout not complete: {r:?} {vals:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // g0 alone first (it baked 2 s before the others moved).
    assert_eq!(order.first().map(String::as_str), Some("g0"), "{order:?}");
    let r = rollout(&client, &class).await.unwrap();
    let waves: Vec<(String, Vec<String>)> = r
        .waves
        .iter()
        .map(|w| (w.name.clone(), w.gateways.clone()))
        .collect();
    let k = |g: &str| format!("{}/{g}", ns.name);
    assert_eq!(
        waves,
        vec![
            ("wave-1".to_owned(), vec![k("g0")]),
            ("wave-2".to_owned(), vec![k("g1"), k("g2")]),
            ("rest".to_owned(), vec![k("g3")]),
        ]
    );
    all_programmed_on(&client, &ns.name, &names, &second).await;
    all_programmed_on(&client, &ns.name, &["g9"], &second).await;
    // The counts follow (written at most every few seconds while Gateways report).
    let st = counted(
        &client,
        &class,
        &second,
        5,
        "every Gateway on the second revision",
    )
    .await;
    assert_eq!(st.current_revision.as_deref(), Some(second.as_str()));
    // A Gateway deleted: the counts drop it, though no other Gateway reports.
    let gateways: Api<Gateway> = Api::namespaced(client.clone(), &ns.name);
    gateways
        .delete("g9", &Default::default())
        .await
        .expect("delete g9");
    counted(&client, &class, &second, 4, "the deleted Gateway no longer").await;
    // Changed back: the first revision is reused and rolled out again.
    set_template(&client, &class, &good("1")).await;
    all_programmed_on(&client, &ns.name, &["g0", "g1", "g2", "g3"], &first).await;
    wait_for("the values back to 1", T, || async {
        values(&client, &ns.name)
            .await
            .values()
            .all(|v| v == "1")
            .then_some(())
    })
    .await;
    delete_class(&client, &class).await;
    ns.delete().await;
}

#[tokio::test]
async fn a_revision_that_does_not_render_stops_in_the_first_wave_and_rolls_back() {
    let _ = controller();
    let client = admin().await;
    let ns = TestNamespace::new(&client, "waves-bad").await;
    let class = unique_name("waves-bad");
    let policy = "{onFailure: Rollback, waves: [{count: 1}]}";
    apply_yaml(&client, &class_yaml(&class, &good("1"), policy)).await;
    let names = ["g0", "g1", "g2"];
    for n in names {
        apply_yaml(&client, &gateway_yaml(&ns.name, n, &class)).await;
    }
    let first = format!("{class}-1");
    all_programmed_on(&client, &ns.name, &names, &first).await;
    let watch = Watch::start(&client, &ns.name).await;

    set_template(&client, &class, &broken()).await;
    let r = wait_for("the rollout rolled back", T, || async {
        rollout(&client, &class)
            .await
            .filter(|r| r.phase == gatewright::api::RolloutPhase::RolledBack)
    })
    .await;
    assert_eq!(r.from.as_deref(), Some(first.as_str()));
    assert_eq!(r.waves.len(), 1, "{r:?}");
    assert_eq!(r.waves[0].gateways, vec![format!("{}/g0", ns.name)]);
    assert!(r.message.contains("does not render"), "{}", r.message);
    // The first wave is back on the first revision, and Programmed.
    all_programmed_on(&client, &ns.name, &names, &first).await;
    // Every status the other Gateways went through: Programmed on the first revision.
    let events = watch.events();
    let mut seen_g0_failing = false;
    for g in &events {
        let name = g.name_any();
        if name == "g0" {
            seen_g0_failing |= cond(g, "Programmed").is_some_and(|p| p.status == "False");
            continue;
        }
        assert_eq!(
            programmed_on(g).as_deref(),
            Some(first.as_str()),
            "{name} left Programmed on {first}: {:?}",
            g.status
        );
    }
    assert!(seen_g0_failing, "the first wave never failed: {events:?}");
    // The blueprint says so: not Ready, Progressing False/RolledBack, and an Event.
    let bp = blueprints(&client).get(&class).await.unwrap();
    let conds = bp.status.unwrap().conditions;
    let c = |t: &str| conds.iter().find(|c| c.type_ == t).unwrap().clone();
    assert_eq!(c("Progressing").reason, "RolledBack");
    assert_eq!(c("Ready").status, "False");
    let events: Api<k8s_openapi::api::events::v1::Event> = Api::all(client.clone());
    wait_for("a RolledBack Event", T, || async {
        events
            .list(&ListParams::default())
            .await
            .ok()?
            .items
            .iter()
            .any(|e| {
                e.reason.as_deref() == Some("RolledBack")
                    && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(&class)
            })
            .then_some(())
    })
    .await;
    // Mended: the new revision rolls out and completes.
    set_template(&client, &class, &good("3")).await;
    let third = format!("{class}-3");
    all_programmed_on(&client, &ns.name, &names, &third).await;
    drop(watch);
    delete_class(&client, &class).await;
    ns.delete().await;
}

#[tokio::test]
async fn a_pinned_gateway_stays_on_its_revision() {
    let _ = controller();
    let client = admin().await;
    let ns = TestNamespace::new(&client, "waves-pin").await;
    let class = unique_name("waves-pin");
    apply_yaml(&client, &class_yaml(&class, &good("1"), "{}")).await;
    let names = ["g0", "g1"];
    for n in names {
        apply_yaml(&client, &gateway_yaml(&ns.name, n, &class)).await;
    }
    let first = format!("{class}-1");
    all_programmed_on(&client, &ns.name, &names, &first).await;
    apply_yaml(
        &client,
        &format!(
            "apiVersion: gatewright.dev/v1alpha1\nkind: GatewayConfig\nmetadata: {{name: pin, namespace: {}}}\nspec:\n  targetRef: {{group: gateway.networking.k8s.io, kind: Gateway, name: g1}}\n  revision: {first}\n",
            ns.name
        ),
    )
    .await;
    set_template(&client, &class, &good("2")).await;
    let second = format!("{class}-2");
    all_programmed_on(&client, &ns.name, &["g0"], &second).await;
    let gws: Api<Gateway> = Api::namespaced(client.clone(), &ns.name);
    // Only the Revision condition's reason changes for g1 (it stays Programmed): a
    // progress-only status change, which may wait for the progress hold (30 s while the
    // controller is busy) before it is written.
    let r = wait_for("g1 reported pinned", Duration::from_secs(90), || async {
        let g1 = gws.get("g1").await.ok()?;
        cond(&g1, "gatewright.dev/Revision")
            .filter(|r| r.reason == "Pinned")
            .cloned()
    })
    .await;
    assert!(r.message.starts_with(&format!("{first}:")), "{}", r.message);
    assert_eq!(
        values(&client, &ns.name).await,
        BTreeMap::from([("g0".into(), "2".into()), ("g1".into(), "1".into())])
    );
    // The rollout completes around the pin.
    wait_for("the rollout complete", T, || async {
        rollout(&client, &class)
            .await
            .filter(|r| r.phase == gatewright::api::RolloutPhase::Complete)
    })
    .await;
    delete_class(&client, &class).await;
    ns.delete().await;
}

#[tokio::test]
async fn the_rollout_command_pauses_resumes_shows_history_and_undoes() {
    let _ = controller();
    let client = admin().await;
    let ns = TestNamespace::new(&client, "waves-cli").await;
    let class = unique_name("waves-cli");
    apply_yaml(
        &client,
        &class_yaml(&class, &good("1"), "{waves: [{count: 1}, {count: 1}]}"),
    )
    .await;
    let names = ["g0", "g1", "g2"];
    for n in names {
        apply_yaml(&client, &gateway_yaml(&ns.name, n, &class)).await;
    }
    let first = format!("{class}-1");
    let second = format!("{class}-2");
    all_programmed_on(&client, &ns.name, &names, &first).await;

    // Before applying a change: `diff` says per wave which Gateways it reaches, and what
    // each renders once reached.
    let file = std::env::temp_dir().join(format!("{class}.yaml"));
    std::fs::write(
        &file,
        class_yaml(&class, &good("5"), "{waves: [{count: 1}, {count: 1}]}"),
    )
    .unwrap();
    let (code, out, err) = gatewright(&["diff", "-f", file.to_str().unwrap()]);
    assert_eq!(code, 1, "{out}\n{err}");
    let k = |g: &str| format!("{}/{g}", ns.name);
    for line in [
        format!("GatewayClassBlueprint {class}: revision {second} reaches its Gateways in waves"),
        format!("  wave-1 (1): {}\n", k("g0")),
        format!("  wave-2 (1): {}\n", k("g1")),
        format!("  rest (1): {}\n", k("g2")),
        format!("~ change ConfigMap {}-cm", k("g2")),
        "+  value: \"5\"".to_owned(),
    ] {
        assert!(out.contains(&line), "{line:?} not in:\n{out}");
    }
    std::fs::remove_file(&file).unwrap();
    // Paused before the change: the new revision is made, nothing moves.
    let (code, out, err) = gatewright(&["rollout", "pause", &class]);
    assert_eq!(
        (code, out.as_str()),
        (
            0,
            format!("gatewayclassblueprint/{class} paused\n").as_str()
        ),
        "{err}"
    );
    set_template(&client, &class, &good("2")).await;
    wait_for("the rollout paused on the second revision", T, || async {
        rollout(&client, &class)
            .await
            .filter(|r| r.revision == second && r.phase == gatewright::api::RolloutPhase::Paused)
    })
    .await;
    let (code, out, _) = gatewright(&["rollout", "status", &class]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains(&format!("rollout of {second} from {first}: Paused")),
        "{out}"
    );
    // Still paused: every Gateway on the first revision, every ConfigMap as it was.
    all_programmed_on(&client, &ns.name, &names, &first).await;
    assert!(values(&client, &ns.name).await.values().all(|v| v == "1"));

    let (code, _, err) = gatewright(&["rollout", "resume", &class]);
    assert_eq!(code, 0, "{err}");
    all_programmed_on(&client, &ns.name, &names, &second).await;
    wait_for("the rollout complete", T, || async {
        (gatewright(&["rollout", "status", &class]).0 == 0).then_some(())
    })
    .await;
    let (code, out, _) = gatewright(&["rollout", "history", &class]);
    assert_eq!(code, 0);
    assert!(out.contains(&format!("1  {first}  ")), "{out}");
    assert!(
        out.contains(&format!("2  {second} (newest)  "))
            && out.contains("gateway template cm changed (template)"),
        "{out}"
    );

    // Undo: the first revision is the newest again, and every Gateway goes back to it.
    let (code, out, err) = gatewright(&["rollout", "undo", &class]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        out,
        format!("gatewayclassblueprint/{class} rolled back to {first}\n")
    );
    all_programmed_on(&client, &ns.name, &names, &first).await;
    wait_for("the values back to 1", T, || async {
        values(&client, &ns.name)
            .await
            .values()
            .all(|v| v == "1")
            .then_some(())
    })
    .await;
    let (code, _, err) = gatewright(&["rollout", "pause", "no-such-blueprint"]);
    assert_eq!(code, 2);
    assert!(
        err.contains("GatewayClassBlueprint no-such-blueprint not found"),
        "{err}"
    );
    delete_class(&client, &class).await;
    ns.delete().await;
}

/// The shipped class as it was at 52fd840 (no rolloutPolicy; its Certificates named and
/// versioned otherwise), under the name `class`.
fn old_shipped_yaml(class: &str) -> String {
    let dir = format!(
        "{}/gatewayclasses/istio-certmanager-externaldns",
        env!("CARGO_MANIFEST_DIR")
    );
    format!(
        "{}\n---\n{}",
        std::fs::read_to_string(format!("{dir}/gatewayclass.yaml")).unwrap(),
        include_str!("fixtures/istio-certmanager-externaldns@52fd840.blueprint.yaml")
    )
    .replace("istio-certmanager-externaldns", class)
}

/// Plays cert-manager's and Istio's part for `ns` (a failed discovery: the next round).
async fn play(client: &Client, ns: &str) {
    if let Err(e) = gatewright::simulate::simulate_ready_where(
        client,
        Some(ns),
        gatewright::simulate::Play::All,
    )
    .await
    {
        eprintln!("simulate: {e}; again in the next round");
    }
}

#[tokio::test]
async fn the_current_shipped_class_over_the_one_at_52fd840_goes_wave_by_wave() {
    let _ = controller();
    let client = admin().await;
    let ns = TestNamespace::new(&client, "waves-up").await;
    let class = unique_name("waves-up");
    apply_yaml(&client, &old_shipped_yaml(&class)).await;
    // Its child listeners admit every namespace: so do these Gateways' listeners, or the
    // tenancy boundary refuses the old class's child Gateway as the newest revision (once
    // the current class is the newest, the old one only warns where it still renders).
    let names = ["g0", "g1", "g2", "g3"];
    for n in names {
        apply_yaml(
            &client,
            &format!(
                "apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {{name: {n}, namespace: {ns}}}\nspec:\n  gatewayClassName: {class}\n  listeners:\n  - {{name: https, port: 443, protocol: HTTPS, hostname: \"*.{n}.example.com\", allowedRoutes: {{namespaces: {{from: All}}}}, tls: {{options: {{gatewright.dev/certificate: generated}}}}}}\n---\napiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {{name: {n}-r, namespace: {ns}}}\nspec:\n  parentRefs: [{{name: {n}}}]\n  hostnames: [app.{n}.example.com]\n  rules: [{{backendRefs: [{{name: svc, port: 80}}]}}]\n",
                ns = ns.name
            ),
        )
        .await;
    }
    let first = format!("{class}-1");
    let gws: Api<Gateway> = Api::namespaced(client.clone(), &ns.name);
    wait_for("every Gateway Programmed on the old class", T, || async {
        play(&client, &ns.name).await;
        let list = gws.list(&ListParams::default()).await.ok()?;
        (list
            .items
            .iter()
            .filter(|g| programmed_on(g).as_deref() == Some(first.as_str()))
            .count()
            == names.len())
        .then_some(())
    })
    .await;
    let watch = Watch::start(&client, &ns.name).await;

    // The chart's upgrade: the current class over it, with its rolloutPolicy.
    apply_yaml(
        &client,
        &crate::common::shipped_class_yaml("istio-certmanager-externaldns", &class),
    )
    .await;
    let second = format!("{class}-2");
    let started = std::time::Instant::now();
    let r = loop {
        play(&client, &ns.name).await;
        let r = rollout(&client, &class).await;
        if let Some(r) =
            r.filter(|r| r.revision == second && r.phase == gatewright::api::RolloutPhase::Complete)
        {
            break r;
        }
        assert!(
            started.elapsed() < Duration::from_secs(240),
            "the rollout did not complete: {:?}",
            rollout(&client, &class).await
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    // Waves as the shipped policy says: one Gateway, a quarter (one), the rest.
    let sizes: Vec<(String, usize)> = r
        .waves
        .iter()
        .map(|w| (w.name.clone(), w.gateways.len()))
        .collect();
    assert_eq!(
        sizes,
        vec![
            ("canary".into(), 1),
            ("quarter".into(), 1),
            ("rest".into(), 2)
        ]
    );
    // At no status change were more Gateways than the first wave not Programmed (after
    // it, the shipped policy moves one Gateway at a time not Programmed).
    let mut state: BTreeMap<String, bool> = names.iter().map(|n| ((*n).to_owned(), true)).collect();
    let mut worst = 0;
    let mut why = Vec::new();
    for g in watch.events() {
        // The parents only (their Istio children are Gateways of this namespace too).
        if g.spec.gateway_class_name != class {
            continue;
        }
        let p = cond(&g, "Programmed");
        let ok = p.is_some_and(|p| p.status == "True");
        if !ok {
            why.push(format!(
                "{}: {:?} / {:?}",
                g.name_any(),
                p.map(|p| (&p.reason, &p.message)),
                cond(&g, "gatewright.dev/Revision").map(|r| &r.message)
            ));
        }
        state.insert(g.name_any(), ok);
        worst = worst.max(state.values().filter(|ok| !**ok).count());
    }
    assert!(
        worst <= 1,
        "{worst} Gateways were not Programmed at once: {why:#?}"
    );
    // Every Gateway on the new revision, and one Certificate each: nothing left behind.
    wait_for(
        "every Gateway Programmed on the new revision, one Certificate each",
        T,
        || async {
            play(&client, &ns.name).await;
            let list = gws.list(&ListParams::default()).await.ok()?;
            let on = list
                .items
                .iter()
                .filter(|g| programmed_on(g).as_deref() == Some(second.as_str()))
                .count();
            let certs: Api<kube::api::DynamicObject> = Api::namespaced_with(
                client.clone(),
                &ns.name,
                &kube::api::ApiResource::from_gvk_with_plural(
                    &kube::api::GroupVersionKind::gvk("cert-manager.io", "v1", "Certificate"),
                    "certificates",
                ),
            );
            let n = certs
                .list(&ListParams::default())
                .await
                .ok()?
                .items
                .iter()
                .filter(|c| c.metadata.deletion_timestamp.is_none())
                .count();
            (on == names.len() && n == names.len()).then_some(())
        },
    )
    .await;
    println!(
        "52fd840 -> current: rollout complete after {:.1} s, at most {worst} Gateway(s) not Programmed at once",
        started.elapsed().as_secs_f64()
    );
    drop(watch);
    delete_class(&client, &class).await;
    ns.delete().await;
}

/// The blueprint's templates of the gated test (for [`class_yaml`]'s slot): the ConfigMap
/// holding `value` and a cert-manager Certificate (not issued here: cert-manager acts in
/// its own namespace only; what is tested is what the budget counts and paces).
fn cm_and_certificate(value: &str) -> String {
    good(value)
        + "  - name: cert\n    template: |\n"
        + &[
            "apiVersion: cert-manager.io/v1",
            "kind: Certificate",
            "metadata:",
            "  name: {{ gateway.metadata.name ~ \"-cert\" }}",
            "spec:",
            "  secretName: {{ gateway.metadata.name ~ \"-tls\" }}",
            "  dnsNames: [{{ gateway.metadata.name ~ \".waves.test\" }}]",
            "  issuerRef: {group: cert-manager.io, kind: Issuer, name: waves}",
        ]
        .map(|l| format!("      {l}\n"))
        .concat()
}

#[tokio::test]
async fn a_wave_waits_for_its_gate_and_the_issuance_budget_paces_the_rest() {
    let _ = controller();
    let client = admin().await;
    let ns = TestNamespace::new(&client, "waves-gate").await;
    let class = unique_name("waves-gate");
    // The first wave passes only once its Gateway is approved (an annotation a person or
    // an analysis sets); every move is counted as one Certificate, two per hour.
    let gate = r#"gateways | rejectattr("metadata.annotations.approved", "eq", "yes") | list | length == 0"#;
    let policy = format!(
        "{{waves: [{{name: canary, count: 1, gate: '{gate}'}}], issuanceBudget: {{certificates: 2, windowSeconds: 3600}}}}"
    );
    apply_yaml(
        &client,
        &class_yaml(&class, &cm_and_certificate("1"), &policy),
    )
    .await;
    let names = ["g0", "g1", "g2"];
    for n in names {
        apply_yaml(&client, &gateway_yaml(&ns.name, n, &class)).await;
    }
    let first = format!("{class}-1");
    let second = format!("{class}-2");
    all_programmed_on(&client, &ns.name, &names, &first).await;
    let certs = Api::<kube::api::DynamicObject>::namespaced_with(
        client.clone(),
        &ns.name,
        &kube::api::ApiResource::from_gvk(&kube::api::GroupVersionKind::gvk(
            "cert-manager.io",
            "v1",
            "Certificate",
        )),
    );
    assert_eq!(
        certs
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .len(),
        3
    );

    apply_yaml(
        &client,
        &class_yaml(&class, &cm_and_certificate("2"), &policy),
    )
    .await;
    // The canary moves, is Programmed on the new revision, and its wave waits on the gate.
    all_programmed_on(&client, &ns.name, &["g0"], &second).await;
    let r = wait_for("the canary waiting on its gate", T, || async {
        rollout(&client, &class)
            .await
            .filter(|r| r.revision == second && r.message.contains("waits for its gate"))
    })
    .await;
    assert_eq!(r.waves.len(), 1, "{r:?}");
    assert_eq!(
        values(&client, &ns.name).await,
        BTreeMap::from([
            ("g0".into(), "2".into()),
            ("g1".into(), "1".into()),
            ("g2".into(), "1".into())
        ])
    );
    // Approved: the rest goes, as far as the budget allows (one Certificate left in the
    // hour): g1 moves, g2 waits on the budget, said in the status.
    let gws: Api<Gateway> = Api::namespaced(client.clone(), &ns.name);
    let approve = json!({"metadata": {"annotations": {"approved": "yes"}}});
    gws.patch("g0", &PatchParams::default(), &Patch::Merge(&approve))
        .await
        .unwrap();
    let r = wait_for("g2 waiting on the issuance budget", T, || async {
        rollout(&client, &class)
            .await
            .filter(|r| r.budget_wait.as_ref().is_some_and(|b| b.gateways == 1))
    })
    .await;
    assert!(
        r.message.contains("wait on the issuance budget"),
        "{}",
        r.message
    );
    assert_eq!(
        r.issued.iter().map(|i| i.certificates).sum::<u32>(),
        2,
        "{r:?}"
    );
    all_programmed_on(&client, &ns.name, &["g1"], &second).await;
    // g2 stays on its revision, Programmed, while the budget holds it.
    assert_eq!(
        values(&client, &ns.name)
            .await
            .get("g2")
            .map(String::as_str),
        Some("1")
    );
    all_programmed_on(&client, &ns.name, &["g2"], &first).await;
    // A larger budget lets it go: the rollout completes.
    let patch = json!({"spec": {"rolloutPolicy": {"issuanceBudget": {"certificates": 3}}}});
    blueprints(&client)
        .patch(&class, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    all_programmed_on(&client, &ns.name, &names, &second).await;
    let r = wait_for("the rollout complete", T, || async {
        rollout(&client, &class)
            .await
            .filter(|r| r.phase == gatewright::api::RolloutPhase::Complete)
    })
    .await;
    assert_eq!(
        r.issued.iter().map(|i| i.certificates).sum::<u32>(),
        3,
        "{r:?}"
    );
    delete_class(&client, &class).await;
    ns.delete().await;
}
