//! DRAGON's rules one by one, through the host framework with the wasm
//! components, plus the framework's own guarantees (all-or-nothing gangs,
//! fail-closed policy errors, bounded scaling).

use std::collections::BTreeSet;

use dragon_framework::testing::node;
use dragon_framework::{
    Cluster, Decision, Job, NodeName, PodKey, PodState, RecordingIo, Resources, Scheduler,
    SchedulerConfig, Taint, TaintEffect, UnitKey,
};
use dragon_runtime::{ClusterView, Hooks, LoadOptions};
use dragon_tests::{Ops, add_job, bundled, engine, hostile, pending_pods};

fn sched(nodes: &[(&str, u32)]) -> Scheduler {
    let mut c = Cluster::new();
    for (n, g) in nodes {
        c.add_node(node(n, *g)).unwrap();
    }
    Scheduler::new(c, SchedulerConfig::default())
}

fn bound_nodes(s: &Scheduler, job: &str) -> Vec<String> {
    s.cluster()
        .job_pods(job)
        .filter_map(|(_, st)| match st {
            PodState::Bound(n) => Some(s.cluster().nodes()[n].name.to_string()),
            _ => None,
        })
        .collect()
}

fn round(s: &mut Scheduler, now: u64, p: &dyn Hooks) -> (Vec<Decision>, RecordingIo) {
    let mut io = RecordingIo::default();
    let r = s.schedule_round(now, p, &mut io, &mut RecordingIo::default());
    (r.decisions, io)
}

#[test]
fn a_gang_that_fits_on_one_node_lands_on_one_node() {
    let e = engine();
    let mut s = sched(&[("a", 2), ("b", 8), ("c", 4)]);
    add_job(&mut s, "j", 0, 4, 4, 4);
    let (d, io) = round(&mut s, 0, &bundled(&e, "dragon", ""));
    assert_eq!(io.binds.len(), 5, "{d:?}");
    let nodes: BTreeSet<String> = bound_nodes(&s, "j").into_iter().collect();
    // Best fit: the 4-GPU node takes all four workers and the PS.
    assert_eq!(nodes, BTreeSet::from(["c".to_string()]));
    assert!(
        d.iter().any(|d| matches!(
            d,
            Decision::Admitted {
                nodes: 1,
                pods: 5,
                ..
            }
        )),
        "{d:?}"
    );
}

#[test]
fn a_gang_too_big_for_one_node_uses_the_fewest_nodes_and_its_ps_follows_the_workers() {
    let e = engine();
    let mut s = sched(&[("a", 2), ("b", 4), ("c", 2), ("d", 1)]);
    add_job(&mut s, "j", 0, 6, 6, 6);
    round(&mut s, 0, &bundled(&e, "dragon", ""));
    let placed = bound_nodes(&s, "j");
    assert_eq!(placed.len(), 7);
    let nodes: BTreeSet<&String> = placed.iter().collect();
    assert_eq!(nodes.len(), 2, "{placed:?}");
    assert!(
        nodes.contains(&"b".to_string()),
        "the node that fits the most goes first: {placed:?}"
    );
    let (ps, _) = s.cluster().pod("j-ps-0").unwrap();
    assert_eq!(ps.key, "j-ps-0");
    let ps_node = match s.cluster().pod("j-ps-0").unwrap().1 {
        PodState::Bound(n) => s.cluster().nodes()[n].name.clone(),
        other => panic!("PS not bound: {other:?}"),
    };
    assert_eq!(ps_node, "b", "the PS goes where most workers are");
}

#[test]
fn of_two_gangs_that_cannot_both_fit_one_runs_whole_and_the_other_has_nothing_bound() {
    let e = engine();
    for name in ["dragon"] {
        let mut s = sched(&[("a", 4), ("b", 4)]);
        add_job(&mut s, "first", 0, 6, 6, 6);
        add_job(&mut s, "second", 1, 6, 6, 6);
        let (d, _) = round(&mut s, 10, &bundled(&e, name, ""));
        assert_eq!(bound_nodes(&s, "first").len(), 7);
        assert!(bound_nodes(&s, "second").is_empty());
        let reason = d
            .iter()
            .find_map(|d| match d {
                Decision::Unschedulable { unit, reason } if *unit == UnitKey::job("second") => {
                    Some(reason.to_string())
                }
                _ => None,
            })
            .expect("the second gang is reported unschedulable");
        assert!(reason.contains("does not fit"), "{reason}");
    }
}

#[test]
fn the_baseline_places_pods_one_at_a_time_and_leaves_a_job_half_placed() {
    let e = engine();
    let mut s = sched(&[("a", 4), ("b", 4)]);
    add_job(&mut s, "first", 0, 6, 6, 6);
    add_job(&mut s, "second", 1, 6, 6, 6);
    round(&mut s, 10, &bundled(&e, "baseline", ""));
    let (first, second) = (
        bound_nodes(&s, "first").len(),
        bound_nodes(&s, "second").len(),
    );
    // 8 GPUs for 12 GPU workers: the second job gets its PS and two workers
    // and holds them idle, unable to run.
    assert_eq!((first, second), (7, 3));
}

/// A PodGroup is a promise to the cluster: under a policy with no `permit`
/// (no gangs of its own), its pods are still placed all or nothing.
#[test]
fn a_podgroups_gang_is_placed_whole_or_not_at_all_even_by_a_policy_without_gangs() {
    let e = engine();
    let mut s = sched(&[("a", 4), ("b", 4)]);
    add_pod_group(&mut s, "first", 6, 1, |_| {});
    add_pod_group(&mut s, "second", 6, 1, |j| j.arrival_ms = 2);
    let (d, io) = round(&mut s, 10, &bundled(&e, "baseline", ""));
    let bound = |job: &str| io.binds.iter().filter(|(p, _)| p.starts_with(job)).count();
    assert_eq!((bound("first-"), bound("second-")), (6, 0), "{d:?}");
    assert_eq!(pending_pods(&s, "second"), 6);
    // A job that is not declared stays the policy's to gang or not.
    let mut s = sched(&[("a", 4), ("b", 4)]);
    add_pod_group(&mut s, "first", 6, 1, |j| j.declared = false);
    add_pod_group(&mut s, "second", 6, 1, |j| {
        j.declared = false;
        j.arrival_ms = 2;
    });
    let (_, io) = round(&mut s, 10, &bundled(&e, "baseline", ""));
    let bound = |job: &str| io.binds.iter().filter(|(p, _)| p.starts_with(job)).count();
    assert_eq!(
        bound("first-") + bound("second-"),
        8,
        "pod by pod: every GPU taken"
    );
}

#[test]
fn a_gang_that_does_not_fit_as_requested_is_admitted_at_its_min_and_shrunk() {
    let e = engine();
    let mut s = sched(&[("a", 4)]);
    add_job(&mut s, "j", 0, 6, 3, 8);
    let mut scaler = RecordingIo::default();
    let r = s.schedule_round(
        0,
        &bundled(&e, "dragon", ""),
        &mut RecordingIo::default(),
        &mut scaler,
    );
    assert_eq!(bound_nodes(&s, "j").len(), 4, "{:?}", r.decisions);
    assert_eq!(scaler.scales.len(), 1);
    assert_eq!((scaler.scales[0].0.as_str(), scaler.scales[0].1), ("j", 3));
    assert_eq!(s.cluster().job("j").unwrap().workers, 3);
    assert!(
        s.cluster().pod("j-worker-5").is_none(),
        "surplus pods are gone from the snapshot"
    );
}

#[test]
fn fifo_with_skipping_lets_a_later_job_that_fits_start() {
    let e = engine();
    let mut s = sched(&[("a", 4)]);
    add_job(&mut s, "big", 0, 8, 8, 8);
    add_job(&mut s, "small", 5, 2, 2, 2);
    round(&mut s, 10, &bundled(&e, "dragon", ""));
    assert!(bound_nodes(&s, "big").is_empty());
    assert_eq!(bound_nodes(&s, "small").len(), 3);
}

#[test]
fn a_gang_missing_members_is_not_tried_until_they_exist() {
    let e = engine();
    let mut s = sched(&[("a", 8)]);
    add_job(&mut s, "j", 0, 2, 2, 2);
    // The PodGroup says 5 members; only 3 pods exist yet.
    let mut job: Job = s.cluster().job("j").unwrap().clone();
    job.min_member = 5;
    s.upsert_job(job.clone());
    let p = bundled(&e, "dragon", "");
    let (d, io) = round(&mut s, 0, &p);
    assert!(io.binds.is_empty());
    assert!(
        matches!(&d[..], [Decision::Unschedulable { reason, .. }] if reason.to_string().contains("3 of minMember 5")),
        "{d:?}"
    );
    assert_eq!(
        s.cluster().free(0).gpus,
        8,
        "nothing reserved while members are missing"
    );
    // Once enough members exist, the gang is placed whole.
    job.min_member = 3;
    s.upsert_job(job);
    let (_, io) = round(&mut s, 1_000, &p);
    assert_eq!(io.binds.len(), 3);
}

#[test]
fn a_permit_wait_holds_the_reservation_until_the_policy_allows_or_the_wait_ends() {
    let e = engine();
    let mut s = sched(&[("a", 8)]);
    add_job(&mut s, "j", 0, 2, 2, 2);
    let p = hostile(
        &e,
        r#"{"fault": "bad-output", "hook": "permit"}"#,
        LoadOptions::default(),
    )
    .unwrap();
    // The hostile permit asks to wait forever: the framework caps it.
    let (d, io) = round(&mut s, 0, &p);
    assert!(io.binds.is_empty());
    assert!(
        matches!(
            d.last(),
            Some(Decision::Waiting {
                reserved: 3,
                wait_ms: 900_000,
                ..
            })
        ),
        "{d:?}"
    );
    assert_eq!(
        s.cluster().free(0).gpus,
        6,
        "reservations hold room while waiting"
    );
    let (d, _) = round(&mut s, 900_000, &p);
    assert!(
        matches!(d.first(), Some(Decision::TimedOut { .. })),
        "{d:?}"
    );
}

#[test]
fn a_policy_error_in_score_binds_nothing_and_says_why() {
    let e = engine();
    let p = hostile(
        &e,
        r#"{"fault": "bad-output", "hook": "score"}"#,
        LoadOptions::default(),
    )
    .unwrap();
    let mut s = sched(&[("a", 4), ("b", 4)]);
    add_job(&mut s, "j", 0, 2, 2, 2);
    let (d, io) = round(&mut s, 0, &p);
    assert!(io.binds.is_empty());
    assert!(
        s.cluster()
            .job_pods("j")
            .all(|(_, st)| st == PodState::Pending)
    );
    let msg = format!("{d:?}");
    assert!(
        msg.contains("policy `hostile` failed in `score`")
            && msg.contains("scores for 2 candidates"),
        "{msg}"
    );
}

#[test]
fn a_trap_in_permit_releases_the_whole_gang() {
    let e = engine();
    let p = hostile(
        &e,
        r#"{"fault": "trap", "hook": "permit"}"#,
        LoadOptions::default(),
    )
    .unwrap();
    let mut s = sched(&[("a", 8)]);
    add_job(&mut s, "j", 0, 3, 3, 3);
    let (d, io) = round(&mut s, 0, &p);
    assert!(io.binds.is_empty());
    assert!(
        s.cluster()
            .job_pods("j")
            .all(|(_, st)| st == PodState::Pending)
    );
    assert_eq!(s.cluster().free(0).gpus, 8);
    assert!(
        matches!(d.last(), Some(Decision::PolicyError { .. })),
        "{d:?}"
    );
}

#[test]
fn out_of_bounds_scale_decisions_are_refused() {
    let e = engine();
    let p = hostile(
        &e,
        r#"{"fault": "bad-output", "hook": "scale"}"#,
        LoadOptions::default(),
    )
    .unwrap();
    let mut s = sched(&[("a", 8)]);
    add_job(&mut s, "j", 0, 2, 1, 4);
    round(&mut s, 0, &bundled(&e, "dragon", ""));
    let mut scaler = RecordingIo::default();
    let r = s.scale_step(1000, &p, &mut scaler);
    assert!(scaler.scales.is_empty());
    assert_eq!(r.errors.len(), 1, "{r:?}");
    assert!(r.errors[0].contains("not running"), "{r:?}");
}

#[test]
fn a_starving_job_shrinks_a_running_elastic_job_and_then_runs() {
    let e = engine();
    let p = bundled(&e, "dragon", "");
    let mut s = sched(&[("a", 4), ("b", 4)]);
    add_job(&mut s, "running", 0, 8, 2, 8);
    round(&mut s, 0, &p);
    assert_eq!(bound_nodes(&s, "running").len(), 9);
    add_job(&mut s, "waiting", 1_000, 4, 2, 4);
    let (d, _) = round(&mut s, 1_000, &p);
    assert!(bound_nodes(&s, "waiting").is_empty(), "{d:?}");
    // Before the threshold nothing shrinks; after it, just enough to fit at min.
    let mut scaler = RecordingIo::default();
    assert!(s.scale_step(60_000, &p, &mut scaler).actions.is_empty());
    let r = s.scale_step(122_000, &p, &mut scaler);
    assert_eq!(r.actions.len(), 1, "{r:?}");
    assert_eq!((r.actions[0].from, r.actions[0].to), (8, 6));
    assert_eq!(scaler.scales[0].1, 6);
    let (d, _) = round(&mut s, 122_000, &p);
    assert_eq!(
        bound_nodes(&s, "waiting").len(),
        3,
        "admitted at its min of 2 workers: {d:?}"
    );
    assert_eq!(bound_nodes(&s, "running").len(), 7);
    // What interface 0.2 tells policies of both jobs' histories.
    let stats = |s: &Scheduler, job: &str, now: u64| {
        let unit = s.cluster().job_unit(job).expect("a job");
        ClusterView::job_stats(s.cluster(), now, unit)
    };
    let running = stats(&s, "running", 130_000);
    assert_eq!(running.restarts, 1, "the shrink restarted it");
    assert_eq!(running.running_ms, 130_000);
    assert_eq!(running.requested_workers, 6);
    assert_eq!(running.placed_workers, 6);
    // 8 GPUs until the round at 122 s took two workers away, then 6.
    assert_eq!(running.attained_gpu_ms, 8 * 122_000 + 6 * 8_000);
    let waiting = stats(&s, "waiting", 130_000);
    assert_eq!(waiting.restarts, 0);
    assert_eq!(waiting.running_ms, 8_000);
    assert_eq!(waiting.attained_gpu_ms, 2 * 8_000);
    assert_eq!(waiting.progress_permille, None);
}

#[test]
fn an_idle_cluster_grows_running_jobs_up_to_max() {
    let e = engine();
    let p = bundled(&e, "dragon", "");
    let mut s = sched(&[("a", 8)]);
    add_job(&mut s, "j", 0, 2, 1, 3);
    round(&mut s, 0, &p);
    let mut scaler = RecordingIo::default();
    assert!(s.scale_step(30_000, &p, &mut scaler).actions.is_empty());
    let r = s.scale_step(61_000, &p, &mut scaler);
    assert_eq!(r.actions.len(), 1);
    assert_eq!((r.actions[0].from, r.actions[0].to), (2, 3));
    assert!(r.actions[0].reason.starts_with("idle"), "{r:?}");
}

#[test]
fn built_in_filters_respect_taints_and_node_selectors() {
    let e = engine();
    let mut c = Cluster::new();
    let mut tainted = node("tainted", 8);
    tainted.taints.push(Taint {
        key: "gpu".into(),
        value: "reserved".into(),
        effect: TaintEffect::NoSchedule,
    });
    c.add_node(tainted).unwrap();
    let mut labelled = node("labelled", 8);
    labelled.labels.insert("zone".into(), "z1".into());
    c.add_node(labelled).unwrap();
    c.add_node(node("plain", 8)).unwrap();
    let mut pod = dragon_framework::Pod::new(
        "p",
        Resources {
            cpu_milli: 1000,
            memory_mib: 1024,
            gpus: 1,
        },
    );
    pod.node_selector.insert("zone".into(), "z1".into());
    c.add_pod(pod, None).unwrap();
    let mut s = Scheduler::new(c, SchedulerConfig::default());
    let (_, io) = round(&mut s, 0, &bundled(&e, "baseline", ""));
    assert_eq!(
        io.binds,
        vec![(PodKey::from("p"), NodeName::from("labelled"))]
    );
}

/// One worker pod of one GPU, as its own job.
fn add_gpu_pod(s: &mut Scheduler, name: &str, arrival_ms: u64) -> String {
    let w = dragon_sim::spec::TaskSpec {
        count: 1,
        min: None,
        max: None,
        cpu: 1.0,
        memory_gib: 1.0,
        gpus: 1,
        devices: Vec::new(),
    };
    dragon_tests::add_gang(s, name, arrival_ms, None, &w);
    let (p, _) = s.cluster().job_pods(name).next().expect("a pod");
    p.key.clone().into()
}

fn tried(d: &[Decision], pod: &str) -> bool {
    d.iter().any(|d| match d {
        Decision::Unschedulable { unit, .. } => *unit == UnitKey::pod(pod),
        Decision::Bound { pod: p, .. } => p == pod,
        _ => false,
    })
}

fn bound(d: &[Decision]) -> Vec<&str> {
    d.iter()
        .filter_map(|d| match d {
            Decision::Bound { pod, .. } => Some(pod.as_str()),
            _ => None,
        })
        .collect()
}

/// Under the baseline, one node with one GPU: pod x took it in a round at
/// 0 and pod y waits. Returns (scheduler, policy, x, y).
fn one_gpu_taken() -> (Scheduler, dragon_runtime::WasmPolicy, String, String) {
    let e = engine();
    let base = bundled(&e, "baseline", "");
    let mut s = sched(&[("a", 1)]);
    let x = add_gpu_pod(&mut s, "x", 0);
    let y = add_gpu_pod(&mut s, "y", 0);
    round(&mut s, 0, &base);
    (s, base, x, y)
}

#[test]
fn an_unschedulable_unit_waits_for_room_and_is_tried_the_moment_it_appears() {
    let (mut s, base, x, y) = one_gpu_taken();
    for at in [1_000, 2_000, 5_000] {
        let (d, _) = round(&mut s, at, &base);
        assert!(!tried(&d, &y), "tried at {at} with nothing changed: {d:?}");
    }
    // A status heartbeat (the same spec) is no reason to try again.
    let same = s.cluster().nodes()[0].clone();
    s.update_node(same).unwrap();
    let (d, _) = round(&mut s, 6_000, &base);
    assert!(!tried(&d, &y), "{d:?}");
    // x finishes: y is bound in the very next round, inside its backoff.
    s.remove_pod(&x).unwrap();
    let (d, _) = round(&mut s, 6_001, &base);
    assert_eq!(bound(&d), vec![y.as_str()], "{d:?}");
}

#[test]
fn a_node_that_grows_or_is_uncordoned_wakes_waiting_units() {
    let (mut s, base, _, y) = one_gpu_taken();
    let mut cordoned = node("b", 1);
    cordoned.unschedulable = true;
    s.add_node(cordoned.clone()).unwrap();
    let (d, _) = round(&mut s, 100, &base);
    assert!(tried(&d, &y) && bound(&d).is_empty(), "a node added: {d:?}");
    cordoned.unschedulable = false;
    s.update_node(cordoned).unwrap();
    let (d, _) = round(&mut s, 200, &base);
    assert_eq!(bound(&d), vec![y.as_str()], "uncordoned: {d:?}");
}

#[test]
fn with_no_change_an_unschedulable_unit_is_tried_again_after_the_longest_backoff() {
    let (mut s, base, _, y) = one_gpu_taken();
    let max = SchedulerConfig::default().max_backoff_ms;
    for k in 1..4 {
        assert_eq!(s.next_retry_ms((k - 1) * max), Some(k * max));
        let (d, _) = round(&mut s, k * max - 1, &base);
        assert!(!tried(&d, &y), "{d:?}");
        let (d, _) = round(&mut s, k * max, &base);
        assert!(tried(&d, &y), "flushed at {}: {d:?}", k * max);
    }
}

#[test]
fn a_unit_the_policy_fails_on_backs_off_doubling_and_room_does_not_shorten_it() {
    let e = engine();
    let p = hostile(
        &e,
        r#"{"fault": "bad-output", "hook": "score"}"#,
        LoadOptions::default(),
    )
    .unwrap();
    let mut s = sched(&[("a", 4), ("b", 4)]);
    add_job(&mut s, "j", 0, 1, 1, 1);
    let failed = |d: &[Decision]| d.iter().any(|d| matches!(d, Decision::PolicyError { .. }));
    let (d, _) = round(&mut s, 0, &p);
    assert!(failed(&d), "{d:?}");
    let mut at = 0;
    for wait in [1000, 2000, 4000, 8000, 10_000, 10_000] {
        assert_eq!(s.next_retry_ms(at), Some(at + wait));
        // A node added frees room, which an error does not wait for.
        s.add_node(node(&format!("n{at}"), 1)).unwrap();
        let (d, _) = round(&mut s, at + wait - 1, &p);
        assert!(!failed(&d), "tried during its backoff at {}", at + wait - 1);
        at += wait;
        let (d, _) = round(&mut s, at, &p);
        assert!(failed(&d), "retried at {at}: {d:?}");
    }
}

#[test]
fn woken_units_keep_the_order_of_their_last_attempts() {
    // kube-scheduler's queue: a pod goes back in line at the time of its
    // last failed attempt. That is how pods of different jobs interleave
    // without gangs.
    let (mut s, base, x, y) = one_gpu_taken();
    let z = add_gpu_pod(&mut s, "z", 1_500);
    round(&mut s, 1_500, &base); // z waits
    let flush = SchedulerConfig::default().max_backoff_ms;
    let (d, _) = round(&mut s, flush, &base); // y tried again, alone
    assert!(tried(&d, &y) && !tried(&d, &z), "{d:?}");
    s.remove_pod(&x).unwrap();
    let (d, _) = round(&mut s, flush + 1, &base);
    // y arrived first, but its last attempt (10 s) came after z's (1.5 s).
    assert_eq!(bound(&d), vec![z.as_str()], "{d:?}");
    assert!(tried(&d, &y));
}

#[test]
fn a_pod_placed_wakes_a_pod_waiting_for_its_affinity() {
    use dragon_framework::{LabelSelector, PodAffinityTerm};
    let e = engine();
    let base = bundled(&e, "baseline", "");
    let mut s = sched(&[("a", 1)]);
    s.update_node({
        let mut n = node("a", 1);
        n.labels.insert("kubernetes.io/hostname".into(), "a".into());
        n
    })
    .unwrap();
    let mut follower = dragon_framework::Pod::new(
        "ns/follower",
        Resources {
            cpu_milli: 100,
            memory_mib: 10,
            gpus: 0,
        },
    );
    follower.namespace = "ns".into();
    follower.constraints.pod_affinity = vec![PodAffinityTerm {
        selector: Some(LabelSelector {
            match_labels: [("app".to_string(), "leader".to_string())].into(),
            ..LabelSelector::default()
        }),
        namespaces: ["ns".to_string()].into(),
        all_namespaces: false,
        topology_key: "kubernetes.io/hostname".into(),
    }];
    s.add_pod(follower, None).unwrap();
    let (d, _) = round(&mut s, 0, &base);
    assert!(bound(&d).is_empty(), "{d:?}");
    // Another scheduler binds the leader: a pod placed, no room freed.
    let mut leader = dragon_framework::Pod::new("ns/leader", Resources::default());
    leader.namespace = "ns".into();
    leader.labels.insert("app".into(), "leader".into());
    s.add_pod(leader, Some("a")).unwrap();
    let (d, _) = round(&mut s, 100, &base);
    assert_eq!(bound(&d), vec!["ns/follower"], "{d:?}");
}

/// A three-worker gang on nodes of `gpus` GPUs each, tried by a policy that
/// traps in `hook` with the baseline as its fallback: the round's decisions
/// and binds.
fn trap_with_fallback(hook: &str, gpus: &[(&str, u32)]) -> (Scheduler, Vec<Decision>, RecordingIo) {
    let e = engine();
    let base = bundled(&e, "baseline", "");
    let p = hostile(
        &e,
        &format!(r#"{{"fault": "trap", "hook": "{hook}"}}"#),
        LoadOptions::default(),
    )
    .unwrap();
    let mut s = sched(gpus);
    add_job(&mut s, "j", 0, 3, 3, 3);
    let mut io = RecordingIo::default();
    let r =
        s.schedule_round_with_fallback(0, &p, Some(&base), &mut io, &mut RecordingIo::default());
    (s, r.decisions, io)
}

#[test]
fn with_a_fallback_a_gang_the_policy_fails_on_is_placed_whole_by_the_baseline() {
    for hook in ["pre-filter", "filter", "score", "permit"] {
        let (_, d, io) = trap_with_fallback(hook, &[("a", 2), ("b", 2)]);
        let kinds: Vec<&str> = d
            .iter()
            .filter_map(|d| match d {
                Decision::PolicyError { .. } => Some("error"),
                Decision::FellBack { .. } => Some("fallback"),
                Decision::Admitted { .. } => Some("admitted"),
                _ => None,
            })
            .collect();
        // The gang is still a gang under the baseline: all four pods at once.
        assert_eq!(kinds, ["error", "fallback", "admitted"], "{hook}: {d:?}");
        assert_eq!(io.binds.len(), 4, "{hook}: {d:?}");
        assert!(
            matches!(d.iter().find(|d| matches!(d, Decision::FellBack { .. })),
                Some(Decision::FellBack { policy, .. }) if policy == "baseline"),
            "{d:?}"
        );
    }
}

#[test]
fn with_a_fallback_a_gang_that_does_not_fit_is_not_half_placed() {
    // Three GPU workers, two GPUs in the cluster: the baseline alone would
    // bind two pods; as the fallback inside a gang it binds none.
    let (s, d, io) = trap_with_fallback("score", &[("a", 1), ("b", 1)]);
    assert!(io.binds.is_empty(), "{d:?}");
    assert!(
        s.cluster()
            .job_pods("j")
            .all(|(_, st)| st == PodState::Pending)
    );
    assert!(
        matches!(d.last(), Some(Decision::Unschedulable { .. })),
        "{d:?}"
    );
}

/// A PodGroup of `pods` role-less pods of `gpus` GPUs each, as a gang of
/// bare pods or a Deployment's would come: `job` builds the job.
fn add_pod_group(s: &mut Scheduler, name: &str, pods: u32, gpus: u32, job: impl FnOnce(&mut Job)) {
    let mut j = Job {
        min_member: pods,
        arrival_ms: 1,
        declared: true,
        ..Job::gang(name, 0)
    };
    job(&mut j);
    s.upsert_job(j);
    for i in 0..pods {
        s.add_pod(group_pod(name, i, gpus), None).unwrap();
    }
}

/// Pod `i` of PodGroup `group`, without a role, asking `gpus` GPUs.
fn group_pod(group: &str, i: u32, gpus: u32) -> dragon_framework::Pod {
    let mut p = dragon_framework::Pod::new(
        format!("{group}-{i}"),
        Resources {
            cpu_milli: 1000,
            memory_mib: 1024,
            gpus,
        },
    );
    p.job = Some(group.into());
    p.index = i;
    p
}

// Coscheduling's case: minMember 2 of six pods, room for four. Nothing
// waits for all six; any two start, and the others follow as they fit.
#[test]
fn a_gang_with_more_pods_than_its_min_member_starts_with_those_that_fit() {
    let e = engine();
    let p = bundled(&e, "dragon", "");
    let mut s = sched(&[("a", 4)]);
    add_pod_group(&mut s, "g", 6, 1, |j| j.min_member = 2);
    let (d, io) = round(&mut s, 0, &p);
    assert_eq!(io.binds.len(), 2, "the quorum first: {d:?}");
    assert!(
        matches!(&d[..], [.., Decision::Admitted { pods: 2, .. }]),
        "{d:?}"
    );
    let (d, io) = round(&mut s, 1, &p);
    assert_eq!(io.binds.len(), 2, "then the members that fit: {d:?}");
    assert_eq!(pending_pods(&s, "g"), 2);
    // No room for the last two: they wait, and say why in pods' terms.
    let (d, io) = round(&mut s, 2, &p);
    assert!(io.binds.is_empty());
    assert!(
        matches!(&d[..], [Decision::Unschedulable { reason, .. }] if reason.to_string().contains("pod g-") && reason.to_string().contains("nvidia.com/gpu")),
        "{d:?}"
    );
    // A member leaving makes room for one more.
    s.remove_pod("g-0").unwrap();
    let (_, io) = round(&mut s, 3, &p);
    assert_eq!(io.binds.len(), 1);
}

#[test]
fn a_gang_whose_quorum_cannot_fit_binds_nothing() {
    let e = engine();
    let p = bundled(&e, "dragon", "");
    let mut s = sched(&[("a", 2)]);
    add_pod_group(&mut s, "g", 6, 1, |j| j.min_member = 3);
    let (d, io) = round(&mut s, 0, &p);
    assert!(io.binds.is_empty(), "{d:?}");
    assert_eq!(s.cluster().free(0).gpus, 2, "nothing left reserved");
    assert!(
        matches!(&d[..], [Decision::Unschedulable { reason, .. }] if reason.to_string().contains("gang of 6 pods does not fit")),
        "the whole gang's reason: {d:?}"
    );
}

/// Job `j` with minMember 3: one member running on `a`, one pending, the
/// third never created; its PodGroup's timeout is `timeout_ms`.
fn gang_missing_a_member(timeout_ms: Option<u64>) -> Scheduler {
    let mut s = sched(&[("a", 8)]);
    add_pod_group(&mut s, "j", 0, 1, |j| {
        j.min_member = 3;
        j.schedule_timeout_ms = timeout_ms;
    });
    s.add_pod(group_pod("j", 0, 1), Some("a")).unwrap();
    s.add_pod(group_pod("j", 1, 1), None).unwrap();
    s
}

#[test]
fn a_podgroup_timeout_replaces_the_policys_wait_and_releases_the_gang_when_it_ends() {
    let e = engine();
    // DRAGON alone would wait 60 s.
    let p = bundled(&e, "dragon", "");
    let mut s = gang_missing_a_member(Some(5_000));
    let (d, _) = round(&mut s, 0, &p);
    assert!(
        matches!(&d[..], [Decision::Waiting { wait_ms: 5_000, .. }]),
        "{d:?}"
    );
    assert_eq!(s.next_retry_ms(0), Some(5_000), "woken when it ends");
    let (d, _) = round(&mut s, 4_999, &p);
    assert!(d.is_empty(), "{d:?}");
    let (d, _) = round(&mut s, 5_000, &p);
    assert!(
        matches!(&d[..], [Decision::TimedOut { reason, .. }]
            if reason.contains("scheduleTimeoutSeconds") && reason.contains("2 of minMember 3 pods placed (2 exist)")),
        "released, and not reserved again at once: {d:?}"
    );
    assert_eq!(pending_pods(&s, "j"), 1);
    assert_eq!(s.cluster().free(0).gpus, 7);

    // Longer than the policy's own wait: still waiting after DRAGON's 60 s.
    let mut s = gang_missing_a_member(Some(120_000));
    round(&mut s, 0, &p);
    let (d, _) = round(&mut s, 90_000, &p);
    assert!(d.is_empty(), "{d:?}");
    assert_eq!(s.cluster().free(0).gpus, 6, "still reserved");
    let (d, _) = round(&mut s, 120_000, &p);
    assert!(matches!(&d[..], [Decision::TimedOut { .. }]), "{d:?}");

    // Without one, the policy's wait holds.
    let mut s = gang_missing_a_member(None);
    let (d, _) = round(&mut s, 0, &p);
    assert!(
        matches!(
            &d[..],
            [Decision::Waiting {
                wait_ms: 60_000,
                ..
            }]
        ),
        "{d:?}"
    );
}

#[test]
fn a_gang_whose_min_resources_are_not_free_is_not_tried_until_they_are() {
    let e = engine();
    let p = bundled(&e, "dragon", "");
    let mut s = sched(&[("a", 4)]);
    add_pod_group(&mut s, "g", 2, 1, |j| {
        j.min_member = 2;
        j.min_resources = Some(dragon_framework::Demand {
            request: Resources {
                cpu_milli: 0,
                memory_mib: 0,
                gpus: 6,
            },
            extended: [("rdma/hca".to_string(), 1)].into(),
        });
    });
    let (d, io) = round(&mut s, 0, &p);
    assert!(io.binds.is_empty());
    assert!(
        matches!(&d[..], [Decision::Unschedulable { reason, .. }]
            if reason.to_string().contains("minResources") && reason.to_string().contains("nvidia.com/gpu 2, rdma/hca 1")),
        "{d:?}"
    );
    let mut b = node("b", 2);
    b.extended.insert("rdma/hca".into(), 1);
    s.add_node(b).unwrap();
    let (d, io) = round(&mut s, 1, &p);
    assert_eq!(io.binds.len(), 2, "{d:?}");
}

#[test]
fn a_held_job_is_not_tried_and_its_pods_say_why() {
    let e = engine();
    let p = bundled(&e, "dragon", "");
    let mut s = sched(&[("a", 4)]);
    add_pod_group(&mut s, "g", 2, 1, |j| {
        j.hold = Some("spec.minMember must not be negative".into());
    });
    let (d, io) = round(&mut s, 0, &p);
    assert!(io.binds.is_empty());
    assert!(
        matches!(&d[..], [Decision::Unschedulable { reason, .. }] if reason.to_string().contains("minMember must not be negative")),
        "{d:?}"
    );
    let mut j = s.cluster().job("g").unwrap().clone();
    j.hold = None;
    s.upsert_job(j);
    let (_, io) = round(&mut s, 1, &p);
    assert_eq!(io.binds.len(), 2, "tried once the hold is lifted");
}

// With roles, the quorum keeps the parameter server: workers without it
// cannot train.
#[test]
fn a_quorum_of_a_ps_job_includes_its_parameter_server() {
    let e = engine();
    let p = bundled(&e, "dragon", "");
    let mut s = sched(&[("a", 2)]);
    add_job(&mut s, "j", 0, 4, 4, 4);
    let mut job = s.cluster().job("j").unwrap().clone();
    job.min_member = 3;
    s.upsert_job(job);
    let (d, io) = round(&mut s, 0, &p);
    let bound: BTreeSet<&str> = io.binds.iter().map(|(pod, _)| pod.as_str()).collect();
    assert_eq!(bound.len(), 3, "{d:?}");
    assert!(bound.iter().any(|p| p.contains("ps")), "{bound:?}");
}

/// Four workers of one job that prefer not to share a host with each other
/// (preferred anti-affinity on `kubernetes.io/hostname`): DRAGON's own
/// scores would pack them on one node, as the first test shows; the
/// preference, weighed as kube-scheduler weighs it, spreads them.
#[test]
fn preferred_anti_affinity_between_a_gangs_workers_spreads_them_over_hosts() {
    use dragon_framework::{LabelSelector, PodAffinityTerm, WeightedPodAffinityTerm};
    const HOST: &str = "kubernetes.io/hostname";
    let e = engine();
    let dragon = bundled(&e, "dragon", "");
    let place = |apart: bool| {
        let mut c = Cluster::new();
        for name in ["a", "b", "c", "d"] {
            let mut n = node(name, 8);
            n.labels.insert(HOST.into(), name.into());
            c.add_node(n).unwrap();
        }
        let mut s = Scheduler::new(c, SchedulerConfig::default());
        let workers = dragon_sim::spec::TaskSpec {
            count: 4,
            min: None,
            max: None,
            cpu: 4.0,
            memory_gib: 16.0,
            gpus: 1,
            devices: Vec::new(),
        };
        let jp = dragon_sim::spec::job_pods("test", "j", 0, 0, None, &workers).unwrap();
        s.upsert_job(jp.job);
        for mut p in jp.pods {
            p.labels.insert("job".into(), "j".into());
            if apart {
                p.constraints.preferred_pod_anti_affinity = vec![WeightedPodAffinityTerm {
                    weight: 100,
                    term: PodAffinityTerm {
                        selector: Some(LabelSelector {
                            match_labels: [("job".to_string(), "j".to_string())].into(),
                            match_expressions: vec![],
                        }),
                        namespaces: [p.namespace.clone()].into(),
                        all_namespaces: false,
                        topology_key: HOST.into(),
                    },
                }];
            }
            s.add_pod(p, None).unwrap();
        }
        let (d, io) = round(&mut s, 0, &dragon);
        assert_eq!(io.binds.len(), 4, "{d:?}");
        bound_nodes(&s, "j")
            .into_iter()
            .collect::<BTreeSet<_>>()
            .len()
    };
    assert_eq!(place(false), 1);
    assert_eq!(place(true), 4);
}
