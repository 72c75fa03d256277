//! Every request the scheduling loop makes of the API server, as one trait:
//! [`crate::kube_io::KubeIo`] sends them over a kube client, and the fake
//! in the tests records them, so the loop is tested without a server.
//! Each call is one request (or a read and a write for a release); what to
//! do with its answer is the loop's business.

use dragon_framework::devices::{Allocation, ExtendedChoice};
use dragon_framework::volumes::VolumeBinding;
use dragon_framework::{ApiError, Release};

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
    /// POST a Binding of `pod` to `node`.
    async fn bind(&self, pod: &str, node: &str) -> Result<(), ApiError>;

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

    /// Set `pod`'s `status.nominatedNodeName` to `node`, or clear it.
    async fn nominate(&self, pod: &str, node: Option<&str>) -> Result<(), ApiError>;

    /// Set `PodScheduled=False` on `pod`.
    async fn pod_unschedulable(&self, pod: &str, condition: &Unschedulable)
    -> Result<(), ApiError>;

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

#[cfg(test)]
pub mod fake {
    //! A cluster that records every request and answers as told.

    use std::collections::{BTreeMap, BTreeSet};
    use std::sync::Mutex;

    use dragon_framework::{ApiError, ApiErrorKind, Release};

    use super::{
        Allocation, ClaimProgress, ClusterIo, ExtendedChoice, Note, ScaleTarget, Unschedulable,
        VolumeBinding,
    };
    use crate::group_status::Status;

    /// A request the fake saw.
    #[derive(Debug, Clone, PartialEq)]
    pub enum Call {
        Bind {
            pod: String,
            node: String,
        },
        Release(String),
        Allocate {
            claim: String,
            pod: String,
        },
        AllocateExtended {
            pod: String,
            classes: Vec<String>,
            devices: usize,
        },
        Unreserve {
            claim: String,
            pod: String,
        },
        DropExtendedClaim {
            pod: String,
        },
        BindVolume {
            claim: String,
            binding: VolumeBinding,
        },
        Nominate {
            pod: String,
            node: Option<String>,
        },
        Evict {
            pod: String,
            dry_run: bool,
        },
        Replicas(String),
        Scale {
            job: String,
            replicas: u32,
        },
        Unschedulable {
            pod: String,
            reason: String,
            message: String,
        },
        GroupCondition {
            group: String,
            scheduled: bool,
        },
        Event(Note),
        GroupStatus(String),
    }

    /// The fake's state: what it saw, and how to answer.
    #[derive(Debug, Default)]
    pub struct State {
        pub calls: Vec<Call>,
        /// Pods whose Binding is refused, with the error.
        pub refuse_bind: BTreeMap<String, ApiError>,
        /// Claims whose allocation is refused, with the error.
        pub refuse_allocate: BTreeMap<String, ApiError>,
        /// PersistentVolumeClaims whose binding never completes (the
        /// others are bound as soon as asked).
        pub never_bound: BTreeSet<String>,
        /// Pods no controller owns: a release keeps them.
        pub uncontrolled: BTreeSet<String>,
        /// Pods a disruption budget protects: their eviction is refused.
        pub protected: BTreeSet<String>,
        /// Replicas of each `/scale` target.
        pub replicas: BTreeMap<String, u32>,
    }

    /// The fake cluster.
    #[derive(Debug, Default)]
    pub struct FakeCluster {
        pub state: Mutex<State>,
    }

    impl FakeCluster {
        /// What it saw, in order.
        pub fn calls(&self) -> Vec<Call> {
            self.lock().calls.clone()
        }

        /// Forget what it saw.
        pub fn clear(&self) {
            self.lock().calls.clear();
        }

        pub fn lock(&self) -> std::sync::MutexGuard<'_, State> {
            // A test that panicked holding it has failed already.
            self.state.lock().unwrap_or_else(|e| e.into_inner())
        }
    }

    #[async_trait::async_trait]
    impl ClusterIo for FakeCluster {
        async fn bind(&self, pod: &str, node: &str) -> Result<(), ApiError> {
            let mut s = self.lock();
            s.calls.push(Call::Bind {
                pod: pod.into(),
                node: node.into(),
            });
            match s.refuse_bind.get(pod) {
                Some(e) => Err(e.clone()),
                None => Ok(()),
            }
        }

        async fn allocate(
            &self,
            claim: &str,
            _allocation: &Allocation,
            pod: &str,
        ) -> Result<(), ApiError> {
            let mut s = self.lock();
            s.calls.push(Call::Allocate {
                claim: claim.into(),
                pod: pod.into(),
            });
            match s.refuse_allocate.get(claim) {
                Some(e) => Err(e.clone()),
                None => Ok(()),
            }
        }

        async fn allocate_extended(
            &self,
            pod: &str,
            choice: &ExtendedChoice,
        ) -> Result<String, ApiError> {
            self.lock().calls.push(Call::AllocateExtended {
                pod: pod.into(),
                classes: choice.classes.values().cloned().collect(),
                devices: choice.allocation.devices.len(),
            });
            Ok(format!("{pod}-extended-resources"))
        }

        async fn drop_extended_claim(&self, pod: &str) -> Result<(), ApiError> {
            self.lock()
                .calls
                .push(Call::DropExtendedClaim { pod: pod.into() });
            Ok(())
        }

        async fn unreserve(&self, claim: &str, pod: &str) -> Result<(), ApiError> {
            self.lock().calls.push(Call::Unreserve {
                claim: claim.into(),
                pod: pod.into(),
            });
            Ok(())
        }

        async fn devices_progress(&self, claim: &str) -> Result<ClaimProgress, ApiError> {
            Ok(match self.lock().never_bound.contains(claim) {
                true => ClaimProgress::Binding,
                false => ClaimProgress::Bound,
            })
        }

        async fn bind_volume(&self, claim: &str, binding: &VolumeBinding) -> Result<(), ApiError> {
            self.lock().calls.push(Call::BindVolume {
                claim: claim.into(),
                binding: binding.clone(),
            });
            Ok(())
        }

        async fn claim_progress(
            &self,
            claim: &str,
            _binding: &VolumeBinding,
        ) -> Result<ClaimProgress, ApiError> {
            Ok(match self.lock().never_bound.contains(claim) {
                true => ClaimProgress::Binding,
                false => ClaimProgress::Bound,
            })
        }

        async fn nominate(&self, pod: &str, node: Option<&str>) -> Result<(), ApiError> {
            self.lock().calls.push(Call::Nominate {
                pod: pod.into(),
                node: node.map(str::to_string),
            });
            Ok(())
        }

        async fn release(&self, pod: &str) -> Result<Release, ApiError> {
            let mut s = self.lock();
            s.calls.push(Call::Release(pod.into()));
            Ok(match s.uncontrolled.contains(pod) {
                true => Release::Kept,
                false => Release::Unbound,
            })
        }

        async fn evict(&self, pod: &str, dry_run: bool) -> Result<(), ApiError> {
            let mut s = self.lock();
            s.calls.push(Call::Evict {
                pod: pod.into(),
                dry_run,
            });
            match s.protected.contains(pod) {
                true => Err(ApiError::new(
                    ApiErrorKind::Refused,
                    format!(
                        "evicting {pod}: Cannot evict pod as it would violate the pod's disruption budget."
                    ),
                )),
                false => Ok(()),
            }
        }

        async fn replicas(&self, _job: &str, target: &ScaleTarget) -> Result<u32, ApiError> {
            let target = target.to_string();
            let target = target.as_str();
            let mut s = self.lock();
            s.calls.push(Call::Replicas(target.into()));
            s.replicas
                .get(target)
                .copied()
                .ok_or_else(|| ApiError::new(ApiErrorKind::NotFound, format!("{target} not found")))
        }

        async fn scale(
            &self,
            job: &str,
            target: &ScaleTarget,
            replicas: u32,
        ) -> Result<(), ApiError> {
            let target = target.to_string();
            let target = target.as_str();
            let mut s = self.lock();
            s.calls.push(Call::Scale {
                job: job.into(),
                replicas,
            });
            s.replicas.insert(target.into(), replicas);
            Ok(())
        }

        async fn pod_unschedulable(&self, pod: &str, c: &Unschedulable) -> Result<(), ApiError> {
            self.lock().calls.push(Call::Unschedulable {
                pod: pod.into(),
                reason: c.reason.into(),
                message: c.message.clone(),
            });
            Ok(())
        }

        async fn group_condition(
            &self,
            group: &str,
            scheduled: bool,
            _message: &str,
        ) -> Result<(), ApiError> {
            self.lock().calls.push(Call::GroupCondition {
                group: group.into(),
                scheduled,
            });
            Ok(())
        }

        async fn event(&self, note: &Note) -> Result<(), ApiError> {
            self.lock().calls.push(Call::Event(note.clone()));
            Ok(())
        }

        async fn group_status(&self, group: &str, _status: &Status) -> Result<(), ApiError> {
            self.lock().calls.push(Call::GroupStatus(group.into()));
            Ok(())
        }
    }
}
