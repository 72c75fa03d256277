//! How many of a pod's feasible nodes its placement looks at. On a large
//! cluster kube-scheduler stops filtering once it has found a share of the
//! nodes feasible (`percentageOfNodesToScore`) and scores only those; the
//! policy's filter and score calls, and the candidate columns they read,
//! cost in proportion to the nodes they are given, so Dragon looks at the
//! same share. Below 100 nodes every feasible node is looked at.
//!
//! Which share: kube-scheduler starts each pod's search where the previous
//! pod's ended, so that every node gets its turn. A placement here must be
//! a function of the snapshot alone (a recording replays to the same
//! decisions), so the search starts at a node chosen by the unit's own key
//! instead: the pods of one gang look at the same share, which keeps
//! DRAGON's packing of a gang onto the fewest nodes intact, and different
//! units start at different nodes. Nodes already holding pods of the gang
//! are always looked at.

/// kube-scheduler's `minFeasibleNodesToFind`: with fewer nodes, every
/// feasible node is scored; with more, at least this many.
const MIN_NODES: usize = 100;
/// kube-scheduler's `minFeasibleNodesPercentageToFind`: the adaptive share
/// never goes below this many percent.
const MIN_PERCENTAGE: usize = 5;

/// How many feasible nodes to look at among `all` (kube-scheduler's
/// `numFeasibleNodesToFind`): `percentage` of them (0: adaptive, 50 % less
/// one point per 125 nodes, at least 5 %), at least 100, and every node of
/// a cluster smaller than that.
pub(crate) fn nodes_to_find(percentage: u32, all: usize) -> usize {
    if all < MIN_NODES {
        return all;
    }
    let percentage = match percentage {
        0 => 50usize.saturating_sub(all / 125).max(MIN_PERCENTAGE),
        p => (p as usize).min(100),
    };
    (all * percentage / 100).max(MIN_NODES)
}

/// Where `key`'s search starts among `nodes` nodes: FNV-1a of the key, so
/// the same unit starts at the same node in every run.
pub(crate) fn start_for(key: &str, nodes: usize) -> u32 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for b in key.bytes() {
        hash ^= u64::from(b);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    (hash % nodes.max(1) as u64) as u32
}

/// Keep of `feasible` (ascending node indices) the first `limit` at or
/// after node `start`, wrapping round, and every node `always` keeps;
/// ascending again.
pub(crate) fn sample(
    feasible: &mut Vec<u32>,
    limit: usize,
    start: u32,
    always: impl Fn(u32) -> bool,
) {
    if feasible.len() <= limit {
        return;
    }
    let split = feasible.partition_point(|&n| n < start);
    let mut kept: Vec<u32> = feasible[split..]
        .iter()
        .chain(&feasible[..split])
        .copied()
        .enumerate()
        .filter(|&(i, n)| i < limit || always(n))
        .map(|(_, n)| n)
        .collect();
    kept.sort_unstable();
    *feasible = kept;
}

#[cfg(test)]
mod tests {
    use super::*;

    // Cases of kube-scheduler's `TestNumFeasibleNodesToFind`
    // (pkg/scheduler/schedule_one_test.go, v1.37.2).
    #[test]
    fn the_share_of_nodes_is_kube_schedulers() {
        let cases = [
            // (percentage, nodes, wanted)
            (0, 10, 10),
            (40, 10, 10),
            (0, 1000, 420),
            (40, 1000, 400),
            (0, 6000, 300),
            (40, 6000, 2400),
            // Not below the minimum of 100 nodes.
            (0, 120, 100),
            (1, 1000, 100),
            // Adaptive: 50 % less one point per 125 nodes, at least 5 %.
            (0, 5000, 500),
            (0, 100_000, 5000),
            // Above 100 % is all.
            (150, 1000, 1000),
        ];
        for (percentage, nodes, wanted) in cases {
            assert_eq!(
                nodes_to_find(percentage, nodes),
                wanted,
                "{percentage} % of {nodes}"
            );
        }
    }

    #[test]
    fn the_sample_starts_at_the_start_wraps_round_and_keeps_the_gangs_nodes() {
        let mut f: Vec<u32> = (0..10).map(|n| n * 10).collect();
        sample(&mut f, 3, 75, |_| false);
        assert_eq!(f, [0, 80, 90], "80 and 90, then round to 0");
        let mut f: Vec<u32> = (0..10).map(|n| n * 10).collect();
        sample(&mut f, 3, 0, |n| n == 50);
        assert_eq!(f, [0, 10, 20, 50]);
        let mut f: Vec<u32> = vec![1, 2];
        sample(&mut f, 3, 1, |_| false);
        assert_eq!(f, [1, 2], "no fewer than were feasible");
    }

    #[test]
    fn a_units_start_is_the_same_every_time_and_within_the_cluster() {
        assert_eq!(start_for("job/ml/a", 5000), start_for("job/ml/a", 5000));
        assert_ne!(start_for("job/ml/a", 5000), start_for("job/ml/b", 5000));
        assert!(start_for("pod/ml/x", 7) < 7);
        assert_eq!(start_for("x", 0), 0);
    }
}
