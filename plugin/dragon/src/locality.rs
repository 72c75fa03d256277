//! Locality-aware placement: one node when one node fits the whole job,
//! otherwise as few nodes as possible, filling first the node that alone fits
//! the most tasks; a parameter server follows its workers.

use dragon_policy_sdk::types::*;

/// Where each task of a job would go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Packing {
    /// Node index per task, parallel to the tasks given to [`pack`].
    pub nodes: Vec<u32>,
}

impl Packing {
    /// How many distinct nodes the job spans.
    pub fn span(&self) -> usize {
        let mut n = self.nodes.clone();
        n.sort_unstable();
        n.dedup();
        n.len()
    }
}

/// Tie-break between equally good nodes: the one left with the fewest free
/// GPUs (best fit keeps whole nodes free for the next gang), then the lowest
/// index (the framework's rule).
fn best_fit(free: &Resources) -> u32 {
    4095 - free.gpus.min(4095)
}

/// Pack `tasks` onto `nodes` by DRAGON's locality rule, or `None` when they
/// cannot all fit. The same greedy rule drives [`score`], so a size that
/// `pre-filter` admits is the size the per-pod cycle places.
pub fn pack(tasks: &[Task], nodes: &Capacity) -> Option<Packing> {
    let mut free: Vec<Resources> = (0..nodes.len()).map(|i| nodes.free(i)).collect();
    let mut placed: Vec<Option<u32>> = vec![None; tasks.len()];
    let mut left: Vec<usize> = (0..tasks.len()).collect();
    while !left.is_empty() {
        let remaining: Vec<Task> = left.iter().map(|&i| tasks[i]).collect();
        let (node, fits) = free
            .iter()
            .enumerate()
            .map(|(n, f)| (n, fits_count(&remaining, *f), best_fit(f)))
            .max_by(|a, b| (a.1, a.2).cmp(&(b.1, b.2)).then(b.0.cmp(&a.0)))
            .map(|(n, fits, _)| (n, fits))?;
        if fits == 0 {
            return None;
        }
        let mut still = Vec::with_capacity(left.len());
        for &i in &left {
            if tasks[i].request.fits_in(&free[node]) {
                free[node] = free[node].minus(&tasks[i].request);
                placed[i] = Some(node as u32);
            } else {
                still.push(i);
            }
        }
        left = still;
    }
    Some(Packing {
        nodes: placed.into_iter().map(|n| n.unwrap_or(0)).collect(),
    })
}

/// Per-candidate scores for the pod `pod.task` of `pod.unit`.
///
/// Layout of the `u32` (higher bits dominate):
/// - worker: bit 31 = a sibling is already there (keep filling that node),
///   bits 24–30 = number of siblings, bits 12–23 = how many of the tasks still
///   to place fit on the node, bits 0–11 = best fit;
/// - parameter server: bits 12–30 = number of siblings (workers of the job on
///   the node), bits 0–11 = best fit.
pub fn score(pod: &Placement, nodes: &Candidates, view: &View) -> Vec<u32> {
    let tasks = &pod.unit.tasks[(pod.task as usize).min(pod.unit.tasks.len())..];
    let Some(this) = tasks.first() else {
        return vec![0; nodes.index.len()];
    };
    // The role is decided once and siblings are made dense once: this loop
    // is the policy's hottest, and in wasm every live value that does not
    // fit in a register is a stack reload per node.
    let capacity = view.capacity();
    let free = nodes.index.iter().map(|&i| capacity.free(i as usize));
    let siblings = nodes.siblings_dense();
    let per_node = free.zip(siblings);
    match this.role {
        Role::Ps => per_node
            .map(|(free, siblings)| (siblings.min(0x7_ffff) << 12) | best_fit(&free))
            .collect(),
        Role::Worker | Role::Other => per_node
            .map(|(free, siblings)| {
                let near = if siblings > 0 { 1 << 31 } else { 0 };
                let fits = (fits_count(tasks, free) as u32).min(4095);
                near | (siblings.min(127) << 24) | (fits << 12) | best_fit(&free)
            })
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::*;

    #[test]
    fn a_job_that_fits_on_one_node_is_packed_on_one_node() {
        let nodes = capacity(&[(32_000, 128_000, 4), (32_000, 128_000, 8)]);
        let tasks = job_tasks(1, 4, gpu_worker(), ps());
        let p = pack(&tasks, &nodes).unwrap();
        assert_eq!(p.span(), 1);
        // Best fit: the 4-GPU node is used up exactly, the 8-GPU node stays whole.
        assert!(p.nodes.iter().all(|&n| n == 0), "{p:?}");
    }

    #[test]
    fn a_job_too_big_for_one_node_fills_the_node_that_fits_the_most_first() {
        // Node 1 fits 3 workers, node 0 two, node 2 one: 5 workers take nodes 1 and 0.
        let nodes = capacity(&[
            (32_000, 128_000, 2),
            (32_000, 128_000, 3),
            (32_000, 128_000, 1),
        ]);
        let tasks = job_tasks(0, 5, gpu_worker(), ps());
        let p = pack(&tasks, &nodes).unwrap();
        assert_eq!(p.nodes, vec![1, 1, 1, 0, 0]);
        assert_eq!(p.span(), 2);
    }

    #[test]
    fn a_job_that_cannot_fit_is_not_packed() {
        let nodes = capacity(&[(32_000, 128_000, 2), (32_000, 128_000, 2)]);
        assert!(pack(&job_tasks(1, 5, gpu_worker(), ps()), &nodes).is_none());
    }

    #[test]
    fn workers_prefer_the_node_their_siblings_are_on() {
        let unit = gang_unit(1, 4, 4, 4, gpu_worker(), ps());
        let (mut c, v) = candidates(&[(32_000, 128_000, 8), (32_000, 128_000, 4)]);
        c.siblings = vec![(1, 1)];
        let s = score(&placement(&unit, 1), &c, &v);
        assert!(s[1] > s[0], "{s:?}");
    }

    #[test]
    fn the_first_worker_goes_where_the_whole_job_fits() {
        let unit = gang_unit(1, 4, 4, 4, gpu_worker(), ps());
        let (c, v) = candidates(&[
            (32_000, 128_000, 2),
            (32_000, 128_000, 4),
            (32_000, 128_000, 3),
        ]);
        let s = score(&placement(&unit, 0), &c, &v);
        let best = (0..3)
            .max_by_key(|&i| (s[i], std::cmp::Reverse(i)))
            .unwrap();
        assert_eq!(best, 1, "{s:?}");
    }

    #[test]
    fn the_parameter_server_goes_to_the_node_with_the_most_workers() {
        let unit = gang_unit(1, 4, 4, 4, gpu_worker(), ps());
        let (mut c, v) = candidates(&[
            (32_000, 128_000, 4),
            (32_000, 128_000, 4),
            (32_000, 128_000, 4),
        ]);
        c.siblings = vec![(0, 1), (1, 3)];
        let s = score(&placement(&unit, 4), &c, &v);
        assert_eq!(unit.tasks[4].role, Role::Ps);
        assert!(s[1] > s[0] && s[1] > s[2], "{s:?}");
    }
}
