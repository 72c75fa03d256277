//! The inputs every benchmark shares: a gang's worker before `n` nodes of
//! varied free room, a scale pass over running and waiting jobs, a cluster
//! of identical nodes with pending jobs to schedule to the end, and a full
//! one a higher-priority gang must preempt in.
//! `dragon-bench`, the divan timings and the callgrind instruction counts
//! all measure these, so their figures speak of the same work.

use anyhow::Result;
use dragon_framework::record::{Frame, Recorder};
use dragon_framework::{
    Answers, Cluster, Decision, Node, NodeName, PodState, RecordingIo, Resources, Scheduler,
    SchedulerConfig,
};
use dragon_runtime::{Hooks, wit};
use dragon_sim::spec::{TaskSpec, job_pods};

use crate::{Ops, add_gang};

/// A gang's worker (of four, with a parameter server) about to be placed
/// on `n` nodes of varied free room; every 97th node holds a sibling.
pub fn placement(n: usize) -> (wit::Placement, wit::Candidates) {
    let r = wit::Resources {
        cpu_milli: 4000,
        memory_mib: 16384,
        gpus: 1,
    };
    let mut tasks: Vec<wit::Task> = (0..4)
        .map(|index| wit::Task {
            role: wit::Role::Worker,
            index,
            request: r,
        })
        .collect();
    tasks.push(wit::Task {
        role: wit::Role::Ps,
        index: 0,
        request: wit::Resources {
            cpu_milli: 2000,
            memory_mib: 8192,
            gpus: 0,
        },
    });
    let unit = wit::Unit {
        id: 1,
        arrival_ms: 0,
        priority: 0,
        gang: true,
        tasks,
        workers: 4,
        min_workers: 2,
        max_workers: 8,
        running: 0,
    };
    (
        wit::Placement {
            unit,
            task: 0,
            now_ms: 0,
        },
        wit::Candidates {
            index: (0..n as u32).collect(),
            capacity: capacity(n),
            siblings: (0..n as u32).map(|i| u32::from(i % 97 == 0)).collect(),
        },
    )
}

/// `n` 32-CPU/8-GPU nodes, each partly used by a different amount.
pub fn capacity(n: usize) -> wit::Capacity {
    wit::Capacity {
        alloc_cpu_milli: vec![32_000; n],
        alloc_memory_mib: vec![131_072; n],
        alloc_gpus: vec![8; n],
        free_cpu_milli: (0..n as u64).map(|i| 8_000 + (i * 7919) % 24_000).collect(),
        free_memory_mib: (0..n as u64)
            .map(|i| 32_768 + (i * 104_729) % 98_304)
            .collect(),
        free_gpus: (0..n as u32).map(|i| 1 + (i * 31) % 8).collect(),
    }
}

/// Every node of `c` as the candidates of a pod, with their columns.
pub fn all_candidates(c: &Cluster) -> wit::Candidates {
    use dragon_runtime::ClusterView;
    let n = c.node_count();
    let rows: Vec<_> = (0..n).map(|i| c.node(i)).collect();
    wit::Candidates {
        index: (0..n).collect(),
        capacity: wit::Capacity {
            alloc_cpu_milli: rows.iter().map(|r| r.allocatable.cpu_milli).collect(),
            alloc_memory_mib: rows.iter().map(|r| r.allocatable.memory_mib).collect(),
            alloc_gpus: rows.iter().map(|r| r.allocatable.gpus).collect(),
            free_cpu_milli: rows.iter().map(|r| r.free.cpu_milli).collect(),
            free_memory_mib: rows.iter().map(|r| r.free.memory_mib).collect(),
            free_gpus: rows.iter().map(|r| r.free.gpus).collect(),
        },
        siblings: vec![0; n as usize],
    }
}

/// A scale pass: `jobs` running elastic jobs of four workers on `n` nodes
/// and a quarter as many waiting.
pub fn scale_input(jobs: usize, n: usize) -> wit::ScaleInput {
    let (pod, _) = placement(1);
    wit::ScaleInput {
        now_ms: 3_600_000,
        running: (0..jobs as u64)
            .map(|id| wit::RunningJob {
                id,
                arrival_ms: id * 1000,
                started_ms: id * 1000 + 500,
                scaled_ms: 0,
                workers: 4,
                min_workers: 2,
                max_workers: 8,
                worker_request: pod.unit.tasks[0].request,
                worker_nodes: (0..4).map(|w| ((id as u32) * 4 + w) % n as u32).collect(),
                ps_nodes: vec![(id as u32 * 4) % n as u32],
            })
            .collect(),
        waiting: (0..jobs as u64 / 4)
            .map(|id| wit::WaitingJob {
                id: 10_000 + id,
                arrival_ms: 3_000_000,
                unit: wit::Unit {
                    id: 10_000 + id,
                    ..pod.unit.clone()
                },
            })
            .collect(),
        nodes: capacity(n),
        last_admit_ms: 3_000_000,
        last_scale_down_ms: 0,
    }
}

/// `nodes` empty 32-CPU/8-GPU nodes.
pub fn cluster(nodes: usize) -> Cluster {
    let mut c = Cluster::new();
    for i in 0..nodes {
        let node = Node::new(
            format!("node-{i:05}"),
            Resources {
                cpu_milli: 32_000,
                memory_mib: 131_072,
                gpus: 8,
            },
        );
        c.add_node(node).expect("unique node names");
    }
    c
}

/// `count` 1-CPU/1-GPU workers of a job without elastic bounds.
pub fn worker_spec(count: u32) -> TaskSpec {
    TaskSpec {
        count,
        min: None,
        max: None,
        cpu: 1.0,
        memory_gib: 2.0,
        gpus: 1,
        devices: Vec::new(),
    }
}

/// A scheduler without backoff or round budget over `nodes` nodes and
/// `jobs` pending jobs of `per_job` workers each (one worker: a lone pod).
/// Without a budget a slow run (under callgrind, on a loaded machine) does
/// the same work in the same rounds as a fast one, so counts repeat.
pub fn pending(nodes: usize, jobs: usize, per_job: u32) -> Scheduler {
    let config = SchedulerConfig {
        round_budget_ms: 0,
        ..SchedulerConfig::without_backoff()
    };
    let mut s = Scheduler::new(cluster(nodes), config);
    for j in 0..jobs {
        add_gang(
            &mut s,
            &format!("job-{j:05}"),
            j as u64,
            None,
            &worker_spec(per_job),
        );
    }
    s
}

/// [`pending`] as dragon-scheduler sees a labelled pool: every node
/// carries `pool=train` and every pod selects it, so the built-in filters
/// take their path for pods with a node selector.
pub fn pending_selected(nodes: usize, jobs: usize, per_job: u32) -> Scheduler {
    let mut s = pending(nodes, 0, per_job);
    for i in 0..nodes {
        let mut node = s.cluster().nodes()[i].clone();
        node.labels.insert("pool".into(), "train".into());
        s.update_node(node).expect("a known node");
    }
    for j in 0..jobs {
        let name = format!("job-{j:05}");
        let jp =
            job_pods("test", &name, j as u64, 0, None, &worker_spec(per_job)).expect("a valid job");
        s.upsert_job(jp.job);
        for mut p in jp.pods {
            p.node_selector.insert("pool".into(), "train".into());
            s.add_pod(p, None).expect("a new pod");
        }
    }
    s
}

/// Full rounds (queue → … → bind to memory) until every pending pod is
/// bound; the number bound. A policy error or a pod left over is an error:
/// a benchmark must not measure a run that went wrong.
pub fn schedule_all(s: &mut Scheduler, policy: &dyn Hooks) -> Result<usize> {
    schedule_all_recorded(s, policy, None)
}

/// [`schedule_all`], each round written to `recorder` as dragon-scheduler's
/// flight recorder writes it: the first frame's changes rebuild the
/// cluster, the later ones are the journal (empty here), every frame
/// flushed to the file.
pub fn schedule_all_recorded(
    s: &mut Scheduler,
    policy: &dyn Hooks,
    mut recorder: Option<&mut Recorder>,
) -> Result<usize> {
    if recorder.is_some() {
        s.keep_journal(true);
    }
    let total = s
        .cluster()
        .pods()
        .filter(|(_, state)| *state == PodState::Pending)
        .count();
    let mut bound = 0usize;
    for round in 0..10 {
        let ops = match (&recorder, round) {
            (None, _) => Vec::new(),
            (Some(_), 0) => s.cluster().as_ops(),
            (Some(_), _) => s.take_journal(),
        };
        let mut io = RecordingIo::default();
        let report = s.schedule_round(round, policy, &mut io, &mut RecordingIo::default());
        if let Some(r) = recorder.as_deref_mut() {
            r.frame(&Frame::round(
                round,
                &ops,
                &Answers::default(),
                &report.decisions,
            ))?;
            r.flush()?;
        }
        if let Some(Decision::PolicyError { error, .. }) = report
            .decisions
            .iter()
            .find(|d| matches!(d, Decision::PolicyError { .. }))
        {
            anyhow::bail!("{}: {error}", policy.info().name);
        }
        bound += io.binds.len();
        if bound >= total {
            break;
        }
    }
    anyhow::ensure!(
        bound == total,
        "{}: bound {bound} of {total}",
        policy.info().name
    );
    Ok(bound)
}

/// `nodes` nodes each full with a running gang of 8 one-GPU workers
/// (priority 0, the later the index the later it arrived), and a pending
/// gang `urgent` (priority 100) of 8 workers of 8 GPUs: it fits only where
/// 8 gangs are evicted.
pub fn crowded(nodes: usize) -> Scheduler {
    let mut s = pending(nodes, 0, 0);
    let names: Vec<NodeName> = s.cluster().nodes().iter().map(|n| n.name.clone()).collect();
    for (j, node) in names.iter().enumerate() {
        let jp = dragon_sim::spec::job_pods(
            "bench",
            &format!("run-{j:05}"),
            j as u64,
            0,
            None,
            &worker_spec(8),
        )
        .expect("a valid job");
        s.upsert_job(jp.job);
        for p in jp.pods {
            s.add_pod(p, Some(node)).expect("a new pod");
        }
    }
    let urgent = TaskSpec {
        gpus: 8,
        ..worker_spec(8)
    };
    let jp = dragon_sim::spec::job_pods("bench", "urgent", nodes as u64, 100, None, &urgent)
        .expect("a valid job");
    s.upsert_job(jp.job);
    for p in jp.pods {
        s.add_pod(p, None).expect("a new pod");
    }
    s
}

/// One round of [`crowded`]: the victims it chose.
pub fn preempt(s: &mut Scheduler, policy: &dyn Hooks) -> Result<usize> {
    let mut io = RecordingIo::default();
    let report = s.schedule_round(1_000_000, policy, &mut io, &mut RecordingIo::default());
    let victims = report
        .decisions
        .iter()
        .find_map(|d| match d {
            Decision::Preempting { evicted, .. } => Some(evicted.len()),
            _ => None,
        })
        .unwrap_or(0);
    anyhow::ensure!(
        victims == 8,
        "{}: {victims} victims, not 8: {:?}",
        policy.info().name,
        report.decisions
    );
    Ok(victims)
}

/// The devices every node publishes in [`pending_claiming`]: eight A100s
/// of 80 GiB.
const DEVICES_PER_NODE: usize = 8;

/// The label [`in_racks`] puts nodes in racks with.
pub const RACK: &str = "example.com/rack";

/// `s` with its nodes split into `racks` racks of consecutive nodes (label
/// [`RACK`], a topology level) and every job required to stay in one.
pub fn in_racks(mut s: Scheduler, racks: usize) -> Scheduler {
    use dragon_framework::{ClusterOp, TopologyConstraint};
    let nodes: Vec<Node> = s.cluster().nodes().to_vec();
    let per_rack = nodes.len().div_ceil(racks.max(1));
    for (i, mut node) in nodes.into_iter().enumerate() {
        node.labels
            .insert(RACK.to_string(), format!("rack-{:03}", i / per_rack));
        s.update_node(node).expect("a node of the cluster");
    }
    s.op(ClusterOp::SetTopologyLevels(vec![RACK.to_string()]))
        .expect("one level");
    let jobs: Vec<_> = s.cluster().jobs().cloned().collect();
    for mut job in jobs {
        job.topology = Some(TopologyConstraint::required(RACK));
        s.upsert_job(job);
    }
    s
}

/// [`pending`] with every GPU also published as a device of a
/// ResourceSlice (eight per node, driver `gpu.example.com`, a model
/// attribute and a memory capacity), a DeviceClass selecting A100s by CEL,
/// and every worker claiming one device of at least 40 GiB through a claim
/// of its own: the same placements, with the allocator's work added.
pub fn pending_claiming(nodes: usize, jobs: usize, per_job: u32) -> Scheduler {
    use dragon_framework::ClusterOp;
    use dragon_framework::devices::{
        Attribute, Claim, Device, DeviceClass, Quantity, Request, ResourceSlice,
    };
    const DRIVER: &str = "gpu.example.com";
    let config = SchedulerConfig {
        round_budget_ms: 0,
        ..SchedulerConfig::without_backoff()
    };
    let mut s = Scheduler::new(cluster(nodes), config);
    for i in 0..nodes {
        let node = format!("node-{i:05}");
        let devices = (0..DEVICES_PER_NODE)
            .map(|d| {
                let mut device = Device::new(format!("gpu-{d}"));
                device
                    .attributes
                    .insert("model".into(), Attribute::String("a100".into()));
                device
                    .capacity
                    .insert("memory".into(), Quantity((80u64 << 30) * 1000));
                device
            })
            .collect();
        s.op(ClusterOp::SetResourceSlice {
            name: format!("{node}-gpus"),
            slice: ResourceSlice::on_node(DRIVER, &node, &node, devices),
        })
        .expect("a slice");
    }
    s.op(ClusterOp::SetDeviceClass(DeviceClass {
        name: "a100".into(),
        selectors: vec![format!(
            "device.driver == \"{DRIVER}\" && device.attributes[\"{DRIVER}\"].model == \"a100\""
        )],
        extended_resource: None,
        ..DeviceClass::default()
    }))
    .expect("a class");
    for j in 0..jobs {
        let jp = dragon_sim::spec::job_pods(
            "bench",
            &format!("job-{j:05}"),
            j as u64,
            0,
            None,
            &worker_spec(per_job),
        )
        .expect("a valid job");
        s.upsert_job(jp.job);
        for mut pod in jp.pods {
            let claim = format!("{}-gpu", pod.key);
            let memory =
                format!("device.capacity[\"{DRIVER}\"].memory.compareTo(quantity(\"40Gi\")) >= 0");
            s.op(ClusterOp::SetClaim(Claim::new(
                claim.clone(),
                vec![Request::exactly("gpu", "a100", 1, &[&memory])],
            )))
            .expect("a claim");
            pod.claims = vec![claim];
            s.add_pod(pod, None).expect("a new pod");
        }
    }
    s
}
