//! The framework's settings.

use super::super::breaker::BreakerConfig;
use crate::queue::{Flush, Waits, Wake};
use crate::scale::ResizeLimits;

/// Framework settings that are not the policy's business.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields, default, rename_all = "camelCase")]
pub struct SchedulerConfig {
    /// Longest a gang may wait in permit, whatever the policy asks
    /// (kube-scheduler caps permit waits at 15 minutes).
    pub max_permit_wait_ms: u64,
    /// A unit whose attempt failed (the policy or a bind) is not tried
    /// again for this long; the wait doubles with each failure up to
    /// `max_backoff_ms` (kube-scheduler's podInitialBackoffSeconds /
    /// podMaxBackoffSeconds: 1 s and 10 s).
    pub initial_backoff_ms: u64,
    /// The longest backoff, and the longest an unschedulable unit waits
    /// for a cluster change before it is flushed back (see `flush`).
    pub max_backoff_ms: u64,
    /// Whether that flush tries the unit again or only counts the attempt
    /// (drivers that see every change, as the simulator does).
    pub flush: Flush,
    /// Which changes wake a unit found unschedulable: any that may help
    /// (kube-scheduler's), or only those after which it could fit (drivers
    /// whose rounds follow every change, as the simulator's do).
    pub wake: Wake,
    /// When repeated policy failures suspend the policy.
    pub breaker: BreakerConfig,
    /// Wall-clock budget of one round's unit attempts, ms (0: none). Units
    /// not tried when it runs out wait for the next round, so a policy that
    /// is slow on every call (but within its deadline) cannot hold a round
    /// for pods × deadline.
    pub round_budget_ms: u64,
    /// A unit that fits nowhere may evict lower-priority work (see
    /// `preemption`), as kube-scheduler's DefaultPreemption does.
    pub preemption: bool,
    /// With `preemption`: a unit whose queue is owed GPUs may also take
    /// them back from queues borrowing beyond their guarantee, whatever
    /// the priorities (Kueue's `reclaimWithinCohort: Any`; see `reclaim`).
    pub reclaim: bool,
    /// Bounds on the scale step's resizes: how often a job may be resized
    /// and restarted, and how long growth may wait for room.
    pub resize: ResizeLimits,
    /// The share of a pod's feasible nodes, percent, its placement looks
    /// at on a cluster of 100 nodes or more (kube-scheduler's
    /// `percentageOfNodesToScore`): 0 is adaptive, 50 % less one point per
    /// 125 nodes and at least 5 %; never fewer than 100 nodes.
    pub percentage_of_nodes_to_score: u32,
}

impl Default for SchedulerConfig {
    fn default() -> Self {
        SchedulerConfig {
            max_permit_wait_ms: 15 * 60 * 1000,
            initial_backoff_ms: 1000,
            max_backoff_ms: 10_000,
            flush: Flush::Run,
            wake: Wake::Any,
            breaker: BreakerConfig::default(),
            round_budget_ms: 10_000,
            preemption: true,
            reclaim: false,
            resize: ResizeLimits::default(),
            percentage_of_nodes_to_score: 0,
        }
    }
}

impl SchedulerConfig {
    /// How long the queue keeps a unit that was not bound.
    pub(crate) fn waits(&self) -> Waits {
        Waits {
            initial_ms: self.initial_backoff_ms,
            max_ms: self.max_backoff_ms,
            flush: self.flush,
        }
    }

    /// No backoff: every pending unit is tried in every round (tests that
    /// step rounds by hand).
    pub fn without_backoff() -> SchedulerConfig {
        SchedulerConfig {
            initial_backoff_ms: 0,
            max_backoff_ms: 0,
            ..SchedulerConfig::default()
        }
    }
}
