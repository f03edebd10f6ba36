//! What a template rendered, turned into objects and checked before anything may apply
//! them: every document is a map with `apiVersion`, `kind` and a valid `metadata.name`;
//! namespaced kinds land in the parent's namespace (a template naming another namespace
//! is an error); cluster-scoped kinds only when the blueprint lists them; sizes bounded.
//!
//! In: rendered text. Out: JSON objects, or a [`RenderError`] naming the template.

use serde_json::Value;

use super::RenderError;
use super::scope::{KindScopes, Scope};
use crate::api::GroupKind;

/// Largest object a template may produce (serialized as JSON).
pub const MAX_OBJECT_BYTES: usize = 512 * 1024;
/// Most objects one template may produce.
pub const MAX_OBJECTS_PER_TEMPLATE: usize = 100;
/// Largest rendered text of one template.
pub const MAX_RENDERED_BYTES: usize = 4 * 1024 * 1024;

/// Where rendered objects must go.
#[derive(Clone, Copy, Debug)]
pub struct Placement<'a> {
    /// Blueprint name, for messages.
    pub blueprint: &'a str,
    /// Template name, for messages.
    pub template: &'a str,
    /// The parent's namespace: every namespaced child lands here.
    pub namespace: &'a str,
    /// Cluster-scoped kinds the blueprint allows.
    pub cluster_scoped: &'a [GroupKind],
}

/// Group of an `apiVersion` (`""` for `v1`): [`crate::kinds::group_of`].
#[must_use]
pub fn api_group(api_version: &str) -> &str {
    crate::kinds::group_of(api_version)
}

/// Parses YAML documents from text. Empty and null documents are dropped.
///
/// # Errors
/// The text is not YAML; the message carries the parser's line.
pub fn parse_documents(text: &str) -> Result<Vec<Value>, String> {
    let docs: Vec<Value> = serde_saphyr::from_multiple(text).map_err(|e| e.to_string())?;
    Ok(docs.into_iter().filter(|d| !d.is_null()).collect())
}

/// Parses and checks the output of one template.
///
/// # Errors
/// Bad YAML, a document that is not an object, a forbidden namespace or kind, too big.
pub fn objects_from_render(text: &str, at: Placement<'_>) -> Result<Vec<Value>, RenderError> {
    let err = |msg: String| {
        RenderError::new(at.blueprint, at.template, None, msg).with_category("InvalidOutput")
    };
    if text.len() > MAX_RENDERED_BYTES {
        return Err(err(format!(
            "rendered {} bytes, more than the limit of {MAX_RENDERED_BYTES}",
            text.len()
        )));
    }
    let docs = parse_documents(text)
        .map_err(|e| err(format!("rendered output is not valid YAML: {e}")))?;
    if docs.len() > MAX_OBJECTS_PER_TEMPLATE {
        return Err(err(format!(
            "rendered {} objects, more than the limit of {MAX_OBJECTS_PER_TEMPLATE}",
            docs.len()
        )));
    }
    docs.into_iter()
        .map(|doc| check_object(doc, at).map_err(&err))
        .collect()
}

fn check_object(mut doc: Value, at: Placement<'_>) -> Result<Value, String> {
    let Some(obj) = doc.as_object_mut() else {
        return Err(format!(
            "rendered a document that is not a map: {}",
            short(&doc)
        ));
    };
    let api_version = obj
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let kind = obj
        .get("kind")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    if api_version.is_empty() || kind.is_empty() {
        return Err("every rendered object needs apiVersion and kind".into());
    }
    let meta = obj
        .entry("metadata")
        .or_insert_with(|| Value::Object(serde_json::Map::new()));
    let Some(meta) = meta.as_object_mut() else {
        return Err(format!("{kind}: metadata is not a map"));
    };
    if meta.contains_key("generateName") {
        return Err(format!(
            "{kind}: generateName is not supported; children need stable names"
        ));
    }
    let name = meta
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    validate_name(&name).map_err(|e| format!("{kind} {name:?}: {e}"))?;
    let gk = GroupKind {
        group: api_group(&api_version).to_owned(),
        kind: kind.clone(),
    };
    let cluster_scoped = at.cluster_scoped.contains(&gk);
    match (
        cluster_scoped,
        meta.get("namespace").and_then(Value::as_str),
    ) {
        (true, Some(ns)) if !ns.is_empty() => {
            return Err(format!(
                "{kind} {name}: the blueprint lists {kind} as cluster-scoped, but the template sets namespace {ns:?}"
            ));
        }
        (true, _) => {
            meta.remove("namespace");
        }
        (false, Some(ns)) if ns != at.namespace => {
            return Err(format!(
                "{kind} {name}: children must live in the parent's namespace {:?}, not {ns:?} (list the kind in clusterScopedKinds if it is cluster-scoped)",
                at.namespace
            ));
        }
        (false, _) => {
            meta.insert("namespace".into(), Value::String(at.namespace.to_owned()));
        }
    }
    let size = serde_json::to_vec(&doc)
        .map(|v| v.len())
        .unwrap_or(usize::MAX);
    if size > MAX_OBJECT_BYTES {
        return Err(format!(
            "{kind} {name}: {size} bytes, more than the limit of {MAX_OBJECT_BYTES}"
        ));
    }
    Ok(doc)
}

/// What is wrong with rendering `gk` given the blueprint's `clusterScopedKinds` and what is
/// known of the kind's scope: a cluster-scoped kind the blueprint does not list (a template
/// could otherwise create a `ClusterRoleBinding` or a `Namespace`), or a listed kind that is
/// in fact namespaced. `Ok(false)` when all is well, `Ok(true)` when the scope is unknown.
///
/// # Errors
/// The message naming the kind.
pub fn scope_problem(
    gk: &GroupKind,
    cluster_scoped: &[GroupKind],
    scopes: &KindScopes,
) -> Result<bool, String> {
    let listed = cluster_scoped.contains(gk);
    // Named only in an error: most checks find none.
    let what = || {
        if gk.group.is_empty() {
            gk.kind.clone()
        } else {
            format!("{} ({})", gk.kind, gk.group)
        }
    };
    match (listed, scopes.scope(&gk.group, &gk.kind)) {
        (false, Some(Scope::Cluster)) => Err(format!(
            "{} is cluster-scoped and the blueprint does not list it in clusterScopedKinds; templates may create cluster-scoped objects only of the kinds listed there",
            what()
        )),
        (true, Some(Scope::Namespaced)) => Err(format!(
            "the blueprint lists {} in clusterScopedKinds, but it is namespaced",
            what()
        )),
        (false, None) => Ok(true),
        _ => Ok(false),
    }
}

/// Checks the scope of every object a template rendered (see [`scope_problem`]). Returns
/// the kinds whose scope is unknown (placed in the parent's namespace, as namespaced).
///
/// # Errors
/// The first object of a forbidden kind, naming the template and the kind.
pub fn check_scopes(
    objects: &[Value],
    at: Placement<'_>,
    scopes: &KindScopes,
) -> Result<Vec<GroupKind>, RenderError> {
    let mut unknown: Vec<GroupKind> = Vec::new();
    for o in objects {
        let gk = GroupKind {
            group: api_group(o["apiVersion"].as_str().unwrap_or_default()).to_owned(),
            kind: o["kind"].as_str().unwrap_or_default().to_owned(),
        };
        match scope_problem(&gk, at.cluster_scoped, scopes) {
            Err(msg) => {
                return Err(RenderError::new(at.blueprint, at.template, None, msg)
                    .with_category("ClusterScopedKind"));
            }
            Ok(true) if !unknown.contains(&gk) => unknown.push(gk),
            Ok(_) => {}
        }
    }
    Ok(unknown)
}

/// The kinds a template source names literally at the top level of a document
/// (`apiVersion: <literal>` then `kind: <literal>`, at the start of a line), with the line
/// of the `kind`. Lets `check` and the blueprint status judge a template's kinds without
/// rendering it; what a template computes is judged when it renders.
#[must_use]
pub fn literal_kinds(source: &str) -> Vec<(usize, GroupKind)> {
    let literal = |v: &str| {
        let v = v.trim().trim_matches(|c| c == '"' || c == '\'');
        (!v.is_empty() && !v.contains("{{") && !v.contains("{%")).then(|| v.to_owned())
    };
    let mut out = Vec::new();
    let mut api_version: Option<String> = None;
    for (i, line) in source.lines().enumerate() {
        if line.starts_with("---") {
            api_version = None;
        } else if let Some(v) = line.strip_prefix("apiVersion:") {
            api_version = literal(v);
        } else if let Some(v) = line.strip_prefix("kind:")
            && let (Some(av), Some(kind)) = (&api_version, literal(v))
        {
            out.push((
                i + 1,
                GroupKind {
                    group: api_group(av).to_owned(),
                    kind,
                },
            ));
        }
    }
    out
}

/// A DNS-subdomain name as Kubernetes accepts for most kinds.
fn validate_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("metadata.name is missing".into());
    }
    if name.len() > 253 {
        return Err(format!(
            "metadata.name is {} characters, more than 253",
            name.len()
        ));
    }
    let ok_chars = name
        .chars()
        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.');
    let ok_ends = name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name.ends_with(|c: char| c.is_ascii_alphanumeric());
    if ok_chars && ok_ends {
        Ok(())
    } else {
        Err("metadata.name must be lowercase letters, digits, '-' or '.', starting and ending alphanumeric (use safe_name)".into())
    }
}

fn short(v: &Value) -> String {
    let s = v.to_string();
    if s.len() > 80 {
        format!("{}...", &s[..s.floor_char_boundary(80)])
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn at<'a>(cs: &'a [GroupKind]) -> Placement<'a> {
        Placement {
            blueprint: "bp",
            template: "t",
            namespace: "team",
            cluster_scoped: cs,
        }
    }

    #[test]
    fn namespaced_objects_are_put_in_the_parent_namespace() {
        let objs = objects_from_render("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n---\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: b, namespace: team}\n", at(&[])).unwrap();
        assert_eq!(objs.len(), 2);
        assert_eq!(objs[0]["metadata"]["namespace"], "team");
    }

    #[test]
    fn other_namespaces_are_refused() {
        let e = objects_from_render(
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, namespace: kube-system}\n",
            at(&[]),
        )
        .unwrap_err();
        assert!(e.message.contains("kube-system"), "{e}");
        assert_eq!(e.category, "InvalidOutput");
    }

    #[test]
    fn cluster_scoped_kinds_only_when_listed() {
        let cs = [GroupKind {
            group: "elbv2.aws.upbound.io".into(),
            kind: "LB".into(),
        }];
        let objs = objects_from_render(
            "apiVersion: elbv2.aws.upbound.io/v1beta1\nkind: LB\nmetadata: {name: lb}\n",
            at(&cs),
        )
        .unwrap();
        assert!(objs[0]["metadata"].get("namespace").is_none());
        let e = objects_from_render("apiVersion: elbv2.aws.upbound.io/v1beta1\nkind: LB\nmetadata: {name: lb, namespace: x}\n", at(&cs)).unwrap_err();
        assert!(e.message.contains("cluster-scoped"));
    }

    #[test]
    fn bad_documents_are_refused() {
        for (text, needle) in [
            ("- a\n- b\n", "not a map"),
            (
                "kind: ConfigMap\nmetadata: {name: a}\n",
                "apiVersion and kind",
            ),
            (
                "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: \"A_b\"}\n",
                "lowercase",
            ),
            (
                "apiVersion: v1\nkind: ConfigMap\nmetadata: {generateName: a-}\n",
                "generateName",
            ),
            ("apiVersion: v1\nkind: [\n", "not valid YAML"),
        ] {
            let e = objects_from_render(text, at(&[])).unwrap_err();
            assert!(e.message.contains(needle), "{text}: {e}");
        }
    }

    #[test]
    fn sizes_are_bounded() {
        let big = format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: a}}\ndata: {{x: {:?}}}\n",
            "x".repeat(MAX_OBJECT_BYTES)
        );
        assert!(
            objects_from_render(&big, at(&[]))
                .unwrap_err()
                .message
                .contains("limit")
        );
        let many: String = (0..=MAX_OBJECTS_PER_TEMPLATE)
            .map(|i| format!("---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: a{i}}}\n"))
            .collect();
        assert!(
            objects_from_render(&many, at(&[]))
                .unwrap_err()
                .message
                .contains("objects")
        );
    }

    #[test]
    fn cluster_scoped_kinds_the_blueprint_does_not_list_are_refused() {
        let scopes = KindScopes::default();
        for text in [
            "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata: {name: x}\nroleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: cluster-admin}\n",
            "apiVersion: v1\nkind: Namespace\nmetadata: {name: x}\n",
        ] {
            let objs = objects_from_render(text, at(&[])).unwrap();
            let e = check_scopes(&objs, at(&[]), &scopes).unwrap_err();
            assert!(e.message.contains("clusterScopedKinds"), "{e}");
            assert_eq!(
                (e.template.as_str(), e.category),
                ("t", "ClusterScopedKind")
            );
        }
        // Listed: fine. A listed kind that is namespaced: refused.
        let ns = [GroupKind {
            group: String::new(),
            kind: "Namespace".into(),
        }];
        let objs = objects_from_render(
            "apiVersion: v1\nkind: Namespace\nmetadata: {name: x}\n",
            at(&ns),
        )
        .unwrap();
        assert_eq!(check_scopes(&objs, at(&ns), &scopes).unwrap(), vec![]);
        let cm = [GroupKind {
            group: String::new(),
            kind: "ConfigMap".into(),
        }];
        let objs = objects_from_render(
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n",
            at(&cm),
        )
        .unwrap();
        assert!(
            check_scopes(&objs, at(&cm), &scopes)
                .unwrap_err()
                .message
                .contains("namespaced")
        );
        // Unknown offline: reported, not refused.
        let objs = objects_from_render(
            "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: x}\n",
            at(&[]),
        )
        .unwrap();
        let unknown = check_scopes(&objs, at(&[]), &scopes).unwrap();
        assert_eq!(unknown[0].kind, "Widget");
        // Learned from a CRD or discovery.
        let mut learned = KindScopes::default();
        learned.learn("example.com", "Widget", Scope::Cluster);
        assert!(check_scopes(&objs, at(&[]), &learned).is_err());
    }

    #[test]
    fn literal_kinds_are_read_from_the_source() {
        let src = "{% if x %}\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata:\n  name: {{ n }}\nsubjects:\n- kind: ServiceAccount\n---\napiVersion: {{ v }}\nkind: Dyn\n---\napiVersion: \"v1\"\nkind: 'ConfigMap'\n{% endif %}\n";
        let kinds: Vec<(usize, String, String)> = literal_kinds(src)
            .into_iter()
            .map(|(l, gk)| (l, gk.group, gk.kind))
            .collect();
        assert_eq!(
            kinds,
            vec![
                (
                    3,
                    "rbac.authorization.k8s.io".into(),
                    "ClusterRoleBinding".into()
                ),
                (13, String::new(), "ConfigMap".into()),
            ]
        );
    }

    #[test]
    fn api_group_of_core_and_named_groups() {
        assert_eq!(api_group("v1"), "");
        assert_eq!(api_group("cert-manager.io/v1"), "cert-manager.io");
        let _ = json!(null);
    }
}
