//! What a CSI driver tells the scheduler beyond volumes: how much it can
//! still provision where (CSIStorageCapacity, for the drivers whose
//! CSIDriver opts in with `storageCapacity`), and which volumes are
//! attached to which nodes (VolumeAttachments), as VolumeBinding and
//! NodeVolumeLimits read them.

use serde::{Deserialize, Serialize};

use super::Volumes;
use crate::model::Node;
use crate::selector::LabelSelector;

/// VolumeBinding's reason when no capacity object offers room for a claim
/// to be provisioned on a node.
pub const NOT_ENOUGH_SPACE: &str = "node(s) did not have enough free storage";

/// A CSIStorageCapacity: the largest volume of StorageClass `class` its
/// driver can make on the nodes `nodes` selects.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StorageCapacity {
    /// `namespace/name`.
    pub key: String,
    pub class: String,
    /// `nodeTopology` (`None`: no node has access).
    pub nodes: Option<LabelSelector>,
    /// `maximumVolumeSize`, else `capacity`, in bytes (`None`: unknown, so
    /// too small).
    pub limit: Option<u64>,
}

/// A VolumeAttachment: PersistentVolume `volume` attached to node `node`
/// by CSI driver `attacher`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VolumeAttachment {
    pub name: String,
    pub node: String,
    pub attacher: String,
    pub volume: String,
}

impl Volumes {
    /// Whether CSI driver `name` publishes its storage capacity
    /// (`spec.storageCapacity`), so its claims are provisioned only where
    /// some capacity object has room.
    pub fn set_capacity_driver(&mut self, name: &str, publishes: bool) {
        match publishes {
            true => self.capacity_drivers.insert(name.to_string()),
            false => self.capacity_drivers.remove(name),
        };
    }

    pub fn capacity_drivers(&self) -> impl Iterator<Item = &String> {
        self.capacity_drivers.iter()
    }

    pub fn set_capacity(&mut self, capacity: StorageCapacity) {
        self.capacities.insert(capacity.key.clone(), capacity);
    }

    pub fn remove_capacity(&mut self, key: &str) {
        self.capacities.remove(key);
    }

    pub fn capacity_keys(&self) -> impl Iterator<Item = &String> {
        self.capacities.keys()
    }

    /// hasEnoughCapacity: whether provisioner `driver` can make a volume
    /// of `request` bytes of class `class` on `node`. Only drivers that
    /// publish their capacity are checked.
    pub(crate) fn has_room(&self, driver: &str, class: &str, request: u64, node: &Node) -> bool {
        if request == 0 || !self.capacity_drivers.contains(driver) {
            return true;
        }
        self.capacities.values().any(|c| {
            c.class == class
                && c.limit.is_some_and(|l| l >= request)
                && c.nodes.as_ref().is_some_and(|s| s.matches(&node.labels))
        })
    }

    pub fn set_attachment(&mut self, attachment: VolumeAttachment) {
        self.attachments.insert(attachment.name.clone(), attachment);
    }

    pub fn remove_attachment(&mut self, name: &str) {
        self.attachments.remove(name);
    }

    pub fn attachment_names(&self) -> impl Iterator<Item = &String> {
        self.attachments.keys()
    }

    /// The volumes attached to node `node` by VolumeAttachments, as
    /// NodeVolumeLimits counts them: (unique name, driver), for CSI
    /// volumes known.
    pub(crate) fn attached_by_attachments<'a>(
        &'a self,
        node: &'a str,
    ) -> impl Iterator<Item = (String, &'a str)> + 'a {
        self.attachments
            .values()
            .filter(move |a| a.node == node && !a.attacher.is_empty())
            .filter_map(|a| {
                let csi = self.volumes.get(&a.volume)?.csi.as_ref()?;
                Some((
                    format!("{}^{}", a.attacher, csi.handle),
                    a.attacher.as_str(),
                ))
            })
    }
}
