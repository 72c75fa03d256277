//! The claim writes before a Binding, as kube-scheduler's DynamicResources
//! plugin makes them in pre-bind: a claim's allocation and reservation,
//! and the claim a pod's extended resources are served through.

use dragon_framework::ApiError;
use dragon_framework::devices::Allocation;
use k8s_openapi::api::core::v1 as core;
use k8s_openapi::api::resource::v1 as resource;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;

use super::{KubeIo, object, typed};

/// Finalizer kube-scheduler puts on a claim before allocating it, so the
/// claim is not deleted while its devices may be in use.
const CLAIM_PROTECTION: &str = "resource.kubernetes.io/delete-protection";

/// An allocation as `status.allocation` holds it.
fn allocation_result(a: &Allocation) -> resource::AllocationResult {
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
            config: None,
            results: Some(
                a.devices
                    .iter()
                    .map(|d| resource::DeviceRequestAllocationResult {
                        request: d.request.clone(),
                        driver: d.device.driver.clone(),
                        pool: d.device.pool.clone(),
                        device: d.device.device.clone(),
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

/// The annotation kube-scheduler puts on a claim it makes for a pod's
/// extended resources.
const EXTENDED_CLAIM: &str = "resource.kubernetes.io/extended-resource-claim";

impl KubeIo {
    pub(super) async fn write_extended_claim(
        &self,
        pod: &str,
        class: &str,
        allocation: &Allocation,
    ) -> Result<(), ApiError> {
        use dragon_framework::devices::{EXTENDED_REQUEST, GPU_RESOURCE};
        let key = object(pod)?;
        let (ns, name) = (key.namespace(), key.name());
        self.request_token().await;
        let current = self
            .pods(ns)
            .get(name)
            .await
            .map_err(|e| typed(&format!("reading {pod} to serve its GPUs"), &e))?;
        let uid = current.metadata.uid.clone().unwrap_or_default();
        // Every container asking the resource is served by the one request.
        let mappings: Vec<core::ContainerExtendedResourceRequest> = current
            .spec
            .iter()
            .flat_map(|s| s.containers.iter())
            .filter(|c| {
                c.resources
                    .as_ref()
                    .and_then(|r| r.requests.as_ref())
                    .is_some_and(|r| r.contains_key(GPU_RESOURCE))
            })
            .map(|c| core::ContainerExtendedResourceRequest {
                container_name: c.name.clone(),
                request_name: EXTENDED_REQUEST.into(),
                resource_name: GPU_RESOURCE.into(),
            })
            .collect();
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
                    requests: Some(vec![resource::DeviceRequest {
                        name: EXTENDED_REQUEST.into(),
                        exactly: Some(resource::ExactDeviceRequest {
                            device_class_name: class.into(),
                            allocation_mode: Some("ExactCount".into()),
                            count: Some(allocation.devices.len() as i64),
                            ..Default::default()
                        }),
                        ..Default::default()
                    }]),
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
            allocation: Some(allocation_result(allocation)),
            reserved_for: Some(vec![resource::ResourceClaimConsumerReference {
                api_group: None,
                resource: "pods".into(),
                name: name.into(),
                uid,
            }]),
            ..Default::default()
        });
        self.request_token().await;
        claims
            .replace_status(&claim_name, &PostParams::default(), &created)
            .await
            .map_err(|e| typed(&format!("allocating claim {ns}/{claim_name} for {pod}"), &e))?;
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
        let status = current.status.get_or_insert_with(Default::default);
        if status.allocation.is_none() {
            status.allocation = Some(allocation_result(allocation));
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
