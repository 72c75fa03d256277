//! The gate before a policy swap: a candidate runs on recorded steps of the
//! live cluster before it may schedule it.
//!
//! The framework already refuses any answer that would break its rules, so
//! a candidate cannot overcommit a node or split a gang in production; what
//! the gate adds is that such a candidate never goes live at all. On every
//! recorded step it must:
//!
//! - answer without failing: no trap, no timeout, no answer the framework
//!   had to refuse (an invalid result is an attempt to break a rule);
//! - leave every node within its capacity, every gang it placed whole (a
//!   job is a gang when declared, or under a policy with a `permit` hook) and
//!   every job within its size bounds (checked on the replayed cluster
//!   after each step, a second line behind the framework's own checks);
//! - give identical decisions when the same steps run again;
//! - keep its slowest hook calls (p99) within a multiple of the live
//!   policy's on the same steps.
//!
//! A policy file may also ship golden cases: recordings next to it (see
//! [`golden_cases`]) whose decisions are the ones its author vouches for.
//! A candidate must keep the same rules on them and decide every step of
//! them as recorded ([`golden`]).

use std::cell::RefCell;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::cluster::{Cluster, PodState};
use crate::cycle::SchedulerConfig;
use crate::names::{JobKey, NodeName};
use crate::record::{self, Frame, Replayer};
use dragon_runtime::{CallError, Hooks, Observed, Observer, wit};

/// What the gate allows.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct GateLimits {
    /// The candidate's p99 hook time may be at most this multiple of the
    /// live policy's.
    pub latency_multiple: f64,
    /// Below this p99 (µs) the candidate is fast enough whatever the
    /// multiple: timings of a few microseconds are mostly noise.
    pub latency_floor_us: u64,
    /// With fewer calls than this from either policy, latency is not
    /// judged: a p99 of a few dozen calls is their slowest, one hiccup of
    /// the machine.
    pub min_calls: usize,
}

impl Default for GateLimits {
    fn default() -> GateLimits {
        GateLimits {
            latency_multiple: 3.0,
            latency_floor_us: 1_000,
            min_calls: 100,
        }
    }
}

/// The rule a candidate broke, and where.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Breach {
    #[error("the policy failed on the step recorded at t = {}: {error}", secs(*now_ms))]
    Failed { now_ms: u64, error: String },
    #[error(
        "node capacity: after the step recorded at t = {}, node {node} holds more {resource} than it has ({used} of {allocatable})",
        secs(*now_ms)
    )]
    OverCapacity {
        now_ms: u64,
        node: NodeName,
        resource: &'static str,
        used: u64,
        allocatable: u64,
    },
    #[error(
        "gangs whole: after the step recorded at t = {}, gang {job} has {placed} pods placed, fewer than its {min}",
        secs(*now_ms)
    )]
    GangSplit {
        now_ms: u64,
        job: JobKey,
        placed: u32,
        min: u32,
    },
    #[error(
        "size bounds: after the step recorded at t = {}, job {job} has {workers} workers, outside [{min}, {max}]",
        secs(*now_ms)
    )]
    SizeOutOfBounds {
        now_ms: u64,
        job: JobKey,
        workers: u32,
        min: u32,
        max: u32,
    },
    #[error(
        "identical output for identical input: the step recorded at t = {} decided differently when run again",
        secs(*now_ms)
    )]
    Nondeterministic { now_ms: u64 },
    #[error("golden case {}: {reason}", case.display())]
    Golden { case: PathBuf, reason: String },
    #[error(
        "latency: the p99 hook call took {candidate_us} µs, over {multiple}× the live policy's {live_us} µs"
    )]
    Slow {
        candidate_us: u64,
        live_us: u64,
        multiple: f64,
    },
}

fn secs(ms: u64) -> String {
    format!("{:.1} s", ms as f64 / 1e3)
}

/// What a candidate that passed came to.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Passed {
    /// Recorded steps it ran.
    pub steps: usize,
    /// Hook calls it made, and its p99 and the live policy's (µs); the
    /// live policy's is `None` when latency was not judged (no live
    /// policy, or too few calls).
    pub calls: usize,
    pub p99_us: u64,
    pub live_p99_us: Option<u64>,
    /// Steps of golden cases it decided as recorded.
    pub golden_steps: usize,
}

/// Collects the time of every hook call.
#[derive(Default)]
struct Timings(RefCell<Vec<Duration>>);

impl Observer for &Timings {
    fn call<R>(
        &self,
        _hook: wit::Hook,
        call: impl FnOnce() -> Result<R, CallError>,
    ) -> Result<R, CallError> {
        let started = Instant::now();
        let r = call();
        self.0.borrow_mut().push(started.elapsed());
        r
    }
}

impl Timings {
    fn p99_us(&self) -> u64 {
        let mut t = self.0.borrow().clone();
        if t.is_empty() {
            return 0;
        }
        t.sort_unstable();
        let at = (t.len() * 99).div_ceil(100).saturating_sub(1);
        t[at].as_micros() as u64
    }
}

/// Run `candidate` on `frames` (steps recorded from the start of a run, or
/// from a state their first frame rebuilds) with the framework settings
/// `config`, and `live` on the same steps for the latency comparison.
///
/// # Errors
/// The first rule the candidate broke.
pub fn check(
    frames: &[Frame],
    config: SchedulerConfig,
    candidate: &dyn Hooks,
    live: Option<&dyn Hooks>,
    fallback: Option<&dyn Hooks>,
    limits: GateLimits,
) -> Result<Passed, Breach> {
    let timings = Timings::default();
    let timed = Observed {
        inner: candidate,
        observer: &timings,
    };
    let mut first = Replayer::new(config);
    let mut again = Replayer::new(config);
    for frame in frames {
        first.apply(frame);
        let before = Holdings::of(&first.sched.cluster);
        let step = first.decide(frame, &timed, fallback);
        if let Some(error) = step.policy_errors.into_iter().next() {
            return Err(Breach::Failed {
                now_ms: step.now_ms,
                error,
            });
        }
        let gangs = candidate.info().implements(wit::Hook::Permit);
        invariants(&first.sched.cluster, &before, gangs, step.now_ms)?;
        // The same step over the same state, through the same instance.
        let repeat = again.step(frame, candidate, fallback);
        if repeat.replayed != step.replayed {
            return Err(Breach::Nondeterministic {
                now_ms: step.now_ms,
            });
        }
    }
    let calls = timings.0.borrow().len();
    let p99_us = timings.p99_us();
    let live_p99_us = live.and_then(|live| {
        let live_timings = Timings::default();
        let timed = Observed {
            inner: live,
            observer: &live_timings,
        };
        let mut replayer = Replayer::new(config);
        for frame in frames {
            replayer.step(frame, &timed, fallback);
        }
        let live_calls = live_timings.0.borrow().len();
        (calls.min(live_calls) >= limits.min_calls).then(|| live_timings.p99_us())
    });
    if let Some(live_us) = live_p99_us
        && p99_us > limits.latency_floor_us
        && p99_us as f64 > limits.latency_multiple * live_us as f64
    {
        return Err(Breach::Slow {
            candidate_us: p99_us,
            live_us,
            multiple: limits.latency_multiple,
        });
    }
    Ok(Passed {
        steps: frames.len(),
        calls,
        p99_us,
        live_p99_us,
        golden_steps: 0,
    })
}

/// The most golden cases run for one policy: each is a whole replay.
pub const MAX_GOLDEN_CASES: usize = 16;

/// The golden cases shipped next to the policy file `policy`: the files in
/// its directory named `<stem>.golden.rec` or `<stem>.golden.<case>.rec`
/// (`tiresias.golden.small.rec` for `tiresias.wasm`), in name order. Flat
/// names, so that a ConfigMap can carry them beside the policy.
pub fn golden_cases(policy: &Path) -> Vec<PathBuf> {
    let (Some(dir), Some(stem)) = (policy.parent(), policy.file_stem()) else {
        return Vec::new();
    };
    let prefix = format!("{}.golden.", stem.to_string_lossy());
    let dir = match dir.as_os_str().is_empty() {
        true => Path::new("."),
        false => dir,
    };
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut cases: Vec<PathBuf> = entries
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .map(|n| n.to_string_lossy())
                .is_some_and(|n| n.starts_with(&prefix) && n.ends_with(".rec"))
        })
        .collect();
    cases.sort();
    cases
}

/// At most this many characters of a decision are quoted in a refusal.
const QUOTED_CHARS: usize = 300;

/// Run `candidate` on each golden case in `cases` (at most
/// [`MAX_GOLDEN_CASES`]): the rules of [`check`] on its steps (with its
/// own recorded framework settings), and every step deciding as recorded.
/// Returns the steps run. No fallback policy: a candidate that fails on a
/// step of a case is refused before a fallback would matter.
///
/// # Errors
/// The first case that cannot be read, or that the candidate breaks or
/// decides differently; the breach names the case.
pub fn golden(
    cases: &[PathBuf],
    candidate: &dyn Hooks,
    limits: GateLimits,
) -> Result<usize, Breach> {
    let refuse = |case: &Path, reason: String| Breach::Golden {
        case: case.to_path_buf(),
        reason,
    };
    if cases.len() > MAX_GOLDEN_CASES {
        return Err(refuse(
            &cases[MAX_GOLDEN_CASES],
            format!("more than {MAX_GOLDEN_CASES} golden cases ship with the policy"),
        ));
    }
    let mut steps = 0;
    for case in cases {
        let rec = record::read(case).map_err(|e| refuse(case, e.to_string()))?;
        if let Some(torn) = &rec.torn {
            return Err(refuse(
                case,
                format!("its last record was cut short ({torn})"),
            ));
        }
        let config: SchedulerConfig = serde_json::from_str(&rec.header.config)
            .map_err(|e| refuse(case, format!("its framework settings: {e}")))?;
        check(&rec.frames, config, candidate, None, None, limits)
            .map_err(|b| refuse(case, b.to_string()))?;
        let replay = record::replay(&rec, candidate, None, config);
        if let Some(d) = replay.differences.first() {
            return Err(refuse(
                case,
                format!(
                    "{} of its {} steps decided otherwise than recorded; the first, at t = {}: recorded {}, decided {}",
                    replay.differences.len(),
                    rec.frames.len(),
                    secs(d.now_ms),
                    record::clipped(&d.recorded, QUOTED_CHARS),
                    record::clipped(&d.replayed, QUOTED_CHARS)
                ),
            ));
        }
        steps += rec.frames.len();
    }
    Ok(steps)
}

/// What each node and job held before a step, so that a step is blamed
/// only for what it changed (a cluster may already hold more than it
/// should: pods another scheduler placed, a node that shrank).
struct Holdings {
    used: Vec<[u64; 3]>,
    placed: std::collections::BTreeMap<JobKey, u32>,
    workers: std::collections::BTreeMap<JobKey, u32>,
}

fn used(cluster: &Cluster, i: usize) -> [u64; 3] {
    let u = cluster.used(i);
    [u.cpu_milli, u.memory_mib, u64::from(u.gpus)]
}

fn placed(cluster: &Cluster, job: &str) -> u32 {
    cluster
        .job_pods(job)
        .filter(|(_, s)| matches!(s, PodState::Bound(_)))
        .count() as u32
}

impl Holdings {
    fn of(cluster: &Cluster) -> Holdings {
        Holdings {
            used: (0..cluster.nodes().len())
                .map(|i| used(cluster, i))
                .collect(),
            placed: cluster
                .jobs()
                .map(|j| (j.name.clone(), placed(cluster, &j.name)))
                .collect(),
            workers: cluster
                .jobs()
                .map(|j| (j.name.clone(), j.workers))
                .collect(),
        }
    }
}

/// The rules after a step; `gangs`: whether the candidate places jobs as
/// gangs (it has a `permit` hook; a declared gang is one whatever the
/// policy).
fn invariants(
    cluster: &Cluster,
    before: &Holdings,
    gangs: bool,
    now_ms: u64,
) -> Result<(), Breach> {
    for (i, node) in cluster.nodes().iter().enumerate() {
        if !cluster.is_live(i) {
            continue;
        }
        let a = &node.allocatable;
        let allocatable = [a.cpu_milli, a.memory_mib, u64::from(a.gpus)];
        let now = used(cluster, i);
        let was = before.used.get(i).copied().unwrap_or_default();
        for (r, resource) in ["cpu (millicores)", "memory (MiB)", "GPUs"]
            .into_iter()
            .enumerate()
        {
            if now[r] > allocatable[r] && now[r] > was[r] {
                return Err(Breach::OverCapacity {
                    now_ms,
                    node: node.name.clone(),
                    resource,
                    used: now[r],
                    allocatable: allocatable[r],
                });
            }
        }
    }
    for job in cluster.jobs() {
        let n = placed(cluster, &job.name);
        let min = job.min_member.min(job.workers);
        let gang = gangs || job.always_gang();
        if gang && n > before.placed.get(&job.name).copied().unwrap_or(0) && n < min {
            return Err(Breach::GangSplit {
                now_ms,
                job: job.name.clone(),
                placed: n,
                min,
            });
        }
        let changed = before.workers.get(&job.name) != Some(&job.workers);
        if changed && !(job.min_workers..=job.max_workers).contains(&job.workers) {
            return Err(Breach::SizeOutOfBounds {
                now_ms,
                job: job.name.clone(),
                workers: job.workers,
                min: job.min_workers,
                max: job.max_workers,
            });
        }
    }
    Ok(())
}
