//! Hot swap: calls in flight finish on the old policy, later calls see the
//! new one, and a failed load leaves the old one serving.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use dragon_runtime::{ComponentCache, FixedView, Hooks, LoadOptions, PolicySlot, PolicySource};
use dragon_tests::{bundled, engine, lone_pod_on};

#[test]
fn a_swap_under_load_fails_no_call_and_later_calls_see_the_new_policy() {
    let e = engine();
    let slot = Arc::new(PolicySlot::new(
        e.clone(),
        ComponentCache::disabled(),
        bundled(&e, "baseline", ""),
    ));
    let stop = Arc::new(AtomicBool::new(false));
    let swapped = Arc::new(AtomicBool::new(false));
    // Calls per worker thread, so every thread is seen on both sides of the
    // swap even when the scheduler favours one of them.
    let calls: Arc<Vec<AtomicUsize>> = Arc::new((0..3).map(|_| AtomicUsize::new(0)).collect());
    let mut workers = Vec::new();
    for t in 0..3 {
        let (slot, stop, swapped, calls) =
            (slot.clone(), stop.clone(), swapped.clone(), calls.clone());
        workers.push(std::thread::spawn(move || {
            let (pod, nodes) = lone_pod_on(64);
            let mut after_swap = Vec::new();
            while !stop.load(Ordering::Relaxed) {
                let was_swapped = swapped.load(Ordering::SeqCst);
                let policy = slot.current();
                let scores = policy
                    .score(&pod, &nodes, &FixedView::from_candidates(&nodes))
                    .expect("no call fails across a swap");
                assert_eq!(scores.len(), 64);
                calls[t].fetch_add(1, Ordering::Relaxed);
                if was_swapped {
                    after_swap.push(policy.info().name.clone());
                }
            }
            after_swap
        }));
    }
    let each_at_least = |n: &[usize]| {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while calls
            .iter()
            .zip(n)
            .any(|(c, n)| c.load(Ordering::Relaxed) < *n)
        {
            assert!(
                std::time::Instant::now() < deadline,
                "worker threads made no progress"
            );
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    };
    each_at_least(&[100, 100, 100]);
    // A bad file first: refused, the old policy keeps serving.
    let bad = PolicySource::Bytes {
        origin: "corrupt.wasm".into(),
        bytes: b"\0asm garbage".to_vec(),
    };
    let err = slot.reload(&bad, &LoadOptions::default()).unwrap_err();
    assert!(err.to_string().contains("corrupt.wasm"), "{err}");
    assert_eq!(slot.current().info().name, "baseline");

    let report = slot
        .reload(
            &PolicySource::named_or_file("dragon"),
            &LoadOptions::default(),
        )
        .unwrap();
    swapped.store(true, Ordering::SeqCst);
    assert_eq!(
        (report.old.as_str(), report.new.as_str()),
        ("baseline 0.1.0", "dragon 0.1.0")
    );
    let after: Vec<usize> = calls
        .iter()
        .map(|c| c.load(Ordering::Relaxed) + 100)
        .collect();
    each_at_least(&after);
    stop.store(true, Ordering::Relaxed);
    for w in workers {
        let names = w.join().expect("worker thread");
        assert!(!names.is_empty());
        assert!(
            names.iter().all(|n| n == "dragon"),
            "a call started after the swap used the old policy"
        );
    }
}

#[test]
fn a_call_in_flight_keeps_its_policy_while_the_slot_moves_on() {
    let e = engine();
    let slot = PolicySlot::new(
        e.clone(),
        ComponentCache::disabled(),
        bundled(&e, "baseline", ""),
    );
    let held = slot.current();
    slot.swap(bundled(&e, "dragon", ""));
    let (pod, nodes) = lone_pod_on(64);
    // The held Arc still answers as baseline; the slot answers as dragon.
    assert_eq!(held.info().name, "baseline");
    assert!(
        held.score(&pod, &nodes, &FixedView::from_candidates(&nodes))
            .is_ok()
    );
    assert_eq!(slot.current().info().name, "dragon");
}
