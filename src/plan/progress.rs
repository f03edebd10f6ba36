//! Which Gateway status changes are not transitions. While a Gateway's children come up
//! one by one and its routes attach, its status changes at each step: the text of what it
//! waits for, its reason (children pending, then no address yet), its address once the
//! data plane has one, a replacement's progress, the count of attached routes. Each is a
//! status write, four or five per Gateway on a cold start, where the transitions are what
//! anyone waits for (Argo CD, Flux and kstatus read `Programmed`; Flagger reads the
//! routes' own status). [`only_progress`] tells the other changes apart, so that the writer
//! may gather them: a transition is written at once, the rest at most once per few
//! seconds, always with the latest.

use serde_json::Value;

/// A condition's status, reason and observed generation.
fn key_of(status: &Value, type_: &str) -> Option<(String, String, Option<i64>)> {
    let c = status["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)?;
    let s = |k: &str| c[k].as_str().unwrap_or_default().to_owned();
    Some((s("status"), s("reason"), c["observedGeneration"].as_i64()))
}

/// Whether going from `current` to `desired` (Gateway statuses, as JSON) is no transition:
/// `Programmed` keeps its status (True or False) for the same generation, and `Accepted`
/// its status, reason and generation. What else changes (messages, Programmed's reason
/// while it stays False, addresses, other conditions, listeners, attached routes) is
/// progress or detail. A first status (no `Programmed` yet) is a transition.
#[must_use]
pub fn only_progress(current: &Value, desired: &Value) -> bool {
    let (before, after) = (key_of(current, "Programmed"), key_of(desired, "Programmed"));
    matches!((&before, &after), (Some(b), Some(a)) if b.0 == a.0 && b.2 == a.2)
        && key_of(current, "Accepted") == key_of(desired, "Accepted")
}

/// The paths where `desired` differs from `current` (JSON, times stripped or not), for
/// logs: `conditions[Programmed].message`, `listeners[https].attachedRoutes`. Items of a
/// list are named by their `type` or `name` when they have one, else by index.
#[must_use]
pub fn changed_paths(current: &Value, desired: &Value) -> Vec<String> {
    let mut out = Vec::new();
    diff(current, desired, String::new(), &mut out);
    out
}

fn diff(a: &Value, b: &Value, path: String, out: &mut Vec<String>) {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let keys: std::collections::BTreeSet<&String> = x.keys().chain(y.keys()).collect();
            for k in keys {
                if k == "lastTransitionTime" {
                    continue;
                }
                let p = if path.is_empty() {
                    k.clone()
                } else {
                    format!("{path}.{k}")
                };
                diff(
                    x.get(k).unwrap_or(&Value::Null),
                    y.get(k).unwrap_or(&Value::Null),
                    p,
                    out,
                );
            }
        }
        (Value::Array(x), Value::Array(y)) => {
            let name = |v: &Value, i: usize| {
                v["type"]
                    .as_str()
                    .or_else(|| v["name"].as_str())
                    .map_or_else(|| i.to_string(), str::to_owned)
            };
            let named: Vec<String> = y.iter().enumerate().map(|(i, v)| name(v, i)).collect();
            for (i, v) in y.iter().enumerate() {
                let before = x
                    .iter()
                    .enumerate()
                    .find(|(j, w)| name(w, *j) == named[i])
                    .map_or(&Value::Null, |(_, w)| w);
                diff(before, v, format!("{path}[{}]", named[i]), out);
            }
            for (j, w) in x.iter().enumerate() {
                if !named.contains(&name(w, j)) {
                    out.push(format!("{path}[{}] (removed)", name(w, j)));
                }
            }
        }
        _ if a != b => out.push(path),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn status(programmed: &str, reason: &str, message: &str, attached: i64) -> Value {
        json!({
            "conditions": [
                {"type": "Accepted", "status": "True", "reason": "Accepted", "message": "", "observedGeneration": 1},
                {"type": "Programmed", "status": programmed, "reason": reason, "message": message, "observedGeneration": 1},
            ],
            "listeners": [{"name": "http", "attachedRoutes": attached, "supportedKinds": [{"kind": "HTTPRoute"}],
                           "conditions": [{"type": "Programmed", "status": programmed, "reason": reason, "message": message}]}],
        })
    }

    #[test]
    fn what_it_waits_for_and_routes_attaching_are_progress() {
        let a = status(
            "False",
            "Pending",
            "waiting for Certificate a, DNSEndpoint b",
            0,
        );
        let mut b = status("False", "Pending", "waiting for DNSEndpoint b", 3);
        assert!(only_progress(&a, &b));
        b["addresses"] = json!([{"type": "IPAddress", "value": "192.0.2.1"}]);
        if let Some(c) = b["conditions"].as_array_mut() {
            c.push(
                json!({"type": "gatewright.dev/Rollout", "status": "True", "reason": "Complete"}),
            );
        }
        assert!(
            only_progress(&a, &b),
            "an address and a replacement's step, still not Programmed"
        );
    }

    #[test]
    fn transitions_are_not() {
        let a = status("False", "Pending", "waiting", 0);
        assert!(
            !only_progress(&a, &status("True", "Programmed", "", 0)),
            "Programmed"
        );
        assert!(
            only_progress(
                &a,
                &status("False", "AddressNotAssigned", "no address yet", 0)
            ),
            "Programmed's reason moving on while it stays False is progress"
        );
        let mut new_generation = a.clone();
        new_generation["conditions"][1]["observedGeneration"] = json!(2);
        assert!(!only_progress(&a, &new_generation), "a new spec");
        let mut accepted = a.clone();
        accepted["conditions"][0]["status"] = json!("False");
        assert!(!only_progress(&a, &accepted), "Accepted");
        assert!(!only_progress(&json!({}), &a), "the first status");
        let programmed = status("True", "Programmed", "", 1);
        assert!(
            only_progress(&programmed, &status("True", "Programmed", "", 2)),
            "a Programmed Gateway's routes attaching"
        );
        assert!(
            !only_progress(
                &programmed,
                &status("False", "Pending", "a child is not ready", 1)
            ),
            "Programmed lost"
        );
    }

    #[test]
    fn changed_paths_name_conditions_and_listeners() {
        let a = status("False", "Pending", "waiting for Certificate a", 0);
        let b = status("False", "Pending", "waiting for DNSEndpoint b", 3);
        assert_eq!(
            changed_paths(&a, &b),
            vec![
                "conditions[Programmed].message",
                "listeners[http].attachedRoutes",
                "listeners[http].conditions[Programmed].message",
            ]
        );
        assert!(changed_paths(&a, &a).is_empty());
    }
}
