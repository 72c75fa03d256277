//! Questions about the loop's state (`kubectl dragon why` and `top`),
//! answered between steps from the snapshot and the units' stories. An
//! estimated start is prepared on the loop (a pass over the cluster) and
//! simulated on a blocking thread, one at a time, so asking never holds a
//! round up.

use std::collections::BTreeSet;

use dragon_framework::{Resources, Unschedulable};
use tokio::sync::oneshot;

use super::*;
use crate::insight::story::Told;
use crate::insight::{
    Closest, GangRow, NodeUse, Question, QueueUse, Top, Why, estimate, estimate::Forward,
};

/// An answer from the loop.
#[derive(Debug)]
pub enum Answer {
    Why(Box<Why>),
    Top(Top),
}

/// A question not answered: the HTTP status and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    pub status: u16,
    pub message: String,
}

/// Where the loop sends its answer.
pub type Reply = oneshot::Sender<Result<Answer, Refused>>;

/// Nodes named as closest to fitting.
const CLOSEST: usize = 3;

impl<I: ClusterIo> Loop<I> {
    /// Keep what a round said about each unit in its story.
    pub(super) fn remember(&mut self, report: &RoundReport) {
        let now = report.now_ms;
        for d in &report.decisions {
            let (unit, told) = match d {
                Decision::Admitted { unit, .. } => {
                    self.stories.end(unit);
                    continue;
                }
                Decision::Unschedulable { unit, reason } => {
                    self.stories.pending(unit, now, reason);
                    continue;
                }
                Decision::Waiting {
                    unit,
                    reserved,
                    wait_ms,
                } => (
                    unit,
                    format!(
                        "waiting in permit: {reserved} pods reserved, up to {wait_ms} ms for the rest"
                    ),
                ),
                Decision::Rejected { unit, reason } => {
                    (unit, format!("released by permit: {reason}"))
                }
                Decision::TimedOut { unit, reason } => (unit, format!("timed out: {reason}")),
                Decision::BindFailed {
                    unit, pod, error, ..
                } => (unit, format!("binding {pod} failed: {error}")),
                Decision::Preempting {
                    unit,
                    evicted,
                    shrunk,
                } => (
                    unit,
                    format!("preempting to make room: evicting {evicted:?}, shrinking {shrunk:?}"),
                ),
                _ => continue,
            };
            self.stories.note(unit, now, Told::Other(told));
        }
    }

    /// Answer `question` on `reply` (an estimate, later).
    pub(super) fn answer(&mut self, question: Question, reply: Reply) {
        let answered = match question {
            Question::Why { pod } => match self.why(&pod) {
                Ok((why, Some(forward))) => return self.estimate(why, forward, reply),
                Ok((why, None)) => Ok(Answer::Why(Box::new(why))),
                Err(refused) => Err(refused),
            },
            Question::Top { namespace, nodes } => {
                Ok(Answer::Top(self.top(namespace.as_deref(), nodes)))
            }
        };
        // The asker may have gone (a timeout): nothing to do then.
        let _ = reply.send(answered);
    }

    /// Why `pod` waits, and the cluster to play forward for its estimate.
    fn why(&self, pod: &str) -> Result<(Why, Option<Forward>), Refused> {
        let cluster = self.snapshot.sched.cluster();
        let mut why = Why {
            pod: pod.to_string(),
            ..Why::default()
        };
        if let Some(held) = self.snapshot.held_back(pod) {
            why.state = "held".into();
            why.now = Some(held);
            return Ok((why, None));
        }
        let Some((p, state)) = cluster.pod(pod) else {
            return Err(Refused {
                status: 404,
                message: format!("pod {pod} is not in dragon-scheduler's view"),
            });
        };
        why.gang = p.job.as_ref().map(ToString::to_string);
        let unit = match &p.job {
            Some(job) => UnitKey::job(job.clone()),
            None => UnitKey::pod(p.key.clone()),
        };
        if let PodState::Bound(n) = state {
            why.state = "bound".into();
            why.node = Some(cluster.nodes()[n].name.to_string());
            return Ok((why, None));
        }
        why.state = "pending".into();
        why.story = self.stories.chapters(&unit);
        let latest = self.stories.latest(&unit);
        why.now = why.story.last().map(|c| c.reason.clone());
        match latest {
            Some(Unschedulable::Gated { pods }) => {
                let gates: BTreeSet<&String> = pods.iter().flat_map(|(_, g)| g).collect();
                why.gates = gates.into_iter().cloned().collect();
            }
            Some(
                Unschedulable::NoFit { preemption, .. } | Unschedulable::Skipped { preemption, .. },
            ) => why.preemption = preemption.clone(),
            _ => {}
        }
        if why.gates.is_empty() {
            why.gates = p.scheduling_gates.clone();
        }
        why.closest = closest(cluster, &p.request);
        let now = now_ms();
        let forward = match (&p.job, self.estimates.enabled) {
            (_, false) => None,
            (None, true) => {
                why.estimate = Some(estimate::unavailable(
                    now,
                    "pods outside a gang are not played forward",
                ));
                None
            }
            (Some(job), true) => match estimate::prepare(
                cluster,
                job,
                now,
                &self.estimates,
                self.snapshot.sched.config().reclaim,
            ) {
                Ok(forward) => Some(forward),
                Err(e) => {
                    why.estimate = Some(estimate::unavailable(now, e));
                    None
                }
            },
        };
        Ok((why, forward))
    }

    /// Play `forward` on a blocking thread with a copy of the serving
    /// policy, then answer; while another estimate runs, answer without.
    fn estimate(&self, mut why: Why, forward: Forward, reply: Reply) {
        let Ok(permit) = self.estimating.clone().try_acquire_owned() else {
            why.estimate = Some(estimate::unavailable(
                now_ms(),
                "another estimate is being made; ask again",
            ));
            let _ = reply.send(Ok(Answer::Why(Box::new(why))));
            return;
        };
        let policy = self.slot.current();
        tokio::task::spawn_blocking(move || {
            let _permit = permit;
            let twin = policy.twin();
            why.estimate = Some(forward.run(&twin));
            let _ = reply.send(Ok(Answer::Why(Box::new(why))));
        });
    }

    /// Gangs (of `namespace` when given), their queues, and with `nodes`
    /// each node's GPU use.
    fn top(&self, namespace: Option<&str>, nodes: bool) -> Top {
        let cluster = self.snapshot.sched.cluster();
        let mut top = Top::default();
        let in_scope = |job: &str| namespace.is_none_or(|ns| job.split('/').next() == Some(ns));
        let mut queues = BTreeSet::new();
        for job in cluster.jobs().filter(|j| in_scope(&j.name)) {
            let (mut bound, mut pods, mut gpus) = (0, 0, 0u64);
            let mut on = BTreeSet::new();
            for (p, state) in cluster.job_pods(&job.name) {
                pods += 1;
                if let PodState::Bound(n) = state {
                    bound += 1;
                    gpus += u64::from(p.request.gpus);
                    on.insert(n);
                }
            }
            let state = match (bound, cluster.job_started_ms(&job.name)) {
                (0, _) => "waiting",
                (_, Some(_)) if bound >= job.min_member => "running",
                _ => "partly bound",
            };
            if let Some(q) = &job.queue {
                queues.insert(q.to_string());
            }
            top.gangs.push(GangRow {
                gang: job.name.to_string(),
                queue: job.queue.as_ref().map(ToString::to_string),
                state: state.into(),
                bound,
                pods,
                gpus,
                nodes: on.len() as u32,
            });
        }
        for (spec, row) in cluster.queues().iter().zip(cluster.queue_rows()) {
            if namespace.is_some() && !queues.contains(spec.name.as_str()) {
                continue;
            }
            top.queues.push(QueueUse {
                queue: row.name,
                used_gpus: row.used_gpus,
                demand_gpus: row.demand_gpus,
                guaranteed_gpus: row.guaranteed_gpus,
            });
        }
        if nodes {
            let mut pods = vec![0u32; cluster.nodes().len()];
            for (_, state) in cluster.pods() {
                if let PodState::Bound(n) = state {
                    pods[n] += 1;
                }
            }
            for (i, node) in cluster.nodes().iter().enumerate() {
                if !cluster.is_live(i) {
                    continue;
                }
                let (used, free) = (cluster.used(i), cluster.free(i));
                top.nodes.push(NodeUse {
                    node: node.name.to_string(),
                    used_gpus: used.gpus,
                    gpus: used.gpus + free.gpus,
                    pods: pods[i],
                });
            }
        }
        top
    }
}

/// The live nodes closest to fitting a pod that asks `request`, each with
/// what it lacks (by the fraction of the request short, smallest first).
fn closest(cluster: &dragon_framework::Cluster, request: &Resources) -> Vec<Closest> {
    let mut ranked: Vec<(f64, Closest)> = (0..cluster.nodes().len())
        .filter(|&i| cluster.is_live(i))
        .map(|i| {
            let free = cluster.free(i);
            let mut short = Vec::new();
            let mut lack = 0.0;
            let mut check = |have: u64, want: u64, what: &str| {
                if have < want {
                    lack += (want - have) as f64 / want as f64;
                    short.push(format!("{have} of {want} {what} free"));
                }
            };
            check(u64::from(free.gpus), u64::from(request.gpus), "GPUs");
            check(free.cpu_milli, request.cpu_milli, "millicores");
            check(free.memory_mib, request.memory_mib, "MiB");
            let node = cluster.nodes()[i].name.to_string();
            (lack, Closest { node, short })
        })
        .collect();
    ranked.sort_by(|a, b| a.0.total_cmp(&b.0).then_with(|| a.1.node.cmp(&b.1.node)));
    ranked.into_iter().take(CLOSEST).map(|(_, c)| c).collect()
}
