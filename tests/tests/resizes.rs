//! The framework's bounds on resizes, whatever the policy asks: a job is
//! resized at most once a minute and restarted at most ten times an hour,
//! grows only into free room, and growth whose new workers find no room in
//! time is rolled back, so no policy can thrash a job or leave it waiting
//! for workers that cannot join it.

use dragon_framework::{
    Cluster, Held, Node, RecordingIo, ResizeLimits, Resources, Scheduler, SchedulerConfig,
};
use dragon_runtime::view::ClusterView;
use dragon_runtime::{CallError, Hooks, PolicyInfo, wit};
use dragon_sim::spec::worker_pod;
use dragon_sim::{SimOptions, Trace, simulate};
use dragon_tests::{Ops, add_gang, add_job, bundled, engine, pending_pods};

/// What a resizing policy does with each running job at each scale step.
#[derive(Clone, Copy)]
enum Resize {
    /// Max workers when below it, else min: a restart at every step.
    FlipFlop,
    /// Max workers, whatever room there is (a policy with a stale view of
    /// the nodes).
    Greedy,
}

/// A policy that places as the SDK defaults do, gangs whole, and resizes
/// every running job at every step.
struct Resizer {
    info: PolicyInfo,
    resize: Resize,
}

impl Resizer {
    fn new(resize: Resize) -> Resizer {
        Resizer {
            info: PolicyInfo::native("resizer", "0", vec![wit::Hook::Permit, wit::Hook::Scale]),
            resize,
        }
    }
}

impl Hooks for Resizer {
    fn info(&self) -> &PolicyInfo {
        &self.info
    }
    fn scale(
        &self,
        input: &wit::ScaleInput,
        _view: &dyn ClusterView,
    ) -> Result<Vec<wit::ScaleDecision>, CallError> {
        Ok(input
            .running
            .iter()
            .map(|j| wit::ScaleDecision {
                id: j.id,
                workers: match self.resize {
                    Resize::FlipFlop if j.workers >= j.max_workers => j.min_workers.max(1),
                    Resize::FlipFlop | Resize::Greedy => j.max_workers,
                },
                reason: "resizer".into(),
            })
            .collect())
    }
}

#[test]
fn a_policy_that_resizes_every_job_at_every_step_restarts_none_more_than_the_limits_allow() {
    let trace = Trace::load("paper").unwrap();
    let flip_flop = Resizer::new(Resize::FlipFlop);
    let run = simulate(&trace, &flip_flop, SimOptions::default(), None);
    assert!(
        run.jobs.iter().all(|j| j.finished_ms.is_some()),
        "every job ran to its end"
    );
    assert!(
        run.resizes_held > 0,
        "the policy asked for more than the limits allow"
    );
    let limits = ResizeLimits::default();
    for j in &run.jobs {
        let ran_ms = j.finished_ms.unwrap() - j.started_ms.unwrap();
        // At most one resize a minute and ten restarts in any hour.
        let hours = ran_ms.div_ceil(3_600_000) as u32;
        let by_rate = hours * limits.max_restarts_per_hour;
        let by_interval = (ran_ms / limits.min_interval_ms) as u32 + 1;
        assert!(
            j.restarts <= by_rate.min(by_interval),
            "{}: {} restarts in {} s",
            j.name,
            j.restarts,
            ran_ms / 1000
        );
    }
    // The same trace under DRAGON, whose resizes the limits never hold.
    let e = engine();
    let dragon = simulate(
        &trace,
        &bundled(&e, "dragon", ""),
        SimOptions::default(),
        None,
    );
    assert_eq!(dragon.resizes_held, 0);
}

#[test]
fn a_policy_that_grows_every_job_into_room_that_is_not_free_leaves_no_job_unable_to_run() {
    let trace = Trace::load("paper").unwrap();
    let run = simulate(
        &trace,
        &Resizer::new(Resize::Greedy),
        SimOptions::default(),
        None,
    );
    assert!(!run.deadlocked);
    assert!(
        run.jobs.iter().all(|j| j.finished_ms.is_some()),
        "every job ran to its end"
    );
}

fn node(name: &str, gpus: u32) -> Node {
    Node::new(
        name,
        Resources {
            cpu_milli: 64_000,
            memory_mib: 262_144,
            gpus,
        },
    )
}

#[test]
fn growth_is_capped_at_the_free_room_and_rolled_back_when_its_workers_find_none_in_time() {
    let mut c = Cluster::new();
    c.add_node(node("a", 8)).unwrap();
    let config = SchedulerConfig {
        resize: ResizeLimits {
            min_interval_ms: 0,
            max_restarts_per_hour: 0,
            growth_timeout_ms: 300_000,
        },
        ..SchedulerConfig::default()
    };
    let mut s = Scheduler::new(c, config);
    let greedy = Resizer::new(Resize::Greedy);
    let e = engine();
    let dragon = bundled(&e, "dragon", "");
    // Two workers of one GPU each (and a PS) on an 8-GPU node, up to 12.
    add_job(&mut s, "j", 0, 2, 1, 12);
    let mut io = RecordingIo::default();
    s.schedule_round(0, &dragon, &mut io, &mut RecordingIo::default());
    assert_eq!(pending_pods(&s, "j"), 0);

    // Asked for 12, it grows by the 6 free GPUs only.
    let mut scaler = RecordingIo::default();
    let r = s.scale_step(30_000, &greedy, &mut scaler);
    assert_eq!((r.actions[0].from, r.actions[0].to), (2, 8), "{r:?}");
    assert!(
        r.actions[0]
            .reason
            .ends_with("(capped at 8 workers: the rest would not fit in the free room)"),
        "{}",
        r.actions[0].reason
    );
    // Its new workers arrive, but another job takes the room first.
    let job = s.cluster().job("j").unwrap().clone();
    let template = s
        .cluster()
        .job_pods("j")
        .find(|(p, _)| p.index == 0 && p.role == dragon_framework::Role::Worker)
        .map(|(p, _)| p.clone())
        .unwrap();
    add_gang(
        &mut s,
        "other",
        1_000,
        None,
        &dragon_sim::spec::TaskSpec {
            count: 6,
            min: None,
            max: None,
            cpu: 4.0,
            memory_gib: 16.0,
            gpus: 1,
            devices: Vec::new(),
        },
    );
    s.schedule_round(31_000, &dragon, &mut io, &mut RecordingIo::default());
    for index in 2..8 {
        s.add_pod(worker_pod(&job, &template, index, None).0, None)
            .unwrap();
    }
    s.schedule_round(32_000, &dragon, &mut io, &mut RecordingIo::default());
    assert_eq!(pending_pods(&s, "j"), 6, "no room for the new workers");

    // Within the timeout the growth waits; after it, it is rolled back.
    let r = s.scale_step(60_000, &greedy, &mut scaler);
    assert!(r.actions.is_empty(), "{r:?}");
    let r = s.scale_step(330_000, &greedy, &mut scaler);
    assert_eq!((r.actions[0].from, r.actions[0].to), (8, 2), "{r:?}");
    assert_eq!(
        r.actions[0].reason,
        "growth rolled back: 6 new worker(s) found no room within 300 s"
    );
    assert_eq!(pending_pods(&s, "j"), 0);
    assert_eq!(s.cluster().job("j").unwrap().workers, 2);
}

#[test]
fn a_resize_too_soon_after_the_last_is_held_and_said_why() {
    let mut c = Cluster::new();
    c.add_node(node("a", 8)).unwrap();
    let mut s = Scheduler::new(c, SchedulerConfig::default());
    let e = engine();
    let dragon = bundled(&e, "dragon", "");
    add_job(&mut s, "j", 0, 4, 1, 4);
    s.schedule_round(
        0,
        &dragon,
        &mut RecordingIo::default(),
        &mut RecordingIo::default(),
    );
    let flip_flop = Resizer::new(Resize::FlipFlop);
    let mut scaler = RecordingIo::default();
    let r = s.scale_step(30_000, &flip_flop, &mut scaler);
    assert_eq!((r.actions[0].from, r.actions[0].to), (4, 1));
    let r = s.scale_step(60_000, &flip_flop, &mut scaler);
    assert!(r.actions.is_empty());
    assert_eq!(
        r.held[0].why,
        Held::TooSoon {
            ago_ms: 30_000,
            min_ms: 60_000
        }
    );
    assert_eq!(
        r.held[0].to_string(),
        "job j stays at 1 workers (the policy asked for 4): resized 30 s ago; resizes of a job are at least 60 s apart"
    );
}
