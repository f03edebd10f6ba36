//! The simulator's cluster side: writes on our children the status [`super::ready_status`]
//! says their downstream controllers would write. For local testing and the demo only;
//! the controller never calls it.

use kube::Client;

use super::Play;

/// A request of the simulator failed.
#[derive(Debug, thiserror::Error)]
#[error("failed to {action}: {source}")]
pub struct Error {
    /// What it tried.
    pub action: String,
    /// The cause.
    #[source]
    pub source: Box<kube::Error>,
}

impl Error {
    fn new(action: impl Into<String>, source: kube::Error) -> Self {
        Self {
            action: action.into(),
            source: Box::new(source),
        }
    }
}

/// Local testing only: writes on every child we manage the status its downstream
/// controller would write ([`super::ready_status`]), for the controllers `play` names.
/// Returns how many children it marked.
///
/// # Errors
/// Discovery or a status write failed.
pub async fn simulate_ready(client: &Client, play: Play) -> Result<usize, Error> {
    simulate_ready_where(client, None, play).await
}

/// [`simulate_ready`] for the children of the Gateways in `namespace` only: the
/// namespaced children in it and the cluster-scoped children whose Gateway is in it (by
/// the Gateway UID label); `None`: everywhere.
///
/// # Errors
/// Discovery, listing the namespace's Gateways or a status write failed.
pub async fn simulate_ready_where(
    client: &Client,
    namespace: Option<&str>,
    play: Play,
) -> Result<usize, Error> {
    use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams};
    let discovery = kube::discovery::Discovery::new(client.clone())
        .run()
        .await
        .map_err(|e| Error::new("discover API resources", e))?;
    // The UIDs of the namespace's Gateways, to pick their cluster-scoped children.
    let gateway_uids: Option<std::collections::BTreeSet<String>> = match namespace {
        Some(ns) => Some(
            Api::<gateway_api::apis::standard::gateways::Gateway>::namespaced(client.clone(), ns)
                .list_metadata(&ListParams::default())
                .await
                .map_err(|e| Error::new(format!("list the Gateways in {ns}"), e))?
                .items
                .into_iter()
                .filter_map(|g| g.metadata.uid)
                .collect(),
        ),
        None => None,
    };
    let selector = format!(
        "{}={}",
        crate::render::labels::MANAGED_BY,
        crate::render::labels::MANAGED_BY_VALUE
    );
    let mut n = 0;
    for group in discovery.groups() {
        for (ar, caps) in group.recommended_resources() {
            if !caps.supports_operation(kube::discovery::verbs::LIST)
                || caps.subresources.is_empty() && ar.kind != "Ingress"
            {
                continue;
            }
            let api: Api<DynamicObject> = match namespace {
                Some(ns) if caps.scope == kube::discovery::Scope::Namespaced => {
                    Api::namespaced_with(client.clone(), ns, &ar)
                }
                _ => Api::all_with(client.clone(), &ar),
            };
            let Ok(list) = api.list(&ListParams::default().labels(&selector)).await else {
                continue;
            };
            for obj in list {
                if caps.scope == kube::discovery::Scope::Cluster
                    && gateway_uids.as_ref().is_some_and(|uids| {
                        !kube::ResourceExt::labels(&obj)
                            .get(crate::render::labels::GATEWAY_UID)
                            .is_some_and(|u| uids.contains(u))
                    })
                {
                    continue;
                }
                let mut v = serde_json::to_value(&obj).unwrap_or(serde_json::Value::Null);
                // Items of a built-in kind's list come without apiVersion and kind.
                v["apiVersion"] = serde_json::Value::String(ar.api_version.clone());
                v["kind"] = serde_json::Value::String(ar.kind.clone());
                if !play.plays(&v) {
                    continue;
                }
                let Some(status) = super::ready_status(&v) else {
                    continue;
                };
                let ns = obj.metadata.namespace.clone().unwrap_or_default();
                let api: Api<DynamicObject> = if ns.is_empty() {
                    Api::all_with(client.clone(), &ar)
                } else {
                    Api::namespaced_with(client.clone(), &ns, &ar)
                };
                let name = obj.metadata.name.clone().unwrap_or_default();
                match api
                    .patch_status(
                        &name,
                        &PatchParams::default(),
                        &Patch::Merge(&serde_json::json!({ "status": status })),
                    )
                    .await
                {
                    Ok(_) => n += 1,
                    // Deleted since it was listed: nothing to mark.
                    Err(kube::Error::Api(s)) if s.code == 404 => {}
                    Err(e) => {
                        return Err(Error::new(
                            format!("write the status of {} {name}", ar.kind),
                            e,
                        ));
                    }
                }
            }
        }
    }
    Ok(n)
}
