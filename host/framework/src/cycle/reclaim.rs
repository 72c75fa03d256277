//! Queues in preemption (Kueue's `reclaimWithinCohort: Any` with
//! `withinClusterQueue: LowerPriority`). With `reclaim` on and queues set,
//! a unit may take room from another queue only while that queue borrows
//! (holds more than its guarantee), and only what it borrows: victims of
//! one queue are chosen, least important first, while their GPUs together
//! stay within what it holds beyond its guarantee, so no queue is pushed
//! below what it is owed. A unit whose queue is owed GPUs — it stays
//! within its queue's guarantee once placed — takes them back whatever
//! the priorities; any other unit only from lower-priority work, as
//! without queues. The search is preemption's (shrinks of elastic jobs
//! before evictions, disruption budgets honoured, the fewest victims).
//!
//! Queues may form a tree. What a queue holds is its subtree's, and
//! between two queues only the queues below their nearest common ancestor
//! count: a victim's queue and its ancestors up to there must each borrow
//! what is taken, and the unit's queue and its ancestors up to there must
//! each stay within their guarantee for the unit to take it whatever the
//! priorities. Sub-teams of one team reclaim from each other without the
//! team as a whole being owed anything.

use std::collections::BTreeMap;

use super::victims::Candidate;
use super::{Scheduler, UnitPlan};
use crate::cluster::PodState;
use crate::unit::UnitKey;

/// Where a unit's queue stands among the queues, for its preemption
/// search: per other queue, what may be taken from it and on what terms.
#[derive(Debug, Clone)]
pub(crate) struct Stand {
    /// Each queue's name.
    names: Vec<String>,
    /// What each queue's subtree holds (GPUs on their way counted where
    /// they go) beyond its guarantee, negative below it; the unit's queue
    /// and its ancestors count the unit's GPUs as held.
    beyond: Vec<i64>,
    /// Per queue, its chain of queues below its nearest common ancestor
    /// with the unit's queue; empty for the unit's queue, its ancestors and
    /// its descendants (one line of teams: priorities alone decide).
    paths: Vec<Vec<usize>>,
    /// Per queue, whether the unit's queue and its ancestors below their
    /// common ancestor stay within their guarantees: the unit is owed what
    /// that queue borrows, whatever the priorities.
    owed: Vec<bool>,
}

impl Stand {
    /// The stand of a unit of queue `own` among queues with these parents
    /// and `beyond` (see the fields).
    fn new(own: usize, names: Vec<String>, parent: &[Option<usize>], beyond: Vec<i64>) -> Stand {
        let chain = |q: usize| -> Vec<usize> {
            std::iter::successors(Some(q), |&a| parent[a])
                .take(parent.len())
                .collect()
        };
        let mine = chain(own);
        let (mut paths, mut owed) = (Vec::new(), Vec::new());
        for q in 0..names.len() {
            let theirs = chain(q);
            let path: Vec<usize> = if theirs.contains(&own) || mine.contains(&q) {
                Vec::new()
            } else {
                theirs
                    .iter()
                    .copied()
                    .take_while(|a| !mine.contains(a))
                    .collect()
            };
            owed.push(
                mine.iter()
                    .take_while(|a| !theirs.contains(a))
                    .all(|&a| beyond[a] <= 0),
            );
            paths.push(path);
        }
        Stand {
            names,
            beyond,
            paths,
            owed,
        }
    }

    /// GPUs that may be taken from queue `q`: what each queue of its path
    /// borrows, the least of them.
    fn spare(&self, q: usize) -> u64 {
        self.paths[q]
            .iter()
            .map(|&a| self.beyond[a].max(0) as u64)
            .min()
            .unwrap_or(0)
    }

    /// Whether it may reclaim anything whatever the priorities.
    pub(crate) fn reclaims(&self) -> bool {
        (0..self.names.len()).any(|q| self.owed[q] && self.spare(q) > 0)
    }
}

impl Scheduler {
    /// Where `unit`'s queue stands, when reclaim is on and it has a queue.
    pub(crate) fn stand_of(&self, unit: &UnitPlan) -> Option<Stand> {
        let c = &self.cluster;
        if !self.config().reclaim || c.queues().is_empty() {
            return None;
        }
        let own = c.queue_of(c.job(unit.job.as_deref()?)?)? as usize;
        let rows = c.queue_rows();
        let asks: u64 = unit
            .pods
            .iter()
            .filter_map(|k| c.pod(k))
            .map(|(p, _)| u64::from(p.request.gpus))
            .sum();
        let moving = self.in_flight(&unit.key);
        let mut held: Vec<u64> = rows
            .iter()
            .map(|r| {
                let (leaving, arriving) = moving.get(r.name.as_str()).copied().unwrap_or_default();
                (u64::from(r.used_gpus) + arriving).saturating_sub(leaving)
            })
            .collect();
        held[own] += asks;
        let parent: Vec<Option<usize>> = rows
            .iter()
            .map(|r| r.parent.map(|p| p as usize).filter(|&p| p < rows.len()))
            .collect();
        let subtree = crate::teams::subtree_sums(&parent, &held);
        let beyond = subtree
            .iter()
            .zip(&rows)
            .map(|(&h, r)| h as i64 - i64::from(r.guaranteed_gpus))
            .collect();
        let names = rows.into_iter().map(|r| r.name).collect();
        Some(Stand::new(own, names, &parent, beyond))
    }

    /// GPUs on their way between queues, by queue: (held by pods chosen as
    /// victims and not gone yet, asked by the pending pods of other units
    /// preempting for room). Counting them keeps the preemptors of one
    /// round, and of the rounds until their victims are gone, from taking
    /// back the same borrowed GPUs twice and pushing the lender below its
    /// guarantee (which would have it take them back in turn).
    fn in_flight(&self, except: &UnitKey) -> BTreeMap<&str, (u64, u64)> {
        let c = &self.cluster;
        let queue_of = |job: &str| c.job(job)?.queue.as_deref();
        let mut moving: BTreeMap<&str, (u64, u64)> = BTreeMap::new();
        for (unit, victims) in &self.preempting {
            for (pod, state) in victims.iter().filter_map(|k| c.pod(k)) {
                if let (PodState::Bound(_), Some(q)) =
                    (state, pod.job.as_deref().and_then(queue_of))
                {
                    moving.entry(q).or_default().0 += u64::from(pod.request.gpus);
                }
            }
            if unit == except {
                continue;
            }
            let Some(job) = unit.job_name() else { continue };
            let Some(q) = queue_of(job) else { continue };
            let asks: u64 = c
                .job_pods(job)
                .filter(|(_, s)| matches!(s, PodState::Pending))
                .map(|(p, _)| u64::from(p.request.gpus))
                .sum();
            moving.entry(q).or_default().1 += asks;
        }
        moving
    }

    /// Whether a unit at `priority` standing as `stand` may take the room
    /// of a placed unit of job `job` at priority `p`: with the victim's
    /// queue when that is another team's, borrowing one.
    pub(crate) fn may_take(
        &self,
        stand: Option<&Stand>,
        priority: i32,
        job: Option<&str>,
        p: i32,
    ) -> Option<Option<String>> {
        let lower = p < priority;
        let Some(stand) = stand else {
            return lower.then_some(None);
        };
        let queue = job
            .and_then(|j| self.cluster.job(j))
            .and_then(|j| self.cluster.queue_of(j))
            .map(|q| q as usize)
            .filter(|&q| q < stand.names.len());
        match queue {
            Some(q) if !stand.paths[q].is_empty() => {
                let borrows = stand.spare(q) > 0;
                (borrows && (lower || stand.owed[q])).then(|| Some(stand.names[q].clone()))
            }
            _ => lower.then_some(None),
        }
    }

    /// Why `unit` waits while GPUs are taken back for another unit whose
    /// queue is owed them (until that one is placed): its queue is giving
    /// them back (given the room, it would take it again and be evicted
    /// again), or placing it would take its queue, or a queue above it
    /// below the common ancestor with the preemptor's, beyond its
    /// guarantee (room freed for a queue owed it is not lent out again
    /// first). While a reclaim is under way, that costs each unit tried a
    /// pass over the queues' jobs.
    pub(crate) fn giving_back(&self, unit: &UnitPlan) -> Option<String> {
        if self.reclaiming.is_empty() {
            return None;
        }
        let queue = self.cluster.job(unit.job.as_deref()?)?.queue.as_ref()?;
        let others = || self.reclaiming.iter().filter(|(k, _)| **k != unit.key);
        if let Some((preemptor, _)) = others().find(|(_, queues)| queues.contains(queue.as_str())) {
            return Some(format!(
                "queue {queue} is giving GPUs it borrows back to {preemptor}, whose queue is owed them"
            ));
        }
        let stand = self.stand_of(unit)?;
        let c = &self.cluster;
        let (preemptor, _) = others().find(|(k, _)| {
            k.job_name()
                .and_then(|j| c.queue_of(c.job(j)?))
                .is_some_and(|q| !stand.owed.get(q as usize).copied().unwrap_or(true))
        })?;
        Some(format!(
            "queue {queue} would borrow beyond its guarantee while GPUs are taken back for {preemptor}, whose queue is owed them"
        ))
    }

    /// Keep, of `candidates` (least important first), those of other
    /// queues while the GPUs taken from each queue below the common
    /// ancestor stay within what it borrows.
    pub(crate) fn within_borrowed(&self, candidates: &mut Vec<Candidate>, stand: &Stand) {
        let c = &self.cluster;
        let mut left: Vec<u64> = stand.beyond.iter().map(|&b| b.max(0) as u64).collect();
        candidates.retain(|v| {
            let Some(q) = v
                .queue
                .as_deref()
                .and_then(|q| stand.names.iter().position(|n| n == q))
            else {
                return true;
            };
            let gpus: u64 = v
                .pods
                .iter()
                .filter_map(|(k, _)| c.pod(k))
                .map(|(p, _)| u64::from(p.request.gpus))
                .sum();
            let path = &stand.paths[q];
            if path.is_empty() || path.iter().any(|&a| left[a] < gpus) {
                return false;
            }
            for &a in path {
                left[a] -= gpus;
            }
            true
        });
    }
}
