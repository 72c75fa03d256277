//! Jobs whose speed comes from measurements: Pollux's job model (Qiao et
//! al., OSDI'21), from the per-model tables its artifact publishes.
//!
//! For each deep-learning model the artifact measured
//! - the time of one training step (and of its gradient synchronisation)
//!   for every placement of up to four nodes of up to four GPUs, over a range
//!   of per-GPU batch sizes (`placements.csv`), and for wider jobs over
//!   node and replica counts (`scalability.csv`);
//! - for each of several total batch sizes, a training run to completion:
//!   the statistical progress made by each epoch and the gradient's squared
//!   norm and variance during it (`validation-<batch>.csv`).
//!
//! A job trains for a fixed number of epochs; an epoch ends when the job's
//! progress reaches the least progress any of the runs made by then. Each
//! step adds `gain` progress, Pollux's statistical efficiency at the job's
//! total batch size `B` over the smallest measured one `B₀`:
//!
//! ```text
//! gain = (var + sqr) / (var / (B / B₀) + sqr)
//! ```
//!
//! so the seconds a job needs are `Σ_epochs Δprogress × step_time / gain`.
//! A job either keeps its batch size (the workload's, the setting Pollux's
//! artifact gives Tiresias and Optimus), its per-GPU batch following from
//! its replica count as in the artifact, with gradient accumulation past the
//! largest measured per-GPU batch; or, as an AdaptDL job under Pollux,
//! picks for each allocation and epoch the batch of the best goodput.
//!
//! The simulator runs a measured job through its progress epoch by epoch:
//! its rate is the goodput of its placement in its current epoch, and it is
//! re-rated at each epoch's end, as the artifact steps it.
//!
//! Where the artifact interpolates scattered points (a placement it did not
//! measure, over more than four nodes) through a Delaunay triangulation,
//! this interpolates along the measured lines of equal node and replica
//! counts instead; `docs/simulator.md` reports the difference. Values
//! outside a measured range are clamped to its ends, where the artifact
//! would stop with an error.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, OnceLock};

use thiserror::Error;

pub(crate) mod by_gpu;

pub use by_gpu::{Model, ModelSpec, load_all};

/// GPUs per node of the clusters the artifact measured.
pub const GPUS_PER_NODE: u32 = 4;

/// Tolerance of the artifact's ceilings (`ceil(x - 1e-8)`).
const EPS: f64 = 1e-8;

/// A measured table that cannot be read.
#[derive(Debug, Error)]
#[error("measurements of `{model}`, {file}: {message}")]
pub struct MeasurementsError {
    pub model: String,
    pub file: String,
    pub message: String,
}

/// One measured step time at a per-GPU batch size.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Sample {
    local_bsz: f64,
    step_s: f64,
    sync_s: f64,
}

/// One epoch of a training run to completion.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Epoch {
    /// Progress made by the end of this epoch.
    progress: f64,
    grad_sqr: f64,
    grad_var: f64,
}

/// What was measured of one deep-learning model.
#[derive(Debug)]
pub struct Measurements {
    pub name: String,
    /// The smallest and largest total batch sizes of the validation runs.
    pub init_batch_size: u32,
    pub max_batch_size: u32,
    /// The per-GPU batch sizes measured.
    pub min_local_bsz: u32,
    pub max_local_bsz: u32,
    /// Epochs a job of this model trains for.
    pub epochs: usize,
    validation: BTreeMap<u32, Vec<Epoch>>,
    /// Placement (GPUs per node, its smallest rotation) → samples by
    /// per-GPU batch size.
    placements: BTreeMap<Vec<u32>, Vec<Sample>>,
    /// (nodes, replicas) → samples by per-GPU batch size: the placements'
    /// means and the wide measurements.
    lines: BTreeMap<(u32, u32), Vec<Sample>>,
    /// Goodputs and run times already worked out, by placement (its
    /// smallest rotation): a simulation asks for the same ones again and
    /// again, and an adaptive job's costs a search over batch sizes.
    goodputs: Mutex<HashMap<(Vec<u32>, Batch, usize), f64>>,
    run_times: Mutex<HashMap<(Vec<u32>, Batch), f64>>,
    /// How much slower real runs were than the measured steps (1: none).
    slowdown: f64,
}

/// How a job splits its batch over its replicas.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LocalBatch {
    /// The per-GPU batch of one forward/backward pass.
    pub atomic_bsz: u32,
    /// Passes accumulated before each synchronisation, beyond the first.
    pub accum_steps: u32,
}

impl Measurements {
    /// A model's measurements from its tables: `placements.csv`,
    /// `scalability.csv` and `(batch size, validation-<batch>.csv)`.
    ///
    /// # Errors
    /// A table that is malformed, empty or inconsistent, named.
    pub fn parse(
        name: &str,
        placements: &str,
        scalability: &str,
        validation: &[(u32, &str)],
        epochs: usize,
        max_local_bsz: Option<u32>,
    ) -> Result<Measurements, MeasurementsError> {
        let err = |file: &str, message: String| MeasurementsError {
            model: name.to_string(),
            file: file.to_string(),
            message,
        };
        let mut by_placement: BTreeMap<Vec<u32>, Vec<Sample>> = BTreeMap::new();
        for row in rows(
            placements,
            &["placement", "local_bsz", "step_time", "sync_time"],
        )
        .map_err(|m| err("placements.csv", m))?
        {
            let id = row[0];
            let digits: Vec<u32> = format!("{id:.0}")
                .chars()
                .filter_map(|c| c.to_digit(10))
                .collect();
            if digits.is_empty() || digits.contains(&0) || id.fract() != 0.0 {
                return Err(err(
                    "placements.csv",
                    format!("placement `{id}` is not a list of GPU counts"),
                ));
            }
            by_placement
                .entry(canonical(&digits))
                .or_default()
                .push(Sample {
                    local_bsz: row[1],
                    step_s: row[2],
                    sync_s: row[3],
                });
        }
        if by_placement.is_empty() {
            return Err(err("placements.csv", "no measurements".into()));
        }
        let mut lines: BTreeMap<(u32, u32), BTreeMap<u64, (f64, f64, u32)>> = BTreeMap::new();
        for (p, samples) in &by_placement {
            let key = (p.len() as u32, p.iter().sum());
            for s in samples {
                let e = lines
                    .entry(key)
                    .or_default()
                    .entry(s.local_bsz.to_bits())
                    .or_insert((0.0, 0.0, 0));
                e.0 += s.step_s;
                e.1 += s.sync_s;
                e.2 += 1;
            }
        }
        for row in rows(
            scalability,
            &[
                "num_nodes",
                "num_replicas",
                "local_bsz",
                "step_time",
                "sync_time",
            ],
        )
        .map_err(|m| err("scalability.csv", m))?
        {
            let e = lines
                .entry((row[0] as u32, row[1] as u32))
                .or_default()
                .entry(row[2].to_bits())
                .or_insert((0.0, 0.0, 0));
            e.0 += row[3];
            e.1 += row[4];
            e.2 += 1;
        }
        let lines = lines
            .into_iter()
            .map(|(k, m)| {
                let mut v: Vec<Sample> = m
                    .into_iter()
                    .map(|(b, (st, sy, n))| Sample {
                        local_bsz: f64::from_bits(b),
                        step_s: st / f64::from(n),
                        sync_s: sy / f64::from(n),
                    })
                    .collect();
                v.sort_by(|a, b| a.local_bsz.total_cmp(&b.local_bsz));
                (k, v)
            })
            .collect();
        for v in by_placement.values_mut() {
            v.sort_by(|a, b| a.local_bsz.total_cmp(&b.local_bsz));
        }
        let mut runs = BTreeMap::new();
        for (batch, text) in validation {
            let file = format!("validation-{batch}.csv");
            let epochs: Vec<Epoch> = rows(text, &["progress", "grad_sqr", "grad_var"])
                .map_err(|m| err(&file, m))?
                .into_iter()
                .map(|r| Epoch {
                    progress: r[0],
                    grad_sqr: r[1],
                    grad_var: r[2],
                })
                .collect();
            runs.insert(*batch, epochs);
        }
        let shortest = runs.values().map(Vec::len).min().unwrap_or(0);
        if runs.is_empty() || epochs == 0 || epochs > shortest {
            return Err(err(
                "validation-*.csv",
                format!("{epochs} epochs asked, the runs measured {shortest}"),
            ));
        }
        let locals = by_placement.values().flatten().map(|s| s.local_bsz);
        let min_local = locals.clone().fold(f64::INFINITY, f64::min) as u32;
        let max_local = max_local_bsz.unwrap_or(locals.fold(0.0, f64::max) as u32);
        let init_batch_size = *runs.keys().next().unwrap_or(&1);
        let max_batch_size = *runs.keys().next_back().unwrap_or(&1);
        Ok(Measurements {
            name: name.to_string(),
            init_batch_size,
            max_batch_size,
            min_local_bsz: min_local.max(1),
            max_local_bsz: max_local.max(1),
            epochs,
            validation: runs,
            placements: by_placement,
            lines,
            goodputs: Mutex::default(),
            run_times: Mutex::default(),
            slowdown: 1.0,
        })
    }

    /// These measurements with every step `slowdown` times slower: Sia's
    /// calibration of its simulator to its real runs.
    pub fn slowed(mut self, slowdown: f64) -> Measurements {
        self.slowdown = slowdown;
        self
    }

    /// A bundled model by name (`bert`, `cifar10`, `deepspeech2`,
    /// `imagenet`, `ncf`, `yolov3`).
    pub fn bundled(name: &str) -> Option<Arc<Measurements>> {
        static MODELS: OnceLock<Vec<Arc<Measurements>>> = OnceLock::new();
        MODELS
            .get_or_init(|| {
                bundled::MODELS
                    .iter()
                    .map(|m| {
                        // The bundled tables are checked by a test.
                        Arc::new(
                            Measurements::parse(
                                m.name,
                                m.placements,
                                m.scalability,
                                m.validation,
                                m.epochs,
                                m.max_local_bsz,
                            )
                            .unwrap_or_else(|e| panic!("bundled {e}")),
                        )
                    })
                    .collect()
            })
            .iter()
            .find(|m| m.name == name)
            .cloned()
    }

    /// The names of the bundled models.
    pub fn bundled_names() -> Vec<&'static str> {
        bundled::MODELS.iter().map(|m| m.name).collect()
    }

    /// Step and synchronisation time (s) of one pass at `atomic_bsz` per GPU
    /// with `placement` GPUs on each node.
    pub fn step_time(&self, placement: &[u32], atomic_bsz: u32) -> (f64, f64) {
        let p = canonical(placement);
        let b = f64::from(atomic_bsz);
        if let Some(samples) = self.placements.get(&p) {
            return along(samples, b);
        }
        let nodes = (p.len() as u32).min(16);
        let replicas: u32 = p.iter().sum();
        self.across_lines(nodes, replicas, b)
    }

    /// Interpolates between the measured lines of (nodes, replicas): along
    /// nodes at the same replica count, else along replicas at the same
    /// node count, else the nearest line.
    fn across_lines(&self, nodes: u32, replicas: u32, b: f64) -> (f64, f64) {
        if let Some(line) = self.lines.get(&(nodes, replicas)) {
            return along(line, b);
        }
        let at = |k: &(u32, u32)| along(&self.lines[k], b);
        // Between the nearest measured placements below and above along one
        // axis (nodes with the replicas fixed, or replicas with the nodes
        // fixed), linearly; `None` without one on each side.
        let bracket =
            |axis: fn(&(u32, u32)) -> u32, fixed: fn(&(u32, u32)) -> u32, x: u32, keep: u32| {
                let on_line = self.lines.keys().filter(|k| fixed(k) == keep);
                let lo = on_line.clone().filter(|k| axis(k) < x).last()?;
                let hi = on_line.clone().find(|k| axis(k) > x)?;
                let ((x0, y0), (x1, y1)) = ((axis(lo), at(lo)), (axis(hi), at(hi)));
                let w = f64::from(x - x0) / f64::from(x1 - x0);
                Some((y0.0 + w * (y1.0 - y0.0), y0.1 + w * (y1.1 - y0.1)))
            };
        let nodes_of = |k: &(u32, u32)| k.0;
        let replicas_of = |k: &(u32, u32)| k.1;
        if let Some(v) = bracket(nodes_of, replicas_of, nodes, replicas) {
            return v;
        }
        if let Some(v) = bracket(replicas_of, nodes_of, replicas, nodes) {
            return v;
        }
        let nearest = self
            .lines
            .keys()
            .min_by_key(|k| k.0.abs_diff(nodes) + k.1.abs_diff(replicas))
            .expect("a model has at least one measured placement");
        at(nearest)
    }

    /// How a job of total batch `batch` splits it over `replicas` (the
    /// artifact's rule for a job with a fixed batch size).
    pub fn local_batch(&self, batch: u32, replicas: u32) -> LocalBatch {
        self.split(f64::from(batch), replicas, true)
    }

    /// `batch` over `replicas`: passes accumulate past the largest per-GPU
    /// batch measured (and at least once on one replica above the smallest
    /// batch, with `at_least_once`, as the artifact's fixed-batch jobs do),
    /// and the whole stays within the largest batch measured.
    fn split(&self, batch: f64, replicas: u32, at_least_once: bool) -> LocalBatch {
        let replicas = replicas.max(1);
        let local = (batch / f64::from(replicas) - EPS).ceil().max(1.0);
        let mut accum = ((local / f64::from(self.max_local_bsz) - EPS).ceil() - 1.0).max(0.0);
        if at_least_once && replicas == 1 && batch > f64::from(self.init_batch_size) {
            accum = accum.max(1.0);
        }
        let atomic = (local / (accum + 1.0) - EPS).ceil();
        let count = f64::from(replicas) * (accum + 1.0);
        let cap = (f64::from(self.max_batch_size) / count).floor();
        LocalBatch {
            atomic_bsz: atomic.min(cap).max(1.0) as u32,
            accum_steps: accum as u32,
        }
    }

    /// Progress at the end of `epoch` epochs (0 at the start).
    fn progress(&self, epoch: usize) -> f64 {
        if epoch == 0 {
            return 0.0;
        }
        self.validation
            .values()
            .map(|run| run[epoch - 1].progress)
            .fold(f64::INFINITY, f64::min)
    }

    /// Gradient (squared norm, variance) during `epoch` at total batch
    /// `batch`, interpolated between the runs measured around it.
    fn grad_stats(&self, batch: f64, epoch: usize) -> (f64, f64) {
        let lower = self.validation.range(..=batch as u32).next_back();
        let upper = self.validation.range(batch.ceil() as u32..).next();
        let (lo, hi) = match (lower, upper) {
            (Some(l), Some(u)) => (l, u),
            (Some(l), None) => (l, l),
            (None, Some(u)) => (u, u),
            (None, None) => unreachable!("a model has at least one run"),
        };
        let (el, eh) = (lo.1[epoch], hi.1[epoch]);
        if lo.0 == hi.0 {
            return (el.grad_sqr, el.grad_var);
        }
        let (b0, b1) = (f64::from(*lo.0), f64::from(*hi.0));
        let w = (batch.clamp(b0, b1) - b0) / (b1 - b0);
        (
            el.grad_sqr + w * (eh.grad_sqr - el.grad_sqr),
            el.grad_var + w * (eh.grad_var - el.grad_var),
        )
    }

    /// Progress at the end of all the model's epochs: a job's whole work.
    pub fn total_progress(&self) -> f64 {
        self.progress(self.epochs)
    }

    /// The epoch a job is in once it has made `done` progress.
    pub fn epoch_at(&self, done: f64) -> usize {
        (1..=self.epochs)
            .find(|&e| self.progress(e) > done)
            .map_or(self.epochs.saturating_sub(1), |e| e - 1)
    }

    /// Goodput of `split` on `placement` during `epoch`.
    #[cfg(test)]
    fn goodput(&self, placement: &[u32], split: LocalBatch, epoch: usize) -> f64 {
        let replicas: u32 = placement.iter().sum();
        self.goodput_at(
            replicas,
            split,
            self.step_time(placement, split.atomic_bsz),
            epoch,
        )
    }

    /// Goodput of `split` over `replicas` whose step and sync times are
    /// `times`, during `epoch`.
    fn goodput_at(&self, replicas: u32, split: LocalBatch, times: (f64, f64), epoch: usize) -> f64 {
        let (step, sync) = times;
        let per_step = step + (step - sync) * f64::from(split.accum_steps);
        let batch = f64::from(replicas.max(1))
            * f64::from(split.atomic_bsz)
            * f64::from(split.accum_steps + 1);
        let scale = batch / f64::from(self.init_batch_size);
        let (sqr, var) = self.grad_stats(batch, epoch);
        let denom = var / scale + sqr;
        let gain = if denom > 0.0 {
            (var + sqr) / denom
        } else {
            1.0
        };
        gain / (per_step * self.slowdown)
    }

    /// The splits a job of `batch` may run on `placement`, each with its
    /// step and sync times (which no epoch changes): the fixed batch's, or
    /// for an adaptive job those of 50 batch sizes spaced geometrically
    /// from the smallest it may run to the largest measured (the artifact's
    /// search, here over the measured goodput rather than a fitted one),
    /// else the smallest alone.
    fn splits(&self, placement: &[u32], batch: Batch) -> Vec<(LocalBatch, (f64, f64))> {
        let replicas: u32 = placement.iter().sum::<u32>().max(1);
        let timed = |s: LocalBatch| (s, self.step_time(placement, s.atomic_bsz));
        let smallest = match batch {
            Batch::Fixed(b) => return vec![timed(self.local_batch(b, replicas))],
            Batch::Adaptive => self.split(
                f64::from(self.init_batch_size.max(self.min_local_bsz * replicas)),
                replicas,
                false,
            ),
        };
        let lo = f64::from(self.init_batch_size.max(self.min_local_bsz * replicas));
        let hi = f64::from(self.max_batch_size);
        if lo >= hi {
            return vec![timed(smallest)];
        }
        const CANDIDATES: u32 = 50;
        let ratio = (hi / lo).powf(1.0 / f64::from(CANDIDATES - 1));
        let splits: Vec<_> = (0..CANDIDATES)
            .map(|i| self.split(lo * ratio.powi(i as i32), replicas, false))
            .filter(|s| (self.min_local_bsz..=self.max_local_bsz).contains(&s.atomic_bsz))
            .map(timed)
            .collect();
        match splits.is_empty() {
            true => vec![timed(smallest)],
            false => splits,
        }
    }

    /// Of `splits` (from [`Measurements::splits`], never empty) over
    /// `replicas`, the one of the largest goodput during `epoch` (the first
    /// on a tie), with that goodput.
    fn best_of(
        &self,
        replicas: u32,
        splits: &[(LocalBatch, (f64, f64))],
        epoch: usize,
    ) -> (LocalBatch, f64) {
        splits
            .iter()
            .map(|&(s, times)| (s, self.goodput_at(replicas, s, times, epoch)))
            .fold(None, |best: Option<(LocalBatch, f64)>, (s, g)| match best {
                Some((_, b)) if b >= g => best,
                _ => Some((s, g)),
            })
            .expect("a job has a split to run")
    }

    /// The split of the batch a job of `batch` runs at on `placement`
    /// during `epoch` (see [`Measurements::splits`]).
    #[cfg(test)]
    fn chosen(&self, placement: &[u32], batch: Batch, epoch: usize) -> LocalBatch {
        let replicas: u32 = placement.iter().sum::<u32>().max(1);
        self.best_of(replicas, &self.splits(placement, batch), epoch)
            .0
    }

    /// Progress per second of a job of `batch` on `placement` once it has
    /// made `done` progress, and the progress at which that rate next
    /// changes (the end of its epoch).
    pub fn rate(&self, batch: Batch, placement: &[u32], done: f64) -> (f64, f64) {
        let epoch = self.epoch_at(done);
        (
            self.chosen_goodput(&canonical(placement), batch, epoch, &mut None),
            self.progress(epoch + 1),
        )
    }

    /// The goodput of the batch chosen on `placement` (its smallest
    /// rotation) during `epoch`; `splits` holds the placement's splits
    /// once some epoch needed them, for the next.
    fn chosen_goodput(
        &self,
        placement: &[u32],
        batch: Batch,
        epoch: usize,
        splits: &mut Option<Vec<(LocalBatch, (f64, f64))>>,
    ) -> f64 {
        let key = (placement.to_vec(), batch, epoch);
        if let Some(&g) = lock(&self.goodputs).get(&key) {
            return g;
        }
        let replicas: u32 = placement.iter().sum::<u32>().max(1);
        let splits = splits.get_or_insert_with(|| self.splits(placement, batch));
        let g = self.best_of(replicas, splits, epoch).1;
        lock(&self.goodputs).insert(key, g);
        g
    }

    /// Seconds a job of `batch` needs to train all its epochs with
    /// `placement` GPUs per node, alone and without interruption.
    pub fn run_time_s(&self, batch: Batch, placement: &[u32]) -> f64 {
        let placement = canonical(placement);
        let key = (placement, batch);
        if let Some(&t) = lock(&self.run_times).get(&key) {
            return t;
        }
        let mut splits = None;
        let t = (0..self.epochs)
            .map(|e| {
                (self.progress(e + 1) - self.progress(e))
                    / self.chosen_goodput(&key.0, batch, e, &mut splits)
            })
            .sum();
        lock(&self.run_times).insert(key, t);
        t
    }

    /// A job of `batch`'s whole-run goodput with 1 to `most` workers
    /// packed onto nodes of [`GPUS_PER_NODE`] (progress per second alone).
    pub fn goodputs_by_size(&self, batch: Batch, most: u32) -> Vec<f64> {
        (1..=most)
            .map(|w| 1.0 / self.run_time_s(batch, &packed(w, GPUS_PER_NODE)))
            .collect()
    }

    /// The most replicas a job of total batch `batch` can use: one sample
    /// per GPU at least its smallest measured per-GPU batch, and no more
    /// than the artifact's simulator handles.
    pub fn max_replicas(&self, batch: u32) -> u32 {
        (batch / self.min_local_bsz).clamp(1, 64)
    }
}

/// A memo's map, whatever a panicking holder left in it (entries are
/// inserted whole).
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A measured job's batch size.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Batch {
    /// The same total batch whatever its allocation (the artifact's
    /// Tiresias and Optimus jobs).
    Fixed(u32),
    /// The job picks the batch of the best goodput for each allocation and
    /// epoch, as an AdaptDL job does under Pollux.
    Adaptive,
}

/// A job of a measured model.
#[derive(Debug, Clone)]
pub struct MeasuredJob {
    pub model: Arc<Model>,
    pub batch: Batch,
}

impl PartialEq for MeasuredJob {
    fn eq(&self, other: &Self) -> bool {
        self.model.name == other.model.name && self.batch == other.batch
    }
}

impl MeasuredJob {
    /// Seconds it needs alone with `placement` GPUs per node of the
    /// model's reference GPU type.
    pub fn run_time_s(&self, placement: &[u32]) -> f64 {
        self.model.reference().run_time_s(self.batch, placement)
    }

    /// Progress per second on `placement` (GPUs per node, on nodes of
    /// `gpu_types`, one entry per node or none for the reference type)
    /// after `done`, and the progress at which that rate next changes: the
    /// pace of the slowest type among its nodes.
    pub fn rate(&self, placement: &[u32], gpu_types: &[Option<&str>], done: f64) -> (f64, f64) {
        let mut kinds: Vec<Option<&str>> = gpu_types.to_vec();
        kinds.sort_unstable();
        kinds.dedup();
        if kinds.is_empty() {
            kinds.push(None);
        }
        kinds
            .into_iter()
            .map(|t| self.model.on(t).rate(self.batch, placement, done))
            .fold((f64::INFINITY, f64::INFINITY), |(r, u), (r2, u2)| {
                (r.min(r2), u.min(u2))
            })
    }

    /// Its whole work: the progress of all its model's epochs.
    pub fn total_progress(&self) -> f64 {
        self.model.reference().total_progress()
    }

    /// Its whole-run goodput with 1 to `most` workers packed, on the
    /// reference GPU type.
    pub fn goodputs_by_size(&self, most: u32) -> Vec<f64> {
        self.model.reference().goodputs_by_size(self.batch, most)
    }
}

/// `workers` GPUs packed onto nodes of `per_node` GPUs, fullest first.
pub fn packed(workers: u32, per_node: u32) -> Vec<u32> {
    let per_node = per_node.max(1);
    let mut p = vec![per_node; (workers / per_node) as usize];
    if workers % per_node > 0 {
        p.push(workers % per_node);
    }
    p
}

/// A placement's smallest rotation, without empty nodes: the key the
/// artifact measured it under (it treats the nodes as a ring).
fn canonical(placement: &[u32]) -> Vec<u32> {
    let p: Vec<u32> = placement.iter().copied().filter(|&g| g > 0).collect();
    (0..p.len().max(1))
        .map(|i| {
            let mut r = p[i.min(p.len())..].to_vec();
            r.extend_from_slice(&p[..i.min(p.len())]);
            r
        })
        .min()
        .unwrap_or_default()
}

/// Linear interpolation over samples sorted by per-GPU batch, clamped to
/// the measured range.
fn along(samples: &[Sample], b: f64) -> (f64, f64) {
    let first = samples[0];
    let last = samples[samples.len() - 1];
    if b <= first.local_bsz {
        return (first.step_s, first.sync_s);
    }
    if b >= last.local_bsz {
        return (last.step_s, last.sync_s);
    }
    let i = samples.partition_point(|s| s.local_bsz <= b);
    let (a, c) = (samples[i - 1], samples[i]);
    let w = (b - a.local_bsz) / (c.local_bsz - a.local_bsz);
    (
        a.step_s + w * (c.step_s - a.step_s),
        a.sync_s + w * (c.sync_s - a.sync_s),
    )
}

/// The numeric columns `names` of each row of a CSV table, in that order,
/// found by its header (the artifacts order their columns differently).
fn rows(text: &str, names: &[&str]) -> Result<Vec<Vec<f64>>, String> {
    let mut reader = csv::Reader::from_reader(text.as_bytes());
    let header = reader
        .headers()
        .map_err(|e| format!("header: {e}"))?
        .clone();
    let at: Vec<usize> = names
        .iter()
        .map(|name| {
            header
                .iter()
                .position(|h| h.trim() == *name)
                .ok_or_else(|| {
                    format!(
                        "no column `{name}` (header: {})",
                        header.iter().collect::<Vec<_>>().join(",")
                    )
                })
        })
        .collect::<Result<_, _>>()?;
    let mut out = Vec::new();
    for (i, record) in reader.records().enumerate() {
        let record = record.map_err(|e| format!("row {}: {e}", i + 2))?;
        let row = at
            .iter()
            .map(|&c| record.get(c).unwrap_or("").trim().parse::<f64>())
            .collect::<Result<Vec<f64>, _>>()
            .map_err(|e| format!("row {}: {e}", i + 2))?;
        if row.iter().any(|v| !v.is_finite() || *v < 0.0) {
            return Err(format!(
                "row {}: values must be finite and not negative",
                i + 2
            ));
        }
        out.push(row);
    }
    if out.is_empty() {
        return Err("no rows".into());
    }
    Ok(out)
}

/// The tables bundled from Pollux's artifact (`traces/pollux/models`).
pub(crate) mod bundled {
    pub struct Model {
        pub name: &'static str,
        pub placements: &'static str,
        pub scalability: &'static str,
        pub validation: &'static [(u32, &'static str)],
        pub epochs: usize,
        pub max_local_bsz: Option<u32>,
    }

    macro_rules! model {
        ($name:literal, epochs: $epochs:literal, max_local_bsz: $max:expr, [$($b:literal),*]) => {
            Model {
                name: $name,
                placements: include_str!(concat!("../traces/pollux/models/", $name, "/placements.csv")),
                scalability: include_str!(concat!("../traces/pollux/models/", $name, "/scalability.csv")),
                validation: &[$(($b, include_str!(concat!("../traces/pollux/models/", $name, "/validation-", $b, ".csv")))),*],
                epochs: $epochs,
                max_local_bsz: $max,
            }
        };
    }

    /// Epoch counts and the per-GPU batch cap are the artifact's
    /// (`applications.py`).
    pub const MODELS: &[Model] = &[
        model!("bert", epochs: 2, max_local_bsz: None, [12, 24, 48, 96, 192, 384]),
        model!("cifar10", epochs: 100, max_local_bsz: None, [128, 256, 512, 1024, 2048, 4096]),
        model!("deepspeech2", epochs: 80, max_local_bsz: None, [20, 40, 80, 160, 320, 640]),
        model!("imagenet", epochs: 90, max_local_bsz: None, [200, 400, 800, 1600, 3200, 6400, 12800]),
        model!("ncf", epochs: 10, max_local_bsz: None, [256, 512, 1024, 2048, 4096, 8192, 16384, 32768]),
        model!("yolov3", epochs: 50, max_local_bsz: Some(8), [8, 16, 32, 64, 128, 256, 512]),
    ];
}

#[cfg(test)]
mod tests;
