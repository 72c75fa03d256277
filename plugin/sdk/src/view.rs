//! The policy's copy of the cluster's nodes, kept current by the changes
//! every node-aware call carries. Authors read it; the SDK applies the
//! changes before a hook runs.

use crate::types::{Changes, Node, Queue, Resources};

/// A node's index in the cluster: what `Candidates::index` holds and what a
/// [`View`]'s rows are read by. Plain `u32` and `usize` indices convert.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct NodeIndex(pub u32);

impl NodeIndex {
    /// The index as a position in a column.
    pub fn get(self) -> usize {
        self.0 as usize
    }
}

impl From<u32> for NodeIndex {
    fn from(i: u32) -> NodeIndex {
        NodeIndex(i)
    }
}

impl From<usize> for NodeIndex {
    /// Node counts are bounded far below `u32::MAX` by the interface.
    fn from(i: usize) -> NodeIndex {
        NodeIndex(i as u32)
    }
}

/// Allocatable and free resources of nodes as parallel columns: element `i`
/// of every list describes node `i`. Columns keep a scan over thousands of
/// nodes to a few tight loops.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Capacity {
    pub alloc_cpu_milli: Vec<u64>,
    pub alloc_memory_mib: Vec<u64>,
    pub alloc_gpus: Vec<u32>,
    pub free_cpu_milli: Vec<u64>,
    pub free_memory_mib: Vec<u64>,
    pub free_gpus: Vec<u32>,
    /// Each node's GPU type as a number: equal on nodes of one type, 0 on
    /// nodes of none (see [`View::gpu_type`] for its name).
    pub gpu_kinds: Vec<u32>,
}

impl Capacity {
    /// Number of nodes described.
    pub fn len(&self) -> usize {
        self.free_gpus.len()
    }

    /// True when no node is described.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Free resources of node `i`.
    pub fn free(&self, i: usize) -> Resources {
        Resources {
            cpu_milli: self.free_cpu_milli[i],
            memory_mib: self.free_memory_mib[i],
            gpus: self.free_gpus[i],
        }
    }

    /// Free resources of every node, in order. Cheaper than calling
    /// [`Capacity::free`] per index in a hot loop: no bounds checks, and
    /// fewer live values for the wasm compiler to keep in registers.
    pub fn free_iter(&self) -> impl Iterator<Item = Resources> + '_ {
        self.free_cpu_milli
            .iter()
            .zip(&self.free_memory_mib)
            .zip(&self.free_gpus)
            .map(|((&cpu_milli, &memory_mib), &gpus)| Resources {
                cpu_milli,
                memory_mib,
                gpus,
            })
    }

    /// Allocatable resources of node `i`.
    pub fn allocatable(&self, i: usize) -> Resources {
        Resources {
            cpu_milli: self.alloc_cpu_milli[i],
            memory_mib: self.alloc_memory_mib[i],
            gpus: self.alloc_gpus[i],
        }
    }

    /// Set node `i`'s free resources.
    pub fn set_free(&mut self, i: usize, r: Resources) {
        self.free_cpu_milli[i] = r.cpu_milli;
        self.free_memory_mib[i] = r.memory_mib;
        self.free_gpus[i] = r.gpus;
    }

    /// Set node `i`'s allocatable resources.
    pub fn set_allocatable(&mut self, i: usize, r: Resources) {
        self.alloc_cpu_milli[i] = r.cpu_milli;
        self.alloc_memory_mib[i] = r.memory_mib;
        self.alloc_gpus[i] = r.gpus;
    }

    /// Keep `n` nodes (new ones have nothing).
    pub fn resize(&mut self, n: usize) {
        self.alloc_cpu_milli.resize(n, 0);
        self.alloc_memory_mib.resize(n, 0);
        self.alloc_gpus.resize(n, 0);
        self.free_cpu_milli.resize(n, 0);
        self.free_memory_mib.resize(n, 0);
        self.free_gpus.resize(n, 0);
        self.gpu_kinds.resize(n, 0);
    }
}

/// Every node of the cluster, by index: resources as [`Capacity`] columns,
/// whether it is open to new pods, its GPU type, and its domain at every
/// topology level
/// as interned ids (0 when the node lacks the level's label); and the
/// queues (teams) sharing the cluster, as they stood at the last call that
/// carried them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct View {
    capacity: Capacity,
    open: Vec<bool>,
    /// Each node's GPU type (its `nvidia.com/gpu.product` label).
    gpu_types: Vec<Option<String>>,
    /// The GPU types seen, numbered from 1 in [`Capacity::gpu_kinds`].
    kinds: Vec<String>,
    /// The levels' label keys, widest first, the hostname last.
    levels: Vec<String>,
    /// Node `i`'s domain at level `l` is `domains[i * levels.len() + l]`.
    domains: Vec<u32>,
    queues: Vec<Queue>,
}

/// The level every list of topology levels ends with.
pub const HOSTNAME_LEVEL: &str = "kubernetes.io/hostname";

impl View {
    /// A view of `nodes`, node `i` at index `i`, each its own host (the
    /// only level), and no queues (for tests).
    pub fn of(nodes: &[Node]) -> View {
        let hosts: Vec<u32> = (1..=nodes.len() as u32).collect();
        View::with_levels(&[HOSTNAME_LEVEL], nodes, &hosts)
    }

    /// A view of `nodes` with the topology levels `levels`, node `i`'s
    /// domains at `domains[i × levels.len() ..]` (for tests).
    pub fn with_levels(levels: &[&str], nodes: &[Node], domains: &[u32]) -> View {
        let mut v = View::default();
        v.apply(&Changes {
            reset: true,
            count: nodes.len() as u32,
            nodes: nodes
                .iter()
                .enumerate()
                .map(|(i, n)| crate::types::NodeChange {
                    index: i as u32,
                    node: n.clone(),
                })
                .collect(),
            levels: levels.iter().map(|l| l.to_string()).collect(),
            domains: domains.to_vec(),
            queues: None,
        });
        v
    }

    /// Apply what changed. Indices at or past `changes.count` are ignored:
    /// the host never sends them; so are domains beyond the levels.
    pub fn apply(&mut self, changes: &Changes) {
        if changes.reset {
            *self = View::default();
            self.levels = changes.levels.clone();
        }
        let n = changes.count as usize;
        let width = self.levels.len();
        self.capacity.resize(n);
        self.open.resize(n, false);
        self.gpu_types.resize(n, None);
        self.domains.resize(n * width, 0);
        for (k, c) in changes.nodes.iter().enumerate() {
            let i = c.index as usize;
            if i >= n {
                continue;
            }
            self.capacity.set_allocatable(i, c.node.allocatable);
            self.capacity.set_free(i, c.node.free);
            self.open[i] = c.node.open;
            self.gpu_types[i].clone_from(&c.node.gpu_type);
            self.capacity.gpu_kinds[i] = match &c.node.gpu_type {
                None => 0,
                Some(t) => match self.kinds.iter().position(|k| k == t) {
                    Some(k) => k as u32 + 1,
                    None => {
                        self.kinds.push(t.clone());
                        self.kinds.len() as u32
                    }
                },
            };
            let row = &mut self.domains[i * width..(i + 1) * width];
            let sent = changes.domains.get(k * width..(k + 1) * width);
            match sent {
                Some(sent) => row.copy_from_slice(sent),
                None => row.fill(0),
            }
        }
        if let Some(queues) = &changes.queues {
            self.queues = queues.clone();
        }
    }

    /// Number of nodes.
    pub fn len(&self) -> usize {
        self.capacity.len()
    }

    /// True when the cluster has no nodes.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Resources of every node as columns.
    pub fn capacity(&self) -> &Capacity {
        &self.capacity
    }

    /// Free resources of node `i`.
    pub fn free(&self, i: impl Into<NodeIndex>) -> Resources {
        let i = i.into().get();
        self.capacity.free(i)
    }

    /// Allocatable resources of node `i`.
    pub fn allocatable(&self, i: impl Into<NodeIndex>) -> Resources {
        let i = i.into().get();
        self.capacity.allocatable(i)
    }

    /// Node `i` as one record.
    pub fn node(&self, i: impl Into<NodeIndex>) -> Node {
        let i = i.into().get();
        Node {
            allocatable: self.allocatable(i),
            free: self.free(i),
            open: self.open[i],
            gpu_type: self.gpu_types[i].clone(),
        }
    }

    /// Whether node `i` takes new pods.
    pub fn open(&self, i: impl Into<NodeIndex>) -> bool {
        let i = i.into().get();
        self.open[i]
    }

    /// Node `i`'s GPU type (its `nvidia.com/gpu.product` label), if it
    /// has one.
    pub fn gpu_type(&self, i: impl Into<NodeIndex>) -> Option<&str> {
        self.gpu_types[i.into().get()].as_deref()
    }

    /// The topology levels' label keys, widest first, the hostname last.
    pub fn levels(&self) -> &[String] {
        &self.levels
    }

    /// The position of the level with label key `key`, if configured.
    pub fn level(&self, key: &str) -> Option<usize> {
        self.levels.iter().position(|l| l == key)
    }

    /// Node `i`'s domain at every level.
    pub fn domains_of(&self, i: impl Into<NodeIndex>) -> &[u32] {
        let (i, w) = (i.into().get(), self.levels.len());
        &self.domains[i * w..(i + 1) * w]
    }

    /// Node `i`'s domain at level `level` (0: no label, or no such level).
    pub fn domain(&self, i: impl Into<NodeIndex>, level: usize) -> u32 {
        self.domains_of(i).get(level).copied().unwrap_or(0)
    }

    /// Node `i`'s host id (its domain at the last level; 0 without levels).
    pub fn host(&self, i: impl Into<NodeIndex>) -> u32 {
        self.domains_of(i).last().copied().unwrap_or(0)
    }

    /// The queues sharing the cluster (empty: none), as the last
    /// `queue-order`, `pre-filter` or `scale` call carried them.
    pub fn queues(&self) -> &[Queue] {
        &self.queues
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::NodeChange;

    fn node(gpus: u32) -> Node {
        let r = Resources {
            cpu_milli: 1_000,
            memory_mib: 1_024,
            gpus,
        };
        Node {
            allocatable: r,
            free: r,
            open: true,
            gpu_type: None,
        }
    }

    const LEVELS: [&str; 2] = ["topology.kubernetes.io/zone", HOSTNAME_LEVEL];

    #[test]
    fn changes_update_rows_and_domains_resize_and_reset() {
        let mut v = View::with_levels(&LEVELS, &[node(4), node(8)], &[1, 1, 2, 2]);
        assert_eq!(v.len(), 2);
        assert_eq!(v.level(HOSTNAME_LEVEL), Some(1));
        v.apply(&Changes {
            reset: false,
            count: 3,
            nodes: vec![NodeChange {
                index: 2,
                node: node(2),
            }],
            levels: Vec::new(),
            domains: vec![1, 3],
            queues: None,
        });
        assert_eq!(v.len(), 3);
        assert_eq!(v.free(1usize).gpus, 8, "untouched rows stay");
        assert_eq!(v.domains_of(1usize), [2, 2], "untouched domains stay");
        assert_eq!(v.node(2usize), node(2));
        assert_eq!((v.domain(2usize, 0), v.host(2usize)), (1, 3));
        v.apply(&Changes {
            reset: true,
            count: 1,
            nodes: vec![NodeChange {
                index: 0,
                node: node(1),
            }],
            levels: LEVELS.iter().map(|l| l.to_string()).collect(),
            domains: vec![3, 1],
            queues: None,
        });
        assert_eq!(v, View::with_levels(&LEVELS, &[node(1)], &[3, 1]));
    }

    #[test]
    fn queues_stay_until_a_call_carries_them_again() {
        let mut v = View::of(&[node(4)]);
        let q = Queue {
            name: "a".into(),
            parent: None,
            weight_milli: 1_000,
            guaranteed_gpus: 4,
            borrowing_limit_gpus: None,
            used_gpus: 2,
            demand_gpus: 6,
        };
        let mut changes = Changes {
            reset: false,
            count: 1,
            nodes: Vec::new(),
            levels: Vec::new(),
            domains: Vec::new(),
            queues: Some(vec![q.clone()]),
        };
        v.apply(&changes);
        changes.queues = None;
        v.apply(&changes);
        assert_eq!(v.queues(), [q]);
    }
}
