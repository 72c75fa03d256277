//! Consumable capacity, as `structured/internal/incubating`'s
//! `consumable_capacity.go` computes it: what a request takes of each
//! capacity of a device (what it asks, rounded up to what the capacity's
//! request policy allows; when it asks nothing, the policy's default or
//! the whole capacity), and whether that fits beside what other
//! allocations of the device already take. Amounts are in thousandths of
//! their unit, so fractional ranges round exactly.

use std::collections::BTreeMap;

use super::cel::Quantity;
use super::model::{Device, RequestPolicy, ValidAmounts};

/// A request for an amount that cannot be rounded without overflowing:
/// kube aborts the allocation rather than skipping the device.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("capacity {capacity:?}: request {asked} cannot be represented once rounded up")]
pub struct Unrepresentable {
    pub capacity: String,
    pub asked: u64,
}

/// What a request asking `asked` (nothing when `None`) takes of a capacity
/// of `value` under `policy`.
fn consumed(
    asked: Option<Quantity>,
    value: Quantity,
    policy: Option<&RequestPolicy>,
) -> Option<Quantity> {
    let Some(asked) = asked else {
        return Some(policy.and_then(|p| p.default).unwrap_or(value));
    };
    let Some(policy) = policy else {
        return Some(asked);
    };
    match &policy.valid {
        ValidAmounts::Range { min, step, .. } => {
            if asked < *min {
                return Some(*min);
            }
            let Some(step) = step.filter(|s| s.0 > 0) else {
                return Some(asked);
            };
            let steps = (asked.0 - min.0).div_ceil(step.0);
            steps
                .checked_mul(step.0)
                .and_then(|v| v.checked_add(min.0))
                .map(Quantity)
        }
        ValidAmounts::Values(values) => Some(
            values
                .iter()
                .copied()
                .find(|v| asked <= *v)
                .unwrap_or(asked),
        ),
        ValidAmounts::Any => Some(asked),
    }
}

/// Whether taking `amount` breaks `policy` (its default is always allowed).
fn violates(amount: Quantity, policy: &RequestPolicy) -> bool {
    if policy.default == Some(amount) {
        return false;
    }
    match &policy.valid {
        ValidAmounts::Range { min, max, step } => {
            max.is_some_and(|m| amount > m)
                || step
                    .filter(|s| s.0 > 0)
                    .is_some_and(|s| amount.0.abs_diff(min.0) % s.0 != 0)
        }
        ValidAmounts::Values(values) => !values.contains(&amount),
        ValidAmounts::Any => false,
    }
}

/// What a request asking `asked` takes of each of `device`'s capacities,
/// when that fits beside `held` (what other allocations of the device take,
/// by capacity): `None` when the device lacks a capacity asked for, a
/// policy forbids the amount, or the capacity is short.
///
/// # Errors
/// An amount that overflows once rounded up.
pub(crate) fn take(
    device: &Device,
    asked: &BTreeMap<String, Quantity>,
    held: impl Fn(&str) -> u64,
) -> Result<Option<BTreeMap<String, Quantity>>, Unrepresentable> {
    if asked.keys().any(|name| !device.capacity.contains_key(name)) {
        return Ok(None);
    }
    let mut out = BTreeMap::new();
    for (name, value) in &device.capacity {
        let want = asked.get(name).copied();
        let amount =
            consumed(want, *value, device.policies.get(name)).ok_or_else(|| Unrepresentable {
                capacity: name.clone(),
                asked: want.map_or(0, |q| q.0),
            })?;
        out.insert(name.clone(), amount);
    }
    for (name, value) in &device.capacity {
        let amount = out[name];
        if device
            .policies
            .get(name)
            .is_some_and(|p| violates(amount, p))
        {
            return Ok(None);
        }
        if held(name).saturating_add(amount.0) > value.0 {
            return Ok(None);
        }
    }
    Ok(Some(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(v: u64) -> Quantity {
        Quantity(v * 1000)
    }

    fn shared(capacity: u64, policy: Option<RequestPolicy>) -> Device {
        let mut d = Device::new("d");
        d.shared = true;
        d.capacity.insert("memory".into(), q(capacity));
        if let Some(p) = policy {
            d.policies.insert("memory".into(), p);
        }
        d
    }

    fn ask(v: u64) -> BTreeMap<String, Quantity> {
        BTreeMap::from([("memory".to_string(), q(v))])
    }

    fn taken(r: Result<Option<BTreeMap<String, Quantity>>, Unrepresentable>) -> Option<u64> {
        r.expect("representable").map(|m| m["memory"].0 / 1000)
    }

    // Cases of `consumable_capacity_test.go` and the allocator's
    // `consumable-capacity-multi-allocatable-device-*` cases.
    #[test]
    fn a_request_without_capacity_takes_the_default_or_the_whole_device() {
        let none = BTreeMap::new();
        assert_eq!(taken(take(&shared(40, None), &none, |_| 0)), Some(40));
        assert_eq!(taken(take(&shared(40, None), &none, |_| 1_000)), None);
        let policy = RequestPolicy {
            default: Some(q(10)),
            valid: ValidAmounts::Any,
        };
        assert_eq!(
            taken(take(&shared(40, Some(policy)), &none, |_| 0)),
            Some(10)
        );
    }

    #[test]
    fn a_request_is_rounded_up_to_the_next_step_or_valid_value() {
        let range = RequestPolicy {
            default: Some(q(1)),
            valid: ValidAmounts::Range {
                min: q(1),
                max: Some(q(16)),
                step: Some(q(2)),
            },
        };
        assert_eq!(
            taken(take(&shared(40, Some(range.clone())), &ask(4), |_| 0)),
            Some(5)
        );
        assert_eq!(
            taken(take(&shared(40, Some(range.clone())), &ask(0), |_| 0)),
            Some(1)
        );
        // Above the range's maximum: not this device.
        assert_eq!(taken(take(&shared(40, Some(range)), &ask(20), |_| 0)), None);
        let values = RequestPolicy {
            default: None,
            valid: ValidAmounts::Values(vec![q(8), q(16)]),
        };
        assert_eq!(
            taken(take(&shared(40, Some(values.clone())), &ask(9), |_| 0)),
            Some(16)
        );
        assert_eq!(
            taken(take(&shared(40, Some(values)), &ask(17), |_| 0)),
            None
        );
    }

    #[test]
    fn a_share_fits_only_beside_what_other_shares_hold() {
        assert_eq!(
            taken(take(&shared(40, None), &ask(10), |_| 30_000)),
            Some(10)
        );
        assert_eq!(taken(take(&shared(40, None), &ask(11), |_| 30_000)), None);
        // A capacity the device does not have: another device may.
        let other = BTreeMap::from([("cores".to_string(), q(1))]);
        assert_eq!(taken(take(&shared(40, None), &other, |_| 0)), None);
    }

    #[test]
    fn a_request_that_overflows_once_rounded_is_an_error() {
        let range = RequestPolicy {
            default: None,
            valid: ValidAmounts::Range {
                min: Quantity(0),
                max: None,
                step: Some(Quantity(u64::MAX / 2 + 1)),
            },
        };
        let mut d = shared(1, Some(range));
        d.capacity.insert("memory".into(), Quantity(u64::MAX));
        let huge = BTreeMap::from([("memory".to_string(), Quantity(u64::MAX - 1))]);
        assert!(take(&d, &huge, |_| 0).is_err());
    }
}
