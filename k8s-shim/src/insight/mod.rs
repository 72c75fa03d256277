//! What dragon-scheduler answers about its own state, for `kubectl dragon`:
//! why a pod waits (each round's reason, what would unblock it, an
//! estimated start), what runs where (`top`) and which policy serves.
//!
//! The answers are the wire format between `/dragon/v1/...` on the HTTP
//! endpoint and the `kubectl-dragon` binary, so both build from these
//! types. Every question is authorized as the asker ([`access`]): a pod's
//! story only for who may read the pod.

pub mod access;
pub mod estimate;
pub mod serve;
pub mod story;

use serde::{Deserialize, Serialize};

pub use estimate::EstimateConfig;
pub use story::Stories;

/// Where the questions are asked, under the HTTP endpoint.
pub const PREFIX: &str = "/dragon/v1";

/// A question for the scheduling loop, which owns what answers it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Question {
    /// Why pod `namespace/name` waits (or where it runs).
    Why { pod: String },
    /// Gangs, queues and GPU use; only `namespace`'s gangs when given.
    Top {
        namespace: Option<String>,
        nodes: bool,
    },
}

/// Why a pod waits, or where it runs.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Why {
    pub pod: String,
    /// The `schedulerName` of the pods this scheduler places.
    #[serde(default)]
    pub scheduler_name: String,
    /// The gang it belongs to (`namespace/podgroup`), if any.
    #[serde(default)]
    pub gang: Option<String>,
    /// `pending`, `bound` or `held` (refused before any round, see `now`).
    pub state: String,
    /// The node it is bound to.
    #[serde(default)]
    pub node: Option<String>,
    /// Why it waits now: the last round's reason.
    #[serde(default)]
    pub now: Option<String>,
    /// The reasons of the rounds that tried it, oldest first (a reason is
    /// written once however many rounds gave it, with how many did).
    #[serde(default)]
    pub story: Vec<Chapter>,
    /// The scheduling gates that hold it (its own or its gang's pods').
    #[serde(default)]
    pub gates: Vec<String>,
    /// The nodes closest to fitting one of its pods, closest first, each
    /// with what it lacks.
    #[serde(default)]
    pub closest: Vec<Closest>,
    /// Why preemption did not place it, when it was looked for.
    #[serde(default)]
    pub preemption: Option<String>,
    /// When it may start.
    #[serde(default)]
    pub estimate: Option<Estimate>,
}

/// One reason, as long as the rounds kept giving it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Chapter {
    /// The first round that gave it, ms since the epoch.
    pub since_ms: u64,
    /// The last, ms since the epoch.
    pub until_ms: u64,
    /// How many rounds gave it.
    pub rounds: u32,
    pub reason: String,
}

/// A node and what it lacks for one of the pod's members.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Closest {
    pub node: String,
    /// What is short, e.g. `2 of 4 GPUs free`; empty when the resources
    /// fit (another filter rejects it).
    pub short: Vec<String>,
}

/// An estimated start, from the scheduler's cluster played forward in the
/// simulator under the serving policy.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Estimate {
    /// When the estimate was made, ms since the epoch.
    pub made_ms: u64,
    /// When the gang starts in the played-forward cluster, ms since the
    /// epoch; none when it does not start within the horizon.
    pub start_ms: Option<u64>,
    /// What the simulation assumed (what the cluster does not know).
    pub assumed: String,
    /// Why there is no estimate (a lone pod, or a simulation that failed).
    #[serde(default)]
    pub unavailable: Option<String>,
}

/// Gangs, queues and nodes.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Top {
    pub gangs: Vec<GangRow>,
    pub queues: Vec<QueueUse>,
    /// Per node; empty when the asker may not list nodes.
    pub nodes: Vec<NodeUse>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GangRow {
    pub gang: String,
    #[serde(default)]
    pub queue: Option<String>,
    /// `running`, `partly bound` or `waiting`.
    pub state: String,
    pub bound: u32,
    pub pods: u32,
    /// GPUs its bound pods hold.
    pub gpus: u64,
    /// Nodes its bound pods are on.
    pub nodes: u32,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueueUse {
    pub queue: String,
    pub used_gpus: u32,
    pub demand_gpus: u32,
    pub guaranteed_gpus: u32,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeUse {
    pub node: String,
    pub used_gpus: u32,
    pub gpus: u32,
    pub pods: u32,
}

/// The policy serving, the shadow, and the last reloads.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PolicyState {
    pub scheduler_name: String,
    pub serving: Serving,
    #[serde(default)]
    pub shadow: Option<ShadowSummary>,
    /// Newest last.
    pub reloads: Vec<ReloadRecord>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Serving {
    pub name: String,
    pub version: String,
    pub interface: String,
    pub origin: String,
    pub sha256: String,
}

/// The shadow policy's totals (`/shadow` has its disagreements).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShadowSummary {
    pub policy: String,
    pub same: u64,
    pub different: u64,
    pub errors: u64,
    pub skipped: u64,
    #[serde(default)]
    pub last_errors: Vec<String>,
}

/// One reload: when, how it ended, and what was said about it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReloadRecord {
    pub at_ms: u64,
    /// `success`, `failure`, `gated` or `gate_error`.
    pub result: String,
    pub detail: String,
}

/// The most reloads kept for `policy`.
pub const MAX_RELOADS_KEPT: usize = 16;

/// An error answer: the status says which kind.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Refusal {
    pub error: String,
    /// The `schedulerName` of the pods this scheduler places.
    #[serde(default)]
    pub scheduler_name: String,
}
