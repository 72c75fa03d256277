//! Published workloads as traces: Pollux's evaluation workloads (OSDI'21
//! artifact, `traces/pollux`), each job a measured model asking for the
//! replica count the workload gives it, at the workload's batch size (as the
//! artifact runs them under Tiresias and Optimus) or choosing its batch as
//! an AdaptDL job does (as under Pollux: the `-adaptive` variants, or a row
//! with no batch size).
//!
//! The cluster is the artifact's: 16 nodes of 4 GPUs, a scheduling
//! interval of 60 s and 30 s for each re-allocation. A job asks for its
//! replicas (one GPU each) and may run between one and as many as its batch
//! splits over (the artifact's bound for Pollux), so elastic policies may
//! resize it; rigid ones run it at its size.

use anyhow::{Result, anyhow, bail};
use serde::Deserialize;
use serde_json::json;

use super::measured::Measurements;
use super::trace::Trace;

/// The bundled workloads: `(name, CSV)`.
pub const POLLUX: &[(&str, &str)] = &[
    (
        "pollux-w1",
        include_str!("../../traces/pollux/workloads/workload-1.csv"),
    ),
    (
        "pollux-w2",
        include_str!("../../traces/pollux/workloads/workload-2.csv"),
    ),
    (
        "pollux-w3",
        include_str!("../../traces/pollux/workloads/workload-3.csv"),
    ),
    (
        "pollux-w4",
        include_str!("../../traces/pollux/workloads/workload-4.csv"),
    ),
    (
        "pollux-w5",
        include_str!("../../traces/pollux/workloads/workload-5.csv"),
    ),
    (
        "pollux-w6",
        include_str!("../../traces/pollux/workloads/workload-6.csv"),
    ),
    (
        "pollux-w7",
        include_str!("../../traces/pollux/workloads/workload-7.csv"),
    ),
    (
        "pollux-w8",
        include_str!("../../traces/pollux/workloads/workload-8.csv"),
    ),
    (
        "pollux-w1-2x",
        include_str!("../../traces/pollux/workloads/workload-1-2x.csv"),
    ),
    (
        "pollux-w2-2x",
        include_str!("../../traces/pollux/workloads/workload-2-2x.csv"),
    ),
    (
        "pollux-w3-2x",
        include_str!("../../traces/pollux/workloads/workload-3-2x.csv"),
    ),
    (
        "pollux-w4-2x",
        include_str!("../../traces/pollux/workloads/workload-4-2x.csv"),
    ),
    (
        "pollux-w5-2x",
        include_str!("../../traces/pollux/workloads/workload-5-2x.csv"),
    ),
    (
        "pollux-w6-2x",
        include_str!("../../traces/pollux/workloads/workload-6-2x.csv"),
    ),
    (
        "pollux-w7-2x",
        include_str!("../../traces/pollux/workloads/workload-7-2x.csv"),
    ),
    (
        "pollux-w8-2x",
        include_str!("../../traces/pollux/workloads/workload-8-2x.csv"),
    ),
];

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

/// A bundled workload by name: `pollux-wN[-2x][-adaptive]`.
pub fn bundled(name: &str) -> Option<Result<Trace>> {
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
    let doc = json!({
        "description": format!("Pollux (OSDI'21) evaluation workload: {} jobs of six measured models on {NODES} nodes x 4 GPUs", jobs.len()),
        "model": {"scale_interval_s": INTERVAL_S, "restart_s": REALLOCATION_S},
        "cluster": {"nodes": [{"name_prefix": "gpu", "count": NODES, "cpu": 64, "memory_gib": 256, "gpus": 4}]},
        "jobs": jobs,
    });
    Trace::from_document(doc, origin)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::speed::Speed;

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
