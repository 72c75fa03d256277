//! Prometheus metrics, and the policy wrapper that times every hook.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use dragon_framework::shadow::Disagreement;
use dragon_runtime::{CallError, Observer, hook_name, wit};
use prometheus_client::encoding::text::encode;
use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue, LabelValueEncoder};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use serde::Serialize;

/// What `/shadow` shows: the shadow policy's totals and last
/// disagreements, kept beside the counters.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ShadowView {
    pub policy: String,
    pub same: u64,
    pub different: u64,
    pub errors: u64,
    /// Steps skipped because the shadow fell behind.
    pub skipped: u64,
    /// Steps where the follower's replay of the serving policy differed
    /// from what it decided (the shadow's snapshot may differ after).
    pub diverged: u64,
    /// The last disagreements, oldest first.
    pub disagreements: VecDeque<Disagreement>,
    /// The last failures of the shadow policy.
    pub last_errors: VecDeque<String>,
}

/// Enums whose variants are a metric label's values, written as
/// Prometheus shows them.
macro_rules! label_values {
    ($(#[$doc:meta])* $name:ident { $($variant:ident => $text:literal),+ $(,)? }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum $name {
            $($variant),+
        }

        impl $name {
            pub fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $text),+
                }
            }
        }

        impl EncodeLabelValue for $name {
            fn encode(&self, encoder: &mut LabelValueEncoder) -> std::fmt::Result {
                std::fmt::Write::write_str(encoder, self.as_str())
            }
        }
    };
}

label_values! {
    /// How a scheduling attempt of a unit ended.
    Attempt {
        Scheduled => "scheduled",
        Unschedulable => "unschedulable",
        Waiting => "waiting",
        Rejected => "rejected",
        Error => "error",
        Fallback => "fallback",
    }
}

label_values! {
    /// How a policy reload ended (`gate_error`: the gate itself failed
    /// on the candidate, which is refused).
    Reload {
        Success => "success",
        Failure => "failure",
        Gated => "gated",
        GateError => "gate_error",
    }
}

label_values! {
    /// The shadow policy's decision against the serving one's.
    ShadowOutcome {
        Same => "same",
        Different => "different",
        Error => "error",
    }
}

label_values! {
    /// Which way a scale action went.
    Direction {
        Up => "up",
        Down => "down",
    }
}

label_values! {
    /// Why the resize limits held a policy's resize back.
    HeldReason {
        TooSoon => "too_soon",
        TooManyRestarts => "too_many_restarts",
    }
}

label_values! {
    /// What became of a preemption victim.
    Victim {
        Evicted => "evicted",
        Refused => "refused",
        Shrunk => "shrunk",
    }
}

/// `{result}` of a scheduling attempt.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct AttemptLabels {
    pub result: Attempt,
}

/// `{hook}` of a policy call, by its WIT name.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct HookLabels {
    pub hook: &'static str,
}

/// `{result}` of a reload.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct ReloadLabels {
    pub result: Reload,
}

/// `{outcome}` of a shadow decision.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct ShadowLabels {
    pub outcome: ShadowOutcome,
}

/// `{reason}` a resize was held back.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct HeldLabels {
    pub reason: HeldReason,
}

/// `{direction}` of a scale action.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct ScaleLabels {
    pub direction: Direction,
}

/// `{queue}`: a queue (team) of the configuration.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct QueueLabels {
    pub queue: String,
}

/// `{result}` of a preemption victim.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct VictimLabels {
    pub result: Victim,
}

/// Everything `/metrics` shows.
pub struct Metrics {
    registry: Registry,
    /// Scheduling attempts per unit by result (`scheduled`, `unschedulable`, `waiting`, `rejected`, `error`, `fallback`).
    pub attempts: Family<AttemptLabels, Counter>,
    /// Policy hook latency by hook.
    pub hook_seconds: Family<HookLabels, Histogram, fn() -> Histogram>,
    /// Policy hook failures by hook.
    pub hook_errors: Family<HookLabels, Counter>,
    /// Time from a gang's creation to its admission.
    pub gang_wait_seconds: Histogram,
    /// Policy reloads (of the serving and the shadow policy) by result
    /// (`success`, `failure`, `gated`).
    pub reloads: Family<ReloadLabels, Counter>,
    /// The shadow policy's decisions compared with the serving one's, per
    /// subject, by outcome (`same`, `different`, `error`).
    pub shadow_decisions: Family<ShadowLabels, Counter>,
    /// The shadow's totals and last disagreements, for `/shadow`.
    pub shadow: Arc<Mutex<ShadowView>>,
    /// The last reloads, oldest first.
    pub reload_log: Mutex<VecDeque<crate::insight::ReloadRecord>>,
    /// Scale actions by direction (`up`, `down`).
    pub scale_actions: Family<ScaleLabels, Counter>,
    /// The policy's resizes the resize limits held back, by reason
    /// (`too_soon`, `too_many_restarts`).
    pub resizes_held: Family<HeldLabels, Counter>,
    /// Preemption victims by outcome (`evicted`, `refused`, `shrunk`).
    pub preemption_victims: Family<VictimLabels, Counter>,
    /// GPUs each queue's gangs hold, ask for (held or not), and are
    /// guaranteed.
    pub queue_used_gpus: Family<QueueLabels, Gauge>,
    pub queue_demand_gpus: Family<QueueLabels, Gauge>,
    pub queue_guaranteed_gpus: Family<QueueLabels, Gauge>,
    /// Each queue's GPUs held over those it was entitled to (what it asked
    /// for, up to its guarantee) over the last hour; no series for a queue
    /// entitled to nothing in that hour.
    pub queue_share: Family<QueueLabels, Gauge<f64, AtomicU64>>,
    /// How long each queue's longest-waiting gang has waited, seconds.
    pub queue_longest_wait_seconds: Family<QueueLabels, Gauge<f64, AtomicU64>>,
    /// Jain's index over the queues' shares of the last hour (NaN with
    /// fewer than two queues entitled to something).
    pub queues_jain_index: Gauge<f64, AtomicU64>,
    /// 1 while this replica leads.
    pub leader: Gauge,
    /// Times the circuit breaker suspended the policy.
    pub policy_suspensions: Counter,
    /// 1 while the policy is suspended.
    pub policy_suspended: Gauge,
    /// Rounds whose time budget ran out before every unit was tried.
    pub rounds_over_budget: Counter,
    /// Writes not sent because this replica no longer held its Lease.
    pub fenced_writes: Counter,
    /// Set once the first full list of the cluster has been applied.
    pub ready: AtomicBool,
    /// The scheduling loop's liveness, for `/healthz`.
    pub health: Health,
}

/// What `/healthz` judges: whether the scheduling loop runs, and since
/// when it has been busy with its current batch of work. Cheap to clone
/// (shared state).
#[derive(Debug, Default, Clone)]
pub struct Health(Arc<HealthState>);

#[derive(Debug, Default)]
struct HealthState {
    /// Unix ms at which the current batch began; 0 while the loop waits.
    busy_since_ms: AtomicU64,
    /// Set while the loop runs; cleared when it returns or panics.
    running: AtomicBool,
}

impl Health {
    /// The loop starts; the guard marks it stopped when dropped (also on
    /// a panic).
    pub fn start(&self) -> RunningGuard {
        self.0.running.store(true, Ordering::Relaxed);
        RunningGuard(self.clone())
    }

    /// The loop begins a batch of work at `now_ms`.
    pub fn busy(&self, now_ms: u64) {
        self.0.busy_since_ms.store(now_ms.max(1), Ordering::Relaxed);
    }

    /// The loop waits for work again.
    pub fn idle(&self) {
        self.0.busy_since_ms.store(0, Ordering::Relaxed);
    }

    /// `Err(why)` when the loop has stopped or has been busy for longer
    /// than `stuck_after_ms` at `now_ms`.
    pub fn check(&self, now_ms: u64, stuck_after_ms: u64) -> Result<(), Unhealthy> {
        if !self.0.running.load(Ordering::Relaxed) {
            return Err(Unhealthy::Stopped);
        }
        let since = self.0.busy_since_ms.load(Ordering::Relaxed);
        let busy = now_ms.saturating_sub(since);
        if since != 0 && busy > stuck_after_ms {
            return Err(Unhealthy::Stuck {
                busy_s: busy / 1000,
                limit_s: stuck_after_ms / 1000,
            });
        }
        Ok(())
    }
}

/// Why the scheduling loop is not healthy.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unhealthy {
    #[error("the scheduling loop has stopped")]
    Stopped,
    #[error(
        "the scheduling loop has been busy with one batch of work for {busy_s} s (limit {limit_s} s)"
    )]
    Stuck { busy_s: u64, limit_s: u64 },
}

/// Marks [`Health`] stopped when dropped.
pub struct RunningGuard(Health);

impl Drop for RunningGuard {
    fn drop(&mut self) {
        self.0.0.running.store(false, Ordering::Relaxed);
        self.0.idle();
    }
}

fn hook_histogram() -> Histogram {
    Histogram::new(exponential_buckets(1e-6, 4.0, 12))
}

impl Metrics {
    /// Registered metrics, all zero.
    pub fn new() -> Metrics {
        let mut registry = Registry::with_prefix("dragon");
        let attempts = Family::default();
        let hook_seconds = Family::<HookLabels, Histogram, fn() -> Histogram>::new_with_constructor(
            hook_histogram as fn() -> Histogram,
        );
        let hook_errors = Family::default();
        let gang_wait_seconds = Histogram::new(exponential_buckets(0.01, 3.0, 12));
        let reloads = Family::default();
        let shadow_decisions = Family::default();
        let scale_actions = Family::default();
        let resizes_held = Family::default();
        let preemption_victims = Family::default();
        let leader = Gauge::default();
        let (queue_used_gpus, queue_demand_gpus, queue_guaranteed_gpus) =
            (Family::default(), Family::default(), Family::default());
        let (queue_share, queue_longest_wait_seconds) = (Family::default(), Family::default());
        let queues_jain_index = Gauge::<f64, AtomicU64>::default();
        let policy_suspensions = Counter::default();
        let policy_suspended = Gauge::default();
        let rounds_over_budget = Counter::default();
        let fenced_writes = Counter::default();
        registry.register(
            "policy_suspensions",
            "Times the policy was suspended after consecutive failures",
            policy_suspensions.clone(),
        );
        registry.register(
            "policy_suspended",
            "1 while the policy is suspended by the circuit breaker",
            policy_suspended.clone(),
        );
        registry.register(
            "rounds_over_budget",
            "Scheduling rounds whose time budget ran out with units left untried",
            rounds_over_budget.clone(),
        );
        registry.register(
            "fenced_writes",
            "Writes not sent because this replica no longer held its Lease",
            fenced_writes.clone(),
        );
        registry.register(
            "scheduling_attempts",
            "Scheduling attempts of pods and gangs, by result",
            attempts.clone(),
        );
        registry.register(
            "policy_hook_duration_seconds",
            "Latency of calls into the policy, by hook",
            hook_seconds.clone(),
        );
        registry.register(
            "policy_hook_errors",
            "Failed calls into the policy, by hook",
            hook_errors.clone(),
        );
        registry.register(
            "gang_wait_duration_seconds",
            "Time from a gang's creation to its admission",
            gang_wait_seconds.clone(),
        );
        registry.register(
            "policy_reloads",
            "Policy reloads, by result",
            reloads.clone(),
        );
        registry.register(
            "shadow_decisions",
            "The shadow policy's decisions compared with the serving policy's, per subject, by outcome",
            shadow_decisions.clone(),
        );
        registry.register(
            "scale_actions",
            "Scale changes applied, by direction",
            scale_actions.clone(),
        );
        registry.register(
            "resizes_held",
            "The policy's resizes held back by the resize limits, by reason",
            resizes_held.clone(),
        );
        registry.register(
            "preemption_victims",
            "Units evicted or shrunk to make room for higher-priority ones, by outcome",
            preemption_victims.clone(),
        );
        registry.register(
            "queue_used_gpus",
            "GPUs held by each queue's gangs (bound or reserved)",
            queue_used_gpus.clone(),
        );
        registry.register(
            "queue_demand_gpus",
            "GPUs each queue's gangs ask for at their requested sizes, held or not",
            queue_demand_gpus.clone(),
        );
        registry.register(
            "queue_guaranteed_gpus",
            "GPUs each queue is guaranteed",
            queue_guaranteed_gpus.clone(),
        );
        registry.register(
            "queue_share_of_entitlement",
            "GPUs each queue held over those it was entitled to (asked, up to its guarantee) over the last hour",
            queue_share.clone(),
        );
        registry.register(
            "queue_longest_wait_seconds",
            "How long each queue's longest-waiting gang has waited",
            queue_longest_wait_seconds.clone(),
        );
        registry.register(
            "queues_jain_index",
            "Jain's fairness index over the queues' shares of entitlement in the last hour",
            queues_jain_index.clone(),
        );
        registry.register(
            "is_leader",
            "1 while this replica holds the lease",
            leader.clone(),
        );
        Metrics {
            registry,
            attempts,
            hook_seconds,
            hook_errors,
            gang_wait_seconds,
            reloads,
            shadow_decisions,
            shadow: Arc::default(),
            reload_log: Mutex::default(),
            scale_actions,
            resizes_held,
            preemption_victims,
            queue_used_gpus,
            queue_demand_gpus,
            queue_guaranteed_gpus,
            queue_share,
            queue_longest_wait_seconds,
            queues_jain_index,
            leader,
            policy_suspensions,
            policy_suspended,
            rounds_over_budget,
            fenced_writes,
            ready: AtomicBool::new(false),
            health: Health::default(),
        }
    }

    /// Each queue's figures as they stand.
    pub fn queues(&self, rows: &[dragon_runtime::QueueRow]) {
        for q in rows {
            let labels = QueueLabels {
                queue: q.name.clone(),
            };
            self.queue_used_gpus
                .get_or_create(&labels)
                .set(i64::from(q.used_gpus));
            self.queue_demand_gpus
                .get_or_create(&labels)
                .set(i64::from(q.demand_gpus));
            self.queue_guaranteed_gpus
                .get_or_create(&labels)
                .set(i64::from(q.guaranteed_gpus));
        }
    }

    /// Each queue's share of its entitlement over the last hour and its
    /// longest wait now (`names`, `shares`, `waits_s` and `leaves` in one
    /// order), and Jain's index over the shares of the queues without
    /// children.
    pub fn queue_fairness(
        &self,
        names: &[&str],
        shares: &[Option<f64>],
        waits_s: &[f64],
        leaves: &[bool],
    ) {
        for ((name, share), wait) in names.iter().zip(shares).zip(waits_s) {
            let labels = QueueLabels {
                queue: name.to_string(),
            };
            match share {
                Some(x) => {
                    self.queue_share.get_or_create(&labels).set(*x);
                }
                None => {
                    self.queue_share.remove(&labels);
                }
            }
            self.queue_longest_wait_seconds
                .get_or_create(&labels)
                .set(*wait);
        }
        let x: Vec<f64> = shares
            .iter()
            .zip(leaves)
            .filter(|(_, leaf)| **leaf)
            .filter_map(|(s, _)| *s)
            .collect();
        let jain = dragon_framework::share::jain(&x).unwrap_or(f64::NAN);
        self.queues_jain_index.set(jain);
    }

    /// Count one attempt of a unit that ended as `result`.
    pub fn attempt(&self, result: Attempt) {
        self.attempts.get_or_create(&AttemptLabels { result }).inc();
    }

    /// Count one reload that ended as `result`.
    pub fn reload(&self, result: Reload) {
        self.reloads.get_or_create(&ReloadLabels { result }).inc();
    }

    /// Count one reload and keep it, with what was said about it, among
    /// the last few (`kubectl dragon policy`).
    pub fn reload_noted(&self, result: Reload, detail: String) {
        self.reload(result);
        let mut log = self.reload_log.lock().unwrap_or_else(|p| p.into_inner());
        if log.len() == crate::insight::MAX_RELOADS_KEPT {
            log.pop_front();
        }
        log.push_back(crate::insight::ReloadRecord {
            at_ms: crate::clock::now_ms(),
            result: result.as_str().to_string(),
            detail,
        });
    }

    /// Count `n` shadow decisions with `outcome`.
    pub fn shadowed(&self, outcome: ShadowOutcome, n: u64) {
        self.shadow_decisions
            .get_or_create(&ShadowLabels { outcome })
            .inc_by(n);
    }

    /// Count one scale action in `direction`.
    pub fn scale_action(&self, direction: Direction) {
        self.scale_actions
            .get_or_create(&ScaleLabels { direction })
            .inc();
    }

    /// Count one resize the limits held back.
    pub fn resize_held(&self, why: &dragon_framework::Held) {
        let reason = match why {
            dragon_framework::Held::TooSoon { .. } => HeldReason::TooSoon,
            dragon_framework::Held::TooManyRestarts { .. } => HeldReason::TooManyRestarts,
        };
        self.resizes_held
            .get_or_create(&HeldLabels { reason })
            .inc();
    }

    /// Count one preemption victim that ended as `result`.
    pub fn victim(&self, result: Victim) {
        self.preemption_victims
            .get_or_create(&VictimLabels { result })
            .inc();
    }

    /// The Prometheus text exposition.
    pub fn render(&self) -> String {
        let mut out = String::new();
        if encode(&mut out, &self.registry).is_err() {
            out.clear();
        }
        out
    }

    /// Whether `/readyz` should say yes.
    pub fn is_ready(&self) -> bool {
        self.ready.load(Ordering::Relaxed)
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

/// Times each hook call and counts its failures, by hook.
pub struct HookMetrics<'a>(pub &'a Metrics);

impl Observer for HookMetrics<'_> {
    fn call<R>(
        &self,
        hook: wit::Hook,
        call: impl FnOnce() -> Result<R, CallError>,
    ) -> Result<R, CallError> {
        let started = Instant::now();
        let r = call();
        let labels = HookLabels {
            hook: hook_name(hook),
        };
        self.0
            .hook_seconds
            .get_or_create(&labels)
            .observe(started.elapsed().as_secs_f64());
        if r.is_err() {
            self.0.hook_errors.get_or_create(&labels).inc();
        }
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn health_fails_when_the_loop_is_busy_too_long_or_has_stopped() {
        let h = Health::default();
        assert!(h.check(0, 1_000).is_err(), "not started yet");
        let guard = h.start();
        assert_eq!(h.check(5_000, 1_000), Ok(()), "waiting for work");
        h.busy(5_000);
        assert_eq!(h.check(6_000, 1_000), Ok(()));
        let err = h.check(7_500, 1_000).unwrap_err().to_string();
        assert!(err.contains("busy with one batch of work for 2 s"), "{err}");
        h.idle();
        assert_eq!(h.check(60_000, 1_000), Ok(()));
        drop(guard);
        assert_eq!(h.check(60_000, 1_000), Err(Unhealthy::Stopped));
    }

    #[test]
    fn a_panicking_loop_marks_health_stopped() {
        let m = std::sync::Arc::new(Metrics::new());
        let m2 = m.clone();
        let _ = std::thread::spawn(move || {
            let _running = m2.health.start();
            m2.health.busy(1);
            panic!("a bug in a round");
        })
        .join();
        assert_eq!(m.health.check(2, 1_000), Err(Unhealthy::Stopped));
    }

    #[test]
    fn metrics_render_in_prometheus_text_format() {
        let m = Metrics::new();
        m.attempt(Attempt::Scheduled);
        m.reload(Reload::Failure);
        m.hook_seconds
            .get_or_create(&HookLabels { hook: "score" })
            .observe(0.000_05);
        let text = m.render();
        assert!(
            text.contains("dragon_scheduling_attempts_total{result=\"scheduled\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("dragon_policy_reloads_total{result=\"failure\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("# TYPE dragon_policy_hook_duration_seconds histogram"),
            "{text}"
        );
        assert!(
            text.contains("dragon_policy_hook_duration_seconds_count{hook=\"score\"} 1"),
            "{text}"
        );
    }
}
