//! A pod's effective requests and a node's allocatable amounts, over every
//! resource name, as kube-scheduler computes them
//! (`component-helpers/resource.PodRequests`).

use std::collections::BTreeMap;

use dragon_framework::{Demand, Resources, Scalars};
use k8s_openapi::api::core::v1 as core;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use crate::quantity;

/// Amounts by resource name: CPU in millicores, everything else in its
/// base unit (bytes, counts).
type Amounts = BTreeMap<String, u64>;

const CPU: &str = "cpu";
const MEMORY: &str = "memory";
const GPU: &str = "nvidia.com/gpu";
const PODS: &str = "pods";
const MIB: u64 = 1024 * 1024;

/// Resource names a pod-level `resources.requests` may set (the others
/// still come from the containers).
fn pod_level(name: &str) -> bool {
    name == CPU || name == MEMORY || name.starts_with("hugepages-")
}

/// A resource whose quantity cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{resource}: {source}")]
pub struct ResourceError {
    pub resource: String,
    pub source: quantity::QuantityError,
}

/// Parses a resource list, naming the resource in an error.
fn amounts(list: Option<&BTreeMap<String, Quantity>>) -> Result<Amounts, ResourceError> {
    let mut out = Amounts::new();
    for (name, q) in list.into_iter().flatten() {
        let v = if name == CPU {
            quantity::cpu_milli(&q.0)
        } else {
            quantity::value(&q.0)
        }
        .map_err(|source| ResourceError {
            resource: name.clone(),
            source,
        })?;
        out.insert(name.clone(), v);
    }
    Ok(out)
}

fn add(into: &mut Amounts, from: &Amounts) {
    for (k, v) in from {
        let e = into.entry(k.clone()).or_default();
        *e = e.saturating_add(*v);
    }
}

fn max(into: &mut Amounts, from: &Amounts) {
    for (k, v) in from {
        let e = into.entry(k.clone()).or_default();
        *e = (*e).max(*v);
    }
}

fn requests(c: &core::Container) -> Result<Amounts, ResourceError> {
    amounts(c.resources.as_ref().and_then(|r| r.requests.as_ref()))
}

/// The pod's effective requests: the containers' sum plus restartable init
/// containers (sidecars, which run alongside), or the largest need of an
/// init container (with the sidecars started before it) if larger; pod-level
/// requests replace the containers' for the names they set; then the
/// overhead.
///
/// # Errors
/// A quantity that does not parse, named.
pub fn effective(spec: &core::PodSpec) -> Result<(Resources, Scalars), ResourceError> {
    let mut total = Amounts::new();
    for c in &spec.containers {
        add(&mut total, &requests(c)?);
    }
    let mut sidecars = Amounts::new();
    let mut init_peak = Amounts::new();
    for c in spec.init_containers.iter().flatten() {
        let own = requests(c)?;
        let need = if c.restart_policy.as_deref() == Some("Always") {
            add(&mut total, &own);
            add(&mut sidecars, &own);
            sidecars.clone()
        } else {
            let mut need = own;
            add(&mut need, &sidecars);
            need
        };
        max(&mut init_peak, &need);
    }
    max(&mut total, &init_peak);
    let pod = amounts(spec.resources.as_ref().and_then(|r| r.requests.as_ref()))?;
    for (name, v) in pod {
        if pod_level(&name) {
            total.insert(name, v);
        }
    }
    add(&mut total, &amounts(spec.overhead.as_ref())?);
    Ok(demanded(total))
}

/// Amounts asked for, with memory rounded up to whole MiB (rounding a
/// demand down would undercount it).
fn demanded(mut total: Amounts) -> (Resources, Scalars) {
    let r = Resources {
        cpu_milli: total.remove(CPU).unwrap_or(0),
        memory_mib: total.remove(MEMORY).unwrap_or(0).div_ceil(MIB),
        gpus: total.remove(GPU).unwrap_or(0).min(u64::from(u32::MAX)) as u32,
    };
    // A zero request asks for nothing.
    total.retain(|_, v| *v > 0);
    (r, total)
}

/// A PodGroup's `minResources`. Its `pods` entry is dropped: Coscheduling
/// replaces it with `minMember`.
///
/// # Errors
/// A quantity that does not parse, named.
pub fn min_resources(list: &BTreeMap<String, Quantity>) -> Result<Demand, ResourceError> {
    let mut all = amounts(Some(list))?;
    all.remove(PODS);
    let (request, extended) = demanded(all);
    Ok(Demand { request, extended })
}

/// What a node offers: CPU, memory (rounded down to whole MiB: rounding
/// an allocatable amount up would overcommit) and GPUs, the pod count, and
/// every other resource.
///
/// # Errors
/// A quantity that does not parse, named.
pub fn allocatable(
    list: Option<&BTreeMap<String, Quantity>>,
) -> Result<(Resources, Option<u32>, Scalars), ResourceError> {
    let mut all = amounts(list)?;
    let r = Resources {
        cpu_milli: all.remove(CPU).unwrap_or(0),
        memory_mib: all.remove(MEMORY).unwrap_or(0) / MIB,
        gpus: all.remove(GPU).unwrap_or(0).min(u64::from(u32::MAX)) as u32,
    };
    let pods = all.remove(PODS).map(|n| n.min(u64::from(u32::MAX)) as u32);
    Ok((r, pods, all))
}
