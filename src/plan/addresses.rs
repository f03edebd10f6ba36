//! A Gateway's `status.addresses`: what its blueprint's status template renders (each
//! address checked: an IP address, a hostname, at most 16), else its spec's addresses.

use gateway_api::apis::standard::gateways::GatewayStatusAddresses;
use serde_json::Value;

use crate::gateway::hostnames;
use crate::render::engine::STATUS_TEMPLATE;
use crate::render::output::parse_documents;
use crate::render::prepared::Prepared;
use crate::render::{RenderError, TemplateSet};

pub(super) fn render_addresses(
    prepared: &Prepared,
    ctx: &minijinja::Value,
) -> Result<Vec<GatewayStatusAddresses>, RenderError> {
    let text = prepared
        .compiled
        .render(TemplateSet::Status, STATUS_TEMPLATE, ctx)?;
    let err = |m: String| {
        RenderError::new(&prepared.name, STATUS_TEMPLATE, None, m).with_category("InvalidOutput")
    };
    let docs = parse_documents(&text)
        .map_err(|e| err(format!("rendered output is not valid YAML: {e}")))?;
    let Some(doc) = docs.first() else {
        return Ok(Vec::new());
    };
    let list = match doc.get("addresses") {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Array(a)) => a,
        Some(_) => return Err(err("`addresses` must be a list of {type, value}".into())),
    };
    let mut out = Vec::new();
    for a in list {
        let value = a["value"].as_str().unwrap_or_default().trim().to_owned();
        if value.is_empty() {
            continue;
        }
        let kind = a["type"].as_str().unwrap_or("IPAddress").to_owned();
        match kind.as_str() {
            "IPAddress" if value.parse::<std::net::IpAddr>().is_err() => {
                return Err(err(format!("address {value:?} is not an IP address")));
            }
            "Hostname" => hostnames::validate_hostname(&value)
                .map_err(|e| err(format!("address {value:?}: {e}")))?,
            _ => {}
        }
        out.push(GatewayStatusAddresses {
            r#type: Some(kind),
            value,
        });
    }
    if out.len() > 16 {
        return Err(err(format!(
            "{} addresses, more than the 16 the API allows",
            out.len()
        )));
    }
    Ok(out)
}

pub(super) fn spec_addresses(
    gw: &gateway_api::apis::standard::gateways::Gateway,
) -> Vec<GatewayStatusAddresses> {
    gw.spec
        .addresses
        .iter()
        .flatten()
        .filter_map(|a| {
            let v = a.value.clone().unwrap_or_default();
            (!v.is_empty()).then(|| GatewayStatusAddresses {
                r#type: Some(a.r#type.clone().unwrap_or_else(|| "IPAddress".into())),
                value: v,
            })
        })
        .collect()
}
