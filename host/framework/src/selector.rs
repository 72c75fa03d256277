//! Label selectors and node selectors with Kubernetes' matching rules
//! (`k8s.io/apimachinery/pkg/labels` and `component-helpers`'
//! `nodeaffinity`): what node affinity, pod affinity and topology spread
//! constraints are built from.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Labels of a node or a pod.
pub type Labels = BTreeMap<String, String>;

/// A selector requirement's operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Operator {
    In,
    NotIn,
    Exists,
    DoesNotExist,
    /// Node selectors only: the label, as an integer, is greater.
    Gt,
    /// Node selectors only: the label, as an integer, is less.
    Lt,
}

/// One requirement: `key operator values`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Requirement {
    pub key: String,
    pub operator: Operator,
    #[serde(default)]
    pub values: Vec<String>,
}

impl Requirement {
    /// Whether `labels` satisfy the requirement. `NotIn` and `DoesNotExist`
    /// hold when the key is absent; `Gt`/`Lt` need the label and the value
    /// to be integers (a translator refuses a non-integer value).
    pub fn matches(&self, labels: &Labels) -> bool {
        let value = labels.get(&self.key);
        match self.operator {
            Operator::In => value.is_some_and(|v| self.values.contains(v)),
            Operator::NotIn => value.is_none_or(|v| !self.values.contains(v)),
            Operator::Exists => value.is_some(),
            Operator::DoesNotExist => value.is_none(),
            Operator::Gt | Operator::Lt => {
                let (Some(label), Some(bound)) = (
                    value.and_then(|v| v.parse::<i64>().ok()),
                    self.values.first().and_then(|v| v.parse::<i64>().ok()),
                ) else {
                    return false;
                };
                if self.operator == Operator::Gt {
                    label > bound
                } else {
                    label < bound
                }
            }
        }
    }
}

/// A label selector (`matchLabels` and `matchExpressions`, ANDed). An empty
/// selector matches everything; where Kubernetes allows the selector to be
/// absent (pod affinity terms, spread constraints) the absence is an
/// `Option::None` that matches nothing.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct LabelSelector {
    #[serde(default)]
    pub match_labels: Labels,
    #[serde(default)]
    pub match_expressions: Vec<Requirement>,
}

impl LabelSelector {
    /// Whether `labels` satisfy every part of the selector.
    pub fn matches(&self, labels: &Labels) -> bool {
        self.match_labels
            .iter()
            .all(|(k, v)| labels.get(k) == Some(v))
            && self.match_expressions.iter().all(|r| r.matches(labels))
    }
}

/// One term of a node selector: expressions over the node's labels and
/// fields (only `metadata.name`), ANDed. A term with neither matches no
/// node.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct NodeSelectorTerm {
    #[serde(default)]
    pub match_expressions: Vec<Requirement>,
    #[serde(default)]
    pub match_fields: Vec<Requirement>,
}

/// The field a node selector's `matchFields` may name.
pub const NODE_NAME_FIELD: &str = "metadata.name";

impl NodeSelectorTerm {
    /// Whether a node with this name and these labels satisfies the term.
    pub fn matches(&self, name: &str, labels: &Labels) -> bool {
        if self.match_expressions.is_empty() && self.match_fields.is_empty() {
            return false;
        }
        if !self.match_expressions.iter().all(|r| r.matches(labels)) {
            return false;
        }
        if self.match_fields.is_empty() {
            return true;
        }
        let fields = Labels::from([(NODE_NAME_FIELD.to_string(), name.to_string())]);
        self.match_fields.iter().all(|r| r.matches(&fields))
    }
}

/// A required node selector (`requiredDuringSchedulingIgnoredDuringExecution`):
/// terms ORed. No terms matches no node.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeSelector {
    pub terms: Vec<NodeSelectorTerm>,
}

impl NodeSelector {
    /// Whether a node with this name and these labels is selected.
    pub fn matches(&self, name: &str, labels: &Labels) -> bool {
        self.terms.iter().any(|t| t.matches(name, labels))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> Labels {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn req(key: &str, operator: Operator, values: &[&str]) -> Requirement {
        Requirement {
            key: key.into(),
            operator,
            values: values.iter().map(|v| v.to_string()).collect(),
        }
    }

    fn term(exprs: Vec<Requirement>) -> NodeSelectorTerm {
        NodeSelectorTerm {
            match_expressions: exprs,
            match_fields: Vec::new(),
        }
    }

    // Cases from kube-scheduler's nodeaffinity plugin tests
    // (`TestNodeAffinity` in node_affinity_test.go).
    #[test]
    fn node_affinity_requirements_match_as_in_kube_scheduler() {
        let foo_bar = labels(&[("foo", "bar")]);
        let cases: Vec<(&str, NodeSelector, Labels, bool)> = vec![
            (
                "In matches one of the values",
                NodeSelector {
                    terms: vec![term(vec![req("foo", Operator::In, &["bar", "value2"])])],
                },
                foo_bar.clone(),
                true,
            ),
            (
                "Gt compares as integers",
                NodeSelector {
                    terms: vec![term(vec![req("kernel-version", Operator::Gt, &["0204"])])],
                },
                labels(&[("kernel-version", "0206.0")]),
                false,
            ),
            (
                "Gt on an integer label",
                NodeSelector {
                    terms: vec![term(vec![req("kernel-version", Operator::Gt, &["0204"])])],
                },
                labels(&[("kernel-version", "0206")]),
                true,
            ),
            (
                "NotIn holds when the label has another value",
                NodeSelector {
                    terms: vec![term(vec![req(
                        "mem-type",
                        Operator::NotIn,
                        &["DDR", "DDR2"],
                    )])],
                },
                labels(&[("mem-type", "DDR3")]),
                true,
            ),
            (
                "Exists",
                NodeSelector {
                    terms: vec![term(vec![req("GPU", Operator::Exists, &[])])],
                },
                labels(&[("GPU", "NVIDIA-GRID-K1")]),
                true,
            ),
            (
                "expressions in a term are ANDed",
                NodeSelector {
                    terms: vec![term(vec![
                        req("foo", Operator::In, &["bar"]),
                        req("GPU", Operator::Exists, &[]),
                    ])],
                },
                foo_bar.clone(),
                false,
            ),
            (
                "terms are ORed",
                NodeSelector {
                    terms: vec![
                        term(vec![req("foo", Operator::In, &["bar", "value2"])]),
                        term(vec![req("diffkey", Operator::In, &["wrong", "value2"])]),
                    ],
                },
                foo_bar.clone(),
                true,
            ),
            (
                "an empty term matches nothing",
                NodeSelector {
                    terms: vec![NodeSelectorTerm::default()],
                },
                foo_bar.clone(),
                false,
            ),
            (
                "no terms match nothing",
                NodeSelector { terms: vec![] },
                foo_bar.clone(),
                false,
            ),
            (
                "DoesNotExist on an absent label",
                NodeSelector {
                    terms: vec![term(vec![req("foo", Operator::DoesNotExist, &[])])],
                },
                labels(&[("bar", "x")]),
                true,
            ),
            (
                "Lt with a non-integer label does not match",
                NodeSelector {
                    terms: vec![term(vec![req("n", Operator::Lt, &["5"])])],
                },
                labels(&[("n", "four")]),
                false,
            ),
        ];
        for (name, selector, node_labels, want) in cases {
            assert_eq!(selector.matches("node1", &node_labels), want, "{name}");
        }
    }

    #[test]
    fn match_fields_select_by_node_name_and_and_with_expressions() {
        let by_name = NodeSelector {
            terms: vec![NodeSelectorTerm {
                match_expressions: vec![],
                match_fields: vec![req(NODE_NAME_FIELD, Operator::In, &["node1"])],
            }],
        };
        assert!(by_name.matches("node1", &Labels::new()));
        assert!(!by_name.matches("node2", &Labels::new()));
        let both = NodeSelector {
            terms: vec![NodeSelectorTerm {
                match_expressions: vec![req("foo", Operator::In, &["bar"])],
                match_fields: vec![req(NODE_NAME_FIELD, Operator::In, &["node1"])],
            }],
        };
        assert!(both.matches("node1", &labels(&[("foo", "bar")])));
        assert!(!both.matches("node1", &Labels::new()));
        assert!(!both.matches("node2", &labels(&[("foo", "bar")])));
    }

    #[test]
    fn an_empty_label_selector_matches_everything() {
        assert!(LabelSelector::default().matches(&labels(&[("a", "b")])));
        let s = LabelSelector {
            match_labels: labels(&[("app", "train")]),
            match_expressions: vec![req("tier", Operator::NotIn, &["web"])],
        };
        assert!(s.matches(&labels(&[("app", "train")])));
        assert!(!s.matches(&labels(&[("app", "train"), ("tier", "web")])));
        assert!(!s.matches(&labels(&[("app", "serve")])));
    }
}
