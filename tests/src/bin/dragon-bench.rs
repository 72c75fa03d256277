//! `dragon-bench`: what the wasm boundary costs and how fast the framework
//! decides. Every ratio is measured in one run on one machine; absolute
//! figures move with the machine's load, ratios much less.
//!
//!     cargo run --release -p dragon-tests --bin dragon-bench -- [--json] [--quick]
//!
//! It lives beside the tests, not in the `dragon` CLI, because it runs the
//! policies' Rust code natively too, which the product does not carry.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Instant;

use anyhow::{Context, Result};
use clap::Parser;
use serde::Serialize;

use baseline_policy::Baseline;
use dragon_host::framework::{
    Cluster, Decision, Node, RecordingIo, Resources, Scheduler, SchedulerConfig,
};
use dragon_host::runtime::{
    ComponentCache, Hooks, LoadOptions, PolicySlot, PolicySource, WasmPolicy, wit,
};
use dragon_policy::Dragon;
use dragon_tests::{Lift, Native, add_gang, engine};

#[derive(Parser)]
#[command(about = "Benchmarks: hook cost wasm vs native, framework throughput, hot swap, memory")]
struct Args {
    /// Print one JSON object instead of the tables.
    #[arg(long)]
    json: bool,
    /// Small sizes and few iterations (a smoke run: the figures mean little).
    #[arg(long)]
    quick: bool,
    /// Run only these sections (comma-separated: memory, hooks, throughput,
    /// swap), e.g. to profile one.
    #[arg(long, value_delimiter = ',')]
    only: Vec<String>,
    /// Instead of benchmarking, call DRAGON's `score` at 5,000 nodes this many
    /// times on one side (`native` or `wasm`) and exit: run it under
    /// `valgrind --tool=callgrind` at two counts and the difference is the
    /// instruction count per call, which this noisy machine cannot disturb.
    #[arg(long, num_args = 2, value_names = ["SIDE", "CALLS"])]
    count_score: Vec<String>,
    /// Likewise for the framework: schedule PODS lone pods on 5,000 nodes
    /// under `baseline` (SIDE `native` or `wasm`), or PODS/8 gangs of 8 under
    /// `dragon` (`native-gangs` or `wasm-gangs`), and exit.
    #[arg(long, num_args = 2, value_names = ["SIDE", "PODS"])]
    count_throughput: Vec<String>,
}

#[derive(Serialize, Default)]
struct Report {
    /// `score` of the DRAGON policy at the largest node count, per node.
    score_wasm_ns_per_node: f64,
    score_native_ns_per_node: f64,
    /// Per-hook costs: hook, nodes, native ns, wasm ns.
    hooks: Vec<HookCost>,
    /// 10,000 lone pods under `baseline` on 5,000 nodes, wasm policy.
    throughput_wasm_pods_per_s: f64,
    throughput_native_pods_per_s: f64,
    /// 1,000 gangs of 8 under `dragon` on 5,000 nodes.
    gang_throughput_wasm_pods_per_s: f64,
    gang_throughput_native_pods_per_s: f64,
    /// A new policy file to its first decision, compiled artifact cached.
    swap_cached_ms: f64,
    /// The same with a cold compile.
    swap_cold_ms: f64,
    /// Cycles that failed across the swaps under load.
    swap_failed_cycles: u64,
    swaps: u64,
    swap_cycles_run: u64,
    /// A fresh store + instance + configure, µs (what a failed call costs).
    instantiate_us: f64,
    /// A `score` call on the live instance at 100 nodes, µs (for scale).
    call_100_nodes_us: f64,
    /// Resident memory of a snapshot of 5,000 nodes and 50,000 pods, MiB.
    snapshot_rss_mib: f64,
    snapshot_nodes: usize,
    snapshot_pods: usize,
}

#[derive(Serialize)]
struct HookCost {
    hook: &'static str,
    nodes: usize,
    native_ns: f64,
    wasm_ns: f64,
    ratio: f64,
}

/// Ns per call of `f`, after a warm-up of a tenth as many calls.
fn time<R>(iters: u32, mut f: impl FnMut() -> R) -> f64 {
    for _ in 0..iters.div_ceil(10) {
        std::hint::black_box(f());
    }
    // The fastest of several batches: on a shared machine, noise only ever
    // adds time, so the minimum is the repeatable figure.
    let batches = 5;
    let per = iters.div_ceil(batches).max(1);
    (0..batches)
        .map(|_| {
            let t = Instant::now();
            for _ in 0..per {
                std::hint::black_box(f());
            }
            t.elapsed().as_nanos() as f64 / f64::from(per)
        })
        .fold(f64::INFINITY, f64::min)
}

/// A gang's worker about to be placed on `n` nodes of varied free room.
fn placement(n: usize) -> (wit::Placement, wit::Candidates) {
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
    (
        wit::Placement {
            unit,
            task: 0,
            now_ms: 0,
        },
        wit::Candidates {
            index: (0..n as u32).collect(),
            capacity: capacity(n),
            siblings: (0..n as u32).map(|i| u32::from(i % 97 == 0)).collect(),
        },
    )
}

fn capacity(n: usize) -> wit::Capacity {
    wit::Capacity {
        alloc_cpu_milli: vec![32_000; n],
        alloc_memory_mib: vec![131_072; n],
        alloc_gpus: vec![8; n],
        free_cpu_milli: (0..n as u64).map(|i| 8_000 + (i * 7919) % 24_000).collect(),
        free_memory_mib: (0..n as u64)
            .map(|i| 32_768 + (i * 104_729) % 98_304)
            .collect(),
        free_gpus: (0..n as u32).map(|i| 1 + (i * 31) % 8).collect(),
    }
}

fn scale_input(jobs: usize, n: usize) -> wit::ScaleInput {
    let (pod, _) = placement(1);
    wit::ScaleInput {
        now_ms: 3_600_000,
        running: (0..jobs as u64)
            .map(|id| wit::RunningJob {
                id,
                arrival_ms: id * 1000,
                started_ms: id * 1000 + 500,
                scaled_ms: 0,
                workers: 4,
                min_workers: 2,
                max_workers: 8,
                worker_request: pod.unit.tasks[0].request,
                worker_nodes: (0..4).map(|w| ((id as u32) * 4 + w) % n as u32).collect(),
                ps_nodes: vec![(id as u32 * 4) % n as u32],
            })
            .collect(),
        waiting: (0..jobs as u64 / 4)
            .map(|id| wit::WaitingJob {
                id: 10_000 + id,
                arrival_ms: 3_000_000,
                unit: wit::Unit {
                    id: 10_000 + id,
                    ..pod.unit.clone()
                },
            })
            .collect(),
        nodes: capacity(n),
        last_admit_ms: 3_000_000,
        last_scale_down_ms: 0,
    }
}

fn hook_costs(quick: bool, r: &mut Report) -> Result<()> {
    let e = engine();
    let wasm = dragon_tests::bundled(&e, "dragon", "");
    let native: Native<Dragon> = Native::new("");
    let sizes: &[usize] = if quick { &[100] } else { &[100, 1000, 5000] };
    let budget: u64 = if quick { 20_000 } else { 4_000_000 };
    let iters = |work: usize| (budget / work.max(1) as u64).clamp(20, 200_000) as u32;
    let mut push = |hook, nodes, tn: f64, tw: f64| {
        r.hooks.push(HookCost {
            hook,
            nodes,
            native_ns: tn,
            wasm_ns: tw,
            ratio: tw / tn,
        })
    };
    for &n in sizes {
        let (pod, cands) = placement(n);
        // The native side gets its inputs already converted: it measures the
        // policy's own code, the wasm side the code plus the boundary.
        let (npod, ncands) = (pod.lift(), cands.lift());
        let p = native.policy();
        anyhow::ensure!(
            dragon_policy_sdk::Policy::score(p, &npod, &ncands) == wasm.score(&pod, &cands)?,
            "native and wasm scores differ"
        );
        let tn = time(iters(n), || {
            dragon_policy_sdk::Policy::score(p, &npod, &ncands)
        });
        let tw = time(iters(n), || wasm.score(&pod, &cands));
        push("score", n, tn, tw);
        if n == *sizes.last().unwrap_or(&n) {
            r.score_native_ns_per_node = tn / n as f64;
            r.score_wasm_ns_per_node = tw / n as f64;
        }
        let tn = time(iters(n), || {
            dragon_policy_sdk::Policy::filter(p, &npod, &ncands)
        });
        let tw = time(iters(n), || wasm.filter(&pod, &cands));
        push("filter", n, tn, tw);
    }
    let gang = wit::GangState {
        id: 1,
        reserved: 8,
        min_member: 9,
        present: 9,
        waited_ms: 100,
    };
    let ngang = gang.lift();
    let p = native.policy();
    let tn = time(iters(1), || dragon_policy_sdk::Policy::permit(p, 0, &ngang));
    let tw = time(iters(1), || wasm.permit(0, &gang));
    push("permit", 0, tn, tw);
    let n = if quick { 100 } else { 1000 };
    let input = scale_input(n / 10, n);
    let ninput = input.lift();
    let tn = time(iters(n * 4), || {
        dragon_policy_sdk::Policy::scale(p, &ninput)
    });
    let tw = time(iters(n * 4), || wasm.scale(&input));
    push("scale", n, tn, tw);

    // Instantiation: a call after `reset` pays a fresh store, instance and
    // `configure`; the same call on the live instance does not.
    let (pod, cands) = placement(100);
    r.call_100_nodes_us = time(iters(100), || wasm.score(&pod, &cands)) / 1e3;
    let fresh = time(if quick { 10 } else { 200 }, || {
        wasm.reset();
        wasm.score(&pod, &cands)
    }) / 1e3;
    r.instantiate_us = (fresh - r.call_100_nodes_us).max(0.0);
    Ok(())
}

/// See `--count-score`.
fn count_score(side: &str, calls: u32) -> Result<()> {
    let (pod, cands) = placement(5000);
    match side {
        "wasm" => {
            let wasm = dragon_tests::bundled(&engine(), "dragon", "");
            for _ in 0..=calls {
                std::hint::black_box(wasm.score(&pod, &cands)?);
            }
        }
        "native" => {
            let native: Native<Dragon> = Native::new("");
            let (npod, ncands) = (pod.lift(), cands.lift());
            for _ in 0..=calls {
                std::hint::black_box(dragon_policy_sdk::Policy::score(
                    native.policy(),
                    &npod,
                    &ncands,
                ));
            }
        }
        other => anyhow::bail!("SIDE is native or wasm, not {other:?}"),
    }
    Ok(())
}

fn cluster(nodes: usize) -> Cluster {
    let mut c = Cluster::new();
    for i in 0..nodes {
        let node = Node::new(
            format!("node-{i:05}"),
            Resources {
                cpu_milli: 32_000,
                memory_mib: 131_072,
                gpus: 8,
            },
        );
        c.add_node(node).expect("unique node names");
    }
    c
}

fn worker_spec(count: u32) -> dragon_host::spec::TaskSpec {
    dragon_host::spec::TaskSpec {
        count,
        min: None,
        max: None,
        cpu: 1.0,
        memory_gib: 2.0,
        gpus: 1,
    }
}

/// Pods per second through full rounds (queue → … → bind to memory) until
/// every pod is bound.
fn throughput(nodes: usize, jobs: usize, per_job: u32, policy: &dyn Hooks) -> Result<f64> {
    let mut s = Scheduler::new(cluster(nodes), SchedulerConfig::without_backoff());
    for j in 0..jobs {
        add_gang(
            &mut s.cluster,
            &format!("job-{j:05}"),
            j as u64,
            None,
            &worker_spec(per_job),
        );
    }
    let total = jobs * per_job as usize;
    let started = Instant::now();
    let mut bound = 0usize;
    for round in 0..10 {
        let mut io = RecordingIo::default();
        let report = s.schedule_round(round, policy, &mut io, &mut RecordingIo::default());
        if let Some(Decision::PolicyError { error, .. }) = report
            .decisions
            .iter()
            .find(|d| matches!(d, Decision::PolicyError { .. }))
        {
            anyhow::bail!("{}: {error}", policy.info().name);
        }
        bound += io.binds.len();
        if bound >= total {
            break;
        }
    }
    let secs = started.elapsed().as_secs_f64();
    anyhow::ensure!(
        bound == total,
        "{}: bound {bound} of {total}",
        policy.info().name
    );
    Ok(total as f64 / secs)
}

fn throughputs(quick: bool, r: &mut Report) -> Result<()> {
    let e = engine();
    let (nodes, pods, gangs) = if quick {
        (200, 400, 40)
    } else {
        (5000, 10_000, 1000)
    };
    let wasm_base = dragon_tests::bundled(&e, "baseline", "");
    let wasm_dragon = dragon_tests::bundled(&e, "dragon", "");
    let (native_base, native_dragon) = (Native::<Baseline>::new(""), Native::<Dragon>::new(""));
    // Native and wasm alternate, and each keeps its best of three: load from
    // other users only ever slows a run down.
    let runs = if quick { 1 } else { 3 };
    for _ in 0..runs {
        let cases: [(&mut f64, usize, u32, &dyn Hooks); 4] = [
            (&mut r.throughput_native_pods_per_s, pods, 1, &native_base),
            (&mut r.throughput_wasm_pods_per_s, pods, 1, &wasm_base),
            (
                &mut r.gang_throughput_native_pods_per_s,
                gangs,
                8,
                &native_dragon,
            ),
            (
                &mut r.gang_throughput_wasm_pods_per_s,
                gangs,
                8,
                &wasm_dragon,
            ),
        ];
        for (best, units, per_unit, policy) in cases {
            *best = best.max(throughput(nodes, units, per_unit, policy)?);
        }
    }
    Ok(())
}

/// A new policy file, loaded into the slot, to the first decision it makes.
fn swap_to_first_decision(slot: &PolicySlot, file: &Path) -> Result<f64> {
    let (pod, cands) = placement(100);
    let started = Instant::now();
    slot.reload(
        &PolicySource::File(file.to_path_buf()),
        &LoadOptions::default(),
    )
    .with_context(|| format!("reloading {}", file.display()))?;
    slot.current().score(&pod, &cands)?;
    Ok(started.elapsed().as_secs_f64() * 1e3)
}

fn hot_swap(quick: bool, r: &mut Report) -> Result<()> {
    let dir = std::env::temp_dir().join(format!("dragon-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let files: Vec<_> = ["dragon", "baseline"]
        .iter()
        .map(|name| {
            let path = dir.join(format!("{name}.wasm"));
            let bytes = dragon_bundled::by_name(name).expect("bundled policy");
            std::fs::write(&path, bytes).map(|()| path)
        })
        .collect::<std::io::Result<_>>()?;

    // Cold: no cache, every load compiles.
    let e = engine();
    let cold = PolicySlot::new(
        e.clone(),
        ComponentCache::disabled(),
        dragon_tests::bundled(&e, "baseline", ""),
    );
    r.swap_cold_ms = swap_to_first_decision(&cold, &files[0])?;

    // Cached: the compiled artifact is on disk (the first load puts it there).
    let cache = ComponentCache::at(dir.join("cache"));
    WasmPolicy::load(
        &e,
        &cache,
        &PolicySource::File(files[0].clone()),
        &LoadOptions::default(),
    )?;
    let slot = Arc::new(PolicySlot::new(
        e.clone(),
        cache,
        dragon_tests::bundled(&e, "baseline", ""),
    ));
    r.swap_cached_ms = swap_to_first_decision(&slot, &files[0])?;
    swap_to_first_decision(&slot, &files[1])?; // both artifacts cached

    // Swaps under load: two threads run scheduling rounds on the serving
    // policy without pause while the main thread swaps back and forth.
    let stop = Arc::new(AtomicBool::new(false));
    let (cycles, failed) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let workers: Vec<_> = (0..2)
        .map(|_| {
            let (slot, stop, cycles, failed) =
                (slot.clone(), stop.clone(), cycles.clone(), failed.clone());
            std::thread::spawn(move || {
                let mut base = Scheduler::new(cluster(50), SchedulerConfig::without_backoff());
                for j in 0..8 {
                    add_gang(
                        &mut base.cluster,
                        &format!("j{j}"),
                        j,
                        None,
                        &worker_spec(4),
                    );
                }
                while !stop.load(Ordering::Relaxed) {
                    let mut s = base.clone();
                    let policy = slot.current();
                    let mut io = RecordingIo::default();
                    let report =
                        s.schedule_round(0, policy.as_ref(), &mut io, &mut RecordingIo::default());
                    let ok = io.binds.len() == 32
                        && !report
                            .decisions
                            .iter()
                            .any(|d| matches!(d, Decision::PolicyError { .. }));
                    cycles.fetch_add(1, Ordering::Relaxed);
                    if !ok {
                        failed.fetch_add(1, Ordering::Relaxed);
                    }
                }
            })
        })
        .collect();
    // Load is running before the first swap and still after the last.
    let wait_for_cycles = |n: u64| {
        let target = cycles.load(Ordering::Relaxed) + n;
        while cycles.load(Ordering::Relaxed) < target {
            std::thread::yield_now();
        }
    };
    wait_for_cycles(2);
    let swaps = if quick { 6 } else { 100 };
    for i in 0..swaps {
        slot.reload(
            &PolicySource::File(files[i % 2].clone()),
            &LoadOptions::default(),
        )?;
    }
    wait_for_cycles(2);
    stop.store(true, Ordering::Relaxed);
    for w in workers {
        w.join()
            .map_err(|_| anyhow::anyhow!("a load thread panicked"))?;
    }
    r.swaps = swaps as u64;
    r.swap_cycles_run = cycles.load(Ordering::Relaxed);
    r.swap_failed_cycles = failed.load(Ordering::Relaxed);
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

fn rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

fn snapshot_memory(quick: bool, r: &mut Report) {
    let (nodes, pods) = if quick { (500, 5000) } else { (5000, 50_000) };
    let before = rss_kib();
    let mut c = cluster(nodes);
    for j in 0..pods / 5 {
        add_gang(
            &mut c,
            &format!("job-{j:05}"),
            j as u64,
            None,
            &worker_spec(5),
        );
    }
    let after = rss_kib();
    r.snapshot_nodes = nodes;
    r.snapshot_pods = c.pods().count();
    if let (Some(b), Some(a)) = (before, after) {
        r.snapshot_rss_mib = a.saturating_sub(b) as f64 / 1024.0;
    }
    drop(c);
}

fn print_table(r: &Report) {
    if !r.hooks.is_empty() {
        print_hooks(r);
    }
    if r.throughput_native_pods_per_s > 0.0 {
        print_throughput(r);
    }
    if r.swaps > 0 {
        print_swap(r);
    }
    if r.snapshot_nodes > 0 {
        println!(
            "snapshot: {} nodes, {} pods: {:.1} MiB resident",
            r.snapshot_nodes, r.snapshot_pods, r.snapshot_rss_mib
        );
    }
}

fn print_hooks(r: &Report) {
    println!("hook cost, DRAGON policy (native: the same Rust code, no wasm)");
    println!(
        "  {:<7} {:>6}  {:>12}  {:>12}  {:>7}",
        "hook", "nodes", "native ns", "wasm ns", "ratio"
    );
    for h in &r.hooks {
        println!(
            "  {:<7} {:>6}  {:>12.0}  {:>12.0}  {:>6.2}x",
            h.hook, h.nodes, h.native_ns, h.wasm_ns, h.ratio
        );
    }
    println!(
        "  score per node: wasm {:.1} ns, native {:.1} ns",
        r.score_wasm_ns_per_node, r.score_native_ns_per_node
    );
    println!(
        "instance: fresh store + instance + configure {:.1} µs (a live call at 100 nodes: {:.1} µs)",
        r.instantiate_us, r.call_100_nodes_us
    );
}

fn print_throughput(r: &Report) {
    println!("framework throughput (full rounds, in-memory binder)");
    println!(
        "  lone pods, baseline: wasm {:.0} pods/s, native {:.0} pods/s ({:.0} %)",
        r.throughput_wasm_pods_per_s,
        r.throughput_native_pods_per_s,
        100.0 * r.throughput_wasm_pods_per_s / r.throughput_native_pods_per_s
    );
    println!(
        "  gangs of 8, dragon:  wasm {:.0} pods/s, native {:.0} pods/s ({:.0} %)",
        r.gang_throughput_wasm_pods_per_s,
        r.gang_throughput_native_pods_per_s,
        100.0 * r.gang_throughput_wasm_pods_per_s / r.gang_throughput_native_pods_per_s
    );
}

fn print_swap(r: &Report) {
    println!("hot swap (new file to first decision)");
    println!(
        "  cached {:.1} ms, cold {:.1} ms; {} swaps under load: {} cycles, {} failed",
        r.swap_cached_ms, r.swap_cold_ms, r.swaps, r.swap_cycles_run, r.swap_failed_cycles
    );
}

fn main() -> Result<()> {
    let args = Args::parse();
    if let [side, calls] = args.count_score.as_slice() {
        return count_score(side, calls.parse().context("CALLS must be a number")?);
    }
    if let [side, pods] = args.count_throughput.as_slice() {
        let pods = pods.parse().context("PODS must be a number")?;
        let e = engine();
        match side.as_str() {
            "wasm" => throughput(5000, pods, 1, &dragon_tests::bundled(&e, "baseline", ""))?,
            "native" => throughput(5000, pods, 1, &Native::<Baseline>::new(""))?,
            "wasm-gangs" => {
                throughput(5000, pods / 8, 8, &dragon_tests::bundled(&e, "dragon", ""))?
            }
            "native-gangs" => throughput(5000, pods / 8, 8, &Native::<Dragon>::new(""))?,
            other => {
                anyhow::bail!("SIDE is native, wasm, native-gangs or wasm-gangs, not {other:?}")
            }
        };
        return Ok(());
    }
    let mut r = Report::default();
    let run = |section: &str| args.only.is_empty() || args.only.iter().any(|s| s == section);
    // Memory first, before anything else has grown the heap.
    if run("memory") {
        snapshot_memory(args.quick, &mut r);
    }
    if run("hooks") {
        hook_costs(args.quick, &mut r)?;
    }
    if run("throughput") {
        throughputs(args.quick, &mut r)?;
    }
    if run("swap") {
        hot_swap(args.quick, &mut r)?;
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&r)?);
    } else {
        print_table(&r);
    }
    Ok(())
}
