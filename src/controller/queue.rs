//! The keyed work queue the workers share, and the per-reconcile write count.
//!
//! Our own, not `kube::runtime::Controller`'s scheduler: that one drives one reconciler
//! for one resource type from its own reflector stores, while our work items are four
//! kinds (Gateway, GatewayClass, route, blueprint) planned from one shared snapshot that
//! the watches fill, with parents enqueued by index lookups (a route's parents, a child's
//! Gateway, a Secret's Gateways). What we need of a scheduler is small and is all here:
//!
//! - an item waits at most once (enqueueing a waiting item does nothing);
//! - at most one worker works on an item; an item enqueued while it is worked on is
//!   queued again when that work ends (so the change that enqueued it is planned);
//! - Gateways and the other kinds take turns, so a burst of one cannot starve the other.
//!
//! Per-item backoff after a failure is the caller's (`Controller::work`): it enqueues the
//! item again after a delay that doubles with each failure in a row.

use std::cell::Cell;
use std::collections::{HashSet, VecDeque};
use std::sync::Mutex;

use super::Work;

#[derive(Default)]
struct State {
    /// Waiting Gateways, and waiting items of the other kinds, in arrival order.
    lanes: [VecDeque<Work>; 2],
    /// Which lane goes next when both have work.
    turn: usize,
    /// Every waiting item (in a lane).
    waiting: HashSet<Work>,
    /// Items a worker holds.
    running: HashSet<Work>,
    /// Running items enqueued again meanwhile.
    again: HashSet<Work>,
}

impl State {
    fn lane(w: &Work) -> usize {
        usize::from(!matches!(w, Work::Gateway(_)))
    }
    fn queue(&mut self, w: Work) {
        if self.waiting.insert(w.clone()) {
            self.lanes[Self::lane(&w)].push_back(w);
        }
    }
    fn take(&mut self) -> Option<Work> {
        for i in 0..2 {
            let lane = (self.turn + i) % 2;
            if let Some(w) = self.lanes[lane].pop_front() {
                self.turn = (lane + 1) % 2;
                self.waiting.remove(&w);
                self.running.insert(w.clone());
                return Some(w);
            }
        }
        None
    }
}

/// See the module docs.
#[derive(Default)]
pub(crate) struct Queue {
    state: Mutex<State>,
    ready: tokio::sync::Notify,
}

impl Queue {
    /// Enqueues `w` (see the module docs for what happens when it waits or runs already).
    pub(crate) fn push(&self, w: Work) {
        let Ok(mut s) = self.state.lock() else {
            return;
        };
        if s.running.contains(&w) {
            s.again.insert(w);
            return;
        }
        s.queue(w);
        drop(s);
        self.ready.notify_one();
    }

    /// The next item; the caller works on it, then calls [`Queue::done`].
    pub(crate) async fn pop(&self) -> Work {
        loop {
            let notified = self.ready.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if let Some(w) = self.state.lock().ok().and_then(|mut s| s.take()) {
                // Others may be waiting for what is left.
                if self.waiting() > 0 {
                    self.ready.notify_one();
                }
                return w;
            }
            notified.await;
        }
    }

    /// The work on `w` ended; queues it again if it was enqueued meanwhile.
    pub(crate) fn done(&self, w: &Work) {
        let Ok(mut s) = self.state.lock() else {
            return;
        };
        s.running.remove(w);
        if s.again.remove(w) {
            s.queue(w.clone());
            drop(s);
            self.ready.notify_one();
        }
    }

    /// How many items wait.
    pub(crate) fn waiting(&self) -> u64 {
        self.state
            .lock()
            .map_or(0, |s| u64::try_from(s.waiting.len()).unwrap_or(u64::MAX))
    }
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "test code")]

    use super::*;
    use crate::snapshot::{Key, RouteKey};

    fn gw(n: &str) -> Work {
        Work::Gateway(Key::new("ns", n))
    }
    fn route(n: &str) -> Work {
        Work::Route(RouteKey::new("HTTPRoute", "ns", n))
    }

    #[tokio::test]
    async fn an_item_waits_once_and_lanes_take_turns() {
        let q = Queue::default();
        q.push(gw("a"));
        q.push(gw("b"));
        q.push(gw("a"));
        q.push(route("r"));
        assert_eq!(q.waiting(), 3);
        assert_eq!(q.pop().await, gw("a"));
        assert_eq!(q.pop().await, route("r"));
        assert_eq!(q.pop().await, gw("b"));
        assert_eq!(q.waiting(), 0);
    }

    #[tokio::test]
    async fn an_item_enqueued_while_running_runs_again_after_not_during() {
        let q = Queue::default();
        q.push(gw("a"));
        let a = q.pop().await;
        q.push(gw("a"));
        // Not handed to a second worker while the first holds it.
        assert_eq!(q.waiting(), 0);
        let second = tokio::time::timeout(std::time::Duration::from_millis(50), q.pop()).await;
        assert!(second.is_err(), "a running item was handed out twice");
        q.done(&a);
        assert_eq!(q.waiting(), 1);
        assert_eq!(q.pop().await, gw("a"));
        // Done without a new enqueue: not queued again.
        q.done(&gw("a"));
        assert_eq!(q.waiting(), 0);
    }

    #[tokio::test]
    async fn a_waiting_worker_is_woken() {
        let q = std::sync::Arc::new(Queue::default());
        let q2 = q.clone();
        let w = tokio::spawn(async move { q2.pop().await });
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        q.push(route("r"));
        let got = tokio::time::timeout(std::time::Duration::from_secs(5), w)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(got, route("r"));
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
