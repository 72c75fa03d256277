//! A gang's topology constraint: the level (a node label key) it holds
//! to, and how strictly (`crate::cluster::topology` interns the levels).

use serde::{Deserialize, Serialize};

/// How a gang holds to its level.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TopologyMode {
    /// Every pod in one domain, or none placed.
    Required,
    /// One domain of the level if possible, else of the narrowest wider
    /// level that holds the gang, else anywhere.
    Preferred,
}

/// A gang's topology constraint: the level (a node label key) and how
/// strictly it holds.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct TopologyConstraint {
    pub key: String,
    pub mode: TopologyMode,
}

impl TopologyConstraint {
    pub fn required(key: impl Into<String>) -> TopologyConstraint {
        TopologyConstraint {
            key: key.into(),
            mode: TopologyMode::Required,
        }
    }

    pub fn preferred(key: impl Into<String>) -> TopologyConstraint {
        TopologyConstraint {
            key: key.into(),
            mode: TopologyMode::Preferred,
        }
    }
}

impl std::fmt::Display for TopologyConstraint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mode = match self.mode {
            TopologyMode::Required => "required",
            TopologyMode::Preferred => "preferred",
        };
        write!(f, "{mode} topology {}", self.key)
    }
}
