//! `dragon-bench`: what the harness benchmarks cannot measure. Hot swap
//! under load (a new policy file to its first decision, and whether any
//! scheduling cycle fails while policies are swapped beneath it) and the
//! resident memory of a large snapshot.
//!
//!     cargo run --release -p dragon-tests --bin dragon-bench -- [--json] [--quick]
//!
//! Hook costs and framework throughput are divan benchmarks
//! (`cargo bench -p dragon-tests --bench hooks`, `--bench throughput`);
//! instruction counts are gungraun's (`--bench instructions`).

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Instant;

use anyhow::{Context, Result};
use clap::Parser;
use serde::Serialize;

use dragon_framework::{Decision, RecordingIo, Scheduler, SchedulerConfig};
use dragon_runtime::{ComponentCache, Hooks, LoadOptions, PolicySlot, PolicySource, WasmPolicy};
use dragon_tests::workload::{all_candidates, cluster, placement, worker_spec};
use dragon_tests::{add_gang, engine};

#[derive(Parser)]
#[command(about = "Benchmarks: hot swap under load, snapshot memory")]
struct Args {
    /// Print one JSON object instead of the tables.
    #[arg(long)]
    json: bool,
    /// Small sizes and few swaps (a smoke run: the figures mean little).
    #[arg(long)]
    quick: bool,
    /// Run only these sections (comma-separated: memory, swap).
    #[arg(long, value_delimiter = ',')]
    only: Vec<String>,
}

#[derive(Serialize, Default)]
struct Report {
    /// A new policy file to its first decision, compiled artifact cached.
    swap_cached_ms: f64,
    /// The same with a cold compile.
    swap_cold_ms: f64,
    /// Cycles that failed across the swaps under load.
    swap_failed_cycles: u64,
    swaps: u64,
    swap_cycles_run: u64,
    /// Resident memory of a snapshot of 5,000 nodes and 50,000 pods, MiB.
    snapshot_rss_mib: f64,
    snapshot_nodes: usize,
    snapshot_pods: usize,
    /// `dragon`'s linear memory once its view holds the snapshot's nodes
    /// (interface 0.2), MiB.
    guest_memory_mib: f64,
    /// A `score` over every node of the snapshot on an instance whose view
    /// is current, ms.
    live_score_ms: f64,
    /// The same call on a fresh instance, which is sent every node first:
    /// what a trap costs the call after it, ms.
    resend_score_ms: f64,
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
    let view = dragon_runtime::FixedView::from_candidates(&cands);
    slot.current().score(&pod, &cands, &view)?;
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
                    add_gang(&mut base, &format!("j{j}"), j, None, &worker_spec(4));
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
    guest_view(&c, r);
    drop(c);
}

/// The snapshot as `dragon`'s view: its memory, and a call with the view
/// current against one that must first receive every node.
fn guest_view(c: &dragon_framework::Cluster, r: &mut Report) {
    let policy = dragon_tests::bundled(&engine(), "dragon", "");
    let (pod, _) = placement(1);
    let cands = all_candidates(c);
    let timed = || {
        let started = Instant::now();
        let scores = policy.score(&pod, &cands, c).map(|s| s.len());
        (started.elapsed().as_secs_f64() * 1e3, scores)
    };
    let _ = timed();
    let (live, _) = timed();
    r.live_score_ms = live;
    r.guest_memory_mib = policy.memory_bytes().unwrap_or(0) as f64 / (1 << 20) as f64;
    policy.reset();
    let (resend, _) = timed();
    r.resend_score_ms = resend;
}

fn print_table(r: &Report) {
    if r.snapshot_pods > 0 {
        println!(
            "snapshot memory: {} nodes, {} pods: {:.1} MiB resident",
            r.snapshot_nodes, r.snapshot_pods, r.snapshot_rss_mib
        );
        println!(
            "dragon's view of it: {:.1} MiB of linear memory; score over every node {:.2} ms, \
             {:.2} ms on a fresh instance sent every node (a trap's cost)",
            r.guest_memory_mib, r.live_score_ms, r.resend_score_ms
        );
    }
    if r.swaps > 0 {
        print_swap(r);
    }
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
    let mut r = Report::default();
    let run = |section: &str| args.only.is_empty() || args.only.iter().any(|s| s == section);
    // Memory first, before anything else has grown the heap.
    if run("memory") {
        snapshot_memory(args.quick, &mut r);
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
