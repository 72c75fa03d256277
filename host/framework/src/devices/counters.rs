//! Partitionable devices: a pool publishes counter sets (a GPU's memory
//! slices and compute units) in slices of their own, and each partition
//! device takes some counters while it is allocated, so overlapping
//! partitions of one GPU are never given together. As
//! `structured/internal/incubating` counts them: a pool's counters less
//! what its held devices take, and a device fits only if, with it, no
//! counter of its pool is short.

use std::collections::BTreeMap;

use super::{Inventory, ResourceSlice};

/// What is left of each counter of a pool, by (counter set, counter), in
/// thousandths; negative when its held devices already take more.
/// Why a partitioned pool's counters cannot be used (kube's words).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum InvalidPool {
    #[error("duplicate counter set name {0}")]
    DuplicateSet(String),
    #[error("counter set {0} not found")]
    UnknownSet(String),
    #[error("counter {counter} not found in counter set {set}")]
    UnknownCounter { set: String, counter: String },
}

#[derive(Debug, Clone, Default)]
pub(crate) struct Counters(BTreeMap<(String, String), i128>);

impl Counters {
    /// The counters of `slices` (every slice of one pool's generation)
    /// less what the devices `inv` holds take.
    ///
    /// # Errors
    /// Why the pool is invalid: a counter set published twice, or a device
    /// taking from a set or counter that does not exist.
    pub(crate) fn of_pool(
        inv: &Inventory,
        slices: &[&ResourceSlice],
    ) -> Result<Counters, InvalidPool> {
        let mut left = BTreeMap::new();
        let mut sets = std::collections::BTreeSet::new();
        for slice in slices {
            for (set, counters) in &slice.counters {
                if !sets.insert(set.as_str()) {
                    return Err(InvalidPool::DuplicateSet(set.clone()));
                }
                for (name, q) in counters {
                    left.insert((set.clone(), name.clone()), i128::from(q.0));
                }
            }
        }
        for slice in slices {
            for device in &slice.devices {
                for u in &device.consumes {
                    if !sets.contains(u.set.as_str()) {
                        return Err(InvalidPool::UnknownSet(u.set.clone()));
                    }
                    for name in u.counters.keys() {
                        if !left.contains_key(&(u.set.clone(), name.clone())) {
                            return Err(InvalidPool::UnknownCounter {
                                set: u.set.clone(),
                                counter: name.clone(),
                            });
                        }
                    }
                }
                let id = super::DeviceId {
                    driver: slice.driver.clone(),
                    pool: slice.pool.clone(),
                    device: device.name.clone(),
                };
                if inv.is_held(&id) {
                    Counters::apply(&mut left, device, -1);
                }
            }
        }
        Ok(Counters(left))
    }

    fn apply(left: &mut BTreeMap<(String, String), i128>, device: &super::Device, sign: i128) {
        for u in &device.consumes {
            for (name, q) in &u.counters {
                if let Some(v) = left.get_mut(&(u.set.clone(), name.clone())) {
                    *v += sign * i128::from(q.0);
                }
            }
        }
    }

    /// Takes `device`'s counters if, with them, no counter of the pool is
    /// short; otherwise changes nothing.
    pub(crate) fn reserve(&mut self, device: &super::Device) -> bool {
        Counters::apply(&mut self.0, device, -1);
        if self.0.values().all(|v| *v >= 0) {
            return true;
        }
        Counters::apply(&mut self.0, device, 1);
        false
    }

    /// Gives back what [`Counters::reserve`] took for `device`.
    pub(crate) fn restore(&mut self, device: &super::Device) {
        Counters::apply(&mut self.0, device, 1);
    }
}
