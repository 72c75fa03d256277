//! Placing one unit: pre-filter's sizes, each pod through the built-in
//! filters, the policy's filter and score, reserve and permit; the quorum
//! a gang may start with; and room made by preemption when it fits
//! nowhere.

use super::sample;
use super::*;
use crate::io::Eviction;
use crate::names::{NodeName, PodKey};

/// Why a `pre-filter` answer's sizes cannot be tried.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
enum BadSizes {
    #[error("{0} sizes for a unit that is not a gang")]
    NotAGang(usize),
    #[error("size {size} is outside [{lo}, {hi}]")]
    OutOfBounds { size: u32, lo: u32, hi: u32 },
}

/// The sizes a `pre-filter` answer asks to try, checked and deduplicated in
/// the order given: each must lie in the gang's `[min, workers]`, so at most
/// `workers - min + 1` placements are tried however long the list.
fn gang_sizes(unit: &wit::Unit, list: &[u32]) -> Result<Vec<u32>, BadSizes> {
    let lo = unit.min_workers.min(unit.workers);
    if !unit.gang {
        return Err(BadSizes::NotAGang(list.len()));
    }
    let mut seen = std::collections::BTreeSet::new();
    let mut sizes = Vec::new();
    let distinct = (unit.workers - lo) as usize + 1;
    for &s in list {
        if s < lo || s > unit.workers {
            return Err(BadSizes::OutOfBounds {
                size: s,
                lo,
                hi: unit.workers,
            });
        }
        // Every entry is checked; only the first of each size is kept.
        if sizes.len() < distinct && seen.insert(s) {
            sizes.push(s);
        }
    }
    Ok(sizes)
}

impl Scheduler {
    /// Try `unit`; a gang with more pods than its `minMember` needs that
    /// cannot be placed whole is tried again with just enough of its pods
    /// (the rest follow as room appears), and the report keeps the whole
    /// gang's reason and outcome if that fails too.
    pub(super) fn try_unit_or_quorum(
        &mut self,
        now_ms: u64,
        policy: &dyn Hooks,
        index: usize,
        unit: &UnitPlan,
        to_bind: &mut Vec<ToBind>,
        report: &mut RoundReport,
    ) -> Attempt {
        if unit.job.is_none() {
            return self.try_unit(now_ms, policy, index, unit, to_bind, report);
        }
        let mut whole = RoundReport::default();
        let attempt = self.try_unit(now_ms, policy, index, unit, to_bind, &mut whole);
        let quorum = match attempt {
            Attempt::Failed | Attempt::Unfit => self.quorum(unit),
            _ => None,
        };
        let Some(quorum) = quorum else {
            report.decisions.extend(whole.decisions);
            return attempt;
        };
        let mut part = RoundReport::default();
        let retry = self.try_unit(now_ms, policy, index, &quorum, to_bind, &mut part);
        match retry {
            Attempt::Failed | Attempt::Unfit => {
                report.decisions.extend(whole.decisions);
                attempt
            }
            _ => {
                report.decisions.extend(part.decisions);
                retry
            }
        }
    }

    /// Of a new gang with more pending pods than its `minMember` needs,
    /// the first that many that each fit some node now, as a unit of their
    /// own; `None` when there is no such choice. Parameter servers and
    /// pods of other roles come first (each is one of a kind, and workers
    /// cannot train without their PS), then workers by index.
    pub(super) fn quorum(&self, unit: &UnitPlan) -> Option<UnitPlan> {
        let job = unit.job.as_deref()?;
        let min_member = self.cluster.job(job)?.min_member as usize;
        let held = self.cluster.job_placed(job);
        let need = min_member.saturating_sub(held);
        if need == 0 || need >= unit.pods.len() {
            return None;
        }
        // Indices into the unit, others first, then workers.
        let (workers, others): (Vec<usize>, Vec<usize>) =
            (0..unit.pods.len()).partition(|&i| unit.wit.tasks[i].role == wit::Role::Worker);
        let mut chosen = Vec::with_capacity(need);
        for i in others.into_iter().chain(workers) {
            let (pod, _) = self.cluster.pod(&unit.pods[i])?;
            if !any_feasible(&self.cluster, pod) {
                continue;
            }
            chosen.push(i);
            if chosen.len() == need {
                // Back in placement order (a PS follows its workers).
                chosen.sort_unstable();
                return Some(UnitPlan {
                    pods: chosen.iter().map(|&i| unit.pods[i].clone()).collect(),
                    wit: wit::Unit {
                        tasks: chosen.iter().map(|&i| unit.wit.tasks[i]).collect(),
                        ..unit.wit.clone()
                    },
                    ..unit.clone()
                });
            }
        }
        None
    }

    pub(super) fn try_unit(
        &mut self,
        now_ms: u64,
        policy: &dyn Hooks,
        index: usize,
        unit: &UnitPlan,
        to_bind: &mut Vec<ToBind>,
        report: &mut RoundReport,
    ) -> Attempt {
        let info = policy.info();
        // Pre-enqueue (Kubernetes' SchedulingGates): a gated pod is not
        // tried, and a gang with a gated member waits whole for the gate to
        // go, since binding its other members would leave it half placed.
        let gated: Vec<(PodKey, Vec<String>)> = if unit.gated {
            unit.pods
                .iter()
                .filter_map(|k| self.cluster.pod(k))
                .filter(|(p, _)| !p.scheduling_gates.is_empty())
                .map(|(p, _)| (p.key.clone(), p.scheduling_gates.clone()))
                .collect()
        } else {
            Vec::new()
        };
        if !gated.is_empty() {
            report.decisions.push(Decision::Unschedulable {
                unit: unit.key.clone(),
                reason: Unschedulable::Gated { pods: gated },
            });
            return Attempt::Gated;
        }
        // A job held by its driver (an invalid PodGroup), or whose
        // topology constraint names no configured level, is not tried.
        if let Some(reason) = unit
            .job
            .as_deref()
            .and_then(|j| self.cluster.job(j))
            .and_then(|j| j.hold.clone())
            .or_else(|| self.unknown_level(unit))
            .or_else(|| self.giving_back(unit))
        {
            report.decisions.push(Decision::Unschedulable {
                unit: unit.key.clone(),
                reason: Unschedulable::Held(reason),
            });
            return Attempt::Gated;
        }
        // Pre-enqueue (as Coscheduling does): a new gang is not tried until
        // `minMember` of its pods exist, so it is placed whole, with its
        // locality computed over every task, instead of reserving piecemeal.
        if let Some(job) = unit.job.as_deref()
            && unit.wit.running == 0
            && !self.waiting.contains_key(&unit.key)
        {
            let present = self.cluster.member_count(job);
            let min_member = self.cluster.job(job).map(|j| j.min_member).unwrap_or(0);
            if present < min_member {
                report.decisions.push(Decision::Unschedulable {
                    unit: unit.key.clone(),
                    reason: Unschedulable::MissingMembers {
                        present,
                        min_member,
                    },
                });
                return Attempt::Gated;
            }
        }
        // Pre-filter (as Coscheduling does): a new gang whose PodGroup
        // names `minResources` is not tried until the cluster has that much
        // free, counting what its own pods hold.
        if let Some(job) = unit.job.as_deref()
            && unit.wit.running == 0
            && !self.waiting.contains_key(&unit.key)
            && let Some(j) = self.cluster.job(job)
            && let Some(want) = &j.min_resources
        {
            let gap = self.cluster.resource_gap(job, want, j.min_member);
            if !gap.is_empty() {
                report.decisions.push(Decision::Unschedulable {
                    unit: unit.key.clone(),
                    reason: Unschedulable::ShortOfMinResources { short: gap },
                });
                return Attempt::Failed;
            }
        }
        // Pre-filter: skip (the policy finds no room: preemption may make
        // some, as kube-scheduler's post-filter runs after a pre-filter
        // that finds the pod unschedulable), or the sizes to try.
        let sizes = match self.pre_filtered(now_ms, policy, unit) {
            Ok(Sizes::Skip(reason)) => {
                report.decisions.push(Decision::Unschedulable {
                    unit: unit.key.clone(),
                    reason: Unschedulable::Skipped {
                        reason,
                        preemption: None,
                    },
                });
                return Attempt::Unfit;
            }
            Ok(Sizes::Try(sizes)) => sizes,
            Err(e) => {
                return policy_failed(report, &unit.key, e);
            }
        };

        // Place every pod of the first size that fits entirely.
        let mut last_reason = String::new();
        let mut chosen: Option<(Option<u32>, Vec<(PodKey, usize)>)> = None;
        for size in sizes {
            match self.place(now_ms, policy, unit, size) {
                Ok(placed) => {
                    chosen = Some((size, placed));
                    break;
                }
                Err(PlaceError::Unschedulable(reason)) => last_reason = reason,
                Err(PlaceError::Policy(e)) => {
                    return policy_failed(report, &unit.key, e);
                }
            }
        }
        let Some((size, placed)) = chosen else {
            report.decisions.push(Decision::Unschedulable {
                unit: unit.key.clone(),
                reason: Unschedulable::NoFit {
                    rejections: last_reason,
                    preemption: None,
                },
            });
            return Attempt::Unfit;
        };

        if !unit.wit.gang {
            // Each pod on its own: one failed bind does not release the rest.
            to_bind.extend(placed.into_iter().map(|pod| ToBind {
                unit: index,
                pods: vec![pod],
                gang: None,
            }));
            return Attempt::Binding;
        }

        // Permit for the gang: reservations so far plus this round's.
        let job = unit.job.clone().unwrap_or_default();
        let reserved = self.reserved_of(&unit.key).len() as u32;
        let present = self.cluster.member_count(&job);
        let min_member = self.cluster.job(&job).map(|j| j.min_member).unwrap_or(0);
        let since = self.waiting.get(&unit.key).map(|w| w.since_ms);
        let gang = wit::GangState {
            id: unit.wit.id,
            reserved: reserved + unit.wit.running,
            min_member,
            present,
            waited_ms: since.map(|s| now_ms.saturating_sub(s)).unwrap_or(0),
        };
        let verdict = if info.implements(wit::Hook::Permit) {
            policy.permit(now_ms, &gang)
        } else {
            Ok(wit::PermitResult::Allow)
        };
        match verdict {
            Ok(wit::PermitResult::Allow) => {
                self.waiting.remove(&unit.key);
                let all: Vec<(PodKey, usize)> = self
                    .reserved_of(&unit.key)
                    .into_iter()
                    .filter_map(|k| {
                        self.cluster
                            .pod(&k)
                            .and_then(|(_, s)| s.node())
                            .map(|n| (k, n))
                    })
                    .collect();
                to_bind.push(ToBind {
                    unit: index,
                    pods: all,
                    gang: Some(size),
                });
                Attempt::Binding
            }
            Ok(wit::PermitResult::Wait(ms)) => {
                let group_timeout = self.cluster.job(&job).and_then(|j| j.schedule_timeout_ms);
                let w = self.waiting.entry(unit.key.clone()).or_insert(WaitingGang {
                    since_ms: now_ms,
                    deadline_ms: 0,
                    group_timeout: group_timeout.is_some(),
                });
                let cap = w.since_ms.saturating_add(self.config.max_permit_wait_ms);
                // The PodGroup's own timeout counts from the first wait and
                // replaces the policy's; each answer of the policy's sets a
                // new deadline.
                let deadline = match group_timeout {
                    Some(t) => w.since_ms.saturating_add(t),
                    None => now_ms.saturating_add(ms),
                };
                w.deadline_ms = deadline.min(cap);
                report.decisions.push(Decision::Waiting {
                    unit: unit.key.clone(),
                    reserved,
                    wait_ms: w.deadline_ms - now_ms,
                });
                Attempt::Progress
            }
            Ok(wit::PermitResult::Reject(reason)) => {
                self.waiting.remove(&unit.key);
                self.unreserve_job(&unit.key);
                report.decisions.push(Decision::Rejected {
                    unit: unit.key.clone(),
                    reason: policy_text(reason),
                });
                Attempt::Failed
            }
            Err(e) => {
                // Fail closed: release the whole gang.
                self.waiting.remove(&unit.key);
                self.unreserve_job(&unit.key);
                policy_failed(report, &unit.key, e)
            }
        }
    }

    /// After `unit` fit nowhere: preempt lower-priority work for it if
    /// that would make room (see `preemption`), and say so in the reason
    /// it was not placed.
    pub(super) fn make_room(
        &mut self,
        now_ms: u64,
        policy: &dyn Hooks,
        unit: &UnitPlan,
        report: &mut RoundReport,
    ) -> Attempt {
        let gangs = policy.info().implements(wit::Hook::Permit);
        let why = |report: &mut RoundReport, more: &str| {
            let reason = report.decisions.iter_mut().rev().find_map(|d| match d {
                Decision::Unschedulable { unit: u, reason } if *u == unit.key => Some(reason),
                _ => None,
            });
            if let Some(reason) = reason {
                reason.note_preemption(more);
            }
        };
        let (victims, placed) = match self.find_room(now_ms, policy, unit, gangs) {
            Ok(Room::None(cause)) => {
                if let Some(cause) = cause {
                    why(report, cause);
                }
                // No room to be made: a nomination from an earlier
                // preemption no longer holds (kube-scheduler clears it
                // when a later attempt nominates nothing).
                if let Some(pods) = self.nominated.remove(&unit.key) {
                    report.decisions.push(Decision::Nominated {
                        unit: unit.key.clone(),
                        pods: pods.into_iter().map(|p| (p, None)).collect(),
                    });
                }
                return Attempt::Failed;
            }
            Ok(Room::Awaited(pods)) => {
                why(
                    report,
                    &format!("waiting for {pods} pod(s) preempted for it to leave"),
                );
                return Attempt::Failed;
            }
            Ok(Room::Victims(victims, placed)) => (victims, placed),
            Err(e) => {
                return policy_failed(report, &unit.key, e);
            }
        };
        let priority = unit.wit.priority;
        let reclaiming = victims.iter().any(|v| v.priority >= priority);
        let victims_queues: BTreeSet<String> = victims
            .iter()
            .filter(|v| v.priority >= priority)
            .filter_map(|v| v.queue.clone())
            .collect();
        let mut evicted = Vec::new();
        let mut shrunk = Vec::new();
        let mut pods = Vec::new();
        for v in victims {
            pods.extend(v.pods.iter().map(|(k, _)| k.clone()));
            let job = v.key.job_name().unwrap_or_default().to_string();
            match v.shrink {
                Some((from, to)) => {
                    report.effects.push(Effect::Scale(ScaleRequest {
                        job: job.into(),
                        from,
                        workers: to,
                        reason: match v.queue.as_ref().filter(|_| v.priority >= priority) {
                            Some(q) => format!(
                                "shrunk to {to} workers to make room for {}, whose queue is owed GPUs that queue {q} borrows",
                                unit.key
                            ),
                            None => format!(
                                "shrunk to {to} workers to make room for {} (priority {priority} over {})",
                                unit.key, v.priority
                            ),
                        },
                        cause: ScaleCause::Preemption,
                    }));
                    shrunk.push(v.key);
                }
                None => {
                    report.effects.push(Effect::Evict(Eviction {
                        pods: v.pods.into_iter().map(|(k, _)| k).collect(),
                        preemptor: unit.key.clone(),
                        message: match v.queue.as_ref().filter(|_| v.priority >= priority) {
                            Some(q) => format!(
                                "preempted by {}, whose queue is owed GPUs that queue {q} borrows",
                                unit.key
                            ),
                            None => format!(
                                "preempted by {} (priority {priority} over {})",
                                unit.key, v.priority
                            ),
                        },
                        victim: v.key.clone(),
                    }));
                    evicted.push(v.key);
                }
            }
        }
        let whose = match reclaiming {
            true => "lower-priority or borrowing",
            false => "lower-priority",
        };
        let mut what = match (evicted.len(), shrunk.len()) {
            (n, 0) => format!("evicting {n} {whose} unit(s) to make room"),
            (_, n) => format!("shrinking {n} {whose} elastic job(s) to make room"),
        };
        if reclaiming {
            let queues = victims_queues;
            self.reclaiming.insert(unit.key.clone(), queues);
        }
        if let Some(domain) = self.hold_domain(unit, &placed) {
            what = format!("{what} in {domain}, held for it until it is placed");
        }
        why(report, &what);
        report.decisions.push(Decision::Preempting {
            unit: unit.key.clone(),
            evicted,
            shrunk,
        });
        // Where its pods go once the room is free, for cluster tools
        // (`status.nominatedNodeName`); a Binding clears it.
        let nodes = self.cluster.nodes();
        let nominated: Vec<(PodKey, Option<NodeName>)> = placed
            .into_iter()
            .map(|(pod, n)| (pod, Some(nodes[n].name.clone())))
            .collect();
        if !nominated.is_empty() {
            self.nominated.insert(
                unit.key.clone(),
                nominated.iter().map(|(p, _)| p.clone()).collect(),
            );
            report.decisions.push(Decision::Nominated {
                unit: unit.key.clone(),
                pods: nominated,
            });
        }
        self.preempting.insert(unit.key.clone(), pods);
        Attempt::Failed
    }

    /// What the policy's pre-filter says of `unit` on the cluster as it is
    /// now: skip it (why), or the sizes to try, checked.
    ///
    /// # Errors
    /// The call failed, or its sizes are invalid.
    pub(crate) fn pre_filtered(
        &self,
        now_ms: u64,
        policy: &dyn Hooks,
        unit: &UnitPlan,
    ) -> Result<Sizes, CallError> {
        if !policy.info().implements(wit::Hook::PreFilter) {
            return Ok(Sizes::Try(vec![None]));
        }
        let capacity = self.cluster.capacity();
        match policy.pre_filter(now_ms, &unit.wit, &capacity, &self.cluster)? {
            wit::PreFilterResult::Skip(reason) => Ok(Sizes::Skip(policy_text(reason))),
            wit::PreFilterResult::Proceed(list) if list.is_empty() => Ok(Sizes::Try(vec![None])),
            wit::PreFilterResult::Proceed(list) => gang_sizes(&unit.wit, &list)
                .map(|l| Sizes::Try(l.into_iter().map(Some).collect()))
                .map_err(|e| invalid(policy, HookName::PreFilter, e.to_string())),
        }
    }

    /// Reserve a node for each pod of `unit` at `size` workers, among
    /// the nodes `within` (ascending) or any; on failure every reservation
    /// made here is undone.
    pub(super) fn place_among(
        &mut self,
        now_ms: u64,
        policy: &dyn Hooks,
        unit: &UnitPlan,
        size: Option<u32>,
        within: Option<&[u32]>,
    ) -> Result<Vec<(PodKey, usize)>, PlaceError> {
        let info = policy.info();
        let keep: Vec<usize> = (0..unit.pods.len())
            .filter(|&i| {
                let t = &unit.wit.tasks[i];
                t.role != wit::Role::Worker || size.is_none_or(|s| t.index < s)
            })
            .collect();
        let mut placement = wit::Placement {
            unit: wit::Unit {
                tasks: keep.iter().map(|&i| unit.wit.tasks[i]).collect(),
                ..unit.wit.clone()
            },
            task: 0,
            now_ms,
        };
        // Siblings: pods of the same job already holding a node.
        // Dense by node index: read once per candidate per task.
        let mut siblings = vec![0u32; self.cluster.nodes().len()];
        let mut sibling_nodes = Vec::new();
        // (A new gang has none: its pods are not walked.)
        if let Some(job) = &unit.job
            && self.cluster.job_placed(job) > 0
        {
            for (_, s) in self.cluster.job_pods(job) {
                if let Some(n) = s.node() {
                    if siblings[n] == 0 {
                        sibling_nodes.push(n);
                    }
                    siblings[n] += 1;
                }
            }
        }
        // Where this unit's search starts: a gang's pods share one.
        let among = within.map_or(self.cluster.nodes().len(), <[u32]>::len);
        let limit = sample::nodes_to_find(self.config.percentage_of_nodes_to_score, among);
        let first = unit.pods.first().map_or("", PodKey::as_str);
        let start = sample::start_for(unit.job.as_deref().unwrap_or(first), among);
        // Members beyond the gang's `minMember` are optional when the
        // policy chose no size: one that fits nowhere waits for a later
        // round instead of holding the others back (as Coscheduling binds
        // any `minMember` of a group's pods).
        let mut optional = match size {
            Some(_) => 0,
            None => self.optional_members(unit, keep.len()),
        };
        let mut skipped: Option<PlaceError> = None;
        let mut placed: Vec<(PodKey, usize)> = Vec::new();
        let undo = |this: &mut Scheduler, placed: &[(PodKey, usize)]| {
            for (k, _) in placed {
                this.cluster.set_state(k, PodState::Pending);
            }
        };
        for (t, &i) in keep.iter().enumerate() {
            if unit.cap.is_some_and(|cap| placed.len() >= cap) {
                // The rest are extras, placed after the round's quorums.
                break;
            }
            let key = &unit.pods[i];
            placement.task = t as u32;
            let pod = &self.cluster.pods[key].pod;
            let mut rejections = Rejections::default();
            let mut index = self.search(unit, pod, within, (start, limit), &mut rejections);
            if index.len() >= limit {
                // The search may have stopped before the gang's own nodes.
                self.add_unvisited(unit, pod, within, &sibling_nodes, &mut index);
            }
            index.sort_unstable();
            let fail =
                |this: &mut Scheduler, placed: &[(PodKey, usize)], rejections: &Rejections| {
                    undo(this, placed);
                    let live = within.map_or_else(
                        || {
                            (0..this.cluster.nodes().len())
                                .filter(|&n| this.cluster.is_live(n))
                                .count()
                        },
                        <[u32]>::len,
                    );
                    let what = if unit.pods.len() > 1 {
                        format!("pod {key} of {}: ", unit.key)
                    } else {
                        String::new()
                    };
                    PlaceError::Unschedulable(format!("{what}{}", rejections.message(live)))
                };
            if index.is_empty() {
                if optional > 0 {
                    optional -= 1;
                    skipped = Some(fail(self, &[], &rejections));
                    continue;
                }
                return Err(fail(self, &placed, &rejections));
            }
            let mut cands = self.columns.take().unwrap_or_else(no_candidates);
            fill_candidates(&self.cluster, &index, &siblings, &mut cands);
            if info.implements(wit::Hook::Filter) {
                let pass = match policy.filter(&placement, &cands, &self.cluster) {
                    Ok(p) if p.len() == index.len() => p,
                    Ok(p) => {
                        undo(self, &placed);
                        return Err(PlaceError::Policy(invalid(
                            policy,
                            HookName::Filter,
                            format!("{} results for {} candidates", p.len(), index.len()),
                        )));
                    }
                    Err(e) => {
                        undo(self, &placed);
                        return Err(PlaceError::Policy(e));
                    }
                };
                let before = index.len();
                index = index
                    .into_iter()
                    .zip(&pass)
                    .filter(|(_, ok)| **ok)
                    .map(|(n, _)| n)
                    .collect();
                rejections.add(
                    "node(s) rejected by the policy's filter",
                    before - index.len(),
                );
                if index.is_empty() {
                    self.columns = Some(cands);
                    if optional > 0 {
                        optional -= 1;
                        skipped = Some(fail(self, &[], &rejections));
                        continue;
                    }
                    return Err(fail(self, &placed, &rejections));
                }
                if index.len() != before {
                    fill_candidates(&self.cluster, &index, &siblings, &mut cands);
                }
            }
            let pod = &self.cluster.pods[key].pod;
            let weighed = preferences::weigh(&self.cluster, pod, &index);
            let scores = if info.implements(wit::Hook::Score) && index.len() > 1 {
                let view = Scoring::new(&self.cluster, weighed.as_deref());
                let answer = policy.score(&placement, &cands, &view);
                match answer {
                    Ok(s) if s.len() == index.len() => Some(s),
                    Ok(s) => {
                        undo(self, &placed);
                        return Err(PlaceError::Policy(invalid(
                            policy,
                            HookName::Score,
                            format!("{} scores for {} candidates", s.len(), index.len()),
                        )));
                    }
                    Err(e) => {
                        undo(self, &placed);
                        return Err(PlaceError::Policy(e));
                    }
                }
            } else {
                None
            };
            let best = match preferences::choose(weighed.as_deref(), scores.as_deref()) {
                Some(j) => index[j] as usize,
                None => match &scores {
                    // Highest score; ties to the lowest node index (the
                    // list is ascending).
                    Some(scores) => {
                        let mut best = 0;
                        for (j, &s) in scores.iter().enumerate() {
                            if s > scores[best] {
                                best = j;
                            }
                        }
                        index[best] as usize
                    }
                    None => index[0] as usize,
                },
            };
            self.columns = Some(cands);
            self.cluster.set_state(key, PodState::Reserved(best));
            if siblings[best] == 0 {
                sibling_nodes.push(best);
            }
            siblings[best] += 1;
            placed.push((key.clone(), best));
        }
        match skipped {
            Some(reason) if placed.is_empty() => Err(reason),
            _ => Ok(placed),
        }
    }

    /// How many of a gang's `pending` pods may be left unplaced with its
    /// `minMember` still met by the rest and by the members holding a node.
    /// None for a job that names no `minMember` (every pod is needed) and
    /// for lone pods.
    pub(super) fn optional_members(&self, unit: &UnitPlan, pending: usize) -> usize {
        let Some(job) = unit.job.as_deref() else {
            return 0;
        };
        let min_member = self.cluster.job(job).map_or(0, |j| j.min_member) as usize;
        if min_member == 0 {
            return 0;
        }
        let held = self.cluster.job_placed(job);
        (pending + held).saturating_sub(min_member)
    }
}

/// What a pre-filter answer comes to.
pub(crate) enum Sizes {
    /// Not tried now, for this reason.
    Skip(String),
    /// Try these sizes in order (`None`: as requested).
    Try(Vec<Option<u32>>),
}

pub(crate) enum PlaceError {
    Unschedulable(String),
    Policy(CallError),
}
