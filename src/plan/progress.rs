//! Which Gateway status changes only report progress: a Gateway not yet Programmed says
//! what it waits for, and while its children come up one by one that changes at each step
//! (the text of what it waits for, its address once the data plane has one, a
//! replacement's progress, its routes' count as they attach). Each such change is a status
//! write, four or five per Gateway on a cold start, where one transition is what anyone
//! waits for. [`only_progress`] tells those changes apart from transitions (Programmed
//! changing status, Accepted changing status or reason, a new generation), so that the
//! writer may gather them: a transition is written at once, progress at most once per few
//! seconds.

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

/// Whether going from `current` to `desired` (Gateway statuses, as JSON) only reports the
/// progress of a Gateway that is not Programmed before and after: `Programmed` stays
/// False for the same generation (its reason may move on: children pending, then no
/// address yet) and `Accepted` keeps its status, reason and generation; what else changes
/// (messages, addresses, other conditions, listeners, attached routes) is what it waits
/// for, in more detail.
#[must_use]
pub fn only_progress(current: &Value, desired: &Value) -> bool {
    let (before, after) = (key_of(current, "Programmed"), key_of(desired, "Programmed"));
    matches!((&before, &after), (Some(b), Some(a)) if b.0 == "False" && a.0 == "False" && b.2 == a.2)
        && key_of(current, "Accepted") == key_of(desired, "Accepted")
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
            only_progress(&a, &status("False", "AddressNotAssigned", "no address yet", 0)),
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
            !only_progress(&programmed, &status("True", "Programmed", "", 2)),
            "a Programmed Gateway's routes"
        );
    }
}
