//! The objects of Dynamic Resource Allocation as the framework holds
//! them: devices and the slices that publish them, DeviceClasses, and
//! claims with their requests and allocations.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use super::cel::Quantity;
use crate::model::{Node, Taint, Toleration};
use crate::selector::NodeSelector;

/// One device, named as an allocation names it: driver, pool, device.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct DeviceId {
    pub driver: String,
    pub pool: String,
    pub device: String,
}

impl fmt::Display for DeviceId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}/{}", self.driver, self.pool, self.device)
    }
}

/// A device attribute's value.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Attribute {
    Int(i64),
    Bool(bool),
    String(String),
    /// A semantic version, as written.
    Version(String),
}

/// Which nodes can reach a device (a slice's, or a device's own, node
/// selection).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Reach {
    /// Local to one node.
    Node(String),
    /// Attached to the nodes a selector picks.
    Nodes(NodeSelector),
    /// Reachable from every node.
    All,
}

impl Reach {
    pub(crate) fn admits(&self, node: &Node) -> bool {
        match self {
            Reach::Node(n) => *n == node.name,
            Reach::Nodes(s) => s.matches(&node.name, &node.labels),
            Reach::All => true,
        }
    }
}

/// A device of a slice.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Device {
    pub name: String,
    /// By qualified name (`domain/id`; a name without a domain belongs to
    /// the driver's).
    #[serde(default)]
    pub attributes: BTreeMap<String, Attribute>,
    /// By qualified name, as quantities.
    #[serde(default)]
    pub capacity: BTreeMap<String, Quantity>,
    /// `NoSchedule` / `NoExecute` taints: only a request that tolerates
    /// them gets the device.
    #[serde(default)]
    pub taints: Vec<Taint>,
    /// The device's own node selection, when its slice selects per device.
    #[serde(default)]
    pub reach: Option<Reach>,
    /// How much of each capacity a request may take, by qualified name
    /// (capacities without one are taken whole or as asked).
    #[serde(default)]
    pub policies: BTreeMap<String, RequestPolicy>,
    /// `allowMultipleAllocations`: several allocations share the device,
    /// each consuming some of its capacity.
    #[serde(default)]
    pub shared: bool,
    /// Counters the device takes from its pool's counter sets while
    /// allocated (a partition of a larger device).
    #[serde(default)]
    pub consumes: Vec<CounterUse>,
    /// What must hold before a pod given the device is bound.
    #[serde(default)]
    pub binding: BindingConditions,
}

/// A device's `bindingConditions` (the device status conditions that must
/// all be true before a pod given it is bound, as after an attachment) and
/// `bindingFailureConditions` (any true fails the binding), and whether
/// its allocation is for the chosen node only (`bindsToNode`).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct BindingConditions {
    #[serde(default)]
    pub conditions: Vec<String>,
    #[serde(default)]
    pub failure_conditions: Vec<String>,
    #[serde(default)]
    pub to_node: bool,
}

impl BindingConditions {
    /// Whether a binding must wait for the device.
    pub fn any(&self) -> bool {
        !self.conditions.is_empty()
    }
}

/// A capacity's `requestPolicy`: what a request takes when it asks for
/// none, and which amounts may be taken.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct RequestPolicy {
    #[serde(default)]
    pub default: Option<Quantity>,
    #[serde(default)]
    pub valid: ValidAmounts,
}

/// The amounts of a capacity a request may take.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum ValidAmounts {
    /// Any amount.
    #[default]
    Any,
    /// One of these, ascending: a request is rounded up to the next.
    Values(Vec<Quantity>),
    /// From `min` (a request below it takes `min`) to `max`, in steps of
    /// `step` from `min` (a request is rounded up to the next step).
    Range {
        min: Quantity,
        max: Option<Quantity>,
        step: Option<Quantity>,
    },
}

/// Counters a device takes from one counter set of its pool.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CounterUse {
    pub set: String,
    pub counters: BTreeMap<String, Quantity>,
}

impl Device {
    /// A device with no attributes, capacity, taints or node selection of
    /// its own.
    pub fn new(name: impl Into<String>) -> Device {
        Device {
            name: name.into(),
            attributes: BTreeMap::new(),
            capacity: BTreeMap::new(),
            taints: Vec::new(),
            reach: None,
            policies: BTreeMap::new(),
            shared: false,
            consumes: Vec::new(),
            binding: BindingConditions::default(),
        }
    }
}

/// A ResourceSlice: some devices of one pool of one driver.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResourceSlice {
    pub driver: String,
    pub pool: String,
    /// Only the newest generation of a pool counts.
    pub generation: i64,
    /// How many slices the pool's generation has: a pool with fewer in
    /// sight is being updated, and is not allocated from.
    pub slice_count: u64,
    /// `None`: each device says where it is (`perDeviceNodeSelection`).
    pub reach: Option<Reach>,
    pub devices: Vec<Device>,
    /// Shared counter sets by name, each counter's amount by name (a slice
    /// publishes either counter sets or devices).
    #[serde(default)]
    pub counters: BTreeMap<String, BTreeMap<String, Quantity>>,
}

impl ResourceSlice {
    /// The whole of pool `pool` (one slice, generation 1): devices local to
    /// node `node`.
    pub fn on_node(driver: &str, pool: &str, node: &str, devices: Vec<Device>) -> ResourceSlice {
        ResourceSlice {
            driver: driver.into(),
            pool: pool.into(),
            generation: 1,
            slice_count: 1,
            reach: Some(Reach::Node(node.into())),
            devices,
            counters: BTreeMap::new(),
        }
    }
}

/// A DeviceTaintRule: `taint` on every device it selects (of `driver`,
/// `pool` and named `device`; each unset one selects all).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaintRule {
    pub name: String,
    #[serde(default)]
    pub driver: Option<String>,
    #[serde(default)]
    pub pool: Option<String>,
    #[serde(default)]
    pub device: Option<String>,
    pub taint: Taint,
}

impl TaintRule {
    /// Whether the rule taints device `id`.
    pub(crate) fn selects(&self, id: &DeviceId) -> bool {
        self.driver.as_ref().is_none_or(|d| *d == id.driver)
            && self.pool.as_ref().is_none_or(|p| *p == id.pool)
            && self.device.as_ref().is_none_or(|d| *d == id.device)
    }
}

/// A DeviceClass.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct DeviceClass {
    pub name: String,
    /// CEL expressions a device must all satisfy.
    #[serde(default)]
    pub selectors: Vec<String>,
    /// The extended resource (such as `nvidia.com/gpu`) whose requests this
    /// class serves on nodes that do not advertise it.
    #[serde(default)]
    pub extended_resource: Option<String>,
    /// Why no device can be allocated through this class (a field the
    /// driver could not read): claims naming it wait with this reason.
    #[serde(default)]
    pub unusable: Option<String>,
    /// Configuration for the driver of each device allocated through the
    /// class, copied into the allocation.
    #[serde(default)]
    pub config: Vec<OpaqueConfig>,
    /// Creation time, ms: of two classes naming one extended resource, the
    /// newer serves it.
    #[serde(default)]
    pub created_ms: u64,
}

/// Configuration for one driver, opaque to the scheduler.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OpaqueConfig {
    pub driver: String,
    pub parameters: serde_json::Value,
}

/// A claim's configuration for the devices of some of its requests (all
/// when `requests` is empty; `req` or `req/sub`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClaimConfig {
    #[serde(default)]
    pub requests: Vec<String>,
    pub opaque: OpaqueConfig,
}

/// A configuration of an allocation, as `status.allocation.devices.config`
/// lists it: from the class or the claim, for some requests (all when
/// empty).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AllocatedConfig {
    pub from_class: bool,
    #[serde(default)]
    pub requests: Vec<String>,
    pub opaque: OpaqueConfig,
}

/// How many devices a request takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Mode {
    /// Exactly this many.
    Count(u32),
    /// Every matching device the node reaches (at least one).
    All,
}

/// One way to satisfy a request: an `exactly` request, or one of a
/// `firstAvailable` list.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Choice {
    /// The subrequest's name; `None` for an `exactly` request.
    #[serde(default)]
    pub subrequest: Option<String>,
    pub class: String,
    /// CEL expressions a device must satisfy besides the class's.
    #[serde(default)]
    pub selectors: Vec<String>,
    pub mode: Mode,
    #[serde(default)]
    pub tolerations: Vec<Toleration>,
    /// `adminAccess`: the devices are given even if allocated to others,
    /// and are not held from them.
    #[serde(default)]
    pub admin_access: bool,
    /// Capacity asked of each device, by qualified name.
    #[serde(default)]
    pub capacity: BTreeMap<String, Quantity>,
}

/// A claim's request: its choices in order of preference (one for
/// `exactly`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Request {
    pub name: String,
    pub choices: Vec<Choice>,
}

impl Request {
    /// An `exactly` request for `count` devices of `class`, with
    /// `selectors`.
    pub fn exactly(name: &str, class: &str, count: u32, selectors: &[&str]) -> Request {
        Request {
            name: name.into(),
            choices: vec![Choice {
                subrequest: None,
                class: class.into(),
                selectors: selectors.iter().map(|s| s.to_string()).collect(),
                mode: Mode::Count(count),
                tolerations: Vec::new(),
                admin_access: false,
                capacity: BTreeMap::new(),
            }],
        }
    }
}

/// A claim's constraint on the devices of the named requests (all when
/// empty): each has the attribute, with one value (`matchAttribute`) or
/// each with a value of its own (`distinctAttribute`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AttributeConstraint {
    #[serde(default)]
    pub requests: Vec<String>,
    pub attribute: String,
    #[serde(default)]
    pub rule: AttributeRule,
}

/// Whether a constrained attribute's values must be one or all different.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum AttributeRule {
    #[default]
    Match,
    Distinct,
}

/// One device of an allocation and the request (`req` or `req/sub`) it
/// serves.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AllocatedDevice {
    pub request: String,
    pub device: DeviceId,
    /// Given with admin access: not held from other claims.
    #[serde(default)]
    pub admin_access: bool,
    /// One share of a device several allocations share (`shareID` set).
    #[serde(default)]
    pub shared: bool,
    /// The capacity this allocation takes of the device, by name.
    #[serde(default)]
    pub consumed: BTreeMap<String, Quantity>,
    /// The device's binding conditions, copied: a pod given it is bound
    /// only once they hold.
    #[serde(default)]
    pub binding: BindingConditions,
}

impl AllocatedDevice {
    /// Device `device` for `request`, whole.
    pub fn new(request: impl Into<String>, device: DeviceId) -> AllocatedDevice {
        AllocatedDevice {
            request: request.into(),
            device,
            admin_access: false,
            shared: false,
            consumed: BTreeMap::new(),
            binding: BindingConditions::default(),
        }
    }
}

/// A claim's allocation: its devices, and the nodes that reach them all
/// (`None`: every node).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Allocation {
    pub devices: Vec<AllocatedDevice>,
    pub nodes: Option<NodeSelector>,
    #[serde(default)]
    pub config: Vec<AllocatedConfig>,
}

/// A ResourceClaim.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Claim {
    /// `namespace/name`.
    pub key: String,
    pub requests: Vec<Request>,
    #[serde(default)]
    pub constraints: Vec<AttributeConstraint>,
    #[serde(default)]
    pub config: Vec<ClaimConfig>,
    /// As the API server has it.
    #[serde(default)]
    pub allocation: Option<Allocation>,
    /// Why it cannot be allocated (a field the driver could not read): its
    /// pods wait with this reason.
    #[serde(default)]
    pub unusable: Option<String>,
    /// The pod (`namespace/name`) whose extended resources it serves, for
    /// the claim a scheduler made for them.
    #[serde(default)]
    pub extended_for: Option<String>,
}

impl Claim {
    /// Claim `key` with `requests`, no constraint, not allocated.
    pub fn new(key: impl Into<String>, requests: Vec<Request>) -> Claim {
        Claim {
            key: key.into(),
            requests,
            constraints: Vec::new(),
            config: Vec::new(),
            allocation: None,
            unusable: None,
            extended_for: None,
        }
    }
}
