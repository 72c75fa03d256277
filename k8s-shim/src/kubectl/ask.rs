//! Asking: the pod read with the user's own credentials first (so "not
//! found" and "forbidden" come from the API server itself), then the
//! scheduler's endpoint, through the API server's service proxy or
//! directly, with the user's token for the scheduler to check.

use std::path::Path;

use dragon_scheduler::insight::access::TOKEN_HEADER;
use dragon_scheduler::insight::{PREFIX, PolicyState, Refusal, Top, Why};
use http::{Request, StatusCode};
use k8s_openapi::api::core::v1::Pod;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Api, Client, Config};
use secrecy::ExposeSecret;
use serde::de::DeserializeOwned;

/// Kueue's scheduling gate on the pods it manages.
const KUEUE_GATE: &str = "kueue.x-k8s.io/admission";

/// Where dragon-scheduler is asked.
pub enum Target {
    /// Through the API server: `services/{service}:{port}/proxy` in
    /// `namespace`.
    Proxy {
        namespace: String,
        service: String,
        port: String,
    },
    /// Straight to a URL.
    Direct(String),
}

pub struct Asker {
    /// The user's client to the API server.
    client: Client,
    /// The client to a direct endpoint, with the user's credentials.
    direct: Option<Client>,
    target: Target,
    /// The user's bearer token, sent in [`TOKEN_HEADER`] through the proxy.
    token: Option<String>,
}

impl Asker {
    pub async fn new(
        kubeconfig: Option<&Path>,
        context: Option<&str>,
        target: Target,
    ) -> Result<Asker, String> {
        let options = KubeConfigOptions {
            context: context.map(String::from),
            ..KubeConfigOptions::default()
        };
        let config = match kubeconfig {
            Some(path) => {
                let file = Kubeconfig::read_from(path)
                    .map_err(|e| format!("cannot read kubeconfig {}: {e}", path.display()))?;
                Config::from_custom_kubeconfig(file, &options).await
            }
            None => Config::from_kubeconfig(&options).await,
        }
        .map_err(|e| format!("cannot load the kubeconfig: {e}"))?;
        let token = match (&config.auth_info.token, &config.auth_info.token_file) {
            (Some(t), _) => Some(t.expose_secret().to_string()),
            (None, Some(file)) => std::fs::read_to_string(file)
                .ok()
                .map(|t| t.trim().to_string()),
            (None, None) => None,
        };
        let direct = match &target {
            Target::Direct(url) => {
                let mut direct = config.clone();
                direct.cluster_url = url
                    .parse()
                    .map_err(|e| format!("--endpoint {url} is not a URL: {e}"))?;
                Some(Client::try_from(direct).map_err(|e| format!("--endpoint {url}: {e}"))?)
            }
            Target::Proxy { .. } => None,
        };
        let client = Client::try_from(config)
            .map_err(|e| format!("cannot make a Kubernetes client: {e}"))?;
        Ok(Asker {
            client,
            direct,
            target,
            token,
        })
    }

    pub fn default_namespace(&self) -> &str {
        self.client.default_namespace()
    }

    /// Why pod `namespace/name` waits.
    pub async fn why(&self, namespace: &str, name: &str) -> Result<Why, String> {
        let pod = Api::<Pod>::namespaced(self.client.clone(), namespace)
            .get(name)
            .await
            .map_err(|e| match e {
                kube::Error::Api(s) if s.code == 404 => format!("pod {namespace}/{name} not found"),
                kube::Error::Api(s) if s.code == 403 => {
                    format!("you may not read pod {namespace}/{name}: {}", s.message)
                }
                e => format!("cannot read pod {namespace}/{name}: {e}"),
            })?;
        let spec = pod.spec.unwrap_or_default();
        let scheduler = spec
            .scheduler_name
            .unwrap_or_else(|| "default-scheduler".into());
        let not_ours = |ours: &str| {
            format!(
                "pod {namespace}/{name} is scheduled by {scheduler:?}, not by dragon-scheduler ({ours:?})"
            )
        };
        let path = format!("{PREFIX}/why/{namespace}/{name}");
        let why: Why = match self.get(&path).await {
            Ok(why) => why,
            Err(Failure::Refused(status, refusal))
                if status == StatusCode::NOT_FOUND && refusal.scheduler_name != scheduler =>
            {
                return Err(not_ours(&refusal.scheduler_name));
            }
            Err(failure) => return Err(failure.to_string()),
        };
        if why.scheduler_name != scheduler {
            return Err(not_ours(&why.scheduler_name));
        }
        let kueue_gated = spec
            .scheduling_gates
            .unwrap_or_default()
            .iter()
            .any(|g| g.name == KUEUE_GATE);
        if kueue_gated && !self.kueue_installed().await {
            return Err(format!(
                "pod {namespace}/{name} waits for Kueue's {KUEUE_GATE} gate, but Kueue is not \
                 installed (the API server serves no kueue.x-k8s.io): nothing will lift it"
            ));
        }
        Ok(why)
    }

    pub async fn top(&self, namespace: Option<&str>) -> Result<Top, String> {
        let path = match namespace {
            Some(ns) => format!("{PREFIX}/top?namespace={ns}"),
            None => format!("{PREFIX}/top"),
        };
        self.get(&path).await.map_err(|f| f.to_string())
    }

    pub async fn policy(&self) -> Result<PolicyState, String> {
        self.get(&format!("{PREFIX}/policy"))
            .await
            .map_err(|f| f.to_string())
    }

    async fn kueue_installed(&self) -> bool {
        let request = Request::get("/apis/kueue.x-k8s.io").body(Vec::new());
        match request {
            Ok(r) => self.client.request_text(r).await.is_ok(),
            Err(_) => false,
        }
    }

    /// GET `path` from the scheduler, as JSON.
    async fn get<T: DeserializeOwned>(&self, path: &str) -> Result<T, Failure> {
        let (client, uri, place) = match (&self.target, &self.direct) {
            (Target::Direct(url), Some(client)) => (client, path.to_string(), url.clone()),
            (
                Target::Proxy {
                    namespace,
                    service,
                    port,
                },
                _,
            ) => (
                &self.client,
                format!("/api/v1/namespaces/{namespace}/services/{service}:{port}/proxy{path}"),
                format!("service {namespace}/{service}:{port} through the API server's proxy"),
            ),
            (Target::Direct(url), None) => {
                return Err(Failure::Unreachable(url.clone(), "no client".into()));
            }
        };
        let mut request = Request::get(uri);
        if let (Target::Proxy { .. }, Some(token)) = (&self.target, &self.token) {
            request = request.header(TOKEN_HEADER, token);
        }
        let request = request
            .body(kube::client::Body::empty())
            .map_err(|e| Failure::Unreachable(place.clone(), e.to_string()))?;
        let response = client
            .send(request)
            .await
            .map_err(|e| Failure::Unreachable(place.clone(), e.to_string()))?;
        let status = response.status();
        let body = response
            .into_body()
            .collect_bytes()
            .await
            .map_err(|e| Failure::Unreachable(place.clone(), e.to_string()))?;
        if status.is_success() {
            return serde_json::from_slice(&body)
                .map_err(|e| Failure::Garbled(place, format!("{e} (is it dragon-scheduler?)")));
        }
        match serde_json::from_slice::<Refusal>(&body) {
            Ok(refusal) => Err(Failure::Refused(status, refusal)),
            // Not the scheduler's answer: the proxy's own (no endpoint, a
            // scheduler that is down, the user may not use the proxy).
            Err(_) => Err(Failure::Unreachable(
                place,
                format!("{status}: {}", String::from_utf8_lossy(&body).trim()),
            )),
        }
    }
}

/// Why the scheduler did not answer.
enum Failure {
    Unreachable(String, String),
    Refused(StatusCode, Refusal),
    Garbled(String, String),
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Unreachable(place, why) => {
                write!(f, "dragon-scheduler at {place} does not answer: {why}")
            }
            Failure::Refused(status, refusal) => {
                write!(f, "dragon-scheduler refused ({status}): {}", refusal.error)
            }
            Failure::Garbled(place, why) => {
                write!(f, "the answer of {place} cannot be read: {why}")
            }
        }
    }
}
