//! The queues jobs belong to, and what each holds and asks for now.

use std::collections::HashMap;

use dragon_runtime::QueueRow;

use super::Cluster;
use crate::model::Job;
use crate::names::QueueName;
use crate::teams::{QueueSpec, QueuesError, check_queues};

/// The configured queues and each one's index by name.
#[derive(Debug, Clone, Default)]
pub(crate) struct Queues {
    specs: Vec<QueueSpec>,
    index: HashMap<QueueName, u32>,
}

impl Cluster {
    /// The queues (teams) jobs may belong to, in place of those set before.
    /// A job naming a queue that is not among them belongs to none.
    ///
    /// # Errors
    /// The list is not a usable one (see [`QueuesError`]); the queues in
    /// use stay.
    pub fn set_queues(&mut self, specs: Vec<QueueSpec>) -> Result<(), QueuesError> {
        check_queues(&specs, None)?;
        let index = specs
            .iter()
            .enumerate()
            .map(|(i, q)| (q.name.clone(), i as u32))
            .collect();
        self.journal(|| crate::ClusterOp::SetQueues(specs.clone()));
        self.queues = Queues { specs, index };
        self.changes.room = true;
        Ok(())
    }

    /// The queues, as set.
    pub fn queues(&self) -> &[QueueSpec] {
        &self.queues.specs
    }

    /// The index of `job`'s queue among [`Cluster::queues`].
    pub(crate) fn queue_of(&self, job: &Job) -> Option<u32> {
        job.queue
            .as_ref()
            .and_then(|q| self.queues.index.get(q).copied())
    }

    /// Every queue with the GPUs its jobs hold and ask for (empty without
    /// queues: the cost is a pass over the jobs and their pods, paid only
    /// when queues are set).
    pub fn queue_rows(&self) -> Vec<QueueRow> {
        let specs = &self.queues.specs;
        if specs.is_empty() {
            return Vec::new();
        }
        let mut rows: Vec<QueueRow> = specs
            .iter()
            .map(|q| QueueRow {
                name: q.name.to_string(),
                parent: q
                    .parent
                    .as_ref()
                    .and_then(|p| self.queues.index.get(p).copied()),
                weight_milli: q.weight_milli(),
                guaranteed_gpus: q.guaranteed_gpus,
                borrowing_limit_gpus: q.borrowing_limit_gpus,
                used_gpus: 0,
                demand_gpus: 0,
            })
            .collect();
        for entry in self.jobs.values() {
            let Some(q) = self.queue_of(&entry.job) else {
                continue;
            };
            let asked: u32 = self
                .job_pods(&entry.job.name)
                .map(|(p, _)| p.request.gpus)
                .fold(0, u32::saturating_add);
            let row = &mut rows[q as usize];
            row.used_gpus = row.used_gpus.saturating_add(entry.service.held_gpus());
            row.demand_gpus = row.demand_gpus.saturating_add(asked);
        }
        rows
    }
}

#[cfg(test)]
mod tests {
    use crate::model::{Node, Pod, Resources};
    use crate::{Cluster, ClusterOp, HOSTNAME_LEVEL, QueueSpec};
    use dragon_runtime::ClusterView;
    use dragon_runtime::view::Delta;

    fn gpus(n: u32) -> Resources {
        Resources {
            cpu_milli: 1_000,
            memory_mib: 1_024,
            gpus: n,
        }
    }

    fn queue(name: &str, guaranteed_gpus: u32) -> QueueSpec {
        QueueSpec {
            name: name.into(),
            weight: 2.0,
            guaranteed_gpus,
            borrowing_limit_gpus: Some(1),
            parent: None,
        }
    }

    #[test]
    fn each_queue_counts_the_gpus_its_jobs_hold_and_ask_for() {
        let mut c = Cluster::new();
        c.add_node(Node::new("n", gpus(8))).unwrap();
        c.set_queues(vec![queue("a", 4), queue("b", 4)]).unwrap();
        let mut j = crate::fixtures::job("j", 2);
        j.queue = Some("a".into());
        c.upsert_job(j);
        let mut lost = crate::fixtures::job("lost", 1);
        lost.queue = Some("nowhere".into());
        c.upsert_job(lost);
        for (i, node) in [(0, Some("n")), (1, None)] {
            let mut p = Pod::new(format!("j-{i}"), gpus(3));
            p.job = Some("j".into());
            p.index = i;
            c.add_pod(p, node).unwrap();
        }
        let rows = c.queue_rows();
        assert_eq!(rows.len(), 2);
        let (a, b) = (&rows[0], &rows[1]);
        assert_eq!((a.used_gpus, a.demand_gpus), (3, 6));
        assert_eq!((b.used_gpus, b.demand_gpus), (0, 0));
        assert_eq!((a.weight_milli, a.borrowing_limit_gpus), (2_000, Some(1)));
        let unit = c.job_unit("j").unwrap();
        assert_eq!(c.job_stats(0, unit).queue, Some(0));
        let lost = c.job_unit("lost").unwrap();
        assert_eq!(c.job_stats(0, lost).queue, None, "an unknown queue is none");
        // The queues are part of the cluster's ops.
        assert!(
            c.as_ops()
                .iter()
                .any(|op| matches!(op, ClusterOp::SetQueues(q) if q.len() == 2))
        );
        let e = c.set_queues(vec![queue("a", 1), queue("a", 1)]);
        assert!(e.is_err());
        assert_eq!(c.queues().len(), 2, "a refused list leaves the queues");
    }

    #[test]
    fn new_topology_levels_start_a_new_log_so_every_view_starts_over() {
        let mut c = Cluster::new();
        let mut n = Node::new("n", gpus(8));
        n.labels.insert("dragon.dev/rack".into(), "r1".into());
        c.add_node(n).unwrap();
        let seen = Delta::since(&c, None).seen;
        assert!(!Delta::since(&c, Some(seen)).reset);
        c.set_topology_levels(vec!["dragon.dev/rack".into()])
            .unwrap();
        assert!(Delta::since(&c, Some(seen)).reset);
        assert_eq!(ClusterView::levels(&c), ["dragon.dev/rack", HOSTNAME_LEVEL]);
        let mut domains = Vec::new();
        ClusterView::domains(&c, 0, &mut domains);
        assert_eq!(domains, [1, 1]);
    }
}
