//! Metrics (Prometheus text format), `/healthz` and `/readyz`, served on one address.
//! The counters are plain atomics: the controller has a handful of them.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The controller's counters and gauges.
#[derive(Debug, Default)]
pub struct Metrics {
    /// Reconciles by kind and outcome category.
    reconciles: Mutex<BTreeMap<(String, String), u64>>,
    /// Server-side applies sent.
    pub applies: AtomicU64,
    /// Applies skipped because the live object already held what we render.
    pub applies_skipped: AtomicU64,
    /// Children deleted.
    pub prunes: AtomicU64,
    /// Status writes sent.
    pub status_writes: AtomicU64,
    /// Total render (plan) time in microseconds, and the number of plans.
    pub plan_micros: AtomicU64,
    /// Number of plans.
    pub plans: AtomicU64,
    /// Keys waiting in the work queue.
    pub queue_depth: AtomicU64,
    /// Gateway and route watch events that changed only status: stored, nothing planned.
    pub status_only_events: AtomicU64,
    /// Set once every watch has listed its objects.
    pub ready: AtomicBool,
    /// Requests sent to the API server, counted at the HTTP layer: by (verb, resource).
    api_requests: Mutex<BTreeMap<(String, String), u64>>,
    /// Write requests (POST, PUT, PATCH, DELETE) by namespace ("" for cluster-scoped).
    api_writes_by_namespace: Mutex<BTreeMap<String, u64>>,
}

impl Metrics {
    /// Counts a reconcile of `kind` that ended in `category` (`Ok` or an error category).
    pub fn reconciled(&self, kind: &str, category: &str) {
        if let Ok(mut m) = self.reconciles.lock() {
            *m.entry((kind.to_owned(), category.to_owned())).or_default() += 1;
        }
    }

    /// Counts one request as it leaves for the API server.
    pub fn api_request(&self, method: &str, path: &str) {
        let (namespace, resource) = split_api_path(path);
        if let Ok(mut m) = self.api_requests.lock() {
            *m.entry((method.to_owned(), resource.to_owned()))
                .or_default() += 1;
        }
        let write = matches!(method, "POST" | "PUT" | "PATCH" | "DELETE");
        if write && let Ok(mut m) = self.api_writes_by_namespace.lock() {
            *m.entry(namespace.to_owned()).or_default() += 1;
        }
    }

    /// Write requests sent so far, counted at the HTTP layer, except Lease renewals (leader
    /// election writes on its own schedule, not because of a reconcile).
    #[must_use]
    pub fn writes(&self) -> u64 {
        self.api_requests.lock().map_or(0, |m| {
            m.iter()
                .filter(|((verb, resource), _)| {
                    matches!(verb.as_str(), "POST" | "PUT" | "PATCH" | "DELETE")
                        && resource != "leases"
                })
                .map(|(_, n)| n)
                .sum()
        })
    }

    /// Requests sent so far with HTTP method `verb` to `resource` (a plural, such as
    /// `certificates`; a subresource counts as its resource), counted at the HTTP layer.
    #[must_use]
    pub fn requests(&self, verb: &str, resource: &str) -> u64 {
        self.api_requests.lock().map_or(0, |m| {
            m.get(&(verb.to_owned(), resource.to_owned()))
                .copied()
                .unwrap_or_default()
        })
    }

    /// Write requests sent so far to objects in `namespace` ("" for cluster-scoped ones),
    /// counted at the HTTP layer.
    #[must_use]
    pub fn writes_in_namespace(&self, namespace: &str) -> u64 {
        self.api_writes_by_namespace
            .lock()
            .map_or(0, |m| m.get(namespace).copied().unwrap_or_default())
    }

    /// The Prometheus text exposition.
    #[must_use]
    pub fn render(&self) -> String {
        use std::fmt::Write as _;
        let mut out = String::new();
        let _ = writeln!(out, "# TYPE gatewright_api_requests_total counter");
        if let Ok(m) = self.api_requests.lock() {
            for ((verb, resource), n) in m.iter() {
                let _ = writeln!(
                    out,
                    "gatewright_api_requests_total{{verb=\"{verb}\",resource=\"{resource}\"}} {n}"
                );
            }
        }
        let _ = writeln!(out, "# TYPE gatewright_reconciles_total counter");
        if let Ok(m) = self.reconciles.lock() {
            for ((kind, category), n) in m.iter() {
                let _ = writeln!(
                    out,
                    "gatewright_reconciles_total{{kind=\"{kind}\",category=\"{category}\"}} {n}"
                );
            }
        }
        for (name, help, v) in [
            ("gatewright_applies_total", "counter", &self.applies),
            (
                "gatewright_applies_skipped_total",
                "counter",
                &self.applies_skipped,
            ),
            ("gatewright_prunes_total", "counter", &self.prunes),
            (
                "gatewright_status_writes_total",
                "counter",
                &self.status_writes,
            ),
            ("gatewright_plan_seconds_count", "counter", &self.plans),
            ("gatewright_queue_depth", "gauge", &self.queue_depth),
            (
                "gatewright_status_only_events_total",
                "counter",
                &self.status_only_events,
            ),
        ] {
            let _ = writeln!(
                out,
                "# TYPE {name} {help}\n{name} {}",
                v.load(Ordering::Relaxed)
            );
        }
        #[allow(clippy::cast_precision_loss, reason = "a metric")]
        let secs = self.plan_micros.load(Ordering::Relaxed) as f64 / 1e6;
        let _ = writeln!(
            out,
            "# TYPE gatewright_plan_seconds_sum counter\ngatewright_plan_seconds_sum {secs}"
        );
        out
    }
}

/// The namespace and the resource of an API path (`/api/v1/namespaces/ns/pods/x`,
/// `/apis/group/v1/widgets`); empty strings where the path has none.
#[must_use]
pub fn split_api_path(path: &str) -> (&str, &str) {
    let path = path.split('?').next().unwrap_or_default();
    let mut parts = path.trim_start_matches('/').split('/');
    // Skip "api/v1" or "apis/group/version".
    match parts.next() {
        Some("api") => {
            parts.next();
        }
        Some("apis") => {
            parts.next();
            parts.next();
        }
        _ => return ("", ""),
    }
    match (parts.next(), parts.next(), parts.next()) {
        (Some("namespaces"), Some(ns), Some(resource)) => (ns, resource),
        (Some("namespaces"), Some(ns), None) => (ns, "namespaces"),
        (Some(resource), _, _) => ("", resource),
        (None, _, _) => ("", ""),
    }
}

/// Wraps `client` so that every request it sends is counted in `metrics` before it leaves:
/// the figures are real requests, not what the controller meant to send.
#[must_use]
pub fn counting_client(client: kube::Client, metrics: std::sync::Arc<Metrics>) -> kube::Client {
    let ns = client.default_namespace().to_owned();
    let svc = tower::service_fn(move |req: http::Request<kube::client::Body>| {
        metrics.api_request(req.method().as_str(), req.uri().path());
        let client = client.clone();
        async move { client.send(req).await }
    });
    kube::Client::new(svc, ns)
}

/// Serves `/metrics`, `/healthz` and `/readyz` until the process ends.
///
/// # Errors
/// The address cannot be bound.
pub async fn serve(addr: &str, metrics: std::sync::Arc<Metrics>) -> std::io::Result<()> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    tracing::info!(%addr, "serving metrics and health");
    loop {
        let Ok((mut sock, _)) = listener.accept().await else {
            continue;
        };
        let metrics = metrics.clone();
        tokio::spawn(async move {
            let mut buf = [0u8; 1024];
            let n = sock.read(&mut buf).await.unwrap_or(0);
            let req = String::from_utf8_lossy(&buf[..n]);
            let path = req.split_whitespace().nth(1).unwrap_or("/");
            let (code, body) = match path {
                "/metrics" => ("200 OK", metrics.render()),
                "/healthz" => ("200 OK", "ok\n".to_owned()),
                "/readyz" if metrics.ready.load(Ordering::Relaxed) => ("200 OK", "ok\n".to_owned()),
                "/readyz" => ("503 Service Unavailable", "caches not synced\n".to_owned()),
                _ => ("404 Not Found", "not found\n".to_owned()),
            };
            let resp = format!(
                "HTTP/1.1 {code}\r\ncontent-type: text/plain; version=0.0.4\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = sock.write_all(resp.as_bytes()).await;
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn api_paths_split_into_namespace_and_resource() {
        assert_eq!(split_api_path("/api/v1/namespaces/a/pods/x"), ("a", "pods"));
        assert_eq!(
            split_api_path("/apis/gateway.networking.k8s.io/v1/namespaces/b/gateways/g/status"),
            ("b", "gateways")
        );
        assert_eq!(
            split_api_path("/apis/ec2.aws.upbound.io/v1beta1/securitygroups?fieldManager=x"),
            ("", "securitygroups")
        );
        assert_eq!(split_api_path("/api/v1/namespaces/c"), ("c", "namespaces"));
        assert_eq!(split_api_path("/version"), ("", ""));
    }

    #[test]
    fn writes_are_counted_by_verb_and_leases_left_out() {
        let m = Metrics::default();
        m.api_request("GET", "/api/v1/namespaces/a/pods");
        m.api_request("PATCH", "/api/v1/namespaces/a/configmaps/x");
        m.api_request("PUT", "/apis/coordination.k8s.io/v1/namespaces/a/leases/l");
        m.api_request("DELETE", "/apis/ec2.aws.upbound.io/v1beta1/vpcs/v");
        assert_eq!(m.writes(), 2);
        assert_eq!(m.writes_in_namespace("a"), 2);
        assert_eq!(m.writes_in_namespace(""), 1);
        assert!(
            m.render().contains(
                "gatewright_api_requests_total{verb=\"PATCH\",resource=\"configmaps\"} 1"
            )
        );
    }
}
