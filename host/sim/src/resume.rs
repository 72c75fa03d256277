//! A trace that starts from a cluster as a recording left it: "what if
//! this policy took over now". Nodes, jobs and pods come from the
//! recording; what a recording does not know (how much work each job has
//! left) is assumed, and the assumption is part of the trace's name.
//!
//! The run starts at 0 at the recording's last step, every job already
//! submitted (in the order it was: waits before the start are not
//! counted) and every bound pod on its node. Jobs that had started and
//! report their progress finish at the pace they kept so far; the other
//! started jobs have `remaining` left at their size and spread; the rest
//! have `duration` of work at their requested size on one node. Pods bound outside any job
//! (another scheduler's, a DaemonSet's) hold their room for the whole run;
//! pending pods outside any job are not simulated (the simulator models
//! jobs) and are counted.

use std::collections::BTreeMap;

use anyhow::{Result, bail};

use super::speed::{Speed, SpeedModel};
use super::trace::{DEFAULT_RESTART_S, DEFAULT_SCALE_INTERVAL_S, DEFAULT_STALL_S, Trace, TraceJob};
use dragon_framework::{Cluster, PodState};

/// What a recording does not know about its jobs.
#[derive(Debug, Clone, Copy)]
pub struct Assumed {
    /// Work left to each running job: time to finish at its present size
    /// and placement, ms.
    pub remaining_ms: u64,
    /// Work of each waiting job: run time at its requested size on one
    /// node, ms.
    pub duration_ms: u64,
    /// The cluster's time (ms): with it, a started job that reports its
    /// progress `p` after running `t` has `t·(1 − p)/p` left, in place of
    /// `remaining_ms`.
    pub now_ms: Option<u64>,
}

impl Assumed {
    /// Time `job` has left at its present size: from its progress and the
    /// time it has run when both are known, else `remaining_ms`.
    pub fn remaining_of(&self, job: &dragon_framework::Job, started_ms: Option<u64>) -> u64 {
        let ran = self
            .now_ms
            .zip(started_ms)
            .map(|(now, start)| now.saturating_sub(start));
        match (job.progress_permille, ran) {
            (Some(p), Some(_)) if p >= 1000 => 1,
            (Some(p), Some(ran)) if p > 0 && ran > 0 => {
                (ran as f64 * f64::from(1000 - p) / f64::from(p)).round() as u64
            }
            _ => self.remaining_ms,
        }
    }
}

/// The trace, and what was left out of it.
#[derive(Debug)]
pub struct Resumed {
    pub trace: Trace,
    /// Jobs that were running when the recording ended.
    pub running: usize,
    /// Pending pods outside any job, not simulated.
    pub lone_pending: usize,
}

/// The trace that starts from `cluster`; `origin` names it in reports.
///
/// # Errors
/// The cluster has no job to simulate, or no live node.
pub fn from_cluster(cluster: &Cluster, origin: &str, assumed: Assumed) -> Result<Resumed> {
    let nodes: Vec<_> = (0..cluster.nodes().len())
        .filter(|&i| cluster.is_live(i))
        .map(|i| cluster.nodes()[i].clone())
        .collect();
    if nodes.is_empty() {
        bail!("{origin}: the recorded cluster has no node");
    }
    let node_name = |i: usize| cluster.nodes()[i].name.clone();

    let mut background = Vec::new();
    let mut lone_pending = 0;
    for (pod, state) in cluster.pods() {
        if pod.job.as_ref().is_some_and(|j| cluster.job(j).is_some()) {
            continue;
        }
        match state {
            PodState::Bound(n) => {
                let mut pod = pod.clone();
                pod.job = None;
                pod.arrival_ms = 0;
                background.push((pod, node_name(n)));
            }
            PodState::Pending | PodState::Reserved(_) => lone_pending += 1,
        }
    }

    // Submission order (ties: the order the cluster learnt of them).
    let mut recorded: Vec<_> = cluster.jobs().collect();
    recorded.sort_by_key(|j| (j.arrival_ms, cluster.job_unit(&j.name)));
    let mut jobs = Vec::with_capacity(recorded.len());
    let mut running = 0;
    for job in recorded {
        let mut pods = Vec::new();
        let mut placed = BTreeMap::new();
        let mut spread = std::collections::BTreeSet::new();
        for (pod, state) in cluster.job_pods(&job.name) {
            let mut pod = pod.clone();
            pod.arrival_ms = 0;
            if let PodState::Bound(n) = state {
                placed.insert(pod.key.clone(), node_name(n));
                spread.insert(n);
            }
            pods.push(pod);
        }
        if pods.is_empty() {
            continue;
        }
        let started_ms = cluster.job_started_ms(&job.name);
        let started = started_ms.is_some();
        let speed = SpeedModel::DEFAULT;
        let work_ms = match started {
            true => {
                running += 1;
                let rate = speed.rate(job.workers, spread.len() as u32, job.workers);
                assumed.remaining_of(job, started_ms) as f64 * rate
            }
            false => assumed.duration_ms as f64,
        };
        let queue = cluster
            .queues()
            .iter()
            .position(|q| Some(&q.name) == job.queue.as_ref());
        let mut job = job.clone();
        job.arrival_ms = 0;
        jobs.push(TraceJob {
            name: job.name.clone(),
            workload: "recorded".into(),
            arrival_ms: 0,
            work_ms: work_ms.max(1.0),
            restart_ms: (DEFAULT_RESTART_S * 1000.0) as u64,
            speed: Speed::Modelled(speed),
            job,
            pods,
            placed,
            started,
            claims: Vec::new(),
            worker_devices: None,
            queue,
        });
    }
    if jobs.is_empty() {
        bail!("{origin}: nothing to simulate: no job was running or waiting when it ended");
    }
    let trace = Trace {
        origin: format!(
            "{origin} (running jobs assumed to need {} s more, waiting jobs {} s)",
            assumed.remaining_ms / 1000,
            assumed.duration_ms / 1000
        ),
        description: String::new(),
        nodes,
        device_classes: Vec::new(),
        slices: Vec::new(),
        device_gpus: BTreeMap::new(),
        jobs,
        background,
        // The recorded levels, without a penalty the recording cannot know.
        topology: cluster
            .topology_levels()
            .iter()
            .filter(|k| k.as_str() != dragon_framework::HOSTNAME_LEVEL)
            .map(|k| (k.clone(), 0.0))
            .collect(),
        queues: cluster.queues().to_vec(),
        scale_interval_ms: (DEFAULT_SCALE_INTERVAL_S * 1000.0) as u64,
        stall_ms: (DEFAULT_STALL_S * 1000.0) as u64,
    };
    Ok(Resumed {
        trace,
        running,
        lone_pending,
    })
}

#[cfg(test)]
mod tests {
    use super::Assumed;
    use dragon_framework::Job;

    #[test]
    fn a_job_reporting_progress_has_left_what_its_pace_so_far_says() {
        let assumed = Assumed {
            remaining_ms: 3_600_000,
            duration_ms: 0,
            now_ms: Some(50_000),
        };
        let mut job = Job {
            declared: true,
            progress_permille: Some(250),
            ..Job::gang("j", 1)
        };
        // A quarter done after 10 s: 30 s to go.
        assert_eq!(assumed.remaining_of(&job, Some(40_000)), 30_000);
        // Not started, or no progress reported: the assumption.
        assert_eq!(assumed.remaining_of(&job, None), 3_600_000);
        job.progress_permille = None;
        assert_eq!(assumed.remaining_of(&job, Some(40_000)), 3_600_000);
        // No progress yet says nothing about the pace.
        job.progress_permille = Some(0);
        assert_eq!(assumed.remaining_of(&job, Some(40_000)), 3_600_000);
        job.progress_permille = Some(1000);
        assert_eq!(assumed.remaining_of(&job, Some(40_000)), 1);
    }
}
