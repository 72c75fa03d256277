//! PersistentVolumes as kube-scheduler v1.37's VolumeBinding and
//! VolumeRestrictions plugins see them.
//!
//! A claim of a `WaitForFirstConsumer` StorageClass is bound only once a
//! pod using it is placed: on the node the scheduler chooses, the claim
//! takes the smallest available PersistentVolume that matches it (class,
//! capacity, access modes, volume mode, label selector, node affinity), or,
//! when none does, is provisioned there if its class has a provisioner
//! whose allowed topologies include the node. [`Volumes`] keeps the
//! volumes, classes and such claims, and what was chosen for the pods the
//! framework reserved, so the members of one gang never choose the same
//! volume. A claim already bound is placed through its volume's node
//! affinity, a constraint of each pod that uses it; all claims are kept for
//! their access modes (`ReadWriteOncePod`: one placed pod at a time).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::model::Node;
pub use crate::model::{CsiVolume, InlineDisk, PodVolumes};
use crate::selector::{LabelSelector, Labels, NodeSelector};

mod storage;
#[cfg(test)]
mod tests;

pub use storage::{NOT_ENOUGH_SPACE, StorageCapacity, VolumeAttachment};

/// How a volume may be mounted (`spec.accessModes`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum AccessMode {
    ReadWriteOnce,
    ReadOnlyMany,
    ReadWriteMany,
    /// One pod at a time, cluster-wide (VolumeRestrictions).
    ReadWriteOncePod,
}

/// Whether a volume is a filesystem or a raw block device
/// (`spec.volumeMode`; Filesystem when unset).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum VolumeMode {
    #[default]
    Filesystem,
    Block,
}

/// A PersistentVolume as binding needs it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PersistentVolume {
    pub name: String,
    /// `spec.storageClassName` ("" for none).
    pub class: String,
    /// `spec.capacity.storage`, bytes.
    pub capacity: u64,
    pub access_modes: Vec<AccessMode>,
    #[serde(default)]
    pub mode: VolumeMode,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: Labels,
    /// `spec.nodeAffinity.required` (`None`: reachable from every node).
    pub node_affinity: Option<NodeSelector>,
    /// The claim (`namespace/name`) of `spec.claimRef`: the claim it is
    /// bound or pre-bound to.
    pub claim: Option<String>,
    /// `status.phase` is `Available`.
    pub available: bool,
    /// Being deleted (`metadata.deletionTimestamp`).
    #[serde(default)]
    pub deleting: bool,
    /// The CSI driver and volume handle (`spec.csi`): what a node attaches.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub csi: Option<CsiVolume>,
}

/// A StorageClass as binding needs it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StorageClass {
    pub name: String,
    /// The provisioner that makes its volumes on demand (`None` for
    /// `kubernetes.io/no-provisioner`): a CSI driver's name.
    pub provisioner: Option<String>,
    /// `allowedTopologies` (`None`: every node).
    pub allowed_topologies: Option<NodeSelector>,
}

/// A PersistentVolumeClaim: what a volume must offer to bind it (when it is
/// an unbound claim of a `WaitForFirstConsumer` class, bound by the
/// scheduler once it places a pod that uses it), and how it may be used.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VolumeClaim {
    /// `namespace/name`.
    pub key: String,
    pub class: String,
    /// `spec.resources.requests.storage`, bytes.
    pub request: u64,
    pub access_modes: Vec<AccessMode>,
    #[serde(default)]
    pub mode: VolumeMode,
    /// `spec.selector`: the labels a volume must carry.
    pub selector: Option<LabelSelector>,
    /// The volume it is bound to, once bound.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volume: Option<String>,
    /// `spec.volumeName` while it is not bound yet: the volume it is
    /// pre-bound to, which NodeVolumeLimits counts already (as kube does).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volume_name: Option<String>,
}

/// What binds a claim on the chosen node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum VolumeBinding {
    /// This existing volume (its `spec.claimRef` is set to the claim).
    Volume(String),
    /// A volume the class's provisioner makes on this node (the claim's
    /// `volume.kubernetes.io/selected-node` annotation).
    Provision(String),
}

impl fmt::Display for VolumeBinding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            VolumeBinding::Volume(v) => write!(f, "persistentvolume {v:?}"),
            VolumeBinding::Provision(n) => write!(f, "a volume provisioned on node {n:?}"),
        }
    }
}

/// Claims (`namespace/name`) with the binding chosen for each.
pub type Bindings = Vec<(String, VolumeBinding)>;

/// kube-scheduler's reason when a claim finds neither a volume nor a way to
/// provision one on a node.
pub const NO_VOLUME: &str = "node(s) didn't find available persistent volumes to bind";
/// kube-scheduler's reason when a claim's chosen volume cannot be reached.
pub const NODE_CONFLICT: &str = "node(s) had volume node affinity conflict";
/// NodeVolumeLimits' reason when a node's CSI driver would attach more
/// volumes than its CSINode allows.
pub const TOO_MANY_VOLUMES: &str = "node(s) exceed max volume count";
/// VolumeRestrictions' reason for an inline disk another pod on the node
/// mounts.
pub const DISK_CONFLICT: &str = "node(s) had no available disk";
/// VolumeRestrictions' reason for a `ReadWriteOncePod` claim in use.
pub const IN_USE_ONCE: &str =
    "node has pod using PersistentVolumeClaim with the same name and ReadWriteOncePod access mode";

/// Why a pod's claims cannot be bound anywhere: an object it needs is
/// missing, named.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VolumeError {
    #[error("persistentvolumeclaim {0:?} is not known")]
    NoClaim(String),
    #[error("persistentvolumeclaim {claim:?}: storageclass {class:?} not found")]
    NoClass { claim: String, class: String },
}

/// Volumes, classes and unbound claims, with the bindings chosen for the
/// pods the framework reserved.
#[derive(Debug, Clone, Default)]
pub struct Volumes {
    volumes: BTreeMap<String, PersistentVolume>,
    /// Volume names by class: a claim looks only at its own class.
    by_class: BTreeMap<String, BTreeSet<String>>,
    classes: BTreeMap<String, StorageClass>,
    claims: BTreeMap<String, VolumeClaim>,
    /// Claim → the pod that chose its binding, and the binding.
    chosen: BTreeMap<String, (String, VolumeBinding)>,
    /// Volumes in `chosen`: taken for every other claim.
    taken: BTreeSet<String>,
    /// Claim → the placed pods that use it.
    users: BTreeMap<String, BTreeSet<String>>,
    /// Node index → the claims its placed pods use, with how many use each.
    on_node: BTreeMap<usize, BTreeMap<String, u32>>,
    /// Node name → how many volumes each CSI driver may attach there
    /// (CSINode `spec.drivers[].allocatable.count`).
    limits: BTreeMap<String, BTreeMap<String, u32>>,
    /// CSI drivers that publish their storage capacity.
    capacity_drivers: BTreeSet<String>,
    /// CSIStorageCapacities by `namespace/name`.
    capacities: BTreeMap<String, StorageCapacity>,
    /// VolumeAttachments by name.
    attachments: BTreeMap<String, VolumeAttachment>,
    /// Node index → the inline volumes its placed pods use (unique name →
    /// driver, how many pods use it).
    inline_on_node: BTreeMap<usize, BTreeMap<String, (String, u32)>>,
    /// Node index → the inline disks its placed pods mount, by key: how
    /// many mount it read-write and read only.
    disks_on_node: BTreeMap<usize, BTreeMap<String, (u32, u32)>>,
}

impl Volumes {
    pub fn set_volume(&mut self, volume: PersistentVolume) {
        self.remove_volume(&volume.name.clone());
        self.by_class
            .entry(volume.class.clone())
            .or_default()
            .insert(volume.name.clone());
        self.volumes.insert(volume.name.clone(), volume);
    }

    pub fn remove_volume(&mut self, name: &str) {
        if let Some(old) = self.volumes.remove(name)
            && let Some(names) = self.by_class.get_mut(&old.class)
        {
            names.remove(name);
            if names.is_empty() {
                self.by_class.remove(&old.class);
            }
        }
    }

    pub fn set_class(&mut self, class: StorageClass) {
        self.classes.insert(class.name.clone(), class);
    }

    pub fn remove_class(&mut self, name: &str) {
        self.classes.remove(name);
    }

    pub fn set_claim(&mut self, claim: VolumeClaim) {
        self.claims.insert(claim.key.clone(), claim);
    }

    /// The claim is gone: nothing more to choose for it.
    pub fn remove_claim(&mut self, key: &str) {
        self.claims.remove(key);
        if let Some((_, VolumeBinding::Volume(v))) = self.chosen.remove(key) {
            self.taken.remove(&v);
        }
    }

    pub fn volume_names(&self) -> impl Iterator<Item = &String> {
        self.volumes.keys()
    }

    pub fn class_names(&self) -> impl Iterator<Item = &String> {
        self.classes.keys()
    }

    pub fn claim_keys(&self) -> impl Iterator<Item = &String> {
        self.claims.keys()
    }

    /// The bindings `pod`'s reservation chose, by claim: what must be
    /// written before it is bound.
    pub fn chosen_for<'a>(
        &'a self,
        pod: &'a str,
    ) -> impl Iterator<Item = (&'a str, &'a VolumeBinding)> {
        self.chosen()
            .filter(move |(p, _, _)| *p == pod)
            .map(|(_, c, b)| (c, b))
    }

    /// Every binding chosen and not yet written: `(pod, claim, binding)`,
    /// by claim.
    pub(crate) fn chosen(&self) -> impl Iterator<Item = (&str, &str, &VolumeBinding)> {
        self.chosen
            .iter()
            .map(|(c, (p, b))| (p.as_str(), c.as_str(), b))
    }

    /// How each of `claims` is bound on `node`, or why it cannot be:
    /// FindPodVolumes for unbound delayed-binding claims. A claim another
    /// reserved pod already chose a binding for (a shared claim) must be
    /// reachable with that binding and is not returned.
    ///
    /// # Errors
    /// A claim or its class is unknown.
    pub fn fit(
        &self,
        node: &Node,
        claims: &[String],
    ) -> Result<Result<Bindings, &'static str>, VolumeError> {
        let mut open: Vec<&VolumeClaim> = Vec::with_capacity(claims.len());
        for key in claims {
            if let Some((_, binding)) = self.chosen.get(key) {
                if !self.reaches(binding, node) {
                    return Ok(Err(NODE_CONFLICT));
                }
                continue;
            }
            open.push(
                self.claims
                    .get(key)
                    .ok_or_else(|| VolumeError::NoClaim(key.clone()))?,
            );
        }
        // Smallest requests first, so each takes the smallest volume that
        // fits it and larger ones stay for larger claims.
        open.sort_by_key(|c| c.request);
        let mut bindings = Vec::with_capacity(open.len());
        let mut picked: BTreeSet<&str> = BTreeSet::new();
        for claim in open {
            let binding = match self.matching_volume(claim, node, &picked) {
                Some(v) => {
                    picked.insert(v);
                    VolumeBinding::Volume(v.to_string())
                }
                None => {
                    let class =
                        self.classes
                            .get(&claim.class)
                            .ok_or_else(|| VolumeError::NoClass {
                                claim: claim.key.clone(),
                                class: claim.class.clone(),
                            })?;
                    let allowed = class
                        .allowed_topologies
                        .as_ref()
                        .is_none_or(|t| t.matches(&node.name, &node.labels));
                    let Some(driver) = class.provisioner.as_deref().filter(|_| allowed) else {
                        return Ok(Err(NO_VOLUME));
                    };
                    if !self.has_room(driver, &claim.class, claim.request, node) {
                        return Ok(Err(NOT_ENOUGH_SPACE));
                    }
                    VolumeBinding::Provision(node.name.clone().into())
                }
            };
            bindings.push((claim.key.clone(), binding));
        }
        Ok(Ok(bindings))
    }

    /// FindMatchingVolume: a volume pre-bound to the claim if it reaches
    /// `node`, else the smallest available one that matches it.
    fn matching_volume<'a>(
        &'a self,
        claim: &VolumeClaim,
        node: &Node,
        picked: &BTreeSet<&str>,
    ) -> Option<&'a str> {
        let mut best: Option<&PersistentVolume> = None;
        for name in self.by_class.get(&claim.class).into_iter().flatten() {
            let v = &self.volumes[name];
            if picked.contains(name.as_str()) || self.taken.contains(name) {
                continue;
            }
            let mine = v.claim.as_deref() == Some(claim.key.as_str());
            if (v.claim.is_some() && !mine)
                || v.capacity < claim.request
                || v.mode != claim.mode
                || v.deleting
            {
                continue;
            }
            let reaches = v
                .node_affinity
                .as_ref()
                .is_none_or(|s| s.matches(&node.name, &node.labels));
            if mine {
                return reaches.then_some(name.as_str());
            }
            if !v.available
                || !reaches
                || !claim.selector.as_ref().is_none_or(|s| s.matches(&v.labels))
                || !claim
                    .access_modes
                    .iter()
                    .all(|m| v.access_modes.contains(m))
            {
                continue;
            }
            if best.is_none_or(|b| v.capacity < b.capacity) {
                best = Some(v);
            }
        }
        best.map(|v| v.name.as_str())
    }

    fn reaches(&self, binding: &VolumeBinding, node: &Node) -> bool {
        match binding {
            VolumeBinding::Provision(n) => *n == node.name,
            VolumeBinding::Volume(v) => self.volumes.get(v).is_some_and(|v| {
                v.node_affinity
                    .as_ref()
                    .is_none_or(|s| s.matches(&node.name, &node.labels))
            }),
        }
    }

    /// What `pod`'s reservation chose, to keep again with [`Self::choose`].
    pub(crate) fn choices_of(&self, pod: &str) -> Bindings {
        self.chosen_for(pod)
            .map(|(c, b)| (c.to_string(), b.clone()))
            .collect()
    }

    /// Keep `bindings` as `pod`'s choice.
    pub(crate) fn choose(&mut self, pod: &str, bindings: Bindings) {
        for (claim, binding) in bindings {
            if let VolumeBinding::Volume(v) = &binding {
                self.taken.insert(v.clone());
            }
            self.chosen.insert(claim, (pod.to_string(), binding));
        }
    }

    /// Give back what `pod` chose and was not bound yet.
    pub(crate) fn unchoose(&mut self, pod: &str) {
        let taken = &mut self.taken;
        self.chosen.retain(|_, (p, binding)| {
            let keep = p != pod;
            if !keep && let VolumeBinding::Volume(v) = binding {
                taken.remove(v);
            }
            keep
        });
    }

    /// Whether another placed pod uses one of `claims` that may be used
    /// by one pod only (`ReadWriteOncePod`).
    pub(crate) fn in_use_once(&self, pod: &str, claims: &[String]) -> bool {
        claims.iter().any(|c| {
            self.claims
                .get(c)
                .is_some_and(|c| c.access_modes.contains(&AccessMode::ReadWriteOncePod))
                && self
                    .users
                    .get(c)
                    .is_some_and(|users| users.iter().any(|u| u != pod))
        })
    }

    /// `pod`, placed on node `node`, uses (`true`) or no longer uses its
    /// claims and inline volumes.
    pub(crate) fn use_volumes(
        &mut self,
        pod: &str,
        node: usize,
        volumes: &PodVolumes,
        holds: bool,
    ) {
        self.use_claims(pod, node, &volumes.claims, holds);
        if !volumes.disks.is_empty() {
            let on_node = self.disks_on_node.entry(node).or_default();
            for d in &volumes.disks {
                for key in &d.keys {
                    let counts = on_node.entry(key.clone()).or_default();
                    let n = if d.read_only {
                        &mut counts.1
                    } else {
                        &mut counts.0
                    };
                    *n = if holds { *n + 1 } else { n.saturating_sub(1) };
                    if *counts == (0, 0) {
                        on_node.remove(key);
                    }
                }
            }
            if on_node.is_empty() {
                self.disks_on_node.remove(&node);
            }
        }
        if volumes.inline.is_empty() {
            return;
        }
        let on_node = self.inline_on_node.entry(node).or_default();
        for v in &volumes.inline {
            let unique = format!("{}^{}", v.driver, v.handle);
            if holds {
                on_node.entry(unique).or_insert((v.driver.clone(), 0)).1 += 1;
            } else if let Some((_, n)) = on_node.get_mut(&unique) {
                *n -= 1;
                if *n == 0 {
                    on_node.remove(&unique);
                }
            }
        }
        if on_node.is_empty() {
            self.inline_on_node.remove(&node);
        }
    }

    /// VolumeRestrictions' disk conflict: whether a pod mounting `disks`
    /// would share one with a pod placed on node `i` without both mounting
    /// it read only.
    pub(crate) fn disk_conflict(&self, i: usize, disks: &[InlineDisk]) -> bool {
        let Some(on_node) = self.disks_on_node.get(&i) else {
            return false;
        };
        disks.iter().any(|d| {
            d.keys.iter().any(|k| {
                on_node
                    .get(k)
                    .is_some_and(|&(rw, ro)| rw > 0 || (ro > 0 && !d.read_only))
            })
        })
    }

    /// `pod`, placed on node `node`, uses (`true`) or no longer uses its
    /// `claims`.
    fn use_claims(&mut self, pod: &str, node: usize, claims: &[String], holds: bool) {
        let on_node = self.on_node.entry(node).or_default();
        for c in claims {
            if holds {
                self.users
                    .entry(c.clone())
                    .or_default()
                    .insert(pod.to_string());
                *on_node.entry(c.clone()).or_default() += 1;
            } else {
                if let Some(users) = self.users.get_mut(c) {
                    users.remove(pod);
                    if users.is_empty() {
                        self.users.remove(c);
                    }
                }
                if let Some(n) = on_node.get_mut(c) {
                    *n -= 1;
                    if *n == 0 {
                        on_node.remove(c);
                    }
                }
            }
        }
        if on_node.is_empty() {
            self.on_node.remove(&node);
        }
    }

    /// How many volumes each CSI driver may attach to node `node` (none:
    /// no limit).
    pub fn set_limits(&mut self, node: &str, limits: BTreeMap<String, u32>) {
        match limits.is_empty() {
            true => self.limits.remove(node),
            false => self.limits.insert(node.to_string(), limits),
        };
    }

    pub fn limited_nodes(&self) -> impl Iterator<Item = &String> {
        self.limits.keys()
    }

    /// The CSI driver and the unique name of the volume `claim` is bound to
    /// (or chosen or provisioned for): what a node attaches for it, as
    /// NodeVolumeLimits counts it. `None`: not a CSI volume, or not known.
    fn attached(&self, claim: &str) -> Option<(&str, String)> {
        let c = self.claims.get(claim)?;
        let volume = c
            .volume
            .as_deref()
            .or(c.volume_name.as_deref())
            .or_else(|| match self.chosen.get(claim) {
                Some((_, VolumeBinding::Volume(v))) => Some(v.as_str()),
                _ => None,
            });
        match volume.and_then(|v| self.volumes.get(v)) {
            Some(v) => {
                let csi = v.csi.as_ref()?;
                Some((
                    csi.driver.as_str(),
                    format!("{}^{}", csi.driver, csi.handle),
                ))
            }
            // Unbound, or its volume not seen (pre-bound to one not made
            // yet): the class's provisioner will make it (an in-tree one's
            // volumes are its CSI driver's).
            None => {
                let provisioner = self.classes.get(&c.class)?.provisioner.as_deref()?;
                let driver = migrated_driver(provisioner).unwrap_or(provisioner);
                Some((driver, format!("{driver}^claim:{claim}")))
            }
        }
    }

    /// NodeVolumeLimits: whether node `i` (`name`) can attach the volumes
    /// of a pod's `volumes` beside those its placed pods use and those
    /// still attached there, per CSI driver.
    pub(crate) fn within_limits(&self, name: &str, i: usize, volumes: &PodVolumes) -> bool {
        let claims = &volumes.claims;
        let Some(limits) = self.limits.get(name) else {
            return true;
        };
        let mut attached: BTreeMap<String, &str> = self
            .on_node
            .get(&i)
            .into_iter()
            .flatten()
            .filter_map(|(c, _)| self.attached(c))
            .map(|(d, u)| (u, d))
            .collect();
        for (u, (d, _)) in self.inline_on_node.get(&i).into_iter().flatten() {
            attached.entry(u.clone()).or_insert(d);
        }
        // Attached for pods gone, or not yet detached: still attached.
        for (u, d) in self.attached_by_attachments(name) {
            attached.entry(u).or_insert(d);
        }
        let mut count: BTreeMap<&str, u32> = BTreeMap::new();
        for driver in attached.values() {
            *count.entry(driver).or_default() += 1;
        }
        // A volume already attached there is not attached again.
        let inline = volumes
            .inline
            .iter()
            .map(|v| (v.driver.as_str(), format!("{}^{}", v.driver, v.handle)));
        let new: BTreeMap<String, &str> = claims
            .iter()
            .filter_map(|c| self.attached(c))
            .chain(inline)
            .filter(|(_, u)| !attached.contains_key(u))
            .map(|(d, u)| (u, d))
            .collect();
        for driver in new.values() {
            *count.entry(driver).or_default() += 1;
        }
        count
            .iter()
            .all(|(driver, n)| limits.get(*driver).is_none_or(|max| n <= max))
    }
}

/// The CSI driver that serves the volumes of in-tree provisioner
/// `provisioner` since CSI migration (csi-translation-lib's names).
fn migrated_driver(provisioner: &str) -> Option<&'static str> {
    Some(match provisioner {
        "kubernetes.io/aws-ebs" => "ebs.csi.aws.com",
        "kubernetes.io/gce-pd" => "pd.csi.storage.gke.io",
        "kubernetes.io/azure-disk" => "disk.csi.azure.com",
        "kubernetes.io/cinder" => "cinder.csi.openstack.org",
        "kubernetes.io/portworx-volume" => "pxd.portworx.com",
        _ => return None,
    })
}
