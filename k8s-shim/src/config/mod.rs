//! The scheduler's YAML configuration file.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use dragon_framework::SchedulerConfig;
use dragon_framework::gate::GateLimits;
use dragon_runtime::Limits;
use serde::Deserialize;

use crate::flight::RecordingConfig;

mod queues;
pub use queues::QueueConfig;

/// The `apiVersion` a config file may carry (absent: this one).
pub const API_VERSION: &str = "dragon.dev/v1alpha1";
/// The `kind` a config file may carry (absent: this one).
pub const KIND: &str = "DragonSchedulerConfiguration";

/// `dragon-scheduler --config FILE`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Config {
    /// The format's version; only [`API_VERSION`] is read.
    #[serde(default)]
    pub api_version: Option<String>,
    /// The document's kind; only [`KIND`] is read.
    #[serde(default)]
    pub kind: Option<String>,
    /// Pods with this `spec.schedulerName` are ours.
    #[serde(default = "default_name")]
    pub scheduler_name: String,
    /// The policy: a `.wasm` path (watched for hot reload), a bundled name,
    /// or `oci://registry/repository:tag` (or `@sha256:…`): pulled, and
    /// a tag polled for a hot reload (see `registry`).
    pub policy: String,
    /// The SHA-256 digests a policy component may have (one, or a list):
    /// any other is refused, at start-up and on reload, serving or shadow.
    /// For a policy in a registry this is the component's (layer's) digest.
    #[serde(default)]
    pub policy_sha256: Option<Digests>,
    /// Policy settings (a JSON object), passed to `configure`.
    #[serde(default)]
    pub settings: serde_json::Value,
    /// A file of policy settings (a JSON or YAML mapping) instead of
    /// `settings`: watched, and a change reloads the policy with them
    /// (through the gate) without a restart.
    #[serde(default)]
    pub settings_file: Option<PathBuf>,
    /// A shadow policy: a `.wasm` path (watched for hot reload, through
    /// the same gate) or a bundled name. It decides on every step beside
    /// the serving policy and is compared with it; it never acts.
    #[serde(default)]
    pub shadow_policy: Option<String>,
    /// The shadow policy's settings (a JSON object).
    #[serde(default)]
    pub shadow_settings: serde_json::Value,
    /// Per-call limits on the policy.
    #[serde(default)]
    pub limits: Limits,
    /// The framework's settings: permit cap, backoff, the policy's circuit
    /// breaker and the round budget.
    #[serde(default)]
    pub scheduling: SchedulerConfig,
    /// How often the scale step runs, seconds.
    #[serde(default = "default_scale_interval")]
    pub scale_interval_seconds: f64,
    /// Where `/metrics`, `/healthz` and `/readyz` listen.
    #[serde(default = "default_metrics_addr")]
    pub metrics_addr: String,
    /// Leader election on a Lease.
    #[serde(default)]
    pub leader_election: LeaderElection,
    /// Where compiled policies are cached (default: `$DRAGON_CACHE_DIR` or `~/.cache/dragon`).
    #[serde(default)]
    pub cache_dir: Option<PathBuf>,
    /// Most MiB of compiled policies kept in the cache; the least recently
    /// used go first (default: 1024, or `$DRAGON_CACHE_MAX_MIB`).
    #[serde(default, rename = "cacheMaxMiB")]
    pub cache_max_mib: Option<u64>,
    /// What a policy failure (trap, deadline, invalid output) means for the
    /// pods it was deciding: `failClosed` or `fallback`.
    #[serde(default)]
    pub on_policy_error: OnPolicyError,
    /// Client-side rate limit, requests per second, on the API calls the
    /// scheduling loop makes (kube-scheduler's `clientConnection.qps`,
    /// default 50 there). Binds, releases, `/scale` calls, conditions and
    /// PodGroup status updates share one token bucket, Events another
    /// (kube-scheduler also sends events through a client of their own);
    /// watches are not limited. Unset (the default): no limit.
    #[serde(default)]
    pub client_qps: Option<f64>,
    /// Burst of each bucket (kube-scheduler's `clientConnection.burst`,
    /// default 100 there); only with `clientQps`, which it defaults to
    /// (at least 1).
    #[serde(default)]
    pub client_burst: Option<u32>,
    /// Binding POSTs in flight at once. A round's binds are sent together
    /// (each still waits for its `clientQps` token before it starts), so
    /// the scheduler is not held to one API round trip per pod; the same
    /// number bounds Scheduled Events in flight. 1 binds one at a time.
    #[serde(default = "default_bind_concurrency")]
    pub bind_concurrency: usize,
    /// How long the claims a round binds (`WaitForFirstConsumer`
    /// PersistentVolumeClaims) may take to become bound before their pod's
    /// bind fails: the round waits for them, as kube-scheduler's PreBind
    /// does (600 s there, where each pod binds apart). A claim that binds
    /// later keeps its pods to its node, and they are placed once it has.
    /// Unset: 30, or less than `stuckAfterSeconds` when that is 30 or
    /// less (see [`Config::volume_bind_timeout`]).
    #[serde(default)]
    pub volume_bind_timeout_seconds: Option<u64>,
    /// `/healthz` fails once the scheduling loop has been busy with one
    /// batch of work (a round, the scale step, applying events) for longer
    /// than this, or has stopped: a liveness probe then restarts it.
    #[serde(default = "default_stuck_after")]
    pub stuck_after_seconds: u64,
    /// The flight recorder: every round and scale step, to a bounded ring
    /// of files (on by default).
    #[serde(default)]
    pub recording: RecordingConfig,
    /// The gate a reloaded policy passes before it serves.
    #[serde(default)]
    pub reload_gate: ReloadGate,
    /// How an `oci://` policy is pulled and polled.
    #[serde(default)]
    pub registry: RegistryConfig,
    /// The topology levels gangs' constraints may name: node label keys,
    /// widest first (`kubernetes.io/hostname` is added last). Unset: the
    /// labels clusters commonly carry (see `dragon_framework::DEFAULT_LEVELS`).
    #[serde(default)]
    pub topology_levels: Option<Vec<String>>,
    /// Teams sharing the cluster: each queue with the namespaces whose
    /// PodGroups belong to it, given to policies (interface 0.3) and
    /// exported per queue on `/metrics`. Empty: none.
    #[serde(default)]
    pub queues: Vec<QueueConfig>,
    /// How `kubectl dragon why` estimates a waiting gang's start.
    #[serde(default)]
    pub estimates: crate::insight::EstimateConfig,
}

/// The gate before a policy swap: the candidate runs on the steps of the
/// recording file being written (see `dragon policy gate`).
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct ReloadGate {
    pub enabled: bool,
    /// The candidate's p99 hook time may be at most this multiple of the
    /// serving policy's on the same steps.
    pub latency_multiple: f64,
}

impl Default for ReloadGate {
    fn default() -> ReloadGate {
        ReloadGate {
            enabled: true,
            latency_multiple: GateLimits::default().latency_multiple,
        }
    }
}

impl ReloadGate {
    /// The gate's limits.
    pub fn limits(&self) -> GateLimits {
        GateLimits {
            latency_multiple: self.latency_multiple,
            ..GateLimits::default()
        }
    }
}

/// One digest or several.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum Digests {
    One(String),
    Many(Vec<String>),
}

/// What to do when the policy fails.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum OnPolicyError {
    /// The pods stay pending, each with a FailedScheduling Event naming the
    /// policy, hook and cause; a policy file that does not load at start-up
    /// stops the scheduler with that error.
    #[default]
    FailClosed,
    /// The built-in `baseline` policy schedules the unit in the same round
    /// (a gang is still placed whole or not at all); a policy file that does
    /// not load at start-up is reported and the baseline serves until a good
    /// file replaces it.
    Fallback,
}

/// Lease-based leader election.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct LeaderElection {
    pub enabled: bool,
    pub namespace: String,
    pub lease_name: String,
    pub lease_duration_seconds: u64,
}

impl Default for LeaderElection {
    fn default() -> Self {
        LeaderElection {
            enabled: false,
            namespace: "kube-system".into(),
            lease_name: "dragon-scheduler".into(),
            lease_duration_seconds: 15,
        }
    }
}

fn default_name() -> String {
    "dragon-scheduler".into()
}
fn default_scale_interval() -> f64 {
    30.0
}
fn default_bind_concurrency() -> usize {
    32
}
/// `volumeBindTimeoutSeconds` when it is not set.
const DEFAULT_VOLUME_BIND_TIMEOUT: u64 = 30;
fn default_stuck_after() -> u64 {
    120
}
/// More would be one HTTP/1.1 connection each to the API server for little
/// gain (its own in-flight limit for mutations is 200 by default).
const MAX_BIND_CONCURRENCY: usize = 1024;
/// kube-scheduler's own bind timeout.
const MAX_VOLUME_BIND_TIMEOUT: u64 = 600;
/// How dragon-scheduler reaches the registry of an `oci://` policy.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RegistryConfig {
    /// A docker config file with the registry's credentials: mount a
    /// `kubernetes.io/dockerconfigjson` Secret and name its
    /// `.dockerconfigjson` here. Unset: anonymous.
    #[serde(default)]
    pub config_file: Option<PathBuf>,
    /// Registry hosts (`host:port`) spoken to over plain HTTP; every other
    /// is HTTPS with its certificate verified.
    #[serde(default)]
    pub plain_http: Vec<String>,
    /// A CA certificate (PEM file) trusted besides the system's roots.
    #[serde(default)]
    pub ca_file: Option<PathBuf>,
    /// How often a tag is resolved again, seconds (1 to 86,400).
    #[serde(default = "default_poll_seconds")]
    pub poll_seconds: u64,
    /// The largest policy a pull accepts, bytes (at most 1 GiB).
    #[serde(default = "default_max_policy_bytes")]
    pub max_bytes: u64,
}

impl Default for RegistryConfig {
    fn default() -> Self {
        RegistryConfig {
            config_file: None,
            plain_http: Vec::new(),
            ca_file: None,
            poll_seconds: default_poll_seconds(),
            max_bytes: default_max_policy_bytes(),
        }
    }
}

fn default_poll_seconds() -> u64 {
    30
}

fn default_max_policy_bytes() -> u64 {
    dragon_registry::client::DEFAULT_MAX_BYTES
}

fn default_metrics_addr() -> String {
    "127.0.0.1:10260".into()
}

impl Config {
    /// Read and check a config file.
    ///
    /// # Errors
    /// Unreadable, malformed, or with out-of-range values; the message names the file.
    pub fn load(path: &Path) -> Result<Config> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read config {}", path.display()))?;
        Config::parse(&text, &path.display().to_string())
    }

    /// Parse and check config text; `origin` (a path) names it in messages.
    ///
    /// # Errors
    /// Malformed, or with out-of-range values; the message names `origin`.
    pub fn parse(text: &str, origin: &str) -> Result<Config> {
        let c: Config =
            serde_norway::from_str(text).with_context(|| format!("invalid config {origin}"))?;
        c.check()
            .with_context(|| format!("invalid config {origin}"))?;
        Ok(c)
    }

    fn check(&self) -> Result<()> {
        if let Some(v) = self.api_version.as_deref().filter(|v| *v != API_VERSION) {
            bail!("apiVersion {v:?} is not supported: this dragon-scheduler reads {API_VERSION}");
        }
        if let Some(k) = self.kind.as_deref().filter(|k| *k != KIND) {
            bail!("kind {k:?} is not a dragon-scheduler configuration: expected {KIND}");
        }
        if self.scheduler_name.is_empty() {
            bail!("schedulerName must not be empty");
        }
        if !(self.scale_interval_seconds.is_finite() && self.scale_interval_seconds >= 1.0) {
            bail!(
                "scaleIntervalSeconds must be at least 1, got {}",
                self.scale_interval_seconds
            );
        }
        if !(self.settings.is_null() || self.settings.is_object()) {
            bail!("settings must be a mapping (it is passed to the policy as JSON)");
        }
        if self.settings_file.is_some() && !self.settings.is_null() {
            bail!("settings and settingsFile are both set: keep one");
        }
        if !(self.shadow_settings.is_null() || self.shadow_settings.is_object()) {
            bail!("shadowSettings must be a mapping (it is passed to the shadow policy as JSON)");
        }
        if let Some(qps) = self.client_qps
            && !(qps.is_finite() && qps > 0.0)
        {
            bail!("clientQps must be a positive number, got {qps}");
        }
        if !(1..=MAX_BIND_CONCURRENCY).contains(&self.bind_concurrency) {
            bail!(
                "bindConcurrency must be 1 to {MAX_BIND_CONCURRENCY}, got {}",
                self.bind_concurrency
            );
        }
        if self.stuck_after_seconds == 0 {
            bail!("stuckAfterSeconds must be at least 1");
        }
        if let Some(t) = self.volume_bind_timeout_seconds {
            if !(1..=MAX_VOLUME_BIND_TIMEOUT).contains(&t) {
                bail!("volumeBindTimeoutSeconds must be 1 to {MAX_VOLUME_BIND_TIMEOUT}, got {t}");
            }
            if t >= self.stuck_after_seconds {
                bail!(
                    "volumeBindTimeoutSeconds ({t}) must be below stuckAfterSeconds ({}): a round waiting for volumes would be taken for a stuck loop",
                    self.stuck_after_seconds
                );
            }
        }
        self.recording.check()?;
        self.estimates.check()?;
        if let Some(levels) = &self.topology_levels {
            dragon_framework::check_levels(levels).context("topologyLevels")?;
        }
        queues::check(&self.queues)?;
        let share = self.scheduling.percentage_of_nodes_to_score;
        if share > 100 {
            bail!("scheduling.percentageOfNodesToScore must be 0 (adaptive) to 100, got {share}");
        }
        let m = self.reload_gate.latency_multiple;
        if !(m.is_finite() && m >= 1.0) {
            bail!("reloadGate.latencyMultiple must be at least 1, got {m}");
        }
        if !(1..=86_400).contains(&self.registry.poll_seconds) {
            bail!(
                "registry.pollSeconds must be between 1 and 86400, got {}",
                self.registry.poll_seconds
            );
        }
        if !(1..=1 << 30).contains(&self.registry.max_bytes) {
            bail!(
                "registry.maxBytes must be between 1 and 1073741824, got {}",
                self.registry.max_bytes
            );
        }
        match (self.client_qps, self.client_burst) {
            (None, Some(_)) => bail!("clientBurst needs clientQps"),
            (_, Some(0)) => bail!("clientBurst must be at least 1"),
            _ => {}
        }
        Ok(())
    }

    /// How long a round waits for the claims it binds: as set, else 30 s,
    /// kept below `stuckAfterSeconds` (at least 1 s).
    pub fn volume_bind_timeout(&self) -> std::time::Duration {
        let secs = self.volume_bind_timeout_seconds.unwrap_or_else(|| {
            DEFAULT_VOLUME_BIND_TIMEOUT.min(self.stuck_after_seconds.saturating_sub(1).max(1))
        });
        std::time::Duration::from_secs(secs)
    }

    /// The client-side rate limit `(qps, burst)`, if one is set.
    pub fn client_limit(&self) -> Option<(f64, u32)> {
        let qps = self.client_qps?;
        let burst = self
            .client_burst
            .unwrap_or_else(|| (qps.ceil() as u32).max(1));
        Some((qps, burst))
    }

    /// The digests a policy may have; empty: any.
    pub fn allowed_digests(&self) -> Vec<String> {
        match &self.policy_sha256 {
            None => Vec::new(),
            Some(Digests::One(d)) => vec![d.clone()],
            Some(Digests::Many(ds)) => ds.clone(),
        }
    }

    /// The settings as the JSON text `configure` receives.
    pub fn settings_json(&self) -> String {
        json_text(&self.settings)
    }

    /// The shadow policy's settings as the JSON text `configure` receives.
    pub fn shadow_settings_json(&self) -> String {
        json_text(&self.shadow_settings)
    }
}

/// The settings in `path` (a JSON or YAML mapping) as the JSON text
/// `configure` receives.
///
/// # Errors
/// The file cannot be read or is not a mapping; the message names it.
pub fn read_settings_file(path: &Path) -> Result<String> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read settings file {}", path.display()))?;
    let v: serde_json::Value = serde_norway::from_str(&text)
        .with_context(|| format!("invalid settings file {}", path.display()))?;
    if !(v.is_null() || v.is_object()) {
        bail!(
            "invalid settings file {}: the settings must be a mapping",
            path.display()
        );
    }
    Ok(json_text(&v))
}

fn json_text(v: &serde_json::Value) -> String {
    if v.is_null() {
        String::new()
    } else {
        v.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shipped_configuration_parses_and_records_to_its_volume() {
        let manifest = include_str!("../../deploy/config.yaml");
        let (_, body) = manifest.split_once("config.yaml: |\n").unwrap();
        let text: String = body
            .lines()
            .map(|l| l.strip_prefix("    ").unwrap_or(l))
            .collect::<Vec<_>>()
            .join("\n");
        let c = Config::parse(&text, "deploy/config.yaml").unwrap();
        assert!(c.recording.enabled);
        assert_eq!(c.recording.dir, Path::new("/var/lib/dragon/recordings"));
        assert!(c.reload_gate.enabled);
    }

    #[test]
    fn recording_and_the_reload_gate_are_on_by_default_and_their_bounds_checked() {
        let c = Config::parse("policy: dragon\n", "c.yaml").unwrap();
        assert!(c.recording.enabled && c.reload_gate.enabled);
        assert_eq!(c.recording.max_bytes, 64 << 20);
        for (bad, key) in [
            ("recording: {maxBytes: 10}\n", "recording.maxBytes"),
            ("recording: {files: 1}\n", "recording.files"),
            ("recording: {dirr: /x}\n", "dirr"),
            (
                "reloadGate: {latencyMultiple: 0.5}\n",
                "reloadGate.latencyMultiple",
            ),
        ] {
            let e = format!(
                "{:#}",
                Config::parse(&format!("policy: dragon\n{bad}"), "c.yaml").unwrap_err()
            );
            assert!(e.contains("c.yaml") && e.contains(key), "{bad}: {e}");
        }
    }

    #[test]
    fn the_failure_mode_defaults_to_fail_closed_and_is_checked() {
        let c = Config::parse("policy: dragon\n", "c.yaml").unwrap();
        assert_eq!(c.on_policy_error, OnPolicyError::FailClosed);
        let c = Config::parse("policy: dragon\nonPolicyError: fallback\n", "c.yaml").unwrap();
        assert_eq!(c.on_policy_error, OnPolicyError::Fallback);
        let e = Config::parse("policy: dragon\nonPolicyError: retry\n", "c.yaml").unwrap_err();
        let msg = format!("{e:#}");
        assert!(msg.contains("c.yaml") && msg.contains("retry"), "{msg}");
    }

    #[test]
    fn the_client_rate_limit_is_off_by_default_and_checked() {
        let c = Config::parse("policy: dragon\n", "c.yaml").unwrap();
        assert_eq!(c.client_limit(), None);
        let c = Config::parse(
            "policy: dragon\nclientQps: 50\nclientBurst: 100\n",
            "c.yaml",
        )
        .unwrap();
        assert_eq!(c.client_limit(), Some((50.0, 100)));
        let c = Config::parse("policy: dragon\nclientQps: 2.5\n", "c.yaml").unwrap();
        assert_eq!(c.client_limit(), Some((2.5, 3)));
        for bad in [
            "clientQps: 0\n",
            "clientQps: -1\n",
            "clientQps: .nan\n",
            "clientBurst: 10\n",
            "clientQps: 5\nclientBurst: 0\n",
        ] {
            let e = Config::parse(&format!("policy: dragon\n{bad}"), "c.yaml").unwrap_err();
            let msg = format!("{e:#}");
            assert!(
                msg.contains("c.yaml") && msg.contains("client"),
                "{bad}: {msg}"
            );
        }
    }

    #[test]
    fn the_volume_bind_timeout_defaults_to_30_s_below_the_stuck_limit_and_is_checked() {
        use std::time::Duration;
        let c = Config::parse("policy: dragon\n", "c.yaml").unwrap();
        assert_eq!(c.volume_bind_timeout(), Duration::from_secs(30));
        let c = Config::parse("policy: dragon\nstuckAfterSeconds: 10\n", "c.yaml").unwrap();
        assert_eq!(c.volume_bind_timeout(), Duration::from_secs(9));
        let c = Config::parse("policy: dragon\nstuckAfterSeconds: 1\n", "c.yaml").unwrap();
        assert_eq!(c.volume_bind_timeout(), Duration::from_secs(1));
        let c = Config::parse("policy: dragon\nvolumeBindTimeoutSeconds: 90\n", "c.yaml").unwrap();
        assert_eq!(c.volume_bind_timeout(), Duration::from_secs(90));
        for (bad, why) in [
            ("volumeBindTimeoutSeconds: 0", "must be 1 to 600"),
            ("volumeBindTimeoutSeconds: 601", "must be 1 to 600"),
            (
                "volumeBindTimeoutSeconds: 120",
                "must be below stuckAfterSeconds (120)",
            ),
        ] {
            let e = Config::parse(&format!("policy: dragon\n{bad}\n"), "c.yaml").unwrap_err();
            assert!(format!("{e:#}").contains(why), "{bad}: {e:#}");
        }
    }

    #[test]
    fn bind_concurrency_defaults_to_32_and_is_checked() {
        let c = Config::parse("policy: dragon\n", "c.yaml").unwrap();
        assert_eq!(c.bind_concurrency, 32);
        let c = Config::parse("policy: dragon\nbindConcurrency: 1\n", "c.yaml").unwrap();
        assert_eq!(c.bind_concurrency, 1);
        for bad in ["0", "1025", "-1", "many"] {
            let e = Config::parse(
                &format!("policy: dragon\nbindConcurrency: {bad}\n"),
                "c.yaml",
            )
            .unwrap_err();
            let msg = format!("{e:#}");
            assert!(
                msg.contains("c.yaml") && msg.contains("bindConcurrency"),
                "{bad}: {msg}"
            );
        }
    }

    #[test]
    fn the_framework_settings_are_settable_and_their_typos_refused() {
        let c = Config::parse(
            "policy: dragon\nscheduling:\n  maxBackoffMs: 2000\n  roundBudgetMs: 0\n  breaker: {failures: 2, suspendMs: 500}\n",
            "c.yaml",
        )
        .unwrap();
        assert_eq!(c.scheduling.max_backoff_ms, 2000);
        assert_eq!(c.scheduling.round_budget_ms, 0);
        assert_eq!(c.scheduling.breaker.failures, 2);
        assert_eq!(c.scheduling.breaker.suspend_ms, 500);
        assert_eq!(
            c.scheduling.initial_backoff_ms, 1000,
            "defaults fill the rest"
        );
        let e = format!(
            "{:#}",
            Config::parse(
                "policy: dragon\nscheduling: {breaker: {failure: 2}}\n",
                "c.yaml"
            )
            .unwrap_err()
        );
        assert!(e.contains("failure"), "{e}");
        let share = |v: &str| {
            Config::parse(
                &format!("policy: dragon\nscheduling: {{percentageOfNodesToScore: {v}}}\n"),
                "c.yaml",
            )
        };
        assert_eq!(
            share("40").unwrap().scheduling.percentage_of_nodes_to_score,
            40
        );
        let e = format!("{:#}", share("101").unwrap_err());
        assert!(
            e.contains("percentageOfNodesToScore must be 0 (adaptive) to 100, got 101"),
            "{e}"
        );
    }

    #[test]
    fn api_version_and_kind_are_optional_and_checked() {
        let c = Config::parse(
            "apiVersion: dragon.dev/v1alpha1\nkind: DragonSchedulerConfiguration\npolicy: dragon\n",
            "c.yaml",
        )
        .unwrap();
        assert_eq!(c.api_version.as_deref(), Some(API_VERSION));
        for (bad, needle) in [
            ("apiVersion: dragon.dev/v2\n", "dragon.dev/v2"),
            (
                "kind: KubeSchedulerConfiguration\n",
                "KubeSchedulerConfiguration",
            ),
        ] {
            let e = format!(
                "{:#}",
                Config::parse(&format!("{bad}policy: dragon\n"), "c.yaml").unwrap_err()
            );
            assert!(e.contains("c.yaml") && e.contains(needle), "{e}");
        }
    }

    #[test]
    fn limits_are_camel_case_like_every_other_key() {
        let c = Config::parse(
            "policy: dragon\nlimits: {deadlineMs: 250, memoryBytes: 1048576, tableElements: 10}\n",
            "c.yaml",
        )
        .unwrap();
        assert_eq!(
            (
                c.limits.deadline_ms,
                c.limits.memory_bytes,
                c.limits.table_elements
            ),
            (250, 1 << 20, 10)
        );
        let e = format!(
            "{:#}",
            Config::parse("policy: dragon\nlimits: {deadline_ms: 250}\n", "c.yaml").unwrap_err()
        );
        assert!(e.contains("deadline_ms"), "{e}");
    }

    #[test]
    fn a_minimal_config_gets_defaults_and_typos_are_refused() {
        let c: Config = serde_norway::from_str("policy: dragon\n").unwrap();
        assert_eq!(c.scheduler_name, "dragon-scheduler");
        assert_eq!(c.settings_json(), "");
        let e = serde_norway::from_str::<Config>("policy: dragon\nschedulerNmae: x\n").unwrap_err();
        assert!(e.to_string().contains("schedulerNmae"), "{e}");
        let c: Config =
            serde_norway::from_str("policy: dragon\nsettings: {idle_threshold_s: 5}\n").unwrap();
        assert_eq!(c.settings_json(), r#"{"idle_threshold_s":5}"#);
    }

    #[test]
    fn a_registry_policy_has_a_bounded_poll_and_size() {
        let c = Config::parse(
            "policy: oci://r.example.com/p:v1\nregistry: {plainHttp: [\"127.0.0.1:5000\"]}\n",
            "c.yaml",
        )
        .unwrap();
        assert_eq!(c.registry.poll_seconds, 30);
        assert_eq!(c.registry.plain_http, ["127.0.0.1:5000"]);
        for (bad, named) in [
            ("registry: {pollSeconds: 0}", "registry.pollSeconds"),
            ("registry: {maxBytes: 0}", "registry.maxBytes"),
            ("registry: {pollSecs: 5}", "pollSecs"),
        ] {
            let text = format!("policy: oci://r.example.com/p:v1\n{bad}\n");
            let e = format!("{:#}", Config::parse(&text, "c.yaml").unwrap_err());
            assert!(e.contains(named), "{bad}: {e}");
        }
    }

    #[test]
    fn topology_levels_are_read_and_a_list_the_framework_cannot_use_is_refused() {
        let c = Config::parse(
            "policy: dragon\ntopologyLevels: [example.com/block, dragon.dev/rack]\n",
            "c.yaml",
        )
        .unwrap();
        assert_eq!(
            c.topology_levels.as_deref(),
            Some(
                &[
                    "example.com/block".to_string(),
                    "dragon.dev/rack".to_string()
                ][..]
            )
        );
        let e = format!(
            "{:#}",
            Config::parse("policy: dragon\ntopologyLevels: [rack, rack]\n", "c.yaml").unwrap_err()
        );
        assert_eq!(
            e,
            "invalid config c.yaml: topologyLevels: topology level \"rack\" is listed twice"
        );
    }

    #[test]
    fn parse_names_the_origin_and_load_reads_the_file_through_it() {
        let e = format!("{:#}", Config::parse("policy: [", "c.yaml").unwrap_err());
        assert!(e.starts_with("invalid config c.yaml: "), "{e}");
        let e = format!(
            "{:#}",
            Config::parse("policy: x\nscaleIntervalSeconds: .nan\n", "c.yaml").unwrap_err()
        );
        assert!(
            e.contains("c.yaml") && e.contains("scaleIntervalSeconds"),
            "{e}"
        );
        let dir = std::env::temp_dir().join(format!("dragon-config-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("config.yaml");
        std::fs::write(&path, "policy: dragon\nsettings: [1]\n").unwrap();
        let e = format!("{:#}", Config::load(&path).unwrap_err());
        assert!(
            e.starts_with(&format!("invalid config {}", path.display())),
            "{e}"
        );
        assert!(e.contains("settings must be a mapping"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
