//! Output of runs: terminal tables, CSV files, SVG plots (plotters' SVG
//! backend) and a self-contained HTML report.

use std::fmt::Write as _;

use dragon_sim::engine::SimRun;
use dragon_sim::metrics::{Summary, jct_ms, wait_ms};

mod plots;

pub use plots::{OVERLAID_AT_MOST, jct_cdf_svg, queue_svg, utilization_svg};

/// A run with the label it is shown under.
pub struct Labeled<'a> {
    pub label: String,
    pub run: &'a SimRun,
    pub summary: &'a Summary,
}

/// A duration for people: seconds, minutes, hours or days.
pub fn human(s: f64) -> String {
    if s < 120.0 {
        format!("{s:.0} s")
    } else if s < 2.0 * 3600.0 {
        format!("{:.1} min", s / 60.0)
    } else if s < 72.0 * 3600.0 {
        format!("{:.2} h", s / 3600.0)
    } else {
        format!("{:.2} d", s / 86400.0)
    }
}

fn pct(x: f64) -> String {
    format!("{:.1} %", x * 100.0)
}

/// What each run's outcome note says (deadlock, horizon, censoring).
fn outcome(s: &Summary) -> String {
    let mut out = if s.deadlocked {
        format!(
            "DEADLOCK at {}: nothing could run or be scheduled any more",
            human(s.end_s)
        )
    } else if s.horizon_reached {
        format!("stopped at the horizon ({})", human(s.end_s))
    } else {
        "all jobs finished".to_string()
    };
    if s.jobs_unfinished > 0 {
        let _ = write!(
            out,
            "; {} job(s) unfinished, their JCT and wait counted up to {} (censored: a lower bound)",
            s.jobs_unfinished,
            human(s.end_s)
        );
    }
    if s.policy_errors > 0 {
        let _ = write!(
            out,
            "; {} policy error(s), first: {}",
            s.policy_errors, s.policy_error_samples[0]
        );
    }
    out
}

/// Per queue of the trace: what it was guaranteed and held, its share of
/// what it was owed over the run and in its worst hour, its longest wait
/// and average JCT; then Jain's index. Empty for a trace without queues.
pub fn queues_table(s: &Summary) -> String {
    let mut o = String::new();
    if s.queues.is_empty() {
        return o;
    }
    let share = |x: Option<f64>| x.map_or("-".to_string(), pct);
    let _ = writeln!(
        o,
        "{:<16} {:>10} {:>9} {:>10} {:>11} {:>13} {:>10} {:>6}",
        "queue",
        "guaranteed",
        "avg GPUs",
        "of owed",
        "worst hour",
        "longest wait",
        "avg JCT",
        "jobs"
    );
    for q in &s.queues {
        let _ = writeln!(
            o,
            "{:<16} {:>10} {:>9.1} {:>10} {:>11} {:>13} {:>10} {:>6}",
            q.name,
            q.guaranteed_gpus,
            q.avg_gpus,
            share(q.share_of_entitlement),
            share(q.worst_hour_share),
            human(q.longest_wait_s),
            human(q.avg_jct_s),
            q.jobs
        );
    }
    if let Some(j) = s.jain_index {
        let _ = writeln!(
            o,
            "Jain's index over the queues' shares of what they were owed: {j:.3}"
        );
    }
    o
}

/// The `dragon simulate` summary table.
pub fn summary_table(s: &Summary, run: &SimRun) -> String {
    let mut o = String::new();
    let settings = if s.settings.is_empty() {
        String::new()
    } else {
        format!(" with settings {}", s.settings)
    };
    let _ = writeln!(
        o,
        "policy {}{} on {} ({} GPUs, {} jobs)",
        s.policy, settings, s.trace, run.total_gpus, s.jobs_total
    );
    let rows: Vec<(&str, String)> = vec![
        (
            "jobs completed",
            format!("{} / {}", s.jobs_completed, s.jobs_total),
        ),
        (
            "average JCT",
            format!("{} s ({})", s.avg_jct_s, human(s.avg_jct_s)),
        ),
        (
            "p50 JCT",
            format!("{} s ({})", s.p50_jct_s, human(s.p50_jct_s)),
        ),
        (
            "p95 JCT",
            format!("{} s ({})", s.p95_jct_s, human(s.p95_jct_s)),
        ),
        (
            "average wait",
            format!("{} s ({})", s.avg_wait_s, human(s.avg_wait_s)),
        ),
        (
            "makespan",
            format!("{} s ({})", s.makespan_s, human(s.makespan_s)),
        ),
        ("GPUs allocated", pct(s.gpu_alloc)),
        ("GPUs training", pct(s.gpu_util)),
        ("average queue", format!("{} jobs", s.avg_queue)),
        (
            "scale ups / downs",
            match s.resizes_held {
                0 => format!(
                    "{} / {} ({} restarts)",
                    s.scale_ups, s.scale_downs, s.restarts
                ),
                held => format!(
                    "{} / {} ({} restarts; {held} resizes held by the limits)",
                    s.scale_ups, s.scale_downs, s.restarts
                ),
            },
        ),
        ("admitted at min", s.admitted_below_request.to_string()),
        ("preemptions", s.preemptions.to_string()),
        (
            "deadlocked",
            if s.deadlocked {
                "YES".into()
            } else {
                "no".into()
            },
        ),
    ];
    for (k, v) in rows {
        let _ = writeln!(o, "  {k:<20} {v}");
    }
    let _ = writeln!(o, "  {}", outcome(s));
    o
}

/// `b / a`, or what to show instead when `a` is zero.
fn quotient(a: f64, b: f64) -> Result<f64, &'static str> {
    if a != 0.0 {
        Ok(b / a)
    } else if b == 0.0 {
        Err("=")
    } else {
        Err("n/a")
    }
}

/// Relative change of `b` against `a` for a lower-is-better metric.
fn ratio(a: f64, b: f64) -> String {
    match quotient(a, b) {
        Ok(r) => format!("{r:.2}x ({:+.0} %)", (r - 1.0) * 100.0),
        Err(note) => note.into(),
    }
}

/// `b / a` as `0.35x`, for columns too narrow for [`ratio`]'s percentage.
fn short_ratio(a: f64, b: f64) -> String {
    match quotient(a, b) {
        Ok(r) => format!("{r:.2}x"),
        Err(note) => note.into(),
    }
}

/// A metric of the comparison tables: its name, a short one for narrow
/// columns, how a run's value is shown, and the number ratios compare (none
/// for counts and flags).
struct Metric {
    name: &'static str,
    short: &'static str,
    show: fn(&Summary) -> String,
    value: Option<fn(&Summary) -> f64>,
}

impl Metric {
    const fn compared(
        name: &'static str,
        short: &'static str,
        show: fn(&Summary) -> String,
        value: fn(&Summary) -> f64,
    ) -> Self {
        Metric {
            name,
            short,
            show,
            value: Some(value),
        }
    }

    const fn shown(name: &'static str, short: &'static str, show: fn(&Summary) -> String) -> Self {
        Metric {
            name,
            short,
            show,
            value: None,
        }
    }
}

/// The metrics of both comparison tables, the terminal's and the HTML
/// report's; fragmentation only where a run has topology levels.
fn metrics(runs: &[Labeled<'_>]) -> Vec<Metric> {
    let topology = runs.iter().any(|r| r.summary.largest_free_domain.is_some());
    let mut rows = vec![
        Metric::compared(
            "average JCT",
            "avg JCT",
            |s| human(s.avg_jct_s),
            |s| s.avg_jct_s,
        ),
        Metric::compared(
            "p50 JCT",
            "p50 JCT",
            |s| human(s.p50_jct_s),
            |s| s.p50_jct_s,
        ),
        Metric::compared(
            "p95 JCT",
            "p95 JCT",
            |s| human(s.p95_jct_s),
            |s| s.p95_jct_s,
        ),
        Metric::compared(
            "average wait",
            "avg wait",
            |s| human(s.avg_wait_s),
            |s| s.avg_wait_s,
        ),
        Metric::compared(
            "makespan",
            "makespan",
            |s| human(s.makespan_s),
            |s| s.makespan_s,
        ),
        Metric::compared(
            "GPUs training",
            "GPUs train",
            |s| pct(s.gpu_util),
            |s| s.gpu_util,
        ),
        Metric::compared(
            "GPUs allocated",
            "GPUs alloc",
            |s| pct(s.gpu_alloc),
            |s| s.gpu_alloc,
        ),
        Metric::shown("jobs completed", "jobs done", |s| {
            format!("{}/{}", s.jobs_completed, s.jobs_total)
        }),
        Metric::shown("scale ups/downs", "scale up/down", |s| {
            format!("{}/{}", s.scale_ups, s.scale_downs)
        }),
        Metric::shown("deadlocked", "deadlocked", |s| {
            if s.deadlocked { "YES" } else { "no" }.to_string()
        }),
    ];
    if topology {
        rows.insert(
            7,
            Metric::shown("largest free domain", "free domain", |s| {
                s.largest_free_domain
                    .map_or_else(|| "-".to_string(), |g| format!("{g} GPUs"))
            }),
        );
    }
    rows
}

/// The `dragon compare` table. A few runs: one column per run and one per
/// ratio against the first. More: one row per run in three blocks (values,
/// ratios against the first, counts and flags), within 100 columns.
pub fn comparison_table(runs: &[Labeled<'_>]) -> String {
    let mut o = String::new();
    let Some(first) = runs.first() else { return o };
    let _ = writeln!(
        o,
        "{} ({} GPUs, {} jobs)",
        first.summary.trace, first.run.total_gpus, first.summary.jobs_total
    );
    if runs.len() <= OVERLAID_AT_MOST {
        metrics_as_rows(&mut o, runs);
    } else {
        runs_as_rows(&mut o, runs);
    }
    for r in runs {
        let _ = writeln!(o, "  {}: {}", r.label, outcome(r.summary));
    }
    o
}

/// What no policy can beat on the trace (seconds of average JCT, see
/// [`super::bound`]), and each run's average JCT over the capacity-aware
/// bound.
pub fn bounds_line(runs: &[Labeled<'_>], alone_s: f64, capacity_s: f64) -> String {
    let over: Vec<String> = runs
        .iter()
        .filter(|_| capacity_s > 0.0)
        .map(|r| format!("{} {:.2}x", r.label, r.summary.avg_jct_s / capacity_s))
        .collect();
    format!(
        "  average JCT no policy can beat: {} alone, {} sharing the GPUs; over the latter: {}\n",
        human(alone_s),
        human(capacity_s),
        over.join(", ")
    )
}

fn metrics_as_rows(o: &mut String, runs: &[Labeled<'_>]) {
    let first = &runs[0];
    let w = runs
        .iter()
        .map(|r| r.label.len())
        .max()
        .unwrap_or(0)
        .max(12)
        + 2;
    let _ = write!(o, "  {:<16}", "");
    for r in runs {
        let _ = write!(o, "{:>w$}", r.label);
    }
    for r in &runs[1..] {
        let _ = write!(o, "   {:<18}", format!("{} vs {}", r.label, first.label));
    }
    let _ = writeln!(o);
    for m in metrics(runs) {
        let _ = write!(o, "  {:<16}", m.name);
        for r in runs {
            let _ = write!(o, "{:>w$}", (m.show)(r.summary));
        }
        if let Some(value) = m.value {
            for r in &runs[1..] {
                let _ = write!(
                    o,
                    "   {:<18}",
                    ratio(value(first.summary), value(r.summary))
                );
            }
        }
        let _ = writeln!(o);
    }
}

/// The widest a run's label is shown in the one-row-per-run blocks: with
/// seven columns of [`VALUE_COLUMN`], 2 + 20 + 7 × 11 = 99 characters.
const LABEL_COLUMN: usize = 20;
const VALUE_COLUMN: usize = 11;

/// `label` cut to `LABEL_COLUMN` characters, the cut marked.
fn fit_label(label: &str) -> String {
    if label.chars().count() <= LABEL_COLUMN {
        label.to_string()
    } else {
        let kept: String = label.chars().take(LABEL_COLUMN - 1).collect();
        format!("{kept}…")
    }
}

fn runs_as_rows(o: &mut String, runs: &[Labeled<'_>]) {
    let first = &runs[0];
    let metrics = metrics(runs);
    let (compared, shown): (Vec<&Metric>, Vec<&Metric>) =
        metrics.iter().partition(|m| m.value.is_some());
    let label_w = runs
        .iter()
        .map(|r| fit_label(&r.label).chars().count())
        .max()
        .unwrap_or(0)
        .max("policy".len());
    let block = |o: &mut String,
                 title: &str,
                 columns: &[&Metric],
                 w: usize,
                 cell: &dyn Fn(&Metric, &Labeled<'_>) -> String| {
        let _ = writeln!(o, "{title}");
        let _ = write!(o, "  {:<label_w$}", "policy");
        for m in columns {
            let _ = write!(o, "{:>w$}", m.short);
        }
        let _ = writeln!(o);
        for r in runs {
            let label = fit_label(&r.label);
            let _ = write!(o, "  {label:<label_w$}");
            for m in columns {
                let _ = write!(o, "{:>w$}", cell(m, r));
            }
            let _ = writeln!(o);
        }
    };
    block(o, "values", &compared, VALUE_COLUMN, &|m, r| {
        (m.show)(r.summary)
    });
    block(
        o,
        &format!(
            "against {} (run / {})",
            fit_label(&first.label),
            fit_label(&first.label)
        ),
        &compared,
        VALUE_COLUMN,
        &|m, r| match m.value {
            Some(v) => short_ratio(v(first.summary), v(r.summary)),
            None => String::new(),
        },
    );
    block(o, "counts", &shown, 15, &|m, r| (m.show)(r.summary));
}

fn opt_s(ms: Option<u64>) -> String {
    ms.map(|v| format!("{:.3}", v as f64 / 1e3))
        .unwrap_or_default()
}

fn secs(ms: u64) -> String {
    format!("{:.3}", ms as f64 / 1e3)
}

/// `rows` under `header` as CSV, each field quoted only where it must be.
fn to_csv(header: &[&str], rows: impl Iterator<Item = Vec<String>>) -> String {
    let mut w = csv::Writer::from_writer(Vec::new());
    // Writing to memory cannot fail; a field is text, so neither can its
    // encoding.
    let _ = w.write_record(header);
    for row in rows {
        let _ = w.write_record(&row);
    }
    let bytes = w.into_inner().unwrap_or_default();
    String::from_utf8(bytes).unwrap_or_default()
}

/// One row per job.
pub fn jobs_csv(run: &SimRun) -> String {
    let header = [
        "job",
        "workload",
        "arrival_s",
        "start_s",
        "finish_s",
        "jct_s",
        "wait_s",
        "completed",
        "requested_workers",
        "min_workers",
        "max_workers",
        "final_workers",
        "scale_ups",
        "scale_downs",
        "restarts",
        "max_nodes",
        "partial_s",
    ];
    to_csv(
        &header,
        run.jobs.iter().map(|j| {
            vec![
                j.name.clone(),
                j.workload.clone(),
                secs(j.arrival_ms),
                opt_s(j.started_ms),
                opt_s(j.finished_ms),
                secs(jct_ms(j, run.end_ms)),
                secs(wait_ms(j, run.end_ms)),
                j.finished_ms.is_some().to_string(),
                j.requested_workers.to_string(),
                j.min_workers.to_string(),
                j.max_workers.to_string(),
                j.final_workers.to_string(),
                j.scale_ups.to_string(),
                j.scale_downs.to_string(),
                j.restarts.to_string(),
                j.max_nodes.to_string(),
                secs(j.partial_ms),
            ]
        }),
    )
}

/// One row per change; each row holds until the next.
pub fn timeline_csv(run: &SimRun) -> String {
    let header = [
        "t_s",
        "gpus_total",
        "gpus_allocated",
        "gpus_training",
        "jobs_queued",
        "jobs_running",
        "jobs_stalled",
        "jobs_done",
    ];
    to_csv(
        &header,
        run.timeline.iter().map(|p| {
            vec![
                secs(p.t_ms),
                run.total_gpus.to_string(),
                p.gpus_allocated.to_string(),
                p.gpus_busy.to_string(),
                p.queued.to_string(),
                p.running.to_string(),
                p.stalled.to_string(),
                p.done.to_string(),
            ]
        }),
    )
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// One self-contained HTML page: the table, the three plots inline, notes.
pub fn html_report(runs: &[Labeled<'_>], command: &str, plots: &[(&str, &str)]) -> String {
    let mut o = String::new();
    let title = match runs.first() {
        Some(f) => format!(
            "Dragon simulation: {} on {}",
            runs.iter()
                .map(|r| r.label.as_str())
                .collect::<Vec<_>>()
                .join(" vs "),
            f.summary.trace
        ),
        None => "Dragon simulation".into(),
    };
    let _ = write!(
        o,
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{}</title>\n<style>\
body{{font-family:system-ui,sans-serif;max-width:960px;margin:2em auto;padding:0 1em;color:#222}}\
table{{border-collapse:collapse;margin:1em 0}}td,th{{border:1px solid #ccc;padding:4px 10px;text-align:right}}\
th:first-child,td:first-child{{text-align:left}}code{{background:#f4f4f4;padding:1px 4px}}\
.bad{{color:#b00;font-weight:bold}}figure{{margin:1.5em 0}}svg{{max-width:100%;height:auto}}</style></head><body>\n",
        esc(&title)
    );
    let _ = writeln!(o, "<h1>{}</h1>", esc(&title));
    let _ = writeln!(o, "<p>Reproduce with <code>{}</code>.</p>", esc(command));
    if let Some(f) = runs.first() {
        let _ = writeln!(
            o,
            "<p>{} GPUs, {} jobs.</p>",
            f.run.total_gpus, f.summary.jobs_total
        );
    }
    if let [first, _, ..] = runs {
        let _ = writeln!(
            o,
            "<p>Under each value of a later run: its ratio to {}'s.</p>",
            esc(&first.label)
        );
    }
    let _ = writeln!(o, "<table><tr><th>metric</th>");
    for r in runs {
        let _ = write!(o, "<th>{}</th>", esc(&r.label));
    }
    let _ = writeln!(o, "</tr>");
    for m in metrics(runs) {
        let _ = write!(o, "<tr><td>{}</td>", m.name);
        for (i, r) in runs.iter().enumerate() {
            let cell = (m.show)(r.summary);
            let class = if cell == "YES" { " class=\"bad\"" } else { "" };
            let _ = write!(o, "<td{class}>{}", esc(&cell));
            if let (Some(value), true) = (m.value, i > 0) {
                let _ = write!(
                    o,
                    "<br><small>{}</small>",
                    esc(&ratio(value(runs[0].summary), value(r.summary)))
                );
            }
            let _ = write!(o, "</td>");
        }
        let _ = writeln!(o, "</tr>");
    }
    let _ = writeln!(o, "</table>\n<ul>");
    for r in runs {
        let _ = writeln!(
            o,
            "<li><b>{}</b>: {}</li>",
            esc(&r.label),
            esc(&outcome(r.summary))
        );
    }
    let _ = writeln!(o, "</ul>");
    for (caption, svg) in plots {
        let _ = writeln!(
            o,
            "<figure>\n{svg}\n<figcaption>{}</figcaption></figure>",
            esc(caption)
        );
    }
    let _ = writeln!(
        o,
        "<h2>How to read this</h2><ul>\
<li><b>JCT</b>: job completion time, submission to finish. <b>Wait</b>: submission until every task of the job runs.</li>\
<li><b>GPUs training</b>: time-averaged share of GPUs held by jobs whose tasks all run and that are not restarting; \
<b>GPUs allocated</b> also counts GPUs held by half-placed or restarting jobs, which do no work.</li>\
<li>Unfinished jobs are counted up to the end of the run (censored), so their JCT is a lower bound.</li>\
<li>The model behind these numbers (speed, restarts, what a deadlock is) is in <code>docs/simulator.md</code>.</li></ul>"
    );
    for r in runs {
        if !r.summary.unfinished_jobs.is_empty() {
            let _ = writeln!(
                o,
                "<details><summary>{}: {} unfinished job(s)</summary><p>{}</p></details>",
                esc(&r.label),
                r.summary.unfinished_jobs.len(),
                esc(&r.summary.unfinished_jobs.join(", "))
            );
        }
    }
    let _ = writeln!(o, "</body></html>");
    o
}

#[cfg(test)]
mod tests;
