//! A pod's affinity, host ports and topology spread constraints as the
//! framework's [`Constraints`]. What Dragon cannot evaluate (an unknown
//! operator, a namespace selector with labels, a non-integer `Gt` bound) is
//! refused with the field named, so the pod waits with that reason instead
//! of being placed as if the constraint were not there.

use std::collections::BTreeSet;

use dragon_framework::{
    Constraints, HostPort, LabelSelector, Labels, NODE_NAME_FIELD, NodeSelector, NodeSelectorTerm,
    Operator, PodAffinityTerm, PreferredTerm, Requirement, SpreadConstraint,
    WeightedPodAffinityTerm,
};
use k8s_openapi::api::core::v1 as core;
use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;

/// A constraint Dragon cannot evaluate: the field and what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {problem}")]
pub struct ConstraintError {
    pub field: String,
    pub problem: Problem,
}

/// What is wrong with a constraint's field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Problem {
    #[error("unknown operator {0:?}")]
    UnknownOperator(String),
    #[error("{operator} on {key:?} {needs}")]
    Values {
        operator: String,
        key: String,
        needs: &'static str,
    },
    #[error("only {NODE_NAME_FIELD} with In or NotIn is supported, got {key:?} {operator:?}")]
    MatchField { key: String, operator: Operator },
    #[error(
        "selecting namespaces by label is not supported (list them in `namespaces`, or use an empty selector for all)"
    )]
    NamespacesByLabel,
    #[error("must not be empty")]
    Empty,
    #[error("unknown value {0:?}")]
    UnknownValue(String),
    #[error("must be at least 1, got {0}")]
    BelowOne(i32),
    #[error("hostPort {0} is out of range")]
    HostPortRange(i32),
    #[error("must be 1 to 100, got {0}")]
    Weight(i32),
}

fn fail<T>(field: impl Into<String>, problem: Problem) -> Result<T, ConstraintError> {
    Err(ConstraintError {
        field: field.into(),
        problem,
    })
}

fn operator(field: &str, op: &str, node: bool) -> Result<Operator, ConstraintError> {
    Ok(match op {
        "In" => Operator::In,
        "NotIn" => Operator::NotIn,
        "Exists" => Operator::Exists,
        "DoesNotExist" => Operator::DoesNotExist,
        "Gt" if node => Operator::Gt,
        "Lt" if node => Operator::Lt,
        other => return fail(field, Problem::UnknownOperator(other.to_string())),
    })
}

fn requirement(
    field: &str,
    key: &str,
    op: &str,
    values: Option<&Vec<String>>,
    node: bool,
) -> Result<Requirement, ConstraintError> {
    let operator = operator(field, op, node)?;
    let values = values.cloned().unwrap_or_default();
    let bad = |needs: &'static str| {
        fail(
            field,
            Problem::Values {
                operator: op.to_string(),
                key: key.to_string(),
                needs,
            },
        )
    };
    match operator {
        Operator::In | Operator::NotIn if values.is_empty() => return bad("needs values"),
        Operator::Exists | Operator::DoesNotExist if !values.is_empty() => {
            return bad("takes no values");
        }
        Operator::Gt | Operator::Lt if values.len() != 1 || values[0].parse::<i64>().is_err() => {
            return bad("needs one integer value");
        }
        _ => {}
    }
    Ok(Requirement {
        key: key.to_string(),
        operator,
        values,
    })
}

pub(super) fn label_selector(
    field: &str,
    s: &meta::LabelSelector,
) -> Result<LabelSelector, ConstraintError> {
    Ok(LabelSelector {
        match_labels: s.match_labels.clone().unwrap_or_default(),
        match_expressions: s
            .match_expressions
            .iter()
            .flatten()
            .map(|e| {
                requirement(
                    &format!("{field}.matchExpressions"),
                    &e.key,
                    &e.operator,
                    e.values.as_ref(),
                    false,
                )
            })
            .collect::<Result<_, _>>()?,
    })
}

pub(super) fn node_selector(
    field: &str,
    s: &core::NodeSelector,
) -> Result<NodeSelector, ConstraintError> {
    let terms = s
        .node_selector_terms
        .iter()
        .enumerate()
        .map(|(i, t)| node_selector_term(&format!("{field}.nodeSelectorTerms[{i}]"), t))
        .collect::<Result<_, _>>()?;
    Ok(NodeSelector { terms })
}

fn node_selector_term(
    field: &str,
    t: &core::NodeSelectorTerm,
) -> Result<NodeSelectorTerm, ConstraintError> {
    let exprs = |list: Option<&Vec<core::NodeSelectorRequirement>>, what: &str| {
        list.into_iter()
            .flatten()
            .map(|e| {
                requirement(
                    &format!("{field}.{what}"),
                    &e.key,
                    &e.operator,
                    e.values.as_ref(),
                    true,
                )
            })
            .collect::<Result<Vec<_>, _>>()
    };
    let match_fields = exprs(t.match_fields.as_ref(), "matchFields")?;
    if let Some(r) = match_fields
        .iter()
        .find(|r| r.key != NODE_NAME_FIELD || !matches!(r.operator, Operator::In | Operator::NotIn))
    {
        return fail(
            format!("{field}.matchFields"),
            Problem::MatchField {
                key: r.key.clone(),
                operator: r.operator,
            },
        );
    }
    Ok(NodeSelectorTerm {
        match_expressions: exprs(t.match_expressions.as_ref(), "matchExpressions")?,
        match_fields,
    })
}

/// Adds `key In (the pod's value)` for each `matchLabelKeys` entry and
/// `key NotIn (…)` for each `mismatchLabelKeys` entry, as the API server
/// does when it admits the pod (so applying it again changes nothing).
fn merge_label_keys(
    selector: &mut LabelSelector,
    labels: &Labels,
    match_keys: Option<&Vec<String>>,
    mismatch_keys: Option<&Vec<String>>,
) {
    for (keys, operator) in [(match_keys, Operator::In), (mismatch_keys, Operator::NotIn)] {
        for key in keys.into_iter().flatten() {
            if let Some(v) = labels.get(key) {
                selector.match_expressions.push(Requirement {
                    key: key.clone(),
                    operator,
                    values: vec![v.clone()],
                });
            }
        }
    }
}

/// The `labelSelector` at `field`, with the label keys merged in.
fn merged_selector(
    field: &str,
    selector: Option<&meta::LabelSelector>,
    labels: &Labels,
    match_keys: Option<&Vec<String>>,
    mismatch_keys: Option<&Vec<String>>,
) -> Result<Option<LabelSelector>, ConstraintError> {
    let mut selector = selector
        .map(|s| label_selector(&format!("{field}.labelSelector"), s))
        .transpose()?;
    if let Some(s) = &mut selector {
        merge_label_keys(s, labels, match_keys, mismatch_keys);
    }
    Ok(selector)
}

fn affinity_term(
    field: &str,
    t: &core::PodAffinityTerm,
    namespace: &str,
    labels: &Labels,
) -> Result<PodAffinityTerm, ConstraintError> {
    let selector = merged_selector(
        field,
        t.label_selector.as_ref(),
        labels,
        t.match_label_keys.as_ref(),
        t.mismatch_label_keys.as_ref(),
    )?;
    let mut namespaces: BTreeSet<String> = t.namespaces.iter().flatten().cloned().collect();
    let all_namespaces = match &t.namespace_selector {
        None => false,
        Some(s)
            if s.match_labels.as_ref().is_none_or(|l| l.is_empty())
                && s.match_expressions.as_ref().is_none_or(|e| e.is_empty()) =>
        {
            true
        }
        Some(_) => {
            return fail(
                format!("{field}.namespaceSelector"),
                Problem::NamespacesByLabel,
            );
        }
    };
    if namespaces.is_empty() && !all_namespaces {
        namespaces.insert(namespace.to_string());
    }
    if t.topology_key.is_empty() {
        return fail(format!("{field}.topologyKey"), Problem::Empty);
    }
    Ok(PodAffinityTerm {
        selector,
        namespaces,
        all_namespaces,
        topology_key: t.topology_key.clone(),
    })
}

/// Whether a spread constraint is a filter (`DoNotSchedule`) or a
/// preference (`ScheduleAnyway`).
enum Unsatisfiable {
    DoNotSchedule,
    ScheduleAnyway,
}

fn spread(
    field: &str,
    c: &core::TopologySpreadConstraint,
    labels: &Labels,
) -> Result<(Unsatisfiable, SpreadConstraint), ConstraintError> {
    let when = match c.when_unsatisfiable.as_str() {
        "DoNotSchedule" => Unsatisfiable::DoNotSchedule,
        "ScheduleAnyway" => Unsatisfiable::ScheduleAnyway,
        other => {
            return fail(
                format!("{field}.whenUnsatisfiable"),
                Problem::UnknownValue(other.to_string()),
            );
        }
    };
    let at_least_one = |what: &str, n: i32| match u32::try_from(n) {
        Ok(n) if n > 0 => Ok(n),
        _ => fail(format!("{field}.{what}"), Problem::BelowOne(n)),
    };
    let max_skew = at_least_one("maxSkew", c.max_skew)?;
    let min_domains = c
        .min_domains
        .map(|m| at_least_one("minDomains", m))
        .transpose()?;
    let policy = |what: &str, v: Option<&String>, default: bool| match v.map(String::as_str) {
        None => Ok(default),
        Some("Honor") => Ok(true),
        Some("Ignore") => Ok(false),
        Some(other) => fail(
            format!("{field}.{what}"),
            Problem::UnknownValue(other.to_string()),
        ),
    };
    let selector = merged_selector(
        field,
        c.label_selector.as_ref(),
        labels,
        c.match_label_keys.as_ref(),
        None,
    )?;
    if c.topology_key.is_empty() {
        return fail(format!("{field}.topologyKey"), Problem::Empty);
    }
    Ok((
        when,
        SpreadConstraint {
            max_skew,
            topology_key: c.topology_key.clone(),
            selector,
            min_domains,
            honor_node_affinity: policy(
                "nodeAffinityPolicy",
                c.node_affinity_policy.as_ref(),
                true,
            )?,
            honor_taints: policy("nodeTaintsPolicy", c.node_taints_policy.as_ref(), false)?,
        },
    ))
}

/// Host ports of the containers that run for the pod's whole life: the
/// containers and the restartable init containers (sidecars).
fn host_ports(spec: &core::PodSpec) -> Result<Vec<HostPort>, ConstraintError> {
    let sidecars = spec
        .init_containers
        .iter()
        .flatten()
        .filter(|c| c.restart_policy.as_deref() == Some("Always"));
    let mut out = Vec::new();
    for c in spec.containers.iter().chain(sidecars) {
        for p in c.ports.iter().flatten() {
            let Some(port) = p.host_port.filter(|&p| p > 0) else {
                continue;
            };
            let Ok(port) = u16::try_from(port) else {
                return fail(
                    format!("containers[{}].ports", c.name),
                    Problem::HostPortRange(port),
                );
            };
            out.push(HostPort::new(
                p.protocol.as_deref().unwrap_or(""),
                p.host_ip.as_deref().unwrap_or(""),
                port,
            ));
        }
    }
    Ok(out)
}

/// A preferred term's weight, which the API bounds to 1–100.
fn preferred_weight(field: &str, weight: i32) -> Result<u32, ConstraintError> {
    match u32::try_from(weight) {
        Ok(w) if (1..=100).contains(&w) => Ok(w),
        _ => fail(format!("{field}.weight"), Problem::Weight(weight)),
    }
}

/// The pod's constraints beyond node selector and tolerations.
///
/// # Errors
/// A constraint Dragon cannot evaluate, with its field path.
pub fn constraints(
    spec: &core::PodSpec,
    namespace: &str,
    labels: &Labels,
) -> Result<Constraints, ConstraintError> {
    let affinity = spec.affinity.as_ref();
    let node_affinity = affinity
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|n| {
            n.required_during_scheduling_ignored_during_execution
                .as_ref()
        })
        .map(|s| {
            node_selector(
                "affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution",
                s,
            )
        })
        .transpose()?;
    let mut preferred_node_affinity = Vec::new();
    let preferred = affinity
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|n| {
            n.preferred_during_scheduling_ignored_during_execution
                .as_ref()
        });
    for (i, p) in preferred.into_iter().flatten().enumerate() {
        let field =
            format!("affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[{i}]");
        let weight = preferred_weight(&field, p.weight)?;
        let term = node_selector_term(&format!("{field}.preference"), &p.preference)?;
        preferred_node_affinity.push(PreferredTerm { weight, term });
    }
    let terms = |what: &str, list: Option<&Vec<core::PodAffinityTerm>>| {
        list.into_iter()
            .flatten()
            .enumerate()
            .map(|(i, t)| {
                affinity_term(
                    &format!("affinity.{what}.requiredDuringSchedulingIgnoredDuringExecution[{i}]"),
                    t,
                    namespace,
                    labels,
                )
            })
            .collect::<Result<Vec<_>, _>>()
    };
    let pod_affinity_spec = affinity.and_then(|a| a.pod_affinity.as_ref());
    let pod_anti_affinity_spec = affinity.and_then(|a| a.pod_anti_affinity.as_ref());
    let pod_affinity = terms(
        "podAffinity",
        pod_affinity_spec.and_then(|a| {
            a.required_during_scheduling_ignored_during_execution
                .as_ref()
        }),
    )?;
    let pod_anti_affinity = terms(
        "podAntiAffinity",
        pod_anti_affinity_spec.and_then(|a| {
            a.required_during_scheduling_ignored_during_execution
                .as_ref()
        }),
    )?;
    let weighted = |what: &str, list: Option<&Vec<core::WeightedPodAffinityTerm>>| {
        list.into_iter()
            .flatten()
            .enumerate()
            .map(|(i, t)| {
                let field =
                    format!("affinity.{what}.preferredDuringSchedulingIgnoredDuringExecution[{i}]");
                let weight = preferred_weight(&field, t.weight)?;
                let term = affinity_term(
                    &format!("{field}.podAffinityTerm"),
                    &t.pod_affinity_term,
                    namespace,
                    labels,
                )?;
                Ok(WeightedPodAffinityTerm { weight, term })
            })
            .collect::<Result<Vec<_>, ConstraintError>>()
    };
    let preferred_pod_affinity = weighted(
        "podAffinity",
        pod_affinity_spec.and_then(|a| {
            a.preferred_during_scheduling_ignored_during_execution
                .as_ref()
        }),
    )?;
    let preferred_pod_anti_affinity = weighted(
        "podAntiAffinity",
        pod_anti_affinity_spec.and_then(|a| {
            a.preferred_during_scheduling_ignored_during_execution
                .as_ref()
        }),
    )?;
    let (mut spread_constraints, mut preferred_spread) = (Vec::new(), Vec::new());
    for (i, c) in spec
        .topology_spread_constraints
        .iter()
        .flatten()
        .enumerate()
    {
        match spread(&format!("topologySpreadConstraints[{i}]"), c, labels)? {
            (Unsatisfiable::DoNotSchedule, c) => spread_constraints.push(c),
            (Unsatisfiable::ScheduleAnyway, c) => preferred_spread.push(c),
        }
    }
    Ok(Constraints {
        node_affinity,
        host_ports: host_ports(spec)?,
        pod_affinity,
        pod_anti_affinity,
        spread: spread_constraints,
        preferred_node_affinity,
        preferred_pod_affinity,
        preferred_pod_anti_affinity,
        preferred_spread,
        // Filled from the claims' volumes by the snapshot, which knows them.
        volume_node_affinity: Vec::new(),
    })
}
