//! Questions answered by the loop: a waiting gang's story, the nodes
//! closest to fitting, an estimated start, and `top`.

use super::*;
use crate::insight::Question;

/// Ask the loop `question` and wait for its answer (an estimate runs on a
/// blocking thread).
async fn ask(l: &mut Loop<FakeCluster>, question: Question) -> Result<Answer, Refused> {
    let (reply, answer) = tokio::sync::oneshot::channel();
    l.handle(Msg::Ask { question, reply });
    tokio::time::timeout(Duration::from_secs(30), answer)
        .await
        .expect("an answer within 30 s")
        .expect("the loop answers")
}

/// Ask the loop why `pod` waits, expecting an answer.
async fn why_of(l: &mut Loop<FakeCluster>, pod: &str) -> crate::insight::Why {
    let question = Question::Why { pod: pod.into() };
    match ask(l, question).await {
        Ok(Answer::Why(why)) => *why,
        other => panic!("a why of {pod}: {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiting_gang_has_its_story_the_nodes_closest_to_fitting_and_an_estimated_start() {
    let fake = Arc::new(FakeCluster::default());
    let mut l = listed_loop(&fake);
    step_with(
        &mut l,
        [vec![node("a", 3), node("b", 2)], gang("g1", 4)].concat(),
    )
    .await;
    step_with(&mut l, gang("g2", 3)).await;
    assert_eq!(binds(&fake.calls()).len(), 4);

    let why = why_of(&mut l, "ml/g2-0").await;
    assert_eq!(
        (why.state.as_str(), why.gang.as_deref()),
        ("pending", Some("ml/g2"))
    );
    let now = why.now.clone().expect("a reason");
    assert!(now.contains("Insufficient nvidia.com/gpu"), "{now}");
    assert_eq!(
        why.story.last().map(|c| c.reason.as_str()),
        Some(now.as_str())
    );
    // One GPU free on one node: that node first.
    assert_eq!(why.closest.len(), 2, "{why:?}");
    assert!(why.closest[0].short.is_empty(), "{why:?}");
    assert_eq!(why.closest[1].short, ["0 of 1 GPUs free"], "{why:?}");
    // g1 runs and does not say how far it is: taken to need an hour more.
    let estimate = why.estimate.clone().expect("an estimate");
    let start = estimate.start_ms.expect("a start within the horizon");
    let wait_s = (start - estimate.made_ms) as f64 / 1e3;
    assert!(
        (3500.0..3700.0).contains(&wait_s),
        "{wait_s} s: {estimate:?}"
    );

    // A bound pod: where. One it does not know: refused, named.
    let why = why_of(&mut l, "ml/g1-0").await;
    assert_eq!(why.state, "bound");
    assert!(why.node.is_some() && why.estimate.is_none(), "{why:?}");
    let refused = ask(
        &mut l,
        Question::Why {
            pod: "ml/none".into(),
        },
    )
    .await
    .unwrap_err();
    assert_eq!(refused.status, 404);
    assert!(refused.message.contains("ml/none"), "{refused:?}");

    let question = Question::Top {
        namespace: Some("ml".into()),
        nodes: false,
    };
    let Ok(Answer::Top(top)) = ask(&mut l, question).await else {
        panic!("a top");
    };
    let states: Vec<_> = top
        .gangs
        .iter()
        .map(|g| (g.gang.as_str(), g.state.as_str(), g.gpus))
        .collect();
    assert_eq!(states, [("ml/g1", "running", 4), ("ml/g2", "waiting", 0)]);
    assert!(top.nodes.is_empty());
    let question = Question::Top {
        namespace: Some("other".into()),
        nodes: true,
    };
    let Ok(Answer::Top(top)) = ask(&mut l, question).await else {
        panic!("a top");
    };
    assert!(top.gangs.is_empty());
    let used: u32 = top.nodes.iter().map(|n| n.used_gpus).sum();
    assert_eq!((top.nodes.len(), used), (2, 4));

    // Placed: its story ends.
    step_with(&mut l, vec![node("c", 4)]).await;
    let why = why_of(&mut l, "ml/g2-0").await;
    assert_eq!(why.state, "bound");
    assert!(l.stories.is_empty());
}
