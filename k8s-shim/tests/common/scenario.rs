//! A test scenario, isolated by namespace, node label and scheduler name:
//! its nodes, pods, PodGroups and controller-owned gangs, deleted when it
//! ends; the CRDs it needs; JSON patches and a seeded generator.

use super::*;

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
        self.role_set(&format!("{name}-ps"), name, "ps", 1, 0).await;
        self.role_set(&format!("{name}-worker"), name, "worker", workers, gpus)
            .await;
    }

    /// A StatefulSet `set` of `replicas` pods of role `role` in gang
    /// `group`, with `gpus` GPUs each (Parallel: all pods at once; pods
    /// `SET-I`, the index the ordinal).
    pub async fn role_set(&self, set: &str, group: &str, role: &str, replicas: u32, gpus: u32) {
        let sets = self.stateful_sets();
        let sts = json!({
            "apiVersion": "apps/v1", "kind": "StatefulSet",
            "metadata": {"name": set, "namespace": self.name},
            "spec": {
                "replicas": replicas, "serviceName": group, "podManagementPolicy": "Parallel",
                "selector": {"matchLabels": {"dragon-set": set}},
                "template": {
                    "metadata": {"labels": {"dragon-set": set, "scheduling.x-k8s.io/pod-group": group, "dragon.dev/role": role}},
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

    /// The replicas StatefulSet `set` asks for now (what `/scale` sets);
    /// `None` while it cannot be read.
    pub async fn replicas(&self, set: &str) -> Option<i32> {
        let read = self.stateful_sets().get(set).await.ok()?;
        read.spec.replicas
    }

    fn stateful_sets(&self) -> Api<k8s_openapi::api::apps::v1::StatefulSet> {
        Api::namespaced(self.client.clone(), &self.name)
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
