//! `dragon policy check`, `run` and `export` (`gate`, the authoring and
//! the registry commands are in modules of their own).

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use clap::{Args, Subcommand};

use super::load::{PolicyArgs, print_check};
use crate::case::{Case, Outcome};
use dragon_framework::{BreakerChange, ObjectKey};
use dragon_runtime::WasmPolicy;

#[derive(Debug, Subcommand)]
pub enum PolicyCommand {
    /// Validate a policy: print its name, versions, hooks and compile time.
    #[command(
        after_help = "Examples:\n  dragon policy check dragon\n  dragon policy check my-policy.wasm --settings '{\"idle_threshold_s\": 30}'"
    )]
    Check(CheckOpts),
    /// Run one scheduling round (and one scale step) on a case file.
    #[command(
        after_help = "Examples:\n  dragon policy run dragon --input examples/cases/two-gangs.yaml\n  dragon policy run baseline --input case.yaml --json"
    )]
    Run(RunOpts),
    /// Write a bundled policy component to a file (e.g. for a ConfigMap).
    #[command(
        after_help = "Examples:\n  dragon policy export dragon --out dragon.wasm\n  kubectl -n kube-system create configmap dragon-policy --from-file=policy.wasm=dragon.wasm\n  dragon policy export dragon --configmap kube-system/dragon-policy --out policy-configmap.yaml"
    )]
    Export(ExportOpts),
    /// The gate before a swap, offline: run a candidate on a recording and
    /// check the framework's rules, repeatability and latency.
    #[command(
        after_help = "Examples:\n  dragon policy gate candidate.wasm --recording run.rec\n  dragon policy gate candidate.wasm --recording run.rec --live dragon --latency-multiple 2"
    )]
    Gate(super::gate::GateOpts),
    /// Write a new policy project: a working most-free-GPUs policy, its
    /// settings, a case and its expected decisions.
    #[command(
        after_help = "Examples:\n  dragon policy new my-policy && cd my-policy && dragon policy build && dragon policy test\n  dragon policy new my-policy --sdk ~/dragon/plugin/sdk   # build against a clone's SDK"
    )]
    New(super::author::NewOpts),
    /// Build a policy project into `policy.wasm` (a component) and check it.
    #[command(after_help = "Examples:\n  dragon policy build\n  dragon policy build my-policy")]
    Build(super::author::BuildOpts),
    /// Run a project's cases and compare the decisions with the expected
    /// ones kept beside them (exit 1 when they differ).
    #[command(
        after_help = "Examples:\n  dragon policy test\n  dragon policy test my-policy --bless   # accept the decisions as they are now"
    )]
    Test(super::author::TestOpts),
    /// Push a policy to an OCI registry (the wasm OCI artifact layout),
    /// after checking that it loads.
    #[command(
        after_help = "Examples:\n  dragon policy push policy.wasm oci://registry.example.com/team/my-policy:v1\n  dragon policy push dragon oci://127.0.0.1:5000/dragon:latest --plain-http 127.0.0.1:5000"
    )]
    Push(super::registry::PushOpts),
    /// Pull a policy from an OCI registry into a file, every digest checked.
    #[command(
        after_help = "Examples:\n  dragon policy pull oci://registry.example.com/team/my-policy:v1 --out my-policy.wasm"
    )]
    Pull(super::registry::PullOpts),
}

#[derive(Debug, Args)]
pub struct ExportOpts {
    /// A bundled policy (`dragon`, `baseline`) or a `.wasm` file.
    pub name: String,
    /// Where to write the component (or the ConfigMap).
    #[arg(long)]
    pub out: PathBuf,
    /// Write a ConfigMap `NAMESPACE/NAME` carrying the component as
    /// `binaryData` (key `policy.wasm`) instead of the raw `.wasm`.
    #[arg(long, value_name = "NAMESPACE/NAME")]
    pub configmap: Option<String>,
    /// A golden case (a recording) for the ConfigMap to carry beside the
    /// policy, as `policy.golden.CASE.rec`: the gate before a swap runs it.
    #[arg(long, value_name = "RECORDING", requires = "configmap")]
    pub golden: Vec<PathBuf>,
}

/// A ConfigMap manifest carrying each `(key, bytes)` as `binaryData`.
pub fn configmap_yaml(namespace: &str, name: &str, entries: &[(String, Vec<u8>)]) -> String {
    use base64::Engine;
    let mut yaml = format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: {namespace}\nbinaryData:\n"
    );
    for (key, bytes) in entries {
        let data = base64::engine::general_purpose::STANDARD.encode(bytes);
        yaml.push_str(&format!("  {key}: {data}\n"));
    }
    yaml
}

/// The ConfigMap key of a golden case: `policy.golden.CASE.rec`, where
/// CASE is what follows `.golden.` in the file's name, or else its stem.
fn golden_key(path: &Path) -> Result<String> {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .with_context(|| format!("{}: not a file name", path.display()))?;
    let stem = name.strip_suffix(".rec").unwrap_or(&name);
    let case = stem.split_once(".golden.").map_or(stem, |(_, case)| case);
    let valid = !case.is_empty()
        && case
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if !valid {
        bail!(
            "{}: a golden case's name must be letters, digits, `-`, `_` or `.` (a ConfigMap key), got {case:?}",
            path.display()
        );
    }
    Ok(format!("policy.golden.{case}.rec"))
}

#[derive(Debug, Args)]
pub struct CheckOpts {
    #[command(flatten)]
    pub policy: PolicyArgs,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct RunOpts {
    #[command(flatten)]
    pub policy: PolicyArgs,
    /// The case: nodes, jobs and pods (YAML, or JSON by extension).
    #[arg(long)]
    pub input: PathBuf,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
    /// Exit 0 even when hook calls failed (by default such a run exits
    /// with code 3 after printing its decisions).
    #[arg(long)]
    pub allow_failures: bool,
}

impl PolicyCommand {
    pub fn run(self) -> Result<()> {
        match self {
            PolicyCommand::Check(o) => check(o),
            PolicyCommand::Run(o) => run(o),
            PolicyCommand::Gate(o) => o.run(),
            PolicyCommand::New(o) => o.run(),
            PolicyCommand::Build(o) => o.run(),
            PolicyCommand::Test(o) => o.run(),
            PolicyCommand::Push(o) => o.run(),
            PolicyCommand::Pull(o) => o.run(),
            PolicyCommand::Export(o) => {
                let own;
                let bytes = match dragon_bundled::by_name(&o.name) {
                    Some(bytes) if !Path::new(&o.name).exists() => bytes,
                    _ if Path::new(&o.name).exists() => {
                        own = std::fs::read(&o.name)
                            .with_context(|| format!("cannot read {}", o.name))?;
                        &own[..]
                    }
                    _ => bail!(
                        "no policy file {:?}, and no bundled policy of that name (bundled: {})",
                        o.name,
                        dragon_bundled::NAMES.join(", ")
                    ),
                };
                let contents = match &o.configmap {
                    Some(cm) => {
                        let key = ObjectKey::parse(cm)
                            .with_context(|| "--configmap takes NAMESPACE/NAME")?;
                        let mut entries = vec![("policy.wasm".to_string(), bytes.to_vec())];
                        for case in &o.golden {
                            // Read as a recording first: a broken case is
                            // named here rather than refused by the gate.
                            dragon_framework::record::read(case)
                                .with_context(|| "cannot carry a golden case")?;
                            let bytes = std::fs::read(case)
                                .with_context(|| format!("cannot read {}", case.display()))?;
                            entries.push((golden_key(case)?, bytes));
                        }
                        configmap_yaml(key.namespace(), key.name(), &entries).into_bytes()
                    }
                    None => bytes.to_vec(),
                };
                std::fs::write(&o.out, &contents)
                    .with_context(|| format!("cannot write {}", o.out.display()))?;
                println!("wrote {} ({} bytes)", o.out.display(), contents.len());
                Ok(())
            }
        }
    }
}

fn check(o: CheckOpts) -> Result<()> {
    print_check(&o.policy.load()?, o.json)
}

fn run(o: RunOpts) -> Result<()> {
    let case = Case::load(&o.input)?;
    let policy = o.policy.load_with(&case.settings_json())?;
    let outcome = case
        .run(&policy)
        .with_context(|| format!("in {}", o.input.display()))?;
    print_round(&o, &policy, &outcome)?;
    let failed = outcome.failures();
    if failed > 0 && !o.allow_failures {
        return Err(super::HookCallsFailed(failed).into());
    }
    Ok(())
}

fn print_round(o: &RunOpts, policy: &WasmPolicy, outcome: &Outcome) -> Result<()> {
    let (now, round, scale) = (outcome.now_ms, &outcome.round, &outcome.scale);
    if o.json {
        let mut out = outcome.decisions();
        out["policy"] = policy.info().name.clone().into();
        out["version"] = policy.info().version.clone().into();
        out["now_ms"] = now.into();
        println!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(());
    }
    let info = policy.info();
    println!(
        "policy {} {} (dragon:scheduler@{}), t = {} s",
        info.name,
        info.version,
        info.interface_version,
        now as f64 / 1e3
    );
    for d in &round.decisions {
        for line in d.to_string().lines() {
            println!("  {line}");
        }
    }
    if round.decisions.is_empty() {
        println!("  (nothing pending)");
    }
    for a in &scale.actions {
        println!(
            "  scale        {}: {} -> {} workers: {}",
            a.job, a.from, a.to, a.reason
        );
    }
    if let Some(BreakerChange::Opened {
        policy, failures, ..
    }) = &scale.breaker
    {
        println!("  suspended    {policy}: {failures} consecutive failures (scale step)");
    }
    for e in &scale.errors {
        println!("  scale error  {e}");
    }
    Ok(())
}
