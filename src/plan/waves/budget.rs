//! The issuance budget: how much of the current wave may move now, at most
//! `maxUnavailable` not ready at a time and no more than the Certificates ordered in the
//! budget's window leave room for; the moves recorded in the rollout status, and what the
//! budget holds back said with when it lets it go.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;

use super::class_gateway::Health;
use super::outcome::{Seen, Step, seconds_since};
use crate::api::{BudgetWait, IssuanceBudget, Issued, Wave, WaveStatus};

/// Gateways the current wave would move now but the issuance budget holds back.
pub(super) struct Held {
    /// Their keys.
    pub(super) keys: Vec<String>,
    /// As the status says it.
    pub(super) wait: BudgetWait,
    /// As the message says it.
    pub(super) says: String,
}

/// Moves more of the current wave `w` (its spec `spec`): at most `maxUnavailable` not
/// ready at a time, and, with a `budget`, only what the Certificates ordered in its window
/// (`issued`, where the moves are recorded) leave room for. Returns what the budget holds
/// back. `was_held`: the budget held some back at the last step; once it lets them go (or
/// none is held any more) the wave's deadline starts again.
pub(super) fn release(
    spec: &Wave,
    w: &mut WaveStatus,
    seen: &Seen,
    budget: Option<&IssuanceBudget>,
    issued: &mut Vec<Issued>,
    was_held: bool,
    out: &mut Step,
) -> Option<Held> {
    let released = usize::try_from(w.released).unwrap_or(usize::MAX);
    let unavailable = w
        .gateways
        .iter()
        .take(released)
        .filter_map(|k| seen.by_key.get(k.as_str()))
        .filter(|m| !(m.on(seen.target) && m.health == Health::Ready))
        .count();
    let room = spec
        .max_unavailable
        .map_or(usize::MAX, |n| usize::try_from(n).unwrap_or(usize::MAX))
        .saturating_sub(unavailable);
    let more = room.min(w.gateways.len().saturating_sub(released));
    let next = &w.gateways[released..released + more];
    let (go, held) = match budget {
        None => (more, None),
        Some(b) => {
            // A Gateway moved and not yet reporting the target may not have ordered its
            // Certificates yet: what the window holds does not start leaving it before.
            let in_flight = w
                .gateways
                .iter()
                .take(released)
                .filter(|k| !w.exempt.contains(k))
                .filter_map(|k| seen.by_key.get(k.as_str()))
                .any(|m| !m.on(seen.target));
            if in_flight {
                hold(issued, seen.now, b.window());
            }
            spend(b, &w.name, next, seen, issued)
        }
    };
    if go > 0 {
        out.moved.extend(next[..go].iter().cloned());
        w.released = u32::try_from(released + go).unwrap_or(u32::MAX);
    }
    if was_held && (go > 0 || held.is_none()) {
        w.started_at = Some(Time(seen.now));
    }
    held
}

/// Of `next` (the Gateways the wave would move now, in order), how many the budget `b`
/// lets go, their Certificates recorded in `issued`; and what it holds back.
fn spend(
    b: &IssuanceBudget,
    wave: &str,
    next: &[String],
    seen: &Seen,
    issued: &mut Vec<Issued>,
) -> (usize, Option<Held>) {
    let now = seen.now;
    let window = b.window();
    let live = |e: &Issued| seconds_since(Some(&e.at), now) < window;
    let cost = |k: &String| {
        seen.by_key
            .get(k.as_str())
            .map_or(0, |m| u64::from(m.certificates))
    };
    let cap = u64::from(b.certificates);
    let mut spent: u64 = issued
        .iter()
        .filter(|e| live(e))
        .map(|e| u64::from(e.certificates))
        .sum();
    let mut go = 0;
    let mut spending = 0;
    for k in next {
        let c = cost(k);
        if spent + c > cap {
            break;
        }
        spent += c;
        spending += c;
        go += 1;
    }
    if spending > 0 {
        issued.retain(live);
        let at = slot_end(now, window);
        let n = u32::try_from(spending).unwrap_or(u32::MAX);
        match issued.last_mut() {
            Some(e) if e.at.0 == at => e.certificates = e.certificates.saturating_add(n),
            _ => issued.push(Issued {
                at: Time(at),
                certificates: n,
            }),
        }
    }
    let held = &next[go..];
    let Some(first) = held.first() else {
        return (go, None);
    };
    let need = cost(first);
    // When enough of what the window holds has left it for the first one held back.
    let until = (need <= cap)
        .then(|| {
            let mut records: Vec<&Issued> = issued.iter().filter(|e| live(e)).collect();
            records.sort_by_key(|e| e.at.0);
            let mut left = spent;
            records.into_iter().find_map(|e| {
                left = left.saturating_sub(u64::from(e.certificates));
                (cap.saturating_sub(left) >= need)
                    .then(|| {
                        e.at.0
                            .checked_add(k8s_openapi::jiff::SignedDuration::from_secs(
                                i64::try_from(window).unwrap_or(i64::MAX),
                            ))
                            .ok()
                    })
                    .flatten()
            })
        })
        .flatten();
    let certificates = held.iter().map(cost).sum::<u64>();
    let says = match &until {
        Some(t) => format!(
            "{} Gateway(s) of wave {wave} wait on the issuance budget ({certificates} Certificate(s); at most {cap} per {window} s) until {t}",
            held.len()
        ),
        None => format!(
            "{first} of wave {wave} waits on the issuance budget: its move is counted as {need} Certificate(s), more than the {cap} allowed per {window} s; raise rolloutPolicy.issuanceBudget.certificates"
        ),
    };
    let held = Held {
        keys: held.to_vec(),
        wait: BudgetWait {
            gateways: u32::try_from(held.len()).unwrap_or(u32::MAX),
            certificates: u32::try_from(certificates).unwrap_or(u32::MAX),
            until: until.map(Time),
        },
        says,
    };
    (go, Some(held))
}

/// The end of the slot (a 32nd of the window, on a fixed grid) that `now` falls in: when
/// moves made now are recorded, never earlier than they were (so they never leave the
/// window early, a status keeping whole seconds too), and at most 33 records per window.
fn slot_end(now: Timestamp, window: u64) -> Timestamp {
    let slot = i64::try_from((window / 32).max(1)).unwrap_or(1);
    let second = now.as_second() + i64::from(now.subsec_nanosecond() > 0);
    Timestamp::from_second(
        second.div_euclid(slot) * slot
            + if second.rem_euclid(slot) == 0 {
                0
            } else {
                slot
            },
    )
    .unwrap_or(now)
}

/// Holds what the window holds in it while moves are in flight: every record still in the
/// window is dated no earlier than now (its slot's end), merged with the others of that
/// slot. So the Certificates of a move leave the window no sooner than a window after the
/// moved Gateways reported the target, whenever they were ordered in between.
fn hold(issued: &mut Vec<Issued>, now: Timestamp, window: u64) {
    let at = slot_end(now, window);
    let live = |e: &Issued| seconds_since(Some(&e.at), now) < window;
    let held: u32 = issued
        .iter()
        .filter(|e| live(e) && e.at.0 < at)
        .fold(0, |n, e| n.saturating_add(e.certificates));
    if held == 0 {
        return;
    }
    issued.retain(|e| !(live(e) && e.at.0 < at));
    match issued.iter_mut().find(|e| e.at.0 == at) {
        Some(e) => e.certificates = e.certificates.saturating_add(held),
        None => {
            issued.push(Issued {
                at: Time(at),
                certificates: held,
            });
            issued.sort_by_key(|e| e.at.0);
        }
    }
}
