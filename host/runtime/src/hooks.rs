//! What the framework calls on a policy ([`Hooks`], each with a neutral
//! default) and what it knows about one ([`PolicyInfo`]).

use serde::Serialize;

use super::bindings::wit;
use super::error::{CallError, HookName};
use super::view::ClusterView;

/// The scheduling hooks, as the framework calls them. [`WasmPolicy`] is the
/// production implementation; tests and benchmarks also run policies natively
/// through this trait. Every hook but `info` has the SDK's neutral answer,
/// so a test double implements only what it exercises.
pub trait Hooks {
    /// Who the policy is.
    fn info(&self) -> &PolicyInfo;
    /// A scheduling round starts: per-round budgets (log lines) reset.
    /// Wrappers must forward it.
    fn begin_round(&self) {}
    /// See `queue-order` in the WIT files. Default: by arrival, then id.
    fn queue_order(
        &self,
        _now_ms: u64,
        units: &[wit::Queued],
        _view: &dyn ClusterView,
    ) -> Result<Vec<u32>, CallError> {
        let mut order: Vec<u32> = (0..units.len() as u32).collect();
        order.sort_by_key(|&i| (units[i as usize].arrival_ms, units[i as usize].id));
        Ok(order)
    }
    /// See `pre-filter` in the WIT files; `nodes` and `view` describe the
    /// same cluster. Default: try the unit as submitted.
    fn pre_filter(
        &self,
        _now_ms: u64,
        _unit: &wit::Unit,
        _nodes: &wit::Capacity,
        _view: &dyn ClusterView,
    ) -> Result<wit::PreFilterResult, CallError> {
        Ok(wit::PreFilterResult::Proceed(Vec::new()))
    }
    /// See `filter` in the WIT files. Default: every candidate passes.
    fn filter(
        &self,
        _pod: &wit::Placement,
        nodes: &wit::Candidates,
        _view: &dyn ClusterView,
    ) -> Result<Vec<bool>, CallError> {
        Ok(vec![true; nodes.index.len()])
    }
    /// See `score` in the WIT files. Default: every candidate equal.
    fn score(
        &self,
        _pod: &wit::Placement,
        nodes: &wit::Candidates,
        _view: &dyn ClusterView,
    ) -> Result<Vec<u32>, CallError> {
        Ok(vec![0; nodes.index.len()])
    }
    /// See `permit` in the WIT files. Default: allow.
    fn permit(&self, _now_ms: u64, _gang: &wit::GangState) -> Result<wit::PermitResult, CallError> {
        Ok(wit::PermitResult::Allow)
    }
    /// See `scale` in the WIT files. Default: no decisions.
    fn scale(
        &self,
        _input: &wit::ScaleInput,
        _view: &dyn ClusterView,
    ) -> Result<Vec<wit::ScaleDecision>, CallError> {
        Ok(Vec::new())
    }
}

/// What is known about a loaded policy.
#[derive(Debug, Clone, Serialize)]
pub struct PolicyInfo {
    /// The policy's own name.
    pub name: String,
    /// The policy's own version.
    pub version: String,
    /// The WIT interface version it was built against.
    pub interface_version: String,
    /// Hooks it implements.
    pub hooks: Vec<wit::Hook>,
    /// Where it came from.
    pub origin: String,
    /// SHA-256 of the component bytes.
    pub sha256: String,
    /// Component size in bytes.
    pub size_bytes: usize,
    /// Time to compile (or fetch from the cache), ms.
    pub compile_ms: f64,
    /// Whether the compiled artifact came from the cache.
    pub cached: bool,
    /// Settings it was configured with.
    pub settings: String,
}

/// The WIT name of a hook (`queue-order`, `pre-filter`, ...).
pub fn hook_name(hook: wit::Hook) -> &'static str {
    HookName::from(hook).as_str()
}

impl PolicyInfo {
    /// A policy run natively, in the host's process (no component, so no
    /// digest, size or compile time), built against the newest interface.
    pub fn native(name: &str, version: &str, hooks: Vec<wit::Hook>) -> PolicyInfo {
        PolicyInfo {
            name: name.into(),
            version: version.into(),
            interface_version: crate::INTERFACE_VERSION.into(),
            hooks,
            origin: "native".into(),
            sha256: String::new(),
            size_bytes: 0,
            compile_ms: 0.0,
            cached: false,
            settings: String::new(),
        }
    }

    /// Whether the policy implements `hook`.
    pub fn implements(&self, hook: wit::Hook) -> bool {
        self.hooks.contains(&hook)
    }
}
