//! Sending what rounds tell, off the loop: a task of its own takes each
//! round's [`Tell`]s and sends them while the loop goes on to the next
//! round. Tells about one pod (or one PodGroup) go out in the order they
//! were made, each after the one before it has been answered, so a
//! nomination set and then cleared ends cleared; different pods go up to
//! `bindConcurrency` at once. The task remembers what each pod and group
//! was last told, once the API server has accepted it, so a reason goes
//! out once, and one refused goes out again when a round says it again.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use tokio::sync::{mpsc, oneshot};

use dragon_framework::ApiErrorKind;

use crate::cluster_io::{ClusterIo, Note, Regarding, Unschedulable, Versioned};
use dragon_framework::{NodeName, PodKey};

/// One thing a round tells the API server, or what the teller must forget.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Tell {
    /// Why a pending pod waits: a `FailedScheduling` Event and
    /// `PodScheduled=False` (reason `SchedulingGated` when `gated`), each
    /// once per reason; the condition only on the pod's `version` as the
    /// round saw it (so never on a pod bound since).
    Waiting {
        pod: PodKey,
        reason: String,
        gated: bool,
        version: Option<String>,
    },
    /// The pod is bound: what it was told is forgotten, so a later wait is
    /// told again.
    Bound { pod: PodKey },
    /// The pod is gone: what it was told is forgotten.
    PodGone { pod: PodKey },
    /// `nominatedNodeName` set, or cleared (`None`), on the pod's
    /// `version` as the round saw it.
    Nominate {
        pod: PodKey,
        node: Option<NodeName>,
        version: Option<String>,
    },
    /// The `PodGroupInitiallyScheduled` condition of a native PodGroup:
    /// once True it is never written again.
    Group {
        group: String,
        scheduled: bool,
        message: String,
    },
    /// The PodGroup is gone: its condition is forgotten.
    GroupGone { group: String },
}

/// Whom a tell is about: tells about one target are sent in order.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Target {
    Pod(PodKey),
    Group(String),
}

impl Tell {
    fn target(&self) -> Target {
        match self {
            Tell::Waiting { pod, .. }
            | Tell::Bound { pod }
            | Tell::PodGone { pod }
            | Tell::Nominate { pod, .. } => Target::Pod(pod.clone()),
            Tell::Group { group, .. } | Tell::GroupGone { group } => Target::Group(group.clone()),
        }
    }
}

/// What a target was last told and the API server accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Told {
    Pod(PodTold),
    /// A group's condition: (scheduled, message).
    Condition(bool, String),
}

/// What a pod was told, and the version our own last write made.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct PodTold {
    /// The reason of its last Event.
    event: Option<String>,
    /// The reason of its last condition.
    condition: Option<String>,
    /// (the version a round saw, the version our writes made of it): a
    /// later round that still saw the first (its watch behind our own
    /// write) writes on the second.
    written: Option<(String, String)>,
}

impl PodTold {
    /// The version to write on, for a round that saw `seen`.
    fn on<'a>(&'a self, seen: Option<&'a str>) -> Option<&'a str> {
        match (&self.written, seen) {
            (Some((from, to)), Some(s)) if from == s => Some(to),
            _ => seen,
        }
    }

    /// Our write for a round that saw `seen` made `made`.
    fn wrote(&mut self, seen: Option<&str>, made: Option<String>) {
        let (Some(seen), Some(made)) = (seen, made) else {
            return;
        };
        let from = match self.written.take() {
            Some((from, _)) if from == seen => from,
            _ => seen.to_string(),
        };
        self.written = Some((from, made));
    }
}

enum Msg {
    Tells(Vec<Tell>),
    /// Answered once everything sent before it has been answered.
    Flush(oneshot::Sender<()>),
}

/// The handle the loop sends tells through.
pub struct Teller {
    tx: mpsc::UnboundedSender<Msg>,
}

impl Teller {
    /// Spawn the sending task over `io`, with up to `concurrency` targets
    /// in flight at once.
    pub fn spawn<I: ClusterIo>(io: Arc<I>, concurrency: usize) -> Teller {
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::spawn(run(io, concurrency.max(1), rx));
        Teller { tx }
    }

    /// Have `tells` sent, after everything sent before them.
    pub fn send(&self, tells: Vec<Tell>) {
        if tells.is_empty() {
            return;
        }
        // Closed only with the runtime, when nothing is sent any more.
        let _ = self.tx.send(Msg::Tells(tells));
    }

    /// Wait until every tell sent so far has been answered, for at most
    /// `limit`; false if time ran out.
    pub async fn flush(&self, limit: Duration) -> bool {
        let (done, answered) = oneshot::channel();
        if self.tx.send(Msg::Flush(done)).is_err() {
            return true;
        }
        matches!(tokio::time::timeout(limit, answered).await, Ok(Ok(())))
    }
}

async fn run<I: ClusterIo>(io: Arc<I>, concurrency: usize, mut rx: mpsc::UnboundedReceiver<Msg>) {
    let mut told: HashMap<Target, Told> = HashMap::new();
    while let Some(first) = rx.recv().await {
        // Everything queued meanwhile goes in this pass, in order.
        let mut chains: BTreeMap<Target, Vec<Tell>> = BTreeMap::new();
        let mut flushes = Vec::new();
        let mut take = |msg: Msg| match msg {
            Msg::Tells(tells) => {
                for t in tells {
                    chains.entry(t.target()).or_default().push(t);
                }
            }
            Msg::Flush(done) => flushes.push(done),
        };
        take(first);
        while let Ok(msg) = rx.try_recv() {
            take(msg);
        }
        let io = io.as_ref();
        let results: Vec<(Target, Option<Told>)> = futures::stream::iter(chains)
            .map(|(target, tells)| {
                let last = told.get(&target).cloned();
                async move {
                    let last = send_chain(io, &tells, last).await;
                    (target, last)
                }
            })
            .buffer_unordered(concurrency)
            .collect()
            .await;
        for (target, last) in results {
            match last {
                Some(t) => told.insert(target, t),
                None => told.remove(&target),
            };
        }
        for done in flushes {
            let _ = done.send(());
        }
    }
}

/// Send one target's tells in order, starting from what it was last told;
/// what it was last told after them. A pod's status is written on the
/// version its round saw (or on the one our own writes made of it), so a
/// pod bound since refuses it.
async fn send_chain<I: ClusterIo>(io: &I, tells: &[Tell], mut last: Option<Told>) -> Option<Told> {
    // Tells before the pod was bound are stale: its binding said the rest
    // (kube-scheduler's API dispatcher likewise lets a Binding overwrite a
    // status patch still queued for the pod); before it was deleted, moot.
    let from = tells
        .iter()
        .rposition(|t| matches!(t, Tell::Bound { .. } | Tell::PodGone { .. }))
        .unwrap_or(0);
    for tell in &tells[from..] {
        let mut pod_told = || match last.take() {
            Some(Told::Pod(told)) => told,
            _ => PodTold::default(),
        };
        match tell {
            Tell::Waiting {
                pod,
                reason,
                gated,
                version,
            } => {
                let mut told = pod_told();
                let new = |said: &Option<String>| said.as_deref() != Some(reason.as_str());
                let on = told.on(version.as_deref()).map(str::to_string);
                let (published, set) = explain(
                    io,
                    (pod, reason),
                    new(&told.event),
                    new(&told.condition).then_some((*gated, on.as_deref())),
                )
                .await;
                if published {
                    told.event = Some(reason.clone());
                }
                if let Some(made) = set {
                    told.condition = Some(reason.clone());
                    told.wrote(version.as_deref(), made);
                }
                last = Some(Told::Pod(told));
            }
            Tell::Bound { .. } | Tell::PodGone { .. } | Tell::GroupGone { .. } => last = None,
            Tell::Nominate { pod, node, version } => {
                let mut told = pod_told();
                let on = told.on(version.as_deref()).map(str::to_string);
                match io.nominate(pod, node.as_deref(), on.as_deref()).await {
                    Ok(made) => told.wrote(version.as_deref(), made),
                    // Bound (or changed) since the round: it no longer
                    // waits for that node, or its next round says so.
                    Err(e) if e.kind == ApiErrorKind::Conflict => {
                        tracing::debug!(%pod, "nomination not written: {e}")
                    }
                    Err(e) => tracing::warn!(%pod, "cannot set nominatedNodeName: {e}"),
                }
                last = Some(Told::Pod(told));
            }
            Tell::Group {
                group,
                scheduled,
                message,
            } => {
                let now = Told::Condition(*scheduled, message.clone());
                if matches!(last, Some(Told::Condition(true, _))) || last.as_ref() == Some(&now) {
                    continue;
                }
                match io.group_condition(group, *scheduled, message).await {
                    Ok(()) => last = Some(now),
                    Err(e) => {
                        tracing::debug!(group, "cannot set the PodGroup's condition: {e}")
                    }
                }
            }
        }
    }
    last
}

/// A pod's Event (when `event`) and condition (when `condition`: whether
/// gated, and the version to write it on), together: whether the Event was
/// accepted (or not needed), and the pod's version after the condition
/// (`Some(None)` when not needed or the version is unknown; `None` when
/// refused).
async fn explain<I: ClusterIo>(
    io: &I,
    (pod, reason): (&str, &str),
    event: bool,
    condition: Option<(bool, Versioned<'_>)>,
) -> (bool, Option<Option<String>>) {
    let publish = async {
        if !event {
            return true;
        }
        let note = Note {
            regarding: Regarding::Pod(pod.to_string()),
            type_: "Warning",
            reason: "FailedScheduling",
            note: reason.to_string(),
        };
        io.event(&note)
            .await
            .inspect_err(|e| tracing::warn!(pod, "cannot publish event: {e}"))
            .is_ok()
    };
    let set = async {
        let Some((gated, version)) = condition else {
            return Some(None);
        };
        let condition = Unschedulable {
            reason: if gated {
                "SchedulingGated"
            } else {
                "Unschedulable"
            },
            message: reason.to_string(),
        };
        match io.pod_unschedulable(pod, &condition, version).await {
            Ok(version) => Some(version),
            // Changed since the round (bound, perhaps): not written; if it
            // still waits, the round its change brings says so again.
            Err(e) if e.kind == ApiErrorKind::Conflict => None,
            Err(e) => {
                tracing::debug!(pod, "cannot set PodScheduled=False: {e}");
                None
            }
        }
    };
    futures::join!(publish, set)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster_io::fake::{Call, FakeCluster};

    const SENT: Duration = Duration::from_secs(5);

    fn waiting(pod: &str, reason: &str) -> Tell {
        Tell::Waiting {
            pod: pod.into(),
            reason: reason.into(),
            gated: false,
            version: Some("1".into()),
        }
    }

    fn nominate(pod: &str, node: Option<&str>) -> Tell {
        Tell::Nominate {
            pod: pod.into(),
            node: node.map(NodeName::from),
            version: Some("1".into()),
        }
    }

    fn group(scheduled: bool, message: &str) -> Tell {
        Tell::Group {
            group: "ml/g".into(),
            scheduled,
            message: message.into(),
        }
    }

    /// Events about each pod, in the order sent.
    fn events(fake: &FakeCluster) -> Vec<(String, String)> {
        fake.calls()
            .into_iter()
            .filter_map(|c| match c {
                Call::Event(n) => match n.regarding {
                    Regarding::Pod(p) => Some((p, n.note)),
                    Regarding::PodGroup(_) => None,
                },
                _ => None,
            })
            .collect()
    }

    #[tokio::test]
    async fn a_nomination_set_then_cleared_ends_cleared_even_when_sent_together() {
        let fake = Arc::new(FakeCluster::default());
        let teller = Teller::spawn(fake.clone(), 4);
        teller.send(vec![nominate("ml/p", Some("a")), waiting("ml/q", "full")]);
        teller.send(vec![nominate("ml/p", None)]);
        assert!(teller.flush(SENT).await);
        let nominations: Vec<Call> = fake
            .calls()
            .into_iter()
            .filter(|c| matches!(c, Call::Nominate { .. }))
            .collect();
        assert_eq!(
            nominations,
            [
                Call::Nominate {
                    pod: "ml/p".into(),
                    node: Some("a".into())
                },
                Call::Nominate {
                    pod: "ml/p".into(),
                    node: None
                }
            ]
        );
    }

    #[tokio::test]
    async fn a_reason_goes_out_once_again_when_refused_and_again_after_the_pod_was_bound() {
        let fake = Arc::new(FakeCluster::default());
        let teller = Teller::spawn(fake.clone(), 4);
        fake.lock().refuse_events.insert("ml/q".into());
        teller.send(vec![waiting("ml/p", "full"), waiting("ml/q", "full")]);
        teller.send(vec![waiting("ml/p", "full"), waiting("ml/q", "full")]);
        assert!(teller.flush(SENT).await);
        assert_eq!(
            events(&fake),
            [
                ("ml/p".to_string(), "full".to_string()),
                ("ml/q".into(), "full".into()),
                ("ml/q".into(), "full".into())
            ],
            "ml/q's refused Event is sent again; ml/p's accepted one is not"
        );
        fake.clear();
        teller.send(vec![
            waiting("ml/p", "full"),
            Tell::Bound { pod: "ml/p".into() },
            waiting("ml/p", "full"),
            waiting("ml/p", "still full"),
        ]);
        assert!(teller.flush(SENT).await);
        assert_eq!(
            events(&fake),
            [
                ("ml/p".to_string(), "full".to_string()),
                ("ml/p".into(), "still full".into())
            ]
        );
        assert!(fake.calls().contains(&Call::Unschedulable {
            pod: "ml/p".into(),
            reason: "Unschedulable".into(),
            message: "still full".into()
        }));
    }

    #[tokio::test]
    async fn a_pod_deleted_is_forgotten_and_one_made_again_under_its_name_is_told_afresh() {
        let fake = Arc::new(FakeCluster::default());
        let teller = Teller::spawn(fake.clone(), 4);
        teller.send(vec![waiting("ml/p", "full"), nominate("ml/p", Some("a"))]);
        teller.send(vec![Tell::PodGone { pod: "ml/p".into() }]);
        assert!(teller.flush(SENT).await);
        fake.clear();
        teller.send(vec![waiting("ml/p", "full")]);
        assert!(teller.flush(SENT).await);
        assert_eq!(events(&fake), [("ml/p".to_string(), "full".to_string())]);
        teller.send(vec![
            waiting("ml/p", "still full"),
            Tell::PodGone { pod: "ml/p".into() },
        ]);
        assert!(teller.flush(SENT).await);
        assert_eq!(events(&fake).len(), 1, "nothing sent about a pod gone");
    }

    #[tokio::test]
    async fn a_condition_is_written_only_on_the_version_the_round_saw_and_its_event_once() {
        let fake = Arc::new(FakeCluster::default());
        let teller = Teller::spawn(fake.clone(), 4);
        // Bound (or otherwise changed) since the rounds saw version 1: the
        // API server refuses the condition; the Event is not sent twice.
        fake.lock().versions.insert("ml/p".into(), "2".into());
        teller.send(vec![waiting("ml/p", "full")]);
        teller.send(vec![waiting("ml/p", "full")]);
        assert!(teller.flush(SENT).await);
        assert_eq!(events(&fake).len(), 1, "{:?}", fake.calls());
        let conditions = |fake: &FakeCluster| {
            fake.calls()
                .into_iter()
                .filter(|c| matches!(c, Call::Unschedulable { .. }))
                .count()
        };
        assert_eq!(conditions(&fake), 2, "tried again, each time refused");
        // Still waiting when a round sees version 2: written once.
        let at_2 = |reason: &str| Tell::Waiting {
            pod: "ml/p".into(),
            reason: reason.into(),
            gated: false,
            version: Some("2".into()),
        };
        teller.send(vec![at_2("full"), at_2("full")]);
        assert!(teller.flush(SENT).await);
        assert_eq!(conditions(&fake), 3);
        assert_eq!(events(&fake).len(), 1);
        // A later round whose watch has not yet brought our own write
        // still saw version 2: its nomination goes on the version that
        // write made, not refused.
        teller.send(vec![Tell::Nominate {
            pod: "ml/p".into(),
            node: Some("a".into()),
            version: Some("2".into()),
        }]);
        assert!(teller.flush(SENT).await);
        let calls = fake.calls();
        assert!(matches!(calls.last(), Some(Call::Nominate { .. })));
        let now = fake.lock().versions["ml/p"].clone();
        assert_eq!(
            now,
            format!("w{}", calls.len()),
            "written by the nomination"
        );
    }

    #[tokio::test]
    async fn a_groups_condition_is_written_when_it_changes_and_never_after_true() {
        let fake = Arc::new(FakeCluster::default());
        let teller = Teller::spawn(fake.clone(), 4);
        teller.send(vec![group(false, "short"), group(false, "short")]);
        teller.send(vec![group(true, "2 pods scheduled"), group(false, "short")]);
        assert!(teller.flush(SENT).await);
        let written = |fake: &FakeCluster| {
            fake.calls()
                .into_iter()
                .filter_map(|c| match c {
                    Call::GroupCondition { scheduled, .. } => Some(scheduled),
                    _ => None,
                })
                .collect::<Vec<_>>()
        };
        assert_eq!(written(&fake), [false, true]);
        fake.clear();
        teller.send(vec![
            Tell::GroupGone {
                group: "ml/g".into(),
            },
            group(false, "short"),
        ]);
        assert!(teller.flush(SENT).await);
        assert_eq!(written(&fake), [false], "a group made again starts afresh");
    }
}
