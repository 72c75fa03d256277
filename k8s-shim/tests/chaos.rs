//! Chaos: two `dragon-scheduler` replicas (leader election on a Lease)
//! under churn on the real control plane, while faults drawn from a seeded
//! schedule hit them one after another, with invariants checked every second.
//!
//! The replicas reach the API server through a TCP proxy on 127.0.0.1 (TLS
//! passes through untouched) as a ServiceAccount bound to the shipped
//! ClusterRole, so that every fault hits the same two processes:
//!
//! 1. kube-apiserver stopped and started again;
//! 2. etcd stopped and started again;
//! 3. every connection through the proxy cut, again and again (watches
//!    break and are made again, in-flight requests lose their answers);
//! 4. latency added by the proxy to every chunk, both ways;
//! 5. a 429 storm: a FlowSchema puts the replicas' writes in an API
//!    Priority and Fairness level of about three seats that rejects the
//!    excess, then is deleted;
//! 6. a replica SIGKILLed and a new one started;
//! 7. the leader frozen (SIGSTOP) past its Lease, then thawed;
//! 8. the policy file replaced by another good policy (`baseline`, `dragon`,
//!    or one whose every tenth call traps, with `onPolicyError: fallback`);
//! 9. the policy file replaced by a corrupt one, which must be refused
//!    while the old policy keeps serving.
//!
//! Meanwhile jobs arrive as in the soak (gangs of 2–4 workers of 1–3 GPUs
//! with a parameter server now and then, each a PodGroup whose minMember is
//! its size, and lone pods), KWOK completes them, and finished jobs are
//! deleted. They ask for about as many GPUs as the four nodes have, so pods
//! also wait for room.
//!
//! Every second a monitor checks, and records the worst moment of (value,
//! time, the fault active then): no node over its allocatable (GPUs, CPU,
//! memory, pod count of the pods bound to it that have not finished); no
//! pod bound twice (a pod's node never changes, no more Scheduled events
//! than bound incarnations, no binding refused as already bound); no gang
//! partly bound for `PARTIAL_MAX` or longer; every pending pod explained by
//! a FailedScheduling Event and `PodScheduled=False` once it has waited
//! `EXPLAIN_GRACE` and every fault has been over for its recovery time
//! (while the API server is down nothing can be explained; after it is back
//! the watches' backoff runs out first). Once the chaos ends, every job that
//! arrived runs to completion within `DRAIN_SECS`, the invariants of the
//! fault tests hold, and both replicas are alive, healthy and one leads.
//! The report lists every fault (time, kind, duration) and each invariant's
//! worst moment; the test fails on any violation.
//!
//! By default the chaos lasts about 2.5 minutes, and every kind of fault
//! happens at least once (the first round draws each kind once, in a seeded
//! order; later faults are drawn at random):
//!
//!     cargo test --release -p dragon-scheduler --test chaos -- --nocapture
//!
//! Longer runs: `DRAGON_CHAOS=1` for 30 minutes, `DRAGON_CHAOS_MINUTES=N`
//! for N (under an hour: the replicas' token lasts one);
//! `DRAGON_CHAOS_SEED=N` (decimal or 0x-hex) repeats a schedule:
//!
//!     DRAGON_CHAOS_MINUTES=10 cargo test --release -p dragon-scheduler --test chaos -- --nocapture

mod common;

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::proxy::Proxy;
use common::*;
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::api::flowcontrol::v1::{FlowSchema, PriorityLevelConfiguration};
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use serde_json::{Value, json};

/// Nodes of the chaos cluster, each with this many GPUs.
const NODES: usize = 4;
const NODE_GPUS: u32 = 8;
/// The replicas' Lease, seconds: a frozen leader loses it after this.
const LEASE_SECS: u32 = 4;
/// Longest a gang may stay partly bound (some members bound, not all).
const PARTIAL_MAX: Duration = Duration::from_secs(30);
/// How long a pod may wait unexplained after it was created or after the
/// last fault ended, whichever is later.
const EXPLAIN_GRACE: Duration = Duration::from_secs(20);
/// Once the chaos ends, every job that arrived completes within this.
const DRAIN_SECS: u64 = 300;
const LEADER: &str = "dragon_is_leader";
const SEED: u64 = 0xC4A0_5D0E_2026_1205;
/// The API Priority and Fairness level a 429 storm sends writes to.
const LEVEL: &str = "dragon-e2e-chaos";

/// How the run is sized and seeded.
struct Plan {
    length: Duration,
    seed: u64,
}

impl Plan {
    fn from_env() -> Plan {
        let minutes = std::env::var("DRAGON_CHAOS_MINUTES")
            .ok()
            .and_then(|m| m.parse::<u64>().ok())
            .or_else(|| (std::env::var("DRAGON_CHAOS").is_ok_and(|v| v == "1")).then_some(30));
        let seed = std::env::var("DRAGON_CHAOS_SEED")
            .ok()
            .and_then(|s| match s.strip_prefix("0x") {
                Some(hex) => u64::from_str_radix(hex, 16).ok(),
                None => s.parse().ok(),
            })
            .unwrap_or(SEED);
        Plan {
            length: minutes.map_or(Duration::from_secs(150), |m| {
                Duration::from_secs(60 * m.max(1))
            }),
            seed,
        }
    }
}

// ---------------------------------------------------------------------------
// Faults.

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    ApiServerRestart,
    EtcdRestart,
    ConnectionsCut,
    Latency,
    Storm429,
    SchedulerKill,
    LeaderPause,
    PolicySwap,
    CorruptPolicy,
}

const KINDS: [Kind; 9] = [
    Kind::ApiServerRestart,
    Kind::EtcdRestart,
    Kind::ConnectionsCut,
    Kind::Latency,
    Kind::Storm429,
    Kind::SchedulerKill,
    Kind::LeaderPause,
    Kind::PolicySwap,
    Kind::CorruptPolicy,
];

/// The seeded order of faults: a shuffled round of every kind, then kinds
/// at random.
struct Schedule {
    rng: Rng,
    first_round: Vec<Kind>,
}

impl Schedule {
    fn new(seed: u64) -> Schedule {
        let mut rng = Rng(seed.max(1));
        let mut first_round = KINDS.to_vec();
        for i in (1..first_round.len()).rev() {
            let j = rng.range(0, i as u32) as usize;
            first_round.swap(i, j);
        }
        first_round.reverse();
        Schedule { rng, first_round }
    }

    fn first_round_done(&self) -> bool {
        self.first_round.is_empty()
    }

    fn next(&mut self) -> Kind {
        match self.first_round.pop() {
            Some(k) => k,
            None => KINDS[self.rng.range(0, KINDS.len() as u32 - 1) as usize],
        }
    }
}

/// One fault as injected: for the report.
struct Record {
    at_s: f64,
    kind: Kind,
    took_s: f64,
    detail: String,
}

/// What the invariant monitor needs to know about faults: the one active
/// now, and from when every fault that ended has had its time to recover.
struct FaultClock {
    active: Option<String>,
    quiet_from: Instant,
}

type Clock = Arc<Mutex<FaultClock>>;

fn fault_label(clock: &Clock) -> String {
    clock
        .lock()
        .unwrap()
        .active
        .clone()
        .unwrap_or_else(|| "none".into())
}

/// Marks a fault active from creation until dropped (also on a panic),
/// then recovering for `recovery`: what a fault breaks, pending pods'
/// explanations included, may take that long to mend once it is over (a
/// watch's backoff after an outage, a Lease taken over).
struct Active {
    clock: Clock,
    recovery: Duration,
}

impl Active {
    fn new(clock: &Clock, label: String, recovery: Duration) -> Active {
        clock.lock().unwrap().active = Some(label);
        Active {
            clock: clock.clone(),
            recovery,
        }
    }
}

impl Drop for Active {
    fn drop(&mut self) {
        let mut c = self.clock.lock().unwrap();
        c.active = None;
        c.quiet_from = c.quiet_from.max(Instant::now() + self.recovery);
    }
}

/// How long after a fault of each kind ends pending pods may still be
/// unexplained (besides [`EXPLAIN_GRACE`] after their creation).
fn recovery(kind: Kind) -> Duration {
    Duration::from_secs(match kind {
        // Every watch backs off (800 ms doubling up to 30 s, reset only
        // after 2 minutes of health) while the API server is away.
        Kind::ApiServerRestart | Kind::EtcdRestart => 30,
        Kind::ConnectionsCut | Kind::Storm429 | Kind::SchedulerKill | Kind::LeaderPause => 15,
        Kind::Latency => 10,
        // Nothing is cut off: the old policy serves until the new one does.
        Kind::PolicySwap | Kind::CorruptPolicy => 0,
    })
}

/// Run `f` to completion on a thread and runtime of its own: for clean-ups
/// in `Drop`, which may run while the test's runtime unwinds.
fn on_side_runtime<F, Fut>(f: F)
where
    F: FnOnce(kube::Client) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()>,
{
    let _ = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime for a clean-up");
        rt.block_on(async move { f(client().await).await });
    })
    .join();
}

/// A process frozen by SIGSTOP: thawed when dropped.
struct Thaw(u32);

impl Drop for Thaw {
    fn drop(&mut self) {
        let _ = std::process::Command::new("kill")
            .arg("-CONT")
            .arg(self.0.to_string())
            .status();
    }
}

/// The FlowSchema of a 429 storm: deleted when dropped.
struct Storm;

impl Drop for Storm {
    fn drop(&mut self) {
        on_side_runtime(|c| async move {
            let schemas: Api<FlowSchema> = Api::all(c);
            let _ = schemas.delete(LEVEL, &DeleteParams::default()).await;
        });
    }
}

/// The priority level of the storms: deleted with its schema when dropped.
struct Level;

impl Drop for Level {
    fn drop(&mut self) {
        drop(Storm);
        on_side_runtime(|c| async move {
            let levels: Api<PriorityLevelConfiguration> = Api::all(c);
            let _ = levels.delete(LEVEL, &DeleteParams::default()).await;
        });
    }
}

/// A priority level of about three seats that rejects the excess with 429
/// (as in `faults.rs`), in force once the API server reports its seats.
async fn reject_level(s: &Scenario) -> Level {
    let levels: Api<PriorityLevelConfiguration> = Api::all(s.client.clone());
    let schemas: Api<FlowSchema> = Api::all(s.client.clone());
    let _ = schemas.delete(LEVEL, &DeleteParams::default()).await;
    let _ = levels.delete(LEVEL, &DeleteParams::default()).await;
    s.create(
        &levels,
        json!({
            "metadata": {"name": LEVEL},
            "spec": {"type": "Limited", "limited": {
                "nominalConcurrencyShares": 1, "lendablePercent": 0, "borrowingLimitPercent": 0,
                "limitResponse": {"type": "Reject"}}}
        }),
    )
    .await;
    until(60, "the priority level to be in force", || async {
        level_metric(s, "apiserver_flowcontrol_nominal_limit_seats").await > 0.0
    })
    .await;
    Level
}

/// The sum of metric `name` of the storm's level on the API server (0 when
/// it does not answer); counters start again at 0 when it restarts.
async fn level_metric(s: &Scenario, name: &str) -> f64 {
    let text = s
        .client
        .request_text(http::Request::get("/metrics").body(Vec::new()).unwrap())
        .await
        .unwrap_or_default();
    text.lines()
        .filter(|l| l.starts_with(name) && l.contains(&format!("priority_level=\"{LEVEL}\"")))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// Start a storm: every write of the replicas' ServiceAccount goes to the
/// rejecting level (before every built-in schema that would match it).
async fn storm(s: &Scenario) -> Storm {
    let schemas: Api<FlowSchema> = Api::all(s.client.clone());
    s.create(
        &schemas,
        json!({
            "metadata": {"name": LEVEL},
            "spec": {"priorityLevelConfiguration": {"name": LEVEL}, "matchingPrecedence": 50,
                "rules": [{"subjects": [{"kind": "ServiceAccount",
                        "serviceAccount": {"name": "dragon", "namespace": s.name.clone()}}],
                    "resourceRules": [{"verbs": ["create", "update", "patch", "delete"],
                        "apiGroups": ["*"], "resources": ["*"], "namespaces": ["*"],
                        "clusterScope": true}]}]}
        }),
    )
    .await;
    Storm
}

/// What replaces the policy file.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Swap {
    Baseline,
    Flaky,
    Dragon,
    Corrupt,
}

impl Swap {
    /// Replace `policy` the way a ConfigMap update lands: a new file
    /// renamed over the old one. A file of the bytes already there is no
    /// change (the scheduler compares digests), so each corrupt file is
    /// made different by `n`.
    fn write(self, policy: &Path, n: usize) {
        let bytes: Vec<u8> = match self {
            Swap::Baseline => dragon_bundled::BASELINE.to_vec(),
            Swap::Dragon => dragon_bundled::DRAGON.to_vec(),
            Swap::Flaky => dragon_test_policies::hostile_with_mode(b"flaky-1in10_"),
            Swap::Corrupt => format!("\0asm\x0d\0\x01\0 not really {n}").into_bytes(),
        };
        let tmp = policy.with_extension("tmp");
        std::fs::write(&tmp, bytes).unwrap();
        std::fs::rename(&tmp, policy).unwrap();
    }
}

// ---------------------------------------------------------------------------
// The replicas.

/// Two replicas sharing a policy file, a kubeconfig and a Lease; those
/// killed are kept for their logs.
struct Replicas {
    live: Vec<Scheduler>,
    retired: Vec<Scheduler>,
    policy: PathBuf,
    kubeconfig: PathBuf,
    extra: String,
}

impl Replicas {
    fn start_one(&self, s: &Scenario) -> Scheduler {
        // Waits for readiness synchronously: other tasks (the proxy has a
        // runtime of its own) go on meanwhile.
        tokio::task::block_in_place(|| {
            Scheduler::start_as(
                s,
                &self.policy.display().to_string(),
                &self.extra,
                &self.kubeconfig,
            )
        })
    }

    /// The index of the replica that leads now, if one does.
    fn leader(&self) -> Option<usize> {
        self.live.iter().position(|r| r.metric(LEADER) == 1.0)
    }

    async fn until_one_leader(&self, secs: u64) -> bool {
        until_within(secs, || async {
            self.live.iter().map(|r| r.metric(LEADER)).sum::<f64>() == 1.0
        })
        .await
    }

    fn all(&self) -> Vec<&Scheduler> {
        self.live.iter().chain(&self.retired).collect()
    }

    /// Replicas that exited on their own: replaced, and returned (pid,
    /// the tail of its log).
    fn replace_dead(&mut self, s: &Scenario) -> Vec<(u32, String)> {
        let mut dead = Vec::new();
        for i in 0..self.live.len() {
            if !self.live[i].alive() {
                let fresh = self.start_one(s);
                let gone = std::mem::replace(&mut self.live[i], fresh);
                dead.push((gone.child.id(), tail(&gone.log(), 30)));
                self.retired.push(gone);
            }
        }
        dead
    }
}

fn tail(log: &str, lines: usize) -> String {
    let all: Vec<&str> = log.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// Policy reloads counted by each replica: (successes, failures).
fn reloads(r: &Replicas) -> Vec<(f64, f64)> {
    r.live
        .iter()
        .map(|x| {
            (
                x.metric("dragon_policy_reloads_total{result=\"success\"}"),
                x.metric("dragon_policy_reloads_total{result=\"failure\"}"),
            )
        })
        .collect()
}

/// A kubeconfig for ServiceAccount `dragon` of the scenario's namespace,
/// bound to the ClusterRole and the Lease Role shipped in
/// `k8s-shim/deploy/rbac.yaml` (an identity API Priority and Fairness
/// classifies like any workload), whose `server:` is `server`.
async fn replica_kubeconfig(s: &Scenario, server: SocketAddr) -> PathBuf {
    use k8s_openapi::api::core::v1::ServiceAccount;
    use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
    let name = format!("dragon-e2e-{}", s.name);
    let subjects = json!([{"kind": "ServiceAccount", "name": "dragon", "namespace": s.name}]);
    let roles: Api<ClusterRole> = Api::all(s.client.clone());
    let _ = roles.delete(&name, &DeleteParams::default()).await;
    let mut role = shipped_cluster_role();
    role.metadata.name = Some(name.clone());
    roles.create(&PostParams::default(), &role).await.unwrap();
    let bindings: Api<ClusterRoleBinding> = Api::all(s.client.clone());
    let _ = bindings.delete(&name, &DeleteParams::default()).await;
    s.create(
        &bindings,
        json!({"metadata": {"name": name}, "subjects": subjects,
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name}}),
    )
    .await;
    // The Lease rules, in the namespace the Lease lives in.
    let shipped = std::fs::read_to_string(repo().join("k8s-shim/deploy/rbac.yaml")).unwrap();
    let mut lease_role: Role = shipped
        .split("\n---\n")
        .find(|d| d.lines().any(|l| l == "kind: Role"))
        .map(|d| serde_norway::from_str(d).unwrap())
        .expect("a Role in rbac.yaml");
    lease_role.metadata =
        serde_json::from_value(json!({"name": "lease", "namespace": s.name})).unwrap();
    let ns_roles: Api<Role> = Api::namespaced(s.client.clone(), &s.name);
    ns_roles
        .create(&PostParams::default(), &lease_role)
        .await
        .unwrap();
    let ns_bindings: Api<RoleBinding> = Api::namespaced(s.client.clone(), &s.name);
    s.create(
        &ns_bindings,
        json!({"metadata": {"name": "lease"}, "subjects": subjects,
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "lease"}}),
    )
    .await;
    let accounts: Api<ServiceAccount> = Api::namespaced(s.client.clone(), &s.name);
    s.create(&accounts, json!({"metadata": {"name": "dragon"}}))
        .await;
    // The account's kubeconfig (its token lasts an hour), pointed at the
    // proxy.
    let direct = account_kubeconfig(&s.client, &s.name, "dragon").await;
    let text: String = std::fs::read_to_string(&direct)
        .unwrap()
        .lines()
        .map(|l| match l.split_once("server:") {
            Some((indent, _)) => format!("{indent}server: https://{server}\n"),
            None => format!("{l}\n"),
        })
        .collect();
    let path = direct.with_file_name(format!("kubeconfig-{}-proxied", s.name));
    std::fs::write(&path, text).unwrap();
    path
}

/// The API server's address, from the control plane's kubeconfig.
fn api_server_addr() -> SocketAddr {
    let text = std::fs::read_to_string(&control_plane().kubeconfig).unwrap();
    text.lines()
        .find_map(|l| l.trim().strip_prefix("server: https://"))
        .and_then(|a| a.trim().parse().ok())
        .expect("server: https://IP:PORT in the kubeconfig")
}

// ---------------------------------------------------------------------------
// The workload.

/// A job that arrived and has not been cleaned up yet.
struct Job {
    pods: Vec<String>,
    gang: bool,
    arrived: Instant,
}

/// What the workload shares with the test: jobs not yet swept, when each
/// pod was created, and what it has seen so far.
#[derive(Default)]
struct Work {
    jobs: BTreeMap<String, Job>,
    created: HashMap<String, Instant>,
    arrived: usize,
    done: usize,
    /// The longest a job took from arrival to its sweep.
    longest: Duration,
    /// Every gang that arrived.
    gangs: Vec<String>,
}

type Shared = Arc<Mutex<Work>>;

/// Create `object` through `api`, trying again while the API server is
/// away (one already there counts: an answer lost to a restart).
async fn create_through<K>(api: &Api<K>, object: Value)
where
    K: kube::Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned + serde::Serialize,
{
    let typed: K = serde_json::from_value(object).expect("a valid object");
    let deadline = Instant::now() + Duration::from_secs(180);
    loop {
        match api.create(&PostParams::default(), &typed).await {
            Ok(_) => return,
            Err(kube::Error::Api(e)) if e.code == 409 => return,
            Err(e) => assert!(
                Instant::now() < deadline,
                "could not create an object for 180 s: {e}"
            ),
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// One job: a gang (PodGroup of minMember = its size, maybe a parameter
/// server, 2–4 workers of 1–3 GPUs) or a lone 1-GPU pod, each pod running
/// 5–20 s once bound: about 28 of the 32 GPUs asked for on average, so
/// pods queue and wait, explained, now and then.
async fn arrive(s: &Scenario, monitor: &Monitor, work: &Shared, rng: &mut Rng, n: usize) {
    let run = rng.range(5, 20);
    let pods_api: Api<Pod> = Api::namespaced(s.client.clone(), &s.name);
    let sched = s.scheduler_name();
    let (name, pods) = if rng.range(0, 9) < 3 {
        let name = format!("l{n}");
        (name.clone(), vec![(name, None, 1)])
    } else {
        let name = format!("g{n}");
        let workers = rng.range(2, 4);
        let gpus = rng.range(1, 3);
        let ps = rng.range(0, 2) == 0;
        let mut pods = Vec::new();
        if ps {
            pods.push((format!("{name}-ps-0"), Some(("ps", 0)), 0));
        }
        for i in 0..workers {
            pods.push((format!("{name}-worker-{i}"), Some(("worker", i)), gpus));
        }
        monitor.gang(&name, pods.len());
        work.lock().unwrap().gangs.push(name.clone());
        let pg = json!({
            "apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": s.name},
            "spec": {"minMember": pods.len(), "scheduleTimeoutSeconds": 60}
        });
        create_through(&podgroups(&s.client, &s.name), pg).await;
        (name, pods)
    };
    let gang = name.starts_with('g');
    for (pod, role, gpus) in &pods {
        let group = role.map(|(r, i)| (name.as_str(), r, i));
        let manifest = s.pod_manifest(pod, &sched, group, *gpus, Some(run), None, &[]);
        work.lock()
            .unwrap()
            .created
            .insert(pod.clone(), Instant::now());
        create_through(&pods_api, manifest).await;
    }
    let mut w = work.lock().unwrap();
    w.jobs.insert(
        name,
        Job {
            pods: pods.into_iter().map(|(p, _, _)| p).collect(),
            gang,
            arrived: Instant::now(),
        },
    );
    w.arrived += 1;
}

/// Delete every job whose pods have all finished (a list that fails, the
/// API server away, is tried at the next sweep).
async fn sweep(s: &Scenario, work: &Shared) {
    let api: Api<Pod> = Api::namespaced(s.client.clone(), &s.name);
    let Ok(pods) = api.list(&ListParams::default()).await else {
        return;
    };
    let finished: std::collections::BTreeSet<&str> = pods
        .items
        .iter()
        .filter(|p| is_finished(p))
        .filter_map(|p| p.metadata.name.as_deref())
        .collect();
    let done: Vec<(String, Vec<String>, bool)> = work
        .lock()
        .unwrap()
        .jobs
        .iter()
        .filter(|(_, j)| j.pods.iter().all(|p| finished.contains(p.as_str())))
        .map(|(n, j)| (n.clone(), j.pods.clone(), j.gang))
        .collect();
    let now = DeleteParams {
        grace_period_seconds: Some(0),
        ..DeleteParams::default()
    };
    for (name, pods, gang) in done {
        for pod in &pods {
            let _ = api.delete(pod, &now).await;
        }
        if gang {
            let _ = podgroups(&s.client, &s.name)
                .delete(&name, &DeleteParams::default())
                .await;
        }
        let mut w = work.lock().unwrap();
        if let Some(job) = w.jobs.remove(&name) {
            w.longest = w.longest.max(job.arrived.elapsed());
            w.done += 1;
        }
    }
}

/// Jobs arrive every 1–3 s and finished ones are swept every 3 s until
/// `stop`.
async fn churn(
    s: Arc<Scenario>,
    monitor: Arc<Monitor>,
    work: Shared,
    seed: u64,
    stop: Arc<AtomicBool>,
) {
    let mut rng = Rng(seed ^ 0x5DEE_CE66_D1CE_F00D);
    let (mut next_arrival, mut next_sweep) = (Instant::now(), Instant::now());
    while !stop.load(Ordering::Relaxed) {
        let now = Instant::now();
        if now >= next_arrival {
            let n = work.lock().unwrap().arrived;
            arrive(&s, &monitor, &work, &mut rng, n).await;
            next_arrival = now + Duration::from_millis(u64::from(rng.range(1000, 3000)));
        }
        if now >= next_sweep {
            sweep(&s, &work).await;
            next_sweep = now + Duration::from_secs(3);
        }
        // A pace, not a condition.
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

// ---------------------------------------------------------------------------
// Invariants.

/// The worst moment of one invariant.
#[derive(Clone, Default)]
struct Worst {
    value: f64,
    at_s: f64,
    fault: String,
    detail: String,
}

#[derive(Default)]
struct Invariant {
    worst: Option<Worst>,
    violations: u64,
    first_violation: Option<Worst>,
}

/// Every invariant by name, with how many checks ran and were skipped (an
/// API server that did not answer).
#[derive(Default)]
struct Book {
    invariants: BTreeMap<&'static str, Invariant>,
    checks: u64,
    skipped: u64,
    /// Pending pods past their grace found explained (summed over checks,
    /// and the most at once): the invariant was not vacuous.
    pending_checked: u64,
    pending_checked_max: u64,
}

impl Book {
    /// One observation of invariant `name`: `value` (higher is worse),
    /// `bad` when it breaks the invariant.
    fn note(
        &mut self,
        name: &'static str,
        value: f64,
        bad: bool,
        moment: (f64, &str),
        detail: String,
    ) {
        let inv = self.invariants.entry(name).or_default();
        let w = Worst {
            value,
            at_s: moment.0,
            fault: moment.1.to_string(),
            detail,
        };
        if bad {
            inv.violations += 1;
            inv.first_violation.get_or_insert_with(|| w.clone());
        }
        if inv.worst.as_ref().is_none_or(|x| value > x.value) {
            inv.worst = Some(w);
        }
    }

    fn violations(&self) -> u64 {
        self.invariants.values().map(|i| i.violations).sum()
    }
}

const CAPACITY: &str = "no node over capacity (used / allocatable, max over resources)";
const ONCE: &str = "no pod bound twice (Scheduled events beyond bound incarnations, rebinds)";
const PARTIAL: &str = "no gang partly bound 30 s or longer (longest window, s)";
const EXPLAINED: &str =
    "every pending pod explained within 20 s and a fault's recovery (pods not explained)";
const ALIVE: &str = "replicas alive (exits not caused by a fault)";
const RELOADS: &str = "every policy file applied or refused by each replica (misses)";
const COMPLETE: &str = "every job completes once the chaos ends (s to drain, bound 300)";

/// What one check of the invariants reads.
struct Check<'a> {
    s: &'a Scenario,
    monitor: &'a Monitor,
    work: &'a Shared,
    clock: &'a Clock,
    start: Instant,
}

impl Check<'_> {
    /// Check everything once; false when the API server did not answer.
    async fn run(&self, book: &Mutex<Book>) -> bool {
        let all: Api<Pod> = Api::all(self.s.client.clone());
        let nodes: Api<Node> = Api::all(self.s.client.clone());
        let events: Api<Event> = Api::namespaced(self.s.client.clone(), &self.s.name);
        let lp = ListParams::default().labels(&format!("dragon-e2e={}", self.s.name));
        let (Ok(pods), Ok(nodes), Ok(events)) = (
            all.list(&ListParams::default()).await,
            nodes.list(&lp).await,
            events.list(&ListParams::default()).await,
        ) else {
            return false;
        };
        let moment = (self.start.elapsed().as_secs_f64(), fault_label(self.clock));
        let moment = (moment.0, moment.1.as_str());
        let mut b = book.lock().unwrap();
        let (v, bad, d) = capacity(&pods.items, &nodes.items);
        b.note(CAPACITY, v, bad, moment, d);
        let (v, d) = self.bound_once(&events.items);
        b.note(ONCE, v, v > 0.0, moment, d);
        let (v, d) = self.partial();
        b.note(PARTIAL, v, v >= PARTIAL_MAX.as_secs_f64(), moment, d);
        let (v, d, checked) = self.unexplained(&pods.items, &events.items);
        b.note(EXPLAINED, v, v > 0.0, moment, d);
        b.pending_checked += checked;
        b.pending_checked_max = b.pending_checked_max.max(checked);
        true
    }

    /// Scheduled events beyond a pod's bound incarnations (each object
    /// counts its series), plus pods seen on two nodes.
    fn bound_once(&self, events: &[Event]) -> (f64, String) {
        let mut scheduled: BTreeMap<&str, usize> = BTreeMap::new();
        let mut refused = Vec::new();
        for e in events {
            let note = e.note.as_deref().unwrap_or("");
            if note.contains("already assigned") || note.contains("already bound") {
                refused.push(note.to_string());
            }
            if e.reason.as_deref() == Some("Scheduled")
                && let Some(pod) = e.regarding.as_ref().and_then(|r| r.name.as_deref())
            {
                let n = e.series.as_ref().map_or(1, |s| s.count.max(1) as usize);
                *scheduled.entry(pod).or_default() += n;
            }
        }
        let mut excess = 0;
        let mut detail = String::new();
        for (pod, n) in scheduled {
            let allowed = self.monitor.bound_incarnations(pod).max(1);
            if n > allowed {
                excess += n - allowed;
                let _ = write!(
                    detail,
                    "{pod}: {n} Scheduled for {allowed} incarnation(s); "
                );
            }
        }
        let rebound = self.monitor.rebound();
        for r in &rebound {
            let _ = write!(detail, "{} moved nodes; ", r.name);
        }
        for r in &refused {
            let _ = write!(detail, "refused: {r}; ");
        }
        ((excess + rebound.len() + refused.len()) as f64, detail)
    }

    /// The longest window any gang was partly bound.
    fn partial(&self) -> (f64, String) {
        let gangs = self.work.lock().unwrap().gangs.clone();
        gangs
            .iter()
            .map(|g| (self.monitor.max_partial(g, self.start), g))
            .max()
            .map_or((0.0, String::new()), |(d, g)| {
                (d.as_secs_f64(), format!("gang {g}"))
            })
    }

    /// Pods pending past the grace (from their creation, and from the
    /// end of every fault plus its recovery; not while a fault is on)
    /// without a FailedScheduling Event or without `PodScheduled=False`.
    /// Returns how many, which, and how many pending pods were checked.
    fn unexplained(&self, pods: &[Pod], events: &[Event]) -> (f64, String, u64) {
        {
            let c = self.clock.lock().unwrap();
            if c.active.is_some() || c.quiet_from > Instant::now() {
                return (0.0, String::new(), 0);
            }
        }
        let told: std::collections::BTreeSet<&str> = events
            .iter()
            .filter(|e| e.reason.as_deref() == Some("FailedScheduling"))
            .filter_map(|e| e.regarding.as_ref()?.name.as_deref())
            .collect();
        let created = self.work.lock().unwrap().created.clone();
        let mut missing = Vec::new();
        let mut checked = 0;
        for p in pods {
            let name = p.metadata.name.as_deref().unwrap_or("");
            if p.metadata.namespace.as_deref() != Some(self.s.name.as_str())
                || is_bound(p)
                || p.metadata.deletion_timestamp.is_some()
            {
                continue;
            }
            let Some(at) = created.get(name) else {
                continue;
            };
            if at.elapsed() < EXPLAIN_GRACE {
                continue;
            }
            checked += 1;
            let condition = p
                .status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|cs| {
                    cs.iter()
                        .any(|c| c.type_ == "PodScheduled" && c.status == "False")
                });
            if !told.contains(name) || !condition {
                missing.push(format!(
                    "{name} (pending {:.0} s, event {}, condition {})",
                    at.elapsed().as_secs_f64(),
                    told.contains(name),
                    condition
                ));
            }
        }
        (missing.len() as f64, missing.join(", "), checked)
    }
}

/// For every node of the scenario: the requests of the unfinished pods
/// bound to it against its allocatable. Returns the highest ratio, whether
/// any node is over, and which node.
fn capacity(pods: &[Pod], nodes: &[Node]) -> (f64, bool, String) {
    let mut worst = (0.0f64, false, String::new());
    for n in nodes {
        let name = n.metadata.name.clone().unwrap_or_default();
        let alloc = n
            .status
            .as_ref()
            .and_then(|s| s.allocatable.clone())
            .unwrap_or_default();
        let cap = Usage::of(&alloc);
        let pods_cap = alloc
            .get("pods")
            .and_then(|q| dragon_scheduler::quantity::value(&q.0).ok())
            .unwrap_or(u64::MAX);
        let on: Vec<&Pod> = pods
            .iter()
            .filter(|p| p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(name.as_str()))
            .filter(|p| !is_finished(p))
            .collect();
        let used = on
            .iter()
            .fold(Usage::default(), |u, p| u.plus(&requests(p)));
        let ratio = |a: u64, b: u64| if b == 0 { 0.0 } else { a as f64 / b as f64 };
        let r = ratio(used.gpus, cap.gpus)
            .max(ratio(used.cpu_milli, cap.cpu_milli))
            .max(ratio(used.memory_mib, cap.memory_mib))
            .max(ratio(on.len() as u64, pods_cap));
        let over = !used.fits(&cap) || on.len() as u64 > pods_cap;
        if r > worst.0 || over {
            worst = (
                r.max(worst.0),
                over || worst.1,
                format!(
                    "{name}: {} GPUs of {}, {} pods",
                    used.gpus,
                    cap.gpus,
                    on.len()
                ),
            );
        }
    }
    worst
}

/// Check the invariants every second until `stop`.
async fn watch_invariants(
    s: Arc<Scenario>,
    monitor: Arc<Monitor>,
    work: Shared,
    clock: Clock,
    book: Arc<Mutex<Book>>,
    start: Instant,
    stop: Arc<AtomicBool>,
) {
    let check = Check {
        s: &s,
        monitor: &monitor,
        work: &work,
        clock: &clock,
        start,
    };
    while !stop.load(Ordering::Relaxed) {
        let next = Instant::now() + Duration::from_secs(1);
        // A check cut short by an API server that hangs (etcd away) is
        // counted as skipped.
        let ok = tokio::time::timeout(Duration::from_secs(5), check.run(&book))
            .await
            .unwrap_or(false);
        {
            let mut b = book.lock().unwrap();
            b.checks += 1;
            b.skipped += u64::from(!ok);
        }
        tokio::time::sleep_until(next.max(Instant::now()).into()).await;
    }
}

// ---------------------------------------------------------------------------
// The chaos.

/// Everything a fault acts on.
struct Rig {
    s: Arc<Scenario>,
    replicas: Replicas,
    proxy: Proxy,
    clock: Clock,
    book: Arc<Mutex<Book>>,
    start: Instant,
    rng: Rng,
    /// Policy files written (the first is the one the replicas started
    /// with), and 429s answered during storms.
    swaps: Vec<Swap>,
    rejected: f64,
}

impl Rig {
    fn moment(&self) -> (f64, String) {
        (self.start.elapsed().as_secs_f64(), fault_label(&self.clock))
    }

    /// Inject one fault of `kind` and undo it; returns what was done.
    async fn inject(&mut self, kind: Kind) -> String {
        let secs =
            |rng: &mut Rng, lo: u32, hi: u32| Duration::from_secs(u64::from(rng.range(lo, hi)));
        match kind {
            Kind::ApiServerRestart => {
                let down = secs(&mut self.rng, 2, 8);
                self.outage("kube-apiserver", down).await
            }
            Kind::EtcdRestart => {
                let down = secs(&mut self.rng, 2, 8);
                self.outage("etcd", down).await
            }
            Kind::ConnectionsCut => {
                let length = secs(&mut self.rng, 5, 15);
                self.cuts(length).await
            }
            Kind::Latency => {
                let ms = self.rng.range(50, 400);
                let length = secs(&mut self.rng, 5, 15);
                self.latency(Duration::from_millis(u64::from(ms)), length)
                    .await
            }
            Kind::Storm429 => {
                let length = secs(&mut self.rng, 5, 12);
                self.storm(length).await
            }
            Kind::SchedulerKill => self.kill().await,
            Kind::LeaderPause => {
                let past = secs(&mut self.rng, 2, 8);
                self.pause(Duration::from_secs(u64::from(LEASE_SECS)) + past)
                    .await
            }
            Kind::PolicySwap => {
                // Another policy than the last good one, so there is a
                // change to apply.
                let last = self.swaps.iter().rev().find(|w| **w != Swap::Corrupt);
                let good: Vec<Swap> = [Swap::Baseline, Swap::Flaky, Swap::Dragon]
                    .into_iter()
                    .filter(|w| Some(w) != last)
                    .collect();
                let swap = good[self.rng.range(0, good.len() as u32 - 1) as usize];
                self.swap(swap).await
            }
            Kind::CorruptPolicy => self.swap(Swap::Corrupt).await,
        }
    }

    async fn outage(&mut self, component: &str, down: Duration) -> String {
        let kind = match component {
            "etcd" => Kind::EtcdRestart,
            _ => Kind::ApiServerRestart,
        };
        let _on = Active::new(&self.clock, format!("{component} down"), recovery(kind));
        let outage = control_plane().stop(component).await;
        let stopped = Instant::now();
        // A pace: the outage lasts this long.
        tokio::time::sleep(down).await;
        outage.end().await;
        format!(
            "down {:.1} s (back and ready)",
            stopped.elapsed().as_secs_f64()
        )
    }

    async fn cuts(&mut self, length: Duration) -> String {
        let _on = Active::new(
            &self.clock,
            "connections cut".into(),
            recovery(Kind::ConnectionsCut),
        );
        let (before, end) = (self.proxy.cut(), Instant::now() + length);
        let mut rounds = 0;
        while Instant::now() < end {
            self.proxy.cut_all();
            rounds += 1;
            // A pace between cuts.
            tokio::time::sleep(Duration::from_millis(u64::from(self.rng.range(1000, 3000)))).await;
        }
        format!(
            "{rounds} cuts over {:.0} s, {} connections closed",
            length.as_secs_f64(),
            self.proxy.cut() - before
        )
    }

    async fn latency(&mut self, latency: Duration, length: Duration) -> String {
        let _on = Active::new(
            &self.clock,
            format!("latency {} ms", latency.as_millis()),
            recovery(Kind::Latency),
        );
        /// Latency back to none when dropped.
        struct Reset<'a>(&'a Proxy);
        impl Drop for Reset<'_> {
            fn drop(&mut self) {
                self.0.set_latency(Duration::ZERO);
            }
        }
        self.proxy.set_latency(latency);
        let _reset = Reset(&self.proxy);
        tokio::time::sleep(length).await;
        format!(
            "{} ms per chunk for {:.0} s",
            latency.as_millis(),
            length.as_secs_f64()
        )
    }

    async fn storm(&mut self, length: Duration) -> String {
        let _on = Active::new(&self.clock, "429 storm".into(), recovery(Kind::Storm429));
        let metric = "apiserver_flowcontrol_rejected_requests_total";
        let before = level_metric(&self.s, metric).await;
        let storm = storm(&self.s).await;
        tokio::time::sleep(length).await;
        let rejected = level_metric(&self.s, metric).await - before;
        drop(storm);
        self.rejected += rejected;
        format!(
            "{rejected} requests rejected with 429 in {:.0} s",
            length.as_secs_f64()
        )
    }

    async fn kill(&mut self) -> String {
        let _on = Active::new(
            &self.clock,
            "replica killed".into(),
            recovery(Kind::SchedulerKill),
        );
        self.replicas.until_one_leader(30).await;
        let leader = self.replicas.leader();
        let i = match (leader, self.rng.range(0, 1)) {
            (Some(l), 0) => l,
            _ => self.rng.range(0, 1) as usize,
        };
        let role = if Some(i) == leader {
            "leader"
        } else {
            "standby"
        };
        self.replicas.live[i].kill();
        let killed = Instant::now();
        let fresh = self.replicas.start_one(&self.s);
        let gone = std::mem::replace(&mut self.replicas.live[i], fresh);
        let pid = gone.child.id();
        self.replicas.retired.push(gone);
        let led = self.replicas.until_one_leader(60).await;
        format!(
            "{role} (pid {pid}) SIGKILLed, a new replica ready in {:.1} s, one leader: {led}",
            killed.elapsed().as_secs_f64()
        )
    }

    async fn pause(&mut self, length: Duration) -> String {
        let _on = Active::new(
            &self.clock,
            "leader paused".into(),
            recovery(Kind::LeaderPause),
        );
        self.replicas.until_one_leader(30).await;
        let Some(i) = self.replicas.leader() else {
            return "no leader to pause".into();
        };
        let pid = self.replicas.live[i].child.id();
        self.replicas.live[i].pause();
        let thaw = Thaw(pid);
        tokio::time::sleep(length).await;
        drop(thaw);
        let thawed = Instant::now();
        let led = self.replicas.until_one_leader(60).await;
        format!(
            "pid {pid} frozen {:.0} s (lease {LEASE_SECS} s); one leader {:.1} s after the thaw: {led}",
            length.as_secs_f64(),
            thawed.elapsed().as_secs_f64()
        )
    }

    /// Replace the policy file; every live replica must count it applied
    /// (a good file) or refused (a corrupt one) within 30 s.
    async fn swap(&mut self, swap: Swap) -> String {
        let _on = Active::new(
            &self.clock,
            format!("policy {swap:?}"),
            recovery(Kind::PolicySwap),
        );
        let before = reloads(&self.replicas);
        swap.write(&self.replicas.policy, self.swaps.len());
        self.swaps.push(swap);
        let counted = |now: &[(f64, f64)]| {
            now.iter()
                .zip(&before)
                .all(|((s, f), (s0, f0))| match swap {
                    Swap::Corrupt => f > f0,
                    _ => s > s0,
                })
        };
        let ok = until_within(30, || async { counted(&reloads(&self.replicas)) }).await;
        let verb = if swap == Swap::Corrupt {
            "refused"
        } else {
            "applied"
        };
        let detail = format!("{swap:?}: {verb} by every replica: {ok}");
        let moment = self.moment();
        self.book.lock().unwrap().note(
            RELOADS,
            f64::from(u8::from(!ok)),
            !ok,
            (moment.0, &moment.1),
            format!(
                "{detail}; (successes, failures) before {before:?}, after {:?}",
                reloads(&self.replicas)
            ),
        );
        detail
    }

    /// Replicas that exited on their own are a violation: replaced so the
    /// run goes on.
    fn check_alive(&mut self) {
        let dead = self.replicas.replace_dead(&self.s);
        let moment = self.moment();
        let mut b = self.book.lock().unwrap();
        b.note(
            ALIVE,
            dead.len() as f64,
            !dead.is_empty(),
            (moment.0, &moment.1),
            {
                dead.iter()
                    .map(|(pid, log)| format!("pid {pid} exited:\n{log}"))
                    .collect::<Vec<_>>()
                    .join("\n")
            },
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_seeded_chaos_no_invariant_breaks_and_every_job_runs() {
    let _g = serial();
    let plan = Plan::from_env();
    println!(
        "chaos: seed {:#x}, {:.0} s of faults (DRAGON_CHAOS_SEED, DRAGON_CHAOS_MINUTES to change)",
        plan.seed,
        plan.length.as_secs_f64()
    );
    let s = Arc::new(Scenario::new("chaos").await);
    for i in 0..NODES {
        s.node(&format!("n{i}"), NODE_GPUS).await;
    }
    let _level = reject_level(&s).await;
    let proxy = Proxy::start(free_port(), api_server_addr());
    let kubeconfig = replica_kubeconfig(&s, proxy.addr).await;
    let dir = std::env::temp_dir().join(format!("dragon-chaos-policy-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let policy = dir.join("policy.wasm");
    Swap::Dragon.write(&policy, 0);
    // The gate would refuse the trapping policy before it served; the run
    // is of one that serves anyway, so every file is swapped in ungated.
    let extra = format!(
        "leaderElection: {{enabled: true, namespace: {}, leaseName: dragon-chaos, leaseDurationSeconds: {LEASE_SECS}}}\n\
         onPolicyError: fallback\nreloadGate: {{enabled: false}}\n",
        s.name
    );
    let mut replicas = Replicas {
        live: Vec::new(),
        retired: Vec::new(),
        policy,
        kubeconfig,
        extra,
    };
    for _ in 0..2 {
        let r = replicas.start_one(&s);
        replicas.live.push(r);
    }
    assert!(
        replicas.until_one_leader(30).await,
        "no single leader of the two replicas"
    );

    let monitor = Arc::new(Monitor::start(&s).await);
    let work: Shared = Arc::default();
    let clock: Clock = Arc::new(Mutex::new(FaultClock {
        active: None,
        quiet_from: Instant::now(),
    }));
    let book: Arc<Mutex<Book>> = Arc::default();
    let start = Instant::now();
    let stop_churn = Arc::new(AtomicBool::new(false));
    let stop_checks = Arc::new(AtomicBool::new(false));
    let churn = tokio::spawn(churn(
        s.clone(),
        monitor.clone(),
        work.clone(),
        plan.seed,
        stop_churn.clone(),
    ));
    let checks = tokio::spawn(watch_invariants(
        s.clone(),
        monitor.clone(),
        work.clone(),
        clock.clone(),
        book.clone(),
        start,
        stop_checks.clone(),
    ));

    let mut rig = Rig {
        s: s.clone(),
        replicas,
        proxy,
        clock,
        book: book.clone(),
        start,
        rng: Rng(plan.seed ^ 0xFA01_75ED),
        swaps: vec![Swap::Dragon],
        rejected: 0.0,
    };
    let mut schedule = Schedule::new(plan.seed);
    let mut records: Vec<Record> = Vec::new();
    // Faults one after another, a calm of 4–10 s between them, until the
    // length is reached and every kind has happened.
    tokio::time::sleep(Duration::from_secs(5)).await;
    while start.elapsed() < plan.length || !schedule.first_round_done() {
        let kind = schedule.next();
        let at = Instant::now();
        let detail = rig.inject(kind).await;
        let took_s = at.elapsed().as_secs_f64();
        println!("{:7.1} s  {kind:?}: {detail}", (at - start).as_secs_f64());
        records.push(Record {
            at_s: (at - start).as_secs_f64(),
            kind,
            took_s,
            detail,
        });
        rig.check_alive();
        if churn.is_finished() {
            panic!("the workload stopped: {:?}", churn.await);
        }
        // A pace between faults.
        let calm = rig.rng.range(4, 10);
        tokio::time::sleep(Duration::from_secs(u64::from(calm))).await;
    }
    let chaos_s = start.elapsed().as_secs_f64();

    // No more arrivals, no more faults: everything that arrived completes.
    stop_churn.store(true, Ordering::Relaxed);
    churn.await.expect("the workload");
    let drain = Instant::now();
    until_within(DRAIN_SECS, || async {
        sweep(&s, &work).await;
        work.lock().unwrap().jobs.is_empty()
    })
    .await;
    let drain_s = drain.elapsed().as_secs_f64();
    stop_checks.store(true, Ordering::Relaxed);
    checks.await.expect("the invariant monitor");
    rig.check_alive();
    {
        let w = work.lock().unwrap();
        let left: Vec<&String> = w.jobs.keys().collect();
        let moment = (start.elapsed().as_secs_f64(), "none");
        book.lock().unwrap().note(
            COMPLETE,
            drain_s,
            !left.is_empty(),
            moment,
            format!(
                "{} of {} jobs not finished: {left:?}",
                left.len(),
                w.arrived
            ),
        );
    }

    report(
        &records,
        &book.lock().unwrap(),
        &work.lock().unwrap(),
        &rig,
        chaos_s,
        drain_s,
    );
    let replicas = &rig.replicas;
    let logs: String = replicas
        .all()
        .iter()
        .map(|r| {
            format!(
                "--- replica pid {}:\n{}\n",
                r.child.id(),
                tail(&r.log(), 40)
            )
        })
        .collect();
    assert_eq!(
        book.lock().unwrap().violations(),
        0,
        "invariants broken (see the report above)\n{logs}"
    );
    // The invariants of the fault tests, and two healthy replicas, one
    // leading.
    s.assert_invariants(60, &replicas.all(), Some(&monitor))
        .await;
    for r in &replicas.live {
        assert_eq!(
            r.get("/healthz").map(|(code, _)| code),
            Some(200),
            "replica {} unhealthy:\n{}",
            r.child.id(),
            r.log()
        );
    }
    assert!(
        replicas.until_one_leader(30).await,
        "not exactly one leader at the end\n{logs}"
    );
    drop(rig);
    s.cleanup().await;
}

/// The faults injected, then each invariant's worst moment.
fn report(records: &[Record], book: &Book, work: &Work, rig: &Rig, chaos_s: f64, drain_s: f64) {
    println!("\n| at s | fault | took s | what happened |\n|---:|---|---:|---|");
    for r in records {
        println!(
            "| {:.1} | {:?} | {:.1} | {} |",
            r.at_s, r.kind, r.took_s, r.detail
        );
    }
    let mut counts: BTreeMap<Kind, usize> = BTreeMap::new();
    for r in records {
        *counts.entry(r.kind).or_default() += 1;
    }
    println!("\nfaults by kind: {counts:?}");
    println!(
        "\n| invariant | worst | at s | fault active | violations | detail |\n|---|---:|---:|---|---:|---|"
    );
    for (name, inv) in &book.invariants {
        let w = inv.worst.clone().unwrap_or_default();
        let detail = inv.first_violation.as_ref().map_or(w.detail.clone(), |v| {
            format!(
                "worst: {}; first violation at {:.1} s ({}): {}",
                w.detail, v.at_s, v.fault, v.detail
            )
        });
        println!(
            "| {name} | {:.2} | {:.1} | {} | {} | {} |",
            w.value, w.at_s, w.fault, inv.violations, detail
        );
    }
    let logs: String = rig.replicas.all().iter().map(|r| r.log()).collect();
    let count = |needle: &str| logs.lines().filter(|l| l.contains(needle)).count();
    println!(
        "\nreplica logs: {} watch errors, {} of them expired resource versions (relists); \
         {} pending pods past their grace checked ({} at most at once), all explained unless listed above",
        count("watch error"),
        count("too old resource version"),
        book.pending_checked,
        book.pending_checked_max
    );
    println!(
        "\nchaos: {chaos_s:.0} s, then {drain_s:.0} s to drain; {} jobs arrived, {} completed \
         (longest arrival to sweep {:.0} s); {} invariant checks ({} skipped, the API server away); \
         {} replicas started in all; {} policy files written; {} requests answered 429; \
         {} connections through the proxy",
        work.arrived,
        work.done,
        work.longest.as_secs_f64(),
        book.checks,
        book.skipped,
        rig.replicas.all().len(),
        rig.swaps.len() - 1,
        rig.rejected,
        rig.proxy.accepted()
    );
}
