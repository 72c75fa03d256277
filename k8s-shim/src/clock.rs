//! The wall clock the scheduler runs on.

use std::time::{SystemTime, UNIX_EPOCH};

/// Milliseconds since the Unix epoch: the time a round is decided at, and
/// what metrics and answers to `kubectl dragon` are stamped with. 0 if the
/// clock reads before the epoch.
pub(crate) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}
