//! Waves across a fleet: a wave with a `clusterSelector` takes Gateways only in the members
//! it selects, later waves wait until it passed in every one of them, a halt there halts
//! here, two members of the same wave do not wait for each other, and how another member's
//! blueprint is read.

use super::*;
use crate::api::{BlueprintStatus, GatewayClassBlueprint, RolloutStatus};

/// A canary wave of the members labelled `stage: canary`, then the rest.
fn canary_first() -> RolloutPolicy {
    RolloutPolicy {
        waves: vec![Wave {
            name: Some("canary".into()),
            cluster_selector: Some(LabelSelector {
                match_labels: Some(BTreeMap::from([("stage".into(), "canary".into())])),
                ..Default::default()
            }),
            ..Default::default()
        }],
        ..Default::default()
    }
}

fn labels(stage: &str) -> BTreeMap<String, String> {
    BTreeMap::from([("stage".to_owned(), stage.to_owned())])
}

fn rolling(phase: RolloutPhase, waves: &[(&str, bool)]) -> Stands {
    Stands::Rolling {
        phase,
        waves: waves.iter().map(|(n, p)| ((*n).to_owned(), *p)).collect(),
        message: "what it says".into(),
    }
}

/// The view of a member labelled `here`, with one other member `fleet/<name>` of each
/// `(name, stage, stands)`.
fn view(here: &str, others: Vec<(&str, &str, Stands)>) -> FleetView {
    FleetView {
        labels: Some(labels(here)),
        others: Some(
            others
                .into_iter()
                .map(|(n, stage, stands)| Elsewhere {
                    member: format!("fleet/{n}"),
                    labels: labels(stage),
                    stands,
                })
                .collect(),
        ),
    }
}

fn fleet_step(
    p: &RolloutPolicy,
    old: Option<&RolloutStatus>,
    ms: &[ClassGateway],
    v: &FleetView,
    at: i64,
) -> Step {
    super::super::step(p, "bp-2", Some("bp-1"), old, ms, v, t(at))
}

#[test]
fn a_member_the_canary_wave_does_not_select_waits_until_the_canary_member_passed_it() {
    let p = canary_first();
    let ms: Vec<ClassGateway> = ["a", "b"]
        .iter()
        .map(|n| m(n, "bp-1", Health::Ready))
        .collect();
    // The canary member has released its wave, not passed it: nothing moves here.
    let waiting = view(
        "main",
        vec![(
            "eu-1",
            "canary",
            rolling(RolloutPhase::Progressing, &[("canary", false)]),
        )],
    );
    let s = fleet_step(&p, None, &ms, &waiting, 0);
    let st = s.status.clone().unwrap();
    assert!(s.moved.is_empty());
    assert!(st.waves.is_empty());
    assert_eq!(st.phase, RolloutPhase::Progressing);
    assert_eq!(
        st.message,
        "waits for wave canary to pass in member(s) fleet/eu-1"
    );
    assert_eq!(s.again, Some(FLEET_POLL));
    // Whatever else stops the canary member from having passed, this one waits.
    for stands in [
        Stands::Unread("connection refused".into()),
        Stands::Elsewhere,
        rolling(RolloutPhase::Paused, &[("canary", false)]),
    ] {
        let v = view("main", vec![("eu-1", "canary", stands.clone())]);
        let s = fleet_step(&p, Some(&st), &ms, &v, 1);
        assert!(s.moved.is_empty(), "{stands:?}");
        assert!(
            s.status.unwrap().message.contains("fleet/eu-1"),
            "{stands:?}"
        );
    }
    // Passed there (marked, a later wave released, complete, or no such blueprint there):
    // the rest moves here.
    for stands in [
        rolling(RolloutPhase::Progressing, &[("canary", true)]),
        rolling(
            RolloutPhase::Progressing,
            &[("canary", false), ("rest", false)],
        ),
        rolling(RolloutPhase::Complete, &[("canary", false)]),
        Stands::AllAtOnce,
        Stands::Absent,
    ] {
        let v = view("main", vec![("eu-1", "canary", stands.clone())]);
        let s = fleet_step(&p, Some(&st), &ms, &v, 2);
        assert_eq!(s.moved, vec!["ns/a", "ns/b"], "{stands:?}");
        assert_eq!(s.status.unwrap().waves[0].name, "rest", "{stands:?}");
    }
    // A member the canary wave does not select does not hold it.
    let v = view(
        "main",
        vec![(
            "us-1",
            "main",
            rolling(RolloutPhase::Progressing, &[("rest", false)]),
        )],
    );
    assert_eq!(fleet_step(&p, None, &ms, &v, 0).moved.len(), 2);
}

#[test]
fn the_other_members_are_asked_for_only_when_a_wave_of_the_fleet_holds_the_next_one() {
    let mut p = canary_first();
    p.waves[0].count = Some(1);
    let mut ms = vec![m("a", "bp-1", Health::Ready), m("b", "bp-1", Health::Ready)];
    let unread = FleetView {
        labels: Some(labels("canary")),
        others: None,
    };
    // The canary wave of this member needs nobody else.
    let s = fleet_step(&p, None, &ms, &unread, 0);
    assert!(!s.needs_fleet);
    assert_eq!(s.moved, vec!["ns/a"]);
    let st = s.status.unwrap();
    // While it is not passed here, nor does judging it.
    let s = fleet_step(&p, Some(&st), &ms, &unread, 1);
    assert!(!s.needs_fleet);
    // Passed here: the rest needs the other members.
    ms[0].revision = Some("bp-2".into());
    let s = fleet_step(&p, Some(&st), &ms, &unread, 2);
    assert!(s.needs_fleet);
    assert!(s.moved.is_empty());
    // Read, and nobody else selected: the rest moves.
    let s = fleet_step(&p, Some(&st), &ms, &view("canary", vec![]), 2);
    assert!(!s.needs_fleet);
    assert_eq!(s.moved, vec!["ns/b"]);
}

#[test]
fn the_canary_wave_halted_in_its_member_halts_the_others_and_rolls_them_back() {
    let mut p = canary_first();
    let ms = vec![m("a", "bp-1", Health::Ready)];
    let v = view(
        "main",
        vec![(
            "eu-1",
            "canary",
            rolling(RolloutPhase::Halted, &[("canary", false)]),
        )],
    );
    let s = fleet_step(&p, None, &ms, &v, 0);
    let st = s.status.unwrap();
    assert_eq!(st.phase, RolloutPhase::Halted);
    assert_eq!(
        st.message,
        "wave canary halted in member fleet/eu-1: what it says"
    );
    assert!(s.moved.is_empty());
    // Rolled back there, with a rollback policy here: halted (nothing of it moved here).
    p.on_failure = Some(OnFailure::Rollback);
    let v = view(
        "main",
        vec![(
            "eu-1",
            "canary",
            rolling(RolloutPhase::RolledBack, &[("canary", false)]),
        )],
    );
    let s = fleet_step(&p, None, &ms, &v, 0);
    assert_eq!(s.status.unwrap().phase, RolloutPhase::RolledBack);
    assert!(s.moved.is_empty(), "no Gateway here had moved");
}

#[test]
fn the_canary_member_moves_first_and_two_canaries_do_not_wait_for_each_other() {
    // The canary wave takes one Gateway of each canary member; the rest waits for it.
    let mut p = canary_first();
    p.waves[0].count = Some(1);
    let mut ms = vec![m("a", "bp-1", Health::Ready), m("b", "bp-1", Health::Ready)];
    let other = |passed: bool| {
        view(
            "canary",
            vec![
                (
                    "eu-2",
                    "canary",
                    rolling(RolloutPhase::Progressing, &[("canary", passed)]),
                ),
                // Not selected by the canary wave: waits for it, and does not hold it.
                ("us-1", "main", rolling(RolloutPhase::Progressing, &[])),
            ],
        )
    };
    // The canary wave takes a Gateway of this member.
    let s = fleet_step(&p, None, &ms, &other(false), 0);
    let st = s.status.unwrap();
    assert_eq!(st.waves[0].name, "canary");
    assert_eq!(s.moved, vec!["ns/a"]);
    ms[0].revision = Some("bp-2".into());
    // Passed here, not yet in the other canary member: the wave is marked passed, and the
    // rollout waits (the other member reads the mark; it does not wait for this one).
    let s = fleet_step(&p, Some(&st), &ms, &other(false), 1);
    let st = s.status.unwrap();
    assert_eq!(st.phase, RolloutPhase::Progressing);
    assert_eq!(st.waves[0].passed_at, Some(Time(t(1))));
    assert!(st.message.contains("fleet/eu-2"), "{}", st.message);
    // A Gateway of the passed wave that turns unready does not undo the pass.
    ms[0].health = Health::NotReady("children".into());
    let s = fleet_step(&p, Some(&st), &ms, &other(false), 2);
    assert_eq!(s.status.unwrap().waves[0].passed_at, Some(Time(t(1))));
    ms[0].health = Health::Ready;
    // Passed there too: the rest moves here.
    let s = fleet_step(&p, Some(&st), &ms, &other(true), 3);
    assert_eq!(s.moved, vec!["ns/b"]);
    assert_eq!(s.status.unwrap().waves[1].name, "rest");
}

#[test]
fn outside_a_fleet_a_wave_of_clusters_takes_no_gateway_and_holds_nothing() {
    let p = canary_first();
    let ms: Vec<ClassGateway> = ["a", "b"]
        .iter()
        .map(|n| m(n, "bp-1", Health::Ready))
        .collect();
    let s = step(&p, "bp-2", Some("bp-1"), None, &ms, t(0));
    let st = s.status.unwrap();
    assert_eq!(st.waves.len(), 1);
    assert_eq!(st.waves[0].name, "rest");
    assert_eq!(s.moved, vec!["ns/a", "ns/b"]);
    assert_eq!(
        preview(&p, "bp-2", &ms, &FleetView::default()),
        vec![(
            "rest".to_owned(),
            vec!["ns/a".to_owned(), "ns/b".to_owned()]
        )]
    );
}

#[test]
fn another_members_blueprint_is_read_for_the_same_revision_only() {
    let spec: crate::api::GatewayClassBlueprintSpec = serde_json::from_value(serde_json::json!({
        "gatewayTemplates": [{"name": "cm", "template": "kind: ConfigMap"}],
        "rolloutPolicy": {"waves": [{"name": "canary"}]}
    }))
    .unwrap();
    let hash = spec.revision_hash();
    let mut bp = GatewayClassBlueprint::new("bp", spec);
    bp.metadata.generation = Some(2);
    // No status for this generation yet.
    assert_eq!(stands(&bp, &hash), Stands::Elsewhere);
    let rollout = RolloutStatus {
        revision: "bp-2".into(),
        phase: RolloutPhase::Progressing,
        waves: vec![WaveStatus {
            name: "canary".into(),
            passed_at: Some(Time(t(0))),
            ..Default::default()
        }],
        ..Default::default()
    };
    bp.status = Some(BlueprintStatus {
        observed_generation: Some(2),
        current_revision: Some("bp-2".into()),
        rollout: Some(rollout.clone()),
        ..Default::default()
    });
    assert_eq!(
        stands(&bp, &hash),
        Stands::Rolling {
            phase: RolloutPhase::Progressing,
            waves: vec![("canary".into(), true)],
            message: String::new()
        }
    );
    // Another spec there, or a rollout of an older revision.
    assert_eq!(stands(&bp, "another"), Stands::Elsewhere);
    bp.status.as_mut().unwrap().rollout = Some(RolloutStatus {
        revision: "bp-1".into(),
        ..rollout
    });
    assert_eq!(stands(&bp, &hash), Stands::Elsewhere);
    // No policy there: every Gateway took it at once.
    bp.spec.rollout_policy = None;
    let hash = bp.spec.revision_hash();
    assert_eq!(stands(&bp, &hash), Stands::AllAtOnce);
}
