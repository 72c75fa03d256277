//! Kubernetes objects → the framework's nodes, pods and jobs. Pure
//! functions: everything the shim knows comes from the API objects, so a
//! restarted scheduler rebuilds the same snapshot.

use std::collections::BTreeMap;

use dragon_host::framework::{Job, Node, Pod, Resources, Role, Taint, Toleration};
use k8s_openapi::api::core::v1 as core;
use serde::Deserialize;

use crate::quantity;

/// The scheduler-plugins gang label users already put on pods.
pub const POD_GROUP_LABEL: &str = "scheduling.x-k8s.io/pod-group";
/// Dragon's role label/annotation on pods: `ps` or `worker`.
pub const ROLE: &str = "dragon.dev/role";
/// Dragon's task index annotation (else the StatefulSet ordinal label).
pub const INDEX: &str = "dragon.dev/index";
/// The StatefulSet pod ordinal label (Kubernetes ≥ 1.28).
pub const POD_INDEX_LABEL: &str = "apps.kubernetes.io/pod-index";
/// Elastic bounds on a PodGroup (annotations).
pub const MIN_WORKERS: &str = "dragon.dev/min-workers";
pub const MAX_WORKERS: &str = "dragon.dev/max-workers";
/// The workload whose `/scale` sets the worker count, on a PodGroup:
/// `apps/v1/statefulsets/NAME` or `GROUP/VERSION/PLURAL/NAME`.
pub const SCALE_TARGET: &str = "dragon.dev/scale-target";

/// A bad object, named.
#[derive(Debug, thiserror::Error)]
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
    format!(
        "{}/{}",
        pod.metadata.namespace.as_deref().unwrap_or("default"),
        pod.metadata.name.as_deref().unwrap_or("")
    )
}

fn resources(
    object: &str,
    list: Option<&BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>>,
) -> Result<Resources, TranslateError> {
    let mut r = Resources::default();
    let Some(list) = list else { return Ok(r) };
    if let Some(q) = list.get("cpu") {
        r.cpu_milli = quantity::cpu_milli(&q.0).map_err(|m| err(object, format!("cpu: {m}")))?;
    }
    if let Some(q) = list.get("memory") {
        r.memory_mib =
            quantity::memory_mib(&q.0).map_err(|m| err(object, format!("memory: {m}")))?;
    }
    if let Some(q) = list.get("nvidia.com/gpu") {
        r.gpus = quantity::count(&q.0).map_err(|m| err(object, format!("nvidia.com/gpu: {m}")))?;
    }
    Ok(r)
}

/// A node as the framework sees it.
///
/// # Errors
/// Unparseable allocatable quantities.
pub fn node(n: &core::Node) -> Result<Node, TranslateError> {
    let name = n.metadata.name.clone().unwrap_or_default();
    let status = n.status.as_ref();
    let alloc = resources(
        &format!("node {name}"),
        status.and_then(|s| s.allocatable.as_ref()),
    )?;
    let spec = n.spec.as_ref();
    let ready = status
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
    Ok(Node {
        name,
        allocatable: alloc,
        labels: n.metadata.labels.clone().unwrap_or_default(),
        taints: spec
            .and_then(|s| s.taints.as_ref())
            .map(|ts| {
                ts.iter()
                    .map(|t| Taint {
                        key: t.key.clone(),
                        value: t.value.clone().unwrap_or_default(),
                        effect: t.effect.clone(),
                    })
                    .collect()
            })
            .unwrap_or_default(),
        // A node that is not Ready takes no new pods (as the node lifecycle
        // controller's not-ready taint would say).
        unschedulable: spec.and_then(|s| s.unschedulable).unwrap_or(false) || !ready,
    })
}

/// Whether the pod is done (its resources are free again).
pub fn is_terminated(p: &core::Pod) -> bool {
    matches!(
        p.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Succeeded") | Some("Failed")
    )
}

fn label_or_annotation<'a>(p: &'a core::Pod, key: &str) -> Option<&'a str> {
    p.metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(key))
        .or_else(|| p.metadata.annotations.as_ref().and_then(|a| a.get(key)))
        .map(String::as_str)
}

/// A pod as the framework sees it: requests are the sum over containers, or
/// the largest init container if larger (Kubernetes' effective request).
///
/// # Errors
/// Unparseable requests, an unknown role or index.
pub fn pod(p: &core::Pod) -> Result<Pod, TranslateError> {
    let key = pod_key(p);
    let object = format!("pod {key}");
    let spec = p.spec.as_ref().ok_or_else(|| err(&object, "has no spec"))?;
    let mut request = Resources::default();
    for c in &spec.containers {
        request = request.plus(resources(
            &object,
            c.resources.as_ref().and_then(|r| r.requests.as_ref()),
        )?);
    }
    for c in spec.init_containers.iter().flatten() {
        let r = resources(
            &object,
            c.resources.as_ref().and_then(|r| r.requests.as_ref()),
        )?;
        request = Resources {
            cpu_milli: request.cpu_milli.max(r.cpu_milli),
            memory_mib: request.memory_mib.max(r.memory_mib),
            gpus: request.gpus.max(r.gpus),
        };
    }
    let role = match label_or_annotation(p, ROLE) {
        None => Role::Other,
        Some("ps") => Role::Ps,
        Some("worker") => Role::Worker,
        Some(other) => {
            return Err(err(
                &object,
                format!("{ROLE} must be `ps` or `worker`, got {other:?}"),
            ));
        }
    };
    let index =
        match label_or_annotation(p, INDEX).or_else(|| label_or_annotation(p, POD_INDEX_LABEL)) {
            None => 0,
            Some(s) => s.parse().map_err(|_| {
                err(
                    &object,
                    format!("{INDEX} must be a whole number, got {s:?}"),
                )
            })?,
        };
    let arrival_ms = p
        .metadata
        .creation_timestamp
        .as_ref()
        .map(|t| t.0.as_millisecond().max(0) as u64)
        .unwrap_or(0);
    Ok(Pod {
        key,
        job: label_or_annotation(p, POD_GROUP_LABEL).map(|g| {
            format!(
                "{}/{g}",
                p.metadata.namespace.as_deref().unwrap_or("default")
            )
        }),
        role,
        index,
        request,
        node_selector: spec.node_selector.clone().unwrap_or_default(),
        tolerations: spec
            .tolerations
            .iter()
            .flatten()
            .map(|t| Toleration {
                key: t.key.clone().unwrap_or_default(),
                operator: t.operator.clone().unwrap_or_default(),
                value: t.value.clone().unwrap_or_default(),
                effect: t.effect.clone().unwrap_or_default(),
            })
            .collect(),
        priority: spec.priority.unwrap_or(0),
        arrival_ms,
        scheduling_gates: spec
            .scheduling_gates
            .iter()
            .flatten()
            .map(|g| g.name.clone())
            .collect(),
    })
}

/// The fields of a scheduler-plugins `PodGroup` that Dragon reads.
#[derive(Debug, Clone, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct PodGroupSpec {
    #[serde(default)]
    pub min_member: u32,
    #[serde(default)]
    pub schedule_timeout_seconds: Option<u32>,
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
    Ok(Job {
        name: key.to_string(),
        min_member: spec.min_member,
        workers,
        min_workers: min.max(1),
        max_workers: max,
        priority: 0,
        arrival_ms,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod_yaml(y: &str) -> core::Pod {
        serde_norway::from_str(y).unwrap()
    }

    #[test]
    fn a_gang_worker_pod_translates_with_role_index_group_and_requests() {
        let p = pod_yaml(
            r#"
metadata:
  name: train-worker-2
  namespace: ml
  labels: {scheduling.x-k8s.io/pod-group: train, dragon.dev/role: worker, apps.kubernetes.io/pod-index: "2"}
spec:
  schedulerName: dragon-scheduler
  containers:
    - name: a
      image: x
      resources: {requests: {cpu: 1500m, memory: 4Gi, nvidia.com/gpu: "1"}}
    - name: b
      image: x
      resources: {requests: {cpu: 500m, memory: 1Gi}}
"#,
        );
        let t = pod(&p).unwrap();
        assert_eq!(t.key, "ml/train-worker-2");
        assert_eq!(t.job.as_deref(), Some("ml/train"));
        assert_eq!((t.role, t.index), (Role::Worker, 2));
        assert_eq!(
            t.request,
            Resources {
                cpu_milli: 2000,
                memory_mib: 5120,
                gpus: 1
            }
        );
    }

    #[test]
    fn a_bad_role_or_quantity_names_the_pod() {
        let p = pod_yaml(
            "metadata: {name: p, namespace: d, labels: {dragon.dev/role: boss}}\nspec: {containers: []}\n",
        );
        assert!(
            pod(&p)
                .unwrap_err()
                .to_string()
                .contains("pod d/p: dragon.dev/role")
        );
        let p = pod_yaml(
            "metadata: {name: p}\nspec: {containers: [{name: a, resources: {requests: {cpu: lots}}}]}\n",
        );
        assert!(
            pod(&p)
                .unwrap_err()
                .to_string()
                .contains("cpu: invalid quantity")
        );
    }

    #[test]
    fn a_node_that_is_not_ready_takes_no_pods() {
        let n: core::Node = serde_norway::from_str(
            "metadata: {name: n1}\nstatus:\n  allocatable: {cpu: '32', memory: 128Gi, nvidia.com/gpu: '4'}\n  conditions: [{type: Ready, status: 'False'}]\n",
        )
        .unwrap();
        let t = node(&n).unwrap();
        assert_eq!(
            t.allocatable,
            Resources {
                cpu_milli: 32_000,
                memory_mib: 131_072,
                gpus: 4
            }
        );
        assert!(t.unschedulable);
    }

    #[test]
    fn podgroup_bounds_default_to_the_worker_count() {
        let j = job(
            "ml/train",
            &PodGroupSpec {
                min_member: 5,
                schedule_timeout_seconds: None,
            },
            &BTreeMap::new(),
            0,
            4,
        )
        .unwrap();
        assert_eq!(
            (j.workers, j.min_workers, j.max_workers, j.min_member),
            (4, 4, 4, 5)
        );
        let ann = BTreeMap::from([
            (MIN_WORKERS.to_string(), "2".to_string()),
            (MAX_WORKERS.to_string(), "8".to_string()),
        ]);
        let j = job("ml/train", &PodGroupSpec::default(), &ann, 0, 4).unwrap();
        assert_eq!((j.min_workers, j.max_workers), (2, 8));
    }
}
