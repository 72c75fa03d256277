//! Policies built against interfaces 0.1, 0.2 and 0.3 keep loading and
//! deciding exactly as the same policies built against 0.4, and the view of the
//! cluster a policy keeps stays current across changes, traps, topology
//! levels and queues.

use dragon_framework::{Cluster, Node, Pod, Resources};
use dragon_runtime::{FixedView, Hooks, INTERFACE_VERSIONS, LoadOptions, WasmPolicy};
use dragon_sim::{SimOptions, Trace, simulate};
use dragon_tests::workload::all_candidates;
use dragon_tests::{
    BASELINE_V0_1, BASELINE_V0_2, BASELINE_V0_3, DRAGON_V0_1, DRAGON_V0_2, DRAGON_V0_3, bundled,
    engine, hostile, load,
};

/// The bundled policy `name` as built against an earlier interface.
fn built_against(version: &str, name: &str) -> WasmPolicy {
    let bytes = match (version, name) {
        ("0.1", "dragon") => DRAGON_V0_1,
        ("0.1", _) => BASELINE_V0_1,
        ("0.2", "dragon") => DRAGON_V0_2,
        ("0.2", _) => BASELINE_V0_2,
        (_, "dragon") => DRAGON_V0_3,
        _ => BASELINE_V0_3,
    };
    load(
        &engine(),
        &format!("{name}.wasm ({version})"),
        bytes,
        &LoadOptions::default(),
    )
}

#[test]
fn the_host_names_the_version_each_component_was_built_against() {
    assert_eq!(INTERFACE_VERSIONS, ["0.1.0", "0.2.0", "0.3.0", "0.4.0"]);
    for name in ["dragon", "baseline"] {
        for v in ["0.1", "0.2", "0.3"] {
            assert_eq!(
                built_against(v, name).info().interface_version,
                format!("{v}.0")
            );
        }
        assert_eq!(
            bundled(&engine(), name, "").info().interface_version,
            "0.4.0"
        );
    }
}

/// Every bundled trace gives the same `dragon simulate --json` summary,
/// per-job records and timeline under a policy's 0.1, 0.2, 0.3 and 0.4
/// builds.
#[test]
fn bundled_traces_simulate_identically_under_every_interface() {
    for (trace_name, _) in dragon_sim::BUNDLED {
        let trace = Trace::load(trace_name).expect("bundled trace");
        for name in ["dragon", "baseline"] {
            let new = simulate(
                &trace,
                &bundled(&engine(), name, ""),
                SimOptions::default(),
                None,
            );
            let json = |r: &dragon_sim::SimRun| {
                serde_json::to_string(&dragon_sim::Summary::of(r)).expect("json")
            };
            for v in ["0.1", "0.2", "0.3"] {
                let old = simulate(&trace, &built_against(v, name), SimOptions::default(), None);
                assert_eq!(json(&old), json(&new), "{name} {v} on {trace_name}");
                assert_eq!(old.jobs, new.jobs, "{name} {v} on {trace_name}");
                assert_eq!(old.timeline, new.timeline, "{name} {v} on {trace_name}");
            }
        }
    }
}

fn node(name: &str, gpus: u32, zone: &str) -> Node {
    let mut n = Node::new(
        name,
        Resources {
            cpu_milli: 16_000,
            memory_mib: 65_536,
            gpus,
        },
    );
    n.labels
        .insert(dragon_framework::ZONE_LABEL.into(), zone.into());
    n
}

/// The view a 0.4 instance keeps follows each change the cluster logs, and
/// a trap (which discards the instance) is followed by the whole view sent
/// again: scores after either equal those a fresh instance gives.
#[test]
fn the_view_follows_changes_and_is_sent_whole_after_a_trap() {
    let e = engine();
    let live = bundled(&e, "baseline", "");
    let mut c = Cluster::new();
    for (i, gpus) in [4, 8, 8].into_iter().enumerate() {
        c.add_node(node(&format!("n{i}"), gpus, "z1")).unwrap();
    }
    let (pod, _) = dragon_tests::lone_pod_on(1);
    let fresh = |c: &Cluster| {
        bundled(&e, "baseline", "")
            .score(&pod, &all_candidates(c), c)
            .unwrap()
    };
    let first = live.score(&pod, &all_candidates(&c), &c).unwrap();
    assert_eq!(first, fresh(&c));
    // A pod lands on node 1: only its row goes to the instance.
    let mut big = Pod::new(
        "p",
        Resources {
            cpu_milli: 12_000,
            memory_mib: 60_000,
            gpus: 0,
        },
    );
    big.index = 0;
    c.add_pod(big, Some("n1")).unwrap();
    let after = live.score(&pod, &all_candidates(&c), &c).unwrap();
    assert_eq!(after, fresh(&c));
    assert_ne!(after, first, "the busier node scores lower now");
    // A trap discards the instance; the next call sends everything.
    live.reset();
    c.add_node(node("n3", 8, "z2")).unwrap();
    assert_eq!(
        live.score(&pod, &all_candidates(&c), &c).unwrap(),
        fresh(&c)
    );
}

#[test]
fn a_trapping_policy_is_answered_again_on_a_fresh_view() {
    let e = engine();
    let flaky = hostile(
        &e,
        r#"{"hook": "score", "fault": "trap"}"#,
        LoadOptions::default(),
    );
    let Ok(flaky) = flaky else {
        panic!("the hostile policy loads");
    };
    let (pod, cands) = dragon_tests::lone_pod_on(4);
    let view = FixedView::from_candidates(&cands);
    assert!(flaky.score(&pod, &cands, &view).is_err());
    // The discarded instance's successor gets the whole view: no stale rows.
    assert!(flaky.filter(&pod, &cands, &view).is_ok());
}

/// What the last `score` call saw of the pod's preferences.
static SEEN: std::sync::Mutex<Vec<Vec<u32>>> = std::sync::Mutex::new(Vec::new());

/// Scores nothing; remembers the preferences it was given.
#[derive(Default)]
struct Echo;

#[dragon_policy_sdk::policy]
impl dragon_policy_sdk::Policy for Echo {
    fn metadata(&self) -> dragon_policy_sdk::types::PolicyInfo {
        dragon_policy_sdk::types::PolicyInfo::named("echo", "0.1.0")
    }
    fn score(
        &self,
        _: &dragon_policy_sdk::types::Placement,
        nodes: &dragon_policy_sdk::types::Candidates,
        _: &dragon_policy_sdk::types::View,
    ) -> Vec<u32> {
        SEEN.lock().unwrap().push(nodes.preference.clone());
        vec![0; nodes.index.len()]
    }
}

#[test]
fn score_is_given_the_pods_preferences_as_kube_weighs_them() {
    use dragon_framework::{
        NodeSelectorTerm, Operator, PreferredTerm, RecordingIo, Requirement, Scheduler,
        SchedulerConfig,
    };
    let mut c = Cluster::new();
    for (name, zone) in [("a", "z1"), ("b", "z2"), ("c", "z1")] {
        c.add_node(node(name, 4, zone)).unwrap();
    }
    let gpu = Resources {
        cpu_milli: 1_000,
        memory_mib: 1_024,
        gpus: 1,
    };
    let mut plain = Pod::new("plain", gpu);
    plain.index = 0;
    let mut picky = Pod::new("picky", gpu);
    picky.constraints.preferred_node_affinity = vec![PreferredTerm {
        weight: 10,
        term: NodeSelectorTerm {
            match_expressions: vec![Requirement {
                key: dragon_framework::ZONE_LABEL.into(),
                operator: Operator::In,
                values: vec!["z2".into()],
            }],
            match_fields: vec![],
        },
    }];
    c.add_pod(plain, None).unwrap();
    c.add_pod(picky, None).unwrap();
    let mut s = Scheduler::new(c, SchedulerConfig::default());
    let echo = dragon_tests::Native::<Echo>::new("");
    s.schedule_round(
        0,
        &echo,
        &mut RecordingIo::default(),
        &mut RecordingIo::default(),
    );
    let seen = SEEN.lock().unwrap().clone();
    assert_eq!(seen.len(), 2, "{seen:?}");
    assert!(
        seen.contains(&Vec::new()),
        "the plain pod has none: {seen:?}"
    );
    // Node affinity (weight 2, scaled to 0–100) for zone z2 alone, on top of
    // TaintToleration's full 100 at weight 3 for every untainted node.
    assert!(seen.contains(&vec![300, 500, 300]), "{seen:?}");
}
