//! New versions of make-before-break Gateway children held back while the Gateway's
//! inputs are still moving: routes created together (a GitOps sync, a team's batch)
//! change a certificate's hostnames once per route, and each change would otherwise start
//! a replacement (for a certificate, an order at the issuer, which public issuers limit).
//!
//! The first version a Gateway's plan asks for is created at once (a new Gateway, or a
//! restart, is not delayed). Once the version asked for has changed, the new one is
//! created only after it stayed the same for [`ROTATION_SETTLE`]; so is a new object of a
//! template versioned per object that the Gateway asked for before (a group of names split
//! off); the version serving
//! keeps serving meanwhile, and nothing else waits: route children and statuses are
//! written as planned.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use super::cluster::Cluster;
use super::memory::{Asked, AskedVersions, CountsSeen};
use super::planned::Planned;
use crate::render::TemplateSet;
use crate::render::labels;
use crate::snapshot::{Key, ObjectKey};

/// How long the version a make-before-break Gateway template asks for must stay the same,
/// after a change, before that version is created.
pub const ROTATION_SETTLE: Duration = Duration::from_secs(2);

/// How long after a Gateway's status write a change that is no transition
/// ([`crate::plan::progress::only_progress`]: what a Gateway not yet Programmed waits for,
/// its address, the count of its routes, a replacement's progress) waits before it is
/// written: on a cold start a Gateway's children come up and its routes attach one by
/// one, each step a new status, and one write for them all is enough. Transitions
/// (Programmed gained or lost, Accepted changing, a new generation) are written at once.
pub const PROGRESS_HOLD: Duration = Duration::from_secs(5);

/// [`PROGRESS_HOLD`] while the controller is busy (more work waits in the queue than
/// [`BUSY_PER_WORKER`] per worker: a cold start, a fleet's resync): then the API
/// server's capacity goes to transitions and children first, and a Gateway's progress
/// (what it waits for, its address once it has one) is written at most this often.
/// Measured at N = 1,000 Gateways (`scripts/bench-scale.sh 1000`): a Gateway takes about
/// 18 s from its first status to `Programmed`, and with the 5 s hold wrote its status 3.5
/// times on the way.
pub const PROGRESS_HOLD_BUSY: Duration = Duration::from_secs(30);

/// Queued items per worker above which the controller counts as busy.
pub const BUSY_PER_WORKER: u64 = 2;

/// How long a Gateway's route counts (`attachedRoutes` per listener) must stay the same
/// before a changed count is written, while routes arrive in a burst (a GitOps sync, a
/// team's batch): the count reaches its final value once, shortly after the last route,
/// without waiting for the route copies and route statuses of that burst (see
/// [`counts_wait`]).
pub const COUNTS_QUIET: Duration = Duration::from_millis(250);

/// When planned route counts that differ from the written ones are to be written
/// (`None`: now), given what the plans asked for before (`seen`, updated here) and the
/// Gateway's last status write: at once when they change after a quiet spell and no status
/// was written for [`PROGRESS_HOLD`] (one route added to a settled Gateway); otherwise once
/// two plans at least [`COUNTS_QUIET`] apart asked for the same counts, and at least every
/// [`PROGRESS_HOLD`] (a steady trickle of routes still moves the count on). (Plans of a
/// busy Gateway may be further apart than the quiet time: a change seen after a long pass
/// is no quiet spell when the last write is recent.)
pub(crate) fn counts_wait(
    seen: &mut Option<CountsSeen>,
    counts: &[i32],
    last_write: Option<Instant>,
    now: Instant,
) -> Option<Duration> {
    let left = |since: Instant, hold: Duration| {
        hold.checked_sub(now.saturating_duration_since(since))
            .filter(|d| !d.is_zero())
    };
    let moved_after_quiet = match seen {
        Some(s) if s.counts == counts => None,
        Some(s) => Some(left(s.since, COUNTS_QUIET).is_none()),
        None => Some(true),
    };
    if let Some(quiet_before) = moved_after_quiet {
        *seen = Some(CountsSeen {
            counts: counts.to_vec(),
            since: now,
        });
        if quiet_before && last_write.is_none_or(|w| left(w, PROGRESS_HOLD).is_none()) {
            return None;
        }
    }
    let since = seen.as_ref().map_or(now, |s| s.since);
    let quiet = left(since, COUNTS_QUIET)?;
    let most = left(last_write?, PROGRESS_HOLD)?;
    Some(quiet.min(most))
}

/// What [`Cluster::unsettled`] holds back, and when to plan again.
#[derive(Debug, Default)]
pub(crate) struct Unsettled {
    /// Children not to create in this pass.
    pub keys: BTreeSet<ObjectKey>,
    /// When the first of them may be created.
    pub wake: Option<Duration>,
}

/// One make-before-break child a plan asks for.
#[derive(Debug)]
pub(crate) struct Ask<'a> {
    /// Its template.
    pub template: &'a str,
    /// For a template versioned per object: the object (its name as rendered), whose
    /// versions settle on their own.
    pub slot: &'a str,
    /// The version it was rendered as.
    pub version: &'a str,
    /// Whether it exists.
    pub live: bool,
    /// Its identity.
    pub key: &'a ObjectKey,
}

/// The make-before-break children of a plan, as [`judge`] reads them.
fn asks(p: &Planned) -> Vec<Ask<'_>> {
    let Some(prepared) = p.plan.gateway.blueprint.as_deref() else {
        return Vec::new();
    };
    p.plan
        .gateway
        .children
        .iter()
        .zip(&p.live)
        .filter(|(c, _)| {
            prepared
                .entry(TemplateSet::Gateway, &c.template)
                .and_then(|e| e.rollout.as_ref())
                .is_some_and(crate::api::Rollout::make_before_break)
        })
        .filter_map(|(c, live)| {
            Some(Ask {
                template: &c.template,
                slot: labels::slot(&c.object).unwrap_or_default(),
                version: c.object["metadata"]["labels"][labels::VERSION].as_str()?,
                live: live.is_some(),
                key: &c.key,
            })
        })
        .collect()
}

/// Records the version each template asks for in `asked` and says which new versions to
/// hold back at `now`.
pub(crate) fn judge<'a>(
    mine: &mut AskedVersions,
    children: impl IntoIterator<Item = Ask<'a>>,
    now: Instant,
) -> Unsettled {
    let mut out = Unsettled::default();
    // Templates this Gateway asked for before: a new object of one (a group of names split
    // off) is part of a change, and waits as a changed version does.
    let children: Vec<Ask<'a>> = children.into_iter().collect();
    if children.is_empty() {
        return out;
    }
    let known: std::collections::HashSet<String> = mine.keys().map(|(t, _)| t.clone()).collect();
    for c in children {
        let a = mine
            .entry((c.template.to_owned(), c.slot.to_owned()))
            .or_insert_with(|| Asked {
                version: c.version.to_owned(),
                since: now,
                changed: known.contains(c.template),
            });
        if a.version != c.version {
            *a = Asked {
                version: c.version.to_owned(),
                since: now,
                changed: true,
            };
        }
        let waited = now.saturating_duration_since(a.since);
        if !c.live && a.changed && waited < ROTATION_SETTLE {
            out.keys.insert(c.key.clone());
            let left = ROTATION_SETTLE - waited;
            out.wake = Some(out.wake.map_or(left, |w| w.min(left)));
        }
    }
    out
}

impl Cluster {
    /// See the module docs.
    pub(crate) fn unsettled(&self, key: &Key, p: &Planned) -> Unsettled {
        self.memory
            .with(key, |m| {
                judge(&mut m.versions_asked, asks(p), Instant::now())
            })
            .unwrap_or_default()
    }

    /// How long a status change that only reports progress
    /// ([`crate::plan::progress::only_progress`]) waits: until [`PROGRESS_HOLD`] after the
    /// Gateway's last status write, [`PROGRESS_HOLD_BUSY`] while the controller is busy
    /// (`None`: write it now). A change held back while busy is written once the hold
    /// ends, or with the next transition, whichever comes first.
    pub(crate) fn progress_hold(&self, key: &Key, now: Instant) -> Option<Duration> {
        let last = self.memory.read(key, |m| m.status_written_at)??;
        let busy = self.queued() > BUSY_PER_WORKER.saturating_mul(self.opts.workers as u64);
        let hold = if busy {
            PROGRESS_HOLD_BUSY
        } else {
            PROGRESS_HOLD
        };
        hold.checked_sub(now.saturating_duration_since(last))
            .filter(|d| !d.is_zero())
    }

    /// Records a write of `key`'s status.
    pub(crate) fn status_written(&self, key: &Key, now: Instant) {
        self.memory.with(key, |m| m.status_written_at = Some(now));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn route_counts_are_written_once_a_burst_is_over_and_at_once_after_a_quiet_spell() {
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        let mut seen = None;
        // A settled Gateway, its status written long ago: one route arrives, written now.
        assert_eq!(counts_wait(&mut seen, &[1], Some(t0), at(10_000)), None);
        let written = at(10_000);
        // A burst: every pass sees another count; held until it stays the same.
        assert_eq!(
            counts_wait(&mut seen, &[2], Some(written), at(10_050)),
            Some(COUNTS_QUIET)
        );
        assert_eq!(
            counts_wait(&mut seen, &[40], Some(written), at(10_100)),
            Some(COUNTS_QUIET)
        );
        assert_eq!(
            counts_wait(&mut seen, &[40], Some(written), at(10_300)),
            Some(Duration::from_millis(50)),
            "the same for 200 ms only"
        );
        assert_eq!(
            counts_wait(&mut seen, &[40], Some(written), at(10_350)),
            None,
            "the same for 250 ms: written"
        );
        // A trickle that never stays the same for 250 ms is still written every 5 s.
        let written = at(10_350);
        let mut t = 10_400;
        let mut n = 41;
        let mut writes = 0;
        let mut last = written;
        while t < 21_000 {
            if counts_wait(&mut seen, &[n], Some(last), at(t)).is_none() {
                writes += 1;
                last = at(t);
            }
            t += 100;
            n += 1;
        }
        assert_eq!(
            writes, 2,
            "one write per PROGRESS_HOLD while counts keep moving"
        );
    }

    fn ask<'a>(version: &'a str, live: bool, key: &'a ObjectKey) -> Ask<'a> {
        Ask {
            template: "certificate",
            slot: "",
            version,
            live,
            key,
        }
    }

    #[test]
    fn a_first_version_goes_at_once_and_a_changed_one_waits_until_it_settles() {
        let gw = Key::new("ns", "gw");
        let (k1, k2, k3) = (
            ObjectKey::of(
                &serde_json::json!({"apiVersion": "v1", "kind": "Certificate", "metadata": {"name": "a-1", "namespace": "ns"}}),
            ),
            ObjectKey::of(
                &serde_json::json!({"apiVersion": "v1", "kind": "Certificate", "metadata": {"name": "a-2", "namespace": "ns"}}),
            ),
            ObjectKey::of(
                &serde_json::json!({"apiVersion": "v1", "kind": "Certificate", "metadata": {"name": "a-3", "namespace": "ns"}}),
            ),
        );
        let mut asked = HashMap::new();
        let t0 = Instant::now();
        // The first version asked for is created at once.
        let u = judge(
            asked.entry(gw.clone()).or_default(),
            [ask("1", false, &k1)],
            t0,
        );
        assert!(u.keys.is_empty() && u.wake.is_none());
        // It changes: held, and woken when it has stayed the same long enough.
        let u = judge(
            asked.entry(gw.clone()).or_default(),
            [ask("2", false, &k2)],
            t0 + Duration::from_millis(100),
        );
        assert_eq!(u.keys, BTreeSet::from([k2.clone()]));
        assert_eq!(u.wake, Some(ROTATION_SETTLE));
        // It changes again before that: the wait starts over.
        let t = t0 + Duration::from_millis(900);
        let u = judge(
            asked.entry(gw.clone()).or_default(),
            [ask("3", false, &k3)],
            t,
        );
        assert_eq!(u.keys, BTreeSet::from([k3.clone()]));
        let u = judge(
            asked.entry(gw.clone()).or_default(),
            [ask("3", false, &k3)],
            t + Duration::from_millis(500),
        );
        assert_eq!(u.wake, Some(ROTATION_SETTLE - Duration::from_millis(500)));
        // Settled: created.
        let u = judge(
            asked.entry(gw.clone()).or_default(),
            [ask("3", false, &k3)],
            t + ROTATION_SETTLE,
        );
        assert!(u.keys.is_empty() && u.wake.is_none());
        // A version that exists is never held, and another Gateway is judged on its own.
        let u = judge(
            asked.entry(gw.clone()).or_default(),
            [ask("4", true, &k1)],
            t + ROTATION_SETTLE,
        );
        assert!(u.keys.is_empty());
        let other = Key::new("ns", "other");
        let u = judge(
            asked.entry(other.clone()).or_default(),
            [ask("9", false, &k1)],
            t + ROTATION_SETTLE,
        );
        assert!(u.keys.is_empty());
    }

    #[test]
    fn a_new_object_of_a_known_template_waits_but_not_the_first_ones() {
        let gw = Key::new("ns", "gw");
        let key = |n: &str| {
            ObjectKey::of(
                &serde_json::json!({"apiVersion": "v1", "kind": "Certificate", "metadata": {"name": n, "namespace": "ns"}}),
            )
        };
        let (a, b, c) = (&key("tls-0-1"), &key("tls-1-1"), &key("tls-2-1"));
        fn ask<'a>(slot: &'a str, key: &'a ObjectKey) -> Ask<'a> {
            Ask {
                template: "certificate",
                slot,
                version: "1",
                live: false,
                key,
            }
        }
        let mut asked = HashMap::new();
        let t0 = Instant::now();
        // Every object of the first plan goes at once.
        let u = judge(
            asked.entry(gw.clone()).or_default(),
            [ask("tls-0", a), ask("tls-1", b)],
            t0,
        );
        assert!(u.keys.is_empty(), "{u:?}");
        // A group split off later waits until it settles.
        let u = judge(
            asked.entry(gw.clone()).or_default(),
            [ask("tls-0", a), ask("tls-1", b), ask("tls-2", c)],
            t0 + Duration::from_millis(100),
        );
        assert_eq!(u.keys, BTreeSet::from([c.clone()]));
        let u = judge(
            asked.entry(gw.clone()).or_default(),
            [ask("tls-2", c)],
            t0 + Duration::from_millis(100) + ROTATION_SETTLE,
        );
        assert!(u.keys.is_empty(), "{u:?}");
    }
}
