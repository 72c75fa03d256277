//! Load-aware scaling: shrink running jobs when the head of the queue
//! starves, grow them when the cluster has been idle.

use dragon_policy_sdk::elastic::{self, job_by_job, least_loss_order_by};
use dragon_policy_sdk::packing::{
    admit_at_min, pack, reserve, room_for_worker, shrink_until_fits, tasks_at,
};
use dragon_policy_sdk::types::*;

use crate::settings::Settings;

/// The scale step: a starvation shrink takes precedence over growth.
pub fn decide(settings: &Settings, input: &ScaleInput, view: &View) -> Vec<ScaleDecision> {
    if settings.scale_down {
        let shrunk = match settings.shrink_for_every_starving {
            true => shrink_for_every_starving(settings, input, view.capacity()),
            false => shrink_for_starving_head(settings, input, view.capacity()),
        };
        if let Some(decisions) = shrunk {
            return decisions;
        }
    }
    if settings.scale_up {
        return grow_when_idle(settings, input, view);
    }
    Vec::new()
}

/// A waiting job's place in line, smallest first when so set: the
/// settings' queue key over the GPUs its tasks ask for.
fn waiting_key(settings: &Settings, w: &WaitingJob) -> (std::cmp::Reverse<i32>, u32, u64, u64) {
    let gpus = w.unit.tasks.iter().map(|t| t.request.gpus).sum();
    settings.queue_key(w.unit.priority, gpus, w.arrival_ms, w.id)
}

/// Shrink running jobs (in running order, never below `min`, never the PS or
/// worker 0; a StatefulSet-like workload removes the highest-index worker)
/// until the starving head of the queue fits at its `min`. If even shrinking
/// every job to its `min` would not make room, shrink nothing: restarts that
/// help nobody are pure loss.
fn shrink_for_starving_head(
    settings: &Settings,
    input: &ScaleInput,
    nodes: &Capacity,
) -> Option<Vec<ScaleDecision>> {
    let head = if settings.smallest_first {
        input
            .waiting
            .iter()
            .min_by_key(|w| waiting_key(settings, w))?
    } else {
        input.waiting.first()?
    };
    let waited = input.now_ms.saturating_sub(head.arrival_ms);
    if waited < settings.starvation_ms() {
        return None;
    }
    let need = tasks_at(&head.unit, head.unit.min_workers);
    if pack(&need, nodes).is_some() {
        // It already fits at min; the next scheduling round admits it.
        return None;
    }
    let order = victims(settings, &input.running);
    let (target, _) = shrink_until_fits(&need, nodes, &input.running, order)?;
    let decisions = input
        .running
        .iter()
        .zip(target)
        .filter(|(job, workers)| *workers != job.workers)
        .map(|(job, workers)| ScaleDecision {
            id: job.id,
            workers,
            reason: format!(
                "starvation: job {} waited {} s (threshold {} s); {} -> {} workers to admit it at its min of {}",
                head.id,
                waited / 1000,
                settings.starvation_threshold_s,
                job.workers,
                workers,
                head.unit.min_workers
            ),
        })
        .collect();
    Some(decisions)
}

/// [`shrink_for_starving_head`] for every waiting job that has starved,
/// in queue order: each is given room at its `min` (by shrinking where
/// needed, the targets so far counted), and one that shrinking cannot fit
/// is skipped. `None` when no job shrinks.
fn shrink_for_every_starving(
    settings: &Settings,
    input: &ScaleInput,
    nodes: &Capacity,
) -> Option<Vec<ScaleDecision>> {
    let mut order: Vec<&WaitingJob> = input.waiting.iter().collect();
    if settings.smallest_first {
        order.sort_by_key(|w| waiting_key(settings, w));
    }
    let mut jobs = input.running.clone();
    let mut free = nodes.clone();
    let starved = order
        .into_iter()
        .filter(|w| input.now_ms.saturating_sub(w.arrival_ms) >= settings.starvation_ms());
    let admission = admit_at_min(starved, &mut jobs, &mut free, |jobs| {
        victims(settings, jobs)
    });
    let ids = admission
        .shrunk_for
        .iter()
        .map(u64::to_string)
        .collect::<Vec<_>>()
        .join(", ");
    let decisions: Vec<ScaleDecision> = input
        .running
        .iter()
        .zip(&jobs)
        .filter(|(was, now)| now.workers != was.workers)
        .map(|(was, now)| ScaleDecision {
            id: was.id,
            workers: now.workers,
            reason: format!(
                "starvation: {} -> {} workers to admit waiting job(s) {ids} at their min (threshold {} s)",
                was.workers, now.workers, settings.starvation_threshold_s
            ),
        })
        .collect();
    (!decisions.is_empty()).then_some(decisions)
}

/// The order workers are taken in, one entry per worker (an index into
/// `running`). DRAGON's: each job in running order down to its `min`
/// before the next. With `shrink_least_loss`: always from the job that loses
/// the least throughput by giving up one worker (`1 − ((w−1)/w)^α`, so the
/// widest jobs first), the one with the most attained GPU-time among equals
/// (the likeliest to run longest, as least-attained-service reasons).
fn victims(settings: &Settings, running: &[RunningJob]) -> Vec<usize> {
    if settings.shrink_most_served {
        let mut jobs: Vec<usize> = (0..running.len()).collect();
        jobs.sort_by_key(|&i| std::cmp::Reverse(running[i].stats.attained_gpu_ms));
        job_by_job(running, jobs)
    } else if settings.shrink_least_loss {
        least_loss_order_by(settings.scaling_exponent, running, settings.favour_short)
    } else {
        job_by_job(running, 0..running.len())
    }
}

/// Grow running jobs up to `max`, while free resources allow, once nothing
/// was admitted or shrunk for the idle threshold: by one worker each in
/// running order (the original), or with `grow_to_fill` by as many as the
/// room left allows, handed out one worker per job per turn, so that each
/// job pays one restart for what one-at-a-time growth spreads over several
/// passes. With `grow_by_gain` the room goes worker by worker to the job
/// whose throughput gains the most from it (see [`elastic::gain`]). A new worker's
/// room is looked for on the job's PS and worker nodes first (growth keeps
/// the job together), then anywhere.
fn grow_when_idle(settings: &Settings, input: &ScaleInput, view: &View) -> Vec<ScaleDecision> {
    let nodes = view.capacity();
    if !settings.grow_while_waiting && !input.waiting.is_empty() {
        return Vec::new();
    }
    let last_change = input.last_admit_ms.max(input.last_scale_down_ms);
    let idle = input.now_ms.saturating_sub(last_change);
    if idle < settings.idle_ms() {
        return Vec::new();
    }
    let mut free = nodes.clone();
    // Room the waiting jobs need at their min stays theirs.
    for w in &input.waiting {
        reserve(&tasks_at(&w.unit, w.unit.min_workers), &mut free);
    }
    if arriving(input) && guessing(input) {
        keep_headroom(settings.headroom_nodes, &mut free);
    }
    let target = if settings.grow_by_gain {
        grow_by_gain(settings, input, view, &mut free)
    } else {
        grow_in_turns(settings, input, &mut free)
    };
    input
        .running
        .iter()
        .zip(target)
        .filter(|(job, workers)| *workers > job.workers)
        .map(|(job, workers)| ScaleDecision {
            id: job.id,
            workers,
            reason: format!(
                "idle: nothing admitted or shrunk for {} s (threshold {} s); {} -> {} workers",
                idle / 1000,
                settings.idle_threshold_s,
                job.workers,
                workers
            ),
        })
        .collect()
}

/// How recently a job must have arrived for the headroom to be kept.
const ARRIVALS_WINDOW_MS: u64 = 3_600_000;

/// Whether jobs still arrive: one of those running or waiting came within
/// the last hour. Once arrivals stop, headroom kept for them only idles.
fn arriving(input: &ScaleInput) -> bool {
    let since = input.now_ms.saturating_sub(ARRIVALS_WINDOW_MS);
    input.waiting.iter().any(|w| w.arrival_ms >= since)
        || input.running.iter().any(|r| r.arrival_ms >= since)
}

/// Whether some job that could grow reports no speed-up, so what a worker
/// buys it is a guess (the power law): only then is headroom worth the
/// GPUs it idles. Where every such job reports its figures, growth buys
/// what they say and an idle GPU is a measured loss (on Pollux's
/// workloads, where every job reports, two nodes of headroom cost 19 % of
/// the average completion time; on the generated mixes, where none does,
/// they save up to 3 % at high load).
fn guessing(input: &ScaleInput) -> bool {
    input
        .running
        .iter()
        .any(|j| j.workers < j.max_workers && j.speedup.is_empty())
}

/// Leave the `n` emptiest nodes out of growth (by free GPUs, the lowest
/// index among equals), so that a job arriving next starts at once instead
/// of waiting for a shrink.
fn keep_headroom(n: u32, free: &mut Capacity) {
    let mut order: Vec<usize> = (0..free.len()).collect();
    order.sort_by_key(|&i| (std::cmp::Reverse(free.free_gpus[i]), i));
    for &i in order.iter().take(n as usize) {
        free.set_free(i, Resources::ZERO);
    }
}

fn grow_in_turns(settings: &Settings, input: &ScaleInput, free: &mut Capacity) -> Vec<u32> {
    let mut target: Vec<u32> = input.running.iter().map(|j| j.workers).collect();
    loop {
        let mut grew = false;
        for (job, workers) in input.running.iter().zip(&mut target) {
            if *workers >= job.max_workers {
                continue;
            }
            if let Some(n) = room_for_worker(job, free) {
                let r = free.free(n).minus(&job.worker_request);
                free.set_free(n, r);
                *workers += 1;
                grew = true;
            }
        }
        if !grew || !settings.grow_to_fill {
            return target;
        }
    }
}

/// Worker by worker, to the job whose throughput gains the most per GPU from
/// one more worker (a job resized within `resize_interval_s` waits); a job
/// grows only if the time its growth saves on its remaining work (estimated
/// from its progress and running time) exceeds `restart_margin` times
/// `restart_cost_s`, since each resize restarts it.
fn grow_by_gain(
    settings: &Settings,
    input: &ScaleInput,
    view: &View,
    free: &mut Capacity,
) -> Vec<u32> {
    let levels: Vec<(usize, f64)> = settings
        .level_penalties
        .iter()
        .filter_map(|(key, &p)| Some((view.level(key)?, p)))
        .collect();
    let model = elastic::GrowthModel {
        alpha: settings.scaling_exponent,
        cross_node_penalty: settings.cross_node_penalty,
        level_penalties: &levels,
        view: Some(view),
        // Past a penalty no single worker repays only once jobs stop
        // arriving and none waits: the room would otherwise stay idle,
        // where arrivals would soon need it (and shrink others for it).
        leap: input.waiting.is_empty() && !arriving(input),
        favour_short: settings.favour_short,
    };
    let restarts = elastic::Restarts {
        cost_ms: settings.restart_cost_s * 1000.0,
        margin: settings.restart_margin,
        interval_ms: settings.resize_interval_ms(),
    };
    let current = input.running.iter().map(|j| j.workers).collect();
    elastic::grow_repaying(
        model,
        restarts,
        input.now_ms,
        &input.running,
        current,
        free,
        |_| true,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use dragon_policy_sdk::testing::*;

    fn running(id: u64, workers: u32, min: u32, max: u32, worker_nodes: Vec<u32>) -> RunningJob {
        RunningJob {
            worker_nodes,
            ..running_job(id, workers, min, max, 0)
        }
    }

    fn input(
        now_ms: u64,
        nodes: Capacity,
        running: Vec<RunningJob>,
        waiting: Vec<WaitingJob>,
    ) -> (ScaleInput, Capacity) {
        let input = ScaleInput {
            now_ms,
            running,
            waiting,
            last_admit_ms: 0,
            last_scale_down_ms: 0,
        };
        (input, nodes)
    }

    fn step(settings: &Settings, (input, nodes): &(ScaleInput, Capacity)) -> Vec<ScaleDecision> {
        decide(settings, input, &view_of(nodes))
    }

    fn waiting(id: u64, workers: u32, min: u32) -> WaitingJob {
        waiting_job(id, 0, workers, min)
    }

    /// Two 4-GPU nodes, fully used by one 8-worker job.
    fn full_cluster() -> (Capacity, RunningJob) {
        let mut nodes = capacity(&[(32_000, 128_000, 4), (32_000, 128_000, 4)]);
        nodes.free_gpus = vec![0, 0];
        (nodes, running(7, 8, 2, 8, vec![0, 0, 0, 0, 1, 1, 1, 1]))
    }

    #[test]
    fn a_starving_head_shrinks_a_running_job_just_enough_to_fit_at_its_min() {
        let (nodes, job) = full_cluster();
        let s = Settings::default();
        let d = step(
            &s,
            &input(121_000, nodes, vec![job], vec![waiting(9, 4, 2)]),
        );
        assert_eq!(d.len(), 1);
        assert_eq!((d[0].id, d[0].workers), (7, 6), "{d:?}");
        assert!(d[0].reason.starts_with("starvation"), "{}", d[0].reason);
    }

    #[test]
    fn headroom_is_kept_while_jobs_arrive_and_released_an_hour_after_the_last() {
        // Three 8-GPU nodes; job 1 (4 workers on node 0, up to 16)
        // arrived at 0. Nodes 1 and 2 are the emptiest: the headroom.
        let mut nodes = capacity(&[(64_000, 512_000, 8); 3]);
        nodes.free_gpus = vec![4, 8, 8];
        let jobs = vec![running(1, 4, 1, 16, vec![0; 4])];
        let grown = |now_ms| {
            let d = step(
                &Settings::plus(),
                &input(now_ms, nodes.clone(), jobs.clone(), vec![]),
            );
            d.first().map_or(4, |d| d.workers)
        };
        assert_eq!(grown(60_000), 8, "node 0 only, while jobs arrive");
        assert_eq!(
            grown(ARRIVALS_WINDOW_MS + 60_000),
            16,
            "then onto the idle nodes"
        );
    }

    #[test]
    fn no_headroom_is_kept_once_every_job_that_could_grow_reports_its_speedup() {
        // As above, while jobs arrive; but the job reports that it scales
        // linearly to 16: the idle nodes are a measured loss.
        let mut nodes = capacity(&[(64_000, 512_000, 8); 3]);
        nodes.free_gpus = vec![4, 8, 8];
        let mut job = running(1, 4, 1, 16, vec![0; 4]);
        job.speedup = (1..=16).map(|w| w * 1000).collect();
        let d = step(&Settings::plus(), &input(60_000, nodes, vec![job], vec![]));
        assert_eq!(d.first().map(|d| d.workers), Some(16), "{d:?}");
    }

    #[test]
    fn growth_goes_first_to_the_job_with_the_least_work_left() {
        // One 8-GPU node, 2 GPUs idle; two 3-worker jobs alike but for
        // their progress: one a tenth of its way, one nine tenths.
        let mut nodes = capacity(&[(64_000, 512_000, 8)]);
        nodes.free_gpus = vec![2];
        let mut early = running(1, 3, 1, 5, vec![0; 3]);
        let mut late = running(2, 3, 1, 5, vec![0; 3]);
        for (j, p) in [(&mut early, 100), (&mut late, 900)] {
            j.stats.progress_permille = Some(p);
            j.stats.running_ms = 3_600_000;
            j.arrival_ms = 0;
        }
        let settings = Settings {
            headroom_nodes: 0,
            ..Settings::plus()
        };
        let at = ARRIVALS_WINDOW_MS + 60_000;
        let grew = |s: &Settings| {
            let d = step(
                s,
                &input(at, nodes.clone(), vec![early.clone(), late.clone()], vec![]),
            );
            d.iter().map(|d| (d.id, d.workers)).collect::<Vec<_>>()
        };
        assert_eq!(grew(&settings), [(2, 5)], "the late job takes both");
        let even = Settings {
            favour_short: false,
            ..settings
        };
        assert_eq!(grew(&even), [(1, 4), (2, 4)], "without, one each");
    }

    #[test]
    fn every_starving_job_that_shrinking_can_fit_is_given_room_in_queue_order() {
        // One 8-worker job (min 2) fills two 4-GPU nodes. Waiting: a job of
        // 12 (min 10) no shrink can fit, then two of 2 (min 1).
        let (nodes, job) = full_cluster();
        let queue = vec![waiting(8, 12, 10), waiting(9, 2, 1), waiting(10, 2, 1)];
        let head_only = Settings::default();
        let i = input(121_000, nodes, vec![job], queue);
        // The head alone cannot be helped: nothing shrinks, both small
        // jobs wait behind it.
        assert!(step(&head_only, &i).is_empty());
        let every = Settings {
            shrink_for_every_starving: true,
            ..Settings::default()
        };
        let d = step(&every, &i);
        assert_eq!(
            d.iter().map(|d| (d.id, d.workers)).collect::<Vec<_>>(),
            [(7, 6)],
            "one GPU for each small job: {d:?}"
        );
        assert!(
            d[0].reason.contains("waiting job(s) 9, 10"),
            "{}",
            d[0].reason
        );
        // Not before they starve.
        let early = Settings {
            starvation_threshold_s: 300.0,
            ..every
        };
        assert!(step(&early, &i).is_empty());
    }

    /// Two running 4-worker jobs on two 4-GPU nodes, job 2 the longer
    /// served, and two waiting jobs: 8 workers (min 4) first, then 2 (min 1).
    fn two_served_jobs_and_two_waiting(now_ms: u64) -> (ScaleInput, Capacity) {
        let mut nodes = capacity(&[(32_000, 128_000, 4), (32_000, 128_000, 4)]);
        nodes.free_gpus = vec![0, 0];
        let mut a = running(1, 4, 2, 8, vec![0; 4]);
        a.stats.attained_gpu_ms = 1_000;
        let mut b = running(2, 4, 2, 8, vec![1; 4]);
        b.stats.attained_gpu_ms = 9_000;
        let big = waiting_job(9, 0, 8, 4);
        let small = waiting_job(10, 1_000, 2, 1);
        input(now_ms, nodes, vec![a, b], vec![big, small])
    }

    #[test]
    fn smallest_first_shrinks_for_the_smallest_waiting_job_and_most_served_first() {
        let s = Settings {
            smallest_first: true,
            shrink_most_served: true,
            ..Settings::plus()
        };
        let d = step(&s, &two_served_jobs_and_two_waiting(600_000));
        let d: Vec<(u64, u32)> = d.iter().map(|d| (d.id, d.workers)).collect();
        assert_eq!(d, [(2, 3)], "one worker of the most served job for job 10");
        // In arrival order the 8-worker job is the head: both jobs shrink
        // to their min, and not by service.
        let d = step(&Settings::plus(), &two_served_jobs_and_two_waiting(600_000));
        let d: Vec<(u64, u32)> = d.iter().map(|d| (d.id, d.workers)).collect();
        assert_eq!(d, [(1, 2), (2, 2)]);
    }

    #[test]
    fn no_shrink_before_the_starvation_threshold() {
        let (nodes, job) = full_cluster();
        let d = step(
            &Settings::default(),
            &input(119_000, nodes, vec![job], vec![waiting(9, 4, 2)]),
        );
        assert!(d.is_empty(), "{d:?}");
    }

    #[test]
    fn shrinking_never_goes_below_min_nor_removes_worker_zero() {
        let (nodes, mut job) = full_cluster();
        job.min_workers = 0; // even a zero min keeps worker 0
        // The waiting job needs 8 GPUs at min: shrinking to one worker frees 7.
        let d = step(
            &Settings::default(),
            &input(
                200_000,
                nodes.clone(),
                vec![job.clone()],
                vec![waiting(9, 8, 8)],
            ),
        );
        assert!(
            d.is_empty(),
            "a shrink that cannot make room must not happen: {d:?}"
        );
        job.min_workers = 6;
        let d = step(
            &Settings::default(),
            &input(200_000, nodes, vec![job], vec![waiting(9, 4, 3)]),
        );
        assert!(d.is_empty(), "min 6 leaves 2 GPUs, the head needs 3: {d:?}");
    }

    #[test]
    fn idle_cluster_grows_each_job_by_one_worker_per_pass_up_to_max() {
        let nodes = capacity(&[(32_000, 128_000, 8)]);
        let jobs = vec![
            running(1, 2, 1, 3, vec![0, 0]),
            running(2, 4, 1, 4, vec![0; 4]),
            running(3, 1, 1, 8, vec![0]),
        ];
        let mut i = input(61_000, nodes, jobs, vec![]);
        i.1.free_gpus = vec![1];
        let d = step(&Settings::default(), &i);
        // Only one GPU is free: the first job in running order gets it; job 2 is at max.
        assert_eq!(
            d.iter().map(|d| (d.id, d.workers)).collect::<Vec<_>>(),
            vec![(1, 3)]
        );
    }

    #[test]
    fn growing_to_fill_hands_out_the_free_room_one_worker_per_job_per_turn_in_one_step() {
        let nodes = capacity(&[(32_000, 128_000, 8)]);
        let jobs = vec![
            running(1, 2, 1, 3, vec![0, 0]),
            running(2, 1, 1, 8, vec![0]),
            running(3, 1, 1, 8, vec![0]),
        ];
        let mut i = input(61_000, nodes, jobs, vec![]);
        i.1.free_gpus = vec![6];
        let s = Settings {
            grow_to_fill: true,
            ..Settings::default()
        };
        let d = step(&s, &i);
        // Turns: +1 each (3 GPUs), then job 1 is at max: +1 to jobs 2 and 3
        // (5), then +1 to job 2 (6).
        assert_eq!(
            d.iter().map(|d| (d.id, d.workers)).collect::<Vec<_>>(),
            vec![(1, 3), (2, 4), (3, 3)]
        );
        assert!(d[1].reason.ends_with("1 -> 4 workers"), "{}", d[1].reason);
        // One at a time, the original: +1 each.
        let d = step(&Settings::default(), &i);
        assert_eq!(
            d.iter().map(|d| (d.id, d.workers)).collect::<Vec<_>>(),
            vec![(1, 3), (2, 2), (3, 2)]
        );
    }

    #[test]
    fn no_growth_while_jobs_wait_or_before_the_idle_threshold() {
        let nodes = capacity(&[(32_000, 128_000, 8)]);
        let jobs = vec![running(1, 2, 1, 3, vec![0, 0])];
        assert!(
            step(
                &Settings::default(),
                &input(59_000, nodes.clone(), jobs.clone(), vec![])
            )
            .is_empty()
        );
        let mut s = Settings::default();
        s.scale_down = false;
        assert!(step(&s, &input(61_000, nodes, jobs, vec![waiting(9, 64, 64)])).is_empty());
    }

    #[test]
    fn plus_grows_by_gain_around_the_waiting_jobs_room_and_the_headroom() {
        // Three 8-GPU nodes: node 0 holds a 4-worker and a 1-worker job
        // (3 GPUs free), node 1 has 4 free, node 2 is empty. A job waits
        // for 2 GPUs at its min.
        let mut nodes = capacity(&[
            (64_000, 512_000, 8),
            (64_000, 512_000, 8),
            (64_000, 512_000, 8),
        ]);
        nodes.free_gpus = vec![3, 4, 8];
        let jobs = vec![
            running(1, 4, 2, 8, vec![0; 4]),
            running(2, 1, 1, 2, vec![0]),
        ];
        let i = input(1_000, nodes.clone(), jobs.clone(), vec![waiting(9, 4, 2)]);
        let d = step(&Settings::plus(), &i);
        // The waiting job's 2 GPUs (best fit: node 0) and node 2 (headroom,
        // the emptiest) are kept; job 2 gains most (1 -> 2) and takes node
        // 0's last GPU, job 1 nothing off its node, as node 1 would cost it
        // the cross-node penalty for 4 -> 5.
        assert_eq!(
            d.iter().map(|d| (d.id, d.workers)).collect::<Vec<_>>(),
            vec![(2, 2)],
            "{d:?}"
        );
        // Without headroom nor waiting job, job 1 fills its node (4 -> 6)
        // but does not leave it while jobs arrive: one worker off it would
        // not repay the penalty ((7/6)^0.86 × 0.8 < 1).
        let i = input(1_000, nodes.clone(), jobs.clone(), vec![]);
        let s = Settings {
            headroom_nodes: 0,
            ..Settings::plus()
        };
        let d = step(&s, &i);
        assert_eq!(
            d.iter().map(|d| (d.id, d.workers)).collect::<Vec<_>>(),
            vec![(1, 6), (2, 2)],
            "{d:?}"
        );
        // Once they stop, two workers at once repay it ((8/6)^0.86 × 0.8 > 1).
        let i = input(ARRIVALS_WINDOW_MS + 1_000, nodes, jobs, vec![]);
        let d = step(&s, &i);
        assert_eq!(
            d.iter().map(|d| (d.id, d.workers)).collect::<Vec<_>>(),
            vec![(1, 8), (2, 2)],
            "{d:?}"
        );
    }
}
