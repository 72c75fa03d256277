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
