//! Wiring: the policy loaded and followed, watches feeding the scheduling
//! loop ([`crate::watch`]), HTTP serving metrics and health, and a Lease
//! deciding which replica acts.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use dragon_runtime::{
    ComponentCache, LoadOptions, PolicyEngine, PolicySlot, PolicySource, WasmPolicy,
};
use kube::Client;
use kube::api::Api;
use tokio::sync::mpsc::UnboundedSender;

use crate::config::{Config, OnPolicyError};
use crate::fence::{Fence, Fenced};
use crate::flight::{FlightRecorder, Run};
use crate::kube_io::KubeIo;
use crate::leader::Election;
use crate::metrics::{Metrics, Reload};
use crate::oci_policy::OciPolicy;
use crate::reload::{Gate, Reloader, Watched};
use crate::scheduling::{Loop, Msg, Parts};
use crate::shadow::ShadowFeed;
use crate::snapshot::Snapshot;
use crate::taps::Taps;

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

/// Where a policy comes from: a bundled name, a file, or a registry.
struct Resolved {
    /// The policy, or why it could not be pulled.
    source: Result<PolicySource>,
    /// For a registry: the poller that follows its tag, and the digest now
    /// served (empty when the first pull failed: any digest is new).
    oci: Option<(OciPolicy, String)>,
}

/// A policy slot and where its policy comes from: what follows it.
struct Followed {
    slot: Arc<PolicySlot>,
    source: PolicySource,
    /// A settings file watched beside the policy's.
    settings_file: Option<PathBuf>,
    /// For a registry: its poller and the digest now served.
    oci: Option<(OciPolicy, String)>,
}

impl Followed {
    /// Swap what the file watch or the registry's poller finds into the
    /// slot, through `gate` (one path for the serving and the shadow
    /// policy).
    ///
    /// # Errors
    /// The files cannot be watched.
    fn follow(self, options: LoadOptions, gate: Option<Gate>, metrics: Arc<Metrics>) -> Result<()> {
        let watched = Watched {
            source: self.source.clone(),
            settings_file: self.settings_file,
        };
        let reloader = Arc::new(Reloader::new(
            self.slot,
            self.source,
            options,
            gate,
            metrics,
        ));
        if watched.any() {
            crate::reload::spawn(watched, reloader.clone())?;
        }
        if let Some((oci, digest)) = self.oci {
            oci.spawn(digest, reloader);
        }
        Ok(())
    }
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
                started_ms: crate::clock::now_ms(),
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
    Followed {
        slot: slot.clone(),
        source,
        settings_file: config.settings_file.clone(),
        oci,
    }
    .follow(options, gate(), metrics.clone())
    .context("cannot watch the policy and settings files for changes")?;
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
                    Followed {
                        slot: shadow_slot.clone(),
                        source,
                        settings_file: None,
                        oci,
                    }
                    .follow(options, gate(), metrics.clone())
                    .context("cannot watch the shadow policy file for changes")?;
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

    let unlisted = crate::watch::spawn_all(&client, &tx).await;
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
        unlisted,
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
