//! Placement constraints a pod carries beyond its node selector and
//! tolerations, with kube-scheduler v1.37's filter semantics: required node
//! affinity (NodeAffinity), host ports (NodePorts), required pod affinity
//! and anti-affinity (InterPodAffinity) and hard topology spread
//! (PodTopologySpread with `whenUnsatisfiable: DoNotSchedule`).
//!
//! Pod affinity and spread depend on where other pods are, so they are
//! evaluated in two steps as in kube-scheduler: [`PodChecks::new`] counts
//! the matching pods per topology domain once per pod (its pre-filter), then
//! [`PodChecks::check`] looks a node's domains up (its filter). Pods
//! reserved for a gang earlier in the same attempt count like bound ones,
//! so anti-affinity spreads a gang's own members.

use std::collections::HashMap;

use super::cluster::Cluster;
use super::model::Pod;
pub use super::model::{
    ALL_HOST_IPS, Constraints, HostPort, PodAffinityTerm, PreferredTerm, SpreadConstraint,
    WeightedPodAffinityTerm,
};
use super::selector::Labels;

/// Whether `pod` may go to a node with this name and these labels by its
/// node selector and required node affinity (NodeAffinity's filter).
pub(crate) fn node_affinity_allows(pod: &Pod, name: &str, labels: &Labels) -> bool {
    pod.node_selector
        .iter()
        .all(|(k, v)| labels.get(k) == Some(v))
        && pod
            .constraints
            .node_affinity
            .as_ref()
            .is_none_or(|s| s.matches(name, labels))
}

/// Whether every volume bound to `pod`'s claims can be reached from a node
/// with this name and these labels.
pub(crate) fn volumes_reachable(pod: &Pod, name: &str, labels: &Labels) -> bool {
    pod.constraints
        .volume_node_affinity
        .iter()
        .all(|s| s.matches(name, labels))
}

/// Whether `pod` tolerates every NoSchedule/NoExecute taint of the node.
pub(crate) fn tolerates_taints(pod: &Pod, node: &super::model::Node) -> bool {
    !node
        .taints
        .iter()
        .any(|t| t.repels() && !pod.tolerations.iter().any(|tol| tol.tolerates(t)))
}

/// Why a node fails the checks that depend on other pods.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PodCheckFailure {
    SpreadMissingLabel,
    Spread,
    Affinity,
    AntiAffinity,
    ExistingAntiAffinity,
}

type Domain<'a> = (&'a str, &'a str);

struct SpreadState<'a> {
    constraint: &'a SpreadConstraint,
    /// Matching pods per domain value, over eligible nodes (every eligible
    /// domain present, possibly at 0).
    counts: HashMap<&'a str, u32>,
    /// The global minimum the skew is measured from.
    min: u32,
    self_match: u32,
}

/// The per-pod state of the checks that count other pods (the pre-filter
/// of InterPodAffinity and PodTopologySpread).
pub(crate) struct PodChecks<'a> {
    pod: &'a Pod,
    /// Pods matching every affinity term, per (term key, node value).
    affinity: HashMap<Domain<'a>, u32>,
    /// Pods matching each anti-affinity term, per (term key, node value).
    anti_affinity: HashMap<Domain<'a>, u32>,
    /// Domains where a placed pod's anti-affinity term matches `pod`.
    existing_anti: HashMap<Domain<'a>, u32>,
    spread: Vec<SpreadState<'a>>,
}

impl<'a> PodChecks<'a> {
    /// The counts for `pod`, or `None` when nothing about it depends on
    /// other pods (no affinity, no spread, no placed pod with
    /// anti-affinity): then every node passes.
    pub(crate) fn new(cluster: &'a Cluster, pod: &'a Pod) -> Option<PodChecks<'a>> {
        let own = &pod.constraints;
        if !own.needs_pod_counts() && !cluster.has_placed_anti_affinity() {
            return None;
        }
        let nodes = cluster.nodes();
        let mut checks = PodChecks {
            pod,
            affinity: HashMap::new(),
            anti_affinity: HashMap::new(),
            existing_anti: HashMap::new(),
            spread: Vec::new(),
        };
        for (other, node) in cluster.placed_with_anti_affinity() {
            let labels = &nodes[node].labels;
            for term in &other.constraints.pod_anti_affinity {
                if let Some(v) = labels.get(&term.topology_key)
                    && term.matches(pod)
                {
                    *checks
                        .existing_anti
                        .entry((term.topology_key.as_str(), v.as_str()))
                        .or_default() += 1;
                }
            }
        }
        if !own.needs_pod_counts() {
            return Some(checks);
        }
        // Spread domains: eligible nodes with every constraint's key.
        let eligible: Vec<bool> = if own.spread.is_empty() {
            Vec::new()
        } else {
            (0..nodes.len())
                .map(|i| {
                    let node = &nodes[i];
                    cluster.is_live(i)
                        && own
                            .spread
                            .iter()
                            .all(|c| node.labels.contains_key(&c.topology_key))
                })
                .collect()
        };
        for c in &own.spread {
            let mut counts = HashMap::new();
            for (i, node) in nodes.iter().enumerate() {
                if eligible[i]
                    && (!c.honor_node_affinity
                        || node_affinity_allows(pod, &node.name, &node.labels))
                    && (!c.honor_taints || tolerates_taints(pod, node))
                {
                    counts.insert(node.labels[&c.topology_key].as_str(), 0u32);
                }
            }
            checks.spread.push(SpreadState {
                constraint: c,
                counts,
                min: 0,
                self_match: u32::from(c.selector.as_ref().is_some_and(|s| s.matches(&pod.labels))),
            });
        }
        for (other, node) in cluster.placed() {
            let labels = &nodes[node].labels;
            if !own.pod_affinity.is_empty() && own.pod_affinity.iter().all(|t| t.matches(other)) {
                for t in &own.pod_affinity {
                    if let Some(v) = labels.get(&t.topology_key) {
                        *checks
                            .affinity
                            .entry((t.topology_key.as_str(), v.as_str()))
                            .or_default() += 1;
                    }
                }
            }
            for t in &own.pod_anti_affinity {
                if let Some(v) = labels.get(&t.topology_key)
                    && t.matches(other)
                {
                    *checks
                        .anti_affinity
                        .entry((t.topology_key.as_str(), v.as_str()))
                        .or_default() += 1;
                }
            }
            if other.namespace == pod.namespace {
                for s in &mut checks.spread {
                    if let Some(v) = labels.get(&s.constraint.topology_key)
                        && let Some(n) = s.counts.get_mut(v.as_str())
                        && s.constraint
                            .selector
                            .as_ref()
                            .is_some_and(|sel| sel.matches(&other.labels))
                    {
                        *n += 1;
                    }
                }
            }
        }
        for s in &mut checks.spread {
            let domains = s.counts.len() as u32;
            s.min = if s.constraint.min_domains.is_some_and(|m| domains < m) {
                0
            } else {
                s.counts.values().copied().min().unwrap_or(0)
            };
        }
        Some(checks)
    }

    /// Node `labels` against the spread constraints, then pod affinity, the
    /// pod's anti-affinity and placed pods' anti-affinity, in
    /// kube-scheduler's plugin order.
    pub(crate) fn check(&self, labels: &Labels) -> Result<(), PodCheckFailure> {
        for s in &self.spread {
            let c = s.constraint;
            let Some(v) = labels.get(&c.topology_key) else {
                return Err(PodCheckFailure::SpreadMissingLabel);
            };
            let matching = s.counts.get(v.as_str()).copied().unwrap_or(0);
            if (matching + s.self_match).saturating_sub(s.min) > c.max_skew {
                return Err(PodCheckFailure::Spread);
            }
        }
        let own = &self.pod.constraints;
        if !own.pod_affinity.is_empty() {
            let mut found_everywhere = true;
            for t in &own.pod_affinity {
                let Some(v) = labels.get(&t.topology_key) else {
                    // Every topology key must exist, even for the first pod.
                    return Err(PodCheckFailure::Affinity);
                };
                if self
                    .affinity
                    .get(&(t.topology_key.as_str(), v.as_str()))
                    .is_none_or(|&n| n == 0)
                {
                    found_everywhere = false;
                }
            }
            // The first of a set of pods with affinity to each other: no pod
            // anywhere matches, and the pod matches its own terms.
            let first_of_its_set =
                self.affinity.is_empty() && own.pod_affinity.iter().all(|t| t.matches(self.pod));
            if !found_everywhere && !first_of_its_set {
                return Err(PodCheckFailure::Affinity);
            }
        }
        for t in &own.pod_anti_affinity {
            if let Some(v) = labels.get(&t.topology_key)
                && self
                    .anti_affinity
                    .get(&(t.topology_key.as_str(), v.as_str()))
                    .is_some_and(|&n| n > 0)
            {
                return Err(PodCheckFailure::AntiAffinity);
            }
        }
        if !self.existing_anti.is_empty()
            && labels
                .iter()
                .any(|(k, v)| self.existing_anti.contains_key(&(k.as_str(), v.as_str())))
        {
            return Err(PodCheckFailure::ExistingAntiAffinity);
        }
        Ok(())
    }
}
