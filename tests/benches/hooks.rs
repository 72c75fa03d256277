//! What a hook call costs through the wasm boundary next to the same
//! policy's Rust code run natively, at 100, 1,000 and 5,000 candidate nodes.
//! Native and wasm run in one process, one after the other, so their ratio
//! holds on a loaded machine even when the absolute times drift. `wasm_0_1`
//! is the same policy built against interface 0.1, which lowers every
//! node's columns into each call.
//!
//!     cargo bench -p dragon-tests --bench hooks
//!
//! The native side gets its inputs already converted to the SDK's types and
//! its view already built: it measures the policy's own code, the wasm side
//! that code plus the boundary (the view is sent once, then unchanged).

use std::sync::LazyLock;

use divan::Bencher;
use dragon_policy::Dragon;
use dragon_policy_sdk::Policy;
use dragon_runtime::{FixedView, Hooks, WasmPolicy, wit};
use dragon_tests::workload::{placement, scale_input};
use dragon_tests::{Lift, Native, candidates, engine, sdk_view};

const NODES: &[usize] = &[100, 1000, 5000];

static WASM: LazyLock<WasmPolicy> =
    LazyLock::new(|| dragon_tests::bundled(&engine(), "dragon", ""));
static NATIVE: LazyLock<Native<Dragon>> = LazyLock::new(|| Native::new(""));
/// The same policy built against interface 0.1 (node columns in every call).
static WASM_0_1: LazyLock<WasmPolicy> = LazyLock::new(|| {
    dragon_tests::load(
        &engine(),
        "dragon.wasm (0.1)",
        dragon_tests::DRAGON_V0_1,
        &Default::default(),
    )
});

fn main() {
    // Compiled before timing starts, not in the first sample.
    LazyLock::force(&WASM);
    LazyLock::force(&NATIVE);
    LazyLock::force(&WASM_0_1);
    divan::main();
}

#[divan::bench_group]
mod score {
    use super::*;

    #[divan::bench(args = NODES)]
    fn native(b: Bencher, nodes: usize) {
        let (pod, cands) = placement(nodes);
        let view = FixedView::from_candidates(&cands);
        let (pod, cands) = (
            dragon_tests::placement(&pod, &view),
            candidates(&cands, &view),
        );
        let view = sdk_view(&view);
        b.bench(|| NATIVE.policy().score(&pod, &cands, &view));
    }

    #[divan::bench(args = NODES)]
    fn wasm(b: Bencher, nodes: usize) {
        let (pod, cands) = placement(nodes);
        let view = FixedView::from_candidates(&cands);
        b.bench(|| WASM.score(&pod, &cands, &view).expect("score"));
    }

    #[divan::bench(args = NODES)]
    fn wasm_0_1(b: Bencher, nodes: usize) {
        let (pod, cands) = placement(nodes);
        let view = FixedView::from_candidates(&cands);
        b.bench(|| WASM_0_1.score(&pod, &cands, &view).expect("score"));
    }
}

#[divan::bench_group]
mod filter {
    use super::*;

    #[divan::bench(args = NODES)]
    fn native(b: Bencher, nodes: usize) {
        let (pod, cands) = placement(nodes);
        let view = FixedView::from_candidates(&cands);
        let (pod, cands) = (
            dragon_tests::placement(&pod, &view),
            candidates(&cands, &view),
        );
        let view = sdk_view(&view);
        b.bench(|| NATIVE.policy().filter(&pod, &cands, &view));
    }

    #[divan::bench(args = NODES)]
    fn wasm(b: Bencher, nodes: usize) {
        let (pod, cands) = placement(nodes);
        let view = FixedView::from_candidates(&cands);
        b.bench(|| WASM.filter(&pod, &cands, &view).expect("filter"));
    }

    #[divan::bench(args = NODES)]
    fn wasm_0_1(b: Bencher, nodes: usize) {
        let (pod, cands) = placement(nodes);
        let view = FixedView::from_candidates(&cands);
        b.bench(|| WASM_0_1.filter(&pod, &cands, &view).expect("filter"));
    }
}

fn gang() -> wit::GangState {
    wit::GangState {
        id: 1,
        reserved: 8,
        min_member: 9,
        present: 9,
        waited_ms: 100,
    }
}

#[divan::bench_group]
mod permit {
    use super::*;

    #[divan::bench]
    fn native(b: Bencher) {
        let gang = gang().lift();
        b.bench(|| NATIVE.policy().permit(0, &gang));
    }

    #[divan::bench]
    fn wasm(b: Bencher) {
        let gang = gang();
        b.bench(|| WASM.permit(0, &gang).expect("permit"));
    }
}

/// A scale pass over 100 running and 25 waiting jobs on 1,000 nodes.
#[divan::bench_group]
mod scale {
    use super::*;

    #[divan::bench]
    fn native(b: Bencher) {
        let input = scale_input(100, 1000);
        let view = FixedView::from_capacity(&input.nodes);
        let input = dragon_tests::scale_input(&input, &view);
        let view = sdk_view(&view);
        b.bench(|| NATIVE.policy().scale(&input, &view));
    }

    #[divan::bench]
    fn wasm(b: Bencher) {
        let input = scale_input(100, 1000);
        let view = FixedView::from_capacity(&input.nodes);
        b.bench(|| WASM.scale(&input, &view).expect("scale"));
    }
}

/// A `score` at 100 nodes on the live instance, and the same call after a
/// reset, which pays a fresh store, instance and `configure` (what a
/// failed call costs the next one).
#[divan::bench_group]
mod instantiate {
    use super::*;

    #[divan::bench]
    fn live_call(b: Bencher) {
        let (pod, cands) = placement(100);
        let view = FixedView::from_candidates(&cands);
        b.bench(|| WASM.score(&pod, &cands, &view).expect("score"));
    }

    #[divan::bench]
    fn call_after_reset(b: Bencher) {
        let (pod, cands) = placement(100);
        let view = FixedView::from_candidates(&cands);
        b.bench(|| {
            WASM.reset();
            WASM.score(&pod, &cands, &view).expect("score")
        });
    }
}
