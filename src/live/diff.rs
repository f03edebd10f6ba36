//! `gatewright diff -f DIR`: what applying these files would change in the live cluster.
//!
//! The files are laid over the live objects ([`overlay`]: an object of the files replaces
//! the live one of the same kind, namespace and name, keeping its UID, status and, when
//! the spec is the same, its generation), every Gateway of ours is planned on that
//! snapshot by the controller's planner, and [`compare`] lists, pure, what differs from
//! the live objects: children to create, to change (the planned object is not contained
//! in the live one) and to delete, and statuses (Gateways, ListenerSets, routes) that
//! would be written differently. The shell then asks the API server for each change's
//! final form (server-side apply, dry run, as the controller applies) and drops the
//! changes the server would make no-ops.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde_json::{Value, json};

use crate::plan::status::merged_route_parents;
use crate::plan::{Plan, is_subset};
use crate::render::output::api_group;
use crate::snapshot::{Key, ObjectKey, RouteKey, Snapshot};

/// One difference between the plan and the cluster.
#[derive(Clone, Debug, PartialEq)]
pub enum Change {
    /// A child to create.
    Create {
        /// Its Gateway.
        gateway: Key,
        /// Its template.
        template: String,
        /// Its identity.
        key: ObjectKey,
        /// The object as planned.
        planned: Value,
    },
    /// A child whose live object does not hold what is planned.
    Update {
        /// Its Gateway.
        gateway: Key,
        /// Its template.
        template: String,
        /// Its identity.
        key: ObjectKey,
        /// The live object.
        live: Value,
        /// The object as planned (the fields we own).
        planned: Value,
    },
    /// A live child no longer rendered: deleted.
    Delete {
        /// Its Gateway.
        gateway: Key,
        /// Its identity.
        key: ObjectKey,
    },
    /// A status written differently.
    Status {
        /// The Gateway whose plan writes it (for a route: the first of its parents).
        gateway: Key,
        /// Kind, namespace and name of the object.
        what: String,
        /// The live status (timestamps dropped).
        live: Value,
        /// The planned status (timestamps dropped).
        planned: Value,
    },
}

impl Change {
    /// The Gateway the change belongs to.
    #[must_use]
    pub fn gateway(&self) -> &Key {
        match self {
            Self::Create { gateway, .. }
            | Self::Update { gateway, .. }
            | Self::Delete { gateway, .. }
            | Self::Status { gateway, .. } => gateway,
        }
    }
}

/// The identity of an object across its versions: group, kind, namespace, name.
fn identity(v: &Value) -> (String, String, String, String) {
    let s = |p: &Value| p.as_str().unwrap_or_default().to_owned();
    (
        api_group(v["apiVersion"].as_str().unwrap_or_default()).to_owned(),
        s(&v["kind"]),
        s(&v["metadata"]["namespace"]),
        s(&v["metadata"]["name"]),
    )
}

/// Whether two objects are the same object (group, kind, namespace, name).
#[must_use]
pub fn same_object(a: &Value, b: &Value) -> bool {
    identity(a) == identity(b)
}

/// The objects of `files` laid over the `live` ones: each keeps what only the cluster
/// knows of the live object of the same group, kind, namespace and name (UID,
/// resourceVersion, creation time, finalizers, status, and its generation, one higher
/// when the spec differs); one without a live object is new.
#[must_use]
pub fn overlay(live: &[Value], files: Vec<Value>) -> Vec<Value> {
    let index: BTreeMap<_, &Value> = live.iter().map(|v| (identity(v), v)).collect();
    files
        .into_iter()
        .map(|mut f| {
            if let Some(old) = index.get(&identity(&f)) {
                for k in ["uid", "resourceVersion", "creationTimestamp", "finalizers"] {
                    if !old["metadata"][k].is_null() {
                        f["metadata"][k] = old["metadata"][k].clone();
                    }
                }
                if let Some(g) = old["metadata"]["generation"].as_i64() {
                    let bump = i64::from(old["spec"] != f["spec"]);
                    f["metadata"]["generation"] = json!(g + bump);
                }
                if f.get("status").is_none() && !old["status"].is_null() {
                    f["status"] = old["status"].clone();
                }
            }
            f
        })
        .collect()
}

/// Lays `files` (see [`overlay`]) into `snap`, the live snapshot, through the same
/// ingestion and fan-out as the controller's watches: the Gateways the files affect
/// ([`crate::plan::affected`]: a Gateway itself, the Gateways of a class or blueprint,
/// of a policy's namespace, a route's parents before and after, ...).
///
/// # Errors
/// An object of the files that does not decode as its kind.
pub fn lay(
    snap: &mut Snapshot,
    files: Vec<Value>,
) -> Result<std::collections::BTreeSet<Key>, String> {
    let mut changes = Vec::new();
    for f in files {
        let Some(kind) = crate::snapshot::ingest::kind_of(&f) else {
            continue;
        };
        changes.push(crate::snapshot::ingest::apply(snap, kind, f, false)?);
    }
    Ok(changes
        .iter()
        .flat_map(|c| crate::plan::affected::affected(snap, c).gateways)
        .collect())
}

/// Drops what changes on every write and says nothing of the content: condition
/// timestamps.
fn without_timestamps(v: &mut Value) {
    match v {
        Value::Object(m) => {
            m.remove("lastTransitionTime");
            m.values_mut().for_each(without_timestamps);
        }
        Value::Array(a) => a.iter_mut().for_each(without_timestamps),
        _ => {}
    }
}

fn status_change(gateway: &Key, what: String, live: &Value, planned: &Value) -> Option<Change> {
    let (mut l, mut p) = (live.clone(), planned.clone());
    without_timestamps(&mut l);
    without_timestamps(&mut p);
    (l != p).then(|| Change::Status {
        gateway: gateway.clone(),
        what,
        live: l,
        planned: p,
    })
}

/// What the plans of `snap`'s Gateways of ours (`plans`) would change in the cluster whose
/// objects `snap` holds (the live children, and the live statuses of the Gateways and
/// routes as the overlay kept them).
#[must_use]
pub fn compare(snap: &Snapshot, plans: &[(Key, Plan)], now: &Time) -> Vec<Change> {
    let mut out = Vec::new();
    let mut written: BTreeMap<RouteKey, Vec<(&Key, crate::gateway::Parents)>> = BTreeMap::new();
    for (key, p) in plans {
        let owners = p
            .gateway
            .children
            .iter()
            .chain(p.routes.iter().flat_map(|r| r.children.iter()));
        for c in owners {
            match snap.child(&c.key) {
                None => out.push(Change::Create {
                    gateway: key.clone(),
                    template: c.template.clone(),
                    key: c.key.clone(),
                    planned: Value::clone(&c.object),
                }),
                Some(live) if !is_subset(&c.object, &live) => out.push(Change::Update {
                    gateway: key.clone(),
                    template: c.template.clone(),
                    key: c.key.clone(),
                    live: live.as_ref().clone(),
                    planned: Value::clone(&c.object),
                }),
                Some(_) => {}
            }
        }
        let g = &p.gateway;
        for k in g
            .prune
            .iter()
            .chain(&g.orphaned_route_children)
            .chain(p.routes.iter().flat_map(|r| r.prune.iter()))
        {
            out.push(Change::Delete {
                gateway: key.clone(),
                key: k.clone(),
            });
        }
        if let Some(entry) = snap.gateway(key) {
            let planned =
                p.status
                    .gateway
                    .to_status(entry.typed.status.as_ref(), g.generation, now);
            let live = entry.json()["status"].clone();
            let planned = serde_json::to_value(&planned).unwrap_or(Value::Null);
            out.extend(status_change(
                key,
                format!("Gateway {key}"),
                &live,
                &planned,
            ));
        }
        for set in &p.status.gateway.listener_sets {
            let skey = Key::new(set.namespace.clone(), set.name.clone());
            let live = snap
                .listener_set(&skey)
                .map(|e| e.json["status"].clone())
                .unwrap_or(Value::Null);
            let planned = set.to_status(&live, now);
            out.extend(status_change(
                key,
                format!("{} {skey}", crate::gateway::listenersets::KIND),
                &live,
                &planned,
            ));
        }
        for r in &p.status.routes {
            written
                .entry(r.route.clone())
                .or_default()
                .push((key, r.entries.clone()));
        }
    }
    for (rkey, first, json, parents) in merged_route_parents(snap, written, now) {
        let live =
            json!({ "parents": json["status"]["parents"].as_array().cloned().unwrap_or_default() });
        out.extend(status_change(
            &first,
            format!("{} {}/{}", rkey.kind, rkey.namespace, rkey.name),
            &live,
            &json!({ "parents": parents }),
        ));
    }
    out
}

/// The fields of an object a comparison of its content reads: what the server changes on
/// every write (resourceVersion, managedFields, generation) and the status left out.
#[must_use]
pub fn content(v: &Value) -> Value {
    let mut v = v.clone();
    if let Some(m) = v.get_mut("metadata").and_then(Value::as_object_mut) {
        for k in crate::render::view::STATUS_WRITE_METADATA {
            m.remove(k);
        }
        m.remove("generation");
    }
    if let Some(o) = v.as_object_mut() {
        o.remove("status");
    }
    v
}

/// A unified diff of two values printed as YAML, each line indented by `indent`.
#[must_use]
pub fn yaml_diff(from: &Value, to: &Value, indent: &str) -> String {
    let a = serde_saphyr::to_string(from).unwrap_or_default();
    let b = serde_saphyr::to_string(to).unwrap_or_default();
    let d = similar::TextDiff::from_lines(&a, &b);
    let mut out = String::new();
    for hunk in d
        .unified_diff()
        .context_radius(3)
        .header("live", "planned")
        .to_string()
        .lines()
    {
        out.push_str(indent);
        out.push_str(hunk);
        out.push('\n');
    }
    out
}

/// The text of `changes`, grouped by Gateway.
#[must_use]
pub fn print(changes: &[Change]) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    let mut by_gateway: BTreeMap<&Key, Vec<&Change>> = BTreeMap::new();
    for c in changes {
        by_gateway.entry(c.gateway()).or_default().push(c);
    }
    for (gw, cs) in by_gateway {
        let _ = writeln!(out, "Gateway {gw}:");
        for c in cs {
            match c {
                Change::Create {
                    template,
                    key,
                    planned,
                    ..
                } => {
                    let _ = writeln!(out, "  + create {key} [{template}]");
                    for l in serde_saphyr::to_string(planned).unwrap_or_default().lines() {
                        let _ = writeln!(out, "      +{l}");
                    }
                }
                Change::Update {
                    template,
                    key,
                    live,
                    planned,
                    ..
                } => {
                    let _ = writeln!(out, "  ~ change {key} [{template}]");
                    out.push_str(&yaml_diff(&content(live), &content(planned), "      "));
                }
                Change::Delete { key, .. } => {
                    let _ = writeln!(out, "  - delete {key}");
                }
                Change::Status {
                    what,
                    live,
                    planned,
                    ..
                } => {
                    let _ = writeln!(out, "  ~ status of {what}");
                    out.push_str(&yaml_diff(live, planned, "      "));
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gw(spec_port: i64) -> Value {
        json!({
            "apiVersion": "gateway.networking.k8s.io/v1",
            "kind": "Gateway",
            "metadata": {"namespace": "apps", "name": "web"},
            "spec": {"gatewayClassName": "c", "listeners": [{"name": "http", "port": spec_port, "protocol": "HTTP"}]}
        })
    }

    fn live_gw() -> Value {
        let mut g = gw(80);
        g["metadata"]["uid"] = json!("u-1");
        g["metadata"]["generation"] = json!(4);
        g["metadata"]["resourceVersion"] = json!("77");
        g["status"] = json!({"conditions": [{"type": "Programmed", "status": "True", "reason": "Programmed", "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}]});
        g
    }

    #[test]
    fn a_file_keeps_what_only_the_cluster_knows() {
        let out = overlay(&[live_gw()], vec![gw(80)]);
        assert_eq!(out.len(), 1);
        assert_eq!(out[0]["metadata"]["uid"], "u-1");
        assert_eq!(out[0]["metadata"]["generation"], 4, "the same spec");
        assert_eq!(out[0]["status"]["conditions"][0]["type"], "Programmed");
        let out = overlay(&[live_gw()], vec![gw(8080)]);
        assert_eq!(out[0]["metadata"]["generation"], 5, "a new spec");
        assert_eq!(out[0]["spec"]["listeners"][0]["port"], 8080);
    }

    #[test]
    fn a_new_object_is_added() {
        let mut other = gw(80);
        other["metadata"]["name"] = json!("other");
        let out = overlay(&[live_gw()], vec![other]);
        assert_eq!(out.len(), 1);
        assert!(out[0]["metadata"]["uid"].is_null());
    }

    #[test]
    fn files_affect_the_gateways_they_name_and_those_of_their_classes() {
        let mut snap = Snapshot::new("gatewright-system");
        let mut other = live_gw();
        other["metadata"]["name"] = json!("other");
        other["metadata"]["uid"] = json!("u-2");
        for g in [live_gw(), other] {
            crate::snapshot::ingest::put(&mut snap, g).unwrap();
        }
        let touched = lay(&mut snap, vec![gw(8080)]).unwrap();
        assert_eq!(touched, [Key::new("apps", "web")].into_iter().collect());
        let class = json!({
            "apiVersion": "gateway.networking.k8s.io/v1", "kind": "GatewayClass",
            "metadata": {"name": "c"}, "spec": {"controllerName": "x/y"}
        });
        let touched = lay(&mut snap, vec![class]).unwrap();
        assert_eq!(touched.len(), 2, "both Gateways of the class: {touched:?}");
    }

    #[test]
    fn statuses_differing_only_in_timestamps_are_the_same() {
        let a =
            json!({"conditions": [{"type": "A", "lastTransitionTime": "2026-01-01T00:00:00Z"}]});
        let b =
            json!({"conditions": [{"type": "A", "lastTransitionTime": "2026-02-01T00:00:00Z"}]});
        let k = Key::new("apps", "web");
        assert_eq!(status_change(&k, "x".into(), &a, &b), None);
        let c = json!({"conditions": [{"type": "B"}]});
        assert!(status_change(&k, "x".into(), &a, &c).is_some());
    }

    #[test]
    fn a_diff_shows_the_changed_line() {
        let d = yaml_diff(&json!({"a": 1, "b": 2}), &json!({"a": 1, "b": 3}), "  ");
        assert!(d.contains("  -b: 2\n"), "{d}");
        assert!(d.contains("  +b: 3\n"), "{d}");
    }
}
