//! The discrete-event loop: arrivals, scheduling rounds, binds, the periodic
//! scale step, restarts and completions, in integer milliseconds, driving the
//! host framework ([`Scheduler`]) with the policy exactly as the Kubernetes
//! shim does. Nothing here iterates a hash map into output: the same trace,
//! policy and settings give the same run.

mod act;
mod timeline;

use std::collections::{BTreeMap, BTreeSet};

use super::queues::{QueueMeter, QueueSummary};
use super::trace::Trace;
use crate::spec;
use dragon_framework::record::Frame;
use dragon_framework::{
    Answers, ApiError, Binder, BreakerChange, Cluster, ClusterOp, Decision, Effect, Eviction,
    Flush, Release, Role, Scaler, Scheduler, SchedulerConfig, Wake, subject,
};
use dragon_framework::{JobKey, PodKey};
use dragon_runtime::{ClusterView, Hooks, wit};

/// How to run.
#[derive(Debug, Clone, Copy)]
pub struct SimOptions {
    /// Stop here (simulated ms) even if jobs remain.
    pub horizon_ms: u64,
    /// A queue owed GPUs may preempt borrowers' work (the framework's
    /// `reclaim`).
    pub reclaim: bool,
    /// Whether a unit parked as unschedulable is tried again when its
    /// flush is due, as in a cluster, or only after a change that could let
    /// it fit, its flushes counted (the default: the simulator sees every
    /// change; the decisions are the same unless the policy's answers move
    /// with time or with which units a round tries).
    pub flush: Flush,
    /// Whether freed room wakes every parked unit, as in a cluster, or
    /// only those it could fit, the others' attempts counted (the
    /// default: the same decisions, with no call made for a unit that
    /// could not fit).
    pub wake: Wake,
}

impl SimOptions {
    /// The framework's settings of a run with these options.
    pub fn config(&self) -> SchedulerConfig {
        SchedulerConfig {
            reclaim: self.reclaim,
            flush: self.flush,
            wake: self.wake,
            ..sim_config()
        }
    }
}

/// Default horizon: 30 simulated days.
pub const DEFAULT_HORIZON_S: u64 = 30 * 24 * 3600;

impl Default for SimOptions {
    fn default() -> Self {
        SimOptions {
            horizon_ms: DEFAULT_HORIZON_S * 1000,
            reclaim: false,
            flush: Flush::Count,
            wake: Wake::Fits,
        }
    }
}

/// What happened to one job.
#[derive(Debug, Clone, PartialEq)]
pub struct JobRecord {
    pub name: String,
    pub workload: String,
    pub arrival_ms: u64,
    /// First moment all its tasks were bound (it began to train).
    pub started_ms: Option<u64>,
    pub finished_ms: Option<u64>,
    pub requested_workers: u32,
    pub min_workers: u32,
    pub max_workers: u32,
    /// Workers at the end (or when it finished).
    pub final_workers: u32,
    pub scale_ups: u32,
    pub scale_downs: u32,
    /// Restarts paid (one per scale event of a started job).
    pub restarts: u32,
    /// Most nodes its tasks spanned while running.
    pub max_nodes: u32,
    /// Time spent holding some but not all of its tasks' resources (half
    /// placed, doing no work), ms.
    pub partial_ms: u64,
}

/// The cluster at one moment (a row of the timeline; it holds until the next).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Point {
    pub t_ms: u64,
    /// GPUs requested by pods holding a node (bound or reserved).
    pub gpus_allocated: u64,
    /// GPUs of jobs that are training (all tasks bound, not restarting).
    pub gpus_busy: u64,
    /// Jobs submitted and not yet started.
    pub queued: u32,
    /// Jobs training.
    pub running: u32,
    /// Jobs holding resources without training: partly placed, or restarting.
    pub stalled: u32,
    /// Jobs finished.
    pub done: u32,
}

/// Everything a run produced.
#[derive(Debug, Clone)]
pub struct SimRun {
    /// The policy's name and settings.
    pub policy: String,
    pub settings: String,
    pub trace: String,
    pub total_gpus: u64,
    /// When the run ended, ms: the last completion, the start of a
    /// deadlock, or the horizon.
    pub end_ms: u64,
    pub deadlocked: bool,
    pub horizon_reached: bool,
    pub jobs: Vec<JobRecord>,
    pub timeline: Vec<Point>,
    /// ∫ allocated GPUs dt and ∫ busy GPUs dt over [0, end], GPU·ms.
    pub gpu_alloc_integral: f64,
    pub gpu_busy_integral: f64,
    /// ∫ queued jobs dt, job·ms.
    pub queue_integral: f64,
    /// With topology levels: ∫ free GPUs of the largest free domain of the
    /// narrowest level dt, GPU·ms (how whole the free room stays).
    pub largest_free_integral: Option<f64>,
    pub scale_ups: u64,
    pub scale_downs: u64,
    /// Gangs admitted below their requested size (at `min`).
    pub admitted_below_request: u64,
    /// Jobs evicted whole to make room for a higher-priority job (each
    /// restarts when placed again).
    pub preemptions: u64,
    /// The policy's resizes the framework's resize limits held back.
    pub resizes_held: u64,
    pub rounds: u64,
    pub scale_steps: u64,
    pub policy_errors: u64,
    /// The first few policy errors, verbatim.
    pub policy_error_samples: Vec<String>,
    /// Per queue of the trace, what it held against what it was owed.
    pub queues: Vec<QueueSummary>,
}

/// A binder and scaler that always succeed: the simulated cluster does
/// what it is told.
struct SimIo;

impl Binder for SimIo {
    fn bind(&mut self, _pod: &str, _node: &str) -> Result<(), ApiError> {
        Ok(())
    }
    fn unbind(&mut self, _pod: &str) -> Result<Release, ApiError> {
        Ok(Release::Unbound)
    }
    fn evict(&mut self, _eviction: &Eviction) -> Result<(), ApiError> {
        Ok(())
    }
}

impl Scaler for SimIo {
    fn scale(&mut self, _job: &str, _workers: u32, _reason: &str) -> Result<(), ApiError> {
        Ok(())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Future,
    Active,
    Done,
}

#[derive(Debug, Clone)]
struct JobState {
    phase: Phase,
    ps: u32,
    workers: u32,
    /// GPUs per worker and of all parameter servers together.
    worker_gpus: u32,
    ps_gpus: u32,
    /// Bound pods → node index.
    placement: BTreeMap<PodKey, usize>,
    /// All pods of the current size are bound.
    full: bool,
    /// A scale event happened; the job restarts when next fully bound.
    needs_restart: bool,
    restart_until: u64,
    /// Reference ms of work left.
    remaining: f64,
    rate: f64,
    /// When it finishes if nothing changes (valid while `full`), or, with
    /// `rerate`, when its rate changes.
    finish_at: u64,
    rerate: bool,
    /// Since when it is half placed (for `partial_ms`).
    partial_since: Option<u64>,
    record: JobRecord,
}

impl JobState {
    fn gpus(&self) -> u64 {
        u64::from(self.ps_gpus) + u64::from(self.workers) * u64::from(self.worker_gpus)
    }

    fn busy(&self, now: u64) -> bool {
        self.full && self.restart_until <= now
    }

    fn partial(&self) -> bool {
        !self.full && !self.placement.is_empty()
    }

    fn stalled(&self, now: u64) -> bool {
        (self.full && self.restart_until > now) || self.partial()
    }
}

#[derive(Debug, Clone, Copy, Default)]
struct Integrals {
    alloc: f64,
    busy: f64,
    queue: f64,
    /// ∫ free GPUs of the largest free domain of the narrowest level dt.
    largest_free: f64,
}

/// Progress reports for a progress bar: `(jobs done, jobs total, now ms)`.
pub type Progress<'a> = &'a dyn Fn(u64, u64, u64);

struct Sim<'a> {
    trace: &'a Trace,
    /// The level whose largest free domain is integrated, if any.
    fragmentation: Option<String>,
    policy: &'a dyn Hooks,
    sched: Scheduler,
    /// Where each step goes as a recording's frame, if anywhere.
    sink: Option<&'a mut dyn FnMut(Frame)>,
    jobs: Vec<JobState>,
    by_name: BTreeMap<JobKey, usize>,
    /// Fully bound, unfinished jobs.
    full: BTreeSet<usize>,
    /// Arrived, unfinished jobs.
    active: BTreeSet<usize>,
    /// Active jobs holding a node or fully placed, and those that stopped
    /// since the last timeline point: the only ones a point reads one by
    /// one (the others are queued, and counted as such).
    holding: BTreeSet<usize>,
    permit_deadlines: BTreeSet<u64>,
    /// When units' scheduling backoff ends (a round retries them then).
    retries: BTreeSet<u64>,
    now: u64,
    next_arrival: usize,
    done: u64,
    started: u64,
    integrals: Integrals,
    /// Integrals and time at the last change (for ending at a deadlock).
    at_last_change: (u64, Integrals),
    /// What each of the trace's queues held and was owed, if it has any.
    queues: Option<QueueMeter>,
    run: SimRun,
    touched: BTreeSet<usize>,
    changed: bool,
}

/// Simulate `trace` under `policy`.
pub fn simulate(
    trace: &Trace,
    policy: &dyn Hooks,
    options: SimOptions,
    progress: Option<Progress<'_>>,
) -> SimRun {
    run(trace, policy, options, progress, None)
}

/// [`simulate`], handing each round and scale step to `sink` as a
/// recording's [`Frame`] (the cluster's changes before it, and what it
/// decided).
pub fn simulate_recorded(
    trace: &Trace,
    policy: &dyn Hooks,
    options: SimOptions,
    progress: Option<Progress<'_>>,
    sink: &mut dyn FnMut(Frame),
) -> SimRun {
    run(trace, policy, options, progress, Some(sink))
}

/// The framework settings of a simulation: no wall-clock round budget, so
/// that a run is a function of its trace and policy alone.
pub fn sim_config() -> SchedulerConfig {
    SchedulerConfig {
        round_budget_ms: 0,
        flush: Flush::Count,
        wake: Wake::Fits,
        ..SchedulerConfig::default()
    }
}

fn run<'a>(
    trace: &'a Trace,
    policy: &'a dyn Hooks,
    options: SimOptions,
    progress: Option<Progress<'_>>,
    sink: Option<&'a mut dyn FnMut(Frame)>,
) -> SimRun {
    let mut cluster = Cluster::new();
    cluster.keep_journal(sink.is_some());
    if !trace.topology.is_empty() {
        let keys = trace.topology.iter().map(|(k, _)| k.clone()).collect();
        // Checked when the trace was validated.
        let _ = cluster.set_topology_levels(keys);
    }
    if !trace.queues.is_empty() {
        // Checked when the trace was validated.
        let _ = cluster.set_queues(trace.queues.clone());
    }
    for n in &trace.nodes {
        // Names were checked unique when the trace was validated.
        let _ = cluster.add_node(n.clone());
    }
    for class in &trace.device_classes {
        cluster.set_device_class(class.clone());
    }
    for (name, slice) in &trace.slices {
        cluster.set_resource_slice(name, slice.clone());
    }
    for (pod, node) in &trace.background {
        let _ = cluster.add_pod(pod.clone(), Some(node));
    }
    let jobs: Vec<JobState> = trace
        .jobs
        .iter()
        .map(|j| {
            // Parameter servers and any other pod that is not a worker (a
            // recorded job's launcher or master): all are placed with the
            // job and hold their GPUs while it runs.
            let ps_pods: Vec<_> = j.pods.iter().filter(|p| p.role != Role::Worker).collect();
            let worker_gpus = j
                .pods
                .iter()
                .find(|p| p.role == Role::Worker)
                .map_or(0, |p| p.request.gpus);
            JobState {
                phase: Phase::Future,
                ps: ps_pods.len() as u32,
                workers: j.job.workers,
                worker_gpus,
                ps_gpus: ps_pods.iter().map(|p| p.request.gpus).sum(),
                placement: BTreeMap::new(),
                full: false,
                needs_restart: false,
                restart_until: 0,
                remaining: j.speed.work(j.work_ms),
                rate: 0.0,
                finish_at: u64::MAX,
                rerate: false,
                partial_since: None,
                record: JobRecord {
                    name: j.name.clone().into(),
                    workload: j.workload.clone(),
                    arrival_ms: j.arrival_ms,
                    started_ms: None,
                    finished_ms: None,
                    requested_workers: j.job.workers,
                    min_workers: j.job.min_workers,
                    max_workers: j.job.max_workers,
                    final_workers: j.job.workers,
                    scale_ups: 0,
                    scale_downs: 0,
                    restarts: 0,
                    max_nodes: 0,
                    partial_ms: 0,
                },
            }
        })
        .collect();
    let by_name = trace
        .jobs
        .iter()
        .enumerate()
        .map(|(i, j)| (j.name.clone(), i))
        .collect();
    let info = policy.info();
    // Fragmentation is measured at the narrowest level some node carries.
    let fragmentation = trace
        .topology
        .iter()
        .rev()
        .map(|(key, _)| key.clone())
        .find(|key| trace.nodes.iter().any(|n| n.labels.contains_key(key)));
    let mut sim = Sim {
        trace,
        fragmentation,
        policy,
        sched: Scheduler::new(cluster, options.config()),
        sink,
        jobs,
        by_name,
        full: BTreeSet::new(),
        active: BTreeSet::new(),
        holding: BTreeSet::new(),
        permit_deadlines: BTreeSet::new(),
        retries: BTreeSet::new(),
        now: 0,
        next_arrival: 0,
        done: 0,
        started: 0,
        integrals: Integrals::default(),
        at_last_change: (0, Integrals::default()),
        queues: (!trace.queues.is_empty()).then(|| QueueMeter::new(&trace.queues)),
        run: SimRun {
            policy: info.name.clone(),
            settings: info.settings.clone(),
            trace: trace.origin.clone(),
            total_gpus: trace.total_gpus(),
            end_ms: 0,
            deadlocked: false,
            horizon_reached: false,
            jobs: Vec::new(),
            timeline: Vec::new(),
            gpu_alloc_integral: 0.0,
            largest_free_integral: None,
            gpu_busy_integral: 0.0,
            queue_integral: 0.0,
            scale_ups: 0,
            scale_downs: 0,
            admitted_below_request: 0,
            preemptions: 0,
            resizes_held: 0,
            rounds: 0,
            scale_steps: 0,
            policy_errors: 0,
            policy_error_samples: Vec::new(),
            queues: Vec::new(),
        },
        touched: BTreeSet::new(),
        changed: false,
    };
    sim.main_loop(options, progress);
    sim.finish()
}

impl Sim<'_> {
    fn has_scale(&self) -> bool {
        self.policy.info().implements(wit::Hook::Scale)
    }

    fn main_loop(&mut self, options: SimOptions, progress: Option<Progress<'_>>) {
        let total = self.jobs.len() as u64;
        let interval = self.trace.scale_interval_ms;
        let has_scale = self.has_scale();
        self.record_point();
        let mut steps: u64 = 0;
        loop {
            if self.done == total {
                self.run.end_ms = self.now;
                return;
            }
            steps += 1;
            if let Some(report) = progress
                && steps % 64 == 0
            {
                report(self.done, total, self.now);
            }
            let arrival = self.trace.jobs.get(self.next_arrival).map(|j| j.arrival_ms);
            let finish = self.full.iter().map(|&i| self.jobs[i].finish_at).min();
            let restart_end = self
                .full
                .iter()
                .map(|&i| self.jobs[i].restart_until)
                .filter(|&r| r > self.now)
                .min();
            let permit = self.permit_deadlines.iter().next().copied();
            let tick = (has_scale && !self.active.is_empty())
                .then(|| (self.now / interval + 1) * interval);

            // Stuck: nothing trains or restarts, nothing will arrive, no gang
            // waits in permit; only the policy's scale step could still act.
            // Retries alone cannot unstick: once every backed-off unit was
            // retried after the last change (backoff is capped), it is over.
            let retry = self.retries.iter().next().copied();
            let since_change = self.now.saturating_sub(self.at_last_change.0);
            let stuck = self.full.is_empty()
                && arrival.is_none()
                && permit.is_none()
                && !self.active.is_empty()
                && (retry.is_none() || since_change >= self.sched.config().max_backoff_ms);
            if stuck && (tick.is_none() || since_change >= self.trace.stall_ms) {
                self.run.deadlocked = true;
                let (t, integrals) = self.at_last_change;
                self.now = t;
                self.integrals = integrals;
                self.run.end_ms = t;
                return;
            }
            let Some(t) = [arrival, finish, restart_end, permit, retry, tick]
                .into_iter()
                .flatten()
                .min()
            else {
                // Unreachable: with jobs left, either something is scheduled or we are stuck.
                self.run.end_ms = self.now;
                return;
            };
            if t > options.horizon_ms {
                self.advance(options.horizon_ms.max(self.now));
                self.run.horizon_reached = true;
                self.run.end_ms = self.now;
                return;
            }
            self.advance(t);
            self.step(t, tick == Some(t));
        }
    }

    /// Integrate metrics and progress from `self.now` to `t` (state is
    /// constant in between).
    fn advance(&mut self, t: u64) {
        let dt = t.saturating_sub(self.now);
        if dt > 0 {
            let dtf = dt as f64;
            let (_, used) = self.sched.cluster().totals();
            let mut busy = 0u64;
            for &i in &self.full {
                let j = &mut self.jobs[i];
                if j.restart_until <= self.now {
                    busy += j.gpus();
                    j.remaining -= dtf * j.rate;
                }
            }
            let queued = self.active.len() as u64 - (self.started - self.done);
            self.integrals.alloc += f64::from(used.gpus) * dtf;
            self.integrals.busy += busy as f64 * dtf;
            self.integrals.queue += queued as f64 * dtf;
            if let Some(key) = &self.fragmentation {
                self.integrals.largest_free +=
                    f64::from(largest_free(self.sched.cluster(), key)) * dtf;
            }
        }
        self.now = t;
        // What happens at `t` happens on the cluster's clock too (jobs'
        // attained service is integrated on it).
        self.sched.set_clock(t);
    }

    fn mark_change(&mut self) {
        self.changed = true;
    }

    /// Everything that happens at instant `t`.
    fn step(&mut self, t: u64, tick: bool) {
        self.changed = false;
        self.touched.clear();

        // Completions, and jobs whose rate changes.
        let finished: Vec<usize> = self
            .full
            .iter()
            .copied()
            .filter(|&i| self.jobs[i].finish_at <= t)
            .collect();
        for i in finished {
            if self.jobs[i].rerate {
                self.touched.insert(i);
            } else {
                self.complete(i, t);
            }
        }
        // Arrivals.
        while let Some(j) = self.trace.jobs.get(self.next_arrival)
            && j.arrival_ms <= t
        {
            let i = self.next_arrival;
            self.next_arrival += 1;
            self.arrive(i);
        }
        // Permit waits that ran out: the round releases them.
        let expired: Vec<u64> = self.permit_deadlines.range(..=t).copied().collect();
        for d in expired {
            self.permit_deadlines.remove(&d);
            self.mark_change();
        }
        // Backoffs that ended: a round retries those units (a change only
        // if it places something).
        let retry_due = self.retries.range(..=t).next().is_some();
        self.retries = self.retries.split_off(&(t + 1));
        // Restarts that ended change what is busy (for the timeline only).
        let restarted = self.full.iter().any(|&i| self.jobs[i].restart_until == t);

        // The policy's scale step wakes the units waiting for a change
        // (see `Flush::Count`).
        let stepped = tick && !self.active.is_empty() && self.scale_step(t);
        let woken =
            stepped && self.sched.config().flush == Flush::Count && self.sched.has_waiting_units();
        if self.changed || retry_due || woken {
            // A preemption's victims leave at once here (no termination
            // grace), so the preemptor takes their room at the same instant
            // (each round preempts for different units; bounded all the same).
            for _ in 0..8 {
                let (changed, preempted) = self.round(t);
                if changed {
                    self.mark_change();
                }
                if !preempted {
                    break;
                }
            }
        }
        let touched: Vec<usize> = std::mem::take(&mut self.touched).into_iter().collect();
        for i in touched {
            self.update(i, t);
        }
        if self.changed || restarted {
            self.record_point();
        }
        if self.changed {
            self.at_last_change = (t, self.integrals);
        }
    }

    fn arrive(&mut self, i: usize) {
        let tj = &self.trace.jobs[i];
        let _ = self.sched.apply(ClusterOp::UpsertJob(tj.job.clone()));
        if tj.started {
            let (job, ms) = (tj.name.clone(), self.now);
            let _ = self.sched.apply(ClusterOp::MarkStarted { job, ms });
        }
        for claim in &tj.claims {
            let _ = self.sched.apply(ClusterOp::SetClaim(claim.clone()));
        }
        for pod in &tj.pods {
            // Keys are unique: job names are unique and pods are `name-role-index`.
            let node = tj.placed.get(&pod.key);
            let _ = self.sched.apply(ClusterOp::AddPod {
                pod: pod.clone(),
                node: node.cloned(),
            });
            if let Some(n) = node.and_then(|n| self.sched.cluster().node_by_name(n)) {
                self.jobs[i].placement.insert(pod.key.clone(), n);
                self.touched.insert(i);
            }
        }
        self.jobs[i].phase = Phase::Active;
        self.active.insert(i);
        self.mark_change();
    }

    fn complete(&mut self, i: usize, t: u64) {
        let name = self.trace.jobs[i].name.clone();
        let keys: Vec<PodKey> = self.jobs[i].placement.keys().cloned().collect();
        for key in keys {
            if let Ok(pod) = self.sched.remove_pod(&key) {
                for claim in pod.claims {
                    let _ = self.sched.apply(ClusterOp::RemoveClaim(claim));
                }
            }
        }
        let _ = self.sched.apply(ClusterOp::RemoveJob(name.clone()));
        let j = &mut self.jobs[i];
        j.phase = Phase::Done;
        j.remaining = 0.0;
        j.full = false;
        j.placement.clear();
        j.record.finished_ms = Some(t);
        j.record.final_workers = j.workers;
        self.full.remove(&i);
        self.active.remove(&i);
        self.holding.remove(&i);
        self.done += 1;
        self.mark_change();
    }

    fn note_error(&mut self, e: String) {
        self.run.policy_errors += 1;
        if self.run.policy_error_samples.len() < 5 {
            tracing::warn!("policy error: {e}");
            self.run.policy_error_samples.push(e);
        }
    }

    /// Each started job reports how far it is, as a workload does through
    /// its pod group's `dragon.dev/progress`: policies that estimate time
    /// left (backfilling, goodput) read it in the scale step.
    fn report_progress(&mut self) {
        let started: Vec<usize> = self
            .active
            .iter()
            .copied()
            .filter(|&i| self.jobs[i].record.started_ms.is_some())
            .collect();
        for i in started {
            let tj = &self.trace.jobs[i];
            let work = tj.speed.work(tj.work_ms);
            let done = 1.0 - self.jobs[i].remaining.max(0.0) / work.max(1e-9);
            let permille = (done * 1000.0).floor().clamp(0.0, 1000.0) as u32;
            let Some(job) = self.sched.cluster().job(&tj.name) else {
                continue;
            };
            if job.progress_permille != Some(permille) {
                let mut job = job.clone();
                job.progress_permille = Some(permille);
                let _ = self.sched.apply(ClusterOp::UpsertJob(job));
            }
        }
    }

    /// Bring job `i`'s running state in line with its placement at `t`.
    fn update(&mut self, i: usize, t: u64) {
        let tj = &self.trace.jobs[i];
        let j = &mut self.jobs[i];
        if j.phase != Phase::Active {
            return;
        }
        let full_now = j.placement.len() as u32 == j.ps + j.workers;
        if full_now {
            if j.record.started_ms.is_none() {
                j.record.started_ms = Some(t);
                self.started += 1;
            }
            if j.needs_restart {
                j.needs_restart = false;
                j.restart_until = t + tj.restart_ms;
                j.record.restarts += 1;
            }
            let mut pods: BTreeMap<usize, u32> = BTreeMap::new();
            for &n in j.placement.values() {
                *pods.entry(n).or_default() += 1;
            }
            let nodes = pods.keys().copied().collect::<BTreeSet<_>>();
            j.record.max_nodes = j.record.max_nodes.max(nodes.len() as u32);
            let crossing = crossing_penalty(&self.trace.topology, self.sched.cluster(), &nodes);
            let cluster = self.sched.cluster();
            let gpu_types: Vec<Option<&str>> =
                pods.keys().map(|&n| cluster.gpu_type(n as u32)).collect();
            let pods: Vec<u32> = pods.into_values().collect();
            let work = tj.speed.work(tj.work_ms);
            let done = work - j.remaining.max(0.0);
            let (rate, until) =
                tj.speed
                    .rate(j.workers, &pods, &gpu_types, tj.job.workers, crossing, done);
            j.rate = rate;
            // Up to the end of the work, or to where the rate changes (a
            // measured job's next epoch), when it is re-rated.
            j.rerate = until < work;
            let to_go = match j.rerate {
                true => until - done,
                false => j.remaining,
            };
            let from = j.restart_until.max(t);
            j.finish_at = from
                .saturating_add((to_go.max(0.0) / j.rate).ceil() as u64)
                .max(t + 1);
            j.full = true;
            self.full.insert(i);
        } else {
            j.full = false;
            j.finish_at = u64::MAX;
            self.full.remove(&i);
        }
        // Kept until the next point even once it holds nothing: that
        // point closes its half placement.
        self.holding.insert(i);
        j.record.final_workers = j.workers;
    }

    fn finish(mut self) -> SimRun {
        let end = self.run.end_ms;
        // Close the half placements still open at the end.
        for j in &mut self.jobs {
            if let Some(s) = j.partial_since.take() {
                j.record.partial_ms += end.saturating_sub(s);
            }
            if j.phase != Phase::Done {
                j.record.final_workers = j.workers;
            }
        }
        if let Some(last) = self.run.timeline.last().copied() {
            if last.t_ms < end {
                self.run.timeline.push(Point { t_ms: end, ..last });
            } else if last.t_ms > end {
                // A deadlock ends the run at its start; drop what came after.
                self.run.timeline.retain(|p| p.t_ms <= end);
            }
        }
        self.run.gpu_alloc_integral = self.integrals.alloc;
        self.run.gpu_busy_integral = self.integrals.busy;
        self.run.queue_integral = self.integrals.queue;
        self.run.largest_free_integral = self
            .fragmentation
            .is_some()
            .then_some(self.integrals.largest_free);
        self.run.queues = self.queue_summaries();
        self.run.jobs = self.jobs.into_iter().map(|j| j.record).collect();
        self.run
    }
}

/// The penalty of the widest of `levels` whose domains `nodes` span more
/// than one of (a node without the label counts as a domain of its own);
/// 0 when they share a domain at every level.
fn crossing_penalty(levels: &[(String, f64)], cluster: &Cluster, nodes: &BTreeSet<usize>) -> f64 {
    for (key, penalty) in levels {
        let mut domains = nodes
            .iter()
            .map(|&n| cluster.nodes()[n].labels.get(key).ok_or(n));
        if let Some(first) = domains.next()
            && domains.any(|d| d != first)
        {
            return *penalty;
        }
    }
    0.0
}

/// The free GPUs of the domain of level `key` with the most free (nodes
/// without the label are no domain).
fn largest_free(cluster: &Cluster, key: &str) -> u32 {
    let mut free: BTreeMap<&str, u32> = BTreeMap::new();
    for (i, n) in cluster.nodes().iter().enumerate() {
        if let Some(d) = n.labels.get(key)
            && cluster.is_live(i)
        {
            *free.entry(d).or_default() += cluster.free(i).gpus;
        }
    }
    free.into_values().max().unwrap_or(0)
}
