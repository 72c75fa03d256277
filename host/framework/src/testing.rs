//! Fixtures for tests that drive the framework from outside it (the
//! integration tests, drivers' and policies' tests): the same small
//! clusters everywhere, so a test says only what is particular to it.

use crate::model::{Node, Resources};
use crate::{Cluster, Scheduler, SchedulerConfig};

/// A training node: 32 cores and 128 GiB (room for the CPU and memory of
/// any test's pods) and `gpus` GPUs.
pub fn node(name: &str, gpus: u32) -> Node {
    Node::new(
        name,
        Resources {
            cpu_milli: 32_000,
            memory_mib: 131_072,
            gpus,
        },
    )
}

/// A scheduler over [`node`]s named and sized as given, retrying units
/// without backoff (a test moves its clock only as far as it needs).
///
/// # Panics
/// Two nodes of one name.
pub fn scheduler(nodes: &[(&str, u32)]) -> Scheduler {
    let mut c = Cluster::new();
    for &(name, gpus) in nodes {
        c.add_node(node(name, gpus))
            .unwrap_or_else(|e| panic!("node `{name}`: {e}"));
    }
    Scheduler::new(c, SchedulerConfig::without_backoff())
}
