//! A loaded policy component: loading, one reused instance per policy,
//! and the [`Hooks`] it implements through the wasm boundary.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use wasmtime::component::HasSelf;
use wasmtime::{Store, Trap};

use super::adapt;
use super::bindings::{v0_1, v0_2, v0_3, v0_4, wit};
use super::bounds::{self, LogBudget};
use super::cache::ComponentCache;
use super::engine::{PolicyEngine, TICK};
use super::error::{CallError, Failure, HookName, LoadError};
use super::hooks::{Hooks, PolicyInfo};
use super::limits::{Limiter, Limits};
use super::load::{Interface, PolicySource, check_header, check_world, sha256_hex};
use super::store::HostState;
use super::view::{ClusterView, Delta, QueueRow, Seen};
use super::wasi;

/// How to load a policy.
#[derive(Debug, Clone, Default)]
pub struct LoadOptions {
    /// JSON settings passed to `configure` (`""` means defaults).
    pub settings: String,
    /// Per-call limits.
    pub limits: Limits,
    /// Refuse the component unless its SHA-256 is one of these (hex);
    /// empty: any.
    pub sha256: Vec<String>,
}

/// A compiled policy ready to instantiate, per interface version.
#[derive(Clone)]
enum Pre {
    V0_1(v0_1::SchedulingPolicyPre<HostState>),
    V0_2(v0_2::SchedulingPolicyPre<HostState>),
    V0_3(v0_3::SchedulingPolicyPre<HostState>),
    V0_4(v0_4::SchedulingPolicyPre<HostState>),
}

/// An instance's exports, per interface version.
enum Bindings {
    V0_1(v0_1::SchedulingPolicy),
    V0_2(v0_2::SchedulingPolicy),
    V0_3(v0_3::SchedulingPolicy),
    V0_4(v0_4::SchedulingPolicy),
}

struct Live {
    store: Store<HostState>,
    bindings: Bindings,
    /// How much of the cluster's change log this instance has applied to
    /// its view (0.2 and 0.3; `None`: nothing yet, the next call sends
    /// every node).
    seen: Option<Seen>,
    /// The queues it last received (0.3; `None`: none since its view was
    /// reset).
    queues: Option<Vec<QueueRow>>,
}

impl Live {
    fn configure(&mut self, settings: &str) -> wasmtime::Result<Result<(), String>> {
        match &self.bindings {
            Bindings::V0_1(b) => b
                .dragon_scheduler_policy()
                .call_configure(&mut self.store, settings),
            Bindings::V0_2(b) => b
                .dragon_scheduler_policy()
                .call_configure(&mut self.store, settings),
            Bindings::V0_3(b) => b
                .dragon_scheduler_policy()
                .call_configure(&mut self.store, settings),
            Bindings::V0_4(b) => b
                .dragon_scheduler_policy()
                .call_configure(&mut self.store, settings),
        }
    }

    /// Run a 0.2 call that carries changes to the instance's view; the
    /// instance counts as having seen them only if the call succeeds (a
    /// failed call discards the instance anyway).
    fn with_changes<R>(
        &mut self,
        view: &dyn ClusterView,
        f: impl FnOnce(
            &mut Store<HostState>,
            &v0_2::SchedulingPolicy,
            &v0_2::dragon::scheduler::types::Changes,
        ) -> wasmtime::Result<R>,
    ) -> wasmtime::Result<R> {
        let Bindings::V0_2(b) = &self.bindings else {
            unreachable!("0.2 changes go to 0.2 instances only");
        };
        let delta = Delta::since(view, self.seen);
        let changes = adapt::v2::changes(view, &delta);
        let r = f(&mut self.store, b, &changes)?;
        self.seen = Some(delta.seen);
        Ok(r)
    }
}

/// [`Live::with_changes`] for a 0.3 or 0.4 instance, the queues going with
/// the changes when `queues` and they differ from what the instance last
/// received. (New topology levels come with a new change log, so the view
/// starts over with them.)
macro_rules! with_levelled_changes {
    ($name:ident, $v:ident, $variant:ident, $adapt:ident) => {
        impl Live {
            fn $name<R>(
                &mut self,
                view: &dyn ClusterView,
                queues: bool,
                f: impl FnOnce(
                    &mut Store<HostState>,
                    &$v::SchedulingPolicy,
                    &$v::dragon::scheduler::types::Changes,
                ) -> wasmtime::Result<R>,
            ) -> wasmtime::Result<R> {
                let Bindings::$variant(b) = &self.bindings else {
                    unreachable!("changes go to instances of their version only");
                };
                let delta = Delta::since(view, self.seen);
                let known = self.queues.as_ref().filter(|_| !delta.reset);
                let rows = queues.then(|| view.queues());
                let send = rows.filter(|r| known != Some(r));
                let changes = adapt::$adapt::changes(view, &delta, send.as_deref());
                let r = f(&mut self.store, b, &changes)?;
                self.seen = Some(delta.seen);
                if delta.reset {
                    self.queues = None;
                }
                if send.is_some() {
                    self.queues = send;
                }
                Ok(r)
            }
        }
    };
}

with_levelled_changes!(with_changes_v3, v0_3, V0_3, v3);
with_levelled_changes!(with_changes_v4, v0_4, V0_4, v4);

/// A policy component, compiled, validated and configured, with one reused
/// instance. A call that fails discards the instance (its state may be
/// broken); the next call starts a fresh, reconfigured one.
pub struct WasmPolicy {
    info: PolicyInfo,
    engine: PolicyEngine,
    pre: Pre,
    limits: Limits,
    live: Mutex<Option<Live>>,
    log_budget: Arc<LogBudget>,
    /// The clock and output its instances' WASI shares.
    guest: wasi::Guest,
}

/// Name, version and hooks as the host keeps them: bounded, the version
/// valid semver, each hook listed once.
fn checked_metadata(
    origin: &str,
    raw: wit::PolicyInfo,
) -> Result<(String, String, Vec<wit::Hook>), LoadError> {
    let refuse = |message: String| LoadError::Metadata {
        origin: origin.into(),
        message,
    };
    // The name prefixes every line about the policy: printable only.
    if raw.name.trim().is_empty()
        || raw.name.len() > bounds::MAX_NAME
        || bounds::inert(raw.name.clone()) != raw.name
    {
        return Err(refuse(format!(
            "the name must be 1 to {} printable bytes, got {:?}",
            bounds::MAX_NAME,
            bounds::preview(&raw.name, bounds::MAX_NAME)
        )));
    }
    if raw.version.len() > bounds::MAX_VERSION {
        return Err(refuse(format!(
            "the version must be at most {} bytes, got {:?}",
            bounds::MAX_VERSION,
            bounds::preview(&raw.version, bounds::MAX_VERSION)
        )));
    }
    if let Err(e) = semver::Version::parse(&raw.version) {
        return Err(refuse(format!(
            "the version {:?} is not semver (MAJOR.MINOR.PATCH): {e}",
            raw.version
        )));
    }
    // Each known hook once, in the order first listed; a list of millions
    // of repeats costs one pass here instead of a scan per lookup later.
    let mut hooks = Vec::new();
    let mut seen = 0u8;
    for h in raw.hooks {
        let bit = 1u8 << (h as u8);
        if seen & bit == 0 {
            seen |= bit;
            hooks.push(h);
            if hooks.len() == ALL_HOOKS {
                break;
            }
        }
    }
    Ok((raw.name, raw.version, hooks))
}

/// How many hooks the interface has.
const ALL_HOOKS: usize = 6;

fn describe(e: &wasmtime::Error) -> String {
    match e.downcast_ref::<Trap>() {
        // Rust and C keep their stack in linear memory, below the data: an
        // overflow of it runs off the bottom and lands here, not as
        // wasmtime's own StackOverflow.
        Some(Trap::MemoryOutOfBounds) => format!(
            "{} (from a Rust or C policy this is usually a stack overflow: deep recursion or large locals)",
            Trap::MemoryOutOfBounds
        ),
        Some(trap) => trap.to_string(),
        // A host function's refusal, under wasmtime's backtrace context.
        None => e.root_cause().to_string(),
    }
}

impl WasmPolicy {
    /// Load, validate, compile (or fetch from `cache`), instantiate and
    /// configure a policy, and run a smoke call.
    ///
    /// # Errors
    /// A [`LoadError`] naming the source and the cause.
    pub fn load(
        engine: &PolicyEngine,
        cache: &ComponentCache,
        source: &PolicySource,
        options: &LoadOptions,
    ) -> Result<WasmPolicy, LoadError> {
        let origin = source.origin();
        let bytes = source.read()?;
        Self::from_bytes(engine, cache, &origin, &bytes, options)
    }

    /// [`WasmPolicy::load`] from bytes already in memory.
    ///
    /// # Errors
    /// A [`LoadError`] naming `origin` and the cause.
    pub fn from_bytes(
        engine: &PolicyEngine,
        cache: &ComponentCache,
        origin: &str,
        bytes: &[u8],
        options: &LoadOptions,
    ) -> Result<WasmPolicy, LoadError> {
        check_header(origin, bytes)?;
        let sha256 = sha256_hex(bytes);
        if !options.sha256.is_empty()
            && !options
                .sha256
                .iter()
                .any(|allowed| allowed.eq_ignore_ascii_case(&sha256))
        {
            return Err(LoadError::Digest {
                origin: origin.into(),
                found: sha256,
                allowed: options.sha256.join(", "),
            });
        }
        let world = check_world(origin, bytes)?;
        let (interface, interface_version) = (world.interface, world.version);
        let started = Instant::now();
        let (component, cached) =
            cache
                .get_or_compile(engine, &sha256, bytes)
                .map_err(|e| LoadError::Invalid {
                    origin: origin.into(),
                    cause: format!("{e:?}"),
                })?;
        // A component refused from here on (it does not link, its metadata
        // or its smoke call fails, its settings are refused) is not kept
        // in the cache when this load compiled it.
        let loaded = (|| -> Result<WasmPolicy, LoadError> {
            let compile_ms = started.elapsed().as_secs_f64() * 1e3;

            let mut linker = wasmtime::component::Linker::new(engine.engine());
            let linked = match interface {
                Interface::V0_1 => v0_1::SchedulingPolicy::add_to_linker::<
                    HostState,
                    HasSelf<HostState>,
                >(&mut linker, |s| s),
                Interface::V0_2 => v0_2::SchedulingPolicy::add_to_linker::<
                    HostState,
                    HasSelf<HostState>,
                >(&mut linker, |s| s),
                Interface::V0_3 => v0_3::SchedulingPolicy::add_to_linker::<
                    HostState,
                    HasSelf<HostState>,
                >(&mut linker, |s| s),
                Interface::V0_4 => v0_4::SchedulingPolicy::add_to_linker::<
                    HostState,
                    HasSelf<HostState>,
                >(&mut linker, |s| s),
            };
            let linked = linked.and_then(|()| match world.wasi {
                true => wasi::add_to_linker(&mut linker),
                false => Ok(()),
            });
            linked.map_err(|e| LoadError::Instantiate {
                origin: origin.into(),
                cause: e.to_string(),
            })?;
            let pre = linker
                .instantiate_pre(&component)
                .and_then(|pre| {
                    Ok(match interface {
                        Interface::V0_1 => Pre::V0_1(v0_1::SchedulingPolicyPre::new(pre)?),
                        Interface::V0_2 => Pre::V0_2(v0_2::SchedulingPolicyPre::new(pre)?),
                        Interface::V0_3 => Pre::V0_3(v0_3::SchedulingPolicyPre::new(pre)?),
                        Interface::V0_4 => Pre::V0_4(v0_4::SchedulingPolicyPre::new(pre)?),
                    })
                })
                .map_err(|e| LoadError::Instantiate {
                    origin: origin.into(),
                    cause: format!("{e:?}"),
                })?;

            let mut policy = WasmPolicy {
                info: PolicyInfo {
                    name: "(loading)".into(),
                    version: String::new(),
                    interface_version,
                    hooks: Vec::new(),
                    origin: origin.into(),
                    sha256: sha256.clone(),
                    size_bytes: bytes.len(),
                    compile_ms,
                    cached,
                    settings: options.settings.clone(),
                },
                engine: engine.clone(),
                pre,
                limits: options.limits,
                live: Mutex::new(None),
                log_budget: Arc::default(),
                guest: wasi::Guest::default(),
            };
            let smoke = |cause| LoadError::Smoke {
                origin: origin.into(),
                cause,
            };
            let metadata = policy
                .call(HookName::Metadata, |live| match &live.bindings {
                    Bindings::V0_1(b) => b.dragon_scheduler_policy().call_metadata(&mut live.store),
                    Bindings::V0_2(b) => b
                        .dragon_scheduler_policy()
                        .call_metadata(&mut live.store)
                        .map(adapt::v2::info),
                    Bindings::V0_3(b) => b
                        .dragon_scheduler_policy()
                        .call_metadata(&mut live.store)
                        .map(adapt::v3::info),
                    Bindings::V0_4(b) => b
                        .dragon_scheduler_policy()
                        .call_metadata(&mut live.store)
                        .map(adapt::v4::info),
                })
                .map_err(smoke)?;
            let (name, version, hooks) = checked_metadata(origin, metadata)?;
            policy.info.name = name;
            policy.info.version = version;
            policy.info.hooks = hooks;
            // The first real call instantiates and configures; surface a refusal
            // of the settings as such rather than as a failed hook.
            policy.reset();
            let mut live = policy.instantiate().map_err(smoke)?;
            let settings = options.settings.clone();
            let configured = policy.run(&mut live, HookName::Configure, |live| {
                live.configure(&settings)
            });
            match configured {
                Ok(Ok(())) => {}
                Ok(Err(message)) => {
                    return Err(LoadError::Settings {
                        origin: origin.into(),
                        policy: policy.info.name.clone(),
                        message: bounds::policy_text(message),
                    });
                }
                Err(e) => return Err(smoke(e)),
            }
            *policy.live.lock().unwrap_or_else(|p| p.into_inner()) = Some(live);
            // Smoke: the cheapest hook on empty input must answer sensibly.
            let order = policy
                .queue_order(0, &[], &super::FixedView::empty())
                .map_err(smoke)?;
            if !order.is_empty() {
                return Err(smoke(policy.invalid(
                    HookName::QueueOrder,
                    format!("{} indices for an empty queue", order.len()),
                )));
            }
            Ok(policy)
        })();
        if loaded.is_err() && !cached {
            cache.forget(engine, &sha256);
        }
        loaded
    }

    /// What is known about this policy.
    pub fn info(&self) -> &PolicyInfo {
        &self.info
    }

    /// One line for the log lines dropped since the last report, if any.
    fn report_dropped_lines(&self, dropped: u64) {
        if dropped > 0 {
            tracing::warn!(
                policy = %self.info.name,
                dropped,
                "log lines dropped (at most {} per call and {} per round)",
                bounds::MAX_LOG_LINES_PER_CALL,
                bounds::MAX_LOG_LINES_PER_ROUND
            );
        }
    }

    /// The same compiled and configured policy with an instance of its own
    /// (made and configured on its first call): for work beside the live
    /// one, such as checking a candidate against it or a shadow run, that
    /// must neither wait for nor disturb the live instance.
    pub fn twin(&self) -> WasmPolicy {
        WasmPolicy {
            info: self.info.clone(),
            engine: self.engine.clone(),
            pre: self.pre.clone(),
            limits: self.limits,
            live: Mutex::new(None),
            log_budget: Arc::default(),
            guest: wasi::Guest::default(),
        }
    }

    /// The live instance's linear memory, bytes (`None` without one).
    pub fn memory_bytes(&self) -> Option<usize> {
        let guard = self.live.lock().unwrap_or_else(|p| p.into_inner());
        guard.as_ref().map(|l| l.store.data().limiter.memory_size)
    }

    /// Drop the live instance: the next call instantiates and configures a
    /// fresh one (what happens after a failed call; benchmarks use it to
    /// price instantiation).
    pub fn reset(&self) {
        *self.live.lock().unwrap_or_else(|p| p.into_inner()) = None;
    }

    pub(crate) fn invalid(&self, hook: HookName, msg: String) -> CallError {
        CallError {
            policy: self.info.name.clone(),
            hook,
            failure: Failure::InvalidOutput(msg),
        }
    }

    fn new_store(&self) -> Store<HostState> {
        let state = HostState {
            limiter: Limiter {
                memory_bytes: self.limits.memory_bytes,
                table_elements: self.limits.table_elements,
                memory_cap_hit: false,
                memory_size: 0,
            },
            policy: self.info.name.clone(),
            log_budget: self.log_budget.clone(),
            call_lines: 0,
            last_error: None,
            sandbox: self.guest.sandbox(),
        };
        let mut store = Store::new(self.engine.engine(), state);
        store.limiter(|s| &mut s.limiter);
        store
    }

    fn instantiate(&self) -> Result<Live, CallError> {
        let mut store = self.new_store();
        store.set_epoch_deadline(self.deadline_ticks());
        let bindings = match &self.pre {
            Pre::V0_1(pre) => pre.instantiate(&mut store).map(Bindings::V0_1),
            Pre::V0_2(pre) => pre.instantiate(&mut store).map(Bindings::V0_2),
            Pre::V0_3(pre) => pre.instantiate(&mut store).map(Bindings::V0_3),
            Pre::V0_4(pre) => pre.instantiate(&mut store).map(Bindings::V0_4),
        }
        .map_err(|e| CallError {
            policy: self.info.name.clone(),
            hook: HookName::Instantiate,
            failure: Failure::Trap(bounds::inert(describe(&e))),
        })?;
        Ok(Live {
            store,
            bindings,
            seen: None,
            queues: None,
        })
    }

    fn deadline_ticks(&self) -> u64 {
        (self.limits.deadline_ms / TICK.as_millis() as u64).max(1) + 1
    }

    /// Run one call on `live` under the limits, classifying any failure.
    fn run<R>(
        &self,
        live: &mut Live,
        hook: HookName,
        f: impl FnOnce(&mut Live) -> wasmtime::Result<R>,
    ) -> Result<R, CallError> {
        live.store.set_epoch_deadline(self.deadline_ticks());
        let data = live.store.data_mut();
        data.limiter.memory_cap_hit = false;
        data.last_error = None;
        self.guest.output.clear();
        data.call_lines = 0;
        f(live).map_err(|e| {
            let data = live.store.data();
            let failure = if data.limiter.memory_cap_hit {
                Failure::MemoryLimit {
                    bytes: self.limits.memory_bytes,
                }
            } else if matches!(e.downcast_ref::<Trap>(), Some(Trap::Interrupt)) {
                Failure::Timeout {
                    deadline_ms: self.limits.deadline_ms,
                }
            } else {
                // A trap's text names the guest's own functions and repeats
                // what it logged or wrote: all of it is the guest's, so data.
                let mut msg = describe(&e);
                if let Some(said) = &data.last_error {
                    msg.push_str(&format!(" (policy logged: {said})"));
                } else if let Some(wrote) = self.guest.output.last_line() {
                    let wrote = bounds::cut(wrote, bounds::MAX_LOG_LINE);
                    msg.push_str(&format!(" (policy wrote: {wrote})"));
                }
                Failure::Trap(bounds::inert(msg))
            };
            CallError {
                policy: self.info.name.clone(),
                hook,
                failure,
            }
        })
    }

    /// Call a hook on the live instance (creating and configuring one first
    /// if needed). A failure discards the instance.
    fn call<R>(
        &self,
        hook: HookName,
        f: impl FnOnce(&mut Live) -> wasmtime::Result<R>,
    ) -> Result<R, CallError> {
        let mut guard = self.live.lock().unwrap_or_else(|p| p.into_inner());
        if guard.is_none() {
            let mut live = self.instantiate()?;
            if hook != HookName::Metadata {
                let settings = self.info.settings.clone();
                let configured = self.run(&mut live, HookName::Configure, |live| {
                    live.configure(&settings)
                })?;
                configured.map_err(|msg| {
                    self.invalid(
                        HookName::Configure,
                        format!(
                            "settings refused on re-instantiation: {}",
                            bounds::policy_text(msg)
                        ),
                    )
                })?;
            }
            *guard = Some(live);
        }
        let Some(live) = guard.as_mut() else {
            unreachable!("instance installed above");
        };
        let result = self.run(live, hook, f);
        if result.is_err() {
            *guard = None;
        }
        result
    }
}

impl Drop for WasmPolicy {
    fn drop(&mut self) {
        self.report_dropped_lines(self.log_budget.take_dropped());
    }
}

impl Hooks for WasmPolicy {
    fn info(&self) -> &PolicyInfo {
        &self.info
    }

    fn begin_round(&self) {
        self.report_dropped_lines(self.log_budget.new_round());
    }

    fn queue_order(
        &self,
        now_ms: u64,
        units: &[wit::Queued],
        view: &dyn ClusterView,
    ) -> Result<Vec<u32>, CallError> {
        self.guest.clock.set(now_ms);
        self.call(HookName::QueueOrder, |live| match &live.bindings {
            Bindings::V0_1(b) => {
                b.dragon_scheduler_policy()
                    .call_queue_order(&mut live.store, now_ms, units)
            }
            Bindings::V0_2(b) => b.dragon_scheduler_policy().call_queue_order(
                &mut live.store,
                now_ms,
                &adapt::v2::queued(units, view, now_ms),
            ),
            Bindings::V0_3(_) => {
                let units = adapt::v3::queued(units, view, now_ms);
                live.with_changes_v3(view, true, |s, b, changes| {
                    b.dragon_scheduler_policy()
                        .call_queue_order(s, changes, now_ms, &units)
                })
            }
            Bindings::V0_4(_) => {
                let units = adapt::v4::queued(units, view, now_ms);
                live.with_changes_v4(view, true, |s, b, changes| {
                    b.dragon_scheduler_policy()
                        .call_queue_order(s, changes, now_ms, &units)
                })
            }
        })
    }

    fn pre_filter(
        &self,
        now_ms: u64,
        unit: &wit::Unit,
        nodes: &wit::Capacity,
        view: &dyn ClusterView,
    ) -> Result<wit::PreFilterResult, CallError> {
        self.guest.clock.set(now_ms);
        self.call(HookName::PreFilter, |live| match &live.bindings {
            Bindings::V0_1(b) => {
                b.dragon_scheduler_policy()
                    .call_pre_filter(&mut live.store, now_ms, unit, nodes)
            }
            Bindings::V0_2(_) => {
                let unit = adapt::v2::unit(unit, view, now_ms);
                live.with_changes(view, |s, b, changes| {
                    b.dragon_scheduler_policy()
                        .call_pre_filter(s, changes, now_ms, &unit)
                        .map(adapt::v2::pre_filter_result)
                })
            }
            Bindings::V0_3(_) => {
                let unit = adapt::v3::unit(unit, view, now_ms);
                live.with_changes_v3(view, true, |s, b, changes| {
                    b.dragon_scheduler_policy()
                        .call_pre_filter(s, changes, now_ms, &unit)
                        .map(adapt::v3::pre_filter_result)
                })
            }
            Bindings::V0_4(_) => {
                let unit = adapt::v4::unit(unit, view, now_ms);
                live.with_changes_v4(view, true, |s, b, changes| {
                    b.dragon_scheduler_policy()
                        .call_pre_filter(s, changes, now_ms, &unit)
                        .map(adapt::v4::pre_filter_result)
                })
            }
        })
    }

    fn filter(
        &self,
        pod: &wit::Placement,
        nodes: &wit::Candidates,
        view: &dyn ClusterView,
    ) -> Result<Vec<bool>, CallError> {
        self.guest.clock.set(pod.now_ms);
        let refused = self.call(HookName::Filter, |live| match &live.bindings {
            Bindings::V0_1(b) => b
                .dragon_scheduler_policy()
                .call_filter(&mut live.store, pod, nodes)
                .map(Ok),
            Bindings::V0_2(_) => {
                let (pod, candidates) = (
                    adapt::v2::placement(pod, view),
                    adapt::v2::candidates(nodes, view),
                );
                live.with_changes(view, |s, b, changes| {
                    b.dragon_scheduler_policy()
                        .call_filter(s, changes, &pod, &candidates)
                        .map(Err)
                })
            }
            Bindings::V0_3(_) => {
                let (pod, candidates) = (
                    adapt::v3::placement(pod, view),
                    adapt::v3::candidates(nodes, view),
                );
                live.with_changes_v3(view, false, |s, b, changes| {
                    b.dragon_scheduler_policy()
                        .call_filter(s, changes, &pod, &candidates)
                        .map(Err)
                })
            }
            Bindings::V0_4(_) => {
                let (pod, candidates) = (
                    adapt::v4::placement(pod, view),
                    adapt::v4::candidates(nodes, view),
                );
                live.with_changes_v4(view, false, |s, b, changes| {
                    b.dragon_scheduler_policy()
                        .call_filter(s, changes, &pod, &candidates)
                        .map(Err)
                })
            }
        })?;
        match refused {
            Ok(verdicts) => Ok(verdicts),
            Err(positions) => adapt::verdicts(&positions, nodes.index.len())
                .map_err(|e| self.invalid(HookName::Filter, e.to_string())),
        }
    }

    fn score(
        &self,
        pod: &wit::Placement,
        nodes: &wit::Candidates,
        view: &dyn ClusterView,
    ) -> Result<Vec<u32>, CallError> {
        self.guest.clock.set(pod.now_ms);
        self.call(HookName::Score, |live| match &live.bindings {
            Bindings::V0_1(b) => {
                b.dragon_scheduler_policy()
                    .call_score(&mut live.store, pod, nodes)
            }
            Bindings::V0_2(_) => {
                let (pod, candidates) = (
                    adapt::v2::placement(pod, view),
                    adapt::v2::candidates(nodes, view),
                );
                live.with_changes(view, |s, b, changes| {
                    b.dragon_scheduler_policy()
                        .call_score(s, changes, &pod, &candidates)
                })
            }
            Bindings::V0_3(_) => {
                let (pod, candidates) = (
                    adapt::v3::placement(pod, view),
                    adapt::v3::candidates(nodes, view),
                );
                live.with_changes_v3(view, false, |s, b, changes| {
                    b.dragon_scheduler_policy()
                        .call_score(s, changes, &pod, &candidates)
                })
            }
            Bindings::V0_4(_) => {
                let (pod, candidates) = (
                    adapt::v4::placement(pod, view),
                    adapt::v4::candidates(nodes, view),
                );
                live.with_changes_v4(view, false, |s, b, changes| {
                    b.dragon_scheduler_policy()
                        .call_score(s, changes, &pod, &candidates)
                })
            }
        })
    }

    fn permit(&self, now_ms: u64, gang: &wit::GangState) -> Result<wit::PermitResult, CallError> {
        self.guest.clock.set(now_ms);
        self.call(HookName::Permit, |live| match &live.bindings {
            Bindings::V0_1(b) => {
                b.dragon_scheduler_policy()
                    .call_permit(&mut live.store, now_ms, *gang)
            }
            Bindings::V0_2(b) => b
                .dragon_scheduler_policy()
                .call_permit(&mut live.store, now_ms, adapt::v2::gang(gang))
                .map(adapt::v2::permit_result),
            Bindings::V0_3(b) => b
                .dragon_scheduler_policy()
                .call_permit(&mut live.store, now_ms, adapt::v3::gang(gang))
                .map(adapt::v3::permit_result),
            Bindings::V0_4(b) => b
                .dragon_scheduler_policy()
                .call_permit(&mut live.store, now_ms, adapt::v4::gang(gang))
                .map(adapt::v4::permit_result),
        })
    }

    fn scale(
        &self,
        input: &wit::ScaleInput,
        view: &dyn ClusterView,
    ) -> Result<Vec<wit::ScaleDecision>, CallError> {
        self.guest.clock.set(input.now_ms);
        self.call(HookName::Scale, |live| match &live.bindings {
            Bindings::V0_1(b) => b
                .dragon_scheduler_policy()
                .call_scale(&mut live.store, input),
            Bindings::V0_2(_) => {
                let input = adapt::v2::scale_input(input, view);
                live.with_changes(view, |s, b, changes| {
                    b.dragon_scheduler_policy()
                        .call_scale(s, changes, &input)
                        .map(adapt::v2::decisions)
                })
            }
            Bindings::V0_3(_) => {
                let input = adapt::v3::scale_input(input, view);
                live.with_changes_v3(view, true, |s, b, changes| {
                    b.dragon_scheduler_policy()
                        .call_scale(s, changes, &input)
                        .map(adapt::v3::decisions)
                })
            }
            Bindings::V0_4(_) => {
                let input = adapt::v4::scale_input(input, view);
                live.with_changes_v4(view, true, |s, b, changes| {
                    b.dragon_scheduler_policy()
                        .call_scale(s, changes, &input)
                        .map(adapt::v4::decisions)
                })
            }
        })
    }
}
