//! One scheduling round: queue order → pre-filter → built-in filters +
//! policy filter → score → reserve → permit → bind, with unreserve on any
//! failure. Gangs are bound together or not at all.

mod binds;
mod budget;
mod config;
mod domain;
mod extras;
mod hope;
mod permit;
mod place;
mod preemption;
mod reason;
mod reclaim;
mod report;
mod sample;
mod settle;
mod units;
mod victims;

#[cfg(test)]
mod tests;

pub use binds::{BindGroup, PodBind, Prebind};
pub use budget::{DeferAt, RoundBudget, Unbounded};
pub use config::SchedulerConfig;
pub(crate) use place::{PlaceError, Sizes};
pub use reason::Unschedulable;
pub use report::{Decision, PlannedRound, RoundReport};

use std::collections::{BTreeMap, BTreeSet};

use super::breaker::{Breaker, Outcome};
use super::cluster::journal::ClusterOp;
use super::cluster::topology::Domain;
use super::cluster::view::Scoring;
use super::cluster::{Cluster, ClusterError, PodState};
use super::filters::{Rejections, any_feasible, feasible_among, fill_candidates, no_candidates};
use super::io::{Effect, ScaleCause, ScaleRequest};
use super::model::Pod;
use super::preferences;
use super::queue::{Queue, Setback};
use super::unit::UnitKey;
use crate::names::{JobKey, PodKey};
use domain::Held;
use dragon_runtime::bounds::policy_text;
use dragon_runtime::{CallError, Failure, HookName, Hooks, wit};
use preemption::Room;
use units::Candidate;

/// What one attempt at a unit came to.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Attempt {
    /// Admitted, or now waiting in permit.
    Progress,
    /// Placed and permitted: bound with the rest of the round at its end,
    /// which settles the backoff.
    Binding,
    /// Not placed (unschedulable, rejected, bind failure): back off.
    Failed,
    /// Fits nowhere now: back off, unless preempting lower-priority work
    /// makes room.
    Unfit,
    /// The policy failed a call (trap, deadline, invalid output): back off,
    /// or try the fallback policy if the driver gave one. `timed_out`: the
    /// call ran out of its deadline.
    PolicyFailed { timed_out: bool },
    /// Not tried yet: the gang's pods do not all exist or are gated (no
    /// backoff, as with a pre-enqueue gate; a change to its pods wakes it).
    Gated,
}

/// What a round's unit attempts share: its time and the policies asked.
#[derive(Clone, Copy)]
struct Attempting<'a> {
    now_ms: u64,
    policy: &'a dyn Hooks,
    fallback: Option<&'a dyn Hooks>,
}

/// Pods placed and permitted in this round: bound together at its end.
#[derive(Debug)]
struct ToBind {
    /// Index of the unit in the round's units.
    unit: usize,
    /// `(pod, node index)`, all bound or none.
    pods: Vec<(PodKey, usize)>,
    /// For a gang, the size it is admitted at (`None`: as requested); `None`
    /// for a pod bound on its own.
    gang: Option<Option<u32>>,
}

/// A gang holding reservations while permit waits.
#[derive(Debug, Clone)]
struct WaitingGang {
    since_ms: u64,
    deadline_ms: u64,
    /// The deadline is the job's own `schedule_timeout_ms`.
    group_timeout: bool,
}

/// A unit of scheduling built from the snapshot.
#[derive(Debug, Clone)]
pub(crate) struct UnitPlan {
    pub(crate) key: UnitKey,
    pub(crate) job: Option<JobKey>,
    /// Pending pods, in placement order.
    pub(crate) pods: Vec<PodKey>,
    pub(crate) wit: wit::Unit,
    /// The one topology domain it is placed in (a preemption search per
    /// domain), whatever its job's constraint.
    pub(crate) within: Option<Domain>,
    /// At most this many of its pods now: its quorum, while another gang
    /// waits for one (see `extras`).
    pub(crate) cap: Option<usize>,
    /// Some pod of it carried a scheduling gate when the round read it:
    /// only then are its pods looked up for their gates.
    pub(crate) gated: bool,
    /// Some pod of it has required pod affinity or a topology spread, so a
    /// pod placed anywhere may help it: the queue wakes it when one is.
    pub(crate) wants_placed: bool,
    /// The least of each resource its pods ask for (see `hope`).
    pub(crate) least: crate::model::Resources,
}

/// The framework: a snapshot plus the state that lives between rounds
/// (gangs waiting in permit, the times scaling looks at).
#[derive(Debug, Clone, Default)]
pub struct Scheduler {
    /// The snapshot drivers keep current, through [`Scheduler::apply`].
    pub(crate) cluster: Cluster,
    config: SchedulerConfig,
    waiting: BTreeMap<UnitKey, WaitingGang>,
    /// Units that failed and wait for a change or a backoff.
    queue: Queue,
    pub(crate) last_admit_ms: u64,
    pub(crate) last_scale_down_ms: u64,
    /// Candidate columns kept between pods so their buffers are reused.
    columns: Option<wit::Candidates>,
    /// Suspends a policy that keeps failing.
    pub(crate) breaker: Breaker,
    /// The real clock, from drivers whose clock is not the real one (the
    /// simulator): a suspension after a call out of time lasts in both.
    pub(crate) wall: Option<fn() -> std::time::Instant>,
    /// Preemptions under way: each preemptor's victims' pods, until none
    /// holds a node.
    pub(crate) preempting: BTreeMap<UnitKey, Vec<PodKey>>,
    /// Preemptors' pods nominated to nodes, by unit, until it is placed,
    /// gone, or nominated nowhere.
    pub(crate) nominated: BTreeMap<UnitKey, Vec<PodKey>>,
    /// Domains held for preemptors with a required topology, while they
    /// are nominated: no unit of lower or equal priority is placed there.
    pub(crate) held: BTreeMap<UnitKey, Held>,
    /// Preemptors taking back what other queues borrow, with those queues,
    /// while they are nominated: those queues' units wait (see `reclaim`).
    pub(crate) reclaiming: BTreeMap<UnitKey, BTreeSet<String>>,
    /// Victims whose eviction was refused, not chosen again before the
    /// given time, ms.
    pub(crate) protected: BTreeMap<UnitKey, u64>,
    /// Jobs whose shrink was refused (no `/scale` to patch), not shrunk
    /// again before the given time, ms.
    pub(crate) unshrinkable: BTreeMap<JobKey, u64>,
}

/// Report the policy's failure on `unit`; the attempt that failed.
fn policy_failed(report: &mut RoundReport, unit: &UnitKey, e: CallError) -> Attempt {
    report.decisions.push(Decision::PolicyError {
        unit: Some(unit.clone()),
        error: e.to_string(),
    });
    Attempt::PolicyFailed {
        timed_out: matches!(e.failure, Failure::Timeout { .. }),
    }
}

/// The error for an answer of `policy`'s `hook` that breaks the
/// interface's rules.
pub(crate) fn invalid(policy: &dyn Hooks, hook: HookName, msg: String) -> CallError {
    CallError {
        policy: policy.info().name.clone(),
        hook,
        failure: Failure::InvalidOutput(msg),
    }
}

impl Scheduler {
    /// A framework over `cluster`.
    pub fn new(cluster: Cluster, config: SchedulerConfig) -> Scheduler {
        Scheduler {
            cluster,
            config,
            breaker: Breaker::new(config.breaker),
            ..Scheduler::default()
        }
    }

    /// The real clock, from a driver whose clock (the `now_ms` of its
    /// rounds) runs apart from it: the policy's suspension after a call out
    /// of time then lasts in real time too, so a simulation does not pay a
    /// deadline per simulated suspension. Read only by the breaker, and
    /// only around a policy's failures.
    pub fn set_wall_clock(&mut self, clock: fn() -> std::time::Instant) {
        self.wall = Some(clock);
    }

    /// The real time, read when asked, if the driver gave a real clock.
    pub(crate) fn wall_now(&self) -> impl Fn() -> Option<std::time::Instant> + use<> {
        let wall = self.wall;
        move || wall.map(|clock| clock())
    }

    /// The framework's settings.
    pub fn config(&self) -> &SchedulerConfig {
        &self.config
    }

    /// The snapshot, to read.
    pub fn cluster(&self) -> &Cluster {
        &self.cluster
    }

    /// Change the snapshot as the cluster changed: the one way a driver
    /// does, so every change is a [`ClusterOp`] in the journal (and so in a
    /// recording, which a replay meets in the same order).
    ///
    /// # Errors
    /// The change does not fit the snapshot (an unknown pod or node, a
    /// duplicate); nothing was changed.
    pub fn apply(&mut self, op: ClusterOp) -> Result<(), ClusterError> {
        if matches!(op, ClusterOp::SetTopologyLevels(_)) {
            // Domains are numbered anew: a hold would name another one.
            self.held.clear();
        }
        op.apply(&mut self.cluster)
    }

    /// [`ClusterOp::RemovePod`], giving the pod back.
    ///
    /// # Errors
    /// No such pod.
    pub fn remove_pod(&mut self, key: &str) -> Result<Pod, ClusterError> {
        self.cluster.remove_pod(key)
    }

    /// Time moves on to `now_ms` (never back): drivers set it before
    /// applying what happened at a time, so attained service is integrated
    /// up to then.
    pub fn set_clock(&mut self, now_ms: u64) {
        self.cluster.set_clock(now_ms);
    }

    /// Keep (or stop keeping) a journal of the drivers' changes.
    pub fn keep_journal(&mut self, keep: bool) {
        self.cluster.keep_journal(keep);
    }

    /// The changes journaled since the last call (none when no journal is
    /// kept).
    pub fn take_journal(&mut self) -> Vec<ClusterOp> {
        self.cluster.take_journal()
    }

    /// The earliest time after `now_ms` at which a round has work with no
    /// change to the cluster: a unit's backoff or longest wait ends, or a
    /// gang's permit wait runs out. Drivers run rounds on cluster changes
    /// and then; nothing else needs a timer.
    pub fn next_retry_ms(&self, now_ms: u64) -> Option<u64> {
        let permits = self
            .waiting
            .values()
            .map(|w| w.deadline_ms)
            .filter(|&t| t > now_ms);
        self.queue
            .next_retry_ms(now_ms)
            .into_iter()
            .chain(permits)
            .min()
    }

    /// Whether some unit that was tried waits for a change or its backoff.
    pub fn has_waiting_units(&self) -> bool {
        !self.queue.is_empty()
    }

    /// Gangs currently waiting in permit, by unit key.
    pub fn waiting_gangs(&self) -> impl Iterator<Item = &UnitKey> {
        self.waiting.keys()
    }

    /// Decide one round at `now_ms`: every pending unit the queue lets be
    /// tried is placed against reservations, and what is placed and
    /// permitted is to be bound: send [`PlannedRound::binds`] (together, if
    /// the driver can: each is a round trip to the API server in
    /// Kubernetes) and give their results to [`Scheduler::settle_round`].
    /// Units are tried while `budget` allows; the rest wait for the next
    /// round.
    ///
    /// A unit the policy fails on is tried again in the same round with
    /// `fallback` (e.g. the built-in baseline), if given. Which units are
    /// gangs is the policy's choice, not the fallback's, so a gang is still
    /// placed whole or not at all.
    pub fn plan_round(
        &mut self,
        now_ms: u64,
        policy: &dyn Hooks,
        fallback: Option<&dyn Hooks>,
        budget: &mut dyn RoundBudget,
    ) -> PlannedRound {
        let mut report = RoundReport {
            now_ms,
            ..RoundReport::default()
        };
        self.cluster.set_clock(now_ms);
        self.expire_waits(now_ms, &mut report);
        let changes = self.cluster.take_changes();
        let passes_over = self.passes_over(policy);
        let (cluster, config) = (&self.cluster, &self.config);
        let mut seen = hope::RoomSeen::default();
        let mut lowest = None;
        let mut lowest_pending =
            || *lowest.get_or_insert_with(|| cluster.lowest_pending_priority());
        self.queue.wake(&changes, now_ms, config.waits(), |need| {
            passes_over && hope::hopeless(cluster, config, need, &mut seen, &mut lowest_pending)
        });
        let gangs = policy.info().implements(wit::Hook::Permit);
        // Units that are no longer pending leave the queue; the others are
        // tried once ready (see `queue`).
        let (pending, candidates) = self.units(gangs, now_ms);
        self.queue.retain(&pending);
        // A victim seen pending or gone is forgotten: a copy its controller
        // makes under the same name is not one to wait for.
        let cluster = &self.cluster;
        let is_pending = |k: &UnitKey| {
            cluster
                .id_of_unit(k)
                .is_some_and(|id| pending.binary_search(&id).is_ok())
        };
        self.preempting.retain(|k, pods| {
            pods.retain(|p| {
                cluster
                    .pod(p)
                    .is_some_and(|(_, s)| matches!(s, PodState::Bound(_)))
            });
            is_pending(k) && !pods.is_empty()
        });
        self.nominated.retain(|k, _| is_pending(k));
        let nominated = &self.nominated;
        self.held.retain(|k, _| nominated.contains_key(k));
        self.reclaiming.retain(|k, _| nominated.contains_key(k));
        let mut to_bind = Vec::new();
        let units = if candidates.is_empty() {
            Vec::new()
        } else {
            let attempt = Attempting {
                now_ms,
                policy,
                fallback,
            };
            self.attempt_units(attempt, budget, candidates, &mut to_bind, &mut report)
        };
        let groups = self.bind_groups(&units, &to_bind);
        PlannedRound {
            report,
            units,
            to_bind,
            groups,
        }
    }

    /// Try each unit in the policy's order while `budget` allows: the plans
    /// of the units tried, which the round's binds index.
    fn attempt_units(
        &mut self,
        attempt: Attempting<'_>,
        budget: &mut dyn RoundBudget,
        candidates: Vec<Candidate>,
        to_bind: &mut Vec<ToBind>,
        report: &mut RoundReport,
    ) -> Vec<UnitPlan> {
        let Attempting {
            now_ms,
            policy,
            fallback,
        } = attempt;
        policy.begin_round();
        if let Some(f) = fallback {
            f.begin_round();
        }
        let order = self.order(now_ms, policy, &candidates, report);
        let share_extras = self.shares_extras(candidates.iter().filter_map(|c| match c {
            Candidate::Plan(u) => Some(&**u),
            Candidate::Parked(_) => None,
        }));
        let passes_over = !share_extras && self.passes_over(policy);
        let mut candidates: Vec<Option<Candidate>> = candidates.into_iter().map(Some).collect();
        let mut units = Vec::new();
        let mut seen = hope::RoomSeen::default();
        let mut deferred = Vec::new();
        for (position, &c) in order.iter().enumerate() {
            let untried = order.len() - position;
            if budget.spent(untried) {
                report.decisions.push(Decision::Deferred {
                    units: untried as u32,
                    budget_ms: budget.budget_ms(),
                });
                break;
            }
            let plan = match candidates[c].take() {
                Some(Candidate::Plan(plan)) => *plan,
                Some(Candidate::Parked(parked)) => {
                    if passes_over && self.passes_parked_over(&parked, &mut seen, now_ms) {
                        continue;
                    }
                    match self.parked_plan(&parked) {
                        Some(plan) => plan,
                        None => continue,
                    }
                }
                // `order` is a permutation: each index comes once.
                None => continue,
            };
            units.push(plan);
            let i = units.len() - 1;
            // Its quorum only while other gangs want room too; its extras
            // come after the queue.
            let capped;
            let unit = match share_extras.then(|| self.quorum_cap(&units[i])).flatten() {
                Some(0) => {
                    deferred.push(extras::Deferred::quorate(i));
                    continue;
                }
                Some(need) => {
                    capped = UnitPlan {
                        cap: Some(need),
                        ..units[i].clone()
                    };
                    &capped
                }
                None => &units[i],
            };
            if passes_over && self.passed_over(unit, &mut seen) {
                self.set_back(unit, Setback::Unschedulable, now_ms);
                continue;
            }
            let mut attempt = self.guarded_attempt(now_ms, policy, i, unit, to_bind, report);
            if let (Attempt::PolicyFailed { .. }, Some(fallback)) = (attempt, fallback) {
                report.decisions.push(Decision::FellBack {
                    unit: unit.key.clone(),
                    policy: fallback.info().name.clone(),
                });
                attempt = self.schedule_unit(now_ms, fallback, i, unit, to_bind, report);
            }
            // It may have taken room, or given back an earlier round's.
            seen.forget();
            match attempt {
                Attempt::Progress => self.queue.settled(unit.wit.id),
                Attempt::Failed | Attempt::Unfit => {
                    self.set_back(unit, Setback::Unschedulable, now_ms)
                }
                Attempt::PolicyFailed { .. } => self.set_back(unit, Setback::Error, now_ms),
                Attempt::Gated => self.set_back(unit, Setback::Gated, now_ms),
                Attempt::Binding => {
                    if unit.cap.is_some() {
                        deferred.extend(extras::Deferred::placed(i, to_bind));
                    }
                }
            }
        }
        if !deferred.is_empty() {
            self.place_extras(now_ms, policy, &units, deferred, to_bind, report);
        }
        units
    }

    /// [`Scheduler::schedule_unit`] behind the policy's circuit breaker: a
    /// suspended policy fails the unit at once (no call, no deadline paid).
    fn guarded_attempt(
        &mut self,
        now_ms: u64,
        policy: &dyn Hooks,
        index: usize,
        unit: &UnitPlan,
        to_bind: &mut Vec<ToBind>,
        report: &mut RoundReport,
    ) -> Attempt {
        let info = policy.info();
        if self
            .breaker
            .admit(&info.sha256, now_ms, self.wall_now())
            .is_err()
        {
            // The same text every round (no countdown): drivers publish an
            // Event per pod each time the reason changes.
            report.decisions.push(Decision::PolicyError {
                unit: Some(unit.key.clone()),
                error: format!(
                    "policy `{}` is suspended after repeated failures until a probe call succeeds",
                    info.name
                ),
            });
            return Attempt::PolicyFailed { timed_out: false };
        }
        let attempt = self.schedule_unit(now_ms, policy, index, unit, to_bind, report);
        let outcome = match attempt {
            Attempt::PolicyFailed { timed_out: true } => Outcome::TimedOut,
            Attempt::PolicyFailed { timed_out: false } => Outcome::Failed,
            _ => Outcome::Answered,
        };
        if attempt != Attempt::Gated
            && let Some(change) = self
                .breaker
                .record(outcome, now_ms, self.wall_now(), &info.name)
        {
            report.decisions.push(Decision::Breaker(change));
        }
        attempt
    }

    /// The bookkeeping of a gang whose pods are all bound.
    fn admitted(
        &mut self,
        now_ms: u64,
        unit: &UnitPlan,
        size: Option<u32>,
        pods: &[(PodKey, usize)],
        report: &mut RoundReport,
    ) {
        let job = unit.job.clone().unwrap_or_default();
        let nodes: std::collections::BTreeSet<usize> = pods.iter().map(|(_, n)| *n).collect();
        let workers = self.cluster.job(&job).map(|j| j.workers).unwrap_or(0);
        let admitted_workers = size.unwrap_or(workers);
        // Started now, unless already running (a gang growing, or one whose
        // members were kept bound when an earlier bind failed).
        if let Some(e) = self.cluster.jobs.get_mut(&job)
            && (unit.wit.running == 0 || e.started_ms.is_none())
        {
            let again = e.started_ms.is_some();
            e.started_ms = Some(now_ms);
            if again {
                self.cluster.note_restart(&job);
            }
        }
        report.decisions.push(Decision::Admitted {
            unit: unit.key.clone(),
            pods: pods.len() as u32,
            workers: admitted_workers,
            nodes: nodes.len() as u32,
        });
        if admitted_workers < workers {
            report.effects.push(Effect::Scale(ScaleRequest {
                job,
                from: workers,
                workers: admitted_workers,
                reason: format!(
                    "admitted at {admitted_workers} workers (its minimum) because the requested size did not fit"
                ),
                cause: ScaleCause::Admission,
            }));
        }
    }

    /// Put `unit` back in the queue after an attempt that did not bind it.
    fn set_back(&mut self, unit: &UnitPlan, setback: Setback, now_ms: u64) {
        let waits = self.config.waits();
        let traits = (unit.wants_placed, self.need(unit));
        self.queue
            .set_back(unit.wit.id, setback, traits, now_ms, waits);
    }

    /// Try `unit` as it is, then with preemption when it fits nowhere.
    fn schedule_unit(
        &mut self,
        now_ms: u64,
        policy: &dyn Hooks,
        index: usize,
        unit: &UnitPlan,
        to_bind: &mut Vec<ToBind>,
        report: &mut RoundReport,
    ) -> Attempt {
        match self.try_unit_or_quorum(now_ms, policy, index, unit, to_bind, report) {
            Attempt::Unfit => self.make_room(now_ms, policy, unit, report),
            attempt => {
                // Placed, or stopped before any placement (gated, held,
                // short of its minResources, rejected): a domain held for
                // it would only keep others out.
                if !self.held.is_empty() {
                    self.held.remove(&unit.key);
                }
                attempt
            }
        }
    }
}
