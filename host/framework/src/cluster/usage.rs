//! What the pods on each node hold, kept current with every change: the
//! columns the policy's view and the filters read, host ports, extended
//! resources, and the few pods whose affinity terms weigh on others.

use std::collections::{BTreeMap, BTreeSet};

use super::view::ChangeLog;
use crate::model::HostPort;
use crate::model::{Pod, Resources, Scalars};
use crate::names::PodKey;

/// Every node's allocatable and free resources as columns, in the policy's
/// layout, kept current with each change of usage: a pod's candidates are
/// then a gather from here (a plain copy when every node is a candidate)
/// instead of a recomputation per node per pod. A removed node has zeros.
#[derive(Debug, Clone, Default)]
pub(crate) struct Columns {
    pub(crate) alloc_cpu_milli: Vec<u64>,
    pub(crate) alloc_memory_mib: Vec<u64>,
    pub(crate) alloc_gpus: Vec<u32>,
    pub(crate) free_cpu_milli: Vec<u64>,
    pub(crate) free_memory_mib: Vec<u64>,
    pub(crate) free_gpus: Vec<u32>,
    /// How many more pods the node takes (`u32::MAX` without a limit).
    pub(crate) free_pods: Vec<u32>,
    /// Live, schedulable and without a NoSchedule/NoExecute taint: a pod
    /// with no node selector needs only the resource fit here.
    pub(crate) open: Vec<bool>,
    /// Which rows changed, for policies that keep a copy.
    pub(crate) log: ChangeLog,
}

impl Columns {
    /// How many more pods asking `r` fit on node `n` (0 when it is not
    /// open), after `taken` is set aside. A resource the pod does not ask
    /// for limits nothing.
    pub(crate) fn room(&self, n: usize, r: Resources, taken: Resources) -> u64 {
        match self.open[n] {
            true => self.free_room(n, r, taken),
            false => 0,
        }
    }

    /// [`Columns::room`], open or not.
    fn free_room(&self, n: usize, r: Resources, taken: Resources) -> u64 {
        let free = |have: u64, less: u64| have.saturating_sub(less);
        [
            free(u64::from(self.free_gpus[n]), u64::from(taken.gpus))
                .checked_div(u64::from(r.gpus)),
            free(self.free_cpu_milli[n], taken.cpu_milli).checked_div(r.cpu_milli),
            free(self.free_memory_mib[n], taken.memory_mib).checked_div(r.memory_mib),
        ]
        .into_iter()
        .flatten()
        .fold(u64::from(self.free_pods[n]), u64::min)
    }

    /// Whether the nodes, open or not, have room for `count` pods asking
    /// `r` by these columns: every filter checks this much, so where they
    /// have not, no placement of that many such pods passes (whatever
    /// their tolerations, selectors, volumes or devices).
    pub(crate) fn room_for(&self, r: Resources, count: u32) -> bool {
        let mut room = 0u64;
        (0..self.free_gpus.len()).any(|n| {
            room += self.free_room(n, r, Resources::default());
            room >= u64::from(count)
        })
    }

    pub(super) fn set(
        &mut self,
        i: usize,
        alloc: Resources,
        free: Resources,
        free_pods: u32,
        open: bool,
    ) {
        if i == self.free_gpus.len() {
            self.open.push(open);
            self.free_pods.push(free_pods);
            self.alloc_cpu_milli.push(alloc.cpu_milli);
            self.alloc_memory_mib.push(alloc.memory_mib);
            self.alloc_gpus.push(alloc.gpus);
            self.free_cpu_milli.push(free.cpu_milli);
            self.free_memory_mib.push(free.memory_mib);
            self.free_gpus.push(free.gpus);
        } else {
            self.open[i] = open;
            self.free_pods[i] = free_pods;
            self.alloc_cpu_milli[i] = alloc.cpu_milli;
            self.alloc_memory_mib[i] = alloc.memory_mib;
            self.alloc_gpus[i] = alloc.gpus;
            self.free_cpu_milli[i] = free.cpu_milli;
            self.free_memory_mib[i] = free.memory_mib;
            self.free_gpus[i] = free.gpus;
        }
        self.log.note(i, self.free_gpus.len());
    }
}

/// What the pods on a node hold besides CPU, memory and GPUs.
#[derive(Debug, Clone, Default)]
pub(super) struct NodeUse {
    pub(super) extended: Scalars,
    pub(super) pods: u32,
    pub(super) ports: Vec<HostPort>,
}

/// Pods holding a node whose own terms weigh on where others go: kept so
/// that placing a pod looks at these few rather than at every pod.
#[derive(Debug, Clone, Default)]
pub(super) struct Affine {
    /// Required anti-affinity: every pod placed later is checked against
    /// them (InterPodAffinity's filter).
    pub(super) anti: BTreeSet<PodKey>,
    /// Required affinity or preferred terms: every pod placed later is
    /// weighed against them (InterPodAffinity's score).
    pub(super) weighing: BTreeSet<PodKey>,
}

impl Affine {
    pub(super) fn note(&mut self, pod: &Pod, holds: bool) {
        let c = &pod.constraints;
        for (set, applies) in [
            (&mut self.anti, !c.pod_anti_affinity.is_empty()),
            (&mut self.weighing, c.weighs_on_others()),
        ] {
            if !applies {
                continue;
            }
            if holds {
                set.insert(pod.key.clone());
            } else {
                set.remove(&pod.key);
            }
        }
    }
}

/// How many pods hold a node (or wait) at each priority: whether any
/// lower-priority pod could be preempted (or waits) is then one look-up.
pub(super) type Priorities = BTreeMap<i32, u32>;

/// One more pod at `priority` (`add`) or one fewer.
pub(super) fn count_priority(priorities: &mut Priorities, priority: i32, add: bool) {
    let count = priorities.entry(priority).or_default();
    if add {
        *count += 1;
    } else {
        *count = count.saturating_sub(1);
        if *count == 0 {
            priorities.remove(&priority);
        }
    }
}

/// Adds (or with `add == false` takes back) what `pod` holds on a node.
pub(super) fn account(
    used: &mut Resources,
    usage: &mut NodeUse,
    held: (&mut Affine, &mut Priorities),
    pod: &Pod,
    add: bool,
) {
    let (affine, priorities) = held;
    affine.note(pod, add);
    count_priority(priorities, pod.priority, add);
    if add {
        *used = used.plus(pod.request);
        usage.pods += 1;
        for (name, &n) in &pod.extended {
            let u = usage.extended.entry(name.clone()).or_default();
            *u = u.saturating_add(n);
        }
        usage
            .ports
            .extend(pod.constraints.host_ports.iter().cloned());
    } else {
        *used = used.minus(pod.request);
        usage.pods = usage.pods.saturating_sub(1);
        for (name, &n) in &pod.extended {
            if let Some(u) = usage.extended.get_mut(name) {
                *u = u.saturating_sub(n);
                if *u == 0 {
                    usage.extended.remove(name);
                }
            }
        }
        // One copy per port the pod asked for, so another pod's identical
        // port stays taken.
        for p in &pod.constraints.host_ports {
            if let Some(at) = usage.ports.iter().position(|q| q == p) {
                usage.ports.swap_remove(at);
            }
        }
    }
}
