//! Our policies (`GatewayClassConfig`, `GatewayConfig`): which one applies where, and the
//! status each gets (GEP-713 `PolicyAncestorStatus`). Pure.
//!
//! Policies of one kind in one namespace that target the same object do not merge: the
//! oldest (creation time, then name) applies and the others are `Conflicted`, as GEP-713
//! asks of policies at one level. A Gateway's `spec.infrastructure.parametersRef` to a
//! `GatewayConfig` beats any `GatewayConfig` whose `targetRef` names that Gateway. Across
//! levels (blueprint, cluster-wide class policy, namespace, class in the namespace,
//! Gateway) values merge as "Values order" in docs/blueprints.md says.
//!
//! In: the snapshot and a policy's key. Out: the winners the values merge reads, and per
//! policy its ancestors (the Gateways it affects, or the object it targets when it affects
//! none) with an `Accepted` condition.

use std::sync::Arc;

use crate::api::{
    AncestorRef, GatewayClassConfig, GatewayConfig, MAX_POLICY_ANCESTORS, PolicyAncestorStatus,
    PolicyStatus,
};
use crate::gateway::conditions::{Cond, merge_conditions, reasons, types};
use crate::gateway::{CONTROLLER_NAME, GATEWAY_API_GROUP};
use crate::snapshot::{Key, Snapshot};

/// A target kind a policy may name, with its group.
fn target_group(kind: &str) -> Option<&'static str> {
    match kind {
        "Namespace" => Some(""),
        "GatewayClass" | "Gateway" => Some(GATEWAY_API_GROUP),
        _ => None,
    }
}

/// Sort key of rivals: oldest first, then by name.
fn age(meta: &kube::api::ObjectMeta) -> (Option<k8s_openapi::jiff::Timestamp>, String) {
    (
        meta.creation_timestamp.as_ref().map(|t| t.0),
        meta.name.clone().unwrap_or_default(),
    )
}

fn targets(t: &crate::api::PolicyTargetRef, kind: &str, name: &str) -> bool {
    target_group(kind).is_some_and(|g| t.group == g) && t.kind == kind && t.name == name
}

/// The GatewayClassConfig in `ns` that applies to target `kind`/`name` (`GatewayClass` or
/// `Namespace`): the oldest of those targeting it.
#[must_use]
pub fn class_config_for<'a>(
    snap: &'a Snapshot,
    ns: &'a str,
    kind: &str,
    name: &str,
) -> Option<&'a Arc<GatewayClassConfig>> {
    snap.class_configs_in(ns)
        .filter(|c| targets(&c.spec.target_ref, kind, name))
        .min_by_key(|c| age(&c.metadata))
}

/// The GatewayConfig in `ns` that applies to target `kind`/`name` (`Gateway` or
/// `Namespace`). For a Gateway, the one its `parametersRef` names (`param`) if it exists,
/// else the oldest whose `targetRef` names it.
#[must_use]
pub fn gateway_config_for<'a>(
    snap: &'a Snapshot,
    ns: &'a str,
    kind: &str,
    name: &str,
    param: Option<&str>,
) -> Option<&'a Arc<GatewayConfig>> {
    if kind == "Gateway"
        && let Some(p) = param
        && let Some(c) = snap.gateway_config(&Key::new(ns, p))
    {
        return Some(c);
    }
    snap.gateway_configs_in(ns)
        .filter(|c| {
            c.spec
                .target_ref
                .as_ref()
                .is_some_and(|t| targets(t, kind, name))
        })
        .min_by_key(|c| age(&c.metadata))
}

/// The name of the GatewayConfig a Gateway names in `spec.infrastructure.parametersRef`.
#[must_use]
pub fn parameters_ref_name(gw: &gateway_api::apis::standard::gateways::Gateway) -> Option<&str> {
    gw.spec
        .infrastructure
        .as_ref()
        .and_then(|i| i.parameters_ref.as_ref())
        .filter(|p| p.group == crate::api::GROUP && p.kind == crate::api::GATEWAY_CONFIG_KIND)
        .map(|p| p.name.as_str())
}

/// One entry of a policy's status, before times and generations.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ancestor {
    /// The ancestor.
    pub ancestor: AncestorRef,
    /// Its `Accepted` condition.
    pub accepted: Cond,
}

fn gateway_ref(k: &Key) -> AncestorRef {
    AncestorRef {
        group: GATEWAY_API_GROUP.to_owned(),
        kind: "Gateway".to_owned(),
        namespace: Some(k.namespace.clone()),
        name: k.name.clone(),
    }
}

fn target_ref(t: &crate::api::PolicyTargetRef, ns: &str) -> AncestorRef {
    AncestorRef {
        group: t.group.clone(),
        kind: t.kind.clone(),
        namespace: (t.kind == "Gateway").then(|| ns.to_owned()),
        name: t.name.clone(),
    }
}

/// Our Gateways (their class names our controller), with their class name.
fn our_gateways(snap: &Snapshot) -> impl Iterator<Item = (&Key, &str)> {
    snap.gateways().filter_map(|(k, e)| {
        let class = e.typed.spec.gateway_class_name.as_str();
        snap.class(class)
            .is_some_and(|c| c.spec.controller_name == CONTROLLER_NAME)
            .then_some((k, class))
    })
}

fn accepted(message: &str) -> Cond {
    Cond::t(types::ACCEPTED, reasons::ACCEPTED, message)
}

fn refused(reason: &str, message: &str) -> Cond {
    Cond::f(types::ACCEPTED, reason, message)
}

/// Entries for the Gateways `affected` (sorted, at most [`MAX_POLICY_ANCESTORS`]), each
/// accepted unless another policy applies there (`winner` names it); for the target
/// itself when none is affected.
fn entries(
    affected: Vec<Key>,
    target: AncestorRef,
    conflict: Option<String>,
    what: &str,
) -> Vec<Ancestor> {
    let cond = match &conflict {
        Some(w) => refused(
            reasons::CONFLICTED,
            &format!(
                "{w} targets the same {} and applies instead (the oldest applies)",
                target.kind
            ),
        ),
        None => accepted(what),
    };
    if affected.is_empty() {
        let cond = if conflict.is_some() {
            cond
        } else {
            accepted(&format!("{what}; it affects no Gateway of ours yet"))
        };
        return vec![Ancestor {
            ancestor: target,
            accepted: cond,
        }];
    }
    affected
        .iter()
        .take(MAX_POLICY_ANCESTORS)
        .map(|k| Ancestor {
            ancestor: gateway_ref(k),
            accepted: cond.clone(),
        })
        .collect()
}

fn invalid(target: AncestorRef, message: String) -> Vec<Ancestor> {
    vec![Ancestor {
        ancestor: target,
        accepted: refused(reasons::INVALID, &message),
    }]
}

/// An `Invalid` entry when `t` names neither `allowed` (a Gateway API kind) nor a
/// Namespace, each in its own group.
fn kind_refused(
    t: &crate::api::PolicyTargetRef,
    allowed: &str,
    target: &AncestorRef,
) -> Option<Vec<Ancestor>> {
    let group = match target_group(&t.kind) {
        Some(g) if t.kind == allowed || t.kind == "Namespace" => g,
        _ => {
            return Some(invalid(
                target.clone(),
                format!(
                    "targetRef must be a {allowed} (group {GATEWAY_API_GROUP}) or a Namespace (group \"\"), not {:?}",
                    t.kind
                ),
            ));
        }
    };
    (t.group != group).then(|| {
        invalid(
            target.clone(),
            format!(
                "targetRef: a {} is in group {group:?}, not {:?}",
                t.kind, t.group
            ),
        )
    })
}

fn not_found(target: AncestorRef, message: String) -> Vec<Ancestor> {
    vec![Ancestor {
        ancestor: target,
        accepted: refused(reasons::TARGET_NOT_FOUND, &message),
    }]
}

fn name_of(kind: &str, meta: &kube::api::ObjectMeta) -> String {
    format!(
        "{kind} {}/{}",
        meta.namespace.as_deref().unwrap_or_default(),
        meta.name.as_deref().unwrap_or_default()
    )
}

/// The policy that wins where policy `me` (of `kind`) applies, in words, when it is another
/// one: what `me`'s status names as having precedence over it.
fn another_winner(
    winner: Option<&kube::api::ObjectMeta>,
    me: &kube::api::ObjectMeta,
    kind: &str,
) -> Option<String> {
    winner
        .filter(|w| w.name != me.name)
        .map(|w| name_of(kind, w))
}

/// The status entries of GatewayClassConfig `key`; `None` if there is no such policy.
#[must_use]
pub fn class_config_status(snap: &Snapshot, key: &Key) -> Option<Vec<Ancestor>> {
    let c = snap.class_config(key)?;
    let t = &c.spec.target_ref;
    let ns = key.namespace.as_str();
    let global = ns == snap.controller_namespace();
    let target = target_ref(t, ns);
    if let Some(refused) = kind_refused(t, "GatewayClass", &target) {
        return Some(refused);
    }
    let affected: Vec<Key> = if t.kind == "Namespace" {
        if global {
            return Some(invalid(
                target,
                format!(
                    "a GatewayClassConfig in the controller namespace {ns} applies cluster-wide and must target a GatewayClass"
                ),
            ));
        }
        if t.name != ns {
            return Some(invalid(
                target,
                format!(
                    "a GatewayClassConfig applies only to its own namespace {ns}, not {}",
                    t.name
                ),
            ));
        }
        our_gateways(snap)
            .filter(|(k, _)| k.namespace == ns)
            .map(|(k, _)| k.clone())
            .collect()
    } else {
        match snap.class(&t.name) {
            None => {
                return Some(not_found(
                    target,
                    format!("GatewayClass {} not found", t.name),
                ));
            }
            Some(class) if class.spec.controller_name != CONTROLLER_NAME => {
                return Some(not_found(
                    target,
                    format!("GatewayClass {} is not managed by gatewright", t.name),
                ));
            }
            Some(_) => our_gateways(snap)
                .filter(|(k, class)| *class == t.name && (global || k.namespace == ns))
                .map(|(k, _)| k.clone())
                .collect(),
        }
    };
    let winner = another_winner(
        class_config_for(snap, ns, &t.kind, &t.name).map(|w| &w.metadata),
        &c.metadata,
        "GatewayClassConfig",
    );
    let what = if global {
        format!("applies to every Gateway of GatewayClass {}", t.name)
    } else {
        format!(
            "applies to the Gateways of {} {} in namespace {ns}",
            t.kind, t.name
        )
    };
    Some(entries(affected, target, winner, &what))
}

/// The status entries of GatewayConfig `key`; `None` if there is no such policy.
#[must_use]
pub fn gateway_config_status(snap: &Snapshot, key: &Key) -> Option<Vec<Ancestor>> {
    let c = snap.gateway_config(key)?;
    let ns = key.namespace.as_str();
    // Gateways naming it in spec.infrastructure.parametersRef.
    let by_param: Vec<Key> = our_gateways(snap)
        .filter(|(k, _)| k.namespace == ns)
        .filter(|(k, _)| {
            snap.gateway(k).and_then(|e| parameters_ref_name(&e.typed)) == Some(key.name.as_str())
        })
        .map(|(k, _)| k.clone())
        .collect();
    let Some(t) = &c.spec.target_ref else {
        let target = AncestorRef {
            group: crate::api::GROUP.to_owned(),
            kind: crate::api::GATEWAY_CONFIG_KIND.to_owned(),
            namespace: Some(ns.to_owned()),
            name: key.name.clone(),
        };
        if by_param.is_empty() {
            return Some(not_found(
                target,
                "no targetRef, and no Gateway of ours names it in spec.infrastructure.parametersRef".to_owned(),
            ));
        }
        return Some(entries(
            by_param,
            target,
            None,
            "applies to the Gateways naming it in spec.infrastructure.parametersRef",
        ));
    };
    let target = target_ref(t, ns);
    if let Some(refused) = kind_refused(t, "Gateway", &target) {
        return Some(refused);
    }
    let mut out: Vec<Ancestor> = Vec::new();
    if t.kind == "Namespace" {
        if t.name != ns {
            return Some(invalid(
                target,
                format!(
                    "a GatewayConfig applies only to its own namespace {ns}, not {}",
                    t.name
                ),
            ));
        }
        let affected: Vec<Key> = our_gateways(snap)
            .filter(|(k, _)| k.namespace == ns)
            .map(|(k, _)| k.clone())
            .collect();
        let winner = another_winner(
            gateway_config_for(snap, ns, "Namespace", ns, None).map(|w| &w.metadata),
            &c.metadata,
            "GatewayConfig",
        );
        out = entries(
            affected,
            target,
            winner,
            &format!("applies to the Gateways in namespace {ns}"),
        );
    } else {
        let gw_key = Key::new(ns, t.name.as_str());
        let ours = our_gateways(snap).any(|(k, _)| *k == gw_key);
        if !ours && by_param.is_empty() {
            let why = if snap.gateway(&gw_key).is_some() {
                format!(
                    "Gateway {ns}/{} is not of a GatewayClass managed by gatewright",
                    t.name
                )
            } else {
                format!("Gateway {ns}/{} not found", t.name)
            };
            return Some(not_found(target, why));
        }
        if ours {
            let param = snap
                .gateway(&gw_key)
                .and_then(|e| parameters_ref_name(&e.typed));
            let winner = another_winner(
                gateway_config_for(snap, ns, "Gateway", &t.name, param).map(|w| &w.metadata),
                &c.metadata,
                "GatewayConfig",
            );
            out = entries(
                vec![gw_key.clone()],
                target,
                winner,
                &format!("applies to Gateway {ns}/{}", t.name),
            );
        }
    }
    // Gateways naming it in parametersRef are affected whatever its targetRef says.
    for k in by_param {
        if out.iter().any(|a| a.ancestor == gateway_ref(&k)) || out.len() >= MAX_POLICY_ANCESTORS {
            continue;
        }
        out.push(Ancestor {
            ancestor: gateway_ref(&k),
            accepted: accepted(
                "applies to this Gateway, which names it in spec.infrastructure.parametersRef",
            ),
        });
    }
    // A target entry is only the fallback when no Gateway is affected.
    if out.len() > 1 {
        out.retain(|a| a.ancestor.kind == "Gateway");
    }
    out.sort_by(|a, b| a.ancestor.cmp(&b.ancestor));
    Some(out)
}

/// The status to write: `existing` with our entries replaced by `ours` (conditions merged,
/// so an unchanged condition keeps its lastTransitionTime), other controllers' entries first
/// and kept, at most [`crate::api::MAX_POLICY_ANCESTORS`] in all.
#[must_use]
pub fn next_policy_status(
    existing: &PolicyStatus,
    ours: &[Ancestor],
    generation: Option<i64>,
    now: &k8s_openapi::apimachinery::pkg::apis::meta::v1::Time,
) -> PolicyStatus {
    let mut ancestors: Vec<PolicyAncestorStatus> = existing
        .ancestors
        .iter()
        .filter(|a| a.controller_name != CONTROLLER_NAME)
        .cloned()
        .collect();
    for a in ours {
        if ancestors.len() >= crate::api::MAX_POLICY_ANCESTORS {
            break;
        }
        let before = existing
            .ancestors
            .iter()
            .find(|e| e.controller_name == CONTROLLER_NAME && e.ancestor_ref == a.ancestor)
            .map(|e| e.conditions.as_slice())
            .unwrap_or_default();
        ancestors.push(PolicyAncestorStatus {
            ancestor_ref: a.ancestor.clone(),
            controller_name: CONTROLLER_NAME.to_owned(),
            conditions: merge_conditions(
                before,
                std::slice::from_ref(&a.accepted),
                &[types::ACCEPTED],
                generation,
                now,
            ),
        });
    }
    PolicyStatus { ancestors }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "test code")]
    use serde_json::json;

    use super::*;
    use crate::gateway::conditions::Status;

    fn world() -> Snapshot {
        let mut s = Snapshot::new("sys");
        for (name, controller) in [("ours", CONTROLLER_NAME), ("theirs", "example.com/x")] {
            s.put_class(
                serde_json::from_value(json!({
                    "metadata": {"name": name},
                    "spec": {"controllerName": controller},
                }))
                .unwrap(),
            );
        }
        for (ns, name, class, param) in [
            ("app", "a", "ours", None),
            ("app", "b", "ours", Some("by-param")),
            ("app", "t", "theirs", None),
            ("other", "c", "ours", None),
        ] {
            let mut spec = json!({"gatewayClassName": class, "listeners": []});
            if let Some(p) = param {
                spec["infrastructure"] = json!({"parametersRef":
                    {"group": "gatewright.dev", "kind": "GatewayConfig", "name": p}});
            }
            s.put_gateway(
                serde_json::from_value(json!({
                    "metadata": {"name": name, "namespace": ns}, "spec": spec,
                }))
                .unwrap(),
            );
        }
        s
    }

    fn gateway_config(
        s: &mut Snapshot,
        name: &str,
        created: &str,
        target: Option<(&str, &str, &str)>,
    ) {
        let mut spec = json!({});
        if let Some((group, kind, n)) = target {
            spec["targetRef"] = json!({"group": group, "kind": kind, "name": n});
        }
        s.put_gateway_config(
            serde_json::from_value(json!({
                "metadata": {"name": name, "namespace": "app",
                    "creationTimestamp": format!("2026-01-01T00:00:{created}Z")},
                "spec": spec,
            }))
            .unwrap(),
        );
    }

    fn class_config(
        s: &mut Snapshot,
        ns: &str,
        name: &str,
        created: &str,
        target: (&str, &str, &str),
    ) {
        s.put_class_config(
            serde_json::from_value(json!({
                "metadata": {"name": name, "namespace": ns,
                    "creationTimestamp": format!("2026-01-01T00:00:{created}Z")},
                "spec": {"targetRef": {"group": target.0, "kind": target.1, "name": target.2}},
            }))
            .unwrap(),
        );
    }

    /// (ancestor kind/namespace/name, status, reason) of each entry.
    fn summary(a: &[Ancestor]) -> Vec<(String, Status, String)> {
        a.iter()
            .map(|a| {
                (
                    format!(
                        "{}/{}/{}",
                        a.ancestor.kind,
                        a.ancestor.namespace.as_deref().unwrap_or(""),
                        a.ancestor.name
                    ),
                    a.accepted.status,
                    a.accepted.reason.clone(),
                )
            })
            .collect()
    }

    fn row(a: &str, ok: bool, reason: &str) -> (String, Status, String) {
        (
            a.to_owned(),
            if ok { Status::True } else { Status::False },
            reason.to_owned(),
        )
    }

    #[test]
    fn gateway_configs_per_cause() {
        let mut s = world();
        let gw = GATEWAY_API_GROUP;
        gateway_config(&mut s, "old", "01", Some((gw, "Gateway", "a")));
        gateway_config(&mut s, "young", "02", Some((gw, "Gateway", "a")));
        gateway_config(&mut s, "ns-wide", "03", Some(("", "Namespace", "app")));
        gateway_config(&mut s, "nowhere", "04", Some((gw, "Gateway", "absent")));
        gateway_config(&mut s, "foreign", "05", Some((gw, "Gateway", "t")));
        gateway_config(&mut s, "svc", "06", Some(("", "Service", "x")));
        gateway_config(&mut s, "other-ns", "07", Some(("", "Namespace", "other")));
        gateway_config(&mut s, "by-param", "08", None);
        gateway_config(&mut s, "loose", "09", None);
        gateway_config(&mut s, "beaten", "00", Some((gw, "Gateway", "b")));
        let st = |n: &str| summary(&gateway_config_status(&s, &Key::new("app", n)).unwrap());
        assert_eq!(st("old"), [row("Gateway/app/a", true, "Accepted")]);
        assert_eq!(st("young"), [row("Gateway/app/a", false, "Conflicted")]);
        let young = gateway_config_status(&s, &Key::new("app", "young")).unwrap();
        assert!(
            young[0].accepted.message.contains("GatewayConfig app/old"),
            "{young:?}"
        );
        assert_eq!(
            st("ns-wide"),
            [
                row("Gateway/app/a", true, "Accepted"),
                row("Gateway/app/b", true, "Accepted")
            ],
            "every Gateway of ours in the namespace, not theirs"
        );
        assert_eq!(
            st("nowhere"),
            [row("Gateway/app/absent", false, "TargetNotFound")]
        );
        assert_eq!(
            st("foreign"),
            [row("Gateway/app/t", false, "TargetNotFound")]
        );
        assert_eq!(st("svc"), [row("Service//x", false, "Invalid")]);
        assert_eq!(st("other-ns"), [row("Namespace//other", false, "Invalid")]);
        assert_eq!(st("by-param"), [row("Gateway/app/b", true, "Accepted")]);
        assert_eq!(
            st("loose"),
            [row("GatewayConfig/app/loose", false, "TargetNotFound")]
        );
        // The parametersRef beats an older targetRef.
        assert_eq!(st("beaten"), [row("Gateway/app/b", false, "Conflicted")]);
        assert!(gateway_config_status(&s, &Key::new("app", "gone")).is_none());
        // The values merge reads the same winners.
        assert_eq!(
            gateway_config_for(&s, "app", "Gateway", "b", Some("by-param"))
                .and_then(|c| c.metadata.name.clone())
                .as_deref(),
            Some("by-param")
        );
        assert_eq!(
            gateway_config_for(&s, "app", "Gateway", "a", None)
                .and_then(|c| c.metadata.name.clone())
                .as_deref(),
            Some("old")
        );
    }

    #[test]
    fn class_configs_per_cause() {
        let mut s = world();
        let gw = GATEWAY_API_GROUP;
        class_config(
            &mut s,
            "sys",
            "platform",
            "01",
            (gw, "GatewayClass", "ours"),
        );
        class_config(
            &mut s,
            "sys",
            "platform-2",
            "02",
            (gw, "GatewayClass", "ours"),
        );
        class_config(&mut s, "sys", "sys-ns", "03", ("", "Namespace", "sys"));
        class_config(&mut s, "app", "local", "04", (gw, "GatewayClass", "ours"));
        class_config(
            &mut s,
            "app",
            "theirs",
            "05",
            (gw, "GatewayClass", "theirs"),
        );
        class_config(
            &mut s,
            "app",
            "absent",
            "06",
            (gw, "GatewayClass", "absent"),
        );
        class_config(&mut s, "app", "gw-kind", "07", (gw, "Gateway", "a"));
        class_config(&mut s, "empty", "quiet", "08", ("", "Namespace", "empty"));
        let st = |ns: &str, n: &str| summary(&class_config_status(&s, &Key::new(ns, n)).unwrap());
        assert_eq!(
            st("sys", "platform"),
            [
                row("Gateway/app/a", true, "Accepted"),
                row("Gateway/app/b", true, "Accepted"),
                row("Gateway/other/c", true, "Accepted"),
            ],
            "cluster-wide: every Gateway of the class"
        );
        assert_eq!(
            st("sys", "platform-2")[0],
            row("Gateway/app/a", false, "Conflicted")
        );
        assert_eq!(
            st("sys", "sys-ns"),
            [row("Namespace//sys", false, "Invalid")]
        );
        assert_eq!(
            st("app", "local"),
            [
                row("Gateway/app/a", true, "Accepted"),
                row("Gateway/app/b", true, "Accepted")
            ],
            "in its namespace only: not other/c"
        );
        assert_eq!(
            st("app", "theirs"),
            [row("GatewayClass//theirs", false, "TargetNotFound")]
        );
        assert_eq!(
            st("app", "absent"),
            [row("GatewayClass//absent", false, "TargetNotFound")]
        );
        assert_eq!(
            st("app", "gw-kind"),
            [row("Gateway/app/a", false, "Invalid")]
        );
        // A target that exists but affects no Gateway yet: accepted on the target itself.
        assert_eq!(
            st("empty", "quiet"),
            [row("Namespace//empty", true, "Accepted")]
        );
    }
}

#[cfg(test)]
mod status_tests {
    #![allow(clippy::unwrap_used, reason = "test code")]
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    fn gw(name: &str) -> AncestorRef {
        AncestorRef {
            group: "gateway.networking.k8s.io".into(),
            kind: "Gateway".into(),
            namespace: Some("app".into()),
            name: name.into(),
        }
    }

    #[test]
    fn ours_are_replaced_theirs_kept_and_times_kept_when_unchanged() {
        let t0 = Time("2026-01-01T00:00:00Z".parse().unwrap());
        let t1 = Time("2026-01-02T00:00:00Z".parse().unwrap());
        let accepted = Cond::t("Accepted", "Accepted", "applies");
        let first = next_policy_status(
            &PolicyStatus {
                ancestors: vec![PolicyAncestorStatus {
                    ancestor_ref: gw("x"),
                    controller_name: "example.com/other".into(),
                    conditions: vec![],
                }],
            },
            &[Ancestor {
                ancestor: gw("a"),
                accepted: accepted.clone(),
            }],
            Some(3),
            &t0,
        );
        assert_eq!(first.ancestors.len(), 2);
        assert_eq!(first.ancestors[0].controller_name, "example.com/other");
        let ours = &first.ancestors[1];
        assert_eq!(ours.conditions[0].observed_generation, Some(3));
        // The same again later: nothing changes, not even the time.
        let again = next_policy_status(
            &first,
            &[Ancestor {
                ancestor: gw("a"),
                accepted,
            }],
            Some(3),
            &t1,
        );
        assert_eq!(again, first);
        // Gateway a no longer affected, b is: a's entry goes.
        let moved = next_policy_status(
            &first,
            &[Ancestor {
                ancestor: gw("b"),
                accepted: Cond::f("Accepted", "Conflicted", "another applies"),
            }],
            Some(4),
            &t1,
        );
        assert_eq!(moved.ancestors.len(), 2);
        assert_eq!(moved.ancestors[1].ancestor_ref, gw("b"));
        assert_eq!(moved.ancestors[1].conditions[0].status, "False");
        assert_eq!(moved.ancestors[1].conditions[0].last_transition_time, t1);
    }
}
