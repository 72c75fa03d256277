//! `dragon policy gate`: the check a candidate policy passes before
//! `dragon-scheduler` swaps it in, run offline on a recording and on the
//! golden cases shipped next to the candidate.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use clap::Args;

use super::load::Opened;
use super::load::PolicyArgs;
use super::load::{SIM_DEADLINE_MS, load_policy};
use dragon_framework::gate::{self, GateLimits};
use dragon_runtime::Hooks;

#[derive(Debug, Args)]
pub struct GateOpts {
    #[command(flatten)]
    pub candidate: PolicyArgs,
    /// A recording (`dragon simulate --record`, or a file of
    /// dragon-scheduler's `recording.dir`). Golden cases next to the
    /// candidate (`NAME.golden.rec`, `NAME.golden.CASE.rec`) run as well.
    #[arg(long)]
    pub recording: Option<PathBuf>,
    /// The policy whose latency the candidate is held to (a `.wasm` file
    /// or a bundled name); by default the recorded one, when it can be
    /// loaded from where it was recorded.
    #[arg(long)]
    pub live: Option<String>,
    /// The candidate's p99 hook time may be at most this multiple of the
    /// live policy's.
    #[arg(long, default_value_t = GateLimits::default().latency_multiple)]
    pub latency_multiple: f64,
    /// Print the verdict as JSON.
    #[arg(long)]
    pub json: bool,
}

impl GateOpts {
    pub fn run(self) -> Result<()> {
        let candidate = self.candidate.load()?;
        let name = candidate.info().name.clone();
        let golden = gate::golden_cases(Path::new(&self.candidate.policy));
        if self.recording.is_none() && golden.is_empty() {
            bail!(
                "nothing to run `{name}` on: give a recording with --recording, or ship golden cases next to it (NAME.golden.rec)"
            );
        }
        let limits = GateLimits {
            latency_multiple: self.latency_multiple,
            ..GateLimits::default()
        };
        let mut verdict = match &self.recording {
            Some(path) => self.on_recording(path, &candidate, limits)?,
            None => Ok(None),
        };
        let mut golden_steps = 0;
        if verdict.is_ok() {
            match gate::golden(&golden, &candidate, limits) {
                Ok(steps) => golden_steps = steps,
                Err(b) => verdict = Err(b),
            }
        }
        let cases: Vec<String> = golden.iter().map(|p| p.display().to_string()).collect();
        if self.json {
            let v = match &verdict {
                Ok(p) => {
                    serde_json::json!({"passed": true, "candidate": name, "run": p.as_ref().map(|(p, _)| p),
                    "golden_cases": cases, "golden_steps": golden_steps})
                }
                Err(b) => {
                    serde_json::json!({"passed": false, "candidate": name, "breach": b.to_string()})
                }
            };
            println!("{}", serde_json::to_string_pretty(&v)?);
        }
        match verdict {
            Ok(passed) => {
                if !self.json {
                    if let (Some((p, had_live)), Some(path)) = (passed, &self.recording) {
                        println!(
                            "`{name}` passes the gate on {} recorded steps of {}: {} hook calls, p99 {} µs{}",
                            p.steps,
                            path.display(),
                            p.calls,
                            p.p99_us,
                            match (p.live_p99_us, had_live) {
                                (Some(l), _) => format!(" (the live policy's: {l} µs)"),
                                (None, true) => format!(
                                    " (latency not judged: fewer than {} calls)",
                                    limits.min_calls
                                ),
                                (None, false) => " (latency not judged: no live policy)".into(),
                            }
                        );
                    }
                    if !golden.is_empty() {
                        println!(
                            "`{name}` decides its {} golden case(s) as recorded ({golden_steps} steps): {}",
                            golden.len(),
                            cases.join(", ")
                        );
                    }
                }
                Ok(())
            }
            Err(breach) => bail!("`{name}` is refused by the gate: {breach}"),
        }
    }

    /// The gate on `--recording`, against the live policy's latency (and
    /// whether there was a live policy to compare with).
    fn on_recording(
        &self,
        path: &Path,
        candidate: &dyn Hooks,
        limits: GateLimits,
    ) -> Result<Result<Option<(gate::Passed, bool)>, gate::Breach>> {
        let opened = Opened::at(path, "gate")?;
        let live = match &self.live {
            Some(spec) => Some(
                load_policy(spec, None, SIM_DEADLINE_MS, false)
                    .with_context(|| format!("cannot load the live policy `{spec}`"))?,
            ),
            None => opened
                .recorded_policy(None)
                .map_err(|e| eprintln!("note: no latency comparison: {e:#}"))
                .ok(),
        };
        Ok(gate::check(
            &opened.rec.frames,
            opened.config,
            candidate,
            live.as_ref().map(|l| l as &dyn Hooks),
            opened.fallback(),
            limits,
        )
        .map(|p| Some((p, live.is_some()))))
    }
}
