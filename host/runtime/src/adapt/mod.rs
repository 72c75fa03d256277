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
