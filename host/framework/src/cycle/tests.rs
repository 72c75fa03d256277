//! The round's stages one at a time: the units built from pending pods,
//! the budget that defers the rest, permit's waits running out, and a
//! failed bind settled. (Whole rounds under real policies are tested in
//! `tests/tests/framework.rs`.)

use super::*;

use crate::ApiErrorKind;
use crate::fixtures::job;
use crate::io::ApiError;
use crate::model::{Job, Node, Resources, Role};
use dragon_runtime::PolicyInfo;

/// A policy that answers `permit` as told and everything else neutrally.
struct Permits {
    info: PolicyInfo,
    answer: wit::PermitResult,
}

impl Hooks for Permits {
    fn info(&self) -> &PolicyInfo {
        &self.info
    }

    fn permit(&self, _now_ms: u64, _gang: &wit::GangState) -> Result<wit::PermitResult, CallError> {
        Ok(self.answer.clone())
    }
}

fn permits(answer: wit::PermitResult) -> Permits {
    Permits {
        info: PolicyInfo::native("permits", "0.1.0", vec![wit::Hook::Permit]),
        answer,
    }
}

fn gpus(n: u32) -> Resources {
    Resources {
        cpu_milli: 1_000,
        memory_mib: 1_024,
        gpus: n,
    }
}

fn member(job: &str, role: Role, index: u32) -> Pod {
    let mut p = Pod::new(format!("{job}-{role:?}-{index}"), gpus(1));
    p.job = Some(job.into());
    p.role = role;
    p.index = index;
    p
}

/// One roomy node of `node_gpus` GPUs, `jobs`, and `pods` pending.
fn scheduler(node_gpus: u32, jobs: &[Job], pods: Vec<Pod>) -> Scheduler {
    scheduler_with(SchedulerConfig::without_backoff(), node_gpus, jobs, pods)
}

/// [`scheduler`] with the framework settings `config`.
fn scheduler_with(
    config: SchedulerConfig,
    node_gpus: u32,
    jobs: &[Job],
    pods: Vec<Pod>,
) -> Scheduler {
    let mut s = Scheduler::new(Cluster::new(), config);
    let room = Resources {
        cpu_milli: 64_000,
        memory_mib: 256_000,
        gpus: node_gpus,
    };
    s.apply(ClusterOp::AddNode(Node::new("n", room))).unwrap();
    for j in jobs {
        s.apply(ClusterOp::UpsertJob(j.clone())).unwrap();
    }
    for pod in pods {
        s.apply(ClusterOp::AddPod { pod, node: None }).unwrap();
    }
    s
}

#[test]
fn a_jobs_pending_pods_are_one_gang_workers_first_or_each_its_own_unit_without_gangs() {
    let pods = vec![
        member("j", Role::Ps, 0),
        member("j", Role::Worker, 1),
        member("j", Role::Worker, 0),
    ];
    let s = scheduler(8, &[job("j", 2)], pods);
    let plans = |gangs| -> Vec<UnitPlan> {
        let (_, units) = s.units(gangs, 0);
        units
            .into_iter()
            .filter_map(|u| match u {
                super::units::Candidate::Plan(u) => Some(*u),
                super::units::Candidate::Parked(_) => None,
            })
            .collect()
    };
    let gangs = plans(true);
    assert_eq!(gangs.len(), 1);
    assert_eq!(gangs[0].key, UnitKey::job("j"));
    assert_eq!(gangs[0].pods, ["j-Worker-0", "j-Worker-1", "j-Ps-0"]);
    let lone = plans(false);
    assert_eq!(lone.len(), 3, "a trace's job under a policy without permit");
    assert!(lone.iter().all(|u| u.pods.len() == 1 && !u.wit.gang));
}

#[test]
fn room_for_one_pod_builds_the_plan_of_one_of_many_parked_pods() {
    let pods = (0..500)
        .map(|i| Pod::new(format!("p{i:03}"), gpus(1)))
        .collect();
    let config = SchedulerConfig {
        flush: crate::queue::Flush::Count,
        wake: crate::queue::Wake::Fits,
        ..SchedulerConfig::default()
    };
    let mut s = scheduler_with(config, 1, &[], pods);
    let holder = Pod::new("holder", gpus(1));
    let node = Some("n".into());
    s.apply(ClusterOp::AddPod { pod: holder, node }).unwrap();
    let policy = permits(wit::PermitResult::Allow);
    let first = s.plan_round(0, &policy, None, &mut Unbounded);
    assert_eq!(
        first.units.len(),
        500,
        "each tried once, and found unschedulable"
    );
    assert!(first.groups().is_empty());
    s.apply(ClusterOp::RemovePod("holder".into())).unwrap();
    // The freed GPU wakes them all; the first in line takes it, and the
    // others are passed over by room alone, their plans never built.
    let second = s.plan_round(1_000, &policy, None, &mut Unbounded);
    let bound: Vec<_> = second.binds().map(|(pod, _)| pod.to_string()).collect();
    assert_eq!(bound, ["p000"]);
    assert_eq!(second.units.len(), 1);
    let parked = s
        .cluster()
        .pods
        .values()
        .filter(|e| e.state == PodState::Pending && s.queue.need(e.unit_id).is_some());
    assert_eq!(parked.count(), 499, "still parked with what they need");
}

#[test]
fn a_spent_budget_defers_the_untried_units_to_the_next_round() {
    let pods = (0..3).map(|i| Pod::new(format!("p{i}"), gpus(1))).collect();
    let mut s = scheduler(8, &[], pods);
    let policy = permits(wit::PermitResult::Allow);
    let mut budget = DeferAt {
        untried: 1,
        budget_ms: 5,
    };
    let planned = s.plan_round(0, &policy, None, &mut budget);
    assert_eq!(planned.binds().count(), 2, "two tried, one left");
    assert!(planned.report.decisions.contains(&Decision::Deferred {
        units: 1,
        budget_ms: 5
    }));
}

#[test]
fn a_gang_held_in_permit_is_released_when_its_wait_runs_out() {
    let pods = vec![member("j", Role::Worker, 0), member("j", Role::Worker, 1)];
    let mut s = scheduler(8, &[job("j", 2)], pods);
    // Backing off, as by default: not tried again in the round that
    // released it.
    s.config = SchedulerConfig::default();
    let policy = permits(wit::PermitResult::Wait(1_000));
    let planned = s.plan_round(0, &policy, None, &mut Unbounded);
    assert!(planned.groups().is_empty());
    assert!(
        matches!(
            planned.report.decisions.as_slice(),
            [Decision::Waiting { reserved: 2, .. }]
        ),
        "{:?}",
        planned.report.decisions
    );
    assert_eq!(s.waiting_gangs().count(), 1);
    let later = s.plan_round(2_000, &policy, None, &mut Unbounded);
    let timed_out = later.report.decisions.iter().find_map(|d| match d {
        Decision::TimedOut { unit, reason } => Some((unit.clone(), reason.clone())),
        _ => None,
    });
    let (unit, reason) = timed_out.expect("timed out");
    assert_eq!(unit, UnitKey::job("j"));
    assert!(
        reason
            .contains("after 2 s (the wait the policy allowed) with 2 of minMember 2 pods placed"),
        "{reason}"
    );
    assert!(
        s.cluster()
            .job_pods("j")
            .all(|(_, state)| state == PodState::Pending),
        "its reservations are released"
    );
}

#[test]
fn a_gang_with_a_failed_bind_is_released_whole_and_its_bound_members_given_back() {
    let pods = vec![member("j", Role::Worker, 0), member("j", Role::Worker, 1)];
    let mut s = scheduler(8, &[job("j", 2)], pods);
    let planned = s.plan_round(0, &permits(wit::PermitResult::Allow), None, &mut Unbounded);
    assert_eq!(planned.binds().count(), 2);
    let refused = ApiError::new(ApiErrorKind::Conflict, "already bound");
    let report = s.settle_round(planned, vec![Ok(()), Err(refused)]);
    assert!(
        report
            .decisions
            .iter()
            .any(|d| matches!(d, Decision::BindFailed { pod, .. } if pod == "j-Worker-1")),
        "{:?}",
        report.decisions
    );
    assert!(
        report
            .effects
            .iter()
            .any(|e| matches!(e, Effect::Release { pod, .. } if pod == "j-Worker-0")),
        "{:?}",
        report.effects
    );
}

/// A PodGroup's job of `pods` workers of which `min` must run together.
fn elastic(name: &str, pods: u32, min: u32) -> (Job, Vec<Pod>) {
    let j = Job {
        min_member: min,
        declared: true,
        ..job(name, pods)
    };
    let members = (0..pods).map(|i| member(name, Role::Worker, i)).collect();
    (j, members)
}

/// Pods bound per job, by job name, after one round settled with every
/// bind succeeding; and the number of bind groups.
fn one_round(s: &mut Scheduler, policy: &dyn Hooks) -> (BTreeMap<String, usize>, usize) {
    let planned = s.plan_round(0, policy, None, &mut Unbounded);
    let groups = planned.to_bind.len();
    let n = planned.binds().count();
    let report = s.settle_round(planned, vec![Ok(()); n]);
    let mut per_job = BTreeMap::new();
    for d in &report.decisions {
        if let Decision::Bound { pod, .. } = d {
            let job = s.cluster().pod(pod).and_then(|(p, _)| p.job.clone());
            *per_job.entry(job.unwrap().to_string()).or_default() += 1;
        }
    }
    (per_job, groups)
}

fn gangs_of(specs: &[(&str, u32, u32)], slots: u32) -> Scheduler {
    let (jobs, pods): (Vec<Job>, Vec<Vec<Pod>>) =
        specs.iter().map(|&(n, p, m)| elastic(n, p, m)).unzip();
    scheduler(slots, &jobs, pods.concat())
}

#[test]
fn a_trace_jobs_pods_are_not_split_into_a_quorum_and_extras() {
    let mut s = gangs_of(&[("a", 6, 2), ("b", 6, 2)], 6);
    for name in ["a", "b"] {
        let mut j = s.cluster().job(name).unwrap().clone();
        j.declared = false;
        s.apply(ClusterOp::UpsertJob(j)).unwrap();
    }
    let (bound, _) = one_round(&mut s, &permits(wit::PermitResult::Allow));
    assert_eq!(bound.get("a"), Some(&6), "{bound:?}");
}

#[test]
fn each_gang_gets_its_quorum_before_any_gang_gets_an_extra() {
    // Volcano's case: three 6-pod jobs with minMember 2 on 6 slots.
    let mut s = gangs_of(&[("a", 6, 2), ("b", 6, 2), ("c", 6, 2)], 6);
    let (bound, groups) = one_round(&mut s, &permits(wit::PermitResult::Allow));
    assert_eq!(bound.values().copied().collect::<Vec<_>>(), [2, 2, 2]);
    assert_eq!(groups, 3, "one bind group a gang");
}

#[test]
fn extras_are_shared_one_pod_a_gang_in_queue_order() {
    // Quorums 2 + 2 + 2, then 5 extras: a, b, c, a, b.
    let mut s = gangs_of(&[("a", 6, 2), ("b", 6, 2), ("c", 6, 2)], 11);
    let (bound, groups) = one_round(&mut s, &permits(wit::PermitResult::Allow));
    assert_eq!(bound.values().copied().collect::<Vec<_>>(), [4, 4, 3]);
    assert_eq!(groups, 3, "a gang's extras are bound with its quorum");
}

#[test]
fn a_gang_alone_takes_every_pod_that_fits_in_one_placement() {
    let mut s = gangs_of(&[("a", 6, 2)], 5);
    let (bound, groups) = one_round(&mut s, &permits(wit::PermitResult::Allow));
    assert_eq!(bound["a"], 5);
    assert_eq!(groups, 1);
}

#[test]
fn a_running_gangs_extras_wait_for_a_new_gangs_quorum() {
    let mut s = gangs_of(&[("run", 6, 2)], 4);
    let policy = permits(wit::PermitResult::Allow);
    // Alone, it takes all four slots.
    let planned = s.plan_round(0, &policy, None, &mut Unbounded);
    let n = planned.binds().count();
    assert_eq!(n, 4);
    // Two of its bound pods finish (they are removed) as a new gang
    // arrives.
    let report = s.settle_round(planned, vec![Ok(()); n]);
    let bound: Vec<PodKey> = report
        .decisions
        .iter()
        .filter_map(|d| match d {
            Decision::Bound { pod, .. } => Some(pod.clone()),
            _ => None,
        })
        .collect();
    for pod in &bound[2..] {
        s.remove_pod(pod).unwrap();
    }
    let (j, pods) = elastic("new", 6, 2);
    s.apply(ClusterOp::UpsertJob(j)).unwrap();
    for pod in pods {
        s.apply(ClusterOp::AddPod { pod, node: None }).unwrap();
    }
    // Two slots free: the new gang's quorum, not the running gang's extras.
    let (bound, _) = one_round(&mut s, &policy);
    assert_eq!(bound.get("new"), Some(&2), "{bound:?}");
    assert_eq!(bound.get("run"), None, "{bound:?}");
}

/// A policy that scores every candidate 0 and remembers each call's
/// candidates.
struct Seen {
    info: PolicyInfo,
    candidates: std::sync::Mutex<Vec<Vec<u32>>>,
}

/// A gang-scheduling policy (it has `permit`) that remembers what `score`
/// was given.
fn recording_scores() -> Seen {
    Seen {
        info: PolicyInfo::native("seen", "0.1.0", vec![wit::Hook::Score, wit::Hook::Permit]),
        candidates: Default::default(),
    }
}

impl Hooks for Seen {
    fn info(&self) -> &PolicyInfo {
        &self.info
    }

    fn score(
        &self,
        _pod: &wit::Placement,
        nodes: &wit::Candidates,
        _view: &dyn dragon_runtime::ClusterView,
    ) -> Result<Vec<u32>, CallError> {
        let mut seen = self.candidates.lock().unwrap_or_else(|e| e.into_inner());
        seen.push(nodes.index.clone());
        Ok(vec![0; nodes.index.len()])
    }
}

#[test]
fn on_a_large_cluster_a_pod_looks_at_a_share_of_the_nodes_and_a_gang_at_its_own_nodes_too() {
    let mut s = Scheduler::new(Cluster::new(), SchedulerConfig::without_backoff());
    let room = Resources {
        cpu_milli: 64_000,
        memory_mib: 256_000,
        gpus: 8,
    };
    for n in 0..1000 {
        s.apply(ClusterOp::AddNode(Node::new(format!("n{n}"), room)))
            .unwrap();
    }
    // A running member of `j` on a node its search would not reach: the
    // 420 nodes from its start (42 % of 1,000, kube-scheduler's adaptive
    // share) end before it.
    let start = sample::start_for("j", 1000) as usize;
    let far = (start + 500) % 1000;
    s.apply(ClusterOp::UpsertJob(job("j", 2))).unwrap();
    s.apply(ClusterOp::AddPod {
        pod: member("j", Role::Worker, 0),
        node: Some(format!("n{far}").into()),
    })
    .unwrap();
    s.apply(ClusterOp::AddPod {
        pod: member("j", Role::Worker, 1),
        node: None,
    })
    .unwrap();
    s.apply(ClusterOp::AddPod {
        pod: Pod::new("lone", gpus(1)),
        node: None,
    })
    .unwrap();
    let policy = recording_scores();
    let planned = s.plan_round(0, &policy, None, &mut Unbounded);
    assert_eq!(planned.binds().count(), 2, "{:?}", planned.report.decisions);
    let seen = policy.candidates.into_inner().unwrap();
    let sizes: Vec<usize> = seen.iter().map(Vec::len).collect();
    let member = seen
        .iter()
        .find(|c| c.contains(&(far as u32)))
        .unwrap_or_else(|| {
            panic!("the member's own node {far} among its candidates: {sizes:?} start {start}")
        });
    assert_eq!(member.len(), 421, "420 and its sibling's node: {sizes:?}");
    assert!(member.windows(2).all(|w| w[0] < w[1]), "ascending");
    assert!(sizes.contains(&420), "the lone pod: {sizes:?}");
    // Scoring every node is a setting away.
    s.config.percentage_of_nodes_to_score = 100;
    s.apply(ClusterOp::AddPod {
        pod: Pod::new("all", gpus(1)),
        node: None,
    })
    .unwrap();
    let policy = recording_scores();
    let _ = s.plan_round(0, &policy, None, &mut Unbounded);
    let seen = policy.candidates.into_inner().unwrap();
    assert_eq!(seen.iter().map(Vec::len).collect::<Vec<_>>(), [1000]);
}

/// A policy without gangs whose `pre-filter` lets every unit through and
/// counts how often it was asked.
struct Counting {
    info: PolicyInfo,
    asked: std::sync::atomic::AtomicUsize,
}

impl Hooks for Counting {
    fn info(&self) -> &PolicyInfo {
        &self.info
    }

    fn pre_filter(
        &self,
        _now_ms: u64,
        _unit: &wit::Unit,
        _capacity: &wit::Capacity,
        _view: &dyn dragon_runtime::ClusterView,
    ) -> Result<wit::PreFilterResult, CallError> {
        self.asked
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Ok(wit::PreFilterResult::Proceed(Vec::new()))
    }
}

fn counting(hooks: Vec<wit::Hook>) -> Counting {
    Counting {
        info: PolicyInfo::native("counting", "0.1.0", hooks),
        asked: Default::default(),
    }
}

/// One round at `now_ms` with every bind succeeding: the pods bound.
fn bound_at(s: &mut Scheduler, now_ms: u64, policy: &dyn Hooks) -> Vec<PodKey> {
    let planned = s.plan_round(now_ms, policy, None, &mut Unbounded);
    let n = planned.binds().count();
    let report = s.settle_round(planned, vec![Ok(()); n]);
    report
        .decisions
        .iter()
        .filter_map(|d| match d {
            Decision::Bound { pod, .. } => Some(pod.clone()),
            _ => None,
        })
        .collect()
}

/// A 4-GPU node held whole by a pod placed elsewhere, under `wake`, with
/// `pods` pending.
fn full_node(wake: crate::Wake, jobs: &[Job], pods: Vec<Pod>) -> Scheduler {
    let config = SchedulerConfig {
        flush: crate::Flush::Count,
        wake,
        ..SchedulerConfig::default()
    };
    let mut s = scheduler_with(config, 4, jobs, pods);
    s.apply(ClusterOp::AddPod {
        pod: Pod::new("holder", gpus(4)),
        node: Some("n".into()),
    })
    .unwrap();
    s
}

#[test]
fn a_unit_with_no_room_is_passed_over_without_the_policy_until_room_could_fit_it() {
    use crate::Wake;
    let asked = |p: &Counting| p.asked.load(std::sync::atomic::Ordering::Relaxed);
    for wake in [Wake::Any, Wake::Fits] {
        let policy = counting(vec![wit::Hook::PreFilter]);
        let mut s = full_node(wake, &[], vec![Pod::new("p", gpus(1))]);
        assert!(bound_at(&mut s, 0, &policy).is_empty());
        assert_eq!(asked(&policy), 1, "{wake:?}: tried on arrival");
        // Room elsewhere that cannot hold it: a node without GPUs.
        s.apply(ClusterOp::AddNode(Node::new("cpu", gpus(0))))
            .unwrap();
        assert!(bound_at(&mut s, 1_000, &policy).is_empty());
        let again = match wake {
            Wake::Any => 2,
            Wake::Fits => 1,
        };
        assert_eq!(
            asked(&policy),
            again,
            "{wake:?}: after a change that cannot help"
        );
        // Its attempt was counted all the same: it keeps its place behind
        // a pod that arrived before that change.
        let since = s
            .queue
            .since_ms(s.cluster.pods[&PodKey::from("p")].unit_id, 1_000);
        assert_eq!(since, Some(1_000), "{wake:?}");
        // The holder leaves: it fits and is placed.
        s.remove_pod("holder").unwrap();
        assert_eq!(
            bound_at(&mut s, 2_000, &policy),
            [PodKey::from("p")],
            "{wake:?}"
        );
    }
}

#[test]
fn a_gang_is_woken_only_when_the_room_holds_its_quorum() {
    use crate::Wake;
    let (j, pods) = elastic("g", 3, 3);
    let policy = counting(vec![wit::Hook::PreFilter, wit::Hook::Permit]);
    let asked = || policy.asked.load(std::sync::atomic::Ordering::Relaxed);
    let mut s = full_node(Wake::Fits, &[j], pods);
    assert!(bound_at(&mut s, 0, &policy).is_empty());
    assert_eq!(asked(), 1);
    // Two GPUs free: not enough for three members.
    s.remove_pod("holder").unwrap();
    s.apply(ClusterOp::AddPod {
        pod: Pod::new("half", gpus(2)),
        node: Some("n".into()),
    })
    .unwrap();
    assert!(bound_at(&mut s, 1_000, &policy).is_empty());
    assert_eq!(asked(), 1, "passed over with room for two");
    s.remove_pod("half").unwrap();
    assert_eq!(bound_at(&mut s, 2_000, &policy).len(), 3);
    assert_eq!(asked(), 2);
}

#[test]
fn a_unit_that_may_preempt_is_always_tried() {
    use crate::Wake;
    let policy = counting(vec![wit::Hook::PreFilter]);
    let mut urgent = Pod::new("urgent", gpus(1));
    urgent.priority = 10;
    let mut s = full_node(Wake::Fits, &[], vec![urgent]);
    // The holder (priority 0) is a victim: the attempt preempts it.
    let planned = s.plan_round(0, &policy, None, &mut Unbounded);
    assert!(
        planned
            .report
            .decisions
            .iter()
            .any(|d| matches!(d, Decision::Preempting { .. })),
        "{:?}",
        planned.report.decisions
    );
}

/// Workers added to a running gang go only to nodes of the GPU type its
/// placed pods hold, and wait, named, when that type is full; a new gang,
/// or a cluster whose nodes carry no type, is not held to one.
#[test]
fn a_running_gang_grows_only_on_its_gpu_type() {
    let with_types = |typed: bool| {
        let mut s = Scheduler::new(Cluster::new(), SchedulerConfig::without_backoff());
        for (name, n, product) in [
            ("t4-0", 2, "Tesla-T4"),
            ("t4-1", 1, "Tesla-T4"),
            ("a100", 4, "A100"),
        ] {
            let mut node = Node::new(
                name,
                Resources {
                    cpu_milli: 64_000,
                    memory_mib: 256_000,
                    gpus: n,
                },
            );
            if typed {
                node.labels
                    .insert(crate::GPU_PRODUCT.into(), product.into());
            }
            s.apply(ClusterOp::AddNode(node)).unwrap();
        }
        let (j, pods) = elastic("run", 6, 2);
        s.apply(ClusterOp::UpsertJob(j)).unwrap();
        for (i, pod) in pods.into_iter().enumerate() {
            let node = (i < 2).then(|| "t4-0".into());
            s.apply(ClusterOp::AddPod { pod, node }).unwrap();
        }
        s
    };
    let policy = permits(wit::PermitResult::Allow);
    let nodes_of = |s: &Scheduler, job: &str| -> Vec<String> {
        let mut n: Vec<String> = s
            .cluster()
            .job_pods(job)
            .filter_map(|(_, st)| st.node())
            .map(|i| s.cluster().nodes()[i].name.to_string())
            .collect();
        n.sort();
        n
    };

    let mut untyped = with_types(false);
    one_round(&mut untyped, &policy);
    assert!(nodes_of(&untyped, "run").contains(&"a100".to_string()));

    let mut s = with_types(true);
    let (bound, _) = one_round(&mut s, &policy);
    assert_eq!(bound.get("run"), Some(&1), "{bound:?}");
    assert_eq!(nodes_of(&s, "run"), ["t4-0", "t4-0", "t4-1"]);
    let planned = s.plan_round(1, &policy, None, &mut Unbounded);
    let why: Vec<String> = planned
        .report
        .decisions
        .iter()
        .filter_map(|d| match d {
            Decision::Unschedulable { reason, .. } => Some(reason.to_string()),
            _ => None,
        })
        .collect();
    assert!(
        why.iter()
            .any(|w| w.contains("go to its GPU type, Tesla-T4")),
        "{why:?}"
    );
    let n = planned.binds().count();
    assert_eq!(n, 0);
    let _ = s.settle_round(planned, Vec::new());

    // A new gang may start on any type.
    let (j, pods) = elastic("new", 2, 2);
    s.apply(ClusterOp::UpsertJob(j)).unwrap();
    for pod in pods {
        s.apply(ClusterOp::AddPod { pod, node: None }).unwrap();
    }
    let (bound, _) = one_round(&mut s, &policy);
    assert_eq!(bound.get("new"), Some(&2), "{bound:?}");
    assert_eq!(nodes_of(&s, "new"), ["a100", "a100"]);
}
