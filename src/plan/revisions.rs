//! Which revision of its blueprint a Gateway renders.
//!
//! Every change of a blueprint's spec (its `rolloutPolicy` aside) is a revision, told apart
//! by the hash of the spec ([`spec_hash`]) and named `<blueprint>-<n>`. The newest revision
//! is the one whose hash is the spec's (before the controller made its object, it is the
//! blueprint's own spec under the name it will get). Without a `rolloutPolicy` every
//! Gateway renders the newest. With one, [`choose`] keeps a Gateway on the revision it
//! renders (its `gatewright.dev/Revision` condition says which) until the rollout reaches
//! it ([`super::waves`] decides the waves; the blueprint's status lists them), and a
//! pin (a GatewayConfig's `revision`) holds it on the one named.

use std::sync::Arc;

use gateway_api::apis::standard::gateways::Gateway;

use crate::api::{GatewayClassBlueprintSpec, RolloutPhase, RolloutStatus};
use crate::gateway::conditions::{Cond, types};
use crate::render::RenderError;
use crate::render::prepared::Prepared;
use crate::snapshot::{BlueprintEntry, Key, RevisionEntry, Snapshot};

/// The hash of a blueprint spec as a revision holds it
/// ([`GatewayClassBlueprintSpec::revision_hash`]).
#[must_use]
pub fn spec_hash(spec: &GatewayClassBlueprintSpec) -> String {
    spec.revision_hash()
}

/// The name of revision `n` of `blueprint`.
#[must_use]
pub fn name_of(blueprint: &str, n: i64) -> String {
    format!("{blueprint}-{n}")
}

/// The newest revision of a blueprint: its name and number, and its object once made.
#[derive(Clone, Debug)]
pub struct Newest<'a> {
    /// `<blueprint>-<n>`.
    pub name: String,
    /// `n`.
    pub number: i64,
    /// The spec's hash.
    pub hash: String,
    /// The revision object, once the controller made it.
    pub object: Option<&'a Arc<RevisionEntry>>,
}

/// The newest revision of `bp`: the revision whose hash is its spec's, else the one the
/// controller is to make (one more than the highest).
#[must_use]
pub fn newest<'a>(snap: &'a Snapshot, bp: &BlueprintEntry) -> Newest<'a> {
    let name = bp.object.metadata.name.as_deref().unwrap_or_default();
    let hash = bp.hash.clone();
    let all = snap.revisions_of(name);
    if let Some(r) = all.iter().rev().find(|r| r.object.spec.hash == hash) {
        return Newest {
            name: r.name().to_owned(),
            number: r.object.spec.revision,
            hash,
            object: Some(r),
        };
    }
    let number = all.last().map_or(1, |r| r.object.spec.revision + 1);
    Newest {
        name: name_of(name, number),
        number,
        hash,
        object: None,
    }
}

/// The revision a Gateway's status says it renders (its `gatewright.dev/Revision`
/// condition's message starts with the name).
#[must_use]
pub fn recorded(gw: &Gateway) -> Option<&str> {
    gw.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == types::REVISION)
        .and_then(|c| c.message.split(':').next())
        .filter(|n| !n.is_empty())
}

/// Whether a Gateway was converged by a release of gatewright that recorded no revision:
/// it holds our finalizer but its status names no revision.
#[must_use]
pub fn predates(gw: &Gateway) -> bool {
    let ours = gw.metadata.finalizers.as_ref().is_some_and(|f| {
        f.iter()
            .any(|f| f == crate::render::labels::GATEWAY_FINALIZER)
    });
    ours && recorded(gw).is_none()
}

/// Revision 0 of a blueprint, `<blueprint>-0`: the spec the previous release shipped in its
/// place ([`crate::api::PREVIOUS_RELEASE_ANNOTATION`]), which the Gateways that release
/// converged ([`predates`]) render until the rollout reaches them. Its object once made;
/// before that, while the blueprint has no revision at all, the annotation's spec when it
/// differs from the blueprint's own (the same spec is simply the newest).
#[must_use]
pub fn predecessor(snap: &Snapshot, bp: &BlueprintEntry) -> Option<String> {
    let bp_name = bp.object.metadata.name.as_deref().unwrap_or_default();
    let name = name_of(bp_name, 0);
    if snap
        .revision(&name)
        .is_some_and(|r| r.object.spec.blueprint == bp_name)
    {
        return Some(name);
    }
    let Some(Ok(previous)) = &bp.previous else {
        return None;
    };
    (previous.prepared.is_ok() && previous.hash != bp.hash && snap.revisions_of(bp_name).is_empty())
        .then_some(name)
}

/// Why the blueprint's [`crate::api::PREVIOUS_RELEASE_ANNOTATION`] is not used, for its
/// status: it does not parse, or its spec does not compile with this release (then the
/// Gateways the previous release converged render the newest, as without it).
#[must_use]
pub fn previous_ignored(bp: &BlueprintEntry) -> Option<String> {
    match bp.previous.as_ref()? {
        Err(e) => Some(format!("{e}; ignored")),
        Ok(p) => p.prepared.as_ref().err().map(|errors| {
            format!(
                "the spec of release {} in annotation {} does not compile: {}; ignored",
                p.release,
                crate::api::PREVIOUS_RELEASE_ANNOTATION,
                super::class::first_errors(errors)
            )
        }),
    }
}

/// The revision Gateway `gw` renders now, of blueprint `bp`: the one its status records,
/// else revision 0 for a Gateway the previous release converged (when there is one).
#[must_use]
pub fn current_of(snap: &Snapshot, bp: &BlueprintEntry, gw: &Gateway) -> Option<String> {
    match recorded(gw) {
        Some(r) => Some(r.to_owned()),
        None if predates(gw) => predecessor(snap, bp),
        None => None,
    }
}

/// Why a Gateway renders the revision it does.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Why {
    /// It is the newest.
    Newest,
    /// The rollout of the newest has not reached the Gateway yet.
    Waiting,
    /// A GatewayConfig pins it.
    Pinned(String),
    /// The rollout of the newest failed and was rolled back.
    RolledBack,
    /// The rollout of the newest halted before it reached the Gateway.
    Halted,
}

/// The revision a Gateway renders.
#[derive(Clone, Debug)]
pub struct Chosen {
    /// Its name.
    pub name: String,
    /// The newest revision's name.
    pub newest: String,
    /// Why.
    pub why: Why,
    /// What to render, or why it cannot be.
    pub prepared: Result<Arc<Prepared>, String>,
}

impl Chosen {
    /// The Gateway's `gatewright.dev/Revision` condition: True when it renders the newest.
    #[must_use]
    pub fn condition(&self) -> Cond {
        let t = types::REVISION;
        let (name, newest) = (&self.name, &self.newest);
        match &self.why {
            Why::Newest => Cond::t(t, "Newest", &format!("{name}: the newest revision")),
            Why::Waiting => Cond::f(
                t,
                "RolloutPending",
                &format!("{name}: the rollout of {newest} has not reached this Gateway yet"),
            ),
            Why::Halted => Cond::f(
                t,
                "RolloutHalted",
                &format!("{name}: the rollout of {newest} halted before it reached this Gateway"),
            ),
            Why::RolledBack => Cond::f(
                t,
                "RolledBack",
                &format!("{name}: the rollout of {newest} was rolled back"),
            ),
            Why::Pinned(by) => Cond::f(
                t,
                "Pinned",
                &format!("{name}: pinned by {by}; the newest is {newest}"),
            ),
        }
    }
}

/// Whether the Gateway `key` (`namespace/name`) has been moved by `rollout`.
#[must_use]
pub fn released(rollout: &RolloutStatus, key: &str) -> bool {
    rollout.waves.iter().any(|w| {
        w.gateways
            .iter()
            .take(usize::try_from(w.released).unwrap_or(usize::MAX))
            .any(|g| g == key)
    })
}

/// The GatewayConfig pinning a Gateway on a revision (its own, else its Namespace's), and
/// the revision.
#[must_use]
pub fn pin(snap: &Snapshot, gw: &Gateway) -> Option<(String, String)> {
    let ns = gw.metadata.namespace.as_deref().unwrap_or_default();
    let name = gw.metadata.name.as_deref().unwrap_or_default();
    let param = super::policy::parameters_ref_name(gw);
    [("Gateway", name), ("Namespace", ns)]
        .into_iter()
        .filter_map(|(kind, target)| {
            super::policy::gateway_config_for(snap, ns, kind, target, param)
        })
        .find_map(|c| {
            c.spec.revision.clone().map(|r| {
                (
                    format!(
                        "GatewayConfig {}/{}",
                        c.metadata.namespace.as_deref().unwrap_or_default(),
                        c.metadata.name.as_deref().unwrap_or_default()
                    ),
                    r,
                )
            })
        })
}

/// What a revision renders: the blueprint's own compiled spec for the newest (the same
/// object the blueprint's status judges), a revision's for an older one.
fn prepared_of(
    snap: &Snapshot,
    bp: &BlueprintEntry,
    newest: &Newest<'_>,
    name: &str,
) -> Result<Arc<Prepared>, String> {
    let bp_name = bp.object.metadata.name.as_deref().unwrap_or_default();
    fn compiled<'p>(
        snap: &Snapshot,
        prepared: &'p Result<Arc<Prepared>, Vec<RenderError>>,
    ) -> (Option<&'p Arc<Prepared>>, Vec<RenderError>) {
        match prepared {
            Ok(p) => (Some(p), p.scope_errors(snap.scopes())),
            Err(e) => (None, e.clone()),
        }
    }
    let (prepared, errors) = if name == newest.name {
        let errors = super::class::blueprint_errors(snap, bp);
        (bp.prepared.as_ref().ok(), errors)
    } else if let Some(r) = snap.revision(name) {
        if r.object.spec.blueprint != bp_name {
            return Err(format!(
                "{} {name} is a revision of {}, not of {bp_name}",
                crate::api::REVISION_KIND,
                r.object.spec.blueprint
            ));
        }
        compiled(snap, &r.prepared)
    } else {
        // Revision 0 before its object is made: the previous release's spec.
        match &bp.previous {
            Some(Ok(p)) if name == name_of(bp_name, 0) => compiled(snap, &p.prepared),
            _ => return Err(format!("{} {name} not found", crate::api::REVISION_KIND)),
        }
    };
    match prepared {
        Some(p) if errors.is_empty() => Ok(p.clone()),
        _ => Err(format!(
            "revision {name} of {} {bp_name} is invalid: {}",
            crate::api::BLUEPRINT_KIND,
            super::class::first_errors(&errors)
        )),
    }
}

/// What a Gateway of `class` renders: the revision of the class's blueprint [`choose`]
/// picks for it (`None` without a blueprint), and its prepared templates or why there are
/// none.
pub fn resolve(
    snap: &Snapshot,
    class: &gateway_api::apis::standard::gatewayclasses::GatewayClass,
    gw: &Gateway,
    key: &Key,
) -> (Result<Arc<Prepared>, String>, Option<Chosen>) {
    let entry = match super::class::blueprint_of(snap, class) {
        Ok(e) => e,
        Err(e) => return (Err(e), None),
    };
    let chosen = choose(snap, entry, gw, key);
    (chosen.prepared.clone(), Some(chosen))
}

/// The revision the Gateway `gw` (`key`) renders, of blueprint `bp`.
#[must_use]
pub fn choose(snap: &Snapshot, bp: &BlueprintEntry, gw: &Gateway, key: &Key) -> Chosen {
    let newest = newest(snap, bp);
    let pick = |name: &str, why: Why| Chosen {
        name: name.to_owned(),
        newest: newest.name.clone(),
        prepared: prepared_of(snap, bp, &newest, name),
        why,
    };
    if let Some((by, revision)) = pin(snap, gw) {
        return pick(&revision, Why::Pinned(by));
    }
    let Some(_policy) = &bp.object.spec.rollout_policy else {
        return pick(&newest.name, Why::Newest);
    };
    // A revision of this blueprint the Gateway renders and that can still be rendered (its
    // object is there, or it is the newest). One of another blueprint (the Gateway moved
    // to another class) does not count.
    let bp_name = bp.object.metadata.name.as_deref().unwrap_or_default();
    let current = current_of(snap, bp, gw).filter(|r| {
        *r == newest.name
            || snap
                .revision(r)
                .is_some_and(|e| e.object.spec.blueprint == bp_name)
            || predecessor(snap, bp).as_deref() == Some(r.as_str())
    });
    let rollout = bp
        .object
        .status
        .as_ref()
        .and_then(|s| s.rollout.as_ref())
        .filter(|r| r.revision == newest.name);
    let Some(rollout) = rollout else {
        // The rollout of the newest has not started: every Gateway stays where it is; a
        // new one takes the newest.
        return match current {
            Some(c) if c != newest.name => pick(&c, Why::Waiting),
            _ => pick(&newest.name, Why::Newest),
        };
    };
    let moved = released(rollout, &key.to_string());
    let back = rollout
        .from
        .as_deref()
        .filter(|f| snap.revision(f).is_some());
    match rollout.phase {
        RolloutPhase::Complete => pick(&newest.name, Why::Newest),
        RolloutPhase::RolledBack => match (back, &current) {
            (Some(f), _) if moved || current.as_deref() == Some(newest.name.as_str()) => {
                pick(f, Why::RolledBack)
            }
            (_, Some(c)) if *c != newest.name => pick(c, Why::RolledBack),
            (Some(f), None) => pick(f, Why::RolledBack),
            _ => pick(&newest.name, Why::Newest),
        },
        RolloutPhase::Progressing | RolloutPhase::Paused | RolloutPhase::Halted => {
            let halted = rollout.phase == RolloutPhase::Halted;
            match current {
                _ if moved => pick(&newest.name, Why::Newest),
                Some(c) if c != newest.name => {
                    pick(&c, if halted { Why::Halted } else { Why::Waiting })
                }
                // New during a halted rollout: what the rollout started from.
                None if halted && back.is_some() => pick(back.unwrap_or_default(), Why::Halted),
                _ => pick(&newest.name, Why::Newest),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{GatewayClassBlueprint, RolloutPolicy, WaveStatus};
    use serde_json::json;

    fn world(policy: bool, status: Option<RolloutStatus>) -> (Snapshot, Gateway, Key) {
        let mut s = Snapshot::default();
        let spec = |label: &str| json!({"gatewayTemplates": [{"name": "a", "template": format!("apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {label}}}\n")}]});
        let mut bp: GatewayClassBlueprint = serde_json::from_value(json!({
            "apiVersion": "gatewright.dev/v1alpha1", "kind": "GatewayClassBlueprint",
            "metadata": {"name": "bp"}, "spec": spec("new"),
        }))
        .unwrap();
        if policy {
            bp.spec.rollout_policy = Some(RolloutPolicy::default());
        }
        bp.status = Some(crate::api::BlueprintStatus {
            rollout: status,
            ..Default::default()
        });
        let old: GatewayClassBlueprintSpec = serde_json::from_value(spec("old")).unwrap();
        let rev = crate::api::GatewayClassBlueprintRevision::new(
            "bp-1",
            crate::api::GatewayClassBlueprintRevisionSpec {
                blueprint: "bp".into(),
                revision: 1,
                hash: spec_hash(&old),
                template: old,
            },
        );
        s.put_revision(rev);
        s.put_blueprint(bp);
        let gw: Gateway = serde_json::from_value(json!({
            "apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
            "metadata": {"namespace": "ns", "name": "g"},
            "spec": {"gatewayClassName": "c", "listeners": []},
            "status": {"conditions": [{"type": types::REVISION, "status": "True", "reason": "Newest",
                "message": "bp-1: the newest revision", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}
        }))
        .unwrap();
        (s, gw, Key::new("ns", "g"))
    }

    fn pick(s: &Snapshot, gw: &Gateway, key: &Key) -> (String, Why) {
        let c = choose(s, s.blueprint("bp").unwrap(), gw, key);
        assert!(c.prepared.is_ok(), "{:?}", c.prepared);
        (c.name, c.why)
    }

    #[test]
    fn without_a_policy_every_gateway_renders_the_newest_under_the_name_it_will_get() {
        let (s, gw, key) = world(false, None);
        assert_eq!(pick(&s, &gw, &key), ("bp-2".into(), Why::Newest));
    }

    #[test]
    fn with_a_policy_a_gateway_stays_until_its_wave_is_released() {
        let (s, gw, key) = world(true, None);
        assert_eq!(pick(&s, &gw, &key), ("bp-1".into(), Why::Waiting));
        let mut rollout = RolloutStatus {
            revision: "bp-2".into(),
            from: Some("bp-1".into()),
            waves: vec![WaveStatus {
                name: "wave-1".into(),
                gateways: vec!["ns/other".into(), "ns/g".into()],
                released: 1,
                ..Default::default()
            }],
            ..Default::default()
        };
        let (s, gw, key) = world(true, Some(rollout.clone()));
        assert_eq!(pick(&s, &gw, &key), ("bp-1".into(), Why::Waiting));
        rollout.waves[0].released = 2;
        let (s, gw, key) = world(true, Some(rollout.clone()));
        assert_eq!(pick(&s, &gw, &key), ("bp-2".into(), Why::Newest));
        rollout.phase = RolloutPhase::RolledBack;
        let (s, gw, key) = world(true, Some(rollout.clone()));
        assert_eq!(pick(&s, &gw, &key), ("bp-1".into(), Why::RolledBack));
        rollout.phase = RolloutPhase::Complete;
        rollout.waves[0].released = 0;
        let (s, gw, key) = world(true, Some(rollout));
        assert_eq!(pick(&s, &gw, &key), ("bp-2".into(), Why::Newest));
    }

    #[test]
    fn a_new_gateway_takes_the_newest_and_the_recorded_name_is_read_back() {
        let (s, mut gw, key) = world(true, None);
        assert_eq!(recorded(&gw), Some("bp-1"));
        gw.status = None;
        assert_eq!(pick(&s, &gw, &key), ("bp-2".into(), Why::Newest));
        let c = choose(&s, s.blueprint("bp").unwrap(), &gw, &key).condition();
        assert!(c.message.starts_with("bp-2:"), "{}", c.message);
    }

    #[test]
    fn a_revision_of_another_blueprint_is_not_where_a_gateway_stays() {
        let (mut s, mut gw, key) = world(true, None);
        let other: GatewayClassBlueprintSpec = serde_json::from_value(json!({})).unwrap();
        s.put_revision(crate::api::GatewayClassBlueprintRevision::new(
            "other-7",
            crate::api::GatewayClassBlueprintRevisionSpec {
                blueprint: "other".into(),
                revision: 7,
                hash: spec_hash(&other),
                template: other,
            },
        ));
        gw.status.as_mut().unwrap().conditions.as_mut().unwrap()[0].message =
            "other-7: the newest revision".into();
        assert_eq!(pick(&s, &gw, &key), ("bp-2".into(), Why::Newest));
    }

    #[test]
    fn the_hash_ignores_the_rollout_policy() {
        let mut spec = GatewayClassBlueprintSpec::default();
        let h = spec_hash(&spec);
        spec.rollout_policy = Some(RolloutPolicy {
            paused: true,
            ..Default::default()
        });
        assert_eq!(spec_hash(&spec), h);
        spec.route_kinds = vec!["GRPCRoute".into()];
        assert_ne!(spec_hash(&spec), h);
    }

    /// A blueprint `bp` with a policy and the annotation of a previous release whose spec
    /// renders `previous` (no revision made yet), and two Gateways: `old` converged by that
    /// release (our finalizer, no revision recorded) and `new` not planned yet.
    fn upgraded(previous: &str) -> (Snapshot, Gateway, Gateway) {
        let spec = |label: &str| json!({"gatewayTemplates": [{"name": "a", "template": format!("apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {label}}}\n")}]});
        let annotation = json!({"release": "0.1.0", "spec": spec(previous)}).to_string();
        let mut bp: GatewayClassBlueprint = serde_json::from_value(json!({
            "apiVersion": "gatewright.dev/v1alpha1", "kind": "GatewayClassBlueprint",
            "metadata": {"name": "bp", "annotations": {crate::api::PREVIOUS_RELEASE_ANNOTATION: annotation}},
            "spec": spec("new"),
        }))
        .unwrap();
        bp.spec.rollout_policy = Some(RolloutPolicy::default());
        let mut s = Snapshot::default();
        s.put_blueprint(bp);
        let gw = |name: &str, finalizers: serde_json::Value| -> Gateway {
            serde_json::from_value(json!({
                "apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
                "metadata": {"namespace": "ns", "name": name, "finalizers": finalizers},
                "spec": {"gatewayClassName": "c", "listeners": []},
            }))
            .unwrap()
        };
        let old = gw("old", json!([crate::render::labels::GATEWAY_FINALIZER]));
        (s, old, gw("new", json!([])))
    }

    #[test]
    fn a_gateway_the_previous_release_converged_renders_its_spec_until_the_rollout_reaches_it() {
        let (mut s, old, new) = upgraded("old");
        let (ko, kn) = (Key::new("ns", "old"), Key::new("ns", "new"));
        assert!(predates(&old) && !predates(&new));
        let bp = s.blueprint("bp").unwrap().clone();
        assert_eq!(predecessor(&s, &bp).as_deref(), Some("bp-0"));
        assert_eq!(previous_ignored(&bp), None);
        // Before revision 0 is made, from the annotation's compiled spec.
        let c = choose(&s, &bp, &old, &ko);
        assert_eq!((c.name.as_str(), &c.why), ("bp-0", &Why::Waiting));
        let Some(Ok(previous)) = &bp.previous else {
            panic!("no previous release read")
        };
        assert!(Arc::ptr_eq(
            c.prepared.as_ref().unwrap(),
            previous.prepared.as_ref().unwrap()
        ));
        assert_eq!(current_of(&s, &bp, &old).as_deref(), Some("bp-0"));
        // A Gateway the previous release never planned takes the newest.
        assert_eq!(pick(&s, &new, &kn), ("bp-1".into(), Why::Newest));
        assert_eq!(current_of(&s, &bp, &new), None);
        // Once made, from its object; the newest is then number 1.
        let mut template = previous.spec.clone();
        template.rollout_policy = None;
        s.put_revision(crate::api::GatewayClassBlueprintRevision::new(
            "bp-0",
            crate::api::GatewayClassBlueprintRevisionSpec {
                blueprint: "bp".into(),
                revision: 0,
                hash: previous.hash.clone(),
                template,
            },
        ));
        assert_eq!(newest(&s, &bp).name, "bp-1");
        assert_eq!(pick(&s, &old, &ko), ("bp-0".into(), Why::Waiting));
        // Released by the rollout: the newest.
        let rollout = RolloutStatus {
            revision: "bp-1".into(),
            from: Some("bp-0".into()),
            phase: RolloutPhase::Progressing,
            waves: vec![WaveStatus {
                name: "w".into(),
                gateways: vec!["ns/old".into()],
                released: 1,
                ..Default::default()
            }],
            ..Default::default()
        };
        let mut b = bp.object.clone();
        b.status = Some(crate::api::BlueprintStatus {
            rollout: Some(rollout),
            ..Default::default()
        });
        s.put_blueprint(b);
        assert_eq!(pick(&s, &old, &ko), ("bp-1".into(), Why::Newest));
    }

    #[test]
    fn without_a_change_since_the_previous_release_or_a_readable_one_there_is_no_revision_0() {
        // The same spec: the Gateways converged by the previous release take the newest.
        let (s, old, _) = upgraded("new");
        let bp = s.blueprint("bp").unwrap();
        assert_eq!(predecessor(&s, bp), None);
        assert_eq!(
            pick(&s, &old, &Key::new("ns", "old")),
            ("bp-1".into(), Why::Newest)
        );
        // A spec that does not compile here is said and ignored.
        let (mut s, old, _) = upgraded("{{ broken");
        assert_eq!(predecessor(&s, s.blueprint("bp").unwrap()), None);
        let said = previous_ignored(s.blueprint("bp").unwrap()).unwrap();
        assert!(
            said.contains("release 0.1.0") && said.ends_with("ignored"),
            "{said}"
        );
        assert_eq!(
            pick(&s, &old, &Key::new("ns", "old")),
            ("bp-1".into(), Why::Newest)
        );
        // An annotation that is not one.
        let mut b = s.blueprint("bp").unwrap().object.clone();
        b.metadata.annotations = Some(std::collections::BTreeMap::from([(
            crate::api::PREVIOUS_RELEASE_ANNOTATION.to_owned(),
            "0.1.0".to_owned(),
        )]));
        s.put_blueprint(b);
        let said = previous_ignored(s.blueprint("bp").unwrap()).unwrap();
        assert!(
            said.contains(crate::api::PREVIOUS_RELEASE_ANNOTATION),
            "{said}"
        );
        assert_eq!(predecessor(&s, s.blueprint("bp").unwrap()), None);
        // Once the blueprint has a revision, the annotation no longer makes one.
        let (mut s, _, _) = upgraded("old");
        let spec: GatewayClassBlueprintSpec = serde_json::from_value(json!({})).unwrap();
        s.put_revision(crate::api::GatewayClassBlueprintRevision::new(
            "bp-1",
            crate::api::GatewayClassBlueprintRevisionSpec {
                blueprint: "bp".into(),
                revision: 1,
                hash: spec_hash(&spec),
                template: spec,
            },
        ));
        assert_eq!(predecessor(&s, s.blueprint("bp").unwrap()), None);
    }
}
