//! The round's units: a job's pending pods as one gang or each pod alone,
//! and the order they are tried in (`queue-order`, or PrioritySort).

use super::*;
use crate::cluster::{JobEntry, PodEntry};
use crate::queue::{Need, Wake};

/// A pending unit a round may try: its plan, or, for a pod on its own that
/// was found unschedulable and has not changed since, only what ordering
/// it and [passing it over](Scheduler::passes_over) read. When free room
/// wakes thousands of such pods, most are passed over: their plans are
/// built only for those tried.
pub(super) enum Candidate {
    /// Boxed: a round moves its candidates, and most are parked.
    Plan(Box<UnitPlan>),
    Parked(Parked),
}

/// A lone pod found unschedulable before (see [`Candidate`]).
pub(super) struct Parked {
    pub(super) id: u64,
    pub(super) pod: PodKey,
    pub(super) arrival_ms: u64,
    pub(super) priority: i32,
    /// What the policy's `queue-order` is told it asks for.
    pub(super) request: wit::Resources,
    /// What it needs to fit: what the queue kept when it was set back.
    pub(super) need: Need,
    pub(super) wants_placed: bool,
}

impl Candidate {
    fn id(&self) -> u64 {
        match self {
            Candidate::Plan(u) => u.wit.id,
            Candidate::Parked(p) => p.id,
        }
    }

    fn arrival_ms(&self) -> u64 {
        match self {
            Candidate::Plan(u) => u.wit.arrival_ms,
            Candidate::Parked(p) => p.arrival_ms,
        }
    }

    fn priority(&self) -> i32 {
        match self {
            Candidate::Plan(u) => u.wit.priority,
            Candidate::Parked(p) => p.priority,
        }
    }

    /// What the policy's `queue-order` sees of it.
    fn queued(&self) -> wit::Queued {
        let (pods, total) = match self {
            Candidate::Plan(u) => (
                u.wit.tasks.len() as u32,
                u.wit.tasks.iter().fold(
                    wit::Resources {
                        cpu_milli: 0,
                        memory_mib: 0,
                        gpus: 0,
                    },
                    |a, t| wit::Resources {
                        cpu_milli: a.cpu_milli.saturating_add(t.request.cpu_milli),
                        memory_mib: a.memory_mib.saturating_add(t.request.memory_mib),
                        gpus: a.gpus.saturating_add(t.request.gpus),
                    },
                ),
            ),
            Candidate::Parked(p) => (1, p.request),
        };
        wit::Queued {
            id: self.id(),
            arrival_ms: self.arrival_ms(),
            priority: self.priority(),
            pods,
            total,
        }
    }
}

/// What a round reads of a unit's pods once, as it builds the unit.
struct Flags {
    /// Some pod carries a scheduling gate.
    gated: bool,
    /// Some pod has required pod affinity or a topology spread: a pod
    /// placed anywhere may help it.
    wants_placed: bool,
    /// The least of each resource the pods ask for.
    least: crate::model::Resources,
}

fn flags<'a>(pods: impl IntoIterator<Item = &'a Pod>) -> Flags {
    let mut pods = pods.into_iter();
    let first = pods.next();
    let start = Flags {
        gated: false,
        wants_placed: false,
        least: first.map(|p| p.request).unwrap_or_default(),
    };
    first.into_iter().chain(pods).fold(start, |f, p| Flags {
        gated: f.gated || !p.scheduling_gates.is_empty(),
        wants_placed: f.wants_placed
            || !p.constraints.pod_affinity.is_empty()
            || !p.constraints.spread.is_empty(),
        least: f.least.least(p.request),
    })
}

/// Look-ups of jobs in nearly ascending order of name: each walks on from
/// where the last one stopped, and only a name behind it (a job whose
/// name is a prefix of another's, `a` after `a-b`: their pods' keys sort
/// the other way), or any once the walk is past the last job, is searched
/// for. The job next in the walk is recognised by its unit id, with no
/// comparison of names.
struct JobWalk<'a> {
    jobs: &'a BTreeMap<JobKey, JobEntry>,
    ahead: std::iter::Peekable<std::collections::btree_map::Iter<'a, JobKey, JobEntry>>,
}

impl<'a> JobWalk<'a> {
    fn new(jobs: &'a BTreeMap<JobKey, JobEntry>) -> Self {
        JobWalk {
            jobs,
            ahead: jobs.iter().peekable(),
        }
    }

    /// The job `name`, whose unit id is `unit`. The walk moves past it: the
    /// next look-up is for a job after it.
    fn find(&mut self, name: &JobKey, unit: u64) -> Option<&'a JobEntry> {
        if let Some((_, v)) = self.ahead.peek()
            && v.unit_id == unit
        {
            return self.ahead.next().map(|(_, v)| v);
        }
        if self.ahead.peek().is_none_or(|(k, _)| *k > name) {
            return self.jobs.get(name);
        }
        while let Some(&(k, v)) = self.ahead.peek() {
            if v.unit_id == unit {
                self.ahead.next();
                return Some(v);
            }
            match k.cmp(name) {
                std::cmp::Ordering::Less => {
                    self.ahead.next();
                }
                std::cmp::Ordering::Equal => {
                    self.ahead.next();
                    return Some(v);
                }
                std::cmp::Ordering::Greater => return None,
            }
        }
        None
    }
}

impl Scheduler {
    /// The pending units: the ids of all of them, and the candidates the
    /// queue lets be tried at `now_ms` (only those are read, and of parked
    /// lone pods only what ordering and passing over need: see
    /// [`Candidate`]). With gangs (the
    /// policy has `permit`, or the job is [always a gang](Job::always_gang)),
    /// a job's pending pods form one unit; without (`permit` not
    /// implemented), every pod is its own.
    pub(super) fn units(&self, gangs: bool, now_ms: u64) -> (Vec<u64>, Vec<Candidate>) {
        let c = &self.cluster;
        // The pending pods of each job the queue lets be tried, as they are
        // walked: the plans are built from them, with no look-up by key.
        // Units that are not ready are only counted as pending: a round
        // costs little for each of them.
        let mut by_job: BTreeMap<&str, (&JobEntry, Vec<&Pod>)> = BTreeMap::new();
        let mut lone: Vec<(&PodEntry, Option<&JobEntry>)> = Vec::new();
        let mut pending = Vec::new();
        // A job's pods sit together in key order (`job-role-index`): its
        // entry and whether it is ready are looked up once per run of them,
        // not once per pod.
        let mut last: Option<(u64, Option<&JobEntry>, bool)> = None;
        // And the jobs come in nearly the order of their pods' keys: they
        // are found by walking on, not searched for.
        let mut walk = JobWalk::new(&c.jobs);
        if gangs {
            // Every job is a gang: the jobs say how many pending members
            // each has, so only the ready ones' pods are looked at.
            for (name, entry) in &c.jobs {
                if entry.counts.pending_members == 0 {
                    continue;
                }
                pending.push(entry.unit_id);
                if !self.queue.ready(entry.unit_id, now_ms) {
                    continue;
                }
                let members = c.pending_members_of(name, Some(entry)).collect();
                by_job.insert(name.as_str(), (entry, members));
            }
        }
        for e in c.pods.values() {
            // With gangs, a job's pods were found through their job.
            if e.state != PodState::Pending || (gangs && e.pod.job.is_some()) {
                continue;
            }
            let job = e
                .pod
                .job
                .as_ref()
                .zip(e.job_unit)
                .map(|(name, unit)| match last {
                    Some((seen, entry, ready)) if seen == unit => (name, entry, ready),
                    _ => {
                        let entry = walk.find(name, unit);
                        let ready = entry.is_some_and(|j| self.queue.ready(j.unit_id, now_ms));
                        last = Some((unit, entry, ready));
                        (name, entry, ready)
                    }
                });
            let entry = job.and_then(|(_, entry, _)| entry);
            if JobEntry::has_surplus(entry, &e.pod) {
                continue;
            }
            match job {
                // (With gangs, pods of a job were skipped above.)
                Some((name, Some(entry), ready)) if entry.job.always_gang() => {
                    if pending.last() != Some(&entry.unit_id) {
                        pending.push(entry.unit_id);
                    }
                    if ready {
                        by_job
                            .entry(name.as_str())
                            .or_insert((entry, Vec::new()))
                            .1
                            .push(&e.pod);
                    }
                }
                _ => {
                    pending.push(e.unit_id);
                    if self.queue.ready(e.unit_id, now_ms) {
                        lone.push((e, entry));
                    }
                }
            }
        }
        pending.sort_unstable();
        pending.dedup();
        let mut units = Vec::new();
        for (job, (je, mut pods)) in by_job {
            // No two pods share a place: an unstable sort orders them as a
            // stable one.
            pods.sort_unstable_by_key(|p| p.placement_order());
            let Flags {
                gated,
                wants_placed,
                least,
            } = flags(pods.iter().copied());
            units.push(Candidate::Plan(Box::new(UnitPlan {
                key: UnitKey::job(job),
                job: Some(job.into()),
                wit: wit::Unit {
                    id: je.unit_id,
                    arrival_ms: je.job.arrival_ms,
                    priority: je.job.priority,
                    gang: true,
                    tasks: pods.iter().map(|p| c.task(p)).collect(),
                    workers: je.job.workers,
                    min_workers: je.job.min_workers,
                    max_workers: je.job.max_workers,
                    running: je.counts.bound,
                },
                pods: pods.iter().map(|p| p.key.clone()).collect(),
                within: None,
                cap: None,
                gated,
                wants_placed,
                least,
            })));
        }
        let fits_only = self.config.wake == Wake::Fits;
        for (e, job) in lone {
            let parked = self.queue.need(e.unit_id).filter(|_| fits_only);
            let unit = if let Some(need) = parked {
                Candidate::Parked(Parked {
                    id: e.unit_id,
                    pod: e.pod.key.clone(),
                    arrival_ms: e.pod.arrival_ms,
                    priority: e.pod.priority,
                    request: c.task(&e.pod).request,
                    need,
                    wants_placed: flags([&e.pod]).wants_placed,
                })
            } else {
                Candidate::Plan(Box::new(self.lone_plan(e, job)))
            };
            units.push(unit);
        }
        (pending, units)
    }

    /// The plan of a pod scheduled on its own.
    fn lone_plan(&self, e: &PodEntry, job: Option<&JobEntry>) -> UnitPlan {
        // A pod of a job scheduled on its own (a policy without gangs)
        // still tells the policy what job it belongs to.
        let (workers, min, max) = job
            .map(|j| (j.job.workers, j.job.min_workers, j.job.max_workers))
            .unwrap_or((0, 0, 0));
        let Flags {
            gated,
            wants_placed,
            least,
        } = flags([&e.pod]);
        UnitPlan {
            key: UnitKey::Pod(e.pod.key.clone()),
            job: None,
            wit: wit::Unit {
                id: e.unit_id,
                arrival_ms: e.pod.arrival_ms,
                priority: e.pod.priority,
                gang: false,
                tasks: vec![self.cluster.task(&e.pod)],
                workers,
                min_workers: min,
                max_workers: max,
                running: 0,
            },
            pods: vec![e.pod.key.clone()],
            within: None,
            cap: None,
            gated,
            wants_placed,
            least,
        }
    }

    /// The plan of a parked lone pod the round tries after all: `None` if
    /// the pod is no longer pending.
    pub(super) fn parked_plan(&self, parked: &Parked) -> Option<UnitPlan> {
        let c = &self.cluster;
        let e = c.pods.get(&parked.pod)?;
        if e.state != PodState::Pending {
            return None;
        }
        let job = e.pod.job.as_ref().and_then(|j| c.jobs.get(j));
        Some(self.lone_plan(e, job))
    }

    /// The policy's queue order, validated; FIFO when the policy does not
    /// order or fails (the failure is reported).
    pub(super) fn order(
        &mut self,
        now_ms: u64,
        policy: &dyn Hooks,
        units: &[Candidate],
        report: &mut RoundReport,
    ) -> Vec<usize> {
        // kube-scheduler's PrioritySort: priority, then the time the unit
        // (re-)entered the queue.
        let fifo = || {
            let mut o: Vec<usize> = (0..units.len()).collect();
            // Each key once: the time it entered is a look-up in the queue.
            o.sort_by_cached_key(|&i| {
                let u = &units[i];
                let (id, arrival_ms) = (u.id(), u.arrival_ms());
                let entered = self
                    .queue
                    .since_ms(id, now_ms)
                    .map_or(arrival_ms, |t| t.max(arrival_ms));
                (std::cmp::Reverse(u.priority()), entered, id)
            });
            o
        };
        if !policy.info().implements(wit::Hook::QueueOrder)
            || !self.breaker.is_closed(&policy.info().sha256)
        {
            return fifo();
        }
        let queued: Vec<wit::Queued> = units.iter().map(Candidate::queued).collect();
        let result = policy
            .queue_order(now_ms, &queued, &self.cluster)
            .and_then(|order| {
                let mut seen = vec![false; units.len()];
                for &i in &order {
                    let i = i as usize;
                    if i >= units.len() || seen[i] {
                        return Err(invalid(
                            policy,
                            HookName::QueueOrder,
                            format!(
                                "not a permutation of 0..{}: index {i} is out of range or repeated",
                                units.len()
                            ),
                        ));
                    }
                    seen[i] = true;
                }
                if order.len() != units.len() {
                    return Err(invalid(
                        policy,
                        HookName::QueueOrder,
                        format!("{} indices for {} units", order.len(), units.len()),
                    ));
                }
                Ok(order.into_iter().map(|i| i as usize).collect())
            });
        // A failure counts towards suspending the policy; a success does
        // not reset the count (units' attempts do).
        let outcome = match &result {
            Ok(_) => None,
            Err(e) if matches!(e.failure, Failure::Timeout { .. }) => Some(Outcome::TimedOut),
            Err(_) => Some(Outcome::Failed),
        };
        if let Some(outcome) = outcome
            && let Some(change) =
                self.breaker
                    .record(outcome, now_ms, self.wall_now(), &policy.info().name)
        {
            report.decisions.push(Decision::Breaker(change));
        }
        result.unwrap_or_else(|e| {
            report.decisions.push(Decision::PolicyError {
                unit: None,
                error: e.to_string(),
            });
            fifo()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_walk_finds_every_job_in_any_order_of_look_ups() {
        let mut cluster = Cluster::new();
        for name in ["a", "a-b", "b", "c"] {
            cluster.upsert_job(crate::fixtures::job(name, 1));
        }
        let unit = |name: &str| cluster.jobs.get(name).map_or(u64::MAX, |e| e.unit_id);
        let mut walk = JobWalk::new(&cluster.jobs);
        // As pods' keys sort: `a-b-worker-0` before `a-worker-0`.
        let asked = ["a-b", "a", "a", "b", "x", "c", "a", "d"];
        let found: Vec<Option<&str>> = asked
            .iter()
            .map(|k| {
                walk.find(&JobKey::from(*k), unit(k))
                    .map(|e| e.job.name.as_str())
            })
            .collect();
        assert_eq!(
            found,
            [
                Some("a-b"),
                Some("a"),
                Some("a"),
                Some("b"),
                None,
                Some("c"),
                Some("a"),
                None
            ]
        );
    }
}
