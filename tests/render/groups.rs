//! Certificates in groups of at most 100 names (`groups(100)` in the shipped
//! istio-certmanager-externaldns class), each replaced make-before-break on its own
//! (`rollout.per: Object`), as the planner sees it step by step with cert-manager issuing
//! one Certificate at a time. At every step, every name that was served before the change
//! is still served by a Secret the child Gateway's HTTPS listener names.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use serde_json::{Value, json};

use super::{converge, render_with_live};

const CLASS: &str = "istio-certmanager-externaldns";

fn ours(d: &Value) -> bool {
    d["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "gatewright"
}

fn name(d: &Value) -> &str {
    d["metadata"]["name"].as_str().unwrap_or_default()
}

/// `n` routes of 15 hostnames each (`<prefix>-<i>-<j>.example.com`), in one file.
fn routes(dir: &Path, file: &str, prefix: &str, n: usize) {
    let text: String = (0..n)
        .map(|i| {
            let hosts: Vec<String> = (0..15)
                .map(|j| format!("{prefix}-{i}-{j}.example.com"))
                .collect();
            format!(
                "---\napiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {{name: {prefix}-{i}, namespace: shop, uid: 3f6b1d8e-0000-4000-8000-{prefix:0>4}{i:08}, generation: 1}}\nspec:\n  parentRefs: [{{name: public, namespace: infra}}]\n  hostnames: {hosts:?}\n  rules: [{{backendRefs: [{{name: web, port: 80}}]}}]\n"
            )
        })
        .collect();
    std::fs::write(dir.join(file), text).unwrap();
}

fn certificates(docs: &[Value]) -> Vec<&Value> {
    docs.iter().filter(|d| d["kind"] == "Certificate").collect()
}

fn dns_names(c: &Value) -> BTreeSet<String> {
    c["spec"]["dnsNames"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_str().unwrap().to_owned())
        .collect()
}

fn issued(c: &Value) -> bool {
    c["status"]["conditions"][0]["status"] == "True"
}

/// The names the child Gateway's HTTPS listener serves in `live`: those of the issued
/// Certificates whose Secrets it names.
fn served(live: &[Value]) -> BTreeSet<String> {
    let gw = live
        .iter()
        .find(|d| d["kind"] == "Gateway" && name(d) == "public-istio")
        .expect("the child Gateway");
    let refs: BTreeSet<&str> = gw["spec"]["listeners"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|l| l["protocol"] == "HTTPS")
        .flat_map(|l| l["tls"]["certificateRefs"].as_array().unwrap())
        .filter_map(|r| r["name"].as_str())
        .collect();
    certificates(live)
        .into_iter()
        .filter(|c| issued(c) && refs.contains(c["spec"]["secretName"].as_str().unwrap()))
        .flat_map(dns_names)
        .collect()
}

/// One pass: the plan's children become live (every kind ready at once, as the simulated
/// dataplane does, except Certificates: a new one is live but not issued, unless `issue`
/// says so); what the plan keeps stays; what it deletes goes. Returns the next live set
/// and the plan's stderr.
fn step(dir: &Path, live: &[Value], issue: &dyn Fn(&Value) -> bool) -> (Vec<Value>, String) {
    let (out, stderr) = render_with_live(CLASS, dir, live);
    let by_name: BTreeMap<&str, &Value> = live.iter().map(|d| (name(d), d)).collect();
    let mut next: Vec<Value> = Vec::new();
    for d in out.iter().filter(|d| ours(d)) {
        let was = by_name.get(name(d)).copied();
        if d["kind"] == "Certificate" {
            let ready = was.is_some_and(issued) || (was.is_some() && issue(d));
            let mut c = gatewright::simulate::as_ready(d);
            if !ready {
                c["status"] = json!({"conditions": [{"type": "Ready", "status": "False", "reason": "Issuing", "message": "issuing"}]});
            }
            next.push(c);
        } else {
            next.push(gatewright::simulate::as_ready(d));
        }
    }
    let deleted = |n: &str| {
        stderr
            .lines()
            .any(|l| l.contains("would delete") && l.ends_with(&format!("/{n}")))
    };
    for d in live {
        if !next.iter().any(|n| name(n) == name(d)) && !deleted(name(d)) {
            next.push(d.clone());
        }
    }
    (next, stderr)
}

/// Runs passes, issuing one pending Certificate per pass, until nothing changes; checks
/// after every pass that the names in `must_serve` are served. Returns the final live set.
fn settle(dir: &Path, mut live: Vec<Value>, must_serve: &BTreeSet<String>) -> Vec<Value> {
    for pass in 0..60 {
        // Issue the first Certificate (by name) that exists and is not issued yet.
        let first_pending = certificates(&live)
            .into_iter()
            .filter(|c| !issued(c))
            .map(|c| name(c).to_owned())
            .min();
        let issue = |c: &Value| first_pending.as_deref() == Some(name(c));
        let (next, _) = step(dir, &live, &issue);
        let now = served(&next);
        let lost: Vec<&String> = must_serve.difference(&now).collect();
        assert!(
            lost.is_empty(),
            "pass {pass}: names no longer served: {lost:?}"
        );
        let same = serde_json::to_string(&next).unwrap() == serde_json::to_string(&live).unwrap();
        live = next;
        if same {
            return live;
        }
    }
    panic!("did not settle in 60 passes");
}

fn precise(live: &[Value]) -> BTreeSet<String> {
    certificates(live)
        .into_iter()
        .filter(|c| issued(c))
        .flat_map(dns_names)
        .collect()
}

#[test]
fn certificates_come_in_groups_of_at_most_100_each_replaced_on_its_own() {
    let dir = tempfile::tempdir().unwrap();
    // 150 names beside the example's own: two or more groups.
    routes(dir.path(), "many.yaml", "a", 10);
    let (converged, _) = converge(CLASS, dir.path());
    let live: Vec<Value> = converged
        .iter()
        .filter(|d| ours(d))
        .map(gatewright::simulate::as_ready)
        .collect();
    let certs = certificates(&live);
    assert!(certs.len() >= 2, "{} certificates", certs.len());
    for c in &certs {
        assert!(
            dns_names(c).len() <= 100,
            "{} has {}",
            name(c),
            dns_names(c).len()
        );
    }
    let all = precise(&live);
    assert!(all.len() > 150, "{}", all.len());
    assert_eq!(
        served(&live),
        all,
        "every group's Secret is on the listener"
    );
    let before: BTreeMap<String, BTreeSet<String>> = certs
        .iter()
        .map(|c| (name(c).to_owned(), dns_names(c)))
        .collect();

    // One name more: one group's Certificate is replaced, the others are left alone.
    std::fs::write(
        dir.path().join("one.yaml"),
        "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {name: one, namespace: shop, uid: 2f6b1d8e-0000-4000-8000-000000000042, generation: 1}\nspec:\n  parentRefs: [{name: public, namespace: infra}]\n  hostnames: [one-more.example.com]\n  rules: [{backendRefs: [{name: web, port: 80}]}]\n",
    )
    .unwrap();
    let (first, stderr) = step(dir.path(), &live, &|_| false);
    let new: Vec<&Value> = certificates(&first)
        .into_iter()
        .filter(|c| !before.contains_key(name(c)))
        .collect();
    assert_eq!(new.len(), 1, "one new Certificate: {stderr}");
    assert!(dns_names(new[0]).contains("one-more.example.com"));
    assert_eq!(
        stderr.matches("(WaitingForNew)").count(),
        1,
        "one replacement under way: {stderr}"
    );
    assert!(stderr.contains("(object public-tls-"), "{stderr}");
    let live = settle(dir.path(), first, &all);
    let after = certificates(&live);
    assert_eq!(after.len(), before.len(), "the replaced one is gone");
    let kept = after
        .iter()
        .filter(|c| before.get(name(c)) == Some(&dns_names(c)))
        .count();
    assert_eq!(
        kept,
        before.len() - 1,
        "every other group kept its Certificate"
    );
    let mut all = all;
    all.insert("one-more.example.com".to_owned());
    assert_eq!(served(&live), all);

    // Enough names that the number of groups doubles: names move to new groups, and no
    // name is unserved on the way (a changed group switches only once every new group is
    // issued).
    routes(dir.path(), "more.yaml", "b", 20);
    let live = settle(dir.path(), live, &all);
    let groups = certificates(&live);
    assert!(groups.len() > before.len(), "{} groups", groups.len());
    for c in &groups {
        assert!(
            dns_names(c).len() <= 100,
            "{} has {}",
            name(c),
            dns_names(c).len()
        );
    }
    let everything = precise(&live);
    assert!(everything.len() > 450, "{}", everything.len());
    assert_eq!(served(&live), everything);

    // And back: the added routes go, groups merge; nothing that stays is unserved.
    std::fs::remove_file(dir.path().join("more.yaml")).unwrap();
    let live = settle(dir.path(), live, &all);
    assert_eq!(served(&live), all);
    assert_eq!(certificates(&live).len(), before.len());
}
