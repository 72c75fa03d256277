//! Soak: `dragon-scheduler` under churn on the real control plane.
//!
//! Jobs arrive all the time (gangs of 2–4 workers with a parameter server
//! now and then, and lone pods), run for 5–25 s (KWOK completes them) and are
//! deleted once finished. The policy file is replaced on a fixed period,
//! cycling `baseline` → a flaky policy (every tenth call of a scheduling hook
//! traps; `onPolicyError: fallback`) → `dragon`, and every tenth replacement
//! is a corrupt file that must be refused. The scheduler's resident memory
//! and open file descriptors are sampled throughout.
//!
//! At the end, with no more arrivals: every job that arrived has run to
//! completion (nothing lost), the invariants of the fault tests hold (no
//! gang partly bound, no node overcommitted, no pod bound twice, every
//! pending pod explained), every reload was applied or refused as it should
//! be, and the scheduler is alive and healthy.
//!
//! By default a short run (75 s, a reload every 12 s) checks all of that
//! and prints the samples. The full run, 30 minutes with a reload every
//! minute, also checks that memory and descriptors level off (the second
//! half of the run, after a 5-minute warm-up, peaks no higher than the
//! first half plus a margin) and prints the curve minute by minute:
//!
//!     DRAGON_SOAK=1 cargo test --release -p dragon-scheduler --test soak -- --nocapture
//!
//! `DRAGON_SOAK_MINUTES=N` sets another length for the full run.

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use common::*;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams};
use serde_json::json;

/// Nodes of the soak cluster, each with this many GPUs.
const NODES: usize = 4;
const NODE_GPUS: u32 = 8;

/// How the run is sized.
struct Plan {
    length: Duration,
    reload_every: Duration,
    sample_every: Duration,
    /// Check that memory and descriptors level off (long runs only).
    check_level: bool,
}

impl Plan {
    fn from_env() -> Plan {
        if std::env::var("DRAGON_SOAK").is_ok_and(|v| v == "1") {
            let minutes = std::env::var("DRAGON_SOAK_MINUTES")
                .ok()
                .and_then(|m| m.parse::<u64>().ok())
                .unwrap_or(30)
                .max(10);
            Plan {
                length: Duration::from_secs(60 * minutes),
                reload_every: Duration::from_secs(60),
                sample_every: Duration::from_secs(10),
                check_level: true,
            }
        } else {
            Plan {
                length: Duration::from_secs(75),
                reload_every: Duration::from_secs(12),
                sample_every: Duration::from_secs(5),
                check_level: false,
            }
        }
    }
}

/// What replaces the policy file at reload `i`.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Swap {
    Baseline,
    Flaky,
    Dragon,
    Corrupt,
}

impl Swap {
    fn at(i: usize) -> Swap {
        if i % 10 == 4 {
            return Swap::Corrupt;
        }
        [Swap::Baseline, Swap::Flaky, Swap::Dragon][i % 3]
    }

    /// Replace `policy` the way a ConfigMap update lands: a new file renamed
    /// over the old one.
    fn write(self, policy: &Path) {
        let bytes: Vec<u8> = match self {
            Swap::Baseline => dragon_bundled::BASELINE.to_vec(),
            Swap::Dragon => dragon_bundled::DRAGON.to_vec(),
            Swap::Flaky => dragon_test_policies::hostile_with_mode(b"flaky-1in10_"),
            Swap::Corrupt => b"\0asm\x0d\0\x01\0 not really".to_vec(),
        };
        let tmp = policy.with_extension("tmp");
        std::fs::write(&tmp, bytes).unwrap();
        std::fs::rename(&tmp, policy).unwrap();
    }
}

/// A job that arrived and has not been cleaned up yet.
struct Job {
    pods: Vec<String>,
    gang: bool,
    arrived: Instant,
}

/// One reading of the scheduler process.
#[derive(Clone, Copy, Debug)]
struct Sample {
    at_s: f64,
    rss_kib: u64,
    fds: usize,
    threads: u64,
    done: usize,
    pending: usize,
}

/// Resident memory (KiB) and threads of process `pid`, from /proc.
fn rss_and_threads(pid: u32) -> (u64, u64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
            .unwrap_or(0)
    };
    (field("VmRSS:"), field("Threads:"))
}

fn open_fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count())
}

/// Create a job: a gang (PodGroup, maybe a parameter server, 2–4 workers of
/// 1–2 GPUs) or a lone pod of 1 GPU, each pod running 5–25 s once bound.
async fn arrive(s: &Scenario, rng: &mut Rng, n: usize) -> (String, Job) {
    let run = rng.range(5, 25);
    if rng.range(0, 9) < 3 {
        let name = format!("l{n}");
        s.pod(&name, None, 1, Some(run)).await;
        let job = Job {
            pods: vec![name.clone()],
            gang: false,
            arrived: Instant::now(),
        };
        return (name, job);
    }
    let name = format!("g{n}");
    let workers = rng.range(2, 4);
    let gpus = rng.range(1, 2);
    let ps = rng.range(0, 2) == 0;
    s.podgroup(&name, workers + u32::from(ps), json!({})).await;
    let mut pods = Vec::new();
    if ps {
        let pod = format!("{name}-ps-0");
        s.pod(&pod, Some((&name, "ps", 0)), 0, Some(run)).await;
        pods.push(pod);
    }
    for i in 0..workers {
        let pod = format!("{name}-worker-{i}");
        s.pod(&pod, Some((&name, "worker", i)), gpus, Some(run))
            .await;
        pods.push(pod);
    }
    let job = Job {
        pods,
        gang: true,
        arrived: Instant::now(),
    };
    (name, job)
}

/// Delete every job whose pods have all finished; returns how long each
/// took from arrival to its sweep, and how many pods wait unbound.
async fn sweep(s: &Scenario, jobs: &mut BTreeMap<String, Job>) -> (Vec<Duration>, usize) {
    let pods = s.pods().await;
    let by_name: BTreeMap<&str, &Pod> = pods
        .iter()
        .filter_map(|p| Some((p.metadata.name.as_deref()?, p)))
        .collect();
    let pending = pods
        .iter()
        .filter(|p| !is_bound(p) && p.metadata.deletion_timestamp.is_none())
        .count();
    let done: Vec<String> = jobs
        .iter()
        .filter(|(_, j)| {
            j.pods
                .iter()
                .all(|p| by_name.get(p.as_str()).is_some_and(|p| is_finished(p)))
        })
        .map(|(name, _)| name.clone())
        .collect();
    let api: Api<Pod> = Api::namespaced(s.client.clone(), &s.name);
    let now = DeleteParams {
        grace_period_seconds: Some(0),
        ..DeleteParams::default()
    };
    let mut took = Vec::new();
    for name in done {
        let job = jobs.remove(&name).expect("listed above");
        for pod in &job.pods {
            let _ = api.delete(pod, &now).await;
        }
        if job.gang {
            let _ = podgroups(&s.client, &s.name)
                .delete(&name, &DeleteParams::default())
                .await;
        }
        took.push(job.arrived.elapsed());
    }
    (took, pending)
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_churn_reloads_and_policy_failures_nothing_is_lost_and_memory_levels_off() {
    let _g = serial();
    let plan = Plan::from_env();
    let s = Scenario::new("soak").await;
    for i in 0..NODES {
        s.node(&format!("n{i}"), NODE_GPUS).await;
    }
    let dir = std::env::temp_dir().join(format!("dragon-soak-policy-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let policy = dir.join("policy.wasm");
    Swap::Dragon.write(&policy);
    // The gate would refuse the trapping policy before it served; this
    // test is about one that serves anyway (its faults met on inputs no
    // recorded step held), so every file is swapped in ungated.
    let mut sched = Scheduler::start(
        &s,
        &policy.display().to_string(),
        "onPolicyError: fallback\nscaleIntervalSeconds: 5\nreloadGate: {enabled: false}\n",
    );
    let pid = sched.child.id();
    let monitor = Monitor::start(&s).await;

    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let mut jobs: BTreeMap<String, Job> = BTreeMap::new();
    let mut swaps: Vec<Swap> = Vec::new();
    let mut samples: Vec<Sample> = Vec::new();
    let mut job_times: Vec<Duration> = Vec::new();
    let (mut arrived, mut pending) = (0usize, 0usize);

    let start = Instant::now();
    let (mut next_arrival, mut next_reload, mut next_sample, mut next_sweep) = (
        start,
        start + plan.reload_every,
        start,
        start + Duration::from_secs(5),
    );
    // The driving loop: each step does whatever is due, then waits for the
    // next tick (a pace, not a condition).
    while start.elapsed() < plan.length {
        let now = Instant::now();
        if now >= next_arrival {
            let (name, job) = arrive(&s, &mut rng, arrived).await;
            jobs.insert(name, job);
            arrived += 1;
            next_arrival = now + Duration::from_millis(u64::from(rng.range(1000, 3000)));
        }
        if now >= next_reload {
            let swap = Swap::at(swaps.len());
            swap.write(&policy);
            swaps.push(swap);
            next_reload = now + plan.reload_every;
        }
        if now >= next_sweep {
            let (took, p) = sweep(&s, &mut jobs).await;
            job_times.extend(took);
            pending = p;
            next_sweep = now + Duration::from_secs(5);
        }
        if now >= next_sample {
            let (rss_kib, threads) = rss_and_threads(pid);
            samples.push(Sample {
                at_s: start.elapsed().as_secs_f64(),
                rss_kib,
                fds: open_fds(pid),
                threads,
                done: job_times.len(),
                pending,
            });
            next_sample = now + plan.sample_every;
        }
        assert!(
            sched.alive(),
            "dragon-scheduler exited during the soak:\n{}",
            sched.log()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let churn_s = start.elapsed().as_secs_f64();
    // The curve over the churn, printed before anything is asserted.
    print_curve(&samples, if plan.check_level { 60.0 } else { 10.0 });
    if plan.check_level {
        assert_levels_off(&samples);
    }

    // No more arrivals: every job that arrived runs to completion.
    let drain = Instant::now();
    let deadline = drain + Duration::from_secs(300);
    while !jobs.is_empty() {
        assert!(
            Instant::now() < deadline,
            "{} of {arrived} jobs not finished 300 s after the last arrival: {:?}\n{}",
            jobs.len(),
            jobs.keys().collect::<Vec<_>>(),
            sched.log()
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
        let (took, _) = sweep(&s, &mut jobs).await;
        job_times.extend(took);
    }
    let drain_s = drain.elapsed().as_secs_f64();

    // Every reload applied or refused: good files counted as successes,
    // corrupt ones as failures.
    let good = swaps.iter().filter(|w| **w != Swap::Corrupt).count() as f64;
    let corrupt = swaps.len() as f64 - good;
    until(30, "every reload counted", || async {
        sched.metric("dragon_policy_reloads_total{result=\"success\"}") >= good
            && sched.metric("dragon_policy_reloads_total{result=\"failure\"}") >= corrupt
    })
    .await;
    let hook_errors: f64 = sched
        .get("/metrics")
        .map(|(_, body)| {
            body.lines()
                .filter(|l| l.starts_with("dragon_policy_hook_errors_total"))
                .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
                .sum()
        })
        .unwrap_or(0.0);
    let fallbacks = sched.metric("dragon_scheduling_attempts_total{result=\"fallback\"}");
    assert!(
        hook_errors >= 1.0,
        "the flaky policy never failed a call: {swaps:?}\n{}",
        sched.log()
    );
    assert_eq!(
        sched.get("/healthz").map(|(code, _)| code),
        Some(200),
        "{}",
        sched.log()
    );
    s.assert_invariants(60, &[&sched], Some(&monitor)).await;

    job_times.sort();
    let pct = |q: f64| {
        job_times
            .get(((job_times.len() as f64 - 1.0) * q).round() as usize)
            .map_or(0.0, |d| d.as_secs_f64())
    };
    let (rss_kib, _) = rss_and_threads(pid);
    println!(
        "\nsoak: {churn_s:.0} s of churn on {NODES} nodes of {NODE_GPUS} GPUs, then {drain_s:.0} s to drain; \
         {arrived} jobs arrived and all ran to completion (arrival to sweep: median {:.0} s, p95 {:.0} s); \
         {} policy files written ({good} good, {corrupt} corrupt); {hook_errors} failed policy calls, \
         {fallbacks} attempts by the fallback; {:.1} MiB resident and {} open fds at the end",
        pct(0.5),
        pct(0.95),
        swaps.len(),
        mib(rss_kib),
        open_fds(pid)
    );
    sched.kill();
    s.cleanup().await;
}

/// The samples as a table, one row per `bucket` seconds (maxima of memory,
/// descriptors and threads; the last counts).
fn print_curve(samples: &[Sample], bucket: f64) {
    println!("\n| minute | RSS MiB (max) | open fds (max) | threads | jobs done | pods pending |");
    println!("|---:|---:|---:|---:|---:|---:|");
    let mut rows: BTreeMap<u64, Sample> = BTreeMap::new();
    for x in samples {
        let row = rows.entry((x.at_s / bucket) as u64).or_insert(*x);
        row.rss_kib = row.rss_kib.max(x.rss_kib);
        row.fds = row.fds.max(x.fds);
        row.threads = row.threads.max(x.threads);
        row.done = x.done;
        row.pending = x.pending;
    }
    for (k, r) in &rows {
        println!(
            "| {:.1} | {:.1} | {} | {} | {} | {} |",
            *k as f64 * bucket / 60.0,
            mib(r.rss_kib),
            r.fds,
            r.threads,
            r.done,
            r.pending
        );
    }
}

/// After a 5-minute warm-up, the second half of the run peaks no higher
/// than the first half plus a margin: growth that does not stop breaks this.
fn assert_levels_off(samples: &[Sample]) {
    let warm: Vec<&Sample> = samples.iter().filter(|x| x.at_s >= 300.0).collect();
    let (first, second) = warm.split_at(warm.len() / 2);
    let peak = |xs: &[&Sample]| {
        (
            xs.iter().map(|x| x.rss_kib).max().unwrap_or(0),
            xs.iter().map(|x| x.fds).max().unwrap_or(0),
        )
    };
    let ((rss1, fds1), (rss2, fds2)) = (peak(first), peak(second));
    println!(
        "\nafter warm-up: first half peaks at {:.1} MiB and {fds1} fds, second half at {:.1} MiB and {fds2} fds",
        mib(rss1),
        mib(rss2)
    );
    assert!(
        rss2 as f64 <= rss1 as f64 * 1.10 + 8192.0,
        "resident memory still growing: {:.1} MiB then {:.1} MiB",
        mib(rss1),
        mib(rss2)
    );
    assert!(
        fds2 <= fds1 + 8,
        "open file descriptors still growing: {fds1} then {fds2}"
    );
}
