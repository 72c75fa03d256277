//! What a pod's volumes ask of placement, as read from its spec (the
//! binder in `crate::volumes` matches them).

use serde::{Deserialize, Serialize};

/// A volume as a CSI driver attaches it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CsiVolume {
    pub driver: String,
    pub handle: String,
}

/// A pod's claims that placement must check beyond bound volumes' node
/// affinity.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PodVolumes {
    /// Every PersistentVolumeClaim (`namespace/name`) its volumes use.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub claims: Vec<String>,
    /// Those of a `WaitForFirstConsumer` class not bound yet: bound on the
    /// node the pod is placed on.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unbound: Vec<String>,
    /// In-tree volumes of its spec that a CSI driver serves since CSI
    /// migration: what its node attaches for it beside its claims'.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub inline: Vec<CsiVolume>,
    /// Disks of its spec that two pods on one node may not both mount
    /// unless both read only (GCE PD, AWS EBS, iSCSI, RBD).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub disks: Vec<InlineDisk>,
}

impl PodVolumes {
    pub fn is_empty(&self) -> bool {
        self.claims.is_empty() && self.inline.is_empty() && self.disks.is_empty()
    }
}

/// A disk mounted inline, as VolumeRestrictions compares them: by a key
/// naming the disk (an RBD image has one per Ceph monitor, since two
/// images are one when any monitor is shared), and whether it is mounted
/// read only.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InlineDisk {
    pub keys: Vec<String>,
    pub read_only: bool,
}
