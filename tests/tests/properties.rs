//! Properties of the framework over random clusters and job mixes, with the
//! bundled wasm policies: whatever the cluster and the jobs, no node is ever
//! overcommitted, gangs are all or nothing, scaling stays within each job's
//! bounds, and the same inputs give the same decisions byte for byte.
//!
//! Each case builds a cluster (2–30 nodes of random CPU, memory and GPUs,
//! some labelled, tainted or cordoned), then drives several rounds: jobs and
//! lone pods arrive, running ones finish, `Scheduler::schedule_round` and
//! `Scheduler::scale_step` run through a [`RecordingIo`], and scale-ups get
//! their new worker pods as a driver (the simulator, the shim) would add
//! them. The invariants are checked after every round and every scale step.
//!
//! `PROPTEST_CASES` sets the number of cases per property (default 64).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::LazyLock;

use dragon_framework::{
    ApiError, ApiErrorKind, Binder, Cluster, Node, Pod, PodKey, PodState, RecordingIo, Release,
    ResizeLimits, Resources, Role, Scheduler, SchedulerConfig, Taint, TaintEffect, Toleration,
    TolerationOperator, UnitKey,
};
use dragon_runtime::{Hooks, PolicyEngine, WasmPolicy};
use dragon_sim::spec::{TaskSpec, worker_pod};
use dragon_tests::{Ops, add_gang, bundled, engine};
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::{Config as ProptestConfig, TestRunner};

// ---------------------------------------------------------------- policies

/// The bundled policies, compiled once for every case of every property.
struct Policies {
    _engine: PolicyEngine,
    /// DRAGON with its default settings.
    dragon: WasmPolicy,
    /// DRAGON with short thresholds and growth while jobs wait, so that most
    /// cases shrink and grow jobs within a few rounds.
    dragon_eager: WasmPolicy,
    baseline: WasmPolicy,
}

static POLICIES: LazyLock<Policies> = LazyLock::new(|| {
    let e = engine();
    Policies {
        dragon: bundled(&e, "dragon", ""),
        dragon_eager: bundled(
            &e,
            "dragon",
            r#"{"starvation_threshold_s": 20, "idle_threshold_s": 15, "grow_while_waiting": true}"#,
        ),
        baseline: bundled(&e, "baseline", ""),
        _engine: e,
    }
});

fn config() -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(64);
    ProptestConfig {
        cases,
        ..ProptestConfig::default()
    }
}

// ---------------------------------------------------------------- scenarios

#[derive(Debug, Clone)]
struct NodeSpec {
    cores: u64,
    memory_gib: u64,
    gpus: u32,
    zone: u8,
    tainted: bool,
    cordoned: bool,
}

#[derive(Debug, Clone)]
struct GangSpec {
    ps: u32,
    ps_cores: u32,
    ps_memory_gib: u32,
    workers: u32,
    min: u32,
    max: u32,
    worker_cores: u32,
    worker_memory_gib: u32,
    worker_gpus: u32,
    /// The round it arrives in.
    arrive: u8,
    /// Rounds it runs once started, if it ever finishes.
    runs_for: Option<u8>,
}

#[derive(Debug, Clone)]
struct LoneSpec {
    cores: u32,
    memory_gib: u32,
    gpus: u32,
    /// Select nodes of this zone.
    zone: Option<u8>,
    /// Tolerate the `dedicated` taint.
    tolerates: bool,
    arrive: u8,
    runs_for: Option<u8>,
}

#[derive(Debug, Clone)]
struct Scenario {
    nodes: Vec<NodeSpec>,
    gangs: Vec<GangSpec>,
    lones: Vec<LoneSpec>,
    rounds: u8,
    /// Time between rounds, ms.
    gap_ms: u64,
    /// Bind attempts (numbered from 0 over the run) that fail, as a
    /// Binding the API server refuses.
    bind_failures: BTreeSet<u32>,
}

fn node_spec() -> impl Strategy<Value = NodeSpec> {
    (
        prop::sample::select(vec![4u64, 8, 16, 32, 64]),
        prop::sample::select(vec![16u64, 32, 64, 128, 256]),
        prop_oneof![Just(0u32), 1u32..=8, Just(4), Just(8)],
        0u8..3,
        prop::bool::weighted(0.15),
        prop::bool::weighted(0.05),
    )
        .prop_map(
            |(cores, memory_gib, gpus, zone, tainted, cordoned)| NodeSpec {
                cores,
                memory_gib,
                gpus,
                zone,
                tainted,
                cordoned,
            },
        )
}

fn gang_spec(rounds: u8) -> impl Strategy<Value = GangSpec> {
    (1u32..=8)
        .prop_flat_map(move |workers| {
            (
                (0u32..=2, 1u32..=4, 1u32..=16),
                (Just(workers), 1..=workers, workers..=workers + 4),
                (1u32..=8, 1u32..=32, prop_oneof![Just(1u32), 0u32..=2]),
                0..rounds,
                prop::option::weighted(0.6, 1u8..=4),
            )
        })
        .prop_map(
            |(
                (ps, ps_cores, ps_memory_gib),
                (workers, min, max),
                (worker_cores, worker_memory_gib, worker_gpus),
                arrive,
                runs_for,
            )| GangSpec {
                ps,
                ps_cores,
                ps_memory_gib,
                workers,
                min,
                max,
                worker_cores,
                worker_memory_gib,
                worker_gpus,
                arrive,
                runs_for,
            },
        )
}

fn lone_spec(rounds: u8) -> impl Strategy<Value = LoneSpec> {
    (
        (1u32..=16, 1u32..=64, 0u32..=2),
        prop::option::weighted(0.2, 0u8..3),
        prop::bool::weighted(0.3),
        0..rounds,
        prop::option::weighted(0.6, 1u8..=4),
    )
        .prop_map(
            |((cores, memory_gib, gpus), zone, tolerates, arrive, runs_for)| LoneSpec {
                cores,
                memory_gib,
                gpus,
                zone,
                tolerates,
                arrive,
                runs_for,
            },
        )
}

fn scenario() -> impl Strategy<Value = Scenario> {
    (
        3u8..=8,
        prop::sample::select(vec![10_000u64, 30_000, 45_000, 70_000]),
    )
        .prop_flat_map(|(rounds, gap_ms)| {
            (
                prop::collection::vec(node_spec(), 2..=30),
                prop::collection::vec(gang_spec(rounds), 0..=12),
                prop::collection::vec(lone_spec(rounds), 0..=10),
                Just(rounds),
                Just(gap_ms),
                prop_oneof![
                    2 => Just(BTreeSet::new()),
                    1 => prop::collection::btree_set(0u32..120, 1..=4),
                ],
            )
        })
        .prop_map(
            |(nodes, gangs, lones, rounds, gap_ms, bind_failures)| Scenario {
                nodes,
                gangs,
                lones,
                rounds,
                gap_ms,
                bind_failures,
            },
        )
}

// ---------------------------------------------------------------- driving

const TAINT_KEY: &str = "dedicated";

fn build_cluster(sc: &Scenario) -> Cluster {
    let mut c = Cluster::new();
    for (i, n) in sc.nodes.iter().enumerate() {
        let mut node = Node::new(
            format!("n{i:02}"),
            Resources {
                cpu_milli: n.cores * 1000,
                memory_mib: n.memory_gib * 1024,
                gpus: n.gpus,
            },
        );
        node.labels.insert("zone".into(), format!("z{}", n.zone));
        if n.tainted {
            node.taints.push(Taint {
                key: TAINT_KEY.into(),
                value: "infra".into(),
                effect: TaintEffect::NoSchedule,
            });
        }
        node.unschedulable = n.cordoned;
        c.add_node(node).expect("unique node names");
    }
    c
}

fn lone_pod(i: usize, l: &LoneSpec, now_ms: u64) -> Pod {
    let mut p = Pod::new(
        format!("lone-{i:02}"),
        Resources {
            cpu_milli: u64::from(l.cores) * 500,
            memory_mib: u64::from(l.memory_gib) * 512,
            gpus: l.gpus,
        },
    );
    p.arrival_ms = now_ms;
    if let Some(z) = l.zone {
        p.node_selector.insert("zone".into(), format!("z{z}"));
    }
    if l.tolerates {
        p.tolerations.push(Toleration {
            key: TAINT_KEY.into(),
            operator: TolerationOperator::Exists,
            ..Toleration::default()
        });
    }
    p
}

fn job_name(i: usize) -> String {
    format!("job-{i:02}")
}

/// What one run did, for the determinism property and the generator check.
#[derive(Debug, Default)]
struct Outcome {
    /// Every round's and scale step's report, the binder's and scaler's
    /// records and the final pod states, serialized in order.
    transcript: Vec<u8>,
    /// `(pod, node)` in bind order over the whole run.
    binds: Vec<(String, String)>,
    admitted: usize,
    admitted_below_request: usize,
    unschedulable: usize,
    policy_errors: usize,
    scale_downs: usize,
    scale_ups: usize,
    finished: usize,
    bind_failures: usize,
}

/// Which invariants to check (the determinism property checks none, so a
/// failure there is about determinism alone).
#[derive(Debug, Clone, Copy)]
struct Checks {
    capacity: bool,
    gangs: bool,
    bounds: bool,
}

const ALL: Checks = Checks {
    capacity: true,
    gangs: true,
    bounds: true,
};
const NONE: Checks = Checks {
    capacity: false,
    gangs: false,
    bounds: false,
};

/// The pods the binder was told are bound (and not since unbound or gone).
type BindView = BTreeMap<String, String>;

/// An in-memory API server's bindings: records every bind and unbind in
/// order, keeps what is bound now, and refuses the bind attempts the
/// scenario says fail.
#[derive(Debug, Default)]
struct Bindings {
    /// `(pod, node)` of every successful bind, in order.
    log: Vec<(String, String)>,
    /// Pods unbound after a sibling's bind failed, in order.
    unbinds: Vec<String>,
    view: BindView,
    attempts: u32,
    fail: BTreeSet<u32>,
    /// Binds of a pod already bound and unbinds of a pod not bound.
    anomalies: Vec<String>,
}

impl Binder for Bindings {
    fn bind(&mut self, pod: &str, node: &str) -> Result<(), ApiError> {
        let n = self.attempts;
        self.attempts += 1;
        if self.fail.contains(&n) {
            return Err(ApiError::new(
                ApiErrorKind::Unavailable,
                format!("bind attempt {n} refused"),
            ));
        }
        if let Some(old) = self.view.insert(pod.to_string(), node.to_string()) {
            self.anomalies
                .push(format!("{pod} bound to {node} while bound to {old}"));
        }
        self.log.push((pod.to_string(), node.to_string()));
        Ok(())
    }

    fn unbind(&mut self, pod: &str) -> Result<Release, ApiError> {
        self.unbinds.push(pod.to_string());
        if self.view.remove(pod).is_none() {
            self.anomalies
                .push(format!("{pod} unbound while not bound"));
        }
        Ok(Release::Unbound)
    }

    fn evict(&mut self, eviction: &dragon_framework::Eviction) -> Result<(), ApiError> {
        self.anomalies.push(format!(
            "{} evicted: the properties' jobs are all of one priority",
            eviction.victim
        ));
        Ok(())
    }
}

/// Pods that finished or were removed by a scale-down are gone from the
/// API server too.
fn forget_gone(io: &mut Bindings, c: &Cluster) {
    io.view.retain(|pod, _| c.pod(pod).is_some());
}

/// (a): what holds room on a node fits in it, the snapshot's incremental
/// accounting agrees with a recount, the binder's record agrees with the
/// snapshot, and no pod sits where the built-in filters forbid.
fn check_capacity(s: &Scheduler, view: &BindView, when: &str) -> Result<(), String> {
    let c = s.cluster();
    let n = c.nodes().len();
    let mut held = vec![Resources::default(); n];
    let mut bound = vec![Resources::default(); n];
    for (p, st) in c.pods() {
        let Some(i) = st.node() else { continue };
        held[i] = held[i].plus(p.request);
        let node = &c.nodes()[i];
        if let PodState::Bound(_) = st {
            bound[i] = bound[i].plus(p.request);
            match view.get(p.key.as_str()) {
                Some(name) if *name == node.name => {}
                other => {
                    return Err(format!(
                        "{when}: pod {} is bound to {} in the snapshot, but the binder has {other:?}",
                        p.key, node.name
                    ));
                }
            }
        }
        if node.unschedulable {
            return Err(format!(
                "{when}: pod {} is on cordoned node {}",
                p.key, node.name
            ));
        }
        if !p
            .node_selector
            .iter()
            .all(|(k, v)| node.labels.get(k) == Some(v))
        {
            return Err(format!(
                "{when}: pod {} is on {} against its node selector",
                p.key, node.name
            ));
        }
        if node
            .taints
            .iter()
            .any(|t| !p.tolerations.iter().any(|tol| tol.tolerates(t)))
        {
            return Err(format!(
                "{when}: pod {} is on {} without tolerating its taint",
                p.key, node.name
            ));
        }
    }
    for (pod, node) in view {
        let i = c
            .node_by_name(node)
            .ok_or_else(|| format!("{when}: the binder bound {pod} to unknown node {node}"))?;
        if c.pod(pod).map(|(_, st)| st) != Some(PodState::Bound(i)) {
            return Err(format!(
                "{when}: the binder bound {pod} to {node}, but the snapshot has {:?}",
                c.pod(pod).map(|(_, st)| st)
            ));
        }
    }
    for i in 0..n {
        let alloc = c.nodes()[i].allocatable;
        let name = &c.nodes()[i].name;
        if !held[i].fits_in(alloc) {
            return Err(format!(
                "{when}: node {name} holds {:?} (bound {:?}), more than its {alloc:?}",
                held[i], bound[i]
            ));
        }
        if c.used(i) != held[i] {
            return Err(format!(
                "{when}: node {name}: the snapshot counts {:?} used, the pods on it request {:?}",
                c.used(i),
                held[i]
            ));
        }
    }
    Ok(())
}

/// (b): every gang has no pod bound or at least `minMember` bound, and
/// reservations are held only by gangs waiting in permit.
fn check_gangs(s: &Scheduler, when: &str) -> Result<(), String> {
    let c = s.cluster();
    let waiting: BTreeSet<&UnitKey> = s.waiting_gangs().collect();
    for job in c.jobs() {
        let states: Vec<PodState> = c.job_pods(&job.name).map(|(_, st)| st).collect();
        let bound = states
            .iter()
            .filter(|st| matches!(st, PodState::Bound(_)))
            .count() as u32;
        if bound != 0 && bound < job.min_member {
            return Err(format!(
                "{when}: gang {} has {bound} pods bound, fewer than its minMember {} (states {states:?})",
                job.name, job.min_member
            ));
        }
        let reserved = states.iter().any(|st| matches!(st, PodState::Reserved(_)));
        if reserved && !waiting.contains(&UnitKey::job(&job.name)) {
            return Err(format!(
                "{when}: gang {} holds reservations but is not waiting in permit",
                job.name
            ));
        }
    }
    Ok(())
}

/// (c): every job's worker count is within its bounds, and no worker pod
/// beyond it exists.
fn check_bounds(s: &Scheduler, when: &str) -> Result<(), String> {
    let c = s.cluster();
    for job in c.jobs() {
        if job.workers < job.min_workers.max(1) || job.workers > job.max_workers {
            return Err(format!(
                "{when}: job {} has {} workers, outside [{}, {}]",
                job.name, job.workers, job.min_workers, job.max_workers
            ));
        }
        let workers: Vec<u32> = c
            .job_pods(&job.name)
            .filter(|(p, _)| p.role == Role::Worker)
            .map(|(p, _)| p.index)
            .collect();
        if workers.iter().any(|&i| i >= job.workers) || workers.len() as u32 > job.workers {
            return Err(format!(
                "{when}: job {} has worker pods {workers:?} for {} workers",
                job.name, job.workers
            ));
        }
    }
    Ok(())
}

fn check(checks: Checks, s: &Scheduler, io: &Bindings, when: &str) -> Result<(), TestCaseError> {
    let mut result = Ok(());
    if checks.capacity {
        result = check_capacity(s, &io.view, when);
        if !io.anomalies.is_empty() {
            result = Err(format!("{when}: the binder saw {:?}", io.anomalies));
        }
    }
    if checks.gangs {
        result = result.and_then(|()| check_gangs(s, when));
    }
    if checks.bounds {
        result = result.and_then(|()| check_bounds(s, when));
    }
    result.map_err(TestCaseError::fail)
}

/// Run `sc` under `policy`, checking `checks` after every round and step.
fn drive(sc: &Scenario, policy: &dyn Hooks, checks: Checks) -> Result<Outcome, TestCaseError> {
    // Scale steps come every few seconds here: the limits on how often a
    // job is resized would hold most of them (tests/tests/resizes.rs
    // covers those limits).
    let config = SchedulerConfig {
        resize: ResizeLimits {
            min_interval_ms: 0,
            max_restarts_per_hour: 0,
            ..ResizeLimits::default()
        },
        ..SchedulerConfig::default()
    };
    let mut s = Scheduler::new(build_cluster(sc), config);
    let mut io = Bindings {
        fail: sc.bind_failures.clone(),
        ..Bindings::default()
    };
    let mut scaler = RecordingIo::default();
    let mut out = Outcome::default();
    let mut templates: BTreeMap<String, Pod> = BTreeMap::new();
    let mut lone_bound_round: BTreeMap<usize, u8> = BTreeMap::new();
    for round in 0..sc.rounds {
        let now = u64::from(round) * sc.gap_ms;
        // Finished work leaves: a gang once it has run its rounds, a lone
        // pod once bound for its rounds. Their controllers delete the pods.
        for (i, g) in sc.gangs.iter().enumerate() {
            let name = job_name(i);
            let (Some(runs), Some(started)) = (g.runs_for, s.cluster().job_started_ms(&name))
            else {
                continue;
            };
            if now >= started + u64::from(runs) * sc.gap_ms {
                let pods: Vec<PodKey> = s
                    .cluster()
                    .job_pods(&name)
                    .map(|(p, _)| p.key.clone())
                    .collect();
                for p in pods {
                    s.remove_pod(&p).expect("a pod of the job");
                }
                s.remove_job(&name);
                out.finished += 1;
            }
        }
        for (i, l) in sc.lones.iter().enumerate() {
            let key = format!("lone-{i:02}");
            if let (Some(runs), Some(&at)) = (l.runs_for, lone_bound_round.get(&i))
                && round >= at + runs
                && s.cluster().pod(&key).is_some()
            {
                s.remove_pod(&key).expect("a lone pod");
                out.finished += 1;
            }
        }
        // Arrivals.
        for (i, g) in sc.gangs.iter().enumerate() {
            if g.arrive != round {
                continue;
            }
            let ps = TaskSpec {
                count: g.ps,
                min: None,
                max: None,
                cpu: f64::from(g.ps_cores),
                memory_gib: f64::from(g.ps_memory_gib),
                gpus: 0,
                devices: Vec::new(),
            };
            let workers = TaskSpec {
                count: g.workers,
                min: Some(g.min),
                max: Some(g.max),
                cpu: f64::from(g.worker_cores),
                memory_gib: f64::from(g.worker_memory_gib),
                gpus: g.worker_gpus,
                devices: Vec::new(),
            };
            let ps = (g.ps > 0).then_some(&ps);
            let t = add_gang(&mut s, &job_name(i), now + i as u64, ps, &workers);
            templates.insert(job_name(i), t);
        }
        for (i, l) in sc.lones.iter().enumerate() {
            if l.arrive == round {
                s.add_pod(lone_pod(i, l, now + i as u64), None)
                    .expect("a new pod");
            }
        }
        forget_gone(&mut io, s.cluster());
        check(checks, &s, &io, &format!("before round {round}"))?;

        // A scheduling round.
        let report = s.schedule_round(now, policy, &mut io, &mut scaler);
        for d in &report.decisions {
            use dragon_framework::Decision as D;
            match d {
                D::Admitted { .. } => out.admitted += 1,
                D::Resized { .. } => out.admitted_below_request += 1,
                D::Unschedulable { .. } => out.unschedulable += 1,
                D::PolicyError { .. } => out.policy_errors += 1,
                D::BindFailed { .. } => out.bind_failures += 1,
                D::Bound { pod, .. } => {
                    if let Some(i) = pod.strip_prefix("lone-").and_then(|i| i.parse().ok()) {
                        lone_bound_round.insert(i, round);
                    }
                }
                _ => {}
            }
        }
        out.transcript
            .extend(serde_json::to_vec(&report).expect("a report serializes"));
        forget_gone(&mut io, s.cluster());
        check(checks, &s, &io, &format!("after round {round} at {now} ms"))?;

        // A scale step halfway to the next round; scale-ups get their pods.
        let at = now + sc.gap_ms / 2;
        let before = scaler.scales.len();
        let step = s.scale_step(at, policy, &mut scaler);
        out.transcript
            .extend(serde_json::to_vec(&step).expect("a report serializes"));
        for a in &step.actions {
            let job = s
                .cluster()
                .job(&a.job)
                .cloned()
                .expect("a scaled job exists");
            if checks.bounds && (a.to < job.min_workers.max(1) || a.to > job.max_workers) {
                return Err(TestCaseError::fail(format!(
                    "scale step at {at} ms: {a:?} is outside [{}, {}]",
                    job.min_workers, job.max_workers
                )));
            }
            if a.to > a.from {
                out.scale_ups += 1;
                let template = &templates[a.job.as_str()];
                for index in a.from..a.to {
                    s.add_pod(worker_pod(&job, template, index, None).0, None)
                        .expect("a new worker");
                }
            } else {
                out.scale_downs += 1;
            }
        }
        if checks.bounds {
            for (job, workers, reason) in &scaler.scales[before..] {
                let j = s.cluster().job(job).expect("a scaled job exists");
                if *workers < j.min_workers.max(1) || *workers > j.max_workers {
                    return Err(TestCaseError::fail(format!(
                        "the scaler was asked for {workers} workers of {job} ({reason}), outside [{}, {}]",
                        j.min_workers, j.max_workers
                    )));
                }
            }
        }
        forget_gone(&mut io, s.cluster());
        check(checks, &s, &io, &format!("after the scale step at {at} ms"))?;
    }
    let states: Vec<(String, Option<String>, bool)> = s
        .cluster()
        .pods()
        .map(|(p, st)| {
            (
                p.key.to_string(),
                st.node().map(|n| s.cluster().nodes()[n].name.to_string()),
                matches!(st, PodState::Bound(_)),
            )
        })
        .collect();
    out.transcript.extend(
        serde_json::to_vec(&(&io.log, &io.unbinds, &scaler.scales, &states))
            .expect("records serialize"),
    );
    out.binds = io.log;
    Ok(out)
}

fn each_policy(
    sc: &Scenario,
    policies: &[&WasmPolicy],
    checks: Checks,
) -> Result<(), TestCaseError> {
    for p in policies {
        drive(sc, *p, checks).map_err(|e| {
            TestCaseError::fail(format!(
                "policy {} ({}): {e}",
                p.info().name,
                p.info().settings
            ))
        })?;
    }
    Ok(())
}

// ---------------------------------------------------------------- properties

proptest! {
    #![proptest_config(config())]

    /// (a) No node's CPU, memory or GPUs are ever exceeded by what is bound
    /// (or reserved) there, under any of the policies.
    #[test]
    fn no_node_is_ever_overcommitted(sc in scenario()) {
        let p = &*POLICIES;
        let checks = Checks { capacity: true, ..NONE };
        each_policy(&sc, &[&p.dragon, &p.dragon_eager, &p.baseline], checks)?;
    }

    /// (b) With DRAGON's gangs, after every round and scale step each job has
    /// either no pod bound or at least minMember.
    #[test]
    fn gangs_are_all_or_nothing(sc in scenario()) {
        let p = &*POLICIES;
        let checks = Checks { gangs: true, ..NONE };
        each_policy(&sc, &[&p.dragon, &p.dragon_eager], checks)?;
    }

    /// (c) Worker counts stay within each job's [min, max] through admissions
    /// at min, starvation shrinks and idle growth, and every scale the
    /// scaler is asked for is within them.
    #[test]
    fn worker_counts_stay_within_bounds(sc in scenario()) {
        let p = &*POLICIES;
        let checks = Checks { bounds: true, ..NONE };
        each_policy(&sc, &[&p.dragon, &p.dragon_eager, &p.baseline], checks)?;
    }

    /// (d) The same inputs give byte-identical decisions: two runs of a
    /// scenario bind the same pods to the same nodes in the same order, and
    /// every report matches.
    #[test]
    fn the_same_inputs_give_the_same_decisions(sc in scenario()) {
        let p = &*POLICIES;
        for policy in [&p.dragon, &p.dragon_eager, &p.baseline] {
            let first = drive(&sc, policy, NONE)?;
            let second = drive(&sc, policy, NONE)?;
            prop_assert_eq!(&first.binds, &second.binds, "{}", policy.info().settings);
            prop_assert!(
                first.transcript == second.transcript,
                "transcripts differ for {} ({})",
                policy.info().name,
                policy.info().settings
            );
        }
    }
}

/// The generator is not vacuous: over a fixed sample of scenarios the
/// properties above see admissions, admissions at min, unschedulable gangs,
/// shrinks, growth and completions, and every invariant holds at once.
#[test]
fn the_generator_exercises_every_path() {
    let p = &*POLICIES;
    let mut runner = TestRunner::deterministic();
    let strategy = scenario();
    let mut total = Outcome::default();
    let mut nodes = 0;
    for _ in 0..24 {
        let sc = strategy
            .new_tree(&mut runner)
            .expect("a scenario")
            .current();
        nodes = nodes.max(sc.nodes.len());
        let o = drive(&sc, &p.dragon_eager, ALL).unwrap_or_else(|e| panic!("{e}\n{sc:#?}"));
        total.admitted += o.admitted;
        total.admitted_below_request += o.admitted_below_request;
        total.unschedulable += o.unschedulable;
        total.policy_errors += o.policy_errors;
        total.scale_downs += o.scale_downs;
        total.scale_ups += o.scale_ups;
        total.finished += o.finished;
        total.bind_failures += o.bind_failures;
        total.binds.extend(o.binds);
    }
    eprintln!(
        "24 scenarios (up to {nodes} nodes): {} binds, {} admitted ({} at min), {} unschedulable, \
         {} shrinks, {} grows, {} finished, {} failed binds, {} policy errors",
        total.binds.len(),
        total.admitted,
        total.admitted_below_request,
        total.unschedulable,
        total.scale_downs,
        total.scale_ups,
        total.finished,
        total.bind_failures,
        total.policy_errors
    );
    assert!(total.admitted > 24, "{total:?}");
    assert!(total.admitted_below_request > 0, "no admission at min");
    assert!(total.unschedulable > 0, "nothing was ever unschedulable");
    assert!(total.scale_downs > 0, "no starvation shrink");
    assert!(total.scale_ups > 0, "no idle growth");
    assert!(total.finished > 0, "nothing finished");
    assert!(total.bind_failures > 0, "no bind ever failed");
    assert_eq!(total.policy_errors, 0, "the bundled policy failed");
}

/// The invariant checks themselves catch what they look for.
#[test]
fn the_checks_catch_violations() {
    let mut c = Cluster::new();
    c.add_node(Node::new(
        "small",
        Resources {
            cpu_milli: 4000,
            memory_mib: 8192,
            gpus: 1,
        },
    ))
    .unwrap();
    let workers = TaskSpec {
        count: 2,
        min: Some(2),
        max: Some(3),
        cpu: 1.0,
        memory_gib: 1.0,
        gpus: 1,
        devices: Vec::new(),
    };
    add_gang(&mut c, "j", 0, None, &workers);
    let mut s = Scheduler::new(c, SchedulerConfig::default());
    let mut io = Bindings::default();
    assert!(check(ALL, &s, &io, "empty").is_ok());

    // One member of a two-pod gang bound: not all or nothing.
    s.observe_bound("j-worker-0", "small").unwrap();
    io.bind("j-worker-0", "small").unwrap();
    let e = check_gangs(&s, "half").unwrap_err();
    assert!(e.contains("fewer than its minMember 2"), "{e}");
    assert!(check_capacity(&s, &io.view, "half").is_ok());

    // Both bound: two GPUs on a one-GPU node.
    s.observe_bound("j-worker-1", "small").unwrap();
    let e = check_capacity(&s, &io.view, "both").unwrap_err();
    assert!(e.contains("but the binder has None"), "{e}");
    io.bind("j-worker-1", "small").unwrap();
    let e = check_capacity(&s, &io.view, "both").unwrap_err();
    assert!(e.contains("more than its"), "{e}");
    io.bind("j-worker-1", "small").unwrap();
    assert!(check(ALL, &s, &io, "twice").is_err());

    // A worker count beyond max.
    let mut job = s.cluster().job("j").unwrap().clone();
    job.workers = 4;
    s.upsert_job(job);
    let e = check_bounds(&s, "grown").unwrap_err();
    assert!(e.contains("outside [2, 3]"), "{e}");
}
