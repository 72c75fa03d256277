//! `dragon trace`: generate, check and show simulator traces.

use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use clap::{Args, Subcommand};

use crate::report::human;
use dragon_sim::{
    BUNDLED, GenerateOptions, Mix, RackConstraint, Racks, Trace, generate, workloads,
};

#[derive(Debug, Subcommand)]
pub enum TraceCommand {
    /// Generate a synthetic trace: Poisson arrivals, job sizes and durations
    /// from the Philly-derived distributions (see docs/simulator.md).
    #[command(
        after_help = "Example (the bundled `large` trace):\n  dragon trace generate --seed 1 --nodes 64 --gpus-per-node 8 --jobs 300 --load 0.9 --out large.yaml"
    )]
    Generate(GenerateOpts),
    /// Validate a trace and print what it holds.
    #[command(
        after_help = "Examples:\n  dragon trace check my-trace.yaml\n  dragon trace check paper"
    )]
    Check {
        /// A trace file, or a bundled trace name.
        trace: String,
    },
    /// Convert a published workload from its artifact's checkout into
    /// traces (not bundled: see docs/simulator.md).
    #[command(
        after_help = "Example (Sia's Saturn workloads, from a checkout of siasosp23/artifacts):\n  dragon trace import sia artifacts/sia-simulator --out sia\n  dragon compare --trace sia/saturn-1-adaptive.yaml baseline dragon-plus pollux"
    )]
    Import {
        /// Which artifact: `sia` (Sia, SOSP'23: the Saturn workloads on its
        /// three GPU types).
        #[arg(value_enum)]
        artifact: Artifact,
        /// The artifact's directory (for `sia`: its `sia-simulator`).
        from: PathBuf,
        /// Where to write the traces and their measurements.
        #[arg(long)]
        out: PathBuf,
    },
    /// Print a bundled trace (`paper`, `large`, `deadlock`; a Pollux workload's CSV), e.g. to start your own from it.
    Show {
        /// The bundled trace's name.
        name: String,
    },
}

/// A published artifact `dragon trace import` reads.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum Artifact {
    Sia,
}

#[derive(Debug, Args)]
pub struct GenerateOpts {
    /// Seed of the random numbers: the same seed and options give the same trace.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Nodes in the cluster.
    #[arg(long, default_value_t = 64)]
    pub nodes: u32,
    /// GPUs per node (each node also gets 8 cores and 64 GiB per GPU).
    #[arg(long, default_value_t = 8)]
    pub gpus_per_node: u32,
    /// Jobs to generate.
    #[arg(long, default_value_t = 300)]
    pub jobs: u32,
    /// Offered load: GPU demand at the requested sizes over capacity (1 = equal).
    #[arg(long, default_value_t = 0.9)]
    pub load: f64,
    /// Share of the jobs that are elastic (the others run at exactly their
    /// requested size), in [0, 1].
    #[arg(long, default_value_t = 1.0)]
    pub elastic_share: f64,
    /// Job sizes and run times: `philly` (Philly-derived), `helios`
    /// (Helios-like: more wide jobs, shorter run times), `wide` (every job
    /// spans nodes) or `heavy` (Philly's sizes, heavy-tailed run times).
    #[arg(long, value_enum, default_value_t = Mix::Philly)]
    pub mix: Mix,
    /// Split the nodes into this many racks (label `dragon.dev/rack`; a job
    /// whose tasks span racks loses more throughput than one within a
    /// rack); 0: none.
    #[arg(long, default_value_t = 0)]
    pub racks: u32,
    /// What jobs that span nodes ask of the racks: `none`, `required` (one
    /// rack, where their largest size fits one) or `preferred`.
    #[arg(long, value_enum, default_value_t = RackConstraint::None)]
    pub topology: RackConstraint,
    /// Put jobs in three priority tiers: 10 % at 100, 30 % at 10, the rest
    /// at 0.
    #[arg(long)]
    pub tiers: bool,
    /// Put jobs in this many queues (teams), each guaranteed an equal share
    /// of the GPUs, arriving in bursts: every four hours one team sends
    /// 70 % of the jobs (0: no queues; at most 64).
    #[arg(long, default_value_t = 0)]
    pub teams: u32,
    /// Write the trace here instead of standard output.
    #[arg(long)]
    pub out: Option<PathBuf>,
}

impl TraceCommand {
    pub fn run(self) -> Result<()> {
        match self {
            TraceCommand::Generate(o) => {
                let options = GenerateOptions {
                    seed: o.seed,
                    nodes: o.nodes,
                    gpus_per_node: o.gpus_per_node,
                    jobs: o.jobs,
                    load: o.load,
                    elastic_share: o.elastic_share,
                    mix: o.mix,
                    racks: Racks {
                        count: o.racks,
                        constraint: o.topology,
                    },
                    tiers: o.tiers,
                    teams: o.teams,
                };
                let text = generate(&options)?;
                match &o.out {
                    Some(path) => {
                        std::fs::write(path, &text)
                            .with_context(|| format!("cannot write {}", path.display()))?;
                        eprintln!("wrote {} ({} jobs)", path.display(), o.jobs);
                    }
                    None => print!("{text}"),
                }
                Ok(())
            }
            TraceCommand::Check { trace } => {
                let t = Trace::load(&trace)?;
                let first = t.jobs.first().map_or(0, |j| j.arrival_ms);
                let last = t.jobs.last().map_or(0, |j| j.arrival_ms);
                let demand: f64 = t
                    .jobs
                    .iter()
                    .map(|j| f64::from(j.job.workers) * j.work_ms / 1e3)
                    .sum();
                let span = (last - first) as f64 / 1e3;
                println!("{}: ok", t.origin);
                if !t.description.is_empty() {
                    println!("  {}", t.description);
                }
                println!("  nodes        {} ({} GPUs)", t.nodes.len(), t.total_gpus());
                let mut by_type: std::collections::BTreeMap<&str, u32> = Default::default();
                for n in &t.nodes {
                    if let Some(product) = n.labels.get(dragon_framework::GPU_PRODUCT) {
                        *by_type.entry(product).or_default() += n.allocatable.gpus;
                    }
                }
                if !by_type.is_empty() {
                    let types: Vec<String> =
                        by_type.iter().map(|(t, g)| format!("{t} ({g})")).collect();
                    println!("  GPU types    {}", types.join(", "));
                }
                println!("  jobs         {}", t.jobs.len());
                println!(
                    "  arrivals     {} to {}",
                    human(first as f64 / 1e3),
                    human(last as f64 / 1e3)
                );
                println!(
                    "  work         {:.0} GPU-hours at the requested sizes",
                    demand / 3600.0
                );
                if span > 0.0 && t.total_gpus() > 0 {
                    println!(
                        "  offered load {:.2} (demand over capacity during the arrivals)",
                        demand / (span * t.total_gpus() as f64)
                    );
                }
                println!(
                    "  scale step   every {}",
                    human(t.scale_interval_ms as f64 / 1e3)
                );
                Ok(())
            }
            TraceCommand::Import {
                artifact: Artifact::Sia,
                from,
                out,
            } => {
                let imported = workloads::sia::import(&from, &out)?;
                for t in &imported.traces {
                    println!("{}", t.display());
                }
                eprintln!(
                    "wrote {} traces and their measurements ({})",
                    imported.traces.len(),
                    imported.models.display()
                );
                Ok(())
            }
            TraceCommand::Show { name } => match BUNDLED
                .iter()
                .chain(workloads::POLLUX)
                .find(|(n, _)| *n == name)
            {
                Some((_, text)) => {
                    print!("{text}");
                    Ok(())
                }
                None => {
                    let names: Vec<&str> = BUNDLED.iter().map(|(n, _)| *n).collect();
                    bail!(
                        "no bundled trace `{name}` (bundled: {}, pollux-w1 … pollux-w8, pollux-w1-2x … pollux-w8-2x; Philly's jobs, `philly` and `philly-week`, are in host/sim/traces/pollux/philly)",
                        names.join(", ")
                    )
                }
            },
        }
    }
}
