//! The policy components bundled with Dragon, built from `plugin/` by this
//! crate's build script: their names (`dragon`, `baseline`, `dragon-plus`
//! and the zoo: `tiresias`, `pollux`, `backfill`, `fair-share`) select them wherever a
//! policy file is expected.

mod generated {
    include!(concat!(env!("OUT_DIR"), "/components.rs"));
}

pub use generated::{BACKFILL, BASELINE, DRAGON, DRAGON_PLUS, FAIR_SHARE, POLLUX, TIRESIAS};

/// The bundled component called `name`, if there is one.
pub fn by_name(name: &str) -> Option<&'static [u8]> {
    match name {
        "dragon" => Some(DRAGON),
        "baseline" => Some(BASELINE),
        "dragon-plus" => Some(DRAGON_PLUS),
        "tiresias" => Some(TIRESIAS),
        "pollux" => Some(POLLUX),
        "backfill" => Some(BACKFILL),
        "fair-share" => Some(FAIR_SHARE),
        _ => None,
    }
}

/// Names accepted by [`by_name`].
pub const NAMES: &[&str] = &[
    "dragon",
    "baseline",
    "dragon-plus",
    "tiresias",
    "pollux",
    "backfill",
    "fair-share",
];
