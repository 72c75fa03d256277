//! The framework's built-in filters, as in kube-scheduler: unschedulable
//! nodes, node selector, taints and tolerations, resource fit.

use std::collections::BTreeMap;

use super::cluster::Cluster;
use super::model::{Pod, Resources};
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

/// Node indices that pass every built-in filter for `pod`.
pub(crate) fn feasible(cluster: &Cluster, pod: &Pod, rejections: &mut Rejections) -> Vec<u32> {
    let mut out = Vec::new();
    for (i, node) in cluster.nodes().iter().enumerate() {
        if !cluster.is_live(i) {
            continue;
        }
        if node.unschedulable {
            rejections.add("node(s) were unschedulable", 1);
            continue;
        }
        if !pod
            .node_selector
            .iter()
            .all(|(k, v)| node.labels.get(k) == Some(v))
        {
            rejections.add("node(s) didn't match Pod's node affinity/selector", 1);
            continue;
        }
        let untolerated = node.taints.iter().any(|t| {
            (t.effect == "NoSchedule" || t.effect == "NoExecute")
                && !pod.tolerations.iter().any(|tol| tol.tolerates(t))
        });
        if untolerated {
            rejections.add("node(s) had untolerated taint", 1);
            continue;
        }
        let free = cluster.free(i);
        let r = pod.request;
        if r.gpus > free.gpus {
            rejections.add("Insufficient nvidia.com/gpu", 1);
        } else if r.cpu_milli > free.cpu_milli {
            rejections.add("Insufficient cpu", 1);
        } else if r.memory_mib > free.memory_mib {
            rejections.add("Insufficient memory", 1);
        } else {
            out.push(i as u32);
        }
    }
    out
}

/// Candidate columns for the policy's `filter` and `score`.
pub(crate) fn candidates(cluster: &Cluster, index: Vec<u32>, siblings: &[u32]) -> wit::Candidates {
    // One pass per column: each is a plain gather the compiler keeps tight,
    // instead of seven pushes per node.
    let nodes = cluster.nodes();
    let alloc: Vec<Resources> = index
        .iter()
        .map(|&i| nodes[i as usize].allocatable)
        .collect();
    let free: Vec<Resources> = index.iter().map(|&i| cluster.free(i as usize)).collect();
    let capacity = wit::Capacity {
        alloc_cpu_milli: alloc.iter().map(|r| r.cpu_milli).collect(),
        alloc_memory_mib: alloc.iter().map(|r| r.memory_mib).collect(),
        alloc_gpus: alloc.iter().map(|r| r.gpus).collect(),
        free_cpu_milli: free.iter().map(|r| r.cpu_milli).collect(),
        free_memory_mib: free.iter().map(|r| r.memory_mib).collect(),
        free_gpus: free.iter().map(|r| r.gpus).collect(),
    };
    wit::Candidates {
        siblings: index.iter().map(|&i| siblings[i as usize]).collect(),
        index,
        capacity,
    }
}
