//! Placement (fleet mode): a Gateway template with `placement` renders once per member
//! cluster its selector picks, with the `cluster` variable set to that member, and each of
//! its objects carries the member's name (the `gatewright.dev/cluster` annotation, part of
//! the object's identity, [`crate::snapshot::ObjectKey::cluster`]). A member selected but
//! not served gets nothing rendered, so what reads `resources.<template>` (a DNS record
//! listing every member's address) stops listing it; the Gateway's
//! [`CONDITION_PLACED`] condition names it.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::Value;

use crate::api::{GatewayClassBlueprintSpec, TemplatePlacement};
use crate::render::labels;
use crate::snapshot::fleet::FleetMember;

/// The Gateway condition that says where placed templates went: `True` when every
/// member selected is served, `False` (`MembersUnavailable`, or `PlacementNotApplied`)
/// naming each one that is not, and why.
pub const CONDITION_PLACED: &str = "gatewright.dev/Placed";

/// Whether a member's labels match a placement's selector.
#[must_use]
pub fn selects(p: &TemplatePlacement, m: &FleetMember) -> bool {
    use crate::gateway::LabelSelectorLike;
    p.clusters.matches(&m.labels)
}

/// The members a placed template renders for: selected and served, by name. None where
/// placement does not render (`places` false: a controller not in fleet mode).
#[must_use]
pub fn targets<'a>(
    p: &TemplatePlacement,
    fleet: &'a BTreeMap<String, FleetMember>,
    places: bool,
) -> Vec<&'a FleetMember> {
    if !places {
        return Vec::new();
    }
    fleet
        .values()
        .filter(|m| m.unserved.is_none() && selects(p, m))
        .collect()
}

/// The `cluster` variable of templates that are not placed: the parent's own cluster,
/// its fields empty.
#[must_use]
pub fn own_cluster() -> &'static Value {
    static OWN: std::sync::OnceLock<Value> = std::sync::OnceLock::new();
    OWN.get_or_init(
        || serde_json::json!({"name": "", "displayName": "", "labels": {}, "properties": {}}),
    )
}

/// The `cluster` variable of a placed template's render: the member it renders for.
#[must_use]
pub fn cluster_value(member: &FleetMember) -> minijinja::Value {
    minijinja::Value::from(minijinja::value::Serde(member))
}

/// Whether objects of `cluster` (a member's name; empty for the parent's own cluster) may
/// be written and deleted now: the one rule that teardown, prune, the sweep of what was
/// left behind and the writers follow. `Err` says why not: the member is not served now
/// (unreachable, unhealthy), or it is no longer in the fleet.
///
/// # Errors
/// The member is not served, with why.
pub fn served(cluster: &str, fleet: &BTreeMap<String, FleetMember>) -> Result<(), String> {
    if cluster.is_empty() {
        return Ok(());
    }
    match fleet.get(cluster) {
        Some(m) => m.unserved.clone().map_or(Ok(()), Err),
        None => Err(NOT_IN_FLEET.to_owned()),
    }
}

/// Whether this replica writes the objects of a cluster now, beside [`served`] (whether
/// anyone may): `member` names the member (`None`: the hub, or the one cluster served);
/// `leads`: this replica holds the leader's Lease (always, without leader election);
/// `holds`: it holds the member's Lease (always, with one replica serving every member).
/// With the members shared among replicas, each one plans every Gateway that places
/// templates from the same snapshot, so they all render the same objects; the hub's own
/// objects are the leader's to write, a member's are the holder of its Lease's.
///
/// # Errors
/// Another replica writes there, with which.
pub fn writes_here(member: Option<&str>, leads: bool, holds: bool) -> Result<(), String> {
    match member {
        None if leads => Ok(()),
        None => Err("the hub's own objects are written by the leader (the replica holding the leader's Lease)".to_owned()),
        Some(_) if holds => Ok(()),
        Some(m) => Err(format!(
            "member cluster {m} is written by the replica holding its Lease"
        )),
    }
}

/// Why a member that left the fleet is not served.
pub const NOT_IN_FLEET: &str = "it is no longer in the fleet";

/// Whether a child can be deleted where it lives ([`served`]). What is placed in a member
/// not served now (unreachable, unhealthy, gone from the fleet) is left there: it cannot
/// be deleted from here, and it is found again when the member is back.
#[must_use]
pub fn deletable(key: &crate::snapshot::ObjectKey, fleet: &BTreeMap<String, FleetMember>) -> bool {
    served(&key.cluster, fleet).is_ok()
}

/// `resources` as a render for `member` scoped to it reads it: each template's objects in
/// the parent's cluster and in `member`, none placed in another member.
#[must_use]
pub fn resources_of(
    resources: &BTreeMap<String, Vec<std::sync::Arc<Value>>>,
    member: &str,
) -> minijinja::Value {
    let scoped: BTreeMap<String, Vec<std::sync::Arc<Value>>> = resources
        .iter()
        .map(|(name, objects)| {
            let here = objects
                .iter()
                .filter(|o| {
                    o["metadata"]["annotations"][labels::CLUSTER]
                        .as_str()
                        .is_none_or(|c| c.is_empty() || c == member)
                })
                .cloned()
                .collect();
            (name.clone(), here)
        })
        .collect();
    crate::render::view::lists(&scoped)
}

/// Marks a rendered object as going to `member`.
pub fn place(obj: &mut Value, member: &FleetMember) {
    if !obj["metadata"]["annotations"].is_object() {
        obj["metadata"]["annotations"] = serde_json::json!({});
    }
    obj["metadata"]["annotations"][labels::CLUSTER] = Value::String(member.name.clone());
}

/// Whether `address` (an `IPAddress` or `Hostname` value of a status' `addresses`) is within
/// `allowed`: the entries of a member's `gatewright.dev/addresses` annotation, each an IP
/// address, a CIDR range, a hostname or a `*.`-wildcard hostname (which covers the names
/// under it, not itself).
#[must_use]
pub fn address_allowed(address: &str, allowed: &[String]) -> bool {
    use std::net::IpAddr;
    let ip: Option<IpAddr> = address.parse().ok();
    allowed.iter().any(|entry| {
        if let Some((net, bits)) = entry.split_once('/') {
            let (Some(ip), Ok(net), Ok(bits)) = (ip, net.parse::<IpAddr>(), bits.parse::<u32>())
            else {
                return false;
            };
            return match (ip, net) {
                (IpAddr::V4(a), IpAddr::V4(n)) if bits <= 32 => {
                    let mask = u32::MAX.checked_shl(32 - bits).unwrap_or(0);
                    u32::from(a) & mask == u32::from(n) & mask
                }
                (IpAddr::V6(a), IpAddr::V6(n)) if bits <= 128 => {
                    let mask = u128::MAX.checked_shl(128 - bits).unwrap_or(0);
                    u128::from(a) & mask == u128::from(n) & mask
                }
                _ => false,
            };
        }
        match (ip, entry.parse::<IpAddr>()) {
            (Some(a), Ok(e)) => a == e,
            (Some(_), Err(_)) | (None, Ok(_)) => false,
            (None, Err(_)) => {
                let (a, e) = (address.to_ascii_lowercase(), entry.to_ascii_lowercase());
                a == e || crate::gateway::hostnames::covered_by_wildcard(&a, &e)
            }
        }
    })
}

/// `live`, an object read from a member cluster (a placed object: its
/// `gatewright.dev/cluster` annotation names the member), with only the `status.addresses`
/// its member's ClusterProfile allows ([`address_allowed`]; none when it declares none);
/// each address left out is added to `refused` as `<member>: <address>`. Any other object
/// is returned as it is.
pub fn within_member_addresses(
    live: &Arc<Value>,
    fleet: &BTreeMap<String, FleetMember>,
    refused: &mut Vec<String>,
) -> Arc<Value> {
    let member = live["metadata"]["annotations"][labels::CLUSTER]
        .as_str()
        .unwrap_or_default();
    let Some(addresses) = live["status"]["addresses"].as_array() else {
        return Arc::clone(live);
    };
    if member.is_empty() || addresses.is_empty() {
        return Arc::clone(live);
    }
    let allowed = fleet
        .get(member)
        .and_then(|m| m.addresses.as_deref())
        .unwrap_or_default();
    let (kept, left): (Vec<&Value>, Vec<&Value>) = addresses.iter().partition(|a| {
        a["value"]
            .as_str()
            .is_some_and(|v| address_allowed(v, allowed))
    });
    if left.is_empty() {
        return Arc::clone(live);
    }
    refused.extend(
        left.iter()
            .map(|a| format!("{member}: {}", a["value"].as_str().unwrap_or("?"))),
    );
    let mut filtered = (**live).clone();
    filtered["status"]["addresses"] = Value::Array(kept.into_iter().cloned().collect());
    Arc::new(filtered)
}

/// Where the placed templates of a blueprint go, for the Gateway's [`CONDITION_PLACED`]
/// condition. `None`: the blueprint places nothing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlacementReport {
    /// Members some placed template renders for.
    pub placed: Vec<String>,
    /// Members selected but not served, with why.
    pub unserved: Vec<(String, String)>,
    /// Placement does not render here (a controller not in fleet mode).
    pub not_applied: bool,
    /// Addresses members reported outside what their ClusterProfiles allow, left out of
    /// what templates read (`<member>: <address>`, sorted).
    pub refused_addresses: Vec<String>,
}

impl PlacementReport {
    /// The report for `spec`'s placed templates over `fleet`.
    #[must_use]
    pub fn of(
        spec: &GatewayClassBlueprintSpec,
        fleet: &BTreeMap<String, FleetMember>,
        places: bool,
    ) -> Option<Self> {
        let placements: Vec<&TemplatePlacement> = spec
            .gateway_templates
            .iter()
            .chain(&spec.route_templates)
            .filter_map(|t| t.placement.as_ref())
            .collect();
        if placements.is_empty() {
            return None;
        }
        let selected: Vec<&FleetMember> = fleet
            .values()
            .filter(|m| placements.iter().any(|p| selects(p, m)))
            .collect();
        Some(Self {
            placed: selected
                .iter()
                .filter(|m| m.unserved.is_none() && places)
                .map(|m| m.name.clone())
                .collect(),
            unserved: selected
                .iter()
                .filter_map(|m| Some((m.name.clone(), m.unserved.clone()?)))
                .collect(),
            not_applied: !places,
            refused_addresses: Vec::new(),
        })
    }

    /// The condition's status, reason and message.
    #[must_use]
    pub fn condition(&self) -> (bool, &'static str, String) {
        if self.not_applied {
            return (
                false,
                "PlacementNotApplied",
                "this blueprint places templates in member clusters, which takes fleet mode (gatewright run --fleet); this controller serves one cluster, so nothing of them is written (preview them with gatewright render and ClusterProfiles among its files)".to_owned(),
            );
        }
        let placed = if self.placed.is_empty() {
            "no member cluster".to_owned()
        } else {
            self.placed.join(", ")
        };
        if !self.refused_addresses.is_empty() {
            return (
                false,
                "AddressesRefused",
                format!(
                    "placed in {placed}; addresses left out of what the hub renders, outside what the members' ClusterProfiles allow (annotation {}): {}",
                    crate::fleet::profile::ANNOTATION_ADDRESSES,
                    self.refused_addresses.join("; ")
                ),
            );
        }
        if self.unserved.is_empty() {
            (true, "Placed", format!("placed in {placed}"))
        } else {
            let missing: Vec<String> = self
                .unserved
                .iter()
                .map(|(m, why)| format!("{m} ({why})"))
                .collect();
            (
                false,
                "MembersUnavailable",
                format!(
                    "placed in {placed}; selected but not served, nothing placed there: {}",
                    missing.join("; ")
                ),
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};
    use serde_json::json;

    #[test]
    fn addresses_within_what_a_member_declares() {
        let allowed: Vec<String> = [
            "198.51.100.0/24",
            "2001:db8::/32",
            "203.0.113.7",
            "lb.example.com",
            "*.elb.example.net",
        ]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
        for (address, ok) in [
            ("198.51.100.9", true),
            ("198.51.101.9", false),
            ("2001:db8::1", true),
            ("2001:db9::1", false),
            ("203.0.113.7", true),
            ("203.0.113.8", false),
            ("lb.example.com", true),
            ("LB.Example.com", true),
            ("evil.example.com", false),
            ("a.elb.example.net", true),
            ("elb.example.net", false),
            ("a.elb.example.net.evil.com", false),
            ("", false),
        ] {
            assert_eq!(address_allowed(address, &allowed), ok, "{address}");
        }
        assert!(
            !address_allowed("198.51.100.9", &[]),
            "nothing declared: nothing allowed"
        );
        assert!(address_allowed("10.1.2.3", &["0.0.0.0/0".to_owned()]));
        assert!(
            !address_allowed("10.1.2.3", &["10.0.0.0/33".to_owned()]),
            "a bad prefix allows nothing"
        );
    }

    #[test]
    fn a_member_object_keeps_only_the_addresses_its_profile_allows() {
        let mut fleet = BTreeMap::new();
        let mut m = member("fleet/a", "eu", None);
        m.addresses = Some(vec!["198.51.100.0/24".to_owned()]);
        fleet.insert(m.name.clone(), m);
        fleet.insert("fleet/b".to_owned(), member("fleet/b", "us", None));
        let obj = |cluster: &str| {
            Arc::new(json!({
                "metadata": {"name": "gw", "annotations": {labels::CLUSTER: cluster}},
                "status": {"addresses": [
                    {"type": "IPAddress", "value": "198.51.100.4"},
                    {"type": "IPAddress", "value": "192.0.2.66"},
                ]},
            }))
        };
        let mut refused = Vec::new();
        let a = within_member_addresses(&obj("fleet/a"), &fleet, &mut refused);
        assert_eq!(
            a["status"]["addresses"],
            json!([{"type": "IPAddress", "value": "198.51.100.4"}])
        );
        assert_eq!(refused, ["fleet/a: 192.0.2.66"]);
        // A member that declares nothing brings nothing; nor does one gone from the fleet.
        let b = within_member_addresses(&obj("fleet/b"), &fleet, &mut refused);
        assert_eq!(b["status"]["addresses"], json!([]));
        let c = within_member_addresses(&obj("fleet/c"), &fleet, &mut refused);
        assert_eq!(c["status"]["addresses"], json!([]));
        assert_eq!(refused.len(), 5);
        // The hub's own objects are not judged, and an object within keeps its Arc.
        let own = obj("");
        assert!(Arc::ptr_eq(
            &own,
            &within_member_addresses(&own, &fleet, &mut refused)
        ));
        let inside = Arc::new(
            json!({"metadata": {"annotations": {labels::CLUSTER: "fleet/a"}}, "status": {"addresses": [{"value": "198.51.100.1"}]}}),
        );
        assert!(Arc::ptr_eq(
            &inside,
            &within_member_addresses(&inside, &fleet, &mut refused)
        ));
        assert_eq!(refused.len(), 5);
        let report = PlacementReport {
            placed: vec!["fleet/a".into()],
            unserved: Vec::new(),
            not_applied: false,
            refused_addresses: vec!["fleet/a: 192.0.2.66".into()],
        };
        let (ok, reason, message) = report.condition();
        assert!(!ok);
        assert_eq!(reason, "AddressesRefused");
        assert!(
            message.contains("fleet/a: 192.0.2.66") && message.contains("gatewright.dev/addresses"),
            "{message}"
        );
    }

    fn member(name: &str, region: &str, unserved: Option<&str>) -> FleetMember {
        FleetMember {
            name: name.to_owned(),
            display_name: name.to_owned(),
            labels: BTreeMap::from([("region".to_owned(), region.to_owned())]),
            properties: BTreeMap::new(),
            addresses: None,
            unserved: unserved.map(str::to_owned),
        }
    }

    fn fleet(ms: Vec<FleetMember>) -> BTreeMap<String, FleetMember> {
        ms.into_iter().map(|m| (m.name.clone(), m)).collect()
    }

    fn in_regions(regions: &[&str]) -> TemplatePlacement {
        TemplatePlacement {
            resources: crate::api::ResourcesScope::All,
            clusters: LabelSelector {
                match_expressions: Some(vec![LabelSelectorRequirement {
                    key: "region".into(),
                    operator: "In".into(),
                    values: Some(regions.iter().map(|r| (*r).to_owned()).collect()),
                }]),
                match_labels: None,
            },
        }
    }

    #[test]
    fn one_rule_says_whether_a_member_is_served_and_what_may_be_deleted_there() {
        let f = fleet(vec![
            member("fleet/a", "eu", None),
            member("fleet/d", "eu", Some("ControlPlaneHealthy is False")),
        ]);
        assert_eq!(served("", &f), Ok(()), "the parent's own cluster");
        assert_eq!(served("fleet/a", &f), Ok(()));
        assert_eq!(
            served("fleet/d", &f),
            Err("ControlPlaneHealthy is False".to_owned())
        );
        // A member missing from the fleet is not served either (it was counted
        // deletable, and its prune then failed where it was to be written).
        assert_eq!(served("fleet/gone", &f), Err(NOT_IN_FLEET.to_owned()));
        let key = |cluster: &str| crate::snapshot::ObjectKey {
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
            namespace: "ns".into(),
            name: "c".into(),
            cluster: cluster.to_owned(),
        };
        assert!(deletable(&key(""), &f));
        assert!(deletable(&key("fleet/a"), &f));
        assert!(!deletable(&key("fleet/d"), &f));
        assert!(!deletable(&key("fleet/gone"), &f));
    }

    #[test]
    fn resources_scoped_to_a_member_leave_the_other_members_out() {
        let placed =
            |c: &str| json!({"metadata": {"name": "g", "annotations": {labels::CLUSTER: c}}});
        let resources = BTreeMap::from([
            (
                "gateway".to_owned(),
                vec![
                    std::sync::Arc::new(placed("fleet/eu-1")),
                    std::sync::Arc::new(placed("fleet/us-1")),
                ],
            ),
            (
                "hub".to_owned(),
                vec![std::sync::Arc::new(json!({"metadata": {"name": "h"}}))],
            ),
        ]);
        let v = serde_json::to_value(resources_of(&resources, "fleet/eu-1")).unwrap();
        assert_eq!(v["gateway"].as_array().unwrap().len(), 1);
        assert_eq!(
            v["gateway"][0]["metadata"]["annotations"][labels::CLUSTER],
            "fleet/eu-1"
        );
        assert_eq!(
            v["hub"].as_array().unwrap().len(),
            1,
            "the parent's cluster stays"
        );
    }

    #[test]
    fn the_hub_is_the_leaders_to_write_a_member_its_lease_holders() {
        assert!(writes_here(None, true, false).is_ok());
        assert!(
            writes_here(None, false, true)
                .unwrap_err()
                .contains("leader")
        );
        assert!(writes_here(Some("fleet/east"), false, true).is_ok());
        let why = writes_here(Some("fleet/east"), true, false).unwrap_err();
        assert!(why.contains("fleet/east") && why.contains("Lease"), "{why}");
    }

    #[test]
    fn targets_are_the_selected_served_members_by_name() {
        let f = fleet(vec![
            member("fleet/b", "eu", None),
            member("fleet/a", "eu", None),
            member("fleet/c", "us", None),
            member("fleet/d", "eu", Some("ControlPlaneHealthy is False")),
        ]);
        let names: Vec<&str> = targets(&in_regions(&["eu"]), &f, true)
            .iter()
            .map(|m| m.name.as_str())
            .collect();
        assert_eq!(names, ["fleet/a", "fleet/b"]);
        assert!(targets(&in_regions(&["eu"]), &f, false).is_empty());
        // An empty selector selects every member.
        assert_eq!(targets(&TemplatePlacement::default(), &f, true).len(), 3);
    }

    #[test]
    fn the_report_names_members_selected_but_not_served() {
        let mut spec = GatewayClassBlueprintSpec::default();
        assert!(PlacementReport::of(&spec, &BTreeMap::new(), true).is_none());
        spec.gateway_templates.push(crate::api::TemplateEntry {
            name: "gw".into(),
            placement: Some(in_regions(&["eu"])),
            ..Default::default()
        });
        let f = fleet(vec![
            member("fleet/a", "eu", None),
            member("fleet/d", "eu", Some("ControlPlaneHealthy is False")),
            member("fleet/u", "us", Some("unreachable")),
        ]);
        let r = PlacementReport::of(&spec, &f, true).unwrap();
        assert_eq!(r.placed, ["fleet/a"]);
        assert_eq!(
            r.unserved,
            [(
                "fleet/d".to_owned(),
                "ControlPlaneHealthy is False".to_owned()
            )]
        );
        let (ok, reason, message) = r.condition();
        assert!(!ok);
        assert_eq!(reason, "MembersUnavailable");
        assert!(
            message.contains("fleet/d (ControlPlaneHealthy is False)"),
            "{message}"
        );
        assert!(!message.contains("fleet/u"), "{message}");
        let healthy = fleet(vec![member("fleet/a", "eu", None)]);
        let (ok, reason, _) = PlacementReport::of(&spec, &healthy, true)
            .unwrap()
            .condition();
        assert!(ok);
        assert_eq!(reason, "Placed");
        let (ok, reason, _) = PlacementReport::of(&spec, &healthy, false)
            .unwrap()
            .condition();
        assert!(!ok);
        assert_eq!(reason, "PlacementNotApplied");
    }

    #[test]
    fn a_placed_object_names_its_member() {
        let mut obj = serde_json::json!({"metadata": {"name": "x"}});
        place(&mut obj, &member("fleet/a", "eu", None));
        assert_eq!(
            crate::snapshot::ObjectKey::of(&obj).cluster,
            "fleet/a".to_owned()
        );
        let v = cluster_value(&member("fleet/a", "eu", None));
        assert_eq!(
            v.get_attr("labels")
                .unwrap()
                .get_attr("region")
                .unwrap()
                .as_str(),
            Some("eu")
        );
        assert_eq!(own_cluster()["name"].as_str(), Some(""));
    }
}
