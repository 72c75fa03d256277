//! The scheduling framework: the cycle that calls a policy's hooks over a
//! cluster snapshot, and the periodic scale step. It knows nothing of
//! Kubernetes or of simulated time: drivers (the simulator, the shim) feed
//! the snapshot and supply a [`Binder`] and a [`Scaler`].

mod breaker;
mod cluster;
mod constraints;
mod cycle;
mod filters;
#[cfg(test)]
mod fixtures;
pub mod gate;
mod io;
mod journal;
pub mod logging;
mod model;
mod preemption;
mod preferences;
mod queue;
pub mod record;
mod scale;
mod selector;
pub mod shadow;
mod unit;
mod view;

pub use breaker::{BreakerChange, BreakerConfig};
pub use cluster::{Cluster, ClusterError, PodState};
pub use constraints::{
    ALL_HOST_IPS, Constraints, HostPort, PodAffinityTerm, PreferredTerm, SpreadConstraint,
    WeightedPodAffinityTerm,
};
pub use cycle::{Decision, PlannedRound, RoundReport, Scheduler, SchedulerConfig};
pub use io::{
    Answers, ApiError, ApiErrorKind, Binder, Effect, Eviction, RecordingIo, Release, ScaleCause,
    ScaleRequest, Scaler,
};
pub use journal::ClusterOp;
pub use model::{
    Demand, DisruptionBudget, Job, Node, Pod, Preemption, Resources, Role, Scalars, Taint,
    Toleration,
};
pub use scale::{ScaleAction, ScaleReport};
pub use selector::{
    LabelSelector, Labels, NODE_NAME_FIELD, NodeSelector, NodeSelectorTerm, Operator, Requirement,
};
pub use unit::{UnitKey, subject};
pub use view::{HOST_LABEL, RACK_LABEL, ZONE_LABEL};
