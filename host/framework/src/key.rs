//! A namespaced name, `namespace/name`: how drivers key pods, jobs and
//! the objects around them. Built and read here only, so a key that is not
//! one is an error naming it, never a silent default.

use std::fmt;

/// Text that is not a `namespace/name` key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not a namespace/name key")]
pub struct NotNamespaced(pub String);

/// A namespaced object's key, written `namespace/name`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ObjectKey {
    namespace: String,
    name: String,
}

impl ObjectKey {
    /// The key of `name` in `namespace` (`default` when the object has
    /// none, as the Kubernetes API server defaults it).
    pub fn new(namespace: Option<&str>, name: &str) -> ObjectKey {
        ObjectKey {
            namespace: namespace.unwrap_or("default").to_string(),
            name: name.to_string(),
        }
    }

    /// Read a key written `namespace/name`.
    ///
    /// # Errors
    /// Either part is missing or empty.
    pub fn parse(key: &str) -> Result<ObjectKey, NotNamespaced> {
        match key.split_once('/') {
            Some((namespace, name)) if !namespace.is_empty() && !name.is_empty() => {
                Ok(ObjectKey::new(Some(namespace), name))
            }
            _ => Err(NotNamespaced(key.to_string())),
        }
    }

    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    pub fn name(&self) -> &str {
        &self.name
    }
}

impl fmt::Display for ObjectKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_reads_back_as_written_and_a_key_without_a_namespace_is_refused() {
        let key = ObjectKey::parse("ml/job-worker-0").unwrap();
        assert_eq!((key.namespace(), key.name()), ("ml", "job-worker-0"));
        assert_eq!(key.to_string(), "ml/job-worker-0");
        assert_eq!(ObjectKey::new(None, "x").to_string(), "default/x");
        for bad in ["job-worker-0", "/x", "ml/", ""] {
            assert_eq!(ObjectKey::parse(bad), Err(NotNamespaced(bad.to_string())));
        }
    }
}
