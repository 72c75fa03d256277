//! Settling a round: the one path every driver takes from a planned round
//! to its outcomes. [`Scheduler::settle_round`] takes the binds' results
//! and names the effects (releases, scales, evictions);
//! [`Scheduler::settle_effects`] takes what the driver made of each, as one
//! [`Answers`] value. The simulator, the tests and dragon-scheduler differ
//! only in how they send the calls (see `crate::drive` for the synchronous
//! form), never in what the framework does with their answers.

use std::collections::BTreeMap;

use super::{Decision, PlannedRound, PodBind, RoundReport, Scheduler};
use crate::cluster::PodState;
use crate::io::{
    Answers, ApiError, ApiErrorKind, Effect, Eviction, Release, ScaleCause, ScaleRequest,
};
use crate::model::Role;
use crate::names::{NodeName, PodKey};
use crate::queue::Setback;
use crate::unit::UnitKey;

impl Scheduler {
    /// Finish a planned round with the results of its binds, one per pod
    /// of [`PlannedRound::groups`] in order (a missing result counts as
    /// failed). A group whose bind failed is released whole: each of its
    /// members already bound becomes an [`Effect::Release`], and it backs
    /// off. A unit of lone pods backs off only when none of its pods could
    /// be bound. A gang admitted below its requested size gets an
    /// [`Effect::Scale`].
    #[must_use = "the report's effects are the driver's to apply"]
    pub fn settle_round(
        &mut self,
        planned: PlannedRound,
        results: Vec<Result<(), ApiError>>,
    ) -> RoundReport {
        let PlannedRound {
            mut report,
            units,
            to_bind,
            groups,
        } = planned;
        let now_ms = report.now_ms;
        let mut results = results.into_iter();
        // Per unit of lone pods: whether any of its pods was bound.
        let mut lone: BTreeMap<usize, bool> = BTreeMap::new();
        for (group, sent) in to_bind.into_iter().zip(groups) {
            let unit = &units[group.unit];
            let outcome: Vec<(NodeName, Result<(), ApiError>)> = sent
                .pods
                .into_iter()
                .map(|PodBind { node, .. }| {
                    let result = results.next().unwrap_or_else(|| {
                        Err(ApiError::new(
                            crate::ApiErrorKind::Unavailable,
                            "the binder returned fewer results than binds",
                        ))
                    });
                    (node, result)
                })
                .collect();
            let failed = group
                .pods
                .iter()
                .zip(&outcome)
                .find_map(|((pod, _), (_, r))| r.as_ref().err().map(|e| (pod.clone(), e.clone())));
            if let Some((pod, error)) = failed {
                for ((p, node), (_, r)) in group.pods.iter().zip(&outcome) {
                    // Bound until the driver reports the release.
                    let state = match r {
                        Ok(()) => {
                            report.effects.push(Effect::Release {
                                unit: unit.key.clone(),
                                pod: p.clone(),
                            });
                            PodState::Bound(*node)
                        }
                        Err(_) => PodState::Pending,
                    };
                    self.cluster.set_state(p, state);
                }
                self.waiting.remove(&unit.key);
                report.decisions.push(Decision::BindFailed {
                    unit: unit.key.clone(),
                    pod,
                    error,
                    kept: Vec::new(),
                });
                match group.gang {
                    Some(_) => self.set_back(unit, Setback::Error, now_ms),
                    None => {
                        lone.entry(group.unit).or_insert(false);
                    }
                }
                continue;
            }
            self.cluster.note_placed();
            for ((pod, node), (node_name, _)) in group.pods.iter().zip(outcome) {
                self.cluster.set_state(pod, PodState::Bound(*node));
                report.decisions.push(Decision::Bound {
                    pod: pod.clone(),
                    node: node_name,
                });
            }
            self.last_admit_ms = now_ms;
            match group.gang {
                Some(size) => {
                    self.queue.settled(unit.wit.id);
                    self.admitted(now_ms, unit, size, &group.pods, &mut report);
                }
                None => {
                    lone.insert(group.unit, true);
                }
            }
        }
        for (i, any_bound) in lone {
            if any_bound {
                self.queue.settled(units[i].wit.id);
            } else {
                self.set_back(&units[i], Setback::Error, now_ms);
            }
        }
        report
    }

    /// Settle what the driver made of `report`'s effects: `outcomes` holds
    /// one answer per effect of each kind, in the effects' order (the
    /// round's binds are not read here: [`Scheduler::settle_round`] took
    /// them). A missing answer counts as a failure. The decisions the
    /// outcomes make (a member kept bound, a job resized or not) are added
    /// to `report`.
    pub fn settle_effects(&mut self, report: &mut RoundReport, outcomes: &Answers) {
        let now_ms = report.now_ms;
        let missing = || ApiError::new(ApiErrorKind::Unavailable, "the driver gave no answer");
        let mut releases = outcomes.releases.iter().cloned();
        let mut scales = outcomes.scales.iter().cloned();
        let mut evictions = outcomes.evictions.iter().cloned();
        // Taken out while the report is written to, and put back after.
        let effects = std::mem::take(&mut report.effects);
        for effect in &effects {
            match effect {
                Effect::Release { unit, pod } => {
                    let outcome = releases.next().unwrap_or_else(|| Err(missing()));
                    if self.released(pod, outcome) == Release::Kept {
                        report.kept(unit, pod.clone());
                    }
                }
                Effect::Scale(request) => {
                    let result = scales.next().unwrap_or_else(|| Err(missing()));
                    match result {
                        Ok(()) => self.scaled(request, now_ms),
                        Err(_) => self.scale_failed(request, now_ms),
                    }
                    report.decisions.push(request.outcome(result));
                }
                Effect::Evict(eviction) => {
                    let result = evictions.next().unwrap_or_else(|| Err(missing()));
                    self.evicted(eviction, result, now_ms);
                }
            }
        }
        report.effects = effects;
    }

    /// What became of a gang member given in an [`Effect::Release`]:
    /// unbound (or not found bound: its release failed and a watch will say
    /// where it is), it is pending again; kept, it stays bound. Returns the
    /// release as recorded.
    fn released(&mut self, pod: &str, outcome: Result<Release, ApiError>) -> Release {
        let release = match outcome {
            Ok(Release::Kept) => Release::Kept,
            Ok(Release::Unbound) | Err(_) => Release::Unbound,
        };
        if release == Release::Unbound && self.cluster.pod(pod).is_some() {
            self.cluster.set_state(pod, PodState::Pending);
        }
        release
    }

    /// What became of an [`Effect::Evict`]: refused, the victim is not
    /// chosen again for a backoff and its preemptor looks for other room.
    /// Evicted, its pods stay until the driver removes them.
    fn evicted(&mut self, eviction: &Eviction, result: Result<(), ApiError>, now_ms: u64) {
        if result.is_err() {
            self.spared(&eviction.victim, now_ms);
        }
    }

    /// A victim that could not be evicted or shrunk: its preemptors look
    /// for other room, and it is not chosen again for a backoff.
    fn spared(&mut self, victim: &UnitKey, now_ms: u64) {
        let cluster = &self.cluster;
        let of_victim = |pod: &PodKey| match victim {
            UnitKey::Pod(key) => key == pod,
            UnitKey::Job(job) => cluster
                .pod(pod)
                .is_some_and(|(p, _)| p.job.as_ref() == Some(job)),
        };
        self.preempting
            .retain(|_, pods| !pods.iter().any(&of_victim));
        let until = now_ms.saturating_add(self.config.max_backoff_ms.max(1000));
        self.protected.insert(victim.clone(), until);
    }

    /// A scale the driver could not apply. A shrink for a preemption is
    /// not tried on that job again for a backoff (its preemptors look for
    /// other room, eviction included).
    fn scale_failed(&mut self, request: &ScaleRequest, now_ms: u64) {
        if request.cause == ScaleCause::Preemption {
            let victim = UnitKey::job(&request.job);
            self.spared(&victim, now_ms);
            if let Some(until) = self.protected.remove(&victim) {
                self.unshrinkable.insert(request.job.clone(), until);
            }
        }
    }

    /// Record a scale the driver applied: the job's size changes. Below an
    /// admission, its surplus pending workers go (their controller deletes
    /// them); after the scale step, see `apply_scale`. After a shrink for a
    /// preemption the surplus workers keep their room until the driver
    /// removes them (in Kubernetes, once they have terminated), as evicted
    /// victims do: their preemptor waits for them, so it is not placed, nor
    /// does it shrink the job again, while they still run.
    pub(crate) fn scaled(&mut self, request: &ScaleRequest, now_ms: u64) {
        self.cluster.set_clock(now_ms);
        // A running job resized restarts with its new size.
        if request.cause != ScaleCause::Admission
            && self.cluster.job_started_ms(&request.job).is_some()
        {
            self.cluster.note_restart(&request.job);
        }
        if let Some(e) = self.cluster.jobs.get_mut(&request.job) {
            let growth = request.cause == ScaleCause::Policy && request.workers > request.from;
            e.grew = growth.then_some((request.from, now_ms));
        }
        match request.cause {
            ScaleCause::Policy => self.apply_scale(&request.job, request.workers, now_ms),
            ScaleCause::Preemption => {
                self.resize(&request.job, request.workers, now_ms);
            }
            ScaleCause::Admission => {
                let (job, workers) = (&request.job, request.workers);
                self.cluster.set_workers(job, workers);
                let surplus: Vec<PodKey> = self
                    .cluster
                    .job_pods(job)
                    .filter(|(p, s)| {
                        *s == PodState::Pending && p.role == Role::Worker && p.index >= workers
                    })
                    .map(|(p, _)| p.key.clone())
                    .collect();
                for key in surplus {
                    let _ = self.cluster.forget_pod(&key);
                }
            }
        }
    }
}
