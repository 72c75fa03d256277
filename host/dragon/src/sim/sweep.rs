//! A robustness sweep: policies over generated traces at several offered
//! loads and seeds, each cell the mean over the seeds, so that a policy is
//! judged on many traces rather than on the one it was tuned for.

use serde::Serialize;

use super::engine::{SimOptions, simulate};
use super::generate::{GenerateOptions, OptionError, generate};
use super::metrics::Summary;
use super::trace::Trace;
use crate::runtime::Hooks;

/// The most traces one sweep generates (loads × seeds): each is simulated
/// under every policy.
pub const MAX_TRACES: usize = 1_000;

/// What to sweep over.
#[derive(Debug, Clone)]
pub struct SweepOptions {
    pub loads: Vec<f64>,
    pub seeds: Vec<u64>,
    /// The generator's other options (its seed and load are the sweep's).
    pub generate: GenerateOptions,
    pub sim: SimOptions,
}

/// One policy at one load: means over the seeds.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Cell {
    pub policy: String,
    pub load: f64,
    pub runs: u32,
    pub avg_jct_s: f64,
    /// This policy's average JCT over the first policy's at the same load
    /// and seed, averaged over the seeds.
    pub jct_vs_first: f64,
    pub p95_jct_s: f64,
    pub p99_wait_s: f64,
    /// Share of GPU time spent training.
    pub gpu_training: f64,
    pub makespan_s: f64,
    pub restarts: f64,
    /// Runs that ended in a deadlock or at the horizon with jobs left.
    pub stuck_runs: u32,
}

/// What no policy can beat at one load: every job from its arrival at the
/// size that runs it fastest, on one node if that size fits one, never
/// waiting or restarting (means over the seeds, as [`Cell`]).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Bound {
    pub load: f64,
    pub avg_jct_s: f64,
    /// Over the first policy's average JCT at the same seed, averaged.
    pub jct_vs_first: f64,
}

/// The average of [`Bound`]'s job completion time over `trace`'s jobs, s.
pub fn jct_bound_s(trace: &Trace) -> f64 {
    let node_gpus = trace
        .nodes
        .iter()
        .map(|n| n.allocatable.gpus)
        .max()
        .unwrap_or(0);
    let best = |j: &super::trace::TraceJob| {
        let worker_gpus = j
            .pods
            .iter()
            .find(|p| p.role == crate::framework::Role::Worker)
            .map_or(0, |p| p.request.gpus);
        let other_gpus: u32 = j
            .pods
            .iter()
            .filter(|p| p.role != crate::framework::Role::Worker)
            .map(|p| p.request.gpus)
            .sum();
        (j.job.min_workers..=j.job.max_workers)
            .map(|w| {
                let one_node =
                    w.saturating_mul(worker_gpus).saturating_add(other_gpus) <= node_gpus;
                let span = if one_node { 1 } else { 2 };
                j.work_ms / j.speed.rate(w, span, j.job.workers)
            })
            .fold(f64::INFINITY, f64::min)
    };
    let n = trace.jobs.len().max(1) as f64;
    trace.jobs.iter().map(best).sum::<f64>() / n / 1e3
}

/// Why a sweep cannot run.
#[derive(Debug, thiserror::Error)]
pub enum SweepError {
    #[error("a sweep needs at least one load, one seed and one policy")]
    Empty,
    #[error("{0} traces (loads × seeds) is more than the {MAX_TRACES} a sweep runs")]
    TooMany(usize),
    #[error(transparent)]
    Options(#[from] OptionError),
    /// A generated trace the simulator refuses (a generator bug).
    #[error("{0:#}")]
    Trace(anyhow::Error),
}

/// Simulate each of `policies` (label, policy) on the trace of every load
/// and seed; one [`Cell`] per load and policy, loads in the order given,
/// and the [`Bound`] of each load.
///
/// # Errors
/// Too many traces, or options the generator refuses.
pub fn sweep(
    options: &SweepOptions,
    policies: &[(String, &dyn Hooks)],
    progress: &mut dyn FnMut(usize, usize),
) -> Result<(Vec<Cell>, Vec<Bound>), SweepError> {
    let traces = options.loads.len().saturating_mul(options.seeds.len());
    if traces == 0 || policies.is_empty() {
        return Err(SweepError::Empty);
    }
    if traces > MAX_TRACES {
        return Err(SweepError::TooMany(traces));
    }
    let mut cells = Vec::new();
    let mut bounds = Vec::new();
    let mut done = 0;
    for &load in &options.loads {
        let mut summaries: Vec<Vec<Summary>> = vec![Vec::new(); policies.len()];
        let mut bound: Vec<f64> = Vec::new();
        for &seed in &options.seeds {
            let o = GenerateOptions {
                seed,
                load,
                ..options.generate.clone()
            };
            let text = generate(&o)?;
            let trace = Trace::parse(&text, &o.command(), false).map_err(SweepError::Trace)?;
            bound.push(jct_bound_s(&trace));
            for (i, (_, policy)) in policies.iter().enumerate() {
                summaries[i].push(Summary::of(&simulate(&trace, *policy, options.sim, None)));
            }
            done += 1;
            progress(done, traces);
        }
        for (i, (label, _)) in policies.iter().enumerate() {
            cells.push(cell(label, load, &summaries[i], &summaries[0]));
        }
        let ratios: Vec<f64> = bound
            .iter()
            .zip(&summaries[0])
            .filter(|(_, f)| f.avg_jct_s > 0.0)
            .map(|(b, f)| b / f.avg_jct_s)
            .collect();
        bounds.push(Bound {
            load,
            avg_jct_s: bound.iter().sum::<f64>() / bound.len().max(1) as f64,
            jct_vs_first: ratios.iter().sum::<f64>() / ratios.len().max(1) as f64,
        });
    }
    Ok((cells, bounds))
}

fn cell(label: &str, load: f64, runs: &[Summary], first: &[Summary]) -> Cell {
    let n = runs.len() as f64;
    let mean = |f: &dyn Fn(&Summary) -> f64| runs.iter().map(f).sum::<f64>() / n;
    let ratios: Vec<f64> = runs
        .iter()
        .zip(first)
        .filter(|(_, f)| f.avg_jct_s > 0.0)
        .map(|(r, f)| r.avg_jct_s / f.avg_jct_s)
        .collect();
    Cell {
        policy: label.to_string(),
        load,
        runs: runs.len() as u32,
        avg_jct_s: mean(&|s| s.avg_jct_s),
        jct_vs_first: match ratios.is_empty() {
            true => 0.0,
            false => ratios.iter().sum::<f64>() / ratios.len() as f64,
        },
        p95_jct_s: mean(&|s| s.p95_jct_s),
        p99_wait_s: mean(&|s| s.p99_wait_s),
        gpu_training: mean(&|s| s.gpu_util),
        makespan_s: mean(&|s| s.makespan_s),
        restarts: mean(&|s| s.restarts as f64),
        stuck_runs: runs
            .iter()
            .filter(|s| s.deadlocked || s.jobs_unfinished > 0)
            .count() as u32,
    }
}

/// The sweep as a table: one row per load and policy, then the load's
/// bound, and a last row per policy with its JCT ratio to the first policy
/// averaged over the loads.
pub fn table(cells: &[Cell], bounds: &[Bound]) -> String {
    use super::report::human;
    use std::fmt::Write as _;
    let mut out = format!(
        "{:>5}  {:<12} {:>10} {:>9} {:>10} {:>10} {:>9} {:>10} {:>9} {:>6}\n",
        "load",
        "policy",
        "avg JCT",
        "vs first",
        "p95 JCT",
        "p99 wait",
        "training",
        "makespan",
        "restarts",
        "stuck"
    );
    for c in cells {
        let _ = writeln!(
            out,
            "{:>5}  {:<12} {:>10} {:>8.2}x {:>10} {:>10} {:>8.1}% {:>10} {:>9.1} {:>3}/{}",
            c.load,
            c.policy,
            human(c.avg_jct_s),
            c.jct_vs_first,
            human(c.p95_jct_s),
            human(c.p99_wait_s),
            c.gpu_training * 100.0,
            human(c.makespan_s),
            c.restarts,
            c.stuck_runs,
            c.runs
        );
        let last_of_load = cells
            .iter()
            .rev()
            .find(|o| o.load == c.load)
            .is_some_and(|o| std::ptr::eq(o, c));
        if let Some(b) = bounds.iter().find(|b| b.load == c.load)
            && last_of_load
        {
            let _ = writeln!(
                out,
                "{:>5}  {:<12} {:>10} {:>8.2}x",
                b.load,
                "(bound)",
                human(b.avg_jct_s),
                b.jct_vs_first
            );
        }
    }
    let mut policies: Vec<&str> = Vec::new();
    for c in cells {
        if !policies.contains(&c.policy.as_str()) {
            policies.push(&c.policy);
        }
    }
    for p in policies {
        let ratios: Vec<f64> = cells
            .iter()
            .filter(|c| c.policy == p)
            .map(|c| c.jct_vs_first)
            .collect();
        let _ = writeln!(
            out,
            "{:>5}  {:<12} {:>10} {:>8.2}x",
            "all",
            p,
            "",
            ratios.iter().sum::<f64>() / ratios.len().max(1) as f64
        );
    }
    if !bounds.is_empty() {
        let mean = bounds.iter().map(|b| b.jct_vs_first).sum::<f64>() / bounds.len() as f64;
        let _ = writeln!(
            out,
            "{:>5}  {:<12} {:>10} {:>8.2}x",
            "all", "(bound)", "", mean
        );
    }
    out
}
