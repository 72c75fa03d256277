//! The conversions interfaces 0.2, 0.3 and 0.4 share: every shape but the
//! node row, the job's history, the changes and 0.4's speed-ups is the same
//! in each, so one body serves each version's generated types (`v` in the
//! module that expands it; `stats` is that module's own).

macro_rules! shared_shapes {
    // `speedup`: the function giving a job's speed-up by unit id (0.4's
    // running and waiting jobs carry it; earlier versions have no field).
    ($($speedup:ident)?) => {
        fn resources(r: wit::Resources) -> v::Resources {
            v::Resources {
                cpu_milli: r.cpu_milli,
                memory_mib: r.memory_mib,
                gpus: r.gpus,
            }
        }

        fn task(t: &wit::Task) -> v::Task {
            v::Task {
                role: match t.role {
                    wit::Role::Ps => v::Role::Ps,
                    wit::Role::Worker => v::Role::Worker,
                    wit::Role::Other => v::Role::Other,
                },
                index: t.index,
                request: resources(t.request),
            }
        }

        pub(crate) fn unit(u: &wit::Unit, view: &dyn ClusterView, now_ms: u64) -> v::Unit {
            v::Unit {
                id: u.id,
                arrival_ms: u.arrival_ms,
                priority: u.priority,
                gang: u.gang,
                tasks: u.tasks.iter().map(task).collect(),
                workers: u.workers,
                min_workers: u.min_workers,
                max_workers: u.max_workers,
                running: u.running,
                stats: stats(view.job_stats(now_ms, u.id)),
            }
        }

        pub(crate) fn placement(p: &wit::Placement, view: &dyn ClusterView) -> v::Placement {
            v::Placement {
                unit: unit(&p.unit, view, p.now_ms),
                task: p.task,
                now_ms: p.now_ms,
            }
        }

        /// Candidates as indices, siblings only where there are some, and the
        /// pod's preferences among them.
        pub(crate) fn candidates(c: &wit::Candidates, view: &dyn ClusterView) -> v::Candidates {
            v::Candidates {
                preference: view.preference().to_vec(),
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

        pub(crate) fn queued(
            q: &[wit::Queued],
            view: &dyn ClusterView,
            now_ms: u64,
        ) -> Vec<v::Queued> {
            q.iter()
                .map(|q| v::Queued {
                    id: q.id,
                    arrival_ms: q.arrival_ms,
                    priority: q.priority,
                    pods: q.pods,
                    total: resources(q.total),
                    stats: stats(view.job_stats(now_ms, q.id)),
                })
                .collect()
        }

        pub(crate) fn scale_input(i: &wit::ScaleInput, view: &dyn ClusterView) -> v::ScaleInput {
            let now = i.now_ms;
            v::ScaleInput {
                now_ms: now,
                running: i
                    .running
                    .iter()
                    .map(|j| v::RunningJob {
                        id: j.id,
                        arrival_ms: j.arrival_ms,
                        started_ms: j.started_ms,
                        scaled_ms: j.scaled_ms,
                        workers: j.workers,
                        min_workers: j.min_workers,
                        max_workers: j.max_workers,
                        worker_request: resources(j.worker_request),
                        worker_nodes: j.worker_nodes.clone(),
                        ps_nodes: j.ps_nodes.clone(),
                        stats: stats(view.job_stats(now, j.id)),
                        $(speedup: $speedup(view, j.id),)?
                    })
                    .collect(),
                waiting: i
                    .waiting
                    .iter()
                    .map(|w| v::WaitingJob {
                        id: w.id,
                        arrival_ms: w.arrival_ms,
                        unit: unit(&w.unit, view, now),
                        $(speedup: $speedup(view, w.id),)?
                    })
                    .collect(),
                last_admit_ms: i.last_admit_ms,
                last_scale_down_ms: i.last_scale_down_ms,
            }
        }

        pub(crate) fn gang(g: &wit::GangState) -> v::GangState {
            v::GangState {
                id: g.id,
                reserved: g.reserved,
                min_member: g.min_member,
                present: g.present,
                waited_ms: g.waited_ms,
            }
        }

        pub(crate) fn pre_filter_result(r: v::PreFilterResult) -> wit::PreFilterResult {
            match r {
                v::PreFilterResult::Proceed(sizes) => wit::PreFilterResult::Proceed(sizes),
                v::PreFilterResult::Skip(reason) => wit::PreFilterResult::Skip(reason),
            }
        }

        pub(crate) fn permit_result(r: v::PermitResult) -> wit::PermitResult {
            match r {
                v::PermitResult::Allow => wit::PermitResult::Allow,
                v::PermitResult::Wait(ms) => wit::PermitResult::Wait(ms),
                v::PermitResult::Reject(reason) => wit::PermitResult::Reject(reason),
            }
        }

        pub(crate) fn decisions(d: Vec<v::ScaleDecision>) -> Vec<wit::ScaleDecision> {
            d.into_iter()
                .map(|d| wit::ScaleDecision {
                    id: d.id,
                    workers: d.workers,
                    reason: d.reason,
                })
                .collect()
        }

        pub(crate) fn info(i: v::PolicyInfo) -> wit::PolicyInfo {
            wit::PolicyInfo {
                name: i.name,
                version: i.version,
                hooks: i.hooks.into_iter().map(hook).collect(),
            }
        }

        fn hook(h: v::Hook) -> wit::Hook {
            match h {
                v::Hook::QueueOrder => wit::Hook::QueueOrder,
                v::Hook::PreFilter => wit::Hook::PreFilter,
                v::Hook::Filter => wit::Hook::Filter,
                v::Hook::Score => wit::Hook::Score,
                v::Hook::Permit => wit::Hook::Permit,
                v::Hook::Scale => wit::Hook::Scale,
            }
        }

        pub(crate) fn level(l: v::Level) -> wit::Level {
            match l {
                v::Level::Trace => wit::Level::Trace,
                v::Level::Debug => wit::Level::Debug,
                v::Level::Info => wit::Level::Info,
                v::Level::Warn => wit::Level::Warn,
                v::Level::Error => wit::Level::Error,
            }
        }
    };
}

pub(crate) use shared_shapes;

/// The conversions interfaces 0.3 and 0.4 share beyond [`shared_shapes`]:
/// the changes with topology levels and queues, the queue and the job's
/// history with its queue (`gpu_type`: the function giving a node's GPU
/// type by index, which 0.4's node row carries).
macro_rules! levelled_shapes {
    ($($gpu_type:ident)?) => {
        /// The rows `delta` names, the levels when it resets the view, and the
        /// queues when `queues` is given.
        pub(crate) fn changes(
            view: &dyn ClusterView,
            delta: &Delta,
            queues: Option<&[QueueRow]>,
        ) -> v::Changes {
            let mut domains = Vec::with_capacity(delta.indices.len() * view.levels().len());
            v::Changes {
                reset: delta.reset,
                count: delta.count,
                nodes: delta
                    .indices
                    .iter()
                    .map(|&index| {
                        let row = view.node(index);
                        view.domains(index, &mut domains);
                        v::NodeChange {
                            index,
                            node: v::Node {
                                allocatable: resources(row.allocatable),
                                free: resources(row.free),
                                open: row.open,
                                $(gpu_type: $gpu_type(view, index),)?
                            },
                        }
                    })
                    .collect(),
                domains,
                levels: if delta.reset {
                    view.levels().to_vec()
                } else {
                    Vec::new()
                },
                queues: queues.map(|rows| rows.iter().map(queue).collect()),
            }
        }

        fn queue(q: &QueueRow) -> v::Queue {
            v::Queue {
                name: q.name.clone(),
                parent: q.parent,
                weight_milli: q.weight_milli,
                guaranteed_gpus: q.guaranteed_gpus,
                borrowing_limit_gpus: q.borrowing_limit_gpus,
                used_gpus: q.used_gpus,
                demand_gpus: q.demand_gpus,
            }
        }

        fn stats(s: JobStats) -> v::JobStats {
            v::JobStats {
                attained_gpu_ms: s.attained_gpu_ms,
                running_ms: s.running_ms,
                restarts: s.restarts,
                placed_workers: s.placed_workers,
                requested_workers: s.requested_workers,
                progress_permille: s.progress_permille,
                queue: s.queue,
            }
        }
    };
}

pub(crate) use levelled_shapes;
