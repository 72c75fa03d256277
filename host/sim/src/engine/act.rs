//! The simulator's side of a round and a scale step: the framework decides
//! and settles through its synchronous driver; what it decided is acted
//! out here on the simulated jobs (placements, resizes, preempted pods
//! recreated pending), as a job's controller and the kubelet would.

use super::*;
use dragon_framework::PodKey;

impl Sim<'_> {
    /// The scale step at `t`: whether the policy answered.
    pub(super) fn scale_step(&mut self, t: u64) -> bool {
        self.run.scale_steps += 1;
        self.report_progress();
        let mut io = SimIo;
        let ops = self.sched.take_journal();
        let report = self.sched.scale_step(t, self.policy, &mut io);
        if let Some(sink) = self.sink.as_mut() {
            sink(Frame::scale(t, &ops, &Answers::default(), &report.actions));
        }
        let answered = report.errors.is_empty();
        for e in report.errors {
            self.note_error(e);
        }
        self.run.resizes_held += report.held.len() as u64;
        for a in report.actions {
            let Some(&i) = self.by_name.get(&a.job) else {
                continue;
            };
            self.mark_change();
            self.touched.insert(i);
            let j = &mut self.jobs[i];
            if j.record.started_ms.is_some() {
                j.needs_restart = true;
            }
            if a.to < a.from {
                self.run.scale_downs += 1;
                j.record.scale_downs += 1;
                // The framework already removed the removed workers' pods.
                let cluster = self.sched.cluster();
                j.placement.retain(|pod, _| cluster.pod(pod).is_some());
                j.workers = a.to;
            } else {
                self.run.scale_ups += 1;
                j.record.scale_ups += 1;
                j.workers = a.to;
                let tj = &self.trace.jobs[i];
                let Some(template) = tj.pods.iter().find(|p| p.role == Role::Worker) else {
                    continue;
                };
                let Some(job) = self.sched.cluster().job(&a.job).cloned() else {
                    continue;
                };
                for index in a.from..a.to {
                    let (pod, claim) =
                        spec::worker_pod(&job, template, index, tj.worker_devices.as_deref());
                    if let Some(claim) = claim {
                        let _ = self.sched.apply(ClusterOp::SetClaim(claim));
                    }
                    let _ = self.sched.apply(ClusterOp::AddPod { pod, node: None });
                }
            }
        }
        answered
    }

    /// One scheduling round at `t`: whether it changed anything (more than
    /// units found unschedulable again), and whether it preempted.
    pub(super) fn round(&mut self, t: u64) -> (bool, bool) {
        self.run.rounds += 1;
        let mut io = SimIo;
        let mut scaler = SimIo;
        let ops = self.sched.take_journal();
        let report = self
            .sched
            .schedule_round(t, self.policy, &mut io, &mut scaler);
        if let Some(sink) = self.sink.as_mut() {
            sink(Frame::round(
                t,
                &ops,
                &Answers::default(),
                &report.decisions,
            ));
        }
        if let Some(r) = self.sched.next_retry_ms(t) {
            self.retries.insert(r);
        }
        let changed = report.decisions.iter().any(|d| {
            !matches!(
                d,
                Decision::Unschedulable { .. }
                    | Decision::PolicyError { .. }
                    | Decision::Breaker(_)
                    | Decision::Deferred { .. }
            )
        });
        for effect in &report.effects {
            if let Effect::Evict(eviction) = effect {
                self.evicted(eviction);
            }
        }
        let preempted = report
            .decisions
            .iter()
            .any(|d| matches!(d, Decision::Preempting { .. }));
        for d in report.decisions {
            match d {
                Decision::Bound { pod, node } => {
                    let Some(job) = self
                        .sched
                        .cluster()
                        .pod(&pod)
                        .and_then(|(p, _)| p.job.clone())
                    else {
                        continue;
                    };
                    let Some(&i) = self.by_name.get(&job) else {
                        continue;
                    };
                    let Some(n) = self.sched.cluster().node_by_name(&node) else {
                        continue;
                    };
                    self.jobs[i].placement.insert(pod, n);
                    self.touched.insert(i);
                }
                Decision::Resized { unit, workers, .. } => {
                    let Some(&i) = unit.job_name().and_then(|n| self.by_name.get(n)) else {
                        continue;
                    };
                    // A running job shrunk for a preemption: its surplus
                    // workers terminate now (their room was the
                    // preemptor's; an admission's were never placed).
                    let surplus: Vec<PodKey> = self
                        .sched
                        .cluster()
                        .job_pods(&self.trace.jobs[i].name)
                        .filter(|(p, _)| p.role == Role::Worker && p.index >= workers)
                        .map(|(p, _)| p.key.clone())
                        .collect();
                    for key in surplus {
                        let _ = self.sched.apply(ClusterOp::RemovePod(key));
                    }
                    let j = &mut self.jobs[i];
                    j.workers = workers;
                    let cluster = self.sched.cluster();
                    j.placement.retain(|pod, _| cluster.pod(pod).is_some());
                    if j.record.started_ms.is_some() {
                        j.needs_restart = true;
                    } else {
                        self.run.admitted_below_request += 1;
                    }
                    self.touched.insert(i);
                }
                Decision::Waiting { wait_ms, .. } => {
                    self.permit_deadlines
                        .insert(t.saturating_add(wait_ms.max(1)));
                }
                Decision::PolicyError { unit, error } => {
                    self.note_error(format!("{}: {error}", subject(unit.as_ref())))
                }
                Decision::Breaker(BreakerChange::Opened { until_ms, .. }) => {
                    // The suspended policy is tried again when it ends.
                    self.retries.insert(until_ms);
                }
                Decision::Admitted { .. }
                | Decision::Breaker(BreakerChange::Closed { .. })
                | Decision::Deferred { .. }
                | Decision::FellBack { .. }
                | Decision::Unschedulable { .. }
                | Decision::Preempting { .. }
                | Decision::Nominated { .. }
                | Decision::Rejected { .. }
                | Decision::TimedOut { .. }
                | Decision::BindFailed { .. } => {}
            }
        }
        (changed, preempted)
    }

    /// A preemption victim's pods leave their nodes and come back pending,
    /// as their controller recreates them; the job restarts when placed
    /// again.
    pub(super) fn evicted(&mut self, eviction: &Eviction) {
        self.run.preemptions += 1;
        for key in &eviction.pods {
            let Ok(pod) = self.sched.remove_pod(key) else {
                continue;
            };
            let job = pod.job.clone();
            let _ = self.sched.apply(ClusterOp::AddPod { pod, node: None });
            let Some(&i) = job.as_ref().and_then(|j| self.by_name.get(j)) else {
                continue;
            };
            let j = &mut self.jobs[i];
            j.placement.remove(key);
            j.needs_restart |= j.record.started_ms.is_some();
            self.touched.insert(i);
        }
        self.mark_change();
    }
}
