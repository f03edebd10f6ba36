//! The values merge: blueprint defaults < GatewayClassConfig in the controller namespace
//! < GatewayClassConfig in the local namespace (targeting the Namespace, then the
//! GatewayClass) < GatewayConfig (targeting the Namespace, then the Gateway; a Gateway's
//! `spec.infrastructure.parametersRef` counts as targeting the Gateway). Overrides apply
//! in the reverse order, so the blueprint's override wins over everything.
//!
//! In: the layers in that order. Out: one JSON map. Maps merge deeply; anything else
//! (lists, scalars) is replaced whole by the stronger layer.

use serde_json::{Map, Value};

/// One source of values: its `default` and `override` parts, and where it came from.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Layer {
    /// Where the layer comes from, for debugging (`GatewayConfig ns/name`).
    pub source: String,
    /// Defaults.
    pub default: Option<Value>,
    /// Overrides.
    pub override_: Option<Value>,
}

/// Merges `layers`, weakest first, into the final values.
#[must_use]
pub fn merge_layers(layers: &[Layer]) -> Value {
    let mut out = Value::Object(Map::new());
    for layer in layers {
        if let Some(d) = &layer.default {
            deep_merge(&mut out, d);
        }
    }
    for layer in layers.iter().rev() {
        if let Some(o) = &layer.override_ {
            deep_merge(&mut out, o);
        }
    }
    out
}

/// Merges `over` into `base`: maps key by key, everything else replaced.
pub fn deep_merge(base: &mut Value, over: &Value) {
    match (base, over) {
        (Value::Object(b), Value::Object(o)) => {
            for (k, v) in o {
                match b.get_mut(k) {
                    Some(existing) => deep_merge(existing, v),
                    None => {
                        b.insert(k.clone(), v.clone());
                    }
                }
            }
        }
        (b, o) => *b = o.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn layer(d: Value, o: Value) -> Layer {
        Layer {
            source: String::new(),
            default: Some(d),
            override_: Some(o),
        }
    }

    #[test]
    fn defaults_stronger_later_overrides_stronger_earlier() {
        let layers = [
            layer(
                json!({"a": 1, "m": {"x": 1, "y": 1}}),
                json!({"locked": "blueprint"}),
            ),
            layer(
                json!({"a": 2, "m": {"y": 2}}),
                json!({"locked": "global", "o": 1}),
            ),
            layer(json!({"a": 3, "list": [1]}), json!({"o": 2})),
        ];
        let v = merge_layers(&layers);
        assert_eq!(v["a"], 3);
        assert_eq!(v["m"], json!({"x": 1, "y": 2}));
        assert_eq!(v["locked"], "blueprint");
        assert_eq!(v["o"], 1);
        assert_eq!(v["list"], json!([1]));
    }

    #[test]
    fn lists_and_scalars_replace() {
        let mut base = json!({"l": [1, 2], "s": {"a": 1}});
        deep_merge(&mut base, &json!({"l": [3], "s": "flat"}));
        assert_eq!(base, json!({"l": [3], "s": "flat"}));
    }

    #[test]
    fn empty_layers_give_empty_map() {
        assert_eq!(merge_layers(&[]), json!({}));
        assert_eq!(merge_layers(&[Layer::default()]), json!({}));
    }
}
