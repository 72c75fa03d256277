//! [`ClusterIo`] over a kube client: Binding subresources, pod deletes,
//! `/scale` subresources, conditions, Events and PodGroup status. Each
//! request waits for its token of the client-side rate limit, if one is
//! set: one bucket for Events and another for everything else, as
//! kube-scheduler has one client for its API calls and one for events.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use dragon_framework::devices::{Allocation, ExtendedChoice};
use dragon_framework::volumes::VolumeBinding;
use dragon_framework::{ApiError, ApiErrorKind, Release};
use k8s_openapi::api::core::v1 as core;
use k8s_openapi::api::events::v1 as events;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Client;
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::json;

use crate::cluster_io::{ClaimProgress, ClusterIo, Note, Regarding, Unschedulable, Versioned};
use crate::group_status::Status;
use crate::key::{ObjectKey, ScaleTarget};
use crate::ratelimit::TokenBucket;

mod claims;
mod volumes;

/// The object `key` names; a key that is not `namespace/name` is refused
/// before any request is sent.
fn object(key: &str) -> Result<ObjectKey, ApiError> {
    ObjectKey::parse(key).map_err(|e| ApiError::new(ApiErrorKind::Refused, e.to_string()))
}

/// A unique event name: `POD.HEX`, as client-go names events (a
/// `generateName` ending in `.` is refused by validation).
fn event_name(pod: &str) -> String {
    static SEQ: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!(
        "{pod}.{:x}{:04x}",
        nanos,
        SEQ.fetch_add(1, Ordering::Relaxed) & 0xffff
    )
}

/// An API error as the API server put it (`message (reason, code)`): kube's
/// own `Display` also embeds the whole `Status` debug dump, which made
/// FailedScheduling notes longer than an Event may be.
pub fn api_error(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(s) => format!("{} ({}, {})", s.message, s.reason, s.code),
        other => other.to_string(),
    }
}

/// `e` typed by its HTTP status (no status: the server is unavailable),
/// its message prefixed with `doing`.
fn typed(doing: &str, e: &kube::Error) -> ApiError {
    let message = format!("{doing}: {}", api_error(e));
    match e {
        kube::Error::Api(s) => ApiError::from_status(s.code, message),
        _ => ApiError::new(ApiErrorKind::Unavailable, message),
    }
}

/// `patch` made on `version`: a `resourceVersion` in a patch is a
/// precondition, so a pod changed since (bound, perhaps) answers 409
/// instead of being written.
fn on_version(mut patch: serde_json::Value, version: Versioned<'_>) -> serde_json::Value {
    if let Some(v) = version {
        patch["metadata"] = json!({"resourceVersion": v});
    }
    patch
}

/// The longest Event note the API server accepts (`note` is validated as
/// at most 1024 bytes).
pub const MAX_NOTE: usize = 1024;

/// `note` cut to [`MAX_NOTE`] bytes on a character boundary, ending in `…`
/// when cut (an Event with a longer note is refused, and the pod's
/// explanation lost).
pub fn fit_note(mut note: String) -> String {
    if note.len() <= MAX_NOTE {
        return note;
    }
    let mut end = MAX_NOTE - '…'.len_utf8();
    while !note.is_char_boundary(end) {
        end -= 1;
    }
    note.truncate(end);
    note.push('…');
    note
}

/// The PodGroup resource.
pub fn podgroup_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("scheduling.x-k8s.io", "v1alpha1", "PodGroup"),
        "podgroups",
    )
}

/// The scheduler's requests over a kube client.
pub struct KubeIo {
    client: Client,
    scheduler_name: String,
    /// `reportingInstance` of its Events.
    instance: String,
    /// Client-side limit on everything but Events.
    requests: Option<Arc<TokenBucket>>,
    /// Client-side limit on Events.
    events: Option<Arc<TokenBucket>>,
}

impl KubeIo {
    /// Requests of `scheduler_name` through `client`.
    pub fn new(client: Client, scheduler_name: &str) -> KubeIo {
        KubeIo {
            client,
            scheduler_name: scheduler_name.into(),
            instance: format!("{scheduler_name}-{}", std::process::id()),
            requests: None,
            events: None,
        }
    }

    /// Limit requests to `(qps, burst)` (`Config::client_limit`), for Events
    /// and for the rest apart.
    #[must_use]
    pub fn with_rate_limit(mut self, limit: Option<(f64, u32)>) -> KubeIo {
        self.requests = limit.map(|(qps, burst)| Arc::new(TokenBucket::new(qps, burst)));
        self.events = limit.map(|(qps, burst)| Arc::new(TokenBucket::new(qps, burst)));
        self
    }

    async fn request_token(&self) {
        if let Some(b) = &self.requests {
            b.ready().await;
        }
    }

    fn pods(&self, ns: &str) -> Api<core::Pod> {
        Api::namespaced(self.client.clone(), ns)
    }

    fn reference(regarding: &Regarding) -> Result<(ObjectKey, core::ObjectReference), ApiError> {
        let (api_version, kind, key) = match regarding {
            Regarding::Pod(key) => ("v1".to_string(), "Pod".to_string(), key),
            Regarding::PodGroup(key) => {
                let res = podgroup_resource();
                (res.api_version, res.kind, key)
            }
        };
        let key = object(key)?;
        let reference = core::ObjectReference {
            api_version: Some(api_version),
            kind: Some(kind),
            namespace: Some(key.namespace().into()),
            name: Some(key.name().into()),
            ..Default::default()
        };
        Ok((key, reference))
    }
}

#[async_trait::async_trait]
impl ClusterIo for KubeIo {
    async fn allocate_extended(
        &self,
        pod: &str,
        choice: &ExtendedChoice,
    ) -> Result<String, ApiError> {
        self.write_extended_claim(pod, choice).await
    }

    async fn devices_progress(&self, claim: &str) -> Result<ClaimProgress, ApiError> {
        self.read_devices_progress(claim).await
    }

    async fn unreserve(&self, claim: &str, pod: &str) -> Result<(), ApiError> {
        self.write_unreserve(claim, pod).await
    }

    async fn drop_extended_claim(&self, pod: &str) -> Result<(), ApiError> {
        self.delete_extended_claim(pod).await
    }

    async fn allocate(
        &self,
        claim: &str,
        allocation: &Allocation,
        pod: &str,
    ) -> Result<(), ApiError> {
        self.write_allocation(claim, allocation, pod).await
    }

    async fn bind_volume(&self, claim: &str, binding: &VolumeBinding) -> Result<(), ApiError> {
        self.write_volume_binding(claim, binding).await
    }

    async fn claim_progress(
        &self,
        claim: &str,
        binding: &VolumeBinding,
    ) -> Result<ClaimProgress, ApiError> {
        self.read_claim_progress(claim, binding).await
    }

    async fn bind(&self, pod: &str, node: &str) -> Result<(), ApiError> {
        let key = object(pod)?;
        let (ns, name) = (key.namespace(), key.name());
        let binding = core::Binding {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some(ns.into()),
                ..Default::default()
            },
            target: core::ObjectReference {
                api_version: Some("v1".into()),
                kind: Some("Node".into()),
                name: Some(node.into()),
                ..Default::default()
            },
        };
        // Taken just before the request starts: starts are paced as if
        // binds went one at a time; only the waits for answers overlap.
        self.request_token().await;
        self.pods(ns)
            .create_subresource::<_, serde_json::Value>(
                "binding",
                name,
                &PostParams::default(),
                &binding,
            )
            .await
            .map(|_| ())
            .map_err(|e| typed(&format!("binding {pod} to {node}"), &e))
    }

    async fn read_pod(&self, pod: &str) -> Result<Option<core::Pod>, ApiError> {
        let key = object(pod)?;
        self.request_token().await;
        // No resourceVersion: a quorum read, never the watch cache's copy.
        self.pods(key.namespace())
            .get_opt(key.name())
            .await
            .map_err(|e| typed(&format!("reading {pod}"), &e))
    }

    async fn bound_pods(&self) -> Result<Vec<core::Pod>, ApiError> {
        let all: Api<core::Pod> = Api::all(self.client.clone());
        let fields = format!("spec.schedulerName={},spec.nodeName!=", self.scheduler_name);
        let mut pods = Vec::new();
        let mut next: Option<String> = None;
        loop {
            // Pages of 500, as client-go's reflector lists; no
            // resourceVersion, so every page is of one consistent read.
            let mut params = ListParams::default().fields(&fields).limit(500);
            if let Some(token) = &next {
                params = params.continue_token(token);
            }
            self.request_token().await;
            let page = all
                .list(&params)
                .await
                .map_err(|e| typed("listing bound pods", &e))?;
            pods.extend(page.items);
            next = page.metadata.continue_.filter(|t| !t.is_empty());
            if next.is_none() {
                return Ok(pods);
            }
        }
    }

    async fn release(&self, pod: &str) -> Result<Release, ApiError> {
        let key = object(pod)?;
        let (ns, name) = (key.namespace(), key.name());
        let api = self.pods(ns);
        self.request_token().await;
        let current = api
            .get(name)
            .await
            .map_err(|e| typed(&format!("reading {pod} to release it"), &e))?;
        let controlled = current
            .metadata
            .owner_references
            .iter()
            .flatten()
            .any(|o| o.controller == Some(true));
        if !controlled {
            return Ok(Release::Kept);
        }
        // Only this pod, not a same-named one created since.
        let params = kube::api::DeleteParams {
            preconditions: Some(kube::api::Preconditions {
                uid: current.metadata.uid.clone(),
                resource_version: None,
            }),
            ..Default::default()
        };
        self.request_token().await;
        api.delete(name, &params)
            .await
            .map(|_| Release::Unbound)
            .map_err(|e| typed(&format!("deleting {pod}"), &e))
    }

    async fn evict(&self, pod: &str, dry_run: bool) -> Result<(), ApiError> {
        let key = object(pod)?;
        let (ns, name) = (key.namespace(), key.name());
        let params = kube::api::EvictParams {
            delete_options: None,
            post_options: PostParams {
                dry_run,
                ..PostParams::default()
            },
        };
        self.request_token().await;
        match self.pods(ns).evict(name, &params).await {
            Ok(_) => Ok(()),
            // Gone already: nothing is left to evict.
            Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
            // Not load (never retried): a disruption budget's refusal.
            Err(e) if matches!(&e, kube::Error::Api(s) if s.code == 429) => Err(ApiError::new(
                ApiErrorKind::Refused,
                format!("evicting {pod}: {}", api_error(&e)),
            )),
            Err(e) => Err(typed(&format!("evicting {pod}"), &e)),
        }
    }

    async fn replicas(&self, job: &str, target: &ScaleTarget) -> Result<u32, ApiError> {
        let (api, name) = scale_api(&self.client, job, target)?;
        self.request_token().await;
        let scale = api
            .get_subresource("scale", &name)
            .await
            .map_err(|e| typed(&format!("reading the scale of {target}"), &e))?;
        scale
            .data
            .get("spec")
            .and_then(|s| s.get("replicas"))
            .and_then(serde_json::Value::as_u64)
            .and_then(|r| u32::try_from(r).ok())
            .ok_or_else(|| {
                ApiError::new(
                    ApiErrorKind::Refused,
                    format!("the scale of {target} has no spec.replicas"),
                )
            })
    }

    async fn scale(&self, job: &str, target: &ScaleTarget, replicas: u32) -> Result<(), ApiError> {
        let (api, name) = scale_api(&self.client, job, target)?;
        let patch = json!({"spec": {"replicas": replicas}});
        self.request_token().await;
        api.patch_subresource(
            "scale",
            &name,
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await
        .map(|_| ())
        .map_err(|e| typed(&format!("scaling {target} to {replicas}"), &e))
    }

    /// The API server sets the condition True when the pod is bound.
    async fn nominate(
        &self,
        pod: &str,
        node: Option<&str>,
        version: Versioned<'_>,
    ) -> Result<Option<String>, ApiError> {
        let key = object(pod)?;
        let patch = on_version(json!({"status": {"nominatedNodeName": node}}), version);
        self.request_token().await;
        self.pods(key.namespace())
            .patch_status(key.name(), &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map(|p| p.metadata.resource_version)
            .map_err(|e| typed(&format!("nominating {pod} to a node"), &e))
    }

    async fn pod_unschedulable(
        &self,
        pod: &str,
        c: &Unschedulable,
        version: Versioned<'_>,
    ) -> Result<Option<String>, ApiError> {
        let key = object(pod)?;
        let (ns, name) = (key.namespace(), key.name());
        let condition = core::PodCondition {
            type_: "PodScheduled".into(),
            status: "False".into(),
            reason: Some(c.reason.into()),
            message: Some(fit_note(c.message.clone())),
            last_transition_time: Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                k8s_openapi::jiff::Timestamp::now(),
            )),
            ..Default::default()
        };
        // Strategic merge: conditions merge by type.
        let patch = on_version(json!({"status": {"conditions": [condition]}}), version);
        self.request_token().await;
        self.pods(ns)
            .patch_status(name, &PatchParams::default(), &Patch::Strategic(&patch))
            .await
            .map(|p| p.metadata.resource_version)
            .map_err(|e| typed(&format!("setting PodScheduled=False on {pod}"), &e))
    }

    async fn group_condition(
        &self,
        group: &str,
        scheduled: bool,
        message: &str,
    ) -> Result<(), ApiError> {
        let key = object(group)?;
        let (ns, name) = (key.namespace(), key.name());
        let api: Api<k8s_openapi::api::scheduling::v1beta1::PodGroup> =
            Api::namespaced(self.client.clone(), ns);
        let (status, reason) = match scheduled {
            true => ("True", "Scheduled"),
            false => ("False", "Unschedulable"),
        };
        let condition = k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition {
            type_: "PodGroupInitiallyScheduled".into(),
            status: status.into(),
            reason: reason.into(),
            message: fit_note(message.to_string()),
            last_transition_time: k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                k8s_openapi::jiff::Timestamp::now(),
            ),
            observed_generation: None,
        };
        let patch = json!({"status": {"conditions": [condition]}});
        self.request_token().await;
        api.patch_status(name, &PatchParams::default(), &Patch::Strategic(&patch))
            .await
            .map(|_| ())
            .map_err(|e| typed(&format!("setting the condition of PodGroup {group}"), &e))
    }

    /// Each call makes its own Event, so a changed reason is never folded
    /// into an earlier event's series with the old message.
    async fn event(&self, note: &Note) -> Result<(), ApiError> {
        let (key, regarding) = Self::reference(&note.regarding)?;
        let ev = events::Event {
            metadata: ObjectMeta {
                name: Some(event_name(key.name())),
                namespace: Some(key.namespace().into()),
                ..Default::default()
            },
            event_time: Some(MicroTime(k8s_openapi::jiff::Timestamp::now())),
            reporting_controller: Some(self.scheduler_name.clone()),
            reporting_instance: Some(self.instance.clone()),
            action: Some("Scheduling".into()),
            reason: Some(note.reason.into()),
            note: Some(fit_note(note.note.clone())),
            type_: Some(note.type_.into()),
            regarding: Some(regarding),
            ..Default::default()
        };
        if let Some(b) = &self.events {
            b.ready().await;
        }
        Api::<events::Event>::namespaced(self.client.clone(), key.namespace())
            .create(&PostParams::default(), &ev)
            .await
            .map(|_| ())
            .map_err(|e| typed(&format!("publishing an event about {key}"), &e))
    }

    async fn group_status(&self, group: &str, status: &Status) -> Result<(), ApiError> {
        let key = object(group)?;
        let (ns, name) = (key.namespace(), key.name());
        let api: Api<DynamicObject> =
            Api::namespaced_with(self.client.clone(), ns, &podgroup_resource());
        let patch = json!({ "status": status });
        self.request_token().await;
        api.patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map(|_| ())
            .map_err(|e| typed(&format!("updating the status of PodGroup {group}"), &e))
    }
}

/// `/scale` access to `target` in `job`'s namespace.
fn scale_api(
    client: &Client,
    job: &str,
    target: &ScaleTarget,
) -> Result<(Api<DynamicObject>, String), ApiError> {
    let ar = ApiResource {
        group: target.group.clone(),
        version: target.version.clone(),
        api_version: target.api_version(),
        kind: String::new(),
        plural: target.plural.clone(),
    };
    let job = object(job)?;
    Ok((
        Api::namespaced_with(client.clone(), job.namespace(), &ar),
        target.name.clone(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use dragon_framework::{NodeName, PodKey};
    use std::sync::Mutex;
    use std::time::{Duration, Instant};

    /// What the fake API server saw.
    #[derive(Default)]
    struct Seen {
        /// Pod name and start time of each Binding POST, in arrival order.
        bindings: Vec<(String, Instant)>,
        /// `reason` of each Event POSTed.
        events: Vec<String>,
        in_flight: usize,
        max_in_flight: usize,
    }

    /// A client whose API server answers Binding POSTs after `latency`
    /// (refusing pods named `refused-*` as an admission policy would) and
    /// echoes Events back.
    fn fake_api(rt: &tokio::runtime::Runtime, latency: Duration) -> (Client, Arc<Mutex<Seen>>) {
        let seen = Arc::new(Mutex::new(Seen::default()));
        let s = seen.clone();
        let svc = tower::service_fn(move |req: http::Request<kube::client::Body>| {
            let seen = s.clone();
            async move {
                let path = req.uri().path().to_string();
                let body = req.into_body().collect_bytes().await?;
                let reply = |code: u16, body: Vec<u8>| {
                    http::Response::builder()
                        .status(code)
                        .header("content-type", "application/json")
                        .body(kube::client::Body::from(body))
                };
                let response = if let Some(rest) = path.strip_suffix("/binding") {
                    let pod = rest.rsplit('/').next().unwrap_or("").to_string();
                    {
                        let mut g = seen.lock().unwrap();
                        g.bindings.push((pod.clone(), Instant::now()));
                        g.in_flight += 1;
                        g.max_in_flight = g.max_in_flight.max(g.in_flight);
                    }
                    tokio::time::sleep(latency).await;
                    seen.lock().unwrap().in_flight -= 1;
                    let (code, status) = if pod.starts_with("refused") {
                        (
                            422,
                            json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                            "message": format!("fault injection: the binding of {pod} is refused"),
                            "reason": "Invalid", "code": 422}),
                        )
                    } else {
                        (
                            201,
                            json!({"kind": "Status", "apiVersion": "v1", "status": "Success", "code": 201}),
                        )
                    };
                    reply(code, status.to_string().into_bytes())
                } else if path.ends_with("/events") {
                    let ev: serde_json::Value = serde_json::from_slice(&body)?;
                    if ev["regarding"]["name"]
                        .as_str()
                        .is_some_and(|n| n.starts_with("refused"))
                    {
                        reply(403, b"events are refused".to_vec())
                    } else {
                        let reason = ev["reason"].as_str().unwrap_or("").to_string();
                        seen.lock().unwrap().events.push(reason);
                        reply(201, body.to_vec())
                    }
                } else {
                    reply(404, b"not found".to_vec())
                };
                response.map_err(|e| -> tower::BoxError { Box::new(e) })
            }
        });
        let _in_runtime = rt.enter();
        (Client::new(svc, "default"), seen)
    }

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap()
    }

    /// Each `(pod, node)` a group of its own, of no job, with nothing to
    /// write before its Binding.
    fn lone(binds: Vec<(PodKey, NodeName)>) -> Vec<dragon_framework::BindGroup> {
        binds
            .into_iter()
            .map(|(pod, node)| dragon_framework::BindGroup {
                job: None,
                pods: vec![dragon_framework::PodBind::plain(pod, node)],
            })
            .collect()
    }

    #[test]
    fn a_rounds_binds_go_concurrently_up_to_the_bound_with_results_in_order() {
        let rt = runtime();
        let (client, seen) = fake_api(&rt, Duration::from_millis(50));
        let io = KubeIo::new(client, "dragon-scheduler");
        let binds: Vec<(PodKey, NodeName)> = (0..12)
            .map(|i| {
                let pod = if i == 5 {
                    "refused-5".into()
                } else {
                    format!("p{i}")
                };
                (
                    PodKey::from(format!("ns/{pod}")),
                    NodeName::from(format!("n{i}")),
                )
            })
            .collect();
        let t0 = Instant::now();
        let results = rt
            .block_on(crate::apply::bind_all(&io, &lone(binds), Duration::ZERO, 4))
            .results;
        let took = t0.elapsed();
        assert_eq!(results.len(), 12);
        for (i, r) in results.iter().enumerate() {
            if i == 5 {
                let e = r.as_ref().unwrap_err();
                assert_eq!(e.kind, ApiErrorKind::Refused);
                assert_eq!(
                    e.message,
                    "binding ns/refused-5 to n5: fault injection: the binding of refused-5 is refused (Invalid, 422)"
                );
            } else {
                assert!(r.is_ok(), "{i}: {r:?}");
            }
        }
        let g = seen.lock().unwrap();
        assert_eq!(g.bindings.len(), 12);
        assert_eq!(g.max_in_flight, 4, "in flight at once");
        drop(g);
        // 12 binds of 50 ms, 4 at a time: about 150 ms, not 600 ms.
        assert!(took < Duration::from_millis(500), "{took:?}");
    }

    #[test]
    fn concurrent_binds_start_no_faster_than_the_client_rate_limit() {
        let rt = runtime();
        let (client, seen) = fake_api(&rt, Duration::from_millis(100));
        let io = KubeIo::new(client, "dragon-scheduler").with_rate_limit(Some((50.0, 3)));
        let binds: Vec<(PodKey, NodeName)> = (0..8)
            .map(|i| (format!("ns/p{i}").into(), "n".into()))
            .collect();
        let t0 = Instant::now();
        let results = rt
            .block_on(crate::apply::bind_all(
                &io,
                &lone(binds),
                Duration::ZERO,
                32,
            ))
            .results;
        assert!(results.iter().all(Result::is_ok));
        let g = seen.lock().unwrap();
        let mut starts: Vec<Duration> = g.bindings.iter().map(|(_, t)| *t - t0).collect();
        starts.sort_unstable();
        // The burst of 3 at once, then one every 20 ms (never sooner), yet
        // overlapping: 8 binds of 100 ms took far less than 800 ms.
        for (i, start) in starts.iter().enumerate().skip(3) {
            let due = Duration::from_millis(20 * (i as u64 - 2));
            assert!(*start + Duration::from_millis(1) >= due, "{i}: {starts:?}");
        }
        assert!(g.max_in_flight > 1, "{}", g.max_in_flight);
    }

    #[test]
    fn an_event_the_server_refuses_is_a_typed_error() {
        let rt = runtime();
        let (client, seen) = fake_api(&rt, Duration::ZERO);
        let io = KubeIo::new(client, "dragon-scheduler");
        let note = |pod: &str| Note {
            regarding: Regarding::Pod(pod.into()),
            type_: "Warning",
            reason: "FailedScheduling",
            note: "no fit".into(),
        };
        assert_eq!(rt.block_on(io.event(&note("ns/p"))), Ok(()));
        assert_eq!(seen.lock().unwrap().events, vec!["FailedScheduling"]);
        let refused = rt.block_on(io.event(&note("ns/refused-p"))).unwrap_err();
        assert_eq!(refused.kind, ApiErrorKind::Refused, "{refused}");
    }

    #[test]
    fn a_long_note_is_cut_to_what_the_api_accepts() {
        assert_eq!(fit_note("short".into()), "short");
        let long = "é".repeat(700); // 1400 bytes
        let cut = fit_note(long);
        assert!(cut.len() <= MAX_NOTE, "{}", cut.len());
        assert!(cut.ends_with('…'));
        assert!(cut.starts_with("éé"));
    }

    #[test]
    fn an_api_error_is_the_servers_message() {
        let e = kube::Error::Api(Box::new(kube::core::Status {
            message: "pod p is already assigned to node \"n\"".into(),
            reason: "Conflict".into(),
            code: 409,
            ..Default::default()
        }));
        assert_eq!(
            api_error(&e),
            "pod p is already assigned to node \"n\" (Conflict, 409)"
        );
    }
}
