//! What the default kube-scheduler does, as a Dragon policy: pods one at a
//! time in the framework's default queue order (kube-scheduler's
//! PrioritySort: priority, then the time a pod entered or re-entered the
//! queue after a backoff, so no `queue-order` hook), no gangs (no `permit`
//! hook), the framework's
//! built-in resource-fit filter, and the default scoring pair
//! `NodeResourcesFit/LeastAllocated` + `NodeResourcesBalancedAllocation`,
//! both over CPU and memory with weight 1, as kube-scheduler configures them.

use dragon_policy_sdk::types::*;
use dragon_policy_sdk::{Policy, export_policy, policy};

/// The kube-scheduler-like baseline.
#[derive(Debug, Default)]
pub struct Baseline;

/// Max node score in kube-scheduler (`framework.MaxNodeScore`).
const MAX_SCORE: u64 = 100;

/// LeastAllocated for one resource: the share left free after the pod, 0–100.
fn least_allocated(requested: u64, allocatable: u64) -> u64 {
    if allocatable == 0 || requested > allocatable {
        return 0;
    }
    (allocatable - requested) * MAX_SCORE / allocatable
}

/// BalancedAllocation over CPU and memory: 100 × (1 − standard deviation of
/// the two utilisation fractions after the pod).
fn balanced(cpu: (u64, u64), mem: (u64, u64)) -> u64 {
    // Not `f64::min`: on wasm32 that is a call to libm's `fmin` (wasm's own
    // `f64.min` treats NaN differently), twice per node.
    let frac = |(req, alloc): (u64, u64)| {
        let f = if alloc == 0 {
            1.0
        } else {
            req as f64 / alloc as f64
        };
        if f > 1.0 { 1.0 } else { f }
    };
    let (c, m) = (frac(cpu), frac(mem));
    let std = (c - m).abs() / 2.0;
    ((1.0 - std) * MAX_SCORE as f64) as u64
}

#[policy]
impl Policy for Baseline {
    fn metadata(&self) -> PolicyInfo {
        PolicyInfo::named("baseline", env!("CARGO_PKG_VERSION"))
    }

    fn score(&self, pod: &Placement, nodes: &Candidates, view: &View) -> Vec<u32> {
        let Some(task) = pod.unit.tasks.get(pod.task as usize) else {
            return vec![0; nodes.index.len()];
        };
        let c = view.capacity();
        nodes
            .index
            .iter()
            .map(|&i| {
                let i = i as usize;
                let used_cpu = c.alloc_cpu_milli[i].saturating_sub(c.free_cpu_milli[i])
                    + task.request.cpu_milli;
                let used_mem = c.alloc_memory_mib[i].saturating_sub(c.free_memory_mib[i])
                    + task.request.memory_mib;
                let least = (least_allocated(used_cpu, c.alloc_cpu_milli[i])
                    + least_allocated(used_mem, c.alloc_memory_mib[i]))
                    / 2;
                let bal = balanced(
                    (used_cpu, c.alloc_cpu_milli[i]),
                    (used_mem, c.alloc_memory_mib[i]),
                );
                (least + bal) as u32
            })
            .collect()
    }
}

export_policy!(Baseline);

#[cfg(test)]
mod tests {
    use super::*;

    /// Every node a candidate: 10 cores, 10,000 MiB and 4 GPUs each, with
    /// `free` CPU and memory.
    fn cands(free: &[(u64, u64)]) -> (Candidates, View) {
        let nodes: Vec<Node> = free
            .iter()
            .map(|&(cpu, mem)| Node {
                allocatable: Resources {
                    cpu_milli: 10_000,
                    memory_mib: 10_000,
                    gpus: 4,
                },
                free: Resources {
                    cpu_milli: cpu,
                    memory_mib: mem,
                    gpus: 4,
                },
                open: true,
                gpu_type: None,
            })
            .collect();
        let c = Candidates {
            index: (0..free.len() as u32).collect(),
            siblings: Vec::new(),
            preference: Vec::new(),
        };
        (c, View::of(&nodes))
    }

    fn score(pod: &Placement, free: &[(u64, u64)]) -> Vec<u32> {
        let (c, v) = cands(free);
        Baseline.score(pod, &c, &v)
    }

    fn pod(cpu: u64, mem: u64) -> Placement {
        Placement {
            unit: Unit {
                id: 1,
                arrival_ms: 0,
                priority: 0,
                gang: false,
                tasks: vec![Task {
                    role: Role::Other,
                    index: 0,
                    request: Resources {
                        cpu_milli: cpu,
                        memory_mib: mem,
                        gpus: 0,
                    },
                }],
                workers: 0,
                min_workers: 0,
                max_workers: 0,
                running: 0,
                stats: JobStats::NONE,
            },
            task: 0,
            now_ms: 0,
        }
    }

    #[test]
    fn least_allocated_prefers_the_emptier_node() {
        let s = score(&pod(1_000, 1_000), &[(2_000, 2_000), (9_000, 9_000)]);
        assert!(s[1] > s[0], "{s:?}");
    }

    #[test]
    fn scores_match_kube_scheduler_arithmetic() {
        // Empty 10-core/10000-MiB node, pod 1 core / 5000 MiB:
        // LeastAllocated = (90 + 50) / 2 = 70; fractions 0.1 and 0.5 → std 0.2 → 80.
        let s = score(&pod(1_000, 5_000), &[(10_000, 10_000)]);
        assert_eq!(s, vec![150]);
    }

    #[test]
    fn balanced_allocation_prefers_even_use_of_cpu_and_memory() {
        // Both nodes have the same total free share; node 1 ends up balanced.
        let s = score(&pod(1_000, 1_000), &[(9_000, 5_000), (7_000, 7_000)]);
        assert!(s[1] > s[0], "{s:?}");
    }

    #[test]
    fn the_baseline_has_no_gangs() {
        assert_eq!(Baseline.info().hooks, [Hook::Score]);
    }
}
