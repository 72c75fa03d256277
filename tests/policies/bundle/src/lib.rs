//! Test-only policy components: deliberately bad ones, for the tests of the
//! host and of `dragon-scheduler`.

mod generated {
    include!(concat!(env!("OUT_DIR"), "/components.rs"));
}

pub use generated::HOSTILE;

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
