//! The pools a node reaches, as `GatherPools` finds them: only each
//! pool's newest generation, complete pools only, devices reachable from
//! the node, partitionable pools with their counters, and pools whose
//! devices wait for binding conditions last.

use std::collections::{BTreeMap, HashSet};

use super::super::counters::Counters;
use super::super::{Device, DeviceId, Inventory, Published, ResourceSlice};
use crate::model::Node;

/// A device the node reaches, with where it comes from.
pub(super) struct Candidate<'a> {
    pub(super) published: &'a Published,
    /// Its index in the slice.
    pub(super) at: usize,
    pub(super) id: &'a DeviceId,
    pub(super) device: &'a Device,
    pub(super) slice: &'a ResourceSlice,
    /// Its pool's index in the search's counters.
    pub(super) pool: usize,
}

/// What the node reaches: candidates in (driver, pool, slice, device)
/// order, each pool's counters when some device of it takes counters, and
/// a pool seen incomplete or invalid.
pub(super) struct Gathered<'a> {
    pub(super) cands: Vec<Candidate<'a>>,
    pub(super) counters: Vec<Option<Counters>>,
    pub(super) problem: Option<String>,
}

/// The pools node `node` reaches.
pub(super) fn gather<'a>(inv: &'a Inventory, node: &Node) -> Gathered<'a> {
    // Newest generation of each pool among the slices the node reaches.
    let mut pools: BTreeMap<(&str, &str), (i64, Vec<&'a Published>)> = BTreeMap::new();
    for published in inv.slices_near(&node.name) {
        let slice = &published.slice;
        let reaches = match &slice.reach {
            Some(r) => r.admits(node),
            None => slice
                .devices
                .iter()
                .any(|d| d.reach.as_ref().is_some_and(|r| r.admits(node))),
        };
        if !reaches {
            continue;
        }
        let e = pools
            .entry((&slice.driver, &slice.pool))
            .or_insert((slice.generation, Vec::new()));
        if slice.generation > e.0 {
            *e = (slice.generation, Vec::new());
        }
        if slice.generation == e.0 {
            e.1.push(published);
        }
    }
    let mut out = Vec::new();
    let mut counters = Vec::new();
    let mut unusable = None;
    // Pools whose devices must wait for binding conditions are tried last,
    // as kube orders them.
    let waits = |local: &Vec<&'a Published>| {
        local
            .iter()
            .any(|p| p.slice.devices.iter().any(|d| d.binding.any()))
    };
    let (immediate, waiting): (Vec<_>, Vec<_>) =
        pools.into_iter().partition(|(_, (_, local))| !waits(local));
    for ((driver, pool), (generation, local)) in immediate.into_iter().chain(waiting) {
        let want = local[0].slice.slice_count;
        if local.len() as u64 != want {
            // Slices of the pool elsewhere may complete it; a newer
            // generation anywhere makes this one obsolete.
            let all = inv.pool_slices(driver, pool);
            if all.iter().any(|s| s.generation > generation) {
                continue;
            }
            let current = all.iter().filter(|s| s.generation == generation).count();
            if current as u64 != want {
                unusable.get_or_insert_with(|| format!("{driver}/{pool}"));
                continue;
            }
        }
        let mut names = HashSet::new();
        let valid = local
            .iter()
            .flat_map(|s| &s.slice.devices)
            .all(|d| names.insert(d.name.as_str()));
        if !valid {
            unusable.get_or_insert_with(|| format!("{driver}/{pool}"));
            continue;
        }
        let partitioned = local
            .iter()
            .any(|p| p.slice.devices.iter().any(|d| !d.consumes.is_empty()));
        let pool_counters = if partitioned {
            let all: Vec<&ResourceSlice> = inv
                .pool_slices(driver, pool)
                .into_iter()
                .filter(|s| s.generation == generation)
                .collect();
            match Counters::of_pool(inv, &all) {
                Ok(c) => Some(c),
                Err(e) => {
                    tracing::debug!(driver, pool, "pool left out: {e}");
                    unusable.get_or_insert_with(|| format!("{driver}/{pool}"));
                    continue;
                }
            }
        } else {
            None
        };
        let at_pool = counters.len();
        counters.push(pool_counters);
        for published in local {
            let slice = &published.slice;
            for (at, device) in slice.devices.iter().enumerate() {
                if slice.reach.is_none() && !device.reach.as_ref().is_some_and(|r| r.admits(node)) {
                    continue;
                }
                out.push(Candidate {
                    published,
                    at,
                    id: &published.ids[at],
                    device,
                    slice,
                    pool: at_pool,
                });
            }
        }
    }
    Gathered {
        cands: out,
        counters,
        problem: unusable,
    }
}
