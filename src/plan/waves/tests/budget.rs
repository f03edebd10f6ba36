//! The issuance budget: the moves of a window capped, recorded and slid over, what waits
//! on it said, and the Certificates a Gateway's move is counted as.

use super::*;
use crate::plan::waves::class_gateway::is_certificate;

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

fn five() -> Vec<ClassGateway> {
    ["a", "b", "c", "d", "e"]
        .iter()
        .map(|n| m(n, "bp-1", Health::Ready))
        .collect()
}

/// The Gateways `moved` now run `revision`, ready.
fn arrive(ms: &mut [ClassGateway], moved: &[String], revision: &str) {
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
    assert_eq!(st.hold, Some(crate::api::HoldReason::IssuanceBudget));
    assert_eq!(st.waves[0].state, Some(crate::api::WaveState::BudgetHeld));
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
fn moves_in_flight_hold_the_window_until_they_report() {
    let p = budgeted(2, 3200, None);
    let mut ms = five();
    let s = step(&p, "bp-2", Some("bp-1"), None, &ms, t(0));
    assert_eq!(s.moved, vec!["ns/a", "ns/b"]);
    let moved = s.moved.clone();
    let st = s.status.unwrap();
    assert_eq!(st.issued.len(), 1);
    assert_eq!(st.issued[0].at, Time(t(0)));
    // 100 s later a and b still have not reported bp-2: their Certificates may be ordered
    // only now, so the record is dated now (the end of its slot of 100 s).
    let st = step(&p, "bp-2", Some("bp-1"), Some(&st), &ms, t(50))
        .status
        .unwrap();
    assert_eq!(st.issued.len(), 1);
    assert_eq!(st.issued[0].at, Time(t(100)));
    assert_eq!(spent(&st), 2);
    assert_eq!(
        st.budget_wait.as_ref().unwrap().until,
        Some(Time(t(3300))),
        "the window leaves a window after the report, not after the move"
    );
    arrive(&mut ms, &moved, "bp-2");
    // A window after the move, but not after the report: nothing more moves.
    let s = step(&p, "bp-2", Some("bp-1"), Some(&st), &ms, t(3200));
    assert!(s.moved.is_empty());
    let st = s.status.unwrap();
    // A window after the report: the next two move.
    let s = step(&p, "bp-2", Some("bp-1"), Some(&st), &ms, t(3300));
    assert_eq!(s.moved, vec!["ns/c", "ns/d"]);
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
    assert_eq!(st.hold, None);
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
    assert!(s.notes.iter().all(|n| !n.warning), "{:?}", s.notes);
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
    let mut ms: Vec<ClassGateway> = five().into_iter().take(2).collect();
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
