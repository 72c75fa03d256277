//! Wiring: watches feed the snapshot; one scheduling thread runs rounds and
//! the scale step on the serving policy; HTTP serves metrics and health;
//! a Lease decides which replica acts.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::mpsc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result};
use dragon_framework::{BreakerChange, Decision};
use dragon_runtime::{
    ComponentCache, Hooks, LoadOptions, PolicyEngine, PolicySlot, PolicySource, WasmPolicy,
};
use futures::StreamExt;
use k8s_openapi::api::core::v1 as core;
use kube::api::{Api, DynamicObject};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};

use crate::config::{Config, OnPolicyError};
use crate::group_status::Status;
use crate::kube_io::{KubeIo, KubeScaler, podgroup_resource};
use crate::leader::Election;
use crate::metrics::{Metrics, Timed};
use crate::snapshot::{Event, GroupApi, Listed, PodGroup, Snapshot};
use crate::translate::SCALE_TARGET;
use k8s_openapi::api::scheduling::v1beta1::PodGroup as NativePodGroup;

/// What the watch tasks send the scheduling thread.
enum Msg {
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

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    Node,
    Pod,
    Group,
    NativeGroup,
    Claim,
    Volume,
}

impl Kind {
    /// What a list of this kind covers in the snapshot.
    fn listed(self) -> Listed {
        match self {
            Kind::Node => Listed::Nodes,
            Kind::Pod => Listed::Pods,
            Kind::Group => Listed::Groups(GroupApi::SchedulerPlugins),
            Kind::NativeGroup => Listed::Groups(GroupApi::Native),
            Kind::Claim | Kind::Volume => Listed::Other,
        }
    }
}

/// How many kinds are watched: scheduling starts once each is listed.
const KINDS: usize = 6;

pub(crate) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// Build a client from `--kubeconfig`, else the usual inference
/// (`$KUBECONFIG`, `~/.kube/config`, in-cluster).
///
/// # Errors
/// No usable configuration.
pub async fn client(kubeconfig: Option<PathBuf>) -> Result<Client> {
    let config = match kubeconfig {
        Some(path) => {
            let kc = kube::config::Kubeconfig::read_from(&path)
                .with_context(|| format!("cannot read kubeconfig {}", path.display()))?;
            kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
                .await
                .with_context(|| format!("invalid kubeconfig {}", path.display()))?
        }
        None => kube::Config::infer()
            .await
            .context("no Kubernetes configuration found")?,
    };
    client_from(config)
}

/// A client that retries requests the API server refuses for load as
/// [`crate::retry::RetryAfter`] says, instead of kube's default policy.
pub fn client_from(mut config: kube::Config) -> Result<Client> {
    config.default_retry = false;
    Ok(kube::client::ClientBuilder::try_from(config)
        .context("cannot build a Kubernetes client")?
        .with_layer(&tower::buffer::BufferLayer::new(1024))
        .with_layer(&tower::retry::RetryLayer::new(
            crate::retry::RetryAfter::default(),
        ))
        .build())
}

/// Forward one resource's watch into `tx`, translating objects with `to_event`.
fn spawn_watch<K>(
    api: Api<K>,
    config: watcher::Config,
    kind: Kind,
    tx: mpsc::Sender<Msg>,
    to_event: fn(K) -> Event,
    key_of: fn(&K) -> String,
) where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + 'static,
{
    tokio::spawn(async move {
        // client-go's reflector backoff (800 ms doubling to 30 s, with
        // jitter, reset after 2 min of health): a restarted API server is
        // not met by every watch of every replica at once.
        let mut stream = watcher(api, config).default_backoff().boxed();
        let mut listing: Option<BTreeSet<String>> = None;
        while let Some(item) = stream.next().await {
            let msg = match item {
                Ok(watcher::Event::Init) => {
                    listing = Some(BTreeSet::new());
                    continue;
                }
                Ok(watcher::Event::InitApply(obj)) => {
                    if let Some(l) = listing.as_mut() {
                        l.insert(key_of(&obj));
                    }
                    Msg::Event(to_event(obj))
                }
                Ok(watcher::Event::InitDone) => Msg::Listed {
                    kind,
                    keys: listing.take().unwrap_or_default(),
                },
                Ok(watcher::Event::Apply(obj)) => Msg::Event(to_event(obj)),
                Ok(watcher::Event::Delete(obj)) => Msg::Event(match kind {
                    Kind::Node => Event::NodeGone(key_of(&obj)),
                    Kind::Pod => Event::PodGone(key_of(&obj)),
                    Kind::Group | Kind::NativeGroup => Event::GroupGone(key_of(&obj)),
                    Kind::Claim => Event::ClaimGone(key_of(&obj)),
                    Kind::Volume => Event::VolumeGone(key_of(&obj)),
                }),
                Err(e) => {
                    tracing::warn!(?kind, "watch error (retrying after a backoff): {e}");
                    continue;
                }
            };
            if tx.send(msg).is_err() {
                return;
            }
        }
    });
}

fn podgroup(obj: DynamicObject) -> Event {
    let key = format!(
        "{}/{}",
        obj.namespace().unwrap_or_else(|| "default".into()),
        obj.name_any()
    );
    let spec = crate::translate::podgroup_spec(&key, obj.data.get("spec")).map_err(|e| e.message);
    let created_ms = crate::translate::created_ms(&obj.metadata);
    Event::Group(PodGroup {
        key,
        spec,
        annotations: obj.metadata.annotations.clone().unwrap_or_default(),
        created_ms,
        api: GroupApi::SchedulerPlugins,
        priority: None,
    })
}

fn native_podgroup(pg: NativePodGroup) -> Event {
    let (spec, priority) = crate::translate::native_podgroup_spec(&pg);
    Event::Group(PodGroup {
        key: namespaced_key(&pg),
        spec: Ok(spec),
        annotations: pg.metadata.annotations.clone().unwrap_or_default(),
        created_ms: crate::translate::created_ms(&pg.metadata),
        api: GroupApi::Native,
        priority,
    })
}

/// Whether to watch `scheduling.k8s.io/v1beta1` PodGroups: the API server
/// serves them (feature gate `GenericWorkload` and that API version
/// enabled) and this scheduler may list them (an older ClusterRole may not
/// allow it: then it schedules without them rather than wait forever for a
/// list that is refused).
async fn serves_native_podgroups(client: &Client) -> bool {
    let served = match client
        .list_api_group_resources("scheduling.k8s.io/v1beta1")
        .await
    {
        Ok(list) => list.resources.iter().any(|r| r.name == "podgroups"),
        Err(_) => false,
    };
    if !served {
        return false;
    }
    let api = Api::<NativePodGroup>::all(client.clone());
    match api.list(&kube::api::ListParams::default().limit(1)).await {
        Err(kube::Error::Api(e)) if e.code == 403 => {
            tracing::warn!(
                "not allowed to list scheduling.k8s.io PodGroups ({}); gangs come from scheduler-plugins PodGroups only until the ClusterRole allows it",
                e.message
            );
            false
        }
        // Served and listable, or a passing error the watch will retry.
        _ => true,
    }
}

fn namespaced_key<K: kube::Resource>(obj: &K) -> String {
    format!(
        "{}/{}",
        obj.meta().namespace.as_deref().unwrap_or("default"),
        obj.meta().name.as_deref().unwrap_or("")
    )
}

/// Run the scheduler until SIGINT/SIGTERM.
///
/// # Errors
/// The policy cannot be loaded, the client cannot be built, or a port
/// cannot be bound.
pub async fn run(config: Config, kubeconfig: Option<PathBuf>) -> Result<()> {
    let client = client(kubeconfig).await?;
    let metrics = Arc::new(Metrics::new());

    let engine =
        PolicyEngine::new().map_err(|e| anyhow::anyhow!("cannot create the wasm engine: {e}"))?;
    let cache = config
        .cache_dir
        .clone()
        .map(ComponentCache::at)
        .unwrap_or_else(ComponentCache::from_env);
    let options = LoadOptions {
        settings: config.settings_json(),
        limits: config.limits,
        sha256: config.policy_sha256.clone(),
    };
    let source = PolicySource::named_or_file(&config.policy);
    let baseline = || {
        let options = LoadOptions {
            limits: config.limits,
            ..LoadOptions::default()
        };
        WasmPolicy::load(
            &engine,
            &cache,
            &PolicySource::named_or_file("baseline"),
            &options,
        )
        .context("cannot load the built-in fallback policy")
    };
    let fallback = match config.on_policy_error {
        OnPolicyError::FailClosed => None,
        OnPolicyError::Fallback => Some(Arc::new(baseline()?)),
    };
    let slot = match PolicySlot::open(engine.clone(), cache.clone(), &source, &options) {
        Ok(slot) => Arc::new(slot),
        Err(e) if fallback.is_some() => {
            // Fallback mode: the baseline serves until a good file appears
            // (the watcher below swaps it in).
            tracing::error!(error = %e, "the policy did not load; the built-in baseline serves until the file is replaced");
            Metrics::inc(&metrics.reloads, "result", "failure");
            Arc::new(PolicySlot::new(engine.clone(), cache.clone(), baseline()?))
        }
        Err(e) => return Err(anyhow::Error::new(e).context("cannot load the policy")),
    };
    tracing::info!(policy = %slot.current().info().name, version = %slot.current().info().version, "policy loaded");
    if let PolicySource::File(path) = &source {
        crate::reload::spawn(path.clone(), slot.clone(), options.clone(), metrics.clone())
            .with_context(|| format!("cannot watch {} for policy changes", path.display()))?;
    }

    crate::http::spawn(
        &config.metrics_addr,
        metrics.clone(),
        Duration::from_secs(config.stuck_after_seconds),
    )
    .await?;

    // Everything the scheduling thread reacts to arrives on one channel, so
    // it sleeps until there is something to do.
    let (tx, rx) = mpsc::channel();

    // Leader election: followers keep their snapshot current but do not act.
    let leader = if config.leader_election.enabled {
        let le = &config.leader_election;
        let identity = format!("{}-{}", hostname(), std::process::id());
        let make = {
            let (client, le, identity) = (client.clone(), le.clone(), identity.clone());
            move || {
                kube_lease_manager::LeaseManagerBuilder::new(client.clone(), &le.lease_name)
                    .with_namespace(&le.namespace)
                    .with_duration(le.lease_duration_seconds)
                    .with_grace((le.lease_duration_seconds / 3).max(1))
                    .with_identity(&identity)
            }
        };
        let tx = tx.clone();
        let m = metrics.clone();
        // client-go's retryPeriod, or less for a very short lease.
        let retry = Duration::from_secs(2).min(Duration::from_millis(
            le.lease_duration_seconds.saturating_mul(1000) / 3,
        ));
        let election = Election::start(make, retry, move |is| {
            m.leader.set(i64::from(is));
            tracing::info!(identity, leader = is, "leadership");
            let _ = tx.send(Msg::Leading(is));
        })
        .await
        .context("cannot set up leader election")?;
        Some(election)
    } else {
        metrics.leader.set(1);
        None
    };

    spawn_watch(
        Api::<core::Node>::all(client.clone()),
        watcher::Config::default(),
        Kind::Node,
        tx.clone(),
        |n| Event::Node(Box::new(n)),
        |n| n.name_any(),
    );
    spawn_watch(
        Api::<core::Pod>::all(client.clone()),
        // Finished pods too: they free their node, and count in their
        // PodGroup's status.
        watcher::Config::default(),
        Kind::Pod,
        tx.clone(),
        |p| Event::Pod(Box::new(p)),
        namespaced_key,
    );
    spawn_watch(
        Api::<DynamicObject>::all_with(client.clone(), &podgroup_resource()),
        watcher::Config::default(),
        Kind::Group,
        tx.clone(),
        podgroup,
        namespaced_key,
    );
    spawn_watch(
        Api::<core::PersistentVolumeClaim>::all(client.clone()),
        watcher::Config::default(),
        Kind::Claim,
        tx.clone(),
        |c| Event::Claim {
            key: namespaced_key(&c),
            volume: c
                .spec
                .and_then(|s| s.volume_name)
                .filter(|v| !v.is_empty())
                .filter(|_| c.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Bound")),
        },
        namespaced_key,
    );
    spawn_watch(
        Api::<core::PersistentVolume>::all(client.clone()),
        watcher::Config::default(),
        Kind::Volume,
        tx.clone(),
        |v| Event::Volume(Box::new(v)),
        |v| v.name_any(),
    );
    let native = serves_native_podgroups(&client).await;
    if native {
        spawn_watch(
            Api::<NativePodGroup>::all(client.clone()),
            watcher::Config::default(),
            Kind::NativeGroup,
            tx.clone(),
            native_podgroup,
            namespaced_key,
        );
    } else {
        tracing::info!(
            "scheduling.k8s.io/v1beta1 PodGroups are not served (feature gate GenericWorkload); gangs come from scheduler-plugins PodGroups only"
        );
    }
    let stop = tx;

    let handle = tokio::runtime::Handle::current();
    let io = KubeIo::new(
        client.clone(),
        handle.clone(),
        &config.scheduler_name,
        config.bind_concurrency,
    )
    .with_rate_limit(config.client_limit());
    if let Some((qps, burst)) = config.client_limit() {
        tracing::info!(qps, burst, "client-side rate limit on binds and events");
    }
    tracing::info!(
        bind_concurrency = config.bind_concurrency,
        "a round's binds are sent concurrently"
    );
    let scaler = KubeScaler::new(client.clone(), handle);
    let statuses = io.status_writer();
    let loop_state = Loop {
        scaler,
        snapshot: Snapshot::new(&config.scheduler_name, config.scheduling),
        slot,
        fallback,
        io,
        metrics,
        leading: !config.leader_election.enabled,
        next_retry_ms: None,
        scale_interval: Duration::from_secs_f64(config.scale_interval_seconds),
        last_reason: BTreeMap::new(),
        statuses,
        group_status: BTreeMap::new(),
        group_problem: BTreeMap::new(),
        group_condition: BTreeMap::new(),
        // Nothing to list of an API the server does not serve.
        listed: if native {
            BTreeSet::new()
        } else {
            BTreeSet::from([Kind::NativeGroup])
        },
    };
    let worker = std::thread::Builder::new()
        .name("dragon-schedule".into())
        .spawn(move || loop_state.run(rx))?;

    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    tokio::select! {
        _ = tokio::signal::ctrl_c() => tracing::info!("interrupted; finishing the round under way"),
        _ = term.recv() => tracing::info!("terminated; finishing the round under way"),
    }
    shut_down(stop, worker, leader, config.scheduling.round_budget_ms).await;
    Ok(())
}

/// Stop in order: the scheduling thread finishes its round (its binds and
/// Events are sent, so no gang is left half bound), then the Lease is
/// released so a standby need not wait for it to expire.
async fn shut_down(
    stop: mpsc::Sender<Msg>,
    worker: std::thread::JoinHandle<()>,
    leader: Option<Election>,
    round_budget_ms: u64,
) {
    let started = Instant::now();
    let _ = stop.send(Msg::Shutdown);
    // A round is bounded by its budget plus its binds and the Events flush;
    // past that, leave (the deployment's grace period allows for it).
    let limit = Duration::from_millis(round_budget_ms) + Duration::from_secs(20);
    let joined = tokio::task::spawn_blocking(move || worker.join());
    match tokio::time::timeout(limit, joined).await {
        Ok(Ok(Ok(()))) => tracing::info!(
            ms = started.elapsed().as_millis() as u64,
            "scheduling stopped"
        ),
        Ok(_) => tracing::error!("the scheduling thread failed"),
        Err(_) => tracing::error!(
            seconds = limit.as_secs(),
            "the scheduling thread did not stop in time; leaving"
        ),
    }
    if let Some(election) = leader {
        match tokio::time::timeout(Duration::from_secs(5), election.release()).await {
            Ok(Ok(())) => tracing::info!("lease released"),
            Ok(Err(e)) => tracing::warn!("cannot release the lease: {e}"),
            Err(_) => tracing::warn!("cannot release the lease: no answer in 5 s"),
        }
    }
}

fn hostname() -> String {
    std::env::var("HOSTNAME")
        .ok()
        .or_else(|| {
            std::fs::read_to_string("/etc/hostname")
                .ok()
                .map(|s| s.trim().to_string())
        })
        .unwrap_or_else(|| "dragon".into())
}

/// The scheduling thread's state.
struct Loop {
    snapshot: Snapshot,
    slot: Arc<PolicySlot>,
    /// The built-in baseline, when units the policy fails on fall back to it.
    fallback: Option<Arc<WasmPolicy>>,
    io: KubeIo,
    scaler: KubeScaler,
    metrics: Arc<Metrics>,
    /// Whether this replica leads (always, without leader election).
    leading: bool,
    /// When the framework next has work with no cluster change: a backoff
    /// or a permit wait that ends.
    next_retry_ms: Option<u64>,
    scale_interval: Duration,
    /// Last FailedScheduling reason per pod, so events are not repeated.
    last_reason: BTreeMap<String, String>,
    /// Writes PodGroup statuses off this thread.
    statuses: crate::kube_io::StatusWriter,
    /// The status last sent to be written on each PodGroup.
    group_status: BTreeMap<String, Status>,
    /// The spec problem last reported on each PodGroup.
    group_problem: BTreeMap<String, String>,
    /// The `PodGroupInitiallyScheduled` condition last written on each
    /// `scheduling.k8s.io` PodGroup: (scheduled, message).
    group_condition: BTreeMap<String, (bool, String)>,
    listed: BTreeSet<Kind>,
}

impl Loop {
    /// Sleep until a message or a timer (a retry, the scale step), then act.
    /// A round runs on cluster changes and when a retry is due, never on a
    /// fixed period: the framework's queue decides which units a change
    /// may help.
    fn run(mut self, rx: mpsc::Receiver<Msg>) {
        let metrics = self.metrics.clone();
        let _running = metrics.health.start();
        let mut dirty = true;
        let mut last_scale = Instant::now();
        loop {
            metrics.health.idle();
            let scale_in = self.scale_interval.saturating_sub(last_scale.elapsed());
            let retry_in = self
                .next_retry_ms
                .map(|t| Duration::from_millis(t.saturating_sub(now_ms())));
            let timeout = retry_in.map_or(scale_in, |r| r.min(scale_in));
            let first = rx.recv_timeout(timeout);
            metrics.health.busy(now_ms());
            match first {
                Ok(msg) => {
                    let mut stop = self.handle(msg);
                    // Apply everything already queued before deciding.
                    while let Ok(msg) = rx.try_recv() {
                        stop |= self.handle(msg);
                    }
                    if stop {
                        let left = self.io.flush_events(Duration::from_secs(5));
                        if left > 0 {
                            tracing::warn!(events = left, "stopping with events unsent");
                        }
                        return;
                    }
                    dirty = true;
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => return,
            }
            if self.listed.len() < KINDS || !self.leading {
                continue;
            }
            self.sync_targets();
            let now = now_ms();
            let due = self.next_retry_ms.is_some_and(|t| t <= now);
            let waiting = self.snapshot.sched.waiting_gangs().next().is_some();
            if (dirty || due) && (self.snapshot.pending() > 0 || waiting) {
                self.round();
                dirty = false;
            }
            if last_scale.elapsed() >= self.scale_interval {
                self.scale();
                last_scale = Instant::now();
            }
            self.report_groups();
            self.next_retry_ms = self.snapshot.sched.next_retry_ms(now_ms());
        }
    }

    /// Apply one message; true when it asks the thread to stop.
    fn handle(&mut self, msg: Msg) -> bool {
        match msg {
            Msg::Event(e) => {
                if let Event::GroupGone(key) = &e {
                    self.group_status.remove(key);
                    self.group_problem.remove(key);
                    self.group_condition.remove(key);
                }
                self.snapshot.apply(e);
            }
            Msg::Leading(is) => self.leading = is,
            Msg::Shutdown => return true,
            Msg::Listed { kind, keys } => {
                // Drop what vanished while we were not watching.
                for e in self.snapshot.vanished(kind.listed(), &keys) {
                    self.handle(Msg::Event(e));
                }
                self.listed.insert(kind);
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

    /// Learn scale targets from PodGroup annotations, and each target's
    /// replicas once (the workers a job wants).
    fn sync_targets(&mut self) {
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
            if self.scaler.targets.get(&job) != Some(&target) {
                self.scaler.targets.insert(job.clone(), target);
                if let Some(r) = self.scaler.target_replicas(&job) {
                    self.snapshot.desired.insert(job.clone(), r);
                    self.snapshot.refresh_job(&job);
                }
            }
        }
    }

    fn apply_scaled(&mut self) {
        for (job, w) in std::mem::take(&mut self.scaler.scaled) {
            self.snapshot.desired.insert(job.clone(), w);
            self.snapshot.refresh_job(&job);
        }
    }

    fn round(&mut self) {
        let policy = self.slot.current();
        let timed = Timed {
            inner: policy.as_ref(),
            metrics: &self.metrics,
        };
        let now = now_ms();
        let fallback = self.fallback.as_deref().map(|f| f as &dyn Hooks);
        let report = self.snapshot.sched.schedule_round_with_fallback(
            now,
            &timed,
            fallback,
            &mut self.io,
            &mut self.scaler,
        );
        // Admission below the requested size also goes through /scale.
        self.apply_scaled();
        for d in &report.decisions {
            let m = &self.metrics;
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
                    if let Some(job) = unit.strip_prefix("job/") {
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
                        self.native_condition(job, true, &format!("{pods} pods scheduled"));
                    }
                }
                Decision::Waiting {
                    unit,
                    reserved,
                    wait_ms,
                } => {
                    Metrics::inc(&m.attempts, "result", "waiting");
                    self.explain(unit, &format!("gang waiting in permit: {reserved} pods reserved, waiting up to {wait_ms} ms for the rest"));
                }
                Decision::Unschedulable { unit, reason } => {
                    Metrics::inc(&m.attempts, "result", "unschedulable");
                    self.explain(unit, reason);
                }
                Decision::Rejected { unit, reason } => {
                    Metrics::inc(&m.attempts, "result", "rejected");
                    tracing::info!(unit, reason, "gang released by permit");
                    self.explain(unit, &format!("gang rejected by permit: {reason}"));
                }
                Decision::TimedOut { unit, reason } => {
                    Metrics::inc(&m.attempts, "result", "rejected");
                    tracing::info!(unit, reason, "gang timed out");
                    self.explain(unit, reason);
                }
                Decision::BindFailed {
                    unit,
                    pod,
                    reason,
                    kept,
                } => {
                    Metrics::inc(&m.attempts, "result", "error");
                    tracing::info!(
                        unit,
                        pod,
                        reason,
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
                    self.explain(unit, &format!("binding failed, {what}: {reason}"));
                }
                Decision::PolicyError { unit, error } => {
                    Metrics::inc(&m.attempts, "result", "error");
                    self.explain(unit, &format!("policy error: {error}"));
                }
                Decision::FellBack { unit, policy } => {
                    Metrics::inc(&m.attempts, "result", "fallback");
                    tracing::warn!(unit, fallback = %policy, "the policy failed; the unit was tried with the fallback");
                }
                Decision::Resized {
                    unit,
                    workers,
                    reason,
                } => {
                    tracing::info!(
                        unit,
                        workers,
                        reason,
                        "gang resized: admitted below the requested size"
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
        for (key, reason) in self.snapshot.invalid.clone() {
            self.explain(
                &format!("pod/{key}"),
                &format!("cannot be scheduled: {reason}"),
            );
        }
    }

    /// Write the status of each PodGroup whose pods or spec changed (those
    /// whose pods are all another scheduler's excepted), and a Warning
    /// Event on a PodGroup whose spec cannot be used, once per problem.
    fn report_groups(&mut self) {
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
                    if self.group_problem.get(&group) != Some(&problem)
                        && self
                            .io
                            .podgroup_event(&group, "Warning", "InvalidSpec", problem.clone())
                    {
                        self.group_problem.insert(group.clone(), problem);
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
    fn native_condition(&mut self, job: &str, scheduled: bool, message: &str) {
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
        let (status, reason) = match scheduled {
            true => ("True", "Scheduled"),
            false => ("False", "Unschedulable"),
        };
        if self
            .io
            .native_podgroup_condition(job, status, reason, message)
        {
            self.group_condition
                .insert(job.to_string(), (scheduled, message.to_string()));
        }
    }

    /// A FailedScheduling event and `PodScheduled=False` on each pending pod
    /// of `unit`, once per reason.
    fn explain(&mut self, unit: &str, reason: &str) {
        if let Some(job) = unit.strip_prefix("job/") {
            self.native_condition(job, false, reason);
        }
        let pods: Vec<String> = if let Some(job) = unit.strip_prefix("job/") {
            self.snapshot
                .sched
                .cluster
                .job_pods(job)
                .filter(|(_, s)| !matches!(s, dragon_framework::PodState::Bound(_)))
                .map(|(p, _)| p.key.clone())
                .collect()
        } else if let Some(pod) = unit.strip_prefix("pod/") {
            vec![pod.to_string()]
        } else {
            Vec::new()
        };
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
            let condition = if gated {
                "SchedulingGated"
            } else {
                "Unschedulable"
            };
            let published = self
                .io
                .event(&pod, "Warning", "FailedScheduling", reason.to_string());
            if self.io.pod_unschedulable(&pod, condition, reason) && published {
                self.last_reason.insert(pod, reason.to_string());
            }
        }
    }

    fn scale(&mut self) {
        let policy = self.slot.current();
        let timed = Timed {
            inner: policy.as_ref(),
            metrics: &self.metrics,
        };
        let report = self
            .snapshot
            .sched
            .scale_step(now_ms(), &timed, &mut self.scaler);
        for a in &report.actions {
            Metrics::inc(
                &self.metrics.scale_actions,
                "direction",
                if a.to > a.from { "up" } else { "down" },
            );
            tracing::info!(job = %a.job, from = a.from, to = a.to, reason = %a.reason, "scale");
        }
        for e in &report.errors {
            tracing::warn!("scale step: {e}");
        }
        if let Some(change) = &report.breaker {
            self.breaker_changed(change, now_ms());
        }
        self.apply_scaled();
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
