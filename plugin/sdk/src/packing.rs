//! Packing a job's tasks onto nodes: as few nodes as possible, filling
//! first the node that alone fits the most of the tasks left, best fit among
//! equals. DRAGON places by this rule; other policies use it to ask whether
//! a gang fits (now, or once some room is freed).

use crate::helpers::Runs;
use crate::types::{
    Candidates, Capacity, Resources, Role, RunningJob, Task, Unit, View, WaitingJob,
};

/// Where each task of a job would go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Packing {
    /// Node index per task, parallel to the tasks given to [`pack`].
    pub nodes: Vec<u32>,
}

impl Packing {
    /// How many distinct nodes the job spans.
    pub fn span(&self) -> usize {
        let mut n = self.nodes.clone();
        n.sort_unstable();
        n.dedup();
        n.len()
    }
}

/// Tie-break between equally good nodes: the one left with the fewest free
/// GPUs (best fit keeps whole nodes free for the next gang), then the lowest
/// index (the framework's rule).
pub fn best_fit(free: &Resources) -> u32 {
    4095 - free.gpus.min(4095)
}

/// Pack `tasks` onto `nodes` by DRAGON's locality rule, or `None` when they
/// cannot all fit.
pub fn pack(tasks: &[Task], nodes: &Capacity) -> Option<Packing> {
    let mut free: Vec<Resources> = (0..nodes.len()).map(|i| nodes.free(i)).collect();
    let mut placed: Vec<Option<u32>> = vec![None; tasks.len()];
    let mut left: Vec<usize> = (0..tasks.len()).collect();
    while !left.is_empty() {
        let remaining: Vec<Task> = left.iter().map(|&i| tasks[i]).collect();
        let runs = Runs::of(&remaining);
        let (node, fits) = free
            .iter()
            .enumerate()
            .map(|(n, f)| (n, runs.fits_count(*f), best_fit(f)))
            .max_by(|a, b| (a.1, a.2).cmp(&(b.1, b.2)).then(b.0.cmp(&a.0)))
            .map(|(n, fits, _)| (n, fits))?;
        if fits == 0 {
            return None;
        }
        let mut still = Vec::with_capacity(left.len());
        for &i in &left {
            if tasks[i].request.fits_in(&free[node]) {
                free[node] = free[node].minus(&tasks[i].request);
                placed[i] = Some(node as u32);
            } else {
                still.push(i);
            }
        }
        left = still;
    }
    Some(Packing {
        nodes: placed.into_iter().map(|n| n.unwrap_or(0)).collect(),
    })
}

/// The tasks of `unit` at `workers` workers: workers below that index plus
/// every non-worker task, in the unit's placement order.
pub fn tasks_at(unit: &Unit, workers: u32) -> Vec<Task> {
    unit.tasks
        .iter()
        .filter(|t| t.role != Role::Worker || t.index < workers)
        .copied()
        .collect()
}

/// Why a new gang offered with fewer workers than it asks for (as the host
/// offers just `minMember` of a gang's pods when the whole does not fit)
/// should not start so: a policy that runs jobs at their requested size
/// only skips it with this reason. `None` for a whole gang.
pub fn partial(unit: &Unit) -> Option<String> {
    let workers = unit.tasks.iter().filter(|t| t.role == Role::Worker).count() as u32;
    (unit.running == 0 && workers < unit.workers).then(|| {
        format!(
            "runs at its {} workers only: {workers} of them are not enough",
            unit.workers
        )
    })
}

/// The sum of the tasks' requests.
pub fn total(tasks: &[Task]) -> Resources {
    tasks
        .iter()
        .fold(Resources::ZERO, |acc, t| acc.plus(&t.request))
}

/// A score that keeps a job together and nodes whole: more of the job's
/// pods already on the node first, then best fit (the node left with the
/// fewest free GPUs). Highest wins.
pub fn consolidating_score(nodes: &Candidates, view: &View) -> Vec<u32> {
    let capacity = view.capacity();
    nodes
        .index
        .iter()
        .zip(nodes.siblings_dense())
        .map(|(&i, siblings)| (siblings.min(0xF_FFFF) << 12) | best_fit(&capacity.free(i as usize)))
        .collect()
}

/// Take workers from running jobs, one per entry of `steps` (an index into
/// `running`: that job's highest-index worker still held, never below its
/// `min` and never worker 0), until `need` packs onto `free` plus the room
/// taken. Returns each job's new worker count (parallel to `running`) and
/// the free room after, or `None` when every step together would still not
/// make room: a restart that helps no one is not made.
pub fn shrink_until_fits(
    need: &[Task],
    free: &Capacity,
    running: &[RunningJob],
    steps: impl IntoIterator<Item = usize>,
) -> Option<(Vec<u32>, Capacity)> {
    let mut free = free.clone();
    let mut target: Vec<u32> = running.iter().map(|j| j.workers).collect();
    if pack(need, &free).is_some() {
        return Some((target, free));
    }
    for j in steps {
        let (Some(job), Some(workers)) = (running.get(j), target.get_mut(j)) else {
            continue;
        };
        if *workers <= job.min_workers.max(1) {
            continue;
        }
        *workers -= 1;
        if let Some(&node) = job.worker_nodes.get(*workers as usize) {
            let node = node as usize;
            if node < free.len() {
                let r = free.free(node).plus(&job.worker_request);
                free.set_free(node, r);
            }
        }
        if pack(need, &free).is_some() {
            return Some((target, free));
        }
    }
    None
}

/// What [`admit_at_min`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Admission {
    /// The waiting jobs that running jobs gave up workers for, by id.
    pub shrunk_for: Vec<u64>,
    /// Whether every waiting job found room at its minimum.
    pub all: bool,
}

/// Room at its minimum for each of `waiting` in turn. Where one does not
/// fit in `free`, the running `jobs` give up workers in the order
/// `victims` gives for their sizes so far, until it does
/// ([`shrink_until_fits`]); one that shrinking cannot fit is skipped. The
/// room of each job that fits is reserved in `free`, so the next round
/// admits it there, and the jobs' `workers` become the sizes they are
/// shrunk to.
pub fn admit_at_min<'a>(
    waiting: impl IntoIterator<Item = &'a WaitingJob>,
    jobs: &mut [RunningJob],
    free: &mut Capacity,
    mut victims: impl FnMut(&[RunningJob]) -> Vec<usize>,
) -> Admission {
    let mut admission = Admission {
        all: true,
        ..Admission::default()
    };
    for w in waiting {
        let need = tasks_at(&w.unit, w.unit.min_workers);
        if pack(&need, free).is_none() {
            let order = victims(jobs);
            let Some((target, after)) = shrink_until_fits(&need, free, jobs, order) else {
                admission.all = false;
                continue;
            };
            for (j, t) in jobs.iter_mut().zip(target) {
                j.workers = t;
            }
            *free = after;
            admission.shrunk_for.push(w.id);
        }
        reserve(&need, free);
    }
    admission
}

/// Take the room of `tasks`, packed as [`pack`] packs them, out of `free`
/// (nothing when they do not fit).
pub fn reserve(tasks: &[Task], free: &mut Capacity) {
    if let Some(p) = pack(tasks, free) {
        for (t, &n) in tasks.iter().zip(&p.nodes) {
            let r = free.free(n as usize).minus(&t.request);
            free.set_free(n as usize, r);
        }
    }
}

/// Where one more worker of `job` goes: a node of its parameter servers or
/// workers with room first (growth keeps the job together), else the first
/// node with room of the GPU type its nodes hold (the framework places a
/// running job's new workers only there; any node when its nodes hold no
/// one type).
pub fn room_for_worker(job: &RunningJob, free: &Capacity) -> Option<usize> {
    let req = job.worker_request;
    let fits = |n: usize| n < free.len() && req.fits_in(&free.free(n));
    let mut own = job
        .ps_nodes
        .iter()
        .chain(job.worker_nodes.iter())
        .map(|&n| n as usize);
    if let Some(n) = own.clone().find(|&n| fits(n)) {
        return Some(n);
    }
    let kind = |n: usize| free.gpu_kinds.get(n).copied().unwrap_or(0);
    let first = own.next().map_or(0, kind);
    let one_kind = first != 0 && own.all(|n| kind(n) == first);
    (0..free.len()).find(|&n| fits(n) && (!one_kind || kind(n) == first))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::*;

    #[test]
    fn a_job_that_fits_on_one_node_is_packed_on_one_node() {
        let nodes = capacity(&[(32_000, 128_000, 4), (32_000, 128_000, 8)]);
        let tasks = job_tasks(1, 4, gpu_worker(), ps());
        let p = pack(&tasks, &nodes).unwrap();
        assert_eq!(p.span(), 1);
        // Best fit: the 4-GPU node is used up exactly, the 8-GPU node stays whole.
        assert!(p.nodes.iter().all(|&n| n == 0), "{p:?}");
    }

    #[test]
    fn a_job_too_big_for_one_node_fills_the_node_that_fits_the_most_first() {
        // Node 1 fits 3 workers, node 0 two, node 2 one: 5 workers take nodes 1 and 0.
        let nodes = capacity(&[
            (32_000, 128_000, 2),
            (32_000, 128_000, 3),
            (32_000, 128_000, 1),
        ]);
        let tasks = job_tasks(0, 5, gpu_worker(), ps());
        let p = pack(&tasks, &nodes).unwrap();
        assert_eq!(p.nodes, vec![1, 1, 1, 0, 0]);
        assert_eq!(p.span(), 2);
    }

    #[test]
    fn a_gang_offered_with_part_of_its_workers_is_partial() {
        let mut unit = gang_unit(1, 4, 2, 4, gpu_worker(), ps());
        assert_eq!(partial(&unit), None);
        unit.tasks.retain(|t| t.role != Role::Worker || t.index < 2);
        assert!(partial(&unit).unwrap().contains("2 of them"));
    }

    #[test]
    fn waiting_jobs_get_room_at_their_minimum_in_turn_by_shrinking_where_needed() {
        // Job 1 runs 6 workers (down to 2) on the one node; 2 GPUs are free.
        let mut jobs = vec![running_job(1, 6, 2, 8, 0)];
        let mut free = capacity(&[(32_000, 128_000, 2)]);
        let (fits, shrinks, too_big) = (
            waiting_job(10, 0, 4, 2),
            waiting_job(11, 0, 4, 3),
            waiting_job(12, 0, 4, 4),
        );
        let admission = admit_at_min([&fits, &shrinks, &too_big], &mut jobs, &mut free, |jobs| {
            vec![0; jobs[0].workers as usize]
        });
        // The first fits as it is; the second takes 3 of job 1's workers;
        // the third would need one more than job 1 can give.
        assert_eq!(admission.shrunk_for, vec![11]);
        assert!(!admission.all);
        assert_eq!(jobs[0].workers, 3);
        assert_eq!(free.free(0).gpus, 0, "both rooms reserved");
    }

    #[test]
    fn a_job_that_cannot_fit_is_not_packed() {
        let nodes = capacity(&[(32_000, 128_000, 2), (32_000, 128_000, 2)]);
        assert!(pack(&job_tasks(1, 5, gpu_worker(), ps()), &nodes).is_none());
    }

    #[test]
    fn a_job_grows_on_its_own_nodes_then_on_its_gpu_type() {
        // Node 0 (type 1) holds the job and is full; node 1 is of another
        // type, node 2 of the job's.
        let mut free = capacity(&[
            (32_000, 128_000, 0),
            (32_000, 128_000, 4),
            (32_000, 128_000, 2),
        ]);
        let job = running_job(1, 2, 1, 8, 0);
        assert_eq!(
            room_for_worker(&job, &free),
            Some(1),
            "no types: the first with room"
        );
        free.gpu_kinds = vec![1, 2, 1];
        assert_eq!(room_for_worker(&job, &free), Some(2));
        free.set_free(2, Resources::ZERO);
        assert_eq!(room_for_worker(&job, &free), None, "its type is full");
        free.set_free(
            0,
            Resources {
                cpu_milli: 32_000,
                memory_mib: 128_000,
                gpus: 1,
            },
        );
        assert_eq!(room_for_worker(&job, &free), Some(0), "its own node first");
    }
}
