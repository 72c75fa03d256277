//! Kueue (built from its Go module by tests/controlplane/build.sh) in front
//! of the test control plane, installed the way its release manifests
//! install it but with every server on 127.0.0.1:
//!
//! - its CRDs, with the conversion-webhook patches its kustomization applies;
//! - its webhook configurations, each webhook narrowed to namespaces
//!   labelled [`MANAGED`] so that other scenarios never meet them;
//! - the Secret `kueue-webhook-server-cert` its certificate management
//!   fills, written into its certificate directory as the kubelet would
//!   mount it;
//! - `kueue-webhook-service` in `kueue-system` as an `ExternalName` Service
//!   for `localhost`: the API server resolves a webhook's Service to that
//!   name and the webhook's port, and checks the certificate against
//!   `kueue-webhook-service.kueue-system.svc`, the name Kueue's own
//!   certificate management signs and injects into the configurations;
//! - the manager itself, with leader election off, metrics off, its
//!   visibility server off, the `batch/job` and `pod` integrations on.

use std::process::Command;

use k8s_openapi::api::admissionregistration::v1 as admission;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::{Value, json};

use super::{Controller, Scenario, cp_bin, free_port, until};

/// The namespace label that puts a scenario's pods and Jobs under Kueue.
pub const MANAGED: (&str, &str) = ("dragon.dev/kueue", "managed");
const NAMESPACE: &str = "kueue-system";
const SERVICE: &str = "kueue-webhook-service";
const SECRET: &str = "kueue-webhook-server-cert";
/// The CRDs Kueue converts between versions (its cert rotator injects
/// their CA bundle too).
const CONVERTED: [&str; 5] = [
    "localqueues",
    "clusterqueues",
    "cohorts",
    "workloads",
    "multikueueclusters",
];

/// A running Kueue manager; stopped when dropped.
pub struct Kueue(Controller);

/// Every YAML document of `text`, as JSON.
fn documents(text: &str) -> Vec<Value> {
    serde_norway::Deserializer::from_str(text)
        .map(|d| serde::Deserialize::deserialize(d).expect("a YAML document"))
        .filter(|v: &Value| !v.is_null())
        .collect()
}

/// Applies `object` with server-side apply as field manager `dragon-e2e`.
async fn apply<K>(api: &Api<K>, name: &str, object: &Value)
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    api.patch(
        name,
        &PatchParams::apply("dragon-e2e").force(),
        &Patch::Apply(object),
    )
    .await
    .unwrap_or_else(|e| panic!("apply {name}: {e}"));
}

impl Kueue {
    /// Its CRDs, Service and webhook configurations applied, then the
    /// manager started and ready (its webhooks answer).
    pub async fn start(client: &Client) -> Kueue {
        let bin = cp_bin();
        let port = free_port();
        install_crds(client, &bin, port).await;
        let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
        apply(
            &namespaces,
            NAMESPACE,
            &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}),
        )
        .await;
        let services: Api<k8s_openapi::api::core::v1::Service> =
            Api::namespaced(client.clone(), NAMESPACE);
        apply(
            &services,
            SERVICE,
            &json!({"apiVersion": "v1", "kind": "Service",
                "metadata": {"name": SERVICE, "namespace": NAMESPACE},
                "spec": {"type": "ExternalName", "externalName": "localhost",
                         "ports": [{"port": port, "protocol": "TCP"}]}}),
        )
        .await;
        // The Secret its install creates empty for the certificates.
        let secrets: Api<k8s_openapi::api::core::v1::Secret> =
            Api::namespaced(client.clone(), NAMESPACE);
        apply(
            &secrets,
            SECRET,
            &json!({"apiVersion": "v1", "kind": "Secret",
                "metadata": {"name": SECRET, "namespace": NAMESPACE}}),
        )
        .await;
        install_webhooks(client, &bin, port).await;

        let dir = std::env::temp_dir().join(format!(
            "dragon-e2e-kueue-{}-{}",
            std::process::id(),
            free_port()
        ));
        std::fs::create_dir_all(dir.join("certs")).unwrap();
        let probe = format!("127.0.0.1:{}", free_port());
        let config = json!({
            "apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
            "namespace": NAMESPACE,
            "health": {"healthProbeBindAddress": probe},
            "metrics": {"bindAddress": "0"},
            "webhook": {"host": "127.0.0.1", "port": port, "certDir": dir.join("certs")},
            "leaderElection": {"leaderElect": false},
            "internalCertManagement": {"enable": true},
            "managedJobsNamespaceSelector": {"matchLabels": {MANAGED.0: MANAGED.1}},
            "integrations": {"frameworks": ["batch/job", "pod"]},
        });
        let config_file = dir.join("config.yaml");
        std::fs::write(&config_file, serde_json::to_string(&config).unwrap()).unwrap();
        tokio::spawn(mount_secret(client.clone(), dir.join("certs")));
        let mut command = Command::new(bin.join("kueue"));
        command
            .arg(format!("--config={}", config_file.display()))
            .arg("--feature-gates=VisibilityOnDemand=false");
        let kueue = Kueue(Controller::start("kueue", command, &probe, "/readyz").await);
        // Ready means its certificates are in place; the API server reaches
        // the webhooks once the CA is injected: a flavor created through
        // them is the proof.
        let flavors = kueue_api(client, "ResourceFlavor", "resourceflavors", None);
        until(60, "kueue's webhooks answering", || async {
            flavors
                .patch(
                    "dragon-e2e-probe",
                    &PatchParams::apply("dragon-e2e").force(),
                    &Patch::Apply(json!({"apiVersion": "kueue.x-k8s.io/v1beta2",
                        "kind": "ResourceFlavor", "metadata": {"name": "dragon-e2e-probe"}})),
                )
                .await
                .is_ok()
        })
        .await;
        kueue
    }

    pub fn log(&self) -> String {
        self.0.log()
    }

    /// A queue for scenario `s` with quota for `gpus` GPUs (and plenty of
    /// CPU and memory): ResourceFlavor and ClusterQueue named after the
    /// scenario, LocalQueue `queue` in its namespace, which is labelled to
    /// be managed.
    pub async fn queue(&self, s: &Scenario, queue: &str, gpus: u32) {
        s.label_namespace(json!({MANAGED.0: MANAGED.1})).await;
        let flavors = kueue_api(&s.client, "ResourceFlavor", "resourceflavors", None);
        apply(
            &flavors,
            &s.name,
            &json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor",
                "metadata": {"name": s.name}}),
        )
        .await;
        let cqs = kueue_api(&s.client, "ClusterQueue", "clusterqueues", None);
        apply(
            &cqs,
            &s.name,
            &json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
                "metadata": {"name": s.name},
                "spec": {
                    "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": s.name}},
                    "queueingStrategy": "StrictFIFO",
                    "resourceGroups": [{
                        "coveredResources": ["cpu", "memory", "nvidia.com/gpu"],
                        "flavors": [{"name": s.name, "resources": [
                            {"name": "cpu", "nominalQuota": "100"},
                            {"name": "memory", "nominalQuota": "100Gi"},
                            {"name": "nvidia.com/gpu", "nominalQuota": gpus.to_string()}]}]}]}}),
        )
        .await;
        let lqs = kueue_api(&s.client, "LocalQueue", "localqueues", Some(&s.name));
        apply(
            &lqs,
            queue,
            &json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
                "metadata": {"name": queue, "namespace": s.name},
                "spec": {"clusterQueue": s.name}}),
        )
        .await;
        until(60, "the ClusterQueue active", || async {
            cqs.get(&s.name).await.is_ok_and(|cq| {
                cq.data["status"]["conditions"]
                    .as_array()
                    .is_some_and(|cs| {
                        cs.iter()
                            .any(|c| c["type"] == "Active" && c["status"] == "True")
                    })
            })
        })
        .await;
    }

    /// Kueue's Workloads in scenario `s`'s namespace.
    pub fn workloads(&self, s: &Scenario) -> Api<DynamicObject> {
        kueue_api(&s.client, "Workload", "workloads", Some(&s.name))
    }

    /// The scenario's ClusterQueue and flavor removed (its namespace goes
    /// with the scenario).
    pub async fn remove_queue(&self, s: &Scenario) {
        let cqs = kueue_api(&s.client, "ClusterQueue", "clusterqueues", None);
        let _ = cqs.delete(&s.name, &Default::default()).await;
        let flavors = kueue_api(&s.client, "ResourceFlavor", "resourceflavors", None);
        let _ = flavors.delete(&s.name, &Default::default()).await;
    }
}

/// Kueue objects of `kind` (v1beta2), namespaced in `ns` or cluster-wide.
pub fn kueue_api(
    client: &Client,
    kind: &str,
    plural: &str,
    ns: Option<&str>,
) -> Api<DynamicObject> {
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("kueue.x-k8s.io", "v1beta2", kind),
        plural,
    );
    match ns {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &ar),
        None => Api::all_with(client.clone(), &ar),
    }
}

/// Kueue's CRDs, those it converts pointed at its webhook on `port`.
async fn install_crds(client: &Client, bin: &std::path::Path, port: u16) {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let dir = bin.join("kueue-crds");
    for entry in std::fs::read_dir(&dir).expect("Kueue's CRDs") {
        let path = entry.unwrap().path();
        if path.extension().and_then(|e| e.to_str()) != Some("yaml") {
            continue;
        }
        let mut crd = documents(&std::fs::read_to_string(&path).unwrap()).remove(0);
        let plural = crd["spec"]["names"]["plural"].as_str().unwrap().to_string();
        if CONVERTED.contains(&plural.as_str()) {
            crd["spec"]["conversion"] = json!({
                "strategy": "Webhook",
                "webhook": {"conversionReviewVersions": ["v1"], "clientConfig": {"service":
                    {"namespace": NAMESPACE, "name": SERVICE, "path": "/convert", "port": port}}}});
        }
        let name = crd["metadata"]["name"].as_str().unwrap().to_string();
        apply(&crds, &name, &crd).await;
    }
    until(60, "Kueue's CRDs established", || async {
        crds.list(&ListParams::default()).await.is_ok_and(|l| {
            l.items
                .iter()
                .filter(|c| c.spec.group == "kueue.x-k8s.io")
                .all(|c| {
                    c.status
                        .as_ref()
                        .and_then(|s| s.conditions.as_ref())
                        .is_some_and(|cs| {
                            cs.iter()
                                .any(|c| c.type_ == "Established" && c.status == "True")
                        })
                })
        })
    })
    .await;
}

/// Kueue's webhook configurations under the names its certificate
/// management injects a CA into, each webhook on `port` and narrowed to
/// managed namespaces.
async fn install_webhooks(client: &Client, bin: &std::path::Path, port: u16) {
    let text = std::fs::read_to_string(bin.join("kueue-webhooks.yaml")).unwrap();
    for mut config in documents(&text) {
        let kind = config["kind"].as_str().unwrap().to_string();
        let name = match kind.as_str() {
            "MutatingWebhookConfiguration" => "kueue-mutating-webhook-configuration",
            _ => "kueue-validating-webhook-configuration",
        };
        config["metadata"]["name"] = json!(name);
        for hook in config["webhooks"].as_array_mut().unwrap() {
            let service = &mut hook["clientConfig"]["service"];
            service["namespace"] = json!(NAMESPACE);
            service["name"] = json!(SERVICE);
            service["port"] = json!(port);
            hook["namespaceSelector"] = json!({"matchLabels": {MANAGED.0: MANAGED.1}});
        }
        match kind.as_str() {
            "MutatingWebhookConfiguration" => {
                let api: Api<admission::MutatingWebhookConfiguration> = Api::all(client.clone());
                apply(&api, name, &config).await;
            }
            _ => {
                let api: Api<admission::ValidatingWebhookConfiguration> = Api::all(client.clone());
                apply(&api, name, &config).await;
            }
        }
    }
}

/// Plays the kubelet's part for the Secret volume Kueue's Deployment
/// mounts at its certificate directory: once Kueue's certificate
/// management has filled the Secret, its keys are written as files into
/// `dir`, where Kueue waits for them.
async fn mount_secret(client: Client, dir: std::path::PathBuf) {
    let secrets: Api<k8s_openapi::api::core::v1::Secret> = Api::namespaced(client, NAMESPACE);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    while std::time::Instant::now() < deadline {
        if let Ok(secret) = secrets.get(SECRET).await
            && let Some(data) = secret.data.filter(|d| d.contains_key("tls.crt"))
        {
            for (key, value) in data {
                std::fs::write(dir.join(key), value.0).expect("write a certificate file");
            }
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
}
