//! The policy components bundled with Dragon, built from `plugin/` by this
//! crate's build script: the names `dragon` and `baseline` select them
//! wherever a policy file is expected.

mod generated {
    include!(concat!(env!("OUT_DIR"), "/components.rs"));
}

pub use generated::{BASELINE, DRAGON};

/// Test-only policies (`tests/policies/`): deliberately bad components.
pub mod test_policies {
    pub use crate::generated::HOSTILE;

    /// [`HOSTILE`] with the fault fixed in its bytes set to `mode` (12 bytes,
    /// e.g. `hooks_______` or `flaky-1in10_`; the policy's source lists them).
    pub fn hostile_with_mode(mode: &[u8; 12]) -> Vec<u8> {
        let marker = b"HOSTILE_METADATA_MODE=normal______";
        let mut bytes = HOSTILE.to_vec();
        let at = bytes
            .windows(marker.len())
            .position(|w| w == marker)
            .expect("the hostile component carries its mode marker");
        bytes[at + 22..at + 34].copy_from_slice(mode);
        bytes
    }
}

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
