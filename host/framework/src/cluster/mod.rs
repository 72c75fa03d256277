//! The cluster snapshot: nodes, pods with their state, jobs, and per-node
//! usage kept current incrementally (no per-cycle rebuild).

use std::collections::{BTreeMap, BTreeSet, HashMap};

use super::devices::{ExtendedChoice, Fit, GPU_RESOURCE, Inventory, Served};
use super::model::HostPort;
use super::model::{
    Demand, DisruptionBudget, Job, Node, Pod, Resources, Role, Scalars, TaintEffect,
};
use super::names::{JobKey, NodeName, PodKey};
use super::queue::Changes;
use super::volumes::Volumes;
use dragon_runtime::wit;
use journal::ClusterOp;
use topology::{Domains, LevelsError};
use view::{Interned, Service, Topology};

mod claims;
pub(crate) mod journal;
mod reads;
mod teams;
#[cfg(test)]
mod tests;
pub(crate) mod topology;
pub(crate) mod usage;
pub(crate) mod view;

pub(crate) use usage::Columns;
use usage::{Affine, NodeUse, Priorities, account};

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
    /// Its job's unit id (a job outlives its pods, and keeps its id): a
    /// round tells one job's pods from the next's by it, not by name.
    pub(crate) job_unit: Option<u64>,
}

#[derive(Debug, Clone)]
pub(crate) struct JobEntry {
    pub(crate) job: Job,
    pub(crate) unit_id: u64,
    pub(crate) started_ms: Option<u64>,
    pub(crate) scaled_ms: Option<u64>,
    /// GPUs held over time, and restarts.
    pub(crate) service: Service,
    /// When it was restarted, over the last hour (what the resize limits
    /// count).
    pub(crate) restarts: crate::scale::Restarts,
    /// The policy's last growth of it, while its new workers may still
    /// wait: (workers before, when).
    pub(crate) grew: Option<(u32, u64)>,
    /// How many of its pods there are, hold a node, are bound or wait, kept
    /// as pods come, go and move: rounds, permit and `job-stats` ask per
    /// unit, and a walk over the job's pods costs a look-up per pod.
    pub(crate) counts: JobCounts,
}

/// A job's pods counted by where they stand (see [`JobEntry::moved`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct JobCounts {
    /// Its pods that are not surplus workers (its members at its size).
    pub(crate) members: u32,
    /// Its members that wait to be placed: whether it is a pending unit.
    pub(crate) pending_members: u32,
    /// Its pods holding a node (reserved or bound), of any role.
    pub(crate) placed: u32,
    /// Its workers holding a node.
    pub(crate) placed_workers: u32,
    /// Its pods bound to a node.
    pub(crate) bound: u32,
}

/// One more (`add`) or one fewer.
fn step(count: &mut u32, add: bool) {
    *count = if add {
        count.saturating_add(1)
    } else {
        count.saturating_sub(1)
    };
}

impl JobEntry {
    /// One of its pods moved from `from` to `to` (`None`: not there) at
    /// `now_ms`: its counts and the GPUs it holds (its attained service)
    /// follow. Whether the pod is a member is read at its current size.
    fn moved(&mut self, pod: &Pod, from: Option<PodState>, to: Option<PodState>, now_ms: u64) {
        let member = !JobEntry::has_surplus(Some(self), pod);
        let c = &mut self.counts;
        if member && from.is_some() != to.is_some() {
            step(&mut c.members, to.is_some());
        }
        let pending = |s: Option<PodState>| s == Some(PodState::Pending);
        if member && pending(from) != pending(to) {
            step(&mut c.pending_members, pending(to));
        }
        let holds = |s: Option<PodState>| s.and_then(PodState::node).is_some();
        if holds(from) != holds(to) {
            step(&mut c.placed, holds(to));
            if pod.role == Role::Worker {
                step(&mut c.placed_workers, holds(to));
            }
            if pod.request.gpus > 0 {
                self.service.hold(pod.request.gpus, holds(to), now_ms);
            }
        }
        let bound = |s: Option<PodState>| matches!(s, Some(PodState::Bound(_)));
        if bound(from) != bound(to) {
            step(&mut c.bound, bound(to));
        }
    }

    /// Whether `pod` is a worker beyond `job`'s current worker count (see
    /// [`Cluster::is_surplus`]).
    pub(crate) fn has_surplus(job: Option<&JobEntry>, pod: &Pod) -> bool {
        pod.role == Role::Worker && job.is_some_and(|j| pod.index >= j.job.workers)
    }
}

/// Bad input from a driver.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ClusterError {
    #[error("unknown node `{0}`")]
    UnknownNode(NodeName),
    #[error("unknown pod `{0}`")]
    UnknownPod(PodKey),
    #[error("pod `{pod}` names unknown job `{job}`")]
    UnknownJob { pod: PodKey, job: JobKey },
    #[error("duplicate {kind} `{name}`")]
    Duplicate { kind: &'static str, name: String },
    #[error(transparent)]
    Levels(#[from] LevelsError),
    #[error(transparent)]
    Queues(#[from] crate::QueuesError),
}

/// Nodes, pods and jobs as the framework sees them.
#[derive(Debug, Clone, Default)]
pub struct Cluster {
    nodes: Vec<Node>,
    /// Nodes removed keep their slot so indices stay stable.
    gone: Vec<bool>,
    node_index: HashMap<NodeName, usize>,
    used: Vec<Resources>,
    usage: Vec<NodeUse>,
    affine: Affine,
    priorities: Priorities,
    /// How many pods wait at each priority (what a unit that cannot fit
    /// could be preempted by, placed before it).
    pending_priorities: Priorities,
    /// Derived from `nodes`, `gone` and `used`; see [`Columns`].
    columns: Columns,
    /// Live nodes with a `PreferNoSchedule` taint, by index, and how many:
    /// without any, placement needs no taint preference.
    soft_tainted: Vec<bool>,
    soft_tainted_count: usize,
    pub(crate) pods: BTreeMap<PodKey, PodEntry>,
    pub(crate) jobs: BTreeMap<JobKey, JobEntry>,
    /// Pod keys of each job, so a job's pods are found without a scan.
    by_job: BTreeMap<JobKey, BTreeSet<PodKey>>,
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
    /// Each node's GPU type (its [`view::GPU_PRODUCT`] label), read once
    /// per node change rather than from its labels per row sent.
    gpu_types: Vec<Option<String>>,
    interned: Interned,
    /// The configured topology levels and each node's domain at each.
    domains: Domains,
    /// Job names by unit id.
    unit_jobs: HashMap<u64, JobKey>,
    /// The latest time drivers or rounds have told, ms: when a job's
    /// holding changes, its attained service is integrated up to here.
    clock_ms: u64,
    /// The queues (teams) jobs belong to, indexed by name.
    queues: teams::Queues,
    /// Devices published by drivers, their classes, and the claims.
    pub(crate) devices: Inventory,
    /// PersistentVolumes, StorageClasses and unbound claims.
    pub(crate) volumes: Volumes,
}

impl Cluster {
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

    /// The policy's scale step ran (see [`Changes::policy`]).
    pub(crate) fn note_policy_stepped(&mut self) {
        self.changes.policy = true;
    }

    /// The unit of `job` changed (a member came, went or changed).
    fn note_job(&mut self, job: Option<&JobKey>) {
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
                self.gpu_types[i] = view::gpu_type_of(&node);
                self.domains.set_node(i, &node);
                self.nodes[i] = node;
                self.sync_columns(i);
                return Ok(i);
            }
            return Err(ClusterError::Duplicate {
                kind: "node",
                name: node.name.into(),
            });
        }
        let i = self.nodes.len();
        self.node_index.insert(node.name.clone(), i);
        self.topology.push(self.interned.topology(&node));
        self.gpu_types.push(view::gpu_type_of(&node));
        self.domains.set_node(i, &node);
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
        self.gpu_types[i] = view::gpu_type_of(&node);
        if self.nodes[i].labels != node.labels {
            self.domains.set_node(i, &node);
        }
        self.nodes[i] = node;
        self.sync_columns(i);
        Ok(())
    }

    /// Use topology levels `keys` (node label keys, widest first; the
    /// hostname level is added last when missing) in place of
    /// [`DEFAULT_LEVELS`](crate::DEFAULT_LEVELS): the hierarchy gangs'
    /// preferred constraints widen through and policies see. A constraint
    /// may name any other node label key too.
    ///
    /// # Errors
    /// The list is not a usable one (see [`LevelsError`]); the levels in
    /// use stay.
    pub fn set_topology_levels(&mut self, keys: Vec<String>) -> Result<(), LevelsError> {
        self.domains = Domains::new(&keys, &self.nodes)?;
        for e in self.jobs.values() {
            if let Some(c) = &e.job.topology {
                let _ = self.domains.track(&c.key, &self.nodes);
            }
        }
        // A new change log: every policy's view starts over with the levels.
        self.columns.log = view::ChangeLog::default();
        self.journal(|| ClusterOp::SetTopologyLevels(keys));
        self.changes.room = true;
        Ok(())
    }

    /// The topology levels, widest first, the hostname level last.
    pub fn topology_levels(&self) -> &[String] {
        self.domains.levels()
    }

    /// The topology levels and each node's domain at each.
    pub(crate) fn domains(&self) -> &Domains {
        &self.domains
    }

    /// Remove a node; pods on it become pending again.
    ///
    /// # Errors
    /// The node is unknown.
    pub fn remove_node(&mut self, name: &str) -> Result<(), ClusterError> {
        self.journal(|| ClusterOp::RemoveNode(name.into()));
        let i = self.node_idx(name)?;
        self.gone[i] = true;
        // Fewer domains can satisfy a spread's skew or minDomains.
        self.changes.room = true;
        let now = self.clock_ms;
        for e in self.pods.values_mut() {
            if e.state.node() == Some(i) {
                if let Some(j) = e.pod.job.as_ref().and_then(|j| self.jobs.get_mut(j)) {
                    j.moved(&e.pod, Some(e.state), Some(PodState::Pending), now);
                }
                e.state = PodState::Pending;
                self.affine.note(&e.pod, false);
                usage::count_priority(&mut self.priorities, e.pod.priority, false);
                usage::count_priority(&mut self.pending_priorities, e.pod.priority, true);
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
            _ => Err(ClusterError::UnknownNode(name.into())),
        }
    }

    /// Index of a live node.
    pub fn node_by_name(&self, name: &str) -> Option<usize> {
        self.node_idx(name).ok()
    }

    /// Add or update a job.
    pub fn upsert_job(&mut self, job: Job) {
        self.journal(|| ClusterOp::UpsertJob(job.clone()));
        // Any node label key may be named; past the bound on keys outside
        // the levels, the gang's reason says so (see `unknown_level`).
        if let Some(c) = &job.topology {
            let _ = self.domains.track(&c.key, &self.nodes);
        }
        if let Some(e) = self.jobs.get_mut(&job.name) {
            if e.job != job {
                self.changes.units.insert(e.unit_id);
            }
            let resized = e.job.workers != job.workers;
            e.job = job;
            if resized {
                let name = e.job.name.clone();
                self.count_members(&name);
            }
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
                    restarts: Default::default(),
                    grew: None,
                    counts: JobCounts::default(),
                },
            );
        }
    }

    /// Set `job`'s worker count (a resize by the framework).
    pub(crate) fn set_workers(&mut self, job: &str, workers: u32) {
        let Some(e) = self.jobs.get_mut(job) else {
            return;
        };
        if e.job.workers != workers {
            e.job.workers = workers;
            self.count_members(job);
        }
    }

    /// Count `job`'s members and pending members anew: which of its pods
    /// are surplus moved with its worker count.
    fn count_members(&mut self, job: &str) {
        let (mut members, mut pending) = (0u32, 0u32);
        for (_, state) in self.job_members(job) {
            members = members.saturating_add(1);
            if state == PodState::Pending {
                pending = pending.saturating_add(1);
            }
        }
        if let Some(e) = self.jobs.get_mut(job) {
            e.counts.members = members;
            e.counts.pending_members = pending;
        }
    }

    /// Record that `job` runs since `ms` (for a snapshot rebuilt from a
    /// cluster where it already runs).
    pub fn mark_started(&mut self, job: &str, ms: u64) {
        self.journal(|| ClusterOp::MarkStarted {
            job: job.into(),
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

    /// The lowest priority of a pending pod, if any is pending.
    pub(crate) fn lowest_pending_priority(&self) -> Option<i32> {
        self.pending_priorities.first_key_value().map(|(&p, _)| p)
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

    /// Remove a job record and whatever pods of it are still there (its
    /// drivers remove the pods first; a replay under another policy may
    /// have made pods the recorded run never had, and no pod outlives its
    /// job, as Kubernetes' garbage collector deletes an owner's pods).
    pub fn remove_job(&mut self, name: &str) {
        self.journal(|| ClusterOp::RemoveJob(name.into()));
        let left: Vec<PodKey> = self
            .by_job
            .get(name)
            .map(|keys| keys.iter().cloned().collect())
            .unwrap_or_default();
        for key in left {
            let _ = self.forget_pod(&key);
        }
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
            node: node.map(Into::into),
        });
        if self.pods.contains_key(&pod.key) {
            return Err(ClusterError::Duplicate {
                kind: "pod",
                name: pod.key.into(),
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
                // What it attaches and mounts there counts for the pods
                // placed after it, whoever placed it (NodeVolumeLimits,
                // VolumeRestrictions).
                if !pod.volumes.is_empty() {
                    self.volumes.use_volumes(&pod.key, i, &pod.volumes, true);
                }
                self.changes.placed = true;
                PodState::Bound(i)
            }
            None => PodState::Pending,
        };
        self.note_job(pod.job.as_ref());
        let unit_id = self.unit_id();
        if state == PodState::Pending {
            usage::count_priority(&mut self.pending_priorities, pod.priority, true);
        }
        let mut job_unit = None;
        if let Some(j) = pod.job.as_ref().and_then(|j| self.jobs.get_mut(j)) {
            j.moved(&pod, None, Some(state), self.clock_ms);
            job_unit = Some(j.unit_id);
        }
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
                job_unit,
            },
        );
        Ok(())
    }

    /// Remove a pod (finished or deleted), freeing its resources.
    ///
    /// # Errors
    /// The pod is unknown.
    pub fn remove_pod(&mut self, key: &str) -> Result<Pod, ClusterError> {
        self.journal(|| ClusterOp::RemovePod(key.into()));
        self.forget_pod(key)
    }

    /// Remove a pod the framework itself decided is gone (a worker a scale
    /// removes): part of a round's outcome, so not journaled.
    pub(crate) fn forget_pod(&mut self, key: &str) -> Result<Pod, ClusterError> {
        let e = self
            .pods
            .remove(key)
            .ok_or_else(|| ClusterError::UnknownPod(key.into()))?;
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
        if e.state == PodState::Pending {
            usage::count_priority(&mut self.pending_priorities, e.pod.priority, false);
        }
        if let Some(j) = e.pod.job.as_ref().and_then(|j| self.jobs.get_mut(j)) {
            j.moved(&e.pod, Some(e.state), None, self.clock_ms);
        }
        if e.pod.uses_devices() {
            self.devices.unchoose(key);
            self.sync_device_nodes();
        }
        if !e.pod.volumes.is_empty() {
            self.volumes.unchoose(key);
            if let Some(n) = e.state.node() {
                self.volumes.use_volumes(key, n, &e.pod.volumes, false);
            }
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
            pod: key.into(),
            node: node.into(),
        });
        let n = self.node_idx(node)?;
        let Some(e) = self.pods.get(key) else {
            return Err(ClusterError::UnknownPod(key.into()));
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
            pod: key.into(),
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
            pod: key.into(),
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
        // A reservation chooses the pod's devices; going back to pending
        // gives back what was chosen and not yet written.
        match (old, state) {
            (None, PodState::Reserved(n)) => {
                let served = served_by_devices(&self.devices, &self.nodes[n], &e.pod);
                if (!e.pod.claims.is_empty() || !served.is_empty())
                    && let Ok(Fit::Yes(chosen, extended)) =
                        self.devices.fit(&self.nodes[n], &e.pod.claims, &served)
                {
                    let classes = served
                        .iter()
                        .map(|s| (s.resource.to_string(), s.class.to_string()))
                        .collect();
                    self.devices.choose(key, chosen);
                    if let Some(allocation) = extended {
                        self.devices.choose_extended(
                            key,
                            ExtendedChoice {
                                allocation,
                                classes,
                            },
                        );
                    }
                }
            }
            (Some(_), PodState::Pending) if e.pod.uses_devices() => self.devices.unchoose(key),
            _ => {}
        }
        // And its volumes: the bindings of its unbound claims, and the
        // claims it now uses.
        if !e.pod.volumes.is_empty() && old != state.node() {
            match (old, state) {
                (None, PodState::Reserved(n)) => {
                    if let Ok(Ok(chosen)) = self.volumes.fit(&self.nodes[n], &e.pod.volumes.unbound)
                    {
                        self.volumes.choose(key, chosen);
                    }
                }
                (_, PodState::Pending) => self.volumes.unchoose(key),
                _ => {}
            }
            if let Some(n) = old {
                self.volumes.use_volumes(key, n, &e.pod.volumes, false);
            }
            if let Some(n) = state.node() {
                self.volumes.use_volumes(key, n, &e.pod.volumes, true);
            }
        }
        let before = e.state;
        e.state = state;
        let pod = &e.pod;
        if (before == PodState::Pending) != (state == PodState::Pending) {
            let waits = state == PodState::Pending;
            usage::count_priority(&mut self.pending_priorities, pod.priority, waits);
        }
        if let Some(j) = pod.job.as_ref().and_then(|j| self.jobs.get_mut(j)) {
            j.moved(pod, Some(before), Some(state), self.clock_ms);
        }
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
        for n in [old, state.node()].into_iter().flatten() {
            self.sync_columns(n);
        }
        self.sync_device_nodes();
    }

    /// Refreshes the columns of the nodes whose GPU devices or their use
    /// changed.
    fn sync_device_nodes(&mut self) {
        for name in self.devices.take_touched() {
            if let Some(i) = self.node_by_name(&name) {
                self.sync_columns(i);
            }
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
            e.restarts.note(self.clock_ms);
        }
    }

    pub(crate) fn job_by_unit(&self, unit: u64) -> Option<&JobEntry> {
        self.unit_jobs.get(&unit).and_then(|j| self.jobs.get(j))
    }

    pub(crate) fn topology(&self, i: usize) -> Topology {
        self.topology.get(i).copied().unwrap_or_default()
    }

    /// Node `i`'s GPU type, if it has one.
    pub(crate) fn node_gpu_type(&self, i: usize) -> Option<&str> {
        self.gpu_types.get(i)?.as_deref()
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
        self.sync_columns(i);
    }

    fn sync_columns(&mut self, i: usize) {
        let mut alloc = if self.gone[i] {
            Resources::default()
        } else {
            self.nodes[i].allocatable
        };
        if let Some((gpus, _)) = self.device_gpus(i) {
            alloc.gpus = gpus;
        }
        let free = self.free(i);
        let node = &self.nodes[i];
        let open = !self.gone[i] && !node.unschedulable && !node.taints.iter().any(|t| t.repels());
        let soft = !self.gone[i]
            && node
                .taints
                .iter()
                .any(|t| t.effect == TaintEffect::PreferNoSchedule);
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
}

/// The extended resources of `pod` that devices must serve on `node`
/// (kube's `DRAExtendedResource`): those the node does not advertise and a
/// DeviceClass serves. GPUs only where the node has devices of the GPU
/// class, so that a node with neither says "Insufficient nvidia.com/gpu".
pub(crate) fn served_by_devices<'a>(
    devices: &'a Inventory,
    node: &Node,
    pod: &'a Pod,
) -> Vec<Served<'a>> {
    let mut out = Vec::new();
    if pod.request.gpus > 0
        && node.allocatable.gpus == 0
        && devices.gpus_on(&node.name).is_some()
        && let Some(class) = devices.gpu_class_name()
    {
        out.push(Served {
            resource: GPU_RESOURCE,
            class,
            count: pod.request.gpus,
        });
    }
    for (resource, &count) in &pod.extended {
        if let Some(class) = dra_class(devices, node, resource, count) {
            out.push(Served {
                resource,
                class,
                count: u32::try_from(count).unwrap_or(u32::MAX),
            });
        }
    }
    out
}

/// The class serving `count` of extended resource `resource` on `node`,
/// when devices must: the node advertises none of it.
pub(crate) fn dra_class<'a>(
    devices: &'a Inventory,
    node: &Node,
    resource: &str,
    count: u64,
) -> Option<&'a str> {
    if count == 0 || node.extended.get(resource).is_some_and(|&a| a > 0) {
        return None;
    }
    devices.class_for(resource)
}
