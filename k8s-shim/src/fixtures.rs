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
