//! A blueprint's shape, drawn: every template with the kinds it names, what it reads
//! (`resources.X`, `pending.X`), its rollout policy, and the order in which its children
//! are created and torn down, as Mermaid or Graphviz DOT. `gatewright graph` prints it;
//! the shipped classes' READMEs show it.
//!
//! In: a [`Prepared`] blueprint (its graphs are the planner's own). Out: text. Pure.

use std::fmt::Write as _;

use super::TemplateSet;
use super::prepared::Prepared;
use crate::api::TemplateEntry;

/// How one template reads another.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Via {
    /// `resources.X`: the live children of X (X is created first).
    Resources,
    /// `pending.X`: the version of X being rolled out make-before-break.
    Pending,
}

impl Via {
    fn word(self) -> &'static str {
        match self {
            Self::Resources => "resources",
            Self::Pending => "pending",
        }
    }
}

/// One template of the drawing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Node {
    /// Gateway, route or status template.
    pub set: TemplateSet,
    /// Template name.
    pub name: String,
    /// The kinds it names literally, as `Kind (group)`, in template order.
    pub kinds: Vec<String>,
    /// What it reads, as (how, template), sorted.
    pub reads: Vec<(Via, String)>,
    /// `MakeBeforeBreak` with its fields, when it is rolled out so.
    pub rollout: Option<String>,
    /// Where a placed template's objects go (fleet mode): its cluster selector, in words.
    pub placement: Option<String>,
    /// 1-based position in its set's creation order (Gateway templates once per Gateway,
    /// route templates once per attached route); none for the status template.
    pub create: Option<usize>,
    /// 1-based position in the teardown (route templates first, dependents first).
    pub teardown: Option<usize>,
}

/// A blueprint's templates, in creation order: Gateway templates, route templates, then
/// the status template (if any).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Diagram {
    /// Blueprint name.
    pub blueprint: String,
    /// The templates.
    pub nodes: Vec<Node>,
}

impl Diagram {
    /// Draws a prepared blueprint.
    #[must_use]
    pub fn of(p: &Prepared) -> Self {
        let gw = &p.gateway_graph.order;
        let routes = &p.route_graph.order;
        // Teardown: route children first, then the Gateway's, each set dependents first.
        let teardown: Vec<(TemplateSet, &String)> = routes
            .iter()
            .rev()
            .map(|n| (TemplateSet::Route, n))
            .chain(gw.iter().rev().map(|n| (TemplateSet::Gateway, n)))
            .collect();
        let position = |set: TemplateSet, name: &str| {
            teardown
                .iter()
                .position(|(s, n)| *s == set && n.as_str() == name)
                .map(|i| i + 1)
        };
        let mut nodes = Vec::new();
        for (set, order) in [(TemplateSet::Gateway, gw), (TemplateSet::Route, routes)] {
            for (i, name) in order.iter().enumerate() {
                let Some(entry) = p.entry(set, name) else {
                    continue;
                };
                nodes.push(Node {
                    set,
                    name: name.clone(),
                    kinds: kinds(set, entry),
                    reads: reads(p, set, entry),
                    rollout: entry
                        .rollout
                        .as_ref()
                        .filter(|r| r.make_before_break())
                        .map(|r| {
                            let what = if r.per_object() { " per object" } else { "" };
                            if r.fields.is_empty() {
                                format!("MakeBeforeBreak{what}")
                            } else {
                                format!("MakeBeforeBreak{what} on {}", r.fields.join(", "))
                            }
                        }),
                    placement: entry.placement.as_ref().map(placed_in),
                    create: Some(i + 1),
                    teardown: position(set, name),
                });
            }
        }
        if p.spec.status.is_some() {
            nodes.push(Node {
                set: TemplateSet::Status,
                name: super::engine::STATUS_TEMPLATE.to_owned(),
                kinds: Vec::new(),
                reads: p
                    .status_deps
                    .iter()
                    .map(|d| (Via::Resources, d.clone()))
                    .collect(),
                rollout: None,
                placement: None,
                create: None,
                teardown: None,
            });
        }
        Self {
            blueprint: p.name.clone(),
            nodes,
        }
    }

    /// The Gateway and route templates, by set (sets with none left out), with their
    /// titles.
    fn groups(&self) -> impl Iterator<Item = (TemplateSet, &'static str, Vec<&Node>)> {
        [
            (TemplateSet::Gateway, "Gateway templates: once per Gateway"),
            (
                TemplateSet::Route,
                "route templates: once per attached route",
            ),
        ]
        .into_iter()
        .map(|(set, title)| {
            let nodes: Vec<&Node> = self.nodes.iter().filter(|n| n.set == set).collect();
            (set, title, nodes)
        })
        .filter(|(_, _, nodes)| !nodes.is_empty())
    }

    /// The status template, if the blueprint has one.
    fn status(&self) -> Option<&Node> {
        self.nodes.iter().find(|n| n.set == TemplateSet::Status)
    }

    /// Every read as an edge: (id of what is read, id of the reader, how).
    fn edges(&self) -> impl Iterator<Item = (String, String, Via)> + '_ {
        self.nodes.iter().flat_map(|n| {
            n.reads.iter().map(move |(via, dep)| {
                (node_id(dep_set(n.set), dep), node_id(n.set, &n.name), *via)
            })
        })
    }

    /// The drawing as a Mermaid flowchart. An arrow goes from what is read to the
    /// template reading it (so along the creation order); `pending` arrows are dotted.
    #[must_use]
    pub fn mermaid(&self) -> String {
        let mut out = String::from("flowchart LR\n");
        for (set, title, nodes) in self.groups() {
            let _ = writeln!(out, "  subgraph {}[\"{title}\"]", set_id(set));
            for n in nodes {
                let _ = writeln!(
                    out,
                    "    {}[\"{}\"]",
                    node_id(n.set, &n.name),
                    label(n, "<br/>")
                );
            }
            out.push_str("  end\n");
        }
        if let Some(s) = self.status() {
            let _ = writeln!(
                out,
                "  {}([\"{}\"])",
                node_id(s.set, &s.name),
                label(s, "<br/>")
            );
        }
        for (from, to, via) in self.edges() {
            let arrow = match via {
                Via::Resources => "-- resources -->",
                Via::Pending => "-. pending .->",
            };
            let _ = writeln!(out, "  {from} {arrow} {to}");
        }
        out
    }

    /// The drawing as Graphviz DOT (`dot -Tsvg`); `pending` edges are dashed.
    #[must_use]
    pub fn dot(&self) -> String {
        let mut out = format!(
            "digraph {} {{\n  rankdir=LR;\n  node [shape=box, fontname=\"sans-serif\"];\n",
            quote(&format!("blueprint {}", self.blueprint))
        );
        for (set, title, nodes) in self.groups() {
            let _ = writeln!(
                out,
                "  subgraph cluster_{} {{\n    label={};",
                set_id(set),
                quote(title)
            );
            for n in nodes {
                let _ = writeln!(
                    out,
                    "    {} [label={}];",
                    node_id(n.set, &n.name),
                    quote(&label(n, "\n"))
                );
            }
            out.push_str("  }\n");
        }
        if let Some(s) = self.status() {
            let _ = writeln!(
                out,
                "  {} [label={}, shape=ellipse];",
                node_id(s.set, &s.name),
                quote(&label(s, "\n"))
            );
        }
        for (from, to, via) in self.edges() {
            let style = match via {
                Via::Resources => "",
                Via::Pending => ", style=dashed",
            };
            let _ = writeln!(
                out,
                "  {from} -> {to} [label={}{style}];",
                quote(via.word())
            );
        }
        out.push_str("}\n");
        out
    }
}

/// The set a template of `set` reads from: the status template reads Gateway templates.
fn dep_set(set: TemplateSet) -> TemplateSet {
    match set {
        TemplateSet::Status => TemplateSet::Gateway,
        s => s,
    }
}

fn set_id(set: TemplateSet) -> &'static str {
    match set {
        TemplateSet::Gateway => "gateway",
        TemplateSet::Route => "route",
        TemplateSet::Status => "status",
    }
}

/// An identifier safe in both Mermaid and DOT: the set's letter and the name with every
/// character but ASCII letters and digits as `_`.
fn node_id(set: TemplateSet, name: &str) -> String {
    let clean: String = name
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    format!("{}_{clean}", &set_id(set)[..1])
}

/// A placement's selector in words: `placed in every member`, or `placed in members k=v,
/// k2 In (a, b)`.
fn placed_in(p: &crate::api::TemplatePlacement) -> String {
    let mut terms: Vec<String> = p
        .clusters
        .match_labels
        .iter()
        .flatten()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    terms.extend(p.clusters.match_expressions.iter().flatten().map(
        |e| match e.values.as_deref() {
            Some(v) if !v.is_empty() => format!("{} {} ({})", e.key, e.operator, v.join(", ")),
            _ => format!("{} {}", e.key, e.operator),
        },
    ));
    if terms.is_empty() {
        "placed in every member".to_owned()
    } else {
        format!("placed in members {}", terms.join(", "))
    }
}

/// A node's text, lines joined by `sep`; quotes are replaced (both formats quote labels).
fn label(n: &Node, sep: &str) -> String {
    let mut lines = vec![match n.set {
        TemplateSet::Status => "status: addresses".to_owned(),
        _ => n.name.clone(),
    }];
    lines.extend(n.kinds.iter().cloned());
    lines.extend(n.rollout.iter().cloned());
    lines.extend(n.placement.iter().cloned());
    match (n.create, n.teardown) {
        (Some(c), Some(t)) => lines.push(format!("create {c} · teardown {t}")),
        (Some(c), None) => lines.push(format!("create {c}")),
        _ => {}
    }
    lines
        .iter()
        .map(|l| l.replace('"', "'"))
        .collect::<Vec<_>>()
        .join(sep)
}

fn quote(s: &str) -> String {
    format!(
        "\"{}\"",
        s.replace('\\', "\\\\")
            .replace('"', "\\\"")
            .replace('\n', "\\n")
    )
}

/// The kinds a template names literally; a route template that names none (it renders
/// the route's own kind, say) says which route kinds it renders for.
fn kinds(set: TemplateSet, entry: &TemplateEntry) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    if set == TemplateSet::Route && super::output::literal_kinds(&entry.template).is_empty() {
        out.push(format!(
            "for {}",
            entry.route_kinds().collect::<Vec<_>>().join(", ")
        ));
        return out;
    }
    for (_, gk) in super::output::literal_kinds(&entry.template) {
        let k = if gk.group.is_empty() {
            format!("{} (core)", gk.kind)
        } else {
            format!("{} ({})", gk.kind, gk.group)
        };
        if !out.contains(&k) {
            out.push(k);
        }
    }
    out
}

fn reads(p: &Prepared, set: TemplateSet, entry: &TemplateEntry) -> Vec<(Via, String)> {
    let mut out: Vec<(Via, String)> = p
        .compiled
        .reads(set, &entry.name, &entry.template)
        .iter()
        .filter_map(|path| {
            let mut parts = path.split('.');
            let via = match parts.next()? {
                "resources" => Via::Resources,
                "pending" => Via::Pending,
                _ => return None,
            };
            Some((via, parts.next()?.to_owned()))
        })
        .collect();
    out.sort();
    out.dedup();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn prepared(yaml: &str) -> Prepared {
        let spec: crate::api::GatewayClassBlueprintSpec =
            serde_saphyr::from_str(yaml).expect("spec");
        Prepared::new("bp", &spec).expect("valid blueprint")
    }

    const BP: &str = r#"
gatewayTemplates:
- name: dns
  template: |
    apiVersion: externaldns.k8s.io/v1alpha1
    kind: DNSEndpoint
    metadata: {name: x}
    spec: {x: {{ resources.lb | length }}}
- name: cert
  rollout: {strategy: MakeBeforeBreak, fields: [spec.dnsNames]}
  template: |
    apiVersion: cert-manager.io/v1
    kind: Certificate
    metadata: {name: y}
- name: lb
  template: |
    apiVersion: v1
    kind: Service
    metadata: {name: "lb-{{ pending.cert | length }}"}
    spec: {x: {{ resources.cert | length }}}
routeTemplates:
- name: copy
  template: |
    apiVersion: gateway.networking.k8s.io/v1
    kind: HTTPRoute
    metadata: {name: z}
status:
  template: |
    addresses: {{ resources.lb | length }}
"#;

    #[test]
    fn nodes_carry_kinds_reads_rollout_and_both_orders() {
        let d = Diagram::of(&prepared(BP));
        let names: Vec<&str> = d.nodes.iter().map(|n| n.name.as_str()).collect();
        assert_eq!(names, ["cert", "lb", "dns", "copy", "status"]);
        let lb = &d.nodes[1];
        assert_eq!(lb.kinds, ["Service (core)"]);
        assert_eq!(
            lb.reads,
            [
                (Via::Resources, "cert".to_owned()),
                (Via::Pending, "cert".to_owned())
            ]
        );
        assert_eq!(
            d.nodes[0].rollout.as_deref(),
            Some("MakeBeforeBreak on spec.dnsNames")
        );
        // Created cert, lb, dns; torn down: the route copy, then dns, lb, cert.
        let orders: Vec<(Option<usize>, Option<usize>)> =
            d.nodes.iter().map(|n| (n.create, n.teardown)).collect();
        assert_eq!(
            orders,
            [
                (Some(1), Some(4)),
                (Some(2), Some(3)),
                (Some(3), Some(2)),
                (Some(1), Some(1)),
                (None, None)
            ]
        );
        assert_eq!(d.nodes[4].reads, [(Via::Resources, "lb".to_owned())]);
    }

    #[test]
    fn mermaid_and_dot_draw_every_node_and_edge() {
        let d = Diagram::of(&prepared(BP));
        let m = d.mermaid();
        for line in [
            "flowchart LR",
            "  subgraph gateway[\"Gateway templates: once per Gateway\"]",
            "    g_cert[\"cert<br/>Certificate (cert-manager.io)<br/>MakeBeforeBreak on spec.dnsNames<br/>create 1 · teardown 4\"]",
            "    r_copy[\"copy<br/>HTTPRoute (gateway.networking.k8s.io)<br/>create 1 · teardown 1\"]",
            "  s_status([\"status: addresses\"])",
            "  g_cert -- resources --> g_lb",
            "  g_cert -. pending .-> g_lb",
            "  g_lb -- resources --> g_dns",
            "  g_lb -- resources --> s_status",
        ] {
            assert!(m.lines().any(|l| l == line), "missing {line:?} in:\n{m}");
        }
        let dot = d.dot();
        assert!(dot.starts_with("digraph \"blueprint bp\" {"), "{dot}");
        assert!(
            dot.contains("  g_cert -> g_lb [label=\"pending\", style=dashed];"),
            "{dot}"
        );
        assert!(
            dot.contains(
                "g_dns [label=\"dns\\nDNSEndpoint (externaldns.k8s.io)\\ncreate 3 · teardown 2\"];"
            ),
            "{dot}"
        );
        assert_eq!(dot.matches('{').count(), dot.matches('}').count());
    }

    #[test]
    fn names_that_are_not_identifiers_are_made_safe() {
        assert_eq!(node_id(TemplateSet::Gateway, "my-tpl.v2"), "g_my_tpl_v2");
        assert_eq!(quote("a \"b\"\nc"), "\"a \\\"b\\\"\\nc\"");
    }
}
