//! Devices as Kubernetes' Dynamic Resource Allocation publishes them
//! (`resource.k8s.io/v1`): drivers list devices in ResourceSlices, a
//! DeviceClass selects a kind of device, and a ResourceClaim asks for
//! devices of some classes. The allocator (`allocate`) chooses a claim's
//! devices on one node as kube-scheduler v1.37's DynamicResources plugin
//! and `k8s.io/dynamic-resource-allocation/structured` do; `Inventory`
//! keeps what is published, what is allocated and which compiled
//! selectors go with it.

use std::collections::{BTreeMap, BTreeSet, HashMap};

mod allocate;
mod capacity;
mod cel;
mod counters;
mod model;
#[cfg(test)]
mod tests;

pub use allocate::DeviceError;
pub(crate) use allocate::Fit;
pub use capacity::Unrepresentable;
pub use cel::{Quantity, SelectorError};
pub use model::{
    AllocatedConfig, AllocatedDevice, Allocation, Attribute, AttributeConstraint, AttributeRule,
    BindingConditions, Choice, Claim, ClaimConfig, CounterUse, Device, DeviceClass, DeviceId, Mode,
    OpaqueConfig, Reach, Request, RequestPolicy, ResourceSlice, TaintRule, ValidAmounts,
};

/// The extended resource whose DeviceClass makes devices GPUs: a class
/// with this `extendedResourceName` serves `nvidia.com/gpu` requests on
/// nodes that do not advertise it (`DRAExtendedResource`), and the devices
/// it selects count as the node's GPUs in a policy's view.
pub const GPU_RESOURCE: &str = "nvidia.com/gpu";

/// The extended resource every DeviceClass serves under its own name:
/// `deviceclass.resource.kubernetes.io/CLASS`.
pub const CLASS_RESOURCE_PREFIX: &str = "deviceclass.resource.kubernetes.io/";

/// Devices chosen to serve a pod's extended resources on a node that does
/// not advertise them: one request per resource, named by the resource,
/// and the class serving each. The driver splits them into kube's
/// per-container requests when it writes the pod's claim.
#[derive(Debug, Clone, PartialEq)]
pub struct ExtendedChoice {
    pub allocation: Allocation,
    pub classes: BTreeMap<String, String>,
}

/// An extended resource a pod asks that devices serve on a node: `count`
/// devices of class `class`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Served<'a> {
    pub(crate) resource: &'a str,
    pub(crate) class: &'a str,
    pub(crate) count: u32,
}

/// At most this many devices per claim (`AllocationResultsMaxSize`).
pub const MAX_DEVICES_PER_CLAIM: usize = 32;

/// A class with its selectors compiled.
#[derive(Debug, Clone)]
struct ClassEntry {
    class: DeviceClass,
    selectors: Result<Vec<cel::Selector>, SelectorError>,
}

/// A claim, its selectors compiled per request and choice, and the
/// allocation the framework chose for it and the driver has not written
/// yet.
#[derive(Debug, Clone)]
pub(crate) struct ClaimEntry {
    pub(crate) claim: Claim,
    selectors: Result<Vec<Vec<Vec<cel::Selector>>>, SelectorError>,
    /// Chosen in a round for this pod; cleared when the pod goes back to
    /// pending unless the driver has written it by then.
    pub(crate) chosen: Option<(String, Allocation)>,
}

impl ClaimEntry {
    /// The allocation that holds the claim's devices: the API's, else the
    /// framework's own.
    pub(crate) fn allocation(&self) -> Option<&Allocation> {
        self.claim
            .allocation
            .as_ref()
            .or(self.chosen.as_ref().map(|(_, a)| a))
    }
}

/// A published slice with what every allocation attempt would otherwise
/// recompute per device: its id, its CEL binding, and each class's verdict.
#[derive(Debug, Clone)]
pub(crate) struct Published {
    pub(crate) slice: ResourceSlice,
    pub(crate) ids: Vec<DeviceId>,
    pub(crate) bound: Vec<std::sync::Arc<cel::Bound>>,
    /// Per class, per device: whether the class's selectors select it.
    pub(crate) classes: HashMap<String, Vec<Result<bool, SelectorError>>>,
    /// Claims' selectors' verdicts per device, by expression: the claims
    /// of one template share theirs.
    pub(crate) verdicts: Verdicts,
}

/// The holder of a pod's extended-resource devices, apart from any claim
/// (claim keys have no space).
fn pod_holder(pod: &str) -> String {
    format!("pod {pod}")
}

/// Most distinct claim expressions whose verdicts a slice keeps: past it
/// they are forgotten and evaluated again as needed.
const MAX_CACHED_EXPRESSIONS: usize = 64;

/// A claim selector's verdict on each device of a slice, by expression,
/// filled as allocation attempts evaluate them.
#[derive(Debug, Default)]
pub(crate) struct Verdicts(
    std::sync::Mutex<HashMap<std::sync::Arc<str>, Vec<Option<Result<bool, SelectorError>>>>>,
);

impl Clone for Verdicts {
    fn clone(&self) -> Verdicts {
        Verdicts(std::sync::Mutex::new(self.lock().clone()))
    }
}

impl Verdicts {
    fn lock(
        &self,
    ) -> std::sync::MutexGuard<
        '_,
        HashMap<std::sync::Arc<str>, Vec<Option<Result<bool, SelectorError>>>>,
    > {
        // Entries are whole values: one left by a panicking holder is
        // still sound.
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Selector `s`'s verdict on device `at` of `devices`, evaluated on
    /// first use.
    pub(crate) fn get(
        &self,
        s: &cel::Selector,
        at: usize,
        devices: usize,
        evaluate: impl FnOnce() -> Result<bool, SelectorError>,
    ) -> Result<bool, SelectorError> {
        if let Some(Some(v)) = self.lock().get(s.source()).map(|v| v[at].clone()) {
            return v;
        }
        let v = evaluate();
        let mut cache = self.lock();
        if cache.len() >= MAX_CACHED_EXPRESSIONS && !cache.contains_key(s.source()) {
            cache.clear();
        }
        cache
            .entry(s.source_arc())
            .or_insert_with(|| vec![None; devices])[at] = Some(v.clone());
        v
    }
}

impl Published {
    fn new(slice: ResourceSlice) -> Published {
        let ids: Vec<DeviceId> = slice
            .devices
            .iter()
            .map(|d| DeviceId {
                driver: slice.driver.clone(),
                pool: slice.pool.clone(),
                device: d.name.clone(),
            })
            .collect();
        let bound = ids
            .iter()
            .zip(&slice.devices)
            .map(|(id, d)| std::sync::Arc::new(cel::bind(id, d)))
            .collect();
        Published {
            slice,
            ids,
            bound,
            classes: HashMap::new(),
            verdicts: Verdicts::default(),
        }
    }

    /// Records class `entry`'s verdict on every device.
    fn judge(&mut self, entry: &ClassEntry) {
        let verdicts = self
            .ids
            .iter()
            .zip(&self.bound)
            .map(|(id, bound)| match &entry.selectors {
                Ok(selectors) => {
                    for s in selectors {
                        if !s.matches_bound(id, bound)? {
                            return Ok(false);
                        }
                    }
                    Ok(true)
                }
                Err(e) => Err(e.clone()),
            })
            .collect();
        self.classes.insert(entry.class.name.clone(), verdicts);
    }
}

/// Everything published about devices, what is allocated, and the claims.
#[derive(Debug, Clone, Default)]
pub struct Inventory {
    slices: BTreeMap<String, Published>,
    classes: BTreeMap<String, ClassEntry>,
    pub(crate) claims: BTreeMap<String, ClaimEntry>,
    /// Names of the slices local to each node.
    by_node: HashMap<String, BTreeSet<String>>,
    /// Names of the slices that may reach several nodes.
    shared: BTreeSet<String>,
    /// Devices held by an allocation, and the claim holding each (a pod's
    /// extended-resource devices by the pod's key). A device given with
    /// admin access is not held.
    in_use: HashMap<DeviceId, String>,
    /// Devices several allocations share (`allowMultipleAllocations`): the
    /// capacity each holder takes, by capacity.
    shares: HashMap<DeviceId, BTreeMap<String, BTreeMap<String, Quantity>>>,
    /// The devices of each node that the GPU class selects (see
    /// [`GPU_RESOURCE`]), and the node of each.
    gpus_by_node: HashMap<String, Vec<DeviceId>>,
    gpu_node: HashMap<DeviceId, String>,
    /// Devices chosen to serve a pod's extended resources on a node that
    /// does not advertise them, by pod, not yet written.
    extended: BTreeMap<String, ExtendedChoice>,
    /// Nodes whose GPU devices or their use changed since last taken.
    touched: BTreeSet<String>,
    /// DeviceTaintRules by name: taints on the devices they select, beside
    /// the devices' own.
    taint_rules: BTreeMap<String, TaintRule>,
}

impl Inventory {
    pub(crate) fn set_slice(&mut self, name: String, slice: ResourceSlice) {
        self.remove_slice(&name);
        let node = match &slice.reach {
            Some(Reach::Node(n)) => Some(n.clone()),
            _ => None,
        };
        match &slice.reach {
            Some(Reach::Node(n)) => {
                self.by_node
                    .entry(n.clone())
                    .or_default()
                    .insert(name.clone());
            }
            _ => {
                self.shared.insert(name.clone());
            }
        }
        let mut published = Published::new(slice);
        for entry in self.classes.values() {
            published.judge(entry);
        }
        self.slices.insert(name, published);
        if let Some(n) = node {
            self.index_gpus(&n);
        }
    }

    pub(crate) fn remove_slice(&mut self, name: &str) {
        let Some(old) = self.slices.remove(name) else {
            return;
        };
        match &old.slice.reach {
            Some(Reach::Node(n)) => {
                if let Some(set) = self.by_node.get_mut(n) {
                    set.remove(name);
                    if set.is_empty() {
                        self.by_node.remove(n);
                    }
                }
                self.index_gpus(n);
            }
            _ => {
                self.shared.remove(name);
            }
        }
    }

    pub(crate) fn set_class(&mut self, class: DeviceClass) {
        let selectors = cel::compile_all(&class.selectors);
        let before = self.gpu_class_name().map(str::to_string);
        let serves = class.extended_resource.as_deref() == Some(GPU_RESOURCE);
        let entry = ClassEntry { class, selectors };
        for published in self.slices.values_mut() {
            published.judge(&entry);
        }
        self.classes.insert(entry.class.name.clone(), entry);
        if serves || before.is_some() {
            self.index_all_gpus();
        }
    }

    pub(crate) fn remove_class(&mut self, name: &str) {
        let was = self.gpu_class_name() == Some(name);
        self.classes.remove(name);
        for published in self.slices.values_mut() {
            published.classes.remove(name);
        }
        if was {
            self.index_all_gpus();
        }
    }

    /// The class that serves extended resource `resource`, as kube's
    /// extended-resource cache maps it: of the classes naming it as their
    /// `extendedResourceName`, the newest (the lower name on a tie), else
    /// the class a `deviceclass.resource.kubernetes.io/CLASS` name names.
    pub fn class_for(&self, resource: &str) -> Option<&str> {
        let explicit = self
            .classes
            .values()
            .filter(|e| e.class.extended_resource.as_deref() == Some(resource))
            .max_by(|a, b| {
                (a.class.created_ms.cmp(&b.class.created_ms))
                    .then_with(|| b.class.name.cmp(&a.class.name))
            });
        if let Some(e) = explicit {
            return Some(&e.class.name);
        }
        let name = resource.strip_prefix(CLASS_RESOURCE_PREFIX)?;
        self.classes.get(name).map(|e| e.class.name.as_str())
    }

    /// The class that serves `nvidia.com/gpu`, when it is usable: its
    /// devices are the GPUs of nodes that advertise none.
    pub fn gpu_class_name(&self) -> Option<&str> {
        let name = self.class_for(GPU_RESOURCE)?;
        let e = self.classes.get(name)?;
        (e.class.unusable.is_none() && e.selectors.is_ok()).then_some(name)
    }

    /// Recomputes which devices of node `node` are GPUs.
    fn index_gpus(&mut self, node: &str) {
        for id in self.gpus_by_node.remove(node).into_iter().flatten() {
            self.gpu_node.remove(&id);
        }
        self.touched.insert(node.to_string());
        let Some(class) = self.gpu_class_name() else {
            return;
        };
        let mut found = Vec::new();
        for name in self.by_node.get(node).into_iter().flatten() {
            let Some(published) = self.slices.get(name) else {
                continue;
            };
            let Some(verdicts) = published.classes.get(class) else {
                continue;
            };
            // A selector that fails on a device leaves it out of the
            // count; the allocator reports the failure to the pod.
            for (id, verdict) in published.ids.iter().zip(verdicts) {
                if *verdict == Ok(true) {
                    found.push(id.clone());
                }
            }
        }
        for id in &found {
            self.gpu_node.insert(id.clone(), node.to_string());
        }
        if !found.is_empty() {
            self.gpus_by_node.insert(node.to_string(), found);
        }
    }

    fn index_all_gpus(&mut self) {
        let nodes: BTreeSet<String> = self
            .by_node
            .keys()
            .chain(self.gpus_by_node.keys())
            .cloned()
            .collect();
        for n in nodes {
            self.index_gpus(&n);
        }
    }

    /// Whether some node has devices of the GPU class.
    pub(crate) fn has_gpus(&self) -> bool {
        !self.gpus_by_node.is_empty()
    }

    /// Node `node`'s GPU devices and how many of them are held, when it
    /// has any.
    pub fn gpus_on(&self, node: &str) -> Option<(u32, u32)> {
        let ids = self.gpus_by_node.get(node)?;
        let held = ids.iter().filter(|id| self.is_held(id)).count();
        Some((ids.len() as u32, held as u32))
    }

    /// The nodes whose GPU devices or their use changed since last asked.
    pub(crate) fn take_touched(&mut self) -> BTreeSet<String> {
        std::mem::take(&mut self.touched)
    }

    /// How many GPUs the claims named `keys` ask of the GPU class (their
    /// `exactly` counts): what a policy sees the pod request.
    pub(crate) fn claimed_gpus(&self, keys: &[String]) -> u32 {
        let Some(class) = self.gpu_class_name() else {
            return 0;
        };
        keys.iter()
            .filter_map(|k| self.claims.get(k))
            .flat_map(|e| &e.claim.requests)
            .filter_map(|r| r.choices.first())
            .filter(|c| c.class == class)
            .map(|c| match c.mode {
                Mode::Count(n) => n,
                Mode::All => 0,
            })
            .fold(0u32, u32::saturating_add)
    }

    /// A claim as the API server has it now. A framework choice the API
    /// now shows as allocated is no longer the framework's to undo.
    pub(crate) fn set_claim(&mut self, claim: Claim) {
        // A pod's extended-resource claim, once written, holds what was
        // chosen for the pod: the choice is the claim's from now on.
        if claim.allocation.is_some()
            && let Some(pod) = &claim.extended_for
        {
            self.unchoose_extended(pod);
        }
        let chosen = self
            .claims
            .remove(&claim.key)
            .and_then(|old| {
                self.release(&old);
                old.chosen
            })
            .filter(|_| claim.allocation.is_none());
        let selectors = claim
            .requests
            .iter()
            .map(|r| {
                r.choices
                    .iter()
                    .map(|c| cel::compile_all(&c.selectors))
                    .collect::<Result<Vec<_>, _>>()
            })
            .collect::<Result<Vec<_>, _>>();
        let entry = ClaimEntry {
            claim,
            selectors,
            chosen,
        };
        self.hold(&entry);
        self.claims.insert(entry.claim.key.clone(), entry);
    }

    pub(crate) fn remove_claim(&mut self, key: &str) {
        if let Some(old) = self.claims.remove(key) {
            self.release(&old);
        }
    }

    fn hold(&mut self, entry: &ClaimEntry) {
        if let Some(a) = entry.allocation() {
            self.hold_devices(a, &entry.claim.key);
        }
    }

    fn release(&mut self, entry: &ClaimEntry) {
        if let Some(a) = entry.allocation() {
            self.release_devices(a, &entry.claim.key);
        }
    }

    /// Whether an allocation holds device `id`, whole or a share of it:
    /// what counters and capacity are taken for.
    pub(crate) fn is_held(&self, id: &DeviceId) -> bool {
        self.in_use.contains_key(id) || self.shares.contains_key(id)
    }

    /// How much of capacity `name` of device `id` its shares take.
    pub(crate) fn shared_use(&self, id: &DeviceId, name: &str) -> u64 {
        self.shares
            .get(id)
            .into_iter()
            .flat_map(|holders| holders.values())
            .filter_map(|taken| taken.get(name))
            .fold(0u64, |sum, q| sum.saturating_add(q.0))
    }

    fn hold_devices(&mut self, a: &Allocation, holder: &str) {
        for d in &a.devices {
            if d.admin_access {
                continue;
            }
            if d.shared {
                let taken = self
                    .shares
                    .entry(d.device.clone())
                    .or_default()
                    .entry(holder.to_string())
                    .or_default();
                for (name, q) in &d.consumed {
                    let sum = taken.entry(name.clone()).or_insert(Quantity(0));
                    sum.0 = sum.0.saturating_add(q.0);
                }
            } else {
                self.in_use.insert(d.device.clone(), holder.to_string());
            }
            if let Some(n) = self.gpu_node.get(&d.device) {
                self.touched.insert(n.clone());
            }
        }
    }

    fn release_devices(&mut self, a: &Allocation, holder: &str) {
        for d in &a.devices {
            let held = if d.shared {
                let Some(holders) = self.shares.get_mut(&d.device) else {
                    continue;
                };
                let held = holders.remove(holder).is_some();
                if holders.is_empty() {
                    self.shares.remove(&d.device);
                }
                held
            } else if self.in_use.get(&d.device).map(String::as_str) == Some(holder) {
                self.in_use.remove(&d.device);
                true
            } else {
                false
            };
            if held && let Some(n) = self.gpu_node.get(&d.device) {
                self.touched.insert(n.clone());
            }
        }
    }

    /// Records the devices chosen to serve `pod`'s extended resources.
    pub(crate) fn choose_extended(&mut self, pod: &str, choice: ExtendedChoice) {
        self.unchoose_extended(pod);
        self.hold_devices(&choice.allocation, &pod_holder(pod));
        self.extended.insert(pod.to_string(), choice);
    }

    fn unchoose_extended(&mut self, pod: &str) {
        if let Some(c) = self.extended.remove(pod) {
            self.release_devices(&c.allocation, &pod_holder(pod));
        }
    }

    /// The devices chosen to serve `pod`'s extended resources on a node
    /// that does not advertise them: the driver creates the pod's
    /// extended-resource claim with them before its Binding.
    pub fn extended_for(&self, pod: &str) -> Option<&ExtendedChoice> {
        self.extended.get(pod)
    }

    /// Records `allocations` (one per claim named) as chosen for `pod`.
    pub(crate) fn choose(&mut self, pod: &str, allocations: Vec<(String, Allocation)>) {
        for (key, allocation) in allocations {
            let Some(mut entry) = self.claims.remove(&key) else {
                continue;
            };
            self.release(&entry);
            entry.chosen = Some((pod.to_string(), allocation));
            self.hold(&entry);
            self.claims.insert(key, entry);
        }
    }

    /// What `pod` holds by the framework's own choice: its claims'
    /// allocations and the devices serving its GPUs.
    pub(crate) fn choices_of(
        &self,
        pod: &str,
    ) -> (Vec<(String, Allocation)>, Option<ExtendedChoice>) {
        let claims = self
            .chosen_for(pod)
            .into_iter()
            .map(|(k, a)| (k.to_string(), a.clone()))
            .collect();
        (claims, self.extended.get(pod).cloned())
    }

    /// The devices the API's allocations of `claims` hold are free again,
    /// as they will be once the pods using them are gone (a preemption's
    /// dry run): the claims whose devices were let go, to [`Self::hold_again`].
    pub(crate) fn let_go(&mut self, claims: &[&String]) -> Vec<String> {
        let mut let_go = Vec::new();
        for key in claims {
            if let Some(entry) = self.claims.remove(*key) {
                if let Some(a) = &entry.claim.allocation {
                    self.release_devices(a, key);
                    let_go.push((*key).clone());
                }
                self.claims.insert((*key).clone(), entry);
            }
        }
        let_go
    }

    /// Hold again what [`Self::let_go`] let go.
    pub(crate) fn hold_again(&mut self, claims: &[String]) {
        for key in claims {
            if let Some(entry) = self.claims.remove(key) {
                self.hold(&entry);
                self.claims.insert(key.clone(), entry);
            }
        }
    }

    /// Undoes what was chosen for `pod` and not yet written.
    pub(crate) fn unchoose(&mut self, pod: &str) {
        self.unchoose_extended(pod);
        let keys: Vec<String> = self
            .claims
            .iter()
            .filter(|(_, e)| e.chosen.as_ref().is_some_and(|(p, _)| p == pod))
            .map(|(k, _)| k.clone())
            .collect();
        for key in keys {
            if let Some(mut entry) = self.claims.remove(&key) {
                self.release(&entry);
                entry.chosen = None;
                self.hold(&entry);
                self.claims.insert(key, entry);
            }
        }
    }

    pub(crate) fn set_taint_rule(&mut self, rule: TaintRule) {
        self.taint_rules.insert(rule.name.clone(), rule);
    }

    pub(crate) fn remove_taint_rule(&mut self, name: &str) {
        self.taint_rules.remove(name);
    }

    /// The taints DeviceTaintRules put on device `id`.
    pub(crate) fn rule_taints<'t>(
        &'t self,
        id: &'t DeviceId,
    ) -> impl Iterator<Item = &'t crate::model::Taint> + 't {
        self.taint_rules
            .values()
            .filter(move |r| r.selects(id))
            .map(|r| &r.taint)
    }

    /// The claim serving `pod`'s extended resources, once written.
    pub(crate) fn extended_claim_of(&self, pod: &str) -> Option<&String> {
        self.claims
            .values()
            .find(|e| e.claim.extended_for.as_deref() == Some(pod))
            .map(|e| &e.claim.key)
    }

    /// Names of the DeviceTaintRules known.
    pub fn taint_rule_names(&self) -> impl Iterator<Item = &str> {
        self.taint_rules.keys().map(String::as_str)
    }

    /// Names of the slices published.
    pub fn slice_names(&self) -> impl Iterator<Item = &str> {
        self.slices.keys().map(String::as_str)
    }

    /// Names of the classes known.
    pub fn class_names(&self) -> impl Iterator<Item = &str> {
        self.classes.keys().map(String::as_str)
    }

    /// Keys (`namespace/name`) of the claims known.
    pub fn claim_keys(&self) -> impl Iterator<Item = &str> {
        self.claims.keys().map(String::as_str)
    }

    /// The allocations chosen for `pod` that the driver must write before
    /// its Binding, by claim.
    pub fn chosen_for(&self, pod: &str) -> Vec<(&str, &Allocation)> {
        self.chosen()
            .filter(|(p, _, _)| *p == pod)
            .map(|(_, claim, a)| (claim, a))
            .collect()
    }

    /// Every allocation chosen and not yet written: `(pod, claim, allocation)`,
    /// by claim.
    pub(crate) fn chosen(&self) -> impl Iterator<Item = (&str, &str, &Allocation)> {
        self.claims.values().filter_map(|e| {
            let (pod, a) = e.chosen.as_ref()?;
            Some((pod.as_str(), e.claim.key.as_str(), a))
        })
    }

    /// The devices chosen to serve pods' extended resources, by pod.
    pub(crate) fn extended_chosen(&self) -> impl Iterator<Item = (&str, &ExtendedChoice)> {
        self.extended.iter().map(|(pod, c)| (pod.as_str(), c))
    }

    /// Ops that publish all of it again: slices, classes, then claims,
    /// each with its allocation as the API server has it, or as chosen
    /// for a pod that `bound` says is bound (its driver writes that
    /// allocation before the Binding).
    pub(crate) fn as_ops(&self, bound: impl Fn(&str) -> bool) -> Vec<crate::ClusterOp> {
        use crate::ClusterOp;
        let mut ops: Vec<ClusterOp> = self
            .slices
            .iter()
            .map(|(name, published)| ClusterOp::SetResourceSlice {
                name: name.clone(),
                slice: published.slice.clone(),
            })
            .collect();
        ops.extend(
            self.classes
                .values()
                .map(|e| ClusterOp::SetDeviceClass(e.class.clone())),
        );
        ops.extend(
            self.taint_rules
                .values()
                .map(|r| ClusterOp::SetDeviceTaintRule(r.clone())),
        );
        for e in self.claims.values() {
            let mut claim = e.claim.clone();
            if let Some((pod, a)) = &e.chosen
                && bound(pod)
            {
                claim.allocation = Some(a.clone());
            }
            ops.push(ClusterOp::SetClaim(claim));
        }
        ops
    }
}
