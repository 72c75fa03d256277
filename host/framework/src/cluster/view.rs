//! The cluster as policies that keep a view of it (interface 0.2) see it:
//! a log of which node rows changed, topology labels as interned ids, and
//! each job's history.

use std::collections::HashMap;

use dragon_runtime::view::{ClusterView, JobStats, NOTHING, NodeRow, QueueRow, new_log_id};
use dragon_runtime::wit;

use crate::cluster::Cluster;
use crate::model::Node;

/// The topology labels a node row carries.
pub const ZONE_LABEL: &str = "topology.kubernetes.io/zone";
pub const RACK_LABEL: &str = "dragon.dev/rack";
pub const HOST_LABEL: &str = "kubernetes.io/hostname";

/// Which node rows changed, in order. A follower that fell further behind
/// than the log keeps starts over from every row, so the log is bounded: it
/// drops its past once it holds four entries per node (at least 4,096).
#[derive(Debug)]
pub(crate) struct ChangeLog {
    id: u64,
    /// Position of `entries[0]`.
    base: u64,
    entries: Vec<u32>,
}

impl Default for ChangeLog {
    fn default() -> ChangeLog {
        ChangeLog {
            id: new_log_id(),
            base: 0,
            entries: Vec::new(),
        }
    }
}

/// A copy of a cluster goes its own way: its log is a new one, so nothing
/// that followed the original mistakes the copy's rows for its own.
impl Clone for ChangeLog {
    fn clone(&self) -> ChangeLog {
        ChangeLog::default()
    }
}

impl ChangeLog {
    pub(crate) fn note(&mut self, index: usize, nodes: usize) {
        if self.entries.len() >= (4 * nodes).max(4096) {
            self.base += self.entries.len() as u64;
            self.entries.clear();
        }
        self.entries.push(index as u32);
    }
}

/// Topology label values as small ids (0: absent), the same value the same
/// id for the cluster's life.
#[derive(Debug, Clone, Default)]
pub(crate) struct Interned {
    ids: HashMap<String, u32>,
}

/// A node's interned zone, rack and host.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Topology {
    zone: u32,
    rack: u32,
    host: u32,
}

impl Interned {
    fn id(&mut self, value: Option<&str>) -> u32 {
        let Some(value) = value else { return 0 };
        if let Some(&id) = self.ids.get(value) {
            return id;
        }
        let id = self.ids.len() as u32 + 1;
        self.ids.insert(value.to_string(), id);
        id
    }

    pub(crate) fn topology(&mut self, node: &Node) -> Topology {
        Topology {
            zone: self.id(node.labels.get(ZONE_LABEL).map(String::as_str)),
            rack: self.id(node.labels.get(RACK_LABEL).map(String::as_str)),
            host: self.id(node
                .labels
                .get(HOST_LABEL)
                .map(String::as_str)
                .or(Some(node.name.as_str()))),
        }
    }
}

/// A job's GPU holding over time: attained service is integrated at each
/// change of holding, on the cluster's clock.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Service {
    held_gpus: u32,
    since_ms: u64,
    attained_gpu_ms: u64,
    pub(crate) restarts: u32,
}

impl Service {
    /// The job's pods now hold `gpus` more (`add`) or fewer, at `now_ms`.
    pub(crate) fn hold(&mut self, gpus: u32, add: bool, now_ms: u64) {
        self.attained_gpu_ms = self.attained(now_ms);
        self.since_ms = now_ms.max(self.since_ms);
        self.held_gpus = if add {
            self.held_gpus.saturating_add(gpus)
        } else {
            self.held_gpus.saturating_sub(gpus)
        };
    }

    /// GPUs the job's pods hold now.
    pub(crate) fn held_gpus(&self) -> u32 {
        self.held_gpus
    }

    fn attained(&self, now_ms: u64) -> u64 {
        let span = now_ms.saturating_sub(self.since_ms);
        self.attained_gpu_ms
            .saturating_add(u64::from(self.held_gpus).saturating_mul(span))
    }
}

impl ClusterView for Cluster {
    fn log_id(&self) -> u64 {
        self.columns().log.id
    }

    fn log_end(&self) -> u64 {
        let log = &self.columns().log;
        log.base + log.entries.len() as u64
    }

    fn changed_since(&self, since: u64) -> Option<&[u32]> {
        let log = &self.columns().log;
        let from = usize::try_from(since.checked_sub(log.base)?).ok()?;
        log.entries.get(from..)
    }

    fn node_count(&self) -> u32 {
        self.nodes().len() as u32
    }

    /// The row 0.1's whole-cluster columns give a node (a cordoned node has
    /// nothing), with whether it is open and its topology.
    fn node(&self, index: u32) -> NodeRow {
        let i = index as usize;
        let cols = self.columns();
        let topology = self.topology(i);
        let cordoned = self.nodes().get(i).is_none_or(|n| n.unschedulable);
        let (allocatable, free) = if cordoned || i >= cols.free_gpus.len() {
            (NOTHING, NOTHING)
        } else {
            (
                wit::Resources {
                    cpu_milli: cols.alloc_cpu_milli[i],
                    memory_mib: cols.alloc_memory_mib[i],
                    gpus: cols.alloc_gpus[i],
                },
                wit::Resources {
                    cpu_milli: cols.free_cpu_milli[i],
                    memory_mib: cols.free_memory_mib[i],
                    gpus: cols.free_gpus[i],
                },
            )
        };
        NodeRow {
            allocatable,
            free,
            open: cols.open.get(i).copied().unwrap_or(false),
            zone: topology.zone,
            rack: topology.rack,
            host: topology.host,
        }
    }

    fn job_stats(&self, now_ms: u64, unit: u64) -> JobStats {
        let Some(e) = self.job_by_unit(unit) else {
            return JobStats::default();
        };
        JobStats {
            attained_gpu_ms: e.service.attained(now_ms),
            running_ms: e.started_ms.map_or(0, |s| now_ms.saturating_sub(s)),
            restarts: e.service.restarts,
            placed_workers: e.counts.placed_workers,
            requested_workers: e.job.workers,
            progress_permille: e.job.progress_permille,
            queue: self.queue_of(&e.job),
        }
    }

    fn levels(&self) -> &[String] {
        self.topology_levels()
    }

    fn domains(&self, index: u32, out: &mut Vec<u32>) {
        let d = self.domains();
        out.extend((0..d.levels().len()).map(|l| d.of(l, index as usize)));
    }

    fn queues(&self) -> Vec<QueueRow> {
        self.queue_rows()
    }

    fn gpu_type(&self, index: u32) -> Option<&str> {
        self.node_gpu_type(index as usize)
    }

    fn speedup(&self, unit: u64) -> &[u32] {
        self.job_by_unit(unit)
            .map_or(&[], |e| e.job.speedup.as_milli())
    }
}

/// The node label naming a node's GPU type (NVIDIA GPU feature discovery's).
pub const GPU_PRODUCT: &str = "nvidia.com/gpu.product";

/// `node`'s GPU type: its [`GPU_PRODUCT`] label.
pub(crate) fn gpu_type_of(node: &Node) -> Option<String> {
    node.labels.get(GPU_PRODUCT).cloned()
}

/// The cluster as one `score` call sees it: with the preferences of the pod
/// being placed among its candidates.
pub(crate) struct Scoring<'a> {
    cluster: &'a Cluster,
    preference: Vec<u32>,
}

impl<'a> Scoring<'a> {
    pub(crate) fn new(cluster: &'a Cluster, weighed: Option<&[u64]>) -> Scoring<'a> {
        let preference = weighed
            .unwrap_or_default()
            .iter()
            .map(|&w| u32::try_from(w).unwrap_or(u32::MAX))
            .collect();
        Scoring {
            cluster,
            preference,
        }
    }
}

impl ClusterView for Scoring<'_> {
    fn log_id(&self) -> u64 {
        self.cluster.log_id()
    }
    fn log_end(&self) -> u64 {
        self.cluster.log_end()
    }
    fn changed_since(&self, since: u64) -> Option<&[u32]> {
        self.cluster.changed_since(since)
    }
    fn node_count(&self) -> u32 {
        self.cluster.node_count()
    }
    fn node(&self, index: u32) -> NodeRow {
        self.cluster.node(index)
    }
    fn job_stats(&self, now_ms: u64, unit: u64) -> JobStats {
        self.cluster.job_stats(now_ms, unit)
    }
    fn preference(&self) -> &[u32] {
        &self.preference
    }
    fn levels(&self) -> &[String] {
        self.cluster.levels()
    }
    fn domains(&self, index: u32, out: &mut Vec<u32>) {
        ClusterView::domains(self.cluster, index, out)
    }
    fn queues(&self) -> Vec<QueueRow> {
        self.cluster.queue_rows()
    }
    fn gpu_type(&self, index: u32) -> Option<&str> {
        self.cluster.gpu_type(index)
    }
    fn speedup(&self, unit: u64) -> &[u32] {
        self.cluster.speedup(unit)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Pod, Resources, Role};
    use crate::{Cluster, PodState};
    use dragon_runtime::view::Delta;

    fn gpus(n: u32) -> Resources {
        Resources {
            cpu_milli: 1_000,
            memory_mib: 1_024,
            gpus: n,
        }
    }

    fn cluster() -> Cluster {
        let mut c = Cluster::new();
        for (name, zone) in [("a", "z1"), ("b", "z2"), ("c", "z1")] {
            let mut n = Node::new(name, gpus(4));
            n.labels.insert(ZONE_LABEL.into(), zone.into());
            c.add_node(n).unwrap();
        }
        c
    }

    #[test]
    fn a_nodes_gpu_type_follows_its_label_and_a_jobs_speedup_its_unit() {
        let mut c = cluster();
        assert_eq!(c.gpu_type(0), None);
        let mut a = c.nodes()[0].clone();
        a.labels
            .insert(GPU_PRODUCT.into(), "NVIDIA-A100-SXM4-80GB".into());
        c.update_node(a.clone()).unwrap();
        assert_eq!(c.gpu_type(0), Some("NVIDIA-A100-SXM4-80GB"));
        assert_eq!(c.gpu_type(1), None);
        a.labels.remove(GPU_PRODUCT);
        c.update_node(a).unwrap();
        assert_eq!(c.gpu_type(0), None);
        let mut job = crate::Job::gang("ml/j", 2);
        job.speedup = crate::Speedup::parse("1,1.8").unwrap();
        c.upsert_job(job);
        let unit = c.job_unit("ml/j").expect("the job's unit");
        assert_eq!(c.speedup(unit), [1000, 1800]);
        assert!(c.speedup(u64::MAX).is_empty());
    }

    #[test]
    fn rows_follow_the_columns_and_topology_is_interned() {
        let c = cluster();
        let (a, b, cc) = (c.node(0), c.node(1), c.node(2));
        assert_eq!(a.zone, cc.zone);
        assert_ne!(a.zone, b.zone);
        assert_ne!(a.host, b.host, "hosts default to node names");
        assert_eq!(a.rack, 0, "no rack label");
        assert_eq!(a.free.gpus, 4);
        assert!(a.open);
    }

    #[test]
    fn a_follower_learns_exactly_the_rows_a_placement_changed() {
        let mut c = cluster();
        let seen = Delta::since(&c, None).seen;
        c.add_pod(Pod::new("p", gpus(1)), Some("b")).unwrap();
        let d = Delta::since(&c, Some(seen));
        assert!(!d.reset);
        assert_eq!(d.indices, [1]);
        assert_eq!(c.node(1).free.gpus, 3);
        let copy = c.clone();
        assert!(
            Delta::since(&copy, Some(d.seen)).reset,
            "a copy is a new log"
        );
    }

    #[test]
    fn attained_service_integrates_the_gpus_a_job_holds_on_the_clock() {
        let mut c = cluster();
        c.upsert_job(crate::fixtures::job("j", 2));
        let unit = c.job_unit("j").unwrap();
        let worker = |i: u32| {
            let mut p = Pod::new(format!("j-worker-{i}"), gpus(2));
            p.job = Some("j".into());
            p.role = Role::Worker;
            p.index = i;
            p
        };
        c.add_pod(worker(0), None).unwrap();
        c.add_pod(worker(1), None).unwrap();
        c.set_clock(1_000);
        c.set_state("j-worker-0", PodState::Bound(0));
        c.set_state("j-worker-1", PodState::Bound(1));
        c.set_clock(4_000);
        // 4 GPUs for 3 s.
        assert_eq!(c.job_stats(4_000, unit).attained_gpu_ms, 12_000);
        c.remove_pod("j-worker-1").unwrap();
        // Then 2 GPUs for 1 s more.
        let s = c.job_stats(5_000, unit);
        assert_eq!(s.attained_gpu_ms, 14_000);
        assert_eq!(s.placed_workers, 1);
        assert_eq!(s.requested_workers, 2);
    }

    #[test]
    fn a_jobs_counts_follow_reservations_binds_removals_and_lost_nodes() {
        let mut c = cluster();
        c.upsert_job(crate::fixtures::job("j", 3));
        let unit = c.job_unit("j").unwrap();
        let pod = |name: &str, role: Role, i: u32| {
            let mut p = Pod::new(format!("j-{name}-{i}"), gpus(1));
            p.job = Some("j".into());
            p.role = role;
            p.index = i;
            p
        };
        // The kept count, checked against a walk over the job's pods.
        let placed = |c: &Cluster| {
            assert_eq!(
                c.jobs["j"].counts,
                super::super::tests::walked_counts(c, "j")
            );
            c.job_stats(0, unit).placed_workers
        };
        // Workers added already bound count; a parameter server does not.
        c.add_pod(pod("worker", Role::Worker, 0), Some("a"))
            .unwrap();
        c.add_pod(pod("ps", Role::Ps, 0), Some("a")).unwrap();
        c.add_pod(pod("worker", Role::Worker, 1), None).unwrap();
        c.add_pod(pod("worker", Role::Worker, 2), None).unwrap();
        assert_eq!(placed(&c), 1);
        // Reserved counts, and binding a reserved pod does not count twice.
        c.set_state("j-worker-1", PodState::Reserved(1));
        assert_eq!(placed(&c), 2);
        c.set_state("j-worker-1", PodState::Bound(1));
        assert_eq!(placed(&c), 2);
        c.set_state("j-worker-2", PodState::Reserved(2));
        c.set_state("j-worker-2", PodState::Pending);
        assert_eq!(placed(&c), 2, "an unreserved pod is pending again");
        // Node `a` goes: its worker is pending again.
        c.remove_node("a").unwrap();
        assert_eq!(placed(&c), 1);
        c.remove_pod("j-worker-1").unwrap();
        c.remove_pod("j-worker-0").unwrap();
        assert_eq!(placed(&c), 0);
    }
}
