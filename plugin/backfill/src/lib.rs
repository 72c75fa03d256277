//! FIFO with EASY backfilling (Lifka, "The ANL/IBM SP scheduling system",
//! JSSPP'95; Mu'alem & Feitelson, IEEE TPDS 2001), the scheduling Slurm's
//! `sched/backfill` does by default. Jobs start in order of priority, then
//! submission, each at its requested size, all of its pods or none. When
//! the first job in line does not fit, it gets a reservation: the earliest
//! time (the *shadow time*) at which the jobs running now will have freed
//! enough room for it. A later job may start before it — it *backfills* —
//! only if the first job still fits at the shadow time with the later job
//! holding its room.
//!
//! Simplified: Slurm knows each job's time limit; a Dragon policy knows
//! neither a limit nor a length of a job that has not run. A running job's
//! end is estimated from its reported progress and time run (refreshed at
//! every scale step); a job without progress is taken never to end. A
//! candidate is taken to run past the shadow time, so it backfills only
//! into room the first job does not need (EASY's "extra nodes" rule; the
//! rule for a candidate that ends before the shadow time needs its length).
//! A parameter server's room is not counted among what a running job frees
//! (the scale step is told its node, not its request).

use std::cell::RefCell;

use dragon_policy_sdk::elastic::remaining_ms;
use dragon_policy_sdk::packing::{consolidating_score, pack, partial, tasks_at};
use dragon_policy_sdk::types::*;
use dragon_policy_sdk::{Policy, export_policy, policy, rules};

/// Room a running job gives back, and when.
#[derive(Debug, Clone, PartialEq)]
struct Release {
    at_ms: u64,
    /// (node, resources) per worker.
    room: Vec<(usize, Resources)>,
}

/// The first job in line that did not fit, and when it will.
#[derive(Debug, Clone, PartialEq)]
struct Reservation {
    id: u64,
    tasks: Vec<Task>,
    /// Releases due by the shadow time (all known ones when it never fits).
    by_shadow: Vec<Release>,
    shadow_ms: Option<u64>,
}

#[derive(Debug, Default)]
struct State {
    /// Running jobs' releases, soonest first, from the last scale step.
    releases: Vec<Release>,
    /// The round the reservation belongs to (its time).
    round_ms: Option<u64>,
    reservation: Option<Reservation>,
}

/// The policy. Its state lives between calls of one instance; a fresh
/// instance (after a trap) knows no running job's end until the next scale
/// step, and until then lets every job that fits start, as when no known
/// end makes room for the first job in line.
#[derive(Debug, Default)]
pub struct Backfill {
    state: RefCell<State>,
}

/// `free` with each release's room given back, never past a node's
/// allocatable (a job that ended before its estimate is free already).
fn with_releases(free: &Capacity, releases: &[Release]) -> Capacity {
    let mut free = free.clone();
    for r in releases {
        for &(n, res) in &r.room {
            if n < free.len() {
                let (f, cap) = (free.free(n).plus(&res), free.allocatable(n));
                let f = Resources {
                    cpu_milli: f.cpu_milli.min(cap.cpu_milli),
                    memory_mib: f.memory_mib.min(cap.memory_mib),
                    gpus: f.gpus.min(cap.gpus),
                };
                free.set_free(n, f);
            }
        }
    }
    free
}

impl Backfill {
    /// Reserve for `unit`: the soonest time known releases make room for it.
    fn reserve(&self, now_ms: u64, unit: &Unit, tasks: Vec<Task>, free: &Capacity) -> Reservation {
        let state = self.state.borrow();
        let due: Vec<Release> = state
            .releases
            .iter()
            .filter(|r| r.at_ms > now_ms)
            .cloned()
            .collect();
        for k in 1..=due.len() {
            if pack(&tasks, &with_releases(free, &due[..k])).is_some() {
                return Reservation {
                    id: unit.id,
                    tasks,
                    shadow_ms: Some(due[k - 1].at_ms),
                    by_shadow: due[..k].to_vec(),
                };
            }
        }
        Reservation {
            id: unit.id,
            tasks,
            by_shadow: due,
            shadow_ms: None,
        }
    }
}

#[policy]
impl Policy for Backfill {
    fn metadata(&self) -> PolicyInfo {
        PolicyInfo::named("backfill", env!("CARGO_PKG_VERSION"))
    }

    // Priority, then FIFO; a new round forgets the last one's reservation.
    fn queue_order(&self, now_ms: u64, units: &[Queued], _view: &View) -> Vec<u32> {
        let mut state = self.state.borrow_mut();
        state.round_ms = Some(now_ms);
        state.reservation = None;
        rules::priority_then_fifo(units)
    }

    fn pre_filter(&self, now_ms: u64, unit: &Unit, view: &View) -> PreFilterResult {
        if !rules::is_new_gang(unit) {
            return PreFilterResult::Proceed(Vec::new());
        }
        if let Some(reason) = partial(unit) {
            return PreFilterResult::Skip(reason);
        }
        if self.state.borrow().round_ms != Some(now_ms) {
            let mut state = self.state.borrow_mut();
            state.round_ms = Some(now_ms);
            state.reservation = None;
        }
        let free = view.capacity();
        let tasks = tasks_at(unit, unit.workers);
        let fits = pack(&tasks, free);
        let reservation = self.state.borrow().reservation.clone();
        let Some(head) = reservation else {
            if fits.is_some() {
                return PreFilterResult::Proceed(vec![unit.workers]);
            }
            let r = self.reserve(now_ms, unit, tasks, free);
            let when = match r.shadow_ms {
                Some(t) => format!("in about {} s", t.saturating_sub(now_ms) / 1000),
                None => "once running jobs report how far they are".to_string(),
            };
            self.state.borrow_mut().reservation = Some(r);
            return PreFilterResult::Skip(format!(
                "first in line: waiting for room for its {} pods, expected {when}",
                unit.tasks.len()
            ));
        };
        let Some(packing) = fits else {
            return PreFilterResult::Skip(format!(
                "does not fit now; job {} is first in line",
                head.id
            ));
        };
        // Backfill only if the first job still fits at its shadow time with
        // this one holding its room (it is taken to run past it).
        let mut at_shadow = with_releases(free, &head.by_shadow);
        for (t, &n) in tasks.iter().zip(&packing.nodes) {
            let f = at_shadow.free(n as usize).minus(&t.request);
            at_shadow.set_free(n as usize, f);
        }
        if head.shadow_ms.is_none() || pack(&head.tasks, &at_shadow).is_some() {
            PreFilterResult::Proceed(vec![unit.workers])
        } else {
            PreFilterResult::Skip(format!(
                "backfilling it would delay job {}, first in line",
                head.id
            ))
        }
    }

    fn score(&self, _pod: &Placement, nodes: &Candidates, view: &View) -> Vec<u32> {
        consolidating_score(nodes, view)
    }

    // Members that do not exist yet are waited for 60 s, as Coscheduling does.
    fn permit(&self, _now_ms: u64, gang: &GangState) -> PermitResult {
        rules::permit_when_reserved(gang, 60_000)
    }

    // Never resizes: it only learns when running jobs will end.
    fn scale(&self, input: &ScaleInput, _view: &View) -> Vec<ScaleDecision> {
        let mut releases: Vec<Release> = input
            .running
            .iter()
            .filter_map(|j| {
                let left = remaining_ms(j)?;
                Some(Release {
                    at_ms: input.now_ms.saturating_add(left),
                    room: j
                        .worker_nodes
                        .iter()
                        .map(|&n| (n as usize, j.worker_request))
                        .collect(),
                })
            })
            .collect();
        releases.sort_by_key(|r| r.at_ms);
        self.state.borrow_mut().releases = releases;
        Vec::new()
    }
}

export_policy!(Backfill);

#[cfg(test)]
mod tests {
    use super::*;
    use dragon_policy_sdk::testing::*;

    /// Two 4-GPU nodes; job 1 (3 workers, node 0) ends in 1000 s, job 2
    /// (4 workers, node 1) in 100 s: 1 GPU free on node 0.
    fn cluster() -> (Backfill, View) {
        let b = Backfill::default();
        let mut one = running_job(1, 3, 3, 3, 0);
        one.stats.progress_permille = Some(500);
        one.stats.running_ms = 1_000_000;
        let mut two = running_job(2, 4, 4, 4, 1);
        two.stats.progress_permille = Some(900);
        two.stats.running_ms = 900_000;
        let input = ScaleInput {
            now_ms: 0,
            running: vec![one, two],
            waiting: Vec::new(),
            last_admit_ms: 0,
            last_scale_down_ms: 0,
        };
        let mut c = capacity(&[(32_000, 128_000, 4), (32_000, 128_000, 4)]);
        c.free_gpus = vec![1, 0];
        assert!(b.scale(&input, &view_of(&c)).is_empty());
        (b, view_of(&c))
    }

    fn job(id: u64, arrival_ms: u64, workers: u32) -> Unit {
        waiting_job(id, arrival_ms, workers, workers).unit
    }

    #[test]
    fn the_first_job_in_line_is_reserved_for_and_a_later_one_backfills_around_it() {
        let (b, v) = cluster();
        let order = b.queue_order(10, &[], &View::default());
        assert!(order.is_empty());
        // 4 workers: fits once job 2 ends (node 1, in ~100 s).
        match b.pre_filter(10, &job(7, 0, 4), &v) {
            PreFilterResult::Skip(r) => assert!(r.contains("first in line"), "{r}"),
            other => panic!("{other:?}"),
        }
        // A 1-worker job fits on node 0, which the first job does not need.
        assert_eq!(
            b.pre_filter(10, &job(8, 5, 1), &v),
            PreFilterResult::Proceed(vec![1])
        );
    }

    #[test]
    fn a_later_job_that_would_take_the_reserved_room_waits() {
        let (b, _) = cluster();
        // Job 2 has ended (node 1 free), before the scale step saw it. The
        // first job (7 GPUs) fits once job 1 ends too, in 1000 s.
        let mut c = capacity(&[(32_000, 128_000, 4), (32_000, 128_000, 4)]);
        c.free_gpus = vec![1, 4];
        let v = view_of(&c);
        b.queue_order(20, &[], &View::default());
        assert!(matches!(
            b.pre_filter(20, &job(7, 0, 7), &v),
            PreFilterResult::Skip(_)
        ));
        // A 2-worker job fits on node 1 now, but holding it then would leave
        // the first job 6 of its 7 GPUs at the shadow time.
        match b.pre_filter(20, &job(8, 5, 2), &v) {
            PreFilterResult::Skip(r) => assert!(r.contains("delay job 7"), "{r}"),
            other => panic!("{other:?}"),
        }
        // In FIFO order with nothing blocked, every job that fits starts.
        b.queue_order(30, &[], &View::default());
        assert_eq!(
            b.pre_filter(30, &job(8, 5, 2), &v),
            PreFilterResult::Proceed(vec![2])
        );
    }
}
