//! The framework's built-in filters, as kube-scheduler v1.37 runs them and
//! in its order: NodeUnschedulable, TaintToleration, NodeAffinity (node
//! selector and required affinity), NodePorts, NodeResourcesFit (every
//! resource name and the node's pod count), VolumeBinding (the node
//! affinity of bound volumes), PodTopologySpread and InterPodAffinity. Rejections are counted in kube's wording.

use std::borrow::Cow;
use std::collections::BTreeMap;

use super::cluster::{Cluster, served_by_devices};
use super::constraints::{
    PodCheckFailure, PodChecks, node_affinity_allows, tolerates_taints, volumes_reachable,
};
use super::devices::Fit;
use super::model::{Pod, Taint};
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
    for (name, &want) in &pod.extended {
        if want > 0 && want > cluster.free_extended(i, name) {
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
    let gpus = served_by_devices(&cluster.devices, node, pod);
    if !pod.claims.is_empty() || gpus > 0 {
        return devices_fit(cluster, pod, (i, gpus), device_reasons);
    }
    true
}

/// DynamicResources' filter: whether every claim of `pod`, and the `gpus`
/// it asks that devices must serve, can be met on node `i`, counting why
/// not. Out of line: most pods claim nothing.
#[inline(never)]
fn devices_fit(
    cluster: &Cluster,
    pod: &Pod,
    (i, gpus): (usize, u32),
    reasons: &mut BTreeMap<Cow<'static, str>, usize>,
) -> bool {
    let node = &cluster.nodes()[i];
    let reason: Cow<'static, str> = match cluster.devices.fits(node, &pod.claims, gpus) {
        Ok(Fit::Yes(..)) => return true,
        Ok(Fit::No(why)) => why.into(),
        Err(e) => e.to_string().into(),
    };
    *reasons.entry(reason).or_default() += 1;
    false
}

/// Node indices that pass every built-in filter for `pod`.
pub(crate) fn feasible(cluster: &Cluster, pod: &Pod, rejections: &mut Rejections) -> Vec<u32> {
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
        && (r.gpus == 0 || !cluster.devices.has_gpus());
    let extended = !pod.extended.is_empty();
    let mut out = Vec::with_capacity(n);
    if plain && !extended && checks.is_none() {
        // The common case in a loop of its own: an open node needs only the
        // four column compares.
        for i in 0..n {
            if open[i] {
                if pods[i] > 0
                    && r.gpus <= gpus[i]
                    && r.cpu_milli <= cpu[i]
                    && r.memory_mib <= memory[i]
                {
                    out.push(i as u32);
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
            }
        }
    } else {
        for i in 0..n {
            if passes(
                cluster,
                pod,
                i,
                checks.as_ref(),
                &mut counts,
                (&mut short, &mut device_reasons),
            ) {
                out.push(i as u32);
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
mod tests {
    //! Cases ported from kube-scheduler v1.37's plugin tests
    //! (`nodeports/node_ports_test.go`, `noderesources/fit_test.go`,
    //! `interpodaffinity/filtering_test.go`,
    //! `podtopologyspread/filtering_test.go`), run through [`feasible`].

    use super::*;
    use crate::constraints::{HostPort, SpreadConstraint};
    use crate::fixtures::*;
    use crate::model::{Node, Resources, Scalars};
    use crate::selector::{Operator, Requirement};
    use crate::{NodeSelector, NodeSelectorTerm, PodState};

    /// Names of the nodes `p` may go to, and the rejection message.
    fn run(c: &mut Cluster, p: Pod) -> (Vec<String>, String) {
        let key = p.key.clone();
        c.add_pod(p, None).unwrap();
        let mut rej = Rejections::default();
        let (pod, _) = c.pod(&key).unwrap();
        let ok = feasible(c, pod, &mut rej);
        let live = c.nodes().len();
        let names = ok
            .iter()
            .map(|&i| c.nodes()[i as usize].name.clone())
            .collect();
        c.remove_pod(&key).unwrap();
        (names, rej.message(live))
    }

    #[test]
    fn host_ports_conflict_on_protocol_port_and_overlapping_address() {
        let cases = [
            (
                "other protocol",
                ("UDP", "127.0.0.1", 8080),
                ("TCP", "127.0.0.1", 8080),
                true,
            ),
            (
                "same address",
                ("UDP", "127.0.0.1", 8080),
                ("UDP", "127.0.0.1", 8080),
                false,
            ),
            (
                "other address",
                ("TCP", "127.0.0.1", 8001),
                ("TCP", "127.0.0.2", 8001),
                true,
            ),
            (
                "all addresses used",
                ("TCP", "127.0.0.1", 8001),
                ("TCP", "0.0.0.0", 8001),
                false,
            ),
            (
                "all addresses wanted",
                ("TCP", "0.0.0.0", 8001),
                ("TCP", "127.0.0.1", 8001),
                false,
            ),
            (
                "defaults are TCP on all",
                ("", "", 8001),
                ("TCP", "10.0.0.1", 8001),
                false,
            ),
            ("other port", ("TCP", "", 8001), ("TCP", "", 8002), true),
        ];
        for (name, want, used, fits) in cases {
            let mut c = cluster(&[("n1", &[])]);
            let holder = with(pod("d/holder", &[]), |k| {
                k.host_ports = vec![HostPort::new(used.0, used.1, used.2)]
            });
            place(&mut c, holder, "n1");
            let p = with(pod("d/p", &[]), |k| {
                k.host_ports = vec![HostPort::new(want.0, want.1, want.2)]
            });
            let (ok, msg) = run(&mut c, p);
            assert_eq!(ok.len() == 1, fits, "{name}: {msg}");
            if !fits {
                assert!(
                    msg.contains("1 node(s) didn't have free ports for the requested pod ports"),
                    "{name}: {msg}"
                );
            }
        }
        // A port is free again once the pod holding it leaves.
        let mut c = cluster(&[("n1", &[])]);
        let port = || vec![HostPort::new("TCP", "", 9000)];
        place(
            &mut c,
            with(pod("d/a", &[]), |k| k.host_ports = port()),
            "n1",
        );
        c.remove_pod("d/a").unwrap();
        let (ok, _) = run(&mut c, with(pod("d/b", &[]), |k| k.host_ports = port()));
        assert_eq!(ok, ["n1"]);
    }

    #[test]
    fn every_resource_name_and_the_pod_count_must_fit() {
        let mut c = Cluster::new();
        let mut n1 = Node::new("n1", big());
        n1.extended = [
            ("rdma/hca".to_string(), 2),
            ("ephemeral-storage".to_string(), 10 << 30),
        ]
        .into();
        n1.max_pods = Some(2);
        c.add_node(n1).unwrap();
        c.add_node(Node::new("n2", big())).unwrap();
        let hca = |n| Scalars::from([("rdma/hca".to_string(), n)]);
        let mut a = pod("d/a", &[]);
        a.extended = hca(1);
        place(&mut c, a, "n1");
        // One HCA left on n1, none on n2 (a node without the resource).
        let mut p = pod("d/p", &[]);
        p.extended = hca(2);
        let (ok, msg) = run(&mut c, p);
        assert!(ok.is_empty());
        assert!(msg.ends_with("2 Insufficient rdma/hca"), "{msg}");
        let mut p = pod("d/p", &[]);
        p.extended = hca(1);
        assert_eq!(run(&mut c, p).0, ["n1"]);
        // n1 takes two pods: with a second one there, a third is refused.
        place(&mut c, pod("d/b", &[]), "n1");
        let (ok, msg) = run(&mut c, pod("d/p", &[]));
        assert_eq!(ok, ["n2"]);
        assert!(msg.contains("1 Too many pods"), "{msg}");
        // A zero request for a resource the node lacks is no request.
        let mut p = pod("d/p", &[]);
        p.extended = Scalars::from([("example.com/foo".to_string(), 0)]);
        assert_eq!(run(&mut c, p).0, ["n2"]);
        // Every shortfall of a node is counted, as kube reports them.
        let mut p = Pod::new(
            "d/p",
            Resources {
                cpu_milli: 100_000,
                memory_mib: 1_000_000,
                gpus: 0,
            },
        );
        p.extended = Scalars::from([("ephemeral-storage".to_string(), 20 << 30)]);
        let (_, msg) = run(&mut c, p);
        assert_eq!(
            msg,
            "0/2 nodes are available: 2 Insufficient cpu, 2 Insufficient ephemeral-storage, \
             2 Insufficient memory, 1 Too many pods"
        );
    }

    #[test]
    fn a_tainted_node_takes_only_pods_that_tolerate_its_taint() {
        use crate::{Taint, TaintEffect, Toleration, TolerationOperator};
        let mut c = cluster(&[("n1", &[]), ("n2", &[])]);
        let mut n2 = c.nodes()[1].clone();
        n2.taints = vec![Taint {
            key: "gpu".into(),
            value: "a100".into(),
            effect: TaintEffect::NoSchedule,
        }];
        c.update_node(n2).unwrap();
        let (ok, msg) = run(&mut c, pod("d/p", &[]));
        assert_eq!(ok, ["n1"]);
        assert!(msg.contains("1 node(s) had untolerated taint(s)"), "{msg}");
        let mut p = pod("d/p", &[]);
        p.tolerations = vec![Toleration {
            key: "gpu".into(),
            operator: TolerationOperator::Exists,
            ..Toleration::default()
        }];
        assert_eq!(run(&mut c, p).0, ["n1", "n2"]);
    }

    #[test]
    fn a_cordoned_node_takes_only_pods_that_tolerate_the_cordon_taint() {
        // `nodeunschedulable/node_unschedulable_test.go`.
        use crate::{TaintEffect, Toleration};
        let mut c = cluster(&[("n1", &[]), ("n2", &[])]);
        let mut n2 = c.nodes()[1].clone();
        n2.unschedulable = true;
        c.update_node(n2).unwrap();
        let (ok, msg) = run(&mut c, pod("d/p", &[]));
        assert_eq!(ok, ["n1"]);
        assert!(msg.contains("1 node(s) were unschedulable"), "{msg}");
        let mut p = pod("d/p", &[]);
        p.tolerations = vec![Toleration {
            key: "node.kubernetes.io/unschedulable".into(),
            effect: Some(TaintEffect::NoSchedule),
            ..Toleration::default()
        }];
        assert_eq!(run(&mut c, p).0, ["n1", "n2"]);
        // Tolerating another effect is not tolerating the cordon.
        let mut p = pod("d/p", &[]);
        p.tolerations = vec![Toleration {
            key: "node.kubernetes.io/unschedulable".into(),
            effect: Some(TaintEffect::NoExecute),
            ..Toleration::default()
        }];
        assert_eq!(run(&mut c, p).0, ["n1"]);
    }

    #[test]
    fn required_node_affinity_is_anded_with_the_node_selector() {
        let mut c = cluster(&[
            ("n1", &[("gpu", "a100"), ("zone", "z1")]),
            ("n2", &[("gpu", "v100"), ("zone", "z1")]),
            ("n3", &[("gpu", "a100"), ("zone", "z2")]),
        ]);
        let mut p = with(pod("d/p", &[]), |k| {
            k.node_affinity = Some(NodeSelector {
                terms: vec![NodeSelectorTerm {
                    match_expressions: vec![Requirement {
                        key: "gpu".into(),
                        operator: Operator::In,
                        values: vec!["a100".into()],
                    }],
                    match_fields: vec![],
                }],
            })
        });
        assert_eq!(run(&mut c, p.clone()).0, ["n1", "n3"]);
        p.node_selector = labels(&[("zone", "z2")]);
        let (ok, msg) = run(&mut c, p);
        assert_eq!(ok, ["n3"]);
        assert!(
            msg.contains("2 node(s) didn't match Pod's node affinity/selector"),
            "{msg}"
        );
    }

    #[test]
    fn a_pod_goes_only_where_its_bound_volumes_can_be_reached() {
        let mut c = cluster(&[("n1", &[(ZONE, "z1")]), ("n2", &[(ZONE, "z2")])]);
        let in_zone = |z: &str| NodeSelector {
            terms: vec![NodeSelectorTerm {
                match_expressions: vec![Requirement {
                    key: ZONE.into(),
                    operator: Operator::In,
                    values: vec![z.into()],
                }],
                match_fields: vec![],
            }],
        };
        let p = with(pod("d/p", &[]), |k| {
            k.volume_node_affinity = vec![in_zone("z2")]
        });
        let (ok, msg) = run(&mut c, p);
        assert_eq!(ok, ["n2"]);
        assert!(
            msg.contains("1 node(s) didn't match PersistentVolume's node affinity"),
            "{msg}"
        );
        // Two volumes in different zones: nowhere.
        let p = with(pod("d/p", &[]), |k| {
            k.volume_node_affinity = vec![in_zone("z1"), in_zone("z2")]
        });
        assert!(run(&mut c, p).0.is_empty());
    }

    #[test]
    fn pod_affinity_needs_a_matching_pod_in_the_domain() {
        let nodes: &[(&str, &[(&str, &str)])] = &[
            ("n1", &[(HOST, "n1"), (ZONE, "z1")]),
            ("n2", &[(HOST, "n2"), (ZONE, "z1")]),
            ("n3", &[(HOST, "n3"), (ZONE, "z2")]),
        ];
        let mut c = cluster(nodes);
        place(
            &mut c,
            pod("default/db", &[("service", "securityscan")]),
            "n1",
        );
        let p = with(pod("default/p", &[]), |k| {
            k.pod_affinity = vec![term(&[("service", "securityscan")], ZONE)]
        });
        let (ok, msg) = run(&mut c, p.clone());
        assert_eq!(ok, ["n1", "n2"]);
        assert!(
            msg.contains("1 node(s) didn't match pod affinity rules"),
            "{msg}"
        );
        // A pod in another namespace does not count for a term scoped to
        // the pod's own.
        let mut c = cluster(nodes);
        let mut other = pod("other/db", &[("service", "securityscan")]);
        other.namespace = "other".into();
        place(&mut c, other, "n1");
        // No match anywhere, and `p` does not match its own term: nowhere.
        assert!(run(&mut c, p).0.is_empty());
        // The first of pods with affinity to each other goes anywhere with
        // the topology label.
        let mut c = cluster(&[("n1", &[(ZONE, "z1")]), ("n2", &[])]);
        let first = with(pod("default/w0", &[("job", "train")]), |k| {
            k.pod_affinity = vec![term(&[("job", "train")], ZONE)]
        });
        let (ok, msg) = run(&mut c, first);
        assert_eq!(ok, ["n1"]);
        assert!(
            msg.contains("1 node(s) didn't match pod affinity rules"),
            "{msg}"
        );
    }

    #[test]
    fn anti_affinity_holds_both_ways() {
        let nodes: &[(&str, &[(&str, &str)])] = &[
            ("n1", &[(HOST, "n1"), (ZONE, "z1")]),
            ("n2", &[(HOST, "n2"), (ZONE, "z1")]),
            ("n3", &[(HOST, "n3"), (ZONE, "z2")]),
        ];
        // The incoming pod's anti-affinity: away from the zone of a match.
        let mut c = cluster(nodes);
        place(&mut c, pod("default/a", &[("app", "web")]), "n1");
        let p = with(pod("default/p", &[]), |k| {
            k.pod_anti_affinity = vec![term(&[("app", "web")], ZONE)]
        });
        let (ok, msg) = run(&mut c, p);
        assert_eq!(ok, ["n3"]);
        assert!(
            msg.contains("2 node(s) didn't match pod anti-affinity rules"),
            "{msg}"
        );
        // A placed pod's anti-affinity keeps matching pods off its host.
        let mut c = cluster(nodes);
        let guard = with(pod("default/g", &[]), |k| {
            k.pod_anti_affinity = vec![term(&[("app", "web")], HOST)]
        });
        place(&mut c, guard, "n2");
        let (ok, msg) = run(&mut c, pod("default/p", &[("app", "web")]));
        assert_eq!(ok, ["n1", "n3"]);
        assert!(
            msg.contains("1 node(s) didn't satisfy existing pods anti-affinity rules"),
            "{msg}"
        );
        // ... but not pods it does not select.
        assert_eq!(run(&mut c, pod("default/q", &[("app", "db")])).0.len(), 3);
        // Once it leaves, nothing is held against the node.
        c.remove_pod("default/g").unwrap();
        assert_eq!(run(&mut c, pod("default/p", &[("app", "web")])).0.len(), 3);
    }

    #[test]
    fn reserved_gang_members_count_for_anti_affinity() {
        let mut c = cluster(&[
            ("n1", &[(HOST, "n1")]),
            ("n2", &[(HOST, "n2")]),
            ("n3", &[(HOST, "n3")]),
        ]);
        let member = |i: u32| {
            with(pod(&format!("default/w{i}"), &[("job", "train")]), |k| {
                k.pod_anti_affinity = vec![term(&[("job", "train")], HOST)]
            })
        };
        for i in 0..3 {
            c.add_pod(member(i), None).unwrap();
        }
        c.set_state("default/w0", PodState::Reserved(0));
        c.set_state("default/w1", PodState::Reserved(2));
        let (pod, _) = c.pod("default/w2").unwrap();
        let ok = feasible(&c, pod, &mut Rejections::default());
        assert_eq!(ok, [1]);
        // Released reservations release their domains.
        c.set_state("default/w0", PodState::Pending);
        c.set_state("default/w1", PodState::Pending);
        let (pod, _) = c.pod("default/w2").unwrap();
        assert_eq!(feasible(&c, pod, &mut Rejections::default()), [0, 1, 2]);
    }

    fn spread(max_skew: u32, key: &str, l: &[(&str, &str)]) -> SpreadConstraint {
        SpreadConstraint {
            max_skew,
            topology_key: key.into(),
            selector: selector(l),
            min_domains: None,
            honor_node_affinity: true,
            honor_taints: false,
        }
    }

    #[test]
    fn topology_spread_bounds_the_skew_between_domains() {
        let nodes: &[(&str, &[(&str, &str)])] = &[
            ("node-a", &[(ZONE, "zone1"), (HOST, "node-a")]),
            ("node-b", &[(ZONE, "zone1"), (HOST, "node-b")]),
            ("node-x", &[(ZONE, "zone2"), (HOST, "node-x")]),
            ("node-y", &[(ZONE, "zone2"), (HOST, "node-y")]),
        ];
        let foo = &[("foo", "")];
        // "pods spread across zones as 3/3, all nodes fit"
        let mut c = cluster(nodes);
        for (i, n) in ["node-a", "node-a", "node-b", "node-x", "node-x", "node-y"]
            .iter()
            .enumerate()
        {
            place(&mut c, pod(&format!("default/p{i}"), foo), n);
        }
        let p = with(pod("default/p", foo), |k| {
            k.spread = vec![spread(1, ZONE, foo)]
        });
        assert_eq!(run(&mut c, p.clone()).0.len(), 4);
        // "pods spread across zones as 3/1": only zone2 takes the next.
        c.remove_pod("default/p3").unwrap();
        c.remove_pod("default/p4").unwrap();
        let (ok, msg) = run(&mut c, p.clone());
        assert_eq!(ok, ["node-x", "node-y"]);
        assert!(
            msg.contains("2 node(s) didn't match pod topology spread constraints"),
            "{msg}"
        );
        // A pod the selector does not match adds nothing to its domain.
        let other = with(pod("default/o", &[]), |k| {
            k.spread = vec![spread(2, ZONE, foo)]
        });
        assert_eq!(run(&mut c, other).0.len(), 4);
        // A node without the topology label is never a candidate.
        let mut c = cluster(&[("node-a", &[(ZONE, "zone1")]), ("node-b", &[])]);
        let (ok, msg) = run(&mut c, p.clone());
        assert_eq!(ok, ["node-a"]);
        assert!(msg.contains("(missing required label)"), "{msg}");
        // minDomains: fewer domains than asked make the global minimum 0.
        let mut c = cluster(nodes);
        place(&mut c, pod("default/a", foo), "node-a");
        place(&mut c, pod("default/x", foo), "node-x");
        let mut strict = spread(1, ZONE, foo);
        strict.min_domains = Some(3);
        let p = with(pod("default/p", foo), |k| k.spread = vec![strict]);
        assert!(run(&mut c, p).0.is_empty());
    }

    #[test]
    fn spread_domains_honour_node_affinity_unless_told_not_to() {
        // zone2 is excluded by the node selector: with the default policy it
        // is no domain, so zone1's count is measured against itself.
        let nodes: &[(&str, &[(&str, &str)])] = &[
            ("node-a", &[(ZONE, "zone1"), ("pool", "gpu")]),
            ("node-x", &[(ZONE, "zone2"), ("pool", "cpu")]),
        ];
        let foo = &[("foo", "")];
        let mut c = cluster(nodes);
        place(&mut c, pod("default/a", foo), "node-a");
        let mut p = with(pod("default/p", foo), |k| {
            k.spread = vec![spread(1, ZONE, foo)]
        });
        p.node_selector = labels(&[("pool", "gpu")]);
        assert_eq!(run(&mut c, p.clone()).0, ["node-a"]);
        // nodeAffinityPolicy: Ignore counts zone2 (empty) as a domain.
        p.constraints.spread[0].honor_node_affinity = false;
        assert!(run(&mut c, p).0.is_empty());
    }
}
