//! Kubernetes objects → the framework's nodes, pods and jobs. Pure
//! functions: everything the shim knows comes from the API objects, so a
//! restarted scheduler rebuilds the same snapshot.

mod constraints;
pub mod devices;
pub mod extended;
pub mod migration;
mod requests;
pub mod topology;
pub mod volumes;

use std::collections::BTreeMap;

use crate::key::{ObjectKey, object_key};
use dragon_framework::JobKey;
use dragon_framework::{
    Constraints, Demand, DisruptionBudget, Job, Node, Pod, Preemption, Role, Speedup, Taint,
    TaintEffect, Toleration, TolerationOperator, TopologyConstraint,
};
use k8s_openapi::api::core::v1 as core;
use k8s_openapi::api::policy::v1 as policy;
use k8s_openapi::api::scheduling::v1beta1 as scheduling;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

/// The scheduler-plugins gang label users already put on pods.
pub const POD_GROUP_LABEL: &str = "scheduling.x-k8s.io/pod-group";
/// Kueue's plain-pod groups: the group a pod is in (a label) and how many
/// pods the group has (an annotation), as Kueue v0.17's pod integration
/// names them (`pkg/controller/jobs/pod/constants`).
pub const KUEUE_GROUP_LABEL: &str = "kueue.x-k8s.io/pod-group-name";
pub const KUEUE_GROUP_TOTAL: &str = "kueue.x-k8s.io/pod-group-total-count";
/// Dragon's role label/annotation on pods: `ps` or `worker`.
pub const ROLE: &str = "dragon.dev/role";
/// Dragon's task index annotation (else the StatefulSet ordinal label).
pub const INDEX: &str = "dragon.dev/index";
/// The StatefulSet pod ordinal label (Kubernetes ≥ 1.28).
pub const POD_INDEX_LABEL: &str = "apps.kubernetes.io/pod-index";
/// The Kubeflow training-operator's labels on the pods of a TFJob,
/// PyTorchJob or MPIJob: the replica type (lower case: `ps`, `worker`,
/// `chief`, `master`, `evaluator`, `launcher`) and its index.
pub const KUBEFLOW_REPLICA_TYPE: &str = "training.kubeflow.org/replica-type";
pub const KUBEFLOW_REPLICA_INDEX: &str = "training.kubeflow.org/replica-index";
/// An Indexed Job's (and so a JobSet's) completion index.
pub const JOB_COMPLETION_INDEX: &str = "batch.kubernetes.io/job-completion-index";
/// JobSet's label on its pods naming their replicated job. Kubeflow
/// Trainer v2 calls the trainer's `node` in every runtime it ships (and
/// runs `dataset-initializer`, `model-initializer`, an MPI `launcher` as
/// replicated jobs of their own).
pub const JOBSET_REPLICATED_JOB: &str = "jobset.sigs.k8s.io/replicatedjob-name";
/// Elastic bounds on a PodGroup (annotations).
pub const MIN_WORKERS: &str = "dragon.dev/min-workers";
pub const MAX_WORKERS: &str = "dragon.dev/max-workers";
/// How far the job is, as a fraction from 0 to 1, on a PodGroup: for
/// workloads that report it, a hint policies may use (interface 0.2's
/// `progress-permille`).
pub const PROGRESS: &str = "dragon.dev/progress";
/// A pod group's goodput by worker count, as the job measures it:
/// `g1,g2,…` with 1, 2, … workers, in any unit (see [`Speedup`]).
pub const SPEEDUP: &str = "dragon.dev/speedup";
/// The workload whose `/scale` sets the worker count, on a PodGroup:
/// `apps/v1/statefulsets/NAME` or `GROUP/VERSION/PLURAL/NAME`.
pub const SCALE_TARGET: &str = "dragon.dev/scale-target";

/// A bad object, named.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{object}: {message}")]
pub struct TranslateError {
    pub object: String,
    pub message: String,
}

fn err(object: &str, message: impl Into<String>) -> TranslateError {
    TranslateError {
        object: object.to_string(),
        message: message.into(),
    }
}

/// `namespace/name`.
pub fn pod_key(pod: &core::Pod) -> String {
    object_key(pod).to_string()
}

/// A node as the framework sees it.
///
/// # Errors
/// Unparseable allocatable quantities.
pub fn node(n: &core::Node) -> Result<Node, TranslateError> {
    let name = n.metadata.name.clone().unwrap_or_default();
    let status = n.status.as_ref();
    let (allocatable, max_pods, extended) =
        requests::allocatable(status.and_then(|s| s.allocatable.as_ref()))
            .map_err(|m| err(&format!("node {name}"), m.to_string()))?;
    let spec = n.spec.as_ref();
    let taints = spec
        .and_then(|s| s.taints.as_ref())
        .into_iter()
        .flatten()
        .enumerate()
        .map(|(i, t)| {
            let effect = TaintEffect::parse(&t.effect).ok_or_else(|| {
                err(
                    &format!("node {name}"),
                    format!("spec.taints[{i}].effect: unknown effect {:?}", t.effect),
                )
            })?;
            Ok(Taint {
                key: t.key.clone(),
                value: t.value.clone().unwrap_or_default(),
                effect,
            })
        })
        .collect::<Result<Vec<_>, TranslateError>>()?;
    let ready = status
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
    let mut taints = taints;
    // A node that is not Ready takes no new pods but those that tolerate
    // it, as the node lifecycle controller's taint says (seen here before
    // the controller has written it).
    let not_ready = Taint::not_ready();
    if !ready && !taints.iter().any(|t| t.key == not_ready.key && t.repels()) {
        taints.push(not_ready);
    }
    Ok(Node {
        name: name.into(),
        allocatable,
        extended,
        max_pods,
        labels: n.metadata.labels.clone().unwrap_or_default(),
        taints,
        unschedulable: spec.and_then(|s| s.unschedulable).unwrap_or(false),
    })
}

/// What a PodDisruptionBudget lets preemption evict: `None` for one whose
/// selector is absent (it covers no pod). A selector Dragon cannot
/// evaluate covers every pod of its namespace, so nothing it might protect
/// is evicted (the error says why).
///
/// # Errors
/// The selector that could not be read; the budget returned with it.
pub fn disruption_budget(
    pdb: &policy::PodDisruptionBudget,
) -> (Option<DisruptionBudget>, Option<TranslateError>) {
    let namespace = pdb
        .metadata
        .namespace
        .clone()
        .unwrap_or_else(|| "default".into());
    let allowed = pdb
        .status
        .as_ref()
        .and_then(|s| s.disruptions_allowed)
        .map_or(0, |n| n.max(0) as u32);
    let Some(selector) = pdb.spec.as_ref().and_then(|s| s.selector.as_ref()) else {
        return (None, None);
    };
    match constraints::label_selector("spec.selector", selector) {
        Ok(selector) => (
            Some(DisruptionBudget {
                namespace,
                selector,
                allowed,
            }),
            None,
        ),
        Err(m) => {
            let object = format!("poddisruptionbudget {}", object_key(pdb));
            let whole = DisruptionBudget {
                namespace,
                selector: Default::default(),
                allowed: 0,
            };
            (Some(whole), Some(err(&object, m.to_string())))
        }
    }
}

/// The claims a pod's volumes use, by name in its namespace: its
/// `persistentVolumeClaim` volumes, and the claim a generic ephemeral
/// volume gets (`POD-VOLUME`).
pub fn pod_claims(p: &core::Pod) -> Vec<String> {
    let pod = p.metadata.name.as_deref().unwrap_or("");
    p.spec
        .iter()
        .flat_map(|s| s.volumes.iter().flatten())
        .filter_map(|v| {
            if let Some(c) = &v.persistent_volume_claim {
                Some(c.claim_name.clone())
            } else {
                v.ephemeral.as_ref().map(|_| format!("{pod}-{}", v.name))
            }
        })
        .collect()
}

/// [`pod_claims`] as `namespace/name` keys.
pub fn pod_claim_keys(p: &core::Pod) -> Vec<String> {
    let namespace = p.metadata.namespace.as_deref();
    pod_claims(p)
        .iter()
        .map(|c| ObjectKey::new(namespace, c).to_string())
        .collect()
}

/// An object's creation time, ms since the epoch (0 if unset).
pub fn created_ms(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> u64 {
    meta.creation_timestamp
        .as_ref()
        .map(|t| t.0.as_millisecond().max(0) as u64)
        .unwrap_or(0)
}

/// Whether the pod is done (its resources are free again).
pub fn is_terminated(p: &core::Pod) -> bool {
    matches!(
        p.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Succeeded") | Some("Failed")
    )
}

/// The `scheduling.k8s.io` PodGroup (`namespace/name`) a pod names in
/// `spec.schedulingGroup` (Kubernetes' own gang API), if any.
pub fn native_pod_group(p: &core::Pod) -> Option<String> {
    let name = p
        .spec
        .as_ref()?
        .scheduling_group
        .as_ref()?
        .pod_group_name
        .as_ref()?;
    Some(ObjectKey::new(p.metadata.namespace.as_deref(), name).to_string())
}

/// A `scheduling.k8s.io/v1beta1` PodGroup's gang: `minCount` of its gang
/// policy, or 1 for the basic policy (each pod on its own); and its
/// priority, resolved by the API server from its priority class.
pub fn native_podgroup_spec(pg: &scheduling::PodGroup) -> (PodGroupSpec, Option<i32>) {
    let min_member = pg
        .spec
        .scheduling_policy
        .gang
        .as_ref()
        .map_or(1, |g| u32::try_from(g.min_count).unwrap_or(1));
    (
        PodGroupSpec {
            min_member,
            topology: topology::native(pg),
            ..PodGroupSpec::default()
        },
        pg.spec.priority,
    )
}

/// The Kueue pod group (`namespace/name`) a pod is in by its
/// `kueue.x-k8s.io/pod-group-name` label, if any.
pub fn kueue_pod_group(p: &core::Pod) -> Option<String> {
    p.metadata
        .labels
        .as_ref()?
        .get(KUEUE_GROUP_LABEL)
        .map(|g| ObjectKey::new(p.metadata.namespace.as_deref(), g).to_string())
}

/// The gang of a Kueue pod group, read from one of its pods: all of its
/// `kueue.x-k8s.io/pod-group-total-count` pods, which Kueue admits as one
/// workload. The count must be a whole number of at least 1, as Kueue's
/// webhook requires.
///
/// # Errors
/// The annotation is missing or not such a number.
pub fn kueue_group_spec(p: &core::Pod) -> Result<PodGroupSpec, TranslateError> {
    let object = format!("pod {}", pod_key(p));
    let total = p
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(KUEUE_GROUP_TOTAL))
        .ok_or_else(|| {
            err(
                &object,
                format!("{KUEUE_GROUP_LABEL} names a group but {KUEUE_GROUP_TOTAL} is missing"),
            )
        })?;
    match total.trim().parse::<u32>() {
        Ok(n) if n >= 1 => Ok(PodGroupSpec {
            min_member: n,
            ..PodGroupSpec::default()
        }),
        _ => Err(err(
            &object,
            format!("{KUEUE_GROUP_TOTAL} must be a whole number of at least 1, got {total:?}"),
        )),
    }
}

/// The scheduler-plugins PodGroup (`namespace/name`) a pod names with its
/// `scheduling.x-k8s.io/pod-group` label, if any.
pub fn pod_group(p: &core::Pod) -> Option<String> {
    label_or_annotation(p, POD_GROUP_LABEL)
        .map(|g| ObjectKey::new(p.metadata.namespace.as_deref(), g).to_string())
}

fn label_or_annotation<'a>(p: &'a core::Pod, key: &str) -> Option<&'a str> {
    p.metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(key))
        .or_else(|| p.metadata.annotations.as_ref().and_then(|a| a.get(key)))
        .map(String::as_str)
}

/// A pod's toleration; an operator or effect Kubernetes does not define
/// is refused, naming the field.
fn toleration(object: &str, i: usize, t: &core::Toleration) -> Result<Toleration, TranslateError> {
    let field = format!("spec.tolerations[{i}]");
    let operator = match t.operator.as_deref() {
        None | Some("") | Some("Equal") => TolerationOperator::Equal,
        Some("Exists") => TolerationOperator::Exists,
        Some(other) => {
            return Err(err(
                object,
                format!("{field}.operator: unknown operator {other:?}"),
            ));
        }
    };
    let effect = match t.effect.as_deref() {
        None | Some("") => None,
        Some(text) => Some(
            TaintEffect::parse(text)
                .ok_or_else(|| err(object, format!("{field}.effect: unknown effect {text:?}")))?,
        ),
    };
    Ok(Toleration {
        key: t.key.clone().unwrap_or_default(),
        operator,
        value: t.value.clone().unwrap_or_default(),
        effect,
    })
}

/// A pod as the framework sees it: its effective requests over every
/// resource name and its place in a job; its constraints come from
/// [`pod_constraints`], since a pod already bound counts as usage even
/// with a constraint Dragon cannot evaluate.
///
/// # Errors
/// Unparseable requests, an unknown role or index.
pub fn pod(p: &core::Pod) -> Result<Pod, TranslateError> {
    let key = pod_key(p);
    let object = format!("pod {key}");
    let spec = p.spec.as_ref().ok_or_else(|| err(&object, "has no spec"))?;
    let namespace = p.metadata.namespace.as_deref().unwrap_or("default");
    let labels = p.metadata.labels.clone().unwrap_or_default();
    let (request, extended) = requests::effective(spec).map_err(|m| err(&object, m.to_string()))?;
    let role = match label_or_annotation(p, ROLE) {
        None => match label_or_annotation(p, KUBEFLOW_REPLICA_TYPE)
            .or_else(|| label_or_annotation(p, JOBSET_REPLICATED_JOB))
        {
            Some("ps") => Role::Ps,
            Some("worker" | "workers" | "node") => Role::Worker,
            // chief, master, evaluator, launcher, initializers: one of a
            // kind each.
            _ => Role::Other,
        },
        Some("ps") => Role::Ps,
        Some("worker") => Role::Worker,
        Some(other) => {
            return Err(err(
                &object,
                format!("{ROLE} must be `ps` or `worker`, got {other:?}"),
            ));
        }
    };
    let index = match [
        INDEX,
        KUBEFLOW_REPLICA_INDEX,
        JOB_COMPLETION_INDEX,
        POD_INDEX_LABEL,
    ]
    .into_iter()
    .find_map(|k| label_or_annotation(p, k).map(|v| (k, v)))
    {
        None => 0,
        Some((k, s)) => s
            .parse()
            .map_err(|_| err(&object, format!("{k} must be a whole number, got {s:?}")))?,
    };
    let arrival_ms = created_ms(&p.metadata);
    Ok(Pod {
        key: key.into(),
        namespace: namespace.to_string(),
        labels,
        job: native_pod_group(p)
            .or_else(|| pod_group(p))
            .or_else(|| kueue_pod_group(p))
            .map(JobKey::from),
        role,
        index,
        request,
        extended,
        node_selector: spec.node_selector.clone().unwrap_or_default(),
        tolerations: spec
            .tolerations
            .iter()
            .flatten()
            .enumerate()
            .map(|(i, t)| toleration(&object, i, t))
            .collect::<Result<_, _>>()?,
        priority: spec.priority.unwrap_or(0),
        preemption: match spec.preemption_policy.as_deref() {
            Some("Never") => Preemption::Never,
            _ => Preemption::LowerPriority,
        },
        arrival_ms,
        scheduling_gates: spec
            .scheduling_gates
            .iter()
            .flatten()
            .map(|g| g.name.clone())
            .collect(),
        constraints: Default::default(),
        // Read with the snapshot's view of the claims (`devices::device_claims`).
        claims: Vec::new(),
        // Likewise (the snapshot's `pod_volumes`).
        volumes: Default::default(),
        // Likewise (the snapshot reads `topology::of_pod` for pods it places).
        gang_topology: None,
    })
}

/// A pod's node affinity, host ports, pod affinity and spread constraints.
///
/// # Errors
/// A constraint Dragon cannot evaluate, with its field path.
pub fn pod_constraints(p: &core::Pod) -> Result<Constraints, TranslateError> {
    let object = format!("pod {}", pod_key(p));
    let spec = p.spec.as_ref().ok_or_else(|| err(&object, "has no spec"))?;
    let namespace = p.metadata.namespace.as_deref().unwrap_or("default");
    let labels = p.metadata.labels.clone().unwrap_or_default();
    constraints::constraints(spec, namespace, &labels).map_err(|m| err(&object, m.to_string()))
}

/// A PodGroup's spec, checked.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PodGroupSpec {
    /// Pods that must be placeable together before any is bound; 0: all
    /// that exist.
    pub min_member: u32,
    /// Resources that must be free in the cluster before the gang is tried.
    pub min_resources: Option<Demand>,
    /// Longest the gang holds reservations waiting for missing members.
    pub schedule_timeout_seconds: Option<u32>,
    /// Where its pods must be together (a native PodGroup's
    /// `schedulingConstraints`).
    pub topology: Option<TopologyConstraint>,
}

/// A PodGroup's `spec`, checked as its API validation would if the CRD
/// carried it: a field of the wrong type, a negative count or a quantity
/// that does not parse is refused with the field named, so the group is not
/// scheduled on a misread.
///
/// # Errors
/// What is wrong, naming the field.
pub fn podgroup_spec(
    key: &str,
    spec: Option<&serde_json::Value>,
) -> Result<PodGroupSpec, TranslateError> {
    let object = format!("podgroup {key}");
    let empty = serde_json::Map::new();
    let fields = match spec {
        None | Some(serde_json::Value::Null) => &empty,
        Some(serde_json::Value::Object(m)) => m,
        Some(other) => return Err(err(&object, format!("spec must be an object, got {other}"))),
    };
    // Field by field, so an error names the field.
    fn field<T: serde::de::DeserializeOwned>(
        object: &str,
        fields: &serde_json::Map<String, serde_json::Value>,
        name: &str,
    ) -> Result<Option<T>, TranslateError> {
        fields
            .get(name)
            .filter(|v| !v.is_null())
            .map(|v| {
                serde_json::from_value(v.clone())
                    .map_err(|e| err(object, format!("spec.{name}: {e}")))
            })
            .transpose()
    }
    let min_member: i32 = field(&object, fields, "minMember")?.unwrap_or(0);
    let min_member = u32::try_from(min_member).map_err(|_| {
        err(
            &object,
            format!("spec.minMember must not be negative, got {min_member}"),
        )
    })?;
    let schedule_timeout_seconds = field::<i32>(&object, fields, "scheduleTimeoutSeconds")?
        .map(|t| {
            u32::try_from(t).map_err(|_| {
                err(
                    &object,
                    format!("spec.scheduleTimeoutSeconds must not be negative, got {t}"),
                )
            })
        })
        .transpose()?;
    let min_resources = field::<BTreeMap<String, Quantity>>(&object, fields, "minResources")?
        .map(|list| {
            requests::min_resources(&list)
                .map_err(|m| err(&object, format!("spec.minResources.{m}")))
        })
        .transpose()?;
    Ok(PodGroupSpec {
        min_member,
        min_resources,
        schedule_timeout_seconds,
        // A scheduler-plugins PodGroup says it in annotations.
        topology: None,
    })
}

/// A job from a PodGroup and the pods that name it. Workers wanted = the
/// worker pods that exist (the workload's replicas); elastic bounds from
/// Dragon's annotations, defaulting to that count.
///
/// # Errors
/// Bounds that are not numbers or contradict each other.
pub fn job(
    key: &str,
    spec: &PodGroupSpec,
    annotations: &BTreeMap<String, String>,
    arrival_ms: u64,
    worker_pods: u32,
) -> Result<Job, TranslateError> {
    let object = format!("podgroup {key}");
    let num = |k: &str| -> Result<Option<u32>, TranslateError> {
        annotations
            .get(k)
            .map(|v| {
                v.parse::<u32>()
                    .map_err(|_| err(&object, format!("{k} must be a whole number, got {v:?}")))
            })
            .transpose()
    };
    let workers = worker_pods;
    let min = num(MIN_WORKERS)?.unwrap_or(workers).min(workers.max(1));
    let max = num(MAX_WORKERS)?.unwrap_or(workers).max(workers);
    let progress_permille = annotations
        .get(PROGRESS)
        .map(|v| match v.trim().parse::<f64>() {
            Ok(x) if (0.0..=1.0).contains(&x) => Ok((x * 1000.0).round() as u32),
            _ => Err(err(
                &object,
                format!("{PROGRESS} must be a fraction from 0 to 1, got {v:?}"),
            )),
        })
        .transpose()?;
    // Figures past the most workers the job may have are never asked for.
    let speedup = annotations
        .get(SPEEDUP)
        .map(|v| Speedup::parse(v).map(|s| s.truncated(max.max(1))))
        .transpose()
        .map_err(|e| err(&object, format!("{SPEEDUP}: {e}")))?
        .unwrap_or_default();
    let annotated =
        topology::from_annotations(annotations, (topology::REQUIRED, topology::PREFERRED))
            .map_err(|m| err(&object, m.to_string()))?;
    let topology = match (spec.topology.clone(), annotated) {
        (Some(had), Some(wants)) if had != wants => {
            let conflict = topology::TopologyProblem::Conflict {
                first: "its spec".into(),
                had,
                then: "its annotations".into(),
                wants,
            };
            return Err(err(&object, conflict.to_string()));
        }
        (a, b) => a.or(b),
    };
    Ok(Job {
        name: key.into(),
        min_member: spec.min_member,
        workers,
        min_workers: min.max(1),
        max_workers: max,
        priority: 0,
        arrival_ms,
        schedule_timeout_ms: spec.schedule_timeout_seconds.map(|s| u64::from(s) * 1000),
        min_resources: spec.min_resources.clone(),
        hold: None,
        declared: true,
        progress_permille,
        topology,
        // The driver assigns the queue from its configuration.
        queue: None,
        speedup,
    })
}

#[cfg(test)]
mod tests;
