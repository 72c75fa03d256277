//! The harness shared by the end-to-end tests: one real control plane per
//! test process (tests/controlplane/up.sh), scenarios isolated by namespace,
//! node label and scheduler name, and `dragon-scheduler` processes.
#![allow(dead_code)]

pub mod kueue;
pub mod proxy;

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::resource::v1 as resource;
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

/// A test scenario: its namespace, nodes and scheduler name.
pub struct Scenario {
    pub client: Client,
    pub name: String,
    /// The scenario whose nodes and scheduler its pods use (its own name,
    /// unless it shares another's).
    cluster: String,
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
            cluster: name.to_string(),
        }
    }

    /// A scenario in namespace `name` whose pods go to `host`'s nodes and
    /// scheduler (two teams' namespaces on one cluster).
    pub async fn sharing(name: &str, host: &Scenario) -> Scenario {
        let mut s = Scenario::new(name).await;
        s.cluster = host.name.clone();
        s
    }

    pub fn scheduler_name(&self) -> String {
        format!("dragon-{}", self.cluster)
    }

    pub async fn node(&self, name: &str, gpus: u32) {
        self.node_with(name, gpus, json!({})).await;
    }

    /// A node offering `extra` (resource name → quantity) besides CPU,
    /// memory, pods and `gpus` GPUs.
    pub async fn node_with(&self, name: &str, gpus: u32, extra: Value) {
        self.create_node(name, gpus, extra, json!({})).await;
    }

    /// A node of `gpus` GPUs carrying `labels` (key → value) besides the
    /// scenario's.
    pub async fn node_labelled(&self, name: &str, gpus: u32, labels: Value) {
        self.create_node(name, gpus, json!({}), labels).await;
    }

    async fn create_node(&self, name: &str, gpus: u32, extra: Value, more_labels: Value) {
        let nodes: Api<Node> = Api::all(self.client.clone());
        let mut alloc = json!({"cpu": "32", "memory": "128Gi", "pods": "110", "nvidia.com/gpu": gpus.to_string()});
        merge(&mut alloc, &extra);
        let full = format!("{}-{name}", self.name);
        let mut labels =
            json!({"type": "kwok", "dragon-e2e": self.name, "kubernetes.io/hostname": full});
        merge(&mut labels, &more_labels);
        let node = json!({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": full, "annotations": {"kwok.x-k8s.io/node": "fake"},
                         "labels": labels},
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

    /// A PodGroup with `spec` as given (checked by the CRD's schema only).
    pub async fn podgroup_spec(&self, name: &str, spec: Value) {
        let pg = json!({
            "apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": self.name},
            "spec": spec
        });
        podgroups(&self.client, &self.name)
            .create(&PostParams::default(), &serde_json::from_value(pg).unwrap())
            .await
            .unwrap();
    }

    /// A `scheduling.k8s.io/v1beta1` PodGroup: a gang of `min_count`.
    pub async fn native_podgroup(&self, name: &str, min_count: u32) {
        let api: Api<k8s_openapi::api::scheduling::v1beta1::PodGroup> =
            Api::namespaced(self.client.clone(), &self.name);
        let pg = json!({
            "apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": self.name},
            "spec": {"schedulingPolicy": {"gang": {"minCount": min_count}}}
        });
        api.create(&PostParams::default(), &serde_json::from_value(pg).unwrap())
            .await
            .unwrap();
    }

    /// The `PodGroupInitiallyScheduled` condition of `scheduling.k8s.io`
    /// PodGroup `name`: (status, reason, message).
    pub async fn native_condition(&self, name: &str) -> Option<(String, String, String)> {
        let api: Api<k8s_openapi::api::scheduling::v1beta1::PodGroup> =
            Api::namespaced(self.client.clone(), &self.name);
        let pg = api.get(name).await.ok()?;
        pg.status?
            .conditions?
            .into_iter()
            .find(|c| c.type_ == "PodGroupInitiallyScheduled")
            .map(|c| (c.status, c.reason, c.message))
    }

    /// A pod of ours in `scheduling.k8s.io` PodGroup `group`
    /// (`spec.schedulingGroup`), asking `gpus` GPUs.
    pub async fn native_member(&self, name: &str, group: &str, gpus: u32) {
        self.native_member_for(name, &self.scheduler_name(), (group, "", 0), gpus)
            .await;
    }

    /// A pod for `scheduler` in `scheduling.k8s.io` PodGroup `group.0`
    /// (`spec.schedulingGroup`) with role `group.1` (if not empty) and
    /// index `group.2`, asking `gpus` GPUs.
    pub async fn native_member_for(
        &self,
        name: &str,
        scheduler: &str,
        (group, role, index): (&str, &str, u32),
        gpus: u32,
    ) {
        let mut pod = self.pod_manifest(name, scheduler, None, gpus, None, None, &[]);
        pod["spec"]["schedulingGroup"] = json!({"podGroupName": group});
        if !role.is_empty() {
            pod["metadata"]["labels"] =
                json!({"dragon.dev/role": role, "dragon.dev/index": index.to_string()});
        }
        self.submit(pod).await;
    }

    /// The `status` of PodGroup `name` (null before one is written).
    pub async fn podgroup_status(&self, name: &str) -> Value {
        podgroups(&self.client, &self.name)
            .get(name)
            .await
            .map(|g| g.data["status"].clone())
            .unwrap_or(Value::Null)
    }

    /// A bare pod of PodGroup `group` with no role (as a Deployment's or a
    /// hand-written gang's), running `seconds` if given; created bound to
    /// node `on` if given.
    pub async fn member(
        &self,
        name: &str,
        group: &str,
        gpus: u32,
        seconds: Option<u32>,
        on: Option<&str>,
    ) {
        let mut pod = self.pod_manifest(name, &self.scheduler_name(), None, gpus, seconds, on, &[]);
        pod["metadata"]["labels"] = json!({"scheduling.x-k8s.io/pod-group": group});
        self.submit(pod).await;
    }

    /// A pod of ours; `group` = (podgroup, role, index); `seconds` = run time.
    pub async fn pod(
        &self,
        name: &str,
        group: Option<(&str, &str, u32)>,
        gpus: u32,
        seconds: Option<u32>,
    ) {
        self.create_pod(
            name,
            &self.scheduler_name(),
            group,
            gpus,
            seconds,
            None,
            &[],
        )
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
        self.create_pod(name, scheduler, group, gpus, None, None, &[])
            .await;
    }

    /// A pod of ours held by scheduling gates `gates` until they are removed.
    pub async fn gated_pod(
        &self,
        name: &str,
        group: Option<(&str, &str, u32)>,
        gpus: u32,
        gates: &[&str],
    ) {
        self.create_pod(name, &self.scheduler_name(), group, gpus, None, None, gates)
            .await;
    }

    /// Remove every scheduling gate of pod `name`.
    pub async fn ungate(&self, name: &str) {
        let pods: Api<Pod> = Api::namespaced(self.client.clone(), &self.name);
        pods.patch(
            name,
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(json!({"spec": {"schedulingGates": null}})),
        )
        .await
        .unwrap();
    }

    /// Remove every finalizer of pod `name`: a pod deleted while held goes.
    pub async fn release(&self, name: &str) {
        let pods: Api<Pod> = Api::namespaced(self.client.clone(), &self.name);
        pods.patch(
            name,
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(json!({"metadata": {"finalizers": null}})),
        )
        .await
        .unwrap();
    }

    /// A pod of ours with `extra` merged into its manifest (affinity,
    /// ports, requests of other resources...).
    pub async fn pod_with(
        &self,
        name: &str,
        group: Option<(&str, &str, u32)>,
        gpus: u32,
        extra: Value,
    ) {
        let mut pod = self.pod_manifest(name, &self.scheduler_name(), group, gpus, None, None, &[]);
        merge(&mut pod, &extra);
        self.submit(pod).await;
    }

    /// A PersistentVolume reachable only from node `node` of the scenario
    /// and a claim bound to it (the controller manager binds them): returns
    /// (volume, claim).
    pub async fn local_volume(&self, name: &str, node: &str) -> (String, String) {
        let pv = self
            .volume(name, node, "dragon-e2e-local", "ReadWriteOnce")
            .await;
        self.claim_in(name, "dragon-e2e-local", "ReadWriteOnce", Some(&pv))
            .await;
        self.until_claim_bound(name).await;
        (pv, name.to_string())
    }

    /// Wait until the PV controller has bound claim `name`; returns the
    /// volume it is bound to.
    pub async fn until_claim_bound(&self, name: &str) -> String {
        let claims: Api<k8s_openapi::api::core::v1::PersistentVolumeClaim> =
            Api::namespaced(self.client.clone(), &self.name);
        let bound = || async {
            let c = claims.get(name).await.ok()?;
            let phase = c.status.and_then(|s| s.phase);
            c.spec
                .and_then(|s| s.volume_name)
                .filter(|_| phase.as_deref() == Some("Bound"))
        };
        until(60, "the claim bound to its volume", || async {
            bound().await.is_some()
        })
        .await;
        bound().await.unwrap_or_default()
    }

    /// PersistentVolume `SCENARIO-NAME` of 1Gi and class `class`, reachable
    /// only from node `node` of the scenario, mounted `mode`.
    pub async fn volume(&self, name: &str, node: &str, class: &str, mode: &str) -> String {
        let pv = format!("{}-{name}", self.name);
        let volumes: Api<k8s_openapi::api::core::v1::PersistentVolume> =
            Api::all(self.client.clone());
        let _ = volumes.delete(&pv, &DeleteParams::default()).await;
        let volume = json!({
            "metadata": {"name": pv, "labels": {"dragon-e2e": self.name}},
            "spec": {
                "capacity": {"storage": "1Gi"}, "accessModes": [mode],
                "storageClassName": class, "local": {"path": "/data"},
                "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                    {"key": "kubernetes.io/hostname", "operator": "In", "values": [format!("{}-{node}", self.name)]}]}]}}
            }
        });
        volumes
            .create(
                &PostParams::default(),
                &serde_json::from_value(volume).unwrap(),
            )
            .await
            .unwrap();
        pv
    }

    /// StorageClass `SCENARIO-NAME` of volumes made by hand, bound once a
    /// pod using a claim is placed (`WaitForFirstConsumer`).
    pub async fn waiting_class(&self, name: &str) -> String {
        let full = format!("{}-{name}", self.name);
        let classes: Api<k8s_openapi::api::storage::v1::StorageClass> =
            Api::all(self.client.clone());
        let class = json!({
            "metadata": {"name": full, "labels": {"dragon-e2e": self.name}},
            "provisioner": "kubernetes.io/no-provisioner",
            "volumeBindingMode": "WaitForFirstConsumer"
        });
        classes
            .create(
                &PostParams::default(),
                &serde_json::from_value(class).unwrap(),
            )
            .await
            .unwrap();
        full
    }

    /// A claim `name`, asking for volume `volume` (else left unbound: its
    /// storage class has no provisioner).
    pub async fn claim(&self, name: &str, volume: Option<&str>) {
        self.claim_in(name, "dragon-e2e-local", "ReadWriteOnce", volume)
            .await;
    }

    /// A claim `name` of 1Gi of class `class`, mounted `mode`, asking for
    /// volume `volume` if given.
    pub async fn claim_in(&self, name: &str, class: &str, mode: &str, volume: Option<&str>) {
        let claims: Api<k8s_openapi::api::core::v1::PersistentVolumeClaim> =
            Api::namespaced(self.client.clone(), &self.name);
        let mut claim = json!({
            "metadata": {"name": name},
            "spec": {"accessModes": [mode], "storageClassName": class,
                     "resources": {"requests": {"storage": "1Gi"}}}
        });
        if let Some(v) = volume {
            claim["spec"]["volumeName"] = json!(v);
        }
        claims
            .create(
                &PostParams::default(),
                &serde_json::from_value(claim).unwrap(),
            )
            .await
            .unwrap();
    }

    #[allow(clippy::too_many_arguments)]
    async fn create_pod(
        &self,
        name: &str,
        scheduler: &str,
        group: Option<(&str, &str, u32)>,
        gpus: u32,
        seconds: Option<u32>,
        bound_to: Option<&str>,
        gates: &[&str],
    ) {
        let pod = self.pod_manifest(name, scheduler, group, gpus, seconds, bound_to, gates);
        self.submit(pod).await;
    }

    /// Creates pod manifest `pod` (see [`Self::pod_manifest`]).
    pub async fn submit(&self, pod: Value) {
        let pods: Api<Pod> = Api::namespaced(self.client.clone(), &self.name);
        pods.create(
            &PostParams::default(),
            &serde_json::from_value(pod).unwrap(),
        )
        .await
        .unwrap();
    }

    #[allow(clippy::too_many_arguments)]
    pub fn pod_manifest(
        &self,
        name: &str,
        scheduler: &str,
        group: Option<(&str, &str, u32)>,
        gpus: u32,
        seconds: Option<u32>,
        bound_to: Option<&str>,
        gates: &[&str],
    ) -> Value {
        let mut labels = json!({});
        if let Some((g, role, index)) = group {
            labels = json!({"scheduling.x-k8s.io/pod-group": g, "dragon.dev/role": role, "dragon.dev/index": index.to_string()});
        }
        let mut annotations = json!({});
        if let Some(s) = seconds {
            annotations = json!({"dragon.dev/complete-after-seconds": s.to_string()});
        }
        let mut pod = json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": self.name, "labels": labels, "annotations": annotations},
            "spec": {
                "schedulerName": scheduler,
                "tolerations": [{"key": "kwok.x-k8s.io/node", "operator": "Exists", "effect": "NoSchedule"}],
                "containers": [{"name": "c", "image": "fake",
                    "resources": {"requests": {"cpu": "100m", "memory": "128Mi", "nvidia.com/gpu": gpus.to_string()},
                                  "limits": {"nvidia.com/gpu": gpus.to_string()}}}]
            }
        });
        if !gates.is_empty() {
            pod["spec"]["schedulingGates"] =
                json!(gates.iter().map(|g| json!({"name": g})).collect::<Vec<_>>());
        }
        // Created already bound to a node of this scenario, or left for a
        // scheduler to place on one.
        match bound_to {
            Some(node) => pod["spec"]["nodeName"] = json!(format!("{}-{node}", self.name)),
            None => pod["spec"]["nodeSelector"] = json!({"dragon-e2e": self.cluster}),
        }
        pod
    }

    /// Creates `object` (JSON) through `api`, as written.
    pub async fn create<K>(&self, api: &Api<K>, object: Value) -> K
    where
        K: kube::Resource
            + Clone
            + std::fmt::Debug
            + serde::de::DeserializeOwned
            + serde::Serialize,
    {
        let typed: K = serde_json::from_value(object).expect("a valid object");
        api.create(&PostParams::default(), &typed)
            .await
            .expect("created")
    }

    /// The scenario's namespace with `labels` added.
    pub async fn label_namespace(&self, labels: Value) {
        let ns: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(self.client.clone());
        ns.patch(
            &self.name,
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(json!({"metadata": {"labels": labels}})),
        )
        .await
        .expect("labelled");
    }

    /// DeviceClass `SCENARIO-NAME`: the devices of `driver`.
    pub async fn device_class(&self, name: &str, driver: &str) -> String {
        self.create_device_class(name, driver, None).await
    }

    /// DeviceClass `SCENARIO-NAME`: the devices of `driver`, serving
    /// requests of extended resource `resource` on nodes that do not
    /// advertise it.
    pub async fn device_class_serving(&self, name: &str, driver: &str, resource: &str) -> String {
        self.create_device_class(name, driver, Some(resource)).await
    }

    async fn create_device_class(&self, name: &str, driver: &str, serving: Option<&str>) -> String {
        let full = format!("{}-{name}", self.name);
        let classes: Api<resource::DeviceClass> = Api::all(self.client.clone());
        let mut class = json!({
            "metadata": {"name": full, "labels": {"dragon-e2e": self.name}},
            "spec": {"selectors": [{"cel": {"expression": format!("device.driver == \"{driver}\"")}}]}
        });
        if let Some(resource) = serving {
            class["spec"]["extendedResourceName"] = json!(resource);
        }
        classes
            .create(
                &PostParams::default(),
                &serde_json::from_value(class).unwrap(),
            )
            .await
            .unwrap();
        full
    }

    /// A ResourceSlice of driver `driver` publishing `devices` (name, NVLink
    /// domain) on node `node` of the scenario, in pool `pool`: what a DRA
    /// driver's kubelet plugin would publish.
    pub async fn device_slice(
        &self,
        driver: &str,
        node: &str,
        pool: &str,
        devices: &[(&str, &str)],
    ) {
        let slices: Api<resource::ResourceSlice> = Api::all(self.client.clone());
        let devices: Vec<Value> = devices
            .iter()
            .map(|(name, domain)| {
                json!({"name": name, "attributes": {"nvlink": {"string": domain}}})
            })
            .collect();
        let slice = json!({
            "metadata": {"name": format!("{}-{node}-{pool}", self.name), "labels": {"dragon-e2e": self.name}},
            "spec": {
                "driver": driver,
                "nodeName": format!("{}-{node}", self.name),
                "pool": {"name": format!("{}-{node}-{pool}", self.name), "generation": 1, "resourceSliceCount": 1},
                "devices": devices
            }
        });
        slices
            .create(
                &PostParams::default(),
                &serde_json::from_value(slice).unwrap(),
            )
            .await
            .unwrap();
    }

    /// ResourceClaimTemplate `name`: `count` devices of class `class`.
    pub async fn claim_template(&self, name: &str, class: &str, count: u32) {
        let templates: Api<resource::ResourceClaimTemplate> =
            Api::namespaced(self.client.clone(), &self.name);
        let t = json!({
            "metadata": {"name": name, "namespace": self.name},
            "spec": {"spec": {"devices": {"requests": [
                {"name": "gpu", "exactly": {"deviceClassName": class, "count": count}}
            ]}}}
        });
        templates
            .create(&PostParams::default(), &serde_json::from_value(t).unwrap())
            .await
            .unwrap();
    }

    /// ResourceClaim `name`: `count` devices of class `class`, all with one
    /// value of attribute `same` when given.
    pub async fn device_claim(&self, name: &str, class: &str, count: u32, same: Option<&str>) {
        let claims: Api<resource::ResourceClaim> = Api::namespaced(self.client.clone(), &self.name);
        let mut devices = json!({"requests": [
            {"name": "gpus", "exactly": {"deviceClassName": class, "count": count}}
        ]});
        if let Some(attribute) = same {
            devices["constraints"] = json!([{"matchAttribute": attribute}]);
        }
        let c = json!({"metadata": {"name": name, "namespace": self.name}, "spec": {"devices": devices}});
        claims
            .create(&PostParams::default(), &serde_json::from_value(c).unwrap())
            .await
            .unwrap();
    }

    /// The ResourceClaim pod `pod` names as `claim` (from a template, as
    /// its status says, or by name), as the API server has it.
    pub async fn claim_of(&self, pod: &str, claim: &str) -> Option<resource::ResourceClaim> {
        let pods: Api<Pod> = Api::namespaced(self.client.clone(), &self.name);
        let p = pods.get(pod).await.ok()?;
        let spec = p
            .spec
            .as_ref()?
            .resource_claims
            .as_ref()?
            .iter()
            .find(|c| c.name == claim)?
            .clone();
        let name = match spec.resource_claim_name {
            Some(n) => n,
            None => {
                p.status?
                    .resource_claim_statuses?
                    .into_iter()
                    .find(|s| s.name == claim)?
                    .resource_claim_name?
            }
        };
        let claims: Api<resource::ResourceClaim> = Api::namespaced(self.client.clone(), &self.name);
        claims.get(&name).await.ok()
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
        remove_scenario(&self.client, &self.name).await;
    }
}

/// Its nodes and namespace deleted: a scenario that fails leaves no nodes
/// for the next one's pods to land on.
async fn remove_scenario(client: &Client, name: &str) {
    let nodes: Api<Node> = Api::all(client.clone());
    let lp = ListParams::default().labels(&format!("dragon-e2e={name}"));
    for n in nodes.list(&lp).await.map(|l| l.items).unwrap_or_default() {
        if let Some(node) = n.metadata.name.as_deref() {
            let _ = nodes.delete(node, &DeleteParams::default()).await;
        }
    }
    let slices: Api<resource::ResourceSlice> = Api::all(client.clone());
    let _ = slices
        .delete_collection(&DeleteParams::default(), &lp)
        .await;
    let classes: Api<resource::DeviceClass> = Api::all(client.clone());
    let _ = classes
        .delete_collection(&DeleteParams::default(), &lp)
        .await;
    let volumes: Api<k8s_openapi::api::core::v1::PersistentVolume> = Api::all(client.clone());
    let _ = volumes
        .delete_collection(&DeleteParams::default(), &lp)
        .await;
    let storage: Api<k8s_openapi::api::storage::v1::StorageClass> = Api::all(client.clone());
    let _ = storage
        .delete_collection(&DeleteParams::default(), &lp)
        .await;
    let csi_nodes: Api<k8s_openapi::api::storage::v1::CSINode> = Api::all(client.clone());
    let _ = csi_nodes
        .delete_collection(&DeleteParams::default(), &lp)
        .await;
    let drivers: Api<k8s_openapi::api::storage::v1::CSIDriver> = Api::all(client.clone());
    let _ = drivers
        .delete_collection(&DeleteParams::default(), &lp)
        .await;
    let ns: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
    let _ = ns.delete(name, &DeleteParams::default()).await;
}

impl Drop for Scenario {
    /// A test that panics (a failed assertion) never reaches `cleanup`:
    /// clean up here, on a thread and runtime of its own, since the test's
    /// runtime is the one unwinding.
    fn drop(&mut self) {
        if !std::thread::panicking() {
            return;
        }
        let name = self.name.clone();
        let done = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a runtime for the clean-up");
            rt.block_on(async {
                let client = client().await;
                remove_scenario(&client, &name).await;
            });
        })
        .join();
        if done.is_err() {
            eprintln!(
                "scenario {}: the clean-up after a failure failed too",
                self.name
            );
        }
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
/// Whether `check` holds within `secs` seconds (polled every 250 ms), so
/// a caller can say what it saw when it does not.
pub async fn until_within<F, Fut>(secs: u64, mut check: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + Duration::from_secs(secs);
    while !check().await {
        if Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    true
}

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

/// A small deterministic generator (xorshift64*), so a run can be
/// repeated from its seed.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in `lo..=hi`.
    pub fn range(&mut self, lo: u32, hi: u32) -> u32 {
        lo + (self.next() % u64::from(hi - lo + 1)) as u32
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

/// JSON merge (RFC 7386 without deletion): objects merge key by key,
/// anything else in `patch` replaces.
pub fn merge(into: &mut Value, patch: &Value) {
    match (into, patch) {
        (Value::Object(a), Value::Object(b)) => {
            for (k, v) in b {
                merge(a.entry(k.clone()).or_insert(Value::Null), v);
            }
        }
        (into, patch) => *into = patch.clone(),
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

// ---------------------------------------------------------------------------
// Faults: control-plane components, paused schedulers, controller-owned gangs,
// a pod monitor and the invariants every fault test checks afterwards.

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

impl Scenario {
    /// A pod created already bound to node `node` of the scenario (as if
    /// placed before this scheduler started): it skips scheduling.
    pub async fn pod_on(
        &self,
        name: &str,
        scheduler: &str,
        group: Option<(&str, &str, u32)>,
        node: &str,
        gpus: u32,
    ) {
        self.create_pod(name, scheduler, group, gpus, None, Some(node), &[])
            .await;
    }

    /// A gang whose pods a controller owns, so that a released (deleted)
    /// member comes back: a PodGroup (minMember = workers + 1), a one-replica
    /// StatefulSet `NAME-ps` and a StatefulSet `NAME-worker` of `workers`
    /// pods with `gpus` GPUs each (Parallel: all pods at once). Pods are
    /// `NAME-ps-0`, `NAME-worker-I`; the index is the StatefulSet ordinal.
    pub async fn gang_sets(&self, name: &str, workers: u32, gpus: u32) {
        self.podgroup(name, workers + 1, json!({})).await;
        let sets: Api<k8s_openapi::api::apps::v1::StatefulSet> =
            Api::namespaced(self.client.clone(), &self.name);
        for (role, replicas, gpus) in [("ps", 1, 0), ("worker", workers, gpus)] {
            let set = format!("{name}-{role}");
            let sts = json!({
                "apiVersion": "apps/v1", "kind": "StatefulSet",
                "metadata": {"name": set, "namespace": self.name},
                "spec": {
                    "replicas": replicas, "serviceName": name, "podManagementPolicy": "Parallel",
                    "selector": {"matchLabels": {"dragon-set": set}},
                    "template": {
                        "metadata": {"labels": {"dragon-set": set, "scheduling.x-k8s.io/pod-group": name, "dragon.dev/role": role}},
                        "spec": {
                            "schedulerName": self.scheduler_name(),
                            "nodeSelector": {"dragon-e2e": self.name},
                            "terminationGracePeriodSeconds": 0,
                            "tolerations": [{"key": "kwok.x-k8s.io/node", "operator": "Exists", "effect": "NoSchedule"}],
                            "containers": [{"name": "c", "image": "fake",
                                "resources": {"requests": {"cpu": "100m", "memory": "128Mi", "nvidia.com/gpu": gpus.to_string()},
                                              "limits": {"nvidia.com/gpu": gpus.to_string()}}}]
                        }
                    }
                }
            });
            sets.create(
                &PostParams::default(),
                &serde_json::from_value(sts).unwrap(),
            )
            .await
            .unwrap();
        }
    }

    /// Pods of the namespace whose name starts with `prefix` that are bound
    /// and not being deleted or finished (what really holds a node).
    pub async fn live_bound(&self, prefix: &str) -> usize {
        self.pods()
            .await
            .iter()
            .filter(|p| p.metadata.name.as_deref().unwrap_or("").starts_with(prefix))
            .filter(|p| is_live_bound(p))
            .count()
    }

    /// Every Event of the namespace (events.k8s.io/v1).
    pub async fn events(&self) -> Vec<k8s_openapi::api::events::v1::Event> {
        let events: Api<k8s_openapi::api::events::v1::Event> =
            Api::namespaced(self.client.clone(), &self.name);
        events.list(&ListParams::default()).await.unwrap().items
    }

    /// Wait for `pod` to have a Scheduled Event: dragon-scheduler publishes
    /// it from a task of its own once the bind succeeded, so it may come a
    /// moment after the pod is seen bound.
    pub async fn until_scheduled_event(&self, secs: u64, pod: &str) {
        until(secs, &format!("a Scheduled event on {pod}"), || async {
            self.events_for(pod)
                .await
                .iter()
                .any(|(r, _)| r == "Scheduled")
        })
        .await;
    }

    /// Wait for a FailedScheduling Event on `pod` whose note contains `text`.
    pub async fn until_explained(&self, secs: u64, pod: &str, text: &str) {
        until(
            secs,
            &format!("a FailedScheduling event on {pod} saying {text:?}"),
            || async {
                self.events_for(pod)
                    .await
                    .iter()
                    .any(|(r, n)| r == "FailedScheduling" && n.contains(text))
            },
        )
        .await;
    }

    /// The invariants every fault test ends with:
    /// 1. no gang partly bound: each PodGroup of the namespace has none or at
    ///    least minMember of its pods bound (waits up to `secs` for that);
    /// 2. no node overcommitted: for every node of the scenario, the requests
    ///    of the pods bound to it (any namespace, not finished) fit its
    ///    allocatable (cpu, memory, GPUs, pod count);
    /// 3. no pod bound twice: no binding was refused because the pod was
    ///    already bound (scheduler logs and events), and a pod name has no
    ///    more Scheduled events than incarnations of it that were bound
    ///    (from `monitor`, else one);
    /// 4. every pending pod of the namespace is explained by a
    ///    FailedScheduling event (waits up to `secs`).
    pub async fn assert_invariants(
        &self,
        secs: u64,
        schedulers: &[&Scheduler],
        monitor: Option<&Monitor>,
    ) {
        let logs: String = schedulers.iter().map(|s| s.log()).collect();
        // 1. gangs whole or not at all. The groups are read again each
        // time: a controller deletes a finished job's PodGroup, and the pods
        // it leaves running (a PS) are no longer a gang.
        let mut partial = String::new();
        let deadline = Instant::now() + Duration::from_secs(secs);
        loop {
            partial.clear();
            let groups = podgroups(&self.client, &self.name)
                .list(&ListParams::default())
                .await
                .unwrap()
                .items;
            let pods = self.pods().await;
            for g in &groups {
                let name = g.metadata.name.clone().unwrap_or_default();
                let min = g.data["spec"]["minMember"].as_u64().unwrap_or(0) as usize;
                let bound = pods
                    .iter()
                    .filter(|p| {
                        p.metadata
                            .labels
                            .as_ref()
                            .and_then(|l| l.get("scheduling.x-k8s.io/pod-group"))
                            == Some(&name)
                    })
                    .filter(|p| is_live_bound(p))
                    .count();
                if bound > 0 && bound < min {
                    partial += &format!("gang {name}: {bound} of minMember {min} bound; ");
                }
            }
            if partial.is_empty() {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "gangs left partly bound for {secs} s: {partial}\n{logs}"
            );
            tokio::time::sleep(Duration::from_millis(250)).await;
        }

        // 2. capacity.
        let nodes: Api<Node> = Api::all(self.client.clone());
        let all_pods: Api<Pod> = Api::all(self.client.clone());
        let lp = ListParams::default().labels(&format!("dragon-e2e={}", self.name));
        for n in nodes.list(&lp).await.unwrap().items {
            let node = n.metadata.name.clone().unwrap();
            let alloc = n
                .status
                .as_ref()
                .and_then(|s| s.allocatable.clone())
                .unwrap_or_default();
            let on_node = all_pods
                .list(&ListParams::default().fields(&format!("spec.nodeName={node}")))
                .await
                .unwrap()
                .items;
            let mut used = Usage::default();
            let mut count = 0u64;
            for p in on_node.iter().filter(|p| !is_finished(p)) {
                used = used.plus(&requests(p));
                count += 1;
            }
            let cap = Usage::of(&alloc);
            let pods_cap = alloc
                .get("pods")
                .map(|q| dragon_scheduler::quantity::value(&q.0).unwrap())
                .unwrap_or(u64::MAX);
            assert!(
                used.fits(&cap) && count <= pods_cap,
                "node {node} overcommitted: {used:?} ({count} pods) > {cap:?} ({pods_cap} pods)"
            );
        }

        // 3. nothing bound twice.
        if let Some(m) = monitor {
            m.catch_up(self).await;
        }
        let events = self.events().await;
        for needle in ["already assigned", "already bound"] {
            assert!(
                !logs.contains(needle),
                "a scheduler tried to bind a bound pod ({needle}):\n{logs}"
            );
            let refused: Vec<_> = events
                .iter()
                .filter(|e| e.note.as_deref().unwrap_or("").contains(needle))
                .map(|e| e.note.clone().unwrap_or_default())
                .collect();
            assert!(
                refused.is_empty(),
                "a scheduler tried to bind a bound pod: {refused:?}"
            );
        }
        let mut scheduled: BTreeMap<String, usize> = BTreeMap::new();
        for e in &events {
            if e.reason.as_deref() == Some("Scheduled")
                && let Some(pod) = e.regarding.as_ref().and_then(|r| r.name.clone())
            {
                *scheduled.entry(pod).or_default() += 1;
            }
        }
        for (pod, n) in &scheduled {
            // One Scheduled event is always allowed: a pod bound, run to
            // completion and deleted while the monitor's watch backed off
            // after an API server restart was never seen bound by it.
            let allowed = monitor.map_or(1, |m| m.bound_incarnations(pod).max(1));
            assert!(
                *n <= allowed,
                "pod {pod}: {n} Scheduled events for {allowed} bound incarnation(s)"
            );
        }
        if let Some(m) = monitor {
            let rebound = m.rebound();
            assert!(rebound.is_empty(), "pods moved between nodes: {rebound:?}");
        }

        // 4. pending pods explained.
        let deadline = Instant::now() + Duration::from_secs(secs);
        loop {
            let events = self.events().await;
            let unexplained: Vec<String> = self
                .pods()
                .await
                .into_iter()
                .filter(|p| !is_bound(p) && p.metadata.deletion_timestamp.is_none())
                .filter_map(|p| p.metadata.name)
                .filter(|name| {
                    !events.iter().any(|e| {
                        e.reason.as_deref() == Some("FailedScheduling")
                            && e.regarding.as_ref().and_then(|r| r.name.as_deref())
                                == Some(name.as_str())
                    })
                })
                .collect();
            if unexplained.is_empty() {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "pending pods without a FailedScheduling event after {secs} s: {unexplained:?}"
            );
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }
}

pub fn is_bound(p: &Pod) -> bool {
    p.spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .is_some_and(|n| !n.is_empty())
}

pub fn is_finished(p: &Pod) -> bool {
    matches!(
        p.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Succeeded") | Some("Failed")
    )
}

/// Bound, not being deleted, not finished.
pub fn is_live_bound(p: &Pod) -> bool {
    is_bound(p) && p.metadata.deletion_timestamp.is_none() && !is_finished(p)
}

/// Requests summed over a pod's containers (cpu milli, memory MiB, GPUs).
#[derive(Debug, Default, Clone, Copy)]
pub struct Usage {
    pub cpu_milli: u64,
    pub memory_mib: u64,
    pub gpus: u64,
}

impl Usage {
    pub fn of(
        list: &BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>,
    ) -> Usage {
        use dragon_scheduler::quantity;
        Usage {
            cpu_milli: list
                .get("cpu")
                .map_or(0, |q| quantity::cpu_milli(&q.0).unwrap()),
            memory_mib: list
                .get("memory")
                .map_or(0, |q| quantity::value(&q.0).unwrap().div_ceil(1 << 20)),
            gpus: list
                .get("nvidia.com/gpu")
                .map_or(0, |q| quantity::value(&q.0).unwrap()),
        }
    }

    pub fn plus(self, o: &Usage) -> Usage {
        Usage {
            cpu_milli: self.cpu_milli + o.cpu_milli,
            memory_mib: self.memory_mib + o.memory_mib,
            gpus: self.gpus + o.gpus,
        }
    }

    pub fn fits(&self, cap: &Usage) -> bool {
        self.cpu_milli <= cap.cpu_milli
            && self.memory_mib <= cap.memory_mib
            && self.gpus <= cap.gpus
    }
}

pub fn requests(p: &Pod) -> Usage {
    p.spec
        .iter()
        .flat_map(|s| &s.containers)
        .filter_map(|c| c.resources.as_ref().and_then(|r| r.requests.as_ref()))
        .fold(Usage::default(), |u, r| u.plus(&Usage::of(r)))
}

/// One pod incarnation (UID) as the monitor saw it.
#[derive(Debug, Clone)]
pub struct Seen {
    pub name: String,
    pub gang: Option<String>,
    /// The node it was bound to.
    pub node: Option<String>,
    /// It was seen bound to one node, then to another (impossible in
    /// Kubernetes; a double binding would show here).
    pub rebound: bool,
    pub bound_at: Option<Instant>,
    /// Deletion requested, finished or gone, whichever was seen first.
    pub dying_at: Option<Instant>,
    pub gone: bool,
    /// The last `status.nominatedNodeName` it was seen with.
    pub nominated: Option<String>,
}

#[derive(Default)]
struct GangWatch {
    size: usize,
    /// Times the gang was partly bound: (from, until).
    windows: Vec<(Instant, Option<Instant>)>,
}

#[derive(Default)]
struct MonitorState {
    pods: BTreeMap<String, Seen>,
    gangs: BTreeMap<String, GangWatch>,
}

impl MonitorState {
    fn update(&mut self, p: &Pod, gone: bool) {
        let now = Instant::now();
        let Some(uid) = p.metadata.uid.clone() else {
            return;
        };
        let seen = self.pods.entry(uid).or_insert_with(|| Seen {
            name: p.metadata.name.clone().unwrap_or_default(),
            gang: p
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get("scheduling.x-k8s.io/pod-group"))
                .cloned(),
            node: None,
            rebound: false,
            bound_at: None,
            dying_at: None,
            gone: false,
            nominated: None,
        });
        if let Some(n) = p
            .status
            .as_ref()
            .and_then(|s| s.nominated_node_name.clone())
            && !n.is_empty()
        {
            seen.nominated = Some(n);
        }
        if let Some(node) = p.spec.as_ref().and_then(|s| s.node_name.clone())
            && !node.is_empty()
        {
            if seen.node.as_ref().is_some_and(|n| *n != node) {
                seen.rebound = true;
            }
            seen.node = Some(node);
            seen.bound_at.get_or_insert(now);
        }
        if gone || p.metadata.deletion_timestamp.is_some() || is_finished(p) {
            seen.dying_at.get_or_insert(now);
        }
        seen.gone |= gone;
        self.recompute(now);
    }

    fn live_bound(&self, gang: &str) -> usize {
        self.pods
            .values()
            .filter(|s| s.gang.as_deref() == Some(gang) && s.node.is_some() && s.dying_at.is_none())
            .count()
    }

    fn recompute(&mut self, now: Instant) {
        let live: Vec<(String, usize)> = self
            .gangs
            .keys()
            .map(|g| (g.clone(), self.live_bound(g)))
            .collect();
        for (g, n) in live {
            let w = self.gangs.get_mut(&g).unwrap();
            let partial = n > 0 && n < w.size;
            let open = w.windows.last().is_some_and(|(_, end)| end.is_none());
            if partial && !open {
                w.windows.push((now, None));
            } else if !partial && open {
                w.windows.last_mut().unwrap().1 = Some(now);
            }
        }
    }
}

/// Watches a namespace's pods for the whole test: every incarnation (UID),
/// where it was bound, when it died, and how long each registered gang was
/// partly bound.
pub struct Monitor {
    state: std::sync::Arc<Mutex<MonitorState>>,
    task: tokio::task::JoinHandle<()>,
}

impl Monitor {
    pub async fn start(s: &Scenario) -> Monitor {
        use futures::StreamExt;
        use kube::runtime::{WatchStreamExt, watcher};
        let state = std::sync::Arc::new(Mutex::new(MonitorState::default()));
        let api: Api<Pod> = Api::namespaced(s.client.clone(), &s.name);
        let st = state.clone();
        let (ready_tx, ready_rx) = tokio::sync::oneshot::channel();
        let task = tokio::spawn(async move {
            let mut ready = Some(ready_tx);
            let mut stream = watcher(api, watcher::Config::default())
                .default_backoff()
                .boxed();
            let mut listing: Option<std::collections::BTreeSet<String>> = None;
            while let Some(item) = stream.next().await {
                let mut st = st.lock().unwrap();
                match item {
                    Ok(watcher::Event::Init) => listing = Some(Default::default()),
                    Ok(watcher::Event::InitApply(p)) => {
                        if let (Some(l), Some(uid)) = (listing.as_mut(), p.metadata.uid.clone()) {
                            l.insert(uid);
                        }
                        st.update(&p, false);
                    }
                    Ok(watcher::Event::InitDone) => {
                        // What vanished while the watch was down is gone.
                        let listed = listing.take().unwrap_or_default();
                        let now = Instant::now();
                        for (uid, seen) in st.pods.iter_mut() {
                            if !listed.contains(uid) && !seen.gone {
                                seen.gone = true;
                                seen.dying_at.get_or_insert(now);
                            }
                        }
                        st.recompute(now);
                        if let Some(tx) = ready.take() {
                            let _ = tx.send(());
                        }
                    }
                    Ok(watcher::Event::Apply(p)) => st.update(&p, false),
                    Ok(watcher::Event::Delete(p)) => st.update(&p, true),
                    Err(_) => {}
                }
            }
        });
        let _ = tokio::time::timeout(Duration::from_secs(30), ready_rx).await;
        Monitor { state, task }
    }

    /// Wait until the monitor has seen every pod of the namespace as it is
    /// now (its watch may be catching up after an outage).
    pub async fn catch_up(&self, s: &Scenario) {
        until(60, "the pod monitor to catch up", || async {
            let pods = s.pods().await;
            let st = self.state.lock().unwrap();
            pods.iter().all(|p| {
                let node = p.spec.as_ref().and_then(|s| s.node_name.clone());
                p.metadata
                    .uid
                    .as_ref()
                    .and_then(|u| st.pods.get(u))
                    .is_some_and(|seen| node.is_none() || seen.node == node)
            })
        })
        .await;
    }

    /// Track gang `name` of `size` pods.
    pub fn gang(&self, name: &str, size: usize) {
        let mut st = self.state.lock().unwrap();
        st.gangs.insert(
            name.to_string(),
            GangWatch {
                size,
                windows: Vec::new(),
            },
        );
        st.recompute(Instant::now());
    }

    /// The longest time gang `name` was partly bound, counting only time
    /// after `since`.
    pub fn max_partial(&self, name: &str, since: Instant) -> Duration {
        let st = self.state.lock().unwrap();
        let now = Instant::now();
        st.gangs
            .get(name)
            .map(|g| {
                g.windows
                    .iter()
                    .map(|(from, to)| {
                        to.unwrap_or(now)
                            .saturating_duration_since((*from).max(since))
                    })
                    .max()
                    .unwrap_or_default()
            })
            .unwrap_or_default()
    }

    /// How many times gang `name` was partly bound.
    pub fn partial_windows(&self, name: &str) -> usize {
        let st = self.state.lock().unwrap();
        st.gangs.get(name).map_or(0, |g| g.windows.len())
    }

    /// Every incarnation seen so far.
    pub fn seen(&self) -> Vec<Seen> {
        self.state.lock().unwrap().pods.values().cloned().collect()
    }

    /// Incarnations of pod `name` that were bound.
    pub fn bound_incarnations(&self, name: &str) -> usize {
        self.state
            .lock()
            .unwrap()
            .pods
            .values()
            .filter(|s| s.name == name && s.node.is_some())
            .count()
    }

    /// Incarnations seen bound to two nodes.
    pub fn rebound(&self) -> Vec<Seen> {
        self.seen().into_iter().filter(|s| s.rebound).collect()
    }
}

impl Drop for Monitor {
    fn drop(&mut self) {
        self.task.abort();
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
