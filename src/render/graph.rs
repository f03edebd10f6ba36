//! The dependency graph between a blueprint's templates. A template that reads
//! `resources.X` (or `pending.X`) depends on template `X` of the same set; the graph is derived from
//! the template source once, ordered once (declaration order breaks ties), and a cycle
//! or a read of a template that does not exist is a blueprint error.
//!
//! In: a compiled blueprint and its template entries. Out: the render order and, per
//! template, the templates it reads.

use std::collections::{BTreeMap, BTreeSet};

use super::RenderError;
use super::engine::{Compiled, TemplateSet, is_known_variable};
use crate::api::TemplateEntry;

/// The ordered templates of one set.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Graph {
    /// Template names, each after everything it reads.
    pub order: Vec<String>,
    /// Template name -> the templates it reads through `resources` or `pending`.
    pub deps: BTreeMap<String, BTreeSet<String>>,
}

impl Graph {
    /// Builds the graph of `entries` (templates of `set`), also checking that every
    /// variable they read exists. `status_source`, when given, is the status template:
    /// it may read any template of `entries` but nothing may read it.
    ///
    /// # Errors
    /// Unknown variables, reads of missing templates, and cycles, each named.
    pub fn build(
        compiled: &Compiled,
        set: TemplateSet,
        entries: &[TemplateEntry],
    ) -> Result<Self, Vec<RenderError>> {
        let mut deps = BTreeMap::new();
        let mut errors = Vec::new();
        for entry in entries {
            let reads = compiled.reads(set, &entry.name, &entry.template);
            let mut mine = BTreeSet::new();
            check_reads(
                compiled,
                &entry.name,
                set,
                &reads,
                entries,
                &mut mine,
                &mut errors,
            );
            deps.insert(entry.name.clone(), mine);
        }
        if !errors.is_empty() {
            return Err(errors);
        }
        let order = topo_order(entries, &deps).map_err(|cycle| {
            vec![
                RenderError::new(
                    &compiled.blueprint,
                    &cycle[0],
                    None,
                    format!("dependency cycle through resources: {}", cycle.join(" -> ")),
                )
                .with_category("DependencyCycle"),
            ]
        })?;
        Ok(Self { order, deps })
    }

    /// The templates the status template reads.
    ///
    /// # Errors
    /// Unknown variables or reads of missing templates.
    pub fn status_deps(
        compiled: &Compiled,
        source: &str,
        entries: &[TemplateEntry],
    ) -> Result<BTreeSet<String>, Vec<RenderError>> {
        let reads = compiled.reads(TemplateSet::Status, super::engine::STATUS_TEMPLATE, source);
        let mut mine = BTreeSet::new();
        let mut errors = Vec::new();
        check_reads(
            compiled,
            super::engine::STATUS_TEMPLATE,
            TemplateSet::Status,
            &reads,
            entries,
            &mut mine,
            &mut errors,
        );
        if errors.is_empty() {
            Ok(mine)
        } else {
            Err(errors)
        }
    }
}

fn check_reads(
    compiled: &Compiled,
    template: &str,
    set: TemplateSet,
    reads: &BTreeSet<String>,
    entries: &[TemplateEntry],
    deps: &mut BTreeSet<String>,
    errors: &mut Vec<RenderError>,
) {
    let mut error = |message: String, category: &'static str| {
        errors.push(
            RenderError::new(&compiled.blueprint, template, None, message).with_category(category),
        );
    };
    for path in reads {
        let mut parts = path.split('.');
        let top = parts.next();
        if !is_known_variable(path) {
            error(
                format!(
                    "unknown variable {:?}; templates can read {}",
                    top.unwrap_or(path),
                    super::engine::CONTEXT_VARIABLES.join(", ")
                ),
                "UndefinedVariable",
            );
            continue;
        }
        if set == TemplateSet::Gateway
            && let Some(var @ ("route" | "attachment")) = top
        {
            error(
                format!("gateway templates cannot read `{var}`; use a route template"),
                "UndefinedVariable",
            );
            continue;
        }
        let (Some(var @ ("resources" | "pending")), Some(dep)) = (top, parts.next()) else {
            continue;
        };
        match entries.iter().find(|e| e.name == dep) {
            None => error(
                format!("reads {var}.{dep}, but no template is named {dep:?}"),
                "UnknownTemplate",
            ),
            Some(e)
                if var == "pending"
                    && !e
                        .rollout
                        .as_ref()
                        .is_some_and(crate::api::Rollout::make_before_break) =>
            {
                error(
                    format!(
                        "reads pending.{dep}, but template {dep:?} is not replaced make-before-break (rollout.strategy: MakeBeforeBreak)"
                    ),
                    "UnknownTemplate",
                );
            }
            Some(_) => {
                deps.insert(dep.to_owned());
            }
        }
    }
}

/// Kahn's algorithm, ties broken by declaration order. On a cycle, returns one cycle path.
fn topo_order(
    entries: &[TemplateEntry],
    deps: &BTreeMap<String, BTreeSet<String>>,
) -> Result<Vec<String>, Vec<String>> {
    let mut done: BTreeSet<&str> = BTreeSet::new();
    let mut order = Vec::with_capacity(entries.len());
    while order.len() < entries.len() {
        let next = entries.iter().find(|e| {
            !done.contains(e.name.as_str())
                && deps
                    .get(&e.name)
                    .is_none_or(|d| d.iter().all(|x| done.contains(x.as_str())))
        });
        match next {
            Some(e) => {
                done.insert(&e.name);
                order.push(e.name.clone());
            }
            None => return Err(find_cycle(entries, deps, &done)),
        }
    }
    Ok(order)
}

fn find_cycle(
    entries: &[TemplateEntry],
    deps: &BTreeMap<String, BTreeSet<String>>,
    done: &BTreeSet<&str>,
) -> Vec<String> {
    // Every remaining node has a remaining dependency: walk until a node repeats.
    let Some(start) = entries.iter().find(|e| !done.contains(e.name.as_str())) else {
        return Vec::new();
    };
    let mut path = vec![start.name.clone()];
    loop {
        let cur = path.last().cloned().unwrap_or_default();
        let next = deps
            .get(&cur)
            .and_then(|d| d.iter().find(|x| !done.contains(x.as_str())))
            .cloned();
        let Some(next) = next else { return path };
        if let Some(pos) = path.iter().position(|p| *p == next) {
            let mut cycle = path[pos..].to_vec();
            cycle.push(next);
            return cycle;
        }
        path.push(next);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::GatewayClassBlueprintSpec;

    fn entry(name: &str, template: &str) -> TemplateEntry {
        TemplateEntry {
            name: name.into(),
            template: template.into(),
            ready_when: None,
            rollout: None,
            drain: None,
            placement: None,
            kinds: Vec::new(),
            adopt: None,
        }
    }

    fn build(entries: Vec<TemplateEntry>) -> Result<Graph, Vec<RenderError>> {
        let spec = GatewayClassBlueprintSpec {
            gateway_templates: entries.clone(),
            ..Default::default()
        };
        let compiled = Compiled::compile("bp", &spec)?;
        Graph::build(&compiled, TemplateSet::Gateway, &entries)
    }

    #[test]
    fn orders_dependencies_first_and_keeps_declaration_order() {
        let g = build(vec![
            entry("binding", "arn: {{ (resources.tg | first).status.arn }}"),
            entry("lb", "kind: LB"),
            entry("tg", "lb: {{ (resources.lb | first).metadata.name }}"),
            entry("other", "x: 1"),
        ])
        .unwrap();
        assert_eq!(g.order, ["lb", "tg", "binding", "other"]);
        assert_eq!(g.deps["binding"], BTreeSet::from(["tg".to_owned()]));
    }

    #[test]
    fn subscript_reads_count() {
        let g = build(vec![
            entry("a", "x: {{ resources[\"b\"] }}"),
            entry("b", "y: 1"),
        ])
        .unwrap();
        assert_eq!(g.order, ["b", "a"]);
    }

    #[test]
    fn cycles_are_named() {
        let errs = build(vec![
            entry("a", "x: {{ resources.b }}"),
            entry("b", "x: {{ resources.c }}"),
            entry("c", "x: {{ resources.a }}"),
        ])
        .unwrap_err();
        assert_eq!(errs[0].category, "DependencyCycle");
        assert!(
            errs[0].message.contains("a -> b -> c -> a"),
            "{}",
            errs[0].message
        );
    }

    #[test]
    fn unknown_variables_and_templates_are_errors() {
        let errs = build(vec![entry(
            "a",
            "x: {{ gatway.metadata.name }}\ny: {{ resources.nope }}",
        )])
        .unwrap_err();
        assert_eq!(errs.len(), 2, "{errs:?}");
        assert!(
            errs.iter()
                .any(|e| e.message.contains("unknown variable \"gatway\""))
        );
        assert!(
            errs.iter()
                .any(|e| e.message.contains("no template is named \"nope\""))
        );
    }

    #[test]
    fn gateway_templates_cannot_read_route() {
        let errs = build(vec![entry("a", "x: {{ route.metadata.name }}")]).unwrap_err();
        assert!(errs[0].message.contains("cannot read `route`"));
    }

    #[test]
    fn loop_variables_and_imports_are_not_unknown() {
        let g = build(vec![entry(
            "a",
            "{% import \"gatewright/lib.yaml\" as lib %}{% for h in hostnames.union %}- {{ h }}{% endfor %}\nn: {{ lib.name(gateway, \"x\") }}",
        )]);
        assert!(g.is_ok(), "{g:?}");
    }
}
