//! Reading conditions off the objects the benchmarks watch, shared by the scale and fleet
//! benchmarks.

use serde_json::Value;

/// The condition of type `t` among `conds`.
pub fn cond<'a>(conds: &'a Value, t: &str) -> Option<&'a Value> {
    conds.as_array()?.iter().find(|c| c["type"] == t)
}

/// Whether our controller Accepted the route (its entry in `status.parents`).
pub fn route_accepted(r: &Value) -> bool {
    r["status"]["parents"].as_array().is_some_and(|ps| {
        ps.iter().any(|p| {
            p["controllerName"] == "gatewright.dev/gateway-controller"
                && cond(&p["conditions"], "Accepted").is_some_and(|c| c["status"] == "True")
        })
    })
}
