//! The operator's commands on the live cluster: `gatewright status`, `trace` and `diff`.
//!
//! They plan on a **one-shot live snapshot**: every kind the planner reads is listed once
//! (in pages, with the same trimming as the controller's watches: non-TLS Secrets and
//! Services by their metadata, children by our label) and put into a [`Snapshot`] through
//! the same ingestion as the files of `gatewright render`
//! ([`crate::snapshot::ingest`]). Then the same planner the controller runs says what
//! each Gateway renders, waits for and reports. No controller is started, nothing is
//! written: reads only, plus server-side dry-run applies for `diff`.
//!
//! Shell: [`connect`] and [`list`] talk to the API server; [`report`] (what `status` and
//! `trace` print) and [`diff`]'s comparison are pure over the snapshot and the plans.

pub mod commands;
pub mod diff;
pub mod fleet;
pub mod report;
pub mod rollout;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::Duration;

use anyhow::Context as _;
use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, ListParams};
use kube::discovery::Scope;
use serde_json::Value;

use crate::render::labels;
use crate::snapshot::{Snapshot, ingest};

pub use crate::kinds::KindKey;

/// Connects with the usual kubeconfig: `kubeconfig` (else `KUBECONFIG`, else
/// `~/.kube/config`, else the in-cluster service account) and its `context` (else the
/// current one), as `impersonate` (a user and groups, as kubectl's `--as` and
/// `--as-group`) when given. Returns the client and the context's default namespace.
///
/// # Errors
/// No kubeconfig can be read, or it names no such context.
pub async fn connect(
    kubeconfig: Option<&Path>,
    context: Option<&str>,
    impersonate: Option<(&str, &[String])>,
) -> anyhow::Result<(Client, String)> {
    let opts = kube::config::KubeConfigOptions {
        context: context.map(str::to_owned),
        ..Default::default()
    };
    let mut config = match kubeconfig {
        Some(path) => {
            let kc = kube::config::Kubeconfig::read_from(path)
                .with_context(|| format!("failed to read the kubeconfig {}", path.display()))?;
            kube::Config::from_custom_kubeconfig(kc, &opts)
                .await
                .context("failed to load the kubeconfig")?
        }
        None if context.is_some() => kube::Config::from_kubeconfig(&opts)
            .await
            .context("failed to load the kubeconfig")?,
        None => kube::Config::infer()
            .await
            .context("failed to load a kubeconfig or in-cluster config")?,
    };
    config.connect_timeout = Some(Duration::from_secs(10));
    config.read_timeout = Some(Duration::from_secs(60));
    if let Some((user, groups)) = impersonate {
        config.auth_info.impersonate = Some(user.to_owned());
        if !groups.is_empty() {
            config.auth_info.impersonate_groups = Some(groups.to_vec());
        }
    }
    crate::identity::identify(&mut config, None);
    let namespace = config.default_namespace.clone();
    let client = Client::try_from(config).context("failed to build a client")?;
    Ok((client, namespace))
}

/// What [`list`] read from a cluster.
#[derive(Default)]
pub struct Listed {
    /// Every object the planner reads, as JSON, with apiVersion and kind set.
    pub objects: Vec<Value>,
    /// Kinds that were not listed, and why (a Gateway API kind whose CRD is not
    /// installed, a child kind the API server does not serve).
    pub notes: Vec<String>,
    /// The child kinds listed, with where the API server serves them.
    pub child_kinds: BTreeMap<KindKey, ApiResource>,
}

impl Listed {
    /// A snapshot of the objects, as the planner reads them.
    ///
    /// # Errors
    /// An object that does not decode as its kind.
    pub fn snapshot(&self, controller_namespace: &str) -> Result<Snapshot, String> {
        snapshot_of(self.objects.iter().cloned(), controller_namespace)
    }
}

/// A snapshot of `objects` (see [`ingest::put`]), Services tracked.
///
/// # Errors
/// An object that does not decode as its kind.
pub fn snapshot_of(
    objects: impl IntoIterator<Item = Value>,
    controller_namespace: &str,
) -> Result<Snapshot, String> {
    let mut snap = Snapshot::new(controller_namespace);
    snap.track_services();
    for o in objects {
        ingest::put(&mut snap, o)?;
    }
    Ok(snap)
}

/// Lists every object of one resource, in pages; the items with apiVersion and kind set
/// (lists leave them out). `Ok(None)`: the resource is not served.
async fn list_all(
    client: &Client,
    resource: &ApiResource,
    metadata: bool,
    fields: Option<&str>,
    labels: Option<&str>,
    page_size: u32,
) -> anyhow::Result<Option<Vec<Value>>> {
    let api: Api<DynamicObject> = Api::all_with(client.clone(), resource);
    let mut out = Vec::new();
    let mut token: Option<String> = None;
    loop {
        let mut lp = ListParams::default().limit(page_size);
        if let Some(f) = fields {
            lp = lp.fields(f);
        }
        if let Some(l) = labels {
            lp = lp.labels(l);
        }
        if let Some(t) = &token {
            lp = lp.continue_token(t);
        }
        let page = if metadata {
            api.list_metadata(&lp).await.map(|l| {
                let next = l.metadata.continue_.clone();
                let items: Vec<Value> = l
                    .items
                    .iter()
                    .map(|i| serde_json::json!({ "metadata": i.metadata }))
                    .collect();
                (items, next)
            })
        } else {
            api.list(&lp).await.map(|l| {
                let next = l.metadata.continue_.clone();
                let items: Vec<Value> = l
                    .items
                    .iter()
                    .map(|i| serde_json::to_value(i).unwrap_or(Value::Null))
                    .collect();
                (items, next)
            })
        };
        let (items, next) = match page {
            Ok(p) => p,
            Err(kube::Error::Api(s)) if s.code == 404 && token.is_none() => return Ok(None),
            Err(e) => {
                return Err(e).with_context(|| {
                    format!(
                        "failed to list {} ({})",
                        resource.plural, resource.api_version
                    )
                });
            }
        };
        for mut v in items {
            v["apiVersion"] = Value::String(resource.api_version.clone());
            v["kind"] = Value::String(resource.kind.clone());
            out.push(v);
        }
        match next {
            Some(t) if !t.is_empty() => token = Some(t),
            _ => return Ok(Some(out)),
        }
    }
}

/// How many times the child kinds are looked for again: a plan made with some children
/// known may render templates (and so kinds) it held back without them.
const CHILD_ROUNDS: usize = 4;

/// Whether the API server refused a request as forbidden (RBAC).
fn forbidden(e: &anyhow::Error) -> bool {
    matches!(e.downcast_ref::<kube::Error>(), Some(kube::Error::Api(s)) if s.code == 403)
}

/// Lists, once, every object the planner reads from the cluster of `client`: the primary
/// kinds, then the child kinds the Gateways of our classes use (what their plans render
/// and prune, and what their live children are), by our label.
///
/// # Errors
/// A list the API server refused (other than a kind it does not serve).
pub async fn list(client: &Client, controller_namespace: &str) -> anyhow::Result<Listed> {
    let mut listed = Listed::default();
    list_primary(client, &mut listed).await?;
    read_named_secrets(client, controller_namespace, &mut listed).await?;
    list_children(client, controller_namespace, &mut listed).await?;
    Ok(listed)
}

/// Lists every primary source once ([`ingest::sources`]): our children among them are
/// left to [`list_children`].
async fn list_primary(client: &Client, listed: &mut Listed) -> anyhow::Result<()> {
    for p in ingest::sources() {
        let got = match list_all(
            client,
            &p.resource,
            p.metadata_only,
            p.fields.as_deref(),
            None,
            p.page_size,
        )
        .await
        {
            Ok(got) => got,
            // Reading Secrets is not everyone's to do: the plan goes on without them, and
            // says so.
            Err(e) if forbidden(&e) && p.kind == ingest::Kind::Secret => {
                if !listed.notes.iter().any(|n| n.starts_with("Secrets")) {
                    listed.notes.push(
                        "Secrets are not readable with these credentials: TLS listeners are planned as if the Secrets they name were missing".to_owned(),
                    );
                }
                continue;
            }
            Err(e) if forbidden(&e) => {
                return Err(e.context(format!(
                    "these credentials may not list {} ({}); the ClusterRole gatewright-viewer (config/rbac/viewer.yaml) grants what status, trace and diff read",
                    p.resource.plural, p.resource.api_version
                )));
            }
            Err(e) => return Err(e),
        };
        match got {
            // Our children come from the lists of the child kinds, in full (as the
            // controller's primary watches leave them to the child watches).
            Some(items) => listed
                .objects
                .extend(items.into_iter().filter(|v| !ingest::is_child(v))),
            None if p.optional => listed.notes.push(format!(
                "kind {} ({}) is not served (its CRD is not installed): none listed",
                p.resource.kind, p.resource.api_version
            )),
            None => anyhow::bail!(
                "kind {} ({}) is not served by the API server: are the CRDs installed?",
                p.resource.kind,
                p.resource.api_version
            ),
        }
    }
    Ok(())
}

/// Reads the types of the non-TLS Secrets a Gateway names (a wrong type is reported),
/// their data dropped.
async fn read_named_secrets(
    client: &Client,
    controller_namespace: &str,
    listed: &mut Listed,
) -> anyhow::Result<()> {
    let named: BTreeSet<crate::snapshot::Key> = {
        let snap = listed
            .snapshot(controller_namespace)
            .map_err(anyhow::Error::msg)?;
        snap.gateways()
            .flat_map(|(_, g)| crate::snapshot::secrets_named_by(&g.typed).collect::<Vec<_>>())
            .filter(|k| snap.secret_type_unknown(k))
            .collect()
    };
    for k in named {
        let api: Api<k8s_openapi::api::core::v1::Secret> =
            Api::namespaced(client.clone(), &k.namespace);
        let got = match api.get_opt(&k.name).await {
            Ok(got) => got,
            Err(kube::Error::Api(s)) if s.code == 403 => None,
            Err(e) => return Err(e).with_context(|| format!("failed to read Secret {k}")),
        };
        if let Some(mut s) = got {
            s.data = None;
            s.string_data = None;
            let mut v = serde_json::to_value(&s)?;
            v["apiVersion"] = "v1".into();
            v["kind"] = "Secret".into();
            listed.objects.push(v);
        }
    }
    Ok(())
}

/// Lists our children, kind by kind as the plans name them (a plan made with some children
/// known may render templates, and so kinds, it held back without them: looked for again,
/// up to [`CHILD_ROUNDS`] times), with each kind's scope as discovery found it.
async fn list_children(
    client: &Client,
    controller_namespace: &str,
    listed: &mut Listed,
) -> anyhow::Result<()> {
    let mut tried: BTreeSet<KindKey> = BTreeSet::new();
    for _ in 0..CHILD_ROUNDS {
        let snap = listed
            .snapshot(controller_namespace)
            .map_err(anyhow::Error::msg)?;
        let wanted: BTreeSet<KindKey> = child_kinds(&snap)
            .into_iter()
            .filter(|k| !tried.contains(k))
            .collect();
        if wanted.is_empty() {
            break;
        }
        for key in wanted {
            tried.insert(key.clone());
            let (resource, scope) =
                match crate::discovery::lookup_kind(client, &key.0, &key.1).await {
                    Ok(r) => r,
                    Err(e) => {
                        listed.notes.push(format!(
                            "kind {} ({}) is not served by the API server: {e}",
                            key.1, key.0
                        ));
                        continue;
                    }
                };
            let selector = format!("{}={}", labels::MANAGED_BY, labels::MANAGED_BY_VALUE);
            let items = list_all(
                client,
                &resource,
                false,
                None,
                Some(&selector),
                ingest::PAGE,
            )
            .await?
            .unwrap_or_default();
            // The scope as discovery found it (the planner places objects by it).
            listed.objects.push(serde_json::json!({
                "apiVersion": "apiextensions.k8s.io/v1",
                "kind": "CustomResourceDefinition",
                "metadata": {"name": format!("{}.{}", resource.plural, resource.group)},
                "spec": {
                    "group": resource.group,
                    "names": {"kind": resource.kind},
                    "scope": if scope == Scope::Namespaced { "Namespaced" } else { "Cluster" },
                },
            }));
            for mut v in items {
                crate::identity::keep_what_fights_read(&mut v);
                listed.objects.push(v);
            }
            listed.child_kinds.insert(key, resource);
        }
    }
    Ok(())
}

/// The child kinds the Gateways of `snap` use: what their plans render and prune, and
/// the kinds of their live children.
#[must_use]
pub fn child_kinds(snap: &Snapshot) -> BTreeSet<KindKey> {
    let mut out = BTreeSet::new();
    let keys: Vec<_> = snap.gateways().map(|(k, _)| k.clone()).collect();
    for key in keys {
        let Ok(p) = crate::plan::plan(snap, &key) else {
            continue;
        };
        out.extend(p.child_kinds());
        out.extend(snap.child_kinds_by_gateway(&p.gateway.uid));
    }
    out
}
