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

use std::collections::BTreeMap;

use super::preemption::Candidate;
use super::{Scheduler, UnitPlan};
use crate::cluster::PodState;
use crate::unit::UnitKey;

/// Where a unit's queue stands, for its preemption search.
#[derive(Debug, Clone)]
pub(crate) struct Stand {
    /// The unit's queue.
    own: String,
    /// The unit's queue stays within its guarantee with the unit placed.
    pub(crate) owed: bool,
    /// GPUs each other queue holds beyond its guarantee, by name.
    borrowed: BTreeMap<String, u64>,
}

impl Stand {
    /// Whether it may reclaim anything whatever the priorities.
    pub(crate) fn reclaims(&self) -> bool {
        self.owed && !self.borrowed.is_empty()
    }
}

impl Scheduler {
    /// Where `unit`'s queue stands, when reclaim is on and it has a queue.
    pub(crate) fn stand_of(&self, unit: &UnitPlan) -> Option<Stand> {
        let c = &self.cluster;
        if !self.config().reclaim || c.queues().is_empty() {
            return None;
        }
        let own = c.job(unit.job.as_deref()?)?.queue.as_ref()?.to_string();
        let rows = c.queue_rows();
        let mine = rows.iter().find(|r| r.name == own)?;
        let asks: u64 = unit
            .pods
            .iter()
            .filter_map(|k| c.pod(k))
            .map(|(p, _)| u64::from(p.request.gpus))
            .sum();
        let moving = self.in_flight(&unit.key);
        let held = |name: &str, used: u32| {
            let (leaving, arriving) = moving.get(name).copied().unwrap_or_default();
            (u64::from(used) + arriving).saturating_sub(leaving)
        };
        let owed = held(&own, mine.used_gpus) + asks <= u64::from(mine.guaranteed_gpus);
        let borrowed = rows
            .iter()
            .filter(|r| r.name != own)
            .filter_map(|r| {
                let over = held(&r.name, r.used_gpus).checked_sub(u64::from(r.guaranteed_gpus))?;
                (over > 0).then(|| (r.name.clone(), over))
            })
            .collect();
        Some(Stand {
            own,
            owed,
            borrowed,
        })
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
    /// queue when that is another, borrowing one.
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
            .and_then(|j| j.queue.as_ref())
            .map(|q| q.to_string());
        match queue {
            Some(q) if q != stand.own => {
                let borrows = stand.borrowed.contains_key(&q);
                (borrows && (lower || stand.owed)).then_some(Some(q))
            }
            _ => lower.then_some(None),
        }
    }

    /// Why `unit` waits while GPUs its queue borrows are taken back for
    /// another unit (until that one is placed): given the room, it would
    /// take it again and the preemptor would evict it again.
    pub(crate) fn giving_back(&self, unit: &UnitPlan) -> Option<String> {
        if self.reclaiming.is_empty() {
            return None;
        }
        let queue = self.cluster.job(unit.job.as_deref()?)?.queue.as_ref()?;
        let (preemptor, _) = self
            .reclaiming
            .iter()
            .find(|(k, queues)| **k != unit.key && queues.contains(queue.as_str()))?;
        Some(format!(
            "queue {queue} is giving GPUs it borrows back to {preemptor}, whose queue is owed them"
        ))
    }

    /// Keep, of `candidates` (least important first), those of other
    /// queues while each queue's together stay within what it borrows.
    pub(crate) fn within_borrowed(&self, candidates: &mut Vec<Candidate>, stand: &Stand) {
        let c = &self.cluster;
        let mut left = stand.borrowed.clone();
        candidates.retain(|v| {
            let Some(queue) = &v.queue else {
                return true;
            };
            let gpus: u64 = v
                .pods
                .iter()
                .filter_map(|(k, _)| c.pod(k))
                .map(|(p, _)| u64::from(p.request.gpus))
                .sum();
            match left.get_mut(queue) {
                Some(spare) if *spare >= gpus => {
                    *spare -= gpus;
                    true
                }
                _ => false,
            }
        });
    }
}
