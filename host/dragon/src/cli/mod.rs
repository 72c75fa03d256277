//! The `dragon` command: a policy author's local harness.

mod author;
mod compare;
mod gate;
mod load;
mod policy;
mod registry;
mod replay;
mod simulate;
mod sweep;
mod trace;

use anyhow::Result;
use clap::{Parser, Subcommand};

/// Dragon: a Kubernetes scheduler for distributed deep-learning training whose
/// policy is a hot-swappable WebAssembly component.
#[derive(Debug, Parser)]
#[command(name = "dragon", version, about, propagate_version = true)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Check a policy component or run one scheduling round with it.
    #[command(subcommand)]
    Policy(policy::PolicyCommand),
    /// Simulate a policy over a trace of jobs: JCT, waiting, utilization, scaling.
    Simulate(simulate::SimulateOpts),
    /// Compare policies over one trace (default: baseline vs dragon on the bundled trace).
    Compare(compare::CompareOpts),
    /// Compare policies over generated traces across offered loads and seeds.
    Sweep(sweep::SweepOpts),
    /// Run a recording's rounds again, through its policy or another, and
    /// show where the decisions differ.
    Replay(replay::ReplayOpts),
    /// Generate, check or show simulator traces.
    #[command(subcommand)]
    Trace(trace::TraceCommand),
}

impl Cli {
    /// Run the chosen subcommand.
    ///
    /// # Errors
    /// Whatever the subcommand reports; `main` prints the cause chain.
    pub fn run(self) -> Result<()> {
        match self.command {
            Command::Policy(cmd) => cmd.run(),
            Command::Simulate(o) => o.run(),
            Command::Compare(o) => o.run(),
            Command::Sweep(o) => o.run(),
            Command::Replay(o) => o.run(),
            Command::Trace(cmd) => cmd.run(),
        }
    }
}

pub use dragon_framework::logging::init as init_logging;

/// `dragon policy run` saw hook calls fail: the command's output is
/// complete, and the process exits with [`HookCallsFailed::EXIT_CODE`].
#[derive(Debug, thiserror::Error)]
#[error("{0} hook call(s) failed (see the decisions above; --allow-failures exits 0)")]
pub struct HookCallsFailed(pub usize);

impl HookCallsFailed {
    /// Distinct from 1 (the command itself failed: bad input, a policy that
    /// does not load).
    pub const EXIT_CODE: u8 = 3;
}

/// Settings given as inline JSON (starting with `{`) or a path to a JSON file.
pub(crate) fn read_settings(arg: Option<&str>) -> Result<String> {
    use anyhow::Context;
    match arg {
        None => Ok(String::new()),
        Some(s) if s.trim_start().starts_with('{') => Ok(s.to_string()),
        Some(path) => std::fs::read_to_string(path)
            .with_context(|| format!("cannot read settings file {path}")),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_command_line_is_well_formed() {
        use clap::CommandFactory;
        super::Cli::command().debug_assert();
    }
}
