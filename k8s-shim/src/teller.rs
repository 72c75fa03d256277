//! Telling pods and PodGroups why they wait, from a task of its own: a
//! round hands over what it decided ([`Tell`]) and goes on; the task sends
//! each pending pod's `FailedScheduling` Event and `PodScheduled=False`
//! together, a native PodGroup's condition and the preemptors'
//! `nominatedNodeName`, up to a bound at once.
//!
//! Each is sent once per reason: the task remembers what it told a pod (or
//! a group) only once the API server took it, so what is lost while the
//! server is away goes out again the next time a round says it.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use futures::StreamExt;
use tokio::sync::Notify;
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};

use crate::cluster_io::{ClusterIo, Note, Regarding, Unschedulable};

/// What a round tells.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Tell {
    /// Why `pod` is still pending; `gated` when it waits for its
    /// scheduling gates (condition reason `SchedulingGated`).
    Pending {
        pod: String,
        reason: Arc<str>,
        gated: bool,
    },
    /// `pod` is bound: whatever it is told next is new.
    Bound(String),
    /// The `PodGroupInitiallyScheduled` condition of a native PodGroup:
    /// once True, never False again.
    Group {
        group: String,
        scheduled: bool,
        message: String,
    },
    /// The PodGroup is gone.
    GroupGone(String),
    /// A preemptor's `nominatedNodeName` (`None` clears it).
    Nominate { pod: String, node: Option<String> },
}

/// The sending side, kept by the scheduling loop.
pub struct Teller {
    tx: UnboundedSender<Tell>,
    progress: Arc<Progress>,
}

/// How many messages were handed over and how many the task is done with.
#[derive(Default)]
struct Progress {
    handed: AtomicU64,
    done: AtomicU64,
    changed: Notify,
}

impl Teller {
    /// A teller sending through `io`, up to `in_flight` (at least 1)
    /// requests at once.
    pub fn spawn<I: ClusterIo>(io: Arc<I>, in_flight: usize) -> Teller {
        let (tx, rx) = unbounded_channel();
        let progress = Arc::new(Progress::default());
        let task = Task {
            io,
            in_flight: in_flight.max(1),
            told: BTreeMap::new(),
            conditions: BTreeMap::new(),
            progress: progress.clone(),
        };
        tokio::spawn(task.run(rx));
        Teller { tx, progress }
    }

    /// Hand `tell` over to be sent.
    pub fn tell(&self, tell: Tell) {
        self.progress.handed.fetch_add(1, Ordering::AcqRel);
        // Closed only with the runtime, when nothing is sent any more.
        let _ = self.tx.send(tell);
    }

    /// Wait up to `limit` for everything handed over so far to be sent (or
    /// refused); how many messages were still unsent when it gave up.
    pub async fn flush(&self, limit: Duration) -> u64 {
        let target = self.progress.handed.load(Ordering::Acquire);
        let progress = &self.progress;
        let _ = tokio::time::timeout(limit, async {
            loop {
                // Registered before the check, so progress in between is
                // not missed.
                let notified = progress.changed.notified();
                if progress.done.load(Ordering::Acquire) >= target {
                    return;
                }
                notified.await;
            }
        })
        .await;
        target.saturating_sub(self.progress.done.load(Ordering::Acquire))
    }
}

/// One request to send.
enum Request {
    Pending {
        pod: String,
        reason: Arc<str>,
        gated: bool,
    },
    Group {
        group: String,
        scheduled: bool,
        message: String,
    },
    Nominate {
        pod: String,
        node: Option<String>,
    },
}

struct Task<I> {
    io: Arc<I>,
    in_flight: usize,
    /// The reason last told each pod.
    told: BTreeMap<String, Arc<str>>,
    /// The condition last written on each native PodGroup.
    conditions: BTreeMap<String, (bool, String)>,
    progress: Arc<Progress>,
}

impl<I: ClusterIo> Task<I> {
    /// Take what is queued, send the latest for each pod and group,
    /// remember what went out, and again, until the loop is gone.
    async fn run(mut self, mut rx: UnboundedReceiver<Tell>) {
        while let Some(first) = rx.recv().await {
            let mut batch = vec![first];
            while let Ok(more) = rx.try_recv() {
                batch.push(more);
            }
            let count = batch.len() as u64;
            let requests = self.requests(batch);
            let sent: Vec<Request> = futures::stream::iter(requests)
                .map(|request| self.send(request))
                .buffer_unordered(self.in_flight)
                .filter_map(std::future::ready)
                .collect()
                .await;
            for request in sent {
                match request {
                    Request::Pending { pod, reason, .. } => {
                        self.told.insert(pod, reason);
                    }
                    Request::Group {
                        group,
                        scheduled,
                        message,
                    } => {
                        self.conditions.insert(group, (scheduled, message));
                    }
                    Request::Nominate { .. } => {}
                }
            }
            self.progress.done.fetch_add(count, Ordering::AcqRel);
            self.progress.changed.notify_waiters();
        }
    }

    /// The requests `batch` asks for: the latest of each pod's reason,
    /// group's condition and pod's nomination, leaving out what was told
    /// already.
    fn requests(&mut self, batch: Vec<Tell>) -> Vec<Request> {
        let mut pending: BTreeMap<String, (Arc<str>, bool)> = BTreeMap::new();
        let mut groups: BTreeMap<String, (bool, String)> = BTreeMap::new();
        let mut nominations: BTreeMap<String, Option<String>> = BTreeMap::new();
        for tell in batch {
            match tell {
                Tell::Pending { pod, reason, gated } => {
                    pending.insert(pod, (reason, gated));
                }
                Tell::Bound(pod) => {
                    self.told.remove(&pod);
                    pending.remove(&pod);
                }
                Tell::Group {
                    group,
                    scheduled,
                    message,
                } => {
                    // Once True, never False again: not even later in
                    // the same batch.
                    if groups.get(&group).is_none_or(|(was, _)| !was) {
                        groups.insert(group, (scheduled, message));
                    }
                }
                Tell::GroupGone(group) => {
                    self.conditions.remove(&group);
                    groups.remove(&group);
                }
                Tell::Nominate { pod, node } => {
                    nominations.insert(pod, node);
                }
            }
        }
        let pending = pending
            .into_iter()
            .filter(|(pod, (reason, _))| self.told.get(pod) != Some(reason))
            .map(|(pod, (reason, gated))| Request::Pending { pod, reason, gated });
        let groups = groups
            .into_iter()
            .filter(
                |(group, (scheduled, message))| match self.conditions.get(group) {
                    Some((true, _)) => false,
                    Some((s, m)) => s != scheduled || m != message,
                    None => true,
                },
            )
            .map(|(group, (scheduled, message))| Request::Group {
                group,
                scheduled,
                message,
            });
        let nominations = nominations
            .into_iter()
            .map(|(pod, node)| Request::Nominate { pod, node });
        pending.chain(groups).chain(nominations).collect()
    }

    /// Send one request; it comes back when the API server took it.
    async fn send(&self, request: Request) -> Option<Request> {
        let io = self.io.as_ref();
        let ok = match &request {
            Request::Pending { pod, reason, gated } => {
                let note = Note {
                    regarding: Regarding::Pod(pod.clone()),
                    type_: "Warning",
                    reason: "FailedScheduling",
                    note: reason.to_string(),
                };
                let condition = Unschedulable {
                    reason: match gated {
                        true => "SchedulingGated",
                        false => "Unschedulable",
                    },
                    message: reason.to_string(),
                };
                let (published, set) =
                    futures::join!(io.event(&note), io.pod_unschedulable(pod, &condition));
                if let Err(e) = &published {
                    tracing::warn!(pod, "cannot publish event: {e}");
                }
                if let Err(e) = &set {
                    tracing::debug!(pod, "cannot set PodScheduled=False: {e}");
                }
                published.is_ok() && set.is_ok()
            }
            Request::Group {
                group,
                scheduled,
                message,
            } => match io.group_condition(group, *scheduled, message).await {
                Ok(()) => true,
                Err(e) => {
                    tracing::debug!(group, "cannot set the PodGroup's condition: {e}");
                    false
                }
            },
            Request::Nominate { pod, node } => match io.nominate(pod, node.as_deref()).await {
                Ok(()) => true,
                Err(e) => {
                    tracing::warn!(pod, "cannot set nominatedNodeName: {e}");
                    false
                }
            },
        };
        ok.then_some(request)
    }
}
