//! Why a unit could not be placed, as a value: drivers choose what to tell
//! from its kind (a gated pod's condition is `SchedulingGated`), and the
//! text users read comes from one `Display`.

use crate::names::PodKey;
use std::fmt;

use serde::{Serialize, Serializer};

/// Why a unit stays pending after an attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unschedulable {
    /// Members have scheduling gates (each pod with its gates, at least
    /// one): the unit is not tried until they go.
    Gated { pods: Vec<(PodKey, Vec<String>)> },
    /// Its driver holds the job (an invalid PodGroup), saying why.
    Held(String),
    /// A new gang has fewer than `minMember` pods so far.
    MissingMembers { present: u32, min_member: u32 },
    /// The cluster does not have the PodGroup's `minResources` free.
    ShortOfMinResources { short: Vec<String> },
    /// The policy's pre-filter skipped it, with its reason.
    Skipped {
        reason: String,
        preemption: Option<String>,
    },
    /// No node fits: the built-in filters' and the policy's rejections.
    NoFit {
        rejections: String,
        preemption: Option<String>,
    },
}

impl Unschedulable {
    /// The pods with scheduling gates the unit waits for.
    pub fn gated_pods(&self) -> impl Iterator<Item = &str> {
        let pods = match self {
            Unschedulable::Gated { pods } => pods.as_slice(),
            _ => &[],
        };
        pods.iter().map(|(pod, _)| pod.as_str())
    }

    /// Say why preemption did not place it either (for a unit that fits
    /// nowhere; others are not preempted for).
    pub(crate) fn note_preemption(&mut self, why: &str) {
        if let Unschedulable::Skipped { preemption, .. } | Unschedulable::NoFit { preemption, .. } =
            self
        {
            *preemption = Some(why.to_string());
        }
    }
}

impl fmt::Display for Unschedulable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (text, preemption) = match self {
            Unschedulable::Gated { pods } => {
                let (pod, gates) = pods.first().map_or(("", &[][..]), |(p, g)| (p, g));
                return write!(
                    f,
                    "scheduling gated: pod {pod} has scheduling gates [{}]",
                    gates.join(", ")
                );
            }
            Unschedulable::Held(reason) => return f.write_str(reason),
            Unschedulable::MissingMembers {
                present,
                min_member,
            } => {
                return write!(
                    f,
                    "waiting for the gang's pods to be created: {present} of minMember {min_member} exist"
                );
            }
            Unschedulable::ShortOfMinResources { short } => {
                return write!(
                    f,
                    "the cluster does not have the PodGroup's minResources free: short of {}",
                    short.join(", ")
                );
            }
            Unschedulable::Skipped { reason, preemption } => (reason, preemption),
            Unschedulable::NoFit {
                rejections,
                preemption,
            } => (rejections, preemption),
        };
        f.write_str(text)?;
        match preemption {
            Some(why) => write!(f, "; preemption: {why}"),
            None => Ok(()),
        }
    }
}

/// Recorded as the text users read, so recordings keep their format.
impl Serialize for Unschedulable {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_reason_reads_as_before_and_preemption_is_added_only_where_it_was_tried() {
        let gated = Unschedulable::Gated {
            pods: vec![
                ("ml/a".into(), vec!["x".into(), "y".into()]),
                ("ml/b".into(), vec!["x".into()]),
            ],
        };
        assert_eq!(
            gated.to_string(),
            "scheduling gated: pod ml/a has scheduling gates [x, y]"
        );
        assert_eq!(gated.gated_pods().collect::<Vec<_>>(), ["ml/a", "ml/b"]);
        let mut fit = Unschedulable::NoFit {
            rejections: "0/2 nodes fit".into(),
            preemption: None,
        };
        fit.note_preemption("no lower-priority work");
        assert_eq!(
            fit.to_string(),
            "0/2 nodes fit; preemption: no lower-priority work"
        );
        let mut missing = Unschedulable::MissingMembers {
            present: 3,
            min_member: 5,
        };
        missing.note_preemption("ignored");
        assert_eq!(
            missing.to_string(),
            "waiting for the gang's pods to be created: 3 of minMember 5 exist"
        );
        assert_eq!(
            serde_json::to_value(&missing).unwrap(),
            serde_json::json!(missing.to_string())
        );
    }
}
