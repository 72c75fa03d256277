//! Summary metrics of a run. Unfinished jobs are never dropped: their job
//! completion and waiting times are censored at the end of the run (a lower
//! bound on the truth), and the summary says how many there are.

use serde::Serialize;

use super::engine::{JobRecord, SimRun};
use super::queues::{QueueSummary, jain_index};

/// The numbers `dragon simulate --json` prints.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Summary {
    pub policy: String,
    pub settings: String,
    pub trace: String,
    pub jobs_total: u64,
    pub jobs_completed: u64,
    pub jobs_unfinished: u64,
    /// Job completion time (finish − submission), seconds.
    pub avg_jct_s: f64,
    pub p50_jct_s: f64,
    pub p95_jct_s: f64,
    /// Waiting time (first moment all tasks ran − submission), seconds.
    pub avg_wait_s: f64,
    pub p95_wait_s: f64,
    pub p99_wait_s: f64,
    /// From t = 0 to the last completion (or the end of the run), seconds.
    pub makespan_s: f64,
    /// Time-averaged share of GPUs held by pods.
    pub gpu_alloc: f64,
    /// With topology levels: the free GPUs of the largest free domain of
    /// the narrowest level, averaged over the run (fragmentation: the
    /// lower, the more the free room is scattered).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub largest_free_domain: Option<f64>,
    /// Time-averaged share of GPUs held by jobs that were training.
    pub gpu_util: f64,
    /// Time-averaged number of submitted jobs not yet started.
    pub avg_queue: f64,
    pub scale_ups: u64,
    pub scale_downs: u64,
    pub restarts: u64,
    /// The policy's resizes held back by the resize limits.
    #[serde(skip_serializing_if = "is_zero")]
    pub resizes_held: u64,
    pub admitted_below_request: u64,
    /// Jobs evicted for a higher-priority one.
    pub preemptions: u64,
    /// No job could make progress any more and none could be scheduled.
    pub deadlocked: bool,
    pub horizon_reached: bool,
    /// JCT and waiting statistics include unfinished jobs counted at `end_s`.
    pub censored: bool,
    pub end_s: f64,
    pub unfinished_jobs: Vec<String>,
    pub policy_errors: u64,
    pub policy_error_samples: Vec<String>,
    pub scheduling_rounds: u64,
    pub scale_steps: u64,
    /// Per queue of the trace, what it held against what it was owed.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub queues: Vec<QueueSummary>,
    /// Jain's index over the queues' shares of what they were owed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub jain_index: Option<f64>,
}

fn round(x: f64, digits: i32) -> f64 {
    let f = 10f64.powi(digits);
    let r = (x * f).round() / f;
    if r == 0.0 { 0.0 } else { r }
}

/// Nearest-rank percentile of sorted values (0 for none).
pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil().max(1.0) as usize;
    sorted[rank.min(sorted.len()) - 1]
}

fn mean(v: &[f64]) -> f64 {
    if v.is_empty() {
        0.0
    } else {
        v.iter().sum::<f64>() / v.len() as f64
    }
}

/// Job completion time in ms, censored at `end_ms` for unfinished jobs.
pub fn jct_ms(j: &JobRecord, end_ms: u64) -> u64 {
    j.finished_ms.unwrap_or(end_ms).saturating_sub(j.arrival_ms)
}

/// Waiting time in ms, censored at `end_ms` for jobs that never started.
pub fn wait_ms(j: &JobRecord, end_ms: u64) -> u64 {
    j.started_ms.unwrap_or(end_ms).saturating_sub(j.arrival_ms)
}

impl Summary {
    /// Summarize a run.
    pub fn of(run: &SimRun) -> Summary {
        let end = run.end_ms;
        let mut jct: Vec<f64> = run
            .jobs
            .iter()
            .map(|j| jct_ms(j, end) as f64 / 1e3)
            .collect();
        let mut wait: Vec<f64> = run
            .jobs
            .iter()
            .map(|j| wait_ms(j, end) as f64 / 1e3)
            .collect();
        jct.sort_by(f64::total_cmp);
        wait.sort_by(f64::total_cmp);
        let completed = run.jobs.iter().filter(|j| j.finished_ms.is_some()).count() as u64;
        let unfinished: Vec<String> = run
            .jobs
            .iter()
            .filter(|j| j.finished_ms.is_none())
            .map(|j| j.name.clone())
            .collect();
        let capacity = run.total_gpus as f64 * end as f64;
        let share = |x: f64| {
            if capacity > 0.0 {
                round(x / capacity, 4)
            } else {
                0.0
            }
        };
        Summary {
            policy: run.policy.clone(),
            settings: run.settings.clone(),
            trace: run.trace.clone(),
            jobs_total: run.jobs.len() as u64,
            jobs_completed: completed,
            jobs_unfinished: unfinished.len() as u64,
            avg_jct_s: round(mean(&jct), 1),
            p50_jct_s: round(percentile(&jct, 50.0), 1),
            p95_jct_s: round(percentile(&jct, 95.0), 1),
            avg_wait_s: round(mean(&wait), 1),
            p95_wait_s: round(percentile(&wait, 95.0), 1),
            p99_wait_s: round(percentile(&wait, 99.0), 1),
            makespan_s: round(end as f64 / 1e3, 1),
            gpu_alloc: share(run.gpu_alloc_integral),
            largest_free_domain: run
                .largest_free_integral
                .filter(|_| end > 0)
                .map(|i| round(i / end as f64, 1)),
            gpu_util: share(run.gpu_busy_integral),
            avg_queue: if end > 0 {
                round(run.queue_integral / end as f64, 2)
            } else {
                0.0
            },
            scale_ups: run.scale_ups,
            scale_downs: run.scale_downs,
            restarts: run.jobs.iter().map(|j| u64::from(j.restarts)).sum(),
            resizes_held: run.resizes_held,
            admitted_below_request: run.admitted_below_request,
            preemptions: run.preemptions,
            deadlocked: run.deadlocked,
            horizon_reached: run.horizon_reached,
            censored: !unfinished.is_empty(),
            end_s: round(end as f64 / 1e3, 1),
            unfinished_jobs: unfinished,
            policy_errors: run.policy_errors,
            policy_error_samples: run.policy_error_samples.clone(),
            scheduling_rounds: run.rounds,
            scale_steps: run.scale_steps,
            queues: run.queues.clone(),
            jain_index: jain_index(&run.queues).map(|j| round(j, 3)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&v, 50.0), 50.0);
        assert_eq!(percentile(&v, 95.0), 95.0);
        assert_eq!(percentile(&[3.0], 95.0), 3.0);
        assert_eq!(percentile(&[], 50.0), 0.0);
        assert_eq!(percentile(&[1.0, 2.0], 50.0), 1.0);
    }

    #[test]
    fn unfinished_jobs_are_censored_at_the_end() {
        let job = |finished: Option<u64>, started: Option<u64>| JobRecord {
            name: "j".into(),
            workload: String::new(),
            arrival_ms: 1_000,
            started_ms: started,
            finished_ms: finished,
            requested_workers: 1,
            min_workers: 1,
            max_workers: 1,
            final_workers: 1,
            scale_ups: 0,
            scale_downs: 0,
            restarts: 0,
            max_nodes: 1,
            partial_ms: 0,
        };
        assert_eq!(jct_ms(&job(Some(5_000), Some(2_000)), 9_000), 4_000);
        assert_eq!(jct_ms(&job(None, Some(2_000)), 9_000), 8_000);
        assert_eq!(wait_ms(&job(None, None), 9_000), 8_000);
        assert_eq!(wait_ms(&job(None, Some(2_000)), 9_000), 1_000);
        // A job that had not even arrived by the end counts as zero, not negative.
        assert_eq!(jct_ms(&job(None, None), 500), 0);
    }
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}
