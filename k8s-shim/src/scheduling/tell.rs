//! Telling what a round decided: metrics and logs on the loop, and the
//! requests that tell the API server ([`Tell`]: why each pending pod waits,
//! the native PodGroup's condition, nominations) made from the round's
//! report and handed to the [`Teller`](super::teller::Teller), which sends
//! them off the loop. PodGroup statuses go to their own writer.

use super::teller::Tell;
use super::*;
use crate::metrics::Attempt;
use dragon_framework::PodKey;

impl<I: ClusterIo> Loop<I> {
    /// Metrics and logs for a round's decisions, and its tells sent.
    pub(super) fn tell(&mut self, report: &RoundReport, now: u64) {
        self.note(report, now);
        self.remember(report);
        let tells = self.tells(report);
        self.teller.send(tells);
    }

    /// Count and log a round's decisions.
    fn note(&self, report: &RoundReport, now: u64) {
        let m = &self.metrics;
        for d in &report.decisions {
            match d {
                Decision::Bound { .. } | Decision::Nominated { .. } => {}
                Decision::Admitted {
                    unit,
                    pods,
                    workers,
                    nodes,
                } => {
                    m.attempt(Attempt::Scheduled);
                    if let Some(job) = unit.job_name() {
                        let waited_ms = self
                            .snapshot
                            .sched
                            .cluster()
                            .job(job)
                            .map(|j| now.saturating_sub(j.arrival_ms));
                        if let Some(ms) = waited_ms {
                            m.gang_wait_seconds.observe(ms as f64 / 1e3);
                        }
                        tracing::info!(
                            gang = job,
                            pods,
                            workers,
                            nodes,
                            waited_ms,
                            "gang admitted"
                        );
                    }
                }
                Decision::Waiting { .. } => m.attempt(Attempt::Waiting),
                Decision::Unschedulable { .. } => m.attempt(Attempt::Unschedulable),
                Decision::Rejected { unit, reason } => {
                    m.attempt(Attempt::Rejected);
                    tracing::info!(%unit, reason, "gang released by permit");
                }
                Decision::TimedOut { unit, reason } => {
                    m.attempt(Attempt::Rejected);
                    tracing::info!(%unit, reason, "gang timed out");
                }
                Decision::BindFailed {
                    unit,
                    pod,
                    error,
                    kept,
                } => {
                    m.attempt(Attempt::Error);
                    tracing::info!(
                        %unit,
                        %pod,
                        reason = %error,
                        kind = ?error.kind,
                        kept = kept.len(),
                        "gang released: a bind failed"
                    );
                }
                Decision::PolicyError { unit, error } => {
                    m.attempt(Attempt::Error);
                    if unit.is_none() {
                        tracing::warn!("policy error in the queue order: {error}");
                    }
                }
                Decision::FellBack { unit, policy } => {
                    m.attempt(Attempt::Fallback);
                    tracing::warn!(%unit, fallback = %policy, "the policy failed; the unit was tried with the fallback");
                }
                Decision::Resized {
                    unit,
                    workers,
                    reason,
                } => {
                    tracing::info!(%unit, workers, reason, "gang resized");
                }
                Decision::Preempting {
                    unit,
                    evicted,
                    shrunk,
                } => {
                    for _ in shrunk {
                        m.victim(Victim::Shrunk);
                    }
                    tracing::info!(
                        %unit,
                        evicted = ?evicted,
                        shrunk = ?shrunk,
                        "preempting lower-priority work to make room"
                    );
                }
                Decision::Breaker(change) => self.breaker_changed(change, now),
                Decision::Deferred { units, budget_ms } => {
                    m.rounds_over_budget.inc();
                    tracing::warn!(
                        units,
                        budget_ms,
                        "round budget spent; untried units wait for the next round"
                    );
                }
            }
        }
    }

    /// What a round's decisions tell the API server: a pure function of
    /// the report and the snapshot.
    pub(super) fn tells(&self, report: &RoundReport) -> Vec<Tell> {
        let mut out = Vec::new();
        for d in &report.decisions {
            match d {
                Decision::Bound { pod, .. } => out.push(Tell::Bound { pod: pod.clone() }),
                Decision::Admitted { unit, pods, .. } => {
                    if let Some(job) = unit.job_name() {
                        self.group_condition(&mut out, job, true, &format!("{pods} pods scheduled"));
                    }
                }
                Decision::Waiting {
                    unit,
                    reserved,
                    wait_ms,
                } => self.waiting(&mut out, unit, None, &format!("gang waiting in permit: {reserved} pods reserved, waiting up to {wait_ms} ms for the rest"), &BTreeSet::new()),
                Decision::Unschedulable { unit, reason } => {
                    let gated: BTreeSet<&str> = reason.gated_pods().collect();
                    self.waiting(&mut out, unit, None, &reason.to_string(), &gated);
                }
                Decision::Rejected { unit, reason } => self.waiting(
                    &mut out,
                    unit,
                    None,
                    &format!("gang rejected by permit: {reason}"),
                    &BTreeSet::new(),
                ),
                Decision::TimedOut { unit, reason } => {
                    self.waiting(&mut out, unit, None, reason, &BTreeSet::new())
                }
                Decision::BindFailed {
                    unit,
                    pod,
                    error,
                    kept,
                } => {
                    let what = if kept.is_empty() {
                        "gang released".to_string()
                    } else {
                        format!(
                            "gang released but for {} member(s) kept bound (no controller would recreate them)",
                            kept.len()
                        )
                    };
                    // A 409 says the pod is bound already (by someone
                    // else): read back, it is counted where it is bound, and
                    // marking it unschedulable would contradict the API
                    // server.
                    let except = (error.kind == ApiErrorKind::Conflict).then_some(pod.as_str());
                    let reason = format!("binding failed, {what}: {error}");
                    self.waiting(&mut out, unit, except, &reason, &BTreeSet::new());
                }
                Decision::PolicyError {
                    unit: Some(unit),
                    error,
                } => self.waiting(
                    &mut out,
                    unit,
                    None,
                    &format!("policy error: {error}"),
                    &BTreeSet::new(),
                ),
                Decision::Nominated { pods, .. } => {
                    for (pod, node) in pods {
                        out.push(Tell::Nominate {
                            pod: pod.clone(),
                            node: node.clone(),
                            version: self.snapshot.versions.get(pod).cloned(),
                        });
                    }
                }
                Decision::PolicyError { unit: None, .. }
                | Decision::FellBack { .. }
                | Decision::Resized { .. }
                | Decision::Preempting { .. }
                | Decision::Breaker(_)
                | Decision::Deferred { .. } => {}
            }
        }
        out
    }

    /// The `PodGroupInitiallyScheduled` condition on the `scheduling.k8s.io`
    /// PodGroup of `job`, as kube-scheduler writes it: True (reason
    /// `Scheduled`) once the gang is admitted, and then never False again;
    /// False (reason `Unschedulable`) with why, while it waits. Not for a
    /// scheduler-plugins PodGroup.
    fn group_condition(&self, out: &mut Vec<Tell>, job: &str, scheduled: bool, message: &str) {
        if self
            .snapshot
            .group(job)
            .is_some_and(|g| g.api == GroupApi::Native)
        {
            out.push(Tell::Group {
                group: job.to_string(),
                scheduled,
                message: message.to_string(),
            });
        }
    }

    /// Why each pending pod of `unit` but `except` waits; the pods in
    /// `gated` wait for their scheduling gates (condition reason
    /// `SchedulingGated`).
    pub(super) fn waiting(
        &self,
        out: &mut Vec<Tell>,
        unit: &UnitKey,
        except: Option<&str>,
        reason: &str,
        gated: &BTreeSet<&str>,
    ) {
        let pods: Vec<PodKey> = match unit {
            UnitKey::Job(job) => {
                self.group_condition(out, job, false, reason);
                self.snapshot
                    .sched
                    .cluster()
                    .job_pods(job)
                    .filter(|(_, s)| !matches!(s, PodState::Bound(_)))
                    .map(|(p, _)| p.key.clone())
                    .collect()
            }
            UnitKey::Pod(pod) => vec![pod.clone()],
        };
        for pod in pods {
            if Some(pod.as_str()) == except {
                continue;
            }
            out.push(Tell::Waiting {
                gated: gated.contains(pod.as_str()),
                reason: reason.to_string(),
                version: self.snapshot.versions.get(&pod).cloned(),
                pod,
            });
        }
    }

    /// Write the status of each PodGroup whose pods or spec changed (those
    /// whose pods are all another scheduler's excepted), and a Warning
    /// Event on a PodGroup whose spec cannot be used, once per problem.
    pub(super) async fn report_groups(&mut self) {
        let now = k8s_openapi::jiff::Timestamp::now()
            .strftime("%Y-%m-%dT%H:%M:%SZ")
            .to_string();
        for group in self.snapshot.statuses.take_dirty() {
            let Some(pg) = self.snapshot.group(&group) else {
                continue;
            };
            if pg.api != GroupApi::SchedulerPlugins || !self.snapshot.statuses.is_ours(&group) {
                continue;
            }
            let min_member = match &pg.spec {
                Ok(spec) => spec.min_member,
                Err(problem) => {
                    let problem = problem.message.clone();
                    if self.group_problem.get(&group) != Some(&problem) {
                        let note = Note {
                            regarding: Regarding::PodGroup(group.clone()),
                            type_: "Warning",
                            reason: "InvalidSpec",
                            note: problem.clone(),
                        };
                        match self.io.event(&note).await {
                            Ok(()) => {
                                self.group_problem.insert(group.clone(), problem);
                            }
                            Err(e) => tracing::warn!(group, "cannot publish event: {e}"),
                        }
                    }
                    0
                }
            };
            let status = self.snapshot.statuses.status(&group, min_member, &now);
            if self.group_status.get(&group) == Some(&status) {
                continue;
            }
            tracing::debug!(group, phase = ?status.phase, "PodGroup status");
            self.statuses.write(&group, status.clone());
            self.group_status.insert(group, status);
        }
    }
}
