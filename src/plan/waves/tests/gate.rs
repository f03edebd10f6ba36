//! A wave's gate: passed only while it holds through the bake, halting at the deadline or
//! at once when it cannot be evaluated, and holding the rollout while it does not compile.

use super::*;

/// A policy of one gated wave (count 1, bake 30 s, deadline 60 s), then the rest.
fn gated(gate: &str) -> RolloutPolicy {
    RolloutPolicy {
        waves: vec![Wave {
            count: Some(1),
            bake_seconds: Some(30),
            progress_deadline_seconds: Some(60),
            gate: Some(gate.to_owned()),
            ..Default::default()
        }],
        ..Default::default()
    }
}

/// A member whose object carries `approved` as an annotation (none: no annotations).
fn with_object(mut m: ClassGateway, approved: Option<&str>) -> ClassGateway {
    let mut obj = serde_json::json!({
        "metadata": {"namespace": "ns", "name": &m.key[3..]},
        "status": {"listeners": [{"name": "http", "attachedRoutes": 2}]},
    });
    if let Some(a) = approved {
        obj["metadata"]["annotations"] = serde_json::json!({ "approved": a });
    }
    m.object = Some(std::sync::Arc::new(obj));
    m
}

const APPROVED: &str = r#"gateways | rejectattr("metadata.annotations.approved", "eq", "yes") | list | length == 0 and wave.size == 1 and revision == "bp-2""#;

#[test]
fn a_wave_passes_only_while_its_gate_holds_through_the_bake() {
    let p = gated(APPROVED);
    let mut ms = vec![
        with_object(m("a", "bp-1", Health::Ready), None),
        with_object(m("b", "bp-1", Health::Ready), None),
    ];
    let s = step(&p, "bp-2", Some("bp-1"), None, &ms, t(0));
    let st = s.status.unwrap();
    assert_eq!(s.moved, vec!["ns/a"]);
    // On the new revision and Programmed, but not approved: the wave waits on its gate.
    ms[0].revision = Some("bp-2".into());
    let s = step(&p, "bp-2", Some("bp-1"), Some(&st), &ms, t(5));
    let st = s.status.unwrap();
    assert_eq!(st.waves.len(), 1);
    assert!(
        st.message.contains("waits for its gate `gateways"),
        "{}",
        st.message
    );
    assert_eq!(st.waves[0].healthy_since, None);
    // Approved: it bakes from then.
    ms[0] = with_object(ms[0].clone(), Some("yes"));
    let s = step(&p, "bp-2", Some("bp-1"), Some(&st), &ms, t(10));
    let st = s.status.unwrap();
    assert_eq!(st.waves[0].healthy_since, Some(Time(t(10))));
    // The approval withdrawn while baking: the bake starts again once it holds again.
    ms[0] = with_object(ms[0].clone(), Some("no"));
    let s = step(&p, "bp-2", Some("bp-1"), Some(&st), &ms, t(20));
    let st = s.status.unwrap();
    assert_eq!(st.waves[0].healthy_since, None);
    ms[0] = with_object(ms[0].clone(), Some("yes"));
    let s = step(&p, "bp-2", Some("bp-1"), Some(&st), &ms, t(25));
    let st = s.status.unwrap();
    assert_eq!(st.waves[0].healthy_since, Some(Time(t(25))));
    let s = step(&p, "bp-2", Some("bp-1"), Some(&st), &ms, t(40));
    let st = s.status.unwrap();
    assert_eq!(st.waves.len(), 1, "still baking");
    let s = step(&p, "bp-2", Some("bp-1"), Some(&st), &ms, t(55));
    let st = s.status.unwrap();
    assert_eq!(st.waves.len(), 2, "{}", st.message);
    assert_eq!(st.waves[1].gateways, vec!["ns/b"]);
}

#[test]
fn a_gate_that_never_holds_halts_at_the_deadline_and_one_that_fails_at_once() {
    let mut ms = vec![with_object(m("a", "bp-1", Health::Ready), None)];
    let p = gated(APPROVED);
    let st = step(&p, "bp-2", Some("bp-1"), None, &ms, t(0))
        .status
        .unwrap();
    ms[0].revision = Some("bp-2".into());
    let st = step(&p, "bp-2", Some("bp-1"), Some(&st), &ms, t(30))
        .status
        .unwrap();
    assert_eq!(st.phase, RolloutPhase::Progressing);
    let st = step(&p, "bp-2", Some("bp-1"), Some(&st), &ms, t(61))
        .status
        .unwrap();
    assert_eq!(st.phase, RolloutPhase::Halted);
    assert!(
        st.message.contains("did not pass within 60 s: its gate"),
        "{}",
        st.message
    );
    // A gate that compiles but fails when evaluated (a wrong type): halted at once.
    let p = gated("gateways[0].status.listeners + 1");
    ms[0].revision = Some("bp-1".into());
    let st = step(&p, "bp-2", Some("bp-1"), None, &ms, t(0))
        .status
        .unwrap();
    ms[0].revision = Some("bp-2".into());
    let s = step(&p, "bp-2", Some("bp-1"), Some(&st), &ms, t(1));
    let st = s.status.unwrap();
    assert_eq!(st.phase, RolloutPhase::Halted);
    assert!(
        st.message
            .contains("the gate of wave wave-1 cannot be evaluated"),
        "{}",
        st.message
    );
    assert!(
        s.notes
            .iter()
            .any(|n| n.warning && n.reason == "RolloutHalted")
    );
    // A field not there yet is false, not an error: it waits.
    let p = gated("gateways[0].status.nothing.here > 0");
    let st = step(
        &p,
        "bp-2",
        Some("bp-1"),
        None,
        &[with_object(m("a", "bp-1", Health::Ready), None)],
        t(0),
    )
    .status
    .unwrap();
    let st = step(&p, "bp-2", Some("bp-1"), Some(&st), &ms, t(1))
        .status
        .unwrap();
    assert_eq!(st.phase, RolloutPhase::Progressing, "{}", st.message);
    assert!(st.message.contains("its gate"), "{}", st.message);
}

#[test]
fn a_gate_that_does_not_compile_moves_nothing_until_it_is_mended() {
    let ms = vec![
        with_object(m("a", "bp-1", Health::Ready), Some("yes")),
        with_object(m("b", "bp-1", Health::Ready), Some("yes")),
    ];
    let bad = gated("gateways |");
    let s = step(&bad, "bp-2", Some("bp-1"), None, &ms, t(0));
    let st = s.status.unwrap();
    assert!(s.moved.is_empty());
    assert!(st.waves.is_empty());
    assert!(
        st.message
            .starts_with("rolloutPolicy.waves[0].gate does not compile"),
        "{}",
        st.message
    );
    assert!(
        s.notes
            .iter()
            .any(|n| n.warning && n.reason == "RolloutGateInvalid")
    );
    // Named, not told by the message's wording.
    assert_eq!(st.hold, Some(HoldReason::GateInvalid));
    // Said once: the next step sends no second Event.
    let s = step(&bad, "bp-2", Some("bp-1"), Some(&st), &ms, t(700));
    assert!(s.notes.is_empty());
    let st = s.status.unwrap();
    assert_eq!(st.hold, Some(HoldReason::GateInvalid));
    // Mended: the rollout goes on.
    let s = step(
        &gated(APPROVED),
        "bp-2",
        Some("bp-1"),
        Some(&st),
        &ms,
        t(800),
    );
    assert_eq!(s.moved, vec!["ns/a"]);
    let st = s.status.unwrap();
    assert_eq!(st.phase, RolloutPhase::Progressing);
    assert_eq!(st.hold, None);
}
