//! `gatewright render` and `gatewright check`: the planner over YAML files, printed.
//!
//! In: paths. Out: the YAML stream for stdout, the messages for stderr, and the exit code
//! (0 rendered or only waiting on a dependency; 2 input unreadable; 3 a template failed).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::PathBuf;

use gateway_api::apis::standard::gatewayclasses::{
    GatewayClassStatus, GatewayClassStatusSupportedFeatures,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde_json::{Value, json};

use crate::gateway::conditions::merge_conditions;
use crate::plan::gateway::OutOfScope;
use crate::plan::status::merged_route_parents;
use crate::plan::{Plan, plan, plan_class};
use crate::snapshot::{Key, RouteKey, files};

/// Exit code: everything rendered (or only waits on a dependency).
pub const EXIT_OK: i32 = 0;
/// Exit code: the input could not be read or parsed.
pub const EXIT_INPUT: i32 = 2;
/// Exit code: a template failed.
pub const EXIT_TEMPLATE: i32 = 3;

/// What a command produced.
#[derive(Debug, Default)]
pub struct Output {
    /// For stdout.
    pub stdout: String,
    /// Lines for stderr.
    pub stderr: Vec<String>,
    /// Exit code.
    pub code: i32,
}

/// Renders every Gateway of our classes in `paths`, and every route attached to one.
///
/// When several parents render the same object and none holds it yet, the oldest keeps
/// it ([`crate::plan::claims`]): the render is done again with that decision recorded, so
/// the others report the conflict in their errors and status exactly as the controller
/// would once the object exists.
#[must_use]
pub fn render(paths: &[PathBuf], controller_namespace: &str, now: &Time) -> Output {
    let mut loaded = match files::load(paths, controller_namespace) {
        Ok(l) => l,
        Err(e) => {
            return Output {
                stderr: vec![format!("error: {e}")],
                code: EXIT_INPUT,
                ..Output::default()
            };
        }
    };
    let (out, claims) = render_snapshot(&loaded.snapshot, now);
    let winners = crate::plan::claims::winners(claims);
    if winners.is_empty() {
        return out;
    }
    for w in winners {
        loaded.snapshot.claim(w.key, w.object);
    }
    render_snapshot(&loaded.snapshot, now).0
}

fn render_snapshot(
    snap: &crate::snapshot::Snapshot,
    now: &Time,
) -> (Output, Vec<crate::plan::claims::Claim>) {
    use crate::plan::claims::{Claim, rank};
    let mut out = Output::default();
    let mut docs: Vec<Value> = Vec::new();
    let mut claims: Vec<Claim> = Vec::new();
    let mut warnings: Vec<String> = Vec::new();
    let mut statuses = class_statuses(snap, now, &mut out);

    // Every Gateway's plan; then each route's entries of ours from all of them, merged as
    // the controller merges them.
    let mut written: BTreeMap<RouteKey, Vec<(&Key, crate::gateway::Parents)>> = BTreeMap::new();
    for (key, entry) in snap.gateways() {
        match plan(snap, key) {
            Ok(p) => {
                report(&mut out, key, &p);
                docs.extend(p.children().map(|c| Value::clone(&c.object)));
                let gw_json = &p.gateway.context.gateway;
                claims.extend(p.gateway.children.iter().map(|c| Claim {
                    key: c.key.clone(),
                    object: Value::clone(&c.object),
                    rank: rank(gw_json, gw_json),
                }));
                warnings.extend(p.gateway.warnings.iter().cloned());
                for rp in &p.routes {
                    if let Some(route) = snap.route(&rp.route) {
                        claims.extend(rp.children.iter().map(|c| Claim {
                            key: c.key.clone(),
                            object: Value::clone(&c.object),
                            rank: rank(&route.json(), gw_json),
                        }));
                    }
                    warnings.extend(rp.warnings.iter().cloned());
                }
                let status = p.status.gateway.to_status(
                    entry.typed.status.as_ref(),
                    p.gateway.generation,
                    now,
                );
                statuses.push(status_doc(
                    "Gateway",
                    Some(&key.namespace),
                    &key.name,
                    json!(status),
                ));
                for set in &p.status.gateway.listener_sets {
                    let current = snap
                        .listener_set(&Key::new(set.namespace.clone(), set.name.clone()))
                        .map(|e| e.json["status"].clone())
                        .unwrap_or(Value::Null);
                    statuses.push(status_doc(
                        crate::gateway::listenersets::KIND,
                        Some(&set.namespace),
                        &set.name,
                        set.to_status(&current, now),
                    ));
                }
                for r in p.status.routes {
                    written.entry(r.route).or_default().push((key, r.entries));
                }
            }
            Err(OutOfScope::NoClass(c)) => out.stderr.push(format!(
                "warning: Gateway {key}: GatewayClass {c} not found; skipped"
            )),
            Err(OutOfScope::NotOurs | OutOfScope::NoGateway) => {}
        }
    }
    for (rkey, _, _, parents) in merged_route_parents(snap, written, now) {
        statuses.push(status_doc(
            &rkey.kind,
            Some(&rkey.namespace),
            &rkey.name,
            json!({ "parents": parents }),
        ));
    }
    statuses.extend(policy_statuses(snap, now));
    docs.extend(statuses);
    print(&mut out, &docs, warnings);
    (out, claims)
}

/// Reports blueprints' errors and classes not accepted in `out`; the status of every
/// GatewayClass of ours.
fn class_statuses(snap: &crate::snapshot::Snapshot, now: &Time, out: &mut Output) -> Vec<Value> {
    let mut statuses = Vec::new();
    for bp in snap.blueprints() {
        let errors = crate::plan::class::blueprint_errors(snap, bp);
        for e in &errors {
            out.stderr.push(format!("error: {e}"));
        }
        if !errors.is_empty() {
            out.code = EXIT_TEMPLATE;
        }
    }
    for class in snap.classes() {
        let name = class.metadata.name.clone().unwrap_or_default();
        if let Some(cp) = plan_class(snap, &name) {
            if !cp.accepted.status.is_true() {
                out.stderr.push(format!(
                    "error: GatewayClass {name}: {}",
                    cp.accepted.message
                ));
                out.code = EXIT_TEMPLATE;
            }
            let existing = class
                .status
                .as_ref()
                .and_then(|s| s.conditions.clone())
                .unwrap_or_default();
            let status = GatewayClassStatus {
                conditions: Some(merge_conditions(
                    &existing,
                    std::slice::from_ref(&cp.accepted),
                    &[crate::gateway::conditions::types::ACCEPTED],
                    class.metadata.generation,
                    now,
                )),
                supported_features: Some(
                    cp.supported_features
                        .iter()
                        .map(|n| GatewayClassStatusSupportedFeatures { name: n.clone() })
                        .collect(),
                ),
            };
            statuses.push(status_doc("GatewayClass", None, &name, json!(status)));
        }
    }
    statuses
}

/// The status of each of our policies: where it applies, and why not elsewhere.
fn policy_statuses(snap: &crate::snapshot::Snapshot, now: &Time) -> Vec<Value> {
    let mut statuses = Vec::new();
    let policy_doc = |kind: &str,
                      key: &Key,
                      existing: Option<&crate::api::PolicyStatus>,
                      ours: &[crate::plan::policy::Ancestor],
                      generation: Option<i64>| {
        let st = crate::plan::policy::next_policy_status(
            &existing.cloned().unwrap_or_default(),
            ours,
            generation,
            now,
        );
        let mut d = status_doc(kind, Some(&key.namespace), &key.name, json!(st));
        d["apiVersion"] = json!(crate::api::API_VERSION);
        d
    };
    for (key, c) in snap.all_class_configs() {
        if let Some(ours) = crate::plan::policy::class_config_status(snap, key) {
            let d = policy_doc(
                "GatewayClassConfig",
                key,
                c.status.as_ref(),
                &ours,
                c.metadata.generation,
            );
            statuses.push(d);
        }
    }
    for (key, c) in snap.all_gateway_configs() {
        if let Some(ours) = crate::plan::policy::gateway_config_status(snap, key) {
            let d = policy_doc(
                "GatewayConfig",
                key,
                c.status.as_ref(),
                &ours,
                c.metadata.generation,
            );
            statuses.push(d);
        }
    }
    statuses
}

/// Prints the objects, then the statuses, as YAML documents, after the warnings (each once).
fn print(out: &mut Output, objects: &[Value], mut warnings: Vec<String>) {
    warnings.sort();
    warnings.dedup();
    out.stderr
        .extend(warnings.into_iter().map(|w| format!("warning: {w}")));
    for d in objects {
        match serde_saphyr::to_string(d) {
            Ok(y) => {
                let _ = write!(out.stdout, "---\n{y}");
            }
            Err(e) => out
                .stderr
                .push(format!("error: failed to print an object: {e}")),
        }
    }
}

/// The stderr lines of one Gateway's plan: template errors (exit code 3), templates
/// waiting on a dependency, replacements under way, children that would be deleted.
fn report(out: &mut Output, key: &Key, p: &Plan) {
    let gw = format!("Gateway {key}");
    for e in &p.gateway.errors {
        out.stderr.push(format!("error: {gw}: {e}"));
        out.code = EXIT_TEMPLATE;
    }
    for h in &p.gateway.held {
        out.stderr.push(format!(
            "waiting: {gw}: template {} is {}",
            h.template, h.reason
        ));
    }
    for r in &p.routes {
        let crate::snapshot::RouteKeyParts {
            kind,
            namespace: ns,
            name,
        } = &*r.route;
        for e in &r.errors {
            out.stderr
                .push(format!("error: {kind} {ns}/{name} ({gw}): {e}"));
            out.code = EXIT_TEMPLATE;
        }
        for h in &r.held {
            out.stderr.push(format!(
                "waiting: {kind} {ns}/{name}: template {} is {}",
                h.template, h.reason
            ));
        }
    }
    for r in &p.gateway.rollouts {
        out.stderr.push(format!(
            "rollout: {gw}: template {}: {} -> {} ({:?}): {}",
            r.label(),
            r.from.as_deref().unwrap_or("-"),
            r.to,
            r.phase,
            r.waiting_for
        ));
    }
    for (k, patch) in &p.gateway.releases {
        out.stderr
            .push(format!("adopt: {gw}: would release {k} with {patch}"));
    }
    for k in p
        .gateway
        .prune
        .iter()
        .chain(&p.gateway.orphaned_route_children)
    {
        out.stderr.push(format!("prune: {gw}: would delete {k}"));
    }
}

fn status_doc(kind: &str, namespace: Option<&str>, name: &str, status: Value) -> Value {
    let mut meta = json!({ "name": name });
    if let Some(ns) = namespace {
        meta["namespace"] = json!(ns);
    }
    json!({ "apiVersion": "gateway.networking.k8s.io/v1", "kind": kind, "metadata": meta, "status": status })
}

/// Checks the blueprints in `paths` alone: syntax, unknown variables, reads of missing
/// templates, dependency cycles, cluster-scoped kinds.
#[must_use]
pub fn check(paths: &[PathBuf]) -> Output {
    let mut out = Output::default();
    let loaded = match files::load(paths, "gatewright-system") {
        Ok(l) => l,
        Err(e) => {
            out.stderr.push(format!("error: {e}"));
            out.code = EXIT_INPUT;
            return out;
        }
    };
    if loaded.blueprint_names.is_empty() {
        out.stderr
            .push("error: no GatewayClassBlueprint found in the input".into());
        out.code = EXIT_INPUT;
        return out;
    }
    let snap = &loaded.snapshot;
    for bp in snap.blueprints() {
        let name = bp.object.metadata.name.clone().unwrap_or_default();
        let mut errors: Vec<String> = crate::plan::class::blueprint_errors(snap, bp)
            .iter()
            .map(ToString::to_string)
            .collect();
        for (template, line, gk) in crate::render::prepared::literal_kinds_of(&bp.object.spec) {
            if matches!(
                crate::render::output::scope_problem(
                    &gk,
                    &bp.object.spec.cluster_scoped_kinds,
                    snap.scopes()
                ),
                Ok(true)
            ) {
                out.stderr.push(format!(
                    "warning: blueprint {name}: template {template}: line {line}: the scope of kind {} ({}) is unknown; give its CustomResourceDefinition with -f to check it",
                    gk.kind,
                    if gk.group.is_empty() { "core" } else { &gk.group }
                ));
            }
        }
        for gk in &bp.object.spec.cluster_scoped_kinds {
            if gk.kind.is_empty() || !gk.kind.starts_with(|c: char| c.is_ascii_uppercase()) {
                errors.push(format!(
                    "blueprint {name}: clusterScopedKinds: {:?} is not a Kind",
                    gk.kind
                ));
            }
        }
        // What it would render on a shared Gateway of its own making (crate::probe):
        // only when nothing else is wrong with it.
        if errors.is_empty()
            && let Ok(again) = files::load(paths, "gatewright-system")
        {
            errors.extend(
                crate::probe::tenancy(again.snapshot, &name)
                    .unwrap_or_default()
                    .into_iter()
                    .map(|e| format!("{e} (tenancy probe: a Gateway whose listener `admin` admits its own namespace and `apps` every namespace, a tenant's routes on it)")),
            );
        }
        if errors.is_empty() {
            let _ = writeln!(out.stdout, "ok: GatewayClassBlueprint {name}");
        } else {
            out.code = EXIT_TEMPLATE;
            out.stderr
                .extend(errors.into_iter().map(|e| format!("error: {e}")));
        }
    }
    out
}

/// The drawing formats of `gatewright graph`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GraphFormat {
    /// A Mermaid flowchart (GitHub and most Markdown viewers draw it).
    Mermaid,
    /// Graphviz DOT.
    Dot,
}

/// Draws every blueprint in `paths` ([`crate::render::diagram`]): its templates with the
/// kinds they name, what each reads, rollout policies, creation and teardown order. One
/// drawing per blueprint, by name; with several, each Mermaid drawing is headed by a
/// `%% blueprint NAME` comment and separated by a blank line.
#[must_use]
pub fn graph(paths: &[PathBuf], format: GraphFormat) -> Output {
    let mut out = Output::default();
    let loaded = match files::load(paths, "gatewright-system") {
        Ok(l) => l,
        Err(e) => {
            out.stderr.push(format!("error: {e}"));
            out.code = EXIT_INPUT;
            return out;
        }
    };
    let mut blueprints: Vec<_> = loaded.snapshot.blueprints().collect();
    if blueprints.is_empty() {
        out.stderr
            .push("error: no GatewayClassBlueprint found in the input".into());
        out.code = EXIT_INPUT;
        return out;
    }
    blueprints.sort_by(|a, b| a.object.metadata.name.cmp(&b.object.metadata.name));
    let several = blueprints.len() > 1;
    for bp in blueprints {
        let name = bp.object.metadata.name.clone().unwrap_or_default();
        match &bp.prepared {
            Ok(p) => {
                let d = crate::render::diagram::Diagram::of(p);
                if !out.stdout.is_empty() {
                    out.stdout.push('\n');
                }
                match format {
                    GraphFormat::Mermaid => {
                        if several {
                            let _ = writeln!(out.stdout, "%% blueprint {name}");
                        }
                        out.stdout.push_str(&d.mermaid());
                    }
                    GraphFormat::Dot => out.stdout.push_str(&d.dot()),
                }
            }
            Err(errors) => {
                out.code = EXIT_TEMPLATE;
                out.stderr
                    .extend(errors.iter().map(|e| format!("error: {e}")));
            }
        }
    }
    out
}
