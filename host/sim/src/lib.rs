//! The trace-driven cluster simulator: what `dragon simulate`, `compare`,
//! `sweep` and `trace` run, and what dragon-scheduler plays forward for a
//! job's estimated start. It drives the very framework dragon-scheduler
//! drives ([`dragon_framework::Scheduler`]), with the policy running through
//! wasm; only the cluster (binds always succeed, jobs train at the speed of
//! [`SpeedModel`] or of their measurements) is simulated.
//! `docs/simulator.md` describes the model and its sources. Presenting runs
//! (tables, plots, reports) is the CLI's (`dragon-host`).
//!
//! - [`trace`]: the trace format and its validation.
//! - [`resume`]: a trace that starts from a recorded cluster.
//! - [`bound`]: lower bounds on average JCT, alone and capacity-aware.
//! - [`generate`]: the seeded synthetic-trace generator.
//! - [`speed`]: how fast a job trains at a given size and placement.
//! - [`engine`]: the discrete-event loop.
//! - [`metrics`]: the summary of a run.
//! - [`measured`], [`workloads`]: jobs whose speed comes from published
//!   measurements (Pollux's), and the public workloads bundled.
//! - [`queues`]: what each queue of a trace held and was owed.
//! - [`spec`]: the shapes users write for nodes and jobs, shared with
//!   `dragon policy run` cases.

pub mod bound;
pub mod engine;
pub mod generate;
pub mod measured;
pub mod metrics;
pub mod queues;
pub mod resume;
pub mod spec;
pub mod speed;
pub mod trace;
pub mod workloads;

pub use engine::{
    DEFAULT_HORIZON_S, JobRecord, Point, SimOptions, SimRun, sim_config, simulate,
    simulate_recorded,
};
pub use generate::{GenerateOptions, Mix, RackConstraint, Racks, generate};
pub use metrics::Summary;
pub use speed::SpeedModel;
pub use trace::{BUNDLED, Trace, TraceJob};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::speed::Speed;
    use dragon_framework::{Flush, Wake};
    use dragon_runtime::{
        CallError, ClusterView, ComponentCache, Hooks, LoadOptions, PolicyEngine, PolicyInfo,
        PolicySource, WasmPolicy, wit,
    };

    fn wasm(name: &str, settings: &str) -> WasmPolicy {
        let engine = PolicyEngine::new().unwrap();
        let options = LoadOptions {
            settings: settings.into(),
            ..LoadOptions::default()
        };
        WasmPolicy::load(
            &engine,
            &ComponentCache::disabled(),
            &PolicySource::named_or_file(name),
            &options,
        )
        .unwrap()
    }

    fn run(trace: &Trace, policy: &dyn Hooks) -> (SimRun, Summary) {
        let r = simulate(trace, policy, SimOptions::default(), None);
        let s = Summary::of(&r);
        (r, s)
    }

    /// Two teams on one 4-GPU node, each guaranteed 2 GPUs: `a` submits a
    /// job that takes the whole node for an hour, `b` a 2-GPU job a second
    /// later, which waits behind it in FIFO order.
    const TEAMS: &str = r#"
cluster:
  nodes:
    - {name_prefix: gpu, count: 1, cpu: 32, memory_gib: 128, gpus: 4}
queues:
  - {name: a, guaranteed_gpus: 2}
  - {name: b, guaranteed_gpus: 2}
jobs:
  - {name: big, queue: a, arrival_s: 0, duration_s: 3600, workers: {count: 4, cpu: 1, memory_gib: 1, gpus: 1}}
  - {name: small, queue: b, arrival_s: 1, duration_s: 3600, workers: {count: 2, cpu: 1, memory_gib: 1, gpus: 1}}
"#;

    #[test]
    fn a_queue_that_waits_behind_anothers_burst_is_shown_short_of_its_guarantee() {
        let trace = Trace::parse(TEAMS, "teams.yaml", false).unwrap();
        let (_, s) = run(&trace, &wasm("baseline", ""));
        assert_eq!(s.jobs_completed, 2, "{s:?}");
        let [a, b] = &s.queues[..] else {
            panic!("two queues: {:?}", s.queues)
        };
        // `a` held 4 GPUs for the hour it was owed 2: twice its due.
        let near = |x: Option<f64>, want: f64| x.is_some_and(|x| (x - want).abs() < 0.01);
        assert!(near(a.share_of_entitlement, 2.0), "{a:?}");
        // `b` was owed 2 GPUs for two hours and held them in the second.
        assert!(near(b.share_of_entitlement, 0.5), "{b:?}");
        assert!(near(b.worst_hour_share, 0.0), "{b:?}");
        assert!((b.longest_wait_s - 3599.0).abs() < 60.0, "{b:?}");
        // Jain's index over shares 2 and 0.5: 2.5² / (2 × 4.25).
        assert!(
            s.jain_index.is_some_and(|j| (j - 0.735).abs() < 0.01),
            "{s:?}"
        );
        // A trace without queues reports none.
        let plain = Trace::parse(
            &TEAMS.replace("queue: a, ", "").replace("queue: b, ", ""),
            "t.yaml",
            false,
        );
        let err =
            Trace::parse(&TEAMS.replace("queue: b,", "queue: c,"), "t.yaml", false).unwrap_err();
        assert!(
            err.to_string()
                .contains("jobs[1] (small).queue: no queue is named `c`"),
            "{err}"
        );
        let (_, s) = run(&plain.unwrap(), &wasm("baseline", ""));
        assert!(s.jain_index.is_none());
        assert!(s.queues.iter().all(|q| q.jobs == 0), "{:?}", s.queues);
    }

    /// Two teams on two 4-GPU nodes, each guaranteed 4 GPUs: `a` bursts
    /// with two elastic jobs that fill the cluster and two more queued
    /// behind them; `b` submits one 4-GPU job ten minutes later.
    const BURST: &str = r#"
cluster:
  nodes:
    - {name_prefix: gpu, count: 2, cpu: 32, memory_gib: 128, gpus: 4}
queues:
  - {name: a, guaranteed_gpus: 4}
  - {name: b, guaranteed_gpus: 4}
jobs:
  - {name: a1, queue: a, arrival_s: 0, duration_s: 7200, workers: {count: 4, min: 1, max: 4, cpu: 1, memory_gib: 1, gpus: 1}}
  - {name: a2, queue: a, arrival_s: 1, duration_s: 7200, workers: {count: 4, min: 1, max: 4, cpu: 1, memory_gib: 1, gpus: 1}}
  - {name: a3, queue: a, arrival_s: 2, duration_s: 3600, workers: {count: 4, cpu: 1, memory_gib: 1, gpus: 1}}
  - {name: a4, queue: a, arrival_s: 3, duration_s: 3600, workers: {count: 4, cpu: 1, memory_gib: 1, gpus: 1}}
  - {name: b1, queue: b, arrival_s: 600, duration_s: 3600, workers: {count: 4, cpu: 1, memory_gib: 1, gpus: 1}}
"#;

    /// Under `fair-share`, and `dragon-plus` with `fairness`, `b` gets its
    /// guarantee within a scale step of asking (a's elastic jobs shrink to
    /// give it back, and a's queued jobs wait behind it); DRAGON's own
    /// order keeps it waiting behind a's burst.
    #[test]
    fn a_burst_of_one_team_does_not_starve_another_under_fair_sharing() {
        let trace = Trace::parse(BURST, "burst.yaml", false).unwrap();
        let b_of = |s: &Summary| s.queues[1].clone();
        for (name, settings) in [("fair-share", ""), ("dragon-plus", r#"{"fairness": true}"#)] {
            let (_, s) = run(&trace, &wasm(name, settings));
            assert_eq!(s.jobs_completed, 5, "{name}: {s:?}");
            let b = b_of(&s);
            assert!(b.longest_wait_s <= 120.0, "{name}: {b:?}");
            assert!(
                b.worst_hour_share.is_some_and(|x| x >= 0.9),
                "{name}: {b:?}"
            );
        }
        let (_, s) = run(&trace, &wasm("dragon-plus", ""));
        let b = b_of(&s);
        assert!(b.longest_wait_s > 600.0, "without fairness b waits: {b:?}");
    }

    /// Twelve GPUs: `lab` (guaranteed 4) and `org` (8), whose sub-teams
    /// `a` and `b` are guaranteed 4 each; `lab` and `a` each submit three
    /// one-hour 4-GPU jobs at once, `b` nothing.
    const TREE: &str = r#"
cluster:
  nodes:
    - {name_prefix: gpu, count: 3, cpu: 32, memory_gib: 128, gpus: 4}
queues:
  - {name: lab, guaranteed_gpus: 4}
  - {name: org, guaranteed_gpus: 8}
  - {name: a, guaranteed_gpus: 4, parent: org}
  - {name: b, guaranteed_gpus: 4, parent: org}
jobs:
  - {name: l1, queue: lab, arrival_s: 0, duration_s: 3600, workers: {count: 4, cpu: 1, memory_gib: 1, gpus: 1}}
  - {name: l2, queue: lab, arrival_s: 0, duration_s: 3600, workers: {count: 4, cpu: 1, memory_gib: 1, gpus: 1}}
  - {name: l3, queue: lab, arrival_s: 0, duration_s: 3600, workers: {count: 4, cpu: 1, memory_gib: 1, gpus: 1}}
  - {name: a1, queue: a, arrival_s: 0, duration_s: 3600, workers: {count: 4, cpu: 1, memory_gib: 1, gpus: 1}}
  - {name: a2, queue: a, arrival_s: 0, duration_s: 3600, workers: {count: 4, cpu: 1, memory_gib: 1, gpus: 1}}
  - {name: a3, queue: a, arrival_s: 0, duration_s: 3600, workers: {count: 4, cpu: 1, memory_gib: 1, gpus: 1}}
"#;

    /// `org`'s share is 8 of the 12 GPUs (its guarantee, as `lab` has
    /// its 4), all of it `a`'s while `b` is idle: `a` runs two jobs in the
    /// first hour and `lab` one. Flat, `a` and `lab` would share the 4
    /// beyond their guarantees evenly, and `lab`, listed first, would win
    /// the tie.
    #[test]
    fn a_sub_team_borrows_its_idle_siblings_guarantee_before_another_team_does() {
        let trace = Trace::parse(TREE, "tree.yaml", false).unwrap();
        for (name, settings) in [("fair-share", ""), ("dragon-plus", r#"{"fairness": true}"#)] {
            let (_, s) = run(&trace, &wasm(name, settings));
            assert_eq!(s.jobs_completed, 6, "{name}: {s:?}");
            let [lab, org, a, _] = &s.queues[..] else {
                panic!("four queues: {:?}", s.queues)
            };
            let minutes = |q: &queues::QueueSummary| (q.avg_jct_s / 60.0).round();
            assert_eq!((minutes(a), minutes(lab)), (80.0, 100.0), "{name}: {s:?}");
            // A parent is measured by its subtree.
            assert!((org.avg_gpus - 6.0).abs() < 0.01, "{name}: {org:?}");
        }
    }

    /// Two node groups whose GPUs are DRA devices (no `nvidia.com/gpu`
    /// advertised): h100 and a100 models, two nodes of 4 each.
    const DRA: &str = r#"
cluster:
  device_classes:
    - {name: gpu, selectors: ['device.driver == "gpu.example.com"'], serves_gpus: true}
  nodes:
    - {name_prefix: h, count: 2, cpu: 32, memory_gib: 128, devices: {driver: gpu.example.com, count: 4, attributes: {model: h100}}}
    - {name_prefix: a, count: 2, cpu: 32, memory_gib: 128, devices: {driver: gpu.example.com, count: 4, attributes: {model: a100}}}
jobs:
  - {name: plain, arrival_s: 0, duration_s: 600, workers: {count: 4, cpu: 1, memory_gib: 1, gpus: 1}}
  - name: picky
    arrival_s: 0
    duration_s: 600
    workers:
      count: 2
      cpu: 1
      memory_gib: 1
      devices: [{class: gpu, count: 2, selector: 'device.attributes["gpu.example.com"].model == "h100"'}]
"#;

    #[test]
    fn a_trace_of_dra_nodes_runs_gpu_jobs_on_devices_and_claims_land_where_their_selector_allows() {
        let trace = Trace::parse(DRA, "dra.yaml", false).unwrap();
        assert_eq!(trace.total_gpus(), 16, "devices of the GPU class are GPUs");
        let policy = wasm("dragon", "");
        let mut frames: Vec<dragon_framework::record::Frame> = Vec::new();
        let mut sink = |f: dragon_framework::record::Frame| frames.push(f);
        let r = simulate_recorded(&trace, &policy, SimOptions::default(), None, &mut sink);
        let s = Summary::of(&r);
        assert_eq!(s.jobs_completed, 2, "{s:?}");
        // Every bind of a picky worker went to an h100 node.
        let binds: Vec<(String, String)> = frames
            .iter()
            .filter_map(|f| match f {
                dragon_framework::record::Frame::Round { decisions, .. } => {
                    serde_json::from_str::<Vec<serde_json::Value>>(decisions).ok()
                }
                _ => None,
            })
            .flatten()
            .filter(|d| d["kind"] == "bound")
            .filter_map(|d| {
                Some((
                    d["pod"].as_str()?.to_string(),
                    d["node"].as_str()?.to_string(),
                ))
            })
            .collect();
        let picky: Vec<&(String, String)> = binds
            .iter()
            .filter(|(p, _)| p.starts_with("picky"))
            .collect();
        assert_eq!(picky.len(), 2, "{binds:?}");
        assert!(picky.iter().all(|(_, n)| n.starts_with("h-")), "{picky:?}");
    }

    #[test]
    fn a_trace_whose_task_claims_more_devices_than_a_claim_holds_is_refused_named() {
        let text = DRA.replace("count: 2, selector", "count: 33, selector");
        let e = Trace::parse(&text, "dra.yaml", false)
            .unwrap_err()
            .to_string();
        assert!(e.contains("jobs[1] (picky).workers.devices"), "{e}");
    }

    /// Two 3-worker jobs on four GPUs: only one fits whole.
    const TWO_JOBS: &str = r#"
cluster:
  nodes: [{name_prefix: n, count: 2, cpu: 16, memory_gib: 64, gpus: 2}]
jobs:
  - {name: a, arrival_s: 0, duration_s: 1000, ps: {count: 1, cpu: 1, memory_gib: 1}, workers: {count: 3, min: 1, cpu: 1, memory_gib: 1, gpus: 1}}
  - {name: b, arrival_s: 0, duration_s: 1000, ps: {count: 1, cpu: 1, memory_gib: 1}, workers: {count: 3, min: 1, cpu: 1, memory_gib: 1, gpus: 1}}
"#;

    #[test]
    fn the_baseline_half_places_a_job_and_idles_gpus_while_dragon_completes_both_sooner() {
        let trace = Trace::parse(TWO_JOBS, "two-jobs.yaml", false).unwrap();
        let (base, bs) = run(&trace, &wasm("baseline", ""));
        let (drag, ds) = run(&trace, &wasm("dragon", ""));
        // Baseline: job b gets its PS and one worker, then sits on them while a runs.
        let b = &base.jobs[1];
        assert!(
            b.partial_ms >= 1_000_000,
            "b held part of its resources for {} ms",
            b.partial_ms
        );
        assert!(bs.gpu_alloc > bs.gpu_util + 0.1, "{bs:?}");
        assert_eq!(bs.jobs_completed, 2);
        // DRAGON: gangs are never half placed; b starts at its min at once.
        assert!(
            drag.jobs.iter().all(|j| j.partial_ms == 0),
            "{:?}",
            drag.jobs
        );
        assert_eq!(ds.jobs_completed, 2);
        assert_eq!(
            drag.jobs[1].started_ms,
            Some(0),
            "b admitted at its min right away"
        );
        assert_eq!(ds.admitted_below_request, 1);
        assert!(
            ds.avg_jct_s < bs.avg_jct_s,
            "dragon {} vs baseline {}",
            ds.avg_jct_s,
            bs.avg_jct_s
        );
        assert!(ds.avg_wait_s < bs.avg_wait_s);
        assert!(!bs.deadlocked && !ds.deadlocked);
        // The baseline's second job waits for the first to finish: a runs on
        // two nodes (3 workers, 2 GPUs per node) at 80 % speed → 1250 s.
        // b's waiting workers are woken by the room a leaves: b starts then.
        assert_eq!(base.jobs[0].finished_ms, Some(1_250_000));
        assert_eq!(base.jobs[1].started_ms, Some(1_250_000));
    }

    /// A job of higher priority arrives on a full cluster.
    const URGENT: &str = r#"
cluster:
  nodes: [{name_prefix: n, count: 1, cpu: 16, memory_gib: 64, gpus: 4}]
jobs:
  - {name: long, arrival_s: 0, duration_s: 1000, workers: {count: 4, cpu: 1, memory_gib: 1, gpus: 1}}
  - {name: urgent, arrival_s: 100, duration_s: 100, priority: 10, workers: {count: 2, cpu: 1, memory_gib: 1, gpus: 1}}
"#;

    #[test]
    fn a_higher_priority_job_preempts_a_running_one_which_restarts_after_it() {
        let trace = Trace::parse(URGENT, "urgent.yaml", false).unwrap();
        for policy in ["dragon", "baseline"] {
            let (r, s) = run(&trace, &wasm(policy, ""));
            let (long, urgent) = (&r.jobs[0], &r.jobs[1]);
            assert_eq!(urgent.started_ms, Some(100_000), "{policy}: at once");
            assert!(s.preemptions >= 1, "{policy}: {s:?}");
            assert_eq!(s.jobs_completed, 2, "{policy}");
            assert!(long.restarts >= 1, "{policy}: {long:?}");
            assert!(
                long.finished_ms > urgent.finished_ms,
                "{policy}: the victim finishes after its preemptor"
            );
        }
        // With `preemption: never`, the urgent job waits for the long one.
        let polite = URGENT.replace("priority: 10,", "priority: 10, preemption: never,");
        let trace = Trace::parse(&polite, "polite.yaml", false).unwrap();
        let (r, s) = run(&trace, &wasm("dragon", ""));
        assert_eq!(s.preemptions, 0);
        assert!(r.jobs[1].started_ms >= r.jobs[0].finished_ms);
    }

    /// The bundled policies whose answers do not depend on which units a
    /// round tries (`backfill` reserves room for the first of them that
    /// does not fit).
    const ALL_BUT_BACKFILL: [&str; 6] = [
        "baseline",
        "dragon",
        "dragon-plus",
        "tiresias",
        "pollux",
        "fair-share",
    ];

    /// Two runs of one trace and policy decided alike: the same jobs, the
    /// same timeline, end, scale steps and preemptions.
    fn assert_same_decisions(a: &SimRun, b: &SimRun, at: &str) {
        assert_eq!(a.jobs, b.jobs, "{at}");
        assert_eq!(a.timeline, b.timeline, "{at}");
        assert_eq!(a.end_ms, b.end_ms, "{at}");
        assert_eq!(a.scale_steps, b.scale_steps, "{at}");
        assert_eq!(a.preemptions, b.preemptions, "{at}");
    }

    #[test]
    fn counting_flushes_rather_than_running_them_leaves_every_decision_unchanged() {
        // Every bundled policy but `backfill`, whose answers depend on which
        // units a round tries (its reservation goes to the first of the
        // round's units that does not fit).
        for trace in ["paper", "deadlock", "pollux-w3"] {
            let trace = Trace::load(trace).unwrap();
            for name in ALL_BUT_BACKFILL {
                let run = |flush| {
                    let options = SimOptions {
                        flush,
                        ..SimOptions::default()
                    };
                    simulate(&trace, &wasm(name, ""), options, None)
                };
                let (ran, counted) = (run(Flush::Run), run(Flush::Count));
                let at = format!("{name} on {}", trace.origin);
                assert_same_decisions(&counted, &ran, &at);
                assert!(
                    counted.rounds <= ran.rounds,
                    "{at}: {} rounds counted, {} run",
                    counted.rounds,
                    ran.rounds
                );
            }
        }
    }

    #[test]
    fn waking_only_the_units_room_could_fit_leaves_every_decision_unchanged() {
        // Every bundled policy but `backfill`, with preemption (`URGENT`)
        // and a half-placed deadlock among them. `backfill` reserves room
        // for the first unit of a round that does not fit, so which units
        // a round wakes is part of its decisions (on `philly-week` its
        // average JCT moves by -5 %).
        let urgent = Trace::parse(URGENT, "urgent.yaml", false).unwrap();
        let traces =
            ["paper", "deadlock", "pollux-w3", "philly-week"].map(|t| Trace::load(t).unwrap());
        for trace in traces.iter().chain([&urgent]) {
            for name in ALL_BUT_BACKFILL {
                let run = |wake| {
                    let options = SimOptions {
                        wake,
                        ..SimOptions::default()
                    };
                    simulate(trace, &wasm(name, ""), options, None)
                };
                let (any, fits) = (run(Wake::Any), run(Wake::Fits));
                let at = format!("{name} on {}", trace.origin);
                assert_same_decisions(&fits, &any, &at);
                assert_eq!(fits.rounds, any.rounds, "{at}");
            }
        }
    }

    #[test]
    fn a_recorded_run_replays_to_the_same_decisions_through_its_own_policy_only() {
        use dragon_framework::record::{Frame, Recording, replay};
        // Preemption, admission below the requested size, scale steps.
        for text in [URGENT, TWO_JOBS] {
            let trace = Trace::parse(text, "t.yaml", false).unwrap();
            for (name, other) in [("dragon", "baseline"), ("baseline", "dragon")] {
                let policy = wasm(name, "");
                let mut frames: Vec<Frame> = Vec::new();
                let mut sink = |f: Frame| frames.push(f);
                simulate_recorded(&trace, &policy, SimOptions::default(), None, &mut sink);
                assert!(frames.len() > 2, "{name}");
                let rec = Recording {
                    header: dragon_framework::record::Header {
                        format: dragon_framework::record::FORMAT,
                        source: String::new(),
                        policy: name.into(),
                        origin: name.into(),
                        sha256: String::new(),
                        settings: String::new(),
                        interface_version: String::new(),
                        config: String::new(),
                        fallback: String::new(),
                        part: 0,
                    },
                    frames,
                    torn: None,
                };
                let same = replay(&rec, &policy, None, sim_config());
                assert_eq!(same.differences, vec![], "{name}");
                assert_eq!(same.refused_ops, 0, "{name}");
                let differ = replay(&rec, &wasm(other, ""), None, sim_config());
                assert!(!differ.differences.is_empty(), "{name} vs {other}");
            }
        }
    }

    #[test]
    fn a_job_spanning_racks_pays_the_rack_penalty_and_one_held_to_a_rack_does_not() {
        let trace = |topology: &str, job: &str| {
            let text = format!(
                "model:\n  topology: {topology}\ncluster:\n  nodes:\n    - {{name_prefix: a, count: 2, cpu: 32, memory_gib: 128, gpus: 4, labels: {{dragon.dev/rack: r1}}}}\n    - {{name_prefix: b, count: 1, cpu: 32, memory_gib: 128, gpus: 4, labels: {{dragon.dev/rack: r2}}}}\njobs:\n  - {{name: blocker, arrival_s: 0, duration_s: 100, workers: {{count: 4, cpu: 1, memory_gib: 1, gpus: 1}}}}\n  - {{name: wide, arrival_s: 1, duration_s: 1000, workers: {{count: 6, cpu: 1, memory_gib: 1, gpus: 1}}{job}}}\n"
            );
            Trace::parse(&text, "racks.yaml", false).unwrap()
        };
        let jct = |t: &Trace| {
            let (r, s) = run(t, &wasm("dragon", ""));
            assert_eq!(s.jobs_completed, 2, "{s:?}");
            let w = &r.jobs[1];
            (w.finished_ms.unwrap() - w.arrival_ms) as f64 / 1e3
        };
        let levels = "[{key: dragon.dev/rack, penalty: 0.5}]";
        // The blocker takes one node of r1; six pods fit only across both
        // racks at once, and pay for it: 1000 s of work at 50 % throughput.
        let spread = jct(&trace(levels, ""));
        let flat = jct(&trace("[]", ""));
        assert!(
            spread > flat * 1.5,
            "crossing racks {spread} s, only nodes {flat} s"
        );
        // Held to one rack, it waits for the blocker to finish, then runs
        // within r1 at the node penalty only.
        let held = jct(&trace(levels, ", topology: {required: dragon.dev/rack}"));
        assert!(held < spread, "held {held} s, spread {spread} s");
        // Fragmentation is measured where there are levels: the largest
        // free rack holds at most r1's 8 GPUs.
        let (_, s) = run(&trace(levels, ""), &wasm("dragon", ""));
        let largest = s.largest_free_domain.unwrap_or_default();
        assert!(largest > 0.0 && largest <= 8.0, "{s:?}");
        let (_, s) = run(&trace("[]", ""), &wasm("dragon", ""));
        assert_eq!(s.largest_free_domain, None);
    }

    #[test]
    fn under_the_baseline_two_half_placed_jobs_deadlock_and_dragon_runs_both() {
        let trace = Trace::load("deadlock").unwrap();
        let (base, bs) = run(&trace, &wasm("baseline", ""));
        let (_, ds) = run(&trace, &wasm("dragon", ""));
        assert!(bs.deadlocked, "{bs:?}");
        assert_eq!(bs.unfinished_jobs, vec!["a".to_string(), "b".to_string()]);
        // a held two GPUs from 10 s on; b took the rest the moment c
        // finished, and nothing could move after that.
        assert!(base.jobs[1].partial_ms >= 590_000, "{:?}", base.jobs[1]);
        assert_eq!(bs.end_s, 606.0);
        assert!(bs.gpu_alloc > bs.gpu_util, "{bs:?}");
        assert!(!ds.deadlocked && ds.jobs_completed == 3, "{ds:?}");
        assert_eq!(
            ds.gpu_alloc, ds.gpu_util,
            "no GPU held idle by a partial gang"
        );
    }

    #[test]
    fn runs_are_deterministic() {
        let text = generate(&GenerateOptions {
            seed: 3,
            nodes: 4,
            gpus_per_node: 4,
            jobs: 40,
            load: 1.2,
            elastic_share: 1.0,
            mix: Mix::Philly,
            racks: Default::default(),
            tiers: false,
            teams: 0,
        })
        .unwrap();
        let trace = Trace::parse(&text, "gen.yaml", false).unwrap();
        for policy in ["dragon", "baseline"] {
            let p = wasm(policy, "");
            let (r1, s1) = run(&trace, &p);
            let (r2, s2) = run(&trace, &wasm(policy, ""));
            assert_eq!(
                serde_json::to_string(&s1).unwrap(),
                serde_json::to_string(&s2).unwrap(),
                "{policy}"
            );
            assert_eq!(r1.jobs, r2.jobs, "{policy}");
            assert_eq!(r1.timeline, r2.timeline, "{policy}");
            assert_eq!(s1.jobs_completed, 40, "{policy}: {s1:?}");
            if policy == "dragon" {
                assert!(
                    s1.scale_ups + s1.scale_downs > 0,
                    "the trace exercises scaling: {s1:?}"
                );
            }
        }
    }

    /// A native policy that never places a worker beyond the first of a
    /// 3-worker job, so such a job stays half placed forever.
    struct Refuser {
        info: PolicyInfo,
    }

    impl Refuser {
        fn new(scale: bool) -> Refuser {
            let mut hooks = vec![wit::Hook::Filter];
            if scale {
                hooks.push(wit::Hook::Scale);
            }
            Refuser {
                info: PolicyInfo {
                    name: "refuser".into(),
                    version: "0".into(),
                    interface_version: dragon_runtime::INTERFACE_VERSION.into(),
                    hooks,
                    origin: "test".into(),
                    sha256: String::new(),
                    size_bytes: 0,
                    compile_ms: 0.0,
                    cached: false,
                    settings: String::new(),
                },
            }
        }
    }

    // Only `filter` differs from the neutral answers the trait gives.
    impl Hooks for Refuser {
        fn info(&self) -> &PolicyInfo {
            &self.info
        }
        fn filter(
            &self,
            pod: &wit::Placement,
            nodes: &wit::Candidates,
            _: &dyn ClusterView,
        ) -> Result<Vec<bool>, CallError> {
            let t = pod.unit.tasks[pod.task as usize];
            let refuse = pod.unit.workers == 3 && t.role == wit::Role::Worker && t.index >= 1;
            Ok(vec![!refuse; nodes.index.len()])
        }
    }

    const STUCK: &str = r#"
model: {stall_s: 600}
cluster:
  nodes: [{name_prefix: n, count: 1, cpu: 16, memory_gib: 64, gpus: 4}]
jobs:
  - {name: a, arrival_s: 0, duration_s: 100, workers: {count: 1, gpus: 1}}
  - {name: b, arrival_s: 10, duration_s: 100, ps: {count: 1, cpu: 1}, workers: {count: 3, gpus: 1}}
"#;

    #[test]
    fn a_deadlock_ends_the_run_and_unfinished_jobs_are_censored_at_its_start() {
        let trace = Trace::parse(STUCK, "stuck.yaml", false).unwrap();
        for scale in [false, true] {
            let (r, s) = run(&trace, &Refuser::new(scale));
            assert!(s.deadlocked, "scale hook {scale}: {s:?}");
            assert_eq!(s.jobs_completed, 1);
            assert_eq!(s.unfinished_jobs, vec!["b".to_string()]);
            assert!(s.censored);
            // a finished at 100 s; nothing changed after that.
            assert_eq!(r.end_ms, 100_000, "scale hook {scale}");
            assert_eq!(s.makespan_s, 100.0);
            // b's JCT counts up to the end: 90 s; a's is 100 s.
            assert_eq!(s.avg_jct_s, 95.0);
            assert_eq!(s.p95_jct_s, 100.0);
            assert_eq!(
                r.jobs[1].partial_ms, 90_000,
                "b held its PS and one worker from 10 s on"
            );
            // One GPU busy for 100 s, and b's worker held 90 s of it idle, out of 4 GPUs × 100 s.
            assert_eq!(s.gpu_util, 0.25);
            assert_eq!(s.gpu_alloc, 0.475);
            let last = r.timeline.last().unwrap();
            assert_eq!((last.t_ms, last.done, last.stalled), (100_000, 1, 1));
        }
    }

    #[test]
    fn the_horizon_stops_a_run_and_censors_what_is_left() {
        let trace = Trace::parse(
            STUCK
                .replace(
                    "duration_s: 100, workers: {count: 1",
                    "duration_s: 1000, workers: {count: 1",
                )
                .as_str(),
            "t",
            false,
        )
        .unwrap();
        let r = simulate(
            &trace,
            &Refuser::new(false),
            SimOptions {
                horizon_ms: 500_000,
                ..SimOptions::default()
            },
            None,
        );
        let s = Summary::of(&r);
        assert!(s.horizon_reached && !s.deadlocked);
        assert_eq!(s.end_s, 500.0);
        assert_eq!(s.jobs_completed, 0);
        assert_eq!(s.avg_jct_s, (500.0 + 490.0) / 2.0);
    }

    #[test]
    fn scale_events_cost_a_restart_and_keep_the_work_done() {
        // One elastic job alone: DRAGON grows it once the cluster has been
        // idle for 60 s; each growth costs the 30 s restart.
        let text = r#"
cluster:
  nodes: [{name_prefix: n, count: 1, cpu: 16, memory_gib: 64, gpus: 4}]
jobs:
  - {name: a, arrival_s: 0, duration_s: 3600, workers: {count: 1, max: 4, gpus: 1}}
"#;
        let trace = Trace::parse(text, "t", false).unwrap();
        let (r, s) = run(&trace, &wasm("dragon", ""));
        let a = &r.jobs[0];
        assert_eq!(s.scale_ups, 3, "{s:?}");
        assert_eq!(a.restarts, 3);
        assert_eq!(a.final_workers, 4);
        // Faster than alone at 1 worker, slower than the ideal 4^0.86 speed-up.
        let jct = a.finished_ms.unwrap() as f64 / 1e3;
        assert!(jct < 3600.0 && jct > 3600.0 / 4f64.powf(0.86), "{jct}");
        // Restarts do no work: GPUs held but not training during them.
        assert!(s.gpu_alloc > s.gpu_util);
    }

    #[test]
    fn a_run_resumed_from_a_recording_starts_with_its_running_jobs_in_place() {
        use dragon_framework::record::Replayer;
        let trace = Trace::load("paper").unwrap();
        let dragon = wasm("dragon", "");
        let mut frames = Vec::new();
        let mut sink = |f: dragon_framework::record::Frame| frames.push(f);
        let options = SimOptions {
            horizon_ms: 3_000_000,
            ..SimOptions::default()
        };
        let first = simulate_recorded(&trace, &dragon, options, None, &mut sink);
        let mut replayer = Replayer::new(sim_config());
        for frame in &frames {
            replayer.step(frame, &dragon, None);
        }
        let assumed = resume::Assumed {
            remaining_ms: 600_000,
            duration_ms: 1_200_000,
            now_ms: None,
        };
        let resumed = resume::from_cluster(replayer.sched.cluster(), "run.rec", assumed).unwrap();
        let unfinished: Vec<_> = first
            .jobs
            .iter()
            .filter(|j| j.finished_ms.is_none())
            .collect();
        let running = unfinished.iter().filter(|j| j.started_ms.is_some()).count();
        assert!(running > 0 && running < unfinished.len(), "{running}");
        assert_eq!(resumed.trace.jobs.len(), unfinished.len());
        assert_eq!(resumed.running, running);
        assert_eq!(resumed.lone_pending, 0);

        // The baseline takes over: no scale step, so what ran goes on
        // untouched and finishes when assumed; the GPUs held at the start
        // are those held when the recording ended.
        let baseline = wasm("baseline", "");
        let (after, _) = run(&resumed.trace, &baseline);
        assert_eq!(
            after.timeline[0].gpus_allocated,
            first.timeline.last().unwrap().gpus_allocated
        );
        let resumed_running: Vec<_> = after
            .jobs
            .iter()
            .filter(|j| j.started_ms == Some(0))
            .collect();
        assert_eq!(resumed_running.len(), running);
        for j in &resumed_running {
            assert_eq!(j.finished_ms, Some(600_000), "{j:?}");
            assert_eq!(j.restarts, 0, "{j:?}");
        }
        assert!(after.jobs.iter().all(|j| j.finished_ms.is_some()));
    }

    /// A job of a measured model alone takes the time its measurements
    /// give (`measured/tests.rs` checks those against Pollux's artifact);
    /// elsewhere its measured step time, not a modelled penalty, sets its
    /// speed.
    #[test]
    fn a_measured_job_runs_as_long_as_its_measurements_say() {
        let trace = Trace::parse(
            r#"
cluster:
  nodes:
    - {name_prefix: gpu, count: 2, cpu: 8, memory_gib: 64, gpus: 4}
jobs:
  - {name: bert-0, arrival_s: 0, measured: {model: bert, batch_size: 384},
     workers: {count: 8, cpu: 1, memory_gib: 4, gpus: 1}}
"#,
            "t.yaml",
            false,
        )
        .unwrap();
        let (r, _) = run(&trace, &wasm("baseline", ""));
        let job = &r.jobs[0];
        let jct_s = (job.finished_ms.unwrap() - job.arrival_ms) as f64 / 1000.0;
        let Speed::Measured(m) = &trace.jobs[0].speed else {
            panic!("a measured job")
        };
        let packed = m.run_time_s(&[4, 4]);
        assert!((jct_s - packed).abs() < 1.0, "{jct_s} vs {packed}");
        assert!(
            (packed - 2459.0).abs() < 30.0,
            "the artifact steps it in 2459 s, here {packed}"
        );
        // Over four nodes of two, the measured speed (bert's steps are
        // faster there: its measurements, not a rule, say so).
        let spread = trace.jobs[0].speed.relative(8, 4, 2, 8, 0.0);
        assert!((spread - packed / m.run_time_s(&[2, 2, 2, 2])).abs() < 1e-12);
        assert!(spread > 1.0, "{spread}");
    }

    /// Rigid runs of an imported workload finish every job, and a policy
    /// that queues by attained service (Tiresias) beats first-come
    /// first-served on it.
    #[test]
    fn an_imported_workload_runs_to_the_end_under_rigid_policies() {
        let text = workloads::POLLUX
            .iter()
            .find(|(n, _)| *n == "pollux-w6")
            .unwrap()
            .1;
        // The first 40 jobs (about two hours of submissions).
        let short: String = text.lines().take(41).map(|l| format!("{l}\n")).collect();
        let trace = workloads::pollux(&short, "w6-40.csv", workloads::Batches::AsGiven).unwrap();
        let (fifo, f) = run(&trace, &wasm("baseline", ""));
        let (las, t) = run(
            &trace,
            &wasm(
                "tiresias",
                r#"{"queue_thresholds_gpu_s": [57600], "promote_factor": 0, "shrink_lower_queues": false}"#,
            ),
        );
        for r in [&fifo, &las] {
            assert_eq!(
                r.jobs.iter().filter(|j| j.finished_ms.is_some()).count(),
                40
            );
            assert!(!r.deadlocked);
        }
        assert!(
            t.avg_jct_s < f.avg_jct_s,
            "{} vs {}",
            t.avg_jct_s,
            f.avg_jct_s
        );
    }

    /// A trace names measurements of its own in a directory beside it; a
    /// job of a model measured on two GPU types runs twice as fast on the
    /// nodes of the type whose steps are twice as fast.
    #[test]
    fn a_job_runs_at_the_pace_of_its_nodes_gpu_type() {
        let (dir, spec) = measured::by_gpu::fixture::two_types("engine");
        let jct = |gpu_type: &str| {
            let doc = serde_json::json!({
                "cluster": {"nodes": [{"name_prefix": "gpu", "count": 1, "cpu": 8, "memory_gib": 64, "gpus": 4,
                                       "labels": {dragon_framework::GPU_PRODUCT: gpu_type}}]},
                "measurements": {"dir": ".", "models": [spec]},
                "jobs": [{"name": "c-0", "arrival_s": 0, "measured": {"model": "cifar10", "batch_size": 2048},
                          "workers": {"count": 4, "cpu": 1, "memory_gib": 4, "gpus": 1}}],
            });
            let file = dir.join(format!("{gpu_type}.json"));
            std::fs::write(&file, doc.to_string()).unwrap();
            let trace = Trace::load(&file.display().to_string()).unwrap();
            let (r, _) = run(&trace, &wasm("baseline", ""));
            let job = &r.jobs[0];
            (job.finished_ms.unwrap() - job.arrival_ms) as f64 / 1000.0
        };
        let (slow, fast) = (jct("slow"), jct("fast"));
        let alone = measured::Measurements::bundled("cifar10")
            .unwrap()
            .run_time_s(measured::Batch::Fixed(2048), &[4]);
        assert!((slow - alone).abs() < 2.0, "{slow} vs {alone}");
        assert!(
            (fast - alone / 2.0).abs() < 2.0,
            "{fast} vs {}",
            alone / 2.0
        );
        let _ = std::fs::remove_dir_all(dir);
    }
}
