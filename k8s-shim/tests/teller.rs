//! The scheduling loop over the fake cluster (the `fake` feature): it goes
//! on scheduling while the API server has not yet answered what it told
//! about the pods that wait, and those requests all arrive once it does.

use std::sync::Arc;
use std::time::Duration;

use dragon_scheduler::cluster_io::fake::{Call, FakeCluster, listed_loop};
use dragon_scheduler::scheduling::{Loop, Msg};
use dragon_scheduler::snapshot::Event;

const US: &str = "dragon-scheduler";

fn node(name: &str, gpus: u32) -> Msg {
    Msg::Event(Event::Node(Box::new(
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": name},
            "status": {
                "allocatable": {"cpu": "32", "memory": "128Gi", "nvidia.com/gpu": gpus.to_string()},
                "conditions": [{"type": "Ready", "status": "True"}]
            }
        }))
        .expect("a node"),
    )))
}

fn pod(name: &str, gpus: u32) -> Msg {
    Msg::Event(Event::Pod(Box::new(
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": name, "namespace": "ml", "resourceVersion": "1"},
            "spec": {
                "schedulerName": US,
                "containers": [{"name": "c", "resources": {"requests":
                    {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": gpus.to_string()}}}]
            }
        }))
        .expect("a pod"),
    )))
}

fn baseline_loop(fake: &Arc<FakeCluster>) -> Loop<FakeCluster> {
    listed_loop(fake, US, "baseline", dragon_bundled::BASELINE)
}

fn bound(fake: &FakeCluster) -> Vec<String> {
    fake.calls()
        .into_iter()
        .filter_map(|c| match c {
            Call::Bind { pod, .. } => Some(pod),
            _ => None,
        })
        .collect()
}

fn told(fake: &FakeCluster, pod: &str) -> (usize, usize) {
    let calls = fake.calls();
    let events = calls
        .iter()
        .filter(|c| matches!(c, Call::Event(n) if n.reason == "FailedScheduling" && format!("{:?}", n.regarding).contains(pod)))
        .count();
    let conditions = calls
        .iter()
        .filter(|c| matches!(c, Call::Unschedulable { pod: p, .. } if p == pod))
        .count();
    (events, conditions)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rounds_go_on_while_what_they_told_is_unanswered_and_it_all_arrives_after() {
    let fake = Arc::new(FakeCluster::default());
    // Every Event and condition waits until the test lets it through.
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    fake.lock().tell_gate = Some(gate.clone());
    let mut l = baseline_loop(&fake);

    // Two 8-GPU pods bind on a 16-GPU node; one asking 32 waits, told so.
    for msg in [node("a", 16), pod("p-0", 8), pod("p-1", 8), pod("big", 32)] {
        l.handle(msg);
    }
    l.step().await;
    assert_eq!(bound(&fake), ["ml/p-0", "ml/p-1"]);
    assert_eq!(told(&fake, "ml/big"), (0, 0), "nothing answered yet");

    // The next round runs although the first round's tells are unanswered.
    for msg in [node("b", 8), pod("q-0", 8)] {
        l.handle(msg);
    }
    l.step().await;
    assert_eq!(bound(&fake), ["ml/p-0", "ml/p-1", "ml/q-0"]);
    assert!(
        !l.flush_tells(Duration::from_millis(50)).await,
        "still held"
    );

    // The API server answers: the waiting pod is told each reason once,
    // in order, its Event and condition together.
    gate.close();
    assert!(l.flush_tells(Duration::from_secs(10)).await);
    let (events, conditions) = told(&fake, "ml/big");
    assert!(events >= 1 && events == conditions, "{:?}", fake.calls());
    let last = fake.calls().into_iter().rev().find_map(|c| match c {
        Call::Unschedulable { pod, message, .. } if pod == "ml/big" => Some(message),
        _ => None,
    });
    let last = last.expect("a condition");
    assert!(last.starts_with("0/2 nodes are available"), "{last}");
}
