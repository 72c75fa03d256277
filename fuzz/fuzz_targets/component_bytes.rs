//! Arbitrary bytes handed to the host's policy loader as a component: a
//! `LoadError` (or, for a real policy, a loaded one), never a panic or a
//! crash of the host.

#![no_main]

use std::sync::LazyLock;

use dragon_runtime::{ComponentCache, LoadOptions, PolicyEngine, WasmPolicy};
use libfuzzer_sys::fuzz_target;

static ENGINE: LazyLock<PolicyEngine> = LazyLock::new(|| PolicyEngine::new().expect("engine"));

fuzz_target!(|data: &[u8]| {
    let options = LoadOptions::default();
    match WasmPolicy::from_bytes(
        &ENGINE,
        &ComponentCache::disabled(),
        "fuzz.wasm",
        data,
        &options,
    ) {
        Ok(p) => {
            let name = &p.info().name;
            assert!(!name.trim().is_empty() && name.len() <= 64, "{name:?}");
        }
        Err(e) => {
            let msg = e.to_string();
            assert!(msg.contains("fuzz.wasm"), "{msg}");
        }
    }
});
