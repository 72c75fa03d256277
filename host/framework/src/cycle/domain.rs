//! Placing a gang under its job's topology constraint: the domain first,
//! then the nodes in it, so a gang is never spread past the level it
//! asks for; and domains held for preemptors while their victims leave.
//!
//! The domains of a level are tried most allocated first among those
//! with room for every pod (counted on the free columns, for pods like the
//! first), as kube-scheduler scores a gang's placements (NodeResourcesFit's
//! MostAllocated over the placement's nodes, the gang's requests
//! included), so a small gang packs into a busy domain and leaves whole
//! ones for a wide gang; then the others, the most room first. Each
//! attempt filters only the domain's nodes, so trying every domain costs
//! about what one placement over the whole cluster does.
//!
//! A job with no constraint is still kept to one GPU type once it runs:
//! the workers added to it go only to nodes of the type its placed pods
//! hold (`nvidia.com/gpu.product`), on a cluster of several types.

use std::cmp::Reverse;
use std::collections::BTreeSet;

use super::*;
use crate::cluster::topology::{Domain, LevelsError};
use crate::model::{Resources, TopologyConstraint, TopologyMode};
use crate::names::PodKey;

/// A domain kept for a preemptor while its victims leave: units of no
/// higher priority are not placed in it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Held {
    pub(crate) domain: Domain,
    pub(crate) priority: i32,
}

/// Why a node is not offered to a unit: it is in a domain held for
/// another.
pub(super) const IN_HELD_DOMAIN: &str =
    "node(s) in a topology domain held for a preempting gang of higher or equal priority";

/// A job's placed pods span more than one domain of a level (or lie on
/// nodes without its label).
struct Scattered;

impl Scheduler {
    /// The topology constraint of `unit`'s job, if any.
    pub(super) fn constraint(&self, unit: &UnitPlan) -> Option<&TopologyConstraint> {
        let job = self.cluster.job(unit.job.as_deref()?)?;
        job.topology.as_ref()
    }

    /// The level `unit` must stay within, for a required constraint.
    pub(crate) fn required_level(&self, unit: &UnitPlan) -> Option<usize> {
        let c = self.constraint(unit)?;
        match c.mode {
            TopologyMode::Required => self.cluster.domains().level(&c.key),
            TopologyMode::Preferred => None,
        }
    }

    /// Why `unit` cannot be tried at all: its constraint names a key that
    /// is not tracked (past the bound on keys outside the levels).
    pub(super) fn unknown_level(&self, unit: &UnitPlan) -> Option<String> {
        let c = self.constraint(unit)?;
        let domains = self.cluster.domains();
        if domains.level(&c.key).is_some() {
            return None;
        }
        Some(format!(
            "{c}: {}",
            LevelsError::TooManyOtherKeys(c.key.clone())
        ))
    }

    /// Reserve a node for each pod of `unit` at `size` workers where its
    /// job's constraint allows (one domain of a required level; for a
    /// preferred one, the narrowest level from it up that holds the gang,
    /// else anywhere); on failure every reservation made here is undone.
    pub(crate) fn place(
        &mut self,
        now_ms: u64,
        policy: &dyn Hooks,
        unit: &UnitPlan,
        size: Option<u32>,
    ) -> Result<Vec<(PodKey, usize)>, PlaceError> {
        if let Some(domain) = unit.within {
            let nodes = self.domain_nodes(domain);
            return self.place_among(now_ms, policy, unit, size, Some(&nodes));
        }
        let Some(c) = self.constraint(unit).cloned() else {
            if let Some((gpu_type, nodes)) = self.job_gpu_type_nodes(unit) {
                return self
                    .place_among(now_ms, policy, unit, size, Some(&nodes))
                    .map_err(|e| match e {
                        PlaceError::Unschedulable(why) => PlaceError::Unschedulable(format!(
                            "{why} (workers added to a running job go to its GPU type, {gpu_type})"
                        )),
                        e => e,
                    });
            }
            return self.place_among(now_ms, policy, unit, size, None);
        };
        let Some(level) = self.cluster.domains().level(&c.key) else {
            let why = self.unknown_level(unit).unwrap_or_default();
            return Err(PlaceError::Unschedulable(why));
        };
        let levels: Vec<usize> = match c.mode {
            TopologyMode::Required => vec![level],
            // A configured level widens through the wider ones; another
            // key stands alone.
            TopologyMode::Preferred if self.cluster.domains().in_hierarchy(level) => {
                (0..=level).rev().collect()
            }
            TopologyMode::Preferred => vec![level],
        };
        let mut first = None;
        for l in levels {
            match self.place_in_one(now_ms, policy, unit, size, l) {
                Ok(placed) => return Ok(placed),
                Err(PlaceError::Unschedulable(why)) => {
                    first.get_or_insert(why);
                }
                Err(e) => return Err(e),
            }
        }
        match c.mode {
            TopologyMode::Required => Err(PlaceError::Unschedulable(first.unwrap_or_default())),
            TopologyMode::Preferred => self.place_among(now_ms, policy, unit, size, None),
        }
    }

    /// Where the rest of `unit` may go when its job's placed pods all hold
    /// nodes of one GPU type and other nodes carry another: that type's
    /// live nodes, ascending, with the type. A synchronous step waits for
    /// its slowest worker, so a worker of a slower type slows the whole
    /// job, and one of a faster type idles; a job stays on the type it
    /// started on. `None` on a cluster of one type or none, and for a job
    /// with nothing placed.
    fn job_gpu_type_nodes(&self, unit: &UnitPlan) -> Option<(String, Vec<u32>)> {
        let job = unit.job.as_deref()?;
        if self.cluster.job_placed(job) == 0 {
            return None;
        }
        let mut held = self.cluster.job_pods(job).filter_map(|(_, s)| s.node());
        // Cheap first: nodes without a type (most clusters) end it here.
        let gpu_type = self.cluster.node_gpu_type(held.next()?)?;
        if held.any(|n| self.cluster.node_gpu_type(n) != Some(gpu_type)) {
            return None;
        }
        let live = (0..self.cluster.nodes().len()).filter(|&n| self.cluster.is_live(n));
        let nodes: Vec<u32> = live
            .clone()
            .filter(|&n| self.cluster.node_gpu_type(n) == Some(gpu_type))
            .map(|n| n as u32)
            .collect();
        if nodes.len() == live.count() {
            return None;
        }
        Some((gpu_type.to_string(), nodes))
    }

    /// The live nodes of `domain`, ascending.
    pub(crate) fn domain_nodes(&self, domain: Domain) -> Vec<u32> {
        let domains = self.cluster.domains();
        (0..self.cluster.nodes().len())
            .filter(|&n| self.cluster.is_live(n) && domains.of(domain.level, n) == domain.id)
            .map(|n| n as u32)
            .collect()
    }

    /// The domain of `level` holding every placed pod of `job` (`None`
    /// when none is placed); `Err` when they are not all in one labelled
    /// domain.
    fn job_domain(&self, job: &str, level: usize) -> Result<Option<u32>, Scattered> {
        let domains = self.cluster.domains();
        let ids: BTreeSet<u32> = self
            .cluster
            .job_pods(job)
            .filter_map(|(_, s)| s.node())
            .map(|n| domains.of(level, n))
            .collect();
        match ids.len() {
            0 => Ok(None),
            1 if !ids.contains(&0) => Ok(ids.first().copied()),
            _ => Err(Scattered),
        }
    }

    /// [`Scheduler::job_domain`] of `unit`'s job, refused with the reason.
    pub(crate) fn sibling_domain(
        &self,
        unit: &UnitPlan,
        level: usize,
    ) -> Result<Option<u32>, PlaceError> {
        let Some(job) = unit.job.as_deref() else {
            return Ok(None);
        };
        self.job_domain(job, level).map_err(|Scattered| {
            PlaceError::Unschedulable(format!(
                "the placed pods of {} are not in one domain of topology level {}",
                unit.key,
                self.cluster.domains().key(level)
            ))
        })
    }

    /// Place `unit` inside one domain of `level`, trying them in the
    /// module's order.
    fn place_in_one(
        &mut self,
        now_ms: u64,
        policy: &dyn Hooks,
        unit: &UnitPlan,
        size: Option<u32>,
        level: usize,
    ) -> Result<Vec<(PodKey, usize)>, PlaceError> {
        let pinned = self.sibling_domain(unit, level)?;
        let live: Vec<u32> = (0..self.cluster.nodes().len())
            .filter(|&n| self.cluster.is_live(n))
            .map(|n| n as u32)
            .collect();
        let domains = self.cluster.domains();
        let key = domains.key(level).to_string();
        let (groups, unlabelled) = domains.group(level, &live);
        let need = placed_count(unit, size);
        let first = unit
            .pods
            .first()
            .and_then(|k| self.cluster.pod(k))
            .map(|(p, _)| p);
        let ask = self.unit_request(unit, size);
        let mut order: Vec<(u32, Vec<u32>, u64)> = groups
            .into_iter()
            .filter(|(id, _)| pinned.is_none_or(|p| p == *id))
            .map(|(id, nodes)| {
                let room = first.map_or(0, |p| room_for(&self.cluster, p, &nodes));
                (id, nodes, room)
            })
            .collect();
        // The most allocated among the domains with room for all, then the
        // most room.
        order.sort_by_cached_key(|(id, nodes, room)| {
            if *room >= need {
                (0, Reverse(allocated_with(&self.cluster, nodes, ask)), *id)
            } else {
                (1, Reverse(*room), *id)
            }
        });
        let largest = order
            .iter()
            .max_by_key(|(id, _, room)| (*room, Reverse(*id)))
            .map(|(id, _, room)| (domains.name(level, *id).to_string(), *room));
        let mut first_failure: Option<(u32, String)> = None;
        for (id, nodes, _) in &order {
            match self.place_among(now_ms, policy, unit, size, Some(nodes)) {
                Ok(placed) => return Ok(placed),
                Err(PlaceError::Unschedulable(why)) => {
                    first_failure.get_or_insert((*id, why));
                }
                Err(e) => return Err(e),
            }
        }
        let domains = self.cluster.domains();
        let mut why = format!(
            "no domain of topology level {key} holds all {need} pod(s) of {}",
            unit.key
        );
        if let Some(p) = pinned {
            why = format!(
                "{why}: its placed pods are in {key}={}, which does not",
                domains.name(level, p)
            );
        } else if let Some((name, room)) = largest {
            why = format!("{why}; the largest free is {key}={name}, with room for {room}");
        }
        if unlabelled > 0 {
            why = format!("{why}; {unlabelled} node(s) carry no {key} label");
        }
        if let Some((id, inner)) = first_failure {
            why = format!("{why} (in {key}={}: {inner})", domains.name(level, id));
        }
        Err(PlaceError::Unschedulable(why))
    }

    /// For a job held to one domain by a required constraint: that domain,
    /// and how it is shown. Its growth has only that domain's room.
    pub(crate) fn growth_domain(&self, job: &str) -> Option<(Domain, String)> {
        let c = self.cluster.job(job)?.topology.as_ref()?;
        if c.mode != TopologyMode::Required {
            return None;
        }
        let domains = self.cluster.domains();
        let level = domains.level(&c.key)?;
        let id = self.job_domain(job, level).ok()??;
        let domain = Domain { level, id };
        Some((domain, domains.show(domain)))
    }

    /// Whether node `n` is in a domain held for a preemptor other than
    /// `unit` whose priority is not below `unit`'s.
    pub(super) fn held_from(&self, unit: &UnitPlan, n: usize) -> bool {
        let domains = self.cluster.domains();
        self.held.iter().any(|(k, h)| {
            *k != unit.key
                && unit.wit.priority <= h.priority
                && domains.of(h.domain.level, n) == h.domain.id
        })
    }

    /// Keep the domain `unit`'s pods were nominated into for it while its
    /// victims leave; say which it is.
    pub(super) fn hold_domain(
        &mut self,
        unit: &UnitPlan,
        placed: &[(PodKey, usize)],
    ) -> Option<String> {
        let level = self.required_level(unit)?;
        let &(_, n) = placed.first()?;
        let domains = self.cluster.domains();
        let domain = Domain {
            level,
            id: domains.of(level, n),
        };
        let shown = domains.show(domain);
        self.held.insert(
            unit.key.clone(),
            Held {
                domain,
                priority: unit.wit.priority,
            },
        );
        Some(shown)
    }
}

impl Scheduler {
    /// What the pods of `unit` placed at `size` request together.
    fn unit_request(&self, unit: &UnitPlan, size: Option<u32>) -> Resources {
        unit.pods
            .iter()
            .zip(&unit.wit.tasks)
            .filter(|(_, t)| t.role != wit::Role::Worker || size.is_none_or(|s| t.index < s))
            .filter_map(|(key, _)| self.cluster.pod(key))
            .fold(Resources::default(), |sum, (pod, _)| sum.plus(pod.request))
    }
}

/// How allocated the live nodes of `nodes` would be with `ask` placed on
/// them: kube-scheduler's MostAllocated score of a placement, the share of
/// each resource requested, averaged over CPU, memory and (where the
/// domain has any) GPUs, in millionths.
pub(crate) fn allocated_with(cluster: &Cluster, nodes: &[u32], ask: Resources) -> u64 {
    let (alloc, used) = cluster.totals_among(nodes.iter().map(|&n| n as usize));
    let requested = used.plus(ask);
    let shares: Vec<u64> = [
        (requested.cpu_milli, alloc.cpu_milli),
        (requested.memory_mib, alloc.memory_mib),
        (u64::from(requested.gpus), u64::from(alloc.gpus)),
    ]
    .into_iter()
    .filter(|&(_, alloc)| alloc > 0)
    .map(|(requested, alloc)| {
        (u128::from(requested.min(alloc)) * 1_000_000 / u128::from(alloc)) as u64
    })
    .collect();
    shares.iter().sum::<u64>() / (shares.len().max(1) as u64)
}

/// How many of `unit`'s pods a placement at `size` places.
fn placed_count(unit: &UnitPlan, size: Option<u32>) -> u64 {
    unit.wit
        .tasks
        .iter()
        .filter(|t| t.role != wit::Role::Worker || size.is_none_or(|s| t.index < s))
        .count() as u64
}

/// How many pods with `pod`'s request the open nodes of `nodes` have room
/// for, on the free columns (a measure to order domains by, not a filter:
/// it does not see taints a pod tolerates, or claims).
pub(crate) fn room_for(cluster: &Cluster, pod: &Pod, nodes: &[u32]) -> u64 {
    let cols = cluster.columns();
    nodes
        .iter()
        .map(|&n| cols.room(n as usize, pod.request, Resources::default()))
        .fold(0u64, u64::saturating_add)
}
