//! Fenced writes: a replica that is no longer sure it holds the Lease
//! writes nothing.
//!
//! The election task learns that leadership is lost only when it next
//! tries to renew. A leader that stalled (a long pause, a frozen VM, a
//! partition) past its Lease wakes up believing it leads while a standby
//! already does; its loop and its teller would then act on a stale
//! snapshot before the election task notices. So every write to the API
//! server goes through [`Fenced`], which lets it through only while the
//! Lease, as last read, is ours and unexpired by the monotonic clock
//! (which runs on while the process is stopped), and reads the Lease again
//! when it is not. This is client-go's renew-deadline rule applied at each
//! write: the Lease is valid until its `renewTime + leaseDuration`, less a
//! margin for clock skew between replicas.
//!
//! What no client can close: a stall between the check and the request
//! itself. The margin makes that window a fraction of the Lease.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use dragon_framework::devices::{Allocation, ExtendedChoice};
use dragon_framework::volumes::VolumeBinding;
use dragon_framework::{ApiError, ApiErrorKind, Release};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1 as core;
use k8s_openapi::jiff::Timestamp;
use kube::Api;
use prometheus_client::metrics::counter::Counter;
use tokio::sync::Mutex;

use crate::cluster_io::{ClaimProgress, ClusterIo, Note, Unschedulable, Versioned};
use crate::group_status::Status;
use crate::key::ScaleTarget;

/// How long a Lease read at `now` stays ours: `None` when another replica
/// holds it, nobody does, or it has expired. `margin` is taken off its
/// end.
pub fn ours_for(
    lease: &Lease,
    identity: &str,
    now: Timestamp,
    margin: Duration,
) -> Option<Duration> {
    let spec = lease.spec.as_ref()?;
    if spec.holder_identity.as_deref() != Some(identity) {
        return None;
    }
    let renewed = spec.renew_time.as_ref()?.0;
    let seconds = u64::try_from(spec.lease_duration_seconds?).ok()?;
    let age = now.duration_since(renewed);
    let age = Duration::try_from(age).unwrap_or(Duration::ZERO);
    Duration::from_secs(seconds)
        .checked_sub(margin)?
        .checked_sub(age)
        .filter(|left| !left.is_zero())
}

/// After a read that did not confirm the Lease (another holder, none, or
/// the API server unreachable), how long before the next read: during an
/// outage every write and every loop step asks, and each would otherwise
/// be one more request that fails at once.
pub const RECHECK: Duration = Duration::from_secs(1);

/// Whether this replica still holds its Lease, read again when what was
/// last read no longer says so.
pub struct Fence {
    leases: Api<Lease>,
    name: String,
    identity: String,
    margin: Duration,
    last: Mutex<LastRead>,
    /// Set when the election has just taken the Lease: a read that did
    /// not confirm it (made while a standby) is stale, so the next write
    /// reads again rather than waiting out [`RECHECK`].
    acquired: AtomicBool,
    /// Writes refused because it was not.
    refused: Counter,
}

/// What the last read of the Lease said (monotonic clock).
#[derive(Default)]
struct LastRead {
    /// Until when the Lease is known to be ours.
    ours_until: Option<Instant>,
    /// Not confirmed: no new read before this.
    next_read: Option<Instant>,
    /// The last read failed (logged once, not once per write).
    failed: bool,
}

impl Fence {
    /// Fence writes on Lease `name` held as `identity`, counting refused
    /// writes on `refused`.
    pub fn new(
        leases: Api<Lease>,
        name: &str,
        identity: &str,
        lease: Duration,
        refused: Counter,
    ) -> Fence {
        Fence {
            leases,
            name: name.to_string(),
            identity: identity.to_string(),
            // A sixth of the Lease: the holder renews a third before the
            // end, so a renewed Lease is always confirmed well within it.
            margin: lease / 6,
            last: Mutex::new(LastRead::default()),
            acquired: AtomicBool::new(false),
            refused,
        }
    }

    /// The election has taken the Lease: forget a read that said it was
    /// not ours.
    pub fn acquired(&self) {
        self.acquired.store(true, Ordering::Release);
    }

    /// Whether the Lease is ours now: from what was last read while that
    /// holds, else from a fresh read (one at a time; concurrent writers
    /// share it; at most one a [`RECHECK`] while it is not confirmed).
    pub async fn holds(&self) -> bool {
        let mut last = self.last.lock().await;
        let now = Instant::now();
        if last.ours_until.is_some_and(|u| now < u) {
            return true;
        }
        if self.acquired.swap(false, Ordering::AcqRel) {
            last.next_read = None;
        }
        if last.next_read.is_some_and(|t| now < t) {
            return false;
        }
        last.ours_until = match self.leases.get_opt(&self.name).await {
            Ok(lease) => {
                if std::mem::take(&mut last.failed) {
                    tracing::info!(lease = %self.name, "the Lease can be read again");
                }
                lease
                    .and_then(|l| ours_for(&l, &self.identity, Timestamp::now(), self.margin))
                    .map(|left| Instant::now() + left)
            }
            Err(e) => {
                if !std::mem::replace(&mut last.failed, true) {
                    tracing::warn!(lease = %self.name, "cannot read the Lease, so nothing is written until it can: {e}");
                }
                None
            }
        };
        last.next_read = match last.ours_until {
            Some(_) => None,
            None => Some(Instant::now() + RECHECK),
        };
        last.ours_until.is_some()
    }

    async fn check(&self, what: impl FnOnce() -> String) -> Result<(), ApiError> {
        if self.holds().await {
            return Ok(());
        }
        let what = what();
        self.refused.inc();
        tracing::info!(lease = %self.name, "not written, the Lease is not ours: {what}");
        Err(ApiError::new(
            ApiErrorKind::Refused,
            format!(
                "not written: this replica no longer holds Lease {}",
                self.name
            ),
        ))
    }
}

/// A [`ClusterIo`] whose writes go through a [`Fence`] (none: every write
/// goes, as with leader election off). Reads always go.
pub struct Fenced<I> {
    inner: I,
    fence: Option<Arc<Fence>>,
}

impl<I> Fenced<I> {
    pub fn new(inner: I, fence: Option<Arc<Fence>>) -> Fenced<I> {
        Fenced { inner, fence }
    }

    /// Let a write through, or refuse it; `what` names it, and is made
    /// only for a refusal (writes are the hot path).
    async fn check(&self, what: impl FnOnce() -> String + Send) -> Result<(), ApiError> {
        match &self.fence {
            Some(f) => f.check(what).await,
            None => Ok(()),
        }
    }
}

#[async_trait]
impl<I: ClusterIo> ClusterIo for Fenced<I> {
    async fn leads(&self) -> bool {
        match &self.fence {
            Some(f) => f.holds().await,
            None => true,
        }
    }

    async fn bind(&self, pod: &str, node: &str) -> Result<(), ApiError> {
        self.check(|| format!("binding {pod}")).await?;
        self.inner.bind(pod, node).await
    }

    async fn read_pod(&self, pod: &str) -> Result<Option<core::Pod>, ApiError> {
        self.inner.read_pod(pod).await
    }

    async fn bound_pods(&self) -> Result<Vec<core::Pod>, ApiError> {
        self.inner.bound_pods().await
    }

    async fn allocate(
        &self,
        claim: &str,
        allocation: &Allocation,
        pod: &str,
    ) -> Result<(), ApiError> {
        self.check(|| format!("allocating {claim}")).await?;
        self.inner.allocate(claim, allocation, pod).await
    }

    async fn allocate_extended(
        &self,
        pod: &str,
        choice: &ExtendedChoice,
    ) -> Result<String, ApiError> {
        self.check(|| format!("the extended-resource claim of {pod}"))
            .await?;
        self.inner.allocate_extended(pod, choice).await
    }

    async fn unreserve(&self, claim: &str, pod: &str) -> Result<(), ApiError> {
        self.check(|| format!("unreserving {claim}")).await?;
        self.inner.unreserve(claim, pod).await
    }

    async fn drop_extended_claim(&self, pod: &str) -> Result<(), ApiError> {
        self.check(|| format!("deleting the extended-resource claim of {pod}"))
            .await?;
        self.inner.drop_extended_claim(pod).await
    }

    async fn devices_progress(&self, claim: &str) -> Result<ClaimProgress, ApiError> {
        self.inner.devices_progress(claim).await
    }

    async fn bind_volume(&self, claim: &str, binding: &VolumeBinding) -> Result<(), ApiError> {
        self.check(|| format!("binding volume claim {claim}"))
            .await?;
        self.inner.bind_volume(claim, binding).await
    }

    async fn claim_progress(
        &self,
        claim: &str,
        binding: &VolumeBinding,
    ) -> Result<ClaimProgress, ApiError> {
        self.inner.claim_progress(claim, binding).await
    }

    async fn release(&self, pod: &str) -> Result<Release, ApiError> {
        self.check(|| format!("releasing {pod}")).await?;
        self.inner.release(pod).await
    }

    async fn evict(&self, pod: &str, dry_run: bool) -> Result<(), ApiError> {
        if !dry_run {
            self.check(|| format!("evicting {pod}")).await?;
        }
        self.inner.evict(pod, dry_run).await
    }

    async fn replicas(&self, job: &str, target: &ScaleTarget) -> Result<u32, ApiError> {
        self.inner.replicas(job, target).await
    }

    async fn scale(&self, job: &str, target: &ScaleTarget, replicas: u32) -> Result<(), ApiError> {
        self.check(|| format!("scaling {job}")).await?;
        self.inner.scale(job, target, replicas).await
    }

    async fn nominate(
        &self,
        pod: &str,
        node: Option<&str>,
        version: Versioned<'_>,
    ) -> Result<Option<String>, ApiError> {
        self.check(|| format!("nominating {pod}")).await?;
        self.inner.nominate(pod, node, version).await
    }

    async fn pod_unschedulable(
        &self,
        pod: &str,
        condition: &Unschedulable,
        version: Versioned<'_>,
    ) -> Result<Option<String>, ApiError> {
        self.check(|| format!("the PodScheduled condition of {pod}"))
            .await?;
        self.inner.pod_unschedulable(pod, condition, version).await
    }

    async fn group_condition(
        &self,
        group: &str,
        scheduled: bool,
        message: &str,
    ) -> Result<(), ApiError> {
        self.check(|| format!("the condition of PodGroup {group}"))
            .await?;
        self.inner.group_condition(group, scheduled, message).await
    }

    async fn event(&self, note: &Note) -> Result<(), ApiError> {
        self.check(|| "an Event".to_string()).await?;
        self.inner.event(note).await
    }

    async fn group_status(&self, group: &str, status: &Status) -> Result<(), ApiError> {
        self.check(|| format!("the status of PodGroup {group}"))
            .await?;
        self.inner.group_status(group, status).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::coordination::v1::LeaseSpec;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;

    fn lease(holder: &str, renewed: Timestamp, seconds: i32) -> Lease {
        Lease {
            spec: Some(LeaseSpec {
                holder_identity: Some(holder.into()),
                renew_time: Some(MicroTime(renewed)),
                lease_duration_seconds: Some(seconds),
                ..LeaseSpec::default()
            }),
            ..Lease::default()
        }
    }

    #[test]
    fn a_lease_is_ours_until_its_renewal_plus_its_duration_less_the_margin() {
        let now = Timestamp::now();
        let ago = |s: i64| {
            now.checked_sub(k8s_openapi::jiff::SignedDuration::from_secs(s))
                .unwrap()
        };
        let margin = Duration::from_secs(2);
        // Renewed 3 s ago, 12 s long: ours 7 s more.
        assert_eq!(
            ours_for(&lease("me", ago(3), 12), "me", now, margin),
            Some(Duration::from_secs(7))
        );
        // Another holder, or a Lease past its end (the holder stalled).
        assert_eq!(
            ours_for(&lease("other", ago(3), 12), "me", now, margin),
            None
        );
        assert_eq!(ours_for(&lease("me", ago(10), 12), "me", now, margin), None);
        assert_eq!(ours_for(&lease("me", ago(30), 12), "me", now, margin), None);
        // Nobody holds it.
        assert_eq!(ours_for(&Lease::default(), "me", now, margin), None);
        // A renewal stamped a little ahead of this clock counts from now.
        assert_eq!(
            ours_for(&lease("me", ago(-1), 12), "me", now, margin),
            Some(Duration::from_secs(10))
        );
    }

    /// A fence on Lease `kube-system/dragon-scheduler` of an API server
    /// that cannot be reached, and the count of connections made to it.
    fn fence_on_unreachable_api() -> (Fence, Arc<std::sync::atomic::AtomicUsize>) {
        let (client, accepted) = unreachable_api();
        let fence = Fence::new(
            Api::namespaced(client, "kube-system"),
            "dragon-scheduler",
            "me",
            Duration::from_secs(15),
            Counter::default(),
        );
        (fence, accepted)
    }

    /// An API server that cannot be reached: each connection is accepted
    /// and closed at once, and counted.
    fn unreachable_api() -> (kube::Client, Arc<std::sync::atomic::AtomicUsize>) {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let accepted = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let count = accepted.clone();
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                drop(conn);
            }
        });
        let url: http::Uri = format!("http://{addr}").parse().unwrap();
        let client = kube::Client::try_from(kube::Config::new(url)).unwrap();
        (client, accepted)
    }

    #[tokio::test]
    async fn while_the_lease_cannot_be_read_it_is_asked_for_once_a_recheck_not_once_a_write() {
        let (fence, accepted) = fence_on_unreachable_api();
        let started = Instant::now();
        for _ in 0..200 {
            assert!(!fence.holds().await);
            assert!(fence.check(|| "a write".into()).await.is_err());
        }
        // All within one recheck interval of the first read (the loop is
        // far faster than a second), so that read is the only one.
        if started.elapsed() < RECHECK {
            let reads = accepted.load(std::sync::atomic::Ordering::SeqCst);
            assert!(reads <= 2, "{reads} connections for 400 questions");
        }
        assert_eq!(fence.refused.get(), 200);
    }

    #[tokio::test]
    async fn a_lease_just_taken_is_read_again_at_once_not_after_the_recheck() {
        let (fence, accepted) = fence_on_unreachable_api();
        let reads = || accepted.load(std::sync::atomic::Ordering::SeqCst);
        let started = Instant::now();
        assert!(!fence.holds().await);
        let before = reads();
        assert!(!fence.holds().await);
        let unchanged = reads();
        fence.acquired();
        assert!(!fence.holds().await);
        if started.elapsed() < RECHECK {
            assert_eq!(unchanged, before, "read again within the recheck");
            assert!(reads() > before, "not read again after the Lease was taken");
        }
    }
}
