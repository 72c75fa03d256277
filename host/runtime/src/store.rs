//! What a policy instance's store holds: its memory and table limiter, its
//! share of the log budget, what it logged in the current call, and its
//! WASI sandbox; and the `host` import (`log`) it serves.

use std::sync::Arc;

use super::adapt;
use super::bindings::{v0_1, v0_2, v0_3, v0_4, wit};
use super::bounds::{self, LogBudget};
use super::limits::Limiter;
use super::wasi::Sandbox;

/// The data of one instance's store.
pub(crate) struct HostState {
    pub(crate) limiter: Limiter,
    pub(crate) policy: String,
    /// Log lines shared by every instance of this policy.
    pub(crate) log_budget: Arc<LogBudget>,
    /// Log lines written by the current call.
    pub(crate) call_lines: u64,
    /// The last error-level line the policy logged in the current call (the
    /// SDK logs panic messages), to explain a trap.
    pub(crate) last_error: Option<String>,
    /// WASI, for components that import it.
    pub(crate) sandbox: Sandbox,
}

impl v0_1::dragon::scheduler::types::Host for HostState {}
impl v0_2::dragon::scheduler::types::Host for HostState {}
impl v0_3::dragon::scheduler::types::Host for HostState {}
impl v0_4::dragon::scheduler::types::Host for HostState {}

impl v0_1::dragon::scheduler::host::Host for HostState {
    fn log(&mut self, level: wit::Level, message: String) {
        self.log_line(level, message);
    }
}

impl v0_2::dragon::scheduler::host::Host for HostState {
    fn log(&mut self, level: v0_2::dragon::scheduler::types::Level, message: String) {
        self.log_line(adapt::v2::level(level), message);
    }
}

impl v0_3::dragon::scheduler::host::Host for HostState {
    fn log(&mut self, level: v0_3::dragon::scheduler::types::Level, message: String) {
        self.log_line(adapt::v3::level(level), message);
    }
}

impl v0_4::dragon::scheduler::host::Host for HostState {
    fn log(&mut self, level: v0_4::dragon::scheduler::types::Level, message: String) {
        self.log_line(adapt::v4::level(level), message);
    }
}

impl HostState {
    fn log_line(&mut self, level: wit::Level, message: String) {
        // A policy controls how many lines and how long: both are capped.
        if !self.log_budget.admit(self.call_lines) {
            return;
        }
        self.call_lines += 1;
        let message = bounds::cut(bounds::inert(message), bounds::MAX_LOG_LINE);
        let policy = self.policy.as_str();
        match level {
            wit::Level::Trace => tracing::trace!(policy, "{message}"),
            wit::Level::Debug => tracing::debug!(policy, "{message}"),
            wit::Level::Info => tracing::info!(policy, "{message}"),
            wit::Level::Warn => tracing::warn!(policy, "{message}"),
            wit::Level::Error => {
                tracing::error!(policy, "{message}");
                self.last_error = Some(message);
            }
        }
    }
}

impl wasmtime_wasi::WasiView for HostState {
    fn ctx(&mut self) -> wasmtime_wasi::WasiCtxView<'_> {
        self.sandbox.view()
    }
}
