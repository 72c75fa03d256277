//! Interface 0.2: the node row carries zone, rack and host ids.

use super::shapes::shared_shapes;
use crate::bindings::v0_2::dragon::scheduler::types as v;
use crate::view::{ClusterView, Delta, JobStats, NodeRow};
use crate::wit;

/// The rows `delta` names, as the policy receives them.
pub(crate) fn changes(view: &dyn ClusterView, delta: &Delta) -> v::Changes {
    v::Changes {
        reset: delta.reset,
        count: delta.count,
        nodes: delta
            .indices
            .iter()
            .map(|&index| v::NodeChange {
                index,
                node: node(view.node(index)),
            })
            .collect(),
    }
}

fn node(row: NodeRow) -> v::Node {
    v::Node {
        allocatable: resources(row.allocatable),
        free: resources(row.free),
        open: row.open,
        zone: row.zone,
        rack: row.rack,
        host: row.host,
    }
}

fn stats(s: JobStats) -> v::JobStats {
    v::JobStats {
        attained_gpu_ms: s.attained_gpu_ms,
        running_ms: s.running_ms,
        restarts: s.restarts,
        placed_workers: s.placed_workers,
        requested_workers: s.requested_workers,
        progress_permille: s.progress_permille,
    }
}

shared_shapes!();
