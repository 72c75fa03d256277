//! When a waiting gang may start: the scheduler's cluster as it is now,
//! played forward in the simulator under (a copy of) the serving policy.
//! What the cluster does not know — how long jobs run — is assumed, and
//! the answer says what was: a running job that reports its progress
//! (`dragon.dev/progress`) keeps the pace it had, others are taken to need
//! `assumeRemainingSeconds` more, waiting ones `assumeDurationSeconds`.

use dragon_framework::Cluster;
use dragon_runtime::Hooks;
use dragon_sim::engine::{SimOptions, simulate};
use dragon_sim::resume::{Assumed, from_cluster};
use dragon_sim::trace::Trace;
use serde::Deserialize;

use super::Estimate;

/// `estimates` in the configuration.
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct EstimateConfig {
    pub enabled: bool,
    /// Time a running job that does not report progress is taken to need.
    pub assume_remaining_seconds: u64,
    /// Run time of a waiting job at its requested size.
    pub assume_duration_seconds: u64,
    /// How far the cluster is played forward at most.
    pub horizon_seconds: u64,
}

impl Default for EstimateConfig {
    fn default() -> EstimateConfig {
        EstimateConfig {
            enabled: true,
            assume_remaining_seconds: 3600,
            assume_duration_seconds: 3600,
            horizon_seconds: 24 * 3600,
        }
    }
}

/// The longest any assumption or the horizon may be: 30 days.
pub const MAX_SECONDS: u64 = 30 * 24 * 3600;

impl EstimateConfig {
    /// Check the bounds.
    ///
    /// # Errors
    /// A value out of range, named by its key.
    pub fn check(&self) -> anyhow::Result<()> {
        for (key, v) in [
            ("assumeRemainingSeconds", self.assume_remaining_seconds),
            ("assumeDurationSeconds", self.assume_duration_seconds),
            ("horizonSeconds", self.horizon_seconds),
        ] {
            if !(1..=MAX_SECONDS).contains(&v) {
                anyhow::bail!("estimates.{key} must be 1 to {MAX_SECONDS}, got {v}");
            }
        }
        Ok(())
    }
}

/// The cluster as a trace that starts now, and the gang to watch in it.
pub struct Forward {
    trace: Trace,
    job: String,
    made_ms: u64,
    assumed: String,
    horizon_ms: u64,
    /// Whether the scheduler reclaims between queues, as it plays out.
    reclaim: bool,
}

/// Take the cluster as it is at `now_ms` (on the loop: a pass over its
/// jobs and pods); the simulation itself runs elsewhere ([`Forward::run`]).
///
/// # Errors
/// What keeps it from being simulated (no node, no job), as text.
pub fn prepare(
    cluster: &Cluster,
    job: &str,
    now_ms: u64,
    config: &EstimateConfig,
    reclaim: bool,
) -> Result<Forward, String> {
    let assumed = Assumed {
        remaining_ms: config.assume_remaining_seconds * 1000,
        duration_ms: config.assume_duration_seconds * 1000,
        now_ms: Some(now_ms),
    };
    let resumed =
        from_cluster(cluster, "the scheduler's cluster", assumed).map_err(|e| e.to_string())?;
    Ok(Forward {
        trace: resumed.trace,
        job: job.to_string(),
        made_ms: now_ms,
        assumed: format!(
            "running jobs that report progress keep their pace, the others need {} s more; \
             waiting jobs run {} s",
            config.assume_remaining_seconds, config.assume_duration_seconds
        ),
        horizon_ms: config.horizon_seconds * 1000,
        reclaim,
    })
}

impl Forward {
    /// Play it forward under `policy` (a copy of the serving one: the
    /// simulation's calls must not move the serving instance's view).
    pub fn run(self, policy: &dyn Hooks) -> Estimate {
        let options = SimOptions {
            horizon_ms: self.horizon_ms,
            reclaim: self.reclaim,
            ..SimOptions::default()
        };
        let run = simulate(&self.trace, policy, options, None);
        let started = run
            .jobs
            .iter()
            .find(|j| j.name == self.job)
            .and_then(|j| j.started_ms);
        Estimate {
            made_ms: self.made_ms,
            start_ms: started.map(|t| self.made_ms + t),
            assumed: self.assumed,
            unavailable: None,
        }
    }
}

/// No estimate, and why.
pub fn unavailable(made_ms: u64, why: impl Into<String>) -> Estimate {
    Estimate {
        made_ms,
        start_ms: None,
        assumed: String::new(),
        unavailable: Some(why.into()),
    }
}
