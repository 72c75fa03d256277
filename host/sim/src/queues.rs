//! Teams sharing a cluster: a trace's queues, and how well each queue got
//! what it was guaranteed (the framework's [`dragon_framework::share`]).

use anyhow::Result;

pub use dragon_framework::QueueSpec;
pub use dragon_framework::share::{QueueMeter, QueueSummary, jain_index};

/// Check a trace's queues against a cluster of `total_gpus` (see
/// [`dragon_framework::check_queues`]).
pub fn validate(queues: &[QueueSpec], total_gpus: u64) -> Result<()> {
    Ok(dragon_framework::check_queues(queues, Some(total_gpus))?)
}
