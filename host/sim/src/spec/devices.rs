//! Devices in traces: what a DRA driver publishes on each node of a group
//! (one ResourceSlice per node), the cluster's DeviceClasses, and the
//! devices each task of a job claims (one ResourceClaim per pod, as a
//! claim template makes them).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{SpecError, err};
use dragon_framework::devices::{
    Attribute, Claim, Device, DeviceClass, GPU_RESOURCE, MAX_DEVICES_PER_CLAIM, Request,
    ResourceSlice,
};

/// At most this many devices on one node, and attributes on one device.
const MAX_DEVICES_PER_NODE: u32 = 1024;
const MAX_ATTRIBUTES: usize = 32;

/// The devices of every node of a group: `count` devices of `driver`, each
/// with `attributes` (strings, by name in the driver's domain).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeviceGroup {
    pub driver: String,
    pub count: u32,
    #[serde(default)]
    pub attributes: BTreeMap<String, String>,
}

impl DeviceGroup {
    /// The slice of node `node`: pool `node`, devices `dev-0 …`.
    ///
    /// # Errors
    /// A count or attribute list past its bound, or an empty driver.
    pub fn slice(&self, place: &str, node: &str) -> Result<ResourceSlice, SpecError> {
        if self.driver.is_empty() {
            return Err(err(format!("{place}.driver"), "must not be empty"));
        }
        if self.count == 0 || self.count > MAX_DEVICES_PER_NODE {
            return Err(err(
                format!("{place}.count"),
                format!("must be 1 to {MAX_DEVICES_PER_NODE}, got {}", self.count),
            ));
        }
        if self.attributes.len() > MAX_ATTRIBUTES {
            return Err(err(
                format!("{place}.attributes"),
                format!("at most {MAX_ATTRIBUTES} attributes"),
            ));
        }
        let devices = (0..self.count)
            .map(|i| {
                let mut d = Device::new(format!("dev-{i}"));
                d.attributes = self
                    .attributes
                    .iter()
                    .map(|(k, v)| (k.clone(), Attribute::String(v.clone())))
                    .collect();
                d
            })
            .collect();
        Ok(ResourceSlice::on_node(&self.driver, node, node, devices))
    }
}

/// A DeviceClass: the devices its CEL `selectors` all select; with
/// `serves_gpus`, they serve `nvidia.com/gpu` requests on nodes that
/// advertise no GPU (DRAExtendedResource).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeviceClassSpec {
    pub name: String,
    #[serde(default)]
    pub selectors: Vec<String>,
    #[serde(default)]
    pub serves_gpus: bool,
}

impl DeviceClassSpec {
    pub fn class(&self) -> DeviceClass {
        DeviceClass {
            name: self.name.clone(),
            selectors: self.selectors.clone(),
            extended_resource: self.serves_gpus.then(|| GPU_RESOURCE.to_string()),
            ..DeviceClass::default()
        }
    }
}

/// Devices a task claims: `count` of class `class`, each passing
/// `selector` (CEL) when given.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeviceRequestSpec {
    pub class: String,
    #[serde(default = "one")]
    pub count: u32,
    #[serde(default)]
    pub selector: Option<String>,
}

fn one() -> u32 {
    1
}

/// The requests of a task's claim (`None` when it claims no device).
///
/// # Errors
/// More devices than a claim may hold, or a request for none.
pub fn task_requests(
    place: &str,
    specs: &[DeviceRequestSpec],
) -> Result<Option<Vec<Request>>, SpecError> {
    if specs.is_empty() {
        return Ok(None);
    }
    let total: u64 = specs.iter().map(|s| u64::from(s.count)).sum();
    if specs.iter().any(|s| s.count == 0) || total > MAX_DEVICES_PER_CLAIM as u64 {
        return Err(err(
            format!("{place}.devices"),
            format!("each request needs 1 or more devices, at most {MAX_DEVICES_PER_CLAIM} in all"),
        ));
    }
    Ok(Some(
        specs
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let selectors: Vec<&str> = s.selector.as_deref().into_iter().collect();
                Request::exactly(&format!("r{i}"), &s.class, s.count, &selectors)
            })
            .collect(),
    ))
}

/// The claim of pod `pod` with `requests`.
pub fn task_claim(pod: &str, requests: &[Request]) -> Claim {
    Claim::new(format!("{pod}-devices"), requests.to_vec())
}

/// The ResourceSlices of `groups` (one per node of a group with devices),
/// named `NODE-devices`; `place` names group `i` in errors.
///
/// # Errors
/// A device group past its bounds, named.
pub fn slices(
    groups: &[super::NodeGroup],
    place: impl Fn(usize) -> String,
) -> Result<Vec<(String, ResourceSlice)>, SpecError> {
    let mut out = Vec::new();
    for (i, g) in groups.iter().enumerate() {
        let Some(devices) = &g.devices else {
            continue;
        };
        for n in 0..g.count {
            let node = format!("{}-{n}", g.name_prefix);
            let slice = devices.slice(&format!("{}.devices", place(i)), &node)?;
            out.push((format!("{node}-devices"), slice));
        }
    }
    Ok(out)
}
