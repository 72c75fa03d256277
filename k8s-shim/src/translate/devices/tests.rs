//! Reading slices, classes and claims with the fields v1.37 allocates by.

use super::*;
use serde_json::json;

#[test]
fn a_partitioned_and_shared_slice_is_read_with_its_counters_and_policies() {
    let counters: resource::ResourceSlice = serde_json::from_value(json!({
        "metadata": {"name": "node-1-counters"},
        "spec": {"driver": "gpu.example.com", "nodeName": "node-1",
            "pool": {"name": "node-1", "generation": 1, "resourceSliceCount": 2},
            "sharedCounters": [{"name": "gpu-0", "counters": {"memory": {"value": "80Gi"}}}]}
    }))
    .expect("a slice");
    let (_, s) = resource_slice(&counters).expect("readable");
    assert_eq!(
        s.counters["gpu-0"]["memory"],
        Quantity(80 * (1 << 30) * 1000)
    );
    let devices: resource::ResourceSlice = serde_json::from_value(json!({
        "metadata": {"name": "node-1-devices"},
        "spec": {"driver": "gpu.example.com", "nodeName": "node-1",
            "pool": {"name": "node-1", "generation": 1, "resourceSliceCount": 2},
            "devices": [
                {"name": "gpu-0-mig-1g", "consumesCounters": [
                    {"counterSet": "gpu-0", "counters": {"memory": {"value": "10Gi"}}}]},
                {"name": "gpu-1", "allowMultipleAllocations": true, "capacity": {
                    "memory": {"value": "80Gi", "requestPolicy": {"default": "10Gi",
                        "validRange": {"min": "10Gi", "step": "10Gi"}}},
                    "cores": {"value": "100", "requestPolicy": {"validValues": ["25", "50", "100"]}}}}
            ]}
    }))
    .expect("a slice");
    let (_, s) = resource_slice(&devices).expect("readable");
    assert_eq!(s.devices[0].consumes[0].set, "gpu-0");
    let gib = |n: u64| Quantity(n * (1 << 30) * 1000);
    assert!(s.devices[1].shared);
    assert_eq!(
        s.devices[1].policies["memory"],
        RequestPolicy {
            default: Some(gib(10)),
            valid: ValidAmounts::Range {
                min: gib(10),
                max: None,
                step: Some(gib(10))
            },
        }
    );
    assert_eq!(
        s.devices[1].policies["cores"].valid,
        ValidAmounts::Values(vec![Quantity(25_000), Quantity(50_000), Quantity(100_000)])
    );
    let mut bad = devices.clone();
    bad.spec.devices.as_mut().expect("devices")[1]
        .capacity
        .as_mut()
        .expect("capacity")
        .get_mut("memory")
        .expect("memory")
        .request_policy
        .as_mut()
        .expect("a policy")
        .default = Some(k8s_openapi::apimachinery::pkg::api::resource::Quantity(
        "ten".into(),
    ));
    let e = resource_slice(&bad).expect_err("unreadable").to_string();
    assert!(
        e.starts_with("ResourceSlice node-1-devices: spec.devices[1].capacity[\"memory\"].requestPolicy.default:"),
        "{e}"
    );
}

#[test]
fn a_claim_is_read_with_admin_access_capacity_constraints_and_configuration() {
    let c: resource::ResourceClaim = serde_json::from_value(json!({
        "metadata": {"name": "c", "namespace": "ml"},
        "spec": {"devices": {
            "requests": [
                {"name": "monitor", "exactly": {"deviceClassName": "gpu", "adminAccess": true,
                    "allocationMode": "All"}},
                {"name": "slice", "exactly": {"deviceClassName": "gpu",
                    "capacity": {"requests": {"memory": "20Gi"}}}}
            ],
            "constraints": [{"distinctAttribute": "gpu.example.com/uuid", "requests": ["slice"]}],
            "config": [{"requests": ["slice"], "opaque": {"driver": "gpu.example.com",
                "parameters": {"sharing": "MPS"}}}]
        }}
    }))
    .expect("a claim");
    let claim = claim(&c);
    assert_eq!(claim.unusable, None);
    assert!(claim.requests[0].choices[0].admin_access);
    assert_eq!(
        claim.requests[1].choices[0].capacity["memory"],
        Quantity(20 * (1 << 30) * 1000)
    );
    assert_eq!(claim.constraints[0].rule, AttributeRule::Distinct);
    assert_eq!(claim.config[0].requests, vec!["slice".to_string()]);
    assert_eq!(claim.config[0].opaque.parameters, json!({"sharing": "MPS"}));
    let mut both = c.clone();
    both.spec
        .as_mut()
        .and_then(|s| s.devices.as_mut())
        .expect("devices")
        .constraints = Some(vec![resource::DeviceConstraint {
        match_attribute: Some("a".into()),
        distinct_attribute: Some("b".into()),
        requests: None,
    }]);
    assert_eq!(
        super::claim(&both).unusable.as_deref(),
        Some("spec.devices.constraints[0]: both matchAttribute and distinctAttribute are set")
    );
}
