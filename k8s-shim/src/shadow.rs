//! The shadow policy in dragon-scheduler: a thread of its own follows the
//! loop's steps (see [`dragon_framework::shadow`]) and compares what the
//! shadow policy would have decided with what the serving policy did. It
//! never binds, scales or writes to the API server; it counts
//! `dragon_shadow_decisions_total{outcome}` and keeps the last
//! disagreements for `/shadow` and the log. The loop never waits for it:
//! steps go through a bounded queue, and when the queue is full the
//! shadow skips ahead to the next step that rebuilds the cluster.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{SyncSender, TrySendError};
use std::sync::{Arc, Mutex};

use dragon_framework::SchedulerConfig;
use dragon_framework::record::Frame;
use dragon_framework::shadow::{Disagreement, Shadow};
use dragon_runtime::{Hooks, PolicySlot, WasmPolicy};
use serde::Serialize;

use crate::metrics::Metrics;

/// Steps queued for the shadow at most.
pub const QUEUE: usize = 256;
/// Disagreements kept for `/shadow`.
pub const KEPT: usize = 100;

/// What `/shadow` shows.
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

/// One step for the shadow.
struct Step {
    frame: Frame,
    rebuild: bool,
    live: Arc<WasmPolicy>,
}

/// The loop's end of the shadow.
pub struct ShadowFeed {
    tx: SyncSender<Step>,
    /// The shadow has no complete view: the next step must rebuild.
    lost: Arc<AtomicBool>,
    view: Arc<Mutex<ShadowView>>,
}

impl ShadowFeed {
    /// Start the shadow's thread: `slot` holds the shadow policy (watched
    /// and reloaded like the serving one); `fallback` as the loop has it.
    ///
    /// # Errors
    /// The thread cannot be started.
    pub fn spawn(
        slot: Arc<PolicySlot>,
        scheduling: SchedulerConfig,
        fallback: Option<Arc<WasmPolicy>>,
        metrics: Arc<Metrics>,
    ) -> std::io::Result<ShadowFeed> {
        let (tx, rx) = std::sync::mpsc::sync_channel::<Step>(QUEUE);
        let lost = Arc::new(AtomicBool::new(true));
        let view = metrics.shadow.clone();
        let feed = ShadowFeed {
            tx,
            lost: lost.clone(),
            view: view.clone(),
        };
        std::thread::Builder::new()
            .name("dragon-shadow".into())
            .spawn(move || {
                let mut shadow = Shadow::new(scheduling);
                let mut live: Option<WasmPolicy> = None;
                let fallback = fallback.map(|f| f.twin());
                for step in rx {
                    if step.rebuild {
                        shadow.reset();
                    }
                    // An instance of its own: the loop never waits for it.
                    if live.as_ref().map(|l| &l.info().sha256) != Some(&step.live.info().sha256)
                        || live.as_ref().map(|l| &l.info().settings)
                            != Some(&step.live.info().settings)
                    {
                        live = Some(step.live.twin());
                    }
                    let Some(live) = live.as_ref() else { continue };
                    let candidate = slot.current();
                    let c = shadow.follow(
                        &step.frame,
                        live,
                        candidate.as_ref(),
                        fallback.as_ref().map(|f| f as &dyn Hooks),
                    );
                    Metrics::add(&metrics.shadow_decisions, "outcome", "same", c.same);
                    Metrics::add(
                        &metrics.shadow_decisions,
                        "outcome",
                        "different",
                        c.different.len() as u64,
                    );
                    Metrics::add(
                        &metrics.shadow_decisions,
                        "outcome",
                        "error",
                        c.errors.len() as u64,
                    );
                    for d in &c.different {
                        tracing::info!(
                            subject = %d.subject,
                            live = %d.live,
                            shadow = %d.shadow,
                            "the shadow policy decided differently"
                        );
                    }
                    for e in &c.errors {
                        tracing::warn!("the shadow policy failed: {e}");
                    }
                    let mut v = view.lock().unwrap_or_else(|p| p.into_inner());
                    v.policy = candidate.info().name.clone();
                    v.same += c.same;
                    v.different += c.different.len() as u64;
                    v.errors += c.errors.len() as u64;
                    v.diverged = shadow.diverged;
                    v.disagreements.extend(c.different);
                    v.last_errors.extend(c.errors);
                    while v.disagreements.len() > KEPT {
                        v.disagreements.pop_front();
                    }
                    while v.last_errors.len() > KEPT {
                        v.last_errors.pop_front();
                    }
                }
            })?;
        Ok(feed)
    }

    /// Whether the next step must rebuild the cluster for the shadow.
    pub fn wants_rebuild(&self) -> bool {
        self.lost.load(Ordering::Relaxed)
    }

    /// The loop's journal was dropped: the shadow waits for a rebuild.
    pub fn lost_track(&self) {
        self.lost.store(true, Ordering::Relaxed);
    }

    /// Queue a step; a full queue skips it, and every step after it until
    /// one that rebuilds the cluster.
    pub fn send(&self, frame: Frame, rebuild: bool, live: Arc<WasmPolicy>) {
        if self.wants_rebuild() && !rebuild {
            return;
        }
        match self.tx.try_send(Step {
            frame,
            rebuild,
            live,
        }) {
            Ok(()) => {
                if rebuild {
                    self.lost.store(false, Ordering::Relaxed);
                }
            }
            Err(TrySendError::Full(_)) | Err(TrySendError::Disconnected(_)) => {
                self.lost.store(true, Ordering::Relaxed);
                self.view.lock().unwrap_or_else(|p| p.into_inner()).skipped += 1;
            }
        }
    }
}
