//! Locality-aware placement: one node when one node fits the whole job,
//! otherwise as few nodes as possible, filling first the node that alone fits
//! the most tasks; a parameter server follows its workers. The packing
//! itself is the SDK's [`pack`]; [`score`] follows the same greedy rule pod by
//! pod, so a size that `pre-filter` admits is the size the per-pod cycle
//! places.

use dragon_policy_sdk::packing::best_fit;
use dragon_policy_sdk::types::*;

/// Per-candidate scores for the pod `pod.task` of `pod.unit`.
///
/// Layout of the `u32` (higher bits dominate):
/// - worker: bit 31 = a sibling is already there (keep filling that node),
///   bits 24–30 = number of siblings, bits 12–23 = how many of the tasks
///   still to place fit on the node (with `room_to_grow`: bit 23 = they fit
///   with room left for the gang's workers up to `max`, bits 12–22 the
///   count), bits 0–11 = best fit;
/// - parameter server: bits 12–30 = number of siblings (workers of the job on
///   the node), bits 0–11 = best fit.
pub fn score(pod: &Placement, nodes: &Candidates, view: &View, room_to_grow: bool) -> Vec<u32> {
    let tasks = &pod.unit.tasks[(pod.task as usize).min(pod.unit.tasks.len())..];
    let Some(this) = tasks.first() else {
        return vec![0; nodes.index.len()];
    };
    // The role is decided once and siblings are made dense once: this loop
    // is the policy's hottest, and in wasm every live value that does not
    // fit in a register is a stack reload per node.
    let capacity = view.capacity();
    let runs = Runs::of(tasks);
    let free = nodes.index.iter().map(|&i| capacity.free(i as usize));
    let siblings = nodes.siblings_dense();
    let per_node = free.zip(siblings);
    match this.role {
        Role::Ps => per_node
            .map(|(free, siblings)| (siblings.min(0x7_ffff) << 12) | best_fit(&free))
            .collect(),
        Role::Worker | Role::Other => {
            let more = pod.unit.max_workers.saturating_sub(pod.unit.workers);
            if room_to_grow && more > 0 && this.role == Role::Worker {
                let extra = times(this.request, more);
                per_node
                    .map(|(free, siblings)| {
                        let roomy = extra.fits_in(&free)
                            && runs.fits_count(free.minus(&extra)) == tasks.len();
                        let fits =
                            (runs.fits_count(free) as u32).min(2047) | (u32::from(roomy) << 11);
                        worker_score(siblings, fits, &free)
                    })
                    .collect()
            } else {
                per_node
                    .map(|(free, siblings)| {
                        worker_score(siblings, (runs.fits_count(free) as u32).min(4095), &free)
                    })
                    .collect()
            }
        }
    }
}

/// A worker's score from its parts (see [`score`]).
#[inline(always)]
fn worker_score(siblings: u32, fits: u32, free: &Resources) -> u32 {
    let near = if siblings > 0 { 1 << 31 } else { 0 };
    near | (siblings.min(127) << 24) | (fits << 12) | best_fit(free)
}

/// `r` taken `k` times.
fn times(r: Resources, k: u32) -> Resources {
    Resources {
        cpu_milli: r.cpu_milli.saturating_mul(u64::from(k)),
        memory_mib: r.memory_mib.saturating_mul(u64::from(k)),
        gpus: r.gpus.saturating_mul(k),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dragon_policy_sdk::testing::*;

    #[test]
    fn workers_prefer_the_node_their_siblings_are_on() {
        let unit = gang_unit(1, 4, 4, 4, gpu_worker(), ps());
        let (mut c, v) = candidates(&[(32_000, 128_000, 8), (32_000, 128_000, 4)]);
        c.siblings = vec![(1, 1)];
        let s = score(&placement(&unit, 1), &c, &v, false);
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
        let s = score(&placement(&unit, 0), &c, &v, false);
        let best = (0..3)
            .max_by_key(|&i| (s[i], std::cmp::Reverse(i)))
            .unwrap();
        assert_eq!(best, 1, "{s:?}");
    }

    #[test]
    fn with_room_to_grow_the_first_worker_goes_where_the_gang_could_double() {
        // One worker (up to two) and a parameter server without GPUs: node
        // 0 fits it exactly, node 1 could also take its second worker.
        let unit = gang_unit(1, 1, 1, 2, gpu_worker(), ps());
        let (c, v) = candidates(&[(32_000, 128_000, 1), (32_000, 128_000, 2)]);
        let best = |s: &[u32]| if s[1] > s[0] { 1 } else { 0 };
        assert_eq!(best(&score(&placement(&unit, 0), &c, &v, false)), 0);
        assert_eq!(best(&score(&placement(&unit, 0), &c, &v, true)), 1);
        // A gang that may not grow is packed as before.
        let rigid = gang_unit(1, 1, 1, 1, gpu_worker(), ps());
        assert_eq!(best(&score(&placement(&rigid, 0), &c, &v, true)), 0);
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
        let s = score(&placement(&unit, 4), &c, &v, false);
        assert_eq!(unit.tasks[4].role, Role::Ps);
        assert!(s[1] > s[0] && s[1] > s[2], "{s:?}");
    }
}
