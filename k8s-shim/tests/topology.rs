//! Gangs under topology constraints on a real control plane: KWOK nodes
//! labelled in racks, constraints from a scheduler-plugins PodGroup's
//! annotations, Kueue's podset annotations on the pods and a native
//! PodGroup's `schedulingConstraints`, any node label key, and preemption
//! that frees one rack.

mod common;

use std::collections::BTreeSet;

use common::*;
use kube::api::{Api, PostParams};
use serde_json::{Value, json};

const RACK: &str = "dragon.dev/rack";
const LEVELS: &str = "topologyLevels: [\"example.com/block\", \"dragon.dev/rack\"]\n";

/// Two racks of two 4-GPU nodes: r1 = {a, b}, r2 = {c, d}.
async fn two_racks(s: &Scenario) {
    for (node, rack) in [("a", "r1"), ("b", "r1"), ("c", "r2"), ("d", "r2")] {
        s.node_labelled(node, 4, json!({"example.com/block": "b1", RACK: rack}))
            .await;
    }
}

/// The racks the bound pods named `prefix*` are on.
async fn racks_of(s: &Scenario, prefix: &str) -> BTreeSet<String> {
    let rack = |node: &str| match node.rsplit('-').next() {
        Some("a" | "b") => "r1",
        Some("c" | "d") => "r2",
        _ => "?",
    };
    s.placement(prefix)
        .await
        .values()
        .flatten()
        .map(|n| rack(n).to_string())
        .collect()
}

/// A pod of `gpus` GPUs pinned to node `node` of the scenario.
async fn pinned(s: &Scenario, name: &str, gpus: u32, node: &str, extra: Value) {
    let mut spec =
        json!({"spec": {"nodeSelector": {"kubernetes.io/hostname": format!("{}-{node}", s.name)}}});
    merge(&mut spec, &extra);
    s.pod_with(name, None, gpus, spec).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_required_rack_gang_waits_whole_until_one_rack_holds_it_and_lands_there() {
    let _g = serial();
    let s = Scenario::new("rack-wait").await;
    two_racks(&s).await;
    let sched = Scheduler::start(&s, "dragon", LEVELS);
    // r1 has 5 GPUs free, r2 has 7 (until the pod on c finishes): eight
    // pods fit the cluster, but no rack.
    pinned(&s, "fill-a", 3, "a", json!({})).await;
    pinned(
        &s,
        "fill-c",
        1,
        "c",
        json!({"metadata": {"annotations": {"dragon.dev/complete-after-seconds": "25"}}}),
    )
    .await;
    until(60, "the fillers bound", || async {
        bound(&s.placement("fill-").await) == 2
    })
    .await;
    s.podgroup("wide", 8, json!({"dragon.dev/topology-required": RACK}))
        .await;
    for i in 0..8 {
        s.pod(&format!("wide-{i}"), Some(("wide", "worker", i)), 1, None)
            .await;
    }
    s.until_explained(
        30,
        "wide-0",
        &format!("no domain of topology level {RACK} holds all 8 pod(s)"),
    )
    .await;
    s.until_explained(
        30,
        "wide-0",
        &format!("the largest free is {RACK}=r2, with room for 7"),
    )
    .await;
    assert_eq!(
        bound(&s.placement("wide-").await),
        0,
        "never part of the gang:\n{}",
        sched.log()
    );
    // The pod on c finishes: r2 holds the gang, and it lands there whole.
    until(60, "the gang bound whole once r2 freed", || async {
        bound(&s.placement("wide-").await) == 8
    })
    .await;
    assert_eq!(racks_of(&s, "wide-").await, BTreeSet::from(["r2".into()]));
    s.assert_invariants(30, &[&sched], None).await;
    s.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_rack_sized_gangs_land_in_different_racks_whether_the_podgroup_or_kueue_asks() {
    let _g = serial();
    let s = Scenario::new("rack-two").await;
    two_racks(&s).await;
    // The default levels include dragon.dev/rack.
    let sched = Scheduler::start(&s, "dragon", "");
    s.podgroup("g1", 5, json!({"dragon.dev/topology-required": RACK}))
        .await;
    for i in 0..5 {
        s.pod(&format!("g1-{i}"), Some(("g1", "worker", i)), 1, None)
            .await;
    }
    until(60, "the first gang bound", || async {
        bound(&s.placement("g1-").await) == 5
    })
    .await;
    // The second says it the way Kueue's podsets do, on its pods.
    s.podgroup("g2", 5, json!({})).await;
    for i in 0..5 {
        s.pod_with(
            &format!("g2-{i}"),
            Some(("g2", "worker", i)),
            1,
            json!({"metadata": {"annotations": {"kueue.x-k8s.io/podset-required-topology": RACK}}}),
        )
        .await;
    }
    until(60, "the second gang bound", || async {
        bound(&s.placement("g2-").await) == 5
    })
    .await;
    let (r1, r2) = (racks_of(&s, "g1-").await, racks_of(&s, "g2-").await);
    assert_eq!(
        (r1.len(), r2.len()),
        (1, 1),
        "{r1:?} {r2:?}\n{}",
        sched.log()
    );
    assert_ne!(r1, r2);

    // A gang whose PodGroup and pods disagree is held with both named.
    s.podgroup("torn", 1, json!({"dragon.dev/topology-required": RACK}))
        .await;
    s.pod_with(
        "torn-0",
        Some(("torn", "worker", 0)),
        1,
        json!({"metadata": {"annotations": {"kueue.x-k8s.io/podset-preferred-topology": "example.com/block"}}}),
    )
    .await;
    s.until_explained(30, "torn-0", "conflicting topology constraints")
        .await;
    assert_eq!(bound(&s.placement("torn-").await), 0);
    s.assert_invariants(30, &[&sched], None).await;
    s.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_higher_priority_rack_gang_preempts_inside_one_rack_only_and_lands_there() {
    use k8s_openapi::api::scheduling::v1::PriorityClass;
    let _g = serial();
    let s = Scenario::new("rack-preempt").await;
    let classes: Api<PriorityClass> = Api::all(s.client.clone());
    let (mid, high) = (format!("{}-mid", s.name), format!("{}-high", s.name));
    for (name, value) in [(&mid, 500), (&high, 1000)] {
        let _ = classes
            .create(
                &PostParams::default(),
                &serde_json::from_value(json!({"metadata": {"name": name}, "value": value}))
                    .unwrap(),
            )
            .await;
    }
    two_racks(&s).await;
    let sched = Scheduler::start(&s, "dragon", LEVELS);
    // r1: one pod of middling priority and one of none; r2: two of none.
    // The two least important are in different racks: freeing a whole
    // rack without touching the middling pod means r2.
    pinned(
        &s,
        "mid-a",
        4,
        "a",
        json!({"spec": {"priorityClassName": mid}}),
    )
    .await;
    for node in ["b", "c", "d"] {
        pinned(&s, &format!("low-{node}"), 4, node, json!({})).await;
    }
    until(60, "the cluster full", || async {
        bound(&s.placement("mid-").await) + bound(&s.placement("low-").await) == 4
    })
    .await;
    s.podgroup("high", 8, json!({"dragon.dev/topology-required": RACK}))
        .await;
    for i in 0..8 {
        s.pod_with(
            &format!("high-{i}"),
            Some(("high", "worker", i)),
            1,
            json!({"spec": {"priorityClassName": high}}),
        )
        .await;
    }
    until(60, "the high gang bound whole", || async {
        bound(&s.placement("high-").await) == 8
    })
    .await;
    assert_eq!(racks_of(&s, "high-").await, BTreeSet::from(["r2".into()]));
    // Only r2's pods were evicted.
    let left: BTreeSet<String> = s
        .placement("")
        .await
        .into_iter()
        .filter(|(n, node)| !n.starts_with("high-") && node.is_some())
        .map(|(n, _)| n)
        .collect();
    assert_eq!(
        left,
        BTreeSet::from(["mid-a".into(), "low-b".into()]),
        "{}",
        sched.log()
    );
    for pod in ["low-c", "low-d"] {
        let events = s.events_for(pod).await;
        assert!(
            events.iter().any(|(r, _)| r == "Preempted"),
            "{pod}: {events:?}"
        );
    }
    s.assert_invariants(30, &[&sched], None).await;
    s.cleanup().await;
    for name in [&mid, &high] {
        let _ = classes.delete(name, &Default::default()).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_native_podgroups_topology_constraint_keeps_its_gang_in_one_rack() {
    let _g = serial();
    let s = Scenario::new("rack-native").await;
    two_racks(&s).await;
    let sched = Scheduler::start(&s, "dragon", LEVELS);
    pinned(&s, "fill-a", 3, "a", json!({})).await;
    pinned(&s, "fill-c", 1, "c", json!({})).await;
    let api: Api<k8s_openapi::api::scheduling::v1beta1::PodGroup> =
        Api::namespaced(s.client.clone(), &s.name);
    let pg = json!({
        "apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
        "metadata": {"name": "native", "namespace": s.name},
        "spec": {"schedulingPolicy": {"gang": {"minCount": 6}},
                 "schedulingConstraints": {"topology": [{"key": RACK}]}}
    });
    let created = api
        .create(&PostParams::default(), &serde_json::from_value(pg).unwrap())
        .await
        .unwrap();
    assert!(
        created.spec.scheduling_constraints.is_some(),
        "the API server keeps schedulingConstraints (TopologyAwareWorkloadScheduling on)"
    );
    for i in 0..6 {
        s.native_member(&format!("native-{i}"), "native", 1).await;
    }
    until(60, "the native gang bound", || async {
        bound(&s.placement("native-").await) == 6
    })
    .await;
    // r1 had 5 free, r2 7: six pods fit only in r2.
    assert_eq!(
        racks_of(&s, "native-").await,
        BTreeSet::from(["r2".into()]),
        "{}",
        sched.log()
    );
    s.assert_invariants(30, &[&sched], None).await;
    s.cleanup().await;
}

/// As kube-scheduler, any node label key: under a default install (whose
/// levels do not list `example.com/block`), a gang required in one block
/// lands in the most allocated block that holds it; one naming a key no
/// node carries waits, the key named.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gang_may_name_any_node_label_key_and_goes_to_the_busiest_domain_that_holds_it() {
    let _g = serial();
    let s = Scenario::new("any-key").await;
    // b1 = {a, b}: 8 GPUs; b2 = {c}: 4.
    for (node, block) in [("a", "b1"), ("b", "b1"), ("c", "b2")] {
        s.node_labelled(node, 4, json!({"example.com/block": block}))
            .await;
    }
    let sched = Scheduler::start(&s, "dragon", "");
    pinned(&s, "fill-a", 3, "a", json!({})).await;
    until(60, "the filler bound", || async {
        bound(&s.placement("fill-").await) == 1
    })
    .await;
    // b1 with the gang: 5 of 8 GPUs in use; b2: 2 of 4. b2 has less room
    // left (4 against 5), but b1 is the most allocated.
    s.podgroup(
        "g",
        2,
        json!({"dragon.dev/topology-required": "example.com/block"}),
    )
    .await;
    for i in 0..2 {
        s.pod(&format!("g-{i}"), Some(("g", "worker", i)), 1, None)
            .await;
    }
    until(60, "the gang bound", || async {
        bound(&s.placement("g-").await) == 2
    })
    .await;
    let nodes: BTreeSet<String> = s.placement("g-").await.into_values().flatten().collect();
    assert!(
        nodes.iter().all(|n| n.ends_with("-a") || n.ends_with("-b")),
        "{nodes:?}\n{}",
        sched.log()
    );
    s.podgroup(
        "z",
        2,
        json!({"dragon.dev/topology-required": "example.com/zone"}),
    )
    .await;
    for i in 0..2 {
        s.pod(&format!("z-{i}"), Some(("z", "worker", i)), 1, None)
            .await;
    }
    s.until_explained(30, "z-0", "carry no example.com/zone label")
        .await;
    assert_eq!(bound(&s.placement("z-").await), 0);
    s.cleanup().await;
}
