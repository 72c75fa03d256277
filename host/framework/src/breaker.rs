//! A circuit breaker on the policy: after enough consecutive failures
//! (traps, invalid output) the policy is suspended for a while and units
//! fail fast (or go to the fallback) instead of each paying for a call;
//! when the suspension ends, one call is let through as a probe. A probe
//! that fails suspends it again for twice as long (up to a cap); one that
//! succeeds closes the breaker. A different policy (hot swap) starts with a
//! closed breaker.
//!
//! A call that runs out of its deadline has cost a whole deadline of real
//! time already, so one suspends the policy at once. The suspension it
//! starts then ends only once it has passed in real time as well as on the
//! driver's clock: a simulator's clock runs far ahead of the real one, and
//! a probe it let through every few simulated seconds would cost a real
//! deadline each. The core reads no clock: drivers whose clock is not the
//! real one give the real clock with [`crate::Scheduler::set_wall_clock`].

use std::time::{Duration, Instant};

use serde::Serialize;

/// When the breaker opens and for how long.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields, default, rename_all = "camelCase")]
pub struct BreakerConfig {
    /// Consecutive failed attempts that suspend the policy (0: never).
    pub failures: u32,
    /// First suspension, ms; doubled after each failed probe.
    pub suspend_ms: u64,
    /// Longest suspension, ms.
    pub max_suspend_ms: u64,
}

impl Default for BreakerConfig {
    fn default() -> Self {
        BreakerConfig {
            failures: 5,
            suspend_ms: 10_000,
            max_suspend_ms: 300_000,
        }
    }
}

/// A change of the breaker's state, reported as a decision of the round.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "breaker", rename_all = "kebab-case")]
pub enum BreakerChange {
    /// The policy is suspended until `until_ms` after `failures` consecutive
    /// failures.
    Opened {
        policy: String,
        failures: u32,
        until_ms: u64,
    },
    /// A probe call succeeded: the policy serves again.
    Closed { policy: String },
}

/// How an admitted call went, as the breaker counts it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    Answered,
    /// A trap or an invalid answer.
    Failed,
    /// The call ran out of its deadline.
    TimedOut,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum State {
    Closed,
    Open {
        until_ms: u64,
    },
    /// The suspension is over and one attempt is in flight as the probe.
    Probing,
}

/// The breaker of the serving policy.
#[derive(Debug, Clone)]
pub(crate) struct Breaker {
    config: BreakerConfig,
    /// Which policy this state is about (its digest).
    policy: String,
    consecutive: u32,
    state: State,
    /// The suspension the next opening lasts.
    next_suspend_ms: u64,
    /// Opened by a call that ran out of time: when, in real time, and for
    /// how long the suspension lasts there too.
    real: Option<(Instant, Duration)>,
}

impl Default for Breaker {
    fn default() -> Self {
        Breaker::new(BreakerConfig::default())
    }
}

impl Breaker {
    pub(crate) fn new(config: BreakerConfig) -> Breaker {
        Breaker {
            config,
            policy: String::new(),
            consecutive: 0,
            state: State::Closed,
            next_suspend_ms: config.suspend_ms,
            real: None,
        }
    }

    /// Start over when the policy (by digest) is not the one this state is
    /// about: a hot swap.
    fn follow(&mut self, policy: &str) {
        if self.policy != policy {
            *self = Breaker {
                policy: policy.to_string(),
                ..Breaker::new(self.config)
            };
        }
    }

    /// Whether `policy` serves normally: calls that are not attempts of
    /// their own (queue order) are made only then, so the probe after a
    /// suspension is a unit's attempt.
    pub(crate) fn is_closed(&mut self, policy: &str) -> bool {
        self.follow(policy);
        self.state == State::Closed
    }

    /// Whether `policy` (by digest) may be called at `now_ms` (and `wall`,
    /// the real time, when the driver's clock is not it); the error says
    /// until when it is suspended.
    pub(crate) fn admit(
        &mut self,
        policy: &str,
        now_ms: u64,
        wall: impl FnOnce() -> Option<Instant>,
    ) -> Result<(), u64> {
        self.follow(policy);
        match self.state {
            State::Open { until_ms } if now_ms < until_ms => Err(until_ms),
            State::Open { until_ms }
                if self.real.is_some_and(|(opened, lasts)| {
                    wall().is_some_and(|wall| wall.saturating_duration_since(opened) < lasts)
                }) =>
            {
                Err(until_ms)
            }
            State::Open { .. } => {
                self.state = State::Probing;
                Ok(())
            }
            State::Closed | State::Probing => Ok(()),
        }
    }

    /// Record the outcome of an admitted attempt, made at `now_ms` (and
    /// `wall`, the real time, when the driver's clock is not it).
    pub(crate) fn record(
        &mut self,
        outcome: Outcome,
        now_ms: u64,
        wall: impl FnOnce() -> Option<Instant>,
        name: &str,
    ) -> Option<BreakerChange> {
        if outcome == Outcome::Answered {
            self.consecutive = 0;
            self.next_suspend_ms = self.config.suspend_ms;
            let was = std::mem::replace(&mut self.state, State::Closed);
            return (was == State::Probing).then(|| BreakerChange::Closed {
                policy: name.to_string(),
            });
        }
        self.consecutive = self.consecutive.saturating_add(1);
        let timed_out = outcome == Outcome::TimedOut;
        let trip = match self.state {
            State::Probing => true,
            State::Closed => {
                self.config.failures > 0 && (timed_out || self.consecutive >= self.config.failures)
            }
            State::Open { .. } => false,
        };
        if !trip {
            return None;
        }
        self.real = match timed_out {
            true => wall().map(|w| (w, Duration::from_millis(self.next_suspend_ms))),
            false => None,
        };
        let until_ms = now_ms.saturating_add(self.next_suspend_ms);
        self.next_suspend_ms = self
            .next_suspend_ms
            .saturating_mul(2)
            .min(self.config.max_suspend_ms.max(self.config.suspend_ms));
        self.state = State::Open { until_ms };
        Some(BreakerChange::Opened {
            policy: name.to_string(),
            failures: self.consecutive,
            until_ms,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn breaker() -> Breaker {
        Breaker::new(BreakerConfig {
            failures: 3,
            suspend_ms: 1000,
            max_suspend_ms: 3000,
        })
    }

    #[test]
    fn opens_after_consecutive_failures_and_a_success_resets_the_count() {
        let mut b = breaker();
        for _ in 0..2 {
            b.admit("p", 0, || None).unwrap();
            assert_eq!(b.record(Outcome::Failed, 0, || None, "p"), None);
        }
        b.admit("p", 0, || None).unwrap();
        assert_eq!(
            b.record(Outcome::Answered, 0, || None, "p"),
            None,
            "a success resets the count"
        );
        for _ in 0..2 {
            b.admit("p", 0, || None).unwrap();
            assert_eq!(b.record(Outcome::Failed, 0, || None, "p"), None);
        }
        b.admit("p", 10, || None).unwrap();
        assert_eq!(
            b.record(Outcome::Failed, 10, || None, "p"),
            Some(BreakerChange::Opened {
                policy: "p".into(),
                failures: 3,
                until_ms: 1010
            })
        );
        assert_eq!(
            b.admit("p", 500, || None),
            Err(1010),
            "fails fast while open"
        );
    }

    #[test]
    fn a_failed_probe_doubles_the_suspension_up_to_the_cap_and_a_good_one_closes() {
        let mut b = breaker();
        for _ in 0..3 {
            b.admit("p", 0, || None).unwrap();
            b.record(Outcome::Failed, 0, || None, "p");
        }
        // Probe at 1000 fails: 2000 ms this time.
        b.admit("p", 1000, || None).unwrap();
        assert!(matches!(
            b.record(Outcome::Failed, 1000, || None, "p"),
            Some(BreakerChange::Opened { until_ms: 3000, .. })
        ));
        b.admit("p", 3000, || None).unwrap();
        assert!(matches!(
            b.record(Outcome::Failed, 3000, || None, "p"),
            Some(BreakerChange::Opened { until_ms: 6000, .. })
        ));
        b.admit("p", 6000, || None).unwrap();
        assert!(
            matches!(
                b.record(Outcome::Failed, 6000, || None, "p"),
                Some(BreakerChange::Opened { until_ms: 9000, .. }),
            ),
            "capped at 3000 ms"
        );
        b.admit("p", 9000, || None).unwrap();
        assert_eq!(
            b.record(Outcome::Answered, 9000, || None, "p"),
            Some(BreakerChange::Closed { policy: "p".into() })
        );
        assert_eq!(b.admit("p", 9001, || None), Ok(()));
    }

    #[test]
    fn a_swapped_policy_starts_closed() {
        let mut b = breaker();
        for _ in 0..3 {
            b.admit("old", 0, || None).unwrap();
            b.record(Outcome::Failed, 0, || None, "old");
        }
        assert!(b.admit("old", 1, || None).is_err());
        assert_eq!(b.admit("new", 1, || None), Ok(()));
    }

    #[test]
    fn a_call_out_of_time_suspends_at_once_until_the_suspension_passes_in_real_time_too() {
        let mut b = breaker();
        let start = Instant::now();
        b.admit("p", 0, || Some(start)).unwrap();
        assert!(matches!(
            b.record(Outcome::TimedOut, 0, || Some(start), "p"),
            Some(BreakerChange::Opened {
                until_ms: 1000,
                failures: 1,
                ..
            })
        ));
        // A simulated hour later but a real millisecond: still suspended.
        let soon = start + Duration::from_millis(1);
        assert_eq!(b.admit("p", 3_600_000, || Some(soon)), Err(1000));
        // Once a real second has passed too, one probe.
        let later = start + Duration::from_millis(1000);
        assert_eq!(b.admit("p", 3_600_000, || Some(later)), Ok(()));
        // It runs out of time again: two seconds, in both clocks.
        b.record(Outcome::TimedOut, 3_600_000, || Some(later), "p");
        let one_more = later + Duration::from_millis(1500);
        assert!(b.admit("p", 3_700_000, || Some(one_more)).is_err());
        assert_eq!(
            b.admit("p", 3_700_000, || Some(later + Duration::from_millis(2000))),
            Ok(())
        );
        // A driver whose clock is the real one gives no wall time.
        b.record(Outcome::TimedOut, 3_700_000, || None, "p");
        assert!(b.admit("p", 3_702_999, || None).is_err());
        assert_eq!(b.admit("p", 3_703_000, || None), Ok(()));
        // A trap opens on the driver's clock alone, after `failures`.
        b.record(Outcome::Answered, 3_703_000, || None, "p");
        for _ in 0..2 {
            b.admit("p", 3_703_000, || Some(later)).unwrap();
            assert_eq!(
                b.record(Outcome::Failed, 3_703_000, || Some(later), "p"),
                None
            );
        }
        b.admit("p", 3_703_000, || Some(later)).unwrap();
        assert!(
            b.record(Outcome::Failed, 3_703_000, || Some(later), "p")
                .is_some()
        );
        assert_eq!(b.admit("p", 3_704_000, || Some(later)), Ok(()));
    }
}
