//! The scheduling framework: the cycle that calls a policy's hooks over a
//! cluster snapshot, and the periodic scale step. It knows nothing of
//! Kubernetes or of simulated time, and reads no clock: drivers (the
//! simulator, the shim) feed the snapshot, send the calls a round or a
//! scale step plans, and settle their answers through one path
//! (`Scheduler::settle_round`, `settle_effects`, `settle_scale`).
//!
//! What a driver feeds:
//! - `model`: nodes, pods and jobs; `names`, [`key`](ObjectKey): what they
//!   are keyed by; `constraints`, `selector`, [`quantity`]: what a pod asks
//!   of a node; [`devices`], [`volumes`]: Dynamic Resource Allocation and
//!   PersistentVolumes; `teams`: queues that share the cluster.
//! - `cluster`: the snapshot drivers change only through typed ops
//!   ([`ClusterOp`]), and the view a policy reads.
//!
//! What decides:
//! - `cycle`: one round (queue order, pre-filter, built-in filters and the
//!   policy's, score, reserve, permit; preemption and reclaim), planned as a
//!   [`PlannedRound`]; `queue`: which pending units a round tries and when
//!   they are tried again; `unit`: a gang or a lone pod.
//! - `filters`, `preferences`: kube-scheduler's built-in filters and soft
//!   constraints; `scale`: the periodic scale step and its resize limits.
//! - `breaker`: a policy that keeps failing is suspended.
//!
//! How it is driven and checked:
//! - `io`, `drive`: the calls a decision needs and the synchronous driver
//!   that makes them; [`record`]: recordings and replay; [`gate`]: the check
//!   before a policy swap; [`shadow`]: a candidate deciding beside the
//!   serving policy; [`share`]: what each queue got of its guarantee;
//!   [`logging`]: log set-up for both binaries; [`testing`]: fixtures for
//!   tests outside the crate.

mod breaker;
mod cluster;
mod constraints;
mod cycle;
pub mod devices;
mod drive;
mod filters;
#[cfg(test)]
mod fixtures;
pub mod gate;
mod io;
mod key;
pub mod logging;
mod model;
mod names;
mod preferences;
pub mod quantity;
mod queue;
pub mod record;
mod scale;
mod selector;
pub mod shadow;
pub mod share;
mod teams;
pub mod testing;
mod unit;
pub mod volumes;

pub use breaker::{BreakerChange, BreakerConfig};
pub use cluster::journal::ClusterOp;
pub use cluster::topology::{
    DEFAULT_LEVELS, HOSTNAME_LEVEL, LevelsError, MAX_LEVELS, TopologyConstraint, TopologyMode,
    check_levels,
};
pub use cluster::view::{GPU_PRODUCT, HOST_LABEL, RACK_LABEL, ZONE_LABEL};
pub use cluster::{Cluster, ClusterError, PodState};
pub use constraints::{
    ALL_HOST_IPS, Constraints, HostPort, PodAffinityTerm, PreferredTerm, SpreadConstraint,
    WeightedPodAffinityTerm,
};
pub use cycle::{
    BindGroup, Decision, DeferAt, PlannedRound, PodBind, Prebind, RoundBudget, RoundReport,
    Scheduler, SchedulerConfig, Unbounded, Unschedulable,
};
pub use drive::{WallBudget, apply_effects};
pub use io::{
    Answers, ApiError, ApiErrorKind, Binder, Effect, Eviction, RecordingIo, Release, ScaleCause,
    ScaleRequest, Scaler,
};
pub use key::{NotNamespaced, ObjectKey};
pub use model::{
    BadSpeedup, Demand, DisruptionBudget, Job, MAX_SPEEDUP_ENTRIES, Node, Pod, Preemption,
    Resources, Role, Scalars, Speedup, Taint, TaintEffect, Toleration, TolerationOperator,
};
pub use names::{JobKey, NodeName, PodKey, QueueName};
pub use queue::{Flush, Wake};
pub use scale::{Held, HeldResize, ResizeLimits, ScaleAction, ScaleReport};
pub use selector::{
    LabelSelector, Labels, NODE_NAME_FIELD, NodeSelector, NodeSelectorTerm, Operator, Requirement,
};
pub use teams::{MAX_QUEUES, QueueSpec, QueuesError, check_queues, parent_indices, subtree_sums};
pub use unit::{UnitKey, subject};
