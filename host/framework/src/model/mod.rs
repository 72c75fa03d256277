//! The framework's view of nodes, pods and jobs, and the terms a pod
//! carries (constraints, topology, volumes): plain data, no cluster.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::names::{JobKey, NodeName, PodKey, QueueName};
use crate::selector::{LabelSelector, Labels};
use dragon_runtime::wit;

mod constraints;
mod speedup;
mod topology;
mod volumes;

pub use constraints::{
    ALL_HOST_IPS, Constraints, HostPort, PodAffinityTerm, PreferredTerm, SpreadConstraint,
    WeightedPodAffinityTerm,
};
pub use speedup::{BadSpeedup, MAX_SPEEDUP_ENTRIES, Speedup};
pub use topology::{TopologyConstraint, TopologyMode};
pub use volumes::{CsiVolume, InlineDisk, PodVolumes};

/// Amounts of every resource other than CPU, memory and `nvidia.com/gpu`,
/// by Kubernetes resource name, in the resource's base unit (bytes for
/// `ephemeral-storage` and `hugepages-*`, a count for extended resources
/// such as `rdma/hca` or `amd.com/gpu`).
pub type Scalars = BTreeMap<String, u64>;

/// An amount of resources, in the units the WIT interface uses.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Resources {
    /// CPU, millicores.
    #[serde(default)]
    pub cpu_milli: u64,
    /// Memory, MiB.
    #[serde(default)]
    pub memory_mib: u64,
    /// GPUs.
    #[serde(default)]
    pub gpus: u32,
}

impl Resources {
    /// Sum.
    pub fn plus(self, o: Resources) -> Resources {
        Resources {
            cpu_milli: self.cpu_milli.saturating_add(o.cpu_milli),
            memory_mib: self.memory_mib.saturating_add(o.memory_mib),
            gpus: self.gpus.saturating_add(o.gpus),
        }
    }

    /// `k` times as much, saturating.
    pub fn times(self, k: u32) -> Resources {
        Resources {
            cpu_milli: self.cpu_milli.saturating_mul(u64::from(k)),
            memory_mib: self.memory_mib.saturating_mul(u64::from(k)),
            gpus: self.gpus.saturating_mul(k),
        }
    }

    /// Difference, floored at zero.
    pub fn minus(self, o: Resources) -> Resources {
        Resources {
            cpu_milli: self.cpu_milli.saturating_sub(o.cpu_milli),
            memory_mib: self.memory_mib.saturating_sub(o.memory_mib),
            gpus: self.gpus.saturating_sub(o.gpus),
        }
    }

    /// `self` fits in `free`.
    /// The least of each resource of the two.
    pub fn least(self, o: Resources) -> Resources {
        Resources {
            cpu_milli: self.cpu_milli.min(o.cpu_milli),
            memory_mib: self.memory_mib.min(o.memory_mib),
            gpus: self.gpus.min(o.gpus),
        }
    }

    pub fn fits_in(self, free: Resources) -> bool {
        self.cpu_milli <= free.cpu_milli
            && self.memory_mib <= free.memory_mib
            && self.gpus <= free.gpus
    }

    pub(crate) fn to_wit(self) -> wit::Resources {
        wit::Resources {
            cpu_milli: self.cpu_milli,
            memory_mib: self.memory_mib,
            gpus: self.gpus,
        }
    }
}

/// What a taint does to pods that do not tolerate it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum TaintEffect {
    NoSchedule,
    PreferNoSchedule,
    NoExecute,
}

impl TaintEffect {
    /// The effect Kubernetes names `text`, if any.
    pub fn parse(text: &str) -> Option<TaintEffect> {
        match text {
            "NoSchedule" => Some(TaintEffect::NoSchedule),
            "PreferNoSchedule" => Some(TaintEffect::PreferNoSchedule),
            "NoExecute" => Some(TaintEffect::NoExecute),
            _ => None,
        }
    }
}

/// A node taint (only `NoSchedule` and `NoExecute` keep pods off).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Taint {
    pub key: String,
    #[serde(default)]
    pub value: String,
    pub effect: TaintEffect,
}

impl Taint {
    /// The taint a cordon stands for: a pod that tolerates it may go to a
    /// node with `spec.unschedulable` (kube's NodeUnschedulable).
    pub fn cordon() -> Taint {
        Taint {
            key: "node.kubernetes.io/unschedulable".into(),
            value: String::new(),
            effect: TaintEffect::NoSchedule,
        }
    }

    /// The taint the node lifecycle controller puts on a node that is not
    /// Ready.
    pub fn not_ready() -> Taint {
        Taint {
            key: "node.kubernetes.io/not-ready".into(),
            value: String::new(),
            effect: TaintEffect::NoSchedule,
        }
    }

    /// Whether the taint keeps untolerating pods off the node (`NoSchedule`,
    /// `NoExecute`; `PreferNoSchedule` is only a preference).
    pub fn repels(&self) -> bool {
        matches!(
            self.effect,
            TaintEffect::NoSchedule | TaintEffect::NoExecute
        )
    }
}

/// How a toleration matches a taint's key and value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum TolerationOperator {
    /// Key and value equal (Kubernetes' default, also written as empty).
    #[default]
    #[serde(alias = "")]
    Equal,
    /// Key equal, any value (an empty key: every taint).
    Exists,
}

/// A pod's toleration, with Kubernetes' matching rules.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct Toleration {
    /// Empty with `Exists` tolerates everything.
    #[serde(default)]
    pub key: String,
    #[serde(default)]
    pub operator: TolerationOperator,
    #[serde(default)]
    pub value: String,
    /// `None` (written as empty) matches every effect.
    #[serde(default, with = "any_effect")]
    pub effect: Option<TaintEffect>,
}

impl Toleration {
    /// Whether this toleration tolerates `taint`.
    pub fn tolerates(&self, taint: &Taint) -> bool {
        if self.effect.is_some_and(|e| e != taint.effect) {
            return false;
        }
        match self.operator {
            TolerationOperator::Exists => self.key.is_empty() || self.key == taint.key,
            TolerationOperator::Equal => self.key == taint.key && self.value == taint.value,
        }
    }
}

/// A toleration's effect as Kubernetes writes it: empty for every effect.
mod any_effect {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    use super::TaintEffect;

    pub fn serialize<S: Serializer>(e: &Option<TaintEffect>, s: S) -> Result<S::Ok, S::Error> {
        match e {
            Some(e) => e.serialize(s),
            None => s.serialize_str(""),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<TaintEffect>, D::Error> {
        let text = String::deserialize(d)?;
        if text.is_empty() {
            return Ok(None);
        }
        TaintEffect::parse(&text).map(Some).ok_or_else(|| {
            serde::de::Error::unknown_variant(
                &text,
                &["NoSchedule", "PreferNoSchedule", "NoExecute", ""],
            )
        })
    }
}

/// A node.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Node {
    pub name: NodeName,
    pub allocatable: Resources,
    /// Allocatable amounts of the other resources (see [`Scalars`]).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub extended: Scalars,
    /// How many pods the node takes (its `pods` allocatable); `None` for
    /// no limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_pods: Option<u32>,
    pub labels: Labels,
    pub taints: Vec<Taint>,
    pub unschedulable: bool,
}

impl Node {
    /// A plain schedulable node.
    pub fn new(name: impl Into<NodeName>, allocatable: Resources) -> Node {
        Node {
            name: name.into(),
            allocatable,
            extended: Scalars::new(),
            max_pods: None,
            labels: BTreeMap::new(),
            taints: Vec::new(),
            unschedulable: false,
        }
    }

    /// Whether a pod that did not fit on `old` might fit on `self` (kube
    /// scheduler's queueing hints for a node update): more of some
    /// resource, a cordon lifted, or labels or taints changed. A status
    /// heartbeat changes none of these.
    pub(crate) fn may_admit_more_than(&self, old: &Node) -> bool {
        let a = (self.allocatable, old.allocatable);
        a.0.cpu_milli > a.1.cpu_milli
            || a.0.memory_mib > a.1.memory_mib
            || a.0.gpus > a.1.gpus
            || self
                .extended
                .iter()
                .any(|(k, &v)| v > old.extended.get(k).copied().unwrap_or(0))
            || self.max_pods.unwrap_or(u32::MAX) > old.max_pods.unwrap_or(u32::MAX)
            || (old.unschedulable && !self.unschedulable)
            || self.labels != old.labels
            || self.taints != old.taints
    }
}

/// What a task does in a training job.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Parameter server.
    Ps,
    /// Worker (worker 0 is the chief).
    Worker,
    /// Anything else.
    #[default]
    Other,
}

impl Role {
    pub(crate) fn to_wit(self) -> wit::Role {
        match self {
            Role::Ps => wit::Role::Ps,
            Role::Worker => wit::Role::Worker,
            Role::Other => wit::Role::Other,
        }
    }

    /// Placement order within a gang: workers, then parameter servers (a PS
    /// follows its workers), then the rest.
    pub(crate) fn placement_rank(self) -> u8 {
        match self {
            Role::Worker => 0,
            Role::Ps => 1,
            Role::Other => 2,
        }
    }
}

/// A pod's place in its gang's placement order: its role's rank, its
/// index, its key.
pub(crate) type PlacementOrder<'a> = (u8, u32, &'a str);

/// A pod.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Pod {
    /// Unique key (`namespace/name` in Kubernetes).
    pub key: PodKey,
    /// The namespace pod affinity and spread constraints are scoped by.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    /// Labels other pods' affinity and spread constraints select on.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: Labels,
    /// The job (pod group) it belongs to, if any.
    pub job: Option<JobKey>,
    pub role: Role,
    /// Index within its role.
    pub index: u32,
    pub request: Resources,
    /// Requests of the other resources (see [`Scalars`]).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub extended: Scalars,
    pub node_selector: BTreeMap<String, String>,
    pub tolerations: Vec<Toleration>,
    pub priority: i32,
    /// Whether it may evict lower-priority pods to be placed.
    #[serde(default, skip_serializing_if = "Preemption::is_default")]
    pub preemption: Preemption,
    /// Creation time, ms.
    pub arrival_ms: u64,
    /// Gates that keep the pod from being scheduled until removed
    /// (Kubernetes' `spec.schedulingGates`): a gated pod is never tried,
    /// and neither is the gang it belongs to.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub scheduling_gates: Vec<String>,
    /// Node affinity, host ports, pod affinity and spread constraints.
    #[serde(default, skip_serializing_if = "Constraints::is_empty")]
    pub constraints: Constraints,
    /// The ResourceClaims (`namespace/name`) whose devices it needs: it
    /// goes only where all of them can be allocated.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub claims: Vec<String>,
    /// Its unbound `WaitForFirstConsumer` and its `ReadWriteOncePod`
    /// PersistentVolumeClaims.
    #[serde(default, skip_serializing_if = "PodVolumes::is_empty")]
    pub volumes: PodVolumes,
    /// The topology its workload asks for the gang it belongs to (Kueue's
    /// podset annotations): its driver makes it the job's constraint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gang_topology: Option<TopologyConstraint>,
}

impl Pod {
    /// Its place in its gang's placement order (role, then index; the key
    /// breaks ties, so no two pods share one).
    pub(crate) fn placement_order(&self) -> PlacementOrder<'_> {
        (self.role.placement_rank(), self.index, self.key.as_str())
    }

    /// Whether the pod may hold devices: it claims some, or asks for GPUs
    /// or other extended resources that devices may serve.
    pub(crate) fn uses_devices(&self) -> bool {
        !self.claims.is_empty() || self.request.gpus > 0 || !self.extended.is_empty()
    }

    /// A pod with defaults for everything but key and request.
    pub fn new(key: impl Into<PodKey>, request: Resources) -> Pod {
        Pod {
            key: key.into(),
            namespace: String::new(),
            labels: BTreeMap::new(),
            job: None,
            role: Role::Other,
            index: 0,
            request,
            extended: Scalars::new(),
            node_selector: BTreeMap::new(),
            tolerations: Vec::new(),
            priority: 0,
            preemption: Preemption::default(),
            arrival_ms: 0,
            scheduling_gates: Vec::new(),
            constraints: Constraints::default(),
            claims: Vec::new(),
            volumes: PodVolumes::default(),
            gang_topology: None,
        }
    }
}

/// Whether a pod that fits nowhere may evict lower-priority pods
/// (Kubernetes' `spec.preemptionPolicy`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Preemption {
    /// `PreemptLowerPriority`, the default.
    #[default]
    LowerPriority,
    /// `Never`: it waits for room like any other pod.
    Never,
}

impl Preemption {
    fn is_default(&self) -> bool {
        *self == Preemption::default()
    }
}

/// How many of the pods a selector picks in a namespace may be evicted now
/// (a PodDisruptionBudget and its `status.disruptionsAllowed`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DisruptionBudget {
    pub namespace: String,
    /// The pods it covers. Empty covers every pod of the namespace, as the
    /// Eviction API counts it.
    pub selector: LabelSelector,
    pub allowed: u32,
}

impl DisruptionBudget {
    /// Whether evicting `pod` counts against this budget.
    pub fn covers(&self, pod: &Pod) -> bool {
        pod.namespace == self.namespace && self.selector.matches(&pod.labels)
    }
}

/// A job: a gang of pods (a scheduler-plugins PodGroup) with elastic bounds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Job {
    pub name: JobKey,
    /// Pods needed before any may run (`minMember`).
    pub min_member: u32,
    /// Desired workers now.
    pub workers: u32,
    /// Elastic bounds on workers.
    pub min_workers: u32,
    pub max_workers: u32,
    pub priority: i32,
    /// Submission time, ms.
    pub arrival_ms: u64,
    /// Longest the gang holds reservations in permit waiting for its
    /// missing members (a PodGroup's `scheduleTimeoutSeconds`), in place of
    /// the wait the policy asks for; `None` leaves it to the policy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule_timeout_ms: Option<u64>,
    /// Resources that must be free across the cluster before the gang is
    /// tried (a PodGroup's `minResources`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_resources: Option<Demand>,
    /// Why the job may not be tried at all (a PodGroup whose spec is
    /// invalid): its pods wait with this reason until it is cleared.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hold: Option<String>,
    /// The gang is declared to the cluster (a PodGroup): its pods are
    /// placed all or nothing (down to `minMember`) whatever the policy, as
    /// a PodGroup promises. Otherwise (a job of a simulator trace or a case
    /// file) it is a gang only under a policy with a `permit` hook, so the
    /// baseline can stand for kube-scheduler without a gang plugin.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub declared: bool,
    /// How far the workload says it is, in thousandths (0..=1000), when it
    /// reports it (a PodGroup's `dragon.dev/progress` annotation).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress_permille: Option<u32>,
    /// Where its pods must (or should) be together: one domain of a
    /// topology level.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topology: Option<TopologyConstraint>,
    /// The queue (team) it belongs to; none: no queue.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue: Option<QueueName>,
    /// How fast it trains by worker count, when it reports that (a
    /// PodGroup's `dragon.dev/speedup` annotation) or its model gives it:
    /// entry `i` is its goodput with `i + 1` workers on as few nodes as hold
    /// them, in thousandths of its goodput with one (see [`Speedup`]).
    #[serde(default, skip_serializing_if = "Speedup::is_empty")]
    pub speedup: Speedup,
}

impl Job {
    /// A job of `workers` workers, all needed at once and at that size:
    /// priority 0, arrived at 0, not declared by a PodGroup, in no queue
    /// and under no constraint (change what differs with `..`).
    pub fn gang(name: impl Into<JobKey>, workers: u32) -> Job {
        Job {
            name: name.into(),
            min_member: workers,
            workers,
            min_workers: workers,
            max_workers: workers,
            priority: 0,
            arrival_ms: 0,
            schedule_timeout_ms: None,
            min_resources: None,
            hold: None,
            declared: false,
            progress_permille: None,
            topology: None,
            queue: None,
            speedup: Speedup::default(),
        }
    }

    /// Whether its pods are placed as one gang whatever the policy: it is
    /// declared, or it asks to be kept in one topology domain (which only
    /// a gang placed whole can be).
    pub fn always_gang(&self) -> bool {
        self.declared || self.topology.is_some()
    }
}

/// An amount of every kind of resource, as a PodGroup's `minResources`
/// states it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Demand {
    #[serde(default)]
    pub request: Resources,
    /// The other resources (see [`Scalars`]).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub extended: Scalars,
}
