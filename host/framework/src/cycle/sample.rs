//! How many of a pod's feasible nodes its placement looks at. On a large
//! cluster kube-scheduler stops filtering once it has found a share of the
//! nodes feasible (`percentageOfNodesToScore`) and scores only those; the
//! built-in filters, the policy's filter and score calls and the candidate
//! columns they read all cost in proportion to the nodes they visit, so
//! Dragon stops at the same share. Below 100 nodes every node is looked at.
//!
//! Which share: kube-scheduler starts each pod's search where the previous
//! pod's ended, so that every node gets its turn. A placement here must be
//! a function of the snapshot alone (a recording replays to the same
//! decisions), so the search starts at a node chosen by the unit's own key
//! instead: the pods of one gang look at the same share, which keeps
//! DRAGON's packing of a gang onto the fewest nodes intact, and different
//! units start at different nodes. Nodes already holding pods of the gang
//! are always looked at.

use super::domain::IN_HELD_DOMAIN;
use super::*;
use crate::model::Pod;

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

/// The positions `0..len` from `start`, wrapping round: the order a
/// search visits a list of nodes in.
pub(crate) fn from_start(len: usize, start: u32) -> impl Iterator<Item = usize> {
    let start = (start as usize).min(len);
    (start..len).chain(0..start)
}

impl Scheduler {
    /// The nodes of `within` (ascending) or of the cluster that pass the
    /// built-in filters for `pod` and are held for no other unit, visited
    /// from position `start` round and no more than `limit` of them.
    pub(super) fn search(
        &self,
        unit: &UnitPlan,
        pod: &Pod,
        within: Option<&[u32]>,
        (start, limit): (u32, usize),
        rejections: &mut Rejections,
    ) -> Vec<u32> {
        let among = within.map_or(self.cluster.nodes().len(), <[u32]>::len);
        let mut held = 0;
        let order = from_start(among, start)
            .map(|p| within.map_or(p, |w| w[p] as usize))
            .filter(|&n| {
                let other = !self.held.is_empty() && self.held_from(unit, n);
                held += usize::from(other);
                !other
            });
        let found = feasible_among(&self.cluster, pod, order, limit, rejections);
        rejections.add(IN_HELD_DOMAIN, held);
        found
    }

    /// Add to a search's `found` the nodes in `sibling_nodes` (holding pods
    /// of the unit's gang) it stopped before, where `pod` passes too: DRAGON
    /// packs a gang onto the nodes it already holds.
    pub(super) fn add_unvisited(
        &self,
        unit: &UnitPlan,
        pod: &Pod,
        within: Option<&[u32]>,
        sibling_nodes: &[usize],
        found: &mut Vec<u32>,
    ) {
        found.sort_unstable();
        let unvisited = sibling_nodes.iter().copied().filter(|&n| {
            found.binary_search(&(n as u32)).is_err()
                && within.is_none_or(|w| w.binary_search(&(n as u32)).is_ok())
                && (self.held.is_empty() || !self.held_from(unit, n))
        });
        let more = feasible_among(
            &self.cluster,
            pod,
            unvisited,
            usize::MAX,
            &mut Rejections::default(),
        );
        found.extend(more);
    }
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
    fn the_search_starts_at_the_start_and_wraps_round() {
        assert_eq!(from_start(5, 3).collect::<Vec<_>>(), [3, 4, 0, 1, 2]);
        assert_eq!(from_start(3, 0).collect::<Vec<_>>(), [0, 1, 2]);
        assert_eq!(from_start(0, 0).count(), 0);
    }
}
