//! What can go wrong between Dragon and a registry, each naming the
//! reference (or file) and the cause.

use std::path::PathBuf;

/// A registry operation that failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("`{reference}` is not an OCI reference: {reason}")]
    Reference { reference: String, reason: String },
    #[error(
        "{reference}: the registry answered 401 Unauthorized (check the credentials for {registry})"
    )]
    Unauthorized { reference: String, registry: String },
    #[error("{reference}: not found in the registry (404)")]
    NotFound { reference: String },
    #[error(
        "{reference}: not a policy: its manifest's config is `{found}`, a policy's is `{expected}` (`dragon policy push` writes one)"
    )]
    MediaType {
        reference: String,
        found: String,
        expected: &'static str,
    },
    #[error(
        "{reference}: a policy artifact has exactly one `application/wasm` layer, this one has {found}"
    )]
    Layers { reference: String, found: String },
    #[error("{reference}: the policy is {size} bytes, more than the {max} a pull accepts")]
    TooLarge {
        reference: String,
        size: u64,
        max: u64,
    },
    #[error("{reference}: the blob's digest does not match: {detail}")]
    Digest { reference: String, detail: String },
    #[error("{reference}: {detail}")]
    Registry { reference: String, detail: String },
    #[error("cannot read registry credentials from {}: {reason}", path.display())]
    Credentials { path: PathBuf, reason: String },
    #[error("cannot read the CA certificate {}: {reason}", path.display())]
    CaFile { path: PathBuf, reason: String },
    #[error("cannot start the registry client: {0}")]
    Client(String),
}

impl Error {
    /// Sort a client error into the cases a user acts on differently.
    pub(crate) fn from_oci(
        reference: &str,
        registry: &str,
        source: oci_client::errors::OciDistributionError,
    ) -> Error {
        use oci_client::errors::{DigestError, OciDistributionError as E};
        let reference = reference.to_string();
        match source {
            E::UnauthorizedError { .. } | E::AuthenticationFailure(_) => Error::Unauthorized {
                reference,
                registry: registry.to_string(),
            },
            E::ImageManifestNotFoundError(_) => Error::NotFound { reference },
            E::ServerError { code: 404, .. } => Error::NotFound { reference },
            E::ServerError { code: 401, .. } => Error::Unauthorized {
                reference,
                registry: registry.to_string(),
            },
            E::RegistryError { ref envelope, .. }
                if envelope.errors.iter().any(|e| {
                    matches!(
                        e.code,
                        oci_client::errors::OciErrorCode::ManifestUnknown
                            | oci_client::errors::OciErrorCode::NameUnknown
                            | oci_client::errors::OciErrorCode::BlobUnknown
                            | oci_client::errors::OciErrorCode::NotFound
                    )
                }) =>
            {
                Error::NotFound { reference }
            }
            E::RegistryError { ref envelope, .. }
                if envelope.errors.iter().any(|e| {
                    matches!(
                        e.code,
                        oci_client::errors::OciErrorCode::Unauthorized
                            | oci_client::errors::OciErrorCode::Denied
                    )
                }) =>
            {
                Error::Unauthorized {
                    reference,
                    registry: registry.to_string(),
                }
            }
            E::DigestError(DigestError::VerificationError { expected, actual }) => Error::Digest {
                reference,
                detail: format!("expected {expected}, got {actual}"),
            },
            source => Error::Registry {
                reference,
                detail: chain(&source),
            },
        }
    }
}

/// An error and its causes on one line, each cause once: the HTTP client
/// nests "error sending request" around the refused connection that a user
/// needs to see.
fn chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut cause = error.source();
    while let Some(e) = cause {
        let more = e.to_string();
        if !text.contains(&more) {
            text = format!("{text}: {more}");
        }
        cause = e.source();
    }
    text
}
