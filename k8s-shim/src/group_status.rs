//! The status a scheduler-plugins PodGroup shows: its phase and its pods'
//! counts, computed as scheduler-plugins' PodGroup controller (v0.28.9,
//! `pkg/controllers/podgroup_controller.go`) computes them, so tools that
//! read those statuses work with Dragon alone. Pure bookkeeping: the shim
//! feeds it pod phases and writes what it returns.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

/// A PodGroup's phase (`status.phase`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Phase {
    /// Fewer than `minMember` pods exist.
    Pending,
    /// Enough pods exist; fewer than `minMember` run or have succeeded.
    Scheduling,
    /// `minMember` pods run or have succeeded.
    Running,
    /// `minMember` pods have succeeded (final).
    Finished,
    /// A pod failed once `minMember` pods had started (final).
    Failed,
}

impl Phase {
    fn is_final(self) -> bool {
        matches!(self, Phase::Finished | Phase::Failed)
    }
}

/// A PodGroup's status as Dragon writes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Status {
    pub phase: Phase,
    pub running: u32,
    pub succeeded: u32,
    pub failed: u32,
    /// When the group first had enough pods to be scheduled (RFC 3339).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub schedule_start_time: Option<String>,
}

/// A pod's phase as far as the counts go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PodPhase {
    Pending,
    Running,
    Succeeded,
    Failed,
}

impl PodPhase {
    /// From `status.phase` (`Unknown` and absent count as pending).
    pub fn from_api(phase: Option<&str>) -> PodPhase {
        match phase {
            Some("Running") => PodPhase::Running,
            Some("Succeeded") => PodPhase::Succeeded,
            Some("Failed") => PodPhase::Failed,
            _ => PodPhase::Pending,
        }
    }
}

#[derive(Debug, Clone, Default)]
struct Group {
    /// Pods carrying the group's label, by key, with their phase.
    pods: BTreeMap<String, PodPhase>,
    /// Pods of the group this scheduler places.
    ours: BTreeSet<String>,
    /// The last status computed (final phases stay, as the controller
    /// stops reconciling a finished group).
    last: Option<Status>,
}

/// Every PodGroup's pods and the groups whose status may have changed.
#[derive(Debug, Clone, Default)]
pub struct GroupStatuses {
    groups: BTreeMap<String, Group>,
    /// The group of each pod seen with a group label.
    of_pod: BTreeMap<String, String>,
    dirty: BTreeSet<String>,
}

impl GroupStatuses {
    /// Pod `pod` of group `group` is in `phase`; `ours` when this
    /// scheduler places it.
    pub fn observe(&mut self, group: &str, pod: &str, phase: PodPhase, ours: bool) {
        if let Some(old) = self.of_pod.get(pod)
            && old != group
        {
            let old = old.clone();
            self.forget(pod);
            self.dirty.insert(old);
        }
        let g = self.groups.entry(group.to_string()).or_default();
        let changed = g.pods.insert(pod.to_string(), phase) != Some(phase);
        let ours_changed = if ours {
            g.ours.insert(pod.to_string())
        } else {
            g.ours.remove(pod)
        };
        self.of_pod.insert(pod.to_string(), group.to_string());
        if changed || ours_changed {
            self.dirty.insert(group.to_string());
        }
    }

    /// Pod `pod` is deleted.
    pub fn forget(&mut self, pod: &str) {
        let Some(group) = self.of_pod.remove(pod) else {
            return;
        };
        if let Some(g) = self.groups.get_mut(&group) {
            g.pods.remove(pod);
            g.ours.remove(pod);
        }
        self.dirty.insert(group);
    }

    /// The PodGroup `group` was created or changed (its `minMember`).
    pub fn touch(&mut self, group: &str) {
        self.groups.entry(group.to_string()).or_default();
        self.dirty.insert(group.to_string());
    }

    /// The PodGroup `group` is deleted; its pods may still come and go.
    pub fn remove_group(&mut self, group: &str) {
        if let Some(g) = self.groups.get_mut(group) {
            g.last = None;
        }
        self.dirty.remove(group);
    }

    /// Groups whose status may have changed since the last call.
    pub fn take_dirty(&mut self) -> BTreeSet<String> {
        std::mem::take(&mut self.dirty)
    }

    /// Whether this scheduler should write `group`'s status: it has no
    /// pods yet, or some of them are ours (a group whose pods all belong to
    /// another scheduler is that scheduler's to report).
    pub fn is_ours(&self, group: &str) -> bool {
        self.groups
            .get(group)
            .is_none_or(|g| g.pods.is_empty() || !g.ours.is_empty())
    }

    /// The status of `group` with `min_member` (0: every pod that exists),
    /// at `now` (RFC 3339, recorded as the schedule start the first time
    /// the group leaves Pending).
    pub fn status(&mut self, group: &str, min_member: u32, now: &str) -> Status {
        let g = self.groups.entry(group.to_string()).or_default();
        if let Some(last) = &g.last
            && last.phase.is_final()
        {
            return last.clone();
        }
        let count = |want: PodPhase| g.pods.values().filter(|&&p| p == want).count() as u32;
        let (running, succeeded, failed) = (
            count(PodPhase::Running),
            count(PodPhase::Succeeded),
            count(PodPhase::Failed),
        );
        let pods = g.pods.len() as u32;
        let min = if min_member > 0 {
            min_member
        } else {
            pods.max(1)
        };
        let phase = if pods < min {
            Phase::Pending
        } else if succeeded >= min {
            Phase::Finished
        } else if failed != 0 && failed + running + succeeded >= min {
            Phase::Failed
        } else if succeeded + running >= min {
            Phase::Running
        } else {
            Phase::Scheduling
        };
        let schedule_start_time = g
            .last
            .as_ref()
            .and_then(|l| l.schedule_start_time.clone())
            .or_else(|| (phase != Phase::Pending).then(|| now.to_string()));
        let status = Status {
            phase,
            running,
            succeeded,
            failed,
            schedule_start_time,
        };
        g.last = Some(status.clone());
        status
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: &str = "2026-01-01T00:00:00Z";
    const T1: &str = "2026-01-01T00:00:05Z";

    fn phases(s: &mut GroupStatuses, pods: &[PodPhase]) {
        for (i, &p) in pods.iter().enumerate() {
            s.observe("ml/pg", &format!("ml/p{i}"), p, true);
        }
    }

    // The controller's reconcile cases (podgroup_controller_test.go):
    // fewer pods than minMember stay Pending; enough pods schedule; enough
    // running run; any failure once minMember started fails the group;
    // minMember succeeded finishes it.
    #[test]
    fn the_phase_follows_the_pods_as_the_podgroup_controller_reconciles() {
        use PodPhase::*;
        let cases: &[(&[PodPhase], u32, Phase)] = &[
            (&[Pending], 2, Phase::Pending),
            (&[Pending, Pending], 2, Phase::Scheduling),
            (&[Running, Pending], 2, Phase::Scheduling),
            (&[Running, Running], 2, Phase::Running),
            (&[Running, Succeeded], 2, Phase::Running),
            (&[Running, Failed], 2, Phase::Failed),
            (&[Pending, Failed], 2, Phase::Scheduling),
            (&[Succeeded, Succeeded, Pending], 2, Phase::Finished),
            (&[Running, Running, Running], 0, Phase::Running),
            (&[Running, Pending, Pending], 0, Phase::Scheduling),
        ];
        for (pods, min, want) in cases {
            let mut s = GroupStatuses::default();
            phases(&mut s, pods);
            assert_eq!(
                s.status("ml/pg", *min, T0).phase,
                *want,
                "{pods:?} min {min}"
            );
        }
    }

    #[test]
    fn counts_and_the_schedule_start_are_kept_and_final_phases_stay() {
        use PodPhase::*;
        let mut s = GroupStatuses::default();
        s.touch("ml/pg");
        let st = s.status("ml/pg", 2, T0);
        assert_eq!((st.phase, st.schedule_start_time), (Phase::Pending, None));
        phases(&mut s, &[Pending, Pending]);
        assert_eq!(s.take_dirty(), BTreeSet::from(["ml/pg".to_string()]));
        let st = s.status("ml/pg", 2, T0);
        assert_eq!(st.schedule_start_time.as_deref(), Some(T0));
        phases(&mut s, &[Running, Running]);
        let st = s.status("ml/pg", 2, T1);
        assert_eq!((st.phase, st.running), (Phase::Running, 2));
        assert_eq!(st.schedule_start_time.as_deref(), Some(T0), "kept");
        phases(&mut s, &[Succeeded, Succeeded]);
        let st = s.status("ml/pg", 2, T1);
        assert_eq!((st.phase, st.succeeded), (Phase::Finished, 2));
        s.forget("ml/p0");
        assert_eq!(s.status("ml/pg", 2, T1).phase, Phase::Finished, "final");
    }

    #[test]
    fn a_group_whose_pods_are_all_another_schedulers_is_not_ours_to_report() {
        let mut s = GroupStatuses::default();
        s.touch("ml/pg");
        assert!(s.is_ours("ml/pg"), "no pods yet");
        s.observe("ml/pg", "ml/a", PodPhase::Pending, false);
        assert!(!s.is_ours("ml/pg"));
        s.observe("ml/pg", "ml/b", PodPhase::Pending, true);
        assert!(s.is_ours("ml/pg"));
    }
}
