//! End-to-end tests of `dragon-scheduler` against a real control plane
//! (etcd, kube-apiserver, kube-controller-manager, KWOK) built from Go
//! modules by `tests/controlplane/build.sh` and started on 127.0.0.1.
//!
//! One control plane serves the whole file; scenarios run one at a time,
//! each with its own nodes, namespace and scheduler name.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use common::*;
use kube::api::{Api, PostParams};
use serde_json::json;

/// A finalizer of the tests' own: a pod it holds stays, terminating,
/// until the test releases it.
const HELD: &str = "e2e.dragon.dev/held";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_gangs_that_cannot_both_fit_run_one_whole_then_the_other() {
    let _g = serial();
    let s = Scenario::new("gangs").await;
    s.node("a", 4).await;
    s.node("b", 4).await;
    let sched = Scheduler::start(&s, "dragon", "");
    s.podgroup("first", 7, json!({})).await;
    s.podgroup("second", 7, json!({})).await;
    for (g, secs) in [("first", 12), ("second", 5)] {
        s.pod(&format!("{g}-ps-0"), Some((g, "ps", 0)), 0, Some(secs))
            .await;
        for i in 0..6 {
            s.pod(
                &format!("{g}-worker-{i}"),
                Some((g, "worker", i)),
                1,
                Some(secs),
            )
            .await;
        }
    }
    until(60, "the first gang bound whole", || async {
        bound(&s.placement("first-").await) == 7
    })
    .await;
    // While the first runs, the second has nothing bound, and says why.
    for _ in 0..8 {
        assert_eq!(
            bound(&s.placement("second-").await),
            0,
            "a gang was partly bound:\n{}",
            sched.log()
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let events = s.events_for("second-worker-0").await;
    assert!(
        events
            .iter()
            .any(|(r, n)| r == "FailedScheduling" && n.contains("does not fit")),
        "{events:?}"
    );
    // When the first completes, the second starts, whole.
    until(
        90,
        "the second gang bound whole after the first finished",
        || async { bound(&s.placement("second-").await) == 7 },
    )
    .await;
    assert_eq!(s.phase("first-worker-0").await, "Succeeded");
    // As scheduler-plugins' PodGroup controller reports a group whose
    // minMember pods all succeeded (written a moment after the last one).
    until(
        30,
        "the first PodGroup Finished with 7 succeeded",
        || async {
            let status = s.podgroup_status("first").await;
            status["phase"] == "Finished" && status["succeeded"] == 7
        },
    )
    .await;
    assert!(sched.metric("dragon_scheduling_attempts_total{result=\"scheduled\"}") >= 2.0);
    // The flight recorder's file of the whole run (arrivals, a gang that
    // waits, completions) replays to the same decisions.
    let files = sched.recordings();
    assert_eq!(files.len(), 1, "{files:?}");
    assert_eq!(replay_differences(&files[0], "dragon"), 0);
    s.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiting_gang_starts_when_the_job_blocking_it_finishes_not_on_a_timer() {
    let _g = serial();
    let s = Scenario::new("wake").await;
    s.node("a", 4).await;
    let monitor = Monitor::start(&s).await;
    // Backoffs of ten minutes: within this test a unit is tried again only
    // because the cluster changed.
    let sched = Scheduler::start(
        &s,
        "dragon",
        "scheduling:\n  initialBackoffMs: 600000\n  maxBackoffMs: 600000\n",
    );
    s.podgroup("first", 4, json!({})).await;
    for i in 0..4 {
        s.pod(
            &format!("first-worker-{i}"),
            Some(("first", "worker", i)),
            1,
            Some(8),
        )
        .await;
    }
    until(60, "the first gang bound whole", || async {
        bound(&s.placement("first-").await) == 4
    })
    .await;
    s.podgroup("second", 4, json!({})).await;
    for i in 0..4 {
        s.pod(
            &format!("second-worker-{i}"),
            Some(("second", "worker", i)),
            1,
            None,
        )
        .await;
    }
    s.until_explained(60, "second-worker-0", "does not fit")
        .await;
    until(
        60,
        "the second gang bound whole after the first finished",
        || async { bound(&s.placement("second-").await) == 4 },
    )
    .await;
    let seen = monitor.seen();
    let finished = seen
        .iter()
        .filter(|p| p.name.starts_with("first-"))
        .filter_map(|p| p.dying_at)
        .max()
        .expect("the first gang's pods were seen finishing");
    let started = seen
        .iter()
        .filter(|p| p.name.starts_with("second-"))
        .filter_map(|p| p.bound_at)
        .min()
        .expect("the second gang's pods were seen bound");
    // Measured here for the record; the ten-minute backoff is the check.
    eprintln!(
        "the second gang was bound {:?} after the first finished",
        started.saturating_duration_since(finished)
    );
    s.assert_invariants(30, &[&sched], None).await;
    s.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_that_fits_on_one_node_lands_on_one_node() {
    let _g = serial();
    let s = Scenario::new("locality").await;
    s.node("small-0", 2).await;
    s.node("small-1", 2).await;
    s.node("big", 4).await;
    let _sched = Scheduler::start(&s, "dragon", "");
    s.podgroup("job", 5, json!({})).await;
    s.pod("job-ps-0", Some(("job", "ps", 0)), 0, None).await;
    for i in 0..4 {
        s.pod(
            &format!("job-worker-{i}"),
            Some(("job", "worker", i)),
            1,
            None,
        )
        .await;
    }
    until(60, "the job bound", || async {
        bound(&s.placement("job-").await) == 5
    })
    .await;
    let nodes: BTreeSet<Option<String>> = s.placement("job-").await.into_values().collect();
    assert_eq!(nodes, BTreeSet::from([Some("locality-big".to_string())]));
    s.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hot_reload_during_a_stream_of_pods_switches_policy_and_survives_a_corrupt_file() {
    let _g = serial();
    let s = Scenario::new("reload").await;
    for n in ["n0", "n1", "n2"] {
        s.node(n, 0).await;
    }
    let dir = std::env::temp_dir().join(format!("dragon-e2e-policy-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let policy = dir.join("policy.wasm");
    export("baseline", &policy);
    let sched = Scheduler::start(&s, &policy.display().to_string(), "");
    // Baseline spreads lone pods (LeastAllocated).
    for i in 0..9 {
        s.pod(&format!("before-{i}"), None, 0, None).await;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let swap_at = Instant::now();
    export("dragon", &policy);
    until(5, "the reload to be counted", || async {
        sched.metric("dragon_policy_reloads_total{result=\"success\"}") >= 1.0
    })
    .await;
    // Measured here for the record (a shared machine's timing is no check):
    // what is checked is that the swap is taken without a restart.
    eprintln!(
        "the reload was counted {:?} after the swap",
        swap_at.elapsed()
    );
    // DRAGON packs lone pods (best fit, lowest index on ties).
    for i in 0..9 {
        s.pod(&format!("after-{i}"), None, 0, None).await;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // A corrupt file is refused and DRAGON keeps scheduling.
    std::fs::write(dir.join("corrupt.tmp"), b"\0asm\x0d\0\x01\0 not really").unwrap();
    std::fs::rename(dir.join("corrupt.tmp"), &policy).unwrap();
    until(5, "the corrupt policy to be refused", || async {
        sched.metric("dragon_policy_reloads_total{result=\"failure\"}") >= 1.0
    })
    .await;
    for i in 0..6 {
        s.pod(&format!("late-{i}"), None, 0, None).await;
    }
    until(60, "every pod bound", || async {
        bound(&s.placement("").await) == 24
    })
    .await;
    let spread: BTreeSet<_> = s.placement("before-").await.into_values().collect();
    let packed: BTreeSet<_> = s.placement("after-").await.into_values().collect();
    let late: BTreeSet<_> = s.placement("late-").await.into_values().collect();
    assert!(spread.len() >= 2, "baseline should spread: {spread:?}");
    assert_eq!(packed.len(), 1, "dragon should pack: {packed:?}");
    assert_eq!(late, packed, "after the corrupt file, dragon still decides");
    assert!(
        sched.log().contains("policy reload refused"),
        "{}",
        sched.log()
    );
    s.cleanup().await;
}

/// Replay the flight recorder's file `path` through the bundled `name`:
/// the differing steps.
fn replay_differences(path: &std::path::Path, name: &str) -> usize {
    use dragon_framework::record;
    let rec = record::read(path).unwrap_or_else(|e| panic!("{e}"));
    let engine = dragon_runtime::PolicyEngine::new().unwrap();
    let policy = dragon_runtime::WasmPolicy::from_bytes(
        &engine,
        &dragon_runtime::ComponentCache::disabled(),
        name,
        dragon_bundled::by_name(name).unwrap(),
        &dragon_runtime::LoadOptions::default(),
    )
    .unwrap();
    assert_eq!(rec.header.sha256, policy.info().sha256, "{:?}", rec.header);
    let config = serde_json::from_str(&rec.header.config).unwrap();
    let replay = record::replay(&rec, &policy, None, config);
    assert!(replay.rounds > 0, "{replay:?}");
    for d in &replay.differences {
        eprintln!(
            "t = {} ms:\n  recorded {}\n  replayed {}",
            d.now_ms, d.recorded, d.replayed
        );
    }
    replay.differences.len()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_gate_refuses_a_candidate_the_framework_must_overrule_and_the_recording_replays_exactly()
 {
    let _g = serial();
    let s = Scenario::new("gate").await;
    // Three small nodes, so that DRAGON packs a gang where `baseline`
    // spreads it (each pod takes a tenth of a node's CPU).
    for n in ["a", "b", "c"] {
        s.node_with(n, 4, json!({"cpu": "1"})).await;
    }
    let dir = std::env::temp_dir().join(format!("dragon-e2e-gate-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let policy = dir.join("policy.wasm");
    export("dragon", &policy);
    let sched = Scheduler::start(&s, &policy.display().to_string(), "");
    let s = &s;
    let gang = |g: &'static str| async move {
        s.podgroup(g, 3, json!({})).await;
        for i in 0..3 {
            s.pod(&format!("{g}-worker-{i}"), Some((g, "worker", i)), 1, None)
                .await;
        }
    };
    gang("first").await;
    until(60, "the first gang bound", || async {
        bound(&s.placement("first-").await) == 3
    })
    .await;

    // A candidate that asks to place every gang at one worker more than it
    // has: on the recorded steps the framework refuses its answers, so the
    // gate refuses it and DRAGON keeps scheduling.
    let tmp = dir.join("policy.tmp");
    std::fs::write(
        &tmp,
        dragon_test_policies::hostile_with_mode(b"oversize____"),
    )
    .unwrap();
    std::fs::rename(&tmp, &policy).unwrap();
    until(30, "the candidate to be gated", || async {
        sched.metric("dragon_policy_reloads_total{result=\"gated\"}") >= 1.0
    })
    .await;
    let log = sched.log();
    assert!(
        log.contains("policy reload refused by the gate")
            && log.contains("the policy failed on the step recorded at t = ")
            && log.contains("pre-filter"),
        "{log}"
    );
    gang("second").await;
    until(60, "the second gang bound by the live policy", || async {
        bound(&s.placement("second-").await) == 3
    })
    .await;
    // A golden case shipped next to the policy: the steps recorded so far
    // (whole records only), whose decisions are DRAGON's. `baseline` passes
    // on the recording itself but decides the case otherwise.
    use dragon_framework::record;
    let files = sched.recordings();
    assert_eq!(files.len(), 1, "{files:?}");
    let so_far = record::read(&files[0]).unwrap();
    let mut case =
        record::Recorder::create(&dir.join("policy.golden.live.rec"), &so_far.header).unwrap();
    for frame in &so_far.frames {
        case.frame(frame).unwrap();
    }
    case.finish().unwrap();
    export("baseline", &policy);
    until(
        30,
        "the candidate to be gated on its golden case",
        || async { sched.metric("dragon_policy_reloads_total{result=\"gated\"}") >= 2.0 },
    )
    .await;
    let log = sched.log();
    assert!(
        log.contains("golden case ")
            && log.contains("policy.golden.live.rec: ")
            && log.contains("decided otherwise than recorded"),
        "{log}"
    );
    assert_eq!(
        sched.metric("dragon_policy_reloads_total{result=\"success\"}"),
        0.0
    );

    // What the flight recorder kept replays to the same decisions.
    assert_eq!(replay_differences(&files[0], "dragon"), 0);
    s.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_baseline_shadowing_dragon_is_counted_and_shown_and_never_binds() {
    let _g = serial();
    let s = Scenario::new("shadow").await;
    for n in ["n0", "n1", "n2"] {
        s.node(n, 0).await;
    }
    let sched = Scheduler::start(&s, "dragon", "shadowPolicy: baseline\n");
    for i in 0..9 {
        s.pod(&format!("p-{i}"), None, 0, None).await;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    until(60, "every pod bound", || async {
        bound(&s.placement("p-").await) == 9
    })
    .await;
    // DRAGON packs lone pods, as it does without a shadow (the hot reload
    // test): the baseline, which would spread them, bound none.
    let nodes: BTreeSet<_> = s.placement("p-").await.into_values().collect();
    assert_eq!(nodes.len(), 1, "{nodes:?}");
    until(30, "the shadow's disagreements counted", || async {
        sched.metric("dragon_shadow_decisions_total{outcome=\"different\"}") >= 1.0
    })
    .await;
    let (code, body) = sched.get("/shadow").unwrap();
    assert_eq!(code, 200);
    let view: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(view["policy"], "baseline", "{view}");
    assert!(view["different"].as_u64() >= Some(1), "{view}");
    let d = &view["disagreements"][0];
    assert!(
        d["subject"]
            .as_str()
            .unwrap()
            .starts_with(&format!("pod/{}/p-", s.name))
            && d["live"].as_str().unwrap().starts_with("bound to ")
            && d["shadow"].as_str().unwrap().starts_with("bound to "),
        "{view}"
    );
    assert_eq!(view["diverged"], 0, "{view}");
    assert!(
        sched
            .log()
            .contains("the shadow policy decided differently"),
        "{}",
        sched.log()
    );
    s.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_settings_change_takes_effect_without_a_restart_and_bad_settings_are_refused() {
    let _g = serial();
    let s = Scenario::new("settings").await;
    s.node("a", 4).await;
    let dir = std::env::temp_dir().join(format!("dragon-e2e-settings-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let settings = dir.join("settings.yaml");
    let write = |text: &str| {
        let tmp = dir.join("settings.tmp");
        std::fs::write(&tmp, text).unwrap();
        std::fs::rename(&tmp, &settings).unwrap();
    };
    write("idle_threshold_s: 60\n");
    let sched = Scheduler::start(
        &s,
        "dragon",
        &format!("settingsFile: {}\n", settings.display()),
    );
    s.pod("p-0", None, 1, None).await;
    until(60, "the first pod bound", || async {
        bound(&s.placement("p-").await) == 1
    })
    .await;

    write("idle_threshold_s: 30\n");
    until(30, "the settings reloaded", || async {
        sched.metric("dragon_policy_reloads_total{result=\"success\"}") >= 1.0
    })
    .await;
    // The next step runs under them: its recording file says so.
    s.pod("p-1", None, 1, None).await;
    until(60, "the second pod bound", || async {
        bound(&s.placement("p-").await) == 2
    })
    .await;
    let files = sched.recordings();
    let last = dragon_framework::record::read(files.last().unwrap()).unwrap();
    assert_eq!(
        last.header.settings, r#"{"idle_threshold_s":30}"#,
        "{files:?}"
    );

    // Settings the policy refuses: the last good ones keep scheduling.
    write("idle_threshold_s: -1\n");
    until(30, "the bad settings refused", || async {
        sched.metric("dragon_policy_reloads_total{result=\"failure\"}") >= 1.0
    })
    .await;
    s.pod("p-2", None, 1, None).await;
    until(60, "the third pod bound", || async {
        bound(&s.placement("p-").await) == 3
    })
    .await;
    assert!(
        sched.log().contains("idle_threshold_s"),
        "the refusal names the setting:\n{}",
        sched.log()
    );
    s.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_scheduler_finishes_the_work_with_nothing_double_bound() {
    let _g = serial();
    let s = Scenario::new("restart").await;
    s.node("a", 8).await;
    s.node("b", 8).await;
    let mut sched = Scheduler::start(&s, "dragon", "");
    for j in 0..4 {
        let g = format!("job{j}");
        s.podgroup(&g, 4, json!({})).await;
        s.pod(&format!("{g}-ps-0"), Some((&g, "ps", 0)), 0, None)
            .await;
        for i in 0..3 {
            s.pod(&format!("{g}-worker-{i}"), Some((&g, "worker", i)), 1, None)
                .await;
        }
        if j == 1 {
            until(30, "some pods bound", || async {
                bound(&s.placement("").await) >= 4
            })
            .await;
            // Scheduled Events go out after their binds; killed before
            // one is sent, it is lost with the process (as kube-scheduler's
            // would be), and this test checks it below.
            s.until_scheduled_event(30, "job0-worker-0").await;
            sched.kill();
        }
    }
    let _sched2 = Scheduler::start(&s, "dragon", "");
    until(60, "every pod bound", || async {
        bound(&s.placement("").await) == 16
    })
    .await;
    // Gangs whole, capacity respected.
    let placement = s.placement("").await;
    let mut gpus_per_node: BTreeMap<String, u32> = BTreeMap::new();
    for (pod, node) in &placement {
        if pod.contains("worker") {
            *gpus_per_node.entry(node.clone().unwrap()).or_default() += 1;
        }
    }
    assert!(gpus_per_node.values().all(|&g| g <= 8), "{gpus_per_node:?}");
    s.until_scheduled_event(30, "job0-worker-0").await;
    let events = s.events_for("job0-worker-0").await;
    assert_eq!(
        events.iter().filter(|(r, _)| r == "Scheduled").count(),
        1,
        "{events:?}"
    );
    s.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_starving_job_shrinks_a_running_statefulset_through_scale_then_runs() {
    let _g = serial();
    let s = Scenario::new("starve").await;
    s.node("a", 4).await;
    let _sched = Scheduler::start(
        &s,
        "dragon",
        "scaleIntervalSeconds: 1\nsettings: {starvation_threshold_s: 3, idle_threshold_s: 3600}\n",
    );
    s.podgroup(
        "big",
        3,
        json!({"dragon.dev/min-workers": "2", "dragon.dev/max-workers": "4",
               "dragon.dev/scale-target": "apps/v1/statefulsets/big-worker"}),
    )
    .await;
    s.pod("big-ps-0", Some(("big", "ps", 0)), 0, None).await;
    s.role_set("big-worker", "big", "worker", 4, 1).await;
    until(90, "the elastic job running with 4 workers", || async {
        bound(&s.placement("big-").await) == 5
    })
    .await;
    // A second job that needs 2 GPUs at its min.
    s.podgroup("small", 3, json!({"dragon.dev/min-workers": "2"}))
        .await;
    s.pod("small-ps-0", Some(("small", "ps", 0)), 0, None).await;
    for i in 0..2 {
        s.pod(
            &format!("small-worker-{i}"),
            Some(("small", "worker", i)),
            1,
            None,
        )
        .await;
    }
    until(60, "the StatefulSet shrunk to 2 through /scale", || async {
        s.replicas("big-worker").await == Some(2)
    })
    .await;
    until(90, "the waiting job bound", || async {
        bound(&s.placement("small-").await) == 3
    })
    .await;
    let big = s.placement("big-worker-").await;
    assert!(
        big.keys()
            .all(|k| k == "big-worker-0" || k == "big-worker-1"),
        "worker 0 kept, highest removed: {big:?}"
    );
    s.cleanup().await;
}

/// A job that reports its speed-up on its PodGroup (`dragon.dev/speedup`)
/// is grown by what a worker buys it: of two elastic jobs alike but for
/// their figures, dragon-plus gives the idle GPUs to the one that scales,
/// through its `/scale`, and leaves the other at its size.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_gpus_go_to_the_job_whose_reported_speedup_gains_most() {
    let _g = serial();
    let s = Scenario::new("goodput").await;
    s.node("a", 8).await;
    let _sched = Scheduler::start(
        &s,
        "dragon-plus",
        "scaleIntervalSeconds: 1
",
    );
    // Samples per second with 1 to 6 workers.
    for (name, speedup) in [
        ("flat", "100,104,107,109,110,111"),
        ("lin", "100,200,300,400,500,600"),
    ] {
        s.podgroup(
            name,
            2,
            json!({"dragon.dev/min-workers": "2", "dragon.dev/max-workers": "6",
                   "dragon.dev/scale-target": format!("apps/v1/statefulsets/{name}-worker"),
                   "dragon.dev/speedup": speedup}),
        )
        .await;
        s.role_set(&format!("{name}-worker"), name, "worker", 2, 1)
            .await;
    }
    until(
        90,
        "the job that scales grown to its max through /scale",
        || async { s.replicas("lin-worker").await == Some(6) },
    )
    .await;
    until(90, "its new workers bound", || async {
        bound(&s.placement("lin-worker-").await) == 6
    })
    .await;
    assert_eq!(
        s.replicas("flat-worker").await,
        Some(2),
        "the flat job keeps its size"
    );
    s.cleanup().await;
}

/// The nodes `prefix`'s pods are bound to, by the scenario's node names.
async fn nodes_of(s: &Scenario, prefix: &str) -> BTreeSet<String> {
    let scenario = format!("{}-", s.name);
    s.placement(prefix)
        .await
        .into_values()
        .flatten()
        .map(|n| n.strip_prefix(&scenario).unwrap_or(&n).to_string())
        .collect()
}

/// On nodes of two GPU types, an elastic job grows only on the type it
/// started on, though the other type has room: that room goes to the next
/// job.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_elastic_job_grows_only_on_the_gpu_type_it_started_on() {
    let _g = serial();
    let s = Scenario::new("gputype").await;
    s.node_labelled("t4", 4, json!({"nvidia.com/gpu.product": "Tesla-T4"}))
        .await;
    s.node_labelled(
        "a100",
        6,
        json!({"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB"}),
    )
    .await;
    let _sched = Scheduler::start(
        &s,
        "dragon-plus",
        "scaleIntervalSeconds: 1
",
    );
    let elastic = |name: &str, max: u32| {
        let speedup: Vec<String> = (1..=max).map(|w| (100 * w).to_string()).collect();
        json!({"dragon.dev/min-workers": "2", "dragon.dev/max-workers": max.to_string(),
               "dragon.dev/scale-target": format!("apps/v1/statefulsets/{name}-worker"),
               "dragon.dev/speedup": speedup.join(",")})
    };
    // It starts on the T4 node (best fit) and fills it.
    s.podgroup("a", 2, elastic("a", 8)).await;
    s.role_set("a-worker", "a", "worker", 2, 1).await;
    until(90, "the first job grown to its node's 4 GPUs", || async {
        s.replicas("a-worker").await == Some(4) && bound(&s.placement("a-worker-").await) == 4
    })
    .await;
    assert_eq!(
        nodes_of(&s, "a-worker-").await,
        BTreeSet::from(["t4".to_string()])
    );
    // The A100 node's room goes to the next job, all of it.
    s.podgroup("b", 2, elastic("b", 6)).await;
    s.role_set("b-worker", "b", "worker", 2, 1).await;
    until(
        90,
        "the second job grown to the A100 node's 6 GPUs",
        || async {
            s.replicas("b-worker").await == Some(6) && bound(&s.placement("b-worker-").await) == 6
        },
    )
    .await;
    assert_eq!(
        nodes_of(&s, "b-worker-").await,
        BTreeSet::from(["a100".to_string()])
    );
    assert_eq!(
        s.replicas("a-worker").await,
        Some(4),
        "the first job kept to its type"
    );
    assert_eq!(
        nodes_of(&s, "a-worker-").await,
        BTreeSet::from(["t4".to_string()])
    );
    s.cleanup().await;
}

const LEADER: &str = "dragon_is_leader";

/// Once exactly one of two replicas leads: (the leader, the other).
async fn one_leader(one: Scheduler, two: Scheduler) -> (Scheduler, Scheduler) {
    until(30, "exactly one leader", || async {
        one.metric(LEADER) + two.metric(LEADER) == 1.0
    })
    .await;
    match one.metric(LEADER) == 1.0 {
        true => (one, two),
        false => (two, one),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn of_two_replicas_only_the_leader_schedules_and_the_other_takes_over() {
    let _g = serial();
    let s = Scenario::new("leader").await;
    s.node("a", 8).await;
    let le = "leaderElection: {enabled: true, namespace: leader, leaseName: dragon-e2e, leaseDurationSeconds: 4}\n";
    let (mut leader, follower) = one_leader(
        Scheduler::start(&s, "dragon", le),
        Scheduler::start(&s, "dragon", le),
    )
    .await;
    for i in 0..3 {
        s.pod(&format!("first-{i}"), None, 1, None).await;
    }
    until(30, "pods bound by the leader", || async {
        bound(&s.placement("first-").await) == 3
    })
    .await;
    // Its Scheduled event is sent just after the bind: let it out before
    // the kill, so the count below is about the new leader binding again.
    s.until_scheduled_event(30, "first-0").await;
    leader.kill();
    until(30, "the follower to take the lease", || async {
        follower.metric(LEADER) == 1.0
    })
    .await;
    for i in 0..3 {
        s.pod(&format!("second-{i}"), None, 1, None).await;
    }
    until(30, "pods bound by the new leader", || async {
        bound(&s.placement("second-").await) == 3
    })
    .await;
    let events = s.events_for("first-0").await;
    assert_eq!(
        events.iter().filter(|(r, _)| r == "Scheduled").count(),
        1,
        "{events:?}"
    );
    s.cleanup().await;
}

/// Everything `sched` has acted on, as its metrics count it: scheduling
/// attempts whatever their result, scale actions and preemption victims.
fn acted(sched: &Scheduler) -> f64 {
    let (_, body) = sched.get("/metrics").unwrap_or_default();
    body.lines()
        .filter(|l| {
            [
                "dragon_scheduling_attempts_total",
                "dragon_scale_actions_total",
                "dragon_preemption_victims_total",
            ]
            .iter()
            .any(|m| l.starts_with(m))
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// How many frozen-leader trials to run (`DRAGON_E2E_FENCE_TRIALS`, 1 by
/// default; each takes about 30 s).
fn fence_trials() -> usize {
    std::env::var("DRAGON_E2E_FENCE_TRIALS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_frozen_past_its_lease_acts_on_nothing_once_thawed_and_the_standby_binds_everything()
 {
    let _g = serial();
    let trials = fence_trials();
    for trial in 0..trials {
        frozen_leader(&format!("fenced-{trial}")).await;
        eprintln!("frozen-leader trial {} of {trials}: passed", trial + 1);
    }
}

/// One frozen-leader trial in namespace `ns`.
async fn frozen_leader(ns: &str) {
    let s = Scenario::new(ns).await;
    s.node("a", 8).await;
    s.node("b", 8).await;
    let le = format!(
        "leaderElection: {{enabled: true, namespace: {ns}, leaseName: dragon-e2e, leaseDurationSeconds: 4}}\n"
    );
    let le = le.as_str();
    let (old, standby) = one_leader(
        Scheduler::start(&s, "dragon", le),
        Scheduler::start(&s, "dragon", le),
    )
    .await;
    for i in 0..2 {
        s.pod(&format!("before-{i}"), None, 1, None).await;
    }
    until(30, "pods bound by the leader", || async {
        bound(&s.placement("before-").await) == 2
    })
    .await;
    s.until_scheduled_event(30, "before-1").await;
    let acted_before = acted(&old);

    // Frozen past its Lease (4 s) while pods and a gang keep arriving:
    // their watch events wait in its sockets.
    old.pause();
    until(30, "the standby to take the Lease", || async {
        standby.metric(LEADER) == 1.0
    })
    .await;
    s.podgroup("gang", 3, json!({})).await;
    for i in 0..3 {
        s.pod(
            &format!("gang-worker-{i}"),
            Some(("gang", "worker", i)),
            2,
            None,
        )
        .await;
    }
    for i in 0..3 {
        s.pod(&format!("during-{i}"), None, 1, None).await;
    }
    // One that fits nowhere: both replicas would have a wait to tell.
    s.pod("huge", None, 64, None).await;
    until(60, "the standby to bind what arrived", || async {
        bound(&s.placement("gang-").await) == 3 && bound(&s.placement("during-").await) == 3
    })
    .await;
    s.until_explained(60, "huge", "").await;

    // Thawed: it still believes it leads until its renewal fails, and
    // meanwhile it plans no round and sends no write.
    old.resume();
    until(30, "the old leader to know it no longer leads", || async {
        old.metric(LEADER) == 0.0
    })
    .await;
    for i in 0..2 {
        s.pod(&format!("after-{i}"), None, 1, None).await;
    }
    until(30, "the standby to bind what came after", || async {
        bound(&s.placement("after-").await) == 2
    })
    .await;
    assert_eq!(
        acted(&old),
        acted_before,
        "the old leader acted after losing its Lease:\n{}",
        old.log()
    );
    eprintln!(
        "writes the fence held back: {}",
        old.metric("dragon_fenced_writes_total")
    );
    s.assert_invariants(30, &[&old, &standby], None).await;
    s.cleanup().await;
}

/// The hostile test policy, trapping in `score`, as a policy file.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_mid_gang_finishes_its_binds_releases_the_lease_and_the_standby_leads() {
    let _g = serial();
    let s = Scenario::new("sigterm").await;
    s.node("a", 8).await;
    // Two binds a second: a gang of six takes about three seconds to bind.
    let config = "leaderElection: {enabled: true, namespace: sigterm, leaseName: dragon-e2e, leaseDurationSeconds: 10}\n\
                  clientQps: 2\nclientBurst: 1\n";
    let (mut leader, standby) = one_leader(
        Scheduler::start(&s, "dragon", config),
        Scheduler::start(&s, "dragon", config),
    )
    .await;
    s.podgroup("g", 6, json!({})).await;
    for i in 0..6 {
        s.pod(&format!("g-worker-{i}"), Some(("g", "worker", i)), 1, None)
            .await;
    }
    until(60, "the first member bound", || async {
        bound(&s.placement("g-").await) >= 1
    })
    .await;
    let at = Instant::now();
    let status = leader.terminate(60);
    let stopped = at.elapsed();
    assert!(status.success(), "{status}:\n{}", leader.log());
    // The round under way was finished before the process left.
    let placement = s.placement("g-").await;
    assert_eq!(bound(&placement), 6, "half bound at exit: {placement:?}");
    let log = leader.log();
    assert!(
        log.contains("scheduling stopped") && log.contains("lease released"),
        "{log}"
    );
    let lease: Api<k8s_openapi::api::coordination::v1::Lease> =
        Api::namespaced(s.client.clone(), "sigterm");
    let holder = lease
        .get("dragon-e2e")
        .await
        .unwrap()
        .spec
        .and_then(|l| l.holder_identity)
        .filter(|h| !h.is_empty());
    assert_eq!(holder, None, "the lease still names a holder");
    until(30, "the standby to lead", || async {
        standby.metric(LEADER) == 1.0
    })
    .await;
    eprintln!(
        "stopped {stopped:?} after SIGTERM; the standby led {:?} after SIGTERM (lease 10 s)",
        at.elapsed()
    );
    s.pod("after-0", None, 1, None).await;
    until(30, "the new leader binds", || async {
        bound(&s.placement("after-").await) == 1
    })
    .await;
    s.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn healthz_fails_while_the_scheduling_thread_is_stuck_and_recovers() {
    let _g = serial();
    let s = Scenario::new("healthz").await;
    // Two nodes: with one candidate there is nothing to score.
    s.node("a", 8).await;
    s.node("b", 8).await;
    let dir = std::env::temp_dir().join(format!("dragon-e2e-healthz-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("hostile.wasm");
    std::fs::write(&path, dragon_test_policies::HOSTILE).unwrap();
    // Every score call spins to its 5 s deadline, no round budget and no
    // breaker: each pod holds the thread for 5 s, 4 s of them past the
    // 1 s limit, wide enough to be seen on a loaded machine.
    let sched = Scheduler::start(
        &s,
        path.to_str().unwrap(),
        "settings: {fault: loop, hook: score}\nlimits: {deadlineMs: 5000}\n\
         scheduling: {roundBudgetMs: 0, breaker: {failures: 0}}\nstuckAfterSeconds: 1\n",
    );
    assert_eq!(sched.get("/healthz").map(|(c, _)| c), Some(200));
    for i in 0..3 {
        s.pod(&format!("p-{i}"), None, 1, None).await;
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    let body = loop {
        if let Some((503, body)) = sched.get("/healthz") {
            break body;
        }
        assert!(
            Instant::now() < deadline,
            "/healthz never failed:\n{}",
            sched.log()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(body.contains("busy with one batch of work"), "{body}");
    // Without pending pods the thread goes back to waiting: healthy again.
    let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(s.client.clone(), &s.name);
    for i in 0..3 {
        let _ = pods
            .delete(&format!("p-{i}"), &kube::api::DeleteParams::default())
            .await;
    }
    until(60, "/healthz ok again", || async {
        sched.get("/healthz").map(|(c, _)| c) == Some(200)
    })
    .await;
    s.cleanup().await;
}

fn trapping_policy(dir: &std::path::Path) -> (std::path::PathBuf, &'static str) {
    std::fs::create_dir_all(dir).unwrap();
    let path = dir.join("hostile.wasm");
    std::fs::write(&path, dragon_test_policies::HOSTILE).unwrap();
    (
        path,
        "settings: {fault: trap, hook: score}\nlimits: {deadlineMs: 1000}\n",
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_policy_that_traps_fails_closed_with_an_event_or_falls_back_to_the_baseline() {
    let _g = serial();
    let s = Scenario::new("policy-error").await;
    for n in ["n0", "n1"] {
        s.node(n, 2).await;
    }
    let dir = std::env::temp_dir().join(format!("dragon-e2e-hostile-{}", std::process::id()));
    let (policy, settings) = trapping_policy(&dir);

    // Fail closed (the default): the gang stays pending and says why.
    let mut sched = Scheduler::start(&s, &policy.display().to_string(), settings);
    s.podgroup("job", 3, json!({})).await;
    for i in 0..3 {
        s.pod(
            &format!("job-worker-{i}"),
            Some(("job", "worker", i)),
            1,
            None,
        )
        .await;
    }
    until(
        60,
        "a FailedScheduling event naming the policy error",
        || async {
            s.events_for("job-worker-0").await.iter().any(|(r, n)| {
                r == "FailedScheduling" && n.contains("policy error") && n.contains("score")
            })
        },
    )
    .await;
    assert_eq!(
        bound(&s.placement("job-").await),
        0,
        "fail closed binds nothing"
    );
    sched.kill();

    // Fallback: the baseline places the gang whole.
    let sched = Scheduler::start(
        &s,
        &policy.display().to_string(),
        &format!("{settings}onPolicyError: fallback\n"),
    );
    until(60, "the gang bound by the fallback", || async {
        bound(&s.placement("job-").await) == 3
    })
    .await;
    assert!(
        sched.metric("dragon_scheduling_attempts_total{result=\"fallback\"}") >= 1.0,
        "{}",
        sched.log()
    );
    s.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gated_member_holds_its_gang_untouched_until_the_gate_is_removed() {
    let _g = serial();
    let s = Scenario::new("gated").await;
    s.node("a", 4).await;
    let sched = Scheduler::start(&s, "dragon", "");
    // A gang of bare pods (no controller would recreate a deleted one).
    s.podgroup("g", 3, json!({})).await;
    s.pod("g-ps-0", Some(("g", "ps", 0)), 0, None).await;
    s.pod("g-worker-0", Some(("g", "worker", 0)), 1, None).await;
    s.gated_pod(
        "g-worker-1",
        Some(("g", "worker", 1)),
        1,
        &["example.com/quota"],
    )
    .await;
    // The gate is named on the gang's pods, and nothing is bound.
    s.until_explained(60, "g-worker-0", "scheduling gated")
        .await;
    for _ in 0..4 {
        assert_eq!(
            bound(&s.placement("g-").await),
            0,
            "a gated gang was partly bound:\n{}",
            sched.log()
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    assert_eq!(s.pods().await.len(), 3, "no pod was deleted");
    // PodScheduled=False, as kube-scheduler writes it, for cluster-autoscaler.
    until(30, "PodScheduled=False on the gang's pods", || async {
        let conditions: Vec<(String, String)> = s
            .pods()
            .await
            .iter()
            .filter_map(|p| {
                let c = p
                    .status
                    .as_ref()?
                    .conditions
                    .as_ref()?
                    .iter()
                    .find(|c| c.type_ == "PodScheduled" && c.status == "False")?;
                Some((p.metadata.name.clone()?, c.reason.clone()?))
            })
            .collect();
        conditions.len() == 3
            && conditions.iter().all(|(n, r)| {
                r == if n == "g-worker-1" {
                    "SchedulingGated"
                } else {
                    "Unschedulable"
                }
            })
    })
    .await;
    // Without the gate, the gang is bound whole.
    s.ungate("g-worker-1").await;
    until(60, "the gang bound whole once ungated", || async {
        bound(&s.placement("g-").await) == 3
    })
    .await;
    // The Binding sets PodScheduled=True.
    until(30, "PodScheduled=True on the bound pods", || async {
        s.pods().await.iter().all(|p| {
            p.status
                .as_ref()
                .and_then(|st| st.conditions.as_ref())
                .is_some_and(|cs| {
                    cs.iter()
                        .any(|c| c.type_ == "PodScheduled" && c.status == "True")
                })
        })
    })
    .await;
    s.assert_invariants(30, &[&sched], None).await;
    s.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn affinity_ports_and_extended_resources_change_the_placement() {
    let _g = serial();
    let s = Scenario::new("constraints").await;
    s.node_with("a", 4, json!({"example.com/hca": "1"})).await;
    s.node("b", 4).await;
    s.node("c", 4).await;
    let host = |n: &str| format!("constraints-{n}");
    let sched = Scheduler::start(&s, "dragon", "");
    // A gang whose members keep apart by anti-affinity: DRAGON alone
    // would pack three 1-GPU workers on one node.
    s.podgroup("spread", 3, json!({})).await;
    let apart = json!({"metadata": {"labels": {"job": "spread"}}, "spec": {"affinity": {"podAntiAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": {"job": "spread"}}, "topologyKey": "kubernetes.io/hostname"}]}}}});
    for i in 0..3 {
        s.pod_with(
            &format!("spread-worker-{i}"),
            Some(("spread", "worker", i)),
            1,
            apart.clone(),
        )
        .await;
    }
    until(60, "the anti-affine gang bound", || async {
        bound(&s.placement("spread-").await) == 3
    })
    .await;
    let nodes: BTreeSet<Option<String>> = s.placement("spread-").await.into_values().collect();
    assert_eq!(nodes.len(), 3, "members share a node: {nodes:?}");
    // The same wish as a preference (preferred anti-affinity) spreads a
    // gang too, where room allows.
    s.podgroup("soft", 3, json!({})).await;
    let rather_apart = json!({"metadata": {"labels": {"job": "soft"}}, "spec": {"affinity": {"podAntiAffinity": {
        "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 100, "podAffinityTerm":
            {"labelSelector": {"matchLabels": {"job": "soft"}}, "topologyKey": "kubernetes.io/hostname"}}]}}}});
    for i in 0..3 {
        s.pod_with(
            &format!("soft-worker-{i}"),
            Some(("soft", "worker", i)),
            1,
            rather_apart.clone(),
        )
        .await;
    }
    until(60, "the gang preferring to keep apart bound", || async {
        bound(&s.placement("soft-").await) == 3
    })
    .await;
    let nodes: BTreeSet<Option<String>> = s.placement("soft-").await.into_values().collect();
    assert_eq!(nodes.len(), 3, "members share a node: {nodes:?}");
    // A host port taken on `a` sends the next pod asking for it to `b`,
    // though its node affinity allows both.
    let port = |on: &[&str]| {
        json!({"spec": {
            "containers": [{"name": "c", "image": "fake", "ports": [{"containerPort": 80, "hostPort": 9000}],
                            "resources": {"requests": {"cpu": "100m"}}}],
            "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In",
                                       "values": on.iter().map(|n| host(n)).collect::<Vec<_>>()}]}]}}}}})
    };
    s.pod_with("port-0", None, 0, port(&["a"])).await;
    until(60, "the first port pod bound", || async {
        bound(&s.placement("port-0").await) == 1
    })
    .await;
    s.pod_with("port-1", None, 0, port(&["a", "b"])).await;
    until(60, "the second port pod bound", || async {
        bound(&s.placement("port-1").await) == 1
    })
    .await;
    assert_eq!(s.placement("port-").await["port-0"], Some(host("a")));
    assert_eq!(s.placement("port-").await["port-1"], Some(host("b")));
    // One node offers one HCA: the first pod asking gets it, the second
    // waits, says why, and carries PodScheduled=False.
    let hca = json!({"spec": {"containers": [{"name": "c", "image": "fake",
        "resources": {"requests": {"cpu": "100m", "example.com/hca": "1"}, "limits": {"example.com/hca": "1"}}}]}});
    s.pod_with("hca-0", None, 0, hca.clone()).await;
    until(60, "the first HCA pod bound", || async {
        bound(&s.placement("hca-0").await) == 1
    })
    .await;
    assert_eq!(s.placement("hca-").await["hca-0"], Some(host("a")));
    s.pod_with("hca-1", None, 0, hca).await;
    s.until_explained(
        60,
        "hca-1",
        "0/3 nodes are available: 3 Insufficient example.com/hca",
    )
    .await;
    // A constraint Dragon cannot evaluate leaves the pod pending, named.
    s.pod_with(
        "unsupported",
        None,
        0,
        json!({"spec": {"affinity": {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {}, "topologyKey": "zone", "namespaceSelector": {"matchLabels": {"team": "a"}}}]}}}}),
    )
    .await;
    s.until_explained(
        60,
        "unsupported",
        "namespaceSelector: selecting namespaces by label is not supported",
    )
    .await;
    // A preferred node is chosen among those that fit.
    for (pod, node) in [("prefer-b", "b"), ("prefer-c", "c")] {
        s.pod_with(
            pod,
            None,
            0,
            json!({"spec": {"affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 100, "preference": {"matchExpressions": [
                    {"key": "kubernetes.io/hostname", "operator": "In", "values": [host(node)]}]}}]}}}}),
        )
        .await;
        until(60, "the pod with a preference bound", || async {
            bound(&s.placement(pod).await) == 1
        })
        .await;
        assert_eq!(s.placement(pod).await[pod], Some(host(node)));
    }
    // A claim bound to a volume only node `c` reaches takes its pod there;
    // a claim that is not bound leaves its pod pending, saying so.
    let (pv, pvc) = s.local_volume("data", "c").await;
    s.claim("loose", None).await;
    let with_claim = |claim: &str| json!({"spec": {"volumes": [{"name": "d", "persistentVolumeClaim": {"claimName": claim}}]}});
    s.pod_with("volume-0", None, 0, with_claim(&pvc)).await;
    s.pod_with("volume-1", None, 0, with_claim("loose")).await;
    until(60, "the pod with a local volume bound", || async {
        bound(&s.placement("volume-0").await) == 1
    })
    .await;
    assert_eq!(
        s.placement("volume-0").await["volume-0"],
        Some(host("c")),
        "volume {pv}"
    );
    s.until_explained(
        60,
        "volume-1",
        "persistentvolumeclaim \"loose\" is not bound",
    )
    .await;
    for pod in ["hca-1", "unsupported", "volume-1"] {
        assert_eq!(
            s.placement(pod).await[pod],
            None,
            "{pod} was placed:\n{}",
            sched.log()
        );
    }
    // Each pending pod's PodScheduled condition, for the message if they
    // do not all say Unschedulable.
    let scheduled_conditions = || async {
        s.pods()
            .await
            .iter()
            .filter(|p| p.spec.as_ref().is_some_and(|sp| sp.node_name.is_none()))
            .map(|p| {
                let c = p
                    .status
                    .as_ref()
                    .and_then(|st| st.conditions.as_ref())
                    .and_then(|cs| cs.iter().find(|c| c.type_ == "PodScheduled").cloned());
                let name = p.metadata.name.clone().unwrap_or_default();
                (name, c.map(|c| (c.status, c.reason)))
            })
            .collect::<Vec<_>>()
    };
    let unschedulable = until_within(30, || async {
        scheduled_conditions()
            .await
            .iter()
            .filter(|(_, c)| {
                c.as_ref()
                    .is_some_and(|(st, r)| st == "False" && r.as_deref() == Some("Unschedulable"))
            })
            .count()
            == 3
    })
    .await;
    assert!(
        unschedulable,
        "PodScheduled=False on the waiting pods: {:?}\n{}",
        scheduled_conditions().await,
        sched.log()
    );
    s.assert_invariants(30, &[&sched], None).await;
    s.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn podgroup_phases_follow_its_pods_and_a_bad_spec_is_reported_on_the_podgroup() {
    let _g = serial();
    let s = Scenario::new("phases").await;
    s.node("a", 4).await;
    let sched = Scheduler::start(&s, "dragon", "");
    s.podgroup_spec("pg", json!({"minMember": 2})).await;
    let phase = || async {
        s.podgroup_status("pg").await["phase"]
            .as_str()
            .map(String::from)
    };
    until(
        30,
        "phase Pending as soon as the PodGroup is seen",
        || async { phase().await.as_deref() == Some("Pending") },
    )
    .await;
    // One of two members: still Pending, nothing bound.
    s.member("pg-0", "pg", 1, Some(4), None).await;
    s.until_explained(30, "pg-0", "1 of minMember 2").await;
    assert_eq!(phase().await.as_deref(), Some("Pending"));
    // The phases seen from here on, in order.
    s.member("pg-1", "pg", 1, Some(4), None).await;
    let mut seen: Vec<String> = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    while seen.last().map(String::as_str) != Some("Finished") {
        assert!(Instant::now() < deadline, "not Finished in 60 s: {seen:?}");
        if let Some(p) = phase().await
            && seen.last() != Some(&p)
        {
            seen.push(p);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    eprintln!("phases seen: {seen:?}");
    let order = ["Pending", "Scheduling", "Running", "Finished"];
    let ranks: Vec<usize> = seen
        .iter()
        .map(|p| order.iter().position(|o| o == p).expect("a known phase"))
        .collect();
    assert!(ranks.is_sorted(), "phases out of order: {seen:?}");
    assert!(seen.contains(&"Running".to_string()), "{seen:?}");
    let status = s.podgroup_status("pg").await;
    assert_eq!(status["succeeded"], 2, "{status}");
    assert!(status["scheduleStartTime"].is_string(), "{status}");

    // A spec the CRD's schema lets through but that cannot be read: an
    // Event on the PodGroup, its pod not scheduled and told why.
    s.podgroup_spec(
        "bad",
        json!({"minMember": 1, "minResources": {"cpu": "lots"}}),
    )
    .await;
    s.member("bad-0", "bad", 1, None, None).await;
    s.until_explained(30, "bad-0", "spec.minResources.cpu")
        .await;
    until(30, "an InvalidSpec Event on the PodGroup", || async {
        s.events_for("bad")
            .await
            .iter()
            .any(|(r, n)| r == "InvalidSpec" && n.contains("spec.minResources.cpu"))
    })
    .await;
    assert_eq!(bound(&s.placement("bad-").await), 0);
    s.assert_invariants(30, &[&sched], None).await;
    s.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gang_past_its_schedule_timeout_is_released_and_one_short_of_min_resources_is_not_tried()
{
    let _g = serial();
    let s = Scenario::new("timeout").await;
    s.node("a", 4).await;
    let sched = Scheduler::start(&s, "dragon", "");
    // minMember 3: one member already running, one pending, the third
    // never comes. The pending one is reserved, then released at 3 s.
    s.podgroup_spec("late", json!({"minMember": 3, "scheduleTimeoutSeconds": 3}))
        .await;
    s.member("late-0", "late", 1, None, Some("a")).await;
    s.member("late-1", "late", 1, None, None).await;
    s.until_explained(
        30,
        "late-1",
        "gang timed out in permit after 3 s (its scheduleTimeoutSeconds)",
    )
    .await;
    assert_eq!(s.placement("late-1").await["late-1"], None, "never bound");
    assert!(
        sched.log().contains("gang timed out"),
        "a structured log line:\n{}",
        sched.log()
    );
    // More GPUs than the cluster has free: not tried, and told why.
    s.podgroup_spec(
        "big",
        json!({"minMember": 1, "minResources": {"nvidia.com/gpu": "64"}}),
    )
    .await;
    s.member("big-0", "big", 1, None, None).await;
    s.until_explained(30, "big-0", "minResources free: short of nvidia.com/gpu 6")
        .await;
    assert_eq!(s.placement("big-").await["big-0"], None);
    s.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn any_min_member_of_a_podgroups_pods_start_and_the_rest_follow_as_room_appears() {
    let _g = serial();
    let s = Scenario::new("quorum").await;
    s.node("a", 4).await;
    let sched = Scheduler::start(&s, "dragon", "");
    // Coscheduling's case: minMember 2, six bare pods, room for four.
    s.podgroup_spec("g", json!({"minMember": 2})).await;
    for i in 0..6 {
        s.member(&format!("g-{i}"), "g", 1, None, None).await;
    }
    until(60, "four of the six bound", || async {
        bound(&s.placement("g-").await) == 4
    })
    .await;
    let waiting: Vec<String> = s
        .placement("g-")
        .await
        .into_iter()
        .filter(|(_, n)| n.is_none())
        .map(|(p, _)| p)
        .collect();
    assert_eq!(waiting.len(), 2, "{waiting:?}");
    for p in &waiting {
        s.until_explained(30, p, "nvidia.com/gpu").await;
    }
    assert_eq!(s.pods().await.len(), 6, "no pod was deleted");
    // A member leaving makes room for one more.
    let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(s.client.clone(), &s.name);
    let gone = s
        .placement("g-")
        .await
        .into_iter()
        .find(|(_, n)| n.is_some())
        .map(|(p, _)| p)
        .unwrap();
    pods.delete(&gone, &Default::default()).await.unwrap();
    until(60, "a fifth bound once room appears", || async {
        s.placement("g-")
            .await
            .values()
            .filter(|n| n.is_some())
            .count()
            == 4
            && !s.placement(&gone).await.contains_key(&gone)
            && s.pods().await.len() == 5
    })
    .await;
    s.assert_invariants(30, &[&sched], None).await;
    s.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_podgroups_on_room_for_six_each_get_their_min_member_before_any_gets_more() {
    let _g = serial();
    let s = Scenario::new("extras").await;
    s.node("a", 6).await;
    // Volcano's case: three groups of six pods with minMember 2, all there
    // before the scheduler's first round.
    for g in ["x", "y", "z"] {
        s.podgroup_spec(g, json!({"minMember": 2})).await;
        for i in 0..6 {
            s.member(&format!("{g}-{i}"), g, 1, None, None).await;
        }
    }
    let sched = Scheduler::start(&s, "dragon", "");
    until(60, "six pods bound", || async {
        let mut all = s.placement("x-").await;
        all.extend(s.placement("y-").await);
        all.extend(s.placement("z-").await);
        bound(&all) == 6
    })
    .await;
    for g in ["x-", "y-", "z-"] {
        assert_eq!(bound(&s.placement(g).await), 2, "group {g}");
    }
    s.assert_invariants(30, &[&sched], None).await;
    s.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_native_podgroup_gang_runs_whole_beside_a_scheduler_plugins_one() {
    let _g = serial();
    let s = Scenario::new("native").await;
    s.node("a", 4).await;
    s.node("b", 4).await;
    let sched = Scheduler::start(&s, "dragon", "");
    // Kubernetes' own gang API and scheduler-plugins', side by side.
    s.native_podgroup("n", 3).await;
    s.podgroup_spec("x", json!({"minMember": 2})).await;
    for i in 0..3 {
        s.native_member(&format!("n-{i}"), "n", 1).await;
    }
    for i in 0..2 {
        s.member(&format!("x-{i}"), "x", 1, None, None).await;
    }
    until(60, "both gangs bound whole", || async {
        bound(&s.placement("n-").await) == 3 && bound(&s.placement("x-").await) == 2
    })
    .await;
    until(
        30,
        "PodGroupInitiallyScheduled=True on the native group",
        || async {
            s.native_condition("n")
                .await
                .is_some_and(|(st, r, _)| st == "True" && r == "Scheduled")
        },
    )
    .await;
    // A native gang that cannot fit: nothing bound, and the condition says why.
    s.native_podgroup("big", 3).await;
    for i in 0..3 {
        s.native_member(&format!("big-{i}"), "big", 4).await;
    }
    s.until_explained(60, "big-0", "does not fit").await;
    until(
        30,
        "PodGroupInitiallyScheduled=False on the gang that waits",
        || async {
            s.native_condition("big").await.is_some_and(|(st, r, m)| {
                st == "False" && r == "Unschedulable" && m.contains("does not fit")
            })
        },
    )
    .await;
    assert_eq!(bound(&s.placement("big-").await), 0, "{}", sched.log());
    s.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_higher_priority_gang_goes_first_and_evicts_a_lower_one_whole_but_not_what_a_budget_protects()
 {
    use k8s_openapi::api::policy::v1::PodDisruptionBudget;
    use k8s_openapi::api::scheduling::v1::PriorityClass;
    let _g = serial();
    let s = Scenario::new("preempt").await;
    let classes: Api<PriorityClass> = Api::all(s.client.clone());
    let high = format!("{}-high", s.name);
    let _ = classes
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": high}, "value": 1000})).unwrap(),
        )
        .await;
    let budgets: Api<PodDisruptionBudget> = Api::namespaced(s.client.clone(), &s.name);
    budgets
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "metadata": {"name": "guarded"},
                "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "guarded"}}}
            }))
            .unwrap(),
        )
        .await
        .unwrap();
    s.node("a", 4).await;
    s.node("b", 4).await;
    let sched = Scheduler::start(&s, "dragon", "");
    let urgent = json!({"spec": {"priorityClassName": high}});

    // A lone pod a budget protects fills one node, a gang the other.
    s.pod_with(
        "guarded",
        None,
        4,
        json!({"metadata": {"labels": {"app": "guarded"}}}),
    )
    .await;
    // The low gang's pods are held by a finalizer once evicted, so its
    // victims take time to leave, as real pods do while they terminate.
    s.podgroup("low", 2, json!({})).await;
    for i in 0..2 {
        s.pod_with(
            &format!("low-{i}"),
            Some(("low", "worker", i)),
            2,
            json!({"metadata": {"finalizers": [HELD]}}),
        )
        .await;
    }
    until(60, "the guarded pod and the low gang bound", || async {
        bound(&s.placement("guarded").await) == 1 && bound(&s.placement("low-").await) == 2
    })
    .await;

    // A gang of the same priority waits: it preempts nothing.
    s.podgroup("early", 2, json!({})).await;
    for i in 0..2 {
        s.pod(&format!("early-{i}"), Some(("early", "worker", i)), 2, None)
            .await;
    }
    s.until_explained(60, "early-0", "does not fit").await;

    // A higher-priority gang, created after it, evicts the low gang whole
    // and takes its room, nominated to it while the victims leave; the
    // earlier gang still waits.
    let monitor = Monitor::start(&s).await;
    s.podgroup("high", 2, json!({})).await;
    for i in 0..2 {
        s.pod_with(
            &format!("high-{i}"),
            Some(("high", "worker", i)),
            2,
            urgent.clone(),
        )
        .await;
    }
    // While its victims terminate, the gang waits, nominated to their room.
    until(60, "the high gang nominated", || async {
        let pods = s.pods().await;
        let high = pods.iter().filter(|p| {
            p.metadata
                .name
                .as_deref()
                .is_some_and(|n| n.starts_with("high-"))
        });
        high.filter(|p| {
            p.status
                .as_ref()
                .and_then(|s| s.nominated_node_name.as_deref())
                .is_some_and(|n| !n.is_empty())
        })
        .count()
            == 2
    })
    .await;
    let leaving = s.pods().await;
    let low: Vec<&k8s_openapi::api::core::v1::Pod> = leaving
        .iter()
        .filter(|p| {
            p.metadata
                .name
                .as_deref()
                .is_some_and(|n| n.starts_with("low-"))
        })
        .collect();
    assert_eq!(low.len(), 2, "the victims are still there, terminating");
    assert!(low.iter().all(|p| p.metadata.deletion_timestamp.is_some()));
    assert_eq!(
        bound(&s.placement("high-").await),
        0,
        "not placed over victims still running:\n{}",
        sched.log()
    );
    for pod in ["low-0", "low-1"] {
        s.release(pod).await;
    }
    until(
        60,
        "the low gang evicted and the high gang bound",
        || async {
            s.placement("low-").await.is_empty() && bound(&s.placement("high-").await) == 2
        },
    )
    .await;
    assert_eq!(
        bound(&s.placement("early-").await),
        0,
        "the higher priority went first:\n{}",
        sched.log()
    );
    assert_eq!(bound(&s.placement("guarded").await), 1);
    monitor.catch_up(&s).await;
    for seen in monitor
        .seen()
        .iter()
        .filter(|p| p.name.starts_with("high-"))
    {
        assert!(
            seen.nominated.is_some(),
            "{} was never nominated",
            seen.name
        );
        assert_eq!(
            seen.nominated, seen.node,
            "{} nominated to one node, bound to another",
            seen.name
        );
    }
    // The Binding cleared it (ClearingNominatedNodeNameAfterBinding).
    for p in s.pods().await {
        let name = p.metadata.name.clone().unwrap_or_default();
        if name.starts_with("high-") {
            let nominated = p.status.and_then(|s| s.nominated_node_name);
            assert_eq!(nominated.filter(|n| !n.is_empty()), None, "{name}");
        }
    }
    for pod in ["low-0", "low-1"] {
        let events = s.events_for(pod).await;
        assert!(
            events.iter().any(|(r, n)| r == "Preempted"
                && n.contains(&format!("preempted by job/{}/high", s.name))),
            "{pod}: {events:?}"
        );
    }
    assert_eq!(
        sched.metric("dragon_preemption_victims_total{result=\"evicted\"}"),
        1.0
    );

    // A pod that only the protected pod's room would fit waits, and says so.
    s.pod_with("urgent", None, 4, urgent.clone()).await;
    s.until_explained(60, "urgent", "would not make room").await;
    assert_eq!(bound(&s.placement("guarded").await), 1, "{}", sched.log());
    s.assert_invariants(30, &[&sched], None).await;
    s.cleanup().await;
    let _ = classes.delete(&high, &Default::default()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tfjob_of_the_real_training_operator_runs_to_completion_as_one_gang() {
    let _g = serial();
    let s = Scenario::new("tfjob").await;
    let op = TrainingOperator::start(&s.client).await;
    s.node("a", 2).await;
    s.node("b", 2).await;
    let sched = Scheduler::start(&s, "dragon", "");
    // A PS and three one-GPU workers: the workers do not fit on one node.
    let template = |gpus: u32, seconds: Option<u32>| {
        let annotations = match seconds {
            Some(s) => json!({"dragon.dev/complete-after-seconds": s.to_string()}),
            None => json!({}),
        };
        json!({
            "metadata": {"annotations": annotations},
            "spec": {
                "schedulerName": s.scheduler_name(),
                "nodeSelector": {"dragon-e2e": s.name},
                "tolerations": [{"key": "kwok.x-k8s.io/node", "operator": "Exists", "effect": "NoSchedule"}],
                "containers": [{"name": "tensorflow", "image": "fake",
                    "resources": {"requests": {"cpu": "100m", "memory": "128Mi", "nvidia.com/gpu": gpus.to_string()},
                                  "limits": {"nvidia.com/gpu": gpus.to_string()}}}]
            }
        })
    };
    let job: kube::api::DynamicObject = serde_json::from_value(json!({
        "apiVersion": "kubeflow.org/v1", "kind": "TFJob",
        "metadata": {"name": "mnist", "namespace": s.name},
        "spec": {"tfReplicaSpecs": {
            "PS": {"replicas": 1, "restartPolicy": "Never", "template": template(0, None)},
            "Worker": {"replicas": 3, "restartPolicy": "Never", "template": template(1, Some(5))}
        }}
    }))
    .unwrap();
    let jobs = training_jobs(&s.client, &s.name, "TFJob");
    jobs.create(&PostParams::default(), &job).await.unwrap();

    // The operator makes a PodGroup of all four pods and the pods; Dragon
    // binds them together.
    until(60, "the operator's PodGroup", || async {
        podgroups(&s.client, &s.name).get("mnist").await.is_ok()
    })
    .await;
    let pg = podgroups(&s.client, &s.name).get("mnist").await.unwrap();
    assert_eq!(pg.data["spec"]["minMember"], 4, "{:?}", pg.data);
    until(90, "the TFJob's four pods bound", || async {
        bound(&s.placement("mnist-").await) == 4
    })
    .await;
    let pods = s.pods().await;
    let role = |p: &k8s_openapi::api::core::v1::Pod| {
        let l = p.metadata.labels.clone().unwrap_or_default();
        (
            l.get("training.kubeflow.org/replica-type")
                .cloned()
                .unwrap_or_default(),
            l.get("training.kubeflow.org/replica-index")
                .cloned()
                .unwrap_or_default(),
        )
    };
    let mut roles: Vec<(String, String)> = pods.iter().map(role).collect();
    roles.sort();
    assert_eq!(
        roles,
        [
            ("ps", "0"),
            ("worker", "0"),
            ("worker", "1"),
            ("worker", "2")
        ]
        .map(|(r, i)| (r.to_string(), i.to_string()))
    );
    // Read as roles and indices: the log names the gang admitted whole.
    assert!(sched.log().contains("gang admitted"), "{}", sched.log());
    // The workers finish; the operator marks the job Succeeded.
    until(90, "the TFJob Succeeded", || async {
        jobs.get("mnist").await.is_ok_and(|j| {
            j.data["status"]["conditions"].as_array().is_some_and(|cs| {
                cs.iter()
                    .any(|c| c["type"] == "Succeeded" && c["status"] == "True")
            })
        })
    })
    .await;
    s.assert_invariants(30, &[&sched], None).await;
    drop(op);
    s.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_elastic_pytorchjob_shrinks_through_its_scale_to_make_room_for_a_higher_priority_gang() {
    use k8s_openapi::api::scheduling::v1::PriorityClass;
    let _g = serial();
    let s = Scenario::new("elastic").await;
    let op = TrainingOperator::start(&s.client).await;
    let classes: Api<PriorityClass> = Api::all(s.client.clone());
    let high = format!("{}-high", s.name);
    let _ = classes
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": high}, "value": 1000})).unwrap(),
        )
        .await;
    s.node("a", 4).await;
    let sched = Scheduler::start(&s, "dragon", "");
    // An elastic PyTorchJob of four one-GPU workers (at least one) fills
    // the node. Its annotations reach the PodGroup the operator makes.
    let job: kube::api::DynamicObject = serde_json::from_value(json!({
        "apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
        "metadata": {"name": "elastic", "namespace": s.name, "annotations": {
            "dragon.dev/min-workers": "1", "dragon.dev/max-workers": "4",
            "dragon.dev/scale-target": "kubeflow.org/v1/pytorchjobs/elastic"}},
        "spec": {
            "elasticPolicy": {"minReplicas": 1, "maxReplicas": 4, "rdzvBackend": "c10d"},
            "pytorchReplicaSpecs": {"Worker": {"replicas": 4, "restartPolicy": "OnFailure", "template": {
                "spec": {
                    "schedulerName": s.scheduler_name(),
                    "nodeSelector": {"dragon-e2e": s.name},
                    "tolerations": [{"key": "kwok.x-k8s.io/node", "operator": "Exists", "effect": "NoSchedule"}],
                    "containers": [{"name": "pytorch", "image": "fake",
                        "resources": {"requests": {"cpu": "100m", "memory": "128Mi", "nvidia.com/gpu": "1"},
                                      "limits": {"nvidia.com/gpu": "1"}}}]
                }}}}
        }
    }))
    .unwrap();
    let jobs = training_jobs(&s.client, &s.name, "PyTorchJob");
    jobs.create(&PostParams::default(), &job).await.unwrap();
    until(90, "the PyTorchJob's four workers bound", || async {
        bound(&s.placement("elastic-worker-").await) == 4
    })
    .await;

    // A higher-priority gang of two: the elastic job gives up two workers
    // through its /scale rather than anything being evicted.
    s.podgroup("high", 2, json!({})).await;
    for i in 0..2 {
        s.pod_with(
            &format!("high-{i}"),
            Some(("high", "worker", i)),
            1,
            json!({"spec": {"priorityClassName": high}}),
        )
        .await;
    }
    until(60, "the PyTorchJob scaled to 2 workers", || async {
        jobs.get("elastic")
            .await
            .is_ok_and(|j| j.data["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] == 2)
    })
    .await;
    until(90, "the high gang bound and two workers left", || async {
        bound(&s.placement("high-").await) == 2 && s.placement("elastic-worker-").await.len() == 2
    })
    .await;
    let left: Vec<String> = s.placement("elastic-worker-").await.into_keys().collect();
    assert_eq!(
        left,
        ["elastic-worker-0", "elastic-worker-1"],
        "the highest indices go"
    );
    assert_eq!(
        sched.metric("dragon_preemption_victims_total{result=\"shrunk\"}"),
        1.0,
        "{}",
        sched.log()
    );
    assert_eq!(
        sched.metric("dragon_preemption_victims_total{result=\"evicted\"}"),
        0.0
    );
    s.assert_invariants(30, &[&sched], None).await;
    drop(op);
    s.cleanup().await;
    let _ = classes.delete(&high, &Default::default()).await;
}

/// Devices through Dynamic Resource Allocation: the test publishes
/// ResourceSlices for KWOK nodes as a driver would, kube-controller-manager
/// makes each pod's claim from its template, and dragon-scheduler allocates
/// them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gang_with_wait_for_first_consumer_claims_lands_where_its_volumes_are_and_a_shared_read_write_once_pod_claim_keeps_a_gang_pending()
 {
    let _g = serial();
    let s = Scenario::new("wffc").await;
    for n in ["a", "b", "c", "d"] {
        s.node(n, 8).await;
    }
    let class = s.waiting_class("local").await;
    let pv_b = s.volume("pv-b", "b", &class, "ReadWriteOnce").await;
    let pv_c = s.volume("pv-c", "c", &class, "ReadWriteOnce").await;
    let sched = Scheduler::start(&s, "dragon", "");
    let mounting = |group: &str, claim: &str| {
        json!({
            "metadata": {"labels": {"scheduling.x-k8s.io/pod-group": group}},
            "spec": {"volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}]}
        })
    };
    // Each member's claim is bound only once the gang is placed: on b and
    // c, the nodes of the two volumes, one each.
    s.podgroup("g", 2, json!({})).await;
    for i in 0..2 {
        let claim = format!("data-{i}");
        s.claim_in(&claim, &class, "ReadWriteOnce", None).await;
        s.pod_with(&format!("g-{i}"), None, 0, mounting("g", &claim))
            .await;
    }
    until(90, "the gang bound whole", || async {
        bound(&s.placement("g-").await) == 2
    })
    .await;
    let placement = s.placement("g-").await;
    for i in 0..2 {
        let node = placement[&format!("g-{i}")].clone().expect("bound");
        let wanted = match node.strip_prefix(&format!("{}-", s.name)) {
            Some("b") => &pv_b,
            Some("c") => &pv_c,
            _ => panic!("g-{i} on {node}, where no volume is:\n{}", sched.log()),
        };
        let volume = s.until_claim_bound(&format!("data-{i}")).await;
        assert_eq!(&volume, wanted, "g-{i} on {node}");
    }
    // One ReadWriteOncePod claim mounted by both members of a gang: never
    // both, so the gang waits, named.
    s.volume("pv-d", "d", &class, "ReadWriteOncePod").await;
    s.claim_in("ckpt", &class, "ReadWriteOncePod", None).await;
    s.podgroup("h", 2, json!({})).await;
    for i in 0..2 {
        s.pod_with(&format!("h-{i}"), None, 0, mounting("h", "ckpt"))
            .await;
    }
    s.until_explained(90, "h-0", "ReadWriteOncePod").await;
    assert_eq!(bound(&s.placement("h-").await), 0, "{}", sched.log());
    s.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cordoned_node_takes_only_a_pod_that_tolerates_the_cordon() {
    let _g = serial();
    let s = Scenario::new("cordon").await;
    s.node("a", 8).await;
    let nodes: Api<k8s_openapi::api::core::v1::Node> = Api::all(s.client.clone());
    nodes
        .patch(
            &format!("{}-a", s.name),
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(json!({"spec": {"unschedulable": true}})),
        )
        .await
        .unwrap();
    let sched = Scheduler::start(&s, "dragon", "");
    s.pod("plain", None, 1, None).await;
    s.pod_with(
        "tolerant",
        None,
        1,
        json!({"spec": {"tolerations": [
            {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"}]}}),
    )
    .await;
    until(60, "the tolerant pod bound", || async {
        bound(&s.placement("tolerant").await) == 1
    })
    .await;
    s.until_explained(60, "plain", "unschedulable").await;
    assert_eq!(bound(&s.placement("plain").await), 0, "{}", sched.log());
    s.cleanup().await;
}
