//! DRAGON's settings. Defaults follow the final original code (see dragon.md).

use dragon_policy_sdk::rules::{self, SettingsError};
use serde::{Deserialize, Serialize};

/// Thresholds and switches, from the policy's JSON settings.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct Settings {
    /// Scale running jobs down when the head of the queue has waited this
    /// long (the original's final code: 2 minutes).
    pub starvation_threshold_s: f64,
    /// Scale running jobs up when nothing was admitted or scaled down for
    /// this long (the original's final code: 1 minute).
    pub idle_threshold_s: f64,
    /// Enable scale-down on starvation.
    pub scale_down: bool,
    /// Enable scale-up on idleness.
    pub scale_up: bool,
    /// Grow jobs even while jobs wait in the queue. Off by default: growing
    /// while others wait only sets up the next starvation shrink (and its
    /// restart cost); the original left this case unspecified.
    pub grow_while_waiting: bool,
    /// Grow each job by as many workers as the idle room allows in one
    /// step (one restart) instead of one worker per step (the original).
    pub grow_to_fill: bool,
    /// Admit a gang at `min` workers when it does not fit as requested.
    pub admit_at_min: bool,
    /// How long a gang waits in permit for members that do not exist yet.
    pub gang_timeout_s: f64,
    /// Order the queue by arrival alone (the original), not by priority
    /// first.
    pub ignore_priority: bool,
    /// Hand idle room out worker by worker to the job whose throughput gains
    /// most from it, and only where the time saved repays the restart,
    /// instead of in running order.
    pub grow_by_gain: bool,
    /// Shrink the jobs that lose the least throughput by giving up a worker
    /// (the widest first), instead of in running order.
    pub shrink_least_loss: bool,
    /// `α` of the throughput model `throughput ∝ workers^α` that gains and
    /// losses are weighed with, in (0, 1].
    pub scaling_exponent: f64,
    /// What one resize costs a running job (checkpoint and restart), s.
    pub restart_cost_s: f64,
    /// A growth is made only if it saves this many times its restart cost.
    pub restart_margin: f64,
    /// A job resized less than this long ago is not grown again, s.
    pub resize_interval_s: f64,
    /// Share of throughput a job is taken to lose once it spans nodes, in
    /// [0, 1): with `grow_by_gain`, a worker that would take a job off its
    /// only node must gain more than this.
    pub cross_node_penalty: f64,
    /// Nodes left out of growth, the emptiest: room for the next arrival,
    /// while jobs arrive and some job that could grow reports no speed-up.
    pub headroom_nodes: u32,
    /// Order the queue (within a priority) by the GPUs a unit asks for,
    /// fewest first, then by submission time; the scale step's starving
    /// head is the first in that order.
    pub smallest_first: bool,
    /// Shrink the jobs that have held the most GPU-time first, each down
    /// to its `min` before the next (least-attained-service's victims).
    pub shrink_most_served: bool,
    /// Share the cluster between queues (teams) as `fair-share` does: the
    /// queue furthest below its fair share first, no admission or growth
    /// past a queue's borrowing limit or past its fair share while another
    /// queue holds less than it is owed, and elastic jobs of queues above
    /// their share shrunk for a queue owed room. No effect without queues.
    pub fairness: bool,
    /// Per topology level (a node label key of the view's levels), the
    /// share of throughput a job is taken to lose once growth takes it out
    /// of the one domain of that level it is in, each in [0, 1): with
    /// `grow_by_gain`, such a worker must gain more (as `cross_node_penalty`
    /// does for a node). A key the cluster does not configure is ignored.
    pub level_penalties: std::collections::BTreeMap<String, f64>,
    /// Place a new gang's first worker, among the nodes that fit the whole
    /// gang, where it could also grow to `max` workers: packed onto the
    /// fullest node that fits it, an elastic job has no room left to grow
    /// without spanning nodes.
    pub room_to_grow: bool,
    /// Shrink for every waiting job that has starved, in queue order, not
    /// only for the head: each admitted at its `min` where shrinking can
    /// make room, the others skipped (so a wide job the cluster cannot fit
    /// at once does not hold the small ones behind it).
    pub shrink_for_every_starving: bool,
    /// With `grow_by_gain`, weigh each job's gain by the work it has left
    /// (from its progress): room goes first to the jobs that would finish
    /// soonest, as shortest-remaining-first does.
    pub favour_short: bool,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            starvation_threshold_s: 120.0,
            idle_threshold_s: 60.0,
            scale_down: true,
            scale_up: true,
            grow_while_waiting: false,
            grow_to_fill: false,
            admit_at_min: true,
            gang_timeout_s: 60.0,
            ignore_priority: false,
            grow_by_gain: false,
            shrink_least_loss: false,
            scaling_exponent: 0.86,
            restart_cost_s: 30.0,
            restart_margin: 2.0,
            resize_interval_s: 300.0,
            cross_node_penalty: 0.2,
            headroom_nodes: 0,
            smallest_first: false,
            shrink_most_served: false,
            fairness: false,
            level_penalties: std::collections::BTreeMap::new(),
            room_to_grow: false,
            shrink_for_every_starving: false,
            favour_short: false,
        }
    }
}

impl Settings {
    /// Values outside what each key allows are refused, named.
    pub fn validate(&self) -> Result<(), SettingsError> {
        rules::non_negative(
            "dragon",
            &[
                ("starvation_threshold_s", self.starvation_threshold_s),
                ("idle_threshold_s", self.idle_threshold_s),
                ("gang_timeout_s", self.gang_timeout_s),
                ("restart_cost_s", self.restart_cost_s),
                ("restart_margin", self.restart_margin),
                ("resize_interval_s", self.resize_interval_s),
            ],
        )?;
        let p = self.cross_node_penalty;
        if !(0.0..1.0).contains(&p) {
            return Err(SettingsError::must(
                "dragon",
                "cross_node_penalty",
                "lie in [0, 1)",
                p,
            ));
        }
        if let Some((key, &p)) = self
            .level_penalties
            .iter()
            .find(|(_, p)| !(0.0..1.0).contains(*p))
        {
            return Err(SettingsError::must(
                "dragon",
                "level_penalties",
                format!("give each level a penalty in [0, 1) ({key})"),
                p,
            ));
        }
        rules::scaling_exponent("dragon", self.scaling_exponent)
    }

    /// The settings of `dragon-plus`: DRAGON's rules with growth by marginal
    /// gain that repays its restart and leaves a job's node only where the
    /// workers that leave it beat the penalty, weighed by how soon each job
    /// would finish, shrinking where it costs least (the jobs with the most
    /// work left first) as soon as a waiting job does not fit (every one
    /// that shrinking can fit, in queue order), growth at once that leaves
    /// waiting jobs their room and the two emptiest nodes free while jobs
    /// arrive (and some job's speed-up is a guess), and new gangs placed
    /// where they have room to grow. A job that reports its speed-up is
    /// weighed by its figures, not the power law.
    pub fn plus() -> Settings {
        Settings {
            starvation_threshold_s: 0.0,
            idle_threshold_s: 0.0,
            grow_while_waiting: true,
            grow_by_gain: true,
            shrink_least_loss: true,
            headroom_nodes: 2,
            room_to_grow: true,
            shrink_for_every_starving: true,
            favour_short: true,
            ..Settings::default()
        }
    }

    /// Where a unit goes in the queue: priority (unless ignored), then
    /// with `smallest_first` its GPUs, then submission time and id.
    pub(crate) fn queue_key(
        &self,
        priority: i32,
        gpus: u32,
        arrival_ms: u64,
        id: u64,
    ) -> (std::cmp::Reverse<i32>, u32, u64, u64) {
        let priority = if self.ignore_priority { 0 } else { priority };
        let gpus = if self.smallest_first { gpus } else { 0 };
        (std::cmp::Reverse(priority), gpus, arrival_ms, id)
    }

    pub(crate) fn starvation_ms(&self) -> u64 {
        (self.starvation_threshold_s * 1000.0) as u64
    }

    pub(crate) fn idle_ms(&self) -> u64 {
        (self.idle_threshold_s * 1000.0) as u64
    }

    pub(crate) fn resize_interval_ms(&self) -> u64 {
        (self.resize_interval_s * 1000.0) as u64
    }

    pub(crate) fn gang_timeout_ms(&self) -> u64 {
        (self.gang_timeout_s * 1000.0) as u64
    }
}

/// `dragon-plus`'s settings: DRAGON's, where the keys given replace those
/// of [`Settings::plus`] (not of DRAGON's defaults).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(try_from = "serde_json::Map<String, serde_json::Value>")]
pub struct PlusSettings(pub Settings);

impl Default for PlusSettings {
    fn default() -> Self {
        PlusSettings(Settings::plus())
    }
}

impl TryFrom<serde_json::Map<String, serde_json::Value>> for PlusSettings {
    type Error = serde_json::Error;

    fn try_from(given: serde_json::Map<String, serde_json::Value>) -> Result<Self, Self::Error> {
        let mut base = match serde_json::to_value(Settings::plus())? {
            serde_json::Value::Object(fields) => fields,
            _ => unreachable!("settings serialize as an object"),
        };
        base.extend(given);
        Settings::deserialize(serde_json::Value::Object(base)).map(PlusSettings)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read<T: serde::de::DeserializeOwned>(json: &str) -> Result<T, serde_json::Error> {
        serde_json::from_str(json)
    }

    #[test]
    fn empty_settings_give_the_papers_defaults() {
        let s: Settings = read("{}").unwrap();
        assert_eq!(s.starvation_threshold_s, 120.0);
        assert_eq!(s.idle_threshold_s, 60.0);
        assert_eq!(s, Settings::default());
    }

    #[test]
    fn unknown_keys_and_negative_thresholds_are_refused() {
        let e = read::<Settings>(r#"{"starvation_treshold_s": 5}"#).unwrap_err();
        assert!(
            e.to_string()
                .contains("unknown field `starvation_treshold_s`"),
            "{e}"
        );
        let e = read::<Settings>(r#"{"idle_threshold_s": -1}"#)
            .unwrap()
            .validate()
            .unwrap_err();
        assert_eq!(e.key, "idle_threshold_s", "{e}");
    }

    #[test]
    fn plus_settings_replace_only_the_keys_given_over_the_plus_defaults() {
        let PlusSettings(s) = read(r#"{"starvation_threshold_s": 90}"#).unwrap();
        assert_eq!(s.starvation_threshold_s, 90.0);
        assert!(s.grow_by_gain, "the plus defaults stay");
        assert_eq!(PlusSettings::default().0, Settings::plus());
        let e = read::<PlusSettings>(r#"{"starvation_treshold_s": 5}"#).unwrap_err();
        assert!(
            e.to_string()
                .contains("unknown field `starvation_treshold_s`"),
            "{e}"
        );
    }
}
