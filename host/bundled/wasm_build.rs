//! Building a policy crate into a component, shared by the build scripts
//! that bundle policies (`build_components.rs`) and `dragon policy build`:
//! the wasm target, and the in-process component encoding (no
//! `wasm-tools` on PATH).

use std::fmt;
use std::path::Path;
use std::process::Command;

/// Why a policy crate did not become a component.
#[derive(Debug)]
pub enum BuildError {
    /// The wasm target is missing and rustup could not add it.
    MissingTarget,
    /// The module is not one the SDK built: the encoder's error chain.
    NotAPolicy(String),
}

impl fmt::Display for BuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BuildError::MissingTarget => write!(
                f,
                "the {TARGET} target is missing and `rustup target add {TARGET}` failed"
            ),
            BuildError::NotAPolicy(chain) => f.write_str(chain),
        }
    }
}

impl std::error::Error for BuildError {}

/// The target policies are built for: no WASI, nothing imported but what
/// the policy world declares.
pub const TARGET: &str = "wasm32-unknown-unknown";

/// Make sure the toolchain that builds in `dir` has [`TARGET`].
/// `rust-toolchain.toml` can list it, but rustup does not add a target to
/// an already-installed toolchain by itself, so add it here.
///
/// # Errors
/// The target is missing and `rustup target add` failed.
pub fn ensure_target(dir: &Path) -> Result<(), BuildError> {
    let installed = Command::new("rustup")
        .current_dir(dir)
        .args(["target", "list", "--installed"])
        .output()
        .map(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .any(|l| l.trim() == TARGET)
        });
    match installed {
        Ok(true) => Ok(()),
        Ok(false) => {
            let ok = Command::new("rustup")
                .current_dir(dir)
                .args(["target", "add", TARGET])
                .status()
                .map(|s| s.success());
            match ok {
                Ok(true) => Ok(()),
                _ => Err(BuildError::MissingTarget),
            }
        }
        // No rustup: assume the toolchain was installed with the target.
        Err(_) => Ok(()),
    }
}

/// Encode a core module built with the SDK (it carries its WIT world in a
/// custom section) as a component.
///
/// # Errors
/// The module is not one the SDK built, or does not match its world.
pub fn encode(module: &[u8]) -> Result<Vec<u8>, BuildError> {
    wit_component::ComponentEncoder::default()
        .validate(true)
        .module(module)
        .map_err(|e| BuildError::NotAPolicy(format!("{e:#}")))?
        .encode()
        .map_err(|e| BuildError::NotAPolicy(format!("{e:#}")))
}
