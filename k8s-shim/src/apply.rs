//! How the loop's requests go out: a round's binds together (up to a bound,
//! results in order), and the requests nobody waits for (Scheduled Events,
//! PodGroup statuses) from tasks of their own, so a round never waits for
//! them.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use dragon_framework::{ApiError, ApiErrorKind, BindGroup, PodBind, Prebind};
use futures::StreamExt;
use k8s_openapi::api::core::v1 as core;
use tokio::sync::{Notify, Semaphore};

use crate::cluster_io::{ClaimProgress, ClusterIo, Note};
use crate::group_status::Status;
use dragon_framework::{JobKey, NodeName, PodKey};

/// Sends a round's binds, up to `concurrency` (at least 1) requests in
/// flight, one result per pod in order. First every pod's pre-bind writes
/// (as kube-scheduler's PreBind: devices allocated, volumes bound and
/// waited for, at most `volume_wait`), then the Bindings of the lone pods
/// whose writes succeeded and of the gangs whose members' writes all did:
/// a pod is never bound without what it needs, and a gang is not bound in
/// part for want of one member's volume. A Binding answered with a 409 or
/// not at all is settled by reading its pod back ([`bind_one`]). The loop
/// waits for all of them: the framework releases a gang whose bind failed
/// only once it has every result.
pub async fn bind_all<I: ClusterIo>(
    io: &I,
    groups: &[BindGroup],
    volume_wait: Duration,
    concurrency: usize,
) -> Bound {
    let concurrency = concurrency.max(1);
    // Each pod with its gang's job. Made before the stream, not by an
    // adapter over the slice: a future holding a slice iterator across an
    // await is not provably `Send`.
    let binds: Vec<(&PodBind, Option<&JobKey>)> = groups
        .iter()
        .flat_map(|g| g.pods.iter().map(move |b| (b, g.job.as_ref())))
        .collect();
    let writes: Vec<_> = binds
        .iter()
        .map(|&(b, _)| async move {
            match b.prebind.is_empty() {
                true => Ok(()),
                false => prebind(io, &b.pod, &b.prebind, volume_wait).await,
            }
        })
        .collect();
    let written: Vec<Result<(), ApiError>> = futures::stream::iter(writes)
        .buffered(concurrency)
        .collect()
        .await;
    let failed: BTreeSet<&JobKey> = binds
        .iter()
        .zip(&written)
        .filter(|(_, r)| r.is_err())
        .filter_map(|((_, job), _)| *job)
        .collect();
    let sends: Vec<_> = binds
        .iter()
        .zip(written)
        .map(|(&(b, job), written)| {
            let gang = job.filter(|g| failed.contains(g));
            let (pod, node) = (&b.pod, &b.node);
            async move {
                written.map_err(Outcome::Settled)?;
                if let Some(gang) = gang {
                    return Err(Outcome::Settled(ApiError::new(
                        ApiErrorKind::Conflict,
                        format!("not bound: a member of gang {gang} could not get its devices or volumes"),
                    )));
                }
                bind_one(io, pod, node).await
            }
        })
        .collect();
    let outcomes: Vec<Result<(), Outcome>> = futures::stream::iter(sends)
        .buffered(concurrency)
        .collect()
        .await;
    let mut bound = Bound::default();
    for outcome in outcomes {
        bound.results.push(outcome.map_err(|o| match o {
            Outcome::Settled(e) => e,
            Outcome::Elsewhere(e, pod) => {
                bound.elsewhere.push(*pod);
                e
            }
            Outcome::Unknown(e) => {
                bound.unsettled += 1;
                e
            }
        }));
    }
    let results = &bound.results;
    // A pod not bound gives back the claims written for it, as kube's
    // unreserve and post-filter do: it leaves their `reservedFor`, and a
    // claim nobody else reserved is deallocated, so its devices serve the
    // next attempt wherever that lands.
    for ((b, _), result) in binds.iter().zip(results) {
        let (pod, p) = (&b.pod, &b.prebind);
        if result.is_ok() || p.is_empty() {
            continue;
        }
        for (claim, _) in &p.claims {
            if let Err(e) = io.unreserve(claim, pod).await {
                tracing::warn!(claim, %pod, "giving the claim back after a failed bind: {e}");
            }
        }
        if p.extended.is_some()
            && let Err(e) = io.drop_extended_claim(pod).await
        {
            tracing::warn!(
                %pod,
                "deleting the extended-resource claim after a failed bind: {e}"
            );
        }
    }
    bound
}

/// What a round's binds came to.
#[derive(Debug, Default)]
pub struct Bound {
    /// One result per bind, in order.
    pub results: Vec<Result<(), ApiError>>,
    /// Pods whose Binding failed because they are bound to another node
    /// (read back): the snapshot learns where they are.
    pub elsewhere: Vec<core::Pod>,
    /// Binds whose outcome is unknown: no answer, and the pod could not be
    /// read back either.
    pub unsettled: usize,
}

/// Why one Binding did not bind its pod where asked.
enum Outcome {
    /// Not bound by it (refused, or read back unbound).
    Settled(ApiError),
    /// Bound to another node, as read back.
    Elsewhere(ApiError, Box<core::Pod>),
    /// Perhaps bound: no answer, and no read back.
    Unknown(ApiError),
}

/// POST `pod`'s Binding to `node`, and settle an answer that leaves the
/// pod perhaps bound by reading it back: a 409 (bound already, by this
/// very bind whose first answer was lost, or by another replica) or no
/// answer (a broken connection, a timeout, a 5xx: the write may have
/// landed). Read back bound to `node`, the bind succeeded.
async fn bind_one<I: ClusterIo>(io: &I, pod: &PodKey, node: &NodeName) -> Result<(), Outcome> {
    let error = match io.bind(pod, node).await {
        Err(e) if matches!(e.kind, ApiErrorKind::Conflict | ApiErrorKind::Unavailable) => e,
        other => return other.map_err(Outcome::Settled),
    };
    match io.read_pod(pod).await {
        Ok(Some(read)) => match read.spec.as_ref().and_then(|s| s.node_name.as_deref()) {
            Some(on) if on == node.as_str() => {
                tracing::info!(%pod, %node, "bound: read back after \"{error}\"");
                Ok(())
            }
            Some(_) => Err(Outcome::Elsewhere(error, Box::new(read))),
            None => Err(Outcome::Settled(error)),
        },
        Ok(None) => Err(Outcome::Settled(error)),
        Err(read) => {
            tracing::warn!(%pod, %node, "cannot tell whether the Binding landed: {error}; reading it back: {read}");
            Err(Outcome::Unknown(error))
        }
    }
}

/// `pod`'s writes before its Binding: its claims' allocations, its
/// extended-resource claim, its volumes' bindings; then the volumes waited
/// for until the PV controller (or a provisioner) has bound them, and the
/// devices with binding conditions until their driver says they hold, at
/// most `wait` in all. A refused write, a binding failure or a binding not
/// done in time fails the bind, and the framework releases the gang; a
/// claim left bound, allocated or being provisioned keeps its pods to that
/// node from then on.
async fn prebind<I: ClusterIo>(
    io: &I,
    pod: &str,
    p: &Prebind,
    wait: Duration,
) -> Result<(), ApiError> {
    let mut conditional = Vec::new();
    for (claim, allocation) in &p.claims {
        io.allocate(claim, allocation, pod).await?;
        if allocation.devices.iter().any(|d| d.binding.any()) {
            conditional.push(claim.clone());
        }
    }
    if let Some(choice) = &p.extended {
        let claim = io.allocate_extended(pod, choice).await?;
        if choice.allocation.devices.iter().any(|d| d.binding.any()) {
            conditional.push(claim);
        }
    }
    for (claim, binding) in &p.volumes {
        io.bind_volume(claim, binding).await?;
    }
    let deadline = tokio::time::Instant::now() + wait;
    // Read back as kube-scheduler does (each second), sooner at first: a
    // static binding usually completes within a few hundred ms.
    let mut pause = Duration::from_millis(50);
    for (claim, binding) in &p.volumes {
        while io.claim_progress(claim, binding).await? == ClaimProgress::Binding {
            if tokio::time::Instant::now() + pause > deadline {
                return Err(ApiError::new(
                    ApiErrorKind::Unavailable,
                    format!(
                        "persistentvolumeclaim {claim} was not bound to {binding} within {} s",
                        wait.as_secs()
                    ),
                ));
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_secs(1));
        }
    }
    for claim in &conditional {
        while io.devices_progress(claim).await? == ClaimProgress::Binding {
            if tokio::time::Instant::now() + pause > deadline {
                return Err(ApiError::new(
                    ApiErrorKind::Unavailable,
                    format!(
                        "the binding conditions of resourceclaim {claim}'s devices did not hold within {} s",
                        wait.as_secs()
                    ),
                ));
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_secs(1));
        }
    }
    Ok(())
}

/// Events spawned and not yet sent beyond which new ones are dropped
/// (client-go's event broadcaster also drops past a queue of 1,000): a lost
/// Scheduled event loses no pod, memory held for an API server that cannot
/// keep up would.
const MAX_QUEUED_EVENTS: usize = 4096;

/// Publishes Events from tasks of their own (best effort: failures are
/// logged, nobody waits for the result). Cheap to clone.
pub struct Publisher<I> {
    io: Arc<I>,
    /// Event POSTs spawned that may be waiting for their token or in
    /// flight. Each takes its token only once it holds a permit, so at most
    /// this many tokens are promised ahead of an Event the loop waits for.
    in_flight: Arc<Semaphore>,
    /// Spawned and not yet finished (waiting for a permit included).
    queued: Arc<AtomicUsize>,
    /// Notified when `queued` drops to zero.
    drained: Arc<Notify>,
    /// Dropped because `queued` was at [`MAX_QUEUED_EVENTS`].
    dropped: Arc<AtomicU64>,
}

impl<I> Clone for Publisher<I> {
    fn clone(&self) -> Self {
        Publisher {
            io: self.io.clone(),
            in_flight: self.in_flight.clone(),
            queued: self.queued.clone(),
            drained: self.drained.clone(),
            dropped: self.dropped.clone(),
        }
    }
}

/// Decrements the queued count when a spawned event's task ends, however
/// it ends (sent, refused, or cancelled with the runtime).
struct Queued(Arc<AtomicUsize>, Arc<Notify>);

impl Drop for Queued {
    fn drop(&mut self) {
        if self.0.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.1.notify_waiters();
        }
    }
}

impl<I: ClusterIo> Publisher<I> {
    /// A publisher with up to `in_flight` (at least 1) events in flight.
    pub fn new(io: Arc<I>, in_flight: usize) -> Publisher<I> {
        Publisher {
            io,
            in_flight: Arc::new(Semaphore::new(in_flight.max(1))),
            queued: Arc::new(AtomicUsize::new(0)),
            drained: Arc::new(Notify::new()),
            dropped: Arc::new(AtomicU64::new(0)),
        }
    }

    /// Publish `note` from a task of its own.
    pub fn spawn(&self, note: Note) {
        if self.queued.fetch_add(1, Ordering::Relaxed) >= MAX_QUEUED_EVENTS {
            self.queued.fetch_sub(1, Ordering::Relaxed);
            let n = self.dropped.fetch_add(1, Ordering::Relaxed) + 1;
            // Logged at 1, 2, 4, 8... drops: visible without a line per pod.
            if n.is_power_of_two() {
                tracing::warn!(
                    regarding = ?note.regarding,
                    reason = note.reason,
                    dropped_total = n,
                    "event dropped: {MAX_QUEUED_EVENTS} events already waiting to be sent"
                );
            }
            return;
        }
        let queued = Queued(self.queued.clone(), self.drained.clone());
        let this = self.clone();
        tokio::spawn(async move {
            let _queued = queued;
            // Never closed, so this cannot fail; if it did, not sending is
            // the safe side for a best-effort event.
            let Ok(_permit) = this.in_flight.acquire().await else {
                return;
            };
            if let Err(e) = this.io.event(&note).await {
                tracing::warn!(reason = note.reason, "cannot publish event: {e}");
            }
        });
    }

    /// Wait up to `limit` for the events spawned so far to be sent (on
    /// shutdown); how many were still queued when it gave up.
    pub fn flush(&self, limit: Duration) -> impl Future<Output = usize> + Send + 'static {
        drain(self.queued.clone(), self.drained.clone(), limit)
    }
}

async fn drain(queued: Arc<AtomicUsize>, drained: Arc<Notify>, limit: Duration) -> usize {
    let _ = tokio::time::timeout(limit, async {
        loop {
            // Registered before the check, so a drain in between is not
            // missed.
            let notified = drained.notified();
            if queued.load(Ordering::Acquire) == 0 {
                return;
            }
            notified.await;
        }
    })
    .await;
    queued.load(Ordering::Acquire)
}

/// Writes PodGroup statuses from a task of its own, so a round never waits
/// for them: the latest status of each group, one request at a time (so a
/// group's writes land in order), a failed write tried again a second later
/// with whatever is latest then, a deleted PodGroup dropped.
pub struct StatusWriter {
    tx: tokio::sync::mpsc::UnboundedSender<(String, Status)>,
}

/// Between retries of a failed status write.
const STATUS_RETRY: Duration = Duration::from_secs(1);

impl StatusWriter {
    /// A writer sending through `io`.
    pub fn spawn<I: ClusterIo>(io: Arc<I>) -> StatusWriter {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<(String, Status)>();
        tokio::spawn(async move {
            let mut latest: BTreeMap<String, Status> = BTreeMap::new();
            loop {
                if latest.is_empty() {
                    let Some((group, status)) = rx.recv().await else {
                        return;
                    };
                    latest.insert(group, status);
                }
                while let Ok((group, status)) = rx.try_recv() {
                    latest.insert(group, status);
                }
                let Some((group, status)) = latest.pop_first() else {
                    continue;
                };
                match io.group_status(&group, &status).await {
                    Ok(()) => {}
                    Err(e) if e.kind == ApiErrorKind::NotFound => {}
                    Err(e) => {
                        tracing::debug!(group, "cannot update PodGroup status (retrying): {e}");
                        latest.entry(group).or_insert(status);
                        tokio::time::sleep(STATUS_RETRY).await;
                    }
                }
            }
        });
        StatusWriter { tx }
    }

    /// Have `group`'s status written (replacing any not yet written).
    pub fn write(&self, group: &str, status: Status) {
        // Closed only with the runtime, when nothing is written any more.
        let _ = self.tx.send((group.to_string(), status));
    }
}
