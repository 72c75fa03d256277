//! The framework's `Binder` and `Scaler` over the Kubernetes API: Binding
//! subresources, pod Events, PodGroup status and `/scale` subresources.
//! The scheduling thread is synchronous; these block on the runtime.

use std::collections::BTreeMap;

use dragon_host::framework::{Binder, Scaler};
use k8s_openapi::api::core::v1 as core;
use k8s_openapi::api::events::v1 as events;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Client;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::json;
use tokio::runtime::Handle;

use crate::ratelimit::TokenBucket;
use crate::translate::SCALE_TARGET;

fn split(key: &str) -> (&str, &str) {
    key.split_once('/').unwrap_or(("default", key))
}

/// A unique event name: `POD.HEX`, as client-go names events (a
/// `generateName` ending in `.` is refused by validation).
fn event_name(pod: &str) -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
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
    scheduler_name: String,
    instance: String,
    /// Client-side limit on binds, unbinds and PodGroup status updates.
    requests: Option<TokenBucket>,
    /// The same limit, separately, on Events.
    events: Option<TokenBucket>,
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
    /// An I/O handle for `scheduler_name`.
    pub fn new(client: Client, handle: Handle, scheduler_name: &str) -> KubeIo {
        let instance = format!("{scheduler_name}-{}", std::process::id());
        KubeIo {
            client,
            handle,
            scheduler_name: scheduler_name.to_string(),
            instance,
            requests: None,
            events: None,
        }
    }

    /// Limit requests to `(qps, burst)` (`Config::client_limit`): one token
    /// bucket for binds, unbinds and PodGroup status, another for Events, as
    /// kube-scheduler has one client for its API calls and one for events.
    #[must_use]
    pub fn with_rate_limit(mut self, limit: Option<(f64, u32)>) -> KubeIo {
        self.requests = limit.map(|(qps, burst)| TokenBucket::new(qps, burst));
        self.events = limit.map(|(qps, burst)| TokenBucket::new(qps, burst));
        self
    }

    fn throttle(bucket: Option<&TokenBucket>) {
        if let Some(b) = bucket {
            b.wait();
        }
    }

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

    /// Publish an Event on a pod (best effort: a lost event loses no pod).
    /// Each call creates its own Event, so a changed reason is never folded
    /// into an earlier event's series with the old message.
    /// Publish an Event about `pod`; false if the API refused it (logged).
    pub fn event(&self, pod: &str, type_: &str, reason: &str, note: String) -> bool {
        let (ns, name) = split(pod);
        let ev = events::Event {
            metadata: ObjectMeta {
                name: Some(event_name(name)),
                namespace: Some(ns.into()),
                ..Default::default()
            },
            event_time: Some(MicroTime(k8s_openapi::jiff::Timestamp::now())),
            reporting_controller: Some(self.scheduler_name.clone()),
            reporting_instance: Some(self.instance.clone()),
            action: Some("Scheduling".into()),
            reason: Some(reason.into()),
            note: Some(fit_note(note)),
            type_: Some(type_.into()),
            regarding: Some(Self::pod_ref(pod)),
            ..Default::default()
        };
        let api: Api<events::Event> = Api::namespaced(self.client.clone(), ns);
        Self::throttle(self.events.as_ref());
        match self
            .handle
            .block_on(api.create(&PostParams::default(), &ev))
        {
            Ok(_) => true,
            Err(e) => {
                tracing::warn!(pod, "cannot publish event: {e}");
                false
            }
        }
    }

    /// Set a PodGroup's status (best effort).
    pub fn podgroup_status(&self, job: &str, phase: &str, scheduled: u32) {
        let (ns, name) = split(job);
        let api: Api<DynamicObject> =
            Api::namespaced_with(self.client.clone(), ns, &podgroup_resource());
        let patch = json!({"status": {"phase": phase, "scheduled": scheduled}});
        Self::throttle(self.requests.as_ref());
        let result = self.handle.block_on(api.patch_status(
            name,
            &PatchParams::default(),
            &Patch::Merge(&patch),
        ));
        if let Err(e) = result {
            tracing::debug!(job, "cannot update PodGroup status: {e}");
        }
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
        Self::throttle(self.requests.as_ref());
        self.handle
            .block_on(api.create_subresource::<_, serde_json::Value>(
                "binding",
                name,
                &PostParams::default(),
                &binding,
            ))
            .map_err(|e| format!("binding {pod} to {node}: {}", api_error(&e)))?;
        self.event(
            pod,
            "Normal",
            "Scheduled",
            format!("Successfully assigned {pod} to {node}"),
        );
        Ok(())
    }

    fn unbind(&mut self, pod: &str) -> Result<(), String> {
        // A bound pod cannot be unbound: delete it so its controller makes a
        // fresh pending one, and the gang is whole or not at all.
        let (ns, name) = split(pod);
        let api: Api<core::Pod> = Api::namespaced(self.client.clone(), ns);
        Self::throttle(self.requests.as_ref());
        self.handle
            .block_on(api.delete(name, &Default::default()))
            .map(|_| ())
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
