//! What drivers do to the snapshot, as data: every change a driver makes
//! through [`Cluster`]'s methods, in order, when the cluster keeps a
//! journal. Applied in the same order to an empty cluster, with the same
//! rounds in between, the ops give the same snapshot: the framework adds
//! nothing of its own that is not decided by a round. A recording of a
//! run is these ops plus each round's time (see `dragon replay`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::cluster::{Cluster, ClusterError, PodState};
use crate::devices::{Claim, DeviceClass, ResourceSlice, TaintRule};
use crate::model::{DisruptionBudget, Job, Node, Pod};
use crate::names::{JobKey, NodeName, PodKey};
use crate::selector::Labels;
use crate::volumes::{
    PersistentVolume, StorageCapacity, StorageClass, VolumeAttachment, VolumeClaim,
};

/// One change a driver made to the snapshot.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum ClusterOp {
    AddNode(Node),
    UpdateNode(Node),
    RemoveNode(NodeName),
    UpsertJob(Job),
    RemoveJob(JobKey),
    MarkStarted {
        job: JobKey,
        ms: u64,
    },
    AddPod {
        pod: Pod,
        node: Option<NodeName>,
    },
    RemovePod(PodKey),
    ObserveBound {
        pod: PodKey,
        node: NodeName,
    },
    SetGates {
        pod: PodKey,
        gates: Vec<String>,
    },
    SetLabels {
        pod: PodKey,
        labels: Labels,
    },
    SetBudget {
        name: String,
        budget: DisruptionBudget,
    },
    RemoveBudget(String),
    SetResourceSlice {
        name: String,
        slice: ResourceSlice,
    },
    RemoveResourceSlice(String),
    SetDeviceClass(DeviceClass),
    RemoveDeviceClass(String),
    SetDeviceTaintRule(TaintRule),
    RemoveDeviceTaintRule(String),
    SetClaim(Claim),
    RemoveClaim(String),
    SetVolume(PersistentVolume),
    RemoveVolume(String),
    SetStorageClass(StorageClass),
    RemoveStorageClass(String),
    SetVolumeClaim(VolumeClaim),
    RemoveVolumeClaim(String),
    /// How many volumes each CSI driver may attach to a node (a CSINode);
    /// empty for no limit.
    SetVolumeLimits {
        node: NodeName,
        limits: BTreeMap<String, u32>,
    },
    /// Whether CSI driver `name` publishes its storage capacity (a
    /// CSIDriver's `storageCapacity`); `false` also when it is gone.
    SetCsiDriver {
        name: String,
        storage_capacity: bool,
    },
    SetStorageCapacity(StorageCapacity),
    RemoveStorageCapacity(String),
    SetVolumeAttachment(VolumeAttachment),
    RemoveVolumeAttachment(String),
    /// The topology levels gangs' constraints name, widest first.
    SetTopologyLevels(Vec<String>),
    /// The queues (teams) jobs belong to.
    SetQueues(Vec<crate::QueueSpec>),
}

impl ClusterOp {
    /// Make the change on `cluster`, as the driver did.
    ///
    /// # Errors
    /// What the cluster answered the driver (an unknown pod, a duplicate).
    pub fn apply(self, cluster: &mut Cluster) -> Result<(), ClusterError> {
        match self {
            ClusterOp::AddNode(n) => cluster.add_node(n).map(|_| ()),
            ClusterOp::UpdateNode(n) => cluster.update_node(n),
            ClusterOp::RemoveNode(n) => cluster.remove_node(&n),
            ClusterOp::UpsertJob(j) => {
                cluster.upsert_job(j);
                Ok(())
            }
            ClusterOp::RemoveJob(j) => {
                cluster.remove_job(&j);
                Ok(())
            }
            ClusterOp::MarkStarted { job, ms } => {
                cluster.mark_started(&job, ms);
                Ok(())
            }
            ClusterOp::AddPod { pod, node } => cluster.add_pod(pod, node.as_deref()),
            ClusterOp::RemovePod(p) => cluster.remove_pod(&p).map(|_| ()),
            ClusterOp::ObserveBound { pod, node } => cluster.observe_bound(&pod, &node),
            ClusterOp::SetGates { pod, gates } => {
                cluster.set_scheduling_gates(&pod, gates);
                Ok(())
            }
            ClusterOp::SetLabels { pod, labels } => {
                cluster.set_labels(&pod, labels);
                Ok(())
            }
            ClusterOp::SetBudget { name, budget } => {
                cluster.set_budget(name, budget);
                Ok(())
            }
            ClusterOp::RemoveBudget(b) => {
                cluster.remove_budget(&b);
                Ok(())
            }
            ClusterOp::SetResourceSlice { name, slice } => {
                cluster.set_resource_slice(&name, slice);
                Ok(())
            }
            ClusterOp::RemoveResourceSlice(name) => {
                cluster.remove_resource_slice(&name);
                Ok(())
            }
            ClusterOp::SetDeviceClass(class) => {
                cluster.set_device_class(class);
                Ok(())
            }
            ClusterOp::RemoveDeviceClass(name) => {
                cluster.remove_device_class(&name);
                Ok(())
            }
            ClusterOp::SetCsiDriver {
                name,
                storage_capacity,
            } => {
                cluster.set_csi_driver(&name, storage_capacity);
                Ok(())
            }
            ClusterOp::SetStorageCapacity(c) => {
                cluster.set_storage_capacity(c);
                Ok(())
            }
            ClusterOp::RemoveStorageCapacity(key) => {
                cluster.remove_storage_capacity(&key);
                Ok(())
            }
            ClusterOp::SetVolumeAttachment(a) => {
                cluster.set_volume_attachment(a);
                Ok(())
            }
            ClusterOp::RemoveVolumeAttachment(name) => {
                cluster.remove_volume_attachment(&name);
                Ok(())
            }
            ClusterOp::SetDeviceTaintRule(rule) => {
                cluster.set_device_taint_rule(rule);
                Ok(())
            }
            ClusterOp::RemoveDeviceTaintRule(name) => {
                cluster.remove_device_taint_rule(&name);
                Ok(())
            }
            ClusterOp::SetClaim(claim) => {
                cluster.set_claim(claim);
                Ok(())
            }
            ClusterOp::RemoveClaim(key) => {
                cluster.remove_claim(&key);
                Ok(())
            }
            ClusterOp::SetVolume(v) => {
                cluster.set_volume(v);
                Ok(())
            }
            ClusterOp::RemoveVolume(name) => {
                cluster.remove_volume(&name);
                Ok(())
            }
            ClusterOp::SetStorageClass(c) => {
                cluster.set_storage_class(c);
                Ok(())
            }
            ClusterOp::RemoveStorageClass(name) => {
                cluster.remove_storage_class(&name);
                Ok(())
            }
            ClusterOp::SetVolumeClaim(c) => {
                cluster.set_volume_claim(c);
                Ok(())
            }
            ClusterOp::RemoveVolumeClaim(key) => {
                cluster.remove_volume_claim(&key);
                Ok(())
            }
            ClusterOp::SetVolumeLimits { node, limits } => {
                cluster.set_volume_limits(&node, limits);
                Ok(())
            }
            ClusterOp::SetTopologyLevels(keys) => Ok(cluster.set_topology_levels(keys)?),
            ClusterOp::SetQueues(queues) => Ok(cluster.set_queues(queues)?),
        }
    }
}

impl Cluster {
    /// Keep (or stop keeping) a journal of every change drivers make.
    pub fn keep_journal(&mut self, keep: bool) {
        self.journal = keep.then(Vec::new);
    }

    /// The changes journaled since the last call (none when no journal is
    /// kept).
    pub fn take_journal(&mut self) -> Vec<ClusterOp> {
        self.journal
            .as_mut()
            .map(std::mem::take)
            .unwrap_or_default()
    }

    /// How many changes the journal holds.
    pub fn journal_len(&self) -> usize {
        self.journal.as_ref().map_or(0, Vec::len)
    }

    /// Ops that rebuild this cluster from an empty one: its nodes (those
    /// removed too, added and removed again, so every node keeps its
    /// index), budgets, then jobs and pods in the order they were created
    /// (the queue breaks ties by it), each job with when it started and
    /// each pod bound where it is bound. A pod holding a reservation for a
    /// waiting gang comes back pending: the wait is the scheduler's, not
    /// the cluster's.
    pub fn as_ops(&self) -> Vec<ClusterOp> {
        let mut ops = Vec::new();
        let levels = self.domains().levels();
        if levels.iter().ne(crate::DEFAULT_LEVELS) {
            ops.push(ClusterOp::SetTopologyLevels(levels.to_vec()));
        }
        if !self.queues().is_empty() {
            ops.push(ClusterOp::SetQueues(self.queues().to_vec()));
        }
        for (i, node) in self.nodes().iter().enumerate() {
            ops.push(ClusterOp::AddNode(node.clone()));
            if !self.is_live(i) {
                ops.push(ClusterOp::RemoveNode(node.name.clone()));
            }
        }
        for (name, budget) in self.budgets() {
            ops.push(ClusterOp::SetBudget {
                name: name.to_string(),
                budget: budget.clone(),
            });
        }
        ops.extend(self.devices.as_ops(|pod| {
            self.pods
                .get(pod)
                .is_some_and(|e| matches!(e.state, PodState::Bound(_)))
        }));
        let mut created: Vec<(u64, Vec<ClusterOp>)> = Vec::new();
        for e in self.jobs.values() {
            let mut job = vec![ClusterOp::UpsertJob(e.job.clone())];
            if let Some(ms) = e.started_ms {
                job.push(ClusterOp::MarkStarted {
                    job: e.job.name.clone(),
                    ms,
                });
            }
            created.push((e.unit_id, job));
        }
        for e in self.pods.values() {
            let node = match e.state {
                PodState::Bound(i) => Some(self.nodes()[i].name.clone()),
                PodState::Pending | PodState::Reserved(_) => None,
            };
            created.push((
                e.unit_id,
                vec![ClusterOp::AddPod {
                    pod: e.pod.clone(),
                    node,
                }],
            ));
        }
        created.sort_by_key(|(id, _)| *id);
        ops.extend(created.into_iter().flat_map(|(_, o)| o));
        ops
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Resources;

    #[test]
    fn a_journal_applied_to_an_empty_cluster_gives_the_same_snapshot() {
        let r = Resources {
            cpu_milli: 4000,
            memory_mib: 4096,
            gpus: 2,
        };
        let mut c = Cluster::new();
        c.keep_journal(true);
        c.add_node(Node::new("a", r)).unwrap();
        c.add_node(Node::new("b", r)).unwrap();
        c.add_pod(Pod::new("p", r), Some("a")).unwrap();
        c.add_pod(Pod::new("q", r), None).unwrap();
        c.observe_bound("q", "b").unwrap();
        c.set_labels("q", Labels::from([("k".into(), "v".into())]));
        let _ = c.add_pod(Pod::new("p", r), None); // refused: a duplicate
        c.remove_pod("p").unwrap();
        c.remove_node("a").unwrap();
        c.set_topology_levels(vec!["rack".into()]).unwrap();
        let ops = c.take_journal();
        assert_eq!(ops.len(), 10);
        assert!(c.take_journal().is_empty(), "taken");

        let mut again = Cluster::new();
        for op in ops {
            let _ = op.apply(&mut again);
        }
        let pods = |c: &Cluster| -> Vec<(Pod, PodState)> {
            c.pods().map(|(p, s)| (p.clone(), s)).collect()
        };
        assert_eq!(pods(&again), pods(&c));
        assert_eq!(again.nodes(), c.nodes());
        assert_eq!(again.totals(), c.totals());
        assert_eq!(again.domains().levels(), ["rack", "kubernetes.io/hostname"]);

        // The same snapshot from its ops, a removed node keeping its place.
        let mut rebuilt = Cluster::new();
        for op in c.as_ops() {
            op.apply(&mut rebuilt).unwrap();
        }
        assert_eq!(pods(&rebuilt), pods(&c));
        assert_eq!(rebuilt.nodes(), c.nodes());
        assert_eq!(rebuilt.is_live(0), c.is_live(0));
        assert_eq!(rebuilt.totals(), c.totals());
        assert_eq!(rebuilt.domains().levels(), c.domains().levels());
    }
}
