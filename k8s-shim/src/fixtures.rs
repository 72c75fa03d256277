//! Kubernetes objects and policies for the shim's unit tests.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1 as core;

use crate::snapshot::{Event, GroupApi, PodGroup};
use crate::translate::PodGroupSpec;

pub fn node(name: &str, gpus: u32) -> Event {
    Event::Node(Box::new(
        serde_norway::from_str(&format!(
            "metadata: {{name: {name}}}\nstatus:\n  allocatable: {{cpu: '32', memory: 128Gi, nvidia.com/gpu: '{gpus}'}}\n  conditions: [{{type: Ready, status: 'True'}}]\n"
        ))
        .unwrap(),
    ))
}

pub fn pod(
    name: &str,
    group: Option<&str>,
    role: &str,
    index: u32,
    node: Option<&str>,
    scheduler: &str,
) -> Event {
    let labels = match group {
        Some(g) => format!(
            "{{scheduling.x-k8s.io/pod-group: {g}, dragon.dev/role: {role}, dragon.dev/index: '{index}'}}"
        ),
        None => "{}".into(),
    };
    let node = node
        .map(|n| format!("  nodeName: {n}\n"))
        .unwrap_or_default();
    Event::Pod(Box::new(
        serde_norway::from_str(&format!(
            "metadata: {{name: {name}, namespace: ml, labels: {labels}}}\nspec:\n  schedulerName: {scheduler}\n{node}  containers: [{{name: c, resources: {{requests: {{cpu: '1', memory: 1Gi, nvidia.com/gpu: '1'}}}}}}]\n"
        ))
        .unwrap(),
    ))
}

pub fn group(name: &str, min_member: u32) -> Event {
    Event::Group(PodGroup {
        key: format!("ml/{name}"),
        spec: Ok(PodGroupSpec {
            min_member,
            ..PodGroupSpec::default()
        }),
        annotations: BTreeMap::new(),
        created_ms: 1,
        api: GroupApi::SchedulerPlugins,
        priority: None,
    })
}

/// The bundled DRAGON policy, through wasm.
pub fn dragon_policy() -> dragon_runtime::WasmPolicy {
    use dragon_runtime::{ComponentCache, LoadOptions, PolicyEngine, WasmPolicy};
    WasmPolicy::from_bytes(
        &PolicyEngine::new().unwrap(),
        &ComponentCache::disabled(),
        "dragon",
        dragon_bundled::DRAGON,
        &LoadOptions::default(),
    )
    .unwrap()
}

/// `event` (a pod) with scheduling gates `gates`.
pub fn gated(event: Event, gates: &[&str]) -> Event {
    let Event::Pod(mut p) = event else {
        unreachable!("a pod event")
    };
    if let Some(spec) = p.spec.as_mut() {
        spec.scheduling_gates = Some(
            gates
                .iter()
                .map(|g| core::PodSchedulingGate {
                    name: g.to_string(),
                })
                .collect(),
        );
    }
    Event::Pod(p)
}

/// A slice of `devices` GPUs (`gpu-0`…) of driver `gpu.example.com` on
/// node `node`, in a pool named after it.
pub fn gpu_slice(node: &str, devices: usize) -> Event {
    let devices: Vec<String> = (0..devices)
        .map(|i| format!("{{name: gpu-{i}, attributes: {{model: {{string: a100}}}}}}"))
        .collect();
    Event::ResourceSlice(Box::new(
        serde_norway::from_str(&format!(
            "metadata: {{name: {node}-gpus}}\nspec:\n  driver: gpu.example.com\n  nodeName: {node}\n  pool: {{name: {node}, generation: 1, resourceSliceCount: 1}}\n  devices: [{}]\n",
            devices.join(", ")
        ))
        .unwrap(),
    ))
}

/// DeviceClass `gpu`: the devices of driver `gpu.example.com`.
pub fn gpu_class() -> Event {
    Event::DeviceClass(Box::new(
        serde_norway::from_str(
            "metadata: {name: gpu}\nspec:\n  selectors: [{cel: {expression: 'device.driver == \"gpu.example.com\"'}}]\n",
        )
        .unwrap(),
    ))
}

/// ResourceClaim `ml/NAME` for one GPU of class `gpu`.
pub fn gpu_claim(name: &str) -> Event {
    Event::ResourceClaim(Box::new(
        serde_norway::from_str(&format!(
            "metadata: {{name: {name}, namespace: ml}}\nspec:\n  devices:\n    requests: [{{name: gpu, exactly: {{deviceClassName: gpu}}}}]\n"
        ))
        .unwrap(),
    ))
}

/// `event` (a pod) claiming ResourceClaim `claim` of its namespace, made
/// from a template as the resourceclaim controller names it.
pub fn claiming(event: Event, claim: &str) -> Event {
    let Event::Pod(mut p) = event else {
        unreachable!("a pod event")
    };
    if let Some(spec) = p.spec.as_mut() {
        spec.resource_claims = Some(vec![core::PodResourceClaim {
            name: "gpu".into(),
            resource_claim_template_name: Some("one-gpu".into()),
            ..Default::default()
        }]);
    }
    p.status
        .get_or_insert_with(Default::default)
        .resource_claim_statuses = Some(vec![core::PodResourceClaimStatus {
        name: "gpu".into(),
        resource_claim_name: Some(claim.into()),
    }]);
    Event::Pod(p)
}

/// DeviceClass `gpu` serving `nvidia.com/gpu` requests on nodes that
/// advertise none (`extendedResourceName`).
pub fn gpu_class_serving_gpus() -> Event {
    let Event::DeviceClass(mut c) = gpu_class() else {
        unreachable!("a class event")
    };
    if let Some(spec) = c.spec.as_mut() {
        spec.extended_resource_name = Some("nvidia.com/gpu".into());
    }
    Event::DeviceClass(c)
}

/// StorageClass `local`: volumes made by hand, bound when a pod is placed
/// (`WaitForFirstConsumer`).
pub fn local_class() -> Event {
    Event::StorageClass(Box::new(
        serde_norway::from_str(
            "metadata: {name: local}\nprovisioner: kubernetes.io/no-provisioner\nvolumeBindingMode: WaitForFirstConsumer\n",
        )
        .unwrap(),
    ))
}

/// An available 10Gi volume `NAME` of class `local` on node `node` (by
/// its hostname label), for one node or one pod at a time.
pub fn local_volume(name: &str, node: &str) -> Event {
    Event::Volume(Box::new(
        serde_norway::from_str(&format!(
            "metadata: {{name: {name}}}\nspec:\n  capacity: {{storage: 10Gi}}\n  accessModes: [ReadWriteOnce, ReadWriteOncePod]\n  storageClassName: local\n  local: {{path: /data}}\n  nodeAffinity: {{required: {{nodeSelectorTerms: [{{matchExpressions: [{{key: kubernetes.io/hostname, operator: In, values: [{node}]}}]}}]}}}}\nstatus: {{phase: Available}}\n"
        ))
        .unwrap(),
    ))
}

/// An unbound claim `ml/NAME` of class `local` for 1Gi, mounted `mode`.
pub fn volume_claim(name: &str, mode: &str) -> Event {
    Event::Claim(Box::new(
        serde_norway::from_str(&format!(
            "metadata: {{name: {name}, namespace: ml}}\nspec:\n  accessModes: [{mode}]\n  storageClassName: local\n  resources: {{requests: {{storage: 1Gi}}}}\nstatus: {{phase: Pending}}\n"
        ))
        .unwrap(),
    ))
}

/// `event` (a pod) mounting PersistentVolumeClaim `claim`.
pub fn mounting(event: Event, claim: &str) -> Event {
    let Event::Pod(mut p) = event else {
        unreachable!("a pod event")
    };
    if let Some(spec) = p.spec.as_mut() {
        spec.volumes
            .get_or_insert_with(Vec::new)
            .push(core::Volume {
                name: claim.into(),
                persistent_volume_claim: Some(core::PersistentVolumeClaimVolumeSource {
                    claim_name: claim.into(),
                    read_only: None,
                }),
                ..Default::default()
            });
    }
    Event::Pod(p)
}

/// `event` (a node) labelled with its hostname, as the kubelet labels it.
pub fn with_hostname(event: Event) -> Event {
    let Event::Node(mut n) = event else {
        unreachable!("a node event")
    };
    let name = n.metadata.name.clone().unwrap_or_default();
    n.metadata
        .labels
        .get_or_insert_with(BTreeMap::new)
        .insert("kubernetes.io/hostname".into(), name);
    Event::Node(n)
}
