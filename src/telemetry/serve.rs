//! The HTTP server of the metrics address: `/metrics`, `/healthz` and `/readyz`
//! (HTTP/1.1, hyper), and binding its address.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use super::{CONTENT_TYPE, Error, Metrics};

/// The answer to one request on the metrics address.
fn respond(metrics: &Metrics, method: &http::Method, path: &str) -> http::Response<String> {
    let (status, content_type, body) =
        if method != http::Method::GET && method != http::Method::HEAD {
            (
                http::StatusCode::METHOD_NOT_ALLOWED,
                "text/plain",
                "method not allowed\n".to_owned(),
            )
        } else {
            match path {
                "/metrics" => (http::StatusCode::OK, CONTENT_TYPE, metrics.render()),
                "/healthz" => (http::StatusCode::OK, "text/plain", "ok\n".to_owned()),
                "/readyz" => readiness(metrics),
                _ => (
                    http::StatusCode::NOT_FOUND,
                    "text/plain",
                    "not found\n".to_owned(),
                ),
            }
        };
    let mut resp = http::Response::new(body);
    *resp.status_mut() = status;
    resp.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static(content_type),
    );
    resp
}

/// `/readyz`: 200 once every start-up step succeeded and every primary watch has listed;
/// otherwise 503 with one line per step still waiting (and its last failure).
fn readiness(metrics: &Metrics) -> (http::StatusCode, &'static str, String) {
    let synced = metrics.ready.load(Ordering::Relaxed);
    if synced && metrics.startup.done() {
        return (http::StatusCode::OK, "text/plain", "ok\n".to_owned());
    }
    let mut body = String::from("not ready:\n");
    body.push_str(&metrics.startup.describe());
    if !synced {
        body.push_str("caches not synced\n");
    }
    (http::StatusCode::SERVICE_UNAVAILABLE, "text/plain", body)
}

/// Binds the metrics and health address (`host:port`; port 0 picks a free one).
///
/// # Errors
/// The address cannot be bound.
pub async fn bind(addr: &str) -> Result<tokio::net::TcpListener, Error> {
    tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|source| Error::Bind {
            addr: addr.to_owned(),
            source,
        })
}

/// Serves `/metrics`, `/healthz` and `/readyz` on `listener` (HTTP/1.1) until the process
/// ends. A connection that does not send its request headers within 10 s is closed. The
/// address is known ([`Metrics::served_at`]) as soon as this is called, before the
/// returned future first runs.
pub fn serve(
    listener: tokio::net::TcpListener,
    metrics: Arc<Metrics>,
) -> impl Future<Output = ()> + Send + 'static {
    if let Ok(addr) = listener.local_addr() {
        tracing::info!(%addr, "serving metrics and health");
        let _ = metrics.served_at.set(addr);
    }
    accept_loop(listener, metrics)
}

async fn accept_loop(listener: tokio::net::TcpListener, metrics: Arc<Metrics>) {
    loop {
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(e) => {
                // Out of file descriptors, say: wait instead of spinning.
                tracing::warn!(error = %e, "failed to accept a metrics connection");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let metrics = metrics.clone();
        tokio::spawn(async move {
            let svc =
                hyper::service::service_fn(move |req: http::Request<hyper::body::Incoming>| {
                    let resp = respond(&metrics, req.method(), req.uri().path());
                    async move { Ok::<_, std::convert::Infallible>(resp) }
                });
            let conn = hyper::server::conn::http1::Builder::new()
                .timer(hyper_util::rt::TokioTimer::new())
                .header_read_timeout(Duration::from_secs(10))
                .serve_connection(hyper_util::rt::TokioIo::new(stream), svc);
            if let Err(e) = conn.await {
                tracing::debug!(error = %e, "metrics connection ended with an error");
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::Ordering;

    use super::{Metrics, bind, serve};

    #[tokio::test]
    async fn serves_metrics_health_and_readiness_over_http() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let m = Arc::new(Metrics::default());
        let listener = bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        tokio::spawn(serve(listener, m.clone()));
        let get = |path: &'static str| async move {
            let mut s = tokio::net::TcpStream::connect(addr).await.expect("connect");
            s.write_all(
                format!("GET {path} HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n").as_bytes(),
            )
            .await
            .expect("write");
            let mut out = String::new();
            s.read_to_string(&mut out).await.expect("read");
            out
        };
        assert!(get("/healthz").await.starts_with("HTTP/1.1 200"));
        assert!(get("/readyz").await.starts_with("HTTP/1.1 503"));
        // A start-up step failing keeps it not ready, and says why.
        m.startup.begin("leader election on Lease ns/l");
        m.startup.failed(
            "leader election on Lease ns/l",
            "Forbidden",
            "leases is forbidden",
        );
        m.ready.store(true, Ordering::Relaxed);
        let r = get("/readyz").await;
        assert!(r.starts_with("HTTP/1.1 503"), "{r}");
        assert!(
            r.contains("leader election on Lease ns/l: Forbidden (1 failures, retrying): leases is forbidden"),
            "{r}"
        );
        let metrics = get("/metrics").await;
        assert!(
            metrics.contains("gatewright_startup_errors_total{step=\"leader election on Lease ns/l\",reason=\"Forbidden\"} 1"),
            "{metrics}"
        );
        assert!(
            metrics.contains("\ngatewright_startup_steps_pending 1\n"),
            "{metrics}"
        );
        m.startup.succeeded("leader election on Lease ns/l");
        assert!(get("/readyz").await.starts_with("HTTP/1.1 200"));
        assert!(get("/nope").await.starts_with("HTTP/1.1 404"));
        let metrics = get("/metrics").await;
        assert!(metrics.starts_with("HTTP/1.1 200"), "{metrics}");
        assert!(metrics.contains("content-type: text/plain; version=0.0.4"));
        assert!(metrics.contains("\ngatewright_caches_synced 1\n"));
        // A second bind of the same address is a clear error.
        let err = bind(&addr.to_string()).await.expect_err("in use");
        assert!(err.to_string().contains(&addr.to_string()), "{err}");
    }
}
