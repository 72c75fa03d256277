//! `dragon policy push` and `pull` against a real registry (CNCF
//! Distribution on 127.0.0.1), and with `oras` on the other side.

#[path = "../../../tests/support/registry.rs"]
mod registry_server;

use std::path::{Path, PathBuf};
use std::process::Command;

use registry_server::{Access, PUSHER, PUSHER_PASSWORD, TestRegistry, oras};

/// `dragon ARGS…` in `dir`: (success, stdout, stderr).
fn dragon(dir: &Path, args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_dragon"))
        .args(args)
        .current_dir(dir)
        .env("DRAGON_CACHE_DIR", dir.join("cache"))
        .env("DOCKER_CONFIG", dir.join("no-docker-config"))
        .output()
        .expect("run dragon");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn workdir(name: &str) -> PathBuf {
    let dir =
        std::env::temp_dir().join(format!("dragon-registry-cli-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn bundled(name: &str) -> &'static [u8] {
    dragon_bundled::by_name(name).expect("a bundled policy")
}

#[test]
fn a_policy_pushed_by_dragon_is_pulled_by_oras_and_one_pushed_by_oras_is_pulled_by_dragon() {
    let registry = TestRegistry::start("interop", Access::Open);
    let dir = workdir("interop");
    let host = registry.host.as_str();

    // Dragon pushes; oras reads the same bytes back, named policy.wasm.
    let (ok, out, err) = dragon(
        &dir,
        &[
            "policy",
            "push",
            "dragon",
            &registry.reference("team/dragon:v1"),
            "--plain-http",
            host,
        ],
    );
    assert!(ok, "{out}{err}");
    assert!(
        out.contains("pushed dragon ") && out.contains("digest:            sha256:"),
        "{out}"
    );
    let manifest = oras(
        &[
            "manifest",
            "fetch",
            "--plain-http",
            &format!("{host}/team/dragon:v1"),
        ],
        &dir,
    )
    .unwrap();
    let manifest: serde_json::Value = serde_json::from_str(&manifest).unwrap();
    assert_eq!(
        manifest["config"]["mediaType"],
        "application/vnd.wasm.config.v0+json"
    );
    assert_eq!(manifest["layers"][0]["mediaType"], "application/wasm");
    assert_eq!(
        manifest["annotations"]["org.opencontainers.image.title"],
        "dragon"
    );
    oras(
        &[
            "pull",
            "--plain-http",
            &format!("{host}/team/dragon:v1"),
            "-o",
            "by-oras",
        ],
        &dir,
    )
    .unwrap();
    assert_eq!(
        std::fs::read(dir.join("by-oras/policy.wasm")).unwrap(),
        bundled("dragon")
    );

    // oras pushes a policy in the wasm artifact layout; Dragon pulls it,
    // checks it and writes it.
    std::fs::write(dir.join("policy.wasm"), bundled("baseline")).unwrap();
    std::fs::write(
        dir.join("config.json"),
        r#"{"created":"2026-01-01T00:00:00Z","architecture":"wasm","os":"wasip2","layerDigests":[]}"#,
    )
    .unwrap();
    oras(
        &[
            "push",
            "--plain-http",
            &format!("{host}/team/baseline:v1"),
            "--config",
            "config.json:application/vnd.wasm.config.v0+json",
            "policy.wasm:application/wasm",
        ],
        &dir,
    )
    .unwrap();
    let (ok, out, err) = dragon(
        &dir,
        &[
            "policy",
            "pull",
            &registry.reference("team/baseline:v1"),
            "--plain-http",
            host,
            "--out",
            "pulled.wasm",
        ],
    );
    assert!(ok, "{out}{err}");
    assert!(out.contains("policy:            baseline "), "{out}");
    assert_eq!(
        std::fs::read(dir.join("pulled.wasm")).unwrap(),
        bundled("baseline")
    );

    // A digest reference reads the same push forever.
    let pinned = out
        .lines()
        .find_map(|l| l.strip_prefix("source:"))
        .and_then(|s| s.split('(').nth(1))
        .map(|d| d.trim_end_matches(')').to_string())
        .expect("the source names the digest");
    let (ok, out, err) = dragon(
        &dir,
        &[
            "policy",
            "pull",
            &registry.reference(&format!("team/baseline@{pinned}")),
            "--plain-http",
            host,
            "-o",
            "pinned.wasm",
        ],
    );
    assert!(ok, "{out}{err}");
    assert_eq!(
        std::fs::read(dir.join("pinned.wasm")).unwrap(),
        bundled("baseline")
    );
}

#[test]
fn what_is_not_a_policy_is_refused_by_name_and_nothing_is_written() {
    let registry = TestRegistry::start("refusals", Access::Open);
    let dir = workdir("refusals");
    let host = registry.host.as_str();
    std::fs::write(dir.join("pulled.wasm"), b"the last good policy").unwrap();
    let pull = |what: &str| {
        let (ok, out, err) = dragon(
            &dir,
            &[
                "policy",
                "pull",
                &registry.reference(what),
                "--plain-http",
                host,
                "--out",
                "pulled.wasm",
            ],
        );
        assert!(!ok, "{what}: {out}");
        err
    };

    // Unknown tag.
    let err = pull("team/nothing:v1");
    assert!(
        err.contains("team/nothing:v1") && err.contains("not found in the registry (404)"),
        "{err}"
    );

    // An artifact without the wasm config (oras' default layout).
    std::fs::write(dir.join("policy.wasm"), bundled("dragon")).unwrap();
    oras(
        &[
            "push",
            "--plain-http",
            &format!("{host}/team/plain:v1"),
            "policy.wasm:application/wasm",
        ],
        &dir,
    )
    .unwrap();
    let err = pull("team/plain:v1");
    assert!(
        err.contains("team/plain:v1: not a policy")
            && err.contains("application/vnd.oci.empty.v1+json")
            && err.contains("application/vnd.wasm.config.v0+json"),
        "{err}"
    );

    // The wasm config, but a layer that is not a component.
    std::fs::write(dir.join("config.json"), "{}").unwrap();
    std::fs::write(dir.join("notes.txt"), "hello").unwrap();
    oras(
        &[
            "push",
            "--plain-http",
            &format!("{host}/team/notes:v1"),
            "--config",
            "config.json:application/vnd.wasm.config.v0+json",
            "notes.txt:text/plain",
        ],
        &dir,
    )
    .unwrap();
    let err = pull("team/notes:v1");
    assert!(
        err.contains("exactly one `application/wasm` layer") && err.contains("`text/plain`"),
        "{err}"
    );

    // An `application/wasm` layer that is not a policy component.
    std::fs::write(dir.join("policy.wasm"), b"\0asm\x01\0\0\0").unwrap();
    oras(
        &[
            "push",
            "--plain-http",
            &format!("{host}/team/module:v1"),
            "--config",
            "config.json:application/vnd.wasm.config.v0+json",
            "policy.wasm:application/wasm",
        ],
        &dir,
    )
    .unwrap();
    let err = pull("team/module:v1");
    assert!(
        err.contains("team/module:v1 is not a policy; nothing was written"),
        "{err}"
    );
    assert_eq!(
        std::fs::read(dir.join("pulled.wasm")).unwrap(),
        b"the last good policy"
    );

    // A file that is not a policy is never pushed.
    std::fs::write(dir.join("garbage.wasm"), b"not wasm at all").unwrap();
    let (ok, out, err) = dragon(
        &dir,
        &[
            "policy",
            "push",
            "garbage.wasm",
            &registry.reference("team/garbage:v1"),
            "--plain-http",
            host,
        ],
    );
    assert!(
        !ok && err.contains("garbage.wasm is not pushed"),
        "{out}{err}"
    );
    assert!(
        oras(
            &[
                "manifest",
                "fetch",
                "--plain-http",
                &format!("{host}/team/garbage:v1")
            ],
            &dir
        )
        .is_err()
    );

    // A reference without a registry host.
    let (ok, _, err) = dragon(&dir, &["policy", "pull", "oci://dragon:v1"]);
    assert!(!ok && err.contains("registry host"), "{err}");
}

#[test]
fn a_registry_with_auth_answers_401_to_strangers_and_serves_the_docker_config_user() {
    let (user, hash) = PUSHER;
    let registry = TestRegistry::start("auth", Access::Htpasswd(user, hash));
    let dir = workdir("auth");
    let host = registry.host.as_str();
    let reference = registry.reference("team/dragon:v1");

    let (ok, out, err) = dragon(
        &dir,
        &["policy", "push", "dragon", &reference, "--plain-http", host],
    );
    assert!(!ok, "{out}");
    assert!(
        err.contains("401 Unauthorized") && err.contains(host),
        "{err}"
    );

    use base64::Engine;
    let auth =
        base64::engine::general_purpose::STANDARD.encode(format!("{user}:{PUSHER_PASSWORD}"));
    std::fs::write(
        dir.join("docker.json"),
        format!(r#"{{"auths": {{"{host}": {{"auth": "{auth}"}}}}}}"#),
    )
    .unwrap();
    let with_auth = ["--plain-http", host, "--registry-config", "docker.json"];
    let (ok, out, err) = dragon(
        &dir,
        &[&["policy", "push", "dragon", &reference][..], &with_auth].concat(),
    );
    assert!(ok, "{out}{err}");
    let (ok, out, err) = dragon(
        &dir,
        &[
            &["policy", "pull", &reference, "-o", "p.wasm"][..],
            &with_auth,
        ]
        .concat(),
    );
    assert!(ok, "{out}{err}");
    assert_eq!(
        std::fs::read(dir.join("p.wasm")).unwrap(),
        bundled("dragon")
    );
    assert!(!err.contains(PUSHER_PASSWORD) && !out.contains(PUSHER_PASSWORD));
}

#[test]
fn tls_is_verified_and_a_private_ca_is_trusted_when_named() {
    let registry = TestRegistry::start_tls("tls");
    let dir = workdir("tls");
    let reference = registry.reference("team/dragon:v1");
    let (ok, out, err) = dragon(&dir, &["policy", "push", "dragon", &reference]);
    assert!(!ok, "{out}");
    assert!(
        err.contains("team/dragon:v1") && err.to_lowercase().contains("certificate"),
        "{err}"
    );

    let ca = registry.dir.join("ca.pem").display().to_string();
    let (ok, out, err) = dragon(
        &dir,
        &["policy", "push", "dragon", &reference, "--ca-file", &ca],
    );
    assert!(ok, "{out}{err}");
    let (ok, out, err) = dragon(
        &dir,
        &[
            "policy",
            "pull",
            &reference,
            "--ca-file",
            &ca,
            "-o",
            "p.wasm",
        ],
    );
    assert!(ok, "{out}{err}");
    assert_eq!(
        std::fs::read(dir.join("p.wasm")).unwrap(),
        bundled("dragon")
    );
}

#[test]
fn a_blob_changed_in_the_registry_or_larger_than_the_bound_is_refused() {
    use dragon_registry::{PolicyRef, Registry, RegistryOptions};
    let registry = TestRegistry::start("blobs", Access::Open);
    let dir = workdir("blobs");
    let host = registry.host.as_str();
    let (ok, out, err) = dragon(
        &dir,
        &[
            "policy",
            "push",
            "dragon",
            &registry.reference("team/dragon:v1"),
            "--plain-http",
            host,
        ],
    );
    assert!(ok, "{out}{err}");

    // More than the bound: refused from the manifest's size, before the blob.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let small = Registry::new(RegistryOptions {
        plain_http: vec![host.to_string()],
        max_bytes: 1000,
        ..RegistryOptions::default()
    })
    .unwrap();
    let reference = PolicyRef::parse(&registry.reference("team/dragon:v1")).unwrap();
    let e = runtime
        .block_on(small.pull(&reference))
        .unwrap_err()
        .to_string();
    assert!(e.contains("more than the 1000 a pull accepts"), "{e}");

    // A stored blob changed behind the registry's back.
    let layer = out
        .lines()
        .find_map(|l| l.strip_prefix("component sha256:"))
        .map(str::trim)
        .expect("push prints the component's digest");
    registry.corrupt_blob(layer);
    std::fs::write(dir.join("p.wasm"), b"the last good policy").unwrap();
    let (ok, out, err) = dragon(
        &dir,
        &[
            "policy",
            "pull",
            &registry.reference("team/dragon:v1"),
            "--plain-http",
            host,
            "-o",
            "p.wasm",
        ],
    );
    assert!(!ok, "{out}");
    assert!(
        err.contains("the blob's digest does not match") && err.contains(layer),
        "{err}"
    );
    assert_eq!(
        std::fs::read(dir.join("p.wasm")).unwrap(),
        b"the last good policy"
    );
}
