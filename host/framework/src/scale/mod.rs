//! The periodic scale step: the policy sees running and waiting jobs and free
//! capacity and returns desired worker counts; the framework checks them
//! against each job's bounds. [`Scheduler::plan_scale`] returns the checked
//! changes for the driver to apply, and [`Scheduler::settle_scale`] takes
//! their results (`crate::drive` applies them through a [`crate::Scaler`]).

mod limits;

use std::collections::BTreeSet;

use serde::Serialize;

use super::breaker::Outcome;
use super::cluster::{JobEntry, PodState};
use super::cycle::{Scheduler, invalid};
use super::io::{ApiError, ApiErrorKind, ScaleCause, ScaleRequest};
use super::model::Role;
use super::queue::Flush;
use crate::names::{JobKey, PodKey};
use dragon_runtime::{CallError, Failure, HookName, Hooks, wit};
use limits::GrowthRoom;
pub(crate) use limits::Restarts;
pub use limits::{Held, HeldResize, ResizeLimits};

/// One applied scale change.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ScaleAction {
    /// The job.
    pub job: JobKey,
    /// Workers before.
    pub from: u32,
    /// Workers after.
    pub to: u32,
    /// The policy's reason.
    pub reason: String,
}

impl From<ScaleRequest> for ScaleAction {
    fn from(r: ScaleRequest) -> ScaleAction {
        ScaleAction {
            job: r.job,
            from: r.from,
            to: r.workers,
            reason: r.reason,
        }
    }
}

/// What one scale step did.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ScaleReport {
    /// The step's time, ms.
    #[serde(skip)]
    pub now_ms: u64,
    /// Changes to apply, in the policy's order (from [`Scheduler::plan_scale`]).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub requests: Vec<ScaleRequest>,
    /// Changes applied, in the policy's order.
    pub actions: Vec<ScaleAction>,
    /// The policy's failures (nothing was applied for a failed decision).
    pub errors: Vec<String>,
    /// Changes the scaler refused, and why.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub refused: Vec<String>,
    /// The policy's resizes the [`ResizeLimits`] held back.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub held: Vec<HeldResize>,
    /// The policy was suspended, or serves again, after this step's call.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub breaker: Option<super::BreakerChange>,
}

impl Scheduler {
    /// Jobs whose pods all run (admitted and not waiting), in start order.
    fn running_jobs(&self) -> Vec<(JobKey, wit::RunningJob)> {
        let c = &self.cluster;
        let mut out = Vec::new();
        for (name, e) in &c.jobs {
            let Some(started) = e.started_ms else {
                continue;
            };
            let mut worker_nodes: Vec<(u32, u32)> = Vec::new();
            let mut ps_nodes = Vec::new();
            let mut worker_request = None;
            let mut pending = false;
            for (p, s) in c.job_pods(name) {
                if JobEntry::has_surplus(Some(e), p) {
                    continue;
                }
                match s {
                    PodState::Bound(n) => match p.role {
                        Role::Worker => {
                            worker_nodes.push((p.index, n as u32));
                            worker_request = Some(p.request);
                        }
                        Role::Ps => ps_nodes.push(n as u32),
                        Role::Other => {}
                    },
                    _ => pending = true,
                }
            }
            // A job still completing a scale-up is not offered for another.
            if pending || worker_nodes.is_empty() {
                continue;
            }
            worker_nodes.sort_unstable();
            out.push((
                name.clone(),
                wit::RunningJob {
                    id: e.unit_id,
                    arrival_ms: e.job.arrival_ms,
                    started_ms: started,
                    scaled_ms: e.scaled_ms.unwrap_or(started),
                    workers: e.job.workers,
                    min_workers: e.job.min_workers,
                    max_workers: e.job.max_workers,
                    worker_request: worker_request.unwrap_or_default().to_wit(),
                    worker_nodes: worker_nodes.into_iter().map(|(_, n)| n).collect(),
                    ps_nodes,
                },
            ));
        }
        out.sort_by_key(|(name, j)| (j.started_ms, j.id, name.clone()));
        out
    }

    /// Jobs not yet admitted, FIFO, as the policy would place them.
    fn waiting_jobs(&self) -> Vec<wit::WaitingJob> {
        let c = &self.cluster;
        let mut out: Vec<wit::WaitingJob> = Vec::new();
        for (name, e) in &c.jobs {
            // Its pending members are counted as pods move: only a job
            // with some is walked.
            if e.started_ms.is_some() || e.counts.pending_members == 0 {
                continue;
            }
            let mut pods: Vec<_> = c.pending_members_of(name, Some(e)).collect();
            // No two pods share a place: an unstable sort orders them as a
            // stable one.
            pods.sort_unstable_by_key(|p| p.placement_order());
            out.push(wit::WaitingJob {
                id: e.unit_id,
                arrival_ms: e.job.arrival_ms,
                unit: wit::Unit {
                    id: e.unit_id,
                    arrival_ms: e.job.arrival_ms,
                    priority: e.job.priority,
                    gang: true,
                    tasks: pods.iter().map(|p| c.task(p)).collect(),
                    workers: e.job.workers,
                    min_workers: e.job.min_workers,
                    max_workers: e.job.max_workers,
                    running: 0,
                },
            });
        }
        out.sort_by_key(|w| (w.arrival_ms, w.id));
        out
    }

    /// Settle a planned scale step with the results of its requests, one
    /// per [`ScaleReport::requests`] entry in order (a missing result counts
    /// as refused): each applied one resizes its job and becomes an
    /// action, each refused one is named in [`ScaleReport::refused`].
    pub fn settle_scale(&mut self, report: &mut ScaleReport, results: Vec<Result<(), ApiError>>) {
        let now_ms = report.now_ms;
        let mut results = results.into_iter();
        for request in std::mem::take(&mut report.requests) {
            let result = results.next().unwrap_or_else(|| {
                Err(ApiError::new(
                    ApiErrorKind::Unavailable,
                    "the driver gave no answer",
                ))
            });
            if let Err(e) = result {
                report.refused.push(format!(
                    "scaling job {} to {} workers failed: {e}",
                    request.job, request.workers
                ));
                continue;
            }
            self.scaled(&request, now_ms);
            report.actions.push(ScaleAction::from(request));
        }
    }

    /// Decide the scale step at `now_ms`: the policy's answer, checked
    /// whole against each job's bounds, as [`ScaleReport::requests`] for the
    /// driver to apply (each reported with `Scheduler::scaled`).
    pub fn plan_scale(&mut self, now_ms: u64, policy: &dyn Hooks) -> ScaleReport {
        let mut report = ScaleReport {
            now_ms,
            ..ScaleReport::default()
        };
        self.cluster.set_clock(now_ms);
        report.requests = self.rollbacks(now_ms);
        if !policy.info().implements(wit::Hook::Scale) {
            return report;
        }
        let running = self.running_jobs();
        let input = wit::ScaleInput {
            now_ms,
            running: running.iter().map(|(_, j)| j.clone()).collect(),
            waiting: self.waiting_jobs(),
            nodes: self.cluster.capacity(),
            last_admit_ms: self.last_admit_ms,
            last_scale_down_ms: self.last_scale_down_ms,
        };
        let info = policy.info();
        if let Err(until_ms) = self.breaker.admit(&info.sha256, now_ms, self.wall_now()) {
            report.errors.push(format!(
                "policy `{}` is suspended after repeated failures; no scale step for {} ms",
                info.name,
                until_ms.saturating_sub(now_ms)
            ));
            return report;
        }
        let checked = policy
            .scale(&input, &self.cluster)
            .and_then(|decisions| checked_decisions(policy, &running, decisions));
        let outcome = match &checked {
            Ok(_) => Outcome::Answered,
            Err(e) if matches!(e.failure, Failure::Timeout { .. }) => Outcome::TimedOut,
            Err(_) => Outcome::Failed,
        };
        report.breaker = self
            .breaker
            .record(outcome, now_ms, self.wall_now(), &info.name);
        if checked.is_ok() && self.config().flush == Flush::Count {
            // Flushes are not run: this is when the policy's answers to
            // waiting units may have moved on.
            self.cluster.note_policy_stepped();
        }
        let checked = checked.map_err(|e| e.to_string());
        let decisions = match checked {
            Ok(d) => d,
            Err(e) => {
                report.errors.push(e);
                return report;
            }
        };
        let limits = self.config().resize;
        let mut room = GrowthRoom::default();
        for (i, mut d) in decisions {
            let (name, job) = &running[i];
            if d.workers == job.workers {
                continue;
            }
            let entry = &self.cluster.jobs[name.as_str()];
            if let Some(why) = limits.hold(entry.scaled_ms, &entry.restarts, now_ms) {
                report.held.push(HeldResize {
                    job: name.clone(),
                    from: job.workers,
                    to: d.workers,
                    why,
                });
                continue;
            }
            if d.workers > job.workers {
                let capped =
                    job.workers + self.grow_into_room(&mut room, name, d.workers - job.workers);
                if capped < d.workers {
                    let within = match self.growth_domain(name) {
                        Some((_, shown)) => format!("{shown}, its required domain"),
                        None => "the free room".to_string(),
                    };
                    d.reason = format!(
                        "{} (capped at {capped} workers: the rest would not fit in {within})",
                        d.reason
                    );
                    d.workers = capped;
                }
                if d.workers == job.workers {
                    continue;
                }
            }
            report.requests.push(ScaleRequest {
                job: name.clone(),
                from: job.workers,
                workers: d.workers,
                reason: d.reason,
                cause: ScaleCause::Policy,
            });
        }
        report
    }

    /// Growth whose new workers still wait for room after the limits'
    /// timeout goes back to the size before it: a job never waits for
    /// workers that cannot join it. Growth whose workers all run is done.
    fn rollbacks(&mut self, now_ms: u64) -> Vec<ScaleRequest> {
        let timeout_ms = self.config().resize.growth_timeout_ms;
        let mut out = Vec::new();
        let mut done = Vec::new();
        let c = &self.cluster;
        for (name, e) in &c.jobs {
            let Some((before, at)) = e.grew else {
                continue;
            };
            let waiting = c
                .pending_members(name)
                .filter(|p| p.role == Role::Worker)
                .count();
            if waiting == 0 {
                done.push(name.clone());
            } else if now_ms.saturating_sub(at) >= timeout_ms {
                out.push(ScaleRequest {
                    job: name.clone(),
                    from: e.job.workers,
                    workers: before,
                    reason: format!(
                        "growth rolled back: {waiting} new worker(s) found no room within {} s",
                        timeout_ms / 1000
                    ),
                    cause: ScaleCause::Policy,
                });
            }
        }
        for name in done {
            if let Some(e) = self.cluster.jobs.get_mut(&name) {
                e.grew = None;
            }
        }
        out
    }

    /// Room in this step's `room` for up to `more` new workers of `job`
    /// (on the nodes of its required domain, if it has one), set aside:
    /// how many found room.
    fn grow_into_room(&self, room: &mut GrowthRoom, job: &str, more: u32) -> u32 {
        let Some((worker, _)) = self
            .cluster
            .job_pods(job)
            .find(|(p, _)| p.role == Role::Worker)
        else {
            return 0;
        };
        let cols = self.cluster.columns();
        match self.growth_domain(job) {
            Some((domain, _)) => {
                let nodes = self.domain_nodes(domain);
                room.take(
                    cols,
                    worker.request,
                    nodes.iter().map(|&n| n as usize),
                    more,
                )
            }
            None => room.take(cols, worker.request, 0..self.cluster.nodes().len(), more),
        }
    }

    /// Record an applied scale in the snapshot: the job's size changes, and
    /// on a shrink the removed workers' room is free at once (their
    /// controller deletes them; the driver confirms by removing the pods).
    pub(crate) fn apply_scale(&mut self, job: &str, workers: u32, now_ms: u64) {
        if self.resize(job, workers, now_ms) {
            let removed: Vec<PodKey> = self
                .cluster
                .job_pods(job)
                .filter(|(p, _)| p.role == Role::Worker && p.index >= workers)
                .map(|(p, _)| p.key.clone())
                .collect();
            for key in removed {
                let _ = self.cluster.forget_pod(&key);
            }
        }
    }

    /// Set `job`'s worker count at `now_ms`; whether it shrank.
    pub(crate) fn resize(&mut self, job: &str, workers: u32, now_ms: u64) -> bool {
        let Some(e) = self.cluster.jobs.get_mut(job) else {
            return false;
        };
        let shrink = workers < e.job.workers;
        e.scaled_ms = Some(now_ms);
        self.cluster.set_workers(job, workers);
        if shrink {
            self.last_scale_down_ms = now_ms;
        }
        shrink
    }
}

/// A `scale` answer checked whole: every decision names a distinct running
/// job and a size within its bounds, or nothing is applied. Each decision
/// comes with the index of its job in `running`.
fn checked_decisions(
    policy: &dyn Hooks,
    running: &[(JobKey, wit::RunningJob)],
    decisions: Vec<wit::ScaleDecision>,
) -> Result<Vec<(usize, wit::ScaleDecision)>, CallError> {
    if decisions.len() > running.len() {
        return Err(invalid(
            policy,
            HookName::Scale,
            format!(
                "{} decisions for {} running jobs; none applied",
                decisions.len(),
                running.len()
            ),
        ));
    }
    let by_id: std::collections::BTreeMap<u64, usize> = running
        .iter()
        .enumerate()
        .map(|(i, (_, j))| (j.id, i))
        .collect();
    let mut seen = BTreeSet::new();
    let mut out = Vec::with_capacity(decisions.len());
    for mut d in decisions {
        let Some(&i) = by_id.get(&d.id) else {
            return Err(invalid(
                policy,
                HookName::Scale,
                format!(
                    "decision for job id {} which is not running; none applied",
                    d.id
                ),
            ));
        };
        let (name, job) = &running[i];
        if !seen.insert(d.id) {
            return Err(invalid(
                policy,
                HookName::Scale,
                format!("two decisions for job {name}; none applied"),
            ));
        }
        // Worker 0 is never removed, whatever the bounds say.
        let floor = job.min_workers.max(1);
        if d.workers < floor || d.workers > job.max_workers {
            return Err(invalid(
                policy,
                HookName::Scale,
                format!(
                    "job {name}: {} workers is outside [{floor}, {}]; none applied",
                    d.workers, job.max_workers
                ),
            ));
        }
        d.reason = dragon_runtime::bounds::policy_text(d.reason);
        out.push((i, d));
    }
    Ok(out)
}
