//! A policy in an OCI registry (`policy: oci://registry/repository:tag`).
//!
//! At start-up it is pulled, every digest checked; when the registry cannot
//! be reached, the copy last pulled for the same reference serves (kept on
//! disk beside the compiled-policy cache). Then a tag is resolved again
//! every `registry.pollSeconds`: a new digest is pulled and goes through
//! the same load, `policySha256` check, gate and swap as a new file, so a
//! push is a hot reload. A registry that is down, a pull that fails or a
//! candidate the gate refuses leaves the serving policy scheduling. A
//! reference pinned by digest never moves and is not polled.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use dragon_registry::{PolicyRef, Pulled, Registry, RegistryOptions};
use dragon_runtime::{PolicySource, write_atomically};
use serde::{Deserialize, Serialize};

use crate::config::RegistryConfig;
use crate::reload::Reloader;

/// A policy reference and the client that reads it.
pub struct OciPolicy {
    reference: PolicyRef,
    registry: Registry,
    store: Option<Store>,
    poll: Duration,
}

/// What the serving policy was pulled as.
pub struct Serving {
    pub source: PolicySource,
    pub digest: String,
}

impl OciPolicy {
    /// # Errors
    /// The reference or the registry settings are invalid.
    pub fn new(spec: &str, config: &RegistryConfig, cache_root: Option<PathBuf>) -> Result<Self> {
        let reference = PolicyRef::parse(spec)?;
        let options = RegistryOptions::from_files(
            config.config_file.as_deref(),
            config.ca_file.as_deref(),
            config.plain_http.clone(),
        )?;
        let registry = Registry::new(RegistryOptions {
            max_bytes: config.max_bytes,
            ..options
        })?;
        Ok(OciPolicy {
            reference,
            registry,
            store: cache_root.map(|root| Store {
                dir: root.join("oci"),
            }),
            poll: Duration::from_secs(config.poll_seconds),
        })
    }

    fn source(&self, pulled: Pulled) -> Serving {
        Serving {
            source: PolicySource::Bytes {
                origin: format!("{} ({})", self.reference, pulled.digest),
                bytes: pulled.bytes,
            },
            digest: pulled.digest,
        }
    }

    /// The policy as the registry serves it now, or else as last pulled.
    ///
    /// # Errors
    /// The registry fails and nothing was pulled for this reference before.
    pub async fn first(&self) -> Result<Serving> {
        match self.registry.pull(&self.reference).await {
            Ok(pulled) => {
                self.remember(&pulled);
                tracing::info!(reference = %self.reference, digest = %pulled.digest, "policy pulled");
                Ok(self.source(pulled))
            }
            Err(e) => {
                let Some(pulled) = self.store.as_ref().and_then(|s| s.recall(&self.reference))
                else {
                    return Err(e).context("no copy of it was pulled before");
                };
                tracing::warn!(
                    reference = %self.reference,
                    digest = %pulled.digest,
                    "the registry failed ({e}); the copy pulled before serves until it answers"
                );
                Ok(self.source(pulled))
            }
        }
    }

    fn remember(&self, pulled: &Pulled) {
        if let Some(store) = &self.store
            && let Err(e) = store.remember(&self.reference, pulled)
        {
            tracing::warn!(dir = %store.dir.display(), "cannot keep a copy of the pulled policy: {e}");
        }
    }

    /// Resolve the tag every poll interval and reload on a new digest,
    /// until the process ends.
    pub fn spawn(self, serving: String, reloader: Arc<Reloader>) {
        if self.reference.digest().is_some() {
            tracing::info!(reference = %self.reference, "pinned by digest: not polled");
            return;
        }
        tokio::spawn(async move {
            let mut current = serving;
            let mut ticks = tokio::time::interval(self.poll);
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            ticks.tick().await; // the first tick is now; the policy was just pulled
            loop {
                ticks.tick().await;
                if let Some(next) = self.poll_once(&current, &reloader).await {
                    current = next;
                }
            }
        });
    }

    /// One poll: the digest now tried, if the tag moved and it was pulled.
    async fn poll_once(&self, current: &str, reloader: &Arc<Reloader>) -> Option<String> {
        let digest = match self.registry.resolve(&self.reference).await {
            Ok(d) if d == current => return None,
            Ok(d) => d,
            Err(e) => {
                tracing::warn!(
                    "cannot resolve the policy's tag, the serving policy keeps scheduling: {e}"
                );
                return None;
            }
        };
        let pulled = match self.registry.pull(&self.reference.at_digest(&digest)).await {
            Ok(p) => p,
            Err(e) => {
                reloader.failed();
                tracing::error!(
                    "the policy's tag moved but the pull failed, the serving policy keeps scheduling: {e}"
                );
                return None;
            }
        };
        tracing::info!(reference = %self.reference, %digest, "the policy's tag moved");
        let Serving { source, digest } = self.source(pulled.clone());
        let reloader = reloader.clone();
        let outcome =
            tokio::task::spawn_blocking(move || reloader.reload(Some(source), None)).await;
        if matches!(outcome, Ok(crate::metrics::Reload::Success)) {
            self.remember(&pulled);
        }
        // A digest the gate refused is not tried again until the tag moves.
        Some(digest)
    }
}

/// Pulled components by digest, and the digest each reference last had.
struct Store {
    dir: PathBuf,
}

#[derive(Serialize, Deserialize)]
struct Remembered {
    reference: String,
    digest: String,
    layer_digest: String,
}

impl Store {
    fn ref_file(&self, reference: &PolicyRef) -> PathBuf {
        let key = dragon_runtime::sha256_hex(reference.to_string().as_bytes());
        self.dir.join("refs").join(format!("{key}.json"))
    }

    fn blob_file(&self, layer_digest: &str) -> PathBuf {
        self.dir
            .join("blobs")
            .join(format!("{}.wasm", layer_digest.replace(':', "-")))
    }

    fn remember(&self, reference: &PolicyRef, pulled: &Pulled) -> std::io::Result<()> {
        let blob = self.blob_file(&pulled.layer_digest);
        write_atomically(&blob, &pulled.bytes)?;
        let entry = Remembered {
            reference: reference.to_string(),
            digest: pulled.digest.clone(),
            layer_digest: pulled.layer_digest.clone(),
        };
        write_atomically(&self.ref_file(reference), &serde_json::to_vec(&entry)?)
    }

    /// The copy last pulled for `reference`, if it is whole.
    fn recall(&self, reference: &PolicyRef) -> Option<Pulled> {
        let entry: Remembered =
            serde_json::from_slice(&std::fs::read(self.ref_file(reference)).ok()?).ok()?;
        let bytes = std::fs::read(self.blob_file(&entry.layer_digest)).ok()?;
        let whole = entry.layer_digest == format!("sha256:{}", dragon_runtime::sha256_hex(&bytes));
        whole.then_some(Pulled {
            digest: entry.digest,
            layer_digest: entry.layer_digest,
            bytes,
            title: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unreachable_policy(cache: &std::path::Path) -> OciPolicy {
        // Port 1 on the loopback: nothing listens, the connection is refused.
        let config = RegistryConfig {
            plain_http: vec!["127.0.0.1:1".into()],
            ..RegistryConfig::default()
        };
        OciPolicy::new(
            "oci://127.0.0.1:1/team/policy:v1",
            &config,
            Some(cache.to_path_buf()),
        )
        .unwrap()
    }

    #[tokio::test]
    async fn a_registry_that_is_down_serves_the_copy_pulled_before_or_names_why() {
        let dir = std::env::temp_dir().join(format!("dragon-oci-store-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let oci = unreachable_policy(&dir);
        let e = format!("{:#}", oci.first().await.err().unwrap());
        assert!(
            e.contains("oci://127.0.0.1:1/team/policy:v1")
                && e.contains("Connection refused")
                && e.contains("no copy of it was pulled before"),
            "{e}"
        );

        let bytes = b"\0asm a component".to_vec();
        let pulled = Pulled {
            digest: "sha256:abc".into(),
            layer_digest: format!("sha256:{}", dragon_runtime::sha256_hex(&bytes)),
            bytes: bytes.clone(),
            title: None,
        };
        oci.remember(&pulled);
        let serving = oci.first().await.unwrap();
        assert_eq!(serving.digest, "sha256:abc");
        let PolicySource::Bytes { origin, bytes: got } = serving.source else {
            panic!("a pulled policy is bytes");
        };
        assert_eq!(got, bytes);
        assert!(origin.contains("sha256:abc"), "{origin}");

        // A copy that is not whole is not served.
        let blob = oci.store.as_ref().unwrap().blob_file(&pulled.layer_digest);
        std::fs::write(&blob, b"\0asm cut").unwrap();
        assert!(oci.first().await.is_err());
    }
}
