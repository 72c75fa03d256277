//! A circuit breaker on the policy: after enough consecutive failures
//! (traps, deadlines, invalid output) the policy is suspended for a while
//! and units fail fast (or go to the fallback) instead of each paying a
//! deadline; when the suspension ends, one call is let through as a probe.
//! A probe that fails suspends it again for twice as long (up to a cap); one
//! that succeeds closes the breaker. A different policy (hot swap) starts
//! with a closed breaker.

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

    /// Whether `policy` (by digest) may be called at `now_ms`; the error
    /// says until when it is suspended.
    pub(crate) fn admit(&mut self, policy: &str, now_ms: u64) -> Result<(), u64> {
        self.follow(policy);
        match self.state {
            State::Open { until_ms } if now_ms < until_ms => Err(until_ms),
            State::Open { .. } => {
                self.state = State::Probing;
                Ok(())
            }
            State::Closed | State::Probing => Ok(()),
        }
    }

    /// Record the outcome of an admitted attempt.
    pub(crate) fn record(&mut self, ok: bool, now_ms: u64, name: &str) -> Option<BreakerChange> {
        if ok {
            self.consecutive = 0;
            self.next_suspend_ms = self.config.suspend_ms;
            let was = std::mem::replace(&mut self.state, State::Closed);
            return (was == State::Probing).then(|| BreakerChange::Closed {
                policy: name.to_string(),
            });
        }
        self.consecutive = self.consecutive.saturating_add(1);
        let trip = match self.state {
            State::Probing => true,
            State::Closed => self.config.failures > 0 && self.consecutive >= self.config.failures,
            State::Open { .. } => false,
        };
        if !trip {
            return None;
        }
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
            b.admit("p", 0).unwrap();
            assert_eq!(b.record(false, 0, "p"), None);
        }
        b.admit("p", 0).unwrap();
        assert_eq!(b.record(true, 0, "p"), None, "a success resets the count");
        for _ in 0..2 {
            b.admit("p", 0).unwrap();
            assert_eq!(b.record(false, 0, "p"), None);
        }
        b.admit("p", 10).unwrap();
        assert_eq!(
            b.record(false, 10, "p"),
            Some(BreakerChange::Opened {
                policy: "p".into(),
                failures: 3,
                until_ms: 1010
            })
        );
        assert_eq!(b.admit("p", 500), Err(1010), "fails fast while open");
    }

    #[test]
    fn a_failed_probe_doubles_the_suspension_up_to_the_cap_and_a_good_one_closes() {
        let mut b = breaker();
        for _ in 0..3 {
            b.admit("p", 0).unwrap();
            b.record(false, 0, "p");
        }
        // Probe at 1000 fails: 2000 ms this time.
        b.admit("p", 1000).unwrap();
        assert!(matches!(
            b.record(false, 1000, "p"),
            Some(BreakerChange::Opened { until_ms: 3000, .. })
        ));
        b.admit("p", 3000).unwrap();
        assert!(matches!(
            b.record(false, 3000, "p"),
            Some(BreakerChange::Opened { until_ms: 6000, .. })
        ));
        b.admit("p", 6000).unwrap();
        assert!(
            matches!(
                b.record(false, 6000, "p"),
                Some(BreakerChange::Opened { until_ms: 9000, .. }),
            ),
            "capped at 3000 ms"
        );
        b.admit("p", 9000).unwrap();
        assert_eq!(
            b.record(true, 9000, "p"),
            Some(BreakerChange::Closed { policy: "p".into() })
        );
        assert_eq!(b.admit("p", 9001), Ok(()));
    }

    #[test]
    fn a_swapped_policy_starts_closed() {
        let mut b = breaker();
        for _ in 0..3 {
            b.admit("old", 0).unwrap();
            b.record(false, 0, "old");
        }
        assert!(b.admit("old", 1).is_err());
        assert_eq!(b.admit("new", 1), Ok(()));
    }
}
