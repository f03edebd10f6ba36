//! One replacement: a template's objects (or one object of a template versioned per
//! object) against their old versions: which serves, what dependents read, what stays;
//! and, once every template is rendered, when the old versions go.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use serde_json::Value;

use super::stamp::{created, version_label, versions_in_use};
use crate::plan::readiness::{self, Readiness};
use crate::plan::set::{ChildState, Replacement, ReplacementPhase, SetInput, SetResult};
use crate::render::labels;
use crate::render::prepared::Prepared;
use crate::snapshot::ObjectKey;

/// One make-before-break template's objects as rendered this pass (or, for a template
/// versioned per object, one of its objects).
pub(super) struct RolloutStep<'a> {
    pub(super) name: &'a String,
    pub(super) entry: &'a crate::api::TemplateEntry,
    pub(super) version: String,
    /// Per object: the object (its name as rendered); its versions are the old ones.
    pub(super) slot: Option<&'a str>,
    pub(super) timeout: u64,
    pub(super) complete: bool,
    pub(super) seen: Vec<Arc<Value>>,
    pub(super) new_states: Vec<ChildState>,
}

/// What [`RolloutStep::settle`] decided for dependents.
#[derive(Default)]
pub(super) struct Settled {
    /// The objects dependents read, when known (every one of them exists).
    pub(super) serving: Option<Vec<Arc<Value>>>,
    /// The new version's objects while they are not ready (`pending.<template>`).
    pub(super) pending: Vec<Arc<Value>>,
    /// The version dependents are rendered from.
    pub(super) active: Option<String>,
}

impl RolloutStep<'_> {
    /// Decides which version serves (and what dependents read), what old objects stay,
    /// and where the replacement stands. `hold`: why the new version may not take over
    /// yet although it is ready (per object: another object it may take names from is not
    /// ready yet).
    pub(super) fn settle(
        self,
        input: &SetInput<'_>,
        out: &mut SetResult,
        finishing: &mut Vec<Finishing>,
        hold: Option<&str>,
    ) -> Settled {
        let name = self.name;
        let olds = self.olds(input.live);
        let v = self.version;
        let ready_now = self.complete && self.new_states.iter().all(|s| s.readiness.is_ready());
        let new_ready = ready_now && hold.is_none();
        if olds.is_empty() {
            // First version, or nothing to replace: as an in-place template.
            out.states.extend(self.new_states);
            return Settled {
                serving: self.complete.then_some(self.seen),
                pending: Vec::new(),
                active: Some(v),
            };
        }
        let in_use = versions_in_use(input.live, name);
        let started = self
            .seen
            .iter()
            .map(|o| created(o).to_owned())
            .min()
            .filter(|t| !t.is_empty());
        let ready = |objs: &[&Arc<Value>]| {
            objs.iter().all(|o| {
                readiness::judge(&input.prepared.compiled, self.entry, Some(o))
                    .is_ok_and(|r| r.is_ready())
            })
        };
        let newest = |objs: &[&Arc<Value>]| -> String {
            objs.iter()
                .map(|o| created(o).to_owned())
                .max()
                .unwrap_or_default()
        };
        // The version serving while the new one is not ready: the one dependents point at,
        // else a ready one, else any; the newest of those.
        let pick = |pred: &dyn Fn(&str, &[&Arc<Value>]) -> bool| {
            olds.iter()
                .filter(|(ver, objs)| pred(ver, objs))
                .max_by_key(|(_, objs)| newest(objs))
                .map(|(ver, _)| (*ver).to_owned())
        };
        let serving = if new_ready {
            None
        } else {
            pick(&|ver, _| in_use.contains(ver))
                .or_else(|| pick(&|_, objs| ready(objs)))
                .or_else(|| pick(&|_, _| true))
        };
        let old_keys = |ver: &str| -> Vec<ObjectKey> {
            olds.get(ver)
                .map(|objs| objs.iter().map(|o| ObjectKey::of(o)).collect())
                .unwrap_or_default()
        };
        let object = self.slot.map(str::to_owned);
        if let Some(old) = serving {
            // The old version serves: dependents read it, status judges it; the new one is
            // applied beside it (and shown as pending). Versions neither serving nor
            // pointed at are superseded.
            let objs = olds.get(old.as_str()).cloned().unwrap_or_default();
            judge_old(input, self.entry, name, &objs, out);
            for ver in olds
                .keys()
                .filter(|ver| **ver == old || in_use.contains(*ver))
            {
                out.keep.extend(old_keys(ver));
            }
            let waiting_for = waiting_for(&self.new_states, hold, ready_now, &old);
            out.rollouts.push(Replacement {
                template: name.clone(),
                object,
                from: Some(old.clone()),
                to: v.clone(),
                phase: ReplacementPhase::WaitingForNew,
                waiting_for,
                started,
                timeout_seconds: self.timeout,
            });
            Settled {
                serving: Some(objs.iter().map(|o| Arc::clone(o)).collect()),
                pending: self.seen,
                active: Some(old),
            }
        } else {
            // The new version is ready: dependents switch to it in this pass; the old ones
            // go once nothing points at them and the dependents are ready.
            out.states.extend(self.new_states);
            let old_versions: Vec<String> = olds.keys().map(|k| (*k).to_owned()).collect();
            let keys: Vec<ObjectKey> = olds.keys().flat_map(|ver| old_keys(ver)).collect();
            out.keep.extend(keys.iter().cloned());
            out.rollouts.push(Replacement {
                template: name.clone(),
                object,
                from: old_versions.last().cloned(),
                to: v.clone(),
                phase: ReplacementPhase::Switching,
                waiting_for: String::new(),
                started,
                timeout_seconds: self.timeout,
            });
            finishing.push(Finishing {
                template: name.clone(),
                version: v.clone(),
                old_keys: keys,
            });
            Settled {
                serving: Some(self.seen),
                pending: Vec::new(),
                active: Some(v),
            }
        }
    }

    /// The live objects of the template (of this object, per object) of another version
    /// than this pass's, by version.
    fn olds<'l>(&self, live: &'l [Arc<Value>]) -> BTreeMap<&'l str, Vec<&'l Arc<Value>>> {
        let mut olds: BTreeMap<&str, Vec<&Arc<Value>>> = BTreeMap::new();
        for c in live.iter().filter(|c| {
            labels::template(c) == Some(self.name.as_str())
                && version_label(c) != self.version
                && self.slot.is_none_or(|s| labels::slot(c) == Some(s))
        }) {
            olds.entry(version_label(c)).or_default().push(c);
        }
        olds
    }
}

/// Status judges the old version's objects `objs` while they serve.
fn judge_old(
    input: &SetInput<'_>,
    entry: &crate::api::TemplateEntry,
    name: &str,
    objs: &[&Arc<Value>],
    out: &mut SetResult,
) {
    for o in objs {
        let key = ObjectKey::of(o);
        if let Ok(r) = readiness::judge(&input.prepared.compiled, entry, Some(o)) {
            out.states.push(ChildState {
                template: name.to_owned(),
                key: key.clone(),
                readiness: r,
            });
        }
    }
}

/// What the replacement waits for while version `old` keeps serving: what `hold`
/// says once the new version is ready (`ready_now`), else the new objects (`new_states`)
/// not ready.
fn waiting_for(
    new_states: &[ChildState],
    hold: Option<&str>,
    ready_now: bool,
    old: &str,
) -> String {
    match hold {
        Some(why) if ready_now => {
            format!("{why}; version {old} keeps serving until then")
        }
        _ => {
            let waiting: Vec<String> = new_states
                .iter()
                .filter(|s| !s.readiness.is_ready())
                .map(|s| match &s.readiness {
                    Readiness::NotReady(why) => format!("{} ({why})", s.key),
                    _ => format!("{} (not created yet)", s.key),
                })
                .collect();
            format!(
                "the new version to be ready: {}; version {old} keeps serving",
                waiting.join("; ")
            )
        }
    }
}

/// A replacement whose new version is ready and serves: what [`finish_rollouts`] lets go
/// once what reads the template uses the new version.
#[derive(Debug)]
pub(super) struct Finishing {
    /// The template.
    pub(super) template: String,
    /// The new version.
    pub(super) version: String,
    /// The old versions' live objects.
    pub(super) old_keys: Vec<ObjectKey>,
}

/// For each replacement whose new version is ready: the old version is let go (pruned
/// in this pass) once every live child of a template that reads it says it uses the new
/// version, and every child of the set is ready (so the Gateway is still Programmed).
pub(super) fn finish_rollouts(
    prepared: &Prepared,
    input: &SetInput<'_>,
    out: &mut SetResult,
    finishing: &[Finishing],
) {
    let graph = prepared.graph(input.set);
    for Finishing {
        template: name,
        version: v,
        old_keys,
    } in finishing
    {
        let dependents: BTreeSet<&String> = graph
            .deps
            .iter()
            .filter(|(_, deps)| deps.contains(name))
            .map(|(t, _)| t)
            .collect();
        let stale: Vec<String> = input
            .live
            .iter()
            .filter(|c| labels::template(c).is_some_and(|t| dependents.iter().any(|d| *d == t)))
            .filter(|c| {
                let uses = c["metadata"]["annotations"][labels::USES]
                    .as_str()
                    .unwrap_or_default();
                !uses.split(',').any(|p| p == format!("{name}={v}"))
            })
            .map(|c| ObjectKey::of(c).to_string())
            .collect();
        // Every child of the set ready (the Gateway still Programmed), those reading the
        // new version included.
        let not_ready: Vec<String> = out
            .states
            .iter()
            .filter(|s| !s.readiness.is_ready())
            .map(|s| s.key.to_string())
            .collect();
        let held: Vec<&String> = out
            .held
            .iter()
            .map(|h| &h.template)
            .filter(|t| dependents.contains(t))
            .collect();
        let Some(r) = out
            .rollouts
            .iter_mut()
            .find(|r| &r.template == name && &r.to == v)
        else {
            continue;
        };
        if stale.is_empty() && not_ready.is_empty() && held.is_empty() {
            out.keep.retain(|k| !old_keys.contains(k));
            r.phase = ReplacementPhase::Finishing;
            r.waiting_for = format!(
                "deleting the old version: {}",
                old_keys
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        } else {
            let mut why = Vec::new();
            if !stale.is_empty() {
                why.push(format!("to point at version {v}: {}", stale.join(", ")));
            }
            if !not_ready.is_empty() {
                why.push(format!("to be ready: {}", not_ready.join(", ")));
            }
            if !held.is_empty() {
                why.push(format!(
                    "to render: {}",
                    held.iter()
                        .map(|t| t.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
            }
            r.waiting_for = format!(
                "the version {v} is ready; waiting for what reads it {}",
                why.join("; ")
            );
        }
    }
}
