//! Unit tests of `plan_gateway`, `plan_route` and `plan` on small worlds built in code:
//! what is rendered, for which parent, and every status rule (table tests).
//!
//! One file per topic; the worlds they plan are built here.

mod children;
mod hostnames;
mod narrowing;
mod renamed;
mod render_keys;
mod route_kinds;
mod route_parents;
mod status;

use gateway_api::apis::standard::gatewayclasses::GatewayClass;
use gateway_api::apis::standard::gateways::Gateway;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde_json::{Value, json};

use super::gateway::{OutOfScope, in_scope};
use super::status::{next_route_parents, same_parent};
use super::{plan, plan_gateway, plan_route};
use crate::api::GatewayClassBlueprint;
use crate::gateway::conditions::{Cond, reasons, types};
use crate::gateway::{CONTROLLER_NAME, ParentAttachment};
use crate::render::labels;
use crate::snapshot::{Key, RouteKey, Snapshot};

const GW_TEMPLATE: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ gateway.metadata.name ~ \"-cm\" }}\ndata:\n  hosts: {{ hostnames.union | join(\",\") }}\n";
const READER: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ gateway.metadata.name ~ \"-reader\" }}\ndata:\n  from: {{ (resources.cm | first).metadata.name }}\n";
const ROUTE_TEMPLATE: &str =
    "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ route.metadata.name ~ \"-copy\" }}\n";

/// A world with class `c` (ours) using blueprint `bp`.
struct World {
    snap: Snapshot,
}

impl World {
    fn new() -> Self {
        let mut snap = Snapshot::new("sys");
        snap.put_class(class("c", CONTROLLER_NAME, "bp"));
        snap.put_class(class("theirs", "example.com/other", "bp"));
        snap.put_namespace("infra", Default::default());
        snap.put_namespace("app", Default::default());
        let mut w = Self { snap };
        w.blueprint(&[("cm", GW_TEMPLATE)], &[("copy", ROUTE_TEMPLATE)], None);
        w
    }

    fn blueprint(
        &mut self,
        gateway: &[(&str, &str)],
        route: &[(&str, &str)],
        status: Option<&str>,
    ) -> &mut Self {
        let entries = |t: &[(&str, &str)]| -> Vec<Value> {
            t.iter()
                .map(|(n, s)| json!({"name": n, "template": s}))
                .collect()
        };
        let mut spec =
            json!({"gatewayTemplates": entries(gateway), "routeTemplates": entries(route)});
        if let Some(s) = status {
            spec["status"] = json!({ "template": s });
        }
        let bp: GatewayClassBlueprint = serde_json::from_value(json!({
            "apiVersion": "gatewright.dev/v1alpha1", "kind": "GatewayClassBlueprint",
            "metadata": {"name": "bp"}, "spec": spec,
        }))
        .unwrap();
        self.snap.put_blueprint(bp);
        self
    }

    /// Gateway `infra/<name>` of class `class` with HTTP listeners `(name, hostname)` on
    /// port 80 (allowing routes from all namespaces) and a spec address.
    fn gateway(&mut self, name: &str, class: &str, listeners: &[(&str, Option<&str>)]) -> Key {
        let ls: Vec<Value> = listeners
            .iter()
            .map(|(n, h)| {
                let mut l = json!({"name": n, "port": 80, "protocol": "HTTP",
                    "allowedRoutes": {"namespaces": {"from": "All"}}});
                if let Some(h) = h {
                    l["hostname"] = json!(h);
                }
                l
            })
            .collect();
        let gw: Gateway = serde_json::from_value(json!({
            "apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
            "metadata": {"name": name, "namespace": "infra", "uid": format!("uid-{name}"), "generation": 2},
            "spec": {"gatewayClassName": class, "listeners": ls,
                "addresses": [{"type": "IPAddress", "value": "10.0.0.1"}]},
        }))
        .unwrap();
        self.snap.put_gateway(gw);
        Key::new("infra", name)
    }

    /// HTTPRoute `app/<name>` for `hostnames`, a child of each Gateway in `parents`.
    fn route(&mut self, name: &str, hostnames: &[&str], parents: &[&str]) -> RouteKey {
        let refs: Vec<Value> = parents
            .iter()
            .map(|p| json!({"name": p, "namespace": "infra"}))
            .collect();
        self.snap.put_route_json(json!({
            "apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
            "metadata": {"name": name, "namespace": "app", "uid": format!("uid-{name}"), "generation": 1},
            "spec": {"parentRefs": refs, "hostnames": hostnames},
        }));
        RouteKey::new("HTTPRoute", "app", name)
    }

    /// Makes every child `key`'s plan renders live, as applied (ready: no status rules).
    fn make_live(&mut self, key: &Key) {
        let p = plan(&self.snap, key).unwrap();
        for c in p.children() {
            self.snap.put_child(Value::clone(&c.object));
        }
    }
}

fn class(name: &str, controller: &str, blueprint: &str) -> GatewayClass {
    serde_json::from_value(json!({
        "apiVersion": "gateway.networking.k8s.io/v1", "kind": "GatewayClass",
        "metadata": {"name": name},
        "spec": {"controllerName": controller, "parametersRef":
            {"group": "gatewright.dev", "kind": "GatewayClassBlueprint", "name": blueprint}},
    }))
    .unwrap()
}

fn cond<'a>(conds: &'a [Cond], type_: &str) -> &'a Cond {
    conds
        .iter()
        .find(|c| c.type_ == type_)
        .unwrap_or_else(|| panic!("no {type_} in {conds:?}"))
}
