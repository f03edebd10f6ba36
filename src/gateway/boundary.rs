//! The tenancy boundary a rendered dataplane keeps (docs/security.md): what the parent
//! Gateway allowed a route, carried into the children a blueprint renders, and the two
//! checks every rendered object passes before it is applied, whatever blueprint made it.
//!
//! - A **route a route template renders** (a Gateway API route kind) attaches only to a
//!   Gateway the blueprint renders for the same parent Gateway, and serves on each child
//!   listener only hostnames the parent accepted the source route for on the listener that
//!   child listener stands for (the one whose `key` it carries as name; a child listener
//!   named after no parent listener, as a single-listener child behind a load balancer,
//!   stands for all of them): [`check_route`].
//! - A **child Gateway's listener** named after a parent listener admits no namespace that
//!   parent listener does not ([`check_child_gateway`]), so a route the parent refused
//!   cannot attach to the child directly through a wider listener.
//!
//! In: the rendered object as JSON and what the parent decided. Out: a verdict with the
//! rule broken, in words. No client, no clock, no I/O.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::GATEWAY_API_GROUP;
use super::hostnames;

/// The label the API server puts on every Namespace, holding its name: a listener that
/// admits routes from one namespace says so with a selector on it.
pub const NAMESPACE_NAME_LABEL: &str = "kubernetes.io/metadata.name";

/// Every listener of a parent Gateway: its key, port and hostname.
pub type ParentListeners = Vec<(String, i32, Option<String>)>;

/// What the parent Gateway accepted one route for, borrowed from the plan: per accepted
/// listener (by the `key` a child Gateway names it by) the intersected hostnames, empty when
/// every hostname is (a listener without a hostname and a route without hostnames); and
/// the key, port and hostname of every listener of the parent, accepted or not.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RouteAccepted<'a> {
    /// Accepted listener key and its hostnames (sorted, unique; empty: every hostname).
    pub listeners: Vec<(&'a str, &'a [String])>,
    /// Every listener of the parent.
    pub parent_listeners: &'a [(String, i32, Option<String>)],
}

impl RouteAccepted<'_> {
    /// The hostnames accepted on the listener `key`, when it accepted the route.
    fn on(&self, key: &str) -> Option<&[String]> {
        self.listeners
            .iter()
            .find(|(k, _)| *k == key)
            .map(|(_, h)| *h)
    }
    /// The port and hostname of the parent's listener `key`.
    fn parent(&self, key: &str) -> Option<(i32, Option<&str>)> {
        self.parent_listeners
            .iter()
            .find(|(k, _, _)| k == key)
            .map(|(_, port, host)| (*port, host.as_deref()))
    }
}

/// The verdict on one rendered object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Within the boundary (or not a kind the boundary speaks of).
    Within,
    /// It crosses the boundary: the rule broken, in words.
    Refused(String),
}

/// The `group` and `kind` of an object, from its `apiVersion` and `kind`.
fn group_kind(obj: &Value) -> (&str, &str) {
    let api = obj["apiVersion"].as_str().unwrap_or_default();
    let group = api.rsplit_once('/').map_or("", |(g, _)| g);
    (group, obj["kind"].as_str().unwrap_or_default())
}

/// Whether `obj` is a Gateway API route (any `*Route` kind of the Gateway API group).
#[must_use]
pub fn is_route(obj: &Value) -> bool {
    let (group, kind) = group_kind(obj);
    group == GATEWAY_API_GROUP && kind.ends_with("Route")
}

/// Whether `obj` is a Gateway API Gateway.
#[must_use]
pub fn is_gateway(obj: &Value) -> bool {
    group_kind(obj) == (GATEWAY_API_GROUP, "Gateway")
}

/// Whether the hostnames `accepted` cover `served` (`None`: every hostname).
fn covers(accepted: &[String], served: Option<&str>) -> bool {
    served.is_some_and(|s| {
        accepted
            .iter()
            .any(|a| a == s || hostnames::covered_by_wildcard(s, a))
    })
}

/// Judges a route a route template rendered (`copy`, in namespace `namespace`) against
/// what the parent accepted its source route for. `gateways` are the Gateways the
/// blueprint rendered for the same parent; a parentRef naming another Gateway (one not
/// rendered yet) is judged as if that Gateway had the parent's listeners, by key (the
/// listener its `sectionName` names, or without one a listener standing for all of them).
/// Objects that are not Gateway API routes are [`Verdict::Within`].
#[must_use]
pub fn check_route(
    copy: &Value,
    namespace: &str,
    accepted: &RouteAccepted<'_>,
    gateways: &[&Value],
) -> Verdict {
    if !is_route(copy) {
        return Verdict::Within;
    }
    let ns = copy["metadata"]["namespace"].as_str().unwrap_or(namespace);
    let names = copy["spec"]["hostnames"]
        .as_array()
        .map_or(&[][..], Vec::as_slice);
    let refs = copy["spec"]["parentRefs"]
        .as_array()
        .map_or(&[][..], Vec::as_slice);
    for (i, p) in refs.iter().enumerate() {
        let group = p["group"].as_str().unwrap_or(GATEWAY_API_GROUP);
        let kind = p["kind"].as_str().unwrap_or("Gateway");
        if group != GATEWAY_API_GROUP || kind != "Gateway" {
            return Verdict::Refused(format!(
                "parentRefs[{i}] names a {kind} ({group}): a rendered route may attach only to a Gateway"
            ));
        }
        let name = p["name"].as_str().unwrap_or_default();
        let pns = p["namespace"].as_str().unwrap_or(ns);
        let section = p["sectionName"].as_str();
        let port = p["port"].as_i64();
        let rendered = gateways.iter().find(|g| {
            g["metadata"]["name"] == name
                && g["metadata"]["namespace"].as_str().unwrap_or(ns) == pns
        });
        let selects = |l: &Listener<'_>| {
            section.is_none_or(|s| s == l.name) && port.is_none_or(|p| l.port == Some(p))
        };
        let verdict = match rendered {
            Some(g) => g["spec"]["listeners"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|l| Listener {
                    name: l["name"].as_str().unwrap_or_default(),
                    port: l["port"].as_i64(),
                    hostname: l["hostname"].as_str(),
                })
                .filter(selects)
                .try_for_each(|l| serves_within(names, &l, accepted)),
            // Not rendered (yet): as if it had the parent's listeners, the one its
            // sectionName names or, without one, one standing for them all.
            None => {
                let l = match section {
                    Some(s) => accepted.parent(s).map(|(port, hostname)| Listener {
                        name: s,
                        port: Some(i64::from(port)),
                        hostname,
                    }),
                    None => Some(Listener {
                        name: "",
                        port,
                        hostname: None,
                    }),
                };
                l.filter(selects)
                    .map_or(Ok(()), |l| serves_within(names, &l, accepted))
            }
        };
        if let Err(why) = verdict {
            let gateway = if rendered.is_some() {
                format!("Gateway {pns}/{name}")
            } else {
                format!(
                    "Gateway {pns}/{name} (not rendered for this Gateway: judged as if it had its listeners)"
                )
            };
            return Verdict::Refused(format!(
                "parentRefs[{i}] {}",
                why.replace(GATEWAY, &gateway)
            ));
        }
    }
    Verdict::Within
}

/// A child Gateway's listener, as the route checks read it.
struct Listener<'a> {
    name: &'a str,
    port: Option<i64>,
    hostname: Option<&'a str>,
}

/// Where a reason of [`serves_within`] names the Gateway the listener belongs to.
const GATEWAY: &str = "{gateway}";

/// Whether a route listing `names` (none: every hostname), attached to the listener `l`,
/// serves there only what `accepted` allows; else why not, in words (naming the listener's
/// Gateway as [`GATEWAY`]).
fn serves_within(
    names: &[Value],
    l: &Listener<'_>,
    accepted: &RouteAccepted<'_>,
) -> Result<(), String> {
    let gateway = GATEWAY;
    let (lname, lhost) = (l.name, l.hostname);
    // The hostnames the parent accepted the route for on what this listener stands for:
    // the parent's listener of its name, else (named after none) every one of them. `None`:
    // every hostname.
    let every: Vec<String>;
    let allowed: Option<&[String]> = match accepted.on(lname) {
        Some(h) => (!h.is_empty()).then_some(h),
        None if accepted.parent(lname).is_some() => {
            return Err(format!(
                "attaches to listener {lname:?} of {gateway}, which stands for the parent's listener {lname:?}: that listener did not accept the route"
            ));
        }
        None if accepted.listeners.iter().any(|(_, h)| h.is_empty()) => None,
        None => {
            every = accepted
                .listeners
                .iter()
                .flat_map(|(_, h)| h.iter().cloned())
                .collect();
            Some(&every)
        }
    };
    let Some(allowed) = allowed else {
        return Ok(());
    };
    // What the listener serves of the route: its own hostname when the route names none,
    // else each of the route's names that meets it.
    let bad = if names.is_empty() {
        (!covers(allowed, lhost)).then_some(lhost)
    } else {
        names
            .iter()
            .filter_map(Value::as_str)
            .filter_map(|h| hostnames::intersect(lhost, h))
            .find(|s| !covers(allowed, Some(s)))
            .map(Some)
    };
    match bad {
        None => Ok(()),
        Some(bad) => Err(format!(
            "serves {} on listener {lname:?} of {gateway}, which the parent Gateway did not accept the route for there (accepted: {})",
            bad.map_or_else(|| "every hostname".to_owned(), |b| format!("{b:?}")),
            if allowed.is_empty() {
                "nothing".to_owned()
            } else {
                allowed.join(", ")
            }
        )),
    }
}

/// A listener's `allowedRoutes.namespaces` as a child Gateway in the parent's namespace
/// `gateway_ns` must say it to admit the same namespaces: `All`; `Same` for the Gateway's
/// own listeners; a `Selector` on the namespace's name for a `Same` listener of a
/// ListenerSet in another namespace (`home`); a `Selector` as written.
#[must_use]
pub fn child_namespaces(written: Option<&Value>, home: &str, gateway_ns: &str) -> Value {
    let from = written.and_then(|w| w["from"].as_str()).unwrap_or("Same");
    match from {
        "All" => json!({"from": "All"}),
        "Selector" => json!({
            "from": "Selector",
            "selector": written.map_or(Value::Null, |w| w["selector"].clone()),
        }),
        _ if home == gateway_ns => json!({"from": "Same"}),
        _ => json!({
            "from": "Selector",
            "selector": {"matchLabels": {NAMESPACE_NAME_LABEL: home}},
        }),
    }
}

/// `namespaces` of a listener in namespace `ns` in one form: `Same` as the selector on
/// the namespace's name it means; a selector with empty parts dropped.
fn normalized(namespaces: &Value, ns: &str) -> Value {
    match namespaces["from"].as_str().unwrap_or("Same") {
        "All" => json!({"from": "All"}),
        "Selector" => {
            let sel = &namespaces["selector"];
            let labels = sel["matchLabels"]
                .as_object()
                .filter(|m| !m.is_empty())
                .cloned();
            let exprs = sel["matchExpressions"]
                .as_array()
                .filter(|m| !m.is_empty())
                .cloned();
            json!({"from": "Selector", "matchLabels": labels, "matchExpressions": exprs})
        }
        _ => {
            json!({"from": "Selector", "matchLabels": {NAMESPACE_NAME_LABEL: ns}, "matchExpressions": null})
        }
    }
}

/// Judges a Gateway a Gateway template rendered (`child`, in the parent's namespace
/// `gateway_ns`): each listener named after a parent listener (`parents`: key -> the
/// namespaces it admits, as [`child_namespaces`] says them) admits no more namespaces
/// than it. Other objects are [`Verdict::Within`].
#[must_use]
pub fn check_child_gateway(
    child: &Value,
    gateway_ns: &str,
    parents: &BTreeMap<&str, &Value>,
) -> Verdict {
    if !is_gateway(child) {
        return Verdict::Within;
    }
    let ns = child["metadata"]["namespace"]
        .as_str()
        .unwrap_or(gateway_ns);
    let listeners = child["spec"]["listeners"]
        .as_array()
        .map_or(&[][..], Vec::as_slice);
    for l in listeners {
        let name = l["name"].as_str().unwrap_or_default();
        let Some(parent) = parents.get(name) else {
            continue;
        };
        if parent["from"] == "All" {
            continue;
        }
        let written = &l["allowedRoutes"]["namespaces"];
        if normalized(written, ns) != normalized(parent, gateway_ns) {
            return Verdict::Refused(format!(
                "listener {name:?} of Gateway {ns}/{} admits routes from {}, more than the parent's listener {name:?}, which admits them from {}: a route the parent refused could attach to it directly",
                child["metadata"]["name"].as_str().unwrap_or_default(),
                describe(written),
                describe(parent),
            ));
        }
    }
    Verdict::Within
}

/// `namespaces` of a listener in words.
fn describe(namespaces: &Value) -> String {
    match namespaces["from"].as_str().unwrap_or("Same") {
        "All" => "every namespace".to_owned(),
        "Selector" => format!("the namespaces selected by {}", namespaces["selector"]),
        _ => "its own namespace".to_owned(),
    }
}

#[cfg(test)]
mod tests;
