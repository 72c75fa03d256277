//! A seeded generator of synthetic traces (`dragon trace generate`).
//!
//! - Arrivals: a Poisson process (exponential inter-arrival times) whose rate
//!   makes the offered load — GPU-seconds demanded at the requested sizes per
//!   GPU-second of capacity — equal `load`.
//! - Job size (workers, one GPU each) and duration, by [`Mix`]: `philly`,
//!   the distributions Gavel (Narayanan et al., OSDI'20) derived from
//!   Microsoft's Philly trace (Jeon et al., ATC'19): 70 % 1 worker, 10 % 2,
//!   15 % 4, 5 % 8; run time `60 × 10^U(1.5, 3)` s with probability 0.8,
//!   else `60 × 10^U(3, 4)` s. `helios`, shaped after the characterisation
//!   of SenseTime's Helios clusters (Hu et al., SC'21): more single-GPU jobs
//!   and a heavier tail of wide ones, which hold most of the GPU time, and
//!   shorter typical run times (our parameters, not fitted to the data).
//! - Every job has one parameter server. A share `elastic_share` of the
//!   jobs (all by default) is elastic, with bounds `min = ⌈n/2⌉`, `max = 2n`
//!   (the traces report no elasticity; this is our assumption); the others
//!   run at exactly `n` workers. Which jobs are elastic is drawn from a
//!   stream of its own, so the share leaves every other draw of a seed as
//!   it was.
//!
//! The random numbers come from SplitMix64 (Steele, Lea & Flood, OOPSLA'14),
//! written out here so a seed gives the same trace forever, whatever
//! version of a random-number crate is current.

use std::fmt::Write as _;

/// A distribution of job sizes and run times.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Mix {
    /// Philly-derived (Gavel's): mostly 1-GPU jobs of hours, a tail of days.
    #[default]
    Philly,
    /// Helios-like: 1 GPU for most, a tail up to 16, mostly minutes to hours.
    Helios,
}

/// The shape of one [`Mix`].
struct Shape {
    /// Worker-count distribution: `(workers, cumulative probability)`.
    sizes: &'static [(u32, f64)],
    /// Probability of a "short" job, and the log10-minute ranges of both kinds.
    short_p: f64,
    short_log10_min: (f64, f64),
    long_log10_min: (f64, f64),
}

const PHILLY: Shape = Shape {
    sizes: &[(1, 0.70), (2, 0.80), (4, 0.95), (8, 1.0)],
    short_p: 0.8,
    short_log10_min: (1.5, 3.0),
    long_log10_min: (3.0, 4.0),
};

const HELIOS: Shape = Shape {
    sizes: &[(1, 0.75), (2, 0.83), (4, 0.90), (8, 0.97), (16, 1.0)],
    short_p: 0.85,
    short_log10_min: (0.5, 2.5),
    long_log10_min: (2.5, 4.0),
};

impl Mix {
    fn shape(self) -> &'static Shape {
        match self {
            Mix::Philly => &PHILLY,
            Mix::Helios => &HELIOS,
        }
    }

    /// The name the command line takes.
    pub fn name(self) -> &'static str {
        match self {
            Mix::Philly => "philly",
            Mix::Helios => "helios",
        }
    }
}

/// What to generate.
#[derive(Debug, Clone, PartialEq)]
pub struct GenerateOptions {
    pub seed: u64,
    pub nodes: u32,
    pub gpus_per_node: u32,
    pub jobs: u32,
    /// Offered load (1.0 = demand equals capacity on average).
    pub load: f64,
    /// Share of the jobs that are elastic, in [0, 1].
    pub elastic_share: f64,
    /// Sizes and run times.
    pub mix: Mix,
}

/// The seed of the elastic draws is the trace's, mixed with this.
const ELASTIC_STREAM: u64 = 0x0E1A_571C_5EED_0001;

/// SplitMix64: a tiny, well-studied, seedable generator.
#[derive(Debug, Clone)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    pub fn new(seed: u64) -> SplitMix64 {
        SplitMix64(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    pub fn uniform(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Uniform in [a, b).
    pub fn range(&mut self, a: f64, b: f64) -> f64 {
        a + (b - a) * self.uniform()
    }

    /// Exponential with the given mean.
    pub fn exponential(&mut self, mean: f64) -> f64 {
        -mean * (1.0 - self.uniform()).ln()
    }
}

/// Mean of `60 × 10^U(a, b)` seconds.
fn mean_log_uniform_minutes((a, b): (f64, f64)) -> f64 {
    60.0 * (10f64.powf(b) - 10f64.powf(a)) / ((b - a) * std::f64::consts::LN_10)
}

/// Expected GPU-seconds of one job, for the arrival rate.
fn mean_gpu_seconds(s: &Shape) -> f64 {
    let mut mean_workers = 0.0;
    let mut prev = 0.0;
    for &(w, c) in s.sizes {
        mean_workers += f64::from(w) * (c - prev);
        prev = c;
    }
    let mean_duration = s.short_p * mean_log_uniform_minutes(s.short_log10_min)
        + (1.0 - s.short_p) * mean_log_uniform_minutes(s.long_log10_min);
    mean_workers * mean_duration
}

impl GenerateOptions {
    /// The command that reproduces this trace.
    pub fn command(&self) -> String {
        let mut c = format!(
            "dragon trace generate --seed {} --nodes {} --gpus-per-node {} --jobs {} --load {}",
            self.seed, self.nodes, self.gpus_per_node, self.jobs, self.load
        );
        if self.elastic_share != 1.0 {
            c.push_str(&format!(" --elastic-share {}", self.elastic_share));
        }
        if self.mix != Mix::Philly {
            c.push_str(&format!(" --mix {}", self.mix.name()));
        }
        c
    }

    fn check(&self) -> Result<(), OptionError> {
        let refuse = |flag, range, got: &dyn std::fmt::Display| {
            Err(OptionError {
                flag,
                range,
                got: got.to_string(),
            })
        };
        if self.nodes == 0 || self.nodes > 100_000 {
            return refuse("nodes", "between 1 and 100000", &self.nodes);
        }
        if self.gpus_per_node == 0 || self.gpus_per_node > 64 {
            return refuse("gpus-per-node", "between 1 and 64", &self.gpus_per_node);
        }
        if self.jobs == 0 || self.jobs > 1_000_000 {
            return refuse("jobs", "between 1 and 1000000", &self.jobs);
        }
        if !(0.0..=1.0).contains(&self.elastic_share) {
            return refuse("elastic-share", "a number in [0, 1]", &self.elastic_share);
        }
        if !self.load.is_finite() || self.load <= 0.0 || self.load > 100.0 {
            return refuse("load", "a number in (0, 100]", &self.load);
        }
        Ok(())
    }
}

/// An option out of its range, with the flag named.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("--{flag} must be {range}, got {got}")]
pub struct OptionError {
    pub flag: &'static str,
    pub range: &'static str,
    pub got: String,
}

/// Generate a trace as YAML text.
///
/// # Errors
/// Out-of-range options, with the flag named.
pub fn generate(o: &GenerateOptions) -> Result<String, OptionError> {
    o.check()?;
    let mut rng = SplitMix64::new(o.seed);
    let mut elastic = SplitMix64::new(o.seed ^ ELASTIC_STREAM);
    let total_gpus = f64::from(o.nodes) * f64::from(o.gpus_per_node);
    let shape = o.mix.shape();
    let mean_interarrival = mean_gpu_seconds(shape) / (o.load * total_gpus);
    // Per GPU: 8 cores and 64 GiB, the shape of common 8-GPU servers.
    let (node_cpu, node_mem) = (8 * o.gpus_per_node, 64 * o.gpus_per_node);
    let max_gpus = o.nodes.saturating_mul(o.gpus_per_node);

    let mut out = String::new();
    let _ = writeln!(out, "# Generated by: {}", o.command());
    let _ = writeln!(
        out,
        "# Do not edit by hand; regenerate instead (see docs/simulator.md)."
    );
    let _ = writeln!(
        out,
        "description: \"Synthetic: {} jobs on {} nodes x {} GPUs, Poisson arrivals at offered load {}, {} sizes and durations (seed {})\"",
        o.jobs,
        o.nodes,
        o.gpus_per_node,
        o.load,
        match o.mix {
            Mix::Philly => "Philly-derived",
            Mix::Helios => "Helios-like",
        },
        o.seed
    );
    let _ = writeln!(out, "cluster:\n  nodes:");
    let _ = writeln!(
        out,
        "    - {{name_prefix: node, count: {}, cpu: {node_cpu}, memory_gib: {node_mem}, gpus: {}}}",
        o.nodes, o.gpus_per_node
    );
    let _ = writeln!(out, "jobs:");
    let mut t = 0.0f64;
    for i in 0..o.jobs {
        if i > 0 {
            t += rng.exponential(mean_interarrival);
        }
        let u = rng.uniform();
        let workers = shape
            .sizes
            .iter()
            .find(|&&(_, c)| u < c)
            .map_or(1, |&(w, _)| w)
            .min(max_gpus);
        let range = if rng.uniform() < shape.short_p {
            shape.short_log10_min
        } else {
            shape.long_log10_min
        };
        let duration = (60.0 * 10f64.powf(rng.range(range.0, range.1)))
            .round()
            .max(1.0);
        let (min, max) = match elastic.uniform() < o.elastic_share {
            true => (
                workers.div_ceil(2),
                (workers * 2).min(max_gpus).max(workers),
            ),
            false => (workers, workers),
        };
        let _ = writeln!(
            out,
            "  - {{name: job-{i:05}, arrival_s: {}, duration_s: {duration}, ps: {{count: 1, cpu: 4, memory_gib: 16}}, workers: {{count: {workers}, min: {min}, max: {max}, cpu: 6, memory_gib: 32, gpus: 1}}}}",
            t.round()
        );
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::trace::Trace;

    /// GPU-seconds demanded at the requested sizes over the arrival span's.
    fn offered_load(t: &Trace, gpus: f64) -> f64 {
        let span_s = t.jobs.last().unwrap().arrival_ms as f64 / 1e3;
        let demand: f64 = t
            .jobs
            .iter()
            .map(|j| f64::from(j.job.workers) * j.work_ms / 1e3)
            .sum();
        demand / (span_s * gpus)
    }

    fn opts(seed: u64) -> GenerateOptions {
        GenerateOptions {
            seed,
            nodes: 4,
            gpus_per_node: 8,
            jobs: 200,
            load: 1.0,
            elastic_share: 1.0,
            mix: Mix::Philly,
        }
    }

    #[test]
    fn the_generator_is_deterministic_per_seed() {
        assert_eq!(generate(&opts(7)).unwrap(), generate(&opts(7)).unwrap());
        assert_ne!(generate(&opts(7)).unwrap(), generate(&opts(8)).unwrap());
        // Pinned: the first numbers of SplitMix64 from seed 0 (reference values).
        let mut r = SplitMix64::new(0);
        assert_eq!(r.next_u64(), 0xE220_A839_7B1D_CDAF);
        assert_eq!(r.next_u64(), 0x6E78_9E6A_A1B9_65F4);
    }

    #[test]
    fn generated_traces_are_valid_and_follow_the_distributions() {
        let o = GenerateOptions {
            jobs: 4000,
            ..opts(1)
        };
        let text = generate(&o).unwrap();
        assert!(text.starts_with("# Generated by: dragon trace generate --seed 1 --nodes 4 --gpus-per-node 8 --jobs 4000 --load 1\n"));
        let t = Trace::parse(&text, "gen", false).unwrap();
        assert_eq!(t.jobs.len(), 4000);
        assert_eq!(t.total_gpus(), 32);
        let ones = t.jobs.iter().filter(|j| j.job.workers == 1).count() as f64 / 4000.0;
        assert!((ones - 0.70).abs() < 0.03, "share of 1-worker jobs {ones}");
        let eights = t.jobs.iter().filter(|j| j.job.workers == 8).count() as f64 / 4000.0;
        assert!(
            (eights - 0.05).abs() < 0.02,
            "share of 8-worker jobs {eights}"
        );
        let short = t
            .jobs
            .iter()
            .filter(|j| j.work_ms < 60_000.0 * 1000.0)
            .count() as f64
            / 4000.0;
        assert!(
            (short - 0.8).abs() < 0.03,
            "share of jobs under 1000 minutes {short}"
        );
        assert!(
            t.jobs
                .iter()
                .all(|j| j.work_ms >= 60_000.0 * 31.0 && j.work_ms <= 60_000.0 * 10_001.0)
        );
        // Offered load close to the target.
        let load = offered_load(&t, 32.0);
        assert!((0.7..1.4).contains(&load), "offered load {load}");
        // Elastic bounds.
        assert!(
            t.jobs
                .iter()
                .all(|j| j.job.min_workers == j.job.workers.div_ceil(2))
        );
    }

    #[test]
    fn an_elastic_share_keeps_the_rest_of_a_seeds_trace() {
        let all = Trace::parse(&generate(&opts(3)).unwrap(), "all", false).unwrap();
        let o = GenerateOptions {
            elastic_share: 0.25,
            ..opts(3)
        };
        let text = generate(&o).unwrap();
        assert!(text.starts_with("# Generated by: dragon trace generate --seed 3 --nodes 4 --gpus-per-node 8 --jobs 200 --load 1 --elastic-share 0.25\n"));
        let some = Trace::parse(&text, "some", false).unwrap();
        let mut elastic = 0;
        for (a, s) in all.jobs.iter().zip(&some.jobs) {
            assert_eq!(
                (a.arrival_ms, a.work_ms, a.job.workers),
                (s.arrival_ms, s.work_ms, s.job.workers)
            );
            if s.job.min_workers == s.job.max_workers {
                assert_eq!(s.job.min_workers, s.job.workers);
            } else {
                assert_eq!(
                    (s.job.min_workers, s.job.max_workers),
                    (a.job.min_workers, a.job.max_workers)
                );
                elastic += 1;
            }
        }
        // Of 200 jobs, a quarter elastic (1-worker jobs have bounds 1..2).
        assert!((30..70).contains(&elastic), "{elastic}");
        let none = GenerateOptions {
            elastic_share: 0.0,
            ..opts(3)
        };
        let none = Trace::parse(&generate(&none).unwrap(), "none", false).unwrap();
        assert!(
            none.jobs
                .iter()
                .all(|j| j.job.min_workers == j.job.max_workers)
        );
    }

    #[test]
    fn the_helios_mix_has_wider_jobs_and_shorter_run_times() {
        let parse = |mix| {
            let o = GenerateOptions {
                jobs: 4000,
                mix,
                ..opts(2)
            };
            Trace::parse(&generate(&o).unwrap(), "gen", false).unwrap()
        };
        let (philly, helios) = (parse(Mix::Philly), parse(Mix::Helios));
        let wide = |t: &Trace| t.jobs.iter().filter(|j| j.job.workers >= 8).count() as f64 / 4000.0;
        let median = |t: &Trace| {
            let mut d: Vec<f64> = t.jobs.iter().map(|j| j.work_ms).collect();
            d.sort_by(f64::total_cmp);
            d[d.len() / 2]
        };
        assert!((wide(&helios) - 0.10).abs() < 0.02, "{}", wide(&helios));
        assert!(helios.jobs.iter().any(|j| j.job.workers == 16));
        assert!(median(&helios) < median(&philly) / 3.0);
        // Both at the offered load asked for.
        for t in [&philly, &helios] {
            let load = offered_load(t, 32.0);
            assert!((0.7..1.4).contains(&load), "{}: {load}", t.origin);
        }
        assert!(generate(&GenerateOptions { mix: Mix::Helios, ..opts(2) }).unwrap().starts_with(
            "# Generated by: dragon trace generate --seed 2 --nodes 4 --gpus-per-node 8 --jobs 200 --load 1 --mix helios\n"
        ));
    }

    #[test]
    fn bad_options_name_the_flag() {
        let e = generate(&GenerateOptions {
            nodes: 0,
            ..opts(1)
        })
        .unwrap_err();
        assert_eq!(e.to_string(), "--nodes must be between 1 and 100000, got 0");
        let e = generate(&GenerateOptions {
            load: -1.0,
            ..opts(1)
        })
        .unwrap_err();
        assert_eq!(e.flag, "load");
    }
}
