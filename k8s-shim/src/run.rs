//! Wiring: watches feed the scheduling loop; HTTP serves metrics and
//! health; a Lease decides which replica acts.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use dragon_runtime::{
    ComponentCache, LoadOptions, PolicyEngine, PolicySlot, PolicySource, WasmPolicy,
};
use futures::StreamExt;
use k8s_openapi::api::core::v1 as core;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::resource::v1 as resource;
use k8s_openapi::api::storage::v1::{
    CSIDriver, CSINode, CSIStorageCapacity, StorageClass, VolumeAttachment,
};
use kube::api::{Api, DynamicObject};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};
use tokio::sync::mpsc::UnboundedSender;

use crate::config::{Config, OnPolicyError};
use crate::fence::{Fence, Fenced};
use crate::flight::{FlightRecorder, Run};
use crate::key::key_of;
use crate::kube_io::{KubeIo, podgroup_resource};
use crate::leader::Election;
use crate::metrics::{Metrics, Reload};
use crate::oci_policy::OciPolicy;
use crate::reload::{Gate, Reloader, Watched};
use crate::scheduling::{Kind, Loop, Msg, Parts};
use crate::shadow::ShadowFeed;
use crate::snapshot::{Event, GroupApi, PodGroup, Snapshot};
use crate::taps::Taps;
use k8s_openapi::api::scheduling::v1beta1::PodGroup as NativePodGroup;

/// Build a client from `--kubeconfig`, else the usual inference
/// (`$KUBECONFIG`, `~/.kube/config`, in-cluster).
///
/// # Errors
/// No usable configuration.
pub async fn client(kubeconfig: Option<PathBuf>) -> Result<Client> {
    let config = match kubeconfig {
        Some(path) => {
            let kc = kube::config::Kubeconfig::read_from(&path)
                .with_context(|| format!("cannot read kubeconfig {}", path.display()))?;
            kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
                .await
                .with_context(|| format!("invalid kubeconfig {}", path.display()))?
        }
        None => kube::Config::infer()
            .await
            .context("no Kubernetes configuration found")?,
    };
    client_from(config)
}

/// A client that retries requests the API server refuses for load as
/// [`crate::retry::RetryAfter`] says, instead of kube's default policy.
pub fn client_from(mut config: kube::Config) -> Result<Client> {
    config.default_retry = false;
    Ok(kube::client::ClientBuilder::try_from(config)
        .context("cannot build a Kubernetes client")?
        .with_layer(&tower::buffer::BufferLayer::new(1024))
        .with_layer(&tower::retry::RetryLayer::new(
            crate::retry::RetryAfter::default(),
        ))
        .build())
}

/// Forward one resource's watch into `tx`, translating objects with `to_event`.
fn spawn_watch<K>(
    api: Api<K>,
    config: watcher::Config,
    kind: Kind,
    tx: UnboundedSender<Msg>,
    to_event: fn(K) -> Event,
    key_of: fn(&K) -> String,
) where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + 'static,
{
    tokio::spawn(async move {
        // client-go's reflector backoff (800 ms doubling to 30 s, with
        // jitter, reset after 2 min of health): a restarted API server is
        // not met by every watch of every replica at once.
        let mut stream = watcher(api, config).default_backoff().boxed();
        let mut listing: Option<BTreeSet<String>> = None;
        while let Some(item) = stream.next().await {
            let msg = match item {
                Ok(watcher::Event::Init) => {
                    listing = Some(BTreeSet::new());
                    continue;
                }
                Ok(watcher::Event::InitApply(obj)) => {
                    if let Some(l) = listing.as_mut() {
                        l.insert(key_of(&obj));
                    }
                    Msg::Event(to_event(obj))
                }
                Ok(watcher::Event::InitDone) => Msg::Listed {
                    kind,
                    keys: listing.take().unwrap_or_default(),
                },
                Ok(watcher::Event::Apply(obj)) => Msg::Event(to_event(obj)),
                Ok(watcher::Event::Delete(obj)) => Msg::Event(match kind {
                    Kind::Node => Event::NodeGone(key_of(&obj)),
                    Kind::Pod => Event::PodGone(key_of(&obj)),
                    Kind::Group | Kind::NativeGroup => Event::GroupGone(key_of(&obj)),
                    Kind::Claim => Event::ClaimGone(key_of(&obj)),
                    Kind::Volume => Event::VolumeGone(key_of(&obj)),
                    Kind::StorageClass => Event::StorageClassGone(key_of(&obj)),
                    Kind::CsiNode => Event::CsiNodeGone(key_of(&obj)),
                    Kind::CsiDriver => Event::CsiDriverGone(key_of(&obj)),
                    Kind::StorageCapacity => Event::StorageCapacityGone(key_of(&obj)),
                    Kind::VolumeAttachment => Event::VolumeAttachmentGone(key_of(&obj)),
                    Kind::Budget => Event::BudgetGone(key_of(&obj)),
                    Kind::ResourceSlice => Event::ResourceSliceGone(key_of(&obj)),
                    Kind::DeviceClass => Event::DeviceClassGone(key_of(&obj)),
                    Kind::ResourceClaim => Event::ResourceClaimGone(key_of(&obj)),
                    Kind::DeviceTaintRule => Event::DeviceTaintRuleGone(key_of(&obj)),
                }),
                Err(e) => {
                    tracing::warn!(?kind, "watch error (retrying after a backoff): {e}");
                    continue;
                }
            };
            if tx.send(msg).is_err() {
                return;
            }
        }
    });
}

fn podgroup(obj: DynamicObject) -> Event {
    let key = key_of(&obj);
    let spec = crate::translate::podgroup_spec(&key, obj.data.get("spec"));
    let created_ms = crate::translate::created_ms(&obj.metadata);
    Event::Group(PodGroup {
        key,
        spec,
        annotations: obj.metadata.annotations.clone().unwrap_or_default(),
        created_ms,
        api: GroupApi::SchedulerPlugins,
        priority: None,
    })
}

fn native_podgroup(pg: NativePodGroup) -> Event {
    let (spec, priority) = crate::translate::native_podgroup_spec(&pg);
    Event::Group(PodGroup {
        key: key_of(&pg),
        spec: Ok(spec),
        annotations: pg.metadata.annotations.clone().unwrap_or_default(),
        created_ms: crate::translate::created_ms(&pg.metadata),
        api: GroupApi::Native,
        priority,
    })
}

/// Whether to watch `K`, a resource (`plural`) of `group_version`: the API
/// server serves it (an API version or feature gate may be off) and this
/// scheduler may list it (an older ClusterRole may not allow it: then it
/// schedules without it, doing `without`, rather than wait forever for a
/// list that is refused).
async fn serves<K>(client: &Client, group_version: &str, plural: &str, without: &str) -> bool
where
    K: kube::Resource<DynamicType = ()> + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let served = match client.list_api_group_resources(group_version).await {
        Ok(list) => list.resources.iter().any(|r| r.name == plural),
        Err(_) => false,
    };
    if !served {
        return false;
    }
    let api = Api::<K>::all(client.clone());
    match api.list(&kube::api::ListParams::default().limit(1)).await {
        Err(kube::Error::Api(e)) if e.code == 403 => {
            tracing::warn!(
                "not allowed to list {group_version} {plural} ({}); {without} until the ClusterRole allows it",
                e.message
            );
            false
        }
        // Served and listable, or a passing error the watch will retry.
        _ => true,
    }
}

/// Where a policy comes from: a bundled name, a file, or a registry.
struct Resolved {
    /// The policy, or why it could not be pulled.
    source: Result<PolicySource>,
    /// For a registry: the poller that follows its tag, and the digest now
    /// served (empty when the first pull failed: any digest is new).
    oci: Option<(OciPolicy, String)>,
}

/// # Errors
/// The reference or the registry settings are invalid.
async fn policy_source(
    spec: &str,
    config: &Config,
    cache_root: Option<PathBuf>,
) -> Result<Resolved> {
    if !dragon_registry::PolicyRef::is_oci(spec) {
        return Ok(Resolved {
            source: Ok(PolicySource::named_or_file(spec)),
            oci: None,
        });
    }
    let oci = OciPolicy::new(spec, &config.registry, cache_root)
        .with_context(|| format!("cannot read the policy {spec}"))?;
    Ok(match oci.first().await {
        Ok(serving) => Resolved {
            source: Ok(serving.source),
            oci: Some((oci, serving.digest)),
        },
        Err(e) => Resolved {
            source: Err(e.context(format!("cannot pull the policy {spec}"))),
            oci: Some((oci, String::new())),
        },
    })
}

/// Run the scheduler until SIGINT/SIGTERM.
///
/// # Errors
/// The policy cannot be loaded, the client cannot be built, or a port
/// cannot be bound.
pub async fn run(config: Config, kubeconfig: Option<PathBuf>) -> Result<()> {
    let client = client(kubeconfig).await?;
    let metrics = Arc::new(Metrics::new());

    let engine =
        PolicyEngine::new().map_err(|e| anyhow::anyhow!("cannot create the wasm engine: {e}"))?;
    let mut cache = config
        .cache_dir
        .clone()
        .map(ComponentCache::at)
        .unwrap_or_else(ComponentCache::from_env);
    if let Some(mib) = config.cache_max_mib {
        cache = cache.with_max_bytes(mib.saturating_mul(1 << 20));
    }
    let settings = match &config.settings_file {
        Some(path) => crate::config::read_settings_file(path)?,
        None => config.settings_json(),
    };
    let options = LoadOptions {
        settings,
        limits: config.limits,
        sha256: config.allowed_digests(),
    };
    let cache_root = config
        .cache_dir
        .clone()
        .or_else(ComponentCache::default_dir);
    let Resolved { source, oci } =
        policy_source(&config.policy, &config, cache_root.clone()).await?;
    let baseline = || {
        let options = LoadOptions {
            limits: config.limits,
            ..LoadOptions::default()
        };
        WasmPolicy::load(
            &engine,
            &cache,
            &PolicySource::named_or_file("baseline"),
            &options,
        )
        .context("cannot load the built-in fallback policy")
    };
    let fallback = match config.on_policy_error {
        OnPolicyError::FailClosed => None,
        OnPolicyError::Fallback => Some(Arc::new(baseline()?)),
    };
    let opened = match &source {
        Ok(source) => PolicySlot::open(engine.clone(), cache.clone(), source, &options)
            .map_err(|e| anyhow::Error::new(e).context("cannot load the policy")),
        Err(e) => Err(anyhow::anyhow!("{e:#}")),
    };
    let slot = match opened {
        Ok(slot) => Arc::new(slot),
        Err(e) if fallback.is_some() => {
            // Fallback mode: the baseline serves until a good file appears
            // or the registry answers (the watcher or the poller swaps it in).
            tracing::error!(error = %format!("{e:#}"), "the policy did not load; the built-in baseline serves until it does");
            metrics.reload_noted(
                Reload::Failure,
                format!("{e:#}; the built-in baseline serves"),
            );
            Arc::new(PolicySlot::new(engine.clone(), cache.clone(), baseline()?))
        }
        Err(e) => return Err(e),
    };
    let source = source.unwrap_or_else(|_| PolicySource::named_or_file("baseline"));
    tracing::info!(policy = %slot.current().info().name, version = %slot.current().info().version, "policy loaded");
    let recorder = match config.recording.enabled {
        false => None,
        true => {
            let fallback_name = if fallback.is_some() { "baseline" } else { "" };
            let run = Run {
                scheduling: config.scheduling,
                policy: config.policy.clone(),
                fallback: fallback_name.into(),
                started_ms: crate::scheduling::now_ms(),
            };
            match FlightRecorder::open(config.recording.clone(), run) {
                Ok(r) => {
                    tracing::info!(dir = %config.recording.dir.display(), max_bytes = config.recording.max_bytes, "recording every round and scale step");
                    Some(r)
                }
                Err(e) => {
                    tracing::error!(dir = %config.recording.dir.display(), "cannot record (scheduling goes on without a recording): {e}");
                    None
                }
            }
        }
    };
    // Without a recorder the gate still runs a candidate's golden cases.
    let gate = || {
        config.reload_gate.enabled.then(|| Gate {
            recording: recorder.as_ref().map(|r| r.current()).unwrap_or_default(),
            scheduling: config.scheduling,
            fallback: fallback.clone(),
            limits: config.reload_gate.limits(),
        })
    };
    let watched = Watched {
        source: source.clone(),
        settings_file: config.settings_file.clone(),
    };
    let reloader = Arc::new(Reloader::new(
        slot.clone(),
        source,
        options.clone(),
        gate(),
        metrics.clone(),
    ));
    if watched.any() {
        crate::reload::spawn(watched, reloader.clone())
            .context("cannot watch the policy and settings files for changes")?;
    }
    if let Some((oci, digest)) = oci {
        oci.spawn(digest, reloader);
    }
    let shadow = match &config.shadow_policy {
        None => None,
        Some(spec) => {
            let options = LoadOptions {
                settings: config.shadow_settings_json(),
                limits: config.limits,
                sha256: config.allowed_digests(),
            };
            // The shadow never stops the scheduler: a file that does not
            // load is reported and scheduling goes on without it.
            let opened = match policy_source(spec, &config, cache_root.clone()).await {
                Ok(Resolved {
                    source: Ok(source),
                    oci,
                }) => PolicySlot::open(engine.clone(), cache.clone(), &source, &options)
                    .map(|slot| (slot, source, oci))
                    .map_err(anyhow::Error::new),
                Ok(Resolved { source: Err(e), .. }) | Err(e) => Err(e),
            };
            match opened {
                Err(e) => {
                    tracing::error!(
                        "the shadow policy did not load; scheduling goes on without a shadow: {e:#}"
                    );
                    None
                }
                Ok((shadow_slot, source, oci)) => {
                    let shadow_slot = Arc::new(shadow_slot);
                    let watched = Watched {
                        source: source.clone(),
                        settings_file: None,
                    };
                    let reloader = Arc::new(Reloader::new(
                        shadow_slot.clone(),
                        source,
                        options.clone(),
                        gate(),
                        metrics.clone(),
                    ));
                    if watched.any() {
                        crate::reload::spawn(watched, reloader.clone())
                            .context("cannot watch the shadow policy file for changes")?;
                    }
                    if let Some((oci, digest)) = oci {
                        oci.spawn(digest, reloader);
                    }
                    tracing::info!(shadow = %shadow_slot.current().info().name, "a shadow policy decides beside the serving one");
                    Some(
                        ShadowFeed::spawn(
                            shadow_slot,
                            config.scheduling,
                            fallback.clone(),
                            metrics.clone(),
                        )
                        .context("cannot start the shadow policy's thread")?,
                    )
                }
            }
        }
    };

    // Everything the scheduling loop reacts to arrives on one channel, so
    // it sleeps until there is something to do.
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();

    let insight = crate::insight::serve::Insight {
        loop_tx: tx.clone(),
        access: crate::insight::access::Access::new(client.clone()),
        slot: slot.clone(),
        metrics: metrics.clone(),
        scheduler_name: config.scheduler_name.clone(),
    };
    crate::http::spawn(
        &config.metrics_addr,
        metrics.clone(),
        Duration::from_secs(config.stuck_after_seconds),
        Arc::new(insight),
    )
    .await?;

    // Leader election: followers keep their snapshot current but do not
    // act, and a leader writes only while its Lease is known to be its own.
    let (leader, fence) = if config.leader_election.enabled {
        let le = &config.leader_election;
        let identity = format!("{}-{}", hostname(), std::process::id());
        let make = {
            let (client, le, identity) = (client.clone(), le.clone(), identity.clone());
            move || {
                kube_lease_manager::LeaseManagerBuilder::new(client.clone(), &le.lease_name)
                    .with_namespace(&le.namespace)
                    .with_duration(le.lease_duration_seconds)
                    .with_grace((le.lease_duration_seconds / 3).max(1))
                    .with_identity(&identity)
            }
        };
        let fence = Arc::new(Fence::new(
            Api::namespaced(client.clone(), &le.namespace),
            &le.lease_name,
            &identity,
            Duration::from_secs(le.lease_duration_seconds),
            metrics.fenced_writes.clone(),
        ));
        let tx = tx.clone();
        let m = metrics.clone();
        // client-go's retryPeriod, or less for a very short lease.
        let retry = Duration::from_secs(2).min(Duration::from_millis(
            le.lease_duration_seconds.saturating_mul(1000) / 3,
        ));
        let me = identity.clone();
        let nudged = fence.clone();
        let election = Election::start(make, retry, move |is| {
            m.leader.set(i64::from(is));
            tracing::info!(identity = me, leader = is, "leadership");
            if is {
                nudged.acquired();
            }
            let _ = tx.send(Msg::Leading(is));
        })
        .await
        .context("cannot set up leader election")?;
        (Some(election), Some(fence))
    } else {
        metrics.leader.set(1);
        (None, None)
    };

    spawn_watch(
        Api::<core::Node>::all(client.clone()),
        watcher::Config::default(),
        Kind::Node,
        tx.clone(),
        |n| Event::Node(Box::new(n)),
        |n| n.name_any(),
    );
    spawn_watch(
        Api::<core::Pod>::all(client.clone()),
        // Finished pods too: they free their node, and count in their
        // PodGroup's status.
        watcher::Config::default(),
        Kind::Pod,
        tx.clone(),
        |p| Event::Pod(Box::new(p)),
        key_of,
    );
    spawn_watch(
        Api::<DynamicObject>::all_with(client.clone(), &podgroup_resource()),
        watcher::Config::default(),
        Kind::Group,
        tx.clone(),
        podgroup,
        key_of,
    );
    spawn_watch(
        Api::<core::PersistentVolumeClaim>::all(client.clone()),
        watcher::Config::default(),
        Kind::Claim,
        tx.clone(),
        |c| Event::Claim(Box::new(c)),
        key_of,
    );
    spawn_watch(
        Api::<StorageClass>::all(client.clone()),
        watcher::Config::default(),
        Kind::StorageClass,
        tx.clone(),
        |c| Event::StorageClass(Box::new(c)),
        |c| c.name_any(),
    );
    spawn_watch(
        Api::<CSINode>::all(client.clone()),
        watcher::Config::default(),
        Kind::CsiNode,
        tx.clone(),
        |n| Event::CsiNode(Box::new(n)),
        |n| n.name_any(),
    );
    spawn_watch(
        Api::<CSIDriver>::all(client.clone()),
        watcher::Config::default(),
        Kind::CsiDriver,
        tx.clone(),
        |d| Event::CsiDriver(Box::new(d)),
        |d| d.name_any(),
    );
    spawn_watch(
        Api::<CSIStorageCapacity>::all(client.clone()),
        watcher::Config::default(),
        Kind::StorageCapacity,
        tx.clone(),
        |c| Event::StorageCapacity(Box::new(c)),
        key_of,
    );
    spawn_watch(
        Api::<VolumeAttachment>::all(client.clone()),
        watcher::Config::default(),
        Kind::VolumeAttachment,
        tx.clone(),
        |a| Event::VolumeAttachment(Box::new(a)),
        |a| a.name_any(),
    );
    spawn_watch(
        Api::<core::PersistentVolume>::all(client.clone()),
        watcher::Config::default(),
        Kind::Volume,
        tx.clone(),
        |v| Event::Volume(Box::new(v)),
        |v| v.name_any(),
    );
    spawn_watch(
        Api::<PodDisruptionBudget>::all(client.clone()),
        watcher::Config::default(),
        Kind::Budget,
        tx.clone(),
        |b| Event::Budget(Box::new(b)),
        key_of,
    );
    // Devices (`resource.k8s.io/v1`, served by default since 1.34).
    let devices = serves::<resource::ResourceSlice>(
        &client,
        "resource.k8s.io/v1",
        "resourceslices",
        "pods claiming devices wait",
    )
    .await;
    if devices {
        spawn_watch(
            Api::<resource::ResourceSlice>::all(client.clone()),
            watcher::Config::default(),
            Kind::ResourceSlice,
            tx.clone(),
            |s| Event::ResourceSlice(Box::new(s)),
            |s| s.name_any(),
        );
        spawn_watch(
            Api::<resource::DeviceClass>::all(client.clone()),
            watcher::Config::default(),
            Kind::DeviceClass,
            tx.clone(),
            |c| Event::DeviceClass(Box::new(c)),
            |c| c.name_any(),
        );
        spawn_watch(
            Api::<resource::ResourceClaim>::all(client.clone()),
            watcher::Config::default(),
            Kind::ResourceClaim,
            tx.clone(),
            |c| Event::ResourceClaim(Box::new(c)),
            key_of,
        );
    } else {
        tracing::info!("resource.k8s.io/v1 is not served: pods claiming devices wait, named");
    }
    // DeviceTaintRules (GA in 1.37, served beside the rest).
    let taint_rules = devices
        && serves::<resource::DeviceTaintRule>(
            &client,
            "resource.k8s.io/v1",
            "devicetaintrules",
            "devices are tainted by their slices only",
        )
        .await;
    if taint_rules {
        spawn_watch(
            Api::<resource::DeviceTaintRule>::all(client.clone()),
            watcher::Config::default(),
            Kind::DeviceTaintRule,
            tx.clone(),
            |r| Event::DeviceTaintRule(Box::new(r)),
            |r| r.name_any(),
        );
    }
    let native = serves::<NativePodGroup>(
        &client,
        "scheduling.k8s.io/v1beta1",
        "podgroups",
        "gangs come from scheduler-plugins PodGroups only",
    )
    .await;
    if native {
        spawn_watch(
            Api::<NativePodGroup>::all(client.clone()),
            watcher::Config::default(),
            Kind::NativeGroup,
            tx.clone(),
            native_podgroup,
            key_of,
        );
    } else {
        tracing::info!(
            "scheduling.k8s.io/v1beta1 PodGroups are not served (feature gate GenericWorkload); gangs come from scheduler-plugins PodGroups only"
        );
    }
    let stop = tx;

    let io = Arc::new(Fenced::new(
        KubeIo::new(client.clone(), &config.scheduler_name).with_rate_limit(config.client_limit()),
        fence,
    ));
    if let Some((qps, burst)) = config.client_limit() {
        tracing::info!(qps, burst, "client-side rate limit on requests and events");
    }
    tracing::info!(
        bind_concurrency = config.bind_concurrency,
        "a round's binds are sent concurrently"
    );
    let scheduling = Loop::new(Parts {
        snapshot: {
            let mut snapshot = Snapshot::new(&config.scheduler_name, config.scheduling);
            if let Some(levels) = &config.topology_levels {
                snapshot
                    .sched
                    .apply(dragon_framework::ClusterOp::SetTopologyLevels(
                        levels.clone(),
                    ))
                    .context("topologyLevels")?;
            }
            let (queues, namespaces) = config.queue_specs();
            if !queues.is_empty() {
                snapshot.set_queues(queues, namespaces).context("queues")?;
            }
            snapshot
        },
        slot,
        fallback,
        io,
        metrics,
        bind_concurrency: config.bind_concurrency,
        volume_bind_timeout: config.volume_bind_timeout(),
        scale_interval: Duration::from_secs_f64(config.scale_interval_seconds),
        leading: !config.leader_election.enabled,
        // Nothing to list of an API the server does not serve.
        unlisted: {
            let mut unlisted = BTreeSet::new();
            if !native {
                unlisted.insert(Kind::NativeGroup);
            }
            if !devices {
                unlisted.extend([Kind::ResourceSlice, Kind::DeviceClass, Kind::ResourceClaim]);
            }
            if !taint_rules {
                unlisted.insert(Kind::DeviceTaintRule);
            }
            unlisted
        },
        taps: Taps { recorder, shadow },
        estimates: config.estimates,
    });
    let worker = tokio::spawn(scheduling.run(rx));

    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    tokio::select! {
        _ = tokio::signal::ctrl_c() => tracing::info!("interrupted; finishing the round under way"),
        _ = term.recv() => tracing::info!("terminated; finishing the round under way"),
    }
    shut_down(stop, worker, leader, config.scheduling.round_budget_ms).await;
    Ok(())
}

/// Stop in order: the scheduling loop finishes its round (its binds and
/// Events are sent, so no gang is left half bound), then the Lease is
/// released so a standby need not wait for it to expire.
async fn shut_down(
    stop: UnboundedSender<Msg>,
    worker: tokio::task::JoinHandle<()>,
    leader: Option<Election>,
    round_budget_ms: u64,
) {
    let started = Instant::now();
    let _ = stop.send(Msg::Shutdown);
    // A round is bounded by its budget plus its binds and the Events flush;
    // past that, leave (the deployment's grace period allows for it).
    let limit = Duration::from_millis(round_budget_ms) + Duration::from_secs(20);
    match tokio::time::timeout(limit, worker).await {
        Ok(Ok(())) => tracing::info!(
            ms = started.elapsed().as_millis() as u64,
            "scheduling stopped"
        ),
        Ok(Err(e)) => tracing::error!("the scheduling loop failed: {e}"),
        Err(_) => tracing::error!(
            seconds = limit.as_secs(),
            "the scheduling loop did not stop in time; leaving"
        ),
    }
    if let Some(election) = leader {
        match tokio::time::timeout(Duration::from_secs(5), election.release()).await {
            Ok(Ok(())) => tracing::info!("lease released"),
            Ok(Err(e)) => tracing::warn!("cannot release the lease: {e}"),
            Err(_) => tracing::warn!("cannot release the lease: no answer in 5 s"),
        }
    }
}

fn hostname() -> String {
    std::env::var("HOSTNAME")
        .ok()
        .or_else(|| {
            std::fs::read_to_string("/etc/hostname")
                .ok()
                .map(|s| s.trim().to_string())
        })
        .unwrap_or_else(|| "dragon".into())
}
