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
