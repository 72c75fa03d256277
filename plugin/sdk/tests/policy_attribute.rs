//! `#[policy]` names a policy's hooks from the methods it writes, and the
//! per-node hooks answer once per candidate.

use dragon_policy_sdk::testing::{candidates, gang_unit, gpu_worker, placement, ps};
use dragon_policy_sdk::types::*;
use dragon_policy_sdk::{NoSettings, Policy, Refusal, policy};

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
    type Settings = NoSettings;

    fn metadata(&self) -> PolicyInfo {
        PolicyInfo::new("listed", "0.1.0", &[Hook::Score])
    }

    fn configure(&mut self, _: NoSettings) -> Result<(), Refusal> {
        Ok(())
    }
}

/// Settings read by serde, then checked by value.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
struct Knobs {
    spread: u32,
}

#[derive(Default)]
struct Tuned {
    knobs: Knobs,
}

#[policy]
impl Policy for Tuned {
    type Settings = Knobs;

    fn metadata(&self) -> PolicyInfo {
        PolicyInfo::named("tuned", "0.1.0")
    }

    fn configure(&mut self, knobs: Knobs) -> Result<(), Refusal> {
        if knobs.spread > 8 {
            return Err(Refusal::new(format!(
                "spread must be at most 8, got {}",
                knobs.spread
            )));
        }
        self.knobs = knobs;
        Ok(())
    }
}

#[test]
fn settings_are_read_by_serde_then_checked_and_kept_only_when_accepted() {
    let mut t = Tuned::default();
    t.configure_json(r#"{"spread": 3}"#).unwrap();
    assert_eq!(t.knobs.spread, 3);
    let typo = t.configure_json(r#"{"sprad": 3}"#).unwrap_err();
    assert!(typo.message().contains("unknown field `sprad`"), "{typo}");
    let big = t.configure_json(r#"{"spread": 9}"#).unwrap_err();
    assert_eq!(big.message(), "spread must be at most 8, got 9");
    assert_eq!(t.knobs.spread, 3, "the last good settings stay");
    t.configure_json("  ").unwrap();
    assert_eq!(t.knobs.spread, 0, "no text: the defaults");
}

#[test]
fn a_policy_that_names_no_settings_takes_none() {
    Packer.configure_json("{}").unwrap();
    Packer.configure_json("").unwrap();
    let e = Packer.configure_json(r#"{"pack": true}"#).unwrap_err();
    assert!(e.message().contains("unknown field `pack`"), "{e}");
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
