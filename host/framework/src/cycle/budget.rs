//! How long a round may go on trying units. The core reads no clock: it
//! asks the driver's [`RoundBudget`] before each unit, so a replay can stop
//! where the recorded run stopped (see [`DeferAt`]) and the simulator is
//! never cut short by a slow machine.

/// Whether a round may try another unit.
pub trait RoundBudget {
    /// Whether the round must stop now, with `untried` units (at least one)
    /// still to try: they are deferred to the next round.
    fn spent(&mut self, untried: usize) -> bool;

    /// The budget as reported in [`crate::Decision::Deferred`], ms.
    fn budget_ms(&self) -> u64;
}

/// A round that tries every unit.
#[derive(Debug, Clone, Copy, Default)]
pub struct Unbounded;

impl RoundBudget for Unbounded {
    fn spent(&mut self, _untried: usize) -> bool {
        false
    }

    fn budget_ms(&self) -> u64 {
        0
    }
}

/// A recorded round's budget: it ran out with `untried` units left (of a
/// budget of `budget_ms`), so the replay stops there too.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeferAt {
    pub untried: usize,
    pub budget_ms: u64,
}

impl RoundBudget for DeferAt {
    fn spent(&mut self, untried: usize) -> bool {
        untried <= self.untried
    }

    fn budget_ms(&self) -> u64 {
        self.budget_ms
    }
}
