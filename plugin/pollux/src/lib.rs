//! A Pollux-like policy (after Qiao et al., "Pollux: Co-adaptive Cluster
//! Scheduling for Goodput-Optimized Deep Learning", OSDI'21): every scale
//! step re-divides the GPUs among the jobs by marginal gain. Waiting jobs
//! are admitted first, at their `min`, with workers taken where the
//! throughput lost is least (the widest jobs); then what is idle goes, one
//! worker at a time, to the job whose throughput gains the most per GPU,
//! and a job is resized only when the time saved on its remaining work
//! repays `restart_margin` restarts (Pollux charges each re-allocation).
//!
//! Simplified: Pollux fits each job's goodput (throughput × statistical
//! efficiency, learned online from its batch size and gradient noise) and
//! tunes the batch size with the allocation; here every job follows one
//! assumed power law `throughput ∝ workers^α` (`scaling_exponent`), and the
//! remaining work comes from the job's reported progress. Pollux optimises
//! a fairness-weighted sum over all jobs at once with a genetic algorithm;
//! here the greedy marginal-gain step stands for it. Gangs, all or nothing,
//! admitted as requested or at `min`; FIFO with skipping; pods consolidated.

use dragon_policy_sdk::elastic::{GrowthModel, Restarts, grow_repaying, least_loss_order};
use dragon_policy_sdk::packing::{admit_at_min, consolidating_score};
use dragon_policy_sdk::types::*;
use dragon_policy_sdk::{Policy, Refusal, export_policy, policy, rules};
use serde::Deserialize;

/// The knobs.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct Settings {
    /// `α` of the assumed throughput model, in (0, 1].
    pub scaling_exponent: f64,
    /// What one resize costs a running job, s.
    pub restart_cost_s: f64,
    /// A growth is made only if it saves this many restarts' worth of time.
    pub restart_margin: f64,
    /// A job resized less than this long ago is not grown again, s.
    pub resize_interval_s: f64,
    /// How long a gang waits in permit for members that do not exist yet.
    pub gang_timeout_s: f64,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            scaling_exponent: 0.86,
            restart_cost_s: 30.0,
            restart_margin: 2.0,
            // Pollux re-optimises every 60 s; a job is left a few rounds
            // to pay its restart back.
            resize_interval_s: 300.0,
            gang_timeout_s: 60.0,
        }
    }
}

impl Settings {
    /// Values outside what each key allows are refused, named.
    pub fn validate(&self) -> Result<(), rules::SettingsError> {
        let s = self;
        rules::scaling_exponent("pollux", s.scaling_exponent)?;
        rules::non_negative(
            "pollux",
            &[
                ("restart_cost_s", s.restart_cost_s),
                ("restart_margin", s.restart_margin),
                ("resize_interval_s", s.resize_interval_s),
                ("gang_timeout_s", s.gang_timeout_s),
            ],
        )?;
        Ok(())
    }
}

/// The Pollux-like policy.
#[derive(Debug, Default)]
pub struct Pollux {
    settings: Settings,
}

impl Pollux {
    pub fn with_settings(settings: Settings) -> Pollux {
        Pollux { settings }
    }
}

#[policy]
impl Policy for Pollux {
    type Settings = Settings;

    fn metadata(&self) -> PolicyInfo {
        PolicyInfo::named("pollux", env!("CARGO_PKG_VERSION"))
    }

    fn configure(&mut self, settings: Settings) -> Result<(), Refusal> {
        settings.validate()?;
        self.settings = settings;
        Ok(())
    }

    fn queue_order(&self, _now_ms: u64, units: &[Queued], _view: &View) -> Vec<u32> {
        rules::priority_then_fifo(units)
    }

    // As requested, else at `min`: the scale step sizes it from there.
    fn pre_filter(&self, _now_ms: u64, unit: &Unit, _view: &View) -> PreFilterResult {
        if !rules::is_new_gang(unit) {
            return PreFilterResult::Proceed(Vec::new());
        }
        PreFilterResult::Proceed(vec![unit.workers, unit.min_workers.min(unit.workers)])
    }

    fn score(&self, _pod: &Placement, nodes: &Candidates, view: &View) -> Vec<u32> {
        consolidating_score(nodes, view)
    }

    fn permit(&self, _now_ms: u64, gang: &GangState) -> PermitResult {
        rules::permit_when_reserved(gang, (self.settings.gang_timeout_s * 1000.0) as u64)
    }

    fn scale(&self, input: &ScaleInput, view: &View) -> Vec<ScaleDecision> {
        let s = &self.settings;
        let a = s.scaling_exponent;
        // The jobs as the step resizes them: `workers` is the target so far.
        let mut jobs = input.running.clone();
        let mut free = view.capacity().clone();
        // Each waiting job's room at its minimum is reserved for the next
        // round, by shrinking where a worker costs least.
        let admission = admit_at_min(&input.waiting, &mut jobs, &mut free, |jobs| {
            least_loss_order(a, jobs)
        });
        if admission.all {
            // One power law, no placement term (see the module's note).
            let model = GrowthModel {
                alpha: a,
                cross_node_penalty: 0.0,
                level_penalties: &[],
                view: None,
                leap: false,
                favour_short: false,
            };
            let restarts = Restarts {
                cost_ms: s.restart_cost_s * 1000.0,
                margin: s.restart_margin,
                interval_ms: (s.resize_interval_s * 1000.0) as u64,
            };
            let current = jobs.iter().map(|j| j.workers).collect();
            let target = grow_repaying(
                model,
                restarts,
                input.now_ms,
                &jobs,
                current,
                &mut free,
                |j| {
                    // Only a job this step leaves as it was may grow.
                    input
                        .running
                        .iter()
                        .any(|r| r.id == j.id && r.workers == j.workers)
                },
            );
            for (j, t) in jobs.iter_mut().zip(target) {
                j.workers = t;
            }
        }
        input
            .running
            .iter()
            .zip(&jobs)
            .filter(|(was, now)| was.workers != now.workers)
            .map(|(was, now)| ScaleDecision {
                id: was.id,
                workers: now.workers,
                reason: if now.workers < was.workers {
                    format!(
                        "goodput: {} -> {} workers, where a worker costs least, to admit waiting jobs at their min",
                        was.workers, now.workers
                    )
                } else {
                    format!(
                        "goodput: {} -> {} workers on idle GPUs, the largest marginal gain per GPU, repaying the restart",
                        was.workers, now.workers
                    )
                },
            })
            .collect()
    }
}

export_policy!(Pollux);

#[cfg(test)]
mod tests {
    use super::*;
    use dragon_policy_sdk::testing::*;

    fn input(running: Vec<RunningJob>, waiting: Vec<WaitingJob>) -> ScaleInput {
        ScaleInput {
            now_ms: 1_000_000,
            running,
            waiting,
            last_admit_ms: 0,
            last_scale_down_ms: 0,
        }
    }

    #[test]
    fn idle_gpus_go_to_the_job_that_gains_most_per_gpu() {
        // One 8-GPU node, 3 GPUs idle; a 1-worker job gains far more from a
        // second worker than the 4-worker job from a fifth.
        let mut c = capacity(&[(64_000, 512_000, 8)]);
        c.free_gpus = vec![3];
        let jobs = vec![running_job(1, 4, 2, 8, 0), running_job(2, 1, 1, 2, 0)];
        let d = Pollux::default().scale(&input(jobs, vec![]), &view_of(&c));
        // Job 2 takes one (1 -> 2, its max), then job 1 the other two.
        assert_eq!(
            d.iter().map(|d| (d.id, d.workers)).collect::<Vec<_>>(),
            [(1, 6), (2, 2)],
            "{d:?}"
        );
    }

    #[test]
    fn a_growth_that_cannot_repay_its_restart_is_not_made() {
        let mut c = capacity(&[(64_000, 512_000, 8)]);
        c.free_gpus = vec![4];
        let mut nearly_done = running_job(1, 1, 1, 2, 0);
        nearly_done.stats.progress_permille = Some(999);
        nearly_done.stats.running_ms = 3_600_000;
        // 3.6 s left: doubling saves under 2 s, a restart costs 30 s.
        let d = Pollux::default().scale(&input(vec![nearly_done], vec![]), &view_of(&c));
        assert!(d.is_empty(), "{d:?}");
    }

    #[test]
    fn waiting_jobs_are_admitted_at_min_by_shrinking_the_widest_job() {
        // Two full 4-GPU nodes: a 4-worker and a 2-worker job, both elastic
        // to 1; a job waits needing 2 GPUs at its min.
        let mut c = capacity(&[(32_000, 128_000, 4), (32_000, 128_000, 4)]);
        c.free_gpus = vec![0, 2];
        let jobs = vec![running_job(1, 2, 1, 4, 1), running_job(2, 4, 1, 4, 0)];
        let d = Pollux::default().scale(&input(jobs, vec![waiting_job(9, 0, 4, 2)]), &view_of(&c));
        // Node 1's 2 free GPUs fit it already: nothing shrinks, nothing
        // grows into its room.
        assert!(d.is_empty(), "{d:?}");
        c.free_gpus = vec![0, 0];
        let jobs = vec![running_job(1, 2, 1, 4, 1), running_job(2, 4, 1, 4, 0)];
        let d = Pollux::default().scale(&input(jobs, vec![waiting_job(9, 0, 4, 2)]), &view_of(&c));
        assert_eq!(
            d.iter().map(|d| (d.id, d.workers)).collect::<Vec<_>>(),
            [(2, 2)],
            "{d:?}"
        );
        assert!(
            d[0].reason.contains("admit waiting jobs"),
            "{}",
            d[0].reason
        );
    }
}
