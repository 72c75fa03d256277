//! Shared helpers for Dragon's integration tests (`tests/tests/*.rs`): a
//! native adapter that runs a policy's Rust code through the host's
//! [`Hooks`] trait (for native-vs-wasm conformance), and loaders for the
//! bundled components.

use dragon_policy_sdk::Policy;
use dragon_policy_sdk::types as sdk;
use dragon_runtime::view::{ClusterView, Delta, JobStats, Seen};
use dragon_runtime::{
    CallError, ComponentCache, Hooks, LoadOptions, PolicyEngine, PolicyInfo, PolicySource,
    WasmPolicy, wit,
};

pub mod lift;
pub mod ops;
pub mod workload;
pub use lift::Lift;
pub use ops::Ops;

/// A policy run natively (no wasm) behind the host's [`Hooks`] trait, with
/// its view of the cluster kept by the same change log a wasm instance
/// follows.
pub struct Native<P: Policy> {
    policy: P,
    info: PolicyInfo,
    /// The policy's view and how far it has followed the cluster's log.
    view: std::sync::Mutex<(sdk::View, Option<Seen>)>,
}

impl<P: Policy> Native<P> {
    /// Configure `P` with `settings` as the host would.
    pub fn new(settings: &str) -> Native<P> {
        let mut policy = P::default();
        policy.configure_json(settings).expect("settings accepted");
        let meta = policy.info();
        let info = PolicyInfo {
            interface_version: dragon_policy_sdk::INTERFACE_VERSION.into(),
            settings: settings.into(),
            ..PolicyInfo::native(
                &meta.name,
                &meta.version,
                meta.hooks.iter().map(Lift::lift).collect(),
            )
        };
        Native {
            policy,
            info,
            view: std::sync::Mutex::new((sdk::View::default(), None)),
        }
    }

    /// Bring the view up to date with `cluster`, then run `f` with it.
    fn with_view<R>(&self, cluster: &dyn ClusterView, f: impl FnOnce(&sdk::View) -> R) -> R {
        let mut guard = self.view.lock().unwrap_or_else(|p| p.into_inner());
        let (view, seen) = &mut *guard;
        follow(view, seen, cluster);
        f(view)
    }

    /// The policy value itself.
    pub fn policy(&self) -> &P {
        &self.policy
    }
}

/// Apply to `view` what `cluster` changed since `seen`, and the queues as
/// they stand.
fn follow(view: &mut sdk::View, seen: &mut Option<Seen>, cluster: &dyn ClusterView) {
    let delta = Delta::since(cluster, *seen);
    let mut domains = Vec::new();
    view.apply(&sdk::Changes {
        reset: delta.reset,
        count: delta.count,
        nodes: delta
            .indices
            .iter()
            .map(|&index| {
                let row = cluster.node(index);
                cluster.domains(index, &mut domains);
                sdk::NodeChange {
                    index,
                    node: sdk::Node {
                        allocatable: row.allocatable.lift(),
                        free: row.free.lift(),
                        open: row.open,
                        gpu_type: cluster.gpu_type(index).map(str::to_string),
                    },
                }
            })
            .collect(),
        domains,
        levels: match delta.reset {
            true => cluster.levels().to_vec(),
            false => Vec::new(),
        },
        queues: Some(
            cluster
                .queues()
                .into_iter()
                .map(|q| sdk::Queue {
                    name: q.name,
                    parent: q.parent,
                    weight_milli: q.weight_milli,
                    guaranteed_gpus: q.guaranteed_gpus,
                    borrowing_limit_gpus: q.borrowing_limit_gpus,
                    used_gpus: q.used_gpus,
                    demand_gpus: q.demand_gpus,
                })
                .collect(),
        ),
    });
    *seen = Some(delta.seen);
}

/// The SDK's view of `cluster`, as a policy would hold it.
pub fn sdk_view(cluster: &dyn ClusterView) -> sdk::View {
    let mut view = sdk::View::default();
    follow(&mut view, &mut None, cluster);
    view
}

fn stats(s: JobStats) -> sdk::JobStats {
    sdk::JobStats {
        attained_gpu_ms: s.attained_gpu_ms,
        running_ms: s.running_ms,
        restarts: s.restarts,
        placed_workers: s.placed_workers,
        requested_workers: s.requested_workers,
        progress_permille: s.progress_permille,
        queue: s.queue,
    }
}

/// A unit in the SDK's shape, with its job's history.
pub fn unit(u: &wit::Unit, cluster: &dyn ClusterView, now_ms: u64) -> sdk::Unit {
    sdk::Unit {
        id: u.id,
        arrival_ms: u.arrival_ms,
        priority: u.priority,
        gang: u.gang,
        tasks: u.tasks.lift(),
        workers: u.workers,
        min_workers: u.min_workers,
        max_workers: u.max_workers,
        running: u.running,
        stats: stats(cluster.job_stats(now_ms, u.id)),
    }
}

/// A placement in the SDK's shape.
pub fn placement(p: &wit::Placement, cluster: &dyn ClusterView) -> sdk::Placement {
    sdk::Placement {
        unit: unit(&p.unit, cluster, p.now_ms),
        task: p.task,
        now_ms: p.now_ms,
    }
}

/// Candidates in the SDK's shape: indices, siblings where there are some,
/// and the pod's preferences (none outside a cluster's `score`).
pub fn candidates(c: &wit::Candidates, cluster: &dyn ClusterView) -> sdk::Candidates {
    sdk::Candidates {
        preference: cluster.preference().to_vec(),
        index: c.index.clone(),
        siblings: c
            .siblings
            .iter()
            .enumerate()
            .filter(|(_, n)| **n > 0)
            .map(|(i, &n)| (i as u32, n))
            .collect(),
    }
}

/// The scale step's input in the SDK's shape.
pub fn scale_input(i: &wit::ScaleInput, cluster: &dyn ClusterView) -> sdk::ScaleInput {
    let now = i.now_ms;
    sdk::ScaleInput {
        now_ms: now,
        running: i
            .running
            .iter()
            .map(|j| sdk::RunningJob {
                id: j.id,
                arrival_ms: j.arrival_ms,
                started_ms: j.started_ms,
                scaled_ms: j.scaled_ms,
                workers: j.workers,
                min_workers: j.min_workers,
                max_workers: j.max_workers,
                worker_request: j.worker_request.lift(),
                worker_nodes: j.worker_nodes.clone(),
                ps_nodes: j.ps_nodes.clone(),
                stats: stats(cluster.job_stats(now, j.id)),
                speedup: cluster.speedup(j.id).to_vec(),
            })
            .collect(),
        waiting: i
            .waiting
            .iter()
            .map(|w| sdk::WaitingJob {
                id: w.id,
                arrival_ms: w.arrival_ms,
                unit: unit(&w.unit, cluster, now),
                speedup: cluster.speedup(w.id).to_vec(),
            })
            .collect(),
        last_admit_ms: i.last_admit_ms,
        last_scale_down_ms: i.last_scale_down_ms,
    }
}

impl<P: Policy> Hooks for Native<P> {
    fn info(&self) -> &PolicyInfo {
        &self.info
    }
    fn queue_order(
        &self,
        now_ms: u64,
        units: &[wit::Queued],
        cluster: &dyn ClusterView,
    ) -> Result<Vec<u32>, CallError> {
        let units: Vec<sdk::Queued> = units
            .iter()
            .map(|q| sdk::Queued {
                id: q.id,
                arrival_ms: q.arrival_ms,
                priority: q.priority,
                pods: q.pods,
                total: q.total.lift(),
                stats: stats(cluster.job_stats(now_ms, q.id)),
            })
            .collect();
        Ok(self.with_view(cluster, |v| self.policy.queue_order(now_ms, &units, v)))
    }
    fn pre_filter(
        &self,
        now_ms: u64,
        u: &wit::Unit,
        _nodes: &wit::Capacity,
        cluster: &dyn ClusterView,
    ) -> Result<wit::PreFilterResult, CallError> {
        let u = unit(u, cluster, now_ms);
        Ok(self
            .with_view(cluster, |v| self.policy.pre_filter(now_ms, &u, v))
            .lift())
    }
    fn filter(
        &self,
        pod: &wit::Placement,
        nodes: &wit::Candidates,
        cluster: &dyn ClusterView,
    ) -> Result<Vec<bool>, CallError> {
        let (pod, c) = (placement(pod, cluster), candidates(nodes, cluster));
        Ok(self.with_view(cluster, |v| self.policy.filter(&pod, &c, v)))
    }
    fn score(
        &self,
        pod: &wit::Placement,
        nodes: &wit::Candidates,
        cluster: &dyn ClusterView,
    ) -> Result<Vec<u32>, CallError> {
        let (pod, c) = (placement(pod, cluster), candidates(nodes, cluster));
        Ok(self.with_view(cluster, |v| self.policy.score(&pod, &c, v)))
    }
    fn permit(&self, now_ms: u64, gang: &wit::GangState) -> Result<wit::PermitResult, CallError> {
        Ok(self.policy.permit(now_ms, &gang.lift()).lift())
    }
    fn scale(
        &self,
        input: &wit::ScaleInput,
        cluster: &dyn ClusterView,
    ) -> Result<Vec<wit::ScaleDecision>, CallError> {
        let input = scale_input(input, cluster);
        Ok(self
            .with_view(cluster, |v| self.policy.scale(&input, v))
            .lift())
    }
}

/// The bundled `dragon` as built against interface 0.1 (see
/// `tests/fixtures/interface-0.1`).
pub const DRAGON_V0_1: &[u8] = include_bytes!("../fixtures/interface-0.1/dragon.wasm");
/// The bundled `baseline` as built against interface 0.1.
pub const BASELINE_V0_1: &[u8] = include_bytes!("../fixtures/interface-0.1/baseline.wasm");
/// The bundled `dragon` as built against interface 0.2 (see
/// `tests/fixtures/interface-0.2`).
pub const DRAGON_V0_2: &[u8] = include_bytes!("../fixtures/interface-0.2/dragon.wasm");
/// The bundled `baseline` as built against interface 0.2.
pub const BASELINE_V0_2: &[u8] = include_bytes!("../fixtures/interface-0.2/baseline.wasm");
/// The bundled `dragon` as built against interface 0.3 (see
/// `tests/fixtures/interface-0.3`).
pub const DRAGON_V0_3: &[u8] = include_bytes!("../fixtures/interface-0.3/dragon.wasm");
/// The bundled `baseline` as built against interface 0.3.
pub const BASELINE_V0_3: &[u8] = include_bytes!("../fixtures/interface-0.3/baseline.wasm");

/// A fresh engine (each test gets its own epoch ticker).
pub fn engine() -> PolicyEngine {
    PolicyEngine::new().expect("engine")
}

/// Load bundled or test component bytes with `settings` and no cache.
pub fn load(
    engine: &PolicyEngine,
    origin: &str,
    bytes: &[u8],
    options: &LoadOptions,
) -> WasmPolicy {
    WasmPolicy::from_bytes(engine, &ComponentCache::disabled(), origin, bytes, options)
        .unwrap_or_else(|e| panic!("loading {origin}: {e}"))
}

/// Load a bundled policy by name with `settings`.
pub fn bundled(engine: &PolicyEngine, name: &str, settings: &str) -> WasmPolicy {
    let options = LoadOptions {
        settings: settings.into(),
        ..Default::default()
    };
    WasmPolicy::load(
        engine,
        &ComponentCache::disabled(),
        &PolicySource::named_or_file(name),
        &options,
    )
    .unwrap_or_else(|e| panic!("loading {name}: {e}"))
}

/// The hostile test policy configured with `settings`.
pub fn hostile(
    engine: &PolicyEngine,
    settings: &str,
    options: LoadOptions,
) -> Result<WasmPolicy, dragon_runtime::LoadError> {
    let options = LoadOptions {
        settings: settings.into(),
        ..options
    };
    WasmPolicy::from_bytes(
        engine,
        &ComponentCache::disabled(),
        "hostile.wasm",
        dragon_test_policies::HOSTILE,
        &options,
    )
}

/// One lone 1-CPU/1-GPU pod and `n` candidate nodes with varied free room:
/// the input most hook tests need.
pub fn lone_pod_on(n: usize) -> (wit::Placement, wit::Candidates) {
    let request = wit::Resources {
        cpu_milli: 1000,
        memory_mib: 1024,
        gpus: 1,
    };
    let unit = wit::Unit {
        id: 1,
        arrival_ms: 0,
        priority: 0,
        gang: false,
        tasks: vec![wit::Task {
            role: wit::Role::Other,
            index: 0,
            request,
        }],
        workers: 0,
        min_workers: 0,
        max_workers: 0,
        running: 0,
    };
    let capacity = wit::Capacity {
        alloc_cpu_milli: vec![8000; n],
        alloc_memory_mib: vec![8192; n],
        alloc_gpus: vec![4; n],
        free_cpu_milli: (0..n as u64).map(|i| 1000 + i * 100).collect(),
        free_memory_mib: vec![8192; n],
        free_gpus: (0..n as u32).map(|i| 1 + i % 4).collect(),
    };
    (
        wit::Placement {
            unit,
            task: 0,
            now_ms: 0,
        },
        wit::Candidates {
            index: (0..n as u32).collect(),
            capacity,
            siblings: vec![0; n],
        },
    )
}

/// Why a round left `unit` pending, as users read it (empty if it did not).
pub fn unschedulable(
    decisions: &[dragon_framework::Decision],
    unit: &dragon_framework::UnitKey,
) -> String {
    decisions
        .iter()
        .find_map(|d| match d {
            dragon_framework::Decision::Unschedulable { unit: u, reason } if u == unit => {
                Some(reason.to_string())
            }
            _ => None,
        })
        .unwrap_or_default()
}

/// A declared gang (a PodGroup's) of exactly `workers` workers.
pub fn declared_job(name: &str, workers: u32) -> dragon_framework::Job {
    dragon_framework::Job {
        declared: true,
        ..dragon_framework::Job::gang(name, workers)
    }
}

/// Add a PS/worker job (one 2-CPU PS, `workers` 4-CPU/1-GPU workers with
/// elastic bounds `min..=max`) and its pending pods to `cluster` (a
/// cluster being built, or a scheduler's).
pub fn add_job(
    cluster: &mut impl Ops,
    name: &str,
    arrival_ms: u64,
    workers: u32,
    min: u32,
    max: u32,
) {
    use dragon_sim::spec::TaskSpec;
    let w = TaskSpec {
        count: workers,
        min: Some(min),
        max: Some(max),
        cpu: 4.0,
        memory_gib: 16.0,
        gpus: 1,
        devices: Vec::new(),
    };
    let ps = TaskSpec {
        count: 1,
        min: None,
        max: None,
        cpu: 2.0,
        memory_gib: 8.0,
        gpus: 0,
        devices: Vec::new(),
    };
    add_gang(cluster, name, arrival_ms, Some(&ps), &w);
}

/// Add a job with any PS and worker shapes (as a trace or case file writes
/// them) and its pending pods to `cluster`; returns the worker pod template
/// a driver clones for scale-ups.
pub fn add_gang(
    cluster: &mut impl Ops,
    name: &str,
    arrival_ms: u64,
    ps: Option<&dragon_sim::spec::TaskSpec>,
    workers: &dragon_sim::spec::TaskSpec,
) -> dragon_framework::Pod {
    let jp =
        dragon_sim::spec::job_pods("test", name, arrival_ms, 0, ps, workers).expect("a valid job");
    let template = jp
        .pods
        .iter()
        .find(|p| p.role == dragon_framework::Role::Worker)
        .cloned()
        .expect("a job has workers");
    cluster.upsert_job(jp.job);
    for p in jp.pods {
        cluster.add_pod(p, None).expect("a new pod");
    }
    template
}

/// How many pods of `job` are pending in `s`.
pub fn pending_pods(s: &dragon_framework::Scheduler, job: &str) -> usize {
    s.cluster()
        .job_pods(job)
        .filter(|(_, st)| *st == dragon_framework::PodState::Pending)
        .count()
}

/// What `f` writes to the log (every level, no colour codes), with what it
/// returns: tests read the lines as a user of `dragon` would.
pub fn logged<R>(f: impl FnOnce() -> R) -> (R, String) {
    #[derive(Clone, Default)]
    struct Buffer(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);
    impl std::io::Write for Buffer {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let buffer = Buffer::default();
    let writer = buffer.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .finish();
    let out = tracing::subscriber::with_default(subscriber, f);
    let bytes = buffer.0.lock().unwrap_or_else(|p| p.into_inner()).clone();
    (out, String::from_utf8_lossy(&bytes).into_owned())
}
