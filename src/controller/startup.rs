//! Start-up that never gives up on a transient error.
//!
//! In a real cluster the controller's Deployment and its RBAC arrive together (Helm,
//! kustomize, a GitOps sync), the API server's authorizer sees a new RoleBinding a moment
//! later, a CRD may be installed after the controller, and the API server itself may be
//! restarting. Every start-up step that talks to the API server (leader election, the
//! first list of each watch, the discovery of a child kind) therefore retries what can
//! fix itself, with capped and jittered backoff:
//!
//! - 401 and 403 (RBAC or a token not seen yet), 404 (a CRD being installed), 409, 429,
//!   5xx, connection errors and timeouts: [`is_transient`];
//! - while a step fails it is pending ([`crate::health::Steps`]): `/readyz` answers 503
//!   and names it with its last error, `gatewright_startup_errors{step,reason}` counts each
//!   failure, and the log says so once per kind of failure, not once per try;
//! - what cannot fix itself (an invalid Lease name, say: 400 or 422) stops the controller,
//!   so `gatewright run` exits with status 1 and the reason.
//!
//! Flows in: errors of start-up requests. Flows out: failure kinds and delays.

use std::time::{Duration, Instant};

/// The first delay after a failure.
pub const BACKOFF_BASE: Duration = Duration::from_millis(500);
/// The longest delay between two tries.
pub const BACKOFF_CAP: Duration = Duration::from_secs(10);

/// One word for a failure, used as metric label and in logs: `Unauthorized`, `Forbidden`,
/// `NotFound`, `Conflict`, `TooManyRequests`, `ServerError`, `Invalid`, `Unreachable`
/// (no answer: connection refused or reset, a deadline) or `Other`.
#[must_use]
pub fn failure_kind(e: &kube::Error) -> &'static str {
    match e {
        kube::Error::Api(s) => match s.code {
            401 => "Unauthorized",
            403 => "Forbidden",
            404 => "NotFound",
            409 => "Conflict",
            429 => "TooManyRequests",
            400 | 422 => "Invalid",
            c if c >= 500 => "ServerError",
            _ => "Other",
        },
        kube::Error::Discovery(_) => "NotFound",
        kube::Error::HyperError(_) | kube::Error::Service(_) | kube::Error::ReadEvents(_) => {
            "Unreachable"
        }
        _ => "Other",
    }
}

/// [`failure_kind`] of a watch's error.
#[must_use]
pub fn watch_failure_kind(e: &kube::runtime::watcher::Error) -> &'static str {
    use kube::runtime::watcher::Error as W;
    match e {
        W::InitialListFailed(e) | W::WatchStartFailed(e) | W::WatchFailed(e) => failure_kind(e),
        W::WatchError(s) => failure_kind(&kube::Error::Api(s.clone())),
        W::NoResourceVersion => "Other",
    }
}

/// Whether a start-up step failing with `e` may succeed later on its own. Everything but
/// a request the API server judged malformed (`Invalid`) or a client that cannot be built.
#[must_use]
pub fn is_transient(e: &kube::Error) -> bool {
    match e {
        kube::Error::Api(s) => !matches!(s.code, 400 | 422),
        kube::Error::BuildRequest(_)
        | kube::Error::InferConfig(_)
        | kube::Error::InferKubeconfig(_)
        | kube::Error::TlsRequired
        | kube::Error::ProxyProtocolUnsupported { .. }
        | kube::Error::ProxyProtocolDisabled { .. } => false,
        _ => true,
    }
}

/// The delay before try `attempt + 1` (`attempt` = failures so far, from 1): exponential
/// from [`BACKOFF_BASE`] up to [`BACKOFF_CAP`], half fixed and half random.
#[must_use]
pub fn delay(attempt: u32, jitter: f64) -> Duration {
    super::client::retry_delay(
        attempt.saturating_sub(1),
        BACKOFF_BASE,
        BACKOFF_CAP,
        None,
        jitter,
    )
}

/// Retries of a discovery lookup (a kind looked up before it is watched): a failure that
/// says nothing about the kind (discovery refused, the API server restarting: anything but
/// `NotFound`) is waited out with [`delay`] per failure in a row, and said once per reason.
#[derive(Debug, Default)]
pub(super) struct LookupRetry {
    failures: u32,
    last: Option<&'static str>,
}

impl LookupRetry {
    /// After lookup error `e`: when it is not `NotFound`, calls `failed` (its reason, the
    /// delay, whether the reason is new since the last failure), waits the delay and
    /// returns `true` (look again). `NotFound` (the kind is not served) starts the count
    /// again and returns `false`.
    pub(super) async fn wait_if_transient(
        &mut self,
        e: &kube::Error,
        failed: impl FnOnce(&'static str, Duration, bool),
    ) -> bool {
        let reason = failure_kind(e);
        if reason == "NotFound" {
            *self = Self::default();
            return false;
        }
        self.failures = self.failures.saturating_add(1);
        let delay = delay(self.failures, super::client::jitter());
        failed(reason, delay, self.last != Some(reason));
        self.last = Some(reason);
        tokio::time::sleep(delay).await;
        true
    }
}

/// Backoff of a watch: [`delay`] per consecutive failure. kube's watcher resets it on
/// every event it delivers; a reset counts only once a minute has passed since the last
/// failure, so a watch that lists and then fails at once still backs off.
#[derive(Debug)]
pub struct WatchBackoff {
    failures: u32,
    last_failure: Option<Instant>,
}

impl WatchBackoff {
    /// How long a watch must have gone without failing before its backoff starts over.
    pub const QUIET: Duration = Duration::from_secs(60);
    /// A fresh backoff.
    #[must_use]
    pub fn new() -> Self {
        Self {
            failures: 0,
            last_failure: None,
        }
    }
}

impl Default for WatchBackoff {
    fn default() -> Self {
        Self::new()
    }
}

impl Iterator for WatchBackoff {
    type Item = Duration;
    fn next(&mut self) -> Option<Duration> {
        self.failures = self.failures.saturating_add(1);
        self.last_failure = Some(Instant::now());
        Some(delay(self.failures, super::client::jitter()))
    }
}

impl kube::runtime::utils::Backoff for WatchBackoff {
    fn reset(&mut self) {
        if self.last_failure.is_none_or(|t| t.elapsed() >= Self::QUIET) {
            self.failures = 0;
        }
    }
}

/// Which watches of one cluster fail, by kind of failure (`Unreachable`, `Forbidden`,
/// ...), so that a member whose API server is down, which fails every watch at once, is
/// said once per kind of failure, not once per watch, and once more when that kind of
/// failure is over (its last watch works again). Pure bookkeeping.
#[derive(Default)]
pub(super) struct FailureLog(
    std::sync::Mutex<std::collections::BTreeMap<&'static str, std::collections::BTreeSet<String>>>,
);

impl FailureLog {
    /// `watch` failed with `kind` (a watch fails one way at a time): true when no other
    /// watch was failing so, and it is to be said.
    pub(super) fn failed(&self, watch: &str, kind: &'static str) -> bool {
        let Ok(mut f) = self.0.lock() else {
            return true;
        };
        for (k, set) in f.iter_mut() {
            if *k != kind {
                set.remove(watch);
            }
        }
        f.retain(|_, set| !set.is_empty());
        let set = f.entry(kind).or_default();
        let first = set.is_empty();
        set.insert(watch.to_owned());
        first
    }

    /// `watch` works (or is stopped): the kinds of failure no watch has any more, to be
    /// said over.
    pub(super) fn works(&self, watch: &str) -> Vec<&'static str> {
        let Ok(mut f) = self.0.lock() else {
            return Vec::new();
        };
        let mut over = Vec::new();
        for (k, set) in f.iter_mut() {
            if set.remove(watch) && set.is_empty() {
                over.push(*k);
            }
        }
        f.retain(|_, set| !set.is_empty());
        over
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api(code: u16) -> kube::Error {
        kube::Error::Api(Box::new(kube::core::Status {
            code,
            message: format!("code {code}"),
            ..Default::default()
        }))
    }

    #[tokio::test]
    async fn a_lookup_is_retried_until_the_kind_is_said_not_served_and_each_reason_said_once() {
        let mut retry = LookupRetry::default();
        let mut seen = Vec::new();
        // Two failures in a row of one reason: said when the reason is new.
        for code in [503, 503] {
            let started = Instant::now();
            assert!(
                retry
                    .wait_if_transient(&api(code), |reason, delay, new| seen
                        .push((reason, delay, new)))
                    .await
            );
            // It waited the delay it said.
            assert!(started.elapsed() >= seen.last().unwrap().1);
        }
        let said: Vec<(&str, bool)> = seen.iter().map(|(r, _, n)| (*r, *n)).collect();
        assert_eq!(said, [("ServerError", true), ("ServerError", false)]);
        // The delay grows per failure in a row (half fixed: at least 250 ms, then 500 ms).
        assert!(seen[1].1 >= BACKOFF_BASE && seen[0].1 <= BACKOFF_BASE);
        // Not served: no wait, and the count starts again (the next failure is new).
        assert!(
            !retry
                .wait_if_transient(&api(404), |_, _, _| panic!("not a transient failure"))
                .await
        );
        let mut again = None;
        let started = Instant::now();
        assert!(
            retry
                .wait_if_transient(&api(403), |r, d, n| again = Some((r, d, n)))
                .await
        );
        let (reason, delay, new) = again.unwrap();
        assert_eq!((reason, new), ("Forbidden", true));
        assert!(delay <= BACKOFF_BASE && started.elapsed() >= delay);
    }

    #[test]
    fn failures_are_named_and_judged() {
        for (code, kind, transient) in [
            (401, "Unauthorized", true),
            (403, "Forbidden", true),
            (404, "NotFound", true),
            (409, "Conflict", true),
            (429, "TooManyRequests", true),
            (500, "ServerError", true),
            (503, "ServerError", true),
            (400, "Invalid", false),
            (422, "Invalid", false),
        ] {
            assert_eq!(failure_kind(&api(code)), kind, "{code}");
            assert_eq!(is_transient(&api(code)), transient, "{code}");
        }
        let gone = kube::Error::Service("connection refused".into());
        assert_eq!(failure_kind(&gone), "Unreachable");
        assert!(is_transient(&gone));
        let missing = kube::Error::Discovery(kube::error::DiscoveryError::MissingKind("X".into()));
        assert_eq!(failure_kind(&missing), "NotFound");
        let w = kube::runtime::watcher::Error::InitialListFailed(api(403));
        assert_eq!(watch_failure_kind(&w), "Forbidden");
    }

    #[test]
    fn backoff_grows_to_its_cap_with_jitter() {
        assert_eq!(delay(1, 0.0), BACKOFF_BASE / 2);
        assert_eq!(delay(1, 1.0), BACKOFF_BASE);
        assert_eq!(delay(2, 1.0), BACKOFF_BASE * 2);
        assert_eq!(delay(40, 1.0), BACKOFF_CAP);
        assert_eq!(delay(40, 0.0), BACKOFF_CAP / 2);
        let mut b = WatchBackoff::new();
        let first = b.next().unwrap_or_default();
        let later: Vec<Duration> = (0..10).filter_map(|_| b.next()).collect();
        assert!(first <= BACKOFF_BASE);
        assert!(later.iter().all(|d| *d <= BACKOFF_CAP));
        assert!(later.last().is_some_and(|d| *d >= BACKOFF_CAP / 2));
        // A reset right after a failure does not start over (a watch that lists and
        // fails at once keeps backing off).
        kube::runtime::utils::Backoff::reset(&mut b);
        assert!(b.next().is_some_and(|d| d >= BACKOFF_CAP / 2));
    }

    #[test]
    fn failures_are_said_once_per_kind_until_every_watch_works_again() {
        let log = FailureLog::default();
        // The member's API server goes down: every watch fails, said once.
        assert!(log.failed("watch Gateway", "Unreachable"));
        assert!(!log.failed("watch GatewayClass", "Unreachable"));
        assert!(!log.failed("watch Gateway", "Unreachable"));
        // Another kind of failure is said too.
        assert!(log.failed("watch ListenerSet", "Forbidden"));
        // Back: said over once its last watch works.
        assert!(log.works("watch Gateway").is_empty());
        assert_eq!(log.works("watch GatewayClass"), vec!["Unreachable"]);
        assert!(log.works("watch GatewayClass").is_empty());
        // Down again: said again.
        assert!(log.failed("watch Gateway", "Unreachable"));
        // A watch that fails another way no longer counts for the first.
        assert!(!log.failed("watch Gateway", "Forbidden"));
        assert_eq!(log.works("watch ListenerSet"), Vec::<&str>::new());
        assert_eq!(log.works("watch Gateway"), vec!["Forbidden"]);
        assert!(log.failed("watch Gateway", "Unreachable"));
    }
}
