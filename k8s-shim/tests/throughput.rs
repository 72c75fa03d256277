//! Throughput on a real control plane: pods per second bound by
//! `dragon-scheduler` and by the default kube-scheduler v1.37.2 on the same
//! KWOK cluster, with the same client-side API rate limits, then with the
//! limits raised.
//!
//! Every run gets the same nodes (created once) and a fresh namespace of lone
//! pods (no gangs), so both schedulers do the same job: dragon-scheduler runs
//! the `baseline` policy (kube-scheduler-like: pods one at a time,
//! LeastAllocated + BalancedAllocation), plus one run with `dragon`.
//!
//! - `stream` runs start the scheduler first, then create the pods (64
//!   concurrent creates); seconds = first pod creation → last pod bound;
//! - `backlog` runs create every pod first, then start the scheduler;
//!   seconds = scheduler start (process start, list, first decisions
//!   included) → last pod bound.
//!
//! "bind span" is first pod bound → last pod bound. Bind times are when the
//! test's own watch on the namespace sees `spec.nodeName` set. The CPU
//! columns are the CPU seconds each process used during the run (from
//! /proc), which say who was busy: the scheduler, the apiserver, etcd, KWOK
//! (which marks every bound pod Running), or the test itself (creates and
//! the watch); "machine busy" is the share of all cores busy in that window,
//! other people's work on a shared machine included.
//!
//! By default a smoke size (100 nodes, 300 pods) checks correctness only:
//! every pod bound, none bound twice or moved, no node over its
//! allocatable. Timing figures are printed, never asserted. The full size:
//!
//!     DRAGON_E2E_FULL=1 cargo test --release -p dragon-scheduler --test throughput -- --nocapture

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use common::*;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{Namespace, Node, Pod};
use kube::Client;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::watcher;
use serde_json::json;

/// The label on our nodes, and the pods' nodeSelector.
const NODE_LABEL: &str = "dragon-throughput";
/// Node allocatable: 8 pods of the size below fit (CPU and GPUs).
const NODE_CPU: &str = "4";
const NODE_MEMORY: &str = "16Gi";
const NODE_GPUS: &str = "8";
/// Every pod's requests.
const POD_CPU: &str = "500m";
const POD_MEMORY: &str = "1Gi";
const POD_GPUS: &str = "1";
/// Concurrent creates (nodes and pods) and deletes.
const CONCURRENCY: usize = 64;

#[derive(Clone, Copy, Debug, PartialEq)]
enum Sched {
    Kube,
    Dragon(&'static str),
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Mode {
    /// Scheduler running while the pods are created.
    Stream,
    /// Pods created first, then the scheduler started.
    Backlog,
}

#[derive(Clone, Copy, Debug)]
struct RunSpec {
    sched: Sched,
    /// Client-side (qps, burst), always set explicitly on both schedulers.
    limits: (u32, u32),
    mode: Mode,
    /// Pods per gang (each gang a `scheduling.k8s.io/v1beta1` PodGroup of
    /// that minCount), or lone pods.
    gang: Option<usize>,
    /// What each pod requests.
    pod: PodSize,
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum PodSize {
    /// `POD_CPU`, `POD_MEMORY`, `POD_GPUS`: 8 to a node.
    Gpu,
    /// 100m CPU and 100Mi, no GPU (`scheduler_perf`'s pod): 40 to a node,
    /// for runs with many more pods than GPUs.
    Small,
}

impl PodSize {
    fn requests(self) -> serde_json::Value {
        match self {
            PodSize::Gpu => json!({
                "requests": {"cpu": POD_CPU, "memory": POD_MEMORY, "nvidia.com/gpu": POD_GPUS},
                "limits": {"nvidia.com/gpu": POD_GPUS}}),
            PodSize::Small => json!({"requests": {"cpu": "100m", "memory": "100Mi"}}),
        }
    }
}

/// kube-scheduler's defaults (clientConnection qps/burst, v1.37).
const DEFAULT_LIMITS: (u32, u32) = (50, 100);
/// Raised far above what 2 cores can serve: effectively no client limit.
const RAISED_LIMITS: (u32, u32) = (5000, 10000);

fn runs(full: bool) -> Vec<RunSpec> {
    use Mode::*;
    use Sched::*;
    let r = |sched, limits, mode| RunSpec {
        sched,
        limits,
        mode,
        gang: None,
        pod: PodSize::Gpu,
    };
    let mut v = vec![
        r(Kube, DEFAULT_LIMITS, Stream),
        r(Dragon("baseline"), DEFAULT_LIMITS, Stream),
        r(Kube, RAISED_LIMITS, Stream),
        r(Dragon("baseline"), RAISED_LIMITS, Stream),
        r(Dragon("dragon"), RAISED_LIMITS, Stream),
    ];
    if full {
        v.extend([
            r(Kube, RAISED_LIMITS, Backlog),
            r(Dragon("baseline"), RAISED_LIMITS, Backlog),
        ]);
    }
    v
}

impl RunSpec {
    fn scheduler(&self) -> String {
        match self.sched {
            Sched::Kube => "kube-scheduler".into(),
            Sched::Dragon(p) => format!("dragon ({p})"),
        }
    }
    fn limits_text(&self) -> String {
        format!("qps {} / burst {}", self.limits.0, self.limits.1)
    }
    fn mode_text(&self) -> &'static str {
        match self.mode {
            Mode::Stream => "stream",
            Mode::Backlog => "backlog",
        }
    }
}

struct Outcome {
    spec: RunSpec,
    pods: usize,
    create_s: f64,
    total_s: f64,
    span_s: f64,
    cpu: BTreeMap<&'static str, f64>,
    policy_s: Option<f64>,
    /// Served by the apiserver during the run's window.
    api: Option<ApiRequests>,
    /// Per gang, seconds from its first member's creation and from its last
    /// member's creation to all its members bound (empty for lone pods).
    gang_s: Vec<(f64, f64)>,
    /// The scheduler's peak resident memory, MiB (VmHWM).
    peak_rss_mib: Option<f64>,
}

// ---------------------------------------------------------------------------
// CPU time of processes, from /proc/PID/stat.

fn clock_ticks() -> f64 {
    Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(100.0)
}

/// utime + stime of `pid`, seconds.
fn cpu_seconds(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = stat.rsplit_once(") ")?.1;
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks: f64 = f.get(11)?.parse::<f64>().ok()? + f.get(12)?.parse::<f64>().ok()?;
    Some(ticks / clock_ticks())
}

/// Peak resident memory of `pid` so far (VmHWM), MiB.
fn peak_rss_mib(pid: u32) -> Option<f64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let kib: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()?;
    Some(kib / 1024.0)
}

fn pid_of(run: &Path, name: &str) -> Option<u32> {
    std::fs::read_to_string(run.join("pids").join(format!("{name}.pid")))
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// The processes whose CPU time we report: (column, pid).
fn processes(sched_pid: Option<u32>) -> Vec<(&'static str, u32)> {
    let run = &control_plane().run;
    let mut v: Vec<(&'static str, u32)> = [
        ("apiserver", "kube-apiserver"),
        ("etcd", "etcd"),
        ("kwok", "kwok"),
        ("kcm", "kube-controller-manager"),
    ]
    .into_iter()
    .filter_map(|(col, name)| pid_of(run, name).map(|p| (col, p)))
    .collect();
    if let Some(p) = sched_pid {
        v.push(("scheduler", p));
    }
    v.push(("test", std::process::id()));
    v
}

/// The whole machine's (busy, total) CPU seconds, all cores, from /proc/stat.
fn machine_cpu() -> Option<(f64, f64)> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let f: Vec<f64> = stat
        .lines()
        .next()?
        .split_whitespace()
        .skip(1)
        .filter_map(|v| v.parse().ok())
        .collect();
    let total: f64 = f.iter().take(8).sum();
    let idle = f.get(3)? + f.get(4)?;
    let hz = clock_ticks();
    Some(((total - idle) / hz, total / hz))
}

/// CPU seconds per process, plus "machine busy" and "machine total".
fn cpu_sample(procs: &[(&'static str, u32)]) -> BTreeMap<&'static str, f64> {
    let mut m: BTreeMap<&'static str, f64> = procs
        .iter()
        .filter_map(|(col, pid)| cpu_seconds(*pid).map(|s| (*col, s)))
        .collect();
    if let Some((busy, total)) = machine_cpu() {
        m.insert("machine busy", busy);
        m.insert("machine total", total);
    }
    m
}

// ---------------------------------------------------------------------------
// The apiserver's own view: requests served and their mean latency, from its
// /metrics (apiserver_request_duration_seconds, server side).

/// (count, seconds) of POSTs of pods/binding and of events.
#[derive(Clone, Copy, Debug, Default)]
struct ApiRequests {
    binds: (f64, f64),
    events: (f64, f64),
}

fn env_value(key: &str) -> Option<String> {
    let env = std::fs::read_to_string(control_plane().run.join("env")).ok()?;
    env.lines()
        .find_map(|l| l.strip_prefix(&format!("{key}=")).map(str::to_string))
}

fn api_requests() -> Option<ApiRequests> {
    let out = Command::new("curl")
        .args(["-sf", "--max-time", "20", "--cacert"])
        .arg(env_value("DRAGON_CP_CA")?)
        .arg("-H")
        .arg(format!(
            "Authorization: Bearer {}",
            env_value("DRAGON_CP_TOKEN")?
        ))
        .arg(format!("{}/metrics", env_value("DRAGON_CP_APISERVER_URL")?))
        .output()
        .ok()?;
    let text = String::from_utf8(out.stdout).ok()?;
    let mut r = ApiRequests::default();
    for line in text.lines() {
        let (count, labels) =
            if let Some(l) = line.strip_prefix("apiserver_request_duration_seconds_count{") {
                (true, l)
            } else if let Some(l) = line.strip_prefix("apiserver_request_duration_seconds_sum{") {
                (false, l)
            } else {
                continue;
            };
        if !labels.contains(r#"verb="POST""#) {
            continue;
        }
        let slot = if labels.contains(r#"resource="pods""#)
            && labels.contains(r#"subresource="binding""#)
        {
            &mut r.binds
        } else if labels.contains(r#"resource="events""#) {
            &mut r.events
        } else {
            continue;
        };
        let v: f64 = line.rsplit(' ').next()?.parse().ok()?;
        if count {
            slot.0 += v;
        } else {
            slot.1 += v;
        }
    }
    Some(r)
}

impl ApiRequests {
    fn since(self, before: ApiRequests) -> ApiRequests {
        let d = |a: (f64, f64), b: (f64, f64)| (a.0 - b.0, a.1 - b.1);
        ApiRequests {
            binds: d(self.binds, before.binds),
            events: d(self.events, before.events),
        }
    }
}

/// "N, M ms" (requests, mean server-side latency).
fn requests_text((count, secs): (f64, f64)) -> String {
    if count < 0.5 {
        "0".into()
    } else {
        format!("{count:.0}, {:.1} ms", 1e3 * secs / count)
    }
}

// ---------------------------------------------------------------------------
// Nodes and pods.

/// Nodes `tp-{from}`..`tp-{to - 1}`.
async fn create_nodes(client: &Client, from: usize, to: usize) {
    let nodes: Api<Node> = Api::all(client.clone());
    futures::stream::iter(from..to)
        .map(|i| {
            let nodes = nodes.clone();
            async move {
                let alloc = json!({"cpu": NODE_CPU, "memory": NODE_MEMORY, "pods": "110", "nvidia.com/gpu": NODE_GPUS});
                let node = json!({
                    "apiVersion": "v1", "kind": "Node",
                    "metadata": {"name": format!("tp-{i:05}"), "annotations": {"kwok.x-k8s.io/node": "fake"},
                                 "labels": {"type": "kwok", NODE_LABEL: "yes"}},
                    "status": {"allocatable": alloc, "capacity": alloc}
                });
                nodes
                    .create(&PostParams::default(), &serde_json::from_value(node).unwrap())
                    .await
                    .map(|_| ())
            }
        })
        .buffer_unordered(CONCURRENCY)
        .try_collect::<Vec<()>>()
        .await
        .expect("create nodes");
}

/// Grow our nodes to `n` (from `have`), and wait until every one is Ready
/// and untainted.
async fn grow_nodes(client: &Client, have: usize, n: usize) {
    let t = Instant::now();
    create_nodes(client, have, n).await;
    let nodes_s = t.elapsed().as_secs_f64();
    let deadline = Instant::now() + Duration::from_secs(300 + n as u64 / 10);
    loop {
        let nodes = our_nodes(client).await;
        let usable = nodes.iter().filter(|n| node_usable(n)).count();
        if usable == n {
            break;
        }
        untaint_ready(client, &nodes).await;
        assert!(
            Instant::now() < deadline,
            "only {usable} of {n} nodes Ready and untainted in time"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    eprintln!(
        "{} nodes created in {nodes_s:.1} s ({:.0}/s), all {n} Ready and untainted after {:.1} s",
        n - have,
        (n - have) as f64 / nodes_s,
        t.elapsed().as_secs_f64()
    );
}

/// Delete our nodes (the control plane itself stops with this process).
async fn delete_nodes(client: &Client) {
    let nodes: Api<Node> = Api::all(client.clone());
    let _ = nodes
        .delete_collection(
            &DeleteParams::default(),
            &ListParams::default().labels(&format!("{NODE_LABEL}=yes")),
        )
        .await;
}

fn node_ready(n: &Node) -> bool {
    n.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// Remove the `node.kubernetes.io/not-ready` taint (put on at creation by
/// the TaintNodesByCondition admission plugin) from nodes KWOK made Ready.
/// The node lifecycle controller would do the same, at kube-controller-
/// manager's client rate (20 qps: 100 s for 1,000 nodes).
async fn untaint_ready(client: &Client, nodes: &[Node]) {
    let api: Api<Node> = Api::all(client.clone());
    let tainted: Vec<String> = nodes
        .iter()
        .filter(|n| node_ready(n) && !node_usable(n))
        .filter(|n| {
            n.spec
                .as_ref()
                .and_then(|s| s.taints.as_ref())
                .is_some_and(|t| t.iter().all(|t| t.key == "node.kubernetes.io/not-ready"))
        })
        .filter_map(|n| n.metadata.name.clone())
        .collect();
    futures::stream::iter(tainted)
        .map(|name| {
            let api = api.clone();
            async move {
                let patch = json!({"spec": {"taints": null}});
                let _ = api
                    .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                    .await;
            }
        })
        .buffer_unordered(CONCURRENCY)
        .collect::<Vec<()>>()
        .await;
}

fn node_usable(n: &Node) -> bool {
    let ready = node_ready(n);
    let tainted = n
        .spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .is_some_and(|t| !t.is_empty());
    ready && !tainted
}

async fn our_nodes(client: &Client) -> Vec<Node> {
    let nodes: Api<Node> = Api::all(client.clone());
    nodes
        .list(&ListParams::default().labels(&format!("{NODE_LABEL}=yes")))
        .await
        .unwrap()
        .items
}

/// Pod `i` of a run: a lone pod, or member `i % size` of gang `i / size`.
fn pod_name(i: usize, gang: Option<usize>) -> String {
    match gang {
        None => format!("p-{i:05}"),
        Some(size) => format!("g-{:05}-{:03}", i / size, i % size),
    }
}

fn gang_name(k: usize) -> String {
    format!("g-{k:05}")
}

/// One `scheduling.k8s.io/v1beta1` PodGroup per gang, minCount = its size:
/// the objects both schedulers gang-schedule natively.
async fn create_podgroups(client: &Client, ns: &str, gangs: usize, size: usize) {
    let api: Api<k8s_openapi::api::scheduling::v1beta1::PodGroup> =
        Api::namespaced(client.clone(), ns);
    futures::stream::iter(0..gangs)
        .map(|k| {
            let api = api.clone();
            async move {
                let pg = json!({
                    "apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
                    "metadata": {"name": gang_name(k), "namespace": ns},
                    "spec": {"schedulingPolicy": {"gang": {"minCount": size}}}
                });
                api.create(&PostParams::default(), &serde_json::from_value(pg).unwrap())
                    .await
                    .map(|_| ())
            }
        })
        .buffer_unordered(CONCURRENCY)
        .try_collect::<Vec<()>>()
        .await
        .expect("create PodGroups");
}

/// Create the run's pods in order, `CONCURRENCY` at a time (a gang's members
/// one after another); returns when each create was answered, by pod index.
async fn create_pods(
    client: &Client,
    ns: &str,
    scheduler: &str,
    n: usize,
    (gang, size): (Option<usize>, PodSize),
) -> Vec<Instant> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    futures::stream::iter(0..n)
        .map(|i| {
            let pods = pods.clone();
            async move {
                let mut pod = json!({
                    "apiVersion": "v1", "kind": "Pod",
                    "metadata": {"name": pod_name(i, gang), "namespace": ns},
                    "spec": {
                        "schedulerName": scheduler,
                        "nodeSelector": {NODE_LABEL: "yes"},
                        "terminationGracePeriodSeconds": 0,
                        "tolerations": [{"key": "kwok.x-k8s.io/node", "operator": "Exists", "effect": "NoSchedule"}],
                        "containers": [{"name": "c", "image": "fake", "resources": size.requests()}]
                    }
                });
                if let Some(size) = gang {
                    pod["spec"]["schedulingGroup"] = json!({"podGroupName": gang_name(i / size)});
                }
                pods.create(&PostParams::default(), &serde_json::from_value(pod).unwrap())
                    .await
                    .map(|_| (i, Instant::now()))
            }
        })
        .buffer_unordered(CONCURRENCY)
        .try_collect::<Vec<(usize, Instant)>>()
        .await
        .expect("create pods")
        .into_iter()
        .collect::<BTreeMap<usize, Instant>>()
        .into_values()
        .collect()
}

/// What the test's watch saw of each pod (by name).
#[derive(Default)]
struct Watched {
    /// name → (node, first seen bound at).
    bound: BTreeMap<String, (String, Instant)>,
    /// Pods seen bound to one node, then to another.
    moved: Vec<String>,
}

/// The namespace's pods as they are bound.
async fn watch_binds(client: &Client, ns: &str) -> PodWatch<Watched> {
    let on = |st: &mut Watched, event: watcher::Event<Pod>| {
        let now = Instant::now();
        let pod = match event {
            watcher::Event::Apply(p) | watcher::Event::InitApply(p) => p,
            _ => return,
        };
        let (Some(name), Some(node)) = (
            pod.metadata.name.clone(),
            pod.spec.and_then(|s| s.node_name).filter(|n| !n.is_empty()),
        ) else {
            return;
        };
        match st.bound.get(&name) {
            Some((n, _)) if *n != node => st.moved.push(name),
            Some(_) => {}
            None => {
                st.bound.insert(name, (node, now));
            }
        }
    };
    let (watch, ready) = PodWatch::start(client, ns, Duration::from_secs(60), on).await;
    assert!(ready, "the pod watch did not start");
    watch
}

/// How many pods were seen bound.
fn bound_count(watch: &PodWatch<Watched>) -> usize {
    watch.state.lock().unwrap().bound.len()
}

// ---------------------------------------------------------------------------
// Schedulers.

enum Running {
    Kube,
    Dragon(Scheduler),
}

impl Running {
    fn start(spec: &RunSpec, s: &Scenario) -> Running {
        let (qps, burst) = spec.limits;
        match spec.sched {
            Sched::Kube => {
                let mut cmd = Command::new(repo().join("tests/controlplane/scheduler.sh"));
                cmd.arg(&control_plane().run)
                    .arg(format!("--kube-api-qps={qps}"))
                    .arg(format!("--kube-api-burst={burst}"));
                // kube-scheduler's own gang scheduling (PodGroup gang policy).
                if spec.gang.is_some() {
                    cmd.arg("--feature-gates=GenericWorkload=true");
                }
                let status = cmd.status().unwrap();
                assert!(status.success(), "the default kube-scheduler did not start");
                Running::Kube
            }
            Sched::Dragon(policy) => Running::Dragon(Scheduler::start(
                s,
                policy,
                &format!("clientQps: {qps}\nclientBurst: {burst}\n"),
            )),
        }
    }

    fn pid(&self) -> Option<u32> {
        match self {
            Running::Kube => pid_of(&control_plane().run, "kube-scheduler"),
            Running::Dragon(d) => Some(d.child.id()),
        }
    }

    fn log(&self) -> String {
        match self {
            Running::Kube => {
                std::fs::read_to_string(control_plane().run.join("logs").join("kube-scheduler.log"))
                    .unwrap_or_default()
            }
            Running::Dragon(d) => d.log(),
        }
    }

    /// Seconds spent in policy hooks (dragon-scheduler's histogram sums).
    fn policy_seconds(&self) -> Option<f64> {
        let Running::Dragon(d) = self else {
            return None;
        };
        let (_, body) = d.get("/metrics")?;
        Some(
            body.lines()
                .filter(|l| l.starts_with("dragon_policy_hook_duration_seconds_sum"))
                .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
                .sum(),
        )
    }

    fn stop(self) {
        match self {
            Running::Kube => {
                let status = Command::new(repo().join("tests/controlplane/down.sh"))
                    .arg(&control_plane().run)
                    .arg("kube-scheduler")
                    .status()
                    .unwrap();
                assert!(status.success(), "kube-scheduler did not stop");
            }
            Running::Dragon(mut d) => d.kill(),
        }
    }
}

fn block<T>(f: impl FnOnce() -> T) -> T {
    tokio::task::block_in_place(f)
}

// ---------------------------------------------------------------------------
// One run.

/// What a run leaves behind.
#[derive(Clone, Copy, PartialEq)]
enum Clean {
    /// Its pods and namespace deleted, returning once the namespace is gone
    /// (so the next run starts quiet).
    Settle,
    /// Deleted, the namespace's deletion left to go on.
    Start,
    /// Nothing: the last run before the control plane stops.
    Leave,
}

/// One run in namespace `ns`.
async fn run(ns: &str, spec: RunSpec, pods: usize, after: Clean) -> Outcome {
    let s = Scenario::new(ns).await;
    let scheduler_name = match spec.sched {
        Sched::Kube => "default-scheduler".to_string(),
        Sched::Dragon(_) => s.scheduler_name(),
    };
    let watch = watch_binds(&s.client, &s.name).await;
    let mut sched = None;
    if spec.mode == Mode::Stream {
        sched = Some(block(|| Running::start(&spec, &s)));
    }
    if let Some(size) = spec.gang {
        create_podgroups(&s.client, &s.name, pods / size, size).await;
    }
    let procs = processes(sched.as_ref().and_then(Running::pid));
    let cpu0 = cpu_sample(&procs);
    let api0 = block(api_requests);

    let t_create = Instant::now();
    let created = create_pods(
        &s.client,
        &s.name,
        &scheduler_name,
        pods,
        (spec.gang, spec.pod),
    )
    .await;
    let create_s = t_create.elapsed().as_secs_f64();

    let (t0, procs, cpu0, api0) = match spec.mode {
        Mode::Stream => (t_create, procs, cpu0, api0),
        Mode::Backlog => {
            let procs = processes(None);
            let api0 = block(api_requests);
            let mut cpu0 = cpu_sample(&procs);
            // The scheduler process starts now, from zero.
            cpu0.insert("scheduler", 0.0);
            let t0 = Instant::now();
            let r = block(|| Running::start(&spec, &s));
            let mut procs = procs;
            if let Some(pid) = r.pid() {
                procs.push(("scheduler", pid));
            }
            sched = Some(r);
            (t0, procs, cpu0, api0)
        }
    };
    let sched = sched.unwrap();

    // Wait for every pod to be bound.
    let limit = Duration::from_secs(120 + pods as u64 / 10);
    loop {
        let n = bound_count(&watch);
        if n >= pods {
            break;
        }
        if t0.elapsed() > limit {
            let log = sched.log();
            let tail: String = log
                .lines()
                .rev()
                .take(40)
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
                .collect::<Vec<_>>()
                .join("\n");
            panic!(
                "{}: only {n} of {pods} pods bound after {} s; scheduler log tail:\n{tail}",
                spec.scheduler(),
                limit.as_secs()
            );
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let cpu1 = cpu_sample(&procs);
    let api = match (block(api_requests), api0) {
        (Some(a), Some(b)) => Some(a.since(b)),
        _ => None,
    };
    let policy_s = sched.policy_seconds();
    let peak_rss_mib = sched.pid().and_then(peak_rss_mib);
    let (first, last) = {
        let st = watch.state.lock().unwrap();
        let times = st.bound.values().map(|(_, t)| *t);
        (times.clone().min().unwrap(), times.max().unwrap())
    };
    let gang_s = spec
        .gang
        .map(|size| gang_seconds(&watch, &created, size))
        .unwrap_or_default();
    let cpu = cpu1
        .iter()
        .map(|(k, v)| (*k, v - cpu0.get(k).copied().unwrap_or(*v)))
        .collect();

    check(&s, &spec, &sched, &watch, pods).await;
    block(|| sched.stop());
    drop(watch);
    if after != Clean::Leave {
        clean(&s, after == Clean::Settle).await;
    }

    Outcome {
        spec,
        pods,
        create_s,
        total_s: last.duration_since(t0).as_secs_f64(),
        span_s: last.duration_since(first).as_secs_f64(),
        cpu,
        policy_s,
        api,
        gang_s,
        peak_rss_mib,
    }
}

/// Per gang: (first member created → all bound, last member created → all
/// bound), seconds.
fn gang_seconds(watch: &PodWatch<Watched>, created: &[Instant], size: usize) -> Vec<(f64, f64)> {
    let st = watch.state.lock().unwrap();
    created
        .chunks(size)
        .enumerate()
        .map(|(k, members)| {
            let bound = (0..members.len())
                .filter_map(|m| st.bound.get(&pod_name(k * size + m, Some(size))))
                .map(|(_, t)| *t)
                .max()
                .expect("every pod is bound");
            let first = members.iter().min().expect("a gang has members");
            let last = members.iter().max().expect("a gang has members");
            (
                bound.saturating_duration_since(*first).as_secs_f64(),
                bound.saturating_duration_since(*last).as_secs_f64(),
            )
        })
        .collect()
}

/// Correctness: every pod bound exactly once, to one node, none over capacity.
async fn check(s: &Scenario, spec: &RunSpec, sched: &Running, watch: &PodWatch<Watched>, n: usize) {
    let who = spec.scheduler();
    let moved = watch.state.lock().unwrap().moved.clone();
    assert!(
        moved.is_empty(),
        "{who}: pods moved between nodes: {moved:?}"
    );

    let pods: Api<Pod> = Api::namespaced(s.client.clone(), &s.name);
    let list = pods.list(&ListParams::default()).await.unwrap().items;
    assert_eq!(list.len(), n, "{who}: pods in the namespace");
    let mut per_node: BTreeMap<String, Vec<&Pod>> = BTreeMap::new();
    for p in &list {
        let node = p
            .spec
            .as_ref()
            .and_then(|s| s.node_name.clone())
            .unwrap_or_default();
        assert!(
            !node.is_empty(),
            "{who}: pod {:?} not bound",
            p.metadata.name
        );
        per_node.entry(node).or_default().push(p);
    }

    // No node over its allocatable (CPU, memory, GPUs, pod count); only our
    // pods are on our nodes (the previous run's were deleted).
    let nodes: BTreeMap<String, Node> = our_nodes(&s.client)
        .await
        .into_iter()
        .map(|n| (n.metadata.name.clone().unwrap(), n))
        .collect();
    for (node, on) in &per_node {
        let alloc = nodes
            .get(node)
            .unwrap_or_else(|| panic!("{who}: a pod is bound to {node}, not one of ours"))
            .status
            .as_ref()
            .and_then(|s| s.allocatable.clone())
            .unwrap_or_default();
        use dragon_scheduler::quantity;
        let q = |m: &BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>,
                 k: &str| m.get(k).map(|q| q.0.clone()).unwrap_or_default();
        let (mut cpu, mut mem, mut gpu) = (0u64, 0u64, 0u64);
        for p in on {
            for c in &p.spec.as_ref().unwrap().containers {
                let r = c
                    .resources
                    .as_ref()
                    .and_then(|r| r.requests.clone())
                    .unwrap_or_default();
                cpu += quantity::cpu_milli(&q(&r, "cpu")).unwrap_or(0);
                mem += quantity::value(&q(&r, "memory"))
                    .map(|b| b.div_ceil(1 << 20))
                    .unwrap_or(0);
                gpu += quantity::value(&q(&r, "nvidia.com/gpu")).unwrap_or(0);
            }
        }
        let cap_cpu = quantity::cpu_milli(&q(&alloc, "cpu")).unwrap();
        let cap_mem = quantity::value(&q(&alloc, "memory"))
            .map(|b| b.div_ceil(1 << 20))
            .unwrap();
        let cap_gpu = quantity::value(&q(&alloc, "nvidia.com/gpu")).unwrap();
        let cap_pods = quantity::value(&q(&alloc, "pods")).unwrap() as usize;
        assert!(
            cpu <= cap_cpu && mem <= cap_mem && gpu <= cap_gpu && on.len() <= cap_pods,
            "{who}: node {node} over capacity: {} pods, cpu {cpu}m/{cap_cpu}m, memory {mem}/{cap_mem} MiB, GPUs {gpu}/{cap_gpu}",
            on.len()
        );
    }

    // Bound once: no bind was refused because the pod was already bound, and
    // no pod has two Scheduled events (events may lag; fewer is fine).
    let log = sched.log();
    for needle in ["already assigned", "already bound"] {
        assert!(
            !log.contains(needle),
            "{who}: a bind of a bound pod ({needle})"
        );
    }
    let events: Api<k8s_openapi::api::events::v1::Event> =
        Api::namespaced(s.client.clone(), &s.name);
    let mut scheduled: BTreeMap<String, usize> = BTreeMap::new();
    for e in events.list(&ListParams::default()).await.unwrap().items {
        if e.reason.as_deref() == Some("Scheduled")
            && let Some(pod) = e.regarding.and_then(|r| r.name)
        {
            *scheduled.entry(pod).or_default() += 1;
        }
    }
    let twice: Vec<_> = scheduled.iter().filter(|(_, n)| **n > 1).collect();
    assert!(twice.is_empty(), "{who}: pods scheduled twice: {twice:?}");
}

/// Delete the run's pods at once (grace 0: no kubelet here), then its
/// namespace; with `wait`, wait until the namespace is gone too (its Events
/// are deleted in the background), so the next run starts quiet.
async fn clean(s: &Scenario, wait: bool) {
    let started = Instant::now();
    let pods: Api<Pod> = Api::namespaced(s.client.clone(), &s.name);
    let names: Vec<String> = pods
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|p| p.metadata.name)
        .collect();
    let dp = DeleteParams {
        grace_period_seconds: Some(0),
        ..DeleteParams::default()
    };
    futures::stream::iter(names)
        .map(|name| {
            let (pods, dp) = (pods.clone(), dp.clone());
            async move {
                let _ = pods.delete(&name, &dp).await;
            }
        })
        .buffer_unordered(CONCURRENCY)
        .collect::<Vec<()>>()
        .await;
    let ns: Api<Namespace> = Api::all(s.client.clone());
    let _ = ns.delete(&s.name, &DeleteParams::default()).await;
    if !wait {
        return;
    }
    let deadline = Instant::now() + Duration::from_secs(180);
    while ns.get_opt(&s.name).await.ok().flatten().is_some() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    eprintln!(
        "  cleaned {} in {:.1} s",
        s.name,
        started.elapsed().as_secs_f64()
    );
}

// ---------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_per_second_kube_scheduler_vs_dragon_scheduler() {
    let _g = serial();
    let full = std::env::var("DRAGON_E2E_FULL").is_ok_and(|v| v == "1");
    let (n_nodes, n_pods) = if full { (1000, 5000) } else { (100, 300) };
    let cp = control_plane();
    let client = client().await;
    ensure_crd(&client).await;

    grow_nodes(&client, 0, n_nodes).await;

    let mut outcomes = Vec::new();
    for (i, spec) in runs(full).into_iter().enumerate() {
        eprintln!(
            "run {}: {}, {}, {}",
            i + 1,
            spec.scheduler(),
            spec.limits_text(),
            spec.mode_text()
        );
        let after = if full { Clean::Settle } else { Clean::Start };
        let o = run(&format!("tp-{}", i + 1), spec, n_pods, after).await;
        eprintln!(
            "  {} pods created in {:.1} s, all bound after {:.1} s: {:.1} pods/s",
            o.pods,
            o.create_s,
            o.total_s,
            o.pods as f64 / o.total_s
        );
        outcomes.push(o);
    }

    delete_nodes(&client).await;
    let _ = cp;

    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!(
        "\nthroughput: {n_nodes} KWOK nodes ({NODE_CPU} CPU, {NODE_MEMORY}, {NODE_GPUS} GPUs), {n_pods} lone pods \
         ({POD_CPU} CPU, {POD_MEMORY}, {POD_GPUS} GPU); {cores} cores shared with other work (load average now {})",
        load.split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" ")
    );
    println!(
        "pods created {CONCURRENCY} at a time; \
         stream: first creation -> last bound; backlog: scheduler start -> last bound\n"
    );
    println!(
        "| scheduler | client limits | mode | pods | create s | seconds | pods/s | bind span s | bound/s in span |"
    );
    println!("|---|---|---|---:|---:|---:|---:|---:|---:|");
    for o in &outcomes {
        println!(
            "| {} | {} | {} | {} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} |",
            o.spec.scheduler(),
            o.spec.limits_text(),
            o.spec.mode_text(),
            o.pods,
            o.create_s,
            o.total_s,
            o.pods as f64 / o.total_s,
            o.span_s,
            o.pods as f64 / o.span_s.max(1e-3)
        );
    }
    println!(
        "\nRequests the apiserver served during each run (the same window as 'seconds'), \
         with their mean server-side latency (apiserver_request_duration_seconds):\n"
    );
    println!("| scheduler | client limits | mode | binding POSTs | event POSTs (any client) |");
    println!("|---|---|---|---:|---:|");
    for o in &outcomes {
        let (b, e) = o.api.map_or_else(
            || ("-".into(), "-".into()),
            |a| (requests_text(a.binds), requests_text(a.events)),
        );
        println!(
            "| {} | {} | {} | {b} | {e} |",
            o.spec.scheduler(),
            o.spec.limits_text(),
            o.spec.mode_text()
        );
    }
    println!("\nCPU seconds used during each run (the same window as 'seconds'):\n");
    println!(
        "| scheduler | client limits | mode | scheduler | (in policy) | apiserver | etcd | kwok | kcm | test | machine busy |"
    );
    println!("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    for o in &outcomes {
        let c = |k: &str| {
            o.cpu
                .get(k)
                .map_or_else(|| "-".to_string(), |v| format!("{v:.1}"))
        };
        let busy = match (o.cpu.get("machine busy"), o.cpu.get("machine total")) {
            (Some(b), Some(t)) if *t > 0.0 => format!("{:.0} %", 100.0 * b / t),
            _ => "-".into(),
        };
        println!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {busy} |",
            o.spec.scheduler(),
            o.spec.limits_text(),
            o.spec.mode_text(),
            c("scheduler"),
            o.policy_s.map_or_else(|| "-".into(), |v| format!("{v:.2}")),
            c("apiserver"),
            c("etcd"),
            c("kwok"),
            c("kcm"),
            c("test")
        );
    }
}

// ---------------------------------------------------------------------------
// Gangs.

/// Gang sizes of the full run: the shapes of kube-scheduler's own
/// `scheduler_perf` gang workloads, small to large.
const GANG_SIZES: [usize; 3] = [8, 64, 512];
/// Pods per gang run at full size (a whole number of gangs of every size).
const GANG_PODS: usize = 4096;

/// A row of the gang table.
fn gang_row(n_nodes: usize, o: &Outcome) -> String {
    let from_first: Vec<f64> = o.gang_s.iter().map(|g| g.0).collect();
    let from_last: Vec<f64> = o.gang_s.iter().map(|g| g.1).collect();
    let cpu = o.cpu.get("scheduler").map_or_else(
        || "-".to_string(),
        |c| format!("{:.2}", 1000.0 * c / o.pods as f64),
    );
    format!(
        "| {n_nodes} | {} | {} | {:.1} | {:.2} / {:.2} | {:.2} / {:.2} | {cpu} | {} |",
        o.spec.gang.unwrap_or(1),
        o.spec.scheduler(),
        o.pods as f64 / o.total_s,
        quantile(&from_first, 0.5),
        quantile(&from_first, 0.99),
        quantile(&from_last, 0.5),
        quantile(&from_last, 0.99),
        o.peak_rss_mib
            .map_or_else(|| "-".to_string(), |m| format!("{m:.0}"))
    )
}

/// The `q`-quantile (nearest rank) of `v`.
fn quantile(v: &[f64], q: f64) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    let rank = ((q * v.len() as f64).ceil() as usize).clamp(1, v.len());
    v[rank - 1]
}

/// Gangs bound by kube-scheduler v1.37.2 with its own gang scheduling
/// (`GenericWorkload`) and by dragon-scheduler with `dragon`, on the same
/// nodes, the same `scheduling.k8s.io/v1beta1` PodGroups (minCount = the
/// gang's size) and the same raised client limits, scheduler running while
/// the gangs are created (`stream`). Every pod bound once, none moved, no
/// node over capacity; timings printed, never asserted. Full size
/// (`DRAGON_E2E_FULL=1`): 1,000 then 5,000 nodes, gangs of 8, 64 and 512,
/// 4,096 pods a run; by default 100 nodes, gangs of 8 and 64, 128 pods.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gangs_per_second_kube_scheduler_vs_dragon_scheduler() {
    let _g = serial();
    let full = std::env::var("DRAGON_E2E_FULL").is_ok_and(|v| v == "1");
    let (node_counts, sizes, n_pods): (&[usize], &[usize], usize) = if full {
        (&[1000, 5000], &GANG_SIZES, GANG_PODS)
    } else {
        (&[100], &GANG_SIZES[..2], 128)
    };
    let client = client().await;
    ensure_crd(&client).await;

    let mut rows = Vec::new();
    let mut have = 0;
    for &n_nodes in node_counts {
        grow_nodes(&client, have, n_nodes).await;
        have = n_nodes;
        for &size in sizes {
            for sched in [Sched::Kube, Sched::Dragon("dragon")] {
                let spec = RunSpec {
                    sched,
                    limits: RAISED_LIMITS,
                    mode: Mode::Stream,
                    gang: Some(size),
                    pod: PodSize::Gpu,
                };
                let ns = format!("tg-{n_nodes}-{size}-{}", rows.len() % 2);
                eprintln!("{n_nodes} nodes, gangs of {size}: {}", spec.scheduler());
                // The namespace's deletion goes on beside the next run (it
                // takes minutes); runs alternate between the schedulers.
                let o = run(&ns, spec, n_pods, Clean::Start).await;
                eprintln!("{}", gang_row(n_nodes, &o));
                rows.push((n_nodes, o));
            }
        }
    }
    // dragon-scheduler's memory with many pods on the largest cluster:
    // gangs of 8 small pods (no GPUs, so they all fit).
    let many = std::env::var("DRAGON_E2E_MEMORY_PODS")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
        .unwrap_or(if full { 100_000 } else { 1_000 });
    let spec = RunSpec {
        sched: Sched::Dragon("dragon"),
        limits: RAISED_LIMITS,
        mode: Mode::Stream,
        gang: Some(8),
        pod: PodSize::Small,
    };
    eprintln!("{have} nodes, {many} small pods in gangs of 8: dragon");
    let memory = run("tg-memory", spec, many / 8 * 8, Clean::Leave).await;
    delete_nodes(&client).await;

    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!(
        "\ngangs: KWOK nodes ({NODE_CPU} CPU, {NODE_MEMORY}, {NODE_GPUS} GPUs), {n_pods} pods a run \
         ({POD_CPU} CPU, {POD_MEMORY}, {POD_GPUS} GPU) in scheduling.k8s.io/v1beta1 PodGroups, \
         created {CONCURRENCY} at a time; client limits qps {} / burst {}; load average now {}\n",
        RAISED_LIMITS.0,
        RAISED_LIMITS.1,
        load.split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" ")
    );
    println!(
        "| nodes | gang | scheduler | pods/s | gang created → bound p50 / p99 s | \
         last member created → bound p50 / p99 s | scheduler CPU-s per 1,000 pods | peak RSS MiB |"
    );
    println!("|---:|---:|---|---:|---:|---:|---:|---:|");
    for (n_nodes, o) in &rows {
        println!("{}", gang_row(*n_nodes, o));
    }
    println!(
        "\ndragon-scheduler with {have} nodes and {} pods (gangs of 8, 100m CPU, 100Mi): \
         peak RSS {} MiB; all bound in {:.1} s ({:.1} pods/s), {:.1} CPU-s",
        memory.pods,
        memory
            .peak_rss_mib
            .map_or_else(|| "-".to_string(), |m| format!("{m:.0}")),
        memory.total_s,
        memory.pods as f64 / memory.total_s,
        memory.cpu.get("scheduler").copied().unwrap_or(f64::NAN)
    );
}
