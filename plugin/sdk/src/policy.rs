//! The trait a policy implements.

use crate::types::*;

/// A scheduling policy. Every hook has a neutral default, so a policy
/// implements only what it changes and lists those hooks in its metadata
/// (the host skips hooks that are not listed).
///
/// Hooks must be deterministic functions of their inputs and the configured
/// settings: the host may call them on a fresh instance at any time.
pub trait Policy: Default + 'static {
    /// Name, version and the hooks this policy implements.
    fn metadata(&self) -> PolicyInfo;

    /// Validate and apply JSON settings. The default accepts only `{}` or an
    /// empty string, so a typo in settings is never silently ignored.
    fn configure(&mut self, settings: &str) -> Result<(), String> {
        let trimmed = settings.trim();
        if trimmed.is_empty() || trimmed == "{}" {
            Ok(())
        } else {
            Err("this policy takes no settings".to_string())
        }
    }

    /// Order of pending units: a permutation of indices into `units`.
    /// Default: by arrival time, then id (FIFO).
    fn queue_order(&self, _now_ms: u64, units: &[Queued]) -> Vec<u32> {
        let mut order: Vec<u32> = (0..units.len() as u32).collect();
        order.sort_by_key(|&i| (units[i as usize].arrival_ms, units[i as usize].id));
        order
    }

    /// Whether and at which worker counts to try a unit, with every node
    /// in `view`. Default: as submitted.
    fn pre_filter(&self, _now_ms: u64, _unit: &Unit, _view: &View) -> PreFilterResult {
        PreFilterResult::Proceed(Vec::new())
    }

    /// One bool per candidate node (`view` has their rows). Default: all pass.
    fn filter(&self, _pod: &Placement, nodes: &Candidates, _view: &View) -> Vec<bool> {
        vec![true; nodes.index.len()]
    }

    /// One score per candidate node; highest wins. Default: all equal.
    fn score(&self, _pod: &Placement, nodes: &Candidates, _view: &View) -> Vec<u32> {
        vec![0; nodes.index.len()]
    }

    /// Gang admission. Default: allow.
    fn permit(&self, _now_ms: u64, _gang: &GangState) -> PermitResult {
        PermitResult::Allow
    }

    /// Scaling decisions, with every node in `view`. Default: none.
    fn scale(&self, _input: &ScaleInput, _view: &View) -> Vec<ScaleDecision> {
        Vec::new()
    }
}
