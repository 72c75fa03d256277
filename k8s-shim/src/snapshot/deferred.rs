//! Pods the snapshot cannot apply yet: bound to a node it has not seen, or
//! members of a PodGroup it has not seen.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1 as core;

/// What a deferred pod waits for.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Awaited {
    /// The node it is bound to.
    Node(String),
    /// Its PodGroup (`namespace/name`).
    Group(String),
}

/// Pods waiting for a node or PodGroup the snapshot has not seen, indexed by
/// what they wait for: a node or PodGroup event retries its own pods only,
/// so a first list that brings pods before their nodes stays linear.
#[derive(Debug, Default)]
pub(super) struct Deferred {
    pub(super) waiting: BTreeMap<Awaited, BTreeMap<String, core::Pod>>,
    pub(super) by_pod: BTreeMap<String, Awaited>,
}

impl Deferred {
    pub(super) fn insert(&mut self, key: String, on: Awaited, pod: core::Pod) {
        self.remove(&key);
        self.by_pod.insert(key.clone(), on.clone());
        self.waiting.entry(on).or_default().insert(key, pod);
    }

    pub(super) fn remove(&mut self, key: &str) {
        if let Some(on) = self.by_pod.remove(key)
            && let Some(pods) = self.waiting.get_mut(&on)
        {
            pods.remove(key);
            if pods.is_empty() {
                self.waiting.remove(&on);
            }
        }
    }

    /// The pods that waited for `arrived`, no longer deferred.
    pub(super) fn take(&mut self, arrived: &Awaited) -> Vec<core::Pod> {
        let pods = self.waiting.remove(arrived).unwrap_or_default();
        for key in pods.keys() {
            self.by_pod.remove(key);
        }
        pods.into_values().collect()
    }
}
