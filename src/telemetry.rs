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
    /// Set once every watch has listed its objects.
    pub ready: AtomicBool,
}

impl Metrics {
    /// Counts a reconcile of `kind` that ended in `category` (`Ok` or an error category).
    pub fn reconciled(&self, kind: &str, category: &str) {
        if let Ok(mut m) = self.reconciles.lock() {
            *m.entry((kind.to_owned(), category.to_owned())).or_default() += 1;
        }
    }

    /// Writes (applies, deletes, status writes) sent so far.
    #[must_use]
    pub fn writes(&self) -> u64 {
        self.applies.load(Ordering::Relaxed)
            + self.prunes.load(Ordering::Relaxed)
            + self.status_writes.load(Ordering::Relaxed)
    }

    /// The Prometheus text exposition.
    #[must_use]
    pub fn render(&self) -> String {
        use std::fmt::Write as _;
        let mut out = String::new();
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
