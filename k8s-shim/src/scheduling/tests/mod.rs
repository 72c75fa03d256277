use super::*;
use crate::cluster_io::fake::{Call, FakeCluster};
use crate::fixtures::{
    claiming, gpu_claim, gpu_class, gpu_class_serving_gpus, gpu_slice, group, local_class,
    local_volume, mounting, node, pod, volume_claim, with_hostname,
};
use dragon_framework::volumes::VolumeBinding;
use dragon_framework::{ApiError, ApiErrorKind, SchedulerConfig};
use dragon_runtime::{ComponentCache, LoadOptions, PolicyEngine};

const US: &str = "dragon-scheduler";

/// A leading loop over `fake` with the bundled baseline, every kind
/// listed (empty) and no backoff.
fn listed_loop(fake: &Arc<FakeCluster>) -> Loop<FakeCluster> {
    listed_loop_with(fake, "baseline", dragon_bundled::BASELINE)
}

/// [`listed_loop`] with another bundled policy.
fn listed_loop_with(fake: &Arc<FakeCluster>, name: &str, bytes: &[u8]) -> Loop<FakeCluster> {
    crate::cluster_io::fake::listed_loop(fake, US, name, bytes)
}

/// `events` applied, then one step, and what it told sent.
async fn step_with(l: &mut Loop<FakeCluster>, events: Vec<Event>) {
    for e in events {
        l.handle(Msg::Event(e));
    }
    l.step().await;
    assert!(l.flush_tells(Duration::from_secs(5)).await, "tells sent");
}

/// A gang of `size` one-GPU workers of PodGroup `g` (minMember `size`).
fn gang(g: &str, size: u32) -> Vec<Event> {
    let mut events = vec![group(g, size)];
    for i in 0..size {
        events.push(pod(&format!("{g}-{i}"), Some(g), "worker", i, None, US));
    }
    events
}

fn binds(calls: &[Call]) -> Vec<String> {
    calls
        .iter()
        .filter_map(|c| match c {
            Call::Bind { pod, .. } => Some(pod.clone()),
            _ => None,
        })
        .collect()
}

fn events_with(calls: &[Call], reason: &str) -> Vec<(String, String)> {
    calls
        .iter()
        .filter_map(|c| match c {
            Call::Event(n) if n.reason == reason => match &n.regarding {
                Regarding::Pod(p) | Regarding::PodGroup(p) => Some((p.clone(), n.note.clone())),
            },
            _ => None,
        })
        .collect()
}

/// Wait (bounded) for the spawned Event tasks to have sent `n` events
/// with `reason`.
async fn until_events(fake: &FakeCluster, reason: &str, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while events_with(&fake.calls(), reason).len() < n {
        assert!(
            Instant::now() < deadline,
            "{n} {reason} events: {:?}",
            fake.calls()
        );
        tokio::task::yield_now().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nothing_is_sent_before_every_kind_is_listed_or_while_not_leading() {
    let fake = Arc::new(FakeCluster::default());
    let mut l = listed_loop(&fake);
    l.listed.remove(&Kind::Volume);
    step_with(&mut l, [vec![node("a", 8)], gang("g", 2)].concat()).await;
    assert_eq!(fake.calls(), vec![], "not listed yet");
    l.handle(Msg::Listed {
        kind: Kind::Volume,
        keys: BTreeSet::new(),
    });
    l.handle(Msg::Leading(false));
    l.step().await;
    assert_eq!(fake.calls(), vec![], "a follower");
    l.handle(Msg::Leading(true));
    l.step().await;
    assert_eq!(binds(&fake.calls()), ["ml/g-0", "ml/g-1"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gang_is_bound_together_and_each_pod_gets_its_scheduled_event() {
    let fake = Arc::new(FakeCluster::default());
    let mut l = listed_loop(&fake);
    step_with(
        &mut l,
        [vec![node("a", 2), node("b", 2)], gang("g", 3)].concat(),
    )
    .await;
    assert_eq!(binds(&fake.calls()), ["ml/g-0", "ml/g-1", "ml/g-2"]);
    until_events(&fake, "Scheduled", 3).await;
    let notes = events_with(&fake.calls(), "Scheduled");
    assert!(
        notes
            .iter()
            .any(|(p, n)| p == "ml/g-0" && n.starts_with("Successfully assigned ml/g-0 to ")),
        "{notes:?}"
    );
    assert!(
        events_with(&fake.calls(), "FailedScheduling").is_empty(),
        "{:?}",
        fake.calls()
    );
}

/// A gang of `size` workers of PodGroup `g`, each claiming a GPU through
/// a claim of its own (`g-i-gpu`), with the claims.
fn claiming_gang(g: &str, size: u32) -> Vec<Event> {
    let mut events = vec![group(g, size)];
    for i in 0..size {
        let claim = format!("{g}-{i}-gpu");
        events.push(gpu_claim(&claim));
        events.push(claiming(
            pod(&format!("{g}-{i}"), Some(g), "worker", i, None, US),
            &claim,
        ));
    }
    events
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gang_claiming_devices_has_each_claim_allocated_before_its_binding() {
    let fake = Arc::new(FakeCluster::default());
    let mut l = listed_loop(&fake);
    step_with(
        &mut l,
        [
            vec![node("a", 8), gpu_class(), gpu_slice("a", 1)],
            claiming_gang("g", 2),
        ]
        .concat(),
    )
    .await;
    assert!(binds(&fake.calls()).is_empty(), "one GPU for two members");
    step_with(&mut l, vec![gpu_slice("a", 2)]).await;
    let calls = fake.calls();
    assert_eq!(binds(&calls), ["ml/g-0", "ml/g-1"]);
    for i in 0..2 {
        let pod = format!("ml/g-{i}");
        let at = |wanted: &Call| calls.iter().position(|c| c == wanted);
        let allocated = at(&Call::Allocate {
            claim: format!("ml/g-{i}-gpu"),
            pod: pod.clone(),
        })
        .expect("its claim is allocated");
        let bound = at(&Call::Bind {
            pod: pod.clone(),
            node: "a".into(),
        })
        .expect("it is bound");
        assert!(allocated < bound, "{calls:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gpu_request_on_a_node_advertising_none_gets_its_extended_resource_claim_before_its_binding()
 {
    let fake = Arc::new(FakeCluster::default());
    let mut l = listed_loop(&fake);
    step_with(
        &mut l,
        vec![
            node("a", 0),
            gpu_class_serving_gpus(),
            gpu_slice("a", 2),
            pod("p", None, "", 0, None, US),
        ],
    )
    .await;
    let calls = fake.calls();
    let at = |wanted: &Call| calls.iter().position(|c| c == wanted);
    let allocated = at(&Call::AllocateExtended {
        pod: "ml/p".into(),
        classes: vec!["gpu".into()],
        devices: 1,
    })
    .expect("its GPU served by a device");
    let bound = at(&Call::Bind {
        pod: "ml/p".into(),
        node: "a".into(),
    })
    .expect("bound");
    assert!(allocated < bound, "{calls:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_claim_allocation_binds_no_member_of_its_gang_and_gives_back_what_was_written() {
    let fake = Arc::new(FakeCluster::default());
    fake.lock().refuse_allocate.insert(
        "ml/g-1-gpu".into(),
        ApiError::new(ApiErrorKind::Conflict, "the claim changed"),
    );
    let mut l = listed_loop(&fake);
    step_with(
        &mut l,
        [
            vec![node("a", 8), gpu_class(), gpu_slice("a", 2)],
            claiming_gang("g", 2),
        ]
        .concat(),
    )
    .await;
    let calls = fake.calls();
    assert!(binds(&calls).is_empty(), "{calls:?}");
    assert!(
        calls.contains(&Call::Allocate {
            claim: "ml/g-0-gpu".into(),
            pod: "ml/g-0".into()
        }),
        "{calls:?}"
    );
    // What was written for the member left unbound is given back.
    assert!(
        calls.contains(&Call::Unreserve {
            claim: "ml/g-0-gpu".into(),
            pod: "ml/g-0".into()
        }),
        "{calls:?}"
    );
}

/// Two nodes with a local volume each, and a gang of two whose members
/// each mount a claim of their own (`g-i-data`, access `mode`), or one
/// claim between them (`shared`).
fn volume_gang(mode: &str, shared: bool) -> Vec<Event> {
    let mut events = vec![
        with_hostname(node("a", 8)),
        with_hostname(node("b", 8)),
        local_class(),
        local_volume("pv-a", "a"),
        local_volume("pv-b", "b"),
        group("g", 2),
    ];
    for i in 0..2 {
        let claim = match shared {
            true => "data".to_string(),
            false => format!("g-{i}-data"),
        };
        events.push(volume_claim(&claim, mode));
        events.push(mounting(
            pod(&format!("g-{i}"), Some("g"), "worker", i, None, US),
            &claim,
        ));
    }
    events
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gang_with_unbound_local_claims_has_each_bound_to_a_volume_of_its_node_before_its_binding()
 {
    let fake = Arc::new(FakeCluster::default());
    let mut l = listed_loop(&fake);
    step_with(&mut l, volume_gang("ReadWriteOnce", false)).await;
    let calls = fake.calls();
    assert_eq!(binds(&calls).len(), 2, "{calls:?}");
    let last_volume = calls
        .iter()
        .rposition(|c| matches!(c, Call::BindVolume { .. }))
        .expect("volumes bound");
    let first_bind = calls
        .iter()
        .position(|c| matches!(c, Call::Bind { .. }))
        .expect("pods bound");
    assert!(
        last_volume < first_bind,
        "every volume before any Binding: {calls:?}"
    );
    for c in &calls {
        if let Call::Bind { pod, node } = c {
            let claim = format!("{}-data", pod);
            let wanted = Call::BindVolume {
                claim,
                binding: VolumeBinding::Volume(format!("pv-{node}")),
            };
            assert!(calls.contains(&wanted), "{pod} on {node}: {calls:?}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_not_bound_in_time_binds_no_member_of_its_gang() {
    let fake = Arc::new(FakeCluster::default());
    fake.lock().never_bound.insert("ml/g-1-data".into());
    let mut l = listed_loop(&fake);
    step_with(&mut l, volume_gang("ReadWriteOnce", false)).await;
    let calls = fake.calls();
    assert_eq!(
        calls
            .iter()
            .filter(|c| matches!(c, Call::BindVolume { .. }))
            .count(),
        2,
        "{calls:?}"
    );
    assert!(binds(&calls).is_empty(), "{calls:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_write_once_pod_claim_shared_within_a_gang_keeps_it_pending_named() {
    let fake = Arc::new(FakeCluster::default());
    let mut l = listed_loop(&fake);
    step_with(&mut l, volume_gang("ReadWriteOncePod", true)).await;
    let calls = fake.calls();
    assert!(binds(&calls).is_empty(), "{calls:?}");
    let told = calls.iter().any(|c| {
        matches!(c, Call::Unschedulable { message, .. } if message.contains("ReadWriteOncePod"))
    });
    assert!(told, "{calls:?}");
}

/// Claim `ml/NAME`, bound to CSI volume `pv-NAME` of driver `ebs`.
fn csi_claim(name: &str) -> Vec<Event> {
    let pv = format!(
        "metadata: {{name: pv-{name}}}\nspec:\n  capacity: {{storage: 1Gi}}\n  accessModes: [ReadWriteOnce]\n  csi: {{driver: ebs, volumeHandle: vol-{name}}}\n  claimRef: {{namespace: ml, name: {name}}}\nstatus: {{phase: Bound}}\n"
    );
    let pvc = format!(
        "metadata: {{name: {name}, namespace: ml}}\nspec:\n  accessModes: [ReadWriteOnce]\n  volumeName: pv-{name}\n  resources: {{requests: {{storage: 1Gi}}}}\nstatus: {{phase: Bound}}\n"
    );
    vec![
        Event::Volume(Box::new(serde_norway::from_str(&pv).unwrap())),
        Event::Claim(Box::new(serde_norway::from_str(&pvc).unwrap())),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_whose_csi_driver_attaches_one_volume_takes_no_second_pod_with_another() {
    let fake = Arc::new(FakeCluster::default());
    let mut l = listed_loop(&fake);
    let csi_node = Event::CsiNode(Box::new(
        serde_norway::from_str(
            "metadata: {name: a}\nspec:\n  drivers: [{name: ebs, nodeID: a, allocatable: {count: 1}}]\n",
        )
        .unwrap(),
    ));
    let events = [
        vec![node("a", 8), csi_node],
        csi_claim("one"),
        csi_claim("two"),
        vec![mounting(pod("first", None, "", 0, None, US), "one")],
    ]
    .concat();
    step_with(&mut l, events).await;
    assert_eq!(binds(&fake.calls()), ["ml/first"]);
    let first = pod("first", None, "", 0, Some("a"), US);
    step_with(
        &mut l,
        vec![
            mounting(first, "one"),
            mounting(pod("second", None, "", 0, None, US), "two"),
        ],
    )
    .await;
    let calls = fake.calls();
    assert_eq!(binds(&calls), ["ml/first"], "{calls:?}");
    let told = calls.iter().any(|c| {
        matches!(c, Call::Unschedulable { pod, message, .. }
            if pod == "ml/second" && message.contains("exceed max volume count"))
    });
    assert!(told, "{calls:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_bind_releases_the_bound_members_and_tells_each_waiting_pod_why() {
    let fake = Arc::new(FakeCluster::default());
    {
        let mut s = fake.lock();
        s.refuse_bind.insert(
            "ml/g-1".into(),
            ApiError::new(
                ApiErrorKind::Conflict,
                "binding ml/g-1 to a: pod g-1 is already assigned to node \"x\" (Conflict, 409)",
            ),
        );
        // No controller would recreate it: kept bound.
        s.uncontrolled.insert("ml/g-2".into());
    }
    let mut l = listed_loop(&fake);
    step_with(&mut l, [vec![node("a", 4)], gang("g", 3)].concat()).await;
    let calls = fake.calls();
    assert_eq!(binds(&calls), ["ml/g-0", "ml/g-1", "ml/g-2"]);
    let released: Vec<&Call> = calls
        .iter()
        .filter(|c| matches!(c, Call::Release(_)))
        .collect();
    assert_eq!(
        released,
        [
            &Call::Release("ml/g-0".into()),
            &Call::Release("ml/g-2".into())
        ]
    );
    // The snapshot agrees: the deleted member waits again, the kept one
    // stays bound.
    let state = |p: &str| l.snapshot.sched.cluster().pod(p).map(|(_, s)| s);
    assert_eq!(state("ml/g-0"), Some(PodState::Pending));
    assert!(matches!(state("ml/g-2"), Some(PodState::Bound(_))));
    // Each pod left waiting is told why, by an Event and a condition;
    // not the one the API server says is bound already (409).
    let failed = events_with(&calls, "FailedScheduling");
    let told: BTreeSet<&str> = failed.iter().map(|(p, _)| p.as_str()).collect();
    assert_eq!(told, BTreeSet::from(["ml/g-0"]));
    assert!(
            failed[0].1.starts_with(
                "binding failed, gang released but for 1 member(s) kept bound (no controller would recreate them): binding ml/g-1 to a: pod g-1 is already assigned"
            ),
            "{failed:?}"
        );
    assert!(calls.contains(&Call::Unschedulable {
        pod: "ml/g-0".into(),
        reason: "Unschedulable".into(),
        message: failed[0].1.clone(),
    }));
    assert!(
        !calls
            .iter()
            .any(|c| matches!(c, Call::Unschedulable { pod, .. } if pod == "ml/g-1")),
        "{calls:?}"
    );
    assert_eq!(events_with(&calls, "GangPartlyBound")[0].0, "ml/g-2");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_flight_recording_replays_to_the_same_decisions_with_the_servers_answers() {
    use crate::flight::{FlightRecorder, RecordingConfig, Run};
    use dragon_framework::record;

    let dir = std::env::temp_dir().join(format!("dragon-loop-rec-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let fake = Arc::new(FakeCluster::default());
    {
        let mut s = fake.lock();
        s.refuse_bind.insert(
            "ml/g-1".into(),
            ApiError::new(ApiErrorKind::Conflict, "pod g-1 is already assigned"),
        );
        s.uncontrolled.insert("ml/g-2".into());
    }
    let mut l = listed_loop(&fake);
    let config = RecordingConfig {
        dir: dir.clone(),
        ..RecordingConfig::default()
    };
    let run = Run {
        scheduling: SchedulerConfig::without_backoff(),
        policy: "baseline".into(),
        fallback: String::new(),
        started_ms: 1,
    };
    let recorder = FlightRecorder::open(config, run).unwrap();
    let file = recorder.current();
    l.taps.recorder = Some(recorder);
    l.snapshot.sched.keep_journal(true);
    // A refused bind (the gang released, one member kept), then a node
    // and a second gang, then the first gang's refusal lifted.
    step_with(&mut l, [vec![node("a", 4)], gang("g", 3)].concat()).await;
    step_with(&mut l, [vec![node("b", 4)], gang("h", 2)].concat()).await;
    fake.lock().refuse_bind.clear();
    l.dirty = true;
    l.step().await;
    assert!(binds(&fake.calls()).len() >= 6, "{:?}", fake.calls());

    let rec = record::read(&file.get().unwrap()).unwrap();
    assert_eq!(rec.frames.len(), 3);
    let policy = l.slot.current();
    let same = record::replay(
        &rec,
        policy.as_ref(),
        None,
        SchedulerConfig::without_backoff(),
    );
    assert_eq!(same.differences, vec![]);
    assert_eq!(same.refused_ops, 0);
    // Without the server's answers (every call succeeding) the first
    // round decides otherwise: the answers are what make it exact.
    let mut blind = rec.clone();
    for f in &mut blind.frames {
        let (Frame::Round { answers, .. } | Frame::Scale { answers, .. }) = f;
        answers.clear();
    }
    let differ = record::replay(
        &blind,
        policy.as_ref(),
        None,
        SchedulerConfig::without_backoff(),
    );
    assert!(!differ.differences.is_empty());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shadow_policy_is_compared_on_every_step_and_never_acts() {
    use crate::shadow::ShadowFeed;

    let fake = Arc::new(FakeCluster::default());
    // DRAGON serves (it packs lone pods); the baseline shadows it (it
    // spreads them).
    let mut l = listed_loop_with(&fake, "dragon", dragon_bundled::DRAGON);
    let engine = PolicyEngine::new().unwrap();
    let cache = ComponentCache::disabled();
    let baseline = WasmPolicy::from_bytes(
        &engine,
        &cache,
        "baseline",
        dragon_bundled::BASELINE,
        &LoadOptions::default(),
    )
    .unwrap();
    let slot = Arc::new(PolicySlot::new(engine, cache, baseline));
    let feed = ShadowFeed::spawn(
        slot,
        SchedulerConfig::without_backoff(),
        None,
        l.metrics.clone(),
    )
    .unwrap();
    l.taps.shadow = Some(feed);
    l.snapshot.sched.keep_journal(true);
    let pods: Vec<Event> = (0..4)
        .map(|i| pod(&format!("p-{i}"), None, "", 0, None, US))
        .collect();
    step_with(&mut l, [vec![node("a", 8), node("b", 8)], pods].concat()).await;
    let calls = fake.calls();
    let bound: BTreeSet<String> = calls
        .iter()
        .filter_map(|c| match c {
            Call::Bind { node, .. } => Some(node.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(binds(&calls).len(), 4, "{calls:?}");
    assert_eq!(
        bound.len(),
        1,
        "DRAGON packs, the shadow binds nothing: {calls:?}"
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    let view = loop {
        let v = l.metrics.shadow.lock().unwrap().clone();
        if v.same + v.different >= 4 {
            break v;
        }
        assert!(Instant::now() < deadline, "{v:?}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    assert_eq!(view.policy, "baseline");
    assert!(view.different >= 1, "{view:?}");
    let d = &view.disagreements[0];
    assert!(d.subject.starts_with("pod/ml/p-"), "{d:?}");
    assert!(
        d.live.starts_with("bound to ") && d.shadow.starts_with("bound to "),
        "{d:?}"
    );
    assert_eq!(view.diverged, 0);
    let text = l.metrics.render();
    assert!(
        text.contains("dragon_shadow_decisions_total{outcome=\"different\"}"),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiting_gang_is_told_once_per_reason_on_every_member() {
    let fake = Arc::new(FakeCluster::default());
    let mut l = listed_loop(&fake);
    step_with(&mut l, [vec![node("a", 2)], gang("g", 3)].concat()).await;
    let calls = fake.calls();
    assert!(binds(&calls).is_empty());
    let conditions: Vec<&Call> = calls
        .iter()
        .filter(|c| matches!(c, Call::Unschedulable { .. }))
        .collect();
    assert_eq!(conditions.len(), 3, "{calls:?}");
    assert_eq!(events_with(&calls, "FailedScheduling").len(), 3);
    // Tried again after a change that does not help (another
    // scheduler's pod): nothing new to say.
    fake.clear();
    step_with(
        &mut l,
        vec![pod("theirs", None, "worker", 0, None, "default-scheduler")],
    )
    .await;
    assert_eq!(
        fake.calls()
            .iter()
            .filter(|c| !matches!(c, Call::GroupStatus(_)))
            .count(),
        0,
        "{:?}",
        fake.calls()
    );
    // Room appears: the gang is bound.
    step_with(&mut l, vec![node("b", 2)]).await;
    assert_eq!(binds(&fake.calls()).len(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gang_admitted_at_its_minimum_shrinks_its_workload_through_scale() {
    let fake = Arc::new(FakeCluster::default());
    let target = "apps/v1/statefulsets/g";
    fake.lock().replicas.insert(target.into(), 4);
    let mut l = listed_loop_with(&fake, "dragon", dragon_bundled::DRAGON);
    let Event::Group(mut g) = group("g", 2) else {
        unreachable!("a PodGroup event")
    };
    g.annotations = BTreeMap::from([
        (SCALE_TARGET.to_string(), target.to_string()),
        (crate::translate::MIN_WORKERS.to_string(), "2".to_string()),
    ]);
    let mut events = vec![node("a", 2), Event::Group(g)];
    events.extend((0..4).map(|i| pod(&format!("g-{i}"), Some("g"), "worker", i, None, US)));
    step_with(&mut l, events).await;
    let calls = fake.calls();
    // The job's size is read from its target, two workers fit of four,
    // and the target is scaled to the two admitted.
    assert!(calls.contains(&Call::Replicas(target.into())), "{calls:?}");
    assert_eq!(binds(&calls), ["ml/g-0", "ml/g-1"]);
    assert!(
        calls.contains(&Call::Scale {
            job: "ml/g".into(),
            replicas: 2
        }),
        "{calls:?}"
    );
    // The snapshot follows: two workers wanted, the surplus gone.
    assert_eq!(l.snapshot.desired.get("ml/g"), Some(&2));
    assert_eq!(
        l.snapshot.sched.cluster().job("ml/g").map(|j| j.workers),
        Some(2)
    );
    assert!(l.snapshot.sched.cluster().pod("ml/g-3").is_none());
}

/// `event` (a pod) at `priority`.
fn prioritized(event: Event, priority: i32) -> Event {
    match event {
        Event::Pod(mut p) => {
            if let Some(spec) = p.spec.as_mut() {
                spec.priority = Some(priority);
            }
            Event::Pod(p)
        }
        other => other,
    }
}

/// One 4-GPU node full with gang `low` (priority 0, bound), and gang
/// `high` (priority 100) of `high` pods pending.
fn crowded(high: u32) -> Vec<Event> {
    let mut events = vec![node("a", 4), group("low", 4), group("high", high)];
    for i in 0..4 {
        events.push(pod(
            &format!("low-{i}"),
            Some("low"),
            "worker",
            i,
            Some("a"),
            US,
        ));
    }
    for i in 0..high {
        let p = pod(&format!("high-{i}"), Some("high"), "worker", i, None, US);
        events.push(prioritized(p, 100));
    }
    events
}

fn evictions(calls: &[Call], dry_run: bool) -> Vec<String> {
    calls
        .iter()
        .filter_map(|c| match c {
            Call::Evict { pod, dry_run: d } if *d == dry_run => Some(pod.clone()),
            _ => None,
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_victim_gang_is_evicted_whole_after_a_dry_run_of_every_eviction() {
    let fake = Arc::new(FakeCluster::default());
    let mut l = listed_loop_with(&fake, "dragon", dragon_bundled::DRAGON);
    step_with(&mut l, crowded(2)).await;
    let calls = fake.calls();
    let low: Vec<String> = (0..4).map(|i| format!("ml/low-{i}")).collect();
    assert_eq!(evictions(&calls, true), low, "{calls:?}");
    assert_eq!(evictions(&calls, false), low, "{calls:?}");
    let last_dry = calls
        .iter()
        .rposition(|c| matches!(c, Call::Evict { dry_run: true, .. }));
    let first_real = calls
        .iter()
        .position(|c| matches!(c, Call::Evict { dry_run: false, .. }));
    assert!(last_dry < first_real, "every dry run first: {calls:?}");
    assert_eq!(binds(&calls), Vec::<String>::new(), "not before they leave");
    until_events(&fake, "Preempted", 4).await;
    for (pod, note) in events_with(&fake.calls(), "Preempted") {
        assert!(pod.starts_with("ml/low-"), "{pod}");
        assert!(note.contains("preempted by job/ml/high"), "{note}");
    }

    // The victims leave; the preemptor takes their room.
    fake.clear();
    let gone = low.iter().map(|k| Event::PodGone(k.clone())).collect();
    step_with(&mut l, gone).await;
    assert_eq!(binds(&fake.calls()), vec!["ml/high-0", "ml/high-1"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_budget_refusing_one_eviction_leaves_the_whole_victim_running() {
    let fake = Arc::new(FakeCluster::default());
    fake.lock().protected.insert("ml/low-2".into());
    let mut l = listed_loop_with(&fake, "dragon", dragon_bundled::DRAGON);
    step_with(&mut l, crowded(2)).await;
    let calls = fake.calls();
    assert_eq!(
        evictions(&calls, true),
        vec!["ml/low-0", "ml/low-1", "ml/low-2"],
        "the dry runs stop at the refusal: {calls:?}"
    );
    assert_eq!(evictions(&calls, false), Vec::<String>::new());
    assert_eq!(
        l.metrics
            .preemption_victims
            .get_or_create(&crate::metrics::VictimLabels {
                result: crate::metrics::Victim::Refused
            })
            .get(),
        1
    );
}

mod stale;

mod ask;
