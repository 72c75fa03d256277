//! `oci://registry/repository:tag` and `oci://registry/repository@sha256:…`.

use std::fmt;

use crate::Error;

/// The scheme that marks a policy as living in a registry.
pub const SCHEME: &str = "oci://";

/// A policy's place in a registry. The registry host is always written out
/// (no implicit Docker Hub): a policy reference names where it comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyRef {
    inner: oci_client::Reference,
}

impl PolicyRef {
    /// Whether `spec` names a policy in a registry rather than a file or a
    /// bundled policy.
    pub fn is_oci(spec: &str) -> bool {
        spec.starts_with(SCHEME)
    }

    /// Parse `oci://host[:port]/repository[:tag][@sha256:…]` (the scheme is
    /// optional here; a tag defaults to `latest` when no digest is given).
    ///
    /// # Errors
    /// The text is not such a reference, or names no registry host.
    pub fn parse(text: &str) -> Result<PolicyRef, Error> {
        let bare = text.strip_prefix(SCHEME).unwrap_or(text);
        let invalid = |reason: String| Error::Reference {
            reference: text.to_string(),
            reason,
        };
        let first = bare.split('/').next().unwrap_or_default();
        let has_host = bare.contains('/')
            && (first.contains('.') || first.contains(':') || first == "localhost");
        if !has_host {
            return Err(invalid(
                "write the registry host first, as in oci://registry.example.com/team/policy:v1"
                    .into(),
            ));
        }
        let inner: oci_client::Reference = bare
            .parse()
            .map_err(|e: oci_client::ParseError| invalid(e.to_string()))?;
        Ok(PolicyRef { inner })
    }

    /// `host[:port]`.
    pub fn registry(&self) -> &str {
        self.inner.resolve_registry()
    }

    /// The digest the reference pins, if any: such a reference never moves.
    pub fn digest(&self) -> Option<&str> {
        self.inner.digest()
    }

    /// The same repository, pinned to `digest`.
    pub fn at_digest(&self, digest: &str) -> PolicyRef {
        PolicyRef {
            inner: self.inner.clone_with_digest(digest.to_string()),
        }
    }

    pub(crate) fn oci(&self) -> &oci_client::Reference {
        &self.inner
    }
}

impl fmt::Display for PolicyRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{SCHEME}{}", self.inner.whole())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tag_a_digest_and_a_port_are_read() {
        let r = PolicyRef::parse("oci://127.0.0.1:5000/team/dragon:v2").unwrap();
        assert_eq!(r.registry(), "127.0.0.1:5000");
        assert_eq!(r.digest(), None);
        assert_eq!(r.to_string(), "oci://127.0.0.1:5000/team/dragon:v2");
        let d = format!("sha256:{}", "a".repeat(64));
        let pinned = PolicyRef::parse(&format!("oci://registry.example.com/dragon@{d}")).unwrap();
        assert_eq!(pinned.digest(), Some(d.as_str()));
    }

    #[test]
    fn a_reference_without_a_registry_host_is_refused_by_name() {
        let e = PolicyRef::parse("oci://dragon:v1").unwrap_err().to_string();
        assert!(
            e.contains("oci://dragon:v1") && e.contains("registry host"),
            "{e}"
        );
        let e = PolicyRef::parse("oci://r.example.com/Bad Name")
            .unwrap_err()
            .to_string();
        assert!(e.contains("not an OCI reference"), "{e}");
    }
}
