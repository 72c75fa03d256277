//! Devices through Dynamic Resource Allocation on a real control plane:
//! ResourceSlices published by the test as a DRA driver's kubelet plugin
//! would, for KWOK nodes that advertise no GPU, and claims whose
//! allocations the API server must accept as kube-scheduler's.

mod common;

use common::*;
use k8s_openapi::api::resource::v1 as resource;
use kube::api::Api;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gang_claiming_devices_binds_whole_once_slices_offer_enough_and_a_claim_stays_in_one_domain()
 {
    let _g = serial();
    let s = Scenario::new("dra").await;
    const DRIVER: &str = "gpu.example.com";
    // No node advertises a GPU: every device comes from a slice.
    for n in ["a", "b", "c", "d"] {
        s.node(n, 0).await;
    }
    let class = s.device_class("gpu", DRIVER).await;
    s.device_slice(DRIVER, "a", "p0", &[("gpu-0", "x"), ("gpu-1", "y")])
        .await;
    s.claim_template("one-gpu", &class, 1).await;
    let sched = Scheduler::start(&s, "dragon", "");
    s.podgroup("g", 3, json!({})).await;
    let claiming = json!({
        "metadata": {"labels": {"scheduling.x-k8s.io/pod-group": "g"}},
        "spec": {"resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}]}
    });
    for i in 0..3 {
        s.pod_with(&format!("g-{i}"), None, 0, claiming.clone())
            .await;
    }
    // Two devices for three members: none is bound, and each says why.
    s.until_explained(90, "g-0", "cannot allocate all claims")
        .await;
    assert_eq!(bound(&s.placement("g-").await), 0, "{}", sched.log());
    // A slice on b adds two: the gang binds whole, each member's claim
    // allocated on its node and reserved for it.
    s.device_slice(DRIVER, "b", "p0", &[("gpu-0", "x"), ("gpu-1", "x")])
        .await;
    until(90, "the gang bound whole", || async {
        bound(&s.placement("g-").await) == 3
    })
    .await;
    let placement = s.placement("g-").await;
    let mut devices = Vec::new();
    for i in 0..3 {
        let pod = format!("g-{i}");
        let claim = s.claim_of(&pod, "gpu").await.expect("its claim");
        let status = claim.status.expect("a status");
        let results = status
            .allocation
            .and_then(|a| a.devices)
            .and_then(|d| d.results)
            .expect("allocated");
        assert_eq!(results.len(), 1);
        let node = placement[&pod].clone().expect("bound");
        assert_eq!(
            format!("{}-p0", node),
            results[0].pool,
            "{pod}'s device is on its node"
        );
        devices.push(format!("{}/{}", results[0].pool, results[0].device));
        let reserved = status.reserved_for.expect("reserved");
        assert!(reserved.iter().any(|r| r.name == pod), "{reserved:?}");
    }
    devices.sort();
    devices.dedup();
    assert_eq!(devices.len(), 3, "no device given twice: {devices:?}");
    // Two devices in one NVLink domain: c has two, in two domains; only d
    // has them.
    s.device_slice(DRIVER, "c", "p0", &[("gpu-0", "z"), ("gpu-1", "w")])
        .await;
    s.device_slice(DRIVER, "d", "p0", &[("gpu-0", "v"), ("gpu-1", "v")])
        .await;
    s.device_claim("pair", &class, 2, Some(&format!("{DRIVER}/nvlink")))
        .await;
    s.pod_with(
        "pair",
        None,
        0,
        json!({"spec": {"resourceClaims": [{"name": "gpus", "resourceClaimName": "pair"}]}}),
    )
    .await;
    until(90, "the pair bound", || async {
        bound(&s.placement("pair").await) == 1
    })
    .await;
    assert_eq!(
        s.placement("pair").await["pair"].as_deref(),
        Some(format!("{}-d", s.name).as_str()),
        "{}",
        sched.log()
    );
    // A class serving `nvidia.com/gpu`: a pod asking one on nodes that
    // advertise none is served by a device, through a claim made for it.
    s.device_class_serving("gpus", DRIVER, "nvidia.com/gpu")
        .await;
    s.pod("plain", None, 1, None).await;
    until(90, "the GPU pod bound", || async {
        bound(&s.placement("plain").await) == 1
    })
    .await;
    let node = s.placement("plain").await["plain"].clone().expect("bound");
    let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(s.client.clone(), &s.name);
    let status = pods.get("plain").await.unwrap().status.unwrap();
    let named = status
        .extended_resource_claim_status
        .expect("the pod names its extended-resource claim");
    assert_eq!(named.request_mappings[0].resource_name, "nvidia.com/gpu");
    let claims: Api<k8s_openapi::api::resource::v1::ResourceClaim> =
        Api::namespaced(s.client.clone(), &s.name);
    let claim = claims.get(&named.resource_claim_name).await.unwrap();
    let results = claim
        .status
        .and_then(|st| st.allocation)
        .and_then(|a| a.devices)
        .and_then(|d| d.results)
        .expect("allocated");
    assert_eq!(results.len(), 1);
    assert_eq!(results[0].pool, format!("{node}-p0"), "on its node");
    s.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partitions_of_one_gpu_shares_of_another_and_admin_access_are_allocated_as_the_api_server_accepts()
 {
    let _g = serial();
    let s = Scenario::new("dra-parts").await;
    const DRIVER: &str = "gpu.example.com";
    // Admin access is for namespaces an administrator marked.
    s.label_namespace(json!({"resource.kubernetes.io/admin-access": "true"}))
        .await;
    s.node("a", 0).await;
    let node = format!("{}-a", s.name);
    let slices: Api<resource::ResourceSlice> = Api::all(s.client.clone());
    let pool = json!({"name": node, "generation": 1, "resourceSliceCount": 2});
    // GPU 0's 40Gi as a counter set, in a slice of its own; its partitions
    // (two halves, or the whole), a shared GPU 1 and a plain GPU 2 in the
    // other.
    s.create(
        &slices,
        json!({
            "metadata": {"name": format!("{node}-counters"), "labels": {"dragon-e2e": s.name}},
            "spec": {"driver": DRIVER, "nodeName": node, "pool": pool,
                "sharedCounters": [{"name": "gpu-0", "counters": {"memory": {"value": "40Gi"}}}]}
        }),
    )
    .await;
    let partition = |name: &str, kind: &str, memory: &str| {
        json!({"name": name, "attributes": {"kind": {"string": kind}},
            "consumesCounters": [{"counterSet": "gpu-0", "counters": {"memory": {"value": memory}}}]})
    };
    s.create(
        &slices,
        json!({
            "metadata": {"name": format!("{node}-devices"), "labels": {"dragon-e2e": s.name}},
            "spec": {"driver": DRIVER, "nodeName": node, "pool": pool, "devices": [
                partition("gpu-0-half-0", "half", "20Gi"),
                partition("gpu-0-half-1", "half", "20Gi"),
                partition("gpu-0-whole", "whole", "40Gi"),
                {"name": "gpu-2", "attributes": {"kind": {"string": "plain"}}},
                {"name": "gpu-1", "attributes": {"kind": {"string": "shared"}},
                 "allowMultipleAllocations": true,
                 "capacity": {"memory": {"value": "40Gi", "requestPolicy": {
                     "default": "10Gi", "validRange": {"min": "10Gi", "step": "10Gi"}}}}}
            ]}
        }),
    )
    .await;
    let classes: Api<resource::DeviceClass> = Api::all(s.client.clone());
    let class = format!("{}-parts", s.name);
    s.create(
        &classes,
        json!({
            "metadata": {"name": class, "labels": {"dragon-e2e": s.name}},
            "spec": {
                "selectors": [{"cel": {"expression": format!("device.driver == \"{DRIVER}\"")}}],
                "config": [{"opaque": {"driver": DRIVER, "parameters": {
                    "apiVersion": "gpu.example.com/v1", "kind": "GpuConfig", "sharing": "TimeSlicing"}}}]
            }
        }),
    )
    .await;
    let templates: Api<resource::ResourceClaimTemplate> =
        Api::namespaced(s.client.clone(), &s.name);
    let kind = |k: &str| json!([{"cel": {"expression": format!("device.attributes[\"{DRIVER}\"].kind == \"{k}\"")}}]);
    for (name, request) in [
        (
            "half",
            json!({"deviceClassName": class, "selectors": kind("half")}),
        ),
        (
            "whole",
            json!({"deviceClassName": class, "selectors": kind("whole")}),
        ),
        (
            "plain",
            json!({"deviceClassName": class, "selectors": kind("plain")}),
        ),
        (
            "share-15",
            json!({"deviceClassName": class, "selectors": kind("shared"),
                "capacity": {"requests": {"memory": "15Gi"}}}),
        ),
        (
            "share-10",
            json!({"deviceClassName": class, "selectors": kind("shared"),
                "capacity": {"requests": {"memory": "10Gi"}}}),
        ),
        (
            "watch",
            json!({"deviceClassName": class, "selectors": kind("plain"), "adminAccess": true}),
        ),
    ] {
        s.create(
            &templates,
            json!({"metadata": {"name": name, "namespace": s.name},
                "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": request}]}}}}),
        )
        .await;
    }
    let sched = Scheduler::start(&s, "dragon", "");
    let claiming = |template: &str| json!({"spec": {"resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": template}]}});
    for (pod, template) in [
        ("half-0", "half"),
        ("half-1", "half"),
        ("share-0", "share-15"),
        ("share-1", "share-15"),
        ("plain", "plain"),
    ] {
        s.pod_with(pod, None, 0, claiming(template)).await;
    }
    until(
        90,
        "both halves, both shares and the plain GPU bound",
        || async {
            bound(&s.placement("half-").await) == 2
                && bound(&s.placement("share-").await) == 2
                && bound(&s.placement("plain").await) == 1
        },
    )
    .await;
    let result = |claim: resource::ResourceClaim| {
        let devices = claim
            .status
            .and_then(|st| st.allocation)
            .and_then(|a| a.devices)
            .expect("allocated");
        (
            devices.results.unwrap_or_default(),
            devices.config.unwrap_or_default(),
        )
    };
    let mut halves = Vec::new();
    for pod in ["half-0", "half-1"] {
        let (results, config) = result(s.claim_of(pod, "gpu").await.expect("its claim"));
        halves.push(results[0].device.clone());
        // The class's configuration, for every request of the claim.
        assert_eq!(config.len(), 1, "{config:?}");
        assert_eq!(config[0].source, "FromClass");
        assert_eq!(config[0].requests, None);
    }
    halves.sort();
    assert_eq!(halves, ["gpu-0-half-0", "gpu-0-half-1"]);
    let mut shares = Vec::new();
    for pod in ["share-0", "share-1"] {
        let (results, _) = result(s.claim_of(pod, "gpu").await.expect("its claim"));
        assert_eq!(results[0].device, "gpu-1");
        // 15Gi rounded up to the next 10Gi step.
        let taken = results[0]
            .consumed_capacity
            .as_ref()
            .and_then(|c| c.get("memory"))
            .expect("the share's capacity");
        assert_eq!(
            dragon_framework::quantity::parse(&taken.0, 1).ok(),
            Some(20 << 30),
            "{taken:?}"
        );
        shares.push(results[0].share_id.clone().expect("a share"));
    }
    assert_ne!(shares[0], shares[1], "two shares of one device");
    // The whole GPU 0 would take the halves' counters, and GPU 1 has no
    // 10Gi left: both wait, named.
    s.pod_with("whole", None, 0, claiming("whole")).await;
    s.pod_with("share-2", None, 0, claiming("share-10")).await;
    s.until_explained(90, "whole", "cannot allocate all claims")
        .await;
    s.until_explained(90, "share-2", "cannot allocate all claims")
        .await;
    // A monitor with admin access gets the plain GPU a pod holds. (A
    // partition or a share would still need its counters or capacity, as
    // in kube's allocator.)
    s.pod_with("watch", None, 0, claiming("watch")).await;
    let watching = until_within(90, || async { bound(&s.placement("watch").await) == 1 }).await;
    assert!(
        watching,
        "the monitor was not bound: {:?}\n{}",
        s.events_for("watch").await,
        sched.log()
    );
    let (results, _) = result(s.claim_of("watch", "gpu").await.expect("its claim"));
    assert_eq!(results[0].admin_access, Some(true));
    assert_eq!(results[0].device, "gpu-2", "{results:?}");
    assert_eq!(bound(&s.placement("whole").await), 0, "{}", sched.log());
    assert_eq!(bound(&s.placement("share-2").await), 0);
    s.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn any_extended_resource_a_node_does_not_advertise_is_served_through_the_class_that_names_it()
{
    let _g = serial();
    let s = Scenario::new("dra-extended").await;
    const DRIVER: &str = "fpga.example.com";
    s.node("a", 0).await;
    s.device_slice(
        DRIVER,
        "a",
        "p0",
        &[("fpga-0", "x"), ("fpga-1", "x"), ("fpga-2", "x")],
    )
    .await;
    let class = s
        .device_class_serving("fpga", DRIVER, "example.com/fpga")
        .await;
    let sched = Scheduler::start(&s, "dragon", "");
    let container = |name: &str, resource: &str| {
        json!({"name": name, "image": "fake", "resources": {
            "requests": {"cpu": "100m", resource: "1"}, "limits": {resource: "1"}}})
    };
    // Two containers asking one FPGA each: two requests, one per container,
    // each named by the container's index and the resource's among its
    // requests by name (after `cpu`).
    s.pod_with(
        "fpga",
        None,
        0,
        json!({"spec": {"containers": [
            container("first", "example.com/fpga"),
            container("second", "example.com/fpga")
        ]}}),
    )
    .await;
    // Every class serves its own `deviceclass.resource.kubernetes.io/` name.
    let implicit = format!("deviceclass.resource.kubernetes.io/{class}");
    s.pod_with(
        "implicit",
        None,
        0,
        json!({"spec": {"containers": [container("only", &implicit)]}}),
    )
    .await;
    let served = until_within(90, || async {
        bound(&s.placement("fpga").await) == 1 && bound(&s.placement("implicit").await) == 1
    })
    .await;
    assert!(
        served,
        "not bound: {:?} {:?}\n{}",
        s.events_for("fpga").await,
        s.events_for("implicit").await,
        sched.log()
    );
    let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(s.client.clone(), &s.name);
    let claims: Api<resource::ResourceClaim> = Api::namespaced(s.client.clone(), &s.name);
    let mut devices = Vec::new();
    for (pod, resource, wanted) in [
        (
            "fpga",
            "example.com/fpga",
            vec![
                ("first", "container-0-request-1"),
                ("second", "container-1-request-1"),
            ],
        ),
        (
            "implicit",
            implicit.as_str(),
            vec![("only", "container-0-request-1")],
        ),
    ] {
        let status = pods.get(pod).await.unwrap().status.unwrap();
        let named = status
            .extended_resource_claim_status
            .expect("the pod names its extended-resource claim");
        let mappings: Vec<(&str, &str)> = named
            .request_mappings
            .iter()
            .inspect(|m| assert_eq!(m.resource_name, resource))
            .map(|m| (m.container_name.as_str(), m.request_name.as_str()))
            .collect();
        assert_eq!(mappings, wanted, "{pod}");
        let claim = claims.get(&named.resource_claim_name).await.unwrap();
        let requests: Vec<String> = claim
            .spec
            .and_then(|sp| sp.devices)
            .and_then(|d| d.requests)
            .unwrap_or_default()
            .into_iter()
            .map(|r| r.name)
            .collect();
        assert_eq!(
            requests,
            wanted
                .iter()
                .map(|(_, r)| r.to_string())
                .collect::<Vec<_>>()
        );
        let results = claim
            .status
            .and_then(|st| st.allocation)
            .and_then(|a| a.devices)
            .and_then(|d| d.results)
            .expect("allocated");
        assert_eq!(results.len(), wanted.len(), "{pod}: {results:?}");
        devices.extend(results.into_iter().map(|r| r.device));
    }
    devices.sort();
    assert_eq!(devices, ["fpga-0", "fpga-1", "fpga-2"], "each device once");
    s.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_device_taint_rule_keeps_claims_off_the_devices_it_selects_until_it_is_deleted() {
    let _g = serial();
    let s = Scenario::new("dra-taints").await;
    const DRIVER: &str = "gpu.example.com";
    s.node("a", 0).await;
    let class = s.device_class("gpu", DRIVER).await;
    s.device_slice(DRIVER, "a", "p0", &[("gpu-0", "x"), ("gpu-1", "x")])
        .await;
    let rules: Api<resource::DeviceTaintRule> = Api::all(s.client.clone());
    let rule = format!("{}-maintenance", s.name);
    s.create(
        &rules,
        json!({
            "metadata": {"name": rule, "labels": {"dragon-e2e": s.name}},
            "spec": {
                "deviceSelector": {"driver": DRIVER, "pool": format!("{}-a-p0", s.name), "device": "gpu-0"},
                "taint": {"key": "example.com/maintenance", "effect": "NoSchedule"}
            }
        }),
    )
    .await;
    s.device_claim("both", &class, 2, None).await;
    s.device_claim("one", &class, 1, None).await;
    let sched = Scheduler::start(&s, "dragon", "");
    for (pod, claim) in [("both", "both"), ("one", "one")] {
        s.pod_with(
            pod,
            None,
            0,
            json!({"spec": {"resourceClaims": [{"name": "gpu", "resourceClaimName": claim}]}}),
        )
        .await;
    }
    until(90, "the pod claiming one device bound", || async {
        bound(&s.placement("one").await) == 1
    })
    .await;
    let one = s.claim_of("one", "gpu").await.expect("its claim");
    let results = one
        .status
        .and_then(|st| st.allocation)
        .and_then(|a| a.devices)
        .and_then(|d| d.results)
        .expect("allocated");
    assert_eq!(results[0].device, "gpu-1", "not the tainted device");
    s.until_explained(90, "both", "cannot allocate all claims")
        .await;
    // The maintenance is over: with gpu-1 held, "both" still waits; once
    // "one" is gone it gets both devices.
    rules
        .delete(&rule, &Default::default())
        .await
        .expect("deleted");
    let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(s.client.clone(), &s.name);
    pods.delete("one", &kube::api::DeleteParams::default().grace_period(0))
        .await
        .expect("deleted");
    let freed = until_within(90, || async { bound(&s.placement("both").await) == 1 }).await;
    assert!(
        freed,
        "not bound: {:?}\n{}",
        s.events_for("both").await,
        sched.log()
    );
    s.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_given_a_device_with_binding_conditions_is_bound_once_its_driver_says_they_hold_and_gives_back_one_that_failed()
 {
    let _g = serial();
    let s = Scenario::new("dra-binding").await;
    const DRIVER: &str = "fabric.example.com";
    s.node("a", 0).await;
    let class = s.device_class("fabric", DRIVER).await;
    let slices: Api<resource::ResourceSlice> = Api::all(s.client.clone());
    let pool = format!("{}-fabric", s.name);
    // A device reachable from every node, attached to one on demand: bound
    // to the node chosen, and ready once its driver says it is attached.
    s.create(
        &slices,
        json!({
            "metadata": {"name": pool, "labels": {"dragon-e2e": s.name}},
            "spec": {"driver": DRIVER, "allNodes": true,
                "pool": {"name": pool, "generation": 1, "resourceSliceCount": 1},
                "devices": [
                    {"name": "gpu-0", "bindsToNode": true,
                     "bindingConditions": ["Attached"], "bindingFailureConditions": ["AttachFailed"]},
                    {"name": "gpu-1", "bindsToNode": true,
                     "bindingConditions": ["Attached"], "bindingFailureConditions": ["AttachFailed"]}
                ]}
        }),
    )
    .await;
    s.device_claim("attached", &class, 1, None).await;
    let sched = Scheduler::start(&s, "dragon", "");
    s.pod_with(
        "p",
        None,
        0,
        json!({"spec": {"resourceClaims": [{"name": "gpu", "resourceClaimName": "attached"}]}}),
    )
    .await;
    let claims: Api<resource::ResourceClaim> = Api::namespaced(s.client.clone(), &s.name);
    until(90, "the claim allocated, to node a only", || async {
        claims
            .get("attached")
            .await
            .ok()
            .and_then(|c| c.status)
            .and_then(|st| st.allocation)
            .is_some()
    })
    .await;
    let claim = claims.get("attached").await.unwrap();
    let allocation = claim.status.clone().and_then(|st| st.allocation).unwrap();
    let results = allocation.devices.and_then(|d| d.results).unwrap();
    assert_eq!(
        results[0].binding_conditions.as_deref(),
        Some(&["Attached".to_string()][..])
    );
    let term = &allocation
        .node_selector
        .expect("bound to the node")
        .node_selector_terms[0];
    assert_eq!(
        term.match_fields.as_ref().expect("by name")[0].values,
        Some(vec![format!("{}-a", s.name)])
    );
    assert_eq!(
        bound(&s.placement("p").await),
        0,
        "not before the device is attached"
    );
    // The driver attaches it.
    let mut attached = claim;
    attached.status.as_mut().unwrap().devices = Some(vec![reported(
        DRIVER,
        &pool,
        "gpu-0",
        ("Attached", "Attached", "attached to the node"),
    )]);
    claims
        .replace_status("attached", &Default::default(), &attached)
        .await
        .expect("the driver's status");
    let bound_now = until_within(90, || async { bound(&s.placement("p").await) == 1 }).await;
    assert!(bound_now, "{:?}\n{}", s.events_for("p").await, sched.log());
    // A device whose attachment fails: the bind fails naming it, and the
    // claim is given back (deallocated, then allocated afresh).
    s.device_claim("flaky", &class, 1, None).await;
    s.pod_with(
        "q",
        None,
        0,
        json!({"spec": {"resourceClaims": [{"name": "gpu", "resourceClaimName": "flaky"}]}}),
    )
    .await;
    let allocated_at = || async {
        claims
            .get("flaky")
            .await
            .ok()
            .and_then(|c| c.status)
            .and_then(|st| st.allocation)
            .and_then(|a| a.allocation_timestamp)
            .map(|t| t.0)
    };
    until(90, "the flaky claim allocated", || async {
        allocated_at().await.is_some()
    })
    .await;
    let first = allocated_at().await;
    let mut failing = claims.get("flaky").await.unwrap();
    let device = failing
        .status
        .as_ref()
        .and_then(|st| st.allocation.as_ref())
        .and_then(|a| a.devices.as_ref())
        .and_then(|d| d.results.as_ref())
        .map(|r| r[0].device.clone())
        .expect("a device");
    failing.status.as_mut().unwrap().devices = Some(vec![reported(
        DRIVER,
        &pool,
        &device,
        ("AttachFailed", "NoPath", "no path to the node"),
    )]);
    claims
        .replace_status("flaky", &Default::default(), &failing)
        .await
        .expect("the driver's status");
    s.until_explained(90, "q", "failed to bind (AttachFailed: NoPath")
        .await;
    let again = until_within(90, || async {
        let now = allocated_at().await;
        now.is_some() && now != first
    })
    .await;
    assert!(again, "{:?}\n{}", s.events_for("q").await, sched.log());
    assert_eq!(bound(&s.placement("q").await), 0);
    s.cleanup().await;
}

/// A device's status as its driver reports it: condition `(type, reason,
/// message)` true.
fn reported(
    driver: &str,
    pool: &str,
    device: &str,
    (condition, reason, message): (&str, &str, &str),
) -> resource::AllocatedDeviceStatus {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
    resource::AllocatedDeviceStatus {
        driver: driver.into(),
        pool: pool.into(),
        device: device.into(),
        conditions: Some(vec![Condition {
            type_: condition.into(),
            status: "True".into(),
            reason: reason.into(),
            message: message.into(),
            last_transition_time: Time(k8s_openapi::jiff::Timestamp::now()),
            observed_generation: None,
        }]),
        ..Default::default()
    }
}

/// Kubernetes' CEL library in a claim's selector: a `version` attribute is
/// a semver, compared with `semver()` (dynamic-resource-allocation's
/// `version` case), and a selector no device meets keeps its pod pending.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_selector_comparing_semvers_picks_the_device_whose_driver_version_is_new_enough() {
    let _g = serial();
    let s = Scenario::new("dra-semver").await;
    const DRIVER: &str = "gpu.example.com";
    s.node("a", 0).await;
    let class = s.device_class("gpu", DRIVER).await;
    let slices: Api<resource::ResourceSlice> = Api::all(s.client.clone());
    let pool = format!("{}-a-p0", s.name);
    s.create(
        &slices,
        json!({
            "metadata": {"name": pool, "labels": {"dragon-e2e": s.name}},
            "spec": {
                "driver": DRIVER,
                "nodeName": format!("{}-a", s.name),
                "pool": {"name": pool, "generation": 1, "resourceSliceCount": 1},
                "devices": [
                    {"name": "old", "attributes": {"driverVersion": {"version": "0.9.0"}}},
                    {"name": "new", "attributes": {"driverVersion": {"version": "1.2.0"}}}
                ]
            }
        }),
    )
    .await;
    let claims: Api<resource::ResourceClaim> = Api::namespaced(s.client.clone(), &s.name);
    for (name, at_least) in [("recent", "v1.0"), ("future", "2.0.0")] {
        let selector = format!(
            "device.attributes[\"{DRIVER}\"].driverVersion.isGreaterThan(semver(\"{at_least}\", true))"
        );
        s.create(
            &claims,
            json!({"metadata": {"name": name, "namespace": s.name},
                "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
                    "deviceClassName": class, "count": 1,
                    "selectors": [{"cel": {"expression": selector}}]}}]}}}),
        )
        .await;
    }
    let sched = Scheduler::start(&s, "dragon", "");
    for name in ["recent", "future"] {
        s.pod_with(
            name,
            None,
            0,
            json!({"spec": {"resourceClaims": [{"name": "gpu", "resourceClaimName": name}]}}),
        )
        .await;
    }
    let placed = until_within(90, || async { bound(&s.placement("recent").await) == 1 }).await;
    assert!(
        placed,
        "{:?}\n{}",
        s.events_for("recent").await,
        sched.log()
    );
    let claim = claims.get("recent").await.expect("the claim");
    let results = claim
        .status
        .and_then(|st| st.allocation)
        .and_then(|a| a.devices)
        .and_then(|d| d.results)
        .expect("allocated");
    let devices: Vec<&str> = results.iter().map(|r| r.device.as_str()).collect();
    assert_eq!(devices, ["new"]);
    s.until_explained(30, "future", "cannot allocate all claims")
        .await;
    assert_eq!(bound(&s.placement("future").await), 0);
    s.cleanup().await;
}
