use super::*;

fn r(cpu_milli: u64, memory_mib: u64, gpus: u32) -> Resources {
    Resources {
        cpu_milli,
        memory_mib,
        gpus,
    }
}

/// A one-GPU pod at `priority`.
fn pod(key: &str, priority: i32) -> Pod {
    Pod {
        priority,
        ..Pod::new(key, r(1000, 1024, 1))
    }
}

#[test]
fn the_lowest_priority_holding_a_node_follows_binds_and_removals() {
    let mut c = Cluster::new();
    c.add_node(Node::new("a", r(8000, 8192, 8))).unwrap();
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

#[test]
fn the_lowest_priority_waiting_follows_arrivals_binds_and_lost_nodes() {
    let mut c = Cluster::new();
    c.add_node(Node::new("a", r(8000, 8192, 8))).unwrap();
    assert_eq!(c.lowest_pending_priority(), None);
    c.add_pod(pod("placed", -3), Some("a")).unwrap();
    c.add_pod(pod("high", 9), None).unwrap();
    c.add_pod(pod("low", 2), None).unwrap();
    assert_eq!(
        c.lowest_pending_priority(),
        Some(2),
        "a placed pod does not wait"
    );
    c.set_state("low", PodState::Reserved(0));
    assert_eq!(c.lowest_pending_priority(), Some(9));
    c.set_state("low", PodState::Bound(0));
    c.remove_node("a").unwrap();
    assert_eq!(c.lowest_pending_priority(), Some(-3), "its pods wait again");
    c.remove_pod("placed").unwrap();
    c.remove_pod("high").unwrap();
    assert_eq!(c.lowest_pending_priority(), Some(2));
    c.remove_pod("low").unwrap();
    assert_eq!(c.lowest_pending_priority(), None);
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

#[test]
fn a_jobs_counts_follow_its_pods_states_and_its_size() {
    let mut c = Cluster::new();
    c.add_node(Node::new("a", r(8000, 8192, 8))).unwrap();
    c.upsert_job(crate::fixtures::job("j", 3));
    let worker = |i: u32| Pod {
        job: Some("j".into()),
        role: Role::Worker,
        index: i,
        ..Pod::new(format!("j-worker-{i}"), r(1000, 1024, 1))
    };
    // The kept counts, checked against a walk over the job's pods.
    let members = |c: &Cluster| {
        let kept = c.jobs["j"].counts;
        assert_eq!(kept, walked_counts(c, "j"));
        kept.pending_members
    };
    for i in 0..4 {
        c.add_pod(worker(i), None).unwrap();
    }
    assert_eq!(members(&c), 3, "worker 3 is beyond the job's size");
    c.set_state("j-worker-0", PodState::Reserved(0));
    c.set_state("j-worker-0", PodState::Bound(0));
    assert_eq!(members(&c), 2);
    let mut grown = crate::fixtures::job("j", 4);
    grown.max_workers = 4;
    c.upsert_job(grown);
    assert_eq!(members(&c), 3, "grown: worker 3 is a member");
    c.set_workers("j", 2);
    assert_eq!(
        members(&c),
        1,
        "shrunk: only worker 1 is pending and a member"
    );
    c.remove_node("a").unwrap();
    assert_eq!(members(&c), 2, "worker 0 lost its node");
    c.remove_pod("j-worker-1").unwrap();
    c.remove_pod("j-worker-3").unwrap();
    assert_eq!(members(&c), 1);
}

/// `job`'s counts found by a walk over its pods: what the kept ones must
/// always equal.
pub(crate) fn walked_counts(c: &Cluster, job: &str) -> super::JobCounts {
    let pods: Vec<_> = c.job_pods(job).collect();
    let count =
        |f: &dyn Fn(&Pod, PodState) -> bool| pods.iter().filter(|(p, s)| f(p, *s)).count() as u32;
    super::JobCounts {
        members: count(&|p, _| !c.is_surplus(p)),
        pending_members: count(&|p, s| s == PodState::Pending && !c.is_surplus(p)),
        placed: count(&|_, s| s.node().is_some()),
        placed_workers: count(&|p, s| p.role == Role::Worker && s.node().is_some()),
        bound: count(&|_, s| matches!(s, PodState::Bound(_))),
    }
}
