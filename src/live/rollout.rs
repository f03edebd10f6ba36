//! `gatewright rollout status|history|pause|resume|undo BLUEPRINT`: a blueprint's rollout,
//! as `kubectl rollout` shows a Deployment's. `status` and `history` read; `pause` and
//! `resume` set `spec.rolloutPolicy.paused`; `undo` puts a revision's template back into
//! the blueprint's spec (a new change, rolled out by the policy like any other: under
//! GitOps, change the blueprint in Git instead, or the next sync puts it back).

use kube::Client;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};

use crate::api::{
    GatewayClassBlueprint, GatewayClassBlueprintRevision, GatewayClassBlueprintSpec, RolloutPhase,
    TemplateEntry,
};
use crate::cli::{EXIT_INPUT, EXIT_OK, Output};

/// Exit code of `rollout status` while the rollout is under way (or paused).
pub const EXIT_UNDER_WAY: i32 = 1;
/// Exit code of `rollout status` for a halted or rolled-back rollout.
pub const EXIT_HALTED: i32 = 4;

/// What `rollout` does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// Where the rollout stands.
    Status,
    /// The revisions and what each changed.
    History,
    /// Stop moving Gateways.
    Pause,
    /// Go on.
    Resume,
    /// Back to a revision (the one the rollout started from, else the one before).
    Undo,
}

fn failed(code: i32, e: impl std::fmt::Display) -> Output {
    Output {
        stderr: vec![format!("error: {e}")],
        code,
        ..Output::default()
    }
}

async fn revisions(
    client: &Client,
    name: &str,
) -> Result<Vec<GatewayClassBlueprintRevision>, kube::Error> {
    let api: Api<GatewayClassBlueprintRevision> = Api::all(client.clone());
    let mut v: Vec<_> = api
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .filter(|r| r.spec.blueprint == name)
        .collect();
    v.sort_by_key(|r| r.spec.revision);
    Ok(v)
}

/// Runs `action` on blueprint `name`; `to`: the revision number `undo` goes back to.
pub async fn rollout(
    client: &Client,
    action: Action,
    name: &str,
    to: Option<i64>,
    json: bool,
) -> Output {
    let api: Api<GatewayClassBlueprint> = Api::all(client.clone());
    let bp = match api.get_opt(name).await {
        Ok(Some(b)) => b,
        Ok(None) => {
            return failed(
                EXIT_INPUT,
                format!("GatewayClassBlueprint {name} not found"),
            );
        }
        Err(e) => {
            return failed(
                EXIT_INPUT,
                format!("failed to read GatewayClassBlueprint {name}: {e}"),
            );
        }
    };
    match action {
        Action::Status => status(&bp, json),
        Action::History => match revisions(client, name).await {
            Ok(revs) => history(&bp, &revs, json),
            Err(e) => failed(
                EXIT_INPUT,
                format!("failed to list the revisions of {name}: {e}"),
            ),
        },
        Action::Pause | Action::Resume => {
            pause_or_resume(&api, &bp, name, action == Action::Pause).await
        }
        Action::Undo => undo(client, &api, &bp, name, to).await,
    }
}

/// `rollout pause|resume`: sets `spec.rolloutPolicy.paused` (a blueprint without a
/// rolloutPolicy has nothing to pause).
async fn pause_or_resume(
    api: &Api<GatewayClassBlueprint>,
    bp: &GatewayClassBlueprint,
    name: &str,
    paused: bool,
) -> Output {
    if bp.spec.rollout_policy.is_none() {
        return failed(
            EXIT_INPUT,
            format!(
                "GatewayClassBlueprint {name} has no rolloutPolicy: every change reaches every Gateway at once, there is nothing to {}",
                if paused { "pause" } else { "resume" }
            ),
        );
    }
    let patch = serde_json::json!({"spec": {"rolloutPolicy": {"paused": paused}}});
    match api
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
    {
        Ok(_) => Output {
            stdout: format!(
                "gatewayclassblueprint/{name} {}\n",
                if paused { "paused" } else { "resumed" }
            ),
            ..Output::default()
        },
        Err(e) => failed(
            EXIT_INPUT,
            format!("failed to patch GatewayClassBlueprint {name}: {e}"),
        ),
    }
}

/// `rollout undo`: the blueprint's spec back to revision `to`, else to the one the rollout
/// started from, else to the one before the newest; its rolloutPolicy kept.
async fn undo(
    client: &Client,
    api: &Api<GatewayClassBlueprint>,
    bp: &GatewayClassBlueprint,
    name: &str,
    to: Option<i64>,
) -> Output {
    let revs = match revisions(client, name).await {
        Ok(r) => r,
        Err(e) => {
            return failed(
                EXIT_INPUT,
                format!("failed to list the revisions of {name}: {e}"),
            );
        }
    };
    let current = bp.status.as_ref().and_then(|s| s.current_revision.clone());
    let target = match to {
        Some(n) => revs.iter().find(|r| r.spec.revision == n),
        None => {
            let from = bp
                .status
                .as_ref()
                .and_then(|s| s.rollout.as_ref())
                .filter(|r| Some(&r.revision) == current.as_ref())
                .and_then(|r| r.from.clone());
            match from {
                Some(f) => revs
                    .iter()
                    .find(|r| r.metadata.name.as_deref() == Some(f.as_str())),
                None => revs.iter().rev().find(|r| r.metadata.name != current),
            }
        }
    };
    let Some(target) = target else {
        return failed(
            EXIT_INPUT,
            match to {
                Some(n) => format!("GatewayClassBlueprint {name} has no revision {n}"),
                None => {
                    format!("GatewayClassBlueprint {name} has no earlier revision to go back to")
                }
            },
        );
    };
    let target_name = target.metadata.name.clone().unwrap_or_default();
    if current.as_deref() == Some(target_name.as_str()) {
        return Output {
            stdout: format!("gatewayclassblueprint/{name} already at {target_name}\n"),
            ..Output::default()
        };
    }
    let mut next = bp.clone();
    let policy = next.spec.rollout_policy.take();
    next.spec = target.spec.template.clone();
    next.spec.rollout_policy = policy;
    next.status = None;
    next.metadata.managed_fields = None;
    match api.replace(name, &PostParams::default(), &next).await {
        Ok(_) => Output {
            stdout: format!("gatewayclassblueprint/{name} rolled back to {target_name}\n"),
            ..Output::default()
        },
        Err(e) => failed(
            EXIT_INPUT,
            format!("failed to update GatewayClassBlueprint {name}: {e}"),
        ),
    }
}

fn status(bp: &GatewayClassBlueprint, json: bool) -> Output {
    let name = bp.metadata.name.as_deref().unwrap_or_default();
    let st = bp.status.clone().unwrap_or_default();
    let code = match st.rollout.as_ref().map(|r| r.phase) {
        None | Some(RolloutPhase::Complete) => EXIT_OK,
        Some(RolloutPhase::Progressing | RolloutPhase::Paused) => EXIT_UNDER_WAY,
        Some(RolloutPhase::Halted | RolloutPhase::RolledBack) => EXIT_HALTED,
    };
    if json {
        let v = serde_json::json!({
            "blueprint": name,
            "currentRevision": st.current_revision,
            "revisions": st.revisions,
            "rollout": st.rollout,
        });
        return Output {
            stdout: serde_json::to_string_pretty(&v).unwrap_or_default() + "\n",
            code,
            ..Output::default()
        };
    }
    let mut s = format!(
        "GatewayClassBlueprint {name}: newest revision {}\n",
        st.current_revision.as_deref().unwrap_or("(none yet)")
    );
    match &st.rollout {
        None if bp.spec.rollout_policy.is_none() => {
            s.push_str("no rolloutPolicy: every change reaches every Gateway at once\n");
        }
        None => s.push_str("no rollout yet\n"),
        Some(r) => {
            s.push_str(&format!(
                "rollout of {} from {}: {:?}{}\n",
                r.revision,
                r.from.as_deref().unwrap_or("-"),
                r.phase,
                r.hold.map(|h| format!(", held: {h:?}")).unwrap_or_default()
            ));
            for w in &r.waves {
                s.push_str(&format!(
                    "  wave {}{}: {}/{} moved{}{}\n",
                    w.name,
                    w.state.map(|st| format!(" ({st:?})")).unwrap_or_default(),
                    w.released,
                    w.gateways.len(),
                    w.started_at
                        .as_ref()
                        .map(|t| format!(", started {}", t.0))
                        .unwrap_or_default(),
                    if w.exempt.is_empty() {
                        String::new()
                    } else {
                        format!(", not waited for: {}", w.exempt.join(", "))
                    }
                ));
            }
            if !r.message.is_empty() {
                s.push_str(&format!(
                    "  {}\n",
                    r.message.lines().next().unwrap_or_default()
                ));
            }
        }
    }
    if !st.revisions.is_empty() {
        s.push_str("Gateways per revision:\n");
        for c in &st.revisions {
            s.push_str(&format!(
                "  {}: {} ({} Programmed)\n",
                c.name, c.gateways, c.ready
            ));
        }
    }
    Output {
        stdout: s,
        code,
        ..Output::default()
    }
}

/// What changed from `a` to `b`, in words: templates added, removed and changed, values,
/// the status template, route kinds, cluster-scoped kinds.
#[must_use]
pub fn changes(a: &GatewayClassBlueprintSpec, b: &GatewayClassBlueprintSpec) -> Vec<String> {
    fn templates(set: &str, a: &[TemplateEntry], b: &[TemplateEntry], out: &mut Vec<String>) {
        for t in b {
            match a.iter().find(|o| o.name == t.name) {
                None => out.push(format!("{set} template {} added", t.name)),
                Some(o) if o != t => {
                    let mut what = Vec::new();
                    if o.template != t.template {
                        what.push("template");
                    }
                    if o.ready_when != t.ready_when {
                        what.push("readyWhen");
                    }
                    if o.rollout != t.rollout {
                        what.push("rollout");
                    }
                    if o.drain != t.drain {
                        what.push("drain");
                    }
                    if o.placement != t.placement {
                        what.push("placement");
                    }
                    if o.kinds != t.kinds {
                        what.push("kinds");
                    }
                    out.push(format!(
                        "{set} template {} changed ({})",
                        t.name,
                        what.join(", ")
                    ));
                }
                Some(_) => {}
            }
        }
        for o in a {
            if !b.iter().any(|t| t.name == o.name) {
                out.push(format!("{set} template {} removed", o.name));
            }
        }
    }
    let mut out = Vec::new();
    templates(
        "gateway",
        &a.gateway_templates,
        &b.gateway_templates,
        &mut out,
    );
    templates("route", &a.route_templates, &b.route_templates, &mut out);
    if a.values != b.values {
        out.push("values changed".into());
    }
    if a.status != b.status {
        out.push("status template changed".into());
    }
    if a.route_kinds != b.route_kinds {
        out.push("routeKinds changed".into());
    }
    if a.cluster_scoped_kinds != b.cluster_scoped_kinds {
        out.push("clusterScopedKinds changed".into());
    }
    out
}

/// A line of `history`: name, number, hash, Gateways running it, what it changed.
type Row = (String, i64, String, Option<u32>, Vec<String>);

fn history(
    bp: &GatewayClassBlueprint,
    revs: &[GatewayClassBlueprintRevision],
    json: bool,
) -> Output {
    let st = bp.status.clone().unwrap_or_default();
    let rows: Vec<Row> = revs
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let name = r.metadata.name.clone().unwrap_or_default();
            let gateways = st
                .revisions
                .iter()
                .find(|c| c.name == name)
                .map(|c| c.gateways);
            let changed = if i == 0 {
                vec!["(the oldest kept)".to_owned()]
            } else {
                changes(&revs[i - 1].spec.template, &r.spec.template)
            };
            (
                name,
                r.spec.revision,
                r.spec.hash.clone(),
                gateways,
                changed,
            )
        })
        .collect();
    if json {
        let v: Vec<serde_json::Value> = rows
            .iter()
            .map(|(name, n, hash, g, changed)| {
                serde_json::json!({"name": name, "revision": n, "hash": hash, "gateways": g.unwrap_or(0),
                    "current": st.current_revision.as_deref() == Some(name.as_str()), "changes": changed})
            })
            .collect();
        return Output {
            stdout: serde_json::to_string_pretty(&v).unwrap_or_default() + "\n",
            ..Output::default()
        };
    }
    let mut s = String::from("REVISION  NAME  HASH  GATEWAYS  CHANGES\n");
    for (name, n, hash, g, changed) in &rows {
        let mark = if st.current_revision.as_deref() == Some(name.as_str()) {
            " (newest)"
        } else {
            ""
        };
        s.push_str(&format!(
            "{n}  {name}{mark}  {hash}  {}  {}\n",
            g.unwrap_or(0),
            if changed.is_empty() {
                "-".to_owned()
            } else {
                changed.join("; ")
            }
        ));
    }
    Output {
        stdout: s,
        ..Output::default()
    }
}

/// For `gatewright diff`: each blueprint of `names` with a `rolloutPolicy` is taken as
/// rolled out (its Gateways render its newest revision, pins aside), so the diff shows what
/// each Gateway renders once its wave reaches it; returns the waves, as text, of those
/// whose newest revision is not what their Gateways run.
pub fn as_rolled_out(snap: &mut crate::snapshot::Snapshot, names: &[String]) -> String {
    let mut text = String::new();
    for name in names {
        let Some(bp) = snap.blueprint(name) else {
            continue;
        };
        let Some(policy) = bp.object.spec.rollout_policy.clone() else {
            continue;
        };
        let newest = crate::plan::revisions::newest(snap, bp).name;
        let members = crate::plan::waves::members(snap, name);
        // As for a cluster no wave's `clusterSelector` selects: a member's labels are the hub's.
        let waves = crate::plan::waves::preview(
            &policy,
            &newest,
            &members,
            &crate::plan::waves::FleetView::default(),
        );
        let mut object = bp.object.clone();
        object.status.get_or_insert_with(Default::default).rollout =
            Some(crate::api::RolloutStatus {
                revision: newest.clone(),
                phase: RolloutPhase::Complete,
                ..Default::default()
            });
        snap.put_blueprint(object);
        if waves.is_empty() {
            continue;
        }
        text.push_str(&format!(
            "GatewayClassBlueprint {name}: revision {newest} reaches its Gateways in waves (rolloutPolicy); what each Gateway below renders is what it will once its wave is released:\n"
        ));
        for (wave, gateways) in waves {
            text.push_str(&format!(
                "  {wave} ({}): {}\n",
                gateways.len(),
                gateways.join(", ")
            ));
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changes_name_templates_added_removed_and_what_changed() {
        let t = |name: &str, src: &str| TemplateEntry {
            name: name.into(),
            template: src.into(),
            ..Default::default()
        };
        let a = GatewayClassBlueprintSpec {
            gateway_templates: vec![t("cert", "a"), t("dns", "b")],
            ..Default::default()
        };
        let mut b = a.clone();
        b.gateway_templates[0].template = "a2".into();
        b.gateway_templates[0].ready_when = Some("true".into());
        b.gateway_templates.remove(1);
        b.route_templates.push(t("route", "c"));
        b.values.default = Some(serde_json::json!({"x": 1}));
        assert_eq!(
            changes(&a, &b),
            vec![
                "gateway template cert changed (template, readyWhen)",
                "gateway template dns removed",
                "route template route added",
                "values changed",
            ]
        );
        assert!(changes(&a, &a).is_empty());
    }
}
