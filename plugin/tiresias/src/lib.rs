//! Tiresias (Gu et al., "Tiresias: A GPU Cluster Manager for Distributed
//! Deep Learning", NSDI'19) as a Dragon policy: discretised two-dimensional
//! least-attained-service (2D-LAS). A job's attained service is the
//! GPU-time it has held (GPUs × time, the two dimensions); the queue is split
//! into a few priority queues by thresholds on it, the least-served queue
//! first and FIFO inside a queue, so that jobs no one knows the length of
//! are served shortest-first in effect. A job that waited longer than
//! `promote_factor` times the time it has run goes back to the first queue
//! (Tiresias' starvation knob). Gangs, all or nothing.
//!
//! Simplified, because a Dragon policy can resize running jobs but not
//! suspend them: where Tiresias preempts a job of a lower queue for a job
//! of a higher one, this shrinks jobs of lower queues — the most served
//! first — towards their `min` until the waiting job fits (a restart, not a
//! suspension). Fixed-size jobs are therefore never preempted. Placement
//! consolidates (a job's pods together, best fit), as Tiresias does for the
//! models its profiler finds sensitive to it; the simulator's speed model
//! penalises every job that spans nodes.

use dragon_policy_sdk::elastic::job_by_job;
use dragon_policy_sdk::packing::{consolidating_score, pack, partial, shrink_until_fits, tasks_at};
use dragon_policy_sdk::types::*;
use dragon_policy_sdk::{Policy, Refusal, export_policy, policy, rules};
use serde::Deserialize;

/// Tiresias' knobs.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct Settings {
    /// Attained-service thresholds between the queues, GPU-seconds,
    /// ascending: `n` thresholds make `n + 1` queues.
    pub queue_thresholds_gpu_s: Vec<f64>,
    /// A waiting job goes back to the first queue once it has waited this
    /// many times the time it has run.
    pub promote_factor: f64,
    /// Shrink jobs of lower queues for a waiting job of a higher one.
    pub shrink_lower_queues: bool,
    /// How long a gang waits in permit for members that do not exist yet.
    pub gang_timeout_s: f64,
}

/// The most queues: a longer list is refused.
const MAX_QUEUES: usize = 16;

impl Default for Settings {
    fn default() -> Self {
        Settings {
            // Two queues split at one GPU-hour: the prototype's two-queue
            // setting; a one-GPU job is demoted after an hour of service.
            queue_thresholds_gpu_s: vec![3_600.0],
            promote_factor: 4.0,
            shrink_lower_queues: true,
            gang_timeout_s: 60.0,
        }
    }
}

impl Settings {
    /// Values outside what each key allows are refused, named.
    pub fn validate(&self) -> Result<(), rules::SettingsError> {
        let s = self;
        let t = &s.queue_thresholds_gpu_s;
        if t.len() >= MAX_QUEUES
            || t.iter().any(|v| !v.is_finite() || *v <= 0.0)
            || t.windows(2).any(|w| w[0] >= w[1])
        {
            return Err(rules::SettingsError::must(
                "tiresias",
                "queue_thresholds_gpu_s",
                format!(
                    "be at most {} positive, ascending GPU-seconds",
                    MAX_QUEUES - 1
                ),
                format!("{t:?}"),
            ));
        }
        rules::non_negative(
            "tiresias",
            &[
                ("promote_factor", s.promote_factor),
                ("gang_timeout_s", s.gang_timeout_s),
            ],
        )?;
        Ok(())
    }

    /// The queue of a job with this attained service (0 is served first).
    pub fn queue(&self, attained_gpu_ms: u64) -> usize {
        let gpu_s = attained_gpu_ms as f64 / 1000.0;
        self.queue_thresholds_gpu_s
            .iter()
            .take_while(|&&t| gpu_s >= t)
            .count()
    }
}

/// The Tiresias policy.
#[derive(Debug, Default)]
pub struct Tiresias {
    settings: Settings,
}

impl Tiresias {
    pub fn with_settings(settings: Settings) -> Tiresias {
        Tiresias { settings }
    }

    /// The queue a waiting job is in: by its attained service, or the first
    /// when it has waited `promote_factor` times what it has run.
    fn waiting_queue(&self, now_ms: u64, arrival_ms: u64, stats: &JobStats, gpus: u32) -> usize {
        let ran_ms = stats.attained_gpu_ms / u64::from(gpus.max(1));
        let waited_ms = now_ms.saturating_sub(arrival_ms).saturating_sub(ran_ms);
        if ran_ms > 0 && waited_ms as f64 >= self.settings.promote_factor * ran_ms as f64 {
            0
        } else {
            self.settings.queue(stats.attained_gpu_ms)
        }
    }
}

#[policy]
impl Policy for Tiresias {
    type Settings = Settings;

    fn metadata(&self) -> PolicyInfo {
        PolicyInfo::named("tiresias", env!("CARGO_PKG_VERSION"))
    }

    fn configure(&mut self, settings: Settings) -> Result<(), Refusal> {
        settings.validate()?;
        self.settings = settings;
        Ok(())
    }

    // Priority first (the cluster's), then the queue, then FIFO.
    fn queue_order(&self, now_ms: u64, units: &[Queued], _view: &View) -> Vec<u32> {
        let mut order: Vec<u32> = (0..units.len() as u32).collect();
        order.sort_by_key(|&i| {
            let u = &units[i as usize];
            let queue = self.waiting_queue(now_ms, u.arrival_ms, &u.stats, u.total.gpus);
            (std::cmp::Reverse(u.priority), queue, u.arrival_ms, u.id)
        });
        order
    }

    // At its requested size, every pod or none: a job does not train on
    // part of its workers.
    fn pre_filter(&self, _now_ms: u64, unit: &Unit, _view: &View) -> PreFilterResult {
        if !rules::is_new_gang(unit) {
            return PreFilterResult::Proceed(Vec::new());
        }
        if let Some(reason) = partial(unit) {
            return PreFilterResult::Skip(reason);
        }
        PreFilterResult::Proceed(vec![unit.workers])
    }

    fn score(&self, _pod: &Placement, nodes: &Candidates, view: &View) -> Vec<u32> {
        consolidating_score(nodes, view)
    }

    fn permit(&self, _now_ms: u64, gang: &GangState) -> PermitResult {
        rules::permit_when_reserved(gang, (self.settings.gang_timeout_s * 1000.0) as u64)
    }

    // The demotion: for the first waiting job (in queue order) that does
    // not fit at its `min`, take workers from running jobs of strictly lower
    // queues, the most served first, until it fits; nothing if it cannot.
    fn scale(&self, input: &ScaleInput, view: &View) -> Vec<ScaleDecision> {
        if !self.settings.shrink_lower_queues {
            return Vec::new();
        }
        let free = view.capacity();
        let head = input
            .waiting
            .iter()
            .map(|w| {
                let gpus = tasks_at(&w.unit, w.unit.workers)
                    .iter()
                    .map(|t| t.request.gpus)
                    .sum();
                let q = self.waiting_queue(input.now_ms, w.arrival_ms, &w.unit.stats, gpus);
                (q, w)
            })
            .min_by_key(|(q, w)| (std::cmp::Reverse(w.unit.priority), *q, w.arrival_ms, w.id));
        let Some((head_queue, head)) = head else {
            return Vec::new();
        };
        let need = tasks_at(&head.unit, head.unit.min_workers);
        if pack(&need, free).is_some() {
            return Vec::new();
        }
        let mut victims: Vec<usize> = (0..input.running.len())
            .filter(|&i| {
                let j = &input.running[i];
                self.settings.queue(j.stats.attained_gpu_ms) > head_queue
                    && j.workers > j.min_workers.max(1)
            })
            .collect();
        victims.sort_by_key(|&i| std::cmp::Reverse(input.running[i].stats.attained_gpu_ms));
        let steps = job_by_job(&input.running, victims);
        let Some((target, _)) = shrink_until_fits(&need, free, &input.running, steps) else {
            return Vec::new();
        };
        input
            .running
            .iter()
            .zip(target)
            .filter(|(j, w)| *w != j.workers)
            .map(|(j, w)| ScaleDecision {
                id: j.id,
                workers: w,
                reason: format!(
                    "demoted: {} GPU-s attained (queue {}) while job {} of queue {head_queue} waits; {} -> {w} workers",
                    j.stats.attained_gpu_ms / 1000,
                    self.settings.queue(j.stats.attained_gpu_ms),
                    head.id,
                    j.workers
                ),
            })
            .collect()
    }
}

export_policy!(Tiresias);

#[cfg(test)]
mod tests {
    use super::*;
    use dragon_policy_sdk::testing::*;

    fn queued(id: u64, arrival_ms: u64, attained_gpu_ms: u64) -> Queued {
        Queued {
            id,
            arrival_ms,
            priority: 0,
            pods: 1,
            total: gpu_worker(),
            stats: JobStats {
                attained_gpu_ms,
                ..JobStats::NONE
            },
        }
    }

    #[test]
    fn the_least_served_queue_goes_first_and_fifo_within_a_queue() {
        let t = Tiresias::default();
        // Job 0 arrived first but has held a GPU for two hours: queue 1.
        let units = [
            queued(0, 0, 7_200_000),
            queued(1, 10, 0),
            queued(2, 5, 1_000_000),
        ];
        assert_eq!(
            t.queue_order(7_300_000, &units, &View::default()),
            [2, 1, 0]
        );
        assert_eq!(t.settings.queue(3_599_999), 0);
        assert_eq!(t.settings.queue(3_600_000), 1);
    }

    #[test]
    fn a_job_that_waited_long_enough_is_promoted_to_the_first_queue() {
        let t = Tiresias::default();
        // Ran 2 h (queue 1), then waited: promoted after 4 × 2 h.
        let late = queued(0, 0, 7_200_000);
        let fresh = queued(1, 100, 0);
        let before = 7_200_000 + 4 * 7_200_000 - 1;
        assert_eq!(
            t.queue_order(before, &[late.clone(), fresh.clone()], &View::default()),
            [1, 0]
        );
        assert_eq!(
            t.queue_order(before + 1, &[late, fresh], &View::default()),
            [0, 1]
        );
    }

    fn running(id: u64, workers: u32, min: u32, attained_gpu_ms: u64, node: u32) -> RunningJob {
        let mut j = running_job(id, workers, min, workers, node);
        j.stats.attained_gpu_ms = attained_gpu_ms;
        j
    }

    #[test]
    fn a_waiting_job_shrinks_the_most_served_jobs_of_lower_queues_only() {
        // Two full 4-GPU nodes: job 1 well served (queue 1), job 2 fresh
        // (queue 0), both elastic down to 1 worker.
        let mut full = capacity(&[(32_000, 128_000, 4), (32_000, 128_000, 4)]);
        full.free_gpus = vec![0, 0];
        let v = view_of(&full);
        let input = ScaleInput {
            now_ms: 10_000_000,
            running: vec![
                running(1, 4, 1, 9_000_000_000, 0),
                running(2, 4, 1, 1_000, 1),
            ],
            waiting: vec![waiting_job(9, 9_000_000, 2, 2)],
            last_admit_ms: 0,
            last_scale_down_ms: 0,
        };
        let d = Tiresias::default().scale(&input, &v);
        assert_eq!(
            d.iter().map(|d| (d.id, d.workers)).collect::<Vec<_>>(),
            [(1, 2)],
            "{d:?}"
        );
        assert!(d[0].reason.starts_with("demoted"), "{}", d[0].reason);
        // A waiting job of the same queue as every running one shrinks nobody.
        let mut same = input.clone();
        same.running[0].stats.attained_gpu_ms = 1_000;
        assert!(Tiresias::default().scale(&same, &v).is_empty());
    }

    #[test]
    fn bad_thresholds_are_refused_naming_the_key() {
        let mut t = Tiresias::default();
        let e = t
            .configure_json(r#"{"queue_thresholds_gpu_s": [100, 50]}"#)
            .unwrap_err();
        assert!(e.message().contains("queue_thresholds_gpu_s"), "{e}");
        t.configure_json(r#"{"queue_thresholds_gpu_s": [60, 3600, 36000]}"#)
            .unwrap();
        assert_eq!(t.settings.queue_thresholds_gpu_s.len(), 3);
    }
}
