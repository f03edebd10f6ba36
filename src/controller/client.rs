//! The controller's API client: every request it sends has a deadline, transient failures
//! are retried with jittered exponential backoff, and, under leader election, writes are
//! fenced by the Lease.
//!
//! - **Deadline.** Each attempt of a request (connect, send, the answer's headers and, for
//!   everything but a watch, the whole body) must finish within
//!   [`Resilience::request_timeout`]. A watch gets the deadline for its headers only; its
//!   stream is guarded by kube's watcher idle timeout (the server-side `timeoutSeconds`
//!   plus a margin), after which the watcher lists again.
//! - **Retries.** A 429 is retried for every method, after at least the `Retry-After` the
//!   server asked for (the server did not process it). A 500/502/503/504, a connection
//!   error or a missed deadline is retried for every method but `POST` (a create may have
//!   landed; a repeated apply, patch, update, delete or read is harmless). Delays grow
//!   exponentially from [`Resilience::backoff_base`] up to [`Resilience::backoff_cap`],
//!   with "equal jitter" (half fixed, half random) so that replicas and keys spread out;
//!   after [`Resilience::max_attempts`] the last answer or error goes to the caller.
//! - **Fence.** With a [`LeaseFence`], a write other than to the Lease itself is refused
//!   (an error, nothing sent) unless our own last successful Lease write made us the
//!   holder and less than the lease duration minus a margin has passed since that write
//!   was *sent*. A replica cut off from the API server therefore stops writing before
//!   another replica can consider the Lease expired and take it over.
//!
//! Requests in and out: `http::Request<kube::client::Body>` to a wrapped [`kube::Client`].

use std::cell::Cell;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use http::{Method, Request, Response, StatusCode};
use kube::client::Body;

pub use crate::identity::FIELD_MANAGER;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Errors the client layer itself produces (the API server's own answers pass through).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// No answer within the deadline, after every attempt.
    #[error("failed to get an answer to {method} {path} within {timeout:?} ({attempts} attempts)")]
    Timeout {
        /// HTTP method.
        method: Method,
        /// Request path.
        path: String,
        /// The per-attempt deadline.
        timeout: Duration,
        /// Attempts made.
        attempts: u32,
    },
    /// A write refused locally because this replica does not hold a fresh Lease.
    #[error(
        "failed to send {method} {path}: this replica's Lease is not renewed (writes are fenced until it is)"
    )]
    Fenced {
        /// HTTP method.
        method: Method,
        /// Request path.
        path: String,
    },
}

/// Deadlines and retry policy of the controller's API requests.
#[derive(Clone, Debug)]
pub struct Resilience {
    /// Deadline of one attempt (headers and, except for a watch, the whole body).
    pub request_timeout: Duration,
    /// Attempts per request, the first included.
    pub max_attempts: u32,
    /// First retry delay (before jitter).
    pub backoff_base: Duration,
    /// Longest retry delay, `Retry-After` included.
    pub backoff_cap: Duration,
}

impl Default for Resilience {
    fn default() -> Self {
        Self {
            request_timeout: Duration::from_secs(30),
            max_attempts: 4,
            backoff_base: Duration::from_millis(200),
            backoff_cap: Duration::from_secs(10),
        }
    }
}

/// The delay before retry number `attempt` (0 for the first retry): exponential from
/// `base`, capped at `cap`, with equal jitter (`jitter` in `[0, 1)` picks a point in the
/// upper half), and never shorter than the server's `retry_after` (itself capped at `cap`).
#[must_use]
pub fn retry_delay(
    attempt: u32,
    base: Duration,
    cap: Duration,
    retry_after: Option<Duration>,
    jitter: f64,
) -> Duration {
    let exp = base
        .checked_mul(1u32.checked_shl(attempt.min(31)).unwrap_or(u32::MAX))
        .unwrap_or(cap)
        .min(cap);
    let half = exp / 2;
    let jittered = half + half.mul_f64(jitter.clamp(0.0, 1.0));
    jittered.max(retry_after.map_or(Duration::ZERO, |r| r.min(cap)))
}

/// `Retry-After` as seconds (the form the API server sends); an HTTP date is ignored.
#[must_use]
pub fn parse_retry_after(value: &str) -> Option<Duration> {
    value.trim().parse::<u64>().ok().map(Duration::from_secs)
}

/// Whether an answer with `status` to a request with `method` is worth another attempt.
#[must_use]
pub fn retryable_status(method: &Method, status: StatusCode) -> bool {
    match status.as_u16() {
        429 => true,
        500 | 502 | 503 | 504 => *method != Method::POST,
        _ => false,
    }
}

/// Whether the request is a watch (a long-lived stream).
fn is_watch(req: &Request<Body>) -> bool {
    req.uri()
        .query()
        .is_some_and(|q| q.split('&').any(|p| p == "watch=true" || p == "watch=1"))
}

fn is_write(method: &Method) -> bool {
    matches!(
        *method,
        Method::POST | Method::PUT | Method::PATCH | Method::DELETE
    )
}

/// A number in `[0, 1)`, different on each call (jitter needs no strong randomness).
pub(crate) fn jitter() -> f64 {
    static STATE: AtomicU64 = AtomicU64::new(0);
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos().into());
    let mut x = STATE
        .fetch_add(0x9E37_79B9_7F4A_7C15, Ordering::Relaxed)
        .wrapping_add(seed)
        | 1;
    // xorshift64*
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    let r = x.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11;
    #[allow(clippy::cast_precision_loss, reason = "53 bits fit an f64 exactly")]
    let f = r as f64 / (1u64 << 53) as f64;
    f
}

/// Write fencing by the Lease of leader election (see the module docs).
#[derive(Debug)]
pub struct LeaseFence {
    /// `/namespaces/<ns>/leases`: Lease requests (creation included) are never fenced.
    /// `None` for a fence on a Lease another cluster holds (a fleet member's, in the hub):
    /// every write through the fenced client is fenced.
    leases: Option<String>,
    name: String,
    identity: String,
    /// Subtracted from the lease duration: clock rate differences and request latency.
    margin: Duration,
    valid_until: Mutex<Option<Instant>>,
}

impl LeaseFence {
    /// A fence on Lease `namespace/name` held under `identity`; closed until a write of
    /// ours to the Lease shows us as its holder.
    #[must_use]
    pub fn new(namespace: &str, name: &str, identity: &str, margin: Duration) -> Self {
        Self {
            leases: Some(format!("/namespaces/{namespace}/leases")),
            name: name.to_owned(),
            identity: identity.to_owned(),
            margin,
            valid_until: Mutex::new(None),
        }
    }

    /// Whether a write may be sent at `now`.
    #[must_use]
    pub fn open_at(&self, now: Instant) -> bool {
        self.valid_until
            .lock()
            .ok()
            .and_then(|v| *v)
            .is_some_and(|until| now < until)
    }

    /// Closes the fence (the Lease was lost or released).
    pub fn close(&self) {
        if let Ok(mut v) = self.valid_until.lock() {
            *v = None;
        }
    }

    /// A fence on Lease `name` of another cluster (a fleet member's Lease in the hub),
    /// renewed by someone else who tells it through [`LeaseFence::observe`]: every write of
    /// the client it fences is fenced, Leases too.
    #[must_use]
    pub fn elsewhere(name: &str, identity: &str, margin: Duration) -> Self {
        Self {
            leases: None,
            name: name.to_owned(),
            identity: identity.to_owned(),
            margin,
            valid_until: Mutex::new(None),
        }
    }

    fn is_lease(&self, path: &str) -> bool {
        self.leases.as_deref().is_some_and(|leases| {
            path.strip_suffix(&format!("/{}", self.name))
                .unwrap_or(path)
                .ends_with(leases)
        })
    }

    /// Takes note of the Lease as a successful write sent at `sent` returned it.
    pub fn observe(&self, sent: Instant, lease: &serde_json::Value) {
        if lease["metadata"]["name"].as_str() != Some(self.name.as_str()) {
            return;
        }
        let spec = &lease["spec"];
        let ours = spec["holderIdentity"].as_str() == Some(self.identity.as_str());
        let duration = spec["leaseDurationSeconds"]
            .as_u64()
            .map(Duration::from_secs)
            .unwrap_or_default();
        if let Ok(mut v) = self.valid_until.lock() {
            *v = (ours && duration > self.margin).then(|| sent + (duration - self.margin));
        }
    }
}

/// The whole client stack of one cluster, built in one place. Outermost first: who sends
/// each request (its field manager, and `agent` as its user agent,
/// [`crate::identity::attributed`]); deadlines,
/// retries with Retry-After and (with `fence`) write fencing ([`resilient_client`]); the
/// count of write requests per reconcile ([`count_writes`]); the request metrics. Each
/// attempt is counted, in the reconcile's own task too (the retry layer sits outside the
/// counting ones).
#[must_use]
pub fn stack(
    client: kube::Client,
    metrics: &std::sync::Arc<crate::telemetry::Metrics>,
    policy: Resilience,
    fence: Option<std::sync::Arc<LeaseFence>>,
    agent: &str,
) -> kube::Client {
    let counted = write_counting_client(crate::telemetry::counting_client(client, metrics.clone()));
    crate::identity::attributed(resilient_client(counted, policy, fence), agent)
}

tokio::task_local! {
    /// Write requests sent by the reconcile running in this task.
    static WRITES: Cell<u64>;
}

/// Runs `f`, counting the write requests (POST, PUT, PATCH, DELETE; Leases left out)
/// it sends through a client made by [`write_counting_client`].
pub(crate) async fn count_writes<T>(f: impl Future<Output = T>) -> (T, u64) {
    WRITES
        .scope(Cell::new(0), async {
            let r = f.await;
            (r, WRITES.with(Cell::get))
        })
        .await
}

/// `client`, counting every write request in the task that sends it ([`count_writes`]).
/// The count is taken where the response is awaited, which is the caller's task (the
/// client's buffer hands the response future back to it).
pub(crate) fn write_counting_client(client: kube::Client) -> kube::Client {
    let ns = client.default_namespace().to_owned();
    let svc = tower::service_fn(move |req: http::Request<kube::client::Body>| {
        let write = matches!(req.method().as_str(), "POST" | "PUT" | "PATCH" | "DELETE")
            && !req.uri().path().contains("/leases");
        let client = client.clone();
        async move {
            if write {
                let _ = WRITES.try_with(|c| c.set(c.get() + 1));
            }
            client.send(req).await
        }
    });
    kube::Client::new(svc, ns)
}

/// Wraps `client`: deadlines, retries and (with `fence`) write fencing for every request.
#[must_use]
pub fn resilient_client(
    client: kube::Client,
    policy: Resilience,
    fence: Option<std::sync::Arc<LeaseFence>>,
) -> kube::Client {
    let ns = client.default_namespace().to_owned();
    let svc = tower::service_fn(move |req: Request<Body>| {
        let client = client.clone();
        let policy = policy.clone();
        let fence = fence.clone();
        async move { send(&client, &policy, fence.as_deref(), req).await }
    });
    kube::Client::new(svc, ns)
}

/// A copy of `req` for another attempt (`None` when its body is a stream).
fn clone_request(req: &Request<Body>) -> Option<Request<Body>> {
    let body = req.body().try_clone()?;
    let mut r = Request::new(body);
    *r.method_mut() = req.method().clone();
    *r.uri_mut() = req.uri().clone();
    *r.version_mut() = req.version();
    *r.headers_mut() = req.headers().clone();
    Some(r)
}

async fn send(
    client: &kube::Client,
    policy: &Resilience,
    fence: Option<&LeaseFence>,
    req: Request<Body>,
) -> Result<Response<Body>, BoxError> {
    let method = req.method().clone();
    let path = req.uri().path().to_owned();
    let lease = fence.filter(|f| f.is_lease(&path));
    // Every attempt of a write is fenced, retries too: a retry sent after the Lease ran
    // out could land after another replica's first write.
    let fenced = |now: Instant| {
        fence.is_some_and(|f| lease.is_none() && is_write(&method) && !f.open_at(now))
    };
    let watch = is_watch(&req);
    let retry_errors = method != Method::POST;
    let mut next = Some(req);
    let mut attempt = 0u32;
    loop {
        let Some(this) = next.take() else {
            // Unreachable: every path that loops sets `next`.
            return Err(Box::new(Error::Timeout {
                method,
                path,
                timeout: policy.request_timeout,
                attempts: attempt,
            }));
        };
        let again = if attempt + 1 < policy.max_attempts {
            clone_request(&this)
        } else {
            None
        };
        let sent = Instant::now();
        if fenced(sent) {
            return Err(Box::new(Error::Fenced { method, path }));
        }
        attempt += 1;
        let res = tokio::time::timeout(policy.request_timeout, async {
            let resp = client.send(this).await?;
            if watch {
                return Ok(resp);
            }
            let (parts, body) = resp.into_parts();
            let bytes = body.collect_bytes().await?;
            if let Some(f) = lease
                && is_write(&method)
                && parts.status.is_success()
                && let Ok(v) = serde_json::from_slice::<serde_json::Value>(&bytes)
            {
                f.observe(sent, &v);
            }
            Ok::<_, kube::Error>(Response::from_parts(parts, Body::from(bytes)))
        })
        .await;
        let retry_after = match res {
            Ok(Ok(resp)) => {
                if !(retryable_status(&method, resp.status()) && again.is_some()) {
                    return Ok(resp);
                }
                resp.headers()
                    .get(http::header::RETRY_AFTER)
                    .and_then(|v| v.to_str().ok())
                    .and_then(parse_retry_after)
            }
            Ok(Err(e)) => {
                if !(retry_errors && again.is_some()) {
                    return Err(Box::new(e));
                }
                None
            }
            Err(_) => {
                if !(retry_errors && again.is_some()) {
                    return Err(Box::new(Error::Timeout {
                        method,
                        path,
                        timeout: policy.request_timeout,
                        attempts: attempt,
                    }));
                }
                None
            }
        };
        let delay = retry_delay(
            attempt - 1,
            policy.backoff_base,
            policy.backoff_cap,
            retry_after,
            jitter(),
        );
        tracing::debug!(%method, %path, attempt, ?delay, "retrying an API request");
        tokio::time::sleep(delay).await;
        next = again;
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;
    use serde_json::json;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn delays_grow_exponentially_with_jitter_up_to_the_cap() {
        let (base, cap) = (100 * MS, 1000 * MS);
        assert_eq!(retry_delay(0, base, cap, None, 0.0), 50 * MS);
        assert_eq!(retry_delay(0, base, cap, None, 0.999_999).as_millis(), 99);
        assert_eq!(retry_delay(2, base, cap, None, 0.0), 200 * MS);
        assert_eq!(retry_delay(3, base, cap, None, 1.0), 800 * MS);
        assert_eq!(retry_delay(10, base, cap, None, 1.0), cap, "capped");
        assert_eq!(
            retry_delay(40, base, cap, None, 0.0),
            500 * MS,
            "no overflow"
        );
        let spread: BTreeSet<_> = (0..20)
            .map(|_| retry_delay(3, base, cap, None, jitter()))
            .collect();
        assert!(spread.len() > 10, "jitter spreads the delays: {spread:?}");
        assert!(spread.iter().all(|d| (400 * MS..=800 * MS).contains(d)));
    }

    #[test]
    fn retry_after_is_a_floor_within_the_cap() {
        let (base, cap) = (100 * MS, Duration::from_secs(10));
        let ra = Some(Duration::from_secs(3));
        assert_eq!(retry_delay(0, base, cap, ra, 0.5), Duration::from_secs(3));
        assert_eq!(
            retry_delay(0, base, cap, Some(Duration::from_secs(3600)), 0.5),
            cap
        );
        assert_eq!(parse_retry_after(" 2 "), Some(Duration::from_secs(2)));
        assert_eq!(parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT"), None);
    }

    #[test]
    fn what_is_retried() {
        let too_many = StatusCode::TOO_MANY_REQUESTS;
        assert!(
            retryable_status(&Method::POST, too_many),
            "429: not processed"
        );
        assert!(retryable_status(
            &Method::PATCH,
            StatusCode::SERVICE_UNAVAILABLE
        ));
        assert!(retryable_status(
            &Method::GET,
            StatusCode::INTERNAL_SERVER_ERROR
        ));
        assert!(
            !retryable_status(&Method::POST, StatusCode::SERVICE_UNAVAILABLE),
            "a create may have landed"
        );
        assert!(!retryable_status(&Method::PATCH, StatusCode::CONFLICT));
        assert!(!retryable_status(&Method::GET, StatusCode::NOT_FOUND));
    }

    #[test]
    fn watches_are_told_apart() {
        let req = |uri: &str| Request::get(uri).body(Body::empty()).unwrap();
        assert!(is_watch(&req(
            "/api/v1/secrets?watch=true&resourceVersion=1"
        )));
        assert!(is_watch(&req("/api/v1/secrets?labelSelector=a&watch=1")));
        assert!(!is_watch(&req("/api/v1/secrets?limit=500")));
        assert!(!is_watch(&req("/api/v1/secrets?watchx=true")));
    }

    #[test]
    fn the_fence_opens_only_on_our_own_fresh_lease() {
        let f = LeaseFence::new("ns", "lease", "me", Duration::from_secs(3));
        let t = Instant::now();
        assert!(!f.open_at(t), "closed until we hold the lease");
        assert!(f.is_lease("/apis/coordination.k8s.io/v1/namespaces/ns/leases/lease"));
        assert!(f.is_lease("/apis/coordination.k8s.io/v1/namespaces/ns/leases"));
        assert!(!f.is_lease("/apis/coordination.k8s.io/v1/namespaces/other/leases/lease"));
        assert!(!f.is_lease("/api/v1/namespaces/ns/configmaps/lease"));
        let lease = |holder: &str| json!({"metadata": {"name": "lease"}, "spec": {"holderIdentity": holder, "leaseDurationSeconds": 15}});
        f.observe(t, &lease("me"));
        assert!(f.open_at(t + Duration::from_secs(11)));
        assert!(
            !f.open_at(t + Duration::from_secs(12)),
            "closed 3 s before the lease can expire"
        );
        f.observe(
            t,
            &json!({"metadata": {"name": "other"}, "spec": {"holderIdentity": "x"}}),
        );
        assert!(
            f.open_at(t + Duration::from_secs(1)),
            "another lease changes nothing"
        );
        f.observe(t + Duration::from_secs(1), &lease("someone-else"));
        assert!(!f.open_at(t + Duration::from_secs(2)), "taken over");
        f.observe(t, &lease("me"));
        f.close();
        assert!(!f.open_at(t));
    }

    #[tokio::test]
    async fn a_retry_after_the_fence_closed_is_not_sent() {
        // The API server answers 503 to every attempt; the fence closes after the first.
        let attempts = std::sync::Arc::new(AtomicU64::new(0));
        let inner = {
            let attempts = attempts.clone();
            kube::Client::new(
                tower::service_fn(move |_req: Request<Body>| {
                    let attempts = attempts.clone();
                    async move {
                        attempts.fetch_add(1, Ordering::SeqCst);
                        Ok::<_, std::convert::Infallible>(
                            Response::builder()
                                .status(StatusCode::SERVICE_UNAVAILABLE)
                                .body(Body::empty())
                                .unwrap(),
                        )
                    }
                }),
                "default",
            )
        };
        let fence = std::sync::Arc::new(LeaseFence::new("ns", "lease", "me", 950 * MS));
        // Ours, for 1 s minus the 950 ms margin: open for 50 ms from now.
        fence.observe(
            Instant::now(),
            &json!({"metadata": {"name": "lease"}, "spec": {"holderIdentity": "me", "leaseDurationSeconds": 1}}),
        );
        let policy = Resilience {
            request_timeout: Duration::from_secs(5),
            max_attempts: 4,
            backoff_base: 200 * MS,
            backoff_cap: 400 * MS,
        };
        let client = resilient_client(inner, policy, Some(fence));
        let req = Request::patch("/api/v1/namespaces/ns/configmaps/c")
            .body(Body::from(b"{}".to_vec()))
            .unwrap();
        let err = client.send(req).await.unwrap_err();
        assert!(err.to_string().contains("fenced"), "{err}");
        assert_eq!(
            attempts.load(Ordering::SeqCst),
            1,
            "only the attempt sent while the fence was open"
        );
    }

    #[tokio::test]
    async fn writes_are_counted_per_task() {
        let ((), n) = count_writes(async {
            let _ = WRITES.try_with(|c| c.set(c.get() + 2));
        })
        .await;
        assert_eq!(n, 2);
        // Outside a scope nothing is counted and nothing fails.
        assert!(WRITES.try_with(Cell::get).is_err());
    }
}
