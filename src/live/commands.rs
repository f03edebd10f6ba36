//! The three commands, as the binary calls them: read the cluster once ([`super::list`]),
//! plan with the controller's planner, print. Each returns what to print and the exit
//! code ([`Output`]); nothing is written to the cluster.

use std::path::PathBuf;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams};
use serde_json::Value;

use super::diff::{Change, compare, content, overlay};
use super::fleet::FleetRead;
use super::report::{self, GatewayReport, Paint};
use crate::cli::{EXIT_INPUT, EXIT_OK, EXIT_TEMPLATE, Output};
use crate::plan::Plan;
use crate::snapshot::{Key, RouteKey, Snapshot};

/// Exit code of `diff`: applying the files would change something.
pub const EXIT_CHANGES: i32 = 1;

/// How reports are printed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// For people: a table (`status`) or a tree (`trace`).
    Text {
        /// ANSI colours (on a terminal).
        colour: bool,
    },
    /// JSON.
    Json,
    /// YAML.
    Yaml,
}

fn failed(code: i32, e: impl std::fmt::Display) -> Output {
    Output {
        stderr: vec![format!("error: {e}")],
        code,
        ..Output::default()
    }
}

/// Lists the cluster and builds its snapshot; notes go to `out`'s stderr.
async fn read(
    client: &Client,
    controller_namespace: &str,
    out: &mut Output,
) -> Result<(super::Listed, Snapshot), Output> {
    let listed = super::list(client, controller_namespace)
        .await
        .map_err(|e| failed(EXIT_INPUT, format!("{e:#}")))?;
    let snap = listed
        .snapshot(controller_namespace)
        .map_err(|e| failed(EXIT_INPUT, e))?;
    out.stderr
        .extend(listed.notes.iter().map(|n| format!("note: {n}")));
    Ok((listed, snap))
}

/// The reports of `keys`, planned on `snap`; with `--fleet`, after the hub's members and
/// the children `keys` place were read in their members (see [`super::fleet`]: notes to
/// `out`, a child that could not be read `Unknown`).
async fn reports(
    client: &Client,
    fleet: Option<&FleetRead>,
    snap: &mut Snapshot,
    keys: &[Key],
    out: &mut Output,
) -> Result<Vec<GatewayReport>, Output> {
    let unread = match fleet {
        Some(fleet) => {
            let found = super::fleet::read(client, fleet, snap, keys)
                .await
                .map_err(|e| failed(EXIT_INPUT, format!("{e:#}")))?;
            out.stderr
                .extend(found.notes.iter().map(|n| format!("note: {n}")));
            found.unread
        }
        None => std::collections::BTreeMap::new(),
    };
    Ok(plans(snap, keys)
        .iter()
        .map(|(k, p)| {
            let mut r = report::gateway_report(snap, k, p);
            r.mark_unread(&unread);
            r
        })
        .collect())
}

fn plans(snap: &Snapshot, keys: &[Key]) -> Vec<(Key, Plan)> {
    keys.iter()
        .filter_map(|k| crate::plan::plan(snap, k).ok().map(|p| (k.clone(), p)))
        .collect()
}

fn now_seconds() -> i64 {
    k8s_openapi::jiff::Timestamp::now().as_second()
}

fn serialize(out: &mut Output, value: &impl serde::Serialize, format: Format) {
    let text = match format {
        Format::Json => serde_json::to_string_pretty(value)
            .map(|s| s + "\n")
            .map_err(|e| e.to_string()),
        _ => serde_saphyr::to_string(value).map_err(|e| e.to_string()),
    };
    match text {
        Ok(t) => out.stdout.push_str(&t),
        Err(e) => {
            out.stderr.push(format!("error: failed to print: {e}"));
            out.code = EXIT_INPUT;
        }
    }
}

/// `gatewright status`: one line per Gateway of ours — in `namespace` (all when `None`),
/// or only `gateway`.
pub async fn status(
    client: &Client,
    controller_namespace: &str,
    fleet: Option<&FleetRead>,
    namespace: Option<&str>,
    gateway: Option<&Key>,
    format: Format,
) -> Output {
    let mut out = Output::default();
    let mut snap = match read(client, controller_namespace, &mut out).await {
        Ok((_, s)) => s,
        Err(e) => return e,
    };
    let keys: Vec<Key> = match gateway {
        Some(k) => {
            if crate::plan::gateway::in_scope(&snap, k).is_err() {
                return failed(EXIT_INPUT, format!("no Gateway {k} of a class of ours"));
            }
            vec![k.clone()]
        }
        None => report::our_gateways(&snap, namespace),
    };
    let reports = match reports(client, fleet, &mut snap, &keys, &mut out).await {
        Ok(r) => r,
        Err(e) => return e,
    };
    match format {
        Format::Text { .. } => {
            if reports.is_empty() {
                out.stderr.push(format!(
                    "no Gateways of a class of ours{}",
                    namespace.map_or(String::new(), |n| format!(" in namespace {n}"))
                ));
                return out;
            }
            let now = now_seconds();
            let mut rows = vec![report::STATUS_HEADER.map(str::to_owned)];
            rows.extend(reports.iter().map(|r| report::status_row(r, now)));
            out.stdout = report::table(&rows);
        }
        _ => {
            let rows: Vec<Value> = reports
                .iter()
                .map(|r| {
                    let [namespace, name, class, programmed, children, routes, _, why] =
                        report::status_row(r, 0);
                    serde_json::json!({
                        "namespace": namespace, "name": name, "class": class,
                        "programmed": programmed, "children": children, "routes": routes,
                        "lastTransitionTime": r.last_transition(), "why": why,
                    })
                })
                .collect();
            serialize(&mut out, &rows, format);
        }
    }
    out
}

/// What `trace` follows.
#[derive(Clone, Debug)]
pub enum Traced {
    /// A Gateway.
    Gateway(Key),
    /// A route: traced under each Gateway of ours it names.
    Route(RouteKey),
}

/// `gatewright trace`: the tree of what a Gateway (or a route's parent Gateways) made.
pub async fn trace(
    client: &Client,
    controller_namespace: &str,
    fleet: Option<&FleetRead>,
    what: &Traced,
    format: Format,
) -> Output {
    let mut out = Output::default();
    let mut snap = match read(client, controller_namespace, &mut out).await {
        Ok((_, s)) => s,
        Err(e) => return e,
    };
    let (keys, route) = match what {
        Traced::Gateway(k) => {
            if snap.gateway(k).is_none() {
                return failed(EXIT_INPUT, format!("Gateway {k} not found"));
            }
            if let Err(why) = crate::plan::gateway::in_scope(&snap, k) {
                return failed(EXIT_INPUT, format!("Gateway {k} is not ours: {why:?}"));
            }
            (vec![k.clone()], None)
        }
        Traced::Route(r) => {
            if snap.route(r).is_none() {
                return failed(
                    EXIT_INPUT,
                    format!("{} {}/{} not found", r.kind, r.namespace, r.name),
                );
            }
            let parents = report::parents_of_route(&snap, r);
            if parents.is_empty() {
                return failed(
                    EXIT_INPUT,
                    format!(
                        "{} {}/{} names no Gateway of a class of ours",
                        r.kind, r.namespace, r.name
                    ),
                );
            }
            (parents, Some(r))
        }
    };
    let mut reports = match reports(client, fleet, &mut snap, &keys, &mut out).await {
        Ok(r) => r,
        Err(e) => return e,
    };
    if let Some(r) = route {
        for rep in &mut reports {
            rep.routes
                .retain(|x| x.kind == r.kind && x.namespace == r.namespace && x.name == r.name);
        }
    }
    match format {
        Format::Text { colour } => {
            for r in &reports {
                out.stdout.push_str(&report::tree(r, Paint { colour }));
            }
        }
        _ if reports.len() == 1 => serialize(&mut out, &reports[0], format),
        _ => serialize(&mut out, &reports, format),
    }
    let errors = reports.iter().any(|r| {
        !r.rendered.errors.is_empty() || r.routes.iter().any(|x| !x.rendered.errors.is_empty())
    });
    if errors {
        out.code = EXIT_TEMPLATE;
    }
    out
}

/// Where the API server serves the kind of `key`.
async fn resource_of(
    client: &Client,
    listed: &super::Listed,
    key: &crate::snapshot::ObjectKey,
) -> Result<ApiResource, String> {
    if let Some(r) = listed
        .child_kinds
        .get(&(key.api_version.clone(), key.kind.clone()))
    {
        return Ok(r.clone());
    }
    crate::discovery::lookup_kind(client, &key.api_version, &key.kind)
        .await
        .map(|(r, _)| r)
        .map_err(|e| format!("kind {} ({}) is not served: {e}", key.kind, key.api_version))
}

/// The object as the API server would store it after our apply (server-side apply, dry
/// run, our field manager, as the controller applies).
async fn dry_run(
    client: Option<&Client>,
    listed: &super::Listed,
    key: &crate::snapshot::ObjectKey,
    object: &Value,
) -> Result<Value, String> {
    let Some(client) = client else {
        return Err(format!("{key}: its member cluster is not served"));
    };
    // A member's kinds are found by its own discovery; the hub's were listed.
    let resource = if key.cluster.is_empty() {
        resource_of(client, listed, key).await?
    } else {
        super::fleet::discover(client, key).await?.0
    };
    let api: Api<DynamicObject> = if key.namespace.is_empty() {
        Api::all_with(client.clone(), &resource)
    } else {
        Api::namespaced_with(client.clone(), &key.namespace, &resource)
    };
    let pp = PatchParams::apply(crate::identity::FIELD_MANAGER)
        .force()
        .dry_run();
    let applied = api
        .patch(&key.name, &pp, &Patch::Apply(object))
        .await
        .map_err(|e| format!("the API server refuses {key}: {e}"))?;
    serde_json::to_value(&applied).map_err(|e| e.to_string())
}

/// `object` as the API server would store it: a dry-run replace of the live object of the
/// same identity in `live` (with its resourceVersion), else a dry-run create. Objects of
/// kinds the planner does not read, and our children, are returned as they are. `kinds`
/// keeps the kinds found, for the next objects.
async fn server_form(
    kinds: &crate::discovery::Cached,
    live: &[Value],
    object: &Value,
) -> Result<Value, kube::Error> {
    use kube::api::PostParams;
    if !matches!(
        crate::snapshot::ingest::kind_of(object),
        Some(k) if k != crate::snapshot::ingest::Kind::Child
    ) {
        return Ok(object.clone());
    }
    let client = kinds.client();
    let (resource, scope) = kinds
        .lookup_kind(
            object["apiVersion"].as_str().unwrap_or_default(),
            object["kind"].as_str().unwrap_or_default(),
        )
        .await?;
    let ns = object["metadata"]["namespace"].as_str().unwrap_or_default();
    let api: Api<DynamicObject> = if scope == kube::discovery::Scope::Namespaced {
        Api::namespaced_with(client.clone(), ns, &resource)
    } else {
        Api::all_with(client.clone(), &resource)
    };
    let mut obj: DynamicObject =
        serde_json::from_value(object.clone()).map_err(kube::Error::SerdeError)?;
    let pp = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    let same = |v: &Value| super::diff::same_object(v, object);
    let stored = match live.iter().find(|v| same(v)) {
        Some(l) => {
            obj.metadata.resource_version =
                l["metadata"]["resourceVersion"].as_str().map(str::to_owned);
            let name = obj.metadata.name.clone().unwrap_or_default();
            api.replace(&name, &pp, &obj).await?
        }
        None => match api.create(&pp, &obj).await {
            // A kind the live list does not hold (a ClusterProfile of the fleet's
            // inventory) that is there: a dry-run replace of it.
            Err(kube::Error::Api(s)) if s.code == 409 => {
                let name = obj.metadata.name.clone().unwrap_or_default();
                let live = api.get(&name).await?;
                obj.metadata.resource_version = live.metadata.resource_version;
                api.replace(&name, &pp, &obj).await?
            }
            other => other?,
        },
    };
    let mut v = serde_json::to_value(&stored).map_err(kube::Error::SerdeError)?;
    v["apiVersion"] = object["apiVersion"].clone();
    v["kind"] = object["kind"].clone();
    Ok(v)
}

/// `gatewright diff -f PATHS`: what applying the files would change. Exit 0 nothing, 1
/// something, 2 input unreadable (or the cluster), 3 a template failed.
pub async fn diff(
    client: &Client,
    controller_namespace: &str,
    fleet: Option<&FleetRead>,
    paths: &[PathBuf],
) -> Output {
    let files = match crate::snapshot::files::documents(paths) {
        Ok(d) => d,
        Err(e) => return failed(EXIT_INPUT, e),
    };
    let mut out = Output::default();
    let (listed, _) = match read(client, controller_namespace, &mut out).await {
        Ok(r) => r,
        Err(e) => return e,
    };
    let objects = server_forms(client, &listed, files, &mut out).await;
    let mut snap = match listed.snapshot(controller_namespace) {
        Ok(s) => s,
        Err(e) => return failed(EXIT_INPUT, e),
    };
    // Only the Gateways the files affect: what else the cluster is doing meanwhile (a
    // Gateway converging elsewhere) is not this change.
    let blueprints: Vec<String> = objects
        .iter()
        .filter(|o| o["kind"] == crate::api::BLUEPRINT_KIND)
        .filter_map(|o| o["metadata"]["name"].as_str().map(str::to_owned))
        .collect();
    let touched = match super::diff::lay(&mut snap, overlay(&listed.objects, objects)) {
        Ok(t) => t,
        Err(e) => return failed(EXIT_INPUT, e),
    };
    // A changed blueprint with a rolloutPolicy: what each Gateway renders once the rollout
    // reaches it, and which wave that is.
    let waves = super::rollout::as_rolled_out(&mut snap, &blueprints);
    let keys: Vec<Key> = touched
        .into_iter()
        .filter(|k| crate::plan::gateway::in_scope(&snap, k).is_ok())
        .collect();
    // With --fleet: the members, and what the Gateways place, read in their members; each
    // placed child is then dry-run in its member.
    let members = match fleet {
        Some(f) => match super::fleet::read(client, f, &mut snap, &keys).await {
            Ok(found) => {
                out.stderr
                    .extend(found.notes.iter().map(|n| format!("note: {n}")));
                out.stderr.extend(
                    found
                        .unread
                        .iter()
                        .map(|(k, why)| format!("warning: {k}: {why}; compared as missing")),
                );
                found.clients
            }
            Err(e) => return failed(EXIT_INPUT, format!("{e:#}")),
        },
        None => std::collections::BTreeMap::new(),
    };
    let planned = plans(&snap, &keys);
    for (k, p) in &planned {
        for e in p.errors() {
            out.stderr.push(format!("error: Gateway {k}: {e}"));
            out.code = EXIT_TEMPLATE;
        }
    }
    let now = Time(k8s_openapi::jiff::Timestamp::now());
    let changes = dry_run_changes(
        compare(&snap, &planned, &now),
        client,
        &members,
        &listed,
        &mut out,
    )
    .await;
    out.stdout = waves + &super::diff::print(&changes);
    if out.code == EXIT_OK && !changes.is_empty() {
        out.code = EXIT_CHANGES;
    }
    out
}

/// Each object of the files as the API server would store it (defaults filled in,
/// validated, generation bumped when the spec changes): a dry-run replace of the live
/// object, or a dry-run create. An object it refuses is compared as written (said in
/// `out`).
async fn server_forms(
    client: &Client,
    listed: &super::Listed,
    files: Vec<crate::snapshot::files::Document>,
    out: &mut Output,
) -> Vec<Value> {
    let mut objects = Vec::with_capacity(files.len());
    let kinds = crate::discovery::Cached::new(client.clone());
    for d in files {
        let what = format!(
            "{} {}",
            d.object["kind"].as_str().unwrap_or_default(),
            d.object["metadata"]["name"].as_str().unwrap_or_default()
        );
        match server_form(&kinds, &listed.objects, &d.object).await {
            Ok(v) => objects.push(v),
            Err(e) => {
                let at = format!("{} (document {})", d.path.display(), d.index);
                match e {
                    kube::Error::Api(s) if s.code == 404 => out.stderr.push(format!(
                        "warning: {at}: {what}: {}; compared as written",
                        s.message
                    )),
                    e => {
                        out.stderr
                            .push(format!("error: {at}: the API server refuses {what}: {e}"));
                        out.code = EXIT_INPUT;
                    }
                }
                objects.push(d.object);
            }
        }
    }
    objects
}

/// Each planned change as the API server would make it: a dry run on the API server the
/// child lives on (the hub's, `client`, or its member's). An update whose final form
/// holds nothing new is no change; a change the server refuses is kept as planned (said
/// in `out`).
async fn dry_run_changes(
    planned_changes: Vec<Change>,
    client: &Client,
    members: &std::collections::BTreeMap<String, Client>,
    listed: &super::Listed,
    out: &mut Output,
) -> Vec<Change> {
    // The API server a child lives on: the hub's, or its member's.
    let on = |key: &crate::snapshot::ObjectKey| {
        if key.cluster.is_empty() {
            Some(client)
        } else {
            members.get(&key.cluster)
        }
    };
    let mut changes = Vec::new();
    for c in planned_changes {
        match c {
            Change::Update {
                gateway,
                template,
                key,
                live,
                planned,
            } => match dry_run(on(&key), listed, &key, &planned).await {
                // The server's final form holds nothing new: no change.
                Ok(after) if content(&after) == content(&live) => {}
                Ok(after) => changes.push(Change::Update {
                    gateway,
                    template,
                    key,
                    live,
                    planned: after,
                }),
                Err(e) => {
                    out.stderr.push(format!("error: Gateway {gateway}: {e}"));
                    changes.push(Change::Update {
                        gateway,
                        template,
                        key,
                        live,
                        planned,
                    });
                }
            },
            Change::Create {
                gateway,
                key,
                planned,
                template,
            } => {
                if let Err(e) = dry_run(on(&key), listed, &key, &planned).await {
                    out.stderr.push(format!("error: Gateway {gateway}: {e}"));
                }
                changes.push(Change::Create {
                    gateway,
                    key,
                    planned,
                    template,
                });
            }
            other => changes.push(other),
        }
    }
    changes
}
