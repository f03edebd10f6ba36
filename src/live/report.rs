//! What `gatewright status` and `gatewright trace` print, pure: a [`GatewayReport`] is
//! built from a snapshot and the Gateway's plan (the same planner as the controller), and
//! printed as one status line, a tree, JSON or YAML.

use std::fmt::Write as _;

use serde::Serialize;
use serde_json::Value;

use crate::gateway::CONTROLLER_NAME;
use crate::plan::readiness::Readiness;
use crate::plan::{ChildState, Held, Plan, Replacement};
use crate::render::RenderError;
use crate::snapshot::{Key, ObjectKey, RouteKey, Snapshot};

/// A condition as the object carries it.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CondView {
    /// Type.
    #[serde(rename = "type")]
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    pub status: String,
    /// Reason.
    pub reason: String,
    /// Message.
    pub message: String,
    /// When it last changed (RFC 3339), when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<String>,
}

impl CondView {
    fn list(conditions: &Value) -> Vec<Self> {
        conditions
            .as_array()
            .into_iter()
            .flatten()
            .map(|c| {
                let s = |k: &str| c[k].as_str().unwrap_or_default().to_owned();
                Self {
                    type_: s("type"),
                    status: s("status"),
                    reason: s("reason"),
                    message: s("message"),
                    last_transition_time: c["lastTransitionTime"].as_str().map(str::to_owned),
                }
            })
            .collect()
    }
}

/// One child the plan renders, with the live object's readiness.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ChildReport {
    /// The template that renders it.
    pub template: String,
    /// apiVersion.
    pub api_version: String,
    /// Kind.
    pub kind: String,
    /// Namespace (empty: cluster-scoped).
    pub namespace: String,
    /// Name.
    pub name: String,
    /// The member cluster it is placed in (`namespace/name` of its ClusterProfile; fleet
    /// mode); empty: the Gateway's own cluster.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub cluster: String,
    /// `Ready`, `NotReady`, `Missing` (not in the cluster yet) or `Unknown` (placed in a
    /// member that could not be read).
    pub state: &'static str,
    /// Why it is not ready.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
    /// The live object's own conditions.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<CondView>,
}

/// A template held back, or one that failed, or a replacement under way.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Note {
    /// The template (and object, for a replacement per object).
    pub template: String,
    /// In words: what it waits for, the error, or the replacement's step.
    pub message: String,
    /// The template's line, for an error.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line: Option<usize>,
}

/// What one parent (a Gateway, or a route under it) renders and waits for.
#[derive(Clone, Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Rendered {
    /// Children in dependency order.
    pub children: Vec<ChildReport>,
    /// Templates waiting on a dependency.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub waiting: Vec<Note>,
    /// Template errors.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<Note>,
    /// Make-before-break replacements under way.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub rollouts: Vec<Note>,
    /// Live children the controller deletes (no longer rendered).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub prune: Vec<String>,
}

/// A route attached to the Gateway.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RouteReport {
    /// Kind.
    pub kind: String,
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// Our `status.parents` conditions for this Gateway, as the route carries them.
    pub conditions: Vec<CondView>,
    /// The listeners that accepted it, each with the hostnames it is accepted for there
    /// (`<listener>: <names>`; a ListenerSet's as `<set>/<listener>`): all its copies may
    /// serve (docs/security.md).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub accepted_on: Vec<String>,
    /// What its templates render.
    #[serde(flatten)]
    pub rendered: Rendered,
}

/// Everything `trace` shows of one Gateway of ours.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GatewayReport {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// GatewayClass.
    pub class: String,
    /// Whether the Gateway is being deleted.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub deleting: bool,
    /// The Gateway's conditions, as it carries them.
    pub conditions: Vec<CondView>,
    /// What its own templates render.
    #[serde(flatten)]
    pub rendered: Rendered,
    /// The routes it accepted, in the plan's order.
    pub routes: Vec<RouteReport>,
}

fn children(states: &[ChildState], snap: &Snapshot) -> Vec<ChildReport> {
    states
        .iter()
        .map(|s| {
            let (state, why) = match &s.readiness {
                Readiness::Ready => ("Ready", None),
                Readiness::NotReady(w) => ("NotReady", Some(w.clone())),
                Readiness::Missing => ("Missing", Some("not in the cluster yet".to_owned())),
            };
            let conditions = snap
                .child(&s.key)
                .map(|o| CondView::list(&o["status"]["conditions"]))
                .unwrap_or_default();
            ChildReport {
                template: s.template.clone(),
                api_version: s.key.api_version.clone(),
                kind: s.key.kind.clone(),
                namespace: s.key.namespace.clone(),
                name: s.key.name.clone(),
                cluster: s.key.cluster.clone(),
                state,
                why,
                conditions,
            }
        })
        .collect()
}

fn rendered(
    states: &[ChildState],
    held: &[Held],
    errors: &[RenderError],
    rollouts: &[Replacement],
    prune: impl Iterator<Item = String>,
    snap: &Snapshot,
) -> Rendered {
    Rendered {
        children: children(states, snap),
        waiting: held
            .iter()
            .map(|h| Note {
                template: h.template.clone(),
                message: h.reason.clone(),
                line: None,
            })
            .collect(),
        errors: errors
            .iter()
            .map(|e| Note {
                template: e.template.clone(),
                message: e.message.clone(),
                line: e.line,
            })
            .collect(),
        rollouts: rollouts
            .iter()
            .map(|r| Note {
                template: r.label(),
                message: format!(
                    "{} -> {} ({:?}): {}",
                    r.from.as_deref().unwrap_or("-"),
                    r.to,
                    r.phase,
                    r.waiting_for
                ),
                line: None,
            })
            .collect(),
        prune: prune.collect(),
    }
}

/// Our `status.parents` conditions of `route` for the Gateway `gw`.
fn route_conditions(route: &Value, gw: &Key) -> Vec<CondView> {
    route["status"]["parents"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|p| p["controllerName"] == CONTROLLER_NAME)
        .filter(|p| {
            let r = &p["parentRef"];
            let ns = r["namespace"]
                .as_str()
                .or_else(|| route["metadata"]["namespace"].as_str())
                .unwrap_or_default();
            r["name"] == gw.name.as_str()
                && ns == gw.namespace
                && r["kind"].as_str().unwrap_or("Gateway") == "Gateway"
        })
        .flat_map(|p| CondView::list(&p["conditions"]))
        .collect()
}

/// Where the Gateway of `plan` accepted `route`: `<listener>: <hostnames>` per listener.
fn accepted_on(plan: &Plan, route: &RouteKey) -> Vec<String> {
    let mut on: Vec<String> = plan
        .status
        .routes
        .iter()
        .filter(|r| &r.route == route)
        .flat_map(|r| r.entries.iter())
        .filter(|a| a.is_accepted())
        .flat_map(|a| &a.listeners)
        .map(|l| {
            let name = match &l.set {
                Some((_, set)) => format!("{set}/{}", l.listener),
                None => l.listener.clone(),
            };
            let names = if l.hostnames.is_empty() {
                "every hostname".to_owned()
            } else {
                l.hostnames.join(", ")
            };
            format!("{name}: {names}")
        })
        .collect();
    on.sort();
    on.dedup();
    on
}

/// The report of the Gateway `key`, planned as `plan`.
#[must_use]
pub fn gateway_report(snap: &Snapshot, key: &Key, plan: &Plan) -> GatewayReport {
    let entry = snap.gateway(key);
    let json = entry.map(|e| e.json()).unwrap_or(Value::Null);
    let g = &plan.gateway;
    let routes = plan
        .routes
        .iter()
        .map(|r| {
            let live = snap
                .route(&r.route)
                .map(|e| e.json())
                .unwrap_or(Value::Null);
            RouteReport {
                kind: r.route.kind.clone(),
                namespace: r.route.namespace.clone(),
                name: r.route.name.clone(),
                conditions: route_conditions(&live, key),
                accepted_on: accepted_on(plan, &r.route),
                rendered: rendered(
                    &r.states,
                    &r.held,
                    &r.errors,
                    &r.rollouts,
                    r.prune.iter().map(ToString::to_string),
                    snap,
                ),
            }
        })
        .collect();
    GatewayReport {
        namespace: key.namespace.clone(),
        name: key.name.clone(),
        class: json["spec"]["gatewayClassName"]
            .as_str()
            .unwrap_or_default()
            .to_owned(),
        deleting: json["metadata"]["deletionTimestamp"].is_string(),
        conditions: CondView::list(&json["status"]["conditions"]),
        rendered: rendered(
            &g.states,
            &g.held,
            &g.errors,
            &g.rollouts,
            g.prune
                .iter()
                .chain(&g.orphaned_route_children)
                .map(ToString::to_string),
            snap,
        ),
        routes,
    }
}

impl GatewayReport {
    /// Placed children that could not be read in their member (`gatewright status|trace
    /// --fleet`): `Unknown`, with why, rather than `Missing`.
    pub fn mark_unread(&mut self, unread: &std::collections::BTreeMap<ObjectKey, String>) {
        for c in &mut self.rendered.children {
            let key = ObjectKey {
                api_version: c.api_version.clone(),
                kind: c.kind.clone(),
                namespace: c.namespace.clone(),
                name: c.name.clone(),
                cluster: c.cluster.clone(),
            };
            if let Some(why) = unread.get(&key) {
                c.state = "Unknown";
                c.why = Some(why.clone());
                c.conditions.clear();
            }
        }
    }

    fn condition(&self, type_: &str) -> Option<&CondView> {
        self.conditions.iter().find(|c| c.type_ == type_)
    }

    /// Children ready, and in all (the Gateway's and its routes').
    #[must_use]
    pub fn children_ready(&self) -> (usize, usize) {
        let all = self
            .rendered
            .children
            .iter()
            .chain(self.routes.iter().flat_map(|r| r.rendered.children.iter()));
        all.fold((0, 0), |(r, t), c| {
            (r + usize::from(c.state == "Ready"), t + 1)
        })
    }

    /// Routes whose entry for this Gateway says Accepted, and routes in all.
    #[must_use]
    pub fn routes_accepted(&self) -> (usize, usize) {
        let accepted = self
            .routes
            .iter()
            .filter(|r| {
                r.conditions
                    .iter()
                    .any(|c| c.type_ == "Accepted" && c.status == "True")
            })
            .count();
        (accepted, self.routes.len())
    }

    /// The newest lastTransitionTime of the Gateway's conditions.
    #[must_use]
    pub fn last_transition(&self) -> Option<&str> {
        self.conditions
            .iter()
            .filter_map(|c| c.last_transition_time.as_deref())
            .max()
    }
}

/// The columns of `gatewright status`.
pub const STATUS_HEADER: [&str; 8] = [
    "NAMESPACE",
    "NAME",
    "CLASS",
    "PROGRAMMED",
    "CHILDREN",
    "ROUTES",
    "CHANGED",
    "WHY",
];

/// One row of `gatewright status`: namespace, name, class, Programmed, children ready/all,
/// routes accepted/all, time since the last transition (`now` in seconds since the
/// epoch), and why it is not Programmed (its reason and message; empty when it is).
#[must_use]
pub fn status_row(r: &GatewayReport, now: i64) -> [String; 8] {
    let programmed = r.condition("Programmed");
    let (ready, children) = r.children_ready();
    let (accepted, routes) = r.routes_accepted();
    let changed = r
        .last_transition()
        .and_then(|t| t.parse::<k8s_openapi::jiff::Timestamp>().ok())
        .map_or_else(|| "-".to_owned(), |t| age(now - t.as_second()));
    let why = match programmed {
        Some(c) if c.status == "True" => String::new(),
        Some(c) => format!("{}: {}", c.reason, c.message),
        None => "no status written yet".to_owned(),
    };
    let why = if r.deleting {
        format!("deleting; {why}")
    } else {
        why
    };
    [
        r.namespace.clone(),
        r.name.clone(),
        r.class.clone(),
        programmed.map_or_else(|| "Unknown".to_owned(), |c| c.status.clone()),
        format!("{ready}/{children}"),
        format!("{accepted}/{routes}"),
        changed,
        why,
    ]
}

/// Seconds as kubectl prints an age: `42s`, `5m`, `3h`, `2d`.
#[must_use]
pub fn age(seconds: i64) -> String {
    let s = seconds.max(0);
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m", s / 60),
        3600..86_400 => format!("{}h", s / 3600),
        _ => format!("{}d", s / 86_400),
    }
}

/// Rows as columns padded to their widest cell (the last column unpadded).
#[must_use]
pub fn table(rows: &[[String; 8]]) -> String {
    let mut widths = [0usize; 8];
    for r in rows {
        for (w, c) in widths.iter_mut().zip(r) {
            *w = (*w).max(c.chars().count());
        }
    }
    let mut out = String::new();
    for r in rows {
        let mut line = String::new();
        for (i, (c, w)) in r.iter().zip(widths).enumerate() {
            if i + 1 == r.len() {
                line.push_str(c);
            } else {
                let _ = write!(line, "{c:<w$}   ");
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// Colours of the tree, on a terminal.
#[derive(Clone, Copy, Debug, Default)]
pub struct Paint {
    /// Whether to write ANSI colour codes.
    pub colour: bool,
}

impl Paint {
    fn paint(self, code: &str, s: &str) -> String {
        if self.colour {
            format!("\x1b[{code}m{s}\x1b[0m")
        } else {
            s.to_owned()
        }
    }

    fn status(self, s: &str) -> String {
        match s {
            "True" | "Ready" => self.paint("32", s),
            "False" | "Missing" => self.paint("31", s),
            _ => self.paint("33", s),
        }
    }
}

/// A line of the tree: its prefix, and whether more siblings follow.
struct Tree<'a> {
    out: &'a mut String,
    paint: Paint,
}

impl Tree<'_> {
    fn line(&mut self, indent: &str, last: bool, text: &str) {
        let branch = if last { "└─ " } else { "├─ " };
        let _ = writeln!(self.out, "{indent}{branch}{text}");
    }

    fn conditions(&mut self, indent: &str, conds: &[CondView], more: bool) {
        for (i, c) in conds.iter().enumerate() {
            let last = i + 1 == conds.len() && !more;
            let msg = if c.message.is_empty() {
                String::new()
            } else {
                format!(": {}", c.message)
            };
            let text = format!(
                "{}={} {}{msg}",
                c.type_,
                self.paint.status(&c.status),
                c.reason
            );
            self.line(indent, last, &text);
        }
    }

    fn rendered(&mut self, indent: &str, r: &Rendered, more: bool) {
        let mut items: Vec<(String, Vec<CondView>)> = Vec::new();
        for c in &r.children {
            let ns = if c.namespace.is_empty() {
                String::new()
            } else {
                format!("{}/", c.namespace)
            };
            let why = c.why.as_deref().map_or(String::new(), |w| format!(": {w}"));
            let cluster = if c.cluster.is_empty() {
                String::new()
            } else {
                format!(" in {}", c.cluster)
            };
            items.push((
                format!(
                    "{} {ns}{}{cluster} [{}] {}{why}",
                    c.kind,
                    c.name,
                    c.template,
                    self.paint.status(c.state)
                ),
                if c.state == "Ready" {
                    Vec::new()
                } else {
                    c.conditions.clone()
                },
            ));
        }
        for n in &r.waiting {
            items.push((
                format!(
                    "template {} {}: {}",
                    n.template,
                    self.paint.paint("33", "waiting"),
                    n.message
                ),
                Vec::new(),
            ));
        }
        for n in &r.errors {
            let line = n.line.map_or(String::new(), |l| format!(" line {l}"));
            items.push((
                format!(
                    "template {}{line} {}: {}",
                    n.template,
                    self.paint.paint("31", "error"),
                    n.message
                ),
                Vec::new(),
            ));
        }
        for n in &r.rollouts {
            items.push((format!("rollout {}: {}", n.template, n.message), Vec::new()));
        }
        for p in &r.prune {
            items.push((format!("to delete: {p}"), Vec::new()));
        }
        let n = items.len();
        for (i, (text, conds)) in items.into_iter().enumerate() {
            let last = i + 1 == n && !more;
            self.line(indent, last, &text);
            let sub = format!("{indent}{}", if last { "   " } else { "│  " });
            self.conditions(&sub, &conds, false);
        }
    }
}

/// The tree of `gatewright trace`: the Gateway and its conditions, its children in
/// dependency order (each with its state, and its own conditions when not ready), what
/// waits or failed, replacements under way, what is to be deleted, then each route with
/// its conditions and children.
#[must_use]
pub fn tree(r: &GatewayReport, paint: Paint) -> String {
    let mut out = String::new();
    let deleting = if r.deleting { " (deleting)" } else { "" };
    let _ = writeln!(
        out,
        "Gateway {}/{} (class {}){deleting}",
        r.namespace, r.name, r.class
    );
    let mut t = Tree {
        out: &mut out,
        paint,
    };
    let routes = !r.routes.is_empty();
    let has_rendered = !r.rendered.children.is_empty()
        || !r.rendered.waiting.is_empty()
        || !r.rendered.errors.is_empty()
        || !r.rendered.rollouts.is_empty()
        || !r.rendered.prune.is_empty();
    t.conditions("", &r.conditions, has_rendered || routes);
    t.rendered("", &r.rendered, routes);
    for (i, route) in r.routes.iter().enumerate() {
        let last = i + 1 == r.routes.len();
        let on = if route.accepted_on.is_empty() {
            String::new()
        } else {
            format!(" (on {})", route.accepted_on.join("; "))
        };
        t.line(
            "",
            last,
            &format!("{} {}/{}{on}", route.kind, route.namespace, route.name),
        );
        let sub = if last { "   " } else { "│  " };
        let has = !route.rendered.children.is_empty()
            || !route.rendered.waiting.is_empty()
            || !route.rendered.errors.is_empty()
            || !route.rendered.rollouts.is_empty()
            || !route.rendered.prune.is_empty();
        t.conditions(sub, &route.conditions, has);
        t.rendered(sub, &route.rendered, false);
    }
    out
}

/// The Gateways of our classes in `snap` (all, or those of `namespace`), sorted.
#[must_use]
pub fn our_gateways(snap: &Snapshot, namespace: Option<&str>) -> Vec<Key> {
    snap.gateways()
        .map(|(k, _)| k)
        .filter(|k| namespace.is_none_or(|n| k.namespace == n))
        .filter(|k| crate::plan::gateway::in_scope(snap, k).is_ok())
        .cloned()
        .collect()
}

/// The Gateways of ours a route names as parent (directly or through a ListenerSet).
#[must_use]
pub fn parents_of_route(snap: &Snapshot, route: &RouteKey) -> Vec<Key> {
    let mut out: Vec<Key> = snap
        .route(route)
        .map(|r| {
            r.view
                .parent_refs
                .iter()
                .filter_map(|p| snap.gateway_of_parent(p))
                .collect()
        })
        .unwrap_or_default();
    out.retain(|k| crate::plan::gateway::in_scope(snap, k).is_ok());
    out.sort();
    out.dedup();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ages_read_as_kubectl_prints_them() {
        assert_eq!(age(-3), "0s");
        assert_eq!(age(42), "42s");
        assert_eq!(age(300), "5m");
        assert_eq!(age(3 * 3600 + 5), "3h");
        assert_eq!(age(2 * 86_400), "2d");
    }

    #[test]
    fn a_table_pads_every_column_but_the_last() {
        let row =
            |a: &str, w: &str| [a, "n", "c", "True", "1/1", "0/0", "1m", w].map(str::to_owned);
        let t = table(&[row("NAMESPACE", "WHY"), row("a", "")]);
        assert_eq!(
            t,
            "NAMESPACE   n   c   True   1/1   0/0   1m   WHY\na           n   c   True   1/1   0/0   1m\n"
        );
    }
}
