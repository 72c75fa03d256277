//! `#[policy]` names a policy's hooks from the methods it writes, and the
//! per-node hooks answer once per candidate.

use dragon_policy_sdk::testing::{candidates, gang_unit, gpu_worker, placement, ps};
use dragon_policy_sdk::types::*;
use dragon_policy_sdk::{Policy, policy};

/// Fewest free GPUs first, only on nodes with at least two free, and gangs.
#[derive(Default)]
struct Packer;

#[policy]
impl Policy for Packer {
    fn metadata(&self) -> PolicyInfo {
        PolicyInfo::named("packer", "0.1.0")
    }

    fn filter_node(&self, _pod: &Placement, node: NodeIndex, view: &View) -> bool {
        view.free(node).gpus >= 2
    }

    fn score_node(&self, _pod: &Placement, node: NodeIndex, view: &View) -> u32 {
        64 - view.free(node).gpus
    }

    fn permit(&self, _now_ms: u64, _gang: &GangState) -> PermitResult {
        PermitResult::Allow
    }
}

/// No attribute: the metadata's list is what counts.
#[derive(Default)]
struct Listed;

impl Policy for Listed {
    fn metadata(&self) -> PolicyInfo {
        PolicyInfo::new("listed", "0.1.0", &[Hook::Score])
    }
}

#[test]
fn the_hooks_are_named_from_the_methods_written() {
    assert_eq!(
        Packer.info().hooks,
        [Hook::Filter, Hook::Score, Hook::Permit]
    );
    assert_eq!(Packer.info().name, "packer");
    assert_eq!(Listed.info().hooks, [Hook::Score]);
}

#[test]
fn per_node_hooks_answer_once_per_candidate() {
    let (nodes, view) = candidates(&[(8_000, 32_768, 1), (8_000, 32_768, 4), (8_000, 32_768, 2)]);
    let unit = gang_unit(0, 2, 2, 2, gpu_worker(), ps());
    let pod = placement(&unit, 0);
    assert_eq!(Packer.filter(&pod, &nodes, &view), [false, true, true]);
    assert_eq!(Packer.score(&pod, &nodes, &view), [63, 60, 62]);
}
