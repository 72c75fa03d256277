//! Every request the scheduling loop makes of the API server, as one trait:
//! [`crate::kube_io::KubeIo`] sends them over a kube client, and the fake
//! in the tests records them, so the loop is tested without a server.
//! Each call is one request (or a read and a write for a release); what to
//! do with its answer is the loop's business.

use dragon_framework::devices::{Allocation, ExtendedChoice};
use dragon_framework::volumes::VolumeBinding;
use dragon_framework::{ApiError, Release};
use k8s_openapi::api::core::v1 as core;

use crate::group_status::Status;
use crate::key::ScaleTarget;

/// What an Event is about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Regarding {
    /// A pod, by `namespace/name`.
    Pod(String),
    /// A scheduler-plugins PodGroup, by `namespace/name`.
    PodGroup(String),
}

/// An Event to publish.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Note {
    pub regarding: Regarding,
    /// `Normal` or `Warning`.
    pub type_: &'static str,
    /// `Scheduled`, `FailedScheduling`, …
    pub reason: &'static str,
    pub note: String,
}

/// The `PodScheduled=False` condition on a pod Dragon did not place, as
/// kube-scheduler writes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unschedulable {
    /// `Unschedulable`, or `SchedulingGated` for a pod with gates.
    pub reason: &'static str,
    pub message: String,
}

/// The `resourceVersion` a write on a pod's status is made on: a pod
/// changed since (bound, perhaps) answers a conflict (409) instead of
/// being written. `None`: whatever it is now. A write answers the pod's
/// new version.
pub type Versioned<'a> = Option<&'a str>;

/// How far a claim's binding has got: a PersistentVolumeClaim's to its
/// volume, or a ResourceClaim's devices' binding conditions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClaimProgress {
    /// Bound to its volume, and the PV controller is done with it; or every
    /// binding condition of its devices holds.
    Bound,
    /// Not yet.
    Binding,
}

/// The requests of the scheduling loop. Implementations are shared by the
/// loop and the tasks it spawns (Events, PodGroup status), hence `Sync`.
/// The futures are boxed (`async_trait`): one allocation per request is
/// nothing beside its round trip, and a boxed future is `Send` wherever
/// the loop awaits it.
#[async_trait::async_trait]
pub trait ClusterIo: Send + Sync + 'static {
    /// Whether this replica may write now: it holds its Lease, or leader
    /// election is off (see [`crate::fence`]). The loop plans no round
    /// and no scale step while it may not.
    async fn leads(&self) -> bool {
        true
    }

    /// POST a Binding of `pod` to `node`.
    async fn bind(&self, pod: &str, node: &str) -> Result<(), ApiError>;

    /// `pod` as the API server has it now (a quorum read), or `None` when
    /// it is gone: what settles a Binding whose answer was lost or that
    /// was refused as already bound.
    async fn read_pod(&self, pod: &str) -> Result<Option<core::Pod>, ApiError>;

    /// Every pod of this scheduler bound to a node, as the API server has
    /// them now (a consistent list, not the watch cache's): what a replica
    /// reads before it schedules as leader, so that binds another replica
    /// made, which its watch has not delivered yet, are seen.
    async fn bound_pods(&self) -> Result<Vec<core::Pod>, ApiError>;

    /// Write the devices chosen for ResourceClaim `claim` (`status.allocation`)
    /// and reserve it for `pod` (`status.reservedFor`), as kube-scheduler's
    /// DynamicResources plugin does before the pod's Binding.
    async fn allocate(
        &self,
        claim: &str,
        allocation: &Allocation,
        pod: &str,
    ) -> Result<(), ApiError>;

    /// Create `pod`'s extended-resource claim (its extended resources
    /// served by the devices `choice` names, of the classes it names),
    /// allocated and reserved for it, and name it in the pod's
    /// `status.extendedResourceClaimStatus`, as kube-scheduler does for
    /// `DRAExtendedResource`.
    ///
    /// Returns the claim's key (`namespace/name`).
    async fn allocate_extended(
        &self,
        pod: &str,
        choice: &ExtendedChoice,
    ) -> Result<String, ApiError>;

    /// Take `pod` off ResourceClaim `claim`'s `status.reservedFor` after a
    /// bind that failed, and deallocate the claim if no other pod reserved
    /// it. A claim already given back, or gone, is left as it is.
    async fn unreserve(&self, claim: &str, pod: &str) -> Result<(), ApiError>;

    /// Delete the extended-resource claim `pod`'s status names, if any, as
    /// kube-scheduler does after a failed bind: its devices are chosen
    /// again on the next attempt.
    async fn drop_extended_claim(&self, pod: &str) -> Result<(), ApiError>;

    /// Whether the binding conditions of ResourceClaim `claim`'s devices
    /// all hold (the driver has attached them); an error naming the device
    /// when one of their failure conditions holds.
    async fn devices_progress(&self, claim: &str) -> Result<ClaimProgress, ApiError>;

    /// Bind PersistentVolumeClaim `claim` as chosen, as kube-scheduler's
    /// VolumeBinding plugin does before the Binding: the chosen volume's
    /// `spec.claimRef` set to the claim, or the claim's
    /// `volume.kubernetes.io/selected-node` set for its provisioner.
    async fn bind_volume(&self, claim: &str, binding: &VolumeBinding) -> Result<(), ApiError>;

    /// Whether `claim` is bound yet; an error when its binding can no
    /// longer complete (its provisioner gave up).
    async fn claim_progress(
        &self,
        claim: &str,
        binding: &VolumeBinding,
    ) -> Result<ClaimProgress, ApiError>;

    /// Undo the bind of a gang member whose siblings could not be bound.
    /// A bound pod cannot be unbound: it is deleted when a controller owns
    /// it (and makes a fresh pending copy), and otherwise kept
    /// ([`Release::Kept`]), since deleting it would lose it for good.
    async fn release(&self, pod: &str) -> Result<Release, ApiError>;

    /// Evict `pod` through the Eviction API, which refuses (429) an
    /// eviction a PodDisruptionBudget does not allow; with `dry_run`, only
    /// ask whether it would be allowed.
    async fn evict(&self, pod: &str, dry_run: bool) -> Result<(), ApiError>;

    /// The replicas of a job's `/scale` target (`GROUP/VERSION/PLURAL/NAME`
    /// in the job's namespace).
    async fn replicas(&self, job: &str, target: &ScaleTarget) -> Result<u32, ApiError>;

    /// Set the replicas of a job's `/scale` target.
    async fn scale(&self, job: &str, target: &ScaleTarget, replicas: u32) -> Result<(), ApiError>;

    /// Set `pod`'s `status.nominatedNodeName` to `node`, or clear it; on
    /// `version` only, when given (see [`Versioned`]).
    async fn nominate(
        &self,
        pod: &str,
        node: Option<&str>,
        version: Versioned<'_>,
    ) -> Result<Option<String>, ApiError>;

    /// Set `PodScheduled=False` on `pod`; on `version` only, when given.
    async fn pod_unschedulable(
        &self,
        pod: &str,
        condition: &Unschedulable,
        version: Versioned<'_>,
    ) -> Result<Option<String>, ApiError>;

    /// Set the `PodGroupInitiallyScheduled` condition of a
    /// `scheduling.k8s.io` PodGroup: True (reason `Scheduled`) or False
    /// (reason `Unschedulable`), with `message`.
    async fn group_condition(
        &self,
        group: &str,
        scheduled: bool,
        message: &str,
    ) -> Result<(), ApiError>;

    /// Publish an Event.
    async fn event(&self, note: &Note) -> Result<(), ApiError>;

    /// Merge the status of a scheduler-plugins PodGroup.
    async fn group_status(&self, group: &str, status: &Status) -> Result<(), ApiError>;
}

#[cfg(any(test, feature = "fake"))]
pub mod fake;
