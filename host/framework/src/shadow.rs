//! A shadow policy: at every step of the live scheduler, what another
//! policy would have decided on the same snapshot, compared with what the
//! live one did. It never acts: its binds and scales go nowhere.
//!
//! The shadow follows the live run through the same frames a recording
//! holds (see [`crate::record`]): a follower scheduler applies each
//! frame's cluster changes and replays the live policy's step with the
//! driver's answers, so it stays in the live scheduler's state; before
//! each step, the shadow policy decides on a copy of that state. Both run
//! wherever the driver puts them, off the live scheduler's path.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value;

use crate::cycle::SchedulerConfig;
use crate::record::{Frame, Replayer};
use dragon_runtime::Hooks;

/// One subject (a pod, a unit, a job) the two policies decided differently.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Disagreement {
    pub now_ms: u64,
    /// `pod/…`, `job/…`.
    pub subject: String,
    /// What each policy decided, and why.
    pub live: String,
    pub shadow: String,
}

/// One step compared.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Comparison {
    /// Subjects both decided alike.
    pub same: u64,
    pub different: Vec<Disagreement>,
    /// The shadow policy's failures in the step.
    pub errors: Vec<String>,
}

/// Follows a live run frame by frame; see the module's documentation.
pub struct Shadow {
    follower: Replayer,
    config: SchedulerConfig,
    /// Steps where the follower's replay of the live policy did not give
    /// the recorded decisions: the shadow's snapshot may differ from the
    /// live one from there on (a wall-clock round budget that ran out, a
    /// policy that is not a function of its input).
    pub diverged: u64,
}

impl Shadow {
    /// A shadow over an empty cluster, for a live scheduler with the
    /// framework settings `config`.
    pub fn new(config: SchedulerConfig) -> Shadow {
        Shadow {
            follower: Replayer::new(config),
            config,
            diverged: 0,
        }
    }

    /// Start again from an empty cluster: the next frame must rebuild it
    /// (its changes add every node, job and pod).
    pub fn reset(&mut self) {
        self.follower = Replayer::new(self.config);
    }

    /// Follow `frame`: `shadow` decides on the snapshot `live` decided on,
    /// then the follower takes `live`'s step.
    pub fn follow(
        &mut self,
        frame: &Frame,
        live: &dyn Hooks,
        shadow: &dyn Hooks,
        fallback: Option<&dyn Hooks>,
    ) -> Comparison {
        self.follower.apply(frame);
        let aside = self.follower.decide_aside(frame, shadow, fallback);
        let step = self.follower.decide(frame, live, fallback);
        if step.replayed != step.recorded {
            self.diverged += 1;
        }
        let mut c = compare(step.now_ms, &step.recorded, &aside.replayed);
        c.errors = aside.policy_errors;
        c
    }
}

/// Each subject's outcome in a step's decisions (or a scale step's
/// actions): what was decided, and why.
fn outcomes(v: &Value) -> BTreeMap<String, (String, String)> {
    let mut out = BTreeMap::new();
    let text = |d: &Value, k: &str| d.get(k).and_then(Value::as_str).unwrap_or("").to_string();
    for d in v.as_array().into_iter().flatten() {
        let kind = text(d, "kind");
        let (subject, what) = match kind.as_str() {
            "bound" => (
                format!("pod/{}", text(d, "pod")),
                format!("bound to {}", text(d, "node")),
            ),
            "admitted" => (
                text(d, "unit"),
                format!(
                    "admitted with {} workers",
                    d.get("workers").and_then(Value::as_u64).unwrap_or(0)
                ),
            ),
            "unschedulable" | "waiting" | "preempting" | "rejected" | "timed-out"
            | "bind-failed" => (text(d, "unit"), kind.clone()),
            // A scale action.
            "" if d.get("job").is_some() => (
                format!("job/{}", text(d, "job")),
                format!(
                    "scaled to {}",
                    d.get("to").and_then(Value::as_u64).unwrap_or(0)
                ),
            ),
            _ => continue,
        };
        let why = ["reason", "error"]
            .iter()
            .map(|k| text(d, k))
            .find(|r| !r.is_empty())
            .unwrap_or_default();
        out.insert(subject, (what, why));
    }
    out
}

/// Compare the live decisions with the shadow's, subject by subject.
pub fn compare(now_ms: u64, live: &Value, shadow: &Value) -> Comparison {
    let (live, shadow) = (outcomes(live), outcomes(shadow));
    let mut c = Comparison::default();
    let subjects: std::collections::BTreeSet<&String> = live.keys().chain(shadow.keys()).collect();
    let show = |o: Option<&(String, String)>| match o {
        None => "nothing".to_string(),
        Some((what, why)) if why.is_empty() => what.clone(),
        Some((what, why)) => format!("{what}: {why}"),
    };
    for subject in subjects {
        let (l, s) = (live.get(subject), shadow.get(subject));
        if l.map(|o| &o.0) == s.map(|o| &o.0) {
            c.same += 1;
        } else {
            c.different.push(Disagreement {
                now_ms,
                subject: subject.clone(),
                live: show(l),
                shadow: show(s),
            });
        }
    }
    c
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn subjects_are_compared_by_outcome_and_each_side_says_why() {
        let live = json!([
            {"kind": "bound", "pod": "p", "node": "a"},
            {"kind": "bound", "pod": "q", "node": "a"},
            {"kind": "admitted", "unit": "job/j", "pods": 2, "workers": 2, "nodes": 1},
            {"kind": "unschedulable", "unit": "job/k", "reason": "no room"},
            {"kind": "deferred", "units": 3, "budget_ms": 100},
        ]);
        let shadow = json!([
            {"kind": "bound", "pod": "p", "node": "a"},
            {"kind": "bound", "pod": "q", "node": "b"},
            {"kind": "admitted", "unit": "job/j", "pods": 2, "workers": 2, "nodes": 2},
            {"kind": "unschedulable", "unit": "job/k", "reason": "other words"},
            {"kind": "unschedulable", "unit": "pod/r", "reason": "gated"},
        ]);
        let c = compare(5, &live, &shadow);
        assert_eq!(c.same, 3, "{c:?}");
        assert_eq!(
            c.different,
            vec![
                Disagreement {
                    now_ms: 5,
                    subject: "pod/q".into(),
                    live: "bound to a".into(),
                    shadow: "bound to b".into()
                },
                Disagreement {
                    now_ms: 5,
                    subject: "pod/r".into(),
                    live: "nothing".into(),
                    shadow: "unschedulable: gated".into()
                },
            ]
        );
        let scaled = compare(
            6,
            &json!([{"job": "j", "from": 2, "to": 3, "reason": "idle"}]),
            &json!([]),
        );
        assert_eq!(scaled.different[0].live, "scaled to 3: idle");
    }
}
