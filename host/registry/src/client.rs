//! Push, resolve and pull a policy artifact.

use std::path::Path;
use std::time::Duration;

use oci_client::client::{
    Certificate, CertificateEncoding, ClientConfig, ClientProtocol, Config, ImageLayer,
};
use oci_client::manifest::{OciImageManifest, OciManifest};
use oci_client::secrets::RegistryAuth;

use crate::layout::{self, ComponentWorld, WasmConfig};
use crate::{Credentials, Error, PolicyRef};

/// The largest policy a pull accepts unless told otherwise: a Python
/// policy with its interpreter is about 18 MiB.
pub const DEFAULT_MAX_BYTES: u64 = 64 << 20;

/// How Dragon speaks to registries.
#[derive(Debug, Clone)]
pub struct RegistryOptions {
    pub credentials: Credentials,
    /// Registry hosts (`host:port`) spoken to over plain HTTP, e.g. one on
    /// the local machine. Every other is HTTPS with its certificate
    /// verified against the system's roots.
    pub plain_http: Vec<String>,
    /// A CA certificate (PEM) trusted besides the system's roots, for a
    /// registry whose certificate a private CA signed.
    pub ca_pem: Option<Vec<u8>>,
    /// The largest policy a pull accepts, bytes.
    pub max_bytes: u64,
    /// Connect and read timeout of each request.
    pub timeout: Duration,
}

impl Default for RegistryOptions {
    fn default() -> Self {
        RegistryOptions {
            credentials: Credentials::anonymous(),
            plain_http: Vec::new(),
            ca_pem: None,
            max_bytes: DEFAULT_MAX_BYTES,
            timeout: Duration::from_secs(30),
        }
    }
}

impl RegistryOptions {
    /// The options a user gives as files: a docker config with the
    /// credentials (none: anonymous) and a CA certificate (PEM) to trust,
    /// and the hosts spoken to over plain HTTP.
    ///
    /// # Errors
    /// A file cannot be read, or the docker config is not one.
    pub fn from_files(
        config_file: Option<&Path>,
        ca_file: Option<&Path>,
        plain_http: Vec<String>,
    ) -> Result<RegistryOptions, Error> {
        let credentials = match config_file {
            Some(path) => Credentials::from_docker_config(path)?,
            None => Credentials::anonymous(),
        };
        let ca_pem = match ca_file {
            Some(path) => Some(std::fs::read(path).map_err(|e| Error::CaFile {
                path: path.to_path_buf(),
                reason: e.to_string(),
            })?),
            None => None,
        };
        Ok(RegistryOptions {
            credentials,
            plain_http,
            ca_pem,
            ..RegistryOptions::default()
        })
    }
}

/// A client for policy artifacts.
pub struct Registry {
    client: oci_client::Client,
    options: RegistryOptions,
}

/// What a push left in the registry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pushed {
    /// The manifest's digest: `reference@digest` is this push forever.
    pub digest: String,
    /// The component's digest (the layer's, and the file's `sha256:`).
    pub layer_digest: String,
}

/// A policy read from a registry, every digest checked.
#[derive(Debug, Clone)]
pub struct Pulled {
    pub digest: String,
    pub layer_digest: String,
    pub bytes: Vec<u8>,
    pub title: Option<String>,
}

impl Registry {
    /// # Errors
    /// The HTTP client cannot be built (no TLS provider).
    pub fn new(options: RegistryOptions) -> Result<Registry, Error> {
        // reqwest's rustls takes the process's provider: ring, as the
        // shim's kube client uses. Installing twice is harmless.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let config = ClientConfig {
            protocol: ClientProtocol::HttpsExcept(options.plain_http.clone()),
            connect_timeout: Some(options.timeout),
            read_timeout: Some(options.timeout),
            extra_root_certificates: options
                .ca_pem
                .iter()
                .map(|pem| Certificate {
                    encoding: CertificateEncoding::Pem,
                    data: pem.clone(),
                })
                .collect(),
            ..ClientConfig::default()
        };
        let client =
            oci_client::Client::try_from(config).map_err(|e| Error::Client(e.to_string()))?;
        Ok(Registry { client, options })
    }

    fn auth(&self, reference: &PolicyRef) -> RegistryAuth {
        self.options.credentials.for_registry(reference.registry())
    }

    fn fail(
        &self,
        reference: &PolicyRef,
    ) -> impl Fn(oci_client::errors::OciDistributionError) -> Error {
        let text = reference.to_string();
        let registry = reference.registry().to_string();
        move |e| Error::from_oci(&text, &registry, e)
    }

    /// Push `component` to `reference` as a policy artifact; `title` and
    /// `version` become the manifest's annotations.
    ///
    /// # Errors
    /// The registry refused the push; the error names the reference.
    pub async fn push(
        &self,
        reference: &PolicyRef,
        component: Vec<u8>,
        world: ComponentWorld,
        title: &str,
        version: &str,
    ) -> Result<Pushed, Error> {
        // The layer's title is the file name `oras pull` writes it to.
        let layer_title = [(
            layout::TITLE_ANNOTATION.to_string(),
            layout::LAYER_FILE_NAME.to_string(),
        )]
        .into_iter()
        .collect();
        let layer = ImageLayer::new(
            component,
            layout::LAYER_MEDIA_TYPE.into(),
            Some(layer_title),
        );
        let layer_digest = layer.sha256_digest();
        let config = WasmConfig::component(layer_digest.clone(), world);
        let config = Config::new(
            serde_json::to_vec(&config).map_err(|e| Error::Client(e.to_string()))?,
            layout::CONFIG_MEDIA_TYPE.into(),
            None,
        );
        let annotations = [
            (layout::TITLE_ANNOTATION.to_string(), title.to_string()),
            (layout::VERSION_ANNOTATION.to_string(), version.to_string()),
        ]
        .into_iter()
        .collect();
        let layers = [layer];
        let mut manifest = OciImageManifest::build(&layers, &config, Some(annotations));
        manifest.media_type = Some(layout::MANIFEST_MEDIA_TYPE.into());
        let auth = self.auth(reference);
        self.client
            .push(reference.oci(), &layers, config, &auth, Some(manifest))
            .await
            .map_err(self.fail(reference))?;
        let digest = self.resolve(reference).await?;
        Ok(Pushed {
            digest,
            layer_digest,
        })
    }

    /// The digest of the manifest `reference` names now (one HEAD request):
    /// a tag that moved resolves to a new digest.
    ///
    /// # Errors
    /// The registry cannot be reached or does not know the reference.
    pub async fn resolve(&self, reference: &PolicyRef) -> Result<String, Error> {
        self.client
            .fetch_manifest_digest(reference.oci(), &self.auth(reference))
            .await
            .map_err(self.fail(reference))
    }

    /// Pull the policy `reference` names, checking the manifest's media
    /// types, its size against the bound, and every digest.
    ///
    /// # Errors
    /// Any of those checks fails, or the registry does.
    pub async fn pull(&self, reference: &PolicyRef) -> Result<Pulled, Error> {
        let auth = self.auth(reference);
        let fail = self.fail(reference);
        let (manifest, digest) = self
            .client
            .pull_manifest(reference.oci(), &auth)
            .await
            .map_err(&fail)?;
        let text = reference.to_string();
        let manifest = match manifest {
            OciManifest::Image(m) => m,
            OciManifest::ImageIndex(i) => {
                return Err(Error::MediaType {
                    reference: text,
                    found: i.media_type.unwrap_or_else(|| "an image index".into()),
                    expected: layout::CONFIG_MEDIA_TYPE,
                });
            }
        };
        if manifest.config.media_type != layout::CONFIG_MEDIA_TYPE {
            return Err(Error::MediaType {
                reference: text,
                found: manifest.config.media_type,
                expected: layout::CONFIG_MEDIA_TYPE,
            });
        }
        let layer = match manifest.layers.as_slice() {
            [one] if one.media_type == layout::LAYER_MEDIA_TYPE => one.clone(),
            layers => {
                let found = layers
                    .iter()
                    .map(|l| format!("`{}`", l.media_type))
                    .collect::<Vec<_>>();
                return Err(Error::Layers {
                    reference: text,
                    found: if found.is_empty() {
                        "none".into()
                    } else {
                        found.join(", ")
                    },
                });
            }
        };
        let max = self.options.max_bytes;
        let size = u64::try_from(layer.size).unwrap_or(u64::MAX);
        if size > max {
            return Err(Error::TooLarge {
                reference: text,
                size,
                max,
            });
        }
        let mut sink = Bounded::new(max);
        self.client
            .pull_blob(reference.oci(), &layer, &mut sink)
            .await
            .map_err(|e| match sink.overflowed {
                true => Error::TooLarge {
                    reference: text.clone(),
                    size: sink.seen,
                    max,
                },
                false => fail(e),
            })?;
        Ok(Pulled {
            digest,
            layer_digest: layer.digest,
            bytes: sink.bytes,
            title: manifest
                .annotations
                .as_ref()
                .and_then(|a| a.get(layout::TITLE_ANNOTATION).cloned()),
        })
    }
}

/// A buffer that refuses to grow past its bound, so a registry that lies
/// about a blob's size cannot fill memory.
struct Bounded {
    bytes: Vec<u8>,
    max: u64,
    seen: u64,
    overflowed: bool,
}

impl Bounded {
    fn new(max: u64) -> Self {
        Bounded {
            bytes: Vec::new(),
            max,
            seen: 0,
            overflowed: false,
        }
    }
}

impl tokio::io::AsyncWrite for Bounded {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        self.seen += buf.len() as u64;
        if self.seen > self.max {
            self.overflowed = true;
            return std::task::Poll::Ready(Err(std::io::Error::other("the blob is too large")));
        }
        self.bytes.extend_from_slice(buf);
        std::task::Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn poll_shutdown(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }
}
