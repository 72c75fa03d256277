//! `dragon sweep`: policies over generated traces across offered loads
//! and seeds.

use std::io::IsTerminal;

use anyhow::{Result, bail};
use clap::Args;

use super::compare::labeled_policies;
use super::simulate::RunArgs;
use crate::sweep::{self, SweepOptions};
use dragon_sim::{GenerateOptions, Mix, RackConstraint, Racks};

#[derive(Debug, Args)]
#[command(
    after_help = "Examples:\n  dragon sweep\n  dragon sweep --loads 0.5,0.9,1.2 --seeds 1,2,3,4,5 baseline dragon 'dragon={\"scale_up\": false}'\n  dragon sweep --elastic-share 0.5 --json"
)]
pub struct SweepOpts {
    /// Policies: a bundled name (`dragon`, `baseline`, `dragon-plus`,
    /// `tiresias`, `pollux`, `backfill`, `fair-share`) or a `.wasm` file, each optionally
    /// `=SETTINGS`. JCT ratios are against the first.
    #[arg(default_values_t = ["baseline".to_string(), "dragon".to_string()])]
    pub policies: Vec<String>,
    /// Offered loads, comma-separated.
    #[arg(long, value_delimiter = ',', default_values_t = [0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.1, 1.2])]
    pub loads: Vec<f64>,
    /// Seeds of the generated traces, comma-separated: one trace per load
    /// and seed.
    #[arg(long, value_delimiter = ',', default_values_t = [1, 2, 3])]
    pub seeds: Vec<u64>,
    /// Nodes of each generated cluster.
    #[arg(long, default_value_t = 32)]
    pub nodes: u32,
    /// GPUs per node.
    #[arg(long, default_value_t = 8)]
    pub gpus_per_node: u32,
    /// Jobs per trace.
    #[arg(long, default_value_t = 1000)]
    pub jobs: u32,
    /// Share of the jobs that are elastic, in [0, 1].
    #[arg(long, default_value_t = 1.0)]
    pub elastic_share: f64,
    /// Job sizes and run times: `philly`, `helios`, `wide` or `heavy` (see `trace generate`).
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
    /// Print the cells as JSON instead of the table.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub run: RunArgs,
}

impl SweepOpts {
    pub fn run(self) -> Result<()> {
        if self.policies.is_empty() {
            bail!("name at least one policy");
        }
        let loaded = labeled_policies(&self.policies, &self.run)?;
        let policies: Vec<(String, &dyn sweep::Instances)> = loaded
            .iter()
            .map(|(l, p)| (l.clone(), p as &dyn sweep::Instances))
            .collect();
        let options = SweepOptions {
            loads: self.loads.clone(),
            seeds: self.seeds.clone(),
            generate: GenerateOptions {
                seed: 0,
                nodes: self.nodes,
                gpus_per_node: self.gpus_per_node,
                jobs: self.jobs,
                load: 1.0,
                elastic_share: self.elastic_share,
                mix: self.mix,
                racks: Racks {
                    count: self.racks,
                    constraint: self.topology,
                },
                tiers: self.tiers,
                teams: self.teams,
            },
            sim: self.run.sim_options(),
        };
        let terminal = std::io::stderr().is_terminal();
        let mut progress = |done: usize, total: usize| {
            if terminal {
                eprint!("\r{done}/{total} traces");
                if done == total {
                    eprintln!();
                }
            }
        };
        let (cells, bounds) = sweep::sweep(&options, &policies, &mut progress)?;
        if self.json {
            let out = serde_json::json!({ "cells": cells, "bounds": bounds });
            println!("{}", serde_json::to_string_pretty(&out)?);
        } else {
            println!(
                "{} traces per load ({} jobs, {} mix, {} nodes x {} GPUs, elastic share {}), seeds {:?}; each row the mean over them",
                self.seeds.len(),
                self.jobs,
                self.mix.name(),
                self.nodes,
                self.gpus_per_node,
                self.elastic_share,
                self.seeds
            );
            print!("{}", sweep::table(&cells, &bounds));
        }
        Ok(())
    }
}
