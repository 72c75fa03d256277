//! A one-round scheduling case for `dragon policy run`: a cluster, jobs
//! (pending or already running) and lone pods, in YAML or JSON.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context, Result, bail};
use serde::Deserialize;

use dragon_framework::{
    Cluster, Decision, Pod, RecordingIo, RoundReport, ScaleReport, Scheduler, SchedulerConfig,
    Toleration,
};
use dragon_runtime::WasmPolicy;
use dragon_sim::spec::{self, NodeGroup, TaskSpec};

/// The case file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Case {
    /// The round's time, seconds (default 0).
    #[serde(default)]
    pub now_s: f64,
    pub nodes: Vec<NodeGroup>,
    /// DeviceClasses, for nodes with devices and tasks that claim them.
    #[serde(default)]
    pub device_classes: Vec<spec::DeviceClassSpec>,
    #[serde(default)]
    pub jobs: Vec<CaseJob>,
    #[serde(default)]
    pub pods: Vec<CasePod>,
    /// The policy's settings for this case (a mapping, given to the policy
    /// as JSON); `--settings` on the command line takes precedence.
    #[serde(default)]
    pub settings: Option<serde_json::Value>,
}

/// What one round and one scale step of a case decided.
#[derive(Debug)]
pub struct Outcome {
    /// The round's time, ms.
    pub now_ms: u64,
    pub round: RoundReport,
    pub scale: ScaleReport,
}

impl Outcome {
    /// Hook calls that failed, in the round and the scale step.
    pub fn failures(&self) -> usize {
        self.round
            .decisions
            .iter()
            .filter(|d| matches!(d, Decision::PolicyError { .. }))
            .count()
            + self.scale.errors.len()
    }

    /// The decisions as `--json` prints them and `dragon policy test`
    /// keeps them.
    pub fn decisions(&self) -> serde_json::Value {
        serde_json::json!({
            "decisions": self.round.decisions,
            "scale": self.scale,
        })
    }
}

/// A PS/worker job.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CaseJob {
    pub name: String,
    #[serde(default)]
    pub arrival_s: f64,
    #[serde(default)]
    pub priority: i32,
    #[serde(default)]
    pub ps: Option<TaskSpec>,
    pub workers: TaskSpec,
    /// The job already runs: one node per pod, parameter servers first.
    #[serde(default)]
    pub running_on: Vec<String>,
    /// When it started, seconds (default: its arrival).
    #[serde(default)]
    pub started_s: Option<f64>,
}

/// A lone pod.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CasePod {
    pub name: String,
    #[serde(default)]
    pub cpu: f64,
    #[serde(default)]
    pub memory_gib: f64,
    #[serde(default)]
    pub gpus: u32,
    #[serde(default)]
    pub arrival_s: f64,
    /// Already bound to this node.
    #[serde(default)]
    pub node: Option<String>,
    #[serde(default)]
    pub node_selector: BTreeMap<String, String>,
    #[serde(default)]
    pub tolerations: Vec<Toleration>,
}

fn ms(place: &str, s: f64) -> Result<u64> {
    if !s.is_finite() || s < 0.0 {
        bail!("{place}: must be a non-negative number of seconds, got {s}");
    }
    Ok((s * 1000.0).round() as u64)
}

/// Parse YAML or JSON by extension (YAML for anything but `.json`).
///
/// # Errors
/// The file cannot be read or parsed; the message names the file and place.
pub fn parse_file<T: serde::de::DeserializeOwned>(path: &Path) -> Result<T> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    if path.extension().is_some_and(|e| e == "json") {
        serde_json::from_str(&text)
            .with_context(|| format!("{} is not a valid file of this kind", path.display()))
    } else {
        serde_norway::from_str(&text)
            .with_context(|| format!("{} is not a valid file of this kind", path.display()))
    }
}

impl Case {
    /// Read a case file.
    ///
    /// # Errors
    /// Unreadable or malformed file.
    pub fn load(path: &Path) -> Result<Case> {
        parse_file(path)
    }

    /// The round's time, ms.
    pub fn now_ms(&self) -> Result<u64> {
        ms("now_s", self.now_s)
    }

    /// The case's settings as the JSON a policy's `configure` takes (empty
    /// when it has none).
    pub fn settings_json(&self) -> String {
        self.settings
            .as_ref()
            .map_or_else(String::new, serde_json::Value::to_string)
    }

    /// One scheduling round and one scale step of `policy` on this case.
    ///
    /// # Errors
    /// The case describes an invalid cluster (the message names the place).
    pub fn run(&self, policy: &WasmPolicy) -> Result<Outcome> {
        let mut sched = self.scheduler()?;
        let now_ms = self.now_ms()?;
        let mut io = RecordingIo::default();
        let mut scaler = RecordingIo::default();
        let round = sched.schedule_round(now_ms, policy, &mut io, &mut scaler);
        let scale = sched.scale_step(now_ms, policy, &mut scaler);
        Ok(Outcome {
            now_ms,
            round,
            scale,
        })
    }

    /// The framework state this case describes.
    ///
    /// # Errors
    /// Invalid values, unknown nodes, duplicate names; each names its place.
    pub fn scheduler(&self) -> Result<Scheduler> {
        let mut cluster = Cluster::new();
        for (i, g) in self.nodes.iter().enumerate() {
            for n in g.nodes(&format!("nodes[{i}]"))? {
                cluster.add_node(n).with_context(|| format!("nodes[{i}]"))?;
            }
        }
        for (name, slice) in spec::devices::slices(&self.nodes, |i| format!("nodes[{i}]"))? {
            cluster.set_resource_slice(&name, slice);
        }
        for class in &self.device_classes {
            cluster.set_device_class(class.class());
        }
        for (i, j) in self.jobs.iter().enumerate() {
            let place = format!("jobs[{i}] ({})", j.name);
            let arrival = ms(&format!("{place}.arrival_s"), j.arrival_s)?;
            let jp = spec::job_pods(
                &place,
                &j.name,
                arrival,
                j.priority,
                j.ps.as_ref(),
                &j.workers,
            )?;
            if !j.running_on.is_empty() && j.running_on.len() != jp.pods.len() {
                bail!(
                    "{place}.running_on: names {} nodes for {} pods",
                    j.running_on.len(),
                    jp.pods.len()
                );
            }
            cluster.upsert_job(jp.job);
            for claim in jp.claims {
                cluster.set_claim(claim);
            }
            for (k, pod) in jp.pods.into_iter().enumerate() {
                let node = j.running_on.get(k).map(String::as_str);
                cluster
                    .add_pod(pod, node)
                    .with_context(|| format!("{place}.running_on[{k}]"))?;
            }
            if !j.running_on.is_empty() {
                let started = ms(
                    &format!("{place}.started_s"),
                    j.started_s.unwrap_or(j.arrival_s),
                )?;
                cluster.mark_started(&j.name, started);
            }
        }
        for (i, p) in self.pods.iter().enumerate() {
            let place = format!("pods[{i}] ({})", p.name);
            let mut pod = Pod::new(
                &p.name,
                spec::resources(&place, p.cpu, p.memory_gib, p.gpus)?,
            );
            pod.arrival_ms = ms(&format!("{place}.arrival_s"), p.arrival_s)?;
            pod.node_selector = p.node_selector.clone();
            pod.tolerations = p.tolerations.clone();
            cluster
                .add_pod(pod, p.node.as_deref())
                .with_context(|| place.clone())?;
        }
        Ok(Scheduler::new(cluster, SchedulerConfig::default()))
    }
}
