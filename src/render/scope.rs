//! Whether a kind is namespaced or cluster-scoped. A template may create cluster-scoped
//! objects only of the kinds its blueprint lists in `clusterScopedKinds`, so the planner
//! must know each kind's real scope: in the controller from API discovery, offline from the
//! CustomResourceDefinitions given to `render`/`check`, and for the built-in kinds of
//! Kubernetes (and the custom kinds the shipped GatewayClasses render) from the table
//! below; what discovery or a CRD says wins over the table.
//!
//! In: scopes learned from discovery or CRDs. Out: [`Scope`] per group and kind, or
//! `None` when nothing says (an unknown kind offline).

use std::collections::HashMap;

/// Where objects of a kind live.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// In a namespace.
    Namespaced,
    /// Cluster-wide.
    Cluster,
}

impl Scope {
    /// From a CRD's `spec.scope` (`Namespaced` or `Cluster`).
    #[must_use]
    pub fn from_crd(scope: &str) -> Option<Self> {
        match scope {
            "Namespaced" => Some(Self::Namespaced),
            "Cluster" => Some(Self::Cluster),
            _ => None,
        }
    }
}

/// The scopes known beside the built-in table: learned from discovery or from CRDs.
#[derive(Clone, Debug, Default)]
pub struct KindScopes {
    /// Group -> kind -> scope (nested, so a lookup by `&str` allocates nothing).
    learned: HashMap<String, HashMap<String, Scope>>,
}

impl KindScopes {
    /// Records the scope of `group`/`kind`; returns whether it changed what was known.
    pub fn learn(&mut self, group: &str, kind: &str, scope: Scope) -> bool {
        self.learned
            .entry(group.to_owned())
            .or_default()
            .insert(kind.to_owned(), scope)
            != Some(scope)
    }

    /// Forgets what was learned of `group`/`kind` (its CRD went away).
    pub fn forget(&mut self, group: &str, kind: &str) {
        if let Some(kinds) = self.learned.get_mut(group) {
            kinds.remove(kind);
        }
    }

    /// The scope of `group`/`kind`: what was learned, else the built-in table, else `None`.
    #[must_use]
    pub fn scope(&self, group: &str, kind: &str) -> Option<Scope> {
        self.learned
            .get(group)
            .and_then(|kinds| kinds.get(kind))
            .copied()
            .or_else(|| builtin(group, kind))
    }
}

/// Cluster-scoped kinds of Kubernetes itself and of its aggregated APIs.
const BUILTIN_CLUSTER: &[(&str, &str)] = &[
    ("", "Namespace"),
    ("", "Node"),
    ("", "PersistentVolume"),
    ("", "ComponentStatus"),
    (
        "admissionregistration.k8s.io",
        "MutatingWebhookConfiguration",
    ),
    (
        "admissionregistration.k8s.io",
        "ValidatingWebhookConfiguration",
    ),
    ("admissionregistration.k8s.io", "ValidatingAdmissionPolicy"),
    (
        "admissionregistration.k8s.io",
        "ValidatingAdmissionPolicyBinding",
    ),
    ("admissionregistration.k8s.io", "MutatingAdmissionPolicy"),
    (
        "admissionregistration.k8s.io",
        "MutatingAdmissionPolicyBinding",
    ),
    ("apiextensions.k8s.io", "CustomResourceDefinition"),
    ("apiregistration.k8s.io", "APIService"),
    ("apiserverinternal.k8s.io", "StorageVersion"),
    ("authentication.k8s.io", "TokenReview"),
    ("authentication.k8s.io", "SelfSubjectReview"),
    ("authorization.k8s.io", "SubjectAccessReview"),
    ("authorization.k8s.io", "SelfSubjectAccessReview"),
    ("authorization.k8s.io", "SelfSubjectRulesReview"),
    ("certificates.k8s.io", "CertificateSigningRequest"),
    ("certificates.k8s.io", "ClusterTrustBundle"),
    ("flowcontrol.apiserver.k8s.io", "FlowSchema"),
    ("flowcontrol.apiserver.k8s.io", "PriorityLevelConfiguration"),
    ("gateway.networking.k8s.io", "GatewayClass"),
    ("networking.k8s.io", "IngressClass"),
    ("networking.k8s.io", "IPAddress"),
    ("networking.k8s.io", "ServiceCIDR"),
    ("node.k8s.io", "RuntimeClass"),
    ("rbac.authorization.k8s.io", "ClusterRole"),
    ("rbac.authorization.k8s.io", "ClusterRoleBinding"),
    ("resource.k8s.io", "DeviceClass"),
    ("resource.k8s.io", "ResourceSlice"),
    ("scheduling.k8s.io", "PriorityClass"),
    ("storage.k8s.io", "CSIDriver"),
    ("storage.k8s.io", "CSINode"),
    ("storage.k8s.io", "StorageClass"),
    ("storage.k8s.io", "VolumeAttachment"),
    ("storage.k8s.io", "VolumeAttributesClass"),
    ("gatewright.dev", "GatewayClassBlueprint"),
    // Custom resources the shipped GatewayClasses render or adopt, so `render` of the
    // examples needs no CRD: Crossplane's legacy AWS managed resources are cluster-scoped
    // (Crossplane v2's, in the `*.aws.m.upbound.io` groups, are namespaced).
    ("cert-manager.io", "ClusterIssuer"),
    ("acm.aws.upbound.io", "Certificate"),
    ("ec2.aws.upbound.io", "SecurityGroup"),
    ("ec2.aws.upbound.io", "SecurityGroupIngressRule"),
    ("elbv2.aws.upbound.io", "LB"),
    ("elbv2.aws.upbound.io", "LBListener"),
    ("elbv2.aws.upbound.io", "LBTargetGroup"),
    ("route53.aws.upbound.io", "Record"),
];

/// Namespaced kinds of Kubernetes itself, so that rendering them offline needs no CRD.
const BUILTIN_NAMESPACED: &[(&str, &str)] = &[
    ("", "ConfigMap"),
    ("", "Secret"),
    ("", "Service"),
    ("", "ServiceAccount"),
    ("", "Pod"),
    ("", "PersistentVolumeClaim"),
    ("", "Endpoints"),
    ("", "LimitRange"),
    ("", "ResourceQuota"),
    ("", "Event"),
    ("apps", "Deployment"),
    ("apps", "StatefulSet"),
    ("apps", "DaemonSet"),
    ("apps", "ReplicaSet"),
    ("autoscaling", "HorizontalPodAutoscaler"),
    ("batch", "Job"),
    ("batch", "CronJob"),
    ("coordination.k8s.io", "Lease"),
    ("discovery.k8s.io", "EndpointSlice"),
    ("events.k8s.io", "Event"),
    ("networking.k8s.io", "Ingress"),
    ("networking.k8s.io", "NetworkPolicy"),
    ("policy", "PodDisruptionBudget"),
    ("rbac.authorization.k8s.io", "Role"),
    ("rbac.authorization.k8s.io", "RoleBinding"),
    ("gateway.networking.k8s.io", "Gateway"),
    ("gateway.networking.k8s.io", "HTTPRoute"),
    ("gateway.networking.k8s.io", "GRPCRoute"),
    ("gateway.networking.k8s.io", "TLSRoute"),
    ("gateway.networking.k8s.io", "TCPRoute"),
    ("gateway.networking.k8s.io", "UDPRoute"),
    ("gateway.networking.k8s.io", "ReferenceGrant"),
    ("gateway.networking.k8s.io", "BackendTLSPolicy"),
    ("gateway.networking.k8s.io", "ListenerSet"),
    ("gatewright.dev", "GatewayClassConfig"),
    ("gatewright.dev", "GatewayConfig"),
    // Custom resources the shipped GatewayClasses render.
    ("cert-manager.io", "Certificate"),
    ("cert-manager.io", "Issuer"),
    ("externaldns.k8s.io", "DNSEndpoint"),
    ("elbv2.k8s.aws", "TargetGroupBinding"),
    ("acm.aws.m.upbound.io", "Certificate"),
    ("ec2.aws.m.upbound.io", "SecurityGroup"),
    ("ec2.aws.m.upbound.io", "SecurityGroupIngressRule"),
    ("elbv2.aws.m.upbound.io", "LB"),
    ("elbv2.aws.m.upbound.io", "LBListener"),
    ("elbv2.aws.m.upbound.io", "LBTargetGroup"),
    ("route53.aws.m.upbound.io", "Record"),
    ("networking.istio.io", "Gateway"),
    ("networking.istio.io", "VirtualService"),
    ("projectcontour.io", "HTTPProxy"),
];

/// Every kind of the built-in table with its scope (a cluster test compares it with
/// discovery for the kinds the cluster serves).
pub fn builtin_table() -> impl Iterator<Item = (&'static str, &'static str, Scope)> {
    BUILTIN_CLUSTER
        .iter()
        .map(|(g, k)| (*g, *k, Scope::Cluster))
        .chain(
            BUILTIN_NAMESPACED
                .iter()
                .map(|(g, k)| (*g, *k, Scope::Namespaced)),
        )
}

/// The scope of a built-in kind, or `None` for a kind the table does not know.
#[must_use]
pub fn builtin(group: &str, kind: &str) -> Option<Scope> {
    if BUILTIN_CLUSTER.contains(&(group, kind)) {
        Some(Scope::Cluster)
    } else if BUILTIN_NAMESPACED.contains(&(group, kind)) {
        Some(Scope::Namespaced)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_learned_and_unknown() {
        let mut s = KindScopes::default();
        assert_eq!(
            s.scope("rbac.authorization.k8s.io", "ClusterRoleBinding"),
            Some(Scope::Cluster)
        );
        assert_eq!(s.scope("", "Namespace"), Some(Scope::Cluster));
        assert_eq!(s.scope("", "ConfigMap"), Some(Scope::Namespaced));
        assert_eq!(
            s.scope("cert-manager.io", "Certificate"),
            Some(Scope::Namespaced)
        );
        assert_eq!(s.scope("example.com", "Widget"), None);
        assert!(s.learn("example.com", "Gadget", Scope::Cluster));
        assert!(!s.learn("example.com", "Gadget", Scope::Cluster));
        assert_eq!(s.scope("example.com", "Gadget"), Some(Scope::Cluster));
        s.forget("example.com", "Gadget");
        assert_eq!(s.scope("example.com", "Gadget"), None);
        // What discovery says wins over the table.
        s.learn("cert-manager.io", "Certificate", Scope::Cluster);
        assert_eq!(
            s.scope("cert-manager.io", "Certificate"),
            Some(Scope::Cluster)
        );
        // A group matters: a `Namespace` of another group is not the core one.
        assert_eq!(s.scope("example.com", "Namespace"), None);
    }
}
