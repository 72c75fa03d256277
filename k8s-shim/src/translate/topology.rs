//! Where a gang asks to be kept together: a topology level (a node label
//! key), required or preferred, read from each place workloads say it.
//!
//! - a `scheduling.k8s.io/v1beta1` PodGroup's
//!   `spec.schedulingConstraints.topology[0].key` (required);
//! - a scheduler-plugins PodGroup's `dragon.dev/topology-required` or
//!   `dragon.dev/topology-preferred` annotation;
//! - Kueue's podset annotations on the pods
//!   (`kueue.x-k8s.io/podset-required-topology`,
//!   `kueue.x-k8s.io/podset-preferred-topology`).
//!
//! Sources that disagree are an error on the gang, never a silent choice.

use std::collections::BTreeMap;

use dragon_framework::TopologyConstraint;
use k8s_openapi::api::core::v1 as core;
use k8s_openapi::api::scheduling::v1beta1 as scheduling;

/// On a scheduler-plugins PodGroup: every pod in one domain of this level.
pub const REQUIRED: &str = "dragon.dev/topology-required";
/// On a scheduler-plugins PodGroup: one domain of this level if possible.
pub const PREFERRED: &str = "dragon.dev/topology-preferred";
/// Kueue's topology annotations on a podset's pods.
pub const KUEUE_REQUIRED: &str = "kueue.x-k8s.io/podset-required-topology";
pub const KUEUE_PREFERRED: &str = "kueue.x-k8s.io/podset-preferred-topology";

/// A topology constraint that cannot be used, as the gang's reason says.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TopologyProblem {
    #[error("{0} must name a node label key")]
    NoKey(String),
    #[error("set one of {required} and {preferred}, not both")]
    Both { required: String, preferred: String },
    #[error("conflicting topology constraints: {first} asks for {had}, {then} for {wants}")]
    Conflict {
        first: String,
        had: TopologyConstraint,
        then: String,
        wants: TopologyConstraint,
    },
}

/// The constraint a pair of annotations (`required`, `preferred`) states.
///
/// # Errors
/// Both are set, or one is empty.
pub fn from_annotations(
    annotations: &BTreeMap<String, String>,
    (required, preferred): (&str, &str),
) -> Result<Option<TopologyConstraint>, TopologyProblem> {
    let get = |k: &str| match annotations.get(k) {
        Some(v) if v.trim().is_empty() => Err(TopologyProblem::NoKey(k.to_string())),
        v => Ok(v),
    };
    match (get(required)?, get(preferred)?) {
        (Some(_), Some(_)) => Err(TopologyProblem::Both {
            required: required.to_string(),
            preferred: preferred.to_string(),
        }),
        (Some(k), None) => Ok(Some(TopologyConstraint::required(k.trim()))),
        (None, Some(k)) => Ok(Some(TopologyConstraint::preferred(k.trim()))),
        (None, None) => Ok(None),
    }
}

/// What a pod's Kueue podset annotations ask of its gang.
///
/// # Errors
/// Both are set, or one is empty: named with the pod.
pub fn of_pod(p: &core::Pod) -> Result<Option<TopologyConstraint>, super::TranslateError> {
    let empty = BTreeMap::new();
    let annotations = p.metadata.annotations.as_ref().unwrap_or(&empty);
    from_annotations(annotations, (KUEUE_REQUIRED, KUEUE_PREFERRED))
        .map_err(|m| super::err(&format!("pod {}", super::pod_key(p)), m.to_string()))
}

/// A native PodGroup's required topology (the API allows one entry).
pub fn native(pg: &scheduling::PodGroup) -> Option<TopologyConstraint> {
    let list = pg.spec.scheduling_constraints.as_ref()?.topology.as_ref()?;
    list.first()
        .filter(|t| !t.key.is_empty())
        .map(|t| TopologyConstraint::required(&t.key))
}

/// The gang's one constraint from its group's and its pods': they must
/// agree.
///
/// # Errors
/// Two sources ask for different constraints, named.
pub fn of_gang<'a>(
    group: Option<TopologyConstraint>,
    pods: impl IntoIterator<Item = (&'a str, &'a TopologyConstraint)>,
) -> Result<Option<TopologyConstraint>, TopologyProblem> {
    let mut chosen: Option<(String, TopologyConstraint)> =
        group.map(|c| ("its PodGroup".to_string(), c));
    for (pod, c) in pods {
        match &chosen {
            None => chosen = Some((format!("pod {pod}"), c.clone())),
            Some((_, had)) if had == c => {}
            Some((first, had)) => {
                return Err(TopologyProblem::Conflict {
                    first: first.clone(),
                    had: had.clone(),
                    then: format!("pod {pod}"),
                    wants: c.clone(),
                });
            }
        }
    }
    Ok(chosen.map(|(_, c)| c))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ann(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn annotations_give_a_required_or_preferred_level_and_refuse_both_or_empty() {
        let keys = (REQUIRED, PREFERRED);
        assert_eq!(
            from_annotations(&ann(&[(REQUIRED, "rack")]), keys),
            Ok(Some(TopologyConstraint::required("rack")))
        );
        assert_eq!(
            from_annotations(&ann(&[(PREFERRED, " block ")]), keys),
            Ok(Some(TopologyConstraint::preferred("block")))
        );
        assert_eq!(from_annotations(&ann(&[]), keys), Ok(None));
        assert_eq!(
            from_annotations(&ann(&[(REQUIRED, "rack"), (PREFERRED, "block")]), keys),
            Err(TopologyProblem::Both {
                required: REQUIRED.into(),
                preferred: PREFERRED.into()
            })
        );
        assert_eq!(
            from_annotations(
                &ann(&[(KUEUE_REQUIRED, "")]),
                (KUEUE_REQUIRED, KUEUE_PREFERRED)
            ),
            Err(TopologyProblem::NoKey(KUEUE_REQUIRED.into()))
        );
    }

    #[test]
    fn a_native_podgroup_requires_its_topology_key_and_a_podgroup_may_not_contradict_it() {
        let pg: scheduling::PodGroup = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "g", "namespace": "ml"},
            "spec": {"schedulingPolicy": {"gang": {"minCount": 2}},
                     "schedulingConstraints": {"topology": [{"key": "rack"}]}}
        }))
        .unwrap();
        assert_eq!(native(&pg), Some(TopologyConstraint::required("rack")));
        let (spec, _) = crate::translate::native_podgroup_spec(&pg);
        let job = |a: &[(&str, &str)]| crate::translate::job("ml/g", &spec, &ann(a), 0, 2);
        assert_eq!(
            job(&[]).unwrap().topology,
            Some(TopologyConstraint::required("rack"))
        );
        assert_eq!(
            job(&[(PREFERRED, "block")]).unwrap_err().to_string(),
            "podgroup ml/g: conflicting topology constraints: its spec asks for required topology rack, its annotations for preferred topology block"
        );
    }

    #[test]
    fn a_gang_takes_the_one_constraint_its_sources_agree_on_and_names_a_conflict() {
        let rack = TopologyConstraint::required("rack");
        let block = TopologyConstraint::preferred("block");
        assert_eq!(
            of_gang(Some(rack.clone()), [("ml/a", &rack), ("ml/b", &rack)]),
            Ok(Some(rack.clone()))
        );
        assert_eq!(of_gang(None, [("ml/a", &block)]), Ok(Some(block.clone())));
        assert_eq!(of_gang(None, []), Ok(None));
        assert_eq!(
            of_gang(Some(rack.clone()), [("ml/a", &block)]).map_err(|e| e.to_string()),
            Err(
                "conflicting topology constraints: its PodGroup asks for required topology rack, pod ml/a for preferred topology block"
                    .into()
            )
        );
        assert_eq!(
            of_gang(None, [("ml/a", &rack), ("ml/b", &block)]).map_err(|e| e.to_string()),
            Err(
                "conflicting topology constraints: pod ml/a asks for required topology rack, pod ml/b for preferred topology block"
                    .into()
            )
        );
    }
}
