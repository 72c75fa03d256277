//! Interface 0.3: the node row carries its domain at every topology level,
//! and the changes carry the levels (with a reset) and the queues.

use super::shapes::shared_shapes;
use crate::bindings::v0_3::dragon::scheduler::types as v;
use crate::view::{ClusterView, Delta, JobStats, QueueRow};
use crate::wit;

/// The rows `delta` names, the levels when it resets the view, and the
/// queues when `queues` is given.
pub(crate) fn changes(
    view: &dyn ClusterView,
    delta: &Delta,
    queues: Option<&[QueueRow]>,
) -> v::Changes {
    let mut domains = Vec::with_capacity(delta.indices.len() * view.levels().len());
    v::Changes {
        reset: delta.reset,
        count: delta.count,
        nodes: delta
            .indices
            .iter()
            .map(|&index| {
                let row = view.node(index);
                view.domains(index, &mut domains);
                v::NodeChange {
                    index,
                    node: v::Node {
                        allocatable: resources(row.allocatable),
                        free: resources(row.free),
                        open: row.open,
                    },
                }
            })
            .collect(),
        domains,
        levels: if delta.reset {
            view.levels().to_vec()
        } else {
            Vec::new()
        },
        queues: queues.map(|rows| rows.iter().map(queue).collect()),
    }
}

fn queue(q: &QueueRow) -> v::Queue {
    v::Queue {
        name: q.name.clone(),
        parent: q.parent,
        weight_milli: q.weight_milli,
        guaranteed_gpus: q.guaranteed_gpus,
        borrowing_limit_gpus: q.borrowing_limit_gpus,
        used_gpus: q.used_gpus,
        demand_gpus: q.demand_gpus,
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
        queue: s.queue,
    }
}

shared_shapes!();
