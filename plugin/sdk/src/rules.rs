//! Rules many policies share: the queue order of Slurm and DRAGON, the
//! gang permit of Coscheduling, and the checks on settings.

use crate::types::{GangState, PermitResult, Queued, Unit};

/// A setting outside what its key allows: the policy's name, the key,
/// the rule and the value. (Unknown keys and wrong types are serde's to
/// refuse, before the policy sees its settings.)
#[derive(Debug, thiserror::Error)]
#[error("invalid {policy} settings: {key} must {must}, got {got}")]
pub struct SettingsError {
    pub policy: &'static str,
    pub key: &'static str,
    pub must: String,
    pub got: String,
}

impl SettingsError {
    /// `key` must be as `must` says and is `got`.
    pub fn must(
        policy: &'static str,
        key: &'static str,
        must: impl Into<String>,
        got: impl std::fmt::Display,
    ) -> SettingsError {
        SettingsError {
            policy,
            key,
            must: must.into(),
            got: got.to_string(),
        }
    }
}

/// Higher priority first, then first come, first served (then by id).
pub fn priority_then_fifo(units: &[Queued]) -> Vec<u32> {
    let mut order: Vec<u32> = (0..units.len() as u32).collect();
    order.sort_by_key(|&i| {
        let u = &units[i as usize];
        (std::cmp::Reverse(u.priority), u.arrival_ms, u.id)
    });
    order
}

/// Allow a gang once all its pods are reserved, else wait for the members
/// that do not exist yet until `timeout_ms` has passed in all (the host
/// releases the gang when the wait runs out, or at its PodGroup's own
/// timeout, which replaces this one).
pub fn permit_when_reserved(gang: &GangState, timeout_ms: u64) -> PermitResult {
    if gang.reserved >= gang.min_member {
        PermitResult::Allow
    } else {
        PermitResult::Wait(timeout_ms.saturating_sub(gang.waited_ms))
    }
}

/// A gang that has not started: the policy chooses its size. A lone pod, or
/// the new workers of a running job (whose room the scale step checked),
/// goes as submitted.
pub fn is_new_gang(unit: &Unit) -> bool {
    unit.gang && unit.running == 0
}

/// Refuse settings where any of `values` is negative or not finite, naming
/// the policy and the key.
pub fn non_negative(
    policy: &'static str,
    values: &[(&'static str, f64)],
) -> Result<(), SettingsError> {
    for &(name, v) in values {
        if !v.is_finite() || v < 0.0 {
            return Err(SettingsError::must(
                policy,
                name,
                "be a non-negative number",
                v,
            ));
        }
    }
    Ok(())
}

/// Refuse a scaling exponent outside (0, 1].
pub fn scaling_exponent(policy: &'static str, a: f64) -> Result<(), SettingsError> {
    if a > 0.0 && a <= 1.0 {
        Ok(())
    } else {
        Err(SettingsError::must(
            policy,
            "scaling_exponent",
            "lie in (0, 1]",
            a,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_gang_waits_only_for_members_not_yet_reserved_and_only_until_its_timeout() {
        let gang = |reserved, waited_ms| GangState {
            id: 1,
            reserved,
            min_member: 3,
            present: 3,
            waited_ms,
        };
        assert_eq!(
            permit_when_reserved(&gang(3, 0), 60_000),
            PermitResult::Allow
        );
        assert_eq!(
            permit_when_reserved(&gang(2, 45_000), 60_000),
            PermitResult::Wait(15_000)
        );
        assert_eq!(
            permit_when_reserved(&gang(2, 90_000), 60_000),
            PermitResult::Wait(0)
        );
    }

    #[test]
    fn settings_checks_name_the_policy_and_key() {
        let e = non_negative("pollux", &[("a", 1.0), ("b", -1.0)])
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "invalid pollux settings: b must be a non-negative number, got -1"
        );
        assert!(non_negative("x", &[("a", f64::NAN)]).is_err());
        assert!(scaling_exponent("x", 0.0).is_err() && scaling_exponent("x", 1.0).is_ok());
    }
}
