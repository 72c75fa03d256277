//! `dragon-plus`: DRAGON's gangs, admission and locality with the scale step
//! of [`Settings::plus`] — idle room handed at once to the job whose
//! throughput gains most from it per hour of work it has left (only where
//! the time saved repays the restart, and off a job's node only where the
//! workers that leave it beat the cross-node penalty; by the speed-up the
//! job reports where it reports one), workers taken from the jobs that
//! lose least for the most work left as soon as a waiting job does not fit
//! (for every one that shrinking can fit, in queue order), growth that
//! leaves waiting jobs their room and, while jobs arrive and some job's
//! speed-up is a guess, the two emptiest nodes free, and new gangs placed
//! where they have room to grow. `docs/dragon.md` has the rules and
//! `docs/results.md` what they buy. Every setting of `dragon` applies.

use dragon_policy::{Dragon, PlusSettings, Settings};
use dragon_policy_sdk::types::*;
use dragon_policy_sdk::{Policy, Refusal, export_policy, policy};

/// DRAGON with the `plus` settings as its defaults.
#[derive(Debug)]
pub struct DragonPlus(Dragon);

impl Default for DragonPlus {
    fn default() -> Self {
        DragonPlus(Dragon::plus())
    }
}

impl DragonPlus {
    /// The defaults, for reference.
    pub fn defaults() -> Settings {
        Settings::plus()
    }
}

#[policy]
impl Policy for DragonPlus {
    type Settings = PlusSettings;

    fn metadata(&self) -> PolicyInfo {
        self.0.metadata()
    }
    fn configure(&mut self, settings: PlusSettings) -> Result<(), Refusal> {
        self.0.configure(settings.0)
    }
    fn queue_order(&self, now_ms: u64, units: &[Queued], view: &View) -> Vec<u32> {
        self.0.queue_order(now_ms, units, view)
    }
    fn pre_filter(&self, now_ms: u64, unit: &Unit, view: &View) -> PreFilterResult {
        self.0.pre_filter(now_ms, unit, view)
    }
    fn score(&self, pod: &Placement, nodes: &Candidates, view: &View) -> Vec<u32> {
        self.0.score(pod, nodes, view)
    }
    fn permit(&self, now_ms: u64, gang: &GangState) -> PermitResult {
        self.0.permit(now_ms, gang)
    }
    fn scale(&self, input: &ScaleInput, view: &View) -> Vec<ScaleDecision> {
        self.0.scale(input, view)
    }
}

export_policy!(DragonPlus);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn it_is_named_dragon_plus_and_starts_from_the_plus_settings() {
        let mut p = DragonPlus::default();
        assert_eq!(p.metadata().name, "dragon-plus");
        assert_eq!(p.metadata().hooks, Dragon::default().metadata().hooks);
        // Keys given replace the plus defaults; the rest stay.
        p.configure_json(r#"{"starvation_threshold_s": 90}"#)
            .unwrap();
        let e = p.configure_json(r#"{"scaling_exponent": 2}"#).unwrap_err();
        assert!(e.message().contains("scaling_exponent"), "{e}");
        assert!(DragonPlus::defaults().grow_by_gain);
    }
}
