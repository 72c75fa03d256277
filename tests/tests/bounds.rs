//! Every quantity a policy controls is bounded where it enters the host, and
//! a policy that keeps failing is suspended instead of costing a deadline per
//! unit: the hostile policy's long-but-valid answers, log floods, mixed scale
//! answers and endless timeouts, through the framework.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use dragon_framework::record::{Frame, Replayer};
use dragon_framework::{
    Answers, BreakerChange, BreakerConfig, Cluster, Decision, Node, PodState, RecordingIo,
    Resources, Scheduler, SchedulerConfig,
};
use dragon_runtime::{
    CallError, ComponentCache, Limits, LoadError, LoadOptions, Observed, Observer, WasmPolicy,
    bounds, wit,
};
use dragon_test_policies::hostile_with_mode;
use dragon_tests::{Native, add_job, bundled, engine, hostile};

fn cluster(nodes: usize, gpus: u32) -> Cluster {
    let mut c = Cluster::new();
    for i in 0..nodes {
        let r = Resources {
            cpu_milli: 32_000,
            memory_mib: 131_072,
            gpus,
        };
        c.add_node(Node::new(&format!("n{i}"), r)).unwrap();
    }
    c
}

fn load_bytes(bytes: &[u8]) -> Result<WasmPolicy, LoadError> {
    WasmPolicy::from_bytes(
        &engine(),
        &ComponentCache::disabled(),
        "hostile.wasm",
        bytes,
        &LoadOptions::default(),
    )
}

#[test]
fn ten_million_listed_hooks_are_kept_once_each() {
    let p = load_bytes(&hostile_with_mode(b"hooks_______")).expect("loads");
    assert_eq!(p.info().hooks.len(), 6, "{:?}", p.info().hooks);
    // And it schedules as usual: every "is this hook implemented?" is cheap.
    let mut s = Scheduler::new(cluster(2, 4), SchedulerConfig::without_backoff());
    add_job(&mut s, "j", 0, 3, 3, 3);
    s.schedule_round(
        0,
        &p,
        &mut RecordingIo::default(),
        &mut RecordingIo::default(),
    );
    assert_eq!(
        s.cluster()
            .job_pods("j")
            .filter(|(_, st)| matches!(st, PodState::Bound(_)))
            .count(),
        4
    );
}

#[test]
fn long_names_and_versions_and_non_semver_versions_are_refused_in_a_short_message() {
    for (mode, says) in [
        (b"long-name___", "the name must be 1 to 64 printable bytes"),
        (b"long-version", "the version must be at most 64 bytes"),
        (b"bad-version_", "is not semver"),
    ] {
        let err = load_bytes(&hostile_with_mode(mode))
            .err()
            .unwrap_or_else(|| panic!("{mode:?} loaded"));
        let text = err.to_string();
        assert!(matches!(err, LoadError::Metadata { .. }), "{text}");
        assert!(text.contains(says), "{text}");
        assert!(text.len() < 400, "{} bytes: {text:.200}", text.len());
    }
}

#[test]
fn a_ten_megabyte_refusal_of_the_settings_is_cut() {
    let err = hostile(
        &engine(),
        r#"{"fault": "repeated", "hook": "configure"}"#,
        LoadOptions::default(),
    )
    .err()
    .expect("refused");
    assert!(matches!(err, LoadError::Settings { .. }), "{err}");
    let text = err.to_string();
    assert!(text.len() <= bounds::MAX_TEXT + 100, "{} bytes", text.len());
}

/// Counts `filter` calls on the way to the policy.
#[derive(Default)]
struct FilterCalls(AtomicUsize);

impl Observer for &FilterCalls {
    fn call<R>(
        &self,
        hook: wit::Hook,
        call: impl FnOnce() -> Result<R, CallError>,
    ) -> Result<R, CallError> {
        if hook == wit::Hook::Filter {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
        call()
    }
}

#[test]
fn a_million_copies_of_one_pre_filter_size_are_tried_once() {
    let p = hostile(
        &engine(),
        r#"{"fault": "repeated", "hook": "pre-filter"}"#,
        LoadOptions::default(),
    )
    .expect("loads");
    // One GPU in the cluster, three wanted: every size fails to fit, so each
    // size the framework tried would cost filter calls.
    let mut s = Scheduler::new(cluster(1, 1), SchedulerConfig::without_backoff());
    add_job(&mut s, "j", 0, 3, 3, 3);
    let filters = FilterCalls::default();
    let counting = Observed {
        inner: &p,
        observer: &filters,
    };
    let r = s.schedule_round(
        0,
        &counting,
        &mut RecordingIo::default(),
        &mut RecordingIo::default(),
    );
    assert!(
        r.decisions
            .iter()
            .any(|d| matches!(d, Decision::Unschedulable { .. })),
        "{:?}",
        r.decisions
    );
    // One size, four pods at most: not a million placements.
    assert!(
        filters.0.load(Ordering::Relaxed) <= 4,
        "{} filter calls",
        filters.0.load(Ordering::Relaxed)
    );
}

/// The hostile policy with `settings` and a per-call deadline.
fn hostile_with_deadline(
    engine: &dragon_runtime::PolicyEngine,
    settings: &str,
    deadline_ms: u64,
) -> WasmPolicy {
    let limits = Limits {
        deadline_ms,
        ..Limits::default()
    };
    hostile(
        engine,
        settings,
        LoadOptions {
            limits,
            ..LoadOptions::default()
        },
    )
    .expect("loads")
}

/// Log lines written while `f` runs, as text.
fn logged(f: impl FnOnce()) -> String {
    dragon_tests::logged(f).1
}

#[test]
fn a_log_flood_is_capped_per_call_and_the_drops_are_counted_in_one_line() {
    let text = logged(|| {
        let p = hostile_with_deadline(
            &engine(),
            r#"{"fault": "log-flood", "hook": "filter"}"#,
            30_000,
        );
        let mut s = Scheduler::new(cluster(2, 4), SchedulerConfig::without_backoff());
        add_job(&mut s, "j", 0, 3, 3, 3);
        s.schedule_round(
            0,
            &p,
            &mut RecordingIo::default(),
            &mut RecordingIo::default(),
        );
        // The next round reports what the last one dropped.
        s.schedule_round(
            1,
            &p,
            &mut RecordingIo::default(),
            &mut RecordingIo::default(),
        );
    });
    let lines = text.lines().filter(|l| l.contains("hostile: line")).count() as u64;
    // Four pods, one filter call each, each capped.
    assert_eq!(lines, 4 * bounds::MAX_LOG_LINES_PER_CALL, "{lines} lines");
    let dropped: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("log lines dropped"))
        .collect();
    assert_eq!(dropped.len(), 1, "{dropped:?}");
    let expected = 4 * (1_000_000 - bounds::MAX_LOG_LINES_PER_CALL);
    assert!(
        dropped[0].contains(&format!("dropped={expected}")),
        "{}",
        dropped[0]
    );
}

#[test]
fn a_scale_answer_with_any_invalid_decision_is_refused_whole() {
    let p = hostile(
        &engine(),
        r#"{"fault": "mixed-scale", "hook": "scale"}"#,
        LoadOptions::default(),
    )
    .expect("loads");
    for jobs in [1, 2] {
        let mut s = Scheduler::new(cluster(4, 4), SchedulerConfig::without_backoff());
        for j in 0..jobs {
            add_job(&mut s, &format!("j{j}"), 0, 2, 1, 4);
        }
        let mut scaler = RecordingIo::default();
        s.schedule_round(0, &p, &mut RecordingIo::default(), &mut scaler);
        let before: Vec<u32> = (0..jobs)
            .map(|j| s.cluster().job(&format!("j{j}")).unwrap().workers)
            .collect();
        let report = s.scale_step(60_000, &p, &mut scaler);
        assert!(report.actions.is_empty(), "{jobs} job(s): {report:?}");
        assert!(
            report.errors.iter().any(|e| e.contains("none applied")),
            "{jobs} job(s): {report:?}"
        );
        let after: Vec<u32> = (0..jobs)
            .map(|j| s.cluster().job(&format!("j{j}")).unwrap().workers)
            .collect();
        assert_eq!(before, after, "{jobs} job(s)");
    }
}

/// Twenty single-pod gangs, each its own unit.
fn twenty_units(config: SchedulerConfig) -> Scheduler {
    let mut s = Scheduler::new(cluster(4, 8), config);
    for j in 0..20 {
        add_job(&mut s, &format!("j{j:02}"), j, 1, 1, 1);
    }
    s
}

fn timeouts(r: &[Decision]) -> usize {
    r.iter()
        .filter(|d| matches!(d, Decision::PolicyError { error, .. } if error.contains("timed out")))
        .count()
}

#[test]
fn a_policy_that_times_out_is_suspended_at_once_and_probed_in_real_time_and_a_swap_resumes() {
    let config = SchedulerConfig {
        breaker: BreakerConfig {
            failures: 3,
            suspend_ms: 100,
            max_suspend_ms: 60_000,
        },
        ..SchedulerConfig::without_backoff()
    };
    let e = engine();
    let looping = hostile_with_deadline(&e, r#"{"fault": "loop", "hook": "filter"}"#, 20);
    let mut s = twenty_units(config);
    let mut io = RecordingIo::default();
    let opened = Instant::now();
    let r = s.schedule_round(0, &looping, &mut io, &mut RecordingIo::default());
    // One call pays the deadline; the other units fail at once.
    assert_eq!(timeouts(&r.decisions), 1, "{:?}", r.decisions);
    let suspended = |r: &[Decision]| {
        r.iter()
            .filter(
                |d| matches!(d, Decision::PolicyError { error, .. } if error.contains("suspended")),
            )
            .count()
    };
    assert_eq!(suspended(&r.decisions), 19, "{:?}", r.decisions);
    assert!(r.decisions.iter().any(|d| matches!(
        d,
        Decision::Breaker(BreakerChange::Opened {
            failures: 1,
            until_ms: 100,
            ..
        })
    )));

    // Still suspended: no call at all, not even a simulated hour later
    // while the real suspension lasts.
    let r = s.schedule_round(50, &looping, &mut io, &mut RecordingIo::default());
    assert_eq!(timeouts(&r.decisions), 0, "{:?}", r.decisions);
    let hour = 3_600_000;
    if opened.elapsed() < Duration::from_millis(90) {
        let r = s.schedule_round(hour, &looping, &mut io, &mut RecordingIo::default());
        assert_eq!(timeouts(&r.decisions), 0, "{:?}", r.decisions);
    }

    // Once the suspension has passed in real time as well: one probe,
    // which fails, and a longer suspension.
    let mut now = hour;
    let r = loop {
        now += 1;
        let r = s.schedule_round(now, &looping, &mut io, &mut RecordingIo::default());
        if timeouts(&r.decisions) > 0 || opened.elapsed() > Duration::from_secs(30) {
            break r;
        }
        std::thread::yield_now();
    };
    assert!(opened.elapsed() >= Duration::from_millis(100));
    assert_eq!(timeouts(&r.decisions), 1, "{:?}", r.decisions);
    assert!(r.decisions.iter().any(|d| matches!(
        d,
        Decision::Breaker(BreakerChange::Opened { until_ms, .. }) if *until_ms == now + 200
    )));

    // A good policy (hot swap) is not held to the old one's suspension.
    let good = bundled(&e, "dragon", "");
    s.schedule_round(now + 1, &good, &mut io, &mut RecordingIo::default());
    let bound = s
        .cluster()
        .pods()
        .filter(|(_, st)| matches!(st, PodState::Bound(_)))
        .count();
    assert_eq!(bound, 40, "twenty gangs of two");
}

/// A policy that answers every call correctly, but slowly.
#[derive(Default)]
struct Slow;

impl dragon_policy_sdk::Policy for Slow {
    type Settings = dragon_policy_sdk::NoSettings;

    // Lists `permit` (the default, which admits) so gangs go whole.
    fn metadata(&self) -> dragon_policy_sdk::types::PolicyInfo {
        use dragon_policy_sdk::types::{Hook, PolicyInfo};
        PolicyInfo::new("slow", "0.1.0", &[Hook::Filter, Hook::Permit])
    }
    fn configure(&mut self, _: Self::Settings) -> Result<(), dragon_policy_sdk::Refusal> {
        Ok(())
    }
    fn filter(
        &self,
        _: &dragon_policy_sdk::types::Placement,
        nodes: &dragon_policy_sdk::types::Candidates,
        _: &dragon_policy_sdk::types::View,
    ) -> Vec<bool> {
        // Stands in for a policy that computes for 30 ms per call.
        std::thread::sleep(std::time::Duration::from_millis(30));
        vec![true; nodes.index.len()]
    }
}

#[test]
fn a_round_stops_trying_units_when_its_budget_is_spent_and_the_next_round_goes_on() {
    let mut s = twenty_units(SchedulerConfig {
        round_budget_ms: 100,
        ..SchedulerConfig::without_backoff()
    });
    let bound = |s: &Scheduler| {
        s.cluster()
            .pods()
            .filter(|(_, st)| matches!(st, PodState::Bound(_)))
            .count()
    };
    let slow = Native::<Slow>::new("");
    let mut io = RecordingIo::default();
    let r = s.schedule_round(0, &slow, &mut io, &mut RecordingIo::default());
    let deferred = r.decisions.iter().find_map(|d| match d {
        Decision::Deferred { units, budget_ms } => Some((*units, *budget_ms)),
        _ => None,
    });
    let (untried, budget) = deferred.unwrap_or_else(|| panic!("{:?}", r.decisions));
    assert_eq!(budget, 100);
    // Two pods per unit.
    assert_eq!(bound(&s) / 2 + untried as usize, 20, "{:?}", r.decisions);
    assert!(bound(&s) < 40);
    // Later rounds place the rest.
    for t in 1..20 {
        s.schedule_round(t, &slow, &mut io, &mut RecordingIo::default());
    }
    assert_eq!(bound(&s), 40);
}

#[test]
fn a_replayed_round_defers_the_units_its_recorded_round_deferred() {
    let config = SchedulerConfig {
        round_budget_ms: 100,
        ..SchedulerConfig::without_backoff()
    };
    let mut s = twenty_units(config);
    let ops = s.cluster().as_ops();
    let slow = Native::<Slow>::new("");
    let r = s.schedule_round(
        0,
        &slow,
        &mut RecordingIo::default(),
        &mut RecordingIo::default(),
    );
    assert!(
        r.decisions
            .iter()
            .any(|d| matches!(d, Decision::Deferred { .. })),
        "{:?}",
        r.decisions
    );
    let frame = Frame::round(0, &ops, &Answers::default(), &r.decisions);
    // The replay's machine is not the recording's: the clock is not asked.
    let mut replayer = Replayer::new(config);
    let step = replayer.step(&frame, &slow, None);
    assert_eq!(step.replayed, step.recorded);
}
