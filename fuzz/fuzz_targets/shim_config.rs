//! Arbitrary bytes as a `dragon-scheduler` configuration file, through
//! `Config::parse` (what `Config::load` runs on the file's text): a config
//! or a clean error naming the file, never a panic.
//!
//! `k8s-shim/src/config.rs` is compiled in by path, so this target does not
//! build the Kubernetes client stack the rest of the shim needs.

#![no_main]

#[allow(dead_code)]
#[path = "../../k8s-shim/src/config.rs"]
mod config;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    match config::Config::parse(&text, "fuzz.yaml") {
        Ok(c) => {
            assert!(!c.scheduler_name.is_empty());
            assert!(c.scale_interval_seconds >= 1.0);
            // The settings reach the policy as JSON text.
            let settings = c.settings_json();
            if !settings.is_empty() {
                let v: serde_json::Value =
                    serde_json::from_str(&settings).expect("settings_json is JSON");
                assert!(v.is_object());
            }
        }
        Err(e) => {
            let msg = format!("{e:#}");
            assert!(msg.starts_with("invalid config fuzz.yaml"), "{msg}");
        }
    }
});
