//! The run's timeline: a row each time the cluster changes, and what each
//! queue of the trace held and was owed at that moment.

use super::*;
use crate::metrics::{jct_ms, wait_ms};

impl Sim<'_> {
    pub(super) fn record_point(&mut self) {
        self.observe_queues();
        let now = self.now;
        let (_, used) = self.sched.cluster().totals();
        let mut p = Point {
            t_ms: now,
            gpus_allocated: u64::from(used.gpus),
            gpus_busy: 0,
            queued: 0,
            running: 0,
            stalled: 0,
            done: self.done as u32,
        };
        // A job holding nothing is neither busy, stalled nor half placed:
        // it is queued until it starts (a started job is placed whole
        // first, so none that holds nothing is busy unstarted).
        p.queued = (self.active.len() as u64 - (self.started - self.done)) as u32;
        let jobs = &mut self.jobs;
        self.holding.retain(|&i| {
            let j = &mut jobs[i];
            if j.busy(now) {
                p.gpus_busy += j.gpus();
                p.running += 1;
            }
            if j.stalled(now) {
                p.stalled += 1;
            }
            if j.partial() {
                j.partial_since.get_or_insert(now);
            } else if let Some(s) = j.partial_since.take() {
                j.record.partial_ms += now - s;
            }
            j.full || !j.placement.is_empty()
        });
        if self
            .run
            .timeline
            .last()
            .is_some_and(|l| Point { t_ms: now, ..*l } == p)
        {
            return;
        }
        if self.run.timeline.last().is_some_and(|l| l.t_ms == now) {
            self.run.timeline.pop();
        }
        self.run.timeline.push(p);
    }

    /// Per queue: the GPUs its jobs' placed pods hold and the GPUs its
    /// arrived, unfinished jobs ask for at their requested size.
    fn observe_queues(&mut self) {
        let Some(meter) = self.queues.as_mut() else {
            return;
        };
        let mut per_queue = vec![(0u64, 0u64); self.trace.queues.len()];
        for &i in &self.active {
            let Some(q) = self.trace.jobs[i].queue else {
                continue;
            };
            let j = &self.jobs[i];
            let cluster = self.sched.cluster();
            let held: u64 = j
                .placement
                .keys()
                .filter_map(|k| cluster.pod(k))
                .map(|(p, _)| u64::from(p.request.gpus))
                .sum();
            let asked = u64::from(j.ps_gpus)
                + u64::from(j.record.requested_workers) * u64::from(j.worker_gpus);
            per_queue[q].0 += held;
            per_queue[q].1 += asked;
        }
        meter.observe_all(self.now, &per_queue);
    }

    /// Each queue's summary at the end of the run.
    pub(super) fn queue_summaries(&self) -> Vec<QueueSummary> {
        let Some(meter) = &self.queues else {
            return Vec::new();
        };
        let end = self.run.end_ms;
        let mut jobs = vec![Vec::new(); self.trace.queues.len()];
        for (tj, j) in self.trace.jobs.iter().zip(&self.jobs) {
            let (Some(q), true) = (tj.queue, j.record.arrival_ms <= end) else {
                continue;
            };
            let (wait, jct) = (wait_ms(&j.record, end), jct_ms(&j.record, end));
            jobs[q].push((wait as f64 / 1000.0, jct as f64 / 1000.0));
        }
        meter.summaries(&self.trace.queues, end, &jobs)
    }
}
