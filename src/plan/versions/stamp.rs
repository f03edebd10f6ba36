//! Versions as they are written on objects: the hash a version is, stamped into names,
//! labels and the `version` placeholder, and read back from live objects.

use std::collections::BTreeSet;
use std::sync::Arc;

use serde_json::Value;

use crate::render::labels;

/// Text a make-before-break template sees as `version` while it renders; replaced by the
/// version (a content hash) afterwards. DNS-safe, so it may appear in names.
pub const VERSION_PLACEHOLDER: &str = "gwversionplaceholder";

/// The version of a make-before-break template's output: 8 hex digits of the SHA-256 of
/// the rendered objects, or of the named fields only.
pub(super) fn version_of(objects: &[Value], fields: &[String]) -> String {
    use sha2::{Digest, Sha256};
    let basis: Value = if fields.is_empty() {
        Value::Array(objects.to_vec())
    } else {
        Value::Array(
            objects
                .iter()
                .map(|o| {
                    Value::Array(
                        fields
                            .iter()
                            .map(|f| {
                                f.split('.')
                                    .try_fold(o, |v, k| v.get(k))
                                    .cloned()
                                    .unwrap_or(Value::Null)
                            })
                            .collect(),
                    )
                })
                .collect(),
        )
    };
    let digest = Sha256::digest(basis.to_string().as_bytes());
    digest[..4].iter().map(|b| format!("{b:02x}")).collect()
}

/// Puts `version` into a rendered object: in place of the placeholder in every string,
/// as a name suffix (within 63 characters) and as the version label.
pub(super) fn stamp_version(obj: &mut Value, version: &str) {
    fn replace(v: &mut Value, version: &str) {
        match v {
            Value::String(s) if s.contains(VERSION_PLACEHOLDER) => {
                *s = s.replace(VERSION_PLACEHOLDER, version);
            }
            Value::Array(a) => a.iter_mut().for_each(|x| replace(x, version)),
            Value::Object(m) => m.values_mut().for_each(|x| replace(x, version)),
            _ => {}
        }
    }
    replace(obj, version);
    let name = obj["metadata"]["name"].as_str().unwrap_or_default();
    if !name.ends_with(&format!("-{version}")) {
        let head: String = name.chars().take(63 - 9).collect();
        let head = head.trim_end_matches(['-', '.']);
        obj["metadata"]["name"] = Value::String(format!("{head}-{version}"));
    }
    if !obj["metadata"]["labels"].is_object() {
        obj["metadata"]["labels"] = serde_json::json!({});
    }
    obj["metadata"]["labels"][labels::VERSION] = Value::String(version.to_owned());
}

pub(super) fn version_label(v: &Value) -> &str {
    v["metadata"]["labels"][labels::VERSION]
        .as_str()
        .unwrap_or_default()
}

pub(super) fn created(v: &Value) -> &str {
    v["metadata"]["creationTimestamp"]
        .as_str()
        .unwrap_or_default()
}

/// Versions of `template` that live children say they were rendered from.
pub(super) fn versions_in_use<'a>(live: &'a [Arc<Value>], template: &str) -> BTreeSet<&'a str> {
    live.iter()
        .filter_map(|c| c["metadata"]["annotations"][labels::USES].as_str())
        .flat_map(|u| u.split(','))
        .filter_map(|pair| pair.split_once('='))
        .filter(|(t, _)| *t == template)
        .map(|(_, v)| v)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_version_hashes_only_the_named_fields() {
        let a = json!({"spec": {"dnsNames": ["a.example.com"], "issuer": "x"}});
        let b = json!({"spec": {"dnsNames": ["a.example.com"], "issuer": "y"}});
        let c = json!({"spec": {"dnsNames": ["b.example.com"], "issuer": "x"}});
        let fields = vec!["spec.dnsNames".to_owned()];
        let v = version_of(std::slice::from_ref(&a), &fields);
        assert_eq!(v.len(), 8);
        assert!(v.chars().all(|ch| ch.is_ascii_hexdigit()));
        assert_eq!(v, version_of(std::slice::from_ref(&b), &fields));
        assert_ne!(v, version_of(std::slice::from_ref(&c), &fields));
        // Without fields, any change makes a new version.
        assert_ne!(
            version_of(std::slice::from_ref(&a), &[]),
            version_of(std::slice::from_ref(&b), &[])
        );
    }

    #[test]
    fn stamping_names_labels_and_replaces_the_placeholder_within_63_characters() {
        let long = "g".repeat(70);
        let mut o = json!({
            "metadata": {"name": long},
            "spec": {"secretName": format!("tls-{VERSION_PLACEHOLDER}"), "list": [VERSION_PLACEHOLDER]},
        });
        stamp_version(&mut o, "0123abcd");
        let name = o["metadata"]["name"].as_str().unwrap_or_default();
        assert!(name.len() <= 63 && name.ends_with("-0123abcd"), "{name}");
        assert_eq!(o["spec"]["secretName"], "tls-0123abcd");
        assert_eq!(o["spec"]["list"][0], "0123abcd");
        assert_eq!(o["metadata"]["labels"][labels::VERSION], "0123abcd");
        // A name that already carries the version is left alone.
        let mut p = json!({"metadata": {"name": "cert-0123abcd"}});
        stamp_version(&mut p, "0123abcd");
        assert_eq!(p["metadata"]["name"], "cert-0123abcd");
    }
}
