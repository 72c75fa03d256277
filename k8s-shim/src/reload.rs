//! Hot reload: watch the directories of the policy file and of the settings
//! file (a ConfigMap mount swaps a `..data` symlink, so a file itself is
//! never written in place), and when either's content changes, load the
//! policy with the settings, pass it through the gate and swap it into the
//! slot. A bad file, bad settings or a candidate the gate refuses is
//! reported with a log line and a metric; the old policy keeps scheduling.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use dragon_framework::SchedulerConfig;
use dragon_framework::gate::{self, GateLimits, Passed};
use dragon_framework::record;
use dragon_runtime::{Hooks, LoadOptions, PolicySlot, PolicySource, WasmPolicy};
use notify::{RecursiveMode, Watcher};

use crate::flight::CurrentFile;
use crate::metrics::{Metrics, Reload};

fn digest(path: &Path) -> Option<String> {
    std::fs::read(path)
        .ok()
        .map(|b| dragon_runtime::sha256_hex(&b))
}

/// Why the gate refuses a candidate: what it breached, and where.
#[derive(Debug, thiserror::Error)]
pub enum Refusal {
    #[error("{breach} (on {steps} recorded steps of {})", path.display())]
    Recorded {
        breach: gate::Breach,
        steps: usize,
        path: PathBuf,
    },
    #[error(transparent)]
    Golden(#[from] gate::Breach),
}

/// The gate a candidate passes before it serves: it runs on the steps of
/// the recording file being written, beside twins of the serving policy
/// and the fallback (instances of their own, so the scheduling loop never
/// waits for the gate).
pub struct Gate {
    pub recording: CurrentFile,
    pub scheduling: SchedulerConfig,
    pub fallback: Option<Arc<WasmPolicy>>,
    pub limits: GateLimits,
}

impl Gate {
    /// `Ok(None)` when there is nothing to run the candidate on: nothing
    /// recorded yet and no golden cases next to its file.
    ///
    /// # Errors
    /// Why the candidate is refused.
    pub fn check(
        &self,
        candidate: &WasmPolicy,
        source: &PolicySource,
        live: &WasmPolicy,
    ) -> Result<Option<Passed>, Refusal> {
        let golden = match source {
            PolicySource::File(path) => gate::golden_cases(path),
            PolicySource::Bytes { .. } => Vec::new(),
        };
        let rec = self
            .recording
            .get()
            .and_then(|path| match record::read(&path) {
                Ok(rec) => Some((path, rec)),
                Err(e) => {
                    tracing::warn!("the gate has no recording to run the candidate on: {e}");
                    None
                }
            });
        if rec.is_none() && golden.is_empty() {
            return Ok(None);
        }
        let candidate = candidate.twin();
        let live = live.twin();
        let fallback = self.fallback.as_ref().map(|f| f.twin());
        let fallback = fallback.as_ref().map(|f| f as &dyn Hooks);
        let mut passed = Passed::default();
        if let Some((path, rec)) = rec {
            passed = gate::check(
                &rec.frames,
                self.scheduling,
                &candidate,
                Some(&live),
                fallback,
                self.limits,
            )
            .map_err(|breach| Refusal::Recorded {
                breach,
                steps: rec.frames.len(),
                path,
            })?;
        }
        passed.golden_steps = gate::golden(&golden, &candidate, self.limits)?;
        Ok(Some(passed))
    }
}

/// What serves a slot and how a candidate replaces it: the policy's source
/// and settings, the gate, the slot. The file watcher and the registry
/// poller both go through it, one candidate at a time.
pub struct Reloader {
    slot: Arc<PolicySlot>,
    gate: Option<Gate>,
    metrics: Arc<Metrics>,
    serving: Mutex<Serving>,
}

struct Serving {
    source: PolicySource,
    options: LoadOptions,
}

impl Reloader {
    pub fn new(
        slot: Arc<PolicySlot>,
        source: PolicySource,
        options: LoadOptions,
        gate: Option<Gate>,
        metrics: Arc<Metrics>,
    ) -> Reloader {
        Reloader {
            slot,
            gate,
            metrics,
            serving: Mutex::new(Serving { source, options }),
        }
    }

    /// Load `source` (default: the serving one, read again) with `settings`
    /// (default: the serving ones), gate it, and swap it into the slot; on
    /// a swap they become what serves. The outcome is logged and counted in
    /// `dragon_policy_reloads_total{result}`.
    pub fn reload(&self, source: Option<PolicySource>, settings: Option<String>) -> Reload {
        let mut serving = self.serving.lock().unwrap_or_else(PoisonError::into_inner);
        let source = source.unwrap_or_else(|| serving.source.clone());
        let mut options = serving.options.clone();
        if let Some(settings) = settings {
            options.settings = settings;
        }
        let (outcome, detail) = self.try_swap(&source, &options);
        self.metrics.reload_noted(outcome, detail);
        if outcome == Reload::Success {
            *serving = Serving { source, options };
        }
        outcome
    }

    /// Count a candidate that never reached the load (a failed pull).
    pub fn failed(&self) {
        self.metrics
            .reload_noted(Reload::Failure, "the candidate could not be pulled".into());
    }

    fn try_swap(&self, source: &PolicySource, options: &LoadOptions) -> (Reload, String) {
        let slot = &self.slot;
        let candidate = match WasmPolicy::load(slot.engine(), slot.cache(), source, options) {
            Ok(c) => c,
            Err(e) => {
                tracing::error!("policy reload refused, the previous policy keeps scheduling: {e}");
                return (Reload::Failure, format!("{}: {e}", source.origin()));
            }
        };
        if let Some(gate) = &self.gate {
            // Whatever happens inside the gate, the thread that reloads
            // lives on to take the next candidate.
            let checked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                gate.check(&candidate, source, &slot.current())
            }));
            let Ok(checked) = checked else {
                tracing::error!(
                    candidate = %candidate.info().name,
                    origin = %source.origin(),
                    "policy reload refused: the gate failed on the candidate (a Dragon bug, please report it); the previous policy keeps scheduling"
                );
                return (
                    Reload::GateError,
                    format!("{}: the gate failed on the candidate", source.origin()),
                );
            };
            match checked {
                Ok(Some(passed)) => tracing::info!(
                    steps = passed.steps,
                    golden_steps = passed.golden_steps,
                    p99_us = passed.p99_us,
                    live_p99_us = passed.live_p99_us,
                    "the candidate policy passed the gate"
                ),
                Ok(None) => {
                    tracing::info!("nothing recorded yet: the candidate policy is not gated")
                }
                Err(why) => {
                    tracing::error!(
                        candidate = %candidate.info().name,
                        origin = %source.origin(),
                        "policy reload refused by the gate, the previous policy keeps scheduling: {why}"
                    );
                    return (Reload::Gated, format!("{}: {why}", source.origin()));
                }
            }
        }
        let report = slot.swap(candidate);
        tracing::info!(old = %report.old, new = %report.new, origin = %source.origin(), took_ms = report.took_ms, "policy reloaded");
        let detail = format!(
            "{} replaced {} ({})",
            report.new,
            report.old,
            source.origin()
        );
        (Reload::Success, detail)
    }
}

/// What a reload reads: the policy, and the settings file if there is one.
pub struct Watched {
    pub source: PolicySource,
    pub settings_file: Option<PathBuf>,
}

impl Watched {
    /// The files whose content is watched.
    fn files(&self) -> Vec<PathBuf> {
        let policy = match &self.source {
            PolicySource::File(p) => Some(p.clone()),
            _ => None,
        };
        policy
            .into_iter()
            .chain(self.settings_file.clone())
            .collect()
    }

    /// Whether anything is watched at all.
    pub fn any(&self) -> bool {
        !self.files().is_empty()
    }
}

/// Watch the files of `watched` and reload on every content change until
/// the process ends. Runs on its own thread; the settings are read again
/// from the settings file.
///
/// # Errors
/// A directory cannot be watched.
pub fn spawn(watched: Watched, reloader: Arc<Reloader>) -> notify::Result<()> {
    let files = watched.files();
    let (tx, rx) = std::sync::mpsc::channel();
    let mut watcher = notify::recommended_watcher(move |res: notify::Result<notify::Event>| {
        if res.is_ok() {
            let _ = tx.send(());
        }
    })?;
    let dirs: std::collections::BTreeSet<PathBuf> = files
        .iter()
        .map(|f| {
            f.parent()
                .map(Path::to_path_buf)
                .unwrap_or_else(|| PathBuf::from("."))
        })
        .collect();
    for dir in &dirs {
        watcher.watch(dir, RecursiveMode::NonRecursive)?;
    }
    std::thread::Builder::new()
        .name("dragon-reload".into())
        .spawn(move || {
            let _watcher = watcher; // lives as long as the thread
            let contents = || files.iter().map(|f| digest(f)).collect::<Vec<_>>();
            let mut current = contents();
            while rx.recv().is_ok() {
                // Let a burst of events (symlink swap, editor save) settle.
                std::thread::sleep(Duration::from_millis(50));
                while rx.try_recv().is_ok() {}
                let now = contents();
                if now.iter().any(Option::is_none) || now == current {
                    continue;
                }
                current = now;
                let settings = match &watched.settings_file {
                    None => None,
                    Some(path) => match crate::config::read_settings_file(path) {
                        Ok(settings) => Some(settings),
                        Err(e) => {
                            reloader
                                .metrics
                                .reload_noted(Reload::Failure, format!("settings refused: {e:#}"));
                            tracing::error!("settings refused, the previous policy and settings keep scheduling: {e:#}");
                            continue;
                        }
                    },
                };
                // A file policy is read again; a pulled one stays as it is.
                reloader.reload(None, settings);
            }
        })
        .map_err(|e| notify::Error::generic(&e.to_string()))?;
    Ok(())
}
