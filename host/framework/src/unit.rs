//! What the framework schedules as one: a job's gang or a lone pod.

use crate::names::{JobKey, PodKey};
use serde::{Serialize, Serializer};

/// A unit of scheduling, named by the job or the pod it stands for.
///
/// Shown as `job/NAME` or `pod/KEY` (the form logs and JSON reports use);
/// drivers match on the variant rather than parse that text back.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum UnitKey {
    /// The pods of a job (a PodGroup), placed together when it is a gang.
    Job(JobKey),
    /// A pod of no job, placed on its own.
    Pod(PodKey),
}

impl UnitKey {
    /// The unit of job `name`.
    pub fn job(name: impl Into<JobKey>) -> UnitKey {
        UnitKey::Job(name.into())
    }

    /// The unit of lone pod `key`.
    pub fn pod(key: impl Into<PodKey>) -> UnitKey {
        UnitKey::Pod(key.into())
    }

    /// The job's name, for a job's unit.
    pub fn job_name(&self) -> Option<&str> {
        match self {
            UnitKey::Job(name) => Some(name),
            UnitKey::Pod(_) => None,
        }
    }
}

/// What a policy error was about: its unit, or the queue order when it
/// names none.
pub fn subject(unit: Option<&UnitKey>) -> String {
    unit.map_or_else(|| "(queue order)".to_string(), UnitKey::to_string)
}

impl std::fmt::Display for UnitKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            UnitKey::Job(name) => write!(f, "job/{name}"),
            UnitKey::Pod(key) => write!(f, "pod/{key}"),
        }
    }
}

impl Serialize for UnitKey {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_unit_shows_as_its_kind_and_name() {
        assert_eq!(UnitKey::job("ns/g").to_string(), "job/ns/g");
        assert_eq!(UnitKey::pod("ns/p").to_string(), "pod/ns/p");
        assert_eq!(UnitKey::job("g").job_name(), Some("g"));
        assert_eq!(UnitKey::pod("p").job_name(), None);
    }
}
