//! `--fleet` for the live commands: read a fleet from its hub as `gatewright run --fleet`
//! serves it. The hub's ClusterProfiles (and the kubeconfig Secrets labelled for the
//! consumer) give the members, each judged as the controller judges it
//! ([`crate::fleet::members::verdict`]: healthy, and its credentials build), plus one
//! thing the controller learns from its watches: a member whose API server does not answer
//! is not served. Placed templates then render over the members served, and each placed
//! child is read in its member, so that `status` and `trace` show it with its cluster and
//! its own readiness, and the hub's own children that only placement renders (a DNS
//! record listing the members' addresses) are read in the hub. Reads only.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, ApiResource, DynamicObject, ListParams};
use kube::discovery::Scope;
use kube::{Client, ResourceExt};

use crate::fleet::access::{self, ProviderFile};
use crate::fleet::members::{Verdict, verdict};
use crate::fleet::profile::{self, ClusterProfile};
use crate::fleet_client;
use crate::snapshot::fleet::FleetMember;
use crate::snapshot::{ObjectKey, Snapshot};

/// How long a member's API server has to answer before it is taken as unreachable.
const REACH: Duration = Duration::from_secs(5);

/// Where and how the fleet is read (the flags of `run --fleet`).
#[derive(Clone, Debug, Default)]
pub struct FleetRead {
    /// Only the ClusterProfiles (and kubeconfig Secrets) of this namespace; all when `None`.
    pub namespace: Option<String>,
    /// The consumer the members' kubeconfig Secrets are labelled for.
    pub consumer: String,
    /// The access providers (exec plugins) members may be reached through.
    pub providers: ProviderFile,
}

/// What reading the fleet found, beyond the snapshot.
#[derive(Default)]
pub struct FleetFound {
    /// Placed children that could not be read in their member: why, by key.
    pub unread: BTreeMap<ObjectKey, String>,
    /// Notes for stderr (a member not served, and why).
    pub notes: Vec<String>,
    /// A client of each member served, by its name (`namespace/name` of its profile).
    pub clients: BTreeMap<String, Client>,
}

/// Lists the hub's ClusterProfiles into `snap` (placement on), reaches each member served,
/// and puts every placed child the plans of `gateways` name into `snap` as its member
/// holds it.
///
/// # Errors
/// The hub does not serve ClusterProfiles, or they (or the Secrets) cannot be listed.
pub async fn read(
    hub: &Client,
    fleet: &FleetRead,
    snap: &mut Snapshot,
    gateways: &[crate::snapshot::Key],
) -> anyhow::Result<FleetFound> {
    let mut found = FleetFound::default();
    let profiles: Api<DynamicObject> = match &fleet.namespace {
        Some(ns) => Api::namespaced_with(hub.clone(), ns, &profile::api_resource()),
        None => Api::all_with(hub.clone(), &profile::api_resource()),
    };
    let listed = profiles.list(&ListParams::default()).await.map_err(|e| {
        if matches!(&e, kube::Error::Api(s) if s.code == 404) {
            anyhow::anyhow!(
                "--fleet: this cluster serves no ClusterProfiles ({}); it is not a fleet's hub",
                profile::GROUP
            )
        } else {
            anyhow::anyhow!("--fleet: listing the ClusterProfiles failed: {e}")
        }
    })?;
    let secrets: Api<Secret> = match &fleet.namespace {
        Some(ns) => Api::namespaced(hub.clone(), ns),
        None => Api::all(hub.clone()),
    };
    let selector = format!("{}={}", access::LABEL_INVENTORY_CONSUMER, fleet.consumer);
    let secrets: Vec<Secret> = match secrets.list(&ListParams::default().labels(&selector)).await {
        Ok(l) => l.items,
        Err(e) => {
            found.notes.push(format!(
                "--fleet: the members' kubeconfig Secrets ({selector}) cannot be listed: {e}"
            ));
            Vec::new()
        }
    };
    snap.allow_placement();
    let mut profiles = Vec::new();
    for o in &listed.items {
        match ClusterProfile::from_dynamic(o) {
            Ok(p) => profiles.push(p),
            Err(e) => found.notes.push(format!(
                "--fleet: ClusterProfile {}/{} cannot be read: {e}",
                o.namespace().unwrap_or_default(),
                o.name_any()
            )),
        }
    }
    // Every member judged and reached at once (one that does not answer costs REACH, not
    // REACH per member).
    let reached =
        futures::future::join_all(profiles.iter().map(|p| reach(p, fleet, &secrets))).await;
    let mut clients: BTreeMap<String, Client> = BTreeMap::new();
    for (p, r) in profiles.iter().zip(reached) {
        let unserved = match r {
            Ok(c) => {
                clients.insert(p.key(), c);
                None
            }
            Err(why) => {
                // A member whose health is not reported says so in its own words (it names
                // the member); any other reason is put after the member's name.
                let member = format!("member {}", p.key());
                found.notes.push(if why.starts_with(&member) {
                    why.clone()
                } else {
                    format!("{member} not served: {why}")
                });
                Some(crate::fleet::members::health(p).err().unwrap_or(why))
            }
        };
        snap.put_fleet_member(FleetMember::of(p, unserved));
    }
    // What the plans place, read in each member; each kind looked up once per member
    // (by the member's own discovery).
    read_placed(snap, gateways, &clients, &mut found).await;
    // The hub's own children that only placement brings (a DNS record listing the
    // members' addresses renders once their gateways are read): the hub's list, planned
    // without the members, did not look for their kinds, so they are read here.
    read_hub_children(hub, snap, gateways, &mut found).await;
    found.clients = clients;
    Ok(found)
}

/// Reads, in each member served (its client in `clients`), what the plans of `gateways`
/// place there; what cannot be read is said in `found`.
async fn read_placed(
    snap: &mut Snapshot,
    gateways: &[crate::snapshot::Key],
    clients: &BTreeMap<String, Client>,
    found: &mut FleetFound,
) {
    let placed: Vec<ObjectKey> = planned(snap, gateways)
        .into_iter()
        .filter(|key| !key.cluster.is_empty())
        .collect();
    let mut kinds: BTreeMap<(String, String, String), Served> = BTreeMap::new();
    for key in placed {
        // Placed templates render only for the members served, each with its client.
        let Some(client) = clients.get(&key.cluster) else {
            continue;
        };
        let kind = (
            key.cluster.clone(),
            key.api_version.clone(),
            key.kind.clone(),
        );
        if !kinds.contains_key(&kind) {
            kinds.insert(kind.clone(), discover(client, &key).await);
        }
        let read = match &kinds[&kind] {
            Ok((resource, scope)) => get(client, &key, resource, scope).await,
            Err(why) => Err(why.clone()),
        };
        match read {
            Ok(Some(obj)) => snap.put_child(obj),
            Ok(None) => {}
            Err(why) => {
                found.unread.insert(key, why);
            }
        }
    }
}

/// Reads the hub's own children of `gateways` that the snapshot lacks, kind by kind (a
/// kind the hub does not serve: the child is missing); what cannot be read is said in
/// `found`.
async fn read_hub_children(
    hub: &Client,
    snap: &mut Snapshot,
    gateways: &[crate::snapshot::Key],
    found: &mut FleetFound,
) {
    let mut hub_kinds: BTreeMap<(String, String), Served> = BTreeMap::new();
    let missing: Vec<ObjectKey> = planned(snap, gateways)
        .into_iter()
        .filter(|key| key.cluster.is_empty() && !snap.has_child(key))
        .collect();
    for key in missing {
        let kind = (key.api_version.clone(), key.kind.clone());
        if !hub_kinds.contains_key(&kind) {
            hub_kinds.insert(kind.clone(), discover(hub, &key).await);
        }
        // A kind the hub does not serve: the child is missing, as the report says.
        let Ok((resource, scope)) = &hub_kinds[&kind] else {
            continue;
        };
        match get(hub, &key, resource, scope).await {
            Ok(Some(obj)) => snap.put_child(obj),
            Ok(None) => {}
            Err(why) => {
                found.unread.insert(key, why);
            }
        }
    }
}

/// Every child the plans of `gateways` name, placed or not.
fn planned(snap: &Snapshot, gateways: &[crate::snapshot::Key]) -> Vec<ObjectKey> {
    gateways
        .iter()
        .filter_map(|k| crate::plan::plan(snap, k).ok())
        .flat_map(|plan| {
            plan.gateway
                .states
                .iter()
                .chain(plan.routes.iter().flat_map(|r| r.states.iter()))
                .map(|s| s.key.clone())
                .collect::<Vec<_>>()
        })
        .collect()
}

/// Where `key` lives, in words: its member, or the hub.
fn place(key: &ObjectKey) -> String {
    if key.cluster.is_empty() {
        "the hub".to_owned()
    } else {
        format!("member {}", key.cluster)
    }
}

/// A member judged as the controller judges it, then reached: its client, or why it is
/// not served.
async fn reach(
    p: &ClusterProfile,
    fleet: &FleetRead,
    secrets: &[Secret],
) -> Result<Client, String> {
    let kubeconfig = match verdict(p, &fleet.providers, &fleet.consumer, secrets) {
        Verdict::Engage(kc) => kc,
        Verdict::Wait(why) | Verdict::Failed(why) => return Err(why),
    };
    let client = fleet_client::member_client(p, *kubeconfig, Some("cli")).await?;
    match tokio::time::timeout(REACH, client.apiserver_version()).await {
        Ok(Ok(_)) => Ok(client),
        Ok(Err(e)) => Err(format!("its API server is unreachable: {e}")),
        Err(_) => Err(format!(
            "its API server is unreachable: no answer in {} s",
            REACH.as_secs()
        )),
    }
}

/// Where a member serves a kind, or why it does not.
type Served = Result<(ApiResource, Scope), String>;

/// Where the member serves `key`'s kind.
pub(super) async fn discover(client: &Client, key: &ObjectKey) -> Served {
    crate::discovery::lookup_kind(client, &key.api_version, &key.kind)
        .await
        .map_err(|e| format!("{}: {} is not served: {e}", place(key), key.kind))
}

/// `key` as its member holds it (`None`: not there).
async fn get(
    client: &Client,
    key: &ObjectKey,
    resource: &ApiResource,
    scope: &Scope,
) -> Result<Option<serde_json::Value>, String> {
    let api: Api<DynamicObject> = match scope {
        Scope::Namespaced => Api::namespaced_with(client.clone(), &key.namespace, resource),
        Scope::Cluster => Api::all_with(client.clone(), resource),
    };
    let obj = api
        .get_opt(&key.name)
        .await
        .map_err(|e| format!("{}: reading it failed: {e}", place(key)))?;
    obj.map(|o| serde_json::to_value(o).map_err(|e| e.to_string()))
        .transpose()
}
