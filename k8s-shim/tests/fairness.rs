//! Two teams' namespaces as two queues on a real control plane, under the
//! `fair-share` policy and under `dragon-plus` with `fairness`: a team that
//! borrowed the idle cluster keeps what it runs, but room that frees goes to
//! the team still owed its guarantee, not to the borrower's queued work;
//! each queue's GPUs are on `/metrics`.

mod common;

use common::*;
use serde_json::json;

/// dragon-scheduler's queues: team-a is namespace `{prefix}-a`, team-b
/// `{prefix}-b`, each guaranteed 4 GPUs.
fn queues(prefix: &str) -> String {
    format!(
        "queues:
- {{name: team-a, namespaces: [{prefix}-a], guaranteedGpus: 4}}
- {{name: team-b, namespaces: [{prefix}-b], guaranteedGpus: 4}}
"
    )
}

/// A gang of four one-GPU workers named `name-0..3` in `s`'s namespace.
async fn gang(s: &Scenario, name: &str, seconds: Option<u32>) {
    s.podgroup(name, 4, json!({})).await;
    for i in 0..4 {
        s.pod(
            &format!("{name}-{i}"),
            Some((name, "worker", i)),
            1,
            seconds,
        )
        .await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_fair_share_room_that_frees_goes_to_the_team_owed_its_guarantee() {
    room_goes_to_the_team_owed_its_guarantee("fair", "fair-share", "").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_dragon_plus_with_fairness_room_that_frees_goes_to_the_team_owed_its_guarantee() {
    let settings = "settings: {fairness: true}\n";
    room_goes_to_the_team_owed_its_guarantee("fplus", "dragon-plus", settings).await;
}

/// Team a's gangs fill the idle cluster and a third waits; team b then asks
/// for its guarantee. The third gang is held back naming the fair share,
/// and when one of a's gangs finishes its room goes to team b whole.
async fn room_goes_to_the_team_owed_its_guarantee(prefix: &str, policy: &str, settings: &str) {
    let _g = serial();
    let a = Scenario::new(&format!("{prefix}-a")).await;
    let b = Scenario::sharing(&format!("{prefix}-b"), &a).await;
    a.node("n1", 4).await;
    a.node("n2", 4).await;
    let sched = Scheduler::start(&a, policy, &format!("{}{settings}", queues(prefix)));
    // Team b asks for nothing yet: team a borrows the whole cluster.
    gang(&a, "a1", None).await;
    gang(&a, "a2", Some(40)).await;
    until(60, "team a's two gangs bound", || async {
        bound(&a.placement("a1-").await) + bound(&a.placement("a2-").await) == 8
    })
    .await;
    until(30, "team a's 8 GPUs on /metrics", || async {
        sched.metric("dragon_queue_used_gpus{queue=\"team-a\"}") == 8.0
    })
    .await;
    // Team a queues a third gang before team b asks for its guarantee.
    gang(&a, "a3", None).await;
    gang(&b, "b1", None).await;
    a.until_explained(
        60,
        "a3-0",
        "queue team-a would hold 12 GPUs, more than its fair share of 4, while queue team-b holds 0 of the 4 it is owed",
    )
    .await;
    // a2 finishes: its room goes to b1, whole, while a3 keeps waiting.
    until(90, "team b's gang bound once a2 finished", || async {
        bound(&b.placement("b1-").await) == 4
    })
    .await;
    assert_eq!(
        bound(&a.placement("a3-").await),
        0,
        "the borrower's queued gang waits:\n{}",
        sched.log()
    );
    until(30, "each team's 4 GPUs on /metrics", || async {
        sched.metric("dragon_queue_used_gpus{queue=\"team-a\"}") == 4.0
            && sched.metric("dragon_queue_used_gpus{queue=\"team-b\"}") == 4.0
    })
    .await;
    assert_eq!(
        sched.metric("dragon_queue_guaranteed_gpus{queue=\"team-b\"}"),
        4.0
    );
    // How well each queue got its guarantee: team b waited for part of
    // the hour, team a's third gang waits still.
    let share_b = sched.metric("dragon_queue_share_of_entitlement{queue=\"team-b\"}");
    assert!(share_b > 0.0 && share_b < 1.0, "team b's share {share_b}");
    let wait_a = sched.metric("dragon_queue_longest_wait_seconds{queue=\"team-a\"}");
    assert!(wait_a > 0.0, "team a's longest wait {wait_a}");
    let jain = sched.metric("dragon_queues_jain_index");
    assert!(jain > 0.0 && jain <= 1.0, "Jain's index {jain}");
    a.assert_invariants(30, &[&sched], None).await;
    b.cleanup().await;
    a.cleanup().await;
}

/// With `scheduling.reclaim`, team b does not wait for team a's gangs to
/// finish: the GPUs team a borrows are taken back, one gang evicted with
/// an Event saying why, and team b's gang bound whole in their place.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_reclaim_a_team_owed_its_guarantee_takes_back_what_another_borrows() {
    let _g = serial();
    let a = Scenario::new("reclaim-a").await;
    let b = Scenario::sharing("reclaim-b", &a).await;
    a.node("n1", 4).await;
    a.node("n2", 4).await;
    let config = format!("{}scheduling: {{reclaim: true}}\n", queues("reclaim"));
    let sched = Scheduler::start(&a, "fair-share", &config);
    gang(&a, "a1", None).await;
    gang(&a, "a2", None).await;
    until(60, "team a's two gangs bound", || async {
        bound(&a.placement("a1-").await) + bound(&a.placement("a2-").await) == 8
    })
    .await;
    gang(&b, "b1", None).await;
    until(
        60,
        "team b's gang bound in the room team a borrowed",
        || async { bound(&b.placement("b1-").await) == 4 },
    )
    .await;
    let held = bound(&a.placement("a1-").await) + bound(&a.placement("a2-").await);
    assert_eq!(held, 4, "team a keeps its guarantee:\n{}", sched.log());
    let preempted: Vec<String> = a
        .events()
        .await
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some("Preempted"))
        .filter_map(|e| e.note)
        .collect();
    assert_eq!(preempted.len(), 4, "one gang's pods: {preempted:?}");
    assert!(
        preempted[0].contains("whose queue is owed GPUs that queue team-a borrows"),
        "{preempted:?}"
    );
    a.assert_invariants(30, &[&sched], None).await;
    b.cleanup().await;
    a.cleanup().await;
}
