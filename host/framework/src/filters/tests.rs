//! Cases ported from kube-scheduler v1.37's plugin tests
//! (`nodeports/node_ports_test.go`, `noderesources/fit_test.go`,
//! `interpodaffinity/filtering_test.go`,
//! `podtopologyspread/filtering_test.go`), run through [`feasible`].

use super::*;
use crate::constraints::{HostPort, SpreadConstraint};
use crate::fixtures::*;
use crate::model::{Node, Resources, Scalars};
use crate::selector::{Operator, Requirement};
use crate::{NodeSelector, NodeSelectorTerm, PodState};

/// Names of the nodes `p` may go to, and the rejection message.
fn run(c: &mut Cluster, p: Pod) -> (Vec<String>, String) {
    let key = p.key.clone();
    c.add_pod(p, None).unwrap();
    let mut rej = Rejections::default();
    let (pod, _) = c.pod(&key).unwrap();
    let ok = feasible(c, pod, &mut rej);
    let live = c.nodes().len();
    let names = ok
        .iter()
        .map(|&i| c.nodes()[i as usize].name.to_string())
        .collect();
    c.remove_pod(&key).unwrap();
    (names, rej.message(live))
}

#[test]
fn host_ports_conflict_on_protocol_port_and_overlapping_address() {
    let cases = [
        (
            "other protocol",
            ("UDP", "127.0.0.1", 8080),
            ("TCP", "127.0.0.1", 8080),
            true,
        ),
        (
            "same address",
            ("UDP", "127.0.0.1", 8080),
            ("UDP", "127.0.0.1", 8080),
            false,
        ),
        (
            "other address",
            ("TCP", "127.0.0.1", 8001),
            ("TCP", "127.0.0.2", 8001),
            true,
        ),
        (
            "all addresses used",
            ("TCP", "127.0.0.1", 8001),
            ("TCP", "0.0.0.0", 8001),
            false,
        ),
        (
            "all addresses wanted",
            ("TCP", "0.0.0.0", 8001),
            ("TCP", "127.0.0.1", 8001),
            false,
        ),
        (
            "defaults are TCP on all",
            ("", "", 8001),
            ("TCP", "10.0.0.1", 8001),
            false,
        ),
        ("other port", ("TCP", "", 8001), ("TCP", "", 8002), true),
    ];
    for (name, want, used, fits) in cases {
        let mut c = cluster(&[("n1", &[])]);
        let holder = with(pod("d/holder", &[]), |k| {
            k.host_ports = vec![HostPort::new(used.0, used.1, used.2)]
        });
        place(&mut c, holder, "n1");
        let p = with(pod("d/p", &[]), |k| {
            k.host_ports = vec![HostPort::new(want.0, want.1, want.2)]
        });
        let (ok, msg) = run(&mut c, p);
        assert_eq!(ok.len() == 1, fits, "{name}: {msg}");
        if !fits {
            assert!(
                msg.contains("1 node(s) didn't have free ports for the requested pod ports"),
                "{name}: {msg}"
            );
        }
    }
    // A port is free again once the pod holding it leaves.
    let mut c = cluster(&[("n1", &[])]);
    let port = || vec![HostPort::new("TCP", "", 9000)];
    place(
        &mut c,
        with(pod("d/a", &[]), |k| k.host_ports = port()),
        "n1",
    );
    c.remove_pod("d/a").unwrap();
    let (ok, _) = run(&mut c, with(pod("d/b", &[]), |k| k.host_ports = port()));
    assert_eq!(ok, ["n1"]);
}

#[test]
fn every_resource_name_and_the_pod_count_must_fit() {
    let mut c = Cluster::new();
    let mut n1 = Node::new("n1", big());
    n1.extended = [
        ("rdma/hca".to_string(), 2),
        ("ephemeral-storage".to_string(), 10 << 30),
    ]
    .into();
    n1.max_pods = Some(2);
    c.add_node(n1).unwrap();
    c.add_node(Node::new("n2", big())).unwrap();
    let hca = |n| Scalars::from([("rdma/hca".to_string(), n)]);
    let mut a = pod("d/a", &[]);
    a.extended = hca(1);
    place(&mut c, a, "n1");
    // One HCA left on n1, none on n2 (a node without the resource).
    let mut p = pod("d/p", &[]);
    p.extended = hca(2);
    let (ok, msg) = run(&mut c, p);
    assert!(ok.is_empty());
    assert!(msg.ends_with("2 Insufficient rdma/hca"), "{msg}");
    let mut p = pod("d/p", &[]);
    p.extended = hca(1);
    assert_eq!(run(&mut c, p).0, ["n1"]);
    // n1 takes two pods: with a second one there, a third is refused.
    place(&mut c, pod("d/b", &[]), "n1");
    let (ok, msg) = run(&mut c, pod("d/p", &[]));
    assert_eq!(ok, ["n2"]);
    assert!(msg.contains("1 Too many pods"), "{msg}");
    // A zero request for a resource the node lacks is no request.
    let mut p = pod("d/p", &[]);
    p.extended = Scalars::from([("example.com/foo".to_string(), 0)]);
    assert_eq!(run(&mut c, p).0, ["n2"]);
    // Every shortfall of a node is counted, as kube reports them.
    let mut p = Pod::new(
        "d/p",
        Resources {
            cpu_milli: 100_000,
            memory_mib: 1_000_000,
            gpus: 0,
        },
    );
    p.extended = Scalars::from([("ephemeral-storage".to_string(), 20 << 30)]);
    let (_, msg) = run(&mut c, p);
    assert_eq!(
        msg,
        "0/2 nodes are available: 2 Insufficient cpu, 2 Insufficient ephemeral-storage, \
         2 Insufficient memory, 1 Too many pods"
    );
}

#[test]
fn a_tainted_node_takes_only_pods_that_tolerate_its_taint() {
    use crate::{Taint, TaintEffect, Toleration, TolerationOperator};
    let mut c = cluster(&[("n1", &[]), ("n2", &[])]);
    let mut n2 = c.nodes()[1].clone();
    n2.taints = vec![Taint {
        key: "gpu".into(),
        value: "a100".into(),
        effect: TaintEffect::NoSchedule,
    }];
    c.update_node(n2).unwrap();
    let (ok, msg) = run(&mut c, pod("d/p", &[]));
    assert_eq!(ok, ["n1"]);
    assert!(msg.contains("1 node(s) had untolerated taint(s)"), "{msg}");
    let mut p = pod("d/p", &[]);
    p.tolerations = vec![Toleration {
        key: "gpu".into(),
        operator: TolerationOperator::Exists,
        ..Toleration::default()
    }];
    assert_eq!(run(&mut c, p).0, ["n1", "n2"]);
}

#[test]
fn a_cordoned_node_takes_only_pods_that_tolerate_the_cordon_taint() {
    // `nodeunschedulable/node_unschedulable_test.go`.
    use crate::{TaintEffect, Toleration};
    let mut c = cluster(&[("n1", &[]), ("n2", &[])]);
    let mut n2 = c.nodes()[1].clone();
    n2.unschedulable = true;
    c.update_node(n2).unwrap();
    let (ok, msg) = run(&mut c, pod("d/p", &[]));
    assert_eq!(ok, ["n1"]);
    assert!(msg.contains("1 node(s) were unschedulable"), "{msg}");
    let mut p = pod("d/p", &[]);
    p.tolerations = vec![Toleration {
        key: "node.kubernetes.io/unschedulable".into(),
        effect: Some(TaintEffect::NoSchedule),
        ..Toleration::default()
    }];
    assert_eq!(run(&mut c, p).0, ["n1", "n2"]);
    // Tolerating another effect is not tolerating the cordon.
    let mut p = pod("d/p", &[]);
    p.tolerations = vec![Toleration {
        key: "node.kubernetes.io/unschedulable".into(),
        effect: Some(TaintEffect::NoExecute),
        ..Toleration::default()
    }];
    assert_eq!(run(&mut c, p).0, ["n1"]);
}

#[test]
fn required_node_affinity_is_anded_with_the_node_selector() {
    let mut c = cluster(&[
        ("n1", &[("gpu", "a100"), ("zone", "z1")]),
        ("n2", &[("gpu", "v100"), ("zone", "z1")]),
        ("n3", &[("gpu", "a100"), ("zone", "z2")]),
    ]);
    let mut p = with(pod("d/p", &[]), |k| {
        k.node_affinity = Some(NodeSelector {
            terms: vec![NodeSelectorTerm {
                match_expressions: vec![Requirement {
                    key: "gpu".into(),
                    operator: Operator::In,
                    values: vec!["a100".into()],
                }],
                match_fields: vec![],
            }],
        })
    });
    assert_eq!(run(&mut c, p.clone()).0, ["n1", "n3"]);
    p.node_selector = labels(&[("zone", "z2")]);
    let (ok, msg) = run(&mut c, p);
    assert_eq!(ok, ["n3"]);
    assert!(
        msg.contains("2 node(s) didn't match Pod's node affinity/selector"),
        "{msg}"
    );
}

#[test]
fn a_pod_goes_only_where_its_bound_volumes_can_be_reached() {
    let mut c = cluster(&[("n1", &[(ZONE, "z1")]), ("n2", &[(ZONE, "z2")])]);
    let in_zone = |z: &str| NodeSelector {
        terms: vec![NodeSelectorTerm {
            match_expressions: vec![Requirement {
                key: ZONE.into(),
                operator: Operator::In,
                values: vec![z.into()],
            }],
            match_fields: vec![],
        }],
    };
    let p = with(pod("d/p", &[]), |k| {
        k.volume_node_affinity = vec![in_zone("z2")]
    });
    let (ok, msg) = run(&mut c, p);
    assert_eq!(ok, ["n2"]);
    assert!(
        msg.contains("1 node(s) didn't match PersistentVolume's node affinity"),
        "{msg}"
    );
    // Two volumes in different zones: nowhere.
    let p = with(pod("d/p", &[]), |k| {
        k.volume_node_affinity = vec![in_zone("z1"), in_zone("z2")]
    });
    assert!(run(&mut c, p).0.is_empty());
}

#[test]
fn pod_affinity_needs_a_matching_pod_in_the_domain() {
    let nodes: &[(&str, &[(&str, &str)])] = &[
        ("n1", &[(HOST, "n1"), (ZONE, "z1")]),
        ("n2", &[(HOST, "n2"), (ZONE, "z1")]),
        ("n3", &[(HOST, "n3"), (ZONE, "z2")]),
    ];
    let mut c = cluster(nodes);
    place(
        &mut c,
        pod("default/db", &[("service", "securityscan")]),
        "n1",
    );
    let p = with(pod("default/p", &[]), |k| {
        k.pod_affinity = vec![term(&[("service", "securityscan")], ZONE)]
    });
    let (ok, msg) = run(&mut c, p.clone());
    assert_eq!(ok, ["n1", "n2"]);
    assert!(
        msg.contains("1 node(s) didn't match pod affinity rules"),
        "{msg}"
    );
    // A pod in another namespace does not count for a term scoped to
    // the pod's own.
    let mut c = cluster(nodes);
    let mut other = pod("other/db", &[("service", "securityscan")]);
    other.namespace = "other".into();
    place(&mut c, other, "n1");
    // No match anywhere, and `p` does not match its own term: nowhere.
    assert!(run(&mut c, p).0.is_empty());
    // The first of pods with affinity to each other goes anywhere with
    // the topology label.
    let mut c = cluster(&[("n1", &[(ZONE, "z1")]), ("n2", &[])]);
    let first = with(pod("default/w0", &[("job", "train")]), |k| {
        k.pod_affinity = vec![term(&[("job", "train")], ZONE)]
    });
    let (ok, msg) = run(&mut c, first);
    assert_eq!(ok, ["n1"]);
    assert!(
        msg.contains("1 node(s) didn't match pod affinity rules"),
        "{msg}"
    );
}

#[test]
fn anti_affinity_holds_both_ways() {
    let nodes: &[(&str, &[(&str, &str)])] = &[
        ("n1", &[(HOST, "n1"), (ZONE, "z1")]),
        ("n2", &[(HOST, "n2"), (ZONE, "z1")]),
        ("n3", &[(HOST, "n3"), (ZONE, "z2")]),
    ];
    // The incoming pod's anti-affinity: away from the zone of a match.
    let mut c = cluster(nodes);
    place(&mut c, pod("default/a", &[("app", "web")]), "n1");
    let p = with(pod("default/p", &[]), |k| {
        k.pod_anti_affinity = vec![term(&[("app", "web")], ZONE)]
    });
    let (ok, msg) = run(&mut c, p);
    assert_eq!(ok, ["n3"]);
    assert!(
        msg.contains("2 node(s) didn't match pod anti-affinity rules"),
        "{msg}"
    );
    // A placed pod's anti-affinity keeps matching pods off its host.
    let mut c = cluster(nodes);
    let guard = with(pod("default/g", &[]), |k| {
        k.pod_anti_affinity = vec![term(&[("app", "web")], HOST)]
    });
    place(&mut c, guard, "n2");
    let (ok, msg) = run(&mut c, pod("default/p", &[("app", "web")]));
    assert_eq!(ok, ["n1", "n3"]);
    assert!(
        msg.contains("1 node(s) didn't satisfy existing pods anti-affinity rules"),
        "{msg}"
    );
    // ... but not pods it does not select.
    assert_eq!(run(&mut c, pod("default/q", &[("app", "db")])).0.len(), 3);
    // Once it leaves, nothing is held against the node.
    c.remove_pod("default/g").unwrap();
    assert_eq!(run(&mut c, pod("default/p", &[("app", "web")])).0.len(), 3);
}

#[test]
fn reserved_gang_members_count_for_anti_affinity() {
    let mut c = cluster(&[
        ("n1", &[(HOST, "n1")]),
        ("n2", &[(HOST, "n2")]),
        ("n3", &[(HOST, "n3")]),
    ]);
    let member = |i: u32| {
        with(pod(&format!("default/w{i}"), &[("job", "train")]), |k| {
            k.pod_anti_affinity = vec![term(&[("job", "train")], HOST)]
        })
    };
    for i in 0..3 {
        c.add_pod(member(i), None).unwrap();
    }
    c.set_state("default/w0", PodState::Reserved(0));
    c.set_state("default/w1", PodState::Reserved(2));
    let (pod, _) = c.pod("default/w2").unwrap();
    let ok = feasible(&c, pod, &mut Rejections::default());
    assert_eq!(ok, [1]);
    // Released reservations release their domains.
    c.set_state("default/w0", PodState::Pending);
    c.set_state("default/w1", PodState::Pending);
    let (pod, _) = c.pod("default/w2").unwrap();
    assert_eq!(feasible(&c, pod, &mut Rejections::default()), [0, 1, 2]);
}

fn spread(max_skew: u32, key: &str, l: &[(&str, &str)]) -> SpreadConstraint {
    SpreadConstraint {
        max_skew,
        topology_key: key.into(),
        selector: selector(l),
        min_domains: None,
        honor_node_affinity: true,
        honor_taints: false,
    }
}

#[test]
fn topology_spread_bounds_the_skew_between_domains() {
    let nodes: &[(&str, &[(&str, &str)])] = &[
        ("node-a", &[(ZONE, "zone1"), (HOST, "node-a")]),
        ("node-b", &[(ZONE, "zone1"), (HOST, "node-b")]),
        ("node-x", &[(ZONE, "zone2"), (HOST, "node-x")]),
        ("node-y", &[(ZONE, "zone2"), (HOST, "node-y")]),
    ];
    let foo = &[("foo", "")];
    // "pods spread across zones as 3/3, all nodes fit"
    let mut c = cluster(nodes);
    for (i, n) in ["node-a", "node-a", "node-b", "node-x", "node-x", "node-y"]
        .iter()
        .enumerate()
    {
        place(&mut c, pod(&format!("default/p{i}"), foo), n);
    }
    let p = with(pod("default/p", foo), |k| {
        k.spread = vec![spread(1, ZONE, foo)]
    });
    assert_eq!(run(&mut c, p.clone()).0.len(), 4);
    // "pods spread across zones as 3/1": only zone2 takes the next.
    c.remove_pod("default/p3").unwrap();
    c.remove_pod("default/p4").unwrap();
    let (ok, msg) = run(&mut c, p.clone());
    assert_eq!(ok, ["node-x", "node-y"]);
    assert!(
        msg.contains("2 node(s) didn't match pod topology spread constraints"),
        "{msg}"
    );
    // A pod the selector does not match adds nothing to its domain.
    let other = with(pod("default/o", &[]), |k| {
        k.spread = vec![spread(2, ZONE, foo)]
    });
    assert_eq!(run(&mut c, other).0.len(), 4);
    // A node without the topology label is never a candidate.
    let mut c = cluster(&[("node-a", &[(ZONE, "zone1")]), ("node-b", &[])]);
    let (ok, msg) = run(&mut c, p.clone());
    assert_eq!(ok, ["node-a"]);
    assert!(msg.contains("(missing required label)"), "{msg}");
    // minDomains: fewer domains than asked make the global minimum 0.
    let mut c = cluster(nodes);
    place(&mut c, pod("default/a", foo), "node-a");
    place(&mut c, pod("default/x", foo), "node-x");
    let mut strict = spread(1, ZONE, foo);
    strict.min_domains = Some(3);
    let p = with(pod("default/p", foo), |k| k.spread = vec![strict]);
    assert!(run(&mut c, p).0.is_empty());
}

#[test]
fn spread_domains_honour_node_affinity_unless_told_not_to() {
    // zone2 is excluded by the node selector: with the default policy it
    // is no domain, so zone1's count is measured against itself.
    let nodes: &[(&str, &[(&str, &str)])] = &[
        ("node-a", &[(ZONE, "zone1"), ("pool", "gpu")]),
        ("node-x", &[(ZONE, "zone2"), ("pool", "cpu")]),
    ];
    let foo = &[("foo", "")];
    let mut c = cluster(nodes);
    place(&mut c, pod("default/a", foo), "node-a");
    let mut p = with(pod("default/p", foo), |k| {
        k.spread = vec![spread(1, ZONE, foo)]
    });
    p.node_selector = labels(&[("pool", "gpu")]);
    assert_eq!(run(&mut c, p.clone()).0, ["node-a"]);
    // nodeAffinityPolicy: Ignore counts zone2 (empty) as a domain.
    p.constraints.spread[0].honor_node_affinity = false;
    assert!(run(&mut c, p).0.is_empty());
}

/// kube-scheduler's search stops once it has found the nodes it wants:
/// the first `limit` in the order given, rejections counted for the nodes
/// it visited; a pod that fits nowhere still visits (and counts) them all.
#[test]
fn the_search_stops_at_its_limit_and_counts_only_the_nodes_it_visited() {
    let pool = [("pool", "a")];
    let other = [("pool", "b")];
    let c = cluster(&[
        ("n0", &other),
        ("n1", &pool),
        ("n2", &other),
        ("n3", &pool),
        ("n4", &pool),
    ]);
    let mut p = pod("default/p", &[]);
    p.node_selector = labels(&pool);
    let mut rej = Rejections::default();
    let found = feasible_among(&c, &p, [2, 3, 4, 0, 1].into_iter(), 2, &mut rej);
    assert_eq!(found, [3, 4], "from node 2 round, stopping at two");
    assert_eq!(
        rej.message(5),
        "0/5 nodes are available: 1 node(s) didn't match Pod's node affinity/selector",
        "node 2 was visited, nodes 0 and 1 were not"
    );
    p.node_selector = labels(&[("pool", "c")]);
    let mut rej = Rejections::default();
    assert!(feasible_among(&c, &p, 0..5, 2, &mut rej).is_empty());
    assert_eq!(
        rej.message(5),
        "0/5 nodes are available: 5 node(s) didn't match Pod's node affinity/selector"
    );
    // A plain pod takes the columns-only path, which stops the same way.
    let plain = pod("default/q", &[]);
    let found = feasible_among(&c, &plain, [4, 0, 1, 2, 3].into_iter(), 3, &mut rej);
    assert_eq!(found, [4, 0, 1]);
    assert!(any_feasible(&c, &plain));
}
