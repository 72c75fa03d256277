//! Gangs under a topology constraint, through the framework with the
//! bundled DRAGON policy: placed inside one domain of the level they name
//! or not at all (required), the narrowest domain that holds them
//! (preferred), a clear reason when no domain does, and preemption that
//! frees one domain and holds it for the preemptor.

use dragon_framework::{
    Cluster, ClusterOp, Decision, Node, Pod, PodState, RecordingIo, Resources, Scheduler,
    SchedulerConfig, TopologyConstraint, UnitKey,
};
use dragon_runtime::Hooks;
use dragon_sim::spec::{TaskSpec, job_pods};
use dragon_tests::{Ops, bundled, engine, unschedulable as reason};

const RACK: &str = "example.com/rack";
const BLOCK: &str = "example.com/block";

/// Nodes of 4 GPUs, each `(name, block, rack)`, with levels block, rack.
fn sched(nodes: &[(&str, &str, &str)]) -> Scheduler {
    let mut c = Cluster::new();
    for (name, block, rack) in nodes {
        let r = Resources {
            cpu_milli: 32_000,
            memory_mib: 131_072,
            gpus: 4,
        };
        let mut n = Node::new(*name, r);
        n.labels.insert(BLOCK.into(), block.to_string());
        n.labels.insert(RACK.into(), rack.to_string());
        c.add_node(n).unwrap();
    }
    let mut s = Scheduler::new(c, SchedulerConfig::without_backoff());
    s.apply(ClusterOp::SetTopologyLevels(vec![
        BLOCK.into(),
        RACK.into(),
    ]))
    .unwrap();
    s
}

/// Two racks of two nodes in one block: r1 = {a, b}, r2 = {c, d}.
fn two_racks() -> Scheduler {
    sched(&[
        ("a", "b1", "r1"),
        ("b", "b1", "r1"),
        ("c", "b1", "r2"),
        ("d", "b1", "r2"),
    ])
}

/// A gang of `workers` one-GPU workers at `priority` under `topology`.
fn gang(
    s: &mut Scheduler,
    name: &str,
    priority: i32,
    workers: u32,
    topology: Option<TopologyConstraint>,
) {
    let w = TaskSpec {
        count: workers,
        min: Some(workers),
        max: Some(workers),
        cpu: 1.0,
        memory_gib: 1.0,
        gpus: 1,
        devices: Vec::new(),
    };
    let mut jp = job_pods("test", name, 0, priority, None, &w).unwrap();
    jp.job.topology = topology;
    s.upsert_job(jp.job);
    for p in jp.pods {
        s.add_pod(p, None).unwrap();
    }
}

/// A lone pod holding `gpus` on `node` (at priority 100: never a victim).
fn filler(s: &mut Scheduler, key: &str, gpus: u32, node: &str) {
    let mut p = Pod::new(
        key,
        Resources {
            cpu_milli: 100,
            memory_mib: 64,
            gpus,
        },
    );
    p.priority = 100;
    s.add_pod(p, Some(node)).unwrap();
}

fn round(s: &mut Scheduler, now: u64, p: &dyn Hooks) -> (Vec<Decision>, RecordingIo) {
    let mut io = RecordingIo::default();
    let mut scales = RecordingIo::default();
    let r = s.schedule_round(now, p, &mut io, &mut scales);
    (r.decisions, io)
}

/// The racks `job`'s bound pods are in.
fn racks(s: &Scheduler, job: &str) -> Vec<String> {
    let c = s.cluster();
    let mut out: Vec<String> = c
        .job_pods(job)
        .filter_map(|(_, st)| match st {
            PodState::Bound(n) => Some(c.nodes()[n].labels[RACK].clone()),
            _ => None,
        })
        .collect();
    out.sort();
    out.dedup();
    out
}

fn bound(s: &Scheduler, job: &str) -> usize {
    s.cluster()
        .job_pods(job)
        .filter(|(_, st)| matches!(st, PodState::Bound(_)))
        .count()
}

#[test]
fn a_required_rack_gang_lands_in_one_rack_even_where_spreading_would_fit() {
    let e = engine();
    let dragon = bundled(&e, "dragon", "");
    let mut s = two_racks();
    // r1 has 5 GPUs free, r2 has 7: six pods fit the cluster either way,
    // but only r2 holds them all.
    filler(&mut s, "x/a", 3, "a");
    filler(&mut s, "x/c", 1, "c");
    gang(&mut s, "g", 0, 6, Some(TopologyConstraint::required(RACK)));
    let (decisions, _) = round(&mut s, 0, &dragon);
    assert_eq!(bound(&s, "g"), 6, "{decisions:?}");
    assert_eq!(racks(&s, "g"), ["r2"]);
}

#[test]
fn a_gang_that_fits_the_cluster_but_no_rack_waits_whole_then_binds_where_room_frees() {
    let e = engine();
    let dragon = bundled(&e, "dragon", "");
    let mut s = two_racks();
    filler(&mut s, "x/a", 3, "a");
    filler(&mut s, "x/c", 1, "c");
    gang(&mut s, "g", 0, 8, Some(TopologyConstraint::required(RACK)));
    let (decisions, io) = round(&mut s, 0, &dragon);
    assert_eq!(bound(&s, "g"), 0, "never part of it: {:?}", io.binds);
    let why = reason(&decisions, &UnitKey::job("g"));
    assert!(
        why.contains(&format!(
            "no domain of topology level {RACK} holds all 8 pod(s) of job/g; the largest free is {RACK}=r2, with room for 7"
        )),
        "{why}"
    );

    s.remove_pod("x/c").unwrap();
    let (decisions, _) = round(&mut s, 1000, &dragon);
    assert_eq!(bound(&s, "g"), 8, "{decisions:?}");
    assert_eq!(racks(&s, "g"), ["r2"]);
}

#[test]
fn two_rack_sized_gangs_land_in_different_racks() {
    let e = engine();
    let dragon = bundled(&e, "dragon", "");
    let mut s = two_racks();
    gang(&mut s, "g1", 0, 5, Some(TopologyConstraint::required(RACK)));
    gang(&mut s, "g2", 0, 5, Some(TopologyConstraint::required(RACK)));
    let (decisions, _) = round(&mut s, 0, &dragon);
    assert_eq!((bound(&s, "g1"), bound(&s, "g2")), (5, 5), "{decisions:?}");
    let (r1, r2) = (racks(&s, "g1"), racks(&s, "g2"));
    assert_eq!((r1.len(), r2.len()), (1, 1), "{r1:?} {r2:?}");
    assert_ne!(r1, r2);
}

#[test]
fn a_preferred_rack_is_kept_where_one_holds_the_gang_and_widened_where_none_does() {
    let e = engine();
    let dragon = bundled(&e, "dragon", "");
    let mut s = two_racks();
    filler(&mut s, "x/a", 3, "a");
    filler(&mut s, "x/c", 1, "c");
    gang(
        &mut s,
        "small",
        0,
        4,
        Some(TopologyConstraint::preferred(RACK)),
    );
    round(&mut s, 0, &dragon);
    assert_eq!(racks(&s, "small").len(), 1);
    // Eight more fit only across both racks: preferred, so they spread.
    gang(
        &mut s,
        "wide",
        0,
        8,
        Some(TopologyConstraint::preferred(RACK)),
    );
    let (decisions, _) = round(&mut s, 1000, &dragon);
    assert_eq!(bound(&s, "wide"), 8, "{decisions:?}");
    assert_eq!(racks(&s, "wide"), ["r1", "r2"]);
}

// kube-scheduler's TopologyPlacement takes any node label key: a key that
// is not among the levels holds a gang to one of its domains all the same,
// and one that no node carries keeps it pending with the key named.
#[test]
fn a_constraint_on_any_node_label_key_is_honoured_and_one_no_node_carries_is_named() {
    const SLICE: &str = "example.com/slice";
    let e = engine();
    let dragon = bundled(&e, "dragon", "");
    let mut s = two_racks();
    // Slices cut across racks: s1 = {a, c}, s2 = {b, d}.
    for (node, slice) in [("a", "s1"), ("b", "s2"), ("c", "s1"), ("d", "s2")] {
        let mut n = s
            .cluster()
            .node_by_name(node)
            .map(|i| s.cluster().nodes()[i].clone())
            .unwrap();
        n.labels.insert(SLICE.into(), slice.into());
        s.apply(ClusterOp::UpdateNode(n)).unwrap();
    }
    filler(&mut s, "x/a", 1, "a");
    gang(&mut s, "g", 0, 6, Some(TopologyConstraint::required(SLICE)));
    let (decisions, _) = round(&mut s, 0, &dragon);
    assert_eq!(bound(&s, "g"), 6, "{decisions:?}");
    let c = s.cluster();
    let slices: std::collections::BTreeSet<&str> = c
        .job_pods("g")
        .filter_map(|(_, st)| st.node())
        .map(|n| c.nodes()[n].labels[SLICE].as_str())
        .collect();
    assert_eq!(slices.len(), 1, "{slices:?}");
    // The levels policies see are the configured ones.
    assert_eq!(
        s.cluster().topology_levels(),
        [BLOCK, RACK, "kubernetes.io/hostname"]
    );
    gang(
        &mut s,
        "z",
        0,
        2,
        Some(TopologyConstraint::required("zone")),
    );
    let (decisions, _) = round(&mut s, 1000, &dragon);
    assert_eq!(bound(&s, "z"), 0);
    let why = reason(&decisions, &UnitKey::job("z"));
    assert!(
        why.starts_with("no domain of topology level zone holds all 2 pod(s) of job/z")
            && why.contains("4 node(s) carry no zone label"),
        "{why}"
    );
}

// kube-scheduler scores a gang's placements by MostAllocated over each
// placement's nodes: of the racks that hold the gang, the busiest (with
// the gang in it), even where another has less room left.
#[test]
fn a_rack_gang_goes_to_the_most_allocated_rack_that_holds_it() {
    let e = engine();
    let dragon = bundled(&e, "dragon", "");
    // r1 = {a, b}: 8 GPUs, 3 used, room for 5; r2 = {c}: 4 GPUs free.
    let mut s = sched(&[("a", "b1", "r1"), ("b", "b1", "r1"), ("c", "b1", "r2")]);
    filler(&mut s, "x/a", 3, "a");
    gang(&mut s, "g", 0, 2, Some(TopologyConstraint::required(RACK)));
    let (decisions, _) = round(&mut s, 0, &dragon);
    assert_eq!(bound(&s, "g"), 2, "{decisions:?}");
    assert_eq!(racks(&s, "g"), ["r1"], "5 of 8 GPUs in use beats 2 of 4");
}

#[test]
fn nodes_without_the_level_label_are_never_used_and_are_counted_in_the_reason() {
    let e = engine();
    let dragon = bundled(&e, "dragon", "");
    let mut s = two_racks();
    let bare = Node::new(
        "bare",
        Resources {
            cpu_milli: 32_000,
            memory_mib: 131_072,
            gpus: 8,
        },
    );
    s.add_node(bare).unwrap();
    gang(&mut s, "g", 0, 9, Some(TopologyConstraint::required(RACK)));
    let (decisions, _) = round(&mut s, 0, &dragon);
    assert_eq!(bound(&s, "g"), 0);
    let why = reason(&decisions, &UnitKey::job("g"));
    assert!(
        why.contains(&format!("1 node(s) carry no {RACK} label")),
        "{why}"
    );
}

#[test]
fn a_higher_priority_rack_gang_preempts_inside_one_rack_only_and_holds_it() {
    let e = engine();
    let dragon = bundled(&e, "dragon", "");
    let mut s = two_racks();
    // r1: a gang of priority 0 and one of priority 5; r2: two of priority
    // 0. Freeing r2 costs only the least important work.
    for (name, priority) in [("a", 0), ("b", 5), ("c", 0), ("d", 0)] {
        gang(&mut s, name, priority, 4, None);
    }
    round(&mut s, 0, &dragon);
    let homes: Vec<Vec<String>> = ["a", "b", "c", "d"].iter().map(|j| racks(&s, j)).collect();
    assert!(homes.iter().all(|r| r.len() == 1), "{homes:?}");
    let high_rack = racks(&s, "b")[0].clone();
    gang(
        &mut s,
        "high",
        10,
        8,
        Some(TopologyConstraint::required(RACK)),
    );
    let (decisions, io) = round(&mut s, 1000, &dragon);
    let victims: Vec<UnitKey> = io.evictions.iter().map(|e| e.victim.clone()).collect();
    assert_eq!(victims.len(), 2, "{decisions:?}");
    assert!(
        !victims.contains(&UnitKey::job("b")),
        "the rack with the priority-5 gang is spared: {victims:?}"
    );
    let freed: Vec<String> = victims
        .iter()
        .flat_map(|v| racks(&s, v.job_name().unwrap()))
        .collect();
    assert!(freed.iter().all(|r| *r != high_rack), "{freed:?}");
    let why = reason(&decisions, &UnitKey::job("high"));
    assert!(
        why.contains(&format!("in {RACK}={}, held for it", freed[0])),
        "{why}"
    );

    // One victim leaves; while the other still holds its room, a pod of
    // lower priority that would fit in the freed room is kept out of the
    // held rack.
    let first = &io.evictions[0];
    for key in &first.pods {
        s.remove_pod(key).unwrap();
    }
    let late = Pod::new(
        "x/late",
        Resources {
            cpu_milli: 100,
            memory_mib: 64,
            gpus: 1,
        },
    );
    s.add_pod(late, None).unwrap();
    let (decisions, _) = round(&mut s, 2000, &dragon);
    let late_why = reason(&decisions, &UnitKey::pod("x/late"));
    assert!(
        late_why.contains("held for a preempting gang"),
        "{late_why} {decisions:?}"
    );

    for key in &io.evictions[1].pods {
        s.remove_pod(key).unwrap();
    }
    let (decisions, _) = round(&mut s, 3000, &dragon);
    assert_eq!(bound(&s, "high"), 8, "{decisions:?}");
    assert_eq!(racks(&s, "high"), [freed[0].clone()]);
}

#[test]
fn an_elastic_job_held_to_a_rack_grows_only_as_far_as_its_rack_has_room() {
    let e = engine();
    let dragon = bundled(&e, "dragon", r#"{"grow_to_fill": true}"#);
    let mut s = two_racks();
    filler(&mut s, "x/b", 3, "b");
    let w = TaskSpec {
        count: 4,
        min: Some(4),
        max: Some(16),
        cpu: 1.0,
        memory_gib: 1.0,
        gpus: 1,
        devices: Vec::new(),
    };
    let mut jp = job_pods("test", "e", 0, 0, None, &w).unwrap();
    jp.job.topology = Some(TopologyConstraint::required(RACK));
    s.upsert_job(jp.job);
    for p in jp.pods {
        s.add_pod(p, None).unwrap();
    }
    // r1 has room for exactly 5: the gang goes there (best fit).
    round(&mut s, 0, &dragon);
    assert_eq!(racks(&s, "e"), ["r1"]);
    s.apply(ClusterOp::MarkStarted {
        job: "e".into(),
        ms: 0,
    })
    .unwrap();
    // Nine GPUs are free in the cluster, but one in its rack.
    let report = s.plan_scale(600_000, &dragon);
    let grown: Vec<(String, u32, u32)> = report
        .requests
        .iter()
        .map(|r| (r.job.to_string(), r.from, r.workers))
        .collect();
    assert_eq!(grown, [("e".to_string(), 4, 5)], "{:?}", report.errors);
    assert!(
        report.requests[0].reason.contains(&format!(
            "capped at 5 workers: the rest would not fit in {RACK}=r1"
        )),
        "{}",
        report.requests[0].reason
    );
}

#[test]
fn the_benchmarks_rack_workloads_place_every_gang_in_one_rack_and_preempt_in_one() {
    use dragon_tests::workload::{
        RACK as BENCH_RACK, crowded, in_racks, pending, preempt, schedule_all,
    };
    let e = engine();
    let dragon = bundled(&e, "dragon", "");
    let mut s = in_racks(pending(200, 40, 8), 4);
    assert_eq!(schedule_all(&mut s, &dragon).unwrap(), 320);
    let c = s.cluster();
    for job in c.jobs() {
        let racks: std::collections::BTreeSet<&String> = c
            .job_pods(&job.name)
            .filter_map(|(_, st)| st.node())
            .map(|n| &c.nodes()[n].labels[BENCH_RACK])
            .collect();
        assert_eq!(racks.len(), 1, "{}: {racks:?}", job.name);
    }
    let mut s = in_racks(crowded(200), 4);
    assert_eq!(preempt(&mut s, &dragon).unwrap(), 8);
}

#[test]
fn a_new_member_of_a_placed_gang_goes_to_its_domain_or_waits_there() {
    let e = engine();
    let dragon = bundled(&e, "dragon", "");
    let mut s = two_racks();
    filler(&mut s, "x/b", 4, "b");
    gang(&mut s, "g", 0, 4, Some(TopologyConstraint::required(RACK)));
    round(&mut s, 0, &dragon);
    // r1 (4 free) is the best fit for four pods.
    assert_eq!(racks(&s, "g"), ["r1"]);
    // A fifth worker, as a scale-up adds it: r2 has room, r1 none.
    let mut job = s.cluster().job("g").unwrap().clone();
    let template = s
        .cluster()
        .job_pods("g")
        .next()
        .map(|(p, _)| p.clone())
        .unwrap();
    job.workers = 5;
    job.max_workers = 5;
    s.upsert_job(job);
    let mut fifth = template.clone();
    fifth.key = "test/g-worker-4".into();
    fifth.index = 4;
    s.add_pod(fifth, None).unwrap();
    let (decisions, _) = round(&mut s, 1000, &dragon);
    assert_eq!(bound(&s, "g"), 4, "{decisions:?}");
    let why = reason(&decisions, &UnitKey::job("g"));
    assert!(
        why.contains(&format!("its placed pods are in {RACK}=r1, which does not")),
        "{why}"
    );
    // Room in r1 lets it join there.
    s.remove_pod("x/b").unwrap();
    round(&mut s, 2000, &dragon);
    assert_eq!(bound(&s, "g"), 5);
    assert_eq!(racks(&s, "g"), ["r1"]);
}

#[test]
fn a_job_with_a_topology_constraint_is_placed_whole_even_under_a_policy_without_gangs() {
    let e = engine();
    let baseline = bundled(&e, "baseline", "");
    let mut s = two_racks();
    filler(&mut s, "x/a", 3, "a");
    filler(&mut s, "x/c", 1, "c");
    gang(&mut s, "g", 0, 6, Some(TopologyConstraint::required(RACK)));
    let (decisions, _) = round(&mut s, 0, &baseline);
    assert_eq!(bound(&s, "g"), 6, "{decisions:?}");
    assert_eq!(racks(&s, "g"), ["r2"]);
}
