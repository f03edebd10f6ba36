//! A parsed JSON value the planner already holds, handed to templates without converting
//! it: a read converts only the field it reaches, and a map or list it reaches stays a view
//! of the same tree. `resources.<template>` and a `readyWhen`'s `object` are live children
//! whose templates read a field or two (an address, a condition); converting each whole
//! object into template values for every render was most of what reading them cost.

use std::sync::Arc;

use minijinja::Value;
use minijinja::value::{Enumerator, Object, ObjectRepr};

/// See the module docs.
#[derive(Debug)]
pub struct JsonView {
    root: Arc<serde_json::Value>,
    path: Box<[Step]>,
    /// Set when a template reads what a write of the root's status changes (see
    /// [`JsonView::watched`]).
    status_read: Option<Watch>,
}

/// Where a watched view stands: the root (its `status` is watched) or the root's
/// `metadata` (its `resourceVersion` and `managedFields` are).
#[derive(Debug, Clone)]
enum Watch {
    Root(Arc<std::sync::atomic::AtomicBool>),
    Metadata(Arc<std::sync::atomic::AtomicBool>),
}

impl Watch {
    /// Whether reading `key` of the watched node is a read of what a status write changes.
    fn watches(&self, key: &str) -> bool {
        match self {
            Self::Root(_) => key == "status",
            Self::Metadata(_) => STATUS_WRITE_METADATA.contains(&key),
        }
    }

    fn flag(&self) -> &std::sync::atomic::AtomicBool {
        match self {
            Self::Root(f) | Self::Metadata(f) => f,
        }
    }
}

/// The fields of `metadata` every write of an object changes, its status's included.
pub const STATUS_WRITE_METADATA: [&str; 2] = ["resourceVersion", "managedFields"];

/// One step from a view's root to its node.
#[derive(Debug, Clone)]
enum Step {
    Key(Box<str>),
    Index(usize),
}

impl JsonView {
    /// `root` as a template value: a view for a map or a list, the converted value for
    /// anything else.
    #[must_use]
    pub fn value(root: Arc<serde_json::Value>) -> Value {
        Self::watched(root, None)
    }

    /// [`JsonView::value`] that sets `status_read` when a template reads what a write of
    /// the root's status changes: its `status`, or its `metadata`'s
    /// [`STATUS_WRITE_METADATA`] (by name, or by going through every field: `tojson`,
    /// `items`): what the planner needs to know to leave those out of what a Gateway's
    /// route plans depend on.
    #[must_use]
    pub fn watched(
        root: Arc<serde_json::Value>,
        status_read: Option<Arc<std::sync::atomic::AtomicBool>>,
    ) -> Value {
        match &*root {
            serde_json::Value::Object(_) | serde_json::Value::Array(_) => {
                Value::from_object(Self {
                    root,
                    path: Box::default(),
                    status_read: status_read.map(Watch::Root),
                })
            }
            leaf => Value::from(minijinja::value::Serde(leaf)),
        }
    }

    /// The node the view stands for (the root's tree never changes: it is shared).
    fn node(&self) -> &serde_json::Value {
        self.path.iter().fold(&*self.root, |v, step| match step {
            Step::Key(k) => &v[&**k],
            Step::Index(i) => &v[*i],
        })
    }

    /// The child at `step` of the view's node `child`.
    fn child(&self, step: Step, child: &serde_json::Value) -> Value {
        match child {
            serde_json::Value::Object(_) | serde_json::Value::Array(_) => {
                let mut path = Vec::with_capacity(self.path.len() + 1);
                path.extend_from_slice(&self.path);
                let status_read = match (&self.status_read, &step) {
                    (Some(Watch::Root(f)), Step::Key(k)) if &**k == "metadata" => {
                        Some(Watch::Metadata(Arc::clone(f)))
                    }
                    _ => None,
                };
                path.push(step);
                Value::from_object(Self {
                    root: Arc::clone(&self.root),
                    path: path.into_boxed_slice(),
                    status_read,
                })
            }
            leaf => Value::from(minijinja::value::Serde(leaf)),
        }
    }
}

impl Object for JsonView {
    fn repr(self: &Arc<Self>) -> ObjectRepr {
        match self.node() {
            serde_json::Value::Array(_) => ObjectRepr::Seq,
            _ => ObjectRepr::Map,
        }
    }

    fn get_value(self: &Arc<Self>, key: &Value) -> Option<Value> {
        match self.node() {
            serde_json::Value::Object(m) => {
                let k = key.as_str()?;
                if let Some(watch) = &self.status_read
                    && watch.watches(k)
                {
                    watch
                        .flag()
                        .store(true, std::sync::atomic::Ordering::Relaxed);
                }
                let child = m.get(k)?;
                Some(self.child(Step::Key(k.into()), child))
            }
            serde_json::Value::Array(a) => {
                let i = key.as_usize()?;
                let child = a.get(i)?;
                Some(self.child(Step::Index(i), child))
            }
            _ => None,
        }
    }

    fn enumerate(self: &Arc<Self>) -> Enumerator {
        if let Some(watch) = &self.status_read {
            watch
                .flag()
                .store(true, std::sync::atomic::Ordering::Relaxed);
        }
        match self.node() {
            serde_json::Value::Object(m) => {
                Enumerator::Values(m.keys().map(|k| Value::from(k.as_str())).collect())
            }
            serde_json::Value::Array(a) => Enumerator::Seq(a.len()),
            _ => Enumerator::Empty,
        }
    }

    fn enumerator_len(self: &Arc<Self>) -> Option<usize> {
        match self.node() {
            serde_json::Value::Object(m) => Some(m.len()),
            serde_json::Value::Array(a) => Some(a.len()),
            _ => Some(0),
        }
    }
}

/// `objects` as a template list of views.
#[must_use]
pub fn list(objects: &[Arc<serde_json::Value>]) -> Value {
    Value::from(
        objects
            .iter()
            .map(|o| JsonView::value(Arc::clone(o)))
            .collect::<Vec<_>>(),
    )
}

/// A map of object lists (`pending.<template>`) as a template map of lists of views.
#[must_use]
pub fn lists(map: &std::collections::BTreeMap<String, Vec<Arc<serde_json::Value>>>) -> Value {
    map.iter()
        .map(|(k, v)| (k.clone(), list(v)))
        .collect::<std::collections::BTreeMap<String, Value>>()
        .into()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every way a template reads a value gives what the converted value gives.
    #[test]
    fn reads_like_the_converted_value() {
        let json = serde_json::json!({
            "apiVersion": "networking.istio.io/v1",
            "kind": "Gateway",
            "metadata": {"name": "g", "labels": {"a": "1", "b": ""}, "annotations": {}},
            "spec": {"servers": [{"port": {"number": 443}, "hosts": ["a.example.com", "*.b.example.com"]}], "empty": []},
            "status": {
                "addresses": [{"type": "IPAddress", "value": "10.0.0.1"}],
                "conditions": [{"type": "Ready", "status": "True"}, {"type": "Programmed", "status": "False"}],
                "replicas": 3, "ratio": 0.5, "big": 18446744073709551615_u64, "neg": -2, "on": true, "none": null
            }
        });
        let view = JsonView::value(Arc::new(json.clone()));
        let converted = Value::from(minijinja::value::Serde(&json));
        let env = minijinja::Environment::new();
        for expr in [
            "o",
            "o.metadata.name",
            "o.metadata['name']",
            "o.metadata.labels",
            "o.metadata.labels | items | list",
            "o.metadata.labels | dictsort",
            "o.metadata.annotations",
            "o.metadata.annotations | length",
            "o.metadata.annotations is defined and o.metadata.annotations",
            "o.spec.servers[0].hosts | join(',')",
            "o.spec.servers[-1].hosts[-1]",
            "o.spec.servers | map(attribute='port.number') | list",
            "o.spec.servers | selectattr('port.number', 'eq', 443) | list | length",
            "o.spec.empty",
            "o.spec.empty | length",
            "o.spec.empty or 'none'",
            "o.spec.missing is defined",
            "o.spec.servers[7] is defined",
            "o.status.addresses | first",
            "(o.status.addresses | first).value",
            "o.status.conditions | selectattr('type', 'eq', 'Ready') | map(attribute='status') | first",
            "o.status.replicas + 1",
            "o.status.ratio * 2",
            "o.status.big",
            "o.status.neg",
            "o.status.on",
            "o.status.none is none",
            "o.status.replicas is number",
            "o | tojson",
            "o.spec | tojson",
            "o | length",
            "o | list",
            "o is mapping",
            "o.spec.servers is sequence",
            "o.spec.servers is mapping",
            "o.status.conditions[1] == {'type': 'Programmed', 'status': 'False'}",
            "o.metadata.labels == {'a': '1', 'b': ''}",
            "'a' in o.metadata.labels",
            "'a.example.com' in o.spec.servers[0].hosts",
            "o.spec.servers[0] == o.spec.servers[0]",
            "o.metadata.labels.b or 'unset'",
        ] {
            let e = env.compile_expression(expr).unwrap();
            let a = e.eval(minijinja::context! { o => view.clone() });
            let b = e.eval(minijinja::context! { o => converted.clone() });
            match (a, b) {
                (Ok(a), Ok(b)) => {
                    assert_eq!(a.to_string(), b.to_string(), "{expr}");
                    assert_eq!(a.is_true(), b.is_true(), "{expr}: truth");
                    assert_eq!(a.kind(), b.kind(), "{expr}: kind");
                }
                (a, b) => assert_eq!(a.is_err(), b.is_err(), "{expr}: {a:?} / {b:?}"),
            }
        }
        // A template that loops over a view renders what it renders over the value.
        let t = "{% for k, v in o.metadata.labels | items %}{{ k }}={{ v }};{% endfor %}{% for s in o.spec.servers %}{% for h in s.hosts %}{{ loop.index }}{{ h }}{% endfor %}{% endfor %}{{ o.status.addresses[0]['value'] }}";
        assert_eq!(
            env.render_str(t, minijinja::context! { o => view.clone() })
                .unwrap(),
            env.render_str(t, minijinja::context! { o => converted.clone() })
                .unwrap()
        );
        // A leaf root is the value itself.
        assert_eq!(
            JsonView::value(Arc::new(serde_json::json!("x"))),
            Value::from("x")
        );
    }
}
