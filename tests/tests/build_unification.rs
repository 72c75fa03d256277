//! The README's two commands share one build: after this test build
//! (`cargo test --release --workspace`), the main job's build
//! (`cargo run --release -p dragon-host --bin dragon`) compiles no
//! dependency again (a workspace crate may be, when this test runs alone
//! and the `dragon` binary is not part of the selection).
//! Cargo resolves features per command, so a dependency that the tests use
//! with more features would otherwise be compiled twice (wasmtime and its
//! tree took minutes); `workspace-hack/` pins those features for both.

use std::process::Command;

#[test]
fn the_main_job_reuses_every_artifact_of_the_test_build() {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/..");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut command = Command::new(cargo);
    // The main job runs from a shell, not from inside a test: drop what
    // cargo sets for this test binary. Build scripts that watch these
    // variables (ring's watches CARGO_MANIFEST_DIR and CARGO_PKG_*) would
    // otherwise run again here and nowhere else.
    for (key, _) in std::env::vars_os() {
        let key = key.to_string_lossy();
        let set_for_tests = [
            "CARGO_MANIFEST_",
            "CARGO_PKG_",
            "CARGO_CRATE_",
            "CARGO_BIN_",
        ]
        .iter()
        .any(|prefix| key.starts_with(prefix))
            || ["CARGO_PRIMARY_PACKAGE", "CARGO_TARGET_TMPDIR", "OUT_DIR"].contains(&&*key);
        if set_for_tests {
            command.env_remove(&*key);
        }
    }
    let out = command
        .current_dir(root)
        .args([
            "build",
            "--release",
            "-p",
            "dragon-host",
            "--bin",
            "dragon",
            "--message-format=json",
        ])
        .output()
        .expect("run cargo");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rebuilt: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|m| m["reason"] == "compiler-artifact" && m["fresh"] == false)
        .map(|m| m["package_id"].as_str().unwrap_or("?").to_string())
        .filter(|id| !id.starts_with("path+file://"))
        .collect();
    assert!(
        rebuilt.is_empty(),
        "the main job compiled again what the test build had compiled (a feature of a \
         shared dependency differs; add it to workspace-hack/Cargo.toml): {rebuilt:?}"
    );
}
