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
//!   `heavy`, Philly's sizes with heavy-tailed run times: a bounded Pareto
//!   distribution of shape 1.1 from 3 minutes to 10,000 (median 5.6
//!   minutes, mean 18.3, one job in 600 over 1,000 minutes), where the few
//!   longest jobs hold much of the GPU time, as in the Philly and Helios
//!   traces' tails. `wide`: every job spans nodes (for racks).
//! - Priority tiers (`tiers`): 10 % of the jobs at priority 100, 30 % at
//!   10, the rest at 0, as production, research and best-effort queues
//!   are often set up (our assumption), drawn from a stream of their own.
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
    /// Topology-heavy: every job spans nodes (4 to 64 workers), Helios'
    /// run times; for racks and topology constraints.
    Wide,
    /// Philly's sizes, heavy-tailed run times (bounded Pareto, shape 1.1,
    /// 3 to 10,000 minutes).
    Heavy,
}

/// The label the generator puts racks in.
pub const RACK_LABEL: &str = "dragon.dev/rack";
/// The fraction of throughput a job loses when its tasks span racks (its
/// traffic crosses the oversubscribed spine), against
/// `SpeedModel::DEFAULT_CROSS_NODE_PENALTY` within a rack: an assumption,
/// see `docs/simulator.md`.
pub const RACK_PENALTY: f64 = 0.35;

/// The cluster in racks, and what jobs that span nodes ask of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Racks {
    /// Racks the nodes are split into (0: no racks, no topology level).
    pub count: u32,
    /// The constraint each job spanning nodes puts on the rack level:
    /// required where its largest size fits a rack (preferred where not),
    /// or preferred; none leaves placement to the policy alone.
    pub constraint: RackConstraint,
}

/// What jobs that span nodes ask of the rack level.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum RackConstraint {
    #[default]
    None,
    Required,
    Preferred,
}

impl RackConstraint {
    fn name(self) -> &'static str {
        match self {
            RackConstraint::None => "none",
            RackConstraint::Required => "required",
            RackConstraint::Preferred => "preferred",
        }
    }
}

/// The shape of one [`Mix`].
struct Shape {
    /// Worker-count distribution: `(workers, cumulative probability)`.
    sizes: &'static [(u32, f64)],
    durations: Durations,
}

/// How run times are drawn.
enum Durations {
    /// "Short" with probability `short_p`, else long; each `60 × 10^U(a, b)`
    /// seconds over its log10-minute range.
    LogUniform {
        short_p: f64,
        short_log10_min: (f64, f64),
        long_log10_min: (f64, f64),
    },
    /// Bounded Pareto of shape `alpha` from `min` to `max` minutes.
    Pareto { alpha: f64, min: f64, max: f64 },
}

impl Durations {
    /// One run time, seconds.
    fn draw_s(&self, rng: &mut SplitMix64) -> f64 {
        match *self {
            Durations::LogUniform {
                short_p,
                short_log10_min,
                long_log10_min,
            } => {
                let range = if rng.uniform() < short_p {
                    short_log10_min
                } else {
                    long_log10_min
                };
                60.0 * 10f64.powf(rng.range(range.0, range.1))
            }
            Durations::Pareto { alpha, min, max } => {
                // Inverse of the CDF (1 - (min/x)^a) / (1 - (min/max)^a).
                let tail = (min / max).powf(alpha);
                60.0 * min / (1.0 - rng.uniform() * (1.0 - tail)).powf(1.0 / alpha)
            }
        }
    }

    /// The mean run time, seconds.
    fn mean_s(&self) -> f64 {
        match *self {
            Durations::LogUniform {
                short_p,
                short_log10_min,
                long_log10_min,
            } => {
                short_p * mean_log_uniform_minutes(short_log10_min)
                    + (1.0 - short_p) * mean_log_uniform_minutes(long_log10_min)
            }
            Durations::Pareto { alpha, min, max } => {
                let tail = (min / max).powf(alpha);
                let minutes = min.powf(alpha) / (1.0 - tail) * alpha / (alpha - 1.0)
                    * (min.powf(1.0 - alpha) - max.powf(1.0 - alpha));
                60.0 * minutes
            }
        }
    }
}

const PHILLY_SIZES: &[(u32, f64)] = &[(1, 0.70), (2, 0.80), (4, 0.95), (8, 1.0)];

/// Helios' run times: mostly minutes to hours.
const HELIOS_DURATIONS: Durations = Durations::LogUniform {
    short_p: 0.85,
    short_log10_min: (0.5, 2.5),
    long_log10_min: (2.5, 4.0),
};

const PHILLY: Shape = Shape {
    sizes: PHILLY_SIZES,
    durations: Durations::LogUniform {
        short_p: 0.8,
        short_log10_min: (1.5, 3.0),
        long_log10_min: (3.0, 4.0),
    },
};

const WIDE: Shape = Shape {
    sizes: &[(4, 0.30), (8, 0.60), (16, 0.85), (32, 0.97), (64, 1.0)],
    durations: HELIOS_DURATIONS,
};

const HELIOS: Shape = Shape {
    sizes: &[(1, 0.75), (2, 0.83), (4, 0.90), (8, 0.97), (16, 1.0)],
    durations: HELIOS_DURATIONS,
};

const HEAVY: Shape = Shape {
    sizes: PHILLY_SIZES,
    durations: Durations::Pareto {
        alpha: 1.1,
        min: 3.0,
        max: 10_000.0,
    },
};

/// Priority tiers: `(priority, cumulative probability)`.
const TIERS: &[(i32, f64)] = &[(100, 0.10), (10, 0.40), (0, 1.0)];

impl Mix {
    fn shape(self) -> &'static Shape {
        match self {
            Mix::Philly => &PHILLY,
            Mix::Helios => &HELIOS,
            Mix::Wide => &WIDE,
            Mix::Heavy => &HEAVY,
        }
    }

    /// The name the command line takes.
    pub fn name(self) -> &'static str {
        match self {
            Mix::Philly => "philly",
            Mix::Helios => "helios",
            Mix::Wide => "wide",
            Mix::Heavy => "heavy",
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
    /// Racks, and the constraint jobs put on them.
    pub racks: Racks,
    /// Jobs in three priority tiers (else all at priority 0).
    pub tiers: bool,
}

/// The seed of the elastic draws is the trace's, mixed with this.
const ELASTIC_STREAM: u64 = 0x0E1A_571C_5EED_0001;
/// And that of the priority tiers, with this.
const TIERS_STREAM: u64 = 0x7E25_5EED_0000_0002;

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
    mean_workers * s.durations.mean_s()
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
        if self.racks.count > 0 {
            c.push_str(&format!(" --racks {}", self.racks.count));
        }
        if self.racks.constraint != RackConstraint::None {
            c.push_str(&format!(" --topology {}", self.racks.constraint.name()));
        }
        if self.tiers {
            c.push_str(" --tiers");
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
        if self.racks.count > self.nodes {
            return refuse("racks", "at most the number of nodes", &self.racks.count);
        }
        if self.racks.count == 0 && self.racks.constraint != RackConstraint::None {
            return refuse(
                "topology",
                "none without --racks",
                &self.racks.constraint.name(),
            );
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
    let mut tiers = SplitMix64::new(o.seed ^ TIERS_STREAM);
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
            Mix::Wide => "wide (topology-heavy)",
            Mix::Heavy => "heavy-tailed",
        },
        o.seed
    );
    if o.racks.count > 0 {
        let _ = writeln!(
            out,
            "model:\n  topology:\n    - {{key: {RACK_LABEL}, penalty: {RACK_PENALTY}}}"
        );
    }
    let _ = writeln!(out, "cluster:\n  nodes:");
    // The smallest rack's GPUs: what a required constraint can hold.
    let mut rack_gpus = max_gpus;
    if o.racks.count == 0 {
        let _ = writeln!(
            out,
            "    - {{name_prefix: node, count: {}, cpu: {node_cpu}, memory_gib: {node_mem}, gpus: {}}}",
            o.nodes, o.gpus_per_node
        );
    } else {
        for r in 0..o.racks.count {
            // The first `nodes % racks` racks take one node more.
            let count = o.nodes / o.racks.count + u32::from(r < o.nodes % o.racks.count);
            rack_gpus = rack_gpus.min(count * o.gpus_per_node);
            let _ = writeln!(
                out,
                "    - {{name_prefix: rack{r}-node, count: {count}, cpu: {node_cpu}, memory_gib: {node_mem}, gpus: {}, labels: {{{RACK_LABEL}: rack-{r}}}}}",
                o.gpus_per_node
            );
        }
    }
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
        let duration = shape.durations.draw_s(&mut rng).round().max(1.0);
        let (min, max) = match elastic.uniform() < o.elastic_share {
            true => (
                workers.div_ceil(2),
                (workers * 2).min(max_gpus).max(workers),
            ),
            false => (workers, workers),
        };
        // Jobs that may span nodes ask for a rack (required only where
        // their largest size fits one).
        // A rack holds the job if its GPUs hold the workers and the
        // parameter server fits beside them (a 1-GPU node has no room for
        // both: 8 cores, 6 for a worker, 4 for the server).
        let fits_rack = max <= rack_gpus && (o.gpus_per_node >= 2 || max < rack_gpus);
        let topology = match o.racks.constraint {
            _ if max <= o.gpus_per_node => String::new(),
            RackConstraint::None => String::new(),
            RackConstraint::Required if fits_rack => {
                format!(", topology: {{required: {RACK_LABEL}}}")
            }
            RackConstraint::Required | RackConstraint::Preferred => {
                format!(", topology: {{preferred: {RACK_LABEL}}}")
            }
        };
        let priority = match o.tiers {
            true => {
                let u = tiers.uniform();
                let tier = TIERS.iter().find(|&&(_, c)| u < c);
                format!(", priority: {}", tier.map_or(0, |&(p, _)| p))
            }
            false => String::new(),
        };
        let _ = writeln!(
            out,
            "  - {{name: job-{i:05}, arrival_s: {}, duration_s: {duration}, ps: {{count: 1, cpu: 4, memory_gib: 16}}, workers: {{count: {workers}, min: {min}, max: {max}, cpu: 6, memory_gib: 32, gpus: 1}}{topology}{priority}}}",
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

    #[test]
    fn racks_split_the_nodes_and_jobs_that_span_nodes_ask_for_one() {
        let o = GenerateOptions {
            nodes: 10,
            gpus_per_node: 4,
            jobs: 200,
            mix: Mix::Wide,
            racks: Racks {
                count: 3,
                constraint: RackConstraint::Required,
            },
            ..opts(5)
        };
        let text = generate(&o).unwrap();
        assert!(
            text.starts_with(&format!("# Generated by: {}", o.command())),
            "{text}"
        );
        assert!(
            o.command()
                .ends_with("--mix wide --racks 3 --topology required")
        );
        let t = Trace::parse(&text, "gen.yaml", false).unwrap();
        assert_eq!(t.topology, [(RACK_LABEL.to_string(), RACK_PENALTY)]);
        let per_rack = |r: &str| {
            t.nodes
                .iter()
                .filter(|n| n.labels.get(RACK_LABEL).map(String::as_str) == Some(r))
                .count()
        };
        assert_eq!(
            (per_rack("rack-0"), per_rack("rack-1"), per_rack("rack-2")),
            (4, 3, 3)
        );
        // The smallest rack has 12 GPUs: jobs that may grow past it only
        // prefer a rack; those that stay on one node ask for nothing.
        for j in &t.jobs {
            let c = j.job.topology.as_ref().map(|c| c.mode);
            let expected = match j.job.max_workers {
                w if w <= 4 => None,
                w if w <= 12 => Some(crate::framework::TopologyMode::Required),
                _ => Some(crate::framework::TopologyMode::Preferred),
            };
            assert_eq!(c, expected, "{}", j.name);
        }
        let without = generate(&GenerateOptions {
            racks: Racks {
                count: 3,
                constraint: RackConstraint::None,
            },
            ..o.clone()
        })
        .unwrap();
        let t2 = Trace::parse(&without, "gen.yaml", false).unwrap();
        assert!(t2.jobs.iter().all(|j| j.job.topology.is_none()));
        assert_eq!(
            t2.jobs.iter().map(|j| j.work_ms).collect::<Vec<_>>(),
            t.jobs.iter().map(|j| j.work_ms).collect::<Vec<_>>(),
            "the same jobs with and without the constraint"
        );
        let e = generate(&GenerateOptions {
            racks: Racks {
                count: 0,
                constraint: RackConstraint::Required,
            },
            ..o
        })
        .unwrap_err();
        assert_eq!(e.flag, "topology");
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
            racks: Racks::default(),
            tiers: false,
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
    fn the_heavy_mix_has_pareto_run_times_with_a_long_tail() {
        let o = GenerateOptions {
            jobs: 20_000,
            mix: Mix::Heavy,
            ..opts(4)
        };
        let t = Trace::parse(&generate(&o).unwrap(), "gen", false).unwrap();
        let mut minutes: Vec<f64> = t.jobs.iter().map(|j| j.work_ms / 60_000.0).collect();
        minutes.sort_by(f64::total_cmp);
        let n = minutes.len() as f64;
        let median = minutes[minutes.len() / 2];
        assert!((5.0..6.3).contains(&median), "median {median} min");
        assert!(minutes[0] >= 2.99 && minutes[minutes.len() - 1] <= 10_000.01);
        // P(X > 1,000 min) = ((3/1000)^1.1 - (3/10^4)^1.1) / (1 - (3/10^4)^1.1).
        let over = minutes.iter().filter(|&&m| m > 1_000.0).count() as f64 / n;
        assert!(
            (0.0008..0.003).contains(&over),
            "share over 1,000 min {over}"
        );
        // The longest 1 % of jobs hold more than a third of the run time.
        let total: f64 = minutes.iter().sum();
        let top: f64 = minutes[minutes.len() * 99 / 100..].iter().sum();
        assert!(top / total > 0.33, "{}", top / total);
        // The mean the arrival rate is computed from matches the draws.
        let mean = total / n;
        let expected = HEAVY.durations.mean_s() / 60.0;
        assert!((expected - 18.3).abs() < 0.1, "{expected}");
        assert!(
            (mean / expected - 1.0).abs() < 0.2,
            "{mean} against {expected}"
        );
        assert!(o.command().ends_with(" --mix heavy"));
    }

    #[test]
    fn priority_tiers_keep_the_rest_of_a_seeds_trace() {
        let o = GenerateOptions {
            jobs: 4000,
            ..opts(6)
        };
        let tiered = GenerateOptions {
            tiers: true,
            ..o.clone()
        };
        assert!(tiered.command().ends_with(" --tiers"));
        let plain = Trace::parse(&generate(&o).unwrap(), "plain", false).unwrap();
        let t = Trace::parse(&generate(&tiered).unwrap(), "tiered", false).unwrap();
        let share = |p: i32| t.jobs.iter().filter(|j| j.job.priority == p).count() as f64 / 4000.0;
        assert!((share(100) - 0.10).abs() < 0.02, "{}", share(100));
        assert!((share(10) - 0.30).abs() < 0.03, "{}", share(10));
        assert!((share(0) - 0.60).abs() < 0.03, "{}", share(0));
        for (a, b) in plain.jobs.iter().zip(&t.jobs) {
            assert_eq!(a.job.priority, 0);
            assert_eq!(
                (a.arrival_ms, a.work_ms, a.job.workers, a.job.min_workers),
                (b.arrival_ms, b.work_ms, b.job.workers, b.job.min_workers)
            );
        }
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
