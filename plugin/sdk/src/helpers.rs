//! Small arithmetic every policy needs, on the generated types.

use crate::types::*;

impl Resources {
    /// No resources.
    pub const ZERO: Resources = Resources {
        cpu_milli: 0,
        memory_mib: 0,
        gpus: 0,
    };

    /// Sum of two amounts (saturating: inputs come from the host).
    pub fn plus(&self, o: &Resources) -> Resources {
        Resources {
            cpu_milli: self.cpu_milli.saturating_add(o.cpu_milli),
            memory_mib: self.memory_mib.saturating_add(o.memory_mib),
            gpus: self.gpus.saturating_add(o.gpus),
        }
    }

    /// Difference, floored at zero.
    pub fn minus(&self, o: &Resources) -> Resources {
        Resources {
            cpu_milli: self.cpu_milli.saturating_sub(o.cpu_milli),
            memory_mib: self.memory_mib.saturating_sub(o.memory_mib),
            gpus: self.gpus.saturating_sub(o.gpus),
        }
    }

    /// `self` fits into `free`.
    pub fn fits_in(&self, free: &Resources) -> bool {
        self.cpu_milli <= free.cpu_milli
            && self.memory_mib <= free.memory_mib
            && self.gpus <= free.gpus
    }
}

impl JobStats {
    /// No history: a lone pod, or a job the host knows nothing of yet.
    pub const NONE: JobStats = JobStats {
        attained_gpu_ms: 0,
        running_ms: 0,
        restarts: 0,
        placed_workers: 0,
        requested_workers: 0,
        progress_permille: None,
        queue: None,
    };
}

impl Candidates {
    /// Number of candidates.
    pub fn len(&self) -> usize {
        self.index.len()
    }

    /// True when there is no candidate.
    pub fn is_empty(&self) -> bool {
        self.index.is_empty()
    }

    /// Siblings on each candidate, by position (0 where none).
    pub fn siblings_dense(&self) -> Vec<u32> {
        let mut dense = vec![0; self.index.len()];
        for &(at, n) in &self.siblings {
            if let Some(d) = dense.get_mut(at as usize) {
                *d = n;
            }
        }
        dense
    }
}

impl PolicyInfo {
    /// PolicyInfo for a policy whose hooks `#[policy]` names.
    pub fn named(name: &str, version: &str) -> PolicyInfo {
        PolicyInfo::new(name, version, &[])
    }

    /// PolicyInfo for a policy implementing `hooks`.
    pub fn new(name: &str, version: &str, hooks: &[Hook]) -> PolicyInfo {
        PolicyInfo {
            name: name.to_string(),
            version: version.to_string(),
            hooks: hooks.to_vec(),
        }
    }
}

/// How many of `tasks` fit into `free` together, trying them in order and
/// skipping any that no longer fits.
pub fn fits_count(tasks: &[Task], mut free: Resources) -> usize {
    let mut n = 0;
    for t in tasks {
        if !t.request.fits_in(&free) {
            continue;
        }
        // Plain subtraction: it fits, so none of these can underflow.
        free = Resources {
            cpu_milli: free.cpu_milli - t.request.cpu_milli,
            memory_mib: free.memory_mib - t.request.memory_mib,
            gpus: free.gpus - t.request.gpus,
        };
        n += 1;
    }
    n
}

/// A job's tasks as runs of equal requests, in order: [`fits_count`] in a
/// step per run instead of a step per task. A gang of hundreds of identical
/// workers is one or two runs, so counting what fits on each of thousands
/// of candidate nodes stays cheap whatever the gang's size.
#[derive(Debug, Clone)]
pub struct Runs(Vec<(Resources, u32)>);

impl Runs {
    pub fn of(tasks: &[Task]) -> Runs {
        let mut runs: Vec<(Resources, u32)> = Vec::new();
        for t in tasks {
            match runs.last_mut() {
                Some((request, n))
                    if (request.cpu_milli, request.memory_mib, request.gpus)
                        == (t.request.cpu_milli, t.request.memory_mib, t.request.gpus) =>
                {
                    *n += 1
                }
                _ => runs.push((t.request, 1)),
            }
        }
        Runs(runs)
    }

    /// [`fits_count`] of the tasks these runs were made of: within a run,
    /// once one task does not fit none of the rest does (`free` is
    /// unchanged by a task that is skipped), so a run places as many as
    /// fit at once: three divisions a run, however long it is (counting
    /// them one by one was slower even for a gang of 8, in wasm and native).
    pub fn fits_count(&self, mut free: Resources) -> usize {
        let mut n = 0;
        for &(r, len) in &self.0 {
            let most = |have: u64, each: u64| have.checked_div(each).unwrap_or(u64::MAX);
            let k = most(free.cpu_milli, r.cpu_milli)
                .min(most(free.memory_mib, r.memory_mib))
                .min(most(u64::from(free.gpus), u64::from(r.gpus)))
                .min(u64::from(len));
            // k × each ≤ have for every resource: no underflow, and k fits
            // in a u32 (it is at most `len`).
            free = Resources {
                cpu_milli: free.cpu_milli - k * r.cpu_milli,
                memory_mib: free.memory_mib - k * r.memory_mib,
                gpus: free.gpus - (k as u32) * r.gpus,
            };
            n += k as usize;
        }
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Counting by runs gives what counting task by task gives, on mixed
    /// and repeated requests, zero components and nodes of every size.
    #[test]
    fn runs_count_what_fits_as_the_tasks_one_by_one_do() {
        let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
        let mut next = |bound: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % bound
        };
        let shapes = [
            Resources {
                cpu_milli: 4_000,
                memory_mib: 16_384,
                gpus: 1,
            },
            Resources {
                cpu_milli: 2_000,
                memory_mib: 8_192,
                gpus: 0,
            },
            Resources {
                cpu_milli: 500,
                memory_mib: 1_024,
                gpus: 2,
            },
            Resources {
                cpu_milli: 100,
                memory_mib: 100,
                gpus: 0,
            },
            Resources::ZERO,
        ];
        for _ in 0..5_000 {
            // Runs of one shape, long and short.
            let mut tasks: Vec<Task> = Vec::new();
            for _ in 0..next(4) {
                let request = shapes[next(shapes.len() as u64) as usize];
                for _ in 0..1 + next(60) {
                    tasks.push(Task {
                        role: Role::Worker,
                        index: tasks.len() as u32,
                        request,
                    });
                }
            }
            let free = Resources {
                cpu_milli: next(70_000),
                memory_mib: next(300_000),
                gpus: next(20) as u32,
            };
            assert_eq!(
                Runs::of(&tasks).fits_count(free),
                fits_count(&tasks, free),
                "{free:?}"
            );
        }
    }
}
