//! The claim writes before a Binding, as kube-scheduler's DynamicResources
//! plugin makes them in pre-bind: a claim's allocation and reservation,
//! and the claim a pod's extended resources are served through.

use dragon_framework::devices::{Allocation, ExtendedChoice};
use dragon_framework::{ApiError, ObjectKey};
use k8s_openapi::api::core::v1 as core;
use k8s_openapi::api::resource::v1 as resource;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;

use super::{KubeIo, object, typed};
use crate::cluster_io::ClaimProgress;
use crate::translate::devices::EXTENDED_CLAIM;
use crate::translate::extended::{ExtendedRequest, extended_requests};

/// Finalizer kube-scheduler puts on a claim before allocating it, so the
/// claim is not deleted while its devices may be in use.
const CLAIM_PROTECTION: &str = "resource.kubernetes.io/delete-protection";

/// A share's `shareID`: a UUID made from the claim's uid and the result's
/// index, so writing the same allocation again names the same shares.
fn share_id(claim_uid: &str, index: usize) -> String {
    let h = dragon_runtime::sha256_hex(format!("{claim_uid}/{index}").as_bytes());
    // Version 5 and the RFC 4122 variant, as a name-based UUID has them.
    let variant = ["8", "9", "a", "b"][usize::from(h.as_bytes()[16] % 4)];
    format!(
        "{}-{}-5{}-{variant}{}-{}",
        &h[0..8],
        &h[8..12],
        &h[13..16],
        &h[17..20],
        &h[20..32]
    )
}

/// An allocation as `status.allocation` holds it, for the claim whose uid
/// is `claim_uid`.
fn allocation_result(a: &Allocation, claim_uid: &str) -> resource::AllocationResult {
    let requirement = |r: &dragon_framework::Requirement| core::NodeSelectorRequirement {
        key: r.key.clone(),
        operator: format!("{:?}", r.operator),
        values: (!r.values.is_empty()).then(|| r.values.clone()),
    };
    resource::AllocationResult {
        allocation_timestamp: Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            k8s_openapi::jiff::Timestamp::now(),
        )),
        devices: Some(resource::DeviceAllocationResult {
            config: (!a.config.is_empty()).then(|| {
                a.config
                    .iter()
                    .map(|c| resource::DeviceAllocationConfiguration {
                        source: if c.from_class {
                            "FromClass"
                        } else {
                            "FromClaim"
                        }
                        .into(),
                        requests: (!c.requests.is_empty()).then(|| c.requests.clone()),
                        opaque: Some(resource::OpaqueDeviceConfiguration {
                            driver: c.opaque.driver.clone(),
                            parameters: k8s_openapi::apimachinery::pkg::runtime::RawExtension(
                                c.opaque.parameters.clone(),
                            ),
                        }),
                    })
                    .collect()
            }),
            results: Some(
                a.devices
                    .iter()
                    .enumerate()
                    .map(|(i, d)| resource::DeviceRequestAllocationResult {
                        request: d.request.clone(),
                        driver: d.device.driver.clone(),
                        pool: d.device.pool.clone(),
                        device: d.device.device.clone(),
                        admin_access: d.admin_access.then_some(true),
                        share_id: d.shared.then(|| share_id(claim_uid, i)),
                        binding_conditions: d.binding.any().then(|| d.binding.conditions.clone()),
                        binding_failure_conditions: (!d.binding.failure_conditions.is_empty())
                            .then(|| d.binding.failure_conditions.clone()),
                        consumed_capacity: (!d.consumed.is_empty()).then(|| {
                            d.consumed
                                .iter()
                                .map(|(name, q)| (name.clone(), milli_quantity(q.0)))
                                .collect()
                        }),
                        ..Default::default()
                    })
                    .collect(),
            ),
        }),
        node_selector: a.nodes.as_ref().map(|s| core::NodeSelector {
            node_selector_terms: s
                .terms
                .iter()
                .map(|t| core::NodeSelectorTerm {
                    match_expressions: (!t.match_expressions.is_empty())
                        .then(|| t.match_expressions.iter().map(requirement).collect()),
                    match_fields: (!t.match_fields.is_empty())
                        .then(|| t.match_fields.iter().map(requirement).collect()),
                })
                .collect(),
        }),
    }
}

impl KubeIo {
    pub(super) async fn write_extended_claim(
        &self,
        pod: &str,
        choice: &ExtendedChoice,
    ) -> Result<String, ApiError> {
        let key = object(pod)?;
        let (ns, name) = (key.namespace(), key.name());
        self.request_token().await;
        let current = self.pods(ns).get(name).await.map_err(|e| {
            typed(
                &format!("reading {pod} to serve its extended resources"),
                &e,
            )
        })?;
        // One left by an attempt whose bind failed is deleted first, so its
        // devices are not held twice.
        if current
            .status
            .as_ref()
            .is_some_and(|s| s.extended_resource_claim_status.is_some())
        {
            self.delete_extended_claim(pod).await?;
        }
        let uid = current.metadata.uid.clone().unwrap_or_default();
        let resources = choice.classes.keys().map(String::as_str).collect();
        let (requests, mappings) = extended_requests(&current, &resources);
        let allocation = split_by_request(choice, &requests).ok_or_else(|| {
            ApiError::new(
                dragon_framework::ApiErrorKind::Refused,
                format!("{pod}: its extended resources changed since its devices were chosen"),
            )
        })?;
        let claim = resource::ResourceClaim {
            metadata: ObjectMeta {
                generate_name: Some(format!("{name}-extended-resources-")),
                namespace: Some(ns.into()),
                annotations: Some([(EXTENDED_CLAIM.to_string(), "true".to_string())].into()),
                finalizers: Some(vec![CLAIM_PROTECTION.into()]),
                owner_references: Some(vec![
                    k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
                        api_version: "v1".into(),
                        kind: "Pod".into(),
                        name: name.into(),
                        uid: uid.clone(),
                        controller: Some(true),
                        block_owner_deletion: Some(true),
                    },
                ]),
                ..Default::default()
            },
            spec: Some(resource::ResourceClaimSpec {
                devices: Some(resource::DeviceClaim {
                    requests: Some(
                        requests
                            .iter()
                            .map(|r| resource::DeviceRequest {
                                name: r.name.clone(),
                                exactly: Some(resource::ExactDeviceRequest {
                                    device_class_name: choice.classes[&r.resource].clone(),
                                    allocation_mode: Some("ExactCount".into()),
                                    count: Some(i64::try_from(r.count).unwrap_or(i64::MAX)),
                                    ..Default::default()
                                }),
                                ..Default::default()
                            })
                            .collect(),
                    ),
                    ..Default::default()
                }),
            }),
            status: None,
        };
        let claims: Api<resource::ResourceClaim> = Api::namespaced(self.client.clone(), ns);
        self.request_token().await;
        let mut created = claims
            .create(&PostParams::default(), &claim)
            .await
            .map_err(|e| {
                typed(
                    &format!("creating the extended-resource claim of {pod}"),
                    &e,
                )
            })?;
        let claim_name = created.metadata.name.clone().unwrap_or_default();
        created.status = Some(resource::ResourceClaimStatus {
            allocation: Some(allocation_result(
                &allocation,
                created.metadata.uid.as_deref().unwrap_or_default(),
            )),
            reserved_for: Some(vec![resource::ResourceClaimConsumerReference {
                api_group: None,
                resource: "pods".into(),
                name: name.into(),
                uid,
            }]),
            ..Default::default()
        });
        self.request_token().await;
        let written = match claims
            .replace_status(&claim_name, &PostParams::default(), &created)
            .await
        {
            Ok(_) => {
                let status = json!({"status": {"extendedResourceClaimStatus": {
                    "resourceClaimName": claim_name,
                    "requestMappings": mappings,
                }}});
                self.request_token().await;
                self.pods(ns)
                    .patch_status(name, &PatchParams::default(), &Patch::Merge(&status))
                    .await
                    .map(|_| ())
                    .map_err(|e| typed(&format!("naming the extended-resource claim of {pod}"), &e))
            }
            Err(e) => Err(typed(
                &format!(
                    "allocating claim {} for {pod}",
                    ObjectKey::new(Some(ns), &claim_name)
                ),
                &e,
            )),
        };
        // A claim the pod does not name would hold its devices unseen: it
        // goes as soon as a write after its creation fails.
        if let Err(e) = written {
            if let Err(dropped) = self.drop_claim(ns, &claim_name).await {
                tracing::warn!(
                    pod,
                    claim = claim_name,
                    "deleting a claim left half written: {dropped}"
                );
            }
            return Err(e);
        }
        Ok(ObjectKey::new(Some(ns), &claim_name).to_string())
    }

    /// Deletes the extended-resource claim `pod`'s status names (without
    /// the delete-protection finalizer written with it, which would keep it
    /// until the pod is gone), if there is one.
    pub(super) async fn delete_extended_claim(&self, pod: &str) -> Result<(), ApiError> {
        let key = object(pod)?;
        let ns = key.namespace();
        self.request_token().await;
        let Some(current) = self
            .pods(ns)
            .get_opt(key.name())
            .await
            .map_err(|e| typed(&format!("reading {pod}"), &e))?
        else {
            return Ok(());
        };
        let Some(named) = current
            .status
            .and_then(|s| s.extended_resource_claim_status)
            .map(|s| s.resource_claim_name)
        else {
            return Ok(());
        };
        self.drop_claim(ns, &named).await
    }

    /// Deletes claim `ns/named` with the delete-protection finalizer taken
    /// off first; one already gone is fine.
    async fn drop_claim(&self, ns: &str, named: &str) -> Result<(), ApiError> {
        let claims: Api<resource::ResourceClaim> = Api::namespaced(self.client.clone(), ns);
        self.request_token().await;
        let patch = json!({"metadata": {"finalizers": null}});
        match claims
            .patch(named, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 404 => return Ok(()),
            Err(e) => {
                let claim = ObjectKey::new(Some(ns), named);
                return Err(typed(&format!("unprotecting claim {claim}"), &e));
            }
        }
        self.request_token().await;
        match claims.delete(named, &Default::default()).await {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
            Err(e) => {
                let claim = ObjectKey::new(Some(ns), named);
                Err(typed(&format!("deleting claim {claim}"), &e))
            }
        }
    }

    /// Takes `pod` off `claim`'s `reservedFor` and deallocates the claim
    /// when no pod is left on it, in one status write made against the
    /// claim as read (a conflict means someone else changed it: left).
    pub(super) async fn write_unreserve(&self, claim: &str, pod: &str) -> Result<(), ApiError> {
        let (claim_key, pod_key) = (object(claim)?, object(pod)?);
        let claims: Api<resource::ResourceClaim> =
            Api::namespaced(self.client.clone(), claim_key.namespace());
        self.request_token().await;
        let mut current = match claims.get_opt(claim_key.name()).await {
            Ok(Some(c)) => c,
            Ok(None) => return Ok(()),
            Err(e) => return Err(typed(&format!("reading claim {claim}"), &e)),
        };
        let Some(status) = current.status.as_mut() else {
            return Ok(());
        };
        let reserved = status.reserved_for.get_or_insert_with(Vec::new);
        let before = reserved.len();
        reserved.retain(|r| !(r.resource == "pods" && r.name == pod_key.name()));
        let unreserved = reserved.len() != before;
        let deallocate = reserved.is_empty() && status.allocation.is_some();
        if !unreserved && !deallocate {
            return Ok(());
        }
        if deallocate {
            status.allocation = None;
            status.devices = None;
            status.reserved_for = None;
        }
        self.request_token().await;
        claims
            .replace_status(claim_key.name(), &PostParams::default(), &current)
            .await
            .map(|_| ())
            .map_err(|e| typed(&format!("giving back claim {claim} for {pod}"), &e))
    }

    /// Whether the binding conditions of `claim`'s allocated devices all
    /// hold in its `status.devices`, as kube-scheduler's pre-bind reads
    /// them; an error when a failure condition holds.
    pub(super) async fn read_devices_progress(
        &self,
        claim: &str,
    ) -> Result<ClaimProgress, ApiError> {
        let key = object(claim)?;
        let claims: Api<resource::ResourceClaim> =
            Api::namespaced(self.client.clone(), key.namespace());
        self.request_token().await;
        let current = claims
            .get(key.name())
            .await
            .map_err(|e| typed(&format!("reading claim {claim}"), &e))?;
        devices_progress(claim, &current)
    }

    pub(super) async fn write_allocation(
        &self,
        claim: &str,
        allocation: &Allocation,
        pod: &str,
    ) -> Result<(), ApiError> {
        let (claim_key, pod_key) = (object(claim)?, object(pod)?);
        let claims: Api<resource::ResourceClaim> =
            Api::namespaced(self.client.clone(), claim_key.namespace());
        self.request_token().await;
        let uid = self
            .pods(pod_key.namespace())
            .get(pod_key.name())
            .await
            .map_err(|e| typed(&format!("reading {pod} to reserve claim {claim}"), &e))?
            .metadata
            .uid
            .unwrap_or_default();
        self.request_token().await;
        let mut current = claims
            .get(claim_key.name())
            .await
            .map_err(|e| typed(&format!("reading claim {claim}"), &e))?;
        let finalizers = current.metadata.finalizers.get_or_insert_with(Vec::new);
        if !finalizers.iter().any(|f| f == CLAIM_PROTECTION) {
            finalizers.push(CLAIM_PROTECTION.to_string());
            self.request_token().await;
            current = claims
                .replace(claim_key.name(), &PostParams::default(), &current)
                .await
                .map_err(|e| typed(&format!("protecting claim {claim}"), &e))?;
        }
        let claim_uid = current.metadata.uid.clone().unwrap_or_default();
        let status = current.status.get_or_insert_with(Default::default);
        if status.allocation.is_none() {
            status.allocation = Some(allocation_result(allocation, &claim_uid));
        }
        let reserved = status.reserved_for.get_or_insert_with(Vec::new);
        if !reserved.iter().any(|r| r.uid == uid) {
            reserved.push(resource::ResourceClaimConsumerReference {
                api_group: None,
                resource: "pods".into(),
                name: pod_key.name().into(),
                uid,
            });
        }
        self.request_token().await;
        claims
            .replace_status(claim_key.name(), &PostParams::default(), &current)
            .await
            .map(|_| ())
            .map_err(|e| typed(&format!("allocating claim {claim} for {pod}"), &e))
    }
}

/// Whether `current`'s devices' binding conditions hold (see
/// [`KubeIo::read_devices_progress`]).
fn devices_progress(
    claim: &str,
    current: &resource::ResourceClaim,
) -> Result<ClaimProgress, ApiError> {
    let Some(status) = current.status.as_ref() else {
        return Ok(ClaimProgress::Binding);
    };
    let Some(results) = status
        .allocation
        .as_ref()
        .and_then(|a| a.devices.as_ref())
        .and_then(|d| d.results.as_ref())
    else {
        return Ok(ClaimProgress::Binding);
    };
    for r in results {
        let wanted = r.binding_conditions.as_deref().unwrap_or_default();
        if wanted.is_empty() {
            continue;
        }
        let Some(device) = status.devices.iter().flatten().find(|d| {
            d.driver == r.driver
                && d.pool == r.pool
                && d.device == r.device
                && d.share_id == r.share_id
        }) else {
            return Ok(ClaimProgress::Binding);
        };
        let holds = |name: &str| {
            device
                .conditions
                .iter()
                .flatten()
                .find(|c| c.type_ == name)
                .filter(|c| c.status == "True")
        };
        for failed in r.binding_failure_conditions.iter().flatten() {
            if let Some(c) = holds(failed) {
                return Err(ApiError::new(
                    dragon_framework::ApiErrorKind::Refused,
                    format!(
                        "resourceclaim {claim}: device {}/{}/{} failed to bind ({failed}: {}: {})",
                        r.driver, r.pool, r.device, c.reason, c.message
                    ),
                ));
            }
        }
        if !wanted.iter().all(|w| holds(w).is_some()) {
            return Ok(ClaimProgress::Binding);
        }
    }
    Ok(ClaimProgress::Bound)
}

/// `choice`'s devices under kube's request names: each request takes its
/// count of its resource's devices, in order. `None` when the counts do not
/// add up (the pod changed since its devices were chosen).
fn split_by_request(choice: &ExtendedChoice, requests: &[ExtendedRequest]) -> Option<Allocation> {
    let mut left: std::collections::BTreeMap<
        &str,
        Vec<&dragon_framework::devices::AllocatedDevice>,
    > = std::collections::BTreeMap::new();
    for d in choice.allocation.devices.iter().rev() {
        left.entry(d.request.as_str()).or_default().push(d);
    }
    let mut devices = Vec::new();
    for r in requests {
        let pool = left.get_mut(r.resource.as_str())?;
        for _ in 0..r.count {
            let mut d = pool.pop()?.clone();
            d.request = r.name.clone();
            devices.push(d);
        }
    }
    left.values().all(|v| v.is_empty()).then(|| Allocation {
        devices,
        ..choice.allocation.clone()
    })
}

/// A quantity of `milli` thousandths, written as the API server would
/// (whole units when it divides).
fn milli_quantity(milli: u64) -> k8s_openapi::apimachinery::pkg::api::resource::Quantity {
    k8s_openapi::apimachinery::pkg::api::resource::Quantity(if milli.is_multiple_of(1000) {
        (milli / 1000).to_string()
    } else {
        format!("{milli}m")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn devices_bind_once_every_binding_condition_holds_and_fail_on_a_failure_condition() {
        let claim = |conditions: serde_json::Value| -> resource::ResourceClaim {
            serde_json::from_value(json!({
                "metadata": {"name": "c", "namespace": "ml"},
                "spec": {},
                "status": {
                    "allocation": {"devices": {"results": [
                        {"request": "r", "driver": "d", "pool": "p", "device": "plain"},
                        {"request": "r", "driver": "d", "pool": "p", "device": "fabric",
                         "bindingConditions": ["Attached"], "bindingFailureConditions": ["AttachFailed"]}
                    ]}},
                    "devices": [{"driver": "d", "pool": "p", "device": "fabric", "conditions": conditions}]
                }
            }))
            .expect("a claim")
        };
        let condition = |t: &str, status: &str| {
            json!({"type": t, "status": status, "reason": "Driver", "message": "m",
                "lastTransitionTime": "2026-01-01T00:00:00Z"})
        };
        assert_eq!(
            devices_progress("ml/c", &claim(json!([]))),
            Ok(ClaimProgress::Binding)
        );
        assert_eq!(
            devices_progress("ml/c", &claim(json!([condition("Attached", "False")]))),
            Ok(ClaimProgress::Binding)
        );
        assert_eq!(
            devices_progress("ml/c", &claim(json!([condition("Attached", "True")]))),
            Ok(ClaimProgress::Bound)
        );
        let failed = devices_progress(
            "ml/c",
            &claim(json!([
                condition("Attached", "False"),
                condition("AttachFailed", "True")
            ])),
        )
        .expect_err("failed");
        assert_eq!(
            failed.message,
            "resourceclaim ml/c: device d/p/fabric failed to bind (AttachFailed: Driver: m)"
        );
    }

    #[test]
    fn a_share_id_is_a_normalized_uuid_stable_for_its_claim_and_result() {
        let id = share_id("3f1c-uid", 2);
        assert_eq!(id, share_id("3f1c-uid", 2));
        assert_ne!(id, share_id("3f1c-uid", 3));
        let parts: Vec<&str> = id.split('-').collect();
        assert_eq!(
            parts.iter().map(|p| p.len()).collect::<Vec<_>>(),
            [8, 4, 4, 4, 12]
        );
        assert!(
            id.chars()
                .all(|c| c == '-' || c.is_ascii_digit() || ('a'..='f').contains(&c))
        );
    }

    #[test]
    fn an_allocation_writes_admin_access_shares_and_configuration() {
        use dragon_framework::devices::{
            AllocatedConfig, AllocatedDevice, DeviceId, OpaqueConfig, Quantity,
        };
        let id = |d: &str| DeviceId {
            driver: "gpu.example.com".into(),
            pool: "node-1".into(),
            device: d.into(),
        };
        let mut admin = AllocatedDevice::new("monitor", id("gpu-0"));
        admin.admin_access = true;
        let mut share = AllocatedDevice::new("slice", id("gpu-1"));
        share.shared = true;
        share
            .consumed
            .insert("memory".into(), Quantity(10_737_418_240_000));
        share.consumed.insert("cores".into(), Quantity(500));
        let a = Allocation {
            devices: vec![admin, share],
            nodes: None,
            config: vec![AllocatedConfig {
                from_class: true,
                requests: Vec::new(),
                opaque: OpaqueConfig {
                    driver: "gpu.example.com".into(),
                    parameters: json!({"sharing": "TimeSlicing"}),
                },
            }],
        };
        let r = allocation_result(&a, "uid-1");
        let v = serde_json::to_value(&r).expect("serializable");
        let results = &v["devices"]["results"];
        assert_eq!(results[0]["adminAccess"], json!(true));
        assert!(results[0].get("shareID").is_none());
        assert_eq!(results[1]["shareID"], json!(share_id("uid-1", 1)));
        assert_eq!(
            results[1]["consumedCapacity"],
            json!({"cores": "500m", "memory": "10737418240"})
        );
        assert_eq!(v["devices"]["config"][0]["source"], json!("FromClass"));
        assert_eq!(
            v["devices"]["config"][0]["opaque"]["parameters"],
            json!({"sharing": "TimeSlicing"})
        );
        assert!(v["devices"]["config"][0].get("requests").is_none());
    }
}
