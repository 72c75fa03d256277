//! Permit's waits: gangs holding reservations until the rest of their
//! members fit, released when their wait runs out.

use super::*;
use crate::names::PodKey;

impl Scheduler {
    /// Release gangs whose permit wait ran out.
    pub(super) fn expire_waits(&mut self, now_ms: u64, report: &mut RoundReport) {
        let expired: Vec<UnitKey> = self
            .waiting
            .iter()
            .filter(|(_, w)| now_ms >= w.deadline_ms)
            .map(|(k, _)| k.clone())
            .collect();
        for key in expired {
            let Some(w) = self.waiting.remove(&key) else {
                continue;
            };
            let job = key.job_name().unwrap_or_default();
            let held = self.cluster.job_placed(job);
            let present = self.cluster.member_count(job);
            let min_member = self.cluster.job(job).map_or(0, |j| j.min_member);
            let limit = match w.group_timeout {
                true => "its scheduleTimeoutSeconds",
                false => "the wait the policy allowed",
            };
            self.unreserve_job(&key);
            // Like a gang permit rejects: tried again on a change that may
            // help it (its missing members created), not at once. Room it
            // lacked is not what it waited for: nothing is kept to pass it
            // over by.
            if let Some(id) = self.cluster.jobs.get(job).map(|e| e.unit_id) {
                let waits = self.config.waits();
                self.queue
                    .set_back(id, Setback::Unschedulable, (false, None), now_ms, waits);
            }
            report.decisions.push(Decision::TimedOut {
                unit: key,
                reason: format!(
                    "gang timed out in permit after {} s ({limit}) with {held} of minMember {min_member} pods placed ({present} exist); its reservations are released",
                    now_ms.saturating_sub(w.since_ms) / 1000
                ),
            });
        }
    }

    pub(super) fn reserved_of(&self, unit_key: &UnitKey) -> Vec<PodKey> {
        let Some(job) = unit_key.job_name() else {
            return Vec::new();
        };
        self.cluster
            .job_pods(job)
            .filter(|(_, s)| matches!(s, PodState::Reserved(_)))
            .map(|(p, _)| p.key.clone())
            .collect()
    }

    pub(super) fn unreserve_job(&mut self, unit_key: &UnitKey) {
        for key in self.reserved_of(unit_key) {
            self.cluster.set_state(&key, PodState::Pending);
        }
    }
}
