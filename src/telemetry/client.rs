//! The counting client: a kube client that counts and times every request it sends to the
//! API server, by verb, resource and namespace ([`split_api_path`]).

use std::sync::Arc;
use std::time::Instant;

use super::Metrics;

/// The namespace and the resource of an API path (`/api/v1/namespaces/ns/pods/x`,
/// `/apis/group/v1/widgets`); empty strings where the path has none.
#[must_use]
pub fn split_api_path(path: &str) -> (&str, &str) {
    let path = path.split('?').next().unwrap_or_default();
    let mut parts = path.trim_start_matches('/').split('/');
    // Skip "api/v1" or "apis/group/version".
    match parts.next() {
        Some("api") => {
            parts.next();
        }
        Some("apis") => {
            parts.next();
            parts.next();
        }
        _ => return ("", ""),
    }
    match (parts.next(), parts.next(), parts.next()) {
        (Some("namespaces"), Some(ns), Some(resource)) => (ns, resource),
        (Some("namespaces"), Some(ns), None) => (ns, "namespaces"),
        (Some(resource), _, _) => ("", resource),
        (None, _, _) => ("", ""),
    }
}

/// Whether a request's query asks for a watch.
fn is_watch(query: Option<&str>) -> bool {
    query.is_some_and(|q| q.split('&').any(|p| p == "watch=true" || p == "watch=1"))
}

/// Wraps `client` so that every request it sends is counted in `metrics` before it leaves,
/// and timed until its response (or its failure) comes back: the figures are real
/// requests, not what the controller meant to send.
#[must_use]
pub fn counting_client(client: kube::Client, metrics: Arc<Metrics>) -> kube::Client {
    let ns = client.default_namespace().to_owned();
    let svc = tower::service_fn(move |req: http::Request<kube::client::Body>| {
        let method = req.method().as_str().to_owned();
        let watch = is_watch(req.uri().query());
        metrics.api_request(&method, req.uri().path());
        let client = client.clone();
        let metrics = metrics.clone();
        async move {
            let started = Instant::now();
            let res = client.send(req).await;
            let code = res.as_ref().ok().map(|r| r.status().as_u16());
            metrics.api_response(&method, watch, code, started.elapsed());
            res
        }
    });
    kube::Client::new(svc, ns)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn api_paths_split_into_namespace_and_resource() {
        assert_eq!(split_api_path("/api/v1/namespaces/a/pods/x"), ("a", "pods"));
        assert_eq!(
            split_api_path("/apis/gateway.networking.k8s.io/v1/namespaces/b/gateways/g/status"),
            ("b", "gateways")
        );
        assert_eq!(
            split_api_path("/apis/ec2.aws.upbound.io/v1beta1/securitygroups?fieldManager=x"),
            ("", "securitygroups")
        );
        assert_eq!(split_api_path("/api/v1/namespaces/c"), ("c", "namespaces"));
        assert_eq!(split_api_path("/version"), ("", ""));
    }

    #[test]
    fn watches_are_told_from_lists() {
        assert!(is_watch(Some(
            "labelSelector=a&watch=true&timeoutSeconds=290"
        )));
        assert!(is_watch(Some("watch=1")));
        assert!(!is_watch(Some("labelSelector=watch%3Dtrue")));
        assert!(!is_watch(None));
    }
}
