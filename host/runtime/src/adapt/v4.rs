//! Interface 0.4: 0.3 with each node's GPU type in its row and each
//! running or waiting job's speed-up by worker count in the scale step.

use super::shapes::{levelled_shapes, shared_shapes};
use crate::bindings::v0_4::dragon::scheduler::types as v;
use crate::view::{ClusterView, Delta, JobStats, QueueRow};
use crate::wit;

/// Node `index`'s GPU type, as its row carries it.
fn gpu_type(view: &dyn ClusterView, index: u32) -> Option<String> {
    view.gpu_type(index).map(str::to_string)
}

/// The speed-up of unit `id`'s job by worker count (empty: not known).
fn speedup(view: &dyn ClusterView, id: u64) -> Vec<u32> {
    view.speedup(id).to_vec()
}

levelled_shapes!(gpu_type);
shared_shapes!(speedup);
