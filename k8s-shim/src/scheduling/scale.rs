//! The scale step: decided with the policy, each change sent through the
//! job's `/scale` and settled through the framework; and what a change of
//! the policy's circuit breaker tells.

use super::*;

impl<I: ClusterIo> Loop<I> {
    /// The scale step: decided with the policy, each change applied.
    pub(super) async fn scale(&mut self) {
        let policy = self.slot.current();
        let now = now_ms();
        let begun = self.taps.begin(&mut self.snapshot.sched, &policy);
        let (sched, metrics) = (&mut self.snapshot.sched, &self.metrics);
        let mut report = tokio::task::block_in_place(|| {
            let timed = Observed {
                inner: policy.as_ref(),
                observer: HookMetrics(metrics),
            };
            sched.plan_scale(now, &timed)
        });
        let mut results = Vec::with_capacity(report.requests.len());
        for request in &report.requests {
            results.push(self.send_scale(request).await);
        }
        let answers = Answers {
            scales: results.iter().cloned().collect(),
            ..Answers::default()
        };
        self.snapshot.sched.settle_scale(&mut report, results);
        for action in &report.actions {
            self.scaled(&action.job, action.to);
            self.metrics.scale_action(match action.to > action.from {
                true => Direction::Up,
                false => Direction::Down,
            });
            tracing::info!(job = %action.job, from = action.from, to = action.to, reason = %action.reason, "scale");
        }
        for refused in &report.refused {
            tracing::warn!("scale step: {refused}");
        }
        for held in &report.held {
            self.metrics.resize_held(&held.why);
            tracing::info!(job = %held.job, "scale step: {held}");
        }
        if let Some(begun) = begun {
            self.taps.end(
                begun,
                |ops| Frame::scale(now, ops, &answers, &report.actions),
                &policy,
            );
        }
        for e in &report.errors {
            tracing::warn!("scale step: {e}");
        }
        if let Some(change) = &report.breaker {
            self.breaker_changed(change, now_ms());
        }
    }

    /// Metrics and a log line for a suspension of the policy or its end.
    pub(super) fn breaker_changed(&self, change: &BreakerChange, now: u64) {
        let m = &self.metrics;
        match change {
            BreakerChange::Opened {
                policy,
                failures,
                until_ms,
            } => {
                m.policy_suspensions.inc();
                m.policy_suspended.set(1);
                let suspended_ms = until_ms.saturating_sub(now);
                tracing::warn!(
                    policy,
                    failures,
                    suspended_ms,
                    "policy suspended after consecutive failures; its units fail fast until a probe call succeeds"
                );
            }
            BreakerChange::Closed { policy } => {
                m.policy_suspended.set(0);
                tracing::info!(policy, "policy probe succeeded; the policy serves again");
            }
        }
    }
}
