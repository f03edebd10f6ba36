//! Tests of a rollout in waves: the shared Gateways and policy, then waves released in
//! order, halts, deadlines, pauses, selectors, the preview and a Gateway's health;
//! `budget.rs` the issuance budget, `gate.rs` a wave's gate.

mod budget;
mod fleet;
mod gate;

use std::collections::BTreeMap;
use std::time::Duration;

use super::*;
use crate::api::{IssuanceBudget, Issued, OnFailure, Wave};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

fn m(name: &str, revision: &str, health: Health) -> ClassGateway {
    ClassGateway {
        key: format!("ns/{name}"),
        labels: BTreeMap::from([("tier".to_owned(), name[..1].to_owned())]),
        namespace_labels: BTreeMap::new(),
        pinned_to: None,
        revision: Some(revision.to_owned()),
        health,
        certificates: 1,
        object: None,
    }
}

fn policy() -> RolloutPolicy {
    RolloutPolicy {
        waves: vec![
            Wave {
                count: Some(1),
                ..Default::default()
            },
            Wave {
                percent: Some(50),
                bake_seconds: Some(30),
                ..Default::default()
            },
        ],
        ..Default::default()
    }
}

/// A step in a cluster that is not a fleet member.
fn step(
    policy: &RolloutPolicy,
    target: &str,
    current: Option<&str>,
    old: Option<&RolloutStatus>,
    members: &[ClassGateway],
    now: Timestamp,
) -> Step {
    super::step(
        policy,
        target,
        current,
        old,
        members,
        &FleetView::default(),
        now,
    )
}

fn t(s: i64) -> Timestamp {
    Timestamp::from_second(1_800_000_000 + s).unwrap()
}

#[test]
fn waves_release_in_order_and_wait_for_health_and_bake() {
    let p = policy();
    let mut ms: Vec<ClassGateway> = ["a", "b", "c", "d"]
        .iter()
        .map(|n| m(n, "bp-1", Health::Ready))
        .collect();
    let s = step(&p, "bp-2", Some("bp-1"), None, &ms, t(0));
    let st = s.status.clone().unwrap();
    assert_eq!(st.from.as_deref(), Some("bp-1"));
    assert_eq!(st.waves.len(), 1);
    assert_eq!(st.waves[0].gateways, vec!["ns/a"]);
    assert_eq!(s.moved, vec!["ns/a"]);
    // a is on bp-2 but not ready: nothing more.
    ms[0].revision = Some("bp-2".into());
    ms[0].health = Health::NotReady("children".into());
    let s = step(&p, "bp-2", Some("bp-1"), Some(&st), &ms, t(5));
    let st = s.status.clone().unwrap();
    assert_eq!(st.waves.len(), 1);
    assert!(s.moved.is_empty());
    assert!(st.message.contains("ns/a: children"), "{}", st.message);
    // Ready: the second wave takes 50 % of 4 = 2 Gateways.
    ms[0].health = Health::Ready;
    let s = step(&p, "bp-2", Some("bp-1"), Some(&st), &ms, t(10));
    let st = s.status.clone().unwrap();
    assert_eq!(st.waves[1].gateways, vec!["ns/b", "ns/c"]);
    for g in &mut ms[1..3] {
        g.revision = Some("bp-2".into());
    }
    // Ready, but baking 30 s.
    let s = step(&p, "bp-2", Some("bp-1"), Some(&st), &ms, t(11));
    let st = s.status.clone().unwrap();
    assert_eq!(st.waves.len(), 2);
    assert_eq!(s.again, Some(Duration::from_secs(30)));
    let s = step(&p, "bp-2", Some("bp-1"), Some(&st), &ms, t(41));
    let st = s.status.clone().unwrap();
    assert_eq!(st.waves[2].name, "rest");
    assert_eq!(st.waves[2].gateways, vec!["ns/d"]);
    ms[3].revision = Some("bp-2".into());
    let s = step(&p, "bp-2", Some("bp-1"), Some(&st), &ms, t(42));
    assert_eq!(s.status.unwrap().phase, RolloutPhase::Complete);
}

/// Each wave's state and what holds the rollout are named in the status (not implied by
/// which fields are set, nor told by a message's wording), and every pass is recorded.
#[test]
fn each_wave_and_what_holds_the_rollout_are_named() {
    use crate::api::{HoldReason, WaveState};
    let mut p = policy();
    let mut ms: Vec<ClassGateway> = ["a", "b", "c", "d"]
        .iter()
        .map(|n| m(n, "bp-1", Health::Ready))
        .collect();
    let state = |st: &RolloutStatus, i: usize| st.waves[i].state;
    // The canary moved, not on the revision yet.
    let st = step(&p, "bp-2", Some("bp-1"), None, &ms, t(0))
        .status
        .unwrap();
    assert_eq!(state(&st, 0), Some(WaveState::Waiting));
    assert_eq!(st.hold, None);
    // Ready: passed (recorded), the next wave starts and waits for its Gateways.
    ms[0].revision = Some("bp-2".into());
    let st = step(&p, "bp-2", Some("bp-1"), Some(&st), &ms, t(10))
        .status
        .unwrap();
    assert_eq!(state(&st, 0), Some(WaveState::Passed));
    assert_eq!(st.waves[0].passed_at, Some(Time(t(10))));
    assert_eq!(state(&st, 1), Some(WaveState::Waiting));
    // Its Gateways ready: it bakes.
    for g in &mut ms[1..3] {
        g.revision = Some("bp-2".into());
    }
    let st = step(&p, "bp-2", Some("bp-1"), Some(&st), &ms, t(11))
        .status
        .unwrap();
    assert_eq!(state(&st, 1), Some(WaveState::Baking));
    // Paused: the hold says so; resumed: nothing holds it.
    p.paused = true;
    let st = step(&p, "bp-2", Some("bp-1"), Some(&st), &ms, t(12))
        .status
        .unwrap();
    assert_eq!(
        (st.phase, st.hold),
        (RolloutPhase::Paused, Some(HoldReason::Paused))
    );
    p.paused = false;
    let st = step(&p, "bp-2", Some("bp-1"), Some(&st), &ms, t(13))
        .status
        .unwrap();
    assert_eq!(st.hold, None);
    // A Gateway of a wave the revision cannot render: the wave failed.
    ms[1].health = Health::Failed("template gateway: bad".into());
    let st = step(&p, "bp-2", Some("bp-1"), Some(&st), &ms, t(14))
        .status
        .unwrap();
    assert_eq!(st.phase, RolloutPhase::Halted);
    assert_eq!(state(&st, 1), Some(WaveState::Failed));
}

#[test]
fn a_revision_that_does_not_render_halts_in_the_first_wave_or_rolls_back() {
    let mut p = policy();
    let mut ms: Vec<ClassGateway> = ["a", "b"]
        .iter()
        .map(|n| m(n, "bp-1", Health::Ready))
        .collect();
    let st = step(&p, "bp-2", Some("bp-1"), None, &ms, t(0))
        .status
        .unwrap();
    ms[0].revision = Some("bp-2".into());
    ms[0].health = Health::Failed("template gateway: bad".into());
    let s = step(&p, "bp-2", Some("bp-1"), Some(&st), &ms, t(1));
    let halted = s.status.unwrap();
    assert_eq!(halted.phase, RolloutPhase::Halted);
    assert!(halted.message.contains("template gateway: bad"));
    assert!(
        s.notes
            .iter()
            .any(|n| n.warning && n.reason == "RolloutHalted")
    );
    // Stays halted; b never moves.
    let s = step(&p, "bp-2", Some("bp-1"), Some(&halted), &ms, t(100));
    assert!(s.moved.is_empty());
    p.on_failure = Some(OnFailure::Rollback);
    let s = step(&p, "bp-2", Some("bp-1"), Some(&st), &ms, t(1));
    assert_eq!(s.status.unwrap().phase, RolloutPhase::RolledBack);
    assert!(s.moved.contains(&"ns/a".to_owned()));
}

#[test]
fn a_deadline_halts_and_max_unavailable_limits_a_wave() {
    let p = RolloutPolicy {
        waves: vec![Wave {
            max_unavailable: Some(1),
            progress_deadline_seconds: Some(60),
            ..Default::default()
        }],
        ..Default::default()
    };
    let mut ms: Vec<ClassGateway> = ["a", "b"]
        .iter()
        .map(|n| m(n, "bp-1", Health::Ready))
        .collect();
    let s = step(&p, "bp-2", Some("bp-1"), None, &ms, t(0));
    let st = s.status.unwrap();
    assert_eq!(st.waves[0].gateways.len(), 2);
    assert_eq!(st.waves[0].released, 1);
    ms[0].revision = Some("bp-2".into());
    ms[0].health = Health::NotReady("waiting".into());
    let s = step(&p, "bp-2", Some("bp-1"), Some(&st), &ms, t(30));
    assert_eq!(s.status.as_ref().unwrap().waves[0].released, 1);
    let s = step(&p, "bp-2", Some("bp-1"), Some(&st), &ms, t(61));
    assert_eq!(s.status.unwrap().phase, RolloutPhase::Halted);
}

#[test]
fn pause_stops_and_resume_restarts_the_deadline() {
    let mut p = policy();
    let ms = vec![m("a", "bp-1", Health::Ready), m("b", "bp-1", Health::Ready)];
    let st = step(&p, "bp-2", Some("bp-1"), None, &ms, t(0))
        .status
        .unwrap();
    p.paused = true;
    let s = step(&p, "bp-2", Some("bp-1"), Some(&st), &ms, t(10_000));
    let paused = s.status.unwrap();
    assert_eq!(paused.phase, RolloutPhase::Paused);
    p.paused = false;
    let s = step(&p, "bp-2", Some("bp-1"), Some(&paused), &ms, t(10_001));
    let st = s.status.unwrap();
    assert_eq!(st.phase, RolloutPhase::Progressing);
    assert_eq!(st.waves[0].started_at, Some(Time(t(10_001))));
}

#[test]
fn selectors_pick_the_canary_and_pinned_gateways_are_left_alone() {
    let p = RolloutPolicy {
        waves: vec![Wave {
            selector: Some(LabelSelector {
                match_labels: Some(BTreeMap::from([("tier".into(), "c".into())])),
                ..Default::default()
            }),
            ..Default::default()
        }],
        ..Default::default()
    };
    let mut ms = vec![
        m("a", "bp-1", Health::Ready),
        m("b", "bp-1", Health::Ready),
        m("c", "bp-1", Health::Ready),
    ];
    ms[1].pinned_to = Some("bp-1".into());
    let st = step(&p, "bp-2", Some("bp-1"), None, &ms, t(0))
        .status
        .unwrap();
    assert_eq!(st.waves[0].gateways, vec!["ns/c"]);
    ms[2].revision = Some("bp-2".into());
    let st = step(&p, "bp-2", Some("bp-1"), Some(&st), &ms, t(1))
        .status
        .unwrap();
    assert_eq!(st.waves[1].gateways, vec!["ns/a"]);
}

#[test]
fn a_gateway_broken_before_its_wave_does_not_hold_the_rollout() {
    let p = RolloutPolicy {
        waves: vec![Wave {
            count: Some(2),
            ..Default::default()
        }],
        ..Default::default()
    };
    let mut ms = vec![
        m("a", "bp-1", Health::Failed("no listener is valid".into())),
        m("b", "bp-1", Health::Ready),
    ];
    let st = step(&p, "bp-2", Some("bp-1"), None, &ms, t(0))
        .status
        .unwrap();
    assert_eq!(st.waves[0].exempt, vec!["ns/a"]);
    for g in &mut ms {
        g.revision = Some("bp-2".into());
    }
    let s = step(&p, "bp-2", Some("bp-1"), Some(&st), &ms, t(1));
    assert_eq!(s.status.unwrap().phase, RolloutPhase::Complete);
}

#[test]
fn a_preview_lists_the_waves_as_if_every_gate_passed() {
    let ms: Vec<ClassGateway> = ["a", "b", "c", "d"]
        .iter()
        .map(|n| m(n, "bp-1", Health::Ready))
        .collect();
    assert_eq!(
        preview(&policy(), "bp-2", &ms, &FleetView::default()),
        vec![
            ("wave-1".to_owned(), vec!["ns/a".to_owned()]),
            (
                "wave-2".to_owned(),
                vec!["ns/b".to_owned(), "ns/c".to_owned()]
            ),
            ("rest".to_owned(), vec!["ns/d".to_owned()]),
        ]
    );
}

fn gw(generation: i64, conds: serde_json::Value) -> gateway_api::apis::standard::gateways::Gateway {
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": "g", "namespace": "ns", "generation": generation},
        "spec": {"gatewayClassName": "c", "listeners": []},
        "status": {"conditions": conds},
    }))
    .unwrap()
}

fn c(t: &str, status: &str, reason: &str, message: &str, generation: i64) -> serde_json::Value {
    serde_json::json!({"type": t, "status": status, "reason": reason, "message": message,
        "observedGeneration": generation, "lastTransitionTime": "2026-01-01T00:00:00Z"})
}

#[test]
fn health_reads_programmed_and_rollout_of_the_current_generation() {
    let ok = c("Programmed", "True", "Programmed", "ok", 2);
    assert_eq!(
        health(&gw(2, serde_json::json!([ok.clone()]))),
        Health::Ready
    );
    // Of an older generation: not reported yet.
    assert!(matches!(
        health(&gw(3, serde_json::json!([ok.clone()]))),
        Health::NotReady(_)
    ));
    // A replacement under way.
    let mbb = c(
        "gatewright.dev/Rollout",
        "False",
        "Progressing",
        "cert: waiting",
        2,
    );
    assert_eq!(
        health(&gw(2, serde_json::json!([ok, mbb]))),
        Health::NotReady("cert: waiting".into())
    );
    // What will not fix itself.
    let bad = c("Programmed", "False", "Invalid", "template cm: bad", 2);
    assert_eq!(
        health(&gw(2, serde_json::json!([bad]))),
        Health::Failed("template cm: bad".into())
    );
    let pending = c("Programmed", "False", "Pending", "waiting for children", 2);
    assert_eq!(
        health(&gw(2, serde_json::json!([pending]))),
        Health::NotReady("Pending: waiting for children".into())
    );
    // The revision it is to render cannot be: told by the reason, not the wording.
    let invalid = c(
        "Accepted",
        "False",
        "RevisionInvalid",
        "GatewayClass c is not accepted: the blueprint cannot be rendered",
        2,
    );
    assert!(matches!(
        health(&gw(2, serde_json::json!([invalid]))),
        Health::Failed(_)
    ));
    // Another Accepted=False (its listeners, say) whose message names a revision is not.
    let other = c(
        "Accepted",
        "False",
        "ListenersNotValid",
        "no listener is valid in revision bp-2",
        2,
    );
    assert!(!matches!(
        health(&gw(2, serde_json::json!([other]))),
        Health::Failed(_)
    ));
}

#[test]
fn nothing_to_move_completes_at_once() {
    let p = policy();
    let ms = vec![m("a", "bp-2", Health::Ready)];
    let s = step(&p, "bp-2", Some("bp-1"), None, &ms, t(0));
    assert_eq!(s.status.unwrap().phase, RolloutPhase::Complete);
}

#[test]
fn a_bake_says_the_same_after_its_status_is_read_back() {
    // A bake that starts at a fraction of a second, stepped again from the status as the
    // API server keeps it (whole seconds), as a restarted controller reads it.
    let p = policy();
    let mut ms: Vec<ClassGateway> = ["a", "b", "c", "d"]
        .iter()
        .map(|n| m(n, "bp-1", Health::Ready))
        .collect();
    let st = step(&p, "bp-2", Some("bp-1"), None, &ms, t(0))
        .status
        .unwrap();
    ms[0].revision = Some("bp-2".into());
    let st = step(&p, "bp-2", Some("bp-1"), Some(&st), &ms, t(1))
        .status
        .unwrap();
    for g in &mut ms[1..3] {
        g.revision = Some("bp-2".into());
    }
    let fraction = t(2)
        .checked_add(k8s_openapi::jiff::SignedDuration::from_millis(160))
        .unwrap();
    let baking = step(&p, "bp-2", Some("bp-1"), Some(&st), &ms, fraction)
        .status
        .unwrap();
    assert!(
        baking.message.contains("baking until"),
        "{}",
        baking.message
    );
    let read_back: RolloutStatus =
        serde_json::from_value(serde_json::to_value(&baking).unwrap()).unwrap();
    let again = step(&p, "bp-2", Some("bp-1"), Some(&read_back), &ms, t(5))
        .status
        .unwrap();
    assert_eq!(again.message, baking.message);
    assert_eq!(
        serde_json::to_value(&again).unwrap(),
        serde_json::to_value(&baking).unwrap(),
        "a pass after a restart writes nothing new"
    );
}
