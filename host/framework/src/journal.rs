//! What drivers do to the snapshot, as data: every change a driver makes
//! through [`Cluster`]'s methods, in order, when the cluster keeps a
//! journal. Applied in the same order to an empty cluster, with the same
//! rounds in between, the ops give the same snapshot: the framework adds
//! nothing of its own that is not decided by a round. A recording of a
//! run is these ops plus each round's time (see `dragon replay`).

use serde::{Deserialize, Serialize};

use super::cluster::{Cluster, ClusterError};
use super::model::{DisruptionBudget, Job, Node, Pod};
use super::selector::Labels;

/// One change a driver made to the snapshot.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum ClusterOp {
    AddNode(Node),
    UpdateNode(Node),
    RemoveNode(String),
    UpsertJob(Job),
    RemoveJob(String),
    MarkStarted {
        job: String,
        ms: u64,
    },
    AddPod {
        pod: Pod,
        node: Option<String>,
    },
    RemovePod(String),
    ObserveBound {
        pod: String,
        node: String,
    },
    SetGates {
        pod: String,
        gates: Vec<String>,
    },
    SetLabels {
        pod: String,
        labels: Labels,
    },
    SetBudget {
        name: String,
        budget: DisruptionBudget,
    },
    RemoveBudget(String),
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
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::PodState;
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
        let ops = c.take_journal();
        assert_eq!(ops.len(), 9);
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
    }
}
