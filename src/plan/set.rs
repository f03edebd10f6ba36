//! What rendering one template set (a Gateway's or a route's) takes and gives: the
//! children it wants, what is held back, how ready each child is, and where
//! make-before-break replacements stand. [`super::templates`] renders a set;
//! [`super::versions`] decides its replacements.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use serde_json::Value;

use super::readiness::Readiness;
use crate::render::labels::Owner;
use crate::render::prepared::Prepared;
use crate::render::{RenderError, TemplateSet};
use crate::snapshot::ObjectKey;

/// A child the plan wants to exist, exactly as it will be applied.
#[derive(Clone, Debug, PartialEq)]
pub struct DesiredChild {
    /// The template that rendered it.
    pub template: String,
    /// Its identity.
    pub key: ObjectKey,
    /// The object, with our labels and owner reference.
    pub object: ChildObject,
}

/// A rendered object, read as a `Value` (it dereferences to one). A remembered route plan
/// whose children were all found to hold what it renders is kept with each object as its
/// JSON text alone ([`ChildObject::compact`]): no pass reads them while the plan holds (the
/// applies skip it), and a parsed Kubernetes object takes 8 to 20 times its text. One that
/// is read all the same is parsed again, and kept until the plan is made again.
pub struct ChildObject {
    parsed: std::sync::OnceLock<Value>,
    /// Its JSON, once compacted.
    text: Option<Box<str>>,
}

impl ChildObject {
    /// Keeps the object as its JSON text alone, until it is read again (serialized the
    /// first time only).
    pub fn compact(&mut self) {
        if let Some(v) = self.parsed.take()
            && self.text.is_none()
        {
            self.text = Some(serde_json::to_string(&v).unwrap_or_default().into());
        }
    }
    /// The object.
    #[must_use]
    pub fn into_value(self) -> Value {
        match self.parsed.into_inner() {
            Some(v) => v,
            None => parse_text(self.text.as_deref()),
        }
    }
    /// Whether it holds its object parsed.
    #[must_use]
    pub fn is_parsed(&self) -> bool {
        self.parsed.get().is_some()
    }
}

/// A compacted object's text, parsed (it was serialized from a `Value`, so it parses;
/// `Null` stands for the impossible).
fn parse_text(text: Option<&str>) -> Value {
    text.and_then(|t| serde_json::from_str(t).ok())
        .unwrap_or_default()
}

impl From<Value> for ChildObject {
    fn from(v: Value) -> Self {
        Self {
            parsed: std::sync::OnceLock::from(v),
            text: None,
        }
    }
}

impl std::ops::Deref for ChildObject {
    type Target = Value;
    fn deref(&self) -> &Value {
        self.parsed.get_or_init(|| parse_text(self.text.as_deref()))
    }
}

impl Clone for ChildObject {
    fn clone(&self) -> Self {
        match (self.parsed.get(), &self.text) {
            (None, Some(t)) => Self {
                parsed: std::sync::OnceLock::new(),
                text: Some(t.clone()),
            },
            _ => Self::from((**self).clone()),
        }
    }
}

impl PartialEq for ChildObject {
    fn eq(&self, other: &Self) -> bool {
        **self == **other
    }
}

impl PartialEq<Value> for ChildObject {
    fn eq(&self, other: &Value) -> bool {
        **self == *other
    }
}

impl std::fmt::Display for ChildObject {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        (**self).fmt(f)
    }
}

impl std::fmt::Debug for ChildObject {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        (**self).fmt(f)
    }
}

/// A template that was not rendered in this pass, and why (not an error).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Held {
    /// Template name.
    pub template: String,
    /// What it waits for.
    pub reason: String,
}

/// The readiness of one desired child.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChildState {
    /// The template that rendered it.
    pub template: String,
    /// Its identity.
    pub key: ObjectKey,
    /// Judgement.
    pub readiness: Readiness,
}

/// What rendering a set gave.
#[derive(Debug, Default)]
pub(crate) struct SetResult {
    pub children: Vec<DesiredChild>,
    pub held: Vec<Held>,
    pub errors: Vec<RenderError>,
    pub states: Vec<ChildState>,
    /// Template -> live objects it rendered (what `resources.<template>` showed).
    pub resources: BTreeMap<String, Vec<Arc<Value>>>,
    /// Make-before-break template -> the live objects of its new version while that
    /// version is not ready yet (what `pending.<template>` shows; empty otherwise): what
    /// must exist for the new version to become ready (a certificate's validation
    /// records) reads it, as dependents read `resources`.
    pub pending: BTreeMap<String, Vec<Arc<Value>>>,
    /// Templates whose output is unknown this pass (held or failed): keep their children.
    pub unsettled: BTreeSet<String>,
    /// Live children that must stay although not rendered: old versions of
    /// make-before-break children still serving or still pointed at.
    pub keep: BTreeSet<ObjectKey>,
    /// Make-before-break replacements in progress.
    pub rollouts: Vec<Replacement>,
    /// Notes that are not errors: kinds of unknown scope (offline, no CRD given).
    pub warnings: Vec<String>,
    /// Objects this parent renders that another parent already holds (not applied).
    pub conflicts: Vec<ObjectKey>,
    /// Addresses member clusters' objects reported that their ClusterProfile does not
    /// allow, left out of what templates read: `<member>: <address>`.
    pub refused_addresses: Vec<String>,
    /// Predecessors of adopted objects to release before their successors are written
    /// (`adopt.release`, a JSON merge patch), see [`super::adopt`].
    pub releases: Vec<(ObjectKey, Value)>,
}

/// Where a make-before-break replacement stands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReplacementPhase {
    /// The new version is created (or being created) and is not ready yet; the old one
    /// serves and its dependents still read it.
    WaitingForNew,
    /// The new version is ready; the templates that read it are re-rendered against it and
    /// must use it and be ready before the old version goes.
    Switching,
    /// Everything uses the new version: the old one is deleted in this pass.
    Finishing,
}

/// A make-before-break replacement in progress, from the live objects alone (so it
/// survives a restart: versions are labels, who uses which version is an annotation).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Replacement {
    /// The template.
    pub template: String,
    /// For a template versioned per object (`rollout.per: Object`): the object, by its
    /// name as rendered.
    pub object: Option<String>,
    /// The version serving now (the old one), if any.
    pub from: Option<String>,
    /// The version being rolled out.
    pub to: String,
    /// Where it stands.
    pub phase: ReplacementPhase,
    /// What it waits for, in words.
    pub waiting_for: String,
    /// When the new version's first object was created (RFC 3339), once it exists.
    pub started: Option<String>,
    /// Seconds the whole replacement may take before it is reported stuck.
    pub timeout_seconds: u64,
}

impl Replacement {
    /// The template, and the object for a template versioned per object: what the
    /// replacement is of, in words.
    #[must_use]
    pub fn label(&self) -> String {
        match &self.object {
            Some(o) => format!("{} (object {o})", self.template),
            None => self.template.clone(),
        }
    }
}

/// One set to render: the blueprint, which set, the parent, and what is live.
pub(crate) struct SetInput<'a> {
    pub prepared: &'a Prepared,
    pub set: TemplateSet,
    pub namespace: &'a str,
    pub owner: Owner<'a>,
    pub live: &'a [Arc<Value>],
    /// What is known of kinds' scopes (cluster-scoped kinds need the blueprint's leave).
    pub scopes: &'a crate::render::scope::KindScopes,
    /// Every live child, of every parent: an object another parent already holds is
    /// never taken over.
    pub all_children: &'a dyn Fn(&ObjectKey) -> Option<Arc<Value>>,
    /// For route templates: the route's kind. A template whose `kinds` do not list it
    /// renders nothing (and what it rendered before is pruned).
    pub route_kind: Option<&'a str>,
    /// The fleet's member clusters, for placed templates.
    pub fleet: &'a BTreeMap<String, crate::snapshot::fleet::FleetMember>,
    /// Whether placed templates render (see `Snapshot::places`).
    pub places: bool,
    /// For route templates: a hash of every input of a keyed route template's text (see
    /// [`crate::render::prepared::Prepared::keys_route_render`]), or `None` to render
    /// every template.
    pub render_key: Option<u64>,
    /// The tenancy boundary its objects are judged against before anything is applied.
    pub boundary: Boundary<'a>,
    /// Why the boundary's refusals are only warnings here: the Gateway still renders an
    /// older revision of its blueprint, waiting for the rollout of the newest (see
    /// [`lenience`]); `None`: they are refusals.
    pub lenient: Option<&'a str>,
}

/// Why the tenancy boundary only warns for a Gateway that renders `revision`: it renders an
/// older revision than its blueprint's newest because the newest's rollout has not reached
/// it, halted or was rolled back. What it rendered before (a release without the boundary,
/// say) stays until the rollout brings the newest, which is judged strictly (and a refusal
/// there fails its wave). A pinned revision is judged strictly.
#[must_use]
pub(crate) fn lenience(revision: Option<&super::revisions::Chosen>) -> Option<String> {
    use super::revisions::Why;
    let r = revision?;
    (r.name != r.newest && matches!(r.why, Why::Waiting | Why::Halted | Why::RolledBack)).then(
        || {
            format!(
                "Gateway renders revision {} while the rollout of {} has not reached it",
                r.name, r.newest
            )
        },
    )
}

/// The tenancy boundary (see [`crate::gateway::boundary`]) a template set's objects are
/// judged against.
pub(crate) enum Boundary<'a> {
    /// A Gateway's own templates: the namespaces each of its listeners admits (by key, as
    /// a child Gateway must say it).
    Gateway(BTreeMap<&'a str, &'a Value>),
    /// A route's templates: what the Gateway accepted the route for, and the Gateways its
    /// own templates rendered (by namespace and name).
    Route {
        accepted: &'a crate::gateway::boundary::RouteAccepted<'a>,
        gateways: &'a [&'a Value],
    },
}

/// The live object of each of `children`, in their order, from the parent's `live` ones.
pub(crate) fn live_of(children: &[DesiredChild], live: &[Arc<Value>]) -> Vec<Option<Arc<Value>>> {
    children
        .iter()
        .map(|c| live.iter().find(|l| ObjectKey::of(l) == c.key).cloned())
        .collect()
}

/// Whether every field of `desired` holds the same value in `live` (lists compared item
/// by item, maps key by key; fields only `live` has are ignored).
#[must_use]
pub fn is_subset(desired: &Value, live: &Value) -> bool {
    match (desired, live) {
        (Value::Object(d), Value::Object(l)) => d
            .iter()
            .all(|(k, v)| l.get(k).is_some_and(|lv| is_subset(v, lv))),
        (Value::Array(d), Value::Array(l)) => {
            d.len() == l.len() && d.iter().zip(l).all(|(a, b)| is_subset(a, b))
        }
        (Value::Number(a), Value::Number(b)) => a.as_f64() == b.as_f64(),
        (a, b) => a == b,
    }
}

/// Where `live` first fails to hold `desired` ([`is_subset`]), as a dotted path (`.` for
/// the whole object; list items by index); `None` when it holds everything. For the logs:
/// what an apply changes.
#[must_use]
pub fn unheld_path(desired: &Value, live: &Value) -> Option<String> {
    fn walk(desired: &Value, live: &Value, at: &mut Vec<String>) -> bool {
        match (desired, live) {
            (Value::Object(d), Value::Object(l)) => d.iter().all(|(k, v)| {
                at.push(k.clone());
                let held = l.get(k).is_some_and(|lv| walk(v, lv, at));
                if held {
                    at.pop();
                }
                held
            }),
            (Value::Array(d), Value::Array(l)) if d.len() == l.len() => {
                d.iter().zip(l).enumerate().all(|(i, (a, b))| {
                    at.push(i.to_string());
                    let held = walk(a, b, at);
                    if held {
                        at.pop();
                    }
                    held
                })
            }
            _ => is_subset(desired, live),
        }
    }
    let mut at = Vec::new();
    if walk(desired, live, &mut at) {
        None
    } else if at.is_empty() {
        Some(".".to_owned())
    } else {
        Some(at.join("."))
    }
}

/// Whether `live` holds what a merge `patch` sets (a drain's, an adoption's release): every field of the patch the same in
/// `live`, where an empty list or null in the patch also matches a field `live` leaves out.
#[must_use]
pub fn drained(patch: &Value, live: &Value) -> bool {
    match patch {
        Value::Object(p) => p.iter().all(|(k, v)| match live.get(k) {
            Some(l) => drained(v, l),
            None => v.is_null() || v.as_array().is_some_and(Vec::is_empty),
        }),
        Value::Array(a) if a.is_empty() => {
            live.is_null() || live.as_array().is_some_and(Vec::is_empty)
        }
        other => is_subset(other, live),
    }
}

#[cfg(test)]
mod unheld_tests {
    use super::unheld_path;
    use serde_json::json;

    #[test]
    fn names_where_the_live_object_first_differs() {
        let desired = json!({"spec": {"rules": [{"port": 80}, {"port": 81}], "a": 1}});
        assert_eq!(unheld_path(&desired, &desired), None);
        let live = json!({"spec": {"rules": [{"port": 80}, {"port": 82}], "a": 1}, "x": 2});
        assert_eq!(
            unheld_path(&desired, &live).as_deref(),
            Some("spec.rules.1.port")
        );
        let shorter = json!({"spec": {"rules": [{"port": 80}], "a": 1}});
        assert_eq!(
            unheld_path(&desired, &shorter).as_deref(),
            Some("spec.rules")
        );
        assert_eq!(unheld_path(&desired, &json!(3)).as_deref(), Some("."));
    }
}

#[cfg(test)]
mod lenience_tests {
    use super::super::revisions::{Chosen, Why};
    use super::lenience;

    fn chosen(name: &str, why: Why) -> Chosen {
        Chosen {
            name: name.into(),
            newest: "bp-2".into(),
            why,
            prepared: Err("not needed".into()),
        }
    }

    #[test]
    fn only_an_older_revision_waiting_for_the_rollout_is_judged_leniently() {
        assert_eq!(lenience(None), None);
        assert_eq!(lenience(Some(&chosen("bp-2", Why::Newest))), None);
        assert_eq!(
            lenience(Some(&chosen("bp-1", Why::Pinned("GatewayConfig x".into())))),
            None,
            "a pin is no way around the boundary"
        );
        for why in [Why::Waiting, Why::Halted, Why::RolledBack] {
            let l = lenience(Some(&chosen("bp-1", why))).unwrap();
            assert!(l.contains("bp-1") && l.contains("bp-2"), "{l}");
        }
    }
}
