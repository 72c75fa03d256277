//! How fast the framework decides: full rounds (queue → filters → policy →
//! reserve → permit → bind to memory) until every pod is bound, on 5,000
//! nodes. 10,000 lone pods under `baseline`, 1,000 gangs of 8 under
//! `dragon`, each policy run natively and through wasm in one process, so
//! the wasm/native ratio is measured in one run; `wasm_0_1` is the same
//! policy built against interface 0.1. Divan reports pods/s.
//! Device claims: 125 gangs of 8 on 1,000 nodes of 8 GPUs, each worker
//! with a claim for one device of its own (CEL selectors in its class and
//! its request), against the same gangs without claims.
//! And one preemption: a gang of 8 whole-node workers on 5,000 full nodes
//! choosing its 8 victims among 5,000 running gangs. Both again with the
//! nodes in 50 racks of 100 and every gang required to stay in one (the
//! placement tries racks, the preemption searches them one by one), each
//! beside the same work without racks. And the flight
//! recorder's cost: the gangs again, with and without every round written
//! to a recording.
//!
//!     cargo bench -p dragon-tests --bench throughput
//!
//! Building the cluster and its pending pods is not timed.

use std::sync::LazyLock;

use baseline_policy::Baseline;
use divan::counter::ItemsCount;
use divan::{Bencher, Divan};
use dragon_policy::Dragon;
use dragon_runtime::{Hooks, WasmPolicy};
use dragon_tests::workload::{crowded, in_racks, pending, pending_claiming, preempt, schedule_all};
use dragon_tests::{Native, engine};

const NODES: usize = 5000;
const LONE_PODS: usize = 10_000;
const GANGS: usize = 1000;
const RACKS: usize = 50;

static WASM_BASELINE: LazyLock<WasmPolicy> =
    LazyLock::new(|| dragon_tests::bundled(&engine(), "baseline", ""));
static WASM_DRAGON: LazyLock<WasmPolicy> =
    LazyLock::new(|| dragon_tests::bundled(&engine(), "dragon", ""));
/// The same policies built against interface 0.1.
static WASM_BASELINE_0_1: LazyLock<WasmPolicy> =
    LazyLock::new(|| v0_1("baseline", dragon_tests::BASELINE_V0_1));
static WASM_DRAGON_0_1: LazyLock<WasmPolicy> =
    LazyLock::new(|| v0_1("dragon", dragon_tests::DRAGON_V0_1));

fn v0_1(name: &str, bytes: &[u8]) -> WasmPolicy {
    dragon_tests::load(&engine(), name, bytes, &Default::default())
}

fn main() {
    // Compiled before timing starts, not in the first sample.
    LazyLock::force(&WASM_BASELINE);
    LazyLock::force(&WASM_DRAGON);
    LazyLock::force(&WASM_BASELINE_0_1);
    LazyLock::force(&WASM_DRAGON_0_1);
    // One run schedules tens of thousands of pods; a few samples of one
    // run each are enough, and their median is what divan shows.
    Divan::from_args().sample_count(5).sample_size(1).main();
}

fn run(b: Bencher, jobs: usize, per_job: u32, policy: &dyn Hooks) {
    b.counter(ItemsCount::new(jobs * per_job as usize))
        .with_inputs(|| pending(NODES, jobs, per_job))
        .bench_local_refs(|s| schedule_all(s, policy).expect("every pod bound"));
}

#[divan::bench_group]
mod lone_pods_baseline {
    use super::*;

    #[divan::bench]
    fn native(b: Bencher) {
        run(b, LONE_PODS, 1, &Native::<Baseline>::new(""));
    }

    #[divan::bench]
    fn wasm(b: Bencher) {
        run(b, LONE_PODS, 1, &*WASM_BASELINE);
    }

    #[divan::bench]
    fn wasm_0_1(b: Bencher) {
        run(b, LONE_PODS, 1, &*WASM_BASELINE_0_1);
    }
}

#[divan::bench_group]
mod gangs_of_8_dragon {
    use super::*;

    #[divan::bench]
    fn native(b: Bencher) {
        run(b, GANGS, 8, &Native::<Dragon>::new(""));
    }

    #[divan::bench]
    fn wasm(b: Bencher) {
        run(b, GANGS, 8, &*WASM_DRAGON);
    }

    #[divan::bench]
    fn wasm_0_1(b: Bencher) {
        run(b, GANGS, 8, &*WASM_DRAGON_0_1);
    }
}

/// The same 8,000 pods in gangs of 64 and of 512: what a gang's size costs.
#[divan::bench_group]
mod larger_gangs_dragon {
    use super::*;

    #[divan::bench(args = [64, 512])]
    fn native(b: Bencher, size: u32) {
        run(
            b,
            GANGS * 8 / size as usize,
            size,
            &Native::<Dragon>::new(""),
        );
    }

    #[divan::bench(args = [64, 512])]
    fn wasm(b: Bencher, size: u32) {
        run(b, GANGS * 8 / size as usize, size, &*WASM_DRAGON);
    }
}

/// The flight recorder's cost: the same gangs through wasm, each round
/// also written to a recording on disk as dragon-scheduler writes it.
#[divan::bench_group]
mod recorded_gangs_of_8_dragon {
    use super::*;
    use dragon_framework::record::{FORMAT, Header, Recorder};
    use dragon_tests::workload::schedule_all_recorded;

    fn recorder() -> Recorder {
        let path = std::env::temp_dir().join(format!("dragon-bench-{}.rec", std::process::id()));
        let header = Header {
            format: FORMAT,
            source: "bench".into(),
            policy: "dragon".into(),
            origin: "dragon".into(),
            sha256: String::new(),
            settings: String::new(),
            interface_version: String::new(),
            config: String::new(),
            fallback: String::new(),
            part: 0,
        };
        Recorder::create(&path, &header).expect("a recording in the temporary directory")
    }

    #[divan::bench]
    fn unrecorded(b: Bencher) {
        run(b, GANGS, 8, &*WASM_DRAGON);
    }

    #[divan::bench]
    fn recorded(b: Bencher) {
        b.counter(ItemsCount::new(GANGS * 8))
            .with_inputs(|| (pending(NODES, GANGS, 8), recorder()))
            .bench_local_refs(|(s, r)| {
                schedule_all_recorded(s, &*WASM_DRAGON, Some(r)).expect("every pod bound")
            });
    }
}

#[divan::bench_group]
mod preemption_dragon {
    use super::*;

    fn run(b: Bencher, policy: &dyn Hooks) {
        b.with_inputs(|| crowded(NODES))
            .bench_local_refs(|s| preempt(s, policy).expect("8 victims"));
    }

    #[divan::bench]
    fn native(b: Bencher) {
        run(b, &Native::<Dragon>::new(""));
    }

    #[divan::bench]
    fn wasm(b: Bencher) {
        run(b, &*WASM_DRAGON);
    }
}

/// The cost of a required rack: the same gangs through wasm with the
/// nodes in racks and every gang held to one, against none.
#[divan::bench_group]
mod rack_gangs_of_8_dragon {
    use super::*;

    #[divan::bench]
    fn anywhere(b: Bencher) {
        run(b, GANGS, 8, &*WASM_DRAGON);
    }

    #[divan::bench]
    fn one_rack(b: Bencher) {
        b.counter(ItemsCount::new(GANGS * 8))
            .with_inputs(|| in_racks(pending(NODES, GANGS, 8), RACKS))
            .bench_local_refs(|s| schedule_all(s, &*WASM_DRAGON).expect("every pod bound"));
    }
}

/// Preemption for a gang held to one rack: victims searched rack by rack
/// (at most 16 racks), against the cluster-wide search.
#[divan::bench_group]
mod rack_preemption_dragon {
    use super::*;

    #[divan::bench]
    fn anywhere(b: Bencher) {
        b.with_inputs(|| crowded(NODES))
            .bench_local_refs(|s| preempt(s, &*WASM_DRAGON).expect("8 victims"));
    }

    #[divan::bench]
    fn one_rack(b: Bencher) {
        b.with_inputs(|| in_racks(crowded(NODES), RACKS))
            .bench_local_refs(|s| preempt(s, &*WASM_DRAGON).expect("8 victims"));
    }
}

/// The allocator's cost per gang member: the same gangs through wasm on
/// 1,000 nodes of 8 GPUs, with every GPU a published device and every
/// worker claiming one, and without.
#[divan::bench_group]
mod device_claims_gangs_of_8_dragon {
    use super::*;

    const NODES: usize = 1000;
    const GANGS: usize = 125;

    #[divan::bench]
    fn without_claims(b: Bencher) {
        b.counter(ItemsCount::new(GANGS * 8))
            .with_inputs(|| pending(NODES, GANGS, 8))
            .bench_local_refs(|s| schedule_all(s, &*WASM_DRAGON).expect("every pod bound"));
    }

    #[divan::bench]
    fn with_claims(b: Bencher) {
        b.counter(ItemsCount::new(GANGS * 8))
            .with_inputs(|| pending_claiming(NODES, GANGS, 8))
            .bench_local_refs(|s| schedule_all(s, &*WASM_DRAGON).expect("every pod bound"));
    }
}
