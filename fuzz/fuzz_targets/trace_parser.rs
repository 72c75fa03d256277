//! Arbitrary bytes as a simulator trace, through the YAML and the JSON
//! parser: `Trace::parse` must return a trace or a clean error, never panic,
//! and a trace it returns must be one the simulator can run.

#![no_main]

use dragon_sim::Trace;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    for json in [false, true] {
        let origin = if json { "fuzz.json" } else { "fuzz.yaml" };
        match Trace::parse(&text, origin, json) {
            Ok(t) => {
                assert!(!t.nodes.is_empty() && !t.jobs.is_empty());
                assert!(
                    t.jobs
                        .windows(2)
                        .all(|w| w[0].arrival_ms <= w[1].arrival_ms)
                );
                assert!(t.scale_interval_ms >= 1000);
                for j in &t.jobs {
                    let job = &j.job;
                    assert!(
                        1 <= job.min_workers
                            && job.min_workers <= job.workers
                            && job.workers <= job.max_workers
                    );
                }
            }
            Err(e) => {
                let msg = format!("{e:#}");
                assert!(msg.starts_with(origin), "{msg}");
            }
        }
    }
});
