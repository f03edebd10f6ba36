//! Who gatewright says it is on the wire: the field manager of every write and the
//! `User-Agent` of every request, in one place for the controller, its fleet members and
//! the CLI.
//!
//! - The controller's client stack ([`crate::controller::stack`]) names both on every
//!   request it sends through [`attributed`]: a write (`POST`, `PUT`, `PATCH`) without a
//!   `fieldManager` gets `fieldManager=gatewright`, so `managedFields` name us for status
//!   writes, finalizers, Events and Leases as they already did for server-side applies; a
//!   request without a `User-Agent` gets `gatewright/<version> (<replica>)` ([`agent_of`]),
//!   which the API server's audit log records, in its own cluster and in fleet members
//!   alike (a `DELETE` carries no field manager: its user agent names us).
//! - A client the CLI builds from a kubeconfig ([`identify`]) sends `gatewright/<version>`
//!   (or `(cli)` after it, for a fleet member) from the start.
//!
//! - What the controller keeps of a child's `managedFields` is told apart by the same name
//!   ([`keep_what_fights_read`]).
//!
//! Requests in and out of [`attributed`]: `http::Request<kube::client::Body>`.

use http::{HeaderValue, Method, Request, header::USER_AGENT};
use kube::client::Body;
use serde_json::Value;

/// Field manager of every write (server-side apply, status, metadata, Events, Leases).
pub const FIELD_MANAGER: &str = "gatewright";

/// The `User-Agent` of every request: `gatewright/<version>`.
#[must_use]
pub fn user_agent() -> String {
    format!("{FIELD_MANAGER}/{}", env!("CARGO_PKG_VERSION"))
}

/// The `User-Agent` of a replica's requests: [`user_agent`] followed by `(<who>)`, so a
/// cluster's audit log tells the replicas apart (a fleet member served by several).
#[must_use]
pub fn agent_of(who: &str) -> String {
    format!("{} ({who})", user_agent())
}

/// Sets the `User-Agent` of a client `config` builds: [`user_agent`], followed by
/// `(<who>)` when given ([`agent_of`]).
pub fn identify(config: &mut kube::Config, who: Option<&str>) {
    let agent = who.map_or_else(user_agent, agent_of);
    if let Ok(v) = HeaderValue::from_str(&agent) {
        config.headers.retain(|(k, _)| *k != USER_AGENT);
        config.headers.push((USER_AGENT, v));
    }
}

/// Trims a child's `managedFields` to what `controller::fight::Fights::on_drift` reads: the entries of
/// other field managers writing the object itself (not its status), each with its manager,
/// fields and time. Ours is dropped: a field only we own is never a revert, and ours is
/// the largest entry (we own every field we render). Most cached children are then left
/// without any.
pub fn keep_what_fights_read(obj: &mut Value) {
    let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) else {
        return;
    };
    let Some(entries) = meta.get_mut("managedFields").and_then(Value::as_array_mut) else {
        return;
    };
    entries.retain(|e| {
        e["manager"].as_str() != Some(FIELD_MANAGER)
            && e["subresource"].as_str().is_none_or(str::is_empty)
    });
    for e in entries.iter_mut() {
        if let Some(o) = e.as_object_mut() {
            o.retain(|k, _| matches!(k.as_str(), "manager" | "fieldsV1" | "time"));
        }
    }
    if entries.is_empty() {
        meta.remove("managedFields");
    }
}

/// Whether a request of `method` may carry a `fieldManager` (the API server takes it on
/// creates, updates and patches only).
fn takes_field_manager(method: &Method) -> bool {
    matches!(*method, Method::POST | Method::PUT | Method::PATCH)
}

/// Names us on `req` where it does not already say who sends it: a `fieldManager` query
/// parameter on a write without one, `agent` as the `User-Agent` of a request without one.
pub fn attribute(req: &mut Request<Body>, agent: &HeaderValue) {
    if !req.headers().contains_key(USER_AGENT) {
        req.headers_mut().insert(USER_AGENT, agent.clone());
    }
    if !takes_field_manager(req.method()) {
        return;
    }
    let uri = req.uri();
    let query = uri.query().unwrap_or_default();
    if query.split('&').any(|p| p.starts_with("fieldManager=")) {
        return;
    }
    let sep = if query.is_empty() { "" } else { "&" };
    let pq = format!("{}?{query}{sep}fieldManager={FIELD_MANAGER}", uri.path());
    let mut parts = uri.clone().into_parts();
    if let Ok(pq) = pq.parse() {
        parts.path_and_query = Some(pq);
        if let Ok(u) = http::Uri::from_parts(parts) {
            *req.uri_mut() = u;
        }
    }
}

/// `client`, with every request [`attribute`]d, `agent` its user agent. A client must not
/// also carry a user agent of its own config (kube adds those beneath this layer, so the
/// request would carry two): the controller's clients are built without one.
#[must_use]
pub fn attributed(client: kube::Client, agent: &str) -> kube::Client {
    let ns = client.default_namespace().to_owned();
    let agent =
        HeaderValue::from_str(agent).unwrap_or_else(|_| HeaderValue::from_static(FIELD_MANAGER));
    let svc = tower::service_fn(move |mut req: Request<Body>| {
        attribute(&mut req, &agent);
        let client = client.clone();
        async move { client.send(req).await }
    });
    kube::Client::new(svc, ns)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ours() -> HeaderValue {
        HeaderValue::from_str(&agent_of("pod-1")).expect("header")
    }

    fn req(method: Method, uri: &str) -> Request<Body> {
        let mut r = Request::new(Body::empty());
        *r.method_mut() = method;
        *r.uri_mut() = uri.parse().expect("uri");
        r
    }

    #[test]
    fn writes_without_a_field_manager_get_ours() {
        for (method, uri, want) in [
            (
                Method::PUT,
                "/apis/gateway.networking.k8s.io/v1/namespaces/a/httproutes/r/status",
                "/apis/gateway.networking.k8s.io/v1/namespaces/a/httproutes/r/status?fieldManager=gatewright",
            ),
            (
                Method::PATCH,
                "/api/v1/namespaces/a/events/e?dryRun=All",
                "/api/v1/namespaces/a/events/e?dryRun=All&fieldManager=gatewright",
            ),
            (
                Method::POST,
                "/api/v1/namespaces/a/configmaps?",
                "/api/v1/namespaces/a/configmaps?fieldManager=gatewright",
            ),
        ] {
            let mut r = req(method, uri);
            attribute(&mut r, &ours());
            assert_eq!(r.uri().to_string(), want);
            assert_eq!(r.headers()[USER_AGENT], agent_of("pod-1").as_str());
        }
    }

    #[test]
    fn what_a_request_already_says_is_kept() {
        // A server-side apply names its manager; the Lease's per-replica manager is kept.
        let mut r = req(
            Method::PATCH,
            "/apis/coordination.k8s.io/v1/namespaces/a/leases/l?fieldManager=gatewright%2Fpod-1",
        );
        r.headers_mut().insert(
            USER_AGENT,
            HeaderValue::from_static("gatewright/1.0 (pod-1)"),
        );
        attribute(&mut r, &ours());
        assert_eq!(
            r.uri().query(),
            Some("fieldManager=gatewright%2Fpod-1"),
            "one field manager, the request's own"
        );
        assert_eq!(r.headers()[USER_AGENT], "gatewright/1.0 (pod-1)");
    }

    #[test]
    fn reads_and_deletes_carry_no_field_manager_but_the_user_agent() {
        for method in [Method::GET, Method::DELETE] {
            let mut r = req(method, "/api/v1/namespaces/a/configmaps/c");
            attribute(&mut r, &ours());
            assert_eq!(r.uri().query(), None);
            assert_eq!(r.headers()[USER_AGENT], agent_of("pod-1").as_str());
        }
    }

    #[test]
    fn a_config_names_the_replica_when_asked() {
        let mut c = kube::Config::new("https://127.0.0.1:6443".parse().expect("url"));
        identify(&mut c, Some("pod-1"));
        identify(&mut c, Some("pod-2"));
        let agents: Vec<_> = c.headers.iter().filter(|(k, _)| *k == USER_AGENT).collect();
        assert_eq!(agents.len(), 1, "one user agent");
        assert_eq!(agents[0].1, agent_of("pod-2").as_str());
    }
}
