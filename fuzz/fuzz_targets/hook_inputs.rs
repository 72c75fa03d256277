//! Structured random hook inputs fed to the bundled policies through wasm,
//! with the host's `WasmPolicy` calls: any `CallError` (a trap, a timeout, an
//! invalid result) is fine; a panic or an abort of the host is not. A
//! sequence of calls runs on one policy, so a call after a trap exercises
//! the fresh, reconfigured instance.
//!
//! Numbers are mostly small and realistic (so the policy's placement and
//! scaling logic is reached) and sometimes anything at all; per-node columns
//! are mostly parallel and sometimes ragged.

#![no_main]

use std::sync::LazyLock;

use arbitrary::{Arbitrary, Unstructured};
use dragon_runtime::{
    CallError, ComponentCache, FixedView, Hooks, Limits, LoadOptions, PolicyEngine, PolicySource,
    WasmPolicy, wit,
};
use libfuzzer_sys::fuzz_target;

struct Policies {
    _engine: PolicyEngine,
    dragon: WasmPolicy,
    baseline: WasmPolicy,
}

static POLICIES: LazyLock<Policies> = LazyLock::new(|| {
    let engine = PolicyEngine::new().expect("engine");
    // A call that runs long is interrupted either way; a short deadline keeps
    // the fuzzer from spending a second on each such input.
    let options = LoadOptions {
        limits: Limits {
            deadline_ms: 100,
            ..Limits::default()
        },
        ..LoadOptions::default()
    };
    let load = |name: &str| {
        WasmPolicy::load(
            &engine,
            &ComponentCache::disabled(),
            &PolicySource::named_or_file(name),
            &options,
        )
        .expect("a bundled policy loads")
    };
    Policies {
        dragon: load("dragon"),
        baseline: load("baseline"),
        _engine: engine,
    }
});

/// A u64 that is usually a plausible amount and sometimes anything.
#[derive(Debug, Clone, Copy)]
struct Amount(u64);

impl<'a> Arbitrary<'a> for Amount {
    fn arbitrary(u: &mut Unstructured<'a>) -> arbitrary::Result<Self> {
        Ok(Amount(match u.arbitrary::<u8>()? {
            0..=215 => u64::from(u.arbitrary::<u16>()?) * 16,
            216..=247 => u64::from(u.arbitrary::<u8>()?),
            _ => u.arbitrary()?,
        }))
    }
}

/// A u32 that is usually a small count or index and sometimes anything.
#[derive(Debug, Clone, Copy)]
struct Count(u32);

impl<'a> Arbitrary<'a> for Count {
    fn arbitrary(u: &mut Unstructured<'a>) -> arbitrary::Result<Self> {
        Ok(Count(match u.arbitrary::<u8>()? {
            0..=239 => u32::from(u.arbitrary::<u8>()? % 17),
            _ => u.arbitrary()?,
        }))
    }
}

#[derive(Debug, Arbitrary)]
struct Res {
    cpu_milli: Amount,
    memory_mib: Amount,
    gpus: Count,
}

impl Res {
    fn wit(&self) -> wit::Resources {
        wit::Resources {
            cpu_milli: self.cpu_milli.0,
            memory_mib: self.memory_mib.0,
            gpus: self.gpus.0,
        }
    }
}

#[derive(Debug, Arbitrary)]
enum Role {
    Ps,
    Worker,
    Other,
}

#[derive(Debug, Arbitrary)]
struct Task {
    role: Role,
    index: Count,
    request: Res,
}

#[derive(Debug, Arbitrary)]
struct Unit {
    id: u64,
    arrival_ms: Amount,
    priority: i32,
    gang: bool,
    tasks: Vec<Task>,
    workers: Count,
    min_workers: Count,
    max_workers: Count,
    running: Count,
}

impl Unit {
    fn wit(&self) -> wit::Unit {
        wit::Unit {
            id: self.id,
            arrival_ms: self.arrival_ms.0,
            priority: self.priority,
            gang: self.gang,
            tasks: self
                .tasks
                .iter()
                .map(|t| wit::Task {
                    role: match t.role {
                        Role::Ps => wit::Role::Ps,
                        Role::Worker => wit::Role::Worker,
                        Role::Other => wit::Role::Other,
                    },
                    index: t.index.0,
                    request: t.request.wit(),
                })
                .collect(),
            workers: self.workers.0,
            min_workers: self.min_workers.0,
            max_workers: self.max_workers.0,
            running: self.running.0,
        }
    }
}

#[derive(Debug, Arbitrary)]
struct NodeRow {
    alloc: Res,
    free: Res,
    index: Count,
    siblings: Count,
}

/// Per-node rows; `ragged` cuts one column short.
#[derive(Debug, Arbitrary)]
struct Nodes {
    rows: Vec<NodeRow>,
    ragged: Option<(u8, u8)>,
}

impl Nodes {
    fn cut<T>(&self, column: u8, mut v: Vec<T>) -> Vec<T> {
        if let Some((c, n)) = self.ragged
            && c % 8 == column
        {
            v.truncate(v.len().saturating_sub(usize::from(n % 4) + 1));
        }
        v
    }

    fn capacity(&self) -> wit::Capacity {
        let r = &self.rows;
        wit::Capacity {
            alloc_cpu_milli: self.cut(0, r.iter().map(|n| n.alloc.cpu_milli.0).collect()),
            alloc_memory_mib: self.cut(1, r.iter().map(|n| n.alloc.memory_mib.0).collect()),
            alloc_gpus: self.cut(2, r.iter().map(|n| n.alloc.gpus.0).collect()),
            free_cpu_milli: self.cut(3, r.iter().map(|n| n.free.cpu_milli.0).collect()),
            free_memory_mib: self.cut(4, r.iter().map(|n| n.free.memory_mib.0).collect()),
            free_gpus: self.cut(5, r.iter().map(|n| n.free.gpus.0).collect()),
        }
    }

    fn candidates(&self) -> wit::Candidates {
        wit::Candidates {
            index: self.cut(6, self.rows.iter().map(|n| n.index.0).collect()),
            capacity: self.capacity(),
            siblings: self.cut(7, self.rows.iter().map(|n| n.siblings.0).collect()),
        }
    }
}

#[derive(Debug, Arbitrary)]
struct Queued {
    id: u64,
    arrival_ms: Amount,
    priority: i32,
    pods: Count,
    total: Res,
}

#[derive(Debug, Arbitrary)]
struct RunningJob {
    id: u64,
    arrival_ms: Amount,
    started_ms: Amount,
    scaled_ms: Amount,
    workers: Count,
    min_workers: Count,
    max_workers: Count,
    worker_request: Res,
    worker_nodes: Vec<Count>,
    ps_nodes: Vec<Count>,
}

#[derive(Debug, Arbitrary)]
struct WaitingJob {
    id: u64,
    arrival_ms: Amount,
    unit: Unit,
}

#[derive(Debug, Arbitrary)]
enum Call {
    QueueOrder {
        now_ms: Amount,
        units: Vec<Queued>,
    },
    PreFilter {
        now_ms: Amount,
        unit: Unit,
        nodes: Nodes,
    },
    Filter {
        unit: Unit,
        task: Count,
        now_ms: Amount,
        nodes: Nodes,
    },
    Score {
        unit: Unit,
        task: Count,
        now_ms: Amount,
        nodes: Nodes,
    },
    Permit {
        now_ms: Amount,
        id: u64,
        reserved: Count,
        min_member: Count,
        present: Count,
        waited_ms: Amount,
    },
    Scale {
        now_ms: Amount,
        running: Vec<RunningJob>,
        waiting: Vec<WaitingJob>,
        nodes: Nodes,
        last_admit_ms: Amount,
        last_scale_down_ms: Amount,
    },
}

#[derive(Debug, Arbitrary)]
struct Input {
    baseline: bool,
    calls: Vec<Call>,
}

/// `HOOK_INPUTS_LOG=1`: print every `CallError` (to see what the corpus
/// reaches when replayed with `-runs=0`); `HOOK_INPUTS_LOG=2`: with the call.
static LOG: LazyLock<u8> = LazyLock::new(|| {
    std::env::var("HOOK_INPUTS_LOG")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
});

fn note<T>(call: &Call, result: Result<T, CallError>) {
    if let Err(e) = result {
        match *LOG {
            0 => {}
            1 => eprintln!("hook_inputs: {e}"),
            _ => eprintln!("hook_inputs: {e}\n{call:?}"),
        }
    }
}

fn run(policy: &dyn Hooks, call: &Call) {
    // Each result is a value or a CallError; either is fine.
    match call {
        Call::QueueOrder { now_ms, units } => {
            let units: Vec<wit::Queued> = units
                .iter()
                .map(|q| wit::Queued {
                    id: q.id,
                    arrival_ms: q.arrival_ms.0,
                    priority: q.priority,
                    pods: q.pods.0,
                    total: q.total.wit(),
                })
                .collect();
            let none = Nodes {
                rows: Vec::new(),
                ragged: None,
            };
            let view = FixedView::from_capacity(&none.capacity());
            note(call, policy.queue_order(now_ms.0, &units, &view));
        }
        Call::PreFilter {
            now_ms,
            unit,
            nodes,
        } => {
            let capacity = nodes.capacity();
            let view = FixedView::from_capacity(&capacity);
            note(
                call,
                policy.pre_filter(now_ms.0, &unit.wit(), &capacity, &view),
            );
        }
        Call::Filter {
            unit,
            task,
            now_ms,
            nodes,
        }
        | Call::Score {
            unit,
            task,
            now_ms,
            nodes,
        } => {
            let placement = wit::Placement {
                unit: unit.wit(),
                task: task.0,
                now_ms: now_ms.0,
            };
            let candidates = nodes.candidates();
            // Arbitrary indices may lie outside the view: an 0.2 policy
            // then traps, which is an error like any other.
            let view = FixedView::from_capacity(&candidates.capacity);
            if matches!(call, Call::Filter { .. }) {
                note(call, policy.filter(&placement, &candidates, &view));
            } else {
                note(call, policy.score(&placement, &candidates, &view));
            }
        }
        Call::Permit {
            now_ms,
            id,
            reserved,
            min_member,
            present,
            waited_ms,
        } => {
            let gang = wit::GangState {
                id: *id,
                reserved: reserved.0,
                min_member: min_member.0,
                present: present.0,
                waited_ms: waited_ms.0,
            };
            note(call, policy.permit(now_ms.0, &gang));
        }
        Call::Scale {
            now_ms,
            running,
            waiting,
            nodes,
            last_admit_ms,
            last_scale_down_ms,
        } => {
            let input = wit::ScaleInput {
                now_ms: now_ms.0,
                running: running
                    .iter()
                    .map(|j| wit::RunningJob {
                        id: j.id,
                        arrival_ms: j.arrival_ms.0,
                        started_ms: j.started_ms.0,
                        scaled_ms: j.scaled_ms.0,
                        workers: j.workers.0,
                        min_workers: j.min_workers.0,
                        max_workers: j.max_workers.0,
                        worker_request: j.worker_request.wit(),
                        worker_nodes: j.worker_nodes.iter().map(|n| n.0).collect(),
                        ps_nodes: j.ps_nodes.iter().map(|n| n.0).collect(),
                    })
                    .collect(),
                waiting: waiting
                    .iter()
                    .map(|w| wit::WaitingJob {
                        id: w.id,
                        arrival_ms: w.arrival_ms.0,
                        unit: w.unit.wit(),
                    })
                    .collect(),
                nodes: nodes.capacity(),
                last_admit_ms: last_admit_ms.0,
                last_scale_down_ms: last_scale_down_ms.0,
            };
            let view = FixedView::from_capacity(&input.nodes);
            note(call, policy.scale(&input, &view));
        }
    }
}

fuzz_target!(|input: Input| {
    let p = &*POLICIES;
    let policy: &dyn Hooks = if input.baseline {
        &p.baseline
    } else {
        &p.dragon
    };
    for call in input.calls.iter().take(16) {
        run(policy, call);
    }
});
