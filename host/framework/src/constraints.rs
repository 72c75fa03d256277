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

use std::collections::{BTreeSet, HashMap};

use serde::{Deserialize, Serialize};

use super::cluster::Cluster;
use super::model::Pod;
use super::selector::{LabelSelector, Labels, NodeSelector, NodeSelectorTerm};

/// The host IP a port binds when none is given: every address.
pub const ALL_HOST_IPS: &str = "0.0.0.0";

/// A host port a container asks for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct HostPort {
    /// `TCP`, `UDP` or `SCTP`.
    pub protocol: String,
    /// The host address; [`ALL_HOST_IPS`] for all.
    pub host_ip: String,
    pub port: u16,
}

impl HostPort {
    /// A host port, with Kubernetes' defaults for an empty protocol (TCP)
    /// and host IP (all addresses).
    pub fn new(protocol: &str, host_ip: &str, port: u16) -> HostPort {
        HostPort {
            protocol: if protocol.is_empty() { "TCP" } else { protocol }.to_string(),
            host_ip: if host_ip.is_empty() {
                ALL_HOST_IPS
            } else {
                host_ip
            }
            .to_string(),
            port,
        }
    }

    /// Whether two pods asking for these ports cannot share a node: same
    /// protocol and port, and the same address or either on all addresses.
    pub fn conflicts(&self, other: &HostPort) -> bool {
        self.port == other.port
            && self.protocol == other.protocol
            && (self.host_ip == other.host_ip
                || self.host_ip == ALL_HOST_IPS
                || other.host_ip == ALL_HOST_IPS)
    }
}

/// A preferred node affinity term and its weight (1–100).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PreferredTerm {
    pub weight: u32,
    pub term: NodeSelectorTerm,
}

/// A preferred pod (anti-)affinity term and its weight (1–100).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WeightedPodAffinityTerm {
    pub weight: u32,
    pub term: PodAffinityTerm,
}

/// A pod (anti-)affinity term, with its namespaces resolved.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PodAffinityTerm {
    /// Pods the term is about; absent matches none.
    #[serde(default)]
    pub selector: Option<LabelSelector>,
    /// Namespaces those pods are looked for in (the owner's own when the
    /// pod names none, filled in by the translator).
    #[serde(default)]
    pub namespaces: BTreeSet<String>,
    /// Every namespace (an empty `namespaceSelector`).
    #[serde(default)]
    pub all_namespaces: bool,
    /// The node label whose value is the domain: same value, same domain.
    pub topology_key: String,
}

impl PodAffinityTerm {
    /// Whether `pod` is one of the pods the term is about.
    pub fn matches(&self, pod: &Pod) -> bool {
        (self.all_namespaces || self.namespaces.contains(&pod.namespace))
            && self
                .selector
                .as_ref()
                .is_some_and(|s| s.matches(&pod.labels))
    }
}

/// A topology spread constraint: a filter (`whenUnsatisfiable:
/// DoNotSchedule`, in [`Constraints::spread`]) or a preference
/// (`ScheduleAnyway`, in [`Constraints::preferred_spread`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct SpreadConstraint {
    pub max_skew: u32,
    pub topology_key: String,
    /// Pods counted (in the pod's namespace); absent counts none.
    #[serde(default)]
    pub selector: Option<LabelSelector>,
    /// Fewer eligible domains than this count as a global minimum of 0.
    #[serde(default)]
    pub min_domains: Option<u32>,
    /// `nodeAffinityPolicy: Honor` (the default): only nodes the pod's node
    /// selector and affinity allow count as domains.
    #[serde(default = "yes")]
    pub honor_node_affinity: bool,
    /// `nodeTaintsPolicy: Honor` (default `Ignore`): only nodes whose
    /// taints the pod tolerates count as domains.
    #[serde(default)]
    pub honor_taints: bool,
}

fn yes() -> bool {
    true
}

/// Everything beyond node selector and tolerations that limits where a
/// pod may go.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Constraints {
    /// Required node affinity, ANDed with the node selector.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_affinity: Option<NodeSelector>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub host_ports: Vec<HostPort>,
    /// Required pod affinity: every term must find a matching pod in the
    /// node's domain.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pod_affinity: Vec<PodAffinityTerm>,
    /// Required pod anti-affinity: no term may find a matching pod in the
    /// node's domain (and pods placed later respect it too).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pod_anti_affinity: Vec<PodAffinityTerm>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub spread: Vec<SpreadConstraint>,
    /// Preferred node affinity: a preference in the choice among the
    /// nodes that pass the filters.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub preferred_node_affinity: Vec<PreferredTerm>,
    /// Preferred pod affinity: nodes whose domains hold matching pods are
    /// preferred, by the terms' weights.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub preferred_pod_affinity: Vec<WeightedPodAffinityTerm>,
    /// Preferred pod anti-affinity: the same, avoided.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub preferred_pod_anti_affinity: Vec<WeightedPodAffinityTerm>,
    /// `ScheduleAnyway` spread constraints: nodes whose domains hold fewer
    /// matching pods are preferred.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub preferred_spread: Vec<SpreadConstraint>,
    /// The node affinity of each PersistentVolume bound to the pod's
    /// claims: a node must satisfy every one (VolumeBinding's check for
    /// bound claims).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub volume_node_affinity: Vec<NodeSelector>,
}

impl Constraints {
    /// No constraints at all.
    pub fn is_empty(&self) -> bool {
        *self == Constraints::default()
    }

    /// Whether placing another pod weighs this one's terms once it holds
    /// a node (InterPodAffinity's score looks at placed pods' required
    /// affinity and preferred terms).
    pub(crate) fn weighs_on_others(&self) -> bool {
        !(self.pod_affinity.is_empty()
            && self.preferred_pod_affinity.is_empty()
            && self.preferred_pod_anti_affinity.is_empty())
    }

    /// Whether the pod's placement depends on where other pods are.
    pub(crate) fn needs_pod_counts(&self) -> bool {
        !(self.pod_affinity.is_empty()
            && self.pod_anti_affinity.is_empty()
            && self.spread.is_empty())
    }
}

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
