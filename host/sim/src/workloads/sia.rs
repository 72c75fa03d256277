//! Sia's workloads (Jayaram Subramanya et al., SOSP'23; artifact
//! `siasosp23/artifacts`, `sia-simulator/`) imported from a checkout.
//!
//! The artifact carries no licence, so nothing of it is bundled: `import`
//! converts a checkout the user has into a directory of traces that run
//! as any trace file does. Its Saturn workloads (ten of 160 jobs, eight
//! hours of submissions sampled from the Helios traces) run on its
//! heterogeneous cluster: six nodes of four T4s (AWS g4dn.12xlarge), three
//! of eight RTX 2080 Tis and two DGX A100s of eight. Each of Pollux's models
//! was measured again on each type (`traces/<model>/placements-<type>.csv`,
//! `scalability-<type>.csv`; the T4 tables are Pollux's own).
//!
//! What Sia's simulator sets beside the tables is kept as it sets it
//! (`applications.py`, `simulator_config.py`): epochs per model, its
//! calibration of each model's speed to its real runs (`SLOWDOWNS`), each
//! model's restart time, and DeepSpeech2's per-GPU batch cap on the RTX
//! nodes.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use serde_json::json;

use super::{Batches, INTERVAL_S, REALLOCATION_S, pollux_jobs};
use crate::measured::ModelSpec;
use crate::trace::Trace;

/// A GPU type of Sia's cluster: its name in the artifact, the
/// `nvidia.com/gpu.product` value GPU feature discovery gives it, and the
/// simulated cluster's nodes of it.
struct GpuType {
    artifact: &'static str,
    product: &'static str,
    nodes: u32,
    gpus_per_node: u32,
}

/// Sia's default cluster (`cluster_nnodes`, `cluster_ngpus_per_node`); the
/// first type is the reference (Pollux's own tables).
const CLUSTER: &[GpuType] = &[
    GpuType {
        artifact: "aws",
        product: "Tesla-T4",
        nodes: 6,
        gpus_per_node: 4,
    },
    GpuType {
        artifact: "rtx",
        product: "NVIDIA-GeForce-RTX-2080-Ti",
        nodes: 3,
        gpus_per_node: 8,
    },
    GpuType {
        artifact: "dgx-ext",
        product: "NVIDIA-A100-SXM4-40GB",
        nodes: 2,
        gpus_per_node: 8,
    },
];

/// A model as Sia's simulator runs it: epochs, slowdown, restart seconds.
struct SiaModel {
    name: &'static str,
    epochs: usize,
    slowdown: f64,
    restart_s: f64,
}

const MODELS: &[SiaModel] = &[
    SiaModel {
        name: "bert",
        epochs: 2,
        slowdown: 1.2,
        restart_s: 120.0,
    },
    SiaModel {
        name: "cifar10",
        epochs: 100,
        slowdown: 1.8,
        restart_s: 50.0,
    },
    SiaModel {
        name: "deepspeech2",
        epochs: 80,
        slowdown: 1.2,
        restart_s: 25.0,
    },
    SiaModel {
        name: "imagenet",
        epochs: 90,
        slowdown: 1.2,
        restart_s: 250.0,
    },
    SiaModel {
        name: "ncf",
        epochs: 10,
        slowdown: 1.5,
        restart_s: 15.0,
    },
    SiaModel {
        name: "yolov3",
        epochs: 50,
        slowdown: 1.2,
        restart_s: 80.0,
    },
];

/// The most workload files one import reads.
const MAX_WORKLOADS: usize = 100;

/// What an import wrote.
#[derive(Debug)]
pub struct Imported {
    /// The traces, in workload order (each with its `-adaptive` twin).
    pub traces: Vec<PathBuf>,
    /// The measurements' directory.
    pub models: PathBuf,
}

/// Converts the Sia artifact's simulator directory `sia` (holding
/// `traces/` and `workloads/saturn/`) into traces in `out`:
/// `saturn-N.yaml` (each job at its workload's batch size, as Sia's
/// artifact runs Gavel) and `saturn-N-adaptive.yaml` (each choosing its
/// batch, as under Sia and Pollux), and their measurements in
/// `out/models`. Every trace written is loaded back before this returns.
///
/// # Errors
/// A missing or malformed file of the artifact, named, or one that cannot
/// be written.
pub fn import(sia: &Path, out: &Path) -> Result<Imported> {
    let models = out.join("models");
    let mut specs = Vec::new();
    for m in MODELS {
        let from = sia.join("traces").join(m.name);
        let to = models.join(m.name);
        std::fs::create_dir_all(&to).with_context(|| format!("cannot create {}", to.display()))?;
        let mut runs = 0;
        for entry in std::fs::read_dir(&from).with_context(|| {
            format!(
                "{}: not Sia's simulator directory (no traces/{})",
                sia.display(),
                m.name
            )
        })? {
            let entry = entry.with_context(|| format!("cannot read {}", from.display()))?;
            let name = entry.file_name();
            if name
                .to_str()
                .is_some_and(|n| n.starts_with("validation-") && n.ends_with(".csv"))
            {
                copy(&entry.path(), &to.join(&name))?;
                runs += 1;
            }
        }
        if runs == 0 {
            bail!("{}: no validation runs", from.display());
        }
        for t in CLUSTER {
            let dir = to.join(t.product);
            std::fs::create_dir_all(&dir)
                .with_context(|| format!("cannot create {}", dir.display()))?;
            for table in ["placements", "scalability"] {
                let file = format!("{table}-{}.csv", t.artifact);
                copy(&from.join(&file), &dir.join(format!("{table}.csv")))?;
            }
        }
        let mut max_local_bsz = std::collections::BTreeMap::new();
        if m.name == "deepspeech2" {
            max_local_bsz.insert("NVIDIA-GeForce-RTX-2080-Ti".to_string(), 57);
        }
        specs.push(ModelSpec {
            name: m.name.to_string(),
            epochs: m.epochs,
            gpu_types: CLUSTER.iter().map(|t| t.product.to_string()).collect(),
            slowdown: Some(m.slowdown),
            restart_s: Some(m.restart_s),
            max_local_bsz,
        });
    }
    let saturn = sia.join("workloads").join("saturn");
    let mut workloads: Vec<(u32, PathBuf)> = Vec::new();
    for entry in std::fs::read_dir(&saturn)
        .with_context(|| format!("{}: no workloads/saturn", sia.display()))?
    {
        let entry = entry.with_context(|| format!("cannot read {}", saturn.display()))?;
        let n = entry.file_name().to_str().and_then(|f| {
            f.strip_prefix("workload-")?
                .strip_suffix(".csv")?
                .parse::<u32>()
                .ok()
        });
        if let Some(n) = n {
            if workloads.len() == MAX_WORKLOADS {
                bail!("{}: more than {MAX_WORKLOADS} workloads", saturn.display());
            }
            workloads.push((n, entry.path()));
        }
    }
    if workloads.is_empty() {
        bail!("{}: no workload-N.csv", saturn.display());
    }
    workloads.sort();
    let nodes: Vec<_> = CLUSTER
        .iter()
        .map(|t| {
            json!({
                "name_prefix": t.artifact, "count": t.nodes, "cpu": 64, "memory_gib": 512,
                "gpus": t.gpus_per_node, "labels": {dragon_framework::GPU_PRODUCT: t.product},
            })
        })
        .collect();
    let mut traces = Vec::new();
    for (n, path) in workloads {
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("cannot read {}", path.display()))?;
        for (suffix, batches) in [("", Batches::AsGiven), ("-adaptive", Batches::Adaptive)] {
            let origin = path.display().to_string();
            let jobs = pollux_jobs(&text, &origin, batches)?;
            let doc = json!({
                "description": format!(
                    "Sia (SOSP'23) Saturn workload {n}{}: {} jobs of five measured models on 6 nodes x 4 T4, 3 x 8 RTX 2080 Ti, 2 x 8 A100",
                    if suffix.is_empty() { "" } else { ", jobs choosing their batch" },
                    jobs.len()
                ),
                "model": {"scale_interval_s": INTERVAL_S, "restart_s": REALLOCATION_S},
                "cluster": {"nodes": nodes},
                "measurements": {"dir": "models", "models": specs},
                "jobs": jobs,
            });
            let file = out.join(format!("saturn-{n}{suffix}.yaml"));
            let yaml = serde_norway::to_string(&doc).context("cannot write a trace as YAML")?;
            std::fs::write(&file, yaml)
                .with_context(|| format!("cannot write {}", file.display()))?;
            Trace::load(&file.display().to_string())?;
            traces.push(file);
        }
    }
    Ok(Imported { traces, models })
}

fn copy(from: &Path, to: &Path) -> Result<()> {
    std::fs::copy(from, to)
        .map(drop)
        .with_context(|| format!("cannot copy {} to {}", from.display(), to.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measured::bundled;
    use crate::speed::Speed;

    /// A checkout in Sia's layout holding Pollux's bundled tables for
    /// every type (Apache 2.0; Sia's own are not ours to ship) and the
    /// first jobs of Pollux's workload 1 as a Saturn workload.
    fn checkout(tag: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("dragon-sia-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        for m in bundled::MODELS {
            let at = dir.join("traces").join(m.name);
            std::fs::create_dir_all(&at).unwrap();
            for t in CLUSTER {
                std::fs::write(
                    at.join(format!("placements-{}.csv", t.artifact)),
                    m.placements,
                )
                .unwrap();
                std::fs::write(
                    at.join(format!("scalability-{}.csv", t.artifact)),
                    m.scalability,
                )
                .unwrap();
            }
            for (b, run) in m.validation {
                std::fs::write(at.join(format!("validation-{b}.csv")), run).unwrap();
            }
        }
        let saturn = dir.join("workloads").join("saturn");
        std::fs::create_dir_all(&saturn).unwrap();
        let w1 = super::super::POLLUX[0].1;
        let first: String = w1.lines().take(9).map(|l| format!("{l}\n")).collect();
        std::fs::write(saturn.join("workload-1.csv"), first).unwrap();
        dir
    }

    #[test]
    fn a_checkout_becomes_traces_on_three_gpu_types() {
        let from = checkout("ok");
        let out = from.join("out");
        let imported = import(&from, &out).unwrap();
        let names: Vec<_> = imported
            .traces
            .iter()
            .map(|t| t.file_name().unwrap().to_str().unwrap().to_string())
            .collect();
        assert_eq!(names, ["saturn-1.yaml", "saturn-1-adaptive.yaml"]);
        let t = Trace::load(&imported.traces[1].display().to_string()).unwrap();
        assert_eq!(t.jobs.len(), 8);
        assert_eq!(t.total_gpus(), 64);
        let products: std::collections::BTreeSet<_> = t
            .nodes
            .iter()
            .map(|n| n.labels[dragon_framework::GPU_PRODUCT].as_str())
            .collect();
        assert_eq!(products.len(), 3, "{products:?}");
        let Speed::Measured(job) = &t.jobs[0].speed else {
            panic!("a measured job")
        };
        assert_eq!(job.model.gpu_types().count(), 3);
        assert_eq!(job.batch, crate::measured::Batch::Adaptive);
        // Sia's restart time for the model, unless the job sets its own.
        let sia = MODELS.iter().find(|m| m.name == job.model.name).unwrap();
        assert_eq!(t.jobs[0].restart_ms, (sia.restart_s * 1000.0) as u64);
        let _ = std::fs::remove_dir_all(from);
    }

    #[test]
    fn a_directory_that_is_not_sias_is_named() {
        let from = checkout("missing");
        std::fs::remove_file(from.join("traces/bert/placements-rtx.csv")).unwrap();
        let e = format!("{:#}", import(&from, &from.join("out")).unwrap_err());
        assert!(e.contains("placements-rtx.csv"), "{e}");
        let e = format!(
            "{:#}",
            import(&from.join("nowhere"), &from.join("out")).unwrap_err()
        );
        assert!(e.contains("not Sia's simulator directory"), "{e}");
        let _ = std::fs::remove_dir_all(from);
    }
}
