//! The rollout of a blueprint's newest revision in waves gated on health: one pure step
//! from the blueprint's rollout status, its policy, the class's Gateways as their statuses
//! say, and the time, to the next rollout status. The controller runs it whenever a
//! Gateway of the class reports, and when a bake time or a deadline runs out.
//!
//! A rollout starts when the newest revision is not the one the status rolls out. Each
//! wave takes, in key order, Gateways that neither run the newest nor are pinned and that
//! its selectors match: `count` of them, or `percent` of the class (rounded up), or every
//! match; the Gateways no listed wave takes form a last wave, `rest`. A wave moves its
//! Gateways at most `maxUnavailable` not yet `Programmed` at a time; it passes once every
//! one of them is `Programmed` on the new revision (with its make-before-break children
//! served) for `bakeSeconds` (a Gateway that was not `Programmed` when its wave started is
//! moved but not waited for). A Gateway the new revision cannot render
//! (`Programmed=False/Invalid` on it) halts the rollout at once; a wave that does not
//! pass within `progressDeadlineSeconds` halts it then. Halted with `onFailure:
//! Rollback`, the moved Gateways go back to the revision the rollout started from.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, Time};
use k8s_openapi::jiff::Timestamp;

use crate::api::{OnFailure, RolloutPhase, RolloutPolicy, RolloutStatus, Wave, WaveStatus};
use crate::gateway::conditions::types;

/// How a Gateway of the class stands, as its status says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Health {
    /// `Programmed` on the revision it records, with every replacement done.
    Ready,
    /// Not (yet): why.
    NotReady(String),
    /// The revision it records cannot be rendered for it (`Programmed=False/Invalid`).
    Failed(String),
}

/// How a Gateway stands on the revision its status names.
pub fn health(gw: &gateway_api::apis::standard::gateways::Gateway) -> Health {
    let generation = gw.metadata.generation;
    let conds = gw
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_deref())
        .unwrap_or_default();
    let find = |t: &str| {
        conds
            .iter()
            .find(|c| c.type_ == t && c.observed_generation == generation)
    };
    if let Some(a) = find(types::ACCEPTED).filter(|c| c.status == "False")
        && a.message.contains("revision")
    {
        return Health::Failed(a.message.clone());
    }
    match find(types::PROGRAMMED) {
        None => Health::NotReady("Programmed not reported yet".into()),
        Some(p) if p.status == "True" => match find(types::ROLLOUT) {
            Some(r) if r.status != "True" => Health::NotReady(r.message.clone()),
            _ => Health::Ready,
        },
        // What will not fix itself: a template error, a child another parent holds, a
        // kind not served.
        Some(p) if p.reason == "Invalid" => Health::Failed(p.message.clone()),
        Some(p) => Health::NotReady(format!("{}: {}", p.reason, p.message)),
    }
}

/// A Gateway of the class.
#[derive(Clone, Debug)]
pub struct Member {
    /// `namespace/name`.
    pub key: String,
    /// Its labels.
    pub labels: BTreeMap<String, String>,
    /// Its Namespace's labels.
    pub namespace_labels: BTreeMap<String, String>,
    /// The revision a GatewayConfig pins it to (no wave takes it).
    pub pinned_to: Option<String>,
    /// The revision its status says it renders (`None`: none yet, it takes the newest).
    pub revision: Option<String>,
    /// Its health on that revision.
    pub health: Health,
}

impl Member {
    fn on(&self, revision: &str) -> bool {
        self.revision.as_deref().is_none_or(|r| r == revision)
    }
}

/// An Event the step asks for: warning or not, reason, message.
pub type Note = (bool, &'static str, String);

/// What one step decided.
#[derive(Clone, Debug, Default)]
pub struct Step {
    /// The new rollout status.
    pub status: Option<RolloutStatus>,
    /// Events to send.
    pub notes: Vec<Note>,
    /// Gateways whose revision the step changed (to plan again).
    pub moved: Vec<String>,
    /// When to step again (a bake time or a deadline).
    pub again: Option<Duration>,
}

/// The Gateways (ours) of the classes naming blueprint `name`, in key order, as their
/// statuses say.
#[must_use]
pub fn members(s: &crate::snapshot::Snapshot, name: &str) -> Vec<Member> {
    let classes = super::class::classes_using_blueprint(s, name);
    s.gateways()
        .filter(|(_, g)| classes.contains(&g.typed.spec.gateway_class_name))
        .filter(|(k, _)| super::gateway::in_scope(s, k).is_ok())
        .map(|(k, g)| {
            let gw = &g.typed;
            let pin = super::revisions::pin(s, gw).map(|p| p.1);
            Member {
                key: k.to_string(),
                labels: gw.metadata.labels.clone().unwrap_or_default(),
                namespace_labels: crate::gateway::Lookup::namespace_labels(s, &k.namespace)
                    .cloned()
                    .unwrap_or_default(),
                pinned_to: pin,
                revision: super::revisions::recorded(gw).map(str::to_owned),
                health: health(gw),
            }
        })
        .collect()
}

/// The waves a rollout of `target` would make of `members` if every gate passed: each
/// wave's name and Gateways (what `gatewright diff` shows of a blueprint change).
#[must_use]
pub fn preview(
    policy: &RolloutPolicy,
    target: &str,
    members: &[Member],
) -> Vec<(String, Vec<String>)> {
    let mut taken: std::collections::BTreeSet<String> = std::collections::BTreeSet::new();
    let mut out = Vec::new();
    for n in 0..=policy.waves.len() {
        let g = members_of(policy, n, target, members, &|k| taken.contains(k));
        if g.is_empty() {
            continue;
        }
        taken.extend(g.iter().cloned());
        out.push((wave_name(policy, n), g));
    }
    out
}

fn selects(s: Option<&LabelSelector>, labels: &BTreeMap<String, String>) -> bool {
    s.is_none_or(|s| {
        crate::gateway::selector_matches(
            labels,
            s.match_labels.as_ref(),
            s.match_expressions.iter().flatten().map(|e| {
                (
                    e.key.as_str(),
                    e.operator.as_str(),
                    e.values.as_deref().unwrap_or_default(),
                )
            }),
        )
    })
}

fn seconds_since(t: Option<&Time>, now: Timestamp) -> u64 {
    t.map_or(0, |t| {
        u64::try_from(now.duration_since(t.0).as_secs()).unwrap_or(0)
    })
}

/// The name of wave `i` (from 0) of `policy` (`rest` past its waves).
fn wave_name(policy: &RolloutPolicy, i: usize) -> String {
    policy.waves.get(i).map_or_else(
        || "rest".to_owned(),
        |w| w.name.clone().unwrap_or_else(|| format!("wave-{}", i + 1)),
    )
}

/// The Gateways wave `i` takes among `members` not taken by an earlier wave.
fn members_of(
    policy: &RolloutPolicy,
    i: usize,
    target: &str,
    members: &[Member],
    taken: &dyn Fn(&str) -> bool,
) -> Vec<String> {
    let candidates = members
        .iter()
        .filter(|m| m.pinned_to.is_none() && !m.on(target) && !taken(&m.key));
    let Some(w) = policy.waves.get(i) else {
        return candidates.map(|m| m.key.clone()).collect();
    };
    let matching = candidates.filter(|m| {
        selects(w.selector.as_ref(), &m.labels)
            && selects(w.namespace_selector.as_ref(), &m.namespace_labels)
    });
    let size = match (w.count, w.percent) {
        (Some(n), _) => usize::try_from(n).unwrap_or(usize::MAX),
        (None, Some(p)) => (members.len() * usize::try_from(p).unwrap_or(100)).div_ceil(100),
        (None, None) => usize::MAX,
    };
    matching.take(size).map(|m| m.key.clone()).collect()
}

fn wave_spec(policy: &RolloutPolicy, i: usize) -> Wave {
    policy.waves.get(i).cloned().unwrap_or_default()
}

/// One step of the rollout of `target` (the newest revision) over `members` (in key
/// order). `old`: the blueprint's rollout status; `current`: the revision its status named
/// newest before (where a new rollout starts from).
#[must_use]
pub fn step(
    policy: &RolloutPolicy,
    target: &str,
    current: Option<&str>,
    old: Option<&RolloutStatus>,
    members: &[Member],
    now: Timestamp,
) -> Step {
    let mut out = Step::default();
    let mut r = rollout_toward(target, current, old);
    if matches!(
        r.phase,
        RolloutPhase::Complete | RolloutPhase::Halted | RolloutPhase::RolledBack
    ) {
        out.status = Some(r);
        return out;
    }
    if paused(policy, &mut r, target, now, &mut out) {
        out.status = Some(r);
        return out;
    }
    let by_key: BTreeMap<&str, &Member> = members.iter().map(|m| (m.key.as_str(), m)).collect();
    loop {
        let i = r.waves.len().saturating_sub(1);
        let passed = match r.waves.last_mut() {
            None => true,
            Some(w) => match judge_wave(
                &wave_spec(policy, i),
                w,
                target,
                &by_key,
                now,
                &mut r.message,
                &mut out,
            ) {
                WaveVerdict::Passed => true,
                WaveVerdict::Waits => false,
                WaveVerdict::Halts(why) => {
                    halt(policy, &mut r, &why, members, &mut out);
                    out.status = Some(r);
                    return out;
                }
            },
        };
        if !passed {
            break;
        }
        // The next wave, if a Gateway is left to move.
        let next = r.waves.len();
        let taken = |k: &str| r.waves.iter().any(|w| w.gateways.iter().any(|g| g == k));
        let mut n = next;
        let gateways = loop {
            let g = members_of(policy, n, target, members, &taken);
            if !g.is_empty() || n >= policy.waves.len() {
                break g;
            }
            // A listed wave that takes nobody is skipped.
            n += 1;
        };
        if gateways.is_empty() {
            r.phase = RolloutPhase::Complete;
            r.message = format!("every Gateway renders {target}");
            out.notes.push((
                false,
                "RolloutComplete",
                format!("every Gateway renders {target}"),
            ));
            out.again = None;
            break;
        }
        let name = wave_name(policy, n);
        out.notes.push((
            false,
            "WaveStarted",
            format!(
                "rollout of {target}: wave {name} moves {} Gateway(s)",
                gateways.len()
            ),
        ));
        let exempt = gateways
            .iter()
            .filter(|k| {
                by_key
                    .get(k.as_str())
                    .is_some_and(|m| m.health != Health::Ready)
            })
            .cloned()
            .collect();
        r.waves.push(WaveStatus {
            name,
            gateways,
            exempt,
            released: 0,
            started_at: Some(Time(now)),
            healthy_since: None,
        });
    }
    out.status = Some(r);
    out
}

/// Pauses the rollout while `rolloutPolicy.paused` says so (`true`: paused, nothing more
/// to step), and resumes a paused one once it does not (the current wave's deadline
/// starts again).
fn paused(
    policy: &RolloutPolicy,
    r: &mut RolloutStatus,
    target: &str,
    now: Timestamp,
    out: &mut Step,
) -> bool {
    if policy.paused {
        if r.phase != RolloutPhase::Paused {
            r.phase = RolloutPhase::Paused;
            r.message = "paused (rolloutPolicy.paused)".into();
            out.notes.push((
                false,
                "RolloutPaused",
                format!("rollout of {target} paused"),
            ));
        }
        return true;
    }
    if r.phase == RolloutPhase::Paused {
        // Resumed: the current wave's deadline starts again.
        r.phase = RolloutPhase::Progressing;
        if let Some(w) = r.waves.last_mut() {
            w.started_at = Some(Time(now));
        }
        out.notes.push((
            false,
            "RolloutResumed",
            format!("rollout of {target} resumed"),
        ));
    }
    false
}

/// The rollout toward `target`: the one under way (`old`, when it goes there), else a new
/// one, whose way back is where a rollout that did not complete started from, else the
/// `current` revision.
fn rollout_toward(
    target: &str,
    current: Option<&str>,
    old: Option<&RolloutStatus>,
) -> RolloutStatus {
    match old.filter(|o| o.revision == target) {
        Some(o) => o.clone(),
        None => {
            // Where a rollout that did not complete started from stays the way back.
            let from = match old {
                Some(o) if o.phase != RolloutPhase::Complete => o.from.clone(),
                _ => current.map(str::to_owned),
            };
            RolloutStatus {
                revision: target.to_owned(),
                from: from.filter(|f| f != target),
                phase: RolloutPhase::Progressing,
                waves: Vec::new(),
                message: String::new(),
            }
        }
    }
}

/// What [`judge_wave`] says of the current wave.
enum WaveVerdict {
    /// Every Gateway of it is Programmed on the target, and it has baked: the next wave.
    Passed,
    /// It waits (for Gateways to move or be ready, or for its bake time).
    Waits,
    /// It halts the rollout, saying why.
    Halts(String),
}

/// The current wave `w` (its spec `spec`): more of it released (at most maxUnavailable
/// not ready at a time), then whether it halts (a Gateway the target cannot render, the
/// deadline passed), waits, bakes or has passed; what it waits for in `message`.
fn judge_wave(
    spec: &Wave,
    w: &mut WaveStatus,
    target: &str,
    by_key: &BTreeMap<&str, &Member>,
    now: Timestamp,
    message: &mut String,
    out: &mut Step,
) -> WaveVerdict {
    // Move more of the wave, at most maxUnavailable not ready at a time.
    let alive: Vec<&Member> = w
        .gateways
        .iter()
        .filter(|k| !w.exempt.contains(k))
        .filter_map(|k| by_key.get(k.as_str()).copied())
        .collect();
    let released = usize::try_from(w.released).unwrap_or(usize::MAX);
    let unavailable = w
        .gateways
        .iter()
        .take(released)
        .filter_map(|k| by_key.get(k.as_str()))
        .filter(|m| !(m.on(target) && m.health == Health::Ready))
        .count();
    let room = spec
        .max_unavailable
        .map_or(usize::MAX, |n| usize::try_from(n).unwrap_or(usize::MAX))
        .saturating_sub(unavailable);
    let more = room.min(w.gateways.len().saturating_sub(released));
    if more > 0 {
        out.moved
            .extend(w.gateways[released..released + more].iter().cloned());
        w.released = u32::try_from(released + more).unwrap_or(u32::MAX);
    }
    let released = usize::try_from(w.released).unwrap_or(usize::MAX);
    // A Gateway the new revision cannot render halts at once.
    let failed: Vec<String> = w
        .gateways
        .iter()
        .take(released)
        .filter(|k| !w.exempt.contains(k))
        .filter_map(|k| by_key.get(k.as_str()))
        .filter_map(|m| match &m.health {
            Health::Failed(why) if m.on(target) => Some(format!("{}: {why}", m.key)),
            _ => None,
        })
        .collect();
    let waiting: Vec<String> = alive
        .iter()
        .filter_map(|m| {
            let moved = w.gateways[..released].contains(&m.key);
            match &m.health {
                _ if !moved => Some(format!("{}: not moved yet", m.key)),
                _ if !m.on(target) => Some(format!("{}: not on {target} yet", m.key)),
                Health::Ready => None,
                Health::NotReady(why) | Health::Failed(why) => Some(format!("{}: {why}", m.key)),
            }
        })
        .collect();
    let deadline_passed = seconds_since(w.started_at.as_ref(), now) >= spec.deadline();
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
    if waiting.is_empty() {
        let since = w.healthy_since.get_or_insert(Time(now)).clone();
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
    } else {
        w.healthy_since = None;
        let left = spec
            .deadline()
            .saturating_sub(seconds_since(w.started_at.as_ref(), now));
        *message = format!("wave {} waits for {}", w.name, shown(&waiting));
        out.again = Some(Duration::from_secs(left.max(1)));
        WaveVerdict::Waits
    }
}

fn shown(items: &[String]) -> String {
    let mut s = items.iter().take(5).cloned().collect::<Vec<_>>().join("; ");
    if items.len() > 5 {
        s.push_str(&format!(" (and {} more)", items.len() - 5));
    }
    s
}

fn halt(
    policy: &RolloutPolicy,
    r: &mut RolloutStatus,
    why: &str,
    members: &[Member],
    out: &mut Step,
) {
    let rollback = policy.on_failure == Some(OnFailure::Rollback) && r.from.is_some();
    r.message = why.to_owned();
    if rollback {
        r.phase = RolloutPhase::RolledBack;
        out.moved.extend(
            r.waves
                .iter()
                .flat_map(|w| {
                    w.gateways
                        .iter()
                        .take(usize::try_from(w.released).unwrap_or(usize::MAX))
                })
                .cloned(),
        );
        // New Gateways took the newest too: they go back as well.
        out.moved.extend(
            members
                .iter()
                .filter(|m| m.revision.as_deref() == Some(r.revision.as_str()))
                .map(|m| m.key.clone()),
        );
        out.notes.push((
            true,
            "RolledBack",
            format!(
                "rollout of {} rolled back to {}: {why}",
                r.revision,
                r.from.as_deref().unwrap_or_default()
            ),
        ));
    } else {
        r.phase = RolloutPhase::Halted;
        out.notes.push((
            true,
            "RolloutHalted",
            format!("rollout of {} halted: {why}", r.revision),
        ));
    }
    out.again = None;
}

#[cfg(test)]
mod tests;
