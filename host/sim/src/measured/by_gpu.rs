//! A model measured on one GPU type or several, as Sia's artifact (Jayaram
//! Subramanya et al., SOSP'23) measured Pollux's six models again on other
//! GPUs: the same training runs (statistical progress does not depend on
//! the GPU), step times of its own on each type.
//!
//! A trace may carry models of its own, in a directory beside it:
//!
//! ```text
//! <dir>/<model>/validation-<batch>.csv        the training runs
//! <dir>/<model>/<gpu type>/placements.csv     step times on that type
//! <dir>/<model>/<gpu type>/scalability.csv
//! ```
//!
//! where a GPU type is a node's `nvidia.com/gpu.product` label. A job runs
//! at the step times of the type of the nodes it holds; a job whose workers
//! hold nodes of several types runs at the pace of the slowest of them (a
//! synchronous step waits for every worker). A node of a type the model was
//! not measured on, or of none, runs it at its first type's pace.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, OnceLock};

use anyhow::{Context, Result, bail};
use serde::Deserialize;

use super::Measurements;

/// The most models, GPU types per model, and validation runs per model a
/// trace's own measurements may hold, and the largest table file read.
const MAX_MODELS: usize = 64;
const MAX_TYPES: usize = 16;
const MAX_RUNS: usize = 64;
const MAX_TABLE_BYTES: u64 = 64 << 20;
/// The most epochs a model may train for.
const MAX_EPOCHS: usize = 100_000;

/// A model's tables by GPU type.
#[derive(Debug)]
pub struct Model {
    pub name: String,
    /// The tables a job's size, reports and other GPU types fall back to:
    /// the first type's (the bundled models have only these).
    reference: Arc<Measurements>,
    /// Tables by GPU type, the reference's among them.
    by_type: BTreeMap<String, Arc<Measurements>>,
    /// Seconds a job of this model takes to checkpoint and restart, where
    /// it was measured.
    pub restart_s: Option<f64>,
}

impl Model {
    /// A bundled model of Pollux's artifact by name (measured on one GPU
    /// type, the artifact's).
    pub fn bundled(name: &str) -> Option<Arc<Model>> {
        static MODELS: OnceLock<Vec<Arc<Model>>> = OnceLock::new();
        MODELS
            .get_or_init(|| {
                Measurements::bundled_names()
                    .into_iter()
                    .filter_map(Measurements::bundled)
                    .map(|m| Arc::new(Model::untyped(m)))
                    .collect()
            })
            .iter()
            .find(|m| m.name == name)
            .cloned()
    }

    /// One table set, whatever the nodes' GPU type.
    pub fn untyped(tables: Arc<Measurements>) -> Model {
        Model {
            name: tables.name.clone(),
            reference: tables,
            by_type: BTreeMap::new(),
            restart_s: None,
        }
    }

    /// The reference tables (see [`Model`]).
    pub fn reference(&self) -> &Measurements {
        &self.reference
    }

    /// The tables a node of `gpu_type` runs the model at.
    pub fn on(&self, gpu_type: Option<&str>) -> &Measurements {
        gpu_type
            .and_then(|t| self.by_type.get(t))
            .unwrap_or(&self.reference)
    }

    /// The GPU types measured, in name order.
    pub fn gpu_types(&self) -> impl Iterator<Item = &str> {
        self.by_type.keys().map(String::as_str)
    }

    /// A model from its directory (see the module's layout), as `spec`
    /// describes it.
    ///
    /// # Errors
    /// A missing, oversized or malformed table, named with its path.
    pub fn load(dir: &Path, spec: &ModelSpec) -> Result<Model> {
        spec.check()?;
        let root = dir.join(&spec.name);
        let mut runs: Vec<(u32, String)> = Vec::new();
        let entries = std::fs::read_dir(&root).with_context(|| {
            format!(
                "cannot read the measurements of `{}` in {}",
                spec.name,
                root.display()
            )
        })?;
        for entry in entries {
            let entry = entry.with_context(|| format!("cannot read {}", root.display()))?;
            let file = entry.file_name();
            let Some(batch) = file
                .to_str()
                .and_then(|f| f.strip_prefix("validation-"))
                .and_then(|f| f.strip_suffix(".csv"))
            else {
                continue;
            };
            let Ok(batch) = batch.parse::<u32>() else {
                bail!("{}: `{batch}` is not a batch size", entry.path().display());
            };
            if runs.len() == MAX_RUNS {
                bail!("{}: more than {MAX_RUNS} validation runs", root.display());
            }
            runs.push((batch, read_table(&entry.path())?));
        }
        if runs.is_empty() {
            bail!("{}: no validation-<batch>.csv", root.display());
        }
        runs.sort_by_key(|r| r.0);
        let validation: Vec<(u32, &str)> = runs.iter().map(|(b, t)| (*b, t.as_str())).collect();
        let mut by_type = BTreeMap::new();
        for gpu_type in &spec.gpu_types {
            let at = root.join(gpu_type);
            let placements = read_table(&at.join("placements.csv"))?;
            let scalability = read_table(&at.join("scalability.csv"))?;
            let tables = Measurements::parse(
                &spec.name,
                &placements,
                &scalability,
                &validation,
                spec.epochs,
                spec.max_local_bsz.get(gpu_type).copied(),
            )
            .with_context(|| format!("GPU type `{gpu_type}` ({})", at.display()))?
            .slowed(spec.slowdown.unwrap_or(1.0));
            by_type.insert(gpu_type.clone(), Arc::new(tables));
        }
        let reference = by_type[&spec.gpu_types[0]].clone();
        Ok(Model {
            name: spec.name.clone(),
            reference,
            by_type,
            restart_s: spec.restart_s,
        })
    }
}

/// A table file, refused when larger than any measurement needs.
fn read_table(path: &Path) -> Result<String> {
    let len = std::fs::metadata(path)
        .with_context(|| format!("cannot read {}", path.display()))?
        .len();
    if len > MAX_TABLE_BYTES {
        bail!(
            "{}: {len} bytes, more than the {MAX_TABLE_BYTES} a table may hold",
            path.display()
        );
    }
    std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))
}

/// What a trace says of one of its own measured models.
#[derive(Debug, Clone, PartialEq, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct ModelSpec {
    pub name: String,
    /// Epochs a job trains for (at most as many as every run measured).
    pub epochs: usize,
    /// The GPU types measured, the reference first.
    pub gpu_types: Vec<String>,
    /// How much slower real runs were than the measured steps (Sia's
    /// calibration); 1 when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slowdown: Option<f64>,
    /// Seconds to checkpoint and restart a job of this model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restart_s: Option<f64>,
    /// The largest per-GPU batch on a GPU type, where memory allows less
    /// than was measured.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub max_local_bsz: BTreeMap<String, u32>,
}

impl ModelSpec {
    fn check(&self) -> Result<()> {
        let name = &self.name;
        if !is_path_segment(name) {
            bail!("model `{name}`: a name is one directory name (letters, digits, `-`, `_`, `.`)");
        }
        if self.epochs == 0 || self.epochs > MAX_EPOCHS {
            bail!(
                "model `{name}`.epochs: must be 1 to {MAX_EPOCHS}, got {}",
                self.epochs
            );
        }
        if self.gpu_types.is_empty() || self.gpu_types.len() > MAX_TYPES {
            bail!(
                "model `{name}`.gpu_types: 1 to {MAX_TYPES} types, got {}",
                self.gpu_types.len()
            );
        }
        for (i, t) in self.gpu_types.iter().enumerate() {
            if !is_path_segment(t) {
                bail!("model `{name}`.gpu_types[{i}]: `{t}` is not a directory name");
            }
            if self.gpu_types[..i].contains(t) {
                bail!("model `{name}`.gpu_types[{i}]: `{t}` is listed twice");
            }
        }
        if let Some(s) = self.slowdown
            && !(s.is_finite() && s > 0.0 && s <= 100.0)
        {
            bail!("model `{name}`.slowdown: must be in (0, 100], got {s}");
        }
        if let Some(r) = self.restart_s
            && !(r.is_finite() && (0.0..=1e6).contains(&r))
        {
            bail!("model `{name}`.restart_s: must be 0 to 1e6 seconds, got {r}");
        }
        for (t, b) in &self.max_local_bsz {
            if !self.gpu_types.contains(t) {
                bail!("model `{name}`.max_local_bsz: `{t}` is not one of its gpu_types");
            }
            if *b == 0 {
                bail!("model `{name}`.max_local_bsz.{t}: must be at least 1");
            }
        }
        Ok(())
    }
}

/// The models of a trace's own measurements, loaded from `dir`.
///
/// # Errors
/// More models than supported, a name given twice, or a model that does
/// not load.
pub fn load_all(dir: &Path, specs: &[ModelSpec]) -> Result<Vec<Arc<Model>>> {
    if specs.len() > MAX_MODELS {
        bail!("more than {MAX_MODELS} models");
    }
    let mut models: Vec<Arc<Model>> = Vec::with_capacity(specs.len());
    for spec in specs {
        if models.iter().any(|m| m.name == spec.name) {
            bail!("model `{}` is listed twice", spec.name);
        }
        models.push(Arc::new(Model::load(dir, spec)?));
    }
    Ok(models)
}

/// A name that stays one directory below the measurements' root.
fn is_path_segment(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 128
        && s != "."
        && s != ".."
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

/// A model directory for tests, from the bundled `cifar10` (Pollux's
/// tables, Apache 2.0): its runs, `slow` with the bundled step times and
/// `fast` with every step and synchronisation twice as fast.
#[cfg(test)]
pub(crate) mod fixture {
    use std::path::{Path, PathBuf};

    use super::ModelSpec;
    use crate::measured::bundled;

    /// `table` with its `step_time` and `sync_time` columns divided by
    /// `by`.
    fn faster(table: &str, by: f64) -> String {
        let mut reader = csv::Reader::from_reader(table.as_bytes());
        let header = reader.headers().unwrap().clone();
        let mut out = csv::Writer::from_writer(Vec::new());
        out.write_record(&header).unwrap();
        for record in reader.records() {
            let record = record.unwrap();
            let row: Vec<String> = record
                .iter()
                .zip(header.iter())
                .map(|(v, h)| match h {
                    "step_time" | "sync_time" => (v.parse::<f64>().unwrap() / by).to_string(),
                    _ => v.to_string(),
                })
                .collect();
            out.write_record(&row).unwrap();
        }
        String::from_utf8(out.into_inner().unwrap()).unwrap()
    }

    /// Writes the directory under a fresh path named by `tag`; returns it
    /// and the model's spec (`slow` the reference).
    pub(crate) fn two_types(tag: &str) -> (PathBuf, ModelSpec) {
        let dir =
            std::env::temp_dir().join(format!("dragon-gpu-types-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let cifar = bundled::MODELS
            .iter()
            .find(|m| m.name == "cifar10")
            .unwrap();
        let root = dir.join("cifar10");
        for (t, by) in [("slow", 1.0), ("fast", 2.0)] {
            std::fs::create_dir_all(root.join(t)).unwrap();
            write(
                &root.join(t).join("placements.csv"),
                &faster(cifar.placements, by),
            );
            write(
                &root.join(t).join("scalability.csv"),
                &faster(cifar.scalability, by),
            );
        }
        for (b, run) in cifar.validation {
            write(&root.join(format!("validation-{b}.csv")), run);
        }
        let spec = ModelSpec {
            name: "cifar10".into(),
            epochs: cifar.epochs,
            gpu_types: vec!["slow".into(), "fast".into()],
            slowdown: None,
            restart_s: None,
            max_local_bsz: Default::default(),
        };
        (dir, spec)
    }

    fn write(path: &Path, text: &str) {
        std::fs::write(path, text).unwrap();
    }
}
