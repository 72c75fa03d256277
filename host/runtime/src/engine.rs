//! The shared wasmtime engine and its epoch ticker.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use wasmtime::{Config, Engine};

/// How often the epoch advances; call deadlines are whole ticks.
pub(crate) const TICK: Duration = Duration::from_millis(2);

/// One wasmtime [`Engine`] for every policy, with a ticker thread that
/// advances its epoch so a runaway call can be interrupted at its deadline.
/// The ticker stops when the last clone is dropped.
#[derive(Clone)]
pub struct PolicyEngine {
    engine: Engine,
    _ticker: Arc<Ticker>,
}

struct Ticker {
    stop: Arc<AtomicBool>,
}

impl Drop for Ticker {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

impl PolicyEngine {
    /// A new engine configured for policies.
    ///
    /// # Errors
    /// When wasmtime rejects the configuration (not expected on x86-64/aarch64).
    pub fn new() -> wasmtime::Result<PolicyEngine> {
        let mut config = Config::new();
        config.wasm_component_model(true);
        config.epoch_interruption(true);
        // Concurrency support triples the cost of a component call and no
        // policy needs async.
        config.concurrency_support(false);
        // Deep recursion traps cleanly instead of eating the host's stack.
        config.max_wasm_stack(1 << 20);
        // `perf record` can then name policy functions (written to
        // /tmp/perf-<pid>.map), for profiling a policy in place.
        if std::env::var_os("DRAGON_PERF_MAP").is_some() {
            config.profiler(wasmtime::ProfilingStrategy::PerfMap);
        }
        let engine = Engine::new(&config)?;
        let stop = Arc::new(AtomicBool::new(false));
        let ticking = engine.clone();
        let flag = stop.clone();
        std::thread::Builder::new()
            .name("dragon-epoch".into())
            .spawn(move || {
                while !flag.load(Ordering::Relaxed) {
                    std::thread::sleep(TICK);
                    ticking.increment_epoch();
                }
            })
            .map_err(|e| wasmtime::format_err!("cannot start the epoch ticker: {e}"))?;
        Ok(PolicyEngine {
            engine,
            _ticker: Arc::new(Ticker { stop }),
        })
    }

    /// The wasmtime engine.
    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// A key that changes whenever compiled artifacts stop being compatible.
    pub(crate) fn compatibility_key(&self) -> u64 {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        self.engine.precompile_compatibility_hash().hash(&mut h);
        h.finish()
    }
}
