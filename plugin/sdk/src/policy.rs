//! The trait a policy implements.

use crate::types::*;

/// A scheduling policy. Every hook has a neutral default, so a policy
/// implements only what it changes; the host skips hooks a policy does not
/// implement. Put [`#[policy]`](crate::policy) on the `impl` block and the
/// hooks are named from the methods written there ([`Policy::HOOKS`]);
/// without it, [`Policy::metadata`] lists them.
///
/// Hooks must be deterministic functions of their inputs and the configured
/// settings: the host may call them on a fresh instance at any time.
pub trait Policy: Default + 'static {
    /// The hooks the policy implements, as `#[policy]` writes them from the
    /// block's methods. Empty: the hooks [`Policy::metadata`] lists.
    const HOOKS: &'static [Hook] = &[];

    /// Name and version, and the hooks when `#[policy]` does not name them
    /// (see [`PolicyInfo::named`]).
    fn metadata(&self) -> PolicyInfo;

    /// What the component reports: [`Policy::metadata`] with the hooks of
    /// [`Policy::HOOKS`] when it names any.
    fn info(&self) -> PolicyInfo {
        let mut info = self.metadata();
        if !Self::HOOKS.is_empty() {
            info.hooks = Self::HOOKS.to_vec();
        }
        info
    }

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

    /// One bool per candidate node (`view` has their rows). Default:
    /// [`Policy::filter_node`] for each candidate, so a policy that judges
    /// nodes one at a time cannot answer with a list of the wrong length.
    fn filter(&self, pod: &Placement, nodes: &Candidates, view: &View) -> Vec<bool> {
        nodes
            .index
            .iter()
            .map(|&i| self.filter_node(pod, NodeIndex(i), view))
            .collect()
    }

    /// Whether node `node` may take `pod`. Default: yes.
    fn filter_node(&self, _pod: &Placement, _node: NodeIndex, _view: &View) -> bool {
        true
    }

    /// One score per candidate node; highest wins. Default:
    /// [`Policy::score_node`] for each candidate.
    fn score(&self, pod: &Placement, nodes: &Candidates, view: &View) -> Vec<u32> {
        nodes
            .index
            .iter()
            .map(|&i| self.score_node(pod, NodeIndex(i), view))
            .collect()
    }

    /// Node `node`'s score for `pod`; highest wins. Default: 0.
    fn score_node(&self, _pod: &Placement, _node: NodeIndex, _view: &View) -> u32 {
        0
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
