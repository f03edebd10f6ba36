//! Conditions without timestamps ([`Cond`]), the condition types and reasons of the
//! Gateway API, and the merge into stored `Condition`s that keeps `lastTransitionTime`
//! when nothing changed and never touches conditions of other owners.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

/// Condition status.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    /// True.
    True,
    /// False.
    False,
    /// Unknown.
    Unknown,
}

impl Status {
    /// The API string.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::True => "True",
            Self::False => "False",
            Self::Unknown => "Unknown",
        }
    }
    /// Whether True.
    #[must_use]
    pub fn is_true(self) -> bool {
        self == Self::True
    }
}

impl std::fmt::Display for Status {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A condition the planner wants, without time or generation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cond {
    /// Type.
    pub type_: String,
    /// Status.
    pub status: Status,
    /// Reason (PascalCase).
    pub reason: String,
    /// Message.
    pub message: String,
}

/// Longest condition message we write (the API allows 32768).
pub const MAX_MESSAGE: usize = 4096;

impl Cond {
    fn new(type_: &str, status: Status, reason: &str, message: &str) -> Self {
        let mut message = message.to_owned();
        if message.len() > MAX_MESSAGE {
            let cut = message.floor_char_boundary(MAX_MESSAGE - 3);
            message.truncate(cut);
            message.push_str("...");
        }
        Self {
            type_: type_.to_owned(),
            status,
            reason: reason.to_owned(),
            message,
        }
    }
    /// A True condition.
    #[must_use]
    pub fn t(type_: &str, reason: &str, message: &str) -> Self {
        Self::new(type_, Status::True, reason, message)
    }
    /// A False condition.
    #[must_use]
    pub fn f(type_: &str, reason: &str, message: &str) -> Self {
        Self::new(type_, Status::False, reason, message)
    }
    /// An Unknown condition.
    #[must_use]
    pub fn unknown(type_: &str, reason: &str, message: &str) -> Self {
        Self::new(type_, Status::Unknown, reason, message)
    }
    /// The same condition under another type.
    #[must_use]
    pub fn retyped(&self, type_: &str) -> Self {
        Self {
            type_: type_.to_owned(),
            ..self.clone()
        }
    }
}

/// Condition types.
pub mod types {
    /// `Accepted`.
    pub const ACCEPTED: &str = "Accepted";
    /// `Programmed`.
    pub const PROGRAMMED: &str = "Programmed";
    /// `ResolvedRefs`.
    pub const RESOLVED_REFS: &str = "ResolvedRefs";
    /// `Conflicted`.
    pub const CONFLICTED: &str = "Conflicted";
    /// `OverlappingTLSConfig`.
    pub const OVERLAPPING_TLS_CONFIG: &str = "OverlappingTLSConfig";
    /// `PartiallyInvalid`.
    pub const PARTIALLY_INVALID: &str = "PartiallyInvalid";
    /// `SupportedVersion`.
    pub const SUPPORTED_VERSION: &str = "SupportedVersion";
    /// `gatewright.dev/Revision`: the revision of its blueprint a Gateway renders (the
    /// message starts with its name); True when it is the newest.
    pub const REVISION: &str = "gatewright.dev/Revision";
    /// `gatewright.dev/Rollout`: True once every make-before-break template's latest
    /// version serves and the old versions are gone; False while a replacement is under way
    /// (reason `Progressing`) or past its timeout (reason `Stuck`).
    pub const ROLLOUT: &str = "gatewright.dev/Rollout";
    /// `gatewright.dev/Teardown`: on a Gateway being deleted, False with reason
    /// `DeletionStuck` when a child's deletion hangs.
    pub const TEARDOWN: &str = "gatewright.dev/Teardown";
    /// `gatewright.dev/Rendered`: on a route's parent entry, False with reason
    /// `TemplateError` when the route's own templates failed under that Gateway.
    pub const RENDERED: &str = "gatewright.dev/Rendered";
    /// `gatewright.dev/WildcardOnly`: on a route's parent entry, True (reason
    /// `NoPreciseHostname`) when on some HTTPS listener served with a generated certificate
    /// (no certificateRefs of its own) the route matches only through a wildcard (or no)
    /// hostname, so no generated certificate names it (certificates list precise hostnames
    /// only). Negative polarity: absent when False.
    pub const WILDCARD_ONLY: &str = "gatewright.dev/WildcardOnly";
    /// `gatewright.dev/FieldConflict`: on a Gateway, True with reason `FieldFight` while
    /// another field manager keeps reverting a field of one of its children (and we back
    /// off from that child); absent otherwise.
    pub const FIELD_CONFLICT: &str = "gatewright.dev/FieldConflict";
}

/// Condition reasons.
pub mod reasons {
    #![allow(missing_docs)]
    pub const ACCEPTED: &str = "Accepted";
    pub const PROGRAMMED: &str = "Programmed";
    pub const RESOLVED_REFS: &str = "ResolvedRefs";
    pub const PENDING: &str = "Pending";
    pub const COMPLETE: &str = "Complete";
    pub const PROGRESSING: &str = "Progressing";
    pub const STUCK: &str = "Stuck";
    pub const DELETING: &str = "Deleting";
    pub const DELETION_STUCK: &str = "DeletionStuck";
    pub const TEMPLATE_ERROR: &str = "TemplateError";
    pub const NO_PRECISE_HOSTNAME: &str = "NoPreciseHostname";
    pub const INVALID: &str = "Invalid";
    /// `Accepted=False`: the revision of its class's blueprint the Gateway is to render
    /// cannot be rendered (a rollout halts on it).
    pub const REVISION_INVALID: &str = "RevisionInvalid";
    /// A ListenerSet its parent Gateway does not allow (`spec.allowedListeners`).
    pub const NOT_ALLOWED: &str = "NotAllowed";
    /// A ListenerSet (or its listener) whose parent Gateway is not accepted.
    pub const PARENT_NOT_ACCEPTED: &str = "ParentNotAccepted";
    /// Policy (GEP-713): the target does not exist, or is not ours.
    pub const TARGET_NOT_FOUND: &str = "TargetNotFound";
    /// Policy (GEP-713): another policy applies to the target instead.
    pub const CONFLICTED: &str = "Conflicted";
    pub const INVALID_PARAMETERS: &str = "InvalidParameters";
    pub const UNSUPPORTED: &str = "Unsupported";
    pub const UNSUPPORTED_VERSION: &str = "UnsupportedVersion";
    pub const UNSUPPORTED_ADDRESS: &str = "UnsupportedAddress";
    pub const LISTENERS_NOT_VALID: &str = "ListenersNotValid";
    pub const LISTENERS_NOT_RESOLVED: &str = "ListenersNotResolved";
    pub const NO_RESOURCES: &str = "NoResources";
    pub const ADDRESS_NOT_ASSIGNED: &str = "AddressNotAssigned";
    pub const ADDRESS_NOT_USABLE: &str = "AddressNotUsable";
    pub const PORT_UNAVAILABLE: &str = "PortUnavailable";
    pub const UNSUPPORTED_PROTOCOL: &str = "UnsupportedProtocol";
    pub const UNSUPPORTED_VALUE: &str = "UnsupportedValue";
    pub const NO_VALID_CA_CERTIFICATE: &str = "NoValidCACertificate";
    pub const INVALID_CERTIFICATE_REF: &str = "InvalidCertificateRef";
    pub const INVALID_ROUTE_KINDS: &str = "InvalidRouteKinds";
    pub const REF_NOT_PERMITTED: &str = "RefNotPermitted";
    pub const HOSTNAME_CONFLICT: &str = "HostnameConflict";
    pub const PROTOCOL_CONFLICT: &str = "ProtocolConflict";
    pub const NO_CONFLICTS: &str = "NoConflicts";
    pub const OVERLAPPING_HOSTNAMES: &str = "OverlappingHostnames";
    pub const NOT_ALLOWED_BY_LISTENERS: &str = "NotAllowedByListeners";
    pub const NO_MATCHING_LISTENER_HOSTNAME: &str = "NoMatchingListenerHostname";
    pub const NO_MATCHING_PARENT: &str = "NoMatchingParent";
    pub const INCOMPATIBLE_FILTERS: &str = "IncompatibleFilters";
    pub const INVALID_KIND: &str = "InvalidKind";
    pub const BACKEND_NOT_FOUND: &str = "BackendNotFound";
}

/// Turns `desired` into stored conditions: `observedGeneration` on each; the stored
/// `lastTransitionTime` kept when type and status are unchanged, else `now`. Conditions
/// in `existing` whose type is not in `owned_types` are kept as they are, first and in
/// order; owned types not desired are dropped.
#[must_use]
pub fn merge_conditions(
    existing: &[Condition],
    desired: &[Cond],
    owned_types: &[&str],
    observed_generation: Option<i64>,
    now: &Time,
) -> Vec<Condition> {
    let mut out: Vec<Condition> = existing
        .iter()
        .filter(|c| {
            !owned_types.contains(&c.type_.as_str()) && !desired.iter().any(|d| d.type_ == c.type_)
        })
        .cloned()
        .collect();
    for d in desired {
        let old = existing.iter().find(|c| c.type_ == d.type_);
        let last_transition_time = match old {
            Some(o) if o.status == d.status.as_str() => o.last_transition_time.clone(),
            _ => now.clone(),
        };
        out.push(Condition {
            type_: d.type_.clone(),
            status: d.status.as_str().to_owned(),
            reason: d.reason.clone(),
            message: d.message.clone(),
            observed_generation,
            last_transition_time,
        });
    }
    out
}

/// Whether two condition lists are equal, ignoring `lastTransitionTime`.
#[must_use]
pub fn same_ignoring_time(a: &[Condition], b: &[Condition]) -> bool {
    a.len() == b.len()
        && a.iter().zip(b).all(|(x, y)| {
            x.type_ == y.type_
                && x.status == y.status
                && x.reason == y.reason
                && x.message == y.message
                && x.observed_generation == y.observed_generation
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn time(s: &str) -> Time {
        Time(s.parse().unwrap())
    }

    #[test]
    fn keeps_transition_time_when_status_unchanged_and_foreign_conditions() {
        let t0 = time("2026-01-01T00:00:00Z");
        let t1 = time("2026-02-01T00:00:00Z");
        let first = merge_conditions(
            &[],
            &[
                Cond::t("Accepted", "Accepted", "ok"),
                Cond::f("Programmed", "Pending", "wait"),
            ],
            &["Accepted", "Programmed"],
            Some(1),
            &t0,
        );
        let mut with_foreign = vec![Condition {
            type_: "example.com/Other".into(),
            status: "True".into(),
            reason: "X".into(),
            message: String::new(),
            observed_generation: Some(9),
            last_transition_time: t0.clone(),
        }];
        with_foreign.extend(first);
        let second = merge_conditions(
            &with_foreign,
            &[
                Cond::t("Accepted", "Accepted", "still ok"),
                Cond::t("Programmed", "Programmed", "done"),
            ],
            &["Accepted", "Programmed", "Conflicted"],
            Some(2),
            &t1,
        );
        assert_eq!(second[0].type_, "example.com/Other");
        assert_eq!(second[1].last_transition_time, t0, "Accepted did not flip");
        assert_eq!(second[1].observed_generation, Some(2));
        assert_eq!(second[2].last_transition_time, t1, "Programmed flipped");
        assert!(same_ignoring_time(&second, &second.clone()));
        assert!(!same_ignoring_time(&second, &with_foreign));
    }

    #[test]
    fn owned_types_not_desired_are_dropped() {
        let t = time("2026-01-01T00:00:00Z");
        let old = merge_conditions(
            &[],
            &[Cond::t("Conflicted", "HostnameConflict", "x")],
            &["Conflicted"],
            Some(1),
            &t,
        );
        let new = merge_conditions(
            &old,
            &[Cond::t("Accepted", "Accepted", "")],
            &["Accepted", "Conflicted"],
            Some(1),
            &t,
        );
        assert_eq!(new.len(), 1);
        assert_eq!(new[0].type_, "Accepted");
    }

    #[test]
    fn long_messages_are_cut_on_a_char_boundary() {
        let c = Cond::t("A", "B", &"é".repeat(5000));
        assert!(c.message.len() <= MAX_MESSAGE);
        assert!(c.message.ends_with("..."));
    }
}
