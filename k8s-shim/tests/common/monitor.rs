//! A watch on a namespace's pods for a whole test: every incarnation,
//! where it was bound, and how long each gang was partly bound; what pods
//! request and whether they are bound.

use super::*;

pub fn bound(p: &BTreeMap<String, Option<String>>) -> usize {
    p.values().filter(|n| n.is_some()).count()
}

pub fn is_bound(p: &Pod) -> bool {
    p.spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .is_some_and(|n| !n.is_empty())
}

pub fn is_finished(p: &Pod) -> bool {
    matches!(
        p.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Succeeded") | Some("Failed")
    )
}

/// Bound, not being deleted, not finished.
pub fn is_live_bound(p: &Pod) -> bool {
    is_bound(p) && p.metadata.deletion_timestamp.is_none() && !is_finished(p)
}

/// Requests summed over a pod's containers (cpu milli, memory MiB, GPUs).
#[derive(Debug, Default, Clone, Copy)]
pub struct Usage {
    pub cpu_milli: u64,
    pub memory_mib: u64,
    pub gpus: u64,
}

impl Usage {
    pub fn of(
        list: &BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>,
    ) -> Usage {
        use dragon_scheduler::quantity;
        Usage {
            cpu_milli: list
                .get("cpu")
                .map_or(0, |q| quantity::cpu_milli(&q.0).unwrap()),
            memory_mib: list
                .get("memory")
                .map_or(0, |q| quantity::value(&q.0).unwrap().div_ceil(1 << 20)),
            gpus: list
                .get("nvidia.com/gpu")
                .map_or(0, |q| quantity::value(&q.0).unwrap()),
        }
    }

    pub fn plus(self, o: &Usage) -> Usage {
        Usage {
            cpu_milli: self.cpu_milli + o.cpu_milli,
            memory_mib: self.memory_mib + o.memory_mib,
            gpus: self.gpus + o.gpus,
        }
    }

    pub fn fits(&self, cap: &Usage) -> bool {
        self.cpu_milli <= cap.cpu_milli
            && self.memory_mib <= cap.memory_mib
            && self.gpus <= cap.gpus
    }
}

pub fn requests(p: &Pod) -> Usage {
    p.spec
        .iter()
        .flat_map(|s| &s.containers)
        .filter_map(|c| c.resources.as_ref().and_then(|r| r.requests.as_ref()))
        .fold(Usage::default(), |u, r| u.plus(&Usage::of(r)))
}

/// One pod incarnation (UID) as the monitor saw it.
#[derive(Debug, Clone)]
pub struct Seen {
    pub name: String,
    pub gang: Option<String>,
    /// The node it was bound to.
    pub node: Option<String>,
    /// It was seen bound to one node, then to another (impossible in
    /// Kubernetes; a double binding would show here).
    pub rebound: bool,
    pub bound_at: Option<Instant>,
    /// Deletion requested, finished or gone, whichever was seen first.
    pub dying_at: Option<Instant>,
    pub gone: bool,
    /// The last `status.nominatedNodeName` it was seen with.
    pub nominated: Option<String>,
}

#[derive(Default)]
struct GangWatch {
    size: usize,
    /// Times the gang was partly bound: (from, until).
    windows: Vec<(Instant, Option<Instant>)>,
}

#[derive(Default)]
struct MonitorState {
    pods: BTreeMap<String, Seen>,
    gangs: BTreeMap<String, GangWatch>,
}

impl MonitorState {
    fn update(&mut self, p: &Pod, gone: bool) {
        let now = Instant::now();
        let Some(uid) = p.metadata.uid.clone() else {
            return;
        };
        let seen = self.pods.entry(uid).or_insert_with(|| Seen {
            name: p.metadata.name.clone().unwrap_or_default(),
            gang: p
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get("scheduling.x-k8s.io/pod-group"))
                .cloned(),
            node: None,
            rebound: false,
            bound_at: None,
            dying_at: None,
            gone: false,
            nominated: None,
        });
        if let Some(n) = p
            .status
            .as_ref()
            .and_then(|s| s.nominated_node_name.clone())
            && !n.is_empty()
        {
            seen.nominated = Some(n);
        }
        if let Some(node) = p.spec.as_ref().and_then(|s| s.node_name.clone())
            && !node.is_empty()
        {
            if seen.node.as_ref().is_some_and(|n| *n != node) {
                seen.rebound = true;
            }
            seen.node = Some(node);
            seen.bound_at.get_or_insert(now);
        }
        if gone || p.metadata.deletion_timestamp.is_some() || is_finished(p) {
            seen.dying_at.get_or_insert(now);
        }
        seen.gone |= gone;
        self.recompute(now);
    }

    fn live_bound(&self, gang: &str) -> usize {
        self.pods
            .values()
            .filter(|s| s.gang.as_deref() == Some(gang) && s.node.is_some() && s.dying_at.is_none())
            .count()
    }

    fn recompute(&mut self, now: Instant) {
        let live: Vec<(String, usize)> = self
            .gangs
            .keys()
            .map(|g| (g.clone(), self.live_bound(g)))
            .collect();
        for (g, n) in live {
            let w = self.gangs.get_mut(&g).unwrap();
            let partial = n > 0 && n < w.size;
            let open = w.windows.last().is_some_and(|(_, end)| end.is_none());
            if partial && !open {
                w.windows.push((now, None));
            } else if !partial && open {
                w.windows.last_mut().unwrap().1 = Some(now);
            }
        }
    }
}

/// Watches a namespace's pods for the whole test: every incarnation (UID),
/// where it was bound, when it died, and how long each registered gang was
/// partly bound.
pub struct Monitor {
    watch: PodWatch<MonitorState>,
}

/// A watch of one namespace's pods feeding a state of the test's own,
/// stopped when dropped.
pub struct PodWatch<S> {
    pub state: std::sync::Arc<Mutex<S>>,
    task: tokio::task::JoinHandle<()>,
}

impl<S: Default + Send + 'static> PodWatch<S> {
    /// Start watching `ns`, each event given to `on` with the state; the
    /// watch is returned once its first list is done, or after `wait`
    /// (`false`: it was not done by then).
    pub async fn start(
        client: &Client,
        ns: &str,
        wait: Duration,
        mut on: impl FnMut(&mut S, kube::runtime::watcher::Event<Pod>) + Send + 'static,
    ) -> (PodWatch<S>, bool) {
        use futures::StreamExt;
        use kube::runtime::{WatchStreamExt, watcher};
        let state = std::sync::Arc::new(Mutex::new(S::default()));
        let api: Api<Pod> = Api::namespaced(client.clone(), ns);
        let st = state.clone();
        let (ready_tx, ready_rx) = tokio::sync::oneshot::channel();
        let task = tokio::spawn(async move {
            let mut ready = Some(ready_tx);
            let mut stream = watcher(api, watcher::Config::default())
                .default_backoff()
                .boxed();
            while let Some(item) = stream.next().await {
                let Ok(event) = item else { continue };
                let listed = matches!(event, watcher::Event::InitDone);
                on(&mut st.lock().unwrap(), event);
                if listed && let Some(tx) = ready.take() {
                    let _ = tx.send(());
                }
            }
        });
        let ready = matches!(tokio::time::timeout(wait, ready_rx).await, Ok(Ok(())));
        (PodWatch { state, task }, ready)
    }
}

impl<S> Drop for PodWatch<S> {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Monitor {
    pub async fn start(s: &Scenario) -> Monitor {
        use kube::runtime::watcher::Event;
        let mut listing: Option<std::collections::BTreeSet<String>> = None;
        let on = move |st: &mut MonitorState, event: Event<Pod>| match event {
            Event::Init => listing = Some(Default::default()),
            Event::InitApply(p) => {
                if let (Some(l), Some(uid)) = (listing.as_mut(), p.metadata.uid.clone()) {
                    l.insert(uid);
                }
                st.update(&p, false);
            }
            Event::InitDone => {
                // What vanished while the watch was down is gone.
                let listed = listing.take().unwrap_or_default();
                let now = Instant::now();
                for (uid, seen) in st.pods.iter_mut() {
                    if !listed.contains(uid) && !seen.gone {
                        seen.gone = true;
                        seen.dying_at.get_or_insert(now);
                    }
                }
                st.recompute(now);
            }
            Event::Apply(p) => st.update(&p, false),
            Event::Delete(p) => st.update(&p, true),
        };
        let (watch, _) = PodWatch::start(&s.client, &s.name, Duration::from_secs(30), on).await;
        Monitor { watch }
    }

    /// Wait until the monitor has seen every pod of the namespace as it is
    /// now (its watch may be catching up after an outage).
    pub async fn catch_up(&self, s: &Scenario) {
        until(60, "the pod monitor to catch up", || async {
            let pods = s.pods().await;
            let st = self.state();
            pods.iter().all(|p| {
                let node = p.spec.as_ref().and_then(|s| s.node_name.clone());
                p.metadata
                    .uid
                    .as_ref()
                    .and_then(|u| st.pods.get(u))
                    .is_some_and(|seen| node.is_none() || seen.node == node)
            })
        })
        .await;
    }

    /// Track gang `name` of `size` pods.
    pub fn gang(&self, name: &str, size: usize) {
        let mut st = self.state();
        st.gangs.insert(
            name.to_string(),
            GangWatch {
                size,
                windows: Vec::new(),
            },
        );
        st.recompute(Instant::now());
    }

    /// The longest time gang `name` was partly bound, counting only time
    /// after `since`.
    pub fn max_partial(&self, name: &str, since: Instant) -> Duration {
        let st = self.state();
        let now = Instant::now();
        st.gangs
            .get(name)
            .map(|g| {
                g.windows
                    .iter()
                    .map(|(from, to)| {
                        to.unwrap_or(now)
                            .saturating_duration_since((*from).max(since))
                    })
                    .max()
                    .unwrap_or_default()
            })
            .unwrap_or_default()
    }

    /// How many times gang `name` was partly bound.
    pub fn partial_windows(&self, name: &str) -> usize {
        let st = self.state();
        st.gangs.get(name).map_or(0, |g| g.windows.len())
    }

    /// Every incarnation seen so far.
    pub fn seen(&self) -> Vec<Seen> {
        self.state().pods.values().cloned().collect()
    }

    /// Incarnations of pod `name` that were bound.
    pub fn bound_incarnations(&self, name: &str) -> usize {
        let st = self.state();
        st.pods
            .values()
            .filter(|s| s.name == name && s.node.is_some())
            .count()
    }

    /// What the watch has seen so far, locked.
    fn state(&self) -> MutexGuard<'_, MonitorState> {
        self.watch.state.lock().unwrap()
    }

    /// Incarnations seen bound to two nodes.
    pub fn rebound(&self) -> Vec<Seen> {
        self.seen().into_iter().filter(|s| s.rebound).collect()
    }
}
