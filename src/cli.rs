//! `gatewright render` and `gatewright check`: the planner over YAML files, printed.
//!
//! In: paths. Out: the YAML stream for stdout, the messages for stderr, and the exit code
//! (0 rendered or only waiting on a dependency; 2 input unreadable; 3 a template failed).

use std::fmt::Write as _;
use std::path::PathBuf;

use gateway_api::apis::standard::gatewayclasses::{
    GatewayClassStatus, GatewayClassStatusSupportedFeatures,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde_json::{Value, json};

use crate::gateway::conditions::merge_conditions;
use crate::plan::gateway::OutOfScope;
use crate::plan::route::merge_route_parents;
use crate::plan::{GatewayPlan, plan_class, plan_gateway, plan_route, route_status};
use crate::snapshot::files;

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
    let mut statuses: Vec<Value> = Vec::new();
    let mut claims: Vec<Claim> = Vec::new();
    let mut warnings: Vec<String> = Vec::new();

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

    let mut plans: Vec<GatewayPlan> = Vec::new();
    for (key, entry) in snap.gateways() {
        match plan_gateway(snap, key) {
            Ok(mut p) => {
                for e in &p.errors {
                    out.stderr
                        .push(format!("error: Gateway {}/{}: {e}", key.0, key.1));
                    out.code = EXIT_TEMPLATE;
                }
                for h in &p.held {
                    out.stderr.push(format!(
                        "waiting: Gateway {}/{}: template {} is {}",
                        key.0, key.1, h.template, h.reason
                    ));
                }
                docs.extend(p.children.iter().map(|c| c.object.clone()));
                claims.extend(p.children.iter().map(|c| Claim {
                    key: c.key.clone(),
                    object: c.object.clone(),
                    rank: rank(&p.context.gateway, &p.context.gateway),
                }));
                warnings.extend(p.warnings.iter().cloned());
                let mut route_plans = Vec::new();
                for rkey in &p.context.routes {
                    let rp = plan_route(snap, &p, rkey);
                    for e in &rp.errors {
                        out.stderr.push(format!(
                            "error: {} {}/{} (Gateway {}/{}): {e}",
                            rkey.0, rkey.1, rkey.2, key.0, key.1
                        ));
                        out.code = EXIT_TEMPLATE;
                    }
                    for h in &rp.held {
                        out.stderr.push(format!(
                            "waiting: {} {}/{}: template {} is {}",
                            rkey.0, rkey.1, rkey.2, h.template, h.reason
                        ));
                    }
                    docs.extend(rp.children.iter().map(|c| c.object.clone()));
                    if let Some(route) = snap.route(rkey) {
                        claims.extend(rp.children.iter().map(|c| Claim {
                            key: c.key.clone(),
                            object: c.object.clone(),
                            rank: rank(&route.json, &p.context.gateway),
                        }));
                    }
                    warnings.extend(rp.warnings.iter().cloned());
                    route_plans.push(rp);
                }
                crate::plan::mark_route_errors(&mut p, &route_plans);
                for r in &p.rollouts {
                    out.stderr.push(format!(
                        "rollout: Gateway {}/{}: template {}: {} -> {} ({:?}): {}",
                        key.0,
                        key.1,
                        r.template,
                        r.from.as_deref().unwrap_or("-"),
                        r.to,
                        r.phase,
                        r.waiting_for
                    ));
                }
                for k in p.prune.iter().chain(&p.orphaned_route_children) {
                    out.stderr.push(format!(
                        "prune: Gateway {}/{}: would delete {k}",
                        key.0, key.1
                    ));
                }
                let status = p
                    .status
                    .to_status(entry.typed.status.as_ref(), p.generation, now);
                statuses.push(status_doc("Gateway", Some(&key.0), &key.1, json!(status)));
                plans.push(p);
            }
            Err(OutOfScope::NoClass(c)) => out.stderr.push(format!(
                "warning: Gateway {}/{}: GatewayClass {c} not found; skipped",
                key.0, key.1
            )),
            Err(OutOfScope::NotOurs | OutOfScope::NoGateway) => {}
        }
    }
    for (rkey, route) in snap.routes() {
        let ours = route_status(rkey, &plans);
        if ours.is_empty() {
            continue;
        }
        let parents = merge_route_parents(None, &ours, Some(route.view.generation), now);
        statuses.push(status_doc(
            &rkey.0,
            Some(&rkey.1),
            &rkey.2,
            json!({ "parents": parents }),
        ));
    }
    warnings.sort();
    warnings.dedup();
    out.stderr
        .extend(warnings.into_iter().map(|w| format!("warning: {w}")));
    for d in docs.iter().chain(&statuses) {
        match serde_saphyr::to_string(d) {
            Ok(y) => {
                let _ = write!(out.stdout, "---\n{y}");
            }
            Err(e) => out
                .stderr
                .push(format!("error: failed to print an object: {e}")),
        }
    }
    (out, claims)
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
        for (template, line, gk) in crate::plan::prepared::literal_kinds_of(&bp.object.spec) {
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
