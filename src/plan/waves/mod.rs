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
//!
//! With an `issuanceBudget`, each move spends the Certificates the Gateway's move is
//! counted as ([`Member::certificates`]); the moves of the last `windowSeconds` (recorded
//! in the rollout status, so a restart forgets nothing) never spend more than the budget.
//! What the wave would move but the budget holds back waits (said in the status and its
//! message, with when the budget lets it go); while it does, the wave's deadline does not
//! run, and it starts again once the budget lets Gateways of the wave go.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, Time};
use k8s_openapi::jiff::Timestamp;

use crate::api::{
    BudgetWait, IssuanceBudget, Issued, OnFailure, RolloutPhase, RolloutPolicy, RolloutStatus,
    Wave, WaveStatus,
};
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
    /// The new Certificates its move to the newest revision is counted as ordering, against
    /// the issuance budget ([`move_cost`]).
    pub certificates: u32,
    /// The Gateway as the API returns it, for a wave's `gate` (read only when the policy
    /// has one).
    pub object: Option<std::sync::Arc<serde_json::Value>>,
}

/// The new Certificates a Gateway's move to a revision is counted as ordering: as many as
/// it has `live` cert-manager Certificates (each may be replaced), and at least 1 when the
/// revision `renders` them (a revision that adds one orders it). An upper bound: a
/// revision that leaves the Certificates as they are orders none, but only rendering
/// could tell, and a budget must not be spent past what it allows.
#[must_use]
pub fn move_cost(live: usize, renders: bool) -> u32 {
    let n = u32::try_from(live).unwrap_or(u32::MAX);
    if renders { n.max(1) } else { n }
}

/// Whether a blueprint spec renders cert-manager objects: a template of it names
/// `cert-manager.io`.
#[must_use]
pub fn renders_certificates(spec: &crate::api::GatewayClassBlueprintSpec) -> bool {
    spec.gateway_templates
        .iter()
        .chain(&spec.route_templates)
        .any(|t| t.template.contains("cert-manager.io"))
}

/// Whether a child key's `apiVersion` and kind are a cert-manager Certificate.
fn is_certificate(api_version: &str, kind: &str) -> bool {
    kind == "Certificate" && api_version.split('/').next() == Some("cert-manager.io")
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
    let bp = s.blueprint(name);
    let renders = bp.is_some_and(|b| renders_certificates(&b.object.spec));
    let gated = bp
        .and_then(|b| b.object.spec.rollout_policy.as_ref())
        .is_some_and(|p| p.waves.iter().any(|w| w.gate.is_some()));
    s.gateways()
        .filter(|(_, g)| classes.contains(&g.typed.spec.gateway_class_name))
        .filter(|(k, _)| super::gateway::in_scope(s, k).is_ok())
        .map(|(k, g)| {
            let gw = &g.typed;
            let pin = super::revisions::pin(s, gw).map(|p| p.1);
            let live = gw.metadata.uid.as_deref().map_or(0, |uid| {
                s.child_kinds_by_gateway(uid)
                    .filter(|(v, k)| is_certificate(v, k))
                    .count()
            });
            Member {
                key: k.to_string(),
                labels: gw.metadata.labels.clone().unwrap_or_default(),
                namespace_labels: crate::gateway::Lookup::namespace_labels(s, &k.namespace)
                    .cloned()
                    .unwrap_or_default(),
                pinned_to: pin,
                revision: super::revisions::recorded(gw).map(str::to_owned),
                health: health(gw),
                certificates: move_cost(live, renders),
                object: gated.then(|| std::sync::Arc::new(g.json())),
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
    if paused(policy, &mut r, target, now, &mut out) || broken_gate(policy, &mut r, now, &mut out) {
        out.status = Some(r);
        return out;
    }
    let seen = Seen {
        target,
        by_key: members.iter().map(|m| (m.key.as_str(), m)).collect(),
        now,
    };
    let by_key = &seen.by_key;
    loop {
        let i = r.waves.len().saturating_sub(1);
        // Whether the budget held Gateways of the current wave back at the last step.
        let was_held = r.budget_wait.take().is_some();
        let passed = match r.waves.last_mut() {
            None => true,
            Some(w) => {
                let spec = wave_spec(policy, i);
                let held = release(
                    &spec,
                    w,
                    &seen,
                    policy.issuance_budget.as_ref(),
                    &mut r.issued,
                    was_held,
                    &mut out,
                );
                let verdict = judge_wave(&spec, w, &seen, held.as_ref(), &mut r.message, &mut out);
                r.budget_wait = held.map(|h| h.wait);
                match verdict {
                    WaveVerdict::Passed => true,
                    WaveVerdict::Waits => false,
                    WaveVerdict::Halts(why) => {
                        halt(policy, &mut r, &why, members, &mut out);
                        out.status = Some(r);
                        return out;
                    }
                }
            }
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
        // Nothing is moved while paused: nothing waits on the budget.
        r.budget_wait = None;
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

/// Holds the rollout while a wave's gate does not compile (`true`: nothing to step):
/// nothing is moved and no deadline runs until the policy is mended, which steps it again.
fn broken_gate(
    policy: &RolloutPolicy,
    r: &mut RolloutStatus,
    now: Timestamp,
    out: &mut Step,
) -> bool {
    const HELD: &str = "; nothing is moved until it is mended";
    let Some(why) = policy.waves.iter().enumerate().find_map(|(i, w)| {
        let expr = w.gate.as_deref()?;
        crate::render::engine::check_gate(expr)
            .err()
            .map(|e| format!("rolloutPolicy.waves[{i}].gate does not compile: {e}{HELD}"))
    }) else {
        if r.message.ends_with(HELD)
            && let Some(w) = r.waves.last_mut()
        {
            // Mended: the current wave's deadline starts again.
            w.started_at = Some(Time(now));
        }
        return false;
    };
    r.budget_wait = None;
    if r.message != why {
        out.notes.push((true, "RolloutGateInvalid", why.clone()));
        r.message = why;
    }
    out.again = None;
    true
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
                // The budget is the class's: what earlier rollouts ordered still counts.
                issued: old.map(|o| o.issued.clone()).unwrap_or_default(),
                budget_wait: None,
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

/// What the step sees: the revision rolled out, the Gateways by key, the time.
struct Seen<'a> {
    target: &'a str,
    by_key: BTreeMap<&'a str, &'a Member>,
    now: Timestamp,
}

/// Gateways the current wave would move now but the issuance budget holds back.
struct Held {
    /// Their keys.
    keys: Vec<String>,
    /// As the status says it.
    wait: BudgetWait,
    /// As the message says it.
    says: String,
}

/// Moves more of the current wave `w` (its spec `spec`): at most `maxUnavailable` not
/// ready at a time, and, with a `budget`, only what the Certificates ordered in its window
/// (`issued`, where the moves are recorded) leave room for. Returns what the budget holds
/// back. `was_held`: the budget held some back at the last step; once it lets them go (or
/// none is held any more) the wave's deadline starts again.
fn release(
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
        Some(b) => spend(b, &w.name, next, seen, issued),
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
        // Recorded at the end of the slot (a 32nd of the window, on a fixed grid) the
        // moves fall in: never earlier than the moves (so they never leave the window
        // early, a status keeping whole seconds too), and at most 33 records per window.
        let slot = i64::try_from((window / 32).max(1)).unwrap_or(1);
        let second = now.as_second() + i64::from(now.subsec_nanosecond() > 0);
        let at = Timestamp::from_second(
            second.div_euclid(slot) * slot
                + if second.rem_euclid(slot) == 0 {
                    0
                } else {
                    slot
                },
        )
        .unwrap_or(now);
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

/// The current wave `w` (its spec `spec`), once more of it is released ([`release`];
/// `held`: what the issuance budget holds back): whether it halts (a Gateway the target
/// cannot render, the deadline passed while nothing waits on the budget), waits, bakes or
/// has passed; what it waits for in `message`.
fn judge_wave(
    spec: &Wave,
    w: &mut WaveStatus,
    seen: &Seen,
    held: Option<&Held>,
    message: &mut String,
    out: &mut Step,
) -> WaveVerdict {
    let (target, by_key, now) = (seen.target, &seen.by_key, seen.now);
    let alive: Vec<&Member> = w
        .gateways
        .iter()
        .filter(|k| !w.exempt.contains(k))
        .filter_map(|k| by_key.get(k.as_str()).copied())
        .collect();
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
            let on_budget = held.is_some_and(|h| h.keys.contains(&m.key));
            match &m.health {
                _ if on_budget => Some(format!("{}: waits on the issuance budget", m.key)),
                _ if !moved => Some(format!("{}: not moved yet", m.key)),
                _ if !m.on(target) => Some(format!("{}: not on {target} yet", m.key)),
                Health::Ready => None,
                Health::NotReady(why) | Health::Failed(why) => Some(format!("{}: {why}", m.key)),
            }
        })
        .collect();
    // The wave's own gate, once every Gateway of it is ready.
    let mut waiting = waiting;
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
        let waits =
            (!waiting.is_empty()).then(|| format!("wave {} waits for {}", w.name, shown(&waiting)));
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
}

/// Whether the gate `expr` of wave `w` holds over `alive` (its Gateways it waits for, each
/// `Programmed` on `target`).
fn gate_holds(expr: &str, w: &WaveStatus, alive: &[&Member], target: &str) -> Result<bool, String> {
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

fn halt(
    policy: &RolloutPolicy,
    r: &mut RolloutStatus,
    why: &str,
    members: &[Member],
    out: &mut Step,
) {
    let rollback = policy.on_failure == Some(OnFailure::Rollback) && r.from.is_some();
    r.message = why.to_owned();
    // Nothing more is moved. (A rollback is not held by the budget: going back to what
    // worked comes first.)
    r.budget_wait = None;
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
