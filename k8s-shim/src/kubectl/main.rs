//! `kubectl dragon`: ask dragon-scheduler why a pod waits and when it may
//! start (`why`), what runs where (`top`), and which policy serves
//! (`policy`). It talks to the scheduler's HTTP endpoint through the API
//! server's service proxy with the user's own kubeconfig (or straight to
//! `--endpoint`), and the scheduler answers only what that user may read.
//! Every failure is one line on stderr and a non-zero exit.

mod ask;
mod show;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

use ask::{Asker, Target};

#[derive(Parser)]
#[command(
    name = "kubectl-dragon",
    about = "Ask dragon-scheduler why a pod waits, what runs where, and which policy serves"
)]
struct Cli {
    /// The kubeconfig to use (default: $KUBECONFIG or ~/.kube/config).
    #[arg(long, global = true)]
    kubeconfig: Option<std::path::PathBuf>,
    /// The kubeconfig context to use.
    #[arg(long, global = true)]
    context: Option<String>,
    /// The namespace dragon-scheduler's Service is in.
    #[arg(long, global = true, default_value = "dragon-system")]
    scheduler_namespace: String,
    /// dragon-scheduler's Service.
    #[arg(long, global = true, default_value = "dragon-scheduler")]
    service: String,
    /// The Service's port (name or number) serving `/dragon/v1`.
    #[arg(long, global = true, default_value = "metrics")]
    port: String,
    /// Ask this URL directly instead of through the API server's proxy
    /// (e.g. after `kubectl port-forward`).
    #[arg(long, global = true)]
    endpoint: Option<String>,
    /// `text` or `json`.
    #[arg(long, short = 'o', global = true, default_value = "text")]
    output: Output,
    #[command(subcommand)]
    command: Command,
}

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Output {
    Text,
    Json,
}

#[derive(Subcommand)]
enum Command {
    /// Why a pod waits (each round's reason, what would unblock it, an
    /// estimated start), or where it runs.
    Why {
        /// `NAMESPACE/POD`, or `POD` with `--namespace`.
        pod: String,
        #[arg(long, short = 'n')]
        namespace: Option<String>,
    },
    /// Gangs, queues and GPU use per node.
    Top {
        /// Only this namespace's gangs (default: all, which needs the
        /// right to list pods in every namespace).
        #[arg(long, short = 'n')]
        namespace: Option<String>,
    },
    /// The policy serving, the shadow, and the last reloads.
    Policy,
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("kubectl dragon: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn run(cli: Cli) -> Result<(), String> {
    let target = match &cli.endpoint {
        Some(url) => Target::Direct(url.clone()),
        None => Target::Proxy {
            namespace: cli.scheduler_namespace.clone(),
            service: cli.service.clone(),
            port: cli.port.clone(),
        },
    };
    let asker = Asker::new(cli.kubeconfig.as_deref(), cli.context.as_deref(), target).await?;
    let json = cli.output == Output::Json;
    match cli.command {
        Command::Why { pod, namespace } => {
            let (ns, name) = match (pod.split_once('/'), namespace) {
                (Some((ns, name)), _) => (ns.to_string(), name.to_string()),
                (None, Some(ns)) => (ns, pod.clone()),
                (None, None) => (asker.default_namespace().to_string(), pod.clone()),
            };
            let why = asker.why(&ns, &name).await?;
            match json {
                true => print(&why),
                false => print!("{}", show::why(&why)),
            }
        }
        Command::Top { namespace } => {
            let top = asker.top(namespace.as_deref()).await?;
            match json {
                true => print(&top),
                false => print!("{}", show::top(&top)),
            }
        }
        Command::Policy => {
            let state = asker.policy().await?;
            match json {
                true => print(&state),
                false => print!("{}", show::policy(&state)),
            }
        }
    }
    Ok(())
}

fn print<T: serde::Serialize>(value: &T) {
    println!(
        "{}",
        serde_json::to_string_pretty(value).unwrap_or_default()
    );
}
