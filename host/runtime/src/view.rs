//! What a hook call may consult beyond its arguments: the cluster's nodes
//! with a log of which rows changed, and each job's history. Policies built
//! against interface 0.2 keep their own copy of the nodes; the host sends
//! them the rows this log names (see [`Delta`]).

use std::sync::atomic::{AtomicU64, Ordering};

use crate::wit;

/// No resources.
pub const NOTHING: wit::Resources = wit::Resources {
    cpu_milli: 0,
    memory_mib: 0,
    gpus: 0,
};

/// One node's row.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NodeRow {
    pub allocatable: wit::Resources,
    pub free: wit::Resources,
    /// False when no new pod may go there.
    pub open: bool,
    /// Interned topology label values, 0 when absent.
    pub zone: u32,
    pub rack: u32,
    pub host: u32,
}

impl Default for NodeRow {
    /// A node with nothing, closed.
    fn default() -> NodeRow {
        NodeRow {
            allocatable: NOTHING,
            free: NOTHING,
            open: false,
            zone: 0,
            rack: 0,
            host: 0,
        }
    }
}

/// A job's history, as interface 0.2's `job-stats` describes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct JobStats {
    pub attained_gpu_ms: u64,
    pub running_ms: u64,
    pub restarts: u32,
    pub placed_workers: u32,
    pub requested_workers: u32,
    pub progress_permille: Option<u32>,
    /// The job's queue: an index into [`ClusterView::queues`].
    pub queue: Option<u32>,
}

/// A queue (team) as interface 0.3's `queue` describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueRow {
    pub name: String,
    /// Index of its parent queue.
    pub parent: Option<u32>,
    pub weight_milli: u32,
    pub guaranteed_gpus: u32,
    pub borrowing_limit_gpus: Option<u32>,
    /// GPUs its jobs' pods hold (bound or reserved).
    pub used_gpus: u32,
    /// GPUs its jobs ask for at their requested sizes, held or not.
    pub demand_gpus: u32,
}

/// The cluster as policies that keep a view see it.
pub trait ClusterView {
    /// Identifies the change log: a view with another id is another log
    /// (another cluster, or a copy of one), and whoever follows it starts over.
    fn log_id(&self) -> u64;
    /// Position just past the newest log entry.
    fn log_end(&self) -> u64;
    /// Node indices changed since position `since` (repeats possible), or
    /// `None` when the log no longer reaches back that far.
    fn changed_since(&self, since: u64) -> Option<&[u32]>;
    /// Nodes in the cluster (indices `0..count`).
    fn node_count(&self) -> u32;
    /// Node `index`'s row (`index < node_count()`).
    fn node(&self, index: u32) -> NodeRow;
    /// The history of the job behind unit `unit` (zero for a lone pod).
    fn job_stats(&self, now_ms: u64, unit: u64) -> JobStats;
    /// In `score`: how much the pod's soft constraints favour each
    /// candidate (empty when it has none).
    fn preference(&self) -> &[u32] {
        &[]
    }
    /// The topology levels' label keys, widest first (empty: none known).
    fn levels(&self) -> &[String] {
        &[]
    }
    /// Node `index`'s domain id at each of [`ClusterView::levels`], pushed
    /// onto `out` (0 where it carries no label).
    fn domains(&self, _index: u32, _out: &mut Vec<u32>) {}
    /// The queues jobs belong to, as they stand now.
    fn queues(&self) -> Vec<QueueRow> {
        Vec::new()
    }
    /// Node `index`'s GPU type (its `nvidia.com/gpu.product` label), if
    /// it has one.
    fn gpu_type(&self, _index: u32) -> Option<&str> {
        None
    }
    /// How fast the job behind unit `unit` trains by worker count, as
    /// interface 0.4's `speedup` describes it (empty: not known).
    fn speedup(&self, _unit: u64) -> &[u32] {
        &[]
    }
}

/// A fresh id for a change log.
pub fn new_log_id() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// How far a follower of a log has read it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Seen {
    log: u64,
    at: u64,
}

/// The rows to send a follower that has read up to `seen`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delta {
    /// Start over: `indices` is every node.
    pub reset: bool,
    pub count: u32,
    /// Changed rows, ascending, each once.
    pub indices: Vec<u32>,
    /// Where the follower stands once it has applied this delta.
    pub seen: Seen,
}

impl Delta {
    /// What a follower at `seen` (`None`: it has nothing) must apply to be
    /// current with `view`.
    pub fn since(view: &dyn ClusterView, seen: Option<Seen>) -> Delta {
        let count = view.node_count();
        let now = Seen {
            log: view.log_id(),
            at: view.log_end(),
        };
        let changed = seen
            .filter(|s| s.log == now.log && s.at <= now.at)
            .and_then(|s| view.changed_since(s.at));
        match changed {
            Some(changed) => {
                let mut indices: Vec<u32> =
                    changed.iter().copied().filter(|&i| i < count).collect();
                indices.sort_unstable();
                indices.dedup();
                Delta {
                    reset: false,
                    count,
                    indices,
                    seen: now,
                }
            }
            None => Delta {
                reset: true,
                count,
                indices: (0..count).collect(),
                seen: now,
            },
        }
    }
}

/// A view that never changes: nodes from capacity columns, no topology and
/// no job history. For calls made outside a cluster (tests, benchmarks,
/// `dragon policy run` cases).
#[derive(Debug, Clone)]
pub struct FixedView {
    id: u64,
    rows: Vec<NodeRow>,
}

/// The one topology level a [`FixedView`] knows: each node is its own host.
static HOSTNAME_ONLY: std::sync::LazyLock<[String; 1]> =
    std::sync::LazyLock::new(|| ["kubernetes.io/hostname".to_string()]);

impl FixedView {
    /// No nodes.
    pub fn empty() -> FixedView {
        FixedView {
            id: new_log_id(),
            rows: Vec::new(),
        }
    }

    /// Every node of `capacity`, open.
    pub fn from_capacity(capacity: &wit::Capacity) -> FixedView {
        let c = capacity;
        let n = c
            .free_gpus
            .len()
            .min(c.free_cpu_milli.len())
            .min(c.free_memory_mib.len())
            .min(c.alloc_cpu_milli.len())
            .min(c.alloc_memory_mib.len())
            .min(c.alloc_gpus.len());
        let rows = (0..n)
            .map(|i| NodeRow {
                allocatable: wit::Resources {
                    cpu_milli: c.alloc_cpu_milli[i],
                    memory_mib: c.alloc_memory_mib[i],
                    gpus: c.alloc_gpus[i],
                },
                free: wit::Resources {
                    cpu_milli: c.free_cpu_milli[i],
                    memory_mib: c.free_memory_mib[i],
                    gpus: c.free_gpus[i],
                },
                open: true,
                ..NodeRow::default()
            })
            .collect();
        FixedView {
            id: new_log_id(),
            rows,
        }
    }

    /// The nodes of candidate columns placed at their cluster indices (the
    /// rest empty and closed).
    pub fn from_candidates(nodes: &wit::Candidates) -> FixedView {
        let listed = FixedView::from_capacity(&nodes.capacity);
        let count = nodes
            .index
            .iter()
            .map(|&i| i as usize + 1)
            .max()
            .unwrap_or(0);
        let mut rows = vec![NodeRow::default(); count];
        for (row, &i) in listed.rows.into_iter().zip(&nodes.index) {
            rows[i as usize] = row;
        }
        FixedView {
            id: listed.id,
            rows,
        }
    }
}

impl ClusterView for FixedView {
    fn log_id(&self) -> u64 {
        self.id
    }
    fn log_end(&self) -> u64 {
        0
    }
    fn changed_since(&self, since: u64) -> Option<&[u32]> {
        (since == 0).then_some(&[])
    }
    fn node_count(&self) -> u32 {
        self.rows.len() as u32
    }
    fn node(&self, index: u32) -> NodeRow {
        self.rows.get(index as usize).copied().unwrap_or_default()
    }
    fn job_stats(&self, _now_ms: u64, _unit: u64) -> JobStats {
        JobStats::default()
    }
    fn levels(&self) -> &[String] {
        HOSTNAME_ONLY.as_slice()
    }
    fn domains(&self, index: u32, out: &mut Vec<u32>) {
        out.push(index + 1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A log over `n` nodes that records every write.
    struct Logged {
        id: u64,
        n: u32,
        base: u64,
        entries: Vec<u32>,
    }

    impl ClusterView for Logged {
        fn log_id(&self) -> u64 {
            self.id
        }
        fn log_end(&self) -> u64 {
            self.base + self.entries.len() as u64
        }
        fn changed_since(&self, since: u64) -> Option<&[u32]> {
            let from = since.checked_sub(self.base)? as usize;
            self.entries.get(from..)
        }
        fn node_count(&self) -> u32 {
            self.n
        }
        fn node(&self, _index: u32) -> NodeRow {
            NodeRow::default()
        }
        fn job_stats(&self, _now_ms: u64, _unit: u64) -> JobStats {
            JobStats::default()
        }
    }

    #[test]
    fn a_follower_gets_everything_first_then_each_changed_row_once() {
        let mut log = Logged {
            id: new_log_id(),
            n: 4,
            base: 0,
            entries: vec![3, 1],
        };
        let first = Delta::since(&log, None);
        assert!(first.reset);
        assert_eq!(first.indices, [0, 1, 2, 3]);
        log.entries.extend([2, 0, 2]);
        let next = Delta::since(&log, Some(first.seen));
        assert!(!next.reset);
        assert_eq!(next.indices, [0, 2]);
        let idle = Delta::since(&log, Some(next.seen));
        assert!(!idle.reset && idle.indices.is_empty());
    }

    #[test]
    fn a_follower_starts_over_on_another_log_or_one_that_dropped_its_past() {
        let mut log = Logged {
            id: new_log_id(),
            n: 2,
            base: 0,
            entries: vec![1],
        };
        let seen = Delta::since(&log, None).seen;
        log.base = 10;
        log.entries = vec![0];
        assert!(Delta::since(&log, Some(seen)).reset, "the log was trimmed");
        let other = FixedView::from_capacity(&wit::Capacity {
            alloc_cpu_milli: vec![1],
            alloc_memory_mib: vec![1],
            alloc_gpus: vec![1],
            free_cpu_milli: vec![1],
            free_memory_mib: vec![1],
            free_gpus: vec![1],
        });
        let d = Delta::since(&other, Some(seen));
        assert!(d.reset, "another log");
        assert_eq!(d.indices, [0]);
    }
}
