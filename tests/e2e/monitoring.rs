//! The dashboard and the alerts cannot drift from the metrics: the controller runs against
//! the cluster, converges a Gateway, and its `/metrics` endpoint, scraped over HTTP and
//! parsed, must hold every `gatewright_*` name that the dashboard's and the alert rules'
//! queries use (read from the shipped files, not listed here).

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use serde_json::Value;

use crate::common::{TestNamespace, admin, apply_yaml, controller, http_get as get, wait_for};
use crate::controller::{cond, configmap_class, gateway_json, gateway_yaml};

const T: Duration = Duration::from_secs(60);

/// A parsed exposition: the families by name with their type and help, and the samples
/// as (sample name, labels) -> value.
#[derive(Debug, Default)]
struct Exposition {
    families: BTreeMap<String, (String, String)>,
    samples: BTreeMap<(String, BTreeMap<String, String>), f64>,
}

/// Parses the Prometheus text format strictly: every sample has a value, a label set that
/// parses, and a family described by `# HELP` and `# TYPE` before it.
fn parse(text: &str) -> Exposition {
    let mut e = Exposition::default();
    let mut help: BTreeMap<String, String> = BTreeMap::new();
    for line in text.lines().filter(|l| !l.is_empty()) {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let (name, h) = rest.split_once(' ').unwrap();
            help.insert(name.to_owned(), h.to_owned());
            continue;
        }
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, ty) = rest.split_once(' ').unwrap();
            let h = help
                .get(name)
                .unwrap_or_else(|| panic!("{name}: TYPE without HELP"));
            assert!(!h.is_empty(), "{name}: empty HELP");
            assert!(
                ["counter", "gauge", "histogram"].contains(&ty),
                "{name}: type {ty}"
            );
            e.families
                .insert(name.to_owned(), (ty.to_owned(), h.clone()));
            continue;
        }
        assert!(!line.starts_with('#'), "unexpected comment: {line}");
        let (series, value) = line.rsplit_once(' ').unwrap();
        let value: f64 = match value {
            "+Inf" => f64::INFINITY,
            v => v.parse().unwrap_or_else(|_| panic!("bad value in {line}")),
        };
        let (name, labels) = match series.split_once('{') {
            Some((n, rest)) => {
                let body = rest.strip_suffix('}').unwrap_or_else(|| panic!("{line}"));
                let mut labels = BTreeMap::new();
                // Label values of ours hold no comma or quote.
                for pair in body.split(',').filter(|p| !p.is_empty()) {
                    let (k, v) = pair.split_once('=').unwrap_or_else(|| panic!("{line}"));
                    let v = v
                        .strip_prefix('"')
                        .and_then(|v| v.strip_suffix('"'))
                        .unwrap_or_else(|| panic!("{line}"));
                    labels.insert(k.to_owned(), v.to_owned());
                }
                (n.to_owned(), labels)
            }
            None => (series.to_owned(), BTreeMap::new()),
        };
        assert!(family_of(&e, &name).is_some(), "{name} has no TYPE");
        assert!(name.starts_with("gatewright_"), "{name}: not gatewright_*");
        e.samples.insert((name, labels), value);
    }
    e
}

/// The family a sample name belongs to, by its type's suffixes.
fn family_of<'a>(e: &'a Exposition, name: &str) -> Option<&'a str> {
    if let Some((k, (ty, _))) = e.families.get_key_value(name) {
        return (ty != "histogram").then_some(k.as_str());
    }
    ["_bucket", "_sum", "_count"].iter().find_map(|suffix| {
        let f = name.strip_suffix(suffix)?;
        let (k, (ty, _)) = e.families.get_key_value(f)?;
        (ty == "histogram").then_some(k.as_str())
    })
}

impl Exposition {
    /// Whether a query may name `name`: a sample name the endpoint writes, or the sample
    /// name of a family it describes (a labelled family has no sample before its first
    /// event: `gatewright_reconcile_errors_total` with no error yet).
    fn has(&self, name: &str) -> bool {
        self.samples.keys().any(|(n, _)| n == name) || family_of(self, name).is_some()
    }

    /// The value of the sample `name` whose labels include `labels`.
    fn value(&self, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
        self.samples
            .iter()
            .filter(|((n, l), _)| {
                n == name
                    && labels
                        .iter()
                        .all(|(k, v)| l.get(*k).map(String::as_str) == Some(v))
            })
            .map(|(_, v)| *v)
            .reduce(|a, b| a + b)
    }
}

/// The value of an unlabelled gauge as the controller would serve it now.
pub(crate) fn gauge(ctl: &gatewright::controller::Runner, name: &str) -> f64 {
    parse(&ctl.metrics().render())
        .value(name, &[])
        .unwrap_or_else(|| panic!("{name} is not exported"))
}

/// Every `gatewright_*` token in the strings of a JSON or YAML document.
fn metric_names(doc: &Value, out: &mut BTreeSet<String>) {
    match doc {
        Value::String(s) => {
            let mut rest = s.as_str();
            while let Some(i) = rest.find("gatewright_") {
                let tail = &rest[i..];
                let end = tail
                    .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
                    .unwrap_or(tail.len());
                out.insert(tail[..end].to_owned());
                rest = &tail[end..];
            }
        }
        Value::Array(a) => a.iter().for_each(|v| metric_names(v, out)),
        Value::Object(o) => o.values().for_each(|v| metric_names(v, out)),
        _ => {}
    }
}

fn names_in(file: &str) -> BTreeSet<String> {
    let path = format!(
        "{}/charts/gatewright/files/{file}",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(&path).unwrap();
    let doc: Value = if file.ends_with(".json") {
        serde_json::from_str(&text).unwrap()
    } else {
        serde_saphyr::from_str(&text).unwrap()
    };
    let mut names = BTreeSet::new();
    metric_names(&doc, &mut names);
    names
}

#[tokio::test]
async fn dashboard_and_alerts_query_only_metrics_the_controller_exports() {
    let client = admin().await;
    let ctl = controller();
    let ns = TestNamespace::new(&client, "metrics").await;
    let class = format!("metrics-{}", ns.name);
    apply_yaml(&client, &configmap_class(&class)).await;
    apply_yaml(&client, &gateway_yaml(&ns.name, &class)).await;
    wait_for("the Gateway to be Programmed", T, || async {
        let g = gateway_json(&client, &ns.name).await;
        (cond(&g["status"]["conditions"], "Programmed")?["status"] == "True").then_some(())
    })
    .await;

    let addr = ctl
        .metrics()
        .served_at()
        .expect("the controller serves metrics");
    assert_eq!(get(addr, "/healthz").await.0, 200);
    assert_eq!(get(addr, "/readyz").await.0, 200);
    assert_eq!(get(addr, "/nothing-here").await.0, 404);

    // The gauges are read at scrape time: the Gateway counts as soon as its reconcile has
    // reported it.
    let e = wait_for(
        "gatewright_gateways to count a Programmed Gateway",
        T,
        || async {
            let (code, content_type, body) = get(addr, "/metrics").await;
            assert_eq!(code, 200, "{body}");
            assert!(
                content_type.starts_with("text/plain; version=0.0.4"),
                "{content_type}"
            );
            let e = parse(&body);
            (e.value("gatewright_gateways", &[("programmed", "True")]) >= Some(1.0)).then_some(e)
        },
    )
    .await;

    // What the controller did shows up, with the labels the dashboard groups by.
    assert_eq!(e.value("gatewright_leader", &[]), Some(1.0));
    assert_eq!(e.value("gatewright_caches_synced", &[]), Some(1.0));
    assert!(e.value("gatewright_watched_child_kinds", &[]) >= Some(1.0));
    assert!(
        e.value(
            "gatewright_reconciles_total",
            &[("kind", "Gateway"), ("category", "Ok")]
        ) >= Some(1.0)
    );
    assert!(
        e.value(
            "gatewright_reconcile_duration_seconds_count",
            &[("kind", "Gateway"), ("result", "Ok")]
        ) >= Some(1.0)
    );
    assert!(e.value("gatewright_plan_duration_seconds_count", &[]) >= Some(1.0));
    assert!(e.value("gatewright_writes_total", &[("category", "apply")]) >= Some(1.0));
    assert!(e.value("gatewright_writes_total", &[("category", "status")]) >= Some(1.0));
    assert!(
        e.value(
            "gatewright_api_request_duration_seconds_count",
            &[("verb", "PATCH")]
        ) >= Some(1.0)
    );
    assert!(
        e.value(
            "gatewright_api_requests_total",
            &[("verb", "PATCH"), ("resource", "configmaps")]
        ) >= Some(1.0)
    );

    // The drift check proper.
    for file in ["grafana-dashboard.json", "prometheus-rules.yaml"] {
        let names = names_in(file);
        assert!(
            names.len() >= 5,
            "{file}: only {names:?} found; is the extraction broken?"
        );
        let missing: Vec<&String> = names.iter().filter(|n| !e.has(n)).collect();
        assert!(
            missing.is_empty(),
            "{file} queries metrics that /metrics does not export: {missing:?}\nexported families: {:?}",
            e.families.keys().collect::<Vec<_>>()
        );
    }
}

#[test]
fn a_renamed_metric_would_be_caught() {
    // The check above fails on a name the endpoint does not have, by the same code paths.
    let e = parse(
        "# HELP gatewright_x_seconds A histogram.\n# TYPE gatewright_x_seconds histogram\n\
         gatewright_x_seconds_bucket{le=\"+Inf\"} 1\ngatewright_x_seconds_sum 0.5\n\
         gatewright_x_seconds_count 1\n# HELP gatewright_y_total A counter.\n\
         # TYPE gatewright_y_total counter\n",
    );
    assert!(e.has("gatewright_x_seconds_bucket"));
    assert!(e.has("gatewright_x_seconds_count"));
    assert!(e.has("gatewright_y_total"));
    assert!(!e.has("gatewright_x_seconds_total"));
    assert!(!e.has("gatewright_y"));
    assert!(!e.has("gatewright_z_total"));
    let mut names = BTreeSet::new();
    metric_names(
        &serde_json::json!({"expr": "sum(rate(gatewright_a_total{job=~\"$job\"}[5m])) / gatewright_b"}),
        &mut names,
    );
    assert_eq!(
        names,
        BTreeSet::from(["gatewright_a_total".to_owned(), "gatewright_b".to_owned()])
    );
}
