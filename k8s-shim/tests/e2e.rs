//! End-to-end tests of `dragon-scheduler` against a real control plane
//! (etcd, kube-apiserver, kube-controller-manager, KWOK) built from Go
//! modules by `tests/controlplane/build.sh` and started on 127.0.0.1.
//!
//! One control plane serves the whole file; scenarios run one at a time,
//! each with its own nodes, namespace and scheduler name.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::Client;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::{Value, json};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

struct ControlPlane {
    kubeconfig: PathBuf,
}

static CP: OnceLock<ControlPlane> = OnceLock::new();
static SERIAL: Mutex<()> = Mutex::new(());

/// Start (once) the control plane; it is stopped by up.sh's owner watch
/// when this test process exits.
fn control_plane() -> &'static ControlPlane {
    CP.get_or_init(|| {
        let run = std::env::temp_dir().join(format!("dragon-e2e-{}", std::process::id()));
        let started = Instant::now();
        let status = Command::new(repo().join("tests/controlplane/up.sh"))
            .arg("--owner-pid")
            .arg(std::process::id().to_string())
            .arg(&run)
            .status()
            .expect("run tests/controlplane/up.sh");
        assert!(
            status.success(),
            "the test control plane did not start (see {}/logs)",
            run.display()
        );
        eprintln!(
            "control plane ready in {:.1} s",
            started.elapsed().as_secs_f64()
        );
        ControlPlane {
            kubeconfig: run.join("kubeconfig"),
        }
    })
}

fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|p| p.into_inner())
}

async fn client() -> Client {
    let cp = control_plane();
    let kc = kube::config::Kubeconfig::read_from(&cp.kubeconfig).unwrap();
    let config = kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .unwrap();
    Client::try_from(config).unwrap()
}

fn podgroups(client: &Client, ns: &str) -> Api<DynamicObject> {
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("scheduling.x-k8s.io", "v1alpha1", "PodGroup"),
        "podgroups",
    );
    Api::namespaced_with(client.clone(), ns, &ar)
}

/// A test scenario: its namespace, nodes and scheduler name.
struct Scenario {
    client: Client,
    name: String,
}

impl Scenario {
    async fn new(name: &str) -> Scenario {
        let client = client().await;
        ensure_crd(&client).await;
        let ns: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
        let _ = ns
            .create(
                &PostParams::default(),
                &serde_json::from_value(json!({"metadata": {"name": name}})).unwrap(),
            )
            .await;
        Scenario {
            client,
            name: name.to_string(),
        }
    }

    fn scheduler_name(&self) -> String {
        format!("dragon-{}", self.name)
    }

    async fn node(&self, name: &str, gpus: u32) {
        let nodes: Api<Node> = Api::all(self.client.clone());
        let alloc = json!({"cpu": "32", "memory": "128Gi", "pods": "110", "nvidia.com/gpu": gpus.to_string()});
        let node = json!({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": format!("{}-{name}", self.name), "annotations": {"kwok.x-k8s.io/node": "fake"},
                         "labels": {"type": "kwok", "dragon-e2e": self.name}},
            "status": {"allocatable": alloc, "capacity": alloc}
        });
        nodes
            .create(
                &PostParams::default(),
                &serde_json::from_value(node).unwrap(),
            )
            .await
            .unwrap();
    }

    async fn podgroup(&self, name: &str, min_member: u32, annotations: Value) {
        let pg = json!({
            "apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": self.name, "annotations": annotations},
            "spec": {"minMember": min_member, "scheduleTimeoutSeconds": 60}
        });
        podgroups(&self.client, &self.name)
            .create(&PostParams::default(), &serde_json::from_value(pg).unwrap())
            .await
            .unwrap();
    }

    /// A pod of ours; `group` = (podgroup, role, index); `seconds` = run time.
    async fn pod(
        &self,
        name: &str,
        group: Option<(&str, &str, u32)>,
        gpus: u32,
        seconds: Option<u32>,
    ) {
        let mut labels = json!({});
        if let Some((g, role, index)) = group {
            labels = json!({"scheduling.x-k8s.io/pod-group": g, "dragon.dev/role": role, "dragon.dev/index": index.to_string()});
        }
        let mut annotations = json!({});
        if let Some(s) = seconds {
            annotations = json!({"dragon.dev/complete-after-seconds": s.to_string()});
        }
        let pod = json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": self.name, "labels": labels, "annotations": annotations},
            "spec": {
                "schedulerName": self.scheduler_name(),
                "nodeSelector": {"dragon-e2e": self.name},
                "tolerations": [{"key": "kwok.x-k8s.io/node", "operator": "Exists", "effect": "NoSchedule"}],
                "containers": [{"name": "c", "image": "fake",
                    "resources": {"requests": {"cpu": "100m", "memory": "128Mi", "nvidia.com/gpu": gpus.to_string()},
                                  "limits": {"nvidia.com/gpu": gpus.to_string()}}}]
            }
        });
        let pods: Api<Pod> = Api::namespaced(self.client.clone(), &self.name);
        pods.create(
            &PostParams::default(),
            &serde_json::from_value(pod).unwrap(),
        )
        .await
        .unwrap();
    }

    async fn pods(&self) -> Vec<Pod> {
        let pods: Api<Pod> = Api::namespaced(self.client.clone(), &self.name);
        pods.list(&ListParams::default()).await.unwrap().items
    }

    /// Node of each pod with `prefix`, `None` when unbound.
    async fn placement(&self, prefix: &str) -> BTreeMap<String, Option<String>> {
        self.pods()
            .await
            .into_iter()
            .filter(|p| p.metadata.name.as_deref().unwrap_or("").starts_with(prefix))
            .map(|p| {
                (
                    p.metadata.name.clone().unwrap(),
                    p.spec.and_then(|s| s.node_name),
                )
            })
            .collect()
    }

    async fn phase(&self, name: &str) -> String {
        let pods: Api<Pod> = Api::namespaced(self.client.clone(), &self.name);
        pods.get(name)
            .await
            .ok()
            .and_then(|p| p.status)
            .and_then(|s| s.phase)
            .unwrap_or_default()
    }

    async fn events_for(&self, pod: &str) -> Vec<(String, String)> {
        let events: Api<k8s_openapi::api::events::v1::Event> =
            Api::namespaced(self.client.clone(), &self.name);
        events
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .into_iter()
            .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(pod))
            .map(|e| (e.reason.unwrap_or_default(), e.note.unwrap_or_default()))
            .collect()
    }

    async fn cleanup(&self) {
        let nodes: Api<Node> = Api::all(self.client.clone());
        let lp = ListParams::default().labels(&format!("dragon-e2e={}", self.name));
        for n in nodes.list(&lp).await.unwrap().items {
            let _ = nodes
                .delete(
                    n.metadata.name.as_deref().unwrap(),
                    &DeleteParams::default(),
                )
                .await;
        }
        let ns: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(self.client.clone());
        let _ = ns.delete(&self.name, &DeleteParams::default()).await;
    }
}

async fn ensure_crd(client: &Client) {
    let crds: Api<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition> =
        Api::all(client.clone());
    if crds.get("podgroups.scheduling.x-k8s.io").await.is_ok() {
        return;
    }
    let text = std::fs::read_to_string(repo().join("k8s-shim/deploy/podgroup-crd.yaml")).unwrap();
    let crd = serde_norway::from_str(&text).unwrap();
    let _ = crds.create(&PostParams::default(), &crd).await;
    // Wait until the API serves it.
    let deadline = Instant::now() + Duration::from_secs(30);
    while podgroups(client, "default")
        .list(&ListParams::default())
        .await
        .is_err()
    {
        assert!(Instant::now() < deadline, "the PodGroup CRD was not served");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Wait until `check` holds, failing with `what` after `secs`.
async fn until<F, Fut>(secs: u64, what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + Duration::from_secs(secs);
    while !check().await {
        assert!(
            Instant::now() < deadline,
            "timed out after {secs} s waiting for: {what}"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A running `dragon-scheduler` process.
struct Scheduler {
    child: Child,
    dir: PathBuf,
    metrics: String,
}

impl Scheduler {
    fn start(s: &Scenario, policy: &str, extra: &str) -> Scheduler {
        let dir = std::env::temp_dir().join(format!(
            "dragon-e2e-sched-{}-{}-{}",
            std::process::id(),
            s.name,
            free_port()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let metrics = format!("127.0.0.1:{}", free_port());
        let config = format!(
            "schedulerName: {}\npolicy: {policy}\nmetricsAddr: {metrics}\ncacheDir: {}\nroundIntervalMs: 100\n{extra}",
            s.scheduler_name(),
            dir.join("cache").display()
        );
        std::fs::write(dir.join("config.yaml"), config).unwrap();
        let log = std::fs::File::create(dir.join("scheduler.log")).unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_dragon-scheduler"))
            .arg("--config")
            .arg(dir.join("config.yaml"))
            .arg("--kubeconfig")
            .arg(&control_plane().kubeconfig)
            .env("DRAGON_LOG", "info")
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start dragon-scheduler");
        let mut sched = Scheduler {
            child,
            dir,
            metrics,
        };
        let deadline = Instant::now() + Duration::from_secs(60);
        while sched.get("/readyz").map(|(code, _)| code) != Some(200) {
            if let Ok(Some(status)) = sched.child.try_wait() {
                panic!("dragon-scheduler exited ({status}):\n{}", sched.log());
            }
            assert!(
                Instant::now() < deadline,
                "dragon-scheduler not ready:\n{}",
                sched.log()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        sched
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("scheduler.log")).unwrap_or_default()
    }

    fn get(&self, path: &str) -> Option<(u16, String)> {
        let mut s = TcpStream::connect(&self.metrics).ok()?;
        s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
        write!(s, "GET {path} HTTP/1.0\r\nHost: x\r\n\r\n").ok()?;
        let mut out = String::new();
        s.read_to_string(&mut out).ok()?;
        let code = out.split_whitespace().nth(1)?.parse().ok()?;
        let body = out
            .split_once("\r\n\r\n")
            .map(|(_, b)| b.to_string())
            .unwrap_or_default();
        Some((code, body))
    }

    fn metric(&self, line_prefix: &str) -> f64 {
        let (_, body) = self.get("/metrics").unwrap_or_default();
        body.lines()
            .find(|l| l.starts_with(line_prefix))
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|v| v.parse().ok())
            .unwrap_or(0.0)
    }

    fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Scheduler {
    fn drop(&mut self) {
        self.kill();
    }
}

fn bound(p: &BTreeMap<String, Option<String>>) -> usize {
    p.values().filter(|n| n.is_some()).count()
}

/// Write a bundled policy to `to` the way a ConfigMap update lands: a new
/// file renamed over the old one.
fn export(name: &str, to: &Path) {
    let bytes = dragon_bundled::by_name(name).expect("a bundled policy");
    let tmp = to.with_extension("tmp");
    std::fs::write(&tmp, bytes).unwrap();
    std::fs::rename(&tmp, to).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_gangs_that_cannot_both_fit_run_one_whole_then_the_other() {
    let _g = serial();
    let s = Scenario::new("gangs").await;
    s.node("a", 4).await;
    s.node("b", 4).await;
    let sched = Scheduler::start(&s, "dragon", "");
    s.podgroup("first", 7, json!({})).await;
    s.podgroup("second", 7, json!({})).await;
    for (g, secs) in [("first", 12), ("second", 5)] {
        s.pod(&format!("{g}-ps-0"), Some((g, "ps", 0)), 0, Some(secs))
            .await;
        for i in 0..6 {
            s.pod(
                &format!("{g}-worker-{i}"),
                Some((g, "worker", i)),
                1,
                Some(secs),
            )
            .await;
        }
    }
    until(60, "the first gang bound whole", || async {
        bound(&s.placement("first-").await) == 7
    })
    .await;
    // While the first runs, the second has nothing bound, and says why.
    for _ in 0..8 {
        assert_eq!(
            bound(&s.placement("second-").await),
            0,
            "a gang was partly bound:\n{}",
            sched.log()
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let events = s.events_for("second-worker-0").await;
    assert!(
        events
            .iter()
            .any(|(r, n)| r == "FailedScheduling" && n.contains("does not fit")),
        "{events:?}"
    );
    // When the first completes, the second starts, whole.
    until(
        90,
        "the second gang bound whole after the first finished",
        || async { bound(&s.placement("second-").await) == 7 },
    )
    .await;
    assert_eq!(s.phase("first-worker-0").await, "Succeeded");
    let pg = podgroups(&s.client, "gangs").get("first").await.unwrap();
    assert_eq!(pg.data["status"]["phase"], "Scheduled");
    assert!(sched.metric("dragon_scheduling_attempts_total{result=\"scheduled\"}") >= 2.0);
    s.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_that_fits_on_one_node_lands_on_one_node() {
    let _g = serial();
    let s = Scenario::new("locality").await;
    s.node("small-0", 2).await;
    s.node("small-1", 2).await;
    s.node("big", 4).await;
    let _sched = Scheduler::start(&s, "dragon", "");
    s.podgroup("job", 5, json!({})).await;
    s.pod("job-ps-0", Some(("job", "ps", 0)), 0, None).await;
    for i in 0..4 {
        s.pod(
            &format!("job-worker-{i}"),
            Some(("job", "worker", i)),
            1,
            None,
        )
        .await;
    }
    until(60, "the job bound", || async {
        bound(&s.placement("job-").await) == 5
    })
    .await;
    let nodes: BTreeSet<Option<String>> = s.placement("job-").await.into_values().collect();
    assert_eq!(nodes, BTreeSet::from([Some("locality-big".to_string())]));
    s.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hot_reload_during_a_stream_of_pods_switches_policy_and_survives_a_corrupt_file() {
    let _g = serial();
    let s = Scenario::new("reload").await;
    for n in ["n0", "n1", "n2"] {
        s.node(n, 0).await;
    }
    let dir = std::env::temp_dir().join(format!("dragon-e2e-policy-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let policy = dir.join("policy.wasm");
    export("baseline", &policy);
    let sched = Scheduler::start(&s, &policy.display().to_string(), "");
    // Baseline spreads lone pods (LeastAllocated).
    for i in 0..9 {
        s.pod(&format!("before-{i}"), None, 0, None).await;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let swap_at = Instant::now();
    export("dragon", &policy);
    until(5, "the reload to be counted", || async {
        sched.metric("dragon_policy_reloads_total{result=\"success\"}") >= 1.0
    })
    .await;
    let took = swap_at.elapsed();
    assert!(took < Duration::from_secs(2), "reload took {took:?}");
    // DRAGON packs lone pods (best fit, lowest index on ties).
    for i in 0..9 {
        s.pod(&format!("after-{i}"), None, 0, None).await;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // A corrupt file is refused and DRAGON keeps scheduling.
    std::fs::write(dir.join("corrupt.tmp"), b"\0asm\x0d\0\x01\0 not really").unwrap();
    std::fs::rename(dir.join("corrupt.tmp"), &policy).unwrap();
    until(5, "the corrupt policy to be refused", || async {
        sched.metric("dragon_policy_reloads_total{result=\"failure\"}") >= 1.0
    })
    .await;
    for i in 0..6 {
        s.pod(&format!("late-{i}"), None, 0, None).await;
    }
    until(60, "every pod bound", || async {
        bound(&s.placement("").await) == 24
    })
    .await;
    let spread: BTreeSet<_> = s.placement("before-").await.into_values().collect();
    let packed: BTreeSet<_> = s.placement("after-").await.into_values().collect();
    let late: BTreeSet<_> = s.placement("late-").await.into_values().collect();
    assert!(spread.len() >= 2, "baseline should spread: {spread:?}");
    assert_eq!(packed.len(), 1, "dragon should pack: {packed:?}");
    assert_eq!(late, packed, "after the corrupt file, dragon still decides");
    assert!(
        sched.log().contains("policy reload refused"),
        "{}",
        sched.log()
    );
    s.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_scheduler_finishes_the_work_with_nothing_double_bound() {
    let _g = serial();
    let s = Scenario::new("restart").await;
    s.node("a", 8).await;
    s.node("b", 8).await;
    let mut sched = Scheduler::start(&s, "dragon", "");
    for j in 0..4 {
        let g = format!("job{j}");
        s.podgroup(&g, 4, json!({})).await;
        s.pod(&format!("{g}-ps-0"), Some((&g, "ps", 0)), 0, None)
            .await;
        for i in 0..3 {
            s.pod(&format!("{g}-worker-{i}"), Some((&g, "worker", i)), 1, None)
                .await;
        }
        if j == 1 {
            until(30, "some pods bound", || async {
                bound(&s.placement("").await) >= 4
            })
            .await;
            sched.kill();
        }
    }
    let _sched2 = Scheduler::start(&s, "dragon", "");
    until(60, "every pod bound", || async {
        bound(&s.placement("").await) == 16
    })
    .await;
    // Gangs whole, capacity respected.
    let placement = s.placement("").await;
    let mut gpus_per_node: BTreeMap<String, u32> = BTreeMap::new();
    for (pod, node) in &placement {
        if pod.contains("worker") {
            *gpus_per_node.entry(node.clone().unwrap()).or_default() += 1;
        }
    }
    assert!(gpus_per_node.values().all(|&g| g <= 8), "{gpus_per_node:?}");
    let events = s.events_for("job0-worker-0").await;
    assert_eq!(
        events.iter().filter(|(r, _)| r == "Scheduled").count(),
        1,
        "{events:?}"
    );
    s.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_starving_job_shrinks_a_running_statefulset_through_scale_then_runs() {
    let _g = serial();
    let s = Scenario::new("starve").await;
    s.node("a", 4).await;
    let _sched = Scheduler::start(
        &s,
        "dragon",
        "scaleIntervalSeconds: 1\nsettings: {starvation_threshold_s: 3, idle_threshold_s: 3600}\n",
    );
    s.podgroup(
        "big",
        3,
        json!({"dragon.dev/min-workers": "2", "dragon.dev/max-workers": "4",
               "dragon.dev/scale-target": "apps/v1/statefulsets/big-worker"}),
    )
    .await;
    s.pod("big-ps-0", Some(("big", "ps", 0)), 0, None).await;
    let sts = json!({
        "apiVersion": "apps/v1", "kind": "StatefulSet",
        "metadata": {"name": "big-worker", "namespace": s.name},
        "spec": {
            "replicas": 4, "serviceName": "big", "podManagementPolicy": "Parallel",
            "selector": {"matchLabels": {"job": "big"}},
            "template": {
                "metadata": {"labels": {"job": "big", "scheduling.x-k8s.io/pod-group": "big", "dragon.dev/role": "worker"}},
                "spec": {
                    "schedulerName": s.scheduler_name(),
                    "nodeSelector": {"dragon-e2e": s.name},
                    "tolerations": [{"key": "kwok.x-k8s.io/node", "operator": "Exists", "effect": "NoSchedule"}],
                    "containers": [{"name": "c", "image": "fake",
                        "resources": {"requests": {"cpu": "100m", "nvidia.com/gpu": "1"}, "limits": {"nvidia.com/gpu": "1"}}}]
                }
            }
        }
    });
    let sets: Api<k8s_openapi::api::apps::v1::StatefulSet> =
        Api::namespaced(s.client.clone(), &s.name);
    sets.create(
        &PostParams::default(),
        &serde_json::from_value(sts).unwrap(),
    )
    .await
    .unwrap();
    until(90, "the elastic job running with 4 workers", || async {
        bound(&s.placement("big-").await) == 5
    })
    .await;
    // A second job that needs 2 GPUs at its min.
    s.podgroup("small", 3, json!({"dragon.dev/min-workers": "2"}))
        .await;
    s.pod("small-ps-0", Some(("small", "ps", 0)), 0, None).await;
    for i in 0..2 {
        s.pod(
            &format!("small-worker-{i}"),
            Some(("small", "worker", i)),
            1,
            None,
        )
        .await;
    }
    until(60, "the StatefulSet shrunk to 2 through /scale", || async {
        sets.get("big-worker")
            .await
            .ok()
            .and_then(|s| s.spec)
            .and_then(|s| s.replicas)
            == Some(2)
    })
    .await;
    until(90, "the waiting job bound", || async {
        bound(&s.placement("small-").await) == 3
    })
    .await;
    let big = s.placement("big-worker-").await;
    assert!(
        big.keys()
            .all(|k| k == "big-worker-0" || k == "big-worker-1"),
        "worker 0 kept, highest removed: {big:?}"
    );
    s.cleanup().await;
}
