//! A search's result as kube writes it: one allocation per claim, with its
//! devices, the nodes that reach them all and the configuration of its
//! classes and its own.

use std::collections::HashMap;

use super::super::{AllocatedConfig, AllocatedDevice, Allocation, Reach};
use super::{Search, Want};
use crate::selector::{NODE_NAME_FIELD, NodeSelector, NodeSelectorTerm, Operator, Requirement};

impl<'a> Search<'a, '_> {
    /// One allocation per claim, in claim order, with the nodes that reach
    /// all its devices and the configuration of its classes and its own.
    pub(super) fn results(&self, node: &str) -> Vec<(String, Allocation)> {
        self.claims
            .iter()
            .zip(&self.picked)
            .enumerate()
            .map(|(ci, (entry, picked))| {
                let devices = picked
                    .iter()
                    .map(|p| AllocatedDevice {
                        request: p.request.clone(),
                        device: self.cands[p.at].id.clone(),
                        admin_access: p.admin_access,
                        shared: p.share.is_some(),
                        consumed: p.share.clone().unwrap_or_default(),
                        binding: self.cands[p.at].device.binding.clone(),
                    })
                    .collect();
                // A device bound to the node takes the allocation there.
                let to_node = Reach::Node(node.to_string());
                let reaches = picked.iter().map(|p| {
                    let c = &self.cands[p.at];
                    if c.device.binding.to_node {
                        return Some(&to_node);
                    }
                    c.slice.reach.as_ref().or(c.device.reach.as_ref())
                });
                (
                    entry.claim.key.clone(),
                    Allocation {
                        devices,
                        nodes: node_selector(reaches),
                        config: self.config(ci),
                    },
                )
            })
            .collect()
    }

    /// `status.allocation.devices.config` of claim `ci`, as kube lists it:
    /// each class's configuration once, for the requests served through
    /// it, then the claim's own for the requests it names; a list covering
    /// every request names none.
    fn config(&self, ci: usize) -> Vec<AllocatedConfig> {
        let claim = &self.claims[ci].claim;
        let chosen: Vec<&Want<'a>> = self.wants[ci]
            .iter()
            .zip(&self.selected[ci])
            .filter_map(|(choices, hi)| choices.get(*hi))
            .collect();
        let mut out: Vec<AllocatedConfig> = Vec::new();
        let mut by_class: HashMap<&str, std::ops::Range<usize>> = HashMap::new();
        for want in &chosen {
            if let Some(range) = by_class.get(want.class) {
                for c in &mut out[range.clone()] {
                    c.requests.push(want.name.clone());
                }
                continue;
            }
            let start = out.len();
            let class_config = self.inv.classes.get(want.class).map(|e| &e.class.config);
            for opaque in class_config.into_iter().flatten() {
                out.push(AllocatedConfig {
                    from_class: true,
                    requests: vec![want.name.clone()],
                    opaque: opaque.clone(),
                });
            }
            by_class.insert(want.class, start..out.len());
        }
        let names =
            |r: &super::super::Request, want: &Want<'a>| [r.name.clone(), want.name.clone()];
        for config in &claim.config {
            let named =
                config.requests.is_empty()
                    || claim.requests.iter().zip(&chosen).any(|(r, want)| {
                        names(r, want).iter().any(|n| config.requests.contains(n))
                    });
            if named {
                out.push(AllocatedConfig {
                    from_class: false,
                    requests: config.requests.clone(),
                    opaque: config.opaque.clone(),
                });
            }
        }
        for c in &mut out {
            let covers_all = !c.requests.is_empty()
                && claim
                    .requests
                    .iter()
                    .zip(&chosen)
                    .all(|(r, want)| names(r, want).iter().any(|n| c.requests.contains(n)));
            if covers_all {
                c.requests.clear();
            }
        }
        out
    }
}

/// The nodes that reach every device of an allocation, as kube writes
/// them: the first local device's node, else the selectors' single terms
/// merged, else every node.
fn node_selector<'r>(reaches: impl Iterator<Item = Option<&'r Reach>>) -> Option<NodeSelector> {
    let mut term = NodeSelectorTerm::default();
    for reach in reaches.flatten() {
        match reach {
            Reach::Node(n) => {
                return Some(NodeSelector {
                    terms: vec![NodeSelectorTerm {
                        match_expressions: Vec::new(),
                        match_fields: vec![Requirement {
                            key: NODE_NAME_FIELD.into(),
                            operator: Operator::In,
                            values: vec![n.clone()],
                        }],
                    }],
                });
            }
            Reach::Nodes(s) => {
                if let [t] = s.terms.as_slice() {
                    for r in &t.match_expressions {
                        if !term.match_expressions.contains(r) {
                            term.match_expressions.push(r.clone());
                        }
                    }
                    for r in &t.match_fields {
                        if !term.match_fields.contains(r) {
                            term.match_fields.push(r.clone());
                        }
                    }
                }
            }
            Reach::All => {}
        }
    }
    (!term.match_expressions.is_empty() || !term.match_fields.is_empty())
        .then(|| NodeSelector { terms: vec![term] })
}
