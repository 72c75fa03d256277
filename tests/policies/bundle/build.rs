//! Builds the test-only policies in `tests/policies/` as components, the
//! same way `dragon-bundled` builds the shipped ones.

#[path = "../../../host/bundled/build_components.rs"]
mod components;

fn main() {
    let manifest = std::path::PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap());
    let root = manifest.join("../../..").canonicalize().unwrap();
    components::build(
        &root,
        &[&[("hostile-policy", "hostile_policy", "HOSTILE")]],
        &[
            "plugin/sdk",
            "wit",
            "tests/policies/hostile",
            "Cargo.toml",
            "Cargo.lock",
        ],
    );
}
