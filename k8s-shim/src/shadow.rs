//! The shadow policy in dragon-scheduler: a thread of its own follows the
//! loop's steps (see [`dragon_framework::shadow`]) and compares what the
//! shadow policy would have decided with what the serving policy did. It
//! never binds, scales or writes to the API server; it counts
//! `dragon_shadow_decisions_total{outcome}` and keeps the last
//! disagreements for `/shadow` and the log. The loop never waits for it:
//! steps go through a bounded queue, and when the queue is full the
//! shadow skips steps until it has caught up, then starts again from a
//! step that rebuilds the cluster (so a shadow slower than the loop
//! compares a sample of steps, and costs the loop one rebuild per queue it
//! works through).

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{SyncSender, TrySendError};
use std::sync::{Arc, Mutex};

use dragon_framework::SchedulerConfig;
use dragon_framework::record::Frame;
use dragon_framework::shadow::Shadow;
use dragon_runtime::{Hooks, PolicySlot, WasmPolicy};

use crate::metrics::{Metrics, ShadowOutcome, ShadowView};

/// Steps queued for the shadow at most.
pub const QUEUE: usize = 256;
/// Disagreements kept for `/shadow`.
pub const KEPT: usize = 100;

/// One step for the shadow.
struct Step {
    frame: Frame,
    rebuild: bool,
    live: Arc<WasmPolicy>,
}

/// The loop's end of the shadow.
pub struct ShadowFeed {
    tx: SyncSender<Step>,
    /// The shadow has no complete view: a step must rebuild it.
    lost: Arc<AtomicBool>,
    /// Steps queued and not yet followed.
    queued: Arc<AtomicUsize>,
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
        let queued = Arc::new(AtomicUsize::new(0));
        let view = metrics.shadow.clone();
        let feed = ShadowFeed {
            tx,
            lost: lost.clone(),
            queued: queued.clone(),
            view: view.clone(),
        };
        std::thread::Builder::new()
            .name("dragon-shadow".into())
            .spawn(move || {
                let mut shadow = Shadow::new(scheduling);
                let mut live: Option<WasmPolicy> = None;
                let fallback = fallback.map(|f| f.twin());
                for step in rx {
                    queued.fetch_sub(1, Ordering::Relaxed);
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
                    metrics.shadowed(ShadowOutcome::Same, c.same);
                    metrics.shadowed(ShadowOutcome::Different, c.different.len() as u64);
                    metrics.shadowed(ShadowOutcome::Error, c.errors.len() as u64);
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

    /// Whether the next step must rebuild the cluster for the shadow: it
    /// lost track, and has followed every step queued before.
    pub fn wants_rebuild(&self) -> bool {
        self.lost.load(Ordering::Relaxed) && self.queued.load(Ordering::Relaxed) == 0
    }

    /// The loop's journal was dropped: the shadow waits for a rebuild.
    pub fn lost_track(&self) {
        self.lost.store(true, Ordering::Relaxed);
    }

    /// Queue a step; a full queue skips it, and every step after it until
    /// one that rebuilds the cluster.
    pub fn send(&self, frame: Frame, rebuild: bool, live: Arc<WasmPolicy>) {
        if self.lost.load(Ordering::Relaxed) && !rebuild {
            self.view.lock().unwrap_or_else(|p| p.into_inner()).skipped += 1;
            return;
        }
        self.queued.fetch_add(1, Ordering::Relaxed);
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
                self.queued.fetch_sub(1, Ordering::Relaxed);
                self.lost.store(true, Ordering::Relaxed);
                self.view.lock().unwrap_or_else(|p| p.into_inner()).skipped += 1;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dragon_framework::Answers;
    use dragon_runtime::{ComponentCache, LoadOptions, PolicyEngine};

    fn baseline(engine: &PolicyEngine) -> WasmPolicy {
        WasmPolicy::from_bytes(
            engine,
            &ComponentCache::disabled(),
            "baseline",
            dragon_bundled::BASELINE,
            &LoadOptions::default(),
        )
        .unwrap()
    }

    #[test]
    fn a_shadow_without_a_complete_view_skips_steps_until_one_rebuilds_the_cluster() {
        let engine = PolicyEngine::new().unwrap();
        let live = Arc::new(baseline(&engine));
        let slot = Arc::new(PolicySlot::new(
            engine.clone(),
            ComponentCache::disabled(),
            baseline(&engine),
        ));
        let metrics = Arc::new(Metrics::new());
        let feed =
            ShadowFeed::spawn(slot, SchedulerConfig::default(), None, metrics.clone()).unwrap();
        let frame = || Frame::round(1, &[], &Answers::default(), &Vec::<u8>::new());
        // At first it has seen nothing: a step that does not rebuild is
        // skipped, and a rebuild is asked for.
        assert!(feed.wants_rebuild());
        feed.send(frame(), false, live.clone());
        assert_eq!(metrics.shadow.lock().unwrap().skipped, 1);
        assert!(feed.wants_rebuild());
        feed.send(frame(), true, live.clone());
        assert!(!feed.wants_rebuild());
        feed.send(frame(), false, live.clone());
        assert_eq!(metrics.shadow.lock().unwrap().skipped, 1);
        // Lost track (a dropped journal): skipped again until a rebuild,
        // which is asked for once the queue is worked through.
        feed.lost_track();
        feed.send(frame(), false, live.clone());
        assert_eq!(metrics.shadow.lock().unwrap().skipped, 2);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while !feed.wants_rebuild() {
            assert!(
                std::time::Instant::now() < deadline,
                "the queue never drained"
            );
            std::thread::yield_now();
        }
    }
}
