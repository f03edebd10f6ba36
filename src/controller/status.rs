//! Status writes: a Gateway's (the planned status, diffed against what it holds) and a
//! route's `status.parents` entries of ours (read-modify-write, retried on conflict),
//! the Events that go with them, and the comparison that ignores timestamps.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use gateway_api::apis::standard::gateways::Gateway;
use kube::Resource;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use super::cluster::Cluster;
use super::common::Error;
use super::echo::{norm_status, now, own_status_key, strip_times};
use crate::gateway::ParentAttachment;
use crate::plan::GatewayStatusPlan;
use crate::plan::gateway::in_scope;
use crate::plan::status::next_route_parents;
use crate::snapshot::{Key, RouteKey};

/// Attempts of a route status write that loses to concurrent writers.
const ROUTE_STATUS_ATTEMPTS: usize = 5;

/// An Event note: at most 1 kB, cut on a UTF-8 boundary.
fn note(s: &str) -> String {
    if s.len() <= 1024 {
        s.to_owned()
    } else {
        format!("{}...", &s[..s.floor_char_boundary(1020)])
    }
}

impl Cluster {
    /// Publishes an Event about `obj`; a failure is logged, never fatal.
    pub(super) async fn event<K: Resource<DynamicType = ()>>(
        &self,
        obj: &K,
        warning: bool,
        reason: &str,
        action: &str,
        message: &str,
    ) {
        // Another replica writes here (it leads): its Events are its own.
        if self.writes_here().is_err() {
            return;
        }
        if let Err(e) = self
            .recorder
            .publish(
                &obj.object_ref(&()),
                warning,
                reason,
                action,
                &note(message),
            )
            .await
        {
            tracing::debug!(error = %e, "failed to publish an event");
        }
    }

    /// Writes a Gateway's planned status when it differs from what the Gateway holds
    /// (timestamps aside).
    pub(super) async fn write_gateway_status(
        &self,
        key: &Key,
        gw: &Gateway,
        status: &GatewayStatusPlan,
    ) -> Result<Option<std::time::Duration>, Error> {
        let desired = status.to_status(gw.status.as_ref(), gw.metadata.generation, &now());
        let mut desired_json = serde_json::to_value(&desired).unwrap_or(Value::Null);
        if desired.addresses.is_none() {
            // A merge patch removes the addresses only when it names them.
            desired_json["addresses"] = Value::Null;
        }
        let current =
            serde_json::to_value(gw.status.clone().unwrap_or_default()).unwrap_or(Value::Null);
        let compared = norm_status(&desired_json);
        let own = own_status_key("Gateway", &key.namespace, &key.name);
        if compared == strip_times(&current) && self.own_status.cache_has_own(&own, &current) {
            return Ok(None);
        }
        let started = std::time::Instant::now();
        // Only our own last status is gathered with: anyone else's edit is undone at once.
        if crate::plan::progress::only_progress(&current, &desired_json)
            && self.own_status.is_own(&own, &current)
            && let Some(wait) = self.progress_hold(key, started)
        {
            return Ok(Some(wait));
        }
        self.metrics.status_writes.fetch_add(1, Ordering::Relaxed);
        if tracing::enabled!(tracing::Level::DEBUG) {
            let changed = crate::plan::progress::changed_paths(&strip_times(&current), &compared);
            // What it says now, when that is not Programmed: the reason is in the message.
            let programmed = desired
                .conditions
                .iter()
                .flatten()
                .find(|c| {
                    c.type_ == crate::gateway::conditions::types::PROGRAMMED && c.status != "True"
                })
                .map(|c| format!("{}: {}", c.reason, c.message));
            tracing::debug!(gateway = %key, ?changed, ?programmed, "writing the Gateway status");
        }
        self.own_status.expect(own, &compared);
        let api: Api<Gateway> = Api::namespaced(self.client.clone(), &key.namespace);
        let mut written = api
            .patch_status(
                &key.name,
                &PatchParams::default(),
                &Patch::Merge(&json!({ "status": desired_json })),
            )
            .await
            .map_err(|e| Error::kube("write the Gateway status", e))?;
        self.status_written(key, started);
        written.metadata.managed_fields = None;
        self.keep_written_gateway(key, gw, written);
        Ok(None)
    }

    /// Writes the planned route counts (`attachedRoutes` per listener) ahead of the rest
    /// of a pass, when they are all that differs from the written ones for this purpose:
    /// a Gateway's count is one status write and does not wait behind its routes' copies
    /// and statuses (a thousand routes arriving together). Only into a status that has
    /// these listeners already (a first status is the full write's), and as
    /// [`super::settle::counts_wait`] allows: the Gateway as written (`Some`), or when to
    /// look again while a burst of routes goes on.
    pub(super) async fn write_route_counts(
        &self,
        key: &Key,
        gw: &Gateway,
        status: &GatewayStatusPlan,
    ) -> Result<(Option<Gateway>, Option<Duration>), Error> {
        // Compared on the typed status: every pass asks, few write.
        let Some(written) = gw.status.as_ref().and_then(|s| s.listeners.as_ref()) else {
            return Ok((None, None));
        };
        let same_listeners = written.len() == status.listeners.len()
            && status
                .listeners
                .iter()
                .zip(written)
                .all(|((l, _), w)| l.name == w.name);
        if !same_listeners
            || status
                .listeners
                .iter()
                .zip(written)
                .all(|((l, _), w)| l.attached_routes == w.attached_routes)
        {
            return Ok((None, None));
        }
        let counts: Vec<i32> = status
            .listeners
            .iter()
            .map(|(l, _)| l.attached_routes)
            .collect();
        let started = std::time::Instant::now();
        let wait = self
            .memory
            .with(key, |m| {
                let last_write = m.status_written_at;
                super::settle::counts_wait(&mut m.counts_seen, &counts, last_write, started)
            })
            .flatten();
        if wait.is_some() {
            return Ok((None, wait));
        }
        let mut desired =
            serde_json::to_value(gw.status.clone().unwrap_or_default()).unwrap_or(Value::Null);
        if let Some(ls) = desired["listeners"].as_array_mut() {
            for (l, c) in ls.iter_mut().zip(&counts) {
                l["attachedRoutes"] = json!(c);
            }
        }
        self.metrics.status_writes.fetch_add(1, Ordering::Relaxed);
        tracing::debug!(gateway = %key, ?counts, "writing the Gateway's route counts");
        let own = own_status_key("Gateway", &key.namespace, &key.name);
        self.own_status.expect(own, &norm_status(&desired));
        let api: Api<Gateway> = Api::namespaced(self.client.clone(), &key.namespace);
        let mut written = api
            .patch_status(
                &key.name,
                &PatchParams::default(),
                &Patch::Merge(&json!({ "status": { "listeners": desired["listeners"] } })),
            )
            .await
            .map_err(|e| Error::kube("write the Gateway's route counts", e))?;
        self.status_written(key, started);
        written.metadata.managed_fields = None;
        self.keep_written_gateway(key, gw, written.clone());
        Ok((Some(written), None))
    }

    /// Puts the Gateway as a status write returned it into the snapshot (unless a watch
    /// event brought a newer version meanwhile): the next pass, often right behind (a
    /// child became ready), compares with it, not with the version before the write, whose
    /// echo is still on its way (and would make it write again, or take progress for a
    /// transition).
    fn keep_written_gateway(&self, key: &Key, before: &Gateway, written: Gateway) {
        if let Ok(mut s) = self.snapshot.write()
            && s.gateway(key).is_some_and(|e| {
                e.typed.metadata.resource_version == before.metadata.resource_version
            })
        {
            s.put_gateway(written);
        }
    }

    /// Writes a ListenerSet's planned status when it differs from what the set holds
    /// (timestamps aside). The set's status is ours alone: its parent is our Gateway.
    pub(super) async fn write_listener_set_status(
        &self,
        set: &crate::plan::status::ListenerSetStatusPlan,
    ) -> Result<(), Error> {
        let key = Key::new(set.namespace.clone(), set.name.clone());
        let Some(current) = self
            .snapshot
            .read()
            .map_err(|_| Error::SnapshotPoisoned)?
            .listener_set(&key)
            .map(|e| e.json["status"].clone())
        else {
            return Ok(());
        };
        let desired = set.to_status(&current, &now());
        let compared = norm_status(&desired);
        let own = own_status_key(
            crate::gateway::listenersets::KIND,
            &set.namespace,
            &set.name,
        );
        if compared == norm_status(&current) && self.own_status.cache_has_own(&own, &current) {
            return Ok(());
        }
        self.metrics.status_writes.fetch_add(1, Ordering::Relaxed);
        self.own_status.expect(own, &compared);
        let ar = kube::api::ApiResource::from_gvk_with_plural(
            &kube::api::GroupVersionKind::gvk(
                crate::gateway::GATEWAY_API_GROUP,
                "v1",
                crate::gateway::listenersets::KIND,
            ),
            "listenersets",
        );
        let api: Api<DynamicObject> =
            Api::namespaced_with(self.client.clone(), &set.namespace, &ar);
        match api
            .patch_status(
                &set.name,
                &PatchParams::default(),
                &Patch::Merge(&json!({ "status": desired })),
            )
            .await
        {
            Ok(_) => Ok(()),
            // Deleted meanwhile: nothing to report on.
            Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
            Err(e) => Err(Error::kube(
                format!("write the status of ListenerSet {key}"),
                e,
            )),
        }
    }

    /// Writes our `status.parents` entries of a route: with `Some((gateway, entries))`,
    /// the entries for that Gateway are replaced; ours for other Gateways still in the
    /// spec and still ours are kept; entries of other controllers are never touched
    /// (see [`next_route_parents`]). Read-modify-write with the resourceVersion, retried
    /// on conflict.
    pub(crate) async fn write_route_status(
        self: &Arc<Self>,
        rkey: &RouteKey,
        update: Option<(&Key, &[ParentAttachment])>,
    ) -> Result<(), Error> {
        let written: Vec<(&Key, &[ParentAttachment])> = update.into_iter().collect();
        // What `route` should hold, or `None` when it already does.
        let next = |route: &Value| -> Option<Vec<Value>> {
            let next = {
                let snap = self.snapshot.read().ok()?;
                next_route_parents(
                    route,
                    &written,
                    |gw| in_scope(&snap, gw).is_ok(),
                    |k| snap.listener_set_parent(k),
                    &now(),
                )
            };
            let current = &route["status"]["parents"];
            let current = if current.is_null() {
                json!([])
            } else {
                current.clone()
            };
            (strip_times(&Value::Array(next.clone())) != strip_times(&current)).then_some(next)
        };
        // The watched copy first: when it already holds what we would write, nothing to do.
        let cached = self
            .snapshot
            .read()
            .map_err(|_| Error::SnapshotPoisoned)?
            .route(rkey)
            .map(|r| (r.json(), r.status_exact));
        let crate::snapshot::RouteKeyParts {
            kind,
            namespace: ns,
            name,
        } = &**rkey;
        if cached.as_ref().is_some_and(|(r, _)| {
            next(r).is_none()
                && self
                    .own_status
                    .cache_has_own(&own_status_key(kind, ns, name), &r["status"])
        }) {
            return Ok(());
        }
        let Some(row) = crate::gateway::route_kinds::by_kind(kind) else {
            return Ok(());
        };
        let ar = route_resource(row);
        let api: Api<DynamicObject> = Api::namespaced_with(self.client.clone(), ns, &ar);
        let action = format!("write the status of {kind} {ns}/{name}");
        // The first attempt starts from the watched copy when it holds the status exactly
        // as the server has it: its resourceVersion makes a stale copy a conflict, and
        // the attempts after a conflict read the route afresh. (A read per status write
        // was a fifth of a cold start's requests.)
        let mut from_cache = cached.filter(|(_, exact)| *exact).map(|(r, _)| r);
        for _ in 0..ROUTE_STATUS_ATTEMPTS {
            let mut obj = match from_cache.take() {
                Some(r) => r,
                None => match api
                    .get_opt(name)
                    .await
                    .map_err(|e| Error::kube(format!("read {kind} {ns}/{name}"), e))?
                {
                    Some(route) => serde_json::to_value(&route).unwrap_or(Value::Null),
                    None => return Ok(()),
                },
            };
            let Some(parents) = next(&obj) else {
                return Ok(());
            };
            obj["status"]["parents"] = Value::Array(parents);
            let Ok(body) = serde_json::from_value::<DynamicObject>(obj) else {
                return Ok(());
            };
            self.metrics.status_writes.fetch_add(1, Ordering::Relaxed);
            self.own_status
                .expect(own_status_key(kind, ns, name), &body.data["status"]);
            let based_on = body.metadata.resource_version.clone();
            match api
                .replace_status(name, &PostParams::default(), &body)
                .await
            {
                Ok(written) => {
                    self.keep_written_route(rkey, based_on.as_deref(), written);
                    return Ok(());
                }
                Err(kube::Error::Api(s)) if s.code == 409 => {}
                Err(e) => return Err(Error::kube(action, e)),
            }
        }
        Err(Error::Conflict {
            action,
            attempts: ROUTE_STATUS_ATTEMPTS,
        })
    }

    /// The snapshot holds the route as our status write left it at once (unless a watch
    /// event brought a newer version meanwhile): a pass right behind this one (a child
    /// became ready, another of its Gateways) compares with it, not with the version
    /// before our write whose echo is still on its way, so it neither writes the same
    /// status again nor sends a write bound to fail on that older resourceVersion.
    fn keep_written_route(&self, rkey: &RouteKey, based_on: Option<&str>, written: DynamicObject) {
        let Ok(mut json) = serde_json::to_value(written) else {
            return;
        };
        if let Some(m) = json["metadata"].as_object_mut() {
            m.remove("managedFields");
        }
        if let Ok(mut s) = self.snapshot.write()
            && s.route(rkey)
                .is_some_and(|r| r.json()["metadata"]["resourceVersion"].as_str() == based_on)
        {
            s.put_route_json(json);
        }
    }

    /// Removes our stale entries from a route (parentRef gone, Gateway no longer ours).
    pub(crate) async fn reconcile_route(
        self: &Arc<Self>,
        rkey: &RouteKey,
    ) -> Result<Option<Duration>, Error> {
        self.write_route_status(rkey, None).await?;
        Ok(None)
    }
}

/// Where the API server serves a route kind.
pub(crate) fn route_resource(
    row: &crate::gateway::route_kinds::RouteKind,
) -> kube::api::ApiResource {
    kube::api::ApiResource::from_gvk_with_plural(
        &kube::api::GroupVersionKind::gvk(crate::gateway::GATEWAY_API_GROUP, row.version, row.kind),
        row.plural,
    )
}
