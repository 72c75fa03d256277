//! What a round asks its driver to bind: each group of pods placed
//! together, with each pod's node and what must be written before its
//! Binding (kube-scheduler's PreBind: device allocations, the devices
//! serving extended resources, volume bindings), all as the framework
//! chose them. A driver sends this value; it never reads the choices back
//! from the snapshot.

use std::collections::BTreeMap;

use super::{Scheduler, ToBind, UnitPlan};
use crate::devices::{Allocation, ExtendedChoice};
use crate::names::{JobKey, NodeName, PodKey};
use crate::volumes::VolumeBinding;

/// Pods a round placed together: a gang's, or a pod scheduled on its own.
/// The framework settles a group whole: when one of its binds fails, the
/// members already bound are released.
#[derive(Debug, Clone, PartialEq)]
pub struct BindGroup {
    /// The gang's job; `None` for a pod scheduled on its own (a policy
    /// without gangs binds each pod alone, as kube-scheduler does). A
    /// driver whose writes before the Bindings fail for one member of a
    /// gang binds none of its pods in the round (its quorum's group and its
    /// extras' alike): a gang is not bound in part for want of one member's
    /// devices or volumes.
    pub job: Option<JobKey>,
    /// In placement order.
    pub pods: Vec<PodBind>,
}

/// One pod of a [`BindGroup`].
#[derive(Debug, Clone, PartialEq)]
pub struct PodBind {
    pub pod: PodKey,
    pub node: NodeName,
    /// Written before the pod's Binding.
    pub prebind: Prebind,
}

/// What a round chose for a pod that must be written before its Binding:
/// each ResourceClaim's allocation (by claim, `namespace/name`), the class
/// and devices serving its `nvidia.com/gpu` request, and the binding of
/// each PersistentVolumeClaim it binds.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Prebind {
    pub claims: Vec<(String, Allocation)>,
    pub extended: Option<ExtendedChoice>,
    pub volumes: Vec<(String, VolumeBinding)>,
}

impl Prebind {
    /// Nothing to write.
    pub fn is_empty(&self) -> bool {
        self.claims.is_empty() && self.extended.is_none() && self.volumes.is_empty()
    }
}

impl PodBind {
    /// `pod` to `node` with nothing written before.
    pub fn plain(pod: PodKey, node: NodeName) -> PodBind {
        PodBind {
            pod,
            node,
            prebind: Prebind::default(),
        }
    }
}

impl Scheduler {
    /// The groups of `to_bind`, in order, with the choices made for their
    /// pods: one pass over what was chosen, not one per pod.
    pub(super) fn bind_groups(&self, units: &[UnitPlan], to_bind: &[ToBind]) -> Vec<BindGroup> {
        let c = &self.cluster;
        let (devices, volumes) = (c.devices(), c.volumes());
        let any_chosen = devices.chosen().next().is_some()
            || devices.extended_chosen().next().is_some()
            || volumes.chosen().next().is_some();
        // Most rounds choose nothing to write before a Binding.
        let mut chosen: BTreeMap<&str, Prebind> = BTreeMap::new();
        if any_chosen {
            chosen = to_bind
                .iter()
                .flat_map(|g| &g.pods)
                .map(|(pod, _)| (pod.as_str(), Prebind::default()))
                .collect();
            for (pod, claim, allocation) in devices.chosen() {
                if let Some(p) = chosen.get_mut(pod) {
                    p.claims.push((claim.to_string(), allocation.clone()));
                }
            }
            for (pod, choice) in devices.extended_chosen() {
                if let Some(p) = chosen.get_mut(pod) {
                    p.extended = Some(choice.clone());
                }
            }
            for (pod, claim, binding) in volumes.chosen() {
                if let Some(p) = chosen.get_mut(pod) {
                    p.volumes.push((claim.to_string(), binding.clone()));
                }
            }
        }
        to_bind
            .iter()
            .map(|group| BindGroup {
                job: group.gang.and(units[group.unit].job.clone()),
                pods: group
                    .pods
                    .iter()
                    .map(|(pod, node)| PodBind {
                        pod: pod.clone(),
                        node: c.nodes()[*node].name.clone(),
                        prebind: chosen.remove(pod.as_str()).unwrap_or_default(),
                    })
                    .collect(),
            })
            .collect()
    }
}
