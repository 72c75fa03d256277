//! Queues as a tree. A queue under a parent shares the parent's fair share
//! with its siblings before any of it goes to another subtree, as a team's
//! sub-teams lend each other first: the cluster is divided among the
//! top-level queues, each queue's share among its children, by the same
//! water-filling. What a subtree holds and asks for is the sum over its
//! queues; a parent's own jobs (if any) take what its children leave.

use super::ceiling;
use crate::types::Queue;

/// Each queue's subtree totals and fair shares, for one view.
#[derive(Debug, Clone, PartialEq)]
pub struct Tree {
    /// Each queue's parent, an index into the same list (an index out of
    /// range, or a cycle, which the host refuses, makes a queue a root).
    parent: Vec<Option<usize>>,
    /// GPUs held by each queue's jobs and by its descendants'.
    pub held: Vec<u32>,
    /// GPUs asked for by each queue's jobs and by its descendants'.
    pub demand: Vec<u32>,
    /// What each subtree is owed: its demand up to its guarantee.
    pub owed: Vec<u32>,
    /// Each subtree's fair share.
    pub share: Vec<u32>,
    /// The part of its share left to each queue's own jobs (all of it for
    /// a queue without children).
    pub own_share: Vec<u32>,
}

impl Tree {
    /// The tree of `queues` sharing `total` GPUs.
    pub fn new(queues: &[Queue], total: u32) -> Tree {
        let n = queues.len();
        let parent = parents(queues);
        let order = top_down(&parent);
        let mut held: Vec<u32> = queues.iter().map(|q| q.used_gpus).collect();
        let mut demand: Vec<u32> = queues.iter().map(|q| q.demand_gpus).collect();
        // The most a subtree can use: its own jobs' demand and what its
        // children can use, within its guarantee plus borrowing limit.
        let mut cap = demand.clone();
        for &q in order.iter().rev() {
            cap[q] = cap[q].min(ceiling(&queues[q]));
            if let Some(p) = parent[q] {
                held[p] = held[p].saturating_add(held[q]);
                demand[p] = demand[p].saturating_add(demand[q]);
                cap[p] = cap[p].saturating_add(cap[q]);
            }
        }
        let owed: Vec<u32> = (0..n)
            .map(|q| demand[q].min(queues[q].guaranteed_gpus).min(cap[q]))
            .collect();
        let mut share = vec![0; n];
        let mut own_share = vec![0; n];
        let fill = |members: &[usize], total: u32, share: &mut Vec<u32>| {
            water_fill(members, total, &cap, &owed, queues, share)
        };
        let mut children: Vec<Vec<usize>> = vec![Vec::new(); n];
        let mut roots = Vec::new();
        for (q, p) in parent.iter().enumerate() {
            match p {
                Some(p) => children[*p].push(q),
                None => roots.push(q),
            }
        }
        fill(&roots, total, &mut share);
        for &q in &order {
            let given = fill(&children[q], share[q], &mut share);
            own_share[q] = share[q].saturating_sub(given);
        }
        Tree {
            parent,
            held,
            demand,
            owed,
            share,
            own_share,
        }
    }

    /// `q` and its ancestors, nearest first.
    pub fn chain(&self, q: usize) -> impl Iterator<Item = usize> + '_ {
        std::iter::successors(Some(q), |&a| self.parent.get(a).copied().flatten())
            .take(self.parent.len())
    }

    /// Whether `a` is `q` or one of its ancestors.
    pub fn covers(&self, a: usize, q: usize) -> bool {
        self.chain(q).any(|x| x == a)
    }

    /// A queue, other than `q` and its ancestors, that holds less than it
    /// is owed: `q` must leave it room.
    pub fn starved_besides(&self, q: usize) -> Option<usize> {
        (0..self.held.len()).find(|&r| !self.covers(r, q) && self.held[r] < self.owed[r])
    }
}

/// Each queue's parent, with cycles broken (see [`Tree`]): a walk up
/// from each queue not yet seen that comes back to a queue of its own walk
/// cuts that queue from its parent.
fn parents(queues: &[Queue]) -> Vec<Option<usize>> {
    let n = queues.len();
    let mut parent: Vec<Option<usize>> = queues
        .iter()
        .map(|q| q.parent.map(|p| p as usize).filter(|&p| p < n))
        .collect();
    #[derive(Clone, Copy, PartialEq)]
    enum Seen {
        No,
        OnWalk,
        Done,
    }
    let mut seen = vec![Seen::No; n];
    let mut walk = Vec::new();
    for q in 0..n {
        let mut at = Some(q);
        while let Some(a) = at {
            match seen[a] {
                Seen::Done => break,
                Seen::OnWalk => {
                    parent[a] = None;
                    break;
                }
                Seen::No => {
                    seen[a] = Seen::OnWalk;
                    walk.push(a);
                    at = parent[a];
                }
            }
        }
        for a in walk.drain(..) {
            seen[a] = Seen::Done;
        }
    }
    parent
}

/// Every queue, each after its parent.
fn top_down(parent: &[Option<usize>]) -> Vec<usize> {
    let mut children: Vec<Vec<usize>> = vec![Vec::new(); parent.len()];
    let mut order = Vec::with_capacity(parent.len());
    for (q, p) in parent.iter().enumerate() {
        match p {
            Some(p) => children[*p].push(q),
            None => order.push(q),
        }
    }
    let mut i = 0;
    while i < order.len() {
        order.extend_from_slice(&children[order[i]]);
        i += 1;
    }
    order
}

/// Hand `total` GPUs to `members`: first what each is owed, then what is
/// left by weight to those still below their cap. Returns what was given.
fn water_fill(
    members: &[usize],
    total: u32,
    cap: &[u32],
    owed: &[u32],
    queues: &[Queue],
    share: &mut [u32],
) -> u32 {
    for &m in members {
        share[m] = owed[m];
    }
    let given: u32 = members.iter().fold(0, |a, &m| a.saturating_add(share[m]));
    let mut left = total.saturating_sub(given);
    // A round at a time: each round hands every member still below its
    // cap its weighted part of what is left (at least one GPU, so it ends).
    while left > 0 {
        let asking: Vec<usize> = members
            .iter()
            .copied()
            .filter(|&m| share[m] < cap[m])
            .collect();
        if asking.is_empty() {
            break;
        }
        let weight = |m: usize| u64::from(queues[m].weight_milli.max(1));
        let weights: u64 = asking.iter().map(|&m| weight(m)).sum();
        let round = left;
        for &m in &asking {
            let part = (u64::from(round) * weight(m) / weights).max(1) as u32;
            let give = part.min(cap[m] - share[m]).min(left);
            share[m] += give;
            left -= give;
            if left == 0 {
                break;
            }
        }
    }
    members.iter().fold(0, |a, &m| a.saturating_add(share[m]))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn queue(name: &str, parent: Option<u32>, guaranteed: u32, used: u32, demand: u32) -> Queue {
        Queue {
            name: name.into(),
            parent,
            weight_milli: 1_000,
            guaranteed_gpus: guaranteed,
            borrowing_limit_gpus: None,
            used_gpus: used,
            demand_gpus: demand,
        }
    }

    #[test]
    fn the_cluster_is_divided_among_top_level_queues_then_each_share_among_its_children() {
        // 24 GPUs; A (8: a1 4, a2 4) and B (8), every leaf asks for 32.
        // The 8 beyond the guarantees split 4 / 4 between A and B, and A's
        // 12 evenly between its children (a flat list would give B 2 and
        // each child 3).
        let qs = [
            queue("A", None, 8, 0, 0),
            queue("a1", Some(0), 4, 0, 32),
            queue("a2", Some(0), 4, 0, 32),
            queue("B", None, 8, 0, 32),
        ];
        let t = Tree::new(&qs, 24);
        assert_eq!(t.share, [12, 6, 6, 12]);
        assert_eq!(t.demand, [64, 32, 32, 32]);
        assert_eq!(t.own_share, [0, 6, 6, 12]);
    }

    #[test]
    fn a_child_borrows_its_idle_siblings_guarantee_before_other_teams_share_the_rest() {
        // a2 asks for nothing: A is still owed its 8, all of which a1 may
        // use, and half of what is left (a flat list: a1 10, B 14).
        let qs = [
            queue("A", None, 8, 0, 0),
            queue("a1", Some(0), 4, 10, 32),
            queue("a2", Some(0), 4, 0, 0),
            queue("B", None, 8, 6, 32),
        ];
        let t = Tree::new(&qs, 24);
        assert_eq!(t.share, [12, 12, 0, 12]);
        assert_eq!(t.held, [10, 10, 0, 6]);
        // B holds 6 of the 8 it is owed: a1 must leave it room; A, a1's
        // parent, is not someone a1 must wait for.
        assert_eq!(t.starved_besides(1), Some(3));
        assert!(t.covers(0, 1) && !t.covers(3, 1));
    }

    #[test]
    fn a_parents_borrowing_limit_caps_its_children_together() {
        let mut a = queue("A", None, 8, 0, 0);
        a.borrowing_limit_gpus = Some(0);
        let qs = [
            a,
            queue("a1", Some(0), 4, 0, 32),
            queue("a2", Some(0), 4, 0, 32),
            queue("B", None, 8, 0, 0),
        ];
        let t = Tree::new(&qs, 24);
        assert_eq!(t.share, [8, 4, 4, 0]);
    }

    #[test]
    fn a_parents_own_jobs_take_what_its_children_leave() {
        let qs = [queue("A", None, 8, 0, 6), queue("a1", Some(0), 4, 0, 4)];
        let t = Tree::new(&qs, 8);
        assert_eq!((t.share[0], t.share[1], t.own_share[0]), (8, 4, 4));
    }

    #[test]
    fn a_cycle_of_parents_is_broken_and_does_not_loop() {
        let qs = [
            queue("a", Some(1), 4, 0, 4),
            queue("b", Some(0), 4, 0, 4),
            queue("c", Some(9), 4, 0, 4),
        ];
        // `a` becomes a root, `b` stays under it; `c`'s parent is unknown.
        let t = Tree::new(&qs, 12);
        assert_eq!(t.share, [8, 4, 4]);
        assert_eq!(t.chain(1).collect::<Vec<_>>(), [1, 0]);
        assert_eq!(t.chain(2).collect::<Vec<_>>(), [2]);
    }
}
