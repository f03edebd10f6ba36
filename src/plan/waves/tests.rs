use super::*;
use crate::api::{IssuanceBudget, Issued};

fn m(name: &str, revision: &str, health: Health) -> Member {
    Member {
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

fn t(s: i64) -> Timestamp {
    Timestamp::from_second(1_800_000_000 + s).unwrap()
}

#[test]
fn waves_release_in_order_and_wait_for_health_and_bake() {
    let p = policy();
    let mut ms: Vec<Member> = ["a", "b", "c", "d"]
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

#[test]
fn a_revision_that_does_not_render_halts_in_the_first_wave_or_rolls_back() {
    let mut p = policy();
    let mut ms: Vec<Member> = ["a", "b"]
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
    assert!(s.notes.iter().any(|n| n.0 && n.1 == "RolloutHalted"));
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
    let mut ms: Vec<Member> = ["a", "b"]
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
    let ms: Vec<Member> = ["a", "b", "c", "d"]
        .iter()
        .map(|n| m(n, "bp-1", Health::Ready))
        .collect();
    assert_eq!(
        preview(&policy(), "bp-2", &ms),
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
    let invalid = c(
        "Accepted",
        "False",
        "Invalid",
        "revision bp-2 of GatewayClassBlueprint bp is invalid",
        2,
    );
    assert!(matches!(
        health(&gw(2, serde_json::json!([invalid]))),
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

fn budgeted(certificates: u32, window: u64, deadline: Option<u64>) -> RolloutPolicy {
    RolloutPolicy {
        waves: vec![Wave {
            progress_deadline_seconds: deadline,
            ..Default::default()
        }],
        issuance_budget: Some(IssuanceBudget {
            certificates,
            window_seconds: Some(window),
        }),
        ..Default::default()
    }
}

fn five() -> Vec<Member> {
    ["a", "b", "c", "d", "e"]
        .iter()
        .map(|n| m(n, "bp-1", Health::Ready))
        .collect()
}

/// The Gateways `moved` now run `revision`, ready.
fn arrive(ms: &mut [Member], moved: &[String], revision: &str) {
    for g in ms.iter_mut().filter(|g| moved.contains(&g.key)) {
        g.revision = Some(revision.to_owned());
        g.health = Health::Ready;
    }
}

fn spent(st: &RolloutStatus) -> u32 {
    st.issued.iter().map(|e| e.certificates).sum()
}

#[test]
fn the_budget_caps_the_moves_of_a_window() {
    let p = budgeted(2, 3200, None);
    let mut ms = five();
    let s = step(&p, "bp-2", Some("bp-1"), None, &ms, t(0));
    let st = s.status.unwrap();
    // One wave takes all five; the budget lets two go.
    assert_eq!(st.waves[0].gateways.len(), 5);
    assert_eq!(s.moved, vec!["ns/a", "ns/b"]);
    assert_eq!(st.waves[0].released, 2);
    assert_eq!(spent(&st), 2);
    let wait = st.budget_wait.clone().unwrap();
    assert_eq!((wait.gateways, wait.certificates), (3, 3));
    assert_eq!(wait.until, Some(Time(t(3200))));
    // Woken when the window lets the first held Gateway go.
    assert_eq!(s.again, Some(Duration::from_secs(3200)));
    // The moved ones are ready: still nothing more within the window.
    arrive(&mut ms, &s.moved, "bp-2");
    let s = step(&p, "bp-2", Some("bp-1"), Some(&st), &ms, t(3199));
    let st = s.status.unwrap();
    assert!(s.moved.is_empty());
    assert_eq!(st.waves[0].released, 2);
    assert_eq!(spent(&st), 2);
    // A Gateway whose move orders no Certificate is not held by a spent budget.
    let mut ms = five();
    ms[0].certificates = 0;
    ms[1].certificates = 2;
    ms[2].certificates = 1;
    let s = step(&p, "bp-2", Some("bp-1"), None, &ms, t(0));
    assert_eq!(s.moved, vec!["ns/a", "ns/b"]);
    assert_eq!(spent(s.status.as_ref().unwrap()), 2);
}

#[test]
fn moves_resume_once_the_window_has_passed() {
    let p = budgeted(2, 3200, None);
    let mut ms = five();
    let s = step(&p, "bp-2", Some("bp-1"), None, &ms, t(0));
    arrive(&mut ms, &s.moved, "bp-2");
    let st = s.status.unwrap();
    let s = step(&p, "bp-2", Some("bp-1"), Some(&st), &ms, t(3200));
    let st = s.status.unwrap();
    assert_eq!(s.moved, vec!["ns/c", "ns/d"]);
    // The first window's moves no longer count, nor are they kept.
    assert_eq!(spent(&st), 2);
    assert_eq!(st.issued.len(), 1);
    assert_eq!(st.budget_wait.as_ref().unwrap().until, Some(Time(t(6400))));
    arrive(&mut ms, &s.moved, "bp-2");
    let s = step(&p, "bp-2", Some("bp-1"), Some(&st), &ms, t(6400));
    assert_eq!(s.moved, vec!["ns/e"]);
    let st = s.status.unwrap();
    assert_eq!(st.budget_wait, None);
    arrive(&mut ms, &s.moved, "bp-2");
    let st = step(&p, "bp-2", Some("bp-1"), Some(&st), &ms, t(6401))
        .status
        .unwrap();
    assert_eq!(st.phase, RolloutPhase::Complete);
    // Never more than the budget in any window: 2 at 0, 2 at 3200, 1 at 6400.
}

#[test]
fn the_window_slides_over_the_recorded_moves() {
    // 3 per 100 s; moves at 0 (1) and 50 (2): the next one goes at 100, not at 150.
    let p = RolloutPolicy {
        waves: vec![Wave {
            max_unavailable: Some(1),
            ..Default::default()
        }],
        issuance_budget: Some(IssuanceBudget {
            certificates: 3,
            window_seconds: Some(100),
        }),
        ..Default::default()
    };
    let mut ms = five();
    ms[1].certificates = 2;
    let s = step(&p, "bp-2", Some("bp-1"), None, &ms, t(0));
    assert_eq!(s.moved, vec!["ns/a"]);
    arrive(&mut ms, &s.moved, "bp-2");
    let st = s.status.unwrap();
    let s = step(&p, "bp-2", Some("bp-1"), Some(&st), &ms, t(50));
    assert_eq!(s.moved, vec!["ns/b"]);
    arrive(&mut ms, &s.moved, "bp-2");
    let st = s.status.unwrap();
    assert_eq!(st.issued.len(), 2);
    let s = step(&p, "bp-2", Some("bp-1"), Some(&st), &ms, t(60));
    let st = s.status.unwrap();
    assert!(s.moved.is_empty());
    // Only what the wave would move now (maxUnavailable 1) is said to wait on the budget.
    assert_eq!(st.budget_wait.as_ref().unwrap().gateways, 1);
    assert_eq!(st.budget_wait.as_ref().unwrap().until, Some(Time(t(100))));
    let s = step(&p, "bp-2", Some("bp-1"), Some(&st), &ms, t(100));
    assert_eq!(s.moved, vec!["ns/c"]);
}

#[test]
fn waiting_on_the_budget_is_said_and_does_not_halt_the_rollout() {
    let p = budgeted(1, 3200, Some(60));
    let mut ms = five();
    let s = step(&p, "bp-2", Some("bp-1"), None, &ms, t(0));
    arrive(&mut ms, &s.moved, "bp-2");
    let st = s.status.unwrap();
    // Far past the wave's deadline, still waiting on the budget: not halted.
    let s = step(&p, "bp-2", Some("bp-1"), Some(&st), &ms, t(3000));
    let st = s.status.unwrap();
    assert_eq!(st.phase, RolloutPhase::Progressing);
    assert!(s.notes.iter().all(|n| !n.0), "{:?}", s.notes);
    assert!(
        st.message
            .contains("4 Gateway(s) of wave wave-1 wait on the issuance budget")
            && st.message.contains(&format!("until {}", t(3200)))
            && st.message.contains("ns/b: waits on the issuance budget"),
        "{}",
        st.message
    );
    assert_eq!(st.budget_wait.as_ref().unwrap().gateways, 4);
    // The budget lets one go: the wave's deadline starts again from then.
    let s = step(&p, "bp-2", Some("bp-1"), Some(&st), &ms, t(3200));
    assert_eq!(s.moved, vec!["ns/b"]);
    let st = s.status.unwrap();
    assert_eq!(st.waves[0].started_at, Some(Time(t(3200))));
    // ns/b does not become ready: the deadline is counted, but only while nothing waits
    // on the budget. Here c, d and e still do: no halt.
    ms[1].revision = Some("bp-2".into());
    ms[1].health = Health::NotReady("certificate pending".into());
    let st = step(&p, "bp-2", Some("bp-1"), Some(&st), &ms, t(3300))
        .status
        .unwrap();
    assert_eq!(st.phase, RolloutPhase::Progressing);
    // A Gateway the revision cannot render halts at once, budget or not.
    ms[1].health = Health::Failed("template gateway: bad".into());
    let st = step(&p, "bp-2", Some("bp-1"), Some(&st), &ms, t(3301))
        .status
        .unwrap();
    assert_eq!(st.phase, RolloutPhase::Halted);
    assert_eq!(st.budget_wait, None);
}

#[test]
fn the_deadline_runs_again_once_nothing_waits_on_the_budget() {
    let p = budgeted(1, 3200, Some(60));
    let mut ms: Vec<Member> = five().into_iter().take(2).collect();
    let s = step(&p, "bp-2", Some("bp-1"), None, &ms, t(0));
    arrive(&mut ms, &s.moved, "bp-2");
    let st = s.status.unwrap();
    let s = step(&p, "bp-2", Some("bp-1"), Some(&st), &ms, t(3200));
    assert_eq!(s.moved, vec!["ns/b"]);
    let st = s.status.unwrap();
    assert_eq!(st.budget_wait, None);
    ms[1].revision = Some("bp-2".into());
    ms[1].health = Health::NotReady("certificate pending".into());
    let st = step(&p, "bp-2", Some("bp-1"), Some(&st), &ms, t(3259))
        .status
        .unwrap();
    assert_eq!(st.phase, RolloutPhase::Progressing);
    let st = step(&p, "bp-2", Some("bp-1"), Some(&st), &ms, t(3260))
        .status
        .unwrap();
    assert_eq!(st.phase, RolloutPhase::Halted);
    assert!(
        st.message.contains("did not pass within 60 s"),
        "{}",
        st.message
    );
}

#[test]
fn the_budget_survives_a_restart_and_a_new_revision() {
    let p = budgeted(2, 3200, None);
    let mut ms = five();
    let s = step(&p, "bp-2", Some("bp-1"), None, &ms, t(0));
    arrive(&mut ms, &s.moved, "bp-2");
    // A restart reads the status back from the API server.
    let json = serde_json::to_value(s.status.unwrap()).unwrap();
    let st: RolloutStatus = serde_json::from_value(json).unwrap();
    let s = step(&p, "bp-2", Some("bp-1"), Some(&st), &ms, t(10));
    assert!(s.moved.is_empty());
    // A newer revision while the window is spent: its rollout waits on the same budget.
    let st = s.status.unwrap();
    let s = step(&p, "bp-3", Some("bp-2"), Some(&st), &ms, t(20));
    let st = s.status.unwrap();
    assert_eq!(st.revision, "bp-3");
    assert!(s.moved.is_empty());
    assert_eq!(st.budget_wait.as_ref().unwrap().gateways, 5);
    assert_eq!(st.budget_wait.as_ref().unwrap().until, Some(Time(t(3200))));
}

#[test]
fn a_gateway_counted_as_more_than_the_budget_waits_and_says_how_to_go_on() {
    let p = budgeted(2, 3200, Some(60));
    let mut ms = five();
    ms[0].certificates = 3;
    let s = step(&p, "bp-2", Some("bp-1"), None, &ms, t(0));
    let st = s.status.unwrap();
    assert!(s.moved.is_empty());
    assert_eq!(st.budget_wait.as_ref().unwrap().until, None);
    assert!(
        st.message
            .contains("raise rolloutPolicy.issuanceBudget.certificates"),
        "{}",
        st.message
    );
    assert_eq!(s.again, None);
    let st = step(&p, "bp-2", Some("bp-1"), Some(&st), &ms, t(1000))
        .status
        .unwrap();
    assert_eq!(st.phase, RolloutPhase::Progressing);
}

#[test]
fn moves_close_together_are_one_record_counted_at_the_latest() {
    let p = RolloutPolicy {
        waves: vec![Wave {
            max_unavailable: Some(1),
            ..Default::default()
        }],
        issuance_budget: Some(IssuanceBudget {
            certificates: 10,
            window_seconds: Some(3200),
        }),
        ..Default::default()
    };
    let mut ms = five();
    let mut st: Option<RolloutStatus> = None;
    for (i, at) in [0, 50, 99, 100].into_iter().enumerate() {
        let s = step(&p, "bp-2", Some("bp-1"), st.as_ref(), &ms, t(at));
        assert_eq!(s.moved.len(), 1, "step {i}");
        arrive(&mut ms, &s.moved, "bp-2");
        st = s.status;
    }
    let st = st.unwrap();
    // 3200 / 32 = 100 s slots: the move at 0 is recorded at 0; those at 50, 99 and 100
    // together at 100.
    assert_eq!(
        st.issued,
        vec![
            Issued {
                at: Time(t(0)),
                certificates: 1
            },
            Issued {
                at: Time(t(100)),
                certificates: 3
            },
        ]
    );
    // Recorded later than a move, never earlier: the window lets it go no sooner.
    let s = step(&p, "bp-2", Some("bp-1"), Some(&st), &ms, t(101));
    assert_eq!(s.status.unwrap().issued.last().unwrap().at, Time(t(200)));
}

#[test]
fn without_a_budget_nothing_is_recorded() {
    let mut ms = five();
    let s = step(&policy(), "bp-2", Some("bp-1"), None, &ms, t(0));
    arrive(&mut ms, &s.moved, "bp-2");
    let st = s.status.unwrap();
    let st = step(&policy(), "bp-2", Some("bp-1"), Some(&st), &ms, t(1))
        .status
        .unwrap();
    assert!(st.issued.is_empty());
    assert_eq!(st.budget_wait, None);
    assert_eq!(st.waves[1].released, 3);
}

#[test]
fn a_move_is_counted_as_the_certificates_it_has_at_least_one_when_rendered() {
    assert_eq!(move_cost(0, false), 0);
    assert_eq!(move_cost(0, true), 1);
    assert_eq!(move_cost(3, true), 3);
    assert_eq!(move_cost(2, false), 2);
    assert!(is_certificate("cert-manager.io/v1", "Certificate"));
    assert!(!is_certificate("acm.aws.upbound.io/v1beta1", "Certificate"));
    assert!(!is_certificate("cert-manager.io/v1", "Issuer"));
    let mut spec = crate::api::GatewayClassBlueprintSpec::default();
    assert!(!renders_certificates(&spec));
    spec.route_templates.push(crate::api::TemplateEntry {
        name: "cert".into(),
        template: "apiVersion: cert-manager.io/v1\nkind: Certificate".into(),
        ..Default::default()
    });
    assert!(renders_certificates(&spec));
}

#[test]
fn members_count_the_live_certificates_of_each_gateway_and_its_routes() {
    use serde_json::json;
    let mut s = crate::snapshot::Snapshot::new("sys");
    s.put_namespace("ns", BTreeMap::new());
    s.put_class(
        serde_json::from_value(json!({
            "apiVersion": "gateway.networking.k8s.io/v1", "kind": "GatewayClass",
            "metadata": {"name": "c"},
            "spec": {"controllerName": crate::gateway::CONTROLLER_NAME,
                "parametersRef": {"group": "gatewright.dev", "kind": "GatewayClassBlueprint", "name": "bp"}},
        }))
        .unwrap(),
    );
    let blueprint = |template: &str| -> crate::api::GatewayClassBlueprint {
        serde_json::from_value(json!({
            "apiVersion": "gatewright.dev/v1alpha1", "kind": "GatewayClassBlueprint",
            "metadata": {"name": "bp"},
            "spec": {"gatewayTemplates": [{"name": "t", "template": template}]},
        }))
        .unwrap()
    };
    s.put_blueprint(blueprint(
        "apiVersion: cert-manager.io/v1\nkind: Certificate\n",
    ));
    for (name, uid) in [("g1", "u1"), ("g2", "u2")] {
        s.put_gateway(
            serde_json::from_value(json!({
                "apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
                "metadata": {"namespace": "ns", "name": name, "uid": uid},
                "spec": {"gatewayClassName": "c", "listeners": []},
            }))
            .unwrap(),
        );
    }
    let child = |api: &str, kind: &str, name: &str, parent: &str| {
        json!({"apiVersion": api, "kind": kind, "metadata": {"name": name, "namespace": "ns",
            "labels": {"gatewright.dev/parent-uid": parent, "gatewright.dev/gateway-uid": "u1"}}})
    };
    // g1: one Certificate of its own, one of a route's, and what is not a Certificate.
    s.put_child(child("cert-manager.io/v1", "Certificate", "own", "u1"));
    s.put_child(child("cert-manager.io/v1", "Certificate", "route", "r1"));
    s.put_child(child("cert-manager.io/v1", "Issuer", "issuer", "u1"));
    s.put_child(child("v1", "ConfigMap", "cm", "u1"));
    let counted = |s: &crate::snapshot::Snapshot| {
        members(s, "bp")
            .iter()
            .map(|m| (m.key.clone(), m.certificates))
            .collect::<Vec<_>>()
    };
    // g2 has none yet, but the revision renders one: at least 1.
    assert_eq!(
        counted(&s),
        vec![("ns/g1".to_owned(), 2), ("ns/g2".to_owned(), 1)]
    );
    // A revision that renders no cert-manager object: what is live still counts.
    s.put_blueprint(blueprint("apiVersion: v1\nkind: ConfigMap\n"));
    assert_eq!(
        counted(&s),
        vec![("ns/g1".to_owned(), 2), ("ns/g2".to_owned(), 0)]
    );
}

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
fn with_object(mut m: Member, approved: Option<&str>) -> Member {
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
    assert!(s.notes.iter().any(|n| n.0 && n.1 == "RolloutHalted"));
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
    assert!(s.notes.iter().any(|n| n.0 && n.1 == "RolloutGateInvalid"));
    // Said once: the next step sends no second Event.
    let s = step(&bad, "bp-2", Some("bp-1"), Some(&st), &ms, t(700));
    assert!(s.notes.is_empty());
    let st = s.status.unwrap();
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
    assert_eq!(s.status.unwrap().phase, RolloutPhase::Progressing);
}
