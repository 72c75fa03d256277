//! The framework's built-in filters, as in kube-scheduler: unschedulable
//! nodes, node selector, taints and tolerations, resource fit.

use std::collections::BTreeMap;

use super::cluster::Cluster;
use super::model::Pod;
use crate::runtime::wit;

/// Why nodes were filtered out, counted per reason (kube's wording).
#[derive(Debug, Default)]
pub(crate) struct Rejections {
    counts: BTreeMap<&'static str, usize>,
}

impl Rejections {
    pub(crate) fn add(&mut self, reason: &'static str, n: usize) {
        if n > 0 {
            *self.counts.entry(reason).or_default() += n;
        }
    }

    /// `0/8 nodes are available: 3 Insufficient nvidia.com/gpu, ...`
    pub(crate) fn message(&self, live_nodes: usize) -> String {
        let parts: Vec<String> = self
            .counts
            .iter()
            .map(|(r, n)| format!("{n} {r}"))
            .collect();
        format!("0/{live_nodes} nodes are available: {}", parts.join(", "))
    }
}

/// The built-in filters' reasons, in kube's wording, indexed by [`Reason`].
const REASONS: [&str; 6] = [
    "node(s) were unschedulable",
    "node(s) didn't match Pod's node affinity/selector",
    "node(s) had untolerated taint",
    "Insufficient nvidia.com/gpu",
    "Insufficient cpu",
    "Insufficient memory",
];

#[derive(Clone, Copy)]
enum Reason {
    Unschedulable,
    Selector,
    Taint,
    Gpu,
    Cpu,
    Memory,
}

/// The filters other than the resource fit, for node `i`: `Err(None)` if
/// the node is gone. Out of line: most nodes skip it (see `Columns::open`).
#[inline(never)]
fn static_filters(cluster: &Cluster, pod: &Pod, i: usize) -> Result<(), Option<Reason>> {
    if !cluster.is_live(i) {
        return Err(None);
    }
    let node = &cluster.nodes()[i];
    if node.unschedulable {
        Err(Some(Reason::Unschedulable))
    } else if !pod
        .node_selector
        .iter()
        .all(|(k, v)| node.labels.get(k) == Some(v))
    {
        Err(Some(Reason::Selector))
    } else if node
        .taints
        .iter()
        .any(|t| t.repels() && !pod.tolerations.iter().any(|tol| tol.tolerates(t)))
    {
        Err(Some(Reason::Taint))
    } else {
        Ok(())
    }
}

/// Node indices that pass every built-in filter for `pod`.
pub(crate) fn feasible(cluster: &Cluster, pod: &Pod, rejections: &mut Rejections) -> Vec<u32> {
    // Counted in an array and handed over once: this runs per pod over
    // every node, and on a full cluster nearly every node is rejected.
    let mut counts = [0usize; REASONS.len()];
    let r = pod.request;
    let cols = cluster.columns();
    let n = cluster.nodes().len();
    let (open, cpu, memory, gpus) = (
        &cols.open[..n],
        &cols.free_cpu_milli[..n],
        &cols.free_memory_mib[..n],
        &cols.free_gpus[..n],
    );
    // Without a node selector an open node passes every filter but the fit:
    // the common case, decided on the columns alone.
    let plain = pod.node_selector.is_empty();
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        if !(plain && open[i]) {
            match static_filters(cluster, pod, i) {
                Ok(()) => {}
                Err(None) => continue,
                Err(Some(reason)) => {
                    counts[reason as usize] += 1;
                    continue;
                }
            }
        }
        if r.gpus > gpus[i] {
            counts[Reason::Gpu as usize] += 1;
        } else if r.cpu_milli > cpu[i] {
            counts[Reason::Cpu as usize] += 1;
        } else if r.memory_mib > memory[i] {
            counts[Reason::Memory as usize] += 1;
        } else {
            out.push(i as u32);
        }
    }
    for (reason, n) in REASONS.iter().zip(counts) {
        rejections.add(reason, n);
    }
    out
}

/// Candidate columns for the policy's `filter` and `score`, written into
/// `out`'s buffers. This runs once per pod over up to every node: fresh
/// columns each time cost more in page faults (the allocator hands the
/// memory back and takes it again) than the copying itself.
pub(crate) fn fill_candidates(
    cluster: &Cluster,
    index: &[u32],
    siblings: &[u32],
    out: &mut wit::Candidates,
) {
    let all = index.len() == cluster.nodes().len();
    // `index` is ascending without repeats, so as long as the node list it
    // is every node, in order: a plain copy.
    fn refill<T: Copy>(column: &mut Vec<T>, from: &[T], index: &[u32], all: bool) {
        column.clear();
        if all {
            column.extend_from_slice(from);
        } else {
            column.extend(index.iter().map(|&i| from[i as usize]));
        }
    }
    let cols = cluster.columns();
    let c = &mut out.capacity;
    refill(&mut c.alloc_cpu_milli, &cols.alloc_cpu_milli, index, all);
    refill(&mut c.alloc_memory_mib, &cols.alloc_memory_mib, index, all);
    refill(&mut c.alloc_gpus, &cols.alloc_gpus, index, all);
    refill(&mut c.free_cpu_milli, &cols.free_cpu_milli, index, all);
    refill(&mut c.free_memory_mib, &cols.free_memory_mib, index, all);
    refill(&mut c.free_gpus, &cols.free_gpus, index, all);
    refill(&mut out.siblings, siblings, index, all);
    out.index.clear();
    out.index.extend_from_slice(index);
}

/// Empty candidate columns, for [`fill_candidates`] to fill.
pub(crate) fn no_candidates() -> wit::Candidates {
    wit::Candidates {
        index: Vec::new(),
        capacity: wit::Capacity {
            alloc_cpu_milli: Vec::new(),
            alloc_memory_mib: Vec::new(),
            alloc_gpus: Vec::new(),
            free_cpu_milli: Vec::new(),
            free_memory_mib: Vec::new(),
            free_gpus: Vec::new(),
        },
        siblings: Vec::new(),
    }
}
