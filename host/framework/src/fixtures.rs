//! Small clusters, pods and jobs for the framework's unit tests (filters,
//! preferences, stages of a round): nodes by name and labels, pods by key
//! and labels in namespace `default`, terms over labels, fixed-size jobs.

use crate::cluster::Cluster;
use crate::constraints::{Constraints, PodAffinityTerm};
use crate::model::{Job, Node, Pod, Resources};
use crate::selector::{LabelSelector, Labels};

pub(crate) const HOST: &str = "kubernetes.io/hostname";
pub(crate) const ZONE: &str = "zone";

pub(crate) fn labels(pairs: &[(&str, &str)]) -> Labels {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// Room for any test pod.
pub(crate) fn big() -> Resources {
    Resources {
        cpu_milli: 64_000,
        memory_mib: 256_000,
        gpus: 8,
    }
}

/// Nodes `name` with these labels.
pub(crate) fn cluster(nodes: &[(&str, &[(&str, &str)])]) -> Cluster {
    let mut c = Cluster::new();
    for (name, l) in nodes {
        let mut n = Node::new(*name, big());
        n.labels = labels(l);
        c.add_node(n).unwrap();
    }
    c
}

/// A pod in namespace `default` with these labels.
pub(crate) fn pod(key: &str, l: &[(&str, &str)]) -> Pod {
    let mut p = Pod::new(key, Resources::default());
    p.namespace = "default".into();
    p.labels = labels(l);
    p
}

/// Adds `p` bound to `node`.
pub(crate) fn place(c: &mut Cluster, p: Pod, node: &str) {
    c.add_pod(p, Some(node)).unwrap();
}

pub(crate) fn selector(l: &[(&str, &str)]) -> Option<LabelSelector> {
    Some(LabelSelector {
        match_labels: labels(l),
        match_expressions: vec![],
    })
}

/// A term about pods with labels `l` in namespace `default`.
pub(crate) fn term(l: &[(&str, &str)], topology_key: &str) -> PodAffinityTerm {
    PodAffinityTerm {
        selector: selector(l),
        namespaces: ["default".to_string()].into(),
        all_namespaces: false,
        topology_key: topology_key.into(),
    }
}

/// `p` with its constraints changed by `f`.
pub(crate) fn with(mut p: Pod, f: impl FnOnce(&mut Constraints)) -> Pod {
    f(&mut p.constraints);
    p
}

/// A job of exactly `workers` workers, all needed, nothing else asked.
pub(crate) fn job(name: &str, workers: u32) -> Job {
    Job::gang(name, workers)
}
