//! The hot-swappable policy slot.

use std::sync::Arc;
use std::time::Instant;

use arc_swap::ArcSwap;
use serde::Serialize;

use super::cache::ComponentCache;
use super::engine::PolicyEngine;
use super::error::LoadError;
use super::load::PolicySource;
use super::policy::{LoadOptions, WasmPolicy};

/// Holds the serving policy. A reader takes an `Arc` to the current policy
/// and keeps it for the whole call (or scheduling cycle), so calls in flight
/// finish on the version they started with; a swap replaces the pointer
/// atomically and the next reader gets the new version. A failed load never
/// touches the slot.
pub struct PolicySlot {
    engine: PolicyEngine,
    cache: ComponentCache,
    current: ArcSwap<WasmPolicy>,
}

/// What a successful swap did.
#[derive(Debug, Clone, Serialize)]
pub struct SwapReport {
    /// `name version` of the policy replaced.
    pub old: String,
    /// `name version` of the policy now serving.
    pub new: String,
    /// Load + validate + swap time, ms.
    pub took_ms: f64,
    /// Whether the compiled artifact came from the cache.
    pub cached: bool,
}

fn label(p: &WasmPolicy) -> String {
    format!("{} {}", p.info().name, p.info().version)
}

impl PolicySlot {
    /// A slot serving `initial`.
    pub fn new(engine: PolicyEngine, cache: ComponentCache, initial: WasmPolicy) -> PolicySlot {
        PolicySlot {
            engine,
            cache,
            current: ArcSwap::from_pointee(initial),
        }
    }

    /// Load `source` and make it the serving policy.
    ///
    /// # Errors
    /// Any [`LoadError`]; the slot keeps serving the old policy.
    pub fn open(
        engine: PolicyEngine,
        cache: ComponentCache,
        source: &PolicySource,
        options: &LoadOptions,
    ) -> Result<PolicySlot, LoadError> {
        let policy = WasmPolicy::load(&engine, &cache, source, options)?;
        Ok(PolicySlot::new(engine, cache, policy))
    }

    /// The serving policy. Hold the `Arc` for one cycle.
    pub fn current(&self) -> Arc<WasmPolicy> {
        self.current.load_full()
    }

    /// Load, validate and configure `source`, then swap it in.
    ///
    /// # Errors
    /// Any [`LoadError`]; the old policy keeps serving.
    pub fn reload(
        &self,
        source: &PolicySource,
        options: &LoadOptions,
    ) -> Result<SwapReport, LoadError> {
        let started = Instant::now();
        let new = WasmPolicy::load(&self.engine, &self.cache, source, options)?;
        Ok(self.install(new, started))
    }

    /// Swap in an already-loaded policy.
    pub fn swap(&self, new: WasmPolicy) -> SwapReport {
        self.install(new, Instant::now())
    }

    fn install(&self, new: WasmPolicy, started: Instant) -> SwapReport {
        let cached = new.info().cached;
        let new_label = label(&new);
        let old = self.current.swap(Arc::new(new));
        let report = SwapReport {
            old: label(&old),
            new: new_label,
            took_ms: started.elapsed().as_secs_f64() * 1e3,
            cached,
        };
        tracing::info!(old = %report.old, new = %report.new, took_ms = report.took_ms, "policy swapped");
        report
    }

    /// The engine policies are compiled with.
    pub fn engine(&self) -> &PolicyEngine {
        &self.engine
    }

    /// The compiled-component cache.
    pub fn cache(&self) -> &ComponentCache {
        &self.cache
    }
}
