//! Fair shares between the queues (teams) sharing a cluster: each queue's
//! share by weighted max-min over the GPUs, an order of pending units that
//! serves the queue furthest below its share first, admission that keeps a
//! queue within its borrowing limit and out of room another queue is owed,
//! and reclaim by shrinking the elastic jobs of queues above their share.
//!
//! A queue is *owed* what its jobs ask for, up to its guarantee. Its *fair
//! share* fills the cluster by water-filling: first what each is owed, then
//! what is left, by weight, to queues that ask for more, none beyond its
//! demand or its guarantee plus its borrowing limit. Queues may form a
//! tree ([`Tree`]): a parent's guarantee covers its children's, what a
//! parent holds and asks for is its subtree's, and its share is divided
//! among its children before any of it goes elsewhere.

mod tree;

pub use tree::Tree;

use crate::packing::{tasks_at, total};
use crate::types::{Queue, Queued, RunningJob, ScaleDecision, ScaleInput, Unit, View};

/// What a queue without children is owed now: what its jobs ask for, up
/// to its guarantee ([`Tree`] gives a subtree's).
pub fn owed(q: &Queue) -> u32 {
    q.demand_gpus.min(q.guaranteed_gpus)
}

/// The most a queue may hold: its guarantee plus its borrowing limit.
pub fn ceiling(q: &Queue) -> u32 {
    q.borrowing_limit_gpus
        .map_or(u32::MAX, |b| q.guaranteed_gpus.saturating_add(b))
}

/// Allocatable GPUs of the open nodes.
pub fn cluster_gpus(view: &View) -> u32 {
    (0..view.len())
        .filter(|&i| view.open(i))
        .map(|i| view.allocatable(i).gpus)
        .fold(0, u32::saturating_add)
}

/// Each queue's fair share of `total` GPUs for its whole subtree (see
/// the module's docs and [`Tree`]).
pub fn fair_shares(queues: &[Queue], total: u32) -> Vec<u32> {
    Tree::new(queues, total).share
}

/// GPUs the tasks of `unit` ask for at its requested size.
fn unit_gpus(unit: &Unit) -> u32 {
    total(&tasks_at(unit, unit.workers)).gpus
}

/// `base` (a permutation of indices into `units`) reordered so that each
/// next unit comes from the queue holding the least of its fair share
/// (counting the units ordered before it), the base order kept within a
/// queue. Units without a queue keep their base places among themselves
/// and go where a queue exactly at its share would.
pub fn order(units: &[Queued], base: Vec<u32>, view: &View) -> Vec<u32> {
    let queues = view.queues();
    if queues.is_empty() {
        return base;
    }
    // A queue's own jobs are measured against their part of its share.
    let shares = Tree::new(queues, cluster_gpus(view)).own_share;
    // Per queue (the last: no queue), its units in base order.
    let none = queues.len();
    let mut lines: Vec<std::collections::VecDeque<u32>> = vec![Default::default(); none + 1];
    for i in base {
        let q = units[i as usize]
            .stats
            .queue
            .map_or(none, |q| (q as usize).min(none));
        lines[q].push_back(i);
    }
    let mut held: Vec<u64> = queues.iter().map(|q| u64::from(q.used_gpus)).collect();
    held.push(0);
    let mut out = Vec::with_capacity(units.len());
    loop {
        // The lowest held/share, compared exactly as cross products; a
        // queue with no share is last.
        let next = (0..=none)
            .filter(|&q| !lines[q].is_empty())
            .min_by(|&a, &b| {
                let share = |q: usize| if q == none { 1 } else { u64::from(shares[q]) };
                let (ha, sa) = (if a == none { 1 } else { held[a] }, share(a));
                let (hb, sb) = (if b == none { 1 } else { held[b] }, share(b));
                match (sa, sb) {
                    (0, 0) => ha.cmp(&hb),
                    (0, _) => std::cmp::Ordering::Greater,
                    (_, 0) => std::cmp::Ordering::Less,
                    _ => (u128::from(ha) * u128::from(sb)).cmp(&(u128::from(hb) * u128::from(sa))),
                }
                .then(a.cmp(&b))
            });
        let Some(q) = next else {
            break;
        };
        let Some(i) = lines[q].pop_front() else {
            break;
        };
        held[q] += u64::from(units[i as usize].total.gpus);
        out.push(i);
    }
    out
}

/// Why `unit` must not be admitted now, if so: its queue, or a queue above
/// it, would go beyond its guarantee plus borrowing limit, or its queue
/// beyond its fair share while a queue elsewhere holds less than it is
/// owed and waits for more.
pub fn hold_back(unit: &Unit, view: &View) -> Option<String> {
    let queues = view.queues();
    let q = unit.stats.queue? as usize;
    let queue = queues.get(q)?;
    let gpus = unit_gpus(unit);
    let tree = Tree::new(queues, cluster_gpus(view));
    for a in tree.chain(q) {
        let after = tree.held[a].saturating_add(gpus);
        let limit = ceiling(&queues[a]);
        if after > limit {
            return Some(format!(
                "queue {} would hold {after} GPUs, more than its guarantee of {} plus its borrowing limit of {}",
                queues[a].name,
                queues[a].guaranteed_gpus,
                limit - queues[a].guaranteed_gpus
            ));
        }
    }
    let after = queue.used_gpus.saturating_add(gpus);
    if after <= tree.own_share[q] {
        return None;
    }
    let r = tree.starved_besides(q)?;
    Some(format!(
        "queue {} would hold {after} GPUs, more than its fair share of {}, while queue {} holds {} of the {} it is owed",
        queue.name, tree.own_share[q], queues[r].name, tree.held[r], tree.owed[r]
    ))
}

/// Shrink decisions that give back room to a waiting job whose queue
/// holds less than it is owed: elastic jobs of queues above their fair
/// share, the queue furthest above first and its most served job first,
/// each down to its minimum, until the job's GPUs at its minimum size are
/// free. The job is the first owed one whose room those shrinks can free
/// (shrinking for one they cannot serve would buy restarts and nothing
/// else). None when no queue is owed room or the first owed job fits.
pub fn reclaim(input: &ScaleInput, view: &View) -> Vec<ScaleDecision> {
    let queues = view.queues();
    if queues.is_empty() {
        return Vec::new();
    }
    let tree = Tree::new(queues, cluster_gpus(view));
    let over = |j: &RunningJob| {
        j.stats
            .queue
            .map(|q| q as usize)
            .filter(|&q| q < queues.len())
            .map_or(0, |q| queues[q].used_gpus.saturating_sub(tree.own_share[q]))
    };
    let mut victims: Vec<&RunningJob> = input
        .running
        .iter()
        .filter(|j| j.workers > j.min_workers && j.worker_request.gpus > 0 && over(j) > 0)
        .collect();
    let spare: u32 = victims
        .iter()
        .map(|j| (j.workers - j.min_workers).saturating_mul(j.worker_request.gpus))
        .fold(0, u32::saturating_add);
    let free: u32 = (0..view.len())
        .filter(|&i| view.open(i))
        .map(|i| view.free(i).gpus)
        .fold(0, u32::saturating_add);
    let mut owed_jobs = input.waiting.iter().filter(|w| {
        w.unit
            .stats
            .queue
            .map(|q| q as usize)
            .is_some_and(|q| q < queues.len() && tree.held[q] < tree.owed[q])
    });
    let short_of = |w: &crate::types::WaitingJob| {
        total(&tasks_at(&w.unit, w.unit.min_workers))
            .gpus
            .saturating_sub(free)
    };
    let Some(first) = owed_jobs.next() else {
        return Vec::new();
    };
    if short_of(first) == 0 {
        return Vec::new();
    }
    let Some((w, mut short)) = std::iter::once(first)
        .chain(owed_jobs)
        .map(|w| (w, short_of(w)))
        .find(|&(_, short)| short <= spare)
    else {
        return Vec::new();
    };
    victims.sort_by_key(|j| {
        (
            std::cmp::Reverse(over(j)),
            std::cmp::Reverse(j.stats.attained_gpu_ms),
            j.id,
        )
    });
    let mut out = Vec::new();
    for j in victims {
        if short == 0 {
            break;
        }
        let per = j.worker_request.gpus;
        let give = (j.workers - j.min_workers).min(short.div_ceil(per));
        short = short.saturating_sub(give * per);
        out.push(ScaleDecision {
            id: j.id,
            workers: j.workers - give,
            reason: format!(
                "fair share: room for job {} of a queue below its guarantee",
                w.id
            ),
        });
    }
    out
}

/// `decisions` (a policy's own resizes) within fair sharing: no growth
/// that takes a job's queue beyond its fair share while another queue holds
/// less than it is owed, and no shrinking for a waiting head whose queue
/// already holds its guarantee (room taken from elastic jobs, which can
/// give it back, must not go to work that borrows and cannot).
pub fn limit_resizes(
    decisions: Vec<ScaleDecision>,
    input: &ScaleInput,
    view: &View,
) -> Vec<ScaleDecision> {
    let queues = view.queues();
    if queues.is_empty() {
        return decisions;
    }
    let tree = Tree::new(queues, cluster_gpus(view));
    let head_borrows = input
        .waiting
        .first()
        .and_then(|w| w.unit.stats.queue)
        .map(|q| q as usize)
        .is_some_and(|q| q < queues.len() && tree.held[q] >= queues[q].guaranteed_gpus);
    let starved = |q: usize| tree.starved_besides(q).is_some();
    let shares = &tree.own_share;
    let mut held: Vec<u32> = queues.iter().map(|q| q.used_gpus).collect();
    decisions
        .into_iter()
        .filter(|d| {
            let Some(j) = input.running.iter().find(|j| j.id == d.id) else {
                return true;
            };
            if d.workers < j.workers {
                return !head_borrows;
            }
            let Some(q) = j
                .stats
                .queue
                .map(|q| q as usize)
                .filter(|&q| q < held.len())
            else {
                return true;
            };
            let more = (d.workers - j.workers).saturating_mul(j.worker_request.gpus);
            let after = held[q].saturating_add(more);
            if more > 0 && after > shares[q] && starved(q) {
                return false;
            }
            held[q] = after;
            true
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{gang_unit, gpu_worker, ps, running_job, view_of, waiting_job};
    use crate::types::{Changes, JobStats};

    fn queue(name: &str, guaranteed: u32, used: u32, demand: u32) -> Queue {
        Queue {
            name: name.into(),
            parent: None,
            weight_milli: 1_000,
            guaranteed_gpus: guaranteed,
            borrowing_limit_gpus: None,
            used_gpus: used,
            demand_gpus: demand,
        }
    }

    /// A view of `nodes` nodes of 4 GPUs, `free` of them free on each,
    /// with `queues`.
    fn view(nodes: usize, free: u32, queues: Vec<Queue>) -> View {
        let mut c = crate::testing::capacity(&vec![(32_000, 131_072, 4); nodes]);
        c.free_gpus = vec![free; nodes];
        let mut v = view_of(&c);
        v.apply(&Changes {
            reset: false,
            count: nodes as u32,
            nodes: Vec::new(),
            levels: Vec::new(),
            domains: Vec::new(),
            queues: Some(queues),
        });
        v
    }

    #[test]
    fn shares_meet_what_each_queue_is_owed_then_split_the_rest_by_weight() {
        // 16 GPUs: `a` owed 4 of its 4-GPU guarantee and asks 12; `b` owed 4
        // and asks 4; the 8 left go to `a`, the only queue asking more.
        let qs = [queue("a", 4, 0, 12), queue("b", 4, 0, 4)];
        assert_eq!(fair_shares(&qs, 16), [12, 4]);
        // Both ask for everything: equal weights split evenly.
        let qs = [queue("a", 4, 0, 32), queue("b", 4, 0, 32)];
        assert_eq!(fair_shares(&qs, 16), [8, 8]);
        // Weight 3:1 splits the 8 beyond the guarantees 6:2.
        let mut heavy = queue("a", 4, 0, 32);
        heavy.weight_milli = 3_000;
        assert_eq!(fair_shares(&[heavy, queue("b", 4, 0, 32)], 16), [10, 6]);
        // A borrowing limit caps a queue; the rest goes to the other.
        let mut capped = queue("a", 4, 0, 32);
        capped.borrowing_limit_gpus = Some(1);
        assert_eq!(fair_shares(&[capped, queue("b", 4, 0, 32)], 16), [5, 11]);
    }

    #[test]
    fn the_queue_furthest_below_its_share_goes_first_and_a_queue_keeps_its_order() {
        // `a` holds 8 of its share of 8, `b` none: b's units come first,
        // then they alternate as each takes its GPUs.
        let v = view(4, 4, vec![queue("a", 8, 8, 16), queue("b", 8, 0, 8)]);
        let q = |id: u64, queue: u32| Queued {
            id,
            arrival_ms: id,
            priority: 0,
            pods: 4,
            total: crate::types::Resources {
                cpu_milli: 0,
                memory_mib: 0,
                gpus: 4,
            },
            stats: JobStats {
                queue: Some(queue),
                ..JobStats::NONE
            },
        };
        let units = [q(0, 0), q(1, 0), q(2, 1), q(3, 1)];
        assert_eq!(order(&units, vec![0, 1, 2, 3], &v), [2, 3, 0, 1]);
        // Without queues the base order stands.
        assert_eq!(
            order(&units, vec![1, 0, 3, 2], &view(1, 1, vec![])),
            [1, 0, 3, 2]
        );
    }

    #[test]
    fn admission_stops_at_the_borrowing_limit_and_at_the_fair_share_while_another_queue_is_owed() {
        let mut unit = gang_unit(4, 4, 4, 4, gpu_worker(), ps());
        unit.stats.queue = Some(0);
        // `a` holds 8; 4 more would be 12, beyond its fair share of 8 while
        // `b` holds 0 of the 8 it is owed.
        let v = view(4, 4, vec![queue("a", 8, 8, 16), queue("b", 8, 0, 8)]);
        let why = hold_back(&unit, &v).expect("held back");
        assert!(
            why.contains("fair share of 8") && why.contains("queue b"),
            "{why}"
        );
        // Once `b` asks for nothing, `a` may borrow.
        let v = view(4, 4, vec![queue("a", 8, 8, 16), queue("b", 8, 0, 0)]);
        assert_eq!(hold_back(&unit, &v), None);
        // But not beyond its borrowing limit.
        let mut limited = queue("a", 8, 8, 16);
        limited.borrowing_limit_gpus = Some(2);
        let v = view(4, 4, vec![limited, queue("b", 8, 0, 0)]);
        let why = hold_back(&unit, &v).expect("held back");
        assert!(why.contains("borrowing limit of 2"), "{why}");
        // Nor beyond its parent's: `a` under `team`, which may not borrow.
        let mut team = queue("team", 8, 0, 0);
        team.borrowing_limit_gpus = Some(0);
        let mut child = queue("a", 8, 8, 16);
        child.parent = Some(1);
        let v = view(4, 4, vec![child, team, queue("b", 8, 0, 0)]);
        let why = hold_back(&unit, &v).expect("held back");
        assert!(
            why.contains("queue team would hold 12") && why.contains("borrowing limit of 0"),
            "{why}"
        );
    }

    #[test]
    fn reclaim_shrinks_the_elastic_jobs_of_a_queue_above_its_share_for_one_that_is_owed() {
        // 16 GPUs, all held by queue `a` (share 8): its job 1 (12 workers,
        // min 4) and job 2 (4 workers, fixed). Queue `b` waits with a
        // 4-worker job and holds nothing of the 8 it is owed.
        let v = view(4, 0, vec![queue("a", 8, 16, 16), queue("b", 8, 0, 4)]);
        let mut elastic = running_job(1, 12, 4, 12, 0);
        elastic.stats.queue = Some(0);
        let mut fixed = running_job(2, 4, 4, 4, 1);
        fixed.stats.queue = Some(0);
        let mut waiting = waiting_job(3, 10, 4, 4);
        waiting.unit.stats.queue = Some(1);
        let input = ScaleInput {
            now_ms: 100,
            running: vec![elastic, fixed],
            waiting: vec![waiting],
            last_admit_ms: 0,
            last_scale_down_ms: 0,
        };
        let d = reclaim(&input, &v);
        assert_eq!(d.len(), 1, "{d:?}");
        assert_eq!((d[0].id, d[0].workers), (1, 8), "four GPUs back");
        // With job 1 at 10 workers of minimum, shrinking it frees 2 of
        // the 4 GPUs needed: no restart is spent on it.
        let mut short = input.clone();
        short.running[0].min_workers = 10;
        assert_eq!(reclaim(&short, &v), []);
        // An owed job whose room the shrinks cannot free (12 GPUs at its
        // minimum, 8 to be had) does not keep them from the next one.
        let mut wide = waiting_job(4, 5, 12, 12);
        wide.unit.stats.queue = Some(1);
        let mut behind = input.clone();
        behind.waiting.insert(0, wide);
        let d = reclaim(&behind, &v);
        assert_eq!(d.len(), 1, "{d:?}");
        assert!(d[0].reason.contains("room for job 3"), "{d:?}");
        // A grow of job 1 is dropped while `b` is owed.
        let grow = vec![ScaleDecision {
            id: 1,
            workers: 12,
            reason: String::new(),
        }];
        let mut input = input;
        input.running[0].workers = 8;
        assert!(limit_resizes(grow, &input, &v).is_empty());
        // Nor does job 1 shrink for a waiting head of queue `a`, which
        // already holds its guarantee.
        let shrink = vec![ScaleDecision {
            id: 1,
            workers: 4,
            reason: String::new(),
        }];
        input.waiting[0].unit.stats.queue = Some(0);
        assert!(limit_resizes(shrink, &input, &v).is_empty());
    }
}
