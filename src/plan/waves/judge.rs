//! The current wave judged, once more of it is released: whether it halts the rollout,
//! waits (for Gateways to move or be ready, for its gate, on the issuance budget), bakes
//! or has passed; and what the rollout status says it waits for.

use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::budget::Held;
use super::class_gateway::{ClassGateway, Health};
use super::outcome::{Seen, Step, seconds_since};
use crate::api::{Wave, WaveStatus};

/// What [`judge_wave`] says of the current wave.
pub(super) enum WaveVerdict {
    /// Every Gateway of it is Programmed on the target, and it has baked: the next wave.
    Passed,
    /// It waits (for Gateways to move or be ready, or for its bake time).
    Waits,
    /// It halts the rollout, saying why.
    Halts(String),
}

/// The current wave `w` (its spec `spec`), once more of it is released
/// ([`release`](super::budget::release); `held`: what the issuance budget holds back):
/// whether it halts (a Gateway the target cannot render, the deadline passed while nothing
/// waits on the budget), waits, bakes or has passed; what it waits for in `message`.
pub(super) fn judge_wave(
    spec: &Wave,
    w: &mut WaveStatus,
    seen: &Seen,
    held: Option<&Held>,
    message: &mut String,
    out: &mut Step,
) -> WaveVerdict {
    let (target, by_key, now) = (seen.target, &seen.by_key, seen.now);
    let alive: Vec<&ClassGateway> = w
        .gateways
        .iter()
        .filter(|k| !w.exempt.contains(k))
        .filter_map(|k| by_key.get(k.as_str()).copied())
        .collect();
    let released = usize::try_from(w.released).unwrap_or(usize::MAX);
    // A Gateway the new revision cannot render halts at once.
    let failed = unrenderable(w, seen, released);
    let mut waiting = waiting_for(w, &alive, seen, held, released);
    // The wave's own gate, once every Gateway of it is ready.
    if waiting.is_empty()
        && held.is_none()
        && let Some(expr) = &spec.gate
    {
        match gate_holds(expr, w, &alive, target) {
            Ok(true) => {}
            Ok(false) => waiting.push(format!("its gate `{expr}` (not true yet)")),
            Err(e) => {
                return WaveVerdict::Halts(format!(
                    "the gate of wave {} cannot be evaluated: {e} (gate `{expr}`)",
                    w.name
                ));
            }
        }
    }
    // Time spent waiting on the budget is not the wave's failure: no deadline runs then.
    let deadline_passed =
        held.is_none() && seconds_since(w.started_at.as_ref(), now) >= spec.deadline();
    if !failed.is_empty() || (deadline_passed && !waiting.is_empty()) {
        let why = if failed.is_empty() {
            format!(
                "wave {} did not pass within {} s: {}",
                w.name,
                spec.deadline(),
                shown(&waiting)
            )
        } else {
            format!(
                "revision {target} does not render in wave {}: {}",
                w.name,
                shown(&failed)
            )
        };
        return WaveVerdict::Halts(why);
    }
    if waiting.is_empty() && held.is_none() {
        bakes(spec, w, seen, message, out)
    } else {
        waits(spec, w, seen, held, &waiting, message, out)
    }
}

/// The released Gateways of wave `w` (the first `released`, those not exempt) the target
/// cannot render, each with why.
fn unrenderable(w: &WaveStatus, seen: &Seen, released: usize) -> Vec<String> {
    let (target, by_key) = (seen.target, &seen.by_key);
    w.gateways
        .iter()
        .take(released)
        .filter(|k| !w.exempt.contains(k))
        .filter_map(|k| by_key.get(k.as_str()))
        .filter_map(|m| match &m.health {
            Health::Failed(why) if m.on(target) => Some(format!("{}: {why}", m.key)),
            _ => None,
        })
        .collect()
}

/// What wave `w` waits for among `alive` (its Gateways not exempt): each one held back by
/// the budget, not moved yet, not on the target yet, or not ready there, with why.
fn waiting_for(
    w: &WaveStatus,
    alive: &[&ClassGateway],
    seen: &Seen,
    held: Option<&Held>,
    released: usize,
) -> Vec<String> {
    let target = seen.target;
    alive
        .iter()
        .filter_map(|m| {
            let moved = w.gateways[..released].contains(&m.key);
            let on_budget = held.is_some_and(|h| h.keys.contains(&m.key));
            match &m.health {
                _ if on_budget => Some(format!("{}: waits on the issuance budget", m.key)),
                _ if !moved => Some(format!("{}: not moved yet", m.key)),
                _ if !m.on(target) => Some(format!("{}: not on {target} yet", m.key)),
                Health::Ready => None,
                Health::NotReady(why) | Health::Failed(why) => Some(format!("{}: {why}", m.key)),
            }
        })
        .collect()
}

/// Wave `w`, nothing left to wait for: passed once it has been healthy for its bake time,
/// else it bakes (said by when in `message`, stepped again then).
fn bakes(
    spec: &Wave,
    w: &mut WaveStatus,
    seen: &Seen,
    message: &mut String,
    out: &mut Step,
) -> WaveVerdict {
    let now = seen.now;
    // In whole seconds, as the status keeps it: the message below, made from it, must
    // read the same after a restart reads it back from the status.
    let since = w
        .healthy_since
        .get_or_insert_with(|| Time(whole_second(now)))
        .clone();
    let baked = seconds_since(Some(&since), now);
    if baked >= spec.bake() {
        WaveVerdict::Passed
    } else {
        // Said by when, not how long: a pass later writes nothing new.
        let until = since
            .0
            .checked_add(k8s_openapi::jiff::SignedDuration::from_secs(
                i64::try_from(spec.bake()).unwrap_or(i64::MAX),
            ))
            .unwrap_or(since.0);
        *message = format!("wave {} is Programmed; baking until {until}", w.name);
        out.again = Some(Duration::from_secs(spec.bake() - baked));
        WaveVerdict::Waits
    }
}

/// Wave `w` waits: for `waiting`, or on the budget (`held`). Its bake starts again; what it
/// waits for goes in `message`, and it is stepped again when the budget lets the first
/// held Gateway go, else at its deadline.
fn waits(
    spec: &Wave,
    w: &mut WaveStatus,
    seen: &Seen,
    held: Option<&Held>,
    waiting: &[String],
    message: &mut String,
    out: &mut Step,
) -> WaveVerdict {
    let now = seen.now;
    w.healthy_since = None;
    let waits =
        (!waiting.is_empty()).then(|| format!("wave {} waits for {}", w.name, shown(waiting)));
    *message = held
        .map(|h| h.says.clone())
        .into_iter()
        .chain(waits)
        .collect::<Vec<_>>()
        .join("; ");
    out.again = match held {
        // Stepped again when the budget lets the first held Gateway go (never, when it
        // cannot: a change of the budget or a Gateway's report steps it).
        Some(h) => h.wait.until.as_ref().map(|u| {
            let d = u.0.duration_since(now);
            let s = d.as_secs() + i64::from(d.subsec_nanos() > 0);
            Duration::from_secs(u64::try_from(s).unwrap_or(0).max(1))
        }),
        None => {
            let left = spec
                .deadline()
                .saturating_sub(seconds_since(w.started_at.as_ref(), now));
            Some(Duration::from_secs(left.max(1)))
        }
    };
    WaveVerdict::Waits
}

/// Whether the gate `expr` of wave `w` holds over `alive` (its Gateways it waits for, each
/// `Programmed` on `target`).
fn gate_holds(
    expr: &str,
    w: &WaveStatus,
    alive: &[&ClassGateway],
    target: &str,
) -> Result<bool, String> {
    let gateways: Vec<&serde_json::Value> =
        alive.iter().filter_map(|m| m.object.as_deref()).collect();
    let vars = serde_json::json!({
        "gateways": gateways,
        "wave": {"name": w.name, "size": w.gateways.len()},
        "revision": target,
    });
    crate::render::engine::eval_gate(expr, &vars)
}

fn shown(items: &[String]) -> String {
    let mut s = items.iter().take(5).cloned().collect::<Vec<_>>().join("; ");
    if items.len() > 5 {
        s.push_str(&format!(" (and {} more)", items.len() - 5));
    }
    s
}

/// `t` without its fraction of a second (what a status's timestamp keeps).
fn whole_second(t: k8s_openapi::jiff::Timestamp) -> k8s_openapi::jiff::Timestamp {
    k8s_openapi::jiff::Timestamp::from_second(t.as_second()).unwrap_or(t)
}
