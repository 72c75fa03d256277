//! Processes run against the control plane: `dragon-scheduler` (started,
//! paused, asked over HTTP, its policy file replaced as a ConfigMap update
//! lands) and the Kubeflow training-operator's controllers.

use super::*;

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
        Scheduler::start_as(s, policy, extra, &control_plane().kubeconfig)
    }

    /// [`Scheduler::start`] with another identity (a kubeconfig of its own).
    pub fn start_as(s: &Scenario, policy: &str, extra: &str, kubeconfig: &Path) -> Scheduler {
        let (dir, metrics) = Scheduler::workdir(s);
        // Each scheduler records into a ring of its own.
        let recording = match extra.contains("recording:") {
            true => String::new(),
            false => format!("recording: {{dir: {}}}\n", dir.join("recordings").display()),
        };
        let config = format!(
            "schedulerName: {}\npolicy: {policy}\nmetricsAddr: {metrics}\ncacheDir: {}\n{recording}{extra}",
            s.scheduler_name(),
            dir.join("cache").display()
        );
        Scheduler::launch(dir, metrics, &config, kubeconfig)
    }

    /// A scheduler run from a whole configuration (as a deployment renders
    /// it), with only what points into its container replaced: where it
    /// listens, caches and records.
    pub fn start_from(s: &Scenario, mut config: Value, kubeconfig: &Path) -> Scheduler {
        let (dir, metrics) = Scheduler::workdir(s);
        config["metricsAddr"] = json!(metrics);
        config["cacheDir"] = json!(dir.join("cache"));
        if config["recording"]["enabled"] != json!(false) {
            config["recording"]["dir"] = json!(dir.join("recordings"));
        }
        // JSON is YAML.
        Scheduler::launch(dir, metrics, &config.to_string(), kubeconfig)
    }

    /// A fresh directory for one scheduler, and a free metrics address.
    fn workdir(s: &Scenario) -> (PathBuf, String) {
        let dir = std::env::temp_dir().join(format!(
            "dragon-e2e-sched-{}-{}-{}",
            std::process::id(),
            s.name,
            free_port()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        (dir, format!("127.0.0.1:{}", free_port()))
    }

    /// Start `dragon-scheduler --config DIR/config.yaml` and wait until it
    /// is ready.
    fn launch(dir: PathBuf, metrics: String, config: &str, kubeconfig: &Path) -> Scheduler {
        std::fs::write(dir.join("config.yaml"), config).unwrap();
        let log = std::fs::File::create(dir.join("scheduler.log")).unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_dragon-scheduler"))
            .arg("--config")
            .arg(dir.join("config.yaml"))
            .arg("--kubeconfig")
            .arg(kubeconfig)
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

    /// The flight recorder's files, oldest first.
    pub fn recordings(&self) -> Vec<PathBuf> {
        let mut files: Vec<PathBuf> = std::fs::read_dir(self.dir.join("recordings"))
            .map(|d| d.filter_map(Result::ok).map(|e| e.path()).collect())
            .unwrap_or_default();
        files.sort();
        files
    }

    pub fn get(&self, path: &str) -> Option<(u16, String)> {
        http_get(&self.metrics, path)
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

    /// Send SIGTERM and wait up to `secs` for the process to exit.
    pub fn terminate(&mut self, secs: u64) -> std::process::ExitStatus {
        let sent = Command::new("kill")
            .arg("-TERM")
            .arg(self.child.id().to_string())
            .status()
            .expect("run kill");
        assert!(sent.success(), "kill -TERM failed");
        let deadline = Instant::now() + Duration::from_secs(secs);
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "dragon-scheduler still running {secs} s after SIGTERM:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Scheduler {
    fn drop(&mut self) {
        self.kill();
    }
}

/// `GET path` from `addr` (HTTP/1.0): the status code and the body.
pub fn http_get(addr: &str, path: &str) -> Option<(u16, String)> {
    let mut s = TcpStream::connect(addr).ok()?;
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

/// Write a bundled policy to `to` the way a ConfigMap update lands: a new
/// file renamed over the old one.
pub fn export(name: &str, to: &Path) {
    let bytes = dragon_bundled::by_name(name).expect("a bundled policy");
    let tmp = to.with_extension("tmp");
    std::fs::write(&tmp, bytes).unwrap();
    std::fs::rename(&tmp, to).unwrap();
}

impl Scheduler {
    fn signal(&self, sig: &str) {
        let status = Command::new("kill")
            .arg(sig)
            .arg(self.child.id().to_string())
            .status()
            .expect("run kill");
        assert!(status.success(), "kill {sig} {}", self.child.id());
    }

    /// Freeze the process (SIGSTOP): it reads nothing and decides nothing
    /// until [`Scheduler::resume`]; what the API server sends waits in its
    /// sockets.
    pub fn pause(&self) {
        self.signal("-STOP");
    }

    pub fn resume(&self) {
        self.signal("-CONT");
    }

    /// The process is still running (it did not exit on a fault).
    pub fn alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }
}

/// The Kubeflow training-operator's controllers, running against the test
/// control plane with `--gang-scheduler-name=scheduler-plugins` (built by
/// tests/controlplane/build.sh; see its README).
pub struct TrainingOperator(Controller);

impl TrainingOperator {
    /// Its CRDs and the PodGroup CRD applied, then the process started and
    /// healthy.
    pub async fn start(client: &Client) -> TrainingOperator {
        use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
        ensure_crd(client).await;
        let bin = cp_bin();
        let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
        let dir = bin.join("training-operator-crds");
        for entry in std::fs::read_dir(&dir).expect("the training-operator's CRDs") {
            let text = std::fs::read_to_string(entry.unwrap().path()).unwrap();
            let crd: CustomResourceDefinition = serde_norway::from_str(&text).unwrap();
            let _ = crds.create(&PostParams::default(), &crd).await;
        }
        for kind in ["TFJob", "PyTorchJob"] {
            until(30, &format!("the {kind} CRD served"), || async {
                training_jobs(client, "default", kind)
                    .list(&ListParams::default())
                    .await
                    .is_ok()
            })
            .await;
        }
        let probe = format!("127.0.0.1:{}", free_port());
        let mut command = Command::new(bin.join("training-operator"));
        command
            .arg("--gang-scheduler-name=scheduler-plugins")
            .arg(format!("--health-probe-bind-address={probe}"));
        TrainingOperator(Controller::start("training-operator", command, &probe, "/healthz").await)
    }

    pub fn log(&self) -> String {
        self.0.log()
    }
}

/// A controller process run against the test control plane (its stderr
/// in a log file of its own), stopped when dropped.
pub struct Controller {
    child: Child,
    log: PathBuf,
}

impl Controller {
    /// `command` started with the control plane's kubeconfig, then waited
    /// on until `probe` answers 200 on `path` (at most 90 s).
    pub async fn start(name: &str, mut command: Command, probe: &str, path: &str) -> Controller {
        let log = std::env::temp_dir().join(format!(
            "dragon-e2e-{name}-{}-{}.log",
            std::process::id(),
            free_port()
        ));
        let child = command
            .env("KUBECONFIG", &control_plane().kubeconfig)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap_or_else(|e| panic!("start {name}: {e}"));
        let mut controller = Controller { child, log };
        let deadline = Instant::now() + Duration::from_secs(90);
        loop {
            if http_get(probe, path).map(|(code, _)| code) == Some(200) {
                return controller;
            }
            if let Ok(Some(status)) = controller.child.try_wait() {
                panic!("{name} exited ({status}):\n{}", controller.log());
            }
            assert!(
                Instant::now() < deadline,
                "{name} is not ready:\n{}",
                controller.log()
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Controller {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Kubeflow jobs of `kind` (`TFJob`, `PyTorchJob`) in namespace `ns`.
pub fn training_jobs(client: &Client, ns: &str, kind: &str) -> Api<DynamicObject> {
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("kubeflow.org", "v1", kind),
        &format!("{}s", kind.to_lowercase()),
    );
    Api::namespaced_with(client.clone(), ns, &ar)
}
