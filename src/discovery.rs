//! Where an API server serves a kind: the lookup of a [`GroupVersionKind`] (one
//! discovery request for its group and version), and [`Cached`], one client's lookups
//! kept by kind. Used by the shells (`controller/`, `live/`); the parse of an
//! `apiVersion` is [`crate::kinds`].
//!
//! In: a client, an `apiVersion` and a kind (or a GVK). Out: the kind's [`ApiResource`]
//! and [`Scope`], or discovery's own error ([`kube::Error`]) for the caller to word.

use std::collections::HashMap;
use std::sync::Mutex;

use kube::Client;
use kube::api::ApiResource;
use kube::core::GroupVersionKind;
use kube::discovery::Scope;

/// A served kind: where its objects live, and whether they are namespaced.
pub type Served = (ApiResource, Scope);

/// Looks `gvk` up on `client`'s API server (one request, no retry: callers that retry
/// say how).
///
/// # Errors
///
/// Discovery's error: a 404 when the group, version or kind is not served, or any other
/// failure of the request.
pub async fn lookup(client: &Client, gvk: &GroupVersionKind) -> Result<Served, kube::Error> {
    kube::discovery::pinned_kind(client, gvk)
        .await
        .map(|(resource, caps)| (resource, caps.scope))
}

/// Looks up the kind `kind` of `api_version` ([`crate::kinds::gvk`], then [`lookup`]).
///
/// # Errors
///
/// As [`lookup`].
pub async fn lookup_kind(
    client: &Client,
    api_version: &str,
    kind: &str,
) -> Result<Served, kube::Error> {
    lookup(client, &crate::kinds::gvk(api_version, kind)).await
}

/// One client's lookups, kept by kind: a kind found is not looked up again; a failure is
/// not kept (the next lookup asks again).
pub struct Cached {
    client: Client,
    found: Mutex<HashMap<GroupVersionKind, Served>>,
}

impl Cached {
    /// No lookup made yet, on `client`.
    #[must_use]
    pub fn new(client: Client) -> Self {
        Self {
            client,
            found: Mutex::new(HashMap::new()),
        }
    }

    /// The client the lookups are made on.
    #[must_use]
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// Where `client` serves the kind `kind` of `api_version`: as found before, or looked
    /// up now ([`lookup`]).
    ///
    /// # Errors
    ///
    /// As [`lookup`].
    pub async fn lookup_kind(&self, api_version: &str, kind: &str) -> Result<Served, kube::Error> {
        let gvk = crate::kinds::gvk(api_version, kind);
        if let Some(s) = self.found.lock().ok().and_then(|f| f.get(&gvk).cloned()) {
            return Ok(s);
        }
        let served = lookup(&self.client, &gvk).await?;
        if let Ok(mut f) = self.found.lock() {
            f.insert(gvk, served.clone());
        }
        Ok(served)
    }
}
