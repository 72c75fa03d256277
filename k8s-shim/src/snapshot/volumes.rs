//! The snapshot's side of volumes: claims, volumes and classes as the API
//! server has them, handed to the framework, and the pods that wait for
//! them applied again when they change.

use std::collections::BTreeSet;

use dragon_framework::volumes::PodVolumes;
use dragon_framework::{ClusterOp, NodeSelector, Pod, PodState};
use k8s_openapi::api::core::v1 as core;
use k8s_openapi::api::storage::v1 as storage;

use super::{Event, Snapshot, StorageKind, VolumeWait};
use crate::key::{ObjectKey, object_key};
use crate::translate::{self, volumes as translate_volumes};

impl Snapshot {
    pub(super) fn claim_changed(&mut self, pvc: &core::PersistentVolumeClaim) {
        let key = object_key(pvc).to_string();
        let seen = translate_volumes::volume_claim(pvc);
        if self.claims.get(&key) == Some(&seen) {
            return;
        }
        match &seen.spec {
            Ok(claim) => self.change(ClusterOp::SetVolumeClaim(claim.clone())),
            Err(_) => self.change(ClusterOp::RemoveVolumeClaim(key.clone())),
        }
        self.claims.insert(key, seen);
        self.retry_volume_pods();
    }

    pub(super) fn claim_gone(&mut self, key: &str) {
        if self.claims.remove(key).is_some() {
            self.change(ClusterOp::RemoveVolumeClaim(key.to_string()));
            self.retry_volume_pods();
        }
    }

    pub(super) fn volume_changed(&mut self, pv: &core::PersistentVolume) {
        let name = pv.metadata.name.clone().unwrap_or_default();
        let volume = translate_volumes::persistent_volume(pv);
        match &volume {
            Ok(v) => self.change(ClusterOp::SetVolume(v.clone())),
            Err(e) => {
                tracing::warn!("{e}; the volume is not offered to claims");
                self.change(ClusterOp::RemoveVolume(name.clone()));
            }
        }
        let affinity = volume.map(|v| v.node_affinity);
        if self.volumes.get(&name) != Some(&affinity) {
            self.volumes.insert(name, affinity);
            self.retry_volume_pods();
        }
    }

    pub(super) fn volume_gone(&mut self, name: &str) {
        self.volumes.remove(name);
        self.change(ClusterOp::RemoveVolume(name.to_string()));
    }

    pub(super) fn class_changed(&mut self, sc: &storage::StorageClass) {
        let name = sc.metadata.name.clone().unwrap_or_default();
        let delayed = match translate_volumes::storage_class(sc) {
            Ok((class, delayed)) => {
                self.change(ClusterOp::SetStorageClass(class));
                delayed
            }
            Err(e) => {
                // Its claims are not bound by Dragon: they wait, named.
                tracing::warn!("{e}");
                self.change(ClusterOp::RemoveStorageClass(name.clone()));
                false
            }
        };
        if self.classes.insert(name, delayed) != Some(delayed) {
            self.retry_volume_pods();
        }
    }

    pub(super) fn class_gone(&mut self, name: &str) {
        self.classes.remove(name);
        self.change(ClusterOp::RemoveStorageClass(name.to_string()));
    }

    /// What a fresh list of storage objects no longer has.
    pub(super) fn vanished_storage(
        &self,
        kind: StorageKind,
        listed: &BTreeSet<String>,
    ) -> Vec<Event> {
        let (names, gone): (Vec<&String>, fn(String) -> Event) = match kind {
            StorageKind::Claim => (self.claims.keys().collect(), Event::ClaimGone),
            StorageKind::Volume => (self.volumes.keys().collect(), Event::VolumeGone),
            StorageKind::Class => (self.classes.keys().collect(), Event::StorageClassGone),
            StorageKind::CsiNode => (
                self.sched.cluster().volumes().limited_nodes().collect(),
                Event::CsiNodeGone,
            ),
            StorageKind::CsiDriver => (
                self.sched.cluster().volumes().capacity_drivers().collect(),
                Event::CsiDriverGone,
            ),
            StorageKind::Capacity => (
                self.sched.cluster().volumes().capacity_keys().collect(),
                Event::StorageCapacityGone,
            ),
            StorageKind::Attachment => (
                self.sched.cluster().volumes().attachment_names().collect(),
                Event::VolumeAttachmentGone,
            ),
        };
        names
            .into_iter()
            .filter(|k| !listed.contains(*k))
            .map(|k| gone(k.clone()))
            .collect()
    }

    /// Apply again the pods set aside for their volumes, and the pending
    /// pods whose claims' state no longer matches what the framework has.
    fn retry_volume_pods(&mut self) {
        let pods: Vec<core::Pod> = std::mem::take(&mut self.awaiting_volumes)
            .into_values()
            .collect();
        for p in pods {
            self.apply_pod(p);
        }
        let stale: Vec<(String, core::Pod)> = self
            .binding_pods
            .iter()
            .filter(|(key, p)| {
                let c = self.sched.cluster();
                c.pod(key).is_some_and(|(pod, state)| {
                    state == PodState::Pending
                        && self.pod_volumes(p).ok()
                            != Some((
                                pod.constraints.volume_node_affinity.clone(),
                                pod.volumes.clone(),
                            ))
                })
            })
            .map(|(k, p)| (k.clone(), p.clone()))
            .collect();
        for (key, p) in stale {
            // Out and in again: the framework takes a pod's volumes when it
            // is added.
            if let Ok(Pod { job: Some(job), .. }) = self.sched.remove_pod(&key) {
                self.refresh_job(&job);
            }
            self.apply_pod(p);
        }
    }

    /// The node affinity of every volume bound to `p`'s claims and the
    /// claims the framework binds, or why the pod cannot be placed yet: a
    /// claim missing or unreadable, bound to a volume not seen, being
    /// provisioned, or unbound in a class that does not wait for its
    /// first consumer (the PV controller binds those).
    pub(super) fn pod_volumes(
        &self,
        p: &core::Pod,
    ) -> Result<(Vec<NodeSelector>, PodVolumes), VolumeWait> {
        let namespace = p.metadata.namespace.as_deref();
        let mut affinity = Vec::new();
        let mut volumes = PodVolumes::default();
        for claim in translate::pod_claims(p) {
            let key = ObjectKey::new(namespace, &claim).to_string();
            let Some(seen) = self.claims.get(&key) else {
                return Err(VolumeWait::NoClaim(claim));
            };
            let spec = seen
                .spec
                .as_ref()
                .map_err(|e| VolumeWait::Unreadable(e.clone()))?;
            match (&seen.volume, &seen.selected_node) {
                (Some(volume), _) => match self.volumes.get(volume) {
                    None => {
                        return Err(VolumeWait::NoVolume {
                            claim,
                            volume: volume.clone(),
                        });
                    }
                    Some(Err(e)) => return Err(VolumeWait::Unreadable(e.clone())),
                    Some(Ok(a)) => affinity.extend(a.iter().cloned()),
                },
                (None, Some(node)) => {
                    return Err(VolumeWait::Provisioning {
                        claim,
                        node: node.clone(),
                    });
                }
                (None, None) if self.classes.get(&spec.class) == Some(&true) => {
                    volumes.unbound.push(key.clone());
                }
                (None, None) => return Err(VolumeWait::Unbound(claim)),
            }
            volumes.claims.push(key);
        }
        volumes.inline = translate::migration::migrated_inline(p);
        volumes.disks = translate::volumes::inline_disks(p);
        Ok((affinity, volumes))
    }
}
