//! Calling an interface-0.2 policy with the framework's shapes: node rows
//! go out as changes to the policy's view, jobs gain their history, and
//! answers come back in the framework's shapes.

use crate::bindings::v0_2::dragon::scheduler::types as v2;
use crate::view::{ClusterView, Delta, JobStats, NodeRow};
use crate::wit;

/// The rows `delta` names, as the policy receives them.
pub(crate) fn changes(view: &dyn ClusterView, delta: &Delta) -> v2::Changes {
    v2::Changes {
        reset: delta.reset,
        count: delta.count,
        nodes: delta
            .indices
            .iter()
            .map(|&index| v2::NodeChange {
                index,
                node: node(view.node(index)),
            })
            .collect(),
    }
}

fn node(row: NodeRow) -> v2::Node {
    v2::Node {
        allocatable: resources(row.allocatable),
        free: resources(row.free),
        open: row.open,
        zone: row.zone,
        rack: row.rack,
        host: row.host,
    }
}

fn resources(r: wit::Resources) -> v2::Resources {
    v2::Resources {
        cpu_milli: r.cpu_milli,
        memory_mib: r.memory_mib,
        gpus: r.gpus,
    }
}

fn stats(s: JobStats) -> v2::JobStats {
    v2::JobStats {
        attained_gpu_ms: s.attained_gpu_ms,
        running_ms: s.running_ms,
        restarts: s.restarts,
        placed_workers: s.placed_workers,
        requested_workers: s.requested_workers,
        progress_permille: s.progress_permille,
    }
}

fn task(t: &wit::Task) -> v2::Task {
    v2::Task {
        role: match t.role {
            wit::Role::Ps => v2::Role::Ps,
            wit::Role::Worker => v2::Role::Worker,
            wit::Role::Other => v2::Role::Other,
        },
        index: t.index,
        request: resources(t.request),
    }
}

pub(crate) fn unit(u: &wit::Unit, view: &dyn ClusterView, now_ms: u64) -> v2::Unit {
    v2::Unit {
        id: u.id,
        arrival_ms: u.arrival_ms,
        priority: u.priority,
        gang: u.gang,
        tasks: u.tasks.iter().map(task).collect(),
        workers: u.workers,
        min_workers: u.min_workers,
        max_workers: u.max_workers,
        running: u.running,
        stats: stats(view.job_stats(now_ms, u.id)),
    }
}

pub(crate) fn placement(p: &wit::Placement, view: &dyn ClusterView) -> v2::Placement {
    v2::Placement {
        unit: unit(&p.unit, view, p.now_ms),
        task: p.task,
        now_ms: p.now_ms,
    }
}

/// Candidates as indices, siblings only where there are some, and the
/// pod's preferences among them.
pub(crate) fn candidates(c: &wit::Candidates, view: &dyn ClusterView) -> v2::Candidates {
    v2::Candidates {
        preference: view.preference().to_vec(),
        index: c.index.clone(),
        siblings: c
            .siblings
            .iter()
            .enumerate()
            .filter(|(_, n)| **n > 0)
            .map(|(i, &n)| (i as u32, n))
            .collect(),
    }
}

pub(crate) fn queued(q: &[wit::Queued], view: &dyn ClusterView, now_ms: u64) -> Vec<v2::Queued> {
    q.iter()
        .map(|q| v2::Queued {
            id: q.id,
            arrival_ms: q.arrival_ms,
            priority: q.priority,
            pods: q.pods,
            total: resources(q.total),
            stats: stats(view.job_stats(now_ms, q.id)),
        })
        .collect()
}

pub(crate) fn scale_input(i: &wit::ScaleInput, view: &dyn ClusterView) -> v2::ScaleInput {
    let now = i.now_ms;
    v2::ScaleInput {
        now_ms: now,
        running: i
            .running
            .iter()
            .map(|j| v2::RunningJob {
                id: j.id,
                arrival_ms: j.arrival_ms,
                started_ms: j.started_ms,
                scaled_ms: j.scaled_ms,
                workers: j.workers,
                min_workers: j.min_workers,
                max_workers: j.max_workers,
                worker_request: resources(j.worker_request),
                worker_nodes: j.worker_nodes.clone(),
                ps_nodes: j.ps_nodes.clone(),
                stats: stats(view.job_stats(now, j.id)),
            })
            .collect(),
        waiting: i
            .waiting
            .iter()
            .map(|w| v2::WaitingJob {
                id: w.id,
                arrival_ms: w.arrival_ms,
                unit: unit(&w.unit, view, now),
            })
            .collect(),
        last_admit_ms: i.last_admit_ms,
        last_scale_down_ms: i.last_scale_down_ms,
    }
}

pub(crate) fn gang(g: &wit::GangState) -> v2::GangState {
    v2::GangState {
        id: g.id,
        reserved: g.reserved,
        min_member: g.min_member,
        present: g.present,
        waited_ms: g.waited_ms,
    }
}

pub(crate) fn pre_filter_result(r: v2::PreFilterResult) -> wit::PreFilterResult {
    match r {
        v2::PreFilterResult::Proceed(sizes) => wit::PreFilterResult::Proceed(sizes),
        v2::PreFilterResult::Skip(reason) => wit::PreFilterResult::Skip(reason),
    }
}

pub(crate) fn permit_result(r: v2::PermitResult) -> wit::PermitResult {
    match r {
        v2::PermitResult::Allow => wit::PermitResult::Allow,
        v2::PermitResult::Wait(ms) => wit::PermitResult::Wait(ms),
        v2::PermitResult::Reject(reason) => wit::PermitResult::Reject(reason),
    }
}

pub(crate) fn decisions(d: Vec<v2::ScaleDecision>) -> Vec<wit::ScaleDecision> {
    d.into_iter()
        .map(|d| wit::ScaleDecision {
            id: d.id,
            workers: d.workers,
            reason: d.reason,
        })
        .collect()
}

pub(crate) fn info(i: v2::PolicyInfo) -> wit::PolicyInfo {
    wit::PolicyInfo {
        name: i.name,
        version: i.version,
        hooks: i.hooks.into_iter().map(hook).collect(),
    }
}

fn hook(h: v2::Hook) -> wit::Hook {
    match h {
        v2::Hook::QueueOrder => wit::Hook::QueueOrder,
        v2::Hook::PreFilter => wit::Hook::PreFilter,
        v2::Hook::Filter => wit::Hook::Filter,
        v2::Hook::Score => wit::Hook::Score,
        v2::Hook::Permit => wit::Hook::Permit,
        v2::Hook::Scale => wit::Hook::Scale,
    }
}

pub(crate) fn level(l: v2::Level) -> wit::Level {
    match l {
        v2::Level::Trace => wit::Level::Trace,
        v2::Level::Debug => wit::Level::Debug,
        v2::Level::Info => wit::Level::Info,
        v2::Level::Warn => wit::Level::Warn,
        v2::Level::Error => wit::Level::Error,
    }
}

/// Why a list of refused positions is invalid.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum BadRefusals {
    #[error("refused position {p} of {candidates} candidates")]
    OutOfRange { p: u32, candidates: usize },
    #[error("refused positions not ascending ({last} then {p})")]
    NotAscending { last: u32, p: u32 },
}

/// `filter`'s answer (positions refused, ascending) as one verdict per
/// candidate; anything else is the reason it is invalid.
pub(crate) fn verdicts(refused: &[u32], candidates: usize) -> Result<Vec<bool>, BadRefusals> {
    let mut pass = vec![true; candidates];
    let mut last: Option<u32> = None;
    for &p in refused {
        if p as usize >= candidates {
            return Err(BadRefusals::OutOfRange { p, candidates });
        }
        if let Some(l) = last.filter(|&l| l >= p) {
            return Err(BadRefusals::NotAscending { last: l, p });
        }
        last = Some(p);
        pass[p as usize] = false;
    }
    Ok(pass)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refused_positions_become_verdicts_and_bad_lists_are_named() {
        assert_eq!(verdicts(&[0, 2], 3), Ok(vec![false, true, false]));
        assert_eq!(verdicts(&[], 2), Ok(vec![true, true]));
        assert!(
            verdicts(&[3], 3)
                .unwrap_err()
                .to_string()
                .contains("position 3 of 3")
        );
        assert_eq!(
            verdicts(&[1, 1], 3),
            Err(BadRefusals::NotAscending { last: 1, p: 1 })
        );
    }

    #[test]
    fn siblings_go_out_only_where_there_are_some() {
        let c = wit::Candidates {
            index: vec![4, 7, 9],
            capacity: wit::Capacity {
                alloc_cpu_milli: vec![],
                alloc_memory_mib: vec![],
                alloc_gpus: vec![],
                free_cpu_milli: vec![],
                free_memory_mib: vec![],
                free_gpus: vec![],
            },
            siblings: vec![0, 2, 0],
        };
        let v = candidates(&c, &crate::FixedView::from_candidates(&c));
        assert_eq!(v.index, [4, 7, 9]);
        assert_eq!(v.siblings, [(1, 2)]);
    }
}
