//! A directory of precompiled components, keyed by the component's SHA-256
//! and the engine's compatibility hash, so a restart does not recompile.
//! Its size is bounded: past [`ComponentCache::max_bytes`], the compiled
//! components used least recently are removed.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use wasmtime::component::Component;

use super::engine::PolicyEngine;

/// How many bytes of compiled components a cache keeps by default (a
/// bundled policy compiles to a few MiB, a Python or JavaScript one to
/// tens).
pub const DEFAULT_MAX_BYTES: u64 = 1 << 30;

/// The extension of a compiled component in the cache; nothing else in its
/// directory is counted or removed.
const COMPILED: &str = "cwasm";

/// Where compiled policies are kept. `None` disables caching.
#[derive(Debug, Clone)]
pub struct ComponentCache {
    dir: Option<PathBuf>,
    max_bytes: u64,
}

impl Default for ComponentCache {
    fn default() -> ComponentCache {
        ComponentCache::disabled()
    }
}

impl ComponentCache {
    /// A cache in `dir` (created on first write) of at most
    /// [`DEFAULT_MAX_BYTES`].
    pub fn at(dir: impl Into<PathBuf>) -> ComponentCache {
        ComponentCache {
            dir: Some(dir.into()),
            max_bytes: DEFAULT_MAX_BYTES,
        }
    }

    /// No caching: every load compiles.
    pub fn disabled() -> ComponentCache {
        ComponentCache {
            dir: None,
            max_bytes: DEFAULT_MAX_BYTES,
        }
    }

    /// The cache in [`ComponentCache::default_dir`]; disabled when none
    /// is known. `$DRAGON_CACHE_MAX_MIB` bounds its size.
    pub fn from_env() -> ComponentCache {
        let cache = ComponentCache {
            dir: ComponentCache::default_dir(),
            max_bytes: DEFAULT_MAX_BYTES,
        };
        match std::env::var("DRAGON_CACHE_MAX_MIB") {
            Ok(mib) => match mib.trim().parse::<u64>() {
                Ok(mib) => cache.with_max_bytes(mib.saturating_mul(1 << 20)),
                Err(_) => {
                    tracing::warn!(
                        "DRAGON_CACHE_MAX_MIB={mib:?} is not a whole number of MiB; keeping {} MiB",
                        DEFAULT_MAX_BYTES >> 20
                    );
                    cache
                }
            },
            Err(_) => cache,
        }
    }

    /// The same cache, keeping at most `max_bytes` of compiled components.
    pub fn with_max_bytes(self, max_bytes: u64) -> ComponentCache {
        ComponentCache { max_bytes, ..self }
    }

    /// How many bytes of compiled components it keeps at most.
    pub fn max_bytes(&self) -> u64 {
        self.max_bytes
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
        let key = format!("{sha256}-{:016x}.{COMPILED}", engine.compatibility_key());
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
                Ok(c) => {
                    // Used now: the last to be evicted.
                    let _ = std::fs::File::options()
                        .write(true)
                        .open(path)
                        .and_then(|f| f.set_modified(SystemTime::now()));
                    return Ok((c, true));
                }
                Err(e) => {
                    tracing::warn!(path = %path.display(), "ignoring unusable cached policy: {e}")
                }
            }
        }
        let Some(path) = path else {
            return Ok((Component::new(engine.engine(), bytes)?, false));
        };
        let compiled = engine.engine().precompile_component(bytes)?;
        if compiled.len() as u64 > self.max_bytes {
            tracing::debug!(
                bytes = compiled.len(),
                max = self.max_bytes,
                "compiled policy larger than the whole cache: not cached"
            );
        } else if let Err(e) = write_atomically(&path, &compiled) {
            tracing::debug!(path = %path.display(), "cannot cache compiled policy: {e}");
        } else {
            self.evict(&path);
        }
        // SAFETY: `compiled` was produced just now by this engine.
        let component = unsafe { Component::deserialize(engine.engine(), &compiled)? };
        Ok((component, false))
    }
}

impl ComponentCache {
    /// Remove what was compiled for `sha256`: a component refused at load.
    pub(crate) fn forget(&self, engine: &PolicyEngine, sha256: &str) {
        if let Some(path) = self.path_for(engine, sha256)
            && let Err(e) = std::fs::remove_file(&path)
            && e.kind() != std::io::ErrorKind::NotFound
        {
            tracing::debug!(path = %path.display(), "cannot remove a refused policy from the cache: {e}");
        }
    }

    /// Remove the compiled components used least recently until the cache
    /// holds at most [`Self::max_bytes`], never `keep` (the one just
    /// written). Trouble reading the directory leaves it as it is.
    fn evict(&self, keep: &Path) {
        let Some(dir) = &self.dir else {
            return;
        };
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        let mut files: Vec<(SystemTime, u64, PathBuf)> = entries
            .filter_map(Result::ok)
            .filter(|e| e.path().extension().is_some_and(|x| x == COMPILED))
            .filter_map(|e| {
                let meta = e.metadata().ok()?;
                let used = meta.modified().unwrap_or(SystemTime::UNIX_EPOCH);
                Some((used, meta.len(), e.path()))
            })
            .collect();
        let mut total: u64 = files.iter().map(|(_, len, _)| len).sum();
        files.sort();
        for (_, len, path) in files {
            if total <= self.max_bytes {
                break;
            }
            if path == keep {
                continue;
            }
            match std::fs::remove_file(&path) {
                Ok(()) => {
                    total -= len;
                    tracing::debug!(path = %path.display(), "evicted from the policy cache");
                }
                Err(e) => tracing::debug!(path = %path.display(), "cannot evict: {e}"),
            }
        }
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
