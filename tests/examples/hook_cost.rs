//! Per-call cost of `score` (and `filter`) natively and through the wasm
//! component, for 100, 1,000 and 5,000 candidate nodes. Ratios are measured
//! in one run on the same machine; absolute figures vary with its load.
//!
//!     cargo run --release -p dragon-tests --example hook_cost

use std::time::Instant;

use dragon_host::runtime::{Hooks, wit};
use dragon_policy::Dragon;
use dragon_policy_sdk::Policy;
use dragon_tests::{bundled, convert, engine};

fn fixture(n: usize) -> (wit::Placement, wit::Candidates) {
    let r = wit::Resources {
        cpu_milli: 4000,
        memory_mib: 16384,
        gpus: 1,
    };
    let mut tasks: Vec<wit::Task> = (0..4)
        .map(|index| wit::Task {
            role: wit::Role::Worker,
            index,
            request: r,
        })
        .collect();
    tasks.push(wit::Task {
        role: wit::Role::Ps,
        index: 0,
        request: wit::Resources {
            cpu_milli: 2000,
            memory_mib: 8192,
            gpus: 0,
        },
    });
    let unit = wit::Unit {
        id: 1,
        arrival_ms: 0,
        priority: 0,
        gang: true,
        tasks,
        workers: 4,
        min_workers: 2,
        max_workers: 8,
        running: 0,
    };
    let cap = wit::Capacity {
        alloc_cpu_milli: vec![32_000; n],
        alloc_memory_mib: vec![131_072; n],
        alloc_gpus: vec![8; n],
        free_cpu_milli: (0..n as u64).map(|i| 8_000 + (i * 7919) % 24_000).collect(),
        free_memory_mib: (0..n as u64)
            .map(|i| 32_768 + (i * 104_729) % 98_304)
            .collect(),
        free_gpus: (0..n as u32).map(|i| 1 + (i * 31) % 8).collect(),
    };
    (
        wit::Placement {
            unit,
            task: 0,
            now_ms: 0,
        },
        wit::Candidates {
            index: (0..n as u32).collect(),
            capacity: cap,
            siblings: vec![0; n],
        },
    )
}

fn time<R>(iters: u32, mut f: impl FnMut() -> R) -> f64 {
    for _ in 0..iters / 10 {
        std::hint::black_box(f());
    }
    let t = Instant::now();
    for _ in 0..iters {
        std::hint::black_box(f());
    }
    t.elapsed().as_nanos() as f64 / iters as f64
}

fn main() {
    let e = engine();
    let wasm = bundled(&e, "dragon", "");
    let native = Dragon::default();
    println!(
        "{:>6}  {:>12}  {:>12}  {:>8}  {:>10}  {:>10}",
        "nodes", "native ns", "wasm ns", "ratio", "native/node", "wasm/node"
    );
    for n in [100usize, 1000, 5000] {
        let (pod, cands) = fixture(n);
        let (npod, ncands): (
            dragon_policy_sdk::types::Placement,
            dragon_policy_sdk::types::Candidates,
        ) = (convert(&pod), convert(&cands));
        assert_eq!(
            native.score(&npod, &ncands),
            wasm.score(&pod, &cands).unwrap()
        );
        let iters = (2_000_000 / n) as u32;
        let tn = time(iters, || native.score(&npod, &ncands));
        let tw = time(iters, || wasm.score(&pod, &cands).unwrap());
        println!(
            "{n:>6}  {tn:>12.0}  {tw:>12.0}  {:>7.2}x  {:>10.1}  {:>10.1}",
            tw / tn,
            tn / n as f64,
            tw / n as f64
        );
    }
}
