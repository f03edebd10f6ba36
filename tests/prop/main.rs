//! Property tests and fuzzing of the pure core (planner, templates, `render`/`check`),
//! with proptest. Every test takes its case count from `PROPTEST_CASES` when set (the long
//! run: `PROPTEST_CASES=20000 cargo test --release --test prop`), else the bounded budget
//! of the test command. A failing case is shrunk and its seed kept under
//! `proptest-regressions/`, which every later run replays first.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code"
)]

mod input;
mod memo;
mod planner;
mod strings;
mod templates;
mod tenancy;
mod world;

use std::sync::atomic::{AtomicUsize, Ordering};

use proptest::test_runner::{Config, FileFailurePersistence, TestError, TestRunner};

/// The budget: `PROPTEST_CASES` when set, else `default`.
pub fn config(default: u32, regressions: &'static str) -> Config {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default);
    Config {
        cases,
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct(regressions))),
        ..Config::default()
    }
}

/// Fails the test with the shrunk case, or prints how many cases passed.
pub fn finish<T: std::fmt::Debug>(
    what: &str,
    runner: &TestRunner,
    result: Result<(), TestError<T>>,
) {
    match result {
        Ok(()) => println!("{what}: {} cases passed", runner.config().cases),
        Err(e) => panic!("{what}: {e}"),
    }
}

static MOST_ROUNDS: AtomicUsize = AtomicUsize::new(0);
static TOTALS: std::sync::Mutex<[usize; 5]> = std::sync::Mutex::new([0; 5]);

/// Records what a world exercised.
fn note(s: planner::Stats) {
    MOST_ROUNDS.fetch_max(s.rounds, Ordering::Relaxed);
    if let Ok(mut t) = TOTALS.lock() {
        for (i, n) in [s.gateways, s.accepted, s.refused, s.children, s.programmed]
            .into_iter()
            .enumerate()
        {
            t[i] += n;
        }
    }
}

#[test]
fn a_plan_with_remembered_route_plans_equals_a_fresh_one() {
    let mut runner = TestRunner::new(config(48, "proptest-regressions/prop-memo.txt"));
    let reused = AtomicUsize::new(0);
    let result = runner.run(
        &(world::world(), memo::edits()),
        |(w, edits)| match memo::check(&w, &edits) {
            Ok(n) => {
                reused.fetch_add(n, Ordering::Relaxed);
                Ok(())
            }
            Err(e) => Err(proptest::test_runner::TestCaseError::fail(e)),
        },
    );
    finish("remembered route plans against fresh ones", &runner, result);
    let reused = reused.load(Ordering::Relaxed);
    println!("route plans reused in all: {reused}");
    // The property means something only if plans were reused.
    assert!(reused > 0, "no route plan was ever reused");
}

#[test]
fn planner_properties() {
    let mut runner = TestRunner::new(config(48, "proptest-regressions/prop-planner.txt"));
    let result = runner.run(&world::world(), |w| match planner::check_world(&w) {
        Ok(stats) => {
            note(stats);
            Ok(())
        }
        Err(e) => Err(proptest::test_runner::TestCaseError::fail(e)),
    });
    finish("random worlds through the planner", &runner, result);
    let t = TOTALS.lock().map(|t| *t).unwrap_or_default();
    println!(
        "most rounds to converge: {} (bound {}); in all: {} Gateways of ours planned, {} route attachments accepted and {} refused, {} children at the fixed points, {} Gateways Programmed",
        MOST_ROUNDS.load(Ordering::Relaxed),
        planner::MAX_ROUNDS,
        t[0],
        t[1],
        t[2],
        t[3],
        t[4]
    );
}

#[test]
fn copies_stay_within_what_the_parent_accepted() {
    let mut runner = TestRunner::new(config(512, "proptest-regressions/prop-tenancy.txt"));
    let pairs = AtomicUsize::new(0);
    let result = runner.run(&world::world(), |w| match tenancy::check(&w) {
        Ok(n) => {
            pairs.fetch_add(n, Ordering::Relaxed);
            Ok(())
        }
        Err(e) => Err(proptest::test_runner::TestCaseError::fail(e)),
    });
    finish(
        "route copies within the parent's acceptance",
        &runner,
        result,
    );
    let pairs = pairs.load(Ordering::Relaxed);
    println!("served (listener, hostname) pairs checked: {pairs}");
    // The property means something only if copies served something.
    assert!(pairs > 0, "no copy served any pair");
}
