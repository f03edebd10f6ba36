//! Labels, annotations and owner references the planner puts on every child, and the
//! label values it reads back (which parent a live child belongs to).

use std::collections::BTreeMap;

use serde_json::{Value, json};
use sha2::Digest as _;

/// `app.kubernetes.io/managed-by`.
pub const MANAGED_BY: &str = "app.kubernetes.io/managed-by";
/// Value of [`MANAGED_BY`] on our children.
pub const MANAGED_BY_VALUE: &str = "gatewright";
/// GEP-1762 label naming the Gateway (hash-truncated to 63 characters).
pub const GATEWAY_NAME: &str = "gateway.networking.k8s.io/gateway-name";
/// GEP-1762 label naming the GatewayClass.
pub const GATEWAY_CLASS_NAME: &str = "gateway.networking.k8s.io/gateway-class-name";
/// UID of the direct parent (a Gateway, or a route for route templates).
pub const PARENT_UID: &str = "gatewright.dev/parent-uid";
/// UID of the Gateway the child serves (also on route children).
pub const GATEWAY_UID: &str = "gatewright.dev/gateway-uid";
/// Name of the template that rendered the child.
pub const TEMPLATE: &str = "gatewright.dev/template";
/// Label: the version of a make-before-break child (a hash of what decides a version).
pub const VERSION: &str = "gatewright.dev/version";
/// Annotation on a child rendered from make-before-break templates: which version of each
/// it was rendered from (`template=version,...`), so an old version is never deleted while
/// a live object still points at it.
pub const USES: &str = "gatewright.dev/uses";
/// Annotation on a child of a make-before-break template versioned per object
/// (`rollout.per: Object`): its name as rendered, before the version suffix. The versions
/// of one such object share it, and are replaced one by one.
pub const SLOT: &str = "gatewright.dev/slot";
/// Annotation: the position of the child's template in its set's dependency order. The
/// teardown deletes from the highest down by it, so the order holds even when the
/// blueprint was deleted with the Gateway (`kubectl delete -f`, a GitOps uninstall).
pub const ORDER: &str = "gatewright.dev/order";
/// Annotation the teardown sets on a child it drained (its template's `drain`) when the
/// drained version was first ready: the settle time counts from it.
pub const DRAINED_AT: &str = "gatewright.dev/drained-at";
/// Annotation the teardown sets with the drain patch: when draining began (the drain's
/// timeout counts from it).
pub const DRAIN_STARTED_AT: &str = "gatewright.dev/drain-started-at";
/// Annotation on an object a placed template rendered (fleet mode): the member cluster it
/// goes to (its ClusterProfile's `namespace/name`). Part of the object's identity.
pub const CLUSTER: &str = "gatewright.dev/cluster";
/// Finalizer on our Gateways: children are deleted, in reverse dependency order, first.
pub const GATEWAY_FINALIZER: &str = "gatewright.dev/children";
/// The label of a ClusterRole whose rules the `gatewright-children` ClusterRole aggregates
/// (config/rbac/): how a platform team grants a new child kind.
pub const AGGREGATE_TO_CHILDREN: &str = "gatewright.dev/aggregate-to-children";
/// Label selector matching every child we manage.
pub const SELECTOR: &str = "app.kubernetes.io/managed-by=gatewright,gatewright.dev/parent-uid";

/// A label value safe for the API: at most 63 characters of `[A-Za-z0-9-_.]`, alphanumeric
/// at both ends; longer or unsafe values are hash-truncated.
#[must_use]
pub fn label_value(v: &str) -> String {
    let ok = v.len() <= 63
        && v.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        && (v.is_empty()
            || (v.starts_with(|c: char| c.is_ascii_alphanumeric())
                && v.ends_with(|c: char| c.is_ascii_alphanumeric())));
    if ok { v.to_owned() } else { safe_name(v, 63) }
}

/// A Kubernetes-safe name from `value`: lowercase, only `[a-z0-9-]` (and `.` when `max > 63`),
/// starting and ending alphanumeric, at most `max` characters. A name that had to be
/// shortened ends in `-` and 8 hex characters of its SHA-256, so distinct inputs stay distinct.
#[must_use]
pub fn safe_name(value: &str, max: usize) -> String {
    let max = max.clamp(16, 253);
    let allow_dot = max > 63;
    let mut cleaned: String = value
        .chars()
        .map(|c| c.to_ascii_lowercase())
        .map(|c| {
            if c.is_ascii_alphanumeric() || (allow_dot && c == '.') {
                c
            } else {
                '-'
            }
        })
        .collect();
    cleaned = cleaned
        .trim_matches(|c: char| !c.is_ascii_alphanumeric())
        .to_owned();
    if cleaned == value && cleaned.len() <= max && !cleaned.is_empty() {
        return cleaned;
    }
    let hash: String = sha2::Sha256::digest(value.as_bytes())[..4]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    if cleaned.is_empty() {
        return format!("x-{hash}");
    }
    let keep = max.saturating_sub(9).min(cleaned.len());
    let head = cleaned[..keep].trim_end_matches(|c: char| !c.is_ascii_alphanumeric());
    format!("{head}-{hash}")
}

/// The GEP-1762 labels for a Gateway's children, plus `spec.infrastructure.labels`.
#[must_use]
pub fn gateway_labels(gateway: &Value) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    if let Some(infra) = gateway["spec"]["infrastructure"]["labels"].as_object() {
        for (k, v) in infra {
            if let Some(v) = v.as_str() {
                out.insert(k.clone(), v.to_owned());
            }
        }
    }
    out.insert(
        GATEWAY_NAME.into(),
        label_value(gateway["metadata"]["name"].as_str().unwrap_or_default()),
    );
    out.insert(
        GATEWAY_CLASS_NAME.into(),
        label_value(
            gateway["spec"]["gatewayClassName"]
                .as_str()
                .unwrap_or_default(),
        ),
    );
    out
}

/// The parent uid label of a live object.
#[must_use]
pub fn parent_uid(obj: &Value) -> Option<&str> {
    obj["metadata"]["labels"][PARENT_UID].as_str()
}

/// The gateway uid label of a live object.
#[must_use]
pub fn gateway_uid(obj: &Value) -> Option<&str> {
    obj["metadata"]["labels"][GATEWAY_UID].as_str()
}

/// The [`ORDER`] annotation of a live object.
#[must_use]
pub fn order(obj: &Value) -> Option<usize> {
    obj["metadata"]["annotations"][ORDER].as_str()?.parse().ok()
}

/// The template that rendered a child, from its label.
#[must_use]
pub fn template(obj: &Value) -> Option<&str> {
    obj["metadata"]["labels"][TEMPLATE].as_str()
}

/// The object of a per-object make-before-break template a child is a version of
/// ([`SLOT`]), if any.
#[must_use]
pub fn slot(obj: &Value) -> Option<&str> {
    obj["metadata"]["annotations"][SLOT].as_str()
}

/// What every child of one Gateway carries, whichever its parent (the Gateway or one of
/// its routes): the GEP-1762 and infrastructure labels, [`MANAGED_BY`] and [`GATEWAY_UID`],
/// and the infrastructure annotations. Computed once per Gateway plan and shared by its
/// route plans, not once per child.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GatewayDecoration {
    labels: BTreeMap<String, String>,
    /// `spec.infrastructure.annotations`, when it is a map.
    annotations: Option<serde_json::Map<String, Value>>,
}

impl GatewayDecoration {
    /// From the Gateway as JSON and its UID.
    #[must_use]
    pub fn new(gateway: &Value, gateway_uid: &str) -> Self {
        let mut labels = gateway_labels(gateway);
        labels.insert(MANAGED_BY.into(), MANAGED_BY_VALUE.into());
        labels.insert(GATEWAY_UID.into(), label_value(gateway_uid));
        let annotations = gateway["spec"]["infrastructure"]["annotations"]
            .as_object()
            .cloned();
        Self {
            labels,
            annotations,
        }
    }
}

/// The parent a child is decorated for.
#[derive(Clone, Debug)]
pub struct Owner<'a> {
    /// The parent as JSON (Gateway or route).
    pub parent: &'a Value,
    /// The Gateway (same as `parent` for Gateway templates).
    pub gateway: &'a Value,
    /// UID of the parent.
    pub parent_uid: &'a str,
    /// UID of the Gateway.
    pub gateway_uid: &'a str,
    /// What every child of the Gateway carries ([`GatewayDecoration::new`] of `gateway`
    /// and `gateway_uid`).
    pub decoration: &'a GatewayDecoration,
}

/// The labels, annotations and owner reference of one parent's children, built once per
/// template set ([`Decoration::apply`] adds them to each child).
#[derive(Debug)]
pub struct Decoration<'a> {
    gateway: &'a GatewayDecoration,
    parent_uid: String,
    owner_reference: Value,
}

impl<'a> Decoration<'a> {
    /// For the children of `owner`.
    #[must_use]
    pub fn new(owner: &Owner<'a>) -> Self {
        Self {
            gateway: owner.decoration,
            parent_uid: label_value(owner.parent_uid),
            owner_reference: json!([{
                "apiVersion": owner.parent["apiVersion"],
                "kind": owner.parent["kind"],
                "name": owner.parent["metadata"]["name"],
                "uid": owner.parent_uid,
                "controller": true,
                "blockOwnerDeletion": true,
            }]),
        }
    }

    /// Adds our labels, the Gateway's infrastructure labels and annotations, and (for
    /// namespaced children) a controller owner reference to the parent. Labels the
    /// template set are kept unless ours have the same key.
    pub fn apply(&self, obj: &mut Value, template_name: &str) {
        let namespaced = obj["metadata"].get("namespace").is_some();
        let meta = &mut obj["metadata"];
        let mut merged: BTreeMap<&str, &str> = meta["labels"]
            .as_object()
            .map(|m| {
                m.iter()
                    .filter_map(|(k, v)| v.as_str().map(|v| (k.as_str(), v)))
                    .collect()
            })
            .unwrap_or_default();
        let template = label_value(template_name);
        for (k, v) in &self.gateway.labels {
            merged.insert(k, v);
        }
        merged.insert(PARENT_UID, &self.parent_uid);
        merged.insert(TEMPLATE, &template);
        // In key order, as a `BTreeMap` would give them.
        let labels: serde_json::Map<String, Value> = merged
            .into_iter()
            .map(|(k, v)| (k.to_owned(), Value::String(v.to_owned())))
            .collect();
        meta["labels"] = Value::Object(labels);
        if let Some(infra) = &self.gateway.annotations {
            let ann = meta
                .as_object_mut()
                .map(|m| m.entry("annotations").or_insert_with(|| json!({})));
            if let Some(Value::Object(ann)) = ann {
                for (k, v) in infra {
                    ann.entry(k.clone()).or_insert_with(|| v.clone());
                }
            }
        }
        if namespaced {
            meta["ownerReferences"] = self.owner_reference.clone();
        }
    }
}

/// Adds our labels, the Gateway's infrastructure labels and annotations, and (for
/// namespaced children) a controller owner reference to the parent: [`Decoration::apply`]
/// for one child.
pub fn decorate(obj: &mut Value, owner: &Owner<'_>, template_name: &str) {
    Decoration::new(owner).apply(obj, template_name);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_gateway_names_are_hash_truncated() {
        let long = "g".repeat(253);
        let v = label_value(&long);
        assert!(v.len() <= 63);
        assert_ne!(label_value(&format!("{long}x")), v);
        assert_eq!(label_value("short"), "short");
    }

    /// The per-child algorithm `Decoration` replaced, kept as the reference.
    fn decorate_reference(obj: &mut Value, owner: &Owner<'_>, template_name: &str) {
        let namespaced = obj["metadata"].get("namespace").is_some();
        let mut labels = gateway_labels(owner.gateway);
        labels.insert(MANAGED_BY.into(), MANAGED_BY_VALUE.into());
        labels.insert(PARENT_UID.into(), label_value(owner.parent_uid));
        labels.insert(GATEWAY_UID.into(), label_value(owner.gateway_uid));
        labels.insert(TEMPLATE.into(), label_value(template_name));
        let meta = &mut obj["metadata"];
        let mut merged: BTreeMap<String, String> = meta["labels"]
            .as_object()
            .map(|m| {
                m.iter()
                    .filter_map(|(k, v)| v.as_str().map(|v| (k.clone(), v.to_owned())))
                    .collect()
            })
            .unwrap_or_default();
        merged.extend(labels);
        meta["labels"] = json!(merged);
        if let Some(infra) = owner.gateway["spec"]["infrastructure"]["annotations"].as_object() {
            let ann = meta
                .as_object_mut()
                .map(|m| m.entry("annotations").or_insert_with(|| json!({})));
            if let Some(Value::Object(ann)) = ann {
                for (k, v) in infra {
                    ann.entry(k.clone()).or_insert_with(|| v.clone());
                }
            }
        }
        if namespaced {
            meta["ownerReferences"] = json!([{
                "apiVersion": owner.parent["apiVersion"],
                "kind": owner.parent["kind"],
                "name": owner.parent["metadata"]["name"],
                "uid": owner.parent_uid,
                "controller": true,
                "blockOwnerDeletion": true,
            }]);
        }
    }

    #[test]
    fn a_decoration_built_once_gives_what_decorating_each_child_gave() {
        let gateways = [
            json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
                "metadata": {"name": "gw", "namespace": "ns", "uid": "u1"},
                "spec": {"gatewayClassName": "c"}}),
            // Infrastructure labels that collide with ours, a non-string one, and an empty
            // annotation map (which still adds `annotations: {}`).
            json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
                "metadata": {"name": "g".repeat(70), "namespace": "ns", "uid": "u1"},
                "spec": {"gatewayClassName": "c", "infrastructure": {
                    "labels": {"team": "a", TEMPLATE: "theirs", PARENT_UID: "x", "n": 1},
                    "annotations": {}}}}),
            json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
                "metadata": {"name": "gw", "namespace": "ns", "uid": "u1"},
                "spec": {"gatewayClassName": "c", "infrastructure": {
                    "annotations": {"note": "x", "kept": "gw"}}}}),
        ];
        let route = json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
            "metadata": {"name": "r", "namespace": "team", "uid": "r1"}});
        let children = [
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm", "namespace": "ns",
                "labels": {"mine": "1", MANAGED_BY: "someone", "num": 2},
                "annotations": {"kept": "child"}}}),
            json!({"apiVersion": "x/v1", "kind": "LB", "metadata": {"name": "lb"}}),
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm2", "namespace": "ns", "labels": null}}),
        ];
        for gw in &gateways {
            let decoration = GatewayDecoration::new(gw, "u1");
            for (parent, parent_uid) in [(gw, "u1"), (&route, "r1")] {
                let owner = Owner {
                    parent,
                    gateway: gw,
                    parent_uid,
                    gateway_uid: "u1",
                    decoration: &decoration,
                };
                let once = Decoration::new(&owner);
                for child in &children {
                    for template in ["cm", "Not A Label!"] {
                        let mut a = child.clone();
                        once.apply(&mut a, template);
                        let mut b = child.clone();
                        decorate_reference(&mut b, &owner, template);
                        assert_eq!(a, b, "{gw} {child} {template}");
                        assert_eq!(a.to_string(), b.to_string());
                    }
                }
            }
        }
    }

    #[test]
    fn decorate_sets_labels_owner_and_infrastructure() {
        let gw = json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
            "metadata": {"name": "gw", "namespace": "ns", "uid": "u1"},
            "spec": {"gatewayClassName": "c", "infrastructure": {"labels": {"team": "a"}, "annotations": {"note": "x"}}}});
        let mut obj = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm", "namespace": "ns", "labels": {"mine": "1", MANAGED_BY: "someone"}}});
        decorate(
            &mut obj,
            &Owner {
                parent: &gw,
                gateway: &gw,
                parent_uid: "u1",
                gateway_uid: "u1",
                decoration: &GatewayDecoration::new(&gw, "u1"),
            },
            "cm",
        );
        let l = &obj["metadata"]["labels"];
        assert_eq!(l["mine"], "1");
        assert_eq!(l[MANAGED_BY], "gatewright");
        assert_eq!(l["team"], "a");
        assert_eq!(l[TEMPLATE], "cm");
        assert_eq!(obj["metadata"]["annotations"]["note"], "x");
        assert_eq!(obj["metadata"]["ownerReferences"][0]["uid"], "u1");
        let mut cluster = json!({"apiVersion": "x/v1", "kind": "LB", "metadata": {"name": "lb"}});
        decorate(
            &mut cluster,
            &Owner {
                parent: &gw,
                gateway: &gw,
                parent_uid: "u1",
                gateway_uid: "u1",
                decoration: &GatewayDecoration::new(&gw, "u1"),
            },
            "lb",
        );
        assert!(cluster["metadata"].get("ownerReferences").is_none());
    }
}
