//! A cluster that records every request and answers as told: the loop
//! tested without an API server (in this crate, and with the `fake`
//! feature in integration tests).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use dragon_framework::{ApiError, ApiErrorKind, Release};
use k8s_openapi::api::core::v1 as core;

use super::{
    Allocation, ClaimProgress, ClusterIo, ExtendedChoice, Note, ScaleTarget, Unschedulable,
    Versioned, VolumeBinding,
};
use std::time::Duration;

use dragon_framework::SchedulerConfig;
use dragon_runtime::{ComponentCache, LoadOptions, PolicyEngine, PolicySlot, WasmPolicy};

use crate::group_status::Status;
use crate::metrics::Metrics;
use crate::scheduling::{Kind, Loop, Msg, Parts};
use crate::snapshot::Snapshot;
use crate::taps::Taps;

/// A request the fake saw.
#[derive(Debug, Clone, PartialEq)]
pub enum Call {
    Bind {
        pod: String,
        node: String,
    },
    Release(String),
    ReadPod(String),
    BoundPods,
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
    /// The API server's copy of the pods a test put here: a Binding
    /// answered with success sets its node, and reads answer from it.
    pub pods: BTreeMap<String, core::Pod>,
    /// Pods whose Binding lands but whose answer is lost (a broken
    /// connection): the pod is bound, the caller told `Unavailable`.
    pub lost_answers: BTreeSet<String>,
    /// When set, reads of pods fail with it (the API server away).
    pub refuse_reads: Option<ApiError>,
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
    /// Pods whose Events are refused (the API server away).
    pub refuse_events: BTreeSet<String>,
    /// Each pod's `resourceVersion` once known (set by a test, or made
    /// by a status write): a write on another version answers a conflict.
    pub versions: BTreeMap<String, String>,
    /// When set, every Event and pod condition waits for a permit of its
    /// own before it is answered: the API server slow to answer what the
    /// loop tells.
    pub tell_gate: Option<Arc<tokio::sync::Semaphore>>,
}

impl State {
    /// A status write on `pod` made on `version`: refused when the pod
    /// is at another version, else answered with its next version (`w`
    /// and the number of calls so far, this one included).
    fn write_status(
        &mut self,
        pod: &str,
        version: Versioned<'_>,
    ) -> Result<Option<String>, ApiError> {
        if let (Some(asked), Some(now)) = (version, self.versions.get(pod))
            && asked != now
        {
            return Err(ApiError::new(
                ApiErrorKind::Conflict,
                format!("{pod} has been modified"),
            ));
        }
        let made = format!("w{}", self.calls.len());
        self.versions.insert(pod.to_string(), made.clone());
        Ok(Some(made))
    }
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

    /// Wait at the tell gate, if one is set.
    async fn gate(&self) {
        let gate = self.lock().tell_gate.clone();
        if let Some(gate) = gate {
            // Closed only by a test that wants every tell let through.
            let _permit = gate.acquire_owned().await;
        }
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
        if let Some(e) = s.refuse_bind.get(pod) {
            return Err(e.clone());
        }
        if let Some(spec) = s.pods.get_mut(pod).and_then(|p| p.spec.as_mut()) {
            spec.node_name = Some(node.into());
        }
        match s.lost_answers.contains(pod) {
            true => Err(ApiError::new(
                ApiErrorKind::Unavailable,
                format!("binding {pod} to {node}: connection closed before the answer"),
            )),
            false => Ok(()),
        }
    }

    async fn read_pod(&self, pod: &str) -> Result<Option<core::Pod>, ApiError> {
        let mut s = self.lock();
        s.calls.push(Call::ReadPod(pod.into()));
        match &s.refuse_reads {
            Some(e) => Err(e.clone()),
            None => Ok(s.pods.get(pod).cloned()),
        }
    }

    async fn bound_pods(&self) -> Result<Vec<core::Pod>, ApiError> {
        let mut s = self.lock();
        s.calls.push(Call::BoundPods);
        if let Some(e) = &s.refuse_reads {
            return Err(e.clone());
        }
        let bound = |p: &&core::Pod| p.spec.as_ref().is_some_and(|s| s.node_name.is_some());
        Ok(s.pods.values().filter(bound).cloned().collect())
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

    async fn nominate(
        &self,
        pod: &str,
        node: Option<&str>,
        version: Versioned<'_>,
    ) -> Result<Option<String>, ApiError> {
        let mut s = self.lock();
        s.calls.push(Call::Nominate {
            pod: pod.into(),
            node: node.map(str::to_string),
        });
        s.write_status(pod, version)
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

    async fn scale(&self, job: &str, target: &ScaleTarget, replicas: u32) -> Result<(), ApiError> {
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

    async fn pod_unschedulable(
        &self,
        pod: &str,
        c: &Unschedulable,
        version: Versioned<'_>,
    ) -> Result<Option<String>, ApiError> {
        self.gate().await;
        let mut s = self.lock();
        s.calls.push(Call::Unschedulable {
            pod: pod.into(),
            reason: c.reason.into(),
            message: c.message.clone(),
        });
        s.write_status(pod, version)
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
        self.gate().await;
        let mut s = self.lock();
        s.calls.push(Call::Event(note.clone()));
        match &note.regarding {
            super::Regarding::Pod(pod) if s.refuse_events.contains(pod) => Err(ApiError::new(
                ApiErrorKind::Unavailable,
                format!("event about {pod} refused"),
            )),
            _ => Ok(()),
        }
    }

    async fn group_status(&self, group: &str, _status: &Status) -> Result<(), ApiError> {
        self.lock().calls.push(Call::GroupStatus(group.into()));
        Ok(())
    }
}

/// A leading loop over `fake` for pods of `scheduler`, with the policy
/// component `bytes` (named `name`), every kind listed (empty) and no
/// backoff: where the loop's tests start.
///
/// # Panics
/// `bytes` is not a policy component.
pub fn listed_loop(
    fake: &Arc<FakeCluster>,
    scheduler: &str,
    name: &str,
    bytes: &[u8],
) -> Loop<FakeCluster> {
    let engine = PolicyEngine::new().expect("a wasm engine");
    let cache = ComponentCache::disabled();
    let policy = WasmPolicy::from_bytes(&engine, &cache, name, bytes, &LoadOptions::default())
        .expect("a policy component");
    let mut l = Loop::new(Parts {
        snapshot: Snapshot::new(scheduler, SchedulerConfig::without_backoff()),
        slot: Arc::new(PolicySlot::new(engine, cache, policy)),
        fallback: None,
        io: fake.clone(),
        metrics: Arc::new(Metrics::new()),
        bind_concurrency: 4,
        volume_bind_timeout: Duration::from_millis(300),
        scale_interval: Duration::from_secs(3600),
        leading: true,
        unlisted: BTreeSet::new(),
        taps: Taps::default(),
        estimates: crate::insight::EstimateConfig::default(),
    });
    for kind in Kind::ALL {
        l.handle(Msg::Listed {
            kind,
            keys: BTreeSet::new(),
        });
    }
    l
}
