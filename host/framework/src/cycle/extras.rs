//! Extras after quorums. A gang's pods beyond its `minMember` are extras.
//! When a round has more than one gang that waits for its quorum or has
//! extras, each is placed at its quorum only, and the extras of all of
//! them are placed after the whole queue has been tried, one pod per gang
//! in queue order, over and over until none fits (Volcano's "each job
//! gets its min first"). Without this, the first gang of three 6-pod
//! gangs with `minMember` 2 on 6 slots would take all six and the other
//! two would not start.
//!
//! Extras are a PodGroup's: its `minMember` is what its workload needs to
//! run, the rest join as they find room. A job of a simulator trace runs
//! only at its full size (its minimum is an elastic bound, which a policy
//! chooses with `pre-filter` sizes), so its pods are not split this way:
//! part of them would hold GPUs without training. A gang that must stay
//! in one topology domain is placed whole in it: its extras would
//! otherwise have to follow it there.

use std::collections::VecDeque;

use super::*;
use crate::queue::Setback;

/// A gang placed at its quorum (or already holding it) whose extras wait
/// for the end of the round.
pub(super) struct Deferred {
    /// Index of the unit in the round's units.
    unit: usize,
    /// The round's bind of its quorum, which the extras join so that the
    /// gang is bound together or not at all; `None` when its quorum was
    /// bound in an earlier round.
    bind: Option<usize>,
}

impl Deferred {
    /// A gang whose quorum is already bound: all its pending pods are
    /// extras.
    pub(super) fn quorate(unit: usize) -> Deferred {
        Deferred { unit, bind: None }
    }

    /// A gang whose quorum this round placed, bound by `to_bind`'s last
    /// entry for it.
    pub(super) fn placed(unit: usize, to_bind: &[ToBind]) -> Option<Deferred> {
        let bind = to_bind.iter().rposition(|b| b.unit == unit)?;
        Some(Deferred {
            unit,
            bind: Some(bind),
        })
    }
}

impl Scheduler {
    /// Whether the round's extras are shared: at least two of its gangs
    /// wait for a quorum or have extras. A gang alone is placed whole, as
    /// many of its pods as fit.
    pub(super) fn shares_extras<'a>(
        &self,
        units: impl Iterator<Item = &'a UnitPlan> + Clone,
    ) -> bool {
        // Most rounds have no gang with extras: one look at each job.
        units.clone().any(|u| self.quorum_cap(u).is_some())
            && units
                .filter(|u| self.quorum_cap(u).is_some() || self.awaits_quorum(u))
                .nth(1)
                .is_some()
    }

    /// A gang that has fewer pods holding a node than its `minMember` (or
    /// none, when it names no `minMember`).
    fn awaits_quorum(&self, unit: &UnitPlan) -> bool {
        let Some(job) = unit.job.as_deref() else {
            return false;
        };
        let min_member = self.cluster.job(job).map_or(0, |j| j.min_member) as usize;
        self.cluster.job_placed(job) < min_member.max(1)
    }

    /// How many of `unit`'s pending pods it still needs for its quorum,
    /// when it has extras beyond that (`Some(0)`: the quorum is held and
    /// every pending pod is an extra); `None` for a unit without extras,
    /// one kept in a topology domain, or a job no PodGroup declares.
    pub(super) fn quorum_cap(&self, unit: &UnitPlan) -> Option<usize> {
        let job = unit.job.as_deref()?;
        let j = self.cluster.job(job)?;
        if !j.declared || j.min_member == 0 || j.topology.is_some() || unit.within.is_some() {
            return None;
        }
        let need = (j.min_member as usize).saturating_sub(self.cluster.job_placed(job));
        (unit.pods.len() > need).then_some(need)
    }

    /// Place the deferred gangs' extras: one pod per gang in queue order,
    /// again and again, until none of them can place another. A gang's
    /// extras stop at the first that fits nowhere (the others ask for the
    /// same or follow it); they wait for a later round.
    pub(super) fn place_extras(
        &mut self,
        now_ms: u64,
        policy: &dyn Hooks,
        units: &[UnitPlan],
        deferred: Vec<Deferred>,
        to_bind: &mut Vec<ToBind>,
        report: &mut RoundReport,
    ) {
        // Each gang's extras still pending, in placement order, at the size
        // its quorum was admitted at.
        let mut left: Vec<VecDeque<usize>> = deferred
            .iter()
            .map(|d| {
                let unit = &units[d.unit];
                let size = d.bind.and_then(|b| to_bind[b].gang.flatten());
                (0..unit.pods.len())
                    .filter(|&t| {
                        let task = &unit.wit.tasks[t];
                        (task.role != wit::Role::Worker || size.is_none_or(|s| task.index < s))
                            && self
                                .cluster
                                .pod(&unit.pods[t])
                                .is_some_and(|(_, s)| s == PodState::Pending)
                    })
                    .collect()
            })
            .collect();
        let mut placed: Vec<Vec<(PodKey, usize)>> = vec![Vec::new(); deferred.len()];
        let mut why: Vec<Option<String>> = vec![None; deferred.len()];
        loop {
            let mut progress = false;
            for (g, d) in deferred.iter().enumerate() {
                let Some(t) = left[g].pop_front() else {
                    continue;
                };
                let unit = &units[d.unit];
                let one = UnitPlan {
                    key: unit.key.clone(),
                    job: unit.job.clone(),
                    pods: vec![unit.pods[t].clone()],
                    wit: wit::Unit {
                        tasks: vec![unit.wit.tasks[t]],
                        ..unit.wit.clone()
                    },
                    within: None,
                    cap: None,
                    gated: unit.gated,
                    wants_placed: unit.wants_placed,
                    least: unit.least,
                };
                match self.place_among(now_ms, policy, &one, None, None) {
                    Ok(pods) => {
                        progress = true;
                        placed[g].extend(pods);
                    }
                    Err(PlaceError::Unschedulable(reason)) => {
                        left[g].clear();
                        why[g] = Some(reason);
                    }
                    Err(PlaceError::Policy(e)) => {
                        left[g].clear();
                        policy_failed(report, &unit.key, e);
                    }
                }
            }
            if !progress {
                break;
            }
        }
        for ((d, pods), why) in deferred.into_iter().zip(placed).zip(why) {
            match d.bind {
                Some(b) => to_bind[b].pods.extend(pods),
                None if !pods.is_empty() => to_bind.push(ToBind {
                    unit: d.unit,
                    pods,
                    gang: Some(None),
                }),
                None => {
                    // Not tried earlier in the round: this is its attempt.
                    let unit = &units[d.unit];
                    report.decisions.push(Decision::Unschedulable {
                        unit: unit.key.clone(),
                        reason: Unschedulable::NoFit {
                            rejections: why.unwrap_or_default(),
                            preemption: None,
                        },
                    });
                    self.set_back(unit, Setback::Unschedulable, now_ms);
                }
            }
        }
    }
}
