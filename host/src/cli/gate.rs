//! `dragon policy gate`: the check a candidate policy passes before
//! `dragon-scheduler` swaps it in, run offline on a recording.

use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use clap::Args;

use super::policy::PolicyArgs;
use super::replay::Opened;
use super::simulate::{SIM_DEADLINE_MS, load_policy};
use crate::framework::gate::{self, GateLimits};
use crate::runtime::Hooks;

#[derive(Debug, Args)]
pub struct GateOpts {
    #[command(flatten)]
    pub candidate: PolicyArgs,
    /// A recording (`dragon simulate --record`, or a file of
    /// dragon-scheduler's `recording.dir`).
    #[arg(long)]
    pub recording: PathBuf,
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
        let path = &self.recording;
        let opened = Opened::at(path, "gate")?;
        let h = &opened.rec.header;
        let candidate = self.candidate.load()?;
        let live = match &self.live {
            Some(spec) => Some(
                load_policy(spec, None, SIM_DEADLINE_MS, false)
                    .with_context(|| format!("cannot load the live policy `{spec}`"))?,
            ),
            None => {
                let settings = Some(h.settings.as_str()).filter(|s| !s.is_empty());
                load_policy(&h.origin, settings, SIM_DEADLINE_MS, false)
                    .map_err(|e| {
                        eprintln!("note: no latency comparison: the recorded policy: {e:#}")
                    })
                    .ok()
            }
        };
        let limits = GateLimits {
            latency_multiple: self.latency_multiple,
            ..GateLimits::default()
        };
        let verdict = gate::check(
            &opened.rec.frames,
            opened.config,
            &candidate,
            live.as_ref().map(|l| l as &dyn Hooks),
            opened.fallback(),
            limits,
        );
        let name = &candidate.info().name;
        if self.json {
            let v = match &verdict {
                Ok(p) => serde_json::json!({"passed": true, "candidate": name, "run": p}),
                Err(b) => {
                    serde_json::json!({"passed": false, "candidate": name, "breach": b.to_string()})
                }
            };
            println!("{}", serde_json::to_string_pretty(&v)?);
        }
        match verdict {
            Ok(p) => {
                if !self.json {
                    println!(
                        "`{name}` passes the gate on {} recorded steps of {}: {} hook calls, p99 {} µs{}",
                        p.steps,
                        path.display(),
                        p.calls,
                        p.p99_us,
                        match (p.live_p99_us, live.is_some()) {
                            (Some(l), _) => format!(" (the live policy's: {l} µs)"),
                            (None, true) => format!(
                                " (latency not judged: fewer than {} calls)",
                                limits.min_calls
                            ),
                            (None, false) => " (latency not judged: no live policy)".into(),
                        }
                    );
                }
                Ok(())
            }
            Err(breach) => bail!("`{name}` is refused by the gate: {breach}"),
        }
    }
}
