//! Work a unit may take room from (preemption, reclaim between queues,
//! shrinking elastic jobs), and what a choice of it costs.

use crate::names::PodKey;
use crate::unit::UnitKey;

/// How much a set of victims hurts, least first.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct VictimCost {
    evicts: bool,
    worst_priority: i32,
    units: usize,
    pods: usize,
}

impl VictimCost {
    pub(super) fn of(victims: &[Candidate]) -> VictimCost {
        VictimCost {
            evicts: victims.iter().any(|v| v.shrink.is_none()),
            worst_priority: victims.iter().map(|v| v.priority).max().unwrap_or(i32::MIN),
            units: victims.len(),
            pods: victims.iter().map(|v| v.pods.len()).sum(),
        }
    }
}

/// Work that could give up its room.
#[derive(Debug, Clone)]
pub(crate) struct Candidate {
    pub(crate) key: UnitKey,
    pub(crate) priority: i32,
    /// When it started, ms: of equal priority, the one that started last
    /// loses least and goes first.
    pub(super) started_ms: u64,
    /// The pods it gives up, with their nodes.
    pub(crate) pods: Vec<(PodKey, usize)>,
    /// For an elastic job shrunk rather than evicted: its workers before
    /// and after.
    pub(crate) shrink: Option<(u32, u32)>,
    /// Another queue it is taken from, which borrows beyond its guarantee
    /// (see `reclaim`).
    pub(crate) queue: Option<String>,
}
