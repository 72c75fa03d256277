//! Per-call limits on a policy: a wall-clock deadline and a memory cap.

use serde::Deserialize;

/// Limits applied to every call into a policy (`limits` in
/// dragon-scheduler's config: `deadlineMs`, `memoryBytes`, `tableElements`).
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default, rename_all = "camelCase")]
pub struct Limits {
    /// A call that runs longer than this is interrupted (epoch interruption).
    pub deadline_ms: u64,
    /// Cap on the policy's linear memory, bytes.
    pub memory_bytes: usize,
    /// Most elements the policy's tables may grow to.
    pub table_elements: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            deadline_ms: 1_000,
            memory_bytes: 128 << 20,
            table_elements: 20_000,
        }
    }
}

/// The store's resource limiter; remembers whether the memory cap was hit so
/// the error names the cause instead of a bare trap.
#[derive(Debug)]
pub(crate) struct Limiter {
    pub(crate) memory_bytes: usize,
    pub(crate) table_elements: usize,
    pub(crate) memory_cap_hit: bool,
    /// The linear memory's size after its last growth, bytes.
    pub(crate) memory_size: usize,
}

impl wasmtime::ResourceLimiter for Limiter {
    fn memory_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > self.memory_bytes {
            self.memory_cap_hit = true;
            wasmtime::bail!(
                "memory limit of {} bytes reached (asked for {desired})",
                self.memory_bytes
            );
        }
        self.memory_size = desired;
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(desired <= self.table_elements)
    }
}
