//! What watches the scheduling loop's steps: the flight recorder and the
//! shadow policy. Both take the same frames (the cluster changes before a
//! step, the server's answers, the decisions); a frame whose changes
//! rebuild the cluster from nothing starts a new recording file and
//! resets the shadow. The loop asks for the changes before a step and
//! hands the frame over after it.

use std::sync::Arc;

use dragon_framework::record::Frame;
use dragon_framework::{ClusterOp, Scheduler};
use dragon_runtime::WasmPolicy;

use crate::flight::FlightRecorder;
use crate::shadow::ShadowFeed;

/// Most cluster changes kept between two steps: past this (a busy cluster
/// with nothing to schedule for a long time) the journal is dropped and
/// the next step rebuilds the cluster instead.
pub const MAX_JOURNAL: usize = 100_000;

/// The loop's watchers; with neither, no journal is kept and no frame made.
#[derive(Default)]
pub struct Taps {
    pub recorder: Option<FlightRecorder>,
    pub shadow: Option<ShadowFeed>,
}

/// The changes before a step, taken by [`Taps::begin`].
pub struct Begun {
    pub ops: Vec<ClusterOp>,
    /// The changes rebuild the cluster from nothing.
    rebuild: bool,
}

impl Taps {
    /// Whether anything watches (the cluster must keep its journal).
    pub fn active(&self) -> bool {
        self.recorder.is_some() || self.shadow.is_some()
    }

    /// The cluster changes to go with the step about to run under `live`.
    pub fn begin(&mut self, sched: &mut Scheduler, live: &WasmPolicy) -> Option<Begun> {
        if !self.active() {
            return None;
        }
        let ops = sched.take_journal();
        let file = self.recorder.as_ref().is_some_and(|r| r.due(live.info()));
        let shadow = self.shadow.as_ref().is_some_and(ShadowFeed::wants_rebuild);
        if !(file || shadow) {
            return Some(Begun {
                ops,
                rebuild: false,
            });
        }
        if let Some(r) = self.recorder.as_mut() {
            r.rotate(live.info());
        }
        Some(Begun {
            ops: sched.cluster().as_ops(),
            rebuild: true,
        })
    }

    /// Hand over the step's frame, made from `begun`'s changes.
    pub fn end(
        &mut self,
        begun: Begun,
        frame: impl FnOnce(&[ClusterOp]) -> Frame,
        live: &Arc<WasmPolicy>,
    ) {
        let frame = frame(&begun.ops);
        if let Some(r) = self.recorder.as_mut() {
            r.write(&frame);
        }
        if let Some(s) = &self.shadow {
            s.send(frame, begun.rebuild, live.clone());
        }
    }

    /// Between steps: a journal past [`MAX_JOURNAL`] is dropped.
    pub fn between(&mut self, sched: &mut Scheduler) {
        if sched.cluster().journal_len() > MAX_JOURNAL {
            sched.take_journal();
            if let Some(r) = self.recorder.as_mut() {
                r.lost_track();
            }
            if let Some(s) = &self.shadow {
                s.lost_track();
            }
        }
    }
}
