//! Server-side apply of children (skipped when the live object already holds everything
//! we render), and deletion.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams};
use serde_json::Value;

use super::child_kinds::KindState;
use super::client::FIELD_MANAGER;
use super::cluster::Cluster;
use super::common::Error;
use super::fight::Verdict;
use crate::render::labels;
use crate::snapshot::ObjectKey;

pub use crate::plan::is_subset;

/// Whether the API server refused the object itself, so that sending it again changes
/// nothing: invalid (422: a required field missing, a CEL rule), not decodable (400: an
/// unknown or duplicate field under strict validation), or a field the schema does not
/// declare (server-side apply answers that with 500 "failed to create typed patch object").
fn refused(s: &kube::core::Status) -> bool {
    matches!(s.code, 400 | 422)
        || (s.code == 500 && s.message.contains("failed to create typed patch object"))
}

/// Whether a 404 to an apply says the kind itself is not served (its CRD deleted), not
/// that the object (its name in the message) or its namespace (`namespaces "x" not
/// found`, a member where it was never made) is missing: only then is the kind looked up
/// again from scratch.
fn kind_gone(s: &kube::core::Status, name: &str) -> bool {
    s.code == 404
        && s.reason == "NotFound"
        && !s.message.contains(name)
        && !s.message.starts_with("namespaces ")
}

/// The route plans (indexes) a pass leaves for the next one: once the route children to
/// write (`(object, live, owner route)`, `None` for the Gateway's own, which are never
/// held) reach `budget` writes, every other route plan with a write waits whole.
pub(super) fn beyond_budget<'a>(
    children: impl Iterator<Item = (&'a Value, Option<&'a Value>, Option<usize>)>,
    budget: usize,
) -> std::collections::BTreeSet<usize> {
    let mut writes = 0usize;
    let mut deferred = std::collections::BTreeSet::new();
    for (obj, live, owner) in children {
        let Some(i) = owner else { continue };
        if deferred.contains(&i) || live.is_some_and(|l| is_subset(obj, l)) {
            continue;
        }
        if writes >= budget {
            deferred.insert(i);
        } else {
            writes += 1;
        }
    }
    deferred
}

impl Cluster {
    /// The API of a served child kind.
    pub(crate) fn child_api(
        self: &Arc<Self>,
        key: &ObjectKey,
    ) -> Result<Option<Api<DynamicObject>>, Error> {
        match self.ensure_kind(&key.api_version, &key.kind) {
            // The planner placed the object by what it knew of the kind's scope; the API
            // server's word decides. A mismatch (a cluster-scoped kind the blueprint does
            // not list, planned before discovery answered) is never applied.
            KindState::Served { namespaced, .. } if namespaced == key.namespace.is_empty() => {
                Err(Error::ScopeMismatch(format!(
                    "{key}: kind {} ({}) is {} on the API server, but the plan placed it {}; nothing of it is applied until the plan knows the kind's scope",
                    key.kind,
                    key.api_version,
                    if namespaced {
                        "namespaced"
                    } else {
                        "cluster-scoped"
                    },
                    if key.namespace.is_empty() {
                        "cluster-wide"
                    } else {
                        "in a namespace"
                    }
                )))
            }
            KindState::Served {
                resource,
                namespaced,
            } => Ok(Some(if namespaced {
                Api::namespaced_with(self.client.clone(), &key.namespace, &resource)
            } else {
                Api::all_with(self.client.clone(), &resource)
            })),
            KindState::Missing(msg) => Err(Error::KindNotServed(msg)),
            KindState::Pending => Ok(None),
        }
    }

    /// Applies `obj` unless `live` already holds it. Returns whether a request was sent.
    pub(crate) async fn apply_child(
        self: &Arc<Self>,
        key: &ObjectKey,
        obj: &Value,
        live: Option<&Value>,
        quiet: bool,
    ) -> Result<bool, Error> {
        let at = self.target(key)?;
        if !Arc::ptr_eq(&at, self) {
            // A placed object: written by its member's cluster.
            return Box::pin(at.apply_child(key, obj, live, quiet)).await;
        }
        if live.is_some_and(|l| is_subset(obj, l)) {
            self.metrics.applies_skipped.fetch_add(1, Ordering::Relaxed);
            return Ok(false);
        }
        if let Some(l) = live
            && let Verdict::Hold(_) =
                self.fights
                    .on_drift(&key.to_string(), obj, l, FIELD_MANAGER, Instant::now())
        {
            // Fought over by another field manager: reported and retried by the caller.
            return Ok(false);
        }
        if live.is_none()
            && let Verdict::Hold(_) = self.fights.on_create(&key.to_string(), Instant::now())
        {
            // Deleted again and again by another actor: reported and retried by the caller.
            return Ok(false);
        }
        let Some(api) = self.child_api(key)? else {
            return Ok(false);
        };
        if live.is_none() && !self.may_create(&api, key, obj).await? {
            return Ok(false);
        }
        // Strict: a field the kind's schema does not declare is refused, never dropped
        // with a warning no one reads (the blueprint author sees it in status).
        let pp = PatchParams::apply(FIELD_MANAGER)
            .force()
            .validation_strict();
        self.metrics.applies.fetch_add(1, Ordering::Relaxed);
        tracing::debug!(
            child = %key,
            differs_at = live.map_or_else(|| "(not in the cache)".to_owned(), |l| {
                crate::plan::unheld_path(obj, l).unwrap_or_default()
            }),
            "applying a child"
        );
        let applied = match api.patch(&key.name, &pp, &Patch::Apply(obj)).await {
            Ok(a) => a,
            // The kind went away (CRD deleted): look it up again from scratch.
            Err(kube::Error::Api(s)) if kind_gone(&s, &key.name) => {
                self.kinds.forget(&key.api_version, &key.kind);
                if let Ok(mut s) = self.snapshot.write() {
                    let group = crate::kinds::group_of(&key.api_version);
                    s.names_mut().forget(group, &key.kind);
                }
                return Err(Error::KindNotServed(format!(
                    "kind {} ({}) is no longer served: {}",
                    key.kind, key.api_version, s.message
                )));
            }
            Err(kube::Error::Api(s)) if refused(&s) => {
                return Err(Error::Refused(format!(
                    "the API server refused {key}: {}",
                    s.message
                )));
            }
            Err(e) => return Err(Error::kube(format!("apply {key}"), e)),
        };
        if live.is_none() {
            self.fights.created(&key.to_string());
        }
        // Keep the snapshot current so the next pass sees what we just wrote (unless a
        // watch event already brought something at least as new).
        let based_on = live.map(|l| {
            l["metadata"]["resourceVersion"]
                .as_str()
                .unwrap_or_default()
        });
        if let Ok(mut v) = serde_json::to_value(&applied) {
            super::fight::keep_what_fights_read(&mut v);
            if let Ok(mut s) = self.snapshot.write() {
                s.put_own_write(v, based_on, quiet);
            }
        }
        Ok(true)
    }

    /// Before applying an object our cache does not hold: whether it may be written. An
    /// object of that name that exists already is written only when it is ours and this
    /// parent's: one not managed by gatewright is never adopted (a user's ConfigMap of the
    /// same name), and one another parent holds is left to it (two Gateways rendering one
    /// fixed name would otherwise overwrite each other forever). When it exists, is ours and
    /// already holds what we render (a child watch that has not listed yet), nothing is
    /// sent. `Ok(false)`: nothing to write.
    async fn may_create(
        self: &Arc<Self>,
        api: &Api<DynamicObject>,
        key: &ObjectKey,
        obj: &Value,
    ) -> Result<bool, Error> {
        // Gateways and routes are watched in full (and the kind's child watch has listed
        // before anything of it is applied): when neither cache knows the name, nothing
        // of it exists, and the read is saved (a fleet's cold start makes one per child
        // otherwise). A create racing ours is as possible as after a read. Not in a
        // member whose watch of the kind has not listed (or, with no class of ours
        // there, does not run): its empty cache says nothing, and a route of the same
        // name that is not ours would be overwritten.
        let gateway_api =
            crate::kinds::group_of(&key.api_version) == crate::gateway::GATEWAY_API_GROUP;
        if (!gateway_api || self.primary_kind_listed(key))
            && self
                .snapshot
                .read()
                .ok()
                .and_then(|s| s.foreign_object_exists(key))
                == Some(false)
        {
            return Ok(true);
        }
        let existing = match api.get_opt(&key.name).await {
            Ok(Some(e)) => e,
            Ok(None) => return Ok(true),
            Err(e) => return Err(Error::kube(format!("read {key}"), e)),
        };
        let mut existing = serde_json::to_value(&existing).unwrap_or(Value::Null);
        if existing["metadata"]["labels"][labels::MANAGED_BY] != labels::MANAGED_BY_VALUE {
            return Err(Error::HeldByAnother(format!(
                "{key} exists and is not managed by gatewright; it is not adopted (delete or rename it, or rename what the template renders)"
            )));
        }
        if labels::parent_uid(&existing) != labels::parent_uid(obj)
            || labels::gateway_uid(&existing) != labels::gateway_uid(obj)
        {
            return Err(Error::HeldByAnother(format!(
                "{key} is already held by {}; nothing is written to it",
                crate::plan::holder(&existing)
            )));
        }
        // Lists of built-in kinds come without apiVersion and kind.
        existing["apiVersion"] = Value::String(key.api_version.clone());
        existing["kind"] = Value::String(key.kind.clone());
        let same = is_subset(obj, &existing);
        if same {
            self.metrics.applies_skipped.fetch_add(1, Ordering::Relaxed);
            super::fight::keep_what_fights_read(&mut existing);
            if let Ok(mut s) = self.snapshot.write() {
                s.put_own_write(existing, None, false);
            }
        }
        Ok(!same)
    }

    /// Deletes a child (a no-op when it is already gone).
    /// Applies a JSON merge patch to a live child (the teardown's drain), as our field
    /// manager. A child gone meanwhile is no error.
    pub(crate) async fn patch_child(
        self: &Arc<Self>,
        key: &ObjectKey,
        patch: &serde_json::Value,
        live: Option<&Value>,
    ) -> Result<(), Error> {
        let at = self.target(key)?;
        if !Arc::ptr_eq(&at, self) {
            return Box::pin(at.patch_child(key, patch, live)).await;
        }
        let Some(api) = self.child_api(key)? else {
            return Ok(());
        };
        tracing::info!(child = %key, %patch, "patching a child (drain, narrowing or release)");
        let pp = PatchParams {
            field_manager: Some(FIELD_MANAGER.to_owned()),
            ..PatchParams::default()
        };
        match api
            .patch(&key.name, &pp, &kube::api::Patch::Merge(patch))
            .await
        {
            Ok(patched) => {
                // The next pass sees what was just written (see `apply_child`).
                let based_on = live.map(|l| {
                    l["metadata"]["resourceVersion"]
                        .as_str()
                        .unwrap_or_default()
                });
                if let Ok(mut v) = serde_json::to_value(&patched) {
                    v["apiVersion"] = Value::String(key.api_version.clone());
                    v["kind"] = Value::String(key.kind.clone());
                    super::fight::keep_what_fights_read(&mut v);
                    if let Ok(mut s) = self.snapshot.write() {
                        s.put_own_write(v, based_on, false);
                    }
                }
                Ok(())
            }
            Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
            Err(e) => Err(Error::kube(format!("patch {key}"), e)),
        }
    }

    pub(crate) async fn delete_child(self: &Arc<Self>, key: &ObjectKey) -> Result<(), Error> {
        let at = self.target(key)?;
        if !Arc::ptr_eq(&at, self) {
            return Box::pin(at.delete_child(key)).await;
        }
        let Some(api) = self.child_api(key)? else {
            return Ok(());
        };
        let child = key.to_string();
        // Sent already, its watch event still on its way: a pass right behind the one that
        // sent it does not send (and log) it again.
        if self.fights.delete_pending(&child, Instant::now()) {
            return Ok(());
        }
        self.metrics.prunes.fetch_add(1, Ordering::Relaxed);
        tracing::info!(child = %key, "deleting a child that is no longer rendered");
        self.fights.expect_delete(&child);
        match api.delete(&key.name, &DeleteParams::background()).await {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(s)) if s.code == 404 => {
                self.fights.forget_delete(&child);
                // Already gone (deleted while our watch was down): the cache learns it
                // now, so nothing waits for a deletion event that will never come.
                if let Ok(mut snap) = self.snapshot.write() {
                    snap.remove_child(key);
                }
                Ok(())
            }
            Err(e) => {
                self.fights.forget_delete(&child);
                Err(Error::kube(format!("delete {key}"), e))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn not_found(message: &str, details_kind: Option<&str>) -> kube::core::Status {
        let mut s = kube::core::Status::failure(message, "NotFound").with_code(404);
        s.details = details_kind.map(|k| serde_json::from_value(json!({"kind": k})).unwrap());
        s
    }

    #[test]
    fn only_a_missing_resource_type_makes_the_kind_gone() {
        // What the API server answers for a resource type it does not serve.
        assert!(kind_gone(
            &not_found("the server could not find the requested resource", None),
            "pub-tls"
        ));
        // A namespace that is not there (a member where it was never made): not the kind.
        assert!(!kind_gone(
            &not_found("namespaces \"team-a\" not found", Some("namespaces")),
            "pub-tls"
        ));
        assert!(!kind_gone(
            &not_found("namespaces \"team-a\" not found", None),
            "pub-tls"
        ));
        // The object itself.
        assert!(!kind_gone(
            &not_found("certificates.cert-manager.io \"pub-tls\" not found", None),
            "pub-tls"
        ));
    }

    #[test]
    fn subset_ignores_fields_only_live_has() {
        let d = json!({"spec": {"a": 1, "l": [{"x": 1}]}, "metadata": {"labels": {"k": "v"}}});
        let l = json!({"spec": {"a": 1.0, "b": 2, "l": [{"x": 1, "y": 2}]}, "metadata": {"labels": {"k": "v", "o": "1"}, "uid": "u"}, "status": {}});
        assert!(is_subset(&d, &l));
        assert!(
            !is_subset(&json!({"spec": {"a": 2}}), &l),
            "drift on an owned field"
        );
        assert!(
            !is_subset(&json!({"spec": {"l": [{"x": 1}, {"x": 2}]}}), &l),
            "list length differs"
        );
        assert!(!is_subset(&json!({"spec": {"c": 1}}), &l), "missing field");
    }
}

#[cfg(test)]
mod budget_tests {
    use super::beyond_budget;
    use serde_json::json;

    #[test]
    fn a_pass_writes_whole_route_plans_up_to_its_budget_and_never_holds_the_gateways() {
        let new = json!({"spec": {"x": 1}});
        let same = json!({"spec": {"x": 1}, "status": {}});
        let old = json!({"spec": {"x": 0}});
        // (object, live, owner): the Gateway's two, then routes 0..4 with one child each,
        // route 1 already holding what it renders, route 3 with two children.
        let children = [
            (&new, None, None),
            (&new, Some(&old), None),
            (&new, None, Some(0)),
            (&new, Some(&same), Some(1)),
            (&new, Some(&old), Some(2)),
            (&new, None, Some(3)),
            (&new, None, Some(3)),
            (&new, None, Some(4)),
        ];
        let held = |budget| beyond_budget(children.iter().copied(), budget);
        assert!(held(10).is_empty());
        assert_eq!(
            held(2),
            [3, 4].into(),
            "routes 0 and 2 write; 1 has nothing to write"
        );
        assert_eq!(
            held(0),
            [0, 2, 3, 4].into(),
            "the Gateway's own are never held"
        );
    }
}
