//! The harness shared by the end-to-end tests: one real control plane per
//! test process (tests/controlplane/up.sh), scenarios isolated by namespace,
//! node label and scheduler name, and `dragon-scheduler` processes.
#![allow(dead_code)]

use std::collections::BTreeMap;
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

pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

pub struct ControlPlane {
    pub run: PathBuf,
    pub kubeconfig: PathBuf,
}

static CP: OnceLock<ControlPlane> = OnceLock::new();
static SERIAL: Mutex<()> = Mutex::new(());

/// Start (once) the control plane; it is stopped by up.sh's owner watch
/// when this test process exits.
pub fn control_plane() -> &'static ControlPlane {
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
            run,
        }
    })
}

pub fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|p| p.into_inner())
}

pub async fn client() -> Client {
    let cp = control_plane();
    let kc = kube::config::Kubeconfig::read_from(&cp.kubeconfig).unwrap();
    let config = kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .unwrap();
    Client::try_from(config).unwrap()
}

pub fn podgroups(client: &Client, ns: &str) -> Api<DynamicObject> {
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("scheduling.x-k8s.io", "v1alpha1", "PodGroup"),
        "podgroups",
    );
    Api::namespaced_with(client.clone(), ns, &ar)
}

/// A test scenario: its namespace, nodes and scheduler name.
pub struct Scenario {
    pub client: Client,
    pub name: String,
}

impl Scenario {
    pub async fn new(name: &str) -> Scenario {
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

    pub fn scheduler_name(&self) -> String {
        format!("dragon-{}", self.name)
    }

    pub async fn node(&self, name: &str, gpus: u32) {
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

    pub async fn podgroup(&self, name: &str, min_member: u32, annotations: Value) {
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
    pub async fn pod(
        &self,
        name: &str,
        group: Option<(&str, &str, u32)>,
        gpus: u32,
        seconds: Option<u32>,
    ) {
        self.create_pod(name, &self.scheduler_name(), group, gpus, seconds)
            .await;
    }

    /// A pod for another scheduler (e.g. `default-scheduler`).
    pub async fn pod_for(
        &self,
        name: &str,
        scheduler: &str,
        group: Option<(&str, &str, u32)>,
        gpus: u32,
    ) {
        self.create_pod(name, scheduler, group, gpus, None).await;
    }

    async fn create_pod(
        &self,
        name: &str,
        scheduler: &str,
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
                "schedulerName": scheduler,
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

    pub async fn pods(&self) -> Vec<Pod> {
        let pods: Api<Pod> = Api::namespaced(self.client.clone(), &self.name);
        pods.list(&ListParams::default()).await.unwrap().items
    }

    /// Node of each pod with `prefix`, `None` when unbound.
    pub async fn placement(&self, prefix: &str) -> BTreeMap<String, Option<String>> {
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

    pub async fn phase(&self, name: &str) -> String {
        let pods: Api<Pod> = Api::namespaced(self.client.clone(), &self.name);
        pods.get(name)
            .await
            .ok()
            .and_then(|p| p.status)
            .and_then(|s| s.phase)
            .unwrap_or_default()
    }

    pub async fn events_for(&self, pod: &str) -> Vec<(String, String)> {
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

    pub async fn cleanup(&self) {
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

pub async fn ensure_crd(client: &Client) {
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
pub async fn until<F, Fut>(secs: u64, what: &str, mut check: F)
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

/// A port free on 127.0.0.1, from below the kernel's ephemeral range: a port
/// the kernel handed out for `:0` is in that range and can be taken by an
/// outgoing connection before the scheduler binds it (see lib.sh).
pub fn free_port() -> u16 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let ephemeral_low = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse::<u64>().ok())
        .unwrap_or(32768);
    let (base, span) = (11000u64, ephemeral_low.saturating_sub(11000).max(1000));
    let seed = u64::from(std::process::id()) * 7919
        + std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos() as u64)
            .unwrap_or(0);
    for _ in 0..500 {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let port = (base + (seed + n * 104_729) % span) as u16;
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    panic!("no free port below the ephemeral range on 127.0.0.1");
}

/// A running `dragon-scheduler` process.
pub struct Scheduler {
    pub child: Child,
    pub dir: PathBuf,
    pub metrics: String,
}

impl Scheduler {
    pub fn start(s: &Scenario, policy: &str, extra: &str) -> Scheduler {
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

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("scheduler.log")).unwrap_or_default()
    }

    pub fn get(&self, path: &str) -> Option<(u16, String)> {
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

    pub fn metric(&self, line_prefix: &str) -> f64 {
        let (_, body) = self.get("/metrics").unwrap_or_default();
        body.lines()
            .find(|l| l.starts_with(line_prefix))
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|v| v.parse().ok())
            .unwrap_or(0.0)
    }

    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Scheduler {
    fn drop(&mut self) {
        self.kill();
    }
}

pub fn bound(p: &BTreeMap<String, Option<String>>) -> usize {
    p.values().filter(|n| n.is_some()).count()
}

/// Write a bundled policy to `to` the way a ConfigMap update lands: a new
/// file renamed over the old one.
pub fn export(name: &str, to: &Path) {
    let bytes = dragon_bundled::by_name(name).expect("a bundled policy");
    let tmp = to.with_extension("tmp");
    std::fs::write(&tmp, bytes).unwrap();
    std::fs::rename(&tmp, to).unwrap();
}
