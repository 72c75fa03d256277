//! Names of API objects as typed values: an object's `namespace/name` key
//! (the framework's [`ObjectKey`]) and a job's `/scale` target. They are
//! built and read here only, so a key that is not one is an error naming
//! it, never a silent default.

use std::fmt;

pub use dragon_framework::ObjectKey;

/// A scale target that is not `GROUP/VERSION/PLURAL/NAME`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    #[error("{annotation} must be GROUP/VERSION/PLURAL/NAME, got {target:?}")]
    ScaleTarget {
        annotation: &'static str,
        target: String,
    },
}

/// An API object's `namespace/name`.
pub fn key_of<K: kube::Resource>(obj: &K) -> String {
    object_key(obj).to_string()
}

/// The key of an API object.
pub fn object_key<K: kube::Resource>(obj: &K) -> ObjectKey {
    let meta = obj.meta();
    ObjectKey::new(
        meta.namespace.as_deref(),
        meta.name.as_deref().unwrap_or(""),
    )
}

/// The workload whose `/scale` sets a job's worker count, from its
/// PodGroup's annotation: `GROUP/VERSION/PLURAL/NAME`, or
/// `VERSION/PLURAL/NAME` in the core group. It lives in the job's
/// namespace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScaleTarget {
    pub group: String,
    pub version: String,
    pub plural: String,
    pub name: String,
}

impl ScaleTarget {
    /// Read the value of `annotation`.
    ///
    /// # Errors
    /// It has neither three nor four non-empty parts.
    pub fn parse(annotation: &'static str, target: &str) -> Result<ScaleTarget, KeyError> {
        let parts: Vec<&str> = target.split('/').collect();
        let (group, version, plural, name) = match parts.as_slice() {
            [g, v, p, n] if !g.is_empty() => (*g, *v, *p, *n),
            [v, p, n] => ("", *v, *p, *n),
            _ => ("", "", "", ""),
        };
        if [version, plural, name].iter().any(|s| s.is_empty()) {
            return Err(KeyError::ScaleTarget {
                annotation,
                target: target.to_string(),
            });
        }
        Ok(ScaleTarget {
            group: group.to_string(),
            version: version.to_string(),
            plural: plural.to_string(),
            name: name.to_string(),
        })
    }

    /// `group/version`, or `version` in the core group.
    pub fn api_version(&self) -> String {
        match self.group.is_empty() {
            true => self.version.clone(),
            false => format!("{}/{}", self.group, self.version),
        }
    }
}

impl fmt::Display for ScaleTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}/{}", self.api_version(), self.plural, self.name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scale_target_names_group_version_plural_and_name_or_refuses() {
        let t = ScaleTarget::parse("a", "apps/v1/statefulsets/resnet50-worker").unwrap();
        assert_eq!(t.api_version(), "apps/v1");
        assert_eq!(
            (t.plural.as_str(), t.name.as_str()),
            ("statefulsets", "resnet50-worker")
        );
        assert_eq!(t.to_string(), "apps/v1/statefulsets/resnet50-worker");
        let core = ScaleTarget::parse("a", "v1/replicationcontrollers/rc").unwrap();
        assert_eq!(
            (core.group.as_str(), core.api_version()),
            ("", "v1".to_string())
        );
        for bad in ["statefulsets/x", "a/b/c/d/e", "apps/v1//x", ""] {
            let e = ScaleTarget::parse("dragon.dev/scale-target", bad).unwrap_err();
            assert_eq!(
                e.to_string(),
                format!("dragon.dev/scale-target must be GROUP/VERSION/PLURAL/NAME, got {bad:?}")
            );
        }
    }
}
