//! The benchmark binary runs end to end (a smoke run with small sizes): its
//! JSON has every figure, and no cycle fails across hot swaps under load.
//! Timings are not asserted (a shared machine is noisy). The divan
//! benchmarks run once each under `cargo test` as their own check.

use std::process::Command;

#[test]
fn dragon_bench_quick_reports_every_figure_and_no_failed_swap_cycles() {
    let out = Command::new(env!("CARGO_BIN_EXE_dragon-bench"))
        .args(["--quick", "--json"])
        .output()
        .expect("run dragon-bench");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    for key in [
        "swap_cached_ms",
        "swap_cold_ms",
        "snapshot_rss_mib",
        "guest_memory_mib",
        "live_score_ms",
        "resend_score_ms",
    ] {
        let x = v[key]
            .as_f64()
            .unwrap_or_else(|| panic!("{key} missing: {v}"));
        assert!(x.is_finite() && x > 0.0, "{key} = {x}");
    }
    assert_eq!(v["swap_failed_cycles"], 0, "{v}");
    assert!(v["swap_cycles_run"].as_u64().unwrap() > 0, "{v}");
}
