//! Who Dragon is to a registry: anonymous, or the entry for its host in a
//! docker config file (`~/.docker/config.json`, or the `.dockerconfigjson`
//! key of a `kubernetes.io/dockerconfigjson` Secret mounted as a file).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use base64::Engine as _;
use oci_client::secrets::RegistryAuth;
use serde::Deserialize;

use crate::Error;

/// The credentials of each registry host a config file names.
#[derive(Debug, Clone, Default)]
pub struct Credentials {
    by_host: BTreeMap<String, RegistryAuth>,
}

#[derive(Deserialize)]
struct DockerConfig {
    #[serde(default)]
    auths: BTreeMap<String, Entry>,
}

#[derive(Deserialize)]
struct Entry {
    #[serde(default)]
    auth: Option<String>,
    #[serde(default)]
    username: Option<String>,
    #[serde(default)]
    password: Option<String>,
    #[serde(default, rename = "identitytoken")]
    identity_token: Option<String>,
}

impl Credentials {
    /// No credentials: every registry is asked anonymously.
    pub fn anonymous() -> Credentials {
        Credentials::default()
    }

    /// Read a docker config file.
    ///
    /// # Errors
    /// The file cannot be read, is not a docker config, or an entry's
    /// `auth` is not base64 of `user:password`; the message names the file
    /// and the host, never a secret.
    pub fn from_docker_config(path: &Path) -> Result<Credentials, Error> {
        let bad = |reason: String| Error::Credentials {
            path: path.to_path_buf(),
            reason,
        };
        let text = std::fs::read(path).map_err(|e| bad(e.to_string()))?;
        let config: DockerConfig = serde_json::from_slice(&text)
            .map_err(|e| bad(format!("not a docker config file: {e}")))?;
        let mut by_host = BTreeMap::new();
        for (key, entry) in config.auths {
            let auth = entry.auth(&key).map_err(|e| bad(e.to_string()))?;
            by_host.insert(host_of(&key), auth);
        }
        Ok(Credentials { by_host })
    }

    /// The file `DOCKER_CONFIG` points at, else `~/.docker/config.json`,
    /// when it exists.
    pub fn default_file() -> Option<PathBuf> {
        let dir = std::env::var_os("DOCKER_CONFIG")
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".docker")))?;
        let file = dir.join("config.json");
        file.is_file().then_some(file)
    }

    /// What to present to `registry` (`host[:port]`).
    pub fn for_registry(&self, registry: &str) -> RegistryAuth {
        self.by_host
            .get(registry)
            .cloned()
            .unwrap_or(RegistryAuth::Anonymous)
    }
}

/// An entry's `auth` that cannot be read, naming the host (never the
/// secret).
#[derive(Debug, thiserror::Error)]
enum BadAuth {
    #[error("the `auth` of {0} is not base64 text")]
    NotBase64(String),
    #[error("the `auth` of {0} is not `user:password`")]
    NotUserPassword(String),
}

impl Entry {
    fn auth(self, host: &str) -> Result<RegistryAuth, BadAuth> {
        if let Some(token) = self.identity_token.filter(|t| !t.is_empty()) {
            // An identity token is exchanged for a bearer token by the
            // registry's token service, as docker does, with this user name.
            return Ok(RegistryAuth::Basic("<token>".into(), token));
        }
        if let (Some(user), Some(password)) = (self.username, self.password) {
            return Ok(RegistryAuth::Basic(user, password));
        }
        let Some(encoded) = self.auth.filter(|a| !a.is_empty()) else {
            return Ok(RegistryAuth::Anonymous);
        };
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(encoded.trim())
            .ok()
            .and_then(|b| String::from_utf8(b).ok())
            .ok_or_else(|| BadAuth::NotBase64(host.to_string()))?;
        let (user, password) = decoded
            .split_once(':')
            .ok_or_else(|| BadAuth::NotUserPassword(host.to_string()))?;
        Ok(RegistryAuth::Basic(user.to_string(), password.to_string()))
    }
}

/// `https://host:port/v1/` and `host:port` name the same registry.
fn host_of(key: &str) -> String {
    let bare = key
        .strip_prefix("https://")
        .or_else(|| key.strip_prefix("http://"))
        .unwrap_or(key);
    bare.split('/').next().unwrap_or(bare).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(text: &str) -> PathBuf {
        use std::sync::atomic::{AtomicU32, Ordering};
        static N: AtomicU32 = AtomicU32::new(0);
        let dir = std::env::temp_dir().join(format!(
            "dragon-credentials-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("config.json");
        std::fs::write(&path, text).unwrap();
        path
    }

    #[test]
    fn each_host_gets_its_entry_and_others_are_anonymous() {
        let auth = base64::engine::general_purpose::STANDARD.encode("ci:s3cret");
        let path = write(&format!(
            r#"{{"auths": {{"https://127.0.0.1:5000/v1/": {{"auth": "{auth}"}},
                "r.example.com": {{"username": "u", "password": "p"}}}}}}"#
        ));
        let c = Credentials::from_docker_config(&path).unwrap();
        assert_eq!(
            c.for_registry("127.0.0.1:5000"),
            RegistryAuth::Basic("ci".into(), "s3cret".into())
        );
        assert_eq!(
            c.for_registry("r.example.com"),
            RegistryAuth::Basic("u".into(), "p".into())
        );
        assert_eq!(c.for_registry("other.example.com"), RegistryAuth::Anonymous);
    }

    #[test]
    fn a_bad_file_is_named_and_no_secret_is_shown() {
        let path = write(r#"{"auths": {"r.example.com": {"auth": "bm90LWEtcGFpcg=="}}}"#);
        let e = Credentials::from_docker_config(&path)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("config.json") && e.contains("r.example.com"),
            "{e}"
        );
        assert!(!e.contains("not-a-pair"), "{e}");
        let path = write("auths: []");
        let e = Credentials::from_docker_config(&path)
            .unwrap_err()
            .to_string();
        assert!(e.contains("not a docker config file"), "{e}");
    }
}
