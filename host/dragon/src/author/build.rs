//! `dragon policy build`: a policy project into `policy.wasm`, with no tool
//! beyond the language's own (the component encoding runs in-process).

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{Context, Result, anyhow, bail};

#[path = "../../../bundled/wasm_build.rs"]
mod wasm_build;

/// What a project is written in, from the files at its root.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProjectKind {
    /// A crate: `Cargo.toml`.
    Rust,
}

/// The kind of project in `dir`.
///
/// # Errors
/// `dir` holds no project Dragon knows how to build.
pub fn project_kind(dir: &Path) -> Result<ProjectKind> {
    if dir.join("Cargo.toml").is_file() {
        return Ok(ProjectKind::Rust);
    }
    if !dir.is_dir() {
        bail!("{} is not a directory", dir.display());
    }
    bail!(
        "{} holds no policy project (no Cargo.toml); `dragon policy new NAME` writes one",
        dir.display()
    )
}

/// Build the project in `dir` and encode it as a component; returns the
/// component's bytes (not yet written anywhere).
///
/// # Errors
/// The toolchain is missing, the build fails (its messages went to
/// stderr), or the module is not a policy.
pub fn build(dir: &Path) -> Result<Vec<u8>> {
    match project_kind(dir)? {
        ProjectKind::Rust => {
            let module = cargo_build(dir)?;
            let bytes = std::fs::read(&module)
                .with_context(|| format!("cannot read {}", module.display()))?;
            wasm_build::encode(&bytes).map_err(|e| {
                anyhow!(
                    "{} is not a policy module: {e} (does the crate call `export_policy!`?)",
                    module.display()
                )
            })
        }
    }
}

/// `cargo build --release` for the wasm target; the path of the crate's
/// cdylib module.
fn cargo_build(dir: &Path) -> Result<PathBuf> {
    wasm_build::ensure_target(dir).map_err(|e| anyhow!(e))?;
    let manifest = dir
        .join("Cargo.toml")
        .canonicalize()
        .with_context(|| format!("cannot read {}/Cargo.toml", dir.display()))?;
    let mut child = Command::new("cargo")
        .current_dir(dir)
        .args([
            "build",
            "--release",
            "--lib",
            "--target",
            wasm_build::TARGET,
        ])
        .arg("--message-format=json-render-diagnostics")
        .arg("--manifest-path")
        .arg(&manifest)
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => anyhow!(
                "cannot run cargo: it is not on PATH (install Rust with rustup: https://rustup.rs)"
            ),
            _ => anyhow!("cannot run cargo: {e}"),
        })?;
    let stdout = child.stdout.take().context("cargo's output")?;
    let mut module = None;
    for line in BufReader::new(stdout).lines() {
        let line = line.context("reading cargo's output")?;
        let Ok(message) = serde_json::from_str::<Artifact>(&line) else {
            continue;
        };
        if message.reason == "compiler-artifact"
            && message.manifest_path.as_deref() == Some(manifest.as_path())
            && message.target.kind.iter().any(|k| k == "cdylib")
        {
            module = message
                .filenames
                .into_iter()
                .find(|f| f.extension().is_some_and(|e| e == "wasm"));
        }
    }
    let status = child.wait().context("waiting for cargo")?;
    if !status.success() {
        bail!(
            "cargo build failed in {} (the compiler's messages are above): fix them and run `dragon policy build` again",
            dir.display()
        );
    }
    module.with_context(|| {
        format!(
            "{} builds no wasm module: its [lib] needs crate-type = [\"rlib\", \"cdylib\"]",
            manifest.display()
        )
    })
}

/// The parts of cargo's JSON messages the build reads.
#[derive(Debug, serde::Deserialize)]
struct Artifact {
    reason: String,
    #[serde(default)]
    manifest_path: Option<PathBuf>,
    #[serde(default)]
    target: ArtifactTarget,
    #[serde(default)]
    filenames: Vec<PathBuf>,
}

#[derive(Debug, Default, serde::Deserialize)]
struct ArtifactTarget {
    #[serde(default)]
    kind: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_directory_without_a_project_is_named() {
        let err = project_kind(Path::new(env!("CARGO_MANIFEST_DIR")).join("src").as_path())
            .unwrap_err()
            .to_string();
        assert!(err.contains("holds no policy project"), "{err}");
        let err = project_kind(Path::new("/nonexistent/dir"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("is not a directory"), "{err}");
    }
}
