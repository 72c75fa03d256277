//! Shared helpers for Dragon's integration tests (`tests/tests/*.rs`): a
//! native adapter that runs a policy's Rust code through the host's
//! [`Hooks`] trait (for native-vs-wasm conformance), and loaders for the
//! bundled components.

use dragon_host::runtime::{
    CallError, ComponentCache, Hooks, LoadOptions, PolicyEngine, PolicyInfo, PolicySource,
    WasmPolicy, wit,
};
use dragon_policy_sdk::Policy;
use serde::Serialize;
use serde::de::DeserializeOwned;

pub mod lift;
pub mod workload;
pub use lift::Lift;

/// Convert between the host's and the SDK's generated types: both are
/// generated from the same WIT with serde derives, so JSON maps one to the
/// other field for field.
pub fn convert<A: Serialize, B: DeserializeOwned>(a: &A) -> B {
    serde_json::from_value(serde_json::to_value(a).expect("serialize")).expect("same WIT shape")
}

/// A policy run natively (no wasm) behind the host's [`Hooks`] trait.
pub struct Native<P: Policy> {
    policy: P,
    info: PolicyInfo,
    /// The SDK-typed candidate columns, refilled per call rather than
    /// allocated: native is the yardstick for wasm, so it should not pay for
    /// fresh 5,000-node buffers (and their page faults) the host never pays.
    columns: std::sync::Mutex<Option<dragon_policy_sdk::types::Candidates>>,
}

impl<P: Policy> Native<P> {
    /// Configure `P` with `settings` as the host would.
    pub fn new(settings: &str) -> Native<P> {
        let mut policy = P::default();
        policy.configure(settings).expect("settings accepted");
        let meta = policy.metadata();
        let info = PolicyInfo {
            name: meta.name.clone(),
            version: meta.version.clone(),
            interface_version: dragon_policy_sdk::INTERFACE_VERSION.into(),
            hooks: convert(&meta.hooks),
            origin: "native".into(),
            sha256: String::new(),
            size_bytes: 0,
            compile_ms: 0.0,
            cached: false,
            settings: settings.into(),
        };
        Native {
            policy,
            info,
            columns: std::sync::Mutex::new(None),
        }
    }

    /// `nodes` in the SDK's types, in reused buffers, for `f`.
    fn with_columns<R>(
        &self,
        nodes: &wit::Candidates,
        f: impl FnOnce(&dragon_policy_sdk::types::Candidates) -> R,
    ) -> R {
        fn refill<T: Copy>(to: &mut Vec<T>, from: &[T]) {
            to.clear();
            to.extend_from_slice(from);
        }
        let mut guard = self.columns.lock().unwrap_or_else(|p| p.into_inner());
        let c = guard.get_or_insert_with(|| nodes.lift());
        let (to, from) = (&mut c.capacity, &nodes.capacity);
        refill(&mut to.alloc_cpu_milli, &from.alloc_cpu_milli);
        refill(&mut to.alloc_memory_mib, &from.alloc_memory_mib);
        refill(&mut to.alloc_gpus, &from.alloc_gpus);
        refill(&mut to.free_cpu_milli, &from.free_cpu_milli);
        refill(&mut to.free_memory_mib, &from.free_memory_mib);
        refill(&mut to.free_gpus, &from.free_gpus);
        refill(&mut c.index, &nodes.index);
        refill(&mut c.siblings, &nodes.siblings);
        f(c)
    }

    /// The policy value itself.
    pub fn policy(&self) -> &P {
        &self.policy
    }
}

impl<P: Policy> Hooks for Native<P> {
    fn info(&self) -> &PolicyInfo {
        &self.info
    }
    fn queue_order(&self, now_ms: u64, units: &[wit::Queued]) -> Result<Vec<u32>, CallError> {
        let units: Vec<dragon_policy_sdk::types::Queued> = units.iter().map(Lift::lift).collect();
        Ok(self.policy.queue_order(now_ms, &units))
    }
    fn pre_filter(
        &self,
        now_ms: u64,
        unit: &wit::Unit,
        nodes: &wit::Capacity,
    ) -> Result<wit::PreFilterResult, CallError> {
        Ok(self
            .policy
            .pre_filter(now_ms, &unit.lift(), &nodes.lift())
            .lift())
    }
    fn filter(
        &self,
        pod: &wit::Placement,
        nodes: &wit::Candidates,
    ) -> Result<Vec<bool>, CallError> {
        Ok(self.with_columns(nodes, |c| self.policy.filter(&pod.lift(), c)))
    }
    fn score(&self, pod: &wit::Placement, nodes: &wit::Candidates) -> Result<Vec<u32>, CallError> {
        Ok(self.with_columns(nodes, |c| self.policy.score(&pod.lift(), c)))
    }
    fn permit(&self, now_ms: u64, gang: &wit::GangState) -> Result<wit::PermitResult, CallError> {
        Ok(self.policy.permit(now_ms, &gang.lift()).lift())
    }
    fn scale(&self, input: &wit::ScaleInput) -> Result<Vec<wit::ScaleDecision>, CallError> {
        Ok(self.policy.scale(&input.lift()).lift())
    }
}

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
) -> Result<WasmPolicy, dragon_host::runtime::LoadError> {
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

/// Add a PS/worker job (one 2-CPU PS, `workers` 4-CPU/1-GPU workers with
/// elastic bounds `min..=max`) and its pending pods to `cluster`.
pub fn add_job(
    cluster: &mut dragon_host::framework::Cluster,
    name: &str,
    arrival_ms: u64,
    workers: u32,
    min: u32,
    max: u32,
) {
    use dragon_host::spec::TaskSpec;
    let w = TaskSpec {
        count: workers,
        min: Some(min),
        max: Some(max),
        cpu: 4.0,
        memory_gib: 16.0,
        gpus: 1,
    };
    let ps = TaskSpec {
        count: 1,
        min: None,
        max: None,
        cpu: 2.0,
        memory_gib: 8.0,
        gpus: 0,
    };
    add_gang(cluster, name, arrival_ms, Some(&ps), &w);
}

/// Add a job with any PS and worker shapes (as a trace or case file writes
/// them) and its pending pods to `cluster`; returns the worker pod template
/// a driver clones for scale-ups.
pub fn add_gang(
    cluster: &mut dragon_host::framework::Cluster,
    name: &str,
    arrival_ms: u64,
    ps: Option<&dragon_host::spec::TaskSpec>,
    workers: &dragon_host::spec::TaskSpec,
) -> dragon_host::framework::Pod {
    let jp =
        dragon_host::spec::job_pods("test", name, arrival_ms, 0, ps, workers).expect("a valid job");
    let template = jp
        .pods
        .iter()
        .find(|p| p.role == dragon_host::framework::Role::Worker)
        .cloned()
        .expect("a job has workers");
    cluster.upsert_job(jp.job);
    for p in jp.pods {
        cluster.add_pod(p, None).expect("a new pod");
    }
    template
}
