//! What the framework and drivers read of the cluster.

use super::*;
use crate::unit::UnitKey;

impl Cluster {
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
            return Resources::default();
        }
        let mut free = self.nodes[i].allocatable.minus(self.used[i]);
        if let Some((gpus, held)) = self.device_gpus(i) {
            free.gpus = gpus.saturating_sub(held);
        }
        free
    }

    /// A node's GPUs when they are devices (it advertises no
    /// `nvidia.com/gpu` but has devices of the GPU class): how many, and
    /// how many are held.
    pub(crate) fn device_gpus(&self, i: usize) -> Option<(u32, u32)> {
        let node = &self.nodes[i];
        if self.gone[i] || node.allocatable.gpus > 0 {
            return None;
        }
        self.devices.gpus_on(&node.name)
    }

    /// `pod` as a policy sees it in a unit: its role, its index, and what
    /// it requests (its own requests, and the GPUs its claims ask of the
    /// GPU class).
    pub(crate) fn task(&self, pod: &Pod) -> dragon_runtime::wit::Task {
        let mut request = pod.request.to_wit();
        if !pod.claims.is_empty() {
            request.gpus = request
                .gpus
                .saturating_add(self.devices.claimed_gpus(&pod.claims));
        }
        dragon_runtime::wit::Task {
            role: pod.role.to_wit(),
            index: pod.index,
            request,
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
        keys: &'a BTreeSet<PodKey>,
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

    /// Pods of `job` (any state) but its surplus workers, by key: its
    /// members at its current size.
    pub(crate) fn job_members<'a>(
        &'a self,
        job: &'a str,
    ) -> impl Iterator<Item = (&'a Pod, PodState)> + 'a {
        let entry = self.jobs.get(job);
        self.job_pods(job)
            .filter(move |(p, _)| !JobEntry::has_surplus(entry, p))
    }

    /// `job`'s members that wait to be placed, by key.
    pub(crate) fn pending_members<'a>(
        &'a self,
        job: &'a str,
    ) -> impl Iterator<Item = &'a Pod> + 'a {
        self.pending_members_of(job, self.jobs.get(job))
    }

    /// [`Cluster::pending_members`] of a job whose entry the caller holds
    /// (walking the jobs): it is not searched for again.
    pub(crate) fn pending_members_of<'a>(
        &'a self,
        job: &'a str,
        entry: Option<&'a JobEntry>,
    ) -> impl Iterator<Item = &'a Pod> + 'a {
        self.job_pods(job)
            .filter(move |(p, s)| *s == PodState::Pending && !JobEntry::has_surplus(entry, p))
            .map(|(p, _)| p)
    }

    /// The id of the unit `key` names, while its job or pod exists.
    pub(crate) fn id_of_unit(&self, key: &UnitKey) -> Option<u64> {
        match key {
            UnitKey::Job(job) => self.jobs.get(job.as_str()).map(|e| e.unit_id),
            UnitKey::Pod(pod) => self.pods.get(pod.as_str()).map(|e| e.unit_id),
        }
    }

    /// How many pods of `job` hold a node (bound or reserved).
    pub(crate) fn job_placed(&self, job: &str) -> usize {
        self.jobs.get(job).map_or(0, |e| e.counts.placed as usize)
    }

    /// How many of `job`'s pods are members at its size (not surplus
    /// workers), in any state.
    pub(crate) fn member_count(&self, job: &str) -> u32 {
        self.jobs.get(job).map_or(0, |e| e.counts.members)
    }

    /// A worker pod beyond its job's current worker count: being removed by
    /// a scale-down or an admission below the requested size.
    pub(crate) fn is_surplus(&self, pod: &Pod) -> bool {
        JobEntry::has_surplus(pod.job.as_ref().and_then(|j| self.jobs.get(j)), pod)
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
        self.totals_among(0..self.nodes.len())
    }

    /// Totals over the live nodes among `nodes`: (allocatable, used).
    pub(crate) fn totals_among(
        &self,
        nodes: impl IntoIterator<Item = usize>,
    ) -> (Resources, Resources) {
        let mut alloc = Resources::default();
        let mut used = Resources::default();
        for i in nodes {
            if !self.gone[i] {
                alloc = alloc.plus(self.nodes[i].allocatable);
                used = used.plus(self.used[i]);
            }
        }
        (alloc, used)
    }
}
