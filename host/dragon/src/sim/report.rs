//! Output of runs: terminal tables, CSV files, SVG plots (plotters' SVG
//! backend) and a self-contained HTML report.

use std::fmt::Write as _;

use anyhow::{Result, anyhow};
use plotters::prelude::*;

use super::engine::{Point, SimRun};
use super::metrics::{Summary, jct_ms, wait_ms};

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
            format!(
                "{} / {} ({} restarts)",
                s.scale_ups, s.scale_downs, s.restarts
            ),
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

/// Relative change of `b` against `a` for a lower-is-better metric.
fn ratio(a: f64, b: f64) -> String {
    if a == 0.0 {
        return if b == 0.0 { "=".into() } else { "n/a".into() };
    }
    let r = b / a;
    format!("{r:.2}x ({:+.0} %)", (r - 1.0) * 100.0)
}

/// A row of the comparison tables: the label, how a run's value is shown,
/// and the number ratios compare (none for counts and flags).
type MetricRow = (
    &'static str,
    fn(&Summary) -> String,
    Option<fn(&Summary) -> f64>,
);

/// The rows of both comparison tables, the terminal's and the HTML
/// report's; fragmentation only where a run has topology levels.
fn metric_rows(runs: &[Labeled<'_>]) -> Vec<MetricRow> {
    let topology = runs.iter().any(|r| r.summary.largest_free_domain.is_some());
    let mut rows: Vec<MetricRow> = vec![
        ("average JCT", |s| human(s.avg_jct_s), Some(|s| s.avg_jct_s)),
        ("p50 JCT", |s| human(s.p50_jct_s), Some(|s| s.p50_jct_s)),
        ("p95 JCT", |s| human(s.p95_jct_s), Some(|s| s.p95_jct_s)),
        (
            "average wait",
            |s| human(s.avg_wait_s),
            Some(|s| s.avg_wait_s),
        ),
        ("makespan", |s| human(s.makespan_s), Some(|s| s.makespan_s)),
        ("GPUs training", |s| pct(s.gpu_util), Some(|s| s.gpu_util)),
        (
            "GPUs allocated",
            |s| pct(s.gpu_alloc),
            Some(|s| s.gpu_alloc),
        ),
        (
            "jobs completed",
            |s| format!("{}/{}", s.jobs_completed, s.jobs_total),
            None,
        ),
        (
            "scale ups/downs",
            |s| format!("{}/{}", s.scale_ups, s.scale_downs),
            None,
        ),
        (
            "deadlocked",
            |s| {
                if s.deadlocked {
                    "YES".into()
                } else {
                    "no".into()
                }
            },
            None,
        ),
    ];
    if topology {
        rows.insert(
            7,
            (
                "largest free domain",
                |s| {
                    s.largest_free_domain
                        .map_or_else(|| "-".to_string(), |g| format!("{g} GPUs"))
                },
                None,
            ),
        );
    }
    rows
}

/// The `dragon compare` table: one column per run, ratios against the first.
pub fn comparison_table(runs: &[Labeled<'_>]) -> String {
    let mut o = String::new();
    let Some(first) = runs.first() else { return o };
    let _ = writeln!(
        o,
        "{} ({} GPUs, {} jobs)",
        first.summary.trace, first.run.total_gpus, first.summary.jobs_total
    );
    let metrics = metric_rows(runs);
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
    for (name, show, value) in metrics {
        let _ = write!(o, "  {name:<16}");
        for r in runs {
            let _ = write!(o, "{:>w$}", show(r.summary));
        }
        if let Some(value) = value {
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
    for r in runs {
        let _ = writeln!(o, "  {}: {}", r.label, outcome(r.summary));
    }
    o
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

/// A time unit that keeps axis numbers readable: `(name, ms per unit)`.
fn time_unit(ms: f64) -> (&'static str, f64) {
    if ms <= 3.0 * 3600e3 {
        ("minutes", 60e3)
    } else if ms <= 72.0 * 3600e3 {
        ("hours", 3600e3)
    } else {
        ("days", 86400e3)
    }
}

/// Time-average of `f` over `buckets` equal slices of [0, end]: `(mid, avg)`.
fn bucketed(
    timeline: &[Point],
    end_ms: u64,
    buckets: usize,
    f: impl Fn(&Point) -> f64,
) -> Vec<(f64, f64)> {
    if end_ms == 0 || timeline.is_empty() {
        return Vec::new();
    }
    let width = end_ms as f64 / buckets as f64;
    let mut sums = vec![0.0; buckets];
    for (k, p) in timeline.iter().enumerate() {
        let a = p.t_ms as f64;
        let b = timeline
            .get(k + 1)
            .map_or(end_ms as f64, |n| n.t_ms as f64)
            .min(end_ms as f64);
        if b <= a {
            continue;
        }
        let v = f(p);
        // Walk the buckets by index: recomputing the index from `x` can
        // round back into the bucket just left.
        let mut x = a;
        let mut i = ((a / width) as usize).min(buckets - 1);
        while x < b && i < buckets {
            let edge = if i + 1 == buckets {
                b
            } else {
                ((i + 1) as f64 * width).min(b)
            };
            if edge > x {
                sums[i] += v * (edge - x);
                x = edge;
            }
            i += 1;
        }
    }
    sums.iter()
        .enumerate()
        .map(|(i, s)| ((i as f64 + 0.5) * width, s / width))
        .collect()
}

const COLORS: &[RGBColor] = &[
    RGBColor(0xd6, 0x27, 0x28),
    RGBColor(0x1f, 0x77, 0xb4),
    RGBColor(0x2c, 0xa0, 0x2c),
    RGBColor(0xff, 0x7f, 0x0e),
    RGBColor(0x94, 0x67, 0xbd),
    RGBColor(0x8c, 0x56, 0x4b),
];

fn color(i: usize) -> RGBColor {
    COLORS[i % COLORS.len()]
}

type Line = (String, RGBColor, u32, Vec<(f64, f64)>);

/// A line chart of `lines` (label, colour, width, points) as an SVG string.
fn line_chart(
    title: &str,
    x_desc: &str,
    y_desc: &str,
    x: (f64, f64),
    y: (f64, f64),
    log_x: bool,
    legend: SeriesLabelPosition,
    lines: &[Line],
) -> Result<String> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (860, 430)).into_drawing_area();
        let e = |e: &dyn std::fmt::Display| anyhow!("cannot draw the plot `{title}`: {e}");
        root.fill(&WHITE).map_err(|x| e(&x))?;
        let mut builder = ChartBuilder::on(&root);
        builder
            .caption(title, ("sans-serif", 20))
            .margin(12)
            .x_label_area_size(42)
            .y_label_area_size(60);
        macro_rules! draw {
            ($chart:expr) => {{
                let mut chart = $chart;
                chart
                    .configure_mesh()
                    .x_desc(x_desc)
                    .y_desc(y_desc)
                    .y_label_formatter(&|v| {
                        if y_desc.starts_with('%') && *v > 100.0 {
                            String::new()
                        } else {
                            format!("{v:.0}")
                        }
                    })
                    .light_line_style(RGBColor(0xee, 0xee, 0xee))
                    .draw()
                    .map_err(|x| e(&x))?;
                for (label, c, width, points) in lines {
                    let style = c.stroke_width(*width);
                    chart
                        .draw_series(LineSeries::new(points.iter().copied(), style))
                        .map_err(|x| e(&x))?
                        .label(label.as_str())
                        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 22, y)], style));
                }
                chart
                    .configure_series_labels()
                    .position(legend)
                    .background_style(WHITE.mix(0.85))
                    .border_style(RGBColor(0xaa, 0xaa, 0xaa))
                    .draw()
                    .map_err(|x| e(&x))?;
            }};
        }
        if log_x {
            draw!(
                builder
                    .build_cartesian_2d((x.0..x.1).log_scale(), y.0..y.1)
                    .map_err(|x| e(&x))?
            );
        } else {
            draw!(
                builder
                    .build_cartesian_2d(x.0..x.1, y.0..y.1)
                    .map_err(|x| e(&x))?
            );
        }
        root.present().map_err(|x| e(&x))?;
    }
    Ok(svg)
}

const BUCKETS: usize = 240;

/// GPU utilization over time: training (thick) and allocated (thin) per run.
pub fn utilization_svg(runs: &[Labeled<'_>]) -> Result<String> {
    let end = runs.iter().map(|r| r.run.end_ms).max().unwrap_or(0).max(1);
    let (unit, per) = time_unit(end as f64);
    let mut lines = Vec::new();
    for (i, r) in runs.iter().enumerate() {
        let total = r.run.total_gpus.max(1) as f64;
        let scale =
            |v: Vec<(f64, f64)>| v.into_iter().map(|(t, y)| (t / per, y)).collect::<Vec<_>>();
        let busy = bucketed(&r.run.timeline, r.run.end_ms, BUCKETS, |p| {
            p.gpus_busy as f64 * 100.0 / total
        });
        let alloc = bucketed(&r.run.timeline, r.run.end_ms, BUCKETS, |p| {
            p.gpus_allocated as f64 * 100.0 / total
        });
        lines.push((
            format!("{} training ({:.1} %)", r.label, r.summary.gpu_util * 100.0),
            color(i),
            2,
            scale(busy),
        ));
        lines.push((
            format!(
                "{} allocated ({:.1} %)",
                r.label,
                r.summary.gpu_alloc * 100.0
            ),
            color(i).mix(0.45).to_rgba().into_rgb(),
            1,
            scale(alloc),
        ));
    }
    line_chart(
        "GPU utilization over time",
        &format!("time ({unit})"),
        "% of GPUs",
        (0.0, end as f64 / per),
        // Headroom above 100 % for the legend.
        (0.0, 140.0),
        false,
        SeriesLabelPosition::UpperRight,
        &lines,
    )
}

trait IntoRgb {
    fn into_rgb(self) -> RGBColor;
}

impl IntoRgb for RGBAColor {
    /// Blend over white (SVG strokes with opacity look the same; this keeps
    /// the legend swatch identical to the line).
    fn into_rgb(self) -> RGBColor {
        let (r, g, b) = self.rgb();
        let a = self.alpha();
        let mix = |c: u8| (f64::from(c) * a + 255.0 * (1.0 - a)).round() as u8;
        RGBColor(mix(r), mix(g), mix(b))
    }
}

/// Jobs waiting (thick) and jobs holding resources without training (thin).
pub fn queue_svg(runs: &[Labeled<'_>]) -> Result<String> {
    let end = runs.iter().map(|r| r.run.end_ms).max().unwrap_or(0).max(1);
    let (unit, per) = time_unit(end as f64);
    let mut lines = Vec::new();
    let mut top: f64 = 1.0;
    for (i, r) in runs.iter().enumerate() {
        let scale =
            |v: Vec<(f64, f64)>| v.into_iter().map(|(t, y)| (t / per, y)).collect::<Vec<_>>();
        let queued = scale(bucketed(&r.run.timeline, r.run.end_ms, BUCKETS, |p| {
            f64::from(p.queued)
        }));
        let stalled = scale(bucketed(&r.run.timeline, r.run.end_ms, BUCKETS, |p| {
            f64::from(p.stalled)
        }));
        top = queued
            .iter()
            .chain(&stalled)
            .map(|p| p.1)
            .fold(top, f64::max);
        lines.push((format!("{} waiting", r.label), color(i), 2, queued));
        lines.push((
            format!("{} half placed or restarting", r.label),
            color(i).mix(0.45).to_rgba().into_rgb(),
            1,
            stalled,
        ));
    }
    line_chart(
        "Jobs waiting over time",
        &format!("time ({unit})"),
        "jobs",
        (0.0, end as f64 / per),
        (0.0, top * 1.5),
        false,
        SeriesLabelPosition::UpperRight,
        &lines,
    )
}

/// Cumulative distribution of job completion times (censored ones included).
pub fn jct_cdf_svg(runs: &[Labeled<'_>]) -> Result<String> {
    let all: Vec<Vec<f64>> = runs
        .iter()
        .map(|r| {
            let mut v: Vec<f64> = r
                .run
                .jobs
                .iter()
                .map(|j| jct_ms(j, r.run.end_ms) as f64)
                .collect();
            v.sort_by(f64::total_cmp);
            v
        })
        .collect();
    let max = all.iter().flatten().copied().fold(1.0, f64::max);
    let min = all
        .iter()
        .flatten()
        .copied()
        .filter(|&v| v > 0.0)
        .fold(max, f64::min);
    let (unit, per) = time_unit(max);
    let log = max / min > 30.0;
    let mut lines = Vec::new();
    for (i, (r, v)) in runs.iter().zip(&all).enumerate() {
        let n = v.len().max(1) as f64;
        let step = (v.len() / 1500).max(1);
        let mut points = Vec::new();
        let mut prev = 0.0;
        for (k, &x) in v.iter().enumerate() {
            let y = (k + 1) as f64 * 100.0 / n;
            if k % step == 0 || k + 1 == v.len() {
                let x = (x.max(min)) / per;
                points.push((x, prev));
                points.push((x, y));
            }
            prev = y;
        }
        let mut label = format!("{} (avg {})", r.label, human(r.summary.avg_jct_s));
        if r.summary.censored {
            label.push_str(", censored");
        }
        lines.push((label, color(i), 2, points));
    }
    let lo = if log { min / per } else { 0.0 };
    line_chart(
        "Job completion time (CDF)",
        &format!("JCT ({unit}{})", if log { ", log scale" } else { "" }),
        "% of jobs",
        (lo, max / per * 1.05),
        (0.0, 101.0),
        log,
        SeriesLabelPosition::LowerRight,
        &lines,
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
    let _ = writeln!(o, "<table><tr><th>metric</th>");
    for r in runs {
        let _ = write!(o, "<th>{}</th>", esc(&r.label));
    }
    if let Some(first) = runs.first() {
        for r in &runs[1..] {
            let _ = write!(o, "<th>{} vs {}</th>", esc(&r.label), esc(&first.label));
        }
    }
    let _ = writeln!(o, "</tr>");
    let rows = metric_rows(runs);
    for (name, show, value) in rows {
        let _ = write!(o, "<tr><td>{name}</td>");
        for r in runs {
            let cell = show(r.summary);
            let class = if cell == "YES" { " class=\"bad\"" } else { "" };
            let _ = write!(o, "<td{class}>{}</td>", esc(&cell));
        }
        if let Some(first) = runs.first() {
            for r in &runs[1..] {
                let cell = value
                    .map(|v| ratio(v(first.summary), v(r.summary)))
                    .unwrap_or_default();
                let _ = write!(o, "<td>{}</td>", esc(&cell));
            }
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
