//! The gate before a policy swap, on recordings of simulated runs: a good
//! candidate passes; one that fails, that the framework must refuse, that
//! answers the same question differently, or that is too slow is refused
//! with the rule it broke.

use dragon_host::framework::gate::{self, Breach, GateLimits};
use dragon_host::record::Frame;
use dragon_host::runtime::{Hooks, LoadOptions};
use dragon_host::sim::{SimOptions, Trace, sim_config, simulate_recorded};
use dragon_tests::{bundled, engine, hostile};

/// The steps of `trace` simulated under `policy`.
fn recorded(trace: &str, policy: &dyn Hooks) -> Vec<Frame> {
    let trace = Trace::load(trace).unwrap();
    let mut frames = Vec::new();
    let mut sink = |f: Frame| frames.push(f);
    simulate_recorded(&trace, policy, SimOptions::default(), None, &mut sink);
    assert!(frames.len() > 5);
    frames
}

#[test]
fn the_bundled_policies_pass_on_each_others_recordings() {
    let e = engine();
    let dragon = bundled(&e, "dragon", "");
    let baseline = bundled(&e, "baseline", "");
    for (live, candidate) in [
        (&dragon, &baseline),
        (&baseline, &dragon),
        (&dragon, &dragon),
    ] {
        let frames = recorded("deadlock", live);
        let passed = gate::check(
            &frames,
            sim_config(),
            candidate,
            Some(live),
            None,
            GateLimits::default(),
        )
        .unwrap_or_else(|b| panic!("{} on {}: {b}", candidate.info().name, live.info().name));
        assert_eq!(passed.steps, frames.len());
        assert!(passed.calls > 0);
    }
}

#[test]
fn a_candidate_whose_answers_the_framework_must_refuse_is_refused() {
    let e = engine();
    let dragon = bundled(&e, "dragon", "");
    let frames = recorded("deadlock", &dragon);
    // A gang size beyond the job's workers: more pods than the job has, on
    // room the job was never given.
    let oversize = hostile(
        &e,
        r#"{"fault": "bad-output", "hook": "pre-filter"}"#,
        LoadOptions::default(),
    )
    .unwrap();
    let breach = gate::check(
        &frames,
        sim_config(),
        &oversize,
        Some(&dragon),
        None,
        GateLimits::default(),
    )
    .unwrap_err();
    let Breach::Failed { error, .. } = &breach else {
        panic!("{breach}")
    };
    assert!(
        error.contains("pre-filter") && error.contains("invalid result"),
        "{breach}"
    );
    assert!(
        breach
            .to_string()
            .starts_with("the policy failed on the step recorded at t = "),
        "{breach}"
    );

    let trapping = hostile(
        &e,
        r#"{"fault": "trap", "hook": "score"}"#,
        LoadOptions::default(),
    )
    .unwrap();
    let breach = gate::check(
        &frames,
        sim_config(),
        &trapping,
        None,
        None,
        GateLimits::default(),
    )
    .unwrap_err();
    assert!(breach.to_string().contains("trapped"), "{breach}");
}

#[test]
fn a_candidate_that_answers_the_same_question_differently_is_refused() {
    let e = engine();
    let dragon = bundled(&e, "dragon", "");
    let frames = recorded("deadlock", &dragon);
    let drifting = hostile(
        &e,
        r#"{"fault": "drift", "hook": "score"}"#,
        LoadOptions::default(),
    )
    .unwrap();
    let breach = gate::check(
        &frames,
        sim_config(),
        &drifting,
        None,
        None,
        GateLimits::default(),
    )
    .unwrap_err();
    assert!(
        matches!(breach, Breach::Nondeterministic { .. }),
        "{breach}"
    );
    assert!(
        breach
            .to_string()
            .starts_with("identical output for identical input: "),
        "{breach}"
    );
}

#[test]
fn a_candidate_slower_than_the_multiple_allows_is_refused() {
    let e = engine();
    let dragon = bundled(&e, "dragon", "");
    let frames = recorded("deadlock", &dragon);
    // No multiple at all and no floor: any time is too slow, so the rule
    // is exercised without depending on this machine's speed.
    let strict = GateLimits {
        latency_multiple: 0.0,
        latency_floor_us: 0,
        min_calls: 1,
    };
    let breach =
        gate::check(&frames, sim_config(), &dragon, Some(&dragon), None, strict).unwrap_err();
    let Breach::Slow {
        candidate_us,
        multiple,
        ..
    } = breach
    else {
        panic!("{breach}")
    };
    assert!(candidate_us > 0);
    assert_eq!(multiple, 0.0);
}
