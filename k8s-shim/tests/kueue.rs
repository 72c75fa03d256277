//! Kueue in front of dragon-scheduler: Kueue (v0.17, built from its Go
//! module, its webhooks served on 127.0.0.1) holds workloads behind its
//! scheduling gate until their ClusterQueue has quota, dragon-scheduler
//! places what Kueue lets through.
//!
//!     cargo test --release -p dragon-scheduler --test kueue

mod common;

use std::time::Duration;

use common::kueue::Kueue;
use common::{Scenario, Scheduler, bound, serial, until};
use serde_json::json;

/// Kueue's scheduling gate on the pods it manages.
const GATE: &str = "kueue.x-k8s.io/admission";

/// Pod `group-i` of Kueue pod group `group` (of `total` pods, one GPU each)
/// in LocalQueue `queue`, finishing `seconds` after it starts.
async fn group_pod(s: &Scenario, queue: &str, group: &str, i: u32, total: u32, seconds: u32) {
    s.pod_with(
        &format!("{group}-{i}"),
        None,
        1,
        json!({"metadata": {
            "labels": {"kueue.x-k8s.io/queue-name": queue, "kueue.x-k8s.io/pod-group-name": group},
            "annotations": {"kueue.x-k8s.io/pod-group-total-count": total.to_string(),
                            "dragon.dev/complete-after-seconds": seconds.to_string()}}}),
    )
    .await;
}

/// The scheduling gates of pod `name`.
async fn gates(s: &Scenario, name: &str) -> Vec<String> {
    s.pods()
        .await
        .into_iter()
        .find(|p| p.metadata.name.as_deref() == Some(name))
        .and_then(|p| p.spec?.scheduling_gates)
        .unwrap_or_default()
        .into_iter()
        .map(|g| g.name)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kueue_pod_groups_wait_for_quota_behind_its_gate_and_each_is_bound_whole_once_admitted() {
    let _g = serial();
    let s = Scenario::new("kueue-groups").await;
    let kueue = Kueue::start(&s.client).await;
    // Room for both groups; quota for one.
    s.node("a", 4).await;
    s.node("b", 4).await;
    kueue.queue(&s, "team", 4).await;
    let sched = Scheduler::start(&s, "dragon", "");
    for i in 0..4 {
        group_pod(&s, "team", "first", i, 4, 15).await;
    }
    for i in 0..4 {
        group_pod(&s, "team", "second", i, 4, 2).await;
    }
    // Kueue's webhook gated every pod; it admits the first group only.
    assert!(
        gates(&s, "second-3").await.iter().any(|g| g == GATE),
        "{}",
        kueue.log()
    );
    until(90, "the first group bound whole", || async {
        bound(&s.placement("first-").await) == 4
    })
    .await;
    // The second waits, gated, and Dragon says why on its pods.
    s.until_explained(60, "second-0", GATE).await;
    assert_eq!(bound(&s.placement("second-").await), 0, "{}", sched.log());
    assert!(gates(&s, "second-0").await.iter().any(|g| g == GATE));
    // The first finishes, Kueue releases its quota and admits the second,
    // which Dragon binds whole; nothing of it ran beside the first. A
    // gang's Bindings are separate writes, so a list may land between
    // them: partly bound is allowed only for that moment.
    let partly_since = std::sync::Mutex::new(None::<std::time::Instant>);
    until(120, "the second group bound whole", || async {
        let placed = s.placement("second-").await;
        let n = bound(&placed);
        let mut since = partly_since.lock().unwrap_or_else(|e| e.into_inner());
        if n == 0 || n == 4 {
            *since = None;
        } else {
            let first = *since.get_or_insert_with(std::time::Instant::now);
            assert!(
                first.elapsed() < Duration::from_secs(5),
                "the second group partly bound for 5 s: {placed:?}"
            );
        }
        n == 4
    })
    .await;
    for i in 0..4 {
        assert_eq!(
            s.phase(&format!("first-{i}")).await,
            "Succeeded",
            "the second group started before the first released its quota"
        );
    }
    // Kueue sees each group as one workload of four pods.
    let workloads = kueue.workloads(&s).list(&Default::default()).await.unwrap();
    let counts: Vec<i64> = workloads
        .items
        .iter()
        .filter_map(|w| w.data["spec"]["podSets"][0]["count"].as_i64())
        .collect();
    assert_eq!(counts, [4, 4], "{workloads:?}");
    until(60, "the second group finished", || async {
        let mut done = true;
        for i in 0..4 {
            done &= s.phase(&format!("second-{i}")).await == "Succeeded";
        }
        done
    })
    .await;
    let _ = tokio::time::timeout(Duration::from_secs(60), s.cleanup()).await;
    kueue.remove_queue(&s).await;
}

/// Job `name` in LocalQueue `queue`, created suspended as Kueue's webhook
/// wants it: `parallelism` pods of one GPU each, finishing `seconds` after
/// they start.
async fn queued_job(s: &Scenario, queue: &str, name: &str, parallelism: u32, seconds: u32) {
    let mut template = s.pod_manifest(name, &s.scheduler_name(), None, 1, Some(seconds), None, &[]);
    template["spec"]["restartPolicy"] = json!("Never");
    let metadata = template["metadata"].take();
    let job = json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "namespace": s.name,
                     "labels": {"kueue.x-k8s.io/queue-name": queue}},
        "spec": {"parallelism": parallelism, "completions": parallelism,
                 "completionMode": "Indexed", "suspend": true,
                 "template": {"metadata": {"annotations": metadata["annotations"]},
                              "spec": template["spec"]}}});
    let jobs: kube::Api<k8s_openapi::api::batch::v1::Job> =
        kube::Api::namespaced(s.client.clone(), &s.name);
    s.create(&jobs, job).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_admitted_by_kueue_one_at_a_time_are_placed_by_dragon_and_the_next_waits_suspended() {
    let _g = serial();
    let s = Scenario::new("kueue-jobs").await;
    let kueue = Kueue::start(&s.client).await;
    s.node("a", 4).await;
    kueue.queue(&s, "team", 2).await;
    let sched = Scheduler::start(&s, "dragon", "");
    queued_job(&s, "team", "one", 2, 10).await;
    queued_job(&s, "team", "two", 2, 1).await;
    let jobs: kube::Api<k8s_openapi::api::batch::v1::Job> =
        kube::Api::namespaced(s.client.clone(), &s.name);
    let suspended = |name: &'static str| {
        let jobs = jobs.clone();
        async move {
            jobs.get(name)
                .await
                .ok()
                .and_then(|j| j.spec?.suspend)
                .unwrap_or(false)
        }
    };
    // Kueue admits `one` (quota for two GPUs), whose pods Dragon binds;
    // `two` stays suspended: no pod of it exists.
    until(90, "the first Job's pods bound", || async {
        bound(&s.placement("one-").await) == 2
    })
    .await;
    assert!(suspended("two").await, "{}", kueue.log());
    assert!(s.placement("two-").await.is_empty());
    // `one` completes, Kueue lets `two` in, Dragon binds its pods.
    until(120, "the second Job's pods bound", || async {
        bound(&s.placement("two-").await) == 2
    })
    .await;
    assert!(!suspended("two").await);
    until(60, "both Jobs complete", || async {
        let mut done = 0;
        for name in ["one", "two"] {
            done += jobs
                .get(name)
                .await
                .ok()
                .and_then(|j| j.status?.succeeded)
                .unwrap_or(0);
        }
        done == 4
    })
    .await;
    drop(sched);
    let _ = tokio::time::timeout(Duration::from_secs(60), s.cleanup()).await;
    kueue.remove_queue(&s).await;
}
