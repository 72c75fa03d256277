//! The trace format: a cluster and the jobs submitted to it, in YAML or
//! JSON, validated into what the engine runs. Every error names the file,
//! the job or node group (index and name) and the field.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;

use anyhow::{Context, Result, anyhow, bail};
use serde::Deserialize;

use super::measured::{self, Batch, MeasuredJob, Model, ModelSpec};
use super::queues::QueueSpec;
use super::speed::{Speed, SpeedModel};
use super::workloads;
use crate::spec::{self, DeviceClassSpec, NodeGroup, TaskSpec};
use dragon_framework::devices::{Claim, DeviceClass, Request, ResourceSlice};
use dragon_framework::{Job, Node, Pod, Preemption, Resources, TopologyConstraint, TopologyMode};
use dragon_framework::{JobKey, NodeName, PodKey};

/// The traces shipped inside the binary: `(name, YAML)`.
pub const BUNDLED: &[(&str, &str)] = &[
    ("paper", include_str!("../traces/paper.yaml")),
    ("large", include_str!("../traces/large.yaml")),
    ("deadlock", include_str!("../traces/deadlock.yaml")),
];

/// Default period of the scale step, seconds.
pub const DEFAULT_SCALE_INTERVAL_S: f64 = 30.0;
/// Default cost of a scale event (checkpoint, restart, restore), seconds.
pub const DEFAULT_RESTART_S: f64 = 30.0;
/// Default time with no change at all, while jobs wait and none runs, after
/// which the run is declared deadlocked (only matters for policies with a
/// scale step, which might still act late).
pub const DEFAULT_STALL_S: f64 = 3600.0;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TraceFile {
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    model: ModelFile,
    cluster: ClusterFile,
    /// Teams sharing the cluster (see `queues.rs`).
    #[serde(default)]
    queues: Vec<QueueSpec>,
    /// Models measured for this trace, beside the file.
    #[serde(default)]
    measurements: Option<MeasurementsFile>,
    jobs: Vec<JobFile>,
}

/// A trace's own measured models: a directory (relative to the trace
/// file) in the layout of `measured::by_gpu`, and what each model is.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct MeasurementsFile {
    dir: String,
    models: Vec<ModelSpec>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ClusterFile {
    nodes: Vec<NodeGroup>,
    #[serde(default)]
    device_classes: Vec<DeviceClassSpec>,
}

/// Trace-wide model parameters; every field is optional.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ModelFile {
    #[serde(default)]
    scale_interval_s: Option<f64>,
    #[serde(default)]
    restart_s: Option<f64>,
    #[serde(default)]
    stall_s: Option<f64>,
    #[serde(default)]
    speed: SpeedFile,
    /// Topology levels, widest first, each with its penalty.
    #[serde(default)]
    topology: Vec<LevelFile>,
}

/// One topology level of a trace: a node label key and the fraction of
/// throughput a job loses when its tasks span several domains of it.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct LevelFile {
    key: String,
    penalty: f64,
}

/// A job's topology constraint: one of the two, naming a level.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct JobTopologyFile {
    #[serde(default)]
    required: Option<String>,
    #[serde(default)]
    preferred: Option<String>,
}

#[derive(Debug, Default, Clone, Copy, Deserialize)]
#[serde(deny_unknown_fields)]
struct SpeedFile {
    #[serde(default)]
    scaling_exponent: Option<f64>,
    #[serde(default)]
    cross_node_penalty: Option<f64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct JobFile {
    name: String,
    arrival_s: f64,
    /// Run time at the requested size on one node (the modelled speed);
    /// or `measured`.
    #[serde(default)]
    duration_s: Option<f64>,
    /// A job of a measured model instead of a duration.
    #[serde(default)]
    measured: Option<MeasuredFile>,
    #[serde(default)]
    ps: Option<TaskSpec>,
    workers: TaskSpec,
    #[serde(default)]
    priority: i32,
    /// `never`: its pods wait for room rather than preempt lower-priority
    /// jobs (Kubernetes' `preemptionPolicy: Never`).
    #[serde(default)]
    preemption: Preemption,
    #[serde(default)]
    workload: Option<String>,
    #[serde(default)]
    restart_s: Option<f64>,
    #[serde(default)]
    speed: SpeedFile,
    /// Keep its pods in one domain of a level (required) or try to.
    #[serde(default)]
    topology: Option<JobTopologyFile>,
    /// The queue (team) it belongs to, one of the trace's `queues`.
    #[serde(default)]
    queue: Option<String>,
}

/// A job of one of Pollux's measured models, at a fixed total batch size
/// or (without one) choosing its batch as an AdaptDL job does: its run time
/// and speed at every size come from the measurements.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct MeasuredFile {
    model: String,
    #[serde(default)]
    batch_size: Option<u32>,
}

/// One job of a validated trace.
#[derive(Debug, Clone)]
pub struct TraceJob {
    pub name: JobKey,
    /// Free-text model name (`resnet50`, `vgg16`), for reports.
    pub workload: String,
    pub arrival_ms: u64,
    /// Work in reference milliseconds: run time at the requested worker
    /// count on one node (a measured job: packed on the fewest nodes).
    pub work_ms: f64,
    /// Cost of each scale event, ms.
    pub restart_ms: u64,
    pub speed: Speed,
    /// The framework's job record and the job's pods as submitted.
    pub job: Job,
    pub pods: Vec<Pod>,
    /// Pods already bound when it arrives, by key: node name (a trace
    /// that resumes a recorded cluster).
    pub placed: BTreeMap<PodKey, NodeName>,
    /// It had started before the run began (it runs as soon as all its
    /// pods are bound, and the scale step may resize it).
    pub started: bool,
    /// The claims of its pods that claim devices.
    pub claims: Vec<Claim>,
    /// What each worker's claim asks for.
    pub worker_devices: Option<Vec<Request>>,
    /// Its queue: an index into [`Trace::queues`].
    pub queue: Option<usize>,
}

impl TraceJob {
    /// Parameter servers.
    pub fn ps_count(&self) -> u32 {
        self.pods
            .iter()
            .filter(|p| p.role == dragon_framework::Role::Ps)
            .count() as u32
    }
}

/// A validated trace.
#[derive(Debug, Clone)]
pub struct Trace {
    /// The file or bundled name it came from.
    pub origin: String,
    pub description: String,
    pub nodes: Vec<Node>,
    /// DeviceClasses, and the ResourceSlices of nodes with devices.
    pub device_classes: Vec<DeviceClass>,
    pub slices: Vec<(String, ResourceSlice)>,
    /// GPUs served by devices (of a class that serves `nvidia.com/gpu`),
    /// by node: what the cluster's GPU total counts beside advertised ones.
    pub device_gpus: BTreeMap<NodeName, u32>,
    /// Jobs in arrival order (ties: trace order).
    pub jobs: Vec<TraceJob>,
    /// Pods outside any job bound to a node (by name) for the whole run.
    pub background: Vec<(Pod, NodeName)>,
    /// Topology levels, widest first, with the throughput a job loses
    /// when its tasks span several domains of each; empty: the framework's
    /// default levels, no penalty beyond the speed model's.
    pub topology: Vec<(String, f64)>,
    /// Teams sharing the cluster; empty: none.
    pub queues: Vec<QueueSpec>,
    pub scale_interval_ms: u64,
    pub stall_ms: u64,
}

/// The trace's levels, checked: usable as the framework's levels, each
/// penalty a fraction of throughput.
fn topology_levels(files: &[LevelFile]) -> Result<Vec<(String, f64)>> {
    for (i, l) in files.iter().enumerate() {
        if !(l.penalty.is_finite() && (0.0..1.0).contains(&l.penalty)) {
            bail!(
                "model.topology[{i}] ({}).penalty: must be in [0, 1) (a fraction of throughput), got {}",
                l.key,
                l.penalty
            );
        }
    }
    let keys: Vec<String> = files.iter().map(|l| l.key.clone()).collect();
    dragon_framework::check_levels(&keys).map_err(|e| anyhow!("model.topology: {e}"))?;
    Ok(files.iter().map(|l| (l.key.clone(), l.penalty)).collect())
}

/// A job's constraint, naming one of the trace's levels (or the
/// framework's defaults when the trace has none).
fn job_topology(
    place: &str,
    t: &JobTopologyFile,
    levels: &[(String, f64)],
) -> Result<TopologyConstraint> {
    let c = match (&t.required, &t.preferred) {
        (Some(k), None) => TopologyConstraint::required(k),
        (None, Some(k)) => TopologyConstraint::preferred(k),
        _ => bail!("{place}.topology: set one of `required` and `preferred`"),
    };
    let known = match levels.is_empty() {
        true => dragon_framework::DEFAULT_LEVELS.contains(&c.key.as_str()),
        false => {
            c.key == dragon_framework::HOSTNAME_LEVEL || levels.iter().any(|(k, _)| *k == c.key)
        }
    };
    if !known {
        bail!(
            "{place}.topology: {} is not a level of model.topology",
            c.key
        );
    }
    Ok(c)
}

fn seconds(place: &str, v: f64, min_exclusive: bool) -> Result<u64> {
    if !v.is_finite() || v < 0.0 || (min_exclusive && v <= 0.0) || v > 1e9 {
        let what = if min_exclusive {
            "a positive"
        } else {
            "a non-negative"
        };
        bail!("{place}: must be {what} number of seconds (at most 1e9), got {v}");
    }
    Ok((v * 1000.0).round() as u64)
}

/// A measured job's work and speed; the model must be the trace's own or
/// bundled, the batch within what it was measured at, one GPU per worker
/// and no parameter server (the measurements are of all-reduce jobs).
fn measured_job(
    place: &str,
    m: &MeasuredFile,
    j: &JobFile,
    own: &[Arc<Model>],
) -> Result<(f64, MeasuredJob)> {
    let found = own
        .iter()
        .find(|o| o.name == m.model)
        .cloned()
        .or_else(|| Model::bundled(&m.model));
    let Some(model) = found else {
        let mut known: Vec<&str> = own.iter().map(|o| o.name.as_str()).collect();
        known.extend(measured::Measurements::bundled_names());
        bail!(
            "{place}.measured.model: no measurements of `{}` (measured: {})",
            m.model,
            known.join(", ")
        );
    };
    let tables = model.reference();
    let batch = match m.batch_size {
        None => Batch::Adaptive,
        Some(b) if (tables.init_batch_size..=tables.max_batch_size).contains(&b) => Batch::Fixed(b),
        Some(b) => bail!(
            "{place}.measured.batch_size: `{}` was measured at {} to {}, got {b}",
            m.model,
            tables.init_batch_size,
            tables.max_batch_size,
        ),
    };
    if j.speed.scaling_exponent.is_some() || j.speed.cross_node_penalty.is_some() {
        bail!("{place}.speed: a measured job's speed comes from its measurements");
    }
    if j.ps.as_ref().is_some_and(|ps| ps.count > 0) {
        bail!("{place}.ps: a measured job has no parameter server (all-reduce)");
    }
    if j.workers.gpus != 1 {
        bail!(
            "{place}.workers.gpus: a measured job's workers have one GPU each, got {}",
            j.workers.gpus
        );
    }
    let most = tables.max_replicas(m.batch_size.unwrap_or(tables.max_batch_size));
    let widest = j
        .workers
        .max
        .unwrap_or(j.workers.count)
        .max(j.workers.count);
    if widest > most {
        bail!(
            "{place}.workers: a batch of at most {} of `{}` splits over at most {most} workers, asked {widest}",
            m.batch_size.unwrap_or(tables.max_batch_size),
            m.model
        );
    }
    let job = MeasuredJob { model, batch };
    let requested_s = job.run_time_s(&measured::packed(j.workers.count, measured::GPUS_PER_NODE));
    Ok((requested_s * 1000.0, job))
}

fn speed_model(place: &str, base: SpeedModel, f: SpeedFile) -> Result<SpeedModel> {
    let mut m = base;
    if let Some(a) = f.scaling_exponent {
        if !a.is_finite() || a <= 0.0 || a > 1.0 {
            bail!(
                "{place}.speed.scaling_exponent: must be in (0, 1] (1 is linear scaling), got {a}"
            );
        }
        m.scaling_exponent = a;
    }
    if let Some(p) = f.cross_node_penalty {
        if !p.is_finite() || !(0.0..1.0).contains(&p) {
            bail!(
                "{place}.speed.cross_node_penalty: must be in [0, 1) (a fraction of throughput), got {p}"
            );
        }
        m.cross_node_penalty = p;
    }
    Ok(m)
}

/// `jobs[3].workers` → `jobs[3] (resnet50-001).workers`, using the names in
/// the parsed document.
fn name_place(path: &str, doc: &serde_json::Value) -> String {
    let named = |prefix: &str, list: Option<&serde_json::Value>, key: &str| -> Option<String> {
        let rest = path.strip_prefix(prefix)?;
        let close = rest.find(']')?;
        let index: usize = rest[..close].parse().ok()?;
        let name = list?.get(index)?.get(key)?.as_str()?;
        Some(format!("{prefix}{index}] ({name}){}", &rest[close + 1..]))
    };
    named("jobs[", doc.get("jobs"), "name")
        .or_else(|| {
            named(
                "cluster.nodes[",
                doc.get("cluster").and_then(|c| c.get("nodes")),
                "name_prefix",
            )
        })
        .unwrap_or_else(|| path.to_string())
}

impl Trace {
    /// A trace file (YAML, JSON, or a Pollux workload CSV), or a bundled
    /// trace by name (`paper`, `large`, `deadlock`, `pollux-w6`, …).
    ///
    /// # Errors
    /// Unreadable, malformed or invalid; the message names the place.
    pub fn load(spec: &str) -> Result<Trace> {
        let path = Path::new(spec);
        if path.exists() {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("cannot read trace {}", path.display()))?;
            if path.extension().is_some_and(|e| e == "csv") {
                return workloads::csv(&text, &path.display().to_string());
            }
            let json = path.extension().is_some_and(|e| e == "json");
            let doc = Trace::document(&text, &path.display().to_string(), json)?;
            return Trace::from_document_in(doc, &path.display().to_string(), path.parent());
        }
        if let Some((name, text)) = BUNDLED.iter().find(|(name, _)| *name == spec) {
            return Trace::parse(text, &format!("bundled trace `{name}`"), false);
        }
        match workloads::bundled(spec) {
            Some(trace) => trace,
            None => {
                let names: Vec<&str> = BUNDLED.iter().map(|(n, _)| *n).collect();
                bail!(
                    "no trace file `{spec}`, and no bundled trace of that name (bundled: {}; Pollux's workloads pollux-w1 to pollux-w8, at twice the load pollux-w1-2x to pollux-w8-2x, each with -adaptive for jobs that choose their batch size; Philly's jobs philly and philly-week)",
                    names.join(", ")
                )
            }
        }
    }

    /// Parse and validate trace text; `origin` names it in messages.
    ///
    /// # Errors
    /// Malformed or invalid; the message names `origin`, the item and the field.
    pub fn parse(text: &str, origin: &str, json: bool) -> Result<Trace> {
        Trace::from_document(Trace::document(text, origin, json)?, origin)
    }

    /// Trace text as a document, not yet validated.
    fn document(text: &str, origin: &str, json: bool) -> Result<serde_json::Value> {
        Ok(if json {
            serde_json::from_str(text).map_err(|e| anyhow!("{origin}: not valid JSON: {e}"))?
        } else {
            // Through YAML's own value type, which refuses duplicate keys.
            let yaml: serde_norway::Value = serde_norway::from_str(text)
                .map_err(|e| anyhow!("{origin}: not valid YAML: {e}"))?;
            serde_json::to_value(yaml).map_err(|e| anyhow!("{origin}: not a trace: {e}"))?
        })
    }

    /// Validate a trace document already parsed (what a YAML or JSON file
    /// holds); `origin` names it in messages.
    ///
    /// # Errors
    /// Invalid; the message names `origin`, the item and the field.
    pub fn from_document(doc: serde_json::Value, origin: &str) -> Result<Trace> {
        Trace::from_document_in(doc, origin, None)
    }

    /// As [`Trace::from_document`], for a document read from a file in
    /// `dir`, where its own measurements are found.
    ///
    /// # Errors
    /// As [`Trace::from_document`].
    pub fn from_document_in(
        doc: serde_json::Value,
        origin: &str,
        dir: Option<&Path>,
    ) -> Result<Trace> {
        let file: TraceFile = serde_path_to_error::deserialize(&doc).map_err(|e| {
            let path = e.path().to_string();
            let place = if path == "." || path.is_empty() {
                "(top level)".to_string()
            } else {
                name_place(&path, &doc)
            };
            anyhow!("{origin}: {place}: {}", e.into_inner())
        })?;
        Trace::validate(file, origin, dir).map_err(|e| anyhow!("{origin}: {e:#}"))
    }

    fn validate(file: TraceFile, origin: &str, dir: Option<&Path>) -> Result<Trace> {
        let own = match &file.measurements {
            None => Vec::new(),
            Some(m) => {
                let Some(dir) = dir else {
                    bail!(
                        "measurements: only a trace read from a file can name a directory of its own"
                    );
                };
                measured::load_all(&dir.join(&m.dir), &m.models)
                    .map_err(|e| anyhow!("measurements: {e:#}"))?
            }
        };
        let m = &file.model;
        let scale_interval_ms = seconds(
            "model.scale_interval_s",
            m.scale_interval_s.unwrap_or(DEFAULT_SCALE_INTERVAL_S),
            true,
        )?;
        if scale_interval_ms < 1000 {
            bail!(
                "model.scale_interval_s: must be at least 1 second, got {} ms",
                scale_interval_ms
            );
        }
        let restart_default = m.restart_s.unwrap_or(DEFAULT_RESTART_S);
        seconds("model.restart_s", restart_default, false)?;
        let stall_ms = seconds("model.stall_s", m.stall_s.unwrap_or(DEFAULT_STALL_S), true)?;
        let base_speed = speed_model("model", SpeedModel::DEFAULT, m.speed)?;
        let levels = topology_levels(&m.topology)?;

        if file.cluster.nodes.is_empty() {
            bail!("cluster.nodes: a trace needs at least one node group");
        }
        // The total first: a short file can ask for millions of nodes.
        let requested: u64 = file.cluster.nodes.iter().map(|g| u64::from(g.count)).sum();
        if requested > 100_000 {
            bail!("cluster.nodes: {requested} nodes is more than the 100000 supported");
        }
        let mut nodes = Vec::new();
        let mut names = BTreeSet::new();
        for (i, g) in file.cluster.nodes.iter().enumerate() {
            let place = format!("cluster.nodes[{i}] ({})", g.name_prefix);
            if g.count == 0 {
                bail!("{place}.count: must be at least 1");
            }
            for n in g.nodes(&place)? {
                if !names.insert(n.name.clone()) {
                    bail!(
                        "{place}.name_prefix: node `{}` is already defined by an earlier group",
                        n.name
                    );
                }
                nodes.push(n);
            }
        }
        let slices = spec::devices::slices(&file.cluster.nodes, |i| {
            format!("cluster.nodes[{i}] ({})", file.cluster.nodes[i].name_prefix)
        })?;
        let device_classes: Vec<DeviceClass> = file
            .cluster
            .device_classes
            .iter()
            .map(DeviceClassSpec::class)
            .collect();
        // A class serving `nvidia.com/gpu` makes devices GPUs (taken as all
        // of a node's devices: what a GPU driver publishes).
        let device_gpus: BTreeMap<NodeName, u32> =
            match device_classes.iter().any(|c| c.extended_resource.is_some()) {
                true => slices
                    .iter()
                    .filter_map(|(_, s)| match &s.reach {
                        Some(dragon_framework::devices::Reach::Node(n)) => {
                            Some((n.into(), s.devices.len() as u32))
                        }
                        _ => None,
                    })
                    .collect(),
                false => BTreeMap::new(),
            };
        let capacity = |n: &Node| {
            let mut r = n.allocatable;
            r.gpus += device_gpus.get(&n.name).copied().unwrap_or(0);
            r
        };
        let total = nodes
            .iter()
            .fold(Resources::default(), |a, n| a.plus(capacity(n)));

        super::queues::validate(&file.queues, u64::from(total.gpus))?;
        if file.jobs.is_empty() {
            bail!("jobs: a trace needs at least one job");
        }
        let mut jobs = Vec::with_capacity(file.jobs.len());
        let mut job_names = BTreeSet::new();
        for (i, j) in file.jobs.into_iter().enumerate() {
            let place = format!("jobs[{i}] ({})", j.name);
            if !job_names.insert(j.name.clone()) {
                bail!("{place}.name: another job already has this name");
            }
            let arrival_ms = seconds(&format!("{place}.arrival_s"), j.arrival_s, false)?;
            let mut measured_restart = None;
            let (work_ms, speed) = match (j.duration_s, &j.measured) {
                (Some(d), None) => (
                    seconds(&format!("{place}.duration_s"), d, true)? as f64,
                    Speed::Modelled(speed_model(&place, base_speed, j.speed)?),
                ),
                (None, Some(m)) => {
                    let (work_ms, job) = measured_job(&place, m, &j, &own)?;
                    measured_restart = job.model.restart_s;
                    (work_ms, Speed::Measured(job))
                }
                (Some(_), Some(_)) => {
                    bail!("{place}: give `duration_s` or `measured`, not both")
                }
                (None, None) => bail!(
                    "{place}.duration_s: missing (or give `measured`: a model and its batch size)"
                ),
            };
            let restart_ms = seconds(
                &format!("{place}.restart_s"),
                j.restart_s.or(measured_restart).unwrap_or(restart_default),
                false,
            )?;
            let queue = match &j.queue {
                None => None,
                Some(name) => match file.queues.iter().position(|q| &q.name == name) {
                    Some(q) => Some(q),
                    None => bail!("{place}.queue: no queue is named `{name}`"),
                },
            };
            let mut jp = spec::job_pods(
                &place,
                &j.name,
                arrival_ms,
                j.priority,
                j.ps.as_ref(),
                &j.workers,
            )?;
            for pod in &mut jp.pods {
                pod.preemption = j.preemption;
            }
            jp.job.speedup = speed.reported_speedup(jp.job.max_workers);
            if let Some(t) = &j.topology {
                jp.job.topology = Some(job_topology(&place, t, &levels)?);
            }
            // A job that could never run, even alone on the empty cluster, is
            // a trace error rather than a simulated deadlock.
            for (role, spec) in [("ps", j.ps.as_ref()), ("workers", Some(&j.workers))] {
                let Some(spec) = spec else { continue };
                if spec.count == 0 {
                    continue;
                }
                let r = spec::resources(
                    &format!("{place}.{role}"),
                    spec.cpu,
                    spec.memory_gib,
                    spec.gpus,
                )?;
                if !nodes.iter().any(|n| r.fits_in(capacity(n))) {
                    bail!(
                        "{place}.{role}: one task requests {} CPU, {} GiB, {} GPU(s), more than any node has",
                        spec.cpu,
                        spec.memory_gib,
                        spec.gpus
                    );
                }
            }
            let min_gang = jp
                .pods
                .iter()
                .filter(|p| {
                    p.role != dragon_framework::Role::Worker || p.index < jp.job.min_workers
                })
                .fold(Resources::default(), |a, p| a.plus(p.request));
            if !min_gang.fits_in(total) {
                bail!(
                    "{place}.workers.min: even at its minimum of {} workers the job needs {} GPUs, {} mCPU, {} MiB, more than the whole cluster ({} GPUs, {} mCPU, {} MiB)",
                    jp.job.min_workers,
                    min_gang.gpus,
                    min_gang.cpu_milli,
                    min_gang.memory_mib,
                    total.gpus,
                    total.cpu_milli,
                    total.memory_mib
                );
            }
            // Likewise a job that must stay in one domain no domain holds.
            if let Some(c) = &jp.job.topology
                && c.mode == TopologyMode::Required
            {
                let mut domains: BTreeMap<&str, Resources> = BTreeMap::new();
                for n in &nodes {
                    let hostname =
                        (c.key == dragon_framework::HOSTNAME_LEVEL).then_some(n.name.as_str());
                    if let Some(d) = n.labels.get(&c.key).map(String::as_str).or(hostname) {
                        let r = domains.entry(d).or_default();
                        *r = r.plus(capacity(n));
                    }
                }
                if !domains.values().any(|r| min_gang.fits_in(*r)) {
                    bail!(
                        "{place}.topology: even at its minimum of {} workers the job needs {} GPUs, {} mCPU, {} MiB in one domain of {}, more than any has",
                        jp.job.min_workers,
                        min_gang.gpus,
                        min_gang.cpu_milli,
                        min_gang.memory_mib,
                        c.key
                    );
                }
            }
            jp.job.queue = queue.map(|q| file.queues[q].name.clone());
            jobs.push(TraceJob {
                name: j.name.into(),
                workload: j.workload.unwrap_or_default(),
                arrival_ms,
                work_ms,
                restart_ms,
                speed,
                job: jp.job,
                pods: jp.pods,
                placed: BTreeMap::new(),
                started: false,
                claims: jp.claims,
                worker_devices: jp.worker_devices,
                queue,
            });
        }
        // Arrival order, ties in trace order (a stable sort).
        jobs.sort_by_key(|j| j.arrival_ms);
        Ok(Trace {
            origin: origin.to_string(),
            description: file.description.unwrap_or_default(),
            nodes,
            device_classes,
            slices,
            device_gpus,
            jobs,
            background: Vec::new(),
            topology: levels,
            queues: file.queues,
            scale_interval_ms,
            stall_ms,
        })
    }

    /// GPUs in the cluster.
    pub fn total_gpus(&self) -> u64 {
        self.nodes
            .iter()
            .map(|n| u64::from(n.allocatable.gpus))
            .sum::<u64>()
            + self
                .device_gpus
                .values()
                .map(|&g| u64::from(g))
                .sum::<u64>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
cluster:
  nodes:
    - {name_prefix: gpu, count: 2, cpu: 32, memory_gib: 128, gpus: 4}
jobs:
  - name: resnet50-001
    arrival_s: 0
    duration_s: 1800
    ps:      {count: 1, cpu: 2, memory_gib: 8}
    workers: {count: 4, min: 2, max: 8, cpu: 4, memory_gib: 16, gpus: 1}
  - name: vgg16-002
    arrival_s: 10
    duration_s: 600
    workload: vgg16
    speed: {cross_node_penalty: 0.4}
    workers: {count: 2, cpu: 4, memory_gib: 16, gpus: 1}
"#;

    fn err(text: &str) -> String {
        format!("{:#}", Trace::parse(text, "t.yaml", false).unwrap_err())
    }

    #[test]
    fn topology_levels_and_a_jobs_constraint_are_read_and_bad_ones_named() {
        let racked = GOOD
            .replace(
                "cluster:",
                "model:\n  topology:\n    - {key: dragon.dev/rack, penalty: 0.35}\ncluster:",
            )
            .replace(
                "    workload: vgg16\n",
                "    workload: vgg16\n    topology: {required: dragon.dev/rack}\n",
            )
            .replace("gpus: 4}", "gpus: 4, labels: {dragon.dev/rack: r1}}");
        let t = Trace::parse(&racked, "t.yaml", false).unwrap();
        assert_eq!(t.topology, [("dragon.dev/rack".to_string(), 0.35)]);
        assert_eq!(
            t.jobs[1].job.topology,
            Some(TopologyConstraint::required("dragon.dev/rack"))
        );
        assert_eq!(t.jobs[0].job.topology, None);

        let e = err(&racked.replace("penalty: 0.35", "penalty: 1.0"));
        assert!(
            e.contains("model.topology[0] (dragon.dev/rack).penalty: must be in [0, 1)"),
            "{e}"
        );
        let e = err(&racked.replace("{required: dragon.dev/rack}", "{required: zone}"));
        assert!(
            e.contains("jobs[1] (vgg16-002).topology: zone is not a level of model.topology"),
            "{e}"
        );
        let e = err(&racked.replace(
            "{required: dragon.dev/rack}",
            "{required: dragon.dev/rack, preferred: dragon.dev/rack}",
        ));
        assert!(e.contains("set one of `required` and `preferred`"), "{e}");
        // Two racks of one node of 4 GPUs: four workers fit the cluster, not
        // a rack.
        let e = err(&racked
            .replace(
                "{name_prefix: gpu, count: 2, cpu: 32, memory_gib: 128, gpus: 4, labels: {dragon.dev/rack: r1}}",
                "{name_prefix: a, count: 1, cpu: 32, memory_gib: 128, gpus: 4, labels: {dragon.dev/rack: r1}}\n    - {name_prefix: b, count: 1, cpu: 32, memory_gib: 128, gpus: 4, labels: {dragon.dev/rack: r2}}",
            )
            .replace(
                "workers: {count: 2, cpu: 4, memory_gib: 16, gpus: 1}",
                "workers: {count: 6, cpu: 4, memory_gib: 16, gpus: 1}",
            ));
        assert!(
            e.contains("jobs[1] (vgg16-002).topology: even at its minimum of 6 workers the job needs 6 GPUs")
                && e.contains("in one domain of dragon.dev/rack, more than any has"),
            "{e}"
        );
    }

    #[test]
    fn a_good_trace_parses_with_defaults() {
        let t = Trace::parse(GOOD, "t.yaml", false).unwrap();
        assert_eq!(t.nodes.len(), 2);
        assert_eq!(t.jobs.len(), 2);
        assert_eq!(t.scale_interval_ms, 30_000);
        let j = &t.jobs[0];
        assert_eq!(
            (j.job.workers, j.job.min_workers, j.job.max_workers),
            (4, 2, 8)
        );
        assert_eq!(j.pods.len(), 5);
        assert_eq!(j.restart_ms, 30_000);
        assert_eq!(j.speed, Speed::Modelled(SpeedModel::DEFAULT));
        assert_eq!(t.jobs[1].speed.modelled().unwrap().cross_node_penalty, 0.4);
        assert_eq!(t.jobs[1].workload, "vgg16");
    }

    #[test]
    fn unknown_keys_name_the_file_job_and_key() {
        let e = err(&GOOD.replace(
            "cpu: 4, memory_gib: 16, gpus: 1}\n  - name",
            "cpu: 4, memory_gib: 16, gpu: 1}\n  - name",
        ));
        assert!(e.contains("t.yaml"), "{e}");
        assert!(e.contains("jobs[0] (resnet50-001).workers"), "{e}");
        assert!(e.contains("unknown field `gpu`"), "{e}");
        let e = err(&GOOD.replace("duration_s: 600", "duration_s: 600\n    colour: red"));
        assert!(
            e.contains("jobs[1] (vgg16-002)") && e.contains("`colour`"),
            "{e}"
        );
        let e = err(&format!("{GOOD}\nextra: 1\n"));
        assert!(e.contains("unknown field `extra`"), "{e}");
        let e = err(&GOOD.replace("gpus: 4}", "gpus: 4, zone: a}"));
        assert!(
            e.contains("cluster.nodes[0] (gpu)") && e.contains("`zone`"),
            "{e}"
        );
    }

    #[test]
    fn wrong_types_and_missing_fields_name_the_field() {
        let e = err(&GOOD.replace("duration_s: 1800", "duration_s: long"));
        assert!(e.contains("jobs[0] (resnet50-001).duration_s"), "{e}");
        let e = err(&GOOD.replace("    duration_s: 600\n", ""));
        assert!(
            e.contains("jobs[1] (vgg16-002)") && e.contains("duration_s"),
            "{e}"
        );
    }

    #[test]
    fn invalid_values_name_the_job_and_field() {
        let e = err(&GOOD.replace("min: 2", "min: 5"));
        assert!(
            e.contains("t.yaml: jobs[0] (resnet50-001).workers.min"),
            "{e}"
        );
        let e = err(&GOOD.replace("duration_s: 600", "duration_s: 0"));
        assert!(e.contains("jobs[1] (vgg16-002).duration_s"), "{e}");
        let e = err(&GOOD.replace("arrival_s: 10", "arrival_s: -1"));
        assert!(e.contains("jobs[1] (vgg16-002).arrival_s"), "{e}");
        let e = err(&GOOD.replace("cross_node_penalty: 0.4", "cross_node_penalty: 1.5"));
        assert!(
            e.contains("jobs[1] (vgg16-002).speed.cross_node_penalty"),
            "{e}"
        );
        let e = err(&GOOD.replace("name: vgg16-002", "name: resnet50-001"));
        assert!(
            e.contains("jobs[1] (resnet50-001).name") && e.contains("already"),
            "{e}"
        );
        let e = err(&GOOD.replace("gpus: 1}\n  - name", "gpus: 5}\n  - name"));
        assert!(
            e.contains("jobs[0] (resnet50-001).workers") && e.contains("more than any node"),
            "{e}"
        );
        let e = err(&GOOD.replace("count: 4, min: 2, max: 8", "count: 9, min: 9, max: 9"));
        assert!(
            e.contains("jobs[0] (resnet50-001).workers.min") && e.contains("whole cluster"),
            "{e}"
        );
        let e = err(&GOOD.replace("count: 2, cpu: 32", "count: 0, cpu: 32"));
        assert!(e.contains("cluster.nodes[0] (gpu).count"), "{e}");
    }

    #[test]
    fn json_traces_and_syntax_errors() {
        let json = r#"{"cluster": {"nodes": [{"name_prefix": "n", "count": 1, "cpu": 8, "memory_gib": 32, "gpus": 2}]},
            "jobs": [{"name": "a", "arrival_s": 0, "duration_s": 60, "workers": {"count": 2, "gpus": 1}}]}"#;
        let t = Trace::parse(json, "t.json", true).unwrap();
        assert_eq!(t.jobs[0].pods.len(), 2);
        let e = format!("{:#}", Trace::parse("{", "t.json", true).unwrap_err());
        assert!(e.starts_with("t.json: not valid JSON"), "{e}");
        let e = format!(
            "{:#}",
            Trace::parse("jobs: [", "t.yaml", false).unwrap_err()
        );
        assert!(e.starts_with("t.yaml: not valid YAML"), "{e}");
        let e = err(&GOOD.replace("max: 8,", "max: 8, max: 3,"));
        assert!(e.contains("duplicate") && e.contains("max"), "{e}");
    }

    #[test]
    fn bundled_traces_load_and_unknown_names_are_explained() {
        for (name, _) in BUNDLED {
            let t = Trace::load(name).unwrap_or_else(|e| panic!("{name}: {e:#}"));
            assert!(!t.jobs.is_empty());
        }
        let e = format!("{:#}", Trace::load("no-such-trace").unwrap_err());
        assert!(e.contains("paper") && e.contains("large"), "{e}");
    }
}
