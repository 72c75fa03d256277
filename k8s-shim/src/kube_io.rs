//! The framework's `Binder` and `Scaler` over the Kubernetes API: Binding
//! subresources, pod Events, PodGroup status and `/scale` subresources.
//! The scheduling thread is synchronous; these block on the runtime, except
//! that a round's binds are sent concurrently (the thread waits for all of
//! them) and Scheduled Events are published by tasks of their own.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use dragon_framework::{Binder, Release, Scaler};
use futures::StreamExt;
use k8s_openapi::api::core::v1 as core;
use k8s_openapi::api::events::v1 as events;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Client;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::json;
use tokio::runtime::Handle;
use tokio::sync::{Notify, Semaphore};

use crate::group_status::Status;
use crate::ratelimit::TokenBucket;
use crate::translate::SCALE_TARGET;

fn split(key: &str) -> (&str, &str) {
    key.split_once('/').unwrap_or(("default", key))
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

/// Binds pods and reports on them for the scheduling thread.
pub struct KubeIo {
    client: Client,
    handle: Handle,
    /// Client-side limit on binds, unbinds and PodGroup status updates.
    requests: Option<Arc<TokenBucket>>,
    /// Binding POSTs in flight at once (`bindConcurrency`).
    bind_concurrency: usize,
    events: Events,
}

/// Scheduled Events spawned and not yet sent beyond which new ones are
/// dropped (client-go's event broadcaster also drops past a queue of
/// 1,000): a lost Scheduled event loses no pod, memory held for an API
/// server that cannot keep up would.
const MAX_QUEUED_EVENTS: usize = 4096;

/// Publishes Events on pods. Cheap to clone (shared parts): the tasks that
/// send Scheduled events off the scheduling thread each hold one.
#[derive(Clone)]
struct Events {
    client: Client,
    scheduler_name: Arc<str>,
    instance: Arc<str>,
    /// The client-side limit on Events, apart from `requests` (as
    /// kube-scheduler has a client of its own for events).
    bucket: Option<Arc<TokenBucket>>,
    /// Event POSTs spawned off the scheduling thread that may be waiting
    /// for their token or in flight. Each takes its token only once it
    /// holds a permit, so at most this many tokens are promised ahead of a
    /// FailedScheduling event, which waits for its own on the scheduling
    /// thread.
    in_flight: Arc<Semaphore>,
    /// Spawned and not yet finished (waiting for a permit included).
    queued: Arc<AtomicUsize>,
    /// Notified when `queued` drops to zero.
    drained: Arc<Notify>,
    /// Dropped because `queued` was at [`MAX_QUEUED_EVENTS`].
    dropped: Arc<AtomicU64>,
}

/// Decrements the queued count when a spawned event's task ends, however
/// it ends (sent, refused, or cancelled with the runtime).
struct Queued(Arc<AtomicUsize>, Arc<Notify>);

impl Drop for Queued {
    fn drop(&mut self) {
        if self.0.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.1.notify_waiters();
        }
    }
}

impl Events {
    fn pod_ref(key: &str) -> core::ObjectReference {
        let (ns, name) = split(key);
        core::ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("Pod".into()),
            namespace: Some(ns.into()),
            name: Some(name.into()),
            ..Default::default()
        }
    }

    /// A new Event about `pod`, and the API to create it with.
    fn build(
        &self,
        pod: &str,
        type_: &str,
        reason: &str,
        note: String,
    ) -> (Api<events::Event>, events::Event) {
        self.build_about(Self::pod_ref(pod), type_, reason, note)
    }

    /// A new Event about `regarding`. Each call makes its own Event, so a
    /// changed reason is never folded into an earlier event's series with
    /// the old message.
    fn build_about(
        &self,
        regarding: core::ObjectReference,
        type_: &str,
        reason: &str,
        note: String,
    ) -> (Api<events::Event>, events::Event) {
        let ns = regarding
            .namespace
            .clone()
            .unwrap_or_else(|| "default".into());
        let name = regarding.name.clone().unwrap_or_default();
        let ev = events::Event {
            metadata: ObjectMeta {
                name: Some(event_name(&name)),
                namespace: Some(ns.clone()),
                ..Default::default()
            },
            event_time: Some(MicroTime(k8s_openapi::jiff::Timestamp::now())),
            reporting_controller: Some(self.scheduler_name.to_string()),
            reporting_instance: Some(self.instance.to_string()),
            action: Some("Scheduling".into()),
            reason: Some(reason.into()),
            note: Some(fit_note(note)),
            type_: Some(type_.into()),
            regarding: Some(regarding),
            ..Default::default()
        };
        (Api::namespaced(self.client.clone(), &ns), ev)
    }

    /// Publish on the calling (non-async) thread; false if it was not
    /// published (logged).
    fn publish_blocking(
        &self,
        handle: &Handle,
        regarding: core::ObjectReference,
        type_: &str,
        reason: &str,
        note: String,
    ) -> bool {
        let object = format!(
            "{}/{}",
            regarding.namespace.as_deref().unwrap_or_default(),
            regarding.name.as_deref().unwrap_or_default()
        );
        let (api, ev) = self.build_about(regarding, type_, reason, note);
        if let Some(b) = &self.bucket {
            b.wait();
        }
        match handle.block_on(api.create(&PostParams::default(), &ev)) {
            Ok(_) => true,
            Err(e) => {
                tracing::warn!(object, reason, "cannot publish event: {}", api_error(&e));
                false
            }
        }
    }

    /// Publish from a task of its own (best effort: failures are logged,
    /// nobody waits for the result).
    fn spawn(&self, handle: &Handle, pod: &str, type_: &str, reason: &str, note: String) {
        if self.queued.fetch_add(1, Ordering::Relaxed) >= MAX_QUEUED_EVENTS {
            self.queued.fetch_sub(1, Ordering::Relaxed);
            let n = self.dropped.fetch_add(1, Ordering::Relaxed) + 1;
            // Logged at 1, 2, 4, 8... drops: visible without a line per pod.
            if n.is_power_of_two() {
                tracing::warn!(
                    pod,
                    reason,
                    dropped_total = n,
                    "event dropped: {MAX_QUEUED_EVENTS} events already waiting to be sent"
                );
            }
            return;
        }
        let queued = Queued(self.queued.clone(), self.drained.clone());
        let (api, ev) = self.build(pod, type_, reason, note);
        let (pod, reason) = (pod.to_string(), reason.to_string());
        let this = self.clone();
        handle.spawn(async move {
            let _queued = queued;
            // Never closed, so this cannot fail; if it did, not sending is
            // the safe side for a best-effort event.
            let Ok(_permit) = this.in_flight.acquire().await else {
                return;
            };
            if let Some(b) = &this.bucket {
                b.ready().await;
            }
            if let Err(e) = api.create(&PostParams::default(), &ev).await {
                tracing::warn!(pod, reason, "cannot publish event: {}", api_error(&e));
            }
        });
    }
}

/// Applies worker counts through `/scale` subresources.
pub struct KubeScaler {
    client: Client,
    handle: Handle,
    /// Scale changes applied since last taken: `(job, workers)`.
    pub scaled: Vec<(String, u32)>,
    /// Scale targets by job (`namespace/podgroup`), from PodGroup annotations.
    pub targets: BTreeMap<String, String>,
}

impl KubeScaler {
    /// A scaler using `client`.
    pub fn new(client: Client, handle: Handle) -> KubeScaler {
        KubeScaler {
            client,
            handle,
            scaled: Vec::new(),
            targets: BTreeMap::new(),
        }
    }

    /// The replicas of a job's scale target, if it has one.
    pub fn target_replicas(&self, job: &str) -> Option<u32> {
        let target = self.targets.get(job)?;
        let (api, name) = scale_api(&self.client, job, target).ok()?;
        let scale = self
            .handle
            .block_on(api.get_subresource("scale", &name))
            .ok()?;
        scale
            .data
            .get("spec")?
            .get("replicas")?
            .as_u64()
            .map(|r| r as u32)
    }
}

impl KubeIo {
    /// An I/O handle for `scheduler_name`, sending up to `bind_concurrency`
    /// (at least 1) Binding POSTs at once.
    pub fn new(
        client: Client,
        handle: Handle,
        scheduler_name: &str,
        bind_concurrency: usize,
    ) -> KubeIo {
        let instance = format!("{scheduler_name}-{}", std::process::id());
        let bind_concurrency = bind_concurrency.max(1);
        KubeIo {
            events: Events {
                client: client.clone(),
                scheduler_name: scheduler_name.into(),
                instance: instance.into(),
                bucket: None,
                in_flight: Arc::new(Semaphore::new(bind_concurrency)),
                queued: Arc::new(AtomicUsize::new(0)),
                drained: Arc::new(Notify::new()),
                dropped: Arc::new(AtomicU64::new(0)),
            },
            client,
            handle,
            requests: None,
            bind_concurrency,
        }
    }

    /// Limit requests to `(qps, burst)` (`Config::client_limit`): one token
    /// bucket for binds, unbinds and PodGroup status, another for Events, as
    /// kube-scheduler has one client for its API calls and one for events.
    #[must_use]
    pub fn with_rate_limit(mut self, limit: Option<(f64, u32)>) -> KubeIo {
        self.requests = limit.map(|(qps, burst)| Arc::new(TokenBucket::new(qps, burst)));
        self.events.bucket = limit.map(|(qps, burst)| Arc::new(TokenBucket::new(qps, burst)));
        self
    }

    fn throttle(bucket: Option<&TokenBucket>) {
        if let Some(b) = bucket {
            b.wait();
        }
    }

    /// Publish an Event about `pod` and wait for the answer; false if it
    /// was not published (logged), so a caller that remembers what it said
    /// can say it again later. Best effort: a lost event loses no pod.
    pub fn event(&self, pod: &str, type_: &str, reason: &str, note: String) -> bool {
        self.events
            .publish_blocking(&self.handle, Events::pod_ref(pod), type_, reason, note)
    }

    /// Wait up to `limit` for the Scheduled Events spawned so far to be
    /// sent (on shutdown); how many were still queued when it gave up.
    pub fn flush_events(&self, limit: std::time::Duration) -> usize {
        let queued = &self.events.queued;
        let drained = &self.events.drained;
        self.handle.block_on(async {
            let _ = tokio::time::timeout(limit, async {
                loop {
                    // Registered before the check, so a drain in between
                    // is not missed.
                    let notified = drained.notified();
                    if queued.load(Ordering::Acquire) == 0 {
                        return;
                    }
                    notified.await;
                }
            })
            .await;
        });
        queued.load(Ordering::Acquire)
    }

    /// POST one Binding once the bucket gives its token; on success, the
    /// pod's Scheduled Event is spawned (the caller does not wait for it).
    async fn post_binding(&self, pod: &str, node: &str) -> Result<(), String> {
        let (ns, name) = split(pod);
        let api: Api<core::Pod> = Api::namespaced(self.client.clone(), ns);
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
        // Taken here, just before the request starts: starts are paced as
        // when binds went one at a time; only the waits for answers overlap.
        if let Some(b) = &self.requests {
            b.ready().await;
        }
        api.create_subresource::<_, serde_json::Value>(
            "binding",
            name,
            &PostParams::default(),
            &binding,
        )
        .await
        .map_err(|e| format!("binding {pod} to {node}: {}", api_error(&e)))?;
        self.events.spawn(
            &self.handle,
            pod,
            "Normal",
            "Scheduled",
            format!("Successfully assigned {pod} to {node}"),
        );
        Ok(())
    }

    /// Set `PodScheduled=False` on a pod this scheduler did not place, as
    /// kube-scheduler writes it (reason `Unschedulable`, or `SchedulingGated`
    /// for a pod with gates; the message says why), so cluster-autoscaler
    /// sees the pod waiting for room. The API server sets the condition
    /// True when the pod is bound. False if the patch did not land (logged).
    pub fn pod_unschedulable(&self, pod: &str, reason: &str, message: &str) -> bool {
        let (ns, name) = split(pod);
        let api: Api<core::Pod> = Api::namespaced(self.client.clone(), ns);
        let condition = core::PodCondition {
            type_: "PodScheduled".into(),
            status: "False".into(),
            reason: Some(reason.into()),
            message: Some(fit_note(message.to_string())),
            last_transition_time: Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                k8s_openapi::jiff::Timestamp::now(),
            )),
            ..Default::default()
        };
        // Strategic merge: conditions merge by type.
        let patch = json!({"status": {"conditions": [condition]}});
        Self::throttle(self.requests.as_deref());
        match self.handle.block_on(api.patch_status(
            name,
            &PatchParams::default(),
            &Patch::Strategic(&patch),
        )) {
            Ok(_) => true,
            Err(e) => {
                tracing::debug!(pod, "cannot set PodScheduled=False: {}", api_error(&e));
                false
            }
        }
    }

    /// A writer of PodGroup statuses that works off the scheduling thread,
    /// under the same client-side limit as binds.
    pub fn status_writer(&self) -> StatusWriter {
        StatusWriter::spawn(self.client.clone(), &self.handle, self.requests.clone())
    }

    /// Set the `PodGroupInitiallyScheduled` condition of a
    /// `scheduling.k8s.io/v1beta1` PodGroup (conditions merge by type);
    /// false if the patch did not land (logged).
    pub fn native_podgroup_condition(
        &self,
        group: &str,
        status: &str,
        reason: &str,
        message: &str,
    ) -> bool {
        let (ns, name) = split(group);
        let api: Api<k8s_openapi::api::scheduling::v1beta1::PodGroup> =
            Api::namespaced(self.client.clone(), ns);
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
        Self::throttle(self.requests.as_deref());
        match self.handle.block_on(api.patch_status(
            name,
            &PatchParams::default(),
            &Patch::Strategic(&patch),
        )) {
            Ok(_) => true,
            Err(e) => {
                tracing::debug!(
                    group,
                    "cannot set the PodGroup's condition: {}",
                    api_error(&e)
                );
                false
            }
        }
    }

    /// Publish an Event about PodGroup `group` and wait for the answer;
    /// false if it was not published (logged).
    pub fn podgroup_event(&self, group: &str, type_: &str, reason: &str, note: String) -> bool {
        let (ns, name) = split(group);
        let res = podgroup_resource();
        let regarding = core::ObjectReference {
            api_version: Some(res.api_version.clone()),
            kind: Some(res.kind.clone()),
            namespace: Some(ns.into()),
            name: Some(name.into()),
            ..Default::default()
        };
        self.events
            .publish_blocking(&self.handle, regarding, type_, reason, note)
    }
}

/// Writes PodGroup statuses from a task of its own, so a round never waits
/// for them: the latest status of each group, one request at a time (so a
/// group's writes land in order), a failed write tried again a second later
/// with whatever is latest then, a deleted PodGroup dropped.
pub struct StatusWriter {
    tx: tokio::sync::mpsc::UnboundedSender<(String, Status)>,
}

/// Between retries of a failed status write.
const STATUS_RETRY: std::time::Duration = std::time::Duration::from_secs(1);

impl StatusWriter {
    fn spawn(client: Client, handle: &Handle, bucket: Option<Arc<TokenBucket>>) -> StatusWriter {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<(String, Status)>();
        handle.spawn(async move {
            let mut latest: BTreeMap<String, Status> = BTreeMap::new();
            loop {
                if latest.is_empty() {
                    let Some((group, status)) = rx.recv().await else {
                        return;
                    };
                    latest.insert(group, status);
                }
                while let Ok((group, status)) = rx.try_recv() {
                    latest.insert(group, status);
                }
                let Some((group, status)) = latest.pop_first() else {
                    continue;
                };
                if let Some(b) = &bucket {
                    b.ready().await;
                }
                let (ns, name) = split(&group);
                let api: Api<DynamicObject> =
                    Api::namespaced_with(client.clone(), ns, &podgroup_resource());
                let patch = json!({ "status": status });
                match api
                    .patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
                    .await
                {
                    Ok(_) => {}
                    Err(kube::Error::Api(e)) if e.code == 404 => {}
                    Err(e) => {
                        tracing::debug!(
                            group,
                            "cannot update PodGroup status (retrying): {}",
                            api_error(&e)
                        );
                        latest.entry(group).or_insert(status);
                        tokio::time::sleep(STATUS_RETRY).await;
                    }
                }
            }
        });
        StatusWriter { tx }
    }

    /// Have `group`'s status written (replacing any not yet written).
    pub fn write(&self, group: &str, status: Status) {
        // Closed only with the runtime, when nothing is written any more.
        let _ = self.tx.send((group.to_string(), status));
    }
}

/// `/scale` access for a target written `GROUP/VERSION/PLURAL/NAME`
/// (`apps/v1/statefulsets/NAME`) or `VERSION/PLURAL/NAME` for the core group.
fn scale_api(
    client: &Client,
    job: &str,
    target: &str,
) -> Result<(Api<DynamicObject>, String), String> {
    let parts: Vec<&str> = target.split('/').collect();
    let (group, version, plural, name) = match parts.as_slice() {
        [g, v, p, n] => (*g, *v, *p, *n),
        [v, p, n] => ("", *v, *p, *n),
        _ => {
            return Err(format!(
                "{SCALE_TARGET} must be GROUP/VERSION/PLURAL/NAME, got {target:?}"
            ));
        }
    };
    let api_version = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    let ar = ApiResource {
        group: group.into(),
        version: version.into(),
        api_version,
        kind: String::new(),
        plural: plural.into(),
    };
    let (ns, _) = split(job);
    Ok((
        Api::namespaced_with(client.clone(), ns, &ar),
        name.to_string(),
    ))
}

impl Binder for KubeIo {
    fn bind(&mut self, pod: &str, node: &str) -> Result<(), String> {
        self.bind_many(&[(pod.to_string(), node.to_string())])
            .pop()
            .unwrap_or_else(|| Err(format!("binding {pod} to {node}: no result")))
    }

    /// Up to `bind_concurrency` Binding POSTs in flight, each started when
    /// the request bucket gives it a token, results in input order. The
    /// scheduling thread waits for all of them: the framework releases a
    /// gang whose bind failed only once it has every result.
    fn bind_many(&mut self, binds: &[(String, String)]) -> Vec<Result<(), String>> {
        let this = &*self;
        let sends = binds.iter().map(|(pod, node)| this.post_binding(pod, node));
        self.handle.block_on(
            futures::stream::iter(sends)
                .buffered(self.bind_concurrency)
                .collect(),
        )
    }

    fn unbind(&mut self, pod: &str) -> Result<Release, String> {
        // A bound pod cannot be unbound. Deleting it makes its controller
        // create a fresh pending one, and the gang is whole or not at all;
        // a pod no controller owns would be lost for good, so it is kept
        // bound and said so.
        let (ns, name) = split(pod);
        let api: Api<core::Pod> = Api::namespaced(self.client.clone(), ns);
        Self::throttle(self.requests.as_deref());
        let current = self
            .handle
            .block_on(api.get(name))
            .map_err(|e| format!("reading {pod} to release it: {}", api_error(&e)))?;
        let controlled = current
            .metadata
            .owner_references
            .iter()
            .flatten()
            .any(|o| o.controller == Some(true));
        if !controlled {
            self.event(
                pod,
                "Warning",
                "GangPartlyBound",
                "kept bound although a member of its gang could not be bound: no controller \
                 owns this pod, so deleting it would lose it; the rest of the gang is placed \
                 when it fits"
                    .into(),
            );
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
        Self::throttle(self.requests.as_deref());
        self.handle
            .block_on(api.delete(name, &params))
            .map(|_| Release::Unbound)
            .map_err(|e| format!("deleting {pod}: {}", api_error(&e)))
    }
}

impl Scaler for KubeScaler {
    fn scale(&mut self, job: &str, workers: u32, reason: &str) -> Result<(), String> {
        let target = self.targets.get(job).cloned().ok_or_else(|| {
            format!(
                "job {job} has no {SCALE_TARGET} annotation on its PodGroup, so it cannot be scaled"
            )
        })?;
        let (api, name) = scale_api(&self.client, job, &target)?;
        let patch = json!({"spec": {"replicas": workers}});
        self.handle
            .block_on(api.patch_subresource(
                "scale",
                &name,
                &PatchParams::default(),
                &Patch::Merge(&patch),
            ))
            .map_err(|e| format!("scaling {target} to {workers}: {}", api_error(&e)))?;
        tracing::info!(job, workers, reason, "scaled");
        self.scaled.push((job.to_string(), workers));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
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

    fn until(what: &str, mut done: impl FnMut() -> bool) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while !done() {
            assert!(Instant::now() < deadline, "timed out waiting for {what}");
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    #[test]
    fn a_rounds_binds_go_concurrently_up_to_the_bound_with_results_in_order() {
        let rt = runtime();
        let (client, seen) = fake_api(&rt, Duration::from_millis(50));
        let mut io = KubeIo::new(client, rt.handle().clone(), "dragon-scheduler", 4);
        let binds: Vec<(String, String)> = (0..12)
            .map(|i| {
                let pod = if i == 5 {
                    "refused-5".into()
                } else {
                    format!("p{i}")
                };
                (format!("ns/{pod}"), format!("n{i}"))
            })
            .collect();
        let t0 = Instant::now();
        let results = io.bind_many(&binds);
        let took = t0.elapsed();
        assert_eq!(results.len(), 12);
        for (i, r) in results.iter().enumerate() {
            if i == 5 {
                assert_eq!(
                    r.as_ref().unwrap_err(),
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
        // One Scheduled event per bound pod, sent after bind_many returned.
        until("11 Scheduled events", || {
            seen.lock().unwrap().events.len() == 11
        });
        assert!(seen.lock().unwrap().events.iter().all(|r| r == "Scheduled"));
        // A single bind goes the same way.
        assert!(io.bind("ns/alone", "n0").is_ok());
        assert_eq!(
            io.bind("ns/refused-again", "n0").unwrap_err(),
            "binding ns/refused-again to n0: fault injection: the binding of refused-again is refused (Invalid, 422)"
        );
    }

    #[test]
    fn concurrent_binds_start_no_faster_than_the_client_rate_limit() {
        let rt = runtime();
        let (client, seen) = fake_api(&rt, Duration::from_millis(100));
        let mut io = KubeIo::new(client, rt.handle().clone(), "dragon-scheduler", 32)
            .with_rate_limit(Some((50.0, 3)));
        let binds: Vec<(String, String)> = (0..8)
            .map(|i| (format!("ns/p{i}"), "n".to_string()))
            .collect();
        let t0 = Instant::now();
        assert!(io.bind_many(&binds).iter().all(Result::is_ok));
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
    fn a_failed_scheduling_event_says_whether_it_was_published() {
        let rt = runtime();
        let (client, seen) = fake_api(&rt, Duration::ZERO);
        let io = KubeIo::new(client, rt.handle().clone(), "dragon-scheduler", 1);
        assert!(io.event("ns/p", "Warning", "FailedScheduling", "no fit".into()));
        assert_eq!(seen.lock().unwrap().events, vec!["FailedScheduling"]);
        // Refused: false, so the caller says it again next round.
        assert!(!io.event(
            "ns/refused-p",
            "Warning",
            "FailedScheduling",
            "no fit".into()
        ));
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
