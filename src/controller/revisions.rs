//! A blueprint's revisions and the rollout of its newest one: the revision object made for
//! each change of its spec, old ones pruned past the history limit (never one a Gateway
//! renders or is pinned to), and one step of [`crate::plan::waves`] per pass, its
//! decisions written to the blueprint's status and its Gateways planned again.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use kube::api::{Api, DeleteParams, ObjectMeta, PostParams};

use super::cluster::Cluster;
use super::common::{Error, Work};
use crate::api::{
    GatewayClassBlueprint, GatewayClassBlueprintRevision, GatewayClassBlueprintRevisionSpec,
    RevisionCount, RolloutPhase, RolloutPolicy, RolloutStatus,
};
use crate::gateway::conditions::Cond;
use crate::plan::revisions;
use crate::plan::waves::{ClassGateway, Elsewhere, FleetView, Health, Note, Stands};
use crate::snapshot::{Key, Snapshot};

/// The label naming the blueprint a revision belongs to.
pub const BLUEPRINT_LABEL: &str = "gatewright.dev/blueprint";

/// Revisions kept without a `rolloutPolicy.historyLimit`.
const HISTORY: usize = 10;

/// What the pass reads of a blueprint, under one snapshot lock.
pub(super) struct Read {
    /// The blueprint.
    pub object: GatewayClassBlueprint,
    /// Its newest revision.
    newest: NewestRead,
    /// Its revisions' names, oldest first.
    revisions: Vec<String>,
    /// The Gateways of its classes, in key order.
    members: Vec<ClassGateway>,
    /// Revisions a Gateway renders or is pinned to.
    in_use: BTreeSet<String>,
    /// Revision 0 to make before the newest (`revisions::predecessor`): the previous
    /// release's spec, which Gateways that release converged render. Only while its object
    /// is not made and a Gateway renders it.
    predecessor: Option<(String, crate::api::GatewayClassBlueprintSpec, String)>,
}

/// The newest revision of a blueprint, as read under the lock
/// ([`crate::plan::revisions::Newest`], owned).
#[derive(Clone, Debug)]
struct NewestRead {
    /// `<blueprint>-<n>`.
    name: String,
    /// `n`.
    number: i64,
    /// The spec's hash.
    hash: String,
    /// Whether its revision object exists.
    exists: bool,
}

/// Reads blueprint `name` and the Gateways of its classes.
pub(super) fn read(s: &Snapshot, name: &str) -> Option<Read> {
    let bp = s.blueprint(name)?;
    let newest = revisions::newest(s, bp);
    let members = crate::plan::waves::members(s, name);
    let mut in_use: BTreeSet<String> = members
        .iter()
        .flat_map(|m| m.revision.iter().chain(m.pinned_to.iter()).cloned())
        .collect();
    if let Some(r) = bp.object.status.as_ref().and_then(|s| s.rollout.as_ref()) {
        in_use.insert(r.revision.clone());
        in_use.extend(r.from.clone());
    }
    let predecessor = revisions::predecessor(s, bp)
        .filter(|n| s.revision(n).is_none() && in_use.contains(n))
        .and_then(|n| match &bp.previous {
            Some(Ok(p)) => Some((n, p.spec.clone(), p.hash.clone())),
            _ => None,
        });
    Some(Read {
        object: bp.object.clone(),
        newest: NewestRead {
            exists: newest.object.is_some(),
            name: newest.name,
            number: newest.number,
            hash: newest.hash,
        },
        revisions: s
            .revisions_of(name)
            .iter()
            .map(|r| r.name().to_owned())
            .collect(),
        members,
        in_use,
        predecessor,
    })
}

/// Per revision some Gateway renders: how many do and how many are ready.
fn counts(members: &[ClassGateway], newest: &str) -> Vec<RevisionCount> {
    let mut by: BTreeMap<String, (u32, u32)> = BTreeMap::new();
    for m in members {
        let e = by
            .entry(m.revision.clone().unwrap_or_else(|| newest.to_owned()))
            .or_default();
        e.0 += 1;
        if m.health == Health::Ready {
            e.1 += 1;
        }
    }
    by.into_iter()
        .map(|(name, (gateways, ready))| RevisionCount {
            name,
            gateways,
            ready,
        })
        .collect()
}

/// The blueprint's `Progressing` condition for a rollout.
pub(super) fn progressing(r: &RolloutStatus) -> Cond {
    let t = "Progressing";
    match r.phase {
        RolloutPhase::Progressing => Cond::t(t, "WaveProgressing", &r.message),
        RolloutPhase::Paused => Cond::t(t, "Paused", &r.message),
        RolloutPhase::Complete => Cond::t(t, "RolloutComplete", &r.message),
        RolloutPhase::Halted => Cond::f(t, "RolloutHalted", &r.message),
        RolloutPhase::RolledBack => Cond::f(t, "RolledBack", &r.message),
    }
}

/// What one pass decided.
pub(super) struct Outcome {
    /// The revision the spec is.
    pub current: String,
    /// Per revision counts.
    pub counts: Vec<RevisionCount>,
    /// The rollout status.
    pub rollout: Option<RolloutStatus>,
    /// Events.
    pub notes: Vec<Note>,
    /// Gateways to plan again.
    pub moved: Vec<Key>,
    /// When to pass again.
    pub again: Option<Duration>,
}

impl Cluster {
    /// Makes revision `(name, number, hash)` of `bp` holding `template`: false when that
    /// failed and is to be tried again at the next pass (already made, or the kind not
    /// installed, is not a failure).
    async fn make_revision(
        &self,
        api: &Api<GatewayClassBlueprintRevision>,
        bp: &GatewayClassBlueprint,
        (name, number, hash): (&str, i64, &str),
        template: crate::api::GatewayClassBlueprintSpec,
    ) -> bool {
        let blueprint = bp.metadata.name.clone().unwrap_or_default();
        let rev = GatewayClassBlueprintRevision {
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                labels: Some(BTreeMap::from([(
                    BLUEPRINT_LABEL.into(),
                    blueprint.clone(),
                )])),
                owner_references: Some(vec![
                    k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
                        api_version: crate::api::API_VERSION.into(),
                        kind: crate::api::BLUEPRINT_KIND.into(),
                        name: blueprint.clone(),
                        uid: bp.metadata.uid.clone().unwrap_or_default(),
                        controller: Some(true),
                        block_owner_deletion: None,
                    },
                ]),
                ..ObjectMeta::default()
            },
            spec: GatewayClassBlueprintRevisionSpec {
                blueprint: blueprint.clone(),
                revision: number,
                hash: hash.to_owned(),
                template,
            },
        };
        match api.create(&PostParams::default(), &rev).await {
            Ok(made) => {
                tracing::info!(%blueprint, revision = %name, "made a revision");
                if let Ok(mut s) = self.snapshot.write() {
                    s.put_revision(made);
                }
                true
            }
            // Made meanwhile (its watch event brings it), or the CRD is not installed
            // (Gateways render the blueprint's spec, named as its revision will be).
            Err(kube::Error::Api(s)) if s.code == 409 || s.code == 404 => true,
            // Not fatal (a member whose RBAC predates revisions, say): the Gateways
            // render the spec, named as its revision will be; the status is written.
            Err(e) => {
                tracing::warn!(%blueprint, revision = %name, error = %e, "failed to make a blueprint revision; retried at the next pass");
                false
            }
        }
    }

    /// Makes the newest revision's object, prunes revisions past the history limit, and
    /// steps the rollout. Called from the blueprint's pass with what [`read`] gave.
    pub(super) async fn revisions_pass(self: &Arc<Self>, r: &Read) -> Result<Outcome, Error> {
        let name = r.object.metadata.name.clone().unwrap_or_default();
        let NewestRead {
            name: newest,
            number,
            hash,
            exists,
        } = r.newest.clone();
        let api: Api<GatewayClassBlueprintRevision> = Api::all(self.client.clone());
        // Revision 0 first: until it is made the Gateways the previous release converged
        // hold it by the annotation alone, and once the newest exists they would lose it.
        let mut made_predecessor = true;
        if let Some((zero, spec, hash)) = &r.predecessor {
            made_predecessor = self
                .make_revision(&api, &r.object, (zero, 0, hash), spec.clone())
                .await;
        }
        if !exists && made_predecessor {
            let mut template = r.object.spec.clone();
            template.rollout_policy = None;
            self.make_revision(&api, &r.object, (&newest, number, &hash), template)
                .await;
        }
        // History: the newest `limit`, and whatever a Gateway renders or is pinned to.
        let limit = r
            .object
            .spec
            .rollout_policy
            .as_ref()
            .and_then(|p| p.history_limit)
            .map_or(HISTORY, |n| usize::try_from(n).unwrap_or(HISTORY));
        let old = r.revisions.len().saturating_sub(limit);
        for gone in r.revisions[..old]
            .iter()
            .filter(|n| !r.in_use.contains(*n) && **n != newest)
        {
            match api.delete(gone, &DeleteParams::default()).await {
                Ok(_) => {
                    tracing::info!(blueprint = %name, revision = %gone, "pruned a revision past the history limit");
                }
                Err(kube::Error::Api(s)) if s.code == 404 => {}
                Err(e) => {
                    tracing::warn!(blueprint = %name, revision = %gone, error = %e, "failed to prune a blueprint revision; retried at the next pass");
                }
            }
        }
        let status = r.object.status.clone().unwrap_or_default();
        let mut out = Outcome {
            current: newest.clone(),
            counts: counts(&r.members, &newest),
            rollout: None,
            notes: Vec::new(),
            moved: Vec::new(),
            again: None,
        };
        let Some(policy) = &r.object.spec.rollout_policy else {
            return Ok(out);
        };
        let now = k8s_openapi::jiff::Timestamp::now();
        let mut fleet = self.fleet_view(policy);
        let step = |fleet: &FleetView| {
            crate::plan::waves::step(
                policy,
                &newest,
                status.current_revision.as_deref(),
                status.rollout.as_ref(),
                &r.members,
                fleet,
                now,
            )
        };
        let mut step_out = step(&fleet);
        if step_out.needs_fleet {
            // A wave of the fleet holds the next one: how it stands in the other members.
            fleet.others = Some(self.read_elsewhere(&name, &r.newest.hash).await);
            step_out = step(&fleet);
        }
        let step = step_out;
        let phase_changed =
            step.status.as_ref().map(|s| s.phase) != status.rollout.as_ref().map(|s| s.phase);
        out.moved = if phase_changed {
            // Every Gateway's condition names the phase.
            r.members.iter().filter_map(|m| parse_key(&m.key)).collect()
        } else {
            step.moved.iter().filter_map(|k| parse_key(k)).collect()
        };
        out.rollout = step.status;
        out.notes = step.notes;
        out.again = step.again;
        Ok(out)
    }
}

/// How long a rollout step waits for another member's blueprint.
const READ_ELSEWHERE: Duration = Duration::from_secs(5);

impl Cluster {
    /// The members of the inventory, as the hub last saw them.
    fn inventory(&self) -> Vec<crate::snapshot::fleet::FleetMember> {
        self.fleet()
            .and_then(|f| f.hub())
            .and_then(|hub| {
                hub.snapshot
                    .read()
                    .ok()
                    .map(|s| s.fleet().values().cloned().collect())
            })
            .unwrap_or_default()
    }

    /// Where this cluster stands in the fleet for a rollout of `policy`: its ClusterProfile
    /// labels, and the other members not read yet (read once a step asks,
    /// [`Cluster::read_elsewhere`]). A policy without a wave with a `clusterSelector`
    /// needs nothing of the fleet.
    fn fleet_view(&self, policy: &RolloutPolicy) -> FleetView {
        if !policy.waves.iter().any(|w| w.cluster_selector.is_some()) {
            return FleetView::default();
        }
        let here = self.id.as_str();
        FleetView {
            labels: self
                .inventory()
                .into_iter()
                .find(|m| m.name == here)
                .map(|m| m.labels),
            others: None,
        }
    }

    /// How the rollout of blueprint `name` (spec hash `hash`) stands in every other member
    /// of the inventory: from the member's snapshot when this replica watches it there,
    /// else read there (one GET each, side by side, [`READ_ELSEWHERE`] at most).
    async fn read_elsewhere(&self, name: &str, hash: &str) -> Vec<Elsewhere> {
        let Some(fleet) = self.fleet() else {
            return Vec::new();
        };
        let here = self.id.as_str();
        let inventory = self.inventory();
        let reads = inventory.iter().filter(|m| m.name != here).map(|m| {
            let cluster = fleet.get(&super::common::ClusterId::new(&m.name));
            async move {
                let stands = match cluster {
                    None => Stands::Unread(
                        m.unserved
                            .clone()
                            .unwrap_or_else(|| "not engaged".to_owned()),
                    ),
                    Some(c) => {
                        // A member whose blueprints this replica watches has it in its
                        // snapshot; one it only observes (or not yet watching them) is read.
                        let watched = c
                            .snapshot
                            .read()
                            .ok()
                            .and_then(|s| s.blueprint(name).map(|b| b.object.clone()));
                        let read = match watched {
                            Some(bp) => Ok(Ok(Some(bp))),
                            None => {
                                let api: Api<GatewayClassBlueprint> = Api::all(c.client.clone());
                                tokio::time::timeout(READ_ELSEWHERE, api.get_opt(name)).await
                            }
                        };
                        match read {
                            Ok(Ok(Some(bp))) => crate::plan::waves::stands(&bp, hash),
                            Ok(Ok(None)) => Stands::Absent,
                            Ok(Err(e)) => Stands::Unread(e.to_string()),
                            Err(_) => Stands::Unread(format!(
                                "no answer within {} s",
                                READ_ELSEWHERE.as_secs()
                            )),
                        }
                    }
                };
                Elsewhere {
                    member: m.name.clone(),
                    labels: m.labels.clone(),
                    stands,
                }
            }
        });
        futures::future::join_all(reads).await
    }
}

fn parse_key(k: &str) -> Option<Key> {
    k.split_once('/').map(|(n, m)| Key::new(n, m))
}

/// A Gateway's blueprint, and whether it has a rollout that its status should move (its
/// pass is run again when the Gateway reports).
fn blueprint_watching(
    s: &Snapshot,
    gw: &gateway_api::apis::standard::gateways::Gateway,
) -> Option<(String, bool)> {
    let class = s.class(&gw.spec.gateway_class_name)?;
    let bp = crate::plan::class::blueprint_of(s, class).ok()?;
    let name = bp.object.metadata.name.clone()?;
    if bp.object.spec.rollout_policy.is_none() {
        return Some((name, false));
    }
    let done = bp
        .object
        .status
        .as_ref()
        .and_then(|st| st.rollout.as_ref())
        .is_some_and(|r| {
            matches!(
                r.phase,
                RolloutPhase::Complete | RolloutPhase::Halted | RolloutPhase::RolledBack
            ) && revisions::newest(s, bp).name == r.revision
        });
    Some((name, !done))
}

/// After a Gateway's pass reported its status: its blueprint's pass now when a rollout of
/// it is under way (its next step may wait for this Gateway); else a pass after
/// [`PROGRESS_HOLD`](super::settle::PROGRESS_HOLD), one at a time per blueprint, for the
/// per-revision counts of its status (without it they would say what the last change or
/// resync counted, and the next start would correct them: a write of a restart).
pub(super) fn on_gateway_reported(ctl: &Arc<Cluster>, key: &Key) {
    let Some((bp, watching)) = ctl
        .snapshot
        .read()
        .ok()
        .and_then(|s| blueprint_watching(&s, &s.gateway(key)?.typed))
    else {
        return;
    };
    if watching {
        ctl.enqueue(Work::Blueprint(bp));
        return;
    }
    let first = ctl.memory.with(&count_key(&bp), |m| {
        !std::mem::replace(&mut m.count_pass_due, true)
    });
    if first == Some(true) {
        ctl.enqueue_after(Work::Blueprint(bp), super::settle::PROGRESS_HOLD);
    }
}

/// Where a blueprint's status hold and due count pass are kept.
pub(super) fn count_key(blueprint: &str) -> Key {
    Key::new("", format!("GatewayClassBlueprint/{blueprint}"))
}

/// A blueprint pass runs: a count pass asked for after it is another one.
pub(super) fn counted(ctl: &Cluster, blueprint: &str) {
    ctl.memory
        .with(&count_key(blueprint), |m| m.count_pass_due = false);
}
