//! `dragon simulate`: run one policy over a trace.

use std::cell::Cell;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use clap::Args;
use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};

use super::load::Opened;
use super::load::{SIM_DEADLINE_MS, load_policy};
use crate::report::{self, Labeled};
use dragon_framework::record::{FORMAT, Frame, Header, Recorder, Replayer};
use dragon_runtime::WasmPolicy;
use dragon_sim::resume::{self, Assumed};
use dragon_sim::{
    DEFAULT_HORIZON_S, SimOptions, SimRun, Summary, Trace, simulate, simulate_recorded,
};

/// The longest work `--from-recording` may assume of a job, seconds (as a
/// trace's durations).
const MAX_ASSUMED_S: u64 = 1_000_000_000;

#[derive(Debug, Args)]
#[command(
    after_help = "Examples:\n  dragon simulate --policy dragon --trace paper\n  dragon simulate --policy candidate.wasm --from-recording dragon-1796195909493-0000.rec\n  dragon simulate --policy baseline --trace my-trace.yaml --json\n  dragon simulate --policy dragon --trace large --out results/"
)]
pub struct SimulateOpts {
    /// A `.wasm` policy component, or `dragon` / `baseline` for a bundled one.
    #[arg(long, default_value = "dragon")]
    pub policy: String,
    /// A trace file (YAML; JSON or a Pollux or Philly workload CSV by extension), or a bundled trace: `paper`, `large`, `deadlock`, Pollux's workloads `pollux-w1` … `pollux-w8` and `pollux-w1-2x` … `pollux-w8-2x`, Philly's jobs `philly` (the whole trace; give `--horizon-s` past its 106 days) and `philly-week`.
    #[arg(long, default_value = "paper")]
    pub trace: String,
    /// Instead of a trace, start from the cluster a recording ends with
    /// (its jobs, pods and nodes as the recorded policy left them): what
    /// `--policy` would do if it took over now.
    #[arg(long, value_name = "RECORDING", conflicts_with = "trace")]
    pub from_recording: Option<PathBuf>,
    /// With `--from-recording`: the time each running job is assumed to
    /// need to finish at its present size, seconds (a recording does not
    /// know it).
    #[arg(long, default_value_t = 3600, requires = "from_recording",
          value_parser = clap::value_parser!(u64).range(1..=MAX_ASSUMED_S))]
    pub assume_remaining_s: u64,
    /// With `--from-recording`: the run time each waiting job is assumed
    /// to need at its requested size, seconds.
    #[arg(long, default_value_t = 3600, requires = "from_recording",
          value_parser = clap::value_parser!(u64).range(1..=MAX_ASSUMED_S))]
    pub assume_duration_s: u64,
    /// With `--from-recording`: a copy of the recorded policy (a `.wasm`
    /// file), when it is no longer where it was recorded from (a path in
    /// dragon-scheduler's container).
    #[arg(long, value_name = "POLICY", requires = "from_recording")]
    pub recorded_policy: Option<String>,
    /// Policy settings: inline JSON or a JSON file.
    #[arg(long)]
    pub settings: Option<String>,
    /// Print one JSON object instead of the table.
    #[arg(long)]
    pub json: bool,
    /// Write jobs.csv, timeline.csv, SVG plots, summary.json and report.html here.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Record the run (every change and every decision) to this file, for
    /// `dragon replay`.
    #[arg(long)]
    pub record: Option<PathBuf>,
    #[command(flatten)]
    pub run: RunArgs,
}

/// How a simulation runs, shared by `simulate` and `compare`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// Stop each run after this much simulated time, seconds.
    #[arg(long, default_value_t = DEFAULT_HORIZON_S)]
    pub horizon_s: u64,
    /// Per-call deadline for the policies, ms.
    #[arg(long, default_value_t = SIM_DEADLINE_MS)]
    pub deadline_ms: u64,
    /// Do not use the compiled-policy cache.
    #[arg(long)]
    pub no_cache: bool,
    /// With queues: a queue owed GPUs may preempt work of queues that
    /// borrow beyond their guarantee, whatever the priorities (the
    /// framework's `reclaim`).
    #[arg(long)]
    pub reclaim: bool,
}

impl RunArgs {
    /// The simulator's options these ask for.
    pub fn sim_options(&self) -> SimOptions {
        SimOptions {
            horizon_ms: self.horizon_s.saturating_mul(1000),
            reclaim: self.reclaim,
            ..SimOptions::default()
        }
    }
}

/// Run with a progress bar on stderr once the run takes more than a moment
/// (never when stderr is not a terminal).
pub(crate) fn run_with_progress(
    trace: &Trace,
    policy: &WasmPolicy,
    options: SimOptions,
    label: &str,
    sink: Option<&mut dyn FnMut(Frame)>,
    bars: Option<&MultiProgress>,
) -> SimRun {
    let bar =
        ProgressBar::with_draw_target(Some(trace.jobs.len() as u64), ProgressDrawTarget::hidden());
    // Among runs side by side, one line each of the bars drawn together.
    let bar = match bars {
        Some(bars) => bars.add(bar),
        None => bar,
    };
    if let Ok(style) =
        ProgressStyle::with_template("{prefix:>10} [{bar:24}] {pos}/{len} jobs, t = {msg}")
    {
        bar.set_style(style.progress_chars("=> "));
    }
    bar.set_prefix(label.to_string());
    let started = Instant::now();
    let shown = Cell::new(false);
    let terminal = std::io::stderr().is_terminal();
    let progress = |done: u64, _total: u64, now_ms: u64| {
        if !shown.get() && terminal && started.elapsed() > Duration::from_millis(400) {
            match bars {
                Some(bars) => bars.set_draw_target(ProgressDrawTarget::stderr()),
                None => bar.set_draw_target(ProgressDrawTarget::stderr()),
            }
            shown.set(true);
        }
        if shown.get() {
            bar.set_position(done);
            bar.set_message(report::human(now_ms as f64 / 1e3));
        }
    };
    let run = match sink {
        Some(sink) => simulate_recorded(trace, policy, options, Some(&progress), sink),
        None => simulate(trace, policy, options, Some(&progress)),
    };
    bar.finish_and_clear();
    run
}

/// Write a file, naming it on failure.
pub(crate) fn write(dir: &Path, name: &str, contents: &str) -> Result<PathBuf> {
    let path = dir.join(name);
    std::fs::write(&path, contents).with_context(|| format!("cannot write {}", path.display()))?;
    Ok(path)
}

/// Write the plots and the HTML report for `runs` into `dir`, after the
/// files already `written`, and say where everything is (on stderr with
/// `--json`, so stdout stays one JSON object).
pub(crate) fn write_figures(
    dir: &Path,
    runs: &[Labeled<'_>],
    command: &str,
    mut written: Vec<PathBuf>,
    json: bool,
) -> Result<()> {
    let plots = plots(runs)?;
    for (name, _, svg) in &plots {
        written.push(write(dir, name, svg)?);
    }
    let figures: Vec<(&str, &str)> = plots.iter().map(|(_, c, svg)| (*c, svg.as_str())).collect();
    written.push(write(
        dir,
        "report.html",
        &report::html_report(runs, command, &figures),
    )?);
    let msg = format!(
        "wrote {} files to {}; open {} in a browser",
        written.len(),
        dir.display(),
        dir.join("report.html").display()
    );
    if json {
        eprintln!("{msg}");
    } else {
        println!("{msg}");
    }
    Ok(())
}

/// The three plots, for `runs` overlaid: `(file name, caption, svg)`.
pub(crate) fn plots(runs: &[Labeled<'_>]) -> Result<Vec<(&'static str, &'static str, String)>> {
    Ok(vec![
        (
            "gpu_util.svg",
            "GPU utilization over time: thick lines are GPUs of jobs that train, thin lines all GPUs held (240 time buckets, each averaged).",
            report::utilization_svg(runs)?,
        ),
        (
            "jct_cdf.svg",
            "Cumulative distribution of job completion times (unfinished jobs counted up to the end of the run).",
            report::jct_cdf_svg(runs)?,
        ),
        (
            "queue.svg",
            "Jobs submitted and not yet started (thick) and jobs holding resources without training: half placed or restarting (thin).",
            report::queue_svg(runs)?,
        ),
    ])
}

impl SimulateOpts {
    /// What the run starts from, as `--trace T` or `--from-recording R`.
    fn start(&self) -> String {
        match &self.from_recording {
            Some(path) => format!(
                "--from-recording {} --assume-remaining-s {} --assume-duration-s {}",
                path.display(),
                self.assume_remaining_s,
                self.assume_duration_s
            ),
            None => format!("--trace {}", self.trace),
        }
    }

    /// The trace that starts where `path` ends: its steps run again
    /// through the recorded policy, then the cluster they leave.
    fn resumed(&self, path: &Path) -> Result<Trace> {
        let opened = Opened::at(path, "simulate from")?;
        let recorded = opened
            .recorded_policy(self.recorded_policy.as_deref())
            .context(
                "the recording runs to its end through it (give a copy with --recorded-policy)",
            )?;
        let Some(last) = opened.rec.frames.last() else {
            bail!("{}: no step was recorded", path.display());
        };
        let mut replayer = Replayer::new(opened.config);
        for frame in &opened.rec.frames {
            replayer.step(frame, &recorded, opened.fallback());
        }
        let origin = format!(
            "{} at t = {:.1} s",
            path.display(),
            last.now_ms() as f64 / 1e3
        );
        let assumed = Assumed {
            remaining_ms: self.assume_remaining_s * 1000,
            duration_ms: self.assume_duration_s * 1000,
            now_ms: Some(last.now_ms()),
        };
        let resumed = resume::from_cluster(replayer.sched.cluster(), &origin, assumed)?;
        eprintln!(
            "starting from {origin}: {} nodes, {} jobs ({} running), {} pods of other owners holding room",
            resumed.trace.nodes.len(),
            resumed.trace.jobs.len(),
            resumed.running,
            resumed.trace.background.len()
        );
        if resumed.lone_pending > 0 {
            eprintln!(
                "note: {} pending pods outside any job are not simulated",
                resumed.lone_pending
            );
        }
        Ok(resumed.trace)
    }

    pub fn run(self) -> Result<()> {
        let trace = match &self.from_recording {
            Some(path) => self.resumed(path)?,
            None => Trace::load(&self.trace)?,
        };
        let policy = load_policy(
            &self.policy,
            self.settings.as_deref(),
            self.run.deadline_ms,
            self.run.no_cache,
        )?;
        let options = self.run.sim_options();
        let started = Instant::now();
        let run = match &self.record {
            None => run_with_progress(&trace, &policy, options, &policy.info().name, None, None),
            Some(path) => {
                let info = policy.info();
                let header = Header {
                    format: FORMAT,
                    source: format!("dragon simulate {}", self.start()),
                    policy: info.name.clone(),
                    origin: self.policy.clone(),
                    sha256: info.sha256.clone(),
                    settings: info.settings.clone(),
                    interface_version: info.interface_version.clone(),
                    config: serde_json::to_string(&options.config())?,
                    fallback: String::new(),
                    part: 0,
                };
                let mut recorder = Recorder::create(path, &header)?;
                // The first write error stops the recording, not the run.
                let mut failed = None;
                let mut sink = |frame: Frame| {
                    if failed.is_none()
                        && let Err(e) = recorder.frame(&frame)
                    {
                        failed = Some(e);
                    }
                };
                let run =
                    run_with_progress(&trace, &policy, options, &info.name, Some(&mut sink), None);
                if let Some(e) = failed {
                    return Err(e).context("the recording is incomplete");
                }
                recorder.finish()?;
                eprintln!("recorded to {}", path.display());
                run
            }
        };
        let wall = started.elapsed();
        let summary = Summary::of(&run);
        if self.json {
            println!("{}", serde_json::to_string_pretty(&summary)?);
        } else {
            print!("{}", report::summary_table(&summary, &run));
            print!("{}", report::queues_table(&summary));
            if std::io::stderr().is_terminal() {
                eprintln!("(simulated in {:.2} s of wall time)", wall.as_secs_f64());
            }
        }
        if let Some(dir) = &self.out {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("cannot create {}", dir.display()))?;
            let labeled = [Labeled {
                label: summary.policy.clone(),
                run: &run,
                summary: &summary,
            }];
            let written = vec![
                write(
                    dir,
                    "summary.json",
                    &(serde_json::to_string_pretty(&summary)? + "\n"),
                )?,
                write(dir, "jobs.csv", &report::jobs_csv(&run))?,
                write(dir, "timeline.csv", &report::timeline_csv(&run))?,
            ];
            let mut command = format!("dragon simulate --policy {} {}", self.policy, self.start());
            if let Some(s) = &self.settings {
                command.push_str(&format!(" --settings '{s}'"));
            }
            write_figures(dir, &labeled, &command, written, self.json)?;
        }
        Ok(())
    }
}
