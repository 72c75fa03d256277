//! Weighing a resize of an elastic job: what one more worker gains, what
//! one fewer loses, and whether a resize repays its restart — by the
//! speed-up the job reports where it reports one (interface 0.4), else
//! under the power-law throughput model `throughput ∝ workers^α`
//! (sub-linear for `α < 1`).

use crate::types::RunningJob;

/// How a job's throughput grows with its workers: the speed-up it reports
/// (`speedup`, thousandths of its goodput with one worker, packed), else
/// the power law `workers^α`. Past the last figure reported, the power law
/// carries on from it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Curve<'a> {
    alpha: f64,
    reported: &'a [u32],
}

impl<'a> Curve<'a> {
    /// The power law alone.
    pub fn power(alpha: f64) -> Curve<'static> {
        Curve {
            alpha,
            reported: &[],
        }
    }

    /// `job`'s: what it reports, else the power law.
    pub fn of(alpha: f64, job: &'a RunningJob) -> Curve<'a> {
        Curve::with(alpha, &job.speedup)
    }

    /// The figures `reported` (interface 0.4's `speedup`), else the power
    /// law.
    pub fn with(alpha: f64, reported: &'a [u32]) -> Curve<'a> {
        Curve { alpha, reported }
    }

    /// Whether the job reports its speed-up: it already counts what
    /// crossing nodes costs it, so no assumed penalty should.
    pub fn is_reported(&self) -> bool {
        !self.reported.is_empty()
    }

    /// Throughput at `w` workers relative to one (reported figures only).
    fn reported_speed(&self, w: u32) -> f64 {
        let w = w.max(1);
        let n = self.reported.len() as u32;
        match self.reported.get(w as usize - 1) {
            Some(&m) => f64::from(m) / 1000.0,
            None => {
                let last = f64::from(self.reported[n as usize - 1]) / 1000.0;
                last * (f64::from(w) / f64::from(n)).powf(self.alpha)
            }
        }
    }

    /// Throughput at `to` workers relative to at `from`.
    pub fn ratio(&self, from: u32, to: u32) -> f64 {
        if self.is_reported() {
            return self.reported_speed(to) / self.reported_speed(from);
        }
        (f64::from(to.max(1)) / f64::from(from.max(1))).powf(self.alpha)
    }

    /// Relative throughput gained by one more worker at `w` workers.
    pub fn gain(&self, w: u32) -> f64 {
        let w = w.max(1);
        self.ratio(w, w + 1) - 1.0
    }

    /// Share of throughput lost by giving up one worker at `w` workers (1
    /// at one worker: the job would stop).
    pub fn loss(&self, w: u32) -> f64 {
        if w <= 1 {
            return 1.0;
        }
        1.0 - self.ratio(w, w - 1)
    }
}

/// Relative throughput gained by one more worker at `w` workers, by the
/// power law.
pub fn gain(alpha: f64, w: u32) -> f64 {
    Curve::power(alpha).gain(w)
}

/// Share of throughput lost by giving up one worker at `w` workers (1 at
/// one worker: the job would stop), by the power law.
pub fn loss(alpha: f64, w: u32) -> f64 {
    Curve::power(alpha).loss(w)
}

/// Time left of `job` at its current size, ms, from its progress and the
/// time it has run since it (last) started; `None` while it reports no
/// progress.
pub fn remaining_ms(job: &RunningJob) -> Option<u64> {
    let p = u64::from(job.stats.progress_permille?);
    if p == 0 {
        return None;
    }
    Some(
        job.stats
            .running_ms
            .saturating_mul(1000u64.saturating_sub(p))
            / p,
    )
}

/// Time a resize of `job` to `workers` saves on its remaining work, ms
/// (negative for a shrink), by its curve (see [`Curve::of`]); `None`
/// without an estimate of its time left.
pub fn time_saved_ms(alpha: f64, job: &RunningJob, workers: u32) -> Option<f64> {
    time_saved_keeping(alpha, job, workers, 1.0)
}

/// [`time_saved_ms`] for a resize after which the job keeps `kept` of its
/// throughput (a penalty for spanning more nodes or domains).
fn time_saved_keeping(alpha: f64, job: &RunningJob, workers: u32, kept: f64) -> Option<f64> {
    let left = remaining_ms(job)? as f64;
    let speedup = Curve::of(alpha, job).ratio(job.workers, workers) * kept;
    Some(left * (1.0 - 1.0 / speedup))
}

/// Whether growing `job` to `workers` saves more than `margin` times a
/// restart of `restart_ms`. A job without an estimate yet is taken to have
/// its work ahead of it.
pub fn repays_restart(
    alpha: f64,
    job: &RunningJob,
    workers: u32,
    restart_ms: f64,
    margin: f64,
) -> bool {
    time_saved_ms(alpha, job, workers).is_none_or(|saved| saved > restart_ms * margin)
}

/// The order to take workers from `running` in, one entry per worker: each
/// job of `jobs` (indices into `running`) down to its `min` (never below
/// one) before the next.
pub fn job_by_job(running: &[RunningJob], jobs: impl IntoIterator<Item = usize>) -> Vec<usize> {
    jobs.into_iter()
        .filter_map(|i| {
            let j = running.get(i)?;
            Some(std::iter::repeat_n(
                i,
                j.workers.saturating_sub(j.min_workers.max(1)) as usize,
            ))
        })
        .flatten()
        .collect()
}

/// The order to take workers from `running` in, one entry per worker (an
/// index into `running`, each job down to its `min`, never below one):
/// always from the job that loses the least throughput by giving one up
/// (by its curve, see [`Curve::of`]; under the power law the widest
/// first) — and among equals the one with the most attained
/// GPU-time (the likeliest to run longest, as least-attained-service
/// scheduling reasons).
pub fn least_loss_order(alpha: f64, running: &[RunningJob]) -> Vec<usize> {
    least_loss_order_by(alpha, running, false)
}

/// [`least_loss_order`], with `favour_short` each job's loss weighed by
/// how soon it would finish (see [`GrowthModel::favour_short`]): workers
/// come first from the jobs with the most work left.
pub fn least_loss_order_by(alpha: f64, running: &[RunningJob], favour_short: bool) -> Vec<usize> {
    let floor = |j: &RunningJob| j.min_workers.max(1);
    let weigh = |j: &RunningJob, loss: f64| match favour_short {
        true => loss / left_hours(j),
        false => loss,
    };
    let mut left: Vec<u32> = running.iter().map(|j| j.workers).collect();
    let mut order = Vec::new();
    loop {
        let next = running
            .iter()
            .enumerate()
            .filter(|(i, j)| left[*i] > floor(j))
            .min_by(|(a, ja), (b, jb)| {
                weigh(ja, Curve::of(alpha, ja).loss(left[*a]))
                    .total_cmp(&weigh(jb, Curve::of(alpha, jb).loss(left[*b])))
                    .then(jb.stats.attained_gpu_ms.cmp(&ja.stats.attained_gpu_ms))
                    .then(a.cmp(b))
            })
            .map(|(i, _)| i);
        let Some(i) = next else {
            return order;
        };
        left[i] -= 1;
        order.push(i);
    }
}

/// An hour, ms.
const HOUR_MS: f64 = 3_600_000.0;

/// The least time left [`GrowthModel::favour_short`] weighs a job by, h:
/// a job about to end is not made infinitely deserving.
const MIN_LEFT_H: f64 = 0.05;

/// Hours of work `job` has left at its size, as [`GrowthModel::favour_short`]
/// weighs it: at least [`MIN_LEFT_H`], and an hour while it reports no
/// progress.
fn left_hours(job: &RunningJob) -> f64 {
    remaining_ms(job)
        .map_or(1.0, |ms| ms as f64 / HOUR_MS)
        .max(MIN_LEFT_H)
}

/// How growth weighs a worker (each job by its curve, see [`Curve::of`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GrowthModel<'a> {
    /// `α` of `throughput ∝ workers^α`, for jobs that report no speed-up.
    pub alpha: f64,
    /// Share of throughput a job that reports no speed-up loses once it
    /// spans more than one node (0: placement does not matter).
    pub cross_node_penalty: f64,
    /// The same for wider domains: per topology level (its position in the
    /// view's levels), the share a job loses once growth takes it out of
    /// the one domain of that level it is in. Empty: none.
    pub level_penalties: &'a [(usize, f64)],
    /// Where nodes' domains are read (needed with `level_penalties`).
    pub view: Option<&'a crate::types::View>,
    /// Weigh the fewest workers that repay a penalty as one step when one
    /// worker cannot (see [`grow_by_gain`]); without it a job never grows
    /// past a penalty one worker cannot repay.
    pub leap: bool,
    /// Weigh each job's gain by how soon it would finish: a worker goes to
    /// the job whose gain per GPU per hour of work left is largest (the
    /// shortest-remaining rule, which lowers the average completion time);
    /// a job that reports no progress yet counts as an hour from its end.
    pub favour_short: bool,
}

impl GrowthModel<'_> {
    /// What a job on `nodes` keeps of its throughput if a worker goes to
    /// node `to`: the product over levels of (1 − penalty) where the job
    /// is in one domain of the level and `to` is outside it (a job whose
    /// `curve` is reported pays no assumed penalty for leaving its node:
    /// its figures count that).
    fn kept(&self, curve: Curve, nodes: &[u32], to: u32) -> f64 {
        let mut kept = 1.0;
        if nodes.len() == 1 && nodes[0] != to && !curve.is_reported() {
            kept *= 1.0 - self.cross_node_penalty;
        }
        let (Some(view), Some(&first)) = (self.view, nodes.first()) else {
            return kept;
        };
        for &(level, penalty) in self.level_penalties {
            let d = view.domain(first, level);
            let inside = d != 0 && nodes.iter().all(|&n| view.domain(n, level) == d);
            if inside && view.domain(to, level) != d {
                kept *= 1.0 - penalty;
            }
        }
        kept
    }
}

/// Hand room in `free` out worker by worker to the job of `running` (with
/// `target` workers now) whose throughput gains the most per GPU from one
/// more, while `may_grow` allows the job and room is found next to it (see
/// [`crate::packing::room_for_worker`]). A worker that would take a job
/// off its only node (or domain) counts the penalty against its gain; when
/// one worker cannot repay it, with `model.leap` the fewest workers that
/// can are weighed as one step (their gain per GPU), so a job that fills its
/// node still grows past it once the room would make it faster. A growth
/// that would slow the job is never made. Returns the new targets.
pub fn grow_by_gain(
    model: GrowthModel,
    running: &[RunningJob],
    target: Vec<u32>,
    free: &mut crate::types::Capacity,
    may_grow: impl Fn(&RunningJob) -> bool,
) -> Vec<u32> {
    grow_keeping(model, running, target, free, may_grow).0
}

/// [`grow_by_gain`], with what each job keeps of its throughput after the
/// penalties its growth pays (1: none).
fn grow_keeping(
    model: GrowthModel,
    running: &[RunningJob],
    mut target: Vec<u32>,
    free: &mut crate::types::Capacity,
    may_grow: impl Fn(&RunningJob) -> bool,
) -> (Vec<u32>, Vec<f64>) {
    let mut keeps = vec![1.0; running.len()];
    // Nodes each job is on, growth included.
    let mut nodes: Vec<Vec<u32>> = running
        .iter()
        .map(|j| {
            let mut n: Vec<u32> = j.ps_nodes.iter().chain(&j.worker_nodes).copied().collect();
            n.sort_unstable();
            n.dedup();
            n
        })
        .collect();
    let mut closed: Vec<bool> = running.iter().map(|j| !may_grow(j)).collect();
    loop {
        // The job, the nodes of its new workers, their gain per GPU.
        let mut best: Option<(usize, Vec<usize>, f64)> = None;
        for (i, j) in running.iter().enumerate() {
            if closed[i] || target[i] >= j.max_workers {
                continue;
            }
            let Some(n) = crate::packing::room_for_worker(j, free) else {
                closed[i] = true;
                continue;
            };
            let curve = Curve::of(model.alpha, j);
            let kept = model.kept(curve, &nodes[i], n as u32);
            let g = (1.0 + curve.gain(target[i])) * kept - 1.0;
            let step = if g > 0.0 {
                Some((vec![n], g))
            } else if kept < 1.0 && model.leap {
                leap(curve, kept, j, target[i], free)
            } else {
                None
            };
            let Some((at, g)) = step else {
                closed[i] = true;
                continue;
            };
            let mut per_gpu = g / (at.len() as f64 * f64::from(j.worker_request.gpus.max(1)));
            if model.favour_short {
                per_gpu /= left_hours(j);
            }
            if best.as_ref().is_none_or(|(_, _, b)| per_gpu > *b) {
                best = Some((i, at, per_gpu));
            }
        }
        let Some((i, at, _)) = best else {
            return (target, keeps);
        };
        if let Some(&n) = at.first() {
            keeps[i] *= model.kept(Curve::of(model.alpha, &running[i]), &nodes[i], n as u32);
        }
        for n in at {
            let r = free.free(n).minus(&running[i].worker_request);
            free.set_free(n, r);
            target[i] += 1;
            if !nodes[i].contains(&(n as u32)) {
                nodes[i].push(n as u32);
            }
        }
    }
}

/// The fewest workers (more than one) that take `job`, at `workers` now,
/// out of its node or domain, keeping `kept` of its throughput, and still
/// make it faster: where they go and their gain; `None` when its `max` or
/// the room in `free` stops short of that.
fn leap(
    curve: Curve,
    kept: f64,
    job: &RunningJob,
    workers: u32,
    free: &crate::types::Capacity,
) -> Option<(Vec<usize>, f64)> {
    let mut room = free.clone();
    let mut at = Vec::new();
    while workers + (at.len() as u32) < job.max_workers {
        let n = crate::packing::room_for_worker(job, &room)?;
        let r = room.free(n).minus(&job.worker_request);
        room.set_free(n, r);
        at.push(n);
        let g = curve.ratio(workers, workers + at.len() as u32) * kept - 1.0;
        if g > 0.0 {
            return Some((at, g));
        }
    }
    None
}

/// What a resize of a running job must repay, and how soon a job may be
/// resized again.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Restarts {
    /// What one resize costs the job, ms.
    pub cost_ms: f64,
    /// A growth must save this many times `cost_ms`.
    pub margin: f64,
    /// A job resized less than this long ago (after it started) waits, ms.
    pub interval_ms: u64,
}

/// [`grow_by_gain`] among the jobs `may_grow` allows that have not been
/// resized within `restarts.interval_ms`, keeping only the growths whose
/// time saved repays `restarts.margin` restarts (a job's `workers` is its
/// size before the step).
pub fn grow_repaying(
    model: GrowthModel,
    restarts: Restarts,
    now_ms: u64,
    running: &[RunningJob],
    target: Vec<u32>,
    free: &mut crate::types::Capacity,
    may_grow: impl Fn(&RunningJob) -> bool,
) -> Vec<u32> {
    let settled = |j: &RunningJob| {
        j.scaled_ms <= j.started_ms || now_ms.saturating_sub(j.scaled_ms) >= restarts.interval_ms
    };
    let before = target.clone();
    let (mut grown, keeps) =
        grow_keeping(model, running, target, free, |j| settled(j) && may_grow(j));
    for (((job, workers), was), kept) in running.iter().zip(&mut grown).zip(before).zip(keeps) {
        // The time saved counts the penalties the growth pays.
        let repays = time_saved_keeping(model.alpha, job, *workers, kept)
            .is_none_or(|saved| saved > restarts.cost_ms * restarts.margin);
        if *workers > was && !repays {
            *workers = was;
        }
    }
    grown
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::running_job;

    #[test]
    fn a_reported_speedup_replaces_the_power_law_and_carries_on_past_its_end() {
        // Linear to 4 (one node), then crossing to a second node costs:
        // 5 workers are slower than 4.
        let figures = [1000, 2000, 3000, 4000, 3600, 4300];
        let c = Curve::with(0.5, &figures);
        assert!(c.is_reported());
        assert!((c.gain(1) - 1.0).abs() < 1e-12);
        assert!(c.gain(4) < 0.0, "leaving the node slows it");
        assert!((c.ratio(4, 6) - 4.3 / 4.0).abs() < 1e-12);
        // Past the figures: the power law from the last one.
        assert!((c.ratio(6, 24) - 2.0).abs() < 1e-12);
        assert!((c.loss(2) - 0.5).abs() < 1e-12);
        assert_eq!(Curve::power(0.86).gain(3), gain(0.86, 3));
    }

    #[test]
    fn shrinking_takes_from_the_job_that_loses_least_by_what_it_reports() {
        // Both at 4 workers: job 0 scales linearly, job 1 barely at all.
        let mut linear = running_job(1, 4, 1, 4, 0);
        linear.speedup = vec![1000, 2000, 3000, 4000];
        let mut flat = running_job(2, 4, 1, 4, 1);
        flat.speedup = vec![1000, 1100, 1150, 1180];
        let order = least_loss_order(0.86, &[linear.clone(), flat.clone()]);
        assert_eq!(&order[..3], [1, 1, 1], "{order:?}");
        // One worker more saves the linear job a quarter... of its time
        // left, the flat one almost nothing.
        for j in [&mut linear, &mut flat] {
            j.stats.progress_permille = Some(500);
            j.stats.running_ms = 1_000_000;
        }
        let saved = |j: &RunningJob, w| time_saved_ms(0.86, j, w).unwrap();
        assert!(
            (saved(&linear, 2) + 1_000_000.0).abs() < 1e-6,
            "halving doubles its time"
        );
        assert!(saved(&flat, 2) > -120_000.0, "{}", saved(&flat, 2));
    }

    #[test]
    fn gains_fall_and_losses_rise_as_jobs_narrow() {
        assert!(gain(0.86, 1) > gain(0.86, 2) && gain(0.86, 2) > gain(0.86, 8));
        assert!((gain(1.0, 1) - 1.0).abs() < 1e-12);
        assert!(loss(0.86, 8) < loss(0.86, 2));
        assert_eq!(loss(0.86, 1), 1.0);
    }

    #[test]
    fn time_left_comes_from_progress_and_running_time() {
        let mut j = running_job(1, 2, 1, 4, 0);
        assert_eq!(remaining_ms(&j), None);
        j.stats.progress_permille = Some(250);
        j.stats.running_ms = 1_000_000;
        assert_eq!(remaining_ms(&j), Some(3_000_000));
        // Doubling at α = 1 halves the time left: saves 1.5e6 ms.
        assert_eq!(time_saved_ms(1.0, &j, 4), Some(1_500_000.0));
        assert!(repays_restart(1.0, &j, 4, 30_000.0, 2.0));
        j.stats.progress_permille = Some(999);
        assert!(!repays_restart(1.0, &j, 4, 30_000.0, 2.0));
    }

    #[test]
    fn growth_that_would_take_a_job_off_its_node_must_beat_the_penalty() {
        use crate::testing::capacity;
        // Node 0 full, node 1 empty: job 1 (4 workers on node 0) could
        // only grow onto node 1.
        let mut free = capacity(&[(32_000, 128_000, 4), (32_000, 128_000, 4)]);
        free.free_gpus = vec![0, 4];
        let jobs = [running_job(1, 4, 1, 8, 0)];
        let model = |p| GrowthModel {
            alpha: 0.86,
            cross_node_penalty: p,
            level_penalties: &[],
            view: None,
            leap: true,
            favour_short: false,
        };
        // (5/4)^0.86 × 0.8 < 1: one worker on node 1 would slow the job...
        let mut one = free.clone();
        one.free_gpus = vec![0, 1];
        let t = grow_by_gain(model(0.2), &jobs, vec![4], &mut one, |_| true);
        assert_eq!(t, [4]);
        // ...two repay the penalty ((6/4)^0.86 × 0.8 > 1), so with room
        // for them the job grows past its node, and on to its max.
        let t = grow_by_gain(model(0.2), &jobs, vec![4], &mut free.clone(), |_| true);
        assert_eq!(t, [8]);
        let t = grow_by_gain(model(0.0), &jobs, vec![4], &mut free.clone(), |_| true);
        assert_eq!(t, [8]);
        // Never to a size that loses: at a 50 % penalty even 8 workers
        // ((8/4)^0.86 × 0.5 < 1) would be slower than 4 on one node.
        let t = grow_by_gain(model(0.5), &jobs, vec![4], &mut free.clone(), |_| true);
        assert_eq!(t, [4]);
        // From 2 workers the first worker off the node still pays:
        // (3/2)^0.86 × 0.8 > 1.
        let small = [running_job(1, 2, 1, 4, 0)];
        let t = grow_by_gain(model(0.2), &small, vec![2], &mut free, |_| true);
        assert_eq!(t, [4]);
    }

    #[test]
    fn growth_that_would_take_a_job_out_of_its_rack_must_beat_that_levels_penalty() {
        use crate::testing::capacity;
        use crate::types::Node;
        // Nodes 0 and 1 in rack 1, node 2 in rack 2. Job 1 (2 workers,
        // one on each of nodes 0 and 1) has room only on node 2.
        let mut free = capacity(&[(32_000, 128_000, 4); 3]);
        free.free_gpus = vec![0, 0, 4];
        let nodes: Vec<Node> = (0..3)
            .map(|i| Node {
                allocatable: free.allocatable(i),
                free: free.free(i),
                open: true,
                gpu_type: None,
            })
            .collect();
        let view = crate::types::View::with_levels(
            &["dragon.dev/rack", crate::types::HOSTNAME_LEVEL],
            &nodes,
            &[1, 1, 1, 2, 2, 3],
        );
        let mut job = running_job(1, 2, 1, 3, 0);
        job.worker_nodes = vec![0, 1];
        let jobs = [job.clone()];
        let (steep, mild) = ([(0, 0.35)], [(0, 0.2)]);
        let model = |levels| GrowthModel {
            alpha: 0.86,
            cross_node_penalty: 0.2,
            level_penalties: levels,
            view: Some(&view),
            leap: true,
            favour_short: false,
        };
        // (3/2)^0.86 ≈ 1.42: a 35 % rack penalty (× 0.65) forbids the
        // growth, a 20 % one (× 0.8) allows it.
        let t = grow_by_gain(model(&steep), &jobs, vec![2], &mut free.clone(), |_| true);
        assert_eq!(t, [2]);
        assert!(grow_by_gain(model(&mild), &jobs, vec![2], &mut free.clone(), |_| true)[0] > 2);
        // Allowed 4 workers, it may leave the rack with two at once:
        // (4/2)^0.86 × 0.65 > 1.
        job.max_workers = 4;
        let t = grow_by_gain(model(&steep), &[job], vec![2], &mut free, |_| true);
        assert_eq!(t, [4]);
    }

    #[test]
    fn workers_are_taken_from_the_widest_jobs_first() {
        let running = [running_job(1, 2, 1, 2, 0), running_job(2, 4, 1, 4, 1)];
        // 4 -> 3 loses least, then 3 -> 2, then the 2-worker jobs in turn.
        assert_eq!(least_loss_order(0.86, &running), [1, 1, 0, 1]);
    }
}
