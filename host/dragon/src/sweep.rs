//! A robustness sweep: policies over generated traces at several offered
//! loads and seeds, each cell the mean over the seeds, so that a policy is
//! judged on many traces rather than on the one it was tuned for.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;

use rayon::prelude::*;
use serde::Serialize;

use dragon_runtime::{Hooks, WasmPolicy};
use dragon_sim::bound;
use dragon_sim::engine::{SimOptions, simulate};
use dragon_sim::generate::{GenerateOptions, OptionError, generate};
use dragon_sim::metrics::Summary;
use dragon_sim::trace::Trace;

/// A policy a sweep can run on several traces at once: every run gets an
/// instance of its own, made and configured as the policy was.
pub trait Instances: Sync {
    fn instance(&self) -> Box<dyn Hooks + '_>;
}

impl Instances for WasmPolicy {
    fn instance(&self) -> Box<dyn Hooks + '_> {
        Box::new(self.twin())
    }
}

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
    /// This policy's average JCT over the capacity-aware bound of the same
    /// trace, averaged over the seeds: how far it is from what is possible.
    pub jct_vs_capacity: f64,
    pub p95_jct_s: f64,
    pub p99_wait_s: f64,
    /// Share of GPU time spent training.
    pub gpu_training: f64,
    pub makespan_s: f64,
    pub restarts: f64,
    /// Runs that ended in a deadlock or at the horizon with jobs left.
    pub stuck_runs: u32,
    /// With queues: Jain's index over their shares of what they were owed
    /// (mean over the seeds), and the worst hour of any queue in any seed
    /// (the share of what it was owed that it held, at most 1).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub jain_index: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub worst_queue_hour: Option<f64>,
}

/// What no policy can beat at one load (means over the seeds, as
/// [`Cell`]): the [`bound`](super::bound) of each trace's average JCT.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Bound {
    pub load: f64,
    /// Every job alone at its fastest size from its arrival.
    pub avg_jct_s: f64,
    /// Over the first policy's average JCT at the same seed, averaged.
    pub jct_vs_first: f64,
    /// The capacity-aware bound: the jobs share the cluster's GPUs.
    pub capacity_avg_jct_s: f64,
    pub capacity_vs_first: f64,
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
    /// A simulation panicked (a bug); the sweep has no result.
    #[error("a simulation of the sweep panicked")]
    Panicked,
    /// A generated trace the simulator refuses (a generator bug).
    #[error("{0:#}")]
    Trace(anyhow::Error),
}

/// Simulate each of `policies` (label, policy) on the trace of every load
/// and seed; one [`Cell`] per load and policy, loads in the order given,
/// and the [`Bound`] of each load. The runs of a load go on every core at
/// once (each with an instance of its own, so the results are those of one
/// run at a time); `progress` hears of each trace done, in order.
///
/// # Errors
/// Too many traces, or options the generator refuses.
pub fn sweep(
    options: &SweepOptions,
    policies: &[(String, &dyn Instances)],
    progress: &mut dyn FnMut(usize, usize),
) -> Result<(Vec<Cell>, Vec<Bound>), SweepError> {
    let traces = options.loads.len().saturating_mul(options.seeds.len());
    if traces == 0 || policies.is_empty() {
        return Err(SweepError::Empty);
    }
    if traces > MAX_TRACES {
        return Err(SweepError::TooMany(traces));
    }
    // Every trace of every load, then every run of every trace, all at
    // once: one batch keeps the cores busy to its end.
    let points: Vec<(f64, u64)> = options
        .loads
        .iter()
        .flat_map(|&load| options.seeds.iter().map(move |&seed| (load, seed)))
        .collect();
    let generated: Vec<(Trace, f64, f64)> = points
        .par_iter()
        .map(|&(load, seed)| {
            let o = GenerateOptions {
                seed,
                load,
                ..options.generate.clone()
            };
            let text = generate(&o)?;
            let trace = Trace::parse(&text, &o.command(), false).map_err(SweepError::Trace)?;
            let (alone, capacity) = (bound::alone(&trace), bound::capacity_aware(&trace));
            Ok((trace, alone, capacity))
        })
        .collect::<Result<_, SweepError>>()?;
    let runs: Vec<(usize, usize)> = (0..generated.len())
        .flat_map(|t| (0..policies.len()).map(move |p| (t, p)))
        .collect();
    // A trace is done when its last policy's run is: `progress` hears of
    // each from here, in the order they finish.
    let left: Vec<AtomicUsize> = (0..generated.len())
        .map(|_| AtomicUsize::new(policies.len()))
        .collect();
    let (finished, heard) = mpsc::channel::<()>();
    let summaries = std::thread::scope(|scope| {
        let work = scope.spawn(|| {
            runs.par_iter()
                .map_with(finished, |finished, &(t, p)| {
                    let policy = policies[p].1.instance();
                    let summary = Summary::of(&simulate(
                        &generated[t].0,
                        policy.as_ref(),
                        options.sim,
                        None,
                    ));
                    if left[t].fetch_sub(1, Ordering::AcqRel) == 1 {
                        let _ = finished.send(());
                    }
                    summary
                })
                .collect::<Vec<Summary>>()
        });
        for (done, ()) in heard.iter().enumerate() {
            progress(done + 1, traces);
        }
        work.join()
    })
    .map_err(|_| SweepError::Panicked)?;
    let mut cells = Vec::new();
    let mut bounds = Vec::new();
    for (l, &load) in options.loads.iter().enumerate() {
        let at_load = |t: usize| t / options.seeds.len() == l;
        let mut by_policy: Vec<Vec<Summary>> = vec![Vec::new(); policies.len()];
        for (&(t, p), s) in runs.iter().zip(&summaries) {
            if at_load(t) {
                by_policy[p].push(s.clone());
            }
        }
        let of_load = generated.iter().enumerate().filter(|(t, _)| at_load(*t));
        let alone: Vec<f64> = of_load.clone().map(|(_, g)| g.1).collect();
        let capacity: Vec<f64> = of_load.map(|(_, g)| g.2).collect();
        for (i, (label, _)) in policies.iter().enumerate() {
            cells.push(cell(label, load, &by_policy[i], &by_policy[0], &capacity));
        }
        let first: Vec<f64> = by_policy[0].iter().map(|s| s.avg_jct_s).collect();
        bounds.push(Bound {
            load,
            avg_jct_s: mean(&alone),
            jct_vs_first: mean_ratio(&alone, &first),
            capacity_avg_jct_s: mean(&capacity),
            capacity_vs_first: mean_ratio(&capacity, &first),
        });
    }
    Ok((cells, bounds))
}

fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len().max(1) as f64
}

/// The mean of `a[i] / b[i]` over the seeds where `b[i]` is positive (0
/// when there is none).
fn mean_ratio(a: &[f64], b: &[f64]) -> f64 {
    let ratios: Vec<f64> = a
        .iter()
        .zip(b)
        .filter(|(_, b)| **b > 0.0)
        .map(|(a, b)| a / b)
        .collect();
    mean(&ratios)
}

fn cell(label: &str, load: f64, runs: &[Summary], first: &[Summary], capacity: &[f64]) -> Cell {
    let n = runs.len() as f64;
    let mean = |f: &dyn Fn(&Summary) -> f64| runs.iter().map(f).sum::<f64>() / n;
    let jct: Vec<f64> = runs.iter().map(|s| s.avg_jct_s).collect();
    let first: Vec<f64> = first.iter().map(|s| s.avg_jct_s).collect();
    Cell {
        policy: label.to_string(),
        load,
        runs: runs.len() as u32,
        avg_jct_s: mean(&|s| s.avg_jct_s),
        jct_vs_first: mean_ratio(&jct, &first),
        jct_vs_capacity: mean_ratio(&jct, capacity),
        p95_jct_s: mean(&|s| s.p95_jct_s),
        p99_wait_s: mean(&|s| s.p99_wait_s),
        gpu_training: mean(&|s| s.gpu_util),
        makespan_s: mean(&|s| s.makespan_s),
        restarts: mean(&|s| s.restarts as f64),
        stuck_runs: runs
            .iter()
            .filter(|s| s.deadlocked || s.jobs_unfinished > 0)
            .count() as u32,
        jain_index: {
            let j: Vec<f64> = runs.iter().filter_map(|s| s.jain_index).collect();
            (!j.is_empty()).then(|| j.iter().sum::<f64>() / j.len() as f64)
        },
        worst_queue_hour: runs
            .iter()
            .flat_map(|s| &s.queues)
            .filter_map(|q| q.worst_hour_share)
            .min_by(f64::total_cmp),
    }
}

/// With queues in the traces: per load and policy, Jain's index and the
/// worst hour any queue had; empty otherwise.
fn fairness_table(cells: &[Cell]) -> String {
    use std::fmt::Write as _;
    if cells
        .iter()
        .all(|c| c.jain_index.is_none() && c.worst_queue_hour.is_none())
    {
        return String::new();
    }
    let mut out = format!(
        "fairness between the queues\n{:>5}  {:<12} {:>8} {:>17}\n",
        "load", "policy", "Jain", "worst queue-hour"
    );
    let show = |x: Option<f64>, f: &dyn Fn(f64) -> String| x.map_or("-".to_string(), f);
    for c in cells {
        let _ = writeln!(
            out,
            "{:>5}  {:<12} {:>8} {:>17}",
            c.load,
            c.policy,
            show(c.jain_index, &|j| format!("{j:.3}")),
            show(c.worst_queue_hour, &|w| format!("{:.1} %", w * 100.0)),
        );
    }
    out
}

/// The sweep as a table: one row per load and policy, then the load's two
/// bounds, and a last row per policy with its JCT ratios to the first
/// policy and to the capacity-aware bound averaged over the loads.
pub fn table(cells: &[Cell], bounds: &[Bound]) -> String {
    use crate::report::human;
    use std::fmt::Write as _;
    let mut out = format!(
        "{:>5}  {:<12} {:>10} {:>9} {:>9} {:>10} {:>10} {:>9} {:>10} {:>9} {:>6}\n",
        "load",
        "policy",
        "avg JCT",
        "vs first",
        "vs bound",
        "p95 JCT",
        "p99 wait",
        "training",
        "makespan",
        "restarts",
        "stuck"
    );
    let short = |out: &mut String,
                 load: &dyn std::fmt::Display,
                 label: &str,
                 jct: &str,
                 first: f64,
                 bound: f64| {
        let _ = writeln!(
            out,
            "{load:>5}  {label:<12} {jct:>10} {first:>8.2}x {bound:>8.2}x"
        );
    };
    for c in cells {
        let _ = writeln!(
            out,
            "{:>5}  {:<12} {:>10} {:>8.2}x {:>8.2}x {:>10} {:>10} {:>8.1}% {:>10} {:>9.1} {:>3}/{}",
            c.load,
            c.policy,
            human(c.avg_jct_s),
            c.jct_vs_first,
            c.jct_vs_capacity,
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
            let alone_vs_capacity = b.avg_jct_s / b.capacity_avg_jct_s.max(f64::MIN_POSITIVE);
            short(
                &mut out,
                &b.load,
                "(alone)",
                &human(b.avg_jct_s),
                b.jct_vs_first,
                alone_vs_capacity,
            );
            short(
                &mut out,
                &b.load,
                "(capacity)",
                &human(b.capacity_avg_jct_s),
                b.capacity_vs_first,
                1.0,
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
        let of = |f: fn(&Cell) -> f64| {
            mean(
                &cells
                    .iter()
                    .filter(|c| c.policy == p)
                    .map(f)
                    .collect::<Vec<_>>(),
            )
        };
        short(
            &mut out,
            &"all",
            p,
            "",
            of(|c| c.jct_vs_first),
            of(|c| c.jct_vs_capacity),
        );
    }
    if !bounds.is_empty() {
        let of = |f: fn(&Bound) -> f64| mean(&bounds.iter().map(f).collect::<Vec<_>>());
        let alone_vs_capacity = of(|b| b.avg_jct_s / b.capacity_avg_jct_s.max(f64::MIN_POSITIVE));
        short(
            &mut out,
            &"all",
            "(alone)",
            "",
            of(|b| b.jct_vs_first),
            alone_vs_capacity,
        );
        short(
            &mut out,
            &"all",
            "(capacity)",
            "",
            of(|b| b.capacity_vs_first),
            1.0,
        );
    }
    out.push_str(&fairness_table(cells));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use dragon_runtime::{ComponentCache, LoadOptions, PolicyEngine, PolicySource};
    use dragon_sim::{Mix, SimRun};

    fn wasm(name: &str) -> WasmPolicy {
        WasmPolicy::load(
            &PolicyEngine::new().unwrap(),
            &ComponentCache::disabled(),
            &PolicySource::named_or_file(name),
            &LoadOptions::default(),
        )
        .unwrap()
    }

    fn run(trace: &Trace, policy: &dyn Hooks) -> (SimRun, Summary) {
        let r = simulate(trace, policy, SimOptions::default(), None);
        let s = Summary::of(&r);
        (r, s)
    }

    #[test]
    fn a_sweep_averages_each_policy_per_load_over_the_seeds() {
        let dragon = wasm("dragon");
        let baseline = wasm("baseline");
        let policies: Vec<(String, &dyn Instances)> = vec![
            ("baseline".into(), &baseline as &dyn Instances),
            ("dragon".into(), &dragon as &dyn Instances),
        ];
        let options = SweepOptions {
            loads: vec![0.5, 1.2],
            seeds: vec![1, 2],
            generate: GenerateOptions {
                seed: 0,
                nodes: 4,
                gpus_per_node: 4,
                jobs: 30,
                load: 1.0,
                elastic_share: 1.0,
                mix: Mix::Philly,
                racks: Default::default(),
                tiers: false,
                teams: 0,
            },
            sim: SimOptions::default(),
        };
        let mut seen = Vec::new();
        let (cells, bounds) = sweep(&options, &policies, &mut |d, t| seen.push((d, t))).unwrap();
        assert_eq!(seen, vec![(1, 4), (2, 4), (3, 4), (4, 4)]);
        let shape: Vec<(f64, &str, u32)> = cells
            .iter()
            .map(|c| (c.load, c.policy.as_str(), c.runs))
            .collect();
        assert_eq!(
            shape,
            vec![
                (0.5, "baseline", 2),
                (0.5, "dragon", 2),
                (1.2, "baseline", 2),
                (1.2, "dragon", 2)
            ]
        );
        // Each cell is the mean of its seeds' runs, the ratio per seed.
        let trace = |seed| {
            let o = GenerateOptions {
                seed,
                load: 1.2,
                ..options.generate.clone()
            };
            Trace::parse(&generate(&o).unwrap(), "t", false).unwrap()
        };
        let (_, b1) = run(&trace(1), &baseline);
        let (_, b2) = run(&trace(2), &baseline);
        let (_, d1) = run(&trace(1), &dragon);
        let (_, d2) = run(&trace(2), &dragon);
        let c = &cells[3];
        assert!((c.avg_jct_s - (d1.avg_jct_s + d2.avg_jct_s) / 2.0).abs() < 1e-9);
        let ratio = (d1.avg_jct_s / b1.avg_jct_s + d2.avg_jct_s / b2.avg_jct_s) / 2.0;
        assert!((c.jct_vs_first - ratio).abs() < 1e-9, "{c:?}");
        assert!((c.p99_wait_s - (d1.p99_wait_s + d2.p99_wait_s) / 2.0).abs() < 1e-9);
        assert_eq!(cells[2].jct_vs_first, 1.0);
        // The bounds: alone below capacity-aware, both below every policy's
        // average JCT at each load.
        assert_eq!(bounds.len(), 2);
        for b in &bounds {
            assert!(b.avg_jct_s <= b.capacity_avg_jct_s, "{b:?}");
            for c in cells.iter().filter(|c| c.load == b.load) {
                assert!(b.capacity_avg_jct_s <= c.avg_jct_s, "{b:?} {c:?}");
                assert!(c.jct_vs_capacity >= 1.0, "{c:?}");
            }
        }
        let table = table(&cells, &bounds);
        assert!(table.contains("  all  dragon"), "{table}");
        assert!(
            table.lines().last().unwrap().contains("all  (capacity)"),
            "{table}"
        );

        let too_many = SweepOptions {
            seeds: (0..600).collect(),
            ..options
        };
        let e = sweep(&too_many, &policies, &mut |_, _| {}).unwrap_err();
        assert!(e.to_string().contains("1200 traces"), "{e}");
    }
}
