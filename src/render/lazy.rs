//! A JSON object handed to templates as its text and parsed on first read. The snapshot
//! keeps routes as text (a parsed object takes many times its text in memory); a Gateway
//! template sees every accepted route in `routes`, and most templates never read it, so
//! converting each route for every Gateway plan would be wasted work.

use std::sync::{Arc, OnceLock};

use minijinja::Value;
use minijinja::value::{Enumerator, Object, ObjectRepr};

/// See the module docs.
#[derive(Debug)]
pub struct LazyJson {
    text: Arc<str>,
    parsed: OnceLock<Value>,
}

impl LazyJson {
    /// A template value over `text` (a JSON object), parsed when first read.
    #[must_use]
    pub fn value(text: Arc<str>) -> Value {
        Value::from_object(Self {
            text,
            parsed: OnceLock::new(),
        })
    }

    fn parsed(&self) -> &Value {
        self.parsed
            .get_or_init(|| serde_json::from_str(&self.text).unwrap_or_default())
    }
}

impl Object for LazyJson {
    fn repr(self: &Arc<Self>) -> ObjectRepr {
        ObjectRepr::Map
    }

    fn get_value(self: &Arc<Self>, key: &Value) -> Option<Value> {
        self.parsed()
            .get_item(key)
            .ok()
            .filter(|v| !v.is_undefined())
    }

    fn enumerate(self: &Arc<Self>) -> Enumerator {
        match self.parsed().try_iter() {
            Ok(keys) => Enumerator::Values(keys.collect()),
            Err(_) => Enumerator::Empty,
        }
    }
}

/// A value of ours handed to templates, converted to a template value on first read: made
/// for every route plan (`attachment`), read only when a template renders.
#[derive(Debug)]
pub struct LazySerialized<T> {
    value: Arc<T>,
    converted: OnceLock<Value>,
}

impl<T: serde::Serialize + std::fmt::Debug + Send + Sync + 'static> LazySerialized<T> {
    /// A template value over `value`, converted when first read.
    #[must_use]
    pub fn value(value: Arc<T>) -> Value {
        Value::from_object(Self {
            value,
            converted: OnceLock::new(),
        })
    }

    fn converted(&self) -> &Value {
        self.converted
            .get_or_init(|| Value::from(minijinja::value::Serde(&*self.value)))
    }
}

impl<T: serde::Serialize + std::fmt::Debug + Send + Sync + 'static> Object for LazySerialized<T> {
    fn repr(self: &Arc<Self>) -> ObjectRepr {
        ObjectRepr::Map
    }

    fn get_value(self: &Arc<Self>, key: &Value) -> Option<Value> {
        self.converted()
            .get_item(key)
            .ok()
            .filter(|v| !v.is_undefined())
    }

    fn enumerate(self: &Arc<Self>) -> Enumerator {
        match self.converted().try_iter() {
            Ok(keys) => Enumerator::Values(keys.collect()),
            Err(_) => Enumerator::Empty,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_like_the_parsed_object() {
        let text = r#"{"metadata":{"name":"r","labels":{"a":"1"}},"spec":{"hostnames":["x.example.com"]}}"#;
        let lazy = LazyJson::value(Arc::from(text));
        let eager: Value = serde_json::from_str(text).unwrap();
        let env = minijinja::Environment::new();
        for expr in [
            "r.metadata.name",
            "r.spec.hostnames | first",
            "r | length",
            "r.metadata.labels | items | list",
            "r | tojson",
            "r.missing is defined",
            "r | list",
        ] {
            let e = env.compile_expression(expr).unwrap();
            let a = e.eval(minijinja::context! { r => lazy.clone() }).unwrap();
            let b = e.eval(minijinja::context! { r => eager.clone() }).unwrap();
            assert_eq!(a.to_string(), b.to_string(), "{expr}");
        }
    }

    #[test]
    fn a_serialized_value_reads_like_its_conversion() {
        let v = serde_json::json!({"listeners": [{"key": "apps", "hostnames": ["a.example.com"]}], "hostnames": []});
        let lazy = LazySerialized::value(Arc::new(v.clone()));
        let eager = Value::from(minijinja::value::Serde(&v));
        let env = minijinja::Environment::new();
        for expr in [
            "r.listeners[0].key",
            "r.listeners | map(attribute='key') | list",
            "r.hostnames",
            "r | tojson",
            "r.missing is defined",
            "r | length",
        ] {
            let e = env.compile_expression(expr).unwrap();
            let a = e.eval(minijinja::context! { r => lazy.clone() }).unwrap();
            let b = e.eval(minijinja::context! { r => eager.clone() }).unwrap();
            assert_eq!(a.to_string(), b.to_string(), "{expr}");
        }
    }
}
