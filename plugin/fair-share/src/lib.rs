//! `fair-share`: teams (queues) share the cluster's GPUs by weighted
//! max-min, as Kueue's fair sharing, Volcano's proportion and YuniKorn's
//! queues do. Each queue is owed what its jobs ask for up to its
//! guarantee; what is left goes by weight to the queues that ask for more,
//! within their borrowing limits (see the SDK's `fair` module for the
//! rules).
//!
//! - Queue order: the queue furthest below its fair share first, priority
//!   then arrival within a queue.
//! - Admission: a gang whole (or at its elastic minimum), never taking its
//!   queue past its guarantee plus borrowing limit, nor past its fair share
//!   while another queue holds less than it is owed.
//! - Reclaim: when a queue owed room waits and the room is not free, the
//!   elastic jobs of queues above their share shrink (most over first) to
//!   give it back; shrunk jobs grow back to their requested size once no
//!   queue is owed room.
//! - Placement: a gang's pods together, best fit.

use dragon_policy_sdk::packing::{consolidating_score, room_for_worker};
use dragon_policy_sdk::types::*;
use dragon_policy_sdk::{Policy, Refusal, export_policy, fair, policy, rules};

/// What an operator may set.
#[derive(Debug, Clone, Copy, PartialEq, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Settings {
    /// Longest a gang waits in permit for members not yet created, s.
    pub gang_timeout_s: f64,
    /// Shrink the elastic jobs of queues above their share for a queue
    /// owed room.
    pub reclaim: bool,
}

impl Default for Settings {
    fn default() -> Settings {
        Settings {
            gang_timeout_s: 60.0,
            reclaim: true,
        }
    }
}

/// The fair-share policy.
#[derive(Debug, Default)]
pub struct FairShare {
    settings: Settings,
}

#[policy]
impl Policy for FairShare {
    type Settings = Settings;

    fn metadata(&self) -> PolicyInfo {
        PolicyInfo::named("fair-share", env!("CARGO_PKG_VERSION"))
    }

    fn configure(&mut self, settings: Settings) -> Result<(), Refusal> {
        rules::non_negative("fair-share", &[("gang_timeout_s", settings.gang_timeout_s)])?;
        self.settings = settings;
        Ok(())
    }

    fn queue_order(&self, _now_ms: u64, units: &[Queued], view: &View) -> Vec<u32> {
        fair::order(units, rules::priority_then_fifo(units), view)
    }

    fn pre_filter(&self, _now_ms: u64, unit: &Unit, view: &View) -> PreFilterResult {
        if let Some(why) = fair::hold_back(unit, view) {
            return PreFilterResult::Skip(why);
        }
        if !rules::is_new_gang(unit) || unit.min_workers >= unit.workers {
            return PreFilterResult::Proceed(Vec::new());
        }
        PreFilterResult::Proceed(vec![unit.workers, unit.min_workers])
    }

    fn score(&self, _pod: &Placement, nodes: &Candidates, view: &View) -> Vec<u32> {
        consolidating_score(nodes, view)
    }

    fn permit(&self, _now_ms: u64, gang: &GangState) -> PermitResult {
        rules::permit_when_reserved(gang, (self.settings.gang_timeout_s * 1000.0) as u64)
    }

    fn scale(&self, input: &ScaleInput, view: &View) -> Vec<ScaleDecision> {
        if self.settings.reclaim {
            let shrink = fair::reclaim(input, view);
            if !shrink.is_empty() {
                return shrink;
            }
        }
        fair::limit_resizes(grow_back(input, view), input, view)
    }
}

/// Jobs below their requested size (admitted at their minimum, or shrunk)
/// grow back a worker at a time, oldest first, where room is free.
fn grow_back(input: &ScaleInput, view: &View) -> Vec<ScaleDecision> {
    let mut free = view.capacity().clone();
    let mut out = Vec::new();
    for job in &input.running {
        let wants = job.stats.requested_workers.min(job.max_workers);
        let mut workers = job.workers;
        while workers < wants {
            let Some(n) = room_for_worker(job, &free) else {
                break;
            };
            free.set_free(n, free.free(n).minus(&job.worker_request));
            workers += 1;
        }
        if workers > job.workers {
            out.push(ScaleDecision {
                id: job.id,
                workers,
                reason: "back to its requested size".into(),
            });
        }
    }
    out
}

export_policy!(FairShare);

#[cfg(test)]
mod tests {
    use super::*;
    use dragon_policy_sdk::testing::{gang_unit, gpu_worker, ps};

    #[test]
    fn it_is_named_fair_share_and_refuses_unknown_or_negative_settings() {
        let mut p = FairShare::default();
        assert_eq!(p.metadata().name, "fair-share");
        assert!(p.configure_json(r#"{"gang_timeout_s": -1}"#).is_err());
        assert!(p.configure_json(r#"{"recalim": false}"#).is_err());
        p.configure_json(r#"{"reclaim": false}"#).unwrap();
        assert!(!p.settings.reclaim);
    }

    #[test]
    fn an_elastic_gang_is_tried_whole_then_at_its_minimum() {
        let p = FairShare::default();
        let unit = gang_unit(1, 4, 2, 4, gpu_worker(), ps());
        let view = dragon_policy_sdk::testing::view(&[(32_000, 131_072, 8)]);
        assert_eq!(
            p.pre_filter(0, &unit, &view),
            PreFilterResult::Proceed(vec![4, 2])
        );
    }
}
