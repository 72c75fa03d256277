//! The scheduling loop: one task owns the snapshot, applies what the
//! watches send, runs rounds and the scale step on the serving policy, and
//! sends what they decide through [`ClusterIo`]. Policy calls run on the
//! task's thread with the runtime told so (`block_in_place`); every request
//! is awaited, never blocked on.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use dragon_framework::record::Frame;
use dragon_framework::{
    Answers, ApiError, ApiErrorKind, BreakerChange, Decision, Effect, Eviction, PodState, Release,
    RoundReport, ScaleAction, ScaleRequest, UnitKey,
};
use dragon_runtime::{Hooks, Observed, PolicySlot, WasmPolicy};
use tokio::sync::mpsc::UnboundedReceiver;

use crate::apply::{Publisher, StatusWriter, bind_all};
use crate::cluster_io::{ClusterIo, Note, Regarding, Unschedulable};
use crate::group_status::Status;
use crate::metrics::{HookMetrics, Metrics};
use crate::snapshot::{Event, GroupApi, Listed, Snapshot};
use crate::taps::Taps;
use crate::translate::SCALE_TARGET;

/// What the watch tasks and the wiring send the loop.
#[derive(Debug)]
pub enum Msg {
    Event(Event),
    /// A (re)list finished: objects of `kind` not in `keys` are gone.
    Listed {
        kind: Kind,
        keys: BTreeSet<String>,
    },
    /// This replica became the leader (true) or stopped leading.
    Leading(bool),
    /// SIGTERM or Ctrl-C: finish what is under way and return.
    Shutdown,
}

/// A watched kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    Node,
    Pod,
    Group,
    NativeGroup,
    Claim,
    Volume,
    Budget,
}

impl Kind {
    /// What a list of this kind covers in the snapshot.
    fn listed(self) -> Listed {
        match self {
            Kind::Node => Listed::Nodes,
            Kind::Pod => Listed::Pods,
            Kind::Group => Listed::Groups(GroupApi::SchedulerPlugins),
            Kind::NativeGroup => Listed::Groups(GroupApi::Native),
            Kind::Budget => Listed::Budgets,
            Kind::Claim | Kind::Volume => Listed::Other,
        }
    }
}

/// How many kinds are watched: scheduling starts once each is listed.
const KINDS: usize = 7;

pub(crate) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// What the loop is built from.
pub struct Parts<I> {
    pub snapshot: Snapshot,
    pub slot: Arc<PolicySlot>,
    /// The built-in baseline, when units the policy fails on fall back to it.
    pub fallback: Option<Arc<WasmPolicy>>,
    pub io: Arc<I>,
    pub metrics: Arc<Metrics>,
    /// Binding POSTs in flight at once (`bindConcurrency`).
    pub bind_concurrency: usize,
    pub scale_interval: Duration,
    /// Whether this replica acts from the start (no leader election).
    pub leading: bool,
    /// Kinds with nothing to list (an API the server does not serve).
    pub unlisted: BTreeSet<Kind>,
    /// What watches every round and scale step: the flight recorder and
    /// the shadow policy.
    pub taps: Taps,
}

/// The scheduling loop's state.
pub struct Loop<I> {
    snapshot: Snapshot,
    slot: Arc<PolicySlot>,
    fallback: Option<Arc<WasmPolicy>>,
    io: Arc<I>,
    events: Publisher<I>,
    statuses: StatusWriter,
    metrics: Arc<Metrics>,
    bind_concurrency: usize,
    /// Whether this replica leads (always, without leader election).
    leading: bool,
    /// When the framework next has work with no cluster change: a backoff
    /// or a permit wait that ends.
    next_retry_ms: Option<u64>,
    scale_interval: Duration,
    last_scale: Instant,
    /// A cluster change arrived since the last round.
    dirty: bool,
    /// Last FailedScheduling reason per pod, so events are not repeated.
    last_reason: BTreeMap<String, String>,
    /// Scale targets by job (`namespace/podgroup`), from PodGroup annotations.
    targets: BTreeMap<String, String>,
    /// The status last sent to be written on each PodGroup.
    group_status: BTreeMap<String, Status>,
    /// The spec problem last reported on each PodGroup.
    group_problem: BTreeMap<String, String>,
    /// The `PodGroupInitiallyScheduled` condition last written on each
    /// `scheduling.k8s.io` PodGroup: (scheduled, message).
    group_condition: BTreeMap<String, (bool, String)>,
    listed: BTreeSet<Kind>,
    taps: Taps,
}

impl<I: ClusterIo> Loop<I> {
    /// A loop over `parts`; it spawns its Event and status writers, so it is
    /// made inside the runtime.
    pub fn new(mut parts: Parts<I>) -> Loop<I> {
        if parts.taps.active() {
            parts.snapshot.sched.cluster.keep_journal(true);
        }
        Loop {
            events: Publisher::new(parts.io.clone(), parts.bind_concurrency),
            statuses: StatusWriter::spawn(parts.io.clone()),
            snapshot: parts.snapshot,
            slot: parts.slot,
            fallback: parts.fallback,
            io: parts.io,
            metrics: parts.metrics,
            bind_concurrency: parts.bind_concurrency.max(1),
            leading: parts.leading,
            next_retry_ms: None,
            scale_interval: parts.scale_interval,
            last_scale: Instant::now(),
            dirty: true,
            last_reason: BTreeMap::new(),
            targets: BTreeMap::new(),
            group_status: BTreeMap::new(),
            group_problem: BTreeMap::new(),
            group_condition: BTreeMap::new(),
            listed: parts.unlisted,
            taps: parts.taps,
        }
    }

    /// Sleep until a message or a timer (a retry, the scale step), then act,
    /// until `Shutdown` or every sender is gone. A round runs on cluster
    /// changes and when a retry is due, never on a fixed period: the
    /// framework's queue decides which units a change may help.
    pub async fn run(mut self, mut rx: UnboundedReceiver<Msg>) {
        let metrics = self.metrics.clone();
        let _running = metrics.health.start();
        loop {
            metrics.health.idle();
            let scale_in = self
                .scale_interval
                .saturating_sub(self.last_scale.elapsed());
            let retry_in = self
                .next_retry_ms
                .map(|t| Duration::from_millis(t.saturating_sub(now_ms())));
            let timeout = retry_in.map_or(scale_in, |r| r.min(scale_in));
            // Until it acts (every kind listed, leading), only a message
            // can change anything: no timer, or a standby would wake on
            // every tick once the scale interval has passed.
            let first = match self.acting() {
                true => tokio::time::timeout(timeout, rx.recv()).await,
                false => Ok(rx.recv().await),
            };
            metrics.health.busy(now_ms());
            match first {
                Ok(Some(msg)) => {
                    let mut stop = self.handle(msg);
                    // Apply everything already queued before deciding.
                    while let Ok(msg) = rx.try_recv() {
                        stop |= self.handle(msg);
                    }
                    if stop {
                        let left = self.events.flush(Duration::from_secs(5)).await;
                        if left > 0 {
                            tracing::warn!(events = left, "stopping with events unsent");
                        }
                        return;
                    }
                }
                Ok(None) => return,
                Err(_) => {}
            }
            self.step().await;
        }
    }

    /// Whether this replica schedules: every kind is listed and it leads.
    fn acting(&self) -> bool {
        self.listed.len() == KINDS && self.leading
    }

    /// Apply one message; true when it asks the loop to stop.
    pub fn handle(&mut self, msg: Msg) -> bool {
        match msg {
            Msg::Event(e) => {
                if let Event::GroupGone(key) = &e {
                    self.group_status.remove(key);
                    self.group_problem.remove(key);
                    self.group_condition.remove(key);
                }
                self.snapshot.apply(e);
                self.dirty = true;
            }
            Msg::Leading(is) => {
                self.leading = is;
                self.dirty = true;
            }
            Msg::Shutdown => return true,
            Msg::Listed { kind, keys } => {
                // Drop what vanished while we were not watching.
                for e in self.snapshot.vanished(kind.listed(), &keys) {
                    self.handle(Msg::Event(e));
                }
                self.listed.insert(kind);
                self.dirty = true;
                if self.listed.len() == KINDS {
                    self.metrics
                        .ready
                        .store(true, std::sync::atomic::Ordering::Relaxed);
                    tracing::info!(
                        nodes = self.snapshot.sched.cluster.nodes().len(),
                        "cluster listed; scheduling"
                    );
                }
            }
        }
        false
    }

    /// Act on what the messages so far changed: once every kind is listed
    /// and while leading, a round if something changed or a retry is due,
    /// the scale step when its interval has passed, and PodGroup statuses.
    pub async fn step(&mut self) {
        self.taps.between(&mut self.snapshot.sched.cluster);
        if !self.acting() {
            return;
        }
        self.sync_targets().await;
        let now = now_ms();
        let due = self.next_retry_ms.is_some_and(|t| t <= now);
        let waiting = self.snapshot.sched.waiting_gangs().next().is_some();
        if (self.dirty || due) && (self.snapshot.pending() > 0 || waiting) {
            self.round().await;
            self.dirty = false;
        }
        if self.last_scale.elapsed() >= self.scale_interval {
            self.scale().await;
            self.last_scale = Instant::now();
        }
        self.report_groups().await;
        self.next_retry_ms = self.snapshot.sched.next_retry_ms(now_ms());
    }

    /// Learn scale targets from PodGroup annotations, and each target's
    /// replicas once (the workers a job wants).
    async fn sync_targets(&mut self) {
        let jobs: Vec<String> = self
            .snapshot
            .sched
            .cluster
            .jobs()
            .map(|j| j.name.clone())
            .collect();
        for job in jobs {
            let Some(target) = self
                .snapshot
                .group(&job)
                .and_then(|g| g.annotations.get(SCALE_TARGET))
                .cloned()
            else {
                continue;
            };
            if self.targets.get(&job) == Some(&target) {
                continue;
            }
            match self.io.replicas(&job, &target).await {
                Ok(r) => {
                    self.snapshot.desired.insert(job.clone(), r);
                    self.snapshot.refresh_job(&job);
                }
                Err(e) => tracing::warn!(job, target, "cannot read the job's scale: {e}"),
            }
            self.targets.insert(job, target);
        }
    }

    /// Set a job's workers through its scale target and record it (at
    /// `now`, the time of the step that asked).
    async fn apply_scale(&mut self, request: &ScaleRequest, now: u64) -> Result<(), ApiError> {
        let Some(target) = self.targets.get(&request.job).cloned() else {
            return Err(ApiError::new(
                ApiErrorKind::Refused,
                format!(
                    "job {} has no {SCALE_TARGET} annotation on its PodGroup, so it cannot be scaled",
                    request.job
                ),
            ));
        };
        self.io
            .scale(&request.job, &target, request.workers)
            .await?;
        tracing::info!(job = %request.job, workers = request.workers, reason = %request.reason, "scaled");
        self.snapshot.sched.scaled(request, now);
        self.snapshot
            .desired
            .insert(request.job.clone(), request.workers);
        self.snapshot.refresh_job(&request.job);
        Ok(())
    }

    /// One round: decided with the policy, its binds sent together, settled
    /// with their results, its effects applied, and every outcome told.
    async fn round(&mut self) {
        let policy = self.slot.current();
        let now = now_ms();
        let begun = self.taps.begin(&mut self.snapshot.sched.cluster, &policy);
        let (sched, metrics) = (&mut self.snapshot.sched, &self.metrics);
        let fallback = self.fallback.as_deref();
        // Policy calls are CPU-bound and bounded by the round's budget.
        let planned = tokio::task::block_in_place(|| {
            let timed = Observed {
                inner: policy.as_ref(),
                observer: HookMetrics(metrics),
            };
            sched.plan_round(now, &timed, fallback.map(|f| f as &dyn Hooks))
        });
        let results = bind_all(self.io.as_ref(), planned.binds(), self.bind_concurrency).await;
        for ((pod, node), result) in planned.binds().iter().zip(&results) {
            if result.is_ok() {
                self.events.spawn(Note {
                    regarding: Regarding::Pod(pod.clone()),
                    type_: "Normal",
                    reason: "Scheduled",
                    note: format!("Successfully assigned {pod} to {node}"),
                });
            }
        }
        let mut answers = Answers {
            binds: results.iter().cloned().collect(),
            ..Answers::default()
        };
        let mut report = self.snapshot.sched.settle_round(planned, results);
        self.apply_effects(&mut report, &mut answers).await;
        if let Some(begun) = begun {
            self.taps.end(
                begun,
                |ops| Frame::round(now, ops, &answers, &report.decisions),
                &policy,
            );
        }
        self.tell(&report, now).await;
        for (key, reason) in self.snapshot.invalid.clone() {
            self.explain(
                &UnitKey::pod(key),
                &format!("cannot be scheduled: {reason}"),
            )
            .await;
        }
    }

    /// Release the members of gangs whose binds failed, apply the scales
    /// of gangs admitted below their size and evict preemption victims;
    /// each answer is kept in `answers`.
    async fn apply_effects(&mut self, report: &mut RoundReport, answers: &mut Answers) {
        // Taken out while the report is written to, and put back after.
        let effects = std::mem::take(&mut report.effects);
        for effect in &effects {
            match effect {
                Effect::Release { unit, pod } => {
                    let outcome = self.io.release(pod).await;
                    match &outcome {
                        Err(e) => tracing::error!(pod, "cannot release a bound gang member: {e}"),
                        Ok(Release::Kept) => {
                            // Rare, and the only word an operator gets of a
                            // partly bound gang: sent now, never dropped
                            // with the spawned Events.
                            let note = Note {
                                regarding: Regarding::Pod(pod.clone()),
                                type_: "Warning",
                                reason: "GangPartlyBound",
                                note: "kept bound although a member of its gang could not be \
                                       bound: no controller owns this pod, so deleting it would \
                                       lose it; the rest of the gang is placed when it fits"
                                    .into(),
                            };
                            if let Err(e) = self.io.event(&note).await {
                                tracing::warn!(pod, "cannot publish event: {e}");
                            }
                        }
                        Ok(Release::Unbound) => {}
                    }
                    answers.releases.push_back(outcome.clone());
                    if self.snapshot.sched.released(pod, outcome) == Release::Kept {
                        report.kept(unit, pod.clone());
                    }
                }
                Effect::Scale(request) => {
                    let result = self.apply_scale(request, report.now_ms).await;
                    answers.scales.push_back(result.clone());
                    if result.is_err() {
                        self.snapshot.sched.scale_failed(request, report.now_ms);
                    }
                    report.decisions.push(request.outcome(result));
                }
                Effect::Evict(eviction) => {
                    let result = self.evict(eviction, report.now_ms).await;
                    answers.evictions.push_back(result);
                }
            }
        }
        report.effects = effects;
    }

    /// Evict a preemption victim's pods, all or none: each eviction is
    /// asked as a dry run first, so a PodDisruptionBudget that refuses one
    /// leaves the whole unit running. Each pod evicted gets a `Preempted`
    /// Event naming who preempted it.
    async fn evict(&mut self, eviction: &Eviction, now_ms: u64) -> Result<(), ApiError> {
        let mut checked = Ok(());
        for pod in &eviction.pods {
            checked = self.io.evict(pod, true).await;
            if checked.is_err() {
                break;
            }
        }
        let mut evicted = 0;
        if checked.is_ok() {
            for pod in &eviction.pods {
                // One refused after its dry run passed (a budget changed in
                // between): the rest still go, since what is left of the
                // gang could not run anyway.
                match self.io.evict(pod, false).await {
                    Ok(()) => {
                        evicted += 1;
                        self.events.spawn(Note {
                            regarding: Regarding::Pod(pod.clone()),
                            type_: "Normal",
                            reason: "Preempted",
                            note: eviction.message.clone(),
                        });
                    }
                    Err(e) => {
                        tracing::error!(pod, victim = %eviction.victim, "eviction refused after its dry run passed: {e}");
                    }
                }
            }
        }
        let result = match (checked, evicted) {
            (Err(e), _) => Err(e),
            (Ok(()), 0) if !eviction.pods.is_empty() => Err(ApiError::new(
                ApiErrorKind::Refused,
                "every eviction was refused",
            )),
            _ => Ok(()),
        };
        let outcome = match &result {
            Ok(()) => {
                tracing::info!(victim = %eviction.victim, preemptor = %eviction.preemptor, pods = evicted, "preempted");
                "evicted"
            }
            Err(e) => {
                tracing::warn!(victim = %eviction.victim, preemptor = %eviction.preemptor, "cannot preempt: {e}");
                "refused"
            }
        };
        Metrics::inc(&self.metrics.preemption_victims, "result", outcome);
        self.snapshot
            .sched
            .evicted(eviction, result.clone(), now_ms);
        result
    }

    /// Metrics, logs, Events and conditions for a round's decisions.
    async fn tell(&mut self, report: &RoundReport, now: u64) {
        for d in &report.decisions {
            let m = self.metrics.clone();
            match d {
                Decision::Bound { pod, .. } => {
                    self.last_reason.remove(pod);
                }
                Decision::Admitted {
                    unit,
                    pods,
                    workers,
                    nodes,
                } => {
                    Metrics::inc(&m.attempts, "result", "scheduled");
                    if let Some(job) = unit.job_name() {
                        let waited_ms = self
                            .snapshot
                            .sched
                            .cluster
                            .job(job)
                            .map(|j| now.saturating_sub(j.arrival_ms));
                        if let Some(ms) = waited_ms {
                            m.gang_wait_seconds.observe(ms as f64 / 1e3);
                        }
                        tracing::info!(
                            gang = job,
                            pods,
                            workers,
                            nodes,
                            waited_ms,
                            "gang admitted"
                        );
                        self.native_condition(job, true, &format!("{pods} pods scheduled"))
                            .await;
                    }
                }
                Decision::Waiting {
                    unit,
                    reserved,
                    wait_ms,
                } => {
                    Metrics::inc(&m.attempts, "result", "waiting");
                    self.explain(unit, &format!("gang waiting in permit: {reserved} pods reserved, waiting up to {wait_ms} ms for the rest")).await;
                }
                Decision::Unschedulable { unit, reason } => {
                    Metrics::inc(&m.attempts, "result", "unschedulable");
                    self.explain(unit, reason).await;
                }
                Decision::Rejected { unit, reason } => {
                    Metrics::inc(&m.attempts, "result", "rejected");
                    tracing::info!(%unit, reason, "gang released by permit");
                    self.explain(unit, &format!("gang rejected by permit: {reason}"))
                        .await;
                }
                Decision::TimedOut { unit, reason } => {
                    Metrics::inc(&m.attempts, "result", "rejected");
                    tracing::info!(%unit, reason, "gang timed out");
                    self.explain(unit, reason).await;
                }
                Decision::BindFailed {
                    unit,
                    pod,
                    error,
                    kept,
                } => {
                    Metrics::inc(&m.attempts, "result", "error");
                    tracing::info!(
                        %unit,
                        pod,
                        reason = %error,
                        kind = ?error.kind,
                        kept = kept.len(),
                        "gang released: a bind failed"
                    );
                    let what = if kept.is_empty() {
                        "gang released".to_string()
                    } else {
                        format!(
                            "gang released but for {} member(s) kept bound (no controller would recreate them)",
                            kept.len()
                        )
                    };
                    // A 409 says the pod is bound already (by someone
                    // else): its watch event will say where, and marking it
                    // unschedulable would contradict the API server.
                    let except = (error.kind == ApiErrorKind::Conflict).then_some(pod.as_str());
                    self.explain_but(unit, except, &format!("binding failed, {what}: {error}"))
                        .await;
                }
                Decision::PolicyError { unit, error } => {
                    Metrics::inc(&m.attempts, "result", "error");
                    match unit {
                        Some(unit) => self.explain(unit, &format!("policy error: {error}")).await,
                        None => tracing::warn!("policy error in the queue order: {error}"),
                    }
                }
                Decision::FellBack { unit, policy } => {
                    Metrics::inc(&m.attempts, "result", "fallback");
                    tracing::warn!(%unit, fallback = %policy, "the policy failed; the unit was tried with the fallback");
                }
                Decision::Resized {
                    unit,
                    workers,
                    reason,
                } => {
                    tracing::info!(%unit, workers, reason, "gang resized");
                }
                Decision::Preempting {
                    unit,
                    evicted,
                    shrunk,
                } => {
                    for _ in shrunk {
                        Metrics::inc(&m.preemption_victims, "result", "shrunk");
                    }
                    tracing::info!(
                        %unit,
                        evicted = ?evicted,
                        shrunk = ?shrunk,
                        "preempting lower-priority work to make room"
                    );
                }
                Decision::Breaker(change) => self.breaker_changed(change, now),
                Decision::Deferred { units, budget_ms } => {
                    m.rounds_over_budget.inc();
                    tracing::warn!(
                        units,
                        budget_ms,
                        "round budget spent; untried units wait for the next round"
                    );
                }
            }
        }
    }

    /// Write the status of each PodGroup whose pods or spec changed (those
    /// whose pods are all another scheduler's excepted), and a Warning
    /// Event on a PodGroup whose spec cannot be used, once per problem.
    async fn report_groups(&mut self) {
        let now = k8s_openapi::jiff::Timestamp::now()
            .strftime("%Y-%m-%dT%H:%M:%SZ")
            .to_string();
        for group in self.snapshot.statuses.take_dirty() {
            let Some(pg) = self.snapshot.group(&group) else {
                continue;
            };
            if pg.api != GroupApi::SchedulerPlugins || !self.snapshot.statuses.is_ours(&group) {
                continue;
            }
            let min_member = match &pg.spec {
                Ok(spec) => spec.min_member,
                Err(problem) => {
                    let problem = problem.clone();
                    if self.group_problem.get(&group) != Some(&problem) {
                        let note = Note {
                            regarding: Regarding::PodGroup(group.clone()),
                            type_: "Warning",
                            reason: "InvalidSpec",
                            note: problem.clone(),
                        };
                        match self.io.event(&note).await {
                            Ok(()) => {
                                self.group_problem.insert(group.clone(), problem);
                            }
                            Err(e) => tracing::warn!(group, "cannot publish event: {e}"),
                        }
                    }
                    0
                }
            };
            let status = self.snapshot.statuses.status(&group, min_member, &now);
            if self.group_status.get(&group) == Some(&status) {
                continue;
            }
            tracing::debug!(group, phase = ?status.phase, "PodGroup status");
            self.statuses.write(&group, status.clone());
            self.group_status.insert(group, status);
        }
    }

    /// The `PodGroupInitiallyScheduled` condition on the `scheduling.k8s.io`
    /// PodGroup of `job`, as kube-scheduler writes it: True (reason
    /// `Scheduled`) once the gang is admitted, and then never False again;
    /// False (reason `Unschedulable`) with why, while it waits. Written when
    /// it changes; not for a scheduler-plugins PodGroup.
    async fn native_condition(&mut self, job: &str, scheduled: bool, message: &str) {
        if self
            .snapshot
            .group(job)
            .is_none_or(|g| g.api != GroupApi::Native)
        {
            return;
        }
        match self.group_condition.get(job) {
            Some((true, _)) => return,
            Some((s, m)) if *s == scheduled && m == message => return,
            _ => {}
        }
        match self.io.group_condition(job, scheduled, message).await {
            Ok(()) => {
                self.group_condition
                    .insert(job.to_string(), (scheduled, message.to_string()));
            }
            Err(e) => tracing::debug!(group = job, "cannot set the PodGroup's condition: {e}"),
        }
    }

    /// A FailedScheduling event and `PodScheduled=False` on each pending pod
    /// of `unit`, once per reason.
    async fn explain(&mut self, unit: &UnitKey, reason: &str) {
        self.explain_but(unit, None, reason).await;
    }

    /// [`Loop::explain`], leaving out `except`.
    async fn explain_but(&mut self, unit: &UnitKey, except: Option<&str>, reason: &str) {
        let mut pods: Vec<String> = match unit {
            UnitKey::Job(job) => {
                self.native_condition(job, false, reason).await;
                self.snapshot
                    .sched
                    .cluster
                    .job_pods(job)
                    .filter(|(_, s)| !matches!(s, PodState::Bound(_)))
                    .map(|(p, _)| p.key.clone())
                    .collect()
            }
            UnitKey::Pod(pod) => vec![pod.clone()],
        };
        pods.retain(|p| Some(p.as_str()) != except);
        for pod in pods {
            // Remembered only once published: an Event or condition lost
            // while the API server is away is sent again on the next round.
            if self.last_reason.get(&pod).map(String::as_str) == Some(reason) {
                continue;
            }
            let gated = self
                .snapshot
                .sched
                .cluster
                .pod(&pod)
                .is_some_and(|(p, _)| !p.scheduling_gates.is_empty());
            let note = Note {
                regarding: Regarding::Pod(pod.clone()),
                type_: "Warning",
                reason: "FailedScheduling",
                note: reason.to_string(),
            };
            let published = match self.io.event(&note).await {
                Ok(()) => true,
                Err(e) => {
                    tracing::warn!(pod, "cannot publish event: {e}");
                    false
                }
            };
            let condition = Unschedulable {
                reason: if gated {
                    "SchedulingGated"
                } else {
                    "Unschedulable"
                },
                message: reason.to_string(),
            };
            let set = match self.io.pod_unschedulable(&pod, &condition).await {
                Ok(()) => true,
                Err(e) => {
                    tracing::debug!(pod, "cannot set PodScheduled=False: {e}");
                    false
                }
            };
            if set && published {
                self.last_reason.insert(pod, reason.to_string());
            }
        }
    }

    /// The scale step: decided with the policy, each change applied.
    async fn scale(&mut self) {
        let policy = self.slot.current();
        let now = now_ms();
        let begun = self.taps.begin(&mut self.snapshot.sched.cluster, &policy);
        let (sched, metrics) = (&mut self.snapshot.sched, &self.metrics);
        let report = tokio::task::block_in_place(|| {
            let timed = Observed {
                inner: policy.as_ref(),
                observer: HookMetrics(metrics),
            };
            sched.plan_scale(now, &timed)
        });
        let mut answers = Answers::default();
        let mut actions = Vec::new();
        for request in &report.requests {
            let result = self.apply_scale(request, now).await;
            answers.scales.push_back(result.clone());
            if let Err(e) = result {
                tracing::warn!(
                    "scale step: scaling job {} to {} workers failed: {e}",
                    request.job,
                    request.workers
                );
                continue;
            }
            actions.push(ScaleAction::from(request.clone()));
            Metrics::inc(
                &self.metrics.scale_actions,
                "direction",
                if request.workers > request.from {
                    "up"
                } else {
                    "down"
                },
            );
            tracing::info!(job = %request.job, from = request.from, to = request.workers, reason = %request.reason, "scale");
        }
        if let Some(begun) = begun {
            self.taps.end(
                begun,
                |ops| Frame::scale(now, ops, &answers, &actions),
                &policy,
            );
        }
        for e in &report.errors {
            tracing::warn!("scale step: {e}");
        }
        if let Some(change) = &report.breaker {
            self.breaker_changed(change, now_ms());
        }
    }

    /// Metrics and a log line for a suspension of the policy or its end.
    fn breaker_changed(&self, change: &BreakerChange, now: u64) {
        let m = &self.metrics;
        match change {
            BreakerChange::Opened {
                policy,
                failures,
                until_ms,
            } => {
                m.policy_suspensions.inc();
                m.policy_suspended.set(1);
                let suspended_ms = until_ms.saturating_sub(now);
                tracing::warn!(
                    policy,
                    failures,
                    suspended_ms,
                    "policy suspended after consecutive failures; its units fail fast until a probe call succeeds"
                );
            }
            BreakerChange::Closed { policy } => {
                m.policy_suspended.set(0);
                tracing::info!(policy, "policy probe succeeded; the policy serves again");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster_io::fake::{Call, FakeCluster};
    use crate::fixtures::{group, node, pod};
    use dragon_framework::{ApiError, ApiErrorKind, SchedulerConfig};
    use dragon_runtime::{ComponentCache, LoadOptions, PolicyEngine};

    const US: &str = "dragon-scheduler";

    /// A leading loop over `fake` with the bundled baseline, every kind
    /// listed (empty) and no backoff.
    fn listed_loop(fake: &Arc<FakeCluster>) -> Loop<FakeCluster> {
        listed_loop_with(fake, "baseline", dragon_bundled::BASELINE)
    }

    /// [`listed_loop`] with another bundled policy.
    fn listed_loop_with(fake: &Arc<FakeCluster>, name: &str, bytes: &[u8]) -> Loop<FakeCluster> {
        let engine = PolicyEngine::new().unwrap();
        let cache = ComponentCache::disabled();
        let policy =
            WasmPolicy::from_bytes(&engine, &cache, name, bytes, &LoadOptions::default()).unwrap();
        let mut l = Loop::new(Parts {
            snapshot: Snapshot::new(US, SchedulerConfig::without_backoff()),
            slot: Arc::new(PolicySlot::new(engine, cache, policy)),
            fallback: None,
            io: fake.clone(),
            metrics: Arc::new(Metrics::new()),
            bind_concurrency: 4,
            scale_interval: Duration::from_secs(3600),
            leading: true,
            unlisted: BTreeSet::new(),
            taps: Taps::default(),
        });
        for kind in [
            Kind::Node,
            Kind::Pod,
            Kind::Group,
            Kind::NativeGroup,
            Kind::Claim,
            Kind::Volume,
            Kind::Budget,
        ] {
            l.handle(Msg::Listed {
                kind,
                keys: BTreeSet::new(),
            });
        }
        l
    }

    /// `events` applied, then one step.
    async fn step_with(l: &mut Loop<FakeCluster>, events: Vec<Event>) {
        for e in events {
            l.handle(Msg::Event(e));
        }
        l.step().await;
    }

    /// A gang of `size` one-GPU workers of PodGroup `g` (minMember `size`).
    fn gang(g: &str, size: u32) -> Vec<Event> {
        let mut events = vec![group(g, size)];
        for i in 0..size {
            events.push(pod(&format!("{g}-{i}"), Some(g), "worker", i, None, US));
        }
        events
    }

    fn binds(calls: &[Call]) -> Vec<String> {
        calls
            .iter()
            .filter_map(|c| match c {
                Call::Bind { pod, .. } => Some(pod.clone()),
                _ => None,
            })
            .collect()
    }

    fn events_with(calls: &[Call], reason: &str) -> Vec<(String, String)> {
        calls
            .iter()
            .filter_map(|c| match c {
                Call::Event(n) if n.reason == reason => match &n.regarding {
                    Regarding::Pod(p) | Regarding::PodGroup(p) => Some((p.clone(), n.note.clone())),
                },
                _ => None,
            })
            .collect()
    }

    /// Wait (bounded) for the spawned Event tasks to have sent `n` events
    /// with `reason`.
    async fn until_events(fake: &FakeCluster, reason: &str, n: usize) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while events_with(&fake.calls(), reason).len() < n {
            assert!(
                Instant::now() < deadline,
                "{n} {reason} events: {:?}",
                fake.calls()
            );
            tokio::task::yield_now().await;
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn nothing_is_sent_before_every_kind_is_listed_or_while_not_leading() {
        let fake = Arc::new(FakeCluster::default());
        let mut l = listed_loop(&fake);
        l.listed.remove(&Kind::Volume);
        step_with(&mut l, [vec![node("a", 8)], gang("g", 2)].concat()).await;
        assert_eq!(fake.calls(), vec![], "not listed yet");
        l.handle(Msg::Listed {
            kind: Kind::Volume,
            keys: BTreeSet::new(),
        });
        l.handle(Msg::Leading(false));
        l.step().await;
        assert_eq!(fake.calls(), vec![], "a follower");
        l.handle(Msg::Leading(true));
        l.step().await;
        assert_eq!(binds(&fake.calls()), ["ml/g-0", "ml/g-1"]);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_gang_is_bound_together_and_each_pod_gets_its_scheduled_event() {
        let fake = Arc::new(FakeCluster::default());
        let mut l = listed_loop(&fake);
        step_with(
            &mut l,
            [vec![node("a", 2), node("b", 2)], gang("g", 3)].concat(),
        )
        .await;
        assert_eq!(binds(&fake.calls()), ["ml/g-0", "ml/g-1", "ml/g-2"]);
        until_events(&fake, "Scheduled", 3).await;
        let notes = events_with(&fake.calls(), "Scheduled");
        assert!(
            notes
                .iter()
                .any(|(p, n)| p == "ml/g-0" && n.starts_with("Successfully assigned ml/g-0 to ")),
            "{notes:?}"
        );
        assert!(
            events_with(&fake.calls(), "FailedScheduling").is_empty(),
            "{:?}",
            fake.calls()
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_refused_bind_releases_the_bound_members_and_tells_each_waiting_pod_why() {
        let fake = Arc::new(FakeCluster::default());
        {
            let mut s = fake.lock();
            s.refuse_bind.insert(
                "ml/g-1".into(),
                ApiError::new(
                    ApiErrorKind::Conflict,
                    "binding ml/g-1 to a: pod g-1 is already assigned to node \"x\" (Conflict, 409)",
                ),
            );
            // No controller would recreate it: kept bound.
            s.uncontrolled.insert("ml/g-2".into());
        }
        let mut l = listed_loop(&fake);
        step_with(&mut l, [vec![node("a", 4)], gang("g", 3)].concat()).await;
        let calls = fake.calls();
        assert_eq!(binds(&calls), ["ml/g-0", "ml/g-1", "ml/g-2"]);
        let released: Vec<&Call> = calls
            .iter()
            .filter(|c| matches!(c, Call::Release(_)))
            .collect();
        assert_eq!(
            released,
            [
                &Call::Release("ml/g-0".into()),
                &Call::Release("ml/g-2".into())
            ]
        );
        // The snapshot agrees: the deleted member waits again, the kept one
        // stays bound.
        let state = |p: &str| l.snapshot.sched.cluster.pod(p).map(|(_, s)| s);
        assert_eq!(state("ml/g-0"), Some(PodState::Pending));
        assert!(matches!(state("ml/g-2"), Some(PodState::Bound(_))));
        // Each pod left waiting is told why, by an Event and a condition;
        // not the one the API server says is bound already (409).
        let failed = events_with(&calls, "FailedScheduling");
        let told: BTreeSet<&str> = failed.iter().map(|(p, _)| p.as_str()).collect();
        assert_eq!(told, BTreeSet::from(["ml/g-0"]));
        assert!(
            failed[0].1.starts_with(
                "binding failed, gang released but for 1 member(s) kept bound (no controller would recreate them): binding ml/g-1 to a: pod g-1 is already assigned"
            ),
            "{failed:?}"
        );
        assert!(calls.contains(&Call::Unschedulable {
            pod: "ml/g-0".into(),
            reason: "Unschedulable".into(),
            message: failed[0].1.clone(),
        }));
        assert!(
            !calls
                .iter()
                .any(|c| matches!(c, Call::Unschedulable { pod, .. } if pod == "ml/g-1")),
            "{calls:?}"
        );
        assert_eq!(events_with(&calls, "GangPartlyBound")[0].0, "ml/g-2");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_flight_recording_replays_to_the_same_decisions_with_the_servers_answers() {
        use crate::flight::{FlightRecorder, RecordingConfig, Run};
        use dragon_framework::record;

        let dir = std::env::temp_dir().join(format!("dragon-loop-rec-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let fake = Arc::new(FakeCluster::default());
        {
            let mut s = fake.lock();
            s.refuse_bind.insert(
                "ml/g-1".into(),
                ApiError::new(ApiErrorKind::Conflict, "pod g-1 is already assigned"),
            );
            s.uncontrolled.insert("ml/g-2".into());
        }
        let mut l = listed_loop(&fake);
        let config = RecordingConfig {
            dir: dir.clone(),
            ..RecordingConfig::default()
        };
        let run = Run {
            scheduling: SchedulerConfig::without_backoff(),
            policy: "baseline".into(),
            fallback: String::new(),
            started_ms: 1,
        };
        let recorder = FlightRecorder::open(config, run).unwrap();
        let file = recorder.current();
        l.taps.recorder = Some(recorder);
        l.snapshot.sched.cluster.keep_journal(true);
        // A refused bind (the gang released, one member kept), then a node
        // and a second gang, then the first gang's refusal lifted.
        step_with(&mut l, [vec![node("a", 4)], gang("g", 3)].concat()).await;
        step_with(&mut l, [vec![node("b", 4)], gang("h", 2)].concat()).await;
        fake.lock().refuse_bind.clear();
        l.dirty = true;
        l.step().await;
        assert!(binds(&fake.calls()).len() >= 6, "{:?}", fake.calls());

        let rec = record::read(&file.get().unwrap()).unwrap();
        assert_eq!(rec.frames.len(), 3);
        let policy = l.slot.current();
        let same = record::replay(
            &rec,
            policy.as_ref(),
            None,
            SchedulerConfig::without_backoff(),
        );
        assert_eq!(same.differences, vec![]);
        assert_eq!(same.refused_ops, 0);
        // Without the server's answers (every call succeeding) the first
        // round decides otherwise: the answers are what make it exact.
        let mut blind = rec.clone();
        for f in &mut blind.frames {
            let (Frame::Round { answers, .. } | Frame::Scale { answers, .. }) = f;
            answers.clear();
        }
        let differ = record::replay(
            &blind,
            policy.as_ref(),
            None,
            SchedulerConfig::without_backoff(),
        );
        assert!(!differ.differences.is_empty());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_shadow_policy_is_compared_on_every_step_and_never_acts() {
        use crate::shadow::ShadowFeed;

        let fake = Arc::new(FakeCluster::default());
        // DRAGON serves (it packs lone pods); the baseline shadows it (it
        // spreads them).
        let mut l = listed_loop_with(&fake, "dragon", dragon_bundled::DRAGON);
        let engine = PolicyEngine::new().unwrap();
        let cache = ComponentCache::disabled();
        let baseline = WasmPolicy::from_bytes(
            &engine,
            &cache,
            "baseline",
            dragon_bundled::BASELINE,
            &LoadOptions::default(),
        )
        .unwrap();
        let slot = Arc::new(PolicySlot::new(engine, cache, baseline));
        let feed = ShadowFeed::spawn(
            slot,
            SchedulerConfig::without_backoff(),
            None,
            l.metrics.clone(),
        )
        .unwrap();
        l.taps.shadow = Some(feed);
        l.snapshot.sched.cluster.keep_journal(true);
        let pods: Vec<Event> = (0..4)
            .map(|i| pod(&format!("p-{i}"), None, "", 0, None, US))
            .collect();
        step_with(&mut l, [vec![node("a", 8), node("b", 8)], pods].concat()).await;
        let calls = fake.calls();
        let bound: BTreeSet<String> = calls
            .iter()
            .filter_map(|c| match c {
                Call::Bind { node, .. } => Some(node.clone()),
                _ => None,
            })
            .collect();
        assert_eq!(binds(&calls).len(), 4, "{calls:?}");
        assert_eq!(
            bound.len(),
            1,
            "DRAGON packs, the shadow binds nothing: {calls:?}"
        );
        let deadline = Instant::now() + Duration::from_secs(30);
        let view = loop {
            let v = l.metrics.shadow.lock().unwrap().clone();
            if v.same + v.different >= 4 {
                break v;
            }
            assert!(Instant::now() < deadline, "{v:?}");
            tokio::time::sleep(Duration::from_millis(10)).await;
        };
        assert_eq!(view.policy, "baseline");
        assert!(view.different >= 1, "{view:?}");
        let d = &view.disagreements[0];
        assert!(d.subject.starts_with("pod/ml/p-"), "{d:?}");
        assert!(
            d.live.starts_with("bound to ") && d.shadow.starts_with("bound to "),
            "{d:?}"
        );
        assert_eq!(view.diverged, 0);
        let text = l.metrics.render();
        assert!(
            text.contains("dragon_shadow_decisions_total{outcome=\"different\"}"),
            "{text}"
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_waiting_gang_is_told_once_per_reason_on_every_member() {
        let fake = Arc::new(FakeCluster::default());
        let mut l = listed_loop(&fake);
        step_with(&mut l, [vec![node("a", 2)], gang("g", 3)].concat()).await;
        let calls = fake.calls();
        assert!(binds(&calls).is_empty());
        let conditions: Vec<&Call> = calls
            .iter()
            .filter(|c| matches!(c, Call::Unschedulable { .. }))
            .collect();
        assert_eq!(conditions.len(), 3, "{calls:?}");
        assert_eq!(events_with(&calls, "FailedScheduling").len(), 3);
        // Tried again after a change that does not help (another
        // scheduler's pod): nothing new to say.
        fake.clear();
        step_with(
            &mut l,
            vec![pod("theirs", None, "worker", 0, None, "default-scheduler")],
        )
        .await;
        assert_eq!(
            fake.calls()
                .iter()
                .filter(|c| !matches!(c, Call::GroupStatus(_)))
                .count(),
            0,
            "{:?}",
            fake.calls()
        );
        // Room appears: the gang is bound.
        step_with(&mut l, vec![node("b", 2)]).await;
        assert_eq!(binds(&fake.calls()).len(), 3);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_gang_admitted_at_its_minimum_shrinks_its_workload_through_scale() {
        let fake = Arc::new(FakeCluster::default());
        let target = "apps/v1/statefulsets/g";
        fake.lock().replicas.insert(target.into(), 4);
        let mut l = listed_loop_with(&fake, "dragon", dragon_bundled::DRAGON);
        let Event::Group(mut g) = group("g", 2) else {
            unreachable!("a PodGroup event")
        };
        g.annotations = BTreeMap::from([
            (SCALE_TARGET.to_string(), target.to_string()),
            (crate::translate::MIN_WORKERS.to_string(), "2".to_string()),
        ]);
        let mut events = vec![node("a", 2), Event::Group(g)];
        events.extend((0..4).map(|i| pod(&format!("g-{i}"), Some("g"), "worker", i, None, US)));
        step_with(&mut l, events).await;
        let calls = fake.calls();
        // The job's size is read from its target, two workers fit of four,
        // and the target is scaled to the two admitted.
        assert!(calls.contains(&Call::Replicas(target.into())), "{calls:?}");
        assert_eq!(binds(&calls), ["ml/g-0", "ml/g-1"]);
        assert!(
            calls.contains(&Call::Scale {
                job: "ml/g".into(),
                replicas: 2
            }),
            "{calls:?}"
        );
        // The snapshot follows: two workers wanted, the surplus gone.
        assert_eq!(l.snapshot.desired.get("ml/g"), Some(&2));
        assert_eq!(
            l.snapshot.sched.cluster.job("ml/g").map(|j| j.workers),
            Some(2)
        );
        assert!(l.snapshot.sched.cluster.pod("ml/g-3").is_none());
    }

    /// `event` (a pod) at `priority`.
    fn prioritized(event: Event, priority: i32) -> Event {
        match event {
            Event::Pod(mut p) => {
                if let Some(spec) = p.spec.as_mut() {
                    spec.priority = Some(priority);
                }
                Event::Pod(p)
            }
            other => other,
        }
    }

    /// One 4-GPU node full with gang `low` (priority 0, bound), and gang
    /// `high` (priority 100) of `high` pods pending.
    fn crowded(high: u32) -> Vec<Event> {
        let mut events = vec![node("a", 4), group("low", 4), group("high", high)];
        for i in 0..4 {
            events.push(pod(
                &format!("low-{i}"),
                Some("low"),
                "worker",
                i,
                Some("a"),
                US,
            ));
        }
        for i in 0..high {
            let p = pod(&format!("high-{i}"), Some("high"), "worker", i, None, US);
            events.push(prioritized(p, 100));
        }
        events
    }

    fn evictions(calls: &[Call], dry_run: bool) -> Vec<String> {
        calls
            .iter()
            .filter_map(|c| match c {
                Call::Evict { pod, dry_run: d } if *d == dry_run => Some(pod.clone()),
                _ => None,
            })
            .collect()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_victim_gang_is_evicted_whole_after_a_dry_run_of_every_eviction() {
        let fake = Arc::new(FakeCluster::default());
        let mut l = listed_loop_with(&fake, "dragon", dragon_bundled::DRAGON);
        step_with(&mut l, crowded(2)).await;
        let calls = fake.calls();
        let low: Vec<String> = (0..4).map(|i| format!("ml/low-{i}")).collect();
        assert_eq!(evictions(&calls, true), low, "{calls:?}");
        assert_eq!(evictions(&calls, false), low, "{calls:?}");
        let last_dry = calls
            .iter()
            .rposition(|c| matches!(c, Call::Evict { dry_run: true, .. }));
        let first_real = calls
            .iter()
            .position(|c| matches!(c, Call::Evict { dry_run: false, .. }));
        assert!(last_dry < first_real, "every dry run first: {calls:?}");
        assert_eq!(binds(&calls), Vec::<String>::new(), "not before they leave");
        until_events(&fake, "Preempted", 4).await;
        for (pod, note) in events_with(&fake.calls(), "Preempted") {
            assert!(pod.starts_with("ml/low-"), "{pod}");
            assert!(note.contains("preempted by job/ml/high"), "{note}");
        }

        // The victims leave; the preemptor takes their room.
        fake.clear();
        let gone = low.iter().map(|k| Event::PodGone(k.clone())).collect();
        step_with(&mut l, gone).await;
        assert_eq!(binds(&fake.calls()), vec!["ml/high-0", "ml/high-1"]);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_budget_refusing_one_eviction_leaves_the_whole_victim_running() {
        let fake = Arc::new(FakeCluster::default());
        fake.lock().protected.insert("ml/low-2".into());
        let mut l = listed_loop_with(&fake, "dragon", dragon_bundled::DRAGON);
        step_with(&mut l, crowded(2)).await;
        let calls = fake.calls();
        assert_eq!(
            evictions(&calls, true),
            vec!["ml/low-0", "ml/low-1", "ml/low-2"],
            "the dry runs stop at the refusal: {calls:?}"
        );
        assert_eq!(evictions(&calls, false), Vec::<String>::new());
        assert_eq!(
            l.metrics
                .preemption_victims
                .get_or_create(&vec![("result".into(), "refused".into())])
                .get(),
            1
        );
    }
}
