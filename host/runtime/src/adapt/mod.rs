//! Calling a policy built against interface 0.2, 0.3 or 0.4 with the
//! framework's shapes: node rows go out as changes to the policy's view,
//! jobs gain their history (and, from 0.3, their queue; in 0.4, their
//! speed-up), and answers come back in the framework's shapes.

mod shapes;
pub(crate) mod v2;
pub(crate) mod v3;
pub(crate) mod v4;

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
    use crate::wit;

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

    /// A view of two nodes, the second an `a100`, and one job (unit 7)
    /// that reports its speed-up.
    struct Typed(crate::FixedView);

    impl crate::ClusterView for Typed {
        fn log_id(&self) -> u64 {
            self.0.log_id()
        }
        fn log_end(&self) -> u64 {
            self.0.log_end()
        }
        fn changed_since(&self, since: u64) -> Option<&[u32]> {
            self.0.changed_since(since)
        }
        fn node_count(&self) -> u32 {
            self.0.node_count()
        }
        fn node(&self, index: u32) -> crate::view::NodeRow {
            self.0.node(index)
        }
        fn job_stats(&self, now_ms: u64, unit: u64) -> crate::view::JobStats {
            self.0.job_stats(now_ms, unit)
        }
        fn gpu_type(&self, index: u32) -> Option<&str> {
            (index == 1).then_some("a100")
        }
        fn speedup(&self, unit: u64) -> &[u32] {
            match unit {
                7 => &[1000, 1900],
                _ => &[],
            }
        }
    }

    #[test]
    fn interface_0_4_carries_each_nodes_gpu_type_and_each_jobs_speedup() {
        let c = wit::Capacity {
            alloc_cpu_milli: vec![1_000; 2],
            alloc_memory_mib: vec![1_024; 2],
            alloc_gpus: vec![4; 2],
            free_cpu_milli: vec![1_000; 2],
            free_memory_mib: vec![1_024; 2],
            free_gpus: vec![4; 2],
        };
        let view = Typed(crate::FixedView::from_capacity(&c));
        let delta = crate::view::Delta::since(&view, None);
        let changes = v4::changes(&view, &delta, None);
        let types: Vec<Option<&str>> = changes
            .nodes
            .iter()
            .map(|n| n.node.gpu_type.as_deref())
            .collect();
        assert_eq!(types, [None, Some("a100")]);
        let job = |id| wit::RunningJob {
            id,
            arrival_ms: 0,
            started_ms: 0,
            scaled_ms: 0,
            workers: 1,
            min_workers: 1,
            max_workers: 2,
            worker_request: crate::view::NOTHING,
            worker_nodes: vec![0],
            ps_nodes: vec![],
        };
        let input = wit::ScaleInput {
            now_ms: 0,
            running: vec![job(7), job(8)],
            waiting: vec![],
            last_admit_ms: 0,
            last_scale_down_ms: 0,
            nodes: c.clone(),
        };
        let sent = v4::scale_input(&input, &view);
        assert_eq!(sent.running[0].speedup, [1000, 1900]);
        assert!(sent.running[1].speedup.is_empty());
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
        let v = v2::candidates(&c, &crate::FixedView::from_candidates(&c));
        assert_eq!(v.index, [4, 7, 9]);
        assert_eq!(v.siblings, [(1, 2)]);
    }
}
