//! DRAGON (NTHU, 2019) as a Dragon policy: gang admission at the requested
//! worker count or else at `min`, FIFO with skipping, locality-aware
//! placement, and load-aware scaling. `docs/dragon.md` describes each rule
//! and where it differs from the original.

mod locality;
mod scaling;
mod settings;

use dragon_policy_sdk::packing::total;
use dragon_policy_sdk::types::*;
use dragon_policy_sdk::{Policy, Refusal, export_policy, fair, policy, rules};

pub use dragon_policy_sdk::packing::{Packing, pack, tasks_at};
pub use settings::{PlusSettings, Settings};

/// The DRAGON policy.
#[derive(Debug)]
pub struct Dragon {
    /// The name it reports: `dragon-plus` runs the same rules.
    name: &'static str,
    settings: Settings,
}

impl Default for Dragon {
    fn default() -> Self {
        Dragon::with_settings(Settings::default())
    }
}

impl Dragon {
    /// A policy with the given settings (for native tests and benchmarks).
    pub fn with_settings(settings: Settings) -> Dragon {
        Dragon {
            name: "dragon",
            settings,
        }
    }

    /// `dragon-plus`: the same rules from [`Settings::plus`].
    pub fn plus() -> Dragon {
        Dragon {
            name: "dragon-plus",
            settings: Settings::plus(),
        }
    }
}

#[policy]
impl Policy for Dragon {
    type Settings = Settings;

    fn metadata(&self) -> PolicyInfo {
        PolicyInfo::named(self.name, env!("CARGO_PKG_VERSION"))
    }

    fn configure(&mut self, settings: Settings) -> Result<(), Refusal> {
        settings.validate()?;
        self.settings = settings;
        Ok(())
    }

    // Higher priority first, then FIFO by submission time: the queue is
    // never reordered by size, only skipped past (the framework tries every
    // unit in this order).
    fn queue_order(&self, _now_ms: u64, units: &[Queued], view: &View) -> Vec<u32> {
        let mut order: Vec<u32> = (0..units.len() as u32).collect();
        order.sort_by_key(|&i| {
            let u = &units[i as usize];
            self.settings
                .queue_key(u.priority, u.total.gpus, u.arrival_ms, u.id)
        });
        if self.settings.fairness {
            order = fair::order(units, order, view);
        }
        order
    }

    // Admission: the requested worker count first, then `min`. A size is
    // offered only if the locality packing finds room for every task, so a
    // gang that cannot fit is skipped with a reason instead of half-placed.
    fn pre_filter(&self, _now_ms: u64, unit: &Unit, view: &View) -> PreFilterResult {
        let nodes = view.capacity();
        if self.settings.fairness
            && let Some(why) = fair::hold_back(unit, view)
        {
            return PreFilterResult::Skip(why);
        }
        if !rules::is_new_gang(unit) {
            return PreFilterResult::Proceed(Vec::new());
        }
        let mut sizes = vec![unit.workers];
        if self.settings.admit_at_min && unit.min_workers < unit.workers {
            sizes.push(unit.min_workers);
        }
        let fitting: Vec<u32> = sizes
            .into_iter()
            .filter(|&w| pack(&tasks_at(unit, w), nodes).is_some())
            .collect();
        if fitting.is_empty() {
            let need = total(&tasks_at(unit, unit.min_workers.min(unit.workers)));
            // A gang of pods without the worker role has no size to speak
            // of: name its pods instead.
            let what = if unit.tasks.iter().all(|t| t.role != Role::Worker) {
                format!("gang of {} pods does not fit: it needs", unit.tasks.len())
            } else if unit.min_workers < unit.workers {
                format!(
                    "gang does not fit at {} or {} workers: at its smallest it needs",
                    unit.workers, unit.min_workers
                )
            } else {
                format!(
                    "gang does not fit at {} workers: at its smallest it needs",
                    unit.workers
                )
            };
            PreFilterResult::Skip(format!(
                "{what} {} GPUs, {} mCPU and {} MiB packed onto the free nodes",
                need.gpus, need.cpu_milli, need.memory_mib
            ))
        } else {
            PreFilterResult::Proceed(fitting)
        }
    }

    fn score(&self, pod: &Placement, nodes: &Candidates, view: &View) -> Vec<u32> {
        locality::score(pod, nodes, view, self.settings.room_to_grow)
    }

    // Every task of the chosen size is reserved when permit is asked; wait
    // only for members that do not exist yet, up to the gang timeout (a
    // wait already spent asks for nothing more rather than rejecting).
    fn permit(&self, _now_ms: u64, gang: &GangState) -> PermitResult {
        rules::permit_when_reserved(gang, self.settings.gang_timeout_ms())
    }

    fn scale(&self, input: &ScaleInput, view: &View) -> Vec<ScaleDecision> {
        let decided = scaling::decide(&self.settings, input, view);
        if !self.settings.fairness {
            return decided;
        }
        let reclaim = fair::reclaim(input, view);
        if reclaim.is_empty() {
            fair::limit_resizes(decided, input, view)
        } else {
            reclaim
        }
    }
}

// `dragon-plus` links this crate without its export (`default-features =
// false`): a component exports one policy.
#[cfg(feature = "component")]
export_policy!(Dragon);

#[cfg(test)]
mod tests {
    use super::*;

    fn queued(id: u64, arrival_ms: u64, priority: i32) -> Queued {
        Queued {
            id,
            arrival_ms,
            priority,
            pods: 1,
            total: Resources::ZERO,
            stats: JobStats::NONE,
        }
    }

    #[test]
    fn the_queue_is_by_priority_then_arrival_unless_priority_is_ignored() {
        let units = [
            queued(1, 0, 0),
            queued(2, 5, 100),
            queued(3, 3, 0),
            queued(4, 9, 100),
        ];
        let d = Dragon::default();
        assert_eq!(d.queue_order(0, &units, &View::default()), [1, 3, 0, 2]);
        let fifo = Dragon::with_settings(Settings {
            ignore_priority: true,
            ..Settings::default()
        });
        assert_eq!(fifo.queue_order(0, &units, &View::default()), [0, 2, 1, 3]);
    }

    #[test]
    fn smallest_first_orders_by_gpus_within_a_priority() {
        let gpus = |id, arrival_ms, priority, gpus| Queued {
            total: Resources {
                gpus,
                ..Resources::ZERO
            },
            ..queued(id, arrival_ms, priority)
        };
        let units = [
            gpus(1, 0, 0, 8),
            gpus(2, 100, 0, 2),
            gpus(3, 50, 0, 2),
            gpus(4, 200, 5, 16),
        ];
        let d = Dragon::with_settings(Settings {
            smallest_first: true,
            ..Settings::default()
        });
        assert_eq!(d.queue_order(0, &units, &View::default()), [3, 2, 1, 0]);
        assert_eq!(
            Dragon::default().queue_order(0, &units, &View::default()),
            [3, 0, 2, 1]
        );
    }

    fn skipped(unit: &Unit) -> String {
        let full = dragon_policy_sdk::testing::view(&[(1_000, 1_024, 0)]);
        match Dragon::default().pre_filter(0, unit, &full) {
            PreFilterResult::Skip(reason) => reason,
            other => panic!("not skipped: {other:?}"),
        }
    }

    #[test]
    fn a_gang_that_does_not_fit_is_named_by_workers_or_by_pods() {
        use dragon_policy_sdk::testing::{gang_unit, gpu_worker, ps};
        let elastic = gang_unit(1, 4, 2, 4, gpu_worker(), ps());
        assert!(
            skipped(&elastic).starts_with(
                "gang does not fit at 4 or 2 workers: at its smallest it needs 2 GPUs"
            ),
            "{}",
            skipped(&elastic)
        );
        let mut pods = gang_unit(0, 3, 3, 3, gpu_worker(), ps());
        pods.tasks.iter_mut().for_each(|t| t.role = Role::Other);
        pods.workers = 0;
        pods.min_workers = 0;
        pods.max_workers = 0;
        assert!(
            skipped(&pods).starts_with("gang of 3 pods does not fit: it needs 3 GPUs"),
            "{}",
            skipped(&pods)
        );
    }
}
