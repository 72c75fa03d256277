//! The policy components bundled with Dragon, built from `plugin/` by this
//! crate's build script: the names `dragon` and `baseline` select them
//! wherever a policy file is expected.

mod generated {
    include!(concat!(env!("OUT_DIR"), "/components.rs"));
}

pub use generated::{BASELINE, DRAGON};

/// The bundled component called `name`, if there is one.
pub fn by_name(name: &str) -> Option<&'static [u8]> {
    match name {
        "dragon" => Some(DRAGON),
        "baseline" => Some(BASELINE),
        _ => None,
    }
}

/// Names accepted by [`by_name`].
pub const NAMES: &[&str] = &["dragon", "baseline"];
