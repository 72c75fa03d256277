//! Preemption, after kube-scheduler's DefaultPreemption and the way v1.37
//! preempts for gangs: a unit that fits nowhere makes room by taking it
//! from lower-priority work.
//!
//! - Victims are whole units: every placed member of a gang, or a lone pod;
//!   never part of a gang, since a gang missing a member cannot run.
//! - Elastic jobs are shrunk towards their minimum before anything is
//!   evicted: a shrink costs a restart, an eviction the whole job.
//! - A unit with a pod whose `preemptionPolicy` is `Never` does not preempt.
//! - Disruption budgets are not overdrawn: a unit whose eviction would take
//!   a budget below zero is not a candidate (kube-scheduler only prefers
//!   such victims last; Dragon evicts through the Eviction API, which would
//!   refuse them).
//!
//! The search is cluster-wide, as kube-scheduler's is for a gang (a gang
//! spans nodes, so a node-by-node search cannot place it): take every
//! candidate away, check the unit then fits (a dry run of the placement
//! the round would make, the policy's filter and score included), then
//! give the candidates back one at a time, most important first, keeping
//! each whose return still leaves room. What is left are the victims: no
//! one of them could have been spared. A dry run reserves nothing; every
//! state it changes is put back.

use std::collections::{BTreeMap, BTreeSet};

use crate::cluster::PodState;
use crate::cluster::topology::Domain;
use crate::cycle::{PlaceError, Scheduler, Sizes, UnitPlan};
use crate::model::{Preemption, Role};
use crate::names::PodKey;
use crate::unit::UnitKey;
use dragon_runtime::{CallError, Hooks};

use super::victims::{Candidate, VictimCost};

/// At most this many of the least important units are considered as
/// victims (each costs one dry run of the placement).
pub(crate) const MAX_CANDIDATES: usize = 128;

/// At most this many domains are searched for a unit that must stay in
/// one (each search costs O(log n + k) dry runs over one domain's nodes).
pub(crate) const MAX_DOMAINS: usize = 16;

/// What a search for room came to.
#[derive(Debug)]
pub(crate) enum Room {
    /// Preemption cannot help: it is off, the unit may not preempt, or no
    /// lower-priority work would make room. Says why when that is news
    /// (not for a unit with nothing below it to preempt).
    None(Option<&'static str>),
    /// Victims chosen earlier still hold this many pods.
    Awaited(usize),
    /// Make room with these: shrinks, or evictions, never both; and where
    /// the unit's pods would go once they are gone (node indices).
    Victims(Vec<Candidate>, Vec<(PodKey, usize)>),
}

impl Scheduler {
    /// Look for lower-priority work whose room would let `unit` be placed.
    ///
    /// # Errors
    /// The policy failed a call of a dry run.
    pub(crate) fn find_room(
        &mut self,
        now_ms: u64,
        policy: &dyn Hooks,
        unit: &UnitPlan,
        gangs: bool,
    ) -> Result<Room, CallError> {
        // A gang's priority is its members' highest, so without a pod of
        // lower priority holding a node there is no victim.
        if !self.config().preemption {
            return Ok(Room::None(None));
        }
        let stand = self.stand_of(unit);
        let reclaims = stand.as_ref().is_some_and(|s| s.reclaims());
        if !self.cluster.holds_below(unit.wit.priority) && !reclaims {
            return Ok(Room::None(None));
        }
        let never = unit.pods.iter().any(|k| {
            self.cluster
                .pod(k)
                .is_some_and(|(p, _)| p.preemption == Preemption::Never)
        });
        if never {
            return Ok(Room::None(Some(
                "not eligible due to preemptionPolicy=Never",
            )));
        }
        // Victims that left are dropped from the list each round.
        if let Some(victims) = self.preempting.get(&unit.key) {
            return Ok(Room::Awaited(victims.len()));
        }
        self.protected.retain(|_, until| *until > now_ms);
        self.unshrinkable.retain(|_, until| *until > now_ms);
        let units = self.candidates(unit, gangs, stand.as_ref());
        if units.is_empty() {
            return Ok(Room::None(None));
        }
        if unit.within.is_none()
            && let Some(level) = self.required_level(unit)
        {
            return self.room_in_one_domain(now_ms, policy, unit, units, level);
        }
        match self.least_victims(now_ms, policy, unit, units)? {
            Some(victims) => self.victims(now_ms, policy, unit, victims),
            None => Ok(Room::None(Some(
                "evicting all the lower-priority work it may evict would not make room",
            ))),
        }
    }

    /// The fewest and least important of `units` whose room lets `unit`
    /// be placed: shrinks of elastic jobs if they are enough, else
    /// evictions within the disruption budgets.
    fn least_victims(
        &mut self,
        now_ms: u64,
        policy: &dyn Hooks,
        unit: &UnitPlan,
        units: Vec<Candidate>,
    ) -> Result<Option<Vec<Candidate>>, CallError> {
        let shrinks = self.shrinks(&units);
        if !shrinks.is_empty()
            && let Some(mut kept) = self.fewest(now_ms, policy, unit, shrinks)?
        {
            self.trim_shrinks(now_ms, policy, unit, &mut kept)?;
            return Ok(Some(kept));
        }
        let evictable = self.within_budgets(units);
        self.fewest(now_ms, policy, unit, evictable)
    }

    /// For a unit that must stay in one domain of `level`: the victims
    /// that free one domain for it, searched domain by domain (at most
    /// [`MAX_DOMAINS`] of them, those holding the most candidate pods
    /// first; a job with placed pods only in theirs), each search confined
    /// to the domain's candidates and nodes. The best is the one that
    /// shrinks rather than evicts, then hurts the least important work,
    /// then the fewest units and pods.
    fn room_in_one_domain(
        &mut self,
        now_ms: u64,
        policy: &dyn Hooks,
        unit: &UnitPlan,
        units: Vec<Candidate>,
        level: usize,
    ) -> Result<Room, CallError> {
        let Ok(pinned) = self.sibling_domain(unit, level) else {
            return Ok(Room::None(Some(
                "its placed pods are not in one domain of its topology level",
            )));
        };
        let domains = self.cluster.domains();
        let mut by_domain: BTreeMap<u32, BTreeSet<usize>> = BTreeMap::new();
        for (i, c) in units.iter().enumerate() {
            for &(_, n) in &c.pods {
                let id = domains.of(level, n);
                if id != 0 && pinned.is_none_or(|p| p == id) {
                    by_domain.entry(id).or_default().insert(i);
                }
            }
        }
        let mut order: Vec<(u32, BTreeSet<usize>)> = by_domain.into_iter().collect();
        let pods = |set: &BTreeSet<usize>| set.iter().map(|&i| units[i].pods.len()).sum::<usize>();
        order.sort_by_key(|(id, set)| (std::cmp::Reverse(pods(set)), *id));
        order.truncate(MAX_DOMAINS);
        let mut best: Option<(VictimCost, UnitPlan, Vec<Candidate>)> = None;
        for (id, set) in order {
            let confined = UnitPlan {
                within: Some(Domain { level, id }),
                ..unit.clone()
            };
            let here: Vec<Candidate> = set.iter().map(|&i| units[i].clone()).collect();
            if let Some(victims) = self.least_victims(now_ms, policy, &confined, here)? {
                let cost = VictimCost::of(&victims);
                if best.as_ref().is_none_or(|(b, ..)| cost < *b) {
                    best = Some((cost, confined, victims));
                }
            }
        }
        match best {
            Some((_, confined, victims)) => self.victims(now_ms, policy, &confined, victims),
            None => Ok(Room::None(Some(
                "evicting the lower-priority work in any one domain of its topology level would not make room there",
            ))),
        }
    }

    /// `victims` as the room found, with where the unit would go once
    /// they are gone (the nodes its pods are nominated to).
    fn victims(
        &mut self,
        now_ms: u64,
        policy: &dyn Hooks,
        unit: &UnitPlan,
        victims: Vec<Candidate>,
    ) -> Result<Room, CallError> {
        let all = vec![true; victims.len()];
        let placed = self
            .fits_without(now_ms, policy, unit, &victims, &all)?
            .unwrap_or_default();
        Ok(Room::Victims(victims, placed))
    }

    /// Placed units `unit` may take the room of — of lower priority, or of
    /// queues that borrow as `stand` allows (see `reclaim`) — least important first
    /// (lowest priority, then latest started), at most [`MAX_CANDIDATES`].
    /// Victims of a preemption under way and units whose eviction was just
    /// refused are left out.
    fn candidates(
        &self,
        unit: &UnitPlan,
        gangs: bool,
        stand: Option<&super::reclaim::Stand>,
    ) -> Vec<Candidate> {
        let c = &self.cluster;
        let priority = unit.wit.priority;
        let taken: BTreeSet<&PodKey> = self.preempting.values().flatten().collect();
        let mut by_unit: BTreeMap<UnitKey, Candidate> = BTreeMap::new();
        for (key, e) in &c.pods {
            let PodState::Bound(node) = e.state else {
                continue;
            };
            let job = e.pod.job.as_deref().and_then(|j| Some((j, c.jobs.get(j)?)));
            let (victim, p, started_ms) = match job {
                Some((name, je)) if gangs || je.job.always_gang() => (
                    UnitKey::job(name),
                    je.job.priority,
                    je.started_ms.unwrap_or(je.job.arrival_ms),
                ),
                _ => (UnitKey::pod(key), e.pod.priority, e.pod.arrival_ms),
            };
            let Some(queue) = self.may_take(stand, priority, victim.job_name(), p) else {
                continue;
            };
            if victim == unit.key || taken.contains(key) || self.protected.contains_key(&victim) {
                continue;
            }
            by_unit
                .entry(victim.clone())
                .or_insert_with(|| Candidate {
                    key: victim,
                    priority: p,
                    started_ms,
                    pods: Vec::new(),
                    shrink: None,
                    queue,
                })
                .pods
                .push((key.clone(), node));
        }
        let mut out: Vec<Candidate> = by_unit.into_values().collect();
        out.sort_by(|a, b| {
            (a.priority, std::cmp::Reverse(a.started_ms), &a.key).cmp(&(
                b.priority,
                std::cmp::Reverse(b.started_ms),
                &b.key,
            ))
        });
        if let Some(stand) = stand {
            self.within_borrowed(&mut out, stand);
        }
        out.truncate(MAX_CANDIDATES);
        out
    }

    /// Of `units`, the running elastic jobs above their minimum, as
    /// shrinks to it: the workers the shrink removes (those of the highest
    /// indices, as their controller removes them). Worker 0 always stays.
    fn shrinks(&self, units: &[Candidate]) -> Vec<Candidate> {
        let c = &self.cluster;
        units
            .iter()
            .filter_map(|u| {
                let job = c.job(u.key.job_name()?)?;
                if self.unshrinkable.contains_key(&job.name) {
                    return None;
                }
                let floor = job.min_workers.max(1);
                if job.workers <= floor || c.job_started_ms(&job.name).is_none() {
                    return None;
                }
                let whole = c
                    .job_pods(&job.name)
                    .all(|(p, s)| c.is_surplus(p) || matches!(s, PodState::Bound(_)));
                if !whole {
                    return None;
                }
                let pods: Vec<(PodKey, usize)> = u
                    .pods
                    .iter()
                    .filter(|(k, _)| {
                        c.pod(k)
                            .is_some_and(|(p, _)| p.role == Role::Worker && p.index >= floor)
                    })
                    .cloned()
                    .collect();
                (!pods.is_empty()).then(|| Candidate {
                    pods,
                    shrink: Some((job.workers, floor)),
                    ..u.clone()
                })
            })
            .collect()
    }

    /// Of `units` (least important first), those that may be evicted
    /// together without taking any disruption budget below zero, the least
    /// important kept first.
    fn within_budgets(&self, units: Vec<Candidate>) -> Vec<Candidate> {
        let mut left: Vec<(&crate::DisruptionBudget, u32)> = self
            .cluster
            .budgets()
            .map(|(_, b)| (b, b.allowed))
            .collect();
        if left.is_empty() {
            return units;
        }
        // Victims of preemptions under way still holding a node count
        // against their budgets until they are gone.
        for key in self.preempting.values().flatten() {
            if let Some((pod, _)) = self.cluster.pod(key) {
                for (b, l) in left.iter_mut() {
                    *l = l.saturating_sub(u32::from(b.covers(pod)));
                }
            }
        }
        units
            .into_iter()
            .filter(|u| {
                let mut take = vec![0u32; left.len()];
                for (k, _) in &u.pods {
                    let Some((pod, _)) = self.cluster.pod(k) else {
                        continue;
                    };
                    for (i, (b, _)) in left.iter().enumerate() {
                        take[i] += u32::from(b.covers(pod));
                    }
                }
                if take.iter().zip(&left).any(|(t, (_, l))| t > l) {
                    return false;
                }
                for (t, (_, l)) in take.iter().zip(left.iter_mut()) {
                    *l -= t;
                }
                true
            })
            .collect()
    }

    /// The fewest of `candidates` (least important first) whose room lets
    /// `unit` be placed: `None` when even all of them would not. The
    /// shortest prefix that leaves room is found by bisection, then each of
    /// it is spared, most important first, if the rest still leave room:
    /// O(log n + k) dry runs for k victims among n candidates.
    fn fewest(
        &mut self,
        now_ms: u64,
        policy: &dyn Hooks,
        unit: &UnitPlan,
        candidates: Vec<Candidate>,
    ) -> Result<Option<Vec<Candidate>>, CallError> {
        let n = candidates.len();
        let prefix = |k: usize| -> Vec<bool> { (0..n).map(|i| i < k).collect() };
        if self
            .fits_without(now_ms, policy, unit, &candidates, &prefix(n))?
            .is_none()
        {
            return Ok(None);
        }
        // The first `hi` leave room; the first `lo` do not (none do: the
        // unit did not fit).
        let (mut lo, mut hi) = (0, n);
        while hi - lo > 1 {
            let mid = lo + (hi - lo) / 2;
            if self
                .fits_without(now_ms, policy, unit, &candidates, &prefix(mid))?
                .is_some()
            {
                hi = mid;
            } else {
                lo = mid;
            }
        }
        let mut gone = prefix(hi);
        for i in (0..hi.saturating_sub(1)).rev() {
            gone[i] = false;
            if self
                .fits_without(now_ms, policy, unit, &candidates, &gone)?
                .is_none()
            {
                gone[i] = true;
            }
        }
        Ok(Some(
            candidates
                .into_iter()
                .zip(gone)
                .filter_map(|(c, g)| g.then_some(c))
                .collect(),
        ))
    }

    /// Each shrink in `kept` (most important first) made as small as
    /// leaves room: the most workers kept, found by bisection (room only
    /// grows with the workers removed).
    fn trim_shrinks(
        &mut self,
        now_ms: u64,
        policy: &dyn Hooks,
        unit: &UnitPlan,
        kept: &mut [Candidate],
    ) -> Result<(), CallError> {
        let all = vec![true; kept.len()];
        for i in (0..kept.len()).rev() {
            let Some((from, floor)) = kept[i].shrink else {
                continue;
            };
            let surplus: Vec<(u32, (PodKey, usize))> = kept[i]
                .pods
                .iter()
                .filter_map(|(k, n)| Some((self.cluster.pod(k)?.0.index, (k.clone(), *n))))
                .collect();
            let above = |to: u32| -> Vec<(PodKey, usize)> {
                surplus
                    .iter()
                    .filter(|(index, _)| *index >= to)
                    .map(|(_, pod)| pod.clone())
                    .collect()
            };
            // `lo` workers leave room; more than `hi` cannot.
            let (mut lo, mut hi) = (floor, from.saturating_sub(1));
            while lo < hi {
                let mid = lo + (hi - lo).div_ceil(2);
                kept[i].pods = above(mid);
                if self
                    .fits_without(now_ms, policy, unit, kept, &all)?
                    .is_some()
                {
                    lo = mid;
                } else {
                    hi = mid - 1;
                }
            }
            kept[i].pods = above(lo);
            kept[i].shrink = Some((from, lo));
        }
        Ok(())
    }

    /// Whether `unit` could be placed were the candidates marked `gone`
    /// not holding their pods' room. Everything is put back.
    fn fits_without(
        &mut self,
        now_ms: u64,
        policy: &dyn Hooks,
        unit: &UnitPlan,
        candidates: &[Candidate],
        gone: &[bool],
    ) -> Result<Option<Vec<(PodKey, usize)>>, CallError> {
        let away: Vec<(PodKey, usize)> = candidates
            .iter()
            .zip(gone)
            .filter(|(_, g)| **g)
            .flat_map(|(c, _)| c.pods.iter().cloned())
            .collect();
        // Their room, devices and volumes counted free, as once they are
        // gone.
        let vacated = self.cluster.vacate(&away);
        let fits = self.would_place(now_ms, policy, unit);
        self.cluster.restore(vacated);
        fits
    }

    /// Where a round would place `unit` now, if the pre-filter lets it
    /// through and one of its sizes fits (reserving nothing).
    fn would_place(
        &mut self,
        now_ms: u64,
        policy: &dyn Hooks,
        unit: &UnitPlan,
    ) -> Result<Option<Vec<(PodKey, usize)>>, CallError> {
        let Sizes::Try(sizes) = self.pre_filtered(now_ms, policy, unit)? else {
            return Ok(None);
        };
        for size in sizes {
            match self.place(now_ms, policy, unit, size) {
                Ok(placed) => {
                    for (k, _) in &placed {
                        self.cluster.set_state(k, PodState::Pending);
                    }
                    return Ok(Some(placed));
                }
                Err(PlaceError::Unschedulable(_)) => {}
                Err(PlaceError::Policy(e)) => return Err(e),
            }
        }
        Ok(None)
    }
}
