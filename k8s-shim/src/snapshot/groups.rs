//! The snapshot's side of gangs: a job made from its PodGroup (whichever
//! API it comes from, or Kueue's pod labels) and its pods, and pods that
//! arrived before their group adopted when it comes.

use std::collections::{BTreeMap, BTreeSet};

use dragon_framework::{ClusterOp, Role};
use k8s_openapi::api::core::v1 as core;

use super::{GroupApi, PodGroup, Snapshot};
use crate::translate::{self, PodGroupSpec};

impl Snapshot {
    /// The Kueue pod group `job` that pod `p` is in, made from it when it is
    /// the first seen (a PodGroup object of the same name is the gang
    /// instead), or its spec mended by a pod that reads better.
    pub(super) fn kueue_group(&mut self, p: &core::Pod, job: &str) {
        let spec = translate::kueue_group_spec(p);
        match self.groups.get_mut(job) {
            Some(g) if g.api == GroupApi::KueuePods => {
                if g.spec.is_err() && spec.is_ok() {
                    g.spec = spec;
                }
            }
            Some(_) => {}
            None => {
                self.groups.insert(
                    job.to_string(),
                    PodGroup {
                        key: job.to_string(),
                        spec,
                        annotations: BTreeMap::new(),
                        created_ms: translate::created_ms(&p.metadata),
                        api: GroupApi::KueuePods,
                        priority: None,
                    },
                );
            }
        }
    }

    /// The PodGroup of `job` is seen: its bound pods that arrived before it
    /// become members of the job (they count as its running members).
    pub(super) fn adopt_ungrouped(&mut self, job: &str) {
        if self.sched.cluster().job(job).is_none() {
            return;
        }
        let keys: Vec<String> = self
            .ungrouped
            .iter()
            .filter(|(_, j)| *j == job)
            .map(|(k, _)| k.clone())
            .collect();
        for key in keys {
            self.ungrouped.remove(&key);
            let c = self.sched.cluster();
            let Some(node) = c
                .pod(&key)
                .and_then(|(_, s)| s.node())
                .map(|i| c.nodes()[i].name.clone())
            else {
                continue;
            };
            if let Ok(mut pod) = self.sched.remove_pod(&key) {
                pod.job = Some(job.into());
                let op = ClusterOp::AddPod {
                    pod,
                    node: Some(node),
                };
                if let Err(e) = self.sched.apply(op) {
                    tracing::warn!(pod = %key, "ignoring pod: {e}");
                }
            }
        }
        self.refresh_job(job);
    }

    /// Recompute a job from its PodGroup and its pods.
    pub fn refresh_job(&mut self, job: &str) {
        let Some(group) = self.groups.get(job) else {
            return;
        };
        let c = self.sched.cluster();
        let workers_present: BTreeSet<u32> = c
            .job_pods(job)
            .filter(|(p, _)| p.role == Role::Worker)
            .map(|(p, _)| p.index)
            .collect();
        let observed = workers_present.len() as u32;
        let workers = self.desired.get(job).copied().unwrap_or(observed);
        // A PodGroup that cannot be used still forms its job (its pods
        // count where they are bound), held from scheduling with the reason.
        let (spec, mut hold) = match &group.spec {
            Ok(spec) => (spec.clone(), None),
            Err(e) => (PodGroupSpec::default(), Some(e.message.clone())),
        };
        let mut built = translate::job(job, &spec, &group.annotations, group.created_ms, workers);
        if let Err(e) = &built {
            hold = Some(e.to_string());
            built = translate::job(job, &spec, &BTreeMap::new(), group.created_ms, workers);
        }
        let Ok(mut j) = built else {
            return;
        };
        j.hold = hold.map(|e| format!("not scheduled until its PodGroup is fixed: {e}"));
        j.queue = job
            .split_once('/')
            .and_then(|(ns, _)| self.queue_of_namespace.get(ns))
            .cloned();
        // Its pods may say where the gang goes too (Kueue's podsets).
        let asked = c
            .job_pods(job)
            .filter_map(|(p, _)| Some((p.key.as_str(), p.gang_topology.as_ref()?)));
        match translate::topology::of_gang(j.topology.take(), asked) {
            Ok(t) => j.topology = t,
            Err(e) => j.hold = j.hold.or(Some(e.to_string())),
        }
        // A gang is as urgent as its group says, or its most urgent member.
        j.priority = c
            .job_pods(job)
            .map(|(p, _)| p.priority)
            .chain(group.priority)
            .max()
            .unwrap_or(0);
        if let Some(old) = c.job(job) {
            j.arrival_ms = old.arrival_ms.min(j.arrival_ms.max(1));
        }
        self.change(ClusterOp::UpsertJob(j));
    }
}
