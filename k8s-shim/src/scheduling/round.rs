//! A round: decided with the policy, its binds sent together, settled
//! with their answers, its effects (releases, `/scale`, evictions) sent and
//! settled through the framework's one settle path.

use super::*;

impl<I: ClusterIo> Loop<I> {
    /// Learn scale targets from PodGroup annotations, and each target's
    /// replicas once (the workers a job wants).
    pub(super) async fn sync_targets(&mut self) {
        let jobs: Vec<JobKey> = self
            .snapshot
            .sched
            .cluster()
            .jobs()
            .map(|j| j.name.clone())
            .collect();
        for job in jobs {
            let Some(annotation) = self
                .snapshot
                .group(&job)
                .and_then(|g| g.annotations.get(SCALE_TARGET))
            else {
                continue;
            };
            if self.targets.get(&job).map(|(seen, _)| seen) == Some(annotation) {
                continue;
            }
            let annotation = annotation.clone();
            let target = ScaleTarget::parse(SCALE_TARGET, &annotation);
            match &target {
                Ok(target) => match self.io.replicas(&job, target).await {
                    Ok(r) => {
                        self.snapshot.desired.insert(job.clone(), r);
                        self.snapshot.refresh_job(&job);
                    }
                    Err(e) => {
                        tracing::warn!(%job, %target, "cannot read the job's scale: {e}")
                    }
                },
                Err(e) => tracing::warn!(%job, "{e}"),
            }
            self.targets.insert(job, (annotation, target));
        }
    }

    /// Set a job's workers through its scale target.
    pub(super) async fn send_scale(&self, request: &ScaleRequest) -> Result<(), ApiError> {
        let target = match self.targets.get(&request.job) {
            Some((_, Ok(target))) => target,
            Some((_, Err(e))) => return Err(ApiError::new(ApiErrorKind::Refused, e.to_string())),
            None => {
                return Err(ApiError::new(
                    ApiErrorKind::Refused,
                    format!(
                        "job {} has no {SCALE_TARGET} annotation on its PodGroup, so it cannot be scaled",
                        request.job
                    ),
                ));
            }
        };
        self.io.scale(&request.job, target, request.workers).await?;
        tracing::info!(job = %request.job, workers = request.workers, reason = %request.reason, "scaled");
        Ok(())
    }

    /// A scale the framework settled as applied: the job's desired size is
    /// the new one until its PodGroup says otherwise.
    pub(super) fn scaled(&mut self, job: &str, workers: u32) {
        self.snapshot.desired.insert(job.into(), workers);
        self.snapshot.refresh_job(job);
    }

    /// One round: decided with the policy, its binds sent together, settled
    /// with their results, its effects applied, and every outcome told.
    pub(super) async fn round(&mut self) {
        let policy = self.slot.current();
        let now = now_ms();
        let begun = self.taps.begin(&mut self.snapshot.sched, &policy);
        let (sched, metrics) = (&mut self.snapshot.sched, &self.metrics);
        let fallback = self.fallback.as_deref();
        let budget_ms = sched.config().round_budget_ms;
        // Policy calls are CPU-bound and bounded by the round's budget.
        let planned = tokio::task::block_in_place(|| {
            let timed = Observed {
                inner: policy.as_ref(),
                observer: HookMetrics(metrics),
            };
            let mut budget = WallBudget::starting_now(budget_ms);
            sched.plan_round(now, &timed, fallback.map(|f| f as &dyn Hooks), &mut budget)
        });
        let bound = bind_all(
            self.io.as_ref(),
            planned.groups(),
            self.volume_bind_timeout,
            self.bind_concurrency,
        )
        .await;
        // A bind whose outcome is unknown may have landed: the bound pods
        // are read again before the next round.
        self.resync_due |= bound.unsettled > 0;
        let results = bound.results;
        for ((pod, node), result) in planned.binds().zip(&results) {
            if result.is_ok() {
                self.events.spawn(Note {
                    regarding: Regarding::Pod(pod.clone().into()),
                    type_: "Normal",
                    reason: "Scheduled",
                    note: format!("Successfully assigned {pod} to {node}"),
                });
            }
        }
        let bind_answers = results.iter().cloned().collect();
        let mut report = self.snapshot.sched.settle_round(planned, results);
        // Settled as failed, so pending: where the API server has them.
        for pod in bound.elsewhere {
            self.handle(Msg::Event(Event::Pod(Box::new(pod))));
        }
        let mut answers = self.apply_effects(&report.effects).await;
        self.snapshot.sched.settle_effects(&mut report, &answers);
        self.note_scaled(&report.effects, &answers.scales);
        self.note_queues(now);
        answers.binds = bind_answers;
        if let Some(begun) = begun {
            self.taps.end(
                begun,
                |ops| Frame::round(now, ops, &answers, &report.decisions),
                &policy,
            );
        }
        self.tell(&report, now);
        let mut invalid = Vec::new();
        for (key, reason) in &self.snapshot.invalid {
            let unit = UnitKey::pod(key.clone());
            let reason = format!("cannot be scheduled: {reason}");
            self.waiting(&mut invalid, &unit, None, &reason, &BTreeSet::new());
        }
        self.teller.send(invalid);
    }

    /// Each queue's GPUs on `/metrics`, and how well it got what it was
    /// guaranteed over the last hour: its share of its entitlement, its
    /// longest-waiting gang, Jain's index over the queues.
    fn note_queues(&mut self, now: u64) {
        let cluster = self.snapshot.sched.cluster();
        if cluster.queues().is_empty() {
            return;
        }
        let rows = cluster.queue_rows();
        self.metrics.queues(&rows);
        let meter = self
            .share
            .get_or_insert_with(|| QueueMeter::new(cluster.queues()));
        let own: Vec<(u64, u64)> = rows
            .iter()
            .map(|r| (u64::from(r.used_gpus), u64::from(r.demand_gpus)))
            .collect();
        meter.observe_all(now, &own);
        let hour_ago = now.saturating_sub(HOUR_MS);
        meter.forget_before(hour_ago);
        let shares: Vec<Option<f64>> = (0..rows.len())
            .map(|q| meter.share_over(q, hour_ago, now))
            .collect();
        let mut waits = vec![0.0f64; rows.len()];
        for job in cluster.jobs() {
            let Some(q) = job
                .queue
                .as_ref()
                .and_then(|name| rows.iter().position(|r| r.name == name.as_str()))
            else {
                continue;
            };
            if cluster.job_started_ms(&job.name).is_none() {
                waits[q] = waits[q].max(now.saturating_sub(job.arrival_ms) as f64 / 1e3);
            }
        }
        let names: Vec<&str> = rows.iter().map(|r| r.name.as_str()).collect();
        let leaves = dragon_framework::share::leaves(cluster.queues());
        self.metrics
            .queue_fairness(&names, &shares, &waits, &leaves);
    }

    /// Release the members of gangs whose binds failed, apply the scales
    /// of gangs admitted below their size and evict preemption victims: the
    /// answers, in order, for the framework to settle.
    pub(super) async fn apply_effects(&mut self, effects: &[Effect]) -> Answers {
        let mut answers = Answers::default();
        for effect in effects {
            match effect {
                Effect::Release { pod, .. } => {
                    let outcome = self.io.release(pod).await;
                    match &outcome {
                        Err(e) => tracing::error!(%pod, "cannot release a bound gang member: {e}"),
                        Ok(Release::Kept) => {
                            // Rare, and the only word an operator gets of a
                            // partly bound gang: sent now, never dropped
                            // with the spawned Events.
                            let note = Note {
                                regarding: Regarding::Pod(pod.clone().into()),
                                type_: "Warning",
                                reason: "GangPartlyBound",
                                note: "kept bound although a member of its gang could not be \
                                       bound: no controller owns this pod, so deleting it would \
                                       lose it; the rest of the gang is placed when it fits"
                                    .into(),
                            };
                            if let Err(e) = self.io.event(&note).await {
                                tracing::warn!(%pod, "cannot publish event: {e}");
                            }
                        }
                        Ok(Release::Unbound) => {}
                    }
                    answers.releases.push_back(outcome);
                }
                Effect::Scale(request) => {
                    answers.scales.push_back(self.send_scale(request).await);
                }
                Effect::Evict(eviction) => {
                    answers.evictions.push_back(self.evict(eviction).await);
                }
            }
        }
        answers
    }

    /// The snapshot's side of the scales applied among `effects` (`scales`
    /// are their answers, in order), once the framework has settled them.
    pub(super) fn note_scaled(
        &mut self,
        effects: &[Effect],
        scales: &VecDeque<Result<(), ApiError>>,
    ) {
        let requests = effects.iter().filter_map(|e| match e {
            Effect::Scale(request) => Some(request),
            _ => None,
        });
        for (request, result) in requests.zip(scales) {
            if result.is_ok() {
                self.scaled(&request.job, request.workers);
            }
        }
    }

    /// Evict a preemption victim's pods, all or none: each eviction is
    /// asked as a dry run first, so a PodDisruptionBudget that refuses one
    /// leaves the whole unit running. Each pod evicted gets a `Preempted`
    /// Event naming who preempted it.
    pub(super) async fn evict(&mut self, eviction: &Eviction) -> Result<(), ApiError> {
        let mut checked = Ok(());
        for pod in &eviction.pods {
            checked = self.io.evict(pod, true).await;
            if checked.is_err() {
                break;
            }
        }
        let mut evicted = 0;
        if checked.is_ok() {
            for pod in &eviction.pods {
                // One refused after its dry run passed (a budget changed in
                // between): the rest still go, since what is left of the
                // gang could not run anyway.
                match self.io.evict(pod, false).await {
                    Ok(()) => {
                        evicted += 1;
                        self.events.spawn(Note {
                            regarding: Regarding::Pod(pod.clone().into()),
                            type_: "Normal",
                            reason: "Preempted",
                            note: eviction.message.clone(),
                        });
                    }
                    Err(e) => {
                        tracing::error!(%pod, victim = %eviction.victim, "eviction refused after its dry run passed: {e}");
                    }
                }
            }
        }
        let result = match (checked, evicted) {
            (Err(e), _) => Err(e),
            (Ok(()), 0) if !eviction.pods.is_empty() => Err(ApiError::new(
                ApiErrorKind::Refused,
                "every eviction was refused",
            )),
            _ => Ok(()),
        };
        let outcome = match &result {
            Ok(()) => {
                tracing::info!(victim = %eviction.victim, preemptor = %eviction.preemptor, pods = evicted, "preempted");
                Victim::Evicted
            }
            Err(e) => {
                tracing::warn!(victim = %eviction.victim, preemptor = %eviction.preemptor, "cannot preempt: {e}");
                Victim::Refused
            }
        };
        self.metrics.victim(outcome);
        result
    }
}
