//! Telling what a round decided: metrics, logs, `FailedScheduling` Events
//! and `PodScheduled` conditions on the pods, PodGroup statuses and the
//! native PodGroup's condition.

use futures::StreamExt;

use super::*;
use crate::metrics::Attempt;

impl<I: ClusterIo> Loop<I> {
    /// Metrics, logs, Events and conditions for a round's decisions.
    pub(super) async fn tell(&mut self, report: &RoundReport, now: u64) {
        for d in &report.decisions {
            let m = self.metrics.clone();
            match d {
                Decision::Bound { pod, .. } => {
                    self.last_reason.remove(pod);
                }
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
                        self.native_condition(job, true, &format!("{pods} pods scheduled"))
                            .await;
                    }
                }
                Decision::Waiting {
                    unit,
                    reserved,
                    wait_ms,
                } => {
                    m.attempt(Attempt::Waiting);
                    self.explain(unit, &format!("gang waiting in permit: {reserved} pods reserved, waiting up to {wait_ms} ms for the rest")).await;
                }
                Decision::Unschedulable { unit, reason } => {
                    m.attempt(Attempt::Unschedulable);
                    let gated: BTreeSet<&str> = reason.gated_pods().collect();
                    self.explain_as(unit, None, &reason.to_string(), &gated)
                        .await;
                }
                Decision::Rejected { unit, reason } => {
                    m.attempt(Attempt::Rejected);
                    tracing::info!(%unit, reason, "gang released by permit");
                    self.explain(unit, &format!("gang rejected by permit: {reason}"))
                        .await;
                }
                Decision::TimedOut { unit, reason } => {
                    m.attempt(Attempt::Rejected);
                    tracing::info!(%unit, reason, "gang timed out");
                    self.explain(unit, reason).await;
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
                        pod,
                        reason = %error,
                        kind = ?error.kind,
                        kept = kept.len(),
                        "gang released: a bind failed"
                    );
                    let what = if kept.is_empty() {
                        "gang released".to_string()
                    } else {
                        format!(
                            "gang released but for {} member(s) kept bound (no controller would recreate them)",
                            kept.len()
                        )
                    };
                    // A 409 says the pod is bound already (by someone
                    // else): its watch event will say where, and marking it
                    // unschedulable would contradict the API server.
                    let except = (error.kind == ApiErrorKind::Conflict).then_some(pod.as_str());
                    let reason = format!("binding failed, {what}: {error}");
                    self.explain_as(unit, except, &reason, &BTreeSet::new())
                        .await;
                }
                Decision::PolicyError { unit, error } => {
                    m.attempt(Attempt::Error);
                    match unit {
                        Some(unit) => self.explain(unit, &format!("policy error: {error}")).await,
                        None => tracing::warn!("policy error in the queue order: {error}"),
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
                Decision::Nominated { pods, .. } => {
                    for (pod, node) in pods {
                        if let Err(e) = self.io.nominate(pod, node.as_deref()).await {
                            tracing::warn!(pod, "cannot set nominatedNodeName: {e}");
                        }
                    }
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

    /// The `PodGroupInitiallyScheduled` condition on the `scheduling.k8s.io`
    /// PodGroup of `job`, as kube-scheduler writes it: True (reason
    /// `Scheduled`) once the gang is admitted, and then never False again;
    /// False (reason `Unschedulable`) with why, while it waits. Written when
    /// it changes; not for a scheduler-plugins PodGroup.
    pub(super) async fn native_condition(&mut self, job: &str, scheduled: bool, message: &str) {
        if self
            .snapshot
            .group(job)
            .is_none_or(|g| g.api != GroupApi::Native)
        {
            return;
        }
        match self.group_condition.get(job) {
            Some((true, _)) => return,
            Some((s, m)) if *s == scheduled && m == message => return,
            _ => {}
        }
        match self.io.group_condition(job, scheduled, message).await {
            Ok(()) => {
                self.group_condition
                    .insert(job.to_string(), (scheduled, message.to_string()));
            }
            Err(e) => tracing::debug!(group = job, "cannot set the PodGroup's condition: {e}"),
        }
    }

    /// A FailedScheduling event and `PodScheduled=False` on each pending pod
    /// of `unit`, once per reason.
    pub(super) async fn explain(&mut self, unit: &UnitKey, reason: &str) {
        self.explain_as(unit, None, reason, &BTreeSet::new()).await;
    }

    /// [`Loop::explain`], leaving out `except`; the pods in `gated` wait
    /// for their scheduling gates (condition reason `SchedulingGated`).
    pub(super) async fn explain_as(
        &mut self,
        unit: &UnitKey,
        except: Option<&str>,
        reason: &str,
        gated: &BTreeSet<&str>,
    ) {
        let mut pods: Vec<String> = match unit {
            UnitKey::Job(job) => {
                self.native_condition(job, false, reason).await;
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
        pods.retain(|p| {
            Some(p.as_str()) != except
                && self.last_reason.get(p).map(String::as_str) != Some(reason)
        });
        // Each pod's Event and condition go out together, and up to
        // `bindConcurrency` pods at once: a 64-pod gang costs a few round
        // trips, not 128 in series.
        let io = self.io.as_ref();
        let told: Vec<String> = futures::stream::iter(pods)
            .map(|pod| async move {
                let note = Note {
                    regarding: Regarding::Pod(pod.clone()),
                    type_: "Warning",
                    reason: "FailedScheduling",
                    note: reason.to_string(),
                };
                let condition = Unschedulable {
                    reason: if gated.contains(pod.as_str()) {
                        "SchedulingGated"
                    } else {
                        "Unschedulable"
                    },
                    message: reason.to_string(),
                };
                let (published, set) =
                    futures::join!(io.event(&note), io.pod_unschedulable(&pod, &condition));
                if let Err(e) = &published {
                    tracing::warn!(pod, "cannot publish event: {e}");
                }
                if let Err(e) = &set {
                    tracing::debug!(pod, "cannot set PodScheduled=False: {e}");
                }
                (published.is_ok() && set.is_ok()).then_some(pod)
            })
            .buffer_unordered(self.bind_concurrency)
            .filter_map(std::future::ready)
            .collect()
            .await;
        // Remembered only once published: an Event or condition lost while
        // the API server is away is sent again on the next round.
        for pod in told {
            self.last_reason.insert(pod, reason.to_string());
        }
    }
}
