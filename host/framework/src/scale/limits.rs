//! Bounds the framework puts on the scale step, whatever the policy asks.
//! A job is resized at most once per interval and restarted at most so many
//! times an hour: a policy that is valid on every call could otherwise
//! restart a training run at every step (Kubernetes' Horizontal Pod
//! Autoscaler keeps replicas from flapping with a stabilization window the
//! same way). Growth goes only into free room, and growth whose new workers
//! still wait after a timeout is rolled back, so no resize leaves a job
//! unable to run.

use std::collections::{BTreeMap, VecDeque};
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::cluster::usage::Columns;
use crate::model::Resources;
use crate::names::JobKey;

/// An hour, ms: the window restarts are counted over.
const HOUR_MS: u64 = 3_600_000;

/// The bounds on resizes (`scheduling.resize` in dragon-scheduler's
/// configuration).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default, rename_all = "camelCase")]
pub struct ResizeLimits {
    /// Least time between two resizes of one job, ms.
    pub min_interval_ms: u64,
    /// Most restarts of one running job (each resize restarts it) in any
    /// hour; 0 for no bound.
    pub max_restarts_per_hour: u32,
    /// Longest the new workers of a grown job may wait for room before the
    /// growth is rolled back, ms.
    pub growth_timeout_ms: u64,
}

impl Default for ResizeLimits {
    fn default() -> Self {
        ResizeLimits {
            min_interval_ms: 60_000,
            max_restarts_per_hour: 10,
            growth_timeout_ms: 300_000,
        }
    }
}

/// Why a policy's resize of a job was not applied.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case", tag = "kind")]
pub enum Held {
    /// Resized too recently.
    TooSoon { ago_ms: u64, min_ms: u64 },
    /// Restarted too often in the last hour.
    TooManyRestarts { restarts: u32, per_hour: u32 },
}

impl fmt::Display for Held {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Held::TooSoon { ago_ms, min_ms } => write!(
                f,
                "resized {} s ago; resizes of a job are at least {} s apart",
                ago_ms / 1000,
                min_ms / 1000
            ),
            Held::TooManyRestarts { restarts, per_hour } => write!(
                f,
                "restarted {restarts} times in the last hour; at most {per_hour} an hour"
            ),
        }
    }
}

/// A policy's resize the limits held back: the job keeps its size.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HeldResize {
    pub job: JobKey,
    pub from: u32,
    /// What the policy asked for.
    pub to: u32,
    pub why: Held,
}

impl fmt::Display for HeldResize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "job {} stays at {} workers (the policy asked for {}): {}",
            self.job, self.from, self.to, self.why
        )
    }
}

/// When a running job was restarted, over the last hour.
#[derive(Debug, Clone, Default)]
pub(crate) struct Restarts(VecDeque<u64>);

impl Restarts {
    /// A restart at `now_ms`; those older than an hour are forgotten, so
    /// the log never holds more than an hour of restarts.
    pub(crate) fn note(&mut self, now_ms: u64) {
        self.0.push_back(now_ms);
        while self
            .0
            .front()
            .is_some_and(|&t| t.saturating_add(HOUR_MS) <= now_ms)
        {
            self.0.pop_front();
        }
    }

    /// Restarts in the hour before `now_ms`.
    fn within_hour(&self, now_ms: u64) -> u32 {
        self.0
            .iter()
            .filter(|&&t| t.saturating_add(HOUR_MS) > now_ms)
            .count() as u32
    }
}

impl ResizeLimits {
    /// Whether a resize of a job last resized at `scaled_ms`, with
    /// `restarts`, is held at `now_ms`.
    pub(crate) fn hold(
        &self,
        scaled_ms: Option<u64>,
        restarts: &Restarts,
        now_ms: u64,
    ) -> Option<Held> {
        if let Some(at) = scaled_ms {
            let ago_ms = now_ms.saturating_sub(at);
            if ago_ms < self.min_interval_ms {
                return Some(Held::TooSoon {
                    ago_ms,
                    min_ms: self.min_interval_ms,
                });
            }
        }
        let restarts = restarts.within_hour(now_ms);
        (self.max_restarts_per_hour > 0 && restarts >= self.max_restarts_per_hour).then_some(
            Held::TooManyRestarts {
                restarts,
                per_hour: self.max_restarts_per_hour,
            },
        )
    }
}

/// The free room of one scale step, as its growth takes it node by node:
/// two jobs grown in one step never count the same free GPU.
#[derive(Debug, Default)]
pub(crate) struct GrowthRoom {
    taken: BTreeMap<usize, Resources>,
}

impl GrowthRoom {
    /// Set aside room for up to `want` pods asking `r` on `nodes`, in
    /// order: how many found room.
    pub(crate) fn take(
        &mut self,
        cols: &Columns,
        r: Resources,
        nodes: impl Iterator<Item = usize>,
        want: u32,
    ) -> u32 {
        let mut got = 0u32;
        for n in nodes {
            if got == want {
                break;
            }
            let taken = self.taken.entry(n).or_default();
            let fit = cols.room(n, r, *taken).min(u64::from(want - got)) as u32;
            *taken = taken.plus(r.times(fit));
            got += fit;
        }
        got
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_resize_is_held_when_too_soon_or_after_too_many_restarts_in_the_hour() {
        let limits = ResizeLimits {
            min_interval_ms: 60_000,
            max_restarts_per_hour: 3,
            growth_timeout_ms: 0,
        };
        let mut restarts = Restarts::default();
        assert_eq!(limits.hold(None, &restarts, 0), None);
        assert_eq!(
            limits.hold(Some(100_000), &restarts, 130_000),
            Some(Held::TooSoon {
                ago_ms: 30_000,
                min_ms: 60_000
            })
        );
        assert_eq!(limits.hold(Some(100_000), &restarts, 160_000), None);
        for t in [0, 1_000_000, 2_000_000] {
            restarts.note(t);
        }
        assert_eq!(
            limits
                .hold(None, &restarts, 3_000_000)
                .map(|h| h.to_string()),
            Some("restarted 3 times in the last hour; at most 3 an hour".into())
        );
        // The first restart leaves the hour.
        assert_eq!(limits.hold(None, &restarts, HOUR_MS), None);
        restarts.note(5 * HOUR_MS);
        assert_eq!(restarts.0.len(), 1, "older restarts forgotten");
    }
}
