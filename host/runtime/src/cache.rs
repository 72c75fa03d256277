//! A directory of precompiled components, keyed by the component's SHA-256
//! and the engine's compatibility hash, so a restart does not recompile.

use std::path::{Path, PathBuf};

use wasmtime::component::Component;

use super::engine::PolicyEngine;

/// Where compiled policies are kept. `None` disables caching.
#[derive(Debug, Clone, Default)]
pub struct ComponentCache {
    dir: Option<PathBuf>,
}

impl ComponentCache {
    /// A cache in `dir` (created on first write).
    pub fn at(dir: impl Into<PathBuf>) -> ComponentCache {
        ComponentCache {
            dir: Some(dir.into()),
        }
    }

    /// No caching: every load compiles.
    pub fn disabled() -> ComponentCache {
        ComponentCache { dir: None }
    }

    /// The cache in [`ComponentCache::default_dir`]; disabled when none
    /// is known.
    pub fn from_env() -> ComponentCache {
        ComponentCache {
            dir: ComponentCache::default_dir(),
        }
    }

    /// Dragon's cache directory: `$DRAGON_CACHE_DIR`, else
    /// `$XDG_CACHE_HOME/dragon`, else `~/.cache/dragon`.
    pub fn default_dir() -> Option<PathBuf> {
        if let Some(d) = std::env::var_os("DRAGON_CACHE_DIR") {
            return Some(d.into());
        }
        if let Some(d) = std::env::var_os("XDG_CACHE_HOME") {
            return Some(Path::new(&d).join("dragon"));
        }
        std::env::var_os("HOME").map(|h| Path::new(&h).join(".cache/dragon"))
    }

    fn path_for(&self, engine: &PolicyEngine, sha256: &str) -> Option<PathBuf> {
        let key = format!("{sha256}-{:016x}.cwasm", engine.compatibility_key());
        self.dir.as_ref().map(|d| d.join(key))
    }

    /// A compiled component from the cache, or compile `bytes` and store it.
    /// Returns whether the cache served it. Cache trouble (unwritable
    /// directory, a stale or corrupt file) never fails a load: it compiles.
    pub(crate) fn get_or_compile(
        &self,
        engine: &PolicyEngine,
        sha256: &str,
        bytes: &[u8],
    ) -> wasmtime::Result<(Component, bool)> {
        let path = self.path_for(engine, sha256);
        if let Some(path) = &path
            && path.exists()
        {
            // Read into memory rather than `deserialize_file`: a mapped file
            // truncated by someone else would crash the process (SIGBUS).
            let loaded = std::fs::read(path)
                .map_err(|e| e.to_string())
                .and_then(|compiled| {
                    // SAFETY: the bytes are a file this cache wrote with
                    // `precompile_component` for an engine with the same
                    // compatibility hash (it is in the file name); wasmtime checks
                    // the header and refuses anything else.
                    unsafe { Component::deserialize(engine.engine(), &compiled) }
                        .map_err(|e| e.to_string())
                });
            match loaded {
                Ok(c) => return Ok((c, true)),
                Err(e) => {
                    tracing::warn!(path = %path.display(), "ignoring unusable cached policy: {e}")
                }
            }
        }
        let Some(path) = path else {
            return Ok((Component::new(engine.engine(), bytes)?, false));
        };
        let compiled = engine.engine().precompile_component(bytes)?;
        if let Err(e) = write_atomically(&path, &compiled) {
            tracing::debug!(path = %path.display(), "cannot cache compiled policy: {e}");
        }
        // SAFETY: `compiled` was produced just now by this engine.
        let component = unsafe { Component::deserialize(engine.engine(), &compiled)? };
        Ok((component, false))
    }
}

/// Write `bytes` to `path` through a file beside it and a rename, creating
/// the directory if needed: a reader sees the old content or the new, never
/// half of it (compiled policies, pulled policies, built policies).
///
/// # Errors
/// The directory cannot be created or the file written or renamed.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(&tmp, path)
}
