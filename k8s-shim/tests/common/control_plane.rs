//! The control plane of a test process (one per process, started by
//! tests/controlplane/up.sh), its components stopped and started for fault
//! tests, clients of it, and accounts with the shipped RBAC.

use super::*;

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
        // Unique to this start: a run directory named after a pid alone is
        // shared with any later test process given the same pid.
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let run =
            std::env::temp_dir().join(format!("dragon-e2e-{}-{nanos:09}", std::process::id()));
        let started = Instant::now();
        let up = || {
            Command::new(repo().join("tests/controlplane/up.sh"))
                .arg("--owner-pid")
                .arg(std::process::id().to_string())
                .arg(&run)
                .status()
                .expect("run tests/controlplane/up.sh")
        };
        // A component that loses its port to another process between
        // up.sh's check and its bind fails to start (up.sh stops the rest):
        // one more start, with the first one's logs kept beside.
        let mut status = up();
        if !status.success() {
            let kept = run.join("logs-first-start");
            let _ = std::fs::rename(run.join("logs"), &kept);
            eprintln!(
                "the control plane did not start (logs in {}); starting it again",
                kept.display()
            );
            status = up();
        }
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

impl ControlPlane {
    /// `tests/controlplane/restart.sh RUN NAME ACTION` (`stop`, `kill`,
    /// `start`, `restart`): `stop` sends SIGTERM and SIGKILL 2 s later,
    /// `start` returns once the component is ready again.
    pub async fn component(&'static self, name: &str, action: &str) {
        let (name, action) = (name.to_string(), action.to_string());
        let run = self.run.clone();
        tokio::task::spawn_blocking(move || {
            let status = Command::new(repo().join("tests/controlplane/restart.sh"))
                .arg(&run)
                .arg(&name)
                .arg(&action)
                .env("DRAGON_CP_STOP_GRACE", "2")
                .status()
                .expect("run tests/controlplane/restart.sh");
            assert!(
                status.success(),
                "restart.sh {name} {action} failed (see {}/logs/{name}.log)",
                run.display()
            );
        })
        .await
        .unwrap();
    }
}

/// A component stopped by [`ControlPlane::stop`]; started again by
/// [`Outage::end`], or when dropped (a failed test leaves the control plane
/// whole for the next one).
pub struct Outage {
    cp: &'static ControlPlane,
    name: String,
    ended: bool,
}

impl ControlPlane {
    /// Stop component `name` (SIGTERM, SIGKILL after 2 s) until the
    /// returned outage ends.
    pub async fn stop(&'static self, name: &str) -> Outage {
        self.component(name, "stop").await;
        Outage {
            cp: self,
            name: name.to_string(),
            ended: false,
        }
    }
}

impl Outage {
    /// Start the component again with its recorded command line; returns
    /// once it is ready.
    pub async fn end(mut self) {
        self.ended = true;
        self.cp.component(&self.name, "start").await;
    }
}

impl Drop for Outage {
    fn drop(&mut self) {
        if !self.ended {
            let _ = Command::new(repo().join("tests/controlplane/restart.sh"))
                .arg(&self.cp.run)
                .arg(&self.name)
                .arg("start")
                .status();
        }
    }
}

/// The ClusterRole shipped in `k8s-shim/deploy/rbac.yaml`.
pub fn shipped_cluster_role() -> k8s_openapi::api::rbac::v1::ClusterRole {
    let shipped = std::fs::read_to_string(repo().join("k8s-shim/deploy/rbac.yaml")).unwrap();
    shipped
        .split("\n---\n")
        .find(|doc| doc.lines().any(|l| l == "kind: ClusterRole"))
        .map(|doc| serde_norway::from_str(doc).unwrap())
        .expect("a ClusterRole in rbac.yaml")
}

/// A kubeconfig for the existing ServiceAccount `namespace/account`: the
/// test's own with a token of that account (an hour), so a process run
/// with it has the account's RBAC and nothing more.
pub async fn account_kubeconfig(client: &Client, namespace: &str, account: &str) -> PathBuf {
    use k8s_openapi::api::authentication::v1::TokenRequest;
    use k8s_openapi::api::core::v1::ServiceAccount;
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), namespace);
    let request: TokenRequest =
        serde_json::from_value(json!({"spec": {"audiences": [], "expirationSeconds": 3600}}))
            .unwrap();
    let token: TokenRequest = accounts
        .create_subresource("token", account, &PostParams::default(), &request)
        .await
        .unwrap();
    let token = token.status.and_then(|s| s.token).expect("a token");
    let cp = control_plane();
    let admin = std::fs::read_to_string(&cp.kubeconfig).unwrap();
    let text: String = admin
        .lines()
        .map(|l| match l.split_once("token:") {
            Some((indent, _)) => format!("{indent}token: {token}\n"),
            None => format!("{l}\n"),
        })
        .collect();
    let path = cp.run.join(format!("kubeconfig-{namespace}-{account}"));
    std::fs::write(&path, text).unwrap();
    path
}

/// The control plane's binaries directory (`DRAGON_CP_BIN` in up.sh's env
/// file).
pub fn cp_bin() -> PathBuf {
    let env = std::fs::read_to_string(control_plane().run.join("env")).unwrap();
    env.lines()
        .find_map(|l| l.strip_prefix("DRAGON_CP_BIN="))
        .map(PathBuf::from)
        .expect("DRAGON_CP_BIN in the control plane's env file")
}
