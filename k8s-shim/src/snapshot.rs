//! Keeps the framework's snapshot equal to what the API server says.
//! Watch events go in, one at a time; nothing here talks to the API, so
//! tests feed it a `Vec` of events.

use std::collections::{BTreeMap, BTreeSet};

use dragon_framework::{
    Cluster, ClusterOp, NodeSelector, Pod, PodState, Scheduler, SchedulerConfig,
};
use k8s_openapi::api::core::v1 as core;
use k8s_openapi::api::policy::v1 as policy;
use k8s_openapi::api::resource::v1 as resource;
use k8s_openapi::api::storage::v1 as storage;

use crate::group_status::{GroupStatuses, PodPhase};
use crate::translate::volumes::ClaimSeen;
use crate::translate::{self, PodGroupSpec, TranslateError};
use dragon_framework::{JobKey, NodeName, PodKey};

mod deferred;
mod groups;
mod volumes;

use deferred::{Awaited, Deferred};

/// A PodGroup as the shim needs it.
#[derive(Debug, Clone)]
pub struct PodGroup {
    /// `namespace/name`.
    pub key: String,
    /// The checked spec, or why it cannot be used.
    pub spec: Result<PodGroupSpec, TranslateError>,
    pub annotations: BTreeMap<String, String>,
    pub created_ms: u64,
    /// Which API the PodGroup comes from.
    pub api: GroupApi,
    /// The group's own priority (a `scheduling.k8s.io` PodGroup's).
    pub priority: Option<i32>,
}

/// Why a pending pod waits for its volumes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VolumeWait {
    #[error("persistentvolumeclaim {0:?} not found")]
    NoClaim(String),
    #[error(
        "persistentvolumeclaim {0:?} is not bound, and its storage class is not known or binds it without waiting for a pod"
    )]
    Unbound(String),
    #[error("persistentvolumeclaim {claim:?} is being provisioned on node {node:?}")]
    Provisioning { claim: String, node: String },
    #[error(
        "persistentvolumeclaim {claim:?} is bound to persistentvolume {volume:?}, which is not found"
    )]
    NoVolume { claim: String, volume: String },
    #[error("{0}")]
    Unreadable(TranslateError),
}

/// What a watch lists, for [`Snapshot::vanished`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Listed {
    Nodes,
    Pods,
    Groups(GroupApi),
    Budgets,
    /// ResourceSlices, DeviceClasses, ResourceClaims.
    Devices(DeviceKind),
    /// PersistentVolumeClaims, PersistentVolumes, StorageClasses.
    Storage(StorageKind),
}

/// The kinds of storage objects the snapshot holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StorageKind {
    Claim,
    Volume,
    Class,
    CsiNode,
    CsiDriver,
    Capacity,
    Attachment,
}

/// The kinds of `resource.k8s.io` objects the snapshot holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeviceKind {
    Slice,
    Class,
    Claim,
    TaintRule,
}

/// The two PodGroup APIs a gang can come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupApi {
    /// scheduler-plugins' `scheduling.x-k8s.io/v1alpha1`, named by the
    /// `scheduling.x-k8s.io/pod-group` label.
    SchedulerPlugins,
    /// Kubernetes' `scheduling.k8s.io/v1beta1`, named by
    /// `spec.schedulingGroup.podGroupName`.
    Native,
    /// No object: Kueue's plain-pod group, named by its pods'
    /// `kueue.x-k8s.io/pod-group-name` label and sized by their
    /// `kueue.x-k8s.io/pod-group-total-count` annotation. It lives as long
    /// as one of its pods does.
    KueuePods,
}

/// One change seen on the API server.
#[derive(Debug, Clone)]
pub enum Event {
    Node(Box<core::Node>),
    NodeGone(String),
    Pod(Box<core::Pod>),
    PodGone(String),
    Group(PodGroup),
    GroupGone(String),
    /// A PersistentVolumeClaim (`namespace/name` when gone).
    Claim(Box<core::PersistentVolumeClaim>),
    ClaimGone(String),
    Volume(Box<core::PersistentVolume>),
    VolumeGone(String),
    StorageClass(Box<storage::StorageClass>),
    StorageClassGone(String),
    /// A node's CSI drivers and how many volumes each may attach.
    CsiNode(Box<storage::CSINode>),
    CsiNodeGone(String),
    CsiDriver(Box<storage::CSIDriver>),
    CsiDriverGone(String),
    StorageCapacity(Box<storage::CSIStorageCapacity>),
    StorageCapacityGone(String),
    VolumeAttachment(Box<storage::VolumeAttachment>),
    VolumeAttachmentGone(String),
    /// A PodDisruptionBudget: what preemption may evict.
    Budget(Box<policy::PodDisruptionBudget>),
    BudgetGone(String),
    /// Devices a driver publishes (by name).
    ResourceSlice(Box<resource::ResourceSlice>),
    ResourceSliceGone(String),
    DeviceTaintRule(Box<resource::DeviceTaintRule>),
    DeviceTaintRuleGone(String),
    DeviceClass(Box<resource::DeviceClass>),
    DeviceClassGone(String),
    /// A ResourceClaim (`namespace/name` when gone).
    ResourceClaim(Box<resource::ResourceClaim>),
    ResourceClaimGone(String),
}

/// The framework state plus what is needed to rebuild jobs from pods.
pub struct Snapshot {
    /// The framework the rounds run on.
    pub sched: Scheduler,
    scheduler_name: String,
    groups: BTreeMap<String, PodGroup>,
    /// Workers wanted per job when known from the workload's `/scale`
    /// (or our own scaling), else the worker pods that exist.
    pub desired: BTreeMap<JobKey, u32>,
    /// Pods waiting for their node or PodGroup to be seen.
    deferred: Deferred,
    /// Pods that could not be translated, with the reason (shown in events).
    pub invalid: BTreeMap<String, String>,
    /// The `resourceVersion` of each pending pod of ours as last seen: why
    /// it waits is written on that version only, never on a pod bound since.
    pub versions: BTreeMap<PodKey, String>,
    /// Pods bound to a node that was deleted, with that node: the API still
    /// has them bound (until PodGC deletes them), so they are neither
    /// pending nor using a live node. Back in the framework if the node
    /// returns.
    orphans: BTreeMap<String, (Pod, String)>,
    /// Bound gang pods of ours seen before their PodGroup, by key, with
    /// their job: counted as usage at once, made members of the job when
    /// the PodGroup is seen (a restarted scheduler lists pods and PodGroups
    /// in no particular order).
    ungrouped: BTreeMap<String, String>,
    /// Claims by `namespace/name`: the volume each is bound to, and what
    /// binding one needs.
    claims: BTreeMap<String, ClaimSeen>,
    /// StorageClasses by name: whether each waits for the first consumer.
    classes: BTreeMap<String, bool>,
    /// Pending pods of ours in the framework with claims it binds: applied
    /// again when those claims change (bound, provisioning, gone).
    binding_pods: BTreeMap<String, core::Pod>,
    /// Volumes by name, with their node affinity (or why it cannot be
    /// evaluated).
    volumes: BTreeMap<String, Result<Option<NodeSelector>, TranslateError>>,
    /// Pending pods of ours whose claims are missing, unbound or on a
    /// volume not seen: tried again when a claim or volume changes.
    awaiting_volumes: BTreeMap<String, core::Pod>,
    /// The pods of every PodGroup and their phases, for its status.
    pub statuses: GroupStatuses,
    /// The queue each mapped namespace's PodGroups belong to.
    queue_of_namespace: BTreeMap<String, dragon_framework::QueueName>,
}

fn node_name(p: &core::Pod) -> Option<&str> {
    p.spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .filter(|n| !n.is_empty())
}

impl Snapshot {
    /// An empty snapshot for pods with `spec.schedulerName == scheduler_name`.
    pub fn new(scheduler_name: &str, config: SchedulerConfig) -> Snapshot {
        Snapshot {
            sched: Scheduler::new(Cluster::new(), config),
            scheduler_name: scheduler_name.to_string(),
            groups: BTreeMap::new(),
            desired: BTreeMap::new(),
            deferred: Deferred::default(),
            invalid: BTreeMap::new(),
            versions: BTreeMap::new(),
            orphans: BTreeMap::new(),
            ungrouped: BTreeMap::new(),
            claims: BTreeMap::new(),
            classes: BTreeMap::new(),
            binding_pods: BTreeMap::new(),
            volumes: BTreeMap::new(),
            awaiting_volumes: BTreeMap::new(),
            statuses: GroupStatuses::default(),
            queue_of_namespace: BTreeMap::new(),
        }
    }

    /// The queues (teams) PodGroups belong to, by their namespace.
    ///
    /// # Errors
    /// The framework refuses the queues (see `dragon_framework::QueuesError`).
    pub fn set_queues(
        &mut self,
        specs: Vec<dragon_framework::QueueSpec>,
        namespaces: BTreeMap<String, dragon_framework::QueueName>,
    ) -> Result<(), dragon_framework::ClusterError> {
        self.sched
            .apply(dragon_framework::ClusterOp::SetQueues(specs))?;
        self.queue_of_namespace = namespaces;
        Ok(())
    }

    /// Whether `p` is a pod this scheduler places.
    pub fn is_ours(&self, p: &core::Pod) -> bool {
        p.spec.as_ref().and_then(|s| s.scheduler_name.as_deref())
            == Some(self.scheduler_name.as_str())
    }

    /// Why pod `key`, known to the snapshot, is not yet in the framework:
    /// what it waits to see, or why it was refused.
    pub fn held_back(&self, key: &str) -> Option<String> {
        if let Some(reason) = self.invalid.get(key) {
            return Some(format!("cannot be scheduled: {reason}"));
        }
        if let Some(on) = self.deferred.by_pod.get(key) {
            return Some(match on {
                Awaited::Node(node) => format!("bound to node {node}, not seen yet"),
                Awaited::Group(group) => {
                    format!("waiting for its PodGroup {group} to be seen")
                }
            });
        }
        self.awaiting_volumes.contains_key(key).then(|| {
            "waiting for its PersistentVolumeClaims (missing, unbound, or on a volume not seen)"
                .to_string()
        })
    }

    /// The PodGroup of a job, if seen.
    pub fn group(&self, job: &str) -> Option<&PodGroup> {
        self.groups.get(job)
    }

    /// What a fresh list of `kind` no longer has (`listed`: the keys it
    /// has): the events that forget it, for a relist after a watch gap.
    /// Pods are looked for wherever the snapshot keeps one (in the
    /// framework, waiting for a node, PodGroup or volume, set aside with a
    /// deleted node, or refused); PodGroups by the API they came from.
    /// Claims and volumes are relisted in full; one left over only answers
    /// for a pod naming something that no longer exists.
    pub fn vanished(&self, kind: Listed, listed: &BTreeSet<String>) -> Vec<Event> {
        let gone = |key: &str| !listed.contains(key);
        match kind {
            Listed::Nodes => {
                let c = self.sched.cluster();
                c.nodes()
                    .iter()
                    .enumerate()
                    .filter(|(i, n)| c.is_live(*i) && gone(&n.name))
                    .map(|(_, n)| Event::NodeGone(n.name.clone().into()))
                    .collect()
            }
            Listed::Pods => {
                let held: BTreeSet<&str> = self
                    .sched
                    .cluster()
                    .pods()
                    .map(|(p, _)| p.key.as_str())
                    .chain(self.deferred.by_pod.keys().map(String::as_str))
                    .chain(self.awaiting_volumes.keys().map(String::as_str))
                    .chain(self.orphans.keys().map(String::as_str))
                    .chain(self.invalid.keys().map(String::as_str))
                    .collect();
                held.into_iter()
                    .filter(|k| gone(k))
                    .map(|k| Event::PodGone(k.to_string()))
                    .collect()
            }
            Listed::Groups(api) => self
                .groups
                .iter()
                .filter(|(k, g)| g.api == api && gone(k))
                .map(|(k, _)| Event::GroupGone(k.clone()))
                .collect(),
            Listed::Budgets => self
                .sched
                .cluster()
                .budgets()
                .filter(|(k, _)| !listed.contains(*k))
                .map(|(k, _)| Event::BudgetGone(k.to_string()))
                .collect(),
            Listed::Devices(kind) => {
                let devices = self.sched.cluster().devices();
                let (names, gone_event): (Vec<&str>, fn(String) -> Event) = match kind {
                    DeviceKind::Slice => {
                        (devices.slice_names().collect(), Event::ResourceSliceGone)
                    }
                    DeviceKind::Class => (devices.class_names().collect(), Event::DeviceClassGone),
                    DeviceKind::Claim => (devices.claim_keys().collect(), Event::ResourceClaimGone),
                    DeviceKind::TaintRule => (
                        devices.taint_rule_names().collect(),
                        Event::DeviceTaintRuleGone,
                    ),
                };
                names
                    .into_iter()
                    .filter(|k| !listed.contains(*k))
                    .map(|k| gone_event(k.to_string()))
                    .collect()
            }
            Listed::Storage(kind) => self.vanished_storage(kind, listed),
        }
    }

    /// Pending pods of ours the framework will try.
    pub fn pending(&self) -> usize {
        self.sched
            .cluster()
            .pods()
            .filter(|(_, s)| *s == PodState::Pending)
            .count()
    }

    /// Apply one event.
    pub fn apply(&mut self, event: Event) {
        match event {
            Event::Node(n) => match translate::node(&n) {
                Ok(node) => {
                    let name = node.name.clone();
                    let op = match self.sched.cluster().node_by_name(&name) {
                        Some(_) => ClusterOp::UpdateNode(node),
                        None => ClusterOp::AddNode(node),
                    };
                    let res = self.sched.apply(op);
                    if let Err(e) = res {
                        tracing::warn!(node = %name, "ignoring node: {e}");
                    }
                    self.readopt_orphans(&name);
                    self.retry_deferred(&Awaited::Node(name.into()));
                }
                Err(e) => tracing::warn!("ignoring node: {e}"),
            },
            Event::NodeGone(name) => self.remove_node(&name),
            Event::Pod(p) => self.apply_pod(*p),
            Event::PodGone(key) => {
                self.statuses.forget(&key);
                self.drop_pod(&key);
            }
            Event::Group(g) => {
                let key = g.key.clone();
                self.groups.insert(key.clone(), g);
                self.statuses.touch(&key);
                self.refresh_job(&key);
                self.adopt_ungrouped(&key);
                self.retry_deferred(&Awaited::Group(key));
            }
            Event::GroupGone(key) => {
                self.groups.remove(&key);
                self.statuses.remove_group(&key);
                if self.sched.cluster().job_pods(&key).next().is_none() {
                    self.change(ClusterOp::RemoveJob(key.into()));
                }
            }
            Event::Claim(pvc) => self.claim_changed(&pvc),
            Event::ClaimGone(key) => self.claim_gone(&key),
            Event::Volume(pv) => self.volume_changed(&pv),
            Event::VolumeGone(name) => self.volume_gone(&name),
            Event::StorageClass(sc) => self.class_changed(&sc),
            Event::StorageClassGone(name) => self.class_gone(&name),
            Event::CsiNode(node) => {
                let (node, limits) = translate::volumes::volume_limits(&node);
                self.change(ClusterOp::SetVolumeLimits {
                    node: node.into(),
                    limits,
                });
            }
            Event::CsiNodeGone(node) => self.change(ClusterOp::SetVolumeLimits {
                node: node.into(),
                limits: Default::default(),
            }),
            Event::CsiDriver(d) => {
                let (name, storage_capacity) = translate::volumes::csi_driver(&d);
                self.change(ClusterOp::SetCsiDriver {
                    name,
                    storage_capacity,
                });
            }
            Event::CsiDriverGone(name) => self.change(ClusterOp::SetCsiDriver {
                name,
                storage_capacity: false,
            }),
            Event::StorageCapacity(c) => self.change(ClusterOp::SetStorageCapacity(
                translate::volumes::storage_capacity(&c),
            )),
            Event::StorageCapacityGone(key) => self.change(ClusterOp::RemoveStorageCapacity(key)),
            Event::VolumeAttachment(a) => match translate::volumes::volume_attachment(&a) {
                Some(a) => self.change(ClusterOp::SetVolumeAttachment(a)),
                None => self.change(ClusterOp::RemoveVolumeAttachment(
                    a.metadata.name.clone().unwrap_or_default(),
                )),
            },
            Event::VolumeAttachmentGone(name) => {
                self.change(ClusterOp::RemoveVolumeAttachment(name))
            }
            Event::Budget(pdb) => {
                let key = crate::key::key_of(pdb.as_ref());
                let (budget, problem) = translate::disruption_budget(&pdb);
                if let Some(e) = problem {
                    tracing::warn!("{e}; preemption evicts none of its namespace's pods");
                }
                self.change(match budget {
                    Some(budget) => ClusterOp::SetBudget { name: key, budget },
                    None => ClusterOp::RemoveBudget(key),
                });
            }
            Event::BudgetGone(key) => self.change(ClusterOp::RemoveBudget(key)),
            Event::ResourceSlice(s) => match translate::devices::resource_slice(&s) {
                Ok((name, slice)) => self.change(ClusterOp::SetResourceSlice { name, slice }),
                Err(e) => {
                    // Its devices are not offered, as a pool kube-scheduler
                    // finds invalid.
                    tracing::warn!("ignoring the slice's devices: {e}");
                    self.change(ClusterOp::RemoveResourceSlice(
                        s.metadata.name.clone().unwrap_or_default(),
                    ));
                }
            },
            Event::ResourceSliceGone(name) => self.change(ClusterOp::RemoveResourceSlice(name)),
            Event::DeviceClass(c) => self.change(ClusterOp::SetDeviceClass(
                translate::devices::device_class(&c),
            )),
            Event::DeviceClassGone(name) => self.change(ClusterOp::RemoveDeviceClass(name)),
            Event::ResourceClaim(c) => {
                self.change(ClusterOp::SetClaim(translate::devices::claim(&c)))
            }
            Event::ResourceClaimGone(key) => self.change(ClusterOp::RemoveClaim(key)),
            Event::DeviceTaintRule(r) => match translate::devices::taint_rule(&r) {
                Some(rule) => self.change(ClusterOp::SetDeviceTaintRule(rule)),
                None => self.change(ClusterOp::RemoveDeviceTaintRule(
                    r.metadata.name.clone().unwrap_or_default(),
                )),
            },
            Event::DeviceTaintRuleGone(name) => self.change(ClusterOp::RemoveDeviceTaintRule(name)),
        }
    }

    /// A pod leaves the framework (deleted, or finished: a finished pod
    /// still counts in its PodGroup's status).
    fn drop_pod(&mut self, key: &str) {
        self.versions.remove(key);
        self.deferred.remove(key);
        self.awaiting_volumes.remove(key);
        self.binding_pods.remove(key);
        self.invalid.remove(key);
        self.orphans.remove(key);
        self.ungrouped.remove(key);
        if let Ok(pod) = self.sched.remove_pod(key)
            && let Some(job) = pod.job
        {
            let last = self.sched.cluster().job_pods(&job).next().is_none();
            if last && self.groups.get(job.as_str()).map(|g| g.api) == Some(GroupApi::KueuePods) {
                // A Kueue pod group is its pods: the last one took it along.
                self.groups.remove(job.as_str());
                self.change(ClusterOp::RemoveJob(job));
                return;
            }
            self.refresh_job(&job);
        }
    }

    /// A node is gone. The framework frees its reservations (they become
    /// pending again), but the pods *bound* to it stay bound in the API
    /// until PodGC deletes them: binding them again can only fail ("already
    /// assigned"), and for a gang member that failure releases the members
    /// bound with it. So they leave the framework until the node returns or
    /// they are deleted.
    fn remove_node(&mut self, name: &str) {
        let Some(i) = self.sched.cluster().node_by_name(name) else {
            return;
        };
        let bound: Vec<PodKey> = self
            .sched
            .cluster()
            .pods()
            .filter(|(_, s)| *s == PodState::Bound(i))
            .map(|(p, _)| p.key.clone())
            .collect();
        self.change(ClusterOp::RemoveNode(name.into()));
        for key in bound {
            if let Ok(pod) = self.sched.remove_pod(&key) {
                let job = pod.job.clone();
                self.orphans
                    .insert(key.into_string(), (pod, name.to_string()));
                if let Some(job) = job {
                    self.refresh_job(&job);
                }
            }
        }
    }

    /// Node `name` is back: the pods still bound to it count again.
    fn readopt_orphans(&mut self, name: &str) {
        let keys: Vec<String> = self
            .orphans
            .iter()
            .filter(|(_, (_, n))| n == name)
            .map(|(k, _)| k.clone())
            .collect();
        for key in keys {
            let Some((pod, node)) = self.orphans.remove(&key) else {
                continue;
            };
            let job = pod.job.clone();
            if let Err(e) = self.sched.apply(ClusterOp::AddPod {
                pod,
                node: Some(node.into()),
            }) {
                tracing::warn!(pod = %key, "ignoring pod: {e}");
            } else if let Some(job) = job {
                self.refresh_job(&job);
            }
        }
    }

    /// Apply again the pods that waited for what just arrived.
    fn retry_deferred(&mut self, arrived: &Awaited) {
        for p in self.deferred.take(arrived) {
            self.apply_pod(p);
        }
    }

    fn apply_pod(&mut self, p: core::Pod) {
        let key = translate::pod_key(&p);
        // The API object supersedes the copy kept when its node went.
        self.orphans.remove(&key);
        let ours = self.is_ours(&p);
        if let Some(group) = translate::pod_group(&p) {
            let phase = PodPhase::from_api(p.status.as_ref().and_then(|s| s.phase.as_deref()));
            self.statuses.observe(&group, &key, phase, ours);
        }
        if translate::is_terminated(&p) {
            self.drop_pod(&key);
            return;
        }
        let bound_to = node_name(&p).map(str::to_string);
        match (&bound_to, ours, p.metadata.resource_version.as_ref()) {
            (None, true, Some(v)) => self.versions.insert(key.as_str().into(), v.clone()),
            _ => self.versions.remove(key.as_str()),
        };
        if bound_to.is_none() && !ours {
            // Another scheduler's pending pod uses nothing yet.
            return;
        }
        let mut pod = match translate::pod(&p) {
            Ok(pod) => pod,
            Err(e) => {
                tracing::warn!("{e}");
                self.invalid.insert(key, e.message);
                return;
            }
        };
        match translate::pod_constraints(&p) {
            Ok(constraints) => pod.constraints = constraints,
            Err(e) if bound_to.is_none() => {
                tracing::warn!("{e}");
                self.invalid.insert(key, e.message);
                return;
            }
            // Bound already: its usage counts; what its own constraints ask
            // of pods placed later cannot be honoured.
            Err(e) => tracing::warn!("{e}; its constraints on other pods are not evaluated"),
        }
        match translate::topology::of_pod(&p) {
            Ok(topology) => pod.gang_topology = topology,
            Err(e) if bound_to.is_none() => {
                tracing::warn!("{e}");
                self.invalid.insert(key, e.message);
                return;
            }
            // Bound already: its usage counts; what it asks of its gang's
            // placement is past.
            Err(e) => tracing::warn!("{e}; ignored for a bound pod"),
        }
        match translate::devices::device_claims(&p) {
            Ok(claims) => pod.claims = claims,
            // Its claims are not created yet: kube-scheduler does not try it
            // either.
            Err(e) if bound_to.is_none() => {
                self.invalid.insert(key, e.to_string());
                return;
            }
            Err(_) => {}
        }
        if bound_to.is_some() {
            pod.volumes.claims = translate::pod_claim_keys(&p);
            pod.volumes.inline = translate::migration::migrated_inline(&p);
            pod.volumes.disks = translate::volumes::inline_disks(&p);
        } else {
            match self.pod_volumes(&p) {
                Ok((affinity, volumes)) => {
                    pod.constraints.volume_node_affinity = affinity;
                    pod.volumes = volumes;
                }
                Err(reason) => {
                    // Not tried until its volumes are known (and out of the
                    // framework if it was there).
                    if self.sched.cluster().pod(&key).map(|(_, s)| s) == Some(PodState::Pending)
                        && let Ok(Pod { job: Some(job), .. }) = self.sched.remove_pod(&key)
                    {
                        self.refresh_job(&job);
                    }
                    self.invalid.insert(key.clone(), reason.to_string());
                    self.awaiting_volumes.insert(key, p);
                    return;
                }
            }
        }
        self.invalid.remove(&key);
        self.awaiting_volumes.remove(&key);
        match bound_to.is_none() && ours && !pod.volumes.unbound.is_empty() {
            true => self.binding_pods.insert(key.clone(), p.clone()),
            false => self.binding_pods.remove(&key),
        };
        if let Some(node) = &bound_to
            && self.sched.cluster().node_by_name(node).is_none()
        {
            self.deferred.insert(key, Awaited::Node(node.clone()), p);
            return;
        }
        // Gang pods wait for their PodGroup; another scheduler's pods only
        // count as usage.
        if let Some(job) = pod.job.clone() {
            if ours && translate::kueue_pod_group(&p).as_deref() == Some(job.as_str()) {
                self.kueue_group(&p, &job);
            }
            if !ours {
                pod.job = None;
            } else if !self.groups.contains_key(job.as_str()) {
                if bound_to.is_some() {
                    // Usage now; a member once its PodGroup is seen.
                    pod.job = None;
                    self.ungrouped.insert(key.clone(), job.into());
                } else {
                    self.deferred.insert(key, Awaited::Group(job.into()), p);
                    return;
                }
            }
        }
        let job = pod.job.clone();
        match self.sched.cluster().pod(&key).map(|(_, s)| s) {
            None => {
                if let Some(job) = &job {
                    // Make sure the job exists before its first pod.
                    self.refresh_job(job);
                }
                let op = ClusterOp::AddPod {
                    pod,
                    node: bound_to.map(NodeName::from),
                };
                if let Err(e) = self.sched.apply(op) {
                    tracing::warn!(pod = %key, "ignoring pod: {e}");
                    return;
                }
            }
            Some(state) => {
                if let Some(node) = bound_to {
                    let idx = self.sched.cluster().node_by_name(&node);
                    let op = ClusterOp::ObserveBound {
                        pod: key.clone().into(),
                        node: node.into(),
                    };
                    if state != PodState::Bound(idx.unwrap_or(usize::MAX))
                        && let Err(e) = self.sched.apply(op)
                    {
                        tracing::warn!(pod = %key, "{e}");
                    }
                } else {
                    // Unbound in the API: keep our own state (it may be
                    // reserved while its gang waits in permit), but follow
                    // its gates.
                    self.change(ClusterOp::SetGates {
                        pod: key.clone().into(),
                        gates: pod.scheduling_gates,
                    });
                }
                self.change(ClusterOp::SetLabels {
                    pod: key.clone().into(),
                    labels: pod.labels,
                });
            }
        }
        if let Some(job) = job {
            self.refresh_job(&job);
        }
    }

    /// A change that cannot be refused (the op names nothing that must
    /// exist).
    fn change(&mut self, op: ClusterOp) {
        if let Err(e) = self.sched.apply(op) {
            tracing::warn!("{e}");
        }
    }
}

#[cfg(test)]
mod tests;
