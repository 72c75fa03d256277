//! `dragon replay`: a recording's rounds run again.

use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use clap::Args;

use super::simulate::{SIM_DEADLINE_MS, load_policy};
use crate::framework::SchedulerConfig;
use crate::record::{self, Difference};

#[derive(Debug, Args)]
#[command(
    after_help = "Examples:\n  dragon simulate --policy dragon --trace paper --record run.rec\n  dragon replay run.rec                      # the recorded policy: identical, exit 0\n  dragon replay run.rec --policy baseline    # what another policy would have decided"
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
}

/// At most this many characters of a step's decisions are shown.
const SHOWN_CHARS: usize = 400;

fn clip(v: &serde_json::Value) -> String {
    let s = v.to_string();
    match s.char_indices().nth(SHOWN_CHARS) {
        Some((at, _)) => format!("{}…", &s[..at]),
        None => s,
    }
}

impl ReplayOpts {
    pub fn run(self) -> Result<()> {
        let path = &self.recording;
        let rec = record::read(path).context("cannot replay")?;
        if let Some(torn) = &rec.torn {
            eprintln!(
                "warning: {}: the last record was cut short and is skipped ({torn})",
                path.display()
            );
        }
        let h = &rec.header;
        let (spec, settings) = match &self.policy {
            Some(p) => (p.clone(), self.settings.clone()),
            None => (
                h.origin.clone(),
                Some(h.settings.clone()).filter(|s| !s.is_empty()),
            ),
        };
        let policy = load_policy(&spec, settings.as_deref(), SIM_DEADLINE_MS, false)
            .with_context(|| format!("cannot load the policy `{spec}` to replay with"))?;
        let config: SchedulerConfig = serde_json::from_str(&h.config)
            .with_context(|| format!("{}: the recorded framework settings", path.display()))?;
        let info = policy.info();
        let same = info.sha256 == h.sha256 && info.settings == h.settings;
        let replay = record::replay(&rec, &policy, config);
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
                    println!("  recorded: {}", clip(recorded));
                    println!("  replayed: {}", clip(replayed));
                }
            }
        }
        if same && !replay.differences.is_empty() {
            bail!(
                "the recorded policy decided differently in {} of {steps} steps: the run is not reproducible",
                replay.differences.len()
            );
        }
        Ok(())
    }
}
