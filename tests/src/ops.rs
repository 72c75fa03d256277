//! The cluster changes tests make, as the typed ops drivers make them: on a
//! cluster being built or on a scheduler's snapshot alike.

use dragon_framework::{
    Cluster, ClusterError, ClusterOp, DisruptionBudget, Job, Node, Pod, Scheduler,
};

/// A target for [`ClusterOp`]s, with the ops tests use by name.
pub trait Ops {
    /// Make the change.
    ///
    /// # Errors
    /// What the cluster answered (an unknown pod, a duplicate).
    fn op(&mut self, op: ClusterOp) -> Result<(), ClusterError>;

    fn upsert_job(&mut self, job: Job) {
        self.op(ClusterOp::UpsertJob(job)).expect("a job");
    }

    fn remove_job(&mut self, name: &str) {
        self.op(ClusterOp::RemoveJob(name.into()))
            .expect("a job removed");
    }

    fn add_pod(&mut self, pod: Pod, node: Option<&str>) -> Result<(), ClusterError> {
        self.op(ClusterOp::AddPod {
            pod,
            node: node.map(Into::into),
        })
    }

    fn observe_bound(&mut self, pod: &str, node: &str) -> Result<(), ClusterError> {
        self.op(ClusterOp::ObserveBound {
            pod: pod.into(),
            node: node.into(),
        })
    }

    fn add_node(&mut self, node: Node) -> Result<(), ClusterError> {
        self.op(ClusterOp::AddNode(node))
    }

    fn update_node(&mut self, node: Node) -> Result<(), ClusterError> {
        self.op(ClusterOp::UpdateNode(node))
    }

    fn set_budget(&mut self, name: &str, budget: DisruptionBudget) {
        let name = name.to_string();
        self.op(ClusterOp::SetBudget { name, budget })
            .expect("a budget");
    }
}

impl Ops for Cluster {
    fn op(&mut self, op: ClusterOp) -> Result<(), ClusterError> {
        op.apply(self)
    }
}

impl Ops for Scheduler {
    fn op(&mut self, op: ClusterOp) -> Result<(), ClusterError> {
        self.apply(op)
    }
}
