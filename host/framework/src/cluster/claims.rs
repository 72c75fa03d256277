//! What drivers tell the cluster about devices and volumes: ResourceSlices,
//! DeviceClasses and ResourceClaims; PersistentVolumes, StorageClasses and
//! unbound PersistentVolumeClaims.

use std::collections::BTreeMap;

use super::journal::ClusterOp;
use super::{Cluster, PodState};
use crate::devices::{
    Allocation, Claim, DeviceClass, ExtendedChoice, Inventory, ResourceSlice, TaintRule,
};
use crate::names::PodKey;
use crate::volumes::{
    Bindings, PersistentVolume, StorageCapacity, StorageClass, VolumeAttachment, VolumeClaim,
    Volumes,
};

impl Cluster {
    /// A ResourceSlice named `name` was published or changed.
    pub fn set_resource_slice(&mut self, name: &str, slice: ResourceSlice) {
        self.journal(|| ClusterOp::SetResourceSlice {
            name: name.to_string(),
            slice: slice.clone(),
        });
        self.devices.set_slice(name.to_string(), slice);
        self.changes.room = true;
        self.sync_device_nodes();
    }

    /// The ResourceSlice named `name` is gone.
    pub fn remove_resource_slice(&mut self, name: &str) {
        self.journal(|| ClusterOp::RemoveResourceSlice(name.to_string()));
        self.devices.remove_slice(name);
        self.sync_device_nodes();
    }

    /// A DeviceClass was created or changed.
    pub fn set_device_class(&mut self, class: DeviceClass) {
        self.journal(|| ClusterOp::SetDeviceClass(class.clone()));
        self.devices.set_class(class);
        self.changes.room = true;
        self.sync_device_nodes();
    }

    /// The DeviceClass named `name` is gone.
    pub fn remove_device_class(&mut self, name: &str) {
        self.journal(|| ClusterOp::RemoveDeviceClass(name.to_string()));
        self.devices.remove_class(name);
        self.sync_device_nodes();
    }

    /// A DeviceTaintRule was created or changed: its taint is on the
    /// devices it selects.
    pub fn set_device_taint_rule(&mut self, rule: TaintRule) {
        self.journal(|| ClusterOp::SetDeviceTaintRule(rule.clone()));
        self.devices.set_taint_rule(rule);
        // A taint lifted may let a waiting pod have the device.
        self.changes.room = true;
    }

    /// The DeviceTaintRule named `name` is gone.
    pub fn remove_device_taint_rule(&mut self, name: &str) {
        self.journal(|| ClusterOp::RemoveDeviceTaintRule(name.to_string()));
        self.devices.remove_taint_rule(name);
        self.changes.room = true;
    }

    /// A ResourceClaim as the API server has it now (created, allocated,
    /// deallocated).
    pub fn set_claim(&mut self, claim: Claim) {
        self.journal(|| ClusterOp::SetClaim(claim.clone()));
        self.devices.set_claim(claim);
        self.changes.room = true;
        self.sync_device_nodes();
    }

    /// The ResourceClaim `key` (`namespace/name`) is gone.
    pub fn remove_claim(&mut self, key: &str) {
        self.journal(|| ClusterOp::RemoveClaim(key.to_string()));
        self.devices.remove_claim(key);
        self.changes.room = true;
        self.sync_device_nodes();
    }

    /// Published devices, classes and claims, with what the framework chose
    /// for pods it reserved.
    pub fn devices(&self) -> &Inventory {
        &self.devices
    }

    /// A PersistentVolume was created or changed.
    pub fn set_volume(&mut self, volume: PersistentVolume) {
        self.journal(|| ClusterOp::SetVolume(volume.clone()));
        self.volumes.set_volume(volume);
        self.changes.room = true;
    }

    /// The PersistentVolume named `name` is gone.
    pub fn remove_volume(&mut self, name: &str) {
        self.journal(|| ClusterOp::RemoveVolume(name.to_string()));
        self.volumes.remove_volume(name);
    }

    /// Whether CSI driver `name` publishes its storage capacity.
    pub fn set_csi_driver(&mut self, name: &str, storage_capacity: bool) {
        self.journal(|| ClusterOp::SetCsiDriver {
            name: name.to_string(),
            storage_capacity,
        });
        self.volumes.set_capacity_driver(name, storage_capacity);
        self.changes.room = true;
    }

    /// A CSIStorageCapacity was created or changed.
    pub fn set_storage_capacity(&mut self, capacity: StorageCapacity) {
        self.journal(|| ClusterOp::SetStorageCapacity(capacity.clone()));
        self.volumes.set_capacity(capacity);
        self.changes.room = true;
    }

    /// The CSIStorageCapacity `key` (`namespace/name`) is gone.
    pub fn remove_storage_capacity(&mut self, key: &str) {
        self.journal(|| ClusterOp::RemoveStorageCapacity(key.to_string()));
        self.volumes.remove_capacity(key);
    }

    /// A VolumeAttachment was created or changed.
    pub fn set_volume_attachment(&mut self, attachment: VolumeAttachment) {
        self.journal(|| ClusterOp::SetVolumeAttachment(attachment.clone()));
        self.volumes.set_attachment(attachment);
    }

    /// The VolumeAttachment `name` is gone: its volume no longer counts
    /// against its node's limit.
    pub fn remove_volume_attachment(&mut self, name: &str) {
        self.journal(|| ClusterOp::RemoveVolumeAttachment(name.to_string()));
        self.volumes.remove_attachment(name);
        self.changes.room = true;
    }

    /// A StorageClass was created or changed.
    pub fn set_storage_class(&mut self, class: StorageClass) {
        self.journal(|| ClusterOp::SetStorageClass(class.clone()));
        self.volumes.set_class(class);
        self.changes.room = true;
    }

    /// The StorageClass named `name` is gone.
    pub fn remove_storage_class(&mut self, name: &str) {
        self.journal(|| ClusterOp::RemoveStorageClass(name.to_string()));
        self.volumes.remove_class(name);
    }

    /// A PersistentVolumeClaim as the API server has it now.
    pub fn set_volume_claim(&mut self, claim: VolumeClaim) {
        self.journal(|| ClusterOp::SetVolumeClaim(claim.clone()));
        self.volumes.set_claim(claim);
        self.changes.room = true;
    }

    /// The claim `key` (`namespace/name`) is gone.
    pub fn remove_volume_claim(&mut self, key: &str) {
        self.journal(|| ClusterOp::RemoveVolumeClaim(key.to_string()));
        self.volumes.remove_claim(key);
    }

    /// How many volumes each CSI driver may attach to `node` (its
    /// CSINode); empty for no limit.
    pub fn set_volume_limits(&mut self, node: &str, limits: BTreeMap<String, u32>) {
        self.journal(|| ClusterOp::SetVolumeLimits {
            node: node.into(),
            limits: limits.clone(),
        });
        self.volumes.set_limits(node, limits);
        self.changes.room = true;
    }

    /// Volumes, classes and unbound claims, with the bindings chosen for
    /// pods the framework reserved.
    pub fn volumes(&self) -> &Volumes {
        &self.volumes
    }

    /// Take `pods` off their nodes for a preemption's dry run, with what
    /// they hold: their nodes, the devices and volumes chosen for them,
    /// and the devices their claims' allocations hold (unless a pod that
    /// stays uses the claim too), all given back by [`Cluster::restore`].
    pub(crate) fn vacate(&mut self, pods: &[(PodKey, usize)]) -> Vacated {
        let mut vacated = Vacated::default();
        let leaving: std::collections::BTreeSet<&str> =
            pods.iter().map(|(k, _)| k.as_str()).collect();
        // The claims written for the pods' extended resources leave with
        // them too.
        let extended_claims: Vec<String> = pods
            .iter()
            .filter(|(k, _)| self.pods.get(k).is_some_and(|e| e.pod.uses_devices()))
            .filter_map(|(k, _)| self.devices.extended_claim_of(k).cloned())
            .collect();
        let mut claims: std::collections::BTreeSet<&String> = extended_claims.iter().collect();
        for (key, node) in pods {
            let Some(e) = self.pods.get(key) else {
                continue;
            };
            claims.extend(e.pod.claims.iter());
            let (devices, extended) = self.devices.choices_of(key);
            vacated.pods.push(Held {
                pod: key.clone().into(),
                node: *node,
                devices,
                extended,
                volumes: self.volumes.choices_of(key),
            });
        }
        // A claim shared with a pod that stays keeps its devices.
        let shared: std::collections::BTreeSet<&String> = self
            .pods
            .iter()
            .filter(|(k, e)| !leaving.contains(k.as_str()) && e.state.node().is_some())
            .flat_map(|(_, e)| e.pod.claims.iter())
            .filter(|c| claims.contains(c))
            .collect();
        let claims: Vec<&String> = claims.into_iter().filter(|c| !shared.contains(c)).collect();
        let let_go = self.devices.let_go(&claims);
        for held in &vacated.pods {
            self.set_state(&held.pod, PodState::Pending);
        }
        vacated.claims = let_go;
        self.sync_device_nodes();
        vacated
    }

    /// Put back what [`Cluster::vacate`] took.
    pub(crate) fn restore(&mut self, vacated: Vacated) {
        self.devices.hold_again(&vacated.claims);
        for held in vacated.pods {
            self.set_state(&held.pod, PodState::Bound(held.node));
            self.devices.choose(&held.pod, held.devices);
            if let Some(a) = held.extended {
                self.devices.choose_extended(&held.pod, a);
            }
            self.volumes.choose(&held.pod, held.volumes);
        }
        self.sync_device_nodes();
    }
}

/// Pods taken off their nodes for a dry run, with what they held.
#[derive(Debug, Default)]
pub(crate) struct Vacated {
    pods: Vec<Held>,
    /// Claims whose API allocations were let go.
    claims: Vec<String>,
}

#[derive(Debug)]
struct Held {
    pod: String,
    node: usize,
    devices: Vec<(String, Allocation)>,
    extended: Option<ExtendedChoice>,
    volumes: Bindings,
}
