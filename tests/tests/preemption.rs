//! Preemption through the framework with the bundled components: a unit
//! that fits nowhere takes the room of lower-priority work, whole units at
//! a time, elastic jobs shrunk first, disruption budgets and
//! `preemptionPolicy: Never` honoured.

use dragon_framework::testing;
use dragon_framework::{
    Answers, ApiError, ApiErrorKind, Decision, DisruptionBudget, Effect, NodeName, PodKey,
    PodState, Preemption, RecordingIo, Scheduler, SchedulerConfig, UnitKey,
};
use dragon_runtime::Hooks;
use dragon_sim::spec::{TaskSpec, job_pods};
use dragon_tests::{Ops, bundled, engine};

/// Nodes of 4 GPUs each.
fn sched(nodes: &[&str]) -> Scheduler {
    let four: Vec<(&str, u32)> = nodes.iter().map(|&n| (n, 4)).collect();
    testing::scheduler(&four)
}

/// A job of `workers` one-GPU workers (at least `min`) at `priority`,
/// arriving at `at` ms, its pods pending.
fn job(s: &mut Scheduler, name: &str, at: u64, priority: i32, workers: u32, min: u32) {
    let w = TaskSpec {
        count: workers,
        min: Some(min),
        max: Some(workers),
        cpu: 1.0,
        memory_gib: 1.0,
        gpus: 1,
        devices: Vec::new(),
    };
    let jp = job_pods("test", name, at, priority, None, &w).unwrap();
    s.upsert_job(jp.job);
    for mut p in jp.pods {
        p.namespace = "ml".into();
        p.labels.insert("job".into(), name.into());
        s.add_pod(p, None).unwrap();
    }
}

struct Round {
    decisions: Vec<Decision>,
    effects: Vec<Effect>,
    io: RecordingIo,
    scales: RecordingIo,
}

fn round(s: &mut Scheduler, now: u64, p: &dyn Hooks) -> Round {
    let mut io = RecordingIo::default();
    let mut scales = RecordingIo::default();
    let r = s.schedule_round(now, p, &mut io, &mut scales);
    Round {
        decisions: r.decisions,
        effects: r.effects,
        io,
        scales,
    }
}

fn bound(s: &Scheduler, job: &str) -> usize {
    s.cluster()
        .job_pods(job)
        .filter(|(_, st)| matches!(st, PodState::Bound(_)))
        .count()
}

fn evicted(r: &Round) -> Vec<UnitKey> {
    r.io.evictions.iter().map(|e| e.victim.clone()).collect()
}

/// What the API server and the victims' controllers do with an eviction:
/// the pods terminate and come back pending.
fn terminate(s: &mut Scheduler, r: &Round) {
    for e in &r.io.evictions {
        for key in &e.pods {
            let pod = s.remove_pod(key).unwrap();
            s.add_pod(pod, None).unwrap();
        }
    }
}

fn reason(r: &Round, unit: &UnitKey) -> String {
    dragon_tests::unschedulable(&r.decisions, unit)
}

#[test]
fn a_higher_priority_gang_evicts_the_least_important_gang_whole_and_takes_its_room() {
    let e = engine();
    let dragon = bundled(&e, "dragon", "");
    let mut s = sched(&["a", "b"]);
    job(&mut s, "low", 0, 0, 4, 4);
    job(&mut s, "mid", 1, 5, 4, 4);
    round(&mut s, 0, &dragon);
    assert_eq!((bound(&s, "low"), bound(&s, "mid")), (4, 4));

    job(&mut s, "high", 10, 10, 3, 3);
    let r = round(&mut s, 1000, &dragon);
    let high = UnitKey::job("high");
    assert_eq!(evicted(&r), vec![UnitKey::job("low")], "{:?}", r.decisions);
    assert_eq!(r.io.evictions[0].pods.len(), 4, "the whole gang");
    assert_eq!(r.io.evictions[0].preemptor, high);
    assert!(
        r.io.evictions[0].message.contains("preempted by job/high"),
        "{}",
        r.io.evictions[0].message
    );
    assert!(
        r.decisions.contains(&Decision::Preempting {
            unit: high.clone(),
            evicted: vec![UnitKey::job("low")],
            shrunk: vec![],
        }),
        "{:?}",
        r.decisions
    );
    assert!(
        reason(&r, &high).contains("preemption: evicting 1 lower-priority unit(s)"),
        "{}",
        reason(&r, &high)
    );
    assert_eq!(
        r.io.binds,
        vec![],
        "nothing is placed before the victims leave"
    );
    // Each preemptor pod is nominated to the node it will take.
    let nominated = nominations(&r, &high);
    assert_eq!(nominated.len(), 3, "{:?}", r.decisions);

    terminate(&mut s, &r);
    let r = round(&mut s, 2000, &dragon);
    assert_eq!(bound(&s, "high"), 3, "{:?}", r.decisions);
    for (pod, node) in &r.io.binds {
        assert!(
            nominated.contains(&(pod.clone(), Some(node.clone()))),
            "{pod} bound to {node}, nominated {nominated:?}"
        );
    }
    assert_eq!(bound(&s, "low"), 0, "the victim is not half placed again");
    assert_eq!(bound(&s, "mid"), 4);
    assert_eq!(evicted(&r), vec![]);
}

#[test]
fn a_gang_needing_one_gpu_still_evicts_a_victim_gang_whole() {
    let e = engine();
    let dragon = bundled(&e, "dragon", "");
    let mut s = sched(&["a", "b"]);
    job(&mut s, "low", 0, 0, 8, 8);
    round(&mut s, 0, &dragon);
    assert_eq!(bound(&s, "low"), 8);
    job(&mut s, "high", 10, 10, 1, 1);
    let r = round(&mut s, 1000, &dragon);
    assert_eq!(evicted(&r), vec![UnitKey::job("low")]);
    assert_eq!(r.io.evictions[0].pods.len(), 8, "never part of a gang");
}

#[test]
fn an_elastic_job_is_shrunk_towards_its_minimum_before_anything_is_evicted() {
    let e = engine();
    let dragon = bundled(&e, "dragon", "");
    let mut s = sched(&["a", "b"]);
    job(&mut s, "rigid", 0, 0, 4, 4);
    job(&mut s, "elastic", 1, 0, 4, 1);
    round(&mut s, 0, &dragon);
    assert_eq!((bound(&s, "rigid"), bound(&s, "elastic")), (4, 4));

    job(&mut s, "high", 10, 10, 2, 2);
    let r = round(&mut s, 1000, &dragon);
    assert_eq!(evicted(&r), vec![], "{:?}", r.decisions);
    let scales: Vec<(String, u32)> = r
        .scales
        .scales
        .iter()
        .map(|(j, w, _)| (j.to_string(), *w))
        .collect();
    // Two of its workers go: just the room the preemptor needs.
    assert_eq!(
        scales,
        vec![("elastic".to_string(), 2)],
        "{:?}",
        r.decisions
    );
    assert!(r.decisions.contains(&Decision::Preempting {
        unit: UnitKey::job("high"),
        evicted: vec![],
        shrunk: vec![UnitKey::job("elastic")],
    }));
    // The surplus workers keep their room until they are gone: the
    // preemptor waits for them, and shrinks nothing more.
    let r = round(&mut s, 2000, &dragon);
    assert_eq!(bound(&s, "high"), 0, "{:?}", r.decisions);
    assert!(
        reason(&r, &UnitKey::job("high"))
            .contains("waiting for 2 pod(s) preempted for it to leave"),
        "{:?}",
        r.decisions
    );
    assert!(r.scales.scales.is_empty(), "{:?}", r.decisions);
    // Their controller removes them: the next round places the preemptor.
    for i in 2..4 {
        s.remove_pod(&format!("elastic-worker-{i}")).unwrap();
    }
    let r = round(&mut s, 3000, &dragon);
    assert_eq!(bound(&s, "high"), 2, "{:?}", r.decisions);
    assert_eq!((bound(&s, "rigid"), bound(&s, "elastic")), (4, 2));
}

/// The nominations `r` made for `unit`'s pods.
fn nominations(r: &Round, unit: &UnitKey) -> Vec<(PodKey, Option<NodeName>)> {
    r.decisions
        .iter()
        .find_map(|d| match d {
            Decision::Nominated { unit: u, pods } if u == unit => Some(pods.clone()),
            _ => None,
        })
        .unwrap_or_default()
}

#[test]
fn a_nomination_is_cleared_when_the_room_goes_to_more_important_work_and_none_can_be_made() {
    let e = engine();
    let dragon = bundled(&e, "dragon", "");
    let mut s = sched(&["a", "b"]);
    job(&mut s, "low", 0, 0, 4, 4);
    job(&mut s, "mid", 1, 10, 4, 4);
    round(&mut s, 0, &dragon);
    job(&mut s, "high", 10, 5, 3, 3);
    let r = round(&mut s, 1000, &dragon);
    let high = UnitKey::job("high");
    assert_eq!(nominations(&r, &high).len(), 3, "{:?}", r.decisions);
    // The room freed goes to a more important gang; nothing below `high`
    // is left to preempt, so its pods are nominated nowhere.
    terminate(&mut s, &r);
    job(&mut s, "top", 20, 20, 4, 4);
    let r = round(&mut s, 2000, &dragon);
    assert_eq!(bound(&s, "top"), 4, "{:?}", r.decisions);
    let cleared = nominations(&r, &high);
    assert_eq!(cleared.len(), 3, "{:?}", r.decisions);
    assert!(cleared.iter().all(|(_, n)| n.is_none()), "{cleared:?}");
}

#[test]
fn a_preemptor_waits_for_its_victims_to_leave_and_chooses_no_more() {
    let e = engine();
    let dragon = bundled(&e, "dragon", "");
    let mut s = sched(&["a", "b"]);
    job(&mut s, "low", 0, 0, 4, 4);
    job(&mut s, "low2", 1, 0, 4, 4);
    round(&mut s, 0, &dragon);
    job(&mut s, "high", 10, 10, 4, 4);
    let first = round(&mut s, 1000, &dragon);
    assert_eq!(evicted(&first).len(), 1);
    // Still terminating: bound in the snapshot.
    let r = round(&mut s, 2000, &dragon);
    assert_eq!(evicted(&r), vec![], "{:?}", r.decisions);
    assert!(
        reason(&r, &UnitKey::job("high"))
            .contains("waiting for 4 pod(s) preempted for it to leave"),
        "{}",
        reason(&r, &UnitKey::job("high"))
    );
    terminate(&mut s, &first);
    round(&mut s, 3000, &dragon);
    assert_eq!(bound(&s, "high"), 4);
}

#[test]
fn equal_or_higher_priority_work_is_never_preempted() {
    let e = engine();
    let dragon = bundled(&e, "dragon", "");
    let mut s = sched(&["a"]);
    job(&mut s, "first", 0, 5, 4, 4);
    round(&mut s, 0, &dragon);
    job(&mut s, "second", 10, 5, 4, 4);
    let r = round(&mut s, 1000, &dragon);
    assert_eq!(evicted(&r), vec![]);
    assert!(
        !reason(&r, &UnitKey::job("second")).contains("preemption"),
        "nothing to say: {}",
        reason(&r, &UnitKey::job("second"))
    );
}

#[test]
fn a_unit_whose_preemption_policy_is_never_waits_for_room() {
    let e = engine();
    let dragon = bundled(&e, "dragon", "");
    let mut s = sched(&["a"]);
    job(&mut s, "low", 0, 0, 4, 4);
    round(&mut s, 0, &dragon);
    job(&mut s, "polite", 10, 10, 2, 2);
    let keys: Vec<PodKey> = s
        .cluster()
        .job_pods("polite")
        .map(|(p, _)| p.key.clone())
        .collect();
    for k in keys {
        let mut p = s.remove_pod(&k).unwrap();
        p.preemption = Preemption::Never;
        s.add_pod(p, None).unwrap();
    }
    let r = round(&mut s, 1000, &dragon);
    assert_eq!(evicted(&r), vec![]);
    assert!(
        reason(&r, &UnitKey::job("polite")).contains("preemptionPolicy=Never"),
        "{}",
        reason(&r, &UnitKey::job("polite"))
    );
}

#[test]
fn a_disruption_budget_keeps_its_pods_and_another_victim_is_chosen() {
    let e = engine();
    let dragon = bundled(&e, "dragon", "");
    let mut s = sched(&["a", "b"]);
    job(&mut s, "kept", 0, 0, 4, 4);
    job(&mut s, "other", 1, 1, 4, 4);
    round(&mut s, 0, &dragon);
    let budget = |job: &str, allowed| DisruptionBudget {
        namespace: "ml".into(),
        selector: dragon_framework::LabelSelector {
            match_labels: [("job".to_string(), job.to_string())].into(),
            match_expressions: vec![],
        },
        allowed,
    };
    // Three of its four pods may go: evicting the gang whole would take four.
    s.set_budget("ml/kept", budget("kept", 3));
    job(&mut s, "high", 10, 10, 4, 4);
    let r = round(&mut s, 1000, &dragon);
    assert_eq!(
        evicted(&r),
        vec![UnitKey::job("other")],
        "the less important gang is protected; {:?}",
        r.decisions
    );

    // With both protected, nothing is evicted and the reason says so.
    let mut s = sched(&["a"]);
    job(&mut s, "kept", 0, 0, 4, 4);
    round(&mut s, 0, &dragon);
    s.set_budget("ml/kept", budget("kept", 0));
    job(&mut s, "high", 10, 10, 4, 4);
    let r = round(&mut s, 1000, &dragon);
    assert_eq!(evicted(&r), vec![]);
    assert!(
        reason(&r, &UnitKey::job("high")).contains("would not make room"),
        "{}",
        reason(&r, &UnitKey::job("high"))
    );
}

#[test]
fn a_refused_eviction_spares_its_victim_and_the_preemptor_looks_again() {
    let e = engine();
    let dragon = bundled(&e, "dragon", "");
    let mut s = sched(&["a", "b"]);
    job(&mut s, "low", 0, 0, 4, 4);
    job(&mut s, "low2", 1, 0, 4, 4);
    round(&mut s, 0, &dragon);
    job(&mut s, "high", 10, 10, 4, 4);
    // The API server refuses the round's eviction.
    let mut refusing = Answers::default();
    refusing.evictions.push_back(Err(ApiError::new(
        ApiErrorKind::Refused,
        "Cannot evict pod as it would violate the pod's disruption budget.",
    )));
    let r = s.schedule_round(1000, &dragon, &mut refusing, &mut RecordingIo::default());
    let first = r
        .effects
        .iter()
        .find_map(|e| match e {
            Effect::Evict(eviction) => Some(eviction.victim.clone()),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no eviction: {:?}", r.decisions));
    // Spared for a backoff (at least a second).
    let r = round(&mut s, 1500, &dragon);
    let second = evicted(&r);
    assert_eq!(second.len(), 1, "{:?}", r.decisions);
    assert_ne!(second[0], first);
}

#[test]
fn a_lone_pod_of_higher_priority_evicts_one_lower_priority_pod() {
    let e = engine();
    let baseline = bundled(&e, "baseline", "");
    let mut s = sched(&["a"]);
    job(&mut s, "low", 0, 0, 4, 4);
    round(&mut s, 0, &baseline);
    assert_eq!(bound(&s, "low"), 4);
    job(&mut s, "high", 10, 10, 1, 1);
    let r = round(&mut s, 1000, &baseline);
    // Without gangs every pod is its own unit: one victim pod suffices,
    // the last to arrive of the lowest priority.
    let victims = evicted(&r);
    assert_eq!(victims.len(), 1, "{:?}", r.decisions);
    assert!(matches!(&victims[0], UnitKey::Pod(_)), "{victims:?}");
    assert!(
        r.effects
            .iter()
            .all(|e| matches!(e, Effect::Evict(v) if v.pods.len() == 1))
    );
}

#[test]
fn with_preemption_off_nothing_is_evicted() {
    let e = engine();
    let dragon = bundled(&e, "dragon", "");
    let mut s = sched(&["a"]);
    s = Scheduler::new(
        s.cluster().clone(),
        SchedulerConfig {
            preemption: false,
            ..SchedulerConfig::without_backoff()
        },
    );
    job(&mut s, "low", 0, 0, 4, 4);
    round(&mut s, 0, &dragon);
    job(&mut s, "high", 10, 10, 4, 4);
    let r = round(&mut s, 1000, &dragon);
    assert_eq!(evicted(&r), vec![]);
}

#[test]
fn a_job_whose_shrink_is_refused_is_evicted_whole_instead() {
    struct NoScale;
    impl dragon_framework::Scaler for NoScale {
        fn scale(&mut self, job: &str, _: u32, _: &str) -> Result<(), ApiError> {
            Err(ApiError::new(
                ApiErrorKind::Refused,
                format!("job {job} has no /scale"),
            ))
        }
    }
    let e = engine();
    let dragon = bundled(&e, "dragon", "");
    let mut s = sched(&["a"]);
    job(&mut s, "elastic", 0, 0, 4, 1);
    round(&mut s, 0, &dragon);
    job(&mut s, "high", 10, 10, 2, 2);
    let mut io = RecordingIo::default();
    let r = s.schedule_round(1000, &dragon, &mut io, &mut NoScale);
    assert!(
        r.decisions
            .iter()
            .any(|d| matches!(d, Decision::PolicyError { .. })),
        "the shrink failed: {:?}",
        r.decisions
    );
    assert_eq!(bound(&s, "elastic"), 4);
    let r = round(&mut s, 1500, &dragon);
    assert_eq!(
        evicted(&r),
        vec![UnitKey::job("elastic")],
        "{:?}",
        r.decisions
    );
}

/// Two teams on 8 GPUs, each guaranteed 4, with `reclaim` as given.
fn teams(reclaim: bool) -> Scheduler {
    let queue = |name: &str| dragon_framework::QueueSpec {
        name: name.into(),
        weight: 1.0,
        guaranteed_gpus: 4,
        borrowing_limit_gpus: None,
        parent: None,
    };
    let mut cluster = sched(&["a", "b"]).cluster().clone();
    cluster
        .set_queues(vec![queue("team-a"), queue("team-b")])
        .unwrap();
    let config = SchedulerConfig {
        reclaim,
        ..SchedulerConfig::without_backoff()
    };
    Scheduler::new(cluster, config)
}

/// [`job`] in queue `queue`.
fn queued(s: &mut Scheduler, name: &str, at: u64, priority: i32, queue: &str) {
    job(s, name, at, priority, 4, 4);
    let mut j = s.cluster().job(name).unwrap().clone();
    j.queue = Some(queue.into());
    s.upsert_job(j);
}

#[test]
fn a_queue_owed_its_guarantee_takes_back_what_another_borrows_whatever_the_priority() {
    let e = engine();
    let dragon = bundled(&e, "dragon", "");
    for reclaim in [false, true] {
        let mut s = teams(reclaim);
        // Team a borrows the idle cluster at a higher priority.
        queued(&mut s, "a1", 0, 5, "team-a");
        queued(&mut s, "a2", 1, 5, "team-a");
        round(&mut s, 0, &dragon);
        assert_eq!((bound(&s, "a1"), bound(&s, "a2")), (4, 4));
        queued(&mut s, "b1", 10, 0, "team-b");
        let r = round(&mut s, 1000, &dragon);
        if !reclaim {
            assert!(evicted(&r).is_empty(), "{:?}", r.decisions);
            continue;
        }
        // One gang: all team a borrows, no more.
        assert_eq!(evicted(&r).len(), 1, "{:?}", r.decisions);
        let message = &r.io.evictions[0].message;
        assert!(
            message.contains(
                "preempted by job/b1, whose queue is owed GPUs that queue team-a borrows"
            ),
            "{message}"
        );
        let why = reason(&r, &UnitKey::job("b1"));
        assert!(
            why.contains("evicting 1 lower-priority or borrowing unit(s)"),
            "{why}"
        );
        terminate(&mut s, &r);
        // Given the room, the evicted gang would take it again: it waits
        // until b1 has it.
        let r = round(&mut s, 2000, &dragon);
        assert_eq!(bound(&s, "b1"), 4, "{:?}", r.decisions);
        let victim = r.io.evictions.first().map(|e| e.victim.clone());
        assert!(victim.is_none(), "{:?}", r.decisions);
        // The evicted gang, of higher priority, may not take room from a
        // queue within its guarantee.
        let r = round(&mut s, 3000, &dragon);
        assert!(evicted(&r).is_empty(), "{:?}", r.decisions);
        assert_eq!(bound(&s, "b1"), 4);
    }
}

#[test]
fn gangs_of_one_round_take_back_what_a_queue_borrows_once() {
    let e = engine();
    let dragon = bundled(&e, "dragon", "");
    let mut s = teams(true);
    queued(&mut s, "a1", 0, 0, "team-a");
    queued(&mut s, "a2", 1, 0, "team-a");
    round(&mut s, 0, &dragon);
    // Team a borrows 4 GPUs; two gangs of team b, 4 GPUs each, arrive
    // together. The first is owed its 4 and takes them back; with it on
    // its way the second would take team b past its guarantee, so it
    // leaves team a what it is owed.
    queued(&mut s, "b1", 10, 0, "team-b");
    queued(&mut s, "b2", 11, 0, "team-b");
    let r = round(&mut s, 1000, &dragon);
    assert_eq!(evicted(&r).len(), 1, "{:?}", r.decisions);
    terminate(&mut s, &r);
    let r = round(&mut s, 2000, &dragon);
    assert!(evicted(&r).is_empty(), "{:?}", r.decisions);
    assert_eq!(bound(&s, "b1"), 4);
    assert_eq!(bound(&s, "a1") + bound(&s, "a2"), 4);
    assert_eq!(bound(&s, "b2"), 0);
}

#[test]
fn a_queue_that_would_borrow_preempts_only_lower_priority_work_of_borrowing_queues() {
    let e = engine();
    let dragon = bundled(&e, "dragon", "");
    let mut s = teams(true);
    queued(&mut s, "a1", 0, 0, "team-a");
    queued(&mut s, "b1", 1, 9, "team-b");
    round(&mut s, 0, &dragon);
    // Team b asks beyond its guarantee at a higher priority: team a holds
    // only what it is owed, so nothing of it is taken.
    queued(&mut s, "b2", 10, 9, "team-b");
    let r = round(&mut s, 1000, &dragon);
    assert!(evicted(&r).is_empty(), "{:?}", r.decisions);
    assert_eq!(bound(&s, "b2"), 0);
}

#[test]
fn in_a_tree_of_queues_a_team_at_its_guarantee_lends_nothing_and_its_sub_teams_reclaim_from_each_other()
 {
    let e = engine();
    let dragon = bundled(&e, "dragon", "");
    // 12 GPUs: `org` (8: team-a 4, team-b 4), `lab` (4), and `spare`,
    // guaranteed nothing.
    let queue = |name: &str, gpus: u32, parent: Option<&str>| dragon_framework::QueueSpec {
        name: name.into(),
        weight: 1.0,
        guaranteed_gpus: gpus,
        borrowing_limit_gpus: None,
        parent: parent.map(Into::into),
    };
    let mut cluster = sched(&["n1", "n2", "n3"]).cluster().clone();
    cluster
        .set_queues(vec![
            queue("org", 8, None),
            queue("team-a", 4, Some("org")),
            queue("team-b", 4, Some("org")),
            queue("lab", 4, None),
            queue("spare", 0, None),
        ])
        .unwrap();
    let config = SchedulerConfig {
        reclaim: true,
        ..SchedulerConfig::without_backoff()
    };
    let mut s = Scheduler::new(cluster, config);
    queued(&mut s, "x1", 0, 0, "spare");
    queued(&mut s, "a1", 1, 0, "team-a");
    queued(&mut s, "a2", 2, 0, "team-a");
    round(&mut s, 0, &dragon);
    assert_eq!(bound(&s, "x1") + bound(&s, "a1") + bound(&s, "a2"), 12);
    // `lab` is owed 4. team-a borrows 4 beyond its own guarantee, but
    // `org` holds no more than its 8: only `spare` lends (flat, a gang
    // of team-a could have been taken instead).
    queued(&mut s, "l1", 10, 0, "lab");
    let r = round(&mut s, 1000, &dragon);
    assert_eq!(evicted(&r), [UnitKey::job("x1")], "{:?}", r.decisions);
    let message = &r.io.evictions[0].message;
    assert!(message.contains("that queue spare borrows"), "{message}");
    terminate(&mut s, &r);
    round(&mut s, 2000, &dragon);
    assert_eq!(bound(&s, "l1"), 4);
    // team-b is owed 4 within `org`, which as a whole holds its
    // guarantee: it takes back what its sibling borrows.
    queued(&mut s, "b1", 20, 0, "team-b");
    let r = round(&mut s, 3000, &dragon);
    assert_eq!(evicted(&r).len(), 1, "{:?}", r.decisions);
    let message = &r.io.evictions[0].message;
    assert!(message.contains("that queue team-a borrows"), "{message}");
    terminate(&mut s, &r);
    // `spare`'s gang, first in the queue, would borrow the room freed for
    // b1: it waits until b1 has it.
    let r = round(&mut s, 4000, &dragon);
    assert_eq!(bound(&s, "b1"), 4, "{:?}", r.decisions);
    let why = reason(&r, &UnitKey::job("x1"));
    assert!(
        why.contains(
            "queue spare would borrow beyond its guarantee while GPUs are taken back for job/b1"
        ),
        "{why}"
    );
    assert_eq!(bound(&s, "l1"), 4);
}
