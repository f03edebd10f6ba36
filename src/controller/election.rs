//! Leader election: this start's identity in Leases, joining the election on the Lease
//! (a start-up step, retried while it fails transiently), and what gaining and losing it
//! does to the [`Runner`] (everything planned again; the controller stopped, its writes
//! fenced).

use std::sync::Arc;

use kube::Client;

use super::client::{self, LeaseFence};
use super::common::Stop;
use super::startup;
use crate::telemetry::Metrics;

/// What the election needs of the process it runs in ([`super::runner::Runner`]): its
/// metrics, its stop signal, its write fence, and what gaining the lease does.
pub(super) trait Elects: Send + Sync + 'static {
    /// The metrics (the start-up step, whether this replica leads).
    fn metrics(&self) -> &Arc<Metrics>;
    /// The stop signal: set once the controller stops.
    fn stop_signal(&self) -> &tokio::sync::watch::Sender<Option<Stop>>;
    /// Writes are sent only while the Lease is fresh.
    fn fence(&self) -> Option<&Arc<LeaseFence>>;
    /// Stops the controller, saying why.
    fn stop_with(&self, why: Stop);
    /// Plans everything again (the lease was gained).
    fn enqueue_all(&self);
    /// A task a shutdown waits for.
    fn keep_task(&self, task: tokio::task::JoinHandle<()>);
}

/// Resolves once a stop is asked for.
pub(super) async fn stop_asked(rx: &mut tokio::sync::watch::Receiver<Option<Stop>>) {
    while rx.borrow_and_update().is_none() {
        if rx.changed().await.is_err() {
            return;
        }
    }
}

/// Seconds before the Lease's expiry at which this replica stops writing, counted from the
/// moment its last successful renewal was sent.
pub(super) const LEASE_FENCE_MARGIN_SECONDS: u64 = 3;

/// Unique per start, as client-go does (host_uuid): a restarted replica with the same Pod
/// name must not take over a lease its previous self may still be writing under.
pub(super) fn lease_identity() -> String {
    let nonce = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    identity_of(std::env::var("POD_NAME").ok(), std::process::id(), nonce)
}

/// [`lease_identity`] from the Pod's name (else the process id) and a nonce.
fn identity_of(pod: Option<String>, pid: u32, nonce: u128) -> String {
    format!(
        "{}_{nonce:x}",
        pod.unwrap_or_else(|| format!("gatewright-{pid}"))
    )
}

/// Joins leader election on Lease `ns/name`. Returns a channel that is true while this
/// process holds the lease. Setting it up (reading or creating the Lease) is a start-up
/// step ([`startup`]): a transient failure (403 while RBAC propagates, the API server
/// restarting) is retried with backoff while `/readyz` says why; a failure that cannot
/// fix itself (an invalid Lease name) stops the controller. Gaining the lease re-plans
/// everything; losing it, or the election task ending, stops the controller
/// ([`Runner::stopped`]; a fresh start rebuilds the caches and rejoins). On shutdown
/// the Lease is released.
pub(super) fn elect<R: Elects>(
    runner: &Arc<R>,
    client: Client,
    ns: String,
    name: String,
    identity: String,
) -> tokio::sync::watch::Receiver<bool> {
    let (holder_tx, holder_rx) = tokio::sync::watch::channel(false);
    let step = format!("leader election on Lease {ns}/{name}");
    runner.metrics().startup.begin(&step);
    let me = runner.clone();
    let handle = tokio::spawn(async move {
        let mut stopping = me.stop_signal().subscribe();
        let manager = tokio::select! {
            biased;
            () = stop_asked(&mut stopping) => None,
            m = lease_manager(&me, client, &step, &ns, &name, &identity) => m,
        };
        let Some(manager) = manager else {
            return;
        };
        tracing::info!(lease = %format!("{ns}/{name}"), "waiting for the lease");
        let (mut rx, task) = manager.watch().await;
        let mut task = std::pin::pin!(task);
        let mut was = false;
        loop {
            tokio::select! {
                biased;
                () = stop_asked(&mut stopping) => break,
                res = &mut task => {
                    if let Some(f) = me.fence() {
                        f.close();
                    }
                    tracing::error!(?res, "leader election task ended; stopping");
                    me.stop_with(Stop::Failed("leader election ended".into()));
                    return;
                }
                r = rx.changed() => if r.is_err() { break },
            }
            let now = *rx.borrow_and_update();
            me.metrics()
                .leader
                .store(now, std::sync::atomic::Ordering::Relaxed);
            holder_tx.send_replace(now);
            if now && !was {
                tracing::info!(%identity, "acquired the lease; writing from now on");
                me.enqueue_all();
            } else if was && !now {
                tracing::error!(%identity, "lost the lease; stopping");
                if let Some(f) = me.fence() {
                    f.close();
                }
                me.stop_with(Stop::Failed("lost the Lease".into()));
                break;
            }
            was = now;
        }
        // Stopping: dropping the receiver makes the manager release the Lease and end.
        if let Some(f) = me.fence() {
            f.close();
        }
        drop(rx);
        let _ = task.await;
        tracing::info!("left leader election");
    });
    runner.keep_task(handle);
    holder_rx
}

/// Builds the lease manager (it reads the Lease, or creates it), retrying transient
/// failures with capped, jittered backoff. `None`: a failure that cannot fix itself (the
/// controller is stopped with it).
async fn lease_manager<R: Elects>(
    runner: &Arc<R>,
    client: Client,
    step: &str,
    ns: &str,
    name: &str,
    identity: &str,
) -> Option<kube_lease_manager::LeaseManager> {
    let mut attempt = 0u32;
    loop {
        let built = kube_lease_manager::LeaseManagerBuilder::new(client.clone(), name)
            .with_namespace(ns)
            .with_identity(identity)
            // One manager per replica, not the shared one: the crate's take-over of an
            // orphaned Lease relies on a server-side apply conflicting between replicas.
            .with_field_manager(format!("{}/{identity}", crate::identity::FIELD_MANAGER))
            .with_duration(15)
            .with_grace(5)
            .build()
            .await;
        let err = match built {
            Ok(m) => {
                let failures = runner.metrics().startup.succeeded(step);
                if failures > 0 {
                    tracing::info!(%step, failures, "set up after failing; joined leader election");
                }
                return Some(m);
            }
            Err(e) => e,
        };
        let (reason, transient) = match &err {
            kube_lease_manager::LeaseManagerError::KubeError(e) => {
                (startup::failure_kind(e), startup::is_transient(e))
            }
            // Another replica created the Lease between our read and our create.
            kube_lease_manager::LeaseManagerError::LeaseAlreadyExists(_) => ("Conflict", true),
            _ => ("Other", true),
        };
        let message = format!("failed to set up {step}: {err}");
        if !transient {
            tracing::error!(%step, %reason, "{message}; this will not fix itself, stopping");
            runner.stop_with(Stop::Failed(message));
            return None;
        }
        attempt = attempt.saturating_add(1);
        let delay = startup::delay(attempt, client::jitter());
        if runner.metrics().startup.failed(step, reason, &message) {
            tracing::warn!(%step, %reason, retry_in = ?delay, "{message}; retrying until it works");
        }
        tokio::time::sleep(delay).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lease_identity_names_the_pod_else_the_process_and_differs_per_start() {
        assert_eq!(identity_of(Some("gw-0".into()), 7, 255), "gw-0_ff");
        assert_eq!(identity_of(None, 7, 255), "gatewright-7_ff");
        assert_ne!(
            identity_of(Some("gw-0".into()), 7, 1),
            identity_of(Some("gw-0".into()), 7, 2)
        );
    }
}
