//! Builds the policies Dragon ships (`plugin/`) as components; see
//! `build_components.rs`.

#[path = "build_components.rs"]
mod components;

fn main() {
    let manifest = std::path::PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap());
    let root = manifest.join("../..").canonicalize().unwrap();
    components::build(
        &root,
        &[
            &[
                ("dragon-policy", "dragon_policy", "DRAGON"),
                ("baseline-policy", "baseline_policy", "BASELINE"),
                ("tiresias-policy", "tiresias_policy", "TIRESIAS"),
                ("pollux-policy", "pollux_policy", "POLLUX"),
                ("backfill-policy", "backfill_policy", "BACKFILL"),
                ("fair-share-policy", "fair_share_policy", "FAIR_SHARE"),
            ],
            // Links `dragon-policy` without its export.
            &[("dragon-plus-policy", "dragon_plus_policy", "DRAGON_PLUS")],
        ],
        &["plugin", "wit", "Cargo.toml", "Cargo.lock"],
    );
}
