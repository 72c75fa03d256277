//! The framework's built-in filters, as kube-scheduler v1.37 runs them and
//! in its order: NodeUnschedulable, TaintToleration, NodeAffinity (node
//! selector and required affinity), NodePorts, NodeResourcesFit (every
//! resource name and the node's pod count), VolumeBinding (the node
//! affinity of bound volumes), PodTopologySpread and InterPodAffinity. Rejections are counted in kube's wording.

use std::borrow::Cow;
use std::collections::BTreeMap;

use super::cluster::{Cluster, dra_class, served_by_devices};
use super::constraints::{
    PodCheckFailure, PodChecks, node_affinity_allows, tolerates_taints, volumes_reachable,
};
use super::devices::Fit;
use super::model::{Pod, Taint};
use super::volumes::{DISK_CONFLICT, IN_USE_ONCE, TOO_MANY_VOLUMES};
use dragon_runtime::wit;

/// Why nodes were filtered out, counted per reason (kube's wording).
#[derive(Debug, Default)]
pub(crate) struct Rejections {
    counts: BTreeMap<Cow<'static, str>, usize>,
}

impl Rejections {
    pub(crate) fn add(&mut self, reason: impl Into<Cow<'static, str>>, n: usize) {
        if n > 0 {
            *self.counts.entry(reason.into()).or_default() += n;
        }
    }

    /// `0/8 nodes are available: 3 Insufficient nvidia.com/gpu, ...`
    pub(crate) fn message(&self, live_nodes: usize) -> String {
        let parts: Vec<String> = self
            .counts
            .iter()
            .map(|(r, n)| format!("{n} {r}"))
            .collect();
        format!("0/{live_nodes} nodes are available: {}", parts.join(", "))
    }
}

/// The built-in filters' fixed reasons, in kube's wording, indexed by
/// [`Reason`].
const REASONS: [&str; 14] = [
    "node(s) were unschedulable",
    "node(s) had untolerated taint(s)",
    "node(s) didn't match Pod's node affinity/selector",
    "node(s) didn't have free ports for the requested pod ports",
    "Too many pods",
    "Insufficient cpu",
    "Insufficient memory",
    "Insufficient nvidia.com/gpu",
    "node(s) didn't match PersistentVolume's node affinity",
    "node(s) didn't match pod topology spread constraints (missing required label)",
    "node(s) didn't match pod topology spread constraints",
    "node(s) didn't match pod affinity rules",
    "node(s) didn't match pod anti-affinity rules",
    "node(s) didn't satisfy existing pods anti-affinity rules",
];

#[derive(Clone, Copy)]
enum Reason {
    Unschedulable,
    Taint,
    Selector,
    Ports,
    TooManyPods,
    Cpu,
    Memory,
    Gpu,
    Volume,
    SpreadMissingLabel,
    Spread,
    Affinity,
    AntiAffinity,
    ExistingAntiAffinity,
}

impl From<PodCheckFailure> for Reason {
    fn from(f: PodCheckFailure) -> Reason {
        match f {
            PodCheckFailure::SpreadMissingLabel => Reason::SpreadMissingLabel,
            PodCheckFailure::Spread => Reason::Spread,
            PodCheckFailure::Affinity => Reason::Affinity,
            PodCheckFailure::AntiAffinity => Reason::AntiAffinity,
            PodCheckFailure::ExistingAntiAffinity => Reason::ExistingAntiAffinity,
        }
    }
}

/// The filters before the resource fit, for node `i`: `Err(None)` if the
/// node is gone. Out of line: most nodes skip it (see `Columns::open`).
#[inline(never)]
fn static_filters(cluster: &Cluster, pod: &Pod, i: usize) -> Result<(), Option<Reason>> {
    if !cluster.is_live(i) {
        return Err(None);
    }
    let node = &cluster.nodes()[i];
    if node.unschedulable
        && !pod
            .tolerations
            .iter()
            .any(|t| t.tolerates(&Taint::cordon()))
    {
        Err(Some(Reason::Unschedulable))
    } else if !tolerates_taints(pod, node) {
        Err(Some(Reason::Taint))
    } else if !node_affinity_allows(pod, &node.name, &node.labels) {
        Err(Some(Reason::Selector))
    } else if pod.constraints.host_ports.iter().any(|want| {
        cluster
            .ports_in_use(i)
            .iter()
            .any(|used| used.conflicts(want))
    }) {
        Err(Some(Reason::Ports))
    } else {
        Ok(())
    }
}

/// Counts every shortfall of a node that does not fit, as kube reports
/// them. Out of line: off the path of a node that fits.
#[inline(never)]
fn count_shortfalls(
    counts: &mut [usize; REASONS.len()],
    free_pods: u32,
    r: super::model::Resources,
    (cpu, memory, gpus): (u64, u64, u32),
) {
    for (short_of, reason) in [
        (free_pods == 0, Reason::TooManyPods),
        (r.cpu_milli > cpu, Reason::Cpu),
        (r.memory_mib > memory, Reason::Memory),
        (r.gpus > gpus, Reason::Gpu),
    ] {
        if short_of {
            counts[reason as usize] += 1;
        }
    }
}

/// Whether node `i` has room for every other resource `pod` requests,
/// counting each one it lacks.
fn extended_fits<'p>(
    cluster: &Cluster,
    pod: &'p Pod,
    i: usize,
    short: &mut BTreeMap<&'p str, usize>,
) -> bool {
    let mut fits = true;
    let node = &cluster.nodes()[i];
    for (name, &want) in &pod.extended {
        // What the node does not advertise, a DeviceClass may serve.
        if want > 0
            && want > cluster.free_extended(i, name)
            && dra_class(&cluster.devices, node, name, want).is_none()
        {
            *short.entry(name.as_str()).or_default() += 1;
            fits = false;
        }
    }
    fits
}

/// Every built-in filter for `pod` on node `i`, counting the reason it
/// fails.
fn passes<'p>(
    cluster: &Cluster,
    pod: &'p Pod,
    i: usize,
    checks: Option<&PodChecks<'_>>,
    counts: &mut [usize; REASONS.len()],
    (short, device_reasons): (
        &mut BTreeMap<&'p str, usize>,
        &mut BTreeMap<Cow<'static, str>, usize>,
    ),
) -> bool {
    match static_filters(cluster, pod, i) {
        Ok(()) => {}
        Err(None) => return false,
        Err(Some(reason)) => {
            counts[reason as usize] += 1;
            return false;
        }
    }
    let cols = cluster.columns();
    let r = pod.request;
    let (cpu, memory, gpus, pods) = (
        cols.free_cpu_milli[i],
        cols.free_memory_mib[i],
        cols.free_gpus[i],
        cols.free_pods[i],
    );
    let mut fits = pods > 0 && r.gpus <= gpus && r.cpu_milli <= cpu && r.memory_mib <= memory;
    if !fits {
        count_shortfalls(counts, pods, r, (cpu, memory, gpus));
    }
    if !pod.extended.is_empty() {
        fits &= extended_fits(cluster, pod, i, short);
    }
    if !fits {
        return false;
    }
    let node = &cluster.nodes()[i];
    if !volumes_reachable(pod, &node.name, &node.labels) {
        counts[Reason::Volume as usize] += 1;
        return false;
    }
    if let Some(checks) = checks
        && let Err(f) = checks.check(&cluster.nodes()[i].labels)
    {
        counts[Reason::from(f) as usize] += 1;
        return false;
    }
    // GPUs come from devices only where the inventory has some.
    let devices = !pod.claims.is_empty()
        || !pod.extended.is_empty()
        || (pod.request.gpus > 0 && cluster.devices.has_gpus());
    if devices && !devices_fit(cluster, pod, i, device_reasons) {
        return false;
    }
    pod.volumes.is_empty() || volumes_fit(cluster, pod, i, device_reasons)
}

/// VolumeRestrictions', VolumeBinding's and NodeVolumeLimits' filters
/// beyond bound volumes' node affinity: no other placed pod uses its
/// `ReadWriteOncePod` claims, each unbound claim finds a volume on node `i`
/// or may be provisioned there, and the node's CSI drivers may attach its
/// volumes.
#[inline(never)]
fn volumes_fit(
    cluster: &Cluster,
    pod: &Pod,
    i: usize,
    reasons: &mut BTreeMap<Cow<'static, str>, usize>,
) -> bool {
    let volumes = &cluster.volumes;
    let node = &cluster.nodes()[i];
    let reason: Cow<'static, str> = if volumes.disk_conflict(i, &pod.volumes.disks) {
        DISK_CONFLICT.into()
    } else if volumes.in_use_once(&pod.key, &pod.volumes.claims) {
        IN_USE_ONCE.into()
    } else {
        match volumes.fit(node, &pod.volumes.unbound) {
            Ok(Ok(_)) if volumes.within_limits(&node.name, i, &pod.volumes) => return true,
            Ok(Ok(_)) => TOO_MANY_VOLUMES.into(),
            Ok(Err(why)) => why.into(),
            Err(e) => e.to_string().into(),
        }
    };
    *reasons.entry(reason).or_default() += 1;
    false
}

/// DynamicResources' filter: whether every claim of `pod`, and the
/// extended resources it asks that devices must serve, can be met on node
/// `i`, counting why not. Out of line: most pods claim nothing.
#[inline(never)]
fn devices_fit(
    cluster: &Cluster,
    pod: &Pod,
    i: usize,
    reasons: &mut BTreeMap<Cow<'static, str>, usize>,
) -> bool {
    let node = &cluster.nodes()[i];
    let served = served_by_devices(&cluster.devices, node, pod);
    if pod.claims.is_empty() && served.is_empty() {
        return true;
    }
    let reason: Cow<'static, str> = match cluster.devices.fits(node, &pod.claims, &served) {
        Ok(Fit::Yes(..)) => return true,
        Ok(Fit::No(why)) => why.into(),
        Err(e) => e.to_string().into(),
    };
    *reasons.entry(reason).or_default() += 1;
    false
}

/// Node indices that pass every built-in filter for `pod`.
#[cfg(test)]
pub(crate) fn feasible(cluster: &Cluster, pod: &Pod, rejections: &mut Rejections) -> Vec<u32> {
    feasible_among(
        cluster,
        pod,
        0..cluster.nodes().len(),
        usize::MAX,
        rejections,
    )
}

/// Whether any node passes every built-in filter for `pod`.
pub(crate) fn any_feasible(cluster: &Cluster, pod: &Pod) -> bool {
    let all = 0..cluster.nodes().len();
    !feasible_among(cluster, pod, all, 1, &mut Rejections::default()).is_empty()
}

/// Of `nodes`, in the order given, the first `limit` that pass every
/// built-in filter for `pod`; rejections are counted for the nodes visited
/// (every node when fewer than `limit` pass, as kube-scheduler counts).
pub(crate) fn feasible_among(
    cluster: &Cluster,
    pod: &Pod,
    nodes: impl Iterator<Item = usize>,
    limit: usize,
    rejections: &mut Rejections,
) -> Vec<u32> {
    // Counted in an array and handed over once: this runs per pod over
    // every node, and on a full cluster nearly every node is rejected.
    let mut counts = [0usize; REASONS.len()];
    let mut short: BTreeMap<&str, usize> = BTreeMap::new();
    let mut device_reasons = BTreeMap::new();
    let r = pod.request;
    let cols = cluster.columns();
    let n = cluster.nodes().len();
    let (open, cpu, memory, gpus, pods) = (
        &cols.open[..n],
        &cols.free_cpu_milli[..n],
        &cols.free_memory_mib[..n],
        &cols.free_gpus[..n],
        &cols.free_pods[..n],
    );
    // Pre-filter: counts of the pods its affinity and spread look at.
    let checks = PodChecks::new(cluster, pod);
    // An open node passes every filter but the fit for a pod with no
    // selector, affinity, ports or other resources: the common case,
    // decided on the columns alone.
    let plain = pod.node_selector.is_empty()
        && pod.constraints.node_affinity.is_none()
        && pod.constraints.host_ports.is_empty()
        && pod.constraints.volume_node_affinity.is_empty()
        && pod.claims.is_empty()
        && pod.volumes.is_empty()
        && (r.gpus == 0 || !cluster.devices.has_gpus());
    let extended = !pod.extended.is_empty();
    let mut out = Vec::with_capacity(nodes.size_hint().0.min(limit));
    if plain && !extended && checks.is_none() {
        // The common case in a loop of its own: an open node needs only the
        // four column compares.
        for i in nodes {
            if open[i] {
                if pods[i] > 0
                    && r.gpus <= gpus[i]
                    && r.cpu_milli <= cpu[i]
                    && r.memory_mib <= memory[i]
                {
                    out.push(i as u32);
                    if out.len() >= limit {
                        break;
                    }
                } else {
                    count_shortfalls(&mut counts, pods[i], r, (cpu[i], memory[i], gpus[i]));
                }
            } else if passes(
                cluster,
                pod,
                i,
                None,
                &mut counts,
                (&mut short, &mut device_reasons),
            ) {
                // Closed to most pods, but not to this one (it tolerates
                // the node's taints).
                out.push(i as u32);
                if out.len() >= limit {
                    break;
                }
            }
        }
    } else {
        for i in nodes {
            if passes(
                cluster,
                pod,
                i,
                checks.as_ref(),
                &mut counts,
                (&mut short, &mut device_reasons),
            ) {
                out.push(i as u32);
                if out.len() >= limit {
                    break;
                }
            }
        }
    }
    for (reason, n) in REASONS.iter().zip(counts) {
        rejections.add(*reason, n);
    }
    for (name, n) in short {
        rejections.add(format!("Insufficient {name}"), n);
    }
    for (reason, n) in device_reasons {
        rejections.add(reason, n);
    }
    out
}

/// Candidate columns for the policy's `filter` and `score`, written into
/// `out`'s buffers. This runs once per pod over up to every node: fresh
/// columns each time cost more in page faults (the allocator hands the
/// memory back and takes it again) than the copying itself.
pub(crate) fn fill_candidates(
    cluster: &Cluster,
    index: &[u32],
    siblings: &[u32],
    out: &mut wit::Candidates,
) {
    let all = index.len() == cluster.nodes().len();
    // `index` is ascending without repeats, so as long as the node list it
    // is every node, in order: a plain copy.
    fn refill<T: Copy>(column: &mut Vec<T>, from: &[T], index: &[u32], all: bool) {
        column.clear();
        if all {
            column.extend_from_slice(from);
        } else {
            column.extend(index.iter().map(|&i| from[i as usize]));
        }
    }
    let cols = cluster.columns();
    let c = &mut out.capacity;
    refill(&mut c.alloc_cpu_milli, &cols.alloc_cpu_milli, index, all);
    refill(&mut c.alloc_memory_mib, &cols.alloc_memory_mib, index, all);
    refill(&mut c.alloc_gpus, &cols.alloc_gpus, index, all);
    refill(&mut c.free_cpu_milli, &cols.free_cpu_milli, index, all);
    refill(&mut c.free_memory_mib, &cols.free_memory_mib, index, all);
    refill(&mut c.free_gpus, &cols.free_gpus, index, all);
    refill(&mut out.siblings, siblings, index, all);
    out.index.clear();
    out.index.extend_from_slice(index);
}

/// Empty candidate columns, for [`fill_candidates`] to fill.
pub(crate) fn no_candidates() -> wit::Candidates {
    wit::Candidates {
        index: Vec::new(),
        capacity: wit::Capacity {
            alloc_cpu_milli: Vec::new(),
            alloc_memory_mib: Vec::new(),
            alloc_gpus: Vec::new(),
            free_cpu_milli: Vec::new(),
            free_memory_mib: Vec::new(),
            free_gpus: Vec::new(),
        },
        siblings: Vec::new(),
    }
}

#[cfg(test)]
mod tests;
