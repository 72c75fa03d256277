//! Lower bounds on a trace's average job completion time: what no policy
//! can beat, so that a table shows how much is left to win.
//!
//! - [`alone`]: every job from its arrival at its fastest size, never
//!   waiting; above its submitted size only after the restart a resize
//!   costs. Ignores capacity, so at high load it is far below anything
//!   reachable.
//! - [`capacity_aware`]: also counts that the jobs share the cluster's GPUs.
//!   The cluster is relaxed to one pool of GPUs (no nodes, no
//!   fragmentation, no restarts) in which a job needs at least its *GPU
//!   work*, the GPU-time it would use at its most GPU-efficient size. Serving
//!   the smallest GPU work first, one job at a time on the whole pool,
//!   minimises the sum of the jobs' mean busy times there (Goemans'
//!   preemptive WSPT rule); a real job, never faster than its fastest size,
//!   completes at least half its alone time after its mean busy time.
//!   `docs/simulator.md` states the argument.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};

use super::trace::{Trace, TraceJob};
use dragon_framework::Role;

/// What the bounds need of one job, ms and GPU-ms.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Need {
    arrival_ms: f64,
    /// Least time from arrival to completion alone: at its fastest size up
    /// to the submitted one, or a restart then its fastest size of all.
    alone_ms: f64,
    /// Run time at its fastest size of all, restarts aside.
    fastest_ms: f64,
    /// GPU-time at its most GPU-efficient size (0: it uses no GPUs).
    gpu_work: f64,
}

/// What placement allows a job at best: the GPUs of the largest node, and
/// per topology level of the trace (widest first) its penalty and the GPUs
/// of its largest domain.
#[derive(Debug, Clone, Default)]
struct Room {
    node_gpus: u32,
    levels: Vec<(String, f64, u32)>,
}

impl Room {
    fn of(trace: &Trace) -> Room {
        let node_gpus = trace
            .nodes
            .iter()
            .map(|n| n.allocatable.gpus)
            .max()
            .unwrap_or(0);
        let levels = trace
            .topology
            .iter()
            .map(|(key, penalty)| {
                // A node without the label is a domain of its own.
                let mut domains: BTreeMap<&str, u32> = BTreeMap::new();
                let mut largest = 0;
                for n in &trace.nodes {
                    match n.labels.get(key) {
                        Some(d) => *domains.entry(d.as_str()).or_default() += n.allocatable.gpus,
                        None => largest = largest.max(n.allocatable.gpus),
                    }
                }
                let largest = domains.into_values().fold(largest, u32::max);
                (key.clone(), *penalty, largest)
            })
            .collect();
        Room { node_gpus, levels }
    }

    /// The least penalty a job of `gpus` pays for the levels it must span:
    /// it spans the widest level none of whose domains holds it, and is
    /// charged the penalty of the widest level it spans, that one or one
    /// wider.
    fn least_crossing(&self, gpus: u32) -> f64 {
        match self.levels.iter().position(|l| gpus > l.2) {
            Some(i) => self.levels[..=i]
                .iter()
                .map(|l| l.1)
                .fold(f64::INFINITY, f64::min),
            None => 0.0,
        }
    }

    /// Whether a job held to one domain of level `key` fits one at `gpus`.
    fn fits_required(&self, key: &str, gpus: u32) -> bool {
        match self.levels.iter().find(|l| l.0 == key) {
            Some(l) => gpus <= l.2,
            None if key == dragon_framework::HOSTNAME_LEVEL => gpus <= self.node_gpus,
            None => true,
        }
    }
}

fn need(job: &TraceJob, room: &Room) -> Need {
    let node_gpus = room.node_gpus;
    let required = job
        .job
        .topology
        .as_ref()
        .filter(|c| c.mode == dragon_framework::TopologyMode::Required);
    let worker_gpus = job
        .pods
        .iter()
        .find(|p| p.role == Role::Worker)
        .map_or(0, |p| p.request.gpus);
    let other_gpus: u32 = job
        .pods
        .iter()
        .filter(|p| p.role != Role::Worker)
        .map(|p| p.request.gpus)
        .sum();
    let (mut fastest, mut as_submitted, mut per_gpu) = (0.0_f64, 0.0_f64, 0.0_f64);
    for w in job.job.min_workers..=job.job.max_workers {
        let gpus = w.saturating_mul(worker_gpus).saturating_add(other_gpus);
        if required.is_some_and(|c| !room.fits_required(&c.key, gpus)) {
            continue;
        }
        // The best placement of that size: one node when one can hold it,
        // else within the narrowest domains that can.
        let span = if gpus <= node_gpus { 1 } else { 2 };
        let crossing = room.least_crossing(gpus);
        let per_node = node_gpus.checked_div(worker_gpus).unwrap_or(w);
        let rate = job
            .speed
            .relative(w, span, per_node, job.job.workers, crossing);
        fastest = fastest.max(rate);
        if w <= job.job.workers {
            as_submitted = as_submitted.max(rate);
        }
        if gpus > 0 {
            per_gpu = per_gpu.max(rate / f64::from(gpus));
        }
    }
    let positive = |x: f64| if x > 0.0 { x } else { f64::INFINITY };
    let fastest_ms = job.work_ms / positive(fastest);
    // A job is admitted with at most the workers it was submitted with;
    // it runs with more only after a resize, which restarts it.
    let grown_ms = if fastest > as_submitted {
        job.restart_ms as f64 + fastest_ms
    } else {
        f64::INFINITY
    };
    Need {
        arrival_ms: job.arrival_ms as f64,
        alone_ms: (job.work_ms / positive(as_submitted)).min(grown_ms),
        fastest_ms,
        gpu_work: if other_gpus == 0 && worker_gpus == 0 {
            0.0
        } else {
            job.work_ms / positive(per_gpu)
        },
    }
}

fn needs(trace: &Trace) -> Vec<Need> {
    let room = Room::of(trace);
    trace.jobs.iter().map(|j| need(j, &room)).collect()
}

/// GPUs the jobs can share: the cluster's, less those of pods bound for the
/// whole run.
fn pool_gpus(trace: &Trace) -> f64 {
    let background: u64 = trace
        .background
        .iter()
        .map(|(p, _)| u64::from(p.request.gpus))
        .sum();
    trace.total_gpus().saturating_sub(background) as f64
}

/// The alone bound of `trace`'s average JCT, seconds.
pub fn alone(trace: &Trace) -> f64 {
    let n = needs(trace);
    n.iter().map(|j| j.alone_ms).sum::<f64>() / n.len().max(1) as f64 / 1e3
}

/// The capacity-aware bound of `trace`'s average JCT, seconds (never below
/// [`alone`]).
pub fn capacity_aware(trace: &Trace) -> f64 {
    let jobs = needs(trace);
    if jobs.is_empty() {
        return 0.0;
    }
    let pool = pool_gpus(trace);
    // Σ C_j ≥ Σ (M_j + L_j / 2) over the jobs with GPU work, and Σ M_j is
    // at least its least value in the pool; the others are held only by
    // their alone time.
    let sum_completion: f64 = if pool > 0.0 {
        let busy = least_mean_busy(&jobs, pool);
        jobs.iter()
            .zip(&busy)
            .map(|(j, m)| match m {
                Some(m) => m + j.fastest_ms / 2.0,
                None => j.arrival_ms + j.alone_ms,
            })
            .sum()
    } else {
        jobs.iter().map(|j| j.arrival_ms + j.alone_ms).sum()
    };
    let arrivals: f64 = jobs.iter().map(|j| j.arrival_ms).sum();
    // Never below the alone bound, which it equals on an idle cluster (a
    // float's rounding must not show it below).
    let capacity = (sum_completion - arrivals) / jobs.len() as f64 / 1e3;
    capacity.max(alone(trace))
}

/// Mean busy time of each job with GPU work (`None`: no GPU work) when
/// `pool` GPUs serve the released jobs one at a time, smallest GPU work
/// first (ties in trace order), preempting at arrivals: the least sum of
/// mean busy times of any schedule of the pool. (Capping each job at its
/// fastest rate here would not give the least sum: a slow job is better
/// started at once beside a fast one than after it.)
fn least_mean_busy(jobs: &[Need], pool: f64) -> Vec<Option<f64>> {
    let mut by_arrival: Vec<usize> = (0..jobs.len())
        .filter(|&i| jobs[i].gpu_work > 0.0)
        .collect();
    by_arrival.sort_by(|&a, &b| jobs[a].arrival_ms.total_cmp(&jobs[b].arrival_ms));
    // Released and unfinished, by (GPU work, trace order); GPU work is a
    // positive finite float, whose bits order as it does.
    let mut ready: BinaryHeap<Reverse<(u64, usize)>> = BinaryHeap::new();
    let mut left: Vec<f64> = jobs.iter().map(|j| j.gpu_work).collect();
    let mut moment = vec![0.0; jobs.len()];
    let (mut next, mut now) = (0, 0.0_f64);
    while next < by_arrival.len() || !ready.is_empty() {
        if ready.is_empty() {
            now = now.max(jobs[by_arrival[next]].arrival_ms);
        }
        while next < by_arrival.len() && jobs[by_arrival[next]].arrival_ms <= now {
            let i = by_arrival[next];
            ready.push(Reverse((jobs[i].gpu_work.to_bits(), i)));
            next += 1;
        }
        let Some(&Reverse((_, i))) = ready.peek() else {
            continue;
        };
        let until = by_arrival
            .get(next)
            .map_or(f64::INFINITY, |&a| jobs[a].arrival_ms - now);
        let d = (left[i] / pool).min(until);
        moment[i] += pool * d * (now + d / 2.0);
        now += d;
        if d * pool >= left[i] {
            left[i] = 0.0;
            ready.pop();
        } else {
            left[i] -= d * pool;
        }
    }
    jobs.iter()
        .zip(&moment)
        .map(|(j, m)| (j.gpu_work > 0.0).then(|| m / j.gpu_work))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(arrival_ms: f64, alone_ms: f64, gpu_work: f64) -> Need {
        Need {
            arrival_ms,
            alone_ms,
            fastest_ms: alone_ms,
            gpu_work,
        }
    }

    #[test]
    fn the_pool_serves_the_smallest_gpu_work_first_and_preempts_at_arrivals() {
        // Pool of 2 GPUs. A: 10 GPU-ms at 0; B: 2 GPU-ms at 1.
        let jobs = [job(0.0, 5.0, 10.0), job(1.0, 2.0, 2.0)];
        let busy = least_mean_busy(&jobs, 2.0);
        // A over [0, 1], B over [1, 2], A again over [2, 6]: A's mean busy
        // time is (2·0.5 + 8·4) / 10, B's 1.5.
        assert!((busy[0].unwrap() - 3.3).abs() < 1e-9, "{busy:?}");
        assert!((busy[1].unwrap() - 1.5).abs() < 1e-9, "{busy:?}");
    }

    /// A schedule that exists is never below the bound: a slow job (10 ms
    /// alone, at most a tenth of the pool) started at once beside a fast one
    /// (1 ms alone on the whole pool) averages (1/0.9 + 10) / 2 ≈ 5.56 ms.
    #[test]
    fn the_bound_stays_below_a_schedule_that_starts_a_slow_job_beside_a_fast_one() {
        let jobs = [job(0.0, 1.0, 1.0), job(0.0, 10.0, 1.0)];
        let busy = least_mean_busy(&jobs, 1.0);
        let bound: f64 = jobs
            .iter()
            .zip(&busy)
            .map(|(j, m)| m.unwrap_or(0.0) + j.fastest_ms / 2.0)
            .sum::<f64>()
            / 2.0;
        assert!(bound <= (1.0 / 0.9 + 10.0) / 2.0, "{bound} {busy:?}");
    }

    #[test]
    fn an_idle_pool_waits_for_the_next_arrival() {
        let jobs = [job(0.0, 1.0, 1.0), job(100.0, 1.0, 1.0), job(0.0, 1.0, 0.0)];
        let busy = least_mean_busy(&jobs, 1.0);
        assert_eq!(busy, vec![Some(0.5), Some(100.5), None]);
    }

    /// Four jobs that each need the whole cluster (8 GPUs, rigid), all at
    /// 0, each an hour alone: the best schedule runs them one after another,
    /// average JCT 2.5 h; alone, 1 h.
    fn rigid(count: usize) -> Trace {
        let mut text = String::from(
            "cluster:\n  nodes:\n    - {name_prefix: gpu, count: 2, cpu: 32, memory_gib: 128, gpus: 4}\njobs:\n",
        );
        for i in 0..count {
            text += &format!(
                "  - {{name: j{i}, arrival_s: 0, duration_s: 3600, workers: {{count: 8, cpu: 1, memory_gib: 1, gpus: 1}}}}\n"
            );
        }
        Trace::parse(&text, "t.yaml", false).unwrap()
    }

    #[test]
    fn jobs_that_each_fill_the_cluster_are_bounded_by_running_one_after_another() {
        let t = rigid(4);
        // 8 workers over two 4-GPU nodes pay the cross-node penalty alone too.
        let alone_s = 3600.0 / t.jobs[0].speed.modelled().unwrap().rate(8, 2, 8);
        assert!((alone(&t) - alone_s).abs() < 1e-6, "{}", alone(&t));
        let cap = capacity_aware(&t);
        assert!(
            (cap - 2.5 * alone_s).abs() < 1e-6,
            "{cap} vs {}",
            2.5 * alone_s
        );
    }

    /// One elastic job of 2 workers (up to 4) on an 8-GPU node: running
    /// at 4 needs a resize, whose restart counts when it is short.
    fn elastic(duration_s: u32, restart_s: u32) -> Trace {
        Trace::parse(
            &format!(
                "cluster:\n  nodes:\n    - {{name_prefix: gpu, count: 1, cpu: 32, memory_gib: 128, gpus: 8}}\njobs:\n  - {{name: j, arrival_s: 0, duration_s: {duration_s}, restart_s: {restart_s}, workers: {{count: 2, min: 1, max: 4, cpu: 1, memory_gib: 1, gpus: 1}}}}\n"
            ),
            "t.yaml",
            false,
        )
        .unwrap()
    }

    #[test]
    fn a_job_runs_above_its_submitted_size_only_after_a_restart() {
        let long = elastic(36_000, 30);
        let speed = long.jobs[0].speed.modelled().unwrap();
        let (at_2, at_4) = (speed.rate(2, 1, 2), speed.rate(4, 1, 2));
        assert!(at_4 > at_2);
        let grown = 30.0 + 36_000.0 / at_4;
        assert!((alone(&long) - grown).abs() < 1e-6, "{}", alone(&long));
        // Two minutes at 2 workers beat a 10-minute restart, then 4.
        let short = elastic(120, 600);
        assert!(
            (alone(&short) - 120.0 / at_2).abs() < 1e-6,
            "{}",
            alone(&short)
        );
        assert_eq!(capacity_aware(&short), alone(&short));
    }

    /// Racks r1 (two nodes of 4 GPUs) and r2 (one), crossing racks
    /// costing `penalty` of the throughput: a job of 12 one-GPU workers
    /// (at least 1).
    fn racked(penalty: f64, constraint: &str) -> Trace {
        Trace::parse(
            &format!(
                "model:\n  topology: [{{key: dragon.dev/rack, penalty: {penalty}}}]\ncluster:\n  nodes:\n    - {{name_prefix: a, count: 2, cpu: 32, memory_gib: 128, gpus: 4, labels: {{dragon.dev/rack: r1}}}}\n    - {{name_prefix: b, count: 1, cpu: 32, memory_gib: 128, gpus: 4, labels: {{dragon.dev/rack: r2}}}}\njobs:\n  - {{name: j, arrival_s: 0, duration_s: 1000, workers: {{count: 12, min: 1, cpu: 1, memory_gib: 1, gpus: 1}}{constraint}}}\n"
            ),
            "racks.yaml",
            false,
        )
        .unwrap()
    }

    #[test]
    fn a_size_wider_than_every_rack_pays_the_rack_penalty_and_a_job_held_to_a_rack_stays_in_one() {
        let near = |t: &Trace, want: f64| (alone(t) - want).abs() < 1e-6;
        let speed = *racked(0.5, "").jobs[0].speed.modelled().unwrap();
        // Within r1, 8 workers pay the node penalty only.
        let in_rack = 1000.0 / speed.rate(8, 2, 12);
        // At half the throughput, 12 across racks are slower than 8.
        assert!(near(&racked(0.5, ""), in_rack));
        // At 21 %, they are faster; held to a rack, the job cannot be.
        let across = 1000.0 / speed.rate_crossing(12, 2, 12, 0.21);
        assert!(across < in_rack);
        assert!(near(&racked(0.21, ""), across));
        let held = racked(0.21, ", topology: {required: dragon.dev/rack}");
        assert!(near(&held, in_rack), "{}", alone(&held));
        let room = Room::of(&held);
        assert_eq!(
            (room.least_crossing(8), room.least_crossing(9)),
            (0.0, 0.21)
        );
    }

    #[test]
    fn with_room_for_every_job_the_capacity_bound_is_the_alone_bound() {
        let t = rigid(1);
        assert_eq!(capacity_aware(&t), alone(&t));
    }
}
