//! The scheduling loop: one task owns the snapshot, applies what the
//! watches send, runs rounds and the scale step on the serving policy, and
//! sends what they decide through [`ClusterIo`]. Policy calls run on the
//! task's thread with the runtime told so (`block_in_place`); every request
//! is awaited, never blocked on, and what a round only tells (why pods
//! wait, nominations) goes to tasks of their own.

mod ask;
mod round;
mod scale;
mod tell;
mod teller;

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use dragon_framework::record::Frame;
use dragon_framework::share::{HOUR_MS, QueueMeter};
use dragon_framework::{
    Answers, ApiError, ApiErrorKind, BreakerChange, Decision, Effect, Eviction, JobKey, PodState,
    Release, RoundReport, ScaleRequest, UnitKey, WallBudget,
};
use dragon_runtime::{Hooks, Observed, PolicySlot, WasmPolicy};
use tokio::sync::mpsc::UnboundedReceiver;

use crate::apply::{Publisher, StatusWriter, bind_all};
use crate::clock::now_ms;
use crate::cluster_io::{ClusterIo, Note, Regarding};
use crate::group_status::Status;
use crate::insight::{EstimateConfig, Question, Stories};
use crate::key::{KeyError, ScaleTarget};
use crate::metrics::{Direction, HookMetrics, Metrics, Victim};
use crate::snapshot::{DeviceKind, Event, GroupApi, Listed, Snapshot, StorageKind};
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
    /// A question about the loop's state (`kubectl dragon`).
    Ask {
        question: Question,
        reply: Reply,
    },
}

pub use ask::{Answer, Refused, Reply};

/// A watched kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    Node,
    Pod,
    Group,
    NativeGroup,
    Claim,
    Volume,
    StorageClass,
    CsiNode,
    CsiDriver,
    StorageCapacity,
    VolumeAttachment,
    Budget,
    ResourceSlice,
    DeviceClass,
    ResourceClaim,
    DeviceTaintRule,
}

impl Kind {
    /// Every kind watched.
    pub const ALL: [Kind; 16] = [
        Kind::Node,
        Kind::Pod,
        Kind::Group,
        Kind::NativeGroup,
        Kind::Claim,
        Kind::Volume,
        Kind::StorageClass,
        Kind::CsiNode,
        Kind::CsiDriver,
        Kind::StorageCapacity,
        Kind::VolumeAttachment,
        Kind::Budget,
        Kind::ResourceSlice,
        Kind::DeviceClass,
        Kind::ResourceClaim,
        Kind::DeviceTaintRule,
    ];

    /// What a list of this kind covers in the snapshot.
    fn listed(self) -> Listed {
        match self {
            Kind::Node => Listed::Nodes,
            Kind::Pod => Listed::Pods,
            Kind::Group => Listed::Groups(GroupApi::SchedulerPlugins),
            Kind::NativeGroup => Listed::Groups(GroupApi::Native),
            Kind::Budget => Listed::Budgets,
            Kind::ResourceSlice => Listed::Devices(DeviceKind::Slice),
            Kind::DeviceClass => Listed::Devices(DeviceKind::Class),
            Kind::ResourceClaim => Listed::Devices(DeviceKind::Claim),
            Kind::DeviceTaintRule => Listed::Devices(DeviceKind::TaintRule),
            Kind::Claim => Listed::Storage(StorageKind::Claim),
            Kind::Volume => Listed::Storage(StorageKind::Volume),
            Kind::StorageClass => Listed::Storage(StorageKind::Class),
            Kind::CsiNode => Listed::Storage(StorageKind::CsiNode),
            Kind::CsiDriver => Listed::Storage(StorageKind::CsiDriver),
            Kind::StorageCapacity => Listed::Storage(StorageKind::Capacity),
            Kind::VolumeAttachment => Listed::Storage(StorageKind::Attachment),
        }
    }
}

/// How many kinds are watched: scheduling starts once each is listed.
const KINDS: usize = Kind::ALL.len();

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
    /// How long a pod's volumes may take to bind before its bind fails
    /// (`volumeBindTimeoutSeconds`).
    pub volume_bind_timeout: Duration,
    pub scale_interval: Duration,
    /// Whether this replica acts from the start (no leader election).
    pub leading: bool,
    /// Kinds with nothing to list (an API the server does not serve).
    pub unlisted: BTreeSet<Kind>,
    /// What watches every round and scale step: the flight recorder and
    /// the shadow policy.
    pub taps: Taps,
    /// How waiting gangs' starts are estimated.
    pub estimates: EstimateConfig,
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
    volume_bind_timeout: Duration,
    /// Whether this replica leads (always, without leader election).
    leading: bool,
    /// When the framework next has work with no cluster change: a backoff
    /// or a permit wait that ends.
    next_retry_ms: Option<u64>,
    scale_interval: Duration,
    last_scale: Instant,
    /// Its Lease could not be confirmed at the last step: no step before
    /// this (a message still wakes it, and the step asks again).
    unconfirmed_until: Option<Instant>,
    /// A cluster change arrived since the last round.
    dirty: bool,
    /// The bound pods are to be read from the API server before the next
    /// round: at the start, on becoming leader, after the Lease could not
    /// be confirmed, and after a bind whose outcome is unknown. The watch
    /// may not have delivered binds made meanwhile (by the replica that
    /// led, or by a Binding whose answer was lost), and the snapshot would
    /// see their room as free.
    resync_due: bool,
    /// Sends what rounds tell the API server, off the loop.
    teller: teller::Teller,
    /// Scale targets by job (`namespace/podgroup`), from PodGroup
    /// annotations: the annotation as last seen and what it names.
    targets: BTreeMap<JobKey, (String, Result<ScaleTarget, KeyError>)>,
    /// The status last sent to be written on each PodGroup.
    group_status: BTreeMap<String, Status>,
    /// The spec problem last reported on each PodGroup.
    group_problem: BTreeMap<String, String>,
    listed: BTreeSet<Kind>,
    taps: Taps,
    /// What the rounds said about each unit not yet placed.
    stories: Stories,
    estimates: EstimateConfig,
    /// One estimate is simulated at a time.
    estimating: Arc<tokio::sync::Semaphore>,
    /// What each queue held and was entitled to over the last hour.
    share: Option<QueueMeter>,
}

impl<I: ClusterIo> Loop<I> {
    /// A loop over `parts`; it spawns its Event and status writers, so it is
    /// made inside the runtime.
    pub fn new(mut parts: Parts<I>) -> Loop<I> {
        if parts.taps.active() {
            parts.snapshot.sched.keep_journal(true);
        }
        Loop {
            events: Publisher::new(parts.io.clone(), parts.bind_concurrency),
            teller: teller::Teller::spawn(parts.io.clone(), parts.bind_concurrency),
            statuses: StatusWriter::spawn(parts.io.clone()),
            snapshot: parts.snapshot,
            slot: parts.slot,
            fallback: parts.fallback,
            io: parts.io,
            metrics: parts.metrics,
            bind_concurrency: parts.bind_concurrency.max(1),
            volume_bind_timeout: parts.volume_bind_timeout,
            leading: parts.leading,
            next_retry_ms: None,
            scale_interval: parts.scale_interval,
            last_scale: Instant::now(),
            unconfirmed_until: None,
            dirty: true,
            resync_due: true,
            targets: BTreeMap::new(),
            group_status: BTreeMap::new(),
            group_problem: BTreeMap::new(),
            listed: parts.unlisted,
            taps: parts.taps,
            stories: Stories::default(),
            estimates: parts.estimates,
            estimating: Arc::new(tokio::sync::Semaphore::new(1)),
            share: None,
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
            let mut timeout = retry_in.map_or(scale_in, |r| r.min(scale_in));
            // A due retry or scale step waits for the Lease to be confirmed:
            // without this, a replica that cannot reach the API server would
            // step again at once, over and over.
            if let Some(until) = self.unconfirmed_until {
                timeout = timeout.max(until.saturating_duration_since(Instant::now()));
            }
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
                        if !self.flush_tells(Duration::from_secs(5)).await {
                            tracing::warn!("stopping with pending pods' reasons unsent");
                        }
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

    /// Wait until what rounds told so far has been answered, for at most
    /// `limit`; false if time ran out.
    pub async fn flush_tells(&self, limit: Duration) -> bool {
        self.teller.flush(limit).await
    }

    /// Whether this replica schedules: every kind is listed and it leads.
    fn acting(&self) -> bool {
        self.listed.len() == KINDS && self.leading
    }

    /// Apply one message; true when it asks the loop to stop.
    pub fn handle(&mut self, msg: Msg) -> bool {
        match msg {
            Msg::Event(e) => {
                match &e {
                    Event::GroupGone(key) => {
                        self.stories.end(&UnitKey::job(key.clone()));
                        self.group_status.remove(key);
                        self.group_problem.remove(key);
                        self.teller
                            .send(vec![teller::Tell::GroupGone { group: key.clone() }]);
                    }
                    Event::PodGone(key) => {
                        self.stories.end(&UnitKey::pod(key.clone()));
                        self.teller.send(vec![teller::Tell::PodGone {
                            pod: key.clone().into(),
                        }])
                    }
                    _ => {}
                }
                self.snapshot.apply(e);
                self.dirty = true;
            }
            Msg::Leading(is) => {
                self.leading = is;
                self.resync_due |= is;
                self.dirty = true;
            }
            Msg::Shutdown => return true,
            Msg::Ask { question, reply } => self.answer(question, reply),
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
                        nodes = self.snapshot.sched.cluster().nodes().len(),
                        "cluster listed; scheduling"
                    );
                }
            }
        }
        false
    }

    /// Read every bound pod of ours from the API server into the snapshot
    /// (see `resync_due`); false if it could not be read.
    async fn resync(&mut self) -> bool {
        match self.io.bound_pods().await {
            Ok(pods) => {
                tracing::debug!(pods = pods.len(), "bound pods read before scheduling");
                for pod in pods {
                    self.handle(Msg::Event(Event::Pod(Box::new(pod))));
                }
                self.resync_due = false;
                true
            }
            Err(e) => {
                tracing::warn!(
                    "cannot read the bound pods, so nothing is scheduled until they can be: {e}"
                );
                false
            }
        }
    }

    /// Act on what the messages so far changed: once every kind is listed
    /// and while leading, a round if something changed or a retry is due,
    /// the scale step when its interval has passed, and PodGroup statuses.
    pub async fn step(&mut self) {
        self.taps.between(&mut self.snapshot.sched);
        if !self.acting() {
            return;
        }
        // A leader that stalled past its Lease plans nothing until it knows
        // the Lease is its own again (its writes are fenced too: `fence`).
        if !self.io.leads().await {
            self.unconfirmed_until = Some(Instant::now() + crate::fence::RECHECK);
            self.resync_due = true;
            return;
        }
        if self.resync_due && !self.resync().await {
            self.unconfirmed_until = Some(Instant::now() + crate::fence::RECHECK);
            return;
        }
        self.unconfirmed_until = None;
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
}

#[cfg(test)]
mod tests;
