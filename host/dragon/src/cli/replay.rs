//! `dragon replay`: a recording's rounds run again.

use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use clap::Args;

use super::load::{Opened, SIM_DEADLINE_MS, load_policy};
use dragon_framework::SchedulerConfig;
use dragon_framework::record::{self, Difference, Recording, Replayer};
use dragon_runtime::{Hooks, WasmPolicy};

#[derive(Debug, Args)]
#[command(
    after_help = "Examples:\n  dragon simulate --policy dragon --trace paper --record run.rec\n  dragon replay run.rec                      # the recorded policy: identical, exit 0\n  dragon replay run.rec --policy baseline    # what another policy would have decided\n  dragon replay run.rec --explain default/job-1-worker-0   # why a pod waited"
)]
pub struct ReplayOpts {
    /// A recording made with `dragon simulate --record`.
    pub recording: PathBuf,
    /// Replay through this policy (a `.wasm` file or a bundled name)
    /// instead of the recorded one.
    #[arg(long)]
    pub policy: Option<String>,
    /// Settings for `--policy` (inline JSON or a JSON file); without
    /// `--policy`, the recorded settings are used.
    #[arg(long)]
    pub settings: Option<String>,
    /// Show at most this many differing steps.
    #[arg(long, default_value_t = 10)]
    pub show: usize,
    /// Print the replay as one JSON object.
    #[arg(long)]
    pub json: bool,
    /// Instead of comparing, list every round that decided something about
    /// this pod (`NAMESPACE/NAME` in a cluster's recording, the pod's name
    /// in a simulator's) and why it was not placed.
    #[arg(long, value_name = "POD")]
    pub explain: Option<String>,
}

/// At most this many characters of a step's decisions are shown.
const SHOWN_CHARS: usize = 400;

impl ReplayOpts {
    pub fn run(self) -> Result<()> {
        let path = &self.recording;
        let opened = Opened::at(path, "replay")?;
        let (rec, config, fallback) = (&opened.rec, opened.config, opened.fallback());
        let h = &rec.header;
        let policy = match &self.policy {
            Some(spec) => load_policy(spec, self.settings.as_deref(), SIM_DEADLINE_MS, false)
                .with_context(|| format!("cannot load the policy `{spec}` to replay with"))?,
            None => opened
                .recorded_policy(None)
                .context("give a copy of it with --policy")?,
        };
        if h.part > 0 {
            eprintln!(
                "note: {}: part {} of a rotated recording: it starts from the cluster as it was, \
                 without the queue's backoffs and waits of that moment, so its first rounds may differ",
                path.display(),
                h.part
            );
        }
        if let Some(pod) = &self.explain {
            return explain(rec, &policy, fallback, config, pod);
        }
        let info = policy.info();
        let same = info.sha256 == h.sha256 && info.settings == h.settings;
        let replay = record::replay(rec, &policy, fallback, config);
        let steps = replay.rounds + replay.scale_steps;
        if self.json {
            println!(
                "{}",
                serde_json::to_string_pretty(&serde_json::json!({
                    "recording": path.display().to_string(),
                    "recorded_policy": h.policy,
                    "policy": info.name,
                    "same_policy": same,
                    "replay": replay,
                }))?
            );
        } else {
            println!(
                "{}: {} rounds and {} scale steps of `{}` replayed through `{}`{}",
                path.display(),
                replay.rounds,
                replay.scale_steps,
                h.policy,
                info.name,
                if same { " (the recorded policy)" } else { "" }
            );
            if replay.differences.is_empty() {
                println!("decisions identical to the recording");
            } else {
                println!(
                    "{} of {steps} steps decided differently{}",
                    replay.differences.len(),
                    if replay.refused_ops > 0 {
                        format!(
                            "; {} recorded changes did not apply to the replayed cluster",
                            replay.refused_ops
                        )
                    } else {
                        String::new()
                    }
                );
                for Difference {
                    frame,
                    now_ms,
                    recorded,
                    replayed,
                } in replay.differences.iter().take(self.show)
                {
                    println!("t = {:.1} s (step {frame}):", *now_ms as f64 / 1e3);
                    println!("  recorded: {}", record::clipped(recorded, SHOWN_CHARS));
                    println!("  replayed: {}", record::clipped(replayed, SHOWN_CHARS));
                }
            }
        }
        if same && h.part == 0 && !replay.differences.is_empty() {
            bail!(
                "the recorded policy decided differently in {} of {steps} steps: the run is not reproducible",
                replay.differences.len()
            );
        }
        Ok(())
    }
}

/// Print each round's decisions about `pod` (or its job, when it belongs to
/// one): where it was bound, or why it was not. The same outcome in
/// consecutive rounds is one line, with the span and the number of rounds.
fn explain(
    rec: &Recording,
    policy: &WasmPolicy,
    fallback: Option<&dyn Hooks>,
    config: SchedulerConfig,
    pod: &str,
) -> Result<()> {
    let mut replayer = Replayer::new(config);
    let mut seen = false;
    let mut lines = Lines::default();
    for frame in &rec.frames {
        let step = replayer.step(frame, policy, fallback);
        let found = replayer.sched.cluster().pod(pod);
        seen |= found.is_some();
        let job = found.and_then(|(p, _)| p.job.clone());
        let units = [Some(format!("pod/{pod}")), job.map(|j| format!("job/{j}"))];
        let about = |d: &serde_json::Value| {
            d.get("pod").and_then(|v| v.as_str()) == Some(pod)
                || d.get("unit")
                    .and_then(|v| v.as_str())
                    .is_some_and(|u| units.iter().flatten().any(|k| k == u))
        };
        let Some(decisions) = step.replayed.as_array() else {
            continue;
        };
        for d in decisions.iter().filter(|d| about(d)) {
            let kind = d.get("kind").and_then(|v| v.as_str()).unwrap_or("?");
            let detail = ["reason", "error", "node"]
                .iter()
                .find_map(|k| {
                    d.get(*k)
                        .map(|v| v.as_str().map_or(v.to_string(), str::to_string))
                })
                .map(|d| format!(": {d}"))
                .unwrap_or_default();
            lines.push(step.now_ms, format!("{kind}{detail}"));
        }
    }
    if !seen {
        bail!("no pod `{pod}` in the recording (a cluster's pods are named NAMESPACE/NAME)");
    }
    if lines.0.is_empty() {
        println!("no round decided anything about `{pod}`");
    }
    for (from, to, rounds, what) in lines.0 {
        match rounds {
            1 => println!("t = {:.1} s  {what}", from as f64 / 1e3),
            n => println!(
                "t = {:.1} s … {:.1} s ({n} rounds)  {what}",
                from as f64 / 1e3,
                to as f64 / 1e3
            ),
        }
    }
    Ok(())
}

/// Outcomes with the span of consecutive rounds that repeated each.
#[derive(Default)]
struct Lines(Vec<(u64, u64, u32, String)>);

impl Lines {
    fn push(&mut self, now_ms: u64, what: String) {
        match self.0.last_mut() {
            Some((_, to, n, last)) if *last == what && *to != now_ms => {
                *to = now_ms;
                *n += 1;
            }
            _ => self.0.push((now_ms, now_ms, 1, what)),
        }
    }
}
