//! PersistentVolumes, StorageClasses and PersistentVolumeClaims → what the
//! framework binds and checks, as kube-scheduler's VolumeBinding and
//! VolumeRestrictions plugins read them.

use dragon_framework::quantity;
use std::collections::BTreeMap;

use dragon_framework::volumes::{
    AccessMode, CsiVolume, InlineDisk, PersistentVolume, StorageCapacity, StorageClass,
    VolumeAttachment, VolumeClaim, VolumeMode,
};
use dragon_framework::{NodeSelector, NodeSelectorTerm, Operator, Requirement};
use k8s_openapi::api::core::v1 as core;
use k8s_openapi::api::storage::v1 as storage;

use super::{TranslateError, constraints, err};
use crate::key::{ObjectKey, object_key};

/// The node a claim's volume is provisioned on, set by the scheduler
/// (removed by a provisioner that failed).
pub const SELECTED_NODE: &str = "volume.kubernetes.io/selected-node";
/// Set by the PV controller once a claim is fully bound.
pub const BIND_COMPLETED: &str = "pv.kubernetes.io/bind-completed";
/// Set on a volume whose `claimRef` a controller (or scheduler) wrote.
pub const BOUND_BY_CONTROLLER: &str = "pv.kubernetes.io/bound-by-controller";
/// The provisioner of classes whose volumes are made by hand.
const NO_PROVISIONER: &str = "kubernetes.io/no-provisioner";
/// The class annotation older claims and volumes carry instead of
/// `storageClassName`.
const BETA_CLASS: &str = "volume.beta.kubernetes.io/storage-class";

/// A claim as the snapshot keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimSeen {
    /// The volume it is bound to (`spec.volumeName` of a `Bound` claim).
    pub volume: Option<String>,
    /// `volume.kubernetes.io/selected-node`: provisioning under way there.
    pub selected_node: Option<String>,
    /// What a volume must offer, or why the claim cannot be read.
    pub spec: Result<VolumeClaim, TranslateError>,
}

/// A StorageClass, and whether it waits for the first consumer
/// (`volumeBindingMode: WaitForFirstConsumer`).
///
/// # Errors
/// `allowedTopologies` Dragon cannot evaluate, named.
pub fn storage_class(sc: &storage::StorageClass) -> Result<(StorageClass, bool), TranslateError> {
    let name = sc.metadata.name.clone().unwrap_or_default();
    let terms: Vec<NodeSelectorTerm> = sc
        .allowed_topologies
        .iter()
        .flatten()
        .map(|t| NodeSelectorTerm {
            match_expressions: t
                .match_label_expressions
                .iter()
                .flatten()
                .map(|e| Requirement {
                    key: e.key.clone(),
                    operator: Operator::In,
                    values: e.values.clone(),
                })
                .collect(),
            match_fields: Vec::new(),
        })
        .collect();
    if terms.iter().any(|t| t.match_expressions.is_empty()) {
        return Err(err(
            &format!("storageclass {name}"),
            "allowedTopologies: a term with no matchLabelExpressions",
        ));
    }
    let delayed = sc.volume_binding_mode.as_deref() == Some("WaitForFirstConsumer");
    let class = StorageClass {
        provisioner: (!sc.provisioner.is_empty() && sc.provisioner != NO_PROVISIONER)
            .then(|| sc.provisioner.clone()),
        allowed_topologies: (!terms.is_empty()).then_some(NodeSelector { terms }),
        name,
    };
    Ok((class, delayed))
}

/// A PersistentVolume as binding needs it.
///
/// # Errors
/// A node affinity Dragon cannot evaluate or a capacity it cannot read,
/// named.
pub fn persistent_volume(pv: &core::PersistentVolume) -> Result<PersistentVolume, TranslateError> {
    let name = pv.metadata.name.clone().unwrap_or_default();
    let object = format!("persistentvolume {name}");
    let spec = pv.spec.clone().unwrap_or_default();
    let node_affinity = spec
        .node_affinity
        .as_ref()
        .and_then(|a| a.required.as_ref())
        .map(|s| constraints::node_selector("spec.nodeAffinity.required", s))
        .transpose()
        .map_err(|m| err(&object, m.to_string()))?;
    let capacity = storage_bytes(spec.capacity.as_ref(), &object, "spec.capacity")?;
    Ok(PersistentVolume {
        class: spec
            .storage_class_name
            .clone()
            .or_else(|| beta_class(&pv.metadata))
            .unwrap_or_default(),
        capacity,
        access_modes: access_modes(spec.access_modes.as_ref()),
        mode: volume_mode(spec.volume_mode.as_deref()),
        labels: pv.metadata.labels.clone().unwrap_or_default(),
        node_affinity,
        claim: spec.claim_ref.as_ref().map(|r| {
            ObjectKey::new(r.namespace.as_deref(), r.name.as_deref().unwrap_or("")).to_string()
        }),
        available: pv.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Available"),
        deleting: pv.metadata.deletion_timestamp.is_some(),
        csi: match spec.csi.as_ref() {
            Some(c) => Some(CsiVolume {
                driver: c.driver.clone(),
                handle: c.volume_handle.clone(),
            }),
            None => super::migration::migrated(&spec),
        },
        name,
    })
}

/// A PersistentVolumeClaim as the snapshot keeps it.
pub fn volume_claim(pvc: &core::PersistentVolumeClaim) -> ClaimSeen {
    let key = object_key(pvc).to_string();
    let object = format!("persistentvolumeclaim {key}");
    let spec = pvc.spec.clone().unwrap_or_default();
    let bound = pvc.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Bound");
    let volume = spec.volume_name.clone().filter(|v| !v.is_empty() && bound);
    let read = || -> Result<VolumeClaim, TranslateError> {
        let selector = spec
            .selector
            .as_ref()
            .map(|s| constraints::label_selector("spec.selector", s))
            .transpose()
            .map_err(|m| err(&object, m.to_string()))?;
        let request = storage_bytes(
            spec.resources.as_ref().and_then(|r| r.requests.as_ref()),
            &object,
            "spec.resources.requests",
        )?;
        Ok(VolumeClaim {
            key: key.clone(),
            class: spec
                .storage_class_name
                .clone()
                .or_else(|| beta_class(&pvc.metadata))
                .unwrap_or_default(),
            request,
            access_modes: access_modes(spec.access_modes.as_ref()),
            mode: volume_mode(spec.volume_mode.as_deref()),
            selector,
            volume: volume.clone(),
            volume_name: spec
                .volume_name
                .clone()
                .filter(|v| !v.is_empty() && volume.is_none()),
        })
    };
    ClaimSeen {
        volume: volume.clone(),
        selected_node: pvc
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(SELECTED_NODE))
            .cloned(),
        spec: read(),
    }
}

/// How many volumes each CSI driver may attach to the CSINode's node
/// (drivers that state no `allocatable.count` are not limited).
pub fn volume_limits(node: &storage::CSINode) -> (String, BTreeMap<String, u32>) {
    let limits = node
        .spec
        .drivers
        .iter()
        .filter_map(|d| {
            let count = d.allocatable.as_ref()?.count?;
            Some((
                d.name.clone(),
                u32::try_from(count.max(0)).unwrap_or(u32::MAX),
            ))
        })
        .collect();
    (node.metadata.name.clone().unwrap_or_default(), limits)
}

/// The disks a pod mounts inline that VolumeRestrictions keeps from being
/// mounted twice on a node: GCE PDs by name, AWS EBS volumes by ID (never
/// shared, even read only), iSCSI targets by IQN, RBD images by monitor,
/// pool and image.
pub fn inline_disks(pod: &core::Pod) -> Vec<InlineDisk> {
    pod.spec
        .iter()
        .flat_map(|s| s.volumes.iter().flatten())
        .filter_map(|v| {
            let (keys, read_only) = if let Some(d) = &v.gce_persistent_disk {
                (
                    vec![format!("gce-pd:{}", d.pd_name)],
                    d.read_only == Some(true),
                )
            } else if let Some(d) = &v.aws_elastic_block_store {
                (vec![format!("aws-ebs:{}", d.volume_id)], false)
            } else if let Some(d) = &v.iscsi {
                (vec![format!("iscsi:{}", d.iqn)], d.read_only == Some(true))
            } else if let Some(d) = &v.rbd {
                let pool = d.pool.as_deref().unwrap_or("rbd");
                let keys = d
                    .monitors
                    .iter()
                    .map(|m| format!("rbd:{m}/{pool}/{}", d.image))
                    .collect();
                (keys, d.read_only == Some(true))
            } else {
                return None;
            };
            Some(InlineDisk { keys, read_only })
        })
        .collect()
}

/// A CSIDriver: its name and whether it publishes its storage capacity.
pub fn csi_driver(d: &storage::CSIDriver) -> (String, bool) {
    (
        d.metadata.name.clone().unwrap_or_default(),
        d.spec.storage_capacity == Some(true),
    )
}

/// A CSIStorageCapacity. A size that cannot be read counts as unknown:
/// too small for any claim, as kube takes a missing one.
pub fn storage_capacity(c: &storage::CSIStorageCapacity) -> StorageCapacity {
    let key = crate::key::object_key(c).to_string();
    let size = |q: Option<&k8s_openapi::apimachinery::pkg::api::resource::Quantity>| {
        q.and_then(|q| quantity::value(&q.0).ok())
    };
    StorageCapacity {
        key,
        class: c.storage_class_name.clone(),
        nodes: c
            .node_topology
            .as_ref()
            .and_then(|s| constraints::label_selector("nodeTopology", s).ok()),
        limit: size(c.maximum_volume_size.as_ref()).or(size(c.capacity.as_ref())),
    }
}

/// A VolumeAttachment of a PersistentVolume (one of an inline volume is
/// left out, as NodeVolumeLimits leaves it).
pub fn volume_attachment(a: &storage::VolumeAttachment) -> Option<VolumeAttachment> {
    Some(VolumeAttachment {
        name: a.metadata.name.clone().unwrap_or_default(),
        node: a.spec.node_name.clone(),
        attacher: a.spec.attacher.clone(),
        volume: a.spec.source.persistent_volume_name.clone()?,
    })
}

fn beta_class(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> Option<String> {
    meta.annotations.as_ref()?.get(BETA_CLASS).cloned()
}

/// The `storage` entry of a capacity or request list, bytes (0 if none).
fn storage_bytes(
    list: Option<
        &std::collections::BTreeMap<
            String,
            k8s_openapi::apimachinery::pkg::api::resource::Quantity,
        >,
    >,
    object: &str,
    field: &str,
) -> Result<u64, TranslateError> {
    list.and_then(|l| l.get("storage"))
        .map(|q| quantity::value(&q.0).map_err(|e| err(object, format!("{field}.storage: {e}"))))
        .transpose()
        .map(Option::unwrap_or_default)
}

/// Known access modes; one Kubernetes does not define grants nothing.
fn access_modes(modes: Option<&Vec<String>>) -> Vec<AccessMode> {
    modes
        .into_iter()
        .flatten()
        .filter_map(|m| match m.as_str() {
            "ReadWriteOnce" => Some(AccessMode::ReadWriteOnce),
            "ReadOnlyMany" => Some(AccessMode::ReadOnlyMany),
            "ReadWriteMany" => Some(AccessMode::ReadWriteMany),
            "ReadWriteOncePod" => Some(AccessMode::ReadWriteOncePod),
            _ => None,
        })
        .collect()
}

fn volume_mode(mode: Option<&str>) -> VolumeMode {
    match mode {
        Some("Block") => VolumeMode::Block,
        _ => VolumeMode::Filesystem,
    }
}
