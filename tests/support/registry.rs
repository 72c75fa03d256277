//! A real OCI registry for tests: CNCF Distribution, built from Go modules
//! by `tests/controlplane/build.sh` (with `oras`, a client Dragon did not
//! write), serving on 127.0.0.1 from a directory of its own. Included with
//! `#[path]` by the test crates that push and pull policies.

#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The directory of the built `registry` and `oras` binaries.
pub fn bin_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        // The including crate sits one or two levels below the root.
        let script = Path::new(env!("CARGO_MANIFEST_DIR"))
            .ancestors()
            .map(|dir| dir.join("tests/controlplane/build.sh"))
            .find(|script| script.is_file())
            .expect("tests/controlplane/build.sh above the crate");
        let out = Command::new(&script)
            .env("DRAGON_CONTROLPLANE_ONLY", "registry oras")
            .stderr(Stdio::inherit())
            .output()
            .expect("run tests/controlplane/build.sh");
        assert!(
            out.status.success(),
            "build.sh could not build the registry and oras"
        );
        let text = String::from_utf8(out.stdout).expect("build.sh prints a path");
        PathBuf::from(
            text.lines()
                .last()
                .expect("build.sh prints its bin directory"),
        )
    })
}

/// `oras ARGS…`, its output when it succeeds.
pub fn oras(args: &[&str], dir: &Path) -> Result<String, String> {
    let out = Command::new(bin_dir().join("oras"))
        .args(args)
        .current_dir(dir)
        .output()
        .expect("run oras");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    if out.status.success() {
        Ok(text)
    } else {
        Err(text)
    }
}

/// Who may use the registry.
pub enum Access {
    /// Anyone.
    Open,
    /// Users of an htpasswd file (bcrypt): `(user, bcrypt hash)`.
    Htpasswd(&'static str, &'static str),
}

/// A user and the bcrypt hash of [`PUSHER_PASSWORD`], for [`Access::Htpasswd`].
pub const PUSHER: (&str, &str) = (
    "pusher",
    "$2a$10$1.kVKjILDvpU/UhJfSZZZOVaSXUS6.WZNUKTnoyTCS7zqU4laozYC",
);
pub const PUSHER_PASSWORD: &str = "policy-pusher-pw";

pub struct TestRegistry {
    child: Option<Child>,
    /// `127.0.0.1:PORT`.
    pub host: String,
    pub dir: PathBuf,
}

impl TestRegistry {
    pub fn start(name: &str, access: Access) -> TestRegistry {
        TestRegistry::launch(name, access, false)
    }

    /// A registry that serves HTTPS only, with a certificate for 127.0.0.1
    /// signed by a CA of its own (made with the openssl command); the CA's
    /// PEM file is `self.dir/ca.pem`.
    pub fn start_tls(name: &str) -> TestRegistry {
        TestRegistry::launch(name, Access::Open, true)
    }

    fn launch(name: &str, access: Access, tls: bool) -> TestRegistry {
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port on 127.0.0.1")
            .port();
        let dir = std::env::temp_dir().join(format!(
            "dragon-registry-{}-{name}-{port}",
            std::process::id()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let auth = match access {
            Access::Open => String::new(),
            Access::Htpasswd(user, hash) => {
                let file = dir.join("htpasswd");
                std::fs::write(&file, format!("{user}:{hash}\n")).unwrap();
                format!(
                    "auth:\n  htpasswd:\n    realm: dragon-tests\n    path: {}\n",
                    file.display()
                )
            }
        };
        let tls = match tls {
            false => String::new(),
            true => {
                std::fs::write(
                    dir.join("leaf.ext"),
                    "subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n",
                )
                .unwrap();
                let key = "-newkey rsa:2048 -nodes -days 1";
                for step in [
                    format!("req -x509 {key} -subj /CN=dragon-tests-ca -keyout ca.key -out ca.pem"),
                    format!("req {key} -subj /CN=127.0.0.1 -keyout key.pem -out leaf.csr"),
                    "x509 -req -in leaf.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 1 \
                     -extfile leaf.ext -out cert.pem"
                        .to_string(),
                ] {
                    let made = Command::new("openssl")
                        .args(step.split_whitespace())
                        .current_dir(&dir)
                        .stdout(Stdio::null())
                        .stderr(Stdio::null())
                        .status()
                        .expect("run openssl");
                    assert!(made.success(), "openssl {step} failed");
                }
                format!(
                    "  tls:\n    certificate: {}\n    key: {}\n",
                    dir.join("cert.pem").display(),
                    dir.join("key.pem").display()
                )
            }
        };
        let config = format!(
            "version: 0.1\nlog:\n  level: warn\nstorage:\n  filesystem:\n    rootdirectory: {}\n  delete:\n    enabled: true\nhttp:\n  addr: 127.0.0.1:{port}\n{tls}{auth}",
            dir.join("data").display()
        );
        std::fs::write(dir.join("config.yml"), config).unwrap();
        let mut registry = TestRegistry {
            child: None,
            host: format!("127.0.0.1:{port}"),
            dir,
        };
        registry.resume();
        registry
    }

    /// `oci://127.0.0.1:PORT/PATH`.
    pub fn reference(&self, path: &str) -> String {
        format!("oci://{}/{path}", self.host)
    }

    /// Change one byte of the stored blob `digest` (`sha256:…`), as a disk
    /// or a proxy might: the registry serves it unchanged in size.
    pub fn corrupt_blob(&self, digest: &str) {
        let hex = digest.strip_prefix("sha256:").expect("a sha256 digest");
        let path = self
            .dir
            .join("data/docker/registry/v2/blobs/sha256")
            .join(&hex[..2])
            .join(hex)
            .join("data");
        let mut bytes = std::fs::read(&path).expect("the stored blob");
        let last = bytes.len() - 1;
        bytes[last] ^= 0xff;
        std::fs::write(&path, bytes).unwrap();
    }

    /// Stop serving (the stored content stays).
    pub fn pause(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Serve again from the same directory and port, once it answers.
    pub fn resume(&mut self) {
        let log = std::fs::File::create(self.dir.join("registry.log")).unwrap();
        let child = Command::new(bin_dir().join("registry"))
            .arg("serve")
            .arg(self.dir.join("config.yml"))
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("start the registry");
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(30);
        while !self.answers() {
            assert!(
                Instant::now() < deadline,
                "the registry on {} did not start",
                self.host
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Whether `GET /v2/` gets an HTTP answer (200, or 401 with auth on).
    fn answers(&self) -> bool {
        let Ok(mut stream) = TcpStream::connect(&self.host) else {
            return false;
        };
        let request = format!("GET /v2/ HTTP/1.0\r\nHost: {}\r\n\r\n", self.host);
        let mut head = [0u8; 12];
        stream.write_all(request.as_bytes()).is_ok()
            && stream.read_exact(&mut head).is_ok()
            && head.starts_with(b"HTTP/1.")
    }
}

impl Drop for TestRegistry {
    fn drop(&mut self) {
        self.pause();
    }
}
