//! Templates versioned per object (`rollout.per: Object`): each object replaced on its
//! own, with names that may move between objects kept served throughout.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use serde_json::Value;

use super::stamp::{created, version_label, versions_in_use};
use super::step::RolloutStep;
use crate::plan::readiness::{self, Readiness};
use crate::plan::set::{
    ChildState, DesiredChild, Replacement, ReplacementPhase, SetInput, SetResult, is_subset,
};
use crate::render::labels;
use crate::snapshot::ObjectKey;

/// The live objects of a per-object template that it no longer renders, and whether
/// dependents still read them.
pub(super) struct Vanished {
    /// The template.
    pub(super) template: String,
    /// The objects and their versions.
    pub(super) keys: Vec<(ObjectKey, String)>,
    /// Some object of the template is not serving its newest version yet: what vanished
    /// may have moved there, so dependents keep reading it.
    pub(super) serving: bool,
}

/// A make-before-break template versioned per object (`rollout.per: Object`), as rendered
/// this pass: each object is replaced on its own ([`RolloutStep`] with its slot).
///
/// Names can move between its objects (a group of hostnames split in two, or two merged),
/// so: once dependents read the template, a new object is shown to them only once it is
/// ready, a changed object switches only once every new object is ready, and an object no
/// longer rendered keeps being read while anything of the template waits, and is kept
/// until no live dependent names it.
pub(super) struct SlotsStep<'a> {
    pub(super) name: &'a String,
    pub(super) entry: &'a crate::api::TemplateEntry,
    pub(super) timeout: u64,
    pub(super) new_states: Vec<ChildState>,
}

impl SlotsStep<'_> {
    pub(super) fn settle(
        self,
        input: &SetInput<'_>,
        live: &BTreeMap<ObjectKey, &Arc<Value>>,
        out: &mut SetResult,
        finishing: &mut Vec<super::step::Finishing>,
    ) -> (Vec<String>, Vanished) {
        let name = self.name;
        let children: Vec<DesiredChild> = out
            .children
            .iter()
            .filter(|c| &c.template == name)
            .cloned()
            .collect();
        let in_use = versions_in_use(input.live, name);
        // Dependents read this template already: its objects are replaced one by one.
        // Else (a new Gateway, or nothing read yet) every object is as a first version.
        let established = !in_use.is_empty();
        let slots: BTreeSet<&str> = children
            .iter()
            .filter_map(|c| labels::slot(&c.object))
            .collect();
        // Objects no longer rendered (or rendered before the template was versioned per
        // object, or under another name by an earlier release of the blueprint).
        let gone: Vec<&Arc<Value>> = input
            .live
            .iter()
            .filter(|l| {
                labels::template(l) == Some(name.as_str())
                    && labels::slot(l).is_none_or(|s| !slots.contains(s))
            })
            .collect();
        let state_of = |key: &ObjectKey| self.new_states.iter().find(|s| &s.key == key).cloned();
        let ready = |c: &DesiredChild| {
            live.contains_key(&c.key) && state_of(&c.key).is_some_and(|s| s.readiness.is_ready())
        };
        let fresh = if established {
            fresh(&children, name, &in_use, &gone, input.live)
        } else {
            Vec::new()
        };
        let fresh_waiting: Vec<String> = fresh
            .iter()
            .filter(|c| !ready(c))
            .map(|c| c.key.to_string())
            .collect();
        let hold = hold_for(&fresh_waiting);
        let mut serving: Vec<Arc<Value>> = Vec::new();
        let mut pending: Vec<Arc<Value>> = Vec::new();
        let mut versions: Vec<String> = Vec::new();
        let mut complete = true;
        let mut waiting = !fresh_waiting.is_empty();
        for c in &children {
            let slot = labels::slot(&c.object);
            let v = version_label(&c.object).to_owned();
            let state = state_of(&c.key);
            let live_obj = live.get(&c.key).map(|o| Arc::clone(o));
            if fresh.iter().any(|f| f.key == c.key) {
                // The same content under an earlier name, which serves meanwhile: status
                // judges that one (below) until this one is ready, as for a replacement.
                let earlier = earlier_names(&gone, &v, &c.key);
                if ready(c) {
                    out.states.extend(state);
                    serving.extend(live_obj);
                    versions.push(v);
                } else {
                    if earlier.is_empty() {
                        out.states.extend(state.clone());
                    }
                    let started = live_obj.as_ref().map(|o| created(o).to_owned());
                    pending.extend(live_obj);
                    out.rollouts
                        .push(self.waiting_for_new(c, v, state, started, &earlier));
                }
                continue;
            }
            let step = RolloutStep {
                name,
                entry: self.entry,
                version: v,
                slot,
                timeout: self.timeout,
                complete: live_obj.is_some(),
                seen: live_obj.into_iter().collect(),
                new_states: state.into_iter().collect(),
            };
            let before = out.rollouts.len();
            let done = step.settle(input, out, finishing, hold.as_deref());
            waiting |= out.rollouts[before..]
                .iter()
                .any(|r| r.phase == ReplacementPhase::WaitingForNew);
            match done.serving {
                Some(s) => serving.extend(s),
                None => complete = false,
            }
            pending.extend(done.pending);
            versions.extend(done.active);
        }
        // Objects no longer rendered: read while anything of the template waits.
        if waiting && established {
            self.serve_gone(input, &gone, out, &mut serving, &mut versions);
        }
        let vanished = Vanished {
            template: name.clone(),
            keys: gone
                .iter()
                .map(|g| (ObjectKey::of(g), version_label(g).to_owned()))
                .collect(),
            serving: waiting && established,
        };
        if established || complete {
            out.resources.insert(name.clone(), serving);
        }
        out.pending.insert(name.clone(), pending);
        (versions, vanished)
    }

    /// The objects no longer rendered (`gone`), read by dependents meanwhile: judged for
    /// status, served with their versions.
    fn serve_gone(
        &self,
        input: &SetInput<'_>,
        gone: &[&Arc<Value>],
        out: &mut SetResult,
        serving: &mut Vec<Arc<Value>>,
        versions: &mut Vec<String>,
    ) {
        for g in gone {
            if let Ok(r) = readiness::judge(&input.prepared.compiled, self.entry, Some(g)) {
                out.states.push(ChildState {
                    template: self.name.clone(),
                    key: ObjectKey::of(g),
                    readiness: r,
                });
            }
            serving.push(Arc::clone(g));
            versions.push(version_label(g).to_owned());
        }
    }

    /// The rollout state of `c`, a new object not ready yet (its version `v`, its state,
    /// when it was created), while `earlier` (the same content under an earlier name)
    /// serves meanwhile.
    fn waiting_for_new(
        &self,
        c: &DesiredChild,
        v: String,
        state: Option<ChildState>,
        started: Option<String>,
        earlier: &[String],
    ) -> Replacement {
        let why = match state.map(|s| s.readiness) {
            Some(Readiness::NotReady(why)) => format!("{} ({why})", c.key),
            _ => format!("{} (not created yet)", c.key),
        };
        let serves = if earlier.is_empty() {
            String::new()
        } else {
            format!("; {} keeps serving", earlier.join(", "))
        };
        Replacement {
            template: self.name.clone(),
            object: labels::slot(&c.object).map(str::to_owned),
            from: None,
            to: v,
            phase: ReplacementPhase::WaitingForNew,
            waiting_for: format!("the new object to be ready: {why}{serves}"),
            started,
            timeout_seconds: self.timeout,
        }
    }
}

/// What a changed object waits for while new objects of its template (`fresh_waiting`)
/// are not ready: what it drops may move there.
fn hold_for(fresh_waiting: &[String]) -> Option<String> {
    (!fresh_waiting.is_empty()).then(|| {
        format!(
            "waiting for the new {} to be ready first (what this one drops may move there)",
            fresh_waiting.join(", ")
        )
    })
}

/// The objects no longer rendered (`gone`) that carry version `v` under another name than
/// `key`'s: the same content under an earlier name, which serves meanwhile.
fn earlier_names(gone: &[&Arc<Value>], v: &str, key: &ObjectKey) -> Vec<String> {
    gone.iter()
        .filter(|g| version_label(g) == v && &ObjectKey::of(g) != key)
        .map(|g| ObjectKey::of(g).to_string())
        .collect()
}

/// The new objects of template `name` (no version of them live, or only this one) once
/// dependents read the template: shown once ready; until then, changed objects do not
/// switch. A version dependents name (`in_use`) is theirs, unless an object no longer
/// rendered (`gone`) carries it too (the same content under an earlier name): dependents
/// read that one.
fn fresh<'c>(
    children: &'c [DesiredChild],
    name: &str,
    in_use: &BTreeSet<&str>,
    gone: &[&Arc<Value>],
    live: &[Arc<Value>],
) -> Vec<&'c DesiredChild> {
    children
        .iter()
        .filter(|c| {
            let v = version_label(&c.object);
            (!in_use.contains(v)
                || gone
                    .iter()
                    .any(|g| version_label(g) == v && ObjectKey::of(g) != c.key))
                && !live.iter().any(|l| {
                    labels::template(l) == Some(name)
                        && labels::slot(l) == labels::slot(&c.object)
                        && ObjectKey::of(l) != c.key
                })
        })
        .collect()
}

/// The objects per-object templates no longer render stay while dependents read them or
/// a live dependent still names their version ([`still_named`]), and while some child of
/// the set is not ready; then they are pruned, whatever name or versioning made them.
pub(super) fn keep_vanished(input: &SetInput<'_>, out: &mut SetResult, vanished: &[Vanished]) {
    let all_ready = out.states.iter().all(|s| s.readiness.is_ready());
    for v in vanished {
        for (key, version) in &v.keys {
            if v.serving || !all_ready || still_named(&v.template, key, version, input, out) {
                out.keep.insert(key.clone());
            }
        }
    }
}

/// Whether a live dependent may still read `old`, a live object of `template` that this
/// pass neither renders nor shows to dependents, because it names `old`'s version in its
/// `uses` annotation. A version that an object the template renders now carries too (the
/// same content under another name: an earlier release of the blueprint named the object
/// otherwise, or versioned the template as a whole) does not say which of the two a
/// dependent read: it reads `old` unless it is live as rendered now, from objects that
/// do not include `old`.
pub(super) fn still_named(
    template: &str,
    old: &ObjectKey,
    version: &str,
    input: &SetInput<'_>,
    out: &SetResult,
) -> bool {
    let entry = format!("{template}={version}");
    let mut namers = input.live.iter().filter(|l| {
        l["metadata"]["annotations"][labels::USES]
            .as_str()
            .is_some_and(|u| u.split(',').any(|p| p == entry))
    });
    let namesake = out
        .children
        .iter()
        .any(|c| c.template == template && &c.key != old && version_label(&c.object) == version);
    if !namesake {
        return namers.next().is_some();
    }
    namers.any(|l| {
        let key = ObjectKey::of(l);
        !out.children
            .iter()
            .any(|c| c.key == key && is_subset(&c.object, l))
    })
}
