//! The scheduling framework: the cycle that calls a policy's hooks over a
//! cluster snapshot, and the periodic scale step. It knows nothing of
//! Kubernetes or of simulated time, and reads no clock: drivers (the
//! simulator, the shim) feed the snapshot, send the calls a round or a
//! scale step plans, and settle their answers through one path
//! (`Scheduler::settle_round`, `settle_effects`, `settle_scale`).

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
pub use cluster::view::{HOST_LABEL, RACK_LABEL, ZONE_LABEL};
pub use cluster::{Cluster, ClusterError, PodState};
pub use constraints::{
    ALL_HOST_IPS, Constraints, HostPort, PodAffinityTerm, PreferredTerm, SpreadConstraint,
    WeightedPodAffinityTerm,
};
pub use cycle::{
    Decision, DeferAt, PlannedRound, RoundBudget, RoundReport, Scheduler, SchedulerConfig,
    Unbounded, Unschedulable,
};
pub use drive::{WallBudget, apply_effects};
pub use io::{
    Answers, ApiError, ApiErrorKind, Binder, Effect, Eviction, RecordingIo, Release, ScaleCause,
    ScaleRequest, Scaler,
};
pub use key::{NotNamespaced, ObjectKey};
pub use model::{
    Demand, DisruptionBudget, Job, Node, Pod, Preemption, Resources, Role, Scalars, Taint,
    TaintEffect, Toleration, TolerationOperator,
};
pub use names::{JobKey, NodeName, PodKey, QueueName};
pub use queue::Flush;
pub use scale::{Held, HeldResize, ResizeLimits, ScaleAction, ScaleReport};
pub use selector::{
    LabelSelector, Labels, NODE_NAME_FIELD, NodeSelector, NodeSelectorTerm, Operator, Requirement,
};
pub use teams::{MAX_QUEUES, QueueSpec, QueuesError, check_queues, parent_indices, subtree_sums};
pub use unit::{UnitKey, subject};
