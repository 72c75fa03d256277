//! Teams sharing a cluster: queues with a weight, a guaranteed number of
//! GPUs and a limit on what they may borrow beyond it, possibly under a
//! parent queue. A job belongs to at most one queue; the framework tells
//! policies, per queue, what its jobs hold and ask for.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use crate::names::QueueName;

/// The most queues a cluster or a trace may declare.
pub const MAX_QUEUES: usize = 256;

/// A queue as a trace or dragon-scheduler's configuration declares it.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct QueueSpec {
    pub name: QueueName,
    /// Its share of what is left once every guarantee is met, relative to
    /// the other queues' weights.
    #[serde(default = "one")]
    pub weight: f64,
    /// GPUs it is owed whenever its jobs ask for them.
    #[serde(default)]
    pub guaranteed_gpus: u32,
    /// At most this many GPUs beyond its guarantee; none: no limit.
    #[serde(default)]
    pub borrowing_limit_gpus: Option<u32>,
    /// The queue it belongs to, whose guarantee covers its own.
    #[serde(default)]
    pub parent: Option<QueueName>,
}

fn one() -> f64 {
    1.0
}

impl QueueSpec {
    /// Its weight in thousandths, at least 1 (what interface 0.3 carries).
    pub fn weight_milli(&self) -> u32 {
        (self.weight * 1000.0)
            .round()
            .clamp(1.0, f64::from(u32::MAX)) as u32
    }
}

/// Each queue's parent, an index into `queues` (none for a top-level
/// queue, or a parent that is not among them).
pub fn parent_indices(queues: &[QueueSpec]) -> Vec<Option<usize>> {
    queues
        .iter()
        .map(|q| {
            let p = q.parent.as_ref()?;
            queues.iter().position(|x| &x.name == p)
        })
        .collect()
}

/// `own[q]` summed, for each queue, over it and its descendants: what a
/// parent's subtree holds or asks for. `parent` must form a tree (as
/// [`check_queues`] ensures); a longer chain is cut at the list's length.
pub fn subtree_sums(parent: &[Option<usize>], own: &[u64]) -> Vec<u64> {
    let mut sums = own.to_vec();
    for (q, &v) in own.iter().enumerate() {
        let mut at = parent.get(q).copied().flatten();
        for _ in 0..parent.len() {
            let Some(a) = at.filter(|&a| a < sums.len()) else {
                break;
            };
            sums[a] = sums[a].saturating_add(v);
            at = parent.get(a).copied().flatten();
        }
    }
    sums
}

/// Why a list of queues cannot be used; `queues[i]` names the entry.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum QueuesError {
    #[error("queues: {0} queues is more than the {MAX_QUEUES} supported")]
    TooMany(usize),
    #[error("queues[{0}].name: must not be empty")]
    EmptyName(usize),
    #[error("queues[{0}] ({1}).name: another queue already has this name")]
    Duplicate(usize, QueueName),
    #[error("queues[{0}] ({1}).weight: must be a positive number, got {2}")]
    Weight(usize, QueueName, f64),
    #[error("queues[{0}] ({1}).parent: no queue is named `{2}`")]
    UnknownParent(usize, QueueName, QueueName),
    #[error("queues[{0}] ({1}).parent: `{2}` is its own ancestor")]
    Cycle(usize, QueueName, QueueName),
    #[error(
        "queues[{0}] ({1}).guaranteed_gpus: its children are guaranteed {2} GPUs, more than its {3}"
    )]
    ChildrenExceed(usize, QueueName, u64, u32),
    #[error("queues: top-level queues are guaranteed {0} GPUs, more than the cluster's {1}")]
    RootsExceed(u64, u64),
}

/// Check `queues`: unique names, positive weights, parents that exist
/// without cycles, children within their parent's guarantee and, given the
/// cluster's GPUs, top-level guarantees within them.
///
/// # Errors
/// The first problem found, naming the queue.
pub fn check_queues(queues: &[QueueSpec], total_gpus: Option<u64>) -> Result<(), QueuesError> {
    if queues.len() > MAX_QUEUES {
        return Err(QueuesError::TooMany(queues.len()));
    }
    let mut names = BTreeSet::new();
    for (i, q) in queues.iter().enumerate() {
        if q.name.is_empty() {
            return Err(QueuesError::EmptyName(i));
        }
        if !names.insert(q.name.as_str()) {
            return Err(QueuesError::Duplicate(i, q.name.clone()));
        }
        if !(q.weight.is_finite() && q.weight > 0.0) {
            return Err(QueuesError::Weight(i, q.name.clone(), q.weight));
        }
    }
    for (i, q) in queues.iter().enumerate() {
        let mut seen = BTreeSet::from([q.name.as_str()]);
        let mut at = q;
        while let Some(p) = &at.parent {
            let Some(parent) = queues.iter().find(|x| &x.name == p) else {
                return Err(QueuesError::UnknownParent(i, q.name.clone(), p.clone()));
            };
            if !seen.insert(parent.name.as_str()) {
                return Err(QueuesError::Cycle(i, q.name.clone(), p.clone()));
            }
            at = parent;
        }
        // The children's guarantees come out of their parent's.
        let children: u64 = queues
            .iter()
            .filter(|c| c.parent.as_ref() == Some(&q.name))
            .map(|c| u64::from(c.guaranteed_gpus))
            .sum();
        if children > u64::from(q.guaranteed_gpus) {
            return Err(QueuesError::ChildrenExceed(
                i,
                q.name.clone(),
                children,
                q.guaranteed_gpus,
            ));
        }
    }
    let roots: u64 = queues
        .iter()
        .filter(|q| q.parent.is_none())
        .map(|q| u64::from(q.guaranteed_gpus))
        .sum();
    match total_gpus {
        Some(total) if roots > total => Err(QueuesError::RootsExceed(roots, total)),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(name: &str, gpus: u32, parent: Option<&str>) -> QueueSpec {
        QueueSpec {
            name: name.into(),
            weight: 1.0,
            guaranteed_gpus: gpus,
            borrowing_limit_gpus: None,
            parent: parent.map(QueueName::from),
        }
    }

    #[test]
    fn queues_are_checked_and_each_problem_names_its_queue() {
        assert_eq!(
            check_queues(&[q("a", 4, None), q("b", 4, None)], Some(8)),
            Ok(())
        );
        assert_eq!(
            check_queues(&[q("a", 4, None), q("b", 5, None)], Some(8)),
            Err(QueuesError::RootsExceed(9, 8))
        );
        assert_eq!(
            check_queues(&[q("a", 4, None), q("b", 5, None)], None),
            Ok(())
        );
        assert!(matches!(
            check_queues(&[q("a", 1, None), q("a", 1, None)], None),
            Err(QueuesError::Duplicate(1, _))
        ));
        let msg = check_queues(&[q("a", 1, Some("x"))], None)
            .unwrap_err()
            .to_string();
        assert_eq!(msg, "queues[0] (a).parent: no queue is named `x`");
        assert!(matches!(
            check_queues(&[q("a", 1, Some("b")), q("b", 1, Some("a"))], None),
            Err(QueuesError::Cycle(..))
        ));
        assert!(matches!(
            check_queues(&[q("p", 2, None), q("c", 3, Some("p"))], None),
            Err(QueuesError::ChildrenExceed(0, _, 3, 2))
        ));
        let mut w = q("w", 1, None);
        w.weight = 0.0;
        assert!(matches!(
            check_queues(&[w], None),
            Err(QueuesError::Weight(..))
        ));
        assert_eq!(q("a", 0, None).weight_milli(), 1000);
    }
}
