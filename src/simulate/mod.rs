//! The status downstream controllers (Istio, cert-manager, external-dns, Contour,
//! Crossplane, the AWS Load Balancer Controller) would write on our children, for offline
//! convergence (render's golden and property tests) and the cluster tests. On a cluster
//! the simulator plays by default only the controllers that need a dataplane or a cloud,
//! which cannot run on the local test cluster ([`Play::Dataplane`]); cert-manager and
//! external-dns run for real beside it (`tests/cluster/downstream`, the demo). Tests that
//! set a Certificate's state by hand, in namespaces the real cert-manager does not serve,
//! ask for them too ([`Play::All`]).
//!
//! In: a child object. Out: the `status` its controller would write once it has done its
//! work, or `None` for kinds without status. Addresses come from the documentation ranges:
//! [`SIMULATED_IP`] (TEST-NET-1) for an object of the cluster it lives in, and for an object
//! placed in a fleet member (its `gatewright.dev/cluster` annotation) an address of
//! TEST-NET-2 (198.51.100.0/24) derived from the member's name ([`simulated_ip`]), so that
//! each member's gateway has its own.

mod patch;

pub use patch::{Error, simulate_ready, simulate_ready_where};

/// Which downstream controllers the simulator plays on a cluster.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Play {
    /// Only those that need a dataplane or a cloud (Istio, Contour, Crossplane, the AWS
    /// Load Balancer Controller): cert-manager's Certificates and external-dns's
    /// DNSEndpoints are left to the real controllers.
    Dataplane,
    /// Every one, cert-manager and external-dns too.
    All,
}

impl Play {
    /// Whether the simulator writes `obj`'s status under this choice.
    #[must_use]
    pub fn plays(self, obj: &Value) -> bool {
        self == Self::All || !runs_for_real(obj)
    }
}

/// Whether `obj`'s controller runs for real beside the local test cluster: cert-manager
/// (Certificates) and external-dns (DNSEndpoints) need only the API server.
#[must_use]
pub fn runs_for_real(obj: &Value) -> bool {
    let api_version = obj["apiVersion"].as_str().unwrap_or_default();
    let group = crate::kinds::group_of(api_version);
    matches!(
        (group, obj["kind"].as_str().unwrap_or_default()),
        ("cert-manager.io", "Certificate") | ("externaldns.k8s.io", "DNSEndpoint")
    )
}

use serde_json::{Value, json};

/// The address simulated load balancers and gateways get in a single cluster (objects
/// not placed in a fleet member).
pub const SIMULATED_IP: &str = "192.0.2.10";

/// The address a simulated load balancer or gateway gets in `cluster`: [`SIMULATED_IP`]
/// for `""` (the cluster the object lives in, not a fleet member), otherwise one of
/// TEST-NET-2 (198.51.100.1-254) derived from the member's name (`namespace/name` of its
/// ClusterProfile): the same name always gets the same address, two names almost always
/// two (254 addresses: a collision is possible, and deterministic).
#[must_use]
pub fn simulated_ip(cluster: &str) -> String {
    use sha2::{Digest, Sha256};
    if cluster.is_empty() {
        return SIMULATED_IP.to_owned();
    }
    let d = Sha256::digest(cluster.as_bytes());
    let n = u16::from_be_bytes([d[0], d[1]]) % 254 + 1;
    format!("198.51.100.{n}")
}

/// The member a placed object goes to (its `gatewright.dev/cluster` annotation), `""`
/// for any other object.
fn member_of(obj: &Value) -> &str {
    obj["metadata"]["annotations"][crate::render::labels::CLUSTER]
        .as_str()
        .unwrap_or_default()
}

/// The ready status of `obj`, as its controller would write it.
#[must_use]
pub fn ready_status(obj: &Value) -> Option<Value> {
    let api_version = obj["apiVersion"].as_str().unwrap_or_default();
    let group = crate::kinds::group_of(api_version);
    let kind = obj["kind"].as_str().unwrap_or_default();
    let generation = obj["metadata"]["generation"].as_i64().unwrap_or(1);
    let name = obj["metadata"]["name"].as_str().unwrap_or_default();
    let ip = simulated_ip(member_of(obj));
    let ready = json!([{ "type": "Ready", "status": "True", "reason": "Available", "message": "simulated", "lastTransitionTime": "2026-01-01T00:00:00Z" }]);
    let status = match (group, kind) {
        ("gateway.networking.k8s.io", "Gateway") => json!({
            "addresses": [{ "type": "IPAddress", "value": ip }],
            "conditions": [
                { "type": "Accepted", "status": "True", "reason": "Accepted", "message": "simulated", "observedGeneration": generation, "lastTransitionTime": "2026-01-01T00:00:00Z" },
                { "type": "Programmed", "status": "True", "reason": "Programmed", "message": "simulated", "observedGeneration": generation, "lastTransitionTime": "2026-01-01T00:00:00Z" },
            ],
        }),
        ("cert-manager.io", "Certificate") => json!({ "conditions": ready }),
        ("externaldns.k8s.io", "DNSEndpoint") => json!({ "observedGeneration": generation }),
        ("networking.k8s.io", "Ingress") => {
            json!({ "loadBalancer": { "ingress": [{ "ip": ip }] } })
        }
        // Crossplane's AWS managed resources: Crossplane v2's namespaced groups
        // (`*.aws.m.upbound.io`) and the legacy cluster-scoped ones.
        (g, _) if g.ends_with(".aws.m.upbound.io") || g.ends_with(".aws.upbound.io") => {
            let mut at = json!({ "arn": format!("arn:aws:simulated:{kind}/{name}"), "id": name });
            if kind == "LB" {
                at["dnsName"] = json!(format!("{name}.eu-central-1.elb.amazonaws.com"));
            }
            if kind == "Certificate" {
                at["domainValidationOptions"] = acm_validation_options(obj);
            }
            json!({ "atProvider": at, "conditions": [
                { "type": "Ready", "status": "True", "reason": "Available", "lastTransitionTime": "2026-01-01T00:00:00Z" },
                { "type": "Synced", "status": "True", "reason": "ReconcileSuccess", "lastTransitionTime": "2026-01-01T00:00:00Z" },
            ] })
        }
        _ => return None,
    };
    Some(status)
}

/// The DNS records ACM asks for to validate a certificate's names (one CNAME per name;
/// a wildcard and its base name share one, as with ACM).
fn acm_validation_options(obj: &Value) -> Value {
    use sha2::{Digest, Sha256};
    let p = &obj["spec"]["forProvider"];
    let names = std::iter::once(&p["domainName"])
        .chain(
            p["subjectAlternativeNames"]
                .as_array()
                .into_iter()
                .flatten(),
        )
        .filter_map(Value::as_str);
    let mut seen = std::collections::BTreeSet::new();
    let mut out = Vec::new();
    for name in names {
        if !seen.insert(name) {
            continue;
        }
        let base = name.trim_start_matches("*.");
        let token: String = Sha256::digest(base.as_bytes())[..8]
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        out.push(json!({
            "domainName": name,
            "resourceRecordName": format!("_{token}.{base}."),
            "resourceRecordType": "CNAME",
            "resourceRecordValue": format!("_{token}.simulated.acm-validations.aws."),
        }));
    }
    Value::Array(out)
}

/// `obj` as it looks once its controller is done: metadata.generation set, status written.
#[must_use]
pub fn as_ready(obj: &Value) -> Value {
    let mut out = obj.clone();
    if out["metadata"]["generation"].is_null() {
        out["metadata"]["generation"] = json!(1);
    }
    if let Some(status) = ready_status(&out) {
        out["status"] = status;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::readiness::{Readiness, default_rules};

    #[test]
    fn simulated_children_pass_the_default_rules() {
        for (api, kind) in [
            ("cert-manager.io/v1", "Certificate"),
            ("externaldns.k8s.io/v1alpha1", "DNSEndpoint"),
            ("elbv2.aws.upbound.io/v1beta1", "LB"),
            ("elbv2.aws.m.upbound.io/v1beta1", "LB"),
            ("v1", "ConfigMap"),
        ] {
            let obj = as_ready(
                &json!({ "apiVersion": api, "kind": kind, "metadata": { "name": "x", "generation": 2 } }),
            );
            assert_eq!(default_rules(&obj), Readiness::Ready, "{kind}");
        }
    }

    #[test]
    fn each_member_gets_its_own_address_and_a_single_cluster_the_usual_one() {
        let gateway = |cluster: Option<&str>| {
            let mut g = json!({ "apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
                "metadata": { "name": "public-istio", "namespace": "web" } });
            if let Some(c) = cluster {
                g["metadata"]["annotations"] = json!({ "gatewright.dev/cluster": c });
            }
            as_ready(&g)["status"]["addresses"][0]["value"]
                .as_str()
                .unwrap()
                .to_owned()
        };
        assert_eq!(gateway(None), SIMULATED_IP);
        let (eu, us) = (gateway(Some("fleet/eu-1")), gateway(Some("fleet/us-1")));
        assert_ne!(eu, us);
        assert_eq!(eu, gateway(Some("fleet/eu-1")));
        assert_eq!(eu, simulated_ip("fleet/eu-1"));
        for ip in [&eu, &us] {
            let last: u16 = ip.strip_prefix("198.51.100.").unwrap().parse().unwrap();
            assert!((1..=254).contains(&last), "{ip}");
        }
        assert_eq!(simulated_ip(""), SIMULATED_IP);
    }

    #[test]
    fn the_dataplane_play_leaves_cert_manager_and_external_dns_alone() {
        let of = |api: &str, kind: &str| json!({ "apiVersion": api, "kind": kind });
        for (api, kind) in [
            ("cert-manager.io/v1", "Certificate"),
            ("externaldns.k8s.io/v1alpha1", "DNSEndpoint"),
        ] {
            assert!(!Play::Dataplane.plays(&of(api, kind)), "{kind}");
            assert!(Play::All.plays(&of(api, kind)), "{kind}");
        }
        for (api, kind) in [
            ("gateway.networking.k8s.io/v1", "Gateway"),
            ("elbv2.aws.upbound.io/v1beta1", "LB"),
            ("networking.k8s.io/v1", "Ingress"),
            // ACM's Certificate is a cloud's, not cert-manager's.
            ("acm.aws.upbound.io/v1beta1", "Certificate"),
            ("acm.aws.m.upbound.io/v1beta1", "Certificate"),
        ] {
            assert!(Play::Dataplane.plays(&of(api, kind)), "{kind}");
        }
    }
}
