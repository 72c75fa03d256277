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

impl Capacity {
    /// Number of nodes described.
    pub fn len(&self) -> usize {
        self.free_gpus.len()
    }

    /// True when no node is described.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Free resources of node `i`.
    pub fn free(&self, i: usize) -> Resources {
        Resources {
            cpu_milli: self.free_cpu_milli[i],
            memory_mib: self.free_memory_mib[i],
            gpus: self.free_gpus[i],
        }
    }

    /// Free resources of every node, in order. Cheaper than calling
    /// [`Capacity::free`] per index in a hot loop: no bounds checks, and
    /// fewer live values for the wasm compiler to keep in registers.
    pub fn free_iter(&self) -> impl Iterator<Item = Resources> + '_ {
        self.free_cpu_milli
            .iter()
            .zip(&self.free_memory_mib)
            .zip(&self.free_gpus)
            .map(|((&cpu_milli, &memory_mib), &gpus)| Resources {
                cpu_milli,
                memory_mib,
                gpus,
            })
    }

    /// Allocatable resources of node `i`.
    pub fn allocatable(&self, i: usize) -> Resources {
        Resources {
            cpu_milli: self.alloc_cpu_milli[i],
            memory_mib: self.alloc_memory_mib[i],
            gpus: self.alloc_gpus[i],
        }
    }

    /// Set node `i`'s free resources.
    pub fn set_free(&mut self, i: usize, r: Resources) {
        self.free_cpu_milli[i] = r.cpu_milli;
        self.free_memory_mib[i] = r.memory_mib;
        self.free_gpus[i] = r.gpus;
    }
}

impl PolicyInfo {
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
