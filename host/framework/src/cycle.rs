//! One scheduling round: queue order → pre-filter → built-in filters +
//! policy filter → score → reserve → permit → bind, with unreserve on any
//! failure. Gangs are bound together or not at all.

use std::collections::BTreeMap;

use serde::Serialize;

use super::breaker::{Breaker, BreakerChange, BreakerConfig};
use super::cluster::{Cluster, PodState};
use super::filters::{Rejections, feasible, fill_candidates, no_candidates};
use super::io::{ApiError, Binder, Effect, Eviction, Release, ScaleCause, ScaleRequest, Scaler};
use super::model::Role;
use super::preemption::Room;
use super::preferences;
use super::queue::{Queue, Setback};
use super::unit::UnitKey;
use super::view::Scoring;
use dragon_runtime::bounds::policy_text;
use dragon_runtime::{CallError, Failure, Hooks, wit};

/// Framework settings that are not the policy's business.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields, default, rename_all = "camelCase")]
pub struct SchedulerConfig {
    /// Longest a gang may wait in permit, whatever the policy asks
    /// (kube-scheduler caps permit waits at 15 minutes).
    pub max_permit_wait_ms: u64,
    /// A unit whose attempt failed (the policy or a bind) is not tried
    /// again for this long; the wait doubles with each failure up to
    /// `max_backoff_ms` (kube-scheduler's podInitialBackoffSeconds /
    /// podMaxBackoffSeconds: 1 s and 10 s).
    pub initial_backoff_ms: u64,
    /// The longest backoff, and the longest an unschedulable unit waits
    /// for a cluster change before it is tried again anyway.
    pub max_backoff_ms: u64,
    /// When repeated policy failures suspend the policy.
    pub breaker: BreakerConfig,
    /// Wall-clock budget of one round's unit attempts, ms (0: none). Units
    /// not tried when it runs out wait for the next round, so a policy that
    /// is slow on every call (but within its deadline) cannot hold a round
    /// for pods × deadline.
    pub round_budget_ms: u64,
    /// A unit that fits nowhere may evict lower-priority work (see
    /// `preemption`), as kube-scheduler's DefaultPreemption does.
    pub preemption: bool,
}

impl Default for SchedulerConfig {
    fn default() -> Self {
        SchedulerConfig {
            max_permit_wait_ms: 15 * 60 * 1000,
            initial_backoff_ms: 1000,
            max_backoff_ms: 10_000,
            breaker: BreakerConfig::default(),
            round_budget_ms: 10_000,
            preemption: true,
        }
    }
}

impl SchedulerConfig {
    /// No backoff: every pending unit is tried in every round (tests that
    /// step rounds by hand).
    pub fn without_backoff() -> SchedulerConfig {
        SchedulerConfig {
            initial_backoff_ms: 0,
            max_backoff_ms: 0,
            ..SchedulerConfig::default()
        }
    }
}

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
    /// or try the fallback policy if the driver gave one.
    PolicyFailed,
    /// Not tried yet: the gang's pods do not all exist or are gated (no
    /// backoff, as with a pre-enqueue gate; a change to its pods wakes it).
    Gated,
}

/// One outcome of a round, in the order it happened.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Decision {
    /// A pod was bound.
    Bound { pod: String, node: String },
    /// A gang was admitted (all its pods bound in this round).
    Admitted {
        unit: UnitKey,
        pods: u32,
        workers: u32,
        nodes: u32,
    },
    /// A gang holds reservations and waits in permit.
    Waiting {
        unit: UnitKey,
        reserved: u32,
        wait_ms: u64,
    },
    /// A unit could not be placed now.
    Unschedulable { unit: UnitKey, reason: String },
    /// A unit that fits nowhere makes room: lower-priority units evicted
    /// whole, or elastic jobs shrunk towards their minimum (never both).
    /// It is tried again once their pods are gone.
    Preempting {
        unit: UnitKey,
        #[serde(skip_serializing_if = "Vec::is_empty")]
        evicted: Vec<UnitKey>,
        #[serde(skip_serializing_if = "Vec::is_empty")]
        shrunk: Vec<UnitKey>,
    },
    /// A gang was rejected by permit and released.
    Rejected { unit: UnitKey, reason: String },
    /// A gang's permit wait ran out and it was released.
    TimedOut { unit: UnitKey, reason: String },
    /// A bind failed; the gang was released whole, but for `kept`: members
    /// already bound that nothing would recreate if deleted, left bound
    /// (named by the driver that applied the releases).
    BindFailed {
        unit: UnitKey,
        pod: String,
        error: ApiError,
        #[serde(skip_serializing_if = "Vec::is_empty")]
        kept: Vec<String>,
    },
    /// The policy failed; the unit stays pending (fail closed), unless a
    /// `FellBack` follows.
    PolicyError {
        /// The unit, or `None` for the queue order.
        unit: Option<UnitKey>,
        error: String,
    },
    /// After a policy error, the unit was tried with the fallback policy (its
    /// outcome follows). Gangs stay gangs: all pods or none.
    FellBack { unit: UnitKey, policy: String },
    /// The policy was suspended after repeated failures, or serves again.
    Breaker(BreakerChange),
    /// The round's time budget ran out with these units not tried; they
    /// are tried in the next round.
    Deferred { units: u32, budget_ms: u64 },
    /// A job was resized by the framework: admitted below its requested
    /// size, or shrunk to make room for a higher-priority unit.
    Resized {
        unit: UnitKey,
        workers: u32,
        reason: String,
    },
}

/// All outcomes of one round.
#[derive(Debug, Clone, Default, Serialize)]
pub struct RoundReport {
    /// The round's time, ms.
    pub now_ms: u64,
    /// What happened, in order.
    pub decisions: Vec<Decision>,
    /// What the driver is to do about it, in order (see [`Effect`]).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub effects: Vec<Effect>,
}

impl RoundReport {
    /// Name `pod` among the members of `unit` kept bound after its bind
    /// failed.
    pub fn kept(&mut self, unit: &UnitKey, pod: String) {
        let failed = self.decisions.iter_mut().rev().find_map(|d| match d {
            Decision::BindFailed { unit: u, kept, .. } if u == unit => Some(kept),
            _ => None,
        });
        if let Some(kept) = failed {
            kept.push(pod);
        }
    }

    /// Pods bound in this round.
    pub fn bound(&self) -> impl Iterator<Item = (&str, &str)> {
        self.decisions.iter().filter_map(|d| match d {
            Decision::Bound { pod, node } => Some((pod.as_str(), node.as_str())),
            _ => None,
        })
    }
}

/// A round decided and not yet bound (see [`Scheduler::plan_round`]). Its
/// pods are reserved until it is settled.
#[derive(Debug)]
#[must_use = "a planned round holds reservations until it is settled"]
pub struct PlannedRound {
    report: RoundReport,
    units: Vec<UnitPlan>,
    to_bind: Vec<ToBind>,
    /// `(pod, node)`, each group's pods together.
    binds: Vec<(String, String)>,
}

impl PlannedRound {
    /// `(pod, node name)` to bind, in order.
    pub fn binds(&self) -> &[(String, String)] {
        &self.binds
    }
}

impl ScaleRequest {
    /// The decision a round reports for a scale of its own (an admission's
    /// or a preemption's) once applied, or not.
    pub fn outcome(&self, result: Result<(), ApiError>) -> Decision {
        let unit = UnitKey::job(&self.job);
        match result {
            Ok(()) => Decision::Resized {
                unit,
                workers: self.workers,
                reason: self.reason.clone(),
            },
            Err(e) => Decision::PolicyError {
                unit: Some(unit),
                error: format!(
                    "could not shrink the job to {} workers ({}): {e}",
                    self.workers, self.reason
                ),
            },
        }
    }
}

/// Pods placed and permitted in this round: bound together at its end.
#[derive(Debug)]
struct ToBind {
    /// Index of the unit in the round's units.
    unit: usize,
    /// `(pod, node index)`, all bound or none.
    pods: Vec<(String, usize)>,
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
    job: Option<String>,
    /// Pending pods, in placement order.
    pub(crate) pods: Vec<String>,
    pub(crate) wit: wit::Unit,
}

/// The framework: a snapshot plus the state that lives between rounds
/// (gangs waiting in permit, the times scaling looks at).
#[derive(Debug, Clone, Default)]
pub struct Scheduler {
    /// The snapshot drivers keep current.
    pub cluster: Cluster,
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
    /// Preemptions under way: each preemptor's victims' pods, until none
    /// holds a node.
    pub(crate) preempting: BTreeMap<UnitKey, Vec<String>>,
    /// Victims whose eviction was refused, not chosen again before the
    /// given time, ms.
    pub(crate) protected: BTreeMap<UnitKey, u64>,
    /// Jobs whose shrink was refused (no `/scale` to patch), not shrunk
    /// again before the given time, ms.
    pub(crate) unshrinkable: BTreeMap<String, u64>,
}

/// The sizes a `pre-filter` answer asks to try, checked and deduplicated in
/// the order given: each must lie in the gang's `[min, workers]`, so at most
/// `workers - min + 1` placements are tried however long the list.
fn gang_sizes(unit: &wit::Unit, list: &[u32]) -> Result<Vec<u32>, String> {
    let lo = unit.min_workers.min(unit.workers);
    if !unit.gang {
        return Err(format!(
            "{} sizes for a unit that is not a gang",
            list.len()
        ));
    }
    let mut seen = std::collections::BTreeSet::new();
    let mut sizes = Vec::new();
    let distinct = (unit.workers - lo) as usize + 1;
    for &s in list {
        if s < lo || s > unit.workers {
            return Err(format!("size {s} is outside [{lo}, {}]", unit.workers));
        }
        // Every entry is checked; only the first of each size is kept.
        if sizes.len() < distinct && seen.insert(s) {
            sizes.push(s);
        }
    }
    Ok(sizes)
}

/// Report the policy's failure on `unit`; the attempt that failed.
fn policy_failed(report: &mut RoundReport, unit: &UnitKey, e: CallError) -> Attempt {
    report.decisions.push(Decision::PolicyError {
        unit: Some(unit.clone()),
        error: e.to_string(),
    });
    Attempt::PolicyFailed
}

fn invalid(policy: &dyn Hooks, hook: &'static str, msg: String) -> CallError {
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

    /// The framework's settings.
    pub fn config(&self) -> &SchedulerConfig {
        &self.config
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

    /// Gangs currently waiting in permit, by unit key.
    pub fn waiting_gangs(&self) -> impl Iterator<Item = &UnitKey> {
        self.waiting.keys()
    }

    /// Build the pending units. With gangs (the policy has `permit`, or the
    /// job is [declared](Job::declared)), a job's pending pods form one
    /// unit; without (`permit` not implemented), every pod is its own.
    fn units(&self, gangs: bool) -> Vec<UnitPlan> {
        let c = &self.cluster;
        let mut by_job: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        let mut lone: Vec<&str> = Vec::new();
        let is_gang = |job: &str| gangs || c.jobs.get(job).is_some_and(|j| j.job.declared);
        for (key, e) in &c.pods {
            if e.state != PodState::Pending || c.is_surplus(&e.pod) {
                continue;
            }
            match &e.pod.job {
                Some(job) if is_gang(job) => {
                    by_job.entry(job.as_str()).or_default().push(key.as_str())
                }
                _ => lone.push(key.as_str()),
            }
        }
        let task = |key: &str| {
            let p = &c.pods[key].pod;
            wit::Task {
                role: p.role.to_wit(),
                index: p.index,
                request: p.request.to_wit(),
            }
        };
        let mut units = Vec::new();
        for (job, mut pods) in by_job {
            let je = &c.jobs[job];
            pods.sort_by_key(|k| {
                let p = &c.pods[*k].pod;
                (p.role.placement_rank(), p.index, p.key.clone())
            });
            let running = c
                .job_pods(job)
                .filter(|(_, s)| matches!(s, PodState::Bound(_)))
                .count() as u32;
            units.push(UnitPlan {
                key: UnitKey::job(job),
                job: Some(job.to_string()),
                wit: wit::Unit {
                    id: je.unit_id,
                    arrival_ms: je.job.arrival_ms,
                    priority: je.job.priority,
                    gang: true,
                    tasks: pods.iter().map(|k| task(k)).collect(),
                    workers: je.job.workers,
                    min_workers: je.job.min_workers,
                    max_workers: je.job.max_workers,
                    running,
                },
                pods: pods.iter().map(|k| k.to_string()).collect(),
            });
        }
        for key in lone {
            let e = &c.pods[key];
            // A pod of a job scheduled on its own (a policy without gangs)
            // still tells the policy what job it belongs to.
            let (workers, min, max) = e
                .pod
                .job
                .as_ref()
                .and_then(|j| c.jobs.get(j))
                .map(|j| (j.job.workers, j.job.min_workers, j.job.max_workers))
                .unwrap_or((0, 0, 0));
            units.push(UnitPlan {
                key: UnitKey::pod(key),
                job: None,
                wit: wit::Unit {
                    id: e.unit_id,
                    arrival_ms: e.pod.arrival_ms,
                    priority: e.pod.priority,
                    gang: false,
                    tasks: vec![task(key)],
                    workers,
                    min_workers: min,
                    max_workers: max,
                    running: 0,
                },
                pods: vec![key.to_string()],
            });
        }
        units
    }

    /// The policy's queue order, validated; FIFO when the policy does not
    /// order or fails (the failure is reported).
    fn order(
        &mut self,
        now_ms: u64,
        policy: &dyn Hooks,
        units: &[UnitPlan],
        report: &mut RoundReport,
    ) -> Vec<usize> {
        // kube-scheduler's PrioritySort: priority, then the time the unit
        // (re-)entered the queue.
        let fifo = || {
            let mut o: Vec<usize> = (0..units.len()).collect();
            o.sort_by_key(|&i| {
                let u = &units[i];
                let entered = self
                    .queue
                    .since_ms(&u.key)
                    .map_or(u.wit.arrival_ms, |t| t.max(u.wit.arrival_ms));
                (std::cmp::Reverse(u.wit.priority), entered, u.wit.id)
            });
            o
        };
        if !policy.info().implements(wit::Hook::QueueOrder)
            || !self.breaker.is_closed(&policy.info().sha256)
        {
            return fifo();
        }
        let queued: Vec<wit::Queued> = units
            .iter()
            .map(|u| wit::Queued {
                id: u.wit.id,
                arrival_ms: u.wit.arrival_ms,
                priority: u.wit.priority,
                pods: u.wit.tasks.len() as u32,
                total: u.wit.tasks.iter().fold(
                    wit::Resources {
                        cpu_milli: 0,
                        memory_mib: 0,
                        gpus: 0,
                    },
                    |a, t| wit::Resources {
                        cpu_milli: a.cpu_milli.saturating_add(t.request.cpu_milli),
                        memory_mib: a.memory_mib.saturating_add(t.request.memory_mib),
                        gpus: a.gpus.saturating_add(t.request.gpus),
                    },
                ),
            })
            .collect();
        let result = policy
            .queue_order(now_ms, &queued, &self.cluster)
            .and_then(|order| {
                let mut seen = vec![false; units.len()];
                for &i in &order {
                    let i = i as usize;
                    if i >= units.len() || seen[i] {
                        return Err(invalid(
                            policy,
                            "queue-order",
                            format!(
                                "not a permutation of 0..{}: index {i} is out of range or repeated",
                                units.len()
                            ),
                        ));
                    }
                    seen[i] = true;
                }
                if order.len() != units.len() {
                    return Err(invalid(
                        policy,
                        "queue-order",
                        format!("{} indices for {} units", order.len(), units.len()),
                    ));
                }
                Ok(order.into_iter().map(|i| i as usize).collect())
            });
        // A failure counts towards suspending the policy; a success does
        // not reset the count (units' attempts do).
        if result.is_err()
            && let Some(change) = self.breaker.record(false, now_ms, &policy.info().name)
        {
            report.decisions.push(Decision::Breaker(change));
        }
        result.unwrap_or_else(|e| {
            report.decisions.push(Decision::PolicyError {
                unit: None,
                error: e.to_string(),
            });
            fifo()
        })
    }

    /// Release gangs whose permit wait ran out.
    fn expire_waits(&mut self, now_ms: u64, report: &mut RoundReport) {
        let expired: Vec<UnitKey> = self
            .waiting
            .iter()
            .filter(|(_, w)| now_ms >= w.deadline_ms)
            .map(|(k, _)| k.clone())
            .collect();
        for key in expired {
            let Some(w) = self.waiting.remove(&key) else {
                continue;
            };
            let job = key.job_name().unwrap_or_default();
            let held = self.cluster.job_placed(job);
            let present = self
                .cluster
                .job_pods(job)
                .filter(|(p, _)| !self.cluster.is_surplus(p))
                .count();
            let min_member = self.cluster.job(job).map_or(0, |j| j.min_member);
            let limit = match w.group_timeout {
                true => "its scheduleTimeoutSeconds",
                false => "the wait the policy allowed",
            };
            self.unreserve_job(&key);
            // Like a gang permit rejects: tried again on a change that may
            // help it (its missing members created), not at once.
            if let Some(id) = self.cluster.jobs.get(job).map(|e| e.unit_id) {
                let backoff = (self.config.initial_backoff_ms, self.config.max_backoff_ms);
                self.queue
                    .set_back(&key, id, Setback::Unschedulable, false, now_ms, backoff);
            }
            report.decisions.push(Decision::TimedOut {
                unit: key,
                reason: format!(
                    "gang timed out in permit after {} s ({limit}) with {held} of minMember {min_member} pods placed ({present} exist); its reservations are released",
                    now_ms.saturating_sub(w.since_ms) / 1000
                ),
            });
        }
    }

    fn reserved_of(&self, unit_key: &UnitKey) -> Vec<String> {
        let Some(job) = unit_key.job_name() else {
            return Vec::new();
        };
        self.cluster
            .job_pods(job)
            .filter(|(_, s)| matches!(s, PodState::Reserved(_)))
            .map(|(p, _)| p.key.clone())
            .collect()
    }

    fn unreserve_job(&mut self, unit_key: &UnitKey) {
        for key in self.reserved_of(unit_key) {
            self.cluster.set_state(&key, PodState::Pending);
        }
    }

    /// Run one scheduling round at `now_ms` and apply it one call at a time
    /// through `binder` and `scaler`; a unit the policy fails on stays
    /// pending (fail closed).
    pub fn schedule_round(
        &mut self,
        now_ms: u64,
        policy: &dyn Hooks,
        binder: &mut dyn Binder,
        scaler: &mut dyn Scaler,
    ) -> RoundReport {
        self.schedule_round_with_fallback(now_ms, policy, None, binder, scaler)
    }

    /// [`Scheduler::schedule_round`], but a unit the policy fails on is tried
    /// again in the same round with `fallback` (see [`Scheduler::plan_round`]).
    pub fn schedule_round_with_fallback(
        &mut self,
        now_ms: u64,
        policy: &dyn Hooks,
        fallback: Option<&dyn Hooks>,
        binder: &mut dyn Binder,
        scaler: &mut dyn Scaler,
    ) -> RoundReport {
        let planned = self.plan_round(now_ms, policy, fallback);
        let results = match planned.binds.is_empty() {
            true => Vec::new(),
            false => binder.bind_many(&planned.binds),
        };
        let mut report = self.settle_round(planned, results);
        // Taken out while the report is written to, and put back after.
        let effects = std::mem::take(&mut report.effects);
        for effect in &effects {
            match effect {
                Effect::Release { unit, pod } => {
                    let outcome = binder.unbind(pod);
                    if let Err(e) = &outcome {
                        tracing::error!(pod = %pod, "cannot release a bound gang member: {e}");
                    }
                    if self.released(pod, outcome) == Release::Kept {
                        report.kept(unit, pod.clone());
                    }
                }
                Effect::Scale(request) => {
                    let result = scaler.scale(&request.job, request.workers, &request.reason);
                    match result {
                        Ok(()) => self.scaled(request, now_ms),
                        Err(_) => self.scale_failed(request, now_ms),
                    }
                    report.decisions.push(request.outcome(result));
                }
                Effect::Evict(eviction) => {
                    let result = binder.evict(eviction);
                    if let Err(e) = &result {
                        tracing::warn!(victim = %eviction.victim, "cannot evict: {e}");
                    }
                    self.evicted(eviction, result, now_ms);
                }
            }
        }
        report.effects = effects;
        report
    }

    /// Decide one round at `now_ms`: every pending unit the queue lets be
    /// tried is placed against reservations, and what is placed and
    /// permitted is to be bound: send [`PlannedRound::binds`] (together, if
    /// the driver can: each is a round trip to the API server in
    /// Kubernetes) and give their results to [`Scheduler::settle_round`].
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
    ) -> PlannedRound {
        let mut report = RoundReport {
            now_ms,
            ..RoundReport::default()
        };
        self.cluster.set_clock(now_ms);
        self.expire_waits(now_ms, &mut report);
        let changes = self.cluster.take_changes();
        self.queue.wake(&changes, now_ms);
        let gangs = policy.info().implements(wit::Hook::Permit);
        let mut units = self.units(gangs);
        // Units that are no longer pending leave the queue; the others are
        // tried once ready (see `queue`).
        let pending: std::collections::BTreeSet<&UnitKey> = units.iter().map(|u| &u.key).collect();
        self.queue.retain(&pending);
        // A victim seen pending or gone is forgotten: a copy its controller
        // makes under the same name is not one to wait for.
        let cluster = &self.cluster;
        self.preempting.retain(|k, pods| {
            pods.retain(|p| {
                cluster
                    .pod(p)
                    .is_some_and(|(_, s)| matches!(s, PodState::Bound(_)))
            });
            pending.contains(k) && !pods.is_empty()
        });
        units.retain(|u| self.queue.ready(&u.key, now_ms));
        let mut to_bind = Vec::new();
        if !units.is_empty() {
            self.attempt_units(now_ms, policy, fallback, &units, &mut to_bind, &mut report);
        }
        let binds = to_bind
            .iter()
            .flat_map(|b: &ToBind| &b.pods)
            .map(|(pod, node)| (pod.clone(), self.cluster.nodes()[*node].name.clone()))
            .collect();
        PlannedRound {
            report,
            units,
            to_bind,
            binds,
        }
    }

    /// Try each unit in the policy's order within the round's budget.
    fn attempt_units(
        &mut self,
        now_ms: u64,
        policy: &dyn Hooks,
        fallback: Option<&dyn Hooks>,
        units: &[UnitPlan],
        to_bind: &mut Vec<ToBind>,
        report: &mut RoundReport,
    ) {
        policy.begin_round();
        if let Some(f) = fallback {
            f.begin_round();
        }
        let started = std::time::Instant::now();
        let budget = std::time::Duration::from_millis(self.config.round_budget_ms);
        let order = self.order(now_ms, policy, units, report);
        for (position, &i) in order.iter().enumerate() {
            let unit = &units[i];
            if !budget.is_zero() && started.elapsed() > budget {
                report.decisions.push(Decision::Deferred {
                    units: (order.len() - position) as u32,
                    budget_ms: self.config.round_budget_ms,
                });
                break;
            }
            let mut attempt = self.guarded_attempt(now_ms, policy, i, unit, to_bind, report);
            if let (Attempt::PolicyFailed, Some(fallback)) = (attempt, fallback) {
                report.decisions.push(Decision::FellBack {
                    unit: unit.key.clone(),
                    policy: fallback.info().name.clone(),
                });
                attempt = self.schedule_unit(now_ms, fallback, i, unit, to_bind, report);
            }
            match attempt {
                Attempt::Progress => self.queue.settled(&unit.key),
                Attempt::Failed | Attempt::Unfit => {
                    self.set_back(unit, Setback::Unschedulable, now_ms)
                }
                Attempt::PolicyFailed => self.set_back(unit, Setback::Error, now_ms),
                Attempt::Gated => self.set_back(unit, Setback::Gated, now_ms),
                Attempt::Binding => {}
            }
        }
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
        if self.breaker.admit(&info.sha256, now_ms).is_err() {
            // The same text every round (no countdown): drivers publish an
            // Event per pod each time the reason changes.
            report.decisions.push(Decision::PolicyError {
                unit: Some(unit.key.clone()),
                error: format!(
                    "policy `{}` is suspended after repeated failures until a probe call succeeds",
                    info.name
                ),
            });
            return Attempt::PolicyFailed;
        }
        let attempt = self.schedule_unit(now_ms, policy, index, unit, to_bind, report);
        if attempt != Attempt::Gated
            && let Some(change) =
                self.breaker
                    .record(attempt != Attempt::PolicyFailed, now_ms, &info.name)
        {
            report.decisions.push(Decision::Breaker(change));
        }
        attempt
    }

    /// Finish a planned round with the results of its binds, one per
    /// [`PlannedRound::binds`] entry in order (a missing result counts as
    /// failed). A group whose bind failed is released whole: each of its
    /// members already bound becomes an [`Effect::Release`], and it backs
    /// off. A unit of lone pods backs off only when none of its pods could
    /// be bound. A gang admitted below its requested size gets an
    /// [`Effect::Scale`].
    #[must_use = "the report's effects are the driver's to apply"]
    pub fn settle_round(
        &mut self,
        planned: PlannedRound,
        results: Vec<Result<(), ApiError>>,
    ) -> RoundReport {
        let PlannedRound {
            mut report,
            units,
            to_bind,
            binds,
        } = planned;
        let now_ms = report.now_ms;
        let mut results = results.into_iter();
        let mut binds = binds.into_iter();
        // Per unit of lone pods: whether any of its pods was bound.
        let mut lone: BTreeMap<usize, bool> = BTreeMap::new();
        for group in to_bind {
            let unit = &units[group.unit];
            let outcome: Vec<(String, Result<(), ApiError>)> = group
                .pods
                .iter()
                .map(|_| {
                    let (_, node) = binds.next().unwrap_or_default();
                    let result = results.next().unwrap_or_else(|| {
                        Err(ApiError::new(
                            crate::ApiErrorKind::Unavailable,
                            "the binder returned fewer results than binds",
                        ))
                    });
                    (node, result)
                })
                .collect();
            let failed = group
                .pods
                .iter()
                .zip(&outcome)
                .find_map(|((pod, _), (_, r))| r.as_ref().err().map(|e| (pod.clone(), e.clone())));
            if let Some((pod, error)) = failed {
                for ((p, node), (_, r)) in group.pods.iter().zip(&outcome) {
                    // Bound until the driver reports the release.
                    let state = match r {
                        Ok(()) => {
                            report.effects.push(Effect::Release {
                                unit: unit.key.clone(),
                                pod: p.clone(),
                            });
                            PodState::Bound(*node)
                        }
                        Err(_) => PodState::Pending,
                    };
                    self.cluster.set_state(p, state);
                }
                self.waiting.remove(&unit.key);
                report.decisions.push(Decision::BindFailed {
                    unit: unit.key.clone(),
                    pod,
                    error,
                    kept: Vec::new(),
                });
                match group.gang {
                    Some(_) => self.set_back(unit, Setback::Error, now_ms),
                    None => {
                        lone.entry(group.unit).or_insert(false);
                    }
                }
                continue;
            }
            self.cluster.note_placed();
            for ((pod, node), (node_name, _)) in group.pods.iter().zip(outcome) {
                self.cluster.set_state(pod, PodState::Bound(*node));
                report.decisions.push(Decision::Bound {
                    pod: pod.clone(),
                    node: node_name,
                });
            }
            self.last_admit_ms = now_ms;
            match group.gang {
                Some(size) => {
                    self.queue.settled(&unit.key);
                    self.admitted(now_ms, unit, size, &group.pods, &mut report);
                }
                None => {
                    lone.insert(group.unit, true);
                }
            }
        }
        for (i, any_bound) in lone {
            if any_bound {
                self.queue.settled(&units[i].key);
            } else {
                self.set_back(&units[i], Setback::Error, now_ms);
            }
        }
        report
    }

    /// What became of a gang member given in an [`Effect::Release`]:
    /// unbound (or not found bound: its release failed and a watch will say
    /// where it is), it is pending again; kept, it stays bound. Returns the
    /// release as recorded.
    pub fn released(&mut self, pod: &str, outcome: Result<Release, ApiError>) -> Release {
        let release = match outcome {
            Ok(Release::Kept) => Release::Kept,
            Ok(Release::Unbound) | Err(_) => Release::Unbound,
        };
        if release == Release::Unbound && self.cluster.pod(pod).is_some() {
            self.cluster.set_state(pod, PodState::Pending);
        }
        release
    }

    /// What became of an [`Effect::Evict`]: refused, the victim is not
    /// chosen again for a backoff and its preemptor looks for other room.
    /// Evicted, its pods stay until the driver removes them.
    pub fn evicted(&mut self, eviction: &Eviction, result: Result<(), ApiError>, now_ms: u64) {
        if result.is_err() {
            self.spared(&eviction.victim, now_ms);
        }
    }

    /// A victim that could not be evicted or shrunk: its preemptors look
    /// for other room, and it is not chosen again for a backoff.
    fn spared(&mut self, victim: &UnitKey, now_ms: u64) {
        let cluster = &self.cluster;
        let of_victim = |pod: &String| match victim {
            UnitKey::Pod(key) => key == pod,
            UnitKey::Job(job) => cluster
                .pod(pod)
                .is_some_and(|(p, _)| p.job.as_ref() == Some(job)),
        };
        self.preempting
            .retain(|_, pods| !pods.iter().any(|p| of_victim(p)));
        let until = now_ms.saturating_add(self.config.max_backoff_ms.max(1000));
        self.protected.insert(victim.clone(), until);
    }

    /// A scale the driver could not apply. A shrink for a preemption is
    /// not tried on that job again for a backoff (its preemptors look for
    /// other room, eviction included).
    pub fn scale_failed(&mut self, request: &ScaleRequest, now_ms: u64) {
        if request.cause == ScaleCause::Preemption {
            let victim = UnitKey::job(&request.job);
            self.spared(&victim, now_ms);
            if let Some(until) = self.protected.remove(&victim) {
                self.unshrinkable.insert(request.job.clone(), until);
            }
        }
    }

    /// Record a scale the driver applied: the job's size changes. Below an
    /// admission, its surplus pending workers go (their controller deletes
    /// them); after the scale step, see `apply_scale`. After a shrink for a
    /// preemption the surplus workers keep their room until the driver
    /// removes them (in Kubernetes, once they have terminated), as evicted
    /// victims do: their preemptor waits for them, so it is not placed, nor
    /// does it shrink the job again, while they still run.
    pub fn scaled(&mut self, request: &ScaleRequest, now_ms: u64) {
        self.cluster.set_clock(now_ms);
        // A running job resized restarts with its new size.
        if request.cause != ScaleCause::Admission
            && self.cluster.job_started_ms(&request.job).is_some()
        {
            self.cluster.note_restart(&request.job);
        }
        match request.cause {
            ScaleCause::Policy => self.apply_scale(&request.job, request.workers, now_ms),
            ScaleCause::Preemption => {
                self.resize(&request.job, request.workers, now_ms);
            }
            ScaleCause::Admission => {
                let (job, workers) = (&request.job, request.workers);
                if let Some(e) = self.cluster.jobs.get_mut(job) {
                    e.job.workers = workers;
                }
                let surplus: Vec<String> = self
                    .cluster
                    .job_pods(job)
                    .filter(|(p, s)| {
                        *s == PodState::Pending && p.role == Role::Worker && p.index >= workers
                    })
                    .map(|(p, _)| p.key.clone())
                    .collect();
                for key in surplus {
                    let _ = self.cluster.forget_pod(&key);
                }
            }
        }
    }

    /// The bookkeeping of a gang whose pods are all bound.
    fn admitted(
        &mut self,
        now_ms: u64,
        unit: &UnitPlan,
        size: Option<u32>,
        pods: &[(String, usize)],
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
        let wants_placed = unit.pods.iter().any(|k| {
            self.cluster.pod(k).is_some_and(|(p, _)| {
                !p.constraints.pod_affinity.is_empty() || !p.constraints.spread.is_empty()
            })
        });
        let backoff = (self.config.initial_backoff_ms, self.config.max_backoff_ms);
        self.queue.set_back(
            &unit.key,
            unit.wit.id,
            setback,
            wants_placed,
            now_ms,
            backoff,
        );
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
            attempt => attempt,
        }
    }

    /// Try `unit`; a gang with more pods than its `minMember` needs that
    /// cannot be placed whole is tried again with just enough of its pods
    /// (the rest follow as room appears), and the report keeps the whole
    /// gang's reason and outcome if that fails too.
    fn try_unit_or_quorum(
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
    fn quorum(&self, unit: &UnitPlan) -> Option<UnitPlan> {
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
            if feasible(&self.cluster, pod, &mut Rejections::default()).is_empty() {
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

    fn try_unit(
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
        if let Some(gated) = unit
            .pods
            .iter()
            .filter_map(|k| self.cluster.pod(k))
            .find(|(p, _)| !p.scheduling_gates.is_empty())
            .map(|(p, _)| p)
        {
            report.decisions.push(Decision::Unschedulable {
                unit: unit.key.clone(),
                reason: format!(
                    "scheduling gated: pod {} has scheduling gates [{}]",
                    gated.key,
                    gated.scheduling_gates.join(", ")
                ),
            });
            return Attempt::Gated;
        }
        // A job held by its driver (an invalid PodGroup) is not tried.
        if let Some(reason) = unit
            .job
            .as_deref()
            .and_then(|j| self.cluster.job(j))
            .and_then(|j| j.hold.as_ref())
        {
            report.decisions.push(Decision::Unschedulable {
                unit: unit.key.clone(),
                reason: reason.clone(),
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
            let present = self
                .cluster
                .job_pods(job)
                .filter(|(p, _)| !self.cluster.is_surplus(p))
                .count() as u32;
            let min_member = self.cluster.job(job).map(|j| j.min_member).unwrap_or(0);
            if present < min_member {
                report.decisions.push(Decision::Unschedulable {
                    unit: unit.key.clone(),
                    reason: format!("waiting for the gang's pods to be created: {present} of minMember {min_member} exist"),
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
                    reason: format!(
                        "the cluster does not have the PodGroup's minResources free: short of {}",
                        gap.join(", ")
                    ),
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
                    reason,
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
        let mut chosen: Option<(Option<u32>, Vec<(String, usize)>)> = None;
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
                reason: last_reason,
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
        let present = self
            .cluster
            .job_pods(&job)
            .filter(|(p, _)| !self.cluster.is_surplus(p))
            .count() as u32;
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
                let all: Vec<(String, usize)> = self
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
    fn make_room(
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
                reason.push_str("; preemption: ");
                reason.push_str(more);
            }
        };
        let victims = match self.find_room(now_ms, policy, unit, gangs) {
            Ok(Room::None(None)) => return Attempt::Failed,
            Ok(Room::None(Some(cause))) => {
                why(report, cause);
                return Attempt::Failed;
            }
            Ok(Room::Awaited(pods)) => {
                why(
                    report,
                    &format!("waiting for {pods} pod(s) preempted for it to leave"),
                );
                return Attempt::Failed;
            }
            Ok(Room::Victims(victims)) => victims,
            Err(e) => {
                return policy_failed(report, &unit.key, e);
            }
        };
        let priority = unit.wit.priority;
        let mut evicted = Vec::new();
        let mut shrunk = Vec::new();
        let mut pods = Vec::new();
        for v in victims {
            pods.extend(v.pods.iter().map(|(k, _)| k.clone()));
            let job = v.key.job_name().unwrap_or_default().to_string();
            match v.shrink {
                Some((from, to)) => {
                    report.effects.push(Effect::Scale(ScaleRequest {
                        job,
                        from,
                        workers: to,
                        reason: format!(
                            "shrunk to {to} workers to make room for {} (priority {priority} over {})",
                            unit.key, v.priority
                        ),
                        cause: ScaleCause::Preemption,
                    }));
                    shrunk.push(v.key);
                }
                None => {
                    report.effects.push(Effect::Evict(Eviction {
                        pods: v.pods.into_iter().map(|(k, _)| k).collect(),
                        preemptor: unit.key.clone(),
                        message: format!(
                            "preempted by {} (priority {priority} over {})",
                            unit.key, v.priority
                        ),
                        victim: v.key.clone(),
                    }));
                    evicted.push(v.key);
                }
            }
        }
        let what = match (evicted.len(), shrunk.len()) {
            (n, 0) => format!("evicting {n} lower-priority unit(s) to make room"),
            (_, n) => format!("shrinking {n} lower-priority elastic job(s) to make room"),
        };
        why(report, &what);
        report.decisions.push(Decision::Preempting {
            unit: unit.key.clone(),
            evicted,
            shrunk,
        });
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
                .map_err(|msg| invalid(policy, "pre-filter", msg)),
        }
    }

    /// Reserve a node for each pod of `unit` at `size` workers; on failure
    /// every reservation made here is undone.
    pub(crate) fn place(
        &mut self,
        now_ms: u64,
        policy: &dyn Hooks,
        unit: &UnitPlan,
        size: Option<u32>,
    ) -> Result<Vec<(String, usize)>, PlaceError> {
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
        if let Some(job) = &unit.job {
            for (_, s) in self.cluster.job_pods(job) {
                if let Some(n) = s.node() {
                    siblings[n] += 1;
                }
            }
        }
        // Members beyond the gang's `minMember` are optional when the
        // policy chose no size: one that fits nowhere waits for a later
        // round instead of holding the others back (as Coscheduling binds
        // any `minMember` of a group's pods).
        let mut optional = match size {
            Some(_) => 0,
            None => self.optional_members(unit, keep.len()),
        };
        let mut skipped: Option<PlaceError> = None;
        let mut placed: Vec<(String, usize)> = Vec::new();
        let undo = |this: &mut Scheduler, placed: &[(String, usize)]| {
            for (k, _) in placed {
                this.cluster.set_state(k, PodState::Pending);
            }
        };
        for (t, &i) in keep.iter().enumerate() {
            let key = &unit.pods[i];
            placement.task = t as u32;
            let pod = &self.cluster.pods[key].pod;
            let mut rejections = Rejections::default();
            let mut index = feasible(&self.cluster, pod, &mut rejections);
            let fail =
                |this: &mut Scheduler, placed: &[(String, usize)], rejections: &Rejections| {
                    undo(this, placed);
                    let live = (0..this.cluster.nodes().len())
                        .filter(|&n| this.cluster.is_live(n))
                        .count();
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
                            "filter",
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
                            "score",
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
    fn optional_members(&self, unit: &UnitPlan, pending: usize) -> usize {
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
