//! The keyed work queue the workers share: tasks of every cluster, each a work item with
//! the cluster it belongs to.
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
//! Per-item backoff after a failure is the caller's (`Runner::work`): it enqueues the
//! item again after a delay that doubles with each failure in a row.

use std::collections::{HashSet, VecDeque};
use std::sync::Mutex;

use super::common::{Task, Work};

#[derive(Default)]
struct State {
    /// Waiting Gateways, and waiting items of the other kinds, in arrival order.
    lanes: [VecDeque<Task>; 2],
    /// Which lane goes next when both have work.
    turn: usize,
    /// Every waiting item (in a lane).
    waiting: HashSet<Task>,
    /// Items a worker holds.
    running: HashSet<Task>,
    /// Running items enqueued again meanwhile.
    again: HashSet<Task>,
}

impl State {
    fn lane(w: &Task) -> usize {
        usize::from(!matches!(w.work, Work::Gateway(_)))
    }
    fn queue(&mut self, w: Task) {
        if self.waiting.insert(w.clone()) {
            self.lanes[Self::lane(&w)].push_back(w);
        }
    }
    fn take(&mut self) -> Option<Task> {
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
    pub(crate) fn push(&self, w: Task) {
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
    pub(crate) async fn pop(&self) -> Task {
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
    pub(crate) fn done(&self, w: &Task) {
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "test code")]

    use super::*;
    use crate::snapshot::{Key, RouteKey};

    fn gw(n: &str) -> Task {
        Task::local(Work::Gateway(Key::new("ns", n)))
    }
    fn route(n: &str) -> Task {
        Task::local(Work::Route(RouteKey::new("HTTPRoute", "ns", n)))
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
}
