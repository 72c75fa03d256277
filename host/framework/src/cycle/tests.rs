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
    let mut s = Scheduler::new(Cluster::new(), SchedulerConfig::without_backoff());
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
    let gangs = s.units(true);
    assert_eq!(gangs.len(), 1);
    assert_eq!(gangs[0].key, UnitKey::job("j"));
    assert_eq!(gangs[0].pods, ["j-Worker-0", "j-Worker-1", "j-Ps-0"]);
    let lone = s.units(false);
    assert_eq!(lone.len(), 3, "a trace's job under a policy without permit");
    assert!(lone.iter().all(|u| u.pods.len() == 1 && !u.wit.gang));
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
    assert_eq!(planned.binds().len(), 2, "two tried, one left");
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
    assert!(planned.binds().is_empty());
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
    assert_eq!(planned.binds().len(), 2);
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
