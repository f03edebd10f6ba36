//! The API server's request counters (`apiserver_request_total` on its /metrics), shared
//! by the scale and fleet benchmarks: writes counted where they land, whoever sent them.

use std::collections::{BTreeMap, HashMap};

use kube::Client;

pub type Counts = BTreeMap<(String, String), f64>;

/// `apiserver_request_total` summed by (verb, resource[/subresource]).
pub async fn apiserver_counts(client: &Client) -> Counts {
    sums(&metrics(client).await, "apiserver_request_total")
}

/// The API server's own time serving requests, in seconds, summed by (verb,
/// resource[/subresource]): `apiserver_request_duration_seconds_sum` (from the request's
/// arrival to its answer; watches excluded by the API server).
#[allow(
    dead_code,
    reason = "the fleet bench shares this file and reads counts only"
)]
pub async fn apiserver_seconds(client: &Client) -> Counts {
    sums(
        &metrics(client).await,
        "apiserver_request_duration_seconds_sum",
    )
}

async fn metrics(client: &Client) -> String {
    let req = http::Request::get("/metrics").body(Vec::new()).unwrap();
    client.request_text(req).await.unwrap()
}

/// The samples of `metric` in `text`, summed by (verb, resource[/subresource]).
fn sums(text: &str, metric: &str) -> Counts {
    let mut out = Counts::new();
    let prefix = format!("{metric}{{");
    for line in text.lines() {
        let Some(rest) = line.strip_prefix(prefix.as_str()) else {
            continue;
        };
        let Some((labels, value)) = rest.rsplit_once("} ") else {
            continue;
        };
        let mut l = HashMap::new();
        for part in labels.split("\",") {
            if let Some((k, v)) = part.split_once("=\"") {
                l.insert(k, v.trim_end_matches('"'));
            }
        }
        let mut resource = l.get("resource").copied().unwrap_or_default().to_owned();
        if let Some(s) = l.get("subresource").filter(|s| !s.is_empty()) {
            resource = format!("{resource}/{s}");
        }
        let verb = l.get("verb").copied().unwrap_or_default().to_owned();
        *out.entry((verb, resource)).or_default() += value.trim().parse::<f64>().unwrap_or(0.0);
    }
    out
}

pub fn is_write(verb: &str) -> bool {
    matches!(
        verb,
        "POST" | "PUT" | "PATCH" | "APPLY" | "DELETE" | "DELETECOLLECTION" | "CREATE" | "UPDATE"
    )
}

/// Write requests between two readings, by (verb, resource), leases left out.
pub fn writes_between(before: &Counts, after: &Counts) -> BTreeMap<(String, String), u64> {
    after
        .iter()
        .filter(|((verb, resource), _)| is_write(verb) && !resource.starts_with("leases"))
        .filter_map(|(k, v)| {
            let d = (v - before.get(k).copied().unwrap_or(0.0)).round() as u64;
            (d > 0).then(|| (k.clone(), d))
        })
        .collect()
}
