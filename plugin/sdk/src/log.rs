//! Logging through the host's `log` import.

use crate::types::Level;

/// Send a line to the scheduler's log. Natively (in unit tests) it goes to
/// stderr when `DRAGON_POLICY_LOG` is set, and nowhere otherwise.
pub fn log(level: Level, message: &str) {
    #[cfg(target_arch = "wasm32")]
    crate::bindings::dragon::scheduler::host::log(level, message);
    #[cfg(not(target_arch = "wasm32"))]
    if std::env::var_os("DRAGON_POLICY_LOG").is_some() {
        eprintln!("[policy {level:?}] {message}");
    }
}
