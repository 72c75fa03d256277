//! The trait a policy implements.

use std::fmt;

use crate::types::*;

/// Settings a policy refuses: the message the operator sees.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal(String);

impl Refusal {
    pub fn new(message: impl Into<String>) -> Refusal {
        Refusal(message.into())
    }

    pub fn message(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Any error refuses settings with its text, so `?` works on a policy's
/// own checks.
impl<E: std::error::Error> From<E> for Refusal {
    fn from(e: E) -> Refusal {
        Refusal(e.to_string())
    }
}

/// The settings of a policy that takes none: only `{}` (or no text) is
/// accepted, so a setting given to such a policy is never silently ignored.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NoSettings {}

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

    /// The settings the policy takes, read by serde from the operator's
    /// JSON (no text: `Default`). [`NoSettings`] when it takes none, which
    /// `#[policy]` writes when the block names no `Settings`.
    type Settings: serde::de::DeserializeOwned + Default;

    /// Check and keep settings already read into [`Policy::Settings`]; an
    /// `Err` refuses them with a message the operator sees, and the last
    /// good settings stay.
    fn configure(&mut self, settings: Self::Settings) -> Result<(), Refusal>;

    /// What the host calls: `json` read into [`Policy::Settings`] (serde's
    /// error refuses it; the host adds the policy's name), then
    /// [`Policy::configure`].
    fn configure_json(&mut self, json: &str) -> Result<(), Refusal> {
        let settings = if json.trim().is_empty() {
            Self::Settings::default()
        } else {
            serde_json::from_str(json)
                .map_err(|e| Refusal::new(format!("invalid settings: {e}")))?
        };
        self.configure(settings)
    }

    /// Order of pending units: a permutation of indices into `units`, with
    /// every node and queue in `view`. Default: by arrival time, then id
    /// (FIFO).
    fn queue_order(&self, _now_ms: u64, units: &[Queued], _view: &View) -> Vec<u32> {
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
