//! The names the framework keys its cluster by: a pod's key, a job's name,
//! a node's name. Each is its own type, so a job's name cannot be passed
//! where a pod's key is meant; all three read as the text they hold, are
//! looked up in maps by `&str`, and serialize as plain strings (recordings
//! and case files are unchanged by them).

use std::borrow::Borrow;
use std::fmt;

use serde::{Deserialize, Serialize};

macro_rules! name {
    ($(#[$doc:meta])* $ty:ident) => {
        $(#[$doc])*
        #[derive(
            Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
        )]
        #[serde(transparent)]
        pub struct $ty(String);

        impl $ty {
            pub fn as_str(&self) -> &str {
                &self.0
            }

            pub fn into_string(self) -> String {
                self.0
            }
        }

        impl std::ops::Deref for $ty {
            type Target = str;
            fn deref(&self) -> &str {
                &self.0
            }
        }

        impl Borrow<str> for $ty {
            fn borrow(&self) -> &str {
                &self.0
            }
        }

        impl AsRef<str> for $ty {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Display for $ty {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl From<String> for $ty {
            fn from(s: String) -> $ty {
                $ty(s)
            }
        }

        impl From<&str> for $ty {
            fn from(s: &str) -> $ty {
                $ty(s.to_string())
            }
        }

        impl From<&$ty> for $ty {
            fn from(n: &$ty) -> $ty {
                n.clone()
            }
        }

        impl From<&String> for $ty {
            fn from(s: &String) -> $ty {
                $ty(s.clone())
            }
        }

        impl From<$ty> for String {
            fn from(n: $ty) -> String {
                n.0
            }
        }

        impl PartialEq<str> for $ty {
            fn eq(&self, o: &str) -> bool {
                self.0 == o
            }
        }

        impl PartialEq<&str> for $ty {
            fn eq(&self, o: &&str) -> bool {
                self.0 == *o
            }
        }

        impl PartialEq<String> for $ty {
            fn eq(&self, o: &String) -> bool {
                self.0 == *o
            }
        }

        impl PartialEq<$ty> for str {
            fn eq(&self, o: &$ty) -> bool {
                self == o.0
            }
        }

        impl PartialEq<$ty> for String {
            fn eq(&self, o: &$ty) -> bool {
                *self == o.0
            }
        }

        impl PartialEq<$ty> for &str {
            fn eq(&self, o: &$ty) -> bool {
                *self == o.0
            }
        }
    };
}

name!(
    /// A pod's key, unique in the cluster (`namespace/name` from
    /// Kubernetes, any text in a trace or a case file).
    PodKey
);
name!(
    /// A job's (pod group's) name, unique in the cluster.
    JobKey
);
name!(
    /// A node's name.
    NodeName
);
name!(
    /// A queue's (team's) name.
    QueueName
);

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn a_name_is_looked_up_by_its_text_and_serializes_as_a_plain_string() {
        let mut pods = HashMap::new();
        pods.insert(PodKey::from("ml/w-0"), 1);
        assert_eq!(pods.get("ml/w-0"), Some(&1));
        let node = NodeName::from("node-1");
        assert_eq!(serde_json::to_string(&node).unwrap(), r#""node-1""#);
        let back: NodeName = serde_json::from_str(r#""node-1""#).unwrap();
        assert_eq!(back, "node-1");
        assert_eq!(format!("{}", JobKey::from("train")), "train");
    }
}
