//! How a command opens what it runs: a policy (a path or a bundled name,
//! its settings, its limits) and a recording.

use std::path::Path;

use anyhow::{Context, Result};
use clap::Args;
use dragon_framework::SchedulerConfig;
use dragon_framework::record::{self, Recording};
use dragon_runtime::{
    ComponentCache, Hooks, Limits, LoadOptions, PolicyEngine, PolicySource, WasmPolicy,
};

/// Per-call deadline in simulations. Generous: a call that times out is an
/// error that depends on the machine, and simulations must be reproducible.
pub(crate) const SIM_DEADLINE_MS: u64 = 10_000;

/// Where the policy comes from and how it is configured.
#[derive(Debug, Args)]
pub struct PolicyArgs {
    /// A `.wasm` policy component, or `dragon` / `baseline` for a bundled one.
    pub policy: String,
    /// Policy settings: inline JSON or a JSON file.
    #[arg(long)]
    pub settings: Option<String>,
    /// Per-call deadline, ms.
    #[arg(long, default_value_t = Limits::default().deadline_ms)]
    pub deadline_ms: u64,
    /// Do not use the compiled-policy cache.
    #[arg(long)]
    pub no_cache: bool,
}

impl PolicyArgs {
    pub(crate) fn load(&self) -> Result<WasmPolicy> {
        self.load_with("")
    }

    /// Load with `--settings`, else with `fallback` (a case's settings).
    pub(crate) fn load_with(&self, fallback: &str) -> Result<WasmPolicy> {
        let settings = match self.settings.as_deref() {
            Some(arg) => super::read_settings(Some(arg))?,
            None => fallback.to_string(),
        };
        self.load_source(&PolicySource::named_or_file(&self.policy), settings)
    }

    /// Load `source` with these limits and cache choice.
    pub(crate) fn load_source(
        &self,
        source: &PolicySource,
        settings: String,
    ) -> Result<WasmPolicy> {
        let engine = PolicyEngine::new()
            .map_err(|e| anyhow::anyhow!("cannot create the wasm engine: {e}"))?;
        let cache = if self.no_cache {
            ComponentCache::disabled()
        } else {
            ComponentCache::from_env()
        };
        let options = LoadOptions {
            settings,
            limits: Limits {
                deadline_ms: self.deadline_ms,
                ..Limits::default()
            },
            sha256: Vec::new(),
        };
        Ok(WasmPolicy::load(&engine, &cache, source, &options)?)
    }
}

/// Load a policy for a simulation.
pub(crate) fn load_policy(
    policy: &str,
    settings: Option<&str>,
    deadline_ms: u64,
    no_cache: bool,
) -> Result<WasmPolicy> {
    PolicyArgs {
        policy: policy.to_string(),
        settings: settings.map(str::to_string),
        deadline_ms,
        no_cache,
    }
    .load()
}

/// What `policy check` prints of a loaded policy.
pub(crate) fn print_check(policy: &WasmPolicy, json: bool) -> Result<()> {
    let info = policy.info();
    if json {
        println!("{}", serde_json::to_string_pretty(info)?);
        return Ok(());
    }
    let hooks: Vec<&str> = info
        .hooks
        .iter()
        .map(|h| dragon_runtime::hook_name(*h))
        .collect();
    println!("policy:            {} {}", info.name, info.version);
    println!(
        "interface:         dragon:scheduler@{}",
        info.interface_version
    );
    println!("hooks:             {}", hooks.join(", "));
    println!("source:            {}", info.origin);
    println!("size:              {} bytes", info.size_bytes);
    println!("sha256:            {}", info.sha256);
    println!(
        "compile:           {:.1} ms{}",
        info.compile_ms,
        if info.cached {
            " (from the compiled-policy cache)"
        } else {
            ""
        }
    );
    println!(
        "settings:          {}",
        if info.settings.is_empty() {
            "(defaults)"
        } else {
            &info.settings
        }
    );
    println!("ok");
    Ok(())
}

/// A recording opened for a command: read (a torn last record skipped
/// with a warning), with its framework settings and its fallback policy
/// loaded.
pub(crate) struct Opened {
    pub rec: Recording,
    pub config: SchedulerConfig,
    pub fallback: Option<WasmPolicy>,
}

impl Opened {
    /// # Errors
    /// The file is not a readable recording, or what it names cannot be
    /// loaded; `doing` says what it was opened for.
    pub(crate) fn at(path: &Path, doing: &str) -> Result<Opened> {
        let rec = record::read(path).with_context(|| format!("cannot {doing}"))?;
        if let Some(torn) = &rec.torn {
            eprintln!(
                "warning: {}: the last record was cut short and is skipped ({torn})",
                path.display()
            );
        }
        let config: SchedulerConfig = serde_json::from_str(&rec.header.config)
            .with_context(|| format!("{}: the recorded framework settings", path.display()))?;
        let fallback = match rec.header.fallback.as_str() {
            "" => None,
            name => Some(
                load_policy(name, None, SIM_DEADLINE_MS, false)
                    .with_context(|| format!("cannot load the recorded fallback `{name}`"))?,
            ),
        };
        Ok(Opened {
            rec,
            config,
            fallback,
        })
    }

    /// The policy the recording was made with, from `copy` or else from
    /// where it was loaded then (a path or a bundled name), with its
    /// recorded settings.
    ///
    /// # Errors
    /// It cannot be loaded from there.
    pub(crate) fn recorded_policy(&self, copy: Option<&str>) -> Result<WasmPolicy> {
        let h = &self.rec.header;
        let spec = copy.unwrap_or(&h.origin);
        let settings = Some(h.settings.as_str()).filter(|s| !s.is_empty());
        load_policy(spec, settings, SIM_DEADLINE_MS, false)
            .with_context(|| format!("cannot load the recorded policy `{spec}`"))
    }

    pub(crate) fn fallback(&self) -> Option<&dyn Hooks> {
        self.fallback.as_ref().map(|f| f as &dyn Hooks)
    }
}
