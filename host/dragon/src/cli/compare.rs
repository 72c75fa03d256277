//! `dragon compare`: several policies over one trace, side by side.

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use clap::Args;
use indicatif::{MultiProgress, ProgressDrawTarget};
use rayon::prelude::*;

use super::load::load_policy;
use super::simulate::{RunArgs, run_with_progress, write, write_figures};
use crate::report::{self, Labeled};
use dragon_runtime::WasmPolicy;
use dragon_sim::{SimRun, Summary, Trace, bound};

#[derive(Debug, Args)]
#[command(
    after_help = "With no arguments: the bundled paper-like trace under `baseline` and `dragon`.\n\nExamples:\n  dragon compare\n  dragon compare --trace large --out report/\n  dragon compare --trace my-trace.yaml baseline dragon 'dragon={\"scale_up\": false}'"
)]
pub struct CompareOpts {
    /// A trace file (YAML; JSON or a Pollux or Philly workload CSV by extension), or a bundled trace: `paper`, `large`, `deadlock`, Pollux's workloads `pollux-w1` … `pollux-w8` and `pollux-w1-2x` … `pollux-w8-2x`, Philly's jobs `philly` (the whole trace; give `--horizon-s` past its 106 days) and `philly-week`.
    #[arg(long, default_value = "paper")]
    pub trace: String,
    /// Policies: a bundled name (`dragon`, `baseline`, `dragon-plus`,
    /// `tiresias`, `pollux`, `backfill`, `fair-share`) or a `.wasm` file, each optionally
    /// `=SETTINGS` (inline JSON or a JSON file). Ratios are against the first.
    #[arg(default_values_t = ["baseline".to_string(), "dragon".to_string()])]
    pub policies: Vec<String>,
    /// Print one JSON object instead of the table.
    #[arg(long)]
    pub json: bool,
    /// Write the overlaid plots, report.html, summary.json and per-policy CSVs here.
    #[arg(long)]
    pub out: Option<PathBuf>,
    #[command(flatten)]
    pub run: RunArgs,
}

/// `dragon` or `dragon={"k": 1}` → (`dragon`, settings).
fn split(spec: &str) -> (&str, Option<&str>) {
    match spec.split_once('=') {
        Some((p, s)) if !p.is_empty() => (p, Some(s)),
        _ => (spec, None),
    }
}

/// Load each of `specs` (`NAME[=SETTINGS]`), labelled by the policy's name
/// (`dragon#2` for the second `dragon`).
pub(crate) fn labeled_policies(
    specs: &[String],
    run: &RunArgs,
) -> Result<Vec<(String, WasmPolicy)>> {
    let mut out = Vec::new();
    let mut seen: BTreeMap<String, u32> = BTreeMap::new();
    for spec in specs {
        let (name, settings) = split(spec);
        let policy = load_policy(name, settings, run.deadline_ms, run.no_cache)
            .with_context(|| format!("policy `{spec}`"))?;
        let base = policy.info().name.clone();
        let n = seen.entry(base.clone()).or_insert(0);
        *n += 1;
        let label = if *n == 1 { base } else { format!("{base}#{n}") };
        out.push((label, policy));
    }
    Ok(out)
}

fn dir_name(label: &str) -> String {
    label
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '-'
            }
        })
        .collect()
}

impl CompareOpts {
    pub fn run(self) -> Result<()> {
        if self.policies.is_empty() {
            bail!("name at least one policy");
        }
        let trace = Trace::load(&self.trace)?;
        let options = self.run.sim_options();
        // Each policy on a core of its own, with a progress bar each; the
        // runs come back in the order the policies were named.
        let bars = MultiProgress::with_draw_target(ProgressDrawTarget::hidden());
        let runs: Vec<(String, SimRun)> = labeled_policies(&self.policies, &self.run)?
            .par_iter()
            .map(|(label, policy)| {
                let run = run_with_progress(&trace, policy, options, label, None, Some(&bars));
                (label.clone(), run)
            })
            .collect();
        let summaries: Vec<Summary> = runs.iter().map(|(_, r)| Summary::of(r)).collect();
        let labeled: Vec<Labeled<'_>> = runs
            .iter()
            .zip(&summaries)
            .map(|((label, run), summary)| Labeled {
                label: label.clone(),
                run,
                summary,
            })
            .collect();

        let (alone, capacity) = (bound::alone(&trace), bound::capacity_aware(&trace));
        if self.json {
            let first = &summaries[0];
            let ratio = |a: f64, b: f64| {
                if a == 0.0 {
                    None
                } else {
                    Some(((b / a) * 1e4).round() / 1e4)
                }
            };
            let ratios: Vec<serde_json::Value> = labeled[1..]
                .iter()
                .map(|l| {
                    let s = l.summary;
                    serde_json::json!({
                        "policy": l.label,
                        "against": labeled[0].label,
                        "avg_jct": ratio(first.avg_jct_s, s.avg_jct_s),
                        "p50_jct": ratio(first.p50_jct_s, s.p50_jct_s),
                        "p95_jct": ratio(first.p95_jct_s, s.p95_jct_s),
                        "avg_wait": ratio(first.avg_wait_s, s.avg_wait_s),
                        "makespan": ratio(first.makespan_s, s.makespan_s),
                        "gpu_util": ratio(first.gpu_util, s.gpu_util),
                        "gpu_alloc": ratio(first.gpu_alloc, s.gpu_alloc),
                    })
                })
                .collect();
            let runs: Vec<serde_json::Value> = labeled
                .iter()
                .map(|l| {
                    let mut v = serde_json::to_value(l.summary).unwrap_or_default();
                    if let Some(o) = v.as_object_mut() {
                        o.insert("label".into(), serde_json::Value::String(l.label.clone()));
                    }
                    v
                })
                .collect();
            let bounds = serde_json::json!({
                "alone_avg_jct_s": alone,
                "capacity_avg_jct_s": capacity,
            });
            let out = serde_json::json!({
                "trace": trace.origin, "runs": runs, "ratios": ratios, "bounds": bounds,
            });
            println!("{}", serde_json::to_string_pretty(&out)?);
        } else {
            print!("{}", report::comparison_table(&labeled));
            print!("{}", report::bounds_line(&labeled, alone, capacity));
        }

        if let Some(dir) = &self.out {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("cannot create {}", dir.display()))?;
            let mut written = vec![write(
                dir,
                "summary.json",
                &(serde_json::to_string_pretty(&summaries)? + "\n"),
            )?];
            for l in &labeled {
                let sub = dir.join(dir_name(&l.label));
                std::fs::create_dir_all(&sub)
                    .with_context(|| format!("cannot create {}", sub.display()))?;
                written.push(write(&sub, "jobs.csv", &report::jobs_csv(l.run))?);
                written.push(write(&sub, "timeline.csv", &report::timeline_csv(l.run))?);
            }
            let command = format!(
                "dragon compare --trace {} {}",
                self.trace,
                self.policies.join(" ")
            );
            write_figures(dir, &labeled, &command, written, self.json)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policy_specs_split_at_the_first_equals_sign() {
        assert_eq!(split("dragon"), ("dragon", None));
        assert_eq!(
            split(r#"dragon={"a": "b=c"}"#),
            ("dragon", Some(r#"{"a": "b=c"}"#))
        );
        assert_eq!(split("=x"), ("=x", None));
        assert_eq!(dir_name("my policy#2"), "my-policy-2");
    }
}
