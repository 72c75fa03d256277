//! The placement terms a pod carries beyond its node selector and
//! tolerations, as kube-scheduler v1.37 reads them from its spec: host
//! ports, node and pod (anti-)affinity, topology spread. `crate::constraints`
//! evaluates them.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use super::Pod;
use crate::selector::{LabelSelector, NodeSelector, NodeSelectorTerm};

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
