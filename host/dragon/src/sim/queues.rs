//! Teams sharing a cluster: a trace's queues, and how well each queue got
//! what it was guaranteed (the framework's [`crate::framework::share`]).

use anyhow::Result;

pub use crate::framework::QueueSpec;
pub use crate::framework::share::{QueueMeter, QueueSummary, jain_index};

/// Check a trace's queues against a cluster of `total_gpus` (see
/// [`crate::framework::check_queues`]).
pub fn validate(queues: &[QueueSpec], total_gpus: u64) -> Result<()> {
    Ok(crate::framework::check_queues(queues, Some(total_gpus))?)
}
