//! Published workloads as traces.
//!
//! Pollux's evaluation workloads (OSDI'21 artifact, `traces/pollux`): each
//! job a measured model asking for the replica count the workload gives it,
//! at the workload's batch size (as the artifact runs them under Tiresias
//! and Optimus) or choosing its batch as an AdaptDL job does (as under
//! Pollux: the `-adaptive` variants, or a row with no batch size). The
//! cluster is the artifact's: 16 nodes of 4 GPUs, a scheduling interval of
//! 60 s and 30 s for each re-allocation. A job asks for its replicas (one
//! GPU each) and may run between one and as many as its batch splits over
//! (the artifact's bound for Pollux), so elastic policies may resize it;
//! rigid ones run it at its size.
//!
//! Philly's jobs (`traces/pollux/philly`, the artifact's copy of the
//! Microsoft trace with its sampling filter): each job rigid at its GPU
//! count, one GPU per worker, running its recorded time — the trace tells
//! nothing of how a job would scale.

use anyhow::{Result, anyhow, bail};
use serde::Deserialize;
use serde_json::json;

use super::measured::Measurements;
use super::trace::Trace;

pub mod sia;

/// The bundled workloads: `(name, CSV)`.
pub const POLLUX: &[(&str, &str)] = &[
    (
        "pollux-w1",
        include_str!("../traces/pollux/workloads/workload-1.csv"),
    ),
    (
        "pollux-w2",
        include_str!("../traces/pollux/workloads/workload-2.csv"),
    ),
    (
        "pollux-w3",
        include_str!("../traces/pollux/workloads/workload-3.csv"),
    ),
    (
        "pollux-w4",
        include_str!("../traces/pollux/workloads/workload-4.csv"),
    ),
    (
        "pollux-w5",
        include_str!("../traces/pollux/workloads/workload-5.csv"),
    ),
    (
        "pollux-w6",
        include_str!("../traces/pollux/workloads/workload-6.csv"),
    ),
    (
        "pollux-w7",
        include_str!("../traces/pollux/workloads/workload-7.csv"),
    ),
    (
        "pollux-w8",
        include_str!("../traces/pollux/workloads/workload-8.csv"),
    ),
    (
        "pollux-w1-2x",
        include_str!("../traces/pollux/workloads/workload-1-2x.csv"),
    ),
    (
        "pollux-w2-2x",
        include_str!("../traces/pollux/workloads/workload-2-2x.csv"),
    ),
    (
        "pollux-w3-2x",
        include_str!("../traces/pollux/workloads/workload-3-2x.csv"),
    ),
    (
        "pollux-w4-2x",
        include_str!("../traces/pollux/workloads/workload-4-2x.csv"),
    ),
    (
        "pollux-w5-2x",
        include_str!("../traces/pollux/workloads/workload-5-2x.csv"),
    ),
    (
        "pollux-w6-2x",
        include_str!("../traces/pollux/workloads/workload-6-2x.csv"),
    ),
    (
        "pollux-w7-2x",
        include_str!("../traces/pollux/workloads/workload-7-2x.csv"),
    ),
    (
        "pollux-w8-2x",
        include_str!("../traces/pollux/workloads/workload-8-2x.csv"),
    ),
];

/// Philly's jobs, one row per job: `time,duration,num_gpus`.
const PHILLY: &str = include_str!("../traces/pollux/philly/philly.csv");

/// The bundled cuts of Philly's jobs: the whole trace on 320 GPUs (offered
/// load 0.81), and the multi-GPU jobs of its busiest week (days 63 to 70:
/// 571 jobs) on 256 (0.88).
const PHILLY_CUTS: &[(&str, Cut)] = &[
    (
        "philly",
        Cut {
            window: None,
            multi_gpu: false,
            nodes: 80,
        },
    ),
    (
        "philly-week",
        Cut {
            window: Some((63 * DAY_S, 70 * DAY_S)),
            multi_gpu: true,
            nodes: 64,
        },
    ),
];
const DAY_S: u64 = 24 * 3600;

/// The artifact's cluster.
const NODES: u32 = 16;
const INTERVAL_S: f64 = 60.0;
const REALLOCATION_S: f64 = 30.0;
/// The most jobs one workload file may hold.
const MAX_JOBS: usize = 100_000;

/// One row of a Pollux workload.
#[derive(Debug, Deserialize)]
struct Row {
    name: String,
    time: f64,
    application: String,
    num_replicas: u32,
    #[serde(default)]
    batch_size: Option<u32>,
}

/// How a workload's jobs pick their batch size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Batches {
    /// The row's (adaptive where a row gives none).
    AsGiven,
    /// Every job adapts its batch, whatever the row says.
    Adaptive,
}

/// A bundled workload by name: `pollux-wN[-2x][-adaptive]`, `philly`,
/// `philly-week`.
pub fn bundled(name: &str) -> Option<Result<Trace>> {
    if let Some(&(_, cut)) = PHILLY_CUTS.iter().find(|(n, _)| *n == name) {
        return Some(philly(PHILLY, &format!("bundled trace `{name}`"), cut));
    }
    let (base, batches) = match name.strip_suffix("-adaptive") {
        Some(base) => (base, Batches::Adaptive),
        None => (name, Batches::AsGiven),
    };
    let (_, text) = POLLUX.iter().find(|(n, _)| *n == base)?;
    Some(pollux(text, &format!("bundled workload `{name}`"), batches))
}

/// A Pollux workload CSV (`name,time,application,num_replicas,batch_size`)
/// as a trace; `origin` names it in messages.
///
/// # Errors
/// A malformed row, or a job the trace refuses, named by row.
pub fn pollux(text: &str, origin: &str, batches: Batches) -> Result<Trace> {
    let jobs = pollux_jobs(text, origin, batches)?;
    let doc = json!({
        "description": format!("Pollux (OSDI'21) evaluation workload: {} jobs of six measured models on {NODES} nodes x 4 GPUs", jobs.len()),
        "model": {"scale_interval_s": INTERVAL_S, "restart_s": REALLOCATION_S},
        "cluster": {"nodes": [{"name_prefix": "gpu", "count": NODES, "cpu": 64, "memory_gib": 256, "gpus": 4}]},
        "jobs": jobs,
    });
    Trace::from_document(doc, origin)
}

/// The jobs of a workload in Pollux's format, as trace documents: each a
/// measured model at the replica count the row asks, elastic from one to
/// as many as its batch splits over (the artifact's bound for Pollux).
fn pollux_jobs(text: &str, origin: &str, batches: Batches) -> Result<Vec<serde_json::Value>> {
    let mut reader = csv::Reader::from_reader(text.as_bytes());
    let mut jobs = Vec::new();
    for (i, row) in reader.deserialize::<Row>().enumerate() {
        let row = row.map_err(|e| anyhow!("{origin}: row {}: {e}", i + 2))?;
        if jobs.len() == MAX_JOBS {
            bail!("{origin}: more than {MAX_JOBS} jobs");
        }
        let batch = match batches {
            Batches::AsGiven => row.batch_size,
            Batches::Adaptive => None,
        };
        let most = Measurements::bundled(&row.application)
            .map_or(row.num_replicas, |m| {
                m.max_replicas(batch.unwrap_or(m.max_batch_size))
            })
            .max(row.num_replicas);
        let measured = match batch {
            Some(b) => json!({"model": row.application, "batch_size": b}),
            None => json!({"model": row.application}),
        };
        jobs.push(json!({
            "name": row.name,
            "arrival_s": row.time,
            "workload": row.application,
            "measured": measured,
            "workers": {"count": row.num_replicas, "min": 1, "max": most,
                        "cpu": 1, "memory_gib": 4, "gpus": 1},
        }));
    }
    Ok(jobs)
}

/// Which of Philly's jobs a trace takes, and on what cluster.
#[derive(Debug, Clone, Copy)]
pub struct Cut {
    /// Jobs submitted in `[from, to)` seconds since the first (all: `None`),
    /// their arrivals counted from `from`.
    pub window: Option<(u64, u64)>,
    /// Only jobs of more than one GPU.
    pub multi_gpu: bool,
    /// Nodes of 4 GPUs.
    pub nodes: u32,
}

/// The whole trace on 320 GPUs.
impl Default for Cut {
    fn default() -> Self {
        PHILLY_CUTS[0].1
    }
}

/// One row of Philly's jobs.
#[derive(Debug, Deserialize)]
struct PhillyRow {
    time: f64,
    duration: f64,
    num_gpus: u32,
}

/// The header of Philly's jobs as bundled.
pub const PHILLY_HEADER: &str = "time,duration,num_gpus";

/// Philly's jobs (`time,duration,num_gpus`) as a trace of rigid jobs;
/// `origin` names it in messages.
///
/// # Errors
/// A malformed row, or a job the trace refuses, named by row.
pub fn philly(text: &str, origin: &str, cut: Cut) -> Result<Trace> {
    let mut reader = csv::Reader::from_reader(text.as_bytes());
    let mut jobs = Vec::new();
    let from = cut.window.map_or(0.0, |(from, _)| from as f64);
    for (i, row) in reader.deserialize::<PhillyRow>().enumerate() {
        let row = row.map_err(|e| anyhow!("{origin}: row {}: {e}", i + 2))?;
        let inside = cut
            .window
            .is_none_or(|(from, to)| (from as f64..to as f64).contains(&row.time));
        if !inside || (cut.multi_gpu && row.num_gpus < 2) {
            continue;
        }
        if jobs.len() == MAX_JOBS {
            bail!("{origin}: more than {MAX_JOBS} jobs");
        }
        let n = row.num_gpus;
        jobs.push(json!({
            "name": format!("philly-{}", i + 1),
            "arrival_s": row.time - from,
            "duration_s": row.duration,
            "workload": format!("{n}gpu"),
            "workers": {"count": n, "min": n, "max": n,
                        "cpu": 1, "memory_gib": 4, "gpus": 1},
        }));
    }
    let doc = json!({
        "description": format!("Philly's jobs (Jeon et al., ATC'19; Pollux's copy and filter): {} rigid jobs on {} nodes x 4 GPUs", jobs.len(), cut.nodes),
        "model": {"scale_interval_s": INTERVAL_S},
        "cluster": {"nodes": [{"name_prefix": "gpu", "count": cut.nodes, "cpu": 64, "memory_gib": 256, "gpus": 4}]},
        "jobs": jobs,
    });
    Trace::from_document(doc, origin)
}

/// A workload CSV, Pollux's or Philly's by its header.
///
/// # Errors
/// As [`pollux`] or [`philly`].
pub fn csv(text: &str, origin: &str) -> Result<Trace> {
    match text.lines().next().map(str::trim) {
        Some(PHILLY_HEADER) => philly(text, origin, Cut::default()),
        _ => pollux(text, origin, Batches::AsGiven),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::speed::Speed;

    #[test]
    fn every_bundled_workload_loads_with_measured_jobs() {
        for (name, _) in POLLUX {
            let t = Trace::load(name).unwrap_or_else(|e| panic!("{e:#}"));
            assert_eq!(t.total_gpus(), 64, "{name}");
            assert!(t.jobs.len() >= 160, "{name}: {}", t.jobs.len());
            assert!(
                t.jobs
                    .iter()
                    .all(|j| matches!(j.speed, Speed::Measured { .. })),
                "{name}"
            );
        }
        let t = Trace::load("pollux-w6").unwrap();
        let first = &t.jobs[0];
        assert_eq!(first.name.as_str(), "cifar10-0");
        assert_eq!((first.job.workers, first.job.min_workers), (6, 1));
        // 2048 samples split over at most 64 GPUs of at least 32.
        assert_eq!(first.job.max_workers, 64);
        // Alone at 6 GPUs packed, the artifact's model takes 910 s.
        assert!(
            (first.work_ms / 1000.0 - 910.0).abs() < 30.0,
            "{}",
            first.work_ms
        );
    }

    #[test]
    fn philly_loads_whole_and_as_its_busiest_week() {
        let whole = Trace::load("philly").unwrap_or_else(|e| panic!("{e:#}"));
        // Pollux's filter (at least 60 s, under 1000 GPU-hours) keeps 74,428
        // of the trace's 82,247 jobs.
        assert_eq!(whole.jobs.len(), 74_428);
        assert_eq!(whole.total_gpus(), 320);
        let first = &whole.jobs[0];
        assert_eq!(first.name.as_str(), "philly-1");
        assert_eq!((first.arrival_ms, first.work_ms), (0, 3_256_045_000.0));
        assert!(
            whole
                .jobs
                .iter()
                .all(|j| j.job.min_workers == j.job.workers && j.job.max_workers == j.job.workers)
        );
        let week = Trace::load("philly-week").unwrap();
        assert_eq!((week.jobs.len(), week.total_gpus()), (571, 256));
        assert!(
            week.jobs
                .iter()
                .all(|j| j.job.workers > 1 && j.arrival_ms < 7 * DAY_S * 1000)
        );
    }

    #[test]
    fn a_csv_is_read_as_pollux_or_philly_by_its_header() {
        let t = csv("time,duration,num_gpus\n5,60,2\n", "p.csv").unwrap();
        assert_eq!((t.jobs.len(), t.jobs[0].job.workers), (1, 2));
        let e = format!(
            "{:#}",
            csv("time,duration,num_gpus\n5,-1,2\n", "p.csv").unwrap_err()
        );
        assert!(e.contains("p.csv") && e.contains("duration_s"), "{e}");
        let e = format!(
            "{:#}",
            csv("time,duration,num_gpus\n5,60,lots\n", "p.csv").unwrap_err()
        );
        assert!(e.contains("p.csv: row 2"), "{e}");
        let t = csv(
            "name,time,application,num_replicas,batch_size\na,0,cifar10,2,128\n",
            "w.csv",
        )
        .unwrap();
        assert_eq!(t.jobs[0].name.as_str(), "a");
    }

    #[test]
    fn a_bad_row_or_model_is_named() {
        let head = "name,time,application,num_replicas,batch_size\n";
        let e = format!(
            "{:#}",
            pollux(
                &format!("{head}a,0,cifar10,two,128\n"),
                "w.csv",
                Batches::AsGiven
            )
            .unwrap_err()
        );
        assert!(e.contains("w.csv: row 2"), "{e}");
        let e = format!(
            "{:#}",
            pollux(
                &format!("{head}a,0,gpt5,2,128\n"),
                "w.csv",
                Batches::AsGiven
            )
            .unwrap_err()
        );
        assert!(
            e.contains("jobs[0] (a).measured.model: no measurements of `gpt5`"),
            "{e}"
        );
        let e = format!(
            "{:#}",
            pollux(
                &format!("{head}a,0,cifar10,2,64\n"),
                "w.csv",
                Batches::AsGiven
            )
            .unwrap_err()
        );
        assert!(
            e.contains("measured.batch_size: `cifar10` was measured at 128 to 4096, got 64"),
            "{e}"
        );
    }
}
