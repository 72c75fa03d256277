//! The report's plots as SVG strings (plotters' SVG backend). A few runs
//! share one chart; more than [`OVERLAID_AT_MOST`] get one small panel each
//! for the time series, on shared axes, because a dozen overlapping lines
//! cannot be told apart.

use anyhow::{Result, anyhow};
use plotters::coord::Shift;
use plotters::prelude::*;

use super::{Labeled, human};
use dragon_sim::engine::Point;
use dragon_sim::metrics::jct_ms;

/// The most runs whose time series are overlaid in one chart (and whose
/// ratios the terminal table shows as columns).
pub const OVERLAID_AT_MOST: usize = 2;

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
pub(super) fn bucketed(
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

/// A line: label, colour, stroke width and points.
type Line = (String, RGBColor, u32, Vec<(f64, f64)>);

/// What a chart shows besides its lines.
struct Axes<'a> {
    title: &'a str,
    x_desc: &'a str,
    y_desc: &'a str,
    x: (f64, f64),
    y: (f64, f64),
    log_x: bool,
    legend: SeriesLabelPosition,
}

type Area<'a> = DrawingArea<SVGBackend<'a>, Shift>;

fn draw_error(title: &str, e: &dyn std::fmt::Display) -> anyhow::Error {
    anyhow!("cannot draw the plot `{title}`: {e}")
}

/// An SVG document of `size` pixels, white, drawn by `paint`.
fn svg(
    title: &str,
    size: (u32, u32),
    paint: impl FnOnce(&Area<'_>) -> Result<()>,
) -> Result<String> {
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, size).into_drawing_area();
        root.fill(&WHITE).map_err(|x| draw_error(title, &x))?;
        paint(&root)?;
        root.present().map_err(|x| draw_error(title, &x))?;
    }
    Ok(out)
}

/// `lines` on `axes` inside `area`, with a caption of `caption_px`.
fn draw(area: &Area<'_>, axes: &Axes<'_>, caption_px: u32, lines: &[Line]) -> Result<()> {
    let e = |x: &dyn std::fmt::Display| draw_error(axes.title, x);
    let mut builder = ChartBuilder::on(area);
    builder
        .caption(axes.title, ("sans-serif", caption_px))
        .margin(12)
        .x_label_area_size(42)
        .y_label_area_size(60);
    macro_rules! draw {
        ($chart:expr) => {{
            let mut chart = $chart;
            chart
                .configure_mesh()
                .x_desc(axes.x_desc)
                .y_desc(axes.y_desc)
                .y_label_formatter(&|v| {
                    // Percent axes have headroom above 100 for the legend.
                    if axes.y_desc.starts_with('%') && *v > 100.0 {
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
                .position(axes.legend.clone())
                .background_style(WHITE.mix(0.85))
                .border_style(RGBColor(0xaa, 0xaa, 0xaa))
                .draw()
                .map_err(|x| e(&x))?;
        }};
    }
    let (x, y) = (axes.x, axes.y);
    if axes.log_x {
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
    Ok(())
}

/// One chart of all `lines`.
fn line_chart(axes: &Axes<'_>, lines: &[Line]) -> Result<String> {
    svg(axes.title, (860, 430), |root| draw(root, axes, 20, lines))
}

const PANEL_COLUMNS: usize = 2;
const PANEL_HEIGHT: u32 = 260;

/// One small chart per `(title, lines)`, two to a row, all on the axes of
/// `axes` so that heights compare across panels.
fn small_multiples(axes: &Axes<'_>, panels: Vec<(&str, Vec<Line>)>) -> Result<String> {
    let rows = panels.len().div_ceil(PANEL_COLUMNS).max(1);
    let height = 40 + PANEL_HEIGHT * u32::try_from(rows).unwrap_or(u32::MAX / PANEL_HEIGHT);
    svg(axes.title, (860, height), |root| {
        let body = root
            .titled(axes.title, ("sans-serif", 20))
            .map_err(|x| draw_error(axes.title, &x))?;
        let cells = body.split_evenly((rows, PANEL_COLUMNS));
        for (cell, (title, lines)) in cells.iter().zip(&panels) {
            let panel = Axes {
                title,
                legend: axes.legend.clone(),
                ..*axes
            };
            draw(cell, &panel, 15, lines)?;
        }
        Ok(())
    })
}

/// Each run's `lines` overlaid (labels prefixed with the run's) for a few
/// runs, one panel per run for more.
fn by_run(runs: &[Labeled<'_>], axes: &Axes<'_>, per_run: Vec<Vec<Line>>) -> Result<String> {
    if runs.len() <= OVERLAID_AT_MOST {
        let lines: Vec<Line> = runs
            .iter()
            .zip(per_run)
            .flat_map(|(r, lines)| {
                lines
                    .into_iter()
                    .map(move |(l, c, w, p)| (format!("{} {l}", r.label), c, w, p))
            })
            .collect();
        line_chart(axes, &lines)
    } else {
        let panels = runs.iter().map(|r| r.label.as_str()).zip(per_run).collect();
        small_multiples(axes, panels)
    }
}

const BUCKETS: usize = 240;

/// The latest end of `runs`, at least 1 ms.
fn end_ms(runs: &[Labeled<'_>]) -> u64 {
    runs.iter().map(|r| r.run.end_ms).max().unwrap_or(0).max(1)
}

/// `f` over the run's time, bucketed, with time in units of `per` ms.
fn over_time(r: &Labeled<'_>, per: f64, f: impl Fn(&Point) -> f64) -> Vec<(f64, f64)> {
    bucketed(&r.run.timeline, r.run.end_ms, BUCKETS, f)
        .into_iter()
        .map(|(t, y)| (t / per, y))
        .collect()
}

/// The thin companion of a run's colour.
fn faded(i: usize) -> RGBColor {
    color(i).mix(0.45).to_rgba().into_rgb()
}

/// GPU utilization over time: training (thick) and allocated (thin) per run.
pub fn utilization_svg(runs: &[Labeled<'_>]) -> Result<String> {
    let end = end_ms(runs);
    let (unit, per) = time_unit(end as f64);
    let per_run = runs
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let total = r.run.total_gpus.max(1) as f64;
            vec![
                (
                    format!("training ({:.1} %)", r.summary.gpu_util * 100.0),
                    color(i),
                    2,
                    over_time(r, per, |p| p.gpus_busy as f64 * 100.0 / total),
                ),
                (
                    format!("allocated ({:.1} %)", r.summary.gpu_alloc * 100.0),
                    faded(i),
                    1,
                    over_time(r, per, |p| p.gpus_allocated as f64 * 100.0 / total),
                ),
            ]
        })
        .collect();
    let x_desc = format!("time ({unit})");
    let axes = Axes {
        title: "GPU utilization over time",
        x_desc: &x_desc,
        y_desc: "% of GPUs",
        x: (0.0, end as f64 / per),
        // Headroom above 100 % for the legend.
        y: (0.0, 140.0),
        log_x: false,
        legend: SeriesLabelPosition::UpperRight,
    };
    by_run(runs, &axes, per_run)
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
    let end = end_ms(runs);
    let (unit, per) = time_unit(end as f64);
    let per_run: Vec<Vec<Line>> = runs
        .iter()
        .enumerate()
        .map(|(i, r)| {
            vec![
                (
                    "waiting".to_string(),
                    color(i),
                    2,
                    over_time(r, per, |p| f64::from(p.queued)),
                ),
                (
                    "half placed or restarting".to_string(),
                    faded(i),
                    1,
                    over_time(r, per, |p| f64::from(p.stalled)),
                ),
            ]
        })
        .collect();
    let top = per_run
        .iter()
        .flatten()
        .flat_map(|line| &line.3)
        .map(|p| p.1)
        .fold(1.0, f64::max);
    let x_desc = format!("time ({unit})");
    let axes = Axes {
        title: "Jobs waiting over time",
        x_desc: &x_desc,
        y_desc: "jobs",
        x: (0.0, end as f64 / per),
        y: (0.0, top * 1.5),
        log_x: false,
        legend: SeriesLabelPosition::UpperRight,
    };
    by_run(runs, &axes, per_run)
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
    let x_desc = format!("JCT ({unit}{})", if log { ", log scale" } else { "" });
    let axes = Axes {
        title: "Job completion time (CDF)",
        x_desc: &x_desc,
        y_desc: "% of jobs",
        x: (lo, max / per * 1.05),
        y: (0.0, 101.0),
        log_x: log,
        legend: SeriesLabelPosition::LowerRight,
    };
    line_chart(&axes, &lines)
}
