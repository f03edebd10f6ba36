//! The memory of our own status writes, to know their watch echoes: the status we last
//! wrote per object, kept as the digest of its normalized form (a fleet's statuses would
//! otherwise be held twice), and how statuses are compared (without times and nulls).

use std::collections::HashMap;
use std::sync::Mutex;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde_json::Value;

/// The time conditions that change get as `lastTransitionTime`.
pub(crate) fn now() -> Time {
    Time(k8s_openapi::jiff::Timestamp::now())
}

/// A copy of `v` without `lastTransitionTime` anywhere, for comparing statuses.
pub(crate) fn strip_times(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(k, _)| k.as_str() != "lastTransitionTime")
                .map(|(k, v)| (k.clone(), strip_times(v)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(strip_times).collect()),
        other => other.clone(),
    }
}

/// A status as compared for echoes: without `lastTransitionTime`, without null fields.
pub(crate) fn norm_status(v: &Value) -> Value {
    let mut v = strip_times(v);
    if let Some(o) = v.as_object_mut() {
        o.retain(|_, x| !x.is_null());
    }
    v
}

/// The SHA-256 of a status in its normalized form ([`norm_status`], serialized with sorted
/// keys): what [`OwnStatus`] remembers of the statuses it wrote.
pub(crate) type StatusDigest = [u8; 32];

/// See [`StatusDigest`].
pub(crate) fn status_digest(v: &Value) -> StatusDigest {
    use sha2::Digest as _;
    let text = serde_json::to_string(&norm_status(v)).unwrap_or_default();
    sha2::Sha256::digest(text.as_bytes()).into()
}

/// The key under which the status we last wrote on an object is remembered.
pub(crate) fn own_status_key(kind: &str, namespace: &str, name: &str) -> String {
    format!("{kind}/{namespace}/{name}")
}

/// The status we last wrote per object (`Kind/namespace/name`, [`own_status_key`]): a
/// watch event that brings exactly it (and no other change) is our own echo.
#[derive(Debug, Default)]
pub(crate) struct OwnStatus(Mutex<HashMap<String, StatusDigest>>);

impl OwnStatus {
    /// Remembers the status we are about to write on `object` (`Kind/namespace/name`), so
    /// the watch event it causes is recognised as our own echo.
    pub(crate) fn expect(&self, object: String, status: &serde_json::Value) {
        let digest = status_digest(status);
        if let Ok(mut w) = self.0.lock() {
            w.insert(object, digest);
        }
    }

    /// Whether `status` on `object` is the one we last wrote.
    pub(crate) fn is_own(&self, object: &str, status: &serde_json::Value) -> bool {
        let digest = status_digest(status);
        self.0.lock().is_ok_and(|w| w.get(object) == Some(&digest))
    }

    /// Whether the cached `status` of `object` is at least as new as our last write to
    /// it: we wrote nothing there yet, or it is what we last wrote. When it is not, the
    /// watch has not brought our last write back yet, and the cache must not decide that
    /// a write is unneeded (that write's echo plans nothing, so a change whose status
    /// equals what the stale cache shows would never be written).
    pub(crate) fn cache_has_own(&self, object: &str, status: &serde_json::Value) -> bool {
        let digest = status_digest(status);
        self.0
            .lock()
            .is_ok_and(|w| w.get(object).is_none_or(|own| *own == digest))
    }

    /// Forgets what we wrote on an object that is gone.
    pub(crate) fn forget(&self, object: &str) {
        if let Ok(mut w) = self.0.lock() {
            w.remove(object);
        }
    }
}
