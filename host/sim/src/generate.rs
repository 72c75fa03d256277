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
//! - Teams (`teams`): that many queues, each guaranteed an equal share of
//!   the GPUs, whose jobs come in bursts: time is cut into periods of four
//!   hours, in each one team (drawn per period) sends 70 % of the jobs and
//!   the others share the rest evenly (our assumption), from streams of
//!   their own.
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
    /// Queues the jobs belong to, in bursts (0: none).
    pub teams: u32,
}

/// The seed of the elastic draws is the trace's, mixed with this.
const ELASTIC_STREAM: u64 = 0x0E1A_571C_5EED_0001;
/// And that of the priority tiers, with this.
const TIERS_STREAM: u64 = 0x7E25_5EED_0000_0002;
/// And that of the teams, with this (the bursting team of a period mixes
/// in the period too).
const TEAMS_STREAM: u64 = 0x7EA5_5EED_0000_0003;
/// The most teams.
const MAX_TEAMS: u32 = 64;
/// How long one team's burst lasts, s.
const BURST_PERIOD_S: f64 = 4.0 * 3600.0;
/// The share of a period's jobs its bursting team sends.
const BURST_SHARE: f64 = 0.7;

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
        if self.teams > 0 {
            c.push_str(&format!(" --teams {}", self.teams));
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
        if self.teams > MAX_TEAMS {
            return refuse("teams", "at most 64", &self.teams);
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
    if let Some(share) = max_gpus.checked_div(o.teams) {
        let _ = writeln!(out, "queues:");
        for k in 0..o.teams {
            let _ = writeln!(out, "  - {{name: team-{k}, guaranteed_gpus: {share}}}");
        }
    }
    let _ = writeln!(out, "jobs:");
    let mut teams = SplitMix64::new(o.seed ^ TEAMS_STREAM);
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
        let queue = match o.teams {
            0 => String::new(),
            n => format!(", queue: team-{}", team(o.seed, n, t, &mut teams)),
        };
        let _ = writeln!(
            out,
            "  - {{name: job-{i:05}, arrival_s: {}, duration_s: {duration}, ps: {{count: 1, cpu: 4, memory_gib: 16}}, workers: {{count: {workers}, min: {min}, max: {max}, cpu: 6, memory_gib: 32, gpus: 1}}{topology}{priority}{queue}}}",
            t.round()
        );
    }
    Ok(out)
}

/// The team of a job arriving at `t` s: the period's bursting team with
/// probability [`BURST_SHARE`], else one of the others.
fn team(seed: u64, teams: u32, t: f64, rng: &mut SplitMix64) -> u32 {
    let period = (t / BURST_PERIOD_S) as u64;
    let bursting =
        (SplitMix64::new(seed ^ TEAMS_STREAM ^ period).next_u64() % u64::from(teams)) as u32;
    let u = rng.uniform();
    if teams == 1 || u < BURST_SHARE {
        return bursting;
    }
    // Evenly over the others.
    let other = ((u - BURST_SHARE) / (1.0 - BURST_SHARE) * f64::from(teams - 1)) as u32;
    let other = other.min(teams - 2);
    if other >= bursting { other + 1 } else { other }
}

#[cfg(test)]
mod tests;
