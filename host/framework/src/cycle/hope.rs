//! Units passed over by room alone (see [`Wake::Fits`]). A unit found
//! unschedulable, for which the nodes do not have room for as many of its
//! smallest pod as the fewest it can start with, and which cannot preempt,
//! would only be found unschedulable again: every filter checks the room
//! first, and the policy can narrow a placement but never widen it. Its
//! attempt is counted as made and failed, with its last reason kept and no
//! call to the policy, so a round costs the units that could fit rather
//! than the queue's length.

use super::units::Parked;
use super::*;
use crate::model::Resources;
use crate::queue::{Need, Setback, Wake};

/// Whether the nodes have room for each need asked about, remembered
/// while the cluster's room does not change (a round's needs come in a
/// few shapes).
#[derive(Debug, Default)]
pub(super) struct RoomSeen(Vec<((Resources, u32), bool)>);

impl RoomSeen {
    fn room_for(&mut self, cluster: &Cluster, need: &Need) -> bool {
        let key = (need.request, need.pods);
        if let Some(&(_, room)) = self.0.iter().find(|(seen, _)| *seen == key) {
            return room;
        }
        let room = cluster.columns().room_for(need.request, need.pods);
        self.0.push((key, room));
        room
    }

    /// Room was taken or given back: what was seen may no longer hold.
    pub(super) fn forget(&mut self) {
        self.0.clear();
    }
}

/// Whether a unit needing `need` cannot be placed now and cannot make room
/// by preemption. `lowest_pending`: the lowest priority of any pending
/// unit, found only when asked (a unit placed before it in the round could
/// otherwise become its victim).
pub(super) fn hopeless(
    cluster: &Cluster,
    config: &SchedulerConfig,
    need: &Need,
    seen: &mut RoomSeen,
    lowest_pending: &mut impl FnMut() -> Option<i32>,
) -> bool {
    if seen.room_for(cluster, need) {
        return false;
    }
    // As `find_room`'s first checks: with nothing of lower priority and no
    // queue to reclaim for, it finds no victim.
    let may_preempt = config.preemption
        && (cluster.holds_below(need.priority)
            || (config.reclaim && !cluster.queues().is_empty())
            || lowest_pending().is_some_and(|p| p < need.priority));
    !may_preempt
}

impl Scheduler {
    /// What `unit` needs to fit, kept with it when it is found
    /// unschedulable, if the driver wakes units only when they could fit
    /// and every attempt at it would place some pod.
    pub(super) fn need(&self, unit: &UnitPlan) -> Option<Need> {
        if self.config.wake != Wake::Fits {
            return None;
        }
        let pods = self.fewest_placed(unit);
        (pods > 0).then_some(Need {
            request: unit.least,
            pods,
            priority: unit.wit.priority,
        })
    }

    /// The fewest of its pods an attempt at `unit` places. A pod alone, or
    /// a gang already running (its pods join one by one): one. A new gang:
    /// its quorum (`minMember` less what it holds, as its optional members
    /// and the quorum retry place), or the pods of the smallest size its
    /// policy may choose (its other roles and its first `min` workers),
    /// whichever is fewer.
    fn fewest_placed(&self, unit: &UnitPlan) -> u32 {
        let pending = unit.pods.len() as u32;
        let Some(job) = unit.job.as_deref().filter(|_| unit.wit.running == 0) else {
            return pending.min(1);
        };
        let entry = self.cluster.jobs.get(job);
        let quorum = match entry.map_or(0, |e| e.job.min_member) {
            0 => pending,
            min_member => min_member.saturating_sub(entry.map_or(0, |e| e.counts.placed)),
        };
        let lo = unit.wit.min_workers.min(unit.wit.workers);
        let smallest = unit
            .wit
            .tasks
            .iter()
            .filter(|t| t.role != wit::Role::Worker || t.index < lo)
            .count() as u32;
        pending.min(quorum).min(smallest)
    }

    /// Whether this round may pass units over by room alone: the driver
    /// asked for it, nothing is being preempted or held for a preemptor
    /// (an attempt would clear those), and the policy is not suspended (an
    /// attempt would fail on that instead).
    pub(super) fn passes_over(&mut self, policy: &dyn Hooks) -> bool {
        self.config.wake == Wake::Fits
            && self.nominated.is_empty()
            && self.preempting.is_empty()
            && self.held.is_empty()
            && self.reclaiming.is_empty()
            && self.breaker.is_closed(&policy.info().sha256)
    }

    /// Whether the round passes a parked lone pod over at its turn, as
    /// [`Scheduler::passed_over`] would its plan: then it is set back as
    /// that would be.
    pub(super) fn passes_parked_over(
        &mut self,
        parked: &Parked,
        seen: &mut RoomSeen,
        now_ms: u64,
    ) -> bool {
        // Units placed earlier in the round hold their nodes now, as for
        // `passed_over`.
        let mut lowest_pending = || None;
        if !hopeless(
            &self.cluster,
            &self.config,
            &parked.need,
            seen,
            &mut lowest_pending,
        ) {
            return false;
        }
        let traits = (parked.wants_placed, Some(parked.need));
        let waits = self.config.waits();
        self.queue
            .set_back(parked.id, Setback::Unschedulable, traits, now_ms, waits);
        true
    }

    /// Whether the round passes `unit` over at its turn: it was found
    /// unschedulable before and nothing of its own changed since, it is
    /// tried whole, and the room left fits none of its pods.
    pub(super) fn passed_over(&self, unit: &UnitPlan, seen: &mut RoomSeen) -> bool {
        if unit.cap.is_some() || self.queue.need(unit.wit.id).is_none() {
            return false;
        }
        let Some(need) = self.need(unit) else {
            return false;
        };
        // Units placed earlier in the round hold their nodes now: the
        // cluster's own count of lower priorities sees them.
        hopeless(&self.cluster, &self.config, &need, seen, &mut || None)
    }
}
