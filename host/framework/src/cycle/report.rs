//! What a round decided, in order, and what the driver is to do about it.

use std::fmt;

use serde::Serialize;

use super::UnitPlan;
use super::Unschedulable;
use super::{BindGroup, ToBind};
use crate::breaker::BreakerChange;
use crate::io::{ApiError, Effect, ScaleRequest};
use crate::names::{NodeName, PodKey};
use crate::unit::{UnitKey, subject};

/// One outcome of a round, in the order it happened.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Decision {
    /// A pod was bound.
    Bound { pod: PodKey, node: NodeName },
    /// A gang was admitted (all its pods bound in this round).
    Admitted {
        unit: UnitKey,
        pods: u32,
        workers: u32,
        nodes: u32,
    },
    /// A gang holds reservations and waits in permit.
    Waiting {
        unit: UnitKey,
        reserved: u32,
        wait_ms: u64,
    },
    /// A unit could not be placed now.
    Unschedulable {
        unit: UnitKey,
        reason: Unschedulable,
    },
    /// A unit that fits nowhere makes room: lower-priority units evicted
    /// whole, or elastic jobs shrunk towards their minimum (never both).
    /// It is tried again once their pods are gone.
    Preempting {
        unit: UnitKey,
        #[serde(skip_serializing_if = "Vec::is_empty")]
        evicted: Vec<UnitKey>,
        #[serde(skip_serializing_if = "Vec::is_empty")]
        shrunk: Vec<UnitKey>,
    },
    /// Where a preemptor's pods are expected to go once its victims are
    /// gone (a node), or that they no longer are (`None`): Kubernetes'
    /// `status.nominatedNodeName`.
    Nominated {
        unit: UnitKey,
        pods: Vec<(PodKey, Option<NodeName>)>,
    },
    /// A gang was rejected by permit and released.
    Rejected { unit: UnitKey, reason: String },
    /// A gang's permit wait ran out and it was released.
    TimedOut { unit: UnitKey, reason: String },
    /// A bind failed; the gang was released whole, but for `kept`: members
    /// already bound that nothing would recreate if deleted, left bound
    /// (named by the driver that applied the releases).
    BindFailed {
        unit: UnitKey,
        pod: PodKey,
        error: ApiError,
        #[serde(skip_serializing_if = "Vec::is_empty")]
        kept: Vec<PodKey>,
    },
    /// The policy failed; the unit stays pending (fail closed), unless a
    /// `FellBack` follows.
    PolicyError {
        /// The unit, or `None` for the queue order.
        unit: Option<UnitKey>,
        error: String,
    },
    /// After a policy error, the unit was tried with the fallback policy (its
    /// outcome follows). Gangs stay gangs: all pods or none.
    FellBack { unit: UnitKey, policy: String },
    /// The policy was suspended after repeated failures, or serves again.
    Breaker(BreakerChange),
    /// The round's time budget ran out with these units not tried; they
    /// are tried in the next round.
    Deferred { units: u32, budget_ms: u64 },
    /// A job was resized by the framework: admitted below its requested
    /// size, or shrunk to make room for a higher-priority unit.
    Resized {
        unit: UnitKey,
        workers: u32,
        reason: String,
    },
}

/// One line per outcome (a released gang's members kept bound and a
/// preemption's victims take a line each; a preemption with none, none),
/// as `dragon policy run` prints them.
impl fmt::Display for Decision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Decision::Bound { pod, node } => write!(f, "bind         {pod} -> {node}"),
            Decision::Admitted {
                unit,
                pods,
                workers,
                nodes,
            } => write!(
                f,
                "admitted     {unit}: {pods} pods, {workers} workers, on {nodes} node(s)"
            ),
            Decision::Waiting {
                unit,
                reserved,
                wait_ms,
            } => write!(
                f,
                "waiting      {unit}: {reserved} pods reserved, permit waits up to {wait_ms} ms"
            ),
            Decision::Unschedulable { unit, reason } => write!(f, "pending      {unit}: {reason}"),
            Decision::Rejected { unit, reason } => write!(f, "rejected     {unit}: {reason}"),
            Decision::TimedOut { unit, reason } => write!(f, "timed out    {unit}: {reason}"),
            Decision::BindFailed {
                unit,
                pod,
                error,
                kept,
            } => {
                write!(f, "bind failed  {unit} ({pod}): {error}")?;
                for k in kept {
                    write!(
                        f,
                        "\nkept bound   {k}: nothing would recreate it if deleted"
                    )?;
                }
                Ok(())
            }
            Decision::PolicyError { unit, error } => {
                write!(f, "error        {}: {error}", subject(unit.as_ref()))
            }
            Decision::FellBack { unit, policy } => {
                write!(f, "fell back    {unit}: tried with {policy}")
            }
            Decision::Breaker(BreakerChange::Opened {
                policy,
                failures,
                until_ms,
            }) => write!(
                f,
                "suspended    {policy}: {failures} consecutive failures, until t = {} s",
                *until_ms as f64 / 1e3
            ),
            Decision::Breaker(BreakerChange::Closed { policy }) => {
                write!(f, "resumed      {policy}")
            }
            Decision::Deferred { units, budget_ms } => write!(
                f,
                "deferred     {units} unit(s): the round's {budget_ms} ms budget ran out"
            ),
            Decision::Resized {
                unit,
                workers,
                reason,
            } => write!(f, "resized      {unit} -> {workers} workers: {reason}"),
            Decision::Nominated { unit, pods } => {
                let pods: Vec<String> = pods
                    .iter()
                    .map(|(p, n)| format!("{p} -> {}", n.as_deref().unwrap_or("(none)")))
                    .collect();
                write!(f, "nominated    {unit}: {}", pods.join(", "))
            }
            Decision::Preempting {
                unit,
                evicted,
                shrunk,
            } => {
                let lines = evicted
                    .iter()
                    .map(|v| format!("preempting   {unit}: evicts {v}"))
                    .chain(
                        shrunk
                            .iter()
                            .map(|v| format!("preempting   {unit}: shrinks {v} to its minimum")),
                    );
                for (i, line) in lines.enumerate() {
                    if i > 0 {
                        f.write_str("\n")?;
                    }
                    f.write_str(&line)?;
                }
                Ok(())
            }
        }
    }
}

/// All outcomes of one round.
#[derive(Debug, Clone, Default, Serialize)]
pub struct RoundReport {
    /// The round's time, ms.
    pub now_ms: u64,
    /// What happened, in order.
    pub decisions: Vec<Decision>,
    /// What the driver is to do about it, in order (see [`Effect`]).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub effects: Vec<Effect>,
}

impl RoundReport {
    /// Name `pod` among the members of `unit` kept bound after its bind
    /// failed.
    pub(crate) fn kept(&mut self, unit: &UnitKey, pod: PodKey) {
        let failed = self.decisions.iter_mut().rev().find_map(|d| match d {
            Decision::BindFailed { unit: u, kept, .. } if u == unit => Some(kept),
            _ => None,
        });
        if let Some(kept) = failed {
            kept.push(pod);
        }
    }

    /// Pods bound in this round.
    pub fn bound(&self) -> impl Iterator<Item = (&str, &str)> {
        self.decisions.iter().filter_map(|d| match d {
            Decision::Bound { pod, node } => Some((pod.as_str(), node.as_str())),
            _ => None,
        })
    }
}

/// A round decided and not yet bound (see [`Scheduler::plan_round`](crate::Scheduler::plan_round)). Its
/// pods are reserved until it is settled.
#[derive(Debug)]
#[must_use = "a planned round holds reservations until it is settled"]
pub struct PlannedRound {
    pub(super) report: RoundReport,
    pub(super) units: Vec<UnitPlan>,
    pub(super) to_bind: Vec<ToBind>,
    /// What `to_bind` asks of the driver, group for group.
    pub(super) groups: Vec<BindGroup>,
}

impl PlannedRound {
    /// The groups to bind, in order, each pod with its node and what must
    /// be written before its Binding.
    pub fn groups(&self) -> &[BindGroup] {
        &self.groups
    }

    /// `(pod, node)` to bind, in order: the groups' pods one after another.
    pub fn binds(&self) -> impl Iterator<Item = (&PodKey, &NodeName)> {
        self.groups
            .iter()
            .flat_map(|g| &g.pods)
            .map(|b| (&b.pod, &b.node))
    }
}

impl ScaleRequest {
    /// The decision a round reports for a scale of its own (an admission's
    /// or a preemption's) once applied, or not.
    pub fn outcome(&self, result: Result<(), ApiError>) -> Decision {
        let unit = UnitKey::job(&self.job);
        match result {
            Ok(()) => Decision::Resized {
                unit,
                workers: self.workers,
                reason: self.reason.clone(),
            },
            Err(e) => Decision::PolicyError {
                unit: Some(unit),
                error: format!(
                    "could not shrink the job to {} workers ({}): {e}",
                    self.workers, self.reason
                ),
            },
        }
    }
}
