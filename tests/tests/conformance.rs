//! The same fixtures give identical decisions natively and through wasm,
//! hook by hook and through whole scheduling rounds.

use baseline_policy::Baseline;
use dragon_framework::{Cluster, Node, RecordingIo, Resources, Scheduler, SchedulerConfig};
use dragon_policy::Dragon;
use dragon_runtime::LoadOptions;
use dragon_runtime::{FixedView, Hooks, wit};
use dragon_tests::{
    BASELINE_V0_1, BASELINE_V0_3, DRAGON_V0_1, DRAGON_V0_3, Native, add_job, bundled, engine, load,
};

/// A small deterministic generator (no dependency needed for fixtures).
struct Lcg(u64);
impl Lcg {
    fn next(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) % n.max(1)
    }
}

fn capacity(rng: &mut Lcg, n: usize) -> wit::Capacity {
    let mut c = wit::Capacity {
        alloc_cpu_milli: vec![],
        alloc_memory_mib: vec![],
        alloc_gpus: vec![],
        free_cpu_milli: vec![],
        free_memory_mib: vec![],
        free_gpus: vec![],
    };
    for _ in 0..n {
        let (cpu, mem, gpu) = (32_000, 131_072, [4u32, 8][rng.next(2) as usize]);
        c.alloc_cpu_milli.push(cpu);
        c.alloc_memory_mib.push(mem);
        c.alloc_gpus.push(gpu);
        c.free_cpu_milli.push(rng.next(cpu + 1));
        c.free_memory_mib.push(rng.next(mem + 1));
        c.free_gpus.push(rng.next(gpu as u64 + 1) as u32);
    }
    c
}

fn unit(rng: &mut Lcg, id: u64) -> wit::Unit {
    let workers = 1 + rng.next(8) as u32;
    let min = 1 + rng.next(workers as u64) as u32;
    let w = wit::Resources {
        cpu_milli: 2000 + rng.next(4000),
        memory_mib: 4096 + rng.next(16384),
        gpus: 1,
    };
    let ps = wit::Resources {
        cpu_milli: 2000,
        memory_mib: 8192,
        gpus: 0,
    };
    let mut tasks: Vec<wit::Task> = (0..workers)
        .map(|index| wit::Task {
            role: wit::Role::Worker,
            index,
            request: w,
        })
        .collect();
    tasks.push(wit::Task {
        role: wit::Role::Ps,
        index: 0,
        request: ps,
    });
    wit::Unit {
        id,
        arrival_ms: rng.next(100_000),
        priority: 0,
        gang: true,
        tasks,
        workers,
        min_workers: min,
        max_workers: workers + rng.next(4) as u32,
        running: 0,
    }
}

fn check_hooks(native: &dyn Hooks, wasm: &dyn Hooks) {
    let mut rng = Lcg(7);
    for case in 0..200u64 {
        let n = 1 + rng.next(40) as usize;
        let cap = capacity(&mut rng, n);
        let view = FixedView::from_capacity(&cap);
        let u = unit(&mut rng, case);
        assert_eq!(
            native.pre_filter(case, &u, &cap, &view).unwrap(),
            wasm.pre_filter(case, &u, &cap, &view).unwrap(),
            "pre-filter case {case}"
        );
        let task = rng.next(u.tasks.len() as u64) as u32;
        let pod = wit::Placement {
            unit: u.clone(),
            task,
            now_ms: case,
        };
        let cands = wit::Candidates {
            index: (0..n as u32).collect(),
            capacity: cap.clone(),
            siblings: (0..n).map(|_| rng.next(3) as u32).collect(),
        };
        assert_eq!(
            native.filter(&pod, &cands, &view).unwrap(),
            wasm.filter(&pod, &cands, &view).unwrap(),
            "filter case {case}"
        );
        assert_eq!(
            native.score(&pod, &cands, &view).unwrap(),
            wasm.score(&pod, &cands, &view).unwrap(),
            "score case {case}"
        );
        let gang = wit::GangState {
            id: case,
            reserved: rng.next(10) as u32,
            min_member: rng.next(10) as u32,
            present: 10,
            waited_ms: rng.next(120_000),
        };
        assert_eq!(
            native.permit(case, &gang).unwrap(),
            wasm.permit(case, &gang).unwrap(),
            "permit case {case}"
        );
        let queued: Vec<wit::Queued> = (0..rng.next(10))
            .map(|i| wit::Queued {
                id: i,
                arrival_ms: rng.next(1000),
                priority: rng.next(3) as i32,
                pods: 1,
                total: wit::Resources {
                    cpu_milli: 1,
                    memory_mib: 1,
                    gpus: 1,
                },
            })
            .collect();
        assert_eq!(
            native.queue_order(case, &queued, &view).unwrap(),
            wasm.queue_order(case, &queued, &view).unwrap()
        );
        let running: Vec<wit::RunningJob> = (0..rng.next(4))
            .map(|i| {
                let workers = 1 + rng.next(6) as u32;
                wit::RunningJob {
                    id: 100 + i,
                    arrival_ms: 0,
                    started_ms: 0,
                    scaled_ms: 0,
                    workers,
                    min_workers: 1,
                    max_workers: workers + 2,
                    worker_request: wit::Resources {
                        cpu_milli: 1000,
                        memory_mib: 1024,
                        gpus: 1,
                    },
                    worker_nodes: (0..workers).map(|_| rng.next(n as u64) as u32).collect(),
                    ps_nodes: vec![rng.next(n as u64) as u32],
                }
            })
            .collect();
        let input = wit::ScaleInput {
            now_ms: rng.next(400_000),
            running,
            waiting: (0..rng.next(3))
                .map(|i| wit::WaitingJob {
                    id: 200 + i,
                    arrival_ms: 0,
                    unit: unit(&mut rng, 200 + i),
                })
                .collect(),
            nodes: cap,
            last_admit_ms: rng.next(100_000),
            last_scale_down_ms: 0,
        };
        assert_eq!(
            native.scale(&input, &view).unwrap(),
            wasm.scale(&input, &view).unwrap(),
            "scale case {case}"
        );
    }
}

#[test]
fn dragon_hooks_agree_natively_and_through_wasm() {
    let e = engine();
    check_hooks(&Native::<Dragon>::new(""), &bundled(&e, "dragon", ""));
}

#[test]
fn baseline_hooks_agree_natively_and_through_wasm() {
    let e = engine();
    check_hooks(&Native::<Baseline>::new(""), &bundled(&e, "baseline", ""));
}

/// Components built against interfaces 0.1 and 0.3 decide as the same
/// policies built against 0.4, on the same corpus.
#[test]
fn earlier_interface_builds_agree_with_the_current_builds_hook_by_hook() {
    let e = engine();
    for (name, bytes, version) in [
        ("dragon", DRAGON_V0_1, "0.1.0"),
        ("baseline", BASELINE_V0_1, "0.1.0"),
        ("dragon", DRAGON_V0_3, "0.3.0"),
        ("baseline", BASELINE_V0_3, "0.3.0"),
    ] {
        let old = load(&e, name, bytes, &LoadOptions::default());
        assert_eq!(old.info().interface_version, version);
        check_hooks(&old, &bundled(&e, name, ""));
    }
}

fn cluster(rng: &mut Lcg) -> Scheduler {
    let mut c = Cluster::new();
    for i in 0..12 {
        let gpus = [4, 8][rng.next(2) as usize];
        c.add_node(Node::new(
            format!("n{i}"),
            Resources {
                cpu_milli: 32_000,
                memory_mib: 131_072,
                gpus,
            },
        ))
        .unwrap();
    }
    for j in 0..25 {
        let count = 1 + rng.next(8) as u32;
        let min = 1 + rng.next(count as u64) as u32;
        let arrival = rng.next(10_000);
        add_job(&mut c, &format!("job{j}"), arrival, count, min, count + 2);
    }
    Scheduler::new(c, SchedulerConfig::default())
}

#[test]
fn whole_rounds_bind_the_same_pods_natively_and_through_wasm() {
    let e = engine();
    let policies: Vec<(Box<dyn Hooks>, Box<dyn Hooks>)> = vec![
        (
            Box::new(Native::<Dragon>::new("")),
            Box::new(bundled(&e, "dragon", "")),
        ),
        (
            Box::new(Native::<Baseline>::new("")),
            Box::new(bundled(&e, "baseline", "")),
        ),
    ];
    for (native, wasm) in policies {
        let (mut a, mut b) = (cluster(&mut Lcg(3)), cluster(&mut Lcg(3)));
        let (mut io_a, mut io_b) = (RecordingIo::default(), RecordingIo::default());
        let ra = a.schedule_round(
            20_000,
            native.as_ref(),
            &mut io_a,
            &mut RecordingIo::default(),
        );
        let rb = b.schedule_round(
            20_000,
            wasm.as_ref(),
            &mut io_b,
            &mut RecordingIo::default(),
        );
        assert_eq!(ra.decisions, rb.decisions, "{}", native.info().name);
        assert!(!io_a.binds.is_empty());
        assert_eq!(io_a.binds, io_b.binds);
        let sa = a.scale_step(400_000, native.as_ref(), &mut RecordingIo::default());
        let sb = b.scale_step(400_000, wasm.as_ref(), &mut RecordingIo::default());
        assert_eq!(sa.actions, sb.actions);
    }
}

/// Teams on the generated multi-team mix: `fair-share` (which reads the
/// queues, each job's queue and the topology levels of interface 0.3)
/// simulates to the same summary, job by job, natively and through wasm.
#[test]
fn fair_share_simulates_the_same_natively_and_through_wasm() {
    use dragon_sim::{GenerateOptions, Mix, Racks, SimOptions, Summary, Trace, generate, simulate};
    let text = generate(&GenerateOptions {
        seed: 5,
        nodes: 8,
        gpus_per_node: 8,
        jobs: 120,
        load: 1.1,
        elastic_share: 0.5,
        mix: Mix::Philly,
        racks: Racks::default(),
        tiers: false,
        teams: 3,
    })
    .expect("generated");
    let trace = Trace::parse(&text, "teams", false).expect("parsed");
    assert_eq!(trace.queues.len(), 3);
    let e = engine();
    let native = simulate(
        &trace,
        &Native::<fair_share_policy::FairShare>::new(""),
        SimOptions::default(),
        None,
    );
    let wasm = simulate(
        &trace,
        &bundled(&e, "fair-share", ""),
        SimOptions::default(),
        None,
    );
    let json = |r: &dragon_sim::SimRun| serde_json::to_string(&Summary::of(r)).unwrap();
    assert_eq!(json(&native), json(&wasm));
    assert_eq!(native.jobs, wasm.jobs);
}
