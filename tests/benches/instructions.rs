//! The repeatable figures: instructions counted by callgrind (through
//! gungraun), which a shared, noisy machine cannot disturb. Setup (building
//! the cluster, compiling the policy, a first warm-up call) is not counted.
//!
//!     cargo install gungraun-runner --version 0.20.0   # once; matches the library
//!     cargo bench -p dragon-tests --bench instructions
//!
//! - `score_*`: one call of DRAGON's `score` on 5,000 candidate nodes.
//! - `lone_pods_*`: 1,000 lone pods under `baseline` on 5,000 nodes, every
//!   round until all are bound (divide by 1,000 for instructions per pod).
//! - `gangs_of_8_*`: 125 gangs of 8 under `dragon`, likewise 1,000 pods.
//! - `selected_gangs_of_8_native`: the same with every node labelled and
//!   every pod selecting the label, as pods on a labelled pool are.
//! - `simulate_*`: a whole simulation under `baseline` and `dragon` (native
//!   policies): Pollux's workload 6 at twice its load (320 jobs on 64 GPUs)
//!   and the multi-GPU jobs of Philly's busiest week (571 jobs on 256
//!   GPUs). Loading the trace is not counted.

use std::hint::black_box;

use baseline_policy::Baseline;
use dragon_framework::Scheduler;
use dragon_policy::Dragon;
use dragon_policy_sdk::Policy;
use dragon_runtime::{FixedView, Hooks, WasmPolicy, wit};
use dragon_sim::{SimOptions, Trace, simulate};
use dragon_tests::workload::{pending, pending_selected, placement, schedule_all};
use dragon_tests::{Native, candidates, engine, sdk_view};
use gungraun::{library_benchmark, library_benchmark_group, main};

const NODES: usize = 5000;
const PODS: usize = 1000;

fn dragon_wasm() -> WasmPolicy {
    dragon_tests::bundled(&engine(), "dragon", "")
}

/// The wasm policy with one call made, so the count is of a call on a
/// warm instance.
/// The view goes to the instance with that first call; the counted one
/// carries no changes.
fn score_wasm_setup() -> (WasmPolicy, wit::Placement, wit::Candidates, FixedView) {
    let (pod, cands) = placement(NODES);
    let view = FixedView::from_candidates(&cands);
    let wasm = dragon_wasm();
    wasm.score(&pod, &cands, &view).expect("score");
    (wasm, pod, cands, view)
}

#[library_benchmark(setup = score_wasm_setup)]
fn score_wasm(
    (wasm, pod, cands, view): (WasmPolicy, wit::Placement, wit::Candidates, FixedView),
) -> Vec<u32> {
    black_box(wasm.score(&pod, &cands, &view).expect("score"))
}

type SdkScore = (
    Native<Dragon>,
    dragon_policy_sdk::types::Placement,
    dragon_policy_sdk::types::Candidates,
    dragon_policy_sdk::types::View,
);

fn score_native_setup() -> SdkScore {
    let (pod, cands) = placement(NODES);
    let view = FixedView::from_candidates(&cands);
    let native = Native::<Dragon>::new("");
    let (pod, cands) = (
        dragon_tests::placement(&pod, &view),
        candidates(&cands, &view),
    );
    let view = sdk_view(&view);
    native.policy().score(&pod, &cands, &view);
    (native, pod, cands, view)
}

#[library_benchmark(setup = score_native_setup)]
fn score_native((native, pod, cands, view): SdkScore) -> Vec<u32> {
    black_box(native.policy().score(&pod, &cands, &view))
}

fn run<P: Hooks>((mut s, policy): (Scheduler, P)) -> usize {
    black_box(schedule_all(&mut s, &policy).expect("every pod bound"))
}

fn lone_pods_wasm_setup() -> (Scheduler, WasmPolicy) {
    (
        pending(NODES, PODS, 1),
        dragon_tests::bundled(&engine(), "baseline", ""),
    )
}

fn lone_pods_native_setup() -> (Scheduler, Native<Baseline>) {
    (pending(NODES, PODS, 1), Native::new(""))
}

fn gangs_of_8_wasm_setup() -> (Scheduler, WasmPolicy) {
    (pending(NODES, PODS / 8, 8), dragon_wasm())
}

fn gangs_of_8_native_setup() -> (Scheduler, Native<Dragon>) {
    (pending(NODES, PODS / 8, 8), Native::new(""))
}

fn selected_gangs_of_8_native_setup() -> (Scheduler, Native<Dragon>) {
    (pending_selected(NODES, PODS / 8, 8), Native::new(""))
}

#[library_benchmark(setup = lone_pods_wasm_setup)]
fn lone_pods_wasm(input: (Scheduler, WasmPolicy)) -> usize {
    run(input)
}

#[library_benchmark(setup = lone_pods_native_setup)]
fn lone_pods_native(input: (Scheduler, Native<Baseline>)) -> usize {
    run(input)
}

#[library_benchmark(setup = gangs_of_8_wasm_setup)]
fn gangs_of_8_wasm(input: (Scheduler, WasmPolicy)) -> usize {
    run(input)
}

#[library_benchmark(setup = gangs_of_8_native_setup)]
fn gangs_of_8_native(input: (Scheduler, Native<Dragon>)) -> usize {
    run(input)
}

#[library_benchmark(setup = selected_gangs_of_8_native_setup)]
fn selected_gangs_of_8_native(input: (Scheduler, Native<Dragon>)) -> usize {
    run(input)
}

/// A whole simulation of `trace` under `policy`: the rounds it ran.
fn simulation<P: Hooks>((trace, policy): (Trace, P)) -> u64 {
    black_box(simulate(&trace, &policy, SimOptions::default(), None).rounds)
}

fn baseline_on(trace: &str) -> (Trace, Native<Baseline>) {
    (
        Trace::load(trace).expect("a bundled trace"),
        Native::new(""),
    )
}

fn dragon_on(trace: &str) -> (Trace, Native<Dragon>) {
    (
        Trace::load(trace).expect("a bundled trace"),
        Native::new(""),
    )
}

#[library_benchmark]
#[bench::pollux_w6_2x(setup = baseline_on, args = ("pollux-w6-2x"))]
#[bench::philly_week(setup = baseline_on, args = ("philly-week"))]
fn simulate_baseline_native(input: (Trace, Native<Baseline>)) -> u64 {
    simulation(input)
}

#[library_benchmark]
#[bench::pollux_w6_2x(setup = dragon_on, args = ("pollux-w6-2x"))]
#[bench::philly_week(setup = dragon_on, args = ("philly-week"))]
fn simulate_dragon_native(input: (Trace, Native<Dragon>)) -> u64 {
    simulation(input)
}

library_benchmark_group!(
    name = score;
    benchmarks = score_native, score_wasm
);

library_benchmark_group!(
    name = throughput;
    benchmarks = lone_pods_native, lone_pods_wasm, gangs_of_8_native, gangs_of_8_wasm,
        selected_gangs_of_8_native
);

library_benchmark_group!(
    name = simulation;
    benchmarks = simulate_baseline_native, simulate_dragon_native
);

main!(library_benchmark_groups = score, throughput, simulation);
