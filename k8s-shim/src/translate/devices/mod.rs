//! `resource.k8s.io/v1` objects → the framework's devices: ResourceSlices
//! (with shared counters, partitions and shared devices' capacity
//! policies), DeviceClasses and ResourceClaims (admin access, capacity
//! requests, attribute constraints and configuration), and the claims a
//! pod names. A field that cannot be read makes the slice, class or claim
//! unusable with the field named, so its pods wait rather than get devices
//! that ignore it.

use std::collections::BTreeMap;

use dragon_framework::devices::{
    AllocatedDevice, Allocation, Attribute, AttributeConstraint, AttributeRule, BindingConditions,
    Choice, Claim, ClaimConfig, CounterUse, Device, DeviceClass, DeviceId, Mode, OpaqueConfig,
    Quantity, Reach, Request, RequestPolicy, ResourceSlice, TaintRule, ValidAmounts,
};
use dragon_framework::quantity;
use dragon_framework::{Taint, TaintEffect, Toleration, TolerationOperator};
use k8s_openapi::api::core::v1 as core;
use k8s_openapi::api::resource::v1 as resource;

use super::constraints::node_selector;
use super::{TranslateError, err, pod_key};
use crate::key::{ObjectKey, object_key};

/// A slice's name and what it publishes.
///
/// # Errors
/// A field that cannot be read, named: the slice is left out.
pub fn resource_slice(
    s: &resource::ResourceSlice,
) -> Result<(String, ResourceSlice), TranslateError> {
    let name = s.metadata.name.clone().unwrap_or_default();
    let object = format!("ResourceSlice {name}");
    let spec = &s.spec;
    let counters = spec
        .shared_counters
        .iter()
        .flatten()
        .enumerate()
        .map(|(i, set)| {
            let field = format!("spec.sharedCounters[{i}]");
            Ok((set.name.clone(), amounts(&object, &field, &set.counters)?))
        })
        .collect::<Result<_, TranslateError>>()?;
    let reach = reach(
        &object,
        "spec",
        spec.node_name.as_ref(),
        spec.node_selector.as_ref(),
        spec.all_nodes,
    )?;
    let per_device = spec.per_device_node_selection == Some(true);
    if reach.is_none() && !per_device {
        return Err(err(&object, "spec: no node selection field is set"));
    }
    let devices = spec
        .devices
        .iter()
        .flatten()
        .enumerate()
        .map(|(i, d)| device(&object, i, d, per_device))
        .collect::<Result<_, _>>()?;
    Ok((
        name,
        ResourceSlice {
            driver: spec.driver.clone(),
            pool: spec.pool.name.clone(),
            generation: spec.pool.generation,
            slice_count: u64::try_from(spec.pool.resource_slice_count).unwrap_or(0),
            reach,
            devices,
            counters,
        },
    ))
}

/// Counters by name, as quantities.
fn amounts(
    object: &str,
    field: &str,
    counters: &BTreeMap<String, resource::Counter>,
) -> Result<BTreeMap<String, Quantity>, TranslateError> {
    counters
        .iter()
        .map(|(name, c)| {
            amount(
                object,
                &format!("{field}.counters[{name:?}].value"),
                &c.value,
            )
            .map(|q| (name.clone(), q))
        })
        .collect()
}

/// A quantity at `field`, in thousandths.
fn amount(
    object: &str,
    field: &str,
    q: &k8s_openapi::apimachinery::pkg::api::resource::Quantity,
) -> Result<Quantity, TranslateError> {
    quantity::parse(&q.0, 1000)
        .map(Quantity)
        .map_err(|e| err(object, format!("{field}: {e}")))
}

fn reach(
    object: &str,
    field: &str,
    node_name: Option<&String>,
    selector: Option<&core::NodeSelector>,
    all: Option<bool>,
) -> Result<Option<Reach>, TranslateError> {
    Ok(match (node_name, selector, all) {
        (Some(n), _, _) if !n.is_empty() => Some(Reach::Node(n.clone())),
        (_, Some(s), _) => Some(Reach::Nodes(
            node_selector(&format!("{field}.nodeSelector"), s)
                .map_err(|e| err(object, e.to_string()))?,
        )),
        (_, _, Some(true)) => Some(Reach::All),
        _ => None,
    })
}

fn device(
    object: &str,
    i: usize,
    d: &resource::Device,
    per_device: bool,
) -> Result<Device, TranslateError> {
    let field = format!("spec.devices[{i}]");
    let consumes = d
        .consumes_counters
        .iter()
        .flatten()
        .enumerate()
        .map(|(j, u)| {
            let field = format!("{field}.consumesCounters[{j}]");
            Ok(CounterUse {
                set: u.counter_set.clone(),
                counters: amounts(object, &field, &u.counters)?,
            })
        })
        .collect::<Result<_, TranslateError>>()?;
    let attributes = d
        .attributes
        .iter()
        .flatten()
        .map(|(name, a)| {
            let value = match a {
                resource::DeviceAttribute { int: Some(v), .. } => Attribute::Int(*v),
                resource::DeviceAttribute { bool: Some(v), .. } => Attribute::Bool(*v),
                resource::DeviceAttribute {
                    string: Some(v), ..
                } => Attribute::String(v.clone()),
                resource::DeviceAttribute {
                    version: Some(v), ..
                } => Attribute::Version(v.clone()),
                _ => {
                    return Err(err(
                        object,
                        format!(
                            "{field}.attributes[{name:?}]: no int, bool, string or version value"
                        ),
                    ));
                }
            };
            Ok((name.clone(), value))
        })
        .collect::<Result<_, _>>()?;
    let mut capacity = BTreeMap::new();
    let mut policies = BTreeMap::new();
    for (name, c) in d.capacity.iter().flatten() {
        let field = format!("{field}.capacity[{name:?}]");
        capacity.insert(
            name.clone(),
            amount(object, &format!("{field}.value"), &c.value)?,
        );
        if let Some(p) = &c.request_policy {
            policies.insert(
                name.clone(),
                request_policy(object, &format!("{field}.requestPolicy"), p)?,
            );
        }
    }
    let taints = d
        .taints
        .iter()
        .flatten()
        .filter_map(|t| {
            // `None` and unknown effects do not keep a device from a request.
            TaintEffect::parse(&t.effect).map(|effect| Taint {
                key: t.key.clone(),
                value: t.value.clone().unwrap_or_default(),
                effect,
            })
        })
        .collect();
    let reach = if per_device {
        let r = reach(
            object,
            &field,
            d.node_name.as_ref(),
            d.node_selector.as_ref(),
            d.all_nodes,
        )?;
        if r.is_none() {
            return Err(err(
                object,
                format!("{field}: no node selection field is set"),
            ));
        }
        r
    } else {
        None
    };
    Ok(Device {
        name: d.name.clone(),
        attributes,
        capacity,
        taints,
        reach,
        policies,
        shared: d.allow_multiple_allocations == Some(true),
        consumes,
        binding: BindingConditions {
            conditions: d.binding_conditions.clone().unwrap_or_default(),
            failure_conditions: d.binding_failure_conditions.clone().unwrap_or_default(),
            to_node: d.binds_to_node == Some(true),
        },
    })
}

fn request_policy(
    object: &str,
    field: &str,
    p: &resource::CapacityRequestPolicy,
) -> Result<RequestPolicy, TranslateError> {
    let optional = |q: Option<&k8s_openapi::apimachinery::pkg::api::resource::Quantity>,
                    name: &str| {
        q.map(|q| amount(object, &format!("{field}.{name}"), q))
            .transpose()
    };
    let valid = match (&p.valid_range, &p.valid_values) {
        (Some(r), _) => ValidAmounts::Range {
            min: amount(object, &format!("{field}.validRange.min"), &r.min)?,
            max: optional(r.max.as_ref(), "validRange.max")?,
            step: optional(r.step.as_ref(), "validRange.step")?,
        },
        (None, Some(values)) => ValidAmounts::Values(
            values
                .iter()
                .enumerate()
                .map(|(i, q)| amount(object, &format!("{field}.validValues[{i}]"), q))
                .collect::<Result<_, _>>()?,
        ),
        (None, None) => ValidAmounts::Any,
    };
    Ok(RequestPolicy {
        default: optional(p.default.as_ref(), "default")?,
        valid,
    })
}

/// A DeviceTaintRule; `None` for one whose taint has effect `None` (it
/// only informs). An effect this version does not know keeps devices from
/// requests as `NoSchedule` does: never a device a rule may forbid.
pub fn taint_rule(r: &resource::DeviceTaintRule) -> Option<TaintRule> {
    let taint = &r.spec.taint;
    let effect = match TaintEffect::parse(&taint.effect) {
        Some(e) => e,
        None if taint.effect == "None" => return None,
        None => {
            tracing::warn!(
                rule = r.metadata.name.as_deref().unwrap_or_default(),
                effect = taint.effect,
                "unknown device taint effect: taken as NoSchedule"
            );
            TaintEffect::NoSchedule
        }
    };
    let selector = r.spec.device_selector.as_ref();
    Some(TaintRule {
        name: r.metadata.name.clone().unwrap_or_default(),
        driver: selector.and_then(|s| s.driver.clone()),
        pool: selector.and_then(|s| s.pool.clone()),
        device: selector.and_then(|s| s.device.clone()),
        taint: Taint {
            key: taint.key.clone(),
            value: taint.value.clone().unwrap_or_default(),
            effect,
        },
    })
}

/// A DeviceClass; a field Dragon cannot use makes it unusable, named.
pub fn device_class(c: &resource::DeviceClass) -> DeviceClass {
    let name = c.metadata.name.clone().unwrap_or_default();
    let mut unusable = None;
    let spec = c.spec.as_ref();
    let selectors = expressions("spec", spec.and_then(|s| s.selectors.as_ref()), &mut |p| {
        unusable.get_or_insert(p);
    });
    let config = spec
        .and_then(|s| s.config.as_ref())
        .into_iter()
        .flatten()
        .filter_map(|c| c.opaque.as_ref().map(opaque))
        .collect();
    DeviceClass {
        name,
        selectors,
        extended_resource: spec.and_then(|s| s.extended_resource_name.clone()),
        unusable,
        config,
        created_ms: c
            .metadata
            .creation_timestamp
            .as_ref()
            .and_then(|t| u64::try_from(t.0.as_millisecond()).ok())
            .unwrap_or(0),
    }
}

/// The annotation kube-scheduler puts on a claim it makes for a pod's
/// extended resources.
pub const EXTENDED_CLAIM: &str = "resource.kubernetes.io/extended-resource-claim";

/// `namespace/name` of a ResourceClaim.
pub fn claim_key(c: &resource::ResourceClaim) -> String {
    object_key(c).to_string()
}

/// A ResourceClaim with its allocation; a field Dragon does not allocate
/// by makes it unusable, named.
pub fn claim(c: &resource::ResourceClaim) -> Claim {
    let key = claim_key(c);
    let devices = c.spec.as_ref().and_then(|s| s.devices.as_ref());
    let mut problem: Option<String> = None;
    let mut note = |p: String| {
        problem.get_or_insert(p);
    };
    let mut requests = Vec::new();
    for (i, r) in devices
        .and_then(|d| d.requests.as_ref())
        .into_iter()
        .flatten()
        .enumerate()
    {
        let field = format!("spec.devices.requests[{i}]");
        let choices: Vec<Choice> = match (&r.exactly, &r.first_available) {
            (Some(e), _) => {
                let field = format!("{field}.exactly");
                let mut c = choice(
                    &field,
                    None,
                    &e.device_class_name,
                    e.selectors.as_ref(),
                    (e.allocation_mode.as_deref(), e.count),
                    e.tolerations.as_ref(),
                    &mut note,
                );
                c.admin_access = e.admin_access == Some(true);
                c.capacity = capacity_requests(&key, &field, e.capacity.as_ref(), &mut note);
                vec![c]
            }
            (None, Some(subs)) => subs
                .iter()
                .enumerate()
                .map(|(j, s)| {
                    let field = format!("{field}.firstAvailable[{j}]");
                    let mut c = choice(
                        &field,
                        Some(s.name.clone()),
                        &s.device_class_name,
                        s.selectors.as_ref(),
                        (s.allocation_mode.as_deref(), s.count),
                        s.tolerations.as_ref(),
                        &mut note,
                    );
                    c.capacity = capacity_requests(&key, &field, s.capacity.as_ref(), &mut note);
                    c
                })
                .collect(),
            (None, None) => {
                note(format!(
                    "{field}: neither exactly nor firstAvailable is set"
                ));
                Vec::new()
            }
        };
        requests.push(Request {
            name: r.name.clone(),
            choices,
        });
    }
    let mut constraints = Vec::new();
    for (i, k) in devices
        .and_then(|d| d.constraints.as_ref())
        .into_iter()
        .flatten()
        .enumerate()
    {
        let (attribute, rule) = match (&k.match_attribute, &k.distinct_attribute) {
            (Some(a), None) => (a, AttributeRule::Match),
            (None, Some(a)) => (a, AttributeRule::Distinct),
            (Some(_), Some(_)) => {
                note(format!(
                    "spec.devices.constraints[{i}]: both matchAttribute and distinctAttribute are set"
                ));
                continue;
            }
            (None, None) => {
                note(format!("spec.devices.constraints[{i}]: empty constraint"));
                continue;
            }
        };
        constraints.push(AttributeConstraint {
            requests: k.requests.clone().unwrap_or_default(),
            attribute: attribute.clone(),
            rule,
        });
    }
    let config = devices
        .and_then(|d| d.config.as_ref())
        .into_iter()
        .flatten()
        .filter_map(|c| {
            c.opaque.as_ref().map(|o| ClaimConfig {
                requests: c.requests.clone().unwrap_or_default(),
                opaque: opaque(o),
            })
        })
        .collect();
    let allocation = c
        .status
        .as_ref()
        .and_then(|s| s.allocation.as_ref())
        .map(|a| {
            let nodes = a.node_selector.as_ref().and_then(|s| {
                node_selector("status.allocation.nodeSelector", s)
                    .map_err(|e| note(e.to_string()))
                    .ok()
            });
            Allocation {
                devices: a
                    .devices
                    .iter()
                    .flat_map(|d| d.results.iter().flatten())
                    .map(|r| AllocatedDevice {
                        request: r.request.clone(),
                        device: DeviceId {
                            driver: r.driver.clone(),
                            pool: r.pool.clone(),
                            device: r.device.clone(),
                        },
                        admin_access: r.admin_access == Some(true),
                        shared: r.share_id.is_some(),
                        binding: BindingConditions {
                            conditions: r.binding_conditions.clone().unwrap_or_default(),
                            failure_conditions: r
                                .binding_failure_conditions
                                .clone()
                                .unwrap_or_default(),
                            to_node: false,
                        },
                        consumed: r
                            .consumed_capacity
                            .iter()
                            .flatten()
                            .filter_map(|(name, q)| {
                                let field = format!(
                                    "status.allocation.devices.results[].consumedCapacity[{name:?}]"
                                );
                                amount(&key, &field, q)
                                    .map_err(|e| note(e.message))
                                    .ok()
                                    .map(|q| (name.clone(), q))
                            })
                            .collect(),
                    })
                    .collect(),
                nodes,
                // What the drivers read; the scheduler does not.
                config: Vec::new(),
            }
        });
    let deleting = c.metadata.deletion_timestamp.is_some();
    // The claim a scheduler made for a pod's extended resources: owned by
    // the pod, and marked.
    let extended_for = c
        .metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.get(EXTENDED_CLAIM).map(String::as_str) == Some("true"))
        .then(|| {
            c.metadata
                .owner_references
                .iter()
                .flatten()
                .find(|o| o.kind == "Pod" && o.controller == Some(true))
                .map(|o| ObjectKey::new(c.metadata.namespace.as_deref(), &o.name).to_string())
        })
        .flatten();
    Claim {
        extended_for,
        key,
        requests,
        constraints,
        config,
        allocation,
        unusable: if deleting
            && c.status
                .as_ref()
                .and_then(|s| s.allocation.as_ref())
                .is_none()
        {
            Some("is being deleted".into())
        } else {
            problem
        },
    }
}

fn choice(
    field: &str,
    subrequest: Option<String>,
    class: &str,
    selectors: Option<&Vec<resource::DeviceSelector>>,
    (mode, count): (Option<&str>, Option<i64>),
    tolerations: Option<&Vec<resource::DeviceToleration>>,
    note: &mut impl FnMut(String),
) -> Choice {
    let mode = match mode {
        None | Some("") | Some("ExactCount") => match u32::try_from(count.unwrap_or(1)) {
            Ok(n) if n > 0 => Mode::Count(n),
            _ => {
                note(format!(
                    "{field}.count: must be from 1 to {}, got {count:?}",
                    u32::MAX
                ));
                Mode::Count(1)
            }
        },
        Some("All") => Mode::All,
        Some(other) => {
            note(format!(
                "{field}.allocationMode: unsupported count mode {other:?}"
            ));
            Mode::Count(1)
        }
    };
    let selectors = expressions(field, selectors, note);
    let tolerations = tolerations
        .into_iter()
        .flatten()
        .enumerate()
        .filter_map(|(i, t)| {
            let operator = match t.operator.as_deref() {
                None | Some("") | Some("Equal") => TolerationOperator::Equal,
                Some("Exists") => TolerationOperator::Exists,
                Some(other) => {
                    note(format!(
                        "{field}.tolerations[{i}].operator: unknown operator {other:?}"
                    ));
                    return None;
                }
            };
            let effect = match t.effect.as_deref() {
                None | Some("") => None,
                Some(e) => match TaintEffect::parse(e) {
                    Some(e) => Some(e),
                    None => {
                        note(format!(
                            "{field}.tolerations[{i}].effect: unknown effect {e:?}"
                        ));
                        return None;
                    }
                },
            };
            Some(Toleration {
                key: t.key.clone().unwrap_or_default(),
                operator,
                value: t.value.clone().unwrap_or_default(),
                effect,
            })
        })
        .collect();
    Choice {
        subrequest,
        class: class.to_string(),
        selectors,
        mode,
        tolerations,
        admin_access: false,
        capacity: BTreeMap::new(),
    }
}

/// A request's `capacity.requests`, in thousandths; an amount that cannot
/// be read is noted and left out.
fn capacity_requests(
    claim: &str,
    field: &str,
    capacity: Option<&resource::CapacityRequirements>,
    note: &mut impl FnMut(String),
) -> BTreeMap<String, Quantity> {
    capacity
        .and_then(|c| c.requests.as_ref())
        .into_iter()
        .flatten()
        .filter_map(|(name, q)| {
            amount(claim, &format!("{field}.capacity.requests[{name:?}]"), q)
                .map_err(|e| note(e.message))
                .ok()
                .map(|q| (name.clone(), q))
        })
        .collect()
}

fn opaque(o: &resource::OpaqueDeviceConfiguration) -> OpaqueConfig {
    OpaqueConfig {
        driver: o.driver.clone(),
        parameters: o.parameters.0.clone(),
    }
}

/// The ResourceClaims (`namespace/name`) a pod needs, in its order:
/// `resourceClaimName` as written, a template's claim as
/// `status.resourceClaimStatuses` names it (none when the status says the
/// claim is not needed).
///
/// # Errors
/// A template's claim the resourceclaim controller has not created yet,
/// or an entry with neither field.
pub fn device_claims(p: &core::Pod) -> Result<Vec<String>, TranslateError> {
    let key = pod_key(p);
    let namespace = p.metadata.namespace.as_deref().unwrap_or("default");
    let statuses = p
        .status
        .as_ref()
        .and_then(|s| s.resource_claim_statuses.as_ref());
    let mut out = Vec::new();
    for c in p
        .spec
        .iter()
        .flat_map(|s| s.resource_claims.iter().flatten())
    {
        let name = match (&c.resource_claim_name, &c.resource_claim_template_name) {
            (Some(name), _) => Some(name.clone()),
            (None, Some(_)) => {
                let status = statuses
                    .into_iter()
                    .flatten()
                    .find(|s| s.name == c.name)
                    .ok_or_else(|| err(&format!("pod {key:?}"), "ResourceClaim not created yet"))?;
                status.resource_claim_name.clone()
            }
            (None, None) => {
                return Err(err(
                    &format!("pod {key:?}"),
                    format!(
                        "spec.resourceClaims[{:?}]: none of the supported fields are set",
                        c.name
                    ),
                ));
            }
        };
        if let Some(name) = name {
            out.push(ObjectKey::new(Some(namespace), &name).to_string());
        }
    }
    Ok(out)
}

/// The CEL expressions of `selectors` (at `field.selectors`), noting each
/// selector that has none.
fn expressions(
    field: &str,
    selectors: Option<&Vec<resource::DeviceSelector>>,
    note: &mut impl FnMut(String),
) -> Vec<String> {
    selectors
        .into_iter()
        .flatten()
        .enumerate()
        .filter_map(|(i, s)| match &s.cel {
            Some(cel) => Some(cel.expression.clone()),
            None => {
                note(format!("{field}.selectors[{i}]: no CEL expression"));
                None
            }
        })
        .collect()
}

#[cfg(test)]
mod tests;
