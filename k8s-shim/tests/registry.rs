//! dragon-scheduler serving a policy from an OCI registry (CNCF
//! Distribution on 127.0.0.1) on the real control plane: pulled at
//! start-up, a push hot-swapped in through the gate, a push the gate
//! refuses left out, and a registry outage survived.

mod common;
#[path = "../../tests/support/registry.rs"]
mod registry_server;

use std::collections::BTreeSet;

use common::*;
use dragon_registry::{ComponentWorld, PolicyRef, Registry, RegistryOptions};
use registry_server::{Access, TestRegistry};
use serde_json::json;

async fn push(registry: &Registry, reference: &str, component: Vec<u8>, title: &str) {
    let reference = PolicyRef::parse(reference).unwrap();
    registry
        .push(
            &reference,
            component,
            ComponentWorld::default(),
            title,
            "e2e",
        )
        .await
        .unwrap_or_else(|e| panic!("push {title}: {e}"));
}

/// The nodes a gang's pods were bound to.
async fn nodes_of(s: &Scenario, gang: &str) -> BTreeSet<String> {
    s.placement(&format!("{gang}-"))
        .await
        .into_values()
        .flatten()
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pushed_policy_is_served_swapped_on_the_next_push_and_kept_through_a_refusal_and_an_outage()
 {
    let _g = serial();
    let mut server = TestRegistry::start("e2e", Access::Open);
    let client = Registry::new(RegistryOptions {
        plain_http: vec![server.host.clone()],
        ..RegistryOptions::default()
    })
    .unwrap();
    let reference = server.reference("e2e/policy:live");
    let bundled = |name| dragon_bundled::by_name(name).unwrap().to_vec();
    push(&client, &reference, bundled("baseline"), "baseline").await;

    let s = Scenario::new("oci").await;
    // Three small nodes, so that DRAGON packs a gang where `baseline`
    // spreads it (each pod takes a tenth of a node's CPU).
    for n in ["a", "b", "c"] {
        s.node_with(n, 8, json!({"cpu": "1"})).await;
    }
    let sched = Scheduler::start(
        &s,
        &reference,
        &format!(
            "registry: {{plainHttp: [\"{}\"], pollSeconds: 1}}\n",
            server.host
        ),
    );
    assert!(sched.log().contains("policy pulled"), "{}", sched.log());
    let s = &s;
    let gang = |g: &'static str| async move {
        s.podgroup(g, 3, json!({})).await;
        for i in 0..3 {
            s.pod(&format!("{g}-worker-{i}"), Some((g, "worker", i)), 1, None)
                .await;
        }
        until(60, &format!("gang {g} bound"), || async {
            bound(&s.placement(&format!("{g}-")).await) == 3
        })
        .await;
        nodes_of(s, g).await
    };
    let spread = gang("first").await;
    assert!(spread.len() > 1, "baseline spreads a gang: {spread:?}");

    // A better policy is pushed to the same tag: swapped in, no restart.
    push(&client, &reference, bundled("dragon"), "dragon").await;
    until(30, "the pushed policy swapped in", || async {
        sched.metric("dragon_policy_reloads_total{result=\"success\"}") >= 1.0
    })
    .await;
    assert!(
        sched.log().contains("the policy's tag moved"),
        "{}",
        sched.log()
    );
    let packed = gang("second").await;
    assert_eq!(
        packed.len(),
        1,
        "DRAGON packs a gang on one node: {packed:?}"
    );

    // A push the gate refuses (it asks to place every gang at one worker
    // more than it has): DRAGON keeps scheduling.
    push(
        &client,
        &reference,
        dragon_test_policies::hostile_with_mode(b"oversize____"),
        "hostile",
    )
    .await;
    until(30, "the refused push to be gated", || async {
        sched.metric("dragon_policy_reloads_total{result=\"gated\"}") >= 1.0
    })
    .await;
    let log = sched.log();
    assert!(
        log.contains("policy reload refused by the gate") && log.contains("oci://"),
        "{log}"
    );
    assert_eq!(gang("third").await.len(), 1, "DRAGON still serves");

    // The registry goes away: the serving policy goes on, and when the
    // registry is back a new push is picked up.
    server.pause();
    until(30, "the poller to notice the outage", || async {
        sched.log().contains("cannot resolve the policy's tag")
    })
    .await;
    assert_eq!(
        gang("fourth").await.len(),
        1,
        "DRAGON serves through the outage"
    );
    server.resume();
    push(&client, &reference, bundled("baseline"), "baseline").await;
    until(30, "the push after the outage swapped in", || async {
        sched.metric("dragon_policy_reloads_total{result=\"success\"}") >= 2.0
    })
    .await;
    assert_eq!(
        sched.metric("dragon_policy_reloads_total{result=\"gated\"}"),
        1.0,
        "one refusal, not one per poll"
    );
    s.cleanup().await;
}
