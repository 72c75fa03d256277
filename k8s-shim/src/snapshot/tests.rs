use super::*;

use crate::fixtures::{dragon_policy, gated, group, node, pod};

#[test]
fn a_gated_member_holds_its_whole_gang_until_the_gate_is_removed() {
    use dragon_framework::{Decision, RecordingIo};
    let policy = dragon_policy();
    let mut s = Snapshot::new("dragon", SchedulerConfig::without_backoff());
    s.apply(node("n1", 4));
    s.apply(group("t", 2));
    s.apply(pod("t-w0", Some("t"), "worker", 0, None, "dragon"));
    let w1 = || pod("t-w1", Some("t"), "worker", 1, None, "dragon");
    s.apply(gated(w1(), &["example.com/quota"]));
    let mut io = RecordingIo::default();
    let r = s
        .sched
        .schedule_round(0, &policy, &mut io, &mut RecordingIo::default());
    assert!(
        io.binds.is_empty(),
        "nothing of a gated gang is bound: {io:?}"
    );
    assert!(
        r.decisions
            .iter()
            .any(|d| matches!(d, Decision::Unschedulable { reason, .. }
                if reason.to_string().contains("ml/t-w1") && reason.to_string().contains("example.com/quota"))),
        "{:?}",
        r.decisions
    );
    // The gate goes: the gang is placed whole.
    s.apply(w1());
    s.sched
        .schedule_round(1, &policy, &mut io, &mut RecordingIo::default());
    assert_eq!(io.binds.len(), 2, "{io:?}");
}

#[test]
fn a_gang_takes_its_members_highest_priority_and_goes_first() {
    use dragon_framework::RecordingIo;
    let policy = dragon_policy();
    let mut s = Snapshot::new("dragon", SchedulerConfig::without_backoff());
    s.apply(node("n1", 4));
    // Two gangs of four 1-GPU workers on a 4-GPU node: one at a time.
    // `low` is older; one member of `high` has priority 100.
    for (g, priority) in [("low", 0), ("high", 100)] {
        s.apply(group(g, 4));
        for i in 0..4 {
            let Event::Pod(mut p) = pod(&format!("{g}-w{i}"), Some(g), "worker", i, None, "dragon")
            else {
                unreachable!("a pod event")
            };
            if i == 2 {
                p.spec.as_mut().unwrap().priority = Some(priority);
            }
            s.apply(Event::Pod(p));
        }
    }
    assert_eq!(s.sched.cluster().job("ml/high").unwrap().priority, 100);
    let mut io = RecordingIo::default();
    s.sched
        .schedule_round(0, &policy, &mut io, &mut RecordingIo::default());
    let bound: BTreeSet<&str> = io.binds.iter().map(|(p, _)| p.as_str()).collect();
    assert_eq!(
        bound,
        BTreeSet::from(["ml/high-w0", "ml/high-w1", "ml/high-w2", "ml/high-w3"])
    );
}

#[test]
fn a_bound_pod_counts_as_usage_even_with_a_constraint_dragon_cannot_evaluate() {
    let mut s = Snapshot::new("dragon", SchedulerConfig::default());
    s.apply(node("n1", 4));
    let unsupported: core::Affinity = serde_norway::from_str(
            "podAntiAffinity: {requiredDuringSchedulingIgnoredDuringExecution: [{labelSelector: {}, topologyKey: zone, namespaceSelector: {matchLabels: {team: a}}}]}",
        )
        .unwrap();
    for (name, node, scheduler) in [
        ("theirs", Some("n1"), "default-scheduler"),
        ("ours", None, "dragon"),
    ] {
        let Event::Pod(mut p) = pod(name, None, "", 0, node, scheduler) else {
            unreachable!("a pod event")
        };
        p.spec.as_mut().unwrap().affinity = Some(unsupported.clone());
        s.apply(Event::Pod(p));
    }
    let c = s.sched.cluster();
    assert_eq!(c.used(0).gpus, 1, "the bound pod holds its GPU");
    // The pending one of ours waits, with the field named.
    assert!(c.pod("ml/ours").is_none());
    assert!(
        s.invalid["ml/ours"].contains("namespaceSelector"),
        "{:?}",
        s.invalid
    );
}

#[test]
fn a_bad_kueue_topology_annotation_keeps_a_pending_pod_out_but_a_bound_one_counts() {
    let mut s = Snapshot::new("dragon", SchedulerConfig::default());
    s.apply(node("n1", 4));
    for (name, node, scheduler) in [
        ("theirs", Some("n1"), "default-scheduler"),
        ("ours", None, "dragon"),
    ] {
        let Event::Pod(mut p) = pod(name, None, "", 0, node, scheduler) else {
            unreachable!("a pod event")
        };
        p.metadata.annotations = Some(
            [
                (
                    "kueue.x-k8s.io/podset-required-topology".to_string(),
                    "rack".to_string(),
                ),
                (
                    "kueue.x-k8s.io/podset-preferred-topology".to_string(),
                    "zone".to_string(),
                ),
            ]
            .into(),
        );
        s.apply(Event::Pod(p));
    }
    let c = s.sched.cluster();
    assert_eq!(c.used(0).gpus, 1, "the bound pod holds its GPU");
    assert!(c.pod("ml/ours").is_none());
    assert!(
        s.invalid["ml/ours"].contains("set one of kueue.x-k8s.io/podset-required-topology"),
        "{:?}",
        s.invalid
    );
}

#[test]
fn gang_pods_wait_for_their_podgroup_and_then_form_a_job() {
    let mut s = Snapshot::new("dragon", SchedulerConfig::default());
    for e in [
        node("n1", 4),
        pod("t-w0", Some("t"), "worker", 0, None, "dragon"),
        pod("t-w1", Some("t"), "worker", 1, None, "dragon"),
    ] {
        s.apply(e);
    }
    assert_eq!(s.pending(), 0, "no PodGroup yet");
    s.apply(group("t", 2));
    assert_eq!(s.pending(), 2);
    let job = s.sched.cluster().job("ml/t").unwrap();
    assert_eq!((job.workers, job.min_member), (2, 2));
}

#[test]
fn a_relist_forgets_what_vanished_wherever_it_was_kept() {
    let mut s = Snapshot::new("dragon", SchedulerConfig::default());
    s.apply(node("n1", 4));
    s.apply(node("n2", 4));
    s.apply(group("kept", 1));
    s.apply(group("gone", 1));
    s.apply(pod("placed", None, "", 0, Some("n1"), "dragon"));
    s.apply(pod("waiting", Some("never"), "worker", 0, None, "dragon"));
    let keys = |ks: &[&str]| ks.iter().map(|k| k.to_string()).collect::<BTreeSet<_>>();
    let names = |events: Vec<Event>| -> Vec<String> {
        events
            .into_iter()
            .map(|e| match e {
                Event::NodeGone(k) | Event::PodGone(k) | Event::GroupGone(k) => k,
                other => panic!("unexpected {other:?}"),
            })
            .collect()
    };
    assert_eq!(
        names(s.vanished(Listed::Nodes, &keys(&["n1"]))),
        vec!["n2".to_string()]
    );
    // A pod waiting for its PodGroup is found too.
    assert_eq!(
        names(s.vanished(Listed::Pods, &keys(&["ml/placed"]))),
        vec!["ml/waiting".to_string()]
    );
    assert_eq!(
        names(s.vanished(
            Listed::Groups(GroupApi::SchedulerPlugins),
            &keys(&["ml/kept"])
        )),
        vec!["ml/gone".to_string()]
    );
    // The other API's list says nothing of these.
    assert!(
        s.vanished(Listed::Groups(GroupApi::Native), &keys(&[]))
            .is_empty()
    );
    for e in s.vanished(Listed::Pods, &keys(&["ml/placed"])) {
        s.apply(e);
    }
    assert!(s.deferred.by_pod.is_empty());
}

#[test]
fn pods_listed_before_their_nodes_and_podgroups_are_taken_in_as_those_arrive() {
    let mut s = Snapshot::new("dragon", SchedulerConfig::default());
    for n in 0..20 {
        for i in 0..3 {
            let (name, node) = (format!("b{n}-{i}"), format!("n{n}"));
            s.apply(pod(&name, None, "", 0, Some(&node), "default-scheduler"));
        }
    }
    for g in 0..5 {
        for i in 0..2 {
            let (name, group) = (format!("g{g}-w{i}"), format!("g{g}"));
            s.apply(pod(&name, Some(&group), "worker", i, None, "dragon"));
        }
    }
    assert_eq!(s.pending(), 0);
    assert_eq!(s.deferred.by_pod.len(), 70);
    for n in 0..20 {
        s.apply(node(&format!("n{n}"), 4));
        // Its own three pods, and only those, are taken in.
        assert_eq!(s.sched.cluster().free(n).gpus, 1, "node n{n}");
        assert_eq!(s.deferred.by_pod.len(), 70 - 3 * (n + 1));
    }
    for g in 0..5 {
        s.apply(group(&format!("g{g}"), 2));
    }
    assert_eq!(s.pending(), 10);
    assert!(s.deferred.waiting.is_empty() && s.deferred.by_pod.is_empty());
    // A pod that leaves while deferred is forgotten.
    s.apply(pod("late", Some("later"), "worker", 0, None, "dragon"));
    s.apply(Event::PodGone("ml/late".into()));
    assert!(s.deferred.waiting.is_empty() && s.deferred.by_pod.is_empty());
}

#[test]
fn a_podgroup_with_a_bad_spec_holds_its_pods_with_the_reason_until_fixed() {
    let mut s = Snapshot::new("dragon", SchedulerConfig::default());
    s.apply(node("n1", 4));
    let bad = serde_json::json!({"minMember": "two"});
    s.apply(Event::Group(PodGroup {
        key: "ml/t".into(),
        spec: translate::podgroup_spec("ml/t", Some(&bad)),
        annotations: BTreeMap::new(),
        created_ms: 1,
        api: GroupApi::SchedulerPlugins,
        priority: None,
    }));
    s.apply(pod("t-w0", Some("t"), "worker", 0, None, "dragon"));
    assert_eq!(s.pending(), 1);
    let hold = s.sched.cluster().job("ml/t").and_then(|j| j.hold.clone());
    assert!(
        hold.as_deref()
            .is_some_and(|h| h.contains("spec") && h.contains("minMember")),
        "{hold:?}"
    );
    s.apply(group("t", 1));
    assert_eq!(
        s.sched.cluster().job("ml/t").and_then(|j| j.hold.clone()),
        None
    );
}

#[test]
fn all_bound_pods_count_as_usage_but_only_ours_are_scheduled() {
    let mut s = Snapshot::new("dragon", SchedulerConfig::default());
    s.apply(pod("other", None, "", 0, Some("n1"), "default-scheduler"));
    s.apply(node("n1", 4));
    s.apply(pod(
        "theirs-pending",
        None,
        "",
        0,
        None,
        "default-scheduler",
    ));
    s.apply(pod("ours", None, "", 0, None, "dragon"));
    assert_eq!(
        s.sched.cluster().free(0).gpus,
        3,
        "the deferred bound pod counts once its node is known"
    );
    assert_eq!(s.pending(), 1);
    s.apply(Event::PodGone("ml/other".into()));
    assert_eq!(s.sched.cluster().free(0).gpus, 4);
}

#[test]
fn pods_bound_to_a_deleted_node_are_not_pending_and_count_again_if_it_returns() {
    let mut s = Snapshot::new("dragon", SchedulerConfig::default());
    s.apply(node("n1", 4));
    s.apply(node("n2", 4));
    s.apply(group("t", 2));
    s.apply(pod("t-w0", Some("t"), "worker", 0, Some("n1"), "dragon"));
    s.apply(pod("t-w1", Some("t"), "worker", 1, Some("n2"), "dragon"));
    s.apply(pod("other", None, "", 0, Some("n2"), "default-scheduler"));
    s.apply(pod("mine", None, "", 0, Some("n2"), "dragon"));
    s.apply(Event::NodeGone("n2".into()));
    assert_eq!(
        s.pending(),
        0,
        "still bound in the API: nothing to schedule"
    );
    assert!(s.sched.cluster().pod("ml/t-w1").is_none());
    assert!(s.sched.cluster().pod("ml/t-w0").is_some());
    // An update of an orphan (its node still unknown) waits for the node.
    s.apply(pod("mine", None, "", 0, Some("n2"), "dragon"));
    assert_eq!(s.pending(), 0);
    // PodGC deletes one; the node comes back with the others on it.
    s.apply(Event::PodGone("ml/other".into()));
    s.apply(node("n2", 4));
    assert_eq!(s.pending(), 0);
    let n2 = s.sched.cluster().node_by_name("n2").unwrap();
    assert_eq!(s.sched.cluster().free(n2).gpus, 2, "t-w1 and mine");
}

#[test]
fn a_bound_gang_pod_seen_before_its_podgroup_joins_the_job_when_it_comes() {
    let mut s = Snapshot::new("dragon", SchedulerConfig::default());
    s.apply(node("n1", 4));
    s.apply(pod("t-ps", Some("t"), "ps", 0, Some("n1"), "dragon"));
    s.apply(pod("t-w0", Some("t"), "worker", 0, None, "dragon"));
    assert_eq!(s.sched.cluster().free(0).gpus, 3, "usage counted at once");
    s.apply(group("t", 3));
    let members: Vec<(String, PodState)> = s
        .sched
        .cluster()
        .job_pods("ml/t")
        .map(|(p, st)| (p.key.to_string(), st))
        .collect();
    assert_eq!(
        members,
        vec![
            ("ml/t-ps".to_string(), PodState::Bound(0)),
            ("ml/t-w0".to_string(), PodState::Pending)
        ]
    );
    assert_eq!(s.sched.cluster().free(0).gpus, 3);
}

#[test]
fn a_pod_seen_bound_is_bound_in_the_snapshot() {
    let mut s = Snapshot::new("dragon", SchedulerConfig::default());
    s.apply(node("n1", 4));
    s.apply(pod("p", None, "", 0, None, "dragon"));
    s.apply(pod("p", None, "", 0, Some("n1"), "dragon"));
    assert_eq!(s.pending(), 0);
    assert_eq!(s.sched.cluster().free(0).gpus, 3);
}

#[test]
fn a_pod_claiming_devices_waits_for_its_claim_to_be_created_then_is_tried() {
    let with_claim = |node: Option<&str>, created: bool| {
        let Event::Pod(mut p) = pod("p", None, "", 0, node, "dragon") else {
            unreachable!("a pod event")
        };
        let spec = p.spec.as_mut().expect("a spec");
        spec.resource_claims = Some(vec![core::PodResourceClaim {
            name: "gpu".into(),
            resource_claim_template_name: Some("one-gpu".into()),
            ..Default::default()
        }]);
        if created {
            p.status
                .get_or_insert_with(Default::default)
                .resource_claim_statuses = Some(vec![core::PodResourceClaimStatus {
                name: "gpu".into(),
                resource_claim_name: Some("p-gpu-x7k2q".into()),
            }]);
        }
        Event::Pod(p)
    };
    let mut s = Snapshot::new("dragon", SchedulerConfig::default());
    s.apply(node("n1", 4));
    s.apply(with_claim(None, false));
    assert_eq!(s.pending(), 0);
    assert_eq!(
        s.invalid["ml/p"],
        "pod \"ml/p\": ResourceClaim not created yet"
    );
    s.apply(with_claim(None, true));
    assert!(s.invalid.is_empty());
    assert_eq!(s.pending(), 1);
    let (p, _) = s.sched.cluster().pod("ml/p").expect("in the framework");
    assert_eq!(p.claims, vec!["ml/p-gpu-x7k2q".to_string()]);
    s.apply(with_claim(Some("n1"), true));
    assert_eq!(
        s.sched.cluster().free(0).gpus,
        3,
        "bound elsewhere, it counts"
    );
}

/// Pod `name` of Kueue pod group `group` of `total` pods (the count as
/// written), gated as Kueue's webhook gates it until admission when
/// `admitted` is false.
fn kueue_pod(name: &str, group: &str, total: &str, admitted: bool) -> Event {
    let Event::Pod(mut p) = pod(name, None, "worker", 0, None, "dragon") else {
        unreachable!("a pod event")
    };
    p.metadata.labels = Some(
        [(translate::KUEUE_GROUP_LABEL.to_string(), group.to_string())]
            .into_iter()
            .collect(),
    );
    p.metadata.annotations = Some(
        [(translate::KUEUE_GROUP_TOTAL.to_string(), total.to_string())]
            .into_iter()
            .collect(),
    );
    let event = Event::Pod(p);
    match admitted {
        true => event,
        false => crate::fixtures::gated(event, &["kueue.x-k8s.io/admission"]),
    }
}

#[test]
fn a_kueue_pod_group_is_one_gang_of_its_total_count_and_goes_with_its_last_pod() {
    use dragon_framework::{Decision, RecordingIo};
    let policy = dragon_policy();
    let mut s = Snapshot::new("dragon", SchedulerConfig::without_backoff());
    s.apply(node("n1", 4));
    let mut io = RecordingIo::default();
    let mut round = |s: &mut Snapshot, t: u64| {
        s.sched
            .schedule_round(t, &policy, &mut io, &mut RecordingIo::default())
    };
    // Two of three pods, not yet admitted by Kueue.
    s.apply(kueue_pod("k-0", "k", "3", false));
    s.apply(kueue_pod("k-1", "k", "3", false));
    let job = s.sched.cluster().job("ml/k").unwrap();
    assert_eq!(job.min_member, 3);
    assert!(job.declared);
    let r = round(&mut s, 0);
    assert!(
        r.decisions
            .iter()
            .any(|d| matches!(d, Decision::Unschedulable { reason, .. }
        if reason.to_string().contains("kueue.x-k8s.io/admission"))),
        "{:?}",
        r.decisions
    );
    // All three, and admitted: the gates go, all three are bound at once.
    s.apply(kueue_pod("k-2", "k", "3", false));
    for i in 0..3 {
        s.apply(kueue_pod(&format!("k-{i}"), "k", "3", true));
    }
    round(&mut s, 1);
    drop(round);
    assert_eq!(io.binds.len(), 3, "{io:?}");
    // No object stands for the group: it leaves with its last pod.
    for i in 0..3 {
        s.apply(Event::PodGone(format!("ml/k-{i}")));
    }
    assert!(s.sched.cluster().job("ml/k").is_none());
    assert!(s.group("ml/k").is_none());
}

#[test]
fn a_kueue_pod_group_without_a_usable_count_is_held_with_the_annotation_named() {
    let mut s = Snapshot::new("dragon", SchedulerConfig::without_backoff());
    s.apply(node("n1", 4));
    s.apply(kueue_pod("k-0", "k", "none", true));
    let hold = s.sched.cluster().job("ml/k").unwrap().hold.clone().unwrap();
    assert!(
        hold.contains("kueue.x-k8s.io/pod-group-total-count must be a whole number of at least 1, got \"none\""),
        "{hold}"
    );
    // A pod that says it well mends the group.
    s.apply(kueue_pod("k-1", "k", "2", true));
    let job = s.sched.cluster().job("ml/k").unwrap();
    assert_eq!((job.min_member, job.hold.as_deref()), (2, None));
}
