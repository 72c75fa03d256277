//! Which pending units a round tries: kube-scheduler's scheduling queue,
//! reduced to what rounds need.
//!
//! A unit that was found unschedulable waits in the unschedulable pool until
//! a cluster change that could let it fit (room freed, a node added or
//! grown, its own pods or job changed; see [`Changes`]) or until the longest
//! backoff has passed, as kube-scheduler's queueing hints and its periodic
//! flush do (a driver that sees every change may have that flush counted
//! rather than run: [`Flush::Count`]). A woken unit is tried in the next round even inside its
//! backoff, as kube-scheduler pops the backoff queue when nothing else is
//! active: that is what lets a gang start the moment the job blocking it
//! ends. A unit whose attempt failed for another reason (the policy failed,
//! a bind failed) waits out its backoff alone; no cluster change helps it.

use std::collections::{BTreeSet, HashMap};

use rustc_hash::FxBuildHasher;

use crate::model::Resources;

/// Cluster changes since the last round that may let a waiting unit fit.
/// The cluster records them as drivers change it; a round consumes them.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Changes {
    /// Room may have appeared on some node: a pod left it, a node was added,
    /// grew, lost a taint, was uncordoned or relabelled, a placed pod's
    /// labels changed. Wakes every waiting unit.
    pub(crate) room: bool,
    /// A pod now holds a node: it can satisfy another pod's required pod
    /// affinity or even a topology spread. Wakes units with such terms.
    pub(crate) placed: bool,
    /// Units whose own pods or job changed (a member added or removed, a
    /// gate lifted, the job resized), by unit id: a job's, or a pod's when
    /// it is scheduled on its own.
    pub(crate) units: BTreeSet<u64>,
    /// The policy's scale step ran: what it knows of running jobs moved on,
    /// so its answers may too. Wakes every waiting unit; recorded only
    /// where flushes are counted rather than run.
    pub(crate) policy: bool,
}

impl Changes {
    pub(crate) fn is_empty(&self) -> bool {
        *self == Changes::default()
    }
}

/// Why a unit's attempt did not bind it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Setback {
    /// No node fits it now, or permit rejected it: wait for a change.
    Unschedulable,
    /// Not tried: its pods are gated or not all present. Waits for a change
    /// to them, without counting as an attempt.
    Gated,
    /// The policy or a bind failed: wait out the backoff.
    Error,
}

#[derive(Debug, Clone, Copy)]
struct Entry {
    attempts: u32,
    /// When the unit may be tried again with no change: the end of its
    /// backoff, or for a parked unit the end of the longest backoff
    /// (never, when its flushes are counted rather than run).
    retry_ms: u64,
    /// When it was put back: its position among units of equal priority,
    /// as kube-scheduler orders by the time a pod was re-added.
    since_ms: u64,
    /// In the unschedulable pool: a relevant change wakes it early.
    parked: bool,
    /// Parked after it was found unschedulable, with its flushes counted
    /// every this many ms rather than run (see [`Flush::Count`]).
    counted_every_ms: Option<u64>,
    /// Its pods carry required pod affinity or a topology spread, so a pod
    /// placed anywhere may help it.
    wants_placed: bool,
    /// Found unschedulable, and woken since by nothing of its own: what
    /// it needs before an attempt can place anything (see [`Wake::Fits`]).
    need: Option<Need>,
    /// Its retry time is among the queue's timers.
    timer: bool,
}

impl Entry {
    /// The flushes counted rather than run strictly before `now_ms`: each
    /// would have tried the unit at `since_ms` plus a multiple of the
    /// period and found it unschedulable again.
    fn counted(&self, now_ms: u64) -> u64 {
        match self.counted_every_ms {
            Some(every) if self.parked && every > 0 && now_ms > self.since_ms => {
                (now_ms - self.since_ms - 1) / every
            }
            _ => 0,
        }
    }

    /// Its place in line at `now_ms`.
    fn since_ms(&self, now_ms: u64) -> u64 {
        let every = self.counted_every_ms.unwrap_or(0);
        self.since_ms
            .saturating_add(self.counted(now_ms).saturating_mul(every))
    }

    /// Book the flushes counted before `now_ms` as the attempts they stand
    /// for.
    fn book_counted(&mut self, now_ms: u64) {
        let counted = self.counted(now_ms);
        self.since_ms = self.since_ms(now_ms);
        self.attempts = self
            .attempts
            .saturating_add(u32::try_from(counted).unwrap_or(u32::MAX));
    }

    /// An attempt at `now_ms` did not place it: it goes to the back of its
    /// priority and counts one more attempt.
    fn book_attempt(&mut self, now_ms: u64) {
        self.attempts = self.attempts.saturating_add(1);
        self.since_ms = now_ms;
    }
}

/// What a unit found unschedulable needs before an attempt can place it:
/// room for as many pods as the fewest it can start with, unless it may
/// preempt. Kept for units whose drivers [wake](Wake::Fits) them only
/// then.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Need {
    /// The least of each resource any of its pods asks for.
    pub(crate) request: Resources,
    /// The fewest pods an attempt at it places.
    pub(crate) pods: u32,
    /// Its priority: what it could preempt.
    pub(crate) priority: i32,
}

/// Which changes wake a parked unit that was found unschedulable.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Wake {
    /// Any that may help (room freed anywhere, the policy's scale step),
    /// as kube-scheduler requeues every unschedulable pod when an assigned
    /// pod is deleted; the attempt then finds whether it fits.
    #[default]
    Any,
    /// Only those after which the nodes have room for as many of its
    /// smallest pod as it needs to start, or it may preempt: otherwise the
    /// attempt it would get is counted as made and failed, with no call to
    /// the policy and its last reason kept. In a round, a unit found
    /// unschedulable before is not tried either while the room left cannot
    /// hold that many. For drivers whose rounds follow every change (the
    /// simulator): a round then costs the units that could fit, not the
    /// queue's length.
    Fits,
}

/// How a parked unit's flush after the longest backoff happens.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Flush {
    /// It is tried again, as kube-scheduler flushes its unschedulable
    /// pool: a watch may miss a change, and a policy's answers may move
    /// with time.
    #[default]
    Run,
    /// It is not tried: its place in line and its attempts move as if it
    /// had been tried and found unschedulable again, and it waits for a
    /// change that could let it fit. For drivers that see every change
    /// (the simulator): a round then costs what changed, not the queue's
    /// length.
    Count,
}

/// How long a unit waits after an attempt that did not bind it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Waits {
    /// The first backoff after a failure; it doubles with each one.
    pub(crate) initial_ms: u64,
    /// The longest backoff, and the period of a parked unit's flush.
    pub(crate) max_ms: u64,
    pub(crate) flush: Flush,
}

/// Units that failed an attempt and are not to be tried in every round, by
/// unit id (a job's, or a lone pod's: see [`Changes::units`]). A unit not
/// here is tried at once.
///
/// Hashed, because a round asks for every pending unit whether it is ready;
/// nothing depends on the order of the entries (each is woken, kept or
/// forgotten on its own, and the next retry is a minimum).
#[derive(Debug, Clone, Default)]
pub(crate) struct Queue {
    entries: HashMap<u64, Entry, FxBuildHasher>,
    /// `(retry_ms, id)` of every entry whose retry time was in the future
    /// when it was set, and is not never: the next one after a time is
    /// found without a pass over the entries. (A unit woken, or ready at
    /// once, has none: the queue's clock only moves on, so it is never
    /// the next retry.)
    timers: BTreeSet<(u64, u64)>,
}

/// Move `id`'s retry time, set at `now_ms`, to `retry_ms`, and its timer
/// with it.
fn set_retry(
    timers: &mut BTreeSet<(u64, u64)>,
    (id, e): (u64, &mut Entry),
    retry_ms: u64,
    now_ms: u64,
) {
    if e.timer {
        timers.remove(&(e.retry_ms, id));
    }
    e.retry_ms = retry_ms;
    e.timer = retry_ms > now_ms && retry_ms != u64::MAX;
    if e.timer {
        timers.insert((retry_ms, id));
    }
}

impl Queue {
    /// No unit waits.
    pub(crate) fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Whether `key` may be tried in a round at `now_ms`.
    pub(crate) fn ready(&self, id: u64, now_ms: u64) -> bool {
        self.entries.get(&id).is_none_or(|e| e.retry_ms <= now_ms)
    }

    /// When the unit was last put back (or counted as put back) before
    /// `now_ms`, if it was.
    pub(crate) fn since_ms(&self, id: u64, now_ms: u64) -> Option<u64> {
        self.entries.get(&id).map(|e| e.since_ms(now_ms))
    }

    /// The earliest time after `now_ms` at which a unit becomes ready with
    /// no change.
    pub(crate) fn next_retry_ms(&self, now_ms: u64) -> Option<u64> {
        let after = now_ms.checked_add(1)?;
        self.timers.range((after, 0)..).next().map(|&(t, _)| t)
    }

    /// Forget units that are no longer pending (`pending`: sorted ids, each
    /// once, as the count below needs).
    pub(crate) fn retain(&mut self, pending: &[u64]) {
        // Mostly every entry is still pending: finding that out costs a
        // look-up per pending unit, not a search per entry.
        let kept = pending
            .iter()
            .filter(|id| self.entries.contains_key(id))
            .count();
        if kept == self.entries.len() {
            return;
        }
        let timers = &mut self.timers;
        self.entries.retain(|id, e| {
            let kept = pending.binary_search(id).is_ok();
            if !kept && e.timer {
                timers.remove(&(e.retry_ms, *id));
            }
            kept
        });
    }

    /// The unit made progress (admitted, bound, waiting in permit).
    pub(crate) fn settled(&mut self, id: u64) {
        if let Some(e) = self.entries.remove(&id)
            && e.timer
        {
            self.timers.remove(&(e.retry_ms, id));
        }
    }

    /// The unit's attempt at `now_ms` came to `setback`. Backoffs double
    /// from `initial_ms` with each attempt up to `max_ms`; a parked unit is
    /// flushed back after `max_ms` whatever happens (see [`Flush`]). `need`:
    /// what it needs to fit, kept when it was found unschedulable.
    pub(crate) fn set_back(
        &mut self,
        id: u64,
        setback: Setback,
        (wants_placed, need): (bool, Option<Need>),
        now_ms: u64,
        waits: Waits,
    ) {
        let e = self.entries.entry(id).or_insert(Entry {
            attempts: 0,
            retry_ms: now_ms,
            since_ms: now_ms,
            parked: false,
            counted_every_ms: None,
            wants_placed,
            need: None,
            timer: false,
        });
        e.book_counted(now_ms);
        e.wants_placed = wants_placed;
        e.need = need.filter(|_| setback == Setback::Unschedulable);
        let wait = match setback {
            Setback::Unschedulable | Setback::Gated => {
                // A gated unit's flush neither counts an attempt nor moves
                // it in line: there is nothing to count.
                let counted = waits.flush == Flush::Count && setback == Setback::Unschedulable;
                if setback == Setback::Unschedulable {
                    e.book_attempt(now_ms);
                }
                e.parked = true;
                e.counted_every_ms = counted.then_some(waits.max_ms);
                match waits.flush {
                    Flush::Run => waits.max_ms,
                    Flush::Count => u64::MAX,
                }
            }
            Setback::Error => {
                e.book_attempt(now_ms);
                e.parked = false;
                e.counted_every_ms = None;
                waits
                    .initial_ms
                    .saturating_mul(1u64 << (e.attempts.max(1) - 1).min(32))
                    .min(waits.max_ms)
            }
        };
        set_retry(
            &mut self.timers,
            (id, e),
            now_ms.saturating_add(wait),
            now_ms,
        );
    }

    /// What the unit needs to fit, if it was found unschedulable and
    /// nothing of its own changed since.
    pub(crate) fn need(&self, id: u64) -> Option<Need> {
        self.entries.get(&id).and_then(|e| e.need)
    }

    /// Wake the parked units `changes` may help: they are ready at
    /// `now_ms`. A unit that was found unschedulable and that `hopeless`
    /// says still cannot be placed (changes elsewhere only) stays parked,
    /// its attempt counted as made and failed at `now_ms` (see
    /// [`Wake::Fits`]).
    pub(crate) fn wake(
        &mut self,
        changes: &Changes,
        now_ms: u64,
        waits: Waits,
        mut hopeless: impl FnMut(&Need) -> bool,
    ) {
        if changes.is_empty() {
            return;
        }
        let timers = &mut self.timers;
        for (&id, e) in &mut self.entries {
            if !e.parked || e.retry_ms <= now_ms {
                continue;
            }
            let own = changes.units.contains(&id);
            let concerned =
                own || changes.room || changes.policy || (changes.placed && e.wants_placed);
            if !concerned {
                continue;
            }
            e.book_counted(now_ms);
            if own {
                e.need = None;
            } else if e.need.as_ref().is_some_and(&mut hopeless) {
                e.book_attempt(now_ms);
                if e.counted_every_ms.is_none() {
                    set_retry(timers, (id, e), now_ms.saturating_add(waits.max_ms), now_ms);
                }
                continue;
            }
            e.parked = false;
            e.counted_every_ms = None;
            set_retry(timers, (id, e), now_ms, now_ms);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BACKOFF: Waits = Waits {
        initial_ms: 1_000,
        max_ms: 10_000,
        flush: Flush::Run,
    };

    #[test]
    fn an_unschedulable_unit_waits_for_a_change_or_the_longest_backoff() {
        let mut q = Queue::default();
        q.set_back(1, Setback::Unschedulable, (false, None), 0, BACKOFF);
        assert!(!q.ready(1, 1_000), "not on the first backoff step");
        assert!(!q.ready(1, 9_999));
        assert!(q.ready(1, 10_000), "flushed after the longest backoff");
        assert_eq!(q.next_retry_ms(0), Some(10_000));
    }

    #[test]
    fn freed_room_wakes_every_parked_unit_at_once() {
        let mut q = Queue::default();
        q.set_back(1, Setback::Unschedulable, (false, None), 0, BACKOFF);
        q.set_back(2, Setback::Unschedulable, (false, None), 0, BACKOFF);
        q.wake(
            &Changes {
                room: true,
                ..Changes::default()
            },
            300,
            BACKOFF,
            |_| false,
        );
        assert!(q.ready(1, 300));
        assert!(q.ready(2, 300));
        assert_eq!(q.since_ms(1, 300), Some(0), "keeps its place in line");
    }

    #[test]
    fn a_placed_pod_wakes_only_units_with_pod_affinity_or_spread() {
        let mut q = Queue::default();
        q.set_back(1, Setback::Unschedulable, (false, None), 0, BACKOFF);
        q.set_back(2, Setback::Unschedulable, (true, None), 0, BACKOFF);
        q.wake(
            &Changes {
                placed: true,
                ..Changes::default()
            },
            10,
            BACKOFF,
            |_| false,
        );
        assert!(!q.ready(1, 10));
        assert!(q.ready(2, 10));
    }

    #[test]
    fn a_change_to_a_job_or_pod_wakes_that_unit_alone() {
        let mut q = Queue::default();
        for id in 0..4 {
            q.set_back(id, Setback::Gated, (false, None), 0, BACKOFF);
        }
        let changes = Changes {
            units: [0, 3].into(),
            ..Changes::default()
        };
        q.wake(&changes, 5, BACKOFF, |_| false);
        assert!(q.ready(0, 5));
        assert!(q.ready(3, 5));
        assert!(!q.ready(1, 5));
        assert!(!q.ready(2, 5));
    }

    #[test]
    fn the_next_retry_follows_units_that_settle_leave_or_wake() {
        let mut q = Queue::default();
        q.set_back(1, Setback::Error, (false, None), 0, BACKOFF);
        q.set_back(2, Setback::Unschedulable, (false, None), 0, BACKOFF);
        q.set_back(3, Setback::Error, (false, None), 0, BACKOFF);
        q.set_back(3, Setback::Error, (false, None), 0, BACKOFF);
        assert_eq!(q.next_retry_ms(0), Some(1_000));
        q.settled(1);
        assert_eq!(q.next_retry_ms(0), Some(2_000), "the second backoff");
        q.retain(&[2]);
        assert_eq!(q.next_retry_ms(0), Some(10_000));
        let room = Changes {
            room: true,
            ..Changes::default()
        };
        q.wake(&room, 500, BACKOFF, |_| false);
        assert!(q.ready(2, 500));
        assert_eq!(
            q.next_retry_ms(500),
            None,
            "woken: nothing left to wait for"
        );
        assert_eq!(q.next_retry_ms(u64::MAX), None);
    }

    #[test]
    fn errors_back_off_doubling_and_no_change_wakes_them() {
        let mut q = Queue::default();
        let steps: Vec<u64> = (0..6)
            .map(|_| {
                q.set_back(1, Setback::Error, (false, None), 0, BACKOFF);
                q.next_retry_ms(0).unwrap_or(0)
            })
            .collect();
        assert_eq!(steps, [1_000, 2_000, 4_000, 8_000, 10_000, 10_000]);
        q.wake(
            &Changes {
                room: true,
                ..Changes::default()
            },
            1,
            BACKOFF,
            |_| false,
        );
        assert!(!q.ready(1, 1));
    }

    const COUNTED: Waits = Waits {
        flush: Flush::Count,
        ..BACKOFF
    };

    #[test]
    fn a_counted_flush_moves_a_unit_in_line_and_counts_its_attempts_as_a_run_one() {
        let a = 1;
        let (mut run, mut count) = (Queue::default(), Queue::default());
        run.set_back(1, Setback::Unschedulable, (false, None), 0, BACKOFF);
        count.set_back(1, Setback::Unschedulable, (false, None), 0, COUNTED);
        // The run flushes try it at 10 s and 20 s and find it unschedulable
        // again; the counted ones are never due.
        for t in [10_000, 20_000] {
            assert!(run.ready(a, t));
            run.set_back(1, Setback::Unschedulable, (false, None), t, BACKOFF);
        }
        assert!(!count.ready(a, u64::MAX - 1));
        assert_eq!(count.next_retry_ms(0), None, "no timer to wait for");
        // In a round at a flush's instant the unit still has the place the
        // flush before gave it.
        for (t, since) in [(1, 0), (10_000, 0), (10_001, 10_000), (20_000, 10_000)] {
            assert_eq!(count.since_ms(a, t), Some(since), "at {t} ms");
        }
        assert_eq!(count.since_ms(a, 25_000), run.since_ms(a, 25_000));
        // Woken by room at 25 s: tried with the same place in line, and a
        // failure then backs off as after the same number of attempts.
        let room = Changes {
            room: true,
            ..Changes::default()
        };
        run.wake(&room, 25_000, BACKOFF, |_| false);
        count.wake(&room, 25_000, BACKOFF, |_| false);
        assert!(count.ready(a, 25_000));
        assert_eq!(count.since_ms(a, 25_000), Some(20_000));
        run.set_back(1, Setback::Error, (false, None), 25_000, BACKOFF);
        count.set_back(1, Setback::Error, (false, None), 25_000, COUNTED);
        assert_eq!(
            run.next_retry_ms(25_000),
            Some(33_000),
            "the fourth attempt"
        );
        assert_eq!(count.next_retry_ms(25_000), run.next_retry_ms(25_000));
    }

    #[test]
    fn the_policys_scale_step_wakes_every_parked_unit() {
        let mut q = Queue::default();
        q.set_back(1, Setback::Unschedulable, (false, None), 0, COUNTED);
        q.set_back(2, Setback::Gated, (false, None), 0, COUNTED);
        q.set_back(3, Setback::Error, (false, None), 0, COUNTED);
        let stepped = Changes {
            policy: true,
            ..Changes::default()
        };
        q.wake(&stepped, 60_000, BACKOFF, |_| false);
        assert!(q.ready(1, 60_000) && q.ready(2, 60_000));
        q.wake(&stepped, 60_500, BACKOFF, |_| false);
        assert!(q.ready(3, 1_000), "a backoff ends on its own");
    }

    #[test]
    fn a_unit_room_cannot_help_stays_parked_with_its_attempt_counted_until_its_own_change() {
        let need = Need {
            request: Resources {
                gpus: 1,
                ..Resources::default()
            },
            pods: 1,
            priority: 0,
        };
        let mut q = Queue::default();
        for id in [1, 2] {
            q.set_back(id, Setback::Unschedulable, (false, Some(need)), 0, COUNTED);
        }
        let room = Changes {
            room: true,
            ..Changes::default()
        };
        q.wake(&room, 500, COUNTED, |_| true);
        assert!(!q.ready(1, 500), "no room for it: still parked");
        assert_eq!(q.since_ms(1, 500), Some(500), "as if tried at 500");
        assert_eq!(
            q.next_retry_ms(500),
            None,
            "nothing to wait for but a change"
        );
        let own = Changes {
            units: [1].into(),
            ..Changes::default()
        };
        q.wake(&own, 600, COUNTED, |_| true);
        assert!(q.ready(1, 600), "its own change wakes it whatever the room");
        assert_eq!(q.need(1), None, "and what it needed is not known now");
        assert_eq!(q.need(2), Some(need));
        // A unit set back for another reason keeps no need.
        q.set_back(2, Setback::Gated, (false, Some(need)), 700, COUNTED);
        assert_eq!(q.need(2), None);
    }

    #[test]
    fn a_gated_units_counted_flush_moves_nothing() {
        let a = 1;
        let mut q = Queue::default();
        q.set_back(1, Setback::Gated, (false, None), 0, COUNTED);
        assert_eq!(q.since_ms(a, 60_000), Some(0));
        assert!(!q.ready(a, 60_000));
    }

    #[test]
    fn gated_units_do_not_count_attempts() {
        let mut q = Queue::default();
        q.set_back(1, Setback::Gated, (false, None), 0, BACKOFF);
        q.set_back(1, Setback::Gated, (false, None), 0, BACKOFF);
        q.set_back(1, Setback::Error, (false, None), 0, BACKOFF);
        assert_eq!(q.next_retry_ms(0), Some(1_000), "first attempt's backoff");
    }

    #[test]
    fn settled_and_vanished_units_leave_the_queue() {
        let mut q = Queue::default();
        q.set_back(1, Setback::Unschedulable, (false, None), 0, BACKOFF);
        q.set_back(2, Setback::Unschedulable, (false, None), 0, BACKOFF);
        q.settled(1);
        assert!(q.ready(1, 0));
        q.retain(&[1]);
        assert!(q.ready(2, 0));
        assert_eq!(q.next_retry_ms(0), None);
    }

    #[test]
    fn units_still_pending_keep_their_place_when_others_leave() {
        let mut q = Queue::default();
        for id in [3, 5, 8] {
            q.set_back(id, Setback::Unschedulable, (false, None), 0, BACKOFF);
        }
        q.retain(&[1, 3, 5, 8, 9]);
        assert!([3, 5, 8].iter().all(|&id| !q.ready(id, 1)), "all kept");
        q.retain(&[1, 5, 9]);
        assert!(q.ready(3, 1) && q.ready(8, 1), "forgotten: tried at once");
        assert!(!q.ready(5, 1));
        assert_eq!(q.since_ms(5, 1), Some(0));
    }
}
