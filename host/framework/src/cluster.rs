//! The cluster snapshot: nodes, pods with their state, jobs, and per-node
//! usage kept current incrementally (no per-cycle rebuild).

use std::collections::{BTreeMap, BTreeSet, HashMap};

use super::constraints::HostPort;
use super::journal::ClusterOp;
use super::model::{Demand, DisruptionBudget, Job, Node, Pod, Resources, Role, Scalars};
use super::queue::Changes;
use super::view::{ChangeLog, Interned, Service, Topology};
use dragon_runtime::wit;

/// Where a pod stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PodState {
    /// Waiting for a node.
    Pending,
    /// Holding room on a node while its gang waits in permit.
    Reserved(usize),
    /// Bound to a node.
    Bound(usize),
}

impl PodState {
    /// The node holding the pod's resources, if any.
    pub fn node(self) -> Option<usize> {
        match self {
            PodState::Pending => None,
            PodState::Reserved(n) | PodState::Bound(n) => Some(n),
        }
    }
}

#[derive(Debug, Clone)]
pub(crate) struct PodEntry {
    pub(crate) pod: Pod,
    pub(crate) state: PodState,
    /// Unit id for a pod scheduled on its own.
    pub(crate) unit_id: u64,
}

#[derive(Debug, Clone)]
pub(crate) struct JobEntry {
    pub(crate) job: Job,
    pub(crate) unit_id: u64,
    pub(crate) started_ms: Option<u64>,
    pub(crate) scaled_ms: Option<u64>,
    /// GPUs held over time, and restarts.
    pub(crate) service: Service,
}

/// Bad input from a driver.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ClusterError {
    #[error("unknown node `{0}`")]
    UnknownNode(String),
    #[error("unknown pod `{0}`")]
    UnknownPod(String),
    #[error("pod `{pod}` names unknown job `{job}`")]
    UnknownJob { pod: String, job: String },
    #[error("duplicate {kind} `{name}`")]
    Duplicate { kind: &'static str, name: String },
}

/// Every node's allocatable and free resources as columns, in the policy's
/// layout, kept current with each change of usage: a pod's candidates are
/// then a gather from here (a plain copy when every node is a candidate)
/// instead of a recomputation per node per pod. A removed node has zeros.
#[derive(Debug, Clone, Default)]
pub(crate) struct Columns {
    pub(crate) alloc_cpu_milli: Vec<u64>,
    pub(crate) alloc_memory_mib: Vec<u64>,
    pub(crate) alloc_gpus: Vec<u32>,
    pub(crate) free_cpu_milli: Vec<u64>,
    pub(crate) free_memory_mib: Vec<u64>,
    pub(crate) free_gpus: Vec<u32>,
    /// How many more pods the node takes (`u32::MAX` without a limit).
    pub(crate) free_pods: Vec<u32>,
    /// Live, schedulable and without a NoSchedule/NoExecute taint: a pod
    /// with no node selector needs only the resource fit here.
    pub(crate) open: Vec<bool>,
    /// Which rows changed, for policies that keep a copy.
    pub(crate) log: ChangeLog,
}

impl Columns {
    fn set(&mut self, i: usize, alloc: Resources, free: Resources, free_pods: u32, open: bool) {
        if i == self.free_gpus.len() {
            self.open.push(open);
            self.free_pods.push(free_pods);
            self.alloc_cpu_milli.push(alloc.cpu_milli);
            self.alloc_memory_mib.push(alloc.memory_mib);
            self.alloc_gpus.push(alloc.gpus);
            self.free_cpu_milli.push(free.cpu_milli);
            self.free_memory_mib.push(free.memory_mib);
            self.free_gpus.push(free.gpus);
        } else {
            self.open[i] = open;
            self.free_pods[i] = free_pods;
            self.alloc_cpu_milli[i] = alloc.cpu_milli;
            self.alloc_memory_mib[i] = alloc.memory_mib;
            self.alloc_gpus[i] = alloc.gpus;
            self.free_cpu_milli[i] = free.cpu_milli;
            self.free_memory_mib[i] = free.memory_mib;
            self.free_gpus[i] = free.gpus;
        }
        self.log.note(i, self.free_gpus.len());
    }
}

/// What the pods on a node hold besides CPU, memory and GPUs.
#[derive(Debug, Clone, Default)]
struct NodeUse {
    extended: Scalars,
    pods: u32,
    ports: Vec<HostPort>,
}

/// Pods holding a node whose own terms weigh on where others go: kept so
/// that placing a pod looks at these few rather than at every pod.
#[derive(Debug, Clone, Default)]
struct Affine {
    /// Required anti-affinity: every pod placed later is checked against
    /// them (InterPodAffinity's filter).
    anti: BTreeSet<String>,
    /// Required affinity or preferred terms: every pod placed later is
    /// weighed against them (InterPodAffinity's score).
    weighing: BTreeSet<String>,
}

impl Affine {
    fn note(&mut self, pod: &Pod, holds: bool) {
        let c = &pod.constraints;
        for (set, applies) in [
            (&mut self.anti, !c.pod_anti_affinity.is_empty()),
            (&mut self.weighing, c.weighs_on_others()),
        ] {
            if !applies {
                continue;
            }
            if holds {
                set.insert(pod.key.clone());
            } else {
                set.remove(&pod.key);
            }
        }
    }
}

/// How many pods hold a node at each priority: whether any lower-priority
/// pod could be preempted is then one lookup.
type Priorities = BTreeMap<i32, u32>;

/// Adds (or with `add == false` takes back) what `pod` holds on a node.
fn account(
    used: &mut Resources,
    usage: &mut NodeUse,
    held: (&mut Affine, &mut Priorities),
    pod: &Pod,
    add: bool,
) {
    let (affine, priorities) = held;
    affine.note(pod, add);
    let count = priorities.entry(pod.priority).or_default();
    if add {
        *count += 1;
    } else {
        *count = count.saturating_sub(1);
        if *count == 0 {
            priorities.remove(&pod.priority);
        }
    }
    if add {
        *used = used.plus(pod.request);
        usage.pods += 1;
        for (name, &n) in &pod.extended {
            let u = usage.extended.entry(name.clone()).or_default();
            *u = u.saturating_add(n);
        }
        usage
            .ports
            .extend(pod.constraints.host_ports.iter().cloned());
    } else {
        *used = used.minus(pod.request);
        usage.pods = usage.pods.saturating_sub(1);
        for (name, &n) in &pod.extended {
            if let Some(u) = usage.extended.get_mut(name) {
                *u = u.saturating_sub(n);
                if *u == 0 {
                    usage.extended.remove(name);
                }
            }
        }
        // One copy per port the pod asked for, so another pod's identical
        // port stays taken.
        for p in &pod.constraints.host_ports {
            if let Some(at) = usage.ports.iter().position(|q| q == p) {
                usage.ports.swap_remove(at);
            }
        }
    }
}

/// Nodes, pods and jobs as the framework sees them.
#[derive(Debug, Clone, Default)]
pub struct Cluster {
    nodes: Vec<Node>,
    /// Nodes removed keep their slot so indices stay stable.
    gone: Vec<bool>,
    node_index: HashMap<String, usize>,
    used: Vec<Resources>,
    usage: Vec<NodeUse>,
    affine: Affine,
    priorities: Priorities,
    /// Derived from `nodes`, `gone` and `used`; see [`Columns`].
    columns: Columns,
    /// Live nodes with a `PreferNoSchedule` taint, by index, and how many:
    /// without any, placement needs no taint preference.
    soft_tainted: Vec<bool>,
    soft_tainted_count: usize,
    pub(crate) pods: BTreeMap<String, PodEntry>,
    pub(crate) jobs: BTreeMap<String, JobEntry>,
    /// Pod keys of each job, so a job's pods are found without a scan.
    by_job: BTreeMap<String, BTreeSet<String>>,
    next_unit: u64,
    /// What drivers changed since the last round, for the queue to wake the
    /// units it may help. The framework's own reservations are not changes.
    changes: Changes,
    /// Disruption budgets by name (`namespace/name`): what preemption may
    /// evict.
    budgets: BTreeMap<String, DisruptionBudget>,
    /// The drivers' changes since the journal was last taken, when kept.
    journal: Option<Vec<ClusterOp>>,
    /// Each node's topology labels, interned.
    topology: Vec<Topology>,
    interned: Interned,
    /// Job names by unit id.
    unit_jobs: HashMap<u64, String>,
    /// The latest time drivers or rounds have told, ms: when a job's
    /// holding changes, its attained service is integrated up to here.
    clock_ms: u64,
}

impl Cluster {
    /// Keep (or stop keeping) a journal of every change drivers make.
    pub fn keep_journal(&mut self, keep: bool) {
        self.journal = keep.then(Vec::new);
    }

    /// The changes journaled since the last call (none when no journal is
    /// kept).
    pub fn take_journal(&mut self) -> Vec<ClusterOp> {
        self.journal
            .as_mut()
            .map(std::mem::take)
            .unwrap_or_default()
    }

    /// How many changes the journal holds.
    pub fn journal_len(&self) -> usize {
        self.journal.as_ref().map_or(0, Vec::len)
    }

    fn journal(&mut self, op: impl FnOnce() -> ClusterOp) {
        if let Some(j) = &mut self.journal {
            j.push(op());
        }
    }

    /// An empty cluster.
    pub fn new() -> Cluster {
        Cluster::default()
    }

    /// The changes recorded since the last call.
    pub(crate) fn take_changes(&mut self) -> Changes {
        std::mem::take(&mut self.changes)
    }

    /// The framework bound `key` itself: to other units that is a pod
    /// placed, as a driver's [`Cluster::observe_bound`] would say.
    pub(crate) fn note_placed(&mut self) {
        self.changes.placed = true;
    }

    /// The unit of `job` changed (a member came, went or changed).
    fn note_job(&mut self, job: Option<&String>) {
        if let Some(e) = job.and_then(|j| self.jobs.get(j)) {
            self.changes.units.insert(e.unit_id);
        }
    }

    fn unit_id(&mut self) -> u64 {
        self.next_unit += 1;
        self.next_unit
    }

    /// Add a node.
    ///
    /// # Errors
    /// A node of that name already exists.
    pub fn add_node(&mut self, node: Node) -> Result<usize, ClusterError> {
        self.journal(|| ClusterOp::AddNode(node.clone()));
        if !self
            .node_index
            .get(&node.name)
            .is_some_and(|&i| !self.gone[i])
        {
            self.changes.room = true;
        }
        if let Some(&i) = self.node_index.get(&node.name) {
            if self.gone[i] {
                self.gone[i] = false;
                self.topology[i] = self.interned.topology(&node);
                self.nodes[i] = node;
                self.sync_columns(i);
                return Ok(i);
            }
            return Err(ClusterError::Duplicate {
                kind: "node",
                name: node.name,
            });
        }
        let i = self.nodes.len();
        self.node_index.insert(node.name.clone(), i);
        self.topology.push(self.interned.topology(&node));
        self.nodes.push(node);
        self.gone.push(false);
        self.used.push(Resources::default());
        self.usage.push(NodeUse::default());
        self.sync_columns(i);
        Ok(i)
    }

    /// Replace a node's spec (labels, taints, capacity) in place.
    ///
    /// # Errors
    /// The node is unknown.
    pub fn update_node(&mut self, node: Node) -> Result<(), ClusterError> {
        self.journal(|| ClusterOp::UpdateNode(node.clone()));
        let i = self.node_idx(&node.name)?;
        if node.may_admit_more_than(&self.nodes[i]) {
            self.changes.room = true;
        }
        self.topology[i] = self.interned.topology(&node);
        self.nodes[i] = node;
        self.sync_columns(i);
        Ok(())
    }

    /// Remove a node; pods on it become pending again.
    ///
    /// # Errors
    /// The node is unknown.
    pub fn remove_node(&mut self, name: &str) -> Result<(), ClusterError> {
        self.journal(|| ClusterOp::RemoveNode(name.to_string()));
        let i = self.node_idx(name)?;
        self.gone[i] = true;
        // Fewer domains can satisfy a spread's skew or minDomains.
        self.changes.room = true;
        let now = self.clock_ms;
        for e in self.pods.values_mut() {
            if e.state.node() == Some(i) {
                e.state = PodState::Pending;
                if let Some(j) = e.pod.job.as_ref().and_then(|j| self.jobs.get_mut(j)) {
                    j.service.hold(e.pod.request.gpus, false, now);
                }
                self.affine.note(&e.pod, false);
                if let Some(n) = self.priorities.get_mut(&e.pod.priority) {
                    *n -= 1;
                    if *n == 0 {
                        self.priorities.remove(&e.pod.priority);
                    }
                }
                if let Some(j) = e.pod.job.as_ref().and_then(|j| self.jobs.get(j)) {
                    self.changes.units.insert(j.unit_id);
                }
            }
        }
        self.used[i] = Resources::default();
        self.usage[i] = NodeUse::default();
        self.sync_columns(i);
        Ok(())
    }

    fn node_idx(&self, name: &str) -> Result<usize, ClusterError> {
        match self.node_index.get(name) {
            Some(&i) if !self.gone[i] => Ok(i),
            _ => Err(ClusterError::UnknownNode(name.to_string())),
        }
    }

    /// Index of a live node.
    pub fn node_by_name(&self, name: &str) -> Option<usize> {
        self.node_idx(name).ok()
    }

    /// Add or update a job.
    pub fn upsert_job(&mut self, job: Job) {
        self.journal(|| ClusterOp::UpsertJob(job.clone()));
        if let Some(e) = self.jobs.get_mut(&job.name) {
            if e.job != job {
                self.changes.units.insert(e.unit_id);
            }
            e.job = job;
        } else {
            let unit_id = self.unit_id();
            self.unit_jobs.insert(unit_id, job.name.clone());
            self.jobs.insert(
                job.name.clone(),
                JobEntry {
                    job,
                    unit_id,
                    started_ms: None,
                    scaled_ms: None,
                    service: Service::default(),
                },
            );
        }
    }

    /// Record that `job` runs since `ms` (for a snapshot rebuilt from a
    /// cluster where it already runs).
    pub fn mark_started(&mut self, job: &str, ms: u64) {
        self.journal(|| ClusterOp::MarkStarted {
            job: job.to_string(),
            ms,
        });
        if let Some(e) = self.jobs.get_mut(job) {
            e.started_ms = Some(ms);
        }
    }

    /// Add or replace a disruption budget. A changed budget may let a
    /// waiting unit preempt (it may allow more evictions than before).
    pub fn set_budget(&mut self, name: impl Into<String>, budget: DisruptionBudget) {
        let name = name.into();
        self.journal(|| ClusterOp::SetBudget {
            name: name.clone(),
            budget: budget.clone(),
        });
        self.changes.room |= self.budgets.get(&name) != Some(&budget);
        self.budgets.insert(name, budget);
    }

    /// Remove a disruption budget.
    pub fn remove_budget(&mut self, name: &str) {
        self.journal(|| ClusterOp::RemoveBudget(name.to_string()));
        self.changes.room |= self.budgets.remove(name).is_some();
    }

    /// Whether some pod holding a node has a priority below `priority`.
    pub(crate) fn holds_below(&self, priority: i32) -> bool {
        self.priorities
            .first_key_value()
            .is_some_and(|(&lowest, _)| lowest < priority)
    }

    /// The disruption budgets.
    pub fn budgets(&self) -> impl Iterator<Item = (&str, &DisruptionBudget)> {
        self.budgets.iter().map(|(k, b)| (k.as_str(), b))
    }

    /// Remove a job record (its pods are removed separately).
    pub fn remove_job(&mut self, name: &str) {
        self.journal(|| ClusterOp::RemoveJob(name.to_string()));
        if let Some(e) = self.jobs.remove(name) {
            self.unit_jobs.remove(&e.unit_id);
        }
    }

    /// Add a pod, pending or already on `node`.
    ///
    /// # Errors
    /// Duplicate key, unknown job or unknown node.
    pub fn add_pod(&mut self, pod: Pod, node: Option<&str>) -> Result<(), ClusterError> {
        self.journal(|| ClusterOp::AddPod {
            pod: pod.clone(),
            node: node.map(str::to_string),
        });
        if self.pods.contains_key(&pod.key) {
            return Err(ClusterError::Duplicate {
                kind: "pod",
                name: pod.key,
            });
        }
        if let Some(job) = &pod.job
            && !self.jobs.contains_key(job)
        {
            return Err(ClusterError::UnknownJob {
                pod: pod.key.clone(),
                job: job.clone(),
            });
        }
        let state = match node {
            Some(n) => {
                let i = self.node_idx(n)?;
                self.hold(i, &pod, true);
                self.changes.placed = true;
                PodState::Bound(i)
            }
            None => PodState::Pending,
        };
        self.note_job(pod.job.as_ref());
        let unit_id = self.unit_id();
        if let Some(job) = &pod.job {
            self.by_job
                .entry(job.clone())
                .or_default()
                .insert(pod.key.clone());
        }
        self.pods.insert(
            pod.key.clone(),
            PodEntry {
                pod,
                state,
                unit_id,
            },
        );
        Ok(())
    }

    /// Remove a pod (finished or deleted), freeing its resources.
    ///
    /// # Errors
    /// The pod is unknown.
    pub fn remove_pod(&mut self, key: &str) -> Result<Pod, ClusterError> {
        self.journal(|| ClusterOp::RemovePod(key.to_string()));
        self.forget_pod(key)
    }

    /// Remove a pod the framework itself decided is gone (a worker a scale
    /// removes): part of a round's outcome, so not journaled.
    pub(crate) fn forget_pod(&mut self, key: &str) -> Result<Pod, ClusterError> {
        let e = self
            .pods
            .remove(key)
            .ok_or_else(|| ClusterError::UnknownPod(key.to_string()))?;
        if let Some(job) = &e.pod.job
            && let Some(keys) = self.by_job.get_mut(job)
        {
            keys.remove(key);
            if keys.is_empty() {
                self.by_job.remove(job);
            }
        }
        if let Some(n) = e.state.node() {
            self.hold(n, &e.pod, false);
            self.changes.room = true;
        }
        self.note_job(e.pod.job.as_ref());
        Ok(e.pod)
    }

    /// Record that the API server has `key` bound to `node` (by this
    /// scheduler or anyone else): the pod holds room there from now on.
    ///
    /// # Errors
    /// Unknown pod or node.
    pub fn observe_bound(&mut self, key: &str, node: &str) -> Result<(), ClusterError> {
        self.journal(|| ClusterOp::ObserveBound {
            pod: key.to_string(),
            node: node.to_string(),
        });
        let n = self.node_idx(node)?;
        let Some(e) = self.pods.get(key) else {
            return Err(ClusterError::UnknownPod(key.to_string()));
        };
        if e.state != PodState::Bound(n) {
            // Moved off a node it held (bound elsewhere by another
            // scheduler while reserved here): room there.
            self.changes.room |= e.state.node().is_some_and(|old| old != n);
            self.changes.placed = true;
            if let Some(j) = e.pod.job.as_ref().and_then(|j| self.jobs.get(j)) {
                self.changes.units.insert(j.unit_id);
            }
            self.set_state(key, PodState::Bound(n));
        }
        Ok(())
    }

    /// The pod's scheduling gates changed (Kubernetes allows only their
    /// removal); unknown pods are ignored.
    pub fn set_scheduling_gates(&mut self, key: &str, gates: Vec<String>) {
        self.journal(|| ClusterOp::SetGates {
            pod: key.to_string(),
            gates: gates.clone(),
        });
        if let Some(e) = self.pods.get_mut(key)
            && e.pod.scheduling_gates != gates
        {
            e.pod.scheduling_gates = gates;
            self.changes.units.insert(e.unit_id);
            if let Some(j) = e.pod.job.as_ref().and_then(|j| self.jobs.get(j)) {
                self.changes.units.insert(j.unit_id);
            }
        }
    }

    /// The pod's labels changed (they are what other pods' affinity and
    /// spread constraints select on); unknown pods are ignored.
    pub fn set_labels(&mut self, key: &str, labels: super::selector::Labels) {
        self.journal(|| ClusterOp::SetLabels {
            pod: key.to_string(),
            labels: labels.clone(),
        });
        if let Some(e) = self.pods.get_mut(key)
            && e.pod.labels != labels
        {
            e.pod.labels = labels;
            if e.state.node().is_some() {
                // What other pods' affinity and spread select on changed.
                self.changes.room = true;
                self.changes.placed = true;
            }
            self.changes.units.insert(e.unit_id);
            if let Some(j) = e.pod.job.as_ref().and_then(|j| self.jobs.get(j)) {
                self.changes.units.insert(j.unit_id);
            }
        }
    }

    pub(crate) fn set_state(&mut self, key: &str, state: PodState) {
        let Some(e) = self.pods.get_mut(key) else {
            return;
        };
        let old = e.state.node();
        e.state = state;
        let pod = &e.pod;
        if let Some(n) = old {
            account(
                &mut self.used[n],
                &mut self.usage[n],
                (&mut self.affine, &mut self.priorities),
                pod,
                false,
            );
        }
        if let Some(n) = state.node() {
            account(
                &mut self.used[n],
                &mut self.usage[n],
                (&mut self.affine, &mut self.priorities),
                pod,
                true,
            );
        }
        if old.is_some() != state.node().is_some()
            && pod.request.gpus > 0
            && let Some(j) = pod.job.as_ref().and_then(|j| self.jobs.get_mut(j))
        {
            j.service
                .hold(pod.request.gpus, state.node().is_some(), self.clock_ms);
        }
        for n in [old, state.node()].into_iter().flatten() {
            self.sync_columns(n);
        }
    }

    /// A pod of `job` starts (`add`) or stops holding `gpus` GPUs.
    fn serve(&mut self, job: Option<&str>, gpus: u32, add: bool) {
        if gpus == 0 {
            return;
        }
        let now = self.clock_ms;
        if let Some(e) = job.and_then(|j| self.jobs.get_mut(j)) {
            e.service.hold(gpus, add, now);
        }
    }

    /// Time moves on to `now_ms` (never back): what attained service is
    /// integrated up to when a job's holding changes. Rounds and the scale
    /// step set it; drivers set it before applying what happened at a time.
    pub fn set_clock(&mut self, now_ms: u64) {
        self.clock_ms = self.clock_ms.max(now_ms);
    }

    /// `job` started again after its first start (a resize, or a
    /// re-admission after losing its pods).
    pub(crate) fn note_restart(&mut self, job: &str) {
        if let Some(e) = self.jobs.get_mut(job) {
            e.service.restarts = e.service.restarts.saturating_add(1);
        }
    }

    pub(crate) fn job_by_unit(&self, unit: u64) -> Option<&JobEntry> {
        self.unit_jobs.get(&unit).and_then(|j| self.jobs.get(j))
    }

    pub(crate) fn topology(&self, i: usize) -> Topology {
        self.topology.get(i).copied().unwrap_or_default()
    }

    /// `pod` starts (`add`) or stops holding room on node `i`.
    fn hold(&mut self, i: usize, pod: &Pod, add: bool) {
        account(
            &mut self.used[i],
            &mut self.usage[i],
            (&mut self.affine, &mut self.priorities),
            pod,
            add,
        );
        self.serve(pod.job.as_deref(), pod.request.gpus, add);
        self.sync_columns(i);
    }

    fn sync_columns(&mut self, i: usize) {
        let alloc = if self.gone[i] {
            Resources::default()
        } else {
            self.nodes[i].allocatable
        };
        let free = self.free(i);
        let node = &self.nodes[i];
        let open = !self.gone[i] && !node.unschedulable && !node.taints.iter().any(|t| t.repels());
        let soft = !self.gone[i] && node.taints.iter().any(|t| t.effect == "PreferNoSchedule");
        if i == self.soft_tainted.len() {
            self.soft_tainted.push(false);
        }
        if soft != self.soft_tainted[i] {
            self.soft_tainted[i] = soft;
            if soft {
                self.soft_tainted_count += 1;
            } else {
                self.soft_tainted_count -= 1;
            }
        }
        let free_pods = match (self.gone[i], node.max_pods) {
            (true, _) => 0,
            (false, None) => u32::MAX,
            (false, Some(max)) => max.saturating_sub(self.usage[i].pods),
        };
        self.columns.set(i, alloc, free, free_pods, open);
    }

    /// Every node's resources as columns (see [`Columns`]).
    pub(crate) fn columns(&self) -> &Columns {
        &self.columns
    }

    /// Nodes, including removed ones (see [`Cluster::is_live`]).
    pub fn nodes(&self) -> &[Node] {
        &self.nodes
    }

    /// Whether node `i` is still in the cluster.
    pub fn is_live(&self, i: usize) -> bool {
        !self.gone[i]
    }

    /// Free resources of node `i` (allocatable − requests of pods on it).
    pub fn free(&self, i: usize) -> Resources {
        if self.gone[i] {
            Resources::default()
        } else {
            self.nodes[i].allocatable.minus(self.used[i])
        }
    }

    /// Requests of the pods on node `i`.
    pub fn used(&self, i: usize) -> Resources {
        self.used[i]
    }

    /// Free amount of resource `name` (see [`Scalars`]) on node `i`.
    pub fn free_extended(&self, i: usize, name: &str) -> u64 {
        if self.gone[i] {
            return 0;
        }
        let alloc = self.nodes[i].extended.get(name).copied().unwrap_or(0);
        alloc.saturating_sub(self.usage[i].extended.get(name).copied().unwrap_or(0))
    }

    /// Host ports taken on node `i`.
    pub(crate) fn ports_in_use(&self, i: usize) -> &[HostPort] {
        &self.usage[i].ports
    }

    /// Pods holding a node (bound or reserved), with the node.
    pub(crate) fn placed(&self) -> impl Iterator<Item = (&Pod, usize)> {
        self.pods
            .values()
            .filter_map(|e| e.state.node().map(|n| (&e.pod, n)))
    }

    /// Whether any live node has a `PreferNoSchedule` taint.
    pub(crate) fn has_soft_taints(&self) -> bool {
        self.soft_tainted_count > 0
    }

    /// Whether any pod holding a node carries required anti-affinity.
    pub(crate) fn has_placed_anti_affinity(&self) -> bool {
        !self.affine.anti.is_empty()
    }

    /// The pods holding a node that carry required anti-affinity.
    pub(crate) fn placed_with_anti_affinity(&self) -> impl Iterator<Item = (&Pod, usize)> {
        self.placed_among(&self.affine.anti)
    }

    /// Whether any pod holding a node has terms that weigh on others.
    pub(crate) fn has_placed_weighing(&self) -> bool {
        !self.affine.weighing.is_empty()
    }

    /// The pods holding a node with required affinity or preferred pod
    /// terms.
    pub(crate) fn placed_weighing(&self) -> impl Iterator<Item = (&Pod, usize)> {
        self.placed_among(&self.affine.weighing)
    }

    fn placed_among<'a>(
        &'a self,
        keys: &'a BTreeSet<String>,
    ) -> impl Iterator<Item = (&'a Pod, usize)> + 'a {
        keys.iter()
            .filter_map(|k| self.pods.get(k))
            .filter_map(|e| e.state.node().map(|n| (&e.pod, n)))
    }

    /// A pod and its state.
    pub fn pod(&self, key: &str) -> Option<(&Pod, PodState)> {
        self.pods.get(key).map(|e| (&e.pod, e.state))
    }

    /// All pods with their state, by key.
    pub fn pods(&self) -> impl Iterator<Item = (&Pod, PodState)> {
        self.pods.values().map(|e| (&e.pod, e.state))
    }

    /// A job.
    pub fn job(&self, name: &str) -> Option<&Job> {
        self.jobs.get(name).map(|e| &e.job)
    }

    /// All jobs, by name.
    pub fn jobs(&self) -> impl Iterator<Item = &Job> {
        self.jobs.values().map(|e| &e.job)
    }

    /// The id of the job's unit: ids rise in the order the cluster learnt
    /// of its jobs and lone pods.
    pub fn job_unit(&self, name: &str) -> Option<u64> {
        self.jobs.get(name).map(|e| e.unit_id)
    }

    /// When the job was admitted, if it runs.
    pub fn job_started_ms(&self, name: &str) -> Option<u64> {
        self.jobs.get(name).and_then(|e| e.started_ms)
    }

    /// Pods of `job` (any state), by key.
    pub fn job_pods<'a>(&'a self, job: &'a str) -> impl Iterator<Item = (&'a Pod, PodState)> + 'a {
        self.by_job
            .get(job)
            .into_iter()
            .flatten()
            .filter_map(|k| self.pods.get(k))
            .map(|e| (&e.pod, e.state))
    }

    /// How many pods of `job` hold a node (bound or reserved).
    pub(crate) fn job_placed(&self, job: &str) -> usize {
        self.job_pods(job)
            .filter(|(_, s)| s.node().is_some())
            .count()
    }

    /// A worker pod beyond its job's current worker count: being removed by
    /// a scale-down or an admission below the requested size.
    pub(crate) fn is_surplus(&self, pod: &Pod) -> bool {
        pod.role == Role::Worker
            && pod
                .job
                .as_ref()
                .and_then(|j| self.jobs.get(j))
                .is_some_and(|j| pod.index >= j.job.workers)
    }

    /// Whole-cluster capacity columns for the policy: the kept columns, with
    /// cordoned nodes counted as having nothing.
    pub(crate) fn capacity(&self) -> wit::Capacity {
        let cols = &self.columns;
        let mut c = wit::Capacity {
            alloc_cpu_milli: cols.alloc_cpu_milli.clone(),
            alloc_memory_mib: cols.alloc_memory_mib.clone(),
            alloc_gpus: cols.alloc_gpus.clone(),
            free_cpu_milli: cols.free_cpu_milli.clone(),
            free_memory_mib: cols.free_memory_mib.clone(),
            free_gpus: cols.free_gpus.clone(),
        };
        for (i, node) in self.nodes.iter().enumerate() {
            if node.unschedulable {
                c.alloc_cpu_milli[i] = 0;
                c.alloc_memory_mib[i] = 0;
                c.alloc_gpus[i] = 0;
                c.free_cpu_milli[i] = 0;
                c.free_memory_mib[i] = 0;
                c.free_gpus[i] = 0;
            }
        }
        c
    }

    /// What the cluster lacks of `want` plus room for `pods` pods, counting
    /// as free what `job`'s own pods hold (Coscheduling's minResources
    /// check, `CheckClusterResource`): empty when it all fits, else one
    /// `NAME SHORTFALL` per resource short. Summed over every live node,
    /// cordoned or tainted ones included, as Coscheduling does: this is a
    /// quick test before the placement, not a placement.
    pub(crate) fn resource_gap(&self, job: &str, want: &Demand, pods: u32) -> Vec<String> {
        let mut free = Resources::default();
        let mut extended = Scalars::new();
        let mut free_pods: u64 = 0;
        // What the job's own pods hold, by node.
        let mut own: BTreeMap<usize, (Resources, u32, Scalars)> = BTreeMap::new();
        for (p, n) in self
            .job_pods(job)
            .filter_map(|(p, s)| s.node().map(|n| (p, n)))
        {
            let o = own.entry(n).or_default();
            o.0 = o.0.plus(p.request);
            o.1 += 1;
            for (name, &v) in &p.extended {
                let e = o.2.entry(name.clone()).or_default();
                *e = e.saturating_add(v);
            }
        }
        let none = (Resources::default(), 0, Scalars::new());
        for i in (0..self.nodes.len()).filter(|&i| !self.gone[i]) {
            let node = &self.nodes[i];
            let usage = &self.usage[i];
            let mine = own.get(&i).unwrap_or(&none);
            free = free.plus(node.allocatable.minus(self.used[i].minus(mine.0)));
            for name in want.extended.keys() {
                let alloc = node.extended.get(name).copied().unwrap_or(0);
                let used = usage.extended.get(name).copied().unwrap_or(0);
                let used = used.saturating_sub(mine.2.get(name).copied().unwrap_or(0));
                let e = extended.entry(name.clone()).or_default();
                *e = e.saturating_add(alloc.saturating_sub(used));
            }
            let held = usage.pods.saturating_sub(mine.1);
            let room = node
                .max_pods
                .map_or(u64::from(u32::MAX), |m| u64::from(m.saturating_sub(held)));
            free_pods = free_pods.saturating_add(room);
        }
        let mut gap = Vec::new();
        let r = want.request;
        if r.cpu_milli > free.cpu_milli {
            gap.push(format!("cpu {}m", r.cpu_milli - free.cpu_milli));
        }
        if r.memory_mib > free.memory_mib {
            gap.push(format!("memory {}Mi", r.memory_mib - free.memory_mib));
        }
        if r.gpus > free.gpus {
            gap.push(format!("nvidia.com/gpu {}", r.gpus - free.gpus));
        }
        for (name, &n) in &want.extended {
            let have = extended.get(name).copied().unwrap_or(0);
            if n > have {
                gap.push(format!("{name} {}", n - have));
            }
        }
        if u64::from(pods) > free_pods {
            gap.push(format!("pods {}", u64::from(pods) - free_pods));
        }
        gap
    }

    /// Totals over live nodes: (allocatable, used).
    pub fn totals(&self) -> (Resources, Resources) {
        let mut alloc = Resources::default();
        let mut used = Resources::default();
        for i in 0..self.nodes.len() {
            if !self.gone[i] {
                alloc = alloc.plus(self.nodes[i].allocatable);
                used = used.plus(self.used[i]);
            }
        }
        (alloc, used)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(cpu_milli: u64, memory_mib: u64, gpus: u32) -> Resources {
        Resources {
            cpu_milli,
            memory_mib,
            gpus,
        }
    }

    #[test]
    fn the_lowest_priority_holding_a_node_follows_binds_and_removals() {
        let mut c = Cluster::new();
        c.add_node(Node::new("a", r(8000, 8192, 8))).unwrap();
        let pod = |key: &str, priority| Pod {
            priority,
            ..Pod::new(key, r(1000, 1024, 1))
        };
        c.add_pod(pod("low", 0), Some("a")).unwrap();
        c.add_pod(pod("mid", 5), None).unwrap();
        assert!(c.holds_below(1));
        assert!(!c.holds_below(0));
        c.set_state("mid", PodState::Reserved(0));
        c.remove_pod("low").unwrap();
        assert!(!c.holds_below(5), "the pending one never held a node");
        assert!(c.holds_below(6));
        c.set_state("mid", PodState::Pending);
        assert!(!c.holds_below(i32::MAX));
    }

    /// The columns say what a recomputation from nodes and usage says.
    fn assert_columns_current(c: &Cluster) {
        let cols = c.columns();
        assert_eq!(cols.free_gpus.len(), c.nodes().len());
        for i in 0..c.nodes().len() {
            let alloc = if c.is_live(i) {
                c.nodes()[i].allocatable
            } else {
                Resources::default()
            };
            let free = c.free(i);
            let got_alloc = r(
                cols.alloc_cpu_milli[i],
                cols.alloc_memory_mib[i],
                cols.alloc_gpus[i],
            );
            let got_free = r(
                cols.free_cpu_milli[i],
                cols.free_memory_mib[i],
                cols.free_gpus[i],
            );
            assert_eq!((got_alloc, got_free), (alloc, free), "node {i}");
        }
    }

    #[test]
    fn the_capacity_columns_follow_every_change() {
        let mut c = Cluster::new();
        for n in 0..3 {
            c.add_node(Node::new(format!("n{n}"), r(8000, 32_000, 4)))
                .unwrap();
        }
        assert_columns_current(&c);
        c.add_pod(Pod::new("a", r(1000, 1000, 1)), Some("n0"))
            .unwrap();
        c.add_pod(Pod::new("b", r(2000, 2000, 2)), None).unwrap();
        assert_columns_current(&c);
        c.set_state("b", PodState::Reserved(1));
        assert_columns_current(&c);
        c.set_state("b", PodState::Bound(2));
        assert_columns_current(&c);
        c.update_node(Node::new("n2", r(16_000, 64_000, 8)))
            .unwrap();
        assert_columns_current(&c);
        c.remove_node("n2").unwrap();
        assert_columns_current(&c);
        c.add_node(Node::new("n2", r(4000, 8000, 1))).unwrap();
        assert_columns_current(&c);
        c.remove_pod("a").unwrap();
        assert_columns_current(&c);
        c.observe_bound("b", "n0").unwrap();
        assert_columns_current(&c);
        // The policy's whole-cluster view counts a cordoned node as empty.
        let mut cordoned = Node::new("n1", r(8000, 32_000, 4));
        cordoned.unschedulable = true;
        c.update_node(cordoned).unwrap();
        assert_columns_current(&c);
        let cap = c.capacity();
        assert_eq!((cap.alloc_gpus[1], cap.free_gpus[1]), (0, 0));
        assert_eq!((cap.alloc_gpus[0], cap.free_gpus[0]), (4, 2));
    }
}
