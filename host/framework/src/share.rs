//! How well each queue (team) got what it was guaranteed: the simulator's
//! per-queue figures over a run, and dragon-scheduler's over the last hour.
//!
//! A queue has a weight, a guaranteed number of GPUs and an optional limit
//! on what it may borrow beyond them, and may sit under a parent queue.
//! At any moment a queue is *entitled* to the GPUs its jobs ask for, up to
//! its guarantee: a queue with no work is owed nothing. The simulator
//! records, for each queue, the GPUs its jobs hold and its entitlement over
//! time; from them come the share of its entitlement it held over the run
//! and in its worst hour, and Jain's fairness index over the queues.

use serde::Serialize;

use crate::teams::QueueSpec;

/// The window of the worst-share figure.
pub const HOUR_MS: u64 = 3_600_000;

/// One queue's figures over a run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct QueueSummary {
    pub name: String,
    /// Its parent queue, if any; what a parent held and was entitled to is
    /// its subtree's.
    pub parent: Option<String>,
    pub guaranteed_gpus: u32,
    /// GPUs its jobs held, averaged over the run.
    pub avg_gpus: f64,
    /// GPUs held over GPUs it was entitled to, over the whole run (above 1:
    /// it borrowed); none if it was never entitled to any.
    pub share_of_entitlement: Option<f64>,
    /// The same over its worst hour (counting hours in which it was
    /// entitled to something), capped at 1.
    pub worst_hour_share: Option<f64>,
    /// Its jobs' longest wait from submission to start (or to the end of
    /// the run, for jobs never started), seconds.
    pub longest_wait_s: f64,
    pub avg_jct_s: f64,
    pub jobs: u64,
}

/// Per queue, what its jobs held and what it was entitled to, each time
/// either changed: state is constant between two samples.
#[derive(Debug, Clone, Default)]
pub struct QueueMeter {
    guaranteed: Vec<u32>,
    parent: Vec<Option<usize>>,
    /// `(t_ms, held GPUs, entitled GPUs)` per queue, in time order.
    samples: Vec<Vec<(u64, u64, u64)>>,
}

impl QueueMeter {
    pub fn new(queues: &[QueueSpec]) -> QueueMeter {
        QueueMeter {
            guaranteed: queues.iter().map(|q| q.guaranteed_gpus).collect(),
            parent: crate::teams::parent_indices(queues),
            samples: vec![Vec::new(); queues.len()],
        }
    }

    /// At `t_ms`, each queue's own jobs hold `own[q].0` GPUs and ask for
    /// `own[q].1`; a parent queue is observed with its subtree's.
    pub fn observe_all(&mut self, t_ms: u64, own: &[(u64, u64)]) {
        let sum = |f: fn(&(u64, u64)) -> u64| {
            let v: Vec<u64> = own.iter().map(f).collect();
            crate::teams::subtree_sums(&self.parent, &v)
        };
        let (held, asked) = (sum(|x| x.0), sum(|x| x.1));
        for q in 0..own.len().min(self.samples.len()) {
            self.observe(t_ms, q, held[q], asked[q]);
        }
    }

    /// At `t_ms`, queue `q`'s jobs hold `held` GPUs and ask for `asked`.
    pub fn observe(&mut self, t_ms: u64, q: usize, held: u64, asked: u64) {
        let entitled = asked.min(u64::from(self.guaranteed[q]));
        let s = &mut self.samples[q];
        if s.last()
            .is_some_and(|&(_, h, e)| (h, e) == (held, entitled))
        {
            return;
        }
        if s.last().is_some_and(|&(t, _, _)| t == t_ms) {
            s.pop();
        }
        s.push((t_ms, held, entitled));
    }

    /// Queue `q`'s GPUs held over GPUs it was entitled to between
    /// `from_ms` and `to_ms` (above 1: it borrowed); none if it was
    /// entitled to nothing then.
    pub fn share_over(&self, q: usize, from_ms: u64, to_ms: u64) -> Option<f64> {
        let s = &self.samples[q];
        let (mut held, mut entitled) = (0.0, 0.0);
        for (k, &(t, h, e)) in s.iter().enumerate() {
            let until = s.get(k + 1).map_or(to_ms, |n| n.0).min(to_ms);
            let from = t.max(from_ms);
            if from < until {
                let dt = (until - from) as f64;
                held += h as f64 * dt;
                entitled += e as f64 * dt;
            }
        }
        (entitled > 0.0).then(|| held / entitled)
    }

    /// Forget what ended before `t_ms` (the sample in effect at `t_ms` is
    /// kept): a meter that runs for ever holds a window, not its history.
    pub fn forget_before(&mut self, t_ms: u64) {
        for s in &mut self.samples {
            let in_effect = s.iter().rposition(|&(t, _, _)| t <= t_ms);
            if let Some(k) = in_effect {
                s.drain(..k);
            }
        }
    }

    /// ∫ held dt and ∫ entitled dt of queue `q` over the run (to `end_ms`)
    /// and per hour.
    fn integrals(&self, q: usize, end_ms: u64) -> ((f64, f64), Vec<(f64, f64)>) {
        let s = &self.samples[q];
        let hours = end_ms.div_ceil(HOUR_MS) as usize;
        let mut per_hour = vec![(0.0, 0.0); hours];
        let mut total = (0.0, 0.0);
        for (k, &(t, held, entitled)) in s.iter().enumerate() {
            let until = s.get(k + 1).map_or(end_ms, |n| n.0).min(end_ms);
            let mut from = t.min(until);
            while from < until {
                let hour = (from / HOUR_MS) as usize;
                let to = until.min((hour as u64 + 1) * HOUR_MS);
                let dt = (to - from) as f64;
                let (h, e) = (held as f64 * dt, entitled as f64 * dt);
                per_hour[hour].0 += h;
                per_hour[hour].1 += e;
                total.0 += h;
                total.1 += e;
                from = to;
            }
        }
        (total, per_hour)
    }

    /// Each queue's summary, `jobs` giving per queue its jobs' waits and
    /// JCTs in seconds.
    pub fn summaries(
        &self,
        queues: &[QueueSpec],
        end_ms: u64,
        jobs: &[Vec<(f64, f64)>],
    ) -> Vec<QueueSummary> {
        queues
            .iter()
            .enumerate()
            .map(|(q, spec)| {
                let ((held, entitled), hours) = self.integrals(q, end_ms);
                let worst = hours
                    .iter()
                    .filter(|(_, e)| *e > 0.0)
                    .map(|(h, e)| (h / e).min(1.0))
                    .min_by(f64::total_cmp);
                let waits = &jobs[q];
                QueueSummary {
                    name: spec.name.to_string(),
                    parent: spec.parent.as_ref().map(|p| p.to_string()),
                    guaranteed_gpus: spec.guaranteed_gpus,
                    avg_gpus: if end_ms > 0 {
                        held / end_ms as f64
                    } else {
                        0.0
                    },
                    share_of_entitlement: (entitled > 0.0).then(|| held / entitled),
                    worst_hour_share: worst,
                    longest_wait_s: waits.iter().map(|w| w.0).fold(0.0, f64::max),
                    avg_jct_s: match waits.len() {
                        0 => 0.0,
                        n => waits.iter().map(|w| w.1).sum::<f64>() / n as f64,
                    },
                    jobs: waits.len() as u64,
                }
            })
            .collect()
    }
}

/// Jain's fairness index over the shares of their entitlement of the
/// queues without children, whose jobs are the teams' (1: all equal;
/// `1/n`: one queue has everything); none without two such queues that
/// were entitled to something.
pub fn jain_index(summaries: &[QueueSummary]) -> Option<f64> {
    let x: Vec<f64> = summaries
        .iter()
        .filter(|s| {
            !summaries
                .iter()
                .any(|c| c.parent.as_deref() == Some(s.name.as_str()))
        })
        .filter_map(|s| s.share_of_entitlement)
        .collect();
    jain(&x)
}

/// Whether each queue has no children (see [`jain_index`]).
pub fn leaves(queues: &[QueueSpec]) -> Vec<bool> {
    queues
        .iter()
        .map(|q| !queues.iter().any(|c| c.parent.as_ref() == Some(&q.name)))
        .collect()
}

/// Jain's index of `x`: `(Σx)² / (n·Σx²)`; none for fewer than two values
/// or all zero.
pub fn jain(x: &[f64]) -> Option<f64> {
    if x.len() < 2 {
        return None;
    }
    let sum: f64 = x.iter().sum();
    let squares: f64 = x.iter().map(|v| v * v).sum();
    (squares > 0.0).then(|| sum * sum / (x.len() as f64 * squares))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn queue(name: &str, guaranteed_gpus: u32, parent: Option<&str>) -> QueueSpec {
        QueueSpec {
            name: name.into(),
            weight: 1.0,
            guaranteed_gpus,
            borrowing_limit_gpus: None,
            parent: parent.map(Into::into),
        }
    }

    #[test]
    fn a_queue_is_owed_its_guarantee_only_while_it_asks() {
        let qs = [queue("a", 8, None), queue("b", 8, None)];
        let mut m = QueueMeter::new(&qs);
        // Hour 0: `a` asks 16 and holds 12 (8 of them owed); `b` asks 4,
        // holds 4. Hour 1: `a` holds 4 of the 8 it is owed; `b` asks nothing.
        m.observe(0, 0, 12, 16);
        m.observe(0, 1, 4, 4);
        m.observe(HOUR_MS, 0, 4, 16);
        m.observe(HOUR_MS, 1, 0, 0);
        let jobs = vec![vec![(10.0, 100.0), (30.0, 300.0)], vec![(0.0, 50.0)]];
        let s = m.summaries(&qs, 2 * HOUR_MS, &jobs);
        assert_eq!(
            s[0].share_of_entitlement,
            Some(1.0),
            "16 GPU-hours held of 16 owed"
        );
        assert_eq!(s[0].worst_hour_share, Some(0.5));
        assert_eq!(s[0].avg_gpus, 8.0);
        assert_eq!(
            (s[0].longest_wait_s, s[0].avg_jct_s, s[0].jobs),
            (30.0, 200.0, 2)
        );
        assert_eq!(s[1].share_of_entitlement, Some(1.0));
        assert_eq!(
            s[1].worst_hour_share,
            Some(1.0),
            "an hour without demand does not count"
        );
        assert_eq!(jain_index(&s), Some(1.0));
    }

    #[test]
    fn a_window_counts_only_its_own_time_and_what_ended_before_it_is_forgotten() {
        let qs = [queue("a", 8, None)];
        let mut m = QueueMeter::new(&qs);
        m.observe(0, 0, 0, 8);
        m.observe(1_000, 0, 8, 8);
        m.observe(3_000, 0, 4, 8);
        // [500, 2000): 500 ms at 0, 1000 ms at 8, of 8 owed.
        let share = m.share_over(0, 500, 2_000).unwrap();
        assert!((share - 8.0 / 12.0).abs() < 1e-12, "{share}");
        m.forget_before(2_000);
        assert_eq!(m.samples[0], [(1_000, 8, 8), (3_000, 4, 8)]);
        assert_eq!(m.share_over(0, 2_000, 3_000), Some(1.0));
        assert_eq!(m.share_over(0, 3_000, 4_000), Some(0.5));
        let idle = QueueMeter::new(&qs);
        assert_eq!(idle.share_over(0, 0, 1_000), None);
    }

    #[test]
    fn a_parent_is_observed_with_its_subtree_and_only_leaves_count_for_jain() {
        let qs = [
            queue("org", 8, None),
            queue("a", 4, Some("org")),
            queue("b", 4, Some("org")),
        ];
        let mut m = QueueMeter::new(&qs);
        // a holds 6 of the 8 it asks for, b 2 of 2: org holds 8 of its 8.
        m.observe_all(0, &[(0, 0), (6, 8), (2, 2)]);
        let s = m.summaries(&qs, HOUR_MS, &[vec![], vec![], vec![]]);
        let shares: Vec<_> = s.iter().map(|q| q.share_of_entitlement).collect();
        assert_eq!(shares, [Some(1.0), Some(1.5), Some(1.0)]);
        assert_eq!(s[1].parent.as_deref(), Some("org"));
        assert_eq!(leaves(&qs), [false, true, true]);
        // Jain over a and b alone: (2.5)² / (2 · 3.25).
        let j = jain_index(&s).unwrap();
        assert!((j - 6.25 / 6.5).abs() < 1e-12, "{j}");
    }

    #[test]
    fn jains_index_falls_as_shares_diverge() {
        let share = |x: f64| QueueSummary {
            name: String::new(),
            parent: None,
            guaranteed_gpus: 1,
            avg_gpus: 0.0,
            share_of_entitlement: Some(x),
            worst_hour_share: None,
            longest_wait_s: 0.0,
            avg_jct_s: 0.0,
            jobs: 0,
        };
        assert_eq!(jain_index(&[share(1.0)]), None);
        let j = jain_index(&[share(1.0), share(0.0)]).unwrap();
        assert!((j - 0.5).abs() < 1e-12, "{j}");
        let j = jain_index(&[share(1.0), share(0.5)]).unwrap();
        assert!((j - 0.9).abs() < 1e-12, "{j}");
    }
}
