//! Small builders of hook inputs for policies' native unit tests.

use crate::types::*;

pub fn capacity(nodes: &[(u64, u64, u32)]) -> Capacity {
    Capacity {
        alloc_cpu_milli: nodes.iter().map(|n| n.0).collect(),
        alloc_memory_mib: nodes.iter().map(|n| n.1).collect(),
        alloc_gpus: nodes.iter().map(|n| n.2).collect(),
        free_cpu_milli: nodes.iter().map(|n| n.0).collect(),
        free_memory_mib: nodes.iter().map(|n| n.1).collect(),
        free_gpus: nodes.iter().map(|n| n.2).collect(),
        gpu_kinds: vec![0; nodes.len()],
    }
}

/// Every node, all free and open.
pub fn view(nodes: &[(u64, u64, u32)]) -> View {
    view_of(&capacity(nodes))
}

/// Every node a candidate, none with siblings.
pub fn candidates(nodes: &[(u64, u64, u32)]) -> (Candidates, View) {
    let c = Candidates {
        index: (0..nodes.len() as u32).collect(),
        siblings: Vec::new(),
        preference: Vec::new(),
    };
    (c, view(nodes))
}

pub fn gpu_worker() -> Resources {
    Resources {
        cpu_milli: 4_000,
        memory_mib: 16_384,
        gpus: 1,
    }
}

pub fn ps() -> Resources {
    Resources {
        cpu_milli: 2_000,
        memory_mib: 8_192,
        gpus: 0,
    }
}

/// Workers by index, then parameter servers: the framework's placement order.
pub fn job_tasks(ps_count: u32, workers: u32, worker: Resources, ps: Resources) -> Vec<Task> {
    let mut t: Vec<Task> = (0..workers)
        .map(|index| Task {
            role: Role::Worker,
            index,
            request: worker,
        })
        .collect();
    t.extend((0..ps_count).map(|index| Task {
        role: Role::Ps,
        index,
        request: ps,
    }));
    t
}

pub fn gang_unit(
    ps_count: u32,
    workers: u32,
    min: u32,
    max: u32,
    worker: Resources,
    ps: Resources,
) -> Unit {
    Unit {
        id: 1,
        arrival_ms: 0,
        priority: 0,
        gang: true,
        tasks: job_tasks(ps_count, workers, worker, ps),
        workers,
        min_workers: min,
        max_workers: max,
        running: 0,
        stats: JobStats::NONE,
    }
}

pub fn placement(unit: &Unit, task: u32) -> Placement {
    Placement {
        unit: unit.clone(),
        task,
        now_ms: 0,
    }
}

/// A view whose nodes have `c`'s allocatable and free resources, all open.
pub fn view_of(c: &Capacity) -> View {
    let nodes: Vec<Node> = (0..c.len())
        .map(|i| Node {
            allocatable: c.allocatable(i),
            free: c.free(i),
            open: true,
            gpu_type: None,
        })
        .collect();
    View::of(&nodes)
}

/// A running job of `workers` one-GPU workers on `node` (its PS there too),
/// elastic within `[min, max]`.
pub fn running_job(id: u64, workers: u32, min: u32, max: u32, node: u32) -> RunningJob {
    RunningJob {
        id,
        arrival_ms: 0,
        started_ms: 0,
        scaled_ms: 0,
        workers,
        min_workers: min,
        max_workers: max,
        worker_request: gpu_worker(),
        worker_nodes: vec![node; workers as usize],
        ps_nodes: vec![node],
        stats: JobStats::NONE,
        speedup: Vec::new(),
    }
}

/// A job waiting at `workers` one-GPU workers (elastic down to `min`) with
/// one PS.
pub fn waiting_job(id: u64, arrival_ms: u64, workers: u32, min: u32) -> WaitingJob {
    let mut unit = gang_unit(1, workers, min, workers, gpu_worker(), ps());
    unit.id = id;
    unit.arrival_ms = arrival_ms;
    WaitingJob {
        id,
        arrival_ms,
        unit,
        speedup: Vec::new(),
    }
}
