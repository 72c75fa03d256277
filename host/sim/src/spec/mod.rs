//! The YAML/JSON shapes users write for clusters and jobs, shared by
//! `dragon policy run` cases and simulator traces, and how they become the
//! framework's nodes, jobs and pods.

use serde::{Deserialize, Serialize};

use dragon_framework::devices::{Claim, Request};
use dragon_framework::{Job, Node, Pod, Resources, Role};

pub mod devices;

pub use devices::{DeviceClassSpec, DeviceGroup, DeviceRequestSpec};

/// A group of identical nodes `name_prefix-0 … name_prefix-(count-1)`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeGroup {
    pub name_prefix: String,
    pub count: u32,
    /// Cores; fractions allowed.
    pub cpu: f64,
    pub memory_gib: f64,
    #[serde(default)]
    pub gpus: u32,
    /// Labels on every node of the group.
    #[serde(default)]
    pub labels: std::collections::BTreeMap<String, String>,
    /// Taints on every node of the group.
    #[serde(default)]
    pub taints: Vec<dragon_framework::Taint>,
    /// Devices a DRA driver publishes on every node of the group.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub devices: Option<DeviceGroup>,
}

/// One role of a job: how many tasks and what each requests.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TaskSpec {
    pub count: u32,
    /// Elastic lower bound (workers only; default `count`).
    #[serde(default)]
    pub min: Option<u32>,
    /// Elastic upper bound (workers only; default `count`).
    #[serde(default)]
    pub max: Option<u32>,
    #[serde(default)]
    pub cpu: f64,
    #[serde(default)]
    pub memory_gib: f64,
    #[serde(default)]
    pub gpus: u32,
    /// Devices each task claims through a claim of its own.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub devices: Vec<DeviceRequestSpec>,
}

/// Problems in a spec, naming the item and field.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{place}: {message}")]
pub struct SpecError {
    /// e.g. `jobs[3] (resnet50-001).workers.min`
    pub place: String,
    pub message: String,
}

fn err(place: impl Into<String>, message: impl Into<String>) -> SpecError {
    SpecError {
        place: place.into(),
        message: message.into(),
    }
}

/// Convert cores/GiB to the framework's integer units, refusing negative,
/// non-finite or absurd values.
pub fn resources(
    place: &str,
    cpu: f64,
    memory_gib: f64,
    gpus: u32,
) -> Result<Resources, SpecError> {
    for (field, v) in [("cpu", cpu), ("memory_gib", memory_gib)] {
        if !v.is_finite() || v < 0.0 || v > 1e9 {
            return Err(err(
                format!("{place}.{field}"),
                format!("must be a number between 0 and 1e9, got {v}"),
            ));
        }
    }
    Ok(Resources {
        cpu_milli: (cpu * 1000.0).round() as u64,
        memory_mib: (memory_gib * 1024.0).round() as u64,
        gpus,
    })
}

impl NodeGroup {
    /// The nodes of this group.
    ///
    /// # Errors
    /// A [`SpecError`] naming `place` and the field.
    pub fn nodes(&self, place: &str) -> Result<Vec<Node>, SpecError> {
        if self.name_prefix.is_empty() {
            return Err(err(format!("{place}.name_prefix"), "must not be empty"));
        }
        if self.count > 100_000 {
            return Err(err(
                format!("{place}.count"),
                format!("{} nodes is more than the 100000 supported", self.count),
            ));
        }
        let alloc = resources(place, self.cpu, self.memory_gib, self.gpus)?;
        Ok((0..self.count)
            .map(|i| {
                let mut n = Node::new(format!("{}-{i}", self.name_prefix), alloc);
                n.labels = self.labels.clone();
                n.taints = self.taints.clone();
                n
            })
            .collect())
    }
}

/// A PS/worker job: its gang record, its pods, and the claims of the pods
/// that claim devices.
pub struct JobPods {
    pub job: Job,
    pub pods: Vec<Pod>,
    pub claims: Vec<Claim>,
    /// What each worker's claim asks for (a worker added later gets its
    /// own claim of these).
    pub worker_devices: Option<Vec<Request>>,
}

/// Build a job named `name` from its roles. `min_member` is every PS plus
/// the minimum workers: the gang may start at its minimum size.
///
/// # Errors
/// A [`SpecError`] naming `place` and the field.
pub fn job_pods(
    place: &str,
    name: &str,
    arrival_ms: u64,
    priority: i32,
    ps: Option<&TaskSpec>,
    workers: &TaskSpec,
) -> Result<JobPods, SpecError> {
    if name.is_empty() || name.contains('/') {
        return Err(err(
            format!("{place}.name"),
            "must be non-empty and contain no '/'",
        ));
    }
    let min = workers.min.unwrap_or(workers.count);
    let max = workers.max.unwrap_or(workers.count);
    if workers.count == 0 {
        return Err(err(
            format!("{place}.workers.count"),
            "a job needs at least one worker",
        ));
    }
    if min == 0 || min > workers.count {
        return Err(err(
            format!("{place}.workers.min"),
            format!("must be between 1 and count ({}), got {min}", workers.count),
        ));
    }
    if max < workers.count || max > 10_000 {
        return Err(err(
            format!("{place}.workers.max"),
            format!(
                "must be between count ({}) and 10000, got {max}",
                workers.count
            ),
        ));
    }
    let ps_count = ps.map(|p| p.count).unwrap_or(0);
    // Bounded like the workers: a count of billions would allocate a pod
    // each and abort out of memory (fuzz/regressions/trace_parser/).
    if ps_count > 10_000 {
        return Err(err(
            format!("{place}.ps.count"),
            format!("must be at most 10000, got {ps_count}"),
        ));
    }
    if ps.is_some_and(|p| p.min.is_some() || p.max.is_some()) {
        return Err(err(
            format!("{place}.ps"),
            "parameter servers are not elastic: min/max apply to workers",
        ));
    }
    let worker_req = resources(
        &format!("{place}.workers"),
        workers.cpu,
        workers.memory_gib,
        workers.gpus,
    )?;
    let ps_req = match ps {
        Some(p) => resources(&format!("{place}.ps"), p.cpu, p.memory_gib, p.gpus)?,
        None => Resources::default(),
    };
    let ps_devices = match ps {
        Some(p) => devices::task_requests(&format!("{place}.ps"), &p.devices)?,
        None => None,
    };
    let worker_devices = devices::task_requests(&format!("{place}.workers"), &workers.devices)?;
    let mut pods = Vec::new();
    let mut claims = Vec::new();
    let mut add = |role: Role, index: u32, request: Resources, devices: Option<&Vec<Request>>| {
        let tag = if role == Role::Ps { "ps" } else { "worker" };
        let mut pod = Pod::new(format!("{name}-{tag}-{index}"), request);
        pod.job = Some(name.into());
        pod.role = role;
        pod.index = index;
        pod.priority = priority;
        pod.arrival_ms = arrival_ms;
        if let Some(requests) = devices {
            let claim = devices::task_claim(&pod.key, requests);
            pod.claims = vec![claim.key.clone()];
            claims.push(claim);
        }
        pods.push(pod);
    };
    for i in 0..ps_count {
        add(Role::Ps, i, ps_req, ps_devices.as_ref());
    }
    for i in 0..workers.count {
        add(Role::Worker, i, worker_req, worker_devices.as_ref());
    }
    Ok(JobPods {
        job: Job {
            min_member: ps_count + min,
            min_workers: min,
            max_workers: max,
            priority,
            arrival_ms,
            ..Job::gang(name, workers.count)
        },
        pods,
        claims,
        worker_devices,
    })
}

/// A pod for worker `index` of `job` (for scale-ups), shaped like its
/// siblings, with its own claim of `devices` if its siblings claim some.
pub fn worker_pod(
    job: &Job,
    template: &Pod,
    index: u32,
    devices: Option<&[Request]>,
) -> (Pod, Option<Claim>) {
    let mut pod = template.clone();
    pod.key = format!("{}-worker-{index}", job.name).into();
    pod.index = index;
    pod.role = Role::Worker;
    let claim = devices.map(|requests| devices::task_claim(&pod.key, requests));
    pod.claims = claim.iter().map(|c| c.key.clone()).collect();
    (pod, claim)
}
