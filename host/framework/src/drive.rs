//! The synchronous driver: a round or a scale step planned, its calls made
//! one at a time through a [`Binder`] and a [`Scaler`], and settled. The
//! simulator, `dragon policy run`, replays, tests and benchmarks drive the
//! framework this way; dragon-scheduler sends the same calls over the
//! Kubernetes API concurrently and settles their answers through the very
//! same [`Scheduler::settle_round`], [`Scheduler::settle_effects`] and
//! [`Scheduler::settle_scale`].

use std::time::{Duration, Instant};

use dragon_runtime::Hooks;

use crate::cycle::{RoundBudget, RoundReport, Scheduler};
use crate::io::{Answers, Binder, Effect, Scaler};
use crate::scale::ScaleReport;

/// A round's budget in wall-clock time, from when it is made (`None`:
/// unbounded). The clock is read here, by the driver, never by the core.
#[derive(Debug, Clone, Copy)]
pub struct WallBudget {
    deadline: Option<(Instant, u64)>,
}

impl WallBudget {
    /// A budget of `budget_ms` from now (0: none).
    pub fn starting_now(budget_ms: u64) -> WallBudget {
        let deadline =
            (budget_ms > 0).then(|| (Instant::now() + Duration::from_millis(budget_ms), budget_ms));
        WallBudget { deadline }
    }
}

impl RoundBudget for WallBudget {
    fn spent(&mut self, _untried: usize) -> bool {
        self.deadline
            .is_some_and(|(deadline, _)| Instant::now() > deadline)
    }

    fn budget_ms(&self) -> u64 {
        self.deadline.map_or(0, |(_, ms)| ms)
    }
}

/// Apply a settled round's `effects` one call at a time: the answers, in
/// order, for [`Scheduler::settle_effects`].
pub fn apply_effects(
    effects: &[Effect],
    binder: &mut dyn Binder,
    scaler: &mut dyn Scaler,
) -> Answers {
    let mut answers = Answers::default();
    for effect in effects {
        match effect {
            Effect::Release { pod, .. } => {
                let outcome = binder.unbind(pod);
                if let Err(e) = &outcome {
                    tracing::error!(pod = %pod, "cannot release a bound gang member: {e}");
                }
                answers.releases.push_back(outcome);
            }
            Effect::Scale(request) => {
                let result = scaler.scale(&request.job, request.workers, &request.reason);
                answers.scales.push_back(result);
            }
            Effect::Evict(eviction) => {
                let result = binder.evict(eviction);
                if let Err(e) = &result {
                    tracing::warn!(victim = %eviction.victim, "cannot evict: {e}");
                }
                answers.evictions.push_back(result);
            }
        }
    }
    answers
}

impl Scheduler {
    /// Run one scheduling round at `now_ms` and apply it one call at a time
    /// through `binder` and `scaler`; a unit the policy fails on stays
    /// pending (fail closed). The round's budget is the configured
    /// `round_budget_ms` of wall-clock time.
    pub fn schedule_round(
        &mut self,
        now_ms: u64,
        policy: &dyn Hooks,
        binder: &mut dyn Binder,
        scaler: &mut dyn Scaler,
    ) -> RoundReport {
        self.schedule_round_with_fallback(now_ms, policy, None, binder, scaler)
    }

    /// [`Scheduler::schedule_round`], but a unit the policy fails on is tried
    /// again in the same round with `fallback` (see [`Scheduler::plan_round`]).
    pub fn schedule_round_with_fallback(
        &mut self,
        now_ms: u64,
        policy: &dyn Hooks,
        fallback: Option<&dyn Hooks>,
        binder: &mut dyn Binder,
        scaler: &mut dyn Scaler,
    ) -> RoundReport {
        let mut budget = WallBudget::starting_now(self.config().round_budget_ms);
        self.schedule_round_within(now_ms, policy, fallback, &mut budget, binder, scaler)
    }

    /// [`Scheduler::schedule_round_with_fallback`] within `budget`.
    pub fn schedule_round_within(
        &mut self,
        now_ms: u64,
        policy: &dyn Hooks,
        fallback: Option<&dyn Hooks>,
        budget: &mut dyn RoundBudget,
        binder: &mut dyn Binder,
        scaler: &mut dyn Scaler,
    ) -> RoundReport {
        // This driver's clock may be a simulated one: the real one goes
        // with it (see `Scheduler::set_wall_clock`).
        self.set_wall_clock(Instant::now);
        let planned = self.plan_round(now_ms, policy, fallback, budget);
        let results = match planned.groups().is_empty() {
            true => Vec::new(),
            false => binder.bind_many(planned.groups()),
        };
        let mut report = self.settle_round(planned, results);
        let outcomes = apply_effects(&report.effects, binder, scaler);
        self.settle_effects(&mut report, &outcomes);
        report
    }

    /// Run the scale step at `now_ms` and apply it through `scaler`.
    pub fn scale_step(
        &mut self,
        now_ms: u64,
        policy: &dyn Hooks,
        scaler: &mut dyn Scaler,
    ) -> ScaleReport {
        self.set_wall_clock(Instant::now);
        let mut report = self.plan_scale(now_ms, policy);
        let results: Vec<_> = report
            .requests
            .iter()
            .map(|r| scaler.scale(&r.job, r.workers, &r.reason))
            .collect();
        self.settle_scale(&mut report, results);
        report
    }
}
