//! How the framework acts on the cluster. A round is decided first and
//! applied after: [`crate::Scheduler::plan_round`] names the binds,
//! [`crate::Scheduler::settle_round`] takes their results and returns the
//! rest as [`Effect`]s, and the driver reports back what became of each
//! (`released`, `scaled`). The shim applies them asynchronously over the
//! Kubernetes API; [`Binder`] and [`Scaler`] apply them one call at a time
//! for the simulator, tests and benchmarks.

use std::collections::VecDeque;

use serde::{Deserialize, Serialize};

use crate::cycle::BindGroup;
use crate::names::{JobKey, NodeName, PodKey};
use crate::unit::UnitKey;

/// Why an API call failed, as far as the framework cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ApiErrorKind {
    /// The object changed or is already in the asked state (HTTP 409): a
    /// pod already bound elsewhere. Trying again as is will not help.
    Conflict,
    /// The object is gone (HTTP 404).
    NotFound,
    /// The server refused for load (HTTP 429) after the client's retries.
    Throttled,
    /// The server refused the request itself (other 4xx: invalid,
    /// forbidden, a pod with scheduling gates).
    Refused,
    /// No answer, or a server error (5xx, a broken connection, a timeout).
    Unavailable,
}

/// A failed API call: its kind and the server's message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[error("{message}")]
pub struct ApiError {
    pub kind: ApiErrorKind,
    pub message: String,
}

impl ApiError {
    /// An error of `kind` saying `message`.
    pub fn new(kind: ApiErrorKind, message: impl Into<String>) -> ApiError {
        ApiError {
            kind,
            message: message.into(),
        }
    }

    /// The error of an HTTP status `code`.
    pub fn from_status(code: u16, message: impl Into<String>) -> ApiError {
        let kind = match code {
            404 | 410 => ApiErrorKind::NotFound,
            409 => ApiErrorKind::Conflict,
            429 => ApiErrorKind::Throttled,
            400..=499 => ApiErrorKind::Refused,
            _ => ApiErrorKind::Unavailable,
        };
        ApiError::new(kind, message)
    }
}

/// What a driver must do after a round's binds, in order.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Effect {
    /// Undo the bind of `pod`, a member of `unit` whose siblings could not
    /// all be bound, so the gang is released whole rather than left half
    /// running; report the outcome with `Scheduler::released`.
    Release { unit: UnitKey, pod: PodKey },
    /// Set a job's worker count; report the outcome with
    /// `Scheduler::scaled`.
    Scale(ScaleRequest),
    /// Evict a preemption victim's pods, all or none; report the outcome
    /// with `Scheduler::evicted`.
    Evict(Eviction),
}

/// A unit evicted to make room for a higher-priority one: every placed
/// member of a gang, or a lone pod, never part of a gang.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Eviction {
    pub victim: UnitKey,
    /// Its pods holding a node.
    pub pods: Vec<PodKey>,
    /// The unit it makes room for.
    pub preemptor: UnitKey,
    /// What to tell the victim (an Event in Kubernetes).
    pub message: String,
}

/// A worker count to set on a job (its `/scale` subresource in Kubernetes).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ScaleRequest {
    pub job: JobKey,
    /// Workers before.
    pub from: u32,
    /// Workers asked for.
    pub workers: u32,
    /// Why (the policy's reason, or the admission's).
    pub reason: String,
    pub cause: ScaleCause,
}

/// Who asked for a scale.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ScaleCause {
    /// A gang was admitted below its requested size: its surplus pending
    /// workers go.
    Admission,
    /// The policy's scale step.
    Policy,
    /// An elastic job shrunk towards its minimum to make room for a
    /// higher-priority unit, rather than evicted.
    Preemption,
}

/// Binds pods to nodes, one call at a time. The shim posts Binding
/// subresources; the simulator records the placement.
pub trait Binder {
    /// Bind `pod` to `node`.
    ///
    /// # Errors
    /// Why the bind failed; the framework releases the gang.
    fn bind(&mut self, pod: &str, node: &str) -> Result<(), ApiError>;

    /// Bind every pod of a round's groups: one result per pod, in order.
    /// The default binds one after another (a simulated or recorded
    /// cluster has nothing to write before a Binding).
    fn bind_many(&mut self, groups: &[BindGroup]) -> Vec<Result<(), ApiError>> {
        groups
            .iter()
            .flat_map(|g| &g.pods)
            .map(|b| self.bind(&b.pod, &b.node))
            .collect()
    }

    /// Undo the bind of a gang member whose siblings could not be bound. A
    /// bound pod cannot be unbound in Kubernetes: the shim deletes it when a
    /// controller will recreate it pending, and otherwise keeps it
    /// ([`Release::Kept`]), since deleting it would lose it for good.
    ///
    /// # Errors
    /// Why the pod could not be released.
    fn unbind(&mut self, pod: &str) -> Result<Release, ApiError>;

    /// Evict every pod of a preemption victim, or none: a driver that can
    /// be refused one eviction (a PodDisruptionBudget) checks them all
    /// first. The pods stay in the snapshot until the driver removes them
    /// (in Kubernetes, once they have terminated).
    ///
    /// # Errors
    /// Why the victim could not be evicted; nothing of it was.
    fn evict(&mut self, eviction: &Eviction) -> Result<(), ApiError>;
}

/// What became of a bound gang member the framework released.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Release {
    /// Unbound (in Kubernetes: deleted, and its controller makes a fresh
    /// pending copy).
    Unbound,
    /// Left bound: nothing would recreate it. It stays a running member of
    /// its gang, which places the rest when it can.
    Kept,
}

/// Changes a job's worker count, one call at a time.
pub trait Scaler {
    /// Set `job`'s workers to `workers`.
    ///
    /// # Errors
    /// Why the scale could not be applied.
    fn scale(&mut self, job: &str, workers: u32, reason: &str) -> Result<(), ApiError>;
}

/// A [`Binder`] and [`Scaler`] that records what it is asked and always
/// succeeds: for `dragon policy run`, tests and benchmarks.
#[derive(Debug, Default, Clone)]
pub struct RecordingIo {
    /// `(pod, node)` in bind order.
    pub binds: Vec<(PodKey, NodeName)>,
    /// Pods unbound.
    pub unbinds: Vec<PodKey>,
    /// `(job, workers, reason)` in order.
    pub scales: Vec<(JobKey, u32, String)>,
    /// Preemption victims evicted, in order.
    pub evictions: Vec<Eviction>,
}

impl Binder for RecordingIo {
    fn bind(&mut self, pod: &str, node: &str) -> Result<(), ApiError> {
        self.binds.push((pod.into(), node.into()));
        Ok(())
    }

    fn unbind(&mut self, pod: &str) -> Result<Release, ApiError> {
        self.unbinds.push(pod.into());
        Ok(Release::Unbound)
    }

    fn evict(&mut self, eviction: &Eviction) -> Result<(), ApiError> {
        self.evictions.push(eviction.clone());
        Ok(())
    }
}

impl Scaler for RecordingIo {
    fn scale(&mut self, job: &str, workers: u32, reason: &str) -> Result<(), ApiError> {
        self.scales.push((job.into(), workers, reason.to_string()));
        Ok(())
    }
}

/// What a driver answered the framework's calls in one step, by kind and
/// in order: the round's binds, then the releases, scales and evictions of
/// its effects (a scale step has scales only). Kept in a recording so a
/// replay meets the same answers; as a [`Binder`] and [`Scaler`] it gives
/// them back in order, and success once a kind has none left (the answer
/// the simulator always gives, so its recordings keep none).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Answers {
    #[serde(default, skip_serializing_if = "VecDeque::is_empty")]
    pub binds: VecDeque<Result<(), ApiError>>,
    #[serde(default, skip_serializing_if = "VecDeque::is_empty")]
    pub releases: VecDeque<Result<Release, ApiError>>,
    #[serde(default, skip_serializing_if = "VecDeque::is_empty")]
    pub scales: VecDeque<Result<(), ApiError>>,
    #[serde(default, skip_serializing_if = "VecDeque::is_empty")]
    pub evictions: VecDeque<Result<(), ApiError>>,
}

impl Answers {
    /// Whether every answer is a success (or there is none).
    pub fn all_succeeded(&self) -> bool {
        self.binds.iter().all(Result::is_ok)
            && self.releases.iter().all(|r| r == &Ok(Release::Unbound))
            && self.scales.iter().all(Result::is_ok)
            && self.evictions.iter().all(Result::is_ok)
    }
}

impl Binder for Answers {
    fn bind(&mut self, _pod: &str, _node: &str) -> Result<(), ApiError> {
        self.binds.pop_front().unwrap_or(Ok(()))
    }

    fn unbind(&mut self, _pod: &str) -> Result<Release, ApiError> {
        self.releases.pop_front().unwrap_or(Ok(Release::Unbound))
    }

    fn evict(&mut self, _eviction: &Eviction) -> Result<(), ApiError> {
        self.evictions.pop_front().unwrap_or(Ok(()))
    }
}

impl Scaler for Answers {
    fn scale(&mut self, _job: &str, _workers: u32, _reason: &str) -> Result<(), ApiError> {
        self.scales.pop_front().unwrap_or(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_http_status_gives_the_kind_of_error() {
        let kind = |code| ApiError::from_status(code, "m").kind;
        assert_eq!(kind(409), ApiErrorKind::Conflict);
        assert_eq!(kind(404), ApiErrorKind::NotFound);
        assert_eq!(kind(429), ApiErrorKind::Throttled);
        assert_eq!(kind(422), ApiErrorKind::Refused);
        assert_eq!(kind(403), ApiErrorKind::Refused);
        assert_eq!(kind(500), ApiErrorKind::Unavailable);
        assert_eq!(kind(503), ApiErrorKind::Unavailable);
        assert_eq!(
            ApiError::from_status(409, "already assigned").to_string(),
            "already assigned"
        );
    }
}
