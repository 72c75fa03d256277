//! Binds the watch has not delivered: made by the replica that led before,
//! or by a Binding whose answer was lost. The snapshot must count them
//! before the room they took is given again.

use super::*;
use k8s_openapi::api::core::v1 as core;

/// `name` as the API server has it: a one-GPU pod of ours, bound to
/// `node` if given.
fn api_pod(name: &str, node: Option<&str>) -> core::Pod {
    match pod(name, None, "worker", 0, node, US) {
        Event::Pod(p) => *p,
        _ => unreachable!("a pod fixture is a pod"),
    }
}

fn state(l: &Loop<FakeCluster>, pod: &str) -> Option<PodState> {
    l.snapshot.sched.cluster().pod(pod).map(|(_, s)| s)
}

fn node_of(l: &Loop<FakeCluster>, name: &str) -> usize {
    l.snapshot
        .sched
        .cluster()
        .node_by_name(name)
        .expect("a known node")
}

/// The step just taken read the bound pods before anything else, found
/// `first` bound to `a` (the node's only GPU), and so bound nothing: no
/// second pod on that GPU, and no Binding the API server would refuse as
/// already bound.
fn first_read_bound_and_second_held(l: &Loop<FakeCluster>, fake: &FakeCluster) {
    let calls = fake.calls();
    assert_eq!(calls.first(), Some(&Call::BoundPods), "{calls:?}");
    assert_eq!(binds(&calls), Vec::<String>::new(), "{calls:?}");
    assert_eq!(state(l, "ml/first"), Some(PodState::Bound(node_of(l, "a"))));
    assert_eq!(state(l, "ml/second"), Some(PodState::Pending));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_binding_whose_answer_was_lost_is_read_back_and_counts_as_bound() {
    let fake = Arc::new(FakeCluster::default());
    {
        let mut s = fake.lock();
        s.pods.insert("ml/g-1".into(), api_pod("g-1", None));
        s.lost_answers.insert("ml/g-1".into());
    }
    let mut l = listed_loop(&fake);
    step_with(&mut l, [vec![node("a", 4)], gang("g", 3)].concat()).await;
    let calls = fake.calls();
    assert_eq!(binds(&calls), ["ml/g-0", "ml/g-1", "ml/g-2"]);
    assert!(calls.contains(&Call::ReadPod("ml/g-1".into())), "{calls:?}");
    // The gang is whole: nothing released, every member bound.
    assert!(
        !calls.iter().any(|c| matches!(c, Call::Release(_))),
        "{calls:?}"
    );
    let a = node_of(&l, "a");
    for p in ["ml/g-0", "ml/g-1", "ml/g-2"] {
        assert_eq!(state(&l, p), Some(PodState::Bound(a)), "{p}");
    }
    until_events(&fake, "Scheduled", 3).await;
    assert!(
        events_with(&fake.calls(), "FailedScheduling").is_empty(),
        "{:?}",
        fake.calls()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_refused_as_bound_elsewhere_is_read_back_and_counted_on_its_node() {
    let fake = Arc::new(FakeCluster::default());
    let mut l = listed_loop(&fake);
    // `full` has no GPU: the pod can only be placed on `a`.
    step_with(&mut l, vec![node("a", 1), node("full", 0)]).await;
    {
        let mut s = fake.lock();
        // Bound by someone else; the watch has not said so yet.
        s.pods.insert("ml/p".into(), api_pod("p", Some("full")));
        s.refuse_bind.insert(
            "ml/p".into(),
            ApiError::new(
                ApiErrorKind::Conflict,
                "binding ml/p to a: pod p is already assigned to node \"full\" (Conflict, 409)",
            ),
        );
    }
    step_with(&mut l, vec![pod("p", None, "worker", 0, None, US)]).await;
    let calls = fake.calls();
    assert_eq!(binds(&calls), ["ml/p"]);
    assert!(calls.contains(&Call::ReadPod("ml/p".into())), "{calls:?}");
    // Where the API server has it, not pending: `a` is free again.
    assert_eq!(
        state(&l, "ml/p"),
        Some(PodState::Bound(node_of(&l, "full")))
    );
    // Not told it is unschedulable: the API server says it is bound.
    assert!(
        !calls
            .iter()
            .any(|c| matches!(c, Call::Unschedulable { pod, .. } if pod == "ml/p")),
        "{calls:?}"
    );
    fake.clear();
    step_with(&mut l, vec![pod("q", None, "worker", 0, None, US)]).await;
    assert_eq!(binds(&fake.calls()), ["ml/q"], "{:?}", fake.calls());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_leader_reads_the_bound_pods_before_its_first_round() {
    let fake = Arc::new(FakeCluster::default());
    let mut l = listed_loop(&fake);
    step_with(&mut l, vec![node("a", 1)]).await;
    assert_eq!(fake.calls(), [Call::BoundPods]);
    l.handle(Msg::Leading(false));
    // While another replica leads, two pods arrive and it binds the first
    // to the node's only GPU; this replica's watch still has it pending.
    step_with(
        &mut l,
        vec![
            pod("first", None, "worker", 0, None, US),
            pod("second", None, "worker", 0, None, US),
        ],
    )
    .await;
    fake.lock()
        .pods
        .insert("ml/first".into(), api_pod("first", Some("a")));
    fake.clear();
    l.handle(Msg::Leading(true));
    l.step().await;
    first_read_bound_and_second_held(&l, &fake);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bind_whose_outcome_cannot_be_read_holds_the_next_round_until_the_bound_pods_are_read() {
    let fake = Arc::new(FakeCluster::default());
    let mut l = listed_loop(&fake);
    step_with(&mut l, vec![node("a", 1)]).await;
    {
        let mut s = fake.lock();
        s.pods.insert("ml/first".into(), api_pod("first", None));
        s.lost_answers.insert("ml/first".into());
        s.refuse_reads = Some(ApiError::new(
            ApiErrorKind::Unavailable,
            "connection refused",
        ));
    }
    fake.clear();
    step_with(&mut l, vec![pod("first", None, "worker", 0, None, US)]).await;
    // Landed, but neither its answer nor a read back says so: pending for
    // now, and nothing more is scheduled until the bound pods are read.
    assert_eq!(binds(&fake.calls()), ["ml/first"]);
    assert_eq!(state(&l, "ml/first"), Some(PodState::Pending));
    fake.clear();
    step_with(&mut l, vec![pod("second", None, "worker", 0, None, US)]).await;
    assert_eq!(fake.calls(), [Call::BoundPods], "nothing bound unread");
    fake.lock().refuse_reads = None;
    fake.clear();
    l.step().await;
    first_read_bound_and_second_held(&l, &fake);
}
