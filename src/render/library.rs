//! The built-in template library (`{% import "gatewright/lib.yaml" as lib %}`) in Rust.
//!
//! Its names (`lib.name`, `lib.long_name`, `lib.route_name`, `lib.labels`) were Jinja
//! macros. A macro call costs a frame, a closure and an output buffer, and every child of
//! every Gateway calls two or three of them on each render: a fifth of a route template's
//! render went there. The library template now binds each name to one of these functions
//! (`templates/lib.yaml`), which compute the same values: a name is made with
//! [`safe_name`] of the same parts, joined as `~` joins them (undefined parts are an
//! undefined error, as in strict mode), and the labels are the Gateway's GEP-1762 labels
//! merged with `extra`. The rendered text is the same: a template prints the returned
//! string or map through the same JSON formatter the macro body did.

use minijinja::value::{Kwargs, Value};
use minijinja::{Error, ErrorKind};

use super::labels::safe_name;

/// The value the library template binds its names from (see the module docs).
pub const GLOBAL: &str = "__gatewright_lib";

/// The library's functions, as one map value.
#[must_use]
pub fn global() -> Value {
    Value::from_pairs([
        ("name", Value::from_function(name)),
        ("long_name", Value::from_function(long_name)),
        ("route_name", Value::from_function(route_name)),
        ("labels", Value::from_function(labels)),
    ])
}

/// `value.<path>` as strict mode reads it: an undefined step is an undefined error.
fn attr(value: &Value, path: &[&str], what: &str) -> Result<Value, Error> {
    let mut cur = value.clone();
    for part in path {
        if cur.is_undefined() {
            break;
        }
        cur = cur.get_attr(part)?;
    }
    if cur.is_undefined() {
        return Err(Error::new(
            ErrorKind::UndefinedError,
            format!("{what}.{} is undefined", path.join(".")),
        ));
    }
    Ok(cur)
}

/// A part of a name as `~` writes it; undefined is an undefined error.
fn part(value: &Value, what: &str) -> Result<String, Error> {
    if value.is_undefined() {
        return Err(Error::new(
            ErrorKind::UndefinedError,
            format!("{what} is undefined"),
        ));
    }
    Ok(value.to_string())
}

/// `lib.name(parent, suffix)`: "<parent>-<suffix>", hash-truncated to 63 characters.
fn name(parent: &Value, suffix: &Value) -> Result<String, Error> {
    parent_name(parent, suffix, 63)
}

/// `lib.long_name(parent, suffix)`: the same in the 253-character form.
fn long_name(parent: &Value, suffix: &Value) -> Result<String, Error> {
    parent_name(parent, suffix, 253)
}

/// [`safe_name`] of "<parent's name>-<suffix>" within `max` characters.
fn parent_name(parent: &Value, suffix: &Value, max: usize) -> Result<String, Error> {
    let base = part(&attr(parent, &["metadata", "name"], "parent")?, "parent")?;
    Ok(safe_name(
        &format!("{base}-{}", part(suffix, "suffix")?),
        max,
    ))
}

/// `lib.route_name(route, gateway, suffix)`: "<route>-[<gateway ns>-]<gateway>-<suffix>",
/// the Gateway's namespace present when it is not the route's.
fn route_name(route: &Value, gateway: &Value, suffix: &Value) -> Result<String, Error> {
    let gw_ns = gateway.get_attr("metadata")?.get_attr("namespace")?;
    let route_ns = route.get_attr("metadata")?.get_attr("namespace")?;
    let gw_ns = if gw_ns == route_ns {
        String::new()
    } else {
        format!("{}-", part(&gw_ns, "gateway.metadata.namespace")?)
    };
    let route_name = part(&attr(route, &["metadata", "name"], "route")?, "route")?;
    let gw_name = part(&attr(gateway, &["metadata", "name"], "gateway")?, "gateway")?;
    let suffix = part(suffix, "suffix")?;
    Ok(safe_name(
        &format!("{route_name}-{gw_ns}{gw_name}-{suffix}"),
        63,
    ))
}

/// `lib.labels(gateway, extra={})`: the Gateway's GEP-1762 labels, then `extra`'s
/// entries (which win).
fn labels(gateway: &Value, extra: Option<Value>, kwargs: Kwargs) -> Result<Value, Error> {
    let extra = match extra {
        Some(e) => Some(e),
        None => kwargs.get::<Option<Value>>("extra")?,
    };
    kwargs.assert_all_used()?;
    merged_labels(gateway, extra)
}

/// The Gateway's labels, then `extra`'s entries.
fn merged_labels(gateway: &Value, extra: Option<Value>) -> Result<Value, Error> {
    let mut out: std::collections::BTreeMap<Value, Value> = gateway_labels_map(gateway)?
        .into_iter()
        .map(|(k, v)| (Value::from(k), Value::from(v)))
        .collect();
    if let Some(extra) = extra.filter(|e| !e.is_undefined() && !e.is_none()) {
        let Some(pairs) = extra.as_object().and_then(|o| o.try_iter_pairs()) else {
            return Err(Error::new(
                ErrorKind::InvalidOperation,
                format!("lib.labels: extra must be a map, not {}", extra.kind()),
            ));
        };
        out.extend(pairs);
    }
    Ok(Value::from_object(out))
}

/// What `gateway_labels` gives, as a map.
pub(super) fn gateway_labels_map(
    gateway: &Value,
) -> Result<std::collections::BTreeMap<String, String>, Error> {
    // Only the three fields the labels come from are converted, not the whole Gateway.
    let get = field;
    let to_json = |v: Value| -> Result<serde_json::Value, Error> {
        if v.is_undefined() || v.is_none() {
            return Ok(serde_json::Value::Null);
        }
        serde_json::to_value(&v).map_err(|e| Error::new(ErrorKind::BadSerialization, e.to_string()))
    };
    let gw = serde_json::json!({
        "metadata": { "name": to_json(get(gateway, "metadata.name"))? },
        "spec": {
            "gatewayClassName": to_json(get(gateway, "spec.gatewayClassName"))?,
            "infrastructure": { "labels": to_json(get(gateway, "spec.infrastructure.labels"))? },
        },
    });
    Ok(super::labels::gateway_labels(&gw))
}

/// The value at a dotted path of field names, none when a step is missing or none (what
/// the engine's `dig` gives for such a path).
fn field(value: &Value, path: &str) -> Value {
    let mut cur = value.clone();
    for part in path.split('.') {
        match cur.get_attr(part) {
            Ok(v) if !v.is_undefined() && !v.is_none() => cur = v,
            _ => return Value::from(()),
        }
    }
    cur
}

#[cfg(test)]
mod tests {
    use super::*;

    trait FromJson {
        fn from_serialize_json(v: serde_json::Value) -> Value;
    }
    impl FromJson for Value {
        fn from_serialize_json(v: serde_json::Value) -> Value {
            Value::from(minijinja::value::Serde(v))
        }
    }

    fn gw(ns: &str, name: &str) -> Value {
        Value::from_serialize_json(serde_json::json!({
            "metadata": {"name": name, "namespace": ns},
            "spec": {"gatewayClassName": "c", "infrastructure": {"labels": {"team": "a"}}},
        }))
    }

    #[test]
    fn names_are_safe_names_of_their_parts() {
        let g = gw("infra", "Big_GW");
        assert_eq!(
            name(&g, &Value::from("istio")).unwrap(),
            safe_name("Big_GW-istio", 63)
        );
        assert_eq!(
            name(&g, &Value::from(3)).unwrap(),
            safe_name("Big_GW-3", 63)
        );
        let long = "x".repeat(100);
        assert_eq!(
            long_name(&gw("infra", &long), &Value::from("s")).unwrap(),
            safe_name(&format!("{long}-s"), 253)
        );
        let same_ns = Value::from_serialize_json(
            serde_json::json!({"metadata": {"name": "r", "namespace": "infra"}}),
        );
        let other_ns = Value::from_serialize_json(
            serde_json::json!({"metadata": {"name": "r", "namespace": "team"}}),
        );
        assert_eq!(
            route_name(&same_ns, &g, &Value::from("istio")).unwrap(),
            safe_name("r-Big_GW-istio", 63)
        );
        assert_eq!(
            route_name(&other_ns, &g, &Value::from("istio")).unwrap(),
            safe_name("r-infra-Big_GW-istio", 63)
        );
    }

    #[test]
    fn an_undefined_part_is_an_undefined_error() {
        let e = name(&Value::UNDEFINED, &Value::from("x")).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::UndefinedError);
        let e = name(&gw("a", "b"), &Value::UNDEFINED).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::UndefinedError);
        let no_name = Value::from_serialize_json(serde_json::json!({"metadata": {}}));
        let e = long_name(&no_name, &Value::from("x")).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::UndefinedError);
    }

    #[test]
    fn labels_merge_extra_over_the_gateway_labels() {
        let extra = Value::from_serialize_json(serde_json::json!({"team": "b", "x": "y"}));
        let l = merged_labels(&gw("infra", "g"), Some(extra)).unwrap();
        assert_eq!(l.get_attr("team").unwrap().as_str(), Some("b"));
        assert_eq!(l.get_attr("x").unwrap().as_str(), Some("y"));
        assert_eq!(
            l.get_attr("gateway.networking.k8s.io/gateway-name")
                .unwrap()
                .as_str(),
            Some("g")
        );
        let e = merged_labels(&gw("infra", "g"), Some(Value::from(3))).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidOperation);
    }

    /// The library as Jinja macros, as it was: the functions must render the same text.
    const MACROS: &str = r##"{#- gatewright built-in template library.
    Import it in a blueprint template with:
        {% import "gatewright/lib.yaml" as lib %}
    Every macro emits a complete YAML value (a quoted string or a flow map), so its
    output can stand after a key: `name: {{ lib.name(gateway, "istio") }}`. -#}

{#- A DNS-label-safe child name: "<gateway>-<suffix>", hash-truncated to 63 characters. -#}
{% macro name(parent, suffix) -%}
{{ safe_name(parent.metadata.name ~ "-" ~ suffix) }}
{%- endmacro %}

{#- The same in the 253-character DNS-subdomain form, for kinds that allow it. -#}
{% macro long_name(parent, suffix) -%}
{{ safe_name(parent.metadata.name ~ "-" ~ suffix, 253) }}
{%- endmacro %}

{#- The name of a route's child for one Gateway: "<route>-<gateway>-<suffix>", with the
    Gateway's namespace before its name when it is not the route's, so that a route
    attached to two Gateways of one name in two namespaces gets two children. -#}
{% macro route_name(route, gateway, suffix) -%}
{% set gw_ns = gateway.metadata.namespace ~ "-" if gateway.metadata.namespace != route.metadata.namespace else "" %}
{{- safe_name(route.metadata.name ~ "-" ~ gw_ns ~ gateway.metadata.name ~ "-" ~ suffix) }}
{%- endmacro %}

{#- Labels every child of a Gateway should carry (GEP-1762), merged with `extra`.
    gatewright adds its own ownership labels after rendering. -#}
{% macro labels(gateway, extra={}) -%}
{{ dict(**gateway_labels(gateway), **extra) }}
{%- endmacro %}
"##;

    fn render_both(template: &str, ctx: &Value) -> (Result<String, Error>, Result<String, Error>) {
        let render = |lib: &'static str| {
            let mut env = crate::render::engine::base_environment();
            env.add_template("gatewright/lib.yaml", lib).unwrap();
            env.add_template("t", template).unwrap();
            env.get_template("t").unwrap().render(ctx)
        };
        (
            render(MACROS),
            render(include_str!("../../templates/lib.yaml")),
        )
    }

    #[test]
    fn the_functions_render_what_the_macros_did() {
        let template = concat!(
            "{% import \"gatewright/lib.yaml\" as lib %}",
            "a: {{ lib.name(gateway, suffix) }}\n",
            "b: {{ lib.long_name(gateway, suffix) }}\n",
            "c: {{ lib.route_name(route, gateway, suffix) }}\n",
            "d: {{ lib.labels(gateway) }}\n",
            "e: {{ lib.labels(gateway, extra) }}\n",
            "{% set n = lib.name(gateway, \"tls\" if suffix == 1 else \"tls-\" ~ suffix) %}f: {{ n }}\n",
        );
        let names = [
            "gw",
            "Big_GW",
            "a.b.c",
            "ünïcode",
            &"x".repeat(70),
            &"y".repeat(300),
            "-",
        ];
        let suffixes = [
            Value::from("istio"),
            Value::from(1),
            Value::from("a b/c"),
            Value::from(""),
        ];
        let extras = [
            serde_json::json!({}),
            serde_json::json!({"team": "b", "x": "y\u{85}z"}),
            serde_json::json!({"gateway.networking.k8s.io/gateway-name": "over"}),
        ];
        let mut n = 0;
        for (i, name) in names.iter().enumerate() {
            for suffix in &suffixes {
                let extra = &extras[n % extras.len()];
                n += 1;
                let route_ns = if i % 2 == 0 { "infra" } else { "team" };
                let ctx = Value::from_serialize_json(serde_json::json!({
                    "gateway": {
                        "metadata": {"name": name, "namespace": "infra"},
                        "spec": {"gatewayClassName": "c", "infrastructure": {"labels": {"team": "a", "odd": "\u{2028}"}}},
                    },
                    "route": {"metadata": {"name": format!("r{name}"), "namespace": route_ns}},
                    "suffix": suffix,
                    "extra": extra,
                }));
                let (old, new) = render_both(template, &ctx);
                assert_eq!(old.unwrap(), new.unwrap(), "{name} {suffix} {extra}");
            }
        }
        // What the macros refused, the functions refuse.
        for bad in [
            "{{ lib.name(nothing, \"x\") }}",
            "{{ lib.name(gateway) }}",
            "{{ lib.route_name(gateway, nothing, \"x\") }}",
        ] {
            let ctx = Value::from_serialize_json(
                serde_json::json!({"gateway": {"metadata": {"name": "g", "namespace": "n"}}}),
            );
            let (old, new) = render_both(
                &format!("{{% import \"gatewright/lib.yaml\" as lib %}}{bad}"),
                &ctx,
            );
            assert!(old.is_err() && new.is_err(), "{bad}: {old:?} {new:?}");
            // An undefined value is an undefined error (a template that reads another's
            // objects waits on it); a missing argument says so.
            let want = if bad.contains("nothing") {
                ErrorKind::UndefinedError
            } else {
                ErrorKind::MissingArgument
            };
            assert_eq!(new.unwrap_err().kind(), want, "{bad}");
        }
    }
}
