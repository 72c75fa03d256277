//! What a simulation costs, and what a round costs as the queue grows.
//!
//! - `runs`: published workloads under `baseline` and `dragon` through
//!   wasm, each with parked units' flushes counted (the simulator's
//!   default) and run (as in a cluster), so the ratio is measured in one
//!   run: Pollux's workload 6 at twice its load (320 jobs on 64 GPUs) and
//!   the multi-GPU jobs of Philly's busiest week (571 jobs on 256 GPUs).
//! - `round`: one round after a job arrives, with `waiting` lone pods
//!   parked behind a full node: the flush counted (they are not tried)
//!   against the same round when every parked pod's flush is due (all are
//!   tried again).
//!
//!     cargo bench -p dragon-tests --bench simulator
//!
//! Loading the trace, compiling the policy and building the queue are not
//! timed.

use std::sync::LazyLock;

use baseline_policy::Baseline;
use divan::{Bencher, Divan};
use dragon_framework::{Flush, RecordingIo, Scheduler, SchedulerConfig};
use dragon_runtime::WasmPolicy;
use dragon_sim::{SimOptions, Trace, simulate};
use dragon_tests::workload::{cluster, schedule_all, worker_spec};
use dragon_tests::{Native, add_gang, engine};

static WASM_BASELINE: LazyLock<WasmPolicy> =
    LazyLock::new(|| dragon_tests::bundled(&engine(), "baseline", ""));
static WASM_DRAGON: LazyLock<WasmPolicy> =
    LazyLock::new(|| dragon_tests::bundled(&engine(), "dragon", ""));

const TRACES: &[&str] = &["pollux-w6-2x", "philly-week"];

fn main() {
    LazyLock::force(&WASM_BASELINE);
    LazyLock::force(&WASM_DRAGON);
    // A run takes up to a minute with its flushes run: one sample each.
    Divan::from_args().sample_count(1).sample_size(1).main();
}

fn simulation(b: Bencher, trace: &str, policy: &WasmPolicy, flush: Flush) {
    let trace = Trace::load(trace).expect("a bundled trace");
    let options = SimOptions {
        flush,
        ..SimOptions::default()
    };
    // A fresh instance for each run: a policy remembers what it saw.
    b.with_inputs(|| policy.twin())
        .bench_local_values(|p| simulate(&trace, &p, options, None).rounds);
}

#[divan::bench_group]
mod runs {
    use super::*;

    #[divan::bench(args = TRACES)]
    fn baseline_counted(b: Bencher, trace: &str) {
        simulation(b, trace, &WASM_BASELINE, Flush::Count);
    }

    #[divan::bench(args = TRACES)]
    fn baseline_run(b: Bencher, trace: &str) {
        simulation(b, trace, &WASM_BASELINE, Flush::Run);
    }

    #[divan::bench(args = TRACES)]
    fn dragon_counted(b: Bencher, trace: &str) {
        simulation(b, trace, &WASM_DRAGON, Flush::Count);
    }

    #[divan::bench(args = TRACES)]
    fn dragon_run(b: Bencher, trace: &str) {
        simulation(b, trace, &WASM_DRAGON, Flush::Run);
    }
}

/// When the waiting pods are found unschedulable.
const PARKED_MS: u64 = 10;

/// One full node and `waiting` one-GPU lone pods found unschedulable at
/// [`PARKED_MS`], then a job of one pod arriving: the round at `at_ms`
/// tries it (and, where their flush is due, the parked pods).
fn parked(waiting: usize, flush: Flush) -> Scheduler {
    let config = SchedulerConfig {
        round_budget_ms: 0,
        flush,
        ..SchedulerConfig::default()
    };
    let mut s = Scheduler::new(cluster(1), config);
    let policy = Native::<Baseline>::new("");
    add_gang(&mut s, "full", 0, None, &worker_spec(8));
    schedule_all(&mut s, &policy).expect("the node filled");
    for j in 0..waiting {
        add_gang(
            &mut s,
            &format!("job-{j:05}"),
            j as u64 + 1,
            None,
            &worker_spec(1),
        );
    }
    let _ = s.schedule_round(
        PARKED_MS,
        &policy,
        &mut RecordingIo::default(),
        &mut RecordingIo::default(),
    );
    add_gang(
        &mut s,
        "arriving",
        waiting as u64 + 1,
        None,
        &worker_spec(1),
    );
    s
}

#[divan::bench_group]
mod round {
    use super::*;

    const WAITING: &[usize] = &[10, 100, 1_000, 10_000];

    fn round(b: Bencher, waiting: usize, flush: Flush, at_ms: u64) {
        let policy = Native::<Baseline>::new("");
        b.with_inputs(|| parked(waiting, flush))
            .bench_local_refs(|s| {
                let mut io = RecordingIo::default();
                let report = s.schedule_round(at_ms, &policy, &mut io, &mut RecordingIo::default());
                report.decisions.len()
            });
    }

    /// A round when nothing that could help them changed: the parked pods
    /// are not tried.
    #[divan::bench(args = WAITING)]
    fn counted(b: Bencher, waiting: usize) {
        round(b, waiting, Flush::Count, PARKED_MS + 10_000);
    }

    /// The same round at their flush: every parked pod is tried again.
    #[divan::bench(args = WAITING)]
    fn flushed(b: Bencher, waiting: usize) {
        round(b, waiting, Flush::Run, PARKED_MS + 10_000);
    }
}
