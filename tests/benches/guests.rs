//! What a policy costs by the language it is written in: the components
//! named on the command line, measured one after the other in one process,
//! so their ratios to the first hold on a loaded machine.
//!
//!     dragon policy new rs && (cd rs && dragon policy build)
//!     dragon policy new py --lang python && (cd py && dragon policy build)
//!     cargo bench -p dragon-tests --bench guests -- rust=rs/policy.wasm python=py/policy.wasm
//!
//! Per component: compiling it (no cache), loading it from the compile
//! cache, the first `score` of a fresh instance (it receives every node),
//! the median `score` at 100 and 5,000 candidates once the view is sent,
//! and the instance's linear memory afterwards.

use std::time::{Duration, Instant};

use dragon_runtime::{ComponentCache, FixedView, Hooks, LoadOptions, PolicySource, WasmPolicy};
use dragon_tests::engine;
use dragon_tests::workload::placement;

struct Costs {
    compile: Duration,
    cached_load: Duration,
    first_call: Duration,
    score_100: Duration,
    score_5000: Duration,
    memory_bytes: usize,
    size_bytes: usize,
}

fn load(cache: &ComponentCache, path: &str) -> (WasmPolicy, Duration) {
    let started = Instant::now();
    let policy = WasmPolicy::load(
        &engine(),
        cache,
        &PolicySource::File(path.into()),
        &LoadOptions::default(),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    (policy, started.elapsed())
}

/// The median of `runs` calls of `score` at `nodes` candidates.
fn median_score(policy: &WasmPolicy, nodes: usize, runs: usize) -> Duration {
    let (pod, cands) = placement(nodes);
    let view = FixedView::from_candidates(&cands);
    policy.score(&pod, &cands, &view).expect("score");
    let mut times: Vec<Duration> = (0..runs)
        .map(|_| {
            let started = Instant::now();
            policy.score(&pod, &cands, &view).expect("score");
            started.elapsed()
        })
        .collect();
    times.sort();
    times[runs / 2]
}

fn measure(path: &str) -> Costs {
    let (_, compile) = load(&ComponentCache::disabled(), path);
    let dir = std::env::temp_dir().join(format!("dragon-guests-bench-{}", std::process::id()));
    let cache = ComponentCache::at(&dir);
    load(&cache, path);
    let (policy, cached_load) = load(&cache, path);
    let _ = std::fs::remove_dir_all(&dir);
    policy.reset();
    let (pod, cands) = placement(100);
    let view = FixedView::from_candidates(&cands);
    let started = Instant::now();
    policy.score(&pod, &cands, &view).expect("score");
    let first_call = started.elapsed();
    Costs {
        compile,
        cached_load,
        first_call,
        score_100: median_score(&policy, 100, 201),
        score_5000: median_score(&policy, 5000, 51),
        memory_bytes: policy.memory_bytes().unwrap_or(0),
        size_bytes: policy.info().size_bytes,
    }
}

fn main() {
    let guests: Vec<(String, String)> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .filter_map(|a| {
            a.split_once('=')
                .map(|(l, p)| (l.to_string(), p.to_string()))
        })
        .collect();
    if guests.is_empty() {
        eprintln!("usage: cargo bench -p dragon-tests --bench guests -- LABEL=POLICY.wasm ...");
        return;
    }
    let costs: Vec<Costs> = guests.iter().map(|(_, path)| measure(path)).collect();
    let ms = |d: Duration| format!("{:.2} ms", d.as_secs_f64() * 1e3);
    let us = |d: Duration| format!("{:.1} µs", d.as_secs_f64() * 1e6);
    let mib = |b: usize| format!("{:.1} MiB", b as f64 / f64::from(1 << 20));
    type Row = (
        &'static str,
        fn(&Costs) -> f64,
        Box<dyn Fn(&Costs) -> String>,
    );
    let rows: Vec<Row> = vec![
        (
            "component",
            |c| c.size_bytes as f64,
            Box::new(move |c| mib(c.size_bytes)),
        ),
        (
            "compile",
            |c| c.compile.as_secs_f64(),
            Box::new(move |c| ms(c.compile)),
        ),
        (
            "load, cached",
            |c| c.cached_load.as_secs_f64(),
            Box::new(move |c| ms(c.cached_load)),
        ),
        (
            "first score",
            |c| c.first_call.as_secs_f64(),
            Box::new(move |c| ms(c.first_call)),
        ),
        (
            "score, 100",
            |c| c.score_100.as_secs_f64(),
            Box::new(move |c| us(c.score_100)),
        ),
        (
            "score, 5000",
            |c| c.score_5000.as_secs_f64(),
            Box::new(move |c| us(c.score_5000)),
        ),
        (
            "memory",
            |c| c.memory_bytes as f64,
            Box::new(move |c| mib(c.memory_bytes)),
        ),
    ];
    print!("{:<14}", "");
    for (label, _) in &guests {
        print!("{label:>24}");
    }
    println!();
    for (name, value, show) in &rows {
        print!("{name:<14}");
        for c in &costs {
            let ratio = value(c) / value(&costs[0]).max(f64::MIN_POSITIVE);
            print!("{:>24}", format!("{} ({ratio:.1}x)", show(c)));
        }
        println!();
    }
}
