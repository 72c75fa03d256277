//! Builds policy crates for `wasm32-unknown-unknown` with a nested cargo,
//! encodes each core module as a component, and writes constants pointing
//! at the results into `OUT_DIR/components.rs`. This is how wasmtime's own
//! test programs are built: a fresh clone needs nothing but `cargo build`.
//! Shared by the build scripts of `dragon-bundled` (the policies Dragon
//! ships) and `dragon-test-policies` (the deliberately bad ones).

use std::path::{Path, PathBuf};
use std::process::Command;

#[path = "wasm_build.rs"]
mod wasm_build;

use wasm_build::TARGET;

/// One policy crate to build: (crate name, wasm file stem, constant name).
pub type Policy = (&'static str, &'static str, &'static str);

/// Build the policies of the workspace at `root`, one cargo invocation per
/// group (a crate that links another policy's crate without its export is
/// built apart from it: cargo unifies a package's features within one
/// build); rerun when anything under `watch` (paths relative to `root`)
/// changes.
pub fn build(root: &Path, groups: &[&[Policy]], watch: &[&str]) {
    for dir in watch {
        println!("cargo:rerun-if-changed={}", root.join(dir).display());
    }
    wasm_build::ensure_target(root).unwrap_or_else(|e| panic!("{e}"));

    let out = PathBuf::from(std::env::var("OUT_DIR").unwrap());
    let mut consts = String::new();
    for (g, policies) in groups.iter().enumerate() {
        // A target directory per group: a dependency's cdylib would
        // otherwise overwrite the same crate's own build in the other.
        let target_dir = match g {
            0 => root.join("target/policies"),
            g => root.join(format!("target/policies-{g}")),
        };
        build_group(root, &target_dir, policies);
        encode_group(&target_dir, &out, policies, &mut consts);
    }
    std::fs::write(out.join("components.rs"), consts).unwrap();
}

/// Encode each built module of `policies` as a component in `out`, adding
/// its constant to `consts`.
fn encode_group(target_dir: &Path, out: &Path, policies: &[Policy], consts: &mut String) {
    for (krate, stem, name) in policies {
        let module = target_dir
            .join(TARGET)
            .join("policy")
            .join(format!("{stem}.wasm"));
        let component =
            encode(&module).unwrap_or_else(|e| panic!("encoding {krate} as a component: {e}"));
        let path = out.join(format!("{stem}.component.wasm"));
        std::fs::write(&path, &component).unwrap();
        consts.push_str(&format!(
            "/// The `{krate}` component ({} bytes).\npub const {name}: &[u8] = include_bytes!({:?});\n",
            component.len(),
            path.display().to_string()
        ));
    }
}

fn build_group(root: &Path, target_dir: &Path, policies: &[Policy]) {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.current_dir(root)
        .args([
            "build",
            "--profile",
            "policy",
            "--target",
            TARGET,
            "--target-dir",
        ])
        .arg(target_dir);
    for (krate, _, _) in policies {
        cmd.args(["-p", krate]);
    }
    // The outer build's flags are for the host, not for wasm.
    for var in [
        "RUSTFLAGS",
        "CARGO_ENCODED_RUSTFLAGS",
        "CARGO_TARGET_DIR",
        "CARGO_BUILD_TARGET",
        "RUSTC_WORKSPACE_WRAPPER",
    ] {
        cmd.env_remove(var);
    }
    let status = cmd
        .status()
        .expect("failed to run cargo for the policy build");
    if !status.success() {
        panic!("building the policy components failed (see the cargo output above)");
    }
}

fn encode(module: &Path) -> Result<Vec<u8>, Box<dyn std::error::Error>> {
    let bytes = std::fs::read(module).map_err(|e| format!("{}: {e}", module.display()))?;
    Ok(wasm_build::encode(&bytes)?)
}
