//! A misbehaving policy is stopped within its limits, the error names the
//! policy, the hook and the cause, and the host goes on.

use std::time::{Duration, Instant};

use dragon_runtime::{Failure, FixedView, HookName, Hooks, Limits, LoadOptions, wit};
use dragon_tests::{engine, hostile, lone_pod_on};

fn limits(deadline_ms: u64, memory_bytes: usize) -> LoadOptions {
    LoadOptions {
        limits: Limits {
            deadline_ms,
            memory_bytes,
            ..Limits::default()
        },
        ..Default::default()
    }
}

#[test]
fn an_infinite_loop_is_interrupted_at_the_deadline() {
    let p = hostile(
        &engine(),
        r#"{"fault": "loop", "hook": "score"}"#,
        limits(100, 64 << 20),
    )
    .unwrap();
    let (pod, nodes) = lone_pod_on(3);
    let started = Instant::now();
    let err = p
        .score(&pod, &nodes, &FixedView::from_candidates(&nodes))
        .unwrap_err();
    let took = started.elapsed();
    assert_eq!(err.failure, Failure::Timeout { deadline_ms: 100 });
    assert_eq!(
        (err.policy.as_str(), err.hook),
        ("hostile", HookName::Score)
    );
    assert!(
        took >= Duration::from_millis(90) && took < Duration::from_secs(3),
        "stopped after {took:?}"
    );
    assert!(
        err.to_string()
            .contains("policy `hostile` failed in `score`: timed out after 100 ms"),
        "{err}"
    );
}

#[test]
fn a_memory_bomb_is_stopped_at_the_cap() {
    let p = hostile(
        &engine(),
        r#"{"fault": "memory-bomb", "hook": "score"}"#,
        limits(5_000, 16 << 20),
    )
    .unwrap();
    let (pod, nodes) = lone_pod_on(3);
    let err = p
        .score(&pod, &nodes, &FixedView::from_candidates(&nodes))
        .unwrap_err();
    assert_eq!(
        err.failure,
        Failure::MemoryLimit { bytes: 16 << 20 },
        "{err}"
    );
}

#[test]
fn a_panic_becomes_a_trap_that_carries_the_panic_message() {
    let p = hostile(
        &engine(),
        r#"{"fault": "trap", "hook": "filter"}"#,
        LoadOptions::default(),
    )
    .unwrap();
    let (pod, nodes) = lone_pod_on(3);
    let err = p
        .filter(&pod, &nodes, &FixedView::from_candidates(&nodes))
        .unwrap_err();
    let Failure::Trap(msg) = &err.failure else {
        panic!("expected a trap, got {err}")
    };
    assert!(msg.contains("hostile: trap in filter"), "{msg}");
    assert_eq!(err.hook, HookName::Filter);
}

#[test]
fn deep_recursion_traps_instead_of_crashing_the_host() {
    let p = hostile(
        &engine(),
        r#"{"fault": "recurse", "hook": "permit"}"#,
        LoadOptions::default(),
    )
    .unwrap();
    let gang = wit::GangState {
        id: 1,
        reserved: 1,
        min_member: 1,
        present: 1,
        waited_ms: 0,
    };
    let err = p.permit(0, &gang).unwrap_err();
    assert!(matches!(err.failure, Failure::Trap(_)), "{err}");
}

#[test]
fn after_a_failed_call_the_policy_keeps_answering_other_hooks() {
    let p = hostile(
        &engine(),
        r#"{"fault": "loop", "hook": "score"}"#,
        limits(50, 64 << 20),
    )
    .unwrap();
    let (pod, nodes) = lone_pod_on(4);
    for _ in 0..3 {
        assert!(
            p.score(&pod, &nodes, &FixedView::from_candidates(&nodes))
                .is_err()
        );
        // A fresh, reconfigured instance serves the next call.
        assert_eq!(
            p.filter(&pod, &nodes, &FixedView::from_candidates(&nodes))
                .unwrap(),
            vec![true; 4]
        );
    }
}
