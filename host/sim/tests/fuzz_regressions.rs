//! Inputs that crashed or hung a fuzz target (`fuzz/regressions/<target>/`,
//! see `fuzz/README.md`), kept as tests: each must give a clean error, fast.

use std::time::{Duration, Instant};

use dragon_sim::Trace;

fn parse_err(name: &str, text: &str) -> String {
    let started = Instant::now();
    let result = Trace::parse(text, name, false);
    let took = started.elapsed();
    let e = match result {
        Ok(t) => panic!("{name} parsed into a trace of {} nodes", t.nodes.len()),
        Err(e) => format!("{e:#}"),
    };
    assert!(
        took < Duration::from_secs(2),
        "{name} took {took:?} to refuse: {e}"
    );
    e
}

/// A parameter-server count of four billion made the trace parser allocate
/// a pod for each and abort out of memory.
#[test]
fn trace_parser_refuses_a_huge_ps_count() {
    let e = parse_err(
        "ps-count-out-of-memory.yaml",
        include_str!("../../../fuzz/regressions/trace_parser/ps-count-out-of-memory.yaml"),
    );
    assert!(
        e.contains("jobs[0] (a).ps.count") && e.contains("at most 10000"),
        "{e}"
    );
}

/// 60 node groups of 100 000 nodes each in 3.8 KB: every node used to be
/// built (and its name checked for duplicates) before the total was compared
/// with the 100 000 supported, which took minutes and gigabytes. The total
/// is now checked before any group is expanded.
#[test]
fn trace_parser_refuses_too_many_nodes_before_building_them() {
    let e = parse_err(
        "node-groups-slow.yaml",
        include_str!("../../../fuzz/regressions/trace_parser/node-groups-slow.yaml"),
    );
    assert!(e.contains("100000"), "{e}");
}
