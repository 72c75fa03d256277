//! Reading and validating a policy component before it is compiled.

use std::path::{Path, PathBuf};

use super::error::LoadError;
use sha2::{Digest, Sha256};

/// The newest interface version this host implements: what the SDK builds.
pub const INTERFACE_VERSION: &str = "0.4.0";

/// Every interface version this host serves, oldest first.
pub const INTERFACE_VERSIONS: &[&str] = &["0.1.0", "0.2.0", "0.3.0", "0.4.0"];

/// An interface version the host serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Interface {
    /// `dragon:scheduler@0.1.x`: node columns in every call.
    V0_1,
    /// `dragon:scheduler@0.2.x`: the policy keeps a view; calls carry changes.
    V0_2,
    /// `dragon:scheduler@0.3.x`: 0.2 with topology levels, queues and each
    /// job's queue in the view.
    V0_3,
    /// `dragon:scheduler@0.4.x`: 0.3 with each node's GPU type and each
    /// job's speed-up in the scale step.
    V0_4,
}

const POLICY_EXPORT: &str = "dragon:scheduler/policy";
const ALLOWED_IMPORTS: &[&str] = &["dragon:scheduler/host", "dragon:scheduler/types"];

/// Where a policy comes from.
#[derive(Debug, Clone)]
pub enum PolicySource {
    /// A `.wasm` file.
    File(PathBuf),
    /// In-memory bytes with a name for messages.
    Bytes { origin: String, bytes: Vec<u8> },
}

impl PolicySource {
    /// A bundled policy by name (`dragon_bundled::NAMES`), else a file path.
    pub fn named_or_file(spec: &str) -> PolicySource {
        match dragon_bundled::by_name(spec) {
            Some(bytes) if !Path::new(spec).exists() => PolicySource::Bytes {
                origin: format!("bundled policy `{spec}`"),
                bytes: bytes.to_vec(),
            },
            _ => PolicySource::File(PathBuf::from(spec)),
        }
    }

    /// How messages name this source.
    pub fn origin(&self) -> String {
        match self {
            PolicySource::File(p) => p.display().to_string(),
            PolicySource::Bytes { origin, .. } => origin.clone(),
        }
    }

    pub(crate) fn read(&self) -> Result<Vec<u8>, LoadError> {
        match self {
            PolicySource::File(p) => std::fs::read(p).map_err(|cause| LoadError::Read {
                origin: p.display().to_string(),
                cause,
            }),
            PolicySource::Bytes { bytes, .. } => Ok(bytes.clone()),
        }
    }
}

/// Hex SHA-256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// Distinguish "not wasm" and "core module" before wasmtime's own message,
/// which would not tell an operator what to do.
pub(crate) fn check_header(origin: &str, bytes: &[u8]) -> Result<(), LoadError> {
    if bytes.len() < 8 || &bytes[0..4] != b"\0asm" {
        return Err(LoadError::NotWasm {
            origin: origin.to_string(),
        });
    }
    // Bytes 6..8 are the layer: 0 for core modules, 1 for components.
    if bytes[6..8] == [0, 0] {
        return Err(LoadError::CoreModule {
            origin: origin.to_string(),
        });
    }
    Ok(())
}

/// Which served interface a policy built against version `found` speaks:
/// one with the same major and minor version (a 0.x minor is a breaking
/// change under semver).
pub fn interface(found: &str) -> Option<Interface> {
    let f = semver::Version::parse(found).ok()?;
    match (f.major, f.minor) {
        (0, 1) => Some(Interface::V0_1),
        (0, 2) => Some(Interface::V0_2),
        (0, 3) => Some(Interface::V0_3),
        (0, 4) => Some(Interface::V0_4),
        _ => None,
    }
}

/// What a component is, as far as linking goes.
pub(crate) struct World {
    /// The served interface it speaks.
    pub interface: Interface,
    /// The version it was built against, as found.
    pub version: String,
    /// It imports WASI 0.2 (Python and JavaScript runtimes do).
    pub wasi: bool,
}

/// Check the component's exports and imports against the policy world:
/// the interface it was built against, and whether it needs WASI. Read
/// from the bytes, before anything is compiled: a component refused here
/// costs no compile and leaves nothing in the cache.
pub(crate) fn check_world(origin: &str, bytes: &[u8]) -> Result<World, LoadError> {
    let (exports, imports) = declared(bytes).map_err(|e| LoadError::Invalid {
        origin: origin.to_string(),
        cause: e.to_string(),
    })?;
    let Some(found) = exports.iter().find_map(|name| {
        let (iface, version) = name.split_once('@').unwrap_or((name.as_str(), ""));
        (iface == POLICY_EXPORT).then(|| version.to_string())
    }) else {
        let listed = if exports.is_empty() {
            "nothing".to_string()
        } else {
            exports.join(", ")
        };
        return Err(LoadError::NotAPolicy {
            origin: origin.to_string(),
            exports: listed,
        });
    };
    let Some(served) = interface(&found) else {
        let found = if found.is_empty() {
            "(unversioned)".to_string()
        } else {
            found
        };
        return Err(LoadError::Version {
            origin: origin.to_string(),
            found,
            supported: INTERFACE_VERSIONS
                .iter()
                .map(|v| format!("dragon:scheduler@{v}"))
                .collect::<Vec<_>>()
                .join(", "),
        });
    };
    let mut wasi = false;
    for name in imports.iter().map(String::as_str) {
        if super::wasi::is_wasi(name) {
            wasi = true;
            continue;
        }
        let iface = name.split_once('@').map(|(i, _)| i).unwrap_or(name);
        // Imports come from the same version as the export.
        let version_ok = name
            .split_once('@')
            .is_some_and(|(_, v)| interface(v) == Some(served));
        if !ALLOWED_IMPORTS.contains(&iface) || !version_ok {
            return Err(LoadError::Import {
                origin: origin.to_string(),
                import: name.to_string(),
            });
        }
    }
    Ok(World {
        interface: served,
        version: found,
        wasi,
    })
}

/// The names a component exports and imports at its top level (those of
/// the components and modules nested in it are their own business).
fn declared(bytes: &[u8]) -> wasmparser::Result<(Vec<String>, Vec<String>)> {
    use wasmparser::Payload;
    let (mut exports, mut imports) = (Vec::new(), Vec::new());
    let mut depth = 0usize;
    for payload in wasmparser::Parser::new(0).parse_all(bytes) {
        match payload? {
            Payload::ModuleSection { .. } | Payload::ComponentSection { .. } => depth += 1,
            Payload::End(_) => depth = depth.saturating_sub(1),
            Payload::ComponentExportSection(section) if depth == 0 => {
                for export in section {
                    exports.push(export?.name.name.to_string());
                }
            }
            Payload::ComponentImportSection(section) if depth == 0 => {
                for import in section {
                    imports.push(import?.name.name.to_string());
                }
            }
            _ => {}
        }
    }
    Ok((exports, imports))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_interface_version_is_served_when_its_major_and_minor_match_one_served() {
        for v in INTERFACE_VERSIONS {
            assert!(interface(v).is_some(), "{v}");
        }
        assert_eq!(interface("0.1.99"), Some(Interface::V0_1));
        assert_eq!(interface("0.2.0-rc.1"), Some(Interface::V0_2));
        assert_eq!(interface("0.3.1"), Some(Interface::V0_3));
        assert_eq!(interface("0.4.2"), Some(Interface::V0_4));
        assert_eq!(interface("0.5.0"), None);
        assert_eq!(interface("1.2.0"), None);
        assert_eq!(interface("0.2"), None, "not semver");
        assert_eq!(interface(""), None);
        assert_eq!(interface(INTERFACE_VERSION), Some(Interface::V0_4));
    }
}
