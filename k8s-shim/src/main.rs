//! `dragon-scheduler`: a second Kubernetes scheduler whose policy is a
//! hot-swappable WebAssembly component. `main` only wires things up.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;

/// Schedule pods that set `spec.schedulerName` to ours, with a Dragon policy.
#[derive(Debug, Parser)]
#[command(name = "dragon-scheduler", version)]
struct Args {
    /// The YAML configuration file (see k8s-shim/deploy/).
    #[arg(long)]
    config: PathBuf,
    /// A kubeconfig; without it, `$KUBECONFIG`, `~/.kube/config` or the
    /// in-cluster service account.
    #[arg(long)]
    kubeconfig: Option<PathBuf>,
}

fn main() -> ExitCode {
    dragon_framework::logging::init("info");
    let args = Args::parse();
    let result = dragon_scheduler::config::Config::load(&args.config).and_then(|config| {
        tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()?
            .block_on(dragon_scheduler::run::run(config, args.kubeconfig))
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
