//! The requests of a pod's extended-resource claim, as kube-scheduler's
//! DynamicResources plugin makes them (`createRequestsAndMappings`): for
//! each extended resource served by devices, one request per container
//! asking it (`container-C-request-R`: C the container's index among init
//! and regular containers, R the resource's index among the container's
//! requests by name); an init container that runs before the others and
//! exits reuses the requests of the containers after it and asks only the
//! rest, and all such init containers share the largest of their requests.
//! The mappings say which container uses which request.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1 as core;

/// One request of the claim: `count` devices for `resource`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExtendedRequest {
    pub name: String,
    pub resource: String,
    pub count: u64,
}

/// The claim's requests for `resources` (sorted by name), and which
/// container uses which.
pub fn extended_requests(
    pod: &core::Pod,
    resources: &BTreeSet<&str>,
) -> (
    Vec<ExtendedRequest>,
    Vec<core::ContainerExtendedResourceRequest>,
) {
    let Some(spec) = pod.spec.as_ref() else {
        return (Vec::new(), Vec::new());
    };
    let inits = spec.init_containers.as_deref().unwrap_or_default();
    let containers: Vec<&core::Container> = inits.iter().chain(&spec.containers).collect();
    // Init containers that run to completion first; sidecars (restartPolicy
    // Always) and regular containers run together.
    let short_lived =
        |i: usize| i < inits.len() && containers[i].restart_policy.as_deref() != Some("Always");
    let mut requests = Vec::new();
    let mut mappings = Vec::new();
    for &resource in resources {
        let mut long: Vec<Option<ExtendedRequest>> = vec![None; containers.len()];
        let mut long_mappings = Vec::new();
        for i in (0..containers.len()).filter(|&i| !short_lived(i)) {
            let (request, m) = container_request(i, containers[i], resource, &[]);
            long[i] = request;
            long_mappings.extend(m);
        }
        let mut largest: Option<ExtendedRequest> = None;
        let mut short_names = BTreeSet::new();
        let mut short_mappings = Vec::new();
        for i in (0..containers.len()).filter(|&i| short_lived(i)) {
            let (request, m) = container_request(i, containers[i], resource, &long[i..]);
            if let Some(r) = request {
                short_names.insert(r.name.clone());
                if largest.as_ref().is_none_or(|l| l.count < r.count) {
                    largest = Some(r);
                }
            }
            short_mappings.extend(m);
        }
        if let Some(l) = &largest
            && short_names.len() > 1
        {
            for m in &mut short_mappings {
                if short_names.contains(&m.request_name) {
                    m.request_name = l.name.clone();
                }
            }
        }
        requests.extend(largest);
        requests.extend(long.into_iter().flatten());
        mappings.extend(long_mappings);
        mappings.extend(short_mappings);
    }
    requests.sort_by(|a, b| a.name.cmp(&b.name));
    (requests, mappings)
}

/// Container `i`'s request for `resource` beyond what the `reusable`
/// requests already give it, and its mappings.
fn container_request(
    i: usize,
    container: &core::Container,
    resource: &str,
    reusable: &[Option<ExtendedRequest>],
) -> (
    Option<ExtendedRequest>,
    Vec<core::ContainerExtendedResourceRequest>,
) {
    let asked: &BTreeMap<String, _> = match container
        .resources
        .as_ref()
        .and_then(|r| r.requests.as_ref())
    {
        Some(r) => r,
        None => return (None, Vec::new()),
    };
    let Some(want) = asked
        .get(resource)
        .and_then(|q| dragon_framework::quantity::parse(&q.0, 1).ok())
        .filter(|&n| n > 0)
    else {
        return (None, Vec::new());
    };
    let mapping = |request: &str| core::ContainerExtendedResourceRequest {
        container_name: container.name.clone(),
        resource_name: resource.to_string(),
        request_name: request.to_string(),
    };
    let mut mappings = Vec::new();
    let mut have = 0u64;
    for r in reusable.iter().flatten() {
        have += r.count;
        mappings.push(mapping(&r.name));
        if have >= want {
            return (None, mappings);
        }
    }
    // The resource's index among the container's requests, by name.
    let index = asked.keys().position(|k| k == resource).unwrap_or(0);
    let name = format!("container-{i}-request-{index}");
    mappings.push(mapping(&name));
    (
        Some(ExtendedRequest {
            name,
            resource: resource.to_string(),
            count: want - have,
        }),
        mappings,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(spec: serde_json::Value) -> core::Pod {
        serde_json::from_value(json!({"metadata": {"name": "p"}, "spec": spec})).expect("a pod")
    }

    fn container(name: &str, requests: serde_json::Value) -> serde_json::Value {
        json!({"name": name, "image": "i", "resources": {"requests": requests}})
    }

    fn names(requests: &[ExtendedRequest]) -> Vec<(String, u64)> {
        requests.iter().map(|r| (r.name.clone(), r.count)).collect()
    }

    // Cases of `TestCreateRequestsAndMappings`'s shape: one request per
    // container and resource, named by their indices.
    #[test]
    fn each_container_asking_a_resource_gets_a_request_named_by_its_indices() {
        let p = pod(json!({"containers": [
            container("a", json!({"cpu": "1", "example.com/fpga": "1", "nvidia.com/gpu": "2"})),
            container("b", json!({"nvidia.com/gpu": "1"})),
        ]}));
        let (requests, mappings) =
            extended_requests(&p, &BTreeSet::from(["nvidia.com/gpu", "example.com/fpga"]));
        assert_eq!(
            names(&requests),
            [
                ("container-0-request-1".to_string(), 1),
                ("container-0-request-2".to_string(), 2),
                ("container-1-request-0".to_string(), 1),
            ]
        );
        assert_eq!(requests[0].resource, "example.com/fpga");
        let m: Vec<(&str, &str, &str)> = mappings
            .iter()
            .map(|m| {
                (
                    m.container_name.as_str(),
                    m.resource_name.as_str(),
                    m.request_name.as_str(),
                )
            })
            .collect();
        assert_eq!(
            m,
            [
                ("a", "example.com/fpga", "container-0-request-1"),
                ("a", "nvidia.com/gpu", "container-0-request-2"),
                ("b", "nvidia.com/gpu", "container-1-request-0"),
            ]
        );
        // A resource the node advertises gets no request.
        let (requests, _) = extended_requests(&p, &BTreeSet::from(["nvidia.com/gpu"]));
        assert_eq!(requests.len(), 2);
    }

    #[test]
    fn init_containers_reuse_the_requests_of_the_containers_after_them_and_share_the_largest() {
        let p = pod(json!({
            "initContainers": [
                container("init-a", json!({"nvidia.com/gpu": "3"})),
                container("init-b", json!({"nvidia.com/gpu": "2"})),
                {"name": "sidecar", "image": "i", "restartPolicy": "Always",
                 "resources": {"requests": {"nvidia.com/gpu": "1"}}}
            ],
            "containers": [container("main", json!({"nvidia.com/gpu": "1"}))]
        }));
        let (requests, mappings) = extended_requests(&p, &BTreeSet::from(["nvidia.com/gpu"]));
        // init-a reuses the sidecar's and main's (2) and asks 1 more;
        // init-b reuses them too and asks nothing.
        assert_eq!(
            names(&requests),
            [
                ("container-0-request-0".to_string(), 1),
                ("container-2-request-0".to_string(), 1),
                ("container-3-request-0".to_string(), 1),
            ]
        );
        let of = |c: &str| {
            mappings
                .iter()
                .filter(|m| m.container_name == c)
                .map(|m| m.request_name.as_str())
                .collect::<Vec<_>>()
        };
        assert_eq!(
            of("init-a"),
            [
                "container-2-request-0",
                "container-3-request-0",
                "container-0-request-0"
            ]
        );
        assert_eq!(
            of("init-b"),
            ["container-2-request-0", "container-3-request-0"]
        );
        assert_eq!(of("main"), ["container-3-request-0"]);
    }
}
